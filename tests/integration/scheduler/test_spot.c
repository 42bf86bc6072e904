/*
 * Spot preemption through the daemon, the test playing the executors: a
 * spot notice (event, heartbeat, or POST /v1/nodes/{id}/preempt) makes the
 * node preempting, checkpoints every node of its gangs, kills them by the
 * deadline, requeues them without the retry budget elsewhere; the spot
 * pools (spot.allowed, max_preemptions with fallback); the resume point
 * each attempt reports.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <stdlib.h>
#include <string.h>

#define T 15000

static long long dint(const struct proto_msg *m, const char *key)
{
	return (long long)json_integer_value(json_object_get(m->data, key));
}

static const char *dstr(const struct proto_msg *m, const char *key)
{
	return json_string_value(json_object_get(m->data, key));
}

/* The first launch of job on any of nodes (NULL-terminated), waiting up to ms. */
static const struct proto_msg *recv_launch(struct fx *f, const char *const *nodes, long long job,
					   int ms, const char **on)
{
	int64_t end = ty_mono_ms() + ms;

	do {
		for (int i = 0; nodes[i]; i++) {
			const struct proto_msg *m = fx_recv(f, nodes[i], "launch", job, 0);

			if (m) {
				*on = nodes[i];
				return m;
			}
		}
		fx_poll(f, 20);
	} while (ty_mono_ms() < end);
	return NULL;
}

static const char *notice_json(long long deadline_ms)
{
	return ty_test_strf("{'deadline':%lld,'provider':'aws','action':'terminate',"
			    "'detail':'instance-action terminate'}",
			    deadline_ms);
}

static const char *const four[] = {"n1", "n2", "n3", "n4", NULL};

/*
 * A 2-node gang on the spot nodes n1 and n2; n1 gets a notice: both nodes
 * checkpoint, both are killed at the deadline less the margin and the kill
 * grace (the job's
 * grace is longer), the job is requeued with its retry budget untouched and
 * runs again on nodes other than n1, which takes no work until it comes back
 * with a new boot.
 */
