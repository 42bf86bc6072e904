/*
 * trainyard-scheduler end to end, the test playing two executors: launch,
 * success, fail fast, retries, replayed events, cancel and stop.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <stdlib.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

static long long dint(const struct proto_msg *m, const char *key)
{
	return (long long)json_integer_value(json_object_get(m->data, key));
}

static const char *dstr(const struct proto_msg *m, const char *key)
{
	return json_string_value(json_object_get(m->data, key));
}

static const char *gpus_of(const struct proto_msg *m)
{
	char *s = json_dumps(json_object_get(m->data, "gpus"), JSON_COMPACT);
	const char *out = ty_test_strf("%s", s ? s : "");

	free(s);
	return out;
}

/* Two 4-GPU nodes, a leader, and a 2 × 2-GPU job; returns the job. */
static long long two_node_job(struct fx *f, const char *extra)
{
	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	return fx_submit(
	    f, ty_test_strf(",'resources':{'nodes':2,'gpus_per_node':2}%s", extra ? extra : ""));
}

static const char *last_event(struct fx *f, long long job)
{
	return FX_Q(f,
		    "SELECT type || ' ' || state || ': ' || message FROM job_events"
		    " WHERE job_id = $1 ORDER BY seq DESC LIMIT 1",
		    fx_n(job));
}

TY_TEST(two_node_job_launches_once_per_node_and_succeeds)
{
	struct fx *f = fx_start();
	long long job = two_node_job(f, ",'env':{'FOO':'bar'}");
	const struct proto_msg *l1 = fx_recv(f, "n1", "launch", job, T);
	const struct proto_msg *l2 = fx_recv(f, "n2", "launch", job, T);
	const char *epoch, *team;

	REQUIRE(l1 != NULL && l2 != NULL);
	epoch = FX_Q(f, "SELECT epoch FROM leader");
	team = FX_Q(f, "SELECT t.name FROM jobs j JOIN teams t ON t.id = j.team_id WHERE j.id = $1",
		    fx_n(job));
	for (int i = 0; i < 2; i++) {
		const struct proto_msg *l = i ? l2 : l1;

		ty_test_context("launch to %s", l->node);
		CHECK_INT_EQ(l->attempt, 1);
		CHECK_STR_EQ(fx_n(l->epoch), epoch);
		CHECK(l->seq > 0);
		CHECK_INT_EQ(dint(l, "node_rank"), i);
		CHECK_INT_EQ(dint(l, "first_rank"), 2 * i);
		CHECK_INT_EQ(dint(l, "nnodes"), 2);
		CHECK_INT_EQ(dint(l, "world_size"), 4);
		CHECK_INT_EQ(dint(l, "local_world_size"), 2);
		CHECK_STR_EQ(dstr(l, "master_addr"), "10.0.0.1");
		CHECK_INT_EQ(dint(l, "master_port"), 29500);
		CHECK_STR_EQ(gpus_of(l), "[0,1]");
		CHECK_STR_EQ(dstr(l, "launch"), "per_gpu");
		CHECK_STR_EQ(
		    json_string_value(json_array_get(json_object_get(l->data, "command"), 1)),
		    "train.py");
		CHECK_STR_EQ(
		    json_string_value(json_object_get(json_object_get(l->data, "env"), "FOO")),
		    "bar");
		CHECK_INT_EQ(dint(l, "max_runtime_seconds"), 86400);
		CHECK_INT_EQ(dint(l, "kill_grace_seconds"), 7);
		/* the label of the node's GPU series (executor/telemetry.c) */
		CHECK_STR_EQ(dstr(l, "team"), team);
	}
	ty_test_context(NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || attempt FROM jobs WHERE id = $1", fx_n(job)),
		     "scheduled 1");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT master_node || ':' || master_port || ' ' || world_size"
			  " FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "n1:29500 4");

	fx_run(f, "n1", l1);
	FX_WAIT(f, T, "starting", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1", fx_n(job)), "running");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1"
			  " AND running_at IS NOT NULL",
			  fx_n(job)),
		     "2");

	fx_exit(f, "n1", l1, 0, "", "");
	fx_exit(f, "n2", l2, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = $1", fx_n(job)),
		     "t");
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT state || ' ' || exit_code FROM attempts WHERE job_id = $1", fx_n(job)),
	    "succeeded 0");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(rank || ':' || exit_code || ':' || pid, ','"
			  " ORDER BY rank) FROM ranks WHERE job_id = $1",
			  fx_n(job)),
		     "0:0:1000,1:0:1001,2:0:1002,3:0:1003");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1"
			  " AND released_at IS NOT NULL AND exit_code = 0",
			  fx_n(job)),
		     "2");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type || '/' || state, ' ' ORDER BY seq)"
			  " FROM job_events WHERE job_id = $1",
			  fx_n(job)),
		     "submitted/pending scheduled/scheduled starting/starting running/running "
		     "succeeded/succeeded");

	/* exactly one launch per node, nothing else */
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	CHECK_INT_EQ(fx_count(f, "n2", "launch", job, 0), 1);
	CHECK_INT_EQ(fx_count(f, "n1", "kill", job, 0), 0);
	CHECK_INT_EQ(fx_count(f, "n2", "kill", job, 0), 0);
	/* and the outbox is empty once Kafka acknowledged everything */
	FX_WAIT(f, T, "0", "SELECT count(*) FROM dispatch_outbox");
	fx_sched_stop(f, 0);
}

