/* RDMA verbs, control plane: device contexts, QPs, memory regions, CQs.
 *
 * ibv_post_send, ibv_post_recv, ibv_post_srq_recv and ibv_poll_cq are static inline in
 * <infiniband/verbs.h>: they call through the context's `ops` table, so no symbol hook ever sees
 * them.  ibv_open_device is a real function: we wrap it and, in every context it returns, replace
 * those four entry points (and the extended create_qp_ex / create_cq_ex) with ours, keeping the
 * provider's in a slot of icx_vctx_tab.  Our definitions carry libibverbs' symbol versions
 * (wraps_verbs.def), so a caller bound to IBVERBS_1.0's ABI is not handed a 1.1 wrapper; lookups by
 * dlsym/dlvsym (NCCL) get the same wrappers through dl.c. */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_int.h"
#include "dlreal.h"
#include "frame.h"
#include "hook.h"
#include "module.h"
#include "placement.h"
#include "resolve.h"
#include "tbuf.h"
#include "verbs_ctx.h"
#include "verbs_data.h"
#include "verbs_qpx.h"

#define IBV ICX_LIB_IBVERBS

ICX_REAL_DECLV(IBV, "IBVERBS_1.1", struct ibv_context *, ibv_open_device, (struct ibv_device *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", int, ibv_close_device, (struct ibv_context *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", __be64, ibv_get_device_guid, (struct ibv_device *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", int, ibv_query_device,
               (struct ibv_context *, struct ibv_device_attr *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", int, ibv_query_gid,
               (struct ibv_context *, uint8_t, int, union ibv_gid *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", struct ibv_qp *, ibv_create_qp,
               (struct ibv_pd *, struct ibv_qp_init_attr *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", int, ibv_modify_qp,
               (struct ibv_qp *, struct ibv_qp_attr *, int));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", int, ibv_destroy_qp, (struct ibv_qp *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", struct ibv_mr *, ibv_reg_mr,
               (struct ibv_pd *, void *, size_t, int));
ICX_REAL_DECLV(IBV, "IBVERBS_1.8", struct ibv_mr *, ibv_reg_mr_iova2,
               (struct ibv_pd *, void *, size_t, uint64_t, unsigned int));
ICX_REAL_DECLV(IBV, "IBVERBS_1.12", struct ibv_mr *, ibv_reg_dmabuf_mr,
               (struct ibv_pd *, uint64_t, size_t, uint64_t, int, int));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", int, ibv_dereg_mr, (struct ibv_mr *));
ICX_REAL_DECLV(IBV, "IBVERBS_1.1", struct ibv_cq *, ibv_create_cq,
               (struct ibv_context *, int, void *, struct ibv_comp_channel *, int));
ICX_REAL_DECLV(IBV, "IBVERBS_1.6", struct ibv_qp_ex *, ibv_qp_to_qp_ex, (struct ibv_qp *));

/* ---- contexts ---- */

/* Data rate of an IB port per direction in Mb/s from ibv_port_attr's encodings (the marketed
 * rates: NDR 4x = 400 Gb/s); 0 unknown. */
static uint32_t icx_port_rate_mbps(uint8_t speed, uint8_t width)
{
    uint32_t lane;
    switch (speed) {
    case 1: lane = 2000; break;     /* SDR */
    case 2: lane = 4000; break;     /* DDR */
    case 4: lane = 8000; break;     /* QDR */
    case 8: lane = 10000; break;    /* FDR10 */
    case 16: lane = 13636; break;   /* FDR */
    case 32: lane = 25000; break;   /* EDR */
    case 64: lane = 50000; break;   /* HDR */
    case 128: lane = 100000; break; /* NDR */
    default: return 0;
    }
    unsigned lanes = width == 1    ? 1
                     : width == 2  ? 4
                     : width == 4  ? 8
                     : width == 8  ? 12
                     : width == 16 ? 2
                                   : 0;
    return lane * lanes;
}

static void icx_vctx_describe(struct icx_vctx *v, struct ibv_context *ctx)
{
    snprintf(v->name, sizeof(v->name), "%s", ctx->device ? ctx->device->name : "?");
    icx_real_ibv_get_device_guid_t guid = ICX_REAL(ibv_get_device_guid);
    if (guid && ctx->device)
        v->guid = be64toh(guid(ctx->device));
    icx_real_ibv_query_device_t qd = ICX_REAL(ibv_query_device);
    struct ibv_device_attr da;
    if (!qd || qd(ctx, &da) != 0)
        return;
    v->nports = da.phys_port_cnt;
    for (unsigned p = 1; p <= v->nports && p <= ICX_VPORT_MAX; p++) {
        struct ibv_port_attr pa;
        if (ibv_query_port(ctx, (uint8_t)p, &pa) != 0) /* inline: the provider's query_port */
            continue;
        struct icx_rec_verbs_port *r = &v->ports[p - 1];
        r->port = (uint8_t)p;
        r->state = (uint8_t)pa.state;
        r->link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET     ? ICX_LL_ETHERNET
                        : pa.link_layer == IBV_LINK_LAYER_INFINIBAND ? ICX_LL_INFINIBAND
                                                                     : ICX_LL_UNKNOWN;
        r->active_width = pa.active_width;
        r->active_speed = pa.active_speed;
        r->lid = pa.lid;
        r->rate_mbps = icx_port_rate_mbps(pa.active_speed, pa.active_width);
    }
}

/* ---- recording ---- */

static void *icx_vrec(enum icx_record_type type, enum icx_api api, uint32_t size, uint64_t t0,
                      struct icx_slot *slot)
{
    struct icx_rec_event *e = icx_reserve(size, slot);
    if (!e)
        return NULL;
    memset(e, 0, size);
    e->h.type = (uint16_t)type;
    e->h.size = (uint16_t)size;
    e->h.aux = api;
    e->ts = (int64_t)t0;
    e->dur = icx_ticks() - t0;
    return e;
}

static void icx_vrec_qp(enum icx_api api, uint64_t t0, struct ibv_context *ctx, uint32_t qp_num,
                        int qp_type, const struct ibv_qp_attr *attr, int mask, int result)
{
    struct icx_slot slot;
    struct icx_rec_verbs_qp *r = icx_vrec(ICX_REC_VERBS_QP, api, sizeof(*r), t0, &slot);
    if (!r)
        return;
    const struct icx_vctx *v = ctx ? icx_vctx_of(ctx) : NULL;
    r->qp_num = qp_num;
    r->ctx = icx_vctx_slot(v);
    r->qp_type = (uint8_t)qp_type;
    r->state = 0xff;
    r->result = result;
    r->attr_mask = (uint32_t)mask;
    if (attr) {
        if (mask & IBV_QP_STATE)
            r->state = (uint8_t)attr->qp_state;
        if (mask & IBV_QP_DEST_QPN)
            r->dest_qp_num = attr->dest_qp_num;
        if (mask & IBV_QP_PATH_MTU)
            r->path_mtu = (uint8_t)attr->path_mtu;
        if (mask & IBV_QP_PORT)
            r->port = attr->port_num;
        if (mask & IBV_QP_AV) {
            const struct ibv_ah_attr *ah = &attr->ah_attr;
            r->port = ah->port_num;
            r->dlid = ah->dlid;
            r->is_global = ah->is_global;
            if (ah->is_global) {
                r->sgid_index = ah->grh.sgid_index;
                memcpy(r->remote_gid, ah->grh.dgid.raw, 16);
                icx_real_ibv_query_gid_t qg = ICX_REAL(ibv_query_gid);
                union ibv_gid gid;
                if (qg && ctx && qg(ctx, ah->port_num, ah->grh.sgid_index, &gid) == 0)
                    memcpy(r->local_gid, gid.raw, 16);
            }
        }
        if (v && r->port >= 1 && r->port <= ICX_VPORT_MAX)
            r->slid = v->ports[r->port - 1].lid;
    }
    icx_commit(&slot);
}

static void icx_vrec_mr(enum icx_api api, uint64_t t0, struct ibv_pd *pd, const struct ibv_mr *mr,
                        uint64_t addr, uint64_t len, uint64_t iova, int access, int fd)
{
    struct icx_rec_host_numa hn = {.node = -1};
    /* Device memory (GPUDirect RDMA) has no host node; host pages are sampled where they are. */
    int gpu = addr ? icx_amap_lookup((uintptr_t)addr) : -2;
    if (gpu == -2 && fd < 0 && addr && api != ICX_API_ibv_dereg_mr)
        icx_placement_host_buffer(&hn, addr, len);
    struct icx_slot slot;
    struct icx_rec_verbs_mr *r = icx_vrec(ICX_REC_VERBS_MR, api, sizeof(*r), t0, &slot);
    if (!r)
        return;
    r->addr = addr;
    r->length = len;
    r->iova = iova;
    r->access = (uint32_t)access;
    r->ctx = icx_vctx_slot(pd ? icx_vctx_of(pd->context) : NULL);
    r->numa_node = (int16_t)hn.node;
    r->dmabuf_fd = fd;
    r->result = mr ? 0 : (errno ? errno : -1);
    if (mr) {
        r->lkey = mr->lkey;
        r->rkey = mr->rkey;
    }
    icx_commit(&slot);
}

static void icx_vrec_cq(enum icx_api api, uint64_t t0, struct ibv_context *ctx, int cqe, int ok)
{
    struct icx_slot slot;
    struct icx_rec_verbs_cq *r = icx_vrec(ICX_REC_VERBS_CQ, api, sizeof(*r), t0, &slot);
    if (!r)
        return;
    r->ctx = icx_vctx_slot(ctx ? icx_vctx_of(ctx) : NULL);
    r->cqe = cqe;
    r->result = ok ? 0 : (errno ? errno : -1);
    icx_commit(&slot);
}

/* ---- the extended creators, reached through the context (ibv_create_qp_ex is inline) ---- */

static struct ibv_qp *icx_vw_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a)
{
    const struct icx_vctx *v = icx_vctx_of(ctx);
    struct icx_call c;
    if (!v || !v->create_qp_ex) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return v->create_qp_ex(ctx, a);
    struct ibv_qp *qp = v->create_qp_ex(ctx, a);
    icx_call_returned(&c);
    icx_vrec_qp(ICX_API_ibv_create_qp_ex, c.t0, ctx, qp ? qp->qp_num : 0, a->qp_type, NULL, 0,
                qp              ? 0
                : c.saved_errno ? c.saved_errno
                                : -1);
    icx_call_end(&c);
    return qp;
}

static struct ibv_cq_ex *icx_vw_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a)
{
    const struct icx_vctx *v = icx_vctx_of(ctx);
    struct icx_call c;
    if (!v || !v->create_cq_ex) {
        errno = EOPNOTSUPP;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return v->create_cq_ex(ctx, a);
    struct ibv_cq_ex *cq = v->create_cq_ex(ctx, a);
    icx_call_returned(&c);
    icx_vrec_cq(ICX_API_ibv_create_cq_ex, c.t0, ctx, (int)a->cqe, cq != NULL);
    icx_call_end(&c);
    static _Atomic int noted;
    if (cq && !atomic_exchange(&noted, 1))
        icx_note(0, "ibv_create_cq_ex: completions read with ibv_start_poll/ibv_next_poll are "
                    "not traced (posted work requests are)");
    return cq;
}

/* Take over a context's data-plane entry points.  The slot is filled, then published, then the
 * pointers swapped: a wrapper never runs without its originals. */
static void icx_vctx_adopt(struct ibv_context *ctx)
{
    if (ctx->ops.post_send == icx_vw_post_send) /* already ours */
        return;
    struct icx_vctx *v = icx_vctx_claim();
    if (!v) {
        icx_note(1, "more than 64 RDMA device contexts opened: later ones are not traced");
        return;
    }
    v->post_send = ctx->ops.post_send;
    v->post_recv = ctx->ops.post_recv;
    v->post_srq_recv = ctx->ops.post_srq_recv;
    v->poll_cq = ctx->ops.poll_cq;
    struct verbs_context *vx = verbs_get_ctx(ctx);
    if (vx && vx->sz >= sizeof(*vx) - offsetof(struct verbs_context, create_qp_ex))
        v->create_qp_ex = vx->create_qp_ex;
    if (vx && vx->sz >= sizeof(*vx) - offsetof(struct verbs_context, create_cq_ex))
        v->create_cq_ex = vx->create_cq_ex;
    icx_vctx_describe(v, ctx);
    icx_vctx_publish(v, ctx);
    if (v->post_send)
        ctx->ops.post_send = icx_vw_post_send;
    if (v->post_recv)
        ctx->ops.post_recv = icx_vw_post_recv;
    if (v->post_srq_recv)
        ctx->ops.post_srq_recv = icx_vw_post_srq_recv;
    if (v->poll_cq)
        ctx->ops.poll_cq = icx_vw_poll_cq;
    if (v->create_qp_ex)
        vx->create_qp_ex = icx_vw_create_qp_ex;
    if (v->create_cq_ex)
        vx->create_cq_ex = icx_vw_create_cq_ex;
    icx_debug("verbs: traced context %p (%s), slot %u\n", (void *)ctx, v->name,
              (unsigned)icx_vctx_slot(v));
}

/* ---- exported wrappers (versions in wraps_verbs.def) ---- */

ICX_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
    icx_real_ibv_open_device_t real = ICX_REAL(ibv_open_device);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(dev);
    struct ibv_context *ctx = real(dev);
    icx_call_returned(&c);
    if (ctx)
        icx_vctx_adopt(ctx);
    icx_call_end(&c);
    return ctx;
}

ICX_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
    icx_real_ibv_close_device_t real = ICX_REAL(ibv_close_device);
    struct icx_call c;
    if (!real)
        return ENOSYS;
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return real(ctx);
    /* The slot stays (its counts are still to be written); only its context is forgotten, so
     * a new context at the same address gets a slot of its own. */
    struct icx_vctx *v = (struct icx_vctx *)icx_vctx_of(ctx);
    int rc = real(ctx);
    icx_call_returned(&c);
    if (v && rc == 0)
        atomic_store_explicit(&v->ctx, NULL, memory_order_relaxed);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a)
{
    icx_real_ibv_create_qp_t real = ICX_REAL(ibv_create_qp);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(pd, a);
    struct ibv_qp *qp = real(pd, a);
    icx_call_returned(&c);
    icx_vrec_qp(ICX_API_ibv_create_qp, c.t0, pd ? pd->context : NULL, qp ? qp->qp_num : 0,
                a ? (int)a->qp_type : 0, NULL, 0,
                qp              ? 0
                : c.saved_errno ? c.saved_errno
                                : -1);
    icx_call_end(&c);
    return qp;
}

ICX_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
    icx_real_ibv_modify_qp_t real = ICX_REAL(ibv_modify_qp);
    struct icx_call c;
    if (!real)
        return ENOSYS;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(qp, attr, mask);
    int rc = real(qp, attr, mask);
    icx_call_returned(&c);
    icx_vrec_qp(ICX_API_ibv_modify_qp, c.t0, qp->context, qp->qp_num, (int)qp->qp_type, attr, mask,
                rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
    icx_real_ibv_destroy_qp_t real = ICX_REAL(ibv_destroy_qp);
    struct icx_call c;
    if (!real)
        return ENOSYS;
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(qp);
    struct ibv_context *ctx = qp->context;
    uint32_t num = qp->qp_num;
    int type = (int)qp->qp_type;
    icx_vqpx_forget(qp);
    int rc = real(qp);
    icx_call_returned(&c);
    icx_vrec_qp(ICX_API_ibv_destroy_qp, c.t0, ctx, num, type, NULL, 0, rc);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
    icx_real_ibv_qp_to_qp_ex_t real = ICX_REAL(ibv_qp_to_qp_ex);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin_untimed(&c, &icx_self.guard))
        return real(qp);
    struct ibv_qp_ex *qpx = real(qp);
    icx_call_returned(&c);
    if (qpx)
        icx_vqpx_adopt(qpx, icx_vctx_of(qp->context));
    icx_call_end(&c);
    return qpx;
}

