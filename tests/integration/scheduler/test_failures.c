/*
 * Failures, retries and bad nodes (docs/dispatch.md, "Failures, retries
 * and bad nodes"), the test playing the executors: a system failure is
 * blamed on the node that reported it, retried elsewhere after its
 * backoff; a user failure is not retried and blames nobody; a spent
 * budget fails the job; a node blamed by different jobs becomes suspect,
 * then draining/drained, and gets no new work until it is undrained.
 */
#include "fixture.h"
#include "core/retry.h"
#include "scheduler.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

static long long dint(const struct proto_msg *m, const char *key)
{
	return (long long)json_integer_value(json_object_get(m->data, key));
}

/* The node of the job's allocation in attempt (a 1-node job), once it exists. */
static const char *node_of(struct fx *f, long long job, int attempt)
{
	const char *sql = "SELECT node_id FROM allocations WHERE job_id = $1 AND attempt = $2";

	FX_WAIT(f, T, "1", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = $2",
		fx_n(job), fx_n(attempt));
	return FX_Q(f, sql, fx_n(job), fx_n(attempt));
}

/* attempt_exited with the classifier's evidence (no quotes in the texts). */
static void exit_with(struct fx *f, const char *node, const struct proto_msg *l, int code,
		      const char *cls, const char *message, const char *evidence)
{
	fx_node_runs(f, node, l->job, l->attempt, false);
	fx_send(f, node, "attempt_exited", l->job, l->attempt,
		evidence ? ty_test_strf("{'exit_code':%d,'failure_class':'%s','message':'%s',"
					"'evidence':'%s'}",
					code, cls, message, evidence)
			 : ty_test_strf("{'exit_code':%d,'failure_class':'%s','message':'%s'}",
					code, cls, message));
}

/* attempt_exited of class system saying who saw its evidence (src: "log" or "executor"). */
static void exit_seen(struct fx *f, const char *node, const struct proto_msg *l,
		      const char *evidence, const char *src)
{
	fx_node_runs(f, node, l->job, l->attempt, false);
	fx_send(f, node, "attempt_exited", l->job, l->attempt,
		ty_test_strf("{'exit_code':1,'failure_class':'system','message':'NCCL error',"
			     "'evidence':'%s','evidence_source':'%s'}",
			     evidence, src));
}

/* Integer and string at path of a JSON text (strings as scratch, "(none)" when absent). */
static long long jint_of(const char *text, const char *path)
{
	json_t *j = json_loads(text, 0, NULL);
	long long v = ty_jint(j, path);

	json_decref(j);
	return v;
}

static const char *jstr_of(const char *text, const char *path)
{
	json_t *j = json_loads(text, 0, NULL);
	const char *v = ty_jstr(j, path);
	const char *out = ty_test_strf("%s", v ? v : "(none)");

	json_decref(j);
	return out;
}

static const char *other(const char *node)
{
	return strcmp(node, "n1") ? "n1" : "n2";
}

/* The backoff before retry number `tries`: base × 2^(tries−1), capped. Pure. */
TY_TEST(backoff_doubles_per_retry_up_to_the_cap)
{
	static const struct {
		int base, max, tries;
		long long want;
	} rows[] = {
	    {10, 600, 1, 10},  {10, 600, 2, 20},    {10, 600, 3, 40},	       {10, 600, 6, 320},
	    {10, 600, 7, 600}, {10, 600, 100, 600}, {10, 15, 2, 15},	       {0, 600, 3, 0},
	    {10, 600, 0, 0},   {600, 60, 1, 60},    {86400, 86400, 50, 86400}, {1, 1, 1, 1},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("base %d, max %d, tries %d", rows[i].base, rows[i].max,
				rows[i].tries);
		CHECK_INT_EQ(sched_backoff_s(rows[i].base, rows[i].max, rows[i].tries),
			     rows[i].want);
	}
}

