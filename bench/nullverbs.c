/* A null libibverbs.so.1 for bench/bench_post_send: ibv_open_device hands out one static context
 * whose post_send returns at once, so only a wrapper's cost is measured.  Exports the symbol with
 * libibverbs' version (bench/nullverbs.map) so the tracer resolves it as it would the real one. */
#include <infiniband/verbs.h>
#include <stddef.h>

static int null_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    (void)qp;
    (void)wr;
    (void)bad;
    return 0;
}

static struct ibv_context null_ctx = {.ops = {.post_send = null_post_send}};

struct ibv_context *ibv_open_device(struct ibv_device *dev);
struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    (void)dev;
    return &null_ctx;
}