TY_TEST(notice_checkpoints_whole_gang_kills_by_deadline_and_requeues)
{
	struct fx *f = fx_start();
	const struct proto_msg *la, *lb, *c1, *c2, *k1, *k2, *r1, *r2;
	const char *na, *nb, *ra, *rb, *body;
	long long job, deadline;

	fx_node_pool(f, "n1", 2, "spot");
	fx_node_pool(f, "n2", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2},"
			   "'spot':{'allowed':true},'checkpoint':{'grace_seconds':600},"
			   "'retry':{'system':1}");
	la = recv_launch(f, four, job, T, &na);
	REQUIRE(la != NULL);
	lb = recv_launch(f, four, job, T, &nb);
	REQUIRE(lb != NULL);
	fx_run(f, na, la);
	fx_run(f, nb, lb);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	/* two on-demand nodes to go to */
	fx_node(f, "n3", 2);
	fx_node(f, "n4", 2);
	FX_WAIT(f, T, "4", "SELECT count(*) FROM nodes WHERE state = 'ready'");

	/* n1's executor: the event, and the notice repeated in its heartbeats */
	deadline = ty_wall_ms() + 16000;
	fx_node_notice(f, "n1", notice_json(deadline));
	fx_send(f, "n1", "preempt_notice", 0, 0, notice_json(deadline));

	c1 = fx_recv(f, "n1", "checkpoint", job, T);
	c2 = fx_recv(f, "n2", "checkpoint", job, T);
	REQUIRE(c1 != NULL && c2 != NULL);
	CHECK_STR_EQ(dstr(c1, "signal"), "SIGUSR1");
	CHECK_INT_EQ(c1->attempt, 1);
	CHECK(dint(c1, "grace_seconds") <= 4); /* bounded by the deadline, not 600 */
	FX_WAIT(f, T, "preempting", "SELECT state FROM nodes WHERE id = 'n1'");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n2'"), "ready");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (extract(epoch FROM preempt_deadline) * 1000)::bigint"
			  " || ' ' || (preempt_notice->>'provider') || ' '"
			  " || (preempt_notice->>'action') FROM nodes WHERE id = 'n1'"),
		     ty_test_strf("%lld aws terminate", deadline));
	/*
	 * the kill is due at the deadline less --spot-kill-margin-seconds (5)
	 * and the kill grace (7), so that the SIGKILL lands 5 s before it
	 */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class || ' ' || spot_node || ' '"
			  " || (kill_at = to_timestamp($2::bigint / 1000.0) - interval '12 s')"
			  " || ' ' || (preempted_for IS NULL)"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(job), fx_n(deadline)),
		     "stopping preempted n1 true true");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "preempting");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message LIKE 'attempt 1 preempted: node n1 has a spot interruption"
			  " notice (aws, deadline in 1_ s); SIGUSR1 sent to 2 nodes, killed in _ s'"
			  " FROM job_events WHERE job_id = $1 AND type = 'preempting'",
			  fx_n(job)),
		     "t");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (data->>'spot_node') || ' ' || (data->>'deadline')"
			  " FROM job_events WHERE job_id = $1 AND type = 'preempting'",
			  fx_n(job)),
		     ty_test_strf("n1 %lld", deadline));

	/* the kills, reason preempted, to both nodes */
	k1 = fx_recv(f, "n1", "kill", job, T);
	k2 = fx_recv(f, "n2", "kill", job, T);
	REQUIRE(k1 != NULL && k2 != NULL);
	CHECK_STR_EQ(dstr(k1, "reason"), "preempted");
	CHECK_STR_EQ(dstr(k2, "reason"), "preempted");
	CHECK(ty_wall_ms() >= deadline - 12000);
	/* a repeated notice changes nothing: one checkpoint per node */
	fx_send(f, "n1", "preempt_notice", 0, 0, notice_json(deadline));
	fx_sync(f, T);
	fx_poll(f, 300);
	CHECK_INT_EQ(fx_count(f, "n1", "checkpoint", job, 1), 1);
	CHECK_INT_EQ(fx_count(f, "n2", "checkpoint", job, 1), 1);

	fx_exit(f, na, la, -1, "preempted", "killed: preempted");
	fx_exit(f, nb, lb, -1, "preempted", "killed: preempted");
	r1 = recv_launch(f, four, job, T, &ra);
	REQUIRE(r1 != NULL);
	r2 = recv_launch(f, four, job, T, &rb);
	REQUIRE(r2 != NULL);
	CHECK_INT_EQ(r1->attempt, 2);
	CHECK(strcmp(ra, "n1") != 0 && strcmp(rb, "n1") != 0);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 2), 0);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT attempt || ' ' || failure_class || ' ' || preemptions || ' ' ||"
			  " spot_preemptions || ' ' || retries::text FROM jobs WHERE id = $1",
			  fx_n(job)),
		     "2 preempted 1 1 {}");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(job)),
		     "attempt 1 preempted: stopped on every node; requeued for attempt 2 "
		     "(spot preemption 1, retry budget untouched)");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type || '/' || state, ' ' ORDER BY seq)"
			  " FROM job_events WHERE job_id = $1",
			  fx_n(job)),
		     "submitted/pending scheduled/scheduled starting/starting running/running "
		     "preempting/preempting stopping/preempting requeued/pending "
		     "scheduled/scheduled");

	/* the new attempt reports where it resumed from, per node; the first report stays */
	fx_node_runs(f, ra, job, 2, true);
	fx_send(f, ra, "attempt_running", job, 2,
		"{'ranks':2,'resume':{'path':'/ckpt/step-40','step':40,'skipped':"
		"[{'path':'/ckpt/step-50','step':50,'status':'corrupt',"
		"'reason':'sha256 mismatch: model.pt','extra':1}]}}");
	fx_node_runs(f, rb, job, 2, true);
	fx_send(f, rb, "attempt_running", job, 2,
		"{'ranks':2,'resume':{'path':'/ckpt/step-10','step':10,'skipped':[]}}");
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'running'"
			  " AND (data->>'attempt')::int = 2",
			  fx_n(job)),
		     "attempt 2 running: 4 ranks on 2 nodes; resumed from step 40 (/ckpt/step-40; "
		     "1 newer checkpoint failed verification)");
	body = fx_api(f, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), 200);
	{
		json_t *j = json_loads(body, 0, NULL);

		REQUIRE(j != NULL);
		CHECK_JSTR(j, "items[0].spot_node", "n1");
		CHECK_JNULL(j, "items[0].resume");
		CHECK_JNULL(j, "items[1].spot_node");
		CHECK_JSTR(j, "items[1].resume.path", "/ckpt/step-40");
		CHECK_JINT(j, "items[1].resume.step", 40);
		CHECK_INT_EQ(json_array_size(ty_jpath(j, "items[1].resume.skipped")), 1);
		CHECK_JSTR(j, "items[1].resume.skipped[0].path", "/ckpt/step-50");
		CHECK_JINT(j, "items[1].resume.skipped[0].step", 50);
		CHECK_JSTR(j, "items[1].resume.skipped[0].status", "corrupt");
		CHECK_JSTR(j, "items[1].resume.skipped[0].reason", "sha256 mismatch: model.pt");
		CHECK(ty_jpath(j, "items[1].resume.skipped[0].extra") == NULL);
		json_decref(j);
	}

	/* n1 restarts without a notice: ready again, its notice forgotten */
	fx_node_reboot(f, "n1");
	FX_WAIT(f, T, "ready true", "SELECT state || ' ' || (preempt_deadline IS NULL) FROM nodes"
				    " WHERE id = 'n1'");
	fx_sched_stop(f, 0);
}

