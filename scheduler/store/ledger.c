/*
 * The usage ledger's rows (ledger.c): the nodes' parts of ended, released
 * attempts not in the ledger yet, the rows computed for them inserted, the
 * checkpoint writing time they count, and the rate table published.
 */
#include "scheduler.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    " t.job_id, t.attempt, t.checkpoint_write_ms,"
    /* the previous release's first verdict and largest share count as one step */
    " coalesce(t.straggler_shares, CASE WHEN t.straggler_at IS NOT NULL THEN"
    "  jsonb_build_array(jsonb_build_array((extract(epoch FROM t.straggler_at) * 1000)::bigint,"
    "  coalesce(t.straggler_lost, 0))) END)::text,"
    /* waiting since the previous attempt ended, else since submission */
    " (extract(epoch FROM coalesce((SELECT max(p.ended_at) FROM attempts p"
    "  WHERE p.job_id = t.job_id AND p.attempt < t.attempt), j.created_at)) * 1000)::bigint"
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

/* The goodput columns, the same names in the ledger and in the JSON of a row. */
#define GOODPUT_COL(name, str) ", " str "_gpu_ms"
#define GOODPUT_REC(name, str) ", " str "_gpu_ms bigint"
#define GOODPUT_COLS PROTO_GOODPUT_CATEGORIES(GOODPUT_COL)
#define GOODPUT_RECS PROTO_GOODPUT_CATEGORIES(GOODPUT_REC)

/* The rows computed here, as [{team, job, ...}] (numbers as the text they are sent as). */
static const char SQL_LEDGER_INSERT[] =
    "INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model,"
    " gpus, started_at, ended_at, outcome, failure_class, checkpoint_at,"
    " gpu_seconds, lost_gpu_seconds, rate_per_gpu_hour, cost, idle_gpu_seconds,"
    " gpu_ms, queue_wait_gpu_ms" GOODPUT_COLS ")"
    " SELECT team, job, attempt, node, pool, model, gpus, to_timestamp(start_ms / 1000.0),"
    " to_timestamp(end_ms / 1000.0), outcome, cls, to_timestamp(ckpt_ms / 1000.0),"
    " gs::float8, ls::float8, rate::float8, cost::float8, idle::float8,"
    " gpu_ms, queue_wait_gpu_ms" GOODPUT_COLS
    " FROM jsonb_to_recordset($1::jsonb) AS r(team bigint, job bigint, attempt integer,"
    " node text, pool text, model text, gpus integer, start_ms bigint, end_ms bigint,"
    " outcome text, cls text, ckpt_ms bigint, gs text, ls text, rate text, cost text,"
    " idle text, gpu_ms bigint, queue_wait_gpu_ms bigint" GOODPUT_RECS ")"
    " ON CONFLICT (job_id, attempt, node_id) DO NOTHING";

static const char *const goodput_keys[PROTO_GOODPUT_COUNT] = {
#define GOODPUT_KEY(name, str) str "_gpu_ms",
    PROTO_GOODPUT_CATEGORIES(GOODPUT_KEY)
#undef GOODPUT_KEY
};

/*
 * A verified checkpoint's write time, once per step (a newer one than any
 * counted) of a live or stopping attempt, reported by a node of it.
 */
static const char SQL_CHECKPOINT_WRITE[] =
    "UPDATE attempts SET checkpoint_write_ms = checkpoint_write_ms + $4,"
    " checkpoint_write_step = $3"
    " WHERE job_id = $1 AND attempt = $2"
    " AND state IN ('scheduled', 'starting', 'running', 'stopping')"
    " AND (checkpoint_write_step IS NULL OR checkpoint_write_step < $3)"
    " AND EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1"
    "  AND a.attempt = $2 AND a.node_id = $5)";

