/* RDMA verbs, extended post API (ibv_wr_start ... ibv_wr_complete).  It bypasses ops.post_send:
 * every QP handed out by ibv_qp_to_qp_ex has its own table of wr_* entry points.  We replace the
 * ones that build data-carrying requests, keep the provider's per QP, note each request as it is
 * built (opcode from the builder, size from the wr_set_sge/inline calls, wr_id and flags from the
 * QP's fields) and count them only when wr_complete succeeds; wr_abort drops them. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "hook.h"
#include "verbs_ctx.h"
#include "verbs_data.h"
#include "verbs_qpx.h"

#define ICX_VPEND 64
#define ICX_VQPX_N 4096 /* QPs traced through the extended API, a power of two */
#define ICX_VQPX_GONE ((struct ibv_qp_ex *)1)

struct icx_vqpx {
    _Atomic(struct ibv_qp_ex *) qpx; /* ICX_VQPX_GONE once destroyed (entries are never freed) */
    uint16_t slot;
    void (*start)(struct ibv_qp_ex *);
    int (*complete)(struct ibv_qp_ex *);
    void (*abort)(struct ibv_qp_ex *);
    void (*rdma_write)(struct ibv_qp_ex *, uint32_t, uint64_t);
    void (*rdma_write_imm)(struct ibv_qp_ex *, uint32_t, uint64_t, __be32);
    void (*rdma_read)(struct ibv_qp_ex *, uint32_t, uint64_t);
    void (*send)(struct ibv_qp_ex *);
    void (*send_imm)(struct ibv_qp_ex *, __be32);
    void (*send_inv)(struct ibv_qp_ex *, uint32_t);
    void (*cmp_swp)(struct ibv_qp_ex *, uint32_t, uint64_t, uint64_t, uint64_t);
    void (*fetch_add)(struct ibv_qp_ex *, uint32_t, uint64_t, uint64_t);
    void (*set_sge)(struct ibv_qp_ex *, uint32_t, uint64_t, uint32_t);
    void (*set_sge_list)(struct ibv_qp_ex *, size_t, const struct ibv_sge *);
    void (*set_inline)(struct ibv_qp_ex *, void *, size_t);
    void (*set_inline_list)(struct ibv_qp_ex *, size_t, const struct ibv_data_buf *);
    /* the batch being built (one thread per QP at a time, as the API requires) */
    uint64_t t0;
    unsigned npend;
    int cur; /* index of the request being built, -1: none or an overflow one */
    uint64_t extra_count, extra_bytes; /* requests past ICX_VPEND in one batch */
    uint8_t extra_op;
    struct icx_vpend pend[ICX_VPEND];
};

static struct icx_vqpx *_Atomic icx_vqpx_tab[ICX_VQPX_N];
static struct icx_vqpx *_Atomic icx_vqpx_first; /* fallback: never lose a request */
static pthread_mutex_t icx_vqpx_lock = PTHREAD_MUTEX_INITIALIZER;

static inline uint32_t icx_vqpx_hash(const void *p)
{
    return (uint32_t)(((uintptr_t)p * 0x9E3779B97F4A7C15ull) >> 52) & (ICX_VQPX_N - 1);
}

static struct icx_vqpx *icx_vqpx_find(const struct ibv_qp_ex *q)
{
    uint32_t i = icx_vqpx_hash(q);
    for (unsigned n = 0; n < ICX_VQPX_N; n++, i = (i + 1) & (ICX_VQPX_N - 1)) {
        struct icx_vqpx *x = atomic_load_explicit(&icx_vqpx_tab[i], memory_order_acquire);
        if (!x)
            break;
        if (atomic_load_explicit(&x->qpx, memory_order_relaxed) == q)
            return x;
    }
    return atomic_load_explicit(&icx_vqpx_first, memory_order_acquire);
}

static void icx_vpend_open(struct icx_vqpx *x, const struct ibv_qp_ex *q, uint8_t op, uint64_t b)
{
    if (x->npend < ICX_VPEND) {
        x->cur = (int)x->npend++;
        x->pend[x->cur] = (struct icx_vpend){q->wr_id, b, q->wr_flags, 0, op};
    } else {
        x->cur = -1;
        x->extra_count++;
        x->extra_bytes += b;
        x->extra_op = op;
    }
}

