/* The NCCL report, part: calls, bytes and sizes per communicator and op; instances and their
 * times; time and bandwidth per op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "icx/format_util.h"

#include "nccl_model.h"

/* Calls and bytes per op (over all ranks, and its range per rank), the communicators created
 * non-blocking, and the other calls made on each. */
void icx_nccl_stats_calls(const struct icx_trace *t, struct icx_nccl *N, const struct call *v,
                          size_t n)
{
    /* Calls and bytes per rank and op. */
    for (size_t i = 0; i < n; i++) {
        struct comm *c = icx_nccl_comm_get(N, v[i].comm_id, v[i].nranks);
        if (!c)
            continue;
        c->op[v[i].op].calls++;
        c->op[v[i].op].bytes += v[i].bytes;
        c->op[v[i].op].hist[icx_size_class(v[i].bytes)]++;
    }
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        uint64_t *per = calloc((size_t)c->nranks * NOPS + 1, sizeof(uint64_t));
        char *seen = calloc((size_t)c->nranks + 1, 1);
        for (size_t i = 0; per && seen && i < n; i++)
            if (v[i].comm_id == c->id && v[i].rank >= 0 && v[i].rank < c->nranks) {
                per[(size_t)v[i].rank * NOPS + (size_t)v[i].op]++;
                seen[v[i].rank] = 1;
            }
        for (int r = 0; per && seen && r < c->nranks; r++) {
            c->traced += seen[r];
            for (int o = 0; seen[r] && o < NOPS; o++) {
                uint64_t x = per[(size_t)r * NOPS + (size_t)o];
                struct opstat *s = &c->op[o];
                s->min_calls = c->traced == 1 || x < s->min_calls ? x : s->min_calls;
                s->max_calls = x > s->max_calls ? x : s->max_calls;
            }
        }
        free(per);
        free(seen);
    }
    /* Non-blocking creations. */
    for (size_t pi = 0; pi < t->nprocs; pi++)
        for (size_t k = 0; k < t->procs[pi]->nncomms; k++) {
            const struct icx_rd_ncomm *x = &t->procs[pi]->ncomms[k];
            for (size_t ci = 0; x->result == 7 /* ncclInProgress */ && ci < N->n; ci++)
                if (N->v[ci].id == x->comm_id)
                    N->v[ci].nonblocking = 1;
        }
    /* The other calls made on each communicator (queries, registration, errors), by API. */
    for (size_t pi = 0; pi < t->nprocs; pi++) {
        const struct icx_proc *p = t->procs[pi];
        for (size_t k = 0; k < p->nncalls; k++) {
            const struct icx_rd_ncall *x = &p->ncalls[k];
            const struct icx_rd_ncomm *cm = x->pending || icx_nccl_op_of(x->api) != 11
                                                ? NULL
                                                : icx_nccl_comm_of(p, x->comm, x->t_enter);
            struct comm *c = cm ? icx_nccl_comm_get(N, cm->comm_id, cm->nranks) : NULL;
            if (!c)
                continue;
            int o = 0;
            while (o < c->nother && c->other[o].api != x->api)
                o++;
            if (o == c->nother && c->nother < 16)
                c->other[c->nother++].api = x->api;
            if (o < c->nother)
                c->other[o].calls++;
        }
    }
}

/* Every instance: its ranks' GPU and host times, its duration, who arrived last and by how much. */
void icx_nccl_stats_instances(struct icx_nccl *N, const struct call *v, size_t n)
{
    /* Instances: runs of equal keys after the sort. */
    for (size_t i = 0; i < n;) {
        size_t j = icx_nccl_instance_end(v, n, i);
        struct comm *c = icx_nccl_comm_get(N, v[i].comm_id, v[i].nranks);
        size_t want = v[i].op >= 8 ? 2 : (size_t)v[i].nranks;
        int op = v[i].op >= 8 ? 8 : v[i].op; /* a pair counts for Send */
        for (size_t k = i; c && k < j; k++) {
            if (v[k].gpu == ICX_GPU_DONE)
                icx_nccl_push(&c->op[v[k].op].gpu, &c->op[v[k].op].ngpu,
                              v[k].gpu_end - v[k].gpu_start);
            icx_nccl_push(&c->op[v[k].op].host, &c->op[v[k].op].nhost, v[k].exit - v[k].enter);
        }
        if (c && j - i == want) {
            double last = -INFINITY, done = -INFINITY, gpu_last = -INFINITY;
            int last_rank = -1, timing = icx_nccl_instance_timing(v, i, j);
            for (size_t k = i; k < j; k++) {
                if (v[k].enter > last) {
                    last = v[k].enter;
                    last_rank = v[k].rank;
                }
                done = fmax(done, timing == 2 ? v[k].gpu_end : v[k].exit);
                gpu_last = fmax(gpu_last, v[k].gpu_start);
            }
            /* the operation itself: from the last rank's start on the GPU (or host arrival) to
             * the last finish */
            if (timing)
                icx_nccl_push(&c->op[op].dur, &c->op[op].ndur,
                              done - (timing == 2 ? gpu_last : last));
            c->op[op].host_timed += timing == 1;
            if (v[i].op < 8 && last_rank >= 0 && last_rank < c->nranks) {
                c->instances++;
                struct rankstat *r = &c->ranks[last_rank];
                r->last++;
                for (size_t k = i; k < j; k++)
                    r->imposed += last - v[k].enter;
            }
        }
        i = j;
    }
}

/* Per op: percentiles of the instance, GPU and host times; algorithm and bus bandwidth of the
 * median instance. */
void icx_nccl_stats_summarize(struct icx_nccl *N)
{
    /* Time and bandwidth per op: the median instance. */
    for (size_t ci = 0; ci < N->n; ci++) {
        struct comm *c = &N->v[ci];
        for (int o = 0; o < NOPS; o++) {
            struct opstat *s = &c->op[o];
            s->algbw = s->busbw = s->p50 = s->p99 = s->gpu_p50 = s->gpu_p99 = s->host_p50 = NAN;
            if (s->nhost) {
                qsort(s->host, s->nhost, sizeof(double), icx_nccl_dcmp);
                s->host_p50 = icx_nccl_pct(s->host, s->nhost, 0.5);
            }
            if (s->ngpu) {
                qsort(s->gpu, s->ngpu, sizeof(double), icx_nccl_dcmp);
                s->gpu_p50 = icx_nccl_pct(s->gpu, s->ngpu, 0.5);
                s->gpu_p99 = icx_nccl_pct(s->gpu, s->ngpu, 0.99);
            }
            if (!s->ndur || !s->calls)
                continue;
            qsort(s->dur, s->ndur, sizeof(double), icx_nccl_dcmp);
            s->p50 = icx_nccl_pct(s->dur, s->ndur, 0.5);
            s->p99 = icx_nccl_pct(s->dur, s->ndur, 0.99);
            double per_call = (double)s->bytes / (double)s->calls; /* one rank's buffer */
            if (s->p50 > 0) {
                s->algbw = per_call * icx_nccl_size_mult(o, c->nranks) / s->p50;
                s->busbw = s->algbw * icx_nccl_bus_factor(o, c->nranks);
            }
        }
    }
}
