/*
 * Limits: per-token rate limits (--rate-limit-rps, --rate-limit-burst:
 * 429 rate_limited with Retry-After) and a team's max_pending_jobs (429
 * pending_jobs_limit), counted race-free (docs/security.md).
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

	nanosleep(&ts, NULL);
}

/* ---- rate limits ---- */

#define RPS 1
#define BURST 4

static struct ty_api *limited_api(void)
{
	static struct ty_api *api;
	const char *args[] = {"--rate-limit-rps", "1", "--rate-limit-burst", "4", NULL};

	if (!api) {
		api = ty_test_api_start(ty_stack_get()->db_url, args);
		/* fixtures (ty_mk_*) keep going to the stack's unlimited server */
		ty_test_api_use(ty_stack_get()->api);
	}
	return api;
}

/*
 * GET /v1/teams as token until the first 429 (at most max requests): the
 * number that passed, the refusal in *refused, and the seconds from the
 * first request to the refusal in *elapsed.
 */
static int until_refused(struct ty_resp *refused, double *elapsed, struct ty_api *api,
			 const char *token, int max)
{
	double t0 = now_s();
	int passed = 0;

	for (int i = 0; i < max; i++) {
		ty_http_raw(refused, api, "GET", "/v1/teams", token, NULL, 0, NULL);
		if (refused->status != 200)
			break;
		passed++;
	}
	*elapsed = now_s() - t0;
	return passed;
}

/*
 * A burst of BURST requests passes and the next is refused; a bucket
 * refills at RPS a second, so a slow run may let floor(elapsed * RPS) more
 * through before the refusal, never fewer than BURST.
 */
static void check_burst(struct ty_resp *r, struct ty_api *api, const char *token)
{
	double elapsed;
	int passed = until_refused(r, &elapsed, api, token, 100);

	CHECK(passed >= BURST);
	if (passed > BURST + (int)(elapsed * RPS))
		FAIL("%d requests passed in %.3f s with a burst of %d at %d/s", passed, elapsed,
		     BURST, RPS);
	CHECK_PROBLEM(r, 429, "rate_limited", NULL);
	/* a bucket below one token at 1/s: exactly 1 s to the next */
	CHECK_STR_EQ(ty_resp_header(r, "Retry-After"), "1");
}

