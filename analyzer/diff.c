/* icx-analyze diff BASE NEW: what changed between two runs of one job (docs/DIFF.md).
 *
 * Both runs are analyzed in full; then their parts are matched -- communicators by their member
 * ranks (ids are random per run), NICs by host, name and port, links by host and GPU pair, ranks
 * by rank, findings by kind, host and ranks -- and compared.  Changes are ordered by their effect
 * on the job's time where one can be given (a collective's total time; the wait a rank imposed on
 * the others), the rest after them; the headline joins the collective that lost the most time to
 * the likeliest cause among what changed: a finding that appeared, a NIC that runs slower, a rank
 * that arrives later, a rank that moved. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "export.h"
#include "html_svg.h"
#include "nccl_model.h"
#include "report_links.h"
#include "verbs_model.h"

struct side {
    const struct icx_trace *t;
    const struct icx_analysis *A;
    int ranks, hosts;
    double *waits; /* per complete collective instance: sum over ranks of (last arrival - own) */
    size_t nwaits;
};

/* A communicator's members' world ranks, "0-15" style, with its size: its identity across runs. */
static void comm_members(const struct icx_trace *t, uint64_t id, char *out, size_t n)
{
    char seen[4096] = {0};
    int lo = -1, hi = -1, count = 0;
    for (size_t q = 0; q < t->nprocs; q++)
        for (size_t k = 0; k < t->procs[q]->nncomms; k++)
            if (t->procs[q]->ncomms[k].comm_id == id && t->procs[q]->rank >= 0 &&
                t->procs[q]->rank < 4096 && !seen[t->procs[q]->rank]) {
                seen[t->procs[q]->rank] = 1;
                count++;
            }
    size_t o = 0;
    out[0] = 0;
    for (int r = 0; r <= 4096; r++) {
        int in = r < 4096 && seen[r];
        if (in && lo < 0)
            lo = r;
        if (in)
            hi = r;
        if (!in && lo >= 0 && o + 16 < n) {
            o += (size_t)snprintf(out + o, n - o, "%s%d", o ? "," : "", lo);
            if (hi > lo)
                o += (size_t)snprintf(out + o, n - o, "-%d", hi);
            lo = -1;
        }
    }
    if (!count)
        snprintf(out, n, "?");
}

static double total_time(const struct opstat *s)
{
    double sum = 0;
    for (size_t i = 0; i < s->ndur; i++)
        sum += s->dur[i];
    return sum;
}

/* The i-th communicator of side S with members m (several over the same ranks: in order). */
static const struct comm *comm_match(const struct side *S, const char *m, int nth)
{
    const struct icx_nccl *N = S->A->nccl;
    char buf[200];
    for (size_t c = 0; N && c < N->n; c++) {
        comm_members(S->t, N->v[c].id, buf, sizeof(buf));
        if (!strcmp(buf, m) && nth-- == 0)
            return &N->v[c];
    }
    return NULL;
}

static void comm_label(const struct side *S, const struct comm *c, const char *m, char *out,
                       size_t n)
{
    if (c->nranks == S->ranks)
        snprintf(out, n, "world");
    else
        snprintf(out, n, "ranks %s", m);
}

struct crow { /* one op of one communicator in both runs */
    char label[220];
    int op;
    const struct opstat *b, *n;
    double tb, tn, effect; /* total s; effect = tn - tb */
    double p;              /* two-sided p of the rank-sum test on instance times (NAN: none) */
    int significant;       /* p < ICX_DIFF_ALPHA and medians 10 % apart */
};

#define ICX_DIFF_ALPHA 1e-3

/* Mann-Whitney U on two samples of instance times, normal approximation with ties counted half:
 * the two-sided p that they come from one distribution.  NAN below 5 values a side. */
static double rank_sum_p(const double *a, size_t na, const double *b, size_t nb)
{
    if (na < 5 || nb < 5)
        return NAN;
    double u = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t k = 0; k < nb; k++)
            u += a[i] > b[k] ? 1 : a[i] == b[k] ? 0.5 : 0;
    double m = (double)na * (double)nb, mu = m / 2, sd = sqrt(m * ((double)(na + nb) + 1) / 12);
    double z = (fabs(u - mu) - 0.5) / sd;
    return z <= 0 ? 1 : erfc(z / sqrt(2));
}

