/* The HTTP server: request lifecycle, route dispatch, limits, CORS, replies. */
#include "api.h"
#include "store.h"
#include "ty_json.h"
#include "ty_log.h"
#include "ty_time.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct api_server {
	struct MHD_Daemon *mhd;
	struct api_options opt;
	int port;
	/* connection pool */
	pthread_mutex_t pool_mu;
	pthread_cond_t pool_cv;
	struct ty_pg **pool;
	int pool_size, pool_free;
	/* watcher: see watch.c */
	struct api_watch *watch;
	struct api_tokens *tokens; /* auth.c */
	/* submission batches: see submit.c */
	struct api_submitter *submitter;
	/* webhook deliverer: see deliver.c */
	struct api_deliver *deliver;
	/* per-token rate limits, NULL when off: see ratelimit.c */
	struct api_ratelimit *ratelimit;
	struct api_audit_pruner *pruner; /* audit.c */
	char *ui_dir; /* --ui-dir resolved, or NULL */
};

/* ---- replies ---------------------------------------------------------- */

static void reply_set(struct api_req *r, unsigned status, char *body, size_t len,
		      const char *ctype)
{
	free(r->resp);
	r->resp = body;
	r->resp_len = len;
	r->status = status;
	r->content_type = ctype;
	r->problem_code = NULL;
}

void api__reply_take(struct api_req *r, unsigned status, char *body, size_t len,
		     const char *ctype)
{
	reply_set(r, status, body, len, ctype);
}

int api_reply_text(struct api_req *r, unsigned status, const char *json_text)
{
	char *copy = strdup(json_text);

	if (!copy)
		return TY_ENOMEM;
	reply_set(r, status, copy, strlen(copy), "application/json");
	return 0;
}

int api_reply_json(struct api_req *r, unsigned status, json_t *body)
{
	char *s = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);

	json_decref(body);
	if (!s)
		return TY_ENOMEM;
	reply_set(r, status, s, strlen(s), "application/json");
	return 0;
}

int api_reply_page(struct api_req *r, const char *items_json, const char *cursor,
		   struct ty_err *err)
{
	struct ty_buf b = TY_BUF_INIT;
	int rc;

	ty_buf_printf(&b, "{\"items\":%s,\"next_cursor\":", items_json);
	if (cursor)
		ty_buf_json_str(&b, cursor);
	else
		ty_buf_puts(&b, "null");
	ty_buf_puts(&b, "}");
	rc = b.oom ? ty_err_set(err, TY_ENOMEM, NULL) : api_reply_text(r, 200, b.data);
	ty_buf_free(&b);
	return rc;
}

int api_reply_header(struct api_req *r, const char *name, const char *value)
{
	if (r->nhdr >= (int)(sizeof(r->hdr_name) / sizeof(r->hdr_name[0])))
		return TY_EINVAL;
	r->hdr_name[r->nhdr] = name;
	r->hdr_value[r->nhdr] = ty_arena_strdup(r->arena, value);
	r->nhdr++;
	return 0;
}

static const struct {
	const char *code;
	unsigned status;
	const char *title;
} problems[API_P_COUNT] = {
#define API_PCODE_ROW(name, c, s, t) [API_P_##name] = {c, s, t},
	API_PROBLEMS(API_PCODE_ROW)
#undef API_PCODE_ROW
};

static void problem_vset(struct api_problem *p, enum api_pcode pc, const char *field,
			 const char *fmt, va_list ap)
{
	p->status = problems[pc].status;
	p->code = problems[pc].code;
	snprintf(p->field, sizeof(p->field), "%s", field ? field : "");
	vsnprintf(p->detail, sizeof(p->detail), fmt, ap);
}

int api_problem_set(struct api_problem *p, enum api_pcode pc, const char *field,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	problem_vset(p, pc, field, fmt, ap);
	va_end(ap);
	return TY_EINVAL;
}

const char *api_problem_title(const char *code)
{
	for (int i = 0; i < API_P_COUNT; i++)
		if (!strcmp(problems[i].code, code))
			return problems[i].title;
	return NULL;
}

