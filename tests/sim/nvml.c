/* Simulated libnvidia-ml.so.1: the NVML subset icxtrace reads (device lookup by PCI bus id, names,
 * NVLink state, remote ends and speed), presenting the GPUs and NVLinks of the topology file.  ABI
 * from the same documented declarations the tracer uses (preload/nvml_abi.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "counters.h"
#include "nvml_abi.h"
#include "topo_file.h"

#define SIM_API __attribute__((visibility("default")))

struct nvmlDevice_st {
    int index;
};
static struct nvmlDevice_st devs[SIM_MAX_GPUS];
static struct sim_topo topo;
static int inited, load_ok;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static struct sim_counters *counters;

static void load(void)
{
    load_ok = sim_topo_load(&topo) == 0;
    counters = sim_counters_map();
    for (int i = 0; i < SIM_MAX_GPUS; i++)
        devs[i].index = i;
}

SIM_API nvmlReturn_t nvmlInit_v2(void)
{
    pthread_once(&once, load);
    if (!load_ok)
        return 999; /* NVML_ERROR_UNKNOWN */
    inited = 1;
    return NVML_SUCCESS;
}
SIM_API nvmlReturn_t nvmlInit(void)
{
    return nvmlInit_v2();
}
SIM_API nvmlReturn_t nvmlShutdown(void)
{
    return NVML_SUCCESS;
}
SIM_API const char *nvmlErrorString(nvmlReturn_t r)
{
    return r == NVML_SUCCESS ? "Success" : "Error (simulated NVML)";
}
SIM_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!inited)
        return 1; /* NVML_ERROR_UNINITIALIZED */
    *n = (unsigned)topo.ngpus;
    return NVML_SUCCESS;
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d)
{
    if (!inited)
        return 1;
    if (i >= (unsigned)topo.ngpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *d = &devs[i];
    return NVML_SUCCESS;
}
SIM_API nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *d)
{
    if (!inited)
        return 1;
    for (int i = 0; i < topo.ngpus; i++)
        if (strcasecmp(topo.gpu[i].bus, bus) == 0) {
            *d = &devs[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}
SIM_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len)
{
    if (!d || !name)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(topo.gpu_name) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(name, len, "%s", topo.gpu_name);
    return NVML_SUCCESS;
}

/* Link l of GPU g: the first direct lanes (in peer order), then NVSwitch links. */
static int link_target(int g, unsigned l, int *peer)
{
    unsigned k = 0;
    for (int p = 0; p < topo.ngpus; p++)
        for (int n = 0; n < topo.direct[g][p]; n++, k++)
            if (k == l) {
                *peer = p;
                return 1;
            }
    if (l < k + (unsigned)topo.nvswitch_links) {
        *peer = -1; /* switch */
        return 1;
    }
    return 0;
}

SIM_API nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned l, nvmlEnableState_t *on)
{
    int peer;
    if (!d || l >= NVML_NVLINK_MAX_LINKS)
        return NVML_ERROR_INVALID_ARGUMENT;
    *on = link_target(d->index, l, &peer) ? NVML_FEATURE_ENABLED : 0;
    return NVML_SUCCESS;
}
SIM_API nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t d, unsigned l,
                                                         nvmlIntNvLinkDeviceType_t *t)
{
    int peer;
    if (!d || !link_target(d->index, l, &peer))
        return NVML_ERROR_INVALID_ARGUMENT;
    *t = peer < 0 ? NVML_NVLINK_DEVICE_TYPE_SWITCH : NVML_NVLINK_DEVICE_TYPE_GPU;
    return NVML_SUCCESS;
}
SIM_API nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned l,
                                                         nvmlPciInfo_t *pci)
{
    int peer;
    if (!d || !pci || !link_target(d->index, l, &peer))
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    if (peer < 0)
        snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", 0xC0 + l);
    else
        snprintf(pci->busId, sizeof(pci->busId), "%s", topo.gpu[peer].bus);
    memcpy(pci->busIdLegacy, pci->busId, sizeof(pci->busIdLegacy) - 1);
    return NVML_SUCCESS;
}
SIM_API nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v)
{
    if (!d || n < 0 || !v)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) {
        unsigned links = 0;
        int peer;
        while (links < NVML_NVLINK_MAX_LINKS && link_target(d->index, links, &peer))
            links++;
        v[i].nvmlReturn = NVML_SUCCESS;
        v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        if (v[i].fieldId == NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON)
            v[i].value.uiVal = links ? (unsigned)(topo.nvlink_gbps * 1000.0) : 0;
        else if (v[i].fieldId == NVML_FI_DEV_NVLINK_LINK_COUNT)
            v[i].value.uiVal = links;
        else if ((v[i].fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ||
                  v[i].fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX) &&
                 v[i].scopeId < links && counters) {
            /* Cumulative KiB per link (scopeId), like the hardware counters. */
            const uint64_t *c = v[i].fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX
                                    ? counters->tx[d->index]
                                    : counters->rx[d->index];
            v[i].valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
            v[i].value.ullVal = __atomic_load_n(&c[v[i].scopeId], __ATOMIC_RELAXED) / 1024;
        } else
            v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}

SIM_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci)
{
    if (!d || !pci)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    snprintf(pci->busId, sizeof(pci->busId), "%s", topo.gpu[d->index].bus);
    memcpy(pci->busIdLegacy, pci->busId, sizeof(pci->busIdLegacy) - 1);
    return NVML_SUCCESS;
}
