/* The HTML report (`icx-analyze --html FILE`, docs/HTML.md): one self-contained page -- inline
 * CSS, inline SVG written here, a few lines of script for sorting tables; nothing fetched.  Built
 * from the computed analysis.  Every string from a trace goes through icx_html_esc: a trace is
 * untrusted input. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "export.h"
#include "html_svg.h"
#include "nccl_model.h"
#include "report_links.h"
#include "verbs_model.h"

#define E(s) icx_html_esc(out, s)

static const char *const kind_order[] = {
    "hang",          "rdma_completion_error", "nic_degraded", "straggler", "rail_misalignment",
    "nic_imbalance", "numa_misaffinity"};

static const char *anchor_of(const char *kind)
{
    if (!strcmp(kind, "straggler"))
        return "lateness";
    if (!strcmp(kind, "hang"))
        return "hang";
    if (!strncmp(kind, "nic_", 4) || !strcmp(kind, "rdma_completion_error"))
        return "network";
    return "paths";
}

static const char *path_text(double v)
{
    return icx_pci_path_name((unsigned)v);
}

static void head(FILE *out, const struct icx_trace *t)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">\n<title>",
          out);
    fputs("icxtrace report: ", out);
    E(t->nprocs ? t->procs[0]->host : "");
    fputs(
        "</title>\n<style>\n"
        "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}\n"
        "h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ccc}\n"
        "table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ddd;padding:3px "
        "7px;text-align:left;vertical-align:top}th{background:#f3f3f3;cursor:pointer}\n"
        "td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
        ".finding{border-left:4px solid #c0392b;padding:4px 10px;margin:8px 0;background:#fdf2f2}\n"
        ".ok{border-left:4px solid #27ae60;padding:4px 10px;background:#f2fdf5}\n"
        ".chart{display:block;margin:6px 0}.lab{font-size:11px;fill:#333}"
        ".cell{font-size:9px;fill:#000;pointer-events:none}\n"
        "rect.none{fill:#eee}rect.mark{stroke:#e67e22;stroke-width:3}"
        "rect.frame{fill:none;stroke:#999}\n"
        ".sim{background:#fff3cd;padding:4px 10px}code{background:#f4f4f4}\n"
        "</style></head><body>\n",
        out);
}

static void tail(FILE *out)
{
    /* sort a table by a clicked column (numbers numerically) */
    fputs("<script>\n"
          "document.querySelectorAll('table.sort th').forEach(function(th,i){th.onclick="
          "function(){var tb=th.closest('table').tBodies[0],rows=[].slice.call(tb.rows),"
          "d=th.dataset.d==='1'?-1:1;th.dataset.d=d===1?'1':'0';rows.sort(function(a,b){"
          "var x=a.cells[i].textContent,y=b.cells[i].textContent,p=parseFloat(x),q=parseFloat(y);"
          "return d*(isNaN(p)||isNaN(q)?x.localeCompare(y):p-q)});rows.forEach(function(r){"
          "tb.appendChild(r)})}});\n</script>\n</body></html>\n",
          out);
}

static int simulated(const struct icx_trace *t)
{
    for (size_t q = 0; q < t->nprocs; q++)
        for (int d = 0; d < ICX_RD_MAX_DEV; d++)
            if (t->procs[q]->dev[d].present && strstr(t->procs[q]->dev[d].name, "simulated"))
                return 1;
    return 0;
}

