/* The table of traced RDMA device contexts (verbs_ctx.h).  Readers never lock: a slot is filled
 * before the count that makes it visible is published. */
#include <pthread.h>
#include <string.h>

#include "verbs_ctx.h"

struct icx_vctx icx_vctx_tab[ICX_VCTX_MAX];
_Atomic unsigned icx_nvctx;
static pthread_mutex_t icx_vctx_lock = PTHREAD_MUTEX_INITIALIZER;

struct icx_vctx *icx_vctx_claim(void)
{
    pthread_mutex_lock(&icx_vctx_lock);
    unsigned n = atomic_load_explicit(&icx_nvctx, memory_order_relaxed);
    if (n == ICX_VCTX_MAX) {
        pthread_mutex_unlock(&icx_vctx_lock);
        return NULL;
    }
    struct icx_vctx *v = &icx_vctx_tab[n];
    memset(v, 0, sizeof(*v));
    return v;
}

void icx_vctx_publish(struct icx_vctx *v, struct ibv_context *ctx)
{
    atomic_store_explicit(&v->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&icx_nvctx, (unsigned)(v - icx_vctx_tab) + 1, memory_order_release);
    pthread_mutex_unlock(&icx_vctx_lock);
}

void icx_vctx_fork_prepare(void)
{
    pthread_mutex_lock(&icx_vctx_lock);
}

void icx_vctx_fork_parent(void)
{
    pthread_mutex_unlock(&icx_vctx_lock);
}

/* The contexts stay (the child inherits the parent's libibverbs state); a traced child's stream
 * names them again. */
void icx_vctx_fork_child(void)
{
    pthread_mutex_init(&icx_vctx_lock, NULL);
    unsigned n = atomic_load_explicit(&icx_nvctx, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++)
        icx_vctx_tab[i].announced = 0;
}