static void icx_vpend_bytes(struct icx_vqpx *x, uint64_t b, uint32_t nsge)
{
    if (x->cur >= 0) {
        x->pend[x->cur].bytes = b;
        x->pend[x->cur].nsge = nsge;
    } else {
        x->extra_bytes += b;
    }
}

/* ---- the replaced entry points ---- */

static void icx_qx_start(struct ibv_qp_ex *q)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    x->npend = 0;
    x->cur = -1;
    x->extra_count = x->extra_bytes = 0;
    x->t0 = icx_cfg.verbs_events ? icx_ticks() : 0;
    x->start(q);
}

static void icx_qx_abort(struct ibv_qp_ex *q)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    x->npend = 0;
    x->extra_count = 0;
    x->abort(q);
}

/* The batch is posted: the bracket (hook.h) opens after the real call, when there is a batch to
 * count. */
static int icx_qx_complete(struct ibv_qp_ex *q)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    struct icx_call c;
    int rc = x->complete(q);
    if (rc == 0 && icx_call_begin_untimed(&c, &icx_self.guard)) {
        icx_call_returned(&c);
        icx_verbs_count_sends(x->slot, q->qp_base.qp_num, x->pend, x->npend, x->extra_count,
                              x->extra_bytes, x->extra_op, x->t0);
        icx_call_end(&c);
    }
    x->npend = 0;
    x->extra_count = 0;
    return rc;
}

#define ICX_QX_OP(fn, op, bytes, params, args)                                                     \
    static void icx_qx_##fn params                                                                 \
    {                                                                                              \
        struct icx_vqpx *x = icx_vqpx_find(q);                                                     \
        icx_vpend_open(x, q, op, bytes);                                                           \
        x->fn args;                                                                                \
    }
ICX_QX_OP(rdma_write, IBV_WR_RDMA_WRITE, 0, (struct ibv_qp_ex * q, uint32_t k, uint64_t a),
          (q, k, a))
ICX_QX_OP(rdma_write_imm, IBV_WR_RDMA_WRITE_WITH_IMM, 0,
          (struct ibv_qp_ex * q, uint32_t k, uint64_t a, __be32 i), (q, k, a, i))
ICX_QX_OP(rdma_read, IBV_WR_RDMA_READ, 0, (struct ibv_qp_ex * q, uint32_t k, uint64_t a), (q, k, a))
ICX_QX_OP(send, IBV_WR_SEND, 0, (struct ibv_qp_ex * q), (q))
ICX_QX_OP(send_imm, IBV_WR_SEND_WITH_IMM, 0, (struct ibv_qp_ex * q, __be32 i), (q, i))
ICX_QX_OP(send_inv, IBV_WR_SEND_WITH_INV, 0, (struct ibv_qp_ex * q, uint32_t k), (q, k))
ICX_QX_OP(cmp_swp, IBV_WR_ATOMIC_CMP_AND_SWP, 8,
          (struct ibv_qp_ex * q, uint32_t k, uint64_t a, uint64_t c, uint64_t s), (q, k, a, c, s))
ICX_QX_OP(fetch_add, IBV_WR_ATOMIC_FETCH_AND_ADD, 8,
          (struct ibv_qp_ex * q, uint32_t k, uint64_t a, uint64_t d), (q, k, a, d))
#undef ICX_QX_OP

static void icx_qx_set_sge(struct ibv_qp_ex *q, uint32_t lkey, uint64_t addr, uint32_t len)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    icx_vpend_bytes(x, len, 1);
    x->set_sge(q, lkey, addr, len);
}

static void icx_qx_set_sge_list(struct ibv_qp_ex *q, size_t n, const struct ibv_sge *sg)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    uint64_t b = 0;
    for (size_t i = 0; i < n; i++)
        b += sg[i].length;
    icx_vpend_bytes(x, b, (uint32_t)n);
    x->set_sge_list(q, n, sg);
}

static void icx_qx_set_inline(struct ibv_qp_ex *q, void *addr, size_t len)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    icx_vpend_bytes(x, len, 1);
    x->set_inline(q, addr, len);
}

static void icx_qx_set_inline_list(struct ibv_qp_ex *q, size_t n, const struct ibv_data_buf *bl)
{
    struct icx_vqpx *x = icx_vqpx_find(q);
    uint64_t b = 0;
    for (size_t i = 0; i < n; i++)
        b += bl[i].length;
    icx_vpend_bytes(x, b, (uint32_t)n);
    x->set_inline_list(q, n, bl);
}

