/* NCCL's profiler plugin interface, versions 4, 5 and 6 (NCCL 2.27.3, 2.28.3, 2.29.2 on), declared
 * here because NCCL's packages do not install the plugin headers.  Only what icxtrace uses (and
 * its simulated libnccl emits); layouts follow NVIDIA's public headers
 * (src/include/plugin/nccl_profiler.h, profiler/profiler_v4.h ... v6.h), checked by the asserts
 * below on x86-64.  The descriptors' unions are declared up to the last member read: NCCL passes
 * them by pointer, and a reader of a member never looks past it. */
#ifndef ICX_NCCL_PROFILER_ABI_H
#define ICX_NCCL_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nccl.h>

/* Event types: the bits of init's activation mask and of a descriptor's `type`. */
enum {
    ICX_NPROF_GROUP = 1 << 0,
    ICX_NPROF_COLL = 1 << 1,
    ICX_NPROF_P2P = 1 << 2,
    ICX_NPROF_PROXY_OP = 1 << 3,
    ICX_NPROF_PROXY_STEP = 1 << 4,
    ICX_NPROF_PROXY_CTRL = 1 << 5,
    ICX_NPROF_KERNEL_CH = 1 << 6,
    ICX_NPROF_NET_PLUGIN = 1 << 7,
    ICX_NPROF_GROUP_API = 1 << 8,
    ICX_NPROF_COLL_API = 1 << 9,
    ICX_NPROF_P2P_API = 1 << 10,
    ICX_NPROF_KERNEL_LAUNCH = 1 << 11,
};

/* Event states (recordEventState): the ones used here. */
enum {
    ICX_NPROF_SEND_GPU_WAIT = 8,    /* ncclProfilerProxyStepSendGPUWait */
    ICX_NPROF_SEND_WAIT = 9,        /* ...SendWait: on the wire (args->proxyStep.transSize) */
    ICX_NPROF_RECV_WAIT = 10,       /* ...RecvWait: waiting for the peer's data */
    ICX_NPROF_RECV_FLUSH_WAIT = 11, /* ...RecvFlushWait (args->proxyStep.transSize) */
    ICX_NPROF_RECV_GPU_WAIT = 12,   /* ...RecvGPUWait */
    ICX_NPROF_OP_IN_PROGRESS = 19,  /* ncclProfilerProxyOpInProgress_v4 */
    ICX_NPROF_SEND_PEER_WAIT = 20,  /* ncclProfilerProxyStepSendPeerWait_v4 */
    ICX_NPROF_KERNEL_CH_STOP = 22,  /* ncclProfilerKernelChStop: args->kernelCh.pTimer */
};

/* NCCL's logger (ncclDebugLogger_t). */
typedef void (*icx_nccl_logger_t)(int level, unsigned long flags, const char *file, int line,
                                  const char *fmt, ...);

struct icx_nprof_coll {
    uint64_t seqNumber; /* per communicator, from 0 */
    const char *func;   /* "AllReduce", ... */
    const void *sendBuff;
    void *recvBuff;
    size_t count;
    int root;
    const char *datatype; /* "ncclFloat32", ... */
    uint8_t nChannels;
    uint8_t nWarps;
    const char *algo;  /* "Ring", "Tree", "NVLS", "CollnetDirect", ... */
    const char *proto; /* "LL", "LL128", "Simple" */
    void *parentGroup; /* v5 and v6 only */
};

struct icx_nprof_p2p {
    const char *func; /* "Send", "Recv" */
    void *buff;
    const char *datatype;
    size_t count;
    int peer;
    uint8_t nChannels;
    void *parentGroup; /* v5 and v6 only */
};

struct icx_nprof_proxy_op {
    int pid; /* ncclPid_t: of the process that posted it */
    uint8_t channelId;
    int peer;
    int nSteps;
    int chunkSize;
    int isSend;
};

struct icx_nprof_proxy_step {
    int step;
};

struct icx_nprof_kernel_ch {
    uint8_t channelId;
    uint64_t pTimer; /* start, GPU globaltimer ns */
};

