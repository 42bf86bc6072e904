/*
 * Reclaim preemption through the daemon, the test playing the executors:
 * checkpoint rows, kill rows after the grace period or once the checkpoint
 * is committed, the grace from the measured checkpoint time, the cohort's
 * reclaim delay, requeue without the retry budget, the preemptions
 * counter; and what each cycle publishes (pending reasons, queue
 * positions, team usage).
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <stdlib.h>
#include <string.h>

#define T 15000

static const char *const no_min_runtime[] = {
    "--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0", NULL};

static long long dint(const struct proto_msg *m, const char *key)
{
	return (long long)json_integer_value(json_object_get(m->data, key));
}

static const char *dstr(const struct proto_msg *m, const char *key)
{
	return json_string_value(json_object_get(m->data, key));
}

/* The first message of type for any job on either node, waiting up to ms. */
static const struct proto_msg *recv_either(struct fx *f, const char *type, int ms,
					   const char **node)
{
	int64_t end = ty_mono_ms() + ms;

	do {
		static const char *const nodes[] = {"n1", "n2"};

		for (int i = 0; i < 2; i++) {
			const struct proto_msg *m = fx_recv(f, nodes[i], type, 0, 0);

			if (m) {
				*node = nodes[i];
				return m;
			}
		}
		fx_poll(f, 20);
	} while (ty_mono_ms() < end);
	return NULL;
}

struct world {
	struct fx *f;
	const char *a, *b; /* teams of one cohort, 2 nominal GPUs each */
	long long a1, a2;
	const struct proto_msg *l1, *l2; /* their launches */
	const char *n1, *n2;		 /* their nodes */
};

/* Two 2-GPU nodes; team a fills both by borrowing b's idle nominal GPUs. */
static void borrowed_cluster(struct world *w, const char *const *sched_args, const char *spec)
{
	struct fx *f = w->f = fx_start();

	w->a = fx_team(f, "a", 2, -1, "c1");
	w->b = fx_team(f, "b", 2, -1, "c1");
	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", sched_args);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	w->a1 = fx_submit_to(f, w->a,
			     ty_test_strf(",'resources':{'nodes':1,'gpus_per_node':2}%s", spec));
	w->l1 = recv_either(f, "launch", T, &w->n1);
	REQUIRE(w->l1 != NULL && w->l1->job == w->a1);
	fx_run(f, w->n1, w->l1);
	w->a2 = fx_submit_to(f, w->a,
			     ty_test_strf(",'resources':{'nodes':1,'gpus_per_node':2}%s", spec));
	w->l2 = recv_either(f, "launch", T, &w->n2);
	REQUIRE(w->l2 != NULL && w->l2->job == w->a2);
	REQUIRE(strcmp(w->n1, w->n2) != 0);
	fx_run(f, w->n2, w->l2);
	FX_WAIT(f, T, "running running",
		"SELECT string_agg(state, ' ') FROM jobs WHERE id IN ($1, $2)", fx_n(w->a1),
		fx_n(w->a2));
	FX_WAIT(f, T, "4 2 0",
		"SELECT gpus_in_use || ' ' || gpus_borrowed || ' ' || gpus_lent"
		" FROM team_usage u JOIN teams t ON t.id = u.team_id WHERE t.name = $1",
		w->a);
	FX_WAIT(f, T, "0 0 2",
		"SELECT gpus_in_use || ' ' || gpus_borrowed || ' ' || gpus_lent"
		" FROM team_usage u JOIN teams t ON t.id = u.team_id WHERE t.name = $1",
		w->b);
}

/*
 * Team b asks for its 2 nominal GPUs back: returns its job; *c is the
 * victim's checkpoint message, *node the victim's node.
 */
static long long reclaim(struct world *w, const struct proto_msg **c, const char **node)
{
	long long b1 = fx_submit_to(w->f, w->b, ",'resources':{'nodes':1,'gpus_per_node':2}");

	*c = recv_either(w->f, "checkpoint", T, node);
	REQUIRE(*c != NULL);
	return b1;
}

/* The launch of the gang that checkpoint message c signals. */
static const struct proto_msg *victim_launch(const struct world *w, const struct proto_msg *c)
{
	return c->job == w->a1 ? w->l1 : w->l2;
}

