/*
 * Properties of the policy core over thousands of seeded random snapshots.
 * A failure names its seed; rerun one with TY_SEED=<seed>, more with
 * TY_SEEDS=<count> (default 3000 single-cycle worlds, 1000 simulations).
 */
#include "core/policy.h"
#include "rng.h"
#include "ty_test.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 16
#define MAXT 5
#define MAXR 96
#define MAXP 40
#define MAXRN 3
#define NOW0 1000000000000LL

struct wrun {
	int64_t job;
	int team, cls, prio;
	int64_t start, ckpt, minrt, end_by;
	bool preemptible, preempting;
	int nn;
	int node[MAXRN];
	uint64_t gpus[MAXRN];
	int port; /* on node[0], 0 = none */
};

struct wpend {
	int64_t job;
	int team, cls, prio;
	int64_t submit, minrt, maxrt;
	int nodes, gpn, req;
	bool per_node, preemptible;
	int excl; /* -1 = none */
	/* the nodes the last decision held for it (held_nodes), as the daemon passes them */
	int held[MAXN];
	int nheld;
};

struct world {
	int64_t now;
	struct sched_config cfg;
	int nn, nt, nr, np;
	struct sched_node_in nodes[MAXN];
	char ids[MAXN][16];
	uint64_t extra[MAXN]; /* held by something that never ends */
	struct sched_team_in teams[MAXT];
	struct wrun run[MAXR];
	struct wpend pend[MAXP];
	int64_t next_job;
	/* the input as the core sees it */
	struct sched_running_in in_run[MAXR];
	struct sched_pending_in in_pend[MAXP];
	int ports[MAXN][MAXR];
	struct sched_input in;
};

static const char *const zones[] = {"z1", "z2", NULL};
static const char *const racks[] = {"r1", "r2", "r3", NULL};
static const char *const blocks[] = {"b1", "b2", "b3", NULL};
static const char *const cohorts[] = {NULL, "c1", "c2"};

static uint64_t full_mask(int g)
{
	return g >= 64 ? ~0ull : (1ull << g) - 1;
}

static uint64_t busy_of(const struct world *w, int n)
{
	uint64_t b = w->extra[n];

	for (int r = 0; r < w->nr; r++)
		for (int k = 0; k < w->run[r].nn; k++)
			if (w->run[r].node[k] == n)
				b |= w->run[r].gpus[k];
	return b & full_mask(w->nodes[n].gpus);
}

static void gen_world(struct world *w, uint64_t seed)
{
	struct rng r = {seed};

	memset(w, 0, sizeof(*w));
	w->now = NOW0;
	sched_config_default(&w->cfg);
	w->cfg.backfill = !chance(&r, 10);
	for (int c = 0; c < SCHED_CLASS_COUNT; c++)
		w->cfg.class_min_runtime_s[c] = chance(&r, 30) ? rin(&r, 0, 1800) : 0;
	if (chance(&r, 30))
		w->cfg.reclaim_delay_s = rin(&r, 0, 1800);
	w->nn = (int)rin(&r, 2, MAXN);
	for (int n = 0; n < w->nn; n++) {
		static const int sizes[] = {8, 8, 8, 4, 2};
		struct sched_node_in *nd = &w->nodes[n];

		snprintf(w->ids[n], sizeof(w->ids[n]), "n%d", n);
		nd->id = w->ids[n];
		nd->gpus = sizes[rin(&r, 0, 4)];
		nd->zone = zones[chance(&r, 10) ? 2 : rin(&r, 0, 1)];
		nd->rack = racks[chance(&r, 10) ? 3 : rin(&r, 0, 2)];
		nd->block = blocks[chance(&r, 10) ? 3 : rin(&r, 0, 2)];
		nd->schedulable = true;
	}
	w->nt = (int)rin(&r, 1, MAXT);
	for (int t = 0; t < w->nt; t++) {
		struct sched_team_in *tm = &w->teams[t];
		static const char *const names[] = {"t0", "t1", "t2", "t3", "t4"};

		tm->name = names[t];
		tm->nominal_gpus = rin(&r, 0, 32);
		tm->borrowing_limit = chance(&r, 40) ? -1 : rin(&r, 0, 16);
		tm->lending_limit = chance(&r, 50) ? -1 : rin(&r, 0, 16);
		tm->cohort = cohorts[rin(&r, 0, 2)];
		tm->weight = (double)rin(&r, 1, 3);
		tm->usage = (double)rin(&r, 0, 1000);
	}
	w->next_job = 1;
	for (int tries = (int)rin(&r, 0, 3 * w->nn); tries > 0 && w->nr < MAXR; tries--) {
		struct wrun *ru = &w->run[w->nr];
		int nn = (int)rin(&r, 1, 2), g = (int)rin(&r, 1, 8),
		    off = (int)rin(&r, 0, w->nn - 1);

		memset(ru, 0, sizeof(*ru));
		for (int x = 0; x < w->nn && ru->nn < nn; x++) {
			int n = (off + x) % w->nn;
			uint64_t freem = full_mask(w->nodes[n].gpus) & ~busy_of(w, n), m = 0;

			if (__builtin_popcountll(freem) < g)
				continue;
			for (int k = 0; k < g; k++) {
				m |= freem & -freem;
				freem &= freem - 1;
			}
			ru->node[ru->nn] = n;
			ru->gpus[ru->nn++] = m;
		}
		if (ru->nn < nn)
			continue;
		ru->job = w->next_job++;
		ru->team = (int)rin(&r, 0, w->nt - 1);
		ru->cls = (int)rin(&r, 0, 3);
		ru->prio = (int)rin(&r, -2, 2);
		ru->start = w->now - rin(&r, 0, 7200) * 1000;
		ru->ckpt =
		    chance(&r, 50) ? ru->start + rin(&r, 0, (w->now - ru->start) / 1000) * 1000 : 0;
		ru->minrt = chance(&r, 30) ? rin(&r, 0, 3600) : 0;
		ru->end_by = w->now + rin(&r, 1, 14400) * 1000;
		ru->preemptible = chance(&r, 85);
		ru->preempting = chance(&r, 5);
		ru->port = 29500 + (int)rin(&r, 0, 3);
		w->nr++;
	}
	for (int n = 0; n < w->nn; n++) {
		uint64_t freem = full_mask(w->nodes[n].gpus) & ~busy_of(w, n);

		if (freem && chance(&r, 10))
			w->extra[n] = freem & -freem;
		if (chance(&r, 8))
			w->nodes[n].schedulable = false;
	}
	w->np = (int)rin(&r, 0, 25);
	for (int i = 0; i < w->np; i++) {
		struct wpend *p = &w->pend[i];

		p->job = 1000 + i;
		p->team = (int)rin(&r, 0, w->nt - 1);
		p->cls = (int)rin(&r, 0, 3);
		p->prio = (int)rin(&r, -2, 2);
		p->submit = rin(&r, 0, 1000) * 1000;
		p->nodes = (int)(chance(&r, 60) ? 1 : rin(&r, 2, 3));
		p->gpn = (int)(chance(&r, 10) ? 0 : rin(&r, 1, 8));
		p->req = chance(&r, 25) ? (int)rin(&r, 1, 3) : 0;
		p->minrt = chance(&r, 30) ? rin(&r, 0, 3600) : 0;
		p->maxrt = rin(&r, 60, 14400);
		p->per_node = chance(&r, 20);
		p->preemptible = chance(&r, 85);
		p->excl = chance(&r, 5) ? (int)rin(&r, 0, w->nn - 1) : -1;
	}
}

