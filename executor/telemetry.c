/*
 * GPU telemetry: each attempt's account of its GPUs (pure), one GPU read
 * through NVML, the sampler that holds NVML on libuv's thread pool only
 * while attempts with GPUs run, the daemon's timer and the DCGM-named
 * series on /metrics, and the --sample-for diagnostic.
 */
#include "exec.h"
#include "nvml.h"
#include "ty_log.h"
#include "ty_metrics.h"
#include "ty_time.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- an attempt's account (pure) ---- */

void exec_telem_add(struct exec_telem *t, const struct exec_gpu_reading *r, size_t n,
		    int64_t now_ms, double idle_pct, int64_t interval_ms)
{
	int64_t dt = t->last_ms ? now_ms - t->last_ms : 0;
	bool idle = n > 0;
	double sum = 0;
	size_t read = 0;

	if (dt < 0)
		dt = 0;
	if (interval_ms > 0 && dt > 2 * interval_ms)
		dt = interval_ms; /* a hold-up says nothing about those seconds */
	t->last_ms = now_ms;
	if ((int64_t)n > t->gpus)
		t->gpus = (int)n;
	for (size_t i = 0; i < n; i++) {
		if (!r[i].ok) {
			idle = false; /* unknown is not idle */
			continue;
		}
		read++;
		sum += r[i].util;
		t->util_sum += r[i].util;
		t->util_n++;
		if (r[i].util > t->util_peak)
			t->util_peak = r[i].util;
		if (r[i].memory_used_mb > t->memory_peak_mb)
			t->memory_peak_mb = r[i].memory_used_mb;
		if (r[i].has_power) {
			t->power_sum += r[i].power_w;
			t->power_n++;
			if (r[i].power_w > t->power_peak)
				t->power_peak = r[i].power_w;
		}
		if (!(r[i].util < idle_pct))
			idle = false;
	}
	if (!read) {
		t->idle_run_s = 0;
		return;
	}
	t->samples++;
	t->last_util = sum / (double)read;
	if (idle) {
		t->idle_s += (double)dt / 1000.0;
		t->idle_run_s += (double)dt / 1000.0;
	} else {
		t->idle_run_s = 0;
	}
}

/* v rounded to 1/per of a unit (no libm); for values far below 2^63 / per */
static double round_to(double v, double per)
{
	double q = v * per;

	return (double)(long long)(q + (q < 0 ? -0.5 : 0.5)) / per;
}

json_t *exec_telem_json(const struct exec_telem *t)
{
	if (!t->samples)
		return NULL;
	return json_pack(
	    "{s:I, s:i, s:f, s:f, s:I, s:f, s:f, s:f}", "samples", (json_int_t)t->samples, "gpus",
	    t->gpus, "util_mean", round_to(t->util_n ? t->util_sum / (double)t->util_n : 0, 100),
	    "util_peak", t->util_peak, "memory_used_peak_mb", (json_int_t)t->memory_peak_mb,
	    "power_mean_w", round_to(t->power_n ? t->power_sum / (double)t->power_n : 0, 1000),
	    "power_peak_w", round_to(t->power_peak, 1000), "idle_seconds",
	    round_to(t->idle_s, 1000));
}

void exec_telem_running(json_t *entry, const struct exec_telem *t)
{
	if (!entry || !t->samples)
		return;
	json_object_set_new(entry, "idle_seconds", json_real(round_to(t->idle_run_s, 1000)));
	json_object_set_new(entry, "gpu_util", json_real(round_to(t->last_util, 100)));
}

/* ---- one GPU through NVML ---- */

