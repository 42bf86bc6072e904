/*
 * Teams over time through the daemon (migration 0034, docs/scheduling.md
 * "Team history"): one sample per team per --team-sample-seconds with the
 * numbers the cycle publishes to team_usage, a reclaim preemption counted
 * as suffered by the victim's team and caused by the reclaiming one, the
 * retention, and sampling off.
 */
#include "fixture.h"
#include "ty_test.h"
#include "ty_time.h"

#include <jansson.h>
#include <string.h>

#define T 15000

/* A team's id (scratch). */
static const char *team_id(struct fx *f, const char *team)
{
	const char *id = FX_Q(f, "SELECT id::text FROM teams WHERE name = $1", team);

	REQUIRE(id != NULL);
	return id;
}

/* The first message of type for any job on n1 or n2, waiting up to ms. */
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

/* Samples older than the retention (35 days by default) and one inside it, for every team. */
static void old_samples(struct fx *f)
{
	FX_Q(f, "INSERT INTO team_samples SELECT id, now() - interval '40 days', 0, 0, 0, 0, 1,"
		" 0, 0, 0 FROM teams");
	FX_Q(f, "INSERT INTO team_samples SELECT id, now() - interval '30 days', 0, 0, 0, 0, 1,"
		" 0, 0, 0 FROM teams");
}

/* Two 2-GPU nodes; team a (of cohort c1) fills both, borrowing team b's idle nominal GPUs. */
struct world {
	struct fx *f;
	const char *a, *b, *ida, *idb;
	long long a1, a2;
};

static void borrowed(struct world *w)
{
	struct fx *f = w->f;
	const struct proto_msg *l1, *l2;
	const char *n1, *n2;

	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	w->a1 = fx_submit_to(f, w->a, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l1 = recv_either(f, "launch", T, &n1);
	REQUIRE(l1 != NULL && l1->job == w->a1);
	fx_run(f, n1, l1);
	w->a2 = fx_submit_to(f, w->a, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l2 = recv_either(f, "launch", T, &n2);
	REQUIRE(l2 != NULL && l2->job == w->a2);
	fx_run(f, n2, l2);
	FX_WAIT(f, T, "running running",
		"SELECT string_agg(state, ' ') FROM jobs WHERE id IN ($1, $2)", fx_n(w->a1),
		fx_n(w->a2));
}

static void world_start(struct world *w)
{
	struct fx *f = w->f = fx_start();

	w->a = fx_team(f, "a", 2, -1, "c1");
	w->b = fx_team(f, "b", 2, -1, "c1");
	w->ida = team_id(f, w->a);
	w->idb = team_id(f, w->b);
	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
}

/* b reclaims its nominal GPUs: one of a's gangs is preempted for b's job, which is returned. */
static long long reclaim(struct world *w)
{
	struct fx *f = w->f;
	long long b1 = fx_submit_to(f, w->b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	const struct proto_msg *c;
	const char *cn;

	c = recv_either(f, "checkpoint", T, &cn);
	REQUIRE(c != NULL);
	CHECK(c->job == w->a1 || c->job == w->a2);
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT preempted_for::text FROM attempts WHERE job_id = $1", fx_n(c->job)),
	    fx_n(b1));
	return b1;
}

/* What the samples of a and b sum to: one preemption, suffered by a and caused by b. */
static void one_preemption_counted(struct world *w)
{
	struct fx *f = w->f;

	FX_WAIT(f, T, "1 0",
		"SELECT sum(preemptions_suffered) || ' ' || sum(preemptions_caused)"
		" FROM team_samples WHERE team_id = $1",
		w->ida);
	FX_WAIT(f, T, "0 1",
		"SELECT sum(preemptions_suffered) || ' ' || sum(preemptions_caused)"
		" FROM team_samples WHERE team_id = $1",
		w->idb);
	/* counted once, in one sample, whatever the samples after it */
	FX_WAIT(f, T, "t",
		"SELECT count(*) > 0 FROM team_samples WHERE team_id = $1 AND at >"
		" (SELECT at FROM team_samples WHERE team_id = $1 AND preemptions_caused = 1)",
		w->idb);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_samples WHERE preemptions_suffered > 0"),
		     "1");
	CHECK_STR_EQ(FX_Q(f, "SELECT sum(preemptions_suffered + preemptions_caused)"
			     " FROM team_samples"),
		     "2");
	/* every sampling has a row for every team: one writer at a time */
	CHECK_STR_EQ(FX_Q(f, "SELECT bool_and(n = (SELECT count(*) FROM teams)) FROM"
			     " (SELECT count(*) AS n FROM team_samples GROUP BY at) x"),
		     "t");
}

TY_TEST(samples_every_interval_with_the_published_numbers_and_preemptions)
{
	static const char *const args[] = {
	    "--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0", "--team-sample-seconds=1",
	    NULL};
	struct world w;
	struct fx *f;
	const char *doc;
	json_t *root, *totals;

	world_start(&w);
	f = w.f;
	old_samples(f);
	fx_sched_start(f, "s1", args);
	/* the 40-day-old samples went at the first cycle, the 30-day-old ones stay */
	FX_WAIT(f, T, "0",
		"SELECT count(*) FROM team_samples WHERE at < now() - interval '35 days'");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_samples"
			     " WHERE at < now() - interval '29 days'"),
		     FX_Q(f, "SELECT count(*) FROM teams"));
	borrowed(&w);

	/* what team_usage shows, sampled */
	FX_WAIT(f, T, "t",
		"SELECT count(*) > 0 FROM team_samples WHERE team_id = $1 AND gpus_in_use = 4"
		" AND gpus_borrowed = 2 AND gpus_lent = 0 AND pending_jobs = 0"
		" AND decayed_gpu_seconds > 0 AND fair_share < 1",
		w.ida);
	FX_WAIT(f, T, "t",
		"SELECT count(*) > 0 FROM team_samples WHERE team_id = $1 AND gpus_in_use = 0"
		" AND gpus_borrowed = 0 AND gpus_lent = 2 AND decayed_gpu_seconds = 0"
		" AND fair_share = 1 AND at > now() - interval '1 day'",
		w.idb);
	/* none comes sooner than the interval */
	FX_WAIT(f, T, "t",
		"SELECT count(*) >= 3 FROM team_samples WHERE team_id = $1"
		" AND at > now() - interval '1 day'",
		w.ida);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT min(d) >= interval '1 second' FROM (SELECT at - lag(at)"
			  " OVER (ORDER BY at) AS d FROM team_samples WHERE team_id = $1) x",
			  w.ida),
		     "t");
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(sum(preemptions_suffered + preemptions_caused), 0)"
			     " FROM team_samples"),
		     "0");

	reclaim(&w);
	one_preemption_counted(&w);

	/* the API's history says the same */
	doc = fx_api(f, "GET", ty_test_strf("/v1/teams/%s/history", w.b), 200);
	root = json_loads(doc, 0, NULL);
	REQUIRE(root != NULL);
	totals = json_object_get(root, "totals");
	CHECK_INT_EQ(json_integer_value(json_object_get(totals, "preemptions_caused")), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(totals, "preemptions_suffered")), 0);
	CHECK(json_array_size(json_object_get(root, "items")) >= 3);
	json_decref(root);
	fx_sched_stop(f, 0);
}

