/*
 * The job and attempt lifecycle: every statement that writes jobs.state or
 * attempts.state, one typed function per transition. Each is guarded by the
 * state it leaves, so a repeated or late step changes nothing.
 *
 * table     from -> to                             trigger -> function
 * --------  -------------------------------------  -----------------------------------------------
 * jobs      pending -> scheduled                   the cycle places it (place.c)
 *                                                    -> sched_store_jobs_scheduled
 * jobs      pending -> stopped | cancelled         cancel (stop) requested (place.c)
 *                                                    -> sched_store_job_cancel_pending
 * attempts  scheduled|starting|running -> stopping cancel (stop) requested (place.c)
 *                                                    -> sched_store_attempt_stopping
 * attempts  scheduled|starting|running -> stopping a preemption or a spot notice (preempt.c)
 *           (failure_class preempted, kill_at)       -> sched_store_attempt_preempt
 * jobs      scheduled|starting|running ->          the same, once its attempt is stopping
 *           preempting                               -> sched_store_job_preempting
 * attempts  stopping, kill_at passed (stays;       the kill timer (sched_preempt_kills)
 *           its nodes get a kill)                    -> sched_store_kills_due, _kill_due_lock
 * attempts  stopping (preempted) -> failed         every node reported or was lost (preempt.c)
 *                                                    -> sched_store_attempt_preempt_failed
 * jobs      preempting -> stopped | cancelled      the same, a cancel requested meanwhile
 *                                                    -> sched_store_job_preempt_cancelled
 * jobs      preempting -> pending (preemptions+1)  the same, otherwise
 *                                                    -> sched_store_job_requeued
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* ---- from the scheduler's decisions ---- */

static const char SQL_JOBS_SCHEDULED[] =
    "UPDATE jobs SET state = 'scheduled', attempt = u.attempt, pending_reason = NULL,"
    " queue_position = NULL, reserved_until = NULL"
    " FROM unnest($1::bigint[], $2::integer[]) AS u(id, attempt) WHERE jobs.id = u.id";

int sched_store_jobs_scheduled(struct ty_pg *pg, const int64_t *jobs, const int64_t *attempts,
			       int n, struct ty_err *err)
{
	struct ty_buf b[2] = {0};
	char buf[24];
	int rc = 0;

	if (n == 0)
		return 0;
	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_add(&b[0], sched_i64(buf, jobs[i])) ||
			     sched_store__arr_add(&b[1], sched_i64(buf, attempts[i]))
			 ? TY_ENOMEM
			 : 0;
	if (rc || sched_store__arr_end(&b[0]) || sched_store__arr_end(&b[1])) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	} else {
		const char *p[] = {b[0].data, b[1].data};

		rc = ty_pg_exec(NULL, pg, SQL_JOBS_SCHEDULED, 2, p, err);
	}
	ty_buf_free(&b[0]);
	ty_buf_free(&b[1]);
	return rc;
}

/* "stopped" or "cancelled", as the statement returned it (a static string). */
static const char *end_state(const PGresult *res)
{
	return !strcmp(PQgetvalue(res, 0, 0), "stopped") ? "stopped" : "cancelled";
}

static const char SQL_JOB_CANCEL_PENDING[] =
    "UPDATE jobs SET finished_at = now(),"
    " state = CASE WHEN stop_requested THEN 'stopped' ELSE 'cancelled' END,"
    " pending_reason = NULL, queue_position = NULL, reserved_until = NULL"
    " WHERE id = $1 AND state = 'pending' RETURNING state";

int sched_store_job_cancel_pending(const char **to, struct ty_pg *pg, int64_t job,
				   struct ty_err *err)
{
	char jb[24];
	const char *p[] = {sched_i64(jb, job)};
	PGresult *res = NULL;
	int rc;

	*to = NULL;
	if ((rc = ty_pg_exec(&res, pg, SQL_JOB_CANCEL_PENDING, 1, p, err)))
		return rc;
	if (PQntuples(res) > 0)
		*to = end_state(res);
	PQclear(res);
	return 0;
}

static const char SQL_ATTEMPT_STOPPING[] =
    "UPDATE attempts SET state = 'stopping' WHERE job_id = $1 AND attempt = $2"
    " AND state IN ('scheduled', 'starting', 'running') RETURNING 1";

int sched_store_attempt_stopping(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
				 struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_STOPPING, 2, p, err)))
		return rc;
	*moved = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

/* the spec's defaults are filled by the API; these only guard old rows */
#define DEFAULT_SIGNAL "SIGUSR1"
#define DEFAULT_GRACE_S "120"

static const char SQL_ATTEMPT_PREEMPT[] =
    "WITH c AS (SELECT"
    "  coalesce(j.spec->'checkpoint'->>'signal', '" DEFAULT_SIGNAL "') AS signal,"
    "  greatest(coalesce((j.spec->'checkpoint'->>'grace_seconds')::integer,"
    "   " DEFAULT_GRACE_S "), 0) AS grace"
    "  FROM jobs j WHERE j.id = $1 AND j.attempt = $2"
    "  AND NOT j.cancel_requested"
    "  AND j.state IN ('scheduled', 'starting', 'running') FOR UPDATE)"
    " UPDATE attempts t SET state = 'stopping', failure_class = 'preempted',"
    " message = $4, preempted_for = $3, spot_node = $5,"
    /* a spot notice's deadline (less the margin) cuts the grace short */
    " kill_at = greatest(now(), least(now() + c.grace * interval '1 second',"
    "  coalesce(to_timestamp($6::bigint / 1000.0)"
    "   - $7::int * interval '1 second', 'infinity')))"
    " FROM c WHERE t.job_id = $1 AND t.attempt = $2"
    " AND t.state IN ('scheduled', 'starting', 'running')"
    " RETURNING c.signal,"
    " ceil(extract(epoch FROM t.kill_at - now()))::integer";

