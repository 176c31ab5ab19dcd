/* Workload: a job that closes every descriptor it did not open (as daemons, some launchers and
 * Python's os.closerange do) while traced, then takes the numbers back for files of its own.
 * argv[1]: a directory for its files.  Peer copies before and after, with pauses in which the
 * tracer's writer flushes; each file must end up holding exactly what the job wrote into it.
 * Prints "files intact", or what differs (exit 1). */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NFILES 64

static int copies(void *a, void *b, cudaStream_t s, int n)
{
    for (int i = 0; i < n; i++)
        if (cudaMemcpyPeerAsync(b, 1, a, 0, 4096, s) != cudaSuccess)
            return -1;
    if (cudaStreamSynchronize(s) != cudaSuccess)
        return -1;
    struct timespec pause = {0, 150000000}; /* several of the writer's flushes */
    nanosleep(&pause, NULL);
    return 0;
}

static int line(int fd, int i, const char *what)
{
    char buf[64];
    int n = snprintf(buf, sizeof(buf), "file %d %s\n", i, what);
    return write(fd, buf, (size_t)n) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
    void *a, *b;
    cudaStream_t s;
    int fd[NFILES];
    if (argc < 2 || cudaSetDevice(0) || cudaMalloc(&a, 4096) || cudaStreamCreate(&s) ||
        cudaSetDevice(1) || cudaMalloc(&b, 4096) || cudaSetDevice(0) || copies(a, b, s, 200))
        return 2;
    for (int d = 3; d < 1024; d++)
        close(d);
    for (int i = 0; i < NFILES; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/f%d", argv[1], i);
        fd[i] = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd[i] < 0 || line(fd[i], i, "first"))
            return 2;
    }
    if (copies(a, b, s, 200))
        return 2;
    int bad = 0;
    for (int i = 0; i < NFILES; i++) {
        char want[128], got[256];
        if (line(fd[i], i, "second"))
            return 2;
        int n = snprintf(want, sizeof(want), "file %d first\nfile %d second\n", i, i);
        ssize_t r = pread(fd[i], got, sizeof(got) - 1, 0);
        off_t at = lseek(fd[i], 0, SEEK_CUR);
        if (r != n || memcmp(got, want, (size_t)n) != 0 || at != n) {
            printf("fd %d (file %d): %zd bytes, offset %lld, want %d\n", fd[i], i, r, (long long)at,
                   n);
            bad = 1;
        }
    }
    if (!bad)
        printf("files intact\n");
    return bad;
}