static void job(FILE *out, const struct icx_trace *t)
{
    int ranks = 0, hosts = 0, complete = 0;
    double span = 0;
    uint64_t lost[ICX_LOST_SLOTS] = {0};
    for (size_t q = 0; q < t->nprocs; q++) {
        const struct icx_proc *p = t->procs[q];
        ranks += p->rank >= 0;
        complete += icx_proc_complete(p);
        span = fmax(span, p->t_last - p->t_first);
        int first = 1;
        for (size_t r = 0; r < q && first; r++)
            first = strcmp(t->procs[r]->host ? t->procs[r]->host : "", p->host ? p->host : "");
        hosts += first != 0;
        for (unsigned c = 0; c < ICX_LOST_SLOTS; c++)
            lost[c] += p->lost[c];
    }
    fputs("<h1>icxtrace report</h1>\n", out);
    if (simulated(t))
        fputs("<p class=\"sim\">These traces come from <b>simulated</b> hardware (the devices "
              "say so): numbers show what the tracer and analyzer do, not a real machine's "
              "speed.</p>\n",
              out);
    fprintf(out,
            "<p>%zu processes, %d ranks on %d hosts; the longest trace covers %.3f s; %d of "
            "%zu traces complete (ended with a final frame)",
            t->nprocs, ranks, hosts, span, complete, t->nprocs);
    int any = 0;
    for (unsigned c = 0; c < ICX_LOST_SLOTS; c++)
        if (lost[c]) {
            fprintf(out, "%s%s %llu",
                    any++ ? ", " : "; events lost: ", icx_lost_name(c) ? icx_lost_name(c) : "other",
                    (unsigned long long)lost[c]);
        }
    fputs(any ? ".</p>\n" : "; no events lost.</p>\n", out);
    fputs("<details><summary>Every trace</summary><table class=\"sort\"><thead><tr><th>host</th>"
          "<th>rank</th><th>pid</th><th>complete</th><th>events</th><th>lost</th><th>command "
          "line</th></tr></thead><tbody>\n",
          out);
    for (size_t q = 0; q < t->nprocs; q++) {
        const struct icx_proc *p = t->procs[q];
        uint64_t l = 0;
        for (unsigned c = 0; c < ICX_LOST_SLOTS; c++)
            l += p->lost[c];
        fputs("<tr><td>", out);
        E(p->host);
        fprintf(out,
                "</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td>%s</td><td "
                "class=\"n\">%llu</td><td class=\"n\">%llu</td><td><code>",
                p->rank, p->pid, p->ended ? "yes" : "no (killed?)",
                (unsigned long long)p->events_recorded, (unsigned long long)l);
        E(p->cmdline);
        fputs("</code></td></tr>\n", out);
    }
    fputs("</tbody></table></details>\n", out);
}

static void findings(FILE *out, const struct icx_analysis *A)
{
    const struct icx_findings *F = &A->findings;
    fputs("<h2 id=\"findings\">Findings</h2>\n", out);
    if (!F->n)
        fputs("<p class=\"ok\">No finding: no rule of docs/FINDINGS.md fired.</p>\n", out);
    else
        fputs("<p>Ordered by kind, from what stops a job to what slows it (hang, errors, a "
              "degraded NIC, a straggler, rails, NUMA); rules and thresholds: "
              "docs/FINDINGS.md.</p>\n",
              out);
    size_t nk = sizeof(kind_order) / sizeof(kind_order[0]);
    for (size_t k = 0; k <= nk; k++)
        for (size_t i = 0; i < F->n; i++) {
            const struct icx_finding *f = &F->v[i];
            int known = 0;
            for (size_t x = 0; x < nk; x++)
                known |= !strcmp(f->kind, kind_order[x]);
            if (k < nk ? strcmp(f->kind, kind_order[k]) != 0 : known)
                continue;
            fputs("<div class=\"finding\"><b>", out);
            E(f->kind);
            fputs("</b> on ", out);
            E(f->host[0] ? f->host : "the job");
            if (f->rank >= 0)
                fprintf(out, ", rank %d", f->rank);
            if (isfinite(f->confidence))
                fprintf(out, " (confidence %.4g %%)", 100 * f->confidence);
            fputs("<br>", out);
            E(f->evidence);
            fputs("<br><i>fix:</i> ", out);
            E(f->fix);
            fprintf(out, " &nbsp;<a href=\"#%s\">chart</a></div>\n", anchor_of(f->kind));
        }
}

