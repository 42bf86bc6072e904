/*
 * The policy core, one minimal scenario per rule with the exact decision:
 * order, quota and borrowing, reclaim and class preemption, gangs,
 * topology, reservations and backfill, pending reasons, determinism.
 */
#include "policy_fixture.h"

#include <math.h>

/* ---- ordering ---------------------------------------------------------------------------- */

TY_TEST(order_class_then_fairshare_then_priority_then_submit)
{
	struct fx f;
	int a, b;
	/* job ids in the order they must come out */
	static const int64_t want[] = {1, 2, 3, 4, 5, 6, 7};

	fx_init(&f);
	a = fx_team(&f, "a", 0, -1, -1, NULL);
	b = fx_team(&f, "b", 0, -1, -1, NULL);
	f.teams[a].usage = 0;	/* F = 1 */
	f.teams[b].usage = 100; /* u = 1, s = 0.5: F = 2^-2 = 0.25 */
	fx_pend(&f, 6, a, 1, 0, 1)->cls = SCHED_CLASS_LOW;
	fx_pend(&f, 5, b, 1, 0, 1);
	fx_pend(&f, 4, a, 1, 0, 20);
	fx_pend(&f, 3, a, 1, 0, 10);
	fx_pend(&f, 2, a, 1, 0, 30)->priority = 5;
	fx_pend(&f, 1, b, 1, 0, 40)->cls = SCHED_CLASS_HIGH;
	fx_pend(&f, 7, a, 1, 0, 1)->cls = SCHED_CLASS_SCAVENGER;
	fx_decide(&f);
	for (int k = 0; k < 7; k++) {
		ty_test_context("position %d", k);
		CHECK_INT_EQ(f.pend[f.d->order[k]].job, want[k]);
		CHECK_INT_EQ(f.d->pending[f.d->order[k]].position, k);
	}
	CHECK(fabs(f.d->teams[a].fairshare - 1.0) < 1e-12);
	CHECK(fabs(f.d->teams[b].fairshare - 0.25) < 1e-12);
	fx_done(&f);
}

TY_TEST(order_fairshare_decides_who_gets_the_last_node)
{
	struct fx f;
	int a, b;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	b = fx_team(&f, "b", 8, -1, -1, NULL);
	f.teams[a].usage = 3000;     /* u = .75 of s = .5: F = 2^-1.5 */
	f.teams[b].usage = 1000;     /* u = .25: F = 2^-.5, first */
	fx_pend(&f, 10, a, 1, 8, 1); /* older, but its team used more */
	fx_pend(&f, 11, b, 1, 8, 2);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 11), "n1");
	CHECK_STR_EQ(fx_placed(&f, 10), NULL);
	CHECK(fabs(f.d->pending[0].fairshare - pow(2, -1.5)) < 1e-12);
	CHECK(fabs(f.d->pending[1].fairshare - pow(2, -0.5)) < 1e-12);
	fx_done(&f);
}

/* ---- quota ---------------------------------------------------------------------------------- */

struct quota_case {
	const char *name;
	/* team a (the one submitting) and team b (a peer) */
	int64_t a_nominal, a_borrow, b_nominal, b_lend;
	const char *a_cohort, *b_cohort;
	int jobs; /* 1 × 8 GPU jobs team a submits */
	int placed;
	const char *reason; /* of the first job left pending */
};

static const struct quota_case quota_cases[] = {
    {"admission at nominal, no cohort", 8, -1, 16, -1, NULL, NULL, 2, 1,
     "team a at nominal quota (8 of 8 GPUs in use, job needs 8; no cohort to borrow from)"},
    {"borrowing up to the borrowing limit", 8, 8, 32, -1, "c", "c", 3, 2,
     "team a at borrowing limit (8 of 8 borrowed GPUs in use)"},
    {"borrowing limit smaller than a job", 8, 4, 32, -1, "c", "c", 2, 1,
     "team a would exceed its borrowing limit (0 of 4 borrowed GPUs in use, job needs 8)"},
    {"lender's lending limit", 8, -1, 32, 8, "c", "c", 3, 2,
     "team a may hold 16 GPUs now (16 in use, job needs 8): its cohort has no more idle GPUs "
     "to lend"},
    {"cohort isolation: another cohort's idle GPUs are not lent", 8, -1, 32, -1, "x", "y", 2, 1,
     "team a may hold 8 GPUs now (8 in use, job needs 8): its cohort has no more idle GPUs to "
     "lend"},
    {"unlimited borrowing bounded by the cohort", 0, -1, 16, -1, "c", "c", 3, 2,
     "team a may hold 16 GPUs now (16 in use, job needs 8): its cohort has no more idle GPUs "
     "to lend"},
};

TY_TEST(quota_admission_and_borrowing)
{
	for (size_t k = 0; k < sizeof(quota_cases) / sizeof(quota_cases[0]); k++) {
		const struct quota_case *q = &quota_cases[k];
		struct fx f;
		int a, placed = 0;

		ty_test_context("%s", q->name);
		fx_init(&f);
		for (int n = 0; n < 8; n++)
			fx_node(&f, ty_test_strf("n%d", n), 8, NULL, NULL, NULL);
		a = fx_team(&f, "a", q->a_nominal, q->a_borrow, -1, q->a_cohort);
		fx_team(&f, "b", q->b_nominal, -1, q->b_lend, q->b_cohort);
		for (int j = 0; j < q->jobs; j++)
			fx_pend(&f, 100 + j, a, 1, 8, j);
		fx_decide(&f);
		for (int j = 0; j < q->jobs; j++)
			placed += fx_placed(&f, 100 + j) != NULL;
		CHECK_INT_EQ(placed, q->placed);
		CHECK_STR_EQ(fx_reason(&f, 100 + q->placed), q->reason);
		fx_done(&f);
	}
}

TY_TEST(quota_lent_and_borrowed_reported_per_team)
{
	struct fx f;
	int a, b;

	fx_init(&f);
	for (int n = 0; n < 4; n++)
		fx_node(&f, ty_test_strf("n%d", n), 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, "c");
	b = fx_team(&f, "b", 16, -1, -1, "c");
	fx_pend(&f, 1, a, 2, 8, 0);
	fx_decide(&f);
	CHECK(fx_placed(&f, 1) != NULL);
	CHECK_INT_EQ(f.d->teams[a].used, 16);
	CHECK_INT_EQ(f.d->teams[a].borrowed, 8);
	CHECK_INT_EQ(f.d->teams[b].lent, 8);
	CHECK_INT_EQ(f.d->teams[b].admissible, 16);
	CHECK_INT_EQ(f.d->teams[a].admissible, 24); /* b's other 8 idle GPUs */
	fx_done(&f);
}

/* ---- reclaim ----------------------------------------------------------------------------------
 */

/* Team "a" (nominal 8) reclaims from team "b" (nominal 0, borrowing) on nodes n1, n2. */
static void reclaim_setup(struct fx *f, int *a, int *b)
{
	fx_init(f);
	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	*a = fx_team(f, "a", 8, -1, -1, "c");
	*b = fx_team(f, "b", 0, -1, -1, "c");
	fx_team(f, "lender", 8, -1, -1, "c");
}

TY_TEST(reclaim_fewest_whole_gangs)
{
	struct fx f;
	int a, b;

	reclaim_setup(&f, &a, &b);
	/* two small low-priority gangs on n1, one bigger higher-priority gang on n2 */
	fx_run(&f, 10, b, "n1:0-3", 3600, 3600)->priority = -5;
	fx_run(&f, 11, b, "n1:4-7", 3600, 3600)->priority = -5;
	fx_run(&f, 12, b, "n2:0-7", 3600, 3600)->priority = 5;
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "12");
	CHECK_INT_EQ(f.d->preemptions[0].for_job, 100);
	CHECK_INT_EQ(f.d->preemptions[0].why, SCHED_PREEMPT_RECLAIM);
	CHECK_STR_EQ(fx_reason(&f, 100), "waiting for job 12 to be preempted");
	CHECK_STR_EQ(fx_resv(&f, 100, SCHED_RESV_PREEMPTION, NULL), "n2");
	fx_done(&f);
}

