/* Simulated libibverbs.so.1 (test substrate; the tracer never includes it).  Compiled against the
 * real <infiniband/verbs.h> and exporting IBVERBS_1.x-versioned symbols, it presents the RDMA NICs
 * of a simulated node (the `nic` lines of $ICXSIM_TOPOLOGY) and moves data between processes the
 * way the NICs would:
 *
 *  - a "fabric" file ($ICXSIM_FABRIC, shared by every rank of a simulated job) holds the QPs
 *    (number, node, NIC, GID, state, remote QP, posted receives) and the CQs, under one
 *    process-shared robust mutex;
 *  - RDMA WRITE and READ copy between the two processes' registered buffers with
 *    process_vm_writev / process_vm_readv; SEND takes a receive the peer posted, copies into it and
 *    puts a receive completion in the peer's CQ; signaled requests complete in the sender's CQ;
 *  - the data plane goes through the context's ops (ibv_post_send and friends are inline in
 *    verbs.h), exactly where real providers put it.
 *
 * Node identity: $ICXSIM_NODE (the launcher's node index) makes GIDs, GUIDs and LIDs unique per
 * simulated node.  Fault injection: $ICXSIM_SLOW_NICS (comma-separated names) reports those ports
 * at 1x width instead of 4x.  With $ICXSIM_SYSFS (the node's fake sysfs root), every transfer
 * also advances the NICs' port data counters there (port_xmit_data / port_rcv_data, 4-byte
 * words, payload only), on both ends, as the hardware counters would. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "topo_file.h"

#define SIM_EXPORT __attribute__((visibility("default")))
#define F_QPS 1024
#define F_CQS 256
#define F_RQ 512
#define F_CQE 2048
#define F_QPN_BASE 0x100
#define F_MAGIC 0x5349425245564331ull

struct f_recv {
    uint64_t wr_id, addr;
    uint32_t len, pad;
};
struct f_qp {
    int used;
    pid_t pid;
    char sysfs[256]; /* the owner's node sysfs root ("" none) */
    uint32_t node, nic, state, dest_qpn, send_cq, recv_cq, sig_all;
    uint64_t rq_head, rq_tail;
    struct f_recv rq[F_RQ];
};
struct f_cq {
    int used;
    uint64_t head, tail;
    struct ibv_wc e[F_CQE];
};
struct fabric {
    uint64_t magic;
    pthread_mutex_t lock;
    struct f_qp qp[F_QPS];
    struct f_cq cq[F_CQS];
};

struct sim_dev {
    struct ibv_device dev;
    int nic;
};
struct sim_ctx {
    struct verbs_context vctx; /* ends with the struct ibv_context handed out */
    int nic;
};
struct sim_cq {
    struct ibv_cq cq;
    int id;
};
struct sim_qp {
    struct ibv_qp qp;
    int id;
};

static struct sim_topo topo;
static struct sim_dev devs[SIM_MAX_NICS];
static struct fabric *fab;
static int node;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void sim_init(void)
{
    sim_topo_load(&topo);
    const char *n = getenv("ICXSIM_NODE");
    node = n ? atoi(n) : 0;
    for (int i = 0; i < topo.nnics; i++) {
        devs[i].nic = i;
        devs[i].dev.node_type = IBV_NODE_CA;
        devs[i].dev.transport_type = IBV_TRANSPORT_IB;
        snprintf(devs[i].dev.name, sizeof(devs[i].dev.name), "%s", topo.nic[i].name);
        snprintf(devs[i].dev.dev_name, sizeof(devs[i].dev.dev_name), "uverbs%d", i);
    }
    const char *path = getenv("ICXSIM_FABRIC");
    char def[256];
    if (!path) {
        snprintf(def, sizeof(def), "/dev/shm/icxsim-fabric-%u", (unsigned)getuid());
        path = def;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) != 0) {
        fprintf(stderr, "icxsim verbs: cannot open fabric %s: %s\n", path, strerror(errno));
        return;
    }
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < (off_t)sizeof(struct fabric) && ftruncate(fd, sizeof(struct fabric)) != 0) {
        flock(fd, LOCK_UN);
        close(fd);
        return;
    }
    void *m = mmap(NULL, sizeof(struct fabric), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
        fab = m;
        if (fab->magic != F_MAGIC) {
            pthread_mutexattr_t a;
            pthread_mutexattr_init(&a);
            pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
            pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
            pthread_mutex_init(&fab->lock, &a);
            fab->magic = F_MAGIC;
        }
    }
    flock(fd, LOCK_UN);
    close(fd);
}

