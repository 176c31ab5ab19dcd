/* Sustained call rate (bench/peers.sh): THREADS threads each make calls at RATE per second for
 * SECONDS, paced by the TSC (each call waits for its slot; a thread that falls behind calls at
 * once until it has caught up), against the null libraries of bench/.
 *
 *   bench_rate copy|post_send RATE SECONDS THREADS
 *
 * Prints the calls made, the rate achieved per thread (calls / wall time) and the longest any
 * thread was behind its schedule, in microseconds: a tracer that blocked the job shows there.
 * Whether the tracer kept every event is read from its trace (bench/peers.sh). */
#include <cuda_runtime_api.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <x86intrin.h>

#include "bench_tsc.h"

static int mode;
static double rate, seconds, tick_ns;
static struct ibv_context *ctx;

struct worker {
    pthread_t t;
    uint64_t calls, behind_max; /* ticks */
    double wall_s;
};

static void *run(void *arg)
{
    struct worker *w = arg;
    static char a[64], b[64];
    char buf[4096];
    struct ibv_qp qp = {.qp_num = 7, .context = ctx};
    struct ibv_sge sg = {(uintptr_t)buf, sizeof(buf), 1};
    struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE},
                       *bad;
    double period = 1e9 / rate / tick_ns; /* ticks per call */
    uint64_t n = (uint64_t)(rate * seconds), t0 = __rdtsc();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot = t0 + (uint64_t)((double)i * period), now;
        while ((now = __rdtsc()) < slot)
            _mm_pause();
        if (now - slot > w->behind_max)
            w->behind_max = now - slot;
        if (mode == 0)
            cudaMemcpyPeerAsync(b, 1, a, 0, sizeof(a), (cudaStream_t)0x1234);
        else
            ibv_post_send(&qp, &wr, &bad);
    }
    w->calls = n;
    w->wall_s = (double)(__rdtsc() - t0) * tick_ns / 1e9;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[1], "copy") && strcmp(argv[1], "post_send"))) {
        fprintf(stderr, "usage: bench_rate copy|post_send RATE SECONDS THREADS\n");
        return 2;
    }
    mode = !strcmp(argv[1], "post_send");
    rate = atof(argv[2]);
    seconds = atof(argv[3]);
    int threads = atoi(argv[4]);
    if (rate <= 0 || seconds <= 0 || threads < 1 || threads > 64)
        return 2;
    ctx = ibv_open_device(NULL);
    if (!ctx || cudaSetDevice(0))
        return 1;
    tick_ns = bench_tsc_ns_per_tick();
    struct worker w[64];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < threads; i++)
        if (pthread_create(&w[i].t, NULL, run, &w[i]))
            return 1;
    uint64_t calls = 0, behind = 0;
    double wall = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(w[i].t, NULL);
        calls += w[i].calls;
        behind = w[i].behind_max > behind ? w[i].behind_max : behind;
        wall = w[i].wall_s > wall ? w[i].wall_s : wall;
    }
    printf("%llu %.0f %.1f\n", (unsigned long long)calls, (double)calls / threads / wall,
           (double)behind * tick_ns / 1e3);
    return 0;
}
