/* A multi-node RDMA workload for the simulated cluster (tools/icx-sim): every rank pairs with the
 * rank of the same local rank on the next node and, over one RC QP on its rail NIC (mlx5_<local
 * rank>, or $NCCL_IB_HCA when set, as NCCL would take it), posts ITERS RDMA WRITEs and ITERS SENDs
 * of SIZE bytes into the peer's receives.  QP facts are exchanged through files in DIR (the
 * out-of-band channel perftest or NCCL's bootstrap would be).  Each rank writes its ground truth:
 * DIR/truth-<rank>: "rank R node N nic NAME peer P bytes_out B errors E".  With BAD_RANK, that
 * rank finally posts one more RDMA WRITE to an address the peer never registered, which must
 * complete with an error (posted, so counted; E = 1).
 *
 *   rail_verbs DIR ITERS SIZE [BAD_RANK]
 *
 * RAIL_STAGE_MS=N first stages data host -> GPU -> host for N ms from the main thread, through
 * pinned memory when ICXSIM_PINNED=1 (else pageable), as a data loader feeding the GPU would:
 * where that thread runs and where the pinned pages live are what NUMA placement is about. */
#include <cuda_runtime_api.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int env_int(const char *n)
{
    const char *v = getenv(n);
    return v ? atoi(v) : 0;
}

struct info {
    uint32_t qpn, rkey;
    uint16_t lid;
    uint64_t addr;
    union ibv_gid gid;
};