TY_TEST(only_node_classes_are_blamed)
{
	static const struct {
		const char *cls;
		bool blamed;
	} rows[] = {
	    {"system", true},	     {"hardware", true},   {"hang", true}, {"node_lost", true},
	    {"start_timeout", true}, {"user", false},	   {"oom", false}, {"timeout", false},
	    {"cancelled", false},    {"preempted", false}, {"", false},	   {NULL, false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("class %s", rows[i].cls ? rows[i].cls : "NULL");
		CHECK(sched_class_blames(rows[i].cls) == rows[i].blamed);
	}
}

TY_TEST(system_failure_is_retried_on_another_node_after_its_backoff)
{
	static const char *const args[] = {"--retry-backoff-seconds=2",
					   "--retry-backoff-max-seconds=2", NULL};
	static const char *const evidence = "NCCL WARN NET/IB : Got completion with error 12";
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	const char *x, *y, *body;
	long long job;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4},'retry':{'system':2},"
			   "'start_timeout_seconds':120");
	x = node_of(f, job, 1);
	y = other(x);
	l1 = fx_recv(f, x, "launch", job, T);
	REQUIRE(l1 != NULL);
	/* the launch carries the job's timeouts to the executor */
	CHECK_INT_EQ(dint(l1, "hang_timeout_seconds"), 1800);
	CHECK_INT_EQ(dint(l1, "start_timeout_seconds"), 120);
	fx_run(f, x, l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	exit_with(f, x, l1, 1, "system", "rank 0: NCCL error", evidence);

	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT failure_class || '|' || blamed_node || '|' || evidence"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     ty_test_strf("system|%s|%s", x, evidence));
	CHECK_STR_EQ(FX_Q(f, "SELECT excluded_nodes::text FROM jobs WHERE id = $1", fx_n(job)),
		     ty_test_strf("{%s}", x));
	/* not_before = the failure + 2 s, in the same transaction */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT j.not_before = t.ended_at + interval '2 seconds'"
			  " FROM jobs j JOIN attempts t ON t.job_id = j.id AND t.attempt = 1"
			  " WHERE j.id = $1",
			  fx_n(job)),
		     "t");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(job)),
		     ty_test_strf("attempt 1 failed: rank 0: NCCL error (system); requeued for "
				  "attempt 2 (system retry 1 of 2, backoff 2s, node %s excluded); "
				  "expedited: first in its team's order",
				  x));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT data->>'evidence' || '|' || (data->>'backoff_seconds')"
			  " FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(job)),
		     ty_test_strf("%s|2", evidence));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT node_id || '|' || attempt || '|' || failure_class || '|' ||"
			  " evidence FROM node_failures WHERE job_id = $1",
			  fx_n(job)),
		     ty_test_strf("%s|1|system|%s", x, evidence));
	/*
	 * The scheduler publishes the backoff as the reason, unless the retry
	 * was placed first (then the check below that it waited still holds).
	 */
	FX_WAIT(
	    f, T, "t",
	    "SELECT state <> 'pending' OR pending_reason ~ ('^retrying after a system failure on '"
	    " || $2 || ': backoff until [0-9]{2}:[0-9]{2}:[0-9]{2} UTC$')"
	    " FROM jobs WHERE id = $1",
	    fx_n(job), x);

	l2 = fx_recv(f, y, "launch", job, T);
	REQUIRE(l2 != NULL);
	CHECK_INT_EQ(l2->attempt, 2);
	/* placed no earlier than the backoff allowed, and never on the blamed node */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT t.created_at >= j.not_before FROM jobs j JOIN attempts t"
			  " ON t.job_id = j.id AND t.attempt = 2 WHERE j.id = $1",
			  fx_n(job)),
		     "t");
	fx_poll(f, 300);
	CHECK_INT_EQ(fx_count(f, x, "launch", job, 2), 0);

	/* the attempts view shows the evidence, the blamed node and a duration */
	body = fx_api(f, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), 200);
	CHECK_STR_EQ(jstr_of(body, "items[0].evidence"), evidence);
	CHECK_STR_EQ(jstr_of(body, "items[0].blamed_node"), x);
	CHECK_STR_EQ(jstr_of(body, "items[0].failure_class"), "system");
	CHECK_STR_EQ(jstr_of(body, "items[1].blamed_node"), "(none)");
	{
		json_t *j = json_loads(body, 0, NULL);

		CHECK(json_is_number(ty_jpath(j, "items[0].duration_seconds")) &&
		      json_number_value(ty_jpath(j, "items[0].duration_seconds")) >= 0);
		json_decref(j);
	}
	fx_run(f, y, l2);
	fx_exit(f, y, l2, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_sched_stop(f, 0);
}

