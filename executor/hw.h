/*
 * The executor's view of its hardware: GPUs through NVML (the driver's
 * libnvidia-ml) loaded at run time, the CUDA runtime as a fallback, RDMA adapters (HCAs) through
 * libibverbs and sysfs, and the NCCL environment derived from them.
 *
 * Probes take their seams as arguments (the libraries to dlopen, the list
 * of RDMA devices, the sysfs root) so that tests can give a stand-in
 * libnvidia-ml or libcudart, a fake device list and a fake sysfs tree. Everything else in
 * this header is pure. Ownership as in exec.h: "new" results are the
 * caller's, "borrowed" arguments are only read during the call.
 */
#ifndef TY_HW_H
#define TY_HW_H

#include "proto.h"
#include "ty_err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HW_GPU_NAME_MAX 256
#define HW_UUID_MAX 48 /* "GPU-" + 36 + NUL, rounded up */
#define HW_PCI_MAX 32
#define HW_HCA_NAME_MAX 64
#define HW_PORT_STATE_MAX 16
#define HW_LINK_MAX 16
#define HW_MAX_GPUS 1024
#define HW_MAX_HCAS 64
#define HW_MAX_PORTS 16
#define HW_MAX_GIDS 1024
#define HW_MIG_UUID_MAX 96 /* NVML_DEVICE_UUID_V2_BUFFER_SIZE: "MIG-..." in either format */
#define HW_MAX_MIG 8	   /* MIG devices listed per GPU (7 is the most any GPU makes) */
#define HW_VERSION_MAX 80  /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
#define HW_FAULT_MAX 512

/* A GPU's MIG mode as NVML reports the current one. */
enum hw_mig_mode {
	HW_MIG_UNKNOWN = -1, /* not asked (CUDA runtime, simulated) or not supported */
	HW_MIG_DISABLED = 0,
	HW_MIG_ENABLED = 1,
};

struct hw_gpu {
	int index;
	char name[HW_GPU_NAME_MAX];
	int64_t memory_mb;
	char uuid[HW_UUID_MAX];	     /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
	char pci_bus_id[HW_PCI_MAX]; /* "0000:3b:00.0" */
	int numa_node;		     /* from sysfs; -1 unknown or none */
	enum hw_mig_mode mig_mode;
	int nmig; /* MIG devices (compute instances) listed in mig_uuids */
	char mig_uuids[HW_MAX_MIG][HW_MIG_UUID_MAX];
};

struct hw_port {
	int port;		       /* 1-based, as in sysfs and NCCL_IB_HCA */
	char state[HW_PORT_STATE_MAX]; /* "ACTIVE", "DOWN", "INIT", ... */
	char link_layer[HW_LINK_MAX];  /* "InfiniBand" or "Ethernet" (RoCE) */
	double rate_gbps;	       /* active rate; 0 when unknown */
	int gid_index;		       /* RoCE: the GID NCCL would use; -1 none / not RoCE */
};

struct hw_hca {
	char name[HW_HCA_NAME_MAX];
	struct hw_port ports[HW_MAX_PORTS];
	int nports;
};

/* Zero-initialise; hw_inventory_clear frees. */
struct hw_inventory {
	struct hw_gpu *gpus; /* owned */
	size_t ngpus;
	struct hw_hca *hcas; /* owned */
	size_t nhcas;
	bool simulated;
	/* per node, "" when unknown: "570.86.15" and "12.8" */
	char driver_version[HW_VERSION_MAX];
	char cuda_version[16];
	/* which probe found the GPUs: "nvml", "cudart", "simulated", "" none */
	char gpu_source[16];
	/*
	 * GPUs the probe saw but could not read, one "GPU <i>: why" each, "; "
	 * between them ("" when none); they are not in gpus.
	 */
	char gpu_fault[HW_FAULT_MAX];
};

void hw_inventory_clear(struct hw_inventory *inv);

/* ---- GPUs (inventory.c) ---- */

/* The NVML library hw_probe loads unless told otherwise: the driver's soname. */
#define HW_NVML_DEFAULT "libnvidia-ml.so.1"