int api_reply_problem(struct api_req *r, const struct api_problem *p)
{
	const char *title = api_problem_title(p->code);
	json_t *o;
	char *s;

	o = json_pack("{s:s+, s:s, s:i, s:s, s:s}", "type", "https://trainyard.dev/problems/",
		      p->code, "title", title ? title : p->code, "status", (int)p->status, "code",
		      p->code, "detail", p->detail);
	if (!o)
		return TY_ENOMEM;
	if (p->field[0])
		json_object_set_new(o, "field", json_string(p->field));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!s)
		return TY_ENOMEM;
	reply_set(r, p->status, s, strlen(s), "application/problem+json");
	r->problem_code = ty_arena_strdup(r->arena, p->code);
	if (p->status == 503)
		api_reply_header(r, "Retry-After", "1");
	if (p->status == 401)
		api_reply_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"trainyard\"");
	return 0;
}

int api_reply_error(struct api_req *r, enum api_pcode pc, const char *field, const char *fmt,
		    ...)
{
	struct api_problem p = {0};
	va_list ap;

	va_start(ap, fmt);
	problem_vset(&p, pc, field, fmt, ap);
	va_end(ap);
	return api_reply_problem(r, &p);
}

int api_reply_from_err(struct api_req *r, int code, const struct ty_err *err)
{
	const char *msg = err && err->msg[0] ? err->msg : ty_code_desc(code);
	enum api_pcode pc;

	if (code <= API_ERR_PROBLEM(0) && code > API_ERR_PROBLEM(API_P_COUNT))
		return api_reply_error(r, (enum api_pcode)(API_ERR_PROBLEM(0) - code),
				       r->problem_field, "%s", msg);
	switch (code) {
	case TY_EUNAVAIL:
	case TY_ETIMEDOUT:
		pc = API_P_UNAVAILABLE;
		break;
	case TY_ENOTFOUND:
		pc = API_P_NOT_FOUND;
		break;
	case TY_EAUTH:
		pc = API_P_UNAUTHENTICATED;
		break;
	case TY_EPERM:
		pc = API_P_FORBIDDEN;
		break;
	case TY_ECONFLICT:
		pc = API_P_CONFLICT;
		break;
	case TY_EINVAL:
		pc = API_P_INVALID_FIELD;
		break;
	default:
		ty_error("%s %s: %s", r->method, r->path, msg);
		pc = API_P_INTERNAL;
	}
	return api_reply_error(r, pc, NULL, "%s", msg);
}

static int failv(struct api_req *r, struct ty_err *err, enum api_pcode pc, const char *field,
		 const char *fmt, va_list ap)
{
	r->problem_field = field ? ty_arena_strdup(r->arena, field) : NULL;
	ty_err_clear(err);
	ty_err_setv(err, API_ERR_PROBLEM(pc), fmt, ap);
	return API_ERR_PROBLEM(pc);
}

int api_fail(struct api_req *r, struct ty_err *err, enum api_pcode pc, const char *field,
	     const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = failv(r, err, pc, field, fmt, ap);
	va_end(ap);
	return rc;
}

/* The dispatcher's own refusals: answered as a handler's are, by api_reply_from_err. */
static void __attribute__((format(printf, 4, 5)))
refuse(struct api_req *r, enum api_pcode pc, const char *field, const char *fmt, ...)
{
	struct ty_err err = {0};
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = failv(r, &err, pc, field, fmt, ap);
	va_end(ap);
	api_reply_from_err(r, rc, &err);
}

int api_fail_problem(struct api_req *r, struct ty_err *err, const struct api_problem *p)
{
	int pc = 0;

	while (pc < API_P_COUNT && strcmp(problems[pc].code, p->code))
		pc++;
	if (pc == API_P_COUNT) /* a check's bug: not a code of the table */
		pc = API_P_INTERNAL;
	return api_fail(r, err, (enum api_pcode)pc, p->field[0] ? p->field : NULL, "%s", p->detail);
}

const char *api_scope(struct api_req *r)
{
	return r->auth.role == API_ROLE_ADMIN
		       ? NULL
		       : ty_arena_printf(r->arena, "%lld", (long long)r->auth.team_id);
}

