/*
 * Liveness and reconciliation: lost nodes, launches that never arrived,
 * exits known only from heartbeats, restarted executors, stray attempts.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <string.h>

#define T 15000

static const char *dstr(const struct proto_msg *m, const char *key)
{
	return json_string_value(json_object_get(m->data, key));
}

TY_TEST(silent_node_is_lost_and_its_gang_requeued)
{
	static const char *const fast[] = {"--node-timeout-ms=1500", "--retry-backoff-seconds=0",
					   NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2, *k, *m1, *m3;
	long long job;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_node(f, "n3", 4);
	fx_sched_start(f, "s1", fast);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	fx_node_beat(f, "n2", false);
	FX_WAIT(f, T, "lost", "SELECT state FROM nodes WHERE id = 'n2'");
	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "node_lost");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class FROM attempts"
			  " WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     "failed node_lost");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT released_at IS NOT NULL FROM allocations"
			  " WHERE job_id = $1 AND node_id = 'n2'",
			  fx_n(job)),
		     "t");
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
		 fx_n(job)),
	    "attempt 1 failed: node n2 lost: no heartbeat for 1500 ms (node_lost); requeued "
	    "for attempt 2 (system retry 1 of 3, node n2 excluded); expedited: first in its "
	    "team's order; node n1 held for it for 60s");
	CHECK_STR_EQ(FX_Q(f, "SELECT excluded_nodes::text FROM jobs WHERE id = $1", fx_n(job)),
		     "{n2}");
	/* n1's GPUs are held until it reports: attempt 2 needs n3 and n1 once free */
	fx_exit(f, "n1", l1, 143, "cancelled", "killed on request");
	m1 = fx_recv(f, "n1", "launch", job, T);
	m3 = fx_recv(f, "n3", "launch", job, T);
	REQUIRE(m1 != NULL && m3 != NULL);
	CHECK_INT_EQ(m1->attempt, 2);
	CHECK_INT_EQ(m3->attempt, 2);
	CHECK_INT_EQ(fx_count(f, "n2", "launch", job, 2), 0);

	/* a lost node that heartbeats again is ready again */
	fx_node_beat(f, "n2", true);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n2'");
	fx_sched_stop(f, 0);
}

TY_TEST(unacknowledged_launch_is_resent_once_per_period)
{
	static const char *const resend[] = {"--resend-ms=1000", "--reconcile-ms=100", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1, *prev, *m;
	long long job, first_ts, deadline;
	int resent = 0, at_ack, n1_acked;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", resend);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	prev = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && prev != NULL);
	first_ts = prev->ts;
	fx_run(f, "n1", l1); /* n1 acknowledges in its heartbeats; n2 never does */
	/* a resend to n1 before its first acknowledging heartbeat is applied is
	 * right (the executor dedupes it); none may follow the acknowledgment */
	FX_WAIT(f, T, "1",
		"SELECT count(*) FROM nodes WHERE id = 'n1'"
		" AND running @> jsonb_build_array(jsonb_build_object('job', $1::bigint,"
		" 'attempt', 1))",
		fx_n(job));
	n1_acked = fx_count(f, "n1", "launch", job, 0);
	CHECK(n1_acked <= 2);

	/* about 3.5 resend periods: every resend at least a period after the last */
	deadline = ty_wall_ms() + T;
	while ((m = fx_recv(f, "n2", "launch", job, 500)) || prev->ts - first_ts < 3500) {
		if (ty_wall_ms() > deadline) {
			FAIL("%d resend(s) within %d ms", resent, T);
			break;
		}
		if (!m)
			continue;
		CHECK_INT_EQ(m->attempt, 1);
		CHECK(m->seq > prev->seq);
		CHECK(json_equal(json_object_get(m->data, "gpus"),
				 json_object_get(prev->data, "gpus")));
		if (m->ts - prev->ts < 900)
			FAIL("launch re-sent %lld ms after the previous one (period 1000 ms)",
			     (long long)(m->ts - prev->ts));
		prev = m;
		resent++;
		if (prev->ts - first_ts >= 3500)
			break;
	}
	CHECK(resent >= 2);
	CHECK(resent <= 4);
	/* one more may have been decided just before the acknowledgment landed */
	CHECK(fx_count(f, "n1", "launch", job, 0) <= n1_acked + 1);

	/* once n2 lists the attempt, the resends stop (one may already be on its way) */
	at_ack = fx_count(f, "n2", "launch", job, 0);
	fx_run(f, "n2", prev);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_poll(f, 2500);
	CHECK(fx_count(f, "n2", "launch", job, 0) <= at_ack + 1);
	fx_sched_stop(f, 0);
}

TY_TEST(acknowledged_launch_is_never_resent_and_a_lost_ack_costs_one_resend)
{
	static const char *const resend[] = {"--resend-ms=2000", "--reconcile-ms=100", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2, *m;
	long long job;
	int at_ack;

	fx_node(f, "n1", 1);
	fx_node(f, "n2", 1);
	fx_sched_start(f, "s1", resend);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	/* n1 acknowledges and starts nothing yet; n2's acknowledgement is lost */
	fx_send(f, "n1", "launch_accepted", job, 1, "{'duplicate':false}");
	FX_WAIT(f, T, "t",
		"SELECT accepted_at IS NOT NULL FROM allocations WHERE job_id = $1"
		" AND node_id = 'n1'",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT accepted_at IS NULL FROM allocations WHERE job_id = $1"
			  " AND node_id = 'n2'",
			  fx_n(job)),
		     "t");
	m = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(m != NULL);
	CHECK_INT_EQ(m->attempt, 1);
	CHECK(m->seq > l2->seq);
	CHECK(json_equal(json_object_get(m->data, "gpus"), json_object_get(l2->data, "gpus")));
	/* the executor acknowledges the re-sent launch (duplicate or not): no more */
	fx_send(f, "n2", "launch_accepted", job, 1, "{'duplicate':true}");
	FX_WAIT(f, T, "t",
		"SELECT accepted_at IS NOT NULL FROM allocations WHERE job_id = $1"
		" AND node_id = 'n2'",
		fx_n(job));
	at_ack = fx_count(f, "n2", "launch", job, 0);
	fx_poll(f, 5000); /* two and a half resend periods */
	/* one may have been decided just before the acknowledgment landed */
	CHECK(fx_count(f, "n2", "launch", job, 0) <= at_ack + 1);
	/* n1's heartbeats never listed the attempt: its acknowledgement alone counted */
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "scheduled");
	fx_sched_stop(f, 0);
}

