/* Rails: which NICs of a host the job's GPUs use or should use, and the findings judged
 * against them (nic_imbalance, nic_degraded, rail_misalignment; docs/FINDINGS.md). */
#include <string.h>

#include "verbs_model.h"

int icx_verbs_primary_gpu(const struct icx_proc *p)
{
    for (size_t k = 0; k < p->nncomms; k++)
        if (p->ncomms[k].device >= 0 && p->ncomms[k].device < ICX_RD_MAX_DEV)
            return p->ncomms[k].device;
    int best = -1;
    for (int d = 0; d < ICX_RD_MAX_DEV; d++)
        if (p->alloc_bytes[d] && (best < 0 || p->alloc_bytes[d] > p->alloc_bytes[best]))
            best = d;
    return best;
}

/* Rails: a process's RDMA traffic should leave through the NIC closest to its GPU (PCIe path
 * class from the topology snapshot, nvidia-smi's PIX < PXB < PHB < NODE < SYS).  Traffic through a
 * NIC farther than the best one the host has for that GPU crosses the CPU or the socket link. */
static void rail_alignment(const struct icx_verbs *V, const struct icx_trace *t,
                           struct icx_findings *F)
{
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        int g = icx_verbs_primary_gpu(p);
        if (g < 0)
            continue;
        unsigned best = 0;
        int best_nic = -1;
        for (int k = 0; k < ICX_RD_MAX_NICS; k++)
            if (p->nics[k].present && p->nics[k].path[g] && (!best || p->nics[k].path[g] < best)) {
                best = p->nics[k].path[g];
                best_nic = k;
            }
        if (!best)
            continue;
        for (size_t q = 0; q < V->nqps; q++) {
            const struct vqp_row *r = &V->qps[q];
            if (r->p != p || !(r->out_bytes + r->in_read_bytes) || r->ctx >= ICX_RD_MAX_VCTX)
                continue;
            const char *name = p->vctx[r->ctx].name;
            int k;
            for (k = 0; k < ICX_RD_MAX_NICS; k++)
                if (p->nics[k].present && !strcmp(p->nics[k].name, name))
                    break;
            if (k == ICX_RD_MAX_NICS || !p->nics[k].path[g] || p->nics[k].path[g] <= best)
                continue;
            uint64_t bytes = 0;
            for (size_t x = 0; x < V->nqps; x++)
                if (V->qps[x].p == p && V->qps[x].ctx == r->ctx)
                    bytes += V->qps[x].out_bytes + V->qps[x].in_read_bytes;
            char ev[600], fix[300];
            snprintf(ev, sizeof(ev),
                     "the process drives GPU %d (%s) but its RDMA traffic (%llu B) "
                     "goes through %s, %s from that GPU; %s is %s",
                     g, p->dev[g].bus, (unsigned long long)bytes, name,
                     icx_pci_path_name(p->nics[k].path[g]), p->nics[best_nic].name,
                     icx_pci_path_name(best));
            snprintf(fix, sizeof(fix),
                     "use the GPU's own rail: NCCL_IB_HCA=%s for this rank (or fix "
                     "the launcher's GPU/NIC mapping)",
                     p->nics[best_nic].name);
            icx_finding_add(F, "rail_misalignment", p, ev, fix);
            break; /* one finding per process */
        }
    }
}

static void nic_finding(struct icx_findings *F, const char *kind, const char *host,
                        const char *evidence, const char *fix)
{
    struct icx_proc where = {0}; /* a host's finding, not one process's */
    where.host = (char *)host;
    where.pid = -1;
    where.rank = -1;
    icx_finding_add(F, kind, &where, evidence, fix);
}

/* Mark every row of a host's NIC: a rail, and whether it carried a farther GPU's traffic or is
 * the closest NIC of a GPU whose traffic left elsewhere. */
static void mark_nic(struct icx_verbs *V, const char *host, const char *name, int foreign,
                     int deserted)
{
    for (size_t n = 0; n < V->nnics; n++)
        if (!strcmp(V->nics[n].host, host) && !strcmp(V->nics[n].name, name)) {
            V->nics[n].rail = 1;
            V->nics[n].foreign |= foreign;
            V->nics[n].deserted |= deserted;
        }
}

/* The job's rails on each host: the NICs that carried its traffic, and the closest NICs (PCIe
 * path class) of the GPUs whose traffic left through a farther one.  A NIC that no GPU of the
 * job used or should have used is not a rail: a 2-GPU job leaves six NICs of an 8-NIC node idle,
 * and a single ring crosses the network from two GPUs of a node only, both rightly. */
