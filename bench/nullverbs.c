/* A null libibverbs.so.1 for bench/bench_post_send and tests/fork/fork_locks: ibv_open_device
 * hands out a new context whose post_send returns at once, so only a wrapper's cost is measured;
 * ibv_qp_to_qp_ex a new extended QP whose builders do nothing.  No state is shared between calls,
 * so it is safe in a fork child.  Exports the symbols with libibverbs' versions
 * (bench/nullverbs.map) so the tracer resolves them as it would the real ones. */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdlib.h>

static int null_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    (void)qp;
    (void)wr;
    (void)bad;
    return 0;
}

struct ibv_context *ibv_open_device(struct ibv_device *dev);
struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    (void)dev;
    struct ibv_context *c = calloc(1, sizeof(*c));
    if (c)
        c->ops.post_send = null_post_send;
    return c;
}

int ibv_close_device(struct ibv_context *c);
int ibv_close_device(struct ibv_context *c)
{
    free(c);
    return 0;
}

static void null_wr_start(struct ibv_qp_ex *q)
{
    (void)q;
}
static int null_wr_complete(struct ibv_qp_ex *q)
{
    (void)q;
    return 0;
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp);
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
    struct ibv_qp_ex *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->qp_base = *qp;
    q->wr_start = null_wr_start;
    q->wr_complete = null_wr_complete;
    q->wr_abort = null_wr_start;
    return q;
}
