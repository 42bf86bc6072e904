/*
 * Request validation, pure: no I/O. The job spec is described by one table
 * (field, type, range, choices, default: proto/job_spec.c, which the
 * scheduler and executors read defaults from too); the code walks it, so a
 * new field is one line there plus its row in docs/api.md.
 */
#include "api.h"
#include "job_spec.h"
#include "ty_json.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const job_top_keys[] = {
	"team", "name", "command", "env", "resources", "priority_class", "priority",
	"max_runtime_seconds", "min_runtime_seconds", "preemptible", "spot", "retry",
	"checkpoint", "topology", "launch", "hang_timeout_seconds", "start_timeout_seconds",
	"preflight", "labels", "image", "queue_if_unschedulable", NULL};
static const char *const sub_objects[] = {"resources", "spot", "retry", "checkpoint", "topology",
					  NULL};

/* Variables the executor sets for every rank: a job may not override them. */
static const char *const reserved_env[] = {
	"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
	"NODE_RANK", "NNODES", "CUDA_VISIBLE_DEVICES", NULL};

#define MAX_ARGS 1024
#define MAX_STR (32 * 1024)
#define MAX_ENV 256
#define MAX_LABELS 32

static void path_of(char *out, size_t sz, const char *obj, const char *key)
{
	if (obj)
		snprintf(out, sz, "%s.%s", obj, key);
	else
		snprintf(out, sz, "%s", key);
}

static int invalid(struct api_problem *p, const char *field, const char *fmt, const char *a,
		   long long x, long long y)
{
	char detail[400];

	snprintf(detail, sizeof(detail), fmt, a, x, y);
	return api_problem_set(p, API_P_INVALID_FIELD, field, "'%s' %s", field, detail);
}

static void choices_text(char *out, size_t sz, const char *const *c)
{
	size_t o = 0;

	out[0] = '\0';
	for (; *c && o < sz; c++)
		o += (size_t)snprintf(out + o, sz - o, "%s'%s'", o ? ", " : "", *c);
}

static int check_field(json_t *out_obj, const struct proto_spec_field *f, const json_t *v,
		       struct api_problem *p)
{
	char path[96], ch[160];

	path_of(path, sizeof(path), f->obj, f->key);
	if (!v) {
		switch (f->type) {
		case PROTO_SPEC_INT:
			return json_object_set_new(out_obj, f->key, json_integer(f->idef));
		case PROTO_SPEC_BOOL:
			return json_object_set_new(out_obj, f->key, json_boolean(f->idef));
		case PROTO_SPEC_ENUM:
			return json_object_set_new(out_obj, f->key,
						   f->sdef ? json_string(f->sdef) : json_null());
		}
	}
	if (json_is_null(v) && f->nullable)
		return json_object_set_new(out_obj, f->key, json_null());
	switch (f->type) {
	case PROTO_SPEC_INT: {
		long long x;

		if (!json_is_integer(v))
			return invalid(p, path, "must be an integer from %2$lld to %3$lld, not %1$s",
				       ty_json_type_name(v), f->min, f->max);
		x = json_integer_value(v);
		if (x < f->min || x > f->max)
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be an integer from %lld to %lld, got %lld",
					       path, f->min, f->max, x);
		return json_object_set_new(out_obj, f->key, json_integer(x));
	}
	case PROTO_SPEC_BOOL:
		if (!json_is_boolean(v))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be a boolean, not %s", path,
					       ty_json_type_name(v));
		return json_object_set_new(out_obj, f->key, json_boolean(json_is_true(v)));
	case PROTO_SPEC_ENUM:
		choices_text(ch, sizeof(ch), f->choices);
		if (json_is_string(v))
			for (const char *const *c = f->choices; *c; c++)
				if (strcmp(*c, json_string_value(v)) == 0)
					return json_object_set_new(out_obj, f->key,
								   json_string(*c));
		return api_problem_set(p, API_P_INVALID_FIELD, path, "'%s' must be one of %s%s",
				       path, ch, f->nullable ? " or null" : "");
	}
	return 0;
}

static bool env_key_ok(const char *k)
{
	if (!*k || strlen(k) > 256 || !(isalpha((unsigned char)*k) || *k == '_'))
		return false;
	for (; *k; k++)
		if (!(isalnum((unsigned char)*k) || *k == '_'))
			return false;
	return true;
}

static bool label_key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > 63 || !isalnum((unsigned char)k[0]))
		return false;
	for (; *k; k++)
		if (!(isalnum((unsigned char)*k) || strchr("._/-", *k)))
			return false;
	return true;
}

