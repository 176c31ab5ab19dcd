/* The tracer's own use of the CUDA runtime: GPU-side timing with pooled events (for copies and
 * NCCL calls) and the device queries the hooks need. */
#ifndef ICX_GPU_H
#define ICX_GPU_H

#include <cuda_runtime_api.h>

#include "runtime.h"

/* A call bracketed by two pooled events on the stream it runs on. */
struct icx_gpu_req {
    cudaEvent_t start, end;
    int dev;
    uint32_t copy_id;
};

/* Ring record handed to the writer for polling (module.h's ring_type). */
#define ICX_RING_GPU_PENDING 0xff01u
struct icx_ring_gpu_pending {
    struct icx_rec h;
    uint32_t copy_id;
    int32_t dev;
    cudaEvent_t start, end;
};
_Static_assert(sizeof(struct icx_ring_gpu_pending) == 32, "ring gpu pending");

/* GPU timing is paced by time, not by count: real CUDA events cost microseconds, so the sampled
 * fraction must shrink as the call rate grows.  The common case is one compare against a TLS tick
 * (icx_self.next_gpu_tick); the slow path decides by mode: `all` times every copy, `off` none,
 * `sample` at most one copy per thread every ICX_GPU_SAMPLE_US. */
int icx_gpu_sample_due(uint64_t now);

/* Record the start event on `stream` (never into a capturing stream).  1 when timed. errno kept. */
int icx_gpu_begin(struct icx_gpu_req *g, cudaStream_t stream);
/* Record the end event after the call (rc: whether it enqueued its work) and hand the pair to the
 * writer; g->copy_id is the span's id, 0 when none was written.  errno kept. */
void icx_gpu_end(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc);
/* The same with the span's id given (0: a new one); returns the id written, 0 when none was.
 * Several spans may share an id: a group of NCCL calls timed on each stream it used. */
uint32_t icx_gpu_end_as(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc, uint32_t id);

/* Writer: when the oldest GPU work still pending was handed to the writer (CLOCK_MONOTONIC ns;
 * 0: none pending), and its span id. */
uint64_t icx_gpu_oldest_pending(uint32_t *copy_id);

/* The calling thread's current device, the device of a stream; -1 when unknown. */
int icx_current_device(void);
int icx_stream_device(cudaStream_t s);

#endif