const char *api_query(struct api_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *api_header(struct api_req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

bool api_parse_id(int64_t *out, const char *s)
{
	char *end;
	long long v;

	if (!s || !isdigit((unsigned char)*s) || strlen(s) > 18) /* no sign, no blank */
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v <= 0)
		return false;
	*out = v;
	return true;
}

/* ---- pool ------------------------------------------------------------- */

int api__pool_get(struct ty_pg **out, struct api_server *s, struct ty_err *err)
{
	int64_t deadline = ty_mono_ms() + 5000;
	struct ty_pg *pg = NULL;
	bool got = false;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&s->pool_mu);
	while (s->pool_free == 0 && ty_mono_ms() < deadline) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->pool_cv, &s->pool_mu, &ts);
	}
	if (s->pool_free > 0) {
		pg = s->pool[--s->pool_free];
		got = true;
	}
	pthread_mutex_unlock(&s->pool_mu);
	if (!got)
		return ty_err_set(err, TY_EUNAVAIL, "all database connections are busy");
	if (!pg && (rc = ty_pg_connect(&pg, s->opt.database_url, err))) {
		/* the slot stays empty; a later request tries again */
		api__pool_put(s, NULL);
		return rc;
	}
	*out = pg;
	return 0;
}

void api__pool_put(struct api_server *s, struct ty_pg *pg)
{
	if (pg && ty_pg_in_tx(pg))
		ty_pg_rollback(pg); /* a handler bailed out mid-transaction */
	pthread_mutex_lock(&s->pool_mu);
	s->pool[s->pool_free++] = pg;
	pthread_cond_signal(&s->pool_cv);
	pthread_mutex_unlock(&s->pool_mu);
}

/* ---- dispatch --------------------------------------------------------- */

/* Match path against pattern, capturing "{}" segments into params (when a is not NULL). */
static bool match(struct ty_arena *a, const char **params, const char *pattern, const char *path)
{
	int n = 0;

	while (*pattern) {
		if (!strcmp(pattern, "{*}")) {
			if (n >= 4)
				return false;
			if (a)
				params[n] = ty_arena_strdup(a, path);
			return true;
		}
		if (!*path)
			break;
		if (pattern[0] == '{' && pattern[1] == '}') {
			size_t len = strcspn(path, "/");

			if (len == 0 || n >= 4)
				return false;
			if (a)
				params[n] = ty_arena_strndup(a, path, len);
			n++;
			pattern += 2;
			path += len;
			continue;
		}
		if (*pattern++ != *path++)
			return false;
	}
	return *pattern == '\0' && *path == '\0';
}

const struct api_route *api_route_find(const char *method, const char *path, struct ty_arena *a,
				       const char *params[4], char *allow, size_t allowsz)
{
	allow[0] = '\0';
	for (int i = 0; i < api_routes_count; i++) {
		size_t n = strlen(allow);

		if (!match(NULL, NULL, api_routes[i].pattern, path))
			continue;
		if (strcmp(api_routes[i].method, method) == 0) {
			match(a, params, api_routes[i].pattern, path);
			return &api_routes[i];
		}
		if (!strstr(allow, api_routes[i].method))
			snprintf(allow + n, allowsz - n, "%s%s", n ? ", " : "",
				 api_routes[i].method);
	}
	return NULL;
}

static bool origin_allowed(const struct api_server *s, const char *origin)
{
	const char *list = s->opt.cors_origins;
	size_t olen;

	if (!origin || !list || !*list)
		return false;
	olen = strlen(origin);
	while (*list) {
		size_t len = strcspn(list, ",");
		const char *item = list;

		while (len && *item == ' ')
			item++, len--;
		while (len && item[len - 1] == ' ')
			len--;
		if (len == olen && strncmp(item, origin, olen) == 0)
			return true;
		list += strcspn(list, ",");
		if (*list == ',')
			list++;
	}
	return false;
}

static int preflight(struct api_req *r, const char *allow)
{
	const char *origin = api_header(r, "Origin");
	const char *want = api_header(r, "Access-Control-Request-Method");

	if (!origin_allowed(r->srv, origin)) {
		refuse(r, API_P_CORS_FORBIDDEN, NULL, "origin '%s' is not allowed",
		       origin ? origin : "");
		return 0;
	}
	if (!want || !strstr(allow, want)) {
		refuse(r, API_P_CORS_FORBIDDEN, NULL, "method '%s' is not allowed on '%s'",
		       want ? want : "", r->path);
		return 0;
	}
	r->origin = ty_arena_strdup(r->arena, origin);
	reply_set(r, 204, NULL, 0, NULL);
	api_reply_header(r, "Access-Control-Allow-Methods", allow);
	api_reply_header(r, "Access-Control-Allow-Headers",
			 "Authorization, Content-Type, Idempotency-Key");
	api_reply_header(r, "Access-Control-Max-Age", "600");
	return 0;
}

