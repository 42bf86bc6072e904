/*
 * The audit log: one audit_requests row per mutating request, written from the
 * reply point (server.c) on the request's own connection, and GET /v1/audit.
 */
#include "api.h"
#include "ty_log.h"
#include "ty_time.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

bool api_audit_method(const char *method)
{
	return method && (!strcmp(method, "POST") || !strcmp(method, "PUT") ||
			  !strcmp(method, "PATCH") || !strcmp(method, "DELETE"));
}

/* ---- request ids ------------------------------------------------------ */

static pthread_once_t boot_once = PTHREAD_ONCE_INIT;
static uint64_t boot_id;
static atomic_uint_fast64_t request_seq;

static void boot_init(void)
{
	unsigned char raw[8];

	/* unique across replicas and restarts; a clock fallback if the CSPRNG fails */
	if (RAND_bytes(raw, sizeof(raw)) == 1)
		memcpy(&boot_id, raw, sizeof(boot_id));
	else
		boot_id = (uint64_t)ty_wall_ms() ^ ((uint64_t)getpid() << 40);
}

void api_request_id(char out[API_REQUEST_ID_LEN])
{
	uint64_t n;

	pthread_once(&boot_once, boot_init);
	n = atomic_fetch_add(&request_seq, 1) + 1;
	snprintf(out, API_REQUEST_ID_LEN, "%016" PRIx64 "-%" PRIx64, boot_id, n);
}

/* ---- pure parts ------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

size_t api_audit_text(char *out, size_t outsz, const char *in)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t o = 0;

	if (!outsz)
		return 0;
	while (*s) {
		size_t n = utf8_len(s);

		if (n == 1 && (*s < 0x20 || *s == 0x7f))
			n = 0;
		if (n) {
			if (o + n >= outsz)
				break;
			memcpy(out + o, s, n);
			o += n;
			s += n;
			continue;
		}
		if (o + 4 >= outsz)
			break;
		out[o++] = '\\';
		out[o++] = 'x';
		out[o++] = hex[*s >> 4];
		out[o++] = hex[*s & 15];
		s++;
	}
	out[o] = '\0';
	return o;
}

int64_t api_audit_created_id(const char *body, size_t len)
{
	const char *p = body, *end = body + len;
	int64_t v = 0;
	int digits = 0;

#define SKIP_WS()                                                                                  \
	while (p < end && (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r'))                   \
	p++
	if (!body)
		return 0;
	SKIP_WS();
	if (p >= end || *p++ != '{')
		return 0;
	SKIP_WS();
	if (end - p < 4 || memcmp(p, "\"id\"", 4) != 0)
		return 0;
	p += 4;
	SKIP_WS();
	if (p >= end || *p++ != ':')
		return 0;
	SKIP_WS();
#undef SKIP_WS
	while (p < end && *p >= '0' && *p <= '9' && digits < 18) {
		v = v * 10 + (*p++ - '0');
		digits++;
	}
	if (!digits || (p < end && *p >= '0' && *p <= '9'))
		return 0;
	return v;
}

/* ---- the write -------------------------------------------------------- */

static const char *role_name(enum api_role role)
{
	switch (role) {
	case API_ROLE_ADMIN:
		return "admin";
	case API_ROLE_MEMBER:
		return "member";
	case API_ROLE_VIEWER:
		return "viewer";
	default:
		return NULL;
	}
}

static const char *peer_of(struct api_req *r)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char buf[INET6_ADDRSTRLEN];
	const struct sockaddr *sa = ci ? ci->client_addr : NULL;

	if (!sa)
		return NULL;
	if (sa->sa_family == AF_INET &&
	    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, buf,
		      sizeof(buf)))
		return ty_arena_strdup(r->arena, buf);
	if (sa->sa_family == AF_INET6 &&
	    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, buf,
		      sizeof(buf)))
		return ty_arena_strdup(r->arena, buf);
	return NULL;
}

static const char *clean(struct api_req *r, const char *s, size_t max)
{
	char *out;

	if (!s || !(out = ty_arena_alloc(r->arena, max + 1)))
		return NULL;
	api_audit_text(out, max + 1, s);
	return out;
}

