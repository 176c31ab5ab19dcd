/* Decoding of where the process ran and what the machine has: NUMA nodes, CPU samples and
 * affinity of threads, pinned buffers' nodes, NICs and their PCIe paths to the GPUs, NVLink and
 * IB port counters (trace_format.h section 8). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"

static char *icx_topo_dup(const char *s)
{
    return strdup(s ? s : "");
}

void icx_decode_topo(struct icx_proc *p, const struct icx_rec *r, size_t size,
                     struct icx_decode_ctx *ctx)
{
    const uint8_t *body = (const uint8_t *)r;
    (void)ctx;
    switch (r->type) {
    case ICX_REC_NUMA_NODE:
        if (size >= sizeof(struct icx_rec_numa_node) && r->aux < ICX_RD_MAX_NODES) {
            free(p->node_cpus[r->aux]);
            p->node_cpus[r->aux] =
                icx_topo_dup(icx_proc_string(p, ((const struct icx_rec_numa_node *)r)->cpus));
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
                snprintf(th->affinity, sizeof(th->affinity), "%s", icx_proc_string(p, x->cpus));
                th->affinity_nodes = x->node_mask;
            }
        }
        break;
    case ICX_REC_NVLINK_COUNTERS:
        if (size >= ICX_NVLINK_COUNTERS_SIZE_1_3 &&
            !icx_grow((void **)&p->csamples, &p->cap_csamples, p->ncsamples,
                      sizeof(*p->csamples))) {
            const struct icx_rec_nvlink_counters *x = (const void *)r;
            struct icx_counter_sample *c = &p->csamples[p->ncsamples++];
            memset(c, 0, sizeof(*c));
            c->t = (double)x->mono_ns / 1e9;
            c->t_read = size >= sizeof(*x) && x->read_end_ns >= x->mono_ns
                            ? (double)x->read_end_ns / 1e9
                            : c->t;
            snprintf(c->bus, sizeof(c->bus), "%s", icx_proc_string(p, x->pci_bus_id));
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
            snprintf(n->name, sizeof(n->name), "%s", icx_proc_string(p, x->name));
            snprintf(n->bus, sizeof(n->bus), "%s", icx_proc_string(p, x->pci_bus_id));
            n->numa = icx_node_or_unknown(x->numa_node);
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
        if (size >= ICX_IB_COUNTERS_SIZE_1_3 && r->aux < ICX_RD_MAX_NICS &&
            !icx_grow((void **)&p->csamples, &p->cap_csamples, p->ncsamples,
                      sizeof(*p->csamples))) {
            const struct icx_rec_ib_counters *x = (const void *)r;
            struct icx_counter_sample *c = &p->csamples[p->ncsamples++];
            memset(c, 0, sizeof(*c));
            c->t = (double)x->mono_ns / 1e9;
            c->t_read = size >= sizeof(*x) && x->read_end_ns >= x->mono_ns
                            ? (double)x->read_end_ns / 1e9
                            : c->t;
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
    default: break;
    }
}