static double median_of(const double *v, size_t n)
{
    double *w = malloc(sizeof(double) * (n + 1)), m = NAN;
    if (w && n) {
        memcpy(w, v, sizeof(double) * n);
        qsort(w, n, sizeof(double), icx_nccl_dcmp);
        m = icx_nccl_pct(w, n, 0.5);
    }
    free(w);
    return m;
}

struct nrow {
    const struct vnic *b, *n;
    double change; /* relative change of the mean rate (NAN: not comparable) */
};

struct rrow {
    int rank;
    double imposed_b, imposed_n; /* s the others waited for it, over its communicators */
    char where_b[200], where_n[200];
};

/* Where rank r runs: host, GPU, NIC with most posted bytes, NUMA node its threads ran on most. */
static void placement(const struct icx_proc *p, char *out, size_t n)
{
    int g = icx_verbs_primary_gpu(p);
    uint64_t best = 0, by[ICX_RD_MAX_VCTX] = {0};
    int nic = -1;
    for (size_t k = 0; k < p->nvtraffic; k++)
        if (p->vtraffic[k].kind == ICX_VK_SEND && p->vtraffic[k].ctx < ICX_RD_MAX_VCTX)
            by[p->vtraffic[k].ctx] += p->vtraffic[k].bytes;
    for (int c = 0; c < ICX_RD_MAX_VCTX; c++)
        if (by[c] > best) {
            best = by[c];
            nic = c;
        }
    uint64_t ns[ICX_RD_MAX_NODES] = {0}, most = 0;
    int node = -1;
    for (size_t k = 0; k < p->nthreads; k++)
        for (int d = 0; d < ICX_RD_MAX_NODES; d++)
            ns[d] += p->threads[k].node_samples[d];
    for (int d = 0; d < ICX_RD_MAX_NODES; d++)
        if (ns[d] > most) {
            most = ns[d];
            node = d;
        }
    char gpu[64] = "no GPU", cpu[32] = "CPUs ?";
    if (g >= 0)
        snprintf(gpu, sizeof(gpu), "GPU %d (%s)", g, p->dev[g].bus);
    if (node >= 0)
        snprintf(cpu, sizeof(cpu), "CPUs of NUMA node %d", node);
    snprintf(out, n, "%s, %s, %s, %s", p->host ? p->host : "?", gpu,
             nic >= 0 && p->vctx[nic].present ? p->vctx[nic].name : "no NIC", cpu);
}

static const struct icx_proc *proc_of_rank(const struct icx_trace *t, int r)
{
    for (size_t q = 0; q < t->nprocs; q++)
        if (t->procs[q]->rank == r)
            return t->procs[q];
    return NULL;
}

static double imposed(const struct side *S, int r)
{
    const struct icx_nccl *N = S->A->nccl;
    double sum = 0;
    for (size_t c = 0; N && c < N->n; c++) {
        const struct comm *x = &N->v[c];
        for (size_t q = 0; q < S->t->nprocs; q++) {
            const struct icx_proc *p = S->t->procs[q];
            if (p->rank != r)
                continue;
            for (size_t k = 0; k < p->nncomms; k++)
                if (p->ncomms[k].comm_id == x->id && p->ncomms[k].rank >= 0 &&
                    p->ncomms[k].rank < x->nranks && x->ranks) {
                    sum += x->ranks[p->ncomms[k].rank].imposed;
                    break;
                }
        }
    }
    return sum;
}

static int same_finding(const struct icx_finding *a, const struct icx_finding *b)
{
    return !strcmp(a->kind, b->kind) && !strcmp(a->host, b->host) && a->rank == b->rank;
}

static int has_finding(const struct icx_findings *F, const struct icx_finding *f)
{
    for (size_t i = 0; i < F->n; i++)
        if (same_finding(&F->v[i], f))
            return 1;
    return 0;
}

struct diff {
    struct side b, n;
    struct crow *c;
    size_t nc;
    struct nrow *nic;
    size_t nn;
    struct rrow *r;
    size_t nr;
    char headline[1024]; /* perf (300) + ": " + why (600) */
    double wait_p;       /* rank-sum test of the instances' waits */
};

static int crow_cmp(const void *x, const void *y)
{
    const struct crow *a = x, *b = y;
    return fabs(a->effect) > fabs(b->effect) ? -1 : fabs(a->effect) < fabs(b->effect);
}

static int rrow_cmp(const void *x, const void *y)
{
    const struct rrow *a = x, *b = y;
    double ea = a->imposed_n - a->imposed_b, eb = b->imposed_n - b->imposed_b;
    return fabs(ea) > fabs(eb) ? -1 : fabs(ea) < fabs(eb);
}

