/* Cancel, stop and job events with long-poll watch (docs/api.md "Jobs"). */
#include "ty_stack.h"
#include "ty_test.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void check_event(const json_t *ev, long long seq, const char *type, const char *state)
{
	CHECK_JINT(ev, "seq", seq);
	CHECK_JSTR(ev, "type", type);
	CHECK_JSTR(ev, "state", state);
	CHECK(json_is_string(ty_jpath(ev, "message")));
	CHECK(json_is_object(ty_jpath(ev, "data")));
	CHECK_JTIME(ev, "time");
}

TY_TEST(submitted_event)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("ev", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 1);
	check_event(ty_jpath(r.json, "events[0]"), 1, "submitted", "pending");
	CHECK_JINT(r.json, "next_after", 1);
	CHECK_JSTR(r.json, "state", "pending");
	ty_resp_free(&r);
}

TY_TEST(cancel_pending)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("cancel", 8, -1);
	const char *member = ty_mk_token("member", team);
	long long id = ty_mk_job(member, team, NULL);
	const char *cancel = ty_test_strf("/v1/jobs/%lld/cancel", id);
	struct ty_resp r = {0};

	ty_http(&r, "POST", cancel, member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "id", id);
	CHECK_JSTR(r.json, "state", "cancelled");
	CHECK_JTIME(r.json, "finished_at");
	CHECK_JTIME(r.json, "updated_at");

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", id), member, NULL, NULL);
	CHECK_JSTR(r.json, "state", "cancelled");
	CHECK_JTIME(r.json, "finished_at");

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", id), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 2);
	check_event(ty_jpath(r.json, "events[0]"), 1, "submitted", "pending");
	check_event(ty_jpath(r.json, "events[1]"), 2, "cancelled", "cancelled");
	CHECK_JINT(r.json, "next_after", 2);
	CHECK_JSTR(r.json, "state", "cancelled");

	/* twice: the job is finished (a body-less POST and an empty object alike) */
	ty_http(&r, "POST", cancel, member, NULL, NULL);
	CHECK_PROBLEM(&r, 409, "job_finished", NULL);
	ty_http(&r, "POST", cancel, s->admin, "{}", NULL);
	CHECK_PROBLEM(&r, 409, "job_finished", NULL);
	/* and no third event */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", id), member, NULL, NULL);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 2);
	ty_resp_free(&r);
}

/* A pending job stops at once: state `stopped`, an event naming the token. */
TY_TEST(stop_pending)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("stop", 8, -1);
	const char *name = ty_uniq("pruner");
	const char *member;
	long long id, other;
	const char *stop;
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_test_jf("{'name':'%s','role':'member','team':'%s'}", name, team), NULL);
	REQUIRE_STATUS(&r, 201);
	member = ty_test_strf("%s", ty_jstr(r.json, "token"));
	id = ty_mk_job(member, team, NULL);
	other = ty_mk_job(member, team, NULL);
	stop = ty_test_strf("/v1/jobs/%lld/stop", id);

	ty_http(&r, "POST", stop, member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "id", id);
	CHECK_JSTR(r.json, "state", "stopped");
	CHECK_JTIME(r.json, "finished_at");
	CHECK(json_is_false(ty_jpath(r.json, "cancel_requested")));

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", id), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 2);
	check_event(ty_jpath(r.json, "events[0]"), 1, "submitted", "pending");
	check_event(ty_jpath(r.json, "events[1]"), 2, "stopped", "stopped");
	CHECK_JSTR(r.json, "events[1].message", ty_test_strf("stopped by token '%s'", name));
	CHECK_JSTR(r.json, "state", "stopped");

	/* a stopped job is finished: stop and cancel are 409, no third event */
	ty_http(&r, "POST", stop, member, NULL, NULL);
	CHECK_PROBLEM(&r, 409, "job_finished", NULL);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), s->admin, "{}", NULL);
	CHECK_PROBLEM(&r, 409, "job_finished", NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", id), member, NULL, NULL);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 2);

	/* a cancelled job cannot be stopped */
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", other), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/stop", other), member, NULL, NULL);
	CHECK_PROBLEM(&r, 409, "job_finished", NULL);
	CHECK(strstr(ty_jstr(r.json, "detail"), "already cancelled") != NULL);

	/* listed under its own state */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&state=stopped", team), member, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 1);
	CHECK_JINT(r.json, "items[0].id", id);

	ty_http(&r, "POST", "/v1/jobs/987654321/stop", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(cancel_unknown_is_404)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/jobs/987654321/cancel", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", "/v1/jobs/987654321/events", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(after_and_limit)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("after", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	const char *base = ty_test_strf("/v1/jobs/%lld/events", id);
	struct ty_resp r = {0};

	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);

	ty_http(&r, "GET", ty_test_strf("%s?after=1", base), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 1);
	CHECK_JINT(r.json, "events[0].seq", 2);
	CHECK_JINT(r.json, "next_after", 2);

	ty_http(&r, "GET", ty_test_strf("%s?after=2", base), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 0);
	CHECK_JINT(r.json, "next_after", 2);
	CHECK_JSTR(r.json, "state", "cancelled");

	ty_http(&r, "GET", ty_test_strf("%s?limit=1", base), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 1);
	CHECK_JINT(r.json, "events[0].seq", 1);
	CHECK_JINT(r.json, "next_after", 1);
	ty_resp_free(&r);
}

