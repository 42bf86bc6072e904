/*
 * The job and attempt lifecycle: every statement that writes jobs.state or
 * attempts.state, one function per transition (sched_store_...). The API's
 * one transition, a pending job cancelled or stopped at once, is
 * api/store_jobs.c's (tests/lint/store_layers.py checks both homes).
 *
 *  row      from                   to          trigger                        function
 *  From the scheduler's decisions (place.c, preempt.c):
 *  job      pending                scheduled   the cycle places it            jobs_scheduled
 *  job      pending                cancelled,  a cancel (stop) requested      job_cancel_pending
 *                                  stopped
 *  attempt  active                 stopping    a cancel (stop) requested      attempt_stopping
 *  attempt  active                 stopping    a preemption or spot notice    attempt_preempt
 *                                   (b)         (failure_class preempted, kill_at)
 *  job      active                 preempting  its attempt is stopping (b)    job_preempting
 *  attempt  stopping (b), kill_at  (stays)     the kill timer: its nodes      kills_due,
 *           passed                              get a kill                     kill_due_lock
 *  attempt  stopping (b)           failed      every node reported or lost    attempt_preempt_failed
 *  job      preempting             cancelled,  the same, a cancel requested   job_preempt_cancelled
 *                                  stopped
 *  job      preempting             pending     the same, otherwise            job_preempt_requeued
 *                                               (preemptions + 1)
 *  From executors' reports (apply.c):
 *  attempt, scheduled              starting    a node's first rank started    attempt_starting,
 *   its job                                                                   attempts_starting
 *  attempt, scheduled, starting    running     every node's attempt_running   attempts_running
 *   its job
 *  attempt  active, stopping (a)   succeeded   every node exited 0            attempt_succeeded,
 *                                                                             attempts_succeeded
 *  job      live                   succeeded   its attempt succeeded          job_succeeded,
 *                                                                             attempts_succeeded
 *  attempt  active, stopping (b)   failed      a node's failure, a node gone  attempt_failed
 *  job      live                   failed      its attempt failed, no retry   job_failed
 *  job      live                   pending     its attempt failed, retried    job_requeued
 *  attempt  stopping               cancelled   every node stopped             attempt_cancelled
 *  job      live                   cancelled,  its attempt ended, a cancel    job_cancelled
 *                                  stopped     or a stop requested
 *
 * active: scheduled, starting, running; live: active or preempting (the
 * job's states while an attempt of it holds nodes); (a) not being
 * preempted; (b) stopping, being preempted. An attempt is born scheduled
 * (store/placements.c inserts it with its job's move here). A job moves
 * only while the attempt named is its current one; every transition is
 * guarded by the state it leaves (or judged by the caller in the
 * transaction), so applying anything twice changes nothing.
 */
#include "job_spec.h"
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* ---- from executors' reports ---- */

/* A job's states while an attempt of it holds nodes: active, or being preempted. */
#define LIVE "{scheduled,starting,running,preempting}"

static const char SQL_JOB_MOVE[] =
    "UPDATE jobs SET state = $4,"
    " finished_at = CASE WHEN $5::boolean THEN now() ELSE finished_at END,"
    " failure_class = coalesce($6, failure_class)"
    " WHERE id = $1 AND attempt = $2 AND state = ANY ($3::text[]) RETURNING 1";

