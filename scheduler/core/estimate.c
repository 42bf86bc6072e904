/*
 * Start-time estimates: the decision run forward over the running gangs'
 * expected ends (policy.h, sched_estimate; docs/scheduling.md, "Start-time
 * estimates"). Every placement is sched_decide()'s: there is no second one.
 */
#include "policy.h"

#include <stdlib.h>
#include <string.h>

enum { DEFAULT_JOBS = 10000, DEFAULT_STEPS = 48, DEFAULT_COALESCE = 20 };
#define DEFAULT_HORIZON_S (7 * 24 * 3600LL)

struct sim {
	const struct sched_input *in;
	struct sched_estimates *out;
	/* gangs: the input's, this decision's placements, then the simulation's */
	struct sched_running_in *run;
	int64_t *end; /* expected end */
	bool *hist;   /* end from history */
	bool *gone;   /* ended in an earlier step */
	int *ended;   /* the gangs that end in this step */
	int nended;
	int nrun, caprun;
	int *node; /* gang node slots */
	uint64_t *gpus;
	int *slot_next; /* per slot: the next slot that ended this step on the same node */
	int *slot_gang;
	int nslot, capslot;
	int *head;  /* per node: first slot ended this step on it, -1 */
	int *stamp; /* per node: step of head */
	int *mark;  /* per node: placement being matched */
	struct sched_running_in *srun;
	struct sched_pending_in *pend;
	int *pidx; /* pend[k] is in->pending[pidx[k]] */
	int np;
	struct sched_node_in *nodes;
	struct sched_team_in *teams;
	int64_t *pend_rt; /* expected runtime ms per in->pending */
	bool *pend_hist;
};

static bool never(enum sched_reason r)
{
	return r == SCHED_NEVER_FITS || r == SCHED_NEVER_FITS_EXCLUDED ||
	       r == SCHED_NEVER_FITS_CPUS || r == SCHED_NEVER_FITS_MEMORY || r == SCHED_INVALID;
}

/* A gang from a placement: start at t, policy end by max runtime, expected end by e. */
static void add_placed(struct sim *s, const struct sched_placement *pl,
		       const struct sched_pending_in *p, int64_t t, int64_t rt_ms, bool h)
{
	struct sched_running_in *ru = &s->run[s->nrun];
	int first = s->nslot;

	memset(ru, 0, sizeof(*ru));
	ru->job = p->job;
	ru->team = p->team;
	ru->cls = p->cls;
	ru->priority = p->priority;
	ru->start_ms = t;
	ru->checkpoint_ms = t;
	ru->min_runtime_s = p->min_runtime_s;
	ru->end_by_ms = t + p->max_runtime_s * 1000;
	ru->preemptible = true;
	ru->nnodes = pl->nnodes;
	ru->cpus_per_node = p->cpus_per_node;
	ru->memory_mb_per_node = p->memory_mb_per_node;
	for (int r = 0; r < pl->nnodes; r++) {
		uint64_t m = 0;

		for (int g = 0; g < pl->gpus_per_node; g++)
			m |= 1ull << pl->gpus[r * pl->gpus_per_node + g];
		s->node[s->nslot] = pl->node[r];
		s->gpus[s->nslot] = m;
		s->slot_gang[s->nslot] = s->nrun;
		s->nslot++;
	}
	ru->node = s->node + first;
	ru->gpus = s->gpus + first;
	s->end[s->nrun] = t + rt_ms;
	s->hist[s->nrun] = h;
	s->nrun++;
}

static void add_wait(struct sched_estimate *e, int64_t job)
{
	for (int k = 0; k < e->nwaits; k++)
		if (e->waits_for[k] == job)
			return;
	if (e->nwaits < SCHED_EST_MAX_WAITS)
		e->waits_for[e->nwaits++] = job;
	e->nwaits_total++;
}

/* Which of this step's ends job i's placement pl waits for. */
static void record_waits(struct sim *s, struct sched_estimate *e, const struct sched_placement *pl,
			 int step, int mark)
{
	bool any = false;

	for (int r = 0; r < pl->nnodes; r++) {
		int n = pl->node[r];

		if (s->stamp[n] != step || s->mark[n] == mark)
			continue;
		s->mark[n] = mark;
		for (int sl = s->head[n]; sl >= 0; sl = s->slot_next[sl]) {
			int g = s->slot_gang[sl];

			add_wait(e, s->run[g].job);
			e->history |= s->hist[g];
			any = true;
		}
	}
	if (any)
		return;
	/* freed by quota or a backoff's end rather than GPUs on its nodes */
	for (int k = 0; k < s->nended; k++) {
		add_wait(e, s->run[s->ended[k]].job);
		e->history |= s->hist[s->ended[k]];
	}
}

