/* RDMA verbs, extended post API (ibv_wr_start ... ibv_wr_complete) of QPs from ibv_qp_to_qp_ex. */
#ifndef ICX_VERBS_QPX_H
#define ICX_VERBS_QPX_H

#include <infiniband/verbs.h>

struct icx_vctx;

/* Take over an extended QP's request builders (once per QP). */
void icx_vqpx_adopt(struct ibv_qp_ex *qpx, const struct icx_vctx *v);
/* The QP is being destroyed. */
void icx_vqpx_forget(struct ibv_qp *qp);

/* The table's lock across fork (verbs.c's module entry). */
void icx_vqpx_fork_prepare(void);
void icx_vqpx_fork_parent(void);
void icx_vqpx_fork_child(void);

#endif