static int nrow_cmp(const void *x, const void *y)
{
    const struct nrow *a = x, *b = y;
    double ea = isfinite(a->change) ? fabs(a->change) : -1,
           eb = isfinite(b->change) ? fabs(b->change) : -1;
    return ea > eb ? -1 : ea < eb;
}

static void collect(struct diff *D)
{
    const struct icx_nccl *N = D->n.A->nccl;
    char m[200];
    D->c = calloc(N ? N->n * NOPS + 1 : 1, sizeof(*D->c));
    for (size_t c = 0; D->c && N && c < N->n; c++) {
        const struct comm *cn = &N->v[c];
        comm_members(D->n.t, cn->id, m, sizeof(m));
        int nth = 0;
        for (size_t k = 0; k < c; k++) {
            char m2[200];
            comm_members(D->n.t, N->v[k].id, m2, sizeof(m2));
            nth += !strcmp(m, m2);
        }
        const struct comm *cb = comm_match(&D->b, m, nth);
        for (int o = 0; o < NOPS; o++) {
            if (!cn->op[o].calls && !(cb && cb->op[o].calls))
                continue;
            struct crow *x = &D->c[D->nc++];
            comm_label(&D->n, cn, m, x->label, sizeof(x->label));
            x->op = o;
            x->n = &cn->op[o];
            x->b = cb ? &cb->op[o] : NULL;
            x->tn = total_time(x->n);
            x->tb = x->b ? total_time(x->b) : NAN;
            x->effect = isfinite(x->tb) ? x->tn - x->tb : 0;
            x->p = x->b ? rank_sum_p(x->b->dur, x->b->ndur, x->n->dur, x->n->ndur) : NAN;
            double mb = x->b ? median_of(x->b->dur, x->b->ndur) : NAN,
                   mn = median_of(x->n->dur, x->n->ndur);
            x->significant = x->p < ICX_DIFF_ALPHA && mb > 0 && fabs(mn / mb - 1) >= 0.1;
        }
    }
    if (D->c)
        qsort(D->c, D->nc, sizeof(*D->c), crow_cmp);
    const struct icx_verbs *Vb = D->b.A->verbs, *Vn = D->n.A->verbs;
    D->nic = calloc(Vn ? Vn->nnics + 1 : 1, sizeof(*D->nic));
    for (size_t i = 0; D->nic && Vn && i < Vn->nnics; i++) {
        const struct vnic *x = &Vn->nics[i], *y = NULL;
        for (size_t k = 0; Vb && k < Vb->nnics && !y; k++)
            if (!strcmp(Vb->nics[k].host, x->host) && !strcmp(Vb->nics[k].name, x->name) &&
                Vb->nics[k].port == x->port)
                y = &Vb->nics[k];
        if (!x->tx_bytes && !x->rx_bytes && !(y && (y->tx_bytes || y->rx_bytes)))
            continue;
        double rb = y ? y->rate_bps : NAN, rn = x->rate_bps;
        D->nic[D->nn++] = (struct nrow){y, x, rb > 0 && rn > 0 ? rn / rb - 1 : NAN};
    }
    if (D->nic)
        qsort(D->nic, D->nn, sizeof(*D->nic), nrow_cmp);
    D->r = calloc(D->n.t->nprocs + 1, sizeof(*D->r));
    for (size_t q = 0; D->r && q < D->n.t->nprocs; q++) {
        const struct icx_proc *p = D->n.t->procs[q], *pb = proc_of_rank(D->b.t, p->rank);
        if (p->rank < 0)
            continue;
        struct rrow *x = &D->r[D->nr++];
        x->rank = p->rank;
        x->imposed_n = imposed(&D->n, p->rank);
        x->imposed_b = pb ? imposed(&D->b, p->rank) : NAN;
        placement(p, x->where_n, sizeof(x->where_n));
        if (pb)
            placement(pb, x->where_b, sizeof(x->where_b));
    }
    if (D->r)
        qsort(D->r, D->nr, sizeof(*D->r), rrow_cmp);
}

static double pct(double b, double n)
{
    return b > 0 && isfinite(b) && isfinite(n) ? 100 * (n / b - 1) : NAN;
}