static void lock(void)
{
    if (pthread_mutex_lock(&fab->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&fab->lock);
}
static void unlock(void)
{
    pthread_mutex_unlock(&fab->lock);
}

static uint64_t guid_of(int nic)
{
    return 0x0c42a10300000000ull | (uint64_t)(node & 0xffff) << 8 | (uint64_t)(nic & 0xff);
}
static uint16_t lid_of(int n, int nic)
{
    return (uint16_t)(n * 32 + nic + 1);
}
static int slow_nic(int nic)
{
    const char *s = getenv("ICXSIM_SLOW_NICS");
    size_t l = strlen(topo.nic[nic].name);
    for (const char *p = s; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, topo.nic[nic].name, l) && (p[l] == ',' || p[l] == 0))
            return 1;
    return 0;
}

/* Add bytes to a NIC's port counter in a node's fake sysfs; fabric locked (one writer). */
static void counter_add(const char *root, int nic, const char *name, uint64_t bytes)
{
    if (!root[0] || nic < 0 || nic >= topo.nnics || !bytes)
        return;
    char path[512], tmp[520], buf[64] = "0";
    snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/ports/1/counters/%s", root,
             topo.nic[nic].name, name);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(buf, sizeof(buf), f))
            buf[0] = 0;
        fclose(f);
    }
    unsigned long long words = strtoull(buf, NULL, 10) + (bytes + 3) / 4;
    snprintf(tmp, sizeof(tmp), "%s.%d", path, (int)getpid());
    f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%llu\n", words);
    fclose(f);
    rename(tmp, path); /* readers see the old or the new value, never half */
}

/* ---- CQs in the fabric ---- */

static void cq_push(uint32_t id, const struct ibv_wc *wc)
{
    struct f_cq *c = &fab->cq[id];
    if (c->tail - c->head < F_CQE)
        c->e[c->tail++ % F_CQE] = *wc;
}

static int sim_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
    struct f_cq *c = &fab->cq[((struct sim_cq *)cq)->id];
    int got = 0;
    lock();
    while (got < n && c->head < c->tail)
        wc[got++] = c->e[c->head++ % F_CQE];
    unlock();
    return got;
}

/* ---- data plane ---- */

static void complete(struct f_qp *q, uint32_t qpn, uint64_t wr_id, enum ibv_wc_opcode op,
                     enum ibv_wc_status st, int signaled)
{
    if (!signaled && st == IBV_WC_SUCCESS)
        return;
    struct ibv_wc wc = {.wr_id = wr_id, .status = st, .opcode = op, .qp_num = qpn};
    cq_push(q->send_cq, &wc);
}

