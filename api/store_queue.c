/*
 * The queue's SQL as typed calls (store.h): one page of the pending queue,
 * in the order the scheduler published; what-if requests to the scheduler.
 */
#include "notify.h"
#include "store.h"

/*
 * Queue order is (queue_position, id) with never-positioned jobs last; the
 * sort key maps NULL to the largest int4 so the order is one row comparison.
 * It is the expression of the index jobs_queue_order (migration 0006).
 */
#define QUEUE_KEY_SQL "coalesce(j.queue_position, 2147483647)"

/*
 * The queue is shared, so everyone sees every entry; of other teams'
 * jobs only what says nothing about them: no id, no name, and no
 * reason (the scheduler's free text says more about a job than its
 * team needs to share). Other teams' jobs named in one's own reasons
 * are redacted. $1 team filter, $2/$3 cursor, $4 limit, $5 the viewer.
 */
static const char page_sql[] =
	"WITH page AS (SELECT j.*, " QUEUE_KEY_SQL " AS k FROM jobs j"
	"  WHERE j.state = 'pending'"
	"  AND ($1::text IS NULL OR j.team_id = (SELECT id FROM teams WHERE name = $1))"
	"  AND ($2::int IS NULL OR (" QUEUE_KEY_SQL ", j.id) > ($2::int, $3::bigint))"
	"  ORDER BY k, j.id LIMIT $4::int + 1),"
	" shown AS (SELECT * FROM page ORDER BY k, id LIMIT $4::int)"
	" SELECT coalesce((SELECT json_agg(json_build_object("
	"  'position', s.queue_position,"
	"  'job', CASE WHEN s.mine THEN s.id END,"
	"  'team', t.name,"
	"  'name', CASE WHEN s.mine THEN s.name END,"
	"  'priority_class', s.priority_class, 'priority', s.priority,"
	"  'gpus', s.nodes * s.gpus_per_node, 'nodes', s.nodes,"
	"  'gpus_per_node', s.gpus_per_node,"
	"  'submitted_at', ty_ts(s.created_at),"
	"  'fair_share', coalesce(u.fair_share, 1),"
	"  'reason', CASE WHEN s.mine THEN ty_redact_jobs("
	"   ty_pending_reason(s.state, s.pending_reason), $5::bigint) END,"
	"  'reserved_until', ty_ts(s.reserved_until),"
	"  'estimated_start', ty_ts(s.estimated_start),"
	"  'estimate', ty_estimate_json(s.estimate_basis, $5::bigint)) ORDER BY s.k, s.id)"
	"  FROM (SELECT x.*, ($5::bigint IS NULL OR x.team_id = $5) AS mine,"
	"    (x.spec->'resources'->>'nodes')::int AS nodes,"
	"    (x.spec->'resources'->>'gpus_per_node')::int AS gpus_per_node"
	"    FROM shown x) s"
	"  JOIN teams t ON t.id = s.team_id"
	"  LEFT JOIN team_usage u ON u.team_id = s.team_id), '[]')::text,"
	" CASE WHEN (SELECT count(*) FROM page) > $4::int"
	"  THEN (SELECT k || '.' || id FROM shown ORDER BY k DESC, id DESC LIMIT 1) END";

int api_store_queue_page(const char **items, const char **next, struct ty_pg *pg,
			 struct ty_arena *a, const struct api_queue_filter *f, struct ty_err *err)
{
	const char *p[5] = {f->team, f->after_key, f->after_id, f->limit, f->viewer};
	PGresult *res = NULL;
	int rc;

	*items = *next = NULL;
	if ((rc = ty_pg_exec(&res, pg, page_sql, 5, p, err)))
		return rc;
	if (!(rc = api__store_text(items, a, res, 0, 0, err)))
		rc = api__store_text(next, a, res, 0, 1, err);
	PQclear(res);
	return rc;
}

/* ---- what-if (docs/api.md, "What-if") ---- */

/* the row, and the NOTIFY the leading scheduler wakes on (sent at commit) */
static const char what_if_ask_sql[] =
	"WITH w AS (INSERT INTO what_if_requests (team_id, priority_class, priority, spec)"
	" VALUES ($1::bigint, $2, $3::int, $4::jsonb) RETURNING id)"
	" SELECT id, pg_notify('" PROTO_NOTIFY_CHANNEL "', '" PROTO_NOTIFY_WHAT_IF "' || id) FROM w";

/* redacted for viewer $2 as the queue is: other teams' job ids and reasons' mentions */
static const char what_if_answer_sql[] =
	"SELECT (w.answer || jsonb_build_object("
	"  'estimate', ty_estimate_json(w.answer->'estimate', $2::bigint),"
	"  'reason', to_jsonb(ty_redact_jobs(w.answer->>'reason', $2::bigint)),"
	"  'alternatives', coalesce((SELECT jsonb_agg(a.v || jsonb_build_object("
	"    'estimate', ty_estimate_json(a.v->'estimate', $2::bigint),"
	"    'reason', to_jsonb(ty_redact_jobs(a.v->>'reason', $2::bigint))) ORDER BY a.ord)"
	"   FROM jsonb_array_elements(w.answer->'alternatives') WITH ORDINALITY AS a(v, ord)),"
	"   '[]'::jsonb)))::text"
	" FROM what_if_requests w WHERE w.id = $1::bigint AND w.answer IS NOT NULL";

static const char what_if_forget_sql[] = "DELETE FROM what_if_requests WHERE id = $1::bigint";

int api_store_what_if_ask(const char **id, struct ty_pg *pg, struct ty_arena *a,
			  const char *team_id, const char *priority_class, const char *priority,
			  const char *spec, struct ty_err *err)
{
	const char *p[4] = {team_id, priority_class, priority, spec};
	PGresult *res = NULL;
	int rc;

	*id = NULL;
	if ((rc = ty_pg_exec(&res, pg, what_if_ask_sql, 4, p, err)))
		return rc;
	rc = api__store_text(id, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}

int api_store_what_if_answer(const char **answer, struct ty_pg *pg, struct ty_arena *a,
			     const char *id, const char *viewer, struct ty_err *err)
{
	const char *p[2] = {id, viewer};
	PGresult *res = NULL;
	int rc;

	*answer = NULL;
	if ((rc = ty_pg_exec(&res, pg, what_if_answer_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) > 0)
		rc = api__store_text(answer, a, res, 0, 0, err);
	PQclear(res);
	return rc;
}

int api_store_what_if_forget(struct ty_pg *pg, const char *id, struct ty_err *err)
{
	const char *p[1] = {id};

	return ty_pg_exec(NULL, pg, what_if_forget_sql, 1, p, err);
}
