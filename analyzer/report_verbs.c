/* RDMA verbs report: per QP and opcode, per NIC port, per node pair.
 *
 * Bytes are counted from posted work requests (exact; completions are often requested for one
 * request in many).  A QP is matched to its peer in another trace (or the same one) by the remote
 * QP number and GID (LID when there is no GID) its RTR transition named, checked both ways.
 * Direction: a SEND or RDMA WRITE moves bytes from the poster's NIC to the peer's, an RDMA READ
 * from the peer's to the poster's; incoming traffic of a NIC is known only when the peer was
 * traced too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_counters.h"
#include "verbs_model.h"

static int gid_zero(const uint8_t *g)
{
    for (int i = 0; i < 16; i++)
        if (g[i])
            return 0;
    return 1;
}

static struct vqp_row *row_get(struct icx_verbs *V, const struct icx_proc *p, uint16_t ctx,
                               uint32_t qpn)
{
    for (size_t i = 0; i < V->nqps; i++)
        if (V->qps[i].p == p && V->qps[i].ctx == ctx && V->qps[i].qpn == qpn)
            return &V->qps[i];
    struct vqp_row *n = realloc(V->qps, (V->nqps + 1) * sizeof(*n));
    if (!n)
        return NULL;
    V->qps = n;
    struct vqp_row *r = &V->qps[V->nqps++];
    memset(r, 0, sizeof(*r));
    r->p = p;
    r->ctx = ctx;
    r->qpn = qpn;
    r->peer = -1;
    for (size_t i = p->nvqps; i-- > 0;)
        if (p->vqps[i].ctx == ctx && p->vqps[i].qp_num == qpn) {
            r->q = &p->vqps[i];
            break;
        }
    return r;
}

static struct vnic *nic_row(struct icx_verbs *V, const char *host, const char *name, int port)
{
    for (size_t i = 0; i < V->nnics; i++)
        if (!strcmp(V->nics[i].host, host) && !strcmp(V->nics[i].name, name) &&
            V->nics[i].port == port)
            return &V->nics[i];
    struct vnic *n = realloc(V->nics, (V->nnics + 1) * sizeof(*n));
    if (!n)
        return NULL;
    V->nics = n;
    struct vnic *v = &V->nics[V->nnics++];
    memset(v, 0, sizeof(*v));
    snprintf(v->host, sizeof(v->host), "%s", host);
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->port = port;
    v->t0 = INFINITY;
    v->t1 = -INFINITY;
    return v;
}

/* The row of a device context's port; the port's own report (VERBS_PORT) sets rate and layer. */
static struct vnic *nic_get(struct icx_verbs *V, const struct icx_proc *p, uint16_t ctx, int port)
{
    port = port >= 1 && port <= 4 ? port : 1;
    int known = ctx < ICX_RD_MAX_VCTX && p->vctx[ctx].present;
    struct vnic *v = nic_row(V, icx_verbs_host(p), known ? p->vctx[ctx].name : "?", port);
    if (v && known && p->vctx[ctx].ports[port - 1].port) {
        v->opened = 1;
        v->port_rate_mbps = p->vctx[ctx].ports[port - 1].rate_mbps;
        v->rate_mbps = v->port_rate_mbps;
        v->link_layer = p->vctx[ctx].ports[port - 1].link_layer;
    }
    return v;
}

static void pair_add(struct icx_verbs *V, const char *src, const char *dst, uint64_t bytes)
{
    if (!bytes)
        return;
    for (size_t i = 0; i < V->npairs; i++)
        if (!strcmp(V->pairs[i].src, src) && !strcmp(V->pairs[i].dst, dst)) {
            V->pairs[i].bytes += bytes;
            return;
        }
    struct vpair *n = realloc(V->pairs, (V->npairs + 1) * sizeof(*n));
    if (!n)
        return;
    V->pairs = n;
    struct vpair *v = &V->pairs[V->npairs++];
    snprintf(v->src, sizeof(v->src), "%s", src);
    snprintf(v->dst, sizeof(v->dst), "%s", dst);
    v->bytes = bytes;
}

static int is_out_op(unsigned op) /* SEND*, RDMA_WRITE*, atomics: poster -> peer */
{
    return op <= 3 || op == 5 || op == 6 || op == 9; /* ibv_wr_opcode: 4 is RDMA_READ */
}