/*
 * Replace inv's GPUs, driver and CUDA versions with what NVML in lib (a
 * name or path for dlopen, borrowed) reports: nvmlInit_v2, the driver and
 * CUDA driver versions, nvmlDeviceGetCount_v2, then per GPU its handle,
 * UUID, name, memory, PCI bus id (as sysfs spells it, "0000:3b:00.0"), MIG
 * mode and the UUIDs of its MIG devices, and its NUMA node from
 * <sysfs_root>/bus/pci/devices/<bus id>/numa_node (sysfs_root NULL:
 * "/sys"). nvmlShutdown and dlclose before returning, whatever happened:
 * the daemon holds no NVML handle and no CUDA context, so a GPU reset or a
 * MIG change is never blocked by it. A GPU whose handle, UUID, name,
 * memory or bus id cannot be read is left out and named in inv->gpu_fault;
 * a MIG query the GPU does not support leaves mig_mode unknown.
 * Returns 0 with at least one GPU (gpu_source "nvml"); otherwise inv has
 * no GPU and err says why: TY_EUNAVAIL (lib cannot be loaded, lacks a
 * symbol, or nvmlInit_v2 fails: the caller may try the CUDA runtime),
 * TY_ENOTFOUND (NVML counts no GPU), TY_EIO (counting fails, or no GPU
 * could be read: the message carries gpu_fault). NVML's messages come
 * with nvmlErrorString and the code.
 */
int hw_nvml_probe(struct hw_inventory *inv, const char *lib, const char *sysfs_root,
		  struct ty_err *err);

/*
 * The NUMA node of the PCI device bus_id (borrowed; any case, 4 or 8
 * domain digits) from <sysfs_root>/bus/pci/devices/<bus id>/numa_node
 * (sysfs_root NULL: "/sys"); -1 when unknown or the machine has one node.
 */
int hw_numa_node(const char *sysfs_root, const char *bus_id);

/*
 * The libraries hw_gpus_probe tries by default, in order, NULL-terminated:
 * libcudart.so, libcudart.so.13, libcudart.so.12.
 */
extern const char *const hw_cudart_default[];

/*
 * Replace inv's GPUs with those the first loadable CUDA runtime among libs
 * (borrowed, NULL-terminated, names or paths for dlopen) reports: count,
 * name, total memory, UUID and PCI bus id. Returns 0 with at least one GPU;
 * otherwise inv has no GPU and err says why: TY_EUNAVAIL (no library could
 * be loaded, or it lacks a symbol we need), TY_ENOTFOUND (the runtime
 * reports no device), TY_EIO (a CUDA call failed, e.g. insufficient
 * driver; the message carries cudaGetErrorString and the code). Never
 * links or unloads the runtime: libcudart registers exit-time teardown.
 */
int hw_gpus_probe(struct hw_inventory *inv, const char *const *libs, struct ty_err *err);
/* (Its GPUs have mig_mode unknown, the NUMA node from /sys, gpu_source "cudart".) */

/* ---- HCAs (inventory.c) ---- */

/*
 * Where the RDMA device names come from: list returns a new
 * NULL-terminated array of new strings (free with hw_names_free), an empty
 * array when there is no device, or NULL with err set when the list cannot
 * be had at all.
 */
struct hw_ib_ops {
	char **(*list)(void *ctx, struct ty_err *err);
	void *ctx;
};

/*
 * The real list: libibverbs dlopened by name (ctx: a const char * soname,
 * NULL for "libibverbs.so.1"), ibv_get_device_list and
 * ibv_get_device_name. TY_EUNAVAIL when the library or a symbol is missing.
 */
char **hw_ib_list_verbs(void *ctx, struct ty_err *err);
void hw_names_free(char **names);

/*
 * The GID index NCCL picks on a RoCE port whose
 * <port_dir>/gids/<i> and gid_attrs/types/<i> are read from sysfs: the
 * lowest index holding a valid IPv4-mapped GID (::ffff:a.b.c.d, not
 * 0.0.0.0) of type "RoCE v2"; failing that the lowest such GID of type
 * v1; -1 when the port has no IPv4 GID at all. Entries that cannot be read
 * (sysfs answers EINVAL for unpopulated ones) are skipped.
 */
int hw_roce_gid_index(const char *port_dir);

/*
 * Read the ports of n HCAs (those a probe found) again from sysfs_root
 * (NULL: "/sys"), in place; true when any port's state, link layer, rate
 * or GID index changed, or a port came or went.
 */
bool hw_ports_refresh(struct hw_hca *hcas, size_t n, const char *sysfs_root);
/* Whether two readings of a port agree (number, state, link layer, rate, GID index). */
bool hw_port_same(const struct hw_port *a, const struct hw_port *b);

/*
 * Replace inv's HCAs with the devices ops lists, their ports read from
 * <sysfs_root>/class/infiniband/<dev>/ports/<n>/ (state, link_layer, rate,
 * and the GID table for Ethernet ports); sysfs_root NULL means "/sys".
 * Returns 0 with at least one HCA; otherwise inv has none and err says
 * why: TY_EUNAVAIL (no libibverbs), TY_ENOTFOUND (no RDMA device).
 * A device whose ports directory cannot be read is listed without ports.
 */
