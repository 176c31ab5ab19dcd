/* Counter reconciliation: per GPU, the NVLink bytes its hardware counters saw over the traced time
 * against the bytes the intercepted peer copies explain, and those NCCL's routing explains (its
 * collectives' and send/recv's bytes between GPUs of one host, report_nccl.c).  What neither
 * explains (kernels' NVLink loads and stores, unhooked copy APIs, NCCL traffic routed otherwise
 * than its graph says) is the unexplained remainder: counter = explained + unexplained. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "format.h"
#include "report_counters.h"

static struct icx_counter_row *row_for(struct icx_counters *C, const char *host, const char *bus,
                                       int nic)
{
    for (size_t i = 0; i < C->n; i++)
        if (!strcmp(C->rows[i].host, host) && !strcmp(C->rows[i].bus, bus) && C->rows[i].nic == nic)
            return &C->rows[i];
    struct icx_counter_row *n = realloc(C->rows, (C->n + 1) * sizeof(*n));
    if (!n)
        return NULL;
    C->rows = n;
    struct icx_counter_row *r = &C->rows[C->n++];
    memset(r, 0, sizeof(*r));
    snprintf(r->host, sizeof(r->host), "%s", host);
    snprintf(r->bus, sizeof(r->bus), "%s", bus);
    r->nic = nic;
    r->t0 = INFINITY;
    r->t1 = -INFINITY;
    r->device = -1;
    return r;
}

void icx_sample_span_add(struct icx_sample_span *s, const struct icx_counter_sample *x)
{
    if (!s->first || x->t_read < s->first->t_read)
        s->first = x;
    if (!s->last || x->t > s->last->t)
        s->last = x;
}

static void ib_print(FILE *out, const struct icx_counters *C);

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int sample_cmp(const void *a, const void *b)
{
    const struct icx_counter_sample *x = a, *y = b;
    return x->t < y->t ? -1 : x->t > y->t;
}

/* The GPU's NVLink capacity per direction: through NVSwitch, what one pair can use; with direct
 * links, the sum over its peers. */
static double gpu_capacity(const struct icx_proc *p, int dev)
{
    double direct = 0;
    for (size_t k = 0; k < p->nlinks; k++) {
        const struct icx_rd_link *l = &p->links[k];
        if (l->src != dev || l->kind != ICX_LINK_NVLINK)
            continue;
        if (l->flags & ICX_LINKF_NVSWITCH)
            return (double)l->capacity_bps;
        direct += (double)l->capacity_bps;
    }
    return direct;
}

/* Rate over time from the samples of one GPU (all processes of its host), sorted by time. */
static void over_time(const struct icx_trace *t, struct icx_counter_row *r)
{
    size_t n = 0, cap = 0;
    struct icx_counter_sample *v = NULL;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        if (strcmp(p->host ? p->host : "", r->host) != 0)
            continue;
        for (size_t k = 0; k < p->ncsamples; k++) {
            if (strcmp(p->csamples[k].bus, r->bus) != 0 || p->csamples[k].nic != r->nic)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                struct icx_counter_sample *nv = realloc(v, cap * sizeof(*v));
                if (!nv) {
                    free(v);
                    return;
                }
                v = nv;
            }
            v[n++] = p->csamples[k];
        }
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), sample_cmp);
    /* Rates over spans of at least half the median sampling interval: a sample taken just after
     * another (the final one at exit, two processes' samples close together) would otherwise
     * turn a counter step into a spike. */
    double *dts = n > 1 ? malloc((n - 1) * sizeof(double)) : NULL, min_dt = 0;
    if (dts) {
        for (size_t k = 1; k < n; k++)
            dts[k - 1] = v[k].t - v[k - 1].t;
        qsort(dts, n - 1, sizeof(double), dbl_cmp);
        min_dt = dts[(n - 1) / 2] / 2;
        free(dts);
    }
    /* Span boundaries: a new span once min_dt has passed; a short tail joins the last span, so
     * the spans cover the whole window and the peak is never below the mean. */
    size_t *b = n ? malloc(n * sizeof(*b)) : NULL, nb = 0;
    if (!b) {
        free(v);
        return;
    }
    b[nb++] = 0;
    for (size_t k = 1; k < n; k++)
        if (v[k].t - v[b[nb - 1]].t >= min_dt && v[k].t > v[b[nb - 1]].t)
            b[nb++] = k;
    if (n > 1 && b[nb - 1] != n - 1) {
        if (nb > 1)
            b[nb - 1] = n - 1;
        else
            b[nb++] = n - 1;
    }
    for (size_t i = 1; i < nb; i++) {
        const struct icx_counter_sample *x = &v[b[i - 1]], *y = &v[b[i]];
        double dt = y->t - x->t;
        if (dt <= 0 || y->tx < x->tx)
            continue;
        double rate = (double)(y->tx - x->tx) / dt;
        if (rate > r->tx_peak_bps)
            r->tx_peak_bps = rate;
        if (r->capacity_bps > 0 && rate > 0.8 * r->capacity_bps)
            r->tx_time_above_80 += dt;
    }
    free(b);
    r->tx_mean_bps = r->t1 > r->t0 ? (double)(r->tx1 - r->tx0) / (r->t1 - r->t0) : NAN;
    free(v);
}