/* Does row b's QP name row a's as its remote (and a's b's)? */
static int qp_matches(const struct vqp_row *a, const struct vqp_row *b)
{
    if (!a->q || !b->q || !a->q->connected || !b->q->connected)
        return 0;
    if (a->q->dest_qp_num != b->qpn || b->q->dest_qp_num != a->qpn)
        return 0;
    if (!gid_zero(a->q->remote_gid) || !gid_zero(b->q->local_gid))
        return !memcmp(a->q->remote_gid, b->q->local_gid, 16) &&
               !memcmp(b->q->remote_gid, a->q->local_gid, 16);
    return a->q->dlid == b->q->slid && b->q->dlid == a->q->slid;
}

static void span_add(struct vnic *n, double t0, double t1)
{
    if (!(t1 >= t0))
        return;
    n->t0 = t0 < n->t0 ? t0 : n->t0;
    n->t1 = t1 > n->t1 ? t1 : n->t1;
}

/* Bytes of the requests posted through each NIC over time: each aggregate spread evenly over
 * its interval, each event in its instant's bin; at most about 100 bins of at least 50 ms. */
static void bin_traffic(struct icx_verbs *V, const struct icx_trace *t)
{
    for (size_t i = 0; i < V->nnics; i++) {
        struct vnic *n = &V->nics[i];
        if (!(n->t1 >= n->t0))
            continue;
        n->bin_s = fmax(0.05, (n->t1 - n->t0) / 100);
        n->nbins = (size_t)((n->t1 - n->t0) / n->bin_s) + 1;
        n->bins = calloc(n->nbins, sizeof(double));
        if (!n->bins)
            n->nbins = 0;
    }
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->nvtraffic; k++) {
            const struct icx_rd_vtraffic *x = &p->vtraffic[k];
            if (x->kind != ICX_VK_SEND || !x->bytes)
                continue;
            const struct icx_rd_vqp *q = NULL;
            for (size_t j = p->nvqps; j-- > 0 && !q;)
                if (p->vqps[j].ctx == x->ctx && p->vqps[j].qp_num == x->qp_num)
                    q = &p->vqps[j];
            struct vnic *n = nic_get(V, p, x->ctx, q ? q->port : 1);
            if (!n || !n->nbins)
                continue;
            double a = (x->t0 - n->t0) / n->bin_s, b = (x->t1 - n->t0) / n->bin_s;
            size_t lo = a < 0 ? 0 : (size_t)a, hi = b < 0 ? 0 : (size_t)b;
            lo = lo < n->nbins ? lo : n->nbins - 1;
            hi = hi < n->nbins ? hi : n->nbins - 1;
            for (size_t j = lo; j <= hi; j++) {
                double from = fmax(a, (double)j), to = fmin(b, (double)j + 1);
                double share = b > a ? (to - from) / (b - a) : 1.0;
                n->bins[j] += share > 0 ? share * (double)x->bytes : 0;
            }
        }
    }
    for (size_t i = 0; i < V->nnics; i++) {
        struct vnic *n = &V->nics[i];
        for (size_t j = 0; j < n->nbins; j++)
            n->peak_bps = fmax(n->peak_bps, n->bins[j] / n->bin_s);
    }
}

/* Set each NIC's traced bytes against its port counters: the counters report's row of the NIC
 * (the growth between the host's first and last sample, icx_sample_span).  The counters also
 * count what no traced process sent (other jobs, headers, retransmissions). */
static void port_counters(struct icx_verbs *V, const struct icx_counters *C)
{
    for (size_t i = 0; C && i < V->nnics; i++) {
        struct vnic *n = &V->nics[i];
        for (size_t k = 0; k < C->n; k++) {
            const struct icx_counter_row *r = &C->rows[k];
            if (!r->nic || r->span.first == r->span.last || strcmp(r->host, n->host) ||
                strcmp(r->bus, n->name))
                continue;
            n->has_counters = 1;
            n->counter_tx = r->tx1 >= r->tx0 ? r->tx1 - r->tx0 : 0;
            n->counter_rx = r->rx1 >= r->rx0 ? r->rx1 - r->rx0 : 0;
        }
    }
}