static void gpu_heatmaps(FILE *out, const struct icx_analysis *A, struct icx_labels *L)
{
    const struct icx_links *K = A->links;
    fputs("<h2 id=\"gpus\">GPU to GPU (NVLink / PCIe peer copies)</h2>\n", out);
    if (!K || !K->n) {
        fputs("<p>No peer copies were traced.</p>\n", out);
        return;
    }
    for (size_t i = 0; i < K->n; i++) {
        const char *host = K->rows[i].host;
        int first = 1, nd = 0;
        for (size_t k = 0; k < i; k++)
            first &= strcmp(K->rows[k].host, host) != 0;
        if (!first)
            continue;
        for (size_t k = i; k < K->n; k++)
            if (!strcmp(K->rows[k].host, host)) {
                nd = K->rows[k].src + 1 > nd ? K->rows[k].src + 1 : nd;
                nd = K->rows[k].dst + 1 > nd ? K->rows[k].dst + 1 : nd;
            }
        if (nd > 64)
            nd = 64;
        double *b = malloc(sizeof(double) * (size_t)(nd * nd)),
               *u = malloc(sizeof(double) * (size_t)(nd * nd));
        const char **names = malloc(sizeof(char *) * (size_t)nd);
        if (!b || !u || !names) {
            free(b);
            free(u);
            free(names);
            return;
        }
        for (int x = 0; x < nd * nd; x++)
            b[x] = u[x] = NAN;
        for (int d = 0; d < nd; d++) {
            char buf[16];
            snprintf(buf, sizeof(buf), "GPU %d", d);
            names[d] = icx_label(L, buf);
        }
        for (size_t k = i; k < K->n; k++) {
            const struct icx_link_row *r = &K->rows[k];
            if (strcmp(r->host, host) || r->src >= nd || r->dst >= nd || r->src < 0 || r->dst < 0)
                continue;
            b[r->src * nd + r->dst] = (double)r->bytes;
            u[r->src * nd + r->dst] = 100 * r->utilization;
        }
        icx_html_h3(out, host, ": bytes copied (row: source, column: destination)");
        char id[32];
        snprintf(id, sizeof(id), "gb%zu", i);
        struct icx_heatmap h = {.id = id,
                                .nr = nd,
                                .nc = nd,
                                .row = names,
                                .col = names,
                                .v = b,
                                .unit = "B",
                                .legend = "bytes copied",
                                .lo_zero = 1};
        icx_html_heatmap(out, &h);
        icx_html_h3(out, host, ": link utilization over the copies' window (%)");
        snprintf(id, sizeof(id), "gu%zu", i);
        h.id = id;
        h.v = u;
        h.unit = "%";
        h.legend = "utilization, % of the link's capacity";
        icx_html_heatmap(out, &h);
        free(b);
        free(u);
        free(names);
    }
}

static int index_of(const char **v, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return i;
    return -1;
}

static void network(FILE *out, const struct icx_analysis *A, struct icx_labels *L)
{
    const struct icx_verbs *V = A->verbs;
    fputs("<h2 id=\"network\">Network (InfiniBand / RoCE)</h2>\n", out);
    if (!V || !V->nnics) {
        fputs("<p>No RDMA traffic was traced.</p>\n", out);
        return;
    }
    /* node x node from the pairs, NIC x NIC from matched QPs */
    enum { MAXN = 64 };
    const char *hn[MAXN], *nn[MAXN];
    int nh = 0, nnic = 0;
    double hb[MAXN * MAXN], nb[MAXN * MAXN];
    for (int x = 0; x < MAXN * MAXN; x++)
        hb[x] = nb[x] = NAN;
    for (size_t i = 0; i < V->npairs; i++) {
        const char *h2[2] = {V->pairs[i].src, V->pairs[i].dst};
        int ix[2];
        for (int k = 0; k < 2; k++) {
            ix[k] = index_of(hn, nh, h2[k]);
            if (ix[k] < 0 && nh < MAXN) {
                hn[nh] = h2[k];
                ix[k] = nh++;
            }
        }
        if (ix[0] >= 0 && ix[1] >= 0 && V->pairs[i].bytes)
            hb[ix[0] * MAXN + ix[1]] =
                (isfinite(hb[ix[0] * MAXN + ix[1]]) ? hb[ix[0] * MAXN + ix[1]] : 0) +
                (double)V->pairs[i].bytes;
    }
    for (size_t q = 0; q < V->nqps; q++) {
        const struct vqp_row *r = &V->qps[q];
        if (r->peer < 0 || !r->out_bytes || r->ctx >= ICX_RD_MAX_VCTX ||
            V->qps[r->peer].ctx >= ICX_RD_MAX_VCTX)
            continue;
        const struct vqp_row *s = &V->qps[r->peer];
        char ba[200], bb[200];
        snprintf(ba, sizeof(ba), "%s %s", icx_verbs_host(r->p), r->p->vctx[r->ctx].name);
        snprintf(bb, sizeof(bb), "%s %s", icx_verbs_host(s->p), s->p->vctx[s->ctx].name);
        int ia = index_of(nn, nnic, ba);
        if (ia < 0 && nnic < MAXN)
            nn[ia = nnic++] = icx_label(L, ba);
        int ib = index_of(nn, nnic, bb);
        if (ib < 0 && nnic < MAXN)
            nn[ib = nnic++] = icx_label(L, bb);
        if (ia >= 0 && ib >= 0)
            nb[ia * MAXN + ib] =
                (isfinite(nb[ia * MAXN + ib]) ? nb[ia * MAXN + ib] : 0) + (double)r->out_bytes;
    }
    double *hm = malloc(sizeof(double) * (size_t)(nh * nh + 1)),
           *nm = malloc(sizeof(double) * (size_t)(nnic * nnic + 1));
    for (int x = 0; hm && x < nh * nh; x++)
        hm[x] = hb[(x / nh) * MAXN + x % nh];
    for (int x = 0; nm && x < nnic * nnic; x++)
        nm[x] = nb[(x / nnic) * MAXN + x % nnic];
    if (hm && nh) {
        fputs("<h3>Node to node: bytes sent (row: sender)</h3>\n", out);
        struct icx_heatmap h = {.id = "hh",
                                .nr = nh,
                                .nc = nh,
                                .row = hn,
                                .col = hn,
                                .v = hm,
                                .unit = "B",
                                .legend = "bytes sent",
                                .lo_zero = 1};
        icx_html_heatmap(out, &h);
    }
    if (nm && nnic) {
        fputs("<h3>NIC to NIC: bytes sent over matched queue pairs (row: sender)</h3>\n", out);
        struct icx_heatmap h = {.id = "nn",
                                .nr = nnic,
                                .nc = nnic,
                                .row = nn,
                                .col = nn,
                                .v = nm,
                                .unit = "B",
                                .legend = "bytes sent",
                                .lo_zero = 1};
        icx_html_heatmap(out, &h);
    }
    free(hm);
    free(nm);
    fputs("<table class=\"sort\"><thead><tr><th>host</th><th>NIC</th><th>port Gb/s</th><th>tx "
          "bytes</th><th>rx bytes</th><th>work requests</th><th>rail</th></tr></thead><tbody>\n",
          out);
    for (size_t i = 0; i < V->nnics; i++) {
        const struct vnic *x = &V->nics[i];
        if (!x->opened && !x->tx_bytes && !x->rx_bytes)
            continue;
        fputs("<tr><td>", out);
        E(x->host);
        fputs("</td><td>", out);
        E(x->name);
        fprintf(out,
                "</td><td class=\"n\">%.0f</td><td class=\"n\">%llu</td><td "
                "class=\"n\">%llu</td><td class=\"n\">%llu</td><td>%s</td></tr>\n",
                x->port_rate_mbps / 1e3, (unsigned long long)x->tx_bytes,
                (unsigned long long)x->rx_bytes, (unsigned long long)x->wrs,
                x->rail ? "yes" : "no");
    }
    fputs("</tbody></table>\n", out);
}