void exec_gpu_read(struct exec_gpu_reading *r, const struct nvml *n, const struct hw_gpu *g)
{
	struct nvml_utilization u = {0};
	struct nvml_memory m = {0};
	nvml_device d = NULL;
	unsigned int mw = 0;
	const char *call;
	int code;

	memset(r, 0, sizeof(*r));
	/* by UUID: the GPU the inventory names, whatever NVML's order is now */
	if (g->uuid[0] && n->handle_by_uuid) {
		call = "nvmlDeviceGetHandleByUUID";
		code = n->handle_by_uuid(g->uuid, &d);
	} else {
		call = "nvmlDeviceGetHandleByIndex_v2";
		code = n->handle((unsigned int)g->index, &d);
	}
	if (code != NVML_SUCCESS)
		goto fail;
	if (!n->utilization) {
		snprintf(r->error, sizeof(r->error),
			 "NVML '%s' lacks nvmlDeviceGetUtilizationRates", n->lib ? n->lib : "");
		return;
	}
	call = "nvmlDeviceGetUtilizationRates";
	if ((code = n->utilization(d, &u)) != NVML_SUCCESS)
		goto fail;
	call = "nvmlDeviceGetMemoryInfo";
	if ((code = n->memory(d, &m)) != NVML_SUCCESS)
		goto fail;
	r->ok = true;
	r->util = u.gpu;
	r->memory_used_mb = (int64_t)(m.used >> 20);
	/* optional: not every GPU reports its power (Not Supported) */
	if (n->power && n->power(d, &mw) == NVML_SUCCESS) {
		r->has_power = true;
		r->power_w = mw / 1000.0;
	}
	return;
fail:
	snprintf(r->error, sizeof(r->error), "%s: %s (error %d)", call, nvml_str(n, code), code);
}

/* ---- the sampler: NVML on the thread pool ---- */

struct exec_sampler {
	uv_loop_t *loop;
	uv_work_t req;
	char *lib;
	struct hw_gpu *gpus; /* a copy of the inventory's */
	size_t ngpus;
	struct exec_gpu_reading *readings;
	exec_sampler_cb *cb;
	void *arg;
	/* the worker's while busy, the loop's otherwise */
	struct nvml n;
	bool init; /* nvmlInit_v2 succeeded and no nvmlShutdown since */
	bool hold; /* the request */
	bool read; /* the request read the GPUs */
	int64_t at_ms;
	char error[TY_ERR_MSG_MAX];
	/* the loop's */
	bool busy;
	bool closed; /* closed while busy: the completion frees it */
};

static void release(struct exec_sampler *s)
{
	if (s->init)
		s->n.shutdown();
	s->init = false;
	nvml_unload(&s->n);
}

static void sampler_free(struct exec_sampler *s)
{
	release(s);
	free(s->lib);
	free(s->gpus);
	free(s->readings);
	free(s);
}

static void sample_work(uv_work_t *req)
{
	struct exec_sampler *s = req->data;
	struct ty_err err = {0};
	int code;

	s->error[0] = '\0';
	s->read = false;
	if (!s->hold) {
		release(s);
		goto out;
	}
	if (!s->init) {
		if (!s->n.h && nvml_load(&s->n, s->lib, &err)) {
			snprintf(s->error, sizeof(s->error), "%s", err.msg);
			goto out;
		}
		if ((code = s->n.init()) != NVML_SUCCESS) {
			snprintf(s->error, sizeof(s->error),
				 "NVML '%s': nvmlInit_v2: %s (error %d)", s->lib,
				 nvml_str(&s->n, code), code);
			nvml_unload(&s->n);
			goto out;
		}
		s->init = true;
	}
	for (size_t i = 0; i < s->ngpus; i++)
		exec_gpu_read(&s->readings[i], &s->n, &s->gpus[i]);
	s->read = true;
out:
	s->at_ms = ty_mono_ms();
}

static void sample_done(uv_work_t *req, int status)
{
	struct exec_sampler *s = req->data;
	struct exec_sample smp = {0};

	s->busy = false;
	if (s->closed) {
		sampler_free(s);
		return;
	}
	smp.at_ms = s->at_ms;
	smp.held = s->init;
	snprintf(smp.error, sizeof(smp.error), "%s", status ? uv_strerror(status) : s->error);
	if (s->read && !status) {
		smp.gpus = s->readings;
		smp.ngpus = s->ngpus;
	}
	if (s->cb)
		s->cb(s->arg, &smp);
}

