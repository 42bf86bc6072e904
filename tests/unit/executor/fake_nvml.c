/*
 * A test-only stand-in for libnvidia-ml.so.1, loaded by path through the
 * same dlopen code as the real NVML (--nvml-library, executor/nvml.c). It
 * exports the NVML calls the executor uses, with NVML's documented
 * signatures, and answers from a JSON control file named by FAKE_NVML_FILE,
 * read at nvmlInit_v2 and read again by any later call once the file has
 * changed (so a test can change a running executor's GPUs):
 *
 *   {"init_error": 0,                NVML code nvmlInit_v2 returns (0: success)
 *    "count_error": 0,               ... and nvmlDeviceGetCount_v2
 *    "driver_version": "570.86.15",  nvmlSystemGetDriverVersion
 *    "cuda_version": 12080,          nvmlSystemGetCudaDriverVersion_v2
 *    "gpus": [{"uuid": "GPU-...", "name": "NVIDIA H100 80GB HBM3",
 *              "memory_mb": 81559, "pci_bus_id": "00000000:18:00.0",
 *              "mig_mode": "enabled" | "disabled" | "unsupported",
 *              "mig_devices": ["MIG-...", ...],
 *              "handle_error": 0,    nvmlDeviceGetHandleByIndex_v2 of this GPU
 *              "uuid_error": 0,      nvmlDeviceGetUUID of this GPU
 *              "lost": false,        every call on the GPU: NVML_ERROR_GPU_IS_LOST
 *              "utilization": 0,     nvmlDeviceGetUtilizationRates .gpu (percent)
 *              "memory_utilization": 0,              ... .memory
 *              "memory_used_mb": 0,  nvmlDeviceGetMemoryInfo .used (default 1 %)
 *              "power_mw": 0,        nvmlDeviceGetPowerUsage
 *              "temperature": 40,    nvmlDeviceGetTemperature
 *              "ecc_dbe": 0,         nvmlDeviceGetTotalEccErrors, uncorrected
 *                                    (volatile and aggregate alike)
 *              "remap_pending": false, "remap_failed": false, "remap_uncorrectable": 0,
 *                                    nvmlDeviceGetRemappedRows
 *              "retired_pending": false, nvmlDeviceGetRetiredPagesPendingStatus
 *              "clock_reasons": 0,   nvmlDeviceGetCurrentClocksEventReasons bits
 *              "nvlinks": [{"active": true, "replay": 0, "recovery": 0,
 *                           "crc_flit": 0, "crc_data": 0}],  one per link;
 *                                    none: the NVLink calls are Not Supported
 *              "events": 11}],       nvmlDeviceGetSupportedEventTypes (default
 *                                    single- and double-bit ECC and Xid)
 *    "events": [{"gpu": 0, "xid": 79},
 *               {"gpu": 0, "type": 2, "data": 0}]}   nvmlEventSetWait_v2
 *
 * GPUs are counted and indexed in array order. An event set sees the
 * "events" entries appended after it was created (like NVML, which reports
 * only what happens after registration), each once, for the GPUs and types
 * registered on it; nvmlEventSetWait_v2 waits up to its timeout for one,
 * then answers NVML_ERROR_TIMEOUT. FAKE_NVML_FILE unset or unreadable makes
 * nvmlInit_v2 fail with NVML_ERROR_UNKNOWN (999). fake_nvml_open counts
 * nvmlInit_v2 calls not yet matched by nvmlShutdown, so a test that holds
 * the library open can check nothing was left held.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_GPUS 16
#define MAX_MIG 8
#define MAX_LINKS 18
#define MAX_EVENTS 256
#define MAX_SETS 16

#define LOST 15	   /* NVML_ERROR_GPU_IS_LOST */
#define NOT_SUP 3  /* NVML_ERROR_NOT_SUPPORTED */
#define INVALID 2  /* NVML_ERROR_INVALID_ARGUMENT */
#define TIMEOUT 10 /* NVML_ERROR_TIMEOUT */

struct fake_link {
	bool active;
	unsigned long long counters[4]; /* replay, recovery, crc_flit, crc_data */
};

