/* Topology of the devices the job touched: PCI address, name and NUMA node of each GPU, and the
 * kind and capacity of the link between each pair (NVLink direct or through NVSwitch, from NVML;
 * PCIe otherwise, from sysfs).  Runs in the writer thread only.  NVML is dlopen'ed: when it is
 * absent the links are reported as unknown, and the trace says so.  All sysfs reads go through
 * ICX_SYSFS_ROOT (like hwloc's HWLOC_FSROOT) so tests can present any machine. */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "frame.h"
#include "module.h"
#include "nic.h"
#include "nvml_abi.h"
#include "resolve.h"
#include "sysfs.h"

#define ICX_MAX_DEV 64

ICX_REAL_DECL(ICX_LIB_CUDART, cudaError_t, cudaDeviceGetPCIBusId, (char *, int, int));

static struct {
    int tried, ok;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*by_pci)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, nvmlEnableState_t *);
    nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t *);
    nvmlReturn_t (*remote_type)(nvmlDevice_t, unsigned, nvmlIntNvLinkDeviceType_t *);
    nvmlReturn_t (*fields)(nvmlDevice_t, int, nvmlFieldValue_t *);
    nvmlReturn_t (*count)(unsigned *);
    nvmlReturn_t (*by_index)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t *);
} icx_nvml;

struct icx_gpu_topo {
    char bus[32]; /* lower-case, 0000:18:00.0 */
    int numa;
    unsigned switch_links; /* active links to an NVSwitch */
    unsigned nremote;      /* active links to a GPU, and that GPU's bus id */
    char remote_bus[NVML_NVLINK_MAX_LINKS][32];
    unsigned long long link_mbps; /* per link, per direction */
    double pcie_bps;
};
static struct icx_gpu_topo icx_topo[ICX_MAX_DEV];
static uint64_t icx_topo_known;

static void icx_nvml_load(void)
{
    if (icx_nvml.tried)
        return;
    icx_nvml.tried = 1;
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        icx_note(0, "NVML (libnvidia-ml.so.1) not found: NVLink topology and link capacities "
                    "unknown");
        return;
    }
    *(void **)&icx_nvml.init = dlsym(h, "nvmlInit_v2");
    *(void **)&icx_nvml.by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&icx_nvml.name = dlsym(h, "nvmlDeviceGetName");
    *(void **)&icx_nvml.link_state = dlsym(h, "nvmlDeviceGetNvLinkState");
    *(void **)&icx_nvml.remote_pci = dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    *(void **)&icx_nvml.remote_type = dlsym(h, "nvmlDeviceGetNvLinkRemoteDeviceType");
    *(void **)&icx_nvml.fields = dlsym(h, "nvmlDeviceGetFieldValues");
    *(void **)&icx_nvml.count = dlsym(h, "nvmlDeviceGetCount_v2");
    *(void **)&icx_nvml.by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&icx_nvml.pci_info = dlsym(h, "nvmlDeviceGetPciInfo_v3");
    if (!icx_nvml.init || !icx_nvml.by_pci || !icx_nvml.link_state || !icx_nvml.remote_pci ||
        icx_nvml.init() != NVML_SUCCESS) {
        icx_note(0, "NVML present but unusable: NVLink topology and link capacities unknown");
        return;
    }
    icx_nvml.ok = 1;
}

static void icx_lower(char *s)
{
    for (; *s; s++)
        *s = (char)tolower((unsigned char)*s);
}

static int icx_sysfs_read(const char *bus, const char *attr, char *out, size_t outlen)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/%s", bus, attr);
    return icx_sysfs_read_path(rel, out, outlen);
}

/* PCIe payload bandwidth per direction from the link's speed (GT/s) and width. */
static double icx_pcie_bps(const char *bus)
{
    char speed[64], width[16];
    if (icx_sysfs_read(bus, "current_link_speed", speed, sizeof(speed)) ||
        icx_sysfs_read(bus, "current_link_width", width, sizeof(width)))
        return 0;
    double gts = atof(speed);
    int lanes = atoi(width);
    double enc = gts >= 8.0 ? 128.0 / 130.0 : 0.8; /* Gen3+ 128b/130b, Gen1/2 8b/10b */
    return gts * 1e9 * enc * lanes / 8.0;
}

