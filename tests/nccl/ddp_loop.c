/* A DDP-like training loop over NCCL for the simulated cluster (tools/icx-sim): per step, an
 * all-reduce of the gradients over the world communicator, a ring exchange (send to the next
 * rank, receive from the previous, in one group), a broadcast from rank 0 (ncclBcast, in place),
 * an all-gather inside the node's communicator (ncclCommSplit by node) and a reduce-scatter over
 * the world.  Every result is checked; the exit status says whether all were right.
 *
 *   ddp_loop DIR STEPS COUNT
 *
 * DDP_NONBLOCKING=1 creates the world communicator non-blocking (ncclCommInitRankConfig with
 * blocking = 0, then ncclCommGetAsyncError until it is no longer ncclInProgress).
 *
 * DDP_PAIR_COMM=1 adds a pipeline-like pair communicator (ranks 2k and 2k+1, split by rank / 2):
 * each step starts with an all-reduce there whose result the host waits for (a loss both stages
 * need), so a rank held up in its pair reaches the world collectives late too.  The node
 * communicator is split by GROUP_RANK (torchrun's node index) when set, else rank / lws.
 *
 * Faults for tests: DDP_SLOW_RANK=R with DDP_SLOW_US=N makes rank R compute N us longer before
 * each step's collectives; DDP_JITTER_US=N makes every rank wait a random 0..N us before each
 * step (uniform, from a generator seeded by DDP_SEED and the rank); DDP_HANG_RANK=R with
 * DDP_HANG_STEP=S makes rank R stop before step S: it sleeps forever, or with DDP_HANG_HOW=lock
 * its main thread waits in ddp_wait_checkpoint() for a lock that a checkpoint thread
 * (ddp_checkpoint_writer) took and never releases; DDP_MISMATCH_RANK=R with
 * DDP_MISMATCH_STEP=S and DDP_MISMATCH=op|count|skip|skip-node makes rank R call, in step S, an
 * all-gather where the others call the world all-reduce (op), the all-reduce with half the count
 * (count), nothing (skip: its next collective meets their all-reduce), everything but the
 * node communicator's all-gather (skip-node), or the node communicator's all-gather first, before
 * the world all-reduce (order: the two communicators in opposite orders), its ring receive with
 * half the count (recv-count) or no ring receive (skip-recv): the job hangs there, as with NCCL.
 * DDP_WATCHDOG_S=N: a watchdog thread aborts the communicators after N s without a finished step
 * (armed once the first step has finished, so a slow start on a loaded machine is not a hang)
 * and ends the process with abort() (ddp_watchdog).  DDP_PROBE_ERRORS=1: calls NCCL refuses,
 * their results printed (probe_errors).
 * Ground truth in DIR/truth-RANK:
 * "<comm> <op> <calls> <bytes>" per op, bytes as nccl-tests count them (one rank's buffer:
 * all-gather its send part, reduce-scatter its receive part). */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A failed call exits, unless the watchdog is aborting the communicators: then the call failed
 * because of it, and the watchdog ends the process (as PyTorch's does). */
static _Atomic int aborting;
#define CK(x)                                                                                      \
    do {                                                                                           \
        if ((x) != 0) {                                                                            \
            while (atomic_load(&aborting))                                                         \
                pause();                                                                           \
            fprintf(stderr, "ddp_loop: %s failed at line %d\n", #x, __LINE__);                     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int env_int(const char *n, int def)
{
    const char *v = getenv(n);
    return v && *v ? atoi(v) : def;
}

static float *dev_alloc(size_t n)
{
    void *p = NULL;
    CK(cudaMalloc(&p, n * sizeof(float)));
    return p;
}

static void fill(float *d, size_t n, float v, float *h)
{
    for (size_t i = 0; i < n; i++)
        h[i] = v;
    CK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
}

static int expect(const float *d, size_t n, float v, float *h, const char *what, int step)
{
    CK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++)
        if (h[i] != v) {
            while (atomic_load(&aborting)) /* cut short by the watchdog's abort */
                pause();
            fprintf(stderr, "ddp_loop: %s step %d: element %zu is %g, want %g\n", what, step, i,
                    (double)h[i], (double)v);
            return 1;
        }
    return 0;
}

/* The injected lock hang: a checkpoint thread holds the lock for ever, the main thread waits. */
static pthread_mutex_t ckpt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ckpt_taken_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ckpt_taken_cond = PTHREAD_COND_INITIALIZER;
static int ckpt_taken;

__attribute__((noinline)) static void *ddp_checkpoint_writer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&ckpt_lock);
    pthread_mutex_lock(&ckpt_taken_lock);
    ckpt_taken = 1;
    pthread_cond_signal(&ckpt_taken_cond);
    pthread_mutex_unlock(&ckpt_taken_lock);
    for (;;)
        pause(); /* "writing" for ever, the lock held */
    return NULL;
}

__attribute__((noinline)) static void ddp_wait_checkpoint(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, ddp_checkpoint_writer, NULL) != 0)
        exit(1);
    pthread_mutex_lock(&ckpt_taken_lock);
    while (!ckpt_taken)
        pthread_cond_wait(&ckpt_taken_cond, &ckpt_taken_lock);
    pthread_mutex_unlock(&ckpt_taken_lock);
    pthread_mutex_lock(&ckpt_lock); /* never returns */
    pthread_mutex_unlock(&ckpt_lock);
}

