/* The per-link peer-copy report (report_links.c): its rows are what the topology report annotates.
 */
#ifndef ICX_REPORT_LINKS_H
#define ICX_REPORT_LINKS_H

#include "model.h"

struct icx_link_row {
    const char *host;
    int src, dst;
    char src_bus[32], dst_bus[32], device_name[128];
    unsigned kind, nlinks, flags;
    double capacity_bps;
    uint64_t ops, bytes, errors, timed_ops, timed_bytes;
    uint64_t captured_ops, captured_bytes; /* recorded into CUDA graphs, not executed then */
    double host_time;                      /* s, sum of host call durations */
    double busy_timed;                     /* s, union of GPU intervals of the timed copies */
    double busy_est;                       /* s, busy_timed scaled to all bytes */
    double achieved_bps;                   /* byte-weighted median of per-copy rates */
    double busy_bps;                       /* timed bytes / union busy time */
    double efficiency, utilization;
    double window, window_lo, window_hi;
    double *iv; /* GPU intervals: (start, end, bytes) triples */
    size_t niv, cap_iv;
    /* The call stack that issued most of this link's copies (when stacks were recorded). */
    const struct icx_proc *stack_proc;
    uint32_t stack_id;
    uint64_t stack_ops;
};

struct icx_links {
    struct icx_link_row *rows;
    size_t n, active;
    double max_over_mean, cv;
};

#endif
