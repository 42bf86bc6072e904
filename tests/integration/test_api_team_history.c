/*
 * A team's history (docs/api.md "Team history"): GET
 * /v1/teams/{name}/history over samples written here as the scheduler
 * writes them (migration 0034): the window and its default, items oldest
 * first, totals, bad parameters, scoping.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

/* A sample of team at (SQL timestamptz text) with these numbers. */
static void sample(const char *team, const char *at, int used, double decayed_s, int suffered,
		   int caused)
{
	DB("INSERT INTO team_samples SELECT id, $2::timestamptz, $3::int, 1, 2, $4::float8, 0.5,"
	   " 3, $5::int, $6::int FROM teams WHERE name = $1",
	   team, at, ty_test_strf("%d", used), ty_test_strf("%.3f", decayed_s),
	   ty_test_strf("%d", suffered), ty_test_strf("%d", caused));
}

/* now() + offset (an SQL interval) as RFC 3339 UTC to the second (scratch). */
static const char *rfc3339(const char *offset)
{
	return DB("SELECT to_char((now() + $1::interval) AT TIME ZONE 'UTC',"
		  " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
		  offset);
}

static json_t *get(struct ty_resp *r, const char *token, const char *team, const char *query)
{
	ty_resp_free(r);
	ty_http(r, "GET", ty_test_strf("/v1/teams/%s/history%s%s", team, *query ? "?" : "", query),
		token, NULL, NULL);
	return r->json;
}

TY_TEST(items_in_the_window_oldest_first_with_totals)
{
	const struct ty_stack *s = ty_stack_get();
	const char *t = ty_mk_team("hist", 4, -1);
	struct ty_resp r = {0};
	json_t *j;

	/* written out of order; the first and last fall outside [since, until) */
	sample(t, "2026-01-10T00:02:00Z", 6, 0, 2, 0);
	sample(t, "2026-01-09T23:59:00Z", 9, 0, 5, 5);
	sample(t, "2026-01-10T00:00:00Z", 8, 45000, 1, 0);
	sample(t, "2026-01-10T00:03:00Z", 9, 0, 5, 5);
	sample(t, "2026-01-10T00:01:00Z", 7, 0, 0, 1);

	j = get(&r, s->admin, t, "since=2026-01-10T00:00:00Z&until=2026-01-10T00:03:00Z");
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 3);
	CHECK_JSTR(j, "items[0].at", "2026-01-10T00:00:00.000Z");
	CHECK_JSTR(j, "items[1].at", "2026-01-10T00:01:00.000Z");
	CHECK_JSTR(j, "items[2].at", "2026-01-10T00:02:00.000Z");
	CHECK_JINT(j, "items[0].gpus_in_use", 8);
	CHECK_JINT(j, "items[0].gpus_borrowed", 1);
	CHECK_JINT(j, "items[0].gpus_lent", 2);
	CHECK(json_number_value(ty_jpath(j, "items[0].decayed_gpu_hours")) == 12.5);
	CHECK(json_number_value(ty_jpath(j, "items[0].fair_share")) == 0.5);
	CHECK_JINT(j, "items[0].pending_jobs", 3);
	CHECK_JINT(j, "items[0].preemptions_suffered", 1);
	CHECK_JINT(j, "items[0].preemptions_caused", 0);
	CHECK_JINT(j, "items[2].gpus_in_use", 6);
	CHECK_JINT(j, "totals.preemptions_suffered", 3);
	CHECK_JINT(j, "totals.preemptions_caused", 1);
	ty_resp_free(&r);
}

TY_TEST(the_window_defaults_to_the_last_day)
{
	const struct ty_stack *s = ty_stack_get();
	const char *t = ty_mk_team("hist", 4, -1);
	struct ty_resp r = {0};
	json_t *j;

	sample(t, DB("SELECT (now() - interval '2 hours')::text"), 1, 0, 0, 0);
	sample(t, DB("SELECT (now() - interval '26 hours')::text"), 2, 0, 0, 0);
	sample(t, DB("SELECT (now() - interval '50 hours')::text"), 3, 0, 0, 0);

	/* neither: the last 24 hours */
	j = get(&r, s->admin, t, "");
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 1);
	CHECK_JINT(j, "items[0].gpus_in_use", 1);
	/* since alone: up to now */
	j = get(&r, s->admin, t, ty_test_strf("since=%s", rfc3339("-27 hours")));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JINT(j, "items[0].gpus_in_use", 2);
	CHECK_JINT(j, "items[1].gpus_in_use", 1);
	/* until alone: the 24 hours before it */
	j = get(&r, s->admin, t, ty_test_strf("until=%s", rfc3339("-25 hours")));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 1);
	CHECK_JINT(j, "items[0].gpus_in_use", 2);
	ty_resp_free(&r);
}

