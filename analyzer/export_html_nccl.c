/* The HTML report's sections over communicators and time (export_html.c has the page): the
 * per-communicator table against link capacity, each communicator's arrival lateness per rank
 * and instance, the last sequence number each rank reached when a job hung, and counters and
 * traced NIC bytes over time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "html_svg.h"
#include "nccl_model.h"
#include "verbs_model.h"

#define E(s) icx_html_esc(out, s)
#define MAXCOLS 120 /* instances shown per communicator: the last ones */

/* The slowest link class a communicator crosses, B/s per GPU, with its name; 0 unknown. */
static double capacity(const struct icx_trace *t, uint64_t id, char *what, size_t n)
{
    const char *host0 = NULL;
    int hosts = 0;
    double nic = INFINITY, nvl = INFINITY;
    for (size_t q = 0; q < t->nprocs; q++) {
        const struct icx_proc *p = t->procs[q];
        int in = 0, dev = -1;
        for (size_t k = 0; k < p->nncomms; k++)
            if (p->ncomms[k].comm_id == id) {
                in = 1;
                dev = p->ncomms[k].device;
            }
        if (!in)
            continue;
        if (dev < 0) /* the creation did not say: the GPU it drives */
            dev = icx_verbs_primary_gpu(p);
        const char *h = p->host ? p->host : "";
        if (!host0) {
            host0 = h;
            hosts = 1;
        } else if (strcmp(host0, h))
            hosts = 2;
        unsigned best = 0;
        double rate = 0;
        for (int k = 0; dev >= 0 && dev < ICX_RD_MAX_DEV && k < ICX_RD_MAX_NICS; k++)
            if (p->nics[k].present && p->nics[k].path[dev] &&
                (!best || p->nics[k].path[dev] < best)) {
                best = p->nics[k].path[dev];
                rate = p->nics[k].rate_mbps * 1e6 / 8;
            }
        if (rate > 0)
            nic = fmin(nic, rate);
        for (size_t k = 0; k < p->nlinks; k++)
            if (p->links[k].src == dev && p->links[k].capacity_bps > 0)
                nvl = fmin(nvl, (double)p->links[k].capacity_bps);
    }
    if (hosts > 1 && isfinite(nic)) {
        snprintf(what, n, "NIC %.0f Gb/s", nic * 8 / 1e9);
        return nic;
    }
    if (hosts == 1 && isfinite(nvl)) {
        snprintf(what, n, "GPU link %.0f GB/s", nvl / 1e9);
        return nvl;
    }
    snprintf(what, n, "?");
    return 0;
}

/* v in fmt, or a dash where there is no value (send/recv have no instance time) */
static void num(char *buf, size_t n, const char *fmt, double v)
{
    if (isfinite(v))
        snprintf(buf, n, fmt, v);
    else
        snprintf(buf, n, "\xe2\x80\x93");
}

static void comm_table(FILE *out, const struct icx_analysis *A)
{
    const struct icx_nccl *N = A->nccl;
    fputs("<h2 id=\"communicators\">Communicators</h2>\n<p>busbw as nccl-tests defines it, over "
          "the median instance; capacity: the slowest link class the communicator crosses per "
          "GPU -- the GPU's closest NIC between hosts, its GPU links inside one (an "
          "approximation: NCCL's rings use several NICs and channels).</p>\n"
          "<table class=\"sort\"><thead><tr><th>communicator</th><th>ranks</th><th>op</th>"
          "<th>calls</th><th>bytes</th><th>median instance ms</th><th>algbw GB/s</th><th>busbw "
          "GB/s</th><th>capacity</th><th>busbw / capacity</th></tr></thead><tbody>\n",
          out);
    for (size_t c = 0; N && c < N->n; c++) {
        const struct comm *x = &N->v[c];
        char what[64];
        double cap = capacity(A->t, x->id, what, sizeof(what));
        for (int o = 0; o < NOPS; o++) {
            const struct opstat *s = &x->op[o];
            if (!s->calls)
                continue;
            char p50[32], alg[32], bus[32], share[32];
            num(p50, sizeof(p50), "%.3f", s->p50 * 1e3);
            num(alg, sizeof(alg), "%.3g", s->algbw / 1e9);
            num(bus, sizeof(bus), "%.3g", s->busbw / 1e9);
            num(share, sizeof(share), "%.1f %%", cap > 0 ? 100 * s->busbw / cap : NAN);
            fprintf(out,
                    "<tr><td>%016llx</td><td class=\"n\">%d</td><td>%s</td><td "
                    "class=\"n\">%llu</td><td class=\"n\">%llu</td><td class=\"n\">%s</td><td "
                    "class=\"n\">%s</td><td class=\"n\">%s</td><td>%s</td><td "
                    "class=\"n\">%s</td></tr>\n",
                    (unsigned long long)x->id, x->nranks, icx_nccl_op_names[o],
                    (unsigned long long)s->calls, (unsigned long long)s->bytes, p50, alg, bus, what,
                    share);
        }
    }
    fputs("</tbody></table>\n", out);
}