static void counters_compute_into(const struct icx_trace *t, struct icx_counters *C)
{
    /* The counters are the GPU's (the NIC's), shared by every process on the host: its first
     * and last sample of them (icx_sample_span). */
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->ncsamples; k++) {
            const struct icx_counter_sample *s = &p->csamples[k];
            struct icx_counter_row *r = row_for(C, p->host ? p->host : "", s->bus, s->nic);
            if (!r)
                return;
            if (s->nic)
                r->capacity_bps = s->rate_mbps * 1e6 / 8;
            else
                r->resolution = 2 * 1024ull * s->links; /* a KiB lost per link at each end */
            icx_sample_span_add(&r->span, s);
        }
    }
    for (size_t i = 0; i < C->n; i++) {
        struct icx_counter_row *r = &C->rows[i];
        const struct icx_counter_sample *a = r->span.first, *b = r->span.last;
        if (!a)
            continue;
        r->t0 = a->t; /* the window the difference may count: from a's reads to b's */
        r->t1 = a == b ? a->t : b->t_read;
        r->tx0 = a->tx;
        r->rx0 = a->rx;
        r->wait0 = a->xmit_wait;
        r->discards0 = a->discards;
        r->tx1 = b->tx;
        r->rx1 = b->rx;
        r->wait1 = b->xmit_wait;
        r->discards1 = b->discards;
    }
    /* Intercepted peer copies issued inside each GPU's sampled window. */
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->ncopies; k++) {
            const struct icx_copy *c = &p->copies[k];
            if (c->result != 0 || (c->flags & ICX_EVF_CAPTURED) || c->src < 0 || c->dst < 0 ||
                c->src >= ICX_RD_MAX_DEV || c->dst >= ICX_RD_MAX_DEV)
                continue;
            for (int end = 0; end < 2; end++) {
                int dev = end ? c->dst : c->src;
                struct icx_counter_row *r = icx_counter_row_at(C, p, dev, c->t_enter);
                if (!r)
                    continue;
                r->device = dev;
                if (r->capacity_bps <= 0)
                    r->capacity_bps = gpu_capacity(p, dev);
                if (end)
                    r->rx_explained += c->bytes;
                else
                    r->tx_explained += c->bytes;
            }
        }
    }
}

/* The NVLink counter row of process p's CUDA device `dev` whose sampled window holds t
 * (monotonic s of that host); NULL when there is none. */
struct icx_counter_row *icx_counter_row_at(struct icx_counters *C, const struct icx_proc *p,
                                           int dev, double t)
{
    if (dev < 0 || dev >= ICX_RD_MAX_DEV || !p->dev[dev].bus[0])
        return NULL;
    for (size_t m = 0; m < C->n; m++) {
        struct icx_counter_row *r = &C->rows[m];
        if (!r->nic && !strcmp(r->host, p->host ? p->host : "") && !strcmp(r->bus, p->dev[dev].bus))
            return t < r->t0 || t > r->t1 ? NULL : r;
    }
    return NULL;
}

/* Counted minus explained, 0 when within the counters' resolution. */
static long long other_bytes(uint64_t counted, uint64_t explained, uint64_t resolution)
{
    long long d = icx_sub_sat(counted, explained);
    return (uint64_t)llabs(d) <= resolution ? 0 : d;
}

