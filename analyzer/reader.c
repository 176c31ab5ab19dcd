/* Trace reader: zstd frames -> records -> per-process tables; see reader.h for the contract. */
#include "reader.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zstd.h>

#define ZSTD_MAGIC 0xFD2FB528u
#define ZSTD_SKIP_LO 0x184D2A50u
#define ZSTD_SKIP_HI 0x184D2A5Fu
#define MAX_FRAME_CONTENT (256u << 20) /* refuse frames claiming more (decompression bombs) */

const char *icx_record_name(unsigned type)
{
    switch (type) {
#define ICX_RECORD(id, name, cat, str)                                                             \
    case id:                                                                                       \
        return str;
#include "icx/events.def"
#undef ICX_RECORD
    default: return "unknown";
    }
}

const char *icx_api_name(unsigned api)
{
    switch (api) {
#define ICX_API(id, name)                                                                          \
    case id:                                                                                       \
        return #name;
#include "icx/apis.def"
#undef ICX_API
    default: return "unknown";
    }
}

const char *icx_lost_name(unsigned cause)
{
    switch (cause) {
#define ICX_LOST(idx, name, desc)                                                                  \
    case idx:                                                                                      \
        return #name;
#include "icx/lost.def"
#undef ICX_LOST
    default: return NULL;
    }
}

const char *icx_pci_path_name(unsigned path)
{
    static const char *const names[] = {"?", "PIX", "PXB", "PHB", "NODE", "SYS"};
    return path < sizeof(names) / sizeof(names[0]) ? names[path] : "?";
}

const char *icx_link_kind_name(unsigned kind)
{
    return kind == ICX_LINK_NVLINK ? "NVLink" : kind == ICX_LINK_PCIE ? "PCIe" : "unknown";
}

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Grow *arr (element size sz) to hold n+1 elements. */
int icx_grow(void **arr, size_t *cap, size_t n, size_t sz)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, ncap * sz);
    if (!p)
        return -1;
    *arr = p;
    *cap = ncap;
    return 0;
}

static const char *str_of(const struct icx_proc *p, uint32_t id)
{
    return id && id < p->nstrings && p->strings[id] ? p->strings[id] : "";
}

static char *dupstr(const char *s)
{
    return strdup(s ? s : "");
}

/* Decoding state of one process stream within one read. */
struct decoder {
    struct icx_trace *t;
    struct icx_input *in;
    struct icx_proc *cur;
    uint32_t block_tid;
    int64_t prev_ts;
    int in_block;
    size_t last_copy; /* 1-based index of the copy a following STACK_REF belongs to; 0 none */
    uint64_t orphan_records;
};

static struct icx_proc *proc_new(struct decoder *d)
{
    struct icx_trace *t = d->t;
    if (icx_grow((void **)&t->procs, &t->cap_procs, t->nprocs, sizeof(*t->procs)))
        return NULL;
    struct icx_proc *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->path = dupstr(d->in->path);
    p->pid = p->ppid = p->rank = p->local_rank = p->world_size = p->local_world_size = -1;
    p->exit_status = -1;
    for (int i = 0; i < ICX_RD_MAX_DEV; i++)
        p->dev[i].numa = -1;
    t->procs[t->nprocs++] = p;
    d->in->processes++;
    return p;
}

static void set_string(struct icx_proc *p, uint32_t id, const char *s, size_t maxlen)
{
    if (id == 0 || id > 10000000)
        return;
    if (id >= p->nstrings) {
        size_t n = id + 1 > p->nstrings * 2 ? id + 1 : p->nstrings * 2;
        char **ns = realloc(p->strings, n * sizeof(*ns));
        if (!ns)
            return;
        memset(ns + p->nstrings, 0, (n - p->nstrings) * sizeof(*ns));
        p->strings = ns;
        p->nstrings = n;
    }
    free(p->strings[id]);
    p->strings[id] = strndup(s, maxlen);
}