/* Each communicator's instances, ranks by arrival lateness: a straggler is one dark row. */
static void lateness(FILE *out, const struct icx_analysis *A, struct icx_labels *L)
{
    const struct icx_nccl *N = A->nccl;
    fputs("<h2 id=\"lateness\">Arrivals per communicator</h2>\n<p>Each cell: how long after the "
          "instance's first rank this rank arrived (ms, on the aligned clock).  A straggler is a "
          "row that is dark across the instances.</p>\n",
          out);
    size_t n = 0;
    struct call *v = icx_nccl_collect(A->t, &n);
    if (!N || !v || !n) {
        fputs("<p>No NCCL collectives were traced.</p>\n", out);
        free(v);
        return;
    }
    for (size_t k = 0; k < n; k++) /* as the clock alignment corrected them */
        for (size_t q = 0; q < N->nclk; q++)
            if (N->clk[q].p == v[k].p)
                v[k].enter -= N->clk[q].offset;
    qsort(v, n, sizeof(*v), icx_nccl_call_cmp);
    for (size_t c = 0; c < N->n; c++) {
        const struct comm *x = &N->v[c];
        int nr = x->nranks;
        size_t ninst = 0;
        for (size_t i = 0; i < n;) {
            size_t j = icx_nccl_instance_end(v, n, i);
            ninst += v[i].comm_id == x->id && v[i].op < 8 && j - i == (size_t)nr;
            i = j;
        }
        if (nr < 2 || nr > 512 || ninst < 1)
            continue;
        int nc = ninst > MAXCOLS ? MAXCOLS : (int)ninst;
        size_t skip = ninst - (size_t)nc, seen = 0;
        double *m = malloc(sizeof(double) * (size_t)(nr * nc));
        const char **rows = malloc(sizeof(char *) * (size_t)nr),
                   **cols = malloc(sizeof(char *) * (size_t)nc);
        if (!m || !rows || !cols) {
            free(m);
            free(rows);
            free(cols);
            break;
        }
        for (int z = 0; z < nr * nc; z++)
            m[z] = NAN;
        for (int r = 0; r < nr; r++)
            rows[r] = "?";
        int col = 0;
        for (size_t i = 0; i < n;) {
            size_t j = icx_nccl_instance_end(v, n, i);
            if (v[i].comm_id == x->id && v[i].op < 8 && j - i == (size_t)nr && seen++ >= skip) {
                double first = INFINITY;
                for (size_t k = i; k < j; k++)
                    first = fmin(first, v[k].enter);
                char buf[64];
                snprintf(buf, sizeof(buf), "%s #%llu", icx_nccl_op_names[v[i].op],
                         (unsigned long long)v[i].seq);
                cols[col] = icx_label(L, buf);
                for (size_t k = i; k < j; k++)
                    if (v[k].rank >= 0 && v[k].rank < nr) {
                        m[v[k].rank * nc + col] = (v[k].enter - first) * 1e3;
                        if (!strcmp(rows[v[k].rank], "?")) {
                            char rb[160];
                            snprintf(rb, sizeof(rb), "rank %d (global %d, %s)", v[k].rank,
                                     v[k].p->rank, v[k].p->host ? v[k].p->host : "?");
                            rows[v[k].rank] = icx_label(L, rb);
                        }
                    }
                col++;
            }
            i = j;
        }
        fprintf(out, "<h3>Communicator %016llx, %d ranks: %s</h3>\n", (unsigned long long)x->id, nr,
                x->arrivals.verdict ? x->arrivals.verdict : "");
        char id[32];
        snprintf(id, sizeof(id), "la%zu", c);
        struct icx_heatmap h = {.id = id,
                                .nr = nr,
                                .nc = col,
                                .row = rows,
                                .col = cols,
                                .v = m,
                                .unit = "ms",
                                .legend = "ms after the first rank",
                                .lo_zero = 1};
        icx_html_heatmap(out, &h);
        free(m);
        free(rows);
        free(cols);
    }
    free(v);
}

