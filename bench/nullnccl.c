/* Benchmark stand-in for libnccl.so.2: every entry point returns at once (pnccl* with nccl* weak
 * aliases, as the real library exports them), so a benchmark measures only what a preload adds
 * around the call.  Not a simulation: nothing happens. */
#include <nccl.h>
#include <string.h>

#define API __attribute__((visibility("default")))
#define ALIAS(name) extern __typeof__(p##name) name __attribute__((weak, alias("p" #name))) API;

static char the_comm[64];

API ncclResult_t pncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 7, sizeof(*id));
    return ncclSuccess;
}
API ncclResult_t pncclCommInitRank(ncclComm_t *c, int n, ncclUniqueId id, int r)
{
    (void)n, (void)id, (void)r;
    *c = (ncclComm_t)the_comm;
    return ncclSuccess;
}
API ncclResult_t pncclCommDestroy(ncclComm_t c)
{
    (void)c;
    return ncclSuccess;
}
API ncclResult_t pncclCommCuDevice(const ncclComm_t c, int *d)
{
    (void)c;
    *d = 0;
    return ncclSuccess;
}
API ncclResult_t pncclCommCount(const ncclComm_t c, int *n)
{
    (void)c;
    *n = 1;
    return ncclSuccess;
}
API ncclResult_t pncclCommUserRank(const ncclComm_t c, int *r)
{
    (void)c;
    *r = 0;
    return ncclSuccess;
}
API ncclResult_t pncclAllReduce(const void *s, void *r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                ncclComm_t c, cudaStream_t st)
{
    (void)s, (void)r, (void)n, (void)t, (void)op, (void)c, (void)st;
    return ncclSuccess;
}
/* clang-format off */
ALIAS(ncclGetUniqueId)
ALIAS(ncclCommInitRank)
ALIAS(ncclCommDestroy)
ALIAS(ncclCommCuDevice)
ALIAS(ncclCommCount)
ALIAS(ncclCommUserRank)
ALIAS(ncclAllReduce)
/* clang-format on */
