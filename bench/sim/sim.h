/*
 * The scheduler simulation: a generated workload replayed through the pure
 * scheduler core in simulated time (no I/O, no threads, no wall clock), and
 * the report it produces. Shared by trainyard-sim and tests/sim/test_sim.c.
 * Deterministic from cfg->seed.
 *
 * Ownership: sim_workload_generate and sim_run return new objects, freed
 * with sim_workload_free and sim_report_free; everything else borrows.
 */
#ifndef TY_SIM_H
#define TY_SIM_H

#include "ty_err.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Priority classes, most urgent first (DESIGN §6). */
enum sim_class { SIM_HIGH, SIM_NORMAL, SIM_LOW, SIM_SCAVENGER, SIM_NCLASS };

struct sim_config {
	uint64_t seed;
	int teams;	     /* 1..64 */
	int cohorts;	     /* teams are dealt round-robin into this many cohorts */
	int nodes;	     /* cluster size */
	int gpus_per_node;   /* every node has this many */
	int block_nodes;     /* nodes per NVLink/IB-leaf block */
	int blocks_per_rack; /* racks group blocks; zones group racks */
	int racks_per_zone;
	double load;	   /* offered GPU-seconds / capacity (> 1 = sustained contention) */
	int64_t horizon;   /* simulated seconds of arrivals */
	int64_t drain;	   /* further simulated seconds without arrivals */
	int64_t warmup;	   /* shares are measured from here to horizon */
	int64_t tick;	   /* seconds between scheduling cycles */
	int64_t half_life; /* usage decay half-life in seconds */
	int64_t ckpt_min, ckpt_max; /* checkpoint interval range, seconds */
	int64_t min_runtime;	    /* preemption protection, seconds */
	int max_gang_nodes;	    /* 1..8 */
	double burst_fraction;	    /* share of jobs that arrive in sweeps */
	int light_teams;	    /* the last this many teams offer only light_load */
	double light_load;	    /* of their share (< 1: they lend idle nominal) */
	int64_t stop_delay;	    /* seconds from a preempted gang's kill to its GPUs free */
	/*
	 * Checkpoint-aware preemption (docs/dispatch.md, "Preemption"): a
	 * checkpoint takes ckpt_cost seconds (per job, in this range) from its
	 * start to its committed event, the one the daemon sees; signal_ckpt_pct
	 * of the jobs write one on the checkpoint signal (the others are killed
	 * when the grace is over). The grace is spec_grace until a job has been
	 * measured, then the core's sched_grace_seconds of its measured time.
	 */
	int64_t ckpt_cost_min, ckpt_cost_max;
	int signal_ckpt_pct;
	int64_t spec_grace;    /* the jobs' checkpoint.grace_seconds */
	int64_t reclaim_delay; /* --reclaim-delay-seconds */
	/* the old victim choice: every victim's checkpoint = its start (youngest first) */
	bool victims_by_age;
	int max_jobs; /* stop generating past this many jobs, 0 = no cap */
	/*
	 * Start-time estimates (docs/scheduling.md, "Start-time estimates"):
	 * every this many seconds sched_estimate() runs after the decision,
	 * three times (SIM_EST_*); 0 = never.
	 */
	int64_t estimate_every;
};

/* What the estimator is told about runtimes, for its accuracy (sim_report.est_error). */
enum sim_est_mode {
	SIM_EST_EXACT,	     /* the true ends and runtimes (work left) */
	SIM_EST_MAX_RUNTIME, /* max_runtime only */
	SIM_EST_HISTORY,     /* p80 of the team's last 20 completed attempts, as the daemon's */
	SIM_NEST
};

/* Sensible defaults for a test-sized run (every field set). */
void sim_config_default(struct sim_config *cfg);

struct sim_team {
	char name[24];
	int cohort;
	char cohort_name[16];
	int weight;
	int nominal;	  /* GPUs */
	int borrow_limit; /* GPUs, -1 = unlimited */
	int lend_limit;	  /* GPUs, -1 = unlimited */
	double offered;	  /* share of the cluster it asks for, before × load */
};

struct sim_job {
	int64_t id; /* 1-based, in submit order */
	int team;
	enum sim_class cls;
	int prio; /* priority inside the team, 0..9, higher first */
	int nodes, gpus_per_node;
	int64_t submit;	     /* seconds */
	int64_t duration;    /* work to do, seconds */
	int64_t max_runtime; /* limit the user gave, >= duration */
	int64_t ckpt_every;  /* seconds between checkpoints */
	int64_t ckpt_cost;   /* seconds from a checkpoint's start to its commit */
	bool signal_ckpt;    /* writes a checkpoint on the checkpoint signal */
	bool preemptible;
	bool need_block; /* topology: {required: "block"} */
};

struct sim_workload {
	struct sim_config cfg;
	struct sim_team *teams;
	int nteams;
	struct sim_job *jobs; /* ascending submit */
	int njobs;
};

