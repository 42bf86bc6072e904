/*
 * The policy core's preemption planning: candidate victims, the greedy and
 * exact fewest-victims searches, nodes held from the previous decision.
 */
#include "policy_internal.h"

/* ---- preemption ------------------------------------------------------------------------------ */

struct plan {
	int N, G, lvl, deficit_team;
	int64_t deficit, own_freed;
	int sat;
	bool lng;
	struct view *v;
	int nv;
};

static bool node_usable_for_victims(const struct ctx *c, const struct plan *pl, int n)
{
	if (pl->v->free[n] < 0)
		return false;
	return !(pl->lng && c->have_resv && c->spare[n] != NOSPARE);
}

static int plan_dom(const struct ctx *c, const struct plan *pl, int n)
{
	return pl->lvl == LEV_CLUSTER ? c->ndoms : c->ndom[(size_t)n * NLEV + pl->lvl];
}

static int plan_base(const struct ctx *c, const struct plan *pl, int dd)
{
	return dd == c->ndoms ? pl->v->cge[pl->G] : pl->v->ge[(size_t)dd * NGE + pl->G];
}

static void plan_apply(struct ctx *c, struct plan *pl, int r, int sign)
{
	const struct sched_running_in *ru = &c->in->running[r];

	for (int k = 0; k < ru->nnodes; k++) {
		int n = ru->node[k], add, f, old, now, dd;

		if (!node_usable_for_victims(c, pl, n))
			continue;
		add = popc(ru->gpus[k] & c->full[n]);
		if (!add)
			continue;
		f = pl->v->free[n];
		if (!c->tmark[n]) {
			c->tmark[n] = 1;
			c->touched[c->ntouched++] = n;
		}
		old = f + c->extra[n];
		c->extra[n] = (int16_t)(c->extra[n] + sign * add);
		now = f + c->extra[n];
		if ((dd = plan_dom(c, pl, n)) < 0)
			continue;
		if (old < pl->G && now >= pl->G) {
			if (++c->dcount[dd] + plan_base(c, pl, dd) == pl->N)
				pl->sat++;
		} else if (old >= pl->G && now < pl->G) {
			if (c->dcount[dd]-- + plan_base(c, pl, dd) == pl->N)
				pl->sat--;
		}
	}
	if (ru->team == pl->deficit_team)
		pl->own_freed += sign * c->run_gpus[r];
	c->team_freed[ru->team] += sign * c->run_gpus[r];
}

static bool plan_feasible(const struct plan *pl)
{
	return pl->sat > 0 && pl->own_freed >= pl->deficit;
}

/* When running gang ru may be preempted at the earliest (its minimum runtime ends). */
static int64_t protected_until(const struct ctx *c, const struct sched_running_in *ru)
{
	int64_t min_s = ru->min_runtime_s, cls_s = 0;

	if ((unsigned)ru->cls < SCHED_CLASS_COUNT)
		cls_s = c->in->cfg.class_min_runtime_s[ru->cls];
	if (cls_s > min_s)
		min_s = cls_s;
	return ru->start_ms + min_s * 1000;
}

static bool protected_run(const struct ctx *c, const struct sched_running_in *ru)
{
	return c->now < protected_until(c, ru);
}

/*
 * The same against a cohort peer reclaiming its nominal quota: borrowed
 * GPUs come back within the borrower's cohort's reclaim delay (plus its
 * grace), however long its minimum runtime.
 */
static int64_t reclaim_protected_until(const struct ctx *c, const struct sched_running_in *ru)
{
	int64_t until = protected_until(c, ru);
	int64_t delay = ru->start_ms + c->reclaim_delay_ms[ru->team];

	return delay < until ? delay : until;
}

/* Reclaim stays in the cohort: only a cohort peer can borrow a team's nominal. */
static bool same_cohort(const struct ctx *c, int u, int t)
{
	return c->cohort[u] >= 0 && c->cohort[u] == c->cohort[t];
}