static bool content_type_json(const char *ct)
{
	size_t n = strlen("application/json");

	return ct && strncasecmp(ct, "application/json", n) == 0 &&
	       (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

/* Whether the job named by the path exists in the caller's team (or at all, for admins). */
static bool job_visible(struct api_req *r)
{
	struct ty_err err = {0};
	bool found;
	int64_t id;

	if (!api_parse_id(&id, r->params[0]))
		return false;
	if (api_store_job_visible(&found, r->pg, r->params[0], api_scope(r), &err))
		return true; /* cannot tell: the role answer reveals nothing either way */
	return found;
}

/* One query parameter: its name and value must be UTF-8 text (PostgreSQL takes nothing else). */
static enum MHD_Result query_arg_ok(void *cls, enum MHD_ValueKind kind, const char *key,
				   size_t key_size, const char *value, size_t value_size)
{
	const char **bad = cls;

	(void)kind;
	if (!api_text_ok(key, key_size, true) ||
	    (value && !api_text_ok(value, value_size, false))) {
		*bad = key;
		return MHD_NO;
	}
	return MHD_YES;
}

/*
 * The decoded path and query must be text before any of it reaches a
 * handler, SQL or a log line: a path no resource can have (not UTF-8, or a
 * control character) is 404, a query parameter that is not UTF-8 is 400.
 * False when a reply was queued.
 */
static bool request_text_ok(struct api_req *r)
{
	const char *bad = NULL;

	if (!api_text_ok(r->path, strlen(r->path), true)) {
		char *shown = ty_arena_strdup(r->arena, r->path);

		refuse(r, API_P_NOT_FOUND, NULL,
		       "no route: the path is not UTF-8 text without control characters");
		/* the request log line shows it with every byte but printable ASCII masked */
		for (unsigned char *c = (unsigned char *)shown; c && *c; c++)
			if (*c < 0x20 || *c >= 0x7f)
				*c = '?';
		r->path = shown ? shown : "?";
		return false;
	}
	MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, query_arg_ok, &bad);
	if (bad) {
		bool name_ok = api_text_ok(bad, strlen(bad), true);

		refuse(r, API_P_INVALID_PARAMETER, name_ok ? bad : NULL,
		       "query parameter '%s' is not UTF-8 text", name_ok ? bad : "?");
		return false;
	}
	return true;
}

static void dispatch(struct api_req *r)
{
	struct ty_err err = {0};
	char allow[64] = "", field[sizeof(((struct api_problem *)0)->field)];
	int rc;

	if (!r->route) {
		if (!request_text_ok(r))
			return;
		r->route = api_route_find(r->method, r->path, r->arena, r->params, allow,
					  sizeof(allow));
		if (!r->route) {
			if (!allow[0])
				refuse(r, API_P_NOT_FOUND, NULL, "no route '%s'", r->path);
			else if (strcmp(r->method, "OPTIONS") == 0)
				preflight(r, allow);
			else {
				refuse(r, API_P_METHOD_NOT_ALLOWED, NULL, "'%s' does not allow %s",
				       r->path, r->method);
				api_reply_header(r, "Allow", allow);
			}
			return;
		}
		if (origin_allowed(r->srv, api_header(r, "Origin")))
			r->origin = ty_arena_strdup(r->arena, api_header(r, "Origin"));
	}

	if (r->route->flags & API_BODY) {
		if (r->body_too_large) {
			refuse(r, API_P_BODY_TOO_LARGE, NULL,
			       "request body is larger than %zu bytes", r->srv->opt.max_body_bytes);
			return;
		}
		if (!r->json) {
			if (!content_type_json(api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE))) {
				refuse(r, API_P_UNSUPPORTED_MEDIA_TYPE, NULL,
				       "send the body as 'application/json'");
				return;
			}
			rc = ty_json_parse(&r->json, r->body.data ? r->body.data : "", r->body.len,
					   r->srv->opt.max_json_depth, &err);
			if (rc) {
				refuse(r,
				       rc == TY_ETOOBIG ? API_P_JSON_TOO_DEEP : API_P_INVALID_JSON,
				       NULL, "%s", err.msg);
				return;
			}
			if (!json_is_object(r->json)) {
				refuse(r, API_P_INVALID_JSON, NULL,
				       "the body must be a JSON object, not %s",
				       ty_json_type_name(r->json));
				return;
			}
			if (api_json_has_nul(field, sizeof(field), r->json)) {
				refuse(r, API_P_INVALID_FIELD, field,
				       "'%s' holds a NUL character (\\u0000)", field);
				return;
			}
		}
	}

	/* a submission back from its batch takes a connection only if it needs one */
	if (!r->sub && (r->route->flags & API_AUTH || r->route->role != API_ROLE_NONE ||
			strcmp(r->route->pattern, "/readyz") == 0)) {
		if ((rc = api__pool_get(&r->pg, r->srv, &err))) {
			api_reply_from_err(r, rc, &err);
			return;
		}
	}
	if (r->route->flags & API_AUTH && !r->auth.role) {
		if ((rc = api__authenticate(r, &err))) {
			api_reply_from_err(r, rc, &err);
			goto out;
		}
		if (r->auth.trial_job && !(r->route->flags & API_TRIAL)) {
			refuse(r, API_P_FORBIDDEN, NULL,
			       "a trial metrics token may only report and read its "
			       "job's metrics, not %s %s",
			       r->method, r->route->pattern);
			goto out;
		}
		if ((rc = api__ratelimit_check(r, r->srv->ratelimit, &err))) {
			api_reply_from_err(r, rc, &err);
			goto out;
		}
		if (r->auth.role < r->route->role) {
			if (r->route->flags & API_JOB && !job_visible(r)) {
				refuse(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
				goto out;
			}
			refuse(r, API_P_FORBIDDEN, NULL, "%s %s needs the %s role", r->method,
			       r->route->pattern,
			       r->route->role == API_ROLE_ADMIN ? "admin" : "member");
			goto out;
		}
	}
	rc = r->route->fn(r, &err);
	if (rc && !r->parked)
		api_reply_from_err(r, rc, &err);
out:
	if (r->pg && !api_audit_method(r->method)) { /* else the audit row uses it first */
		api__pool_put(r->srv, r->pg);
		r->pg = NULL;
	}
}

static enum MHD_Result queue_reply(struct api_req *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	bool cache_set = false;

	if (!r->status)
		refuse(r, API_P_INTERNAL, NULL, "handler for %s %s gave no reply", r->method,
		       r->path);
	api__audit_request(r);
	resp = MHD_create_response_from_buffer(r->resp_len, r->resp ? r->resp : (void *)"",
					       r->resp ? MHD_RESPMEM_MUST_FREE
						       : MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	r->resp = NULL; /* MHD owns it now */
	if (r->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
	for (int i = 0; i < r->nhdr; i++)
		MHD_add_response_header(resp, r->hdr_name[i], r->hdr_value[i]);
	if (r->origin) {
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->origin);
		MHD_add_response_header(resp, "Vary", "Origin");
	}
	for (int i = 0; i < r->nhdr; i++)
		cache_set |= !strcasecmp(r->hdr_name[i], "Cache-Control");
	if (!cache_set)
		MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Request-Id", r->request_id);
	ret = MHD_queue_response(r->conn, r->status, resp);
	MHD_destroy_response(resp);
	api__metrics_request(r);
	ty_debug("%s %s %u", r->method, r->path, r->status);
	return ret;
}

struct framing {
	int content_length, transfer_encoding;
	const char *first_length;
	bool lengths_differ;
};

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
				     const char *value)
{
	struct framing *f = cls;

	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
		if (f->content_length++ && strcmp(f->first_length, value ? value : ""))
			f->lengths_differ = true;
		else
			f->first_length = value ? value : "";
	} else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
		f->transfer_encoding++;
	}
	return MHD_YES;
}