int hw_hcas_probe(struct hw_inventory *inv, const struct hw_ib_ops *ops, const char *sysfs_root,
		  struct ty_err *err);

/*
 * This node's inventory: hw_nvml_probe with nvml (a name or path; NULL:
 * HW_NVML_DEFAULT) and /sys; only when NVML cannot be loaded or
 * initialised, hw_gpus_probe with cudart (NULL: hw_cudart_default); then
 * hw_hcas_probe with libibverbs.so.1 and /sys. The log says which source
 * gave the GPUs, and one warn line each for GPUs that could not be read.
 * A probe that finds nothing logs one line saying why (warn for GPUs,
 * info for HCAs) and leaves that part empty; only TY_ENOMEM fails.
 */
int hw_probe(struct hw_inventory *inv, const char *nvml, const char *cudart, struct ty_err *err);

/* ---- inventory as JSON (inventory.c) ---- */

/*
 * A new {"gpus":[{index,name,memory_mb,uuid,pci_bus_id,numa_node,mig_mode,
 * mig_devices}], "hcas":[{name,ports:[{port,state,link_layer,rate_gbps,
 * gid_index}]}], driver_version, cuda_version, gpu_source, gpu_fault}:
 * numa_node and gid_index null when -1, mig_mode "enabled", "disabled" or
 * null, mig_devices an array of MIG UUIDs, the versions null when unknown,
 * gpu_source "" when no probe found a GPU, gpu_fault null when "".
 * NULL on ENOMEM.
 */
json_t *hw_inventory_json(const struct hw_inventory *inv);

/*
 * inv (cleared first) from such an object (borrowed). Every field above is
 * required except uuid and pci_bus_id (default ""), rate_gbps (0),
 * gid_index and numa_node (null), mig_mode (null), mig_devices ([]), and
 * the node's driver_version, cuda_version, gpu_source and gpu_fault (null;
 * gpu_source is read and replaced by "simulated"); unknown keys, wrong
 * types, duplicate GPU indices and out-of-range values are TY_EINVAL
 * naming the fault. simulated is set.
 */
int hw_inventory_from_json(struct hw_inventory *inv, const json_t *j, struct ty_err *err);

/* Read and parse an inventory file (TY_EIO, TY_EPARSE, TY_EINVAL). */
int hw_inventory_load(struct hw_inventory *inv, const char *path, struct ty_err *err);

/*
 * n simulated GPUs ("simulated GPU", 81920 MiB, synthetic UUIDs and bus
 * ids), no HCA, simulated set. inv is cleared first.
 */
int hw_inventory_fake(struct hw_inventory *inv, int n, struct ty_err *err);

/* ---- CPUs and memory register reports allocatable (inventory.c) ---- */

/* Online CPUs of this host (sysconf _SC_NPROCESSORS_ONLN); TY_EIO when unknown. */
int hw_cpus_online(int64_t *cpus, struct ty_err *err);
/*
 * MemTotal of a /proc/meminfo-format file, in MiB (rounded down): TY_EIO
 * when it cannot be read, TY_EPARSE when it has no usable MemTotal line.
 */
int hw_meminfo_total_mb(int64_t *mb, const char *path, struct ty_err *err);
/*
 * total − reserve into *out; TY_EINVAL naming `what` ("CPUs", "MiB of
 * memory") and `option` when that leaves less than 1 or an input is negative.
 */
int hw_allocatable(int64_t *out, int64_t total, int64_t reserve, const char *what,
		   const char *option, struct ty_err *err);

/* ---- the NCCL environment (nccl.c, pure but for hw_iface_of) ---- */

/*
 * Whether NCCL can use a port: ACTIVE, and for RoCE an IPv4 GID to use.
 */
bool hw_port_usable(const struct hw_port *p);

/*
 * The NCCL variables for ranks on a node with inv's HCAs, as a new
 * NULL-terminated array of new "NAME=value" strings (free with
 * exec_env_free or hw_names_free), in this order:
 *   NCCL_IB_HCA=<=dev:port,...>   usable ports only, "=" for exact names
 *   NCCL_IB_DISABLE=1             instead, when no port is usable
 *   NCCL_IB_GID_INDEX=<n>         when every usable port is RoCE and they
 *                                 agree on the index
 *   NCCL_SOCKET_IFNAME=<=iface>   when iface (borrowed) is not NULL or ""
 *   GLOO_SOCKET_IFNAME=<iface>    the same, for PyTorch's gloo backend
 *   NCCL_DEBUG=WARN
 *   TORCH_NCCL_ASYNC_ERROR_HANDLING=1
 * TY_ENOMEM only.
 */