/* The GPU a process drives: its NCCL communicators' device, else where it allocated most. */
static void gpu_nic_matrix(struct icx_verbs *V, const struct icx_trace *t)
{
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        int g = icx_verbs_primary_gpu(p);
        if (g < 0)
            continue;
        for (size_t q = 0; q < V->nqps; q++) {
            const struct vqp_row *r = &V->qps[q];
            uint64_t b = r->out_bytes + r->in_read_bytes;
            if (r->p != p || !b || r->ctx >= ICX_RD_MAX_VCTX)
                continue;
            const char *nic = p->vctx[r->ctx].name;
            unsigned path = 0;
            for (int k = 0; k < ICX_RD_MAX_NICS; k++)
                if (p->nics[k].present && !strcmp(p->nics[k].name, nic))
                    path = p->nics[k].path[g];
            double t0 = INFINITY, t1 = -INFINITY;
            for (size_t x = 0; x < p->nvtraffic; x++)
                if (p->vtraffic[x].ctx == r->ctx && p->vtraffic[x].qp_num == r->qpn &&
                    p->vtraffic[x].kind == ICX_VK_SEND) {
                    t0 = fmin(t0, p->vtraffic[x].t0);
                    t1 = fmax(t1, p->vtraffic[x].t1);
                }
            struct gpunic *e = NULL;
            for (size_t k = 0; k < V->ngn && !e; k++)
                if (!strcmp(V->gn[k].host, icx_verbs_host(p)) &&
                    !strcmp(V->gn[k].gpu_bus, p->dev[g].bus) && !strcmp(V->gn[k].nic, nic))
                    e = &V->gn[k];
            if (!e) {
                struct gpunic *n = realloc(V->gn, (V->ngn + 1) * sizeof(*n));
                if (!n)
                    continue;
                V->gn = n;
                e = &V->gn[V->ngn++];
                memset(e, 0, sizeof(*e));
                snprintf(e->host, sizeof(e->host), "%s", icx_verbs_host(p));
                snprintf(e->gpu_bus, sizeof(e->gpu_bus), "%s", p->dev[g].bus);
                snprintf(e->nic, sizeof(e->nic), "%s", nic);
                e->gpu = g;
                e->path = path;
                e->t0 = INFINITY;
                e->t1 = -INFINITY;
            }
            e->bytes += b;
            e->t0 = fmin(e->t0, t0);
            e->t1 = fmax(e->t1, t1);
        }
    }
}

