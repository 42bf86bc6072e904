/*
 * What every container on this node shares (runtime.h), from the
 * executor's options: the operator's data mounts, the rank shim, the
 * hostname, the cgroup under --cgroup-parent, the init, the pids limit and
 * the rlimits. The attempt (attempt.c) and the warm containers (warm.c)
 * add their own parts.
 */
#include "exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

void exec__ctr_storage_free(struct exec_ctr_storage *st)
{
	free(st->mounts);
	st->mounts = NULL;
}

int exec__ctr_spec_node(struct exec_rt_spec *s, struct exec_ctr_storage *st,
			const struct exec_opts *o, const char *id, size_t extra, struct ty_err *err)
{
	struct rlimit nofile, memlock;
	const char *parent = o->runtime->cgroup_parent;
	size_t nm = 0;

	if (!(st->mounts = calloc(1 + o->ndata_mounts + extra, sizeof(*st->mounts))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	/* shared data first: the job's own directories may lie under it */
	for (size_t i = 0; i < o->ndata_mounts; i++)
		st->mounts[nm++] = o->data_mounts[i];
	snprintf(st->mounts[nm].src, sizeof(st->mounts[nm].src), "%s", o->rank_shim);
	snprintf(st->mounts[nm].dst, sizeof(st->mounts[nm].dst), "%s", EXEC_RT_SHIM_PATH);
	nm++;
	if (gethostname(st->hostname, sizeof(st->hostname) - 1))
		snprintf(st->hostname, sizeof(st->hostname), "%s", o->node_id);
	if ((size_t)snprintf(st->cgroup, sizeof(st->cgroup), "%s/%s",
			     strcmp(parent, "/") ? parent : "", id) >= sizeof(st->cgroup))
		return ty_err_set(err, TY_EINVAL, "the cgroup path under '%s' is too long", parent);
	st->init_argv[0] = EXEC_RT_SHIM_PATH;
	st->init_argv[1] = "--init";
	st->init_argv[2] = NULL;
	if (getrlimit(RLIMIT_NOFILE, &nofile))
		nofile.rlim_max = 1024;
	if (getrlimit(RLIMIT_MEMLOCK, &memlock))
		memlock.rlim_max = 64 << 10;
	s->host_root = true;
	s->hostname = st->hostname;
	s->pids_limit = o->pids_limit;
	s->cgroups_path = st->cgroup;
	s->mounts = st->mounts;
	s->nmounts = nm;
	s->devices = st->devices;
	s->init_argv = st->init_argv;
	s->nofile = nofile.rlim_max > 1048576 ? 1048576 : nofile.rlim_max;
	s->memlock = memlock.rlim_max; /* RLIM_INFINITY: as much as a JSON integer says */
	return 0;
}
