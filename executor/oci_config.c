/*
 * Pure: the OCI runtime spec (config.json) of an attempt's container and
 * the process.json of each rank (runtime.h). What goes in and why is in
 * docs/security.md, "Job isolation".
 */
#include "runtime.h"

#include <stdio.h>
#include <string.h>

#define MEMLOCK_MAX ((json_int_t)1 << 50) /* "unlimited" in a JSON integer runc accepts */

static const char *const masked_paths[] = {
    "/proc/acpi",	  "/proc/asound",	"/proc/kcore",	 "/proc/keys",
    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
    "/proc/scsi",	  "/sys/firmware",	"/sys/kernel/security"};
static const char *const readonly_paths[] = {"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys",
					     "/proc/sysrq-trigger"};

static json_t *strings(const char *const *v, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *argv_json(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *no_caps(void)
{
	return json_pack("{s:[], s:[], s:[], s:[], s:[]}", "bounding", "effective", "inheritable",
			 "permitted", "ambient");
}

static json_t *rlimits(const struct exec_rt_spec *s)
{
	json_int_t memlock = s->memlock > (uint64_t)MEMLOCK_MAX ? MEMLOCK_MAX : (json_int_t)s->memlock;

	return json_pack("[{s:s, s:I, s:I}, {s:s, s:I, s:I}]", "type", "RLIMIT_NOFILE", "hard",
			 (json_int_t)s->nofile, "soft", (json_int_t)s->nofile, "type",
			 "RLIMIT_MEMLOCK", "hard", memlock, "soft", memlock);
}

static json_t *process(char *const *argv, char *const *env, const char *cwd,
		       const struct exec_rt_spec *s)
{
	return json_pack("{s:b, s:{s:i, s:i}, s:o, s:o, s:s, s:b, s:o, s:o}", "terminal", 0,
			 "user", "uid", (int)s->uid, "gid", (int)s->gid, "args", argv_json(argv),
			 "env", argv_json(env), "cwd", cwd, "noNewPrivileges", 1, "capabilities",
			 no_caps(), "rlimits", rlimits(s));
}

json_t *exec_rt_process(char *const *argv, char *const *env, const char *cwd,
			const struct exec_rt_spec *s)
{
	return process(argv, env, cwd, s);
}

static int add_mount(json_t *mounts, const char *dst, const char *type, const char *src,
		     const char *options)
{
	json_t *opts = json_array(), *m;
	char buf[512];

	snprintf(buf, sizeof(buf), "%s", options);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); opts && t;
	     t = strtok_r(NULL, ",", &save))
		json_array_append_new(opts, json_string(t));
	m = json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source", src,
		      "options", opts);
	return m ? json_array_append_new(mounts, m) : -1;
}

static json_t *system_mounts(const struct exec_rt_spec *s)
{
	json_t *m = json_array();
	char shm[96];
	int bad = 0;

	snprintf(shm, sizeof(shm), "nosuid,noexec,nodev,mode=1777,size=%lldk",
		 (long long)((s->shm_bytes > 0 ? s->shm_bytes : 64 << 20) / 1024));
	bad |= add_mount(m, "/proc", "proc", "proc", "nosuid,noexec,nodev");
	bad |= add_mount(m, "/dev", "tmpfs", "tmpfs", "nosuid,strictatime,mode=755,size=65536k");
	bad |= add_mount(m, "/dev/pts", "devpts", "devpts",
			 "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620");
	bad |= add_mount(m, "/dev/shm", "tmpfs", "shm", shm);
	bad |= add_mount(m, "/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev");
	/* a fresh sysfs needs a network namespace of its own: the host's, read-only */
	bad |= add_mount(m, "/sys", "bind", "/sys", "rbind,ro,nosuid,noexec,nodev");
	if (s->host_root)
		for (size_t i = 0; i < s->nhost_binds; i++)
			bad |= add_mount(m, s->host_binds[i], "bind", s->host_binds[i],
					 "rbind,ro,nosuid,nodev");
	bad |= add_mount(m, "/tmp", "tmpfs", "tmpfs", "nosuid,nodev,mode=1777");
	if (bad) {
		json_decref(m);
		return NULL;
	}
	return m;
}

