/* The NCCL report's model, shared by its parts (report_nccl.c and nccl_*.c): calls of every rank on
 * one timeline, sorted so that the calls of one collective instance (or one send/recv pair) are
 * adjacent, and what each part computes from them. */
#ifndef ICX_NCCL_MODEL_H
#define ICX_NCCL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "findings.h"
#include "model.h"

#define NOPS 12
/* AllReduce Broadcast Reduce AllGather ReduceScatter AlltoAll Gather Scatter Send Recv GroupEnd ?
 */
extern const char *const icx_nccl_op_names[NOPS];
int icx_nccl_op_of(unsigned api);

/* nccl-tests' conventions: busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather,
 * reduce-scatter, all-to-all, gather, scatter, 1 otherwise; size = this rank's buffer, times the
 * number of ranks for gathers and scatters. */
static inline double icx_nccl_bus_factor(int op, double n)
{
    return op == 0 ? 2 * (n - 1) / n : (op >= 3 && op <= 7) ? (n - 1) / n : 1;
}
static inline double icx_nccl_size_mult(int op, double n)
{
    return op >= 3 && op <= 7 ? n : 1;
}

/* One call put on the shared timeline, with what it belongs to. */
struct call {
    uint64_t comm_id, seq, bytes;
    int op, rank, peer, nranks;
    double enter, exit;
    int gpu;                   /* enum icx_gpu_state */
    double gpu_start, gpu_end; /* on the timeline, when ICX_GPU_DONE */
    const struct icx_proc *p;
    double mono;    /* host enter on the process's own monotonic clock */
    uint32_t group; /* the process's group id (0: outside a group) */
};

struct opstat {
    uint64_t calls, bytes, min_calls, max_calls;
    double *dur, *gpu, *host; /* instance times; GPU span of every GPU-timed call; host call */
    size_t ndur, ngpu, nhost;
    int host_timed;    /* instances timed by host enter/exit (untimed on the GPU) */
    uint64_t hist[66]; /* calls by size: [0] 0 bytes, [k] 2^(k-2) < bytes <= 2^(k-1) */
    double busbw, algbw, p50, p99, gpu_p50, gpu_p99, host_p50;
};

struct rankstat {
    int rank;
    uint64_t last;  /* instances it arrived last at */
    double imposed; /* s the others waited for it there */
};

/* What the straggler rule saw on a communicator (nccl_straggler.c, docs/NCCL.md). */
struct arrivals {
    uint64_t units;     /* arrivals compared: instances, a group's instances counted once */
    uint64_t clear;     /* units with a clear late set */
    uint64_t excused;   /* late arrivals explained by a wait in another communicator */
    double median_skew; /* s, last arrival - first, over the units */
    int named;          /* ranks named */
    int cand;           /* the rank most often late that was not named (-1: none) */
    uint64_t cand_k, cand_units;
    double cand_tail;    /* its chance tail (the threshold: 0.001 / n) */
    const char *verdict; /* named, quiet, noisy, inconclusive, too few */
};

struct stuck {
    int op, nwaiting, nmissing;
    int ongpu, unknown; /* of the waiting: inside NCCL's GPU work; GPU work not known finished */
    int behind;         /* of the waiting: queued on their stream behind another stuck call */
    uint64_t seq;
    double since; /* wall s of the first waiter's entry */
    int *waiting, *missing;
};

struct comm {
    uint64_t id;
    struct stuck stuck; /* nwaiting 0: none */
    int nranks, traced;
    struct opstat op[NOPS];
    uint64_t instances;
    struct arrivals arrivals;
    struct rankstat *ranks; /* by rank */
    struct {
        unsigned api;
        uint64_t calls;
    } other[16]; /* calls on it that are not collectives or send/recv (queries, registration) */
    int nother;
    int nonblocking; /* some rank created it non-blocking (ncclInProgress) */
};

struct clockfix {
    const struct icx_proc *p;
    double offset, residual; /* s: subtracted from its times; median |error| left */
    size_t samples;
};

struct edge {
    const char *src_host, *dst_host;
    int src_gpu, dst_gpu;
    const char *src_nic, *dst_nic; /* NICs of a network edge, from NCCL's graph (NULL: unknown) */
    const char *source;            /* "graph", "ring model" or "p2p" */
    double bytes;
};

struct nvl {
    const struct icx_proc *sp, *dp; /* sender's and receiver's processes (same host) */
    int src, dst;                   /* their CUDA devices */
    double bytes, t;                /* t: the sender's host enter, its monotonic clock */
};

