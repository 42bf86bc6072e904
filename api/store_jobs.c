/*
 * The API's job SQL as typed calls (the pattern of scheduler/store/): the
 * statements are constants here, callers get rows as structs and the job
 * document as text; no PGresult leaves this file. The document is built in
 * C from the row's columns, not by PostgreSQL (docs/api.md, "Jobs").
 */
#include "api.h"
#include "goodput.h"
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PENDING_DEFAULT "not yet considered by the scheduler"

/*
 * The columns of a job row as row_read reads them, for the jobs row
 * j; $1 is the viewer's team id (NULL: an admin) in every statement, for
 * which the scheduler's free text is redacted (ty_redact_jobs).
 * Times as epoch microseconds: exact (numeric), formatted in C.
 */
#define JOB_COLUMNS                                                                                \
	"j.id, (SELECT name FROM teams WHERE id = j.team_id), j.name, j.state,"                    \
	" j.spec::text, j.cancel_requested, j.attempt, j.failure_class,"                           \
	" CASE WHEN j.state = 'pending' THEN ty_redact_jobs(j.pending_reason, $1::bigint)"         \
	" END, j.queue_position,"                                                                  \
	" (extract(epoch FROM j.reserved_until) * 1000000)::bigint, j.preemptions,"                \
	" j.spot_preemptions, (extract(epoch FROM j.created_at) * 1000000)::bigint,"               \
	" (extract(epoch FROM j.updated_at) * 1000000)::bigint,"                                   \
	" (extract(epoch FROM j.finished_at) * 1000000)::bigint"

/* ty_ts: RFC 3339 UTC, milliseconds truncated as to_char's MS does. */
static void put_ts(struct ty_buf *b, const char *us_text)
{
	long long us, s;
	time_t t;
	struct tm tm;

	if (!us_text) {
		ty_buf_puts(b, "null");
		return;
	}
	us = strtoll(us_text, NULL, 10);
	s = us / 1000000 - (us % 1000000 < 0);
	t = (time_t)s;
	if (!gmtime_r(&t, &tm)) {
		ty_buf_puts(b, "null");
		return;
	}
	ty_buf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"", tm.tm_year + 1900,
		      tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		      (int)((us - s * 1000000) / 1000));
}

/* A string as PostgreSQL's escape_json writes it (json_build_object's values). */
static void put_str(struct ty_buf *b, const char *s)
{
	if (!s) {
		ty_buf_puts(b, "null");
		return;
	}
	ty_buf_puts(b, "\"");
	for (; *s; s++) {
		switch (*s) {
		case '\b':
			ty_buf_puts(b, "\\b");
			break;
		case '\f':
			ty_buf_puts(b, "\\f");
			break;
		case '\n':
			ty_buf_puts(b, "\\n");
			break;
		case '\r':
			ty_buf_puts(b, "\\r");
			break;
		case '\t':
			ty_buf_puts(b, "\\t");
			break;
		case '"':
			ty_buf_puts(b, "\\\"");
			break;
		case '\\':
			ty_buf_puts(b, "\\\\");
			break;
		default:
			if ((unsigned char)*s < ' ')
				ty_buf_printf(b, "\\u%04x", (unsigned)*s);
			else
				ty_buf_append(b, s, 1);
		}
	}
	ty_buf_puts(b, "\"");
}

static void put_raw(struct ty_buf *b, const char *s)
{
	ty_buf_puts(b, s ? s : "null");
}

