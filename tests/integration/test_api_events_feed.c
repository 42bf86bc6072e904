/*
 * GET /v1/events (docs/api.md "Event feed"): every visible job's events in
 * commit order, its cursor exact under concurrent writers, scoping and
 * redaction as a job's own events, and the long-poll.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The cursor of now, for token. */
static const char *start(const char *token)
{
	struct ty_resp r = {0};
	const char *c;

	ty_http(&r, "GET", "/v1/events", token, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(json_object_get(r.json, "events")) == 0);
	c = ty_test_strf("%s", ty_jstr(r.json, "next_after") ? ty_jstr(r.json, "next_after") : "");
	REQUIRE(c[0]);
	ty_resp_free(&r);
	return c;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/*
 * Wait until the feed's horizon is past every transaction committed so far.
 * Transaction ids are the whole server's: another test program's open
 * transaction on the same PostgreSQL holds the feed back meanwhile.
 */
static void settle(void)
{
	unsigned long long x = strtoull(TY_STACK_SQL("SELECT pg_current_xact_id()::text"), NULL, 10);

	for (int i = 0; i < 1200; i++) {
		if (strtoull(start(ty_stack_get()->admin), NULL, 10) > x)
			return;
		sleep_ms(50);
	}
	FAIL("the feed's horizon stayed below transaction %llu for a minute", x);
}

/*
 * The cursor of now once the feed's horizon is past every write so far: a
 * case that writes before it takes its cursor (start() alone may be behind
 * those writes while another program's transaction holds the horizon).
 */
static const char *start_after_writes(const char *token)
{
	settle();
	return start(token);
}

/* GET /v1/events?after=CURSOR&QUERY into r (200 required). */
static void feed(struct ty_resp *r, const char *token, const char *cursor, const char *query)
{
	ty_http(r, "GET", ty_test_strf("/v1/events?after=%s%s%s", cursor, query ? "&" : "",
				       query ? query : ""),
		token, NULL, NULL);
	REQUIRE_STATUS(r, 200);
}

/* The events of r as "job:seq:type,..." */
static const char *shape(const struct ty_resp *r)
{
	json_t *ev = json_object_get(r->json, "events");
	const char *out = "";

	for (size_t i = 0; i < json_array_size(ev); i++) {
		json_t *e = json_array_get(ev, i);

		out = ty_test_strf("%s%s%lld:%lld:%s", out, i ? "," : "",
				   (long long)json_integer_value(json_object_get(e, "job")),
				   (long long)json_integer_value(json_object_get(e, "seq")),
				   json_string_value(json_object_get(e, "type")));
	}
	return out;
}

static void cancel(long long id)
{
	struct ty_resp r = {0};

	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), ty_stack_get()->admin, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	ty_resp_free(&r);
}

TY_TEST(start_cursor_has_no_events)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("feed", 8, -1);
	const char *c;
	struct ty_resp r = {0};

	ty_mk_job(s->admin, team, NULL); /* in the past: the start is after it */
	c = start_after_writes(ty_mk_token("viewer", team));
	feed(&r, s->admin, c, ty_test_strf("team=%s", team));
	CHECK_STR_EQ(shape(&r), "");
	CHECK_JSTR(r.json, "next_after", c);
	ty_resp_free(&r);
}

TY_TEST(two_jobs_in_commit_order)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("feed", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *c = start(viewer);
	long long a = ty_mk_job(s->admin, team, NULL), b = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};
	json_t *e;

	cancel(a);
	settle();
	feed(&r, viewer, c, NULL);
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted,%lld:1:submitted,%lld:2:cancelled",
					     a, b, a));
	e = ty_jpath(r.json, "events[2]");
	CHECK_JSTR(e, "team", team);
	CHECK_JSTR(e, "state", "cancelled");
	CHECK(json_is_string(json_object_get(e, "message")));
	CHECK(json_is_object(json_object_get(e, "data")));
	CHECK_JTIME(e, "time");
	/* from its cursor, nothing more */
	c = ty_test_strf("%s", ty_jstr(r.json, "next_after"));
	feed(&r, viewer, c, NULL);
	CHECK_STR_EQ(shape(&r), "");
	CHECK_JSTR(r.json, "next_after", c);
	ty_resp_free(&r);
}

