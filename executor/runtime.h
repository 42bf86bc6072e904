/*
 * The container runtime of an attempt (docs/security.md, "Job isolation"):
 * every attempt runs in its own OCI container, one per node, created with
 * an OCI runtime (runc) from a bundle the executor writes. The ranks are
 * processes the runtime starts inside it (`runc exec`), as the team's uid,
 * under the attempt's own cgroup (memory, CPU, pids, devices).
 *
 * oci_config.c: pure, the bundle's config.json and a rank's process.json.
 * devices.c: the device nodes a job is given (its GPUs, the NVIDIA control
 *   devices, RDMA) and what the host has of them.
 * container.c: the driver: bundle directories, the runtime's command lines,
 *   create, delete and the cleanup after a restart; the late binds and
 *   limit updates of a warm container (warm.c keeps those, on the loop).
 *
 * Ownership as in exec.h: "new" results are the caller's to free.
 */
#ifndef TY_EXEC_RUNTIME_H
#define TY_EXEC_RUNTIME_H

#include "ty_err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXEC_RT_MAX_MOUNTS 64
#define EXEC_RT_MAX_DEVICES 256
#define EXEC_RT_ID_MAX 128
/* where the rank shim appears inside every container */
#define EXEC_RT_SHIM_PATH "/.trainyard/rank-shim"
#define EXEC_RT_PIDS_DEFAULT 32768

/* CFS period of the containers' CPU quota */
#define EXEC_RT_CFS_PERIOD_US 100000

/* One bind mount into the container. */
struct exec_rt_mount {
	char src[4096]; /* host path */
	char dst[4096]; /* path inside */
	bool rw;
	/*
	 * A late root (warm containers): src, under the bundle, is made a
	 * shared mount before the container starts and appears inside as a
	 * slave, so what exec_rt_bind_late mounts under it later appears too.
	 */
	bool late;
};

/* One device node the container gets, allowed in its devices cgroup. */
struct exec_rt_device {
	char path[256]; /* inside the container, e.g. /dev/nvidia0 */
	char type;	/* 'c' or 'b' */
	unsigned major, minor;
	unsigned mode; /* permission bits, e.g. 0666 */
};

/* Everything config.json says. Strings borrowed. */
struct exec_rt_spec {
	const char *rootfs;   /* the bundle's root filesystem directory */
	bool host_root;	      /* the host's directories, read-only, over an empty rootfs */
	const char *const *host_binds; /* those directories ("/usr", ...), set by exec_rt_create */
	size_t nhost_binds;
	const char *hostname; /* UTS namespace */
	unsigned uid, gid;    /* the team's */
	int64_t memory_bytes; /* 0: no limit */
	int cpus;	      /* CFS quota in whole CPUs; 0: no limit */
	int64_t pids_limit;   /* 0: no limit */
	int64_t shm_bytes;    /* size of /dev/shm */
	const char *cgroups_path;
	const struct exec_rt_mount *mounts; /* after the system mounts, in order */
	size_t nmounts;
	const struct exec_rt_device *devices;
	size_t ndevices;
	const json_t *seccomp; /* the linux.seccomp object; NULL: none */
	char *const *init_argv; /* the container's init (the shim's --init) */
	uint64_t nofile;	/* RLIMIT_NOFILE for every process */
	uint64_t memlock;	/* RLIMIT_MEMLOCK (RDMA registers memory): the executor's hard limit */
};

/*
 * config.json of a bundle as a new object: mount, PID, IPC and UTS
 * namespaces (the host network), a read-only root, private /tmp and
 * /dev/shm, the spec's mounts and devices, no capabilities, no new
 * privileges, the seccomp profile, and linux.resources with the limits and
 * a devices allowlist of exactly the runtime's defaults and spec's devices.
 * TY_EINVAL names a fault (a relative path, a mount over a system path).
 */
int exec_rt_config(json_t **out, const struct exec_rt_spec *s, struct ty_err *err);

/*
 * process.json of a rank for `runc exec --process`: argv, env, cwd, the
 * uid/gid, no capabilities, no new privileges, the RLIMIT_NOFILE/MEMLOCK
 * limits of the spec. A new object; NULL when out of memory.
 */
json_t *exec_rt_process(char *const *argv, char *const *env, const char *cwd,
			const struct exec_rt_spec *s);

/* The default seccomp profile (seccomp.json, embedded at build time). */
extern const char exec_seccomp_default[];

/*
 * The devices a job gets, looked up under dev_dir (normally /dev): for
 * each assigned GPU index N, <dev_dir>/nvidiaN; the NVIDIA control devices
 * nvidiactl, nvidia-uvm, nvidia-uvm-tools, nvidia-modeset where present;
 * with fabric, every character device in <dev_dir>/infiniband. Inside the
 * container they keep their names under /dev. A missing nvidiaN is
 * TY_ENOTFOUND naming it, unless allow_missing_gpus (a simulated node).
 * *n is set to how many were written to out (room for max).
 */
int exec_rt_devices(struct exec_rt_device *out, size_t max, size_t *n, const char *dev_dir,
		    const int *gpus, int ngpus, bool fabric, bool allow_missing_gpus,
		    struct ty_err *err);

/*
 * "SRC[:DST]" items of a comma-separated list (the operator's data mounts,
 * read-only) into out; DST defaults to SRC. Both absolute, SRC existing.
 * TY_EINVAL/TY_ENOTFOUND name the item.
 */
int exec_rt_mounts_parse(struct exec_rt_mount *out, size_t max, size_t *n, const char *list,
			 struct ty_err *err);

/* ---- the driver (container.c) ---- */