int api_job_doc(struct ty_buf *b, const struct api_job_row *j)
{
	bool pending = j->state && !strcmp(j->state, "pending");

	/* the layout of json_build_object, which built it before (0017) */
	ty_buf_puts(b, "{\"id\" : ");
	put_raw(b, j->id);
	ty_buf_puts(b, ", \"team\" : ");
	put_str(b, j->team);
	ty_buf_puts(b, ", \"name\" : ");
	put_str(b, j->name);
	ty_buf_puts(b, ", \"state\" : ");
	put_str(b, j->state);
	ty_buf_puts(b, ", \"spec\" : ");
	put_raw(b, j->spec);
	ty_buf_puts(b, ", \"cancel_requested\" : ");
	ty_buf_puts(b, j->cancel_requested ? "true" : "false");
	ty_buf_puts(b, ", \"attempt\" : ");
	put_raw(b, j->attempt);
	ty_buf_puts(b, ", \"failure_class\" : ");
	put_str(b, j->failure_class);
	/* the scheduler clears the queue columns only in its next cycle */
	ty_buf_puts(b, ", \"pending_reason\" : ");
	put_str(b, pending ? (j->pending_reason ? j->pending_reason : PENDING_DEFAULT) : NULL);
	ty_buf_puts(b, ", \"queue_position\" : ");
	put_raw(b, pending ? j->queue_position : NULL);
	ty_buf_puts(b, ", \"reserved_until\" : ");
	put_ts(b, pending ? j->reserved_until_us : NULL);
	ty_buf_puts(b, ", \"preemptions\" : ");
	put_raw(b, j->preemptions);
	ty_buf_puts(b, ", \"spot_preemptions\" : ");
	put_raw(b, j->spot_preemptions);
	ty_buf_puts(b, ", \"created_at\" : ");
	put_ts(b, j->created_at_us);
	ty_buf_puts(b, ", \"updated_at\" : ");
	put_ts(b, j->updated_at_us);
	ty_buf_puts(b, ", \"finished_at\" : ");
	put_ts(b, j->finished_at_us);
	ty_buf_puts(b, "}");
	return b->oom ? TY_ENOMEM : 0;
}

/* Row k of res, whose JOB_COLUMNS start at column c (borrows res). */
static void row_read(struct api_job_row *j, const PGresult *res, int k, int c)
{
	j->id = ty_pg_val(res, k, c);
	j->team = ty_pg_val(res, k, c + 1);
	j->name = ty_pg_val(res, k, c + 2);
	j->state = ty_pg_val(res, k, c + 3);
	j->spec = ty_pg_val(res, k, c + 4);
	j->cancel_requested = PQgetvalue(res, k, c + 5)[0] == 't';
	j->attempt = ty_pg_val(res, k, c + 6);
	j->failure_class = ty_pg_val(res, k, c + 7);
	j->pending_reason = ty_pg_val(res, k, c + 8);
	j->queue_position = ty_pg_val(res, k, c + 9);
	j->reserved_until_us = ty_pg_val(res, k, c + 10);
	j->preemptions = ty_pg_val(res, k, c + 11);
	j->spot_preemptions = ty_pg_val(res, k, c + 12);
	j->created_at_us = ty_pg_val(res, k, c + 13);
	j->updated_at_us = ty_pg_val(res, k, c + 14);
	j->finished_at_us = ty_pg_val(res, k, c + 15);
}

/* Append the document of row k of res, whose JOB_COLUMNS start at column c. */
static int doc_of(struct ty_buf *b, const PGresult *res, int k, int c, struct ty_err *err)
{
	struct api_job_row j;

	row_read(&j, res, k, c);
	return api_job_doc(b, &j) ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
}

/* *out: a copy of b's text in a; b is emptied. */
static int to_arena(const char **out, struct ty_arena *a, struct ty_buf *b, struct ty_err *err)
{
	int rc = 0;

	if (b->oom || !(*out = ty_arena_strdup(a, b->data ? b->data : "")))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	ty_buf_free(b);
	return rc;
}

#define GOODPUT_MEMBER(name, str)                                                                  \
	", '" str "', round(coalesce(sum(" str "_gpu_ms), 0)::numeric / 1000, 3)"

/*
 * The goodput of job j over its attempts in the ledger (docs/api.md,
 * "Jobs"): useful time is each attempt's useful GPU-time over its GPUs,
 * wall time from the first attempt's start to the last one's end; NULL
 * until an attempt ended.
 */
#define GOODPUT_OF_J                                                                               \
	"WITH a AS (SELECT attempt, sum(useful_gpu_ms)::numeric / nullif(sum(gpus), 0) AS u,"      \
	"  min(started_at) AS s, max(ended_at) AS e FROM usage_ledger"                             \
	"  WHERE job_id = j.id AND gpu_ms IS NOT NULL GROUP BY attempt),"                          \
	" w AS (SELECT round(coalesce(sum(u), 0) / 1000, 3) AS useful,"                            \
	"  round(extract(epoch FROM max(e) - min(s))::numeric, 3) AS wall, max(e) AS e FROM a)"    \
	" SELECT CASE WHEN w.e IS NOT NULL THEN json_build_object('ratio',"                        \
	"  round(w.useful / nullif(w.wall, 0), 4), 'useful_seconds', w.useful,"                    \
	"  'wall_seconds', w.wall, 'as_of', ty_ts(w.e), 'gpu_seconds', (SELECT"                    \
	"  json_build_object('total', round(coalesce(sum(gpu_ms), 0)::numeric / 1000, 3)"          \
	PROTO_GOODPUT_CATEGORIES(GOODPUT_MEMBER)                                                    \
	", 'queue_wait', round(coalesce(sum(queue_wait_gpu_ms), 0)::numeric / 1000, 3))"           \
	"  FROM usage_ledger WHERE job_id = j.id AND gpu_ms IS NOT NULL)) END FROM w"

