/*
 * Start-time estimates (scheduler/core/estimate.c): sched_decide() run
 * forward over the running gangs' expected ends; docs/scheduling.md,
 * "Start-time estimates".
 */
#include "policy_fixture.h"

struct est {
	struct sched_estimates *s;
	struct sched_estimate_in e;
	int64_t run_end[FX_MAXR];
	bool run_hist[FX_MAXR];
	int64_t pend_rt[FX_MAXP];
	bool pend_hist[FX_MAXP];
};

static void est_init(struct est *x)
{
	memset(x, 0, sizeof(*x));
	x->e.run_end_ms = x->run_end;
	x->e.run_history = x->run_hist;
	x->e.pend_runtime_s = x->pend_rt;
	x->e.pend_history = x->pend_hist;
}

static void est_run(struct fx *f, struct est *x)
{
	struct ty_err err = {0};

	fx_decide(f);
	sched_estimates_free(x->s);
	x->s = NULL;
	REQUIRE_INT_EQ(sched_estimate(&x->s, &f->in, f->d, &x->e, &err), 0);
	REQUIRE(x->s != NULL);
	REQUIRE_INT_EQ(x->s->njobs, f->in.npending);
}

static const struct sched_estimate *est_of(struct fx *f, struct est *x, int64_t job)
{
	int i = fx_pidx(f, job);

	REQUIRE(i >= 0);
	return &x->s->job[i];
}

/* "41,42" of the waits_for ids */
static const char *waits(const struct sched_estimate *e)
{
	char buf[256];
	size_t l = 0;

	buf[0] = '\0';
	for (int k = 0; k < e->nwaits; k++)
		l += (size_t)snprintf(buf + l, sizeof(buf) - l, "%s%lld", k ? "," : "",
				      (long long)e->waits_for[k]);
	return ty_test_strf("%s", buf);
}

static void est_done(struct fx *f, struct est *x)
{
	sched_estimates_free(x->s);
	x->s = NULL;
	fx_done(f);
}

TY_TEST(full_cluster_next_job_starts_at_the_earliest_end_that_frees_enough)
{
	struct fx f;
	struct est x;
	const struct sched_estimate *e;
	int a;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-3", 60, 600);  /* half of n1 frees at +10 min */
	fx_run(&f, 41, a, "n1:4-7", 60, 1800); /* the other half at +30 min */
	fx_run(&f, 42, a, "n2:0-7", 60, 1200); /* n2 at +20 min */
	fx_pend(&f, 100, a, 1, 8, 0);	       /* needs a whole node: n2 at +20 min */
	fx_pend(&f, 101, a, 1, 4, 1);	       /* half a node: n1 at +10 min */
	fx_pend(&f, 102, a, 2, 8, 2);	       /* both nodes */
	est_run(&f, &x);
	e = est_of(&f, &x, 100);
	CHECK_INT_EQ(e->kind, SCHED_EST_AT);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(1200));
	CHECK_STR_EQ(waits(e), "42");
	CHECK(!e->history);
	e = est_of(&f, &x, 101);
	CHECK_INT_EQ(e->kind, SCHED_EST_AT);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(600));
	CHECK_STR_EQ(waits(e), "40");
	/* both nodes whole: n1 at +30 min, n2 once 100 (started +20 min, 1 h) ends */
	e = est_of(&f, &x, 102);
	CHECK_INT_EQ(e->kind, SCHED_EST_AT);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(1200 + 3600));
	CHECK(x.s->steps >= 3);
	est_done(&f, &x);
}

TY_TEST(queue_order_is_respected)
{
	struct fx f;
	struct est x;
	int a;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 600);
	/* the later submission is behind: it starts when the first one ends */
	fx_pend(&f, 101, a, 1, 8, 5)->max_runtime_s = 900;
	fx_pend(&f, 100, a, 1, 8, 1)->max_runtime_s = 1800;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(600));
	CHECK_INT_EQ(est_of(&f, &x, 101)->start_ms, NOW_MS + S(600 + 1800));
	CHECK_STR_EQ(waits(est_of(&f, &x, 101)), "100");
	est_done(&f, &x);
}