TY_TEST(user_failure_is_not_retried_and_blames_no_node)
{
	struct fx *f = fx_start();
	const struct proto_msg *l;
	const char *x;
	long long job;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	x = node_of(f, job, 1);
	l = fx_recv(f, x, "launch", job, T);
	REQUIRE(l != NULL);
	fx_run(f, x, l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	exit_with(f, x, l, 1, "user", "rank 0 exited with code 1",
		  "ZeroDivisionError: division by zero");
	FX_WAIT(f, T, "failed user", "SELECT state || ' ' || failure_class FROM jobs WHERE id = $1",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT coalesce(blamed_node, '-') || '|' || evidence FROM attempts"
			  " WHERE job_id = $1",
			  fx_n(job)),
		     "-|ZeroDivisionError: division by zero");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT excluded_nodes::text || '|' || (not_before IS NULL)"
			  " FROM jobs WHERE id = $1",
			  fx_n(job)),
		     "{}|true");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM node_failures"), "0");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM job_events WHERE job_id = $1"
			  " AND type = 'requeued'",
			  fx_n(job)),
		     "0");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	fx_sched_stop(f, 0);
}

TY_TEST(spent_system_budget_fails_the_job_and_records_each_blamed_node)
{
	static const char *const args[] = {"--retry-backoff-seconds=0", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	const char *x, *y;
	long long job;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_node(f, "n3", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4},'retry':{'system':1}");
	x = node_of(f, job, 1);
	l1 = fx_recv(f, x, "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, x, l1);
	exit_with(f, x, l1, 1, "system", "rank 0: CUDA error",
		  "CUDA error: an illegal memory access");
	y = node_of(f, job, 2);
	CHECK(strcmp(x, y) != 0);
	CHECK_STR_EQ(FX_Q(f, "SELECT not_before IS NULL FROM jobs WHERE id = $1", fx_n(job)), "t");
	l2 = fx_recv(f, y, "launch", job, T);
	REQUIRE(l2 != NULL);
	fx_run(f, y, l2);
	exit_with(f, y, l2, 1, "hardware", "rank 0: Xid 79", "NVRM: Xid (PCI:0000:3b:00): 79");
	FX_WAIT(f, T, "failed hardware",
		"SELECT state || ' ' || failure_class FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1"
			  " ORDER BY seq DESC LIMIT 1",
			  fx_n(job)),
		     "attempt 2 failed: rank 0: Xid 79 (hardware)");
	CHECK_STR_EQ(FX_Q(f, "SELECT array_to_string(excluded_nodes, ',') FROM jobs WHERE id = $1",
			  fx_n(job)),
		     x);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(node_id || ':' || failure_class, ',' ORDER BY attempt)"
			  " FROM node_failures WHERE job_id = $1",
			  fx_n(job)),
		     ty_test_strf("%s:system,%s:hardware", x, y));
	fx_poll(f, 300);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 3) + fx_count(f, "n2", "launch", job, 3) +
			 fx_count(f, "n3", "launch", job, 3),
		     0);
	fx_sched_stop(f, 0);
}

