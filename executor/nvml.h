/*
 * NVML, the driver's management library, loaded at run time (dlopen of
 * libnvidia-ml.so.1 or a path): the declarations the executor uses, written
 * out from NVIDIA's NVML API reference so that no nvml.h is needed to build,
 * and the table of entry points a caller fills with nvml_load.
 *
 * nvmlReturn_t is an int-sized enum, nvmlDevice_t and nvmlEventSet_t are
 * opaque pointers, enum arguments are passed as unsigned int, and the
 * structs below are laid out as documented. NVML is thread-safe; every
 * nvmlInit_v2 must be matched by one nvmlShutdown.
 */
#ifndef TY_NVML_H
#define TY_NVML_H

#include "ty_err.h"

/* nvmlReturn_t values used by name */
#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_RESET_REQUIRED 16
#define NVML_ERROR_UNKNOWN 999

#define NVML_DEVICE_MIG_ENABLE 1
#define NVML_NAME_BUFSZ 96 /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */

/* nvmlEventType bits (nvmlDeviceRegisterEvents) */
#define NVML_EVENT_SINGLE_BIT_ECC 0x1ULL
#define NVML_EVENT_DOUBLE_BIT_ECC 0x2ULL
#define NVML_EVENT_XID_CRITICAL 0x8ULL

/* nvmlMemoryErrorType_t, nvmlEccCounterType_t */
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0
#define NVML_AGGREGATE_ECC 1

/* nvmlClocksEventReasons (formerly ...ThrottleReasons) bits */
#define NVML_CLOCKS_SW_POWER_CAP 0x4ULL
#define NVML_CLOCKS_HW_SLOWDOWN 0x8ULL
#define NVML_CLOCKS_SW_THERMAL_SLOWDOWN 0x20ULL
#define NVML_CLOCKS_HW_THERMAL_SLOWDOWN 0x40ULL
#define NVML_CLOCKS_HW_POWER_BRAKE_SLOWDOWN 0x80ULL

/* NVLink: links per GPU at most (NVML_NVLINK_MAX_LINKS), nvmlNvLinkErrorCounter_t */
#define NVML_NVLINK_MAX_LINKS 18
#define NVML_NVLINK_ERROR_DL_REPLAY 0
#define NVML_NVLINK_ERROR_DL_RECOVERY 1
#define NVML_NVLINK_ERROR_DL_CRC_FLIT 2
#define NVML_NVLINK_ERROR_DL_CRC_DATA 3

#define NVML_TEMPERATURE_GPU 0 /* nvmlTemperatureSensors_t */
#define NVML_FEATURE_ENABLED 1 /* nvmlEnableState_t */

typedef void *nvml_device;
typedef void *nvml_event_set;

struct nvml_memory { /* nvmlMemory_t (v1), bytes */
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
};

struct nvml_pci_info { /* nvmlPciInfo_t */
	char bus_id_legacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pci_device_id;
	unsigned int pci_subsystem_id;
	char bus_id[32];
};

struct nvml_event_data { /* nvmlEventData_t */
	nvml_device device;
	unsigned long long event_type;
	unsigned long long event_data; /* the Xid for NVML_EVENT_XID_CRITICAL */
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

struct nvml_utilization { /* nvmlUtilization_t, percent over the driver's last sample period */
	unsigned int gpu;
	unsigned int memory;
};

/*
 * The entry points. Those above `optional` are required: nvml_load fails
 * without them. The optional ones are NULL when the library lacks them (an
 * older driver); callers check before calling.
 */
struct nvml {
	const char *lib;
	void *h;
	int (*init)(void);			/* nvmlInit_v2 */
	int (*shutdown)(void);			/* nvmlShutdown */
	const char *(*errstr)(int result);	/* nvmlErrorString */
	int (*driver_version)(char *version, unsigned int length);
	int (*cuda_version)(int *version);	/* nvmlSystemGetCudaDriverVersion_v2 */
	int (*count)(unsigned int *count);	/* nvmlDeviceGetCount_v2 */
	int (*handle)(unsigned int index, nvml_device *device); /* ..._v2 */
	int (*uuid)(nvml_device device, char *uuid, unsigned int length);
	int (*name)(nvml_device device, char *name, unsigned int length);
	int (*memory)(nvml_device device, struct nvml_memory *memory);
	int (*pci)(nvml_device device, struct nvml_pci_info *pci); /* ..._v3 */
	int (*mig_mode)(nvml_device device, unsigned int *current, unsigned int *pending);
	int (*mig_max)(nvml_device device, unsigned int *count);
	int (*mig_handle)(nvml_device device, unsigned int index, nvml_device *mig);
	/* ---- optional ---- */
	int (*event_set_create)(nvml_event_set *set);
	int (*event_set_free)(nvml_event_set set);
	int (*event_set_wait)(nvml_event_set set, struct nvml_event_data *data,
			      unsigned int timeout_ms);	/* nvmlEventSetWait_v2 */
	int (*register_events)(nvml_device device, unsigned long long types, nvml_event_set set);
	int (*supported_events)(nvml_device device, unsigned long long *types);
	int (*ecc_total)(nvml_device device, unsigned int error_type, unsigned int counter_type,
			 unsigned long long *count);	/* nvmlDeviceGetTotalEccErrors */
	int (*remapped_rows)(nvml_device device, unsigned int *corr, unsigned int *unc,
			     unsigned int *pending, unsigned int *failure);
	int (*retired_pending)(nvml_device device, unsigned int *pending); /* nvmlEnableState_t */
	/* nvmlDeviceGetCurrentClocksEventReasons, or the older ...ThrottleReasons */
	int (*clock_reasons)(nvml_device device, unsigned long long *reasons);
	int (*nvlink_state)(nvml_device device, unsigned int link, unsigned int *active);
	int (*nvlink_errors)(nvml_device device, unsigned int link, unsigned int counter,
			     unsigned long long *value);
	int (*utilization)(nvml_device device, struct nvml_utilization *u);
	int (*power)(nvml_device device, unsigned int *milliwatts); /* nvmlDeviceGetPowerUsage */
	int (*temperature)(nvml_device device, unsigned int sensor, unsigned int *celsius);
	int (*handle_by_uuid)(const char *uuid, nvml_device *device);
};

/*
 * dlopen lib (a name or path, borrowed for n's life) and fill n. TY_EUNAVAIL
 * naming the library and the dlerror or the first required symbol missing;
 * n is then unloaded. Does not call nvmlInit_v2.
 */
int nvml_load(struct nvml *n, const char *lib, struct ty_err *err);
/* dlclose (n zeroed); a no-op on a zeroed n. The caller has shut NVML down. */
void nvml_unload(struct nvml *n);
/* nvmlErrorString of code, "unknown error" when NVML has none. */
const char *nvml_str(const struct nvml *n, int code);

#endif
