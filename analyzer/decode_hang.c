/* Decoding of the hang dumps (format 1.5, trace_format.h section 12). */
#include <stdlib.h>
#include <string.h>

#include "decode.h"

/* The dump episode a THREAD_STATE or PY_STACKS belongs to: the latest one of that number. */
static struct icx_rd_hdump *episode_of(struct icx_proc *p, uint32_t episode)
{
    for (size_t i = p->nhdumps; i-- > 0;)
        if (p->hdumps[i].episode == episode)
            return &p->hdumps[i];
    return NULL;
}

void icx_decode_hang(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx)
{
    (void)ctx;
    if (r->type == ICX_REC_HANG_DUMP && size >= sizeof(struct icx_rec_hang_dump) &&
        !icx_grow((void **)&p->hdumps, &p->cap_hdumps, p->nhdumps, sizeof(*p->hdumps))) {
        const struct icx_rec_hang_dump *x = (const void *)r;
        p->hdumps[p->nhdumps++] = (struct icx_rd_hdump){
            x->episode, r->aux,          x->nthreads, x->api, x->python, x->mono_ns,
            x->age_ns,  x->threshold_ns, x->comm,     x->seq, NULL};
    } else if (r->type == ICX_REC_THREAD_STATE && size >= sizeof(struct icx_rec_thread_state) &&
               !icx_grow((void **)&p->tstates, &p->cap_tstates, p->ntstates, sizeof(*p->tstates))) {
        const struct icx_rec_thread_state *x = (const void *)r;
        p->tstates[p->ntstates++] =
            (struct icx_rd_tstate){x->episode,     r->aux,  x->stack, x->stack_status, x->syscall,
                                   (char)x->state, x->name, x->wchan, x->pthread,      x->arg0};
    } else if (r->type == ICX_REC_PY_STACKS && size >= sizeof(struct icx_rec_py_stacks)) {
        const struct icx_rec_py_stacks *x = (const void *)r;
        struct icx_rd_hdump *d = episode_of(p, r->aux);
        const char *part = icx_proc_string(p, x->text);
        if (!d || !part || (x->part == 0 && d->py))
            return;
        size_t old = d->py ? strlen(d->py) : 0, add = strlen(part);
        if (old + add > (16u << 20))
            return; /* bounded: a dump's text is at most a few MiB */
        char *n = realloc(d->py, old + add + 1);
        if (!n)
            return;
        memcpy(n + old, part, add + 1);
        d->py = n;
    }
}