/* A string-to-string map (env, labels), copied into *out. */
static int check_map(json_t **out, const json_t *v, const char *what, size_t max_entries,
		     bool (*key_ok)(const char *), size_t max_val, struct api_problem *p)
{
	const char *k;
	json_t *val;
	char path[300];

	if (!v) {
		*out = json_object();
		return 0;
	}
	if (!json_is_object(v))
		return api_problem_set(p, API_P_INVALID_FIELD, what,
				       "'%s' must be an object of strings, not %s", what,
				       ty_json_type_name(v));
	if (json_object_size(v) > max_entries)
		return api_problem_set(p, API_P_INVALID_FIELD, what,
				       "'%s' has %zu entries, the limit is %zu", what,
				       json_object_size(v), max_entries);
	json_object_foreach((json_t *)v, k, val) {
		snprintf(path, sizeof(path), "%s.%.280s", what, k);
		if (!key_ok(k))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' is not a valid %s name", path,
					       strcmp(what, "env") ? "label" : "variable");
		if (!json_is_string(val))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be a string, not %s", path,
					       ty_json_type_name(val));
		if (json_string_length(val) > max_val)
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' is longer than %zu characters", path, max_val);
		if (strlen(json_string_value(val)) != json_string_length(val))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' contains a NUL character", path);
	}
	*out = json_deep_copy(v);
	return 0;
}

static int check_command(json_t **out, const json_t *v, struct api_problem *p)
{
	size_t i;
	json_t *arg;

	if (!v)
		return api_problem_set(p, API_P_MISSING_FIELD, "command",
				       "'command' is required: the program and its arguments");
	if (!json_is_array(v))
		return api_problem_set(p, API_P_INVALID_FIELD, "command",
				       "'command' must be an array of strings, not %s",
				       ty_json_type_name(v));
	if (json_array_size(v) == 0)
		return api_problem_set(p, API_P_INVALID_FIELD, "command",
				       "'command' is empty: give the program to run");
	if (json_array_size(v) > MAX_ARGS)
		return api_problem_set(p, API_P_INVALID_FIELD, "command",
				       "'command' has %zu arguments, the limit is %d",
				       json_array_size(v), MAX_ARGS);
	json_array_foreach(v, i, arg) {
		char path[32];

		snprintf(path, sizeof(path), "command[%zu]", i);
		if (!json_is_string(arg))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be a string, not %s", path,
					       ty_json_type_name(arg));
		if (json_string_length(arg) > MAX_STR)
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' is longer than %d bytes", path, MAX_STR);
		if (strlen(json_string_value(arg)) != json_string_length(arg))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' contains a NUL character", path);
		if (i == 0 && json_string_length(arg) == 0)
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'command[0]' must name a program");
	}
	*out = json_deep_copy(v);
	return 0;
}