TY_TEST(reclaim_prefers_lower_class_then_priority_then_least_work_lost)
{
	static const struct {
		const char *name;
		int cls1, prio1, ckpt_ago1; /* gang 21 on n1 */
		int cls2, prio2, ckpt_ago2; /* gang 22 on n2 */
		const char *victim;
	} rows[] = {
	    {"lower priority", SCHED_CLASS_NORMAL, 5, 600, SCHED_CLASS_NORMAL, 1, 600, "22"},
	    {"lower class beats priority", SCHED_CLASS_LOW, 100, 600, SCHED_CLASS_NORMAL, 0, 600,
	     "21"},
	    {"least work lost since checkpoint", SCHED_CLASS_NORMAL, 0, 60, SCHED_CLASS_NORMAL, 0,
	     3000, "21"},
	    {"never checkpointed loses everything", SCHED_CLASS_NORMAL, 0, -1, SCHED_CLASS_NORMAL,
	     0, 3000, "22"},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct fx f;
		struct sched_running_in *r1, *r2;
		int a, b;

		ty_test_context("%s", rows[k].name);
		reclaim_setup(&f, &a, &b);
		r1 = fx_run(&f, 21, b, "n1:0-7", 3600, 3600);
		r2 = fx_run(&f, 22, b, "n2:0-7", 3600, 3600);
		r1->cls = rows[k].cls1;
		r1->priority = rows[k].prio1;
		r1->checkpoint_ms = rows[k].ckpt_ago1 < 0 ? 0 : NOW_MS - S(rows[k].ckpt_ago1);
		r2->cls = rows[k].cls2;
		r2->priority = rows[k].prio2;
		r2->checkpoint_ms = rows[k].ckpt_ago2 < 0 ? 0 : NOW_MS - S(rows[k].ckpt_ago2);
		fx_pend(&f, 100, a, 1, 8, 0);
		fx_decide(&f);
		CHECK_STR_EQ(fx_victims(&f), rows[k].victim);
		fx_done(&f);
	}
}

/*
 * Work lost is GPUs × time since the checkpoint: an 8-GPU gang that saved
 * 20 minutes ago loses more (8 × 1200 s) than a 2-GPU gang that never
 * saved in its hour (2 × 3600 s), though its time alone is shorter.
 */
TY_TEST(reclaim_counts_work_lost_in_gpu_time)
{
	struct fx f;
	struct sched_running_in *r;
	int a, b;

	reclaim_setup(&f, &a, &b);
	r = fx_run(&f, 21, b, "n1:0-7", 3600, 3600);
	r->checkpoint_ms = NOW_MS - S(1200);
	fx_run(&f, 22, b, "n2:0-1", 3600, 3600);
	fx_run(&f, 23, b, "n2:2-7", 3600, 3600)->preemptible = false;
	fx_pend(&f, 100, a, 1, 2, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "22");
	fx_done(&f);
}

TY_TEST(reclaim_skips_protected_and_non_preemptible)
{
	/* the reclaim delay (default 60 s) ends the protection early; 3600 s here: the minimum */
	static const struct {
		const char *name;
		int64_t age_s, min_runtime_s, class_min_s, delay_s;
		bool preemptible;
		const char *victim;
	} rows[] = {
	    {"younger than its own minimum runtime", 60, 600, 0, 3600, true, "32"},
	    {"younger than its class minimum runtime", 60, 0, 600, 3600, true, "32"},
	    {"the larger minimum wins", 700, 600, 900, 3600, true, "32"},
	    {"old enough", 1000, 600, 900, 3600, true, "31"},
	    {"not preemptible", 1000, 0, 0, 3600, false, "32"},
	    {"younger than the reclaim delay", 59, 600, 600, 60, true, "32"},
	    {"past the reclaim delay, within its minimums", 60, 600, 600, 60, true, "31"},
	    {"past its minimums, within the reclaim delay", 60, 30, 30, 120, true, "31"},
	    {"a reclaim delay of 0", 0, 600, 600, 0, true, "31"},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct fx f;
		struct sched_running_in *r1, *r2;
		int a, b;

		ty_test_context("%s", rows[k].name);
		reclaim_setup(&f, &a, &b);
		f.in.cfg.class_min_runtime_s[SCHED_CLASS_LOW] = rows[k].class_min_s;
		f.in.cfg.reclaim_delay_s = rows[k].delay_s;
		/* 31 is the preferred victim (class low) unless protected */
		r1 = fx_run(&f, 31, b, "n1:0-7", rows[k].age_s, 3600);
		r1->cls = SCHED_CLASS_LOW;
		r1->min_runtime_s = rows[k].min_runtime_s;
		r1->preemptible = rows[k].preemptible;
		r2 = fx_run(&f, 32, b, "n2:0-7", 5000, 3600);
		(void)r2;
		fx_pend(&f, 100, a, 1, 8, 0);
		fx_decide(&f);
		CHECK_STR_EQ(fx_victims(&f), rows[k].victim);
		fx_done(&f);
	}
}

TY_TEST(reclaim_refuses_when_the_job_still_would_not_fit)
{
	struct fx f;
	int a, b, c;

	reclaim_setup(&f, &a, &b);
	c = fx_team(&f, "c", 8, -1, -1, "c");
	fx_run(&f, 50, b, "n1:0-7", 3600, 3600); /* borrowing: could go */
	fx_run(&f, 51, c, "n2:0-7", 3600, 3600); /* within its nominal: stays */
	fx_pend(&f, 100, a, 2, 4, 0);		 /* needs both nodes */
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_STR_EQ(fx_reason(&f, 100),
		     "waiting for 2 × 4 GPUs; next in line, nodes reserved from in 1h00m");
	fx_done(&f);
}

TY_TEST(reclaim_only_from_teams_that_borrow)
{
	struct fx f;
	int a, b;

	reclaim_setup(&f, &a, &b);
	f.teams[b].nominal_gpus = 16; /* b now uses exactly its nominal */
	fx_run(&f, 60, b, "n1:0-7", 3600, 3600);
	fx_run(&f, 61, b, "n2:0-7", 3600, 3600);
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	fx_done(&f);
}

TY_TEST(reclaim_stops_when_the_victim_team_is_back_at_nominal)
{
	struct fx f;
	int a, b;

	/* b has nominal 8 and uses 16: one of its gangs may go, not both */
	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	fx_node(&f, "n3", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, "c");
	b = fx_team(&f, "b", 8, -1, -1, "c");
	fx_run(&f, 70, b, "n1:0-7", 3600, 3600);
	fx_run(&f, 71, b, "n2:0-7", 3600, 3600)->priority = -1;
	fx_run(&f, 72, a, "n3:0-7", 3600, 3600)->cls = SCHED_CLASS_HIGH;
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_pend(&f, 101, a, 1, 8, 1)->cls = SCHED_CLASS_LOW;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "71");
	CHECK_STR_EQ(fx_reason(&f, 100), "waiting for job 71 to be preempted");
	/* 101 is within a's nominal too, but b no longer borrows once 71 goes */
	CHECK(f.d->pending[fx_pidx(&f, 101)].reason != SCHED_WAIT_PREEMPTION);
	fx_done(&f);
}

TY_TEST(reclaim_victims_on_nodes_where_the_job_fits)
{
	struct fx f;
	int a, b;

	/* a 2 × 8 job required in one block: only victims in block x help */
	fx_init(&f);
	fx_node(&f, "x1", 8, "z", "r", "x");
	fx_node(&f, "x2", 8, "z", "r", "x");
	fx_node(&f, "y1", 8, "z", "r", "y");
	fx_node(&f, "w1", 8, "z", "r", "w");
	a = fx_team(&f, "a", 16, -1, -1, "c");
	b = fx_team(&f, "b", 0, -1, -1, "c");
	fx_team(&f, "lender", 16, -1, -1, "c");
	/* preferred victims (low class) sit in y and w, x holds normal ones */
	fx_run(&f, 80, b, "y1:0-7", 3600, 3600)->cls = SCHED_CLASS_LOW;
	fx_run(&f, 81, b, "w1:0-7", 3600, 3600)->cls = SCHED_CLASS_LOW;
	fx_run(&f, 82, b, "x1:0-7", 3600, 3600);
	fx_run(&f, 83, b, "x2:0-7", 3600, 3600);
	fx_pend(&f, 100, a, 2, 8, 0)->required = SCHED_TOPO_BLOCK;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "82,83");
	CHECK_STR_EQ(fx_reason(&f, 100), "waiting for job 82 and 1 other to be preempted");
	CHECK_STR_EQ(fx_resv(&f, 100, SCHED_RESV_PREEMPTION, NULL), "x1,x2");
	fx_done(&f);
}

TY_TEST(reclaim_next_cycle_waits_without_new_victims)
{
	struct fx f;
	int a, b;
	struct sched_running_in *r;

	reclaim_setup(&f, &a, &b);
	r = fx_run(&f, 40, b, "n1:0-7", 3600, 3600);
	r->preempting = true;
	r->preempted_for = 100;
	fx_run(&f, 41, b, "n2:0-7", 3600, 3600);
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_STR_EQ(fx_reason(&f, 100), "waiting for job 40 to be preempted");
	CHECK_STR_EQ(fx_resv(&f, 100, SCHED_RESV_PREEMPTION, NULL), "n1");
	fx_done(&f);
}