TY_TEST(user_failure_kills_the_gang_and_fails_the_job)
{
	struct fx *f = fx_start();
	long long job = two_node_job(f, ",'retry':{'user':0}");
	const struct proto_msg *l1 = fx_recv(f, "n1", "launch", job, T);
	const struct proto_msg *l2 = fx_recv(f, "n2", "launch", job, T);
	const struct proto_msg *k;

	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_exit(f, "n2", l2, 3, "user", "rank 3 exited with code 3");

	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(k->attempt, 1);
	CHECK_STR_EQ(dstr(k, "reason"), "fail_fast");
	CHECK_INT_EQ(dint(k, "grace_seconds"), 7);
	FX_WAIT(f, T, "failed user", "SELECT state || ' ' || failure_class FROM jobs WHERE id = $1",
		fx_n(job));
	CHECK_STR_EQ(last_event(f, job),
		     "failed failed: attempt 1 failed: rank 3 exited with code 3 (user)");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class || ' ' || exit_code"
			  " FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "failed user 3");
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT exit_code FROM ranks WHERE job_id = $1 AND rank = 3", fx_n(job)), "3");
	/* n1's GPUs stay held until n1 reports its ranks gone */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT released_at IS NULL FROM allocations WHERE job_id = $1"
			  " AND node_id = 'n1'",
			  fx_n(job)),
		     "t");
	fx_exit(f, "n1", l1, 143, "cancelled", "killed on request");
	FX_WAIT(f, T, "2",
		"SELECT count(*) FROM allocations WHERE job_id = $1"
		" AND released_at IS NOT NULL",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "failed");
	fx_poll(f, 300);
	CHECK_INT_EQ(fx_count(f, "n2", "kill", job, 0), 0);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	fx_sched_stop(f, 0);
}