static int check_name(const json_t *v, const char *field, size_t max, bool required,
		      struct api_problem *p)
{
	if (!v) {
		if (required)
			return api_problem_set(p, API_P_MISSING_FIELD, field,
					       "'%s' is required", field);
		return 0;
	}
	if (!json_is_string(v))
		return api_problem_set(p, API_P_INVALID_FIELD, field,
				       "'%s' must be a string, not %s", field, ty_json_type_name(v));
	if (json_string_length(v) == 0 || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return api_problem_set(p, API_P_INVALID_FIELD, field,
				       "'%s' must be 1 to %zu characters", field, max);
	return 0;
}

json_t *api_validate_job(const json_t *body, struct api_problem *p)
{
	json_t *out = json_object(), *tmp = NULL;
	const char *unk;

	if (!out)
		return NULL;
	if ((unk = ty_json_unknown_key(body, job_top_keys))) {
		api_problem_set(p, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
		goto fail;
	}
	for (const char *const *o = sub_objects; *o; o++) {
		const json_t *v = json_object_get(body, *o);
		const char *allowed[8];
		int n = 0;

		if (!v) {
			if (strcmp(*o, "resources") == 0) {
				api_problem_set(p, API_P_MISSING_FIELD, "resources",
						"'resources' is required (at least {\"nodes\": 1})");
				goto fail;
			}
			continue;
		}
		if (!json_is_object(v)) {
			api_problem_set(p, API_P_INVALID_FIELD, *o, "'%s' must be an object, not %s",
					*o, ty_json_type_name(v));
			goto fail;
		}
		for (size_t i = 0; i < proto_spec_nfields; i++)
			if (proto_spec_fields[i].obj && strcmp(proto_spec_fields[i].obj, *o) == 0)
				allowed[n++] = proto_spec_fields[i].key;
		allowed[n] = NULL;
		if ((unk = ty_json_unknown_key(v, allowed))) {
			char path[128];

			snprintf(path, sizeof(path), "%s.%.100s", *o, unk);
			api_problem_set(p, API_P_UNKNOWN_FIELD, path, "unknown field '%s'", path);
			goto fail;
		}
	}

	if (check_name(json_object_get(body, "team"), "team", 63, true, p) ||
	    check_name(json_object_get(body, "name"), "name", 128, false, p))
		goto fail;
	json_object_set(out, "team", json_object_get(body, "team"));
	tmp = json_object_get(body, "name");
	json_object_set_new(out, "name", tmp ? json_deep_copy(tmp) : json_null());
	/* an OCI image the nodes hold (docs/security.md, "Job isolation"); absent: the host's root */
	tmp = json_object_get(body, "image");
	if (tmp && (check_name(tmp, "image", 1024, false, p) ||
		    (strncmp(json_string_value(tmp), "oci:/", 5) &&
		     strncmp(json_string_value(tmp), "oci-archive:/", 13) &&
		     api_problem_set(p, API_P_INVALID_FIELD, "image",
				     "'image' must be oci:/DIR[:TAG] or oci-archive:/FILE[:TAG], an "
				     "image the nodes hold"))))
		goto fail;
	if (tmp)
		json_object_set(out, "image", tmp);
	if (check_command(&tmp, json_object_get(body, "command"), p))
		goto fail;
	json_object_set_new(out, "command", tmp);
	if (check_map(&tmp, json_object_get(body, "env"), "env", MAX_ENV, env_key_ok, MAX_STR, p))
		goto fail;
	json_object_set_new(out, "env", tmp);
	{
		const char *k;
		json_t *val;

		json_object_foreach(tmp, k, val) {
			bool reserved = strncmp(k, "TRAINYARD_", 10) == 0;

			for (const char *const *r = reserved_env; *r && !reserved; r++)
				reserved = strcmp(*r, k) == 0;
			if (reserved) {
				char path[300];

				snprintf(path, sizeof(path), "env.%s", k);
				api_problem_set(p, API_P_RESERVED_ENV, path,
						"'%s' is set by Trainyard for every rank and cannot "
						"be overridden",
						k);
				goto fail;
			}
		}
	}
	if (check_map(&tmp, json_object_get(body, "labels"), "labels", MAX_LABELS, label_key_ok,
		      256, p))
		goto fail;
	json_object_set_new(out, "labels", tmp);

	for (size_t i = 0; i < proto_spec_nfields; i++) {
		const struct proto_spec_field *f = &proto_spec_fields[i];
		const json_t *src = f->obj ? json_object_get(body, f->obj) : body;
		json_t *dst = out;

		if (f->obj) {
			if (!(dst = json_object_get(out, f->obj))) {
				dst = json_object();
				json_object_set_new(out, f->obj, dst);
			}
		}
		if (check_field(dst, f, src ? json_object_get(src, f->key) : NULL, p) < 0 ||
		    p->code)
			goto fail;
	}

	if (json_integer_value(json_object_get(out, "min_runtime_seconds")) >
	    json_integer_value(json_object_get(out, "max_runtime_seconds"))) {
		api_problem_set(p, API_P_INVALID_FIELD, "min_runtime_seconds",
				"'min_runtime_seconds' (%lld) is longer than 'max_runtime_seconds' "
				"(%lld)",
				json_integer_value(json_object_get(out, "min_runtime_seconds")),
				json_integer_value(json_object_get(out, "max_runtime_seconds")));
		goto fail;
	}
	{
		long long h = json_integer_value(json_object_get(out, "hang_timeout_seconds"));

		if (h != 0 && h < 60) {
			api_problem_set(p, API_P_INVALID_FIELD, "hang_timeout_seconds",
					"'hang_timeout_seconds' must be 0 (off) or from 60 to "
					"604800, got %lld",
					h);
			goto fail;
		}
	}
	{
		long long t = json_integer_value(json_object_get(out, "start_timeout_seconds"));

		if (t != 0 && t < 10) {
			api_problem_set(p, API_P_INVALID_FIELD, "start_timeout_seconds",
					"'start_timeout_seconds' must be 0 (off) or from 10 to "
					"86400, got %lld",
					t);
			goto fail;
		}
	}
	return out;
fail:
	json_decref(out);
	if (!p->code)
		api_problem_set(p, API_P_INTERNAL, NULL, "out of memory validating the job");
	return NULL;
}

bool api_team_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-'))
			return false;
	return true;
}

static int check_limit(const json_t *body, const char *key, bool nullable, struct api_problem *p)
{
	const json_t *v = json_object_get(body, key);

	if (!v || (nullable && json_is_null(v)))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1000000)
		return api_problem_set(p, API_P_INVALID_FIELD, key,
				       "'%s' must be an integer from 0 to 1000000%s", key,
				       nullable ? " or null (no limit)" : "");
	return 0;
}