/* n1 (8 GPUs) runs jobs of 2 GPUs; each fails with a system error blamed on n1. */
TY_TEST(node_blamed_by_different_jobs_becomes_suspect_then_drained_until_undrained)
{
	static const char *const args[] = {"--suspect-after-jobs=2", "--drain-after-jobs=3",
					   "--failure-window-seconds=3600", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l[4], *m;
	long long job[4], late, spare;
	const char *body;

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	for (int i = 0; i < 4; i++) {
		job[i] = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},"
				      "'retry':{'system':0}");
		l[i] = fx_recv(f, "n1", "launch", job[i], T);
		REQUIRE(l[i] != NULL);
		fx_run(f, "n1", l[i]);
	}
	FX_WAIT(f, T, "4", "SELECT count(*) FROM jobs WHERE state = 'running'");

	/* one job: a failure, the node stays ready */
	exit_with(f, "n1", l[0], 1, "system", "NCCL error", "NCCL WARN Call to ibv_poll_cq failed");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job[0]));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	/* a second job, of the same team, seen by the executor itself: suspect, no new work */
	exit_seen(f, "n1", l[1], "rank 0: killed by signal 11 (SIGSEGV)", "executor");
	FX_WAIT(f, T, "suspect", "SELECT state FROM nodes WHERE id = 'n1'");
	late = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "no schedulable node has 2 GPUs",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(late));
	/* a third job */
	exit_with(f, "n1", l[2], 1, "system", "NCCL error", "NCCL WARN Call to ibv_poll_cq failed");
	/* job 3 still runs there: draining, then drained once it ends */
	FX_WAIT(f, T, "draining", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     ty_test_strf("blamed for failures of different jobs: 3 points within 3600 s "
				  "(threshold 3; last: job %lld attempt 1, system; evidence: 3 "
				  "points observed by executors)",
				  job[2]));
	body = fx_api(f, "GET", "/v1/nodes/n1", 200);
	CHECK_INT_EQ(jint_of(body, "failures.count"), 3);
	CHECK_INT_EQ(jint_of(body, "failures.jobs"), 3);
	CHECK_INT_EQ(jint_of(body, "failures.hardware"), 0);
	CHECK_STR_EQ(jstr_of(body, "state"), "draining");
	fx_exit(f, "n1", l[3], 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job[3]));
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");
	/* a new node takes the waiting job; n1 gets nothing */
	fx_node(f, "n2", 2);
	m = fx_recv(f, "n2", "launch", late, T);
	REQUIRE(m != NULL);
	spare = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	/* it waits for n2 (the head job, with a reservation there), not for n1 */
	FX_WAIT(f, T, "t",
		"SELECT pending_reason LIKE 'waiting for a node with 2 free GPUs; next in line,"
		" nodes reserved from %' FROM jobs WHERE id = $1",
		fx_n(spare));
	CHECK_STR_EQ(FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(late)),
		     "n2");
	CHECK_INT_EQ(fx_count(f, "n1", "launch", late, 0) + fx_count(f, "n1", "launch", spare, 0),
		     0);

	/* undrain: ready, failures forgotten, and it takes the waiting job */
	body = fx_api(f, "POST", "/v1/nodes/n1/undrain", 200);
	CHECK_STR_EQ(jstr_of(body, "state"), "ready");
	CHECK_INT_EQ(jint_of(body, "failures.count"), 0);
	CHECK_INT_EQ(jint_of(body, "failures.jobs"), 0);
	m = fx_recv(f, "n1", "launch", spare, T);
	REQUIRE(m != NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(drain_reason, '-') FROM nodes WHERE id = 'n1'"), "-");
	CHECK_STR_EQ(FX_Q(f, "SELECT action FROM audit_log WHERE object = 'n1'"), "node.undrain");
	fx_sched_stop(f, 0);
}

/*
 * Rank output is the job's to write: failures whose class the logs alone
 * decided (evidence_source "log", e.g. a job printing an NCCL WARN NET/IB
 * error 12 line and exiting 1) never take a node out for one team; they
 * count once jobs of two teams failed that way there.
 */
TY_TEST(log_only_failures_take_a_node_out_only_across_teams)
{
	static const char *const args[] = {"--suspect-after-jobs=2", "--drain-after-jobs=4",
					   "--failure-window-seconds=3600", NULL};
	static const char *const ib =
	    "rank 0: trainer-3:81412:81790 [2] NCCL WARN NET/IB : Got completion from peer "
	    "10.12.0.7<48112> with error 12, opcode 32753, len 0, vendor err 129 (Recv)";
	struct fx *f = fx_start();
	const struct proto_msg *l[4], *m;
	long long job[4], late;
	const char *other_team;

	fx_node(f, "n1", 8);
	other_team = fx_team(f, "other", 8, -1, NULL);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* jobs 0, 1 and 3 of the case's team, job 2 of another team */
	for (int i = 0; i < 4; i++) {
		const char *spec = ",'resources':{'nodes':1,'gpus_per_node':2},'retry':{'system':0}";

		job[i] = i == 2 ? fx_submit_to(f, other_team, spec) : fx_submit(f, spec);
		l[i] = fx_recv(f, "n1", "launch", job[i], T);
		REQUIRE(l[i] != NULL);
		fx_run(f, "n1", l[i]);
	}
	FX_WAIT(f, T, "4", "SELECT count(*) FROM jobs WHERE state = 'running'");

	/* two jobs of one team, each blamed on n1 from its log alone: n1 stays ready */
	exit_seen(f, "n1", l[0], ib, "log");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job[0]));
	/* ... but its executor is asked for a check it runs itself */
	m = fx_recv(f, "n1", "health_check", 0, T);
	REQUIRE(m != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(m->data, "reason")),
		     ty_test_strf("job %lld attempt 1 failed here (system) on rank logs alone",
				  job[0]));
	exit_seen(f, "n1", l[1], ib, "log");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job[1]));
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(evidence_source || ':' || node_id, ','"
			     " ORDER BY job_id) FROM node_failures"),
		     "log:n1,log:n1");
	/* ... and takes new work: the other teams' jobs do not wait */
	late = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	m = fx_recv(f, "n1", "launch", late, T);
	REQUIRE(m != NULL);
	fx_run(f, "n1", m);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");

	/* another team's job fails there the same way: two teams, 3 points, suspect */
	exit_seen(f, "n1", l[2], ib, "log");
	FX_WAIT(f, T, "suspect", "SELECT state FROM nodes WHERE id = 'n1'");
	/* a fourth job: 4 points, draining (work left), the reason says what counted */
	exit_seen(f, "n1", l[3], ib, "log");
	FX_WAIT(f, T, "draining", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     ty_test_strf("blamed for failures of different jobs: 4 points within 3600 s "
				  "(threshold 4; last: job %lld attempt 1, system; evidence: 0 "
				  "points observed by executors, 4 from rank logs alone of jobs "
				  "of 2 teams)",
				  job[3]));
	fx_sched_stop(f, 0);
}

