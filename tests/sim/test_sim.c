/* The scheduler simulation: fair shares, the reservation rule and the core's invariants. */
#include "sim.h"
#include "ty_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static struct sim_report *run(const struct sim_config *cfg)
{
	struct sim_workload *w = NULL;
	struct sim_report *r = NULL;
	struct ty_err err = {0};

	if (sim_workload_generate(&w, cfg, &err)) {
		FAIL("generate: %s", err.msg);
		return NULL;
	}
	if (sim_run(&r, w, &err))
		FAIL("run: %s", err.msg);
	sim_workload_free(w);
	return r;
}

TY_TEST(workload_is_well_formed)
{
	struct sim_config cfg;
	struct sim_workload *w = NULL;
	struct ty_err err = {0};
	int64_t nominal = 0;

	sim_config_default(&cfg);
	REQUIRE_INT_EQ(sim_workload_generate(&w, &cfg, &err), 0);
	CHECK(w->njobs > 1000);
	for (int t = 0; t < w->nteams; t++) {
		nominal += w->teams[t].nominal;
		CHECK(w->teams[t].weight >= 1);
	}
	/* capacity outside every quota could never be borrowed */
	CHECK_INT_EQ(nominal, cfg.nodes * cfg.gpus_per_node);
	for (int i = 0; i < w->njobs; i++) {
		const struct sim_job *j = &w->jobs[i];

		ty_test_context("job %lld", (long long)j->id);
		CHECK_INT_EQ(j->id, i + 1);
		CHECK(i == 0 || w->jobs[i - 1].submit <= j->submit);
		CHECK(j->submit >= 0 && j->submit < cfg.horizon);
		CHECK(j->nodes >= 1 && j->nodes <= 8);
		CHECK(j->gpus_per_node >= 1 && j->gpus_per_node <= cfg.gpus_per_node);
		CHECK(j->duration >= 60 && j->duration <= j->max_runtime);
		CHECK(!j->need_block || j->nodes > 1);
		CHECK(j->ckpt_cost >= cfg.ckpt_cost_min && j->ckpt_cost <= cfg.ckpt_cost_max);
		CHECK(j->ckpt_cost < j->ckpt_every);
		if (ty_test_failed())
			break;
	}
	sim_workload_free(w);
}

TY_TEST(same_seed_same_report)
{
	struct sim_config cfg;
	struct sim_report *a, *b;

	sim_config_default(&cfg);
	cfg.nodes = 16;
	cfg.block_nodes = 4;
	cfg.teams = 4;
	cfg.light_teams = 1;
	cfg.horizon = 12 * 3600;
	cfg.warmup = 2 * 3600;
	cfg.drain = 3600;
	cfg.seed = 42;
	a = run(&cfg);
	b = run(&cfg);
	REQUIRE(a && b);
	CHECK_INT_EQ(a->starts, b->starts);
	CHECK_INT_EQ(a->preemptions, b->preemptions);
	CHECK_INT_EQ(a->backfill_starts, b->backfill_starts);
	CHECK_INT_EQ(a->completed, b->completed);
	CHECK(a->delay.p99 == b->delay.p99);
	for (int t = 0; t < a->nteams; t++)
		CHECK(a->teams[t].gpu_seconds == b->teams[t].gpu_seconds);
	CHECK_INT_EQ(a->violations, 0);
	sim_report_free(a);
	sim_report_free(b);
}

/*
 * Sustained contention: the default run (128 nodes x 8 GPUs, 16 teams in 4
 * cohorts, 3 simulated days at an offered load of 140 %, three light teams
 * that lend idle nominal to their cohorts): over the measured window every
 * team's share of delivered GPU-seconds is within 5 points of its target,
 * the core never broke an invariant (double-booked GPUs or ports, a split
 * block, a quota exceeded, a non-preemptible or too-young victim, a class
 * preemption across teams), and the starvation bound held: every head job
 * with a reservation started no later than that reservation, unless a
 * more urgent job or a quota change voided it (sim.c, track_head; one tick
 * of cycle granularity allowed: the core is told the stop delay).
 */