struct fake_gpu {
	char uuid[96], name[96], bus_id[32];
	unsigned long long memory, memory_used;
	int mig; /* -1 unsupported, 0 disabled, 1 enabled */
	int nmig;
	char mig_uuids[MAX_MIG][96];
	int handle_error, uuid_error;
	bool lost, remap_pending, remap_failed, retired_pending;
	unsigned int util, mem_util, power_mw, temperature, remap_unc;
	unsigned long long ecc_dbe, clock_reasons, events;
	int nlinks;
	struct fake_link links[MAX_LINKS];
};

/* A device handle points at one of these: a GPU, or one MIG device of it. */
struct fake_handle {
	struct fake_gpu *gpu;
	int mig; /* -1: the GPU itself */
};

struct nvml_memory {
	unsigned long long total, free, used;
};

struct nvml_pci_info {
	char bus_id_legacy[16];
	unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};

struct nvml_event_data {
	void *device;
	unsigned long long event_type, event_data;
	unsigned int gpu_instance_id, compute_instance_id;
};

struct nvml_utilization {
	unsigned int gpu, memory;
};

struct fake_event {
	int gpu;
	unsigned long long type, data;
};

struct fake_set {
	bool used;
	int next;			       /* the first event not yet seen */
	unsigned long long types[MAX_GPUS];    /* registered, per GPU */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_gpu gpus[MAX_GPUS];
static struct fake_handle handles[MAX_GPUS], mig_handles[MAX_GPUS][MAX_MIG];
static struct fake_event events[MAX_EVENTS];
static struct fake_set sets[MAX_SETS];
static int ngpus, nevents, count_error, cuda_version;
static char driver_version[80];
static struct timespec loaded_mtime;
static off_t loaded_size = -1;

/* exported for tests; the rest are NVML's names */
int fake_nvml_open;
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlSystemGetDriverVersion(char *version, unsigned int length);
int nvmlSystemGetCudaDriverVersion_v2(int *version);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetHandleByUUID(const char *uuid, void **device);
int nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length);
int nvmlDeviceGetName(void *device, char *name, unsigned int length);
int nvmlDeviceGetMemoryInfo(void *device, struct nvml_memory *memory);
int nvmlDeviceGetPciInfo_v3(void *device, struct nvml_pci_info *pci);
int nvmlDeviceGetMigMode(void *device, unsigned int *current, unsigned int *pending);
int nvmlDeviceGetMaxMigDeviceCount(void *device, unsigned int *count);
int nvmlDeviceGetMigDeviceHandleByIndex(void *device, unsigned int index, void **mig);
int nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u);
int nvmlDeviceGetPowerUsage(void *device, unsigned int *power);
int nvmlDeviceGetTemperature(void *device, unsigned int sensor, unsigned int *temp);
int nvmlDeviceGetTotalEccErrors(void *device, unsigned int error_type, unsigned int counter_type,
				unsigned long long *count);
int nvmlDeviceGetRemappedRows(void *device, unsigned int *corr, unsigned int *unc,
			      unsigned int *pending, unsigned int *failure);
int nvmlDeviceGetRetiredPagesPendingStatus(void *device, unsigned int *pending);
int nvmlDeviceGetCurrentClocksEventReasons(void *device, unsigned long long *reasons);
int nvmlDeviceGetNvLinkState(void *device, unsigned int link, unsigned int *active);
int nvmlDeviceGetNvLinkErrorCounter(void *device, unsigned int link, unsigned int counter,
				    unsigned long long *value);
int nvmlDeviceGetSupportedEventTypes(void *device, unsigned long long *types);
int nvmlEventSetCreate(void **set);
int nvmlEventSetFree(void *set);
int nvmlDeviceRegisterEvents(void *device, unsigned long long types, void *set);
int nvmlEventSetWait_v2(void *set, struct nvml_event_data *data, unsigned int timeout_ms);
const char *nvmlErrorString(int result);

