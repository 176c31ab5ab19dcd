/* Per-link report: peer-copy traffic per directed GPU pair on each host, GPU-side busy time (union
 * of the timed copies' device intervals), achieved bandwidth, utilization against the link capacity
 * the tracer found in the hardware, and the imbalance across links. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "format.h"
#include "report_links.h"

static int link_cmp(const void *a, const void *b)
{
    const struct icx_link_row *x = a, *y = b;
    int c = strcmp(x->host, y->host);
    if (c)
        return c;
    if (x->src != y->src)
        return icx_cmp_int(x->src, y->src);
    return icx_cmp_int(x->dst, y->dst);
}

static int iv_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

static struct icx_link_row *find_row(struct icx_links *L, const struct icx_proc *p, int src,
                                     int dst)
{
    const char *sb = src >= 0 && src < ICX_RD_MAX_DEV ? p->dev[src].bus : "";
    const char *db = dst >= 0 && dst < ICX_RD_MAX_DEV ? p->dev[dst].bus : "";
    const char *host = p->host ? p->host : "";
    for (size_t i = 0; i < L->n; i++) {
        struct icx_link_row *r = &L->rows[i];
        if (strcmp(r->host, host) != 0)
            continue;
        /* The same physical pair: by PCI address when known, else by ordinal. */
        if (sb[0] && db[0] ? (!strcmp(r->src_bus, sb) && !strcmp(r->dst_bus, db))
                           : (r->src == src && r->dst == dst && !r->src_bus[0]))
            return r;
    }
    struct icx_link_row *n = realloc(L->rows, (L->n + 1) * sizeof(*n));
    if (!n)
        return NULL;
    L->rows = n;
    struct icx_link_row *r = &L->rows[L->n++];
    memset(r, 0, sizeof(*r));
    r->host = host;
    r->src = src;
    r->dst = dst;
    snprintf(r->src_bus, sizeof(r->src_bus), "%s", sb);
    snprintf(r->dst_bus, sizeof(r->dst_bus), "%s", db);
    if (src >= 0 && src < ICX_RD_MAX_DEV)
        snprintf(r->device_name, sizeof(r->device_name), "%s", p->dev[src].name);
    for (size_t k = 0; k < p->nlinks; k++)
        if (p->links[k].src == src && p->links[k].dst == dst) {
            r->kind = p->links[k].kind;
            r->nlinks = p->links[k].nlinks;
            r->flags = p->links[k].flags;
            r->capacity_bps = (double)p->links[k].capacity_bps;
        }
    r->window_lo = 1e300;
    r->window_hi = -1e300;
    return r;
}

/* Device interval [a, b] of a copy of `bytes`, kept as a triple. */
static int add_interval(struct icx_link_row *r, double a, double b, double bytes)
{
    if (r->niv == r->cap_iv) {
        size_t ncap = r->cap_iv ? r->cap_iv * 2 : 64;
        double *n = realloc(r->iv, ncap * 3 * sizeof(double));
        if (!n)
            return -1;
        r->iv = n;
        r->cap_iv = ncap;
    }
    r->iv[3 * r->niv] = a;
    r->iv[3 * r->niv + 1] = b;
    r->iv[3 * r->niv + 2] = bytes;
    r->niv++;
    return 0;
}

