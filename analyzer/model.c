/* The model's small API (model.h): lookups, names, growth, freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

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

const char *icx_proc_string(const struct icx_proc *p, uint32_t id)
{
    return id && id < p->nstrings && p->strings[id] ? p->strings[id] : "";
}

double icx_proc_seconds(const struct icx_proc *p, int64_t ticks)
{
    return (p->slope * (double)ticks + p->intercept) / 1e9;
}

struct icx_proc *icx_proc_new(struct icx_trace *t, const char *path)
{
    if (icx_grow((void **)&t->procs, &t->cap_procs, t->nprocs, sizeof(*t->procs)))
        return NULL;
    struct icx_proc *p = calloc(1, sizeof(*p));
    if (!p || !(p->path = strdup(path ? path : ""))) {
        free(p);
        return NULL;
    }
    p->pid = p->ppid = p->rank = p->local_rank = p->world_size = p->local_world_size = -1;
    p->exit_status = -1;
    for (int i = 0; i < ICX_RD_MAX_DEV; i++)
        p->dev[i].numa = -1;
    t->procs[t->nprocs++] = p;
    return p;
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

int icx_stack_text(const struct icx_proc *p, uint32_t id, unsigned frames, char *buf, size_t len)
{
    const struct icx_stack_def *st = id ? icx_stack_find(p, id) : NULL;
    size_t used = 0;
    buf[0] = 0;
    for (uint32_t k = 0; st && k < st->depth && k < frames && used < len; k++) {
        const char *sym = icx_symbol_find(p, st->pc[k]);
        int w = sym ? snprintf(buf + used, len - used, "%s%s", k ? " <- " : "", sym)
                    : snprintf(buf + used, len - used, "%s0x%llx", k ? " <- " : "",
                               (unsigned long long)st->pc[k]);
        used += w > 0 ? (size_t)w : 0;
    }
    return st != NULL;
}

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

const char *icx_nccl_dump_for(const struct icx_proc *p, int kind, uint64_t comm_id)
{
    const char *any = NULL;
    for (size_t i = p->ndumps; i-- > 0;)
        if (p->dumps[i].kind == kind && p->dumps[i].text) {
            if (p->dumps[i].comm_id == comm_id)
                return p->dumps[i].text;
            if (!p->dumps[i].comm_id && !any)
                any = p->dumps[i].text;
        }
    return any;
}

const char *icx_verbs_opcode_name(unsigned kind, unsigned op)
{
    if (kind == ICX_VK_RECV || kind == ICX_VK_SRQ_RECV)
        return "RECV_POSTED";
    if (kind == ICX_VK_COMPLETION) {
        switch (op) {
        case 0: return "WC_SEND";
        case 1: return "WC_RDMA_WRITE";
        case 2: return "WC_RDMA_READ";
        case 3: return "WC_COMP_SWAP";
        case 4: return "WC_FETCH_ADD";
        case 128: return "WC_RECV";
        case 129: return "WC_RECV_RDMA_WITH_IMM";
        default: return "WC_OTHER";
        }
    }
    switch (op) {
    case 0: return "RDMA_WRITE";
    case 1: return "RDMA_WRITE_WITH_IMM";
    case 2: return "SEND";
    case 3: return "SEND_WITH_IMM";
    case 4: return "RDMA_READ";
    case 5: return "ATOMIC_CMP_AND_SWP";
    case 6: return "ATOMIC_FETCH_AND_ADD";
    case 9: return "SEND_WITH_INV";
    default: return "OTHER";
    }
}

const char *icx_wc_status_name(unsigned s)
{
    static const char *const names[] = {"SUCCESS",
                                        "LOC_LEN_ERR",
                                        "LOC_QP_OP_ERR",
                                        "LOC_EEC_OP_ERR",
                                        "LOC_PROT_ERR",
                                        "WR_FLUSH_ERR",
                                        "MW_BIND_ERR",
                                        "BAD_RESP_ERR",
                                        "LOC_ACCESS_ERR",
                                        "REM_INV_REQ_ERR",
                                        "REM_ACCESS_ERR",
                                        "REM_OP_ERR",
                                        "RETRY_EXC_ERR",
                                        "RNR_RETRY_EXC_ERR",
                                        "LOC_RDD_VIOL_ERR",
                                        "REM_INV_RD_REQ_ERR",
                                        "REM_ABORT_ERR",
                                        "INV_EECN_ERR",
                                        "INV_EEC_STATE_ERR",
                                        "FATAL_ERR",
                                        "RESP_TIMEOUT_ERR",
                                        "GENERAL_ERR",
                                        "TM_ERR",
                                        "TM_RNDV_INCOMPLETE"};
    return s < sizeof(names) / sizeof(names[0]) ? names[s] : "UNKNOWN";
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
        free(p->pcomms);
        free(p->pcolls);
        free(p->pkchs);
        free(p->pproxies);
        for (size_t k = 0; k < p->ndumps; k++)
            free(p->dumps[k].text);
        free(p->dumps);
        for (size_t k = 0; k < p->nhdumps; k++)
            free(p->hdumps[k].py);
        free(p->hdumps);
        free(p->tstates);
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
