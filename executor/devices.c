/*
 * The device nodes a job gets inside its container (runtime.h): its GPUs
 * by index, the NVIDIA control devices the driver needs, and with the
 * fabric the RDMA devices. Each is looked up on the host, so the container
 * and its devices cgroup name the same major and minor numbers.
 */
#include "runtime.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static const char *const nvidia_control[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools",
					     "nvidia-modeset"};

/* Append host device <dir>/<name> as /dev/<prefix><name>; 1 added, 0 absent. */
static int add(struct exec_rt_device *out, size_t max, size_t *n, const char *dir,
	       const char *prefix, const char *name, struct ty_err *err)
{
	char host[4096];
	struct stat st;

	if ((size_t)snprintf(host, sizeof(host), "%s/%s", dir, name) >= sizeof(host))
		return ty_err_set(err, TY_EINVAL, "device path '%s/%s' is too long", dir, name);
	if (stat(host, &st))
		return errno == ENOENT ? 0
				       : ty_err_set(err, TY_EIO, "cannot look at device '%s': %s",
						    host, strerror(errno));
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
		return ty_err_set(err, TY_EINVAL, "'%s' is not a device node", host);
	if (*n >= max)
		return ty_err_set(err, TY_EINVAL, "more than %zu devices", max);
	struct exec_rt_device *d = &out[(*n)++];

	snprintf(d->path, sizeof(d->path), "/dev/%s%s", prefix, name);
	d->type = S_ISCHR(st.st_mode) ? 'c' : 'b';
	d->major = major(st.st_rdev);
	d->minor = minor(st.st_rdev);
	d->mode = st.st_mode & 0777;
	return 1;
}

int exec_rt_devices(struct exec_rt_device *out, size_t max, size_t *n, const char *dev_dir,
		    const int *gpus, int ngpus, bool fabric, bool allow_missing_gpus,
		    struct ty_err *err)
{
	char name[32], ib[4096];
	int rc;

	*n = 0;
	for (int i = 0; i < ngpus; i++) {
		snprintf(name, sizeof(name), "nvidia%d", gpus[i]);
		if ((rc = add(out, max, n, dev_dir, "", name, err)) < 0)
			return rc;
		if (rc == 0 && !allow_missing_gpus)
			return ty_err_set(err, TY_ENOTFOUND,
					  "GPU %d of the job has no device node '%s/%s' on this "
					  "node",
					  gpus[i], dev_dir, name);
	}
	if (ngpus > 0)
		for (size_t i = 0; i < sizeof(nvidia_control) / sizeof(nvidia_control[0]); i++)
			if ((rc = add(out, max, n, dev_dir, "", nvidia_control[i], err)) < 0)
				return rc;
	if (fabric) {
		DIR *d;
		struct dirent *e;

		snprintf(ib, sizeof(ib), "%s/infiniband", dev_dir);
		if (!(d = opendir(ib)))
			return 0;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.' &&
			    (rc = add(out, max, n, ib, "infiniband/", e->d_name, err)) < 0) {
				closedir(d);
				return rc;
			}
		closedir(d);
	}
	return 0;
}

/* Whether dst is a path the container's own mounts own (or lies under one). */
static bool system_path(const char *dst)
{
	static const char *const own[] = {"/proc", "/dev", "/sys", "/.trainyard"};

	if (!strcmp(dst, "/"))
		return true;
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		size_t n = strlen(own[i]);

		if (!strncmp(dst, own[i], n) && (dst[n] == '\0' || dst[n] == '/'))
			return true;
	}
	return false;
}

int exec_rt_mounts_parse(struct exec_rt_mount *out, size_t max, size_t *n, const char *list,
			 struct ty_err *err)
{
	const char *p = list;
	struct stat st;

	*n = 0;
	while (p && *p) {
		size_t len = strcspn(p, ","), slen;
		const char *colon = memchr(p, ':', len);
		struct exec_rt_mount *m;

		if (len == 0) {
			p++;
			continue;
		}
		if (*n >= max)
			return ty_err_set(err, TY_EINVAL, "more than %zu data mounts", max);
		m = &out[(*n)++];
		slen = colon ? (size_t)(colon - p) : len;
		if (slen >= sizeof(m->src) || len - slen >= sizeof(m->dst))
			return ty_err_set(err, TY_EINVAL, "data mount '%.*s' is too long", (int)len,
					  p);
		snprintf(m->src, sizeof(m->src), "%.*s", (int)slen, p);
		if (colon)
			snprintf(m->dst, sizeof(m->dst), "%.*s", (int)(len - slen - 1), colon + 1);
		else
			snprintf(m->dst, sizeof(m->dst), "%s", m->src);
		m->rw = false;
		if (m->src[0] != '/' || m->dst[0] != '/')
			return ty_err_set(err, TY_EINVAL,
					  "data mount '%.*s': both paths must be absolute "
					  "(SRC[:DST])",
					  (int)len, p);
		if (system_path(m->dst))
			return ty_err_set(err, TY_EINVAL,
					  "data mount '%.*s' would cover the container's own '%s'",
					  (int)len, p, m->dst);
		if (stat(m->src, &st))
			return ty_err_set(err, TY_ENOTFOUND, "data mount '%.*s': '%s': %s",
					  (int)len, p, m->src, strerror(errno));
		p += len;
	}
	return 0;
}