/*
 * One team's log-only failures do not count, but what the executor saw
 * does: the reason names both.
 */
TY_TEST(executor_observed_failures_count_beside_one_teams_log_only_ones)
{
	static const char *const args[] = {"--suspect-after-jobs=2", "--drain-after-jobs=2",
					   "--failure-window-seconds=3600", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l[3];
	long long job[3];

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	for (int i = 0; i < 3; i++) {
		job[i] = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},"
				      "'retry':{'system':0}");
		l[i] = fx_recv(f, "n1", "launch", job[i], T);
		REQUIRE(l[i] != NULL);
		fx_run(f, "n1", l[i]);
	}
	FX_WAIT(f, T, "3", "SELECT count(*) FROM jobs WHERE state = 'running'");
	exit_seen(f, "n1", l[0], "rank 0: NCCL WARN NET/IB : error 12", "log");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job[0]));
	exit_seen(f, "n1", l[1], "rank 0: killed by signal 11 (SIGSEGV)", "executor");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job[1]));
	/* 1 point counts (the log-only one does not): still ready */
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	exit_seen(f, "n1", l[2], "rank 1: memory cgroup oom_kill, then SIGABRT", "executor");
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     ty_test_strf("blamed for failures of different jobs: 2 points within 3600 s "
				  "(threshold 2; last: job %lld attempt 1, system; evidence: 2 "
				  "points observed by executors; 1 from rank logs alone of one "
				  "team's jobs not counted)",
				  job[2]));
	/* only the log-only failure asked the node for a health check */
	fx_sync(f, T);
	fx_poll(f, 300);
	CHECK_INT_EQ(fx_count(f, "n1", "health_check", 0, 0), 1);
	fx_sched_stop(f, 0);
}

TY_TEST(admin_drain_stops_new_work_and_a_hardware_failure_counts_twice)
{
	static const char *const args[] = {"--suspect-after-jobs=2", "--drain-after-jobs=3", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l, *m;
	long long job, next;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'retry':{'system':0}");
	l = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l != NULL);
	fx_run(f, "n1", l);

	/* an admin drain while the job runs: draining; the job keeps running */
	CHECK_STR_EQ(jstr_of(fx_api(f, "POST", "/v1/nodes/n1/drain", 200), "state"), "draining");
	next = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "no schedulable node has 2 GPUs",
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(next));
	/* its events may still be on their way: the drain did not stop it */
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	/* one hardware failure is 2 points: suspect would be due, but the node is draining */
	exit_with(f, "n1", l, 1, "hardware", "Xid 48", "NVRM: Xid (PCI:0000:3b:00): 48, DBE");
	FX_WAIT(f, T, "drained", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT drain_reason FROM nodes WHERE id = 'n1'"),
		     "drained by an admin");
	CHECK_INT_EQ(jint_of(fx_api(f, "GET", "/v1/nodes/n1", 200), "failures.hardware"), 1);
	/* drain again: idempotent */
	CHECK_STR_EQ(jstr_of(fx_api(f, "POST", "/v1/nodes/n1/drain", 200), "state"), "drained");
	fx_api(f, "POST", "/v1/nodes/n1/undrain", 200);
	m = fx_recv(f, "n1", "launch", next, T);
	REQUIRE(m != NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(action, ',' ORDER BY id) FROM audit_log"
			     " WHERE object = 'n1'"),
		     "node.drain,node.drain,node.undrain");

	/* after the undrain the earlier failure no longer counts; a new hardware one is 2 points */
	fx_run(f, "n1", m);
	exit_with(f, "n1", m, 1, "hardware", "Xid 79", "NVRM: Xid (PCI:0000:3b:00): 79");
	FX_WAIT(f, T, "suspect", "SELECT state FROM nodes WHERE id = 'n1'");
	fx_sched_stop(f, 0);
}