static int setup(struct sim *s, const struct sched_input *in, const struct sched_decisions *d,
		 const struct sched_estimate_in *e, int max_jobs)
{
	int64_t stop =
	    in->now_ms + (in->cfg.stop_allowance_s > 0 ? in->cfg.stop_allowance_s * 1000 : 0);
	int slots = 0, gangs = in->nrunning + d->nplacements;

	for (int r = 0; r < in->nrunning; r++)
		slots += in->running[r].nnodes;
	for (int k = 0; k < d->nplacements; k++)
		slots += d->placements[k].nnodes;
	for (int q = 0, taken = 0; q < d->npending && taken < max_jobs; q++) {
		const struct sched_pending_in *p = &in->pending[d->order[q]];

		if (d->pending[d->order[q]].reason == SCHED_PLACED ||
		    never(d->pending[d->order[q]].reason))
			continue;
		taken++;
		gangs++;
		slots += p->nodes > 0 && p->nodes <= in->nnodes ? p->nodes : 0;
	}
	s->caprun = gangs;
	s->capslot = slots;
	s->run = calloc((size_t)gangs + 1, sizeof(*s->run));
	s->srun = calloc((size_t)gangs + 1, sizeof(*s->srun));
	s->end = calloc((size_t)gangs + 1, sizeof(*s->end));
	s->hist = calloc((size_t)gangs + 1, sizeof(*s->hist));
	s->gone = calloc((size_t)gangs + 1, sizeof(*s->gone));
	s->ended = calloc((size_t)gangs + 1, sizeof(*s->ended));
	s->node = calloc((size_t)slots + 1, sizeof(*s->node));
	s->gpus = calloc((size_t)slots + 1, sizeof(*s->gpus));
	s->slot_next = calloc((size_t)slots + 1, sizeof(*s->slot_next));
	s->slot_gang = calloc((size_t)slots + 1, sizeof(*s->slot_gang));
	s->head = calloc((size_t)in->nnodes + 1, sizeof(*s->head));
	s->stamp = calloc((size_t)in->nnodes + 1, sizeof(*s->stamp));
	s->mark = calloc((size_t)in->nnodes + 1, sizeof(*s->mark));
	s->nodes = calloc((size_t)in->nnodes + 1, sizeof(*s->nodes));
	s->teams = calloc((size_t)in->nteams + 1, sizeof(*s->teams));
	s->pend = calloc((size_t)in->npending + 1, sizeof(*s->pend));
	s->pidx = calloc((size_t)in->npending + 1, sizeof(*s->pidx));
	s->pend_rt = calloc((size_t)in->npending + 1, sizeof(*s->pend_rt));
	s->pend_hist = calloc((size_t)in->npending + 1, sizeof(*s->pend_hist));
	if (!s->run || !s->srun || !s->end || !s->hist || !s->gone || !s->ended || !s->node ||
	    !s->gpus || !s->slot_next || !s->slot_gang || !s->head || !s->stamp || !s->mark ||
	    !s->nodes || !s->teams || !s->pend || !s->pidx || !s->pend_rt || !s->pend_hist)
		return TY_ENOMEM;

	if (in->nnodes)
		memcpy(s->nodes, in->nodes, (size_t)in->nnodes * sizeof(*s->nodes));
	if (in->nteams)
		memcpy(s->teams, in->teams, (size_t)in->nteams * sizeof(*s->teams));
	for (int n = 0; n < in->nnodes; n++)
		s->stamp[n] = -1;
	for (int i = 0; i < in->npending; i++) {
		int64_t max = in->pending[i].max_runtime_s * 1000;
		int64_t rt = e && e->pend_runtime_s && e->pend_runtime_s[i] > 0
				 ? e->pend_runtime_s[i] * 1000
				 : max;

		s->pend_rt[i] = rt < max || max <= 0 ? rt : max;
		s->pend_hist[i] = e && e->pend_history && e->pend_runtime_s &&
				  e->pend_runtime_s[i] > 0 && e->pend_history[i];
	}

	/* the input's gangs, their GPUs taken off the nodes' busy (the core adds them back) */
	for (int r = 0; r < in->nrunning; r++) {
		const struct sched_running_in *ri = &in->running[r];
		struct sched_running_in *ru = &s->run[s->nrun];
		int64_t end = ri->end_by_ms;

		*ru = *ri;
		ru->node = s->node + s->nslot;
		ru->gpus = s->gpus + s->nslot;
		for (int k = 0; k < ri->nnodes; k++) {
			s->node[s->nslot] = ri->node[k];
			s->gpus[s->nslot] = ri->gpus[k];
			s->slot_gang[s->nslot] = s->nrun;
			s->nslot++;
			if (ri->node[k] >= 0 && ri->node[k] < in->nnodes)
				s->nodes[ri->node[k]].busy &= ~ri->gpus[k];
		}
		/* one that outran its history is expected to run to its limit */
		if (e && e->run_end_ms && e->run_end_ms[r] > in->now_ms && e->run_end_ms[r] < end) {
			end = e->run_end_ms[r];
			s->hist[s->nrun] = e->run_history && e->run_history[r];
		}
		if (ri->preempting && end > stop)
			end = stop;
		s->end[s->nrun] = end > in->now_ms ? end : in->now_ms;
		s->nrun++;
	}
	for (int k = 0; k < d->npreemptions; k++) {
		int r = d->preemptions[k].running;

		if (r >= 0 && r < in->nrunning && s->end[r] > stop) {
			s->end[r] = stop;
			s->hist[r] = false;
		}
	}
	for (int k = 0; k < d->nplacements; k++) {
		int i = d->placement_pending[k];

		add_placed(s, &d->placements[k], &in->pending[i], in->now_ms, s->pend_rt[i],
			   s->pend_hist[i]);
		s->out->job[i].kind = SCHED_EST_NOW;
		s->out->job[i].start_ms = in->now_ms;
		if (s->teams[in->pending[i].team].has_budget)
			s->teams[in->pending[i].team].spent += in->pending[i].max_cost;
	}
	for (int q = 0; q < d->npending; q++) {
		int i = d->order[q];
		struct sched_pending_in *p;

		if (d->pending[i].reason == SCHED_PLACED)
			continue;
		if (never(d->pending[i].reason)) {
			s->out->job[i].kind = SCHED_EST_NEVER;
			continue;
		}
		if (s->np >= max_jobs)
			continue; /* SCHED_EST_NONE */
		p = &s->pend[s->np];
		*p = in->pending[i];
		p->held_nodes = NULL; /* no preemption in the simulation: nothing is held */
		p->nheld = 0;
		s->pidx[s->np++] = i;
	}
	return 0;
}