/* A new workload drawn from cfg; NULL-safe free. TY_EINVAL, TY_ENOMEM. */
int sim_workload_generate(struct sim_workload **out, const struct sim_config *cfg,
			  struct ty_err *err);
void sim_workload_free(struct sim_workload *w);

struct sim_delay {
	int64_t n;
	double p50, p90, p99, max; /* seconds */
};

struct sim_team_report {
	char name[24];
	int weight, nominal, borrow_limit;
	double gpu_seconds; /* delivered in [warmup, horizon) */
	double achieved;    /* share of all delivered GPU-seconds, 0..1 */
	double target;	    /* water-filled weight share bounded by quotas, 0..1 */
	double backlogged;  /* fraction of window ticks with pending work */
	int64_t started, completed, preempted;
	struct sim_delay delay;
};

struct sim_report {
	struct sim_config cfg;
	int nteams;
	struct sim_team_report *teams;
	int64_t jobs, started, completed, unfinished;
	int64_t starts, backfill_starts, preemptions, lost_gpu_seconds;
	/*
	 * Checkpoint-aware preemption: victims killed as their checkpoint
	 * committed (before the grace was over), graces sized from a measured
	 * time, and the lender's reclaim wait: for each job that reclaim made
	 * room for, from the first cycle in which only borrowers stood in its
	 * way (protected ones, or victims it waits for) to its start.
	 */
	int64_t killed_on_commit, measured_graces;
	struct sim_delay reclaim_wait;
	/*
	 * sim_compare only: the same workload and seed with the old victim
	 * choice (cfg.victims_by_age); -1 when not run.
	 */
	int64_t lost_gpu_seconds_by_age, preemptions_by_age;
	int64_t preempt_reclaim, preempt_class;
	int64_t reclaim_cross_cohort;  /* reclaims whose victim borrows in another cohort */
	int64_t restarted_before_for;  /* victims started again while the job they were
					  preempted for still waited */
	int64_t reclaim_not_borrowing; /* reclaim victims whose team's running gangs were
					  within its nominal quota */
	/* ... of which the job they were preempted for still fitted its quota, by reason */
	int64_t restarted_reclaim_fits, restarted_class_fits;
	char first_anomaly[320];
	int64_t overcounted; /* decisions where a team's reported use exceeded what it holds
				plus what its holds still need (double counting) */
	char first_overcount[200];
	double window_capacity_gs; /* GPU-seconds of the whole run (cluster × simulated time) */
	int64_t cycles;
	double utilization;	/* used / capacity over [warmup, horizon) */
	double max_share_error; /* |achieved - target|, over backlogged teams */
	struct sim_delay delay; /* submit to first start, all jobs that started */
	struct sim_delay delay_by_class[SIM_NCLASS];
	/* the reservation rule */
	int64_t reserved_heads;	    /* jobs that were ever head with a reservation */
	int64_t reserved_on_time;   /* ... and started no later than it (+1 tick) */
	int64_t reserved_late;	    /* ... and started later */
	int64_t reserved_displaced; /* ... started after its promise was voided */
	int64_t reserved_unstarted; /* ... still pending at the end */
	int64_t promise_void_ahead; /* promises voided by a more urgent job */
	int64_t promise_void_quota; /* promises voided because the job then waited for quota */
	int64_t promise_renewed;    /* a more urgent job served while the head kept waiting */
	double worst_lateness;	    /* seconds past the reservation, 0 if none late */
	int64_t worst_late_job;
	int64_t reservation_slips; /* cycles where a head's reservation moved later */
	/* core behaviour the simulation checks on every decision */
	int64_t violations;
	char first_violation[256];
	int64_t reason_counts[24]; /* pending-job cycles by enum sched_reason (< 24 of them) */
	int64_t fit_attempts, fast_rejects, preemption_plans, reservation_probes;
	int64_t max_pending;
	/*
	 * Start-time estimates, per enum sim_est_mode: of the jobs whose first
	 * estimate with a time (rounded up to the next cycle) came more than
	 * 10 min before their first start, |predicted - actual| / (actual -
	 * when predicted), as fractions (sim_delay's fields hold them, not
	 * seconds); est_jobs counts every job that got such an estimate.
	 */
	struct sim_delay est_error[SIM_NEST];
	int64_t est_jobs[SIM_NEST];
	int64_t estimates; /* runs of sched_estimate (each mode counted) */
};

/* Replay w through the scheduler core. TY_ENOMEM, or a core failure. */
int sim_run(struct sim_report **out, const struct sim_workload *w, struct ty_err *err);
/*
 * sim_run, then w again with the old victim choice (youngest first):
 * *out is the first run's report with lost_gpu_seconds_by_age and
 * preemptions_by_age from the second.
 */
int sim_compare(struct sim_report **out, const struct sim_workload *w, struct ty_err *err);
void sim_report_free(struct sim_report *r);
/* Human-readable report (Markdown), the same text trainyard-sim prints. */
void sim_report_print(FILE *f, const struct sim_report *r);

#endif
