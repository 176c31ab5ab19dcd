/* The communicator table (nccl_comm.h): a small array under one lock, taken briefly by the hooks
 * and never across a call into NCCL. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_comm.h"

struct icx_ncomm {
    ncclComm_t h;
    uint64_t id;
    int rank, nranks;
    int initializing; /* created non-blocking (ncclInProgress), not yet seen ready */
    uint64_t coll_seq, splits;
    uint64_t *p2p_seq; /* [peer * 2 + (0 send, 1 recv)] */
};

#define ICX_NCOMM_MAX 4096
static struct icx_ncomm icx_ncomms[ICX_NCOMM_MAX];
static unsigned icx_nncomms;
static pthread_mutex_t icx_ncomm_lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t icx_fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* Under the lock. */
static struct icx_ncomm *icx_ncomm_find(ncclComm_t h)
{
    for (unsigned i = 0; i < icx_nncomms; i++)
        if (icx_ncomms[i].h == h)
            return &icx_ncomms[i];
    return NULL;
}

void icx_ncomm_add(ncclComm_t h, uint64_t id, int rank, int nranks, int initializing)
{
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *c = icx_ncomm_find(h);
    if (!c && icx_nncomms < ICX_NCOMM_MAX)
        c = &icx_ncomms[icx_nncomms++];
    if (c) {
        free(c->p2p_seq);
        *c = (struct icx_ncomm){h, id, rank, nranks, initializing, 0, 0, NULL};
        if (nranks > 0)
            c->p2p_seq = calloc((size_t)nranks * 2, sizeof(uint64_t));
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
}

void icx_ncomm_forget(ncclComm_t h)
{
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *c = icx_ncomm_find(h);
    if (c) {
        free(c->p2p_seq);
        *c = icx_ncomms[--icx_nncomms];
        memset(&icx_ncomms[icx_nncomms], 0, sizeof(icx_ncomms[0]));
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
}

uint64_t icx_ncomm_id(ncclComm_t h, int *rank, int *nranks)
{
    uint64_t id = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(h);
    if (p) {
        id = p->id;
        if (rank)
            *rank = p->rank;
        if (nranks)
            *nranks = p->nranks;
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    return id;
}

uint64_t icx_ncomm_next_seq(ncclComm_t h, int peer, int p2p_dir)
{
    uint64_t seq = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *c = icx_ncomm_find(h);
    if (c) {
        if (p2p_dir < 0)
            seq = ++c->coll_seq;
        else if (c->p2p_seq && peer >= 0 && peer < c->nranks)
            seq = ++c->p2p_seq[peer * 2 + p2p_dir];
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    return seq;
}

uint64_t icx_ncomm_split(ncclComm_t h, uint64_t *id)
{
    uint64_t n = 0;
    *id = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(h);
    if (p) {
        *id = p->id;
        n = ++p->splits;
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    return n;
}

uint64_t icx_ncomm_ready(ncclComm_t h)
{
    uint64_t ready = 0;
    pthread_mutex_lock(&icx_ncomm_lock);
    struct icx_ncomm *p = icx_ncomm_find(h);
    if (p && p->initializing) {
        p->initializing = 0;
        ready = p->id;
    }
    pthread_mutex_unlock(&icx_ncomm_lock);
    return ready;
}

void icx_ncomm_fork_prepare(void)
{
    pthread_mutex_lock(&icx_ncomm_lock);
}

void icx_ncomm_fork_parent(void)
{
    pthread_mutex_unlock(&icx_ncomm_lock);
}

/* The child inherits the parent's communicator handles (NCCL does not support using them there,
 * but the table stays consistent). */
void icx_ncomm_fork_child(void)
{
    pthread_mutex_init(&icx_ncomm_lock, NULL);
}
