/*
 * The usage ledger: the rate table (--rates-file), the pure arithmetic of a
 * ledger row, and the rows written when an attempt has ended and every node
 * of it has released its GPUs (docs/scheduling.md, "Accounting").
 */
#include "scheduler.h"
#include "lifecycle.h"
#include "ty_json.h"
#include "ty_log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rate table is a few dozen entries; anything near this is a mistake. */
#define RATES_MAX_BYTES (1 << 20)
#define RATES_MAX 4096

static int rate_cmp(const void *a, const void *b)
{
	const struct sched_rate *x = a, *y = b;
	int c = strcmp(x->pool, y->pool);

	return c ? c : strcmp(x->model, y->model);
}

void sched_rates_free(struct sched_rates *r)
{
	free(r->v);
	r->v = NULL;
	r->n = 0;
}

int sched_rates_parse(struct sched_rates *out, const char *json_text, struct ty_err *err)
{
	struct sched_rates r = {0};
	json_t *root = NULL, *models, *v;
	const char *pool, *model;
	int rc;

	if ((rc = ty_json_parse(&root, json_text, strlen(json_text), 4, err)))
		goto out;
	if (!json_is_object(root)) {
		rc = ty_err_set(err, TY_EINVAL, "rates: expected an object of pools, got %s",
				ty_json_type_name(root));
		goto out;
	}
	if (json_object_size(root) > RATES_MAX) {
		rc = ty_err_set(err, TY_EINVAL, "rates: more than %d pools", RATES_MAX);
		goto out;
	}
	json_object_foreach(root, pool, models)
	{
		if (!*pool || strlen(pool) >= sizeof(r.v->pool)) {
			rc = ty_err_set(err, TY_EINVAL,
					"rates: pool name '%.80s' must be 1-%zu bytes", pool,
					sizeof(r.v->pool) - 1);
			goto out;
		}
		if (!json_is_object(models)) {
			rc = ty_err_set(err, TY_EINVAL,
					"rates: '%s' must be an object of GPU models, got %s", pool,
					ty_json_type_name(models));
			goto out;
		}
		json_object_foreach(models, model, v)
		{
			struct sched_rate *e;

			if (!*model || strlen(model) >= sizeof(r.v->model)) {
				rc = ty_err_set(
				    err, TY_EINVAL,
				    "rates: '%s': GPU model name '%.80s' must be 1-%zu bytes", pool,
				    model, sizeof(r.v->model) - 1);
				goto out;
			}
			if (!json_is_number(v) || !isfinite(json_number_value(v)) ||
			    json_number_value(v) < 0) {
				rc = ty_err_set(
				    err, TY_EINVAL,
				    "rates: '%s'.'%s' must be a number >= 0 (per GPU-hour)", pool,
				    model);
				goto out;
			}
			if (r.n >= RATES_MAX) {
				rc = ty_err_set(err, TY_EINVAL, "rates: more than %d rates",
						RATES_MAX);
				goto out;
			}
			if (!(e = realloc(r.v, (size_t)(r.n + 1) * sizeof(*e)))) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			r.v = e;
			e = &r.v[r.n++];
			memset(e, 0, sizeof(*e));
			snprintf(e->pool, sizeof(e->pool), "%s", pool);
			/* "default" is stored as "", as in usage_rates */
			snprintf(e->model, sizeof(e->model), "%s",
				 strcmp(model, "default") ? model : "");
			e->per_gpu_hour = json_number_value(v);
		}
	}
	if (r.n)
		qsort(r.v, (size_t)r.n, sizeof(*r.v), rate_cmp);
	*out = r;
	r.v = NULL;
out:
	json_decref(root);
	free(r.v);
	return rc;
}