TY_TEST(quota_holds_a_job_until_its_teams_gang_ends)
{
	struct fx f;
	struct est x;
	const struct sched_estimate *e;
	int a, b;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, 0, -1, NULL); /* no cohort, nominal 8: one gang at a time */
	b = fx_team(&f, "b", 8, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 3600);
	fx_run(&f, 41, b, "n2:0-3", 60, 600);
	fx_pend(&f, 100, a, 1, 4, 0); /* n2 has room at once, the quota has not */
	est_run(&f, &x);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_WAIT_NOMINAL);
	e = est_of(&f, &x, 100);
	CHECK_INT_EQ(e->kind, SCHED_EST_AT);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(3600));
	CHECK_STR_EQ(waits(e), "40");
	est_done(&f, &x);
}

TY_TEST(topology_waits_for_a_whole_block)
{
	struct fx f;
	struct est x;
	int a;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "a1", 8, "z", "r", "A");
	fx_node(&f, "a2", 8, "z", "r", "A");
	fx_node(&f, "b1", 8, "z", "r", "B");
	fx_node(&f, "b2", 8, "z", "r", "B");
	a = fx_team(&f, "a", 32, -1, -1, NULL);
	fx_run(&f, 40, a, "a1:0-7", 60, 600);
	fx_run(&f, 41, a, "b1:0-7", 60, 900);
	fx_run(&f, 42, a, "a2:0-7", 60, 2400);
	fx_run(&f, 43, a, "b2:0-7", 60, 1200);
	/* two nodes are free at +15 min (a1, b1), but one block only at +20 min */
	fx_pend(&f, 100, a, 2, 8, 0)->required = SCHED_TOPO_BLOCK;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(1200));
	CHECK_STR_EQ(waits(est_of(&f, &x, 100)), "43");
	est_done(&f, &x);
}

TY_TEST(history_shortens_the_expected_ends)
{
	struct fx f;
	struct est x;
	const struct sched_estimate *e;
	int a;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 7200);
	x.run_end[0] = NOW_MS + S(900); /* its history says +15 min, its limit +2 h */
	x.run_hist[0] = true;
	fx_pend(&f, 100, a, 1, 8, 0)->max_runtime_s = 7200;
	x.pend_rt[0] = 600; /* it runs 10 min as a rule */
	x.pend_hist[0] = true;
	fx_pend(&f, 101, a, 1, 8, 1);
	est_run(&f, &x);
	e = est_of(&f, &x, 100);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(900));
	CHECK(e->history);
	e = est_of(&f, &x, 101);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(1500));
	CHECK_STR_EQ(waits(e), "100");
	CHECK(e->history);

	/* an end already past its history is expected at its limit */
	x.run_end[0] = NOW_MS - S(1);
	est_run(&f, &x);
	e = est_of(&f, &x, 100);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(7200));
	CHECK(!e->history);
	/* history never makes an end later than the limit */
	x.run_end[0] = NOW_MS + S(9000);
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(7200));
	est_done(&f, &x);
}

TY_TEST(placed_never_and_beyond_the_horizon)
{
	struct fx f;
	struct est x;
	const struct sched_estimate *e;
	int a;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 10 * 86400); /* ends in 10 days */
	fx_pend(&f, 100, a, 1, 8, 0);		     /* starts now on n2 */
	fx_pend(&f, 101, a, 1, 9, 1);		     /* 9 GPUs per node: never */
	fx_pend(&f, 102, a, 2, 8, 2)->max_runtime_s = 30 * 86400;
	est_run(&f, &x);
	e = est_of(&f, &x, 100);
	CHECK_INT_EQ(e->kind, SCHED_EST_NOW);
	CHECK_INT_EQ(e->start_ms, NOW_MS);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 101)].reason, SCHED_NEVER_FITS);
	CHECK_INT_EQ(est_of(&f, &x, 101)->kind, SCHED_EST_NEVER);
	e = est_of(&f, &x, 102);
	CHECK_INT_EQ(e->kind, SCHED_EST_HORIZON);
	CHECK_INT_EQ(e->start_ms, NOW_MS + S(7 * 86400));

	/* a shorter horizon: 102 still waits, not before it */
	x.e.cfg.horizon_s = 1800;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 102)->kind, SCHED_EST_HORIZON);
	CHECK_INT_EQ(est_of(&f, &x, 102)->start_ms, NOW_MS + S(1800));
	est_done(&f, &x);
}

