/*
 * Verified checkpoints: attempts.last_checkpoint_* (where the work lost to a
 * preemption or failure starts, the ledger) and the checkpoints table, one
 * row per (job, step), from which the launch names the gang's resume point.
 */
#include "scheduler.h"

#include <stdio.h>
#include <string.h>

/* Only a newer step of a live or stopping attempt, reported by a node of it. */
static const char SQL_CHECKPOINT_WRITTEN[] =
    "UPDATE attempts SET last_checkpoint_at = now(), last_checkpoint_step = $3"
    " WHERE job_id = $1 AND attempt = $2"
    " AND state IN ('scheduled', 'starting', 'running', 'stopping')"
    " AND (last_checkpoint_step IS NULL OR last_checkpoint_step < $3)"
    " AND EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1"
    "  AND a.attempt = $2 AND a.node_id = $4)";
/*
 * The first report of a step from a node of the attempt wins; a valid one
 * replaces only a torn row (its manifest was not there yet). RETURNING a
 * row: it was recorded.
 */
static const char SQL_CKPT_RECORD[] =
    "INSERT INTO checkpoints AS c (job_id, step, path, digest, bytes, files, node_id, attempt,"
    " status, reason)"
    " SELECT $1, $3, $5, $6, $7, $8, $4, $2, $9, $10"
    " WHERE EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1 AND a.attempt = $2"
    "  AND a.node_id = $4)"
    " ON CONFLICT (job_id, step) DO UPDATE SET path = excluded.path, digest = excluded.digest,"
    " bytes = excluded.bytes, files = excluded.files, node_id = excluded.node_id,"
    " attempt = excluded.attempt, verified_at = now(), status = excluded.status,"
    " reason = excluded.reason"
    " WHERE c.status = 'torn' AND excluded.status = 'valid'"
    " RETURNING c.step";
/*
 * A valid report whose digest differs from the valid row's: recorded in
 * the row's reason (once per differing node and digest), never replacing
 * the digest. RETURNING the row's node and digest: a new disagreement.
 */
#define DISAGREE_REASON                                                                     \
	"format('node %s reported MANIFEST.json digest %s, node %s verified %s', $4::text,"  \
	" $5::text, c.node_id, c.digest)"
static const char SQL_CKPT_DISAGREE[] =
    "UPDATE checkpoints c SET reason = " DISAGREE_REASON
    " WHERE c.job_id = $1 AND c.step = $3 AND c.status = 'valid' AND c.digest <> $5"
    " AND c.reason IS DISTINCT FROM " DISAGREE_REASON
    " AND EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1 AND a.attempt = $2"
    "  AND a.node_id = $4)"
    " RETURNING c.node_id, c.digest, (SELECT state FROM jobs WHERE id = $1)";
/*
 * The named resume checkpoint did not check out on a node of the attempt:
 * rejected, when it is still the valid row with that digest. The newest
 * other valid step (the next resume) comes back with the count rejected;
 * the outer query sees the row as it was, hence step <> $3.
 */
static const char SQL_CKPT_REJECT[] =
    "WITH r AS (UPDATE checkpoints SET status = 'rejected', reason = $6"
    "  WHERE job_id = $1 AND step = $3 AND digest = $5 AND status = 'valid'"
    "  AND EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1 AND a.attempt = $2"
    "   AND a.node_id = $4) RETURNING step)"
    " SELECT (SELECT count(*) FROM r), (SELECT max(step) FROM checkpoints c"
    "  WHERE c.job_id = $1 AND c.status = 'valid' AND c.step <> $3),"
    " (SELECT state FROM jobs WHERE id = $1)";

/*
 * Retention deleted the step on the node of the attempt that reported it:
 * kept as history, never a resume point again (a rejected row stays so).
 */
static const char SQL_CKPT_DELETED[] =
    "UPDATE checkpoints SET status = 'deleted', reason = $5"
    " WHERE job_id = $1 AND step = $3 AND status IN ('valid', 'torn', 'corrupt')"
    " AND EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = $1 AND a.attempt = $2"
    "  AND a.node_id = $4)";

int sched_store_checkpoint_written(struct ty_pg *pg, const struct sched_store_part *a, int64_t step,
				   struct ty_err *err)
{
	char jb[24], ab[24], sb[24];
	const char *p[] = {sched_i64(jb, a->job), sched_i64(ab, a->attempt), sched_i64(sb, step),
			   a->node};

	return ty_pg_exec(NULL, pg, SQL_CHECKPOINT_WRITTEN, 4, p, err);
}

static int disagree(struct sched_store_ckpt_outcome *out, struct ty_pg *pg,
		    const struct sched_store_ckpt_report *r, const char *const *p,
		    struct ty_err *err)
{
	const char *q[] = {p[0], p[1], p[2], r->node, r->digest};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, SQL_CKPT_DISAGREE, 5, q, err)))
		return rc;
	if (PQntuples(res) == 1) {
		out->what = SCHED_CKPT_DISAGREES;
		snprintf(out->node, sizeof(out->node), "%s", PQgetvalue(res, 0, 0));
		snprintf(out->digest, sizeof(out->digest), "%s", PQgetvalue(res, 0, 1));
		snprintf(out->job_state, sizeof(out->job_state), "%s", PQgetvalue(res, 0, 2));
	}
	PQclear(res);
	return 0;
}

int sched_store_checkpoint_report(struct sched_store_ckpt_outcome *out, struct ty_pg *pg,
				  const struct sched_store_ckpt_report *r, struct ty_err *err)
{
	char jb[24], ab[24], sb[24], bb[24], fb[24];
	const char *p[] = {sched_i64(jb, r->job), sched_i64(ab, r->attempt),
			   sched_i64(sb, r->step), r->node, r->path, r->digest,
			   sched_i64(bb, r->bytes), sched_i64(fb, r->files), r->status, r->reason};
	bool valid = !strcmp(r->status, "valid");
	PGresult *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	out->next_step = -1;
	if (!strcmp(r->status, "rejected")) {
		const char *q[] = {p[0], p[1], p[2], r->node, r->digest, r->reason};

		if (!r->digest)
			return 0; /* nothing to match the row by */
		if ((rc = ty_pg_exec(&res, pg, SQL_CKPT_REJECT, 6, q, err)))
			return rc;
		if (sched_col_i64(res, 0, 0) > 0) {
			out->what = SCHED_CKPT_REJECTED;
			out->next_step = PQgetisnull(res, 0, 1) ? -1 : sched_col_i64(res, 0, 1);
			snprintf(out->job_state, sizeof(out->job_state), "%s",
				 PQgetvalue(res, 0, 2));
		}
		PQclear(res);
		return 0;
	}
	if (!strcmp(r->status, "deleted")) {
		const char *q[] = {p[0], p[1], p[2], r->node, r->reason};

		return ty_pg_exec(NULL, pg, SQL_CKPT_DELETED, 5, q, err);
	}
	/* a valid one without a digest (an older executor) cannot be a resume point */
	if (valid && !r->digest)
		return 0;
	if (r->hashed) {
		if ((rc = ty_pg_exec(&res, pg, SQL_CKPT_RECORD, 10, p, err)))
			return rc;
		if (PQntuples(res) == 1)
			out->what = SCHED_CKPT_RECORDED;
		PQclear(res);
		if (out->what)
			return 0;
	}
	return valid ? disagree(out, pg, r, p, err) : 0;
}
