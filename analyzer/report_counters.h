/* NVLink and IB counters against traced bytes (report_counters.c); the NCCL report adds what
 * NCCL's routing explains (icx_counter_row_at). */
#ifndef ICX_REPORT_COUNTERS_H
#define ICX_REPORT_COUNTERS_H

#include "model.h"

/* The first and last of a set of counter samples (several processes' samples of one counter):
 * first, the sample whose reads ended earliest; last, the one whose reads began latest.  Their
 * difference then holds all traffic between the two, even where a sampler was preempted
 * between its clock and its reads.  Start with {NULL, NULL}. */
struct icx_sample_span {
    const struct icx_counter_sample *first, *last;
};
void icx_sample_span_add(struct icx_sample_span *s, const struct icx_counter_sample *x);

/* report_counters.c: NVLink hardware counters against intercepted peer-copy bytes, per GPU. */
struct icx_counter_row {
    int nic; /* 0: GPU NVLink counters, bus = PCI address; 1: IB port, bus = NIC name */
    uint64_t wait0, wait1, discards0, discards1; /* IB only */
    char host[128], bus[32];
    int device;                  /* CUDA ordinal in a process that used it, -1 none */
    struct icx_sample_span span; /* of the host's samples */
    double t0, t1;
    uint64_t tx0, rx0, tx1, rx1;
    uint64_t tx_explained, rx_explained; /* by intercepted copies */
    uint64_t tx_nccl, rx_nccl;           /* by NCCL's routing (icx_nccl_explain_counters) */
    uint64_t resolution;                 /* bytes: the counters count whole KiB per link */
    /* Over time, from consecutive samples: TX rate mean and peak, and the time spent above 80 %
     * of the GPU's NVLink capacity (per direction). */
    double capacity_bps, tx_mean_bps, tx_peak_bps, tx_time_above_80;
};
struct icx_counters {
    struct icx_counter_row *rows;
    size_t n;
    uint64_t events_lost; /* dropped events: traffic counted but unexplainable */
};
/* The counter row of process p's CUDA device dev whose sampled window holds time t (monotonic s of
 * p), or NULL. */
struct icx_counter_row *icx_counter_row_at(struct icx_counters *C, const struct icx_proc *p,
                                           int dev, double t);

#endif