/*
 * The heartbeat's notice alone does it (as when the event is lost); the
 * event arriving afterwards repeats it. The job's grace is shorter than the
 * deadline allows, so it decides the kill. A newer heartbeat without the
 * notice ends it; the old event replayed afterwards changes nothing.
 */
/*
 * The ranks finished on their own just after the notice's checkpoint signal:
 * the job succeeded, counts no spot preemption and never runs again.
 */
TY_TEST(a_gang_that_finishes_after_the_notice_succeeds_and_never_runs_again)
{
	struct fx *f = fx_start();
	const struct proto_msg *l;
	const char *on;
	long long job, deadline;

	fx_node_pool(f, "n1", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},"
			   "'spot':{'allowed':true},'checkpoint':{'grace_seconds':600}");
	l = recv_launch(f, four, job, T, &on);
	REQUIRE(l != NULL);
	fx_run(f, on, l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	deadline = ty_wall_ms() + 60000;
	fx_node_notice(f, "n1", notice_json(deadline));
	fx_send(f, "n1", "preempt_notice", 0, 0, notice_json(deadline));
	REQUIRE(fx_recv(f, "n1", "checkpoint", job, T) != NULL);
	FX_WAIT(f, T, "preempting", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_exit(f, "n1", l, 0, "", "");
	FX_WAIT(f, T, "succeeded 1 0 0",
		"SELECT state || ' ' || attempt || ' ' || preemptions || ' ' || spot_preemptions"
		" FROM jobs WHERE id = $1",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || message FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "succeeded finished before it was stopped");
	fx_poll(f, 1500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 0), 1);
	fx_sched_stop(f, 0);
}

TY_TEST(heartbeat_notice_grace_bound_end_and_stale_replay)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *c, *k, *l2;
	const char *on;
	static const char *const one[] = {"n1", NULL};
	long long job, deadline;
	int mark;

	fx_node_pool(f, "n1", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},"
			   "'spot':{'allowed':true,'fallback':'none','max_preemptions':0},"
			   "'checkpoint':{'signal':'SIGUSR2','grace_seconds':1}");
	l1 = recv_launch(f, one, job, T, &on);
	REQUIRE(l1 != NULL);
	fx_run(f, "n1", l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	deadline = ty_wall_ms() + 60000;
	fx_node_notice(f, "n1", notice_json(deadline));
	c = fx_recv(f, "n1", "checkpoint", job, T);
	REQUIRE(c != NULL);
	FX_WAIT(f, T, "preempting", "SELECT state FROM nodes WHERE id = 'n1'");
	/* the event, late: the same notice, nothing new */
	mark = fx_sent_count(f);
	fx_send(f, "n1", "preempt_notice", 0, 0, notice_json(deadline));
	CHECK_STR_EQ(dstr(c, "signal"), "SIGUSR2");
	CHECK_INT_EQ(dint(c, "grace_seconds"), 1);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT kill_at < to_timestamp($2::bigint / 1000.0) - interval '50 s'"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(job), fx_n(deadline)),
		     "t");
	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	fx_exit(f, "n1", l1, -1, "preempted", "killed: preempted");
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || spot_preemptions FROM jobs WHERE id = $1",
		fx_n(job));
	/* n1 is the only node and it is preempting: the job waits */
	fx_poll(f, 500);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", job, 2), 0);

	/* the notice is withdrawn: a newer heartbeat without it makes n1 ready */
	fx_node_notice(f, "n1", NULL);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	/* fallback none: the job keeps using spot nodes after max_preemptions */
	l2 = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l2 != NULL);
	CHECK_INT_EQ(l2->attempt, 2);
	fx_run(f, "n1", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	/* the old event, replayed: older than n1's last heartbeat, ignored */
	fx_replay(f, mark, mark + 1);
	fx_sync(f, T);
	fx_poll(f, 500);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "running");
	CHECK_INT_EQ(fx_count(f, "n1", "checkpoint", job, 2), 0);
	fx_sched_stop(f, 0);
}

