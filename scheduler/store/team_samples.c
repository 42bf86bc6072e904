/*
 * Teams over time (place.c, migration 0034): one team_samples row per team
 * per sampling, with the preemptions since the previous sample counted
 * from attempts, and the pruning of old rows.
 */
#include "scheduler.h"

#include <stdlib.h>

/*
 * The window is (previous sample, this one]: a preemption's
 * checkpoint_signal_at is its transaction's now(), later than the cycle's
 * clock ($2) when the cycle itself preempted, so that one counts in the
 * next sample. Without a previous sample (the first, or none within the
 * retention) the window is one interval ($3 seconds) long.
 */
static const char SQL_SAMPLES_WRITE[] =
    "WITH w AS (SELECT to_timestamp($2::bigint / 1000.0) AS hi,"
    "  coalesce((SELECT max(at) FROM team_samples),"
    "   to_timestamp($2::bigint / 1000.0) - $3::int * interval '1 second') AS lo),"
    " p AS (SELECT j.team_id AS victim, f.team_id AS causer"
    "  FROM w, attempts t JOIN jobs j ON j.id = t.job_id"
    "  LEFT JOIN jobs f ON f.id = t.preempted_for"
    "  WHERE t.checkpoint_signal_at > w.lo AND t.checkpoint_signal_at <= w.hi)"
    " INSERT INTO team_samples (team_id, at, gpus_in_use, gpus_borrowed, gpus_lent,"
    " decayed_gpu_seconds, fair_share, pending_jobs, preemptions_suffered,"
    " preemptions_caused)"
    " SELECT u.team, w.hi, u.used, u.borrowed, u.lent, u.decayed, u.fs, u.pending,"
    " (SELECT count(*) FROM p WHERE p.victim = u.team),"
    " (SELECT count(*) FROM p WHERE p.causer = u.team)"
    " FROM w, jsonb_to_recordset($1::jsonb) AS u(team bigint, decayed float8, fs float8,"
    "  used integer, borrowed integer, lent integer, pending integer)"
    " JOIN teams t ON t.id = u.team"
    " WHERE w.hi > w.lo";

int sched_store_team_samples_write(struct ty_pg *pg, const struct sched_store_team_usage *v, int n,
				   int64_t now_ms, int interval_s, struct ty_err *err)
{
	char nb[24], ib[24], *text;
	int rc;

	if (n == 0)
		return 0;
	if ((rc = sched_store_team_usage_json(&text, v, n, err)))
		return rc;
	const char *p[] = {text, sched_i64(nb, now_ms), sched_i64(ib, interval_s)};

	rc = ty_pg_exec(NULL, pg, SQL_SAMPLES_WRITE, 3, p, err);
	free(text);
	return rc;
}

static const char SQL_SAMPLES_PRUNE[] =
    "DELETE FROM team_samples WHERE at < to_timestamp($1::bigint / 1000.0)"
    " - $2::int * interval '1 day'";

int sched_store_team_samples_prune(int64_t *deleted, struct ty_pg *pg, int64_t now_ms,
				   int retention_days, struct ty_err *err)
{
	char nb[24], db[24];
	const char *p[] = {sched_i64(nb, now_ms), sched_i64(db, retention_days)};
	PGresult *res = NULL;
	int rc;

	*deleted = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_SAMPLES_PRUNE, 2, p, err)))
		return rc;
	*deleted = strtoll(PQcmdTuples(res), NULL, 10);
	PQclear(res);
	return 0;
}