int sched_rates_load(struct sched_rates *out, const char *path, struct ty_err *err)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len;
	int rc;

	if (!f)
		return ty_err_set(err, TY_EIO, "cannot open rates file '%s': %s", path,
				  strerror(errno));
	if (!(buf = malloc(RATES_MAX_BYTES + 1))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	len = fread(buf, 1, RATES_MAX_BYTES + 1, f);
	if (ferror(f)) {
		rc = ty_err_set(err, TY_EIO, "cannot read rates file '%s': %s", path,
				strerror(errno));
		goto out;
	}
	if (len > RATES_MAX_BYTES) {
		rc = ty_err_set(err, TY_ETOOBIG, "rates file '%s' is larger than %d bytes", path,
				RATES_MAX_BYTES);
		goto out;
	}
	buf[len] = '\0';
	if ((rc = sched_rates_parse(out, buf, err))) {
		char why[sizeof(err->msg)];

		snprintf(why, sizeof(why), "%s", err->msg);
		ty_err_clear(err);
		ty_err_set(err, rc, "rates file '%s': %s", path, why);
	}
out:
	free(buf);
	fclose(f);
	return rc;
}

double sched_rate_of(const struct sched_rates *r, const char *pool, const char *model)
{
	const struct sched_rate *dflt = NULL;

	for (int i = 0; i < r->n; i++) {
		if (strcmp(r->v[i].pool, pool))
			continue;
		if (!r->v[i].model[0])
			dflt = &r->v[i];
		else if (model && *model && !strcmp(r->v[i].model, model))
			return r->v[i].per_gpu_hour;
	}
	return dflt ? dflt->per_gpu_hour : 0;
}

enum proto_goodput sched_goodput_lost_category(const char *failure_class)
{
	switch (proto_failure_class_parse(failure_class)) {
	case PROTO_FAILURE_PREEMPTED:
		return PROTO_GOODPUT_LOST_PREEMPTION;
	case PROTO_FAILURE_HANG:
		return PROTO_GOODPUT_HANG;
	default:
		/* which classes are the infrastructure's is proto/lifecycle.h's */
		if (proto_failure_infrastructure(failure_class))
			return PROTO_GOODPUT_LOST_INFRA;
		/* user, oom, timeout, cancelled; and no class: only a known one blames us */
		return PROTO_GOODPUT_LOST_USER;
	}
}

/*
 * The GPU-ms the gang lost to its stragglers: the integral of their share
 * over the kept part (the gang runs at its slowest straggler's speed), at
 * most left, what the kept part has besides checkpoints and idle GPUs.
 */
static int64_t straggler_gpu_ms(const struct sched_ledger_in *in, int64_t g, int64_t kept,
				int64_t left)
{
	int64_t end = in->start_ms + kept, s;
	double ms = 0;

	for (int k = 0; k < in->nstraggler; k++) {
		int64_t from = in->straggler[k].from_ms, to = end;
		double f = in->straggler[k].share;

		if (k + 1 < in->nstraggler && in->straggler[k + 1].from_ms < to)
			to = in->straggler[k + 1].from_ms;
		if (from < in->start_ms)
			from = in->start_ms;
		if (to > from && f > 0)
			ms += (double)(to - from) * fmin(f, 1.0);
	}
	s = (int64_t)llround((double)g * ms);
	return s < left ? s : left;
}

void sched_ledger_compute(struct sched_ledger_row *out, const struct sched_ledger_in *in)
{
	int64_t span = in->end_ms > in->start_ms ? in->end_ms - in->start_ms : 0, lost = 0;
	int64_t g = in->gpus > 0 ? in->gpus : 0, kept, ckpt, idle, wait;
	double gpus = (double)g;

	if (in->outcome && !strcmp(in->outcome, "failed")) {
		/* work since the last valid checkpoint (of this attempt) is gone */
		int64_t from = in->start_ms;

		if (in->checkpoint_ms > from)
			from = in->checkpoint_ms;
		lost = in->end_ms > from ? in->end_ms - from : 0;
	}
	out->gpu_seconds = gpus * (double)span / 1000.0;
	out->lost_gpu_seconds = gpus * (double)lost / 1000.0;
	out->cost = out->gpu_seconds / 3600.0 * (in->rate > 0 ? in->rate : 0);
	/* the executor counts from its launch, the ledger from placement: never more */
	out->idle_gpu_seconds = -1;
	if (in->idle_seconds >= 0)
		out->idle_gpu_seconds = fmin(gpus * in->idle_seconds, out->gpu_seconds);

	/*
	 * Goodput, in integer GPU-milliseconds so the categories add up
	 * exactly: the lost window first (by class), then, of the kept part,
	 * checkpoint writing, then idle GPUs, then the straggler's share of
	 * the kept part after its verdict, and what remains is useful.
	 */
	memset(out->goodput, 0, sizeof(out->goodput));
	out->gpu_ms = g * span;
	kept = span - lost;
	if (lost)
		out->goodput[sched_goodput_lost_category(in->failure_class)] = g * lost;
	ckpt = in->checkpoint_write_ms > 0 ? in->checkpoint_write_ms : 0;
	ckpt = g * (ckpt < kept ? ckpt : kept);
	idle = in->idle_seconds > 0 ? (int64_t)llround(fmin(in->idle_seconds, 1e12) * 1000.0) : 0;
	idle = g * idle;
	if (idle > g * kept - ckpt)
		idle = g * kept - ckpt;
	out->goodput[PROTO_GOODPUT_CHECKPOINT] = ckpt;
	out->goodput[PROTO_GOODPUT_IDLE] = idle;
	out->goodput[PROTO_GOODPUT_STRAGGLER] =
	    straggler_gpu_ms(in, g, kept, g * kept - ckpt - idle);
	out->goodput[PROTO_GOODPUT_USEFUL] =
	    g * kept - ckpt - idle - out->goodput[PROTO_GOODPUT_STRAGGLER];
	wait = in->queued_ms > 0 && in->start_ms > in->queued_ms ? in->start_ms - in->queued_ms : 0;
	out->queue_wait_gpu_ms = g * wait;
}