/* Take over an extended QP's builders (once; ibv_qp_to_qp_ex may be called many times). */
void icx_vqpx_adopt(struct ibv_qp_ex *q, const struct icx_vctx *v)
{
    if (q->wr_start == icx_qx_start || !q->wr_start || !q->wr_complete || !q->wr_abort)
        return;
    struct icx_vqpx *x = calloc(1, sizeof(*x));
    if (!x)
        return;
    x->slot = icx_vctx_slot(v);
#define K(field, mine)                                                                             \
    do {                                                                                           \
        x->mine = q->field;                                                                        \
    } while (0)
    K(wr_start, start);
    K(wr_complete, complete);
    K(wr_abort, abort);
    K(wr_rdma_write, rdma_write);
    K(wr_rdma_write_imm, rdma_write_imm);
    K(wr_rdma_read, rdma_read);
    K(wr_send, send);
    K(wr_send_imm, send_imm);
    K(wr_send_inv, send_inv);
    K(wr_atomic_cmp_swp, cmp_swp);
    K(wr_atomic_fetch_add, fetch_add);
    K(wr_set_sge, set_sge);
    K(wr_set_sge_list, set_sge_list);
    K(wr_set_inline_data, set_inline);
    K(wr_set_inline_data_list, set_inline_list);
#undef K
    atomic_store_explicit(&x->qpx, q, memory_order_relaxed);
    pthread_mutex_lock(&icx_vqpx_lock);
    uint32_t i = icx_vqpx_hash(q);
    unsigned n;
    for (n = 0; n < ICX_VQPX_N; n++, i = (i + 1) & (ICX_VQPX_N - 1))
        if (!atomic_load_explicit(&icx_vqpx_tab[i], memory_order_relaxed))
            break;
    if (n == ICX_VQPX_N) {
        pthread_mutex_unlock(&icx_vqpx_lock);
        free(x);
        icx_note(1, "more than 4096 extended QPs: later ones are not traced");
        return;
    }
    atomic_store_explicit(&icx_vqpx_tab[i], x, memory_order_release);
    struct icx_vqpx *none = NULL;
    atomic_compare_exchange_strong(&icx_vqpx_first, &none, x);
    pthread_mutex_unlock(&icx_vqpx_lock);
    /* Published: now the QP may call us.  Builders a provider lacks stay NULL. */
#define S(field, mine)                                                                             \
    do {                                                                                           \
        if (q->field)                                                                              \
            q->field = icx_qx_##mine;                                                              \
    } while (0)
    S(wr_rdma_write, rdma_write);
    S(wr_rdma_write_imm, rdma_write_imm);
    S(wr_rdma_read, rdma_read);
    S(wr_send, send);
    S(wr_send_imm, send_imm);
    S(wr_send_inv, send_inv);
    S(wr_atomic_cmp_swp, cmp_swp);
    S(wr_atomic_fetch_add, fetch_add);
    S(wr_set_sge, set_sge);
    S(wr_set_sge_list, set_sge_list);
    S(wr_set_inline_data, set_inline);
    S(wr_set_inline_data_list, set_inline_list);
    S(wr_abort, abort);
    S(wr_complete, complete);
    S(wr_start, start);
#undef S
}

void icx_vqpx_forget(struct ibv_qp *qp)
{
    /* Only QPs created with send ops have an ibv_qp_ex around them; look ours up by address. */
    const struct ibv_qp_ex *q =
        (const struct ibv_qp_ex *)((const char *)qp - offsetof(struct ibv_qp_ex, qp_base));
    uint32_t i = icx_vqpx_hash(q);
    for (unsigned n = 0; n < ICX_VQPX_N; n++, i = (i + 1) & (ICX_VQPX_N - 1)) {
        struct icx_vqpx *x = atomic_load_explicit(&icx_vqpx_tab[i], memory_order_acquire);
        if (!x)
            return;
        if (atomic_load_explicit(&x->qpx, memory_order_relaxed) == q) {
            atomic_store_explicit(&x->qpx, ICX_VQPX_GONE, memory_order_relaxed);
            return;
        }
    }
}

void icx_vqpx_fork_prepare(void)
{
    pthread_mutex_lock(&icx_vqpx_lock);
}

void icx_vqpx_fork_parent(void)
{
    pthread_mutex_unlock(&icx_vqpx_lock);
}

/* The entries stay: the child's QPs are the parent's. */
void icx_vqpx_fork_child(void)
{
    pthread_mutex_init(&icx_vqpx_lock, NULL);
}