TY_TEST(system_failure_requeues_once_the_gang_is_gone_and_old_events_change_nothing)
{
	static const char *const no_backoff[] = {"--retry-backoff-seconds=0", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2, *k, *m1, *m2;
	long long job;
	int mark;

	/* n3 joins after the first placement: the retry, which excludes n2, uses it */
	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", no_backoff);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2},'retry':{'system':1}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_node(f, "n3", 4);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	mark = fx_sent_count(f);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_exit(f, "n2", l2, 1, "system", "rank 3 was killed by signal 9");
	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "fail_fast");

	/* requeued, but not placed while attempt 1's ranks may still run on n1 */
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT retries::text FROM jobs WHERE id = $1", fx_n(job)),
		     "{\"system\": 1}");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(job)),
		     "attempt 1 failed: rank 3 was killed by signal 9 (system); requeued for "
		     "attempt 2 (system retry 1 of 1, node n2 excluded); expedited: first in its "
		     "team's order; node n1 held for it for 60s");
	fx_poll(f, 600);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 2) + fx_count(f, "n3", "launch", job, 2), 0);
	fx_exit(f, "n1", l1, 143, "cancelled", "killed on request");
	m1 = fx_recv(f, "n1", "launch", job, T);
	m2 = fx_recv(f, "n3", "launch", job, T);
	REQUIRE(m1 != NULL && m2 != NULL);
	CHECK_INT_EQ(m1->attempt, 2);
	CHECK_INT_EQ(m2->attempt, 2);
	CHECK_STR_EQ(gpus_of(m1), "[0,1]");
	CHECK_STR_EQ(gpus_of(m2), "[0,1]");
	CHECK_INT_EQ(dint(m1, "master_port"), 29500);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || attempt FROM jobs WHERE id = $1", fx_n(job)),
		     "scheduled 2");

	/* attempt 1's events again: the job stays with attempt 2 */
	fx_replay(f, mark, fx_sent_count(f));
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || attempt FROM jobs WHERE id = $1", fx_n(job)),
		     "scheduled 2");
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1 AND attempt = 1", fx_n(job)),
	    "failed");

	/* attempt 2 fails with system again: budget spent */
	fx_run(f, "n1", m1);
	fx_run(f, "n3", m2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_exit(f, "n1", m1, 1, "system", "rank 1 was killed by signal 11");
	FX_WAIT(f, T, "failed system",
		"SELECT state || ' ' || failure_class FROM jobs WHERE id = $1", fx_n(job));
	k = fx_recv(f, "n3", "kill", job, T);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(k->attempt, 2);
	CHECK_INT_EQ(fx_count(f, "n2", "launch", job, 2), 0);
	CHECK_STR_EQ(last_event(f, job),
		     "failed failed: attempt 2 failed: rank 1 was killed by signal 11 (system)");
	fx_sched_stop(f, 0);
}

/* Everything that identifies the outcome, minus heartbeat bookkeeping. */
static const char *digest(struct fx *f)
{
	return FX_Q(
	    f, "SELECT md5(concat_ws('|',"
	       " (SELECT string_agg(concat_ws(',', id, state, attempt, failure_class, retries,"
	       "  finished_at, last_event_seq, updated_at), ';' ORDER BY id) FROM jobs),"
	       " (SELECT string_agg(t::text, ';' ORDER BY job_id, attempt) FROM attempts t),"
	       " (SELECT string_agg(a::text, ';' ORDER BY job_id, attempt, node_id)"
	       "  FROM allocations a),"
	       " (SELECT string_agg(r::text, ';' ORDER BY job_id, attempt, rank) FROM ranks r),"
	       " (SELECT string_agg(e::text, ';' ORDER BY job_id, seq) FROM job_events e),"
	       " (SELECT string_agg(concat_ws(',', id, state, boot_id, gpus, address, labels),"
	       "  ';' ORDER BY id) FROM nodes)))");
}