static void icx_describe_one(struct icx_frame *f, int dev)
{
    struct icx_gpu_topo *t = &icx_topo[dev];
    icx_real_cudaDeviceGetPCIBusId_t busid = ICX_REAL(cudaDeviceGetPCIBusId);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = "", local_cpus[4096] = "";
    t->numa = -1;
    if (busid && busid(t->bus, (int)sizeof(t->bus), dev) == cudaSuccess) {
        icx_lower(t->bus);
        char numa[32];
        if (icx_sysfs_read(t->bus, "numa_node", numa, sizeof(numa)) == 0)
            t->numa = atoi(numa);
        icx_sysfs_read(t->bus, "local_cpulist", local_cpus, sizeof(local_cpus));
        t->pcie_bps = icx_pcie_bps(t->bus);
    }
    nvmlDevice_t h;
    if (icx_nvml.ok && t->bus[0] && icx_nvml.by_pci(t->bus, &h) == NVML_SUCCESS) {
        if (icx_nvml.name)
            icx_nvml.name(h, name, sizeof(name));
        if (icx_nvml.fields) {
            nvmlFieldValue_t fv;
            memset(&fv, 0, sizeof(fv));
            fv.fieldId = NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON;
            if (icx_nvml.fields(h, 1, &fv) == NVML_SUCCESS && fv.nvmlReturn == NVML_SUCCESS)
                t->link_mbps = fv.valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG ? fv.value.ullVal
                                                                                  : fv.value.uiVal;
        }
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            nvmlEnableState_t on = 0;
            if (icx_nvml.link_state(h, l, &on) != NVML_SUCCESS || on != NVML_FEATURE_ENABLED)
                continue;
            nvmlIntNvLinkDeviceType_t type = NVML_NVLINK_DEVICE_TYPE_UNKNOWN;
            if (icx_nvml.remote_type)
                icx_nvml.remote_type(h, l, &type);
            nvmlPciInfo_t pci;
            memset(&pci, 0, sizeof(pci));
            if (type == NVML_NVLINK_DEVICE_TYPE_SWITCH) {
                t->switch_links++;
            } else if (icx_nvml.remote_pci(h, l, &pci) == NVML_SUCCESS) {
                icx_lower(pci.busId);
                snprintf(t->remote_bus[t->nremote++], sizeof(t->remote_bus[0]), "%s", pci.busId);
            }
        }
    }
    icx_topo_known |= 1ull << dev;
    uint32_t s_name = icx_intern(f, name), s_bus = icx_intern(f, t->bus);
    uint32_t s_local = local_cpus[0] ? icx_intern(f, local_cpus) : 0;
    struct icx_rec_device *d = icx_frame_put(f, ICX_REC_DEVICE, (uint32_t)dev, sizeof(*d));
    if (d) {
        d->name = s_name;
        d->pci_bus_id = s_bus;
        d->numa_node = t->numa;
        d->local_cpus = s_local;
    }
    icx_nic_paths(f, dev, t->bus, t->numa);
}

static unsigned icx_direct_links(const struct icx_gpu_topo *from, const struct icx_gpu_topo *to)
{
    unsigned n = 0;
    for (unsigned i = 0; i < from->nremote; i++)
        n += to->bus[0] && strcmp(from->remote_bus[i], to->bus) == 0;
    return n;
}

static void icx_put_link(struct icx_frame *f, int a, int b)
{
    const struct icx_gpu_topo *ta = &icx_topo[a], *tb = &icx_topo[b];
    unsigned direct = icx_direct_links(ta, tb);
    uint32_t kind = ICX_LINK_UNKNOWN, flags = 0, nlinks = 0;
    double cap = 0;
    if (direct) {
        kind = ICX_LINK_NVLINK;
        nlinks = direct;
    } else if (ta->switch_links && tb->switch_links) {
        kind = ICX_LINK_NVLINK;
        flags = ICX_LINKF_NVSWITCH;
        nlinks = ta->switch_links < tb->switch_links ? ta->switch_links : tb->switch_links;
    } else if (icx_nvml.ok) {
        kind = ICX_LINK_PCIE;
        cap = ta->pcie_bps < tb->pcie_bps ? ta->pcie_bps : tb->pcie_bps;
    }
    if (kind == ICX_LINK_NVLINK) {
        unsigned long long mbps = ta->link_mbps ? ta->link_mbps : tb->link_mbps;
        cap = (double)nlinks * (double)mbps * 1e6;
    }
    struct icx_rec_link *l = icx_frame_put(f, ICX_REC_LINK, kind, sizeof(*l));
    if (l) {
        l->src_dev = a;
        l->dst_dev = b;
        l->nlinks = nlinks;
        l->flags = flags;
        l->capacity_bps = (uint64_t)cap;
    }
}