/* Whether the last pending job has its answer, or is not in the simulation to get one. */
static bool last_answered(const struct sim *s)
{
	int last = s->in->npending - 1;

	if (last < 0 || s->out->job[last].kind != SCHED_EST_NONE)
		return true;
	for (int q = 0; q < s->np; q++)
		if (s->pidx[q] == last)
			return false;
	return true;
}

static void sim_free(struct sim *s)
{
	free(s->run);
	free(s->srun);
	free(s->end);
	free(s->hist);
	free(s->gone);
	free(s->ended);
	free(s->node);
	free(s->gpus);
	free(s->slot_next);
	free(s->slot_gang);
	free(s->head);
	free(s->stamp);
	free(s->mark);
	free(s->nodes);
	free(s->teams);
	free(s->pend);
	free(s->pidx);
	free(s->pend_rt);
	free(s->pend_hist);
}

/* One step at time t: the ends up to t leave, sched_decide() places what now fits. */
static int step(struct sim *s, int64_t t, int stepno, struct ty_err *err)
{
	const struct sched_input *in = s->in;
	struct sched_input si = *in;
	struct sched_decisions *dd = NULL;
	int nsrun = 0, rc, keep = 0;
	int base = s->nrun;

	s->nended = 0;
	for (int g = 0; g < s->nrun; g++) {
		if (s->gone[g])
			continue;
		if (s->end[g] <= t) {
			s->ended[s->nended++] = g;
			s->gone[g] = true;
			for (int k = 0; k < s->run[g].nnodes; k++) {
				int sl = (int)(s->run[g].node + k - s->node), n = s->run[g].node[k];

				if (n < 0 || n >= in->nnodes)
					continue;
				if (s->stamp[n] != stepno) {
					s->stamp[n] = stepno;
					s->head[n] = -1;
				}
				s->slot_next[sl] = s->head[n];
				s->head[n] = sl;
			}
			continue;
		}
		s->srun[nsrun++] = s->run[g];
	}
	si.now_ms = t;
	si.cfg.preemption = false;
	si.nodes = s->nodes;
	si.teams = s->teams;
	si.running = s->srun;
	si.nrunning = nsrun;
	si.pending = s->pend;
	si.npending = s->np;
	if ((rc = sched_decide(&dd, &si, err)))
		return rc;
	for (int k = 0; k < dd->nplacements; k++) {
		int q = dd->placement_pending[k], i = s->pidx[q];
		struct sched_estimate *e = &s->out->job[i];

		e->kind = SCHED_EST_AT;
		e->start_ms = t;
		record_waits(s, e, &dd->placements[k], stepno, base + k + 1);
		if (s->nrun < s->caprun && s->nslot + dd->placements[k].nnodes <= s->capslot)
			add_placed(s, &dd->placements[k], &s->pend[q], t, s->pend_rt[i],
				   s->pend_hist[i]);
		if (s->teams[s->pend[q].team].has_budget)
			s->teams[s->pend[q].team].spent += s->pend[q].max_cost;
	}
	for (int q = 0; q < s->np; q++) {
		int i = s->pidx[q];

		if (dd->pending[q].reason == SCHED_PLACED)
			continue;
		if (never(dd->pending[q].reason)) {
			s->out->job[i].kind = SCHED_EST_NEVER;
			continue;
		}
		s->pend[keep] = s->pend[q];
		s->pidx[keep++] = i;
	}
	s->np = keep;
	sched_decisions_free(dd);
	return 0;
}