static json_t *devices_json(const struct exec_rt_spec *s, json_t **allow)
{
	json_t *devs = json_array();

	*allow = json_pack("[{s:b, s:s}]", "allow", 0, "access", "rwm");
	for (size_t i = 0; devs && *allow && i < s->ndevices; i++) {
		const struct exec_rt_device *d = &s->devices[i];
		char type[2] = {d->type, '\0'};

		json_array_append_new(devs, json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:i}",
						      "path", d->path, "type", type, "major",
						      (int)d->major, "minor", (int)d->minor,
						      "fileMode", (int)d->mode, "uid", 0, "gid", 0));
		json_array_append_new(*allow, json_pack("{s:b, s:s, s:i, s:i, s:s}", "allow", 1,
							"type", type, "major", (int)d->major,
							"minor", (int)d->minor, "access", "rwm"));
	}
	return devs;
}

static json_t *resources(const struct exec_rt_spec *s, json_t *allow)
{
	json_t *r = json_pack("{s:o}", "devices", allow);

	if (!r)
		return NULL;
	if (s->memory_bytes > 0)
		json_object_set_new(r, "memory",
				    json_pack("{s:I}", "limit", (json_int_t)s->memory_bytes));
	if (s->cpus > 0)
		json_object_set_new(r, "cpu",
				    json_pack("{s:I, s:I, s:I}", "quota",
					      (json_int_t)s->cpus * EXEC_RT_CFS_PERIOD_US, "period",
					      (json_int_t)EXEC_RT_CFS_PERIOD_US, "shares",
					      (json_int_t)s->cpus * 1024));
	if (s->pids_limit > 0)
		json_object_set_new(r, "pids", json_pack("{s:I}", "limit", (json_int_t)s->pids_limit));
	return r;
}

int exec_rt_config(json_t **out, const struct exec_rt_spec *s, struct ty_err *err)
{
	json_t *c = NULL, *mounts, *allow = NULL, *devs, *linux;

	*out = NULL;
	if (!s->rootfs || s->rootfs[0] != '/')
		return ty_err_set(err, TY_EINVAL, "the container's root '%s' is not absolute",
				  s->rootfs ? s->rootfs : "");
	for (size_t i = 0; i < s->nmounts; i++) {
		const struct exec_rt_mount *m = &s->mounts[i];

		if (m->src[0] != '/' || m->dst[0] != '/')
			return ty_err_set(err, TY_EINVAL, "mount '%s' -> '%s' is not absolute",
					  m->src, m->dst);
	}
	if (!(mounts = system_mounts(s)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (size_t i = 0; i < s->nmounts; i++)
		if (add_mount(mounts, s->mounts[i].dst, "bind", s->mounts[i].src,
			      /* no nodev: the devices cgroup, not the mount, decides */
			      s->mounts[i].late ? "rbind,rw,nosuid,rslave"
			      : s->mounts[i].rw ? "rbind,rw,nosuid"
						: "rbind,ro,nosuid")) {
			json_decref(mounts);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
	devs = devices_json(s, &allow);
	linux = json_pack("{s:[{s:s}, {s:s}, {s:s}, {s:s}], s:o, s:o, s:s, s:o, s:o}", "namespaces",
			  "type", "pid", "type", "ipc", "type", "uts", "type", "mount", "devices",
			  devs, "resources", resources(s, allow), "cgroupsPath",
			  s->cgroups_path ? s->cgroups_path : "", "maskedPaths",
			  strings(masked_paths, sizeof(masked_paths) / sizeof(masked_paths[0])),
			  "readonlyPaths",
			  strings(readonly_paths, sizeof(readonly_paths) / sizeof(readonly_paths[0])));
	if (linux && s->seccomp)
		json_object_set_new(linux, "seccomp", json_deep_copy(s->seccomp));
	if (linux && !(s->cgroups_path && *s->cgroups_path))
		json_object_del(linux, "cgroupsPath");
	c = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}", "ociVersion", "1.0.2", "process",
		      process(s->init_argv, NULL, "/", s), "root", "path", s->rootfs, "readonly",
		      1, "hostname", s->hostname ? s->hostname : "trainyard", "mounts", mounts,
		      "linux", linux);
	if (!c)
		return ty_err_set(err, TY_ENOMEM, NULL);
	*out = c;
	return 0;
}
