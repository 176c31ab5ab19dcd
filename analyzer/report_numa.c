/* Placement report: per process, the NUMA nodes of its GPUs, of the threads that drive them (where
 * they were seen running, not only where they were allowed to run) and of its pinned host buffers;
 * host<->device bytes copied from or to a remote node; and numa_misaffinity findings with the
 * command-line change that fixes them. */
#include <stdlib.h>
#include <string.h>

#include "analysis.h"
#include "format.h"

/* report_numa.c: placement of GPUs, GPU-driving threads and pinned buffers per process. */
struct icx_numa_proc {
    const struct icx_proc *proc;
    int gpu_node; /* -2 no GPU; -1 several or unknown */
    char gpu_cpus[256];
    uint64_t thread_samples_local, thread_samples_remote;
    uint64_t hcopy_local, hcopy_remote, hcopy_unknown;
    int remote_buffer_node;
    int thread_finding, memory_finding;
};
struct icx_numa {
    struct icx_numa_proc *procs;
    size_t n;
};

static int dominant_node(const struct icx_rd_thread *t, double *share)
{
    int best = -1;
    for (int n = 0; n < ICX_RD_MAX_NODES; n++)
        if (t->node_samples[n] && (best < 0 || t->node_samples[n] > t->node_samples[best]))
            best = n;
    *share = best >= 0 && t->samples ? (double)t->node_samples[best] / (double)t->samples : 0;
    return best;
}

static const struct icx_host_buffer *find_buffer(const struct icx_proc *p, uint64_t ptr)
{
    const struct icx_host_buffer *hit = NULL;
    for (size_t i = 0; i < p->nhbufs; i++) /* the latest registration of a range wins */
        if (ptr >= p->hbufs[i].ptr && ptr < p->hbufs[i].ptr + p->hbufs[i].bytes)
            hit = &p->hbufs[i];
    return hit;
}