TY_TEST(class_preemption_within_a_team)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_run(&f, 90, a, "n1:0-7", 3600, 3600)->cls = SCHED_CLASS_LOW;
	fx_run(&f, 91, a, "n2:0-7", 3600,
	       3600); /* normal: not below high? it is: but low goes first */
	fx_pend(&f, 100, a, 1, 8, 0)->cls = SCHED_CLASS_HIGH;
	fx_pend(&f, 101, a, 1, 8, 1); /* normal: may not preempt normal */
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "90");
	CHECK_INT_EQ(f.d->preemptions[0].why, SCHED_PREEMPT_CLASS);
	CHECK_STR_EQ(fx_reason(&f, 100), "waiting for job 90 to be preempted");
	CHECK_STR_EQ(fx_reason(&f, 101),
		     "team a at nominal quota (16 of 16 GPUs in use, job needs 8; no cohort to "
		     "borrow from)");
	/* the hold for 100 takes the place of 90: not counted twice (16, not 24) */
	CHECK_INT_EQ(f.d->teams[a].used, 16);
	CHECK_INT_EQ(f.d->teams[a].borrowed, 0);
	fx_done(&f);
}

TY_TEST(class_preemption_same_class_never)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	fx_run(&f, 90, a, "n1:0-7", 3600, 3600);
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	fx_done(&f);
}

/* ---- gangs ---------------------------------------------------------------------------------- */

TY_TEST(gang_all_or_nothing_and_does_not_block_quota)
{
	struct fx f;
	int a, z;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	fx_node(&f, "n3", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 24, -1, -1, NULL);
	z = fx_team(&f, "z", 24, -1, -1, NULL);
	fx_run(&f, 1, z, "n1:0-3", 60, 3600);
	fx_run(&f, 2, z, "n2:0-3", 60, 3600);
	fx_run(&f, 3, z, "n3:0-3", 60, 3600);
	/* 4 free on each: a 2 × 8 gang must not take half */
	fx_pend(&f, 100, a, 2, 8, 0);
	fx_pend(&f, 101, a, 1, 4, 1)->max_runtime_s = 600;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), NULL);
	CHECK_STR_EQ(fx_placed(&f, 101), "n1");
	CHECK_STR_EQ(fx_gpus(&f, 101), "4,5,6,7");
	CHECK_INT_EQ(f.d->nplacements, 1);
	/* its quota (16 GPUs) was not held while it waits */
	CHECK_INT_EQ(f.d->teams[a].used, 4);
	fx_done(&f);
}

TY_TEST(gang_placement_fields)
{
	struct fx f;
	int a;
	struct sched_placement *p;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	f.nodes[0].ports = (const int[]){29500, 29501};
	f.nodes[0].nports = 2;
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_pend(&f, 5, a, 2, 4, 0);
	fx_pend(&f, 6, a, 2, 2, 0)->per_node = true;
	fx_decide(&f);
	REQUIRE_INT_EQ(f.d->nplacements, 2);
	p = &f.d->placements[0];
	CHECK_INT_EQ(p->job, 5);
	CHECK_INT_EQ(p->local_ranks, 4);
	CHECK_INT_EQ(p->world_size, 8);
	CHECK_INT_EQ(p->master_port, 29502);
	CHECK_STR_EQ(fx_gpus(&f, 5), "0,1,2,3|0,1,2,3");
	p = &f.d->placements[1];
	CHECK_INT_EQ(p->local_ranks, 1);
	CHECK_INT_EQ(p->world_size, 2);
	CHECK_INT_EQ(p->master_port, 29503);
	CHECK_STR_EQ(fx_gpus(&f, 6), "4,5|4,5");
	CHECK_INT_EQ(f.d->placement_pending[1], 1);
	fx_done(&f);
}

/* ---- topology ----------------------------------------------------------------------------------
 */

/* Blocks b1 = {n1, n2} and b2 = {n3} in rack r1; b3 = {n4, n5, n6} in rack r2; zone z. */
static void topo_setup(struct fx *f, int *a)
{
	fx_init(f);
	fx_node(f, "n1", 8, "z", "r1", "b1");
	fx_node(f, "n2", 8, "z", "r1", "b1");
	fx_node(f, "n3", 8, "z", "r1", "b2");
	fx_node(f, "n4", 8, "z", "r2", "b3");
	fx_node(f, "n5", 8, "z", "r2", "b3");
	fx_node(f, "n6", 8, "z", "r2", "b3");
	*a = fx_team(f, "a", 64, -1, -1, NULL);
}

TY_TEST(topology_smallest_domain_best_fit)
{
	static const struct {
		const char *name;
		const char *busy; /* running gang of team a, "" = none */
		int nodes, gpn;
		enum sched_topo req;
		const char *want;
	} rows[] = {
	    {"block with fewest free GPUs", "", 2, 8, SCHED_TOPO_NONE, "n1,n2"},
	    {"a block over the rack", "n1:0-7", 2, 8, SCHED_TOPO_NONE, "n4,n5"},
	    {"rack when no block fits", "n1:0-7|n4:0-7|n5:0-7", 2, 8, SCHED_TOPO_NONE, "n2,n3"},
	    {"best fit node inside the block", "n4:0-3|n5:0-1", 1, 4, SCHED_TOPO_NONE, "n4"},
	    {"best fit nodes inside the block", "n1:0-7|n4:0-3|n5:0-1", 2, 4, SCHED_TOPO_NONE,
	     "n4,n5"},
	    {"block with the fewest free GPUs", "n4:0-3|n5:0-1", 2, 4, SCHED_TOPO_NONE, "n1,n2"},
	    {"required rack takes the block", "n1:0-7", 3, 8, SCHED_TOPO_RACK, "n4,n5,n6"},
	    {"required zone spans racks", "n1:0-7|n4:0-7", 4, 8, SCHED_TOPO_ZONE, "n2,n3,n5,n6"},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct fx f;
		int a;

		ty_test_context("%s", rows[k].name);
		topo_setup(&f, &a);
		if (rows[k].busy[0])
			fx_run(&f, 1, a, rows[k].busy, 60, 3600);
		fx_pend(&f, 100, a, rows[k].nodes, rows[k].gpn, 0)->required = rows[k].req;
		fx_decide(&f);
		CHECK_STR_EQ(fx_placed(&f, 100), rows[k].want);
		fx_done(&f);
	}
}

TY_TEST(topology_required_domain_and_reason)
{
	struct fx f;
	int a;

	topo_setup(&f, &a);
	/* one free node per block: 3 free nodes, no block with 2 */
	fx_run(&f, 1, a, "n1:0-7|n4:0-7|n5:0-7", 60, 3600);
	f.in.cfg.backfill = true;
	fx_pend(&f, 100, a, 2, 8, 0)->required = SCHED_TOPO_BLOCK;
	fx_pend(&f, 101, a, 2, 8, 1);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), NULL);
	CHECK_STR_EQ(fx_placed(&f, 101), "n2,n3"); /* in the rack: it does not need a block */
	fx_done(&f);

	topo_setup(&f, &a);
	fx_run(&f, 1, a, "n1:0-7|n4:0-7|n5:0-7", 60, 3600);
	f.run[0].end_by_ms = NOW_MS + S(3600);
	fx_pend(&f, 100, a, 2, 8, 0)->required = SCHED_TOPO_BLOCK;
	f.in.cfg.backfill = false;
	fx_decide(&f);
	CHECK_INT_EQ(f.d->pending[0].reason, SCHED_WAIT_HEAD);
	CHECK_STR_EQ(fx_reason(&f, 100),
		     "waiting for 2 × 8 GPUs in one block; next in line, nodes reserved from in "
		     "1h00m");
	fx_done(&f);

	/* with no reservation possible the topology reason itself */
	topo_setup(&f, &a);
	f.nodes[0].schedulable = false;
	f.nodes[3].schedulable = false;
	f.nodes[4].schedulable = false;
	fx_pend(&f, 100, a, 2, 8, 0)->required = SCHED_TOPO_BLOCK;
	fx_decide(&f);
	CHECK_STR_EQ(fx_reason(&f, 100),
		     "the cluster has no 2 schedulable nodes with 8 GPUs in one block");
	fx_done(&f);
}

TY_TEST(topology_unlabelled_nodes_are_alone)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	fx_pend(&f, 100, a, 2, 8, 0)->required = SCHED_TOPO_BLOCK;
	fx_pend(&f, 101, a, 2, 8, 0);
	fx_decide(&f);
	CHECK_INT_EQ(f.d->pending[0].reason, SCHED_NEVER_FITS);
	CHECK_STR_EQ(fx_placed(&f, 101), "n1,n2");
	fx_done(&f);
}

/* ---- reservations and backfill ----------------------------------------------------------------
 */

/*
 * n1 frees in 1 h, n2 in 2 h, n3 is free (gpus3 GPUs). Head job 100
 * (high class) wants 3 × 8: reserved at +2 h on n1, n2, n3.
 */
