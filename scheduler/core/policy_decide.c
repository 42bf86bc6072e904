/*
 * The policy core's decision: sched_decide() over a snapshot, one pending
 * job at a time, its placements and the output's growth.
 */
#include "policy_internal.h"

/* ---- output growth ------------------------------------------------------------------------- */

int sched__grow(void **p, int *cap, int need, size_t sz)
{
	void *q;
	int nc;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	if (!(q = realloc(*p, (size_t)nc * sz)))
		return TY_ENOMEM;
	*p = q;
	*cap = nc;
	return 0;
}

/* ---- placement ------------------------------------------------------------------------------ */

int sched__place(struct ctx *c, int i, bool lng, bool *placed)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	struct sched_placement pl = {0};
	int master = -1, port = 0, rc, r, N = p->nodes, G = p->gpus_per_node;

	*placed = false;
	for (int k = 0; k < N; k++) {
		if ((rc = sched__ports_init(c, c->pick[k])))
			return rc;
		if ((port = sched__port_lowest(c, c->pick[k]))) {
			master = k;
			break;
		}
	}
	if (master < 0)
		return 0;
	if ((rc = sched__grow((void **)&c->d->placements, &c->cap_pl, c->d->nplacements + 1,
			      sizeof(*c->d->placements))) ||
	    (rc = sched__grow((void **)&c->d->placement_pending, &c->cap_plp, c->d->nplacements + 1,
			      sizeof(*c->d->placement_pending))))
		return rc;
	pl.job = p->job;
	pl.nnodes = N;
	pl.gpus_per_node = G;
	pl.local_ranks = p->per_node ? 1 : (G > 1 ? G : 1);
	pl.world_size = N * pl.local_ranks;
	pl.master_port = port;
	pl.node = calloc((size_t)N, sizeof(*pl.node));
	pl.gpus = calloc((size_t)N * (size_t)G + 1, sizeof(*pl.gpus));
	if (!pl.node || !pl.gpus) {
		sched_placement_clear(&pl);
		return TY_ENOMEM;
	}
	if ((rc = sched__port_take(c, c->pick[master], port))) {
		sched_placement_clear(&pl);
		return rc;
	}
	pl.node[0] = c->pick[master];
	r = 1;
	for (int k = 0; k < N; k++)
		if (k != master)
			pl.node[r++] = c->pick[k];
	for (r = 0; r < N; r++) {
		int n = pl.node[r];

		sched__take_gpus(c, n, G, pl.gpus + (size_t)r * (size_t)G);
		if (lng && c->spare[n] != NOSPARE)
			c->spare[n] -= G;
		if (c->cpu_left[n] != NOLIMIT)
			c->cpu_left[n] -= p->cpus_per_node;
		if (c->mem_left[n] != NOLIMIT)
			c->mem_left[n] -= p->memory_mb_per_node;
		if (c->cpu_left[n] < c->cpu_min)
			c->cpu_min = c->cpu_left[n];
		if (c->mem_left[n] < c->mem_min)
			c->mem_min = c->mem_left[n];
		sched__refresh_node(c, n);
	}
	sched__team_add(c, p->team, (int64_t)N * G);
	{
		struct quota_vec ch =
		    quota_job_charge(N, p->cpus_per_node, p->memory_mb_per_node);

		quota_vec_add(&c->caps[p->team].used, &ch, +1);
	}
	c->d->placements[c->d->nplacements] = pl;
	c->d->placement_pending[c->d->nplacements++] = i;
	c->gen++;
	*placed = true;
	return 0;
}

/* ---- the decision ------------------------------------------------------------------------------
 */

static bool pending_valid(const struct ctx *c, const struct sched_pending_in *p)
{
	return p->team >= 0 && p->team < c->in->nteams && p->nodes >= 1 && p->gpus_per_node >= 0 &&
	       p->gpus_per_node <= SCHED_MAX_GPUS && (unsigned)p->cls < SCHED_CLASS_COUNT &&
	       (unsigned)p->required < SCHED_TOPO_COUNT && p->max_runtime_s > 0 &&
	       p->cpus_per_node >= 0 && p->memory_mb_per_node >= 0;
}

static int decide_one(struct ctx *c, int i);

/* decide_one, then the budget charge of a job it placed (whichever way it was placed). */
static int decide_charged(struct ctx *c, int i)
{
	int before = c->d->nplacements, rc = decide_one(c, i);

	if (!rc && c->d->nplacements > before)
		sched__budget_charge(c, &c->in->pending[i]);
	return rc;
}