int exec_sampler_new(struct exec_sampler **out, uv_loop_t *loop, const char *lib,
		     const struct hw_inventory *inv, exec_sampler_cb *cb, void *arg,
		     struct ty_err *err)
{
	struct exec_sampler *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s || !(s->lib = strdup(lib)) ||
	    (inv->ngpus && (!(s->gpus = calloc(inv->ngpus, sizeof(*s->gpus))) ||
			    !(s->readings = calloc(inv->ngpus, sizeof(*s->readings)))))) {
		if (s)
			sampler_free(s);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	if (inv->ngpus)
		memcpy(s->gpus, inv->gpus, inv->ngpus * sizeof(*s->gpus));
	s->ngpus = inv->ngpus;
	s->loop = loop;
	s->cb = cb;
	s->arg = arg;
	s->req.data = s;
	*out = s;
	return 0;
}

bool exec_sampler_request(struct exec_sampler *s, bool hold)
{
	if (s->busy || s->closed)
		return false;
	s->hold = hold;
	if (uv_queue_work(s->loop, &s->req, sample_work, sample_done))
		return false;
	s->busy = true;
	return true;
}

bool exec_sampler_busy(const struct exec_sampler *s)
{
	return s->busy;
}

bool exec_sampler_held(const struct exec_sampler *s)
{
	return !s->busy && s->init;
}

void exec_sampler_close(struct exec_sampler *s)
{
	if (!s)
		return;
	s->cb = NULL;
	if (s->busy)
		s->closed = true;
	else
		sampler_free(s); /* nvmlShutdown here: the daemon is stopping */
}

/* ---- the daemon's telemetry ---- */

/* dcgm-exporter's names (docs/operations.md, "GPU telemetry") */
#define M_UTIL "DCGM_FI_DEV_GPU_UTIL"
#define M_FB "DCGM_FI_DEV_FB_USED"
#define M_POWER "DCGM_FI_DEV_POWER_USAGE"
#define NLABELS 7

struct gpu_state {
	bool failing; /* a failure to read it was logged; until it reads again */
	bool shown;   /* its series are on /metrics, with these labels */
	char job[24], attempt[24], team[64];
};

struct exec_telemetry {
	struct exec *x;
	uv_timer_t timer;
	struct exec_sampler *s;
	const struct hw_inventory *inv;
	struct gpu_state *g; /* one per inventory GPU */
	bool open_failing;   /* NVML could not be had; said once until it can */
	bool again;	     /* poked while busy: ask again when the request completes */
	bool held;	     /* as the last request left it, for the log */
};

static bool gpus_wanted(struct exec *x)
{
	for (const struct exec_attempt *a = exec__attempts(x); a; a = a->next)
		if (a->state != EXEC_DONE && a->launch.ngpus > 0)
			return true;
	return false;
}

static void tick(struct exec_telemetry *t)
{
	bool hold = gpus_wanted(t->x);

	if (exec_sampler_busy(t->s)) {
		t->again = true;
		return;
	}
	t->again = false;
	if (!hold && !exec_sampler_held(t->s))
		return; /* nothing runs and nothing is held: an idle node costs nothing */
	if (!exec_sampler_request(t->s, hold))
		ty_warn("telemetry: the thread pool refused a request; tried again in %lld ms",
			(long long)exec__opts(t->x)->telemetry_ms);
}

static void on_tick(uv_timer_t *h)
{
	tick(h->data);
}

/* The inventory position of GPU index, or -1. */
static long gpu_pos(const struct hw_inventory *inv, int index)
{
	for (size_t i = 0; i < inv->ngpus; i++)
		if (inv->gpus[i].index == index)
			return (long)i;
	return -1;
}

/* Each attempt with GPUs accounts the readings of its own. */
static void account(struct exec_telemetry *t, const struct exec_sample *smp)
{
	const struct exec_opts *o = exec__opts(t->x);

	for (struct exec_attempt *a = exec__attempts(t->x); a; a = a->next) {
		struct exec_gpu_reading *r;

		if (a->state == EXEC_DONE || a->launch.ngpus <= 0)
			continue;
		if (!(r = calloc((size_t)a->launch.ngpus, sizeof(*r)))) {
			ty_error("telemetry: out of memory");
			return;
		}
		for (int k = 0; k < a->launch.ngpus; k++) {
			long p = gpu_pos(t->inv, a->launch.gpus[k]);

			if (p >= 0)
				r[k] = smp->gpus[p];
			else
				snprintf(r[k].error, sizeof(r[k].error),
					 "GPU %d is not in the inventory", a->launch.gpus[k]);
		}
		exec_telem_add(&a->telem, r, (size_t)a->launch.ngpus, smp->at_ms,
			       (double)o->idle_util_pct, o->telemetry_ms);
		free(r);
	}
}