TY_TEST(exit_known_only_from_heartbeat_is_applied)
{
	/* a period long enough for an event to overtake the heartbeat's word */
	static const char *const slow[] = {"--reconcile-ms=4000", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	long long job;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", slow);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	/* n2's heartbeat tells of its end before its attempt_exited arrives */
	fx_node_runs(f, "n2", job, 1, false);
	fx_node_finished(f, "n2", job, 1, 0, "", "");
	FX_WAIT(f, T, "f",
		"SELECT running @> jsonb_build_array(jsonb_build_object('job', $1::bigint,"
		" 'attempt', 1)) FROM nodes WHERE id = 'n2'",
		fx_n(job));
	fx_exit(f, "n2", l2, 0, "", "");
	/* n1's attempt_exited is lost: only the heartbeats say so */
	fx_node_runs(f, "n1", job, 1, false);
	fx_node_finished(f, "n1", job, 1, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1"
			  " AND released_at IS NOT NULL",
			  fx_n(job)),
		     "2");
	/*
	 * Only what was applied from a heartbeat is logged as such; n2's
	 * (noted first, so looked at no later than n1's) changed nothing.
	 */
	CHECK(strstr(fx_sched_log(f, 0),
		     ty_test_strf("job %lld: applied attempt 1's exit on node 'n1' from its "
				  "heartbeats: its attempt_exited never arrived",
				  job)) != NULL);
	CHECK(strstr(fx_sched_log(f, 0), "exit on node 'n2' from its heartbeats") == NULL);
	fx_sched_stop(f, 0);
}

/* A failure known only from heartbeats keeps its class and the classifier's evidence. */
TY_TEST(failure_known_only_from_heartbeat_keeps_its_evidence)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1;
	long long job;

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'retry':{'user':0}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, "n1", l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_node_runs(f, "n1", job, 1, false);
	fx_node_finished_ev(f, "n1", job, 1, 1, "user", "rank 0 exited with code 1",
			    "rank 0: KeyError: 'lr'");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT failure_class || '|' || evidence FROM attempts"
			  " WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     "user|rank 0: KeyError: 'lr'");
	fx_sched_stop(f, 0);
}

/*
 * A failure known only from heartbeats keeps who saw its evidence: one
 * team's log-only failure is recorded and excludes the node from the job,
 * but does not make the node suspect (docs/dispatch.md, "Node states").
 */
