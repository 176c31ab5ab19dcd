/* RDMA verbs, data plane: the wrappers installed into each context's ops (post_send, post_recv,
 * post_srq_recv, poll_cq) and into extended QPs (ibv_wr_*), and the aggregates they feed.
 *
 * A NIC takes millions of work requests per second, so by default nothing is written per request:
 * each posting thread keeps cumulative counters per (context, QP, kind, opcode, size class) in a
 * table only it writes, and the writer reads them every flush and writes what changed as
 * VERBS_AGG records.  The hot path is a table probe and three stores; no timestamp, no atomic
 * read-modify-write, no lock.  ICX_VERBS_EVENTS=1 writes every request and completion instead.
 * Posts are counted, not completions: programs ask for a completion on one request in many. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "icx/format_util.h"

#include "frame.h"
#include "hook.h"
#include "tbuf.h"
#include "verbs_ctx.h"
#include "verbs_data.h"

#define ICX_VAGG_N 1024 /* entries per thread, a power of two */
#define ICX_VAGG_PROBES 16

struct icx_vagg_ent {
    _Atomic uint64_t key; /* 0 free; set once by the owner, after the counts */
    _Atomic uint64_t count, bytes, signaled;
    uint64_t seen_count, seen_bytes, seen_signaled; /* the writer's */
};

struct icx_vagg {
    uint64_t t_seen_ns; /* writer: end of the interval last written */
    struct icx_vagg_ent e[ICX_VAGG_N];
    struct icx_vagg_ent overflow[4]; /* per kind, when the table is full */
};

/* key: slot+1 (8 bits) | kind (8) | opcode (8) | size class (8) | QP number (32) */
static inline uint64_t icx_vkey(uint16_t slot, unsigned kind, unsigned op, unsigned sc,
                                uint32_t qpn)
{
    return (uint64_t)((slot + 1u) & 0xff) << 56 | (uint64_t)kind << 48 |
           (uint64_t)(op & 0xff) << 40 | (uint64_t)sc << 32 | qpn;
}

static inline void icx_bump(_Atomic uint64_t *c, uint64_t by)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + by,
                          memory_order_relaxed);
}

static struct icx_vagg *icx_vagg_slow(void)
{
    struct icx_tbuf *b = icx_tbuf_slow();
    if (!b)
        return NULL;
    if (!b->ext[ICX_TBUF_EXT_VERBS]) {
        struct icx_vagg *a = calloc(1, sizeof(*a));
        if (!a) {
            icx_count_lost(ICX_LOST_no_buffer);
            return NULL;
        }
        a->t_seen_ns = icx_mono_ns(); /* the first interval starts at the first request */
        __atomic_store_n(&b->ext[ICX_TBUF_EXT_VERBS], a, __ATOMIC_RELEASE);
    }
    return b->ext[ICX_TBUF_EXT_VERBS];
}

static inline struct icx_vagg *icx_vagg_self(void)
{
    struct icx_tbuf *b = icx_self.buf;
    if (ICX_LIKELY(b != NULL && b != ICX_TBUF_DEAD && b->ext[ICX_TBUF_EXT_VERBS] != NULL))
        return b->ext[ICX_TBUF_EXT_VERBS];
    if (b == ICX_TBUF_DEAD)
        return NULL;
    return icx_vagg_slow();
}

static inline void icx_vagg_add(struct icx_vagg *a, uint64_t key, uint64_t n, uint64_t bytes,
                                unsigned sig)
{
    uint32_t i = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 54) & (ICX_VAGG_N - 1);
    for (unsigned probe = 0; probe < ICX_VAGG_PROBES; probe++, i = (i + 1) & (ICX_VAGG_N - 1)) {
        struct icx_vagg_ent *e = &a->e[i];
        uint64_t k = atomic_load_explicit(&e->key, memory_order_relaxed);
        if (ICX_LIKELY(k == key) || k == 0) {
            icx_bump(&e->count, n);
            icx_bump(&e->bytes, bytes);
            icx_bump(&e->signaled, sig);
            if (k == 0) /* a new entry: its counts are in place before the writer can see it */
                atomic_store_explicit(&e->key, key, memory_order_release);
            return;
        }
    }
    /* Full: a catch-all per kind (1..4) keeps the totals exact, losing only the QP and size. */
    struct icx_vagg_ent *e = &a->overflow[(key >> 48) & 3];
    icx_bump(&e->count, n);
    icx_bump(&e->bytes, bytes);
    icx_bump(&e->signaled, sig);
    atomic_store_explicit(&e->key, key & ~0xffffffffull, memory_order_release);
    icx_count_lost(ICX_LOST_verbs_agg_full);
}

