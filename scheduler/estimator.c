/*
 * The estimator's side thread: sched_decide() and sched_estimate() over a
 * copy of a cycle's snapshot, off the loop, so estimates never lengthen a
 * cycle (docs/scheduling.md, "Start-time estimates"), then the what-if
 * requests asked meanwhile over the same copy ("What-if"). The core is
 * pure: the copy decided again gives the cycle's own decision.
 */
#include "scheduler.h"
#include "core/policy.h"
#include "what_if.h"
#include "ty_arena.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct sched_estimator {
	pthread_t thread;
	atomic_bool done;
	struct ty_arena *arena; /* the copy */
	struct sched_input in;
	struct sched_estimate_in e;
	struct sched_estimates *out;
	struct ty_err err;
	int rc;
	/* what-if: the requests, the pools the cannot-run check counts, their outcome */
	struct sched_what_if_ask *asks;
	int nasks;
	struct sched_pool_in *pools;
	int npools;
	struct ty_err wi_err;
	int wi_rc;
	bool joined;
};

static void *copy(struct ty_arena *a, const void *src, size_t n)
{
	void *p = ty_arena_alloc(a, n + 1);

	if (p && n)
		memcpy(p, src, n);
	return p;
}

static const char *sdup(struct ty_arena *a, const char *s, bool *oom)
{
	char *d;

	if (!s)
		return NULL;
	if (!(d = ty_arena_strdup(a, s)))
		*oom = true;
	return d;
}

/* A deep copy of in into e's arena (names the core reads for messages only included). */
static int input_copy(struct sched_estimator *e, const struct sched_input *in)
{
	struct ty_arena *a = e->arena;
	struct sched_input *c = &e->in;
	struct sched_node_in *nodes;
	struct sched_team_in *teams;
	struct sched_cohort_in *coh;
	struct sched_running_in *run;
	struct sched_pending_in *pend;
	bool oom = false;

	*c = *in;
	nodes = copy(a, in->nodes, (size_t)in->nnodes * sizeof(*nodes));
	teams = copy(a, in->teams, (size_t)in->nteams * sizeof(*teams));
	coh = copy(a, in->cohorts, (size_t)in->ncohorts * sizeof(*coh));
	run = copy(a, in->running, (size_t)in->nrunning * sizeof(*run));
	pend = copy(a, in->pending, (size_t)in->npending * sizeof(*pend));
	if (!nodes || !teams || !coh || !run || !pend)
		return TY_ENOMEM;
	for (int i = 0; i < in->nnodes; i++) {
		struct sched_node_in *n = &nodes[i];

		n->id = sdup(a, n->id, &oom);
		n->zone = sdup(a, n->zone, &oom);
		n->rack = sdup(a, n->rack, &oom);
		n->block = sdup(a, n->block, &oom);
		if (n->nports && !(n->ports = copy(a, n->ports, (size_t)n->nports * sizeof(int))))
			oom = true;
	}
	for (int i = 0; i < in->nteams; i++) {
		teams[i].name = sdup(a, teams[i].name, &oom);
		teams[i].cohort = sdup(a, teams[i].cohort, &oom);
		teams[i].budget_period = sdup(a, teams[i].budget_period, &oom);
	}
	for (int i = 0; i < in->ncohorts; i++)
		coh[i].name = sdup(a, coh[i].name, &oom);
	for (int i = 0; i < in->nrunning; i++) {
		size_t k = (size_t)run[i].nnodes;

		if (!(run[i].node = copy(a, run[i].node, k * sizeof(int))) ||
		    !(run[i].gpus = copy(a, run[i].gpus, k * sizeof(uint64_t))))
			oom = true;
	}
	for (int i = 0; i < in->npending; i++) {
		struct sched_pending_in *p = &pend[i];

		p->last_failure = sdup(a, p->last_failure, &oom);
		if (p->nexclude &&
		    !(p->exclude = copy(a, p->exclude, (size_t)p->nexclude * sizeof(int))))
			oom = true;
		if (p->nheld &&
		    !(p->held_nodes = copy(a, p->held_nodes, (size_t)p->nheld * sizeof(int))))
			oom = true;
	}
	c->nodes = nodes;
	c->teams = teams;
	c->cohorts = coh;
	c->running = run;
	c->pending = pend;
	return oom ? TY_ENOMEM : 0;
}

static int what_ifs(struct sched_estimator *e)
{
	struct sched_feasible *f = NULL;
	int rc = sched_feasible_new(&f, &e->in, e->pools, e->npools, &e->wi_err);

	for (int k = 0; !rc && k < e->nasks; k++)
		rc = sched_what_if_run(e->asks[k].v, e->asks[k].n, &e->in, f, &e->e, &e->wi_err);
	sched_feasible_free(f);
	return rc;
}

static void *run(void *arg)
{
	struct sched_estimator *e = arg;
	struct sched_decisions *d = NULL;

	e->rc = sched_decide(&d, &e->in, &e->err);
	if (!e->rc)
		e->rc = sched_estimate(&e->out, &e->in, d, &e->e, &e->err);
	sched_decisions_free(d);
	if (e->nasks > 0)
		e->wi_rc = what_ifs(e);
	atomic_store(&e->done, true);
	return NULL;
}