int sched_ledger_attempts_end(struct ty_pg *pg, const struct sched_rates *rates,
			      const int64_t *jobs, const int64_t *attempts, int n,
			      struct ty_err *err)
{
	struct sched_store_ledger *v = NULL;
	int rc, rows = 0;

	if ((rc = sched_store_ledger_ended(&v, &rows, pg, jobs, attempts, n, err)) || !rows)
		goto out;
	for (int i = 0; i < rows; i++) {
		struct sched_store_ledger *l = &v[i];
		struct sched_ledger_in in = {
		    .gpus = l->gpus,
		    .start_ms = l->start_ms,
		    .end_ms = l->end_ms,
		    .checkpoint_ms = l->checkpoint_ms,
		    .outcome = l->outcome ? l->outcome : "",
		    .rate = sched_rate_of(rates, l->pool ? l->pool : "", l->model ? l->model : ""),
		    .idle_seconds = l->idle_seconds,
		    .failure_class = l->failure_class,
		    .checkpoint_write_ms = l->checkpoint_write_ms,
		    .queued_ms = l->queued_ms,
		    .straggler = l->straggler,
		    .nstraggler = l->nstraggler,
		};
		struct sched_ledger_row row;

		/* a release recorded before the attempt's creation cannot happen; be safe */
		if (in.end_ms < in.start_ms)
			in.end_ms = in.start_ms;
		sched_ledger_compute(&row, &in);
		l->end_ms = in.end_ms;
		l->rate = in.rate;
		l->gpu_seconds = row.gpu_seconds;
		l->lost_gpu_seconds = row.lost_gpu_seconds;
		l->cost = row.cost;
		l->idle_gpu_seconds = row.idle_gpu_seconds;
		l->gpu_ms = row.gpu_ms;
		memcpy(l->goodput, row.goodput, sizeof(l->goodput));
		l->queue_wait_gpu_ms = row.queue_wait_gpu_ms;
	}
	if ((rc = sched_store_ledger_insert(pg, v, rows, err)))
		goto out;
	ty_debug("usage ledger: %d row%s of %d attempt%s", rows, rows == 1 ? "" : "s", n,
		 n == 1 ? "" : "s");
out:
	sched_store_ledger_free(v, rows);
	return rc;
}

int sched_ledger_attempt_end(struct ty_pg *pg, const struct sched_rates *rates, int64_t job,
			     int64_t attempt, struct ty_err *err)
{
	return sched_ledger_attempts_end(pg, rates, &job, &attempt, 1, err);
}

int sched_rates_publish(struct sched_term *t, const struct sched_rates *r, struct ty_err *err)
{
	int rc;

	if ((rc = sched_tx_begin(t, err)))
		return rc;
	rc = sched_store_rates_replace(t->pg, r->v, r->n, err);
	if (rc)
		ty_pg_rollback(t->pg);
	else
		rc = sched_tx_commit(t, err);
	return rc;
}
