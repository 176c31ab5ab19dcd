/* Per-thread record rings: lock-free on the recording side (initial-exec TLS pointer, one
 * single-producer/single-consumer ring per thread), drained by the writer thread.  Registration of
 * a new thread and the writer's walk take one mutex; the hot path never does. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "module.h"
#include "tbuf.h"

_Atomic uint64_t icx_lost[ICX_LOST_SLOTS];

static pthread_mutex_t icx_tbuf_lock = PTHREAD_MUTEX_INITIALIZER;
/* Bytes of all live rings (ICX_MEMORY_MB bounds it): a thread that would pass the budget gets no
 * ring; its events are dropped and counted (no_buffer) until a dead thread's ring is freed. */
static _Atomic size_t icx_tbuf_bytes;
static atomic_flag icx_tbuf_budget_said = ATOMIC_FLAG_INIT;

static size_t icx_ring_bytes(void)
{
    return sizeof(struct icx_tbuf) + icx_cfg.buffer_bytes + ICX_RING_SLACK;
}

static int icx_budget_take(void)
{
    size_t need = icx_ring_bytes();
    /* A thread refused before tries at each event: a plain load keeps that off the shared line. */
    if (atomic_load_explicit(&icx_tbuf_bytes, memory_order_relaxed) + need <=
        icx_cfg.memory_bytes) {
        size_t had = atomic_fetch_add_explicit(&icx_tbuf_bytes, need, memory_order_relaxed);
        if (had + need <= icx_cfg.memory_bytes)
            return 1;
        atomic_fetch_sub_explicit(&icx_tbuf_bytes, need, memory_order_relaxed);
    }
    if (!atomic_flag_test_and_set(&icx_tbuf_budget_said))
        icx_log("ring memory budget (ICX_MEMORY_MB=%zu) reached: threads without a ring drop their "
                "events, counted as no_buffer\n",
                icx_cfg.memory_bytes >> 20);
    return 0;
}
static struct icx_tbuf *icx_tbuf_list;
static pthread_key_t icx_tbuf_key;
static int icx_tbuf_key_ok;

static void icx_tbuf_thread_exit(void *arg)
{
    struct icx_tbuf *b = arg;
    /* events from later TLS destructors are dropped, not re-registered */
    icx_self.buf = ICX_TBUF_DEAD;
    atomic_store_explicit(&b->dead, 1, memory_order_release);
}

static void icx_tbuf_init(void)
{
    if (pthread_key_create(&icx_tbuf_key, icx_tbuf_thread_exit) == 0)
        icx_tbuf_key_ok = 1;
}

static struct icx_tbuf *icx_tbuf_new(void)
{
    if (icx_self.buf == ICX_TBUF_DEAD) {
        icx_count_lost(ICX_LOST_no_buffer);
        return NULL;
    }
    if (!icx_budget_take()) {
        icx_count_lost(ICX_LOST_no_buffer);
        return NULL;
    }
    struct icx_tbuf *b = calloc(1, sizeof(*b));
    uint8_t *data = b ? malloc(icx_cfg.buffer_bytes + ICX_RING_SLACK) : NULL;
    if (!data) {
        free(b);
        atomic_fetch_sub_explicit(&icx_tbuf_bytes, icx_ring_bytes(), memory_order_relaxed);
        icx_count_lost(ICX_LOST_no_buffer);
        return NULL;
    }
    /* Touch every page now, once, rather than taking page faults on the hot path later. */
    memset(data, 0, icx_cfg.buffer_bytes + ICX_RING_SLACK);
    b->data = data;
    b->cap = icx_cfg.buffer_bytes;
    b->limit = b->cap / 2;
    b->tid = (uint32_t)icx_gettid();
    pthread_mutex_lock(&icx_tbuf_lock);
    b->next = icx_tbuf_list;
    icx_tbuf_list = b;
    pthread_mutex_unlock(&icx_tbuf_lock);
    if (icx_tbuf_key_ok)
        pthread_setspecific(icx_tbuf_key, b);
    icx_self.buf = b;
    icx_touch(); /* the first event of a traced call */
    return b;
}

