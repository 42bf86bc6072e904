/*
 * The audit log: one audit_requests row per mutating request, written from the
 * reply point (server.c) on the request's own connection, and GET /v1/audit.
 */
#include "api.h"
#include "store.h"
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

const char *api_role_name(enum api_role role)
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

/* The columns that do not depend on the reply: all but created_id, status and problem_code. */
static void facts_of(const char *p[API_AUDIT_NCOLS], struct api_req *r)
{
	p[API_AUDIT_request_id] = r->request_id;
	if (r->auth.token_id)
		p[API_AUDIT_token_id] =
		    ty_arena_printf(r->arena, "%lld", (long long)r->auth.token_id);
	p[API_AUDIT_principal] = r->auth.role ? clean(r, r->auth.token_name, 200) : NULL;
	p[API_AUDIT_role] = api_role_name(r->auth.role);
	p[API_AUDIT_team] = r->auth.role ? clean(r, r->auth.team, 200) : NULL;
	if (r->auth.trial_job)
		p[API_AUDIT_trial_job] =
		    ty_arena_printf(r->arena, "%lld", (long long)r->auth.trial_job);
	p[API_AUDIT_method] = r->method;
	p[API_AUDIT_route] = r->route ? r->route->pattern : NULL;
	p[API_AUDIT_path] = clean(r, r->path, 2048);
	p[API_AUDIT_target_ids] = targets_of(r);
	p[API_AUDIT_peer] = peer_of(r);
	/* a short summary only: the body may hold secrets (tokens, webhook secrets) */
	if (json_is_object(r->json))
		p[API_AUDIT_summary] =
		    clean(r, json_string_value(json_object_get(r->json, "name")), 200);
}

json_t *api__audit_facts(struct api_req *r)
{
	const char *p[API_AUDIT_NCOLS] = {NULL};

	facts_of(p, r);
	return json_pack("{s:s, s:s?, s:s?, s:s?, s:s?, s:s?, s:s, s:s?, s:s?, s:s?, s:s?, s:s?}",
			 "request_id", p[API_AUDIT_request_id], "token_id", p[API_AUDIT_token_id],
			 "principal", p[API_AUDIT_principal], "role", p[API_AUDIT_role], "team",
			 p[API_AUDIT_team], "trial_job", p[API_AUDIT_trial_job], "method",
			 p[API_AUDIT_method], "route", p[API_AUDIT_route], "path",
			 p[API_AUDIT_path], "target_ids", p[API_AUDIT_target_ids], "peer",
			 p[API_AUDIT_peer], "summary", p[API_AUDIT_summary]);
}

void api__audit_request(struct api_req *r)
{
	struct ty_err err = {0};
	const char *p[API_AUDIT_NCOLS] = {NULL};
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
		p[API_AUDIT_created_id] = ty_arena_printf(r->arena, "%lld", (long long)created);
	p[API_AUDIT_status] = ty_arena_printf(r->arena, "%u", r->status);
	p[API_AUDIT_problem_code] = r->problem_code;
	/* committed asynchronously: see api_store_audit_request */
	rc = api_store_audit_request(r->pg, p, &err);
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

static int bad_param(struct api_req *r, const char *name, const char *what, struct ty_err *err)
{
	return api_fail(r, err, API_P_INVALID_PARAMETER, name, "'%s' must be %s", name, what);
}

int api_h_audit_list(struct api_req *r, struct ty_err *err)
{
	const char *token = api_query(r, "token_id"), *principal = api_query(r, "principal");
	const char *team = api_query(r, "team"), *method = api_query(r, "method");
	const char *prefix = api_query(r, "path_prefix"), *since = api_query(r, "since");
	const char *until = api_query(r, "until"), *cursor = api_query(r, "cursor");
	long long status, limit;
	struct api_audit_filter f = {0};
	const char *items, *next;
	int64_t v, ms;
	int rc;

	if (token && !api_parse_id(&v, token))
		return bad_param(r, "token_id", "a token id", err);
	if (method && !api_audit_method(method))
		return bad_param(r, "method", "POST, PUT, PATCH or DELETE", err);
	if ((rc = api_int_param(r, err, &status, "status", 0, 100, 599)) ||
	    (rc = api_int_param(r, err, &limit, "limit", 50, 1, 500)))
		return rc;
	if (cursor && !api_parse_id(&v, cursor))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "cursor",
				"'cursor' is not one this server gave out");
	f.token_id = token;
	f.principal = principal;
	f.team = team;
	f.method = method;
	f.path_prefix = prefix;
	if (api_query(r, "status"))
		f.status = ty_arena_printf(r->arena, "%lld", status);
	if (since) {
		if (!ty_time_parse_rfc3339(&ms, since))
			return bad_param(r, "since",
					 "an RFC 3339 time such as 2026-01-31T00:00:00Z", err);
		f.since_ms = ty_arena_printf(r->arena, "%lld", (long long)ms);
	}
	if (until) {
		if (!ty_time_parse_rfc3339(&ms, until))
			return bad_param(r, "until",
					 "an RFC 3339 time such as 2026-01-31T00:00:00Z", err);
		f.until_ms = ty_arena_printf(r->arena, "%lld", (long long)ms);
	}
	f.before_id = cursor;
	f.limit = ty_arena_printf(r->arena, "%lld", limit);
	if ((rc = api_store_audit_page(&items, &next, r->pg, r->arena, &f, err)))
		return rc;
	return api_reply_page(r, items, next, err);
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
	int days;
};

/* One pass: delete the rows older than the retention, a batch at a time. */
static void prune_pass(struct api_audit_pruner *p, struct ty_pg **pg)
{
	struct ty_err err = {0};
	long long total = 0, n;
	bool stop = false;

	if (!*pg && ty_pg_connect(pg, p->url, &err)) {
		ty_warn("audit: cannot prune: %s", err.msg);
		return;
	}
	do {
		if (api_store_audit_prune(&n, *pg, p->days, PRUNE_BATCH, &err)) {
			ty_warn("audit: cannot prune: %s", err.msg);
			break;
		}
		total += n;
		pthread_mutex_lock(&p->mu);
		stop = p->stop;
		pthread_mutex_unlock(&p->mu);
	} while (n == PRUNE_BATCH && !stop);
	if (total)
		ty_info("audit: pruned %lld record(s) older than %d day(s)", total, p->days);
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
	p->days = days;
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