/* Completions share one CQ: count receives and sends apart, wait for `sends` more send ones. */
static int recvs_done;
static void reap(struct ibv_cq *cq, int sends, int recvs)
{
    struct ibv_wc wc[16];
    while (sends > 0 || recvs_done < recvs) {
        int got = ibv_poll_cq(cq, 16, wc);
        if (got < 0)
            die("poll_cq");
        for (int i = 0; i < got; i++) {
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "rail_verbs: completion status %d\n", (int)wc[i].status);
                exit(1);
            }
            if (wc[i].opcode & IBV_WC_RECV)
                recvs_done++;
            else
                sends--;
        }
        if (got == 0)
            usleep(20);
    }
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s DIR ITERS SIZE [BAD_RANK]\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    int iters = atoi(argv[2]);
    uint32_t size = (uint32_t)atoi(argv[3]);
    int rank = env_int("RANK"), world = env_int("WORLD_SIZE"), lr = env_int("LOCAL_RANK");
    int lws = env_int("LOCAL_WORLD_SIZE");
    if (lws <= 0 || world % lws)
        return 2;
    int nodes = world / lws, node = rank / lws;
    int peer = ((node + 1) % nodes) * lws + lr;
    /* The GPU this rank drives (its staging buffer lives there), as a training rank would. */
    void *gpu_buf = NULL;
    if (cudaSetDevice(lr) != cudaSuccess || cudaMalloc(&gpu_buf, size) != cudaSuccess)
        die("cuda");
    long stage_ms = getenv("RAIL_STAGE_MS") ? atol(getenv("RAIL_STAGE_MS")) : 0;
    if (stage_ms > 0) {
        const char *pin = getenv("ICXSIM_PINNED");
        int pinned = pin && !strcmp(pin, "1");
        void *host = NULL;
        if (pinned ? cudaHostAlloc(&host, size, cudaHostAllocDefault) != cudaSuccess
                   : !(host = calloc(1, size)))
            die("staging buffer");
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        do {
            if (cudaMemcpy(gpu_buf, host, size, cudaMemcpyHostToDevice) ||
                cudaMemcpy(host, gpu_buf, size, cudaMemcpyDeviceToHost))
                die("staging copy");
            clock_gettime(CLOCK_MONOTONIC, &t1);
        } while ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < stage_ms);
        if (pinned)
            cudaFreeHost(host);
        else
            free(host);
    }
    char want[64];
    const char *hca = getenv("NCCL_IB_HCA");
    snprintf(want, sizeof(want), "%s", hca && *hca ? hca : "");
    int n = 0;
    struct ibv_device **devs = ibv_get_device_list(&n);
    if (!devs || n == 0)
        die("no RDMA devices");
    struct ibv_device *dev = devs[lr % n];
    for (int i = 0; i < n && *want; i++)
        if (!strcmp(devs[i]->name, want))
            dev = devs[i];
    struct ibv_context *ctx = ibv_open_device(dev);
    struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
    char *buf = calloc(2, size);
    struct ibv_mr *mr = pd && buf ? ibv_reg_mr(pd, buf, 2 * (size_t)size,
                                               IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)
                                  : NULL;
    struct ibv_cq *cq = ctx ? ibv_create_cq(ctx, 1024, NULL, NULL, 0) : NULL;
    if (!mr || !cq)
        die("setup");
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 256, .max_recv_wr = 512, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    if (!qp)
        die("create_qp");
    /* receives for every SEND the peer will post, before anyone can send */
    for (int i = 0; i < iters; i++) {
        struct ibv_sge sg = {(uintptr_t)(buf + size), size, mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1}, *bad;
        if (ibv_post_recv(qp, &rw, &bad))
            die("post_recv");
    }
    struct ibv_port_attr pa;
    struct info me = {qp->qp_num, mr->rkey, 0, (uintptr_t)buf, {{0}}}, them;
    if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, 0, &me.gid))
        die("query");
    me.lid = pa.lid;
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/qp-%d", dir, rank);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fwrite(&me, sizeof(me), 1, f) != 1 || fclose(f) || rename(tmp, path))
        die("publish");
    snprintf(path, sizeof(path), "%s/qp-%d", dir, peer);
    for (int tries = 0;; tries++) {
        f = fopen(path, "r");
        if (f && fread(&them, sizeof(them), 1, f) == 1)
            break;
        if (f)
            fclose(f);
        if (tries > 60000)
            die("peer never published its QP");
        usleep(1000);
    }
    fclose(f);
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = them.qpn;
    a.ah_attr.dlid = them.lid;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = them.gid;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                          IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
        die("RTS");
    /* WRITEs, then SENDs; one signaled request per 16 */
    for (int op = 0; op < 2; op++)
        for (int done = 0; done < iters;) {
            int k = iters - done < 16 ? iters - done : 16;
            struct ibv_send_wr w[16], *bad;
            struct ibv_sge sg = {(uintptr_t)buf, size, mr->lkey};
            for (int j = 0; j < k; j++) {
                w[j] = (struct ibv_send_wr){.wr_id = (uint64_t)(done + j),
                                            .sg_list = &sg,
                                            .num_sge = 1,
                                            .opcode = op ? IBV_WR_SEND : IBV_WR_RDMA_WRITE,
                                            .send_flags = j == k - 1 ? IBV_SEND_SIGNALED : 0,
                                            .next = j + 1 < k ? &w[j + 1] : NULL};
                w[j].wr.rdma.remote_addr = them.addr;
                w[j].wr.rdma.rkey = them.rkey;
            }
            if (ibv_post_send(qp, w, &bad))
                die("post_send");
            reap(cq, 1, 0);
            done += k;
        }
    reap(cq, 0, iters); /* every SEND of the peer landed (its WRITEs came before them) */
    unsigned long long out = 2ull * (unsigned long long)iters * size;
    int errors = 0;
    if (argc == 5 && atoi(argv[4]) == rank) {
        struct ibv_sge sg = {(uintptr_t)buf, size, mr->lkey};
        struct ibv_send_wr w = {.wr_id = 999,
                                .sg_list = &sg,
                                .num_sge = 1,
                                .opcode = IBV_WR_RDMA_WRITE,
                                .send_flags = IBV_SEND_SIGNALED},
                           *bad;
        w.wr.rdma.remote_addr = 8; /* never registered */
        w.wr.rdma.rkey = them.rkey;
        if (ibv_post_send(qp, &w, &bad))
            die("post_send (bad)");
        out += size;
        struct ibv_wc wc;
        int got;
        while ((got = ibv_poll_cq(cq, 1, &wc)) == 0)
            usleep(20);
        if (got < 0 || wc.status == IBV_WC_SUCCESS) {
            fprintf(stderr, "rail_verbs: the bad WRITE did not fail\n");
            return 1;
        }
        errors = 1;
    }
    /* Leave only when the peer is done writing into us too. */
    snprintf(path, sizeof(path), "%s/done-%d", dir, rank);
    if (!(f = fopen(path, "w")) || fclose(f))
        die("done");
    snprintf(path, sizeof(path), "%s/done-%d", dir, peer);
    for (int tries = 0; access(path, F_OK) != 0; tries++) {
        if (tries > 60000)
            die("peer never finished");
        usleep(1000);
    }
    snprintf(path, sizeof(path), "%s/truth-%d", dir, rank);
    if (!(f = fopen(path, "w")))
        die("truth");
    fprintf(f, "rank %d node %d nic %s peer %d bytes_out %llu errors %d\n", rank, node,
            ibv_get_device_name(dev), peer, out, errors);
    fclose(f);
    ibv_destroy_qp(qp);
    return 0;
}