TY_TEST(bad_parameters)
{
	static const struct {
		const char *query, *field;
	} rows[] = {
	    {"wait=61", "wait"},   {"wait=-1", "wait"},	    {"wait=abc", "wait"},
	    {"limit=0", "limit"},  {"limit=1001", "limit"}, {"limit=x", "limit"},
	    {"after=-1", "after"}, {"after=abc", "after"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("evp", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?%s", id, rows[i].query),
			s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
	}
	ty_resp_free(&r);
}

struct watcher {
	const char *path, *token;
	struct ty_resp r;
	long long ms;
};

static void *watch(void *p)
{
	struct watcher *w = p;
	long long t0 = now_ms();

	ty_http(&w->r, "GET", w->path, w->token, NULL, NULL);
	w->ms = now_ms() - t0;
	return NULL;
}

/* A held watch returns as soon as the event is written, not when the wait ends. */
TY_TEST(watch_wakes_on_new_event)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("watch", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct watcher w = {
	    ty_test_strf("/v1/jobs/%lld/events?after=1&wait=10", id), viewer, {0}, 0};
	struct ty_resp r = {0};
	pthread_t th;

	REQUIRE_INT_EQ(pthread_create(&th, NULL, watch, &w), 0);
	sleep_ms(300);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	pthread_join(th, NULL);

	CHECK_STATUS(&w.r, 200);
	if (w.ms >= 5000)
		FAIL("the watch returned after %lld ms: not woken by the new event", w.ms);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(w.r.json, "events")), 1);
	check_event(ty_jpath(w.r.json, "events[0]"), 2, "cancelled", "cancelled");
	CHECK_JINT(w.r.json, "next_after", 2);
	ty_resp_free(&w.r);
	ty_resp_free(&r);
}

/* Several watchers of one job are all woken. */
TY_TEST(watch_wakes_every_watcher)
{
	enum { N = 4 };
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("watch-many", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct watcher w[N];
	pthread_t th[N];
	struct ty_resp r = {0};

	for (int i = 0; i < N; i++) {
		w[i] = (struct watcher){
		    ty_test_strf("/v1/jobs/%lld/events?after=1&wait=10", id), s->admin, {0}, 0};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, watch, &w[i]), 0);
	}
	sleep_ms(300);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < N; i++) {
		ty_test_context("watcher %d", i);
		CHECK_STATUS(&w[i].r, 200);
		CHECK(w[i].ms < 5000);
		CHECK_JINT(w[i].r.json, "events[0].seq", 2);
		ty_resp_free(&w[i].r);
	}
	ty_resp_free(&r);
}

TY_TEST(watch_times_out_empty)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idle", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?after=1&wait=1", id), s->admin, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_is_array(ty_jpath(r.json, "events")));
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 0);
	CHECK_JINT(r.json, "next_after", 1);
	CHECK_JSTR(r.json, "state", "pending");
	/* with events already there, wait does not hold the request */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?after=0&wait=60", id), s->admin, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "events")), 1);
	ty_resp_free(&r);
}
