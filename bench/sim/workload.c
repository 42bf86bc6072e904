/* The workload generator: teams, cluster shape and a job stream from a seed. */
#include "sim.h"
#include "sim_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void sim_config_default(struct sim_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->seed = 1;
	cfg->teams = 16;
	cfg->cohorts = 4;
	cfg->nodes = 128;
	cfg->gpus_per_node = 8;
	cfg->block_nodes = 8;
	cfg->blocks_per_rack = 2;
	cfg->racks_per_zone = 2;
	cfg->load = 1.4;
	cfg->horizon = 3 * 86400;
	cfg->drain = 86400;
	cfg->warmup = 12 * 3600;
	cfg->tick = 60;
	cfg->half_life = 86400;
	cfg->ckpt_min = 600;
	cfg->ckpt_max = 1800;
	cfg->min_runtime = 300;
	cfg->max_gang_nodes = 8;
	cfg->burst_fraction = 0.3;
	cfg->light_teams = 3;
	cfg->light_load = 0.3;
	cfg->stop_delay = 15; /* the kill's SIGTERM, --kill-grace-seconds 10, the release */
	cfg->ckpt_cost_min = 10;
	cfg->ckpt_cost_max = 180;
	cfg->signal_ckpt_pct = 50;
	cfg->spec_grace = 120; /* proto/job_spec.c's checkpoint.grace_seconds default */
	cfg->reclaim_delay = 60;
	cfg->max_jobs = 0;
}

/* splitmix64: tiny, fast, and the same on every platform */
uint64_t sim__rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

double sim__uniform(uint64_t *state)
{
	return (double)(sim__rand(state) >> 11) * 0x1.0p-53;
}

int sim__below(uint64_t *state, int n)
{
	return (int)(sim__rand(state) % (uint64_t)n);
}

