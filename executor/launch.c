/*
 * Launch messages: semantic checks and the rank environment contract, and
 * the checkpoint signals a `checkpoint` message may name (pure).
 */
#include "exec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int int_field(int *out, const json_t *d, const char *key, long long min, long long max,
		     struct ty_err *err)
{
	const json_t *v = json_object_get(d, key);
	long long x;

	if (!json_is_integer(v))
		return ty_err_set(err, TY_EINVAL, "launch field '%s' must be an integer", key);
	x = json_integer_value(v);
	if (x < min || x > max)
		return ty_err_set(err, TY_EINVAL, "launch field '%s' is %lld, not in %lld..%lld",
				  key, x, min, max);
	*out = (int)x;
	return 0;
}

/* An optional integer in seconds, as milliseconds; absent leaves *out alone. */
static int opt_seconds(int64_t *out, const json_t *d, const char *key, long long max,
		       struct ty_err *err)
{
	const json_t *v = json_object_get(d, key);
	long long x;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || (x = json_integer_value(v)) < 0 || x > max)
		return ty_err_set(err, TY_EINVAL, "launch field '%s' must be an integer in 0..%lld",
				  key, max);
	*out = (int64_t)x * 1000;
	return 0;
}

/* A JSON string without embedded NULs, which an environment cannot carry. */
static bool plain_string(const json_t *v)
{
	return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

static bool env_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 255 ||
	    !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static int parse_gpus(struct exec_launch *l, const json_t *a, struct ty_err *err)
{
	size_t i, n = json_array_size(a);

	if (n > EXEC_MAX_GPU_INDEX + 1)
		return ty_err_set(err, TY_EINVAL, "launch lists %zu GPUs, more than a node has", n);
	if (n && !(l->gpus = calloc(n, sizeof(int))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (i = 0; i < n; i++) {
		const json_t *v = json_array_get(a, i);
		long long g = json_is_integer(v) ? json_integer_value(v) : -1;

		if (g < 0 || g > EXEC_MAX_GPU_INDEX)
			return ty_err_set(err, TY_EINVAL, "launch GPU %zu is not an index in 0..%d",
					  i, EXEC_MAX_GPU_INDEX);
		for (size_t j = 0; j < i; j++)
			if (l->gpus[j] == g)
				return ty_err_set(err, TY_EINVAL, "launch lists GPU %lld twice", g);
		l->gpus[i] = (int)g;
	}
	l->ngpus = (int)n;
	return 0;
}

static int parse_command(struct exec_launch *l, const json_t *a, struct ty_err *err)
{
	size_t i, n = json_array_size(a);

	if (n == 0 || n > EXEC_MAX_ARGS)
		return ty_err_set(err, TY_EINVAL, "launch command must have 1..%d arguments",
				  EXEC_MAX_ARGS);
	if (!(l->command = calloc(n + 1, sizeof(char *))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (i = 0; i < n; i++) {
		const json_t *v = json_array_get(a, i);

		if (!plain_string(v))
			return ty_err_set(err, TY_EINVAL,
					  "launch command argument %zu must be a string", i);
		if (i == 0 && !*json_string_value(v))
			return ty_err_set(err, TY_EINVAL, "launch command program is empty");
		if (!(l->command[i] = strdup(json_string_value(v))))
			return ty_err_set(err, TY_ENOMEM, NULL);
	}
	return 0;
}

static int check_env(const json_t *env, struct ty_err *err)
{
	const char *k;
	const json_t *v;

	if (json_object_size(env) > EXEC_MAX_ENV)
		return ty_err_set(err, TY_EINVAL, "launch env has more than %d variables",
				  EXEC_MAX_ENV);
	json_object_foreach((json_t *)env, k, v)
	{
		if (!env_name_ok(k))
			return ty_err_set(err, TY_EINVAL, "launch env name '%.64s' is not valid",
					  k);
		if (!plain_string(v))
			return ty_err_set(err, TY_EINVAL, "launch env '%s' must be a string", k);
	}
	return 0;
}

/* An optional integer field in [lo, hi]; absent or null leaves *out. */
static int opt_int(int64_t *out, const json_t *d, const char *name, int64_t lo, int64_t hi,
		   struct ty_err *err)
{
	const json_t *v = json_object_get(d, name);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return ty_err_set(err, TY_EINVAL, "launch field '%s' must be an integer in %lld..%lld",
				  name, (long long)lo, (long long)hi);
	*out = json_integer_value(v);
	return 0;
}

/* What the container of the attempt needs: whose it is, its limits, its image. */
static int parse_isolation(struct exec_launch *l, const json_t *d, struct ty_err *err)
{
	const json_t *v;
	int64_t cpus = 0;
	int rc;

	l->uid = l->gid = -1;
	if ((rc = opt_int(&l->uid, d, "uid", 1, 2147483646, err)) ||
	    (rc = opt_int(&l->gid, d, "gid", 1, 2147483646, err)) ||
	    (rc = opt_int(&cpus, d, "cpus", 0, 4096, err)) ||
	    (rc = opt_int(&l->memory_mb, d, "memory_mb", 0, 16777216, err)))
		return rc;
	if (l->uid >= 0 && l->gid < 0)
		l->gid = l->uid;
	l->cpus = (int)cpus;
	v = json_object_get(d, "image");
	if (v && !json_is_null(v)) {
		if (!plain_string(v) || json_string_length(v) == 0 || json_string_length(v) > 1024)
			return ty_err_set(err, TY_EINVAL,
					  "launch field 'image' must be a string of 1..1024 "
					  "characters");
		if (!(l->image = strdup(json_string_value(v))))
			return ty_err_set(err, TY_ENOMEM, NULL);
	}
	return 0;
}

int exec_launch_parse(struct exec_launch *l, const struct proto_msg *m, struct ty_err *err)
{
	const json_t *d = m->data, *v;
	const char *mode;
	int rc;

	memset(l, 0, sizeof(*l));
	l->kill_grace_ms = -1;
	l->checkpoint_keep = EXEC_CKPT_KEEP_DEFAULT;
	l->job = m->job;
	l->attempt = m->attempt;
	if (m->type != PROTO_LAUNCH || !json_is_object(d))
		return ty_err_set(err, TY_EINVAL, "not a launch message");
	if ((rc = int_field(&l->nnodes, d, "nnodes", 1, 1000000, err)) ||
	    (rc = int_field(&l->node_rank, d, "node_rank", 0, l->nnodes - 1, err)) ||
	    (rc = int_field(&l->world_size, d, "world_size", 1, 100000000, err)) ||
	    (rc = int_field(&l->local_world_size, d, "local_world_size", 1,
			    l->world_size < EXEC_MAX_LOCAL_RANKS ? l->world_size
								 : EXEC_MAX_LOCAL_RANKS,
			    err)) ||
	    (rc = int_field(&l->first_rank, d, "first_rank", 0, l->world_size - l->local_world_size,
			    err)) ||
	    (rc = int_field(&l->master_port, d, "master_port", 1, 65535, err)))
		return rc;

	v = json_object_get(d, "master_addr");
	if (!plain_string(v) || json_string_length(v) == 0 || json_string_length(v) > 255)
		return ty_err_set(err, TY_EINVAL, "launch master_addr must be 1..255 characters");
	if (!(l->master_addr = strdup(json_string_value(v))))
		return ty_err_set(err, TY_ENOMEM, NULL);

	mode = json_string_value(json_object_get(d, "launch"));
	if (mode && strcmp(mode, "per_gpu") == 0)
		l->mode = EXEC_PER_GPU;
	else if (mode && strcmp(mode, "per_node") == 0)
		l->mode = EXEC_PER_NODE;
	else
		return ty_err_set(err, TY_EINVAL, "launch mode '%.32s' is not per_gpu or per_node",
				  mode ? mode : "");

	if ((rc = parse_gpus(l, json_object_get(d, "gpus"), err)))
		return rc;
	if (l->mode == EXEC_PER_GPU && l->ngpus && l->ngpus != l->local_world_size)
		return ty_err_set(err, TY_EINVAL,
				  "per_gpu launch of %d local ranks lists %d GPUs (needs 0 or %d)",
				  l->local_world_size, l->ngpus, l->local_world_size);
	if ((rc = parse_command(l, json_object_get(d, "command"), err)))
		return rc;
	v = json_object_get(d, "env");
	if ((rc = check_env(v, err)))
		return rc;
	l->env = json_incref((json_t *)v);
	if ((rc = opt_seconds(&l->max_runtime_ms, d, "max_runtime_seconds", 10LL * 366 * 86400,
			      err)) ||
	    (rc = opt_seconds(&l->kill_grace_ms, d, "kill_grace_seconds", 3600, err)) ||
	    (rc = opt_seconds(&l->hang_timeout_ms, d, "hang_timeout_seconds", 10LL * 366 * 86400,
			      err)) ||
	    (rc = opt_seconds(&l->start_timeout_ms, d, "start_timeout_seconds",
			      10LL * 366 * 86400, err)))
		return rc;
	v = json_object_get(d, "checkpoint_keep");
	if (v && !json_is_null(v) &&
	    (rc = int_field(&l->checkpoint_keep, d, "checkpoint_keep", 0, 1000, err)))
		return rc;
	v = json_object_get(d, "checkpoint_signal");
	l->checkpoint_signal = SIGUSR1;
	if (v && !json_is_null(v) &&
	    (!json_is_string(v) || (l->checkpoint_signal = exec_signal_parse(json_string_value(v))) < 0))
		return ty_err_set(err, TY_EINVAL,
				  "launch field 'checkpoint_signal' must be SIGUSR1, SIGUSR2, SIGINT, "
				  "SIGTERM or SIGHUP");
	v = json_object_get(d, "preflight");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return ty_err_set(err, TY_EINVAL, "launch field 'preflight' must be a boolean");
	l->preflight = json_is_true(v);
	v = json_object_get(d, "metrics_token");
	if (v && !json_is_null(v)) {
		const char *t = json_string_value(v);

		if (!t || json_string_length(v) != 47 || strncmp(t, "tym_", 4) != 0 ||
		    strspn(t + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") !=
			43)
			return ty_err_set(err, TY_EINVAL,
					  "launch field 'metrics_token' must be 'tym_' and 43 "
					  "base64url characters");
		memcpy(l->metrics_token, t, 48);
	}
	/* optional (newer schedulers send it): only a label of the GPU series on /metrics */
	v = json_object_get(d, "team");
	if (v && !json_is_null(v)) {
		if (!plain_string(v) || json_string_length(v) == 0 ||
		    json_string_length(v) >= sizeof(l->team))
			return ty_err_set(err, TY_EINVAL,
					  "launch field 'team' must be a string of 1..%zu characters",
					  sizeof(l->team) - 1);
		memcpy(l->team, json_string_value(v), json_string_length(v) + 1);
	}
	return parse_isolation(l, d, err);
}

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

void exec_launch_clear(struct exec_launch *l)
{
	if (!l)
		return;
	free(l->master_addr);
	free(l->gpus);
	if (l->command)
		for (char **p = l->command; *p; p++)
			free(*p);
	free(l->command);
	json_decref(l->env);
	free(l->image);
	memset(l, 0, sizeof(*l));
}

/* The UUID inv (borrowed, may be NULL) knows for GPU index, or NULL. */
static const char *gpu_uuid(const struct hw_inventory *inv, int index)
{
	for (size_t i = 0; inv && i < inv->ngpus; i++)
		if (inv->gpus[i].index == index)
			return inv->gpus[i].uuid[0] ? inv->gpus[i].uuid : NULL;
	return NULL;
}

void exec_cuda_devices(char *out, size_t outsz, const struct exec_launch *l, int local_rank,
		       const struct hw_inventory *inv)
{
	int first = 0, last = l->ngpus;
	bool uuids = true;
	size_t o = 0;

	out[0] = '\0';
	if (l->ngpus == 0)
		return;
	if (l->mode == EXEC_PER_GPU) {
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

int exec_signal_parse(const char *name)
{
	/* the signals a job spec may choose (docs/api.md, checkpoint.signal) */
	static const struct {
		const char *name;
		int sig;
	} sigs[] = {{"USR1", SIGUSR1},
		    {"USR2", SIGUSR2},
		    {"INT", SIGINT},
		    {"TERM", SIGTERM},
		    {"HUP", SIGHUP}};

	if (!name)
		return -1;
	if (!strncmp(name, "SIG", 3))
		name += 3;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		if (!strcmp(name, sigs[i].name))
			return sigs[i].sig;
	return -1;
}

int exec_env_build(char ***out, const struct exec_launch *l, int local_rank, const char *node_id,
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
	if (!json_is_array(a) || n == 0 || n > EXEC_MAX_ARGS) {
		rc = ty_err_set(err, TY_EINVAL, "'%.200s' is not a JSON array of 1..%d strings",
				text, EXEC_MAX_ARGS);
		goto out;
	}
	if (!(v = calloc(n + 1, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_array_get(a, i);

		if (!plain_string(s) || (i == 0 && !*json_string_value(s))) {
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