static void hang(FILE *out, const struct icx_analysis *A)
{
    const struct icx_nccl *N = A->nccl;
    const struct icx_trace *t = A->t;
    fputs("<h2 id=\"hang\">Hung or killed: how far each rank got</h2>\n", out);
    int any = 0;
    for (size_t c = 0; N && c < N->n; c++) {
        const struct comm *x = &N->v[c];
        if (!x->stuck.nwaiting)
            continue;
        any = 1;
        fprintf(out,
                "<h3>Communicator %016llx: %d ranks wait in %s #%llu, %d never issued it</h3>\n"
                "<table class=\"sort\"><thead><tr><th>rank</th><th>host</th><th>last sequence "
                "number it entered here</th><th>state</th></tr></thead><tbody>\n",
                (unsigned long long)x->id, x->stuck.nwaiting, icx_nccl_op_names[x->stuck.op],
                (unsigned long long)x->stuck.seq, x->stuck.nmissing);
        for (size_t q = 0; q < t->nprocs; q++) {
            const struct icx_proc *p = t->procs[q];
            long long last = -1;
            int rank = -1;
            for (size_t k = 0; k < p->nncalls; k++) {
                const struct icx_rd_ncall *call = &p->ncalls[k];
                const struct icx_rd_ncomm *cm = icx_nccl_comm_of(p, call->comm, call->t_enter);
                if (!cm || cm->comm_id != x->id || icx_nccl_op_of(call->api) >= 10)
                    continue;
                rank = cm->rank;
                last = (long long)call->seq > last ? (long long)call->seq : last;
            }
            if (rank < 0)
                continue;
            const char *state = "";
            for (int w = 0; w < x->stuck.nwaiting; w++)
                state = x->stuck.waiting[w] == rank ? "waiting in it" : state;
            for (int w = 0; w < x->stuck.nmissing; w++)
                state = x->stuck.missing[w] == rank ? "NEVER ISSUED IT" : state;
            fprintf(out, "<tr><td class=\"n\">%d</td><td>", rank);
            E(p->host);
            fprintf(out, "</td><td class=\"n\">%lld</td><td>%s</td></tr>\n", last, state);
        }
        fputs("</tbody></table>\n", out);
    }
    if (!any)
        fputs("<p class=\"ok\">No communicator had ranks waiting when the traces ended.</p>\n",
              out);
}

void icx_html_nccl(FILE *out, const struct icx_analysis *A, struct icx_labels *L)
{
    comm_table(out, A);
    lateness(out, A, L);
    hang(out, A);
}

