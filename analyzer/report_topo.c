/* Topology matrix in the style of `nvidia-smi topo -m`, per process that touched two or more GPUs:
 * NV# (NVLink lanes, direct or through NVSwitch), NODE (PCIe within one NUMA node), SYS (PCIe
 * across NUMA nodes), each annotated with the GB/s its intercepted copies achieved; then one column
 * per RDMA NIC with the PCIe path to it (PIX, PXB, PHB, NODE, SYS). */
#include <math.h>
#include <string.h>

#include "analysis.h"
#include "report_links.h"

static const struct icx_rd_link *find_link(const struct icx_proc *p, int a, int b)
{
    for (size_t k = 0; k < p->nlinks; k++)
        if (p->links[k].src == a && p->links[k].dst == b)
            return &p->links[k];
    return NULL;
}

static const struct icx_link_row *find_row(const struct icx_links *L, const struct icx_proc *p,
                                           int a, int b)
{
    for (size_t i = 0; i < L->n; i++) {
        const struct icx_link_row *r = &L->rows[i];
        if (!strcmp(r->host, p->host ? p->host : "") && !strcmp(r->src_bus, p->dev[a].bus) &&
            !strcmp(r->dst_bus, p->dev[b].bus))
            return r;
    }
    return NULL;
}

/* The connection label of a pair: NV18, NODE, SYS or "?". */
static void label(char *out, size_t len, const struct icx_proc *p, int a, int b)
{
    const struct icx_rd_link *l = find_link(p, a, b);
    if (l && l->kind == ICX_LINK_NVLINK)
        snprintf(out, len, "NV%u", l->nlinks);
    else if (l && l->kind == ICX_LINK_PCIE)
        snprintf(out, len, "%s",
                 p->dev[a].numa >= 0 && p->dev[a].numa == p->dev[b].numa ? "NODE" : "SYS");
    else
        snprintf(out, len, "?");
}

static int gpus_of(const struct icx_proc *p, int *out)
{
    int n = 0;
    for (int d = 0; d < ICX_RD_MAX_DEV; d++)
        if (p->dev[d].present)
            out[n++] = d;
    return n;
}

static void topo_print(FILE *out, const struct icx_analysis *A)
{
    const struct icx_trace *t = A->t;
    const struct icx_links *L = A->links;
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        int g[ICX_RD_MAX_DEV], n = gpus_of(p, g);
        if (n < 2)
            continue;
        fprintf(out, "\nTopology seen by pid %d on %s (measured GB/s where copies ran)\n%-6s",
                p->pid, p->host ? p->host : "?", "");
        for (int c = 0; c < n; c++)
            fprintf(out, " GPU%-7d", g[c]);
        for (int k = 0; k < ICX_RD_MAX_NICS; k++)
            if (p->nics[k].present)
                fprintf(out, " %-7s", p->nics[k].name);
        fprintf(out, " NUMA\n");
        for (int r = 0; r < n; r++) {
            fprintf(out, "GPU%-3d", g[r]);
            for (int c = 0; c < n; c++) {
                char cell[32], lab[16];
                if (r == c) {
                    snprintf(cell, sizeof(cell), "X");
                } else {
                    label(lab, sizeof(lab), p, g[r], g[c]);
                    const struct icx_link_row *row = find_row(L, p, g[r], g[c]);
                    if (row && isfinite(row->achieved_bps))
                        snprintf(cell, sizeof(cell), "%s %.0f", lab, row->achieved_bps / 1e9);
                    else
                        snprintf(cell, sizeof(cell), "%s", lab);
                }
                fprintf(out, " %-10s", cell);
            }
            for (int k = 0; k < ICX_RD_MAX_NICS; k++)
                if (p->nics[k].present)
                    fprintf(out, " %-7s", icx_pci_path_name(p->nics[k].path[g[r]]));
            fprintf(out, " %d\n", p->dev[g[r]].numa);
        }
    }
}

static void topo_json(struct icx_json *j, const struct icx_analysis *A)
{
    const struct icx_trace *t = A->t;
    const struct icx_links *L = A->links;
    icx_json_arr(j, "topology");
    for (size_t i = 0; i < t->nprocs; i++) {
        const struct icx_proc *p = t->procs[i];
        int g[ICX_RD_MAX_DEV], n = gpus_of(p, g);
        if (n < 2)
            continue;
        icx_json_obj(j, NULL);
        icx_json_int(j, "pid", p->pid);
        icx_json_str(j, "host", p->host);
        icx_json_arr(j, "gpus");
        for (int r = 0; r < n; r++)
            icx_json_int(j, NULL, g[r]);
        icx_json_end(j);
        icx_json_arr(j, "nics");
        for (int k = 0; k < ICX_RD_MAX_NICS; k++) {
            const struct icx_rd_nic *nic = &p->nics[k];
            if (!nic->present)
                continue;
            icx_json_obj(j, NULL);
            icx_json_str(j, "name", nic->name);
            icx_json_str(j, "pci", nic->bus);
            icx_json_int(j, "numa_node", nic->numa);
            icx_json_str(j, "link_layer",
                         nic->link_layer == ICX_LL_INFINIBAND ? "InfiniBand"
                         : nic->link_layer == ICX_LL_ETHERNET ? "Ethernet"
                                                              : "unknown");
            icx_json_num(j, "rate_gbps", nic->rate_mbps / 1000.0);
            icx_json_bool(j, "active", (int)nic->active);
            icx_json_arr(j, "path_to_gpus");
            for (int r = 0; r < n; r++)
                icx_json_str(j, NULL, icx_pci_path_name(nic->path[g[r]]));
            icx_json_end(j);
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_arr(j, "matrix");
        for (int r = 0; r < n; r++) {
            icx_json_arr(j, NULL);
            for (int c = 0; c < n; c++) {
                char lab[16];
                if (r == c)
                    snprintf(lab, sizeof(lab), "X");
                else
                    label(lab, sizeof(lab), p, g[r], g[c]);
                icx_json_obj(j, NULL);
                icx_json_str(j, "link", lab);
                const struct icx_link_row *row = r == c ? NULL : find_row(L, p, g[r], g[c]);
                icx_json_num(j, "achieved_bytes_per_s", row ? row->achieved_bps : NAN);
                icx_json_end(j);
            }
            icx_json_end(j);
        }
        icx_json_end(j);
        icx_json_end(j);
    }
    icx_json_end(j);
}

/* Needs the links report (before it in the table). */
const struct icx_report icx_report_topo = {
    .name = "topology",
    .print = topo_print,
    .json = topo_json,
};
