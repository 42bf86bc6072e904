/*
 * The policy core's reservations: holds for jobs waiting for their victims
 * and the head job's earliest start over the running gangs' ends.
 */
#include "policy_internal.h"

int sched__hold_add(struct ctx *c, int i, int N, int G, int64_t end_ms)
{
	int rc;
	struct hold *h;

	if ((rc = sched__grow((void **)&c->holds, &c->cap_holds, c->nholds + 1, sizeof(*c->holds))))
		return rc;
	if ((rc = sched__grow((void **)&c->hold_nodes, &c->cap_hold_nodes, c->nhold_nodes + N,
			      sizeof(*c->hold_nodes))) ||
	    (rc = sched__grow((void **)&c->hold_vp, &c->cap_hold_vp, c->nhold_nodes + N,
			      sizeof(*c->hold_vp))))
		return rc;
	h = &c->holds[c->nholds++];
	h->pending = i;
	h->nnodes = N;
	h->gpus = G;
	h->first = c->nhold_nodes;
	h->end_ms = end_ms;
	c->nhold_nodes += N;
	return 0;
}

int sched__add_reservation(struct ctx *c, int i, enum sched_resv_kind kind, int64_t at, int N,
			   int G, const int *nodes)
{
	struct sched_reservation *r;
	int rc;

	if ((rc = sched__grow((void **)&c->d->reservations, &c->cap_res, c->d->nreservations + 1,
			      sizeof(*c->d->reservations))))
		return rc;
	r = &c->d->reservations[c->d->nreservations];
	memset(r, 0, sizeof(*r));
	if (!(r->node = malloc((size_t)N * sizeof(*r->node))))
		return TY_ENOMEM;
	memcpy(r->node, nodes, (size_t)N * sizeof(*r->node));
	r->job = c->in->pending[i].job;
	r->pending = i;
	r->kind = kind;
	r->start_ms = at;
	r->nnodes = N;
	r->gpus_per_node = G;
	c->d->nreservations++;
	return 0;
}

/* ---- reservation ------------------------------------------------------------------------------
 */

static int evt_push(struct ctx *c, int64_t t, int n, int g)
{
	int rc;

	if (g == 0 || !c->in->nodes[n].schedulable)
		return 0;
	if ((rc = sched__grow((void **)&c->evts, &c->cap_evts, c->nevts + 1, sizeof(*c->evts))))
		return rc;
	c->evts[c->nevts++] = (struct evt){t, n, g};
	return 0;
}

static int cmp_evt(const void *a, const void *b)
{
	const struct evt *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->gpus > y->gpus) - (x->gpus < y->gpus);
}

/* Free GPUs at the time of event index upto (exclusive) in c->f; then build c->tmp. */
static void probe_view(struct ctx *c, const struct sched_pending_in *p, int upto)
{
	for (int n = 0; n < c->nn; n++)
		c->f[n] = (int16_t)sched__actual_free(c, n);
	/*
	 * Events of one time may pass through a negative count (a hold's take
	 * sorts before its victim's release): only unschedulable nodes (no
	 * events) are unusable, a count is clamped once all are applied.
	 */
	for (int k = 0; k < upto; k++)
		c->f[c->evts[k].node] = (int16_t)(c->f[c->evts[k].node] + c->evts[k].gpus);
	for (int n = 0; n < c->nn; n++) {
		if (!c->in->nodes[n].schedulable)
			c->f[n] = -1;
		else if (c->f[n] < 0)
			c->f[n] = 0;
		else if (c->f[n] > popc(c->full[n]))
			c->f[n] = (int16_t)popc(c->full[n]);
	}
	for (int k = 0; k < p->nexclude; k++)
		if (p->exclude[k] >= 0 && p->exclude[k] < c->nn)
			c->f[p->exclude[k]] = -1;
	for (int n = 0; c->od && n < c->nn; n++)
		if (spot_node(c, n))
			c->f[n] = -1;
	/* a reservation counts on GPUs only: nodes short of CPUs or memory now are left out */
	for (int k = 0; k < c->nrx; k++)
		c->f[c->rx[k]] = -1;
	sched__view_build(c, &c->tmp, c->f);
}

/*
 * The head job: the earliest time at which the running gangs' limits (and
 * this decision's placements and holds) leave room for it, and the nodes
 * it would get then. *found = whether there is such a time.
 */
