/*
 * The API's HTTP surface (docs/api.md): health and description routes,
 * routing errors, problem documents, readiness without a database or below
 * this build's schema, CORS.
 */
#include "migrations.h"
#include "ty_pg.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>
#include <time.h>

/* Every route of docs/api.md. */
static const struct {
	const char *method, *path;
} routes[] = {
    {"GET", "/healthz"},
    {"GET", "/readyz"},
    {"GET", "/openapi.json"},
    {"GET", "/metrics"},
    {"POST", "/v1/teams"},
    {"GET", "/v1/teams"},
    {"GET", "/v1/teams/{name}"},
    {"PATCH", "/v1/teams/{name}"},
    {"POST", "/v1/tokens"},
    {"GET", "/v1/tokens"},
    {"DELETE", "/v1/tokens/{id}"},
    {"POST", "/v1/jobs"},
    {"GET", "/v1/jobs"},
    {"GET", "/v1/jobs/{id}"},
    {"POST", "/v1/jobs/{id}/cancel"},
    {"GET", "/v1/jobs/{id}/events"},
    {"GET", "/v1/jobs/{id}/attempts"},
    {"GET", "/v1/jobs/{id}/checkpoints"},
    {"GET", "/v1/jobs/{id}/logs"},
    {"POST", "/v1/sweeps"},
    {"GET", "/v1/sweeps"},
    {"GET", "/v1/sweeps/{id}"},
    {"POST", "/v1/sweeps/{id}/cancel"},
    {"POST", "/v1/webhooks"},
    {"GET", "/v1/webhooks"},
    {"GET", "/v1/webhooks/{id}"},
    {"DELETE", "/v1/webhooks/{id}"},
    {"GET", "/v1/webhooks/{id}/deliveries"},
    {"POST", "/v1/webhooks/{id}/ping"},
    {"GET", "/v1/nodes"},
    {"GET", "/v1/nodes/{id}"},
    {"POST", "/v1/nodes/{id}/drain"},
    {"POST", "/v1/nodes/{id}/undrain"},
    {"GET", "/v1/audit"},
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

TY_TEST(healthz)
{
	struct ty_resp r = {0};

	ty_stack_get();
	ty_http(&r, "GET", "/healthz", NULL, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "status", "ok");
	CHECK(ty_resp_header(&r, "Content-Type") &&
	      !strncmp(ty_resp_header(&r, "Content-Type"), "application/json", 16));
	CHECK_GOLDEN(r.json, "healthz");
	ty_resp_free(&r);
}

TY_TEST(readyz)
{
	struct ty_resp r = {0};

	ty_stack_get();
	ty_http(&r, "GET", "/readyz", NULL, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "status", "ready");
	ty_resp_free(&r);
}

TY_TEST(openapi_lists_every_route)
{
	struct ty_resp r = {0};
	const char *version;

	ty_stack_get();
	ty_http(&r, "GET", "/openapi.json", NULL, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_is_object(r.json));
	version = ty_jstr(r.json, "openapi");
	CHECK(version && !strncmp(version, "3.1", 3));
	CHECK(json_is_object(ty_jpath(r.json, "info")));
	for (size_t i = 0; i < NROUTES; i++) {
		json_t *path = json_object_get(json_object_get(r.json, "paths"), routes[i].path);
		char method[8];
		size_t k;

		for (k = 0; routes[i].method[k] && k < sizeof(method) - 1; k++)
			method[k] = (char)(routes[i].method[k] | 0x20);
		method[k] = '\0';
		if (!json_is_object(json_object_get(path, method)))
			FAIL("openapi.json has no %s %s", method, routes[i].path);
	}
	ty_resp_free(&r);
}

TY_TEST(no_authentication_for_health_and_description)
{
	static const char *const open_paths[] = {"/healthz", "/readyz", "/openapi.json",
						 "/metrics"};
	struct ty_resp r = {0};

	ty_stack_get();
	for (int i = 0; i < 4; i++) {
		ty_test_context("%s", open_paths[i]);
		ty_http(&r, "GET", open_paths[i], "ty_not_a_real_token", NULL, NULL);
		CHECK_STATUS(&r, 200);
	}
	ty_resp_free(&r);
}

TY_TEST(unknown_route_is_404_not_found)
{
	static const char *const paths[] = {"/v1/nope", "/nope", "/v1/jobs/1/nope", "/v2/jobs",
					    "/v1/teams/a/b"};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (int i = 0; i < 5; i++) {
		ty_test_context("GET %s", paths[i]);
		ty_http(&r, "GET", paths[i], s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 404, "not_found", NULL);
	}
	ty_resp_free(&r);
}

static bool allow_has(const char *allow, const char *method)
{
	const char *p = allow;
	size_t n = strlen(method);

	while (p && (p = strstr(p, method))) {
		bool start = p == allow || p[-1] == ' ' || p[-1] == ',';
		bool end = p[n] == '\0' || p[n] == ',' || p[n] == ' ';

		if (start && end)
			return true;
		p += n;
	}
	return false;
}

TY_TEST(wrong_method_is_405_with_allow)
{
	const struct {
		const char *method, *path;
		const char *allowed[3];
	} rows[] = {
	    {"DELETE", "/v1/jobs", {"GET", "POST"}},
	    {"PUT", "/v1/teams", {"GET", "POST"}},
	    {"DELETE", "/v1/teams/some-team", {"GET", "PATCH"}},
	    {"GET", "/v1/jobs/1/cancel", {"POST"}},
	    {"POST", "/v1/jobs/1", {"GET"}},
	    {"PATCH", "/v1/tokens/1", {"DELETE"}},
	    {"POST", "/healthz", {"GET"}},
	};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *allow;

		ty_test_context("%s %s", rows[i].method, rows[i].path);
		ty_http(&r, rows[i].method, rows[i].path, s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 405, "method_not_allowed", NULL);
		allow = ty_resp_header(&r, "Allow");
		if (!allow) {
			FAIL("no Allow header");
			continue;
		}
		for (int k = 0; k < 3 && rows[i].allowed[k]; k++)
			if (!allow_has(allow, rows[i].allowed[k]))
				FAIL("Allow: %s lacks %s", allow, rows[i].allowed[k]);
		if (allow_has(allow, rows[i].method))
			FAIL("Allow: %s lists %s", allow, rows[i].method);
	}
	ty_resp_free(&r);
}