static void copy(char *out, size_t outsz, const json_t *v)
{
	snprintf(out, outsz, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static unsigned long long num(const json_t *o, const char *k, unsigned long long dflt)
{
	const json_t *v = json_object_get(o, k);

	return json_is_integer(v) ? (unsigned long long)json_integer_value(v) : dflt;
}

static void load_gpu(struct fake_gpu *f, const json_t *g)
{
	const char *mig = json_string_value(json_object_get(g, "mig_mode"));
	const json_t *m;
	size_t k;

	memset(f, 0, sizeof(*f));
	copy(f->uuid, sizeof(f->uuid), json_object_get(g, "uuid"));
	copy(f->name, sizeof(f->name), json_object_get(g, "name"));
	copy(f->bus_id, sizeof(f->bus_id), json_object_get(g, "pci_bus_id"));
	f->memory = num(g, "memory_mb", 0) << 20;
	f->memory_used = json_object_get(g, "memory_used_mb") ? num(g, "memory_used_mb", 0) << 20
							       : f->memory / 100;
	f->mig = !mig || !strcmp(mig, "unsupported") ? -1 : !strcmp(mig, "enabled");
	json_array_foreach(json_object_get(g, "mig_devices"), k, m)
	{
		if (f->nmig < MAX_MIG)
			copy(f->mig_uuids[f->nmig++], sizeof(f->mig_uuids[0]), m);
	}
	f->handle_error = (int)num(g, "handle_error", 0);
	f->uuid_error = (int)num(g, "uuid_error", 0);
	f->lost = json_is_true(json_object_get(g, "lost"));
	f->util = (unsigned int)num(g, "utilization", 0);
	f->mem_util = (unsigned int)num(g, "memory_utilization", 0);
	f->power_mw = (unsigned int)num(g, "power_mw", 0);
	f->temperature = (unsigned int)num(g, "temperature", 40);
	f->ecc_dbe = num(g, "ecc_dbe", 0);
	f->remap_pending = json_is_true(json_object_get(g, "remap_pending"));
	f->remap_failed = json_is_true(json_object_get(g, "remap_failed"));
	f->remap_unc = (unsigned int)num(g, "remap_uncorrectable", 0);
	f->retired_pending = json_is_true(json_object_get(g, "retired_pending"));
	f->clock_reasons = num(g, "clock_reasons", 0);
	f->events = num(g, "events", 0xb);
	json_array_foreach(json_object_get(g, "nvlinks"), k, m)
	{
		struct fake_link *l;

		if (f->nlinks == MAX_LINKS)
			break;
		l = &f->links[f->nlinks++];
		l->active = !json_is_false(json_object_get(m, "active"));
		l->counters[0] = num(m, "replay", 0);
		l->counters[1] = num(m, "recovery", 0);
		l->counters[2] = num(m, "crc_flit", 0);
		l->counters[3] = num(m, "crc_data", 0);
	}
}

/* Read the control file (mu held); returns init_error, 999 when it cannot be read. */
static int load(void)
{
	const char *path = getenv("FAKE_NVML_FILE");
	json_t *j, *g;
	struct stat st;
	size_t i;
	int rc;

	if (!path || stat(path, &st) || !(j = json_load_file(path, 0, NULL)))
		return 999;
	loaded_mtime = st.st_mtim;
	loaded_size = st.st_size;
	rc = (int)num(j, "init_error", 0);
	count_error = (int)num(j, "count_error", 0);
	cuda_version = (int)num(j, "cuda_version", 0);
	copy(driver_version, sizeof(driver_version), json_object_get(j, "driver_version"));
	ngpus = 0;
	json_array_foreach(json_object_get(j, "gpus"), i, g)
	{
		if (ngpus == MAX_GPUS)
			break;
		load_gpu(&gpus[ngpus], g);
		handles[ngpus].gpu = &gpus[ngpus];
		handles[ngpus].mig = -1;
		ngpus++;
	}
	nevents = 0;
	json_array_foreach(json_object_get(j, "events"), i, g)
	{
		struct fake_event *e = &events[nevents];

		if (nevents == MAX_EVENTS)
			break;
		e->gpu = (int)num(g, "gpu", 0);
		if (json_object_get(g, "xid")) {
			e->type = 0x8; /* nvmlEventTypeXidCriticalError */
			e->data = num(g, "xid", 0);
		} else {
			e->type = num(g, "type", 0);
			e->data = num(g, "data", 0);
		}
		nevents++;
	}
	json_decref(j);
	return rc;
}

/* Read the control file again when it changed since it was read (mu held). */
static void refresh(void)
{
	const char *path = getenv("FAKE_NVML_FILE");
	struct stat st;

	if (!path || stat(path, &st))
		return;
	if (st.st_size != loaded_size || st.st_mtim.tv_sec != loaded_mtime.tv_sec ||
	    st.st_mtim.tv_nsec != loaded_mtime.tv_nsec)
		load();
}

/* The GPU of a handle, the file read again; NULL for a bad handle. */
static struct fake_gpu *gpu_of(void *device)
{
	const struct fake_handle *h = device;

	refresh();
	return h && h->gpu ? h->gpu : NULL;
}

#define LOCKED(expr)                                                          \
	do {                                                                  \
		int rc_;                                                      \
		pthread_mutex_lock(&mu);                                      \
		rc_ = (expr);                                                 \
		pthread_mutex_unlock(&mu);                                    \
		return rc_;                                                   \
	} while (0)

static int init_locked(void)
{
	int rc = load();

	if (rc == 0)
		fake_nvml_open++;
	return rc;
}

int nvmlInit_v2(void)
{
	LOCKED(init_locked());
}

static int shutdown_locked(void)
{
	if (fake_nvml_open <= 0)
		return 1; /* NVML_ERROR_UNINITIALIZED */
	fake_nvml_open--;
	return 0;
}

int nvmlShutdown(void)
{
	LOCKED(shutdown_locked());
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	if (!*driver_version)
		return NOT_SUP;
	if (strlen(driver_version) >= length)
		return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
	snprintf(version, length, "%s", driver_version);
	return 0;
}

int nvmlSystemGetCudaDriverVersion_v2(int *version)
{
	*version = cuda_version;
	return 0;
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (count_error)
		return count_error;
	*count = (unsigned int)ngpus;
	return 0;
}

static int handle_locked(unsigned int index, void **device)
{
	refresh();
	if (index >= (unsigned int)ngpus)
		return INVALID;
	if (gpus[index].handle_error)
		return gpus[index].handle_error;
	if (gpus[index].lost)
		return LOST;
	*device = &handles[index];
	return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
	LOCKED(handle_locked(index, device));
}

static int by_uuid_locked(const char *uuid, void **device)
{
	refresh();
	for (int i = 0; i < ngpus; i++)
		if (!strcmp(gpus[i].uuid, uuid))
			return gpus[i].lost ? LOST : (*device = &handles[i], 0);
	return 6; /* NVML_ERROR_NOT_FOUND */
}

int nvmlDeviceGetHandleByUUID(const char *uuid, void **device)
{
	LOCKED(by_uuid_locked(uuid, device));
}

static int uuid_locked(void *device, char *uuid, unsigned int length)
{
	const struct fake_handle *h = device;
	struct fake_gpu *g = gpu_of(device);
	const char *u;

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	u = h->mig >= 0 ? g->mig_uuids[h->mig] : g->uuid;
	if (h->mig < 0 && g->uuid_error)
		return g->uuid_error;
	if (strlen(u) >= length)
		return 7;
	snprintf(uuid, length, "%s", u);
	return 0;
}

int nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length)
{
	LOCKED(uuid_locked(device, uuid, length));
}

static int name_locked(void *device, char *name, unsigned int length)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	if (strlen(g->name) >= length)
		return 7;
	snprintf(name, length, "%s", g->name);
	return 0;
}

int nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
	LOCKED(name_locked(device, name, length));
}

static int memory_locked(void *device, struct nvml_memory *memory)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	memory->total = g->memory;
	memory->used = g->memory_used < g->memory ? g->memory_used : g->memory;
	memory->free = memory->total - memory->used;
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *device, struct nvml_memory *memory)
{
	LOCKED(memory_locked(device, memory));
}

static int pci_locked(void *device, struct nvml_pci_info *pci)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	memset(pci, 0, sizeof(*pci));
	snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", g->bus_id);
	snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%.15s",
		 strlen(g->bus_id) > 4 ? g->bus_id + 4 : "");
	return 0;
}

int nvmlDeviceGetPciInfo_v3(void *device, struct nvml_pci_info *pci)
{
	LOCKED(pci_locked(device, pci));
}

static int mig_mode_locked(void *device, unsigned int *current, unsigned int *pending)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->mig < 0)
		return NOT_SUP; /* as on pre-Ampere GPUs */
	*current = *pending = (unsigned int)g->mig;
	return 0;
}

int nvmlDeviceGetMigMode(void *device, unsigned int *current, unsigned int *pending)
{
	LOCKED(mig_mode_locked(device, current, pending));
}

int nvmlDeviceGetMaxMigDeviceCount(void *device, unsigned int *count)
{
	const struct fake_handle *h = device;

	if (h->gpu->mig < 0)
		return NOT_SUP;
	*count = h->gpu->mig ? 7 : 0;
	return 0;
}

