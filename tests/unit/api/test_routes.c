/* api/ routing and query parameters, pure: api_route_find and api_job_states_param. */
#include "api.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(route_find_table)
{
	static const struct {
		const char *method, *path;
		const char *pattern; /* NULL: no route */
		const char *p0, *p1; /* captures */
		const char *allow;   /* when no route */
	} rows[] = {
	    {"GET", "/healthz", "/healthz", NULL, NULL, NULL},
	    {"GET", "/v1/jobs", "/v1/jobs", NULL, NULL, NULL},
	    {"POST", "/v1/jobs", "/v1/jobs", NULL, NULL, NULL},
	    {"GET", "/v1/jobs/42", "/v1/jobs/{}", "42", NULL, NULL},
	    {"POST", "/v1/jobs/42/cancel", "/v1/jobs/{}/cancel", "42", NULL, NULL},
	    {"GET", "/v1/jobs/x%2Fy/events", "/v1/jobs/{}/events", "x%2Fy", NULL, NULL},
	    {"PATCH", "/v1/teams/ml-research", "/v1/teams/{}", "ml-research", NULL, NULL},
	    {"DELETE", "/v1/webhooks/3", "/v1/webhooks/{}", "3", NULL, NULL},
	    {"POST", "/v1/nodes/node-a/preempt", "/v1/nodes/{}/preempt", "node-a", NULL, NULL},
	    /* 405: the path exists, with other methods */
	    {"PUT", "/v1/jobs", NULL, NULL, NULL, "POST, GET"},
	    {"DELETE", "/v1/teams/ml", NULL, NULL, NULL, "GET, PATCH"},
	    {"GET", "/v1/sweeps/5/cancel", NULL, NULL, NULL, "POST"},
	    {"OPTIONS", "/v1/webhooks/3", NULL, NULL, NULL, "GET, DELETE"},
	    /* 404 */
	    {"GET", "/v1/jobs/", NULL, NULL, NULL, ""},
	    {"GET", "/v1/jobs//events", NULL, NULL, NULL, ""},
	    {"GET", "/v1/jobs/42/", NULL, NULL, NULL, ""},
	    {"GET", "/v1/jobs/1/2", NULL, NULL, NULL, ""},
	    {"GET", "/healthz/", NULL, NULL, NULL, ""},
	    {"GET", "", NULL, NULL, NULL, ""},
	    /* the dashboard: "{*}" takes the rest of the path, slashes and "" too */
	    {"GET", "/", "/", NULL, NULL, NULL},
	    {"GET", "/ui", "/ui", NULL, NULL, NULL},
	    {"HEAD", "/ui", "/ui", NULL, NULL, NULL},
	    {"GET", "/ui/", "/ui/{*}", "", NULL, NULL},
	    {"GET", "/ui/index.html", "/ui/{*}", "index.html", NULL, NULL},
	    {"HEAD", "/ui/assets/a/b.js", "/ui/{*}", "assets/a/b.js", NULL, NULL},
	    {"GET", "/ui//x", "/ui/{*}", "/x", NULL, NULL},
	    {"POST", "/ui/x", NULL, NULL, NULL, "GET, HEAD"},
	    {"GET", "/uix", NULL, NULL, NULL, ""},
	    {"GET", "//", NULL, NULL, NULL, ""},
	    {"get", "/healthz", NULL, NULL, NULL, "GET"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_arena *a = ty_arena_new();
		const char *params[4] = {NULL};
		const struct api_route *rt;
		char allow[64];

		ty_test_context("%s '%s'", rows[i].method, rows[i].path);
		REQUIRE(a);
		rt = api_route_find(rows[i].method, rows[i].path, a, params, allow, sizeof(allow));
		if (rows[i].pattern) {
			CHECK(rt != NULL);
			if (rt) {
				CHECK_STR_EQ(rt->pattern, rows[i].pattern);
				CHECK_STR_EQ(rt->method, rows[i].method);
			}
			CHECK_STR_EQ(params[0] ? params[0] : "(none)",
				     rows[i].p0 ? rows[i].p0 : "(none)");
			CHECK_STR_EQ(params[1] ? params[1] : "(none)",
				     rows[i].p1 ? rows[i].p1 : "(none)");
		} else {
			CHECK(rt == NULL);
			CHECK_STR_EQ(allow, rows[i].allow);
		}
		ty_arena_free(a);
	}
}

TY_TEST(route_find_allow_is_bounded)
{
	struct ty_arena *a = ty_arena_new();
	const char *params[4] = {NULL};
	char allow[6];

	REQUIRE(a);
	/* "POST, GET" does not fit: cut, still terminated */
	CHECK(api_route_find("PUT", "/v1/jobs", a, params, allow, sizeof(allow)) == NULL);
	CHECK_STR_EQ(allow, "POST,");
	ty_arena_free(a);
}

TY_TEST(ui_path_table)
{
	static const struct {
		const char *rel;
		bool ok;
	} rows[] = {
	    {"index.html", true},
	    {"assets/index-3f2a.js", true},
	    {"a/b/c.css", true},
	    {"", false},
	    {"..", false},
	    {"../x", false},
	    {"a/../../x", false},
	    {"./x", false},
	    {"a/./x", false},
	    {".env", false},
	    {"assets/.hidden", false},
	    {"a//b", false},
	    {"a/", false},
	    {"/etc/passwd", false},
	    {"a\\..\\b", false},
	    {"%2e%2e/x", false}, /* still encoded: never decoded twice */
	    {"a%00b", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("'%s'", rows[i].rel);
		CHECK(api_ui_path_ok(rows[i].rel) == rows[i].ok);
	}
}

TY_TEST(ui_content_type_table)
{
	static const char *const rows[][2] = {
	    {"index.html", "text/html; charset=utf-8"},
	    {"assets/x-1.js", "text/javascript; charset=utf-8"},
	    {"a.mjs", "text/javascript; charset=utf-8"},
	    {"a.css", "text/css; charset=utf-8"},
	    {"a.svg", "image/svg+xml"},
	    {"a.png", "image/png"},
	    {"favicon.ico", "image/x-icon"},
	    {"m.json", "application/json"},
	    {"x.js.map", "application/json"},
	    {"f.woff2", "font/woff2"},
	    {"robots.txt", "text/plain; charset=utf-8"},
	    {"a.exe", "application/octet-stream"},
	    {"noext", "application/octet-stream"},
	    {"dir.js/file", "application/octet-stream"},
	    {"a.HTML", "application/octet-stream"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("'%s'", rows[i][0]);
		CHECK_STR_EQ(api_ui_content_type(rows[i][0]), rows[i][1]);
	}
}

TY_TEST(job_states_param_table)
{
	static const struct {
		const char *in, *want; /* want NULL: refused */
	} rows[] = {
	    {"running", "{running}"},
	    {"running,pending", "{running,pending}"},
	    {"succeeded,failed,cancelled,stopped", "{succeeded,failed,cancelled,stopped}"},
	    {"", "{}"},
	    {"running,", "{running}"},
	    {"Running", NULL},
	    {"run", NULL},
	    {"running,,pending", NULL},
	    {",running", NULL},
	    {"running;DROP TABLE jobs", NULL},
	    {"pending,{x}", NULL},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_arena *a = ty_arena_new();
		const char *got;

		ty_test_context("'%s'", rows[i].in);
		REQUIRE(a);
		got = api_job_states_param(a, rows[i].in);
		CHECK_STR_EQ(got ? got : "(refused)", rows[i].want ? rows[i].want : "(refused)");
		ty_arena_free(a);
	}
}
