/*
 * GPU telemetry and idle GPUs (docs/dispatch.md, "GPU telemetry and idle
 * GPUs"): each node's attempt_exited.telemetry checked and kept, the
 * attempt's summary combined over its nodes, heartbeat running[] entries
 * with their idle stretch, and the gpus_idle event of an attempt that holds
 * GPUs idle longer than its team allows.
 */
#include "scheduler.h"
#include "ty_json.h"
#include "ty_log.h"
#include "ty_time.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The job event type (docs/dispatch.md, "Lifecycle"). */
#define EVENT_GPUS_IDLE "gpus_idle"

/* Bounds of what an executor may report: beyond them a field is malformed. */
#define MAX_COUNT 1000000000000LL /* samples; memory in MiB */
#define MAX_GPUS 4096
#define MAX_WATTS 100000.0
#define MAX_SECONDS (400.0 * 86400) /* longer than any attempt runs */

enum kind { K_COUNT, K_PERCENT, K_WATTS, K_SECONDS };

/* The fields of a node's telemetry, in the order they are stored. */
static const struct field {
	const char *name;
	enum kind kind;
	size_t off;
} fields[] = {
    {"samples", K_COUNT, offsetof(struct sched_telemetry, samples)},
    {"gpus", K_COUNT, offsetof(struct sched_telemetry, gpus)},
    {"util_mean", K_PERCENT, offsetof(struct sched_telemetry, util_mean)},
    {"util_peak", K_PERCENT, offsetof(struct sched_telemetry, util_peak)},
    {"memory_used_peak_mb", K_COUNT, offsetof(struct sched_telemetry, memory_used_peak_mb)},
    {"power_mean_w", K_WATTS, offsetof(struct sched_telemetry, power_mean_w)},
    {"power_peak_w", K_WATTS, offsetof(struct sched_telemetry, power_peak_w)},
    {"idle_seconds", K_SECONDS, offsetof(struct sched_telemetry, idle_seconds)},
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

static int64_t *count_at(struct sched_telemetry *t, const struct field *f)
{
	return (int64_t *)(void *)((char *)t + f->off);
}

static double *real_at(struct sched_telemetry *t, const struct field *f)
{
	return (double *)(void *)((char *)t + f->off);
}

void sched_telemetry_init(struct sched_telemetry *t)
{
	memset(t, 0, sizeof(*t));
	t->samples = t->gpus = t->memory_used_peak_mb = -1;
	t->util_mean = t->util_peak = t->power_mean_w = t->power_peak_w = -1;
	t->idle_seconds = t->idle_gpu_seconds = -1;
}

/* Whether v is a well-formed value of kind k; *out gets it. */
static bool value_ok(double *out, const json_t *v, enum kind k)
{
	double x;

	if (k == K_COUNT) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > MAX_COUNT)
			return false;
		*out = (double)json_integer_value(v);
		return true;
	}
	if (!json_is_number(v))
		return false;
	x = json_number_value(v);
	if (!isfinite(x) || x < 0)
		return false;
	if ((k == K_PERCENT && x > 100) || (k == K_WATTS && x > MAX_WATTS) ||
	    (k == K_SECONDS && x > MAX_SECONDS))
		return false;
	*out = x;
	return true;
}

int sched_telemetry_parse(struct sched_telemetry *out, char *bad, size_t badsz, const json_t *t)
{
	size_t used = 0;
	int kept = 0;

	sched_telemetry_init(out);
	if (badsz)
		bad[0] = '\0';
	for (size_t i = 0; i < NFIELDS; i++) {
		const struct field *f = &fields[i];
		const json_t *v = json_object_get(t, f->name);
		double x;

		if (!v || json_is_null(v))
			continue; /* every field is optional */
		if (!value_ok(&x, v, f->kind) ||
		    (!strcmp(f->name, "gpus") && json_integer_value(v) > MAX_GPUS)) {
			if (used < badsz) {
				int n = snprintf(bad + used, badsz - used, "%s%s", used ? ", " : "",
						 f->name);

				used += n > 0 ? (size_t)n : 0;
			}
			continue;
		}
		if (f->kind == K_COUNT)
			*count_at(out, f) = (int64_t)x;
		else
			*real_at(out, f) = x;
		kept++;
	}
	return kept;
}

/* x rounded to 3 decimals, as a JSON number; null when unknown (< 0). */
static json_t *real3(double x)
{
	return x < 0 ? json_null() : json_real(round(x * 1000) / 1000);
}

static json_t *count(int64_t x)
{
	return x < 0 ? json_null() : json_integer((json_int_t)x);
}

