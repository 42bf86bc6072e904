/*
 * The preemption protocol (docs/dispatch.md, "Preemption"): a victim's
 * attempt gets the job's checkpoint signal on every node, a `kill` (reason
 * preempted) once the checkpoint grace period is over, and when every node
 * has reported (or was lost) the job goes back to pending without spending
 * its retry budget. Every step is guarded by the attempt's state, so a
 * repeated or late step changes nothing.
 */
#include "scheduler.h"
#include "ty_log.h"

#include <stdio.h>
#include <string.h>

#define DEFAULT_SIGNAL "SIGUSR1"
#define DEFAULT_GRACE_S "120"

/*
 * Start the protocol for one attempt: for_job (0: none) is the job it makes
 * room for, spot_node (NULL: none) the node whose spot notice caused it;
 * deadline_ms (0: none) bounds kill_at to the deadline minus the margin.
 */
static int start(bool *started, struct sched *s, int64_t job, int64_t attempt, int64_t for_job,
		 const char *spot_node, int64_t deadline_ms, const char *why, struct ty_err *err)
{
	char jb[24], ab[24], fb[24], db[24], mb[24], text[512];
	PGresult *res = NULL, *nodes = NULL;
	json_t *data = NULL, *edata = NULL;
	const char *signal;
	int rc, grace;

	*started = false;
	{
		const char *p[] = {sched_i64(jb, job),
				   sched_i64(ab, attempt),
				   for_job ? sched_i64(fb, for_job) : NULL,
				   why,
				   spot_node,
				   deadline_ms ? sched_i64(db, deadline_ms) : NULL,
				   /* SIGKILL (kill grace after the kill) lands by deadline - margin */
				   sched_i64(mb, s->o.spot_kill_margin_s + s->o.kill_grace_seconds)};

		/* the spec's defaults are filled by the API; these only guard old rows */
		if ((rc = ty_pg_exec(
			 &res, s->pg,
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
			 " ceil(extract(epoch FROM t.kill_at - now()))::integer",
			 7, p, err)))
			goto out;
	}
	if (PQntuples(res) != 1)
		goto out; /* over, or being stopped for another reason: nothing to do */
	signal = PQgetvalue(res, 0, 0);
	grace = (int)sched_col_i64(res, 0, 1);
	{
		const char *p[] = {sched_i64(jb, job)};

		if ((rc = ty_pg_exec(NULL, s->pg,
				     "UPDATE jobs SET state = 'preempting' WHERE id = $1", 1, p,
				     err)))
			goto out;
	}
	/* the checkpoint signal to every node still running its part */
	{
		const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};

		if ((rc = ty_pg_exec(&nodes, s->pg,
				     "SELECT a.node_id FROM allocations a JOIN nodes n"
				     " ON n.id = a.node_id WHERE a.job_id = $1 AND a.attempt = $2"
				     " AND a.exited_at IS NULL AND n.state <> 'lost'"
				     " ORDER BY a.node_rank",
				     2, p, err)))
			goto out;
	}
	if (!(data = json_pack("{s:s, s:i}", "signal", signal, "grace_seconds", grace))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < PQntuples(nodes); i++)
		if ((rc = sched_outbox_add(s, PROTO_CHECKPOINT, PQgetvalue(nodes, i, 0), job,
					   attempt, data, err)))
			goto out;
	snprintf(text, sizeof(text), "%s; %s sent to %d node%s, killed in %d s", why, signal,
		 PQntuples(nodes), PQntuples(nodes) == 1 ? "" : "s", grace);
	edata = json_pack("{s:I, s:s, s:i}", "attempt", (json_int_t)attempt, "signal", signal,
			  "grace_seconds", grace);
	if (edata && for_job)
		json_object_set_new(edata, "preempted_for", json_integer(for_job));
	if (edata && spot_node)
		json_object_set_new(edata, "spot_node", json_string(spot_node));
	if (edata && deadline_ms)
		json_object_set_new(edata, "deadline", json_integer(deadline_ms));
	if (!edata) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_job_event(s, job, "preempting", "preempting", text, edata, err)))
		goto out;
	*started = true;
	/* no grace: the kill is due now */
	if (grace == 0)
		rc = sched_kill_nodes(NULL, s, job, attempt, "preempted", NULL, err);
out:
	json_decref(data);
	json_decref(edata);
	PQclear(nodes);
	PQclear(res);
	return rc;
}

int sched_preempt(bool *started, struct sched *s, int64_t job, int64_t attempt, int64_t for_job,
		  const char *why, struct ty_err *err)
{
	return start(started, s, job, attempt, for_job, NULL, 0, why, err);
}

int sched_preempt_spot(bool *started, struct sched *s, int64_t job, int64_t attempt,
		       const char *node, int64_t deadline_ms, const char *why, struct ty_err *err)
{
	int rc = start(started, s, job, attempt, 0, node, deadline_ms, why, err);

	if (!rc && *started)
		sched_metrics_preempted(s, "spot");
	return rc;
}

