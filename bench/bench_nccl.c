/* Cost of one ncclAllReduce call as the application sees it (bench_timing.h), against the null
 * libnccl (bench/nullnccl.c) and the null libcudart (the tracer's two event records per call
 * return at once there, so their real cost -- a few hundred ns to microseconds on a GPU, to be
 * measured on one -- is not in these numbers).  bench/run.sh runs it with and without the preload.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "bench_timing.h"

static ncclComm_t comm;
static char buf[4096];

static void burst(int per)
{
    for (int i = 0; i < per; i++)
        ncclAllReduce(buf, buf, 1024, ncclFloat, ncclSum, comm, (cudaStream_t)0);
}

int main(int argc, char **argv)
{
    ncclUniqueId id;
    /* a CUDA call of the job's own keeps libcudart loaded (linkers drop unused libraries) */
    if (cudaSetDevice(0) || ncclGetUniqueId(&id) || ncclCommInitRank(&comm, 1, id, 0))
        return 1;
    return bench_run(argc, argv, burst);
}