/* Per process: GPU node set, traffic split, and the findings. */
static void numa_compute_into(const struct icx_trace *t, struct icx_numa *N, struct icx_findings *F)
{
    memset(N, 0, sizeof(*N));
    N->procs = calloc(t->nprocs ? t->nprocs : 1, sizeof(*N->procs));
    if (!N->procs)
        return;
    N->n = t->nprocs;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        struct icx_numa_proc *np = &N->procs[i];
        np->proc = p;
        np->gpu_node = -2; /* none yet; -1: GPUs on several or unknown nodes */
        for (int d = 0; d < ICX_RD_MAX_DEV; d++) {
            if (!p->dev[d].present)
                continue;
            int node = p->dev[d].numa;
            np->gpu_node = np->gpu_node == -2 || np->gpu_node == node ? node : -1;
            if (!np->gpu_cpus[0])
                snprintf(np->gpu_cpus, sizeof(np->gpu_cpus), "%s", p->dev[d].local_cpus);
        }
        for (size_t k = 0; k < p->nhcopies; k++) {
            const struct icx_host_copy *c = &p->hcopies[k];
            if (c->result != 0)
                continue;
            const struct icx_host_buffer *b = find_buffer(p, c->host_ptr);
            int dnode = c->device >= 0 && c->device < ICX_RD_MAX_DEV ? p->dev[c->device].numa : -1;
            if (!b || b->node < 0 || dnode < 0)
                np->hcopy_unknown += c->bytes; /* pageable memory, or a node we cannot tell */
            else if (b->node == dnode)
                np->hcopy_local += c->bytes;
            else {
                np->hcopy_remote += c->bytes;
                np->remote_buffer_node = b->node;
            }
        }
        if (np->gpu_node < 0)
            continue; /* no GPU, or GPUs on several nodes: no single node to keep to */
        int g = np->gpu_node;
        char fix[512], evidence[1024];
        snprintf(fix, sizeof(fix), "numactl --cpunodebind=%d --membind=%d -- %s%s%s", g, g,
                 p->cmdline ? p->cmdline : "", np->gpu_cpus[0] ? "   (or: taskset -c " : "",
                 np->gpu_cpus[0] ? np->gpu_cpus : "");
        if (np->gpu_cpus[0])
            strncat(fix, ")", sizeof(fix) - strlen(fix) - 1);
        /* Threads that drive the GPU, where they actually ran. */
        uint64_t off = 0, on = 0;
        size_t o = 0;
        evidence[0] = 0;
        for (size_t k = 0; k < p->nthreads; k++) {
            const struct icx_rd_thread *th = &p->threads[k];
            if (!th->cuda_events || !th->samples)
                continue;
            double share;
            int dn = dominant_node(th, &share);
            on += th->node_samples[g];
            off += th->samples - th->node_samples[g] - th->unknown_samples;
            if (dn != g && dn >= 0 && o < sizeof(evidence) - 200)
                o += (size_t)snprintf(evidence + o, sizeof(evidence) - o,
                                      "%sthread %u (%s) ran %.0f%% of %llu samples on node %d",
                                      o ? "; " : "", th->tid, th->name[0] ? th->name : "?",
                                      share * 100, (unsigned long long)th->samples, dn);
        }
        np->thread_samples_local = on;
        np->thread_samples_remote = off;
        if (off > on) {
            char ev[1400];
            snprintf(ev, sizeof(ev), "GPU on NUMA node %d (local CPUs %s); %s", g,
                     np->gpu_cpus[0] ? np->gpu_cpus : "?", evidence);
            icx_finding_add(F, "numa_misaffinity", p, ev, fix);
            np->thread_finding = 1;
        }
        if (np->hcopy_remote > 0 && np->hcopy_remote * 10 > np->hcopy_local + np->hcopy_remote) {
            char ev[512], a[32], b[32];
            icx_fmt_bytes(a, sizeof(a), (double)np->hcopy_remote);
            icx_fmt_bytes(b, sizeof(b), (double)(np->hcopy_local + np->hcopy_remote));
            snprintf(
                ev, sizeof(ev),
                "GPU on NUMA node %d; %s of %s host<->device copies used pinned buffers on node "
                "%d",
                g, a, b, np->remote_buffer_node);
            icx_finding_add(F, "numa_misaffinity", p, ev, fix);
            np->memory_finding = 1;
        }
    }
}

static void numa_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_numa *N = A->numa;
    int header = 0;
    for (size_t i = 0; i < N->n; i++) {
        const struct icx_numa_proc *np = &N->procs[i];
        const struct icx_proc *p = np->proc;
        if (np->gpu_node == -2)
            continue;
        if (!header++)
            fprintf(out, "\nPlacement (NUMA)\n");
        fprintf(out, "  pid %d", p->pid);
        if (p->rank >= 0)
            fprintf(out, " rank %d", p->rank);
        if (np->gpu_node >= 0)
            fprintf(out, ": GPUs on node %d (CPUs %s)", np->gpu_node,
                    np->gpu_cpus[0] ? np->gpu_cpus : "?");
        else
            fprintf(out, ": GPUs on several or unknown nodes");
        uint64_t total = np->thread_samples_local + np->thread_samples_remote;
        if (total && np->gpu_node >= 0)
            fprintf(out, "; GPU-driving threads on that node %.0f%% of the time",
                    100.0 * (double)np->thread_samples_local / (double)total);
        uint64_t hc = np->hcopy_local + np->hcopy_remote;
        if (hc) {
            char a[32];
            icx_fmt_bytes(a, sizeof(a), (double)np->hcopy_remote);
            fprintf(out, "; host copies from remote-node buffers %s (%.0f%%)", a,
                    100.0 * (double)np->hcopy_remote / (double)hc);
        }
        fprintf(out, "%s\n", np->thread_finding || np->memory_finding ? "  <- misplaced" : "");
    }
}