TY_TEST(reclaim_checkpoints_kills_after_grace_and_requeues)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c, *k, *lb, *again, *launch;
	const char *cnode, *vnode;
	long long b1, victim, other, t0, waited;

	borrowed_cluster(
	    &w, no_min_runtime,
	    ",'checkpoint':{'signal':'SIGUSR2','grace_seconds':2},'retry':{'system':1}");
	f = w.f;
	t0 = ty_mono_ms();
	b1 = fx_submit_to(f, w.b, ",'resources':{'nodes':1,'gpus_per_node':2}");

	/* one of a's gangs (the younger one: a2) gets the checkpoint signal */
	c = recv_either(f, "checkpoint", T, &cnode);
	REQUIRE(c != NULL);
	victim = c->job;
	REQUIRE(victim == w.a1 || victim == w.a2);
	other = victim == w.a1 ? w.a2 : w.a1;
	vnode = victim == w.a1 ? w.n1 : w.n2;
	launch = victim == w.a1 ? w.l1 : w.l2;
	CHECK_INT_EQ(victim, w.a2);
	CHECK_STR_EQ(cnode, vnode);
	CHECK_INT_EQ(c->attempt, 1);
	CHECK_STR_EQ(dstr(c, "signal"), "SIGUSR2");
	CHECK_INT_EQ(dint(c, "grace_seconds"), 2);
	FX_WAIT(f, T, "preempting", "SELECT state FROM jobs WHERE id = $1", fx_n(victim));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class || ' ' || preempted_for"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(victim)),
		     ty_test_strf("stopping preempted %lld", b1));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT type || ' ' || state || ': ' || message FROM job_events"
			  " WHERE job_id = $1 AND type = 'preempting'",
			  fx_n(victim)),
		     ty_test_strf("preempting preempting: attempt 1 preempted to place job %lld "
				  "(team %s reclaiming its nominal quota); SIGUSR2 sent to 1 node, "
				  "killed in 2 s",
				  b1, w.b));
	/* the other gang and the preempting job's queue entry */
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(other)), "running");
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || queue_position FROM jobs WHERE id = $1",
		fx_n(b1));
	CHECK(FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(b1)) != NULL);

	/* nothing more during the grace period: no kill, no second checkpoint */
	fx_poll(f, 1000);
	CHECK_INT_EQ(fx_count(f, vnode, "kill", victim, 0), 0);
	CHECK_INT_EQ(fx_count(f, vnode, "checkpoint", victim, 0), 1);
	CHECK_INT_EQ(fx_count(f, "n1", "launch", b1, 0) + fx_count(f, "n2", "launch", b1, 0), 0);

	/* then the kill, reason preempted, once the grace period is over */
	k = fx_recv(f, vnode, "kill", victim, T);
	waited = ty_mono_ms() - t0;
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "preempted");
	CHECK_INT_EQ(k->attempt, 1);
	CHECK(waited >= 2000);
	CHECK_INT_EQ(fx_count(f, "n1", "kill", other, 0) + fx_count(f, "n2", "kill", other, 0), 0);

	/* the node reports: the job is requeued, its GPUs go to b1 */
	fx_exit(f, vnode, launch, -1, "preempted", "preempted by the scheduler");
	lb = fx_recv(f, vnode, "launch", b1, T);
	REQUIRE(lb != NULL);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || attempt || ' ' || failure_class || ' ' ||"
			  " preemptions || ' ' || retries::text FROM jobs WHERE id = $1",
			  fx_n(victim)),
		     "pending 1 preempted 1 {}");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class || ' ' || (ended_at IS NOT NULL)"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(victim)),
		     "failed preempted true");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(victim)),
		     "attempt 1 preempted: stopped on every node; requeued for attempt 2 "
		     "(preemption 1, retry budget untouched)");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type || '/' || state, ' ' ORDER BY seq)"
			  " FROM job_events WHERE job_id = $1",
			  fx_n(victim)),
		     "submitted/pending scheduled/scheduled starting/starting running/running "
		     "preempting/preempting stopping/preempting requeued/pending");
	/* it waits in the queue while b1 runs: a is back at its nominal share */
	FX_WAIT(f, T, "1", "SELECT queue_position FROM jobs WHERE id = $1", fx_n(victim));
	CHECK(FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(victim)) != NULL);
	fx_run(f, vnode, lb);
	FX_WAIT(f, T, "2 0 0",
		"SELECT gpus_in_use || ' ' || gpus_borrowed || ' ' || gpus_lent"
		" FROM team_usage u JOIN teams t ON t.id = u.team_id WHERE t.name = $1",
		w.a);
	FX_WAIT(f, T, "2 0 0",
		"SELECT gpus_in_use || ' ' || gpus_borrowed || ' ' || gpus_lent"
		" FROM team_usage u JOIN teams t ON t.id = u.team_id WHERE t.name = $1",
		w.b);
	FX_WAIT(f, T, "1",
		"SELECT pending_jobs FROM team_usage u JOIN teams t ON t.id = u.team_id"
		" WHERE t.name = $1",
		w.a);

	/* b1 ends: the requeued job runs again as attempt 2 */
	fx_exit(f, vnode, lb, 0, "", "");
	again = fx_recv(f, vnode, "launch", victim, T);
	REQUIRE(again != NULL);
	CHECK_INT_EQ(again->attempt, 2);
	FX_WAIT(f, T, "scheduled 2", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
		fx_n(victim));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT coalesce(pending_reason, '-') || ' ' ||"
			  " coalesce(queue_position::text, '-') FROM jobs WHERE id = $1",
			  fx_n(victim)),
		     "- -");
	fx_sched_stop(f, 0);
}

