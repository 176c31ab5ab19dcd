/* Shared between the CUDA hooks (cuda.c), their GPU timing (gpu.c) and topology (topo.c). */
#ifndef ICX_CUDA_INT_H
#define ICX_CUDA_INT_H

#include <cuda_runtime_api.h>
#include <errno.h>

#include "icx.h"

/* A copy bracketed by two pooled events on the stream it runs on. */
struct icx_gpu_req {
    cudaEvent_t start, end;
    int dev;
    uint32_t copy_id;
};

/* Ring record handed to the writer for polling. */
struct icx_ring_gpu_pending {
    struct icx_rec h;
    uint32_t copy_id;
    int32_t dev;
    cudaEvent_t start, end;
};
_Static_assert(sizeof(struct icx_ring_gpu_pending) == 32, "ring gpu pending");

extern uint64_t icx_cuda_seen_devices; /* devices named by drained copies (writer only) */

/* GPU timing is paced by time, not by count: real CUDA events cost microseconds, so the sampled
 * fraction must shrink as the call rate grows.  The common case is one compare against a TLS tick.
 * The slow path decides by mode: `all` times every copy, `off` none, `sample` at most one copy per
 * thread every ICX_GPU_SAMPLE_US. */
int icx_gpu_sample_due(uint64_t now);

/* Stacks are sampled by count: a per-thread countdown, re-armed by the slow path (UINT_MAX when
 * stacks are off, so it is re-checked only every 4 billion calls). */
unsigned icx_stack_rearm(int *want);

static inline int icx_stack_due(void)
{
    int want = 0;
    if (ICX_LIKELY(icx_self.stack_countdown))
        icx_self.stack_countdown--;
    else
        icx_self.stack_countdown = icx_stack_rearm(&want);
    return want;
}



/* An allocation-like event (CUDA_ALLOC/FREE, HOST_ALLOC/FREE) into this thread's ring (cuda.c). */
void icx_record_alloc(enum icx_record_type type, enum icx_api api, uint64_t t0, uint64_t t1,
                      const void *ptr, size_t bytes, int dev, cudaError_t rc);

int icx_gpu_begin(struct icx_gpu_req *g, cudaStream_t stream);
void icx_gpu_atfork_child(void);
void icx_gpu_end(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc);
/* The same with the span's id given (0: a new one); returns the id written, 0 when none was.
 * Several spans may share an id: a group of NCCL calls timed on each stream it used. */
uint32_t icx_gpu_end_as(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc, uint32_t id);
int icx_current_device(void);
int icx_stream_device(cudaStream_t s);
void icx_amap_reclaim(int final);
/* topo.c: DEVICE and LINK records for devices not yet described. */
void icx_topo_describe(struct icx_frame *f, uint64_t devices);

#endif