/* Writer: what every thread's counters gained since the last flush, as VERBS_AGG records. */
static void icx_vagg_put(struct icx_frame *f, struct icx_vagg_ent *e, uint64_t t0, uint64_t t1)
{
    uint64_t key = atomic_load_explicit(&e->key, memory_order_acquire);
    if (!key)
        return;
    uint64_t c = atomic_load_explicit(&e->count, memory_order_relaxed);
    if (c == e->seen_count)
        return;
    uint64_t b = atomic_load_explicit(&e->bytes, memory_order_relaxed);
    uint64_t s = atomic_load_explicit(&e->signaled, memory_order_relaxed);
    struct icx_rec_verbs_agg *r =
        icx_frame_put(f, ICX_REC_VERBS_AGG, (uint32_t)((key >> 56) - 1), sizeof(*r));
    if (!r)
        return;
    r->t0_ns = t0;
    r->t1_ns = t1;
    r->qp_num = (uint32_t)key;
    r->kind = (uint8_t)(key >> 48);
    r->opcode = (uint8_t)(key >> 40);
    r->size_class = (uint8_t)(key >> 32);
    r->count = c - e->seen_count;
    r->bytes = b - e->seen_bytes;
    r->signaled = s - e->seen_signaled;
    e->seen_count = c;
    e->seen_bytes = b;
    e->seen_signaled = s;
}

void icx_verbs_drain_agg(struct icx_frame *f, struct icx_tbuf *b)
{
    struct icx_vagg *a = __atomic_load_n(&b->ext[ICX_TBUF_EXT_VERBS], __ATOMIC_ACQUIRE);
    if (!a)
        return;
    uint64_t now = icx_mono_ns();
    uint64_t t0 = a->t_seen_ns;
    for (unsigned i = 0; i < ICX_VAGG_N; i++)
        icx_vagg_put(f, &a->e[i], t0, now);
    for (unsigned i = 0; i < 4; i++)
        icx_vagg_put(f, &a->overflow[i], t0, now);
    a->t_seen_ns = now;
}

/* ---- events (ICX_VERBS_EVENTS=1) ---- */

static void icx_vev_wr(enum icx_api api, uint64_t t0, uint64_t t1, uint16_t slot, uint32_t qpn,
                       unsigned kind, unsigned op, uint64_t wr_id, uint64_t bytes, uint32_t nsge,
                       uint32_t flags)
{
    struct icx_slot s;
    struct icx_rec_verbs_wr *r = icx_reserve(sizeof(*r), &s);
    if (!r)
        return;
    r->e.h.type = ICX_REC_VERBS_WR;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = api;
    r->e.ts = (int64_t)t0;
    r->e.dur = t1 - t0;
    r->wr_id = wr_id;
    r->bytes = bytes;
    r->qp_num = qpn;
    r->ctx = slot;
    r->kind = (uint8_t)kind;
    r->opcode = (uint8_t)op;
    r->num_sge = nsge;
    r->send_flags = flags;
    icx_commit(&s);
}

static void icx_vev_wc(uint64_t t0, uint64_t t1, uint16_t slot, const struct ibv_wc *wc)
{
    struct icx_slot s;
    struct icx_rec_verbs_wc *r = icx_reserve(sizeof(*r), &s);
    if (!r)
        return;
    r->e.h.type = ICX_REC_VERBS_WC;
    r->e.h.size = sizeof(*r);
    r->e.h.aux = ICX_API_ibv_poll_cq;
    r->e.ts = (int64_t)t0;
    r->e.dur = t1 - t0;
    r->wr_id = wc->wr_id;
    r->qp_num = wc->qp_num;
    r->byte_len = wc->byte_len;
    r->ctx = slot;
    r->opcode = (uint8_t)wc->opcode;
    r->status = (uint8_t)wc->status;
    r->vendor_err = wc->vendor_err;
    icx_commit(&s);
}

/* ---- context ops ---- */