/*
 * The victim's checkpoint signal went out; what the node reports next
 * decides. A gang whose ranks all exit 0 finished: it succeeds and never
 * runs again (its side effects would happen twice).
 */
TY_TEST(a_gang_that_finishes_after_the_signal_succeeds_and_never_runs_again)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c;
	const char *cnode;
	long long b1;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':30}");
	f = w.f;
	b1 = reclaim(&w, &c, &cnode);
	CHECK_STR_EQ(dstr(c, "signal"), "SIGUSR1"); /* the spec's default */
	CHECK_INT_EQ(dint(c, "grace_seconds"), 30);
	fx_exit(f, cnode, victim_launch(&w, c), 0, "", "");
	/* its GPUs go to b1 at once; the victim is done, not requeued */
	REQUIRE(fx_recv(f, cnode, "launch", b1, T) != NULL);
	FX_WAIT(f, T, "succeeded 1 0 -",
		"SELECT state || ' ' || attempt || ' ' || preemptions || ' ' ||"
		" coalesce(failure_class, '-') FROM jobs WHERE id = $1",
		fx_n(c->job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || exit_code || ' ' || coalesce(failure_class, '-')"
			  " || ' ' || message FROM attempts WHERE job_id = $1",
			  fx_n(c->job)),
		     "succeeded 0 - finished before it was stopped");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type || '/' || state, ' ' ORDER BY seq)"
			  " FROM job_events WHERE job_id = $1",
			  fx_n(c->job)),
		     "submitted/pending scheduled/scheduled starting/starting running/running "
		     "preempting/preempting succeeded/succeeded");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'succeeded'",
			  fx_n(c->job)),
		     "attempt 1 succeeded: every rank on 1 node exited 0 (finished before it was "
		     "stopped)");
	/* the ledger has a finished attempt: nothing lost */
	FX_WAIT(f, T, "succeeded - 0",
		"SELECT outcome || ' ' || coalesce(failure_class, '-') || ' ' || lost_gpu_seconds"
		" FROM usage_ledger WHERE job_id = $1",
		fx_n(c->job));
	fx_poll(f, 1500);
	CHECK_INT_EQ(fx_count(f, cnode, "kill", c->job, 0), 0);
	CHECK_INT_EQ(
	    fx_count(f, "n1", "launch", c->job, 0) + fx_count(f, "n2", "launch", c->job, 0), 1);
	fx_sched_stop(f, 0);
}

/* The kill crossed the node's report: the ranks had exited 0 just before it. */
TY_TEST(a_gang_that_finishes_just_before_the_kill_succeeds)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c, *k;
	const char *cnode;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':1}");
	f = w.f;
	reclaim(&w, &c, &cnode);
	k = fx_recv(f, cnode, "kill", c->job, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "preempted");
	fx_exit(f, cnode, victim_launch(&w, c), 0, "", "");
	FX_WAIT(f, T, "succeeded 1 0",
		"SELECT state || ' ' || attempt || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(c->job));
	fx_poll(f, 1000);
	CHECK_INT_EQ(
	    fx_count(f, "n1", "launch", c->job, 0) + fx_count(f, "n2", "launch", c->job, 0), 1);
	fx_sched_stop(f, 0);
}

/* A job that checkpoints and exits non-zero on the signal asks to be resumed. */
TY_TEST(a_gang_that_checkpoints_and_exits_on_the_signal_is_requeued_without_a_kill)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c;
	const char *cnode;
	long long b1;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':30}");
	f = w.f;
	b1 = reclaim(&w, &c, &cnode);
	/* what the executor reports for a rank that exits 75 after the signal */
	fx_exit(f, cnode, victim_launch(&w, c), -1, "preempted",
		"preempted: rank 1 ended after the checkpoint signal (SIGUSR1)");
	REQUIRE(fx_recv(f, cnode, "launch", b1, T) != NULL);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || preemptions || ' ' || retries::text"
			  " FROM jobs WHERE id = $1",
			  fx_n(c->job)),
		     "pending 1 {}");
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || failure_class FROM attempts WHERE job_id = $1",
			  fx_n(c->job)),
		     "failed preempted");
	CHECK_INT_EQ(fx_count(f, cnode, "kill", c->job, 0), 0);
	fx_sched_stop(f, 0);
}

