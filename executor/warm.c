/*
 * Warm containers (docs/security.md, "Warm containers"): with
 * --warm-containers N, up to N containers per node are created ahead, on
 * the thread pool, with everything a host-root attempt's container has
 * except what only the attempt knows. The next attempt whose devices are
 * exactly theirs takes one: its work and checkpoint directories are bound
 * in under the two late roots (the attempts' and the checkpoints' parent
 * directories, empty but for them), its memory and CPU limits changed by
 * the runtime where they differ from the ones it was created with (those
 * of the last attempt that took one), and its ranks exec'd as its team's
 * uid. The next one is started once that attempt runs (or ends), not while
 * it starts, and at a lower CPU priority: it must not slow the start it
 * exists to speed up. A container serves one attempt and is deleted after
 * it, as any.
 *
 * Everything here runs on the loop except the creation and the claim.
 */
#include "exec.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARM_UID 65534		/* nobody: the warm init's, never a team's */
#define WARM_RETRY_MS 30000	/* after a failed creation */

struct warm_ctr {
	char id[EXEC_RT_ID_MAX];
	pid_t init;
	struct exec_warm_limits limits; /* created with */
	size_t ndevices;
	struct exec_rt_device devices[EXEC_RT_MAX_DEVICES];
};

struct exec_warm {
	struct warm_ctr ready[EXEC_WARM_MAX];
	size_t nready;
	bool creating;
	/* the limits of the last attempt that took one: the next is likely alike */
	struct exec_warm_limits next;
	int64_t seq;
	int64_t retry_at; /* mono ms; 0: now */
};

/* One creation on the thread pool. */
struct warm_work {
	uv_work_t req;
	struct exec *x;
	const struct exec_opts *o;
	struct exec_rt_spec spec;
	struct exec_ctr_storage st;
	struct warm_ctr c;
	bool fabric; /* the RDMA devices too: the fabric as the loop saw it */
	int rc;
	char error[TY_ERR_MSG_MAX];
};

/* The late roots: where an attempt's directories lie, in the order claim binds them. */
static void late_roots(char roots[2][4096], const struct exec_opts *o)
{
	snprintf(roots[0], 4096, "%s/attempts", o->state_dir);
	snprintf(roots[1], 4096, "%s", o->checkpoint_root);
}

int exec__warm_new(struct exec_warm **out)
{
	return (*out = calloc(1, sizeof(**out))) ? 0 : TY_ENOMEM;
}

void exec__warm_free(struct exec_warm *w)
{
	free(w);
}

/* The spec of a warm container: the node's part, the late roots, every GPU of the node. */
static int warm_spec(struct warm_work *w, struct ty_err *err)
{
	const struct exec_opts *o = w->o;
	const struct hw_inventory *inv = o->inventory;
	struct exec_rt_spec *s = &w->spec;
	int gpus[EXEC_RT_MAX_DEVICES];
	char roots[2][4096];
	int ngpus = 0, rc;

	if ((rc = exec__ctr_spec_node(s, &w->st, o, w->c.id, 2, err)))
		return rc;
	late_roots(roots, o);
	for (size_t i = 0; i < 2; i++) {
		struct exec_rt_mount *m = &w->st.mounts[s->nmounts++];

		exec_rt_late_dir(m->src, sizeof(m->src), o->runtime, w->c.id, i);
		snprintf(m->dst, sizeof(m->dst), "%s", roots[i]);
		m->rw = m->late = true;
	}
	for (size_t i = 0; inv && i < inv->ngpus && ngpus < EXEC_RT_MAX_DEVICES; i++)
		gpus[ngpus++] = inv->gpus[i].index;
	if ((rc = exec_rt_devices(w->st.devices, EXEC_RT_MAX_DEVICES, &s->ndevices,
				  o->device_dir ? o->device_dir : "/dev", gpus, ngpus,
				  w->fabric, inv && inv->simulated, err)))
		return rc;
	w->c.ndevices = s->ndevices;
	memcpy(w->c.devices, w->st.devices, s->ndevices * sizeof(*w->st.devices));
	s->uid = s->gid = WARM_UID;
	s->memory_bytes = w->c.limits.memory_bytes;
	s->cpus = w->c.limits.cpus;
	/* /dev/shm as for an attempt without a memory limit: the attempt's limit caps it */
	s->shm_bytes = o->shm_mb > 0	     ? o->shm_mb << 20
		       : o->memory_mb > 0 ? (o->memory_mb << 20) / 2
					  : (int64_t)64 << 20;
	return 0;
}

static void create_work(uv_work_t *req)
{
	struct warm_work *w = req->data;
	struct ty_err err = {0};
	json_t *seccomp = NULL;
	int nice = exec_rt_thread_nice(EXEC_RT_BACKGROUND_NICE);

	if (!(w->rc = warm_spec(w, &err))) {
		if (w->o->seccomp && !(seccomp = json_loads(w->o->seccomp, 0, NULL)))
			w->rc = ty_err_set(&err, TY_EINVAL, "the seccomp profile is not JSON");
		w->spec.seccomp = seccomp;
		if (!w->rc)
			w->rc = exec_rt_create(w->o->runtime, w->c.id, &w->spec, &w->c.init, &err);
		w->spec.seccomp = NULL;
		json_decref(seccomp);
	}
	exec_rt_thread_nice(nice); /* the pool's thread may serve an attempt next */
	if (w->rc)
		snprintf(w->error, sizeof(w->error), "%s", err.msg);
}