TY_TEST(replayed_events_change_nothing)
{
	struct fx *f = fx_start();
	long long job = two_node_job(f, NULL);
	const struct proto_msg *l1 = fx_recv(f, "n1", "launch", job, T);
	const struct proto_msg *l2 = fx_recv(f, "n2", "launch", job, T);
	const char *before;
	int n;

	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	fx_exit(f, "n1", l1, 0, "", "");
	fx_exit(f, "n2", l2, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_sync(f, T);
	before = digest(f);

	/* every register and job event again, twice over */
	n = fx_sent_count(f);
	fx_replay(f, 0, n);
	fx_replay(f, 0, n);
	fx_sync(f, T);
	CHECK_STR_EQ(digest(f), before);
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	CHECK_INT_EQ(fx_count(f, "n2", "launch", job, 0), 1);
	CHECK_INT_EQ(fx_count(f, "n1", "kill", 0, 0) + fx_count(f, "n2", "kill", 0, 0), 0);
	fx_sched_stop(f, 0);
}

TY_TEST(cancel_kills_every_node_and_ends_cancelled)
{
	struct fx *f = fx_start();
	long long job = two_node_job(f, NULL);
	const struct proto_msg *l1 = fx_recv(f, "n1", "launch", job, T);
	const struct proto_msg *l2 = fx_recv(f, "n2", "launch", job, T);
	const struct proto_msg *k1, *k2;

	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_cancel(f, job);
	k1 = fx_recv(f, "n1", "kill", job, T);
	k2 = fx_recv(f, "n2", "kill", job, T);
	REQUIRE(k1 != NULL && k2 != NULL);
	CHECK_STR_EQ(dstr(k1, "reason"), "cancel");
	CHECK_STR_EQ(dstr(k2, "reason"), "cancel");
	CHECK_INT_EQ(dint(k1, "grace_seconds"), 7);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1", fx_n(job)),
		     "stopping");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "running");

	fx_exit(f, "n1", l1, 143, "cancelled", "killed on request");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "running");
	fx_exit(f, "n2", l2, 143, "cancelled", "killed on request");
	FX_WAIT(f, T, "cancelled", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1", fx_n(job)),
		     "cancelled");
	CHECK_STR_EQ(FX_Q(f, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = $1", fx_n(job)),
		     "t");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM allocations WHERE released_at IS NULL"), "0");
	CHECK_STR_EQ(last_event(f, job),
		     "cancelled cancelled: cancelled: attempt 1 stopped on every node");
	/* cancelled, not requeued: no second attempt */
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	fx_sched_stop(f, 0);
}

/*
 * POST /v1/jobs/{id}/stop on a running job that fills the cluster: kills
 * (reason cancel) to every node, the job ends `stopped`, its GPUs are
 * released and the pending job waiting for them is launched.
 */
TY_TEST(stop_kills_every_node_ends_stopped_and_frees_the_gpus)
{
	struct fx *f = fx_start();
	long long job, next;
	const struct proto_msg *l1, *l2, *k1, *k2, *ln;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	next = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	FX_WAIT(f, T, "t", "SELECT pending_reason IS NOT NULL FROM jobs WHERE id = $1",
		fx_n(next));

	fx_api(f, "POST", ty_test_strf("/v1/jobs/%lld/stop", job), 200);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT cancel_requested || ' ' || stop_requested FROM jobs WHERE id = $1",
			  fx_n(job)),
		     "true true");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT type || ' ' || state FROM job_events"
			  " WHERE job_id = $1 AND type = 'stop_requested'",
			  fx_n(job)),
		     "stop_requested running");
	/* a repeat changes nothing */
	fx_api(f, "POST", ty_test_strf("/v1/jobs/%lld/stop", job), 200);
	k1 = fx_recv(f, "n1", "kill", job, T);
	k2 = fx_recv(f, "n2", "kill", job, T);
	REQUIRE(k1 != NULL && k2 != NULL);
	CHECK_STR_EQ(dstr(k1, "reason"), "cancel");
	CHECK_STR_EQ(dstr(k2, "reason"), "cancel");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1", fx_n(job)),
		     "stopping");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'stopping'",
			  fx_n(job)),
		     "stop requested: stopping attempt 1 (kill sent to 2 nodes)");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM job_events WHERE job_id = $1"
			     " AND type = 'stop_requested'",
			  fx_n(job)),
		     "1");

	fx_exit(f, "n1", l1, 143, "cancelled", "killed on request");
	fx_exit(f, "n2", l2, 143, "cancelled", "killed on request");
	FX_WAIT(f, T, "stopped", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1", fx_n(job)),
		     "cancelled");
	CHECK_STR_EQ(FX_Q(f, "SELECT finished_at IS NOT NULL FROM jobs WHERE id = $1", fx_n(job)),
		     "t");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM allocations WHERE job_id = $1"
			     " AND released_at IS NULL",
			  fx_n(job)),
		     "0");
	CHECK_STR_EQ(last_event(f, job), "stopped stopped: stopped: attempt 1 stopped on every node");
	/* the freed GPUs go to the waiting job */
	ln = fx_recv(f, "n1", "launch", next, T);
	if (!ln)
		ln = fx_recv(f, "n2", "launch", next, 1);
	REQUIRE(ln != NULL);
	/* stopped, not requeued: no second attempt; and it is final */
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	CHECK_INT_EQ(fx_count(f, "n2", "launch", job, 0), 1);
	fx_api(f, "POST", ty_test_strf("/v1/jobs/%lld/stop", job), 409);
	fx_sched_stop(f, 0);
}

