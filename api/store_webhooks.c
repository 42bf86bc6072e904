/*
 * The webhooks SQL of the routes as typed calls (store.h): a webhook's and a
 * delivery's documents are ty_webhook_json's and ty_webhook_delivery_json's
 * (migrations/0013), returned as text.
 */
#include "store.h"

#include <stdlib.h>

/* A page's two columns: items (never NULL) and the next cursor (or NULL). */
static int page_of(const char **items, const char **next, struct ty_arena *a, PGresult *res,
		   struct ty_err *err)
{
	int rc = api__store_text(items, a, res, 0, 0, err);

	if (!rc)
		rc = api__store_text(next, a, res, 0, 1, err);
	PQclear(res);
	return rc;
}

static const char active_count_sql[] =
	"SELECT (SELECT count(*) FROM webhooks WHERE team_id = t.id AND active)"
	" FROM teams t WHERE t.id = $1 FOR UPDATE";

int api_store_webhooks_active(int *n, struct ty_pg *pg, const char *team_id, struct ty_err *err)
{
	const char *p[1] = {team_id};
	PGresult *res = NULL;
	int rc;

	*n = 0;
	if ((rc = ty_pg_exec(&res, pg, active_count_sql, 1, p, err)))
		return rc;
	if (PQntuples(res) > 0)
		*n = atoi(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

static const char insert_sql[] =
	"INSERT INTO webhooks (team_id, url, events, secret, created_by)"
	" SELECT $1, $2, array(SELECT json_array_elements_text($3::json)), $4, $5"
	" RETURNING ty_webhook_json(webhooks)::text";

int api_store_webhook_insert(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			     const struct api_webhook_new *w, struct ty_err *err)
{
	const char *p[5] = {w->team_id, w->url, w->events, w->secret, w->created_by};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, insert_sql, 5, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char get_sql[] = "SELECT ty_webhook_json(w)::text FROM webhooks w"
			      " WHERE w.id = $1 AND ($2::bigint IS NULL OR w.team_id = $2)";

int api_store_webhook_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			  const char *scope, struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, get_sql, 2, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

/* one more row than asked tells whether another page exists */
static const char page_sql[] =
	"WITH page AS (SELECT * FROM webhooks w"
	"  WHERE ($1::bigint IS NULL OR w.team_id = $1)"
	"  AND ($2::text IS NULL OR w.team_id = (SELECT id FROM teams WHERE name = $2))"
	"  AND ($3::bigint IS NULL OR w.id < $3)"
	"  ORDER BY w.id DESC LIMIT $4::int + 1),"
	" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $4::int)"
	" SELECT coalesce((SELECT json_agg(ty_webhook_json(x) ORDER BY x.id DESC)"
	"  FROM shown x), '[]')::text,"
	" CASE WHEN (SELECT count(*) FROM page) > $4::int"
	"  THEN (SELECT min(id) FROM shown)::text END";

int api_store_webhooks_page(const char **items, const char **next, struct ty_pg *pg,
			    struct ty_arena *a, const struct api_page_filter *f,
			    struct ty_err *err)
{
	const char *p[4] = {f->scope, f->team, f->cursor, f->limit};
	PGresult *res = NULL;
	int rc;

	*items = *next = NULL;
	if ((rc = ty_pg_exec(&res, pg, page_sql, 4, p, err)))
		return rc;
	return page_of(items, next, a, res, err);
}

static const char lock_sql[] = "SELECT active FROM webhooks"
			       " WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2) FOR UPDATE";

int api_store_webhook_lock(bool *found, bool *active, struct ty_pg *pg, const char *id,
			   const char *scope, struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*found = *active = false;
	if ((rc = ty_pg_exec(&res, pg, lock_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) > 0) {
		*found = true;
		*active = PQgetvalue(res, 0, 0)[0] == 't';
	}
	PQclear(res);
	return 0;
}

static const char visible_sql[] =
	"SELECT 1 FROM webhooks WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2)";

int api_store_webhook_visible(bool *found, struct ty_pg *pg, const char *id, const char *scope,
			      struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*found = false;
	if ((rc = ty_pg_exec(&res, pg, visible_sql, 2, p, err)))
		return rc;
	*found = PQntuples(res) > 0;
	PQclear(res);
	return 0;
}

/* a second delete changes nothing */
static const char deactivate_sql[] =
	"UPDATE webhooks SET active = false,"
	" deactivated_at = coalesce(deactivated_at, now()) WHERE id = $1";
static const char cancel_pending_sql[] =
	"UPDATE webhook_deliveries SET state = 'cancelled',"
	" locked_until = NULL,"
	" last_error = coalesce(last_error || '; ', '') || 'webhook deleted'"
	" WHERE webhook_id = $1 AND state = 'pending'";

int api_store_webhook_deactivate(struct ty_pg *pg, const char *id, struct ty_err *err)
{
	const char *p[1] = {id};
	int rc;

	if ((rc = ty_pg_exec(NULL, pg, deactivate_sql, 1, p, err)))
		return rc;
	return ty_pg_exec(NULL, pg, cancel_pending_sql, 1, p, err);
}

static const char ping_sql[] = "SELECT ty_webhook_enqueue(team_id, id, 'ping', NULL, now())"
			       " FROM webhooks WHERE id = $1";
static const char last_delivery_sql[] =
	"SELECT ty_webhook_delivery_json(d)::text FROM webhook_deliveries d"
	" WHERE d.webhook_id = $1 ORDER BY d.id DESC LIMIT 1";

int api_store_webhook_ping(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			   struct ty_err *err)
{
	const char *p[1] = {id};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(NULL, pg, ping_sql, 1, p, err)) ||
	    (rc = ty_pg_exec(&res, pg, last_delivery_sql, 1, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char deliveries_sql[] =
	"WITH page AS (SELECT * FROM webhook_deliveries d"
	"  WHERE d.webhook_id = $1 AND ($4::text IS NULL OR d.state = $4)"
	"  AND ($2::bigint IS NULL OR d.id < $2)"
	"  ORDER BY d.id DESC LIMIT $3::int + 1),"
	" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $3::int)"
	" SELECT coalesce((SELECT json_agg(ty_webhook_delivery_json(x)"
	"  ORDER BY x.id DESC) FROM shown x), '[]')::text,"
	" CASE WHEN (SELECT count(*) FROM page) > $3::int"
	"  THEN (SELECT min(id) FROM shown)::text END";

int api_store_deliveries_page(const char **items, const char **next, struct ty_pg *pg,
			      struct ty_arena *a, const char *webhook_id, const char *state,
			      const char *cursor, const char *limit, struct ty_err *err)
{
	const char *p[4] = {webhook_id, cursor, limit, state};
	PGresult *res = NULL;
	int rc;

	*items = *next = NULL;
	if ((rc = ty_pg_exec(&res, pg, deliveries_sql, 4, p, err)))
		return rc;
	return page_of(items, next, a, res, err);
}