/* Move the job from a live state to `to` while its current attempt is `attempt`. */
static int job_move(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt, const char *to,
		    bool finish, const char *cls, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {
	    sched_i64(jb, job), sched_i64(ab, attempt), LIVE, to, finish ? "t" : "f", cls};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	rc = ty_pg_exec(&res, pg, SQL_JOB_MOVE, 6, p, err);
	if (!rc)
		*moved = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

int sched_store_job_succeeded(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			      struct ty_err *err)
{
	return job_move(moved, pg, job, attempt, "succeeded", true, NULL, err);
}

int sched_store_job_failed(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			   const char *cls, struct ty_err *err)
{
	return job_move(moved, pg, job, attempt, "failed", true, cls, err);
}

int sched_store_job_requeued(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			     const char *cls, struct ty_err *err)
{
	return job_move(moved, pg, job, attempt, "pending", false, cls, err);
}

int sched_store_job_cancelled(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			      bool stopped, const char *cls, struct ty_err *err)
{
	return job_move(moved, pg, job, attempt, stopped ? "stopped" : "cancelled", true, cls, err);
}

static const char SQL_ATTEMPT_FAILED[] =
    "UPDATE attempts SET state = 'failed', ended_at = now(),"
    " exit_code = $3, failure_class = $4, message = $5,"
    " evidence = $6, blamed_node = $7"
    " WHERE job_id = $1 AND attempt = $2 AND (state = ANY ('{scheduled,starting,running}')"
    " OR " SCHED_STORE_PREEMPTING ") RETURNING 1";

int sched_store_attempt_failed(bool *moved, struct ty_pg *pg, const struct sched_store_failure *f,
			       struct ty_err *err)
{
	char jb[24], ab[24], eb[24];
	const char *p[] = {sched_i64(jb, f->job),
			   sched_i64(ab, f->attempt),
			   f->exit_code ? sched_i64(eb, *f->exit_code) : NULL,
			   f->cls,
			   f->message,
			   f->evidence,
			   f->blamed};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_FAILED, 7, p, err);
	if (!rc)
		*moved = PQntuples(res) > 0;
	PQclear(res);
	return rc;
}

static const char SQL_ATTEMPT_SUCCEEDED[] =
    "UPDATE attempts SET state = 'succeeded', ended_at = now(),"
    " exit_code = 0, failure_class = NULL, message = CASE"
    "  WHEN state = 'stopping' THEN '" SCHED_FINISHED_FIRST "' END"
    " WHERE job_id = $1 AND attempt = $2";

int sched_store_attempt_succeeded(struct ty_pg *pg, int64_t job, int64_t attempt,
				  struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};

	return ty_pg_exec(NULL, pg, SQL_ATTEMPT_SUCCEEDED, 2, p, err);
}

static const char SQL_ATTEMPT_CANCELLED[] =
    "UPDATE attempts SET state = 'cancelled', ended_at = now(),"
    " failure_class = 'cancelled', message = 'cancelled as requested'"
    " WHERE job_id = $1 AND attempt = $2";

int sched_store_attempt_cancelled(struct ty_pg *pg, int64_t job, int64_t attempt,
				  struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};

	return ty_pg_exec(NULL, pg, SQL_ATTEMPT_CANCELLED, 2, p, err);
}

/*
 * One statement per rank (the executor sends one per rank, so this is the
 * hottest event): the rank row if the node has a part in the attempt, and
 * on the attempt's first rank the attempt and the job to `starting`.
 */
static const char SQL_ATTEMPT_STARTING[] =
    "WITH a AS (SELECT 1 FROM allocations WHERE job_id = $1 AND attempt = $2"
    "  AND node_id = $4),"
    /* a started rank acknowledges the launch (an executor without launch_accepted) */
    " ack AS (UPDATE allocations SET accepted_at = now() WHERE job_id = $1"
    "  AND attempt = $2 AND node_id = $4 AND accepted_at IS NULL),"
    " r AS (INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank, pid)"
    "  SELECT $1, $2, $3, $4, $5, $6 FROM a"
    "  ON CONFLICT (job_id, attempt, rank)"
    "  DO UPDATE SET pid = coalesce(ranks.pid, EXCLUDED.pid) RETURNING 1),"
    " t AS (UPDATE attempts SET state = 'starting' WHERE job_id = $1 AND attempt = $2"
    "  AND state = 'scheduled' AND EXISTS (SELECT 1 FROM a) RETURNING 1),"
    " j AS (UPDATE jobs SET state = 'starting' WHERE id = $1 AND attempt = $2"
    "  AND state = 'scheduled' AND EXISTS (SELECT 1 FROM t) RETURNING 1)"
    " SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM r), (SELECT count(*) FROM j)";

