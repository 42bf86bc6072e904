/*
 * Money budgets and expedited requeue in the daemon (docs/scheduling.md,
 * "Budgets", "Expedited requeue"), the test playing the executors: a job
 * that could exceed its team's budget waits with a reason naming it while
 * the team's running job keeps running; the 80 % alert is queued once; a
 * budget of 0 lets nothing start and null lifts it; an attempt the
 * infrastructure ended goes ahead of its team's other pending job.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

/* One unit per GPU-second on every on-demand node: spend is easy to predict. */
#define RATES "{\"on-demand\": {\"default\": 3600}}"

static const char *rates_arg(void)
{
	const char *path = ty_test_strf("%s/rates-%d.json", ty_test_workdir(), rand());
	FILE *fp = fopen(path, "w");

	REQUIRE(fp != NULL);
	fputs(RATES, fp);
	REQUIRE(fclose(fp) == 0);
	return ty_test_strf("--rates-file=%s", path);
}

static const char *reason_of(struct fx *f, long long job)
{
	return FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(job));
}

TY_TEST(budget_stops_admission_alerts_once_and_never_stops_running_jobs)
{
	struct fx *f = fx_start();
	const char *args[] = {rates_arg(), NULL};
	const struct proto_msg *l;
	const char *team;
	long long a, b, c;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	team = fx_team(f, "money", 4, -1, NULL);
	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team),
		    "{'budget':{'amount':10,'period':'month'}}", 200);
	fx_api_body(f, "POST", "/v1/webhooks",
		    ty_test_strf("{'team':'%s','url':'http://127.0.0.1:9/hook',"
				 "'events':['team.budget'],'secret':'0123456789abcdef0123'}",
				 team),
		    201);

	/* 1 GPU for at most 5 s costs at most 5 of 10: it starts */
	a = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':1},"
				  "'max_runtime_seconds':5");
	REQUIRE((l = fx_recv(f, "n1", "launch", a, T)) != NULL);
	fx_run(f, "n1", l);
	/* one that could cost 3600 waits, whatever is free, and says why */
	b = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':1},"
				  "'max_runtime_seconds':3600");
	FX_WAIT(f, T, "t", "SELECT pending_reason LIKE $2 FROM jobs WHERE id = $1", fx_n(b),
		ty_test_strf("team %s budget 10.00 per month: %% spent, job needs up to 3600.00",
			     team));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(b)), "pending");

	/* a accrues one unit a second: at 8 the alert is queued, once */
	FX_WAIT(f, 3 * T, "t",
		"SELECT budget_alerted_at IS NOT NULL FROM teams WHERE name = $1", team);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) || ' ' || min(d.payload->'budget'->>'period')"
			  " FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id"
			  " JOIN teams t ON t.id = w.team_id"
			  " WHERE t.name = $1 AND d.event = 'team.budget'",
			  team),
		     "1 month");
	/* past the whole budget: a still runs, nothing more is queued */
	FX_WAIT(f, 3 * T, "t",
		"SELECT (ty_team_budget_json(t)->>'spent')::float8 > 12 FROM teams t"
		" WHERE name = $1",
		team);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(a)), "running");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM webhook_deliveries d JOIN webhooks w"
			  " ON w.id = d.webhook_id JOIN teams t ON t.id = w.team_id"
			  " WHERE t.name = $1 AND d.event = 'team.budget'",
			  team),
		     "1");
	CHECK(strstr(reason_of(f, b), " spent, job needs up to 3600.00") != NULL);
	/* a budget of 0: nothing may start, however cheap */
	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team),
		    "{'budget':{'amount':0,'period':'day'}}", 200);
	c = fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':1},"
				  "'max_runtime_seconds':1");
	FX_WAIT(f, T, ty_test_strf("team %s budget 0.00 per day: nothing may start", team),
		"SELECT pending_reason FROM jobs WHERE id = $1", fx_n(c));

	/* null lifts it: both start */
	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team), "{'budget':null}", 200);
	FX_WAIT(f, T, "2",
		"SELECT count(*) FROM allocations WHERE job_id IN ($1, $2)", fx_n(b), fx_n(c));
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(a)), "running");
	fx_sched_stop(f, 0);
}

/*
 * n1..n4, 4 GPUs each. A (2 × 4) runs on n1 and n2, a filler on n3; B
 * (2 × 4, priority 5) waits. A's attempt fails with a hardware fault on
 * n1, which it must avoid from now on: n1, n2 and n4 are free. In the
 * usual order B (higher priority) would take n1 and n2 and leave A
 * waiting; expedited, A goes first, back onto n2 with n4, and B waits.
 */
TY_TEST(expedited_requeue_goes_ahead_of_its_teams_pending_job)
{
	struct fx *f = fx_start();
	const char *args[] = {"--retry-backoff-seconds=0", NULL};
	const struct proto_msg *la, *la2, *lf;
	const char *an, *bn, *fnode;
	long long a, b, fill;

	for (int i = 1; i <= 4; i++)
		fx_node(f, ty_test_strf("n%d", i), 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "4", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	a = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4}");
	FX_WAIT(f, T, "n1,n2",
		"SELECT string_agg(node_id, ',' ORDER BY node_id) FROM allocations"
		" WHERE job_id = $1",
		fx_n(a));
	fill = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	FX_WAIT(f, T, "n3", "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(fill));
	REQUIRE((lf = fx_recv(f, "n3", "launch", fill, T)) != NULL);
	fx_run(f, "n3", lf);
	b = fx_submit(f, ",'priority':5,'resources':{'nodes':2,'gpus_per_node':4}");
	FX_WAIT(f, T, "t", "SELECT pending_reason IS NOT NULL FROM jobs WHERE id = $1", fx_n(b));
	/* the rest of n4 is not enough for B: it waits */
	REQUIRE((la = fx_recv(f, "n1", "launch", a, T)) != NULL);
	REQUIRE((la2 = fx_recv(f, "n2", "launch", a, T)) != NULL);
	fx_run(f, "n1", la);
	fx_run(f, "n2", la2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(a));

	fx_exit(f, "n1", la, 1, "hardware", "rank 0: Xid 79");
	FX_WAIT(f, T, "t",
		"SELECT data->>'expedited' = 'true' AND message LIKE"
		" '%; expedited: first in its team''s order; node n2 held for it for 60s'"
		" FROM job_events"
		" WHERE job_id = $1 AND type = 'requeued'",
		fx_n(a));
	/* the rest of the gang is killed; its node reports the exit */
	REQUIRE(fx_recv(f, "n2", "kill", a, T) != NULL);
	fx_exit(f, "n2", la2, 137, "", "killed");
	FX_WAIT(f, T, "2",
		"SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2", fx_n(a));
	an = FX_Q(f,
		  "SELECT string_agg(node_id, ',' ORDER BY node_id) FROM allocations"
		  " WHERE job_id = $1 AND attempt = 2",
		  fx_n(a));
	CHECK_STR_EQ(an, "n2,n4");
	bn = FX_Q(f, "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(b));
	CHECK_STR_EQ(bn, "0");
	fnode = FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(b));
	CHECK_STR_EQ(fnode, "pending");
	fx_sched_stop(f, 0);
}
