/* NCCL report: per communicator and operation, calls, bytes, time and bus bandwidth; clock
 * alignment (nccl_clock.c), per-link routing (nccl_route.c), stragglers (nccl_straggler.c) and
 * hangs (nccl_hang.c) over the shared timeline of nccl_model.c.
 *
 * A communicator is known on every rank by the same comm_id; a collective instance by (comm_id,
 * seq), a send/recv pair by (comm_id, sender, receiver, seq).  Times are put on one wall-clock
 * timeline (each process's CLOCK anchor).  An instance's duration runs from the last rank's
 * start on the GPU to the last rank's GPU finish (calls without GPU timing: host arrival to
 * return): the time the operation itself took, which is what bus bandwidth is about (nccl-tests'
 * conventions: size = this rank's buffer, times the number of ranks for gathers and scatters; busbw
 * = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather, reduce-scatter, all-to-all, gather,
 * scatter, 1 otherwise).  A call in a group returns with its group's ncclGroupEnd.
 *
 * Hangs and post-mortems: every call is written on entry too, so a call that never returned is in
 * the trace, and work NCCL enqueued whose GPU span had started but not finished when the trace
 * ended is marked so (without that final frame -- SIGKILL -- GPU work issued over a second before
 * the trace's end and never reported finished counts as unfinished).  For each communicator, the
 * ranks still inside a collective (host or GPU) when their traces end wait in that collective
 * instance; the ranks of the communicator that never issued it are the ones they wait for, named
 * with their last recorded NCCL call and how their trace ended.  A collective every waiter issued
 * on a stream behind another communicator's stuck call is only queued behind it: no finding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "nccl_model.h"

/* Every part over one timeline of every rank's calls, sorted into instances. */
static int nccl_compute(struct icx_analysis *A)
{
    struct icx_nccl *N = calloc(1, sizeof(*N));
    if (!N) {
        fprintf(stderr, "icx-analyze: out of memory computing the NCCL report\n");
        return -1;
    }
    size_t n = 0;
    struct call *v = icx_nccl_collect(A->t, &n);
    if (n) /* qsort(NULL, 0) is undefined */
        qsort(v, n, sizeof(*v), icx_nccl_call_cmp);
    icx_nccl_stats_calls(A->t, N, v, n);
    icx_nccl_align_clocks(A->t, N, v, n);
    icx_nccl_stats_instances(N, v, n);
    icx_nccl_stats_summarize(N);
    icx_nccl_stragglers(N, v, n, &A->findings);
    icx_nccl_route(N, v, n);
    free(v);
    icx_nccl_mismatches(A->t, N, &A->findings); /* before the hangs: it may explain one */
    icx_nccl_order_cycles(A->t, N, &A->findings);
    icx_nccl_p2p_pairs(A->t, N, &A->findings);
    icx_nccl_hangs(A->t, N, &A->findings);
    N->t = A->t;
    A->nccl = N;
    icx_nccl_explain_counters(N, A->counters); /* the counters report is before this one */
    return 0;
}