static void mark_rails(struct icx_verbs *V)
{
    for (size_t i = 0; i < V->nnics; i++)
        V->nics[i].rail = V->nics[i].tx_bytes + V->nics[i].rx_bytes > 0;
    for (size_t q = 0; q < V->nqps; q++) {
        const struct vqp_row *r = &V->qps[q];
        const struct icx_proc *p = r->p;
        uint64_t moved = r->out_bytes + r->in_read_bytes;
        if (r->peer >= 0)
            moved += V->qps[r->peer].out_bytes + V->qps[r->peer].in_read_bytes;
        int g = icx_verbs_primary_gpu(p);
        if (!moved || g < 0 || r->ctx >= ICX_RD_MAX_VCTX)
            continue;
        unsigned best = 0, used = 0;
        for (int k = 0; k < ICX_RD_MAX_NICS; k++)
            if (p->nics[k].present && p->nics[k].path[g]) {
                best = !best || p->nics[k].path[g] < best ? p->nics[k].path[g] : best;
                used = !strcmp(p->nics[k].name, p->vctx[r->ctx].name) ? p->nics[k].path[g] : used;
            }
        if (!used || used <= best)
            continue;
        mark_nic(V, icx_verbs_host(p), p->vctx[r->ctx].name, 1, 0);
        for (int k = 0; k < ICX_RD_MAX_NICS; k++)
            if (p->nics[k].present && p->nics[k].path[g] == best)
                mark_nic(V, icx_verbs_host(p), p->nics[k].name, 0, 1);
    }
}

/* Rails of a host (mark_rails) of the link layer the traffic used: each one's share of their mean
 * bytes.  Under 50 % on a rail a GPU's traffic deserted, or over 150 % on one that carried a
 * farther GPU's traffic, is a finding; an uneven split among rails that each carry only their
 * own GPUs' traffic is the collective's algorithm, not a fault.  And ports that came up slower
 * than the host's fastest opened one. */
static void rails(struct icx_verbs *V, struct icx_findings *F)
{
    for (size_t i = 0; i < V->nnics; i++) {
        const char *host = V->nics[i].host;
        int first = 1;
        for (size_t k = 0; k < i; k++)
            first &= strcmp(V->nics[k].host, host) != 0;
        if (!first)
            continue;
        unsigned ll = 0;
        uint32_t fastest = 0;
        for (size_t k = i; k < V->nnics; k++)
            if (!strcmp(V->nics[k].host, host)) {
                if (V->nics[k].tx_bytes + V->nics[k].rx_bytes)
                    ll = V->nics[k].link_layer;
                if (V->nics[k].opened && V->nics[k].port_rate_mbps > fastest)
                    fastest = V->nics[k].port_rate_mbps;
            }
        double sum = 0;
        int n = 0;
        for (size_t k = i; k < V->nnics; k++)
            if (!strcmp(V->nics[k].host, host) && V->nics[k].link_layer == ll && V->nics[k].rail) {
                sum += (double)(V->nics[k].tx_bytes + V->nics[k].rx_bytes);
                n++;
            }
        char ev[600];
        for (size_t k = i; k < V->nnics; k++) {
            const struct vnic *x = &V->nics[k];
            if (strcmp(x->host, host))
                continue;
            if (x->opened && x->port_rate_mbps && x->port_rate_mbps < fastest) {
                snprintf(ev, sizeof(ev),
                         "%s port %d on %s is up at %.0f Gb/s, the host's other "
                         "RDMA ports at %.0f Gb/s",
                         x->name, x->port, host, x->port_rate_mbps / 1e3, fastest / 1e3);
                nic_finding(F, "nic_degraded", host, ev,
                            "check the port's cable and width (ibstat: Rate, Link width); a rail "
                            "that trains down slows every collective that crosses it");
            }
            double share = n > 1 && sum > 0 ? (double)(x->tx_bytes + x->rx_bytes) / (sum / n) : 1;
            if (!x->rail || x->link_layer != ll ||
                !((share < 0.5 && x->deserted) || (share > 1.5 && x->foreign)))
                continue;
            snprintf(ev, sizeof(ev),
                     "%s port %d on %s carried %.0f%% of the mean bytes of the host's "
                     "%d %s rails (%llu of a mean %.0f)",
                     x->name, x->port, host, share * 100, n, icx_ll_name(ll),
                     (unsigned long long)(x->tx_bytes + x->rx_bytes), sum / n);
            nic_finding(F, "nic_imbalance", host, ev,
                        share < 0.5 ? "check that the NIC is up and selected (NCCL_IB_HCA, the "
                                      "job's rail mapping): it is idle while others carry the load"
                                    : "spread the traffic over the host's other NICs (one rail per "
                                      "GPU: NCCL_IB_HCA, NCCL_CROSS_NIC)");
        }
    }
}

void icx_verbs_rails(struct icx_verbs *V, const struct icx_trace *t, struct icx_findings *F)
{
    mark_rails(V);
    rails(V, F);
    rail_alignment(V, t, F);
}