/*
 * A body whose length two headers state differently (two Content-Lengths,
 * or one with Transfer-Encoding) is where a proxy and this server could
 * disagree on where the next request starts: refuse it (RFC 9112 6.3).
 */
static bool framing_ok(struct MHD_Connection *conn)
{
	struct framing f = {0};

	MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
	return !f.lengths_differ && !(f.content_length && f.transfer_encoding);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version,
				  const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct api_server *s = cls;
	struct api_req *r = *con_cls;

	if (!r) {
		struct ty_arena *a = ty_arena_new();
		const char *cl;

		if (!a || !(r = ty_arena_alloc(a, sizeof(*r)))) {
			ty_arena_free(a);
			return MHD_NO;
		}
		memset(r, 0, sizeof(*r));
		r->arena = a;
		r->started = api__metrics_now();
		r->srv = s;
		r->conn = conn;
		r->method = ty_arena_strdup(a, method);
		r->path = ty_arena_strdup(a, url);
		api_request_id(r->request_id);
		*con_cls = r;
		if (!framing_ok(conn)) {
			r->body_too_large = true; /* ignore what body there is */
			refuse(r, API_P_INVALID_HEADER, MHD_HTTP_HEADER_CONTENT_LENGTH,
			       "conflicting Content-Length or Transfer-Encoding headers");
			api_reply_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
			return queue_reply(r);
		}
		/* refuse an announced oversized body before reading any of it */
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > s->opt.max_body_bytes) {
			r->body_too_large = true;
			refuse(r, API_P_BODY_TOO_LARGE, NULL,
			       "request body of %s bytes is larger than %zu bytes", cl,
			       s->opt.max_body_bytes);
			return queue_reply(r);
		}
		return MHD_YES;
	}
	if (*upload_data_size) {
		/* a body trickled in to hold the connection: each byte resets the idle timeout */
		if (s->opt.body_timeout > 0 && api__metrics_now() - r->started > s->opt.body_timeout) {
			/* (the path is not checked yet: not logged) */
			ty_warn("a request body took over %d s to arrive: closing its connection",
				s->opt.body_timeout);
			return MHD_NO;
		}
		if (!r->body_too_large) {
			if (r->body.len + *upload_data_size > s->opt.max_body_bytes) {
				r->body_too_large = true;
				ty_buf_free(&r->body);
			} else if (ty_buf_append(&r->body, upload_data, *upload_data_size)) {
				return MHD_NO;
			}
		}
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (r->status && !r->parked)
		return MHD_YES; /* reply already queued (early 413) */
	r->parked = false;
	dispatch(r);
	if (r->parked)
		return MHD_YES;
	return queue_reply(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct api_req *r = *con_cls;

	if (!r)
		return;
	json_decref(r->json);
	ty_buf_free(&r->body);
	free(r->resp);
	ty_arena_free(r->arena);
	*con_cls = NULL;
}

/*
 * Percent-decoding of the path and query as libmicrohttpd does it, except
 * that %00 stays as it is: a decoded NUL would silently cut the path or a
 * parameter short wherever it is read as a C string ("/v1/jobs/7%00x" is
 * not job 7).
 */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	char *w = s;

	(void)cls;
	(void)conn;
	for (const char *p = s; *p;) {
		if (p[0] == '%' && isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2]) &&
		    !(p[1] == '0' && p[2] == '0')) {
			char hex[3] = {p[1], p[2], '\0'};

			*w++ = (char)strtol(hex, NULL, 16);
			p += 3;
		} else {
			*w++ = *p++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '.'))
		msg[--n] = '\0';
	ty_warn("http: %s", msg);
}