static void nccl_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_nccl *N = A->nccl;
    if (!N || !N->n)
        return;
    fprintf(out, "\nNCCL per communicator (time: one instance, from the last rank's start on the "
                 "GPU to the last finish; GPU: each call's own span)\n");
    fprintf(out, "  %-16s %5s %-13s %7s %13s %9s %9s %9s %11s %5s\n", "communicator", "ranks", "op",
            "calls", "bytes", "p50 ms", "p99 ms", "GPU p50", "busbw GB/s", "from");
    for (size_t i = 0; i < N->n; i++) {
        const struct comm *c = &N->v[i];
        for (int o = 0; o < 10; o++) {
            const struct opstat *s = &c->op[o];
            if (!s->calls)
                continue;
            fprintf(out, "  %016llx %2d/%-2d %-13s %7llu %13llu %9.3f %9.3f %9.3f %11.4g %5s\n",
                    (unsigned long long)c->id, c->traced, c->nranks, icx_nccl_op_names[o],
                    (unsigned long long)s->calls, (unsigned long long)s->bytes, s->p50 * 1e3,
                    s->p99 * 1e3, s->gpu_p50 * 1e3, s->busbw / 1e9,
                    !s->ndur        ? "-"
                    : s->host_timed ? "host"
                                    : "gpu");
        }
        if (c->stuck.nwaiting)
            fprintf(out, "  %16s stuck: %d of %d ranks wait in %s #%llu (%d missing)\n", "",
                    c->stuck.nwaiting, c->nranks, icx_nccl_op_names[c->stuck.op],
                    (unsigned long long)c->stuck.seq, c->stuck.nmissing);
        const struct arrivals *a = &c->arrivals;
        if (a->units)
            fprintf(out,
                    "  %16s arrivals: %llu compared, %llu with a clear late set, median skew "
                    "%.2f ms, %llu explained by waits elsewhere: %s\n",
                    "", (unsigned long long)a->units, (unsigned long long)a->clear,
                    a->median_skew * 1e3, (unsigned long long)a->excused,
                    !strcmp(a->verdict, "named")   ? "straggler named (findings)"
                    : !strcmp(a->verdict, "noisy") ? "skewed, but no rank persistently late: "
                                                     "too noisy to name anyone"
                    : !strcmp(a->verdict, "quiet") ? "no straggler"
                    : !strcmp(a->verdict, "inconclusive") ? "inconclusive (below)"
                                                          : "too few to judge");
        if (a->units && !strcmp(a->verdict, "inconclusive"))
            fprintf(out,
                    "  %16s rank %d late at %llu of %llu, chance P = %.1e, needs < %.1e with "
                    "the effect sizes: more steps would tell\n",
                    "", a->cand, (unsigned long long)a->cand_k, (unsigned long long)a->cand_units,
                    a->cand_tail, 1e-3 / c->nranks);
    }
    fprintf(out,
            "  routing: %d communicator(s) along NCCL's own ring graph, %d by the ring model\n",
            N->comms_graph, N->comms_ring);
    int header = 0;
    for (size_t i = 0; i < N->nedges; i++) {
        const struct edge *e = &N->edges[i];
        if (!e->src_nic && !e->dst_nic)
            continue;
        if (!header++)
            fprintf(out, "  %-16s %-10s -> %-16s %-10s %14s\n", "from host", "NIC", "to host",
                    "NIC", "bytes");
        fprintf(out, "  %-16s %-10s -> %-16s %-10s %14.0f\n", e->src_host,
                e->src_nic ? e->src_nic : "?", e->dst_host, e->dst_nic ? e->dst_nic : "?",
                e->bytes);
    }
}

/* Per process: the offset its wall clock was corrected by. */
static void clocks_json(struct icx_json *j, const struct icx_nccl *N)
{
    icx_json_arr(j, "clock_alignment");
    for (size_t i = 0; N && i < N->nclk; i++) {
        const struct clockfix *c = &N->clk[i];
        if (!c->samples)
            continue;
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", c->p->host ? c->p->host : "");
        icx_json_int(j, "pid", c->p->pid);
        icx_json_int(j, "rank", c->p->rank);
        icx_json_num(j, "offset_s", c->offset);
        icx_json_num(j, "residual_s", c->residual);
        icx_json_int(j, "instances", (long long)c->samples);
        icx_json_end(j);
    }
    icx_json_end(j);
}

