/* Demo workload: 8 threads, one per simulated GPU, each pushing tensor shards to its ring neighbour
 * with cudaMemcpyPeerAsync (the shape of a ring all-gather), while GPU 0 also pushes a second shard
 * per round to GPU 1 -- a hot link the report's imbalance figures should show.  Ground truth goes
 * to argv[1]. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NGPU 8
#define SHARD (16u << 20)
#define ROUNDS 12

static void *bufs[NGPU][2];     /* [g][0]: g's shard, sent on; [g][1]: what g receives */
static void *hot_src, *hot_dst; /* the second shard's own buffers (on GPU 0, GPU 1): no copy
                                 * reads what another one writes (a race TSan would see) */
static unsigned long long sent[NGPU][NGPU], ops[NGPU][NGPU];

static void *worker(void *arg)
{
    int g = (int)(long)arg, next = (g + 1) % NGPU;
    cudaStream_t s;
    if (cudaSetDevice(g) || cudaStreamCreate(&s))
        exit(2);
    for (int r = 0; r < ROUNDS; r++) {
        if (cudaMemcpyPeerAsync(bufs[next][1], next, bufs[g][0], g, SHARD, s))
            exit(2);
        sent[g][next] += SHARD;
        ops[g][next]++;
        if (g == 0) {
            if (cudaMemcpyPeerAsync(hot_dst, 1, hot_src, 0, SHARD, s))
                exit(2);
            sent[0][1] += SHARD;
            ops[0][1]++;
        }
    }
    return cudaStreamSynchronize(s) ? (void *)1 : NULL;
}

int main(int argc, char **argv)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) || n < NGPU) {
        fprintf(stderr, "needs %d GPUs\n", NGPU);
        return 1;
    }
    for (int g = 0; g < NGPU; g++)
        if (cudaSetDevice(g) || cudaMalloc(&bufs[g][0], SHARD) || cudaMalloc(&bufs[g][1], SHARD))
            return 2;
    if (cudaSetDevice(0) || cudaMalloc(&hot_src, SHARD) || cudaSetDevice(1) ||
        cudaMalloc(&hot_dst, SHARD))
        return 2;
    pthread_t t[NGPU];
    for (long g = 0; g < NGPU; g++)
        pthread_create(&t[g], NULL, worker, (void *)g);
    for (int g = 0; g < NGPU; g++) {
        void *rc;
        pthread_join(t[g], &rc);
        if (rc)
            return 2;
    }
    FILE *f = fopen(argc > 1 ? argv[1] : "/dev/null", "w");
    for (int s = 0; f && s < NGPU; s++)
        for (int d = 0; d < NGPU; d++)
            if (ops[s][d])
                fprintf(f, "%d %d %llu %llu\n", s, d, sent[s][d], ops[s][d]);
    if (f)
        fclose(f);
    return 0;
}