static void resv_setup(struct fx *f, int gpus3, int *a)
{
	int z;

	fx_init(f);
	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	fx_node(f, "n3", gpus3, NULL, NULL, NULL);
	*a = fx_team(f, "a", 64, -1, -1, NULL);
	z = fx_team(f, "z", 64, -1, -1, NULL);
	fx_run(f, 1, z, "n1:0-7", 60, 3600);
	fx_run(f, 2, z, "n2:0-7", 60, 7200);
	fx_pend(f, 100, *a, 3, 8, 0)->cls = SCHED_CLASS_HIGH;
}

TY_TEST(reservation_time_and_nodes)
{
	struct fx f;
	int a;
	int64_t at = 0;

	resv_setup(&f, 8, &a);
	fx_decide(&f);
	CHECK_INT_EQ(f.d->head, 0);
	CHECK_STR_EQ(fx_resv(&f, 100, SCHED_RESV_HEAD, &at), "n1,n2,n3");
	CHECK_INT_EQ(at, NOW_MS + S(7200));
	CHECK_INT_EQ(f.d->pending[0].at_ms, NOW_MS + S(7200));
	CHECK_STR_EQ(fx_reason_when(&f, 100, "14:02"),
		     "waiting for 3 × 8 GPUs; next in line, nodes reserved from 14:02");
	fx_done(&f);
}

TY_TEST(backfill_around_the_reservation)
{
	static const struct {
		const char *name;
		int gpus3;
		int64_t max_runtime_s;
		int jobs;
		const char *placed; /* which of 201.. start, e.g. "201" */
		const char *reason; /* of the first that does not */
	} rows[] = {
	    {"ends before the reservation", 8, 3600, 1, "n3", NULL},
	    {"ends exactly at the reservation", 8, 7200, 1, "n3", NULL},
	    {"would delay it", 8, 7201, 1, NULL, "reserved for job 100 until 14:02"},
	    {"uses only capacity the reservation leaves", 16, 86400, 2, "n3",
	     "reserved for job 100 until 14:02"},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct fx f;
		int a;

		ty_test_context("%s", rows[k].name);
		resv_setup(&f, rows[k].gpus3, &a);
		for (int j = 0; j < rows[k].jobs; j++)
			fx_pend(&f, 201 + j, a, 1, 8, 1 + j)->max_runtime_s = rows[k].max_runtime_s;
		fx_decide(&f);
		CHECK_STR_EQ(fx_placed(&f, 201), rows[k].placed);
		if (rows[k].reason)
			CHECK_STR_EQ(fx_reason_when(&f, 201 + (rows[k].placed ? 1 : 0), "14:02"),
				     rows[k].reason);
		fx_done(&f);
	}
}

TY_TEST(backfill_same_team_quota_is_kept_for_the_head)
{
	struct fx f;
	int a;

	resv_setup(&f, 16, &a);
	f.teams[a].nominal_gpus = 32; /* head 24 + 8 more fit, not 16 more */
	fx_pend(&f, 201, a, 1, 8, 1)->max_runtime_s = 86400;
	fx_pend(&f, 202, a, 1, 4, 2)->max_runtime_s = 86400;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 201), "n3");
	CHECK_STR_EQ(fx_placed(&f, 202), NULL);
	CHECK_INT_EQ(f.d->pending[2].reason, SCHED_WAIT_RESERVED);
	fx_done(&f);
}

TY_TEST(backfill_off_keeps_everything_behind_the_head)
{
	struct fx f;
	int a;

	resv_setup(&f, 8, &a);
	f.in.cfg.backfill = false;
	fx_pend(&f, 201, a, 1, 8, 1)->max_runtime_s = 60;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 201), NULL);
	CHECK_STR_EQ(fx_reason(&f, 201), "queued behind job 100 (backfill is off)");
	fx_done(&f);
}

TY_TEST(backfill_scan_limit)
{
	struct fx f;
	int a;

	resv_setup(&f, 16, &a);
	f.in.cfg.backfill_max_scan = 1;
	fx_pend(&f, 201, a, 1, 8, 1)->max_runtime_s = 60; /* tried, placed */
	fx_pend(&f, 202, a, 1, 8, 2)->max_runtime_s = 60; /* would fit, not tried */
	fx_pend(&f, 203, a, 1, 16, 3);			  /* known not to fit: O(1), not counted */
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 201), "n3");
	CHECK_STR_EQ(fx_reason(&f, 203), "no node has 16 free GPUs");
	CHECK_STR_EQ(fx_reason(&f, 202),
		     "not considered this cycle (backfill scan limit of 1 jobs)");
	fx_done(&f);
}

/* ---- reasons, validity, determinism -----------------------------------------------------------
 */

TY_TEST(reasons_for_nodes)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	fx_run(&f, 1, a, "n1:0-3|n2:0-3", 60, 3600);
	f.in.cfg.backfill = true;
	fx_pend(&f, 100, a, 1, 6, 0);			    /* head */
	fx_pend(&f, 101, a, 2, 4, 1)->max_runtime_s = 7200; /* would delay it */
	fx_pend(&f, 102, a, 3, 2, 2);			    /* only 2 nodes */
	fx_pend(&f, 103, a, 1, 16, 3);			    /* never */
	fx_pend(&f, 104, 7, 1, 1, 4);			    /* unknown team */
	fx_decide(&f);
	CHECK_STR_EQ(
	    fx_reason(&f, 100),
	    "waiting for a node with 6 free GPUs; next in line, nodes reserved from in 1h00m");
	CHECK_STR_EQ(fx_reason(&f, 101), "reserved for job 100 until in 1h00m");
	CHECK_STR_EQ(fx_resv(&f, 100, SCHED_RESV_HEAD, NULL), "n1");
	CHECK_STR_EQ(fx_reason(&f, 102), "the cluster has no 3 schedulable nodes with 2 GPUs");
	CHECK_STR_EQ(fx_reason(&f, 103), "no schedulable node has 16 GPUs");
	CHECK_STR_EQ(fx_reason(&f, 104), "invalid request: unknown team");
	fx_done(&f);

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	f.nodes[0].busy = 0xff; /* held by something that never ends */
	f.nodes[1].busy = 0x0f;
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_pend(&f, 101, a, 2, 4, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_reason(&f, 100), "no node has 8 free GPUs");
	CHECK_STR_EQ(fx_reason(&f, 101), "waiting for 2 × 4 GPUs (1 node has 4 free)");
	fx_done(&f);
}

TY_TEST(reasons_for_topology)
{
	struct fx f;
	int a, z;

	fx_init(&f);
	fx_node(&f, "x1", 8, "z", "r", "x");
	fx_node(&f, "x2", 8, "z", "r", "x");
	fx_node(&f, "y1", 8, "z", "r", "y");
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	z = fx_team(&f, "z", 64, -1, -1, NULL);
	fx_run(&f, 1, z, "x1:0-7", 60, 3600);
	fx_run(&f, 2, z, "y1:0-7", 60, 3600);
	fx_pend(&f, 100, a, 3, 8, 0)->cls = SCHED_CLASS_HIGH; /* the head */
	fx_pend(&f, 101, a, 2, 8, 1)->required = SCHED_TOPO_BLOCK;
	f.pend[1].max_runtime_s = 600;
	fx_decide(&f);
	CHECK_STR_EQ(fx_reason(&f, 101), "waiting for 2 × 8 GPUs in one block");
	fx_done(&f);
}

TY_TEST(excluded_nodes_are_not_used)
{
	struct fx f;
	int a;
	struct sched_pending_in *p;
	static const int ex[] = {0};

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	p = fx_pend(&f, 100, a, 1, 8, 0);
	p->exclude = ex;
	p->nexclude = 1;
	fx_pend(&f, 101, a, 1, 8, 1);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "n2");
	CHECK_STR_EQ(fx_placed(&f, 101), "n1");
	fx_done(&f);
}

/*
 * Retry eligibility: a job in backoff (not_before_ms) and a job excluding
 * nodes after its failures. Two nodes n1, n2 with 8 GPUs, n3 with 4 GPUs
 * that is not schedulable; job 100 is the case, job 101 (1 × 8, behind it)
 * shows what the case left free.
 */
struct retry_case {
	const char *name;
	int nodes, gpn;		/* job 100's shape */
	bool backoff;		/* not_before_ms = now + not_before_s */
	int64_t not_before_s;
	const char *last_failure;
	int exclude[3];		/* node indices, -1 ends */
	const char *placed;	/* where 100 starts, "-" = it waits */
	const char *reason;	/* its reason when it waits (`when` rendered as "T") */
	const char *placed_101; /* where 101 starts, "-" = it waits */
};