static void drop(const struct exec_opts *o, struct warm_ctr *c)
{
	exec_rt_delete(o->runtime, c->id);
	exec_rt_reap(c->init);
}

static void create_done(uv_work_t *req, int status)
{
	struct warm_work *w = req->data;
	struct exec_warm *p = exec__warm(w->x);

	p->creating = false;
	if (status || w->rc) {
		ty_warn("cannot create a warm container (attempts create their own; retry in %d "
			"s): %s",
			WARM_RETRY_MS / 1000, status ? uv_strerror(status) : w->error);
		p->retry_at = ty_mono_ms() + WARM_RETRY_MS;
		if (!w->rc && w->c.init > 0)
			drop(w->o, &w->c);
	} else if (exec__stopping(w->x) || p->nready >= EXEC_WARM_MAX ||
		   w->fabric != (exec_env_get(exec__fabric_env(w->x), "NCCL_IB_HCA") != NULL)) {
		drop(w->o, &w->c); /* or made for the fabric as it was before a change */
		exec__warm_fill(w->x);
	} else {
		ty_debug("warm container %s ready", w->c.id);
		p->ready[p->nready++] = w->c;
		exec__warm_fill(w->x);
	}
	exec__ctr_storage_free(&w->st);
	free(w);
}

void exec__warm_fill(struct exec *x)
{
	const struct exec_opts *o = exec__opts(x);
	struct exec_warm *p = exec__warm(x);
	struct warm_work *w;

	if (!o->runtime || p->creating || p->nready >= (size_t)o->warm_containers ||
	    exec__stopping(x) || ty_mono_ms() < p->retry_at)
		return;
	if (!(w = calloc(1, sizeof(*w))))
		return;
	w->x = x;
	w->o = o;
	w->c.limits = p->next;
	w->fabric = exec_env_get(exec__fabric_env(x), "NCCL_IB_HCA") != NULL;
	snprintf(w->c.id, sizeof(w->c.id), "ty-%s-warm-%lld", o->node_id, (long long)++p->seq);
	w->req.data = w;
	if (uv_queue_work(exec__loop(x), &w->req, create_work, create_done)) {
		free(w);
		return;
	}
	p->creating = true;
}

static bool same_devices(const struct warm_ctr *c, const struct exec_rt_device *d, size_t n)
{
	if (c->ndevices != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(c->devices[i].path, d[i].path) || c->devices[i].major != d[i].major ||
		    c->devices[i].minor != d[i].minor || c->devices[i].type != d[i].type)
			return false;
	return true;
}

bool exec__warm_take(struct exec *x, const struct exec_rt_device *devices, size_t ndevices,
		     const struct exec_warm_limits *want, char id[EXEC_RT_ID_MAX], pid_t *init,
		     struct exec_warm_limits *has)
{
	struct exec_warm *p = exec__warm(x);

	p->next = *want;
	for (size_t i = 0; i < p->nready; i++) {
		if (!same_devices(&p->ready[i], devices, ndevices))
			continue;
		memcpy(id, p->ready[i].id, EXEC_RT_ID_MAX);
		*init = p->ready[i].init;
		*has = p->ready[i].limits;
		p->ready[i] = p->ready[--p->nready];
		return true;
	}
	return false;
}

/* path relative to root (a directory under it), or NULL. */
static const char *under(const char *path, const char *root)
{
	size_t n = strlen(root);

	return !strncmp(path, root, n) && path[n] == '/' && path[n + 1] ? path + n + 1 : NULL;
}

int exec__warm_claim(const struct exec_opts *o, const char *id, const char *work,
		     const char *ckpt, const struct exec_rt_spec *s,
		     const struct exec_warm_limits *has, struct ty_err *err)
{
	struct exec_rt_limits l = {s->memory_bytes != has->memory_bytes, s->cpus != has->cpus,
				   s->memory_bytes, s->cpus};
	const char *dirs[2] = {work, ckpt}, *rel;
	char roots[2][4096];
	int rc;

	late_roots(roots, o);
	for (size_t i = 0; i < 2; i++) {
		if (!(rel = under(dirs[i], roots[i])))
			return ty_err_set(err, TY_EINVAL, "'%s' is not under '%s'", dirs[i],
					  roots[i]);
		if ((rc = exec_rt_bind_late(o->runtime, id, i, dirs[i], rel, err)))
			return rc;
	}
	return exec_rt_update(o->runtime, id, &l, err);
}

void exec__warm_stop(struct exec *x)
{
	struct exec_warm *p = exec__warm(x);

	while (p->nready)
		drop(exec__opts(x), &p->ready[--p->nready]);
}