/* A node that fails while its gang is being stopped: the job still ends `stopped`. */
TY_TEST(a_failure_during_a_stop_still_ends_stopped)
{
	struct fx *f = fx_start();
	long long job = two_node_job(f, NULL);
	const struct proto_msg *l1 = fx_recv(f, "n1", "launch", job, T);
	const struct proto_msg *l2 = fx_recv(f, "n2", "launch", job, T);

	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_api(f, "POST", ty_test_strf("/v1/jobs/%lld/stop", job), 200);
	REQUIRE(fx_recv(f, "n1", "kill", job, T) != NULL);
	REQUIRE(fx_recv(f, "n2", "kill", job, T) != NULL);
	fx_exit(f, "n1", l1, 1, "user", "rank 0 exited with code 1");
	fx_exit(f, "n2", l2, 143, "cancelled", "killed on request");
	FX_WAIT(f, T, "stopped", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM allocations WHERE released_at IS NULL"), "0");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM job_events WHERE job_id = $1"
			     " AND type IN ('failed', 'requeued', 'cancelled')",
			  fx_n(job)),
		     "0");
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	fx_sched_stop(f, 0);
}

TY_TEST(unplaceable_jobs_stay_pending_and_zero_gpu_jobs_run)
{
	struct fx *f = fx_start();
	long long big, small, cpu;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* more nodes than exist: queued anyway (docs/api.md, "Unschedulable") */
	big = fx_submit(f, ",'resources':{'nodes':3,'gpus_per_node':1},'queue_if_unschedulable':true");
	small = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	cpu = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':0},'launch':'per_node'");
	REQUIRE(fx_recv(f, "n1", "launch", small, T) != NULL);
	const struct proto_msg *c1 = fx_recv(f, "n1", "launch", cpu, T);
	const struct proto_msg *c2 = fx_recv(f, "n2", "launch", cpu, T);
	REQUIRE(c1 != NULL && c2 != NULL);
	CHECK_STR_EQ(gpus_of(c1), "[]");
	CHECK_INT_EQ(dint(c1, "local_world_size"), 1);
	CHECK_INT_EQ(dint(c2, "world_size"), 2);
	CHECK_STR_EQ(dstr(c1, "launch"), "per_node");
	/* n1 is the master of both: the zero-GPU job got the next port */
	CHECK_INT_EQ(dint(c1, "master_port"), 29501);
	fx_poll(f, 600);
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || attempt FROM jobs WHERE id = $1", fx_n(big)),
		     "pending 0");
	CHECK_INT_EQ(fx_count(f, "n1", "launch", big, 0) + fx_count(f, "n2", "launch", big, 0), 0);
	fx_sched_stop(f, 0);
}

TY_TEST(submission_and_cancel_start_a_cycle_without_waiting_for_cycle_ms)
{
	/* with cycles an hour apart, only changes can start them */
	static const char *const slow[] = {"--cycle-ms=3600000", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l, *k;
	int64_t t0;
	long long job;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", slow);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	fx_poll(f, 300); /* the cycle the node's register started is over */
	t0 = ty_mono_ms();
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l != NULL);
	ty_test_note("launch %lld ms after the submission", (long long)(ty_mono_ms() - t0));
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_cancel(f, job);
	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "cancel");
	CHECK(ty_mono_ms() - t0 < T);
	fx_sched_stop(f, 0);
}