/* Failures are said once per GPU, until it reads again. */
static void log_failures(struct exec_telemetry *t, const struct exec_sample *smp)
{
	for (size_t i = 0; i < smp->ngpus; i++) {
		const struct hw_gpu *g = &t->inv->gpus[i];
		struct gpu_state *st = &t->g[i];

		if (!smp->gpus[i].ok && !st->failing)
			ty_warn(
			    "telemetry: GPU %d (%s): %s; its samples are skipped until it reads "
			    "again",
			    g->index, g->uuid, smp->gpus[i].error);
		else if (smp->gpus[i].ok && st->failing)
			ty_info("telemetry: GPU %d (%s) reads again", g->index, g->uuid);
		st->failing = !smp->gpus[i].ok;
	}
}

/* The attempt holding GPU index now, or NULL. */
static const struct exec_attempt *holder(struct exec *x, int index)
{
	for (const struct exec_attempt *a = exec__attempts(x); a; a = a->next) {
		if (a->state == EXEC_DONE)
			continue;
		for (int k = 0; k < a->launch.ngpus; k++)
			if (a->launch.gpus[k] == index)
				return a;
	}
	return NULL;
}

static void labels_of(const char *v[NLABELS], char *index, size_t isz, struct exec_telemetry *t,
		      size_t i, const struct gpu_state *st)
{
	const struct hw_gpu *g = &t->inv->gpus[i];

	snprintf(index, isz, "%d", g->index);
	v[0] = index;
	v[1] = g->uuid;
	v[2] = g->name;
	v[3] = exec__opts(t->x)->node_id;
	v[4] = st->job;
	v[5] = st->attempt;
	v[6] = st->team;
}

static void unpublish(struct exec_telemetry *t, size_t i)
{
	struct gpu_state *st = &t->g[i];
	const char *v[NLABELS];
	char index[16];

	if (!st->shown)
		return;
	labels_of(v, index, sizeof(index), t, i, st);
	ty_metrics_remove(exec__metrics(t->x), M_UTIL, v);
	ty_metrics_remove(exec__metrics(t->x), M_FB, v);
	ty_metrics_remove(exec__metrics(t->x), M_POWER, v);
	st->shown = false;
}

/* Every GPU read on /metrics, with the job that holds it; a GPU not read is left out. */
static void publish(struct exec_telemetry *t, const struct exec_sample *smp)
{
	struct ty_metrics *m = exec__metrics(t->x);

	for (size_t i = 0; i < t->inv->ngpus; i++) {
		const struct exec_gpu_reading *r =
		    smp->gpus && i < smp->ngpus ? &smp->gpus[i] : NULL;
		const struct exec_attempt *a = holder(t->x, t->inv->gpus[i].index);
		struct gpu_state now = {0}, *st = &t->g[i];
		const char *v[NLABELS];
		char index[16];

		if (a) {
			snprintf(now.job, sizeof(now.job), "%lld", (long long)a->job);
			snprintf(now.attempt, sizeof(now.attempt), "%lld", (long long)a->attempt);
			snprintf(now.team, sizeof(now.team), "%s", a->launch.team);
		}
		if (st->shown && (!r || !r->ok || strcmp(st->job, now.job) ||
				  strcmp(st->attempt, now.attempt) || strcmp(st->team, now.team)))
			unpublish(t, i);
		if (!r || !r->ok)
			continue;
		memcpy(st->job, now.job, sizeof(st->job));
		memcpy(st->attempt, now.attempt, sizeof(st->attempt));
		memcpy(st->team, now.team, sizeof(st->team));
		labels_of(v, index, sizeof(index), t, i, st);
		ty_metrics_set(m, M_UTIL, v, r->util);
		ty_metrics_set(m, M_FB, v, (double)r->memory_used_mb);
		if (r->has_power)
			ty_metrics_set(m, M_POWER, v, round_to(r->power_w, 1000));
		else
			ty_metrics_remove(m, M_POWER, v);
		st->shown = true;
	}
}

