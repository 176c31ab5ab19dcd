/* A CUDA runtime linked statically into the executable (nvcc's default) cannot be hooked. */
#ifndef ICX_STATIC_DETECT_H
#define ICX_STATIC_DETECT_H

/* Say so, in the trace and once on stderr, when it is the case. */
void icx_cuda_detect_static(void);

#endif
