/*
 * The scheduler leader killed inside a cycle's windows (issue 9, "Faults"):
 * a leader started with --fault-crash-at POINT SIGKILLs itself the first time
 * it reaches POINT with work at stake, the standby takes over, and every job
 * still runs exactly once — each rank of attempt 1 once, no second attempt —,
 * ends in the right state, leaks no allocation, and the outbox drains. Then
 * the same with SIGKILLs at random moments (seeded; TY_FAULT_SEED repeats a
 * run). Runs alone (RUN_SERIAL): two schedulers and many short jobs on two
 * shared cores.
 */
#include "e2e.h"
#include "soak_checks.h"
#include "ty_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define JOBS 3
#define TWO_NODES "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}"

/* Schedulers this program started; each case stops the previous case's. */
static struct ty_daemon *running[8];
static int nrunning;

static void stop_schedulers(struct e2e *e)
{
	ty_test_daemon_stop(e->sched[0], 5000);
	ty_test_daemon_stop(e->sched[1], 5000);
	for (int i = 0; i < nrunning; i++)
		ty_test_daemon_stop(running[i], 5000);
	nrunning = 0;
}

static struct ty_daemon *scheduler(struct e2e *e, const char *id, const char *const *extra)
{
	struct ty_daemon *d = e2e_scheduler_new(e, ty_uniq(id), id, extra);

	REQUIRE(nrunning < (int)(sizeof(running) / sizeof(running[0])));
	running[nrunning++] = d;
	return d;
}

/* A leader armed at point (it leads before the standby starts), and a plain standby. */
static void leader_and_standby(struct ty_daemon **leader, struct ty_daemon **standby, struct e2e *e,
			       const char *point)
{
	stop_schedulers(e);
	*leader =
	    scheduler(e, ty_uniq("crash"), (const char *const[]){"--fault-crash-at", point, NULL});
	REQUIRE(ty_test_daemon_wait_log(*leader, "leading as", 30000));
	*standby = scheduler(e, ty_uniq("standby"), NULL);
	REQUIRE(ty_test_daemon_wait_log(*standby, "standing by", 30000));
}

static void wait_crash(struct ty_daemon *leader, struct ty_daemon *standby, const char *point)
{
	for (int i = 0; i < 600 && ty_test_daemon_running(leader); i++)
		usleep(100 * 1000);
	REQUIRE(!ty_test_daemon_running(leader));
	CHECK(
	    ty_test_daemon_wait_log(leader, ty_test_strf("crash point '%s' reached", point), 1000));
	REQUIRE(ty_test_daemon_wait_log(standby, "leading as", 30000));
}

/* Submit JOBS 2-node jobs, crash the leader at point, check everything ran once. */
static void crash_at(const char *point)
{
	struct e2e *e = e2e_get();
	struct ty_daemon *leader, *standby;
	struct fchk_job jobs[JOBS];

	leader_and_standby(&leader, &standby, e, point);
	for (int i = 0; i < JOBS; i++)
		jobs[i] = (struct fchk_job){.id = e2e_submit(e, fchk_rank_command(4), TWO_NODES),
					    .ranks = 2,
					    .want = "succeeded"};
	wait_crash(leader, standby, point);
	CHECK_INT_EQ(fchk_all(e, jobs, JOBS, 60000), 0);
}

TY_TEST(cycle_before_commit)
{
	crash_at("cycle_before_commit");
}

TY_TEST(cycle_after_commit)
{
	crash_at("cycle_after_commit");
}

TY_TEST(relay_mid)
{
	crash_at("relay_mid");
}

TY_TEST(relay_after_send)
{
	crash_at("relay_after_send");
}

TY_TEST(events_before_commit)
{
	crash_at("events_before_commit");
}

TY_TEST(events_after_commit)
{
	crash_at("events_after_commit");
}