/* The path's "{}" captures as a text[] literal (each one cleaned and quoted). */
static const char *targets_of(struct api_req *r)
{
	struct ty_buf b = TY_BUF_INIT;
	const char *out;

	ty_buf_puts(&b, "{");
	for (int i = 0; i < 4 && r->params[i]; i++) {
		const char *v = clean(r, r->params[i], 128);

		ty_buf_puts(&b, i ? ",\"" : "\"");
		for (const char *c = v ? v : ""; *c; c++) {
			if (*c == '"' || *c == '\\')
				ty_buf_puts(&b, "\\");
			ty_buf_append(&b, c, 1);
		}
		ty_buf_puts(&b, "\"");
	}
	ty_buf_puts(&b, "}");
	out = b.oom ? "{}" : ty_arena_strdup(r->arena, b.data);
	ty_buf_free(&b);
	return out;
}

/* The columns that do not depend on the reply: all but 10-12 (created_id, status, problem). */
static void facts_of(const char *p[16], struct api_req *r)
{
	p[0] = r->request_id;
	if (r->auth.token_id)
		p[1] = ty_arena_printf(r->arena, "%lld", (long long)r->auth.token_id);
	p[2] = r->auth.role ? clean(r, r->auth.token_name, 200) : NULL;
	p[3] = role_name(r->auth.role);
	p[4] = r->auth.role ? clean(r, r->auth.team, 200) : NULL;
	if (r->auth.trial_job)
		p[5] = ty_arena_printf(r->arena, "%lld", (long long)r->auth.trial_job);
	p[6] = r->method;
	p[7] = r->route ? r->route->pattern : NULL;
	p[8] = clean(r, r->path, 2048);
	p[9] = targets_of(r);
	p[13] = peer_of(r);
	/* a short summary only: the body may hold secrets (tokens, webhook secrets) */
	if (json_is_object(r->json))
		p[14] = clean(r, json_string_value(json_object_get(r->json, "name")), 200);
}

json_t *api__audit_facts(struct api_req *r)
{
	const char *p[16] = {NULL};

	facts_of(p, r);
	return json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?, s:s, s:s?, s:s?, s:s?, s:s?, s:s?}",
			 "request_id", p[0], "token_id", p[1], "principal", p[2], "role", p[3],
			 "team", p[4], "trial_job", p[5], "method", p[6], "route", p[7], "path",
			 p[8], "target_ids", p[9], "peer", p[13], "summary", p[14]);
}

void api__audit_request(struct api_req *r)
{
	struct ty_err err = {0};
	const char *p[16] = {NULL};
	int64_t created;
	int rc;

	if (!api_audit_method(r->method) || r->audited)
		goto out;
	if (!r->pg) {
		if ((rc = api__pool_get(&r->pg, r->srv, &err)))
			goto fail;
	}
	if (ty_pg_in_tx(r->pg))
		ty_pg_rollback(r->pg); /* a handler bailed out mid-transaction */
	/*
	 * Refused before authentication (bad body, no route): name the token
	 * when it is a valid one. A 401 already failed, a 503 cannot ask.
	 */
	if (!r->auth.role && r->status != 401 && r->status != 503 &&
	    api_header(r, MHD_HTTP_HEADER_AUTHORIZATION)) {
		struct ty_err ignored = {0};

		if (api__authenticate(r, &ignored))
			memset(&r->auth, 0, sizeof(r->auth));
	}
	created = r->status == 201 ? api_audit_created_id(r->resp, r->resp_len) : 0;
	facts_of(p, r);
	if (created)
		p[10] = ty_arena_printf(r->arena, "%lld", (long long)created);
	p[11] = ty_arena_printf(r->arena, "%u", r->status);
	p[12] = r->problem_code;
	/*
	 * An asynchronous commit (set_config local to this statement's own
	 * transaction): no second WAL flush per request. The mutation itself
	 * committed synchronously before; a PostgreSQL crash may lose the last
	 * few hundred ms of audit rows (docs/security.md "Audit log").
	 */
	rc = ty_pg_exec(NULL, r->pg,
			"INSERT INTO audit_requests (request_id, token_id, principal, role, team,"
			" trial_job, method, route, path, target_ids, created_id, status,"
			" problem_code, peer, summary)"
			" SELECT $1, $2::bigint, $3, $4, $5, $6::bigint, $7, $8, $9, $10::text[],"
			" $11::bigint, $12::int, $13, $14::inet, $15"
			" WHERE set_config('synchronous_commit', 'off', true) = 'off'",
			15, p, &err);
	if (rc)
		goto fail;
	goto out;
fail:
	/* the request's own facts only: never a header or the body */
	ty_error("audit: cannot record %s %s (request %s, status %u): %s", r->method,
		 clean(r, r->path, 256), r->request_id, r->status, err.msg);
out:
	if (r->pg) {
		api__pool_put(r->srv, r->pg);
		r->pg = NULL;
	}
}