/*
 * The pools: n1 is spot, n2 on-demand. A job that disallows spot never
 * lands on n1, and waits for n2 saying why; a job allowing spot backfills n1.
 * After max_preemptions spot preemptions a job with fallback on_demand only
 * goes to n2.
 */
TY_TEST(spot_pools_disallowed_and_fallback_after_max_preemptions)
{
	struct fx *f = fx_start();
	const struct proto_msg *ls, *lx, *lc, *k, *l2;
	const char *on;
	static const char *const both[] = {"n1", "n2", NULL};
	long long s, x, y, c, z, deadline;

	fx_node_pool(f, "n1", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* s: on spot (the only node), may be preempted there once before it falls back */
	s = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},"
			 "'spot':{'allowed':true,'max_preemptions':1,'fallback':'on_demand'},"
			 "'checkpoint':{'grace_seconds':0}");
	ls = fx_recv(f, "n1", "launch", s, T);
	REQUIRE(ls != NULL);
	fx_run(f, "n1", ls);
	fx_node_pool(f, "n2", 2, "on-demand");
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* x disallows spot (the default): it goes to n2 */
	x = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	lx = recv_launch(f, both, x, T, &on);
	REQUIRE(lx != NULL);
	CHECK_STR_EQ(on, "n2");
	fx_run(f, "n2", lx);
	/* y disallows spot too: n1 frees up below, but y waits for n2 */
	y = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'spot':{'allowed':false}");

	/* s is preempted on spot (grace 0: killed at once) */
	deadline = ty_wall_ms() + 30000;
	fx_node_notice(f, "n1", notice_json(deadline));
	fx_send(f, "n1", "preempt_notice", 0, 0, notice_json(deadline));
	k = fx_recv(f, "n1", "kill", s, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "preempted");
	CHECK_INT_EQ(fx_count(f, "n1", "checkpoint", s, 1), 1);
	fx_exit(f, "n1", ls, -1, "preempted", "killed: preempted");
	FX_WAIT(f, T, "pending 1 1", "SELECT state || ' ' || spot_preemptions || ' ' || preemptions"
				     " FROM jobs WHERE id = $1",
		fx_n(s));
	/* n1 comes back (new boot, no notice) and is free; s and y still wait for n2 */
	fx_node_reboot(f, "n1");
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	FX_WAIT(f, T, "t",
		"SELECT pending_reason LIKE 'waiting for on-demand nodes: preempted on spot 1 time"
		" (spot.max_preemptions 1)%' FROM jobs WHERE id = $1",
		fx_n(s));
	FX_WAIT(f, T, "t",
		"SELECT pending_reason LIKE 'waiting for on-demand nodes (spot.allowed is false)%'"
		" FROM jobs WHERE id = $1",
		fx_n(y));
	/* a job that allows spot takes n1 meanwhile */
	c = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'spot':{'allowed':true}");
	lc = fx_recv(f, "n1", "launch", c, T);
	REQUIRE(lc != NULL);
	fx_run(f, "n1", lc);
	/* max_preemptions 0 with fallback on_demand: on-demand from the start */
	z = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1},"
			 "'spot':{'allowed':true,'max_preemptions':0}");
	FX_WAIT(f, T, "t",
		"SELECT pending_reason LIKE 'waiting for on-demand nodes: preempted on spot 0 times"
		" (spot.max_preemptions 0)%' FROM jobs WHERE id = $1",
		fx_n(z));
	CHECK_INT_EQ(fx_count(f, "n1", "launch", s, 0), 1); /* attempt 1 only */
	CHECK_INT_EQ(fx_count(f, "n1", "launch", s, 2), 0);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", y, 0), 0);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", z, 0), 0);

	/* x ends: s (first in the queue, by its submit time) gets n2 */
	fx_exit(f, "n2", lx, 0, "", "");
	l2 = fx_recv(f, "n2", "launch", s, T);
	REQUIRE(l2 != NULL);
	CHECK_INT_EQ(l2->attempt, 2);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", s, 2), 0);
	fx_sched_stop(f, 0);
}

