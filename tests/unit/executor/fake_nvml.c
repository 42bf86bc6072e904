/*
 * A test-only stand-in for libnvidia-ml.so.1, loaded by path through the
 * same dlopen code as the real NVML (--nvml-library, hw_nvml_probe). It
 * exports the NVML calls the executor uses, with NVML's documented
 * signatures, and answers from a JSON control file named by FAKE_NVML_FILE,
 * read at nvmlInit_v2:
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
 *              "uuid_error": 0}]}    nvmlDeviceGetUUID of this GPU
 *
 * GPUs are counted and indexed in array order. FAKE_NVML_FILE unset or
 * unreadable makes nvmlInit_v2 fail with NVML_ERROR_UNKNOWN (999).
 * fake_nvml_open counts nvmlInit_v2 calls not yet matched by nvmlShutdown,
 * so a test that holds the library open can check nothing was left held.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 16
#define MAX_MIG 8

struct fake_gpu {
	char uuid[96], name[96], bus_id[32];
	unsigned long long memory;
	int mig; /* -1 unsupported, 0 disabled, 1 enabled */
	int nmig;
	char mig_uuids[MAX_MIG][96];
	int handle_error, uuid_error;
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

static struct fake_gpu gpus[MAX_GPUS];
static struct fake_handle handles[MAX_GPUS], mig_handles[MAX_GPUS][MAX_MIG];
static int ngpus, count_error, cuda_version;
static char driver_version[80];

/* exported for tests; the rest are NVML's names */
int fake_nvml_open;
int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlSystemGetDriverVersion(char *version, unsigned int length);
int nvmlSystemGetCudaDriverVersion_v2(int *version);
int nvmlDeviceGetCount_v2(unsigned int *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device);
int nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length);
int nvmlDeviceGetName(void *device, char *name, unsigned int length);
int nvmlDeviceGetMemoryInfo(void *device, struct nvml_memory *memory);
int nvmlDeviceGetPciInfo_v3(void *device, struct nvml_pci_info *pci);
int nvmlDeviceGetMigMode(void *device, unsigned int *current, unsigned int *pending);
int nvmlDeviceGetMaxMigDeviceCount(void *device, unsigned int *count);
int nvmlDeviceGetMigDeviceHandleByIndex(void *device, unsigned int index, void **mig);
const char *nvmlErrorString(int result);

static void copy(char *out, size_t outsz, const json_t *v)
{
	snprintf(out, outsz, "%s", json_is_string(v) ? json_string_value(v) : "");
}

static int load(void)
{
	const char *path = getenv("FAKE_NVML_FILE");
	json_t *j, *a, *g;
	size_t i;
	int rc;

	if (!path || !(j = json_load_file(path, 0, NULL)))
		return 999;
	rc = (int)json_integer_value(json_object_get(j, "init_error"));
	count_error = (int)json_integer_value(json_object_get(j, "count_error"));
	cuda_version = (int)json_integer_value(json_object_get(j, "cuda_version"));
	copy(driver_version, sizeof(driver_version), json_object_get(j, "driver_version"));
	memset(gpus, 0, sizeof(gpus));
	ngpus = 0;
	a = json_object_get(j, "gpus");
	json_array_foreach(a, i, g)
	{
		struct fake_gpu *f = &gpus[ngpus];
		const char *mig = json_string_value(json_object_get(g, "mig_mode"));
		const json_t *m;
		size_t k;

		if (ngpus == MAX_GPUS)
			break;
		copy(f->uuid, sizeof(f->uuid), json_object_get(g, "uuid"));
		copy(f->name, sizeof(f->name), json_object_get(g, "name"));
		copy(f->bus_id, sizeof(f->bus_id), json_object_get(g, "pci_bus_id"));
		f->memory = (unsigned long long)json_integer_value(json_object_get(g, "memory_mb"))
			    << 20;
		f->mig = !mig || !strcmp(mig, "unsupported") ? -1 : !strcmp(mig, "enabled");
		json_array_foreach(json_object_get(g, "mig_devices"), k, m)
		{
			if (f->nmig < MAX_MIG)
				copy(f->mig_uuids[f->nmig++], sizeof(f->mig_uuids[0]), m);
		}
		f->handle_error = (int)json_integer_value(json_object_get(g, "handle_error"));
		f->uuid_error = (int)json_integer_value(json_object_get(g, "uuid_error"));
		handles[ngpus].gpu = f;
		handles[ngpus].mig = -1;
		ngpus++;
	}
	json_decref(j);
	return rc;
}

int nvmlInit_v2(void)
{
	int rc = load();

	if (rc == 0)
		fake_nvml_open++;
	return rc;
}

int nvmlShutdown(void)
{
	if (fake_nvml_open <= 0)
		return 1; /* NVML_ERROR_UNINITIALIZED */
	fake_nvml_open--;
	return 0;
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	if (!*driver_version)
		return 3; /* NVML_ERROR_NOT_SUPPORTED */
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

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void **device)
{
	if (index >= (unsigned int)ngpus)
		return 2; /* NVML_ERROR_INVALID_ARGUMENT */
	if (gpus[index].handle_error)
		return gpus[index].handle_error;
	*device = &handles[index];
	return 0;
}

int nvmlDeviceGetUUID(void *device, char *uuid, unsigned int length)
{
	const struct fake_handle *h = device;
	const char *u = h->mig >= 0 ? h->gpu->mig_uuids[h->mig] : h->gpu->uuid;

	if (h->mig < 0 && h->gpu->uuid_error)
		return h->gpu->uuid_error;
	if (strlen(u) >= length)
		return 7;
	snprintf(uuid, length, "%s", u);
	return 0;
}

int nvmlDeviceGetName(void *device, char *name, unsigned int length)
{
	const struct fake_handle *h = device;

	if (strlen(h->gpu->name) >= length)
		return 7;
	snprintf(name, length, "%s", h->gpu->name);
	return 0;
}

int nvmlDeviceGetMemoryInfo(void *device, struct nvml_memory *memory)
{
	const struct fake_handle *h = device;

	memory->total = h->gpu->memory;
	memory->used = h->gpu->memory / 100;
	memory->free = memory->total - memory->used;
	return 0;
}

int nvmlDeviceGetPciInfo_v3(void *device, struct nvml_pci_info *pci)
{
	const struct fake_handle *h = device;

	memset(pci, 0, sizeof(*pci));
	snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", h->gpu->bus_id);
	snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%.15s", h->gpu->bus_id + 4);
	return 0;
}

int nvmlDeviceGetMigMode(void *device, unsigned int *current, unsigned int *pending)
{
	const struct fake_handle *h = device;

	if (h->gpu->mig < 0)
		return 3; /* NVML_ERROR_NOT_SUPPORTED, as on pre-Ampere GPUs */
	*current = *pending = (unsigned int)h->gpu->mig;
	return 0;
}

int nvmlDeviceGetMaxMigDeviceCount(void *device, unsigned int *count)
{
	const struct fake_handle *h = device;

	if (h->gpu->mig < 0)
		return 3;
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
	case 15:
		return "GPU is lost";
	default:
		return "Unknown Error";
	}
}