/* What the driver needs from the executor's options. Strings borrowed. */
struct exec_rt_opts {
	const char *runtime;	   /* "runc" or a path */
	const char *root;	   /* the runtime's state directory (--root) */
	const char *bundles;	   /* where bundles are written */
	const char *cgroup_parent; /* cgroups are <parent>/<container id> */
	const char *shim;	   /* the rank shim on the host */
};

/* The container id of an attempt on a node: "ty-<node>-<job>-<attempt>". */
void exec_rt_id(char out[EXEC_RT_ID_MAX], const char *node, int64_t job, int64_t attempt);

/*
 * The executor's own cgroup, as the parent of the attempts' (from
 * /proc/self/cgroup: the memory controller's path on v1, the 0:: line on
 * v2), into out. False when it cannot be read.
 */
bool exec_rt_own_cgroup(char *out, size_t outsz);

/*
 * Create and start the container `id` from spec (blocking: run it on the
 * thread pool): write <bundles>/<id>/config.json and its rootfs, run
 * `<runtime> --root <root> run -d --pid-file ... <id>` and read the init's
 * pid into *init_pid. On failure nothing of it is left and err holds the
 * runtime's own message.
 */
int exec_rt_create(const struct exec_rt_opts *o, const char *id, struct exec_rt_spec *spec,
		   pid_t *init_pid, struct ty_err *err);

/*
 * Write the process file of one rank (<bundles>/<id>/rank-<R><suffix>.json,
 * 0600) and build the runtime's command line that runs it in the container
 * into a new NULL-terminated argv (free with exec_env_free); the runtime
 * writes the rank's host pid to pid_path (a new string, caller frees).
 */
int exec_rt_exec_argv(char ***argv, char **pid_path, const struct exec_rt_opts *o, const char *id,
		      int rank, const char *suffix, const json_t *process, struct ty_err *err);

/*
 * Warm containers (docs/security.md, "Warm containers"): created ahead
 * with late roots (exec_rt_mount.late) and no memory or CPU limit; the
 * attempt that claims one binds its directories in and sets its limits.
 *
 * exec_rt_late_dir: the host directory of late root i of container id.
 * exec_rt_bind_late: bind the host directory src (recursively, nosuid,
 *   read-write) at rel under late root i, where the container sees it
 *   under that root's destination. Blocking (mounts only).
 * exec_rt_update: `<runtime> update` of the limits l says to set. Blocking.
 */
void exec_rt_late_dir(char *out, size_t outsz, const struct exec_rt_opts *o, const char *id,
		      size_t i);
int exec_rt_bind_late(const struct exec_rt_opts *o, const char *id, size_t i, const char *src,
		      const char *rel, struct ty_err *err);
struct exec_rt_limits {
	bool set_memory, set_cpus; /* which to change */
	int64_t memory_bytes;	   /* 0: no limit */
	int cpus;		   /* CFS quota in whole CPUs; 0: no limit */
};
int exec_rt_update(const struct exec_rt_opts *o, const char *id, const struct exec_rt_limits *l,
		   struct ty_err *err);

/*
 * Background work (warm containers made ahead, containers deleted after
 * their attempt) yields the CPU to attempts that start: the calling
 * thread's nice value, which the runtime processes it spawns inherit, set
 * to nice; the previous value returned, to restore.
 */
#define EXEC_RT_BACKGROUND_NICE 10
int exec_rt_thread_nice(int nice);

/* rm -rf of path, never following a symlink or crossing a mount. */
void exec_rt_remove_tree(const char *path);
/*
 * Delete the container (its processes killed) and its bundle, after
 * unmounting what this process mounted under the bundle (late roots and
 * their binds). Blocking.
 */
void exec_rt_delete(const struct exec_rt_opts *o, const char *id);
/* Delete every container the runtime root holds: what a previous boot left. */
int exec_rt_delete_all(const struct exec_rt_opts *o);

/* Whether the runtime can be run at all ("<runtime> --version"); err says why not. */
int exec_rt_check(const struct exec_rt_opts *o, struct ty_err *err);

/*
 * The daemon reaps stray children (it is a subreaper); these are waited for
 * by pid elsewhere: the runtime's commands while they run, and each
 * container's init until exec_rt_reap (blocking) reaps it.
 */
bool exec_rt_waits_for(pid_t pid);
void exec_rt_reap(pid_t pid);

/*
 * Run argv (PATH searched) to its end with stdin and stdout on /dev/null;
 * its exit status (128 + signal), or -1 when it could not run. Its stderr
 * goes to errpath (NULL: a temporary file); the last line of it, or why it
 * could not run, into msg (may be NULL).
 */
int exec_rt_run(char *const *argv, const char *errpath, char *msg, size_t msgsz);

/* ---- images (image_cache.c) ---- */

/* "oci:DIR[:TAG]" or "oci-archive:FILE[:TAG]" (TAG defaults to latest). */
struct exec_image_ref {
	bool archive;
	char path[4096];
	char tag[128];
};
int exec_image_ref_parse(struct exec_image_ref *r, const char *ref, struct ty_err *err);
/* The hex sha256 of the manifest tagged tag in the layout's index.json. */
int exec_image_digest(char hex[65], const char *layout, const char *tag, struct ty_err *err);
/*
 * The root filesystem of image ref, unpacked (umoci) under cache once per
 * manifest digest, into out. TY_ENOTFOUND "does not exist on this node",
 * TY_EIO "does not unpack", TY_EINVAL for a malformed reference.
 */
int exec_image_rootfs(char *out, size_t outsz, const char *cache, const char *ref,
		      struct ty_err *err);

/* The memory events file of the container's cgroup, from its init's /proc/<pid>/cgroup. */
bool exec_rt_memory_events(char *out, size_t outsz, pid_t init_pid);

#endif
