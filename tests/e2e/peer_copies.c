/* Workload: a known pattern of GPU peer copies (sync and async, several streams, several threads)
 * through the CUDA runtime API.  Writes the ground truth it issued (per directed link: bytes and
 * copies) to the file named by argv[1], checks every copied byte, and exits non-zero on any CUDA
 * error or data mismatch.  Optional argv[2]: "hang" sleeps forever after issuing everything (for
 * kill tests); "loop" repeats the pattern until killed.  Optional argv[3]: a file rewritten after
 * each round with the number of peer copies completed so far. */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call, cudaGetErrorName(e_)); \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

#define MIB (1024u * 1024u)
static uint64_t truth_bytes[8][8], truth_ops[8][8];
static pthread_mutex_t truth_lock = PTHREAD_MUTEX_INITIALIZER;

static void truth(int src, int dst, size_t bytes)
{
    pthread_mutex_lock(&truth_lock);
    truth_bytes[src][dst] += bytes;
    truth_ops[src][dst]++;
    pthread_mutex_unlock(&truth_lock);
}

/* A device buffer filled with a pattern derived from `seed`. */
static void *dev_buf(int dev, size_t n, unsigned seed)
{
    void *p, *h = malloc(n);
    CHECK(cudaSetDevice(dev));
    CHECK(cudaMalloc(&p, n));
    for (size_t i = 0; i < n; i++)
        ((unsigned char *)h)[i] = (unsigned char)(seed * 31u + i * 7u);
    CHECK(cudaMemcpy(p, h, n, cudaMemcpyHostToDevice));
    free(h);
    return p;
}

static void expect_equal(const void *dev_a, const void *dev_b, size_t n, const char *what)
{
    unsigned char *a = malloc(n), *b = malloc(n);
    CHECK(cudaMemcpy(a, dev_a, n, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(b, dev_b, n, cudaMemcpyDeviceToHost));
    if (memcmp(a, b, n) != 0) {
        fprintf(stderr, "data mismatch after %s\n", what);
        exit(3);
    }
    free(a);
    free(b);
}

/* Thread A: async peer copies 0->1 on one stream and 1->0 on another (device 1's stream). */
static void *thread_a(void *arg)
{
    (void)arg;
    size_t n = 8 * MIB;
    void *s0 = dev_buf(0, n, 1), *d1 = dev_buf(1, n, 2), *s1 = dev_buf(1, 4 * n, 3),
         *d0 = dev_buf(0, 4 * n, 4);
    cudaStream_t st0, st1;
    CHECK(cudaSetDevice(0));
    CHECK(cudaStreamCreate(&st0));
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamCreate(&st1));
    CHECK(cudaSetDevice(0));
    for (int i = 0; i < 16; i++) {
        CHECK(cudaMemcpyPeerAsync(d1, 1, s0, 0, n, st0));
        truth(0, 1, n);
    }
    for (int i = 0; i < 4; i++) {
        CHECK(cudaMemcpyPeerAsync(d0, 0, s1, 1, 4 * n, st1));
        truth(1, 0, 4 * n);
    }
    CHECK(cudaStreamSynchronize(st0));
    CHECK(cudaStreamSynchronize(st1));
    expect_equal(s0, d1, n, "thread A 0->1");
    expect_equal(s1, d0, 4 * n, "thread A 1->0");
    return NULL;
}

/* Thread B: synchronous cudaMemcpyPeer 2->3. */
static void *thread_b(void *arg)
{
    (void)arg;
    size_t n = 6 * MIB;
    void *s2 = dev_buf(2, n, 5), *d3 = dev_buf(3, n, 6);
    CHECK(cudaSetDevice(2));
    for (int i = 0; i < 8; i++) {
        CHECK(cudaMemcpyPeer(d3, 3, s2, 2, n));
        truth(2, 3, n);
    }
    expect_equal(s2, d3, n, "thread B 2->3");
    return NULL;
}