static double normal(uint64_t *st)
{
	double u = sim__uniform(st), v = sim__uniform(st);

	if (u < 1e-300)
		u = 1e-300;
	return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static double expo(uint64_t *st, double mean)
{
	double u = sim__uniform(st);

	return -mean * log(1.0 - u);
}

/* Pick an index by integer weights. */
static int pick(uint64_t *st, const int *w, int n)
{
	int sum = 0, r;

	for (int i = 0; i < n; i++)
		sum += w[i];
	r = sim__below(st, sum);
	for (int i = 0; i < n; i++) {
		if (r < w[i])
			return i;
		r -= w[i];
	}
	return n - 1;
}

/*
 * A job's shape and length; team, submit time and id are the caller's.
 * Gangs larger than `cap` GPUs (what the team could ever hold: the API
 * refuses bigger jobs) are halved until they fit.
 */
static void draw_job(struct sim_job *j, uint64_t *st, const struct sim_config *cfg, int cap)
{
	static const int class_w[SIM_NCLASS] = {5, 65, 18, 12};
	static const int nodes_w[8] = {60, 14, 4, 9, 1, 1, 1, 6};
	static const int gpus_w[4] = {20, 15, 20, 45}; /* 1, 2, 4, all */
	int gpn = cfg->gpus_per_node;
	double d;

	j->cls = (enum sim_class)pick(st, class_w, SIM_NCLASS);
	j->prio = sim__below(st, 10);
	j->nodes = 1 + pick(st, nodes_w, cfg->max_gang_nodes < 8 ? cfg->max_gang_nodes : 8);
	if (j->nodes > 1) {
		j->gpus_per_node = gpn; /* multi-node gangs take whole nodes */
	} else {
		static const int frac[4] = {1, 2, 4, 0};
		int g = frac[pick(st, gpus_w, 4)];

		j->gpus_per_node = g == 0 || g > gpn ? gpn : g;
	}
	/* log-normal, median 40 min, long tail to a day; big gangs run longer */
	d = 2400.0 * exp(1.1 * normal(st)) * (1.0 + 0.15 * (j->nodes - 1));
	if (d < 120)
		d = 120;
	if (d > 86400)
		d = 86400;
	j->duration = (int64_t)d;
	/* users ask for 1–3× what they need, rounded up to 15 minutes */
	d = d * (1.0 + 2.0 * sim__uniform(st));
	j->max_runtime = ((int64_t)d + 899) / 900 * 900;
	if (j->max_runtime < j->duration)
		j->max_runtime = j->duration;
	j->ckpt_every = cfg->ckpt_min +
			(int64_t)(sim__uniform(st) * (double)(cfg->ckpt_max - cfg->ckpt_min + 1));
	j->preemptible = j->cls >= SIM_LOW || (j->cls == SIM_NORMAL && sim__below(st, 10) < 3);
	while (j->nodes * j->gpus_per_node > cap && j->nodes * j->gpus_per_node > 1) {
		if (j->nodes > 1)
			j->nodes /= 2;
		else
			j->gpus_per_node /= 2;
	}
	j->need_block = j->nodes > 1 && sim__below(st, 4) == 0;
}

static int check_config(const struct sim_config *c, struct ty_err *err)
{
	if (c->teams < 1 || c->teams > SIM_MAX_TEAMS || c->cohorts < 1 || c->cohorts > c->teams)
		return ty_err_set(err, TY_EINVAL, "teams %d / cohorts %d out of range", c->teams,
				  c->cohorts);
	if (c->nodes < 1 || c->gpus_per_node < 1 || c->block_nodes < 1 || c->blocks_per_rack < 1 ||
	    c->racks_per_zone < 1)
		return ty_err_set(err, TY_EINVAL, "bad cluster shape");
	if (c->tick < 1 || c->horizon < c->tick || c->warmup < 0 || c->warmup >= c->horizon ||
	    c->drain < 0 || c->half_life < 1 || c->load <= 0)
		return ty_err_set(err, TY_EINVAL, "bad time parameters");
	if (c->ckpt_min < 1 || c->ckpt_max < c->ckpt_min || c->min_runtime < 0 ||
	    c->ckpt_cost_min < 0 || c->ckpt_cost_max < c->ckpt_cost_min ||
	    c->ckpt_cost_max >= c->ckpt_min || c->signal_ckpt_pct < 0 || c->signal_ckpt_pct > 100 ||
	    c->spec_grace < 0 || c->reclaim_delay < 0)
		return ty_err_set(err, TY_EINVAL, "bad checkpoint parameters");
	if (c->light_teams < 0 || c->light_teams >= c->teams || c->light_load < 0 ||
	    c->stop_delay < 0 || c->max_jobs < 0)
		return ty_err_set(err, TY_EINVAL, "bad light_teams / stop_delay / max_jobs");
	if (c->max_gang_nodes < 1 || c->max_gang_nodes > 8 || c->max_gang_nodes > c->nodes)
		return ty_err_set(err, TY_EINVAL, "max_gang_nodes %d out of range",
				  c->max_gang_nodes);
	return 0;
}

/*
 * Teams: weights 1–4; nominal quotas follow the weights and add up to the
 * cluster (capacity outside every quota could not be borrowed by anyone);
 * cohorts dealt round-robin; a third of
 * the teams may borrow without limit, the rest up to their nominal quota or
 * less; some lend only part of their quota. Offered load is spread in
 * proportion to weight with ±10 % noise, so every team stays backlogged when
 * load > 1.1, except the last light_teams teams, which offer light_load of
 * their share and so lend idle nominal to their cohort.
 */
static int make_teams(struct sim_workload *w, uint64_t *st)
{
	const struct sim_config *c = &w->cfg;
	int cap = c->nodes * c->gpus_per_node, wsum = 0, given = 0, quota;

	w->teams = calloc((size_t)c->teams, sizeof(*w->teams));
	if (!w->teams)
		return TY_ENOMEM;
	w->nteams = c->teams;
	for (int t = 0; t < c->teams; t++) {
		struct sim_team *tm = &w->teams[t];

		snprintf(tm->name, sizeof(tm->name), "team-%02d", t);
		tm->cohort = t % c->cohorts;
		snprintf(tm->cohort_name, sizeof(tm->cohort_name), "cohort-%02d", tm->cohort % 100);
		tm->weight = 1 + sim__below(st, 4);
		wsum += tm->weight;
	}
	quota = cap;
	for (int t = 0; t < c->teams; t++) {
		struct sim_team *tm = &w->teams[t];

		tm->nominal = (int)((int64_t)quota * tm->weight / wsum);
		given += tm->nominal;
	}
	/* rounding leftovers go to the first teams, so quotas add up exactly */
	for (int t = 0; given < quota; t = (t + 1) % c->teams, given++)
		w->teams[t].nominal++;
	for (int t = 0; t < c->teams; t++) {
		struct sim_team *tm = &w->teams[t];

		switch (sim__below(st, 3)) {
		case 0:
			tm->borrow_limit = -1;
			break;
		case 1:
			tm->borrow_limit = tm->nominal;
			break;
		default:
			tm->borrow_limit = tm->nominal / 2;
			break;
		}
		tm->lend_limit = sim__below(st, 4) == 0 ? tm->nominal / 2 : -1;
		tm->offered = (double)tm->weight / wsum * (0.9 + 0.2 * sim__uniform(st));
		if (t >= c->teams - c->light_teams)
			tm->offered = (double)tm->weight / wsum * c->light_load;
	}
	return 0;
}

static int push_job(struct sim_workload *w, int *cap, const struct sim_job *j)
{
	if (w->njobs == *cap) {
		int ncap = *cap ? *cap * 2 : 1024;
		struct sim_job *p = realloc(w->jobs, (size_t)ncap * sizeof(*p));

		if (!p)
			return TY_ENOMEM;
		w->jobs = p;
		*cap = ncap;
	}
	w->jobs[w->njobs++] = *j;
	return 0;
}

static int by_submit(const void *a, const void *b)
{
	const struct sim_job *x = a, *y = b;

	if (x->submit != y->submit)
		return x->submit < y->submit ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Jobs: per team, a Poisson stream of jobs plus sweeps (hyperparameter
 * searches: bursts of 5–40 single-node jobs of one shape submitted within
 * a minute), sized so the team offers load × its share of the cluster's
 * GPU-seconds over the horizon.
 */
static int make_jobs(struct sim_workload *w, uint64_t *st)
{
	const struct sim_config *c = &w->cfg;
	double cap_gs = (double)c->nodes * c->gpus_per_node * (double)c->horizon;
	int cap = 0, rc;

	for (int t = 0; t < w->nteams; t++) {
		double budget = c->load * cap_gs * w->teams[t].offered, spent = 0;
		double single = budget * (1.0 - c->burst_fraction);
		uint64_t ts = sim__rand(st); /* per-team stream: teams do not shift each other */
		const struct sim_team *tm = &w->teams[t];
		struct sim_job j;
		double mean_gap;
		int64_t most = tm->nominal, peers = 0;

		/* the most it could ever hold: nominal and what it may borrow from its cohort */
		for (int u = 0; u < w->nteams; u++)
			if (u != t && w->teams[u].cohort == tm->cohort)
				peers += w->teams[u].lend_limit < 0 ? w->teams[u].nominal
								    : w->teams[u].lend_limit;
		most += tm->borrow_limit < 0 || tm->borrow_limit > peers ? peers : tm->borrow_limit;
		if (most > (int64_t)c->nodes * c->gpus_per_node)
			most = (int64_t)c->nodes * c->gpus_per_node;
		if (most < 1)
			most = 1;

		/* mean job GPU-seconds, measured on the team's own stream */
		{
			uint64_t probe = ts ^ 0x5bd1e995u;
			double sum = 0;

			for (int k = 0; k < 2000; k++) {
				draw_job(&j, &probe, c, (int)most);
				sum += (double)j.duration * j.nodes * j.gpus_per_node;
			}
			mean_gap = (double)c->horizon / (single / (sum / 2000));
		}
		for (double at = expo(&ts, mean_gap); at < (double)c->horizon && spent < single;
		     at += expo(&ts, mean_gap)) {
			draw_job(&j, &ts, c, (int)most);
			j.team = t;
			j.submit = (int64_t)at;
			spent += (double)j.duration * j.nodes * j.gpus_per_node;
			if ((rc = push_job(w, &cap, &j)))
				return rc;
		}
		while (spent < budget) {
			int64_t at = (int64_t)(sim__uniform(&ts) * (double)c->horizon);
			int n = 5 + sim__below(&ts, 36);

			draw_job(&j, &ts, c, (int)most);
			j.team = t;
			j.nodes = 1;
			j.need_block = false;
			for (int k = 0; k < n && spent < budget; k++) {
				struct sim_job s = j;

				s.submit = at + sim__below(&ts, 60);
				if (s.submit >= c->horizon)
					s.submit = c->horizon - 1;
				/* a sweep varies in length, not in shape */
				s.duration =
				    (int64_t)((double)j.duration * (0.5 + sim__uniform(&ts)));
				if (s.duration < 60)
					s.duration = 60;
				if (s.duration > s.max_runtime)
					s.duration = s.max_runtime;
				s.prio = j.prio;
				spent += (double)s.duration * s.nodes * s.gpus_per_node;
				if ((rc = push_job(w, &cap, &s)))
					return rc;
			}
		}
	}
	for (int i = 0; i < w->njobs; i++)
		w->jobs[i].id = i; /* a stable tie-break for the sort */
	qsort(w->jobs, (size_t)w->njobs, sizeof(*w->jobs), by_submit);
	if (c->max_jobs && w->njobs > c->max_jobs)
		w->njobs = c->max_jobs;
	for (int i = 0; i < w->njobs; i++)
		w->jobs[i].id = i + 1;
	return 0;
}

int sim_workload_generate(struct sim_workload **out, const struct sim_config *cfg,
			  struct ty_err *err)
{
	struct sim_workload *w = NULL;
	uint64_t st = cfg->seed;
	int rc;

	*out = NULL;
	if ((rc = check_config(cfg, err)))
		return rc;
	if (!(w = calloc(1, sizeof(*w))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	w->cfg = *cfg;
	if ((rc = make_teams(w, &st)) || (rc = make_jobs(w, &st))) {
		sim_workload_free(w);
		return ty_err_set(err, rc, "generating the workload");
	}
	/* on a stream of their own: the rest of the workload is as before they existed */
	st = cfg->seed ^ 0x6a09e667f3bcc908ULL;
	for (int i = 0; i < w->njobs; i++) {
		struct sim_job *j = &w->jobs[i];

		j->ckpt_cost = cfg->ckpt_cost_min +
			       (int64_t)(sim__uniform(&st) *
					 (double)(cfg->ckpt_cost_max - cfg->ckpt_cost_min + 1));
		j->signal_ckpt = sim__below(&st, 100) < cfg->signal_ckpt_pct;
	}
	*out = w;
	return 0;
}

void sim_workload_free(struct sim_workload *w)
{
	if (!w)
		return;
	free(w->teams);
	free(w->jobs);
	free(w);
}