/* A CPU or memory cap: an integer from 1 to max, or null (no cap). */
static int check_cap(const json_t *body, const char *key, long long max, const char *unit,
		     struct api_problem *p)
{
	const json_t *v = json_object_get(body, key);

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
		return api_problem_set(p, API_P_INVALID_FIELD, key,
				       "'%s' must be an integer from 1 to %lld (%s) or null (no "
				       "limit)",
				       key, max, unit);
	return 0;
}

/* A team's default for spec checkpoint.<key>: the spec's range (proto/job_spec.c), or null. */
static int check_ckpt_default(const json_t *body, const char *key, struct api_problem *p)
{
	const struct proto_spec_field *f = proto_spec_field("checkpoint", key);
	char name[64];
	const json_t *v;

	snprintf(name, sizeof(name), "checkpoint_%s", key);
	v = json_object_get(body, name);
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) < f->min ||
	     json_integer_value(v) > f->max))
		return api_problem_set(p, API_P_INVALID_FIELD, name,
				       "'%s' must be an integer from %lld to %lld (the default of "
				       "the job spec's checkpoint.%s) or null",
				       name, f->min, f->max, key);
	return 0;
}

int api_validate_team(const json_t *body, bool create, struct api_problem *p)
{
	static const char *const keys[] = {"name",	 "nominal_gpus", "borrowing_limit_gpus",
					   "lending_limit_gpus", "cohort",	 "weight",
					   "max_pending_jobs",	 "max_cpus",	 "max_memory_mb",
					   "run_uid",		 "idle_gpu_alert_seconds",
					   "checkpoint_keep",	 "checkpoint_keep_every",
					   "checkpoint_tier",	 "budget",
					   NULL};
	const char *unk = ty_json_unknown_key(body, keys);
	const json_t *v;
	int rc;

	if (unk)
		return api_problem_set(p, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
	v = json_object_get(body, "name");
	if (create) {
		if (!v)
			return api_problem_set(p, API_P_MISSING_FIELD, "name", "'name' is required");
		if (!json_is_string(v) || !api_team_name_ok(json_string_value(v)))
			return api_problem_set(p, API_P_INVALID_FIELD, "name",
					       "'name' must be 1 to 63 characters of a-z, 0-9 and "
					       "'-', starting and ending with a letter or digit");
		if (!json_object_get(body, "nominal_gpus"))
			return api_problem_set(p, API_P_MISSING_FIELD, "nominal_gpus",
					       "'nominal_gpus' is required");
	} else if (v) {
		return api_problem_set(p, API_P_INVALID_FIELD, "name",
				       "a team cannot be renamed");
	}
	if ((rc = check_limit(body, "nominal_gpus", false, p)) ||
	    (rc = check_limit(body, "borrowing_limit_gpus", true, p)) ||
	    (rc = check_limit(body, "lending_limit_gpus", true, p)) ||
	    (rc = check_limit(body, "max_pending_jobs", true, p)) ||
	    (rc = check_cap(body, "max_cpus", API_MAX_CPUS, "CPUs", p)) ||
	    (rc = check_cap(body, "max_memory_mb", API_MAX_MEMORY_MB, "MiB", p)))
		return rc;
	v = json_object_get(body, "run_uid");
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) < API_MIN_RUN_UID ||
	     json_integer_value(v) > API_MAX_RUN_UID))
		return api_problem_set(p, API_P_INVALID_FIELD, "run_uid",
				       "'run_uid' must be an integer from %d to %d (the uid the "
				       "team's ranks run as) or null (the scheduler's "
				       "--team-uid-base + the team's id)",
				       API_MIN_RUN_UID, API_MAX_RUN_UID);
	v = json_object_get(body, "idle_gpu_alert_seconds");
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) < API_MIN_IDLE_ALERT_S ||
	     json_integer_value(v) > API_MAX_IDLE_ALERT_S))
		return api_problem_set(p, API_P_INVALID_FIELD, "idle_gpu_alert_seconds",
				       "'idle_gpu_alert_seconds' must be an integer from %d to %d "
				       "(seconds a job may hold GPUs idle before it is reported) or "
				       "null (never reported)",
				       API_MIN_IDLE_ALERT_S, API_MAX_IDLE_ALERT_S);
	v = json_object_get(body, "cohort");
	if (v && !json_is_null(v) &&
	    (!json_is_string(v) || !api_team_name_ok(json_string_value(v))))
		return api_problem_set(p, API_P_INVALID_FIELD, "cohort",
				       "'cohort' must be a name like a team's (a-z, 0-9, '-') or "
				       "null");
	v = json_object_get(body, "weight");
	if (v && (!json_is_number(v) || json_number_value(v) <= 0 ||
		  json_number_value(v) > 1000000))
		return api_problem_set(p, API_P_INVALID_FIELD, "weight",
				       "'weight' must be a number above 0 and at most 1000000");
	if ((rc = check_ckpt_default(body, "keep", p)) ||
	    (rc = check_ckpt_default(body, "keep_every", p)))
		return rc;
	v = json_object_get(body, "checkpoint_tier");
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return api_problem_set(p, API_P_INVALID_FIELD, "checkpoint_tier",
				       "'checkpoint_tier' must be a boolean or null (the job "
				       "spec's default)");
	return 0;
}