int sched_estimate(struct sched_estimates **out, const struct sched_input *in,
		   const struct sched_decisions *d, const struct sched_estimate_in *e,
		   struct ty_err *err)
{
	struct sched_estimate_cfg cfg = e ? e->cfg : (struct sched_estimate_cfg){0};
	struct sim s = {0};
	int64_t t, horizon;
	int rc;

	*out = NULL;
	if (!in || !d || d->npending != in->npending || d->nteams != in->nteams)
		return ty_err_set(err, TY_EINVAL, "estimate: decision is not the input's");
	if (cfg.max_jobs < 0 || cfg.max_steps < 0 || cfg.horizon_s < 0 ||
	    cfg.coalesce_permille < 0 || cfg.min_step_s < 0)
		return ty_err_set(err, TY_EINVAL, "estimate: negative bound");
	if (!cfg.max_jobs)
		cfg.max_jobs = DEFAULT_JOBS;
	if (!cfg.max_steps)
		cfg.max_steps = DEFAULT_STEPS;
	if (!cfg.horizon_s)
		cfg.horizon_s = DEFAULT_HORIZON_S;
	if (!cfg.coalesce_permille)
		cfg.coalesce_permille = DEFAULT_COALESCE;
	horizon = in->now_ms + cfg.horizon_s * 1000;

	rc = TY_ENOMEM;
	if (!(s.out = calloc(1, sizeof(*s.out))) ||
	    !(s.out->job = calloc((size_t)in->npending + 1, sizeof(*s.out->job))))
		goto out;
	s.out->njobs = in->npending;
	s.in = in;
	if ((rc = setup(&s, in, d, e, cfg.max_jobs)))
		goto out;

	t = in->now_ms;
	while (s.np > 0 && s.out->steps < cfg.max_steps && !(cfg.until_last && last_answered(&s))) {
		int64_t next = INT64_MAX, at, win;

		for (int g = 0; g < s.nrun; g++)
			if (!s.gone[g] && s.end[g] > t && s.end[g] < next)
				next = s.end[g];
		for (int q = 0; q < s.np; q++)
			if (s.pend[q].not_before_ms > t && s.pend[q].not_before_ms < next)
				next = s.pend[q].not_before_ms;
		if (next == INT64_MAX)
			break; /* nothing left ends: the rest wait on what the snapshot does not
				  know */
		if (next > horizon) {
			t = horizon;
			break;
		}
		/* ends close together are one step, at the latest of them */
		win = (next - in->now_ms) / 1000 * cfg.coalesce_permille;
		if (win < cfg.min_step_s * 1000)
			win = cfg.min_step_s * 1000;
		at = next;
		for (int g = 0; g < s.nrun; g++)
			if (!s.gone[g] && s.end[g] > at && s.end[g] <= next + win &&
			    s.end[g] <= horizon)
				at = s.end[g];
		t = at;
		if ((rc = step(&s, t, s.out->steps, err)))
			goto out;
		s.out->steps++;
	}
	for (int q = 0; q < s.np; q++) {
		s.out->job[s.pidx[q]].kind = SCHED_EST_HORIZON;
		s.out->job[s.pidx[q]].start_ms = t;
	}
	s.out->reached_ms = t;
	*out = s.out;
	s.out = NULL;
	rc = 0;
out:
	sim_free(&s);
	sched_estimates_free(s.out);
	return rc;
}

void sched_estimates_free(struct sched_estimates *s)
{
	if (!s)
		return;
	free(s->job);
	free(s);
}
