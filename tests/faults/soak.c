/*
 * The soak (issue 9, "Faults"): short jobs stream through the e2e stack for
 * a bounded time while random faults hit it — the scheduler leader SIGKILLed
 * (and sometimes restarted with a crash point, tests/faults/README.md),
 * an executor SIGKILLed and restarted, every broker down and up
 * (trainyard-broker's SIGUSR1/SIGUSR2), PostgreSQL restarted (fast) —;
 * then every job must end and the invariants of soak_checks.h hold. A report
 * (jobs, faults by kind with their times, invariant checks) is printed and
 * written as JSON.
 *
 * Environment: TY_SOAK_SECONDS (faults and submissions, default 70),
 * TY_SOAK_SEED (default: the clock; printed), TY_SOAK_REPORT (the JSON
 * report's path, default soak-report.json in the work directory). Runs
 * alone (RUN_SERIAL): it restarts the shared PostgreSQL.
 */
#include "e2e.h"
#include "soak_checks.h"
#include "ty_test.h"

#include <jansson.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BACKLOG 24	     /* jobs not yet terminal, at most */
#define DRAIN_MS 60000	     /* for the last jobs to end once faults stop */
#define CHECK_WAIT_MS 120000 /* fchk_terminal's bound (every job is terminal by then) */

enum fault_kind {
	F_LEADER_KILL,
	F_LEADER_CRASH_POINT,
	F_EXECUTOR_KILL,
	F_BROKER_OUTAGE,
	F_PG_RESTART,
	F_KINDS
};

static const char *const kind_names[F_KINDS] = {
    "leader_kill", "leader_crash_point", "executor_kill", "broker_outage", "postgres_restart",
};

static const char *const crash_points[] = {
    "cycle_before_commit",  "cycle_after_commit",  "relay_mid",		  "relay_after_send",
    "events_before_commit", "events_after_commit", "cancel_after_commit",
};

struct fault {
	enum fault_kind kind;
	long long at_ms, duration_ms;
	char detail[128];
};

static struct {
	struct e2e *e;
	long long t0;
	struct ty_daemon *sched[2];
	const char *armed[2]; /* crash point of sched[i], NULL when plain */
	struct fault *faults;
	int nfaults, capfaults;
	struct fchk_job *jobs;
	int njobs, capjobs;
	int submit_retries;
	unsigned seed;
} S;

static const char *const sched_ids[2] = {"soak-a", "soak-b"};

static long long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void nap_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

static int rnd(int n)
{
	return n > 0 ? rand() % n : 0;
}

static void record(enum fault_kind kind, long long at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void record(enum fault_kind kind, long long at, const char *fmt, ...)
{
	va_list ap;
	struct fault *f;

	if (S.nfaults == S.capfaults) {
		S.capfaults = S.capfaults ? S.capfaults * 2 : 64;
		REQUIRE((S.faults = realloc(S.faults, (size_t)S.capfaults * sizeof(*S.faults))));
	}
	f = &S.faults[S.nfaults++];
	f->kind = kind;
	f->at_ms = at - S.t0;
	f->duration_ms = now_ms() - at;
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
	printf("soak: +%.1fs %s (%s, %lld ms)\n", (double)f->at_ms / 1000.0, kind_names[kind],
	       f->detail, f->duration_ms);
	fflush(stdout);
}

/* The first column of sql's first row (new string), NULL while PostgreSQL is away. */
static char *sql_try(const char *sql)
{
	PGconn *c = PQconnectdb(ty_stack_get()->db_url);
	PGresult *res = NULL;
	char *v = NULL;

	if (PQstatus(c) == CONNECTION_OK && (res = PQexec(c, sql)) &&
	    PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) > 0)
		v = strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	PQfinish(c);
	return v;
}

static void sched_start(int i, const char *point)
{
	const char *const armed[] = {"--fault-crash-at",
				     point ? ty_test_strf("%s:%d", point, 1 + rnd(3)) : "", NULL};

	S.sched[i] =
	    e2e_scheduler_new(S.e, ty_uniq(sched_ids[i]), sched_ids[i], point ? armed : NULL);
	S.armed[i] = point;
}

/* A scheduler that died at its crash point is recorded and replaced by a plain one. */
static void watch_schedulers(void)
{
	for (int i = 0; i < 2; i++) {
		if (ty_test_daemon_running(S.sched[i]))
			continue;
		if (S.armed[i])
			record(F_LEADER_CRASH_POINT, now_ms(), "%s died at '%s'", sched_ids[i],
			       S.armed[i]);
		else
			FAIL("scheduler %s exited on its own (log %s)", sched_ids[i],
			     ty_test_daemon_log(S.sched[i]));
		sched_start(i, NULL);
	}
}