/*
 * POST /v1/nodes/{id}/preempt does what a cloud notice does; the node stays
 * preempting (its executor knows nothing) until an admin undrains it.
 */
TY_TEST(api_trigger_preempts_like_a_notice)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *c, *k, *l2;
	const char *on, *body;
	static const char *const both[] = {"n1", "n2", NULL};
	long long job;

	fx_node_pool(f, "n1", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'spot':{'allowed':true},"
			   "'checkpoint':{'grace_seconds':300}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, "n1", l1);
	fx_node(f, "n2", 2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	body = fx_api_body(f, "POST", "/v1/nodes/n1/preempt", "{'deadline_seconds':6}", 200);
	{
		json_t *node = json_loads(body, 0, NULL);

		CHECK_JSTR(node, "state", "preempting");
		CHECK_JSTR(node, "preempt.notice.provider", "local");
		json_decref(node);
	}
	c = fx_recv(f, "n1", "checkpoint", job, T);
	REQUIRE(c != NULL);
	CHECK(dint(c, "grace_seconds") <= 1); /* 6 s less the 5 s margin */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message LIKE 'attempt 1 preempted: node n1 has a spot interruption"
			  " notice (local, deadline in _ s);%' FROM job_events"
			  " WHERE job_id = $1 AND type = 'preempting'",
			  fx_n(job)),
		     "t");
	k = fx_recv(f, "n1", "kill", job, T);
	REQUIRE(k != NULL);
	fx_exit(f, "n1", l1, -1, "preempted", "killed: preempted");
	l2 = recv_launch(f, both, job, T, &on);
	REQUIRE(l2 != NULL);
	CHECK_STR_EQ(on, "n2");
	CHECK_STR_EQ(FX_Q(f, "SELECT spot_preemptions || ' ' || retries::text FROM jobs"
			     " WHERE id = $1",
			  fx_n(job)),
		     "1 {}");
	/* the attempt started from scratch: said so, with what was passed over */
	fx_node_runs(f, "n2", job, 2, true);
	fx_send(f, "n2", "attempt_running", job, 2,
		"{'ranks':2,'resume':{'path':null,'step':null,'skipped':"
		"[{'path':'/ckpt/step-5','step':5,'status':'torn','reason':'manifest missing'}]}}");
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT coalesce(resume_from, 'scratch') || ' ' ||"
			  " coalesce(resume_step::text, '-') || ' ' || (resume_skipped->0->>'status')"
			  " FROM attempts WHERE job_id = $1 AND attempt = 2",
			  fx_n(job)),
		     "scratch - torn");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'running'"
			  " AND (data->>'attempt')::int = 2",
			  fx_n(job)),
		     "attempt 2 running: 2 ranks on 1 node; started from scratch (1 checkpoint "
		     "failed verification)");

	/* heartbeats without a notice do not end an API notice */
	fx_poll(f, 600);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "preempting");
	fx_api(f, "POST", "/v1/nodes/n1/undrain", 200);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = 'n1'");
	fx_sched_stop(f, 0);
}

/*
 * A grace sized from the job's measured checkpoint time (42 s measured:
 * 63 s) never runs past the spot deadline: cut short, and the event says so.
 */
TY_TEST(a_measured_grace_is_cut_short_by_the_deadline)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *c;
	long long job;

	fx_node_pool(f, "n1", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},'spot':{'allowed':true},"
			   "'checkpoint':{'grace_seconds':300}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l1 != NULL);
	fx_run(f, "n1", l1);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	FX_Q(f, "UPDATE jobs SET checkpoint_durations_ms = '{42000}' WHERE id = $1 RETURNING id",
	     fx_n(job));
	fx_api_body(f, "POST", "/v1/nodes/n1/preempt", "{'deadline_seconds':30}", 200);
	c = fx_recv(f, "n1", "checkpoint", job, T);
	REQUIRE(c != NULL);
	CHECK(dint(c, "grace_seconds") <= 25); /* 30 s less the margin, not 63 */
	FX_WAIT(f, T, "t",
		"SELECT message LIKE '%; SIGUSR1 sent to 1 node, killed in __ s (measured 42.0 s,"
		" grace 63 s, cut to __ s by the deadline)' FROM job_events"
		" WHERE job_id = $1 AND type = 'preempting'",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT data->>'grace_source' FROM job_events"
			  " WHERE job_id = $1 AND type = 'preempting'",
			  fx_n(job)),
		     "measured");
	fx_sched_stop(f, 0);
}