/* Whether running gang r may be preempted now for a job of team t, class cls. */
static bool victim_ok(const struct ctx *c, int r, int t, int cls, bool reclaim)
{
	const struct sched_running_in *ru = &c->in->running[r];
	int u = ru->team;

	if (c->claimed[r])
		return false;
	if (ru->preempting)
		return true;
	if (!ru->preemptible)
		return false;
	if (u == t)
		return (int)ru->cls > cls && !protected_run(c, ru);
	if (!reclaim || !same_cohort(c, u, t))
		return false;
	if (c->now < reclaim_protected_until(c, ru) && !c->dry)
		return false;
	/* only while its team still borrows (before this one goes) */
	return c->reclaim_used[u] - c->team_freed[u] > c->qt[u].nominal;
}

/* GPU-milliseconds running gang r would lose if stopped now: its GPUs × the time since its checkpoint. */
static int64_t work_lost(const struct ctx *c, int r)
{
	const struct sched_running_in *ru = &c->in->running[r];
	int64_t since = ru->checkpoint_ms > ru->start_ms ? ru->checkpoint_ms : ru->start_ms;
	int64_t gpus = c->run_gpus[r];

	return (c->now > since ? c->now - since : 0) * (gpus > 0 ? gpus : 1);
}

/* Victim preference: already stopping, lower class, lower priority, fewer GPU-ms lost, younger, id. */
int sched__cmp_victim(const void *a, const void *b, void *arg)
{
	const struct ctx *pref_ctx = arg;
	const struct sched_running_in *x = &pref_ctx->in->running[*(const int *)a];
	const struct sched_running_in *y = &pref_ctx->in->running[*(const int *)b];
	int64_t lx, ly;

	if (x->preempting != y->preempting)
		return x->preempting ? -1 : 1;
	if (x->cls != y->cls)
		return x->cls > y->cls ? -1 : 1;
	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	lx = work_lost(pref_ctx, *(const int *)a);
	ly = work_lost(pref_ctx, *(const int *)b);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	if (x->start_ms != y->start_ms)
		return x->start_ms > y->start_ms ? -1 : 1;
	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return *(const int *)a - *(const int *)b;
}

static void plan_reset(struct ctx *c, struct plan *pl)
{
	for (int k = 0; k < c->ntouched; k++) {
		int n = c->touched[k], dd = plan_dom(c, pl, n);

		c->extra[n] = 0;
		c->tmark[n] = 0;
		if (dd >= 0)
			c->dcount[dd] = 0;
	}
	c->dcount[c->ndoms] = 0;
	c->ntouched = 0;
	for (int k = 0; k < pl->nv; k++)
		c->team_freed[c->in->running[c->vict[k]].team] = 0;
}

/*
 * Whether the nodes the previous decision held for pending job p are a
 * valid gang for it in view v: nheld == nodes, distinct, usable, in one
 * domain of its required level, each with >= gpus_per_node free counting
 * extra[] (a preemption plan's victims; NULL = none). Copies them,
 * ascending, to c->pick.
 */
bool sched__held_fits(struct ctx *c, const struct sched_pending_in *p, const struct view *v,
		      const int16_t *extra, bool lng_plan)
{
	int N = p->nodes, G = p->gpus_per_node,
	    lvl = N > 1 && p->required ? (int)p->required - 1 : -1;

	if (!p->held_nodes || p->nheld != N || N > c->nn)
		return false;
	for (int k = 0; k < N; k++) {
		int n = p->held_nodes[k], f;

		if (n < 0 || n >= c->nn)
			return false;
		for (int x = 0; x < k; x++)
			if (p->held_nodes[x] == n)
				return false;
		if ((f = v->free[n]) < 0)
			return false;
		if (lng_plan && c->have_resv && c->spare[n] != NOSPARE)
			return false;
		if (f + (extra ? extra[n] : 0) < G)
			return false;
		if (lvl >= 0 && (c->ndom[(size_t)n * NLEV + lvl] < 0 ||
				 c->ndom[(size_t)n * NLEV + lvl] !=
				     c->ndom[(size_t)p->held_nodes[0] * NLEV + lvl]))
			return false;
	}
	memcpy(c->pick, p->held_nodes, (size_t)N * sizeof(*c->pick));
	qsort(c->pick, (size_t)N, sizeof(*c->pick), sched__cmp_int);
	return true;
}

