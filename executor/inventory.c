/*
 * Hardware inventory: GPUs through dlopened NVML (the CUDA runtime as a
 * fallback), HCAs through
 * libibverbs' device list and sysfs port attributes, and the inventory as
 * JSON (register message, --inventory-file).
 */
#include "hw.h"
#include "nvml.h"
#include "ty_json.h"
#include "ty_log.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void hw_inventory_clear(struct hw_inventory *inv)
{
	free(inv->gpus);
	free(inv->hcas);
	memset(inv, 0, sizeof(*inv));
}

/* in cut to outsz - 1 bytes (sysfs lines can be longer than our fields) */
static void copy_str(char *out, size_t outsz, const char *in)
{
	size_t n = strnlen(in, outsz - 1);

	memcpy(out, in, n);
	out[n] = '\0';
}

void hw_names_free(char **names)
{
	if (!names)
		return;
	for (char **p = names; *p; p++)
		free(*p);
	free(names);
}

/* The first line of a sysfs file into out, without the newline; false if unreadable. */
static bool read_line(char *out, size_t outsz, const char *path)
{
	FILE *f = fopen(path, "re");
	bool ok;

	out[0] = '\0';
	if (!f)
		return false;
	ok = fgets(out, (int)outsz, f) != NULL;
	fclose(f);
	out[strcspn(out, "\n")] = '\0';
	return ok;
}

/* ---- GPUs ---- */

const char *const hw_cudart_default[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12",
					 NULL};

/*
 * The leading fields of struct cudaDeviceProp (driver_types.h), unchanged
 * since CUDA 10 and across the _v2 ABI of CUDA 12: we read only these and
 * hand the runtime a buffer larger than any version's whole struct (1008
 * bytes in CUDA 13), so the executor needs no CUDA header to build.
 */
struct cuda_prop_head {
	char name[256];
	unsigned char uuid[16];
	char luid[8];
	unsigned int luid_node_mask;
	size_t total_global_mem;
};
#define CUDA_PROP_BUFSZ 8192

#define CUDA_SUCCESS 0
#define CUDA_ERROR_NO_DEVICE 100

typedef int (*cuda_count_fn)(int *count);
typedef int (*cuda_props_fn)(void *prop, int device);
typedef int (*cuda_busid_fn)(char *id, int len, int device);
typedef const char *(*cuda_errstr_fn)(int error);

struct cudart {
	const char *lib;
	cuda_count_fn count;
	cuda_props_fn props;
	cuda_busid_fn busid;
	cuda_errstr_fn errstr;
};

static int cuda_fail(struct ty_err *err, const struct cudart *c, const char *call, int device,
		     int code)
{
	const char *s = c->errstr(code);
	char dev[24] = "";

	if (device >= 0)
		snprintf(dev, sizeof(dev), " of GPU %d", device);
	if (code == CUDA_ERROR_NO_DEVICE)
		return ty_err_set(err, TY_ENOTFOUND, "CUDA runtime '%s': %s%s: %s (error %d)",
				  c->lib, call, dev, s ? s : "unknown error", code);
	return ty_err_set(err, TY_EIO, "CUDA runtime '%s': %s%s: %s (error %d)", c->lib, call, dev,
			  s ? s : "unknown error", code);
}

/* Load the first of libs that opens; its handle is kept for the process. */
static int cudart_load(struct cudart *c, const char *const *libs, struct ty_err *err)
{
	char tried[1024] = "", last[512] = "";
	void *h = NULL;
	size_t o = 0;

	for (const char *const *l = libs; l && *l && !h; l++) {
		const char *e;

		if ((h = dlopen(*l, RTLD_NOW | RTLD_LOCAL))) {
			c->lib = *l;
			break;
		}
		e = dlerror();
		snprintf(last, sizeof(last), "%s", e ? e : "unknown dlopen error");
		o += (size_t)snprintf(tried + o, o < sizeof(tried) ? sizeof(tried) - o : 0, "%s%s",
				      o ? ", " : "", *l);
		if (o >= sizeof(tried))
			o = sizeof(tried) - 1;
	}
	if (!h)
		return ty_err_set(err, TY_EUNAVAIL, "no CUDA runtime: cannot load %s (last: %s)",
				  *tried ? tried : "(no library given)", last);
	/* *(void **) keeps ISO C quiet about object to function pointer casts */
	*(void **)&c->count = dlsym(h, "cudaGetDeviceCount");
	*(void **)&c->props = dlsym(h, "cudaGetDeviceProperties_v2");
	if (!c->props)
		*(void **)&c->props = dlsym(h, "cudaGetDeviceProperties");
	*(void **)&c->busid = dlsym(h, "cudaDeviceGetPCIBusId");
	*(void **)&c->errstr = dlsym(h, "cudaGetErrorString");
	if (!c->count || !c->props || !c->busid || !c->errstr)
		return ty_err_set(err, TY_EUNAVAIL, "CUDA runtime '%s' lacks %s", c->lib,
				  !c->count   ? "cudaGetDeviceCount"
				  : !c->props ? "cudaGetDeviceProperties"
				  : !c->busid ? "cudaDeviceGetPCIBusId"
					      : "cudaGetErrorString");
	return 0;
}

static void uuid_format(char *out, size_t outsz, const unsigned char u[16])
{
	snprintf(out, outsz,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
		 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
		 u[14], u[15]);
}

/* A name the runtime filled: NUL-terminated within n, printable. */
static void copy_name(char *out, size_t outsz, const char *in, size_t n)
{
	size_t i;

	for (i = 0; i < n && i + 1 < outsz && in[i]; i++)
		out[i] = isprint((unsigned char)in[i]) ? in[i] : '?';
	out[i] = '\0';
}