int hw_nccl_env(char ***out, const struct hw_inventory *inv, const char *iface, struct ty_err *err);

/*
 * The name of the interface carrying the IPv4 address addr (dotted quad)
 * into name (getifaddrs). TY_EINVAL for a malformed address, TY_ENOTFOUND
 * when no interface carries it, TY_EIO when getifaddrs fails.
 */
int hw_iface_of(char *name, size_t namesz, const char *addr, struct ty_err *err);

/* ---- GPU and fabric health (health.c: pure but for the list's mutex) ---- */

/*
 * The health watch (health_watch.c) judges what NVML says about each GPU of
 * the inventory, and the fabric watch the HCAs' ports, into conditions
 * (proto/proto.h, PROTO_CONDITION_KINDS): fatal ones stay listed until the
 * executor restarts, degraded ones while they hold.
 */

/* What the watch makes of an Xid (xid.conf, --xid-file). */
enum hw_xid_action { HW_XID_IGNORE, HW_XID_DEGRADED, HW_XID_FATAL };

#define HW_XID_MAX 65535   /* the largest Xid a table may name */
#define HW_XID_DESC_MAX 200 /* bytes of an entry's description */

struct hw_xid_table;

/* The default table's text (executor/xid.conf, embedded at build time). */
extern const char hw_xid_defaults[];

/* A new empty table in *out (free with hw_xid_table_free). */
int hw_xid_table_new(struct hw_xid_table **out, struct ty_err *err);
/*
 * Parse text (borrowed; `name` names it in errors): lines "<xid> <fatal|
 * degraded|ignore> <description>", blank lines and # comments skipped. An
 * entry for an Xid already in the table replaces it (so --xid-file, added
 * after the defaults, overrides them). TY_EINVAL "name:line: ..." for a bad
 * line; nothing of text is added then.
 */
int hw_xid_table_add(struct hw_xid_table *t, const char *text, const char *name,
		     struct ty_err *err);
/* hw_xid_table_add of a file's contents; TY_EIO when it cannot be read. */
int hw_xid_table_add_file(struct hw_xid_table *t, const char *path, struct ty_err *err);
size_t hw_xid_table_count(const struct hw_xid_table *t);
void hw_xid_table_free(struct hw_xid_table *t);
/*
 * The action for xid and its description (*desc borrowed from t; NULL when
 * xid is in no entry). An Xid not in the table is HW_XID_DEGRADED.
 */
enum hw_xid_action hw_xid_lookup(const struct hw_xid_table *t, unsigned long long xid,
				 const char **desc);

#define HW_NVLINKS 18 /* NVML_NVLINK_MAX_LINKS */
/* NVLink replay or CRC errors one link may gain between two checks before it counts */
#define HW_NVLINK_ERRORS_PER_CHECK 100
/* a degraded condition seen once (an Xid, NVLink errors rising) is listed this long */
#define HW_HOLD_MS (15 * 60 * 1000)
#define HW_PORT_NAME_MAX (HW_HCA_NAME_MAX + 8) /* "mlx5_0/1" */

/* One link's reading; the error counters are replay, recovery, CRC flit, CRC data. */
struct hw_link_reading {
	bool known; /* its state could be read */
	bool active;
	bool errors_known;
	unsigned long long errors[4];
};

/*
 * One reading of a GPU's health counters. A field whose call failed or is
 * not supported has its *_known false and counts as no evidence.
 */
struct hw_gpu_reading {
	bool lost;	     /* a call answered NVML_ERROR_GPU_IS_LOST */
	char lost_call[64];  /* which one */
	bool ecc_known;
	unsigned long long ecc_dbe; /* volatile uncorrected ECC errors */
	bool remap_known;
	bool remap_pending, remap_failed;
	bool retired_known;
	bool retired_pending;
	bool reasons_known;
	unsigned long long clock_reasons; /* nvmlClocksEventReasons bits */
	int nlinks; /* links read (0: no NVLink) */
	struct hw_link_reading links[HW_NVLINKS];
};

/* A condition (proto_condition_check's fields), as the executor keeps it. */
struct hw_condition {
	enum proto_condition_kind kind;
	enum proto_severity severity;
	int gpu; /* index; -1: not a GPU's */
	char gpu_uuid[HW_UUID_MAX];
	char port[HW_PORT_NAME_MAX]; /* "mlx5_0/1"; "": not a port's */
	long long code;		     /* the Xid; -1: none */
	char evidence[PROTO_CONDITION_EVIDENCE_MAX + 1];
	int64_t first_seen, last_seen; /* wall-clock ms */
	/* a degraded one stays listed until last_seen + hold_ms without being seen again */
	int64_t hold_ms;
};