int sched_store_attempt_preempt(struct sched_store_preempt *out, bool *moved, struct ty_pg *pg,
				const struct sched_store_preempt_req *r, struct ty_err *err)
{
	char jb[24], ab[24], fb[24], db[24], mb[24];
	const char *p[] = {sched_i64(jb, r->job),
			   sched_i64(ab, r->attempt),
			   r->for_job ? sched_i64(fb, r->for_job) : NULL,
			   r->why,
			   r->spot_node,
			   r->deadline_ms ? sched_i64(db, r->deadline_ms) : NULL,
			   sched_i64(mb, r->margin_s)};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_PREEMPT, 7, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		if (!(out->signal = strdup(PQgetvalue(res, 0, 0)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		out->grace_s = (int)sched_col_i64(res, 0, 1);
		*moved = true;
	}
out:
	PQclear(res);
	return rc;
}

static const char SQL_JOB_PREEMPTING[] = "UPDATE jobs SET state = 'preempting' WHERE id = $1";

int sched_store_job_preempting(struct ty_pg *pg, int64_t job, struct ty_err *err)
{
	char jb[24];
	const char *p[] = {sched_i64(jb, job)};

	return ty_pg_exec(NULL, pg, SQL_JOB_PREEMPTING, 1, p, err);
}

/* cheap when nothing is due: attempts_kill_due holds only stopping attempts */
static const char SQL_KILLS_DUE[] =
    "SELECT t.job_id, t.attempt FROM attempts t"
    " WHERE t.state = 'stopping' AND t.kill_at IS NOT NULL"
    " AND t.kill_at <= now() AND EXISTS (SELECT 1 FROM allocations a"
    "  WHERE a.job_id = t.job_id AND a.attempt = t.attempt"
    "  AND a.exited_at IS NULL AND a.killed_at IS NULL)"
    " ORDER BY t.kill_at";

int sched_store_kills_due(struct sched_store_ja **out, int *nout, struct ty_pg *pg,
			  struct ty_err *err)
{
	struct sched_store_ja *v = NULL;
	PGresult *res = NULL;
	int rc, rows;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_KILLS_DUE, 0, NULL, err)))
		return rc;
	rows = PQntuples(res);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++) {
		v[i].job = sched_col_i64(res, i, 0);
		v[i].attempt = sched_col_i64(res, i, 1);
	}
	*out = v;
	*nout = rows;
out:
	PQclear(res);
	return rc;
}

/* still due now that the row is locked (a node may have reported meanwhile) */
static const char SQL_KILL_DUE_LOCK[] = "SELECT 1 FROM attempts WHERE job_id = $1 AND attempt = $2"
					" AND state = 'stopping' AND kill_at <= now() FOR UPDATE";

int sched_store_kill_due_lock(bool *due, struct ty_pg *pg, int64_t job, int64_t attempt,
			      struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	*due = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_KILL_DUE_LOCK, 2, p, err)))
		return rc;
	*due = PQntuples(res) == 1;
	PQclear(res);
	return 0;
}

static const char SQL_ATTEMPT_PREEMPT_FAILED[] =
    "UPDATE attempts SET state = 'failed', ended_at = now()"
    " WHERE job_id = $1 AND attempt = $2 AND state = 'stopping'"
    " AND failure_class = 'preempted' RETURNING preempted_for, spot_node";

int sched_store_attempt_preempt_failed(struct sched_store_preempted *out, bool *moved,
				       struct ty_pg *pg, int64_t job, int64_t attempt,
				       struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_PREEMPT_FAILED, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		out->for_job = ty_pg_val(res, 0, 0) ? sched_col_i64(res, 0, 0) : 0;
		if (ty_pg_val(res, 0, 1) && !(out->spot_node = strdup(PQgetvalue(res, 0, 1)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		*moved = true;
	}
out:
	PQclear(res);
	return rc;
}

/* a cancel requested while it was being preempted wins */
static const char SQL_JOB_PREEMPT_CANCELLED[] =
    "UPDATE jobs SET finished_at = now(),"
    " state = CASE WHEN stop_requested THEN 'stopped' ELSE 'cancelled' END,"
    " failure_class = 'preempted' WHERE id = $1 AND attempt = $2"
    " AND state = 'preempting' AND cancel_requested RETURNING state";

int sched_store_job_preempt_cancelled(const char **to, struct ty_pg *pg, int64_t job,
				      int64_t attempt, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	*to = NULL;
	if ((rc = ty_pg_exec(&res, pg, SQL_JOB_PREEMPT_CANCELLED, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1)
		*to = end_state(res);
	PQclear(res);
	return 0;
}

/* back in the queue at its old place (ordered by submit time); no retry is spent */
static const char SQL_JOB_REQUEUED[] =
    "UPDATE jobs SET state = 'pending', failure_class = 'preempted',"
    " preemptions = preemptions + 1,"
    " spot_preemptions = spot_preemptions + $3::integer,"
    " pending_reason = NULL, queue_position = NULL, reserved_until = NULL"
    " WHERE id = $1 AND attempt = $2 AND state = 'preempting'"
    " RETURNING preemptions, spot_preemptions";

int sched_store_job_requeued(bool *moved, int64_t *preemptions, int64_t *spot_preemptions,
			     struct ty_pg *pg, int64_t job, int64_t attempt, bool spot,
			     struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), spot ? "1" : "0"};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	*preemptions = *spot_preemptions = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_JOB_REQUEUED, 3, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		*moved = true;
		*preemptions = sched_col_i64(res, 0, 0);
		*spot_preemptions = sched_col_i64(res, 0, 1);
	}
	PQclear(res);
	return 0;
}
