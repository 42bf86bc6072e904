/*
 * Sweep expansion, pure: a sweep body's trials, grid or random spec into a
 * list of parameter sets, and a trial's job spec from the template.
 */
#include "sweep.h"
#include "ty_buf.h"
#include "ty_json.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint64_t api_sweep_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* [0, 1) with 53 random bits. */
static double unit_double(uint64_t *st)
{
	return (double)(api_sweep_splitmix64(st) >> 11) * 0x1.0p-53;
}

/*
 * Uniform in [0, n) without modulo bias: draws again above the last whole
 * range. n == 0 stands for 2^64 (int_uniform over all of int64): any draw.
 */
static uint64_t below(uint64_t *st, uint64_t n)
{
	uint64_t limit, x;

	if (n == 0)
		return api_sweep_splitmix64(st);
	limit = UINT64_MAX - UINT64_MAX % n;
	do
		x = api_sweep_splitmix64(st);
	while (x >= limit);
	return x % n;
}

bool api_sweep_env_name(char *out, size_t sz, const char *param)
{
	int n = snprintf(out, sz, "TRAINYARD_PARAM_%s", param);

	if (n < 0 || (size_t)n >= sz)
		return false;
	for (char *c = out + 16; *c; c++)
		*c = isalnum((unsigned char)*c) ? (char)toupper((unsigned char)*c) : '_';
	return true;
}

char *api_sweep_value_text(const json_t *v)
{
	char buf[64];

	if (json_is_string(v))
		return strdup(json_string_value(v));
	if (json_is_boolean(v))
		return strdup(json_is_true(v) ? "true" : "false");
	if (json_is_integer(v)) {
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
		return strdup(buf);
	}
	if (json_is_real(v)) {
		double d = json_real_value(v);

		for (int prec = 1; prec <= 17; prec++) {
			snprintf(buf, sizeof(buf), "%.*g", prec, d);
			if (strtod(buf, NULL) == d)
				break;
		}
		if (!strpbrk(buf, ".eEni"))
			strcat(buf, ".0");
		return strdup(buf);
	}
	return NULL;
}

static bool is_scalar(const json_t *v)
{
	return json_is_string(v) || json_is_number(v) || json_is_boolean(v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The keys of obj in byte order (array of borrowed strings; caller frees). */
static const char **sorted_keys(const json_t *obj, size_t *n)
{
	const char **keys = calloc(json_object_size(obj) + 1, sizeof(*keys));
	const char *k;
	json_t *v;
	size_t i = 0;

	if (!keys)
		return NULL;
	json_object_foreach((json_t *)obj, k, v)
		keys[i++] = k;
	qsort(keys, i, sizeof(*keys), cmp_str);
	*n = i;
	return keys;
}

/*
 * Checks the parameter names of one set (obj's keys) at path: 1 to 64
 * bytes, at most 32 of them, no two with the same environment name.
 */
static int check_names(const json_t *obj, const char *path, struct api_problem *p)
{
	const char *k, *k2;
	json_t *v, *v2;

	if (json_object_size(obj) == 0)
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s' has no parameters", path);
	if (json_object_size(obj) > API_SWEEP_MAX_PARAMS)
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s' has %zu parameters, the limit is %d", path,
				       json_object_size(obj), API_SWEEP_MAX_PARAMS);
	json_object_foreach((json_t *)obj, k, v) {
		char e1[128], e2[128];

		if (!*k || strlen(k) > API_SWEEP_MAX_NAME)
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' has a parameter name that is not 1 to %d bytes",
					       path, API_SWEEP_MAX_NAME);
		api_sweep_env_name(e1, sizeof(e1), k);
		json_object_foreach((json_t *)obj, k2, v2) {
			if (k2 == k)
				break;
			api_sweep_env_name(e2, sizeof(e2), k2);
			if (strcmp(e1, e2) == 0)
				return api_problem_set(p, API_P_INVALID_FIELD, path,
						       "'%s': parameters '%s' and '%s' would both "
						       "set %s",
						       path, k2, k, e1);
		}
	}
	return 0;
}