static const struct retry_case retry_cases[] = {
    {"backoff in the future waits", 1, 8, true, 30, "system failure on n1", {-1}, "-",
     "retrying after a system failure on n1: backoff until T", "n1"},
    {"backoff over starts", 1, 8, true, -1, "system failure on n1", {-1}, "n1", NULL, "n2"},
    {"backoff ending exactly now is over", 1, 8, true, 0, NULL, {-1}, "n1", NULL, "n2"},
    {"backoff without a named failure", 1, 8, true, 5, NULL, {-1}, "-",
     "retrying after a failure: backoff until T", "n1"},
    {"a class starting with a vowel", 1, 8, true, 5, "oom failure", {-1}, "-",
     "retrying after an oom failure: backoff until T", "n1"},
    {"a gang in backoff holds nothing", 2, 8, true, 5, "system failure on n2", {-1}, "-",
     "retrying after a system failure on n2: backoff until T", "n1"},
    {"excluded node is never used", 1, 8, false, 0, NULL, {0, -1}, "n2", NULL, "n1"},
    {"excluded node and backoff over", 1, 8, true, -10, "hardware failure on n1", {0, -1},
     "n2", NULL, "n1"},
    {"excluding both 8-GPU nodes leaves nothing that fits", 1, 8, false, 0, NULL, {0, 1, -1},
     "-", "no schedulable node has 8 GPUs but the 2 nodes excluded after this job's failures",
     "n1"},
    {"a gang that needs the excluded node", 2, 8, false, 0, NULL, {1, -1}, "-",
     "the cluster has no 2 schedulable nodes with 8 GPUs once the 1 node excluded after "
     "this job's failures are left out",
     "n1"},
    {"an unschedulable excluded node does not count", 2, 8, false, 0, NULL, {2, 1, -1}, "-",
     "the cluster has no 2 schedulable nodes with 8 GPUs once the 1 node excluded after "
     "this job's failures are left out",
     "n1"},
    {"excluding the unschedulable node changes nothing", 2, 4, false, 0, NULL, {2, -1},
     "n1,n2", NULL, "-"},
    {"excluded, a smaller job still fits elsewhere", 1, 4, false, 0, NULL, {0, -1}, "n2",
     NULL, "n1"},
};

static const char *tagged(const char *name, const char *v)
{
	return ty_test_strf("%s: %s", name, v ? v : "-");
}

TY_TEST(retry_backoff_and_excluded_nodes)
{
	for (size_t c = 0; c < sizeof(retry_cases) / sizeof(retry_cases[0]); c++) {
		const struct retry_case *rc = &retry_cases[c];
		struct sched_pending_in *p;
		struct fx f;
		int a, nx = 0, i;

		fx_init(&f);
		fx_node(&f, "n1", 8, NULL, NULL, NULL);
		fx_node(&f, "n2", 8, NULL, NULL, NULL);
		fx_node(&f, "n3", 4, NULL, NULL, NULL);
		f.nodes[2].schedulable = false;
		a = fx_team(&f, "a", 64, -1, -1, NULL);
		p = fx_pend(&f, 100, a, rc->nodes, rc->gpn, 0);
		if (rc->backoff)
			p->not_before_ms = NOW_MS + S(rc->not_before_s);
		p->last_failure = rc->last_failure;
		while (nx < 3 && rc->exclude[nx] >= 0)
			nx++;
		p->exclude = rc->exclude;
		p->nexclude = nx;
		fx_pend(&f, 101, a, 1, 8, 1);
		fx_decide(&f);
		i = fx_pidx(&f, 100);
		CHECK_STR_EQ(tagged(rc->name, fx_placed(&f, 100)), tagged(rc->name, rc->placed));
		if (rc->reason)
			CHECK_STR_EQ(tagged(rc->name, fx_reason_when(&f, 100, "T")),
				     tagged(rc->name, rc->reason));
		CHECK_STR_EQ(tagged(rc->name, fx_placed(&f, 101)), tagged(rc->name, rc->placed_101));
		if (rc->backoff && rc->not_before_s > 0) {
			CHECK_INT_EQ(f.d->pending[i].reason, SCHED_WAIT_BACKOFF);
			CHECK_INT_EQ(f.d->pending[i].at_ms, NOW_MS + S(rc->not_before_s));
			CHECK(f.d->head != i); /* a job in backoff reserves nothing */
		}
		fx_done(&f);
	}
}

/*
 * Spot pools: n1 on-demand, n2 and n3 spot, 8 GPUs each. Job 100 is the
 * case, job 101 (1 × 8, any pool, behind it) shows what the case left free.
 */
struct spot_case {
	const char *name;
	int nodes;			/* job 100: nodes × 8 GPUs */
	enum sched_spot_rule rule;
	int preemptions, max;		/* spot preemptions so far, spot.max_preemptions */
	bool od_busy;			/* n1's GPUs held (by nothing that ends) */
	bool spot_down;			/* n2 and n3 not schedulable (preempting) */
	const char *placed;		/* where 100 starts, "-" = it waits */
	const char *reason;		/* its reason when it waits */
	const char *placed_101;
};

static const struct spot_case spot_cases[] = {
    {"spot allowed: a spot node when on-demand is full", 1, SCHED_SPOT_ANY, 0, 3, true, false,
     "n2", NULL, "n3"},
    {"spot allowed: any pool, first fit", 1, SCHED_SPOT_ANY, 0, 3, false, false, "n1", NULL,
     "n2"},
    {"spot disallowed: the on-demand node", 1, SCHED_SPOT_NEVER, 0, 3, false, false, "n1",
     NULL, "n2"},
    {"spot disallowed never lands on spot", 1, SCHED_SPOT_NEVER, 0, 3, true, false, "-",
     "waiting for on-demand nodes (spot.allowed is false)", "n2"},
    {"fallback after max preemptions", 1, SCHED_SPOT_FALLBACK, 3, 3, true, false, "-",
     "waiting for on-demand nodes: preempted on spot 3 times (spot.max_preemptions 3)", "n2"},
    {"fallback, one preemption", 1, SCHED_SPOT_FALLBACK, 1, 1, true, false, "-",
     "waiting for on-demand nodes: preempted on spot 1 time (spot.max_preemptions 1)", "n2"},
    {"fallback takes the on-demand node", 1, SCHED_SPOT_FALLBACK, 3, 3, false, false, "n1",
     NULL, "n2"},
    {"a gang the on-demand pool can never hold", 2, SCHED_SPOT_NEVER, 0, 3, false, false, "-",
     "the on-demand nodes can never hold it (spot.allowed is false)", "n1"},
    {"a fallback gang the on-demand pool can never hold", 2, SCHED_SPOT_FALLBACK, 2, 2, false,
     false, "-",
     "the on-demand nodes can never hold it: preempted on spot 2 times (spot.max_preemptions "
     "2)",
     "n1"},
    {"spot allowed: a gang over both pools", 2, SCHED_SPOT_ANY, 0, 3, false, false, "n1,n2",
     NULL, "n3"},
    {"unschedulable spot nodes: the usual reason", 1, SCHED_SPOT_NEVER, 0, 3, true, true, "-",
     "no node has 8 free GPUs", "-"},
};

TY_TEST(spot_pools)
{
	for (size_t c = 0; c < sizeof(spot_cases) / sizeof(spot_cases[0]); c++) {
		const struct spot_case *sc = &spot_cases[c];
		struct sched_pending_in *p;
		struct fx f;
		int a, i;

		fx_init(&f);
		fx_node(&f, "n1", 8, NULL, NULL, NULL);
		fx_node(&f, "n2", 8, NULL, NULL, NULL);
		fx_node(&f, "n3", 8, NULL, NULL, NULL);
		f.nodes[1].spot = f.nodes[2].spot = true;
		if (sc->od_busy)
			f.nodes[0].busy = 0xff;
		if (sc->spot_down)
			f.nodes[1].schedulable = f.nodes[2].schedulable = false;
		a = fx_team(&f, "a", 64, -1, -1, NULL);
		p = fx_pend(&f, 100, a, sc->nodes, 8, 0);
		p->spot = sc->rule;
		p->spot_preemptions = sc->preemptions;
		p->spot_max_preemptions = sc->max;
		fx_pend(&f, 101, a, 1, 8, 1);
		fx_decide(&f);
		i = fx_pidx(&f, 100);
		CHECK_STR_EQ(tagged(sc->name, fx_placed(&f, 100)), tagged(sc->name, sc->placed));
		if (sc->reason)
			CHECK_STR_EQ(tagged(sc->name, fx_reason(&f, 100)),
				     tagged(sc->name, sc->reason));
		else
			CHECK_INT_EQ(f.d->pending[i].reason, SCHED_PLACED);
		CHECK_STR_EQ(tagged(sc->name, fx_placed(&f, 101)),
			     tagged(sc->name, sc->placed_101));
		/* the caller's exclusions are its own: the core's copy is not written back */
		CHECK(f.pend[i].nexclude == 0 && f.pend[i].exclude == NULL);
		fx_done(&f);
	}
}

