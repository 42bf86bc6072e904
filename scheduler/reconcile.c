/*
 * Liveness and reconciliation: PostgreSQL is the truth, each node's last
 * heartbeat is what the node says it runs, and the difference is repaired
 * by re-sending launches, re-sending kills and releasing allocations that
 * never started (docs/dispatch.md, "Scheduler duties" 4 and 5).
 */
#include "launch.h"
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A gap between answered probes longer than this is time nobody was heard. */
static int64_t blind_ms(const struct sched *s)
{
	return s->o.node_timeout_ms / 2 > 2000 ? s->o.node_timeout_ms / 2 : 2000;
}

/*
 * The timed node transitions (docs/dispatch.md, "Node states"): a draining
 * node whose last allocation is released is drained; a suspect node whose
 * failures within the window fell below --suspect-after-jobs is ready.
 */
static int node_states(struct sched *s, struct ty_err *err)
{
	char wb[24], tb[24];
	const char *p[] = {sched_i64(wb, s->o.failure_window_s), sched_i64(tb, s->o.suspect_after)};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE nodes n SET state = 'drained' WHERE n.state = 'draining'"
			     " AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id"
			     "  AND a.released_at IS NULL) RETURNING n.id",
			     0, NULL, err)))
		return rc;
	for (int i = 0; i < PQntuples(res); i++) {
		sched_mirror_touch_node(s, PQgetvalue(res, i, 0));
		ty_info("node '%s' drained: no work left on it", PQgetvalue(res, i, 0));
	}
	PQclear(res);
	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE nodes n SET state = 'ready' WHERE n.state = 'suspect'"
			     " AND coalesce((SELECT sum(w) FROM (SELECT max(CASE WHEN"
			     "  f.failure_class = 'hardware' THEN 2 ELSE 1 END) AS w"
			     "  FROM node_failures f WHERE f.node_id = n.id"
			     "  AND f.failure_class IN ('system', 'hardware')"
			     "  AND f.created_at > n.failures_since"
			     "  AND f.created_at > now() - make_interval(secs => $1::int)"
			     "  GROUP BY f.job_id) x), 0) < $2::int"
			     /* measured slow by a pre-flight check: suspect for the window */
			     " AND NOT EXISTS (SELECT 1 FROM node_failures f WHERE f.node_id = n.id"
			     "  AND f.message = '" SCHED_PREFLIGHT_WHY "'"
			     "  AND f.created_at > n.failures_since"
			     "  AND f.created_at > now() - make_interval(secs => $1::int))"
			     " RETURNING n.id",
			     2, p, err)))
		return rc;
	for (int i = 0; i < PQntuples(res); i++) {
		sched_mirror_touch_node(s, PQgetvalue(res, i, 0));
		s->capacity_freed = true;
		ty_info("node '%s' is ready again: its failures left the window",
			PQgetvalue(res, i, 0));
	}
	PQclear(res);
	return 0;
}

int sched_liveness(struct sched *s, struct ty_err *err)
{
	char tb[24], bb[24], why[256];
	const char *p[] = {sched_i64(tb, s->o.node_timeout_ms), NULL};
	PGresult *res = NULL;
	int64_t now;
	int rc;

	/*
	 * Silence heard through a broker that does not answer proves nothing,
	 * and neither does silence while this loop was not looking (a stall, a
	 * pause): nobody is judged then, and everyone gets a full timeout after.
	 */
	if (!sched_kafka_reachable(s)) {
		if (!s->kafka_down)
			ty_warn("kafka does not answer: no node is declared lost until it does");
		s->kafka_down = true;
		return 0;
	}
	/* after the probe: a probe that waited for the broker was a blind spell too */
	now = ty_mono_ms();
	if (s->kafka_down || (s->kafka_ok && now - s->kafka_ok > blind_ms(s))) {
		ty_info("kafka answers again after %lld ms: every node has %d ms to be heard from",
			(long long)(now - s->kafka_ok), s->o.node_timeout_ms);
		s->kafka_down = false;
		s->kafka_back = now;
	}
	s->kafka_ok = now;
	if (s->kafka_back)
		p[1] = sched_i64(bb, now - s->kafka_back);
	if ((rc = sched_tx_begin(s, err)))
		return rc;
	/*
	 * A new term counts from its own start too: heartbeats that arrived
	 * while no one led were not applied.
	 */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE nodes n SET state = 'lost' FROM leader l"
			     " WHERE l.id = 1 AND n.state <> 'lost'"
			     " AND greatest(n.last_heartbeat, l.updated_at,"
			     "  now() - $2::bigint * interval '1 millisecond')"
			     " < now() - $1::integer * interval '1 millisecond'"
			     " RETURNING n.id",
			     2, p, err)))
		goto fail;
	for (int i = 0; i < PQntuples(res); i++) {
		const char *node = PQgetvalue(res, i, 0);

		sched_mirror_touch_node(s, node);
		ty_warn("node '%s' lost: no heartbeat for %d ms", node, s->o.node_timeout_ms);
		snprintf(why, sizeof(why), "node %s lost: no heartbeat for %d ms", node,
			 s->o.node_timeout_ms);
		if ((rc = sched_node_gone(s, node, "node_lost", why, true, err)))
			goto fail;
	}
	PQclear(res);
	res = NULL;
	if ((rc = node_states(s, err)))
		goto fail;
	return sched_tx_commit(s, err);