int sched_store_attempt_starting(bool *mine, bool *moved, struct ty_pg *pg,
				 const struct sched_store_rank *r, struct ty_err *err)
{
	char jb[24], ab[24], rb[24], lb[24], pb[24];
	const char *p[] = {sched_i64(jb, r->job),	 sched_i64(ab, r->attempt),
			   sched_i64(rb, r->rank),	 r->node,
			   sched_i64(lb, r->local_rank), sched_i64(pb, r->pid)};
	PGresult *res = NULL;
	int rc;

	*mine = *moved = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_STARTING, 6, p, err)))
		return rc;
	*mine = sched_col_i64(res, 0, 0) > 0;
	*moved = sched_col_i64(res, 0, 2) > 0;
	PQclear(res);
	return 0;
}

/*
 * The batch's started ranks ($1: [{job, attempt, rank, node, a: local_rank,
 * b: pid, ord}]), the first report of each rank winning; on an attempt's
 * first rank, the attempt and its job move to starting. Rows back: each job
 * moved, its attempt, and the ord of its first started rank in the batch.
 */
static const char SQL_ATTEMPTS_STARTING[] =
    "WITH m AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS m(job bigint,"
    "  attempt integer, rank bigint, node text, a bigint, b bigint, ord integer)),"
    " k AS (SELECT m.* FROM m JOIN allocations a ON a.job_id = m.job"
    "  AND a.attempt = m.attempt AND a.node_id = m.node),"
    /* a started rank acknowledges the launch (sched_apply_acks) */
    " ack AS (UPDATE allocations a SET accepted_at = now()"
    "  FROM (SELECT DISTINCT job, attempt, node FROM m) x WHERE a.job_id = x.job"
    "  AND a.attempt = x.attempt AND a.node_id = x.node AND a.accepted_at IS NULL),"
    " r AS (INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank, pid)"
    "  SELECT DISTINCT ON (job, attempt, rank) job, attempt, rank, node, a, b FROM k"
    "  ORDER BY job, attempt, rank, ord"
    "  ON CONFLICT (job_id, attempt, rank)"
    "  DO UPDATE SET pid = coalesce(ranks.pid, EXCLUDED.pid) RETURNING 1),"
    " t AS (UPDATE attempts SET state = 'starting'"
    "  FROM (SELECT DISTINCT job, attempt FROM k) x WHERE attempts.job_id = x.job"
    "  AND attempts.attempt = x.attempt AND attempts.state = 'scheduled'"
    "  RETURNING attempts.job_id, attempts.attempt),"
    " j AS (UPDATE jobs SET state = 'starting' FROM t WHERE jobs.id = t.job_id"
    "  AND jobs.attempt = t.attempt AND jobs.state = 'scheduled'"
    "  RETURNING jobs.id, t.attempt)"
    " SELECT j.id, j.attempt, f.ord FROM j, LATERAL (SELECT ord"
    "  FROM k WHERE k.job = j.id AND k.attempt = j.attempt ORDER BY ord LIMIT 1) f"
    " ORDER BY j.id";