static int rate_cmp(const void *a, const void *b)
{
    const double *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Byte-weighted median of the copies' own rates (bytes / device interval).  Unlike bytes / union
 * it is not thrown off by a few stretched intervals: an end event recorded after the host thread
 * was descheduled, with the stream already idle, stretches its copy's interval by the delay. */
static double median_rate(const struct icx_link_row *r)
{
    double *v = malloc(r->niv * 2 * sizeof(double) + 1), total = 0, acc = 0, m = NAN;
    if (!v)
        return NAN;
    for (size_t k = 0; k < r->niv; k++) {
        double d = r->iv[3 * k + 1] - r->iv[3 * k];
        v[2 * k] = d > 0 ? r->iv[3 * k + 2] / d : INFINITY;
        v[2 * k + 1] = r->iv[3 * k + 2];
        total += v[2 * k + 1];
    }
    if (r->niv > 1)
        qsort(v, r->niv, 2 * sizeof(double), rate_cmp);
    for (size_t k = 0; k < r->niv; k++) {
        acc += v[2 * k + 1];
        if (acc >= total / 2) {
            m = v[2 * k];
            break;
        }
    }
    free(v);
    return m;
}

/* Most frequent stack of the copies of process p on link r. */
static void top_stack(struct icx_link_row *r, const struct icx_proc *p, int src, int dst)
{
    for (size_t k = 0; k < p->ncopies; k++) {
        const struct icx_copy *c = &p->copies[k];
        if (!c->stack_id || c->src != src || c->dst != dst || c->result != 0 ||
            (c->flags & ICX_EVF_CAPTURED))
            continue;
        uint64_t n = 0;
        for (size_t m = 0; m < p->ncopies; m++)
            n += p->copies[m].stack_id == c->stack_id && p->copies[m].src == src &&
                 p->copies[m].dst == dst;
        if (n > r->stack_ops) {
            r->stack_ops = n;
            r->stack_id = c->stack_id;
            r->stack_proc = p;
        }
    }
}

static int links_compute_into(const struct icx_trace *t, struct icx_links *L)
{
    memset(L, 0, sizeof(*L));
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->ncopies; k++) {
            const struct icx_copy *c = &p->copies[k];
            struct icx_link_row *r = find_row(L, p, c->src, c->dst);
            if (!r)
                return -1;
            if (p->t_first < r->window_lo)
                r->window_lo = p->t_first;
            if (p->t_last > r->window_hi)
                r->window_hi = p->t_last;
            if (c->result != 0) {
                r->errors++;
                continue;
            }
            if (c->flags & ICX_EVF_CAPTURED) {
                r->captured_ops++;
                r->captured_bytes += c->bytes;
                continue;
            }
            r->ops++;
            r->bytes += c->bytes;
            r->host_time += c->t_exit - c->t_enter;
            if (c->gpu_end > c->gpu_start && c->gpu_start > 0) {
                r->timed_ops++;
                r->timed_bytes += c->bytes;
                if (add_interval(r, c->gpu_start, c->gpu_end, (double)c->bytes))
                    return -1;
            }
        }
    }
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        if (!p->nstacks)
            continue;
        for (size_t k = 0; k < L->n; k++)
            if (!strcmp(L->rows[k].host, p->host ? p->host : ""))
                top_stack(&L->rows[k], p, L->rows[k].src, L->rows[k].dst);
    }
    double sum = 0, sumsq = 0, max = 0;
    for (size_t i = 0; i < L->n; i++) {
        struct icx_link_row *r = &L->rows[i];
        if (r->niv > 1)
            qsort(r->iv, r->niv, 3 * sizeof(double), iv_cmp);
        double busy = 0, cur_a = 0, cur_b = -1;
        for (size_t k = 0; k < r->niv; k++) {
            double a = r->iv[3 * k], b = r->iv[3 * k + 1];
            if (a > cur_b) {
                if (cur_b > cur_a)
                    busy += cur_b - cur_a;
                cur_a = a;
                cur_b = b;
            } else if (b > cur_b) {
                cur_b = b;
            }
        }
        if (cur_b > cur_a)
            busy += cur_b - cur_a;
        r->busy_timed = busy;
        r->busy_bps = busy > 0 ? (double)r->timed_bytes / busy : NAN;
        r->achieved_bps = r->niv ? median_rate(r) : NAN;
        r->busy_est = r->timed_bytes ? busy * (double)r->bytes / (double)r->timed_bytes : NAN;
        r->window = r->window_hi > r->window_lo ? r->window_hi - r->window_lo : NAN;
        r->efficiency = r->capacity_bps > 0 ? r->achieved_bps / r->capacity_bps : NAN;
        r->utilization = r->capacity_bps > 0 && r->window > 0
                             ? (double)r->bytes / r->window / r->capacity_bps
                             : NAN;
        if (r->ops) {
            L->active++;
            sum += (double)r->bytes;
            sumsq += (double)r->bytes * (double)r->bytes;
            if ((double)r->bytes > max)
                max = (double)r->bytes;
        }
    }
    if (L->active) {
        double mean = sum / (double)L->active;
        L->max_over_mean = mean > 0 ? max / mean : NAN;
        double var = sumsq / (double)L->active - mean * mean;
        L->cv = mean > 0 ? sqrt(var > 0 ? var : 0) / mean : NAN;
    } else {
        L->max_over_mean = L->cv = NAN;
    }
    if (L->n > 1)
        qsort(L->rows, L->n, sizeof(*L->rows), link_cmp);
    return 0;
}