int sched_preempt_kills(struct sched *s, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	/* cheap when nothing is due: attempts_kill_due holds only stopping attempts */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT t.job_id, t.attempt FROM attempts t"
			     " WHERE t.state = 'stopping' AND t.kill_at IS NOT NULL"
			     " AND t.kill_at <= now() AND EXISTS (SELECT 1 FROM allocations a"
			     "  WHERE a.job_id = t.job_id AND a.attempt = t.attempt"
			     "  AND a.exited_at IS NULL AND a.killed_at IS NULL)"
			     " ORDER BY t.kill_at",
			     0, NULL, err)))
		return rc;
	if (PQntuples(res) == 0)
		goto out;
	if ((rc = sched_tx_begin(s, err)))
		goto out;
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		int64_t job = sched_col_i64(res, i, 0), attempt = sched_col_i64(res, i, 1);
		char jb[24], ab[24], text[256];
		const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
		PGresult *due = NULL;
		int kills = 0;

		/* still due now that the row is locked (a node may have reported meanwhile) */
		if ((rc = ty_pg_exec(&due, s->pg,
				     "SELECT 1 FROM attempts WHERE job_id = $1 AND attempt = $2"
				     " AND state = 'stopping' AND kill_at <= now() FOR UPDATE",
				     2, p, err)))
			break;
		if (PQntuples(due) == 1 &&
		    !(rc = sched_kill_nodes(&kills, s, job, attempt, "preempted", NULL, err)) &&
		    kills > 0) {
			json_t *data = json_pack("{s:I}", "attempt", (json_int_t)attempt);

			snprintf(text, sizeof(text),
				 "checkpoint grace period of attempt %lld over: kill sent to %d "
				 "node%s",
				 (long long)attempt, kills, kills == 1 ? "" : "s");
			rc = sched_job_event(s, job, "stopping", "preempting", text, data, err);
			json_decref(data);
		}
		PQclear(due);
	}
	if (rc)
		ty_pg_rollback(s->pg);
	else
		rc = sched_tx_commit(s, err);
out:
	PQclear(res);
	return rc;
}

int sched_preempt_settle(struct sched *s, int64_t job, int64_t attempt, struct ty_err *err)
{
	char jb[24], ab[24], text[512];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	const char *q[] = {p[0], p[1], NULL}; /* + whether it counts as a spot preemption */
	PGresult *res = NULL;
	json_t *data = NULL;
	bool spot;
	int rc;

	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE attempts SET state = 'failed', ended_at = now()"
			     " WHERE job_id = $1 AND attempt = $2 AND state = 'stopping'"
			     " AND failure_class = 'preempted' RETURNING preempted_for, spot_node",
			     2, p, err)))
		goto out;
	if (PQntuples(res) != 1)
		goto out; /* settled before */
	if ((rc = sched_ledger_attempt_end(s, job, attempt, err)))
		goto out;
	if (!(data = json_pack("{s:I, s:s}", "attempt", (json_int_t)attempt, "failure_class",
			       "preempted"))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (ty_pg_val(res, 0, 0))
		json_object_set_new(data, "preempted_for", json_integer(sched_col_i64(res, 0, 0)));
	spot = ty_pg_val(res, 0, 1) != NULL;
	if (spot)
		json_object_set_new(data, "spot_node", json_string(PQgetvalue(res, 0, 1)));
	PQclear(res);
	s->capacity_freed = true;
	/* a cancel requested while it was being preempted wins */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE jobs SET finished_at = now(),"
			     " state = CASE WHEN stop_requested THEN 'stopped' ELSE 'cancelled' END,"
			     " failure_class = 'preempted' WHERE id = $1 AND attempt = $2"
			     " AND state = 'preempting' AND cancel_requested RETURNING state",
			     2, p, err)))
		goto out;
	if (PQntuples(res) == 1) {
		char to[16];

		snprintf(to, sizeof(to), "%s", PQgetvalue(res, 0, 0));
		snprintf(text, sizeof(text),
			 "%s: attempt %lld (being preempted) stopped on every node", to,
			 (long long)attempt);
		rc = sched_job_event(s, job, to, to, text, data, err);
		goto out;
	}
	PQclear(res);
	q[2] = spot ? "1" : "0";
	/* back in the queue at its old place (ordered by submit time); no retry is spent */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE jobs SET state = 'pending', failure_class = 'preempted',"
			     " preemptions = preemptions + 1,"
			     " spot_preemptions = spot_preemptions + $3::integer,"
			     " pending_reason = NULL, queue_position = NULL, reserved_until = NULL"
			     " WHERE id = $1 AND attempt = $2 AND state = 'preempting'"
			     " RETURNING preemptions, spot_preemptions",
			     3, q, err)))
		goto out;
	if (PQntuples(res) == 1 && spot) {
		json_object_set_new(data, "spot_preemptions",
				    json_integer(sched_col_i64(res, 0, 1)));
		snprintf(text, sizeof(text),
			 "attempt %lld preempted: stopped on every node; requeued for attempt %lld "
			 "(spot preemption %lld, retry budget untouched)",
			 (long long)attempt, (long long)attempt + 1,
			 (long long)sched_col_i64(res, 0, 1));
		rc = sched_job_event(s, job, "requeued", "pending", text, data, err);
		sched_metrics_requeued(s, "preempted", false);
	} else if (PQntuples(res) == 1) {
		snprintf(text, sizeof(text),
			 "attempt %lld preempted: stopped on every node; requeued for attempt %lld "
			 "(preemption %lld, retry budget untouched)",
			 (long long)attempt, (long long)attempt + 1,
			 (long long)sched_col_i64(res, 0, 0));
		rc = sched_job_event(s, job, "requeued", "pending", text, data, err);
		sched_metrics_requeued(s, "preempted", false);
	}
out:
	json_decref(data);
	PQclear(res);
	return rc;
}
