/*
 * The usage ledger: the rate table (--rates-file), the pure arithmetic of a
 * ledger row, and the rows written when an attempt has ended and every node
 * of it has released its GPUs (docs/scheduling.md, "Accounting").
 */
#include "scheduler.h"
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

void sched_ledger_compute(struct sched_ledger_row *out, const struct sched_ledger_in *in)
{
	int64_t span = in->end_ms > in->start_ms ? in->end_ms - in->start_ms : 0, lost = 0;
	double gpus = in->gpus > 0 ? in->gpus : 0;

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
}

/*
 * One row per node of the attempts given ($1, $2) that have ended with
 * every node released and are not in the ledger yet; none of an attempt
 * still active or whose node holds GPUs.
 */
static const char SQL_LEDGER_ENDED[] =
    "SELECT a.node_id, ty_node_pool(n.labels), ty_gpu_model(n.inventory, a.gpus),"
    " cardinality(a.gpus),"
    " (extract(epoch FROM t.created_at) * 1000)::bigint,"
    " (extract(epoch FROM a.released_at) * 1000)::bigint,"
    " (extract(epoch FROM t.last_checkpoint_at) * 1000)::bigint,"
    " t.state, t.failure_class, j.team_id, (a.telemetry->>'idle_seconds')::float8,"
    " t.job_id, t.attempt"
    " FROM attempts t JOIN jobs j ON j.id = t.job_id"
    " JOIN allocations a ON a.job_id = t.job_id AND a.attempt = t.attempt"
    " JOIN nodes n ON n.id = a.node_id"
    " WHERE (t.job_id, t.attempt) IN (SELECT * FROM unnest($1::bigint[], $2::integer[]))"
    " AND t.state IN ('succeeded', 'failed', 'cancelled')"
    " AND NOT EXISTS (SELECT 1 FROM allocations x WHERE x.job_id = t.job_id"
    "  AND x.attempt = t.attempt AND x.released_at IS NULL)"
    " AND NOT EXISTS (SELECT 1 FROM usage_ledger l WHERE l.job_id = t.job_id"
    "  AND l.attempt = t.attempt)"
    " ORDER BY t.job_id, t.attempt, a.node_rank";

/* The rows computed here, as [{team, job, ...}] (numbers as the text they are sent as). */
static const char SQL_LEDGER_INSERT[] =
    "INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model,"
    " gpus, started_at, ended_at, outcome, failure_class, checkpoint_at,"
    " gpu_seconds, lost_gpu_seconds, rate_per_gpu_hour, cost, idle_gpu_seconds)"
    " SELECT team, job, attempt, node, pool, model, gpus, to_timestamp(start_ms / 1000.0),"
    " to_timestamp(end_ms / 1000.0), outcome, cls, to_timestamp(ckpt_ms / 1000.0),"
    " gs::float8, ls::float8, rate::float8, cost::float8, idle::float8"
    " FROM jsonb_to_recordset($1::jsonb) AS r(team bigint, job bigint, attempt integer,"
    " node text, pool text, model text, gpus integer, start_ms bigint, end_ms bigint,"
    " outcome text, cls text, ckpt_ms bigint, gs text, ls text, rate text, cost text,"
    " idle text)"
    " ON CONFLICT (job_id, attempt, node_id) DO NOTHING";