/*
 * The leader dies right after a preemption, sampled or not: the standby
 * that takes over counts it once all the same (the count is read from the
 * attempts), and the standby wrote nothing while it stood by.
 */
TY_TEST(a_leader_change_neither_loses_nor_repeats_a_preemption)
{
	static const char *const args[] = {
	    "--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0", "--team-sample-seconds=1",
	    NULL};
	struct world w;
	struct fx *f;
	int s1;

	world_start(&w);
	f = w.f;
	s1 = fx_sched_start(f, "sched-a", args);
	FX_WAIT(f, T, "1 sched-a", "SELECT epoch || ' ' || holder FROM leader");
	fx_sched_start(f, "sched-b", args);
	borrowed(&w);
	reclaim(&w);
	fx_sched_kill(f, s1);
	FX_WAIT(f, T, "2 sched-b", "SELECT epoch || ' ' || holder FROM leader");
	one_preemption_counted(&w);
	fx_sched_stop(f, 1);
}

TY_TEST(no_samples_when_off_yet_old_ones_are_pruned)
{
	static const char *const args[] = {"--team-sample-seconds=0",
					   "--team-sample-retention-days=7", NULL};
	struct fx *f = fx_start();

	old_samples(f);
	FX_Q(f, "INSERT INTO team_samples SELECT id, now() - interval '3 days', 0, 0, 0, 0, 1,"
		" 0, 0, 0 FROM teams");
	fx_sched_start(f, "s1", args);
	/* the prune runs in the transaction that would have written the first sample */
	FX_WAIT(f, T, "0",
		"SELECT count(*) FROM team_samples WHERE at < now() - interval '7 days'");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_samples"),
		     FX_Q(f, "SELECT count(*) FROM teams"));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_samples"
			     " WHERE at > now() - interval '1 day'"),
		     "0");
	fx_sched_stop(f, 0);
}

/* A spot interruption is suffered by the gang's team and caused by nobody. */
TY_TEST(a_spot_interruption_is_suffered_with_no_causer)
{
	static const char *const args[] = {"--team-sample-seconds=1", NULL};
	struct fx *f = fx_start();
	const char *t = fx_team(f, "spot", 2, -1, NULL), *id = team_id(f, t), *n;
	const struct proto_msg *l;
	long long job;

	fx_node_pool(f, "n1", 2, "spot");
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit_to(f, t,
			   ",'resources':{'nodes':1,'gpus_per_node':2},'spot':{'allowed':true},"
			   "'checkpoint':{'grace_seconds':600}");
	l = recv_either(f, "launch", T, &n);
	REQUIRE(l != NULL && l->job == job);
	fx_run(f, n, l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_send(f, "n1", "preempt_notice", 0, 0,
		ty_test_strf("{'deadline':%lld,'provider':'aws','action':'terminate',"
			     "'detail':'instance-action terminate'}",
			     (long long)ty_wall_ms() + 120000));
	REQUIRE(fx_recv(f, "n1", "checkpoint", job, T) != NULL);
	FX_WAIT(f, T, "1", "SELECT sum(preemptions_suffered) FROM team_samples WHERE team_id = $1",
		id);
	CHECK_STR_EQ(FX_Q(f, "SELECT sum(preemptions_caused) FROM team_samples"), "0");
	CHECK_STR_EQ(FX_Q(f, "SELECT sum(preemptions_suffered) FROM team_samples"), "1");
	fx_sched_stop(f, 0);
}