/* Every failure answer is a full problem document, whatever produced it. */
TY_TEST(problem_documents_are_complete)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	json_t *sub;

	ty_http(&r, "GET", "/v1/jobs", NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	/* the stable members; detail is for people and may change */
	sub = json_pack("{s:O?,s:O?,s:O?,s:O?}", "type", json_object_get(r.json, "type"), "status",
			json_object_get(r.json, "status"), "code", json_object_get(r.json, "code"),
			"title", json_object_get(r.json, "title"));
	CHECK_GOLDEN(sub, "problem_unauthenticated");
	json_decref(sub);
	ty_http(&r, "GET", "/v1/jobs/999999999", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "POST", "/v1/teams", s->admin, "{", NULL);
	CHECK_PROBLEM(&r, 400, "invalid_json", NULL);
	ty_http(&r, "POST", "/v1/teams", s->admin, "{\"nominal_gpus\":1}", NULL);
	CHECK_PROBLEM(&r, 422, "missing_field", "name");
	ty_resp_free(&r);
}

/*
 * Not ready below this build's newest migration, with a detail naming the
 * migration found and the one needed: no schema, then every older version,
 * applied one at a time under one running server; ready at the newest.
 */
TY_TEST(readyz_until_the_schema_is_current)
{
	const char *db = ty_test_db_new();
	struct ty_api *api = ty_test_api_start_as_is(db, NULL);
	const int newest = ty_migrations_newest;
	struct ty_resp r = {0};
	struct ty_pg *pg = NULL;
	struct ty_err err = {0};
	int applied = 0;

	REQUIRE(ty_migrations_count > 1);
	REQUIRE_INT_EQ(newest, ty_migrations[ty_migrations_count - 1].version);
	REQUIRE_INT_EQ(ty_pg_connect(&pg, db, &err), 0);
	ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
	CHECK_PROBLEM(&r, 503, "unavailable", NULL);
	CHECK_JSTR(r.json, "detail",
		   ty_test_strf("the database has no schema, this API needs migration %04d: run "
				"'trainyard-api --migrate'",
				newest));
	for (int k = 0; k < ty_migrations_count - 1; k++) {
		ty_test_context("after %04d_%s", ty_migrations[k].version, ty_migrations[k].name);
		REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, ty_migrations, k + 1, &err), 0);
		CHECK_INT_EQ(applied, 1);
		ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
		CHECK_PROBLEM(&r, 503, "unavailable", NULL);
		CHECK_JSTR(r.json, "detail",
			   ty_test_strf("the database schema is at migration %04d, this API needs "
					"%04d: run 'trainyard-api --migrate'",
					ty_migrations[k].version, newest));
	}
	ty_test_context(NULL);
	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, ty_migrations, ty_migrations_count, &err), 0);
	CHECK_INT_EQ(applied, 1);
	ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "status", "ready");
	ty_resp_free(&r);
	ty_pg_close(pg);
	ty_test_api_stop(api);
}

