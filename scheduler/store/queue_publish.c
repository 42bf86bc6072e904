/*
 * What a scheduling cycle publishes (place.c): the pending jobs' reasons,
 * queue positions and reservations, the queue fields of jobs that left the
 * queue, and the teams' usage rows; one statement each whatever the number
 * of rows.
 */
#include "scheduler.h"

#include <stdlib.h>

/*
 * Rows are locked in id order first, the order every other multi-row job
 * write locks them in (a sweep's cancel, api/store_jobs.c): the rows come in
 * queue order, and an UPDATE locks in its join's order, which deadlocked
 * with a cancel of two trials queued in the other order.
 */
static const char SQL_QUEUE_PUBLISH[] =
    "WITH u AS (SELECT * FROM jsonb_to_recordset($1::jsonb)"
    "  AS u(id bigint, reason text, pos integer, resv bigint, est boolean, at bigint,"
    "  basis jsonb)),"
    " l AS (SELECT j.id FROM jobs j JOIN u ON u.id = j.id WHERE j.state = 'pending'"
    "  ORDER BY j.id FOR UPDATE OF j)"
    " UPDATE jobs j SET pending_reason = u.reason, queue_position = u.pos,"
    " reserved_until = to_timestamp(u.resv / 1000.0),"
    " estimated_start = CASE WHEN u.est THEN to_timestamp(u.at / 1000.0)"
    "  ELSE j.estimated_start END,"
    " estimate_basis = CASE WHEN u.est THEN u.basis ELSE j.estimate_basis END"
    " FROM u, l WHERE j.id = u.id AND l.id = j.id AND j.state = 'pending'";

/*
 * Estimates of jobs whose queue fields did not change: after the rows above,
 * only those whose estimate changed, and never waiting for a row another
 * transaction holds (SKIP LOCKED): an estimate is worth no deadlock with a
 * cancel that locked its job, and the next estimate writes it.
 */
static const char SQL_ESTIMATES_ONLY[] =
    "WITH u AS (SELECT * FROM jsonb_to_recordset($1::jsonb)"
    "  AS u(id bigint, at bigint, basis jsonb)),"
    " l AS (SELECT j.id FROM jobs j JOIN u ON u.id = j.id WHERE j.state = 'pending'"
    "  AND (j.estimated_start IS DISTINCT FROM to_timestamp(u.at / 1000.0)"
    "   OR j.estimate_basis IS DISTINCT FROM u.basis)"
    "  ORDER BY j.id FOR UPDATE OF j SKIP LOCKED)"
    " UPDATE jobs j SET estimated_start = to_timestamp(u.at / 1000.0),"
    " estimate_basis = u.basis"
    " FROM u, l WHERE j.id = u.id AND l.id = j.id AND j.state = 'pending'";

/* The compact JSON text of rows (new, in *text); consumes rows (NULL: out of memory). */
static int dump(char **text, json_t *rows, struct ty_err *err)
{
	*text = rows ? json_dumps(rows, JSON_COMPACT) : NULL;
	json_decref(rows);
	return *text ? 0 : ty_err_set(err, TY_ENOMEM, NULL);
}

int sched_store_queue_publish(struct ty_pg *pg, const struct sched_store_queue_row *v, int n,
			      struct ty_err *err)
{
	json_t *rows[2] = {json_array(), json_array()}; /* queue rows, estimate-only rows */
	int rc = 0;

	if (!rows[0] || !rows[1]) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		json_t *at = v[i].estimate && v[i].est_ms >= 0 ? json_integer(v[i].est_ms) : json_null(),
		       *basis = v[i].estimate && v[i].basis ? v[i].basis : json_null();
		json_t *row =
		    v[i].estimate_only
			? json_pack("{s:I, s:o, s:O}", "id", (json_int_t)v[i].job, "at", at, "basis",
				    basis)
			: json_pack("{s:I, s:s, s:o, s:o, s:b, s:o, s:O}", "id", (json_int_t)v[i].job,
				    "reason", v[i].reason, "pos",
				    v[i].position > 0 ? json_integer(v[i].position) : json_null(),
				    "resv",
				    v[i].reserved_ms >= 0 ? json_integer(v[i].reserved_ms)
							  : json_null(),
				    "est", v[i].estimate, "at", at, "basis", basis);