int hw_gpus_probe(struct hw_inventory *inv, const char *const *libs, struct ty_err *err)
{
	struct cudart c = {0};
	struct hw_gpu *gpus = NULL;
	unsigned char *buf = NULL;
	int n = 0, code, rc;

	free(inv->gpus);
	inv->gpus = NULL;
	inv->ngpus = 0;
	inv->gpu_source[0] = '\0';
	if ((rc = cudart_load(&c, libs, err)))
		return rc;
	if ((code = c.count(&n)) != CUDA_SUCCESS)
		return cuda_fail(err, &c, "cudaGetDeviceCount", -1, code);
	if (n <= 0)
		return ty_err_set(err, TY_ENOTFOUND, "CUDA runtime '%s' reports no device", c.lib);
	if (n > HW_MAX_GPUS)
		return ty_err_set(err, TY_EIO, "CUDA runtime '%s' reports %d devices (over %d)",
				  c.lib, n, HW_MAX_GPUS);
	if (!(gpus = calloc((size_t)n, sizeof(*gpus))) || !(buf = malloc(CUDA_PROP_BUFSZ))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		struct cuda_prop_head head;
		char busid[HW_PCI_MAX] = "";

		memset(buf, 0, CUDA_PROP_BUFSZ);
		if ((code = c.props(buf, i)) != CUDA_SUCCESS) {
			rc = cuda_fail(err, &c, "cudaGetDeviceProperties", i, code);
			goto out;
		}
		if ((code = c.busid(busid, (int)sizeof(busid), i)) != CUDA_SUCCESS) {
			rc = cuda_fail(err, &c, "cudaDeviceGetPCIBusId", i, code);
			goto out;
		}
		memcpy(&head, buf, sizeof(head));
		gpus[i].index = i;
		copy_name(gpus[i].name, sizeof(gpus[i].name), head.name, sizeof(head.name));
		gpus[i].memory_mb = (int64_t)(head.total_global_mem >> 20);
		uuid_format(gpus[i].uuid, sizeof(gpus[i].uuid), head.uuid);
		copy_name(gpus[i].pci_bus_id, sizeof(gpus[i].pci_bus_id), busid, sizeof(busid));
		gpus[i].numa_node = hw_numa_node(NULL, gpus[i].pci_bus_id);
		gpus[i].mig_mode = HW_MIG_UNKNOWN;
	}
	inv->gpus = gpus;
	inv->ngpus = (size_t)n;
	gpus = NULL;
	snprintf(inv->gpu_source, sizeof(inv->gpu_source), "cudart");
out:
	free(gpus);
	free(buf);
	return rc;
}

/* ---- GPUs through NVML ---- */