/* Point the core's input at the world. */
static void world_input(struct world *w)
{
	int nports[MAXN] = {0};

	memset(&w->in, 0, sizeof(w->in));
	w->in.now_ms = w->now;
	w->in.cfg = w->cfg;
	for (int r = 0; r < w->nr; r++) {
		const struct wrun *ru = &w->run[r];
		struct sched_running_in *x = &w->in_run[r];

		*x = (struct sched_running_in){0};
		x->job = ru->job;
		x->team = ru->team;
		x->cls = ru->cls;
		x->priority = ru->prio;
		x->start_ms = ru->start;
		x->checkpoint_ms = ru->ckpt;
		x->min_runtime_s = ru->minrt;
		x->end_by_ms = ru->end_by;
		x->preemptible = ru->preemptible;
		x->preempting = ru->preempting;
		x->nnodes = ru->nn;
		x->node = ru->node;
		x->gpus = ru->gpus;
		if (ru->port && ru->nn)
			w->ports[ru->node[0]][nports[ru->node[0]]++] = ru->port;
	}
	for (int n = 0; n < w->nn; n++) {
		w->nodes[n].busy = w->extra[n];
		w->nodes[n].ports = w->ports[n];
		w->nodes[n].nports = nports[n];
	}
	for (int i = 0; i < w->np; i++) {
		const struct wpend *p = &w->pend[i];
		struct sched_pending_in *x = &w->in_pend[i];

		*x = (struct sched_pending_in){0};
		x->job = p->job;
		x->team = p->team;
		x->cls = p->cls;
		x->priority = p->prio;
		x->submit_ms = p->submit;
		x->nodes = p->nodes;
		x->gpus_per_node = p->gpn;
		x->per_node = p->per_node;
		x->required = p->req;
		x->min_runtime_s = p->minrt;
		x->max_runtime_s = p->maxrt;
		if (p->excl >= 0) {
			x->exclude = &p->excl;
			x->nexclude = 1;
		}
		if (p->nheld) {
			x->held_nodes = p->held;
			x->nheld = p->nheld;
		}
	}
	w->in.nodes = w->nodes;
	w->in.nnodes = w->nn;
	w->in.teams = w->teams;
	w->in.nteams = w->nt;
	w->in.running = w->in_run;
	w->in.nrunning = w->nr;
	w->in.pending = w->in_pend;
	w->in.npending = w->np;
}

static struct sched_decisions *decide(struct world *w)
{
	struct sched_decisions *d = NULL;
	struct ty_err err = {0};

	world_input(w);
	REQUIRE_INT_EQ(sched_decide(&d, &w->in, &err), 0);
	return d;
}

static char *serialize(const struct sched_decisions *d)
{
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);

	for (int k = 0; k < d->nplacements; k++) {
		const struct sched_placement *p = &d->placements[k];

		fprintf(m, "P%lld:%d:%d:%d", (long long)p->job, p->master_port, p->local_ranks,
			p->world_size);
		for (int r = 0; r < p->nnodes; r++)
			fprintf(m, ",%d", p->node[r]);
		for (int g = 0; g < p->nnodes * p->gpus_per_node; g++)
			fprintf(m, ".%d", p->gpus[g]);
	}
	for (int k = 0; k < d->npreemptions; k++)
		fprintf(m, "X%lld>%lld:%d", (long long)d->preemptions[k].victim,
			(long long)d->preemptions[k].for_job, d->preemptions[k].why);
	for (int k = 0; k < d->nreservations; k++) {
		fprintf(m, "R%lld:%d@%lld", (long long)d->reservations[k].job,
			d->reservations[k].kind, (long long)d->reservations[k].start_ms);
		for (int x = 0; x < d->reservations[k].nnodes; x++)
			fprintf(m, ",%d", d->reservations[k].node[x]);
	}
	for (int k = 0; k < d->npending; k++)
		fprintf(m, "Q%d:%d:%d:%d:%lld:%lld:%lld:%lld:%a", d->pending[k].position,
			d->pending[k].reason, d->pending[k].level, d->pending[k].count,
			(long long)d->pending[k].other_job, (long long)d->pending[k].at_ms,
			(long long)d->pending[k].used, (long long)d->pending[k].limit,
			d->pending[k].fairshare);
	for (int t = 0; t < d->nteams; t++)
		fprintf(m, "T%lld:%lld:%lld:%lld", (long long)d->teams[t].used,
			(long long)d->teams[t].borrowed, (long long)d->teams[t].lent,
			(long long)d->teams[t].admissible);
	fprintf(m, "H%d", d->head);
	fclose(m);
	return out;
}

/* ---- checks ---------------------------------------------------------------------------------- */

static const char *label(const struct sched_node_in *n, int level)
{
	const char *l = level == SCHED_TOPO_BLOCK  ? n->block
			: level == SCHED_TOPO_RACK ? n->rack
						   : n->zone;

	return l && l[0] ? l : NULL;
}

/* Whether nodes a and b are in one domain of `level` (both labelled along the path). */
static bool same_domain(const struct world *w, int a, int b, int level)
{
	for (int l = level; l <= SCHED_TOPO_ZONE; l++) {
		const char *x = label(&w->nodes[a], l), *y = label(&w->nodes[b], l);

		if (l == level && (!x || !y))
			return false;
		if ((x == NULL) != (y == NULL) || (x && strcmp(x, y)))
			return false;
	}
	return true;
}

