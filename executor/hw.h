/*
 * The executor's view of its hardware: GPUs through the CUDA runtime loaded
 * at run time, RDMA adapters (HCAs) through libibverbs and sysfs, and the
 * NCCL environment derived from them.
 *
 * Probes take their seams as arguments (the libraries to dlopen, the list
 * of RDMA devices, the sysfs root) so that tests can give a fake
 * libcudart, a fake device list and a fake sysfs tree. Everything else in
 * this header is pure. Ownership as in exec.h: "new" results are the
 * caller's, "borrowed" arguments are only read during the call.
 */
#ifndef TY_HW_H
#define TY_HW_H

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

struct hw_gpu {
	int index;
	char name[HW_GPU_NAME_MAX];
	int64_t memory_mb;
	char uuid[HW_UUID_MAX];	     /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
	char pci_bus_id[HW_PCI_MAX]; /* "0000:3b:00.0" */
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
};

void hw_inventory_clear(struct hw_inventory *inv);

/* ---- GPUs (inventory.c) ---- */

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
 * This node's inventory: hw_gpus_probe with cudart (a name or path; NULL:
 * hw_cudart_default) and hw_hcas_probe with libibverbs.so.1 and /sys.
 * A probe that finds nothing logs one line saying why (warn for GPUs,
 * info for HCAs) and leaves that part empty; only TY_ENOMEM fails.
 */
int hw_probe(struct hw_inventory *inv, const char *cudart, struct ty_err *err);

/* ---- inventory as JSON (inventory.c) ---- */

/*
 * A new {"gpus":[{index,name,memory_mb,uuid,pci_bus_id}],
 * "hcas":[{name,ports:[{port,state,link_layer,rate_gbps,gid_index}]}]}
 * (gid_index null when -1). NULL on ENOMEM.
 */
json_t *hw_inventory_json(const struct hw_inventory *inv);

/*
 * inv (cleared first) from such an object (borrowed). Every field above is
 * required except uuid and pci_bus_id (default ""), rate_gbps (0) and
 * gid_index (null); unknown keys, wrong types, duplicate GPU indices and
 * out-of-range values are TY_EINVAL naming the fault. simulated is set.
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

#endif