#undef ibv_reg_mr
ICX_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
    icx_real_ibv_reg_mr_t real = ICX_REAL(ibv_reg_mr);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(pd, addr, len, access);
    struct ibv_mr *mr = real(pd, addr, len, access);
    icx_call_returned(&c);
    icx_vrec_mr(ICX_API_ibv_reg_mr, c.t0, pd, mr, (uintptr_t)addr, len, (uintptr_t)addr, access,
                -1);
    icx_call_end(&c);
    return mr;
}

ICX_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
                                           unsigned int access)
{
    icx_real_ibv_reg_mr_iova2_t real = ICX_REAL(ibv_reg_mr_iova2);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(pd, addr, len, iova, access);
    struct ibv_mr *mr = real(pd, addr, len, iova, access);
    icx_call_returned(&c);
    icx_vrec_mr(ICX_API_ibv_reg_mr_iova2, c.t0, pd, mr, (uintptr_t)addr, len, iova, (int)access,
                -1);
    icx_call_end(&c);
    return mr;
}

ICX_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t len,
                                            uint64_t iova, int fd, int access)
{
    icx_real_ibv_reg_dmabuf_mr_t real = ICX_REAL(ibv_reg_dmabuf_mr);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(pd, offset, len, iova, fd, access);
    struct ibv_mr *mr = real(pd, offset, len, iova, fd, access);
    icx_call_returned(&c);
    icx_vrec_mr(ICX_API_ibv_reg_dmabuf_mr, c.t0, pd, mr, 0, len, iova, access, fd);
    icx_call_end(&c);
    return mr;
}