static void counters_over_time(const struct icx_trace *t, struct icx_counters *C)
{
    for (size_t i = 0; i < C->n; i++)
        over_time(t, &C->rows[i]);
    for (size_t i = 0; i < t->nprocs; i++)
        C->events_lost +=
            t->procs[i]->lost[ICX_LOST_buffer_full] + t->procs[i]->lost[ICX_LOST_no_buffer];
}

static void counters_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_counters *C = A->counters;
    int header = 0;
    for (size_t i = 0; i < C->n; i++) {
        const struct icx_counter_row *r = &C->rows[i];
        uint64_t tx = r->tx1 - r->tx0, rx = r->rx1 - r->rx0;
        if (r->nic ||
            (!tx && !rx && !r->tx_explained && !r->rx_explained && !r->tx_nccl && !r->rx_nccl))
            continue;
        if (!header++)
            fprintf(out,
                    "\nNVLink hardware counters vs intercepted copies\n%-14s %-4s %12s %12s "
                    "%12s %12s %12s\n",
                    "GPU", "dev", "TX counted", "TX explained", "TX other", "RX counted",
                    "RX other");
        char a[32], b[32], c[32], d[32], e[32], dev[8];
        long long otx = other_bytes(tx, r->tx_explained + r->tx_nccl, r->resolution);
        long long orx = other_bytes(rx, r->rx_explained + r->rx_nccl, r->resolution);
        icx_fmt_bytes(a, sizeof(a), (double)tx);
        icx_fmt_bytes(b, sizeof(b), (double)(r->tx_explained + r->tx_nccl));
        icx_fmt_bytes(c, sizeof(c), fabs((double)otx));
        icx_fmt_bytes(d, sizeof(d), (double)rx);
        icx_fmt_bytes(e, sizeof(e), fabs((double)orx));
        snprintf(dev, sizeof(dev), r->device >= 0 ? "%d" : "-", r->device);
        fprintf(out, "%-14s %-4s %12s %12s %s%11s %12s %s%11s\n", r->bus, dev, a, b,
                otx < 0 ? "-" : " ", c, d, orx < 0 ? "-" : " ", e);
    }
    if (header) {
        fprintf(out, "  explained: intercepted copies and NCCL's routing of its calls; other = "
                     "counted - explained: NVLink traffic no hook saw (kernels, unhooked copy "
                     "APIs); 0 within the counters' KiB-per-link resolution.\n");
        if (C->events_lost)
            fprintf(out,
                    "  (%llu events were dropped by the tracer: their copies are counted here "
                    "but cannot be explained)\n",
                    (unsigned long long)C->events_lost);
        fprintf(out, "%-14s %12s %12s %12s %12s\n", "GPU TX", "mean GB/s", "peak GB/s", "cap GB/s",
                ">80% cap s");
        for (size_t i = 0; i < C->n; i++) {
            const struct icx_counter_row *r = &C->rows[i];
            if (r->nic || r->tx1 == r->tx0)
                continue;
            fprintf(out, "%-14s %12.2f %12.2f %12.1f %12.3f\n", r->bus, r->tx_mean_bps / 1e9,
                    r->tx_peak_bps / 1e9, r->capacity_bps / 1e9, r->tx_time_above_80);
        }
    }
    ib_print(out, C);
}

/* InfiniBand ports: bytes, rates and congestion signals from their sysfs counters. */
static void ib_print(FILE *out, const struct icx_counters *C)
{
    int header = 0;
    for (size_t i = 0; i < C->n; i++) {
        const struct icx_counter_row *r = &C->rows[i];
        if (!r->nic || (r->tx1 == r->tx0 && r->rx1 == r->rx0))
            continue;
        if (!header++)
            fprintf(out, "\nInfiniBand port counters\n%-10s %12s %12s %10s %10s %9s %10s %9s\n",
                    "NIC", "TX", "RX", "mean GB/s", "peak GB/s", "cap GB/s", "xmit_wait",
                    "discards");
        char a[32], b[32];
        icx_fmt_bytes(a, sizeof(a), (double)(r->tx1 - r->tx0));
        icx_fmt_bytes(b, sizeof(b), (double)(r->rx1 - r->rx0));
        fprintf(out, "%-10s %12s %12s %10.2f %10.2f %9.1f %10llu %9llu\n", r->bus, a, b,
                r->tx_mean_bps / 1e9, r->tx_peak_bps / 1e9, r->capacity_bps / 1e9,
                (unsigned long long)(r->wait1 - r->wait0),
                (unsigned long long)(r->discards1 - r->discards0));
    }
}