/*
 * The job document, then its goodput (column JOB_NCOLS) and, while it is
 * pending, its start-time estimate (docs/api.md, "Start-time estimates").
 */
static const char get_sql[] = "SELECT " JOB_COLUMNS ", (" GOODPUT_OF_J ")::text,"
			      " CASE WHEN j.state = 'pending' THEN"
			      "  to_json(ty_ts(j.estimated_start))::text END,"
			      " CASE WHEN j.state = 'pending' THEN"
			      "  ty_estimate_json(j.estimate_basis, $1::bigint)::text END"
			      " FROM jobs j"
			      " WHERE j.id = $2 AND ($1::bigint IS NULL OR j.team_id = $1)";
#define JOB_NCOLS 16

int api_store_job_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
		      const char *scope, struct ty_err *err)
{
	const char *p[2] = {scope, id};
	struct ty_buf b = TY_BUF_INIT;
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, get_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1 && !(rc = doc_of(&b, res, 0, 0, err))) {
		const char *g = ty_pg_val(res, 0, JOB_NCOLS);
		const char *at = ty_pg_val(res, 0, JOB_NCOLS + 1);
		const char *est = ty_pg_val(res, 0, JOB_NCOLS + 2);

		/* the document ends in '}': goodput and the estimate are its last members */
		if (!b.oom && b.len) {
			b.data[--b.len] = '\0';
			ty_buf_printf(&b, ",\"goodput\":%s,\"estimated_start\":%s,\"estimate\":%s}",
				      g ? g : "null", at ? at : "null", est ? est : "null");
		}
		rc = to_arena(doc, a, &b, err);
	}
	ty_buf_free(&b);
	PQclear(res);
	return rc;
}

static const char by_key_sql[] = "SELECT j.request_sha256, " JOB_COLUMNS " FROM jobs j"
				 " WHERE j.team_id = $2 AND j.idempotency_key = $3";

int api_store_job_by_key(const char **hash, const char **doc, struct ty_pg *pg, struct ty_arena *a,
			 const char *team_id, const char *key, const char *scope,
			 struct ty_err *err)
{
	const char *p[3] = {scope, team_id, key};
	struct ty_buf b = TY_BUF_INIT;
	PGresult *res = NULL;
	int rc;

	*hash = *doc = NULL;
	if ((rc = ty_pg_exec(&res, pg, by_key_sql, 3, p, err)))
		return rc;
	if (PQntuples(res) == 1 && !(rc = doc_of(&b, res, 0, 1, err)) &&
	    !(rc = to_arena(doc, a, &b, err)) &&
	    !(*hash = ty_arena_strdup(a, PQgetvalue(res, 0, 0))))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	ty_buf_free(&b);
	PQclear(res);
	return rc;
}

/* One more row than asked tells whether another page exists. */
static const char list_sql[] =
    "SELECT " JOB_COLUMNS " FROM jobs j"
    " WHERE ($1::bigint IS NULL OR j.team_id = $1)"
    " AND ($2::text IS NULL OR j.team_id = (SELECT id FROM teams WHERE name = $2))"
    " AND ($3::text[] IS NULL OR j.state = ANY($3::text[]))"
    " AND ($4::jsonb IS NULL OR j.labels @> $4::jsonb)"
    " AND ($5::bigint IS NULL OR j.id < $5)"
    " AND ($7::text IS NULL OR j.name ILIKE $7 ESCAPE '\\' OR j.id = $8::bigint)"
    " ORDER BY j.id DESC LIMIT $6::int + 1";

int api_store_jobs_page(const char **items, const char **cursor, struct ty_pg *pg,
			struct ty_arena *a, const struct api_jobs_filter *f, struct ty_err *err)
{
	const char *p[8] = {f->scope, f->team,	    f->states, f->labels,
			    f->before, NULL, f->name_like, f->id};
	char limit[24];
	struct ty_buf b = TY_BUF_INIT;
	PGresult *res = NULL;
	int rc, n;