/* One send-queue request, fabric locked.  Returns the completion status. */
static enum ibv_wc_status do_send(struct f_qp *q, uint32_t qpn, const struct ibv_send_wr *w)
{
    if (q->state != IBV_QPS_RTS || q->dest_qpn < F_QPN_BASE || q->dest_qpn >= F_QPN_BASE + F_QPS)
        return IBV_WC_LOC_QP_OP_ERR;
    struct f_qp *p = &fab->qp[q->dest_qpn - F_QPN_BASE];
    if (!p->used)
        return IBV_WC_RETRY_EXC_ERR;
    struct iovec local[16];
    int n = w->num_sge < 16 ? w->num_sge : 16;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        local[i] = (struct iovec){(void *)(uintptr_t)w->sg_list[i].addr, w->sg_list[i].length};
        total += w->sg_list[i].length;
    }
    ssize_t moved;
    if (w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
        struct iovec remote = {(void *)(uintptr_t)w->wr.rdma.remote_addr, total};
        moved = total ? process_vm_writev(p->pid, local, (unsigned long)n, &remote, 1, 0) : 0;
        if (moved != (ssize_t)total)
            return IBV_WC_REM_ACCESS_ERR;
        counter_add(q->sysfs, (int)q->nic, "port_xmit_data", total);
        counter_add(p->sysfs, (int)p->nic, "port_rcv_data", total);
        if (w->opcode == IBV_WR_RDMA_WRITE)
            return IBV_WC_SUCCESS;
    } else if (w->opcode == IBV_WR_RDMA_READ) {
        struct iovec remote = {(void *)(uintptr_t)w->wr.rdma.remote_addr, total};
        moved = total ? process_vm_readv(p->pid, local, (unsigned long)n, &remote, 1, 0) : 0;
        if (moved != (ssize_t)total)
            return IBV_WC_REM_ACCESS_ERR;
        counter_add(p->sysfs, (int)p->nic, "port_xmit_data", total);
        counter_add(q->sysfs, (int)q->nic, "port_rcv_data", total);
        return IBV_WC_SUCCESS;
    } else if (w->opcode != IBV_WR_SEND && w->opcode != IBV_WR_SEND_WITH_IMM) {
        return IBV_WC_REM_INV_REQ_ERR;
    }
    /* Consumes a posted receive of the peer: wait for one as a NIC retries on RNR. */
    for (int tries = 0; p->rq_head == p->rq_tail; tries++) {
        if (tries > 200000)
            return IBV_WC_RNR_RETRY_EXC_ERR;
        unlock();
        usleep(50);
        lock();
        if (!p->used)
            return IBV_WC_RETRY_EXC_ERR;
    }
    struct f_recv r = p->rq[p->rq_head++ % F_RQ];
    uint32_t len = 0;
    if (w->opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
        if (total > r.len)
            return IBV_WC_REM_INV_REQ_ERR;
        struct iovec remote = {(void *)(uintptr_t)r.addr, total};
        moved = total ? process_vm_writev(p->pid, local, (unsigned long)n, &remote, 1, 0) : 0;
        if (moved != (ssize_t)total)
            return IBV_WC_REM_ACCESS_ERR;
        len = (uint32_t)total;
        counter_add(q->sysfs, (int)q->nic, "port_xmit_data", total);
        counter_add(p->sysfs, (int)p->nic, "port_rcv_data", total);
    }
    struct ibv_wc wc = {
        .wr_id = r.wr_id,
        .status = IBV_WC_SUCCESS,
        .opcode = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV,
        .byte_len = len,
        .qp_num = q->dest_qpn,
        .src_qp = qpn,
        .imm_data = w->imm_data,
        .wc_flags = w->opcode == IBV_WR_SEND ? 0 : IBV_WC_WITH_IMM};
    cq_push(p->recv_cq, &wc);
    return IBV_WC_SUCCESS;
}

static int sim_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
    struct f_qp *q = &fab->qp[((struct sim_qp *)qp)->id];
    lock();
    for (; wr; wr = wr->next) {
        if (wr->num_sge > 16) {
            unlock();
            *bad = wr;
            return EINVAL;
        }
        enum ibv_wc_status st = do_send(q, qp->qp_num, wr);
        enum ibv_wc_opcode op = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                                : wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM
                                    ? IBV_WC_SEND
                                    : IBV_WC_RDMA_WRITE;
        complete(q, qp->qp_num, wr->wr_id, op, st,
                 q->sig_all || (wr->send_flags & IBV_SEND_SIGNALED));
        if (st != IBV_WC_SUCCESS)
            q->state = IBV_QPS_ERR;
    }
    unlock();
    return 0;
}