json_t *sched_telemetry_node_json(const struct sched_telemetry *t)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < NFIELDS; i++) {
		const struct field *f = &fields[i];
		struct sched_telemetry *m = (struct sched_telemetry *)t;
		json_t *v;

		/* only what is known: absent and null mean the same to a reader */
		if (f->kind == K_COUNT ? *count_at(m, f) < 0 : *real_at(m, f) < 0)
			continue;
		v = f->kind == K_COUNT ? count(*count_at(m, f)) : real3(*real_at(m, f));
		if (json_object_set_new(o, f->name, v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

json_t *sched_telemetry_attempt_json(const struct sched_telemetry *t)
{
	return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i}", "util_mean",
			 real3(t->util_mean), "util_peak", real3(t->util_peak),
			 "memory_used_peak_mb", count(t->memory_used_peak_mb), "power_mean_w",
			 real3(t->power_mean_w), "power_peak_w", real3(t->power_peak_w),
			 "idle_gpu_seconds", real3(t->idle_gpu_seconds), "samples",
			 count(t->samples), "nodes_reported", t->nodes);
}

/* Weighted mean accumulator. */
struct wmean {
	double sum, weight;
};

static void wmean_add(struct wmean *m, double x, double w)
{
	if (x >= 0 && w > 0) {
		m->sum += x * w;
		m->weight += w;
	}
}

static double wmean_value(const struct wmean *m)
{
	return m->weight > 0 ? m->sum / m->weight : -1;
}

void sched_telemetry_combine(struct sched_telemetry *out, const struct sched_telemetry *v,
			     const int *gpus, int n)
{
	struct wmean util = {0}, power = {0};

	sched_telemetry_init(out);
	for (int i = 0; i < n; i++) {
		const struct sched_telemetry *t = &v[i];
		/* what the node sampled (else what it holds), each sample of each GPU */
		double g = t->gpus >= 0 ? (double)t->gpus : gpus[i] > 0 ? gpus[i] : 0;
		double w = (t->samples >= 0 ? (double)t->samples : 1) * g;

		out->nodes++;
		if (t->samples >= 0)
			out->samples = (out->samples < 0 ? 0 : out->samples) + t->samples;
		wmean_add(&util, t->util_mean, w);
		wmean_add(&power, t->power_mean_w, w);
		if (t->util_peak > out->util_peak)
			out->util_peak = t->util_peak;
		if (t->power_peak_w > out->power_peak_w)
			out->power_peak_w = t->power_peak_w;
		if (t->memory_used_peak_mb > out->memory_used_peak_mb)
			out->memory_used_peak_mb = t->memory_used_peak_mb;
		/* every GPU the node holds for the attempt was idle that long */
		if (t->idle_seconds >= 0)
			out->idle_gpu_seconds =
			    (out->idle_gpu_seconds < 0 ? 0 : out->idle_gpu_seconds) +
			    t->idle_seconds * (gpus[i] > 0 ? gpus[i] : 0);
	}
	out->util_mean = wmean_value(&util);
	out->power_mean_w = wmean_value(&power);
}

/* ---- attempt_exited.telemetry ---- */

int sched_telemetry_record(struct ty_pg *pg, const struct proto_msg *m, struct ty_err *err)
{
	const json_t *t = json_object_get(m->data, "telemetry");
	struct sched_telemetry one, all, *v = NULL;
	struct sched_store_telemetry *rows = NULL;
	char bad[160], *text = NULL;
	json_t *o = NULL;
	bool first = false;
	int *gpus = NULL, n, rc = 0;

	if (!t || json_is_null(t))
		return 0; /* an executor without telemetry (no NVML, or older) */
	if (!json_is_object(t)) {
		ty_warn("job %lld attempt %lld: node '%s' sent telemetry that is %s, not an "
			"object: ignored",
			(long long)m->job, (long long)m->attempt, m->node, ty_json_type_name(t));
		return 0;
	}
	n = sched_telemetry_parse(&one, bad, sizeof(bad), t);
	if (*bad)
		ty_warn("job %lld attempt %lld: node '%s' sent malformed telemetry (%s): "
			"ignored",
			(long long)m->job, (long long)m->attempt, m->node, bad);
	if (n == 0)
		return 0;
	if (!(o = sched_telemetry_node_json(&one)) ||
	    !(text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_store_telemetry_node(&first, pg, m->job, m->attempt, m->node, text, err)) ||
	    !first)
		goto out;
	if ((rc = sched_store_telemetry_nodes(&rows, &n, pg, m->job, m->attempt, err)))
		goto out;
	if (!(v = calloc((size_t)n, sizeof(*v))) || !(gpus = calloc((size_t)n, sizeof(*gpus)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		json_t *stored = json_loads(rows[i].telemetry, 0, NULL);

		/* written above by this function: well formed */
		sched_telemetry_parse(&v[i], bad, sizeof(bad), stored);
		json_decref(stored);
		gpus[i] = rows[i].gpus;
	}
	sched_telemetry_combine(&all, v, gpus, n);
	json_decref(o);
	free(text);
	text = NULL;
	if (!(o = sched_telemetry_attempt_json(&all)) ||
	    !(text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(15)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	rc = sched_store_telemetry_attempt(pg, m->job, m->attempt, text, err);
	if (!rc)
		ty_debug("job %lld attempt %lld: telemetry of node '%s' recorded (%d node%s)",
			 (long long)m->job, (long long)m->attempt, m->node, n, n == 1 ? "" : "s");
out:
	sched_store_telemetry_free(rows, n);
	json_decref(o);
	free(text);
	free(v);
	free(gpus);
	return rc;
}

/* ---- heartbeat running[] entries ---- */

bool sched_running_fields(double *idle, double *util, const json_t *e)
{
	const json_t *i = json_object_get(e, "idle_seconds"), *u = json_object_get(e, "gpu_util");
	bool ok = true;

	*idle = *util = -1;
	if (i && !json_is_null(i) && !value_ok(idle, i, K_SECONDS)) {
		*idle = -1;
		ok = false;
	}
	if (u && !json_is_null(u) && !value_ok(util, u, K_PERCENT)) {
		*util = -1;
		ok = false;
	}
	return ok;
}

json_t *sched_running_entry(const json_t *e, const char *node)
{
	/* one line a minute at most: a node repeats a bad field in every heartbeat */
	static int64_t last_warned_ms = -60000;
	int64_t job = json_is_integer(json_object_get(e, "job"))
			  ? (int64_t)json_integer_value(json_object_get(e, "job"))
			  : 0;
	int64_t attempt = json_is_integer(json_object_get(e, "attempt"))
			      ? (int64_t)json_integer_value(json_object_get(e, "attempt"))
			      : 0;
	double idle, util;
	json_t *o;

	if (job < 1 || attempt < 1 || attempt > INT32_MAX)
		return NULL;
	if (!sched_running_fields(&idle, &util, e) && ty_mono_ms() - last_warned_ms >= 60000) {
		last_warned_ms = ty_mono_ms();
		ty_warn("node '%s': heartbeat entry of job %lld attempt %lld has a malformed "
			"idle_seconds or gpu_util (a number of seconds >= 0, a percentage "
			"0-100): ignored (such lines are logged once a minute)",
			node, (long long)job, (long long)attempt);
	}
	o = json_pack("{s:I, s:I}", "job", (json_int_t)job, "attempt", (json_int_t)attempt);
	if (o && idle >= 0)
		json_object_set_new(o, "idle_seconds", json_real(round(idle * 1000) / 1000));
	if (o && util >= 0)
		json_object_set_new(o, "gpu_util", json_real(round(util * 1000) / 1000));
	return o;
}

int sched_idle_candidates(json_t *beats, const char *node, int ord, const json_t *running)
{
	json_t *c = json_array(), *rec;
	const json_t *e;
	size_t i;
	int n = 0;

	if (!c)
		return -1;
	json_array_foreach(running, i, e)
	{
		const json_t *idle = json_object_get(e, "idle_seconds");

		if (!json_is_number(idle) || json_number_value(idle) < SCHED_IDLE_ALERT_MIN_S)
			continue;
		if (json_array_append(c, (json_t *)e)) {
			json_decref(c);
			return -1;
		}
		n++;
	}
	/* a node's newest heartbeat decides, even when it lists nothing idle */
	rec = json_pack("{s:s, s:i, s:o}", "node", node, "ord", ord, "running", c);
	if (!rec || json_array_append_new(beats, rec))
		return -1;
	return n;
}

/* "45 s", "31 min", "2 h 05 min" */
static const char *dur(char *buf, size_t sz, double seconds)
{
	long long s = (long long)seconds;

	if (s < 120)
		snprintf(buf, sz, "%lld s", s);
	else if (s < 7200)
		snprintf(buf, sz, "%lld min", s / 60);
	else
		snprintf(buf, sz, "%lld h %02lld min", s / 3600, s / 60 % 60);
	return buf;
}

int sched_idle_check(struct sched *s, const json_t *beats, struct ty_err *err)
{
	struct sched_store_idle *v = NULL;
	char *text;
	int rc, n = 0;

	if (!(text = json_dumps(beats, JSON_COMPACT)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	rc = sched_store_idle_alerts(&v, &n, s->term.pg, text, err);
	free(text);
	for (int i = 0; !rc && i < n; i++) {
		const struct sched_store_idle *x = &v[i];
		int64_t gpus = x->gpus, lim = x->limit_s;
		double idle = x->idle_seconds, util = x->util;
		char d1[32], d2[32], utext[48] = "", msg[320];
		json_t *data;

		if (x->has_util)
			snprintf(utext, sizeof(utext), "GPU utilisation %.1f %%; ", util);
		snprintf(msg, sizeof(msg),
			 "attempt %lld has held %lld GPU%s on %s idle for %s (%steam limit %s)",
			 (long long)x->attempt, (long long)gpus, gpus == 1 ? "" : "s", x->node,
			 dur(d1, sizeof(d1), idle), utext, dur(d2, sizeof(d2), (double)lim));
		data = json_pack("{s:I, s:s, s:I, s:f, s:o, s:I}", "attempt",
				 (json_int_t)x->attempt, "node", x->node, "gpus", (json_int_t)gpus,
				 "idle_seconds", idle, "gpu_util",
				 x->has_util ? json_real(util) : json_null(), "limit_seconds",
				 (json_int_t)lim);
		if (!data)
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		else
			rc = sched_job_event(s, x->job, EVENT_GPUS_IDLE, x->state, msg, data, err);
		json_decref(data);
	}
	sched_store_idle_free(v, n);
	return rc;
}