int sched_store_attempts_starting(struct sched_store_moved **out, int *nout, struct ty_pg *pg,
				  const struct sched_store_rank *v, int n, struct ty_err *err)
{
	struct sched_store_moved *o = NULL;
	PGresult *res = NULL;
	char *text = NULL;
	int rc = 0, no;

	*out = NULL;
	*nout = 0;
	if ((rc = sched_store__ranks_json(&text, v, n, true, err)))
		return rc;
	const char *p[] = {text};

	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPTS_STARTING, 1, p, err)))
		goto out;
	if ((no = PQntuples(res)) == 0)
		goto out;
	if (!(o = calloc((size_t)no, sizeof(*o)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int r = 0; r < no; r++)
		o[r] = (struct sched_store_moved){.job = sched_col_i64(res, r, 0),
						  .attempt = sched_col_i64(res, r, 1),
						  .first = (int)sched_col_i64(res, r, 2)};
	*out = o;
	*nout = no;
out:
	PQclear(res);
	free(text);
	return rc;
}

/*
 * One statement for the batch: each node's part running (its first
 * report), where the attempt resumed from (the first node's resume of
 * those that counted, kept once), and the attempts whose every node now
 * runs, with their jobs, to running. The CTEs see the rows as they were
 * before the statement: the parts just marked are subtracted by hand.
 */
static const char SQL_ATTEMPTS_RUNNING[] =
    "WITH m AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS m(job bigint,"
    "  attempt integer, node text, ord integer, res boolean, path text, step bigint,"
    "  skipped jsonb)),"
    " x AS (SELECT DISTINCT ON (job, attempt, node) * FROM m"
    "  ORDER BY job, attempt, node, ord),"
    " u AS (UPDATE allocations a SET running_at = now(),"
    "  accepted_at = coalesce(a.accepted_at, now()) FROM x WHERE a.job_id = x.job"
    "  AND a.attempt = x.attempt AND a.node_id = x.node AND a.running_at IS NULL"
    "  AND a.exited_at IS NULL"
    "  RETURNING a.job_id, a.attempt, a.node_id, x.ord, x.res, x.path, x.step, x.skipped),"
    " r AS (SELECT DISTINCT ON (job_id, attempt) * FROM u WHERE res"
    "  ORDER BY job_id, attempt, ord),"
    " g AS (SELECT t.job_id, t.attempt, t.world_size, t.resume_skipped IS NULL AS fresh,"
    "  k.nodes, k.waiting = 0 AS ready,"
    "  k.waiting = 0 AND t.state IN ('scheduled', 'starting') AS go"
    "  FROM attempts t, LATERAL (SELECT count(*) AS nodes, count(*) FILTER (WHERE"
    "   a.running_at IS NULL AND NOT EXISTS (SELECT 1 FROM u WHERE u.job_id = a.job_id"
    "   AND u.attempt = a.attempt AND u.node_id = a.node_id)) AS waiting"
    "   FROM allocations a WHERE a.job_id = t.job_id AND a.attempt = t.attempt) k"
    "  WHERE (t.job_id, t.attempt) IN (SELECT job_id, attempt FROM u)),"
    " t AS (UPDATE attempts t SET"
    "  resume_from = CASE WHEN g.fresh AND r.res THEN r.path ELSE t.resume_from END,"
    "  resume_step = CASE WHEN g.fresh AND r.res THEN r.step ELSE t.resume_step END,"
    "  resume_skipped = CASE WHEN g.fresh AND r.res THEN r.skipped"
    "   ELSE t.resume_skipped END,"
    "  state = CASE WHEN g.go THEN 'running' ELSE t.state END,"
    "  running_at = CASE WHEN g.go THEN now() ELSE t.running_at END"
    "  FROM g LEFT JOIN r ON r.job_id = g.job_id AND r.attempt = g.attempt"
    "  WHERE t.job_id = g.job_id AND t.attempt = g.attempt"
    "  AND (g.go OR (g.fresh AND r.res))"
    "  RETURNING t.job_id, t.attempt, g.go, t.resume_skipped IS NOT NULL AS resumed,"
    "  t.resume_from, t.resume_step,"
    "  jsonb_array_length(coalesce(t.resume_skipped, '[]')) AS nskipped),"
    /* the job follows its attempt's nodes, whatever the attempt's own state */
    " j AS (UPDATE jobs SET state = 'running' FROM g WHERE g.ready"
    "  AND jobs.id = g.job_id AND jobs.attempt = g.attempt"
    "  AND jobs.state IN ('scheduled', 'starting')"
    "  RETURNING jobs.id, g.attempt, g.nodes, g.world_size)"
    " SELECT j.id, j.attempt, coalesce(t.resumed, false), t.resume_from, t.resume_step,"
    "  t.nskipped, j.nodes, j.world_size FROM j LEFT JOIN t ON t.job_id = j.id"
    "  AND t.attempt = j.attempt AND t.go ORDER BY j.id";

void sched_store_runs_free(struct sched_store_run *v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i].resume_from);
	free(v);
}