/* asks and pools into e's arena */
static int what_if_copy(struct sched_estimator *e, const struct sched_what_if_ask *asks,
			int nasks, const struct sched_pool_in *pools, int npools)
{
	bool oom = false;

	if (nasks > 0 && !(e->asks = copy(e->arena, asks, (size_t)nasks * sizeof(*asks))))
		return TY_ENOMEM;
	if (npools > 0 && !(e->pools = copy(e->arena, pools, (size_t)npools * sizeof(*pools))))
		return TY_ENOMEM;
	for (int i = 0; i < npools; i++)
		e->pools[i].name = sdup(e->arena, pools[i].name, &oom);
	e->nasks = nasks;
	e->npools = npools;
	return oom ? TY_ENOMEM : 0;
}

int sched_estimator_start(struct sched_estimator **out, const struct sched_input *in,
			  const struct sched_estimate_in *x, const struct sched_what_if_ask *asks,
			  int nasks, const struct sched_pool_in *pools, int npools,
			  struct ty_err *err)
{
	struct sched_estimator *e = NULL;
	struct ty_arena *a = NULL;
	int rc;

	*out = NULL;
	if (!(e = calloc(1, sizeof(*e))) || !(a = e->arena = ty_arena_new()))
		goto oom;
	if ((rc = input_copy(e, in)) || (rc = what_if_copy(e, asks, nasks, pools, npools))) {
		ty_arena_free(a);
		free(e);
		return ty_err_set(err, rc, NULL);
	}
	e->e = *x;
	if ((x->run_end_ms &&
	     !(e->e.run_end_ms = copy(a, x->run_end_ms, (size_t)in->nrunning * sizeof(int64_t)))) ||
	    (x->run_history &&
	     !(e->e.run_history = copy(a, x->run_history, (size_t)in->nrunning * sizeof(bool)))) ||
	    (x->pend_runtime_s &&
	     !(e->e.pend_runtime_s =
		   copy(a, x->pend_runtime_s, (size_t)in->npending * sizeof(int64_t)))) ||
	    (x->pend_history &&
	     !(e->e.pend_history = copy(a, x->pend_history, (size_t)in->npending * sizeof(bool)))))
		goto oom;
	atomic_init(&e->done, false);
	if (pthread_create(&e->thread, NULL, run, e)) {
		ty_arena_free(a);
		free(e);
		return ty_err_set(err, TY_EIO, "estimate: cannot start its thread");
	}
	*out = e;
	return 0;
oom:
	if (e)
		ty_arena_free(e->arena);
	free(e);
	return ty_err_set(err, TY_ENOMEM, NULL);
}

bool sched_estimator_done(const struct sched_estimator *e)
{
	return e && atomic_load(&e->done);
}

int sched_estimator_result(const struct sched_estimates **out, const struct sched_input **in,
			   struct sched_estimator *e, struct ty_err *err)
{
	*out = NULL;
	*in = NULL;
	if (!e->joined)
		pthread_join(e->thread, NULL);
	e->joined = true;
	if (e->rc)
		return ty_err_set(err, e->rc, "%s", e->err.msg);
	*out = e->out;
	*in = &e->in;
	return 0;
}

int sched_estimator_what_ifs(const struct sched_what_if_ask **asks, int *nasks,
			     struct sched_estimator *e, struct ty_err *err)
{
	*asks = e->asks;
	*nasks = e->nasks;
	if (e->wi_rc)
		return ty_err_set(err, e->wi_rc, "%s", e->wi_err.msg);
	return 0;
}

void sched_estimator_free(struct sched_estimator *e)
{
	if (!e)
		return;
	if (!e->joined)
		pthread_join(e->thread, NULL); /* at most one estimate's time */
	sched_estimates_free(e->out);
	ty_arena_free(e->arena);
	free(e);
}

void sched_rfc3339(char *buf, size_t n, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(buf, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

json_t *sched_estimate_basis(const struct sched_estimate *e)
{
	json_t *b = NULL, *w = NULL;
	char ts[SCHED_RFC3339_LEN];

	switch (e->kind) {
	case SCHED_EST_AT:
		if (!(w = json_array()))
			return NULL;
		for (int k = 0; k < e->nwaits; k++)
			if (json_array_append_new(w, json_integer(e->waits_for[k]))) {
				json_decref(w);
				return NULL;
			}
		b = json_pack("{s:s, s:o, s:i, s:s}", "kind", "estimated", "waits_for", w,
			      "waits_for_count", e->nwaits_total, "runtime_source",
			      e->history ? "history" : "max_runtime");
		break;
	case SCHED_EST_NOW:
		b = json_pack("{s:s}", "kind", "now");
		break;
	case SCHED_EST_NEVER:
		b = json_pack("{s:s}", "kind", "never");
		break;
	case SCHED_EST_HORIZON:
		sched_rfc3339(ts, sizeof(ts), e->start_ms);
		b = json_pack("{s:s, s:s}", "kind", "beyond_horizon", "horizon", ts);
		break;
	default:
		b = json_pack("{s:s}", "kind", "not_estimated");
		break;
	}
	return b;
}