static int sim_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
    struct f_qp *q = &fab->qp[((struct sim_qp *)qp)->id];
    lock();
    for (; wr; wr = wr->next) {
        if (q->rq_tail - q->rq_head >= F_RQ || wr->num_sge != 1) {
            unlock();
            *bad = wr;
            return ENOMEM;
        }
        q->rq[q->rq_tail++ % F_RQ] =
            (struct f_recv){wr->wr_id, wr->sg_list[0].addr, wr->sg_list[0].length, 0};
    }
    unlock();
    return 0;
}

/* ---- ports ---- */

static void port_attr(int nic, struct ibv_port_attr *a)
{
    memset(a, 0, sizeof(*a));
    a->state = IBV_PORT_ACTIVE;
    a->max_mtu = a->active_mtu = IBV_MTU_4096;
    a->gid_tbl_len = 1;
    a->lid = topo.nic[nic].ethernet ? 0 : lid_of(node, nic);
    a->link_layer = topo.nic[nic].ethernet ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
    /* 4x at the lane rate that makes the topology's rate; 1x when injected slow */
    double lane = topo.nic[nic].rate_gbps / 4;
    a->active_speed = lane >= 100 ? 128 : lane >= 50 ? 64 : lane >= 25 ? 32 : 4;
    a->active_width = slow_nic(nic) ? 1 : 2;
    a->phys_state = 5;
}

static int sim_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *a,
                          size_t len)
{
    (void)len;
    if (port != 1)
        return EINVAL;
    port_attr(((struct sim_ctx *)((char *)ctx - offsetof(struct sim_ctx, vctx.context)))->nic, a);
    return 0;
}

static int ctx_nic(struct ibv_context *ctx)
{
    return ((struct sim_ctx *)((char *)ctx - offsetof(struct sim_ctx, vctx.context)))->nic;
}

/* ---- exported API ---- */

SIM_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
    pthread_once(&once, sim_init);
    struct ibv_device **l = calloc((size_t)topo.nnics + 1, sizeof(*l));
    for (int i = 0; l && i < topo.nnics; i++)
        l[i] = &devs[i].dev;
    if (num)
        *num = l ? topo.nnics : 0;
    return l;
}

SIM_EXPORT void ibv_free_device_list(struct ibv_device **l)
{
    free(l);
}

SIM_EXPORT const char *ibv_get_device_name(struct ibv_device *d)
{
    return d->name;
}

SIM_EXPORT __be64 ibv_get_device_guid(struct ibv_device *d)
{
    return htobe64(guid_of(((struct sim_dev *)d)->nic));
}

SIM_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *d)
{
    pthread_once(&once, sim_init);
    if (!fab) {
        errno = ENODEV;
        return NULL;
    }
    struct sim_ctx *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->nic = ((struct sim_dev *)d)->nic;
    c->vctx.sz = sizeof(struct verbs_context);
    c->vctx.query_port = sim_query_port;
    struct ibv_context *ctx = &c->vctx.context;
    ctx->device = d;
    ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx->cmd_fd = ctx->async_fd = -1;
    ctx->ops.post_send = sim_post_send;
    ctx->ops.post_recv = sim_post_recv;
    ctx->ops.poll_cq = sim_poll_cq;
    pthread_mutex_init(&ctx->mutex, NULL);
    return ctx;
}

SIM_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
    free((char *)ctx - offsetof(struct sim_ctx, vctx.context));
    return 0;
}

SIM_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->fw_ver, sizeof(a->fw_ver), "simulated");
    a->node_guid = htobe64(guid_of(ctx_nic(ctx)));
    a->phys_port_cnt = 1;
    a->max_qp = F_QPS;
    a->max_qp_wr = F_RQ;
    a->max_sge = 16;
    a->max_cq = F_CQS;
    a->max_cqe = F_CQE;
    return 0;
}

/* The pre-1.1-layout entry point the inline ibv_query_port falls back to. */
SIM_EXPORT int(ibv_query_port)(struct ibv_context *ctx, uint8_t port,
                               struct _compat_ibv_port_attr *a)
{
    struct ibv_port_attr full;
    int rc = sim_query_port(ctx, port, &full, sizeof(full));
    if (rc == 0)
        /* The old layout is a prefix of the new one; never reached while query_port is set. */
        memcpy(a, &full, offsetof(struct ibv_port_attr, link_layer) + 1);
    return rc;
}

