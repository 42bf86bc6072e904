/*
 * Builders for policy-core scenarios: nodes, teams, running gangs and
 * pending jobs by name, a decision, and readable views of it ("a,b",
 * "12,13", the reason text of a job). Header-only (static inline) so each
 * test program includes what it uses.
 */
#ifndef TY_POLICY_FIXTURE_H
#define TY_POLICY_FIXTURE_H

#include "core/policy.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FX_MAXN 64
#define FX_MAXT 8
#define FX_MAXR 128
#define FX_MAXP 128
#define FX_MAXRN 8

#define NOW_MS 1000000000000LL /* an arbitrary "now" */
#define S(x) ((int64_t)(x)*1000)

struct fx {
	struct sched_node_in nodes[FX_MAXN];
	struct sched_team_in teams[FX_MAXT];
	struct sched_running_in run[FX_MAXR];
	int run_node[FX_MAXR][FX_MAXRN];
	uint64_t run_gpus[FX_MAXR][FX_MAXRN];
	struct sched_pending_in pend[FX_MAXP];
	struct sched_input in;
	struct sched_decisions *d;
	char buf[512];
};

static inline void fx_init(struct fx *f)
{
	memset(f, 0, sizeof(*f));
	sched_config_default(&f->in.cfg);
	f->in.now_ms = NOW_MS;
	f->in.nodes = f->nodes;
	f->in.teams = f->teams;
	f->in.running = f->run;
	f->in.pending = f->pend;
}

static inline void fx_done(struct fx *f)
{
	sched_decisions_free(f->d);
	f->d = NULL;
}

/* A schedulable node; labels may be NULL. Returns its index. */
static inline int fx_node(struct fx *f, const char *id, int gpus, const char *zone,
			  const char *rack, const char *block)
{
	struct sched_node_in *n = &f->nodes[f->in.nnodes];

	n->id = id;
	n->gpus = gpus;
	n->schedulable = true;
	n->zone = zone;
	n->rack = rack;
	n->block = block;
	return f->in.nnodes++;
}

static inline int fx_find_node(const struct fx *f, const char *id)
{
	for (int i = 0; i < f->in.nnodes; i++)
		if (!strcmp(f->nodes[i].id, id))
			return i;
	return -1;
}

/* A team; cohort may be NULL; limits -1 = none. */
static inline int fx_team(struct fx *f, const char *name, int64_t nominal, int64_t borrow,
			  int64_t lend, const char *cohort)
{
	struct sched_team_in *t = &f->teams[f->in.nteams];

	t->name = name;
	t->nominal_gpus = nominal;
	t->borrowing_limit = borrow;
	t->lending_limit = lend;
	t->cohort = cohort;
	t->weight = 1;
	return f->in.nteams++;
}

/*
 * A running gang holding "a:0-3|b:0-7" (GPU ranges per node), started
 * `age_s` ago, ending at the latest `left_s` from now. Preemptible, class
 * normal, priority 0, no checkpoint: adjust the returned struct.
 */
static inline struct sched_running_in *fx_run(struct fx *f, int64_t job, int team, const char *hold,
					      int64_t age_s, int64_t left_s)
{
	int r = f->in.nrunning++;
	struct sched_running_in *ru = &f->run[r];
	char tmp[256], *save = NULL;

	ru->job = job;
	ru->team = team;
	ru->cls = SCHED_CLASS_NORMAL;
	ru->start_ms = NOW_MS - S(age_s);
	ru->end_by_ms = NOW_MS + S(left_s);
	ru->preemptible = true;
	ru->node = f->run_node[r];
	ru->gpus = f->run_gpus[r];
	snprintf(tmp, sizeof(tmp), "%s", hold);
	for (char *part = strtok_r(tmp, "|", &save); part; part = strtok_r(NULL, "|", &save)) {
		char *colon = strchr(part, ':');
		int lo, hi;

		REQUIRE(colon != NULL);
		*colon = '\0';
		f->run_node[r][ru->nnodes] = fx_find_node(f, part);
		REQUIRE(f->run_node[r][ru->nnodes] >= 0);
		if (sscanf(colon + 1, "%d-%d", &lo, &hi) != 2)
			hi = lo = atoi(colon + 1);
		for (int g = lo; g <= hi; g++)
			f->run_gpus[r][ru->nnodes] |= 1ull << g;
		ru->nnodes++;
	}
	return ru;
}