static inline uint64_t icx_sge_bytes(const struct ibv_sge *sg, int n)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++)
        b += sg[i].length;
    return b;
}

/* Requests from wr up to (not including) stop were accepted by the provider. */
static void icx_vsends(const struct icx_vctx *v, const struct ibv_qp *qp,
                       const struct ibv_send_wr *wr, const struct ibv_send_wr *stop, uint64_t t0)
{
    uint16_t slot = icx_vctx_slot(v);
    if (ICX_UNLIKELY(icx_cfg.verbs_events)) {
        uint64_t t1 = icx_ticks();
        for (; wr && wr != stop; wr = wr->next)
            icx_vev_wr(ICX_API_ibv_post_send, t0, t1, slot, qp->qp_num, ICX_VK_SEND, wr->opcode,
                       wr->wr_id, icx_sge_bytes(wr->sg_list, wr->num_sge), (uint32_t)wr->num_sge,
                       wr->send_flags);
        return;
    }
    struct icx_vagg *a = icx_vagg_self();
    if (!a)
        return;
    for (; wr && wr != stop; wr = wr->next) {
        uint64_t bytes = icx_sge_bytes(wr->sg_list, wr->num_sge);
        icx_vagg_add(a, icx_vkey(slot, ICX_VK_SEND, wr->opcode, icx_size_class(bytes), qp->qp_num),
                     1, bytes, (wr->send_flags & IBV_SEND_SIGNALED) != 0);
    }
}

static void icx_vrecvs(const struct icx_vctx *v, uint32_t qpn, unsigned kind,
                       const struct ibv_recv_wr *wr, const struct ibv_recv_wr *stop, uint64_t t0)
{
    uint16_t slot = icx_vctx_slot(v);
    enum icx_api api = kind == ICX_VK_RECV ? ICX_API_ibv_post_recv : ICX_API_ibv_post_srq_recv;
    if (ICX_UNLIKELY(icx_cfg.verbs_events)) {
        uint64_t t1 = icx_ticks();
        for (; wr && wr != stop; wr = wr->next)
            icx_vev_wr(api, t0, t1, slot, qpn, kind, ICX_VOP_RECV, wr->wr_id,
                       icx_sge_bytes(wr->sg_list, wr->num_sge), (uint32_t)wr->num_sge, 0);
        return;
    }
    struct icx_vagg *a = icx_vagg_self();
    if (!a)
        return;
    for (; wr && wr != stop; wr = wr->next) {
        uint64_t bytes = icx_sge_bytes(wr->sg_list, wr->num_sge);
        icx_vagg_add(a, icx_vkey(slot, kind, ICX_VOP_RECV, icx_size_class(bytes), qpn), 1, bytes,
                     0);
    }
}

void icx_verbs_count_sends(uint16_t slot, uint32_t qpn, const struct icx_vpend *p, unsigned n,
                           uint64_t extra_count, uint64_t extra_bytes, uint8_t extra_op,
                           uint64_t t0)
{
    if (ICX_UNLIKELY(icx_cfg.verbs_events)) {
        uint64_t t1 = icx_ticks();
        for (unsigned i = 0; i < n; i++)
            icx_vev_wr(ICX_API_ibv_wr_complete, t0, t1, slot, qpn, ICX_VK_SEND, p[i].opcode,
                       p[i].wr_id, p[i].bytes, p[i].nsge, p[i].flags);
        if (!extra_count) /* the rest are counted in aggregates */
            return;
    }
    struct icx_vagg *a = icx_vagg_self();
    if (!a)
        return;
    if (!icx_cfg.verbs_events)
        for (unsigned i = 0; i < n; i++)
            icx_vagg_add(a,
                         icx_vkey(slot, ICX_VK_SEND, p[i].opcode, icx_size_class(p[i].bytes), qpn),
                         1, p[i].bytes, (p[i].flags & IBV_SEND_SIGNALED) != 0);
    /* Past ICX_VPEND in one batch: exact totals, size class of their mean. */
    if (extra_count)
        icx_vagg_add(
            a,
            icx_vkey(slot, ICX_VK_SEND, extra_op, icx_size_class(extra_bytes / extra_count), qpn),
            extra_count, extra_bytes, 0);
}

/* The wrappers: the context's original op from its slot (a context we swapped always has one, but
 * fail safe), then the bracket (hook.h).  Posts are recorded when the provider accepted them. */
