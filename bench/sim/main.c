/* trainyard-sim: generate a workload, replay it through the policy core, print the report. */
#include "sim.h"
#include "ty_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ENV_PREFIX "TRAINYARD_SIM"

static const struct ty_opt options[] = {
    {"seed", TY_OPT_INT, "1", 0, 0, "workload seed (the same seed gives the same report)"},
    {"teams", TY_OPT_INT, "16", 1, 64, "teams"},
    {"cohorts", TY_OPT_INT, "4", 1, 64, "cohorts (teams are dealt into them round-robin)"},
    {"nodes", TY_OPT_INT, "128", 1, 100000, "nodes"},
    {"gpus-per-node", TY_OPT_INT, "8", 1, 64, "GPUs of every node"},
    {"block-nodes", TY_OPT_INT, "8", 1, 100000, "nodes per block (NVLink / IB leaf domain)"},
    {"load-percent", TY_OPT_INT, "140", 1, 1000,
     "offered GPU-seconds over capacity, in percent (over 100: sustained contention)"},
    {"hours", TY_OPT_INT, "72", 1, 24 * 365, "simulated hours of arrivals"},
    {"drain-hours", TY_OPT_INT, "24", 0, 24 * 365, "simulated hours after the last arrival"},
    {"warmup-hours", TY_OPT_INT, "12", 0, 24 * 365,
     "shares are measured from here to the last arrival"},
    {"tick-seconds", TY_OPT_INT, "60", 1, 3600, "simulated seconds between cycles"},
    {"half-life-hours", TY_OPT_INT, "24", 1, 24 * 365, "usage half-life"},
    {"light-teams", TY_OPT_INT, "3", 0, 63,
     "the last N teams offer only light-percent of their share (and lend the rest)"},
    {"light-percent", TY_OPT_INT, "30", 0, 1000, "load of the light teams, percent of share"},
    {"stop-seconds", TY_OPT_INT, "15", 0, 86400,
     "time from a preempted gang's kill to its GPUs free (its grace comes before)"},
    {"checkpoint-cost-seconds", TY_OPT_STR, "10-180", 0, 0,
     "'MIN-MAX': per job, time from a checkpoint's start to its committed event"},
    {"signal-checkpoint-percent", TY_OPT_INT, "50", 0, 100,
     "jobs that write a checkpoint on the checkpoint signal"},
    {"grace-seconds", TY_OPT_INT, "120", 0, 3600,
     "the jobs' checkpoint.grace_seconds (their grace until a checkpoint time is measured)"},
    {"reclaim-delay-seconds", TY_OPT_INT, "60", 0, 86400, "the scheduler's reclaim delay"},
    {"max-jobs", TY_OPT_INT, "0", 0, 100000000, "cap on generated jobs (0: none)"},
    {"estimate-every-seconds", TY_OPT_INT, "0", 0, 86400,
     "run the start-time estimator every this many simulated seconds and report its "
     "accuracy (0: never)"},
    {"strict", TY_OPT_BOOL, "false", 0, 0,
     "exit 1 when the core broke an invariant or a head job started after its reservation"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct ty_config *c = ty_config_new(options, NOPTS, ENV_PREFIX);
	struct sim_workload *w = NULL;
	struct sim_report *r = NULL;
	struct sim_config cfg;
	struct ty_err err = {0};
	int rest, status = 2;
	long long cost_lo, cost_hi;
	double t0, t1, t2;

	if (!c) {
		fprintf(stderr, "trainyard-sim: out of memory\n");
		return 2;
	}
	if (ty_config_load(c, argc, argv, &rest, &err)) {
		fprintf(stderr, "trainyard-sim: %s (try --help)\n", err.msg);
		goto out;
	}
	if (ty_config_bool(c, "help")) {
		printf("usage: trainyard-sim [options]\n\n"
		       "Replays a generated workload through the scheduler's policy core in\n"
		       "simulated time and prints shares, queueing delays, utilization,\n"
		       "preemptions, backfill and the reservation check (bench/README.md).\n\n");
		ty_config_usage(stdout, options, NOPTS, ENV_PREFIX);
		status = 0;
		goto out;
	}
	if (rest < argc) {
		fprintf(stderr, "trainyard-sim: unexpected argument '%s' (try --help)\n",
			argv[rest]);
		goto out;
	}
	sim_config_default(&cfg);
	cfg.seed = (uint64_t)ty_config_int(c, "seed");
	cfg.teams = (int)ty_config_int(c, "teams");
	cfg.cohorts = (int)ty_config_int(c, "cohorts");
	cfg.nodes = (int)ty_config_int(c, "nodes");
	cfg.gpus_per_node = (int)ty_config_int(c, "gpus-per-node");
	cfg.block_nodes = (int)ty_config_int(c, "block-nodes");
	cfg.load = (double)ty_config_int(c, "load-percent") / 100;
	cfg.horizon = ty_config_int(c, "hours") * 3600;
	cfg.drain = ty_config_int(c, "drain-hours") * 3600;
	cfg.warmup = ty_config_int(c, "warmup-hours") * 3600;
	cfg.tick = ty_config_int(c, "tick-seconds");
	cfg.half_life = ty_config_int(c, "half-life-hours") * 3600;
	cfg.light_teams = (int)ty_config_int(c, "light-teams");
	cfg.light_load = (double)ty_config_int(c, "light-percent") / 100;
	cfg.stop_delay = ty_config_int(c, "stop-seconds");
	if (sscanf(ty_config_str(c, "checkpoint-cost-seconds"), "%lld-%lld", &cost_lo, &cost_hi) !=
	    2) {
		fprintf(stderr,
			"trainyard-sim: option 'checkpoint-cost-seconds': '%s' is not MIN-MAX\n",
			ty_config_str(c, "checkpoint-cost-seconds"));
		goto out;
	}
	cfg.ckpt_cost_min = cost_lo;
	cfg.ckpt_cost_max = cost_hi;
	cfg.signal_ckpt_pct = (int)ty_config_int(c, "signal-checkpoint-percent");
	cfg.spec_grace = ty_config_int(c, "grace-seconds");
	cfg.reclaim_delay = ty_config_int(c, "reclaim-delay-seconds");
	cfg.estimate_every = ty_config_int(c, "estimate-every-seconds");
	cfg.max_jobs = (int)ty_config_int(c, "max-jobs");
	if (cfg.max_gang_nodes > cfg.nodes)
		cfg.max_gang_nodes = cfg.nodes;

	t0 = mono();
	if (sim_workload_generate(&w, &cfg, &err)) {
		fprintf(stderr, "trainyard-sim: %s\n", err.msg);
		goto out;
	}
	t1 = mono();
	if (sim_compare(&r, w, &err)) {
		fprintf(stderr, "trainyard-sim: %s\n", err.msg);
		goto out;
	}
	t2 = mono();
	sim_report_print(stdout, r);
	printf("\nWall clock: workload %.2f s, simulation %.2f s for both victim choices "
	       "(%lld cycles in the first, at most %lld pending).\n",
	       t1 - t0, t2 - t1, (long long)r->cycles, (long long)r->max_pending);
	status = 0;
	if (ty_config_bool(c, "strict") && (r->violations || r->reserved_late))
		status = 1;
out:
	sim_report_free(r);
	sim_workload_free(w);
	ty_config_free(c);
	return status;
}
