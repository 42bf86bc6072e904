/*
 * trainyard-bench-core: one scheduling cycle of the policy core at design
 * scale (10,000 nodes x 8 GPUs, 100,000 pending jobs from 50 teams, part of
 * the cluster running), timed against two baselines measured in the same
 * run on the same snapshot: today's first-fit sched_core_cycle() and a
 * lower bound that only reads the input once. The *-spot scenarios make
 * 10 % of the nodes spot and keep most pending jobs off them.
 */
#include "core/core.h"
#include "core/policy.h"
#include "sim.h"
#include "ty_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ENV_PREFIX "TRAINYARD_BENCH"

static const struct ty_opt options[] = {
    {"nodes", TY_OPT_INT, "10000", 1, 1000000, "nodes (8 GPUs each)"},
    {"pending", TY_OPT_INT, "100000", 1, 10000000, "pending jobs"},
    {"teams", TY_OPT_INT, "50", 1, 64, "teams"},
    {"cohorts", TY_OPT_INT, "10", 1, 64, "cohorts"},
    {"block-nodes", TY_OPT_INT, "16", 1, 1000000, "nodes per block"},
    {"runs", TY_OPT_INT, "5", 1, 1000, "timed runs per measurement (after one warm-up)"},
    {"baseline-runs", TY_OPT_INT, "3", 0, 1000,
     "timed runs of first fit (after one warm-up; 0: skip it)"},
    {"seed", TY_OPT_INT, "7", 0, 0, "workload seed"},
    {"scenario", TY_OPT_STR, "all", 0, 0,
     "steady (60 % of GPUs running), empty (none), full (95 %), the same with 10 % spot "
     "nodes (steady-spot, empty-spot, full-spot), or all"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

/* Goals (DESIGN §9, issue 8). */
#define GOAL_CYCLE_MS 100.0
/* With 10 % spot nodes (issue 18). */
#define GOAL_SPOT_CYCLE_MS 50.0
#define GOAL_DECISIONS 100000.0

struct bench {
	int nnodes, gpn, block_nodes;
	char (*labels)[4][16]; /* zone, rack, block, id */
	int *block;
	struct sched_node_in *nodes;
	struct sched_team_in *teams;
	int nteams;
	struct sched_running_in *running;
	int nrunning;
	int *run_node;	    /* flat node indices of the running gangs */
	uint64_t *run_gpus; /* flat GPU masks */
	int *run_port;	    /* master port of each running gang */
	int *node_ports;    /* the same, grouped by node (nodes[n].ports point here) */
	int64_t running_gpus;
	struct sched_pending_in *pending;
	int npending;
	struct sched_gang *gangs; /* the same pending jobs for first fit, in submit order */
	/* the estimator told the truth: running gangs' actual ends, pending jobs' runtimes */
	int64_t *run_end_ms, *pend_runtime_s;
	int64_t now_ms;
};

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t rng(uint64_t *st)
{
	uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void bench_free(struct bench *b)
{
	free(b->labels);
	free(b->block);
	free(b->nodes);
	free(b->teams);
	free(b->running);
	free(b->run_node);
	free(b->run_gpus);
	free(b->run_port);
	free(b->node_ports);
	free(b->pending);
	free(b->gangs);
	free(b->run_end_ms);
	free(b->pend_runtime_s);
	memset(b, 0, sizeof(*b));
}

static int popcount64(uint64_t m)
{
	return __builtin_popcountll(m);
}

/*
 * Place a running gang at random (so the cluster is fragmented the way a
 * busy one is): nodes with enough free GPUs scanned from a random start,
 * inside one random block when the job needs one. False when it does not fit.
 */
static bool place_running(struct bench *b, uint64_t *free_mask, const struct sim_job *j,
			  uint64_t *st, int *node, uint64_t *gpus)
{
	int n = b->nnodes, lo = 0, hi = n, got = 0;
	int start;

	if (j->need_block) {
		int bn = b->block_nodes, nblocks = (n + bn - 1) / bn;
		int blk = (int)(rng(st) % (uint64_t)nblocks);

		lo = blk * bn;
		hi = lo + bn < n ? lo + bn : n;
	}
	start = lo + (int)(rng(st) % (uint64_t)(hi - lo));
	for (int k = 0; k < hi - lo && got < j->nodes; k++) {
		int i = lo + (start - lo + k) % (hi - lo);

		if (popcount64(free_mask[i]) >= j->gpus_per_node)
			node[got++] = i;
	}
	if (got < j->nodes)
		return false;
	for (int r = 0; r < j->nodes; r++) {
		uint64_t m = 0, f = free_mask[node[r]];

		for (int g = 0; g < j->gpus_per_node; g++) {
			uint64_t low = f & -f;

			m |= low;
			f &= ~low;
		}
		free_mask[node[r]] &= ~m;
		gpus[r] = m;
	}
	return true;
}

/*
 * The snapshot: the workload's teams; its first jobs run (placed at random
 * until `fill` of the GPUs are held, each team up to its nominal quota),
 * the next `npending` wait. Everything is submitted by now.
 */
static int bench_build(struct bench *b, const struct sim_workload *w, double fill, int npending,
		       int block_nodes, int spot_pct)
{
	const struct sim_config *c = &w->cfg;
	uint64_t st = c->seed * 31 + 7, *free_mask = NULL;
	int *master_count = NULL;
	int64_t cap = (int64_t)c->nodes * c->gpus_per_node, *team_used = NULL;
	int next = 0, nrun_cap = c->nodes * c->gpus_per_node, flat = 0;
	int rc = TY_ENOMEM;
	int64_t now = c->horizon;

	memset(b, 0, sizeof(*b));
	b->nnodes = c->nodes;
	b->gpn = c->gpus_per_node;
	b->block_nodes = block_nodes;
	b->now_ms = now * 1000;
	b->labels = calloc((size_t)c->nodes, sizeof(*b->labels));
	b->block = calloc((size_t)c->nodes, sizeof(*b->block));
	b->nodes = calloc((size_t)c->nodes, sizeof(*b->nodes));
	b->teams = calloc((size_t)w->nteams, sizeof(*b->teams));
	b->running = calloc((size_t)nrun_cap, sizeof(*b->running));
	b->run_node = calloc((size_t)nrun_cap * 8, sizeof(*b->run_node));
	b->run_gpus = calloc((size_t)nrun_cap * 8, sizeof(*b->run_gpus));
	b->run_port = calloc((size_t)nrun_cap, sizeof(*b->run_port));
	b->pending = calloc((size_t)npending, sizeof(*b->pending));
	b->gangs = calloc((size_t)npending, sizeof(*b->gangs));
	b->run_end_ms = calloc((size_t)nrun_cap, sizeof(*b->run_end_ms));
	b->pend_runtime_s = calloc((size_t)npending, sizeof(*b->pend_runtime_s));
	free_mask = calloc((size_t)c->nodes, sizeof(*free_mask));
	team_used = calloc((size_t)w->nteams, sizeof(*team_used));
	master_count = calloc((size_t)c->nodes, sizeof(*master_count));
	if (!master_count || !b->labels || !b->block || !b->nodes || !b->teams || !b->running ||
	    !b->run_node || !b->run_gpus || !b->run_port || !b->pending || !b->gangs ||
	    !b->run_end_ms || !b->pend_runtime_s ||
	    !free_mask || !team_used)
		goto out;
	for (int n = 0; n < c->nodes; n++) {
		int blk = n / block_nodes, rack = blk / 4;

		b->block[n] = blk;
		free_mask[n] = c->gpus_per_node >= 64 ? ~0ULL : (1ULL << c->gpus_per_node) - 1;
		snprintf(b->labels[n][0], 16, "z%d", rack / 40);
		snprintf(b->labels[n][1], 16, "r%d", rack);
		snprintf(b->labels[n][2], 16, "b%d", blk);
		snprintf(b->labels[n][3], 16, "n%05d", n);
	}
	for (int t = 0; t < w->nteams; t++) {
		const struct sim_team *tm = &w->teams[t];

		b->teams[t] = (struct sched_team_in){
		    .name = tm->name,
		    .nominal_gpus = tm->nominal,
		    .borrowing_limit = tm->borrow_limit,
		    .lending_limit = tm->lend_limit,
		    .cohort = tm->cohort_name,
		    .weight = tm->weight,
		    /* about a day of use at nominal, give or take half */
		    .usage =
			(double)tm->nominal * 86400.0 * (0.5 + (double)(rng(&st) % 1000) / 1000),
		};
	}
	b->nteams = w->nteams;
	/* running gangs, until fill is reached or 2,000 jobs in a row did not fit */
	for (int misses = 0;
	     next < w->njobs && b->running_gpus < (int64_t)(fill * (double)cap) && misses < 2000;
	     next++) {
		const struct sim_job *j = &w->jobs[next];
		int g = j->nodes * j->gpus_per_node;
		int64_t ran, k, ck_at;
		struct sched_running_in *ri;

		if (team_used[j->team] + g > w->teams[j->team].nominal ||
		    !place_running(b, free_mask, j, &st, b->run_node + flat, b->run_gpus + flat)) {
			misses++;
			continue;
		}
		misses = 0;
		team_used[j->team] += g;
		b->running_gpus += g;
		/* started up to its actual duration ago, so it is still running now */
		ran = (int64_t)(rng(&st) % (uint64_t)(j->duration > 1 ? j->duration : 1));
		/*
		 * the daemon's input: the newest checkpoint whose committed event
		 * is in (ckpt_cost after it started), at that event's time
		 */
		k = ran - j->ckpt_cost >= j->ckpt_every ? (ran - j->ckpt_cost) / j->ckpt_every : 0;
		ck_at = k ? k * j->ckpt_every + j->ckpt_cost : 0;
		ri = &b->running[b->nrunning];
		*ri = (struct sched_running_in){
		    .job = j->id,
		    .team = j->team,
		    .cls = (enum sched_class)j->cls,
		    .priority = j->prio,
		    .start_ms = (now - ran) * 1000,
		    .checkpoint_ms = (now - ran + ck_at) * 1000,
		    .min_runtime_s = 300,
		    .end_by_ms = (now - ran + j->max_runtime) * 1000,
		    .preemptible = j->preemptible,
		    .nnodes = j->nodes,
		    .node = b->run_node + flat,
		    .gpus = b->run_gpus + flat,
		};
		b->run_end_ms[b->nrunning] = (now - ran + j->duration) * 1000;
		/* distinct per node: the k-th master on a node holds 29500 + k */
		b->run_port[b->nrunning] = 29500 + master_count[b->run_node[flat]]++;
		flat += j->nodes;
		b->nrunning++;
	}
	/* the held rendezvous ports of each node: its running masters' ports, grouped */
	if (!(b->node_ports = calloc((size_t)b->nrunning + 1, sizeof(*b->node_ports))))
		goto out;
	for (int i = 0; i < b->nrunning; i++)
		b->nodes[b->running[i].node[0]].nports++;
	for (int n = 0, at = 0; n < c->nodes; n++) {
		b->nodes[n].ports = b->node_ports + at;
		at += b->nodes[n].nports;
		b->nodes[n].nports = 0;
	}
	for (int i = 0; i < b->nrunning; i++) {
		struct sched_node_in *nd = &b->nodes[b->running[i].node[0]];

		((int *)nd->ports)[nd->nports++] = b->run_port[i];
	}
	for (int n = 0; n < c->nodes; n++) {
		b->nodes[n].id = b->labels[n][3];
		b->nodes[n].gpus = c->gpus_per_node;
		b->nodes[n].schedulable = true;
		b->nodes[n].zone = b->labels[n][0];
		b->nodes[n].rack = b->labels[n][1];
		b->nodes[n].block = b->labels[n][2];
		/* spot_pct % of the nodes, spread evenly (about one per block) */
		b->nodes[n].spot =
		    (int64_t)(n + 1) * spot_pct / 100 != (int64_t)n * spot_pct / 100;
	}
	if (w->njobs - next < npending) {
		fprintf(stderr, "trainyard-bench-core: workload has %d jobs, need %d more\n",
			w->njobs, npending - (w->njobs - next));
		rc = TY_EINVAL;
		goto out;
	}
	for (int i = 0; i < npending; i++, next++) {
		const struct sim_job *j = &w->jobs[next];

		b->pend_runtime_s[i] = j->duration;
		b->pending[i] = (struct sched_pending_in){
		    .job = j->id,
		    .team = j->team,
		    .cls = (enum sched_class)j->cls,
		    .priority = j->prio,
		    .submit_ms = j->submit * 1000,
		    .nodes = j->nodes,
		    .gpus_per_node = j->gpus_per_node,
		    .required = j->need_block ? SCHED_TOPO_BLOCK : SCHED_TOPO_NONE,
		    .min_runtime_s = 300,
		    .max_runtime_s = j->max_runtime,
		};
		b->gangs[i] = (struct sched_gang){
		    .job = j->id, .nodes = j->nodes, .gpus_per_node = j->gpus_per_node};
		if (spot_pct > 0) {
			/*
			 * spot.allowed is false by default: 70 % never, 10 % fell
			 * back to on-demand, 20 % any pool (from the job id, so
			 * the other scenarios' draws are unchanged)
			 */
			uint64_t h = (uint64_t)j->id;
			int r = (int)(rng(&h) % 10);
			struct sched_pending_in *p = &b->pending[i];

			p->spot = r < 7 ? SCHED_SPOT_NEVER : r < 8 ? SCHED_SPOT_FALLBACK : SCHED_SPOT_ANY;
			if (p->spot == SCHED_SPOT_FALLBACK)
				p->spot_preemptions = p->spot_max_preemptions = 2;
		}
	}
	b->npending = npending;
	rc = 0;
out:
	free(free_mask);
	free(team_used);
	free(master_count);
	if (rc)
		bench_free(b);
	return rc;
}

static void bench_input(struct sched_input *in, const struct bench *b)
{
	memset(in, 0, sizeof(*in));
	sched_config_default(&in->cfg);
	in->now_ms = b->now_ms;
	in->nodes = b->nodes;
	in->nnodes = b->nnodes;
	in->teams = b->teams;
	in->nteams = b->nteams;
	in->running = b->running;
	in->nrunning = b->nrunning;
	in->pending = b->pending;
	in->npending = b->npending;
}

/* The first-fit snapshot of the same cluster (built outside the timing). */
static struct sched_snapshot *baseline_snapshot(const struct bench *b)
{
	struct sched_snapshot *s = sched_snapshot_new(29500, 29999);
	struct ty_err err = {0};

	if (!s)
		return NULL;
	for (int n = 0; n < b->nnodes; n++)
		if (sched_snapshot_add_node(s, b->labels[n][3], b->gpn, &err) != n)
			goto fail;
	for (int i = 0; i < b->nrunning; i++) {
		const struct sched_running_in *r = &b->running[i];

		for (int k = 0; k < r->nnodes; k++)
			for (int g = 0; g < 64; g++)
				if (r->gpus[k] >> g & 1)
					sched_snapshot_use_gpu(s, r->node[k], g);
		if (sched_snapshot_use_port(s, r->node[0], b->run_port[i], &err))
			goto fail;
	}
	return s;
fail:
	sched_snapshot_free(s);
	return NULL;
}

/* The lower bound: read every pending job, running gang and node once. */
static __attribute__((noinline)) uint64_t lower_bound(const struct sched_input *in)
{
	uint64_t sum = 0;

	for (int i = 0; i < in->npending; i++) {
		const struct sched_pending_in *p = &in->pending[i];

		sum += (uint64_t)p->job + (uint64_t)p->team + (uint64_t)p->cls +
		       (uint64_t)p->priority + (uint64_t)p->submit_ms + (uint64_t)p->nodes +
		       (uint64_t)p->gpus_per_node + (uint64_t)p->required;
	}
	for (int i = 0; i < in->nrunning; i++)
		for (int k = 0; k < in->running[i].nnodes; k++)
			sum += in->running[i].gpus[k] ^ (uint64_t)in->running[i].node[k];
	for (int n = 0; n < in->nnodes; n++)
		sum += in->nodes[n].busy + (uint64_t)in->nodes[n].gpus;
	return sum;
}

struct result {
	const char *name;
	double goal_ms;
	double fill;
	int64_t running_gpus;
	int nrunning, npending;
	double policy_ms, policy_min, policy_max;
	double ff_ms, lb_ms;
	int placements, preemptions, reservations, ff_placements;
	int reclaims; /* of the preemptions */
	struct sched_stats stats;
	int64_t reasons[SCHED_REASON_COUNT];
	/* sched_estimate() over the same decision (docs/scheduling.md, "Start-time estimates") */
	double est_ms, est_min, est_max;
	int est_steps, est_kinds[5];
	int64_t est_reached_s;
	/*
	 * One what-if request over the same snapshot (docs/scheduling.md,
	 * "What-if"), of a normal-class job ([0]: behind the queue) and of a
	 * high-class one ([1]: at its front).
	 */
	struct {
		double ms;
		int variants, sooner;
		enum sched_est_kind asked; /* the estimate of the job as asked */
	} wi[2];
};

static volatile uint64_t sink;

/* An estimate's kind in the words of the table's columns. */
static const char *est_kind_word(enum sched_est_kind k)
{
	switch (k) {
	case SCHED_EST_NOW:
		return "started now";
	case SCHED_EST_AT:
		return "estimated";
	case SCHED_EST_NEVER:
		return "never";
	case SCHED_EST_HORIZON:
		return "beyond horizon";
	case SCHED_EST_NONE:
		break;
	}
	return "not estimated";
}

/* One sched_estimate() after a decision, timed (k < 0: the warm-up). */
static int measure_estimate(struct result *res, const struct bench *b, const struct sched_input *in,
			    const struct sched_decisions *d, int k, int runs)
{
	static double *t;
	/* the daemon's bounds (scheduler/place.c, ESTIMATE_*) */
	struct sched_estimate_in e = {
	    .run_end_ms = b->run_end_ms,
	    .pend_runtime_s = b->pend_runtime_s,
	    .cfg = {.max_jobs = 10000, .max_steps = 256, .min_step_s = 30},
	};
	struct sched_estimates *x = NULL;
	struct ty_err err = {0};
	double t0 = mono();
	int rc;

	if (k < 0) {
		free(t);
		if (!(t = calloc((size_t)runs + 1, sizeof(*t))))
			return TY_ENOMEM;
	}
	if ((rc = sched_estimate(&x, in, d, &e, &err))) {
		fprintf(stderr, "trainyard-bench-core: estimate: %s\n", err.msg);
		return rc;
	}
	if (k >= 0)
		t[k] = mono() - t0;
	if (k == runs - 1) {
		memset(res->est_kinds, 0, sizeof(res->est_kinds));
		for (int i = 0; i < x->njobs; i++)
			res->est_kinds[x->job[i].kind]++;
		res->est_steps = x->steps;
		res->est_reached_s = (x->reached_ms - in->now_ms) / 1000;
		res->est_min = res->est_max = t[0];
		for (int j = 0; j < runs; j++) {
			if (t[j] < res->est_min)
				res->est_min = t[j];
			if (t[j] > res->est_max)
				res->est_max = t[j];
		}
		res->est_ms = median(t, runs) * 1000;
		res->est_min *= 1000;
		res->est_max *= 1000;
		free(t);
		t = NULL;
	}
	sched_estimates_free(x);
	return 0;
}

/*
 * One what-if request, timed once: a 4-node x 8-GPU job of the first team
 * in class cls, on-demand only, in one block, so it has all its variants.
 * A normal-class job lands behind the first 10,000 in the queue order (no
 * variant is simulated); a high-class one at the front (every variant is).
 */
static int measure_what_if(struct result *res, int w, enum sched_class cls, const struct bench *b,
			   const struct sched_input *in)
{
	struct sched_estimate_in e = {
	    .run_end_ms = b->run_end_ms,
	    .pend_runtime_s = b->pend_runtime_s,
	    .cfg = {.max_jobs = 10000, .max_steps = 256, .min_step_s = 30},
	};
	struct sched_pending_in p = {.team = 0, .cls = cls, .nodes = 4,
				     .gpus_per_node = 8, .max_runtime_s = 3600,
				     .spot = SCHED_SPOT_NEVER, .required = SCHED_TOPO_BLOCK};
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	struct ty_err err = {0};
	int n = sched_what_if_variants(v, &p), rc;
	double t0 = mono();

	if ((rc = sched_what_if_run(v, n, in, NULL, &e, &err))) {
		fprintf(stderr, "trainyard-bench-core: what-if: %s\n", err.msg);
		return rc;
	}
	res->wi[w].ms = (mono() - t0) * 1000;
	res->wi[w].variants = n;
	res->wi[w].asked = v[0].est.kind;
	res->wi[w].sooner = 0;
	for (int k = 1; k < n; k++)
		res->wi[w].sooner += sched_what_if_sooner(&v[k], &v[0]);
	return 0;
}

static int measure(struct result *res, const struct bench *b, int runs, int ff_runs)
{
	struct sched_input in;
	struct ty_err err = {0};
	double *t = calloc((size_t)(runs + ff_runs + 1), sizeof(*t));
	int rc = 0;

	if (!t)
		return TY_ENOMEM;
	bench_input(&in, b);
	res->running_gpus = b->running_gpus;
	res->nrunning = b->nrunning;
	res->npending = b->npending;
	/* the policy core: one warm-up, then runs */
	for (int k = -1; k < runs; k++) {
		struct sched_decisions *d = NULL;
		double t0 = mono();

		if ((rc = sched_decide(&d, &in, &err))) {
			fprintf(stderr, "trainyard-bench-core: %s\n", err.msg);
			goto out;
		}
		if (k >= 0)
			t[k] = mono() - t0;
		if ((rc = measure_estimate(res, b, &in, d, k, runs))) {
			sched_decisions_free(d);
			goto out;
		}
		if (k == runs - 1 && ((rc = measure_what_if(res, 0, SCHED_CLASS_NORMAL, b, &in)) ||
				      (rc = measure_what_if(res, 1, SCHED_CLASS_HIGH, b, &in)))) {
			sched_decisions_free(d);
			goto out;
		}
		if (k == runs - 1) {
			res->placements = d->nplacements;
			res->preemptions = d->npreemptions;
			res->reclaims = 0;
			for (int i = 0; i < d->npreemptions; i++)
				res->reclaims += d->preemptions[i].why == SCHED_PREEMPT_RECLAIM;
			res->reservations = d->nreservations;
			res->stats = d->stats;
			for (int i = 0; i < d->npending; i++)
				if (d->pending[i].reason < SCHED_REASON_COUNT)
					res->reasons[d->pending[i].reason]++;
		}
		sched_decisions_free(d);
	}
	res->policy_min = res->policy_max = t[0];
	for (int k = 0; k < runs; k++) {
		if (t[k] < res->policy_min)
			res->policy_min = t[k];
		if (t[k] > res->policy_max)
			res->policy_max = t[k];
	}
	res->policy_ms = median(t, runs) * 1000;
	res->policy_min *= 1000;
	res->policy_max *= 1000;
	/* first fit on a fresh snapshot each run (a cycle takes GPUs from it) */
	res->ff_ms = 0;
	for (int k = ff_runs ? -1 : 0; k < ff_runs; k++) {
		struct sched_snapshot *s = baseline_snapshot(b);
		struct sched_placement *p = NULL;
		int np = 0;
		double t0;

		if (!s) {
			rc = TY_ENOMEM;
			goto out;
		}
		t0 = mono();
		rc = sched_core_cycle(&p, &np, s, b->gangs, b->npending, &err);
		if (k >= 0)
			t[k] = mono() - t0;
		sched_placements_free(p, np);
		sched_snapshot_free(s);
		if (rc)
			goto out;
		res->ff_placements = np;
	}
	if (ff_runs)
		res->ff_ms = median(t, ff_runs) * 1000;
	/* the lower bound: many runs, it is fast */
	for (int k = -1; k < runs; k++) {
		double t0 = mono();

		for (int rep = 0; rep < 10; rep++)
			sink += lower_bound(&in);
		if (k >= 0)
			t[k] = (mono() - t0) / 10;
	}
	res->lb_ms = median(t, runs) * 1000;
out:
	free(t);
	return rc;
}

static const char *const reason_name[] = {"placed",	  "nodes",   "topology", "never_fits",
					  "borrow_limit", "cohort",  "nominal",	 "preemption",
					  "reserved",	  "head",    "behind",	 "scan_limit",
					  "port",	  "invalid", "backoff",	 "excluded",
					  "on_demand",	  "never_fits_cpus", "never_fits_memory",
					  "cpus",	  "memory",	     "quota_cpus",
					  "quota_memory", "budget"};
_Static_assert(sizeof(reason_name) / sizeof(reason_name[0]) == SCHED_REASON_COUNT,
	       "a name for every enum sched_reason");

/* a/b printed with fmt, or "not measured" when b (a time) is not positive */
static const char *quotient(char *buf, size_t sz, const char *fmt, double a, double b)
{
	if (!(b > 0))
		return "not measured";
	snprintf(buf, sz, fmt, a / b);
	return buf;
}

static void print_results(const struct result *res, int n, const struct sim_config *cfg, int runs,
			  int ff_runs)
{
	printf("Cluster: %d nodes x %d GPUs (%d GPUs) in blocks of %d nodes, %d teams in %d "
	       "cohorts; median of %d runs after a warm-up (first fit: %d).\n\n",
	       cfg->nodes, cfg->gpus_per_node, cfg->nodes * cfg->gpus_per_node, cfg->block_nodes,
	       cfg->teams, cfg->cohorts, runs, ff_runs);
	printf("| scenario | running gangs (GPUs) | pending | policy cycle ms (min-max) | "
	       "decisions/s | placed | preempted | first fit ms (placed) | policy / first fit | "
	       "lower bound ms | policy / lower bound |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < n; i++) {
		const struct result *r = &res[i];
		char ff[64] = "not run", ffb[32], dps[32], lbb[32];
		const char *ratio = "-";

		if (ff_runs) {
			snprintf(ff, sizeof(ff), "%.1f (%d)", r->ff_ms, r->ff_placements);
			ratio = quotient(ffb, sizeof(ffb), "%.2fx", r->policy_ms, r->ff_ms);
		}
		printf("| %s | %d (%lld) | %d | %.1f (%.1f-%.1f) | %s | %d | %d | %s | %s | "
		       "%.3f | %s |\n",
		       r->name, r->nrunning, (long long)r->running_gpus, r->npending, r->policy_ms,
		       r->policy_min, r->policy_max,
		       quotient(dps, sizeof(dps), "%.0f", r->npending, r->policy_ms / 1000),
		       r->placements, r->preemptions, ff, ratio, r->lb_ms,
		       quotient(lbb, sizeof(lbb), "%.0fx", r->policy_ms, r->lb_ms));
	}
	printf("\nGoals: cycle <= %.0f ms (%.0f ms with spot nodes), >= %.0f decisions/s (a "
	       "decision = one pending job placed or given its pending reason).\n\n",
	       GOAL_CYCLE_MS, GOAL_SPOT_CYCLE_MS, GOAL_DECISIONS);
	for (int i = 0; i < n; i++) {
		const struct result *r = &res[i];
		char dps[32];
		/* a cycle too short to time has no rate: its goal is not measured */
		const char *met = "not measured";

		if (r->policy_ms > 0)
			met =
			    r->npending * 1000 / r->policy_ms >= GOAL_DECISIONS ? "MET" : "MISSED";
		printf("- %s: cycle %.1f ms %s; %s decisions/s %s.\n", r->name, r->policy_ms,
		       r->policy_ms <= r->goal_ms ? "MET" : "MISSED",
		       quotient(dps, sizeof(dps), "%.0f", r->npending, r->policy_ms / 1000), met);
	}
	printf("\nStart-time estimates (sched_estimate after the decision, exact runtimes as "
	       "history; the daemon's bounds: first 10,000 pending jobs in queue order, at most "
	       "256 steps, ends within 30 s or 2 %% of the wait one step). The daemon runs it in "
	       "a side thread at most every 5 s: the cycle does not wait for it.\n\n");
	printf("| scenario | policy ms | estimate ms (min-max) | estimate / policy | one core "
	       "at one per 5 s | steps | reached h | estimated | started now | never | beyond "
	       "horizon | not estimated | what-if ms, normal class (variants, sooner; as asked) | "
	       "what-if ms, high class (variants, sooner; as asked) | high-class what-if / "
	       "(policy + estimate) |\n");
	printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < n; i++) {
		const struct result *r = &res[i];
		char q[32], wq[32];

		printf("| %s | %.1f | %.1f (%.1f-%.1f) | %s | %.0f %% | %d | %.1f | %d | %d | %d | "
		       "%d | %d | %.1f (%d, %d; %s) | %.1f (%d, %d; %s) | %s |\n",
		       r->name, r->policy_ms, r->est_ms, r->est_min, r->est_max,
		       quotient(q, sizeof(q), "%.2fx", r->est_ms, r->policy_ms),
		       r->est_ms / 5000 * 100, r->est_steps,
		       (double)r->est_reached_s / 3600, r->est_kinds[SCHED_EST_AT],
		       r->est_kinds[SCHED_EST_NOW], r->est_kinds[SCHED_EST_NEVER],
		       r->est_kinds[SCHED_EST_HORIZON], r->est_kinds[SCHED_EST_NONE], r->wi[0].ms,
		       r->wi[0].variants, r->wi[0].sooner, est_kind_word(r->wi[0].asked),
		       r->wi[1].ms, r->wi[1].variants, r->wi[1].sooner,
		       est_kind_word(r->wi[1].asked),
		       quotient(wq, sizeof(wq), "%.1fx", r->wi[1].ms, r->est_ms + r->policy_ms));
	}
	printf("\nCore work per cycle (sched_stats) and pending reasons:\n\n");
	for (int i = 0; i < n; i++) {
		const struct result *r = &res[i];

		printf("- %s: %lld node searches, %lld fast rejects, %lld preemption plans "
		       "(%d victims: %d reclaim, %d class; exact search: %lld sets improved, "
		       "%lld cut off), %lld reservation probes, %d reservations; reasons:",
		       r->name, (long long)r->stats.fit_attempts, (long long)r->stats.fast_rejects,
		       (long long)r->stats.preemption_plans, r->preemptions, r->reclaims,
		       r->preemptions - r->reclaims, (long long)r->stats.victim_sets_improved,
		       (long long)r->stats.victim_search_cutoffs, (long long)r->stats.reservation_probes,
		       r->reservations);
		for (int k = 0; k < SCHED_REASON_COUNT; k++)
			if (r->reasons[k])
				printf(" %s %lld;", reason_name[k], (long long)r->reasons[k]);
		printf("\n");
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		double fill;
		int spot_pct;
	} scen[] = {{"steady", 0.60, 0},	  {"empty", 0.0, 0},	  {"full", 0.95, 0},
		    {"steady-spot", 0.60, 10}, {"empty-spot", 0.0, 10}, {"full-spot", 0.95, 10}};
	struct ty_config *c = ty_config_new(options, NOPTS, ENV_PREFIX);
	struct sim_workload *w = NULL;
	struct sim_config cfg;
	struct result res[sizeof(scen) / sizeof(scen[0])];
	struct bench b = {0};
	struct ty_err err = {0};
	int rest, status = 2, nres = 0, runs, ff_runs;
	const char *which;

	memset(res, 0, sizeof(res));
	if (!c) {
		fprintf(stderr, "trainyard-bench-core: out of memory\n");
		return 2;
	}
	if (ty_config_load(c, argc, argv, &rest, &err)) {
		fprintf(stderr, "trainyard-bench-core: %s (try --help)\n", err.msg);
		goto out;
	}
	if (ty_config_bool(c, "help")) {
		printf("usage: trainyard-bench-core [options]\n\n"
		       "Times one cycle of the policy core (sched_decide) at design scale against\n"
		       "first fit (sched_core_cycle) and a read-the-input lower bound, on the\n"
		       "same snapshot (bench/README.md).\n\n");
		ty_config_usage(stdout, options, NOPTS, ENV_PREFIX);
		status = 0;
		goto out;
	}
	if (rest < argc) {
		fprintf(stderr, "trainyard-bench-core: unexpected argument '%s'\n", argv[rest]);
		goto out;
	}
	which = ty_config_str(c, "scenario");
	runs = (int)ty_config_int(c, "runs");
	ff_runs = (int)ty_config_int(c, "baseline-runs");
	sim_config_default(&cfg);
	cfg.seed = (uint64_t)ty_config_int(c, "seed");
	cfg.teams = (int)ty_config_int(c, "teams");
	cfg.cohorts = (int)ty_config_int(c, "cohorts");
	cfg.nodes = (int)ty_config_int(c, "nodes");
	cfg.block_nodes = (int)ty_config_int(c, "block-nodes");
	cfg.light_teams = 0;
	/* enough jobs for the pending queue and a full cluster of running gangs */
	cfg.horizon = 86400;
	cfg.warmup = 0;
	cfg.load = 1.0;
	for (;;) {
		int want = (int)ty_config_int(c, "pending") + cfg.nodes * cfg.gpus_per_node / 2;

		if (sim_workload_generate(&w, &cfg, &err)) {
			fprintf(stderr, "trainyard-bench-core: %s\n", err.msg);
			goto out;
		}
		if (w->njobs >= want)
			break;
		sim_workload_free(w);
		w = NULL;
		cfg.load *= 2;
	}
	for (size_t i = 0; i < sizeof(scen) / sizeof(scen[0]); i++) {
		if (strcmp(which, "all") && strcmp(which, scen[i].name))
			continue;
		if (bench_build(&b, w, scen[i].fill, (int)ty_config_int(c, "pending"),
				cfg.block_nodes, scen[i].spot_pct)) {
			fprintf(stderr, "trainyard-bench-core: building the snapshot failed\n");
			goto out;
		}
		res[nres].name = scen[i].name;
		res[nres].fill = scen[i].fill;
		res[nres].goal_ms = scen[i].spot_pct ? GOAL_SPOT_CYCLE_MS : GOAL_CYCLE_MS;
		if (measure(&res[nres], &b, runs, ff_runs))
			goto out;
		fprintf(stderr, "trainyard-bench-core: %s: policy %.1f ms, first fit %.1f ms\n",
			scen[i].name, res[nres].policy_ms, res[nres].ff_ms);
		nres++;
		bench_free(&b);
	}
	if (!nres) {
		fprintf(stderr, "trainyard-bench-core: unknown scenario '%s'\n", which);
		goto out;
	}
	print_results(res, nres, &cfg, runs, ff_runs);
	status = 0;
out:
	bench_free(&b);
	sim_workload_free(w);
	ty_config_free(c);
	return status;
}