/*
 * A sweep's max_concurrent: of 4 one-GPU trials with max_concurrent 2 on
 * 4 free GPUs, 2 run; the others wait with a reason naming the sweep; when
 * one ends, the next trial (in trial order) starts.
 */
TY_TEST(sweep_runs_at_most_max_concurrent_trials)
{
	struct fx *f = fx_start();
	const char *body, *sweep, *team;
	long long first;
	json_t *j;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	team = fx_team(f, "sweep", 8, -1, NULL);
	body = fx_api_body(f, "POST", "/v1/sweeps",
			   ty_test_strf("{'team':'%s','name':'mc','template':{'team':'%s',"
					"'command':['python','t.py'],'resources':{'nodes':1,"
					"'gpus_per_node':1}},'grid':{'lr':[1,2,3,4]},"
					"'max_concurrent':2}",
					team, team),
			   201);
	j = json_loads(body, 0, NULL);
	sweep = ty_test_strf("%lld", ty_jint(j, "id"));
	json_decref(j);
	FX_WAIT(f, T, "2",
		"SELECT count(*) FROM jobs WHERE sweep_id = $1 AND state <> 'pending'", sweep);
	fx_poll(f, 600); /* a few more cycles: still 2 */
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM jobs WHERE sweep_id = $1 AND state <> 'pending'",
			  sweep),
		     "2");
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(sweep_trial::text, ',' ORDER BY sweep_trial)"
			     " FROM jobs WHERE sweep_id = $1 AND state <> 'pending'",
			  sweep),
		     "0,1");
	FX_WAIT(f, T,
		ty_test_strf("waiting for a trial of sweep %s to end: it runs its max_concurrent 2 "
			     "trials",
			     sweep),
		"SELECT pending_reason FROM jobs WHERE sweep_id = $1 AND sweep_trial = 3", sweep);
	/* the first trial ends: the third starts */
	first = atoll(FX_Q(f, "SELECT id FROM jobs WHERE sweep_id = $1 AND sweep_trial = 0", sweep));
	{
		const struct proto_msg *l = fx_recv(f, "n1", "launch", first, T);

		REQUIRE(l != NULL);
		fx_run(f, "n1", l);
		fx_exit(f, "n1", l, 0, "", "");
	}
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(first));
	FX_WAIT(f, T, "t",
		"SELECT state <> 'pending' FROM jobs WHERE sweep_id = $1 AND sweep_trial = 2", sweep);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE sweep_id = $1 AND sweep_trial = 3",
			  sweep),
		     "pending");
}

/*
 * A whole gang's attempt_running in one event batch (produced while no
 * scheduler leads, then consumed at once): applied together, the same as one
 * by one — every part running and acknowledged, the attempt and the job
 * running with one event, the first node's resume kept.
 */
TY_TEST(attempt_running_of_a_gang_in_one_batch)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	long long job;
	int s;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	s = fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_sched_stop(f, s);
	fx_send(f, "n1", "attempt_running", job, 1,
		"{'ranks':1,'resume':{'path':'/ckpt/step-20','step':20,'skipped':[]}}");
	fx_send(f, "n2", "attempt_running", job, 1,
		"{'ranks':1,'resume':{'path':'/ckpt/step-10','step':10,'skipped':[]}}");
	fx_send(f, "n2", "attempt_running", job, 1, "{'ranks':1}"); /* redelivered */
	s = fx_sched_start(f, "s2", NULL);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || resume_step FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "running 20");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1"
			  " AND running_at IS NOT NULL AND accepted_at IS NOT NULL",
			  fx_n(job)),
		     "2");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(message, ' | ') FROM job_events WHERE job_id = $1"
			  " AND type = 'running'",
			  fx_n(job)),
		     "attempt 1 running: 2 ranks on 2 nodes; resumed from step 20 (/ckpt/step-20)");
	fx_sched_stop(f, s);
}
