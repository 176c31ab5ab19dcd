/* RDMA NICs from sysfs (/sys/class/infiniband, under ICX_SYSFS_ROOT) and the PCIe path between each
 * GPU the job uses and each NIC, classified as nvidia-smi topo -m does (PIX, PXB, PHB, NODE, SYS)
 * from the devices' places in /sys/devices.  Writer thread only. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "nic.h"
#include "runtime.h"
#include "sysfs.h"

#define ICX_MAX_NICS 64

struct icx_nic {
    char name[64], bus[32];
    int numa;
    char path[PATH_MAX];        /* real path of the PCI device below <root>/sys/devices */
    struct icx_kept counter[4]; /* icx_nic_counters[], kept open */
};
static const char *const icx_nic_counters[4] = {"port_xmit_data", "port_rcv_data", "port_xmit_wait",
                                                "port_xmit_discards"};
static struct icx_nic icx_nics[ICX_MAX_NICS];
static int icx_nnics = -1;

/* The device's path inside /sys/devices ("pci0000:00/0000:00:01.0/.../0000:18:00.0"). */
static int icx_pci_path_of(const char *link, char *out, size_t len)
{
    char real[PATH_MAX], rr[PATH_MAX] = "";
    if (!realpath(link, real))
        return -1;
    /* The root itself may be a path with links: compare against its real path. */
    if (icx_sysfs_root()[0] && !realpath(icx_sysfs_root(), rr))
        return -1;
    size_t lr = strlen(rr);
    static const char devices[] = "/sys/devices/";
    if (strncmp(real, rr, lr) != 0 || strncmp(real + lr, devices, sizeof(devices) - 1) != 0)
        return -1;
    int n = snprintf(out, len, "%s", real + lr + sizeof(devices) - 1);
    return n >= 0 && (size_t)n < len ? 0 : -1;
}

static void icx_nics_load(struct icx_frame *f)
{
    icx_nnics = 0;
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s/sys/class/infiniband", icx_sysfs_root());
    struct dirent **list = NULL;
    int count = scandir(dir, &list, NULL, alphasort); /* sorted: mlx5_0, mlx5_1, ... */
    if (count < 0) {
        icx_note(0, "no RDMA devices in sysfs (/sys/class/infiniband): NIC placement unknown");
        return;
    }
    for (int k = 0; k < count && icx_nnics < ICX_MAX_NICS; k++) {
        const struct dirent *e = list[k];
        if (e->d_name[0] == '.')
            continue;
        struct icx_nic *n = &icx_nics[icx_nnics];
        char link[PATH_MAX], rel[PATH_MAX], val[128];
        for (int c = 0; c < 4; c++)
            n->counter[c] = (struct icx_kept)ICX_KEPT_INIT;
        if (strlen(e->d_name) >= sizeof(n->name) ||
            snprintf(link, sizeof(link), "%s/%s/device", dir, e->d_name) >= (int)sizeof(link))
            continue;
        memcpy(n->name, e->d_name, strlen(e->d_name) + 1);
        if (icx_pci_path_of(link, n->path, sizeof(n->path)) != 0)
            continue;
        const char *slash = strrchr(n->path, '/');
        snprintf(n->bus, sizeof(n->bus), "%s", slash ? slash + 1 : n->path);
        snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/device/numa_node", e->d_name);
        n->numa = icx_sysfs_read_path(rel, val, sizeof(val)) == 0 ? atoi(val) : -1;
        /* the strings are defined before the record that uses them */
        uint32_t s_name = icx_intern(f, n->name), s_bus = icx_intern(f, n->bus);
        struct icx_rec_nic *r = icx_frame_put(f, ICX_REC_NIC, (uint32_t)icx_nnics, sizeof(*r));
        if (r) {
            r->name = s_name;
            r->pci_bus_id = s_bus;
            r->numa_node = n->numa;
            r->port = 1;
            snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/ports/1/rate", e->d_name);
            if (icx_sysfs_read_path(rel, val, sizeof(val)) == 0)
                r->rate_mbps = (uint32_t)(atof(val) * 1000);
            snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/ports/1/link_layer", e->d_name);
            if (icx_sysfs_read_path(rel, val, sizeof(val)) == 0)
                r->link_layer = !strcmp(val, "InfiniBand") ? ICX_LL_INFINIBAND
                                : !strcmp(val, "Ethernet") ? ICX_LL_ETHERNET
                                                           : ICX_LL_UNKNOWN;
            snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/ports/1/state", e->d_name);
            r->active = icx_sysfs_read_path(rel, val, sizeof(val)) == 0 && strstr(val, "ACTIVE");
        }
        icx_nnics++;
    }
    for (int k = 0; k < count; k++)
        free(list[k]);
    free(list);
}