/* The likeliest cause among what changed, as a phrase; "" when nothing stands out. */
static void cause(const struct diff *D, char *out, size_t n)
{
    static const char *const order[] = {"hang",
                                        "nic_degraded",
                                        "straggler",
                                        "rail_misalignment",
                                        "numa_misaffinity",
                                        "nic_imbalance",
                                        "rdma_completion_error"};
    const struct icx_findings *Fb = &D->b.A->findings, *Fn = &D->n.A->findings;
    out[0] = 0;
    for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++)
        for (size_t i = 0; i < Fn->n; i++) {
            const struct icx_finding *f = &Fn->v[i];
            if (strcmp(f->kind, order[k]) || has_finding(Fb, f))
                continue;
            if (!strcmp(f->kind, "nic_degraded"))
                for (size_t x = 0; x < D->nn; x++) {
                    const struct vnic *v = D->nic[x].n, *w = D->nic[x].b;
                    if (strcmp(v->host, f->host) || !w || v->port_rate_mbps >= w->port_rate_mbps)
                        continue;
                    snprintf(out, n, "%s %s runs at %.0f of %.0f Gb/s (new nic_degraded)", v->host,
                             v->name, v->port_rate_mbps / 1e3, w->port_rate_mbps / 1e3);
                    return;
                }
            if (!strcmp(f->kind, "straggler"))
                for (size_t x = 0; x < D->nr; x++)
                    if (D->r[x].rank == f->rank) {
                        snprintf(out, n,
                                 "rank %d (%s) arrives late: the others now wait %.3f s for it "
                                 "(was %.3f s) (new straggler)",
                                 f->rank, f->host, D->r[x].imposed_n, D->r[x].imposed_b);
                        return;
                    }
            for (size_t x = 0; x < D->nr; x++)
                if (f->rank >= 0 && D->r[x].rank == f->rank && *D->r[x].where_b &&
                    strcmp(D->r[x].where_b, D->r[x].where_n)) {
                    snprintf(out, n, "rank %d moved: %s (was %s) (new %s)", f->rank,
                             D->r[x].where_n, D->r[x].where_b, f->kind);
                    return;
                }
            snprintf(out, n, "new %s on %s: %.300s", f->kind, f->host[0] ? f->host : "the job",
                     f->evidence);
            return;
        }
    /* No new finding: a rank that moved.  A NIC's mean rate is no cause by itself: over a
     * traced span that is mostly idle it moves with host noise (26 % between two clean runs). */
    for (size_t x = 0; x < D->nr; x++)
        if (*D->r[x].where_b && strcmp(D->r[x].where_b, D->r[x].where_n)) {
            snprintf(out, n, "rank %d moved: %s (was %s)", D->r[x].rank, D->r[x].where_n,
                     D->r[x].where_b);
            return;
        }
}

static void headline(struct diff *D)
{
    char why[600];
    cause(D, why, sizeof(why));
    /* The significant change that cost the most time; a slowdown before any speed-up, since the
     * headline explains why a run got slower. */
    const struct crow *c = NULL;
    for (size_t x = 0; x < D->nc; x++) {
        const struct crow *y = &D->c[x];
        if (y->significant &&
            (!c || (y->effect > 0 && c->effect <= 0) ||
             ((y->effect > 0) == (c->effect > 0) && fabs(y->effect) > fabs(c->effect))))
            c = y;
    }
    int big = c != NULL;
    /* The ranks' waits for late arrivals, per instance, tested like an op's times. */
    double wb = 0, wn = 0;
    for (size_t x = 0; x < D->b.nwaits; x++)
        wb += D->b.waits[x];
    for (size_t x = 0; x < D->n.nwaits; x++)
        wn += D->n.waits[x];
    double mb = median_of(D->b.waits, D->b.nwaits), mn = median_of(D->n.waits, D->n.nwaits);
    D->wait_p = rank_sum_p(D->b.waits, D->b.nwaits, D->n.waits, D->n.nwaits);
    int wait = D->wait_p < ICX_DIFF_ALPHA && fabs(mn - mb) >= 1e-3 &&
               fabs(mn - mb) >= 0.1 * fmax(mb, mn) &&
               (!big || (wn - wb > 0 && c->effect <= 0) ||
                ((wn - wb > 0) == (c->effect > 0) && fabs(wn - wb) > fabs(c->effect)));
    char perf[300] = "";
    if (wait) {
        snprintf(perf, sizeof(perf),
                 "time ranks waited for late ones %+.3f s (%.3f -> %.3f s, p = %.1e)", wn - wb, wb,
                 wn, D->wait_p);
    } else if (big) {
        double bw = pct(c->b->busbw, c->n->busbw);
        if (isfinite(bw))
            snprintf(perf, sizeof(perf), "%s %s busbw %+.0f %% (%+.3f s in all)", c->label,
                     icx_nccl_op_names[c->op], bw, c->effect);
        else
            snprintf(perf, sizeof(perf), "%s %s time %+.0f %% (%+.3f s in all)", c->label,
                     icx_nccl_op_names[c->op], pct(c->tb, c->tn), c->effect);
    }
    if (*perf && *why)
        snprintf(D->headline, sizeof(D->headline), "%s: %s", perf, why);
    else if (*perf)
        snprintf(D->headline, sizeof(D->headline), "%s; no cause among the changes the traces show",
                 perf);
    else if (*why)
        snprintf(D->headline, sizeof(D->headline), "%s; no collective's time changed significantly",
                 why);
    else
        snprintf(D->headline, sizeof(D->headline), "no significant change");
}