TY_TEST(rate_limit_burst_then_429_then_refill)
{
	const char *team = ty_mk_team("rl", 4, -1);
	const char *member = ty_mk_token("member", team);
	struct ty_api *api = limited_api();
	struct ty_resp r = {0};

	check_burst(&r, api, member);
	/* every authenticated route counts, writes too */
	ty_http_raw(&r, api, "POST", "/v1/jobs", member,
		    ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", team),
		    strlen(ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", team)), NULL);
	CHECK_PROBLEM(&r, 429, "rate_limited", NULL);
	/* health, readiness and metrics are never limited */
	ty_http_raw(&r, api, "GET", "/healthz", NULL, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);
	ty_http_raw(&r, api, "GET", "/readyz", NULL, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);
	/* after Retry-After seconds one more passes */
	sleep_s(1.05);
	ty_http_raw(&r, api, "GET", "/v1/teams", member, NULL, 0, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

TY_TEST(rate_limit_is_per_token)
{
	const char *team = ty_mk_team("rl2", 4, -1);
	const char *a = ty_mk_token("member", team), *b = ty_mk_token("viewer", team);
	struct ty_api *api = limited_api();
	struct ty_resp r = {0};

	check_burst(&r, api, a);
	/* b has a bucket of its own, full */
	check_burst(&r, api, b);
	ty_resp_free(&r);
}

TY_TEST(rate_limit_applies_to_admins)
{
	const char *admin = ty_mk_token("admin", NULL);
	struct ty_resp r = {0};

	check_burst(&r, limited_api(), admin);
	ty_resp_free(&r);
}

TY_TEST(rate_limit_refuses_unknown_tokens_as_401_not_429)
{
	struct ty_resp r = {0};
	const char *bogus = "ty_0000000000000000000000000000000000000000000";

	/* no bucket for a token that did not authenticate: 401 every time */
	for (int i = 0; i < BURST + 3; i++) {
		ty_http_raw(&r, limited_api(), "GET", "/v1/teams", bogus, NULL, 0, NULL);
		CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	}
	ty_resp_free(&r);
}

TY_TEST(rate_limit_0_is_off)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("rl0", 4, -1);
	const char *member = ty_mk_token("member", team);
	struct ty_resp r = {0};

	/* the stack's server runs with the default --rate-limit-rps 0 */
	for (int i = 0; i < 60; i++) {
		ty_http_raw(&r, s->api, "GET", "/v1/teams", member, NULL, 0, NULL);
		if (r.status != 200) {
			FAIL("request %d of 60 got %d: %s", i + 1, r.status, r.body);
			break;
		}
	}
	ty_resp_free(&r);
}

/* ---- max_pending_jobs ---- */

static const char *job(const char *team, const char *name)
{
	return ty_tmpl(ty_test_strf("{'team':'@T','name':'%s','command':['python','t.py'],"
				    "'resources':{'gpus_per_node':1}}",
				    name),
		       team);
}

static const char *const *key(const char *k)
{
	const char **h = ty_test_alloc(2 * sizeof(*h));

	h[0] = ty_test_strf("Idempotency-Key: %s", k);
	return h;
}

static int pending(const char *team)
{
	return atoi(TY_STACK_SQL("SELECT count(*) FROM jobs j JOIN teams t ON t.id = j.team_id"
				 " WHERE t.name = $1 AND j.state = 'pending'",
				 team));
}

static const char *mk_limited_team(const char *prefix, int max_pending)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_uniq(prefix);
	struct ty_resp r = {0};

	ty_http_raw(&r, s->api, "POST", "/v1/teams", s->admin,
		    ty_test_jf("{'name':'%s','nominal_gpus':8,'max_pending_jobs':%d}", team,
			       max_pending),
		    strlen(ty_test_jf("{'name':'%s','nominal_gpus':8,'max_pending_jobs':%d}", team,
				      max_pending)),
		    NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "max_pending_jobs", max_pending);
	ty_resp_free(&r);
	return team;
}

TY_TEST(max_pending_jobs_through_the_teams_api)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("mp", 4, -1);
	struct ty_resp r = {0};
	struct {
		const char *body;
		int status;
		const char *code; /* NULL: 200 */
		long long want;   /* -1: null */
	} cases[] = {
		{"{'max_pending_jobs':3}", 200, NULL, 3},
		{"{'weight':2}", 200, NULL, 3}, /* absent: unchanged */
		{"{'max_pending_jobs':0}", 200, NULL, 0},
		{"{'max_pending_jobs':null}", 200, NULL, -1},
		{"{'max_pending_jobs':-1}", 422, "invalid_field", 0},
		{"{'max_pending_jobs':1000001}", 422, "invalid_field", 0},
		{"{'max_pending_jobs':'5'}", 422, "invalid_field", 0},
		{"{'max_pending_jobs':2.5}", 422, "invalid_field", 0},
	};

	ty_http(&r, "GET", ty_test_strf("/v1/teams/%s", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "max_pending_jobs"); /* the default: no limit */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ty_test_context("PATCH %s", cases[i].body);
		ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), s->admin,
			ty_test_jf("%s", cases[i].body), NULL);
		if (cases[i].code) {
			CHECK_PROBLEM(&r, cases[i].status, cases[i].code, "max_pending_jobs");
			continue;
		}
		CHECK_STATUS(&r, 200);
		if (cases[i].want < 0)
			CHECK_JNULL(r.json, "max_pending_jobs");
		else
			CHECK_JINT(r.json, "max_pending_jobs", cases[i].want);
	}
	ty_test_context(NULL);
	/* members may read it, not set it */
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), ty_mk_token("member", team),
		"{\"max_pending_jobs\":100}", NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_jf("{'name':'%s','nominal_gpus':1,'max_pending_jobs':-2}", ty_uniq("mpx")),
		NULL);
	CHECK_PROBLEM(&r, 422, "invalid_field", "max_pending_jobs");
	ty_resp_free(&r);
}