	*items = *cursor = NULL;
	snprintf(limit, sizeof(limit), "%d", f->limit);
	p[5] = limit;
	if ((rc = ty_pg_exec(&res, pg, list_sql, 8, p, err)))
		return rc;
	n = PQntuples(res) < f->limit ? PQntuples(res) : f->limit;
	/* the layout of json_agg, which built it before */
	ty_buf_puts(&b, "[");
	for (int k = 0; k < n && !rc; k++) {
		if (k)
			ty_buf_puts(&b, ", ");
		rc = doc_of(&b, res, k, 0, err);
	}
	ty_buf_puts(&b, "]");
	if (!rc)
		rc = to_arena(items, a, &b, err);
	if (!rc && PQntuples(res) > f->limit && n > 0 &&
	    !(*cursor = ty_arena_strdup(a, PQgetvalue(res, n - 1, 0))))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	ty_buf_free(&b);
	PQclear(res);
	return rc;
}

static const char lock_sql[] = "SELECT state, cancel_requested FROM jobs"
			       " WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2) FOR UPDATE";

int api_store_job_lock(const char **state, bool *cancel_requested, struct ty_pg *pg,
		       struct ty_arena *a, const char *id, const char *scope, struct ty_err *err)
{
	const char *p[2] = {id, scope};
	PGresult *res = NULL;
	int rc;

	*state = NULL;
	*cancel_requested = false;
	if ((rc = ty_pg_exec(&res, pg, lock_sql, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		*cancel_requested = PQgetvalue(res, 0, 1)[0] == 't';
		if (!(*state = ty_arena_strdup(a, PQgetvalue(res, 0, 0))))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
	PQclear(res);
	return rc;
}

/* A pending job ends at once; an active one gets cancel_requested (and stop_requested). */
static const char end_pending_sql[] =
    "UPDATE jobs SET finished_at = now(),"
    " state = CASE WHEN $2::boolean THEN 'stopped' ELSE 'cancelled' END"
    " WHERE id = $1";
static const char request_end_sql[] =
    "UPDATE jobs SET cancel_requested = true, stop_requested = $2 WHERE id = $1";
/* The event, in a statement of its own: it reads the state the update wrote. */
static const char end_event_sql[] =
    "SELECT ty_job_event($1, CASE WHEN $4::boolean THEN state"
    " WHEN $2::boolean THEN 'stop_requested' ELSE 'cancel_requested' END, state, $3, NULL)"
    " FROM jobs WHERE id = $1";

int api_store_job_end(struct ty_pg *pg, const char *id, bool pending, bool stop,
		      const char *message, struct ty_err *err)
{
	const char *p[4] = {id, stop ? "t" : "f", message, pending ? "t" : "f"};
	int rc;

	if (pending)
		rc = ty_pg_exec(NULL, pg, end_pending_sql, 2, p, err);
	else
		rc = ty_pg_exec(NULL, pg, request_end_sql, 2, p, err);
	if (rc)
		return rc;
	return ty_pg_exec(NULL, pg, end_event_sql, 4, p, err);
}

/*
 * The submission batch (submit.c): ids drawn in input order, rows whose key
 * a committed (or concurrently committing) job holds skipped, one job_events
 * row per job made. ty_job_event is volatile: it sees the rows ins inserted.
 * The columns are JOB_COLUMNS' after ord, the team's name left to the caller,
 * the pending reason unredacted: a new job has nothing to hide yet. A
 * created job's audit row (201) commits with it, in the batch's one
 * transaction, rather than in one of its own after the reply (audit.c).
 */
static const char insert_sql[] =
    "WITH input AS MATERIALIZED (SELECT nextval('jobs_id_seq') AS id, u.*"
    "  FROM jsonb_to_recordset($1::jsonb) AS u(ord int, team_id bigint, name text,"
    "  spec jsonb, priority_class text, priority int, labels jsonb, idempotency_key text,"
    "  request_sha256 text, message text, audit jsonb) ORDER BY u.ord),"
    " ins AS (INSERT INTO jobs AS j (id, team_id, name, spec, priority_class, priority,"
    "  labels, idempotency_key, request_sha256)"
    "  SELECT id, team_id, name, spec, priority_class, priority, labels, idempotency_key,"
    "  request_sha256 FROM input ORDER BY ord"
    "  ON CONFLICT (team_id, idempotency_key) DO NOTHING"
    "  RETURNING j.id, NULL::text AS team, j.name, j.state, j.spec::text AS spec,"
    "  j.cancel_requested, j.attempt, j.failure_class, j.pending_reason, j.queue_position,"
    "  (extract(epoch FROM j.reserved_until) * 1000000)::bigint AS reserved_until,"
    "  j.preemptions, j.spot_preemptions,"
    "  (extract(epoch FROM j.created_at) * 1000000)::bigint AS created_at,"
    "  (extract(epoch FROM j.updated_at) * 1000000)::bigint AS updated_at,"
    "  (extract(epoch FROM j.finished_at) * 1000000)::bigint AS finished_at),"
    " aud AS (INSERT INTO audit_requests (request_id, token_id, principal, role, team,"
    "  trial_job, method, route, path, target_ids, created_id, status, peer, summary)"
    "  SELECT a.request_id, a.token_id::bigint, a.principal, a.role, a.team,"
    "  a.trial_job::bigint, a.method, a.route, a.path, a.target_ids::text[], ins.id, 201,"
    "  a.peer::inet, a.summary FROM input i JOIN ins ON ins.id = i.id,"
    "  jsonb_to_record(i.audit) AS a(request_id text, token_id text, principal text,"
    "  role text, team text, trial_job text, method text, route text, path text,"
    "  target_ids text, peer text, summary text)"
    "  WHERE i.audit IS NOT NULL)"
    " SELECT i.ord, ins.*, CASE WHEN ins.id IS NOT NULL"
    "  THEN ty_job_event(ins.id, 'submitted', 'pending', i.message, NULL) END"
    " FROM input i LEFT JOIN ins ON ins.id = i.id ORDER BY i.ord";

int api_store_jobs_insert(struct api_submission **x, struct ty_pg *pg, const char *rows,
			  struct ty_err *err)
{
	const char *p[1] = {rows};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, insert_sql, 1, p, err)))
		return rc;
	for (int k = 0; k < PQntuples(res) && !rc; k++) {
		struct api_submission *s = x[atoi(PQgetvalue(res, k, 0))];
		struct ty_buf b = TY_BUF_INIT;
		struct api_job_row j;

		/* no row: the key is another job's by now */
		if (!ty_pg_val(res, k, 1)) {
			s->result = API_SUB_REPLAY;
			continue;
		}
		row_read(&j, res, k, 1);
		j.team = s->team;
		s->result = API_SUB_CREATED;
		if (api_job_doc(&b, &j))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		else
			rc = to_arena(&s->doc, s->arena, &b, err);
		ty_buf_free(&b);
	}
	PQclear(res);
	return rc;
}