/* The watchdog (DDP_WATCHDOG_S=N), like PyTorch's NCCL watchdog with async error handling: a
 * thread that sees no step finish for N s aborts every communicator (ncclCommAbort, from its own
 * thread, while the main thread's work waits in them), says so, and ends the process with
 * abort(). */
static ncclComm_t wd_comms[4];
static _Atomic int wd_ncomms, wd_steps, wd_rank;

static void *ddp_watchdog(void *arg)
{
    int limit_ms = (int)(long)arg * 1000, idle_ms = 0, seen = -1;
    for (;; idle_ms += 50) {
        usleep(50000);
        int now = atomic_load(&wd_steps);
        if (now != seen)
            seen = now, idle_ms = 0;
        if (idle_ms >= limit_ms && now > 0 && atomic_load(&wd_ncomms))
            break;
    }
    atomic_store(&aborting, 1);
    for (int i = 0; i < atomic_load(&wd_ncomms); i++) {
        ncclResult_t r = ncclCommAbort(wd_comms[i]);
        fprintf(stderr, "ddp_loop rank %d: watchdog: no step done in %d s, ncclCommAbort: %s\n",
                atomic_load(&wd_rank), limit_ms / 1000, ncclGetErrorString(r));
    }
    abort();
}

/* DDP_PROBE_ERRORS=1: calls NCCL must refuse, each result printed (the differential test
 * compares them with and without the tracer). */