static void print_text(FILE *out, const struct diff *D)
{
    fprintf(out, "icx-analyze diff: base %d ranks on %d hosts -> new %d ranks on %d hosts\n",
            D->b.ranks, D->b.hosts, D->n.ranks, D->n.hosts);
    fprintf(out, "headline: %s\n\n", D->headline);
    fprintf(out, "Collectives, by change of their total time\n");
    fprintf(out, "  %-22s %-14s %7s %7s %12s %12s %10s %10s %8s %8s\n", "communicator", "op",
            "calls", "", "time base s", "time new s", "busbw base", "busbw new", "busbw", "p");
    for (size_t i = 0; i < D->nc; i++) {
        const struct crow *c = &D->c[i];
        fprintf(out, "  %-22.22s %-14s %7llu %7llu %12.4f %12.4f %9.3gG %9.3gG %+7.0f%% %8.1e%s\n",
                c->label, icx_nccl_op_names[c->op], (unsigned long long)(c->b ? c->b->calls : 0),
                (unsigned long long)c->n->calls, c->tb, c->tn, c->b ? c->b->busbw / 1e9 : NAN,
                c->n->busbw / 1e9, c->b ? pct(c->b->busbw, c->n->busbw) : NAN, c->p,
                c->significant ? " *" : "");
    }
    fprintf(out,
            "  (* significant: instance times differ by the rank-sum test, p < %g, and their "
            "medians by 10 %% or more)\n",
            ICX_DIFF_ALPHA);
    fprintf(out, "\nNICs, by change of their mean rate\n");
    fprintf(out, "  %-12s %-10s %14s %14s %11s %11s %7s %9s\n", "host", "NIC", "bytes base",
            "bytes new", "Gb/s base", "Gb/s new", "change", "port Gb/s");
    for (size_t i = 0; i < D->nn; i++) {
        const struct nrow *x = &D->nic[i];
        char port[32];
        if (x->b && x->b->port_rate_mbps != x->n->port_rate_mbps)
            snprintf(port, sizeof(port), "%.0f->%.0f", x->b->port_rate_mbps / 1e3,
                     x->n->port_rate_mbps / 1e3);
        else
            snprintf(port, sizeof(port), "%.0f", x->n->port_rate_mbps / 1e3);
        fprintf(out, "  %-12.12s %-10.10s %14llu %14llu %11.3f %11.3f %+6.0f%% %9s\n", x->n->host,
                x->n->name, (unsigned long long)(x->b ? x->b->tx_bytes + x->b->rx_bytes : 0),
                (unsigned long long)(x->n->tx_bytes + x->n->rx_bytes),
                x->b ? x->b->rate_bps * 8 / 1e9 : NAN, x->n->rate_bps * 8 / 1e9, 100 * x->change,
                port);
    }
    fprintf(out, "\nRanks, by change of the time the others waited for them\n");
    for (size_t i = 0; i < D->nr; i++) {
        const struct rrow *x = &D->r[i];
        int moved = *x->where_b && strcmp(x->where_b, x->where_n);
        if (fabs(x->imposed_n - x->imposed_b) < 1e-3 && !moved && i >= 3)
            continue;
        fprintf(out, "  rank %-5d waited for %.3f s -> %.3f s   %s\n", x->rank, x->imposed_b,
                x->imposed_n, x->where_n);
        if (moved)
            fprintf(out, "  %-46s was: %s\n", "", x->where_b);
    }
    fprintf(out, "\nFindings\n");
    const struct icx_findings *Fb = &D->b.A->findings, *Fn = &D->n.A->findings;
    int any = 0;
    for (size_t i = 0; i < Fn->n; i++)
        if (!has_finding(Fb, &Fn->v[i]) && ++any)
            fprintf(out, "  + %s %s: %s\n", Fn->v[i].kind, Fn->v[i].host, Fn->v[i].evidence);
    for (size_t i = 0; i < Fb->n; i++)
        if (!has_finding(Fn, &Fb->v[i]) && ++any)
            fprintf(out, "  - %s %s: %s\n", Fb->v[i].kind, Fb->v[i].host, Fb->v[i].evidence);
    if (!any)
        fprintf(out, "  the same in both runs (%zu)\n", Fn->n);
}