static int decide_one(struct ctx *c, int i)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	struct sched_pending_out *o = &c->d->pending[i];
	int t = p->team, N = p->nodes, G = p->gpus_per_node, rc = 0;
	int64_t need = (int64_t)N * G;
	bool lng, placed = false, done = false, fitted = false, narrowed = false;
	struct view *v;
	enum quota_verdict qv;
	struct quota_vec charge;
	int capped;

	c->nrx = 0;
	c->od = c->nspot > 0 && p->spot != SCHED_SPOT_ANY;
	if (!pending_valid(c, p)) {
		o->reason = SCHED_INVALID;
		return 0;
	}
	charge = quota_job_charge(N, p->cpus_per_node, p->memory_mb_per_node);
	lng = c->have_resv && c->now + p->max_runtime_s * 1000 > c->resv_ms;
	v = lng ? view_lng(c) : view_main(c);
	qv = quota_check(&c->qt[t], sched__cohort_of(c, t), need);
	if (p->not_before_ms > c->now) {
		/* retry backoff: not tried, takes nothing (docs/scheduling.md) */
		o->reason = SCHED_WAIT_BACKOFF;
		o->at_ms = p->not_before_ms;
		return 0;
	}
	if (sched__over_budget(c, p)) {
		/* money, unlike quota, is never made by preempting: it just waits */
		o->reason = SCHED_WAIT_BUDGET;
		o->team = t;
		o->spent = c->spent[t];
		return 0;
	}
	if (qv == QUOTA_OK && !sched__could_fit(c, N, G, p->required, false)) {
		o->reason = SCHED_NEVER_FITS;
		o->count = N;
		o->level = N > 1 ? p->required : SCHED_TOPO_NONE;
		return 0;
	}
	if (qv == QUOTA_OK && c->nlim && (p->cpus_per_node > 0 || p->memory_mb_per_node > 0) &&
	    !sched__could_fit_res(c, p, -1)) {
		/* CPUs first when they alone are enough to keep it off every fitting node */
		sched__res_reason(
		    c, o, p, sched__could_fit_res(c, p, QUOTA_CPUS) ? QUOTA_MEMORY_MB : QUOTA_CPUS,
		    true);
		return 0;
	}
	if (qv == QUOTA_OK && (p->nexclude > p->nexclude_held || c->od)) {
		int nx;

		if (!sched__could_fit_excluding(c, p, &nx)) {
			o->reason = SCHED_NEVER_FITS_EXCLUDED;
			o->count = nx;
			o->level = N > 1 ? p->required : SCHED_TOPO_NONE;
			return 0;
		}
	}
	/* CPU and memory caps are plain ceilings: nothing is preempted for them */
	if ((capped = quota_caps_check(&c->caps[t], &charge)) >= 0) {
		o->reason = capped == QUOTA_CPUS ? SCHED_WAIT_QUOTA_CPUS : SCHED_WAIT_QUOTA_MEMORY;
		o->team = t;
		o->used = c->caps[t].used.v[capped];
		o->limit = c->caps[t].limit.v[capped];
		o->need = charge.v[capped];
		return 0;
	}
	sched__res_scan(c, p);
	narrowed = p->nexclude || c->nrx;
	if (p->nexclude)
		sched__set_excluded(c, p, true);
	if (c->nrx)
		sched__res_exclude(c, true);
	if (narrowed)
		c->nolearn = true;
	if (qv != QUOTA_OK) {
		/* only its own lower classes can make quota room */
		int64_t deficit =
		    c->qt[t].used + need - quota_admissible(&c->qt[t], sched__cohort_of(c, t));

		if (c->d->head < 0 || c->in->cfg.backfill) {
			if ((rc = sched__try_preempt(c, i, lng, v, deficit > 0 ? deficit : 1,
						     &done)) ||
			    done)
				goto out;
		}
		o->team = t;
		o->count = (int)(need > INT_MAX ? INT_MAX : need);
		switch (qv) {
		case QUOTA_OVER_NOMINAL:
			o->reason = SCHED_WAIT_NOMINAL;
			o->used = c->qt[t].used;
			o->limit = c->qt[t].nominal;
			break;
		case QUOTA_OVER_BORROW_LIMIT:
			o->reason = SCHED_WAIT_BORROW_LIMIT;
			o->used = quota_borrowed(&c->qt[t]);
			o->limit = c->qt[t].borrowing_limit;
			break;
		default:
			o->reason = SCHED_WAIT_COHORT;
			o->used = c->qt[t].used;
			o->limit = quota_admissible(&c->qt[t], sched__cohort_of(c, t));
			break;
		}
		goto out;
	}
	/*
	 * Quota the head needs is kept from every job behind it, short or
	 * long: a head that became quota-blocked would lose its place.
	 */
	if (c->have_resv && !sched__resv_quota_ok(c, t, need, &charge)) {
		o->reason = SCHED_WAIT_RESERVED;
		o->other_job = c->in->pending[c->d->head].job;
		o->at_ms = c->resv_ms;
		goto out;
	}
	if (c->d->head >= 0 && !c->in->cfg.backfill) {
		if ((rc = sched__try_preempt(c, i, lng, v, 0, &done)) || done)
			goto out;
		o->reason = SCHED_WAIT_BEHIND;
		o->other_job = c->in->pending[c->d->head].job;
		goto out;
	}
	if (p->nheld == N && sched__held_fits(c, p, v, NULL, false)) {
		/* its victims are gone: it starts on the nodes held for it */
		fitted = true;
	} else if (p->nheld == N && sched__victims_stopping(c, i)) {
		/* keep waiting for the held nodes rather than start elsewhere */
		c->stopping_only = true;
		rc = sched__try_preempt(c, i, lng, v, 0, &done);
		c->stopping_only = false;
		if (rc || done)
			goto out;
	}
	if (fitted) {
		/* placed below */
	} else if (sched__fits_quickly_no(v, N, G, p->required) && !narrowed) {
		c->d->stats.fast_rejects++;
	} else {
		if (c->d->head >= 0) {
			if (c->scan_left == 0) {
				o->reason = SCHED_WAIT_SCAN_LIMIT;
				o->count = c->in->cfg.backfill_max_scan > 0
					       ? c->in->cfg.backfill_max_scan
					       : DEFAULT_SCAN;
				goto out;
			}
			if (c->scan_left > 0)
				c->scan_left--;
		}
		c->d->stats.fit_attempts++;
		fitted = sched__fit(c, v, N, G, p->required);
	}
	if (fitted) {
		if ((rc = sched__place(c, i, lng, &placed)))
			goto out;
		if (placed) {
			o->reason = SCHED_PLACED;
		} else {
			o->reason = SCHED_WAIT_PORT;
		}
		goto out;
	}
	if ((rc = sched__try_preempt(c, i, lng, v, 0, &done)) || done)
		goto out;
	/* reclaim would make room but for protected borrowing gangs: say so */
	if (c->tier0[i] && c->qt[t].used + need <= c->qt[t].nominal) {
		bool blocked = false;

		c->dry = true;
		rc = sched__try_preempt(c, i, lng, v, 0, &blocked);
		c->dry = false;
		if (rc)
			goto out;
	}
	if (c->d->head < 0 && c->resv_attempts > 0) {
		bool found = false;

		c->resv_attempts--;
		if (c->nrx)
			sched__res_exclude(c, false);
		if (p->nexclude)
			sched__set_excluded(c, p, false);
		rc = sched__reserve(c, i, &found);
		if (p->nexclude)
			sched__set_excluded(c, p, true);
		if (c->nrx)
			sched__res_exclude(c, true);
		if (rc)
			goto out;
		if (!sched__res_wait_reason(c, o, p))
			sched__nodes_reason(c, o, p);
		if (found) {
			c->d->head = i;
			c->head_team = t;
			c->head_need = need;
			c->head_charge = charge;
			c->head_borrows = c->qt[t].used + need > c->qt[t].nominal;
			o->reason = SCHED_WAIT_HEAD;
			o->at_ms = c->resv_ms;
		}
		goto out;
	}
	if (lng && !sched__fits_quickly_no(view_main(c), N, G, p->required) &&
	    sched__fit(c, view_main(c), N, G, p->required)) {
		/* it would fit but for the reservation */
		o->protected_job = 0;
		o->protected_count = 0;
		o->protected_until_ms = 0;
		o->protected_by_delay = false;
		o->reason = SCHED_WAIT_RESERVED;
		o->other_job = c->in->pending[c->d->head].job;
		o->at_ms = c->resv_ms;
		goto out;
	}
	if (!sched__res_wait_reason(c, o, p))
		sched__nodes_reason(c, o, p);