/* Counter rates per host over time: NVLink (nic 0) or IB (nic 1), tx bytes/s per device. */
static void counter_chart(FILE *out, const struct icx_proc *p, int nic, const char *title)
{
    struct icx_series s[64];
    double *buf[64];
    int ns = 0;
    double t0 = INFINITY;
    int util = nic; /* IB ports carry their rate: utilization where every sample has it */
    for (size_t k = 0; k < p->ncsamples; k++) {
        t0 = fmin(t0, p->csamples[k].t);
        if (p->csamples[k].nic == nic && !p->csamples[k].rate_mbps)
            util = 0;
    }
    for (size_t k = 0; k < p->ncsamples && ns < 64; k++) {
        const struct icx_counter_sample *x = &p->csamples[k];
        int known = x->nic != nic;
        for (int z = 0; z < ns && !known; z++)
            known = !strcmp(s[z].name, x->bus);
        if (known)
            continue;
        size_t m = 0;
        for (size_t i = k; i < p->ncsamples; i++)
            m += p->csamples[i].nic == nic && !strcmp(p->csamples[i].bus, x->bus);
        buf[ns] = malloc(sizeof(double) * 2 * (m + 1));
        if (!buf[ns])
            break;
        size_t o = 0;
        const struct icx_counter_sample *prev = NULL;
        for (size_t i = k; i < p->ncsamples; i++) {
            const struct icx_counter_sample *y = &p->csamples[i];
            if (y->nic != nic || strcmp(y->bus, x->bus))
                continue;
            if (prev && y->t > prev->t && y->tx >= prev->tx) {
                buf[ns][o] = y->t - t0;
                double rate = (double)(y->tx - prev->tx) / (y->t - prev->t);
                buf[ns][m + 1 + o] = util ? 100 * rate / (y->rate_mbps * 1e6 / 8) : rate;
                o++;
            }
            prev = y;
        }
        s[ns] = (struct icx_series){x->bus, buf[ns], buf[ns] + m + 1, o};
        ns++;
    }
    if (ns) {
        icx_html_h3(out, p->host,
                    util ? ": InfiniBand / RoCE transmit utilization per port, % "
                           "of its rate (hardware counters)"
                         : title);
        struct icx_lines L = {util ? "%" : "B/s", s, ns};
        icx_html_lines(out, &L);
    }
    for (int z = 0; z < ns; z++)
        free(buf[z]);
}

static void nic_traffic(FILE *out, const struct icx_verbs *V, const char *host)
{
    struct icx_series s[64];
    double *buf[64];
    int ns = 0;
    double t0 = INFINITY;
    for (size_t i = 0; i < V->nnics; i++)
        if (!strcmp(V->nics[i].host, host) && V->nics[i].nbins)
            t0 = fmin(t0, V->nics[i].t0);
    for (size_t i = 0; i < V->nnics && ns < 64; i++) {
        const struct vnic *x = &V->nics[i];
        if (strcmp(x->host, host) || !x->nbins || x->bin_s <= 0)
            continue;
        buf[ns] = malloc(sizeof(double) * 2 * x->nbins);
        if (!buf[ns])
            break;
        for (size_t b = 0; b < x->nbins; b++) {
            buf[ns][b] = x->t0 - t0 + (double)b * x->bin_s;
            buf[ns][x->nbins + b] = x->bins[b] / x->bin_s;
        }
        s[ns] = (struct icx_series){x->name, buf[ns], buf[ns] + x->nbins, x->nbins};
        ns++;
    }
    if (ns) {
        icx_html_h3(out, host, ": traced RDMA bytes posted per NIC (work requests, not counters)");
        struct icx_lines L = {"B/s", s, ns};
        icx_html_lines(out, &L);
    }
    for (int z = 0; z < ns; z++)
        free(buf[z]);
}

void icx_html_time(FILE *out, const struct icx_analysis *A, struct icx_labels *L)
{
    (void)L;
    const struct icx_trace *t = A->t;
    fputs("<h2 id=\"time\">Over time</h2>\n<p>Per host: the hardware counters' transmit rate "
          "between samples, and the bytes the traced work requests posted; seconds from the "
          "host's first sample.</p>\n",
          out);
    for (size_t q = 0; q < t->nprocs; q++) {
        const struct icx_proc *p = t->procs[q];
        int first = 1;
        for (size_t r = 0; r < q && first; r++)
            first = strcmp(t->procs[r]->host ? t->procs[r]->host : "", p->host ? p->host : "");
        if (!first)
            continue;
        const struct icx_proc *s = p; /* the host's first process with counter samples */
        for (size_t r = q; r < t->nprocs && !s->ncsamples; r++)
            if (!strcmp(t->procs[r]->host ? t->procs[r]->host : "", p->host ? p->host : ""))
                s = t->procs[r];
        counter_chart(out, s, 0, ": NVLink transmit per GPU (hardware counters)");
        counter_chart(out, s, 1, ": InfiniBand / RoCE transmit per port (hardware counters)");
        if (A->verbs)
            nic_traffic(out, A->verbs, p->host ? p->host : "?");
    }
}
