/*
 * NVML loaded at run time: the entry-point table of nvml.h filled by dlsym.
 */
#include "nvml.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct nvml_sym {
	size_t off;
	const char *name;
	bool required;
};

#define REQ(f, name) {offsetof(struct nvml, f), name, true}
#define OPT(f, name) {offsetof(struct nvml, f), name, false}
static const struct nvml_sym syms[] = {
    REQ(init, "nvmlInit_v2"),
    REQ(shutdown, "nvmlShutdown"),
    REQ(errstr, "nvmlErrorString"),
    REQ(driver_version, "nvmlSystemGetDriverVersion"),
    REQ(cuda_version, "nvmlSystemGetCudaDriverVersion_v2"),
    REQ(count, "nvmlDeviceGetCount_v2"),
    REQ(handle, "nvmlDeviceGetHandleByIndex_v2"),
    REQ(uuid, "nvmlDeviceGetUUID"),
    REQ(name, "nvmlDeviceGetName"),
    REQ(memory, "nvmlDeviceGetMemoryInfo"),
    REQ(pci, "nvmlDeviceGetPciInfo_v3"),
    REQ(mig_mode, "nvmlDeviceGetMigMode"),
    REQ(mig_max, "nvmlDeviceGetMaxMigDeviceCount"),
    REQ(mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex"),
    OPT(event_set_create, "nvmlEventSetCreate"),
    OPT(event_set_free, "nvmlEventSetFree"),
    OPT(event_set_wait, "nvmlEventSetWait_v2"),
    OPT(register_events, "nvmlDeviceRegisterEvents"),
    OPT(supported_events, "nvmlDeviceGetSupportedEventTypes"),
    OPT(ecc_total, "nvmlDeviceGetTotalEccErrors"),
    OPT(remapped_rows, "nvmlDeviceGetRemappedRows"),
    OPT(retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus"),
    OPT(clock_reasons, "nvmlDeviceGetCurrentClocksEventReasons"),
    OPT(nvlink_state, "nvmlDeviceGetNvLinkState"),
    OPT(nvlink_errors, "nvmlDeviceGetNvLinkErrorCounter"),
    OPT(utilization, "nvmlDeviceGetUtilizationRates"),
    OPT(power, "nvmlDeviceGetPowerUsage"),
    OPT(temperature, "nvmlDeviceGetTemperature"),
    OPT(handle_by_uuid, "nvmlDeviceGetHandleByUUID"),
};
#undef REQ
#undef OPT

int nvml_load(struct nvml *n, const char *lib, struct ty_err *err)
{
	const char *e;

	memset(n, 0, sizeof(*n));
	n->lib = lib;
	if (!(n->h = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
		e = dlerror();
		return ty_err_set(err, TY_EUNAVAIL, "no NVML: cannot load '%s': %s", lib,
				  e ? e : "unknown dlopen error");
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *f = dlsym(n->h, syms[i].name);

		/* drivers before r535 name the clock reasons "throttle" reasons */
		if (!f && syms[i].off == offsetof(struct nvml, clock_reasons))
			f = dlsym(n->h, "nvmlDeviceGetCurrentClocksThrottleReasons");
		/* every member is a function pointer of the same size as void * */
		memcpy((char *)n + syms[i].off, &f, sizeof(f));
		if (!f && syms[i].required) {
			int rc = ty_err_set(err, TY_EUNAVAIL, "NVML '%s' lacks %s", lib,
					    syms[i].name);

			nvml_unload(n);
			return rc;
		}
	}
	return 0;
}

void nvml_unload(struct nvml *n)
{
	if (n->h)
		dlclose(n->h);
	memset(n, 0, sizeof(*n));
}

const char *nvml_str(const struct nvml *n, int code)
{
	const char *s = n->errstr ? n->errstr(code) : NULL;

	return s ? s : "unknown error";
}
