/* RDMA verbs, data plane: the wrappers installed into each context's ops and what they count. */
#ifndef ICX_VERBS_DATA_H
#define ICX_VERBS_DATA_H

#include <infiniband/verbs.h>

#include "runtime.h"

struct icx_frame;
struct icx_tbuf;

/* The wrappers installed into a context's ops (verbs.c swaps them in). */
int icx_vw_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int icx_vw_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int icx_vw_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int icx_vw_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);

/* A send request built through the extended API, counted when its batch completes. */
struct icx_vpend {
    uint64_t wr_id, bytes;
    uint32_t flags, nsge;
    uint8_t opcode;
};
/* Count n completed extended-API requests of QP qpn on context slot `slot`, plus extra_count
 * requests (extra_bytes in all) past the batch's capacity. */
void icx_verbs_count_sends(uint16_t slot, uint32_t qpn, const struct icx_vpend *p, unsigned n,
                           uint64_t extra_count, uint64_t extra_bytes, uint8_t extra_op,
                           uint64_t t0);

/* Writer: what thread b's counters gained since the last flush, as VERBS_AGG records. */
void icx_verbs_drain_agg(struct icx_frame *f, struct icx_tbuf *b);

#endif