int sched_store_checkpoint_write(struct ty_pg *pg, const struct sched_store_part *a, int64_t step,
				 int64_t write_ms, struct ty_err *err)
{
	char jb[24], ab[24], sb[24], wb[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), sched_i64(sb, step),
			   sched_i64(wb, write_ms), a->node};

	return ty_pg_exec(NULL, pg, SQL_CHECKPOINT_WRITE, 5, p, err);
}

static const char SQL_RATES_DELETE[] = "DELETE FROM usage_rates";
static const char SQL_RATE_INSERT[] =
    "INSERT INTO usage_rates (pool, gpu_model, rate_per_gpu_hour) VALUES ($1, $2, $3)";

void sched_store_ledger_free(struct sched_store_ledger *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].pool);
		free(v[i].model);
		free(v[i].outcome);
		free(v[i].failure_class);
		free(v[i].straggler);
	}
	free(v);
}

/*
 * attempts.straggler_shares' [[ms, share], ...] into l; entries not of
 * that form are skipped (the column is only written by this program).
 * Nonzero: no memory.
 */
static int shares_parse(struct sched_store_ledger *l, const char *text)
{
	json_t *a = json_loads(text, 0, NULL), *e;
	size_t i;

	if (!a)
		return 0;
	if (json_array_size(a) &&
	    !(l->straggler = calloc(json_array_size(a), sizeof(*l->straggler)))) {
		json_decref(a);
		return -1;
	}
	json_array_foreach(a, i, e)
	{
		const json_t *t = json_array_get(e, 0), *f = json_array_get(e, 1);

		if (!json_is_integer(t) || !json_is_number(f))
			continue;
		l->straggler[l->nstraggler].from_ms = json_integer_value(t);
		l->straggler[l->nstraggler].share = json_number_value(f);
		l->nstraggler++;
	}
	json_decref(a);
	return 0;
}

static void dup_col(char **out, const PGresult *res, int r, int c, bool *oom)
{
	const char *v = ty_pg_val(res, r, c);

	if (v && !(*out = strdup(v)))
		*oom = true;
}

int sched_store_ledger_ended(struct sched_store_ledger **out, int *nout, struct ty_pg *pg,
			     const int64_t *jobs, const int64_t *attempts, int n,
			     struct ty_err *err)
{
	struct ty_buf jb = {0}, ab = {0};
	struct sched_store_ledger *v = NULL;
	PGresult *res = NULL;
	bool oom = false;
	char buf[24];
	int rc = 0, rows = 0;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < n && !rc; i++)
		if (sched_store__arr_add(&jb, sched_i64(buf, jobs[i])) ||
		    sched_store__arr_add(&ab, sched_i64(buf, attempts[i])))
			rc = TY_ENOMEM;
	if (rc || (rc = sched_store__arr_end(&jb)) || (rc = sched_store__arr_end(&ab))) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {jb.data, ab.data};

	if ((rc = ty_pg_exec(&res, pg, SQL_LEDGER_ENDED, 2, p, err)))
		goto out;
	rows = PQntuples(res);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++) {
		struct sched_store_ledger *l = &v[i];

		dup_col(&l->node, res, i, 0, &oom);
		dup_col(&l->pool, res, i, 1, &oom);
		dup_col(&l->model, res, i, 2, &oom);
		l->gpus = (int)sched_col_i64(res, i, 3);
		l->start_ms = sched_col_i64(res, i, 4);
		l->end_ms = sched_col_i64(res, i, 5);
		l->checkpoint_ms = sched_col_i64(res, i, 6);
		dup_col(&l->outcome, res, i, 7, &oom);
		dup_col(&l->failure_class, res, i, 8, &oom);
		l->team = sched_col_i64(res, i, 9);
		l->idle_seconds =
		    PQgetisnull(res, i, 10) ? -1 : strtod(PQgetvalue(res, i, 10), NULL);
		l->job = sched_col_i64(res, i, 11);
		l->attempt = sched_col_i64(res, i, 12);
		l->checkpoint_write_ms = sched_col_i64(res, i, 13);
		if (!PQgetisnull(res, i, 14) && shares_parse(l, PQgetvalue(res, i, 14)))
			oom = true;
		l->queued_ms = sched_col_i64(res, i, 15);
	}
	if (oom) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	*out = v;
	*nout = rows;
	v = NULL;