static json_t *expand_trials(const json_t *list, struct api_problem *p)
{
	json_t *out, *t, *v;
	const char *k;
	size_t i;

	if (!json_is_array(list))
		return api_problem_set(p, API_P_INVALID_FIELD, "trials",
				       "'trials' must be an array of objects, not %s",
				       ty_json_type_name(list)),
		       NULL;
	if (json_array_size(list) == 0 || json_array_size(list) > API_SWEEP_MAX_TRIALS)
		return api_problem_set(p, API_P_INVALID_FIELD, "trials",
				       "'trials' must hold 1 to %d parameter sets, got %zu",
				       API_SWEEP_MAX_TRIALS, json_array_size(list)),
		       NULL;
	json_array_foreach(list, i, t) {
		char path[32];

		snprintf(path, sizeof(path), "trials[%zu]", i);
		if (!json_is_object(t))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be an object, not %s", path,
					       ty_json_type_name(t)),
			       NULL;
		if (check_names(t, path, p))
			return NULL;
		json_object_foreach(t, k, v) {
			if (!is_scalar(v))
				return api_problem_set(p, API_P_INVALID_FIELD, path,
						       "'%s.%.64s' must be a string, number or "
						       "boolean, not %s",
						       path, k, ty_json_type_name(v)),
				       NULL;
		}
	}
	if (!(out = json_deep_copy(list)))
		api_problem_set(p, API_P_INTERNAL, NULL, "out of memory expanding the sweep");
	return out;
}

static json_t *expand_grid(const json_t *grid, struct api_problem *p)
{
	const char **keys = NULL;
	size_t n = 0, total = 1, idx[API_SWEEP_MAX_PARAMS] = {0};
	json_t *out = NULL, *v;

	if (!json_is_object(grid))
		return api_problem_set(p, API_P_INVALID_FIELD, "grid",
				       "'grid' must be an object of value lists, not %s",
				       ty_json_type_name(grid)),
		       NULL;
	if (check_names(grid, "grid", p))
		return NULL;
	if (!(keys = sorted_keys(grid, &n)))
		goto oom;
	for (size_t i = 0; i < n; i++) {
		const json_t *vals = json_object_get(grid, keys[i]);
		char path[96];
		size_t j;

		snprintf(path, sizeof(path), "grid.%s", keys[i]);
		if (!json_is_array(vals) || json_array_size(vals) == 0) {
			api_problem_set(p, API_P_INVALID_FIELD, path,
					"'%s' must be a non-empty array of values", path);
			goto fail;
		}
		json_array_foreach(vals, j, v) {
			if (!is_scalar(v)) {
				api_problem_set(p, API_P_INVALID_FIELD, path,
						"'%s[%zu]' must be a string, number or boolean, "
						"not %s",
						path, j, ty_json_type_name(v));
				goto fail;
			}
		}
		total *= json_array_size(vals);
		if (total > API_SWEEP_MAX_TRIALS) {
			api_problem_set(p, API_P_INVALID_FIELD, "grid",
					"'grid' has more than %d combinations", API_SWEEP_MAX_TRIALS);
			goto fail;
		}
	}
	if (!(out = json_array()))
		goto oom;
	for (size_t t = 0; t < total; t++) {
		json_t *set = json_object();

		if (!set || json_array_append_new(out, set))
			goto oom;
		for (size_t i = 0; i < n; i++)
			if (json_object_set(set, keys[i],
					    json_array_get(json_object_get(grid, keys[i]), idx[i])))
				goto oom;
		/* odometer: the last key turns fastest */
		for (size_t i = n; i-- > 0;) {
			if (++idx[i] < json_array_size(json_object_get(grid, keys[i])))
				break;
			idx[i] = 0;
		}
	}
	free(keys);
	return out;
oom:
	api_problem_set(p, API_P_INTERNAL, NULL, "out of memory expanding the sweep");
fail:
	free(keys);
	json_decref(out);
	return NULL;
}

enum dist { D_UNIFORM, D_LOG_UNIFORM, D_INT_UNIFORM, D_CHOICE };
static const char *const dist_names[] = {"uniform", "log_uniform", "int_uniform", "choice", NULL};

struct rparam {
	const char *name;
	enum dist d;
	double a, b;
	long long ia, ib;
	const json_t *choices;
};

/* One "random.params.NAME" entry. */
static int check_dist(struct rparam *rp, const char *name, const json_t *spec,
		      struct api_problem *p)
{
	char path[128];
	const char *k = NULL;
	json_t *v = NULL, *a, *b;
	int d;

