/* The documented subset of NVML (nvml.h, API version 12) that icxtrace uses, declared here because
 * these machines have no nvml.h.  Layouts and values follow NVIDIA's public header;
 * libnvidia-ml.so.1 is dlopen'ed at run time, never linked. */
#ifndef ICX_NVML_ABI_H
#define ICX_NVML_ABI_H

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef int nvmlReturn_t; /* enum nvmlReturn_enum */
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef int nvmlEnableState_t; /* NVML_FEATURE_DISABLED 0, NVML_FEATURE_ENABLED 1 */
#define NVML_FEATURE_ENABLED 1

typedef int nvmlIntNvLinkDeviceType_t;
#define NVML_NVLINK_DEVICE_TYPE_GPU 0x00
#define NVML_NVLINK_DEVICE_TYPE_IBMNPU 0x01
#define NVML_NVLINK_DEVICE_TYPE_SWITCH 0x02
#define NVML_NVLINK_DEVICE_TYPE_UNKNOWN 0xFF

#define NVML_NVLINK_MAX_LINKS 18
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16

typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;
_Static_assert(sizeof(nvmlPciInfo_t) == 68, "nvmlPciInfo_t");

typedef int nvmlValueType_t;
#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId; /* e.g. the NVLink link id for per-link fields */
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;
_Static_assert(sizeof(nvmlFieldValue_t) == 40, "nvmlFieldValue_t");

#define NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON 90 /* per-link speed, MB/s, active links */
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX 138 /* cumulative KiB; scopeId = link */
#define NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX 139

/* Entry points (declared so the simulated NVML and the tracer agree on them). */
nvmlReturn_t nvmlInit_v2(void);
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlShutdown(void);
const char *nvmlErrorString(nvmlReturn_t result);
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                      nvmlEnableState_t *isActive);
nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                 nvmlIntNvLinkDeviceType_t *pNvLinkDeviceType);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                 nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci);
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount,
                                      nvmlFieldValue_t *values);

#endif