/* Whether a job of N × G with topology req fits on free counts f (-1 = unusable). */
static bool fits_on(const struct world *w, const int *f, int N, int G, int req)
{
	if (N == 1 || !req) {
		int cnt = 0;

		for (int n = 0; n < w->nn; n++)
			cnt += f[n] >= G;
		return cnt >= N;
	}
	for (int a = 0; a < w->nn; a++) {
		int cnt = 0;

		if (f[a] < G || !label(&w->nodes[a], req))
			continue;
		for (int b = 0; b < w->nn; b++)
			cnt += f[b] >= G && same_domain(w, a, b, req);
		if (cnt >= N)
			return true;
	}
	return false;
}

static int64_t rgpus(const struct wrun *ru)
{
	int64_t g = 0;

	for (int k = 0; k < ru->nn; k++)
		g += __builtin_popcountll(ru->gpus[k]);
	return g;
}

/* Against reclaim the cohort's reclaim delay ends the protection early. */
static bool is_protected(const struct world *w, const struct wrun *ru, bool reclaim)
{
	int64_t m = ru->minrt > w->cfg.class_min_runtime_s[ru->cls]
			? ru->minrt
			: w->cfg.class_min_runtime_s[ru->cls];

	if (reclaim && w->cfg.reclaim_delay_s < m)
		m = w->cfg.reclaim_delay_s;

	return w->now - ru->start < m * 1000;
}

static bool in_cohort(const struct sched_team_in *t)
{
	return t->cohort && t->cohort[0];
}

static bool same_cohort(const struct sched_team_in *a, const struct sched_team_in *b)
{
	return in_cohort(a) && in_cohort(b) && !strcmp(a->cohort, b->cohort);
}