/* Per link and per NIC: what NCCL's routing put there. */
static void routes_json(struct icx_json *j, const struct icx_nccl *N)
{
    icx_json_obj(j, "nccl_links");
    icx_json_str(j, "model",
                 N && N->comms_graph && !N->comms_ring
                     ? "graph: NCCL's ring graph (as dumped per host), bus bytes per nccl-tests "
                       "split evenly over its channels; send/recv to their peer"
                 : N && N->comms_graph ? "graph where NCCL's dumped ring graph covers the "
                                         "communicator, else ring over the ranks in order; bus "
                                         "bytes per nccl-tests; send/recv to their peer"
                                       : "ring over the ranks in order, bus bytes per nccl-tests "
                                         "(no NCCL graph covered the communicators); send/recv to "
                                         "their peer");
    icx_json_int(j, "communicators_by_graph", N ? N->comms_graph : 0);
    icx_json_int(j, "communicators_by_ring_model", N ? N->comms_ring : 0);
    icx_json_arr(j, "links");
    for (size_t i = 0; N && i < N->nedges; i++) {
        const struct edge *e = &N->edges[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "src_host", e->src_host);
        icx_json_int(j, "src_gpu", e->src_gpu);
        icx_json_str(j, "dst_host", e->dst_host);
        icx_json_int(j, "dst_gpu", e->dst_gpu);
        icx_json_str(j, "transport", strcmp(e->src_host, e->dst_host) ? "NET" : "P2P");
        if (e->src_nic)
            icx_json_str(j, "src_nic", e->src_nic);
        else
            icx_json_null(j, "src_nic");
        if (e->dst_nic)
            icx_json_str(j, "dst_nic", e->dst_nic);
        else
            icx_json_null(j, "dst_nic");
        icx_json_str(j, "source", e->source);
        icx_json_num(j, "bytes", e->bytes);
        icx_json_end(j);
    }
    icx_json_end(j);
    /* per NIC: what NCCL's routing put through it (network edges whose NIC the graph names) */
    icx_json_arr(j, "nics");
    for (size_t i = 0; N && i < N->nnics; i++) {
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", N->nics[i].host);
        icx_json_str(j, "nic", N->nics[i].nic);
        icx_json_num(j, "tx_bytes", N->nics[i].tx);
        icx_json_num(j, "rx_bytes", N->nics[i].rx);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_end(j);
}

/* What NCCL wrote about itself, each distinct (kind, communicator, text) once with the processes
 * that wrote it. */
static void dumps_json(struct icx_json *j, const struct icx_nccl *N)
{
    icx_json_arr(j, "nccl_dumps");
    for (size_t i = 0; N && N->t && i < N->t->nprocs; i++)
        for (size_t d = 0; d < N->t->procs[i]->ndumps; d++) {
            const struct icx_rd_dump *x = &N->t->procs[i]->dumps[d];
            if (!x->text)
                continue;
            int first = 1;
            for (size_t q = 0; first && q <= i; q++)
                for (size_t e = 0; first && e < (q < i ? N->t->procs[q]->ndumps : d); e++) {
                    const struct icx_rd_dump *y = &N->t->procs[q]->dumps[e];
                    first = !(y->kind == x->kind && y->comm_id == x->comm_id && y->text &&
                              !strcmp(y->text, x->text));
                }
            if (!first)
                continue;
            char id[32];
            snprintf(id, sizeof(id), "%016llx", (unsigned long long)x->comm_id);
            icx_json_obj(j, NULL);
            icx_json_str(j, "kind", x->kind == 3 ? "debug" : x->kind == 2 ? "graph" : "topology");
            if (x->comm_id)
                icx_json_str(j, "comm_id", id);
            else
                icx_json_null(j, "comm_id");
            icx_json_int(j, "bytes", (long long)strlen(x->text));
            icx_json_arr(j, "pids");
            for (size_t q = i; q < N->t->nprocs; q++) {
                int has = 0;
                for (size_t e = 0; !has && e < N->t->procs[q]->ndumps; e++) {
                    const struct icx_rd_dump *y = &N->t->procs[q]->dumps[e];
                    has = y->kind == x->kind && y->comm_id == x->comm_id && y->text &&
                          !strcmp(y->text, x->text);
                }
                if (has)
                    icx_json_int(j, NULL, N->t->procs[q]->pid);
            }
            icx_json_end(j);
            icx_json_str(j, x->kind == 3 ? "text" : "xml", x->text);
            icx_json_end(j);
        }
    icx_json_end(j);
}

static void op_json(struct icx_json *j, int o, const struct opstat *s)
{
    icx_json_obj(j, NULL);
    icx_json_str(j, "op", icx_nccl_op_names[o]);
    icx_json_int(j, "calls", (long long)s->calls);
    icx_json_int(j, "calls_per_rank_min", (long long)s->min_calls);
    icx_json_int(j, "calls_per_rank_max", (long long)s->max_calls);
    icx_json_int(j, "bytes", (long long)s->bytes);
    icx_json_arr(j, "size_histogram");
    for (int k = 0; k < 66; k++)
        if (s->hist[k]) {
            icx_json_obj(j, NULL);
            icx_json_num(j, "max_bytes", k ? ldexp(1.0, k - 1) : 0);
            icx_json_int(j, "calls", (long long)s->hist[k]);
            icx_json_end(j);
        }
    icx_json_end(j);
    icx_json_int(j, "instances_timed", (long long)s->ndur);
    icx_json_str(j, "timing", !s->ndur ? "none" : s->host_timed ? "host" : "gpu");
    icx_json_num(j, "time_p50_s", s->p50);
    icx_json_num(j, "time_p99_s", s->p99);
    icx_json_int(j, "gpu_timed_calls", (long long)s->ngpu);
    icx_json_num(j, "gpu_time_p50_s", s->gpu_p50);
    icx_json_num(j, "gpu_time_p99_s", s->gpu_p99);
    icx_json_num(j, "host_call_p50_s", s->host_p50);
    icx_json_num(j, "algbw_bytes_per_s", s->algbw);
    icx_json_num(j, "busbw_bytes_per_s", s->busbw);
    icx_json_end(j);
}

static void stuck_json(struct icx_json *j, const struct stuck *st)
{
    if (st->nwaiting) {
        icx_json_obj(j, "stuck");
        icx_json_str(j, "op", icx_nccl_op_names[st->op]);
        icx_json_int(j, "seq", (long long)st->seq);
        icx_json_num(j, "since_s", st->since);
        icx_json_int(j, "waiting_on_gpu", st->ongpu);
        icx_json_int(j, "waiting_unknown", st->unknown);
        icx_json_bool(j, "queued_behind", st->behind == st->nwaiting);
        icx_json_arr(j, "waiting_ranks");
        for (int k = 0; k < st->nwaiting; k++)
            icx_json_int(j, NULL, st->waiting[k]);
        icx_json_end(j);
        icx_json_arr(j, "missing_ranks");
        for (int k = 0; k < st->nmissing; k++)
            icx_json_int(j, NULL, st->missing[k]);
        icx_json_end(j);
        icx_json_end(j);
    } else {
        icx_json_null(j, "stuck");
    }
}

static void collectives_json(struct icx_json *j, const struct icx_nccl *N)
{
    icx_json_arr(j, "collectives");
    for (size_t i = 0; N && i < N->n; i++) {
        const struct comm *c = &N->v[i];
        char id[32];
        snprintf(id, sizeof(id), "%016llx", (unsigned long long)c->id);
        icx_json_obj(j, NULL);
        icx_json_str(j, "comm_id", id);
        icx_json_int(j, "nranks", c->nranks);
        icx_json_int(j, "ranks_traced", c->traced);
        icx_json_int(j, "collective_instances", (long long)c->instances);
        icx_json_bool(j, "nonblocking_init", c->nonblocking);
        icx_json_obj(j, "other_calls");
        for (int o = 0; o < c->nother; o++)
            icx_json_int(j, icx_api_name(c->other[o].api), (long long)c->other[o].calls);
        icx_json_end(j);
        icx_json_arr(j, "ops");
        for (int o = 0; o < 10; o++) {
            const struct opstat *s = &c->op[o];
            if (!s->calls)
                continue;
            op_json(j, o, s);
        }
        icx_json_end(j);
        stuck_json(j, &c->stuck);
        icx_json_obj(j, "arrivals");
        icx_json_int(j, "compared", (long long)c->arrivals.units);
        icx_json_int(j, "clear_late_sets", (long long)c->arrivals.clear);
        icx_json_int(j, "explained_elsewhere", (long long)c->arrivals.excused);
        icx_json_num(j, "median_skew_s", c->arrivals.units ? c->arrivals.median_skew : NAN);
        icx_json_int(j, "named", c->arrivals.named);
        if (c->arrivals.units && c->arrivals.cand >= 0) {
            icx_json_obj(j, "most_often_late");
            icx_json_int(j, "rank", c->arrivals.cand);
            icx_json_int(j, "late", (long long)c->arrivals.cand_k);
            icx_json_int(j, "of", (long long)c->arrivals.cand_units);
            icx_json_num(j, "chance_tail", c->arrivals.cand_tail);
            icx_json_end(j);
        } else
            icx_json_null(j, "most_often_late");
        icx_json_str(j, "verdict", c->arrivals.verdict ? c->arrivals.verdict : "too few");
        icx_json_end(j);
        icx_json_arr(j, "last_arrivals");
        for (int r = 0; r < c->nranks; r++)
            if (c->ranks[r].last) {
                icx_json_obj(j, NULL);
                icx_json_int(j, "rank", r);
                icx_json_int(j, "times_last", (long long)c->ranks[r].last);
                icx_json_num(j, "wait_imposed_s", c->ranks[r].imposed);
                icx_json_end(j);
            }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
}

static void nccl_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_nccl *N = A->nccl;
    clocks_json(j, N);
    routes_json(j, N);
    dumps_json(j, N);
    collectives_json(j, N);
}

static void nccl_free(struct icx_analysis *A)
{
    struct icx_nccl *N = A->nccl;
    A->nccl = NULL;
    if (!N)
        return;
    for (size_t i = 0; i < N->n; i++) {
        for (int o = 0; o < NOPS; o++) {
            free(N->v[i].op[o].dur);
            free(N->v[i].op[o].gpu);
            free(N->v[i].op[o].host);
        }
        free(N->v[i].stuck.waiting);
        free(N->v[i].stuck.missing);
        free(N->v[i].ranks);
    }
    free(N->v);
    free(N->clk);
    free(N->mism);
    free(N->edges);
    free(N->nvl);
    free(N->nics);
    for (size_t i = 0; i < N->nnames; i++)
        free(N->names[i]);
    free(N->names);
    free(N);
}

const struct icx_report icx_report_nccl = {
    .name = "nccl",
    .compute = nccl_compute,
    .print = nccl_print,
    .json = nccl_json,
    .free = nccl_free,
};