	snprintf(path, sizeof(path), "random.params.%s", name);
	rp->name = name;
	if (!json_is_object(spec) || json_object_size(spec) != 1)
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s' must be an object with one of 'uniform', "
				       "'log_uniform', 'int_uniform' or 'choice'",
				       path);
	json_object_foreach((json_t *)spec, k, v)
		break;
	for (d = 0; dist_names[d] && strcmp(dist_names[d], k); d++)
		;
	if (!dist_names[d])
		return api_problem_set(p, API_P_UNKNOWN_FIELD, path,
				       "'%s': unknown distribution '%.64s' (use 'uniform', "
				       "'log_uniform', 'int_uniform' or 'choice')",
				       path, k);
	rp->d = (enum dist)d;
	snprintf(path, sizeof(path), "random.params.%s.%s", name, k);
	if (rp->d == D_CHOICE) {
		size_t i;

		if (!json_is_array(v) || json_array_size(v) == 0)
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be a non-empty array of values", path);
		json_array_foreach(v, i, a) {
			if (!is_scalar(a))
				return api_problem_set(p, API_P_INVALID_FIELD, path,
						       "'%s[%zu]' must be a string, number or "
						       "boolean, not %s",
						       path, i, ty_json_type_name(a));
		}
		rp->choices = v;
		return 0;
	}
	if (!json_is_array(v) || json_array_size(v) != 2)
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s' must be [low, high]", path);
	a = json_array_get(v, 0);
	b = json_array_get(v, 1);
	if (rp->d == D_INT_UNIFORM) {
		if (!json_is_integer(a) || !json_is_integer(b) ||
		    json_integer_value(a) > json_integer_value(b))
			return api_problem_set(p, API_P_INVALID_FIELD, path,
					       "'%s' must be two integers [low, high] with low <= "
					       "high",
					       path);
		rp->ia = json_integer_value(a);
		rp->ib = json_integer_value(b);
		return 0;
	}
	if (!json_is_number(a) || !json_is_number(b) ||
	    !(json_number_value(a) < json_number_value(b)))
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s' must be two numbers [low, high] with low < high", path);
	rp->a = json_number_value(a);
	rp->b = json_number_value(b);
	if (rp->d == D_UNIFORM && !isfinite(rp->b - rp->a))
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s': high - low must be a finite number", path);
	if (rp->d == D_LOG_UNIFORM && !(rp->a > 0))
		return api_problem_set(p, API_P_INVALID_FIELD, path,
				       "'%s' must have a low bound above 0", path);
	return 0;
}

static json_t *draw(uint64_t *st, const struct rparam *rp)
{
	double u;

	switch (rp->d) {
	case D_UNIFORM:
		u = unit_double(st);
		return json_real(rp->a + u * (rp->b - rp->a));
	case D_LOG_UNIFORM:
		u = unit_double(st);
		return json_real(exp(log(rp->a) + u * (log(rp->b) - log(rp->a))));
	case D_INT_UNIFORM:
		return json_integer((json_int_t)((uint64_t)rp->ia +
						 below(st, (uint64_t)rp->ib - (uint64_t)rp->ia + 1)));
	case D_CHOICE:
		return json_incref(
			json_array_get(rp->choices, below(st, json_array_size(rp->choices))));
	}
	return NULL;
}

