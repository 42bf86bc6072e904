/* The launch message's data: its one encoder and its one decoder (launch.h). */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- decoding: every check beyond JSON types ---- */

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

static int parse_gpus(struct proto_launch *l, const json_t *a, struct ty_err *err)
{
	size_t i, n = json_array_size(a);

	if (n > PROTO_LAUNCH_MAX_GPU_INDEX + 1)
		return ty_err_set(err, TY_EINVAL, "launch lists %zu GPUs, more than a node has", n);
	if (n && !(l->gpus = calloc(n, sizeof(int))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (i = 0; i < n; i++) {
		const json_t *v = json_array_get(a, i);
		long long g = json_is_integer(v) ? json_integer_value(v) : -1;

		if (g < 0 || g > PROTO_LAUNCH_MAX_GPU_INDEX)
			return ty_err_set(err, TY_EINVAL, "launch GPU %zu is not an index in 0..%d",
					  i, PROTO_LAUNCH_MAX_GPU_INDEX);
		for (size_t j = 0; j < i; j++)
			if (l->gpus[j] == g)
				return ty_err_set(err, TY_EINVAL, "launch lists GPU %lld twice", g);
		l->gpus[i] = (int)g;
	}
	l->ngpus = (int)n;
	return 0;
}

static int parse_command(struct proto_launch *l, const json_t *a, struct ty_err *err)
{
	size_t i, n = json_array_size(a);

	if (n == 0 || n > PROTO_LAUNCH_MAX_ARGS)
		return ty_err_set(err, TY_EINVAL, "launch command must have 1..%d arguments",
				  PROTO_LAUNCH_MAX_ARGS);
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

	if (json_object_size(env) > PROTO_LAUNCH_MAX_ENV)
		return ty_err_set(err, TY_EINVAL, "launch env has more than %d variables",
				  PROTO_LAUNCH_MAX_ENV);
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
static int parse_isolation(struct proto_launch *l, const json_t *d, struct ty_err *err)
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

static bool is_digest(const json_t *v)
{
	return plain_string(v) && json_string_length(v) == PROTO_LAUNCH_DIGEST_LEN &&
	       strspn(json_string_value(v), "0123456789abcdef") == PROTO_LAUNCH_DIGEST_LEN;
}

/* The resume checkpoint: absent or null (none), else all three fields. */
static int parse_resume(struct proto_launch_resume *r, const json_t *v, struct ty_err *err)
{
	const json_t *step = json_object_get(v, "step"), *path = json_object_get(v, "path");

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v) || !json_is_integer(step) || json_integer_value(step) < 0)
		return ty_err_set(err, TY_EINVAL,
				  "launch field 'resume' must be an object with a non-negative "
				  "integer step");
	if (!is_digest(json_object_get(v, "digest")))
		return ty_err_set(err, TY_EINVAL,
				  "launch field 'resume.digest' must be 64 lowercase hex digits");
	if (!plain_string(path) || json_string_length(path) == 0 ||
	    json_string_length(path) > PROTO_LAUNCH_RESUME_PATH_MAX)
		return ty_err_set(err, TY_EINVAL,
				  "launch field 'resume.path' must be a string of 1..%d characters",
				  PROTO_LAUNCH_RESUME_PATH_MAX);
	if (!(r->path = strdup(json_string_value(path))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	r->set = true;
	r->step = (int64_t)json_integer_value(step);
	memcpy(r->digest, json_string_value(json_object_get(v, "digest")),
	       PROTO_LAUNCH_DIGEST_LEN + 1);
	return 0;
}

int proto_launch_decode(struct proto_launch *l, const struct proto_msg *m, struct ty_err *err)
{
	const json_t *d = m->data, *v;
	const char *mode;
	int rc;

	memset(l, 0, sizeof(*l));
	l->kill_grace_ms = -1;
	l->checkpoint_keep = (int)proto_spec_default_int("checkpoint", "keep");
	l->job = m->job;
	l->attempt = m->attempt;
	if (m->type != PROTO_LAUNCH || !json_is_object(d))
		return ty_err_set(err, TY_EINVAL, "not a launch message");
	if ((rc = int_field(&l->nnodes, d, "nnodes", 1, 1000000, err)) ||
	    (rc = int_field(&l->node_rank, d, "node_rank", 0, l->nnodes - 1, err)) ||
	    (rc = int_field(&l->world_size, d, "world_size", 1, 100000000, err)) ||
	    (rc = int_field(&l->local_world_size, d, "local_world_size", 1,
			    l->world_size < PROTO_LAUNCH_MAX_LOCAL_RANKS ? l->world_size
								 : PROTO_LAUNCH_MAX_LOCAL_RANKS,
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
	if ((l->mode = proto_launch_mode_parse(mode)) == PROTO_LAUNCH_MODE_COUNT)
		return ty_err_set(err, TY_EINVAL, "launch mode '%.32s' is not per_gpu or per_node",
				  mode ? mode : "");

	if ((rc = parse_gpus(l, json_object_get(d, "gpus"), err)))
		return rc;
	if (l->mode == PROTO_LAUNCH_PER_GPU && l->ngpus && l->ngpus != l->local_world_size)
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
	v = json_object_get(d, "checkpoint_keep_every");
	if (v && !json_is_null(v) &&
	    (rc = int_field(&l->checkpoint_keep_every, d, "checkpoint_keep_every", 0, 1000000000,
			    err)))
		return rc;
	v = json_object_get(d, "checkpoint_tier");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return ty_err_set(err, TY_EINVAL, "launch field 'checkpoint_tier' must be a boolean");
	l->checkpoint_tier = json_is_true(v);
	v = json_object_get(d, "checkpoint_signal");
	l->checkpoint_signal = proto_ckpt_signal_parse(proto_spec_default_str("checkpoint", "signal"));
	if (v && !json_is_null(v) &&
	    (!json_is_string(v) || (l->checkpoint_signal = proto_ckpt_signal_parse(json_string_value(v))) < 0))
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

		if (!t || json_string_length(v) != PROTO_LAUNCH_TOKEN_LEN || strncmp(t, "tym_", 4) != 0 ||
		    strspn(t + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") !=
			43)
			return ty_err_set(err, TY_EINVAL,
					  "launch field 'metrics_token' must be 'tym_' and 43 "
					  "base64url characters");
		memcpy(l->metrics_token, t, PROTO_LAUNCH_TOKEN_LEN + 1);
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
	if ((rc = parse_resume(&l->resume, json_object_get(d, "resume"), err)))
		return rc;
	return parse_isolation(l, d, err);
}

void proto_launch_clear(struct proto_launch *l)
{
	if (!l)
		return;
	free(l->master_addr);
	free(l->gpus);
	for (char **a = l->command; a && *a; a++)
		free(*a);
	free(l->command);
	json_decref(l->env);
	free(l->image);
	free(l->resume.path);
	memset(l, 0, sizeof(*l));
}

/* ---- encoding ---- */

/* A signal's name as the spec names it ("SIGUSR1"), NULL when it is not a checkpoint signal. */
static const char *ckpt_signal_name(int sig)
{
	static const char *const names[] = {
#define PROTO_CKPT_SIGNAL_NAME(name) #name,
	    PROTO_CKPT_SIGNALS(PROTO_CKPT_SIGNAL_NAME)
#undef PROTO_CKPT_SIGNAL_NAME
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (proto_ckpt_signal_parse(names[i]) == sig)
			return names[i];
	return NULL;
}

static int set_int(json_t *o, const char *key, long long v)
{
	return json_object_set_new(o, key, json_integer(v));
}

json_t *proto_launch_common(const struct proto_launch *l)
{
	json_t *o = json_object(), *cmd = json_array();
	const char *sig = ckpt_signal_name(l->checkpoint_signal);
	int bad = !o || !cmd;

	for (char **a = l->command; !bad && a && *a; a++)
		bad |= json_array_append_new(cmd, json_string(*a));
	if (bad) {
		json_decref(o);
		json_decref(cmd);
		return NULL;
	}
	bad |= set_int(o, "nnodes", l->nnodes);
	bad |= set_int(o, "world_size", l->world_size);
	bad |= set_int(o, "local_world_size", l->local_world_size);
	bad |= json_object_set_new(o, "master_addr", json_string(l->master_addr ? l->master_addr : ""));
	bad |= set_int(o, "master_port", l->master_port);
	bad |= json_object_set_new(o, "command", cmd);
	bad |= json_object_set_new(o, "env", l->env ? json_deep_copy(l->env) : json_object());
	bad |= json_object_set_new(o, "launch", json_string(proto_launch_mode_name(l->mode)));
	bad |= set_int(o, "max_runtime_seconds", l->max_runtime_ms / 1000);
	if (l->kill_grace_ms >= 0)
		bad |= set_int(o, "kill_grace_seconds", l->kill_grace_ms / 1000);
	bad |= set_int(o, "hang_timeout_seconds", l->hang_timeout_ms / 1000);
	bad |= set_int(o, "start_timeout_seconds", l->start_timeout_ms / 1000);
	bad |= set_int(o, "checkpoint_keep", l->checkpoint_keep);
	bad |= set_int(o, "checkpoint_keep_every", l->checkpoint_keep_every);
	bad |= json_object_set_new(o, "checkpoint_tier", json_boolean(l->checkpoint_tier));
	bad |= json_object_set_new(o, "preflight", json_boolean(l->preflight));
	if (sig)
		bad |= json_object_set_new(o, "checkpoint_signal", json_string(sig));
	if (l->metrics_token[0])
		bad |= json_object_set_new(o, "metrics_token", json_string(l->metrics_token));
	if (l->uid >= 0)
		bad |= set_int(o, "uid", l->uid);
	if (l->gid >= 0)
		bad |= set_int(o, "gid", l->gid);
	bad |= set_int(o, "cpus", l->cpus);
	bad |= set_int(o, "memory_mb", l->memory_mb);
	if (l->image)
		bad |= json_object_set_new(o, "image", json_string(l->image));
	if (l->team[0])
		bad |= json_object_set_new(o, "team", json_string(l->team));
	if (l->resume.set)
		bad |= json_object_set_new(o, "resume",
					   json_pack("{s:I, s:s, s:s}", "step",
						     (json_int_t)l->resume.step, "digest",
						     l->resume.digest, "path",
						     l->resume.path ? l->resume.path : ""));
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *proto_launch_data(const json_t *common, const struct proto_launch_node *node)
{
	json_t *d = json_deep_copy(common), *gpus = json_array();
	int bad = !d || !gpus;

	for (int k = 0; !bad && k < node->ngpus; k++)
		bad |= json_array_append_new(gpus, json_integer(node->gpus[k]));
	if (bad) {
		json_decref(d);
		json_decref(gpus);
		return NULL;
	}
	bad |= json_object_set_new(d, "gpus", gpus);
	bad |= set_int(d, "node_rank", node->node_rank);
	bad |= set_int(d, "first_rank", node->first_rank);
	if (node->boot_id)
		bad |= json_object_set_new(d, "boot_id", json_string(node->boot_id));
	if (bad) {
		json_decref(d);
		return NULL;
	}
	return d;
}
