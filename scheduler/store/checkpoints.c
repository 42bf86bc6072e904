/*
 * Verified checkpoints of attempts (attempts.last_checkpoint_*): where the
 * work lost to a preemption or failure starts (the ledger).
 */
#include "scheduler.h"

/* Only a newer step of a live or stopping attempt, reported by a node of it. */
static const char SQL_CHECKPOINT_WRITTEN[] =
    "UPDATE attempts SET last_checkpoint_at = now(), last_checkpoint_step = $3"
    " WHERE job_id = $1 AND attempt = $2"
    " AND state IN ('scheduled', 'starting', 'running', 'stopping')"
    " AND (last_checkpoint_step IS NULL OR last_checkpoint_step < $3)"
    " AND EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1"
    "  AND a.attempt = $2 AND a.node_id = $4)";

int sched_store_checkpoint_written(struct ty_pg *pg, const struct sched_store_part *a, int64_t step,
				   struct ty_err *err)
{
	char jb[24], ab[24], sb[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), sched_i64(sb, step),
			   a->node};

	return ty_pg_exec(NULL, pg, SQL_CHECKPOINT_WRITTEN, 4, p, err);
}