static void finding_json(struct icx_json *j, const struct icx_finding *f)
{
    icx_json_obj(j, NULL);
    icx_json_str(j, "kind", f->kind);
    icx_json_str(j, "host", f->host);
    icx_json_int(j, "rank", f->rank);
    icx_json_str(j, "evidence", f->evidence);
    icx_json_end(j);
}

static void print_json(FILE *out, const struct diff *D)
{
    struct icx_json j;
    icx_json_begin(&j, out);
    icx_json_obj(&j, NULL);
    icx_json_str(&j, "tool", "icx-analyze");
    icx_json_str(&j, "command", "diff");
    icx_json_int(&j, "schema", 1);
    icx_json_str(&j, "headline", D->headline);
    const struct side *sides[2] = {&D->b, &D->n};
    for (int s = 0; s < 2; s++) {
        icx_json_obj(&j, s ? "new" : "base");
        icx_json_int(&j, "ranks", sides[s]->ranks);
        icx_json_int(&j, "hosts", sides[s]->hosts);
        icx_json_arr(&j, "inputs");
        for (size_t i = 0; i < sides[s]->t->ninputs; i++)
            icx_json_str(&j, NULL, sides[s]->t->inputs[i].path);
        icx_json_end(&j);
        icx_json_end(&j);
    }
    icx_json_obj(&j, "waits");
    double w[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        for (size_t x = 0; x < sides[s]->nwaits; x++)
            w[s] += sides[s]->waits[x];
    icx_json_num(&j, "base_s", w[0]);
    icx_json_num(&j, "new_s", w[1]);
    icx_json_num(&j, "p", D->wait_p);
    icx_json_end(&j);
    icx_json_arr(&j, "collectives");
    for (size_t i = 0; i < D->nc; i++) {
        const struct crow *c = &D->c[i];
        icx_json_obj(&j, NULL);
        icx_json_str(&j, "communicator", c->label);
        icx_json_str(&j, "op", icx_nccl_op_names[c->op]);
        icx_json_int(&j, "calls_base", c->b ? (long long)c->b->calls : 0);
        icx_json_int(&j, "calls_new", (long long)c->n->calls);
        icx_json_num(&j, "time_base_s", c->tb);
        icx_json_num(&j, "time_new_s", c->tn);
        icx_json_num(&j, "effect_s", c->effect);
        icx_json_num(&j, "busbw_base", c->b ? c->b->busbw : NAN);
        icx_json_num(&j, "busbw_new", c->n->busbw);
        icx_json_num(&j, "busbw_change_pct", c->b ? pct(c->b->busbw, c->n->busbw) : NAN);
        icx_json_num(&j, "p", c->p);
        icx_json_bool(&j, "significant", c->significant);
        icx_json_end(&j);
    }
    icx_json_end(&j);
    icx_json_arr(&j, "nics");
    for (size_t i = 0; i < D->nn; i++) {
        const struct nrow *x = &D->nic[i];
        icx_json_obj(&j, NULL);
        icx_json_str(&j, "host", x->n->host);
        icx_json_str(&j, "name", x->n->name);
        icx_json_int(&j, "port", x->n->port);
        icx_json_int(&j, "bytes_base", x->b ? (long long)(x->b->tx_bytes + x->b->rx_bytes) : 0);
        icx_json_int(&j, "bytes_new", (long long)(x->n->tx_bytes + x->n->rx_bytes));
        icx_json_num(&j, "rate_bps_base", x->b ? x->b->rate_bps * 8 : NAN);
        icx_json_num(&j, "rate_bps_new", x->n->rate_bps * 8);
        icx_json_num(&j, "rate_change_pct", 100 * x->change);
        icx_json_int(&j, "port_rate_mbps_base", x->b ? x->b->port_rate_mbps : 0);
        icx_json_int(&j, "port_rate_mbps_new", x->n->port_rate_mbps);
        icx_json_end(&j);
    }
    icx_json_end(&j);
    icx_json_arr(&j, "ranks");
    for (size_t i = 0; i < D->nr; i++) {
        const struct rrow *x = &D->r[i];
        icx_json_obj(&j, NULL);
        icx_json_int(&j, "rank", x->rank);
        icx_json_num(&j, "waited_for_base_s", x->imposed_b);
        icx_json_num(&j, "waited_for_new_s", x->imposed_n);
        icx_json_str(&j, "placement_base", *x->where_b ? x->where_b : NULL);
        icx_json_str(&j, "placement_new", x->where_n);
        icx_json_bool(&j, "moved", *x->where_b && strcmp(x->where_b, x->where_n));
        icx_json_end(&j);
    }
    icx_json_end(&j);
    const struct icx_findings *Fb = &D->b.A->findings, *Fn = &D->n.A->findings;
    icx_json_arr(&j, "findings_appeared");
    for (size_t i = 0; i < Fn->n; i++)
        if (!has_finding(Fb, &Fn->v[i]))
            finding_json(&j, &Fn->v[i]);
    icx_json_end(&j);
    icx_json_arr(&j, "findings_gone");
    for (size_t i = 0; i < Fb->n; i++)
        if (!has_finding(Fn, &Fb->v[i]))
            finding_json(&j, &Fb->v[i]);
    icx_json_end(&j);
    icx_json_end(&j);
    fputc('\n', out);
}

/* The diff as a section of the new run's HTML page: the headline, then what changed. */
static void html_section(FILE *out, const void *arg)
{
    const struct diff *D = arg;
    char a[32], b[32];
    fputs("<h2 id=\"diff\">What changed since the base run</h2>\n<p class=\"finding\"><b>", out);
    icx_html_esc(out, D->headline);
    fputs("</b></p>\n<p>Significant: instance times differ by a rank-sum test (p &lt; 0.001) "
          "and their medians by 10 % or more (docs/DIFF.md).</p>\n<table class=\"sort\"><thead>"
          "<tr><th>communicator</th><th>op</th><th>time base s</th><th>time new s</th><th>busbw "
          "base</th><th>busbw new</th><th>change %</th><th>p</th><th>significant</th></tr>"
          "</thead><tbody>\n",
          out);
    for (size_t i = 0; i < D->nc; i++) {
        const struct crow *c = &D->c[i];
        icx_html_value(a, sizeof(a), c->b ? c->b->busbw : NAN, "B/s");
        icx_html_value(b, sizeof(b), c->n->busbw, "B/s");
        fputs("<tr><td>", out);
        icx_html_esc(out, c->label);
        fprintf(out,
                "</td><td>%s</td><td class=\"n\">%.4f</td><td class=\"n\">%.4f</td><td "
                "class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%+.0f</td><td "
                "class=\"n\">%.1e</td><td>%s</td></tr>\n",
                icx_nccl_op_names[c->op], c->tb, c->tn, a, b,
                c->b ? pct(c->b->busbw, c->n->busbw) : NAN, c->p, c->significant ? "yes" : "");
    }
    fputs("</tbody></table>\n<table class=\"sort\"><thead><tr><th>host</th><th>NIC</th><th>rate "
          "change %</th><th>port Gb/s base</th><th>port Gb/s new</th></tr></thead><tbody>\n",
          out);
    for (size_t i = 0; i < D->nn; i++) {
        const struct nrow *x = &D->nic[i];
        if (!x->b || (fabs(x->change) < 0.1 && x->b->port_rate_mbps == x->n->port_rate_mbps))
            continue;
        fputs("<tr><td>", out);
        icx_html_esc(out, x->n->host);
        fputs("</td><td>", out);
        icx_html_esc(out, x->n->name);
        fprintf(out,
                "</td><td class=\"n\">%+.0f</td><td class=\"n\">%.0f</td><td "
                "class=\"n\">%.0f</td></tr>\n",
                100 * x->change, x->b->port_rate_mbps / 1e3, x->n->port_rate_mbps / 1e3);
    }
    fputs("</tbody></table>\n<ul>\n", out);
    const struct icx_findings *Fb = &D->b.A->findings, *Fn = &D->n.A->findings;
    for (int gone = 0; gone < 2; gone++) {
        const struct icx_findings *X = gone ? Fb : Fn, *Y = gone ? Fn : Fb;
        for (size_t i = 0; i < X->n; i++)
            if (!has_finding(Y, &X->v[i])) {
                fprintf(out, "<li>%s <b>", gone ? "gone:" : "new:");
                icx_html_esc(out, X->v[i].kind);
                fputs("</b> ", out);
                icx_html_esc(out, X->v[i].evidence);
                fputs("</li>\n", out);
            }
    }
    for (size_t i = 0; i < D->nr; i++)
        if (*D->r[i].where_b && strcmp(D->r[i].where_b, D->r[i].where_n)) {
            fprintf(out, "<li>rank %d moved: ", D->r[i].rank);
            icx_html_esc(out, D->r[i].where_n);
            fputs(" (was ", out);
            icx_html_esc(out, D->r[i].where_b);
            fputs(")</li>\n", out);
        }
    fputs("</ul>\n", out);
}

static int write_html(const char *path, const struct diff *D)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "icx-analyze: %s: %s\n", path, strerror(errno));
        return -1;
    }
    int rc = icx_export_html_with(f, D->n.A, html_section, D);
    if (fclose(f) != 0 || rc != 0) {
        fprintf(stderr, "icx-analyze: %s: the HTML report could not be written\n", path);
        return -1;
    }
    fprintf(stderr, "icx-analyze: HTML report %s (the new run, the diff on top)\n", path);
    return 0;
}