/* Does a finding of kind name this rank? */
static int flagged(const struct icx_findings *F, const char *kind, int rank)
{
    for (size_t i = 0; i < F->n; i++)
        if (!strcmp(F->v[i].kind, kind) && F->v[i].rank == rank && rank >= 0)
            return 1;
    return 0;
}

/* One row per GPU of a host (by PCI address, from whichever process described it), one column
 * per NIC name; the cell is the GPU's PCIe path class to the NIC. */
struct prow {
    const struct icx_proc *p; /* the process that described it */
    int dev;
    char label[96];
};

static void paths(FILE *out, const struct icx_analysis *A, struct icx_labels *L)
{
    const struct icx_trace *t = A->t;
    fputs("<h2 id=\"paths\">GPU to NIC paths (PCIe path class)</h2>\n<p>PIX &lt; PXB &lt; PHB "
          "&lt; NODE &lt; SYS (nvidia-smi topo's classes).  Outlined: the NIC a rank's RDMA "
          "traffic left through when a rule found it misaligned; row labels name the ranks that "
          "drive each GPU and say which are MISALIGNED (rails) or MISPLACED (NUMA).</p>\n",
          out);
    enum { MAXR = 64 };
    for (size_t q = 0; q < t->nprocs; q++) {
        const char *host = t->procs[q]->host ? t->procs[q]->host : "";
        int first = 1;
        for (size_t r = 0; r < q && first; r++)
            first = strcmp(t->procs[r]->host ? t->procs[r]->host : "", host) != 0;
        if (!first)
            continue;
        struct prow rows[MAXR];
        const char *cols[ICX_RD_MAX_NICS];
        int ng = 0, nn = 0;
        for (size_t r = q; r < t->nprocs; r++) {
            const struct icx_proc *x = t->procs[r];
            if (strcmp(x->host ? x->host : "", host))
                continue;
            for (int k = 0; k < ICX_RD_MAX_NICS; k++)
                if (x->nics[k].present && index_of(cols, nn, x->nics[k].name) < 0)
                    cols[nn++] = x->nics[k].name;
            for (int d = 0; d < ICX_RD_MAX_DEV && ng < MAXR; d++) {
                int known = !x->dev[d].present;
                for (int g = 0; g < ng && !known; g++)
                    known = !strcmp(rows[g].p->dev[rows[g].dev].bus, x->dev[d].bus);
                if (!known)
                    rows[ng++] = (struct prow){x, d, ""};
            }
        }
        if (!ng || !nn)
            continue;
        double *v = malloc(sizeof(double) * (size_t)(ng * nn));
        unsigned char *mark = calloc((size_t)(ng * nn), 1);
        const char **rl = malloc(sizeof(char *) * (size_t)ng);
        if (!v || !mark || !rl) {
            free(v);
            free(mark);
            free(rl);
            return;
        }
        for (int g = 0; g < ng; g++) {
            const struct icx_proc *dp = rows[g].p;
            size_t o = (size_t)snprintf(rows[g].label, sizeof(rows[g].label), "GPU %s",
                                        dp->dev[rows[g].dev].bus);
            for (int c = 0; c < ng * nn && c < nn; c++)
                v[g * nn + c] = NAN;
            for (int c = 0; c < nn; c++)
                for (int k = 0; k < ICX_RD_MAX_NICS; k++)
                    if (dp->nics[k].present && !strcmp(dp->nics[k].name, cols[c]))
                        v[g * nn + c] =
                            dp->nics[k].path[rows[g].dev] ? dp->nics[k].path[rows[g].dev] : NAN;
            for (size_t r = q; r < t->nprocs; r++) { /* the ranks driving it */
                const struct icx_proc *x = t->procs[r];
                int gx = icx_verbs_primary_gpu(x);
                if (strcmp(x->host ? x->host : "", host) || gx < 0 ||
                    strcmp(x->dev[gx].bus, dp->dev[rows[g].dev].bus))
                    continue;
                int mis = flagged(&A->findings, "rail_misalignment", x->rank),
                    numa = flagged(&A->findings, "numa_misaffinity", x->rank);
                if (o + 40 < sizeof(rows[g].label))
                    o += (size_t)snprintf(rows[g].label + o, sizeof(rows[g].label) - o,
                                          " rank %d%s%s", x->rank, mis ? " MISALIGNED" : "",
                                          numa ? " MISPLACED" : "");
                for (int c = 0; mis && c < nn; c++)
                    for (size_t k = 0; k < x->nvtraffic; k++)
                        if (x->vtraffic[k].ctx < ICX_RD_MAX_VCTX &&
                            !strcmp(x->vctx[x->vtraffic[k].ctx].name, cols[c]))
                            mark[g * nn + c] = 1;
            }
            rl[g] = icx_label(L, rows[g].label);
        }
        icx_html_h3(out, host, "");
        char id[32];
        snprintf(id, sizeof(id), "pc%zu", q);
        struct icx_heatmap h = {.id = id,
                                .nr = ng,
                                .nc = nn,
                                .row = rl,
                                .col = cols,
                                .v = v,
                                .unit = "",
                                .legend = "light: close (PIX), dark: far (SYS)",
                                .cell_text = path_text,
                                .mark = mark,
                                .mark_text = "this rank's traffic went here: misaligned"};
        icx_html_heatmap(out, &h);
        free(v);
        free(mark);
        free(rl);
    }
}

int icx_export_html(FILE *out, const struct icx_analysis *A)
{
    return icx_export_html_with(out, A, NULL, NULL);
}

int icx_export_html_with(FILE *out, const struct icx_analysis *A,
                         void (*section)(FILE *out, const void *arg), const void *arg)
{
    struct icx_labels L = {0};
    head(out, A->t);
    job(out, A->t);
    if (section)
        section(out, arg);
    findings(out, A);
    icx_html_nccl(out, A, &L);
    for (size_t i = 0; i < icx_nreports; i++)
        if (icx_reports[i]->html)
            icx_reports[i]->html(out, A);
    gpu_heatmaps(out, A, &L);
    network(out, A, &L);
    paths(out, A, &L);
    icx_html_time(out, A, &L);
    fputs("<p><small>Written by icx-analyze --html: one file, no network access; exact values "
          "on hover.</small></p>\n",
          out);
    tail(out);
    free(L.s);
    return ferror(out) ? -1 : 0;
}