int nvmlDeviceGetMigDeviceHandleByIndex(void *device, unsigned int index, void **mig)
{
	const struct fake_handle *h = device;
	int g = (int)(h - handles);

	/* like NVML: indices without a MIG device are NVML_ERROR_NOT_FOUND */
	if (h->gpu->mig != 1 || index >= (unsigned int)h->gpu->nmig || index >= MAX_MIG)
		return 6;
	mig_handles[g][index].gpu = h->gpu;
	mig_handles[g][index].mig = (int)index;
	*mig = &mig_handles[g][index];
	return 0;
}

/* ---- health and telemetry ---- */

static int util_locked(void *device, struct nvml_utilization *u)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	u->gpu = g->util;
	u->memory = g->mem_util;
	return 0;
}

int nvmlDeviceGetUtilizationRates(void *device, struct nvml_utilization *u)
{
	LOCKED(util_locked(device, u));
}

static int power_locked(void *device, unsigned int *power)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	*power = g->power_mw;
	return 0;
}

int nvmlDeviceGetPowerUsage(void *device, unsigned int *power)
{
	LOCKED(power_locked(device, power));
}

static int temp_locked(void *device, unsigned int sensor, unsigned int *temp)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g || sensor != 0)
		return INVALID;
	if (g->lost)
		return LOST;
	*temp = g->temperature;
	return 0;
}

int nvmlDeviceGetTemperature(void *device, unsigned int sensor, unsigned int *temp)
{
	LOCKED(temp_locked(device, sensor, temp));
}

static int ecc_locked(void *device, unsigned int error_type, unsigned int counter_type,
		      unsigned long long *count)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g || counter_type > 1)
		return INVALID;
	if (g->lost)
		return LOST;
	*count = error_type == 1 ? g->ecc_dbe : 0;
	return 0;
}

int nvmlDeviceGetTotalEccErrors(void *device, unsigned int error_type, unsigned int counter_type,
				unsigned long long *count)
{
	LOCKED(ecc_locked(device, error_type, counter_type, count));
}

static int remap_locked(void *device, unsigned int *corr, unsigned int *unc,
			unsigned int *pending, unsigned int *failure)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	*corr = 0;
	*unc = g->remap_unc;
	*pending = g->remap_pending;
	*failure = g->remap_failed;
	return 0;
}

int nvmlDeviceGetRemappedRows(void *device, unsigned int *corr, unsigned int *unc,
			      unsigned int *pending, unsigned int *failure)
{
	LOCKED(remap_locked(device, corr, unc, pending, failure));
}

static int retired_locked(void *device, unsigned int *pending)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	*pending = g->retired_pending;
	return 0;
}

int nvmlDeviceGetRetiredPagesPendingStatus(void *device, unsigned int *pending)
{
	LOCKED(retired_locked(device, pending));
}

static int reasons_locked(void *device, unsigned long long *reasons)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	*reasons = g->clock_reasons;
	return 0;
}

int nvmlDeviceGetCurrentClocksEventReasons(void *device, unsigned long long *reasons)
{
	LOCKED(reasons_locked(device, reasons));
}

static int link_state_locked(void *device, unsigned int link, unsigned int *active)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	if (g->nlinks == 0)
		return NOT_SUP;
	if (link >= (unsigned int)g->nlinks)
		return INVALID;
	*active = g->links[link].active;
	return 0;
}