out:
	if (c->nrx)
		sched__res_exclude(c, false);
	if (p->nexclude)
		sched__set_excluded(c, p, false);
	if (narrowed)
		c->nolearn = false;
	c->nrx = 0;
	return rc;
}

static int validate(const struct sched_input *in, struct ty_err *err)
{
	if (in->nnodes < 0 || in->nteams < 0 || in->nrunning < 0 || in->npending < 0)
		return ty_err_set(err, TY_EINVAL, "negative count in scheduler input");
	if ((in->nnodes && !in->nodes) || (in->nteams && !in->teams) ||
	    (in->nrunning && !in->running) || (in->npending && !in->pending))
		return ty_err_set(err, TY_EINVAL, "missing array in scheduler input");
	if (in->cfg.port_lo > in->cfg.port_hi || in->cfg.port_lo < 1)
		return ty_err_set(err, TY_EINVAL, "bad rendezvous port range %d-%d",
				  in->cfg.port_lo, in->cfg.port_hi);
	for (int r = 0; r < in->nrunning; r++) {
		const struct sched_running_in *ru = &in->running[r];

		if (ru->team < 0 || ru->team >= in->nteams)
			return ty_err_set(err, TY_EINVAL, "running job %lld has team index %d",
					  (long long)ru->job, ru->team);
		if (ru->nnodes < 0 || (ru->nnodes && (!ru->node || !ru->gpus)))
			return ty_err_set(err, TY_EINVAL, "running job %lld has no node list",
					  (long long)ru->job);
		for (int k = 0; k < ru->nnodes; k++)
			if (ru->node[k] < 0 || ru->node[k] >= in->nnodes)
				return ty_err_set(err, TY_EINVAL,
						  "running job %lld has node index %d",
						  (long long)ru->job, ru->node[k]);
	}
	return 0;
}