fail:
	PQclear(res);
	ty_pg_rollback(s->pg);
	return rc;
}

/*
 * An active attempt's part whose launch the node, heartbeating since, has
 * not acknowledged (launch_accepted, or a rank started) within --resend-ms.
 */
static int resend_launches(struct sched *s, const char *const *p, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	/*
	 * While this consumer lags, a launch's acknowledgement may be waiting
	 * unread: heartbeats (another topic) can be read seconds ahead of it
	 * (measured: 18.8 re-sends per gang in bench/dispatch at 2,000 nodes).
	 */
	if (s->lagging) {
		ty_debug("events are still being read: no launch is re-sent this pass");
		return 0;
	}
	/*
	 * While the relay is a period behind, a launch may simply not have
	 * left yet: sending it again would only lengthen the backlog (measured:
	 * 55,000 re-sends in one bench/dispatch run that way).
	 */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT 1 FROM dispatch_outbox WHERE id = (SELECT min(id)"
			     " FROM dispatch_outbox) AND created_at < now() - $1::integer"
			     " * interval '1 millisecond'",
			     1, p, err)))
		return rc;
	if (PQntuples(res) > 0) {
		PQclear(res);
		ty_debug("the outbox relay is behind: no launch is re-sent this pass");
		return 0;
	}
	PQclear(res);
	res = NULL;
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT a.job_id, a.attempt, a.node_id, a.node_rank, a.first_rank,"
			     " array_to_json(a.gpus), t.launch, n.boot_id"
			     " FROM allocations a JOIN attempts t USING (job_id, attempt)"
			     " JOIN nodes n ON n.id = a.node_id"
			     " WHERE a.exited_at IS NULL"
			     " AND t.state IN ('scheduled', 'starting', 'running')"
			     " AND a.accepted_at IS NULL"
			     " AND n.state <> 'lost' AND n.last_heartbeat > a.launched_at"
			     " AND a.launched_at < now() - $1::integer * interval '1 millisecond'"
			     " ORDER BY a.job_id, a.attempt, a.node_rank",
			     1, p, err)))
		return rc;
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		json_t *gpus = json_loads(PQgetvalue(res, i, 5), 0, NULL);
		json_t *common = json_loads(PQgetvalue(res, i, 6), 0, NULL);
		json_t *data = NULL;
		int64_t job = sched_col_i64(res, i, 0), attempt = sched_col_i64(res, i, 1);
		const char *node = PQgetvalue(res, i, 2);
		bool finished = false;

		/* a node that lists it as finished got it: its exit is on the way */
		for (int k = 0; k < s->nlate && !finished; k++)
			finished = s->late[k].job == job && s->late[k].attempt == attempt &&
				   !strcmp(s->late[k].node, node);
		if (finished) {
			json_decref(gpus);
			json_decref(common);
			continue;
		}
		if (gpus && common && json_array_size(gpus) <= PROTO_LAUNCH_MAX_GPU_INDEX + 1) {
			int g[PROTO_LAUNCH_MAX_GPU_INDEX + 1], ng = (int)json_array_size(gpus);

			for (int k = 0; k < ng; k++)
				g[k] = (int)json_integer_value(json_array_get(gpus, (size_t)k));
			data = proto_launch_data(common, &(struct proto_launch_node){
							     .node_rank = (int)sched_col_i64(res, i, 3),
							     .first_rank = (int)sched_col_i64(res, i, 4),
							     .gpus = g,
							     .ngpus = ng,
							     .boot_id = ty_pg_val(res, i, 7),
							 });
		}
		if (!data) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		} else if (!(rc = sched_outbox_add(s, PROTO_LAUNCH, node, job, attempt, data,
						   err))) {
			const char *q[] = {PQgetvalue(res, i, 0), PQgetvalue(res, i, 1), node};

			ty_info("job %lld: re-sending the launch of attempt %lld to node '%s', "
				"which has not acknowledged it",
				(long long)job, (long long)attempt, node);
			rc = ty_pg_exec(
			    NULL, s->pg,
			    "UPDATE allocations SET launched_at = now() WHERE job_id = $1"
			    " AND attempt = $2 AND node_id = $3",
			    3, q, err);
		}
		json_decref(gpus);
		json_decref(common);
		json_decref(data);
	}
	PQclear(res);
	return rc;
}

/*
 * Attempts a node runs that are over, or that the database never heard of.
 * A part whose end the node reported itself (exit_code set) is left alone:
 * a heartbeat sent before that report may be applied after it.
 */