/* Split "a/b/c/dev" into its ancestors (all but the last component). */
static int icx_ancestors(const char *path, char comp[][32], int max)
{
    int n = 0;
    const char *p = path;
    while (*p && n < max) {
        const char *slash = strchr(p, '/');
        if (!slash)
            break; /* the last component is the device itself */
        size_t l = (size_t)(slash - p);
        snprintf(comp[n++], 32, "%.*s", (int)(l < 31 ? l : 31), p);
        p = slash + 1;
    }
    return n;
}

/* Classify the path between two PCI devices from their places in the hierarchy. */
static enum icx_pci_path icx_classify_path(const char *a, const char *b, int numa_a, int numa_b)
{
    char ca[32][32], cb[32][32];
    int na = icx_ancestors(a, ca, 32), nb = icx_ancestors(b, cb, 32), k = 0;
    while (k < na && k < nb && !strcmp(ca[k], cb[k]))
        k++;
    if (k == 0) /* different host bridges */
        return numa_a >= 0 && numa_a == numa_b ? ICX_PATH_NODE : ICX_PATH_SYS;
    if (k == 1) /* only the host bridge in common */
        return ICX_PATH_PHB;
    return (na - k) + (nb - k) <= 2 ? ICX_PATH_PIX : ICX_PATH_PXB;
}

void icx_nic_paths(struct icx_frame *f, int dev, const char *bus, int numa)
{
    if (icx_nnics < 0)
        icx_nics_load(f);
    if (!icx_nnics || !bus[0])
        return;
    char link[PATH_MAX], path[PATH_MAX];
    snprintf(link, sizeof(link), "%s/sys/bus/pci/devices/%s", icx_sysfs_root(), bus);
    if (icx_pci_path_of(link, path, sizeof(path)) != 0)
        return;
    for (int i = 0; i < icx_nnics; i++) {
        struct icx_rec_pci_path *r = icx_frame_put(
            f, ICX_REC_PCI_PATH, icx_classify_path(path, icx_nics[i].path, numa, icx_nics[i].numa),
            sizeof(*r));
        if (r) {
            r->device = dev;
            r->nic = i;
        }
    }
}

/* Counter k of NIC i. */
static int icx_read_u64(struct icx_nic *nic, int k, uint64_t *out)
{
    char path[PATH_MAX], val[64];
    int n = snprintf(path, sizeof(path), "%s/sys/class/infiniband/%s/ports/1/counters/%s",
                     icx_sysfs_root(), nic->name, icx_nic_counters[k]);
    if (n < 0 || (size_t)n >= sizeof(path) ||
        icx_kept_read(&nic->counter[k], path, 1, val, sizeof(val)) <= 0)
        return -1;
    *out = strtoull(val, NULL, 10);
    return 0;
}

/* Each NIC's counters with the times its reads began and ended: a reader comparing processes'
 * samples needs both (see trace_format.h, section 8). */
void icx_nic_sample(struct icx_frame *f)
{
    if (icx_nnics < 0)
        icx_nics_load(f);
    for (int i = 0; i < icx_nnics; i++) {
        uint64_t tx, rx, wait = 0, discards = 0, began = icx_mono_ns();
        if (icx_read_u64(&icx_nics[i], 0, &tx) != 0 || icx_read_u64(&icx_nics[i], 1, &rx) != 0)
            continue;
        icx_read_u64(&icx_nics[i], 2, &wait);
        icx_read_u64(&icx_nics[i], 3, &discards);
        uint64_t ended = icx_mono_ns();
        struct icx_rec_ib_counters *r =
            icx_frame_put(f, ICX_REC_IB_COUNTERS, (uint32_t)i, sizeof(*r));
        if (r) {
            r->mono_ns = began;
            r->read_end_ns = ended;
            r->tx_bytes = tx * 4; /* the data counters count 4-byte words */
            r->rx_bytes = rx * 4;
            r->xmit_wait = wait;
            r->xmit_discards = discards;
        }
    }
}

void icx_nic_reset(void)
{
    for (int i = 0; i < icx_nnics; i++)
        for (int k = 0; k < 4; k++)
            icx_kept_close(&icx_nics[i].counter[k]);
    icx_nnics = -1;
}