TY_TEST(scoped_to_the_team_and_admin_team_filter)
{
	const struct ty_stack *s = ty_stack_get();
	const char *ta = ty_mk_team("feed-a", 8, -1), *tb = ty_mk_team("feed-b", 8, -1);
	const char *ma = ty_mk_token("member", ta), *mb = ty_mk_token("member", tb);
	const char *c = start(s->admin);
	long long a = ty_mk_job(s->admin, ta, NULL), b = ty_mk_job(s->admin, tb, NULL);
	struct ty_resp r = {0};

	settle();
	feed(&r, mb, c, NULL);
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted", b));
	/* a team filter cannot widen a member's view */
	feed(&r, mb, c, ty_test_strf("team=%s", ta));
	CHECK_STR_EQ(shape(&r), "");
	feed(&r, ma, c, NULL);
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted", a));
	feed(&r, s->admin, c, ty_test_strf("team=%s", ta));
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted", a));
	feed(&r, s->admin, c, ty_test_strf("team=%s", tb));
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted", b));
	ty_resp_free(&r);
}

TY_TEST(other_teams_jobs_redacted_as_in_a_jobs_events)
{
	const struct ty_stack *s = ty_stack_get();
	const char *ta = ty_mk_team("feed-a", 8, -1), *tb = ty_mk_team("feed-b", 8, -1);
	const char *va = ty_mk_token("viewer", ta);
	long long a = ty_mk_job(s->admin, ta, NULL), b = ty_mk_job(s->admin, tb, NULL);
	const char *c = start_after_writes(va);
	struct ty_resp r = {0}, own = {0};
	const char *msg;

	TY_STACK_SQL("SELECT ty_job_event($1::bigint, 'note', 'pending', $2, NULL)",
		     ty_test_strf("%lld", a),
		     ty_test_strf("waits for job %lld and job %lld", b, a));
	settle();
	feed(&r, va, c, NULL);
	REQUIRE(json_array_size(json_object_get(r.json, "events")) == 1);
	msg = ty_jstr(r.json, "events[0].message");
	REQUIRE(msg);
	CHECK(!strstr(msg, ty_test_strf("job %lld", b)));
	CHECK(strstr(msg, ty_test_strf("job %lld", a)) != NULL);
	ty_http(&own, "GET", ty_test_strf("/v1/jobs/%lld/events?after=1", a), va, NULL, NULL);
	REQUIRE_STATUS(&own, 200);
	CHECK_STR_EQ(msg, ty_jstr(own.json, "events[0].message"));
	/* an admin sees it whole */
	feed(&r, s->admin, c, ty_test_strf("team=%s", ta));
	CHECK(ty_jstr(r.json, "events[0].message") &&
	      strstr(ty_jstr(r.json, "events[0].message"), ty_test_strf("job %lld", b)));
	ty_resp_free(&r);
	ty_resp_free(&own);
}

struct watcher {
	const char *path, *token;
	struct ty_resp r;
};

static void *watch(void *p)
{
	struct watcher *w = p;

	ty_http(&w->r, "GET", w->path, w->token, NULL, NULL);
	return NULL;
}

TY_TEST(long_poll_woken_by_a_submission)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("feed", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	struct watcher w = {ty_test_strf("/v1/events?after=%s&wait=30", start(viewer)), viewer, {0}};
	pthread_t th;
	long long id;

	REQUIRE(pthread_create(&th, NULL, watch, &w) == 0);
	sleep_ms(300);
	id = ty_mk_job(s->admin, team, NULL);
	pthread_join(th, NULL);
	CHECK_STATUS(&w.r, 200);
	/* not woken, it would answer no events after 30 s */
	CHECK_STR_EQ(shape(&w.r), ty_test_strf("%lld:1:submitted", id));
	ty_resp_free(&w.r);
}

