/*
 * The estimator's side thread: sched_decide() and sched_estimate() over a
 * copy of a cycle's snapshot, off the loop, so estimates never lengthen a
 * cycle (docs/scheduling.md, "Start-time estimates"). The core is pure:
 * the copy decided again gives the cycle's own decision.
 */
#include "scheduler.h"
#include "core/policy.h"
#include "ty_arena.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct sched_estimator {
	pthread_t thread;
	atomic_bool done;
	struct ty_arena *arena; /* the copy */
	struct sched_input in;
	struct sched_estimate_in e;
	struct sched_estimates *out;
	struct ty_err err;
	int rc;
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

static void *run(void *arg)
{
	struct sched_estimator *e = arg;
	struct sched_decisions *d = NULL;

	e->rc = sched_decide(&d, &e->in, &e->err);
	if (!e->rc)
		e->rc = sched_estimate(&e->out, &e->in, d, &e->e, &e->err);
	sched_decisions_free(d);
	atomic_store(&e->done, true);
	return NULL;
}

int sched_estimator_start(struct sched_estimator **out, const struct sched_input *in,
			  const struct sched_estimate_in *x, struct ty_err *err)
{
	struct sched_estimator *e = NULL;
	struct ty_arena *a = NULL;
	int rc;

	*out = NULL;
	if (!(e = calloc(1, sizeof(*e))) || !(a = e->arena = ty_arena_new()))
		goto oom;
	if ((rc = input_copy(e, in))) {
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
