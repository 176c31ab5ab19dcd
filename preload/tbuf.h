/* Per-thread record rings: a thread writes its events into its own ring without a lock or an
 * atomic read-modify-write; the writer thread drains every ring each flush, and at once when a
 * ring passes half full (the owner wakes it, once per half ring).  Also the loss
 * counters, by cause, that the writer puts into every frame. */
#ifndef ICX_TBUF_H
#define ICX_TBUF_H

#include "runtime.h"

/* Per-thread data of other modules hung on a thread's buffer: malloc'ed blocks the buffer owns
 * and frees with it (the thread exited and its ring is drained, or a fork child drops the
 * parent's). */
enum icx_tbuf_ext { ICX_TBUF_EXT_VERBS, ICX_TBUF_EXT_SLOTS };

/* Single-producer (the owning thread) single-consumer (the writer) byte ring of records. */
struct icx_tbuf {
    _Atomic uint64_t head; /* written by the owner only */
    uint64_t limit;        /* owner's: head may grow to here before it looks at tail again */
    uint64_t woke_tail;    /* owner's: tail + 1 when it last woke the writer (icx_tbuf_room) */
    char pad0[40];
    _Atomic uint64_t tail; /* written by the writer only */
    char pad1[56];
    uint8_t *data;
    uint64_t cap; /* bytes, power of two */
    uint32_t tid;
    _Atomic int dead;              /* owner exited; writer drains and frees */
    int announced;                 /* writer emitted its THREAD record */
    struct icx_tbuf *next;         /* registry list, under the tbuf lock */
    void *ext[ICX_TBUF_EXT_SLOTS]; /* set by their module with __atomic release stores */
};

/* Bytes after the ring's end: the largest record (its size is a u16). */
#define ICX_RING_SLACK 65536u
/* Record types from this value up live only in rings, never in the file: a module hands the
 * writer something to act on (gpu.h, stack.h; module.h's ring_type). */
#define ICX_RING_TYPE_MIN 0xff00u

extern _Atomic uint64_t icx_lost[ICX_LOST_SLOTS];
static inline void icx_count_lost(enum icx_lost_cause cause)
{
    atomic_fetch_add_explicit(&icx_lost[cause], 1, memory_order_relaxed);
}

/* This thread's buffer, made on its first event (errno kept); NULL, counted, when it cannot be. */
struct icx_tbuf *icx_tbuf_slow(void);
#define ICX_TBUF_DEAD ((struct icx_tbuf *)1)

/* A reservation in this thread's ring, published by icx_commit. */
struct icx_slot {
    struct icx_tbuf *b;
    uint64_t next; /* head after the record */
};

/* Past the owner's limit: look at the writer's tail (its cache line, only now).  Room: 1, with
 * the next limit (half the ring past the tail; the whole ring, once the writer has been woken to
 * drain because more than half is used).  Full: 0 and a counted loss. */
int icx_tbuf_room(struct icx_tbuf *b, uint64_t end);
/* What icx_tbuf_room calls to wake the writer (async-signal-safe, keeps errno): writer.c's. */
void icx_tbuf_set_pressure(void (*wake)(void));

/* Reserve `size` bytes (multiple of 8, at most ICX_RING_SLACK) in this thread's ring; NULL (and a
 * counted loss) if full.  A record starts at head & (cap - 1) and is always contiguous: the ring
 * has ICX_RING_SLACK bytes of slack after its end, so a record that crosses the end simply runs on
 * into the slack and neither side ever splits or pads one.  (The bytes at the ring's start that
 * mirror such a record's tail are skipped: the next record begins after them.) */
static inline void *icx_reserve(uint32_t size, struct icx_slot *slot)
{
    struct icx_tbuf *b = icx_self.buf;
    if (ICX_UNLIKELY(b == NULL || b == ICX_TBUF_DEAD)) {
        b = icx_tbuf_slow();
        if (!b)
            return NULL;
    }
    uint64_t head = atomic_load_explicit(&b->head, memory_order_relaxed);
    if (ICX_UNLIKELY(head + size > b->limit) && !icx_tbuf_room(b, head + size))
        return NULL;
    slot->b = b;
    slot->next = head + size;
    return b->data + (head & (b->cap - 1));
}

/* Publish the reserved record to the writer. */
static inline void icx_commit(const struct icx_slot *slot)
{
    atomic_store_explicit(&slot->b->head, slot->next, memory_order_release);
}

/* Writer side: call fn on every registered buffer; frees dead buffers once drained. */
void icx_tbuf_drain_all(void (*fn)(struct icx_tbuf *b, void *ctx), void *ctx);

#endif
