/* Decoding of the RDMA verbs records (format 1.2, trace_format.h section 10).  Records shorter
 * than the layout this reader knows are ignored, like every other record kind. */
#include <stdio.h>
#include <string.h>

#include "icx/format_util.h"

#include "decode.h"

static struct icx_rd_vqp *vqp_get(struct icx_proc *p, uint16_t ctx, uint32_t qpn)
{
    /* The latest QP of that number: numbers are reused after destroy. */
    for (size_t i = p->nvqps; i-- > 0;)
        if (p->vqps[i].ctx == ctx && p->vqps[i].qp_num == qpn)
            return &p->vqps[i];
    if (icx_grow((void **)&p->vqps, &p->cap_vqps, p->nvqps, sizeof(*p->vqps)))
        return NULL;
    struct icx_rd_vqp *q = &p->vqps[p->nvqps++];
    memset(q, 0, sizeof(*q));
    q->ctx = ctx;
    q->qp_num = qpn;
    q->state = -1;
    return q;
}

static void traffic_add(struct icx_proc *p, const struct icx_rd_vtraffic *t)
{
    if (!icx_grow((void **)&p->vtraffic, &p->cap_vtraffic, p->nvtraffic, sizeof(*p->vtraffic)))
        p->vtraffic[p->nvtraffic++] = *t;
}

void icx_decode_verbs(struct icx_proc *p, const struct icx_rec *r, size_t size,
                      struct icx_decode_ctx *ctx)
{
    int64_t ts = ctx->ts;
    switch (r->type) {
    case ICX_REC_VERBS_DEVICE:
        if (size >= sizeof(struct icx_rec_verbs_device) && r->aux < ICX_RD_MAX_VCTX) {
            const struct icx_rec_verbs_device *x = (const void *)r;
            struct icx_rd_vctx *v = &p->vctx[r->aux];
            v->present = 1;
            snprintf(v->name, sizeof(v->name), "%s", icx_proc_string(p, x->name));
            v->guid = x->node_guid;
            v->nports = x->nports;
        }
        break;
    case ICX_REC_VERBS_PORT:
        if (size >= sizeof(struct icx_rec_verbs_port) && r->aux < ICX_RD_MAX_VCTX) {
            const struct icx_rec_verbs_port *x = (const void *)r;
            if (x->port >= 1 && x->port <= 4)
                p->vctx[r->aux].ports[x->port - 1] =
                    (struct icx_rd_vport){x->port, x->state, x->link_layer, x->lid, x->rate_mbps};
        }
        break;
    case ICX_REC_VERBS_AGG:
        if (size >= sizeof(struct icx_rec_verbs_agg)) {
            const struct icx_rec_verbs_agg *x = (const void *)r;
            struct icx_rd_vtraffic t = {.ctx = (uint16_t)r->aux,
                                        .qp_num = x->qp_num,
                                        .kind = x->kind,
                                        .opcode = x->opcode,
                                        .size_class = x->size_class,
                                        .count = x->count,
                                        .bytes = x->bytes,
                                        .signaled = x->signaled,
                                        .t0 = (double)x->t0_ns / 1e9,
                                        .t1 = (double)x->t1_ns / 1e9};
            traffic_add(p, &t);
        }
        break;
    case ICX_REC_VERBS_QP:
        if (size >= sizeof(struct icx_rec_verbs_qp)) {
            const struct icx_rec_verbs_qp *x = (const void *)r;
            unsigned api = r->aux & 0xffff;
            if (x->result != 0)
                break; /* a failed call changed nothing */
            struct icx_rd_vqp *q = vqp_get(p, x->ctx, x->qp_num);
            if (!q)
                break;
            if (api == ICX_API_ibv_create_qp || api == ICX_API_ibv_create_qp_ex)
                q->qp_type = x->qp_type;
            if (x->state != 0xff)
                q->state = x->state;
            if (x->port)
                q->port = x->port;
            if (x->attr_mask & IBV_QP_DEST_QPN_BIT) {
                q->dest_qp_num = x->dest_qp_num;
                q->connected = 1;
            }
            if (x->attr_mask & IBV_QP_AV_BIT) {
                q->dlid = x->dlid;
                q->slid = x->slid;
                memcpy(q->remote_gid, x->remote_gid, 16);
                memcpy(q->local_gid, x->local_gid, 16);
            }
        }
        break;
    case ICX_REC_VERBS_MR:
        if (size >= sizeof(struct icx_rec_verbs_mr)) {
            const struct icx_rec_verbs_mr *x = (const void *)r;
            if ((r->aux & 0xffff) != ICX_API_ibv_dereg_mr && x->result == 0) {
                p->vmrs++;
                p->vmr_bytes += x->length;
                if (x->dmabuf_fd >= 0 || x->numa_node < 0)
                    p->vmr_gpu++;
                else if (x->numa_node < ICX_RD_MAX_NODES)
                    p->vmr_node_bytes[x->numa_node] += x->length;
            }
        }
        break;
    case ICX_REC_VERBS_WR:
        if (size >= sizeof(struct icx_rec_verbs_wr)) {
            const struct icx_rec_verbs_wr *x = (const void *)r;
            struct icx_rd_vtraffic t = {.ctx = x->ctx,
                                        .qp_num = x->qp_num,
                                        .kind = x->kind,
                                        .opcode = x->opcode,
                                        .size_class = (uint8_t)icx_size_class(x->bytes),
                                        .is_event = 1,
                                        .count = 1,
                                        .bytes = x->bytes,
                                        .signaled = (x->send_flags & 2u) != 0,
                                        .ts = ts};
            traffic_add(p, &t);
        }
        break;
    case ICX_REC_VERBS_WC:
        if (size >= sizeof(struct icx_rec_verbs_wc)) {
            const struct icx_rec_verbs_wc *x = (const void *)r;
            if (x->status != 0) {
                for (size_t i = 0; i < p->nvwc_errs; i++)
                    if (p->vwc_errs[i].ctx == x->ctx && p->vwc_errs[i].qp_num == x->qp_num &&
                        p->vwc_errs[i].status == x->status) {
                        p->vwc_errs[i].count++;
                        return;
                    }
                if (!icx_grow((void **)&p->vwc_errs, &p->cap_vwc_errs, p->nvwc_errs,
                              sizeof(*p->vwc_errs)))
                    p->vwc_errs[p->nvwc_errs++] =
                        (struct icx_rd_vwc_err){x->ctx, x->qp_num, x->status, x->vendor_err, 1};
                break;
            }
            uint64_t bytes = (x->opcode & 128) ? x->byte_len : 0;
            struct icx_rd_vtraffic t = {.ctx = x->ctx,
                                        .qp_num = x->qp_num,
                                        .kind = ICX_VK_COMPLETION,
                                        .opcode = x->opcode,
                                        .size_class = (uint8_t)icx_size_class(bytes),
                                        .is_event = 1,
                                        .count = 1,
                                        .bytes = bytes,
                                        .ts = ts};
            traffic_add(p, &t);
        }
        break;
    default: break;
    }
}

void icx_decode_verbs_finish(struct icx_proc *p)
{
    for (size_t i = 0; i < p->nvtraffic; i++) {
        struct icx_rd_vtraffic *t = &p->vtraffic[i];
        if (t->is_event)
            t->t0 = t->t1 = icx_proc_seconds(p, t->ts);
    }
}