/* Every invariant of one decision over world w. */
static void check_decision(struct world *w, const struct sched_decisions *d)
{
	uint64_t busy[MAXN];
	int64_t used[MAXT] = {0};
	bool victim[MAXR] = {0};
	int placed_of[MAXP], held_of[MAXP];

	for (int n = 0; n < w->nn; n++)
		busy[n] = busy_of(w, n);
	for (int r = 0; r < w->nr; r++)
		used[w->run[r].team] += rgpus(&w->run[r]);
	for (int i = 0; i < w->np; i++)
		placed_of[i] = held_of[i] = -1;

	/* placements: whole gangs on distinct schedulable nodes, free GPUs, free ports */
	for (int k = 0; k < d->nplacements; k++) {
		const struct sched_placement *p = &d->placements[k];
		int i = d->placement_pending[k];
		const struct wpend *pj;

		REQUIRE(i >= 0 && i < w->np);
		pj = &w->pend[i];
		CHECK_INT_EQ(p->job, pj->job);
		CHECK(placed_of[i] < 0);
		placed_of[i] = k;
		CHECK_INT_EQ(d->pending[i].reason, SCHED_PLACED);
		REQUIRE_INT_EQ(p->nnodes, pj->nodes);
		REQUIRE_INT_EQ(p->gpus_per_node, pj->gpn);
		CHECK_INT_EQ(p->local_ranks, pj->per_node ? 1 : (pj->gpn > 1 ? pj->gpn : 1));
		CHECK_INT_EQ(p->world_size, p->nnodes * p->local_ranks);
		CHECK(p->master_port >= w->cfg.port_lo && p->master_port <= w->cfg.port_hi);
		for (int x = 0; x < w->nr; x++)
			if (w->run[x].nn && w->run[x].node[0] == p->node[0])
				CHECK(w->run[x].port != p->master_port);
		for (int k2 = 0; k2 < k; k2++)
			if (d->placements[k2].node[0] == p->node[0])
				CHECK(d->placements[k2].master_port != p->master_port);
		for (int r = 0; r < p->nnodes; r++) {
			int n = p->node[r];

			REQUIRE(n >= 0 && n < w->nn);
			CHECK(w->nodes[n].schedulable);
			CHECK(n != pj->excl);
			for (int r2 = 0; r2 < r; r2++)
				CHECK(p->node[r2] != n);
			if (pj->req && pj->nodes > 1)
				CHECK(same_domain(w, p->node[0], n, pj->req));
			for (int g = 0; g < p->gpus_per_node; g++) {
				int gpu = p->gpus[r * p->gpus_per_node + g];

				REQUIRE(gpu >= 0 && gpu < w->nodes[n].gpus);
				if (busy[n] & (1ull << gpu))
					FAIL("job %lld: GPU %d of node %d already held",
					     (long long)p->job, gpu, n);
				busy[n] |= 1ull << gpu;
			}
		}
	}
	for (int i = 0; i < w->np; i++)
		if (d->pending[i].reason == SCHED_PLACED)
			CHECK(placed_of[i] >= 0);

	/* preemptions: whole unprotected preemptible gangs, each once, for a job that waits */
	for (int k = 0; k < d->npreemptions; k++) {
		const struct sched_preemption *e = &d->preemptions[k];
		const struct wrun *ru;
		const struct wpend *pj;

		REQUIRE(e->running >= 0 && e->running < w->nr);
		REQUIRE(e->pending >= 0 && e->pending < w->np);
		ru = &w->run[e->running];
		pj = &w->pend[e->pending];
		CHECK_INT_EQ(e->victim, ru->job);
		CHECK_INT_EQ(e->for_job, pj->job);
		CHECK(!victim[e->running]);
		victim[e->running] = true;
		CHECK(ru->preemptible);
		CHECK(!ru->preempting);
		if (is_protected(w, ru, e->why == SCHED_PREEMPT_RECLAIM))
			FAIL("protected job %lld preempted", (long long)ru->job);
		CHECK_INT_EQ(d->pending[e->pending].reason, SCHED_WAIT_PREEMPTION);
		if (e->why == SCHED_PREEMPT_CLASS) {
			CHECK_INT_EQ(ru->team, pj->team);
			CHECK(ru->cls > pj->cls);
		} else {
			CHECK_INT_EQ(e->why, SCHED_PREEMPT_RECLAIM);
			CHECK(ru->team != pj->team);
		}
	}
	/* holds: the nodes the job waits for would fit it once its victims are gone */
	for (int k = 0; k < d->nreservations; k++) {
		const struct sched_reservation *rv = &d->reservations[k];
		const struct wpend *pj;

		REQUIRE(rv->pending >= 0 && rv->pending < w->np);
		pj = &w->pend[rv->pending];
		REQUIRE_INT_EQ(rv->nnodes, pj->nodes);
		CHECK_INT_EQ(rv->gpus_per_node, pj->gpn);
		for (int x = 0; x < rv->nnodes; x++) {
			for (int y = 0; y < x; y++)
				CHECK(rv->node[y] != rv->node[x]);
			if (pj->req && pj->nodes > 1)
				CHECK(same_domain(w, rv->node[0], rv->node[x], pj->req));
			CHECK(w->nodes[rv->node[x]].schedulable);
		}
		if (rv->kind != SCHED_RESV_PREEMPTION)
			continue;
		CHECK(held_of[rv->pending] < 0);
		held_of[rv->pending] = k;
		for (int x = 0; x < rv->nnodes; x++) {
			int n = rv->node[x];
			int fr = __builtin_popcountll(full_mask(w->nodes[n].gpus) & ~busy_of(w, n));

			for (int r = 0; r < w->nr; r++) {
				bool mine = w->run[r].preempting;

				for (int e = 0; e < d->npreemptions; e++)
					mine |= d->preemptions[e].running == r &&
						d->preemptions[e].pending == rv->pending;
				for (int q = 0; mine && q < w->run[r].nn; q++)
					if (w->run[r].node[q] == n)
						fr += __builtin_popcountll(w->run[r].gpus[q]);
			}
			if (fr < pj->gpn)
				FAIL("job %lld holds node %d that its victims do not free",
				     (long long)pj->job, n);
		}
	}
	for (int i = 0; i < w->np; i++)
		if (d->pending[i].reason == SCHED_WAIT_PREEMPTION)
			CHECK(held_of[i] >= 0);

	/*
	 * Reclaim victims come from teams that still borrow when they are
	 * chosen: in decision order, counting this decision's placements and
	 * holds, not counting gangs already stopping or chosen.
	 */
	{
		int64_t left[MAXT];

		memcpy(left, used, sizeof(left));
		for (int r = 0; r < w->nr; r++)
			if (w->run[r].preempting)
				left[w->run[r].team] -= rgpus(&w->run[r]);
		for (int k = 0; k < w->np; k++) {
			int i = d->order[k];

			for (int e = 0; e < d->npreemptions; e++) {
				const struct wrun *ru = &w->run[d->preemptions[e].running];

				if (d->preemptions[e].pending != i)
					continue;
				if (d->preemptions[e].why == SCHED_PREEMPT_RECLAIM &&
				    left[ru->team] <= w->teams[ru->team].nominal_gpus)
					FAIL("job %lld preempted but team %d no longer borrows",
					     (long long)ru->job, ru->team);
				left[ru->team] -= rgpus(ru);
			}
			if (placed_of[i] >= 0 || held_of[i] >= 0)
				left[w->pend[i].team] += (int64_t)w->pend[i].nodes * w->pend[i].gpn;
		}
	}

	/*
	 * Quota, in decision order: no team past nominal + borrowing limit, no
	 * cohort past what it lends. Gangs already stopping are gone; a class
	 * preemption gives its team back the victims' GPUs.
	 */
	for (int r = 0; r < w->nr; r++)
		if (w->run[r].preempting)
			used[w->run[r].team] -= rgpus(&w->run[r]);
	for (int k = 0; k < w->np; k++) {
		int i = d->order[k], t = w->pend[i].team;
		int64_t need = (int64_t)w->pend[i].nodes * w->pend[i].gpn;
		const struct sched_team_in *tm;
		int64_t lend = 0, borrowed = 0;

		if (placed_of[i] < 0 && held_of[i] < 0)
			continue;
		tm = &w->teams[t];
		for (int e = 0; e < d->npreemptions; e++)
			if (d->preemptions[e].pending == i &&
			    d->preemptions[e].why == SCHED_PREEMPT_CLASS)
				used[t] -= rgpus(&w->run[d->preemptions[e].running]);
		used[t] += need;
		if (used[t] <= tm->nominal_gpus || need == 0)
			continue;
		if (!in_cohort(tm)) {
			FAIL("team %d above nominal without a cohort (%lld of %lld)", t,
			     (long long)used[t], (long long)tm->nominal_gpus);
			continue;
		}
		if (tm->borrowing_limit >= 0 && used[t] - tm->nominal_gpus > tm->borrowing_limit)
			FAIL("team %d borrows %lld, limit %lld", t,
			     (long long)(used[t] - tm->nominal_gpus),
			     (long long)tm->borrowing_limit);
		for (int u = 0; u < w->nt; u++) {
			const struct sched_team_in *tu = &w->teams[u];
			int64_t idle = tu->nominal_gpus - used[u];

			if (!same_cohort(tm, tu))
				continue;
			if (idle > 0)
				lend += tu->lending_limit >= 0 && tu->lending_limit < idle
					    ? tu->lending_limit
					    : idle;
			if (idle < 0)
				borrowed -= idle;
		}
		if (borrowed > lend)
			FAIL("cohort of team %d borrows %lld, lenders lend %lld (job %lld)", t,
			     (long long)borrowed, (long long)lend, (long long)w->pend[i].job);
	}

	/* the head's reservation: at its time its nodes have room, whatever was backfilled */
	if (d->head >= 0) {
		const struct sched_reservation *rv = NULL;
		const struct wpend *h = &w->pend[d->head];

		for (int k = 0; k < d->nreservations; k++)
			if (d->reservations[k].kind == SCHED_RESV_HEAD)
				rv = &d->reservations[k];
		REQUIRE(rv != NULL);
		CHECK_INT_EQ(rv->pending, d->head);
		CHECK(rv->start_ms >= w->now);
		CHECK_INT_EQ(d->pending[d->head].reason, SCHED_WAIT_HEAD);
		for (int x = 0; x < rv->nnodes; x++) {
			int n = rv->node[x], occ = __builtin_popcountll(w->extra[n]);

			for (int r = 0; r < w->nr; r++) {
				const struct wrun *ru = &w->run[r];

				if (victim[r] || ru->preempting || ru->end_by <= rv->start_ms)
					continue;
				for (int q = 0; q < ru->nn; q++)
					if (ru->node[q] == n)
						occ += __builtin_popcountll(ru->gpus[q]);
			}
			for (int k = 0; k < d->nplacements; k++) {
				const struct sched_placement *p = &d->placements[k];

				if (w->now + w->pend[d->placement_pending[k]].maxrt * 1000 <=
				    rv->start_ms)
					continue;
				for (int r = 0; r < p->nnodes; r++)
					if (p->node[r] == n)
						occ += p->gpus_per_node;
			}
			for (int k = 0; k < d->nreservations; k++) {
				const struct sched_reservation *o = &d->reservations[k];

				if (o->kind != SCHED_RESV_PREEMPTION ||
				    w->now + w->pend[o->pending].maxrt * 1000 <= rv->start_ms)
					continue;
				for (int r = 0; r < o->nnodes; r++)
					if (o->node[r] == n)
						occ += o->gpus_per_node;
			}
			if (w->nodes[n].gpus - occ < h->gpn)
				FAIL("head job %lld: node %d has %d of %d GPUs at its reservation",
				     (long long)h->job, n, w->nodes[n].gpus - occ, h->gpn);
		}
	}
}