/* A pending job of class normal, priority 0, max runtime 1 h, submitted at `submit_s`. */
static inline struct sched_pending_in *fx_pend(struct fx *f, int64_t job, int team, int nodes,
					       int gpn, int64_t submit_s)
{
	struct sched_pending_in *p = &f->pend[f->in.npending++];

	p->job = job;
	p->team = team;
	p->cls = SCHED_CLASS_NORMAL;
	p->submit_ms = S(submit_s);
	p->nodes = nodes;
	p->gpus_per_node = gpn;
	p->max_runtime_s = 3600;
	return p;
}

static inline void fx_decide(struct fx *f)
{
	struct ty_err err = {0};

	fx_done(f);
	REQUIRE_INT_EQ(sched_decide(&f->d, &f->in, &err), 0);
	REQUIRE(f->d != NULL);
}

static inline int fx_pidx(const struct fx *f, int64_t job)
{
	for (int i = 0; i < f->in.npending; i++)
		if (f->pend[i].job == job)
			return i;
	return -1;
}

/* "a,b" (node ids in node-rank order) of job's placement, or NULL when not placed. */
static inline const char *fx_placed(struct fx *f, int64_t job)
{
	for (int k = 0; k < f->d->nplacements; k++) {
		const struct sched_placement *p = &f->d->placements[k];
		size_t l = 0;

		if (p->job != job)
			continue;
		f->buf[0] = '\0';
		for (int r = 0; r < p->nnodes; r++)
			l += (size_t)snprintf(f->buf + l, sizeof(f->buf) - l, "%s%s", r ? "," : "",
					      f->nodes[p->node[r]].id);
		return ty_test_strf("%s", f->buf);
	}
	return NULL;
}

/* GPUs of job's placement "0,1|2,3" or NULL. */
static inline const char *fx_gpus(struct fx *f, int64_t job)
{
	for (int k = 0; k < f->d->nplacements; k++) {
		const struct sched_placement *p = &f->d->placements[k];
		size_t l = 0;

		if (p->job != job)
			continue;
		f->buf[0] = '\0';
		for (int r = 0; r < p->nnodes; r++)
			for (int g = 0; g < p->gpus_per_node; g++)
				l += (size_t)snprintf(f->buf + l, sizeof(f->buf) - l, "%s%d",
						      g	  ? ","
						      : r ? "|"
							  : "",
						      p->gpus[r * p->gpus_per_node + g]);
		return ty_test_strf("%s", f->buf);
	}
	return NULL;
}

/* New victims "12,13" in decision order ("" = none). */
static inline const char *fx_victims(struct fx *f)
{
	size_t l = 0;

	f->buf[0] = '\0';
	for (int k = 0; k < f->d->npreemptions; k++)
		l += (size_t)snprintf(f->buf + l, sizeof(f->buf) - l, "%s%lld", k ? "," : "",
				      (long long)f->d->preemptions[k].victim);
	return ty_test_strf("%s", f->buf);
}

/* The pending reason of job (with `when` for times, NULL = relative). */
static inline const char *fx_reason_when(struct fx *f, int64_t job, const char *when)
{
	int i = fx_pidx(f, job);

	REQUIRE(i >= 0);
	sched_reason_format(f->buf, sizeof(f->buf), &f->in, f->d, i, when);
	return ty_test_strf("%s", f->buf);
}

/* The same with `pwhen` for the protection time (sched_reason_format_at). */
static inline const char *fx_reason_at(struct fx *f, int64_t job, const char *when,
				       const char *pwhen)
{
	int i = fx_pidx(f, job);

	REQUIRE(i >= 0);
	sched_reason_format_at(f->buf, sizeof(f->buf), &f->in, f->d, i, when, pwhen);
	return ty_test_strf("%s", f->buf);
}

static inline const char *fx_reason(struct fx *f, int64_t job)
{
	return fx_reason_when(f, job, NULL);
}

/* Node ids of job's reservation of the given kind, "a,b", or NULL. */
static inline const char *fx_resv(struct fx *f, int64_t job, enum sched_resv_kind kind,
				  int64_t *at_ms)
{
	for (int k = 0; k < f->d->nreservations; k++) {
		const struct sched_reservation *r = &f->d->reservations[k];
		size_t l = 0;

		if (r->job != job || r->kind != kind)
			continue;
		f->buf[0] = '\0';
		for (int x = 0; x < r->nnodes; x++)
			l += (size_t)snprintf(f->buf + l, sizeof(f->buf) - l, "%s%s", x ? "," : "",
					      f->nodes[r->node[x]].id);
		if (at_ms)
			*at_ms = r->start_ms;
		return ty_test_strf("%s", f->buf);
	}
	return NULL;
}

#endif