/*
 * A rank failed on its own before the signal reached it: the failure keeps
 * its class, evidence and retry accounting; it is no preemption.
 */
TY_TEST(a_failure_of_its_own_during_the_preemption_keeps_its_class_and_budget)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c, *l;
	const char *cnode;

	borrowed_cluster(&w, no_min_runtime,
			 ",'checkpoint':{'grace_seconds':30},'retry':{'user':1}");
	f = w.f;
	reclaim(&w, &c, &cnode);
	l = victim_launch(&w, c);
	fx_send(f, cnode, "rank_exited", l->job, l->attempt, "{'rank':0,'exit_code':3,'signal':0}");
	fx_send(f, cnode, "attempt_exited", l->job, l->attempt,
		"{'exit_code':3,'failure_class':'user','message':'rank 0 exited with code 3',"
		"'evidence':'rank 0: ValueError: bad batch'}");
	fx_node_runs(f, cnode, l->job, l->attempt, false);
	FX_WAIT(
	    f, T, "pending 0 {\"user\": 1}",
	    "SELECT state || ' ' || preemptions || ' ' || retries::text FROM jobs WHERE id = $1",
	    fx_n(c->job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class || ' ' || exit_code || ' ' ||"
			  " message || ' / ' || evidence FROM attempts WHERE job_id = $1",
			  fx_n(c->job)),
		     "failed user 3 rank 0 exited with code 3 / rank 0: ValueError: bad batch");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'requeued'",
			  fx_n(c->job)),
		     "attempt 1 failed: rank 0 exited with code 3 (user); requeued for attempt 2 "
		     "(user retry 1 of 1, backoff 10s)");
	fx_sched_stop(f, 0);
}

/* One team-a gang of 2 nodes × 2 GPUs (2 of them borrowed from b), running. */
struct gang {
	struct fx *f;
	const char *a, *b;
	long long job;
	const struct proto_msg *l1, *l2; /* its launches on n1 and n2 */
};

static void borrowed_gang(struct gang *g, const char *spec)
{
	struct fx *f = g->f = fx_start();

	g->a = fx_team(f, "a", 2, -1, "c1");
	g->b = fx_team(f, "b", 2, -1, "c1");
	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", no_min_runtime);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	g->job = fx_submit_to(f, g->a,
			      ty_test_strf(",'resources':{'nodes':2,'gpus_per_node':2}%s", spec));
	g->l1 = fx_recv(f, "n1", "launch", g->job, T);
	g->l2 = fx_recv(f, "n2", "launch", g->job, T);
	REQUIRE(g->l1 != NULL && g->l2 != NULL);
	fx_run(f, "n1", g->l1);
	fx_run(f, "n2", g->l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(g->job));
	fx_submit_to(f, g->b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	REQUIRE(fx_recv(f, "n1", "checkpoint", g->job, T) != NULL);
	REQUIRE(fx_recv(f, "n2", "checkpoint", g->job, T) != NULL);
}

/*
 * In a gang the first node to end decides: a peer that fails after the
 * preemption stopped another node's ranks failed because of it.
 */
TY_TEST(a_peer_failing_after_the_preemption_stopped_a_node_is_still_a_preemption)
{
	struct gang g;
	struct fx *f;

	borrowed_gang(&g, ",'checkpoint':{'grace_seconds':30}");
	f = g.f;
	fx_exit(f, "n1", g.l1, -1, "preempted",
		"preempted: rank 1 ended after the checkpoint signal (SIGUSR1)");
	fx_exit(f, "n2", g.l2, 1, "system", "rank 3 exited with code 1");
	FX_WAIT(
	    f, T, "pending 1 {}",
	    "SELECT state || ' ' || preemptions || ' ' || retries::text FROM jobs WHERE id = $1",
	    fx_n(g.job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || failure_class FROM attempts WHERE job_id = $1",
			  fx_n(g.job)),
		     "failed preempted");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM node_failures WHERE job_id = $1", fx_n(g.job)),
		     "0");
	fx_sched_stop(f, 0);
}

TY_TEST(a_node_failing_first_during_the_preemption_fails_the_gang)
{
	struct gang g;
	struct fx *f;

	borrowed_gang(&g, ",'checkpoint':{'grace_seconds':30}"); /* user retries: 0 */
	f = g.f;
	fx_exit(f, "n2", g.l2, 3, "user", "rank 3 exited with code 3");
	/* fail fast: the rest of the gang is killed at once, not after the grace period */
	REQUIRE(fx_recv(f, "n1", "kill", g.job, 5000) != NULL);
	fx_exit(f, "n1", g.l1, -1, "cancelled", "killed");
	FX_WAIT(
	    f, T, "failed 0 user",
	    "SELECT state || ' ' || preemptions || ' ' || failure_class FROM jobs WHERE id = $1",
	    fx_n(g.job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT state || ' ' || failure_class || ' ' || exit_code"
			  " FROM attempts WHERE job_id = $1",
			  fx_n(g.job)),
		     "failed user 3");
	CHECK_STR_EQ(FX_Q(f, "SELECT message FROM job_events WHERE job_id = $1 AND type = 'failed'",
			  fx_n(g.job)),
		     "attempt 1 failed: rank 3 exited with code 3 (user)");
	fx_sched_stop(f, 0);
}