static void counters_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_counters *C = A->counters;
    icx_json_arr(j, "ib_counters");
    for (size_t i = 0; i < C->n; i++) {
        const struct icx_counter_row *r = &C->rows[i];
        if (!r->nic)
            continue;
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", r->host);
        icx_json_str(j, "nic", r->bus);
        icx_json_num(j, "window_s", r->t1 - r->t0);
        icx_json_int(j, "tx_bytes", (long long)(r->tx1 - r->tx0));
        icx_json_int(j, "rx_bytes", (long long)(r->rx1 - r->rx0));
        icx_json_num(j, "capacity_bytes_per_s", r->capacity_bps > 0 ? r->capacity_bps : NAN);
        icx_json_num(j, "tx_mean_bytes_per_s", r->tx_mean_bps);
        icx_json_num(j, "tx_peak_bytes_per_s", r->tx_peak_bps);
        icx_json_num(j, "tx_time_above_80pct_s", r->tx_time_above_80);
        icx_json_int(j, "xmit_wait", (long long)(r->wait1 - r->wait0));
        icx_json_int(j, "xmit_discards", (long long)(r->discards1 - r->discards0));
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_arr(j, "nvlink_counters");
    for (size_t i = 0; i < C->n; i++) {
        const struct icx_counter_row *r = &C->rows[i];
        if (r->nic)
            continue;
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", r->host);
        icx_json_str(j, "pci", r->bus);
        icx_json_int(j, "device", r->device);
        icx_json_num(j, "window_s", r->t1 - r->t0);
        icx_json_int(j, "tx_bytes", (long long)(r->tx1 - r->tx0));
        icx_json_int(j, "rx_bytes", (long long)(r->rx1 - r->rx0));
        icx_json_int(j, "tx_explained_bytes", (long long)(r->tx_explained + r->tx_nccl));
        icx_json_int(j, "rx_explained_bytes", (long long)(r->rx_explained + r->rx_nccl));
        icx_json_int(j, "tx_explained_by_nccl_bytes", (long long)r->tx_nccl);
        icx_json_int(j, "rx_explained_by_nccl_bytes", (long long)r->rx_nccl);
        icx_json_int(j, "tx_unexplained_bytes",
                     other_bytes(r->tx1 - r->tx0, r->tx_explained + r->tx_nccl, r->resolution));
        icx_json_int(j, "rx_unexplained_bytes",
                     other_bytes(r->rx1 - r->rx0, r->rx_explained + r->rx_nccl, r->resolution));
        icx_json_int(j, "resolution_bytes", (long long)r->resolution);
        icx_json_num(j, "capacity_bytes_per_s", r->capacity_bps > 0 ? r->capacity_bps : NAN);
        icx_json_num(j, "tx_mean_bytes_per_s", r->tx_mean_bps);
        icx_json_num(j, "tx_peak_bytes_per_s", r->tx_peak_bps);
        icx_json_num(j, "tx_time_above_80pct_s", r->tx_time_above_80);
        icx_json_end(j);
    }
    icx_json_end(j);
}

static void counters_free(struct icx_analysis *A)
{
    if (A->counters)
        free(A->counters->rows);
    free(A->counters);
    A->counters = NULL;
}

static int counters_compute(struct icx_analysis *A)
{
    if (!(A->counters = calloc(1, sizeof(*A->counters)))) {
        fprintf(stderr, "icx-analyze: out of memory computing the counter report\n");
        return -1;
    }
    counters_compute_into(A->t, A->counters);
    counters_over_time(A->t, A->counters);
    return 0;
}

const struct icx_report icx_report_counters = {
    .name = "counters",
    .compute = counters_compute,
    .print = counters_print,
    .json = counters_json,
    .free = counters_free,
};