/* Spot nodes are left out on top of the job's own exclusions. */
TY_TEST(spot_and_excluded_nodes_together)
{
	struct fx f;
	struct sched_pending_in *p;
	static const int ex[] = {0};
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	fx_node(&f, "n3", 8, NULL, NULL, NULL);
	f.nodes[2].spot = true;
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	p = fx_pend(&f, 100, a, 1, 8, 0);
	p->exclude = ex;
	p->nexclude = 1;
	p->spot = SCHED_SPOT_NEVER;
	fx_pend(&f, 101, a, 1, 8, 1)->spot = SCHED_SPOT_NEVER;
	fx_pend(&f, 102, a, 1, 8, 2)->spot = SCHED_SPOT_NEVER;
	fx_pend(&f, 103, a, 1, 8, 3);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "n2"); /* not n1 (its own), not n3 (spot) */
	CHECK_STR_EQ(fx_placed(&f, 101), "n1");
	/* the head of the queue: n1's gang (101) ends within its hour */
	CHECK_STR_EQ(fx_reason_when(&f, 102, "T"),
		     "waiting for on-demand nodes (spot.allowed is false); next in line, nodes "
		     "reserved from T");
	CHECK_STR_EQ(fx_placed(&f, 103), "n3");
	fx_done(&f);
}

/*
 * A 10 %-spot cluster: n01..n20, 8 GPUs each, n04 and n12 spot (n04 idle,
 * n12 with 2 free), n01 with 2 free. Jobs kept off spot (NEVER, FALLBACK)
 * and jobs of any pool, one team, in submit order; each expectation
 * follows from best fit (fewest free GPUs, then lowest index) over the
 * nodes the job may use. The last ones find nothing free and wait, the
 * second of each shape behind one that already failed.
 */
TY_TEST(spot_mix_on_a_tenth_spot_cluster)
{
	static const char *const ids[] = {"n01", "n02", "n03", "n04", "n05", "n06", "n07",
					  "n08", "n09", "n10", "n11", "n12", "n13", "n14",
					  "n15", "n16", "n17", "n18", "n19", "n20"};
	static const struct {
		int64_t job;
		int nodes, gpus;
		enum sched_spot_rule rule;
		const char *placed; /* NULL = waits */
	} jobs[] = {
	    {100, 1, 2, SCHED_SPOT_NEVER, "n01"},    /* n01 and n12 have 2: not the spot one */
	    {101, 1, 1, SCHED_SPOT_ANY, "n12"},	     /* n12 is the only one with 2 left */
	    {102, 2, 8, SCHED_SPOT_NEVER, "n02,n03"}, /* idle nodes, lowest first */
	    {103, 2, 8, SCHED_SPOT_ANY, "n04,n05"},   /* the idle spot node counts */
	    {104, 1, 8, SCHED_SPOT_FALLBACK, "n06"},
	    {105, 19, 8, SCHED_SPOT_NEVER, NULL},      /* 18 on-demand nodes: never */
	    {106, 1, 8, SCHED_SPOT_ANY, "n07"},
	    {107, 12, 8, SCHED_SPOT_NEVER, "n08,n09,n10,n11,n13,n14,n15,n16,n17,n18,n19,n20"},
	    {108, 1, 1, SCHED_SPOT_FALLBACK, NULL}, /* only n12 (spot) has a GPU: the head */
	    {109, 1, 1, SCHED_SPOT_ANY, "n12"},
	    {110, 1, 8, SCHED_SPOT_NEVER, NULL},
	    {111, 1, 8, SCHED_SPOT_NEVER, NULL},
	    {112, 1, 8, SCHED_SPOT_ANY, NULL},
	    {113, 1, 8, SCHED_SPOT_ANY, NULL},
	};
	struct fx f;
	int a;

	fx_init(&f);
	for (size_t n = 0; n < sizeof(ids) / sizeof(ids[0]); n++)
		fx_node(&f, ids[n], 8, NULL, NULL, NULL);
	f.nodes[3].spot = f.nodes[11].spot = true;
	f.nodes[0].busy = 0x3f;
	f.nodes[11].busy = 0x3f;
	a = fx_team(&f, "a", 1000, -1, -1, NULL);
	for (size_t k = 0; k < sizeof(jobs) / sizeof(jobs[0]); k++) {
		struct sched_pending_in *p = fx_pend(&f, jobs[k].job, a, jobs[k].nodes,
						     jobs[k].gpus, (int64_t)k);

		p->spot = jobs[k].rule;
		p->spot_preemptions = p->spot_max_preemptions = 2;
	}
	fx_decide(&f);
	for (size_t k = 0; k < sizeof(jobs) / sizeof(jobs[0]); k++) {
		const char *got = fx_placed(&f, jobs[k].job);
		int i = fx_pidx(&f, jobs[k].job);

		if (jobs[k].placed)
			CHECK_STR_EQ(got ? got : "-", jobs[k].placed);
		else
			CHECK(got == NULL);
		CHECK(f.d->pending[i].on_demand_only == (jobs[k].rule != SCHED_SPOT_ANY));
	}
	CHECK_STR_EQ(fx_reason(&f, 105),
		     "the on-demand nodes can never hold it (spot.allowed is false)");
	CHECK_INT_EQ(f.d->head, fx_pidx(&f, 108));
	CHECK_STR_EQ(fx_reason_when(&f, 108, "T"),
		     "waiting for on-demand nodes: preempted on spot 2 times "
		     "(spot.max_preemptions 2); next in line, nodes reserved from T");
	CHECK_STR_EQ(fx_reason(&f, 110), "waiting for on-demand nodes (spot.allowed is false)");
	CHECK_STR_EQ(fx_reason(&f, 111), "waiting for on-demand nodes (spot.allowed is false)");
	CHECK_STR_EQ(fx_reason(&f, 112), "no node has 8 free GPUs");
	CHECK_STR_EQ(fx_reason(&f, 113), "no node has 8 free GPUs");
	/* the head's reservation is on on-demand nodes only */
	REQUIRE_INT_EQ(f.d->nreservations, 1);
	CHECK(!f.nodes[f.d->reservations[0].node[0]].spot);
	/* the caller's pending jobs are read, not written */
	for (int i = 0; i < f.in.npending; i++)
		CHECK(f.pend[i].nexclude == 0 && f.pend[i].exclude == NULL);
	fx_done(&f);
}

TY_TEST(backoff_reason_relative_when)
{
	struct fx f;
	int a;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	fx_pend(&f, 100, a, 1, 8, 0)->not_before_ms = NOW_MS + S(80);
	f.pend[0].last_failure = "hang failure on n1";
	fx_decide(&f);
	CHECK_STR_EQ(fx_reason(&f, 100), "retrying after a hang failure on n1: backoff until in 1m20s");
	fx_done(&f);
}

static char *serialize(const struct sched_decisions *d)
{
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);

	for (int k = 0; k < d->nplacements; k++) {
		const struct sched_placement *p = &d->placements[k];

		fprintf(m, "P%lld:%d", (long long)p->job, p->master_port);
		for (int r = 0; r < p->nnodes; r++)
			fprintf(m, ",%d", p->node[r]);
		for (int g = 0; g < p->nnodes * p->gpus_per_node; g++)
			fprintf(m, ".%d", p->gpus[g]);
	}
	for (int k = 0; k < d->npreemptions; k++)
		fprintf(m, "X%lld>%lld", (long long)d->preemptions[k].victim,
			(long long)d->preemptions[k].for_job);
	for (int k = 0; k < d->nreservations; k++) {
		fprintf(m, "R%lld@%lld", (long long)d->reservations[k].job,
			(long long)d->reservations[k].start_ms);
		for (int x = 0; x < d->reservations[k].nnodes; x++)
			fprintf(m, ",%d", d->reservations[k].node[x]);
	}
	for (int k = 0; k < d->npending; k++)
		fprintf(m, "Q%d:%d:%d:%lld:%lld:%a", d->pending[k].position, d->pending[k].reason,
			d->pending[k].count, (long long)d->pending[k].other_job,
			(long long)d->pending[k].at_ms, d->pending[k].fairshare);
	fclose(m);
	return out;
}

TY_TEST(deterministic)
{
	struct fx f;
	int a, b;
	char *one, *two;

	reclaim_setup(&f, &a, &b);
	fx_run(&f, 10, b, "n1:0-3", 3600, 3600);
	fx_run(&f, 11, b, "n1:4-7", 3600, 3600);
	fx_pend(&f, 100, a, 1, 8, 0);
	fx_pend(&f, 101, b, 1, 4, 0);
	fx_pend(&f, 102, a, 2, 2, 0);
	fx_decide(&f);
	one = serialize(f.d);
	fx_decide(&f);
	two = serialize(f.d);
	CHECK_STR_EQ(one, two);
	free(one);
	free(two);
	fx_done(&f);
}

TY_TEST(bad_input_is_refused)
{
	struct fx f;
	struct ty_err err = {0};
	struct sched_decisions *d = NULL;

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_team(&f, "a", 8, -1, -1, NULL);
	fx_run(&f, 1, 0, "n1:0-7", 1, 1)->team = 5;
	CHECK_INT_EQ(sched_decide(&d, &f.in, &err), TY_EINVAL);
	CHECK(d == NULL);
	CHECK_STR_EQ(err.msg, "running job 1 has team index 5");
}