ICX_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
    icx_real_ibv_dereg_mr_t real = ICX_REAL(ibv_dereg_mr);
    struct icx_call c;
    if (!real)
        return ENOSYS;
    if (!mr || !icx_call_begin(&c, &icx_self.guard))
        return real(mr);
    struct ibv_mr copy = *mr;
    int rc = real(mr);
    icx_call_returned(&c);
    icx_vrec_mr(ICX_API_ibv_dereg_mr, c.t0, copy.pd, &copy, (uintptr_t)copy.addr, copy.length, 0, 0,
                -1);
    icx_call_end(&c);
    return rc;
}

ICX_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                        struct ibv_comp_channel *channel, int comp_vector)
{
    icx_real_ibv_create_cq_t real = ICX_REAL(ibv_create_cq);
    struct icx_call c;
    if (!real) {
        errno = ENOSYS;
        return NULL;
    }
    if (!icx_call_begin(&c, &icx_self.guard))
        return real(ctx, cqe, cq_context, channel, comp_vector);
    struct ibv_cq *cq = real(ctx, cqe, cq_context, channel, comp_vector);
    icx_call_returned(&c);
    icx_vrec_cq(ICX_API_ibv_create_cq, c.t0, ctx, cqe, cq != NULL);
    icx_call_end(&c);
    return cq;
}