TY_TEST(wait_runs_out_with_the_same_cursor)
{
	const char *team = ty_mk_team("feed", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *c = start(viewer);
	struct ty_resp r = {0};

	feed(&r, viewer, c, "wait=1");
	CHECK_STR_EQ(shape(&r), "");
	CHECK_JSTR(r.json, "next_after", c);
	ty_resp_free(&r);
}

/*
 * A transaction that wrote an event and is still open holds back every
 * later one: a cursor past the later event would skip the earlier one.
 */
TY_TEST(an_open_transaction_holds_later_events_back)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("feed", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	long long a = ty_mk_job(s->admin, team, NULL), b = ty_mk_job(s->admin, team, NULL);
	const char *c = start_after_writes(viewer);
	const char *job = ty_test_strf("%lld", a);
	PGconn *pg = PQconnectdb(s->db_url);
	struct ty_resp r = {0};
	PGresult *res;

	REQUIRE(PQstatus(pg) == CONNECTION_OK);
	res = PQexec(pg, "BEGIN");
	PQclear(res);
	res = PQexecParams(pg, "SELECT ty_job_event($1::bigint, 'note', 'pending', 'early', NULL)",
			   1, NULL, &job, NULL, NULL, 0);
	REQUIRE(PQresultStatus(res) == PGRES_TUPLES_OK);
	PQclear(res);
	cancel(b); /* commits its event after a's began, before a's commits */
	feed(&r, viewer, c, NULL);
	CHECK_STR_EQ(shape(&r), "");
	CHECK_JSTR(r.json, "next_after", c);
	res = PQexec(pg, "COMMIT");
	CHECK(PQresultStatus(res) == PGRES_COMMAND_OK);
	PQclear(res);
	PQfinish(pg);
	settle();
	feed(&r, viewer, c, NULL);
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:2:note,%lld:2:cancelled", a, b));
	ty_resp_free(&r);
}

/* A held-back long-poll answers once the older transaction commits. */
TY_TEST(a_held_long_poll_answers_after_the_commit)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("feed", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	long long a = ty_mk_job(s->admin, team, NULL);
	struct watcher w = {ty_test_strf("/v1/events?after=%s&wait=30", start_after_writes(viewer)),
			    viewer, {0}};
	PGconn *pg = PQconnectdb(s->db_url);
	pthread_t th;
	PGresult *res;

	REQUIRE(PQstatus(pg) == CONNECTION_OK);
	PQclear(PQexec(pg, "BEGIN"));
	res = PQexec(pg, "SELECT pg_current_xact_id()"); /* an xid, and no event */
	REQUIRE(PQresultStatus(res) == PGRES_TUPLES_OK);
	PQclear(res);
	REQUIRE(pthread_create(&th, NULL, watch, &w) == 0);
	cancel(a);
	sleep_ms(300);
	PQclear(PQexec(pg, "COMMIT"));
	PQfinish(pg);
	pthread_join(th, NULL);
	CHECK_STATUS(&w.r, 200);
	CHECK_STR_EQ(shape(&w.r), ty_test_strf("%lld:2:cancelled", a));
	ty_resp_free(&w.r);
}

TY_TEST(limit_pages_the_feed)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("feed", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *c = start(viewer);
	long long a = ty_mk_job(s->admin, team, NULL), b = ty_mk_job(s->admin, team, NULL);
	long long d = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	settle();
	feed(&r, viewer, c, "limit=2");
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted,%lld:1:submitted", a, b));
	feed(&r, viewer, ty_test_strf("%s", ty_jstr(r.json, "next_after")), "limit=2");
	CHECK_STR_EQ(shape(&r), ty_test_strf("%lld:1:submitted", d));
	ty_resp_free(&r);
}

TY_TEST(bad_parameters_are_400)
{
	static const char *const cursors[] = {
	    "",	     "abc",	"1.2",	     "1.2.3.4", "-1.0.0", "01.0.0", "1.0.2147483648",
	    "1..0",  "1.0.0.",	"+1.0.0",    "%201.0.0",	"1.9223372036854775808.0",
	    "18446744073709551616.0.0",	     "1.0.0x",
	};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(cursors) / sizeof(cursors[0]); i++) {
		ty_test_context("after '%s'", cursors[i]);
		ty_http(&r, "GET", ty_test_strf("/v1/events?after=%s", cursors[i]), s->admin, NULL,
			NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", "after");
	}
	ty_test_context("limit and wait");
	ty_http(&r, "GET", "/v1/events?after=1.0.0&limit=0", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "limit");
	ty_http(&r, "GET", "/v1/events?after=1.0.0&limit=1001", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "limit");
	ty_http(&r, "GET", "/v1/events?after=1.0.0&wait=61", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "wait");
	ty_http(&r, "GET", "/v1/events?after=1.0.0&team=Not_A_Team", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "team");
	ty_http(&r, "GET", "/v1/events", NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_resp_free(&r);
}