int api_server_port(const struct api_server *s)
{
	return s->port;
}

const char *api__ui_dir(const struct api_server *s)
{
	return s->ui_dir;
}

const struct ty_ed25519_key *api__log_key(const struct api_server *s)
{
	return s->opt.log_key;
}

int api_server_start(struct api_server **out, const struct api_options *o, struct ty_err *err)
{
	struct api_server *s = calloc(1, sizeof(*s));
	struct sockaddr_in sin = {0};
	const union MHD_DaemonInfo *info;
	bool tls = o->tls_cert_pem && o->tls_key_pem;
	struct MHD_OptionItem tls_opts[] = {
		{tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, (void *)o->tls_cert_pem},
		{MHD_OPTION_HTTPS_MEM_KEY, 0, (void *)o->tls_key_pem},
		{MHD_OPTION_END, 0, NULL},
	};
	int rc;

	*out = NULL;
	if (!s)
		return ty_err_set(err, TY_ENOMEM, NULL);
	s->opt = *o;
	pthread_mutex_init(&s->pool_mu, NULL);
	pthread_cond_init(&s->pool_cv, NULL);
	s->pool_size = o->threads + 2;
	s->pool = calloc((size_t)s->pool_size, sizeof(*s->pool));
	if (!s->pool) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto fail;
	}
	/* connect eagerly so a wrong URL fails at start, not at first use */
	for (int i = 0; i < s->pool_size; i++) {
		if ((rc = ty_pg_connect(&s->pool[i], o->database_url, err))) {
			if (i == 0)
				goto fail;
			ty_err_clear(err);
		}
		s->pool_free++;
	}
	if (o->ui_dir && !(s->ui_dir = realpath(o->ui_dir, NULL))) {
		rc = ty_err_set(err, TY_ECONFIG, "--ui-dir '%s': %s", o->ui_dir, strerror(errno));
		goto fail;
	}
	if (!(s->tokens = api__tokens_new())) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto fail;
	}
	if ((rc = api__watch_start(s, o->database_url, err)) ||
	    (rc = api__submit_start(s, o->database_url, err)))
		goto fail;
	if ((rc = api__deliver_start(s, o->database_url, &o->webhook, err)) ||
	    (rc = api__audit_prune_start(&s->pruner, o->database_url, o->audit_retention_days, err)))
		goto fail;
	if (o->rate_limit_rps > 0 &&
	    !(s->ratelimit = api_ratelimit_new(o->rate_limit_rps, o->rate_limit_burst))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto fail;
	}

	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)o->port);
	if (inet_pton(AF_INET, o->listen_addr, &sin.sin_addr) != 1) {
		rc = ty_err_set(err, TY_ECONFIG, "listen address '%s' is not an IPv4 address",
				o->listen_addr);
		goto fail;
	}
	s->mhd = MHD_start_daemon(
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
			(tls ? MHD_USE_TLS : 0),
		0,
		NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
		MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
		MHD_OPTION_THREAD_POOL_SIZE, (unsigned)o->threads, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)o->connection_timeout, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)o->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)o->max_connections_per_ip, MHD_OPTION_UNESCAPE_CALLBACK, unescape, s,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_ARRAY, tls_opts,
		MHD_OPTION_END);
	if (!s->mhd) {
		rc = ty_err_set(err, TY_EIO, "cannot listen on %s:%d: %s", o->listen_addr, o->port,
				strerror(errno));
		goto fail;
	}
	info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
	s->port = info ? info->port : o->port;
	*out = s;
	return 0;
