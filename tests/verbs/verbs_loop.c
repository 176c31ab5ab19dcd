/* A verbs workload with known ground truth: two RC QPs of one device connected to each other
 * (loopback through the NIC), QP A sending to QP B: SENDs (some inline) into receives B posted,
 * RDMA WRITEs and RDMA READs.  Built twice: linked to libibverbs, and with -DICX_DLOPEN, where
 * every libibverbs function comes from dlopen + dlvsym with the versions NCCL asks for.
 *
 *   verbs_loop DEVICE GID_INDEX post|wr ITERS SIZE TRUTH_FILE
 *
 * `post` uses ibv_post_send; `wr` the extended API (ibv_wr_start ... ibv_wr_complete, plus one
 * aborted batch that must not be counted).  TRUTH_FILE gets one line per QP, kind and opcode:
 * "qp <qpn> <kind> <opcode> <count> <bytes>" (kinds as in trace_format.h), then facts about the
 * symbol lookups in the dlopen build ("lookup ..."). */
#include <dlfcn.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#undef ibv_reg_mr
#ifdef ICX_DLOPEN
#define FN(ret, name, params) static ret(*p_##name) params
#else
#define FN(ret, name, params) static ret(*p_##name) params = name
#endif
FN(struct ibv_device **, ibv_get_device_list, (int *));
FN(struct ibv_context *, ibv_open_device, (struct ibv_device *));
FN(struct ibv_pd *, ibv_alloc_pd, (struct ibv_context *));
FN(struct ibv_mr *, ibv_reg_mr, (struct ibv_pd *, void *, size_t, int));
FN(struct ibv_cq *, ibv_create_cq,
   (struct ibv_context *, int, void *, struct ibv_comp_channel *, int));
FN(struct ibv_qp *, ibv_create_qp, (struct ibv_pd *, struct ibv_qp_init_attr *));
FN(int, ibv_modify_qp, (struct ibv_qp *, struct ibv_qp_attr *, int));
FN(int, ibv_query_gid, (struct ibv_context *, uint8_t, int, union ibv_gid *));
FN(struct ibv_qp_ex *, ibv_qp_to_qp_ex, (struct ibv_qp *));
FN(int, ibv_destroy_qp, (struct ibv_qp *));

static void die(const char *what)
{
    perror(what);
    exit(1);
}

#ifdef ICX_DLOPEN
static FILE *truth;
/* Look up the way NCCL does; record where each answer came from. */
static void *lookup(void *h, const char *name, const char *ver)
{
    void *p = dlvsym(h, name, ver);
    if (!p) {
        fprintf(stderr, "dlvsym(%s, %s): %s\n", name, ver, dlerror());
        exit(1);
    }
    Dl_info di;
    fprintf(truth, "lookup %s %s %s\n", name, ver,
            dladdr(p, &di) && strstr(di.dli_fname, "libicxtrace") ? "wrapper" : "real");
    return p;
}
static void load(void)
{
    void *h = dlopen("libibverbs.so.1", RTLD_NOW);
    if (!h)
        die("dlopen libibverbs.so.1");
#define L(name, ver) *(void **)&p_##name = lookup(h, #name, ver)
    L(ibv_get_device_list, "IBVERBS_1.1");
    L(ibv_open_device, "IBVERBS_1.1");
    L(ibv_alloc_pd, "IBVERBS_1.1");
    L(ibv_reg_mr, "IBVERBS_1.1");
    L(ibv_create_cq, "IBVERBS_1.1");
    L(ibv_create_qp, "IBVERBS_1.1");
    L(ibv_modify_qp, "IBVERBS_1.1");
    L(ibv_query_gid, "IBVERBS_1.1");
    L(ibv_qp_to_qp_ex, "IBVERBS_1.6");
    L(ibv_destroy_qp, "IBVERBS_1.1");
#undef L
    /* Another ABI of a wrapped name, an unwrapped name, a missing one, and plain dlsym. */
    void *old = dlvsym(h, "ibv_open_device", "IBVERBS_1.0");
    Dl_info di;
    fprintf(truth, "lookup ibv_open_device IBVERBS_1.0 %s\n",
            !old                                                      ? "missing"
            : dladdr(old, &di) && strstr(di.dli_fname, "libicxtrace") ? "wrapper"
                                                                      : "real");
    fprintf(truth, "lookup ibv_open_device default %s\n",
            dladdr(dlsym(h, "ibv_open_device"), &di) && strstr(di.dli_fname, "libicxtrace")
                ? "wrapper"
                : "real");
    fprintf(truth, "lookup no_such_symbol default %s\n",
            dlsym(h, "ibv_no_such_symbol") == NULL && dlerror() != NULL ? "missing" : "found");
}
#endif

