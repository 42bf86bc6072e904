/*
 * The policy core's money budgets (a team's spend gates admission) and
 * expedited requeue (a job an infrastructure failure requeued goes first in
 * its class and rank): docs/scheduling.md, "Budgets" and "Expedited requeue".
 */
#include "policy_fixture.h"

static void budget(struct fx *f, int t, double amount, double spent)
{
	f->teams[t].has_budget = true;
	f->teams[t].budget = amount;
	f->teams[t].spent = spent;
	f->teams[t].budget_period = "month";
}

struct budget_case {
	const char *name;
	bool has;
	double amount, spent, cost; /* team a's budget and spend, job 100's max_cost */
	const char *placed;	    /* where job 100 starts, NULL = it waits */
	const char *reason;	    /* its reason when it waits */
};

static const struct budget_case budget_cases[] = {
    {"no budget: starts whatever it costs", false, 0, 5000, 240, "n1", NULL},
    {"fits the budget", true, 1000, 700, 240, "n1", NULL},
    {"exactly the budget still starts", true, 1000, 760, 240, "n1", NULL},
    {"would exceed it", true, 1000, 812.4, 240, NULL,
     "team a budget 1000.00 per month: 812.40 spent, job needs up to 240.00"},
    {"unknown cost starts while money is left", true, 1000, 999.99, 0, "n1", NULL},
    {"unknown cost waits once it is spent", true, 1000, 1000, 0, NULL,
     "team a budget 1000.00 per month: 1000.00 spent"},
    {"overspent by running jobs", true, 1000, 1200, 10, NULL,
     "team a budget 1000.00 per month: 1200.00 spent, job needs up to 10.00"},
    {"budget 0 lets nothing start", true, 0, 0, 0, NULL,
     "team a budget 0.00 per month: nothing may start"},
    {"budget 0, a costly job", true, 0, 0, 50, NULL,
     "team a budget 0.00 per month: nothing may start"},
};

TY_TEST(budget_gates_admission)
{
	for (size_t k = 0; k < sizeof(budget_cases) / sizeof(budget_cases[0]); k++) {
		const struct budget_case *bc = &budget_cases[k];
		struct fx f;
		int a, b, i;

		ty_test_context("%s", bc->name);
		fx_init(&f);
		fx_node(&f, "n1", 8, NULL, NULL, NULL);
		fx_node(&f, "n2", 8, NULL, NULL, NULL);
		a = fx_team(&f, "a", 16, -1, -1, NULL);
		b = fx_team(&f, "b", 16, -1, -1, NULL);
		if (bc->has)
			budget(&f, a, bc->amount, bc->spent);
		fx_pend(&f, 100, a, 1, 8, 0)->max_cost = bc->cost;
		/* another team's job behind it is not held up by a's budget */
		fx_pend(&f, 101, b, 1, 8, 1);
		fx_decide(&f);
		i = fx_pidx(&f, 100);
		CHECK_STR_EQ(fx_placed(&f, 100), bc->placed);
		if (bc->reason) {
			CHECK_INT_EQ(f.d->pending[i].reason, SCHED_WAIT_BUDGET);
			CHECK_STR_EQ(fx_reason(&f, 100), bc->reason);
			CHECK(f.d->head != i); /* it reserves nothing */
			CHECK_INT_EQ(f.d->teams[a].used, 0);
		}
		CHECK_STR_EQ(fx_placed(&f, 101), bc->placed ? "n2" : "n1");
		fx_done(&f);
	}
}

TY_TEST(budget_counts_the_jobs_placed_before_it)
{
	struct fx f;
	int a;

	fx_init(&f);
	for (int n = 0; n < 4; n++)
		fx_node(&f, ty_test_strf("n%d", n), 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 32, -1, -1, NULL);
	budget(&f, a, 1000, 500);
	fx_pend(&f, 1, a, 1, 8, 0)->max_cost = 300;
	fx_pend(&f, 2, a, 1, 8, 1)->max_cost = 300; /* 800 + 300 > 1000 */
	fx_pend(&f, 3, a, 1, 8, 2)->max_cost = 200; /* 800 + 200 fits */
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 1), "n0");
	CHECK_STR_EQ(fx_placed(&f, 2), NULL);
	CHECK_STR_EQ(fx_reason(&f, 2),
		     "team a budget 1000.00 per month: 800.00 spent, job needs up to 300.00");
	CHECK_STR_EQ(fx_placed(&f, 3), "n1");
	fx_done(&f);
}