		if (json_array_append_new(rows[v[i].estimate_only], row)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	for (int k = 0; k < 2 && !rc; k++) {
		char *text;

		if (json_array_size(rows[k]) == 0)
			continue;
		if (!(text = json_dumps(rows[k], JSON_COMPACT))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		const char *p[] = {text};

		if (k == 0)
			rc = ty_pg_exec(NULL, pg, SQL_QUEUE_PUBLISH, 1, p, err);
		else
			rc = ty_pg_exec(NULL, pg, SQL_ESTIMATES_ONLY, 1, p, err);
		free(text);
	}
out:
	json_decref(rows[0]);
	json_decref(rows[1]);
	return rc;
}

static const char SQL_QUEUE_LEFT[] =
    "WITH l AS (SELECT id FROM jobs"
    "  WHERE id IN (SELECT jsonb_array_elements_text($1::jsonb)::bigint)"
    "  AND state <> 'pending' ORDER BY id FOR UPDATE)"
    " UPDATE jobs j SET pending_reason = NULL, queue_position = NULL,"
    " reserved_until = NULL FROM l WHERE j.id = l.id";

int sched_store_queue_left(struct ty_pg *pg, const int64_t *jobs, int n, struct ty_err *err)
{
	json_t *ids;
	char *text;
	int rc;

	if (n == 0)
		return 0;
	if (!(ids = json_array()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++)
		if (json_array_append_new(ids, json_integer(jobs[i]))) {
			json_decref(ids);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
	if ((rc = dump(&text, ids, err)))
		return rc;
	const char *p[] = {text};

	rc = ty_pg_exec(NULL, pg, SQL_QUEUE_LEFT, 1, p, err);
	free(text);
	return rc;
}

static const char SQL_TEAM_USAGE[] =
    "INSERT INTO team_usage (team_id, decayed_gpu_seconds, fair_share, gpus_in_use,"
    " gpus_borrowed, gpus_lent, pending_jobs, updated_at)"
    " SELECT u.team, u.decayed, u.fs, u.used, u.borrowed, u.lent, u.pending,"
    " to_timestamp($2::bigint / 1000.0)"
    " FROM jsonb_to_recordset($1::jsonb) AS u(team bigint, decayed float8, fs float8,"
    "  used integer, borrowed integer, lent integer, pending integer)"
    " JOIN teams t ON t.id = u.team"
    " ON CONFLICT (team_id) DO UPDATE SET"
    " decayed_gpu_seconds = EXCLUDED.decayed_gpu_seconds,"
    " fair_share = EXCLUDED.fair_share, gpus_in_use = EXCLUDED.gpus_in_use,"
    " gpus_borrowed = EXCLUDED.gpus_borrowed, gpus_lent = EXCLUDED.gpus_lent,"
    " pending_jobs = EXCLUDED.pending_jobs, updated_at = EXCLUDED.updated_at";

int sched_store_team_usage_json(char **text, const struct sched_store_team_usage *v, int n,
				struct ty_err *err)
{
	json_t *rows = json_array();

	for (int i = 0; rows && i < n; i++)
		if (json_array_append_new(
			rows, json_pack("{s:I, s:f, s:f, s:I, s:I, s:I, s:I}", "team",
					(json_int_t)v[i].team, "decayed", v[i].decayed, "fs",
					v[i].fair_share, "used", (json_int_t)v[i].used, "borrowed",
					(json_int_t)v[i].borrowed, "lent", (json_int_t)v[i].lent,
					"pending", (json_int_t)v[i].pending))) {
			json_decref(rows);
			rows = NULL;
		}
	return dump(text, rows, err);
}

int sched_store_team_usage_write(struct ty_pg *pg, const struct sched_store_team_usage *v, int n,
				 int64_t now_ms, struct ty_err *err)
{
	char nb[24], *text;
	int rc;

	if (n == 0)
		return 0;
	if ((rc = sched_store_team_usage_json(&text, v, n, err)))
		return rc;
	const char *p[] = {text, sched_i64(nb, now_ms)};

	rc = ty_pg_exec(NULL, pg, SQL_TEAM_USAGE, 2, p, err);
	free(text);
	return rc;
}