static void icx_topo_describe(struct icx_frame *f, uint64_t devices)
{
    icx_nvml_load();
    uint64_t old = icx_topo_known;
    for (int d = 0; d < ICX_MAX_DEV; d++)
        if (devices & (1ull << d))
            icx_describe_one(f, d);
    /* Every ordered pair with at least one newly described end. */
    for (int a = 0; a < ICX_MAX_DEV; a++)
        for (int b = 0; b < ICX_MAX_DEV; b++)
            if (a != b && (icx_topo_known & (1ull << a)) && (icx_topo_known & (1ull << b)) &&
                ((devices & (1ull << a)) || (devices & (1ull << b))) &&
                !((old & (1ull << a)) && (old & (1ull << b))))
                icx_put_link(f, a, b);
}

/* ---- NVLink hardware counters: every GPU NVML sees, keyed by PCI bus id ---- */

struct icx_counter_dev {
    nvmlDevice_t h;
    uint32_t bus_id; /* string id */
    unsigned nlinks;
    unsigned link[NVML_NVLINK_MAX_LINKS];
};
static struct icx_counter_dev *icx_cdevs;
static unsigned icx_ncdevs;
static int icx_cdevs_ready;
static uint64_t icx_last_sample_ns;

static void icx_counters_init(struct icx_frame *f)
{
    icx_cdevs_ready = 1;
    unsigned n = 0;
    if (!icx_nvml.ok || !icx_nvml.count || !icx_nvml.by_index || !icx_nvml.pci_info ||
        !icx_nvml.fields || icx_nvml.count(&n) != NVML_SUCCESS || n == 0)
        return;
    icx_cdevs = calloc(n, sizeof(*icx_cdevs));
    if (!icx_cdevs)
        return;
    for (unsigned i = 0; i < n; i++) {
        struct icx_counter_dev *c = &icx_cdevs[icx_ncdevs];
        nvmlPciInfo_t pci;
        memset(&pci, 0, sizeof(pci));
        if (icx_nvml.by_index(i, &c->h) != NVML_SUCCESS ||
            icx_nvml.pci_info(c->h, &pci) != NVML_SUCCESS)
            continue;
        icx_lower(pci.busId);
        c->bus_id = icx_intern(f, pci.busId);
        for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
            nvmlEnableState_t on = 0;
            if (icx_nvml.link_state(c->h, l, &on) == NVML_SUCCESS && on == NVML_FEATURE_ENABLED)
                c->link[c->nlinks++] = l;
        }
        if (c->nlinks)
            icx_ncdevs++;
    }
}

/* One NVLINK_COUNTERS record per GPU with active NVLinks (and the NICs' IB_COUNTERS), at most
 * every ICX_SAMPLE_MS, and always when `force`: the first sample and the last. */
static int icx_counting; /* devices_begin ran: the process drives devices, sample their counters */