/* Mixed: one node finished, the other was stopped: the work is not done. */
TY_TEST(a_gang_stopped_on_one_node_after_the_other_finished_is_requeued)
{
	struct gang g;
	struct fx *f;

	borrowed_gang(&g, ",'checkpoint':{'grace_seconds':30}");
	f = g.f;
	fx_exit(f, "n1", g.l1, 0, "", "");
	fx_exit(f, "n2", g.l2, -1, "preempted", "preempted: checkpoint step 4 verified");
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(g.job));
	fx_sched_stop(f, 0);
}

TY_TEST(cancel_while_preempting_cancels)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c, *k;
	const char *cnode;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':1}");
	f = w.f;
	reclaim(&w, &c, &cnode);
	fx_cancel(f, c->job);
	k = fx_recv(f, cnode, "kill", c->job, T);
	REQUIRE(k != NULL);
	fx_exit(f, cnode, victim_launch(&w, c), -1, "preempted", "preempted");
	FX_WAIT(f, T, "cancelled 0", "SELECT state || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(c->job));
	fx_sched_stop(f, 0);
}

TY_TEST(stop_while_preempting_stops)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c, *k;
	const char *cnode;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':1}");
	f = w.f;
	reclaim(&w, &c, &cnode);
	fx_api(f, "POST", ty_test_strf("/v1/jobs/%lld/stop", (long long)c->job), 200);
	k = fx_recv(f, cnode, "kill", c->job, T);
	REQUIRE(k != NULL);
	fx_exit(f, cnode, victim_launch(&w, c), -1, "preempted", "preempted");
	FX_WAIT(f, T, "stopped 0", "SELECT state || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(c->job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT type || ' ' || state || ': ' || message FROM job_events"
			  " WHERE job_id = $1 ORDER BY seq DESC LIMIT 1",
			  fx_n(c->job)),
		     "stopped stopped: stopped: attempt 1 (being preempted) stopped on every node");
	fx_sched_stop(f, 0);
}

TY_TEST(a_lost_node_completes_a_preemption)
{
	static const char *const args[] = {"--min-runtime-seconds=normal=0",
					   "--node-timeout-ms=1500", NULL};
	struct world w;
	struct fx *f;
	const struct proto_msg *c;
	const char *cnode;
	long long b1;

	borrowed_cluster(&w, args, ",'checkpoint':{'grace_seconds':60}");
	f = w.f;
	b1 = reclaim(&w, &c, &cnode);
	fx_node_beat(f, cnode, false);
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(c->job));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(b1)), "pending");
	fx_sched_stop(f, 0);
}

/*
 * Victims are chosen by the work they would lose: the older gang (a1)
 * checkpointed after the younger one (a2) started, so a1 loses less and is
 * the one preempted (by age alone it would be a2, as above).
 */
TY_TEST(reclaim_preempts_the_gang_that_loses_least_since_its_checkpoint)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c;
	const char *cnode;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':30}");
	f = w.f;
	fx_poll(f, 50); /* the checkpoint's time is after a2's start, to the millisecond */
	fx_send(f, w.n1, "checkpoint_written", w.a1, 1,
		"{'path':'/ckpt/step-100','step':100,'valid':true}");
	FX_WAIT(f, T, "100", "SELECT last_checkpoint_step FROM attempts WHERE job_id = $1",
		fx_n(w.a1));
	fx_submit_to(f, w.b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	c = recv_either(f, "checkpoint", T, &cnode);
	REQUIRE(c != NULL);
	CHECK_INT_EQ(c->job, w.a1);
	CHECK_STR_EQ(cnode, w.n1);
	fx_sched_stop(f, 0);
}

/*
 * Kill on the committed event: a valid checkpoint written after the signal
 * ends the grace at once (kill_at is an hour away), its duration is kept for
 * the job, and a second report of it (another node, a redelivery) changes
 * nothing.
 */
