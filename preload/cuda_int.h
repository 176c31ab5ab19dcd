/* The CUDA runtime hooks' interface to the rest of the tracer (cuda.c; the name avoids the CUDA
 * toolkit's own cuda.h). */
#ifndef ICX_CUDA_INT_H
#define ICX_CUDA_INT_H

#include <cuda_runtime_api.h>

#include "runtime.h"

/* An allocation-like event (CUDA_ALLOC/FREE, HOST_ALLOC/FREE) into this thread's ring. */
void icx_record_alloc(enum icx_record_type type, enum icx_api api, uint64_t t0, uint64_t t1,
                      const void *ptr, size_t bytes, int dev, cudaError_t rc);
/* The CUDA device whose cudaMalloc'ed range holds p, or -2 (lock-free). */
int icx_amap_lookup(uintptr_t p);

#endif
