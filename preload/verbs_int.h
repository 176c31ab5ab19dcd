/* Shared by the verbs hooks: control plane and context table (verbs.c), data plane (verbs_data.c).
 */
#ifndef ICX_VERBS_INT_H
#define ICX_VERBS_INT_H

#include <infiniband/verbs.h>

#include "icx.h"

#define ICX_VCTX_MAX 64   /* device contexts traced per process */
#define ICX_VPORT_MAX 4   /* ports described per device */
#define ICX_VCTX_NONE 0xffff

/* One opened device context: the provider's data-plane entry points we replaced, kept here. */
struct icx_vctx {
    _Atomic(struct ibv_context *) ctx; /* NULL once closed (the slot is not reused) */
    int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **);
    int (*post_recv)(struct ibv_qp *, struct ibv_recv_wr *, struct ibv_recv_wr **);
    int (*post_srq_recv)(struct ibv_srq *, struct ibv_recv_wr *, struct ibv_recv_wr **);
    int (*poll_cq)(struct ibv_cq *, int, struct ibv_wc *);
    struct ibv_qp *(*create_qp_ex)(struct ibv_context *, struct ibv_qp_init_attr_ex *);
    struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *, struct ibv_cq_init_attr_ex *);
    /* facts for the writer, filled before the slot is published */
    char name[64];
    uint64_t guid;
    unsigned nports;
    struct icx_rec_verbs_port ports[ICX_VPORT_MAX];
    int announced; /* writer only */
};

extern struct icx_vctx icx_vctx_tab[ICX_VCTX_MAX];
extern _Atomic unsigned icx_nvctx;

/* The slot of a context whose entry points we replaced.  Contexts are few (one per NIC): a scan. */
static inline const struct icx_vctx *icx_vctx_of(const struct ibv_context *ctx)
{
    unsigned n = atomic_load_explicit(&icx_nvctx, memory_order_acquire);
    for (unsigned i = 0; i < n; i++)
        if (atomic_load_explicit(&icx_vctx_tab[i].ctx, memory_order_relaxed) == ctx)
            return &icx_vctx_tab[i];
    return NULL;
}

static inline uint16_t icx_vctx_slot(const struct icx_vctx *v)
{
    return v ? (uint16_t)(v - icx_vctx_tab) : ICX_VCTX_NONE;
}

/* Size class of a request: 0 for 0 bytes, else c with 2^(c-2) < bytes <= 2^(c-1). */
static inline unsigned icx_size_class(uint64_t bytes)
{
    return bytes == 0 ? 0 : bytes == 1 ? 1 : 66u - (unsigned)__builtin_clzll(bytes - 1) - 1u;
}

/* A send request built through the extended API, counted when its batch completes. */
struct icx_vpend {
    uint64_t wr_id, bytes;
    uint32_t flags, nsge;
    uint8_t opcode;
};
void icx_verbs_count_sends(uint16_t slot, uint32_t qpn, const struct icx_vpend *p, unsigned n,
                           uint64_t extra_count, uint64_t extra_bytes, uint8_t extra_op,
                           uint64_t t0);

/* verbs_data.c: the wrappers installed into contexts and extended QPs */
int icx_vw_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int icx_vw_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int icx_vw_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int icx_vw_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
/* verbs_qpx.c */
void icx_vqpx_adopt(struct ibv_qp_ex *qpx, const struct icx_vctx *v);
void icx_vqpx_forget(struct ibv_qp *qp);

#endif