SIM_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
    if (port != 1 || index != 0)
        return EINVAL;
    memset(gid, 0, sizeof(*gid));
    gid->global.subnet_prefix = htobe64(0xfe80000000000000ull);
    gid->global.interface_id = htobe64(guid_of(ctx_nic(ctx)));
    return 0;
}

SIM_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
    struct ibv_pd *pd = calloc(1, sizeof(*pd));
    if (pd)
        pd->context = ctx;
    return pd;
}

SIM_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
    free(pd);
    return 0;
}

static uint32_t next_key = 0x1000;

SIM_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                           unsigned int access)
{
    (void)iova;
    (void)access;
    struct ibv_mr *mr = calloc(1, sizeof(*mr));
    if (!mr)
        return NULL;
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = len;
    mr->lkey = mr->rkey = __atomic_add_fetch(&next_key, 1, __ATOMIC_RELAXED);
    return mr;
}

#undef ibv_reg_mr
SIM_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    return ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr, (unsigned)access);
}

SIM_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
    free(mr);
    return 0;
}

SIM_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                        struct ibv_comp_channel *ch, int vec)
{
    (void)vec;
    struct sim_cq *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    lock();
    int id;
    for (id = 0; id < F_CQS && fab->cq[id].used; id++)
        ;
    if (id < F_CQS) {
        fab->cq[id].used = 1;
        fab->cq[id].head = fab->cq[id].tail = 0;
    }
    unlock();
    if (id == F_CQS) {
        free(c);
        errno = ENOMEM;
        return NULL;
    }
    c->id = id;
    c->cq.context = ctx;
    c->cq.cq_context = cq_context;
    c->cq.channel = ch;
    c->cq.cqe = cqe;
    return &c->cq;
}

SIM_EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
    lock();
    fab->cq[((struct sim_cq *)cq)->id].used = 0;
    unlock();
    free(cq);
    return 0;
}

SIM_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    if (a->qp_type != IBV_QPT_RC || a->srq) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    struct sim_qp *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    lock();
    int id;
    for (id = 0; id < F_QPS && fab->qp[id].used; id++)
        ;
    if (id < F_QPS) {
        struct f_qp *q = &fab->qp[id];
        memset(q, 0, offsetof(struct f_qp, rq));
        q->used = 1;
        q->pid = getpid();
        q->node = (uint32_t)node;
        q->nic = (uint32_t)ctx_nic(pd->context);
        q->state = IBV_QPS_RESET;
        q->send_cq = (uint32_t)((struct sim_cq *)a->send_cq)->id;
        q->recv_cq = (uint32_t)((struct sim_cq *)a->recv_cq)->id;
        q->sig_all = (uint32_t)a->sq_sig_all;
        const char *root = getenv("ICXSIM_SYSFS");
        snprintf(q->sysfs, sizeof(q->sysfs), "%s", root ? root : "");
    }
    unlock();
    if (id == F_QPS) {
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    s->id = id;
    s->qp.context = pd->context;
    s->qp.qp_context = a->qp_context;
    s->qp.pd = pd;
    s->qp.send_cq = a->send_cq;
    s->qp.recv_cq = a->recv_cq;
    s->qp.qp_num = F_QPN_BASE + (uint32_t)id;
    s->qp.state = IBV_QPS_RESET;
    s->qp.qp_type = a->qp_type;
    return &s->qp;
}

SIM_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    struct f_qp *q = &fab->qp[((struct sim_qp *)qp)->id];
    lock();
    if (mask & IBV_QP_DEST_QPN)
        q->dest_qpn = attr->dest_qp_num;
    if (mask & IBV_QP_STATE)
        q->state = attr->qp_state;
    unlock();
    if (mask & IBV_QP_STATE)
        qp->state = attr->qp_state;
    return 0;
}

SIM_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
    lock();
    fab->qp[((struct sim_qp *)qp)->id].used = 0;
    unlock();
    free(qp);
    return 0;
}