static struct ibv_context *ctx;
static struct ibv_cq *cq;
static struct ibv_mr *mr;
static char *buf;
static int gid_index;

static void connect_qp(struct ibv_qp *qp, uint32_t remote, const union ibv_gid *gid)
{
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                            .port_num = 1,
                            .pkey_index = 0,
                            .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                               IBV_ACCESS_LOCAL_WRITE};
    if (p_ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        die("modify INIT");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = remote;
    a.rq_psn = 1;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = *gid;
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
    a.ah_attr.grh.hop_limit = 1;
    a.ah_attr.port_num = 1;
    if (p_ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                            IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        die("modify RTR");
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 1;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    if (p_ibv_modify_qp(qp, &a,
                        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                            IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
        die("modify RTS");
}

/* Wait for n completions; each must succeed. */
static void reap(int n)
{
    struct ibv_wc wc[16];
    while (n > 0) {
        int got = ibv_poll_cq(cq, 16, wc);
        if (got < 0)
            die("poll_cq");
        for (int i = 0; i < got; i++)
            if (wc[i].status != IBV_WC_SUCCESS) {
                fprintf(stderr, "completion error: status %d\n", (int)wc[i].status);
                exit(1);
            }
        n -= got;
    }
}

#define BATCH 16

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: %s DEVICE GID_INDEX post|wr ITERS SIZE TRUTH_FILE\n", argv[0]);
        return 2;
    }
    const char *devname = argv[1];
    gid_index = atoi(argv[2]);
    int wr_api = strcmp(argv[3], "wr") == 0;
    int iters = atoi(argv[4]);
    uint32_t size = (uint32_t)atoi(argv[5]);
    FILE *out = fopen(argv[6], "w");
    if (!out)
        die("truth file");
#ifdef ICX_DLOPEN
    truth = out;
    load();
#endif
    int n = 0;
    struct ibv_device **devs = p_ibv_get_device_list(&n);
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++)
        if (strcmp(devs[i]->name, devname) == 0)
            dev = devs[i];
    if (!dev) {
        fprintf(stderr, "no device %s\n", devname);
        return 1;
    }
    ctx = p_ibv_open_device(dev);
    struct ibv_pd *pd = ctx ? p_ibv_alloc_pd(ctx) : NULL;
    if (!pd)
        die("open/alloc_pd");
    buf = calloc(4, size);
    mr = p_ibv_reg_mr(pd, buf, 4 * (size_t)size,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    cq = p_ibv_create_cq(ctx, 1024, NULL, NULL, 0);
    if (!mr || !cq)
        die("reg_mr/create_cq");
    struct ibv_qp_init_attr_ex ia = {.send_cq = cq,
                                     .recv_cq = cq,
                                     .qp_type = IBV_QPT_RC,
                                     .cap = {.max_send_wr = 256,
                                             .max_recv_wr = 256,
                                             .max_send_sge = 2,
                                             .max_recv_sge = 1,
                                             .max_inline_data = 64},
                                     .comp_mask = IBV_QP_INIT_ATTR_PD,
                                     .pd = pd};
    struct ibv_qp *b = p_ibv_create_qp(pd, (struct ibv_qp_init_attr *)&ia);
    struct ibv_qp *a;
    if (wr_api) {
        ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        ia.send_ops_flags =
            IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
        a = ibv_create_qp_ex(ctx, &ia); /* inline: through the context */
    } else {
        a = p_ibv_create_qp(pd, (struct ibv_qp_init_attr *)&ia);
    }
    if (!a || !b)
        die("create_qp");
    union ibv_gid gid;
    if (p_ibv_query_gid(ctx, 1, gid_index, &gid))
        die("query_gid");
    connect_qp(a, b->qp_num, &gid);
    connect_qp(b, a->qp_num, &gid);

    char *src = buf, *dst = buf + size, *rbuf = buf + 2 * (size_t)size;
    uint64_t recv_bytes = 0;
    int nrecv = 0;
    /* receives for every SEND */
    for (int i = 0; i < iters; i++) {
        struct ibv_sge sg = {(uintptr_t)rbuf, size, mr->lkey};
        struct ibv_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &sg, .num_sge = 1}, *bad;
        if (ibv_post_recv(b, &rw, &bad))
            die("post_recv");
        recv_bytes += size;
        nrecv++;
    }
    struct ibv_qp_ex *qx = wr_api ? p_ibv_qp_to_qp_ex(a) : NULL;
    if (wr_api && !qx)
        die("qp_to_qp_ex");
    static const int ops[3] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ};
    uint64_t bytes[3] = {0};
    int count[3] = {0};
    uint32_t inline_size = 32;
    for (int o = 0; o < 3; o++) {
        for (int done = 0; done < iters;) {
            int k = iters - done < BATCH ? iters - done : BATCH;
            /* the last SEND of each batch inline (post API), to count inline bytes too */
            if (wr_api) {
                ibv_wr_start(qx);
                for (int j = 0; j < k; j++) {
                    qx->wr_id = (uint64_t)(done + j);
                    qx->wr_flags = j == k - 1 ? IBV_SEND_SIGNALED : 0;
                    if (ops[o] == IBV_WR_SEND)
                        ibv_wr_send(qx);
                    else if (ops[o] == IBV_WR_RDMA_WRITE)
                        ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)dst);
                    else
                        ibv_wr_rdma_read(qx, mr->rkey, (uintptr_t)dst);
                    ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)src, size);
                    bytes[o] += size;
                }
                if (ibv_wr_complete(qx))
                    die("wr_complete");
            } else {
                struct ibv_send_wr w[BATCH], *bad;
                struct ibv_sge sg[BATCH];
                for (int j = 0; j < k; j++) {
                    int inl = ops[o] == IBV_WR_SEND && j == k - 1;
                    sg[j] = (struct ibv_sge){(uintptr_t)src, inl ? inline_size : size, mr->lkey};
                    w[j] = (struct ibv_send_wr){.wr_id = (uint64_t)(done + j),
                                                .sg_list = &sg[j],
                                                .num_sge = 1,
                                                .opcode = ops[o],
                                                .send_flags = j == k - 1 ? IBV_SEND_SIGNALED : 0,
                                                .next = j + 1 < k ? &w[j + 1] : NULL};
                    if (inl)
                        w[j].send_flags |= IBV_SEND_INLINE;
                    w[j].wr.rdma.remote_addr = (uintptr_t)dst;
                    w[j].wr.rdma.rkey = mr->rkey;
                    bytes[o] += sg[j].length;
                    if (inl)
                        recv_bytes -= size - inline_size;
                }
                if (ibv_post_send(a, w, &bad))
                    die("post_send");
            }
            count[o] += k;
            done += k;
            reap(1 + (ops[o] == IBV_WR_SEND ? k : 0)); /* the signaled send + B's receives */
        }
    }
    if (wr_api) { /* an aborted batch: built, never posted, must not be counted */
        ibv_wr_start(qx);
        for (int j = 0; j < 3; j++) {
            ibv_wr_rdma_write(qx, mr->rkey, (uintptr_t)dst);
            ibv_wr_set_sge(qx, mr->lkey, (uintptr_t)src, size);
        }
        ibv_wr_abort(qx);
    }
    for (int o = 0; o < 3; o++)
        fprintf(out, "qp %u 1 %d %d %llu\n", a->qp_num, ops[o], count[o],
                (unsigned long long)bytes[o]);
    fprintf(out, "qp %u 2 255 %d %llu\n", b->qp_num, nrecv, (unsigned long long)iters * size);
    fprintf(out, "qp %u 4 %d %d %llu\n", b->qp_num, IBV_WC_RECV, count[0],
            (unsigned long long)recv_bytes);
    p_ibv_destroy_qp(a);
    p_ibv_destroy_qp(b);
    fclose(out);
    printf("verbs_loop: %d iterations of %u bytes, %s API: ok\n", iters, size,
           wr_api ? "wr" : "post");
    return 0;
}