static void ctx_free(struct ctx *c)
{
	free(c->full);
	free(c->busy);
	free(c->spare);
	free(c->ndom);
	if (c->ports)
		for (int n = 0; n < c->nn; n++)
			free(c->ports[n].v);
	free(c->ports);
	free(c->dom_anc);
	free(c->dom_off);
	free(c->dom_nodes);
	sched__view_release(&c->main);
	sched__view_release(&c->lng);
	sched__view_release(&c->cap);
	sched__view_release(&c->tmp);
	sched__view_release(&c->main_od);
	sched__view_release(&c->lng_od);
	sched__view_release(&c->cap_od);
	free(c->qt);
	free(c->cohort);
	free(c->reclaim_delay_ms);
	free(c->coh);
	free(c->reclaim_used);
	free(c->spent);
	free(c->tier0);
	free(c->runs_off);
	free(c->runs);
	free(c->run_gpus);
	free(c->claimed);
	free(c->holds);
	free(c->hold_nodes);
	free(c->hold_vp);
	free(c->pick);
	free(c->extra);
	free(c->touched);
	free(c->dcount);
	free(c->team_freed);
	free(c->cand);
	free(c->vict);
	free(c->vict_keep);
	free(c->vict_use);
	free(c->preempting);
	free(c->owner);
	free(c->lower);
	free(c->tmark);
	free(c->f);
	free(c->evts);
	free(c->plan_memo);
	free(c->plan_gen);
	free(c->cpu_left);
	free(c->mem_left);
	free(c->lim);
	free(c->rx);
	free(c->caps);
}