/* Readiness follows the database; /v1 routes answer 503 while it is gone. */
TY_TEST(readyz_without_database)
{
	const char *db = ty_test_db_new();
	const char *name = strrchr(db, '/') + 1;
	struct ty_api *api = ty_test_api_start(db, NULL);
	const char *admin = ty_test_admin_token(db, "outage-admin");
	struct ty_resp r = {0};
	int status = 0;

	ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);

	ty_test_sql(ty_test_strf("ALTER DATABASE \"%s\" ALLOW_CONNECTIONS false", name));
	ty_test_sql(ty_test_strf("SELECT count(pg_terminate_backend(pid, 5000)) FROM "
				 "pg_stat_activity WHERE datname = '%s'",
				 name));
	ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
	CHECK_PROBLEM(&r, 503, "unavailable", NULL);
	CHECK_STR_EQ(ty_resp_header(&r, "Retry-After"), "1");
	ty_http_raw(&r, api, "GET", "/v1/teams", admin, NULL, 0, NULL);
	CHECK_PROBLEM(&r, 503, "unavailable", NULL);
	CHECK_STR_EQ(ty_resp_header(&r, "Retry-After"), "1");
	/* the server's own text (libpq's, PostgreSQL's) stays in the API's log */
	CHECK_JSTR(r.json, "detail", "the database is unavailable; retry later");
	ty_http_raw(&r, api, "GET", "/healthz", NULL, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);

	ty_test_sql(ty_test_strf("ALTER DATABASE \"%s\" ALLOW_CONNECTIONS true", name));
	/* it recovers by itself: poll for a while, no timing assertion */
	for (int i = 0; i < 100 && status != 200; i++) {
		status = ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
		if (status != 200) {
			struct timespec ts = {0, 100000000};

			nanosleep(&ts, NULL);
		}
	}
	CHECK_STATUS(&r, 200);
	ty_http_raw(&r, api, "GET", "/v1/teams", admin, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
	ty_test_api_stop(api);
}

/* ---- CORS ---- */

static const char *const *origin(const char *o, const char *preflight_method)
{
	const char **h = ty_test_alloc(4 * sizeof(*h));

	h[0] = ty_test_strf("Origin: %s", o);
	if (preflight_method)
		h[1] = ty_test_strf("Access-Control-Request-Method: %s", preflight_method);
	return h;
}

TY_TEST(cors_disallowed_by_default)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "GET", "/v1/teams", s->admin, NULL, origin("https://portal.example", NULL));
	CHECK_STATUS(&r, 200);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), NULL);
	ty_http(&r, "OPTIONS", "/v1/jobs", NULL, NULL, origin("https://portal.example", "POST"));
	CHECK_PROBLEM(&r, 403, "cors_forbidden", NULL);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), NULL);
	ty_resp_free(&r);
}

static bool list_has(const char *list, const char *item)
{
	return list && allow_has(list, item);
}