static void on_sample(void *arg, const struct exec_sample *smp)
{
	struct exec_telemetry *t = arg;

	if (smp->error[0] && !t->open_failing)
		ty_warn("telemetry: %s; no GPU is sampled until it can be (tried again while "
			"attempts with GPUs run)",
			smp->error);
	else if (smp->gpus && t->open_failing)
		ty_info("telemetry: NVML can be used again");
	if (smp->error[0] || smp->gpus)
		t->open_failing = smp->error[0] != '\0';
	if (smp->held != t->held)
		ty_debug("telemetry: NVML %s", smp->held ? "initialised (an attempt with GPUs runs)"
							 : "shut down (no attempt with GPUs runs)");
	t->held = smp->held;
	if (smp->gpus) {
		log_failures(t, smp);
		account(t, smp);
	}
	publish(t, smp);
	if (t->again)
		tick(t);
}

static int families(struct ty_metrics *m, struct ty_err *err)
{
	/* dcgm-exporter's labels, then whose job the GPU runs */
	static const char *const labels[NLABELS + 1] = {"gpu", "UUID",	  "modelName", "Hostname",
							"job", "attempt", "team",      NULL};
	int rc;

	if ((rc = ty_metrics_family(m, TY_METRIC_GAUGE, M_UTIL,
				    "GPU utilization (in %), while attempts with GPUs run.", labels,
				    NULL, 0, err)) ||
	    (rc = ty_metrics_family(
		 m, TY_METRIC_GAUGE, M_FB,
		 "Framebuffer memory used (in MiB), while attempts with GPUs run.", labels, NULL, 0,
		 err)) ||
	    (rc = ty_metrics_family(m, TY_METRIC_GAUGE, M_POWER,
				    "Power draw (in W), while attempts with GPUs run.", labels,
				    NULL, 0, err)))
		return rc;
	return 0;
}