int nvmlDeviceGetNvLinkState(void *device, unsigned int link, unsigned int *active)
{
	LOCKED(link_state_locked(device, link, active));
}

static int link_errors_locked(void *device, unsigned int link, unsigned int counter,
			      unsigned long long *value)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	if (g->nlinks == 0)
		return NOT_SUP;
	if (link >= (unsigned int)g->nlinks || counter > 3)
		return INVALID;
	*value = g->links[link].counters[counter];
	return 0;
}

int nvmlDeviceGetNvLinkErrorCounter(void *device, unsigned int link, unsigned int counter,
				    unsigned long long *value)
{
	LOCKED(link_errors_locked(device, link, counter, value));
}

static int supported_locked(void *device, unsigned long long *types)
{
	struct fake_gpu *g = gpu_of(device);

	if (!g)
		return INVALID;
	if (g->lost)
		return LOST;
	*types = g->events;
	return 0;
}

int nvmlDeviceGetSupportedEventTypes(void *device, unsigned long long *types)
{
	LOCKED(supported_locked(device, types));
}

static int set_create_locked(void **set)
{
	refresh();
	for (int i = 0; i < MAX_SETS; i++)
		if (!sets[i].used) {
			memset(&sets[i], 0, sizeof(sets[i]));
			sets[i].used = true;
			sets[i].next = nevents;
			*set = &sets[i];
			return 0;
		}
	return 999;
}

int nvmlEventSetCreate(void **set)
{
	LOCKED(set_create_locked(set));
}

static int set_free_locked(void *set)
{
	struct fake_set *s = set;

	if (!s || !s->used)
		return INVALID;
	s->used = false;
	return 0;
}

int nvmlEventSetFree(void *set)
{
	LOCKED(set_free_locked(set));
}

static int register_locked(void *device, unsigned long long types, void *set)
{
	const struct fake_handle *h = device;
	struct fake_gpu *g = gpu_of(device);
	struct fake_set *s = set;

	if (!g || !s || !s->used || h->mig >= 0)
		return INVALID;
	if (g->lost)
		return LOST;
	if (types & ~g->events)
		return NOT_SUP;
	s->types[h - handles] |= types;
	return 0;
}

int nvmlDeviceRegisterEvents(void *device, unsigned long long types, void *set)
{
	LOCKED(register_locked(device, types, set));
}

/* The next event for s, or TIMEOUT (mu held). */
static int next_event_locked(struct fake_set *s, struct nvml_event_data *data)
{
	refresh();
	if (s->next > nevents) /* the file was rewritten shorter */
		s->next = nevents;
	while (s->next < nevents) {
		const struct fake_event *e = &events[s->next++];

		if (e->gpu < 0 || e->gpu >= ngpus || !(s->types[e->gpu] & e->type))
			continue;
		memset(data, 0, sizeof(*data));
		data->device = &handles[e->gpu];
		data->event_type = e->type;
		data->event_data = e->data;
		return 0;
	}
	return TIMEOUT;
}

int nvmlEventSetWait_v2(void *set, struct nvml_event_data *data, unsigned int timeout_ms)
{
	struct fake_set *s = set;
	struct timespec step = {0, 20 * 1000000L};
	unsigned int waited = 0;
	int rc;

	if (!s || !s->used)
		return INVALID;
	for (;;) {
		pthread_mutex_lock(&mu);
		rc = next_event_locked(s, data);
		pthread_mutex_unlock(&mu);
		if (rc != TIMEOUT || waited >= timeout_ms)
			return rc;
		nanosleep(&step, NULL);
		waited += 20;
	}
}

const char *nvmlErrorString(int result)
{
	switch (result) {
	case 0:
		return "Success";
	case 1:
		return "Uninitialized";
	case 2:
		return "Invalid Argument";
	case 3:
		return "Not Supported";
	case 6:
		return "Not Found";
	case 7:
		return "Insufficient Size";
	case 9:
		return "Driver Not Loaded";
	case 10:
		return "Timeout";
	case 15:
		return "GPU is lost";
	default:
		return "Unknown Error";
	}
}
