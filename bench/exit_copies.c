/* A traced process, for bench/bench_startup: ten async peer copies against the null libcudart, then
 * the end argv[1] names: "return" from main (the destructor writes the final frame) or "_exit"
 * (the _exit wrapper asks the writer thread for it and waits).  What the final frame costs. */
#include <cuda_runtime_api.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char a[64], b[64];
    for (int i = 0; i < 10; i++)
        if (cudaMemcpyPeerAsync(b, 1, a, 0, sizeof(a), 0) != cudaSuccess)
            return 2;
    if (argc > 1 && !strcmp(argv[1], "_exit"))
        _exit(0);
    return 0;
}