/* Thread C: cudaMemcpyAsync / cudaMemcpy between devices under UVA (how PyTorch moves tensors),
 * plus copies that are not peer copies and must not be counted. */
static void *thread_c(void *arg)
{
    (void)arg;
    size_t n = 4 * MIB;
    void *s4 = dev_buf(4, n, 7), *d5 = dev_buf(5, n, 8), *s6 = dev_buf(6, 3 * n, 9),
         *d7 = dev_buf(7, 3 * n, 10), *other4 = dev_buf(4, n, 11);
    cudaStream_t st4;
    CHECK(cudaSetDevice(4));
    CHECK(cudaStreamCreate(&st4));
    for (int i = 0; i < 10; i++) {
        CHECK(cudaMemcpyAsync(d5, s4, n, cudaMemcpyDeviceToDevice, st4));
        truth(4, 5, n);
    }
    for (int i = 0; i < 6; i++) {
        CHECK(cudaMemcpyAsync(s4, d5, n / 2, cudaMemcpyDefault, st4));
        truth(5, 4, n / 2);
    }
    CHECK(cudaStreamSynchronize(st4));
    CHECK(cudaSetDevice(6));
    for (int i = 0; i < 3; i++) {
        CHECK(cudaMemcpy(d7, s6, 3 * n, cudaMemcpyDeviceToDevice));
        truth(6, 7, 3 * n);
    }
    /* Not peer copies: same device, and host<->device. */
    CHECK(cudaSetDevice(4));
    CHECK(cudaMemcpyAsync(other4, s4, n, cudaMemcpyDeviceToDevice, st4));
    /* The simulated legacy stream does not wait for st4 as CUDA's would (docs/SIMULATION.md):
     * without this, writing s4 below races with that copy's reading of it (TSan saw it). */
    CHECK(cudaStreamSynchronize(st4));
    char *host = malloc(n);
    CHECK(cudaMemcpy(host, s4, n, cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(s4, host, n, cudaMemcpyHostToDevice));
    CHECK(cudaStreamSynchronize(st4));
    free(host);
    expect_equal(s4, d5, n / 2, "thread C 5->4");
    expect_equal(s6, d7, 3 * n, "thread C 6->7");
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s TRUTH_FILE [hang|loop [PROGRESS_FILE]]\n", argv[0]);
        return 1;
    }
    int ndev = 0;
    CHECK(cudaGetDeviceCount(&ndev));
    if (ndev < 8) {
        fprintf(stderr, "needs 8 devices, found %d\n", ndev);
        return 1;
    }
    const char *mode = argc > 2 ? argv[2] : "";
    do {
        pthread_t t[3];
        void *(*fn[3])(void *) = {thread_a, thread_b, thread_c};
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, fn[i], NULL);
        for (int i = 0; i < 3; i++)
            pthread_join(t[i], NULL);
        FILE *f = fopen(argv[1], "w");
        if (!f) {
            perror(argv[1]);
            return 1;
        }
        for (int s = 0; s < 8; s++)
            for (int d = 0; d < 8; d++)
                if (truth_ops[s][d])
                    fprintf(f, "%d %d %llu %llu\n", s, d, (unsigned long long)truth_bytes[s][d],
                            (unsigned long long)truth_ops[s][d]);
        fclose(f);
        if (argc > 3) {
            unsigned long long done = 0;
            char tmp[4096];
            for (int s = 0; s < 8; s++)
                for (int d = 0; d < 8; d++)
                    done += truth_ops[s][d];
            snprintf(tmp, sizeof(tmp), "%s.tmp", argv[3]);
            FILE *pf = fopen(tmp, "w");
            if (!pf || fprintf(pf, "%llu\n", done) < 0 || fclose(pf) != 0 || rename(tmp, argv[3]))
                return 1;
        }
        if (strcmp(mode, "hang") == 0)
            for (;;)
                pause();
    } while (strcmp(mode, "loop") == 0);
    return 0;
}