TY_TEST(contention_shares_and_starvation_bound)
{
	struct sim_config cfg;
	struct sim_report *r;
	char line[256];

	sim_config_default(&cfg);
	r = run(&cfg);
	REQUIRE(r != NULL);
	for (int t = 0; t < r->nteams; t++) {
		const struct sim_team_report *tr = &r->teams[t];

		snprintf(
		    line, sizeof(line),
		    "%s weight %d nominal %d: achieved %.1f %% target %.1f %% backlogged %.0f %%",
		    tr->name, tr->weight, tr->nominal, 100 * tr->achieved, 100 * tr->target,
		    100 * tr->backlogged);
		ty_test_note("%s", line);
		ty_test_context("%s", line);
		CHECK(fabs(tr->achieved - tr->target) <= 0.05);
	}
	ty_test_context(NULL);
	ty_test_note("utilization %.1f %%, %lld starts (%lld backfill), %lld preemptions, "
		     "%lld reserved heads (%lld on time, %lld late, %lld displaced)",
		     100 * r->utilization, (long long)r->starts, (long long)r->backfill_starts,
		     (long long)r->preemptions, (long long)r->reserved_heads,
		     (long long)r->reserved_on_time, (long long)r->reserved_late,
		     (long long)r->reserved_displaced);
	ty_test_note("preemption churn: %lld victims restarted before the job they were "
		     "preempted for, %lld cross-cohort reclaims, %lld reclaims of a team running "
		     "within its nominal quota",
		     (long long)r->restarted_before_for, (long long)r->reclaim_cross_cohort,
		     (long long)r->reclaim_not_borrowing);
	ty_test_note("of which %lld reclaim and %lld class victims while that job held nodes for "
		     "its victims; %lld decisions over-counted a team; %.3f preemptions per start; "
		     "%.1f GPU-hours lost",
		     (long long)r->restarted_reclaim_fits, (long long)r->restarted_class_fits,
		     (long long)r->overcounted,
		     r->starts ? (double)r->preemptions / (double)r->starts : 0.0,
		     (double)r->lost_gpu_seconds / 3600);
	if (r->violations)
		ty_test_note("first violation: %s", r->first_violation);
	CHECK_INT_EQ(r->violations, 0);
	/*
	 * No preemption loops (docs/scheduling.md §3): no reclaim victim starts
	 * again while the job it was preempted for still waits and fits; reclaim
	 * takes only from teams whose running gangs borrow, in the reclaiming
	 * team's cohort; a team's reported use never counts a GPU twice.
	 */
	CHECK_INT_EQ(r->restarted_reclaim_fits, 0);
	CHECK_INT_EQ(r->reclaim_not_borrowing, 0);
	if (r->reclaim_not_borrowing)
		ty_test_note("first: %s", r->first_anomaly);
	CHECK_INT_EQ(r->reclaim_cross_cohort, 0);
	CHECK_INT_EQ(r->overcounted, 0);
	if (r->overcounted)
		ty_test_note("first: %s", r->first_overcount);
	/*
	 * Preemptions per start. Without loops a preemption serves one start of
	 * a more urgent job (reclaim: a team back to its nominal; class: a
	 * higher class of the same team), and most starts need none: this run
	 * measures about 0.26 (the week-long bench run 0.1-0.3). With the
	 * reclaim ping-pong it was 1.5 (each victim restarted and was preempted
	 * again), so 0.5 fails if a loop comes back and leaves room for seeds.
	 */
	CHECK(r->starts > 0 && (double)r->preemptions / (double)r->starts <= 0.5);
	CHECK_INT_EQ(r->reserved_late, 0);
	if (r->reserved_late)
		ty_test_note("worst: job %lld started %.0f s after its reservation",
			     (long long)r->worst_late_job, r->worst_lateness);
	/* the run exercised what it claims to check */
	CHECK(r->reserved_heads > 0);
	CHECK(r->backfill_starts > 0);
	CHECK(r->preemptions > 0);
	CHECK(r->utilization > 0.80);
	sim_report_free(r);
}

/*
 * Checkpoint-aware preemption with the daemon's inputs (committed
 * checkpoints as their events arrive, the measured grace, the reclaim
 * delay): the report's fields exist and are sane, and the old victim choice
 * (youngest first) ran on the same workload and seed.
 */
TY_TEST(checkpoint_aware_preemption_report)
{
	struct sim_config cfg;
	struct sim_workload *w = NULL;
	struct sim_report *r = NULL;
	struct ty_err err = {0};

	sim_config_default(&cfg);
	cfg.nodes = 32;
	cfg.block_nodes = 4;
	cfg.teams = 8;
	cfg.cohorts = 2;
	cfg.light_teams = 2;
	cfg.horizon = 24 * 3600;
	cfg.warmup = 4 * 3600;
	cfg.drain = 6 * 3600;
	cfg.seed = 7;
	REQUIRE_INT_EQ(sim_workload_generate(&w, &cfg, &err), 0);
	REQUIRE_INT_EQ(sim_compare(&r, w, &err), 0);
	ty_test_note("%lld preemptions, %lld killed on commit, %lld measured graces; reclaim "
		     "wait of %lld jobs p50 %.0f s p90 %.0f s max %.0f s; lost %.1f GPU-hours, "
		     "youngest first %.1f in %lld preemptions",
		     (long long)r->preemptions, (long long)r->killed_on_commit,
		     (long long)r->measured_graces, (long long)r->reclaim_wait.n,
		     r->reclaim_wait.p50, r->reclaim_wait.p90, r->reclaim_wait.max,
		     (double)r->lost_gpu_seconds / 3600, (double)r->lost_gpu_seconds_by_age / 3600,
		     (long long)r->preemptions_by_age);
	CHECK_INT_EQ(r->violations, 0);
	if (r->violations)
		ty_test_note("first violation: %s", r->first_violation);
	CHECK(r->preempt_reclaim > 0);
	CHECK(r->killed_on_commit > 0 && r->killed_on_commit <= r->preemptions);
	CHECK(r->measured_graces <= r->preemptions);
	CHECK(r->reclaim_wait.n > 0 && r->reclaim_wait.n <= r->preempt_reclaim);
	CHECK(r->reclaim_wait.p50 >= 0 && r->reclaim_wait.p50 <= r->reclaim_wait.p90 &&
	      r->reclaim_wait.p90 <= r->reclaim_wait.max);
	CHECK(r->lost_gpu_seconds >= 0);
	CHECK(r->lost_gpu_seconds_by_age >= 0);
	CHECK(r->preemptions_by_age > 0);
	sim_report_free(r);
	/* a plain run leaves the comparison out */
	REQUIRE_INT_EQ(sim_run(&r, w, &err), 0);
	CHECK_INT_EQ(r->lost_gpu_seconds_by_age, -1);
	sim_report_free(r);
	sim_workload_free(w);
}

