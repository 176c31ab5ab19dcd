/* Parser and link model for simulated-node topology files (format: tests/sim/topologies/README). */
#include "topo_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void sim_topo_default(struct sim_topo *t)
{
    memset(t, 0, sizeof(*t));
    t->ngpus = 8;
    t->numa_nodes = 2;
    snprintf(t->gpu_name, sizeof(t->gpu_name), "NVIDIA H100 80GB HBM3 (simulated)");
    static const char *const bus[8] = {"0000:18:00.0", "0000:2A:00.0", "0000:3A:00.0",
                                       "0000:5D:00.0", "0000:9A:00.0", "0000:AB:00.0",
                                       "0000:BA:00.0", "0000:DB:00.0"};
    for (int i = 0; i < 8; i++) {
        snprintf(t->gpu[i].bus, sizeof(t->gpu[i].bus), "%s", bus[i]);
        t->gpu[i].numa = i < 4 ? 0 : 1;
    }
    t->nvswitch_links = 18;
    t->nvlink_gbps = 25.0;
    t->pcie_gts = 32.0;
    t->pcie_width = 16;
    t->hbm_gbps = 3000.0;
    t->latency_us = 2.0;
}

int sim_topo_load(struct sim_topo *t)
{
    sim_topo_default(t);
    const char *path = getenv("ICXSIM_TOPOLOGY");
    if (!path || !*path)
        return 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "icxsim: cannot open topology %s\n", path);
        return -1;
    }
    char line[512];
    int lineno = 0, rc = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char key[64];
        int off = 0;
        if (sscanf(line, "%63s %n", key, &off) != 1)
            continue;
        const char *rest = line + off;
        int a, b, n;
        double x;
        char s[32];
        if (!strcmp(key, "gpus") && sscanf(rest, "%d", &n) == 1 && n > 0 && n <= SIM_MAX_GPUS)
            t->ngpus = n;
        else if (!strcmp(key, "numa_nodes") && sscanf(rest, "%d", &n) == 1 && n > 0)
            t->numa_nodes = n;
        else if (!strcmp(key, "gpu_name")) {
            snprintf(t->gpu_name, sizeof(t->gpu_name), "%s", rest);
            t->gpu_name[strcspn(t->gpu_name, "\n")] = 0;
        } else if (!strcmp(key, "gpu") && sscanf(rest, "%d bus %31s numa %d", &a, s, &n) == 3 &&
                   a >= 0 && a < SIM_MAX_GPUS) {
            snprintf(t->gpu[a].bus, sizeof(t->gpu[a].bus), "%s", s);
            t->gpu[a].numa = n;
        } else if (!strcmp(key, "nvswitch_links") && sscanf(rest, "%d", &n) == 1 && n >= 0)
            t->nvswitch_links = n;
        else if (!strcmp(key, "nvlink_gbps") && sscanf(rest, "%lf", &x) == 1 && x > 0)
            t->nvlink_gbps = x;
        else if (!strcmp(key, "nvlink") && sscanf(rest, "%d %d %d", &a, &b, &n) == 3 && a >= 0 &&
                 b >= 0 && a < SIM_MAX_GPUS && b < SIM_MAX_GPUS && n >= 0)
            t->direct[a][b] = t->direct[b][a] = n;
        else if (!strcmp(key, "pcie") && sscanf(rest, "%lf %d", &x, &n) == 2 && x > 0 && n > 0) {
            t->pcie_gts = x;
            t->pcie_width = n;
        } else if (!strcmp(key, "hbm_gbps") && sscanf(rest, "%lf", &x) == 1 && x > 0)
            t->hbm_gbps = x;
        else if (!strcmp(key, "latency_us") && sscanf(rest, "%lf", &x) == 1 && x >= 0)
            t->latency_us = x;
        else if (!strcmp(key, "nic") && sscanf(rest, "%d name %31s", &a, s) == 2 && a >= 0 &&
                 a < SIM_MAX_NICS) {
            /* the rest (bus, numa, switch) is for tests/sim/mksysfs.py */
            snprintf(t->nic[a].name, sizeof(t->nic[a].name), "%s", s);
            const char *r = strstr(rest, " rate ");
            t->nic[a].rate_gbps = r ? atof(r + 6) : 0;
            t->nic[a].ethernet = strstr(rest, "link_layer Ethernet") != NULL;
            if (a >= t->nnics)
                t->nnics = a + 1;
        } else if (!strcmp(key, "numa"))
            ; /* CPU lists: read by tests/sim/mksysfs.py */
        else if (!strcmp(key, "slow_link") && sscanf(rest, "%d %d %lf", &a, &b, &x) == 3 &&
                 a >= 0 && b >= 0 && a < SIM_MAX_GPUS && b < SIM_MAX_GPUS && x > 0)
            t->slow[a][b] = x;
        else {
            fprintf(stderr, "icxsim: %s:%d: cannot parse: %s", path, lineno, line);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

double sim_topo_pcie_bps(const struct sim_topo *t)
{
    double enc = t->pcie_gts >= 8.0 ? 128.0 / 130.0 : 0.8;
    return t->pcie_gts * 1e9 * enc * t->pcie_width / 8.0;
}

int sim_topo_lanes(const struct sim_topo *t, int a, int b)
{
    if (t->direct[a][b])
        return t->direct[a][b];
    return t->nvswitch_links;
}

double sim_topo_rate(const struct sim_topo *t, int src, int dst)
{
    double r;
    if (src < 0 || dst < 0)
        r = sim_topo_pcie_bps(t);
    else if (src == dst)
        r = t->hbm_gbps * 1e9;
    else {
        int lanes = sim_topo_lanes(t, src, dst);
        r = lanes ? lanes * t->nvlink_gbps * 1e9 : sim_topo_pcie_bps(t);
        if (t->slow[src][dst] > 0)
            r *= t->slow[src][dst];
    }
    return r;
}
