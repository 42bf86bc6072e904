/*
 * What-if (scheduler/core/what_if.c): a job's estimate without submitting
 * it, and its alternatives; docs/scheduling.md, "What-if".
 */
#include "policy_fixture.h"

static struct sched_pending_in asked(int team, int nodes, int gpn)
{
	struct sched_pending_in p = {0};

	p.job = 1; /* replaced by SCHED_WHAT_IF_JOB */
	p.team = team;
	p.cls = SCHED_CLASS_NORMAL;
	p.nodes = nodes;
	p.gpus_per_node = gpn;
	p.max_runtime_s = 3600;
	p.max_cost = 100;
	return p;
}

static const struct sched_what_if *find(const struct sched_what_if *v, int n,
					enum sched_what_if_change c, int nodes)
{
	for (int k = 0; k < n; k++)
		if (v[k].change == c && (nodes < 0 || v[k].job.nodes == nodes))
			return &v[k];
	return NULL;
}

TY_TEST(variants_offer_fewer_nodes_spot_and_looser_topology)
{
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct sched_pending_in p = asked(0, 16, 8);
	int n;

	p.spot = SCHED_SPOT_NEVER;
	p.required = SCHED_TOPO_BLOCK;
	n = sched_what_if_variants(v, &p);
	CHECK_INT_EQ(n, 8);
	CHECK_INT_EQ(v[0].change, SCHED_WI_AS_ASKED);
	CHECK_INT_EQ(v[0].job.nodes, 16);
	REQUIRE(find(v, n, SCHED_WI_NODES, 8) != NULL);
	REQUIRE(find(v, n, SCHED_WI_NODES, 4) != NULL);
	REQUIRE(find(v, n, SCHED_WI_NODES, 1) != NULL);
	/* a smaller gang costs less at most */
	CHECK(find(v, n, SCHED_WI_NODES, 4)->job.max_cost == 25);
	CHECK_INT_EQ(find(v, n, SCHED_WI_NODES, 8)->job.required, SCHED_TOPO_BLOCK);
	REQUIRE(find(v, n, SCHED_WI_SPOT, -1) != NULL);
	CHECK_INT_EQ(find(v, n, SCHED_WI_SPOT, -1)->job.spot, SCHED_SPOT_ANY);
	CHECK_INT_EQ(v[5].change, SCHED_WI_TOPOLOGY);
	CHECK_INT_EQ(v[5].job.required, SCHED_TOPO_RACK);
	CHECK_INT_EQ(v[6].job.required, SCHED_TOPO_ZONE);
	CHECK_INT_EQ(v[7].job.required, SCHED_TOPO_NONE);
	CHECK_INT_EQ(v[7].job.spot, SCHED_SPOT_NEVER);
}

TY_TEST(a_one_node_job_on_any_capacity_has_no_alternative)
{
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct sched_pending_in p = asked(0, 1, 8);

	CHECK_INT_EQ(sched_what_if_variants(v, &p), 1);
	p.nodes = 3; /* 3 / 2 = 1 and 3 / 4 = 0: one alternative, not two of the same */
	CHECK_INT_EQ(sched_what_if_variants(v, &p), 2);
	CHECK_INT_EQ(v[1].job.nodes, 1);
	p.nodes = 1;
	p.required = SCHED_TOPO_ZONE;
	CHECK_INT_EQ(sched_what_if_variants(v, &p), 2);
	CHECK_INT_EQ(v[1].job.required, SCHED_TOPO_NONE);
}

