/* Topology files for the simulated node: what the simulated libcudart and NVML present, and the
 * link model that times their copies.  Part of the test substrate; the tracer never includes it. */
#ifndef SIM_TOPO_FILE_H
#define SIM_TOPO_FILE_H

#define SIM_MAX_GPUS 64
#define SIM_MAX_NICS 32

struct sim_topo {
    int ngpus;
    int numa_nodes;
    char gpu_name[96];
    struct {
        char bus[32];
        int numa;
    } gpu[SIM_MAX_GPUS];
    int nvswitch_links; /* links per GPU into an NVSwitch fabric (all-to-all); 0: none */
    double nvlink_gbps; /* GB/s (1e9 bytes) per link per direction */
    int direct[SIM_MAX_GPUS][SIM_MAX_GPUS]; /* direct NVLink lanes between two GPUs */
    double pcie_gts;                        /* PCIe link speed, GT/s */
    int pcie_width;
    double hbm_gbps;                         /* on-device copy rate */
    double latency_us;                       /* per copy */
    double slow[SIM_MAX_GPUS][SIM_MAX_GPUS]; /* injected slow link: rate multiplier, 0 = none */
    int nnics;
    struct {
        char name[32];
        double rate_gbps; /* per direction */
        int ethernet;     /* link layer: RoCE (1) or InfiniBand (0) */
    } nic[SIM_MAX_NICS];
};

/* Load $ICXSIM_TOPOLOGY, or the built-in DGX-H100-like node when unset.  0, or -1 with a message
 * on stderr. */
int sim_topo_load(struct sim_topo *t);
/* Model rate for a copy from device src to dst (bytes/s); -1 stands for host memory. */
double sim_topo_rate(const struct sim_topo *t, int src, int dst);
/* NVLink lanes between two GPUs as the hardware sees them: direct lanes, else each GPU's NVSwitch
 * links, else 0 (PCIe). */
int sim_topo_lanes(const struct sim_topo *t, int a, int b);
double sim_topo_pcie_bps(const struct sim_topo *t);

#endif