/* ---- dlsym / dlvsym (dl.c asks): the wrappers of wraps_verbs.def, for their name and version ----
 */

struct icx_vwrap {
    const char *name, *version;
    void *wrapper;
    struct icx_sym *real;
};

static const struct icx_vwrap icx_vwraps[] = {
#define ICX_WRAPV(n, ver) {#n, ver, (void *)n, &icx_sym_##n},
#define ICX_OPS(n)
#include "wraps_verbs.def"
#undef ICX_WRAPV
#undef ICX_OPS
};

static void *icx_verbs_dl_wrap(const char *name, const char *version, void *handle)
{
    for (size_t i = 0; i < sizeof(icx_vwraps) / sizeof(icx_vwraps[0]); i++) {
        const struct icx_vwrap *w = &icx_vwraps[i];
        if (strcmp(name, w->name) != 0)
            continue;
        if (version && strcmp(version, w->version) != 0)
            return NULL; /* another ABI: not ours to wrap */
        if (!atomic_load_explicit(&icx_active, memory_order_relaxed))
            return NULL;
        void *p = version ? icx_dlvsym_real(handle, name, version) : icx_dlsym_real(handle, name);
        if (!p || p == w->wrapper)
            return NULL; /* pass on: the caller gets the same answer (and dlerror) */
        if (!version) {
            /* dlsym gives the default version: wrap it only if that is the one we mimic. */
            void *v = icx_dlvsym_real(handle, name, w->version);
            if (v != p)
                return NULL;
        }
        void *expected = NULL;
        atomic_compare_exchange_strong(&w->real->fn, &expected, p);
        icx_debug("verbs: %s(%s) -> wrapper\n", version ? "dlvsym" : "dlsym", name);
        return w->wrapper;
    }
    return NULL;
}