/* Apply a decision: victims and stopping gangs leave at once, placements start now. */
static bool apply(struct world *w, const struct sched_decisions *d)
{
	bool gone[MAXR] = {0}, changed = false;
	int nr = 0, np = 0;
	bool placed[MAXP] = {0};

	for (int k = 0; k < d->npreemptions; k++)
		gone[d->preemptions[k].running] = true;
	for (int r = 0; r < w->nr; r++)
		if (w->run[r].preempting)
			gone[r] = true;
	for (int r = 0; r < w->nr; r++) {
		if (gone[r]) {
			changed = true;
			continue;
		}
		w->run[nr++] = w->run[r];
	}
	w->nr = nr;
	/* what this decision held for a job is what the next one is told */
	for (int i = 0; i < w->np; i++)
		w->pend[i].nheld = 0;
	for (int k = 0; k < d->nreservations; k++) {
		const struct sched_reservation *rv = &d->reservations[k];

		if (rv->kind != SCHED_RESV_PREEMPTION || rv->nnodes > MAXN)
			continue;
		memcpy(w->pend[rv->pending].held, rv->node, (size_t)rv->nnodes * sizeof(int));
		w->pend[rv->pending].nheld = rv->nnodes;
	}
	for (int k = 0; k < d->nplacements; k++) {
		const struct sched_placement *p = &d->placements[k];
		const struct wpend *pj = &w->pend[d->placement_pending[k]];
		struct wrun *ru = &w->run[w->nr++];

		REQUIRE(w->nr <= MAXR);
		memset(ru, 0, sizeof(*ru));
		ru->job = pj->job;
		ru->team = pj->team;
		ru->cls = pj->cls;
		ru->prio = pj->prio;
		ru->start = w->now;
		ru->minrt = pj->minrt;
		ru->end_by = w->now + pj->maxrt * 1000;
		ru->preemptible = pj->preemptible;
		ru->nn = p->nnodes;
		for (int r = 0; r < p->nnodes; r++) {
			ru->node[r] = p->node[r];
			for (int g = 0; g < p->gpus_per_node; g++)
				ru->gpus[r] |= 1ull << p->gpus[r * p->gpus_per_node + g];
		}
		ru->port = p->master_port;
		placed[d->placement_pending[k]] = true;
		changed = true;
	}
	for (int i = 0; i < w->np; i++)
		if (!placed[i] && w->pend[i].team >= 0)
			w->pend[np++] = w->pend[i];
	w->np = np;
	return changed;
}

/*
 * In a state where nothing more happens, no team below nominal has a
 * pending job that one borrowing, preemptible, unprotected gang of another
 * team would make room for.
 */
static void check_reclaim_settled(struct world *w, const struct sched_decisions *d)
{
	int64_t used[MAXT] = {0};
	const struct sched_reservation *head = NULL;

	for (int r = 0; r < w->nr; r++)
		used[w->run[r].team] += rgpus(&w->run[r]);
	for (int k = 0; k < d->nreservations; k++)
		if (d->reservations[k].kind == SCHED_RESV_HEAD)
			head = &d->reservations[k];
	for (int i = 0; i < w->np; i++) {
		const struct wpend *pj = &w->pend[i];
		int64_t need = (int64_t)pj->nodes * pj->gpn;
		bool lng = head && w->now + pj->maxrt * 1000 > head->start_ms;

		switch (d->pending[i].reason) {
		case SCHED_WAIT_NODES:
		case SCHED_WAIT_TOPOLOGY:
		case SCHED_WAIT_HEAD:
			break;
		default:
			continue;
		}
		if (used[pj->team] + need > w->teams[pj->team].nominal_gpus || need == 0)
			continue;
		for (int r = 0; r < w->nr; r++) {
			const struct wrun *v = &w->run[r];
			int f[MAXN];

			/* reclaim is for first-tier jobs, from borrowers of the same cohort */
			if (v->team == pj->team || !v->preemptible || v->preempting ||
			    is_protected(w, v, true) ||
			    used[v->team] <= w->teams[v->team].nominal_gpus ||
			    !d->pending[i].within_nominal ||
			    !same_cohort(&w->teams[v->team], &w->teams[pj->team]))
				continue;
			for (int n = 0; n < w->nn; n++) {
				bool reserved = false;

				for (int x = 0; head && lng && x < head->nnodes; x++)
					reserved |= head->node[x] == n;
				f[n] = !w->nodes[n].schedulable || n == pj->excl || reserved
					   ? -1
					   : __builtin_popcountll(full_mask(w->nodes[n].gpus) &
								  ~busy_of(w, n));
				for (int q = 0; f[n] >= 0 && q < v->nn; q++)
					if (v->node[q] == n)
						f[n] += __builtin_popcountll(v->gpus[q]);
			}
			if (fits_on(w, f, pj->nodes, pj->gpn, pj->req))
				FAIL("job %lld of team %d (below nominal) waits (%d) while job "
				     "%lld of "
				     "borrowing team %d would make room",
				     (long long)pj->job, pj->team, d->pending[i].reason,
				     (long long)v->job, v->team);
		}
	}
}

