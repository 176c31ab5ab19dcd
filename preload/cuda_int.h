/* Shared between the CUDA hooks (cuda.c), their GPU timing (gpu.c) and topology (topo.c). */
#ifndef ICX_CUDA_INT_H
#define ICX_CUDA_INT_H

#include <cuda_runtime_api.h>

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

extern _Atomic uint64_t icx_cuda_seen_devices;

/* Whether this copy gets GPU timing: every copy in `all` mode, 1 in ICX_GPU_SAMPLE (the first
 * included) per thread in `sample` mode.  A countdown, not a modulo: no division on the hot path. */
static inline int icx_gpu_want(void)
{
    if (icx_cfg.gpu_timing != ICX_GPUT_SAMPLE)
        return icx_cfg.gpu_timing == ICX_GPUT_ALL;
    if (icx_self.gpu_countdown) {
        icx_self.gpu_countdown--;
        return 0;
    }
    icx_self.gpu_countdown = icx_cfg.gpu_sample - 1;
    return 1;
}

static inline int icx_stack_due(void)
{
    if (icx_self.stack_countdown) {
        icx_self.stack_countdown--;
        return 0;
    }
    icx_self.stack_countdown = icx_cfg.stack_sample - 1;
    return 1;
}

int icx_gpu_begin(struct icx_gpu_req *g, cudaStream_t stream);
void icx_gpu_end(struct icx_gpu_req *g, cudaStream_t stream, cudaError_t rc);
int icx_current_device(void);
int icx_stream_device(cudaStream_t s);
void icx_amap_reclaim(int final);
/* topo.c: DEVICE and LINK records for devices not yet described. */
void icx_topo_describe(struct icx_frame *f, uint64_t devices);

#endif