TY_TEST(names)
{
	CHECK_STR_EQ(sched_class_name(SCHED_CLASS_SCAVENGER), "scavenger");
	CHECK_INT_EQ(sched_class_parse("low"), SCHED_CLASS_LOW);
	CHECK_INT_EQ(sched_class_parse("urgent"), -1);
	CHECK_INT_EQ(sched_topo_parse("rack"), SCHED_TOPO_RACK);
	CHECK_INT_EQ(sched_topo_parse(NULL), SCHED_TOPO_NONE);
	CHECK_STR_EQ(sched_topo_name(SCHED_TOPO_ZONE), "zone");
}

/*
 * Preemption churn (issue: "no preemption loops"). Each row builds one
 * snapshot and states what the decision must do. The ping-pong rows are
 * the three cycles of one reclaim: b's job 7 reclaims from a, which
 * borrows b's nominal; a comes first in fair share.
 */
struct churn_row {
	const char *name;
	void (*setup)(struct fx *f);
	const char *victims; /* fx_victims() */
	int64_t placed;	     /* a job that must be placed (0 = none) */
	const char *on;	     /* ... on these nodes */
	int64_t waits;	     /* a job that must not be placed (0 = none) */
	const char *reason;  /* ... and its reason (NULL = any) */
	int team;	     /* team whose used/borrowed are checked (-1 = none) */
	int64_t used, borrowed;
};

/* 4 nodes x 8; a and b in cohort c, nominal 16 each; a's usage is far lower. */
static void pingpong_world(struct fx *f, int phase)
{
	int a, b;

	for (int n = 0; n < 4; n++)
		fx_node(f, ty_test_strf("n%d", n), 8, "z", "r", "b");
	a = fx_team(f, "a", 16, -1, -1, "c");
	b = fx_team(f, "b", 16, -1, -1, "c");
	f->teams[a].usage = 1000;
	f->teams[b].usage = 100000;
	for (int k = phase == 2 ? 1 : 0; k < 4; k++) {
		struct sched_running_in *r =
		    fx_run(f, 100 + k, a, ty_test_strf("n%d:0-7", k), 3600, 36000);

		r->preempting = phase == 1 && k == 0;
		r->preempted_for = r->preempting ? 7 : 0;
	}
	fx_pend(f, 7, b, 1, 8, 1000);
	if (phase == 2) /* the victim is back, keeping its (earlier) submit time */
		fx_pend(f, 100, a, 1, 8, 10);
}

static void pingpong_0(struct fx *f)
{
	pingpong_world(f, 0);
}

static void pingpong_1(struct fx *f)
{
	pingpong_world(f, 1);
}

static void pingpong_2(struct fx *f)
{
	pingpong_world(f, 2);
}

/*
 * Lend then reclaim in one decision: nobody borrows in the input. a's job
 * 60 would borrow b's idle nominal and take n2; b's job 70 (within
 * nominal) would then reclaim a's job 50, which runs within a's nominal.
 */
static void lend_then_reclaim(struct fx *f)
{
	int a, b;

	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(f, "a", 8, -1, -1, "c");
	b = fx_team(f, "b", 8, -1, -1, "c");
	f->teams[a].usage = 10;
	f->teams[b].usage = 1000;
	fx_run(f, 50, a, "n1:0-3", 3600, 3600);
	fx_pend(f, 60, a, 1, 8, 0);
	fx_pend(f, 70, b, 1, 8, 0);
}

/* A gang stopping for its own team's job: the hold takes its place, 16 of 16, not 24. */
static void hold_on_own_stopping_gang(struct fx *f)
{
	int a, b;
	struct sched_running_in *r;

	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(f, "a", 16, -1, -1, "c");
	b = fx_team(f, "b", 8, -1, -1, "c");
	r = fx_run(f, 10, a, "n1:0-7", 3600, 3600);
	r->cls = SCHED_CLASS_LOW;
	r->preempting = true;
	r->preempted_for = 12;
	fx_run(f, 11, a, "n2:0-7", 3600, 3600);
	fx_pend(f, 12, a, 1, 8, 0)->cls = SCHED_CLASS_HIGH;
	/* b reclaims only from a borrower: a is not one, whatever it holds for 12 */
	fx_pend(f, 20, b, 1, 8, 5);
}

/* A new class victim of its own team: same, and b may not reclaim from a. */
static void hold_on_own_class_victim(struct fx *f)
{
	int a, b;

	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(f, "a", 16, -1, -1, "c");
	b = fx_team(f, "b", 8, -1, -1, "c");
	fx_run(f, 10, a, "n1:0-7", 3600, 3600)->cls = SCHED_CLASS_LOW;
	fx_run(f, 11, a, "n2:0-7", 3600, 3600);
	fx_pend(f, 12, a, 1, 8, 0)->cls = SCHED_CLASS_HIGH;
	fx_pend(f, 20, b, 1, 8, 5);
}

/*
 * Cross-cohort: x (cohort c2) borrows y's idle nominal and holds both
 * nodes; a (cohort c1) is below nominal. x borrows nothing of a's, so a
 * does not reclaim from it: a waits (quotas here promise more than the
 * nodes hold, 24 nominal on 16 GPUs).
 */
static void cross_cohort(struct fx *f)
{
	int a, x;

	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(f, "a", 8, -1, -1, "c1");
	x = fx_team(f, "x", 8, -1, -1, "c2");
	fx_team(f, "y", 8, -1, -1, "c2");
	fx_run(f, 30, x, "n1:0-7", 3600, 3600);
	fx_run(f, 31, x, "n2:0-7", 3600, 3600);
	fx_pend(f, 40, a, 1, 8, 0);
}

