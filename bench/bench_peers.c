/* Cost of one traced call, per call, for the side-by-side benchmark (bench/peers.sh, `make
 * bench-peers`): the same program runs untraced, under icxtrace, under an LTTng-UST tracepoint
 * preload (bench/peers/lttng_peer.c), under uftrace and under ltrace.  Against the null libraries
 * of bench/ (every call returns at once), so what is measured is what the tracer adds.
 *
 *   bench_peers copy|post_send|allreduce [BATCHES [PER]]
 *
 * 2 x BATCHES bursts of PER calls (after 10 warm-up bursts), a 2 ms pause after each (a training
 * step's shape: calls, then compute; a tracer's consumer drains then).  In every other burst each
 * call is timed alone with the (fenced) TSC, for the distribution; the bursts between are timed as
 * a whole, for the mean (the per-call reads cost more than some of the tracers, and this VM's TSC
 * reads in steps of about 10 ns).  Prints, in ns: the median and 99th percentile of the single
 * calls, the mean per call of the whole bursts, then the number of calls made (warm-up included).
 * The clock is calibrated around a sleep (bench_tsc.h), so a tracer that records library calls
 * (uftrace, ltrace) sees only the calls measured, one nanosleep per burst, and three more. */
#include <cuda_runtime_api.h>
#include <infiniband/verbs.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "bench_tsc.h"

static int mode; /* 0 copy, 1 post_send, 2 allreduce */
static char a[4096], b[4096];
static struct ibv_qp qp = {.qp_num = 7};
static struct ibv_sge sg = {0, sizeof(a), 1};
static struct ibv_send_wr wr = {
    .wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE};
static ncclComm_t comm;

static inline uint64_t ticks(void)
{
    _mm_lfence();
    uint64_t t = __rdtsc();
    _mm_lfence();
    return t;
}

static inline void one_call(void)
{
    struct ibv_send_wr *bad;
    if (mode == 0)
        cudaMemcpyPeerAsync(b, 1, a, 0, 64, (cudaStream_t)0x1234);
    else if (mode == 1)
        ibv_post_send(&qp, &wr, &bad);
    else
        ncclAllReduce(a, a, 1024, ncclFloat, ncclSum, comm, (cudaStream_t)0);
}

static int cmp_u32(const void *x, const void *y)
{
    uint32_t p = *(const uint32_t *)x, q = *(const uint32_t *)y;
    return p < q ? -1 : p > q;
}

int main(int argc, char **argv)
{
    if (argc < 2 ||
        (strcmp(argv[1], "copy") && strcmp(argv[1], "post_send") && strcmp(argv[1], "allreduce"))) {
        fprintf(stderr, "usage: bench_peers copy|post_send|allreduce [BATCHES [PER]]\n");
        return 2;
    }
    mode = !strcmp(argv[1], "copy") ? 0 : !strcmp(argv[1], "post_send") ? 1 : 2;
    int batches = argc > 2 ? atoi(argv[2]) : 300, per = argc > 3 ? atoi(argv[3]) : 2000;
    if (batches < 1 || per < 1)
        return 2;
    ncclUniqueId id;
    /* every mode opens all three, so the processes differ only in the calls they time */
    qp.context = ibv_open_device(NULL);
    sg.addr = (uintptr_t)a;
    if (!qp.context || cudaSetDevice(0) || ncclGetUniqueId(&id) ||
        ncclCommInitRank(&comm, 1, id, 0))
        return 1;
    struct timespec pause = {0, 2000000};
    double ns_per_tick = bench_tsc_ns_per_tick();
    size_t n = (size_t)batches * (size_t)per;
    uint32_t *lat = malloc(n * sizeof(*lat));
    if (!lat)
        return 1;
    for (int k = 0; k < 10; k++) { /* warm-up: lazy resolution, buffers, registration */
        for (int i = 0; i < per; i++)
            one_call();
        nanosleep(&pause, NULL);
    }
    uint64_t total = 0; /* ticks of the bursts timed whole */
    for (int k = 0; k < 2 * batches; k++) {
        if (k & 1) { /* the mean: a burst timed as a whole, no per-call reads in it */
            uint64_t b0 = ticks();
            for (int i = 0; i < per; i++)
                one_call();
            total += ticks() - b0;
        } else { /* the distribution: every call timed alone */
            uint32_t *l = lat + (size_t)(k / 2) * (size_t)per;
            for (int i = 0; i < per; i++) {
                uint64_t t0 = ticks();
                one_call();
                uint64_t d = ticks() - t0;
                l[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
            }
        }
        nanosleep(&pause, NULL);
    }
    qsort(lat, n, sizeof(*lat), cmp_u32);
    printf("%.2f %.2f %.2f %llu\n", lat[n / 2] * ns_per_tick, lat[n * 99 / 100] * ns_per_tick,
           (double)total * ns_per_tick / (double)n,
           (unsigned long long)(2 * n + 10ull * (size_t)per));
    free(lat);
    return 0;
}