/*
 * What one reading of gpu says, into out (at most max; returns how many):
 * lost → gpu_lost (fatal, alone); ecc_dbe rising since prev → ecc_dbe
 * (fatal); row remapping failed → row_remap_failed, pending →
 * row_remap_pending, retired pages pending → retired_pages_pending (all
 * fatal: the GPU needs a reset to take the bad memory out); clock event
 * reasons SW or HW thermal slowdown → thermal_slowdown, HW power brake (or
 * HW slowdown without a thermal reason) → power_slowdown (degraded; the SW
 * power cap is normal under load and ignored); a link active in start that
 * is not active now, a link whose recovery counter rose since prev, or whose
 * replay or CRC counters rose by HW_NVLINK_ERRORS_PER_CHECK or more →
 * nvlink_errors (degraded, one per GPU naming the links; held HW_HOLD_MS
 * when counters rose). start and prev may be NULL (the first reading).
 * Times are left 0; kind, severity, gpu, gpu_uuid, code, evidence set.
 */
size_t hw_health_judge(struct hw_condition *out, size_t max, const struct hw_gpu *gpu,
		       const struct hw_gpu_reading *start, const struct hw_gpu_reading *prev,
		       const struct hw_gpu_reading *cur);

/*
 * The condition an Xid event on gpu makes (into *out), by t: false for an
 * ignored one. Fatal or degraded as the table says (held HW_HOLD_MS when
 * degraded), degraded when it is in no entry; code is the Xid.
 */
bool hw_xid_judge(struct hw_condition *out, const struct hw_xid_table *t, const struct hw_gpu *gpu,
		  unsigned long long xid);

/*
 * The conditions of n HCAs' ports (at most max; returns how many): a port
 * not ACTIVE → port_down; an ACTIVE one whose rate is below expect_gbps
 * (0: not checked) → port_rate_low; both degraded, port "dev/port".
 */
size_t hw_port_conditions(struct hw_condition *out, size_t max, const struct hw_hca *hcas,
			  size_t n, double expect_gbps);

/* c as a new condition object (proto_condition_check's shape); NULL on ENOMEM. */
json_t *hw_condition_json(const struct hw_condition *c);

/*
 * The node's current conditions: one list that the health watch's thread,
 * the fabric watch and the loop share (it locks itself). One condition is
 * (kind, gpu or port, code). Each new one is logged once (warn when fatal),
 * each degraded one that clears too. With metrics (borrowed, may be NULL),
 * the gauge trainyard_executor_condition{kind,severity,gpu,port} is 1 while
 * a condition is listed and 0 after.
 */
struct hw_conditions;
struct ty_metrics;
#define HW_METRIC_CONDITION "trainyard_executor_condition"
int hw_conditions_new(struct hw_conditions **out, struct ty_metrics *metrics, struct ty_err *err);
void hw_conditions_free(struct hw_conditions *l);
/*
 * c seen at now (wall ms): a new condition is added with first_seen =
 * last_seen = now, a known one gets last_seen = now (and, when degraded,
 * c's evidence and hold). True when it is new; then *added (may be NULL)
 * is the stored copy.
 */
bool hw_conditions_note(struct hw_conditions *l, const struct hw_condition *c, int64_t now,
			struct hw_condition *added);
/*
 * A watch looked at gpu (-1: every GPU and port) for the kinds in the mask
 * (1u << kind) and saw seen[0..n) now: every degraded condition of that
 * scope not among them whose hold is over (last_seen + hold_ms <= now) is
 * removed. Fatal conditions are never removed. Returns how many were.
 */
size_t hw_conditions_expire(struct hw_conditions *l, int gpu, unsigned kinds,
			    const struct hw_condition *seen, size_t n, int64_t now);
/* The list as a new array of condition objects, oldest first; NULL on ENOMEM. */
json_t *hw_conditions_json(struct hw_conditions *l);
size_t hw_conditions_count(struct hw_conditions *l);
/*
 * The first fatal condition (in the order they were first seen) on one of
 * gpus[0..n), or of the whole node (no GPU, no port), first seen at since
 * (wall ms) or later, into *out. False when there is none.
 */
bool hw_conditions_fatal_for(struct hw_condition *out, struct hw_conditions *l, const int *gpus,
			     int n, int64_t since);

#endif
