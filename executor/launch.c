/*
 * What a launch means on this node (pure): the rank environment contract,
 * each rank's CUDA_VISIBLE_DEVICES, a rank's argv from text. The launch
 * message itself is decoded by proto/launch.c.
 */
#include "exec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *exec_preflight_node_check(const char *text)
{
	const char *p = text;

	while (p && *p) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		json_t *line, *nc;

		while (n && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		if (n && *p == '{' && (line = json_loadb(p, n, 0, NULL))) {
			nc = json_object_get(line, "node_check");
			if (json_is_object(nc)) {
				json_incref(nc);
				json_decref(line);
				return nc;
			}
			json_decref(line);
		}
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

/* The UUID inv (borrowed, may be NULL) knows for GPU index, or NULL. */
static const char *gpu_uuid(const struct hw_inventory *inv, int index)
{
	for (size_t i = 0; inv && i < inv->ngpus; i++)
		if (inv->gpus[i].index == index)
			return inv->gpus[i].uuid[0] ? inv->gpus[i].uuid : NULL;
	return NULL;
}

void exec_cuda_devices(char *out, size_t outsz, const struct proto_launch *l, int local_rank,
		       const struct hw_inventory *inv)
{
	int first = 0, last = l->ngpus;
	bool uuids = true;
	size_t o = 0;

	out[0] = '\0';
	if (l->ngpus == 0)
		return;
	if (l->mode == PROTO_LAUNCH_PER_GPU) {
		if (local_rank < 0 || local_rank >= l->ngpus)
			return;
		first = local_rank;
		last = local_rank + 1;
	}
	/* all by UUID or all by index: never a mix that depends on which GPUs were given */
	for (int i = first; i < last; i++)
		if (!gpu_uuid(inv, l->gpus[i]))
			uuids = false;
	for (int i = first; i < last && o < outsz; i++) {
		int n = uuids ? snprintf(out + o, outsz - o, "%s%s", o ? "," : "",
					 gpu_uuid(inv, l->gpus[i]))
			      : snprintf(out + o, outsz - o, "%s%d", o ? "," : "", l->gpus[i]);

		if (n < 0 || (size_t)n >= outsz - o) {
			out[o] = '\0'; /* never a cut-off index */
			return;
		}
		o += (size_t)n;
	}
}

/* A growing environment where setting a name again replaces its value. */
struct envb {
	char **v;
	size_t n, cap;
};

static int envb_set(struct envb *e, const char *name, const char *value, struct ty_err *err)
{
	size_t nl = strlen(name), i;
	char *s;

	if (!(s = malloc(nl + strlen(value) + 2)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	sprintf(s, "%s=%s", name, value);
	for (i = 0; i < e->n; i++)
		if (strncmp(e->v[i], name, nl) == 0 && e->v[i][nl] == '=') {
			free(e->v[i]);
			e->v[i] = s;
			return 0;
		}
	if (e->n + 2 > e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 32;
		char **p = realloc(e->v, cap * sizeof(char *));

		if (!p) {
			free(s);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		e->v = p;
		e->cap = cap;
	}
	e->v[e->n++] = s;
	e->v[e->n] = NULL;
	return 0;
}

static int envb_setf(struct envb *e, const char *name, long long value, struct ty_err *err)
{
	char s[32];

	snprintf(s, sizeof(s), "%lld", value);
	return envb_set(e, name, s, err);
}

const char *exec_env_get(char *const *env, const char *name)
{
	size_t nl = strlen(name);

	for (; env && *env; env++)
		if (strncmp(*env, name, nl) == 0 && (*env)[nl] == '=')
			return *env + nl + 1;
	return NULL;
}

int exec_env_build(char ***out, const struct proto_launch *l, int local_rank, const char *node_id,
		   char *const *inherit, const struct exec_env_extra *extra, struct ty_err *err)
{
	static const char *const inherited[] = {"PATH", "HOME", "LANG"};
	struct envb e = {0};
	char *cuda = NULL;
	size_t cudasz = (size_t)l->ngpus * HW_UUID_MAX + 1;
	const char *k, *v;
	const json_t *jv;
	int rc = 0;

	*out = NULL;
	if (local_rank < 0 || local_rank >= l->local_world_size) {
		rc = ty_err_set(err, TY_EINVAL, "local rank %d is not in 0..%d", local_rank,
				l->local_world_size - 1);
		goto out;
	}
	for (size_t i = 0; i < sizeof(inherited) / sizeof(inherited[0]); i++)
		if ((v = exec_env_get(inherit, inherited[i])) &&
		    (rc = envb_set(&e, inherited[i], v, err)))
			goto out;
	for (char *const *f = extra ? extra->fabric : NULL; f && *f; f++) {
		const char *eq = strchr(*f, '=');
		char name[256];

		if (!eq || eq == *f || (size_t)(eq - *f) >= sizeof(name)) {
			rc = ty_err_set(err, TY_EINVAL, "fabric variable '%.64s' is not NAME=value",
					*f);
			goto out;
		}
		memcpy(name, *f, (size_t)(eq - *f));
		name[eq - *f] = '\0';
		if ((rc = envb_set(&e, name, eq + 1, err)))
			goto out;
	}
	json_object_foreach((json_t *)l->env, k,
			    jv) if ((rc = envb_set(&e, k, json_string_value(jv), err))) goto out;
	if (!(cuda = malloc(cudasz))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	exec_cuda_devices(cuda, cudasz, l, local_rank, extra ? extra->inventory : NULL);
	if ((rc = envb_set(&e, "MASTER_ADDR", l->master_addr, err)) ||
	    (rc = envb_setf(&e, "MASTER_PORT", l->master_port, err)) ||
	    (rc = envb_setf(&e, "WORLD_SIZE", l->world_size, err)) ||
	    (rc = envb_setf(&e, "RANK", (long long)l->first_rank + local_rank, err)) ||
	    (rc = envb_setf(&e, "LOCAL_RANK", local_rank, err)) ||
	    (rc = envb_setf(&e, "LOCAL_WORLD_SIZE", l->local_world_size, err)) ||
	    (rc = envb_setf(&e, "NODE_RANK", l->node_rank, err)) ||
	    (rc = envb_setf(&e, "NNODES", l->nnodes, err)) ||
	    (rc = envb_set(&e, "CUDA_VISIBLE_DEVICES", cuda, err)) ||
	    (rc = envb_set(&e, "CUDA_DEVICE_ORDER", "PCI_BUS_ID", err)) ||
	    (rc = envb_setf(&e, "TRAINYARD_JOB_ID", l->job, err)) ||
	    (rc = envb_setf(&e, "TRAINYARD_ATTEMPT", l->attempt, err)) ||
	    (rc = envb_set(&e, "TRAINYARD_NODE_ID", node_id, err)))
		goto out;
	if (extra && extra->checkpoint_dir &&
	    (rc = envb_set(&e, "TRAINYARD_CHECKPOINT_DIR", extra->checkpoint_dir, err)))
		goto out;
	if (extra && extra->resume_from &&
	    (rc = envb_set(&e, "TRAINYARD_RESUME_FROM", extra->resume_from, err)))
		goto out;
	if (extra && extra->progress_file &&
	    (rc = envb_set(&e, "TRAINYARD_PROGRESS_FILE", extra->progress_file, err)))
		goto out;
	if (extra && extra->api_url && *extra->api_url && l->metrics_token[0]) {
		size_t n = strlen(extra->api_url);
		char url[4096];

		while (n && extra->api_url[n - 1] == '/')
			n--;
		if ((size_t)snprintf(url, sizeof(url), "%.*s/v1/jobs/%lld/metrics", (int)n,
				     extra->api_url, (long long)l->job) >= sizeof(url)) {
			rc = ty_err_set(err, TY_EINVAL, "the API URL is too long");
			goto out;
		}
		if ((rc = envb_set(&e, "TRAINYARD_METRICS_URL", url, err)) ||
		    (rc = envb_set(&e, "TRAINYARD_METRICS_TOKEN", l->metrics_token, err)))
			goto out;
	}
	*out = e.v;
	e.v = NULL;
out:
	free(cuda);
	exec_env_free(e.v);
	return rc;
}

void exec_env_free(char **env)
{
	if (!env)
		return;
	for (char **p = env; *p; p++)
		free(*p);
	free(env);
}

int exec_argv_parse(char ***out, const char *text, struct ty_err *err)
{
	json_error_t je;
	json_t *a = json_loads(text, JSON_REJECT_DUPLICATES, &je);
	size_t n = json_array_size(a);
	char **v = NULL;
	int rc = 0;

	*out = NULL;
	if (!json_is_array(a) || n == 0 || n > PROTO_LAUNCH_MAX_ARGS) {
		rc = ty_err_set(err, TY_EINVAL, "'%.200s' is not a JSON array of 1..%d strings",
				text, PROTO_LAUNCH_MAX_ARGS);
		goto out;
	}
	if (!(v = calloc(n + 1, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_array_get(a, i);

		if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s) ||
		    (i == 0 && !*json_string_value(s))) {
			rc =
			    ty_err_set(err, TY_EINVAL, "argument %zu of '%.200s' is not a %sstring",
				       i, text, i == 0 ? "non-empty " : "");
			goto out;
		}
		if (!(v[i] = strdup(json_string_value(s)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = v;
	v = NULL;
out:
	exec_env_free(v);
	json_decref(a);
	return rc;
}