static int resend_kills(struct sched *s, const char *const *p, struct ty_err *err)
{
	PGresult *res = NULL;
	json_t *data = NULL, *pdata = NULL;
	int rc;

	if ((rc = ty_pg_exec(
		 &res, s->pg,
		 "SELECT n.id, r.job, r.attempt, a.job_id IS NOT NULL,"
		 " coalesce(t.state = 'stopping' AND t.failure_class = 'preempted', false)"
		 " FROM nodes n CROSS JOIN LATERAL"
		 "  jsonb_to_recordset(n.running) AS r(job bigint, attempt integer)"
		 " LEFT JOIN attempts t ON t.job_id = r.job AND t.attempt = r.attempt"
		 " LEFT JOIN allocations a ON a.job_id = r.job"
		 "  AND a.attempt = r.attempt AND a.node_id = n.id"
		 " WHERE n.state <> 'lost' AND (a.job_id IS NULL"
		 "  OR (t.state NOT IN ('scheduled', 'starting', 'running')"
		 "   AND a.exit_code IS NULL"
		 /* a preempted attempt runs through its checkpoint grace period, and the
		  * first kill of its live parts is sched_preempt_kills()'s to send */
		 "   AND (a.killed_at IS NULL AND NOT (t.state = 'stopping'"
		 "     AND t.kill_at IS NOT NULL AND a.exited_at IS NULL)"
		 "    OR (n.last_heartbeat > a.killed_at"
		 "    AND a.killed_at < now() - $1::integer * interval '1 millisecond'))))"
		 " ORDER BY n.id, r.job, r.attempt",
		 1, p, err)))
		return rc;
	if (PQntuples(res) > 0 &&
	    (!(data = json_pack("{s:s, s:i}", "reason", "over", "grace_seconds",
				s->o.kill_grace_seconds)) ||
	     !(pdata = json_pack("{s:s, s:i}", "reason", "preempted", "grace_seconds",
				 s->o.kill_grace_seconds)))) {
		json_decref(data);
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		const char *q[] = {PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
				   PQgetvalue(res, i, 0)};
		int64_t job = sched_col_i64(res, i, 1), attempt = sched_col_i64(res, i, 2);
		bool preempted = !strcmp(PQgetvalue(res, i, 4), "t");

		ty_info("job %lld: node '%s' runs attempt %lld, which is %s: killing it",
			(long long)job, q[2], (long long)attempt,
			preempted ? "being preempted" : "over");
		if ((rc = sched_outbox_add(s, PROTO_KILL, q[2], job, attempt,
					   preempted ? pdata : data, err)))
			break;
		if (!strcmp(PQgetvalue(res, i, 3), "t"))
			rc = ty_pg_exec(NULL, s->pg,
					"UPDATE allocations SET killed_at = now() WHERE job_id = $1"
					" AND attempt = $2 AND node_id = $3",
					3, q, err);
	}
	json_decref(data);
	json_decref(pdata);
	PQclear(res);
	return rc;
}

/*
 * A killed attempt's part on a node that has heartbeated since the kill and
 * neither runs it nor finished it: the node never got the launch. Its GPUs
 * are free.
 */
static int release_unstarted(struct sched *s, const char *const *p, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE allocations a SET exited_at = now(),"
			     " failure_class = 'cancelled', released_at = now()"
			     " FROM attempts t, nodes n"
			     " WHERE t.job_id = a.job_id AND t.attempt = a.attempt"
			     " AND n.id = a.node_id AND a.released_at IS NULL"
			     " AND t.state NOT IN ('scheduled', 'starting', 'running')"
			     " AND a.killed_at IS NOT NULL AND n.last_heartbeat > a.killed_at"
			     " AND a.killed_at < now() - $1::integer * interval '1 millisecond'"
			     " AND NOT n.running @> jsonb_build_array(jsonb_build_object("
			     "  'job', a.job_id, 'attempt', a.attempt))"
			     " RETURNING a.job_id, a.attempt, a.node_id",
			     1, p, err)))
		return rc;
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		ty_info("job %s: node '%s' never ran attempt %s: its GPUs are free",
			PQgetvalue(res, i, 0), PQgetvalue(res, i, 2), PQgetvalue(res, i, 1));
		s->capacity_freed = true;
		sched_touch(s, sched_col_i64(res, i, 0));
		rc = sched_settle_attempt(s, sched_col_i64(res, i, 0), sched_col_i64(res, i, 1),
					  err);
	}
	PQclear(res);
	return rc;
}

int sched_reconcile(struct sched *s, struct ty_err *err)
{
	char rb[24];
	const char *p[] = {sched_i64(rb, s->o.resend_ms)};
	int rc;

	if ((rc = sched_tx_begin(s, err)))
		return rc;
	/* an exit event gets one reconcile period to arrive before the heartbeat's word is taken */
	if ((rc = sched_apply_late_exits(s, s->o.reconcile_ms, err)) ||
	    (rc = resend_launches(s, p, err)) || (rc = resend_kills(s, p, err)) ||
	    (rc = release_unstarted(s, p, err))) {
		ty_pg_rollback(s->pg);
		return rc;
	}
	return sched_tx_commit(s, err);
}