/* Whether a gang is still stopping for pending job i. */
bool sched__victims_stopping(const struct ctx *c, int i)
{
	for (int k = 0; k < c->npreempting; k++)
		if (c->owner[c->preempting[k]] == i)
			return true;
	return false;
}

/*
 * The exact part of the victim search: whether some `left` more of the
 * useful candidates cand[from..nc), taken in preference order, make the
 * plan feasible. Depth first, so the first set found is the most
 * preferred of its size; on success the set stays applied and is appended
 * to c->vict. *budget counts the sets tried; 0 ends the search (as not
 * found).
 */
struct exact {
	const int *cand;
	int nc, t, cls;
	bool reclaim;
	int64_t budget;
};

static bool exact_dfs(struct ctx *c, struct plan *pl, struct exact *x, int from, int left)
{
	if (left == 0)
		return plan_feasible(pl);
	for (int k = from; k <= x->nc - left; k++) {
		int r = x->cand[k];

		if (x->budget <= 0)
			return false;
		x->budget--;
		if (!victim_ok(c, r, x->t, x->cls, x->reclaim))
			continue;
		plan_apply(c, pl, r, +1);
		c->vict[pl->nv++] = r;
		if (exact_dfs(c, pl, x, k + 1, left - 1))
			return true;
		pl->nv--;
		plan_apply(c, pl, r, -1);
	}
	return false;
}

/*
 * Whether running gang r can help pending job i: GPUs on a usable node
 * that does not already fit the gang's per-node share, or quota its own
 * team needs back.
 */
static bool victim_useful(const struct ctx *c, const struct plan *pl, int r)
{
	const struct sched_running_in *ru = &c->in->running[r];

	if (ru->team == pl->deficit_team && pl->deficit > 0)
		return true;
	for (int k = 0; k < ru->nnodes; k++) {
		int n = ru->node[k];

		if (node_usable_for_victims(c, pl, n) && pl->v->free[n] < pl->G &&
		    popc(ru->gpus[k] & c->full[n]))
			return true;
	}
	return false;
}

/*
 * Greedy-then-pruned victims (pl->vict, the already-stopping ones first)
 * are minimal; look for a smaller set, smallest first. Sets of one were
 * tried exactly before the greedy pass, so only a greedy result of three
 * or more new victims can improve. Bounded by SCHED_VICTIM_BUDGET sets
 * per job and, for the whole decision, by c->exact_left.
 */
static void fewest_victims(struct ctx *c, struct plan *pl, int ncand, int t, int cls,
			   bool reclaim)
{
	int nstop = 0, greedy = 0, nuse = 0;
	struct exact x = {.t = t, .cls = cls, .reclaim = reclaim};

	for (int k = 0; k < pl->nv; k++)
		nstop += c->in->running[c->vict[k]].preempting;
	greedy = pl->nv - nstop;
	if (greedy < 3 || c->exact_left <= 0)
		return;
	/* the greedy victims out (stopping ones stay), keeping their order */
	for (int k = nstop; k < pl->nv; k++) {
		plan_apply(c, pl, c->vict[k], -1);
		c->vict_keep[k - nstop] = c->vict[k];
	}
	pl->nv = nstop;
	for (int k = 0; k < ncand; k++) {
		int r = c->cand[k];

		if (!c->in->running[r].preempting && victim_useful(c, pl, r))
			c->vict_use[nuse++] = r;
	}
	x.cand = c->vict_use;
	x.nc = nuse;
	x.budget = c->exact_left < SCHED_VICTIM_BUDGET ? c->exact_left : SCHED_VICTIM_BUDGET;
	for (int size = 2; size < greedy; size++) {
		int64_t before = x.budget;
		bool found = exact_dfs(c, pl, &x, 0, size);

		c->exact_left -= before - x.budget;
		if (found) {
			c->d->stats.victim_sets_improved++;
			return;
		}
		if (x.budget <= 0) {
			c->d->stats.victim_search_cutoffs++;
			break;
		}
	}
	for (int k = 0; k < greedy; k++) {
		plan_apply(c, pl, c->vict_keep[k], +1);
		c->vict[pl->nv++] = c->vict_keep[k];
	}
}