int sched_decide(struct sched_decisions **out, const struct sched_input *in, struct ty_err *err)
{
	struct ctx c = {0};
	struct sched_decisions *d = NULL;
	struct okey *keys = NULL, *ktmp = NULL;
	double *fs = NULL;
	int *frank = NULL;
	double tot_u = 0, tot_w = 0;
	int rc;

	*out = NULL;
	if ((rc = validate(in, err)))
		return rc;
	c.in = in;
	c.now = in->now_ms;
	c.nn = in->nnodes;
	c.words = (c.nn + 63) / 64 + 1;
	c.swords = (c.words + 63) / 64 + 1;
	c.scan_left = in->cfg.backfill_max_scan == 0  ? DEFAULT_SCAN
		      : in->cfg.backfill_max_scan < 0 ? -1
						      : in->cfg.backfill_max_scan;
	c.plans_left = in->cfg.max_preemption_plans == 0  ? DEFAULT_PLANS
		       : in->cfg.max_preemption_plans < 0 ? -1
							  : in->cfg.max_preemption_plans;
	c.dry_left = c.plans_left;
	c.exact_left = SCHED_VICTIM_BUDGET_CYCLE;
	rc = TY_ENOMEM;
	if (!(d = calloc(1, sizeof(*d))))
		goto out;
	c.d = d;
	d->head = -1;
	d->npending = in->npending;
	d->nteams = in->nteams;
	d->pending = calloc((size_t)in->npending + 1, sizeof(*d->pending));
	d->order = calloc((size_t)in->npending + 1, sizeof(*d->order));
	d->teams = calloc((size_t)in->nteams + 1, sizeof(*d->teams));
	c.full = calloc((size_t)c.nn + 1, sizeof(*c.full));
	c.busy = calloc((size_t)c.nn + 1, sizeof(*c.busy));
	c.spare = calloc((size_t)c.nn + 1, sizeof(*c.spare));
	c.ports = calloc((size_t)c.nn + 1, sizeof(*c.ports));
	c.pick = calloc((size_t)c.nn + 1, sizeof(*c.pick));
	c.extra = calloc((size_t)c.nn + 1, sizeof(*c.extra));
	c.touched = calloc((size_t)c.nn + 1, sizeof(*c.touched));
	c.f = calloc((size_t)c.nn + 1, sizeof(*c.f));
	c.run_gpus = calloc((size_t)in->nrunning + 1, sizeof(*c.run_gpus));
	c.claimed = calloc((size_t)in->nrunning + 1, sizeof(*c.claimed));
	c.runs = calloc((size_t)in->nrunning + 1, sizeof(*c.runs));
	c.cand = calloc((size_t)in->nrunning + 1, sizeof(*c.cand));
	c.vict = calloc((size_t)in->nrunning + 1, sizeof(*c.vict));
	c.vict_keep = calloc((size_t)in->nrunning + 1, sizeof(*c.vict_keep));
	c.vict_use = calloc((size_t)in->nrunning + 1, sizeof(*c.vict_use));
	c.preempting = calloc((size_t)in->nrunning + 1, sizeof(*c.preempting));
	c.owner = calloc((size_t)in->nrunning + 1, sizeof(*c.owner));
	c.lower = calloc((size_t)in->nteams * SCHED_CLASS_COUNT + 1, sizeof(*c.lower));
	c.tmark = calloc((size_t)c.nn + 1, sizeof(*c.tmark));
	c.tier0 = calloc((size_t)in->npending + 1, sizeof(*c.tier0));
	c.cpu_left = calloc((size_t)c.nn + 1, sizeof(*c.cpu_left));
	c.mem_left = calloc((size_t)c.nn + 1, sizeof(*c.mem_left));
	c.lim = calloc((size_t)c.nn + 1, sizeof(*c.lim));
	c.rx = calloc((size_t)c.nn + 1, sizeof(*c.rx));
	c.caps = calloc((size_t)in->nteams + 1, sizeof(*c.caps));
	c.resv_attempts = 8;
	keys = calloc((size_t)in->npending + 1, sizeof(*keys));
	ktmp = calloc((size_t)in->npending + 1, sizeof(*ktmp));
	fs = calloc((size_t)in->nteams + 1, sizeof(*fs));
	frank = calloc((size_t)in->nteams + 1, sizeof(*frank));
	if (!d->pending || !d->order || !d->teams || !c.full || !c.busy || !c.spare || !c.ports ||
	    !c.pick || !c.extra || !c.touched || !c.f || !c.run_gpus || !c.claimed || !c.runs ||
	    !c.cand || !c.vict || !c.vict_keep || !c.vict_use || !c.preempting || !c.owner || !c.lower || !c.tmark || !c.tier0 || !c.cpu_left || !c.mem_left || !c.lim || !c.rx || !c.caps || !keys ||
	    !ktmp || !fs || !frank)
		goto out;
	if ((rc = sched__setup_teams(&c, in)))
		goto out;
	rc = TY_ENOMEM;
	{
		size_t nm = (size_t)in->nteams * SCHED_CLASS_COUNT * SCHED_TOPO_COUNT * 2 * NG + 1;

		c.plan_memo = calloc(nm, sizeof(*c.plan_memo));
		c.plan_gen = calloc(nm, sizeof(*c.plan_gen));
		if (!c.plan_memo || !c.plan_gen)
			goto out;
	}
	if ((rc = sched__build_domains(&c)))
		goto out;
	rc = TY_ENOMEM;
	c.dcount = calloc((size_t)c.ndoms + 2, sizeof(*c.dcount));
	if (!c.dcount || sched__view_alloc(&c.main, &c) || sched__view_alloc(&c.lng, &c) ||
	    sched__view_alloc(&c.cap, &c) || sched__view_alloc(&c.tmp, &c))
		goto out;
	for (int n = 0; n < c.nn; n++)
		c.nspot += in->nodes[n].spot && in->nodes[n].schedulable;
	if (c.nspot && (sched__view_alloc(&c.main_od, &c) || sched__view_alloc(&c.lng_od, &c) ||
			sched__view_alloc(&c.cap_od, &c)))
		goto out;

	/* nodes and what the running gangs hold */
	for (int n = 0; n < c.nn; n++) {
		int g = clamp_gpus(in->nodes[n].gpus);

		c.full[n] = g >= 64 ? ~0ull : (1ull << g) - 1;
		c.busy[n] = in->nodes[n].busy & c.full[n];
		c.spare[n] = NOSPARE;
		c.cpu_left[n] = in->nodes[n].cpus > 0 ? in->nodes[n].cpus : NOLIMIT;
		c.mem_left[n] = in->nodes[n].memory_mb > 0 ? in->nodes[n].memory_mb : NOLIMIT;
		if (in->nodes[n].cpus > 0 || in->nodes[n].memory_mb > 0)
			c.lim[c.nlim++] = n;
	}
	for (int t = 0; t < in->nteams; t++) {
		c.caps[t].limit.v[QUOTA_CPUS] = in->teams[t].max_cpus > 0 ? in->teams[t].max_cpus : -1;
		c.caps[t].limit.v[QUOTA_MEMORY_MB] =
		    in->teams[t].max_memory_mb > 0 ? in->teams[t].max_memory_mb : -1;
	}
	for (int r = 0; r < in->nrunning; r++) {
		const struct sched_running_in *ru = &in->running[r];

		struct quota_vec ch =
		    quota_job_charge(ru->nnodes, ru->cpus_per_node, ru->memory_mb_per_node);

		for (int k = 0; k < ru->nnodes; k++) {
			int n = ru->node[k];

			c.busy[n] |= ru->gpus[k] & c.full[n];
			c.run_gpus[r] += popc(ru->gpus[k]);
			/* stopping gangs too: they hold their CPUs and memory until gone */
			if (c.cpu_left[n] != NOLIMIT && ru->cpus_per_node > 0)
				c.cpu_left[n] -= ru->cpus_per_node;
			if (c.mem_left[n] != NOLIMIT && ru->memory_mb_per_node > 0)
				c.mem_left[n] -= ru->memory_mb_per_node;
		}
		quota_vec_add(&c.caps[ru->team].used, &ch, +1);
		c.qt[ru->team].used += c.run_gpus[r];
		c.runs_off[ru->team + 1]++;
		if (ru->preempting) {
			c.preempting[c.npreempting++] = r;
			c.reclaim_used[ru->team] -= c.run_gpus[r];
		} else if (ru->preemptible)
			for (int cl = 0; cl < SCHED_CLASS_COUNT && cl < (int)ru->cls; cl++)
				c.lower[(size_t)ru->team * SCHED_CLASS_COUNT + cl]++;
	}
	for (int t = 0; t < in->nteams; t++) {
		c.runs_off[t + 1] += c.runs_off[t];
		c.reclaim_used[t] += c.qt[t].used; /* minus gangs already stopping, below */
		if (c.cohort[t] >= 0)
			quota_cohort_account(&c.coh[c.cohort[t]], &c.qt[t], +1);
	}
	{
		int *fill = calloc((size_t)in->nteams + 1, sizeof(*fill));

		if (!fill)
			goto out;
		for (int r = 0; r < in->nrunning; r++) {
			int t = in->running[r].team;

			c.runs[c.runs_off[t] + fill[t]++] = r;
		}
		free(fill);
		for (int t = 0; t < in->nteams; t++)
			qsort_r(c.runs + c.runs_off[t], (size_t)(c.runs_off[t + 1] - c.runs_off[t]),
				sizeof(*c.runs), sched__cmp_victim, &c);
	}
	/* which pending job each stopping gang is for (sorted ids, one pass over pending) */
	for (int r = 0; r < in->nrunning; r++)
		c.owner[r] = -1;
	if (c.npreempting) {
		struct okey *pf = calloc((size_t)c.npreempting * 2, sizeof(*pf));
		int m = 0;

		rc = TY_ENOMEM;
		if (!pf)
			goto out;
		for (int k = 0; k < c.npreempting; k++)
			if (in->running[c.preempting[k]].preempted_for) {
				pf[m].c = sched__bias(in->running[c.preempting[k]].preempted_for);
				pf[m].idx = c.preempting[k];
				m++;
			}
		sched__okey_sort(pf, pf + c.npreempting, m);
		for (int i = 0; i < in->npending && m; i++) {
			uint64_t id = sched__bias(in->pending[i].job);
			int lo = 0, hi = m;

			while (lo < hi) {
				int mid = (lo + hi) / 2;

				if (pf[mid].c < id)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (; lo < m && pf[lo].c == id; lo++)
				c.owner[pf[lo].idx] = i;
		}
		free(pf);
	}
	c.cpu_min = c.mem_min = NOLIMIT;
	for (int n = 0; n < c.nn; n++) {
		c.f[n] = (int16_t)sched__actual_free(&c, n);
		if (!in->nodes[n].schedulable)
			continue;
		if (c.cpu_left[n] < c.cpu_min)
			c.cpu_min = c.cpu_left[n];
		if (c.mem_left[n] < c.mem_min)
			c.mem_min = c.mem_left[n];
	}
	sched__view_build(&c, &c.main, c.f);
	if (c.nspot) {
		for (int n = 0; n < c.nn; n++)
			if (spot_node(&c, n))
				c.f[n] = -1;
		sched__view_build(&c, &c.main_od, c.f);
	}

	/* fair share and the order */
	for (int t = 0; t < in->nteams; t++) {
		double w = in->teams[t].weight > 0 ? in->teams[t].weight : 1;

		tot_u += in->teams[t].usage > 0 ? in->teams[t].usage : 0;
		tot_w += w;
	}
	for (int t = 0; t < in->nteams; t++) {
		double w = in->teams[t].weight > 0 ? in->teams[t].weight : 1;
		double u = in->teams[t].usage > 0 ? in->teams[t].usage : 0;

		d->teams[t].fairshare = quota_fairshare(u, tot_u, w, tot_w);
		d->teams[t].u = tot_u > 0 ? u / tot_u : 0;
		d->teams[t].s = tot_w > 0 ? w / tot_w : 0;
	}
	/* teams ranked by F, highest first; equal F, equal rank; unknown teams last */
	for (int t = 0; t < in->nteams; t++)
		fs[t] = d->teams[t].fairshare;
	qsort(fs, (size_t)in->nteams, sizeof(*fs), sched__cmp_double_desc);
	for (int t = 0; t < in->nteams; t++) {
		int lo = 0, hi = in->nteams - 1;

		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (fs[mid] > d->teams[t].fairshare)
				lo = mid + 1;
			else
				hi = mid;
		}
		frank[t] = lo;
	}
	for (int i = 0; i < in->npending; i++) {
		const struct sched_pending_in *p = &in->pending[i];
		bool team_ok = p->team >= 0 && p->team < in->nteams;
		uint64_t cls =
		    (unsigned)p->cls < SCHED_CLASS_COUNT ? (uint64_t)p->cls : SCHED_CLASS_COUNT;
		uint64_t rank = team_ok ? (uint64_t)frank[p->team] : (uint64_t)in->nteams;
		/* priority clamped to ±2^23, higher first */
		int64_t pr = p->priority > 0x7fffff    ? 0x7fffff
			     : p->priority < -0x800000 ? -0x800000
						       : p->priority;

		/* an expedited requeue goes first within its class and rank (policy.h) */
		keys[i].a = cls << 60 | (rank & 0xfffffffull) << 25 |
			    (uint64_t)!p->expedited << 24 | (uint64_t)(0x7fffff - pr);
		keys[i].b = sched__bias(p->submit_ms);
		keys[i].c = sched__bias(p->job);
		keys[i].idx = i;
		d->pending[i].team = p->team;
		d->pending[i].fairshare = team_ok ? d->teams[p->team].fairshare : 0;
		if (team_ok)
			d->teams[p->team].pending++;
	}
	sched__okey_sort(keys, ktmp, in->npending);
	/*
	 * Two tiers (docs/scheduling.md §1): first every job that its team can
	 * run within its nominal quota, then the jobs that must borrow, each
	 * tier in the order above. A team's first-tier jobs are a greedy pick
	 * in that order: its GPUs in use plus the jobs picked so far plus this
	 * one within nominal. Borrowed capacity goes only to work no team needs
	 * within its own quota, so a reclaim victim (whose team borrows) never
	 * goes ahead of the job it was preempted for.
	 */
	{
		int64_t *acc = calloc((size_t)in->nteams + 1, sizeof(*acc));
		int *stop_cls = calloc((size_t)in->nteams + 1, sizeof(*stop_cls));
		int n0 = 0, n1 = 0;

		rc = TY_ENOMEM;
		if (!acc || !stop_cls) {
			free(acc);
			free(stop_cls);
			goto out;
		}
		for (int t = 0; t < in->nteams; t++) {
			acc[t] = c.qt[t].used;
			stop_cls[t] = SCHED_CLASS_COUNT;
		}
		for (int k = 0; k < in->npending; k++) {
			int i = keys[k].idx;
			const struct sched_pending_in *p = &in->pending[i];
			int64_t need;

			if (!pending_valid(&c, p))
				continue;
			need = (int64_t)p->nodes * p->gpus_per_node;
			/*
			 * Below a class with a second-tier job of the same team nothing
			 * of that team is first-tier: such a job may preempt the lower
			 * class for quota, which must not come back ahead of it.
			 */
			if ((int)p->cls <= stop_cls[p->team] &&
			    acc[p->team] + need <= c.qt[p->team].nominal) {
				acc[p->team] += need;
				c.tier0[i] = 1;
				d->pending[i].within_nominal = true;
			} else if ((int)p->cls < stop_cls[p->team]) {
				stop_cls[p->team] = (int)p->cls;
			}
		}
		free(acc);
		free(stop_cls);
		for (int k = 0; k < in->npending; k++)
			n1 += !c.tier0[keys[k].idx];
		n1 = in->npending - n1; /* first-tier count: second tier starts there */
		for (int k = 0; k < in->npending; k++) {
			if (c.tier0[keys[k].idx])
				ktmp[n0++] = keys[k];
			else
				ktmp[n1++] = keys[k];
		}
		memcpy(keys, ktmp, (size_t)in->npending * sizeof(*keys));
	}
	for (int k = 0; k < in->npending; k++) {
		d->order[k] = keys[k].idx;
		d->pending[keys[k].idx].position = k;
	}

	for (int k = 0; k < in->npending; k++) {
		/* the input is read in queue order: fetch ahead what the next jobs touch */
		if (k + 8 < in->npending) {
			__builtin_prefetch(&in->pending[d->order[k + 8]]);
			__builtin_prefetch(&d->pending[d->order[k + 8]], 1);
		}
		if ((rc = decide_charged(&c, d->order[k])))
			goto out;
	}
	/* waiting for nodes while kept off spot ones: say that is why */
	for (int i = 0; i < in->npending && c.nspot > 0; i++) {
		struct sched_pending_out *o = &d->pending[i];

		if (in->pending[i].spot == SCHED_SPOT_ANY)
			continue;
		o->on_demand_only = true;
		if (o->reason == SCHED_WAIT_NODES || o->reason == SCHED_WAIT_TOPOLOGY ||
		    o->reason == SCHED_NEVER_FITS_EXCLUDED) {
			o->count = o->reason == SCHED_NEVER_FITS_EXCLUDED;
			o->reason = SCHED_WAIT_ON_DEMAND;
			o->level = SCHED_TOPO_NONE;
			o->protected_job = 0;
			o->protected_count = 0;
			o->protected_until_ms = 0;
			o->protected_by_delay = false;
		}
	}

	/* teams after the decision; lent = peers' borrowing attributed to lenders in team order */
	for (int t = 0; t < in->nteams; t++) {
		struct sched_team_out *to = &d->teams[t];

		to->used = c.qt[t].used;
		to->cpus_used = c.caps[t].used.v[QUOTA_CPUS];
		to->memory_mb_used = c.caps[t].used.v[QUOTA_MEMORY_MB];
		to->borrowed = quota_borrowed(&c.qt[t]);
		to->admissible = quota_admissible(&c.qt[t], sched__cohort_of(&c, t));
	}
	for (int co = 0; co < c.ncoh; co++) {
		int64_t left = c.coh[co].borrowed;

		for (int t = 0; t < in->nteams && left > 0; t++) {
			int64_t idle = c.qt[t].nominal - c.qt[t].used, x;

			if (c.cohort[t] != co || idle <= 0)
				continue;
			x = idle < left ? idle : left;
			d->teams[t].lent = x;
			left -= x;
		}
	}
	*out = d;
	d = NULL;
	rc = 0;
out:
	if (rc == TY_ENOMEM)
		ty_err_set(err, rc, NULL);
	sched_decisions_free(d);
	ctx_free(&c);
	free(keys);
	free(ktmp);
	free(fs);
	free(frank);
	return rc;
}

void sched_decisions_free(struct sched_decisions *d)
{
	if (!d)
		return;
	sched_placements_free(d->placements, d->nplacements);
	free(d->placement_pending);
	free(d->preemptions);
	for (int k = 0; k < d->nreservations; k++)
		free(d->reservations[k].node);
	free(d->reservations);
	free(d->pending);
	free(d->teams);
	free(d->order);
	free(d);
}