/* ---- GET /v1/audit ---------------------------------------------------- */

static int bad_param(struct api_req *r, const char *name, const char *what)
{
	return api_reply_error(r, API_P_INVALID_PARAMETER, name, "'%s' must be %s", name, what);
}

int api_h_audit_list(struct api_req *r, struct ty_err *err)
{
	const char *token = api_query(r, "token_id"), *principal = api_query(r, "principal");
	const char *team = api_query(r, "team"), *method = api_query(r, "method");
	const char *prefix = api_query(r, "path_prefix"), *since = api_query(r, "since");
	const char *until = api_query(r, "until"), *cursor = api_query(r, "cursor");
	long long status, limit;
	const char *p[10] = {NULL};
	int64_t v, ms;
	PGresult *res = NULL;
	int rc;

	if (token && !api_parse_id(&v, token))
		return bad_param(r, "token_id", "a token id");
	if (method && !api_audit_method(method))
		return bad_param(r, "method", "POST, PUT, PATCH or DELETE");
	if (api_int_param(r, &status, "status", 0, 100, 599) ||
	    api_int_param(r, &limit, "limit", 50, 1, 500))
		return 0;
	if (cursor && !api_parse_id(&v, cursor))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "cursor",
				       "'cursor' is not one this server gave out");
	p[0] = token;
	p[1] = principal;
	p[2] = team;
	p[3] = method;
	p[4] = prefix;
	if (api_query(r, "status"))
		p[5] = ty_arena_printf(r->arena, "%lld", status);
	if (since) {
		if (!ty_time_parse_rfc3339(&ms, since))
			return bad_param(r, "since",
					 "an RFC 3339 time such as 2026-01-31T00:00:00Z");
		p[6] = ty_arena_printf(r->arena, "%lld", (long long)ms);
	}
	if (until) {
		if (!ty_time_parse_rfc3339(&ms, until))
			return bad_param(r, "until",
					 "an RFC 3339 time such as 2026-01-31T00:00:00Z");
		p[7] = ty_arena_printf(r->arena, "%lld", (long long)ms);
	}
	p[8] = cursor;
	p[9] = ty_arena_printf(r->arena, "%lld", limit);
	/* one more row than asked tells whether another page exists */
	rc = ty_pg_exec(&res, r->pg,
			"WITH page AS (SELECT * FROM audit_requests a"
			"  WHERE ($1::bigint IS NULL OR a.token_id = $1)"
			"  AND ($2::text IS NULL OR a.principal = $2)"
			"  AND ($3::text IS NULL OR a.team = $3)"
			"  AND ($4::text IS NULL OR a.method = $4)"
			"  AND ($5::text IS NULL OR starts_with(a.path, $5))"
			"  AND ($6::int IS NULL OR a.status = $6)"
			"  AND ($7::bigint IS NULL"
			"   OR a.at >= 'epoch'::timestamptz + $7::bigint * interval '1 ms')"
			"  AND ($8::bigint IS NULL"
			"   OR a.at < 'epoch'::timestamptz + $8::bigint * interval '1 ms')"
			"  AND ($9::bigint IS NULL OR a.id < $9)"
			"  ORDER BY a.id DESC LIMIT $10::int + 1),"
			" shown AS (SELECT * FROM page ORDER BY id DESC LIMIT $10::int)"
			" SELECT coalesce((SELECT json_agg(json_build_object('id', s.id,"
			"  'time', ty_ts(s.at), 'request_id', s.request_id, 'token_id', s.token_id,"
			"  'principal', s.principal, 'role', s.role, 'team', s.team,"
			"  'trial_job', s.trial_job, 'method', s.method, 'route', s.route,"
			"  'path', s.path, 'target_ids', s.target_ids, 'created_id', s.created_id,"
			"  'status', s.status, 'problem_code', s.problem_code,"
			"  'peer', host(s.peer), 'summary', s.summary) ORDER BY s.id DESC)"
			"  FROM shown s), '[]')::text,"
			" CASE WHEN (SELECT count(*) FROM page) > $10::int"
			"  THEN (SELECT min(id) FROM shown)::text END",
			10, p, err);
	if (rc)
		return rc;
	rc = api_reply_page(r, PQgetvalue(res, 0, 0), ty_pg_val(res, 0, 1), err);
	PQclear(res);
	return rc;
}