static struct icx_verbs *verbs_compute_new(const struct icx_trace *t, const struct icx_counters *C,
                                           struct icx_findings *F)
{
    struct icx_verbs *V = calloc(1, sizeof(*V));
    if (!V)
        return NULL;
    /* Every RDMA NIC of every traced host (the topology snapshot), used or not; then every
     * opened device context. */
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (int k = 0; k < ICX_RD_MAX_NICS; k++) {
            const struct icx_rd_nic *x = &p->nics[k];
            struct vnic *n =
                x->present && x->active ? nic_row(V, icx_verbs_host(p), x->name, 1) : NULL;
            if (n && !n->opened) {
                n->rate_mbps = x->rate_mbps;
                n->link_layer = x->link_layer;
            }
        }
        for (uint16_t c = 0; c < ICX_RD_MAX_VCTX; c++)
            for (int port = 1; p->vctx[c].present && port <= 4; port++)
                if (p->vctx[c].ports[port - 1].port)
                    nic_get(V, p, c, port);
    }
    /* QPs: every traced one that connected, and every one with traffic. */
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->nvqps; k++)
            if (p->vqps[k].connected)
                row_get(V, p, p->vqps[k].ctx, p->vqps[k].qp_num);
        for (size_t k = 0; k < p->nvtraffic; k++) {
            const struct icx_rd_vtraffic *x = &p->vtraffic[k];
            struct vqp_row *r = row_get(V, p, x->ctx, x->qp_num);
            if (!r)
                continue;
            int o;
            for (o = 0; o < r->nops; o++)
                if (r->ops[o].kind == x->kind && r->ops[o].opcode == x->opcode)
                    break;
            if (o == r->nops) {
                if (r->nops == 16)
                    continue;
                r->nops++;
                r->ops[o].kind = x->kind;
                r->ops[o].opcode = x->opcode;
            }
            r->ops[o].count += x->count;
            r->ops[o].bytes += x->bytes;
            r->ops[o].signaled += x->signaled;
            int port = r->q ? r->q->port : 1;
            struct vnic *n = nic_get(V, p, x->ctx, port);
            if (!n)
                continue;
            if (x->kind == ICX_VK_SEND) {
                n->wrs += x->count;
                if (x->size_class < ICX_VERBS_NCLASS)
                    n->size_hist[x->size_class] += x->count;
                if (is_out_op(x->opcode)) {
                    n->tx_bytes += x->bytes;
                    r->out_bytes += x->bytes;
                } else if (x->opcode == 4) { /* RDMA READ: the data comes in */
                    n->rx_bytes += x->bytes;
                    r->in_read_bytes += x->bytes;
                }
                span_add(n, x->t0, x->t1);
            } else if (x->kind == ICX_VK_RECV || x->kind == ICX_VK_SRQ_RECV) {
                n->recvs += x->count;
            } else if (x->kind == ICX_VK_COMPLETION) {
                n->completions += x->count;
            }
        }
        for (size_t k = 0; k < p->nvwc_errs; k++) {
            const struct icx_rd_vwc_err *e = &p->vwc_errs[k];
            struct vnic *n = nic_get(V, p, e->ctx, 1);
            if (n)
                n->errors += e->count;
            V->errors += e->count;
            char ev[400];
            snprintf(ev, sizeof(ev),
                     "%llu work completions with status %s (vendor error 0x%x) on "
                     "QP %u of %s",
                     (unsigned long long)e->count, icx_wc_status_name(e->status), e->vendor_err,
                     e->qp_num, n ? n->name : "?");
            icx_finding_add(F, "rdma_completion_error", p, ev,
                            "check the QP's peer and its state (a flushed QP reports every "
                            "outstanding request as WR_FLUSH_ERR after the first error)");
        }
    }
    /* Peers, then incoming bytes and the node x node matrix. */
    for (size_t a = 0; a < V->nqps; a++)
        for (size_t b = 0; b < V->nqps && V->qps[a].peer < 0; b++)
            if (a != b && qp_matches(&V->qps[a], &V->qps[b]))
                V->qps[a].peer = (int)b;
    for (size_t a = 0; a < V->nqps; a++) {
        struct vqp_row *r = &V->qps[a];
        const struct vqp_row *peer = r->peer >= 0 ? &V->qps[r->peer] : NULL;
        const char *dst = peer ? icx_verbs_host(peer->p) : "(untraced peer)";
        pair_add(V, icx_verbs_host(r->p), dst, r->out_bytes);
        pair_add(V, dst, icx_verbs_host(r->p), r->in_read_bytes);
        if (!peer)
            continue;
        /* What the peer pushed into this QP, or read out of it. */
        struct vnic *n = nic_get(V, r->p, r->ctx, r->q ? r->q->port : 1);
        if (n) {
            n->rx_bytes += peer->out_bytes;
            n->tx_bytes += peer->in_read_bytes;
        }
    }
    /* Rates: the mean over the traced interval of each NIC's sends, and over time. */
    for (size_t i = 0; i < V->nnics; i++) {
        struct vnic *n = &V->nics[i];
        double span = n->t1 - n->t0;
        n->rate_bps = span > 0 ? (double)(n->tx_bytes + n->rx_bytes) / span : NAN;
    }
    bin_traffic(V, t);
    port_counters(V, C);
    icx_verbs_rails(V, t, F);
    gpu_nic_matrix(V, t);
    return V;
}

