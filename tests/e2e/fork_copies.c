/* Workload: fork() before any CUDA call (as real CUDA requires), then the child does 3 peer copies
 * and the parent 4.  Exercises the tracer's fork handling: child silent, or traced on its own. */
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static int copies(int n)
{
    void *a, *b;
    if (cudaSetDevice(0) || cudaMalloc(&a, 1 << 16) || cudaSetDevice(1) || cudaMalloc(&b, 1 << 16))
        return 2;
    for (int i = 0; i < n; i++)
        if (cudaMemcpyPeer(b, 1, a, 0, 1 << 16) != cudaSuccess)
            return 2;
    return 0;
}

int main(void)
{
    pid_t pid = fork();
    if (pid == 0)
        exit(copies(3) ? 2 : 0);
    if (copies(4))
        return 2;
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return 3;
    return 0;
}