TY_TEST(cors_with_allowed_origins)
{
	const struct ty_stack *s = ty_stack_get();
	const char *const args[] = {"--cors-origins", "https://portal.example,https://b.example",
				    NULL};
	struct ty_api *api = ty_test_api_start(s->db_url, args);
	const char *allowed = "https://portal.example";
	struct ty_resp r = {0};
	const char *v;

	/* preflight from an allowed origin, for a method the route has */
	ty_http_raw(&r, api, "OPTIONS", "/v1/jobs", NULL, NULL, 0, origin(allowed, "POST"));
	CHECK_STATUS(&r, 204);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), allowed);
	v = ty_resp_header(&r, "Access-Control-Allow-Methods");
	if (!list_has(v, "POST"))
		FAIL("Access-Control-Allow-Methods '%s' lacks POST", v ? v : "(none)");
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Headers"),
		     "Authorization, Content-Type, Idempotency-Key");
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Max-Age"), "600");
	CHECK(list_has(ty_resp_header(&r, "Vary"), "Origin"));

	/* the second origin of the list too, on a route with a parameter */
	ty_http_raw(&r, api, "OPTIONS", "/v1/jobs/12/cancel", NULL, NULL, 0,
		    origin("https://b.example", "POST"));
	CHECK_STATUS(&r, 204);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), "https://b.example");

	/* another origin, or an exact-match near miss */
	ty_http_raw(&r, api, "OPTIONS", "/v1/jobs", NULL, NULL, 0,
		    origin("https://evil.example", "POST"));
	CHECK_PROBLEM(&r, 403, "cors_forbidden", NULL);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), NULL);
	ty_http_raw(&r, api, "OPTIONS", "/v1/jobs", NULL, NULL, 0,
		    origin("https://portal.example.evil", "POST"));
	CHECK_PROBLEM(&r, 403, "cors_forbidden", NULL);

	/* a method the route does not have */
	ty_http_raw(&r, api, "OPTIONS", "/v1/jobs", NULL, NULL, 0, origin(allowed, "DELETE"));
	CHECK_PROBLEM(&r, 403, "cors_forbidden", NULL);

	/* simple requests: allowed origin echoed with Vary, others get nothing */
	ty_http_raw(&r, api, "GET", "/v1/teams", s->admin, NULL, 0, origin(allowed, NULL));
	CHECK_STATUS(&r, 200);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), allowed);
	CHECK(list_has(ty_resp_header(&r, "Vary"), "Origin"));
	ty_http_raw(&r, api, "GET", "/healthz", NULL, NULL, 0, origin(allowed, NULL));
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), allowed);
	/* errors carry it too, so the portal can read them */
	ty_http_raw(&r, api, "GET", "/v1/teams", NULL, NULL, 0, origin(allowed, NULL));
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), allowed);
	ty_http_raw(&r, api, "GET", "/v1/teams", s->admin, NULL, 0,
		    origin("https://evil.example", NULL));
	CHECK_STATUS(&r, 200);
	CHECK_STR_EQ(ty_resp_header(&r, "Access-Control-Allow-Origin"), NULL);
	ty_resp_free(&r);
	ty_test_api_stop(api);
	ty_test_api_use(s->api);
}

/* --max-body-bytes and --max-json-depth, and a chunked body over the limit. */
TY_TEST(configured_limits)
{
	const struct ty_stack *s = ty_stack_get();
	const char *const args[] = {"--max-body-bytes", "2048", "--max-json-depth", "4", NULL};
	struct ty_api *api = ty_test_api_start(s->db_url, args);
	const char *team = ty_mk_team("limits", 8, -1);
	const char *const chunked[] = {"Transfer-Encoding: chunked", NULL};
	struct ty_resp r = {0};
	const char *body;
	char *big;
	size_t n;

	/* depth 4 is the limit: labels {"k": "v"} inside the body object is 2 */
	body = ty_tmpl("{'team':'@T','command':['x'],'resources':{},'labels':{'k':'v'}}", team);
	ty_http_raw(&r, api, "POST", "/v1/jobs", s->admin, body, strlen(body), NULL);
	CHECK_STATUS(&r, 201);
	body = ty_tmpl("{'team':'@T','command':['x'],'resources':{},'labels':{'k':[[[1]]]}}", team);
	ty_http_raw(&r, api, "POST", "/v1/jobs", s->admin, body, strlen(body), NULL);
	CHECK_PROBLEM(&r, 400, "json_too_deep", NULL);

	/* 2048 bytes pass, 2049 do not */
	for (n = 2048; n <= 2049; n++) {
		const char *head =
		    ty_tmpl("{'team':'@T','command':['x'],'resources':{},'name':'", team);

		big = ty_test_alloc(n + 1);
		memset(big, 'a', n);
		memcpy(big, head, strlen(head));
		memcpy(big + n - 2, "\"}", 2);
		ty_test_context("%zu bytes", n);
		ty_http_raw(&r, api, "POST", "/v1/jobs", s->admin, big, n, NULL);
		if (n == 2048) /* a name that long is invalid: anything but 413 */
			CHECK_PROBLEM(&r, 422, "invalid_field", "name");
		else
			CHECK_PROBLEM(&r, 413, "body_too_large", NULL);
	}
	ty_test_context(NULL);
	ty_test_api_stop(api);

	/* the default server, a 2 MiB body without Content-Length */
	n = 2 << 20;
	big = ty_test_alloc(n + 1);
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	ty_http(&r, "POST", "/v1/jobs", s->admin, big, chunked);
	CHECK_PROBLEM(&r, 413, "body_too_large", NULL);
	/* and the server still answers */
	ty_http(&r, "GET", "/healthz", NULL, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}
