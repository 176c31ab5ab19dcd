/* Decoding of the NCCL records (format 1.2, trace_format.h section 11). */
#include <string.h>

#include "reader.h"

void icx_read_nccl(struct icx_proc *p, const struct icx_rec *r, size_t size, int64_t ts,
                   uint32_t tid)
{
    if (r->type == ICX_REC_NCCL_COMM && size >= sizeof(struct icx_rec_nccl_comm) &&
        !icx_grow((void **)&p->ncomms, &p->cap_ncomms, p->nncomms, sizeof(*p->ncomms))) {
        const struct icx_rec_nccl_comm *x = (const void *)r;
        p->ncomms[p->nncomms++] =
            (struct icx_rd_ncomm){r->aux & 0xffff, x->comm,   x->comm_id, x->parent_id, x->rank,
                                  x->nranks,       x->device, x->result,  ts,           0};
    } else if (r->type == ICX_REC_NCCL_CALL && size >= sizeof(struct icx_rec_nccl_call) &&
               !icx_grow((void **)&p->ncalls, &p->cap_ncalls, p->nncalls, sizeof(*p->ncalls))) {
        const struct icx_rec_nccl_call *x = (const void *)r;
        struct icx_rd_ncall *c = &p->ncalls[p->nncalls++];
        memset(c, 0, sizeof(*c));
        c->api = r->aux & 0xffff;
        c->pending = ((r->aux >> ICX_EVF_SHIFT) & ICX_EVF_PENDING) != 0;
        c->tid = tid;
        c->group = x->group;
        c->comm = x->comm;
        c->count = x->count;
        c->bytes = x->bytes;
        c->stream = x->stream;
        c->seq = x->seq;
        c->peer = x->peer;
        c->result = x->result;
        c->dtype = x->dtype;
        c->redop = x->redop;
        c->ts = ts;
        c->dur = (int64_t)x->e.dur;
    }
}

void icx_nccl_finish(struct icx_proc *p)
{
    for (size_t i = 0; i < p->nncomms; i++)
        p->ncomms[i].t = (p->slope * (double)p->ncomms[i].ts + p->intercept) / 1e9;
    for (size_t i = 0; i < p->nncalls; i++) {
        struct icx_rd_ncall *c = &p->ncalls[i];
        c->t_enter = (p->slope * (double)c->ts + p->intercept) / 1e9;
        c->t_exit = c->t_enter + p->slope * (double)c->dur / 1e9;
    }
}