/* The kills of a cancel committed, the leader dies before it sends them. */
TY_TEST(cancel_after_commit)
{
	struct e2e *e = e2e_get();
	struct ty_daemon *leader, *standby;
	struct ty_resp r = {0};
	struct fchk_job job;

	leader_and_standby(&leader, &standby, e, "cancel_after_commit");
	/* 60 s of life: only the relayed kill ends it before the case's timeout */
	job = (struct fchk_job){.id = e2e_submit(e, fchk_rank_command(240), TWO_NODES),
				.ranks = 2,
				.want = "cancelled"};
	json_decref(e2e_wait_state(e, job.id, "running", 60000));
	REQUIRE_INT_EQ(
	    ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job.id), e->token, NULL, NULL),
	    200);
	ty_resp_free(&r);
	wait_crash(leader, standby, "cancel_after_commit");
	CHECK_INT_EQ(fchk_all(e, &job, 1, 45000), 0);
	for (int rank = 0; rank < 2; rank++) {
		/* the rank was stopped, it did not run to its end */
		ty_test_context("rank %d", rank);
		CHECK(e2e_count_files(e, ty_test_strf("rank-%lld-1-%d.", job.id, rank)) == 1);
	}
	ty_test_context(NULL);
}

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/*
 * Two schedulers; whoever leads is SIGKILLed at a random moment (0–1.5 s
 * into its term) and started again as the standby, while 20 jobs arrive
 * in random bursts.
 */
TY_TEST(random_leader_kills)
{
	enum { N = 20 };
	struct e2e *e = e2e_get();
	struct ty_daemon *d[2];
	const char *ids[2] = {"random-a", "random-b"};
	struct fchk_job jobs[N];
	const char *env = getenv("TY_FAULT_SEED");
	unsigned seed = env && *env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
	int submitted = 0, kills = 0;
	long long deadline;

	ty_test_note("seed %u (TY_FAULT_SEED=%u repeats this run)", seed, seed);
	printf("random_leader_kills: seed %u\n", seed);
	srand(seed);
	stop_schedulers(e);
	d[0] = scheduler(e, ids[0], NULL);
	REQUIRE(ty_test_daemon_wait_log(d[0], "leading as", 30000));
	d[1] = scheduler(e, ids[1], NULL);
	deadline = now_ms() + 90000;
	while (now_ms() < deadline) {
		const char *holder, *epoch;
		int lead;

		/* a burst of 1-3 jobs */
		for (int b = 1 + rand() % 3; b > 0 && submitted < N; b--)
			jobs[submitted++] = (struct fchk_job){
			    .id = e2e_submit(e, fchk_rank_command(2 + rand() % 4), TWO_NODES),
			    .ranks = 2,
			    .want = "succeeded"};
		usleep((useconds_t)(rand() % 1500) * 1000);
		epoch = TY_STACK_SQL("SELECT epoch FROM leader WHERE id = 1");
		holder = TY_STACK_SQL("SELECT holder FROM leader WHERE id = 1");
		lead = !strcmp(holder, ids[0]) ? 0 : !strcmp(holder, ids[1]) ? 1 : -1;
		REQUIRE(lead >= 0);
		ty_test_daemon_kill(d[lead]);
		kills++;
		ty_test_daemon_restart(d[lead]);
		/* the other one takes over before the next kill */
		for (int i = 0; i < 300; i++) {
			if (strcmp(TY_STACK_SQL("SELECT epoch FROM leader WHERE id = 1"), epoch))
				break;
			usleep(50 * 1000);
		}
		if (submitted == N) {
			bool all_done = true;

			for (int i = 0; i < N && all_done; i++) {
				json_t *j = e2e_wait_state(e, jobs[i].id,
							   "pending,scheduled,starting,running,"
							   "preempting,succeeded,failed,cancelled,"
							   "stopped",
							   5000);
				const char *st = ty_jstr(j, "state");

				all_done =
				    st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") ||
					   !strcmp(st, "cancelled"));
				json_decref(j);
			}
			if (all_done)
				break;
		}
	}
	ty_test_note("%d leader kills over %d jobs", kills, submitted);
	REQUIRE_INT_EQ(submitted, N);
	CHECK(kills >= 3);
	CHECK_INT_EQ(fchk_all(e, jobs, N, 90000), 0);
}