TY_TEST(budget_never_preempts_or_stops_running_jobs)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	budget(&f, a, 100, 150); /* overspent by its running job */
	fx_run(&f, 10, a, "n1:0-7", 3600, 3600)->cls = SCHED_CLASS_LOW;
	fx_pend(&f, 20, a, 1, 8, 0)->cls = SCHED_CLASS_HIGH;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_INT_EQ(f.d->npreemptions, 0);
	CHECK_STR_EQ(fx_reason(&f, 20), "team a budget 100.00 per month: 150.00 spent");
	CHECK_INT_EQ(f.d->teams[a].used, 8);
	fx_done(&f);
}

TY_TEST(expedited_requeue_goes_first_in_its_team)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_pend(&f, 1, a, 1, 8, 0)->priority = 10; /* older and of higher priority */
	fx_pend(&f, 2, a, 1, 8, 5);
	fx_pend(&f, 3, a, 1, 8, 9)->expedited = true;
	fx_pend(&f, 4, a, 1, 8, 2)->cls = SCHED_CLASS_HIGH;
	fx_decide(&f);
	/* a higher class still comes first; within normal, the expedited job */
	CHECK_INT_EQ(f.pend[f.d->order[0]].job, 4);
	CHECK_INT_EQ(f.pend[f.d->order[1]].job, 3);
	CHECK_INT_EQ(f.pend[f.d->order[2]].job, 1);
	CHECK_INT_EQ(f.pend[f.d->order[3]].job, 2);
	CHECK_STR_EQ(fx_placed(&f, 4), "n1");
	/* without the high job the expedited one takes the only node */
	f.in.npending = 3;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 3), "n1");
	CHECK_STR_EQ(fx_placed(&f, 1), NULL);
	fx_done(&f);
}

TY_TEST(expedited_does_not_pass_a_better_fairshare_rank)
{
	struct fx f;
	int a, b;

	fx_init(&f);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	b = fx_team(&f, "b", 8, -1, -1, NULL);
	f.teams[a].usage = 100;
	f.teams[b].usage = 0;
	fx_pend(&f, 1, a, 1, 8, 9)->expedited = true;
	fx_pend(&f, 2, b, 1, 8, 0);
	fx_pend(&f, 3, a, 1, 8, 0);
	fx_decide(&f);
	CHECK_INT_EQ(f.pend[f.d->order[0]].job, 2);
	CHECK_INT_EQ(f.pend[f.d->order[1]].job, 1);
	CHECK_INT_EQ(f.pend[f.d->order[2]].job, 3);
	fx_done(&f);
}

/*
 * Nodes held for another job's expedited requeue (the tail of exclude,
 * nexclude_held of them): kept off like excluded nodes, but a hold lapses,
 * so the job never "cannot fit once the nodes excluded after its failures
 * are left out" for them; its own excluded nodes still say so.
 */
TY_TEST(nodes_held_for_another_job_are_no_exclusion_of_its_own)
{
	static int held[2];
	struct fx f;
	struct sched_pending_in *p;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	held[0] = fx_find_node(&f, "n1");
	held[1] = fx_find_node(&f, "n2");
	p = fx_pend(&f, 1, a, 2, 8, 0);
	p->exclude = held;
	p->nexclude = 2;
	p->nexclude_held = 2;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 1), NULL);
	CHECK(strstr(fx_reason(&f, 1), "excluded") == NULL);
	/* n2 its own exclusion, n1 held: only n2 counts as excluded */
	p->nexclude_held = 1;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 1), NULL);
	CHECK(strstr(fx_reason(&f, 1), "the cluster has no 2 schedulable nodes with 8 GPUs once "
				       "the 1 node excluded after this job's failures") != NULL);
	/* a job needing only one node takes the one not held */
	p->nodes = 1;
	p->nexclude = 1;
	p->nexclude_held = 1;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 1), "n2");
	fx_done(&f);
}