/*
 * One 8-GPU node busy for 10 min, and 10 whole-node jobs of 10 min (100..109,
 * submitted at submit_s, submit_s + 1, ...) waiting one after another; its team.
 */
static int ten_in_a_row(struct fx *f, struct est *x, int64_t submit_s)
{
	int a;

	fx_init(f);
	est_init(x);
	fx_node(f, "n1", 8, NULL, NULL, NULL);
	a = fx_team(f, "a", 8, -1, -1, NULL);
	fx_run(f, 40, a, "n1:0-7", 60, 600);
	for (int k = 0; k < 10; k++)
		fx_pend(f, 100 + k, a, 1, 8, submit_s + k)->max_runtime_s = 600;
	return a;
}

TY_TEST(cost_is_bounded_by_jobs_and_steps)
{
	struct fx f;
	struct est x;

	ten_in_a_row(&f, &x, 0);

	/* unbounded: one a step, every 10 min */
	est_run(&f, &x);
	for (int k = 0; k < 10; k++) {
		ty_test_context("job %d", 100 + k);
		CHECK_INT_EQ(est_of(&f, &x, 100 + k)->kind, SCHED_EST_AT);
		CHECK_INT_EQ(est_of(&f, &x, 100 + k)->start_ms, NOW_MS + S(600 * (k + 1)));
	}
	CHECK_INT_EQ(x.s->steps, 10);

	/* 3 jobs: the rest are not estimated */
	x.e.cfg.max_jobs = 3;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 102)->kind, SCHED_EST_AT);
	CHECK_INT_EQ(est_of(&f, &x, 103)->kind, SCHED_EST_NONE);
	CHECK_INT_EQ(x.s->steps, 3);

	/* 4 steps: the rest are beyond where it stopped */
	x.e.cfg.max_jobs = 0;
	x.e.cfg.max_steps = 4;
	est_run(&f, &x);
	CHECK_INT_EQ(x.s->steps, 4);
	CHECK_INT_EQ(est_of(&f, &x, 103)->start_ms, NOW_MS + S(2400));
	CHECK_INT_EQ(est_of(&f, &x, 104)->kind, SCHED_EST_HORIZON);
	CHECK_INT_EQ(est_of(&f, &x, 104)->start_ms, NOW_MS + S(2400));
	CHECK_INT_EQ(x.s->reached_ms, NOW_MS + S(2400));
	est_done(&f, &x);
}

TY_TEST(until_last_stops_once_the_last_job_has_its_answer)
{
	struct fx f;
	struct est x;
	int a = ten_in_a_row(&f, &x, 10);

	/* the last of the input, third in queue order */
	fx_pend(&f, 200, a, 1, 8, 11)->max_runtime_s = 600;
	x.e.cfg.until_last = true;

	/* its start is the third step's, as a whole run finds it; the run stops there */
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 200)->kind, SCHED_EST_AT);
	CHECK_INT_EQ(est_of(&f, &x, 200)->start_ms, NOW_MS + S(1800));
	CHECK_INT_EQ(x.s->steps, 3);
	CHECK_INT_EQ(est_of(&f, &x, 103)->kind, SCHED_EST_HORIZON);
	x.e.cfg.until_last = false;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 200)->start_ms, NOW_MS + S(1800));
	CHECK_INT_EQ(x.s->steps, 11);

	/* past max_jobs it gets no answer, so no step is run for it */
	x.e.cfg.until_last = true;
	x.e.cfg.max_jobs = 2;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 200)->kind, SCHED_EST_NONE);
	CHECK_INT_EQ(x.s->steps, 0);
	est_done(&f, &x);
}