/* Same cohort: a reclaims from x. */
static void same_cohort_reclaim(struct fx *f)
{
	int a, x;

	fx_node(f, "n1", 8, NULL, NULL, NULL);
	fx_node(f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(f, "a", 8, -1, -1, "c");
	x = fx_team(f, "x", 8, -1, -1, "c");
	fx_run(f, 30, x, "n1:0-7", 3600, 3600);
	fx_run(f, 31, x, "n2:0-7", 1800, 3600);
	fx_pend(f, 40, a, 1, 8, 0);
}

static const struct churn_row churn_rows[] = {
    {"ping-pong cycle 1: reclaim", pingpong_0, "100", 0, NULL, 7,
     "waiting for job 100 to be preempted", -1, 0, 0},
    {"ping-pong cycle 2: victim stopping, no new victim", pingpong_1, "", 0, NULL, 7,
     "waiting for job 100 to be preempted", -1, 0, 0},
    {"ping-pong cycle 3: the reclaimer gets the GPUs, the victim waits", pingpong_2, "", 7,
     "n0", 100, NULL, 0, 24, 8},
    {"lend then reclaim in one decision", lend_then_reclaim, "", 70, "n2", 60, NULL, 0, 4, 0},
    {"hold on an own stopping gang counts once", hold_on_own_stopping_gang, "", 0, NULL, 20,
     NULL, 0, 16, 0},
    {"hold on an own class victim counts once", hold_on_own_class_victim, "10", 0, NULL, 20,
     NULL, 0, 16, 0},
    {"no reclaim across cohorts", cross_cohort, "", 0, NULL, 40, NULL, -1, 0, 0},
    {"reclaim within the cohort", same_cohort_reclaim, "31", 0, NULL, 40,
     "waiting for job 31 to be preempted", 1, 16, 8},
};

TY_TEST(preemption_churn_scenarios)
{
	for (size_t k = 0; k < sizeof(churn_rows) / sizeof(churn_rows[0]); k++) {
		const struct churn_row *row = &churn_rows[k];
		struct fx f;

		ty_test_context("%s", row->name);
		fx_init(&f);
		row->setup(&f);
		fx_decide(&f);
		CHECK_STR_EQ(fx_victims(&f), row->victims);
		for (int i = 0; i < f.d->npreemptions; i++)
			if (f.d->preemptions[i].why == SCHED_PREEMPT_RECLAIM) {
				const struct sched_running_in *v =
				    &f.run[f.d->preemptions[i].running];
				const struct sched_pending_in *p =
				    &f.pend[f.d->preemptions[i].pending];

				CHECK_STR_EQ(f.teams[v->team].cohort, f.teams[p->team].cohort);
			}
		if (row->placed)
			CHECK_STR_EQ(fx_placed(&f, row->placed), row->on);
		if (row->waits) {
			CHECK(fx_placed(&f, row->waits) == NULL);
			if (row->reason)
				CHECK_STR_EQ(fx_reason(&f, row->waits), row->reason);
		}
		if (row->team >= 0) {
			CHECK_INT_EQ(f.d->teams[row->team].used, row->used);
			CHECK_INT_EQ(f.d->teams[row->team].borrowed, row->borrowed);
		}
		fx_done(&f);
		if (ty_test_failed())
			break;
	}
	ty_test_context(NULL);
}

/*
 * The head's reservation counts on a victim's GPUs only once it has
 * stopped: stop_allowance_s after now (0 = now, the old behaviour).
 */
TY_TEST(head_reservation_waits_for_stopping_gangs)
{
	for (int allow = 0; allow <= 90; allow += 90) {
		struct fx f;
		int a;
		int64_t at = 0;

		ty_test_context("stop allowance %d s", allow);
		fx_init(&f);
		f.in.cfg.stop_allowance_s = allow;
		fx_node(&f, "n1", 8, NULL, NULL, NULL);
		fx_node(&f, "n2", 8, NULL, NULL, NULL);
		a = fx_team(&f, "a", 32, -1, -1, NULL);
		fx_run(&f, 10, a, "n1:0-7", 3600, 3600)->cls = SCHED_CLASS_LOW;
		fx_run(&f, 11, a, "n2:0-7", 3600, 3600);
		fx_pend(&f, 20, a, 1, 4, 0)->cls = SCHED_CLASS_HIGH;
		fx_pend(&f, 21, a, 1, 4, 1);
		fx_decide(&f);
		CHECK_STR_EQ(fx_victims(&f), "10");
		CHECK_STR_EQ(fx_resv(&f, 20, SCHED_RESV_PREEMPTION, NULL), "n1");
		CHECK_STR_EQ(fx_resv(&f, 21, SCHED_RESV_HEAD, &at), "n1");
		CHECK_INT_EQ(at, NOW_MS + S(allow));
		fx_done(&f);
	}
	ty_test_context(NULL);
}

/*
 * A first-tier job that reclaim would make room for, but the borrowing gang
 * holding the GPUs is younger than its minimum runtime: the reason says so.
 */
TY_TEST(reason_names_the_protected_borrower)
{
	struct fx f;
	int demo, research;
	int64_t at = 0;

	fx_init(&f);
	fx_node(&f, "n1", 2, NULL, NULL, NULL);
	fx_node(&f, "n2", 2, NULL, NULL, NULL);
	demo = fx_team(&f, "demo", 4, -1, -1, "lab");
	research = fx_team(&f, "research", 2, 2, -1, "lab");
	/* a reclaim delay longer than the minimum runtime: the minimum ends it */
	f.in.cfg.reclaim_delay_s = 3600;
	/* borrowing 2, started 60 s ago: protected for 540 s more (normal: 600 s) */
	fx_run(&f, 30, research, "n1:0-1|n2:0-1", 60, 86400);
	fx_pend(&f, 100, demo, 1, 2, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_INT_EQ(f.d->head, fx_pidx(&f, 100));
	CHECK(fx_resv(&f, 100, SCHED_RESV_HEAD, &at) != NULL);
	CHECK_INT_EQ(at, NOW_MS + S(86400));
	CHECK_INT_EQ(f.d->pending[0].protected_job, 30);
	CHECK_INT_EQ(f.d->pending[0].protected_count, 1);
	CHECK_INT_EQ(f.d->pending[0].protected_until_ms, NOW_MS + S(540));
	CHECK_STR_EQ(fx_reason_at(&f, 100, "tomorrow 01:46", "14:35"),
		     "waiting for a node with 2 free GPUs: the borrowing job that holds them is "
		     "protected until 14:35 (minimum runtime); next in line, nodes reserved "
		     "from tomorrow 01:46");
	CHECK_STR_EQ(fx_reason(&f, 100),
		     "waiting for a node with 2 free GPUs: the borrowing job that holds them is "
		     "protected until 9m00s from now (minimum runtime); next in line, nodes "
		     "reserved from in 24h00m");

	/* once the protection ends, reclaim takes it */
	f.in.now_ms = NOW_MS + S(540);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "30");
	CHECK_STR_EQ(fx_reason(&f, 100), "waiting for job 30 to be preempted");

	/* not preemptible at all: no reclaim will ever happen, nothing to name */
	f.in.now_ms = NOW_MS;
	f.run[0].preemptible = false;
	fx_decide(&f);
	CHECK_INT_EQ(f.d->pending[0].protected_job, 0);
	CHECK_STR_EQ(
	    fx_reason_when(&f, 100, "18:00"),
	    "waiting for a node with 2 free GPUs; next in line, nodes reserved from 18:00");
	fx_done(&f);
}

/*
 * The same borrower under the default reclaim delay (60 s) and a cohort of
 * its own: the delay, not the 600 s class minimum, ends its protection
 * against reclaim, and the reason says so; class preemption within its
 * team still waits for the minimum.
 */
TY_TEST(reclaim_waits_the_cohort_delay_not_the_minimum_runtime)
{
	static const struct sched_cohort_in lab[] = {{"lab", 120}, {"elsewhere", 5}};
	struct fx f;
	int demo, research;

	fx_init(&f);
	fx_node(&f, "n1", 2, NULL, NULL, NULL);
	fx_node(&f, "n2", 2, NULL, NULL, NULL);
	demo = fx_team(&f, "demo", 4, -1, -1, "lab");
	research = fx_team(&f, "research", 2, 2, -1, "lab");
	fx_run(&f, 30, research, "n1:0-1|n2:0-1", 20, 86400);
	fx_pend(&f, 100, demo, 1, 2, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_INT_EQ(f.d->pending[0].protected_job, 30);
	CHECK_INT_EQ(f.d->pending[0].protected_until_ms, NOW_MS + S(40));
	CHECK(f.d->pending[0].protected_by_delay);
	CHECK_STR_EQ(fx_reason(&f, 100),
		     "waiting for a node with 2 free GPUs: the borrowing job that holds them is "
		     "protected until 40s from now (reclaim delay); next in line, nodes "
		     "reserved from in 24h00m");
	f.in.now_ms = NOW_MS + S(40);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "30");

	/* the cohort's own delay (a name no team has changes nothing) */
	f.in.now_ms = NOW_MS + S(40);
	f.in.cohorts = lab;
	f.in.ncohorts = 2;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_INT_EQ(f.d->pending[0].protected_until_ms, NOW_MS + S(100));
	f.in.now_ms = NOW_MS + S(100);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "30");
	fx_done(&f);
}

/* Within a team, a higher class still waits for the victim's minimum runtime. */
TY_TEST(class_preemption_still_waits_the_minimum_runtime)
{
	struct fx f;
	int t;

	fx_init(&f);
	fx_node(&f, "n1", 2, NULL, NULL, NULL);
	t = fx_team(&f, "t", 2, -1, -1, "lab");
	fx_team(&f, "peer", 2, -1, -1, "lab");
	fx_run(&f, 30, t, "n1:0-1", 120, 86400)->cls = SCHED_CLASS_LOW;
	fx_pend(&f, 100, t, 1, 2, 0)->cls = SCHED_CLASS_HIGH;
	f.in.cfg.reclaim_delay_s = 0;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), ""); /* low: 300 s */
	f.in.now_ms = NOW_MS + S(180);
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "30");
	fx_done(&f);
}

/*
 * A job whose victims were preempted starts on the nodes held for it
 * (sched_pending_in.held_nodes), not wherever fits best; while they still
 * stop it keeps waiting for those nodes rather than starting elsewhere.
 */
TY_TEST(held_nodes_are_kept_across_decisions)
{
	struct fx f;
	int a;
	int held[1];

	fx_init(&f);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 32, -1, -1, NULL);
	held[0] = fx_find_node(&f, "n1");
	fx_run(&f, 11, a, "n2:0-3", 3600, 3600);
	fx_pend(&f, 20, a, 1, 4, 0)->cls = SCHED_CLASS_HIGH;

	/* victims gone: without a hold it goes where it fits best (n2) */
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 20), "n2");
	/* with one, on the held node */
	f.pend[0].held_nodes = held;
	f.pend[0].nheld = 1;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 20), "n1");

	/* its victim still stops on n1: it waits for n1 and preempts nothing new */
	{
		struct sched_running_in *r = fx_run(&f, 10, a, "n1:0-7", 3600, 3600);

		r->cls = SCHED_CLASS_LOW;
		r->preempting = true;
		r->preempted_for = 20;
	}
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 20), NULL);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_STR_EQ(fx_reason(&f, 20), "waiting for job 10 to be preempted");
	CHECK_STR_EQ(fx_resv(&f, 20, SCHED_RESV_PREEMPTION, NULL), "n1");
	/* without the hold it would start on n2 at once */
	f.pend[0].held_nodes = NULL;
	f.pend[0].nheld = 0;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 20), "n2");

	/* a held node that no longer fits the job (drained) is ignored */
	f.in.nrunning = 1;
	f.pend[0].held_nodes = held;
	f.pend[0].nheld = 1;
	f.nodes[held[0]].schedulable = false;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 20), "n2");
	fx_done(&f);
}
