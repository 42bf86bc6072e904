/* Idempotency-Key on POST /v1/jobs (docs/api.md "Conventions"). */
#include "ty_stack.h"
#include "ty_test.h"

#include <pthread.h>
#include <string.h>

static const char *const *key(const char *k)
{
	const char **h = ty_test_alloc(2 * sizeof(*h));

	h[0] = ty_test_strf("Idempotency-Key: %s", k);
	return h;
}

static const char *job_body(const char *team, const char *name)
{
	return ty_tmpl(ty_test_strf("{'team':'@T','name':'%s','command':['python','t.py'],"
				    "'resources':{'gpus_per_node':1}}",
				    name),
		       team);
}

TY_TEST(replay_returns_the_first_job)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idem", 8, -1);
	const char *k = ty_uniq("key");
	struct ty_resp first = {0}, again = {0};
	int before;

	ty_http(&first, "POST", "/v1/jobs", s->admin, job_body(team, "a"), key(k));
	REQUIRE_STATUS(&first, 201);
	CHECK_STR_EQ(ty_resp_header(&first, "Idempotent-Replayed"), NULL);
	before = ty_count_jobs(s->admin, ty_test_strf("team=%s", team));

	for (int i = 0; i < 2; i++) {
		ty_test_context("replay %d", i + 1);
		ty_http(&again, "POST", "/v1/jobs", s->admin, job_body(team, "a"), key(k));
		CHECK_STATUS(&again, 200);
		CHECK_STR_EQ(ty_resp_header(&again, "Idempotent-Replayed"), "true");
		CHECK_INT_EQ(ty_jint(again.json, "id"), ty_jint(first.json, "id"));
		CHECK_JSTR(again.json, "created_at", ty_jstr(first.json, "created_at"));
		CHECK(json_equal(ty_jpath(again.json, "spec"), ty_jpath(first.json, "spec")));
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), before);
	ty_resp_free(&first);
	ty_resp_free(&again);
}

TY_TEST(replay_after_cancel_returns_the_job_as_it_is)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idem-c", 8, -1);
	const char *k = ty_uniq("key");
	struct ty_resp r = {0};
	long long id;

	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "c"), key(k));
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	/* still the same job: no new submission under the old key */
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "c"), key(k));
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(ty_jint(r.json, "id"), id);
	ty_resp_free(&r);
}

TY_TEST(different_body_is_409)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idem2", 8, -1);
	const char *k = ty_uniq("key");
	struct ty_resp r = {0};
	int before;

	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "a"), key(k));
	REQUIRE_STATUS(&r, 201);
	before = ty_count_jobs(s->admin, ty_test_strf("team=%s", team));
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "b"), key(k));
	CHECK_PROBLEM(&r, 409, "idempotency_conflict", TY_FIELD_UNCHECKED);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), before);
	ty_resp_free(&r);
}

TY_TEST(keys_are_scoped_per_team)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("idem-a", 8, -1), *b = ty_mk_team("idem-b", 8, -1);
	const char *k = ty_uniq("shared-key");
	const char *member_b = ty_mk_token("member", b);
	struct ty_resp r = {0};
	long long ida, idb, idb2;

	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(a, "x"), key(k));
	REQUIRE_STATUS(&r, 201);
	ida = ty_jint(r.json, "id");
	/* the same key in another team is a new job, whatever the body */
	ty_http(&r, "POST", "/v1/jobs", member_b, job_body(b, "x"), key(k));
	REQUIRE_STATUS(&r, 201);
	idb = ty_jint(r.json, "id");
	CHECK(ida != idb);
	CHECK_JSTR(r.json, "team", b);
	/* and replays in each team find their own job */
	ty_http(&r, "POST", "/v1/jobs", member_b, job_body(b, "x"), key(k));
	CHECK_STATUS(&r, 200);
	idb2 = ty_jint(r.json, "id");
	CHECK_INT_EQ(idb2, idb);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(a, "x"), key(k));
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(ty_jint(r.json, "id"), ida);
	ty_resp_free(&r);
}

TY_TEST(key_format)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idem-f", 8, -1);
	char max[256];
	struct ty_resp r = {0};

	/* 1 and 255 printable characters are fine */
	memset(max, '~', 255);
	max[255] = '\0';
	max[0] = 'k';
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "one"), key("1"));
	CHECK_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "max"), key(max));
	CHECK_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "sp"), key("with space !\"#"));
	CHECK_STATUS(&r, 201);
	/* 256 characters, non-ASCII, a control character: invalid_header */
	memset(max, 'k', 255);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "x"),
		key(ty_test_strf("%sk", max)));
	CHECK_PROBLEM(&r, 400, "invalid_header", TY_FIELD_UNCHECKED);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "x"), key("caf\xc3\xa9"));
	CHECK_PROBLEM(&r, 400, "invalid_header", TY_FIELD_UNCHECKED);
	ty_http(&r, "POST", "/v1/jobs", s->admin, job_body(team, "x"), key("tab\there"));
	CHECK_PROBLEM(&r, 400, "invalid_header", TY_FIELD_UNCHECKED);
	ty_resp_free(&r);
}

#define NTHREADS 8

struct racer {
	const char *body, *const *headers, *token;
	pthread_barrier_t *start;
	int status;
	long long id;
	char replayed[8];
};

static void *race(void *p)
{
	struct racer *x = p;
	struct ty_resp r = {0};
	const char *rep;

	pthread_barrier_wait(x->start);
	x->status = ty_http(&r, "POST", "/v1/jobs", x->token, x->body, x->headers);
	x->id = ty_jint(r.json, "id");
	rep = ty_resp_header(&r, "Idempotent-Replayed");
	snprintf(x->replayed, sizeof(x->replayed), "%s", rep ? rep : "");
	if (x->status != 200 && x->status != 201)
		ty_test_note("racer got HTTP %d: %s", x->status, r.body);
	ty_resp_free(&r);
	return NULL;
}

/* 8 concurrent submissions with one key create exactly one job. */
TY_TEST(concurrent_duplicates_create_one_job)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idem-race", 8, -1);
	const char *body = job_body(team, "race");
	const char *const *hdrs = key(ty_uniq("race"));
	struct racer racers[NTHREADS];
	pthread_t th[NTHREADS];
	pthread_barrier_t start;
	int created = 0, replayed = 0;

	pthread_barrier_init(&start, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		racers[i] = (struct racer){body, hdrs, s->admin, &start, 0, -1, ""};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, race, &racers[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);

	for (int i = 0; i < NTHREADS; i++) {
		ty_test_context("racer %d", i);
		if (racers[i].status == 201) {
			created++;
		} else if (racers[i].status == 200) {
			replayed++;
			CHECK_STR_EQ(racers[i].replayed, "true");
		} else {
			FAIL("HTTP %d, want 200 or 201", racers[i].status);
		}
		CHECK_INT_EQ(racers[i].id, racers[0].id);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(created, 1);
	CHECK_INT_EQ(replayed, NTHREADS - 1);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 1);
}

/* Without a key every submission is a new job. */
TY_TEST(no_key_no_deduplication)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("idem-none", 8, -1);
	long long a = ty_mk_job(s->admin, team, NULL), b = ty_mk_job(s->admin, team, NULL);

	CHECK(a != b);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 2);
}