/* The waits of every complete collective instance, on the aligned clock. */
static void side_waits(struct side *S)
{
    const struct icx_nccl *N = S->A->nccl;
    size_t n = 0;
    struct call *v = icx_nccl_collect(S->t, &n);
    S->waits = calloc(n + 1, sizeof(double));
    S->nwaits = 0;
    if (!v || !S->waits || !N) {
        free(v);
        return;
    }
    for (size_t k = 0; k < n; k++)
        for (size_t q = 0; q < N->nclk; q++)
            if (N->clk[q].p == v[k].p)
                v[k].enter -= N->clk[q].offset;
    if (n)
        qsort(v, n, sizeof(*v), icx_nccl_call_cmp);
    for (size_t i = 0; i < n;) {
        size_t j = icx_nccl_instance_end(v, n, i);
        if (v[i].op < 8 && j - i == (size_t)v[i].nranks && j - i > 1) {
            double last = -INFINITY, w = 0;
            for (size_t k = i; k < j; k++)
                last = fmax(last, v[k].enter);
            for (size_t k = i; k < j; k++)
                w += last - v[k].enter;
            S->waits[S->nwaits++] = w;
        }
        i = j;
    }
    free(v);
}

static void side_init(struct side *S, const struct icx_trace *t, const struct icx_analysis *A)
{
    S->t = t;
    S->A = A;
    S->ranks = S->hosts = 0;
    for (size_t q = 0; q < t->nprocs; q++) {
        S->ranks += t->procs[q]->rank >= 0;
        int first = 1;
        for (size_t r = 0; r < q && first; r++)
            first = strcmp(t->procs[r]->host ? t->procs[r]->host : "",
                           t->procs[q]->host ? t->procs[q]->host : "") != 0;
        S->hosts += first;
    }
}

int icx_diff(FILE *out, int json, const char *html, const struct icx_trace *base,
             const struct icx_trace *next)
{
    struct icx_analysis Ab = {.t = base}, An = {.t = next};
    int rc = icx_analysis_compute(&Ab, icx_reports, icx_nreports);
    if (rc == 0)
        rc = icx_analysis_compute(&An, icx_reports, icx_nreports);
    struct diff D;
    memset(&D, 0, sizeof(D));
    if (rc == 0) {
        side_init(&D.b, base, &Ab);
        side_init(&D.n, next, &An);
        side_waits(&D.b);
        side_waits(&D.n);
        collect(&D);
        if (!D.c || !D.nic || !D.r) {
            fprintf(stderr, "icx-analyze: out of memory comparing the runs\n");
            rc = -1;
        } else {
            headline(&D);
            if (json)
                print_json(out, &D);
            else
                print_text(out, &D);
            if (html && write_html(html, &D) != 0)
                rc = -1;
        }
    }
    free(D.c);
    free(D.nic);
    free(D.r);
    free(D.b.waits);
    free(D.n.waits);
    icx_analysis_free(&An, icx_reports, icx_nreports);
    icx_analysis_free(&Ab, icx_reports, icx_nreports);
    return rc;
}
