/*
 * What checkpoint-aware preemption reads and records (preempt.c): a job's
 * measured checkpoint durations (signal → committed), from which a victim's
 * grace is sized, and the commit that ends a preemption's grace early.
 */
#include "job_spec.h"
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* $2 (proto/job_spec.c's default) only guards old rows: the API fills the spec's defaults */
static const char SQL_GRACE_INPUTS[] =
    "SELECT priority_class,"
    " coalesce((SELECT max(d) FROM unnest(checkpoint_durations_ms) d), -1),"
    " coalesce((spec->'checkpoint'->>'grace_seconds')::integer, $2::integer)"
    " FROM jobs WHERE id = $1";

int sched_store_grace_inputs(struct sched_store_grace_in *out, struct ty_pg *pg, int64_t job,
			     struct ty_err *err)
{
	char jb[24], gb[24];
	const char *p[] = {sched_i64(jb, job),
			   sched_i64(gb, proto_spec_default_int("checkpoint", "grace_seconds"))};
	PGresult *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	out->measured_ms = -1;
	if ((rc = ty_pg_exec(&res, pg, SQL_GRACE_INPUTS, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		snprintf(out->cls, sizeof(out->cls), "%s", PQgetvalue(res, 0, 0));
		out->measured_ms = sched_col_i64(res, 0, 1);
		out->spec_grace_s = sched_col_i64(res, 0, 2);
	}
	PQclear(res);
	return 0;
}

/*
 * Once per attempt (checkpoint_committed_at is set once): several nodes
 * report the same checkpoint, and Kafka may redeliver it. The job keeps its
 * last three durations.
 */
static const char SQL_COMMITTED[] =
    "WITH a AS (UPDATE attempts t SET checkpoint_committed_at = now()"
    "  WHERE t.job_id = $1 AND t.attempt = $2 "
    "  AND t.state = 'stopping' AND t.failure_class = 'preempted'"
    "  AND t.checkpoint_signal_at IS NOT NULL AND t.checkpoint_committed_at IS NULL"
    "  AND EXISTS (SELECT 1 FROM allocations x WHERE x.job_id = $1"
    "   AND x.attempt = $2 AND x.node_id = $3)"
    "  RETURNING greatest(0, round(extract(epoch FROM"
    "   now() - t.checkpoint_signal_at) * 1000))::integer AS ms)"
    " UPDATE jobs j SET checkpoint_durations_ms = (j.checkpoint_durations_ms || a.ms)"
    "  [greatest(cardinality(j.checkpoint_durations_ms) - 1, 1):]"
    " FROM a WHERE j.id = $1 RETURNING a.ms";

int sched_store_checkpoint_committed(int64_t *ms, struct ty_pg *pg,
				     const struct sched_store_part *a, struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), a->node};
	PGresult *res = NULL;
	int rc;

	*ms = -1;
	if ((rc = ty_pg_exec(&res, pg, SQL_COMMITTED, 3, p, err)))
		return rc;
	if (PQntuples(res) == 1)
		*ms = sched_col_i64(res, 0, 0);
	PQclear(res);
	return 0;
}
