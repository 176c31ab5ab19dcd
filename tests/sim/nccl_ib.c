/* The simulated libnccl's network transport: bytes between ranks on different nodes go through
 * libibverbs the way NCCL's IB transport sends them (test substrate; the tracer never includes it).
 *
 * Like NCCL, the library is not linked against libibverbs: it dlopen()s libibverbs.so.1 and looks
 * every function up with dlvsym(h, name, "IBVERBS_1.1"); the data plane uses verbs.h's inline
 * ibv_post_send / ibv_post_recv / ibv_poll_cq, i.e. the context's ops.  Each rank opens the NIC of
 * its GPU (device index modulo the NICs; $NCCL_IB_HCA names another), and at communicator creation
 * every pair of ranks on different nodes is connected with one RC QP each way (addresses exchanged
 * through the communicator's shared segment, NCCL's bootstrap).  A message is RDMA WRITEs of up to
 * LAND bytes into the receiver's landing buffer, the last with immediate data (the sender's rank),
 * which the receiver sees as a receive completion.
 *
 * What goes over it: the bytes a ring algorithm sends across nodes (nccl.c decides how many); the
 * collective's result itself is computed through shared memory, so the landing buffer's content is
 * not used.  If any rank cannot open a NIC, no rank uses the network (as NCCL would fall back to
 * sockets, the simulation falls back to shared memory alone). */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_sim.h"

#define LAND (1u << 20)
#define RECVS 128 /* receives kept posted per QP */

static struct {
    int ok;
    struct ibv_device **(*get_device_list)(int *);
    void (*free_device_list)(struct ibv_device **);
    const char *(*get_device_name)(struct ibv_device *);
    struct ibv_context *(*open_device)(struct ibv_device *);
    int (*close_device)(struct ibv_context *);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *);
    int (*dealloc_pd)(struct ibv_pd *);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
    int (*dereg_mr)(struct ibv_mr *);
    struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
    int (*destroy_cq)(struct ibv_cq *);
    struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
    int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
    int (*destroy_qp)(struct ibv_qp *);
    int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *);
    int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
} V;
static pthread_once_t v_once = PTHREAD_ONCE_INIT;

static void v_load(void)
{
    void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
#define L(f, name) (*(void **)&V.f = dlvsym(h, name, "IBVERBS_1.1")) != NULL
    V.ok = L(get_device_list, "ibv_get_device_list") &&
           L(free_device_list, "ibv_free_device_list") &&
           L(get_device_name, "ibv_get_device_name") && L(open_device, "ibv_open_device") &&
           L(close_device, "ibv_close_device") && L(alloc_pd, "ibv_alloc_pd") &&
           L(dealloc_pd, "ibv_dealloc_pd") && L(reg_mr, "ibv_reg_mr") &&
           L(dereg_mr, "ibv_dereg_mr") && L(create_cq, "ibv_create_cq") &&
           L(destroy_cq, "ibv_destroy_cq") && L(create_qp, "ibv_create_qp") &&
           L(modify_qp, "ibv_modify_qp") && L(destroy_qp, "ibv_destroy_qp") &&
           L(query_port, "ibv_query_port") && L(query_gid, "ibv_query_gid");
#undef L
}

static int post_recv(struct ibv_qp *qp, struct ib_comm *ib)
{
    struct ibv_sge sg = {(uintptr_t)ib->land, 0, ib->land_mr->lkey};
    struct ibv_recv_wr w = {.wr_id = 0, .sg_list = &sg, .num_sge = 1}, *bad;
    return ibv_post_recv(qp, &w, &bad);
}