static void fault_leader_kill(void)
{
	long long at = now_ms();
	char *holder = sql_try("SELECT holder FROM leader WHERE id = 1");
	int i = holder && !strcmp(holder, sched_ids[0])	  ? 0
		: holder && !strcmp(holder, sched_ids[1]) ? 1
							  : -1;

	free(holder);
	if (i < 0 || !ty_test_daemon_running(S.sched[i]))
		return; /* between terms, or PostgreSQL away: no leader to kill */
	ty_test_daemon_kill(S.sched[i]);
	nap_ms(rnd(1000));
	/* back as the standby, plain or armed at a random crash point */
	if (rnd(2))
		sched_start(i,
			    crash_points[rnd((int)(sizeof(crash_points) / sizeof(*crash_points)))]);
	else
		sched_start(i, NULL);
	record(F_LEADER_KILL, at, "SIGKILL %s, back %s%s", sched_ids[i],
	       S.armed[i] ? "armed at " : "plain", S.armed[i] ? S.armed[i] : "");
}

static void fault_executor_kill(void)
{
	long long at = now_ms();
	int i = rnd(2);

	ty_test_daemon_kill(S.e->exec[i]);
	nap_ms(rnd(1500));
	e2e_start_executor(S.e, i);
	record(F_EXECUTOR_KILL, at, "SIGKILL %s and restart", S.e->node[i]);
}

static void fault_broker_outage(void)
{
	long long at = now_ms();
	int ms = 1000 + rnd(3000);

	ty_test_daemon_signal(S.e->broker, SIGUSR1);
	nap_ms(ms);
	ty_test_daemon_signal(S.e->broker, SIGUSR2);
	record(F_BROKER_OUTAGE, at, "every broker down for %d ms", ms);
}

static void fault_pg_restart(void)
{
	long long at = now_ms();

	ty_test_pg_restart("fast");
	record(F_PG_RESTART, at, "pg_ctl restart -m fast");
}

/* Submit one job, riding out 503s (Idempotency-Key: a retried POST never doubles it). */
static void submit(void)
{
	struct e2e *e = S.e;
	int nodes = rnd(4) == 0 ? 2 : 1;
	const char *key = ty_test_strf("Idempotency-Key: soak-%u-%d", S.seed, S.njobs);
	const char *const headers[] = {key, NULL};
	/* a node lost in a fault makes a 2-node job unschedulable for a moment: it waits */
	const char *body = ty_test_strf(
	    "{\"team\":\"%s\",\"command\":%s,\"env\":{\"OUTDIR\":\"%s\"},"
	    "\"resources\":{\"nodes\":%d,\"gpus_per_node\":1},\"retry\":{\"system\":5},"
	    "\"queue_if_unschedulable\":true}",
	    e->team, fchk_rank_command(rnd(3)), e->out, nodes);
	struct ty_resp r = {0};
	long long until = now_ms() + 60000;

	if (S.njobs == S.capjobs) {
		S.capjobs = S.capjobs ? S.capjobs * 2 : 1024;
		REQUIRE((S.jobs = realloc(S.jobs, (size_t)S.capjobs * sizeof(*S.jobs))));
	}
	for (;;) {
		int st = ty_http(&r, "POST", "/v1/jobs", e->token, body, headers);

		if (st == 201 || st == 200)
			break;
		if (now_ms() > until || (st != 503 && st != 0)) {
			FAIL("submit failed: HTTP %d %s", st, r.status ? r.body : r.error);
			ty_resp_free(&r);
			ty_test_abort();
		}
		S.submit_retries++;
		nap_ms(st == 503 ? 500 : 200);
	}
	S.jobs[S.njobs++] = (struct fchk_job){
	    .id = ty_jint(r.json, "id"), .ranks = nodes, .may_retry = true, .want = "succeeded"};
	ty_resp_free(&r);
}

/* Jobs of the team not terminal yet, -1 while the API cannot say. */
static int active_jobs(void)
{
	struct ty_resp r = {0};
	int n = -1;

	if (ty_http(&r, "GET",
		    ty_test_strf("/v1/jobs?team=%s&state=pending,scheduled,starting,running,"
				 "preempting&limit=500",
				 S.e->team),
		    S.e->token, NULL, NULL) == 200)
		n = (int)json_array_size(ty_jpath(r.json, "items"));
	ty_resp_free(&r);
	return n;
}