/* A team's checkpoint retention defaults: set, refused, and what a job's spec takes from them. */
TY_TEST(checkpoint_defaults_through_the_teams_api)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("ckd", 4, -1);
	struct ty_resp r = {0};
	struct {
		const char *body;
		const char *field; /* the refused field, NULL: 200 */
	} bad[] = {
		{"{'checkpoint_keep':0}", "checkpoint_keep"},
		{"{'checkpoint_keep':101}", "checkpoint_keep"},
		{"{'checkpoint_keep':'3'}", "checkpoint_keep"},
		{"{'checkpoint_keep_every':-1}", "checkpoint_keep_every"},
		{"{'checkpoint_keep_every':1000000001}", "checkpoint_keep_every"},
		{"{'checkpoint_tier':'yes'}", "checkpoint_tier"},
	};

	ty_http(&r, "GET", ty_test_strf("/v1/teams/%s", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "checkpoint_keep");
	CHECK_JNULL(r.json, "checkpoint_keep_every");
	CHECK_JNULL(r.json, "checkpoint_tier");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("PATCH %s", bad[i].body);
		ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), s->admin,
			ty_test_jf("%s", bad[i].body), NULL);
		CHECK_PROBLEM(&r, 422, "invalid_field", bad[i].field);
	}
	ty_test_context(NULL);
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), s->admin,
		ty_test_jf("{'checkpoint_keep':2,'checkpoint_keep_every':500,'checkpoint_tier':true}"),
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "checkpoint_keep", 2);
	CHECK_JINT(r.json, "checkpoint_keep_every", 500);
	CHECK(json_is_true(ty_jpath(r.json, "checkpoint_tier")));

	/* a job that names none takes the team's; one that names a field keeps its own */
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "takes"), NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "spec.checkpoint.keep", 2);
	CHECK_JINT(r.json, "spec.checkpoint.keep_every", 500);
	CHECK(json_is_true(ty_jpath(r.json, "spec.checkpoint.tier")));
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['python','t.py'],'resources':{},"
			"'checkpoint':{'keep':7,'keep_every':0,'tier':false}}",
			team),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "spec.checkpoint.keep", 7);
	CHECK_JINT(r.json, "spec.checkpoint.keep_every", 0);
	CHECK(json_is_false(ty_jpath(r.json, "spec.checkpoint.tier")));
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['python','t.py'],'resources':{},"
			"'checkpoint':{'keep':4}}",
			team),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "spec.checkpoint.keep", 4);
	CHECK_JINT(r.json, "spec.checkpoint.keep_every", 500);
	/* null: the spec's own default again */
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), s->admin,
		ty_test_jf("{'checkpoint_keep':null,'checkpoint_keep_every':null,"
			   "'checkpoint_tier':null}"),
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "checkpoint_keep");
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "plain"), NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "spec.checkpoint.keep", 3);
	CHECK_JINT(r.json, "spec.checkpoint.keep_every", 0);
	CHECK(json_is_false(ty_jpath(r.json, "spec.checkpoint.tier")));
	ty_resp_free(&r);
}

TY_TEST(submission_beyond_the_limit_is_429)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = mk_limited_team("mp-j", 2);
	const char *member = ty_mk_token("member", team);
	struct ty_resp r = {0};
	long long first;

	ty_test_api_use(s->api);
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "a"), NULL);
	REQUIRE_STATUS(&r, 201);
	first = ty_jint(r.json, "id");
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "b"), NULL);
	REQUIRE_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "c"), NULL);
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	CHECK(r.body && strstr(r.body, "2 pending job(s) and a limit of 2"));
	/* admins are held to it as well: it is the team's limit */
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "c"), NULL);
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	CHECK_INT_EQ(pending(team), 2);
	/* a cancelled job frees its slot */
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", first), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "c"), NULL);
	CHECK_STATUS(&r, 201);
	/* only pending jobs count: one that started frees its slot too */
	TY_STACK_SQL("UPDATE jobs SET state = 'running' WHERE id = $1",
		     ty_test_strf("%lld", ty_jint(r.json, "id")));
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "d"), NULL);
	CHECK_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "e"), NULL);
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	/* lifting the limit lets it through */
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), s->admin,
		"{\"max_pending_jobs\":null}", NULL);
	REQUIRE_STATUS(&r, 200);
	ty_http(&r, "POST", "/v1/jobs", member, job(team, "e"), NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(limit_0_refuses_every_submission)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = mk_limited_team("mp-0", 0);
	struct ty_resp r = {0};

	ty_test_api_use(s->api);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "a"), NULL);
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	CHECK_INT_EQ(pending(team), 0);
	ty_resp_free(&r);
}

TY_TEST(idempotent_replay_at_the_limit_returns_the_original)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = mk_limited_team("mp-idem", 1);
	const char *k = ty_uniq("k");
	struct ty_resp r = {0};
	long long id;

	ty_test_api_use(s->api);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "a"), key(k));
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	/* the team is full, and the same request is still answered with its job */
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "a"), key(k));
	CHECK_STATUS(&r, 200);
	CHECK_STR_EQ(ty_resp_header(&r, "Idempotent-Replayed"), "true");
	CHECK_INT_EQ(ty_jint(r.json, "id"), id);
	/* the same key with another body is still a conflict, not the limit */
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "other"), key(k));
	CHECK_PROBLEM(&r, 409, "idempotency_conflict", NULL);
	/* a new key is a new submission: refused */
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "a"), key(ty_uniq("k")));
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	CHECK_INT_EQ(pending(team), 1);
	ty_resp_free(&r);
}