/* A wrapper's real function must be looked up with the version the wrapper carries. */
static void icx_verbs_init(void)
{
    for (size_t i = 0; i < sizeof(icx_vwraps) / sizeof(icx_vwraps[0]); i++)
        if (strcmp(icx_vwraps[i].version, icx_vwraps[i].real->version) != 0)
            icx_log("bug: %s wraps version %s but resolves %s\n", icx_vwraps[i].name,
                    icx_vwraps[i].version, icx_vwraps[i].real->version);
}

/* ---- writer: name the contexts ---- */

static void icx_verbs_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    (void)kind;
    unsigned n = atomic_load_explicit(&icx_nvctx, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        struct icx_vctx *v = &icx_vctx_tab[i];
        if (v->announced)
            continue;
        uint32_t name = icx_intern(f, v->name);
        struct icx_rec_verbs_device *d = icx_frame_put(f, ICX_REC_VERBS_DEVICE, i, sizeof(*d));
        if (!d)
            return;
        d->name = name;
        d->nports = v->nports;
        d->node_guid = v->guid;
        for (unsigned p = 0; p < v->nports && p < ICX_VPORT_MAX; p++) {
            if (!v->ports[p].port)
                continue;
            struct icx_rec_verbs_port *r = icx_frame_put(f, ICX_REC_VERBS_PORT, i, sizeof(*r));
            if (r)
                memcpy((char *)r + sizeof(r->h), (char *)&v->ports[p] + sizeof(r->h),
                       sizeof(*r) - sizeof(r->h));
        }
        v->announced = 1;
    }
}

/* Lock order: the context registry, then the extended-QP table. */
static void icx_verbs_fork_prepare(void)
{
    icx_vctx_fork_prepare();
    icx_vqpx_fork_prepare();
}

static void icx_verbs_fork_parent(void)
{
    icx_vqpx_fork_parent();
    icx_vctx_fork_parent();
}

static void icx_verbs_fork_child(void)
{
    icx_vqpx_fork_child();
    icx_vctx_fork_child();
}

const struct icx_module icx_mod_verbs = {
    .name = "verbs",
    .init = icx_verbs_init,
    .drain_thread = icx_verbs_drain_agg,
    .tick = icx_verbs_tick,
    .dl_prefix = "ibv_",
    .dl_wrap = icx_verbs_dl_wrap,
    .fork_prepare = icx_verbs_fork_prepare,
    .fork_parent = icx_verbs_fork_parent,
    .fork_child = icx_verbs_fork_child,
};
