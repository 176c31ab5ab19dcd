/* Workload: argv[1] threads (64 by default) released at once, each making argv[2] async peer
 * copies (4 KiB) from GPU t%8 into a buffer of its own on GPU (t+1)%8, on a stream of its own, then
 * synchronizing; every odd thread then exits and a fresh thread takes its place for another round
 * (a thread's ring handed back while the others keep recording).  Every buffer's bytes are
 * checked.  Writes the truth file argv[3]: "src dst bytes copies" per pair (tests/e2e read_truth).
 * Race-free by construction, so that a TSan run (make tsan) reports only the tracer's races. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NGPU 8
#define SIZE 4096

static int copies;
static pthread_barrier_t start;
static void *src[NGPU], **dst; /* dst[t]: thread slot t's, on GPU (t+1)%8 */
static long done[NGPU];        /* per source GPU, under the lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int failed;

static void *worker(void *arg)
{
    int t = (int)(long)arg, s = t % NGPU, d = (s + 1) % NGPU;
    if (t >= 0)
        pthread_barrier_wait(&start);
    else
        t = -t - 1, s = t % NGPU, d = (s + 1) % NGPU;
    cudaStream_t st;
    if (cudaSetDevice(s) || cudaStreamCreate(&st)) {
        failed = 1;
        return NULL;
    }
    for (int i = 0; i < copies; i++)
        if (cudaMemcpyPeerAsync(dst[t], d, src[s], s, SIZE, st) != cudaSuccess)
            failed = 1;
    if (cudaStreamSynchronize(st) != cudaSuccess || cudaStreamDestroy(st) != cudaSuccess)
        failed = 1;
    pthread_mutex_lock(&lock);
    done[s] += copies;
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 64;
    copies = argc > 2 ? atoi(argv[2]) : 500;
    const char *truth = argc > 3 ? argv[3] : NULL;
    if (n < 1 || n > 1024 || copies < 1)
        return 2;
    for (int g = 0; g < NGPU; g++) {
        if (cudaSetDevice(g) || cudaMalloc(&src[g], SIZE))
            return 2;
        unsigned char pat[SIZE];
        memset(pat, 0x40 + g, SIZE);
        if (cudaMemcpy(src[g], pat, SIZE, cudaMemcpyHostToDevice))
            return 2;
    }
    dst = calloc((size_t)n, sizeof(*dst));
    for (int t = 0; t < n; t++)
        if (cudaSetDevice((t % NGPU + 1) % NGPU) || cudaMalloc(&dst[t], SIZE))
            return 2;
    pthread_t *th = calloc((size_t)n, sizeof(*th));
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (int t = 0; t < n; t++)
        if (pthread_create(&th[t], NULL, worker, (void *)(long)t))
            return 2;
    for (int t = 1; t < n; t += 2) { /* the odd ones end; a new thread for each */
        pthread_join(th[t], NULL);
        if (pthread_create(&th[t], NULL, worker, (void *)(long)(-t - 1)))
            return 2;
    }
    for (int t = 0; t < n; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < n; t++) {
        unsigned char got[SIZE];
        if (cudaMemcpy(got, dst[t], SIZE, cudaMemcpyDeviceToHost) || got[0] != 0x40 + t % NGPU ||
            got[SIZE - 1] != 0x40 + t % NGPU)
            return 3;
    }
    if (failed)
        return 4;
    if (truth) {
        FILE *f = fopen(truth, "w");
        if (!f)
            return 2;
        for (int g = 0; g < NGPU; g++)
            if (done[g])
                fprintf(f, "%d %d %ld %ld\n", g, (g + 1) % NGPU, done[g] * SIZE, done[g]);
        fclose(f);
    }
    return 0;
}