int icx_vw_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    const struct icx_vctx *v = icx_vctx_of(qp->context);
    struct icx_call c;
    if (ICX_UNLIKELY(!v || !v->post_send))
        return ENOSYS;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return v->post_send(qp, wr, bad);
    uint64_t t0 = ICX_UNLIKELY(icx_cfg.verbs_events) ? icx_ticks() : 0;
    int rc = v->post_send(qp, wr, bad);
    icx_call_returned(&c);
    if (rc == 0 || *bad != wr)
        icx_vsends(v, qp, wr, rc == 0 ? NULL : *bad, t0);
    icx_call_end(&c);
    return rc;
}

/* After a receive post: count what the provider accepted (rc 0: all; else up to *bad). */
static inline void icx_vrecv_accepted(const struct icx_vctx *v, uint32_t qpn, unsigned kind,
                                      const struct ibv_recv_wr *wr, int rc,
                                      struct ibv_recv_wr *const *bad, uint64_t t0)
{
    if (rc == 0 || *bad != wr)
        icx_vrecvs(v, qpn, kind, wr, rc == 0 ? NULL : *bad, t0);
}

int icx_vw_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    const struct icx_vctx *v = icx_vctx_of(qp->context);
    struct icx_call c;
    if (ICX_UNLIKELY(!v || !v->post_recv))
        return ENOSYS;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return v->post_recv(qp, wr, bad);
    uint64_t t0 = ICX_UNLIKELY(icx_cfg.verbs_events) ? icx_ticks() : 0;
    int rc = v->post_recv(qp, wr, bad);
    icx_call_returned(&c);
    icx_vrecv_accepted(v, qp->qp_num, ICX_VK_RECV, wr, rc, bad, t0);
    icx_call_end(&c);
    return rc;
}

int icx_vw_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    const struct icx_vctx *v = icx_vctx_of(srq->context);
    struct icx_call c;
    if (ICX_UNLIKELY(!v || !v->post_srq_recv))
        return ENOSYS;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return v->post_srq_recv(srq, wr, bad);
    uint64_t t0 = ICX_UNLIKELY(icx_cfg.verbs_events) ? icx_ticks() : 0;
    int rc = v->post_srq_recv(srq, wr, bad);
    icx_call_returned(&c);
    icx_vrecv_accepted(v, 0, ICX_VK_SRQ_RECV, wr, rc, bad, t0);
    icx_call_end(&c);
    return rc;
}

/* The completions of one successful poll. */
static void icx_vcompletions(const struct icx_vctx *v, const struct ibv_wc *wc, int got,
                             uint64_t t0)
{
    uint16_t slot = icx_vctx_slot(v);
    uint64_t t1 = icx_ticks();
    struct icx_vagg *a = icx_cfg.verbs_events ? NULL : icx_vagg_self();
    for (int i = 0; i < got; i++) {
        const struct ibv_wc *w = &wc[i];
        if (w->status != IBV_WC_SUCCESS || icx_cfg.verbs_events) {
            icx_vev_wc(t0 ? t0 : t1, t1, slot, w);
            continue;
        }
        /* byte_len is defined for receive completions only. */
        uint64_t bytes = (w->opcode & IBV_WC_RECV) ? w->byte_len : 0;
        if (a)
            icx_vagg_add(
                a, icx_vkey(slot, ICX_VK_COMPLETION, w->opcode, icx_size_class(bytes), w->qp_num),
                1, bytes, 0);
    }
}

/* Polling is the hottest call there is and mostly finds nothing: the real poll goes first and the
 * bracket opens only when there are completions to count (the empty poll costs one branch). */
int icx_vw_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    const struct icx_vctx *v = icx_vctx_of(cq->context);
    struct icx_call c;
    if (ICX_UNLIKELY(!v || !v->poll_cq))
        return -1;
    uint64_t t0 = ICX_UNLIKELY(icx_cfg.verbs_events) ? icx_ticks() : 0;
    int got = v->poll_cq(cq, n, wc);
    if (got <= 0 || !icx_call_begin_untimed(&c, &icx_self.guard))
        return got;
    icx_call_returned(&c);
    icx_vcompletions(v, wc, got, t0);
    icx_call_end(&c);
    return got;
}
