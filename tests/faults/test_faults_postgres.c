/*
 * PostgreSQL stopped and restarted (fast and immediate shutdown) while a
 * client submits jobs without pause, while the scheduler places a burst of
 * them, and while a gang runs. Nothing is restarted by the test but
 * PostgreSQL: the API answers 503 with Retry-After while the database is
 * away and recovers by itself, as do the scheduler and the executors. Every
 * submission that got a 2xx exists afterwards, exactly once (the client
 * retries with the same Idempotency-Key), and the invariants hold.
 * Runs alone (RUN_SERIAL): it stops the shared test PostgreSQL.
 */
#include "invariants.h"
#include "ty_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SUBMITS 64
#define ONE_GPU "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}"

struct submitter {
	struct e2e *e;
	const char *key_prefix;
	atomic_bool stop;
	atomic_int done; /* submissions answered 2xx */
	long long ids[MAX_SUBMITS];
	int unavailable; /* 503 answers (each with Retry-After, else a failure) */
	int retries;	 /* requests repeated after a 5xx or a transport error */
};

/*
 * Submit one job after another until told to stop; on a 503 (or any 5xx)
 * wait and send the same request with the same Idempotency-Key again.
 */
static void *submit_loop(void *arg)
{
	struct submitter *s = arg;
	const char *body = ty_test_strf("{\"team\":\"%s\",\"command\":%s,\"env\":{\"OUTDIR\":\"%s\"},%s}",
					s->e->team, FAULTS_RANK_CMD("5"), s->e->out, ONE_GPU);

	while (!atomic_load(&s->stop) && atomic_load(&s->done) < MAX_SUBMITS) {
		int i = atomic_load(&s->done);
		const char *hdr[] = {ty_test_strf("Idempotency-Key: %s-%d", s->key_prefix, i), NULL};
		struct ty_resp r = {0};

		ty_http(&r, "POST", "/v1/jobs", s->e->token, body, hdr);
		if (r.status == 201 || r.status == 200) {
			s->ids[i] = ty_jint(r.json, "id");
			atomic_fetch_add(&s->done, 1);
			ty_resp_free(&r);
			usleep(50 * 1000);
			continue;
		}
		if (r.status == 503) {
			const char *ra = ty_resp_header(&r, "Retry-After");

			s->unavailable++;
			if (!ra || atoi(ra) < 1)
				FAIL("503 without a Retry-After of at least 1 s: '%s'",
				     ra ? ra : "(none)");
			CHECK_STR_EQ(ty_jstr(r.json, "code"), "unavailable");
		} else {
			FAIL("submission %d answered %d while PostgreSQL was away, not 503: %s %s",
			     i, r.status, r.body ? r.body : "", r.error);
		}
		s->retries++;
		ty_resp_free(&r);
		usleep(100 * 1000);
	}
	return NULL;
}

static void wait_done(struct submitter *s, int n)
{
	for (int t = 0; t < 600 && atomic_load(&s->done) < n; t++)
		usleep(50 * 1000);
	REQUIRE(atomic_load(&s->done) >= n);
}

/* A request while the database is down: 503, Retry-After, problem "unavailable". */
static void expect_unavailable(struct e2e *e, const char *method, const char *path,
			       const char *body)
{
	struct ty_resp r = {0};

	ty_test_context("%s %s with PostgreSQL stopped", method, path);
	ty_http(&r, method, path, e->token, body, NULL);
	CHECK_PROBLEM(&r, 503, "unavailable", NULL);
	CHECK_STR_EQ(ty_resp_header(&r, "Retry-After"), "1");
	ty_resp_free(&r);
	ty_test_context(NULL);
}

TY_TEST(submissions_and_cycles_survive_fast_and_immediate_restarts)
{
	struct e2e *e = e2e_get();
	const char *const modes[] = {"fast", "immediate"};
	long long ids[2 * MAX_SUBMITS + 16];
	const char *states[2 * MAX_SUBMITS + 16];
	int n = 0, unavailable = 0;

	/*
	 * tests/run's server trades durability for speed (synchronous_commit =
	 * off): a commit it acknowledged may be lost by an immediate shutdown,
	 * which production (synchronous_commit = on) rules out. This database
	 * gets the production setting; the sessions the fast stop below ends
	 * come back with it before the first immediate shutdown.
	 */
	TY_STACK_SQL("DO $$BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = on',"
		     " current_database()); END$$");
	for (int m = 0; m < 2; m++) {
		struct submitter s = {.e = e, .key_prefix = ty_test_strf("%s-%s", e->team, modes[m])};
		pthread_t th;

		ty_test_note("pg_ctl -m %s: outage during submissions", modes[m]);
		REQUIRE(pthread_create(&th, NULL, submit_loop, &s) == 0);
		wait_done(&s, 6);
		ty_test_pg_stop(modes[m]);
		/* the API stays up and says so, for reads and writes alike */
		expect_unavailable(e, "GET", ty_test_strf("/v1/jobs/%lld", s.ids[0]), NULL);
		expect_unavailable(e, "POST", "/v1/jobs",
				   ty_test_strf("{\"team\":\"%s\",\"command\":[\"true\"]}", e->team));
		usleep(1000 * 1000);
		ty_test_pg_start();
		wait_done(&s, atomic_load(&s.done) + 6); /* it recovered by itself */
		atomic_store(&s.stop, true);
		pthread_join(th, NULL);
		CHECK(s.unavailable > 0); /* the client saw the outage */
		unavailable += s.unavailable;
		for (int i = 0; i < atomic_load(&s.done); i++)
			ids[n++] = s.ids[i];

		/* a burst the next cycles are placing when the server goes away */
		ty_test_note("pg_ctl restart -m %s: during scheduling cycles", modes[m]);
		for (int i = 0; i < 8; i++)
			ids[n++] = e2e_submit(e, FAULTS_RANK_CMD("5"), ONE_GPU);
		ty_test_pg_restart(modes[m]);
	}
	for (int i = 0; i < n; i++)
		states[i] = "succeeded";
	ty_test_note("%d jobs, %d answers 503 seen by the client", n, unavailable);
	faults_check_invariants(e, ids, states, n, 90000);
}

TY_TEST(postgres_restarts_mid_job)
{
	struct e2e *e = e2e_get();
	const char *const modes[] = {"fast", "immediate"};
	long long ids[2];
	const char *const states[2] = {"succeeded", "succeeded"};

	for (int m = 0; m < 2; m++) {
		json_t *job;

		ids[m] = e2e_submit(e, FAULTS_RANK_CMD("30"),
				    "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
		ty_test_context("pg_ctl restart -m %s", modes[m]);
		json_decref(e2e_wait_state(e, ids[m], "running", 60000));
		ty_test_pg_restart(modes[m]);
		job = e2e_wait_state(e, ids[m], "succeeded,failed,cancelled", 60000);
		CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
		CHECK_INT_EQ(ty_jint(job, "attempt"), 1); /* the gang was not disturbed */
		json_decref(job);
	}
	ty_test_context(NULL);
	faults_check_invariants(e, ids, states, 2, 60000);
}