/* With TY_DUMP set, a failing world is printed (for debugging a seed). */
static void dump(const struct world *w, const struct sched_decisions *d)
{
	char buf[256];

	if (!getenv("TY_DUMP"))
		return;
	for (int t = 0; t < w->nt; t++)
		fprintf(stderr, "team %d nominal %lld borrow %lld lend %lld cohort %s usage %g\n",
			t, (long long)w->teams[t].nominal_gpus,
			(long long)w->teams[t].borrowing_limit,
			(long long)w->teams[t].lending_limit,
			w->teams[t].cohort ? w->teams[t].cohort : "-", w->teams[t].usage);
	for (int n = 0; n < w->nn; n++)
		fprintf(stderr, "node %d gpus %d %s/%s/%s%s extra %llx\n", n, w->nodes[n].gpus,
			w->nodes[n].zone ? w->nodes[n].zone : "-",
			w->nodes[n].rack ? w->nodes[n].rack : "-",
			w->nodes[n].block ? w->nodes[n].block : "-",
			w->nodes[n].schedulable ? "" : " unschedulable",
			(unsigned long long)w->extra[n]);
	for (int r = 0; r < w->nr; r++) {
		const struct wrun *ru = &w->run[r];

		fprintf(stderr, "run %lld team %d cls %d prio %d age %llds left %llds%s%s:",
			(long long)ru->job, ru->team, ru->cls, ru->prio,
			(long long)((w->now - ru->start) / 1000),
			(long long)((ru->end_by - w->now) / 1000), ru->preemptible ? "" : " nonpre",
			ru->preempting ? " stopping" : "");
		for (int k = 0; k < ru->nn; k++)
			fprintf(stderr, " %d:%llx", ru->node[k], (unsigned long long)ru->gpus[k]);
		fprintf(stderr, "\n");
	}
	for (int i = 0; i < w->np; i++) {
		const struct wpend *p = &w->pend[i];

		fprintf(stderr, "pend %lld team %d cls %d %dx%d req %d max %llds excl %d",
			(long long)p->job, p->team, p->cls, p->nodes, p->gpn, p->req,
			(long long)p->maxrt, p->excl);
		if (d) {
			sched_reason_format(buf, sizeof(buf), &w->in, d, i, NULL);
			fprintf(stderr, " pos %d: %s", d->pending[i].position, buf);
		}
		fprintf(stderr, "\n");
	}
	for (int k = 0; d && k < d->npreemptions; k++)
		fprintf(stderr, "preempt %lld for %lld\n", (long long)d->preemptions[k].victim,
			(long long)d->preemptions[k].for_job);
}

static uint64_t seed_env(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);

	return s && *s ? strtoull(s, NULL, 0) : dflt;
}

TY_TEST(single_cycle_invariants_and_determinism)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 3000);
	static struct world w;

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		struct sched_decisions *d, *d2;
		char *a, *b;

		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		d = decide(&w);
		check_decision(&w, d);
		if (ty_test_failed())
			dump(&w, d);
		d2 = decide(&w);
		a = serialize(d);
		b = serialize(d2);
		if (strcmp(a, b))
			FAIL("two decisions over one input differ");
		free(a);
		free(b);
		sched_decisions_free(d);
		sched_decisions_free(d2);
		if (ty_test_failed())
			return;
	}
}

/*
 * Spot pools over the same worlds: every third node is spot, and a third
 * of the jobs each are kept off spot as disallowed or fallen back. Such a
 * job is never placed on, nor reserved, a spot node; the decision keeps
 * every other invariant and stays deterministic.
 */
static struct sched_decisions *decide_spot(struct world *w)
{
	struct sched_decisions *d = NULL;
	struct ty_err err = {0};

	world_input(w);
	for (int n = 0; n < w->nn; n++)
		w->nodes[n].spot = n % 3 == 1;
	for (int i = 0; i < w->np; i++) {
		w->in_pend[i].spot = (enum sched_spot_rule)(w->pend[i].job % 3);
		w->in_pend[i].spot_preemptions = 2;
		w->in_pend[i].spot_max_preemptions = 2;
	}
	REQUIRE_INT_EQ(sched_decide(&d, &w->in, &err), 0);
	return d;
}

TY_TEST(spot_rules_hold)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 1000);
	static struct world w;

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		struct sched_decisions *d, *d2;
		char *a, *b;

		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		d = decide_spot(&w);
		check_decision(&w, d);
		for (int k = 0; k < d->nplacements; k++) {
			const struct sched_placement *p = &d->placements[k];
			int i = d->placement_pending[k];

			for (int r = 0; w.in_pend[i].spot != SCHED_SPOT_ANY && r < p->nnodes; r++)
				if (w.nodes[p->node[r]].spot)
					FAIL("job %lld (spot rule %d) placed on spot node %d",
					     (long long)p->job, w.in_pend[i].spot, p->node[r]);
		}
		for (int k = 0; k < d->nreservations; k++) {
			const struct sched_reservation *rv = &d->reservations[k];

			for (int x = 0; w.in_pend[rv->pending].spot != SCHED_SPOT_ANY &&
					x < rv->nnodes;
			     x++)
				if (w.nodes[rv->node[x]].spot)
					FAIL("job %lld reserves spot node %d", (long long)rv->job,
					     rv->node[x]);
		}
		for (int i = 0; i < w.np; i++)
			if (d->pending[i].reason == SCHED_WAIT_ON_DEMAND)
				CHECK(w.in_pend[i].spot != SCHED_SPOT_ANY);
		if (ty_test_failed())
			dump(&w, d);
		d2 = decide_spot(&w);
		a = serialize(d);
		b = serialize(d2);
		if (strcmp(a, b))
			FAIL("two decisions over one input differ");
		free(a);
		free(b);
		sched_decisions_free(d);
		sched_decisions_free(d2);
		for (int x = 0; x < w.nn; x++)
			w.nodes[x].spot = false;
		if (ty_test_failed())
			return;
	}
}

/*
 * The spot rules are the schedulable spot nodes excluded (docs/scheduling.md,
 * "Spot"): the same worlds decided once with the rules and once with the
 * rules' jobs excluding those nodes explicitly place, preempt, reserve and
 * account alike. Only the reason differs: with the rules, waiting for nodes
 * reads as waiting for on-demand nodes, so both are normalised to that.
 */