/* Below capacity nothing starves: every job starts and completes. */
TY_TEST(light_load_everything_completes)
{
	struct sim_config cfg;
	struct sim_report *r;

	sim_config_default(&cfg);
	cfg.load = 0.5;
	cfg.horizon = 24 * 3600;
	cfg.warmup = 4 * 3600;
	cfg.drain = 48 * 3600;
	cfg.seed = 3;
	r = run(&cfg);
	REQUIRE(r != NULL);
	CHECK_INT_EQ(r->violations, 0);
	CHECK_INT_EQ(r->unfinished, 0);
	CHECK_INT_EQ(r->completed, r->jobs);
	CHECK_INT_EQ(r->reserved_late, 0);
	ty_test_note("queueing delay p50 %.0f s, p99 %.0f s, max %.0f s", r->delay.p50,
		     r->delay.p99, r->delay.max);
	sim_report_free(r);
}

/*
 * Start-time estimates' accuracy (docs/scheduling.md, "Start-time
 * estimates"; issue 21's goal): told the true runtimes, the median error of
 * the first estimate is at most 15 % of the wait for jobs that waited more
 * than 10 min, at 80 % load (at the default 140 % every new arrival and
 * reclaim reorders the queue: bench/RESULTS.md records that too). The
 * others are reported, and max_runtime alone is the worst.
 */
TY_TEST(estimate_accuracy_goal)
{
	struct sim_config cfg;
	struct sim_workload *w = NULL;
	struct sim_report *r = NULL;
	struct ty_err err = {0};

	sim_config_default(&cfg);
	cfg.nodes = 32;
	cfg.block_nodes = 4;
	cfg.teams = 8;
	cfg.cohorts = 2;
	cfg.light_teams = 2;
	cfg.load = 0.8;
	cfg.horizon = 24 * 3600;
	cfg.warmup = 4 * 3600;
	cfg.drain = 6 * 3600;
	cfg.seed = 7;
	cfg.estimate_every = 600;
	REQUIRE_INT_EQ(sim_workload_generate(&w, &cfg, &err), 0);
	REQUIRE_INT_EQ(sim_run(&r, w, &err), 0);
	for (int m = 0; m < SIM_NEST; m++)
		ty_test_note("mode %d: %lld estimated, %lld waited > 10 min, median %.1f %%, p90 "
			     "%.1f %%",
			     m, (long long)r->est_jobs[m], (long long)r->est_error[m].n,
			     100 * r->est_error[m].p50, 100 * r->est_error[m].p90);
	CHECK_INT_EQ(r->violations, 0);
	CHECK(r->estimates > 0 && r->estimates % SIM_NEST == 0);
	CHECK(r->est_error[SIM_EST_EXACT].n >= 50); /* enough to mean something */
	CHECK(r->est_error[SIM_EST_EXACT].p50 <= 0.15);
	CHECK(r->est_error[SIM_EST_EXACT].p50 < r->est_error[SIM_EST_MAX_RUNTIME].p50);
	CHECK(r->est_error[SIM_EST_HISTORY].n > 0);
	CHECK(r->est_error[SIM_EST_EXACT].p50 <= r->est_error[SIM_EST_EXACT].p90);
	sim_report_free(r);
	/* off by default: nothing estimated */
	cfg.estimate_every = 0;
	sim_workload_free(w);
	w = NULL;
	REQUIRE_INT_EQ(sim_workload_generate(&w, &cfg, &err), 0);
	REQUIRE_INT_EQ(sim_run(&r, w, &err), 0);
	CHECK_INT_EQ(r->estimates, 0);
	CHECK_INT_EQ(r->est_error[SIM_EST_EXACT].n, 0);
	sim_report_free(r);
	sim_workload_free(w);
}
