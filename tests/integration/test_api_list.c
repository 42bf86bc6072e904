/* GET /v1/jobs (docs/api.md "Jobs"): order, cursor pagination, filters, parameters. */
#include "ty_stack.h"
#include "ty_test.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

static const char *escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	const char *out = ty_test_strf("%s", e);

	curl_free(e);
	return out;
}

/* Pages of 7 while new jobs arrive between pages: each old job once, newest first. */
TY_TEST(pagination_is_stable_under_inserts)
{
	enum { OLD = 30, MAX_PAGES = 40 };
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("pages", 8, -1);
	long long old[OLD], seen[OLD + 2 * MAX_PAGES];
	int nseen = 0, pages = 0, counts[OLD] = {0};
	char *cursor = NULL, prev_time[64] = "";
	struct ty_resp r = {0};

	for (int i = 0; i < OLD; i++)
		old[i] = ty_mk_job(s->admin, team, NULL);
	for (;;) {
		const char *path =
		    ty_test_strf("/v1/jobs?team=%s&limit=7%s%s", team, cursor ? "&cursor=" : "",
				 cursor ? escape(cursor) : "");
		json_t *items, *it, *next;
		size_t i;

		REQUIRE(pages++ < MAX_PAGES);
		ty_test_context("page %d", pages);
		ty_http(&r, "GET", path, s->admin, NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		items = ty_jpath(r.json, "items");
		REQUIRE(json_is_array(items));
		CHECK(json_array_size(items) <= 7);
		json_array_foreach(items, i, it)
		{
			const char *t = ty_jstr(it, "created_at");

			REQUIRE(nseen < OLD + 2 * MAX_PAGES);
			seen[nseen++] = ty_jint(it, "id");
			CHECK_JSTR(it, "team", team);
			if (t && prev_time[0] && strcmp(t, prev_time) > 0)
				FAIL("job %lld (%s) listed after one created at %s",
				     ty_jint(it, "id"), t, prev_time);
			if (t)
				snprintf(prev_time, sizeof(prev_time), "%s", t);
		}
		next = ty_jpath(r.json, "next_cursor");
		CHECK(next != NULL && (json_is_null(next) || json_is_string(next)));
		free(cursor);
		cursor = json_is_string(next) ? strdup(json_string_value(next)) : NULL;
		if (!cursor)
			break;
		/* two new jobs between pages */
		ty_mk_job(s->admin, team, NULL);
		ty_mk_job(s->admin, team, NULL);
	}
	ty_test_context(NULL);
	for (int i = 1; i < nseen; i++)
		if (seen[i] >= seen[i - 1])
			FAIL("id %lld listed after id %lld: not newest first", seen[i],
			     seen[i - 1]);
	for (int i = 0; i < nseen; i++)
		for (int k = 0; k < OLD; k++)
			counts[k] += seen[i] == old[k];
	for (int k = 0; k < OLD; k++)
		if (counts[k] != 1)
			FAIL("job %lld listed %d times, want once", old[k], counts[k]);
	CHECK(pages >= OLD / 7);
	ty_resp_free(&r);
}

TY_TEST(default_and_maximum_limit)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("limits", 8, -1);
	struct ty_resp r = {0};

	for (int i = 0; i < 52; i++)
		ty_mk_job(s->admin, team, NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 50);
	CHECK(json_is_string(ty_jpath(r.json, "next_cursor")));
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&limit=500", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 52);
	CHECK_JNULL(r.json, "next_cursor");
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&limit=1", team), s->admin, NULL, NULL);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 1);
	ty_resp_free(&r);
}

static int count(const char *token, const char *query)
{
	struct ty_resp r = {0};
	int n;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs?limit=500&%s", query), token, NULL, NULL);
	if (!ty_check_status(&r, 200, __FILE__, __LINE__)) {
		ty_resp_free(&r);
		return -1;
	}
	n = (int)json_array_size(ty_jpath(r.json, "items"));
	ty_resp_free(&r);
	return n;
}

TY_TEST(filters)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("filters", 8, -1);
	const char *other = ty_mk_team("filters-other", 8, -1);
	const char *mark = ty_uniq("m");
	struct ty_resp r = {0};
	long long cancelled;

	ty_mk_job(s->admin, team, ty_tmpl(",'labels':{'env':'prod','run':'@T'}", mark));
	ty_mk_job(s->admin, team, ",\"labels\":{\"env\":\"dev\"}");
	ty_mk_job(s->admin, team, ",\"labels\":{\"env\":\"prod\",\"tier\":\"1\"}");
	cancelled = ty_mk_job(s->admin, team, ",\"labels\":{\"env\":\"prod\"}");
	ty_mk_job(s->admin, other, ty_tmpl(",'labels':{'env':'prod','run':'@T'}", mark));
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", cancelled), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);

	const struct {
		const char *query;
		int want;
	} rows[] = {
	    {ty_test_strf("team=%s", team), 4},
	    {ty_test_strf("team=%s&state=pending", team), 3},
	    {ty_test_strf("team=%s&state=cancelled", team), 1},
	    {ty_test_strf("team=%s&state=pending,cancelled", team), 4},
	    {ty_test_strf("team=%s&state=pending%%2Ccancelled", team), 4},
	    {ty_test_strf("team=%s&state=running,succeeded", team), 0},
	    {ty_test_strf("team=%s&label=env%%3Dprod", team), 3},
	    {ty_test_strf("team=%s&label=env%%3Dprod&state=pending", team), 2},
	    {ty_test_strf("team=%s&label=tier%%3D1", team), 1},
	    {ty_test_strf("team=%s&label=env%%3Dstaging", team), 0},
	    {ty_test_strf("label=run%%3D%s", mark), 2},
	    {ty_test_strf("label=run%%3D%s&team=%s", mark, other), 1},
	    {"team=no-such-team", 0},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		CHECK_INT_EQ(count(s->admin, rows[i].query), rows[i].want);
	}
	ty_test_context(NULL);
	/* the filtered items really match */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&state=cancelled", team), s->admin, NULL,
		NULL);
	CHECK_JINT(r.json, "items[0].id", cancelled);
	CHECK_JSTR(r.json, "items[0].state", "cancelled");
	ty_resp_free(&r);
}

TY_TEST(bad_parameters)
{
	static const struct {
		const char *query, *field;
	} rows[] = {
	    {"limit=0", "limit"},	{"limit=501", "limit"},
	    {"limit=abc", "limit"},	{"limit=-1", "limit"},
	    {"limit=", "limit"},	{"cursor=not-a-cursor", "cursor"},
	    {"state=bogus", "state"},	{"state=pending,bogus", "state"},
	    {"label=novalue", "label"}, {"label=%3Dv", "label"},
	};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs?%s", rows[i].query), s->admin, NULL,
			NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
	}
	ty_resp_free(&r);
}