fail:
	api_server_stop(s);
	return rc;
}

void api_server_stop(struct api_server *s)
{
	if (!s)
		return;
	if (s->mhd)
		MHD_quiesce_daemon(s->mhd);
	api__watch_stop(s); /* resumes parked requests so MHD can finish them */
	api__submit_stop(s); /* the same, once their batches are written */
	api__deliver_stop(s);
	api__audit_prune_stop(s->pruner);
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	api_ratelimit_free(s->ratelimit);
	api__tokens_free(s->tokens);
	for (int i = 0; s->pool && i < s->pool_size; i++)
		ty_pg_close(s->pool[i]);
	free(s->pool);
	free(s->ui_dir);
	pthread_mutex_destroy(&s->pool_mu);
	pthread_cond_destroy(&s->pool_cv);
	free(s);
}

/* watch.c reaches the server's watcher slot through these. */
struct api_watch **api__watch_slot(struct api_server *s);
struct api_watch **api__watch_slot(struct api_server *s)
{
	return &s->watch;
}

/* deliver.c reaches the server's deliverer slot through these. */
struct api_deliver **api__deliver_slot(struct api_server *s);
struct api_deliver **api__deliver_slot(struct api_server *s)
{
	return &s->deliver;
}

/* submit.c reaches the server's submitter slot through this. */
struct api_submitter **api__submit_slot(struct api_server *s);
struct api_submitter **api__submit_slot(struct api_server *s)
{
	return &s->submitter;
}

struct api_tokens *api__tokens(struct api_server *s)
{
	return s->tokens;
}