int exec__telemetry_start(struct exec_telemetry **out, struct exec *x, struct ty_err *err)
{
	const struct exec_opts *o = exec__opts(x);
	const struct hw_inventory *inv = o->inventory;
	struct exec_telemetry *t;
	int rc;

	*out = NULL;
	if (o->telemetry_ms <= 0) {
		ty_info("telemetry: off (--telemetry-ms 0)");
		return 0;
	}
	if (!inv || inv->simulated) {
		ty_info("telemetry: off: the inventory is simulated (--fake-gpus or "
			"--inventory-file), no GPU to sample");
		return 0;
	}
	if (!inv->ngpus || strcmp(inv->gpu_source, "nvml") != 0) {
		ty_info("telemetry: off: %s", inv->ngpus ? "the GPUs came from the CUDA runtime "
							   "(NVML could not be used at start)"
							 : "no GPU");
		return 0;
	}
	if ((rc = families(exec__metrics(x), err)))
		return rc;
	if (!(t = calloc(1, sizeof(*t))) || !(t->g = calloc(inv->ngpus, sizeof(*t->g)))) {
		free(t);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	t->x = x;
	t->inv = inv;
	if ((rc = exec_sampler_new(&t->s, exec__loop(x),
				   o->nvml_library ? o->nvml_library : HW_NVML_DEFAULT, inv,
				   on_sample, t, err))) {
		free(t->g);
		free(t);
		return rc;
	}
	uv_timer_init(exec__loop(x), &t->timer);
	t->timer.data = t;
	uv_timer_start(&t->timer, on_tick, (uint64_t)o->telemetry_ms, (uint64_t)o->telemetry_ms);
	ty_info("telemetry: %zu GPU(s) sampled every %lld ms while attempts with GPUs run (idle "
		"below %d %%)",
		inv->ngpus, (long long)o->telemetry_ms, o->idle_util_pct);
	*out = t;
	return 0;
}

void exec__telemetry_poke(struct exec_telemetry *t)
{
	if (t)
		tick(t);
}

static void timer_closed(uv_handle_t *h)
{
	struct exec_telemetry *t = h->data;

	free(t->g);
	free(t);
}

void exec__telemetry_close(struct exec_telemetry *t)
{
	if (!t)
		return;
	exec_sampler_close(t->s);
	t->s = NULL;
	uv_close((uv_handle_t *)&t->timer, timer_closed);
}

/* ---- --sample-for ---- */

static void sleep_until(int64_t mono_ms)
{
	int64_t left;

	while ((left = mono_ms - ty_mono_ms()) > 0) {
		struct timespec ts = {left / 1000, (long)(left % 1000) * 1000000L};

		nanosleep(&ts, NULL);
	}
}

static json_t *reading_json(const struct hw_gpu *g, const struct exec_gpu_reading *r)
{
	json_t *o = json_pack("{s:i, s:s}", "gpu", g->index, "uuid", g->uuid);

	if (!o)
		return NULL;
	if (!r->ok) {
		json_object_set_new(o, "error", json_string(r->error));
		return o;
	}
	json_object_set_new(o, "util", json_real(r->util));
	json_object_set_new(o, "memory_used_mb", json_integer((json_int_t)r->memory_used_mb));
	json_object_set_new(o, "power_w",
			    r->has_power ? json_real(round_to(r->power_w, 1000)) : json_null());
	return o;
}

static void print_line(FILE *out, json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;

	if (s) {
		fprintf(out, "%s\n", s);
		fflush(out);
	}
	free(s);
	json_decref(j);
}

int exec_telemetry_sample_for(FILE *out, const char *lib, const struct hw_inventory *inv,
			      int64_t seconds, int64_t interval_ms, double idle_pct,
			      struct ty_err *err)
{
	struct nvml n = {0};
	struct exec_gpu_reading *r = NULL;
	struct exec_telem *acc = NULL;
	int64_t start, end, next, samples = 0, counted = 0;
	json_t *gpus;
	int code, rc = 0;

	if ((rc = nvml_load(&n, lib, err)))
		return rc;
	if ((code = n.init()) != NVML_SUCCESS) {
		rc = ty_err_set(err, TY_EUNAVAIL, "NVML '%s': nvmlInit_v2: %s (error %d)", lib,
				nvml_str(&n, code), code);
		nvml_unload(&n);
		return rc;
	}
	if (inv->ngpus &&
	    (!(r = calloc(inv->ngpus, sizeof(*r))) || !(acc = calloc(inv->ngpus, sizeof(*acc))))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	start = next = ty_mono_ms();
	end = start + seconds * 1000;
	for (;;) {
		int64_t now = ty_mono_ms();
		bool any = false;

		gpus = json_array();
		for (size_t i = 0; i < inv->ngpus; i++) {
			exec_gpu_read(&r[i], &n, &inv->gpus[i]);
			exec_telem_add(&acc[i], &r[i], 1, now, idle_pct, interval_ms);
			any |= r[i].ok;
			json_array_append_new(gpus, reading_json(&inv->gpus[i], &r[i]));
		}
		samples++;
		counted += any;
		print_line(
		    out, json_pack("{s:I, s:o}", "t_ms", (json_int_t)(now - start), "gpus", gpus));
		next += interval_ms;
		if (next > end)
			break;
		sleep_until(next);
	}
	gpus = json_array();
	for (size_t i = 0; i < inv->ngpus; i++) {
		json_t *g = json_pack("{s:i, s:s, s:s}", "gpu", inv->gpus[i].index, "uuid",
				      inv->gpus[i].uuid, "name", inv->gpus[i].name);
		json_t *sum = exec_telem_json(&acc[i]);

		if (g && sum)
			json_object_update(g, sum);
		else if (g)
			json_object_set_new(g, "samples", json_integer(0));
		json_decref(sum);
		json_array_append_new(gpus, g);
	}
	print_line(out, json_pack("{s:{s:I, s:I, s:I, s:o}}", "summary", "samples",
				  (json_int_t)samples, "counted", (json_int_t)counted, "seconds",
				  (json_int_t)seconds, "gpus", gpus));
	if (!counted)
		rc = ty_err_set(err, TY_ENOTFOUND, "no GPU could be read in %lld sample(s)",
				(long long)samples);
out:
	n.shutdown();
	nvml_unload(&n);
	free(r);
	free(acc);
	return rc;
}