static void probe_errors(int rank, int world, ncclComm_t wc, float *buf, cudaStream_t st)
{
    static const char *what[] = {"allreduce of 2^62 elements",
                                 "allreduce of datatype 99",
                                 "allreduce on a NULL communicator",
                                 "broadcast from root -1",
                                 "send to rank world",
                                 "group end without a start"};
    ncclResult_t r[6]; /* one after the other (an initializer list's calls are unsequenced) */
    r[0] = ncclAllReduce(buf, buf, (size_t)1 << 62, ncclFloat, ncclSum, wc, st);
    r[1] = ncclAllReduce(buf, buf, 16, (ncclDataType_t)99, ncclSum, wc, st);
    r[2] = ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, NULL, st);
    r[3] = ncclBroadcast(buf, buf, 16, ncclFloat, -1, wc, st);
    r[4] = ncclSend(buf, 16, ncclFloat, world, wc, st);
    r[5] = ncclGroupEnd();
    for (int i = 0; i < 6; i++)
        printf("ddp_loop rank %d: probe %s: %d (%s)\n", rank, what[i], (int)r[i],
               ncclGetErrorString(r[i]));
    ncclResult_t async = ncclSuccess;
    ncclResult_t ar = ncclCommGetAsyncError(wc, &async);
    printf("ddp_loop rank %d: probe async error: %d, %d\n", rank, (int)ar, (int)async);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s DIR STEPS COUNT\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int steps = atoi(argv[2]);
    size_t count = (size_t)atol(argv[3]);
    int rank = env_int("RANK", 0), world = env_int("WORLD_SIZE", 1);
    int lr = env_int("LOCAL_RANK", 0), lws = env_int("LOCAL_WORLD_SIZE", world);
    int ndev = 1;
    CK(cudaGetDeviceCount(&ndev));
    CK(cudaSetDevice(lr % ndev));
    ncclUniqueId id;
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/nccl-id", dir);
    if (rank == 0) {
        CK(ncclGetUniqueId(&id));
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        FILE *f = fopen(tmp, "w");
        if (!f || fwrite(&id, sizeof(id), 1, f) != 1 || fclose(f) || rename(tmp, path))
            return 1;
    } else {
        for (int tries = 0;; tries++) {
            FILE *f = fopen(path, "r");
            size_t got = f ? fread(&id, sizeof(id), 1, f) : 0;
            if (f)
                fclose(f);
            if (got == 1)
                break;
            if (tries > 60000)
                return 1;
            usleep(1000);
        }
    }
    ncclComm_t wc, nc;
    if (env_int("DDP_NONBLOCKING", 0)) { /* a non-blocking communicator: poll until it is ready */
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
        cfg.blocking = 0;
        ncclResult_t r = ncclCommInitRankConfig(&wc, world, id, rank, &cfg), state = r;
        if (r != ncclSuccess && r != ncclInProgress)
            CK(r);
        while (state == ncclInProgress) {
            CK(ncclCommGetAsyncError(wc, &state));
            if (state == ncclInProgress)
                usleep(100);
        }
        CK(state);
    } else {
        CK(ncclCommInitRank(&wc, world, id, rank));
    }
    if (env_int("DDP_NOCOLOR_SPLIT", 0)) { /* a split the odd ranks sit out, before the next */
        ncclComm_t evens = NULL;
        CK(ncclCommSplit(wc, rank % 2 ? NCCL_SPLIT_NOCOLOR : 0, rank, &evens, NULL));
        if ((evens != NULL) == (rank % 2 != 0)) {
            fprintf(stderr, "ddp_loop: rank %d: NOCOLOR split gave %p\n", rank, (void *)evens);
            return 1;
        }
        if (evens)
            CK(ncclCommDestroy(evens));
    }
    ncclComm_t pc = NULL;
    if (env_int("DDP_PAIR_COMM", 0))
        CK(ncclCommSplit(wc, rank / 2, rank, &pc, NULL));
    CK(ncclCommSplit(wc, env_int("GROUP_RANK", rank / lws), rank, &nc, NULL));
    int nn = 0;
    CK(ncclCommCount(nc, &nn));
    size_t ring = count / 16, bc = count / 4, ag = count / 8, rs = count / 16;
    float *grad = dev_alloc(count), *sbuf = dev_alloc(ring), *rbuf = dev_alloc(ring);
    float *bbuf = dev_alloc(bc), *agin = dev_alloc(ag), *agout = dev_alloc(ag * (size_t)nn);
    float *rsin = dev_alloc(rs * (size_t)world), *rsout = dev_alloc(rs);
    float *h = malloc(sizeof(float) * (count > rs * (size_t)world ? count : rs * (size_t)world) +
                      sizeof(float) * ag * (size_t)nn);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    if (env_int("DDP_PROBE_ERRORS", 0))
        probe_errors(rank, world, wc, grad, st);
    wd_comms[0] = wc, wd_comms[1] = nc, wd_comms[2] = pc;
    atomic_store(&wd_rank, rank);
    atomic_store(&wd_ncomms, pc ? 3 : 2);
    pthread_t wd;
    if (env_int("DDP_WATCHDOG_S", 0) > 0 &&
        pthread_create(&wd, NULL, ddp_watchdog, (void *)(long)env_int("DDP_WATCHDOG_S", 0)))
        return 1;
    int bad = 0, slow = env_int("DDP_SLOW_RANK", -1), slow_us = env_int("DDP_SLOW_US", 0);
    int hang = env_int("DDP_HANG_RANK", -1), hang_step = env_int("DDP_HANG_STEP", -1);
    int mm_rank = env_int("DDP_MISMATCH_RANK", -1), mm_step = env_int("DDP_MISMATCH_STEP", -1);
    const char *mm = getenv("DDP_MISMATCH") ? getenv("DDP_MISMATCH") : "";
    const char *hang_how = getenv("DDP_HANG_HOW") ? getenv("DDP_HANG_HOW") : "";
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    unsigned jitter_us = (unsigned)env_int("DDP_JITTER_US", 0);
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(env_int("DDP_SEED", 1) * 1000003 + rank + 1);
    size_t pcount = count < 1024 ? count : 1024;
    float *pbuf = pc ? dev_alloc(pcount) : NULL;
    for (int s = 0; s < steps; s++) {
        if (rank == hang && s == hang_step && !strcmp(hang_how, "lock"))
            ddp_wait_checkpoint();
        if (rank == hang && s == hang_step)
            for (;;)
                pause();
        if (rank == slow)
            usleep((useconds_t)slow_us);
        if (jitter_us) { /* xorshift64: a different, reproducible delay per rank and step */
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            usleep((useconds_t)((rng >> 11) % (jitter_us + 1)));
        }
        if (pc) { /* the pair's all-reduce, its result awaited on the host */
            fill(pbuf, pcount, 1.0f, h);
            CK(ncclAllReduce(pbuf, pbuf, pcount, ncclFloat, ncclSum, pc, st));
            CK(cudaStreamSynchronize(st));
            int pn = 0;
            CK(ncclCommCount(pc, &pn));
            bad |= expect(pbuf, pcount, (float)pn, h, "pair allreduce", s);
        }
        fill(grad, count, (float)(rank + 1 + s), h);
        int swapped = rank == mm_rank && s == mm_step && !strcmp(mm, "order");
        if (swapped) {
            fill(agin, ag, (float)lr, h);
            CK(ncclAllGather(agin, agout, ag, ncclFloat, nc, st));
        }
        if (rank == mm_rank && s == mm_step && !strcmp(mm, "op"))
            CK(ncclAllGather(grad + (size_t)rank * (count / (size_t)world), grad,
                             count / (size_t)world, ncclFloat, wc, st));
        else if (rank == mm_rank && s == mm_step && !strcmp(mm, "skip"))
            ; /* the call every other rank makes */
        else if (rank == mm_rank && s == mm_step && !strcmp(mm, "count"))
            CK(ncclAllReduce(grad, grad, count / 2, ncclFloat, ncclSum, wc, st));
        else
            CK(ncclAllReduce(grad, grad, count, ncclFloat, ncclSum, wc, st));
        fill(sbuf, ring, (float)(rank * 1000 + s), h);
        CK(ncclGroupStart());
        CK(ncclSend(sbuf, ring, ncclFloat, next, wc, st));
        if (!(rank == mm_rank && s == mm_step && !strcmp(mm, "skip-recv")))
            CK(ncclRecv(rbuf,
                        rank == mm_rank && s == mm_step && !strcmp(mm, "recv-count") ? ring / 2
                                                                                     : ring,
                        ncclFloat, prev, wc, st));
        CK(ncclGroupEnd());
        fill(bbuf, bc, rank == 0 ? (float)s : -1.0f, h);
        CK(ncclBcast(bbuf, bc, ncclFloat, 0, wc, st));
        fill(agin, ag, (float)lr, h);
        if (!(rank == mm_rank && s == mm_step && !strcmp(mm, "skip-node")) && !swapped)
            CK(ncclAllGather(agin, agout, ag, ncclFloat, nc, st));
        fill(rsin, rs * (size_t)world, 1.0f, h);
        CK(ncclReduceScatter(rsin, rsout, rs, ncclFloat, ncclSum, wc, st));
        CK(cudaStreamSynchronize(st));
        bad |= expect(grad, count, (float)(world * (world + 1) / 2 + world * s), h, "allreduce", s);
        bad |= expect(rbuf, ring, (float)(prev * 1000 + s), h, "recv", s);
        bad |= expect(bbuf, bc, (float)s, h, "broadcast", s);
        for (int r = 0; r < nn; r++)
            bad |= expect(agout + (size_t)r * ag, ag, (float)r, h, "allgather", s);
        bad |= expect(rsout, rs, (float)world, h, "reducescatter", s);
        atomic_fetch_add(&wd_steps, 1);
    }
    snprintf(path, sizeof(path), "%s/truth-%d", dir, rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return 1;
    unsigned long long S = (unsigned long long)steps;
    fprintf(f, "world AllReduce %llu %llu\n", S, S * count * 4);
    fprintf(f, "world Send %llu %llu\n", S, S * ring * 4);
    fprintf(f, "world Recv %llu %llu\n", S, S * ring * 4);
    fprintf(f, "world Broadcast %llu %llu\n", S, S * bc * 4);
    fprintf(f, "node AllGather %llu %llu\n", S, S * ag * 4);
    fprintf(f, "world ReduceScatter %llu %llu\n", S, S * rs * 4);
    fclose(f);
    if (pc)
        CK(ncclCommDestroy(pc));
    CK(ncclCommDestroy(nc));
    CK(ncclCommDestroy(wc));
    printf("ddp_loop rank %d: %d steps, results %s\n", rank, steps, bad ? "WRONG" : "correct");
    return bad;
}