static json_t *report(long long ran_ms, const char *const *names, const int *violations,
		      int nchecks, bool passed)
{
	json_t *faults = json_array(), *by_kind = json_object(), *checks = json_array();
	int succeeded = 0, failed = 0, cancelled = 0, other = 0, retried = 0, attempts = 0;

	for (int i = 0; i < S.njobs; i++) {
		const struct fchk_job *j = &S.jobs[i];

		if (!strcmp(j->state, "succeeded"))
			succeeded++;
		else if (!strcmp(j->state, "failed"))
			failed++;
		else if (!strcmp(j->state, "cancelled"))
			cancelled++;
		else
			other++;
		retried += j->attempts > 1;
		attempts += j->attempts > 0 ? j->attempts : 0;
	}
	for (int k = 0; k < F_KINDS; k++)
		json_object_set_new(by_kind, kind_names[k], json_integer(0));
	for (int i = 0; i < S.nfaults; i++) {
		const struct fault *f = &S.faults[i];

		json_object_set_new(
		    by_kind, kind_names[f->kind],
		    json_integer(json_integer_value(json_object_get(by_kind, kind_names[f->kind])) +
				 1));
		json_array_append_new(faults,
				      json_pack("{s:s, s:f, s:I, s:s}", "kind", kind_names[f->kind],
						"at_s", (double)f->at_ms / 1000.0, "duration_ms",
						(json_int_t)f->duration_ms, "detail", f->detail));
	}
	for (int c = 0; c < nchecks; c++)
		json_array_append_new(checks,
				      json_pack("{s:s, s:i, s:b}", "name", names[c], "violations",
						violations[c], "passed", violations[c] == 0));
	return json_pack("{s:I, s:f, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i}, s:{s:i, s:o, "
			 "s:o}, s:o, s:b}",
			 "seed", (json_int_t)S.seed, "ran_s", (double)ran_ms / 1000.0, "jobs",
			 "submitted", S.njobs, "succeeded", succeeded, "failed", failed,
			 "cancelled", cancelled, "not_terminal", other, "retried", retried,
			 "attempts", attempts, "submit_retries", S.submit_retries, "faults",
			 "total", S.nfaults, "by_kind", by_kind, "list", faults, "invariants",
			 checks, "passed", passed);
}

TY_TEST(soak)
{
	const char *env_s = getenv("TY_SOAK_SECONDS"), *env_seed = getenv("TY_SOAK_SEED");
	const char *path = getenv("TY_SOAK_REPORT");
	int seconds = env_s && *env_s ? atoi(env_s) : 70;
	int max_faults = seconds / 2;
	long long deadline, next_fault, drain_until;
	const char *names[] = {"terminal_states", "jobs_present", "ranks_once_no_overlap",
			       "no_allocation_leak", "outbox_drained"};
	int v[5], nchecks = 5, active = 0;
	bool passed = true;
	json_t *rep;
	char *text;

	S.e = e2e_get();
	S.seed =
	    env_seed && *env_seed ? (unsigned)strtoul(env_seed, NULL, 10) : (unsigned)time(NULL);
	REQUIRE(seconds > 0);
	printf("soak: seed %u (TY_SOAK_SEED=%u repeats the fault plan), %d s\n", S.seed, S.seed,
	       seconds);
	ty_test_note("seed %u", S.seed);
	srand(S.seed);
	/* two schedulers of our own: one leads, the other stands by */
	ty_test_daemon_stop(S.e->sched[0], 5000);
	sched_start(0, NULL);
	REQUIRE(ty_test_daemon_wait_log(S.sched[0], "leading as", 30000));
	sched_start(1, NULL);

	S.t0 = now_ms();
	deadline = S.t0 + seconds * 1000LL;
	next_fault = S.t0 + 2000 + rnd(3000);
	while (now_ms() < deadline) {
		watch_schedulers();
		if ((active = active_jobs()) >= 0)
			for (; active < BACKLOG; active++)
				submit();
		if (now_ms() >= next_fault && S.nfaults < max_faults) {
			/* leader kills most often: they are this suite's subject */
			switch (rnd(8)) {
			case 0:
			case 1:
			case 2:
				fault_leader_kill();
				break;
			case 3:
			case 4:
				fault_executor_kill();
				break;
			case 5:
			case 6:
				fault_broker_outage();
				break;
			default:
				fault_pg_restart();
				break;
			}
			next_fault = now_ms() + 1500 + rnd(4000);
		}
		nap_ms(100);
	}
	printf("soak: faults over after %d job(s); draining\n", S.njobs);
	drain_until = now_ms() + DRAIN_MS;
	while (now_ms() < drain_until && active_jobs() != 0) {
		watch_schedulers();
		nap_ms(250);
	}

	/* the checks run with nobody armed: no crash may leave the cluster leaderless */
	for (int i = 0; i < 2; i++)
		if (S.armed[i] && ty_test_daemon_running(S.sched[i])) {
			ty_test_daemon_stop(S.sched[i], 5000);
			sched_start(i, NULL);
		}
	v[0] = fchk_terminal(S.e, S.jobs, S.njobs, CHECK_WAIT_MS);
	v[1] = fchk_jobs_present(S.e, S.jobs, S.njobs);
	v[2] = fchk_ranks(S.e, S.jobs, S.njobs);
	v[3] = fchk_no_leak(20000);
	v[4] = fchk_outbox_drained(20000);
	for (int c = 0; c < nchecks; c++)
		passed = passed && v[c] == 0;
	rep = report(now_ms() - S.t0, names, v, nchecks, passed);
	REQUIRE(rep);
	text = json_dumps(rep, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!path || !*path)
		path = ty_test_strf("%s/soak-report.json", ty_test_workdir());
	if (json_dump_file(rep, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
		FAIL("cannot write the report to '%s'", path);
	printf("soak report (%s):\n%s\n", path, text ? text : "?");
	ty_test_note("report written to %s", path);
	free(text);
	json_decref(rep);
	CHECK(passed);
	CHECK(S.nfaults > 0);
	free(S.faults);
	free(S.jobs);
}