static void verbs_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_verbs *V = A->verbs;
    if (!V || (!V->nqps && !V->nnics))
        return;
    if (!V->nqps) { /* NICs present, no process used verbs: one line, not a table of zeros */
        fprintf(out, "\nRDMA (verbs): no verbs activity traced (%zu NIC port%s on the hosts)\n",
                V->nnics, V->nnics == 1 ? "" : "s");
        return;
    }
    fprintf(out, "\nRDMA (verbs) per NIC port\n");
    fprintf(out, "  %-16s %-10s %4s %-10s %14s %14s %10s %10s %12s %6s\n", "host", "nic", "port",
            "link", "tx bytes", "rx bytes", "WRs", "recvs", "peak Gb/s", "errors");
    for (size_t i = 0; i < V->nnics; i++) {
        const struct vnic *n = &V->nics[i];
        fprintf(out, "  %-16s %-10s %4d %-10s %14llu %14llu %10llu %10llu %12.3f %6llu\n", n->host,
                n->name, n->port, icx_ll_name(n->link_layer), (unsigned long long)n->tx_bytes,
                (unsigned long long)n->rx_bytes, (unsigned long long)n->wrs,
                (unsigned long long)n->recvs, n->peak_bps * 8 / 1e9, (unsigned long long)n->errors);
    }
    fprintf(out,
            "\nRDMA per QP (posted work requests; QPs that moved no bytes are counted below)\n");
    fprintf(out, "  %-16s %7s %-8s %8s  %-22s %10s %14s  %s\n", "host", "pid", "nic", "qp", "op",
            "count", "bytes", "peer");
    size_t quiet = 0;
    for (size_t i = 0; i < V->nqps; i++) {
        const struct vqp_row *r = &V->qps[i];
        uint64_t moved = 0;
        for (int o = 0; o < r->nops; o++)
            moved += r->ops[o].bytes;
        if (!moved) { /* receives posted, completions, or nothing: the JSON lists them */
            quiet++;
            continue;
        }
        char peer[200] = "-";
        if (r->peer >= 0)
            snprintf(peer, sizeof(peer), "%s pid %d qp %u", icx_verbs_host(V->qps[r->peer].p),
                     V->qps[r->peer].p->pid, V->qps[r->peer].qpn);
        const char *nic = r->ctx < ICX_RD_MAX_VCTX ? r->p->vctx[r->ctx].name : "?";
        for (int o = 0; o < r->nops; o++)
            fprintf(out, "  %-16s %7d %-8s %8u  %-22s %10llu %14llu  %s\n", icx_verbs_host(r->p),
                    r->p->pid, nic, r->qpn, icx_verbs_opcode_name(r->ops[o].kind, r->ops[o].opcode),
                    (unsigned long long)r->ops[o].count, (unsigned long long)r->ops[o].bytes, peer);
    }
    if (quiet)
        fprintf(out,
                "  (%zu more QPs moved no bytes: receives posted, completions, or nothing; "
                "--json lists them)\n",
                quiet);
    if (V->ngn) {
        fprintf(out, "\nGPU <-> NIC (RDMA of the processes driving each GPU)\n");
        fprintf(out, "  %-16s %4s %-14s %-10s %-5s %14s %10s\n", "host", "gpu", "pci", "nic",
                "path", "bytes", "GB/s");
        for (size_t i = 0; i < V->ngn; i++) {
            const struct gpunic *e = &V->gn[i];
            double span = e->t1 - e->t0;
            fprintf(out, "  %-16s %4d %-14s %-10s %-5s %14llu %10.3f\n", e->host, e->gpu,
                    e->gpu_bus, e->nic, icx_pci_path_name(e->path), (unsigned long long)e->bytes,
                    span > 0 ? (double)e->bytes / span / 1e9 : 0.0);
        }
    }
    fprintf(out, "\nRDMA bytes node -> node\n");
    for (size_t i = 0; i < V->npairs; i++)
        fprintf(out, "  %-20s -> %-20s %14llu\n", V->pairs[i].src, V->pairs[i].dst,
                (unsigned long long)V->pairs[i].bytes);
}