TY_TEST(a_checkpoint_committed_after_the_signal_sends_the_kill_before_kill_at)
{
	struct world w;
	struct fx *f;
	const struct proto_msg *c, *k;
	const char *cnode;

	borrowed_cluster(&w, no_min_runtime, ",'checkpoint':{'grace_seconds':3600}");
	f = w.f;
	reclaim(&w, &c, &cnode);
	CHECK_INT_EQ(dint(c, "grace_seconds"), 3600);
	FX_WAIT(f, T, "preempting", "SELECT state FROM jobs WHERE id = $1", fx_n(c->job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT data->>'grace_source' FROM job_events"
			  " WHERE job_id = $1 AND type = 'preempting'",
			  fx_n(c->job)),
		     "spec");
	/* three measured before (after the grace was chosen): the oldest goes */
	FX_Q(f, "UPDATE jobs SET checkpoint_durations_ms = '{1,2,3}' WHERE id = $1 RETURNING id",
	     fx_n(c->job));
	/* torn, or written before the signal: still waiting */
	fx_send(f, cnode, "checkpoint_written", c->job, 1,
		"{'path':'/ckpt/step-150','step':150,'valid':false,'status':'torn',"
		"'after_signal':true}");
	fx_send(f, cnode, "checkpoint_written", c->job, 1,
		"{'path':'/ckpt/step-160','step':160,'valid':true,'after_signal':false}");
	FX_WAIT(f, T, "160", "SELECT last_checkpoint_step FROM attempts WHERE job_id = $1",
		fx_n(c->job));
	CHECK_INT_EQ(fx_count(f, cnode, "kill", c->job, 0), 0);
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT checkpoint_durations_ms::text FROM jobs WHERE id = $1", fx_n(c->job)),
	    "{1,2,3}");
	/* committed after the signal: the kill now */
	fx_send(f, cnode, "checkpoint_written", c->job, 1,
		"{'path':'/ckpt/step-200','step':200,'valid':true,'after_signal':true}");
	k = fx_recv(f, cnode, "kill", c->job, T);
	REQUIRE(k != NULL);
	CHECK_STR_EQ(dstr(k, "reason"), "preempted");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (kill_at > now() + interval '3000 seconds')::text || ' ' ||"
			  " (checkpoint_committed_at >= checkpoint_signal_at)::text"
			  " FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(c->job)),
		     "true true");
	/* the duration kept is the attempt's signal → committed, the last three kept */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT j.checkpoint_durations_ms[1:2]::text || ' ' ||"
			  " cardinality(j.checkpoint_durations_ms)::text || ' ' ||"
			  " (abs(j.checkpoint_durations_ms[3] - 1000 * extract(epoch FROM"
			  "  t.checkpoint_committed_at - t.checkpoint_signal_at)) <= 1)::text"
			  " FROM jobs j JOIN attempts t ON t.job_id = j.id AND t.attempt = 1"
			  " WHERE j.id = $1",
			  fx_n(c->job)),
		     "{2,3} 3 true");
	FX_WAIT(f, T, "1",
		"SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'stopping'"
		" AND message LIKE 'checkpoint step 200 of attempt 1 committed % s after the "
		"signal: kill sent to 1 node'",
		fx_n(c->job));
	/* the same checkpoint again: measured once, no second kill */
	fx_send(f, cnode, "checkpoint_written", c->job, 1,
		"{'path':'/ckpt/step-200','step':200,'valid':true,'after_signal':true}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT checkpoint_durations_ms[1:2]::text FROM jobs WHERE id = $1",
			  fx_n(c->job)),
		     "{2,3}");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'stopping'",
			  fx_n(c->job)),
		     "1");
	/* the node reports: requeued as before */
	fx_exit(f, cnode, victim_launch(&w, c), -1, "preempted", "preempted: checkpoint verified");
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(c->job));
	fx_sched_stop(f, 0);
}

/*
 * The grace follows the job's measured checkpoint time: the longest of the
 * last three × 1.5 (--grace-margin-percent 50), within the class's bounds,
 * whatever the spec's grace_seconds.
 */