/* This rank's NIC, PD, CQ, buffers and a QP pair per remote rank; 0 when all are there. */
static int open_local(ncclComm_t c, uint16_t *lid, union ibv_gid *gid)
{
    struct ib_comm *ib = &c->ib;
    pthread_once(&v_once, v_load);
    if (!V.ok)
        return -1;
    int n = 0;
    struct ibv_device **devs = V.get_device_list(&n);
    if (!devs || n <= 0) {
        if (devs)
            V.free_device_list(devs);
        return -1;
    }
    struct ibv_device *d = devs[(c->dev < 0 ? 0 : c->dev) % n];
    const char *hca = getenv("NCCL_IB_HCA");
    for (int i = 0; hca && *hca && i < n; i++)
        if (!strcmp(V.get_device_name(devs[i]), hca))
            d = devs[i];
    ib->ctx = V.open_device(d);
    V.free_device_list(devs);
    if (!ib->ctx || !(ib->pd = V.alloc_pd(ib->ctx)) ||
        !(ib->cq = V.create_cq(ib->ctx, 2048, NULL, NULL, 0)) || !(ib->land = calloc(1, LAND)) ||
        !(ib->src = calloc(1, LAND)))
        return -1;
    ib->land_mr =
        V.reg_mr(ib->pd, ib->land, LAND, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ib->src_mr = V.reg_mr(ib->pd, ib->src, LAND, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_port_attr pa;
    if (!ib->land_mr || !ib->src_mr || V.query_port(ib->ctx, 1, &pa) ||
        V.query_gid(ib->ctx, 1, 0, gid))
        return -1;
    *lid = pa.lid;
    struct ibv_qp_init_attr ia = {
        .send_cq = ib->cq,
        .recv_cq = ib->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 256, .max_recv_wr = RECVS, .max_send_sge = 1, .max_recv_sge = 1}};
    for (int p = 0; p < c->nranks; p++) {
        if (c->s->node[p] == c->s->node[c->rank])
            continue;
        if (!(ib->tx[p] = V.create_qp(ib->pd, &ia)) || !(ib->rx[p] = V.create_qp(ib->pd, &ia)))
            return -1;
    }
    return 0;
}

static int connect_qp(struct ibv_qp *qp, const struct ib_end *to)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = 1,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
    if (V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = to->qpn;
    a.ah_attr.dlid = to->lid;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = to->gid;
    a.ah_attr.port_num = 1;
    if (V.modify_qp(qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -1;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    return V.modify_qp(qp, &a,
                       IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                           IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* The ring's cross-node edges: one channel per local GPU; on channel k the ring runs through a
 * node's GPUs k, k+1, ... and leaves it from the one before k, so rank (node n, local l) sends to
 * (next node, local l+1) and receives from (previous node, local l-1). */
static void ring_edges(ncclComm_t c)
{
    struct ib_comm *ib = &c->ib;
    int R = c->nranks, me = c->rank, nodes[MAXR], nn = 0, per[MAXR] = {0};
    int my_node = c->s->node[me], li = 0;
    ib->send_to = ib->recv_from = -1;
    for (int r = 0; r < R; r++) {
        int k = 0;
        while (k < nn && nodes[k] != c->s->node[r])
            k++;
        if (k == nn)
            nodes[nn++] = c->s->node[r];
        per[k]++;
        if (r < me && c->s->node[r] == my_node)
            li++;
    }
    for (int k = 1; k < nn; k++)
        if (per[k] != per[0])
            return; /* uneven nodes: not modelled */
    if (nn < 2)
        return;
    ib->channels = per[0];
    int k = 0;
    while (nodes[k] != my_node)
        k++;
    int next = nodes[(k + 1) % nn], prev = nodes[(k + nn - 1) % nn];
    int want_next = (li + 1) % per[0], want_prev = (li + per[0] - 1) % per[0];
    for (int r = 0, ln = 0, lp = 0; r < R; r++) {
        if (c->s->node[r] == next && ln++ == want_next)
            ib->send_to = r;
        if (c->s->node[r] == prev && lp++ == want_prev)
            ib->recv_from = r;
    }
}

void sim_ib_setup(ncclComm_t c)
{
    struct ib_comm *ib = &c->ib;
    pthread_mutex_init(&ib->lock, NULL);
    if (c->nodes < 2)
        return;
    uint16_t lid = 0;
    union ibv_gid gid;
    memset(&gid, 0, sizeof(gid));
    int ok = open_local(c, &lid, &gid) == 0;
    for (int p = 0; ok && p < c->nranks; p++)
        if (ib->tx[p]) {
            c->s->ib[c->rank][p].tx = (struct ib_end){ib->tx[p]->qp_num, 0, lid, 0, 0, gid};
            c->s->ib[p][c->rank].rx = (struct ib_end){
                ib->rx[p]->qp_num, ib->land_mr->rkey, lid, 0, (uintptr_t)ib->land, gid};
        }
    c->s->ib_ok[c->rank] = ok;
    sim_barrier(c);
    int all = 1;
    for (int r = 0; r < c->nranks; r++)
        all &= c->s->ib_ok[r];
    for (int p = 0; all && ok && p < c->nranks; p++)
        if (ib->tx[p]) {
            ok = connect_qp(ib->tx[p], &c->s->ib[c->rank][p].rx) == 0 &&
                 connect_qp(ib->rx[p], &c->s->ib[p][c->rank].tx) == 0;
            for (int i = 0; ok && i < RECVS; i++)
                ok = post_recv(ib->rx[p], ib) == 0;
        }
    c->s->ib_ok[c->rank] = ok && all;
    sim_barrier(c); /* everyone connected (or not) before anyone sends */
    ib->on = 1;
    for (int r = 0; r < c->nranks; r++)
        ib->on &= c->s->ib_ok[r];
    sim_barrier(c); /* nobody rewrites ib_ok (a split) before all have read it */
    if (ib->on)
        ring_edges(c);
    if (!ib->on && getenv("NCCL_DEBUG"))
        fprintf(stderr, "NCCL WARN (simulated) no usable IB transport; nodes use shared memory\n");
}

void sim_ib_teardown(ncclComm_t c)
{
    struct ib_comm *ib = &c->ib;
    for (int p = 0; p < MAXR; p++) {
        if (ib->tx[p])
            V.destroy_qp(ib->tx[p]);
        if (ib->rx[p])
            V.destroy_qp(ib->rx[p]);
    }
    if (ib->land_mr)
        V.dereg_mr(ib->land_mr);
    if (ib->src_mr)
        V.dereg_mr(ib->src_mr);
    if (ib->cq)
        V.destroy_cq(ib->cq);
    if (ib->pd)
        V.dealloc_pd(ib->pd);
    if (ib->ctx)
        V.close_device(ib->ctx);
    free(ib->land);
    free(ib->src);
    pthread_mutex_destroy(&ib->lock);
    memset(ib, 0, sizeof(*ib));
}

/* Drain the CQ: count arrivals per peer (reposting their receives) and local send completions.
 * Lock held.  -1 on a failed completion. */
static int poll_some(ncclComm_t c)
{
    struct ib_comm *ib = &c->ib;
    struct ibv_wc wc[16];
    int got = ibv_poll_cq(ib->cq, 16, wc);
    for (int i = 0; i < got; i++) {
        if (wc[i].status != IBV_WC_SUCCESS) {
            fprintf(stderr, "simulated NCCL: IB completion error %d on QP %u\n", (int)wc[i].status,
                    wc[i].qp_num);
            return -1;
        }
        if (wc[i].opcode & IBV_WC_RECV) {
            uint32_t src = ntohl(wc[i].imm_data);
            if (src < MAXR && ib->rx[src]) {
                ib->arrived[src]++;
                post_recv(ib->rx[src], ib);
            }
        } else {
            ib->sends_done++;
        }
    }
    return got < 0 ? -1 : 0;
}

ncclResult_t sim_ib_send(ncclComm_t c, int peer, uint64_t bytes)
{
    struct ib_comm *ib = &c->ib;
    if (peer < 0 || peer >= MAXR || !ib->tx[peer])
        return ncclInternalError;
    const struct ib_end *to = &c->s->ib[c->rank][peer].rx;
    pthread_mutex_lock(&ib->lock);
    int rc = 0;
    do { /* at least one request: a 0-byte message still notifies */
        uint32_t n = bytes > LAND ? LAND : (uint32_t)bytes;
        bytes -= n;
        struct ibv_sge sg = {(uintptr_t)ib->src, n, ib->src_mr->lkey};
        struct ibv_send_wr w = {.sg_list = &sg,
                                .num_sge = 1,
                                .opcode = bytes ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM,
                                .send_flags = bytes ? 0 : IBV_SEND_SIGNALED},
                           *bad;
        w.imm_data = htonl((uint32_t)c->rank);
        w.wr.rdma.remote_addr = to->addr;
        w.wr.rdma.rkey = to->rkey;
        rc = ibv_post_send(ib->tx[peer], &w, &bad);
    } while (!rc && bytes);
    uint64_t want = ++ib->sends_waited;
    while (!rc && ib->sends_done < want) {
        rc = atomic_load(&c->aborted) ? -1 : poll_some(c);
        if (!rc && ib->sends_done < want) {
            pthread_mutex_unlock(&ib->lock);
            usleep(20);
            pthread_mutex_lock(&ib->lock);
        }
    }
    pthread_mutex_unlock(&ib->lock);
    return rc ? ncclRemoteError : ncclSuccess;
}

ncclResult_t sim_ib_wait(ncclComm_t c, int peer)
{
    struct ib_comm *ib = &c->ib;
    if (peer < 0 || peer >= MAXR || !ib->rx[peer])
        return ncclInternalError;
    pthread_mutex_lock(&ib->lock);
    int rc = 0;
    while (!rc && ib->arrived[peer] <= ib->consumed[peer]) {
        rc = atomic_load(&c->aborted) ? -1 : poll_some(c);
        if (!rc && ib->arrived[peer] <= ib->consumed[peer]) {
            pthread_mutex_unlock(&ib->lock);
            usleep(20);
            pthread_mutex_lock(&ib->lock);
        }
    }
    if (!rc)
        ib->consumed[peer]++;
    pthread_mutex_unlock(&ib->lock);
    return rc ? ncclRemoteError : ncclSuccess;
}