static void icx_counters_sample(struct icx_frame *f, int force)
{
    if (!icx_cfg.sample_ms || !icx_counting)
        return;
    uint64_t now = icx_mono_ns();
    if (!force && now - icx_last_sample_ns < (uint64_t)icx_cfg.sample_ms * 1000000ull)
        return;
    icx_last_sample_ns = now;
    icx_nic_sample(f);
    icx_nvml_load();
    if (!icx_cdevs_ready)
        icx_counters_init(f);
    for (unsigned i = 0; i < icx_ncdevs; i++) {
        struct icx_counter_dev *c = &icx_cdevs[i];
        nvmlFieldValue_t v[2 * NVML_NVLINK_MAX_LINKS];
        memset(v, 0, sizeof(v));
        for (unsigned k = 0; k < c->nlinks; k++) {
            v[2 * k].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
            v[2 * k].scopeId = c->link[k];
            v[2 * k + 1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
            v[2 * k + 1].scopeId = c->link[k];
        }
        uint64_t began = icx_mono_ns();
        if (icx_nvml.fields(c->h, (int)(2 * c->nlinks), v) != NVML_SUCCESS)
            continue;
        uint64_t ended = icx_mono_ns();
        uint64_t sum[2] = {0, 0};
        unsigned good = 0;
        for (unsigned k = 0; k < 2 * c->nlinks; k++) {
            if (v[k].nvmlReturn != NVML_SUCCESS)
                continue;
            good++;
            sum[k & 1] += v[k].valueType == NVML_VALUE_TYPE_UNSIGNED_LONG_LONG ? v[k].value.ullVal
                                                                               : v[k].value.uiVal;
        }
        if (!good)
            continue;
        struct icx_rec_nvlink_counters *r =
            icx_frame_put(f, ICX_REC_NVLINK_COUNTERS, i, sizeof(*r));
        if (r) {
            r->mono_ns = began;
            r->read_end_ns = ended;
            r->pci_bus_id = c->bus_id;
            r->links = c->nlinks;
            r->tx_bytes = sum[0] * 1024; /* the counters count KiB */
            r->rx_bytes = sum[1] * 1024;
        }
    }
}

/* ---- which devices to describe: the ones the process drives ---- */

static uint64_t icx_seen_devices, icx_described;

static void icx_seen(int32_t dev)
{
    if ((uint32_t)dev < ICX_MAX_DEV)
        icx_seen_devices |= 1ull << dev;
}

/* Every drained event: a device the process allocates on, copies to or from, or runs a
 * communicator on is one it drives. */
static void icx_topo_drained(struct icx_frame *f, const struct icx_rec *r)
{
    (void)f;
    switch (r->type) {
    case ICX_REC_CUDA_ALLOC:
        if (((const struct icx_rec_cuda_alloc *)r)->result == 0)
            icx_seen(((const struct icx_rec_cuda_alloc *)r)->device);
        break;
    case ICX_REC_NCCL_COMM: icx_seen(((const struct icx_rec_nccl_comm *)r)->device); break;
    case ICX_REC_CUDA_HOST_COPY:
        icx_seen(((const struct icx_rec_cuda_host_copy *)r)->device);
        break;
    case ICX_REC_CUDA_COPY:
        icx_seen(((const struct icx_rec_cuda_copy *)r)->src_dev);
        icx_seen(((const struct icx_rec_cuda_copy *)r)->dst_dev);
        break;
    default: break;
    }
}

static void icx_topo_tick(struct icx_frame *f, enum icx_tick_kind kind)
{
    if (icx_seen_devices & ~icx_described) {
        icx_topo_describe(f, icx_seen_devices & ~icx_described);
        icx_described |= icx_seen_devices;
    }
    icx_counters_sample(f, kind != ICX_TICK_PERIODIC);
}

/* The baseline, before the job moves a byte: its first traced device call waits for it.  A
 * process that never makes one never loads NVML (nvmlInit alone takes milliseconds or more on a
 * GPU node). */
static void icx_topo_devices_begin(struct icx_frame *f)
{
    icx_counting = 1;
    icx_counters_sample(f, 1);
}

/* A traced fork child of a device process: its own baseline in its header. */
static void icx_topo_stream_begin(struct icx_frame *f)
{
    icx_counters_sample(f, 1);
}

/* A traced child's stream describes its devices and counters again. */
static void icx_topo_fork_child(void)
{
    icx_seen_devices = icx_described = icx_topo_known = 0;
    memset(icx_topo, 0, sizeof(icx_topo));
    free(icx_cdevs);
    icx_cdevs = NULL;
    icx_ncdevs = 0;
    icx_cdevs_ready = 0;
    icx_nic_reset();
}

const struct icx_module icx_mod_topo = {
    .name = "topo",
    .stream_begin = icx_topo_stream_begin,
    .devices_begin = icx_topo_devices_begin,
    .drained = icx_topo_drained,
    .tick = icx_topo_tick,
    .fork_child = icx_topo_fork_child,
};