static const char visible_sql[] =
	"SELECT 1 FROM jobs WHERE id = $1 AND ($2::bigint IS NULL OR team_id = $2)";

int api_store_job_visible(bool *found, struct ty_pg *pg, const char *id, const char *scope,
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

static const char pending_sql[] =
	"SELECT count(*) FROM jobs WHERE team_id = $1 AND state = 'pending'";

int api_store_jobs_pending(long long *n, struct ty_pg *pg, const char *team_id,
			   struct ty_err *err)
{
	const char *p[1] = {team_id};
	PGresult *res = NULL;
	int rc;

	*n = 0;
	if ((rc = ty_pg_exec(&res, pg, pending_sql, 1, p, err)))
		return rc;
	*n = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

/*
 * As job cancel does, trial by trial: pending ones end now, started ones
 * get cancel_requested and the scheduler stops their gangs.
 */
static const char end_of_sweep_sql[] =
	"WITH t AS (SELECT id, state FROM jobs WHERE sweep_id = $1"
	"  AND state NOT IN ('succeeded', 'failed', 'cancelled', 'stopped')"
	"  AND NOT cancel_requested ORDER BY id FOR UPDATE),"
	" p AS (UPDATE jobs j SET state = 'cancelled', finished_at = now()"
	"  FROM t WHERE j.id = t.id AND t.state = 'pending' RETURNING j.id),"
	" c AS (UPDATE jobs j SET cancel_requested = true"
	"  FROM t WHERE j.id = t.id AND t.state <> 'pending' RETURNING j.id)"
	" SELECT (SELECT coalesce(array_agg(id), '{}') FROM p)::text,"
	"  (SELECT coalesce(array_agg(id), '{}') FROM c)::text";
/* the events in statements of their own: ty_job_event updates the rows again */
static const char end_of_sweep_cancelled_sql[] =
	"SELECT ty_job_event(x, 'cancelled', 'cancelled',"
	"  'cancelled while pending (sweep cancel)', NULL)"
	" FROM unnest($1::bigint[]) x ORDER BY x";
static const char end_of_sweep_requested_sql[] =
	"SELECT ty_job_event(j.id, 'cancel_requested', j.state,"
	"  'cancel requested (sweep cancel)', NULL)"
	" FROM jobs j WHERE j.id = ANY($1::bigint[]) ORDER BY j.id";

int api_store_jobs_end_of_sweep(struct ty_pg *pg, struct ty_arena *a, const char *sweep_id,
				struct ty_err *err)
{
	const char *p[1] = {sweep_id}, *ended = NULL, *requested = NULL;
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, end_of_sweep_sql, 1, p, err)))
		return rc;
	if (!(rc = api__store_text(&ended, a, res, 0, 0, err)))
		rc = api__store_text(&requested, a, res, 0, 1, err);
	PQclear(res);
	if (rc || (rc = ty_pg_exec(NULL, pg, end_of_sweep_cancelled_sql, 1, &ended, err)))
		return rc;
	return ty_pg_exec(NULL, pg, end_of_sweep_requested_sql, 1, &requested, err);
}