static void verbs_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_verbs *V = A->verbs;
    icx_json_obj(j, "verbs");
    icx_json_arr(j, "nics");
    for (size_t i = 0; V && i < V->nnics; i++) {
        const struct vnic *n = &V->nics[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", n->host);
        icx_json_str(j, "nic", n->name);
        icx_json_int(j, "port", n->port);
        icx_json_str(j, "link_layer", icx_ll_name(n->link_layer));
        icx_json_int(j, "rate_mbps", n->rate_mbps);
        icx_json_bool(j, "rail", n->rail);
        icx_json_int(j, "tx_bytes", (long long)n->tx_bytes);
        icx_json_int(j, "rx_bytes", (long long)n->rx_bytes);
        icx_json_int(j, "work_requests", (long long)n->wrs);
        icx_json_int(j, "receives_posted", (long long)n->recvs);
        icx_json_int(j, "completions", (long long)n->completions);
        icx_json_int(j, "completion_errors", (long long)n->errors);
        icx_json_num(j, "mean_bytes_per_s", n->rate_bps);
        icx_json_num(j, "utilization", n->rate_mbps ? n->rate_bps * 8 / (n->rate_mbps * 1e6) : NAN);
        icx_json_num(j, "peak_bytes_per_s", n->nbins ? n->peak_bps : NAN);
        if (n->has_counters) {
            icx_json_int(j, "counter_tx_bytes", (long long)n->counter_tx);
            icx_json_int(j, "counter_rx_bytes", (long long)n->counter_rx);
            icx_json_int(j, "untraced_tx_bytes", icx_sub_sat(n->counter_tx, n->tx_bytes));
            icx_json_int(j, "untraced_rx_bytes", icx_sub_sat(n->counter_rx, n->rx_bytes));
        } else {
            icx_json_null(j, "counter_tx_bytes");
            icx_json_null(j, "counter_rx_bytes");
        }
        icx_json_num(j, "peak_utilization",
                     n->rate_mbps && n->nbins ? n->peak_bps * 8 / (n->rate_mbps * 1e6) : NAN);
        icx_json_num(j, "bin_s", n->nbins ? n->bin_s : NAN);
        icx_json_num(j, "t0", n->nbins ? n->t0 : NAN);
        icx_json_arr(j, "posted_bytes_per_bin");
        for (size_t b = 0; b < n->nbins; b++)
            icx_json_num(j, NULL, n->bins[b]);
        icx_json_end(j);
        icx_json_arr(j, "size_histogram"); /* [upper bound bytes, work requests] */
        for (int c = 0; c < ICX_VERBS_NCLASS; c++)
            if (n->size_hist[c]) {
                icx_json_obj(j, NULL);
                icx_json_int(j, "le_bytes", c == 0 ? 0 : 1ll << (c - 1));
                icx_json_int(j, "count", (long long)n->size_hist[c]);
                icx_json_end(j);
            }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_arr(j, "qps");
    for (size_t i = 0; V && i < V->nqps; i++) {
        const struct vqp_row *r = &V->qps[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", icx_verbs_host(r->p));
        icx_json_int(j, "pid", r->p->pid);
        icx_json_int(j, "rank", r->p->rank);
        icx_json_str(j, "nic", r->ctx < ICX_RD_MAX_VCTX ? r->p->vctx[r->ctx].name : "?");
        icx_json_int(j, "qp_num", r->qpn);
        icx_json_int(j, "dest_qp_num", r->q && r->q->connected ? (long long)r->q->dest_qp_num : -1);
        if (r->peer >= 0) {
            const struct vqp_row *q = &V->qps[r->peer];
            icx_json_obj(j, "peer");
            icx_json_str(j, "host", icx_verbs_host(q->p));
            icx_json_int(j, "pid", q->p->pid);
            icx_json_int(j, "rank", q->p->rank);
            icx_json_int(j, "qp_num", q->qpn);
            icx_json_end(j);
        } else {
            icx_json_null(j, "peer");
        }
        icx_json_arr(j, "ops");
        for (int o = 0; o < r->nops; o++) {
            icx_json_obj(j, NULL);
            icx_json_int(j, "kind", r->ops[o].kind);
            icx_json_int(j, "opcode", r->ops[o].opcode);
            icx_json_str(j, "name", icx_verbs_opcode_name(r->ops[o].kind, r->ops[o].opcode));
            icx_json_int(j, "count", (long long)r->ops[o].count);
            icx_json_int(j, "bytes", (long long)r->ops[o].bytes);
            icx_json_int(j, "signaled", (long long)r->ops[o].signaled);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_arr(j, "gpu_nic");
    for (size_t i = 0; V && i < V->ngn; i++) {
        const struct gpunic *e = &V->gn[i];
        double span = e->t1 - e->t0;
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", e->host);
        icx_json_int(j, "gpu", e->gpu);
        icx_json_str(j, "gpu_pci", e->gpu_bus);
        icx_json_str(j, "nic", e->nic);
        icx_json_str(j, "path", icx_pci_path_name(e->path));
        icx_json_int(j, "bytes", (long long)e->bytes);
        icx_json_num(j, "bytes_per_s", span > 0 ? (double)e->bytes / span : NAN);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_arr(j, "node_matrix");
    for (size_t i = 0; V && i < V->npairs; i++) {
        icx_json_obj(j, NULL);
        icx_json_str(j, "src", V->pairs[i].src);
        icx_json_str(j, "dst", V->pairs[i].dst);
        icx_json_int(j, "bytes", (long long)V->pairs[i].bytes);
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_end(j);
}

static void verbs_free(struct icx_analysis *A)
{
    struct icx_verbs *V = A->verbs;
    A->verbs = NULL;
    if (!V)
        return;
    for (size_t i = 0; i < V->nnics; i++)
        free(V->nics[i].bins);
    free(V->gn);
    free(V->qps);
    free(V->nics);
    free(V->pairs);
    free(V);
}

/* Out of memory leaves no verbs report (the others still run), as a trace without verbs would. */
static int verbs_compute(struct icx_analysis *A)
{
    A->verbs = verbs_compute_new(A->t, A->counters, &A->findings);
    return 0;
}

const struct icx_report icx_report_verbs = {
    .name = "verbs",
    .compute = verbs_compute,
    .print = verbs_print,
    .json = verbs_json,
    .free = verbs_free,
};