static const char *sweep(const char *team, int trials)
{
	struct {
		char s[4096];
	} *b = ty_test_alloc(sizeof(*b));
	int n;

	n = snprintf(b->s, sizeof(b->s),
		     "{\"team\":\"%s\",\"template\":{\"command\":[\"python\",\"t.py\"],"
		     "\"resources\":{}},\"trials\":[",
		     team);
	for (int i = 0; i < trials; i++)
		n += snprintf(b->s + n, sizeof(b->s) - (size_t)n, "%s{\"a\":%d}", i ? "," : "", i);
	snprintf(b->s + n, sizeof(b->s) - (size_t)n, "]}");
	return b->s;
}

TY_TEST(sweeps_count_every_trial)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = mk_limited_team("mp-sw", 3);
	const char *k = ty_uniq("sk");
	struct ty_resp r = {0};
	long long id;

	ty_test_api_use(s->api);
	ty_http(&r, "POST", "/v1/sweeps", s->admin, sweep(team, 4), NULL);
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	CHECK(r.body && strstr(r.body, "4 more do not fit"));
	CHECK_INT_EQ(pending(team), 0);
	ty_http(&r, "POST", "/v1/sweeps", s->admin, sweep(team, 2), key(k));
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	CHECK_INT_EQ(pending(team), 2);
	/* replayed at the limit, not refused */
	ty_http(&r, "POST", "/v1/sweeps", s->admin, sweep(team, 2), key(k));
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(ty_jint(r.json, "id"), id);
	ty_http(&r, "POST", "/v1/sweeps", s->admin, sweep(team, 2), NULL);
	CHECK_PROBLEM(&r, 429, "pending_jobs_limit", NULL);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job(team, "last"), NULL);
	CHECK_STATUS(&r, 201);
	CHECK_INT_EQ(pending(team), 3);
	ty_resp_free(&r);
}

#define NRACERS 12

struct racer {
	const char *body;
	const char *const *headers;
	const char *token;
	pthread_barrier_t *start;
	int status;
	long long id;
	char code[64];
};

static void *race(void *p)
{
	struct racer *x = p;
	struct ty_resp r = {0};
	const char *code;

	pthread_barrier_wait(x->start);
	x->status = ty_http(&r, "POST", "/v1/jobs", x->token, x->body, x->headers);
	x->id = ty_jint(r.json, "id");
	code = ty_jstr(r.json, "code");
	snprintf(x->code, sizeof(x->code), "%s", code ? code : "");
	ty_resp_free(&r);
	return NULL;
}

/* Run NRACERS concurrent submissions; counts of 201, 200 and 429 pending_jobs_limit. */
static void run_race(int *created, int *replayed, int *refused, const char *token,
		     const char *const *bodies, const char *const *headers)
{
	struct racer racers[NRACERS];
	pthread_t th[NRACERS];
	pthread_barrier_t start;

	*created = *replayed = *refused = 0;
	pthread_barrier_init(&start, NULL, NRACERS);
	for (int i = 0; i < NRACERS; i++) {
		racers[i] = (struct racer){bodies[i], headers, token, &start, 0, -1, ""};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, race, &racers[i]), 0);
	}
	for (int i = 0; i < NRACERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < NRACERS; i++) {
		if (racers[i].status == 201)
			(*created)++;
		else if (racers[i].status == 200)
			(*replayed)++;
		else if (racers[i].status == 429 && !strcmp(racers[i].code, "pending_jobs_limit"))
			(*refused)++;
		else
			FAIL("racer %d got %d %s", i, racers[i].status, racers[i].code);
	}
}

TY_TEST(concurrent_submissions_never_overfill)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = mk_limited_team("mp-race", 5);
	const char *member = ty_mk_token("member", team);
	const char *bodies[NRACERS];
	int created, replayed, refused;

	ty_test_api_use(s->api);
	for (int i = 0; i < NRACERS; i++)
		bodies[i] = job(team, ty_test_strf("r%d", i));
	run_race(&created, &replayed, &refused, member, bodies, NULL);
	CHECK_INT_EQ(created, 5);
	CHECK_INT_EQ(replayed, 0);
	CHECK_INT_EQ(refused, NRACERS - 5);
	CHECK_INT_EQ(pending(team), 5);
}

TY_TEST(concurrent_duplicates_for_the_last_slot_all_get_the_job)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = mk_limited_team("mp-dup", 1);
	const char *body = job(team, "dup");
	const char *bodies[NRACERS];
	int created, replayed, refused;

	ty_test_api_use(s->api);
	for (int i = 0; i < NRACERS; i++)
		bodies[i] = body;
	/* one creates the job, every other one is a replay of it: none is refused */
	run_race(&created, &replayed, &refused, s->admin, bodies, key(ty_uniq("dup")));
	CHECK_INT_EQ(created, 1);
	CHECK_INT_EQ(replayed, NRACERS - 1);
	CHECK_INT_EQ(refused, 0);
	CHECK_INT_EQ(pending(team), 1);
}