static const char events_sql[] =
	"SELECT j.state, e.doc::text, e.last FROM jobs j,"
	" LATERAL (SELECT coalesce(json_agg(json_build_object('seq', seq,"
	"  'type', type, 'state', state,"
	"  'message', ty_redact_jobs(message, $2::bigint),"
	"  'data', ty_redact_event_data(data, $2::bigint),"
	"  'time', ty_ts(created_at)) ORDER BY seq), '[]') AS doc,"
	"  max(seq) AS last FROM (SELECT * FROM job_events"
	"  WHERE job_id = j.id AND seq > $3::int ORDER BY seq LIMIT $4::int) x) e"
	" WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)";

int api_store_job_events(struct api_job_events *ev, struct ty_pg *pg, struct ty_arena *a,
			 const char *id, const char *scope, long long after, long long limit,
			 struct ty_err *err)
{
	char afterb[24], limb[24];
	const char *p[4] = {id, scope, afterb, limb};
	PGresult *res = NULL;
	int rc = 0;

	memset(ev, 0, sizeof(*ev));
	snprintf(afterb, sizeof(afterb), "%lld", after);
	snprintf(limb, sizeof(limb), "%lld", limit);
	if ((rc = ty_pg_exec(&res, pg, events_sql, 4, p, err)))
		return rc;
	if (PQntuples(res) > 0 && !(rc = api__store_text(&ev->events, a, res, 0, 1, err)) &&
	    !(rc = api__store_text(&ev->last, a, res, 0, 2, err)))
		rc = api__store_text(&ev->state, a, res, 0, 0, err);
	if (rc)
		ev->state = NULL;
	PQclear(res);
	return rc;
}

static const char keyed_sql[] =
	"SELECT j.team_id, j.idempotency_key FROM jsonb_to_recordset($1::jsonb)"
	" AS k(team_id bigint, key text) JOIN jobs j"
	" ON j.team_id = k.team_id AND j.idempotency_key = k.key";

int api_store_jobs_keyed(struct api_job_key *k, int n, struct ty_pg *pg, struct ty_err *err)
{
	json_t *keys = json_array();
	const char *p[1] = {NULL};
	char *text = NULL;
	PGresult *res = NULL;
	int rc = 0;

	for (int i = 0; i < n; i++)
		k[i].taken = false;
	for (int i = 0; keys && i < n; i++)
		if (json_array_append_new(keys, json_pack("{s:I, s:s}", "team_id",
							  (json_int_t)atoll(k[i].team_id), "key",
							  k[i].key))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	if (!keys || !(text = json_dumps(keys, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	p[0] = text;
	if ((rc = ty_pg_exec(&res, pg, keyed_sql, 1, p, err)))
		goto out;
	for (int r = 0; r < PQntuples(res); r++)
		for (int i = 0; i < n; i++)
			if (!strcmp(k[i].team_id, PQgetvalue(res, r, 0)) &&
			    !strcmp(k[i].key, PQgetvalue(res, r, 1)))
				k[i].taken = true;
out:
	PQclear(res);
	free(text);
	json_decref(keys);
	return rc;
}