/* One record.  Returns 0, or -1 when the stream must be considered corrupt from here. */
static int decode_record(struct decoder *d, const struct icx_rec *r, char *err, size_t errlen)
{
    const uint8_t *body = (const uint8_t *)r;
    size_t size = r->size;
    if (r->type == ICX_REC_FILE_HEADER) {
        if (size < sizeof(struct icx_file_header)) {
            snprintf(err, errlen, "file header too short (%zu bytes)", size);
            return -1;
        }
        const struct icx_file_header *h = (const void *)r;
        if (h->magic == ICX_MAGIC_SWAPPED) {
            snprintf(err, errlen,
                     "trace written on a big-endian machine: not supported by format 1");
            return -1;
        }
        if (h->magic != ICX_MAGIC) {
            snprintf(err, errlen, "bad magic 0x%08x: not an icxtrace trace", h->magic);
            return -1;
        }
        if (h->oldest_major > ICX_VERSION_MAJOR ||
            (h->oldest_major == ICX_VERSION_MAJOR && h->oldest_minor > ICX_VERSION_MINOR)) {
            snprintf(err, errlen,
                     "trace format %u.%u needs a reader of version %u.%u or newer (this is %u.%u)",
                     h->version_major, h->version_minor, h->oldest_major, h->oldest_minor,
                     ICX_VERSION_MAJOR, ICX_VERSION_MINOR);
            return -1;
        }
        struct icx_proc *p = proc_new(d);
        if (!p) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        p->stream_id = h->stream_id;
        p->features = h->features;
        p->version_major = h->version_major;
        p->version_minor = h->version_minor;
        d->cur = p;
        d->in_block = 0;
        d->last_copy = 0;
        return 0;
    }
    struct icx_proc *p = d->cur;
    if (!p) {
        d->orphan_records++;
        return 0;
    }
    switch (r->type) {
    case ICX_REC_STRING: set_string(p, r->aux, (const char *)(body + 8), size - 8); break;
    case ICX_REC_PROCESS:
        if (size >= sizeof(struct icx_rec_process)) {
            const struct icx_rec_process *x = (const void *)r;
            p->pid = x->pid;
            p->ppid = x->ppid;
            p->rank = x->rank;
            p->local_rank = x->local_rank;
            p->world_size = x->world_size;
            p->local_world_size = x->local_world_size;
            free(p->host);
            free(p->job_id);
            free(p->cmdline);
            free(p->exe);
            p->host = dupstr(str_of(p, x->host));
            p->job_id = dupstr(str_of(p, x->job_id));
            p->cmdline = dupstr(str_of(p, x->cmdline));
            p->exe = dupstr(str_of(p, x->exe));
        }
        break;
    case ICX_REC_CLOCK:
        if (size >= sizeof(struct icx_rec_clock) &&
            !icx_grow((void **)&p->clocks, &p->cap_clocks, p->nclocks, sizeof(*p->clocks))) {
            const struct icx_rec_clock *c = (const void *)r;
            p->clocks[p->nclocks++] = (struct icx_clockpt){c->ticks, c->mono_ns, c->real_ns};
        }
        break;
    case ICX_REC_BLOCK:
        if (size >= sizeof(struct icx_rec_block)) {
            d->block_tid = r->aux;
            d->prev_ts = (int64_t)((const struct icx_rec_block *)r)->base_ticks;
            d->in_block = 1;
        }
        break;
    case ICX_REC_LOST:
        if (size >= sizeof(struct icx_rec_lost)) {
            const struct icx_rec_lost *l = (const void *)r;
            p->events_recorded = l->events_recorded;
            memcpy(p->lost, l->count, sizeof(p->lost));
        }
        break;
    case ICX_REC_DEVICE:
        /* 1.0 wrote 24 bytes; 1.1 appended local_cpus. */
        if (size >= ICX_REC_DEVICE_V10_SIZE && r->aux < ICX_RD_MAX_DEV) {
            const struct icx_rec_device *x = (const void *)r;
            struct icx_rd_device *dv = &p->dev[r->aux];
            dv->present = 1;
            snprintf(dv->name, sizeof(dv->name), "%s", str_of(p, x->name));
            snprintf(dv->bus, sizeof(dv->bus), "%s", str_of(p, x->pci_bus_id));
            dv->numa = x->numa_node;
            if (size >= sizeof(struct icx_rec_device))
                snprintf(dv->local_cpus, sizeof(dv->local_cpus), "%s", str_of(p, x->local_cpus));
        }
        break;
    case ICX_REC_THREAD:
        if (size >= sizeof(struct icx_rec_thread)) {
            struct icx_rd_thread *th = icx_thread_get(p, r->aux);
            if (th)
                snprintf(th->name, sizeof(th->name), "%s",
                         str_of(p, ((const struct icx_rec_thread *)r)->name));
        }
        break;
    case ICX_REC_NUMA_NODE:
        if (size >= sizeof(struct icx_rec_numa_node) && r->aux < ICX_RD_MAX_NODES) {
            free(p->node_cpus[r->aux]);
            p->node_cpus[r->aux] = dupstr(str_of(p, ((const struct icx_rec_numa_node *)r)->cpus));
        }
        break;
    case ICX_REC_CPU_SAMPLES:
        if (size >= sizeof(struct icx_rec_cpu_samples) &&
            r->aux <= (size - sizeof(struct icx_rec_cpu_samples)) / sizeof(struct icx_cpu_sample)) {
            const struct icx_cpu_sample *cs =
                (const void *)(body + sizeof(struct icx_rec_cpu_samples));
            p->cpu_sample_rounds++;
            for (uint32_t k = 0; k < r->aux; k++) {
                struct icx_rd_thread *th = icx_thread_get(p, cs[k].tid);
                if (!th)
                    break;
                th->samples++;
                if (cs[k].node >= 0 && cs[k].node < ICX_RD_MAX_NODES)
                    th->node_samples[cs[k].node]++;
                else
                    th->unknown_samples++;
            }
        }
        break;
    case ICX_REC_THREAD_AFFINITY:
        if (size >= sizeof(struct icx_rec_thread_affinity)) {
            const struct icx_rec_thread_affinity *x = (const void *)r;
            struct icx_rd_thread *th = icx_thread_get(p, r->aux);
            if (th) {
                snprintf(th->affinity, sizeof(th->affinity), "%s", str_of(p, x->cpus));
                th->affinity_nodes = x->node_mask;
            }
        }
        break;
    case ICX_REC_NVLINK_COUNTERS:
        if (size >= sizeof(struct icx_rec_nvlink_counters) &&
            !icx_grow((void **)&p->csamples, &p->cap_csamples, p->ncsamples, sizeof(*p->csamples))) {
            const struct icx_rec_nvlink_counters *x = (const void *)r;
            struct icx_counter_sample *c = &p->csamples[p->ncsamples++];
            memset(c, 0, sizeof(*c));
            c->t = (double)x->mono_ns / 1e9;
            snprintf(c->bus, sizeof(c->bus), "%s", str_of(p, x->pci_bus_id));
            c->tx = x->tx_bytes;
            c->rx = x->rx_bytes;
            c->links = x->links;
        }
        break;
    case ICX_REC_NIC:
        if (size >= sizeof(struct icx_rec_nic) && r->aux < ICX_RD_MAX_NICS) {
            const struct icx_rec_nic *x = (const void *)r;
            struct icx_rd_nic *n = &p->nics[r->aux];
            n->present = 1;
            snprintf(n->name, sizeof(n->name), "%s", str_of(p, x->name));
            snprintf(n->bus, sizeof(n->bus), "%s", str_of(p, x->pci_bus_id));
            n->numa = x->numa_node;
            n->link_layer = x->link_layer;
            n->active = x->active;
            n->rate_mbps = x->rate_mbps;
        }
        break;
    case ICX_REC_PCI_PATH:
        if (size >= sizeof(struct icx_rec_pci_path)) {
            const struct icx_rec_pci_path *x = (const void *)r;
            if (x->nic >= 0 && x->nic < ICX_RD_MAX_NICS && x->device >= 0 &&
                x->device < ICX_RD_MAX_DEV)
                p->nics[x->nic].path[x->device] = r->aux;
        }
        break;
    case ICX_REC_IB_COUNTERS:
        if (size >= sizeof(struct icx_rec_ib_counters) && r->aux < ICX_RD_MAX_NICS &&
            !icx_grow((void **)&p->csamples, &p->cap_csamples, p->ncsamples, sizeof(*p->csamples))) {
            const struct icx_rec_ib_counters *x = (const void *)r;
            struct icx_counter_sample *c = &p->csamples[p->ncsamples++];
            memset(c, 0, sizeof(*c));
            c->t = (double)x->mono_ns / 1e9;
            c->nic = 1;
            snprintf(c->bus, sizeof(c->bus), "%s", p->nics[r->aux].name);
            c->rate_mbps = p->nics[r->aux].rate_mbps;
            c->tx = x->tx_bytes;
            c->rx = x->rx_bytes;
            c->xmit_wait = x->xmit_wait;
            c->discards = x->xmit_discards;
        }
        break;
    case ICX_REC_HOST_NUMA:
        if (size >= sizeof(struct icx_rec_host_numa) &&
            !icx_grow((void **)&p->hbufs, &p->cap_hbufs, p->nhbufs, sizeof(*p->hbufs))) {
            const struct icx_rec_host_numa *x = (const void *)r;
            p->hbufs[p->nhbufs++] =
                (struct icx_host_buffer){x->ptr, x->bytes, x->node, x->pages_sampled};
        }
        break;
    case ICX_REC_LINK:
        if (size >= sizeof(struct icx_rec_link) &&
            !icx_grow((void **)&p->links, &p->cap_links, p->nlinks, sizeof(*p->links))) {
            const struct icx_rec_link *x = (const void *)r;
            p->links[p->nlinks++] = (struct icx_rd_link){x->src_dev, x->dst_dev, r->aux,
                                                         x->nlinks,  x->flags,   x->capacity_bps};
        }
        break;
    case ICX_REC_NOTE:
        if (size >= sizeof(struct icx_rec_note)) {
            const struct icx_rec_note *x = (const void *)r;
            char **nn = realloc(p->notes, (p->nnotes + 1) * sizeof(*nn));
            int *ns = nn ? realloc(p->note_severity, (p->nnotes + 1) * sizeof(*ns)) : NULL;
            if (nn)
                p->notes = nn;
            if (ns) {
                p->note_severity = ns;
                p->notes[p->nnotes] = dupstr(str_of(p, x->text));
                p->note_severity[p->nnotes++] = (int)r->aux;
            }
        }
        break;
    case ICX_REC_END:
        if (size >= sizeof(struct icx_rec_end)) {
            p->ended = 1;
            p->exit_status = ((const struct icx_rec_end *)r)->exit_status;
        }
        break;
    case ICX_REC_STACK:
        if (size >= sizeof(struct icx_rec_stack)) {
            const struct icx_rec_stack *x = (const void *)r;
            uint32_t depth = x->depth;
            if (depth > (size - sizeof(*x)) / 8 ||
                icx_grow((void **)&p->stacks, &p->cap_stacks, p->nstacks, sizeof(*p->stacks)))
                break;
            uint64_t *pc = malloc(depth ? depth * sizeof(*pc) : 1);
            if (!pc)
                break;
            memcpy(pc, x + 1, depth * sizeof(*pc));
            p->stacks[p->nstacks++] = (struct icx_stack_def){r->aux, depth, pc};
        }
        break;
    case ICX_REC_STACK_REF:
        if (d->last_copy && d->last_copy <= p->ncopies)
            p->copies[d->last_copy - 1].stack_id = r->aux;
        break;
    case ICX_REC_SYMBOL:
        if (size >= sizeof(struct icx_rec_symbol) &&
            !icx_grow((void **)&p->symbols, &p->cap_symbols, p->nsymbols, sizeof(*p->symbols))) {
            const struct icx_rec_symbol *x = (const void *)r;
            p->symbols[p->nsymbols++] = (struct icx_symbol){x->addr, dupstr(str_of(p, x->text))};
        }
        break;
    case ICX_REC_GPU_SPAN:
        if (size >= sizeof(struct icx_rec_gpu_span) &&
            !icx_grow((void **)&p->spans, &p->cap_spans, p->nspans, sizeof(*p->spans))) {
            const struct icx_rec_gpu_span *x = (const void *)r;
            p->spans[p->nspans++] = (struct icx_span){x->copy_id, x->flags, x->start_ns, x->end_ns};
        }
        break;
    case ICX_REC_CUDA_COPY:
    case ICX_REC_CUDA_ALLOC:
    case ICX_REC_CUDA_FREE:
    case ICX_REC_CUDA_HOST_COPY:
    case ICX_REC_HOST_ALLOC:
    case ICX_REC_HOST_FREE:
    case ICX_REC_VERBS_QP:
    case ICX_REC_VERBS_MR:
    case ICX_REC_VERBS_WR:
    case ICX_REC_VERBS_WC:
    case ICX_REC_VERBS_CQ:
    case ICX_REC_NCCL_COMM:
    case ICX_REC_NCCL_CALL: {
        if (!d->in_block) {
            snprintf(err, errlen, "%s record outside a block", icx_record_name(r->type));
            return -1;
        }
        const struct icx_rec_event *e = (const void *)r;
        if (size < sizeof(*e))
            return -1;
        int64_t ts = d->prev_ts + e->ts;
        d->prev_ts = ts;
        d->last_copy = 0;
        if (r->type >= ICX_REC_VERBS_QP && r->type <= ICX_REC_VERBS_CQ) {
            icx_read_verbs(p, r, size, ts, str_of);
            break;
        }
        if (r->type == ICX_REC_NCCL_COMM || r->type == ICX_REC_NCCL_CALL) {
            icx_read_nccl(p, r, size, ts, d->block_tid);
            break;
        }
        struct icx_rd_thread *th = icx_thread_get(p, d->block_tid);
        if (th)
            th->cuda_events++;
        if (r->type == ICX_REC_CUDA_HOST_COPY) {
            if (size >= sizeof(struct icx_rec_cuda_host_copy) &&
                !icx_grow((void **)&p->hcopies, &p->cap_hcopies, p->nhcopies, sizeof(*p->hcopies))) {
                const struct icx_rec_cuda_host_copy *h = (const void *)r;
                p->hcopies[p->nhcopies++] =
                    (struct icx_host_copy){h->host_ptr, h->bytes, h->device, h->result,
                                           ((r->aux >> ICX_EVF_SHIFT) & ICX_EVF_D2H) != 0};
            }
        } else if (r->type == ICX_REC_HOST_ALLOC || r->type == ICX_REC_HOST_FREE) {
            /* their NUMA placement comes in HOST_NUMA records */
        } else if (r->type == ICX_REC_CUDA_ALLOC) {
            p->nallocs++;
            const struct icx_rec_cuda_alloc *a = (const void *)r;
            if (size >= sizeof(*a) && a->result == 0 && a->device >= 0 && a->device < ICX_RD_MAX_DEV)
                p->alloc_bytes[a->device] += a->bytes;
        } else if (r->type == ICX_REC_CUDA_FREE) {
            p->nfrees++;
        } else if (size >= sizeof(struct icx_rec_cuda_copy) &&
                   !icx_grow((void **)&p->copies, &p->cap_copies, p->ncopies, sizeof(*p->copies))) {
            const struct icx_rec_cuda_copy *c = (const void *)r;
            struct icx_copy *o = &p->copies[p->ncopies++];
            memset(o, 0, sizeof(*o));
            o->api = r->aux & 0xffff;
            o->flags = r->aux >> ICX_EVF_SHIFT;
            o->tid = d->block_tid;
            o->src = c->src_dev;
            o->dst = c->dst_dev;
            o->result = c->result;
            o->copy_id = c->copy_id;
            o->bytes = c->bytes;
            o->stream = c->stream;
            o->ts = ts;
            o->dur = (int64_t)e->dur;
            d->last_copy = p->ncopies;
        }
        break;
    }
    case ICX_REC_VERBS_DEVICE:
    case ICX_REC_VERBS_PORT:
    case ICX_REC_VERBS_AGG: icx_read_verbs(p, r, size, 0, str_of); break;
    case ICX_REC_NCCL_DUMP:
        if (size >= ICX_NCCL_DUMP_SIZE_1_2 && r->aux >= 1 && r->aux <= 3)
            icx_read_nccl_dump(p, r, size, str_of(p, ((const struct icx_rec_nccl_dump *)r)->text));
        break;
    default: break; /* unknown or not needed: skipped by size */
    }
    return 0;
}