/*
 * Find the fewest running gangs whose GPUs, added to what is free, let
 * pending job i fit (nodes and, for own-team victims, quota) and commit
 * them: preemptions out, the job's nodes held. *done = whether it did.
 */
int sched__try_preempt(struct ctx *c, int i, bool lng, struct view *v, int64_t deficit, bool *done)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	const struct quota_team *q = &c->qt[p->team];
	int64_t need = (int64_t)p->nodes * p->gpus_per_node;
	bool reclaim = c->tier0[i] && q->used + need <= q->nominal;
	struct plan pl = {0};
	int ncand = 0, t = p->team, req = p->nodes == 1 ? SCHED_TOPO_NONE : p->required, rc = 0;
	size_t mk;
	bool ok = false;
	int chosen = 0, first_new = -1;
	int64_t own = 0; /* GPUs of its own team's victims: the hold takes their place */

	*done = false;
	if (!c->in->cfg.preemption || (c->dry ? c->dry_left == 0 : c->plans_left == 0))
		return 0;
	/* a failed plan stays failed for bigger jobs of the same key until something is placed */
	mk = ((((size_t)t * SCHED_CLASS_COUNT + (size_t)p->cls) * SCHED_TOPO_COUNT + (size_t)req) *
		  2 +
	      (lng ? 1 : 0)) *
		 NG +
	     (size_t)p->gpus_per_node;
	if (!c->dry && c->plan_gen[mk] == c->gen && c->plan_memo[mk] &&
	    c->plan_memo[mk] <= p->nodes && !p->nexclude && !c->od)
		return 0;
	if (!reclaim && !c->npreempting && !c->lower[(size_t)t * SCHED_CLASS_COUNT + p->cls])
		return 0;
	/* candidates: anything already stopping, own lower classes, borrowing teams' gangs */
	for (int k = 0; k < c->npreempting; k++) {
		int r = c->preempting[k];

		if (!c->claimed[r] && (c->owner[r] < 0 || c->owner[r] == i))
			c->cand[ncand++] = r;
	}
	for (int u = 0; u < c->in->nteams; u++) {
		if (u == t ? !c->lower[(size_t)t * SCHED_CLASS_COUNT + p->cls]
			   : !(reclaim && same_cohort(c, u, t) &&
			       c->reclaim_used[u] > c->qt[u].nominal))
			continue;
		for (int x = c->runs_off[u]; x < c->runs_off[u + 1]; x++) {
			int r = c->runs[x];

			if (!c->in->running[r].preempting && victim_ok(c, r, t, p->cls, reclaim))
				c->cand[ncand++] = r;
		}
	}
	if (ncand == 0)
		return 0;
	if (c->dry) {
		c->dry_left--;
	} else {
		c->plans_left--;
		c->d->stats.preemption_plans++;
	}
	qsort_r(c->cand, (size_t)ncand, sizeof(*c->cand), sched__cmp_victim, c);

	pl.N = p->nodes;
	pl.G = p->gpus_per_node;
	pl.lvl = req ? req - 1 : LEV_CLUSTER;
	pl.deficit_team = t;
	pl.deficit = deficit;
	pl.lng = lng;
	pl.v = v;
	if (pl.lvl == LEV_CLUSTER)
		pl.sat = v->cge[pl.G] >= pl.N;
	else
		for (int dd = c->lev_start[pl.lvl]; dd < c->lev_start[pl.lvl + 1]; dd++)
			pl.sat += v->ge[(size_t)dd * NGE + pl.G] >= pl.N;

	/* already-stopping gangs cost nothing */
	for (int k = 0; k < ncand && c->in->running[c->cand[k]].preempting; k++) {
		plan_apply(c, &pl, c->cand[k], +1);
		c->vict[pl.nv++] = c->cand[k];
	}
	if (plan_feasible(&pl))
		ok = true;
	/* the most preferred single victim that is enough */
	for (int k = 0; !ok && k < ncand; k++) {
		int r = c->cand[k];

		if (c->stopping_only || c->in->running[r].preempting ||
		    !victim_ok(c, r, t, p->cls, reclaim))
			continue;
		plan_apply(c, &pl, r, +1);
		if (plan_feasible(&pl)) {
			c->vict[pl.nv++] = r;
			ok = true;
		} else {
			plan_apply(c, &pl, r, -1);
		}
	}
	/* else add in preference order until it fits */
	for (int k = 0; !ok && k < ncand; k++) {
		int r = c->cand[k];

		if (c->stopping_only || c->in->running[r].preempting ||
		    !victim_ok(c, r, t, p->cls, reclaim))
			continue;
		plan_apply(c, &pl, r, +1);
		c->vict[pl.nv++] = r;
		ok = plan_feasible(&pl);
	}
	if (!ok)
		goto fail;
	/*
	 * drop victims that are not needed, the least preferred first (not when
	 * keeping held nodes: the nodes decide which stopping gangs are needed)
	 */
	for (int k = pl.nv - 1; k >= 0 && !c->stopping_only; k--) {
		int r = c->vict[k];

		plan_apply(c, &pl, r, -1);
		if (plan_feasible(&pl)) {
			memmove(&c->vict[k], &c->vict[k + 1],
				(size_t)(pl.nv - k - 1) * sizeof(*c->vict));
			pl.nv--;
		} else {
			plan_apply(c, &pl, r, +1);
		}
	}

	if (!c->stopping_only && !c->dry)
		fewest_victims(c, &pl, ncand, t, p->cls, reclaim);

	/* the nodes: a satisfied domain (most nodes made by victims), victim-made nodes first */
	{
		int best = -1, bestc = -1, k = 0;

		for (int x = 0; x < c->ntouched; x++) {
			int n = c->touched[x], dd = plan_dom(c, &pl, n);

			if (dd < 0 || c->dcount[dd] + plan_base(c, &pl, dd) < pl.N)
				continue;
			if (c->dcount[dd] > bestc || (c->dcount[dd] == bestc && dd < best)) {
				best = dd;
				bestc = c->dcount[dd];
			}
		}
		if (sched__held_fits(c, p, v, c->extra, lng)) {
			/* the nodes the previous decision held for it */
			k = pl.N;
		} else if (c->stopping_only) {
			goto fail; /* only to keep waiting for those */
		} else if (best < 0) {
			/* nodes fit without victims (the victims are for quota) */
			if (!sched__fit(c, v, pl.N, pl.G, req))
				goto fail;
			k = pl.N;
		} else {
			for (int x = 0; x < c->ntouched; x++) {
				int n = c->touched[x], f = v->free[n];

				if (plan_dom(c, &pl, n) == best && f >= 0 && f < pl.G &&
				    f + c->extra[n] >= pl.G)
					c->pick[k++] = n;
			}
			qsort(c->pick, (size_t)k, sizeof(*c->pick), sched__cmp_int);
			if (k > pl.N)
				k = pl.N;
			k += sched__pick_best(c, v, best == c->ndoms ? -1 : best, pl.G, pl.N - k,
					      c->pick + k);
			qsort(c->pick, (size_t)k, sizeof(*c->pick), sched__cmp_int);
		}
		if (k < pl.N)
			goto fail;
	}
	/* keep only victims the chosen nodes (or the quota) need */
	for (int k = pl.nv - 1; k >= 0; k--) {
		int r = c->vict[k];
		bool need_it = false;

		plan_apply(c, &pl, r, -1);
		if (pl.own_freed < pl.deficit)
			need_it = true;
		for (int x = 0; x < pl.N && !need_it; x++) {
			int n = c->pick[x];

			if (v->free[n] + c->extra[n] < pl.G)
				need_it = true;
		}
		if (need_it) {
			plan_apply(c, &pl, r, +1);
		} else {
			memmove(&c->vict[k], &c->vict[k + 1],
				(size_t)(pl.nv - k - 1) * sizeof(*c->vict));
			pl.nv--;
		}
	}
	if (pl.nv == 0)
		goto fail;
	if (c->dry) {
		struct sched_pending_out *o = &c->d->pending[i];
		int64_t until = 0;

		for (int k = 0; k < pl.nv; k++) {
			const struct sched_running_in *ru = &c->in->running[c->vict[k]];
			int64_t u;

			/* only reclaim is planned dry: its victims are other teams' */
			if (ru->preempting || c->now >= (u = reclaim_protected_until(c, ru)))
				continue;
			o->protected_count++;
			if (!o->protected_job || u > until ||
			    (u == until && ru->job < o->protected_job)) {
				o->protected_job = ru->job;
				o->protected_by_delay = u < protected_until(c, ru);
				until = u;
			}
		}
		o->protected_until_ms = until;
		*done = o->protected_count > 0;
		plan_reset(c, &pl);
		return 0;
	}

	/* commit: new preemptions, victims claimed, the job's nodes held */
	for (int k = 0; k < pl.nv; k++) {
		int r = c->vict[k];
		const struct sched_running_in *ru = &c->in->running[r];
		struct sched_preemption *e;

		c->claimed[r] = true;
		chosen++;
		if (ru->team == t)
			own += c->run_gpus[r];
		if (ru->preempting)
			continue;
		if ((rc = sched__grow((void **)&c->d->preemptions, &c->cap_pre,
				      c->d->npreemptions + 1, sizeof(*c->d->preemptions))))
			goto fail;
		e = &c->d->preemptions[c->d->npreemptions++];
		e->victim = ru->job;
		e->running = r;
		e->for_job = p->job;
		e->pending = i;
		e->why = ru->team == t ? SCHED_PREEMPT_CLASS : SCHED_PREEMPT_RECLAIM;
		c->reclaim_used[ru->team] -= c->run_gpus[r];
		if (first_new < 0)
			first_new = k;
	}
	plan_reset(c, &pl);
	if ((rc = sched__hold_add(c, i, pl.N, pl.G, c->now + p->max_runtime_s * 1000)))
		return rc;
	for (int x = 0; x < pl.N; x++) {
		int n = c->pick[x], took = sched__take_gpus(c, n, pl.G, NULL);

		c->hold_nodes[c->holds[c->nholds - 1].first + x] = n;
		c->hold_vp[c->holds[c->nholds - 1].first + x] = pl.G - took;
		if (lng && c->have_resv && c->spare[n] != NOSPARE)
			c->spare[n] = c->spare[n] >= pl.G ? c->spare[n] - pl.G : 0;
		sched__refresh_node(c, n);
	}
	/* its own victims' GPUs are already counted for the team: count only the rest */
	sched__team_add(c, t, own >= need ? 0 : need - own);
	c->gen++;
	if ((rc = sched__add_reservation(c, i, SCHED_RESV_PREEMPTION, c->now, pl.N, pl.G, c->pick)))
		return rc;
	{
		struct sched_pending_out *o = &c->d->pending[i];

		o->reason = SCHED_WAIT_PREEMPTION;
		o->other_job = c->in->running[c->vict[first_new >= 0 ? first_new : 0]].job;
		o->count = chosen;
	}
	*done = true;
	return 0;
fail:
	plan_reset(c, &pl);
	if (!rc && !p->nexclude && !c->od && !c->dry && !c->stopping_only) {
		c->plan_gen[mk] = c->gen;
		if (!c->plan_memo[mk] || p->nodes < c->plan_memo[mk])
			c->plan_memo[mk] = p->nodes;
	}
	return rc;
}
