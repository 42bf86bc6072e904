/*
 * Spot interruption notices (docs/dispatch.md, "Spot notices"): a node with
 * a notice is `preempting` (no new work) and every gang with a rank on it
 * goes through the preemption protocol of preempt.c, its kill bounded by
 * the notice's deadline; the requeue counts a spot preemption.
 */
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

int sched_spot_notice(struct sched *s, const char *node, int64_t seq, const json_t *notice,
		      struct ty_err *err)
{
	const json_t *dl = json_object_get(notice, "deadline");
	char db[24], sb[24], *text = NULL;
	PGresult *res = NULL;
	json_t *keep = NULL;
	int64_t deadline;
	int rc;

	if (!json_is_integer(dl) || json_integer_value(dl) <= 0)
		return ty_err_set(err, TY_EINVAL, "spot notice of node '%s' without a deadline",
				  node);
	deadline = (int64_t)json_integer_value(dl);
	/* only what the scheduler shows: provider, action and detail, bounded */
	keep = json_object();
	if (!keep)
		return ty_err_set(err, TY_ENOMEM, NULL);
	{
		static const char *const keys[] = {"provider", "action", "detail", NULL};

		for (int i = 0; keys[i]; i++) {
			const char *v = jstr(notice, keys[i]);

			if (v)
				json_object_set_new(keep, keys[i], json_stringn(v, strnlen(v, 512)));
		}
	}
	if (!(text = json_dumps(keep, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	{
		const char *p[] = {node, sched_i64(db, deadline), text, sched_i64(sb, seq)};

		/* a repeated notice (same deadline) changes nothing; a new one replaces it */
		if ((rc = ty_pg_exec(
			 &res, s->pg,
			 "UPDATE nodes SET state = 'preempting',"
			 " preempt_deadline = to_timestamp($2::bigint / 1000.0),"
			 " preempt_notice = $3::jsonb,"
			 /* the first message that carried this notice (a lost node's is stale) */
			 " preempt_seq = CASE WHEN state = 'preempting'"
			 "  THEN least(coalesce(preempt_seq, $4::bigint), $4::bigint) ELSE $4::bigint END"
			 " WHERE id = $1 AND state <> 'lost' AND (state <> 'preempting'"
			 "  OR preempt_deadline IS DISTINCT FROM to_timestamp($2::bigint / 1000.0)"
			 "  OR preempt_seq IS NULL)"
			 " RETURNING 1",
			 4, p, err)))
			goto out;
	}
	if (PQntuples(res) == 0)
		goto out;
	sched_mirror_touch_node(s, node);
	ty_warn("node '%s' is preempting: spot notice (%s %s), deadline in %lld ms", node,
		jstr(notice, "provider") ? jstr(notice, "provider") : "unknown provider",
		jstr(notice, "action") ? jstr(notice, "action") : "",
		(long long)(deadline - ty_wall_ms()));
	rc = sched_spot_handshake(s, node, err);
out:
	json_decref(keep);
	free(text);
	PQclear(res);
	return rc;
}

int sched_spot_handshake(struct sched *s, const char *node, struct ty_err *err)
{
	char mb[24], why[512];
	/* the kill comes kill grace early, so SIGKILL lands by deadline - margin */
	const char *p[] = {node,
			   sched_i64(mb, s->o.spot_kill_margin_s + s->o.kill_grace_seconds)};
	PGresult *res = NULL;
	int rc;

	/* attempts already being preempted (reclaim) are killed by the deadline too */
	if ((rc = ty_pg_exec(NULL, s->pg,
			     "UPDATE attempts t SET kill_at = greatest(now(),"
			     " n.preempt_deadline - $2::int * interval '1 second')"
			     " FROM nodes n, allocations a WHERE n.id = $1"
			     " AND n.state = 'preempting' AND a.node_id = n.id"
			     " AND a.job_id = t.job_id AND a.attempt = t.attempt"
			     " AND a.exited_at IS NULL AND t.state = 'stopping'"
			     " AND t.failure_class = 'preempted'"
			     " AND t.kill_at > n.preempt_deadline - $2::int * interval '1 second'",
			     2, p, err)))
		return rc;
	if ((rc = ty_pg_exec(
		 &res, s->pg,
		 "SELECT DISTINCT t.job_id, t.attempt,"
		 " (extract(epoch FROM n.preempt_deadline) * 1000)::bigint,"
		 " coalesce(n.preempt_notice->>'provider', 'unknown'),"
		 " greatest(0, ceil(extract(epoch FROM n.preempt_deadline - now())))::bigint"
		 " FROM nodes n JOIN allocations a ON a.node_id = n.id"
		 " JOIN attempts t ON t.job_id = a.job_id AND t.attempt = a.attempt"
		 " WHERE n.id = $1 AND n.state = 'preempting' AND a.released_at IS NULL"
		 " AND a.exited_at IS NULL AND t.state IN ('scheduled', 'starting', 'running')"
		 " ORDER BY 1, 2",
		 1, p, err)))
		return rc;
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		int64_t job = sched_col_i64(res, i, 0), attempt = sched_col_i64(res, i, 1);
		bool started;

		snprintf(why, sizeof(why),
			 "attempt %lld preempted: node %s has a spot interruption notice (%s, "
			 "deadline in %lld s)",
			 (long long)attempt, node, PQgetvalue(res, i, 3),
			 (long long)sched_col_i64(res, i, 4));
		rc = sched_preempt_spot(&started, s, job, attempt, node, sched_col_i64(res, i, 2),
					why, err);
	}
	PQclear(res);
	return rc;
}

int sched_spot_clear(struct sched *s, const char *node, const char *why, struct ty_err *err)
{
	const char *p[] = {node};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, s->pg,
			     "UPDATE nodes n SET state = CASE WHEN n.drain_reason IS NULL"
			     "  THEN 'ready' WHEN EXISTS (SELECT 1 FROM allocations a"
			     "  WHERE a.node_id = n.id AND a.released_at IS NULL)"
			     "  THEN 'draining' ELSE 'drained' END,"
			     " preempt_deadline = NULL, preempt_notice = NULL, preempt_seq = NULL"
			     " WHERE n.id = $1 AND n.state = 'preempting' RETURNING n.state",
			     1, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		ty_info("node '%s' is %s again: %s", node, PQgetvalue(res, 0, 0), why);
		sched_mirror_touch_node(s, node);
		s->capacity_freed = true;
	}
	PQclear(res);
	return 0;
}

int sched_spot_sweep(struct sched *s, struct ty_err *err)
{
	PGresult *res = NULL;
	bool any = false;
	int rc;

	/* a node the mirror has yet to read again (the API's trigger) may be preempting too */
	any = s->mirror.stale || s->mirror.ntnodes > 0;
	for (int i = 0; i < s->mirror.nnodes && !any; i++)
		any = s->mirror.nodes[i].preempting;
	if (!any)
		return 0; /* the usual case costs no query */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT n.id FROM nodes n WHERE n.state = 'preempting'"
			     " AND EXISTS (SELECT 1 FROM allocations a JOIN attempts t"
			     "  ON t.job_id = a.job_id AND t.attempt = a.attempt"
			     "  WHERE a.node_id = n.id AND a.released_at IS NULL"
			     "  AND a.exited_at IS NULL"
			     "  AND t.state IN ('scheduled', 'starting', 'running'))"
			     " ORDER BY n.id",
			     0, NULL, err)))
		return rc;
	if (PQntuples(res) == 0)
		goto out;
	if ((rc = sched_tx_begin(s, err)))
		goto out;
	for (int i = 0; i < PQntuples(res) && !rc; i++)
		rc = sched_spot_handshake(s, PQgetvalue(res, i, 0), err);
	if (rc)
		ty_pg_rollback(s->pg);
	else
		rc = sched_tx_commit(s, err);
out:
	PQclear(res);
	return rc;
}