TY_TEST(the_grace_window_follows_the_measured_checkpoint_time)
{
	static const struct {
		const char *durations, *bounds;
		int spec, grace;
		const char *how; /* NULL: the spec's grace */
	} rows[] = {
	    {"{42000}", "--grace-min-seconds=normal=30", 5, 63, "measured 42.0 s, grace 63 s"},
	    {"{2000,42000,1000}", "--grace-min-seconds=normal=30", 5, 63,
	     "measured 42.0 s, grace 63 s"},
	    {"{1000}", "--grace-min-seconds=normal=30", 5, 30, "measured 1.0 s, grace 30 s"},
	    {"{42000}", "--grace-max-seconds=normal=50", 5, 50, "measured 42.0 s, grace 50 s"},
	    /* grace_seconds 0: no checkpoint wanted, whatever was measured */
	    {"{42000}", "--grace-min-seconds=normal=30", 0, 0, NULL},
	};

	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
		const char *args[] = {"--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0",
				      rows[r].bounds, NULL};
		struct world w;
		struct fx *f;
		const struct proto_msg *c;
		const char *cnode;

		ty_test_context("%s %s", rows[r].durations, rows[r].bounds);
		borrowed_cluster(&w, args,
				 ty_test_strf(",'checkpoint':{'grace_seconds':%d}", rows[r].spec));
		f = w.f;
		/* as measured by earlier preemptions of each */
		FX_Q(f,
		     "UPDATE jobs SET checkpoint_durations_ms = $1::integer[] WHERE id IN ($2, $3)"
		     " RETURNING id",
		     rows[r].durations, fx_n(w.a1), fx_n(w.a2));
		reclaim(&w, &c, &cnode);
		CHECK_INT_EQ(dint(c, "grace_seconds"), rows[r].grace);
		FX_WAIT(f, T, "1",
			"SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'preempting'",
			fx_n(c->job));
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT substring(message from ' killed in .*') || ' ' ||"
				  " (data->>'grace_source') FROM job_events"
				  " WHERE job_id = $1 AND type = 'preempting'",
				  fx_n(c->job)),
			     rows[r].how ? ty_test_strf(" killed in %d s (%s) measured",
							rows[r].grace, rows[r].how)
					 : ty_test_strf(" killed in %d s spec", rows[r].grace));
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT round(extract(epoch FROM kill_at - checkpoint_signal_at))"
				  " FROM attempts WHERE job_id = $1 AND attempt = 1",
				  fx_n(c->job)),
			     fx_n(rows[r].grace));
		fx_sched_stop(f, 0);
	}
	ty_test_context(NULL);
}

/*
 * A team reclaiming its nominal quota waits the cohort's reclaim delay, not
 * the 600 s minimum runtime of class normal (the default): with c1's delay
 * 0 the borrowing gang is preempted at once.
 */
TY_TEST(nominal_reclaim_waits_the_cohort_delay_not_the_class_minimum)
{
	static const char *const args[] = {"--cohort-reclaim-delay-seconds=c1=0,other=600", NULL};
	struct world w;
	const struct proto_msg *c;
	const char *cnode;

	borrowed_cluster(&w, args, "");
	reclaim(&w, &c, &cnode);
	CHECK(c->job == w.a1 || c->job == w.a2);
	/* a cohort no team is in is logged */
	CHECK(strstr(fx_sched_log(w.f, 0), "no team is in cohort 'other'") != NULL);
	fx_sched_stop(w.f, 0);
}

TY_TEST(min_runtime_protects_a_young_gang)
{
	struct world w;
	struct fx *f;
	const char *cnode;
	long long b1;

	/*
	 * the default: normal jobs run 600 s before they may be preempted, and
	 * a borrowing one 60 s (the reclaim delay) before reclaim takes it
	 */
	borrowed_cluster(&w, NULL, "");
	f = w.f;
	b1 = fx_submit_to(f, w.b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "1", "SELECT queue_position FROM jobs WHERE id = $1", fx_n(b1));
	CHECK(FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(b1)) != NULL);
	CHECK(recv_either(f, "checkpoint", 1500, &cnode) == NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(state, ' ') FROM jobs WHERE id IN ($1, $2)",
			  fx_n(w.a1), fx_n(w.a2)),
		     "running running");
	fx_sched_stop(f, 0);
}

TY_TEST(queue_positions_and_reasons_are_written_only_when_they_change)
{
	struct fx *f = fx_start();
	const char *x1, *x2, *x3, *reason;
	long long j1, j2, j3, blocker;

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	blocker = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	REQUIRE(fx_recv(f, "n1", "launch", blocker, T) != NULL);
	j1 = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	j2 = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
	/* 2 nodes of a 1-node cluster: queued anyway, "cannot run" (written once too) */
	j3 = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1},"
			  "'queue_if_unschedulable':true");
	FX_WAIT(f, T, "1 2 3",
		"SELECT string_agg(queue_position::text, ' ' ORDER BY id) FROM jobs"
		" WHERE id IN ($1, $2, $3)",
		fx_n(j1), fx_n(j2), fx_n(j3));
	reason = FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(j3));
	REQUIRE(reason != NULL);
	ty_test_note("job %lld waits: %s", j3, reason);
	CHECK(FX_Q(f, "SELECT reserved_until FROM jobs WHERE id = $1", fx_n(j1)) != NULL);
	/* several cycles later, the rows were not written again (same row versions) */
	x1 = FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(j1));
	x2 = FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(j2));
	x3 = FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(j3));
	fx_poll(f, 1200);
	CHECK_STR_EQ(FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(j1)), x1);
	CHECK_STR_EQ(FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(j2)), x2);
	CHECK_STR_EQ(FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(j3)), x3);
	/* a job cancelled through the API leaves the queue: the others move up */
	fx_cancel(f, j1);
	FX_WAIT(f, T, "1 2",
		"SELECT string_agg(queue_position::text, ' ' ORDER BY id) FROM jobs"
		" WHERE id IN ($1, $2)",
		fx_n(j2), fx_n(j3));
	FX_WAIT(f, T, "- -",
		"SELECT coalesce(queue_position::text, '-') || ' ' || coalesce(pending_reason, '-')"
		" FROM jobs WHERE id = $1",
		fx_n(j1));
	fx_sched_stop(f, 0);
}

