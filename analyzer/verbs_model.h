/* The RDMA verbs report's model (report_verbs.c), shared with the rail rules (verbs_rails.c). */
#ifndef ICX_VERBS_MODEL_H
#define ICX_VERBS_MODEL_H

#include "analysis.h"

#define ICX_VERBS_NCLASS 48 /* size classes reported per NIC (icx/format_util.h) */

struct vqp_row {
    const struct icx_proc *p;
    const struct icx_rd_vqp *q; /* NULL: traffic on a QP whose creation was not traced */
    uint16_t ctx;
    uint32_t qpn;
    int peer; /* index of the matched row, -1 */
    struct {
        uint8_t kind, opcode;
        uint64_t count, bytes, signaled;
    } ops[16];
    int nops;
    uint64_t out_bytes, in_read_bytes; /* SEND/WRITE posted here; READ posted here */
};

struct vnic {
    char host[128], name[64];
    int port;
    uint32_t rate_mbps, port_rate_mbps; /* from sysfs; as the opened port reported it */
    unsigned link_layer;
    int opened; /* some traced process opened it */
    uint64_t tx_bytes, rx_bytes, wrs, recvs, completions, errors;
    uint64_t size_hist[ICX_VERBS_NCLASS];
    double t0, t1, rate_bps; /* traced span of its sends; mean rate over it */
    double bin_s, *bins;     /* bytes its posted requests moved, per bin of bin_s from t0 */
    size_t nbins;
    double peak_bps;
    int rail;         /* a rail of the job (mark_rails) */
    int foreign;      /* it carried traffic of a GPU it is not the closest NIC of */
    int deserted;     /* it is the closest NIC of a GPU whose traffic left through another */
    int has_counters; /* the port's own data counters, over the traced window */
    uint64_t counter_tx, counter_rx;
};

struct vpair {
    char src[128], dst[128];
    uint64_t bytes;
};

/* GPU <-> NIC, per host: the RDMA bytes that processes driving a GPU moved through a NIC. */
struct gpunic {
    char host[128], gpu_bus[32], nic[64];
    int gpu;
    unsigned path;
    uint64_t bytes;
    double t0, t1;
};

struct icx_verbs {
    struct gpunic *gn;
    size_t ngn;
    struct vqp_row *qps;
    size_t nqps;
    struct vnic *nics;
    size_t nnics;
    struct vpair *pairs;
    size_t npairs;
    uint64_t errors;
};

static inline const char *icx_verbs_host(const struct icx_proc *p)
{
    return p->host ? p->host : "?";
}

static inline const char *icx_ll_name(unsigned ll)
{
    return ll == ICX_LL_INFINIBAND ? "InfiniBand" : ll == ICX_LL_ETHERNET ? "RoCE" : "?";
}

/* verbs_rails.c: the GPU a process drives (its communicators' device, else where it allocated
 * most), -1 if none. */
int icx_verbs_primary_gpu(const struct icx_proc *p);
/* The job's rails per host, then nic_imbalance and nic_degraded findings against them, then
 * rail_misalignment per process. */
void icx_verbs_rails(struct icx_verbs *V, const struct icx_trace *t, struct icx_findings *F);

#endif
