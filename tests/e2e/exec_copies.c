/* Workload: processes that end without exit() or that exec.
 *   exec_copies chain N M   N peer copies, execv() of itself as "tail M": M copies, then _exit(3)
 *   exec_copies fail N      N copies, an exec of a missing file (must fail with ENOENT and return),
 *                           execl() of a missing file too, then N more copies and a normal exit
 *   exec_copies vfork N     N copies, vfork() + execl("/bin/true") in the child, N more copies
 *   exec_copies execl N     N copies, then execl() of itself as "tail 1" (variadic form)
 * Exit status 2 when a CUDA call fails, 4 when an exec or vfork misbehaves. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int copies(int n)
{
    static void *a, *b;
    if (!a && (cudaSetDevice(0) || cudaMalloc(&a, 1 << 16) || cudaSetDevice(1) ||
               cudaMalloc(&b, 1 << 16)))
        return 2;
    for (int i = 0; i < n; i++)
        if (cudaMemcpyPeer(b, 1, a, 0, 1 << 16) != cudaSuccess)
            return 2;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 1;
    int n = atoi(argv[2]);
    if (strcmp(argv[1], "tail") == 0) {
        if (copies(n))
            _exit(2);
        _exit(3);
    }
    if (copies(n))
        return 2;
    if (strcmp(argv[1], "chain") == 0 && argc > 3) {
        char *args[] = {argv[0], "tail", argv[3], NULL};
        execv("/proc/self/exe", args);
        perror("execv");
        return 4;
    }
    if (strcmp(argv[1], "execl") == 0) {
        execl("/proc/self/exe", argv[0], "tail", "1", (char *)NULL);
        perror("execl");
        return 4;
    }
    if (strcmp(argv[1], "fail") == 0) {
        char *args[] = {"missing", NULL};
        errno = 0;
        if (execv("/nonexistent/icx-missing", args) != -1 || errno != ENOENT)
            return 4;
        errno = 0;
        if (execl("/nonexistent/icx-missing", "missing", "x", (char *)NULL) != -1 ||
            errno != ENOENT)
            return 4;
        return copies(n);
    }
    if (strcmp(argv[1], "vfork") == 0) {
        pid_t pid = vfork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 4;
        return copies(n);
    }
    return 1;
}