static void links_free_rows(struct icx_links *L)
{
    for (size_t i = 0; i < L->n; i++)
        free(L->rows[i].iv);
    free(L->rows);
    memset(L, 0, sizeof(*L));
}

static const char *kind_label(const struct icx_link_row *r, char *buf, size_t len)
{
    if (r->kind == ICX_LINK_NVLINK)
        snprintf(buf, len, "NVLink x%u%s", r->nlinks, (r->flags & ICX_LINKF_NVSWITCH) ? " sw" : "");
    else
        snprintf(buf, len, "%s", icx_link_kind_name(r->kind));
    return buf;
}

static void fmt_gbps(char *buf, size_t len, double bps)
{
    if (isfinite(bps))
        snprintf(buf, len, "%.1f", bps / 1e9);
    else
        snprintf(buf, len, "-");
}

static void fmt_pct(char *buf, size_t len, double x)
{
    if (isfinite(x))
        snprintf(buf, len, "%.1f%%", x * 100);
    else
        snprintf(buf, len, "-");
}

static void links_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_links *L = A->links;
    const char *host = NULL;
    if (L->active == 0) {
        fprintf(out, "\nNo peer copies between GPUs were recorded.\n");
        return;
    }
    for (size_t i = 0; i < L->n; i++) {
        const struct icx_link_row *r = &L->rows[i];
        if (!host || strcmp(host, r->host) != 0) {
            host = r->host;
            fprintf(out, "\nPeer copies per link on host %s%s%s\n", host,
                    r->device_name[0] ? ", " : "", r->device_name);
            fprintf(out, "%-11s %-12s %7s %11s %9s %9s %10s %9s %9s %7s %7s\n", "link", "kind",
                    "ops", "bytes", "host ms", "timed", "gpu ms", "GB/s", "cap GB/s", "effic",
                    "util");
        }
        char name[32], kind[32], bytes[32], ach[16], cap[16], eff[16], util[16], timed[32], gms[32];
        snprintf(name, sizeof(name), "GPU%d->GPU%d", r->src, r->dst);
        icx_fmt_bytes(bytes, sizeof(bytes), (double)r->bytes);
        fmt_gbps(ach, sizeof(ach), r->achieved_bps);
        fmt_gbps(cap, sizeof(cap), r->capacity_bps > 0 ? r->capacity_bps : NAN);
        fmt_pct(eff, sizeof(eff), r->efficiency);
        fmt_pct(util, sizeof(util), r->utilization);
        snprintf(timed, sizeof(timed), "%llu", (unsigned long long)r->timed_ops);
        if (isfinite(r->busy_est))
            snprintf(gms, sizeof(gms), "%s%.3f", r->timed_ops < r->ops ? "~" : "",
                     r->busy_est * 1e3);
        else
            snprintf(gms, sizeof(gms), "-");
        fprintf(out, "%-11s %-12s %7llu %11s %9.3f %9s %10s %9s %9s %7s %7s\n", name,
                kind_label(r, kind, sizeof(kind)), (unsigned long long)r->ops, bytes,
                r->host_time * 1e3, timed, gms, ach, cap, eff, util);
        if (r->errors)
            fprintf(out, "%-11s %llu failed copies (not counted above)\n", "",
                    (unsigned long long)r->errors);
        if (r->captured_ops)
            fprintf(out,
                    "%-11s %llu copies captured into CUDA graphs (not counted above: they run "
                    "at each graph launch)\n",
                    "", (unsigned long long)r->captured_ops);
        const struct icx_stack_def *st =
            r->stack_proc ? icx_stack_find(r->stack_proc, r->stack_id) : NULL;
        for (uint32_t f = 0; st && f < st->depth && f < 3; f++) {
            const char *sym = icx_symbol_find(r->stack_proc, st->pc[f]);
            fprintf(out, "%-11s %s %s\n", "", f ? "   <" : "from", sym ? sym : "?");
        }
    }
    fprintf(out, "\nLink imbalance (bytes across %zu active links): max/mean %.2f, CV %.2f\n",
            L->active, L->max_over_mean, L->cv);
    fprintf(out,
            "  GB/s = byte-weighted median rate of the GPU-timed copies (bytes / device interval);"
            "\n  gpu ms = union of their device intervals, ~ when extrapolated from a sample;\n"
            "  effic = GB/s / capacity; util = bytes / (trace duration x capacity).\n");
}