static bool nul_in(char *path, size_t sz, size_t at, const json_t *v)
{
	const char *k;
	json_t *m;
	size_t i;

	if (at >= sz)
		at = sz - 1;
	switch (json_typeof(v)) {
	case JSON_STRING:
		return memchr(json_string_value(v), '\0', json_string_length(v)) != NULL;
	case JSON_ARRAY:
		json_array_foreach(v, i, m) {
			snprintf(path + at, sz - at, "[%zu]", i);
			if (nul_in(path, sz, strlen(path), m))
				return true;
		}
		break;
	case JSON_OBJECT:
		json_object_foreach((json_t *)v, k, m) {
			snprintf(path + at, sz - at, "%s%s", at ? "." : "", k);
			if (nul_in(path, sz, strlen(path), m))
				return true;
		}
		break;
	default:
		break;
	}
	path[at] = '\0';
	return false;
}

bool api_json_has_nul(char *path, size_t pathsz, const json_t *v)
{
	path[0] = '\0';
	return nul_in(path, pathsz, 0, v);
}

bool api_text_ok(const char *s, size_t n, bool no_controls)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;

	while (p < end) {
		unsigned c = *p, need, cp;

		if (c < 0x80) {
			if (no_controls && (c < 0x20 || c == 0x7f))
				return false;
			p++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			need = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			need = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			need = 3, cp = c & 0x07;
		else
			return false; /* a continuation byte, an overlong lead, or past U+10FFFF */
		if ((size_t)(end - p) <= need)
			return false;
		for (unsigned i = 1; i <= need; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((need == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (need == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
		p += need + 1;
	}
	return true;
}

/* An int member key of body in [lo, hi]; absent is missing_field unless optional (or null). */
static int pool_int(const json_t *body, const char *key, long long lo, long long hi, bool optional,
		    struct api_problem *p)
{
	const json_t *v = json_object_get(body, key);

	if (!v || (optional && json_is_null(v)))
		return optional ? 0
				: api_problem_set(p, API_P_MISSING_FIELD, key, "'%s' is required",
						  key);
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
		return api_problem_set(p, API_P_INVALID_FIELD, key,
				       "'%s' must be an integer from %lld to %lld%s", key, lo, hi,
				       optional ? " or null (not limited)" : "");
	return 0;
}

int api_validate_node_pool(const json_t *body, struct api_problem *p)
{
	static const char *const keys[] = {"labels",	     "gpus_per_node", "cpus_per_node",
					   "memory_mb_per_node", "max_nodes",	  NULL};
	const char *unk;
	json_t *labels = NULL;

	if (!json_is_object(body))
		return api_problem_set(p, API_P_INVALID_FIELD, NULL, "the body must be an object");
	if ((unk = ty_json_unknown_key(body, keys)))
		return api_problem_set(p, API_P_UNKNOWN_FIELD, unk, "unknown field '%s'", unk);
	if (check_map(&labels, json_object_get(body, "labels"), "labels", MAX_LABELS, label_key_ok,
		      256, p))
		return -1;
	json_decref(labels);
	if (pool_int(body, "gpus_per_node", 0, 64, false, p) ||
	    pool_int(body, "cpus_per_node", 1, 4096, true, p) ||
	    pool_int(body, "memory_mb_per_node", 1, 16777216, true, p) ||
	    pool_int(body, "max_nodes", 1, 10000, false, p))
		return -1;
	return 0;
}