/* "00000000:3B:00.0" (NVML) or "0000:3B:00.0" (CUDA) -> "0000:3b:00.0" (sysfs); false if not a bus id. */
static bool bus_id_norm(char *out, size_t outsz, const char *in)
{
	unsigned int dom, bus, dev, fn;
	int end = 0;

	if (sscanf(in, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &end) != 4 || in[end] ||
	    dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
		return false;
	snprintf(out, outsz, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
	return true;
}

int hw_numa_node(const char *sysfs_root, const char *bus_id)
{
	char id[HW_PCI_MAX], path[4200], line[32], *end;
	long v;

	if (!bus_id_norm(id, sizeof(id), bus_id))
		return -1;
	snprintf(path, sizeof(path), "%s/bus/pci/devices/%s/numa_node",
		 sysfs_root ? sysfs_root : "/sys", id);
	if (!read_line(line, sizeof(line), path))
		return -1;
	v = strtol(line, &end, 10);
	return end != line && !*end && v >= 0 && v < 65536 ? (int)v : -1;
}

/* A fault of GPU i appended to inv->gpu_fault ("; " between them, cut when full). */
static void gpu_fault_add(struct hw_inventory *inv, unsigned int i, const struct nvml *n,
			  const char *call, int code)
{
	size_t o = strlen(inv->gpu_fault);

	snprintf(inv->gpu_fault + o, sizeof(inv->gpu_fault) - o, "%sGPU %u: %s: %s (error %d)",
		 o ? "; " : "", i, call, nvml_str(n, code), code);
}

/* One GPU's fields; false with the fault noted when a required one cannot be read. */
static bool nvml_gpu(struct hw_gpu *g, struct hw_inventory *inv, const struct nvml *n,
		     unsigned int i, const char *sysfs_root)
{
	char name[NVML_NAME_BUFSZ] = "", uuid[HW_MIG_UUID_MAX] = "";
	struct nvml_memory mem = {0};
	struct nvml_pci_info pci;
	unsigned int cur = 0, pend = 0, max = 0;
	nvml_device d = NULL;
	int code;

	memset(&pci, 0, sizeof(pci));
	memset(g, 0, sizeof(*g));
	if ((code = n->handle(i, &d)) != NVML_SUCCESS) {
		gpu_fault_add(inv, i, n, "nvmlDeviceGetHandleByIndex_v2", code);
		return false;
	}
	if ((code = n->uuid(d, uuid, sizeof(uuid))) != NVML_SUCCESS) {
		gpu_fault_add(inv, i, n, "nvmlDeviceGetUUID", code);
		return false;
	}
	if ((code = n->name(d, name, sizeof(name))) != NVML_SUCCESS) {
		gpu_fault_add(inv, i, n, "nvmlDeviceGetName", code);
		return false;
	}
	if ((code = n->memory(d, &mem)) != NVML_SUCCESS) {
		gpu_fault_add(inv, i, n, "nvmlDeviceGetMemoryInfo", code);
		return false;
	}
	if ((code = n->pci(d, &pci)) != NVML_SUCCESS) {
		gpu_fault_add(inv, i, n, "nvmlDeviceGetPciInfo_v3", code);
		return false;
	}
	pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
	if (!bus_id_norm(g->pci_bus_id, sizeof(g->pci_bus_id), pci.bus_id)) {
		size_t o = strlen(inv->gpu_fault);

		snprintf(inv->gpu_fault + o, sizeof(inv->gpu_fault) - o,
			 "%sGPU %u: nvmlDeviceGetPciInfo_v3: bus id '%.32s' not understood",
			 o ? "; " : "", i, pci.bus_id);
		return false;
	}
	g->index = (int)i;
	copy_name(g->name, sizeof(g->name), name, sizeof(name));
	copy_name(g->uuid, sizeof(g->uuid), uuid, sizeof(uuid));
	g->memory_mb = (int64_t)(mem.total >> 20);
	g->numa_node = hw_numa_node(sysfs_root, g->pci_bus_id);
	/* pre-Ampere GPUs answer NVML_ERROR_NOT_SUPPORTED: no MIG, mode unknown */
	g->mig_mode = HW_MIG_UNKNOWN;
	if (n->mig_mode(d, &cur, &pend) == NVML_SUCCESS)
		g->mig_mode = cur == NVML_DEVICE_MIG_ENABLE ? HW_MIG_ENABLED : HW_MIG_DISABLED;
	if (g->mig_mode == HW_MIG_ENABLED && n->mig_max(d, &max) == NVML_SUCCESS) {
		/* indices without a MIG device answer NVML_ERROR_NOT_FOUND */
		for (unsigned int k = 0; k < max && g->nmig < HW_MAX_MIG; k++) {
			nvml_device m = NULL;
			char mu[HW_MIG_UUID_MAX] = "";

			if (n->mig_handle(d, k, &m) != NVML_SUCCESS ||
			    n->uuid(m, mu, sizeof(mu)) != NVML_SUCCESS)
				continue;
			copy_name(g->mig_uuids[g->nmig], sizeof(g->mig_uuids[0]), mu, sizeof(mu));
			g->nmig++;
		}
	}
	return true;
}

int hw_nvml_probe(struct hw_inventory *inv, const char *lib, const char *sysfs_root,
		  struct ty_err *err)
{
	struct nvml n = {0};
	struct hw_gpu *gpus = NULL;
	char ver[HW_VERSION_MAX] = "";
	unsigned int count = 0, k = 0;
	bool init = false;
	int code, cuda = 0, rc = 0;

	free(inv->gpus);
	inv->gpus = NULL;
	inv->ngpus = 0;
	inv->driver_version[0] = inv->cuda_version[0] = inv->gpu_source[0] = '\0';
	inv->gpu_fault[0] = '\0';
	if ((rc = nvml_load(&n, lib, err)))
		goto out;
	if ((code = n.init()) != NVML_SUCCESS) {
		rc = ty_err_set(err, TY_EUNAVAIL, "NVML '%s': nvmlInit_v2: %s (error %d)", lib,
				nvml_str(&n, code), code);
		goto out;
	}
	init = true;
	/* the versions are for the record: a driver that cannot say still has GPUs */
	if (n.driver_version(ver, sizeof(ver)) == NVML_SUCCESS)
		copy_name(inv->driver_version, sizeof(inv->driver_version), ver, sizeof(ver));
	if (n.cuda_version(&cuda) == NVML_SUCCESS && cuda > 0)
		snprintf(inv->cuda_version, sizeof(inv->cuda_version), "%d.%d", cuda / 1000,
			 cuda % 1000 / 10);
	if ((code = n.count(&count)) != NVML_SUCCESS) {
		rc = ty_err_set(err, TY_EIO, "NVML '%s': nvmlDeviceGetCount_v2: %s (error %d)",
				lib, nvml_str(&n, code), code);
		goto out;
	}
	if (count == 0) {
		rc = ty_err_set(err, TY_ENOTFOUND, "NVML '%s' reports no GPU", lib);
		goto out;
	}
	if (count > HW_MAX_GPUS) {
		rc = ty_err_set(err, TY_EIO, "NVML '%s' reports %u GPUs (over %d)", lib, count,
				HW_MAX_GPUS);
		goto out;
	}
	if (!(gpus = calloc(count, sizeof(*gpus)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (unsigned int i = 0; i < count; i++)
		if (nvml_gpu(&gpus[k], inv, &n, i, sysfs_root))
			k++;
	if (k == 0) {
		rc = ty_err_set(err, TY_EIO, "NVML '%s': no GPU could be read: %s", lib,
				inv->gpu_fault);
		goto out;
	}
	inv->gpus = gpus;
	inv->ngpus = k;
	gpus = NULL;
	snprintf(inv->gpu_source, sizeof(inv->gpu_source), "nvml");
out:
	if (init)
		n.shutdown();
	nvml_unload(&n);
	free(gpus);
	return rc;
}

/* ---- HCAs ---- */

typedef void **(*ibv_list_fn)(int *n);
typedef void (*ibv_free_fn)(void **list);
typedef const char *(*ibv_name_fn)(void *dev);

char **hw_ib_list_verbs(void *ctx, struct ty_err *err)
{
	const char *lib = ctx ? (const char *)ctx : "libibverbs.so.1";
	ibv_list_fn list;
	ibv_free_fn lfree;
	ibv_name_fn name;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL), **devs = NULL;
	char **names = NULL;
	int n = 0, i;

	if (!h) {
		const char *e = dlerror();

		ty_err_set(err, TY_EUNAVAIL, "no libibverbs: cannot load '%s': %s", lib,
			   e ? e : "unknown dlopen error");
		return NULL;
	}
	*(void **)&list = dlsym(h, "ibv_get_device_list");
	*(void **)&lfree = dlsym(h, "ibv_free_device_list");
	*(void **)&name = dlsym(h, "ibv_get_device_name");
	if (!list || !lfree || !name) {
		ty_err_set(err, TY_EUNAVAIL, "libibverbs '%s' lacks %s", lib,
			   !list    ? "ibv_get_device_list"
			   : !lfree ? "ibv_free_device_list"
				    : "ibv_get_device_name");
		goto out;
	}
	/* NULL (ENOSYS: no kernel support) is the same as no device to us */
	devs = list(&n);
	if (!devs || n < 0)
		n = 0;
	if (!(names = calloc((size_t)n + 1, sizeof(char *)))) {
		ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (i = 0; i < n; i++) {
		const char *s = name(devs[i]);

		if (!(names[i] = strdup(s ? s : "?"))) {
			hw_names_free(names);
			names = NULL;
			ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
out:
	if (devs)
		lfree(devs);
	dlclose(h);
	return names;
}

/* "0000:0000:0000:0000:0000:ffff:0a00:0001" holds a usable IPv4 address. */
static bool gid_ipv4(const char *s)
{
	unsigned int w[8];
	int n = 0;

	if (sscanf(s, "%4x:%4x:%4x:%4x:%4x:%4x:%4x:%4x%n", &w[0], &w[1], &w[2], &w[3], &w[4], &w[5],
		   &w[6], &w[7], &n) != 8 ||
	    s[n])
		return false;
	for (int i = 0; i < 5; i++)
		if (w[i])
			return false;
	return w[5] == 0xffff && (w[6] || w[7]);
}

static int roce_version(const char *type)
{
	if (!strncmp(type, "RoCE v2", 7))
		return 2;
	if (!strncmp(type, "IB/RoCE v1", 10) || !strncmp(type, "RoCE v1", 7))
		return 1;
	return 0;
}

static bool all_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

int hw_roce_gid_index(const char *port_dir)
{
	char path[4096], line[128];
	int best_v2 = -1, best_v1 = -1;
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/gids", port_dir);
	if (!(dir = opendir(path)))
		return -1;
	while ((d = readdir(dir))) {
		long i;
		int v;

		if (!all_digits(d->d_name) || (i = strtol(d->d_name, NULL, 10)) >= HW_MAX_GIDS)
			continue;
		snprintf(path, sizeof(path), "%s/gids/%ld", port_dir, i);
		if (!read_line(line, sizeof(line), path) || !gid_ipv4(line))
			continue;
		snprintf(path, sizeof(path), "%s/gid_attrs/types/%ld", port_dir, i);
		if (!read_line(line, sizeof(line), path))
			continue;
		v = roce_version(line);
		if (v == 2 && (best_v2 < 0 || i < best_v2))
			best_v2 = (int)i;
		else if (v == 1 && (best_v1 < 0 || i < best_v1))
			best_v1 = (int)i;
	}
	closedir(dir);
	return best_v2 >= 0 ? best_v2 : best_v1;
}

/* "100 Gb/sec (4X EDR)" -> 100; 0 when unknown. */
static double parse_rate(const char *s)
{
	char *end;
	double r = strtod(s, &end);

	return end != s && r > 0 && r < 1e6 ? r : 0;
}

static int port_cmp(const void *a, const void *b)
{
	return ((const struct hw_port *)a)->port - ((const struct hw_port *)b)->port;
}

static void read_ports(struct hw_hca *h, const char *root)
{
	char dir[4096], path[4200], line[128];
	struct dirent *d;
	DIR *pd;

	snprintf(dir, sizeof(dir), "%s/class/infiniband/%s/ports", root, h->name);
	if (!(pd = opendir(dir)))
		return;
	while ((d = readdir(pd)) && h->nports < HW_MAX_PORTS) {
		struct hw_port *p = &h->ports[h->nports];
		const char *st;
		long n;

		if (!all_digits(d->d_name) || (n = strtol(d->d_name, NULL, 10)) < 1 || n > 255)
			continue;
		memset(p, 0, sizeof(*p));
		p->port = (int)n;
		p->gid_index = -1;
		snprintf(path, sizeof(path), "%s/%ld/state", dir, n);
		/* "4: ACTIVE" */
		if (read_line(line, sizeof(line), path)) {
			st = strchr(line, ':');
			st = st ? st + 1 : line;
			while (*st == ' ')
				st++;
			copy_str(p->state, sizeof(p->state), st);
		} else
			snprintf(p->state, sizeof(p->state), "UNKNOWN");
		snprintf(path, sizeof(path), "%s/%ld/link_layer", dir, n);
		if (!read_line(line, sizeof(line), path))
			snprintf(line, sizeof(line), "InfiniBand"); /* older kernels: IB only */
		copy_str(p->link_layer, sizeof(p->link_layer), line);
		snprintf(path, sizeof(path), "%s/%ld/rate", dir, n);
		if (read_line(line, sizeof(line), path))
			p->rate_gbps = parse_rate(line);
		if (!strcmp(p->link_layer, "Ethernet")) {
			snprintf(path, sizeof(path), "%s/%ld", dir, n);
			p->gid_index = hw_roce_gid_index(path);
		}
		h->nports++;
	}
	closedir(pd);
	qsort(h->ports, (size_t)h->nports, sizeof(h->ports[0]), port_cmp);
}

bool hw_port_same(const struct hw_port *a, const struct hw_port *b)
{
	return a->port == b->port && !strcmp(a->state, b->state) &&
	       !strcmp(a->link_layer, b->link_layer) && a->rate_gbps == b->rate_gbps &&
	       a->gid_index == b->gid_index;
}

bool hw_ports_refresh(struct hw_hca *hcas, size_t n, const char *sysfs_root)
{
	bool changed = false;

	for (size_t i = 0; i < n; i++) {
		struct hw_hca now = {0};

		copy_str(now.name, sizeof(now.name), hcas[i].name);
		read_ports(&now, sysfs_root ? sysfs_root : "/sys");
		changed |= now.nports != hcas[i].nports;
		for (int k = 0; k < now.nports && !changed; k++)
			changed = !hw_port_same(&now.ports[k], &hcas[i].ports[k]);
		hcas[i] = now;
	}
	return changed;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int hw_hcas_probe(struct hw_inventory *inv, const struct hw_ib_ops *ops, const char *sysfs_root,
		  struct ty_err *err)
{
	const char *root = sysfs_root ? sysfs_root : "/sys";
	char **names;
	size_t n = 0;
	int rc = 0;

	free(inv->hcas);
	inv->hcas = NULL;
	inv->nhcas = 0;
	if (!(names = ops->list(ops->ctx, err)))
		return err->code ? err->code : ty_err_set(err, TY_EUNAVAIL, "no RDMA device list");
	while (names[n])
		n++;
	if (n == 0) {
		rc = ty_err_set(err, TY_ENOTFOUND, "no RDMA device");
		goto out;
	}
	if (n > HW_MAX_HCAS)
		n = HW_MAX_HCAS;
	qsort(names, n, sizeof(char *), name_cmp);
	if (!(inv->hcas = calloc(n, sizeof(*inv->hcas)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct hw_hca *h = &inv->hcas[inv->nhcas];

		/* a name that cannot be a sysfs directory entry is not a device */
		if (!*names[i] || strchr(names[i], '/') || strlen(names[i]) >= sizeof(h->name) ||
		    !strcmp(names[i], ".") || !strcmp(names[i], ".."))
			continue;
		copy_str(h->name, sizeof(h->name), names[i]);
		read_ports(h, root);
		inv->nhcas++;
	}
	if (!inv->nhcas)
		rc = ty_err_set(err, TY_ENOTFOUND, "no RDMA device with a valid name");
out:
	if (rc) {
		free(inv->hcas);
		inv->hcas = NULL;
		inv->nhcas = 0;
	}
	hw_names_free(names);
	return rc;
}

/* ---- JSON ---- */

static json_t *rate_json(double r)
{
	return r == (double)(json_int_t)r ? json_integer((json_int_t)r) : json_real(r);
}

/* s as a JSON string, or null when empty */
static json_t *str_or_null(const char *s)
{
	return *s ? json_string(s) : json_null();
}

static const char *mig_mode_name(enum hw_mig_mode m)
{
	return m == HW_MIG_ENABLED ? "enabled" : m == HW_MIG_DISABLED ? "disabled" : NULL;
}

json_t *hw_inventory_json(const struct hw_inventory *inv)
{
	json_t *j = json_pack("{s:[], s:[], s:o, s:o, s:s, s:o}", "gpus", "hcas",
			      "driver_version", str_or_null(inv->driver_version), "cuda_version",
			      str_or_null(inv->cuda_version), "gpu_source", inv->gpu_source,
			      "gpu_fault", str_or_null(inv->gpu_fault));
	json_t *gpus = json_object_get(j, "gpus"), *hcas = json_object_get(j, "hcas");

	if (!j)
		return NULL;
	for (size_t i = 0; i < inv->ngpus; i++) {
		const struct hw_gpu *g = &inv->gpus[i];
		const char *mig = mig_mode_name(g->mig_mode);
		json_t *migs = json_array();

		if (json_array_append_new(
			gpus, json_pack("{s:i, s:s, s:I, s:s, s:s, s:o, s:o, s:o}", "index",
					g->index, "name", g->name, "memory_mb",
					(json_int_t)g->memory_mb, "uuid", g->uuid, "pci_bus_id",
					g->pci_bus_id, "numa_node",
					g->numa_node >= 0 ? json_integer(g->numa_node) : json_null(),
					"mig_mode", mig ? json_string(mig) : json_null(),
					"mig_devices", migs)))
			goto fail;
		for (int k = 0; k < g->nmig; k++)
			if (json_array_append_new(migs, json_string(g->mig_uuids[k])))
				goto fail;
	}
	for (size_t i = 0; i < inv->nhcas; i++) {
		const struct hw_hca *h = &inv->hcas[i];
		json_t *ports = json_array();

		if (json_array_append_new(hcas,
					  json_pack("{s:s, s:o}", "name", h->name, "ports", ports)))
			goto fail;
		for (int k = 0; k < h->nports; k++) {
			const struct hw_port *p = &h->ports[k];

			if (json_array_append_new(
				ports, json_pack("{s:i, s:s, s:s, s:o, s:o}", "port", p->port,
						 "state", p->state, "link_layer", p->link_layer,
						 "rate_gbps", rate_json(p->rate_gbps), "gid_index",
						 p->gid_index >= 0 ? json_integer(p->gid_index)
								   : json_null())))
				goto fail;
		}
	}
	return j;
fail:
	json_decref(j);
	return NULL;
}

/* A string member into out (1..outsz-1 characters unless empty_ok). */
static int get_str(char *out, size_t outsz, const json_t *o, const char *key, bool required,
		   const char *what, struct ty_err *err)
{
	const json_t *v = json_object_get(o, key);
	const char *s;

	out[0] = '\0';
	if (!v && !required)
		return 0;
	if (!json_is_string(v))
		return ty_err_set(err, TY_EINVAL, "%s: '%s' must be a string", what, key);
	s = json_string_value(v);
	if ((required && !*s) || strlen(s) >= outsz || strlen(s) != json_string_length(v))
		return ty_err_set(err, TY_EINVAL, "%s: '%s' must be 1-%zu characters", what, key,
				  outsz - 1);
	memcpy(out, s, strlen(s) + 1);
	return 0;
}

/* An optional string member that may also be null ("" then). */
static int get_opt_str(char *out, size_t outsz, const json_t *o, const char *key,
		       struct ty_err *err)
{
	const json_t *v = json_object_get(o, key);

	out[0] = '\0';
	if (!v || json_is_null(v))
		return 0;
	return get_str(out, outsz, o, key, false, "inventory", err);
}

static int get_int(long long *out, const json_t *o, const char *key, long long lo, long long hi,
		   const char *what, struct ty_err *err)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ty_err_set(err, TY_EINVAL, "%s: '%s' must be an integer in %lld..%lld", what,
				  key, lo, hi);
	*out = json_integer_value(v);
	return 0;
}

static int gpu_from_json(struct hw_gpu *g, const json_t *o, size_t i, struct ty_err *err)
{
	static const char *const keys[] = {"index",	"name",	    "memory_mb",   "uuid",
					   "pci_bus_id", "numa_node", "mig_mode", "mig_devices",
					   NULL};
	const json_t *numa = json_object_get(o, "numa_node"), *mig = json_object_get(o, "mig_mode"),
		     *migs = json_object_get(o, "mig_devices"), *m;
	char what[32];
	const char *bad;
	long long v;
	size_t k;
	int rc;

	snprintf(what, sizeof(what), "gpus[%zu]", i);
	if (!json_is_object(o))
		return ty_err_set(err, TY_EINVAL, "%s must be an object", what);
	if ((bad = ty_json_unknown_key(o, keys)))
		return ty_err_set(err, TY_EINVAL, "%s: unknown key '%s'", what, bad);
	if ((rc = get_int(&v, o, "index", 0, HW_MAX_GPUS - 1, what, err)))
		return rc;
	g->index = (int)v;
	if ((rc = get_int(&v, o, "memory_mb", 0, 1LL << 40, what, err)))
		return rc;
	g->memory_mb = v;
	if ((rc = get_str(g->name, sizeof(g->name), o, "name", true, what, err)) ||
	    (rc = get_str(g->uuid, sizeof(g->uuid), o, "uuid", false, what, err)) ||
	    (rc = get_str(g->pci_bus_id, sizeof(g->pci_bus_id), o, "pci_bus_id", false, what, err)))
		return rc;
	g->numa_node = -1;
	if (numa && !json_is_null(numa)) {
		if ((rc = get_int(&v, o, "numa_node", 0, 65535, what, err)))
			return rc;
		g->numa_node = (int)v;
	}
	g->mig_mode = HW_MIG_UNKNOWN;
	if (mig && !json_is_null(mig)) {
		if (json_is_string(mig) && !strcmp(json_string_value(mig), "enabled"))
			g->mig_mode = HW_MIG_ENABLED;
		else if (json_is_string(mig) && !strcmp(json_string_value(mig), "disabled"))
			g->mig_mode = HW_MIG_DISABLED;
		else
			return ty_err_set(err, TY_EINVAL,
					  "%s: 'mig_mode' must be \"enabled\", \"disabled\" or null",
					  what);
	}
	if (migs && (!json_is_array(migs) || json_array_size(migs) > HW_MAX_MIG))
		return ty_err_set(err, TY_EINVAL, "%s: 'mig_devices' must be an array of at most %d",
				  what, HW_MAX_MIG);
	json_array_foreach(migs, k, m)
	{
		if (!json_is_string(m) || !json_string_length(m) ||
		    json_string_length(m) >= sizeof(g->mig_uuids[0]) ||
		    strlen(json_string_value(m)) != json_string_length(m))
			return ty_err_set(err, TY_EINVAL,
					  "%s: 'mig_devices[%zu]' must be 1-%zu characters", what, k,
					  sizeof(g->mig_uuids[0]) - 1);
		memcpy(g->mig_uuids[k], json_string_value(m), json_string_length(m) + 1);
		g->nmig++;
	}
	return 0;
}

static int port_from_json(struct hw_port *p, const json_t *o, const char *what, struct ty_err *err)
{
	static const char *const keys[] = {"port",	"state",     "link_layer",
					   "rate_gbps", "gid_index", NULL};
	const json_t *v;
	const char *bad;
	long long n;
	int rc;

	if (!json_is_object(o))
		return ty_err_set(err, TY_EINVAL, "%s must be an object", what);
	if ((bad = ty_json_unknown_key(o, keys)))
		return ty_err_set(err, TY_EINVAL, "%s: unknown key '%s'", what, bad);
	if ((rc = get_int(&n, o, "port", 1, 255, what, err)))
		return rc;
	p->port = (int)n;
	if ((rc = get_str(p->state, sizeof(p->state), o, "state", true, what, err)) ||
	    (rc = get_str(p->link_layer, sizeof(p->link_layer), o, "link_layer", true, what, err)))
		return rc;
	if (strcmp(p->link_layer, "InfiniBand") && strcmp(p->link_layer, "Ethernet"))
		return ty_err_set(err, TY_EINVAL, "%s: link_layer must be InfiniBand or Ethernet",
				  what);
	v = json_object_get(o, "rate_gbps");
	if (v && (!json_is_number(v) || json_number_value(v) < 0 || json_number_value(v) >= 1e6))
		return ty_err_set(err, TY_EINVAL, "%s: 'rate_gbps' must be a number in 0..999999",
				  what);
	p->rate_gbps = v ? json_number_value(v) : 0;
	p->gid_index = -1;
	v = json_object_get(o, "gid_index");
	if (v && !json_is_null(v)) {
		if ((rc = get_int(&n, o, "gid_index", 0, HW_MAX_GIDS - 1, what, err)))
			return rc;
		p->gid_index = (int)n;
	}
	return 0;
}

static int hca_from_json(struct hw_hca *h, const json_t *o, size_t i, struct ty_err *err)
{
	static const char *const keys[] = {"name", "ports", NULL};
	const json_t *ports = json_object_get(o, "ports"), *p;
	char what[48];
	const char *bad;
	size_t k;
	int rc;

	snprintf(what, sizeof(what), "hcas[%zu]", i);
	if (!json_is_object(o))
		return ty_err_set(err, TY_EINVAL, "%s must be an object", what);
	if ((bad = ty_json_unknown_key(o, keys)))
		return ty_err_set(err, TY_EINVAL, "%s: unknown key '%s'", what, bad);
	if ((rc = get_str(h->name, sizeof(h->name), o, "name", true, what, err)))
		return rc;
	if (strchr(h->name, ',') || strchr(h->name, ':') || strchr(h->name, '/'))
		return ty_err_set(err, TY_EINVAL, "%s: name '%s' may not hold ',', ':' or '/'",
				  what, h->name);
	if (!json_is_array(ports) || json_array_size(ports) > HW_MAX_PORTS)
		return ty_err_set(err, TY_EINVAL, "%s: 'ports' must be an array of at most %d",
				  what, HW_MAX_PORTS);
	json_array_foreach(ports, k, p)
	{
		snprintf(what, sizeof(what), "hcas[%zu].ports[%zu]", i, k);
		if ((rc = port_from_json(&h->ports[k], p, what, err)))
			return rc;
		for (size_t m = 0; m < k; m++)
			if (h->ports[m].port == h->ports[k].port)
				return ty_err_set(err, TY_EINVAL, "%s: port %d is given twice",
						  what, h->ports[k].port);
		h->nports++;
	}
	return 0;
}

int hw_inventory_from_json(struct hw_inventory *inv, const json_t *j, struct ty_err *err)
{
	static const char *const keys[] = {"gpus",	 "hcas",       "driver_version",
					   "cuda_version", "gpu_source", "gpu_fault",
					   NULL};
	const json_t *gpus = json_object_get(j, "gpus"), *hcas = json_object_get(j, "hcas"), *v;
	char src[sizeof(inv->gpu_source)];
	const char *bad;
	size_t i;
	int rc = 0;

	hw_inventory_clear(inv);
	if (!json_is_object(j))
		return ty_err_set(err, TY_EINVAL, "inventory must be an object");
	if ((bad = ty_json_unknown_key(j, keys)))
		return ty_err_set(err, TY_EINVAL, "inventory: unknown key '%s'", bad);
	if (!json_is_array(gpus) || json_array_size(gpus) > HW_MAX_GPUS)
		return ty_err_set(err, TY_EINVAL,
				  "inventory: 'gpus' must be an array of at most %d", HW_MAX_GPUS);
	if (!json_is_array(hcas) || json_array_size(hcas) > HW_MAX_HCAS)
		return ty_err_set(err, TY_EINVAL,
				  "inventory: 'hcas' must be an array of at most %d", HW_MAX_HCAS);
	/* gpu_source is checked and replaced: a file's inventory is simulated */
	if ((rc = get_opt_str(src, sizeof(src), j, "gpu_source", err)) ||
	    (rc = get_opt_str(inv->driver_version, sizeof(inv->driver_version), j,
			      "driver_version", err)) ||
	    (rc = get_opt_str(inv->cuda_version, sizeof(inv->cuda_version), j, "cuda_version",
			      err)) ||
	    (rc = get_opt_str(inv->gpu_fault, sizeof(inv->gpu_fault), j, "gpu_fault", err)))
		goto out;
	if ((json_array_size(gpus) &&
	     !(inv->gpus = calloc(json_array_size(gpus), sizeof(*inv->gpus)))) ||
	    (json_array_size(hcas) &&
	     !(inv->hcas = calloc(json_array_size(hcas), sizeof(*inv->hcas))))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	json_array_foreach(gpus, i, v)
	{
		if ((rc = gpu_from_json(&inv->gpus[i], v, i, err)))
			goto out;
		for (size_t m = 0; m < i; m++)
			if (inv->gpus[m].index == inv->gpus[i].index) {
				rc =
				    ty_err_set(err, TY_EINVAL, "gpus[%zu]: index %d is given twice",
					       i, inv->gpus[i].index);
				goto out;
			}
		inv->ngpus++;
	}
	json_array_foreach(hcas, i, v)
	{
		if ((rc = hca_from_json(&inv->hcas[i], v, i, err)))
			goto out;
		for (size_t m = 0; m < i; m++)
			if (!strcmp(inv->hcas[m].name, inv->hcas[i].name)) {
				rc = ty_err_set(err, TY_EINVAL, "hcas[%zu]: '%s' is given twice", i,
						inv->hcas[i].name);
				goto out;
			}
		inv->nhcas++;
	}
	inv->simulated = true;
	snprintf(inv->gpu_source, sizeof(inv->gpu_source), "simulated");
out:
	if (rc)
		hw_inventory_clear(inv);
	return rc;
}

int hw_inventory_load(struct hw_inventory *inv, const char *path, struct ty_err *err)
{
	json_error_t je;
	json_t *j;
	int rc;

	hw_inventory_clear(inv);
	if (!(j = json_load_file(path, JSON_REJECT_DUPLICATES, &je))) {
		if (je.line < 0 || json_error_code(&je) == json_error_cannot_open_file)
			return ty_err_set(err, TY_EIO, "cannot read inventory file '%s': %s", path,
					  je.text);
		return ty_err_set(err, TY_EPARSE, "inventory file '%s' line %d: %s", path, je.line,
				  je.text);
	}
	rc = hw_inventory_from_json(inv, j, err);
	json_decref(j);
	if (rc) {
		/* name the file in front of what is wrong inside it */
		char msg[sizeof(err->msg)];

		snprintf(msg, sizeof(msg), "inventory file '%.200s': %.280s", path, err->msg);
		snprintf(err->msg, sizeof(err->msg), "%s", msg);
	}
	return rc;
}

int hw_inventory_fake(struct hw_inventory *inv, int n, struct ty_err *err)
{
	hw_inventory_clear(inv);
	if (n < 0 || n > HW_MAX_GPUS)
		return ty_err_set(err, TY_EINVAL, "simulated GPUs must be 0..%d", HW_MAX_GPUS);
	if (n && !(inv->gpus = calloc((size_t)n, sizeof(*inv->gpus))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		struct hw_gpu *g = &inv->gpus[i];

		g->index = i;
		snprintf(g->name, sizeof(g->name), "simulated GPU");
		g->memory_mb = 81920;
		snprintf(g->uuid, sizeof(g->uuid), "GPU-00000000-0000-0000-0000-%012x", i);
		snprintf(g->pci_bus_id, sizeof(g->pci_bus_id), "0000:%02X:00.0",
			 (unsigned)i & 0xff);
		g->numa_node = -1;
		g->mig_mode = HW_MIG_UNKNOWN;
	}
	inv->ngpus = (size_t)n;
	inv->simulated = true;
	snprintf(inv->gpu_source, sizeof(inv->gpu_source), "simulated");
	return 0;
}

/* ---- CPUs and memory ---- */

int hw_cpus_online(int64_t *cpus, struct ty_err *err)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	*cpus = 0;
	if (n < 1)
		return ty_err_set(err, TY_EIO, "cannot count the online CPUs: set --cpus");
	*cpus = n;
	return 0;
}

int hw_meminfo_total_mb(int64_t *mb, const char *path, struct ty_err *err)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int rc = 0;

	*mb = 0;
	if (!f)
		return ty_err_set(err, TY_EIO, "cannot read '%s': %s (set --memory-mb)", path,
				  strerror(errno));
	for (;;) {
		unsigned long long kb;
		char unit[8] = "";

		if (!fgets(line, sizeof(line), f)) {
			rc = ty_err_set(err, TY_EPARSE, "'%s' has no MemTotal line (set --memory-mb)",
					path);
			break;
		}
		if (strncmp(line, "MemTotal:", 9))
			continue;
		if (sscanf(line + 9, "%llu %7s", &kb, unit) != 2 || strcmp(unit, "kB") ||
		    kb < 1024 || kb > (unsigned long long)INT64_MAX) {
			rc = ty_err_set(err, TY_EPARSE, "'%s': MemTotal line not understood: '%.*s'",
					path, (int)strcspn(line, "\n"), line);
			break;
		}
		*mb = (int64_t)(kb / 1024);
		break;
	}
	fclose(f);
	return rc;
}

int hw_allocatable(int64_t *out, int64_t total, int64_t reserve, const char *what,
		   const char *option, struct ty_err *err)
{
	*out = 0;
	if (total < 0 || reserve < 0)
		return ty_err_set(err, TY_EINVAL, "negative %s: %lld, %s %lld", what,
				  (long long)total, option, (long long)reserve);
	if (total - reserve < 1)
		return ty_err_set(err, TY_EINVAL,
				  "%s %lld leaves no %s of this node's %lld to schedule", option,
				  (long long)reserve, what, (long long)total);
	*out = total - reserve;
	return 0;
}

/* ---- the node's probe ---- */

int hw_probe(struct hw_inventory *inv, const char *nvml, const char *cudart, struct ty_err *err)
{
	const char *const one[] = {cudart, NULL};
	const struct hw_ib_ops verbs = {hw_ib_list_verbs, NULL};
	const char *lib = nvml ? nvml : HW_NVML_DEFAULT;
	struct ty_err why = {0};
	int rc;

	hw_inventory_clear(inv);
	rc = hw_nvml_probe(inv, lib, NULL, &why);
	if (rc == TY_EUNAVAIL) {
		/* only a node without a usable NVML asks the CUDA runtime */
		ty_info("%s; trying the CUDA runtime", why.msg);
		ty_err_clear(&why);
		rc = hw_gpus_probe(inv, cudart ? one : hw_cudart_default, &why);
	}
	if (rc == TY_ENOMEM)
		return ty_err_set(err, TY_ENOMEM, NULL);
	if (rc)
		ty_warn("no GPU: %s", why.msg);
	else if (!strcmp(inv->gpu_source, "nvml"))
		ty_info("GPUs from NVML '%s': %zu, driver %s, CUDA %s", lib, inv->ngpus,
			*inv->driver_version ? inv->driver_version : "unknown",
			*inv->cuda_version ? inv->cuda_version : "unknown");
	else
		ty_info("GPUs from the CUDA runtime (NVML unavailable): %zu", inv->ngpus);
	if (!rc && *inv->gpu_fault)
		ty_warn("GPUs left out of the inventory: %s", inv->gpu_fault);
	ty_err_clear(&why);
	if ((rc = hw_hcas_probe(inv, &verbs, NULL, &why)) == TY_ENOMEM)
		return ty_err_set(err, TY_ENOMEM, NULL);
	if (rc)
		ty_info("no HCA: %s", why.msg);
	return 0;
}
