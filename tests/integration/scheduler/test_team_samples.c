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

TY_TEST(samples_every_interval_with_the_published_numbers_and_preemptions)
{
	static const char *const args[] = {
	    "--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0", "--team-sample-seconds=1",
	    NULL};
	struct fx *f = fx_start();
	const char *a = fx_team(f, "a", 2, -1, "c1"), *b = fx_team(f, "b", 2, -1, "c1");
	const char *ida = team_id(f, a), *idb = team_id(f, b), *n1, *n2, *cn, *doc;
	const struct proto_msg *l1, *l2, *c;
	long long a1, a2, b1;
	json_t *root, *totals;

	old_samples(f);
	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", args);
	/* the 40-day-old samples went at the first cycle, the 30-day-old ones stay */
	FX_WAIT(f, T, "0",
		"SELECT count(*) FROM team_samples WHERE at < now() - interval '35 days'");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_samples"
			     " WHERE at < now() - interval '29 days'"),
		     FX_Q(f, "SELECT count(*) FROM teams"));

	/* team a fills both nodes, borrowing b's idle nominal GPUs */
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	a1 = fx_submit_to(f, a, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l1 = recv_either(f, "launch", T, &n1);
	REQUIRE(l1 != NULL && l1->job == a1);
	fx_run(f, n1, l1);
	a2 = fx_submit_to(f, a, ",'resources':{'nodes':1,'gpus_per_node':2}");
	l2 = recv_either(f, "launch", T, &n2);
	REQUIRE(l2 != NULL && l2->job == a2);
	fx_run(f, n2, l2);

	/* what team_usage shows, sampled */
	FX_WAIT(f, T, "t",
		"SELECT count(*) > 0 FROM team_samples WHERE team_id = $1 AND gpus_in_use = 4"
		" AND gpus_borrowed = 2 AND gpus_lent = 0 AND pending_jobs = 0"
		" AND decayed_gpu_seconds > 0 AND fair_share < 1",
		ida);
	FX_WAIT(f, T, "t",
		"SELECT count(*) > 0 FROM team_samples WHERE team_id = $1 AND gpus_in_use = 0"
		" AND gpus_borrowed = 0 AND gpus_lent = 2 AND decayed_gpu_seconds = 0"
		" AND fair_share = 1 AND at > now() - interval '1 day'",
		idb);
	/* every sampling has a row for every team, and none comes sooner than the interval */
	FX_WAIT(f, T, "t",
		"SELECT count(*) >= 3 FROM team_samples WHERE team_id = $1"
		" AND at > now() - interval '1 day'",
		ida);
	CHECK_STR_EQ(FX_Q(f, "SELECT bool_and(n = (SELECT count(*) FROM teams)) FROM"
			     " (SELECT count(*) AS n FROM team_samples GROUP BY at) x"),
		     "t");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT min(d) >= interval '1 second' FROM (SELECT at - lag(at)"
			  " OVER (ORDER BY at) AS d FROM team_samples WHERE team_id = $1) x",
			  ida),
		     "t");
	CHECK_STR_EQ(FX_Q(f, "SELECT coalesce(sum(preemptions_suffered + preemptions_caused), 0)"
			     " FROM team_samples"),
		     "0");

	/* b reclaims its nominal GPUs: one of a's gangs is preempted for b's job */
	b1 = fx_submit_to(f, b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	c = recv_either(f, "checkpoint", T, &cn);
	REQUIRE(c != NULL);
	CHECK(c->job == a1 || c->job == a2);
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT preempted_for::text FROM attempts WHERE job_id = $1", fx_n(c->job)),
	    fx_n(b1));
	FX_WAIT(f, T, "1 0",
		"SELECT sum(preemptions_suffered) || ' ' || sum(preemptions_caused)"
		" FROM team_samples WHERE team_id = $1",
		ida);
	FX_WAIT(f, T, "0 1",
		"SELECT sum(preemptions_suffered) || ' ' || sum(preemptions_caused)"
		" FROM team_samples WHERE team_id = $1",
		idb);
	/* counted once, in one sample, whatever the samples after it */
	FX_WAIT(f, T, "t",
		"SELECT count(*) > 0 FROM team_samples WHERE team_id = $1 AND at >"
		" (SELECT at FROM team_samples WHERE team_id = $1 AND preemptions_caused = 1)",
		idb);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_samples WHERE preemptions_suffered > 0"),
		     "1");
	CHECK_STR_EQ(FX_Q(f, "SELECT sum(preemptions_suffered + preemptions_caused)"
			     " FROM team_samples"),
		     "2");

	/* the API's history says the same */
	doc = fx_api(f, "GET", ty_test_strf("/v1/teams/%s/history", b), 200);
	root = json_loads(doc, 0, NULL);
	REQUIRE(root != NULL);
	totals = json_object_get(root, "totals");
	CHECK_INT_EQ(json_integer_value(json_object_get(totals, "preemptions_caused")), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(totals, "preemptions_suffered")), 0);
	CHECK(json_array_size(json_object_get(root, "items")) >= 3);
	json_decref(root);
	fx_sched_stop(f, 0);
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