TY_TEST(a_smaller_shape_starts_now_where_the_asked_one_waits_for_an_end)
{
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct sched_pending_in p;
	struct ty_err err = {0};
	const struct sched_what_if *one;
	struct fx f;
	int a, n;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 24, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 1200); /* n1 frees in 20 min; n2 is idle */
	fx_pend(&f, 100, a, 1, 8, 0)->not_before_ms = NOW_MS + S(3600); /* in retry backoff */
	p = asked(a, 2, 8);
	n = sched_what_if_variants(v, &p);
	REQUIRE_INT_EQ(n, 2);
	REQUIRE_INT_EQ(sched_what_if_run(v, n, &f.in, NULL, NULL, &err), 0);
	/* as asked: both nodes whole, once 40 ends */
	CHECK_INT_EQ(v[0].est.kind, SCHED_EST_AT);
	CHECK(v[0].est.start_ms > NOW_MS);
	CHECK(!v[0].cannot_run);
	CHECK(strstr(v[0].reason, "waiting for") != NULL);
	CHECK_INT_EQ(v[0].est.start_ms, NOW_MS + S(1200));
	one = find(v, n, SCHED_WI_NODES, 1);
	REQUIRE(one != NULL);
	CHECK_INT_EQ(one->est.kind, SCHED_EST_NOW);
	CHECK_INT_EQ(one->est.start_ms, NOW_MS);
	/* the snapshot is as it was: the hypothetical job was never in it */
	CHECK_INT_EQ(f.in.npending, 1);
	CHECK_INT_EQ(f.in.pending[0].job, 100);
	fx_done(&f);
}

TY_TEST(the_asked_job_waits_for_the_end_it_needs)
{
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct sched_pending_in p;
	struct ty_err err = {0};
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 900);
	p = asked(a, 1, 8);
	REQUIRE_INT_EQ(sched_what_if_variants(v, &p), 1);
	REQUIRE_INT_EQ(sched_what_if_run(v, 1, &f.in, NULL, NULL, &err), 0);
	CHECK_INT_EQ(v[0].est.kind, SCHED_EST_AT);
	CHECK_INT_EQ(v[0].est.start_ms, NOW_MS + S(900));
	CHECK_INT_EQ(v[0].est.nwaits, 1);
	CHECK_INT_EQ(v[0].est.waits_for[0], 40);
	fx_done(&f);
}

TY_TEST(a_shape_no_node_holds_is_never_with_the_cannot_run_reason)
{
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct sched_pending_in p;
	struct sched_feasible *fe = NULL;
	struct ty_err err = {0};
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 2, NULL, NULL, NULL);
	fx_node(&f, "n2", 2, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	p = asked(a, 2, 9);
	REQUIRE_INT_EQ(sched_feasible_new(&fe, &f.in, NULL, 0, &err), 0);
	REQUIRE_INT_EQ(sched_what_if_variants(v, &p), 2);
	REQUIRE_INT_EQ(sched_what_if_run(v, 2, &f.in, fe, NULL, &err), 0);
	for (int k = 0; k < 2; k++) {
		CHECK_INT_EQ(v[k].est.kind, SCHED_EST_NEVER);
		CHECK(v[k].cannot_run);
		CHECK(strncmp(v[k].reason, "cannot run: ", 12) == 0);
	}
	sched_feasible_free(fe);
	fx_done(&f);
}

TY_TEST(spot_allowed_starts_on_an_idle_spot_node)
{
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct sched_pending_in p;
	struct ty_err err = {0};
	const struct sched_what_if *spot;
	struct fx f;
	int a, n;

	fx_init(&f);
	fx_node(&f, "od", 8, NULL, NULL, NULL);
	f.nodes[fx_node(&f, "sp", 8, NULL, NULL, NULL)].spot = true;
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_run(&f, 40, a, "od:0-7", 60, 600);
	p = asked(a, 1, 8);
	p.spot = SCHED_SPOT_NEVER;
	n = sched_what_if_variants(v, &p);
	REQUIRE_INT_EQ(n, 2);
	REQUIRE_INT_EQ(sched_what_if_run(v, n, &f.in, NULL, NULL, &err), 0);
	CHECK_INT_EQ(v[0].est.kind, SCHED_EST_AT);
	CHECK_INT_EQ(v[0].est.start_ms, NOW_MS + S(600));
	spot = find(v, n, SCHED_WI_SPOT, -1);
	REQUIRE(spot != NULL);
	CHECK_INT_EQ(spot->est.kind, SCHED_EST_NOW);
	fx_done(&f);
}