/* ---- retention -------------------------------------------------------- */

/* Rows deleted per statement, so one prune never holds a long transaction. */
#define PRUNE_BATCH 10000
#define PRUNE_EVERY_MS (3600 * 1000)

struct api_audit_pruner {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, started;
	char *url;
	char days[16];
};

/* One pass: delete the rows older than the retention, a batch at a time. */
static void prune_pass(struct api_audit_pruner *p, struct ty_pg **pg)
{
	char batch[16];
	const char *params[2] = {p->days, batch};
	struct ty_err err = {0};
	long long total = 0, n;
	bool stop = false;

	snprintf(batch, sizeof(batch), "%d", PRUNE_BATCH);
	if (!*pg && ty_pg_connect(pg, p->url, &err)) {
		ty_warn("audit: cannot prune: %s", err.msg);
		return;
	}
	do {
		PGresult *res = NULL;

		if (ty_pg_exec(&res, *pg,
			       "WITH d AS (DELETE FROM audit_requests WHERE id IN (SELECT id"
			       "  FROM audit_requests WHERE at < now() - $1::int * interval '1 day'"
			       "  ORDER BY at LIMIT $2::int) RETURNING 1)"
			       " SELECT count(*) FROM d",
			       2, params, &err)) {
			ty_warn("audit: cannot prune: %s", err.msg);
			break;
		}
		n = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		PQclear(res);
		total += n;
		pthread_mutex_lock(&p->mu);
		stop = p->stop;
		pthread_mutex_unlock(&p->mu);
	} while (n == PRUNE_BATCH && !stop);
	if (total)
		ty_info("audit: pruned %lld record(s) older than %s day(s)", total, p->days);
}

static void *prune_main(void *arg)
{
	struct api_audit_pruner *p = arg;
	struct ty_pg *pg = NULL;

	pthread_mutex_lock(&p->mu);
	while (!p->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&p->mu);
		prune_pass(p, &pg);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += PRUNE_EVERY_MS / 1000;
		pthread_mutex_lock(&p->mu);
		while (!p->stop && pthread_cond_timedwait(&p->cv, &p->mu, &ts) == 0)
			;
	}
	pthread_mutex_unlock(&p->mu);
	ty_pg_close(pg);
	return NULL;
}

int api__audit_prune_start(struct api_audit_pruner **out, const char *database_url, int days,
			   struct ty_err *err)
{
	struct api_audit_pruner *p;

	*out = NULL;
	if (days <= 0)
		return 0;
	if (!(p = calloc(1, sizeof(*p))) || !(p->url = strdup(database_url))) {
		free(p);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	snprintf(p->days, sizeof(p->days), "%d", days);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	if (pthread_create(&p->thread, NULL, prune_main, p)) {
		api__audit_prune_stop(p);
		return ty_err_set(err, TY_EIO, "cannot start the audit pruner thread");
	}
	p->started = true;
	*out = p;
	return 0;
}

void api__audit_prune_stop(struct api_audit_pruner *p)
{
	if (!p)
		return;
	if (p->started) {
		pthread_mutex_lock(&p->mu);
		p->stop = true;
		pthread_cond_signal(&p->cv);
		pthread_mutex_unlock(&p->mu);
		pthread_join(p->thread, NULL);
	}
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p->url);
	free(p);
}