/* The ledger row of result row i as the JSON SQL_LEDGER_INSERT takes; NULL: no memory. */
static json_t *ledger_rec(struct sched *s, const PGresult *res, int i)
{
	struct sched_ledger_in in = {
	    .gpus = (int)sched_col_i64(res, i, 3),
	    .start_ms = sched_col_i64(res, i, 4),
	    .end_ms = sched_col_i64(res, i, 5),
	    .checkpoint_ms = sched_col_i64(res, i, 6),
	    .outcome = PQgetvalue(res, i, 7),
	    .rate = sched_rate_of(&s->o.rates, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2)),
	    .idle_seconds = PQgetisnull(res, i, 10) ? -1 : strtod(PQgetvalue(res, i, 10), NULL),
	};
	struct sched_ledger_row row;
	char gs[40], ls[40], rb[40], costb[40], ib[40];

	/* a release recorded before the attempt's creation cannot happen; be safe */
	if (in.end_ms < in.start_ms)
		in.end_ms = in.start_ms;
	sched_ledger_compute(&row, &in);
	snprintf(gs, sizeof(gs), "%.17g", row.gpu_seconds);
	snprintf(ls, sizeof(ls), "%.17g", row.lost_gpu_seconds);
	snprintf(rb, sizeof(rb), "%.17g", in.rate);
	snprintf(costb, sizeof(costb), "%.17g", row.cost);
	snprintf(ib, sizeof(ib), "%.17g", row.idle_gpu_seconds);
	return json_pack(
	    "{s:I, s:I, s:I, s:s, s:s, s:s, s:i, s:I, s:I, s:s, s:s?, s:o, s:s, s:s,"
	    " s:s, s:s, s:s?}",
	    "team", (json_int_t)sched_col_i64(res, i, 9), "job",
	    (json_int_t)sched_col_i64(res, i, 11), "attempt", (json_int_t)sched_col_i64(res, i, 12),
	    "node", PQgetvalue(res, i, 0), "pool", PQgetvalue(res, i, 1), "model",
	    PQgetvalue(res, i, 2), "gpus", in.gpus, "start_ms", (json_int_t)in.start_ms, "end_ms",
	    (json_int_t)in.end_ms, "outcome", in.outcome, "cls", ty_pg_val(res, i, 8), "ckpt_ms",
	    in.checkpoint_ms ? json_integer(in.checkpoint_ms) : json_null(), "gs", gs, "ls", ls,
	    "rate", rb, "cost", costb, "idle", row.idle_gpu_seconds >= 0 ? ib : NULL);
}

int sched_ledger_attempts_end(struct sched *s, const int64_t *jobs, const int64_t *attempts, int n,
			      struct ty_err *err)
{
	struct ty_buf jb = {0}, ab = {0};
	PGresult *res = NULL;
	json_t *rows = NULL;
	char *text = NULL, buf[24];
	int rc = 0;

	for (int i = 0; i < n && !rc; i++)
		if (sched_store__arr_add(&jb, sched_i64(buf, jobs[i])) ||
		    sched_store__arr_add(&ab, sched_i64(buf, attempts[i])))
			rc = TY_ENOMEM;
	if (rc || (rc = sched_store__arr_end(&jb)) || (rc = sched_store__arr_end(&ab))) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {jb.data, ab.data};

	if ((rc = ty_pg_exec(&res, s->pg, SQL_LEDGER_ENDED, 2, p, err)))
		goto out;
	if (PQntuples(res) == 0)
		goto out;
	if (!(rows = json_array())) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++)
		if (json_array_append_new(rows, ledger_rec(s, res, i))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	if (!(text = json_dumps(rows, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *q[] = {text};

	if ((rc = ty_pg_exec(NULL, s->pg, SQL_LEDGER_INSERT, 1, q, err)))
		goto out;
	ty_debug("usage ledger: %d row%s of %d attempt%s", PQntuples(res),
		 PQntuples(res) == 1 ? "" : "s", n, n == 1 ? "" : "s");
out:
	free(text);
	json_decref(rows);
	PQclear(res);
	ty_buf_free(&jb);
	ty_buf_free(&ab);
	return rc;
}

int sched_ledger_attempt_end(struct sched *s, int64_t job, int64_t attempt, struct ty_err *err)
{
	return sched_ledger_attempts_end(s, &job, &attempt, 1, err);
}

int sched_rates_publish(struct sched *s, struct ty_err *err)
{
	const struct sched_rates *r = &s->o.rates;
	int rc;

	if ((rc = sched_tx_begin(s, err)))
		return rc;
	if ((rc = ty_pg_exec(NULL, s->pg, "DELETE FROM usage_rates", 0, NULL, err)))
		goto out;
	for (int i = 0; i < r->n && !rc; i++) {
		char rb[40];
		const char *p[] = {r->v[i].pool, r->v[i].model, rb};

		snprintf(rb, sizeof(rb), "%.17g", r->v[i].per_gpu_hour);
		rc = ty_pg_exec(NULL, s->pg,
				"INSERT INTO usage_rates (pool, gpu_model, rate_per_gpu_hour)"
				" VALUES ($1, $2, $3)",
				3, p, err);
	}
out:
	if (rc)
		ty_pg_rollback(s->pg);
	else
		rc = sched_tx_commit(s, err);
	return rc;
}
