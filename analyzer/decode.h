/* The decoders: one per record family, each turning its records into the model (model.h).  The
 * reader (reader.c) validates frames and record sizes, decodes the stream's own records (header,
 * blocks, delta timestamps) and calls the decoder of every other record by its type; after a
 * stream is read it calls each family's finish, in the order below.  A decoder never calls the
 * reader; it trusts only what the reader checked (the record fits in its frame) and checks every
 * field length itself: a record shorter than the layout it knows is ignored. */
#ifndef ICX_DECODE_H
#define ICX_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* What a decoder learns from the reader about an EVENT record, and what it may leave for the
 * next record (a STACK_REF refers to the event just before it). */
struct icx_decode_ctx {
    int64_t ts;        /* the event's absolute tick time (EVENT records) */
    uint32_t tid;      /* the thread of its block */
    size_t last_copy;  /* 1-based index of the copy a following STACK_REF belongs to; 0 none */
    size_t last_ncall; /* the same for an NCCL call */
};

typedef void (*icx_decode_fn)(struct icx_proc *p, const struct icx_rec *r, size_t size,
                              struct icx_decode_ctx *ctx);

/* decode_proc.c: STRING, PROCESS, CLOCK, LOST, NOTE, END, THREAD, STACK, SYMBOL */
void icx_decode_proc(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx);
/* decode_cuda.c: DEVICE, LINK, GPU_SPAN, STACK_REF and the CUDA events */
void icx_decode_cuda(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx);
/* decode_topo.c: NUMA_NODE, CPU_SAMPLES, THREAD_AFFINITY, HOST_NUMA, NIC, PCI_PATH, counters */
void icx_decode_topo(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx);
/* decode_verbs.c: VERBS_* (format 1.2, trace_format.h section 10) */
void icx_decode_verbs(struct icx_proc *p, const struct icx_rec *r, size_t size,
                      struct icx_decode_ctx *ctx);
/* decode_nccl.c: NCCL_COMM, NCCL_CALL, NCCL_DUMP (1.2-1.3, section 11) */
void icx_decode_nccl(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx);
/* decode_hang.c: HANG_DUMP, THREAD_STATE, PY_STACKS (1.5, section 12) */
void icx_decode_hang(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx);

/* After a stream: its tick -> time fit (proc), then each family's times and cross-references. */
void icx_decode_proc_finish(struct icx_proc *p);
void icx_decode_cuda_finish(struct icx_proc *p);
void icx_decode_verbs_finish(struct icx_proc *p);
void icx_decode_nccl_finish(struct icx_proc *p); /* after cuda's: it needs the spans sorted */

#endif