/* v5 and v6 (v6 adds members to the union, after these: copy-engine collectives). */
typedef struct {
    uint64_t type;
    void *parentObj; /* the parent event's handle (for a kernel channel: its collective) */
    int rank;
    union {
        struct icx_nprof_coll coll;
        struct icx_nprof_p2p p2p;
        struct icx_nprof_proxy_op proxyOp;
        struct icx_nprof_proxy_step proxyStep;
        struct icx_nprof_kernel_ch kernelCh;
    };
} icx_nprof_descr_v5_t;

/* v4: the type is one byte; the collective and p2p members end before parentGroup. */
typedef struct {
    uint8_t type;
    void *parentObj;
    int rank;
    union {
        struct icx_nprof_coll coll;
        struct icx_nprof_p2p p2p;
        struct icx_nprof_proxy_op proxyOp;
        struct icx_nprof_proxy_step proxyStep;
        struct icx_nprof_kernel_ch kernelCh;
    };
} icx_nprof_descr_v4_t;

typedef union {
    struct {
        size_t transSize;
    } proxyStep;
    struct {
        int appendedProxyOps;
    } proxyCtrl;
    struct {
        uint64_t pTimer;
    } kernelCh;
} icx_nprof_state_args_t;

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, uint64_t commId, int *eActivationMask,
                         const char *commName, int nNodes, int nranks, int rank,
                         icx_nccl_logger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, icx_nprof_descr_v5_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, int eState, icx_nprof_state_args_t *args);
    ncclResult_t (*finalize)(void *context);
} icx_nprof_v5_t; /* also ncclProfiler_v6_t: the same functions, a longer descriptor union */

typedef struct {
    const char *name;
    ncclResult_t (*init)(void **context, int *eActivationMask, const char *commName,
                         uint64_t commHash, int nNodes, int nranks, int rank,
                         icx_nccl_logger_t logfn);
    ncclResult_t (*startEvent)(void *context, void **eHandle, icx_nprof_descr_v4_t *eDescr);
    ncclResult_t (*stopEvent)(void *eHandle);
    ncclResult_t (*recordEventState)(void *eHandle, int eState, icx_nprof_state_args_t *args);
    ncclResult_t (*finalize)(void *context);
} icx_nprof_v4_t;

#if defined(__x86_64__)
_Static_assert(offsetof(icx_nprof_descr_v5_t, parentObj) == 8, "v5 parentObj");
_Static_assert(offsetof(icx_nprof_descr_v5_t, rank) == 16, "v5 rank");
_Static_assert(offsetof(icx_nprof_descr_v5_t, coll) == 24, "v5 union");
_Static_assert(offsetof(icx_nprof_descr_v4_t, coll) == 24, "v4 union");
_Static_assert(offsetof(struct icx_nprof_coll, root) == 40, "coll root");
_Static_assert(offsetof(struct icx_nprof_coll, datatype) == 48, "coll datatype");
_Static_assert(offsetof(struct icx_nprof_coll, nChannels) == 56, "coll nChannels");
_Static_assert(offsetof(struct icx_nprof_coll, nWarps) == 57, "coll nWarps");
_Static_assert(offsetof(struct icx_nprof_coll, algo) == 64, "coll algo");
_Static_assert(offsetof(struct icx_nprof_coll, proto) == 72, "coll proto");
_Static_assert(offsetof(struct icx_nprof_coll, parentGroup) == 80, "coll parentGroup");
_Static_assert(offsetof(struct icx_nprof_p2p, peer) == 32, "p2p peer");
_Static_assert(offsetof(struct icx_nprof_p2p, nChannels) == 36, "p2p nChannels");
_Static_assert(offsetof(struct icx_nprof_kernel_ch, pTimer) == 8, "kernelCh pTimer");
_Static_assert(offsetof(struct icx_nprof_proxy_op, channelId) == 4, "proxyOp channelId");
_Static_assert(offsetof(struct icx_nprof_proxy_op, peer) == 8, "proxyOp peer");
_Static_assert(offsetof(struct icx_nprof_proxy_op, isSend) == 20, "proxyOp isSend");
_Static_assert(sizeof(icx_nprof_state_args_t) == 8, "state args");
_Static_assert(offsetof(icx_nprof_v5_t, finalize) == 40, "v5 table");
#endif

#endif