static void links_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_links *L = A->links;
    icx_json_arr(j, "links");
    for (size_t i = 0; i < L->n; i++) {
        const struct icx_link_row *r = &L->rows[i];
        icx_json_obj(j, NULL);
        icx_json_str(j, "host", r->host);
        icx_json_int(j, "src", r->src);
        icx_json_int(j, "dst", r->dst);
        icx_json_str(j, "src_pci", r->src_bus);
        icx_json_str(j, "dst_pci", r->dst_bus);
        icx_json_str(j, "kind", icx_link_kind_name(r->kind));
        icx_json_int(j, "nvlinks", r->nlinks);
        icx_json_bool(j, "nvswitch", (r->flags & ICX_LINKF_NVSWITCH) != 0);
        icx_json_num(j, "capacity_bytes_per_s", r->capacity_bps > 0 ? r->capacity_bps : NAN);
        icx_json_int(j, "ops", (long long)r->ops);
        icx_json_int(j, "bytes", (long long)r->bytes);
        icx_json_int(j, "failed_ops", (long long)r->errors);
        icx_json_int(j, "graph_captured_ops", (long long)r->captured_ops);
        icx_json_int(j, "graph_captured_bytes", (long long)r->captured_bytes);
        icx_json_num(j, "host_time_s", r->host_time);
        icx_json_int(j, "gpu_timed_ops", (long long)r->timed_ops);
        icx_json_int(j, "gpu_timed_bytes", (long long)r->timed_bytes);
        icx_json_num(j, "gpu_busy_timed_s", r->busy_timed);
        icx_json_num(j, "gpu_busy_s", r->busy_est);
        icx_json_num(j, "achieved_bytes_per_s", r->achieved_bps);
        icx_json_num(j, "busy_bytes_per_s", r->busy_bps);
        icx_json_num(j, "efficiency", r->efficiency);
        icx_json_num(j, "utilization", r->utilization);
        icx_json_num(j, "window_s", r->window);
        const struct icx_stack_def *st =
            r->stack_proc ? icx_stack_find(r->stack_proc, r->stack_id) : NULL;
        if (st) {
            icx_json_int(j, "top_stack_ops", (long long)r->stack_ops);
            icx_json_arr(j, "top_stack");
            for (uint32_t f = 0; f < st->depth; f++) {
                const char *sym = icx_symbol_find(r->stack_proc, st->pc[f]);
                char addr[32];
                snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)st->pc[f]);
                icx_json_str(j, NULL, sym ? sym : addr);
            }
            icx_json_end(j);
        }
        icx_json_end(j);
    }
    icx_json_end(j);
    icx_json_obj(j, "imbalance");
    icx_json_int(j, "active_links", (long long)L->active);
    icx_json_num(j, "max_over_mean", L->max_over_mean);
    icx_json_num(j, "cv", L->cv);
    icx_json_end(j);
}

static int links_compute(struct icx_analysis *A)
{
    if (!(A->links = calloc(1, sizeof(*A->links))) || links_compute_into(A->t, A->links) != 0) {
        fprintf(stderr, "icx-analyze: out of memory computing the link report\n");
        return -1;
    }
    return 0;
}

static void links_free(struct icx_analysis *A)
{
    if (A->links)
        links_free_rows(A->links);
    free(A->links);
    A->links = NULL;
}

const struct icx_report icx_report_links = {
    .name = "links",
    .compute = links_compute,
    .print = links_print,
    .json = links_json,
    .free = links_free,
};