static void normalise_on_demand(const struct world *w, struct sched_decisions *d)
{
	for (int i = 0; i < w->np; i++) {
		struct sched_pending_out *o = &d->pending[i];

		if ((enum sched_spot_rule)(w->pend[i].job % 3) == SCHED_SPOT_ANY)
			continue;
		if (o->reason == SCHED_WAIT_NODES || o->reason == SCHED_WAIT_TOPOLOGY ||
		    o->reason == SCHED_NEVER_FITS_EXCLUDED || o->reason == SCHED_WAIT_ON_DEMAND) {
			o->reason = SCHED_WAIT_ON_DEMAND;
			o->level = SCHED_TOPO_NONE;
			o->count = 0;
		}
	}
}

TY_TEST(spot_rules_are_spot_nodes_excluded)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 1000);
	static struct world w;
	static int xs[MAXP][MAXN + 1];

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		struct sched_decisions *d, *e = NULL;
		struct ty_err err = {0};
		char *a, *b;

		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		d = decide_spot(&w);
		/* the same input, the rules turned into exclusions */
		for (int i = 0; i < w.np; i++) {
			struct sched_pending_in *x = &w.in_pend[i];
			int k = 0;

			if (x->spot == SCHED_SPOT_ANY)
				continue;
			if (w.pend[i].excl >= 0)
				xs[i][k++] = w.pend[i].excl;
			for (int m = 0; m < w.nn; m++)
				if (w.nodes[m].spot && w.nodes[m].schedulable)
					xs[i][k++] = m;
			x->exclude = xs[i];
			x->nexclude = k;
			x->spot = SCHED_SPOT_ANY;
		}
		for (int m = 0; m < w.nn; m++)
			w.nodes[m].spot = false;
		REQUIRE_INT_EQ(sched_decide(&e, &w.in, &err), 0);
		normalise_on_demand(&w, d);
		normalise_on_demand(&w, e);
		a = serialize(d);
		b = serialize(e);
		if (strcmp(a, b))
			FAIL("spot rules and excluded spot nodes decide differently:\n%s\n%s", a, b);
		free(a);
		free(b);
		sched_decisions_free(d);
		sched_decisions_free(e);
		if (ty_test_failed())
			return;
	}
}

TY_TEST(reclaim_settles)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 3000);
	static struct world w;

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		int it;

		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		for (it = 0; it < 40; it++) {
			struct sched_decisions *d = decide(&w);
			bool changed;

			check_decision(&w, d);
			changed = apply(&w, d);
			if (!changed) {
				check_reclaim_settled(&w, d);
				sched_decisions_free(d);
				break;
			}
			sched_decisions_free(d);
			if (ty_test_failed())
				return;
		}
		if (it == 40)
			FAIL("no settled state after 40 decisions");
		if (ty_test_failed())
			return;
	}
}

/*
 * Jobs run to their max runtime and nothing arrives ahead of the head job:
 * it starts no later than its first reservation, whatever was backfilled.
 */
TY_TEST(head_starts_by_its_reservation)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 1000);
	static struct world w;
	int checked = 0, ndisplaced = 0, nwaiting = 0;

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		struct sched_decisions *d;
		int64_t job, at = 0;
		int h, t;
		bool started = false, waiting_ahead = false, displaced = false;
		int64_t behind_job[MAXP];

		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		d = decide(&w);
		if (d->head < 0) {
			sched_decisions_free(d);
			continue;
		}
		h = d->head;
		job = w.pend[h].job;
		t = w.pend[h].team;
		at = d->pending[h].at_ms;
		/*
		 * Out of scope: a head that borrows (a lender may reclaim). Jobs
		 * ahead of it still waiting for their victims are in scope: the
		 * next decisions are told the nodes held for them (held_nodes)
		 * and start them there.
		 */
		for (int i = 0; i < w.np; i++)
			waiting_ahead |= d->pending[i].position < d->pending[h].position &&
					 d->pending[i].reason == SCHED_WAIT_PREEMPTION;
		if (d->teams[t].used + (int64_t)w.pend[h].nodes * w.pend[h].gpn >
		    w.teams[t].nominal_gpus) {
			sched_decisions_free(d);
			continue;
		}
		checked++;
		nwaiting += waiting_ahead;
		if (getenv("TY_TRACE"))
			dump(&w, d);
		/* what is ahead of the head and waits for anything but its victims leaves */
		for (int i = 0; i < w.np; i++)
			if (d->pending[i].position < d->pending[h].position &&
			    d->pending[i].reason != SCHED_PLACED &&
			    d->pending[i].reason != SCHED_WAIT_PREEMPTION)
				w.pend[i].team = -1; /* dropped by apply() */
		memset(behind_job, 0, sizeof(behind_job));
		for (int i = 0; i < w.np; i++)
			if (d->pending[i].position > d->pending[h].position)
				behind_job[i] = w.pend[i].job;
		for (int it = 0; it < 400 && !started && !displaced; it++) {
			bool changed;

			for (int k = 0; k < d->nplacements; k++)
				started |= d->placements[k].job == job;
			if (started) {
				if (w.now > at)
					FAIL("head job %lld started %lld ms after its reservation",
					     (long long)job, (long long)(w.now - at));
				break;
			}
			changed = apply(&w, d);
			sched_decisions_free(d);
			d = NULL;
			if (!changed) {
				int64_t next = INT64_MAX;
				int nr = 0;

				for (int r = 0; r < w.nr; r++)
					if (w.run[r].end_by < next)
						next = w.run[r].end_by;
				if (next == INT64_MAX)
					break;
				w.now = next;
				for (int r = 0; r < w.nr; r++)
					if (w.run[r].end_by > w.now)
						w.run[nr++] = w.run[r];
				w.nr = nr;
			}
			if (w.now > at)
				break;
			d = decide(&w);
			check_decision(&w, d);
			/*
			 * A job that was behind the head moved ahead of it: its
			 * team's use fell to within nominal, so it joined
			 * the first tier (docs/scheduling.md §1, §5: "one whose quota
			 * frees up"). The premise no longer holds.
			 */
			{
				int hp = -1, np2 = 0;

				for (int i = 0; i < w.np; i++)
					if (w.pend[i].job == job)
						hp = d->pending[i].position;
				for (int i = 0; i < w.np && hp >= 0; i++) {
					bool was_behind = false;

					for (int q = 0; q < MAXP && !was_behind; q++)
						was_behind = behind_job[q] == w.pend[i].job;
					if (was_behind && d->pending[i].position < hp)
						np2++;
				}
				if (np2) {
					displaced = true;
					ndisplaced++;
				}
			}
			if (getenv("TY_TRACE")) {
				fprintf(stderr, "--- at +%llds\n",
					(long long)((w.now - NOW0) / 1000));
				dump(&w, d);
			}
		}
		sched_decisions_free(d);
		if (displaced)
			continue;
		if (!started)
			FAIL("head job %lld never started (reserved at +%lld s)", (long long)job,
			     (long long)((at - NOW0) / 1000));
		if (ty_test_failed())
			return;
	}
	ty_test_note("%d simulations had a head job within its nominal (%d displaced by a job "
		     "whose team fell back within nominal; %d with jobs ahead waiting for their "
		     "victims)",
		     checked, ndisplaced, nwaiting);
	CHECK(one || checked > 50);
}