out:
	sched_store_ledger_free(v, rows);
	PQclear(res);
	ty_buf_free(&jb);
	ty_buf_free(&ab);
	return rc;
}

/* Row l as the JSON SQL_LEDGER_INSERT takes; NULL: no memory. */
static json_t *ledger_rec(const struct sched_store_ledger *l)
{
	char gs[40], ls[40], rb[40], costb[40], ib[40];
	json_t *rec;

	snprintf(gs, sizeof(gs), "%.17g", l->gpu_seconds);
	snprintf(ls, sizeof(ls), "%.17g", l->lost_gpu_seconds);
	snprintf(rb, sizeof(rb), "%.17g", l->rate);
	snprintf(costb, sizeof(costb), "%.17g", l->cost);
	snprintf(ib, sizeof(ib), "%.17g", l->idle_gpu_seconds);
	rec = json_pack(
	    "{s:I, s:I, s:I, s:s, s:s, s:s, s:i, s:I, s:I, s:s, s:s?, s:o, s:s, s:s,"
	    " s:s, s:s, s:s?, s:I, s:I}",
	    "team", (json_int_t)l->team, "job", (json_int_t)l->job, "attempt",
	    (json_int_t)l->attempt, "node", l->node ? l->node : "", "pool",
	    l->pool ? l->pool : "", "model", l->model ? l->model : "", "gpus", l->gpus,
	    "start_ms", (json_int_t)l->start_ms, "end_ms", (json_int_t)l->end_ms, "outcome",
	    l->outcome ? l->outcome : "", "cls", l->failure_class, "ckpt_ms",
	    l->checkpoint_ms ? json_integer(l->checkpoint_ms) : json_null(), "gs", gs, "ls", ls,
	    "rate", rb, "cost", costb, "idle", l->idle_gpu_seconds >= 0 ? ib : NULL, "gpu_ms",
	    (json_int_t)l->gpu_ms, "queue_wait_gpu_ms", (json_int_t)l->queue_wait_gpu_ms);
	for (int k = 0; rec && k < PROTO_GOODPUT_COUNT; k++)
		if (json_object_set_new(rec, goodput_keys[k], json_integer(l->goodput[k]))) {
			json_decref(rec);
			rec = NULL;
		}
	return rec;
}

int sched_store_ledger_insert(struct ty_pg *pg, const struct sched_store_ledger *v, int n,
			      struct ty_err *err)
{
	json_t *rows = NULL;
	char *text = NULL;
	int rc = 0;

	if (n == 0)
		return 0;
	if (!(rows = json_array()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n && !rc; i++)
		if (json_array_append_new(rows, ledger_rec(&v[i])))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	if (!rc && !(text = json_dumps(rows, JSON_COMPACT)))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	if (!rc) {
		const char *q[] = {text};

		rc = ty_pg_exec(NULL, pg, SQL_LEDGER_INSERT, 1, q, err);
	}
	free(text);
	json_decref(rows);
	return rc;
}

int sched_store_rates_replace(struct ty_pg *pg, const struct sched_rate *v, int n,
			      struct ty_err *err)
{
	int rc;

	if ((rc = ty_pg_exec(NULL, pg, SQL_RATES_DELETE, 0, NULL, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		char rb[40];
		const char *p[] = {v[i].pool, v[i].model, rb};

		snprintf(rb, sizeof(rb), "%.17g", v[i].per_gpu_hour);
		rc = ty_pg_exec(NULL, pg, SQL_RATE_INSERT, 3, p, err);
	}
	return rc;
}