static void numa_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_numa *N = A->numa;
    icx_json_arr(j, "placement");
    for (size_t i = 0; i < N->n; i++) {
        const struct icx_numa_proc *np = &N->procs[i];
        const struct icx_proc *p = np->proc;
        icx_json_obj(j, NULL);
        icx_json_int(j, "pid", p->pid);
        icx_json_int(j, "rank", p->rank);
        icx_json_str(j, "host", p->host);
        icx_json_int(j, "gpu_numa_node", np->gpu_node < 0 ? -1 : np->gpu_node);
        icx_json_str(j, "gpu_local_cpus", np->gpu_cpus);
        icx_json_arr(j, "threads");
        for (size_t k = 0; k < p->nthreads; k++) {
            const struct icx_rd_thread *th = &p->threads[k];
            if (!th->samples)
                continue;
            icx_json_obj(j, NULL);
            icx_json_int(j, "tid", th->tid);
            icx_json_str(j, "name", th->name);
            icx_json_bool(j, "drives_gpu", th->cuda_events > 0);
            icx_json_str(j, "affinity", th->affinity);
            icx_json_int(j, "samples", (long long)th->samples);
            icx_json_obj(j, "samples_by_node");
            for (int n = 0; n < ICX_RD_MAX_NODES; n++)
                if (th->node_samples[n]) {
                    char key[16];
                    snprintf(key, sizeof(key), "%d", n);
                    icx_json_int(j, key, (long long)th->node_samples[n]);
                }
            icx_json_end(j);
            icx_json_end(j);
        }
        icx_json_end(j);
        /* RDMA: the NICs it opened, where they sit, and where its registered buffers live */
        icx_json_arr(j, "rdma_nics");
        for (int c = 0; c < ICX_RD_MAX_VCTX; c++) {
            if (!p->vctx[c].present)
                continue;
            int node = -1;
            for (int k = 0; k < ICX_RD_MAX_NICS; k++)
                if (p->nics[k].present && !strcmp(p->nics[k].name, p->vctx[c].name))
                    node = p->nics[k].numa;
            icx_json_obj(j, NULL);
            icx_json_str(j, "nic", p->vctx[c].name);
            icx_json_int(j, "numa_node", node);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_obj(j, "rdma_buffer_bytes_by_node");
        for (int n = 0; n < ICX_RD_MAX_NODES; n++)
            if (p->vmr_node_bytes[n]) {
                char key[16];
                snprintf(key, sizeof(key), "%d", n);
                icx_json_int(j, key, (long long)p->vmr_node_bytes[n]);
            }
        icx_json_end(j);
        icx_json_arr(j, "pinned_buffers");
        for (size_t k = 0; k < p->nhbufs; k++) {
            icx_json_obj(j, NULL);
            icx_json_int(j, "bytes", (long long)p->hbufs[k].bytes);
            icx_json_int(j, "numa_node", p->hbufs[k].node);
            icx_json_int(j, "pages_sampled", p->hbufs[k].pages_sampled);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_int(j, "host_copy_bytes_local", (long long)np->hcopy_local);
        icx_json_int(j, "host_copy_bytes_remote", (long long)np->hcopy_remote);
        icx_json_int(j, "host_copy_bytes_unknown", (long long)np->hcopy_unknown);
        icx_json_end(j);
    }
    icx_json_end(j);
}

static void numa_free(struct icx_analysis *A)
{
    if (A->numa)
        free(A->numa->procs);
    free(A->numa);
    A->numa = NULL;
}

static int numa_compute(struct icx_analysis *A)
{
    if (!(A->numa = calloc(1, sizeof(*A->numa)))) {
        fprintf(stderr, "icx-analyze: out of memory computing the placement report\n");
        return -1;
    }
    numa_compute_into(A->t, A->numa, &A->findings);
    return 0;
}

const struct icx_report icx_report_numa = {
    .name = "placement",
    .compute = numa_compute,
    .print = numa_print,
    .json = numa_json,
    .free = numa_free,
};
