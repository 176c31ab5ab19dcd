/* Workload: fork() again and again while other threads keep every lock of the tracer busy, and
 * make each child take every one of them again.  A lock held by another thread at the fork and not
 * reset in the child leaves the child deadlocked: the parent waits for each child with a timeout
 * and fails, naming the iteration, if one does not finish.
 *
 * Linked against the null CUDA runtime, NCCL and libibverbs of bench/ (stateless stand-ins, safe to
 * call in a fork child, unlike the simulated ones), so that everything a child waits on is the
 * tracer's.  The locks and what takes them:
 *   writer       the writer thread, every flush (run with ICX_FLUSH_MS=1)
 *   cuda         cudaMalloc / cudaFree (the pointer map)
 *   gpu          a GPU-timed copy (ICX_GPU_TIMING=all: the event pools)
 *   nccl         ncclAllReduce (sequence numbers), ncclCommInitRank / Destroy (the table, the
 *                dumps' queue)
 *   verbs        ibv_open_device (the context registry), ibv_qp_to_qp_ex (the extended-QP table)
 *   tbuf         a new thread's first event (the buffer registry), the writer's drain
 *   frame        notes (past 64 contexts every ibv_open_device leaves one)
 *
 *   fork_locks FORKS */
#include <cuda_runtime_api.h>
#include <infiniband/verbs.h>
#include <nccl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop;

static void copy_once(void)
{
    static char a[64], b[64];
    cudaMemcpyPeerAsync(b, 1, a, 0, sizeof(a), (cudaStream_t)0x1234);
}

static void alloc_once(void)
{
    void *p = NULL;
    if (cudaMalloc(&p, 4096) == cudaSuccess)
        cudaFree(p);
}

static void nccl_once(int create)
{
    static ncclComm_t comm;
    static float x[16];
    if (create || !comm) {
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        if (comm)
            ncclCommDestroy(comm);
        ncclCommInitRank(&comm, 1, id, 0);
    }
    ncclAllReduce(x, x, 16, ncclFloat32, ncclSum, comm, (cudaStream_t)0x1234);
}

static void verbs_once(void)
{
    struct ibv_context *ctx = ibv_open_device(NULL);
    if (!ctx)
        return;
    struct ibv_qp qp;
    memset(&qp, 0, sizeof(qp));
    qp.context = ctx;
    free(ibv_qp_to_qp_ex(&qp)); /* the tracer keeps its own record of it, never freed */
    ibv_close_device(ctx);
}

static void *copy_thread(void *arg)
{
    (void)arg;
    copy_once();
    return NULL;
}

static void spawn_once(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, copy_thread, NULL) == 0)
        pthread_join(t, NULL);
}

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static void *busy(void *arg)
{
    long kind = (long)arg;
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        switch (kind) {
        case 0: copy_once(); break;
        case 1: alloc_once(); break;
        case 2: nccl_once(i % 64 == 0); break;
        case 3:
            verbs_once();
            pause_us(50); /* every context and extended QP stays recorded: not too many */
            break;
        default: spawn_once(); break;
        }
        if (i % 256 == 255)
            pause_us(200); /* room on a small machine for the children to run */
    }
    return NULL;
}

/* The child takes every lock again, then exits through the tracer's destructor. */
static void child(void)
{
    copy_once();
    alloc_once();
    nccl_once(1);
    verbs_once();
    spawn_once();
    exit(0);
}

/* 0: the child exited 0 within 20 s. */
static int wait_child(pid_t pid)
{
    for (int ms = 0; ms < 20000; ms++) {
        int st;
        pid_t got = waitpid(pid, &st, WNOHANG);
        if (got == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 2;
        if (got < 0)
            return 3;
        pause_us(1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 1;
}

int main(int argc, char **argv)
{
    int forks = argc > 1 ? atoi(argv[1]) : 200;
    pthread_t t[5];
    for (long k = 0; k < 5; k++)
        if (pthread_create(&t[k], NULL, busy, (void *)k) != 0)
            return 2;
    pause_us(20000);
    int failed = 0;
    for (int i = 0; i < forks && !failed; i++) {
        pause_us(rand() % 2000);
        pid_t pid = fork();
        if (pid == 0)
            child();
        if (pid < 0)
            return 2;
        int rc = wait_child(pid);
        if (rc) {
            fprintf(stderr, "fork %d of %d: the child %s\n", i + 1, forks,
                    rc == 1 ? "did not finish in 20 s (deadlocked)" : "failed");
            failed = 1;
        }
    }
    atomic_store(&stop, 1);
    for (int k = 0; k < 5; k++)
        pthread_join(t[k], NULL);
    if (!failed)
        printf("fork_locks: %d children finished\n", forks);
    return failed;
}