TY_TEST(close_ends_coalesce_late_never_early)
{
	struct fx f;
	struct est x;
	int a;

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 10000);
	fx_run(&f, 41, a, "n2:0-7", 60, 10100); /* within 2 % of 10000 s */
	fx_pend(&f, 100, a, 1, 8, 0);
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(10100));
	CHECK_INT_EQ(x.s->steps, 1);
	x.e.cfg.coalesce_permille = 1; /* 0.1 %: two steps, exact */
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(10000));
	/* a floor: ends within 5 min of the first are one step whatever the wait */
	x.e.cfg.min_step_s = 300;
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(10100));
	CHECK_INT_EQ(x.s->steps, 1);
	est_done(&f, &x);
}

TY_TEST(backoff_and_stopping_gangs)
{
	struct fx f;
	struct est x;
	int a;

	fx_init(&f);
	est_init(&x);
	f.in.cfg.stop_allowance_s = 120;
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_node(&f, "n2", 8, NULL, NULL, NULL);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	fx_run(&f, 40, a, "n1:0-7", 60, 7200)->preempting = true; /* cancelled: gone in 2 min */
	fx_pend(&f, 100, a, 1, 8, 0)->not_before_ms = NOW_MS + S(300); /* backoff: n2 idle */
	fx_pend(&f, 101, a, 1, 8, 1);
	est_run(&f, &x);
	/* 101 took n2 now; n1 is free once the cancelled gang stopped */
	CHECK_INT_EQ(est_of(&f, &x, 101)->kind, SCHED_EST_NOW);
	CHECK_INT_EQ(est_of(&f, &x, 100)->start_ms, NOW_MS + S(300));
	CHECK_STR_EQ(waits(est_of(&f, &x, 100)), ""); /* its backoff, no end, held it */

	/* a backoff's end is a step of its own: nothing ends then */
	f.pend[0].not_before_ms = NOW_MS + S(3000);
	f.pend[1].nodes = 2; /* and 101 waits for n1 */
	est_run(&f, &x);
	CHECK_INT_EQ(est_of(&f, &x, 101)->start_ms, NOW_MS + S(120));
	CHECK_STR_EQ(waits(est_of(&f, &x, 101)), "40");
	est_done(&f, &x);
}

TY_TEST(bad_input_is_refused)
{
	struct fx f;
	struct est x;
	struct ty_err err = {0};

	fx_init(&f);
	est_init(&x);
	fx_node(&f, "n1", 8, NULL, NULL, NULL);
	fx_team(&f, "a", 8, -1, -1, NULL);
	fx_pend(&f, 100, 0, 1, 8, 0);
	fx_decide(&f);
	x.e.cfg.max_steps = -1;
	CHECK_INT_EQ(sched_estimate(&x.s, &f.in, f.d, &x.e, &err), TY_EINVAL);
	CHECK_STR_EQ(err.msg, "estimate: negative bound");
	CHECK(x.s == NULL);
	x.e.cfg.max_steps = 0;
	err = (struct ty_err){0};
	f.in.npending = 0; /* not the input the decision came from */
	CHECK_INT_EQ(sched_estimate(&x.s, &f.in, f.d, &x.e, &err), TY_EINVAL);
	CHECK_STR_EQ(err.msg, "estimate: decision is not the input's");
	/* NULL extras: everything by max runtime */
	f.in.npending = 1;
	CHECK_INT_EQ(sched_estimate(&x.s, &f.in, f.d, NULL, &err), 0);
	CHECK_INT_EQ(x.s->job[0].kind, SCHED_EST_NOW);
	est_done(&f, &x);
}