struct icx_tbuf *icx_tbuf_slow(void)
{
    int saved = errno; /* malloc and friends may set it; the job must not see that */
    struct icx_tbuf *b = icx_tbuf_new();
    errno = saved;
    return b;
}

static void (*_Atomic icx_tbuf_pressure)(void); /* the writer's wake (writer.c) */

void icx_tbuf_set_pressure(void (*wake)(void))
{
    atomic_store(&icx_tbuf_pressure, wake);
}

int icx_tbuf_room(struct icx_tbuf *b, uint64_t end)
{
    uint64_t tail = atomic_load_explicit(&b->tail, memory_order_acquire);
    uint64_t used = end - tail;
    if (used > b->cap / 2) {
        /* Wake the writer once per tail it has reached: a syscall per half ring, not per event
         * (a ring of 1 MiB: once per ~18,000 56-byte records). */
        if (b->woke_tail != tail + 1) {
            b->woke_tail = tail + 1;
            void (*wake)(void) = atomic_load_explicit(&icx_tbuf_pressure, memory_order_relaxed);
            if (wake)
                wake();
        }
        b->limit = tail + b->cap;
    } else {
        b->limit = tail + b->cap / 2;
    }
    if (used > b->cap) {
        icx_count_lost(ICX_LOST_buffer_full);
        return 0;
    }
    return 1;
}

static void icx_tbuf_free_ext(struct icx_tbuf *b)
{
    for (int i = 0; i < ICX_TBUF_EXT_SLOTS; i++) {
        free(b->ext[i]);
        b->ext[i] = NULL;
    }
}

void icx_tbuf_drain_all(void (*fn)(struct icx_tbuf *b, void *ctx), void *ctx)
{
    pthread_mutex_lock(&icx_tbuf_lock);
    struct icx_tbuf **link = &icx_tbuf_list;
    while (*link) {
        struct icx_tbuf *b = *link;
        /* Read `dead` before draining: a buffer seen dead here has no more producers, so once
         * drained it can go. */
        int dead = atomic_load_explicit(&b->dead, memory_order_acquire);
        fn(b, ctx);
        if (dead) {
            *link = b->next;
            icx_tbuf_free_ext(b);
            free(b->data);
            free(b);
            atomic_fetch_sub_explicit(&icx_tbuf_bytes, icx_ring_bytes(), memory_order_relaxed);
        } else {
            link = &b->next;
        }
    }
    pthread_mutex_unlock(&icx_tbuf_lock);
}

static void icx_tbuf_fork_prepare(void)
{
    pthread_mutex_lock(&icx_tbuf_lock);
}

static void icx_tbuf_fork_parent(void)
{
    pthread_mutex_unlock(&icx_tbuf_lock);
}

/* In the child only the forking thread exists.  The other threads' buffers hold the parent's
 * events: drop them (leaked, not freed: their owners' TLS may still point at them in no thread).
 * The forking thread's ring is emptied so the child starts clean. */
static void icx_tbuf_fork_child(void)
{
    pthread_mutex_init(&icx_tbuf_lock, NULL);
    struct icx_tbuf *self = icx_self.buf;
    if (self == ICX_TBUF_DEAD)
        self = NULL;
    icx_tbuf_list = NULL;
    atomic_store(&icx_tbuf_bytes, self ? icx_ring_bytes() : 0); /* the others' rings are gone */
    if (self) {
        uint64_t head = atomic_load_explicit(&self->head, memory_order_relaxed);
        atomic_store_explicit(&self->tail, head, memory_order_relaxed);
        self->limit = head + self->cap / 2;
        self->woke_tail = 0;
        self->tid = (uint32_t)icx_gettid();
        self->announced = 0;
        self->next = NULL;
        icx_tbuf_free_ext(self); /* the parent's per-thread data: the parent reports it */
        icx_tbuf_list = self;
    }
    for (int i = 0; i < ICX_LOST_SLOTS; i++)
        atomic_store(&icx_lost[i], 0);
}

const struct icx_module icx_mod_tbuf = {
    .name = "tbuf",
    .init = icx_tbuf_init,
    .fork_prepare = icx_tbuf_fork_prepare,
    .fork_parent = icx_tbuf_fork_parent,
    .fork_child = icx_tbuf_fork_child,
};
