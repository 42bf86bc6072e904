/*
 * What-if: a job spec's start estimate without submitting it, and the same
 * for the alternatives worth offering (policy.h, sched_what_if_run;
 * docs/scheduling.md, "What-if"). Every answer is sched_decide()'s and
 * sched_estimate()'s over the snapshot with the job added: no second policy.
 */
#include "policy.h"

#include <stdlib.h>
#include <string.h>

static void add(struct sched_what_if *v, int *n, enum sched_what_if_change c,
		const struct sched_pending_in *job)
{
	memset(&v[*n], 0, sizeof(v[*n]));
	v[*n].change = c;
	v[*n].job = *job;
	(*n)++;
}

int sched_what_if_variants(struct sched_what_if v[SCHED_WHAT_IF_MAX],
			   const struct sched_pending_in *asked)
{
	int n = 0, prev = asked->nodes;
	const int fewer[] = {asked->nodes / 2, asked->nodes / 4, 1};

	add(v, &n, SCHED_WI_AS_ASKED, asked);
	for (size_t k = 0; k < sizeof(fewer) / sizeof(fewer[0]); k++) {
		struct sched_pending_in j = *asked;

		if (fewer[k] < 1 || fewer[k] >= prev)
			continue;
		j.nodes = prev = fewer[k];
		/* the bound a budget checks shrinks with the gang */
		j.max_cost = asked->max_cost * j.nodes / asked->nodes;
		add(v, &n, SCHED_WI_NODES, &j);
	}
	if (asked->spot != SCHED_SPOT_ANY) {
		struct sched_pending_in j = *asked;

		j.spot = SCHED_SPOT_ANY;
		add(v, &n, SCHED_WI_SPOT, &j);
	}
	for (int t = (int)asked->required + 1; asked->required != SCHED_TOPO_NONE; t++) {
		struct sched_pending_in j = *asked;

		j.required = t < SCHED_TOPO_COUNT ? (enum sched_topo)t : SCHED_TOPO_NONE;
		add(v, &n, SCHED_WI_TOPOLOGY, &j);
		if (j.required == SCHED_TOPO_NONE)
			break;
	}
	return n;
}

/* One variant, its job the last of in->pending (the rest as given). */
static int run_one(struct sched_what_if *w, const struct sched_input *in,
		   const struct sched_feasible *f, const struct sched_estimate_in *e,
		   struct ty_err *err)
{
	int last = in->npending - 1, rc;
	struct sched_decisions *d = NULL;
	struct sched_estimates *est = NULL;

	if ((rc = sched_decide(&d, in, err)))
		return rc;
	memset(&w->est, 0, sizeof(w->est));
	w->reason[0] = '\0';
	w->cannot_run = false;
	if (d->pending[last].reason == SCHED_PLACED) {
		w->est.kind = SCHED_EST_NOW;
		w->est.start_ms = in->now_ms;
	} else if (f && sched_cannot_run(w->reason, sizeof(w->reason), f, in, last)) {
		w->cannot_run = true;
		w->est.kind = SCHED_EST_NEVER;
	} else {
		sched_reason_format(w->reason, sizeof(w->reason), in, d, last, NULL);
		if (!(rc = sched_estimate(&est, in, d, e, err)))
			w->est = est->job[last];
	}
	sched_estimates_free(est);
	sched_decisions_free(d);
	return rc;
}

int sched_what_if_run(struct sched_what_if *v, int n, const struct sched_input *in,
		      const struct sched_feasible *f, const struct sched_estimate_in *e,
		      struct ty_err *err)
{
	size_t np = (size_t)in->npending + 1;
	struct sched_pending_in *pend = malloc(np * sizeof(*pend));
	int64_t *rt = e && e->pend_runtime_s ? calloc(np, sizeof(*rt)) : NULL;
	bool *hist = e && e->pend_history ? calloc(np, sizeof(*hist)) : NULL;
	struct sched_estimate_in ex = e ? *e : (struct sched_estimate_in){0};
	struct sched_input x = *in;
	int rc = 0;

	if (!pend || (e && e->pend_runtime_s && !rt) || (e && e->pend_history && !hist)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (in->npending > 0)
		memcpy(pend, in->pending, (size_t)in->npending * sizeof(*pend));
	if (rt)
		memcpy(rt, e->pend_runtime_s, (size_t)in->npending * sizeof(*rt));
	if (hist)
		memcpy(hist, e->pend_history, (size_t)in->npending * sizeof(*hist));
	ex.pend_runtime_s = rt;
	ex.pend_history = hist;
	ex.cfg.until_last = true; /* the only answer read is the what-if job's */
	x.pending = pend;
	x.npending = (int)np;
	for (int k = 0; k < n && !rc; k++) {
		pend[np - 1] = v[k].job;
		pend[np - 1].job = SCHED_WHAT_IF_JOB;
		pend[np - 1].submit_ms = in->now_ms;
		rc = run_one(&v[k], &x, f, &ex, err);
	}
out:
	free(pend);
	free(rt);
	free(hist);
	return rc;
}

bool sched_what_if_sooner(const struct sched_what_if *w, const struct sched_what_if *asked)
{
	bool w_at = w->est.kind == SCHED_EST_NOW || w->est.kind == SCHED_EST_AT;
	bool x_at = asked->est.kind == SCHED_EST_NOW || asked->est.kind == SCHED_EST_AT;

	return w_at && (!x_at || w->est.start_ms < asked->est.start_ms);
}
