/* Cost of one ibv_post_send (one 4 KiB RDMA WRITE work request) as the application sees it:
 * bursts timed with the TSC (median of the burst means, ns), a pause after each, against the null
 * libibverbs (bench/nullverbs.c).  bench/run.sh runs it without the preload and with it, in
 * aggregate and event mode, in one run. */
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 300, per = argc > 2 ? atoi(argv[2]) : 2000;
    struct timespec pause = {0, 2000000};
    uint64_t n0 = mono_ns(), c0 = __rdtsc();
    while (mono_ns() - n0 < 50000000)
        ;
    double ns_per_tick = (double)(mono_ns() - n0) / (double)(__rdtsc() - c0);
    double *mean = malloc(sizeof(double) * (size_t)batches);
    struct ibv_context *ctx = ibv_open_device(NULL);
    struct ibv_qp qp = {.context = ctx, .qp_num = 7};
    static char buf[4096];
    struct ibv_sge sg = {(uintptr_t)buf, sizeof(buf), 1};
    struct ibv_send_wr wr = {.wr_id = 1, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE},
                       *bad;
    for (int k = 0; k < 10; k++) {
        for (int i = 0; i < per; i++)
            ibv_post_send(&qp, &wr, &bad);
        nanosleep(&pause, NULL);
    }
    for (int k = 0; k < batches; k++) {
        uint64_t t0 = __rdtsc();
        for (int i = 0; i < per; i++)
            ibv_post_send(&qp, &wr, &bad);
        uint64_t t1 = __rdtsc();
        mean[k] = (double)(t1 - t0) * ns_per_tick / per;
        nanosleep(&pause, NULL);
    }
    qsort(mean, (size_t)batches, sizeof(double), cmp);
    printf("%.2f %.2f %.2f\n", mean[batches / 2], mean[batches / 10], mean[batches * 9 / 10]);
    free(mean);
    return 0;
}