TY_TEST(suspect_node_is_ready_again_once_its_failures_leave_the_window)
{
	static const char *const args[] = {"--suspect-after-jobs=1", "--drain-after-jobs=3",
					   "--failure-window-seconds=2", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l, *m;
	long long job, next;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'retry':{'system':0}");
	l = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l != NULL);
	fx_run(f, "n1", l);
	next = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	exit_with(f, "n1", l, 1, "system", "NCCL error", NULL);
	FX_WAIT(f, T, "suspect", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(evidence, '-') FROM node_failures WHERE job_id = $1",
			  fx_n(job)),
		     "-");
	/* the failure leaves the 2 s window: ready again, and the waiting job starts */
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	m = fx_recv(f, "n1", "launch", next, T);
	REQUIRE(m != NULL);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT t.created_at >= f.created_at + interval '2 seconds'"
			  " FROM attempts t, node_failures f WHERE t.job_id = $1 AND f.job_id = $2",
			  fx_n(next), fx_n(job)),
		     "t");
	fx_sched_stop(f, 0);
}

/*
 * With nodes[] (names, replaced by attempt 1's in node-rank order) and a
 * spare registered and a scheduler started: attempt 1 of a new 3-node job
 * with preflight: true, whose check names nodes[1] slow (below_floor false)
 * or finds the gang's NCCL all-reduce below its fabric's floor and names
 * nobody (true); rank 0's node reports the verdict with `extra` in its
 * attempt_exited (e.g. an evidence_source). The job's id.
 */
static long long preflight_fails(struct fx *f, const char *nodes[3], const char *extra,
				 bool below_floor)
{
	static const char *const args[] = {"--retry-backoff-seconds=0", NULL};
	const struct proto_msg *l[3];
	const char *verdict;
	long long job;

	/* four ready nodes: nodes[] and one more */
	for (int i = 0; i < 3; i++)
		fx_node(f, nodes[i], 1);
	fx_node(f, ty_test_strf("%s-spare", nodes[0]), 1);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "4", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':3,'gpus_per_node':1},'preflight':true");
	FX_WAIT(f, T, "3", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 1",
		fx_n(job));
	/* the three nodes of attempt 1, in node-rank order */
	for (int i = 0; i < 3; i++) {
		nodes[i] = FX_Q(f,
				"SELECT node_id FROM allocations WHERE job_id = $1 AND attempt = 1"
				" ORDER BY node_rank OFFSET $2 LIMIT 1",
				fx_n(job), fx_n(i));
		l[i] = fx_recv(f, nodes[i], "launch", job, T);
		REQUIRE(l[i] != NULL);
		CHECK(json_is_true(json_object_get(l[i]->data, "preflight")));
	}
	for (int i = 0; i < 3; i++)
		fx_run(f, nodes[i], l[i]);
	if (below_floor)
		verdict =
		    ty_test_strf("{'slow':[],'median_gbps':0.001,'ratio':0.5,'measured':'nccl',"
				 "'nodes':[{'node_rank':0,'node':'%s','gbps':0.001,'fabric':'ib'},"
				 "{'node_rank':1,'node':'%s','gbps':0.001,'fabric':'ib'},"
				 "{'node_rank':2,'node':'%s','gbps':0.001,'fabric':'ib'}],"
				 "'allreduce':{'backend':'nccl','busbw_gbps':0.0013,'fabric':'ib',"
				 "'floor_gbps':5,'below_floor':true,'floor_note':null}}",
				 nodes[0], nodes[1], nodes[2]);
	else
		verdict = ty_test_strf(
		    "{'slow':['%s'],'median_gbps':1.2,'ratio':0.5,"
		    "'nodes':[{'node_rank':0,'node':'%s','gbps':1.2},{'node_rank':1,'node':'%s',"
		    "'gbps':0.001},{'node_rank':2,'node':'%s','gbps':1.3}]}",
		    nodes[1], nodes[0], nodes[1], nodes[2]);
	/* rank 0's node knows the verdict; the others only that the check failed */
	fx_node_runs(f, nodes[0], job, 1, false);
	fx_send(f, nodes[0], "attempt_exited", job, 1,
		ty_test_strf("{'exit_code':-1,'failure_class':'system','message':'preflight "
			     "failed','evidence':'slow node(s)','preflight':%s%s}",
			     verdict, extra));
	for (int i = 1; i < 3; i++) {
		fx_node_runs(f, nodes[i], job, 1, false);
		fx_send(f, nodes[i], "attempt_exited", job, 1,
			"{'exit_code':-1,'failure_class':'system','message':'preflight failed',"
			"'preflight':null}");
	}
	return job;
}