int sched_store_attempts_running(struct sched_store_run **out, int *nout, struct ty_pg *pg,
				 const struct sched_store_running *v, int n, struct ty_err *err)
{
	json_t *recs = json_array();
	struct sched_store_run *o = NULL;
	PGresult *res = NULL;
	char *text = NULL;
	int rc = 0, no = 0;

	*out = NULL;
	*nout = 0;
	if (!recs)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		json_t *rec =
		    json_pack("{s:I, s:I, s:s, s:i, s:b, s:s?, s:o, s:O?}", "job",
			      (json_int_t)v[i].job, "attempt", (json_int_t)v[i].attempt, "node",
			      v[i].node, "ord", i, "res", v[i].skipped != NULL, "path", v[i].path,
			      "step", v[i].step >= 0 ? json_integer(v[i].step) : json_null(),
			      "skipped", v[i].skipped);

		if (!rec || json_array_append_new(recs, rec)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if (!(text = json_dumps(recs, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {text};

	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPTS_RUNNING, 1, p, err)))
		goto out;
	if (PQntuples(res) == 0)
		goto out;
	if (!(o = calloc((size_t)PQntuples(res), sizeof(*o)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int r = 0; r < PQntuples(res); r++, no++) {
		o[r] = (struct sched_store_run){
		    .job = sched_col_i64(res, r, 0),
		    .attempt = sched_col_i64(res, r, 1),
		    .resumed = !strcmp(PQgetvalue(res, r, 2), "t"),
		    .resume_step = sched_col_i64(res, r, 4),
		    .nskipped = sched_col_i64(res, r, 5),
		    .nodes = sched_col_i64(res, r, 6),
		    .world_size = sched_col_i64(res, r, 7),
		};
		if (ty_pg_val(res, r, 3) && !(o[r].resume_from = strdup(ty_pg_val(res, r, 3)))) {
			no++;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = o;
	*nout = no;
	o = NULL;
out:
	sched_store_runs_free(o, no);
	PQclear(res);
	json_decref(recs);
	free(text);
	return rc;
}

/*
 * Of the attempts given, those whose every node has now exited 0 and that
 * are still plain: to succeeded (a stopping one "finished before it was
 * stopped"), their jobs too while the attempt is the job's current one and
 * the job holds nodes. Rows back: job, attempt, nodes, whether it was
 * stopping, whether the job moved.
 */
static const char SQL_ATTEMPTS_SUCCEEDED[] =
    "WITH k AS (SELECT DISTINCT * FROM unnest($1::bigint[], $2::integer[]) AS k(job, attempt)),"
    " g AS (SELECT t.job_id, t.attempt, t.state = 'stopping' AS stopping, c.total"
    "  FROM attempts t JOIN k ON t.job_id = k.job AND t.attempt = k.attempt,"
    "  LATERAL (SELECT count(*) AS total, count(*) FILTER (WHERE a.exited_at IS NULL) AS live,"
    "   count(*) FILTER (WHERE a.exit_code IS DISTINCT FROM 0"
    "   OR a.failure_class IS NOT NULL) AS bad"
    "   FROM allocations a WHERE a.job_id = t.job_id AND a.attempt = t.attempt) c"
    "  WHERE c.live = 0 AND c.bad = 0 AND " SCHED_STORE_PLAIN_STATE "),"
    " t AS (UPDATE attempts t SET state = 'succeeded', ended_at = now(), exit_code = 0,"
    "  failure_class = NULL, message = CASE WHEN g.stopping THEN '" SCHED_FINISHED_FIRST "' END"
    "  FROM g WHERE t.job_id = g.job_id AND t.attempt = g.attempt RETURNING t.job_id),"
    " j AS (UPDATE jobs SET state = 'succeeded', finished_at = now() FROM g"
    "  WHERE jobs.id = g.job_id AND jobs.attempt = g.attempt"
    "  AND jobs.state IN ('scheduled', 'starting', 'running', 'preempting') RETURNING jobs.id)"
    " SELECT g.job_id, g.attempt, g.total, g.stopping, g.job_id IN (SELECT id FROM j)"
    " FROM g ORDER BY g.job_id, g.attempt";

int sched_store_attempts_succeeded(struct sched_store_ended **out, int *nout, struct ty_pg *pg,
				   const struct sched_store_exit *v, int n, struct ty_err *err)
{
	struct ty_buf b[2] = {0};
	struct sched_store_ended *e = NULL;
	PGresult *res = NULL;
	int rc = 0, ne;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < n && !rc; i++)
		if (sched_store__arr_i64(&b[0], v[i].job) ||
		    sched_store__arr_i64(&b[1], v[i].attempt))
			rc = TY_ENOMEM;
	for (int i = 0; i < 2 && !rc; i++)
		rc = sched_store__arr_end(&b[i]);
	if (rc) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {b[0].data, b[1].data};

	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPTS_SUCCEEDED, 2, p, err)))
		goto out;
	if ((ne = PQntuples(res)) == 0)
		goto out;
	if (!(e = calloc((size_t)ne, sizeof(*e)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int r = 0; r < ne; r++)
		e[r] = (struct sched_store_ended){
		    .job = sched_col_i64(res, r, 0),
		    .attempt = sched_col_i64(res, r, 1),
		    .nodes = sched_col_i64(res, r, 2),
		    .stopping = !strcmp(PQgetvalue(res, r, 3), "t"),
		    .moved = !strcmp(PQgetvalue(res, r, 4), "t"),
		};
	*out = e;
	*nout = ne;
out:
	PQclear(res);
	for (int i = 0; i < 2; i++)
		ty_buf_free(&b[i]);
	return rc;
}


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

static const char SQL_ATTEMPT_PREEMPT[] =
    "WITH c AS (SELECT"
    /* the API fills the spec's defaults; $8, $9 (proto/job_spec.c) only guard old rows */
    "  coalesce(j.spec->'checkpoint'->>'signal', $8) AS signal,"
    "  greatest(coalesce($10::integer,"
    "   (j.spec->'checkpoint'->>'grace_seconds')::integer, $9::integer), 0) AS grace"
    "  FROM jobs j WHERE j.id = $1 AND j.attempt = $2"
    "  AND NOT j.cancel_requested"
    "  AND j.state IN ('scheduled', 'starting', 'running') FOR UPDATE)"
    " UPDATE attempts t SET state = 'stopping', failure_class = 'preempted',"
    " message = $4, preempted_for = $3, spot_node = $5, checkpoint_signal_at = now(),"
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
	char jb[24], ab[24], fb[24], db[24], mb[24], gb[24], rb[24];
	const char *p[] = {sched_i64(jb, r->job),
			   sched_i64(ab, r->attempt),
			   r->for_job ? sched_i64(fb, r->for_job) : NULL,
			   r->why,
			   r->spot_node,
			   r->deadline_ms ? sched_i64(db, r->deadline_ms) : NULL,
			   sched_i64(mb, r->margin_s),
			   proto_spec_default_str("checkpoint", "signal"),
			   sched_i64(gb, proto_spec_default_int("checkpoint", "grace_seconds")),
			   r->grace_s >= 0 ? sched_i64(rb, r->grace_s) : NULL};
	PGresult *res = NULL;
	int rc;

	*moved = false;
	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_ATTEMPT_PREEMPT, 10, p, err)))
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

int sched_store_job_preempt_requeued(bool *moved, int64_t *preemptions, int64_t *spot_preemptions,
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
