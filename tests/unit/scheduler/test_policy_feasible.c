/*
 * What can never run (docs/scheduling.md, "Cannot run"): sched_cannot_run()
 * over a snapshot, with the texts the API's 422 unschedulable uses.
 */
#include "policy_fixture.h"

static const struct sched_pool_in *pools;
static int npools;

static const char *cannot(struct fx *f, int i)
{
	struct sched_feasible *fe = NULL;
	struct ty_err err = {0};

	REQUIRE(sched_feasible_new(&fe, &f->in, pools, npools, &err) == 0);
	if (!sched_cannot_run(f->buf, sizeof(f->buf), fe, &f->in, i))
		snprintf(f->buf, sizeof(f->buf), "(can run)");
	sched_feasible_free(fe);
	return f->buf;
}

TY_TEST(no_node_no_verdict)
{
	struct fx f;
	int a;

	fx_init(&f);
	a = fx_team(&f, "a", 4, -1, -1, NULL);
	fx_pend(&f, 100, a, 9, 64, 0);
	CHECK_STR_EQ(cannot(&f, 0), "(can run)");
}

TY_TEST(shape_no_node_holds)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "node-b", 2, NULL, NULL, NULL);
	f.nodes[fx_node(&f, "node-a", 2, NULL, NULL, NULL)].schedulable =
	    false; /* draining: counts */
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	fx_pend(&f, 100, a, 1, 9, 0);
	fx_pend(&f, 101, a, 2, 2, 0);
	fx_pend(&f, 102, a, 3, 2, 0);
	fx_pend(&f, 103, a, 1, 2, 0)->cpus_per_node = 64;
	f.nodes[0].cpus = 32;
	f.nodes[1].cpus = 16;
	CHECK_STR_EQ(
	    cannot(&f, 0),
	    "cannot run: no node can hold 9 GPUs: the largest node has 2 (node-a, node-b)");
	CHECK_STR_EQ(cannot(&f, 1), "(can run)");
	CHECK_STR_EQ(cannot(&f, 2), "cannot run: the job needs 3 nodes of 2 GPUs, 0 CPUs and 0 "
				    "MiB: at most 2 exist (node-a, node-b)");
	CHECK_STR_EQ(cannot(&f, 3), "cannot run: no node with 2 GPUs can hold 64 CPUs: the most "
				    "such a node has is 32 (node-b)");
}

TY_TEST(more_than_the_team_can_ever_get)
{
	struct fx f;
	int ml, b, c, d;
	static const char *const ids[] = {"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"};

	fx_init(&f);
	for (int i = 0; i < 8; i++)
		fx_node(&f, ids[i], 8, NULL, NULL, NULL);
	ml = fx_team(&f, "ml", 4, -1, -1, NULL);
	b = fx_team(&f, "b", 4, -1, -1, "co");
	c = fx_team(&f, "c", 8, -1, 2, "co");
	d = fx_team(&f, "d", 4, 1, -1, "co");
	fx_pend(&f, 100, ml, 1, 6, 0);
	fx_pend(&f, 101, b, 2, 5, 0); /* 4 + min(8, 2) + 4 = 10 */
	fx_pend(&f, 102, b, 11, 1, 0);
	fx_pend(&f, 103, d, 1, 6, 0); /* borrowing limit 1 */
	(void)c;
	CHECK_STR_EQ(cannot(&f, 0), "cannot run: team 'ml' can get at most 4 GPUs (nominal 4, no "
				    "borrowing: no cohort), the job needs 6");
	CHECK_STR_EQ(cannot(&f, 1), "(can run)");
	CHECK_STR_EQ(cannot(&f, 2), "cannot run: team 'b' can get at most 10 GPUs (nominal 4, + 6 "
				    "its cohort can lend at most), the job needs 11");
	CHECK_STR_EQ(cannot(&f, 3), "cannot run: team 'd' can get at most 5 GPUs (nominal 4, + "
				    "borrowing limit 1), the job needs 6");
}

TY_TEST(declared_pools_count_like_nodes)
{
	static const struct sched_pool_in big[] = {{"big", 16, 0, 0, 2}};
	struct fx f;
	int a;

	fx_init(&f);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	fx_pend(&f, 100, a, 2, 16, 0);
	fx_pend(&f, 101, a, 3, 16, 0);
	pools = big;
	npools = 1;
	/* a pool alone, no node registered yet: it decides */
	CHECK_STR_EQ(cannot(&f, 0), "(can run)");
	CHECK_STR_EQ(cannot(&f, 1), "cannot run: the job needs 3 nodes of 16 GPUs, 0 CPUs and 0 "
				    "MiB: at most 2 exist (pool big)");
	fx_node(&f, "n1", 16, NULL, NULL, NULL);
	CHECK_STR_EQ(cannot(&f, 1), "(can run)");
	pools = NULL;
	npools = 0;
}