struct icx_nccl {
    struct comm *v;
    size_t n;
    struct clockfix *clk;
    size_t nclk;
    const struct icx_trace *t;
    struct edge *edges; /* per-link bytes, from NCCL's graph or the ring model */
    size_t nedges;
    int comms_graph, comms_ring; /* communicators attributed each way */
    char (**names)[64];          /* NIC name tables the edges point into */
    size_t nnames;
    struct nvl *nvl; /* bytes NCCL's routing put between two GPUs of one host, when */
    size_t nnvl;
    struct nicsum {
        const char *host, *nic;
        double tx, rx;
    } * nics; /* per NIC the graph names, in order of first mention */
    size_t nnics;
    struct mism {
        uint64_t comm_id, seq;
        int order; /* 0: the ranks called different collectives; 1: in opposite orders */
    } * mism;      /* the first call each communicator's ranks disagree on (nccl_mismatch.c) */
    size_t nmism;
};

/* nccl_model.c */
int icx_nccl_dcmp(const void *a, const void *b);
int icx_nccl_call_cmp(const void *a, const void *b);
struct comm *icx_nccl_comm_get(struct icx_nccl *N, uint64_t id, int nranks);
void icx_nccl_push(double **v, size_t *n, double x);
/* The stack recorded for a call of p of the same shape as p->ncalls[i] (op, handle, count, type,
 * reduction, root or peer): the tracer takes one the first time a thread makes a call of a new
 * shape.  0: none. */
uint32_t icx_nccl_call_stack(const struct icx_proc *p, size_t i);
/* The communicator a call of process p used: the latest creation of that handle before t. */
const struct icx_rd_ncomm *icx_nccl_comm_of(const struct icx_proc *p, uint64_t h, double t);
/* Every call is written on entry (pending) and on return: did the entry record p->ncalls[i] get
 * its return (or did its thread go on to another call)? */
int icx_nccl_entry_returned(const struct icx_proc *p, size_t i);
/* The job's start on the wall clock, s: its earliest process's first clock sample (INFINITY
 * when no process has one). */
double icx_nccl_job_t0(const struct icx_trace *t);
/* s to add to p's monotonic times for its wall clock */
double icx_nccl_wall_offset(const struct icx_proc *p);
/* Calls of every process on one timeline (a call in a group ends with its group), unsorted. */
struct call *icx_nccl_collect(const struct icx_trace *t, size_t *ncalls);
/* The end of the instance starting at v[i] of the sorted calls. */
size_t icx_nccl_instance_end(const struct call *v, size_t n, size_t i);
/* How v[i..j) can be timed: 2 every call's GPU span finished, 1 none GPU-timed, 0 mixed. */
int icx_nccl_instance_timing(const struct call *v, size_t i, size_t j);
/* The q-quantile of n sorted values (NaN for none). */
double icx_nccl_pct(const double *sorted, size_t n, double q);

/* The parts, in the order report_nccl.c runs them. */
void icx_nccl_stats_calls(const struct icx_trace *t, struct icx_nccl *N, const struct call *v,
                          size_t n); /* nccl_stats.c */
void icx_nccl_align_clocks(const struct icx_trace *t, struct icx_nccl *N, struct call *v,
                           size_t n); /* nccl_clock.c */
void icx_nccl_stats_instances(struct icx_nccl *N, const struct call *v,
                              size_t n);           /* nccl_stats.c */
void icx_nccl_stats_summarize(struct icx_nccl *N); /* nccl_stats.c */
/* P(X >= k) for X ~ Binomial(n, p) (nccl_straggler.c). */
double icx_binomial_tail(uint64_t n, uint64_t k, double p);
void icx_nccl_stragglers(struct icx_nccl *N, const struct call *v, size_t n,
                         struct icx_findings *F);                        /* nccl_straggler.c */
void icx_nccl_route(struct icx_nccl *N, const struct call *v, size_t n); /* nccl_route.c */
void icx_nccl_hangs(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F);
/* Ranks whose call #k of a communicator differs from the others' (nccl_mismatch.c). */
void icx_nccl_mismatches(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F);
/* Communicators entered in opposite orders: deadlocks with no rank missing (nccl_order.c). */
void icx_nccl_order_cycles(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F);
/* Sends and receives that do not pair up in count or size (nccl_p2p.c). */
void icx_nccl_p2p_pairs(const struct icx_trace *t, struct icx_nccl *N, struct icx_findings *F);
/* How many ranks aborted communicator id (ncclCommAbort), the first at *first s into the job
 * (report_nccl_errors.c). */
int icx_nccl_aborts_of(const struct icx_trace *t, uint64_t id, double *first);
/* nccl_hang.c */
struct icx_counters;
/* Add to the GPUs' NVLink counter rows what NCCL's routing put on NVLink (nccl_route.c). */
void icx_nccl_explain_counters(const struct icx_nccl *N, struct icx_counters *C);

#endif
