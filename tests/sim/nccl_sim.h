/* Shared between the simulated libnccl's core (nccl.c) and its network transport (nccl_ib.c). */
#ifndef ICXSIM_NCCL_SIM_H
#define ICXSIM_NCCL_SIM_H

#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <nccl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define MAXR 64

enum {
    C_ALLREDUCE,
    C_BROADCAST,
    C_REDUCE,
    C_ALLGATHER,
    C_REDUCESCATTER,
    C_ALLTOALL,
    C_GATHER,
    C_SCATTER
};

/* One end of a cross-node connection, published through the shared segment. */
struct ib_end {
    uint32_t qpn, rkey;
    uint16_t lid, pad;
    uint64_t addr; /* receive side: its landing buffer */
    union ibv_gid gid;
};

struct shm {
    _Atomic uint32_t count, gen, joined;
    _Atomic uint64_t release_ns;
    int nranks;
    int node[MAXR];
    int dev[MAXR]; /* each rank's CUDA device */
    struct {
        _Atomic uint64_t sent, taken; /* messages put / consumed, src -> dst */
        uint64_t bytes;
    } box[MAXR][MAXR];
    int ib_ok[MAXR];      /* 1: the rank can reach the others' nodes */
    double nic_Bps[MAXR]; /* the rate of the NIC each rank opened, bytes/s (0: none) */
    _Atomic uint64_t wire_end_ns[MAXR]; /* when each rank's current network share is through */
    uint64_t sig[MAXR][2]; /* each rank's current collective: op, type, redop, root; count */
    struct {
        struct ib_end tx, rx;
    } ib[MAXR][MAXR]; /* [src][dst]: src's send QP, dst's receive QP */
    /* then, page-aligned: nranks collective slots, then nranks*nranks mailboxes */
};

/* The rank's network state for one communicator (nccl_ib.c). */
struct ib_comm {
    int on;                 /* every rank connected: cross-node bytes go through libibverbs */
    int send_to, recv_from; /* the ring's cross-node edges (-1: none) */
    int channels;           /* ranks per node: one channel (ring) per local GPU */
    pthread_mutex_t lock;   /* posts and polls, from whichever stream runs the comm's work */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *land_mr, *src_mr;
    char *land, *src;
    struct ibv_qp *tx[MAXR], *rx[MAXR];
    uint64_t arrived[MAXR], consumed[MAXR], sends_done, sends_waited;
};

struct ncclComm {
    struct shm *s;
    size_t map_bytes;
    int rank, nranks, dev, nodes;
    uint64_t id;
    unsigned splits; /* ncclCommSplit calls on this communicator, NOCOLOR ones included */
    char name[96];
    _Atomic int inflight; /* enqueued batches not yet run */
    _Atomic int running;  /* operations of it being run now (by stream workers) */
    _Atomic int aborted;  /* ncclCommAbort: every wait gives up, queued work is skipped */
    _Atomic ncclResult_t async_error; /* first error found while running */
    struct ib_comm ib;
    uint64_t coll_seq; /* collectives launched: the profiler's sequence numbers */
    void *prof_ctx;    /* the profiler plugin's context for it, and what it asked for */
    int prof_mask;
    struct { /* ground truth of what it launched, by choice ($ICXSIM_NPROF_TRUTH) */
        const char *algo, *proto;
        uint64_t colls, channels;
    } chose[8];
};

/* Wait for every rank: 0, or -1 when this rank's communicator was aborted meanwhile (its count
 * stays in: the others are as stuck as NCCL's peers of an aborted rank). */
int sim_barrier(ncclComm_t c);
/* Connect every pair of ranks on different nodes (collective over the communicator; every rank
 * calls it once after joining).  Without a usable libibverbs nothing goes over it. */
void sim_ib_setup(ncclComm_t c);
void sim_ib_teardown(ncclComm_t c);
/* Post `bytes` to `peer` (RDMA WRITEs, the last with immediate data) and wait for the local
 * completion; wait for one message from `peer`.  0, or an NCCL error. */
ncclResult_t sim_ib_send(ncclComm_t c, int peer, uint64_t bytes);
ncclResult_t sim_ib_wait(ncclComm_t c, int peer);

/* The profiler plugin host (nccl_prof.c). */
struct sim_nprof_choice {
    const char *algo, *proto;
    int channels, warps;
};
/* After joining: load the plugin (once per process) and init it for c.  At destroy or abort: its
 * finalize. */
void sim_nprof_comm_init(ncclComm_t c);
void sim_nprof_comm_fini(ncclComm_t c);
/* What the library "chooses" for a collective of `bytes` per rank (`local` ranks per node). */
void sim_nprof_choose(int coll, uint64_t bytes, int nranks, int local,
                      struct sim_nprof_choice *out);
/* A collective launched: its event (started and stopped), the handle for its children, or NULL. */
void *sim_nprof_coll(ncclComm_t c, uint64_t seq, int coll, const void *sb, void *rb, size_t count,
                     ncclDataType_t dt, int root, const struct sim_nprof_choice *ch);
/* A network transfer of collective `coll` (NULL: a send or receive) on `channel` to or from `peer`,
 * as NCCL's proxy reports it: a proxy operation with one step, through its states (send: GPU wait,
 * peer wait, then on the wire until the completion; receive: waiting for the peer's data, flush,
 * GPU). */
struct sim_nprof_xfer {
    void *op, *step;
};
struct sim_nprof_xfer *sim_nprof_proxy_begin(ncclComm_t c, void *coll, int channel, int peer,
                                             int is_send, uint64_t bytes, struct sim_nprof_xfer *x);
void sim_nprof_proxy_end(ncclComm_t c, struct sim_nprof_xfer *x, int is_send, uint64_t bytes);
/* Its work ran from start_ns to end_ns (CLOCK_MONOTONIC): one kernel-channel event per channel. */
void sim_nprof_kernel(ncclComm_t c, void *coll, int channels, uint64_t start_ns, uint64_t end_ns);

#endif