static int decode_frame(struct decoder *d, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    size_t off = 0;
    d->in_block = 0; /* blocks never span frames, nor does an event's STACK_REF */
    d->last_copy = 0;
    while (off < len) {
        if (len - off < sizeof(struct icx_rec)) {
            snprintf(err, errlen, "record header cut at frame offset %zu", off);
            return -1;
        }
        const struct icx_rec *r = (const struct icx_rec *)(buf + off);
        if (r->size < sizeof(*r) || (r->size & 7) || r->size > len - off) {
            snprintf(err, errlen, "bad record size %u at frame offset %zu", r->size, off);
            return -1;
        }
        if (decode_record(d, r, err, errlen) != 0)
            return -1;
        off += r->size;
    }
    return 0;
}

/* Least-squares fit ticks -> monotonic ns; then convert every time of the process. */
static void finish_proc(struct icx_proc *p)
{
    if (!(p->features & ICX_FEAT_TSC) || p->nclocks < 2) {
        p->slope = 1.0;
        p->intercept = 0.0;
        /* TSC with a single pair (a stream cut before its first flush, so with no events):
         * anchor at that pair; the rate is unknown and nothing needs it. */
        if ((p->features & ICX_FEAT_TSC) && p->nclocks == 1)
            p->intercept = (double)p->clocks[0].mono_ns - (double)p->clocks[0].ticks;
    } else {
        double n = (double)p->nclocks, mx = 0, my = 0;
        double x0 = (double)p->clocks[0].ticks, y0 = (double)p->clocks[0].mono_ns;
        for (size_t i = 0; i < p->nclocks; i++) {
            mx += (double)p->clocks[i].ticks - x0;
            my += (double)p->clocks[i].mono_ns - y0;
        }
        mx /= n;
        my /= n;
        double sxx = 0, sxy = 0;
        for (size_t i = 0; i < p->nclocks; i++) {
            double dx = (double)p->clocks[i].ticks - x0 - mx;
            double dy = (double)p->clocks[i].mono_ns - y0 - my;
            sxx += dx * dx;
            sxy += dx * dy;
        }
        p->slope = sxx > 0 ? sxy / sxx : 1.0;
        p->intercept = y0 + my - p->slope * (x0 + mx);
    }
    double lo = 1e300, hi = -1e300;
    for (size_t i = 0; i < p->nclocks; i++) {
        double s = (double)p->clocks[i].mono_ns / 1e9;
        lo = s < lo ? s : lo;
        hi = s > hi ? s : hi;
    }
    for (size_t i = 0; i < p->ncopies; i++) {
        struct icx_copy *c = &p->copies[i];
        c->t_enter = (p->slope * (double)c->ts + p->intercept) / 1e9;
        c->t_exit = c->t_enter + p->slope * (double)c->dur / 1e9;
        lo = c->t_enter < lo ? c->t_enter : lo;
        hi = c->t_exit > hi ? c->t_exit : hi;
    }
    p->t_first = lo <= hi ? lo : 0;
    p->t_last = lo <= hi ? hi : 0;
    icx_verbs_finish(p);
}