/*
 * Reclaim takes only from borrowers: every reclaim victim's team, counting
 * its running gangs in the input that are not stopping, less the victims
 * this decision already took from it, is above nominal before this one
 * goes, and is in the reclaiming team's cohort. Holds and placements of
 * the same decision never make a team a victim.
 */
TY_TEST(no_reclaim_of_a_non_borrower)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 3000);
	static struct world w;
	int reclaims = 0;

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		for (int it = 0; it < 10; it++) {
			struct sched_decisions *d = decide(&w);
			int64_t run[MAXT] = {0};

			for (int r = 0; r < w.nr; r++)
				if (!w.run[r].preempting)
					run[w.run[r].team] += rgpus(&w.run[r]);
			for (int k = 0; k < d->npreemptions; k++) {
				const struct sched_preemption *pr = &d->preemptions[k];
				const struct wrun *v = &w.run[pr->running];
				const struct wpend *pj = &w.pend[pr->pending];

				if (pr->why != SCHED_PREEMPT_RECLAIM)
					continue;
				reclaims++;
				if (run[v->team] <= w.teams[v->team].nominal_gpus)
					FAIL("reclaim of job %lld: team %d runs %lld, nominal %lld",
					     (long long)v->job, v->team, (long long)run[v->team],
					     (long long)w.teams[v->team].nominal_gpus);
				if (!same_cohort(&w.teams[v->team], &w.teams[pj->team]))
					FAIL("reclaim of job %lld (team %d) for job %lld (team %d) "
					     "across cohorts",
					     (long long)v->job, v->team, (long long)pj->job, pj->team);
				if (!d->pending[pr->pending].within_nominal)
					FAIL("reclaim for job %lld, not in the first tier",
					     (long long)pj->job);
				run[v->team] -= rgpus(v);
			}
			if (!apply(&w, d)) {
				sched_decisions_free(d);
				break;
			}
			sched_decisions_free(d);
			if (ty_test_failed())
				return;
		}
	}
	ty_test_note("%d reclaims checked", reclaims);
	CHECK(one || reclaims > 50);
}

/*
 * No ping-pong over N cycles: victims stop (one cycle as preempting, then
 * gone) and come back as pending jobs with their old submit time; a
 * reclaim victim never starts again while the job it was preempted for
 * still waits holding nodes for its victims, and no job is reclaimed from
 * twice for the same job.
 */
TY_TEST(no_ping_pong_over_cycles)
{
	uint64_t one = seed_env("TY_SEED", 0), n = seed_env("TY_SEEDS", 1500);
	static struct world w;
	int requeued = 0;

	for (uint64_t seed = one ? one : 1; seed <= (one ? one : n); seed++) {
		int64_t vic[MAXR], forj[MAXR];
		int nv = 0;

		ty_test_context("seed %" PRIu64, seed);
		gen_world(&w, seed);
		for (int it = 0; it < 12; it++) {
			struct sched_decisions *d = decide(&w);
			struct wpend back[MAXR];
			int nback = 0;

			check_decision(&w, d);
			for (int k = 0; k < d->nplacements; k++)
				for (int x = 0; x < nv; x++) {
					int fi = -1;

					if (d->placements[k].job != vic[x])
						continue;
					for (int i = 0; i < w.np; i++)
						if (w.pend[i].job == forj[x])
							fi = i;
					if (fi >= 0 &&
					    d->pending[fi].reason == SCHED_WAIT_PREEMPTION)
						FAIL("victim %lld restarted while job %lld waits "
						     "for its victims",
						     (long long)vic[x], (long long)forj[x]);
				}
			for (int k = 0; k < d->npreemptions; k++) {
				const struct sched_preemption *pr = &d->preemptions[k];
				const struct wrun *v = &w.run[pr->running];

				if (pr->why != SCHED_PREEMPT_RECLAIM)
					continue;
				for (int x = 0; x < nv; x++)
					if (vic[x] == v->job && forj[x] == pr->for_job)
						FAIL("job %lld reclaimed twice for job %lld",
						     (long long)v->job, (long long)pr->for_job);
				if (nv < MAXR) {
					vic[nv] = v->job;
					forj[nv++] = pr->for_job;
				}
			}
			/* victims (new and already stopping) stop now and come back pending */
			for (int r = 0; r < w.nr && nback < MAXR; r++) {
				const struct wrun *ru = &w.run[r];
				struct wpend *b = &back[nback];
				bool victim = ru->preempting;

				for (int k = 0; k < d->npreemptions; k++)
					victim |= d->preemptions[k].running == r;
				if (!victim)
					continue;
				memset(b, 0, sizeof(*b));
				b->job = ru->job;
				b->team = ru->team;
				b->cls = ru->cls;
				b->prio = ru->prio;
				b->submit = NOW0 - 3600 * 1000;
				b->minrt = ru->minrt;
				b->maxrt = (ru->end_by - ru->start) / 1000 > 0
					       ? (ru->end_by - ru->start) / 1000
					       : 60;
				b->nodes = ru->nn;
				b->gpn = __builtin_popcountll(ru->gpus[0]);
				b->preemptible = ru->preemptible;
				b->excl = -1;
				for (int q = 1; q < ru->nn; q++)
					if (__builtin_popcountll(ru->gpus[q]) != b->gpn)
						b->nodes = 0; /* uneven gang: not requeued */
				if (b->nodes && b->nodes <= 8)
					nback++;
			}
			apply(&w, d);
			sched_decisions_free(d);
			for (int b = 0; b < nback && w.np < MAXP; b++) {
				w.pend[w.np++] = back[b];
				requeued++;
			}
			w.now += 60 * 1000;
			if (ty_test_failed())
				return;
		}
	}
	ty_test_note("%d victims requeued", requeued);
}