TY_TEST(a_team_without_samples_has_no_items_and_zero_totals)
{
	const struct ty_stack *s = ty_stack_get();
	const char *t = ty_mk_team("hist", 4, -1);
	struct ty_resp r = {0};
	json_t *j;

	j = get(&r, s->admin, t, "");
	REQUIRE_STATUS(&r, 200);
	CHECK(json_is_array(ty_jpath(j, "items")) && json_array_size(ty_jpath(j, "items")) == 0);
	CHECK_JINT(j, "totals.preemptions_suffered", 0);
	CHECK_JINT(j, "totals.preemptions_caused", 0);
	ty_resp_free(&r);
}

TY_TEST(bad_parameters_are_400)
{
	const struct ty_stack *s = ty_stack_get();
	const char *t = ty_mk_team("hist", 4, -1);
	struct ty_resp r = {0};
	static const struct {
		const char *query, *field;
	} bad[] = {
	    {"since=yesterday", "since"},
	    {"since=2026-01-10", "since"},
	    {"until=2026-13-01T00:00:00Z", "until"},
	    {"since=2026-01-10T00:00:00Z&until=2026-01-10T00:00:00Z", "since"},
	    {"since=2026-01-11T00:00:00Z&until=2026-01-10T00:00:00Z", "since"},
	    /* 35 days and a second */
	    {"since=2026-01-01T00:00:00Z&until=2026-02-05T00:00:01Z", "since"},
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("%s", bad[i].query);
		get(&r, s->admin, t, bad[i].query);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", bad[i].field);
	}
	ty_test_context(NULL);
	/* 35 days exactly is allowed */
	get(&r, s->admin, t, "since=2026-01-01T00:00:00Z&until=2026-02-05T00:00:00Z");
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

TY_TEST(another_teams_history_is_404_to_members_and_viewers)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("hist", 4, -1), *b = ty_mk_team("hist", 4, -1);
	const char *member = ty_mk_token("member", a), *viewer = ty_mk_token("viewer", a);
	struct ty_resp r = {0};
	json_t *j;

	sample(a, DB("SELECT (now() - interval '1 hour')::text"), 1, 0, 1, 0);
	sample(b, DB("SELECT (now() - interval '1 hour')::text"), 2, 0, 0, 1);

	j = get(&r, member, a, "");
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(j, "totals.preemptions_suffered", 1);
	j = get(&r, viewer, a, "");
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(j, "items[0].gpus_in_use", 1);
	/* another team's name reads as a missing one */
	get(&r, member, b, "");
	CHECK_PROBLEM(&r, 404, "team_not_found", NULL);
	get(&r, viewer, b, "");
	CHECK_PROBLEM(&r, 404, "team_not_found", NULL);
	/* an admin sees every team; a name that is no team is 404 */
	j = get(&r, s->admin, b, "");
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(j, "totals.preemptions_caused", 1);
	get(&r, s->admin, "no-such-team", "");
	CHECK_PROBLEM(&r, 404, "team_not_found", NULL);
	get(&r, NULL, a, "");
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_resp_free(&r);
}

TY_TEST(a_deleted_teams_samples_go_with_it)
{
	const char *t = ty_mk_team("hist", 4, -1);

	sample(t, DB("SELECT (now() - interval '1 hour')::text"), 1, 0, 0, 0);
	CHECK_STR_EQ(DB("SELECT count(*) FROM team_samples s JOIN teams t ON t.id = s.team_id"
			" WHERE t.name = $1",
			t),
		     "1");
	DB("DELETE FROM teams WHERE name = $1", t);
	CHECK_STR_EQ(DB("SELECT count(*) FROM team_samples s WHERE NOT EXISTS"
			" (SELECT 1 FROM teams t WHERE t.id = s.team_id)"),
		     "0");
}