static int symbol_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct icx_symbol *)a)->addr, y = ((const struct icx_symbol *)b)->addr;
    return x < y ? -1 : x > y;
}

const char *icx_symbol_find(const struct icx_proc *p, uint64_t addr)
{
    size_t lo = 0, hi = p->nsymbols;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->symbols[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < p->nsymbols && p->symbols[lo].addr == addr ? p->symbols[lo].text : NULL;
}

struct icx_rd_thread *icx_thread_get(struct icx_proc *p, uint32_t tid)
{
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    if (icx_grow((void **)&p->threads, &p->cap_threads, p->nthreads, sizeof(*p->threads)))
        return NULL;
    struct icx_rd_thread *t = &p->threads[p->nthreads++];
    memset(t, 0, sizeof(*t));
    t->tid = tid;
    return t;
}

const struct icx_stack_def *icx_stack_find(const struct icx_proc *p, uint32_t id)
{
    for (size_t i = 0; i < p->nstacks; i++)
        if (p->stacks[i].id == id)
            return &p->stacks[i];
    return NULL;
}

static int span_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct icx_span *)a)->copy_id, y = ((const struct icx_span *)b)->copy_id;
    return x < y ? -1 : x > y;
}

/* The first span with this id (spans sorted by id), or NULL; more may follow with the same id. */
const struct icx_span *icx_span_find(const struct icx_proc *p, uint32_t id)
{
    size_t lo = 0, hi = p->nspans;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (p->spans[mid].copy_id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return id && lo < p->nspans && p->spans[lo].copy_id == id ? &p->spans[lo] : NULL;
}

static void match_spans(struct icx_proc *p)
{
    if (p->nspans > 1)
        qsort(p->spans, p->nspans, sizeof(*p->spans), span_cmp);
    for (size_t i = 0; i < p->ncopies; i++) {
        struct icx_copy *c = &p->copies[i];
        const struct icx_span *s = icx_span_find(p, c->copy_id);
        if (s && !s->flags && s->end_ns >= s->start_ns) {
            c->gpu_start = (double)s->start_ns / 1e9;
            c->gpu_end = (double)s->end_ns / 1e9;
        }
    }
}

int icx_read_buffer(struct icx_trace *t, const char *name, const uint8_t *buf, size_t len,
                    char *err, size_t errlen)
{
    if (icx_grow((void **)&t->inputs, &t->cap_inputs, t->ninputs, sizeof(*t->inputs))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct icx_input *in = &t->inputs[t->ninputs++];
    memset(in, 0, sizeof(*in));
    in->path = dupstr(name);
    in->size = len;
    size_t first_proc = t->nprocs;
    if (len < 4 || (rd32(buf) != ZSTD_MAGIC && (rd32(buf) & 0xFFFFFFF0u) != ZSTD_SKIP_LO)) {
        snprintf(err, errlen, "offset 0: not an icxtrace trace (no zstd frame)");
        return -1;
    }
    struct decoder d = {.t = t, .in = in};
    ZSTD_DCtx *dctx = ZSTD_createDCtx();
    uint8_t *out = NULL;
    size_t outcap = 0, off = 0;
    int fatal = 0;
    char ferr[256];
    while (off < len && !fatal) {
        uint32_t magic = len - off >= 4 ? rd32(buf + off) : 0;
        if (magic >= ZSTD_SKIP_LO && magic <= ZSTD_SKIP_HI && len - off >= 8) {
            uint64_t sz = 8 + (uint64_t)rd32(buf + off + 4);
            if (sz > len - off) {
                in->bytes_skipped += len - off;
                break;
            }
            off += sz;
            continue;
        }
        size_t fsz =
            magic == ZSTD_MAGIC ? ZSTD_findFrameCompressedSize(buf + off, len - off) : (size_t)-1;
        unsigned long long csize =
            ZSTD_isError(fsz) ? ZSTD_CONTENTSIZE_ERROR : ZSTD_getFrameContentSize(buf + off, fsz);
        if (ZSTD_isError(fsz) || csize == ZSTD_CONTENTSIZE_ERROR ||
            csize == ZSTD_CONTENTSIZE_UNKNOWN || csize > MAX_FRAME_CONTENT) {
            /* Truncated or damaged: resynchronize on the next frame magic. */
            size_t next = off + 1;
            while (next + 4 <= len && rd32(buf + next) != ZSTD_MAGIC)
                next++;
            if (next + 4 > len)
                next = len;
            in->frames_bad++;
            in->bytes_skipped += next - off;
            fprintf(stderr,
                    "icx-analyze: %s: offset %zu: damaged or truncated frame, %zu bytes "
                    "skipped\n",
                    name, off, next - off);
            off = next;
            continue;
        }
        if (csize > outcap) {
            uint8_t *n = realloc(out, csize ? csize : 1);
            if (!n) {
                snprintf(err, errlen, "offset %zu: out of memory", off);
                fatal = 1;
                break;
            }
            out = n;
            outcap = csize;
        }
        size_t got = ZSTD_decompressDCtx(dctx, out, outcap, buf + off, fsz);
        if (ZSTD_isError(got) || got != csize) {
            in->frames_bad++;
            in->bytes_skipped += fsz;
            fprintf(stderr,
                    "icx-analyze: %s: offset %zu: frame fails to decompress (%s); skipped\n", name,
                    off, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size mismatch");
            off += fsz;
            continue;
        }
        in->frames++;
        if (in->frames == 1 && !d.cur &&
            (got < sizeof(struct icx_rec) ||
             ((const struct icx_rec *)out)->type != ICX_REC_FILE_HEADER)) {
            snprintf(err, errlen,
                     "offset %zu: zstd data without an icxtrace header: not an icxtrace "
                     "trace",
                     off);
            fatal = 1;
            break;
        }
        if (decode_frame(&d, out, got, ferr, sizeof(ferr)) != 0) {
            if (in->frames == 1 && !d.cur) {
                snprintf(err, errlen, "offset %zu: %s", off, ferr);
                fatal = 1;
                break;
            }
            in->frames_bad++;
            fprintf(stderr, "icx-analyze: %s: offset %zu: %s; rest of frame skipped\n", name, off,
                    ferr);
        }
        off += fsz;
    }
    ZSTD_freeDCtx(dctx);
    free(out);
    if (!fatal && t->nprocs == first_proc) {
        snprintf(err, errlen, "offset 0: zstd data without an icxtrace header: not a trace");
        fatal = 1;
    }
    if (d.orphan_records)
        fprintf(stderr, "icx-analyze: %s: %llu records before any header were skipped\n", name,
                (unsigned long long)d.orphan_records);
    for (size_t i = first_proc; i < t->nprocs; i++) {
        finish_proc(t->procs[i]);
        match_spans(t->procs[i]);
        icx_nccl_finish(t->procs[i]); /* after the spans are sorted */
        if (t->procs[i]->nsymbols > 1)
            qsort(t->procs[i]->symbols, t->procs[i]->nsymbols, sizeof(struct icx_symbol),
                  symbol_cmp);
    }
    return fatal ? -1 : 0;
}

int icx_read_file(struct icx_trace *t, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open: %s", strerror(errno));
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1 << 20;
            uint8_t *n = realloc(buf, ncap);
            if (!n) {
                free(buf);
                fclose(f);
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            buf = n;
            cap = ncap;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "read error");
        return -1;
    }
    int rc = icx_read_buffer(t, path, buf, len, err, errlen);
    free(buf);
    return rc;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int icx_read_path(struct icx_trace *t, const char *path)
{
    struct stat st;
    char err[512];
    if (stat(path, &st) != 0) {
        fprintf(stderr, "icx-analyze: %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (icx_read_file(t, path, err, sizeof(err)) != 0) {
            fprintf(stderr, "icx-analyze: %s: %s\n", path, err);
            return 1;
        }
        return 0;
    }
    DIR *dir = opendir(path);
    if (!dir) {
        fprintf(stderr, "icx-analyze: %s: %s\n", path, strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        size_t l = strlen(e->d_name);
        if (l < 8 || strcmp(e->d_name + l - 8, ".icx.zst") != 0)
            continue;
        if (icx_grow((void **)&names, &cap, n, sizeof(*names)))
            break;
        size_t plen = strlen(path) + l + 2;
        names[n] = malloc(plen);
        if (names[n])
            snprintf(names[n++], plen, "%s/%s", path, e->d_name);
    }
    closedir(dir);
    if (n > 1)
        qsort(names, n, sizeof(*names), name_cmp);
    int failed = 0;
    if (n == 0) {
        fprintf(stderr, "icx-analyze: %s: no *.icx.zst traces in this directory\n", path);
        failed = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (icx_read_file(t, names[i], err, sizeof(err)) != 0) {
            fprintf(stderr, "icx-analyze: %s: %s\n", names[i], err);
            failed++;
        }
        free(names[i]);
    }
    free(names);
    return failed;
}

void icx_trace_free(struct icx_trace *t)
{
    for (size_t i = 0; i < t->nprocs; i++) {
        struct icx_proc *p = t->procs[i];
        for (size_t k = 0; k < p->nstrings; k++)
            free(p->strings[k]);
        for (size_t k = 0; k < p->nnotes; k++)
            free(p->notes[k]);
        for (size_t k = 0; k < p->nstacks; k++)
            free(p->stacks[k].pc);
        for (size_t k = 0; k < p->nsymbols; k++)
            free(p->symbols[k].text);
        free(p->stacks);
        free(p->symbols);
        for (int k = 0; k < ICX_RD_MAX_NODES; k++)
            free(p->node_cpus[k]);
        free(p->threads);
        free(p->hbufs);
        free(p->hcopies);
        free(p->csamples);
        free(p->vqps);
        free(p->vtraffic);
        free(p->vwc_errs);
        free(p->ncomms);
        free(p->ncalls);
        for (size_t k = 0; k < p->ndumps; k++)
            free(p->dumps[k].text);
        free(p->dumps);
        free(p->strings);
        free(p->notes);
        free(p->note_severity);
        free(p->clocks);
        free(p->copies);
        free(p->spans);
        free(p->links);
        free(p->path);
        free(p->host);
        free(p->job_id);
        free(p->cmdline);
        free(p->exe);
        free(p);
    }
    for (size_t i = 0; i < t->ninputs; i++)
        free(t->inputs[i].path);
    free(t->procs);
    free(t->inputs);
    memset(t, 0, sizeof(*t));
}