/*
 * A pre-flight check (preflight: true) that names a slow node: that node is
 * blamed, made suspect at once and excluded; the reporting nodes are not
 * blamed; the job is placed again without the slow node.
 */
TY_TEST(preflight_slow_node_is_suspect_and_the_gang_placed_without_it)
{
	struct fx *f = fx_start();
	const char *nodes[3] = {"n1", "n2", "n3"};
	long long job;

	job = preflight_fails(f, nodes, "", false);
	FX_WAIT(f, T, "suspect", "SELECT state FROM nodes WHERE id = $1", nodes[1]);
	CHECK_STR_EQ(FX_Q(f, "SELECT excluded_nodes::text FROM jobs WHERE id = $1", fx_n(job)),
		     ty_test_strf("{%s}", nodes[1]));
	/* only the slow node is blamed, with the numbers */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(node_id || '|' || evidence, ',') FROM node_failures"
			  " WHERE job_id = $1",
			  fx_n(job)),
		     ty_test_strf("%s|preflight: node %s at 0.001 GB/s, gang median 1.2 GB/s",
				  nodes[1], nodes[1]));
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(blamed_node, '-') FROM attempts WHERE job_id = $1"
			     " AND attempt = 1",
			  fx_n(job)),
		     "-");
	/* placed again on the three others */
	FX_WAIT(f, T, "3", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2",
		fx_n(job));
	/* one job's failure is not enough points for suspect, but a measured slow node stays so */
	fx_poll(f, 1500);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = $1", nodes[1]), "suspect");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2"
			  " AND node_id = $2",
			  fx_n(job), nodes[1]),
		     "0");
}

/*
 * A gang whose NCCL all-reduce is below its fabric's floor: no node can be
 * named, so none is blamed, made suspect or excluded; the attempt fails as
 * system, spends a system retry and the job is placed again.
 */
TY_TEST(preflight_below_the_fabric_floor_blames_nobody)
{
	struct fx *f = fx_start();
	const char *nodes[3] = {"q1", "q2", "q3"};
	long long job;

	job = preflight_fails(f, nodes, "", true);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM node_failures WHERE job_id = $1", fx_n(job)),
		     "0");
	CHECK_STR_EQ(FX_Q(f, "SELECT excluded_nodes::text FROM jobs WHERE id = $1", fx_n(job)),
		     "{}");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT failure_class || '|' || coalesce(blamed_node, '-')"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     "system|-");
	CHECK_STR_EQ(FX_Q(f, "SELECT retries::text FROM jobs WHERE id = $1", fx_n(job)),
		     "{\"system\": 1}");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM nodes WHERE state <> 'ready'"), "0");
	fx_sched_stop(f, 0);
}

/*
 * The same verdict from a check that ran in the job's own image
 * (evidence_source log): the job leaves the node, which is blamed but not
 * made suspect on that alone.
 */
TY_TEST(a_preflight_verdict_from_the_jobs_image_does_not_make_a_node_suspect)
{
	struct fx *f = fx_start();
	const char *nodes[3] = {"p1", "p2", "p3"};
	long long job;

	job = preflight_fails(f, nodes, ",'evidence_source':'log'", false);
	FX_WAIT(f, T, ty_test_strf("{%s}", nodes[1]),
		"SELECT excluded_nodes::text FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT node_id || '|' || evidence_source FROM node_failures"
			  " WHERE job_id = $1",
			  fx_n(job)),
		     ty_test_strf("%s|log", nodes[1]));
	FX_WAIT(f, T, "3", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2",
		fx_n(job));
	fx_poll(f, 1000);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = $1", nodes[1]), "ready");
	fx_sched_stop(f, 0);
}
