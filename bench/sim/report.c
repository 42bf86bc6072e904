/* The simulation's report: percentiles, target shares, and the printed form. */
#include "sim.h"
#include "sim_int.h"

#include "core/policy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentiles of v (sorted in place). */
void sim__delay_fill(struct sim_delay *d, double *v, int64_t n)
{
	memset(d, 0, sizeof(*d));
	d->n = n;
	if (n == 0)
		return;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
#define RANK(p)                                                                                    \
	v[(int64_t)ceil((p) / 100.0 * (double)n) - 1 < 0                                           \
	      ? 0                                                                                  \
	      : (int64_t)ceil((p) / 100.0 * (double)n) - 1]
	d->p50 = RANK(50);
	d->p90 = RANK(90);
	d->p99 = RANK(99);
#undef RANK
	d->max = v[n - 1];
}

/*
 * Weight-proportional allotment bounded by quotas (water filling): every
 * team gets clamp(λ·weight, lo, hi) with λ raised until `cap` is handed
 * out, or hi when even that does not use cap up.
 */
void sim__water_fill(double *x, const double *weight, const double *lo, const double *hi, int n,
		     double cap)
{
	double a = 0, b = 1, sum = 0;

	for (int i = 0; i < n; i++)
		sum += hi[i];
	if (sum <= cap) {
		memcpy(x, hi, (size_t)n * sizeof(*x));
		return;
	}
	for (int i = 0; i < n; i++)
		if (weight[i] > 0 && hi[i] / weight[i] > b)
			b = hi[i] / weight[i];
	for (int it = 0; it < 200; it++) {
		double mid = (a + b) / 2;

		sum = 0;
		for (int i = 0; i < n; i++)
			sum += fmin(fmax(mid * weight[i], lo[i]), hi[i]);
		if (sum > cap)
			b = mid;
		else
			a = mid;
	}
	for (int i = 0; i < n; i++)
		x[i] = fmin(fmax(a * weight[i], lo[i]), hi[i]);
}

void sim_report_free(struct sim_report *r)
{
	if (!r)
		return;
	free(r->teams);
	free(r);
}

static const char *const class_name[SIM_NCLASS] = {"high", "normal", "low", "scavenger"};

static const char *const reason_name[] = {
    "placed",	  "nodes",    "topology", "never_fits", "borrow_limit", "cohort", "nominal",
    "preemption", "reserved", "head",	  "behind",	"scan_limit",	"port",	  "invalid",
    "backoff",	  "excluded", "on_demand", "never_fits_cpus", "never_fits_memory", "cpus",
    "memory",	  "quota_cpus", "quota_memory", "budget"};
_Static_assert(sizeof(reason_name) / sizeof(reason_name[0]) == SCHED_REASON_COUNT,
	       "a name for every enum sched_reason");
_Static_assert(SCHED_REASON_COUNT <= 24, "sim_report.reason_counts holds every reason");

/* with no job started, a delay was not measured: say so, never print 0 */
static void print_delay(FILE *f, const char *what, const struct sim_delay *d)
{
	if (d->n == 0)
		fprintf(f,
			"| %s | 0 | not measured | not measured | not measured | not measured |\n",
			what);
	else
		fprintf(f, "| %s | %lld | %.0f | %.0f | %.0f | %.0f |\n", what, (long long)d->n,
			d->p50 / 60, d->p90 / 60, d->p99 / 60, d->max / 60);
}