/*
 * Beyond position 1,000 a row is refreshed about once a minute, not each
 * time its text or position changes: a new head job would otherwise
 * rewrite every far-back "reserved for job N" row in one cycle.
 */
TY_TEST(far_back_rows_are_not_rewritten_for_a_new_head_job)
{
	struct fx *f = fx_start();
	const char *xnear, *xfar;
	long long a, b, near = 0, far = 0, first = 0;

	fx_node(f, "n1", 8);
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	REQUIRE(fx_recv(f, "n1", "launch",
			fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}"), T) != NULL);
	a = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':8}");
	b = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':8}");
	/* 1,010 one-GPU jobs that fit now but would delay the head job */
	for (int i = 0; i < 1010; i++) {
		long long id = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");

		if (i == 0)
			first = id;
		if (i == 7)
			near = id; /* position 10 */
		far = id;	   /* position 1012 */
	}
	FX_WAIT(f, 60000, "1012", "SELECT queue_position FROM jobs WHERE id = $1", fx_n(far));
	FX_WAIT(f, T, ty_test_strf("reserved for job %lld", a),
		"SELECT substring(pending_reason from '^reserved for job [0-9]+') FROM jobs"
		" WHERE id = $1",
		fx_n(far));
	ty_test_note("job %lld waits: %s", far,
		     FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(far)));
	xnear = FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(near));
	xfar = FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(far));

	/* job b becomes the head: the near row names it, the far one is left */
	fx_cancel(f, a);
	FX_WAIT(f, T, ty_test_strf("reserved for job %lld", b),
		"SELECT substring(pending_reason from '^reserved for job [0-9]+') FROM jobs"
		" WHERE id = $1",
		fx_n(near));
	CHECK_STR_EQ(FX_Q(f, "SELECT queue_position FROM jobs WHERE id = $1", fx_n(near)), "9");
	fx_poll(f, 1000);
	CHECK_STR_EQ(FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(far)), xfar);
	CHECK_STR_EQ(FX_Q(f, "SELECT queue_position FROM jobs WHERE id = $1", fx_n(far)), "1012");
	CHECK(strcmp(FX_Q(f, "SELECT xmin::text FROM jobs WHERE id = $1", fx_n(near)), xnear));

	/* once among the first 1,000 it is written again, with today's text */
	for (long long id = first; id < first + 12; id++)
		fx_cancel(f, id);
	FX_WAIT(f, T, "999", "SELECT queue_position FROM jobs WHERE id = $1", fx_n(far));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT substring(pending_reason from '^reserved for job [0-9]+')"
			  " FROM jobs WHERE id = $1",
			  fx_n(far)),
		     ty_test_strf("reserved for job %lld", b));
	fx_sched_stop(f, 0);
}

TY_TEST(usage_decays_by_the_half_life_and_grows_with_use)
{
	static const char *const args[] = {"--usage-half-life-hours=1", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l;
	double u;
	long long job;

	fx_node(f, "n1", 2);
	/* as if the team had used 1000 GPU-seconds, one half-life ago */
	FX_Q(f, "INSERT INTO team_usage (team_id, decayed_gpu_seconds, updated_at)"
		" SELECT id, 1000, now() - interval '1 hour' FROM teams");
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	FX_WAIT(f, T, "t", "SELECT updated_at > now() - interval '1 minute' FROM team_usage");
	u = strtod(FX_Q(f, "SELECT decayed_gpu_seconds FROM team_usage"), NULL);
	ty_test_note("decayed usage after one half-life: %.3f", u);
	CHECK(u > 499 && u < 501);
	CHECK(strtod(FX_Q(f, "SELECT fair_share FROM team_usage"), NULL) == 0.5);
	/* a 2-GPU job held for 2 s or more adds at least 4 GPU-seconds */
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(l != NULL);
	fx_run(f, "n1", l);
	fx_poll(f, 2000);
	fx_exit(f, "n1", l, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	FX_WAIT(f, T, "0", "SELECT gpus_in_use FROM team_usage");
	u = strtod(FX_Q(f, "SELECT decayed_gpu_seconds FROM team_usage"), NULL);
	ty_test_note("decayed usage after a 2-GPU job: %.3f", u);
	CHECK(u > 502 && u < 520);
	fx_sched_stop(f, 0);
}
