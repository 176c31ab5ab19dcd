/* The RDMA device contexts we took over: per context, the provider's data-plane entry points we
 * replaced (kept here, called by our wrappers) and what the writer says about the device. */
#ifndef ICX_VERBS_CTX_H
#define ICX_VERBS_CTX_H

#include <infiniband/verbs.h>

#include "runtime.h"

#define ICX_VCTX_MAX 64 /* device contexts traced per process */
#define ICX_VPORT_MAX 4 /* ports described per device */
#define ICX_VCTX_NONE 0xffff

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

/* A new slot, zeroed, with the registry locked (NULL, unlocked, when the table is full); fill it,
 * then icx_vctx_publish makes it visible to icx_vctx_of and unlocks. */
struct icx_vctx *icx_vctx_claim(void);
void icx_vctx_publish(struct icx_vctx *v, struct ibv_context *ctx);

/* The registry lock across fork (verbs.c's module entry). */
void icx_vctx_fork_prepare(void);
void icx_vctx_fork_parent(void);
void icx_vctx_fork_child(void);

#endif
