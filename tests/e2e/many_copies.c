/* Workload: argv[1] back-to-back async peer copies 0->1 on one stream (4 KiB; 1 MiB with
 * argv[2] == "big"), then one sync; with argv[2] == "segv" it then dies of a segmentation fault;
 * with argv[2] == "wait" it then reads stdin to its end and does it all again; with argv[2] ==
 * "progress" it does that forever, writing after each sync how many copies are done into the
 * file argv[3] (atomically: a temporary renamed over it). */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

static int progress(int n, void *a, void *b, cudaStream_t s, const char *file)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", file);
    for (unsigned long long done = 0;;) {
        for (int i = 0; i < n; i++)
            if (cudaMemcpyPeerAsync(b, 1, a, 0, 4096, s) != cudaSuccess)
                return 2;
        if (cudaStreamSynchronize(s) != cudaSuccess)
            return 2;
        done += (unsigned long long)n;
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%llu\n", done) < 0 || fclose(f) != 0 || rename(tmp, file) != 0)
            return 1;
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    size_t size = argc > 2 && argv[2][0] == 'b' ? (1u << 20) : 4096;
    void *a, *b;
    cudaStream_t s;
    if (cudaSetDevice(0) || cudaMalloc(&a, size) || cudaStreamCreate(&s) || cudaSetDevice(1) ||
        cudaMalloc(&b, size) || cudaSetDevice(0))
        return 2;
    if (argc > 3 && argv[2][0] == 'p')
        return progress(n, a, b, s, argv[3]);
    int rounds = argc > 2 && argv[2][0] == 'w' ? 2 : 1;
    for (int r = 0; r < rounds; r++) {
        if (r > 0)
            while (getchar() != EOF)
                ;
        for (int i = 0; i < n; i++)
            if (cudaMemcpyPeerAsync(b, 1, a, 0, size, s) != cudaSuccess)
                return 2;
        if (cudaStreamSynchronize(s) != cudaSuccess)
            return 2;
    }
    if (argc > 2 && argv[2][0] == 's') {
        volatile int *null = NULL;
        return *null;
    }
    return 0;
}