void sim_report_print(FILE *f, const struct sim_report *r)
{
	const struct sim_config *c = &r->cfg;

	fprintf(f,
		"Workload: seed %llu, %d teams in %d cohorts, %d nodes x %d GPUs "
		"(%d GPUs), offered load %.2f, arrivals for %.1f h (+%.1f h drain), "
		"tick %llds, usage half-life %.1f h, shares measured over [%.1f h, %.1f h).\n\n",
		(unsigned long long)c->seed, c->teams, c->cohorts, c->nodes, c->gpus_per_node,
		c->nodes * c->gpus_per_node, c->load, (double)c->horizon / 3600,
		(double)c->drain / 3600, (long long)c->tick, (double)c->half_life / 3600,
		(double)c->warmup / 3600, (double)c->horizon / 3600);
	fprintf(
	    f,
	    "Jobs %lld: started %lld, completed %lld, unfinished %lld; %lld cycles.\n"
	    "GPU utilization %.1f %%; starts %lld (%lld by backfill), preemptions %lld "
	    "(%lld reclaim, %lld class; %.0f GPU-hours of work lost since last checkpoint).\n\n",
	    (long long)r->jobs, (long long)r->started, (long long)r->completed,
	    (long long)r->unfinished, (long long)r->cycles, 100 * r->utilization,
	    (long long)r->starts, (long long)r->backfill_starts, (long long)r->preemptions,
	    (long long)r->preempt_reclaim, (long long)r->preempt_class,
	    (double)r->lost_gpu_seconds / 3600);
	fprintf(f, "| team | weight | nominal | borrow | backlogged | GPU-hours | achieved %% | "
		   "target %% | diff pp | started | preempted | wait p50/p90/max min |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
	for (int t = 0; t < r->nteams; t++) {
		const struct sim_team_report *tr = &r->teams[t];
		char borrow[16], wait[64] = "not measured";

		if (tr->delay.n)
			snprintf(wait, sizeof(wait), "%.0f/%.0f/%.0f", tr->delay.p50 / 60,
				 tr->delay.p90 / 60, tr->delay.max / 60);
		if (tr->borrow_limit < 0)
			snprintf(borrow, sizeof(borrow), "any");
		else
			snprintf(borrow, sizeof(borrow), "%d", tr->borrow_limit);
		fprintf(f,
			"| %s | %d | %d | %s | %.0f %% | %.0f | %.1f | %.1f | %+.1f | %lld | "
			"%lld | %s |\n",
			tr->name, tr->weight, tr->nominal, borrow, 100 * tr->backlogged,
			tr->gpu_seconds / 3600, 100 * tr->achieved, 100 * tr->target,
			100 * (tr->achieved - tr->target), (long long)tr->started,
			(long long)tr->preempted, wait);
	}
	fprintf(f, "\nLargest share error over backlogged teams: %.1f percentage points.\n\n",
		100 * r->max_share_error);
	fprintf(f, "| queueing delay (min) | jobs | p50 | p90 | p99 | max |\n");
	fprintf(f, "|---|---:|---:|---:|---:|---:|\n");
	print_delay(f, "all", &r->delay);
	for (int k = 0; k < SIM_NCLASS; k++)
		print_delay(f, class_name[k], &r->delay_by_class[k]);
	fprintf(f,
		"\nReservations: %lld jobs were head with a reservation. Starts of a job holding "
		"its reservation: %lld no later than it (within one tick; the core is told the stop delay), "
		"%lld later",
		(long long)r->reserved_heads, (long long)r->reserved_on_time,
		(long long)r->reserved_late);
	if (r->reserved_late)
		fprintf(f, " (worst: job %lld, %.0f s late)", (long long)r->worst_late_job,
			r->worst_lateness);
	fprintf(f,
		". %lld jobs started after their promise was voided, %lld never started. Promises "
		"voided by a more urgent job: %lld; because the job then waited for quota: %lld; "
		"renewed while still head because a more urgent job was served: %lld. A head's "
		"reservation moved later without a more urgent job served %lld times.\n",
		(long long)r->reserved_displaced, (long long)r->reserved_unstarted,
		(long long)r->promise_void_ahead, (long long)r->promise_void_quota,
		(long long)r->promise_renewed, (long long)r->reservation_slips);
	fprintf(f, "\nInvariant violations: %lld%s%s\n", (long long)r->violations,
		r->violations ? "; first: " : "", r->first_violation);
	fprintf(f,
		"\nPreemption churn: %lld victims started again while the job they were preempted "
		"for still waited (%lld reclaim and %lld class victims while that job still "
		"fitted, holding nodes for its victims); %lld reclaims took a victim from another cohort; %lld reclaims "
		"took a victim from a team whose running gangs were within its nominal quota "
		"(it borrowed only through GPUs held for its own pending jobs)%s%s.\n",
		(long long)r->restarted_before_for, (long long)r->restarted_reclaim_fits,
		(long long)r->restarted_class_fits, (long long)r->reclaim_cross_cohort,
		(long long)r->reclaim_not_borrowing, r->reclaim_not_borrowing ? "; first: " : "",
		r->first_anomaly);
	fprintf(f,
		"Double counting: %lld decisions reported a team using more than it holds plus "
		"what its holds still need%s%s. Preemptions per job start: %.3f; lost work %.1f %% "
		"of the run's GPU capacity.\n",
		(long long)r->overcounted, r->overcounted ? "; first: " : "", r->first_overcount,
		r->starts ? (double)r->preemptions / (double)r->starts : 0.0,
		r->window_capacity_gs > 0
		    ? 100.0 * (double)r->lost_gpu_seconds / r->window_capacity_gs
		    : 0.0);
	fprintf(f,
		"\nCheckpoint-aware preemption: checkpoints commit %lld-%lld s after they start, "
		"%d %% of jobs checkpoint on the signal; grace %lld s until measured, reclaim "
		"delay %lld s. %lld victims were killed as their checkpoint committed, %lld got a "
		"grace sized from a measured time. Lender's reclaim wait (only borrowers in its "
		"way, to its start; %lld jobs): p50 %.0f s, p90 %.0f s, max %.0f s.\n",
		(long long)c->ckpt_cost_min, (long long)c->ckpt_cost_max, c->signal_ckpt_pct,
		(long long)c->spec_grace, (long long)c->reclaim_delay,
		(long long)r->killed_on_commit, (long long)r->measured_graces,
		(long long)r->reclaim_wait.n, r->reclaim_wait.p50, r->reclaim_wait.p90,
		r->reclaim_wait.max);
	if (r->lost_gpu_seconds_by_age >= 0)
		fprintf(f,
			"Victim choice on the same workload and seed: least work lost since the "
			"last committed checkpoint (the daemon's) %.0f GPU-hours lost in %lld "
			"preemptions; youngest first (the old choice, checkpoint = start) %.0f "
			"GPU-hours in %lld.\n",
			(double)r->lost_gpu_seconds / 3600, (long long)r->preemptions,
			(double)r->lost_gpu_seconds_by_age / 3600,
			(long long)r->preemptions_by_age);
	if (c->estimate_every > 0) {
		static const char *const mode[SIM_NEST] = {"exact runtimes", "max_runtime only",
							   "history (team p80)"};

		fprintf(f,
			"\nStart-time estimates every %lld s (%lld runs): |predicted - actual start| / "
			"wait, from the first estimate with a time, for jobs it came more than 10 min "
			"before (predictions rounded up to the next cycle).\n\n",
			(long long)c->estimate_every, (long long)r->estimates);
		fprintf(f, "| runtimes | jobs estimated | jobs waiting > 10 min | median error | p90 "
			   "error |\n|---|---:|---:|---:|---:|\n");
		for (int m = 0; m < SIM_NEST; m++)
			fprintf(f, "| %s | %lld | %lld | %.1f %% | %.1f %% |\n", mode[m],
				(long long)r->est_jobs[m], (long long)r->est_error[m].n,
				100 * r->est_error[m].p50, 100 * r->est_error[m].p90);
		fprintf(f, "\nGoal: median error <= 15 %% with exact runtimes: %s.\n",
			r->est_error[SIM_EST_EXACT].n == 0		 ? "not measured"
			: r->est_error[SIM_EST_EXACT].p50 <= 0.15 ? "MET"
								   : "MISSED");
	}
	fprintf(f, "\nPending reasons (job-cycles):");
	for (int k = 0; k < SCHED_REASON_COUNT && k < 24; k++)
		if (r->reason_counts[k])
			fprintf(f, " %s %lld;", reason_name[k], (long long)r->reason_counts[k]);
	fprintf(f,
		"\nCore work: %lld node searches, %lld fast rejects, %lld preemption plans, "
		"%lld reservation probes.\n",
		(long long)r->fit_attempts, (long long)r->fast_rejects,
		(long long)r->preemption_plans, (long long)r->reservation_probes);
}