int sched__reserve(struct ctx *c, int i, bool *found)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	int N = p->nodes, G = p->gpus_per_node, rc, lo, hi, m = 0;
	int64_t *times = NULL;
	int *upto = NULL;

	int64_t stop = c->now + (c->in->cfg.stop_allowance_s > 0
				     ? c->in->cfg.stop_allowance_s * 1000
				     : 0);

	*found = false;
	c->nevts = 0;
	for (int r = 0; r < c->in->nrunning; r++) {
		const struct sched_running_in *ru = &c->in->running[r];
		/* gangs told to stop hold their GPUs for the stop allowance */
		int64_t t = ru->end_by_ms > c->now ? ru->end_by_ms : c->now;

		if ((c->claimed[r] || (ru->preempting && c->in->cfg.stop_allowance_s > 0)) &&
		    t > stop)
			t = stop;
		/* stopping for a later job, which will take its GPUs (at most its max runtime) */
		if (ru->preempting && !c->claimed[r] && c->owner[r] >= 0 && c->owner[r] != i)
			t = (stop > c->now ? stop : c->now) +
			    c->in->pending[c->owner[r]].max_runtime_s * 1000;

		for (int k = 0; k < ru->nnodes; k++)
			if ((rc = evt_push(c, t, ru->node[k],
					   popc(ru->gpus[k] & c->full[ru->node[k]]))))
				return rc;
	}
	for (int h = 0; h < c->nholds; h++) {
		const struct hold *ho = &c->holds[h];

		for (int x = 0; x < ho->nnodes; x++) {
			int n = c->hold_nodes[ho->first + x];

			/* a hold takes its victims' GPUs when they stop */
			if ((rc = evt_push(c, stop, n, -c->hold_vp[ho->first + x])) ||
			    (rc = evt_push(c, ho->end_ms, n, ho->gpus)))
				return rc;
		}
	}
	for (int k = 0; k < c->d->nplacements; k++) {
		const struct sched_placement *pl = &c->d->placements[k];
		const struct sched_pending_in *pp = &c->in->pending[c->d->placement_pending[k]];

		for (int r = 0; r < pl->nnodes; r++)
			if ((rc = evt_push(c, c->now + pp->max_runtime_s * 1000, pl->node[r],
					   pl->gpus_per_node)))
				return rc;
	}
	if (c->nevts)
		qsort(c->evts, (size_t)c->nevts, sizeof(*c->evts), cmp_evt);
	times = malloc(((size_t)c->nevts + 1) * sizeof(*times));
	upto = malloc(((size_t)c->nevts + 1) * sizeof(*upto));
	if (!times || !upto) {
		rc = TY_ENOMEM;
		goto out;
	}
	/* distinct times; the state at times[j] includes every event up to upto[j] */
	times[m] = c->now;
	upto[m] = 0;
	for (int k = 0; k < c->nevts; k++) {
		if (c->evts[k].t > times[m]) {
			m++;
			times[m] = c->evts[k].t;
		}
		upto[m] = k + 1;
	}
	m++;
	lo = 0;
	hi = m - 1;
	c->d->stats.reservation_probes++;
	probe_view(c, p, upto[hi]);
	if (!sched__fit(c, &c->tmp, N, G, p->required)) {
		rc = 0;
		goto out;
	}
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		c->d->stats.reservation_probes++;
		probe_view(c, p, upto[mid]);
		if (sched__fit(c, &c->tmp, N, G, p->required))
			hi = mid;
		else
			lo = mid + 1;
	}
	probe_view(c, p, upto[lo]);
	if (!sched__fit(c, &c->tmp, N, G, p->required)) {
		rc = 0; /* cannot happen: fit is monotone in time */
		goto out;
	}
	c->resv_ms = times[lo];
	/* long view: reserved nodes keep what the head needs at resv_ms */
	for (int n = 0; n < c->nn; n++)
		c->spare[n] = NOSPARE;
	for (int k = 0; k < N; k++) {
		int n = c->pick[k];

		c->spare[n] = c->tmp.free[n] - G;
	}
	sched__view_copy(&c->lng, &c->main, c);
	if (c->nspot)
		sched__view_copy(&c->lng_od, &c->main_od, c);
	c->have_resv = true;
	for (int k = 0; k < N; k++)
		sched__refresh_node(c, c->pick[k]);
	if ((rc = sched__add_reservation(c, i, SCHED_RESV_HEAD, c->resv_ms, N, G, c->pick)))
		goto out;
	*found = true;
	rc = 0;
out:
	free(times);
	free(upto);
	return rc;
}
