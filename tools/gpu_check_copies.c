/* The real-GPU check's copy workload (tools/gpu-check.sh): on device 0 of a one-GPU machine, a
 * known number of cudaMemcpyPeer / cudaMemcpyPeerAsync calls (device 0 to device 0: the only peer
 * pair one GPU has), pinned and pageable host<->device copies and same-device cudaMemcpy calls
 * (which the tracer must not count as peer copies).  Every copied byte is checked.  Then the host
 * cost of one small cudaMemcpyPeerAsync against the real driver: run it with and without the
 * preload and compare.  Prints one JSON line with what it issued (the ground truth).
 *
 *   gpu_check_copies N BYTES CALLS     (N copies of each kind, BYTES each; CALLS timed calls) */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: gpu_check_copies N BYTES CALLS\n");
        return 2;
    }
    int n = atoi(argv[1]), calls = atoi(argv[3]);
    size_t bytes = strtoull(argv[2], NULL, 0);
    unsigned char *pinned, *pageable = malloc(bytes), *check = malloc(bytes);
    void *a, *b, *small_a, *small_b;
    cudaStream_t s;
    if (!pageable || !check || n < 1 || calls < 1 || bytes < 1)
        return 2;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMallocHost((void **)&pinned, bytes));
    CHECK(cudaStreamCreate(&s));
    int bad = 0;
    for (int i = 0; i < n; i++) {
        for (size_t k = 0; k < bytes; k++)
            pinned[k] = (unsigned char)(i * 13 + k * 7);
        CHECK(cudaMemcpy(a, pinned, bytes, cudaMemcpyHostToDevice)); /* pinned H2D */
        CHECK(cudaMemcpyPeer(b, 0, a, 0, bytes));
        CHECK(cudaMemcpy(pageable, b, bytes, cudaMemcpyDeviceToHost)); /* pageable D2H */
        bad += memcmp(pageable, pinned, bytes) != 0;
        CHECK(cudaMemset(b, 0, bytes));
        CHECK(cudaMemcpyPeerAsync(b, 0, a, 0, bytes, s));
        CHECK(cudaStreamSynchronize(s));
        CHECK(cudaMemcpy(pinned, b, bytes, cudaMemcpyDeviceToHost)); /* pinned D2H */
        bad += memcmp(pinned, pageable, bytes) != 0;
        CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice));   /* same device: no peer copy */
        CHECK(cudaMemcpy(check, b, bytes, cudaMemcpyDeviceToHost)); /* pageable D2H */
        bad += memcmp(check, pageable, bytes) != 0;
    }
    /* host cost of a small async peer copy against the real driver: median of 31 batches */
    CHECK(cudaMalloc(&small_a, 64));
    CHECK(cudaMalloc(&small_b, 64));
    double per[31];
    int batch = calls / 31 + 1;
    for (int r = 0; r < 31; r++) {
        CHECK(cudaStreamSynchronize(s));
        double t0 = now_ns();
        for (int i = 0; i < batch; i++)
            cudaMemcpyPeerAsync(small_b, 0, small_a, 0, 64, s);
        per[r] = (now_ns() - t0) / batch;
    }
    CHECK(cudaStreamSynchronize(s));
    qsort(per, 31, sizeof(per[0]), cmp_double);
    printf("{\"copies\": %d, \"bytes\": %zu, \"peer_sync\": %d, \"peer_async\": %d, "
           "\"small_async\": %d, \"h2d_pinned_bytes\": %zu, \"d2h_pinned_bytes\": %zu, "
           "\"d2h_pageable_bytes\": %zu, \"same_device_copies\": %d, \"bad\": %d, "
           "\"async_call_ns_p50\": %.1f, \"async_call_ns_min\": %.1f}\n",
           n, bytes, n, n, 31 * batch, (size_t)n * bytes, (size_t)n * bytes, 2 * (size_t)n * bytes,
           n, bad, per[15], per[0]);
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
    return bad ? 1 : 0;
}