static json_t *expand_random(const json_t *rnd, struct api_problem *p)
{
	static const char *const keys_ok[] = {"count", "seed", "params", NULL};
	struct rparam rps[API_SWEEP_MAX_PARAMS];
	const json_t *count, *seed, *params;
	const char **names = NULL, *unk;
	json_t *out = NULL;
	size_t n = 0;
	uint64_t st;

	if (!json_is_object(rnd))
		return api_problem_set(p, API_P_INVALID_FIELD, "random",
				       "'random' must be an object {count, seed, params}, not %s",
				       ty_json_type_name(rnd)),
		       NULL;
	if ((unk = ty_json_unknown_key(rnd, keys_ok))) {
		char path[96];

		snprintf(path, sizeof(path), "random.%.64s", unk);
		return api_problem_set(p, API_P_UNKNOWN_FIELD, path, "unknown field '%s'", path),
		       NULL;
	}
	count = json_object_get(rnd, "count");
	seed = json_object_get(rnd, "seed");
	params = json_object_get(rnd, "params");
	if (!json_is_integer(count) || json_integer_value(count) < 1 ||
	    json_integer_value(count) > API_SWEEP_MAX_TRIALS)
		return api_problem_set(p, count ? API_P_INVALID_FIELD : API_P_MISSING_FIELD,
				       "random.count", "'random.count' must be an integer from 1 to %d",
				       API_SWEEP_MAX_TRIALS),
		       NULL;
	if (!json_is_integer(seed) || json_integer_value(seed) < 0)
		return api_problem_set(p, seed ? API_P_INVALID_FIELD : API_P_MISSING_FIELD,
				       "random.seed",
				       "'random.seed' must be an integer from 0 to 2^63-1"),
		       NULL;
	if (!json_is_object(params))
		return api_problem_set(p, params ? API_P_INVALID_FIELD : API_P_MISSING_FIELD,
				       "random.params",
				       "'random.params' must be an object of distributions"),
		       NULL;
	if (check_names(params, "random.params", p))
		return NULL;
	if (!(names = sorted_keys(params, &n)))
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (check_dist(&rps[i], names[i], json_object_get(params, names[i]), p))
			goto fail;
	if (!(out = json_array()))
		goto oom;
	st = (uint64_t)json_integer_value(seed);
	/* trial by trial, and within a trial the parameters in byte order */
	for (json_int_t t = 0; t < json_integer_value(count); t++) {
		json_t *set = json_object();

		if (!set || json_array_append_new(out, set))
			goto oom;
		for (size_t i = 0; i < n; i++)
			if (json_object_set_new(set, rps[i].name, draw(&st, &rps[i])))
				goto oom;
	}
	free(names);
	return out;
oom:
	api_problem_set(p, API_P_INTERNAL, NULL, "out of memory expanding the sweep");
fail:
	free(names);
	json_decref(out);
	return NULL;
}

json_t *api_sweep_expand(const json_t *body, struct api_problem *p)
{
	static const char *const kinds[] = {"trials", "grid", "random"};
	const char *kind = NULL;
	const json_t *v = NULL;

	for (int i = 0; i < 3; i++) {
		const json_t *x = json_object_get(body, kinds[i]);

		if (!x)
			continue;
		if (kind)
			return api_problem_set(p, API_P_INVALID_FIELD, kinds[i],
					       "give only one of 'trials', 'grid' or 'random', "
					       "not both '%s' and '%s'",
					       kind, kinds[i]),
			       NULL;
		kind = kinds[i];
		v = x;
	}
	if (!kind)
		return api_problem_set(p, API_P_MISSING_FIELD, "trials",
				       "give exactly one of 'trials', 'grid' or 'random'"),
		       NULL;
	if (kind == kinds[0])
		return expand_trials(v, p);
	if (kind == kinds[1])
		return expand_grid(v, p);
	return expand_random(v, p);
}

json_t *api_sweep_trial_spec(const json_t *tmpl, const json_t *params)
{
	struct ty_buf b = TY_BUF_INIT;
	const char **keys = NULL;
	json_t *spec = json_deep_copy(tmpl), *env;
	size_t n = 0;

	if (!spec || !(env = json_object_get(spec, "env")) || !json_is_object(env) ||
	    !(keys = sorted_keys(params, &n)))
		goto fail;
	ty_buf_puts(&b, "{");
	for (size_t i = 0; i < n; i++) {
		const json_t *v = json_object_get(params, keys[i]);
		json_t *ks = json_string(keys[i]);
		char *kt = ks ? json_dumps(ks, JSON_ENCODE_ANY) : NULL;
		char *vt = json_is_string(v) ? json_dumps(v, JSON_ENCODE_ANY)
					     : api_sweep_value_text(v);
		char *et = api_sweep_value_text(v), name[128];
		bool ok = kt && vt && et && api_sweep_env_name(name, sizeof(name), keys[i]);

		if (ok) {
			ty_buf_printf(&b, "%s%s:%s", i ? "," : "", kt, vt);
			ok = json_object_set_new(env, name, json_string(et)) == 0;
		}
		json_decref(ks);
		free(kt);
		free(vt);
		free(et);
		if (!ok)
			goto fail;
	}
	ty_buf_puts(&b, "}");
	if (b.oom || json_object_set_new(env, "TRAINYARD_PARAMS", json_string(b.data)))
		goto fail;
	ty_buf_free(&b);
	free(keys);
	return spec;
fail:
	ty_buf_free(&b);
	free(keys);
	json_decref(spec);
	return NULL;
}