TY_TEST(log_only_failure_known_only_from_heartbeat_stays_log_only)
{
	static const char *const args[] = {"--suspect-after-jobs=1", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l1;
	long long job;

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'retry':{'system':0}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, "n1", l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_node_runs(f, "n1", job, 1, false);
	fx_node_finished_src(f, "n1", job, 1, 1, "system", "rank 0 exited with code 1",
			     "rank 0: NCCL WARN NET/IB : Got completion from peer with error 12",
			     "log");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT evidence_source FROM node_failures WHERE job_id = $1",
			  fx_n(job)),
		     "log");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	fx_sched_stop(f, 0);
}

TY_TEST(restarted_executor_fails_its_attempts_as_system)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2, *k;
	long long job;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2},'retry':{'system':0}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	/* n2 comes back with a new boot id (a real executor registers again) */
	fx_node_beat(f, "n2", false);
	fx_send(f, "n2", "register", 0, 0,
		"{'address':'10.0.0.2','gpus':2,'labels':{},'boot_id':'second-boot',"
		"'log_url':'http://10.0.0.2:8081'}");
	FX_WAIT(f, T, "failed system",
		"SELECT state || ' ' || failure_class FROM jobs WHERE id = $1", fx_n(job));
	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "fail_fast");
	CHECK_STR_EQ(FX_Q(f, "SELECT boot_id FROM nodes WHERE id = 'n2'"), "second-boot");
	CHECK_STR_EQ(FX_Q(f, "SELECT message FROM attempts WHERE job_id = $1", fx_n(job)),
		     "node n2 restarted (boot id changed)");
	fx_sched_stop(f, 0);
}

TY_TEST(attempt_a_node_runs_but_the_database_calls_over_is_killed)
{
	struct fx *f = fx_start();
	const struct proto_msg *k;

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* job 4242 attempt 3 never existed here */
	fx_node_runs(f, "n1", 4242, 3, true);
	k = fx_recv(f, "n1", "kill", 4242, T);
	REQUIRE(k != NULL);
	CHECK_INT_EQ(k->attempt, 3);
	CHECK_STR_EQ(dstr(k, "reason"), "over");
	fx_node_runs(f, "n1", 4242, 3, false);
	fx_sched_stop(f, 0);
}

TY_TEST(malformed_messages_are_skipped)
{
	struct fx *f = fx_start();
	long long job;

	fx_node(f, "n1", 1);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* a rank of another node's range, and a negative GPU count: skipped, not fatal */
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
	REQUIRE(fx_recv(f, "n1", "launch", job, T) != NULL);
	fx_send(f, "n1", "rank_exited", job, 1, "{'rank':7,'exit_code':1,'signal':0}");
	fx_send(f, "bad-node", "register", 0, 0,
		"{'address':'x','gpus':-1,'labels':{},'boot_id':'b','log_url':''}");
	/* types DESIGN.md names but the protocol dropped: unknown, like any other */
	fx_send_raw(f, PROTO_TOPIC_EVENTS, "n1",
		    ty_test_strf("{'v':1,'type':'progress','node':'n1','job':%lld,'attempt':1,"
				 "'epoch':0,'seq':1,'ts':0,'data':{'step':10}}",
				 job));
	fx_send_raw(f, PROTO_TOPIC_EVENTS, "n1",
		    ty_test_strf("{'v':1,'type':'metrics','node':'n1','job':%lld,'attempt':1,"
				 "'epoch':0,'seq':1,'ts':0,'data':{'metrics':{'loss':0.5}}}",
				 job));
	fx_send_raw(f, PROTO_TOPIC_NODES, "n1",
		    "{'v':1,'type':'state','node':'n1','job':0,'attempt':0,'epoch':0,'seq':1,"
		    "'ts':0,'data':{'state':'draining'}}");
	fx_send_raw(f, PROTO_TOPIC_NODES, "n1",
		    "{'v':1,'type':'drain','node':'n1','job':0,'attempt':0,'epoch':0,'seq':1,"
		    "'ts':0,'data':{}}");
	fx_node(f, "n2", 1);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM ranks"), "0");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM nodes WHERE id = 'bad-node'"), "0");
	CHECK(strstr(fx_sched_log(f, 0), "skipping rank_exited message") != NULL);
	for (const char *const *t = (const char *const[]){"progress", "metrics", "state", "drain",
							    NULL};
	     *t; t++) {
		ty_test_context("type %s", *t);
		CHECK(strstr(fx_sched_log(f, 0), ty_test_strf(": unknown message type '%s'", *t)) !=
		      NULL);
	}
	fx_sched_stop(f, 0);
}
