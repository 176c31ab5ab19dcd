/* Reports computed from a read trace.  Each report has compute / print (text) / json / free. */
#ifndef ICX_REPORT_H
#define ICX_REPORT_H

#include <stdio.h>

#include "json.h"
#include "reader.h"

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

int icx_links_compute(const struct icx_trace *t, struct icx_links *L);
void icx_links_print(FILE *out, const struct icx_links *L);
void icx_links_json(struct icx_json *j, const struct icx_links *L);
void icx_links_free(struct icx_links *L);

/* Findings: problems a report names, with evidence and a fix (`kind` as in docs/JSON.md). */
struct icx_finding {
    char kind[32], host[128];
    int32_t pid, rank;
    char evidence[1400], fix[600];
};
struct icx_findings {
    struct icx_finding *v;
    size_t n;
};
void icx_findings_print(FILE *out, const struct icx_findings *F);
void icx_findings_json(struct icx_json *j, const struct icx_findings *F);
void icx_findings_free(struct icx_findings *F);
void icx_finding_add(struct icx_findings *F, const char *kind, const struct icx_proc *p,
                     const char *evidence, const char *fix);

/* report_verbs.c: RDMA traffic per QP, NIC port and node pair; NIC imbalance, completion errors. */
struct icx_verbs;
struct icx_verbs *icx_verbs_compute(const struct icx_trace *t, struct icx_findings *F);
void icx_verbs_print(FILE *out, const struct icx_verbs *V);
void icx_verbs_json(struct icx_json *j, const struct icx_verbs *V);
void icx_verbs_free(struct icx_verbs *V);

/* report_nccl.c: NCCL per communicator and op (calls, bytes, time, bus bandwidth); stragglers. */
struct icx_nccl;
struct icx_nccl *icx_nccl_compute(const struct icx_trace *t, struct icx_findings *F);
void icx_nccl_print(FILE *out, const struct icx_nccl *N);
void icx_nccl_json(struct icx_json *j, const struct icx_nccl *N);
struct icx_counters;
void icx_nccl_explain_counters(const struct icx_nccl *N, struct icx_counters *C);
void icx_nccl_free(struct icx_nccl *N);

/* report_numa.c: placement of GPUs, GPU-driving threads and pinned buffers per process. */
struct icx_numa_proc {
    const struct icx_proc *proc;
    int gpu_node; /* -2 no GPU; -1 several or unknown */
    char gpu_cpus[256];
    uint64_t thread_samples_local, thread_samples_remote;
    uint64_t hcopy_local, hcopy_remote, hcopy_unknown;
    int remote_buffer_node;
    int thread_finding, memory_finding;
};
struct icx_numa {
    struct icx_numa_proc *procs;
    size_t n;
};
void icx_numa_compute(const struct icx_trace *t, struct icx_numa *N, struct icx_findings *F);
void icx_numa_print(FILE *out, const struct icx_numa *N);
void icx_numa_json(struct icx_json *j, const struct icx_numa *N);
void icx_numa_free(struct icx_numa *N);

/* report_counters.c: NVLink hardware counters against intercepted peer-copy bytes, per GPU. */
struct icx_counter_row {
    int nic; /* 0: GPU NVLink counters, bus = PCI address; 1: IB port, bus = NIC name */
    uint64_t wait0, wait1, discards0, discards1; /* IB only */
    char host[128], bus[32];
    int device; /* CUDA ordinal in a process that used it, -1 none */
    double t0, t1;
    uint64_t tx0, rx0, tx1, rx1;
    uint64_t tx_explained, rx_explained; /* by intercepted copies */
    uint64_t tx_nccl, rx_nccl;           /* by NCCL's routing (icx_nccl_explain_counters) */
    uint64_t resolution; /* bytes: the counters count whole KiB per link */
    /* Over time, from consecutive samples: TX rate mean and peak, and the time spent above 80 %
     * of the GPU's NVLink capacity (per direction). */
    double capacity_bps, tx_mean_bps, tx_peak_bps, tx_time_above_80;
};
struct icx_counters {
    struct icx_counter_row *rows;
    size_t n;
    uint64_t events_lost; /* dropped events: traffic counted but unexplainable */
};
void icx_counters_compute(const struct icx_trace *t, struct icx_counters *C);
struct icx_counter_row *icx_counter_row_at(struct icx_counters *C, const struct icx_proc *p,
                                           int dev, double t);
/* The over-time figures (needs compute first, for the windows and capacities). */
void icx_counters_over_time(const struct icx_trace *t, struct icx_counters *C);
void icx_counters_print(FILE *out, const struct icx_counters *C);
void icx_counters_json(struct icx_json *j, const struct icx_counters *C);
void icx_counters_free(struct icx_counters *C);

/* report_topo.c: GPU x GPU matrix (NV#, NODE, SYS) annotated with measured GB/s. */
void icx_topo_print(FILE *out, const struct icx_trace *t, const struct icx_links *L);
void icx_topo_json(struct icx_json *j, const struct icx_trace *t, const struct icx_links *L);

/* report_summary.c: inputs, processes, loss, notes. */
void icx_summary_print(FILE *out, const struct icx_trace *t);
void icx_summary_json(struct icx_json *j, const struct icx_trace *t);

void icx_fmt_bytes(char *buf, size_t len, double bytes);

#endif
