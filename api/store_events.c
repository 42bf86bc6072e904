/*
 * The cross-job event feed's SQL (GET /v1/events): events in the order their
 * transactions committed before the oldest still running one, as typed calls.
 */
#include "api.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * $1 the viewer's team id (NULL: an admin), $2 a team name (NULL: all),
 * $3..$5 the cursor, $6 the limit. The horizon is read once, in the same
 * statement: every event below it is committed or never will be, so an
 * event that shows up later has a larger xid and lands after the cursor.
 * The last column says whether events wait above the horizon.
 */
static const char feed_sql[] =
	"WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)"
	" SELECT e.xid::text, e.job_id, e.seq, json_build_object('job', e.job_id,"
	"  'team', t.name, 'seq', e.seq, 'type', e.type, 'state', e.state,"
	"  'message', ty_redact_jobs(e.message, $1::bigint),"
	"  'data', ty_redact_event_data(e.data, $1::bigint),"
	"  'time', ty_ts(e.created_at))::text, h.xmin::text,"
	"  EXISTS (SELECT 1 FROM job_events x WHERE x.xid >= h.xmin)"
	" FROM h LEFT JOIN (job_events e JOIN jobs j ON j.id = e.job_id"
	"  JOIN teams t ON t.id = j.team_id)"
	" ON e.xid < h.xmin AND (e.xid, e.job_id, e.seq) > ($3::xid8, $4::bigint, $5::int)"
	"  AND ($1::bigint IS NULL OR j.team_id = $1) AND ($2::text IS NULL OR t.name = $2)"
	" ORDER BY e.xid, e.job_id, e.seq LIMIT $6::int";

int api_store_events_feed(struct api_events_feed *f, struct ty_pg *pg, struct ty_arena *a,
			  const char *scope, const char *team, const struct api_feed_cursor *after,
			  long long limit, struct ty_err *err)
{
	char xid[24], job[24], seq[16], lim[24];
	const char *p[6] = {scope, team, xid, job, seq, lim};
	struct ty_buf b = TY_BUF_INIT;
	PGresult *res = NULL;
	int rc, n;

	memset(f, 0, sizeof(*f));
	snprintf(xid, sizeof(xid), "%llu", (unsigned long long)after->xid);
	snprintf(job, sizeof(job), "%lld", (long long)after->job);
	snprintf(seq, sizeof(seq), "%d", after->seq);
	snprintf(lim, sizeof(lim), "%lld", limit);
	if ((rc = ty_pg_exec(&res, pg, feed_sql, 6, p, err)))
		return rc;
	n = PQntuples(res);
	f->last = *after;
	ty_buf_puts(&b, "[");
	for (int i = 0; i < n; i++) {
		if (!ty_pg_val(res, i, 0))
			continue; /* the horizon's row alone: no event */
		ty_buf_printf(&b, "%s%s", f->count ? "," : "", PQgetvalue(res, i, 3));
		f->count++;
		f->last.xid = strtoull(PQgetvalue(res, i, 0), NULL, 10);
		f->last.job = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		f->last.seq = atoi(PQgetvalue(res, i, 2));
	}
	ty_buf_puts(&b, "]");
	if (n > 0) {
		f->horizon = strtoull(PQgetvalue(res, 0, 4), NULL, 10);
		f->held_back = PQgetvalue(res, 0, 5)[0] == 't';
	}
	if (b.oom || !(f->events = ty_arena_strdup(a, b.data)))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	ty_buf_free(&b);
	PQclear(res);
	return rc;
}
