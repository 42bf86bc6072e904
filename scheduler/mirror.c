/*
 * The cluster mirror: nodes, live allocations (with the attempt and job
 * fields a running gang needs), rendezvous ports held, and teams with their
 * team_usage row, kept in memory across cycles. The pending-job half of the
 * mirror is queue.c.
 *
 * Every transition goes through here:
 *  - sched_mirror_touch_job(): a job's allocations, attempts or state may
 *    have changed (called from sched_touch(), i.e. for every job event this
 *    scheduler writes, every allocation it releases, and every job another
 *    session NOTIFYs on trainyard_job_events);
 *  - sched_mirror_touch_node(): a node registered, came back or was lost;
 *  - sched_mirror_team_usage(): team_usage rows a cycle wrote, applied to
 *    the mirror only after its transaction committed;
 *  - sched_mirror_stale(): a failed or fenced transaction, a new term, a
 *    reconnect, a notification not understood: read everything again.
 * Teams are changed by the API, which this scheduler cannot make notify:
 * each refresh reads a fingerprint of the table (TEAM_MARK: count and sum
 * of row hashes, one row) and reloads the teams only when it changed.
 *
 * A touch only queues keys to be read again at the next refresh, which runs
 * at the start of a cycle, outside any transaction: whatever became of the
 * transaction that touched them (committed or rolled back), the mirror then
 * holds what is committed. A failed transaction also marks it stale. Every
 * MIRROR_RELOAD_MS it is read whole, in case a change slipped by (a row
 * edited by hand).
 */
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIRROR_RELOAD_MS 60000
#define MIRROR_TOUCHED_MAX 20000 /* beyond this many changed keys a full reload is cheaper */

/* ---- small things ---- */

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_i64(int64_t x, int64_t y)
{
	return (x > y) - (x < y);
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const struct sched_mnode *)a)->id, ((const struct sched_mnode *)b)->id);
}

static int cmp_alloc(const void *a, const void *b)
{
	const struct sched_malloc *x = a, *y = b;
	int c;

	if ((c = cmp_i64(x->job, y->job)) || (c = cmp_i64(x->attempt, y->attempt)))
		return c;
	return (x->node_rank > y->node_rank) - (x->node_rank < y->node_rank);
}

static int cmp_port(const void *a, const void *b)
{
	const struct sched_mport *x = a, *y = b;
	int c;

	if ((c = strcmp(x->node, y->node)) || (c = cmp_i64(x->job, y->job)))
		return c;
	return cmp_i64(x->attempt, y->attempt);
}

static void node_clear(struct sched_mnode *n)
{
	free(n->id);
	free(n->addr);
	free(n->zone);
	free(n->rack);
	free(n->block);
	memset(n, 0, sizeof(*n));
}

static void team_clear(struct sched_mteam *t)
{
	free(t->name);
	free(t->cohort);
	memset(t, 0, sizeof(*t));
}

static void nodes_free(struct sched_mirror *m)
{
	for (int i = 0; i < m->nnodes; i++)
		node_clear(&m->nodes[i]);
	free(m->nodes);
	m->nodes = NULL;
	m->nnodes = 0;
}

static void teams_free(struct sched_mirror *m)
{
	for (int i = 0; i < m->nteams; i++)
		team_clear(&m->teams[i]);
	free(m->teams);
	m->teams = NULL;
	m->nteams = 0;
}

static void data_free(struct sched_mirror *m)
{
	nodes_free(m);
	teams_free(m);
	free(m->allocs);
	free(m->ports);
	m->allocs = NULL;
	m->ports = NULL;
	m->nallocs = m->capallocs = m->nports = m->capports = 0;
}

static void touched_free(struct sched_mirror *m)
{
	for (int i = 0; i < m->ntnodes; i++)
		free(m->tnodes[i]);
	free(m->tnodes);
	m->tnodes = NULL;
	m->ntnodes = m->captnodes = 0;
	sched_ids_free(&m->tjobs);
}

void sched_mirror_clear(struct sched_mirror *m)
{
	data_free(m);
	touched_free(m);
	m->stale = true;
	m->team_mark[0] = 0;
}

void sched_mirror_stale(struct sched_mirror *m, const char *why)
{
	if (!m->stale && why)
		ty_debug("mirror: read whole at the next cycle (%s)", why);
	m->stale = true;
}

/* ---- touches ---- */

void sched_mirror_touch_job(struct sched_mirror *m, int64_t job)
{
	struct sched_ids *t = &m->tjobs;

	if (m->stale)
		return;
	if (t->n >= MIRROR_TOUCHED_MAX) {
		m->stale = true;
		return;
	}
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 256;
		int64_t *v = realloc(t->v, (size_t)cap * sizeof(*v));

		if (!v) {
			m->stale = true;
			return;
		}
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n++] = job;
}

void sched_mirror_touch_node(struct sched_mirror *m, const char *node)
{
	char *d;

	if (m->stale)
		return;
	if (m->ntnodes >= MIRROR_TOUCHED_MAX) {
		m->stale = true;
		return;
	}
	if (m->ntnodes == m->captnodes) {
		int cap = m->captnodes ? m->captnodes * 2 : 64;
		char **v = realloc(m->tnodes, (size_t)cap * sizeof(*v));

		if (!v) {
			m->stale = true;
			return;
		}
		m->tnodes = v;
		m->captnodes = cap;
	}
	if (!(d = strdup(node))) {
		m->stale = true;
		return;
	}
	m->tnodes[m->ntnodes++] = d;
}

void sched_mirror_team_usage(struct sched_mirror *m, int64_t team, double decayed,
			     double fair_share, int64_t used, int64_t borrowed, int64_t lent,
			     int64_t pending, int64_t since_ms)
{
	for (int i = 0; i < m->nteams; i++)
		if (m->teams[i].id == team) {
			struct sched_mteam *t = &m->teams[i];

			t->have_row = true;
			t->decayed = decayed;
			t->fair_share = fair_share;
			t->used = used;
			t->borrowed = borrowed;
			t->lent = lent;
			t->pending = pending;
			t->since_ms = since_ms;
			return;
		}
	/* a team the mirror does not know yet: its row is read with it */
}

/* ---- loading ---- */

static int load_teams(struct sched_mirror *m, struct ty_pg *pg, struct ty_err *err)
{
	struct sched_mteam *v = NULL;
	int rc, n = 0;

	rc = sched_store_mirror_teams(&v, &n, pg, err);
	if (v) {
		teams_free(m);
		m->teams = v;
		m->nteams = n;
	}
	return rc;
}

/* Everything, into m (whose data is replaced). */
static int load_all(struct sched_mirror *m, struct ty_pg *pg, struct ty_err *err)
{
	int rc;

	data_free(m);
	if ((rc = sched_store_team_mark(m->team_mark, sizeof(m->team_mark), pg, err)) ||
	    (rc = load_teams(m, pg, err)))
		return rc;
	rc = sched_store_mirror_nodes(&m->nodes, NULL, &m->nnodes, pg, NULL, 0, err);
	if (rc)
		return rc;
	qsort(m->nodes, (size_t)m->nnodes, sizeof(*m->nodes), cmp_node);
	if ((rc = sched_store_mirror_allocs(&m->allocs, &m->nallocs, pg, NULL, 0, err)))
		return rc;
	m->capallocs = m->nallocs;
	qsort(m->allocs, (size_t)m->nallocs, sizeof(*m->allocs), cmp_alloc);
	if ((rc = sched_store_mirror_ports(&m->ports, &m->nports, pg, NULL, 0, err)))
		return rc;
	m->capports = m->nports;
	qsort(m->ports, (size_t)m->nports, sizeof(*m->ports), cmp_port);
	return 0;
}

/* ---- incremental refresh ---- */

static int cmp_i64p(const void *a, const void *b)
{
	return cmp_i64(*(const int64_t *)a, *(const int64_t *)b);
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool job_in(const int64_t *v, int n, int64_t job)
{
	return bsearch(&job, v, (size_t)n, sizeof(*v), cmp_i64p) != NULL;
}

/* Read the touched jobs' allocations and ports again. */
static int refresh_jobs(struct sched_mirror *m, struct ty_pg *pg, struct ty_err *err)
{
	struct sched_ids *t = &m->tjobs;
	struct sched_malloc *ra = NULL;
	struct sched_mport *rp = NULL;
	int rc, k = 0, n, nra = 0, nrp = 0;

	qsort(t->v, (size_t)t->n, sizeof(*t->v), cmp_i64p);
	for (int i = 0; i < t->n; i++)
		if (i == 0 || t->v[i] != t->v[i - 1])
			t->v[k++] = t->v[i];
	t->n = k;
	if ((rc = sched_store_mirror_allocs(&ra, &nra, pg, t->v, t->n, err)) ||
	    (rc = sched_store_mirror_ports(&rp, &nrp, pg, t->v, t->n, err)))
		goto out;
	/* drop the touched jobs' rows, then append what they hold now */
	n = 0;
	for (int i = 0; i < m->nallocs; i++)
		if (!job_in(t->v, t->n, m->allocs[i].job))
			m->allocs[n++] = m->allocs[i];
	m->nallocs = n;
	n = 0;
	for (int i = 0; i < m->nports; i++)
		if (!job_in(t->v, t->n, m->ports[i].job))
			m->ports[n++] = m->ports[i];
	m->nports = n;
	if (m->nallocs + nra > m->capallocs) {
		int cap = m->nallocs + nra + 256;
		struct sched_malloc *v = realloc(m->allocs, (size_t)cap * sizeof(*v));

		if (!v) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		m->allocs = v;
		m->capallocs = cap;
	}
	if (m->nports + nrp > m->capports) {
		int cap = m->nports + nrp + 256;
		struct sched_mport *v = realloc(m->ports, (size_t)cap * sizeof(*v));

		if (!v) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		m->ports = v;
		m->capports = cap;
	}
	for (int r = 0; r < nra; r++)
		m->allocs[m->nallocs++] = ra[r];
	for (int r = 0; r < nrp; r++)
		m->ports[m->nports++] = rp[r];
	qsort(m->allocs, (size_t)m->nallocs, sizeof(*m->allocs), cmp_alloc);
	qsort(m->ports, (size_t)m->nports, sizeof(*m->ports), cmp_port);
out:
	free(ra);
	free(rp);
	return rc;
}

/* Read the touched nodes again: update, add, or drop (lost, deleted) each. */
static int refresh_nodes(struct sched_mirror *m, struct ty_pg *pg, struct ty_err *err)
{
	struct sched_mnode *got = NULL, *v;
	bool *present = NULL;
	int rc, k = 0, ngot = 0, n;

	qsort(m->tnodes, (size_t)m->ntnodes, sizeof(*m->tnodes), cmp_strp);
	for (int i = 0; i < m->ntnodes; i++) {
		if (i > 0 && !strcmp(m->tnodes[i], m->tnodes[k - 1])) {
			free(m->tnodes[i]);
			continue;
		}
		m->tnodes[k++] = m->tnodes[i];
	}
	m->ntnodes = k;
	if ((rc = sched_store_mirror_nodes(&got, &present, &ngot, pg,
					   (const char *const *)m->tnodes, m->ntnodes, err)))
		goto out;
	/* keep the untouched nodes, then add the touched ones that are not lost */
	n = 0;
	for (int i = 0; i < m->nnodes; i++) {
		const char *id = m->nodes[i].id;

		if (bsearch(&id, m->tnodes, (size_t)m->ntnodes, sizeof(*m->tnodes), cmp_strp))
			node_clear(&m->nodes[i]);
		else
			m->nodes[n++] = m->nodes[i];
	}
	m->nnodes = n;
	if (!(v = realloc(m->nodes, ((size_t)n + (size_t)ngot + 1) * sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	m->nodes = v;
	for (int i = 0; i < ngot; i++) {
		if (present[i]) {
			m->nodes[m->nnodes++] = got[i];
			memset(&got[i], 0, sizeof(got[i]));
		}
	}
	qsort(m->nodes, (size_t)m->nnodes, sizeof(*m->nodes), cmp_node);
out:
	for (int i = 0; i < ngot; i++)
		node_clear(&got[i]);
	free(got);
	free(present);
	return rc;
}

static int refresh(struct sched_mirror *m, struct ty_pg *pg, struct ty_err *err)
{
	int64_t now = ty_mono_ms();
	char mark[sizeof(m->team_mark)];
	int rc;

	if (m->stale || now >= m->loaded + MIRROR_RELOAD_MS) {
		/* what is touched from here on is read again next time */
		touched_free(m);
		if ((rc = load_all(m, pg, err)))
			return rc;
		m->stale = false;
		m->loaded = now;
		ty_debug("mirror: %d node(s), %d allocation(s), %d port(s), %d team(s) loaded",
			 m->nnodes, m->nallocs, m->nports, m->nteams);
		return 0;
	}
	if ((rc = sched_store_team_mark(mark, sizeof(mark), pg, err)))
		return rc;
	if (strcmp(mark, m->team_mark)) {
		if ((rc = load_teams(m, pg, err)))
			return rc;
		snprintf(m->team_mark, sizeof(m->team_mark), "%s", mark);
	}
	if (m->ntnodes > 0 || m->tjobs.n > 0)
		ty_debug("mirror: read again %d job(s), %d node(s)", m->tjobs.n, m->ntnodes);
	if (m->ntnodes > 0) {
		if ((rc = refresh_nodes(m, pg, err)))
			return rc;
		for (int i = 0; i < m->ntnodes; i++)
			free(m->tnodes[i]);
		m->ntnodes = 0;
	}
	if (m->tjobs.n > 0) {
		if ((rc = refresh_jobs(m, pg, err)))
			return rc;
		m->tjobs.n = 0;
	}
	return 0;
}

int sched_mirror_refresh(struct sched *s, struct ty_err *err)
{
	int rc = refresh(&s->world.mirror, s->term.pg, err);

	if (rc)
		s->world.mirror.stale = true;
	else if (s->o.check_mirror && (rc = sched_mirror_check(s, err)))
		s->world.mirror.stale = true;
	return rc;
}

/* ---- the check ---- */

static bool same_team(const struct sched_mteam *a, const struct sched_mteam *b)
{
	return a->id == b->id && !cmp_str(a->name, b->name) && a->nominal == b->nominal &&
	       a->borrowing_limit == b->borrowing_limit && a->lending_limit == b->lending_limit &&
	       !cmp_str(a->cohort, b->cohort) && a->weight == b->weight &&
	       a->have_row == b->have_row &&
	       fabs(a->decayed - b->decayed) <= 1e-6 * (1 + fabs(a->decayed)) &&
	       llabs(a->since_ms - b->since_ms) <= 1 && fabs(a->fair_share - b->fair_share) < 1e-9 &&
	       a->used == b->used && a->borrowed == b->borrowed && a->lent == b->lent &&
	       a->pending == b->pending && a->max_cpus == b->max_cpus &&
	       a->max_memory_mb == b->max_memory_mb;
}

static bool same_node(const struct sched_mnode *a, const struct sched_mnode *b)
{
	return !strcmp(a->id, b->id) && !cmp_str(a->addr, b->addr) && a->gpus == b->gpus &&
	       a->ready == b->ready && !cmp_str(a->zone, b->zone) && !cmp_str(a->rack, b->rack) &&
	       !cmp_str(a->block, b->block) && a->preempting == b->preempting &&
	       a->spot == b->spot && a->cpus == b->cpus && a->memory_mb == b->memory_mb &&
	       a->fault == b->fault;
}

static bool same_alloc(const struct sched_malloc *a, const struct sched_malloc *b)
{
	return a->job == b->job && a->attempt == b->attempt && !strcmp(a->node, b->node) &&
	       a->mask == b->mask && a->team_id == b->team_id && !strcmp(a->cls, b->cls) &&
	       a->priority == b->priority && a->start_ms == b->start_ms &&
	       a->checkpoint_ms == b->checkpoint_ms &&
	       a->min_runtime_s == b->min_runtime_s && a->max_runtime_s == b->max_runtime_s &&
	       a->preemptible == b->preemptible && a->preempting == b->preempting &&
	       a->preempted_for == b->preempted_for && a->node_rank == b->node_rank &&
	       a->cpus_per_node == b->cpus_per_node && a->memory_mb_per_node == b->memory_mb_per_node;
}

static bool same_port(const struct sched_mport *a, const struct sched_mport *b)
{
	return a->job == b->job && a->attempt == b->attempt && !strcmp(a->node, b->node) &&
	       a->port == b->port;
}

/* "" when equal, else what differs first. */
static void diff(char *buf, size_t n, const struct sched_mirror *m, const struct sched_mirror *f)
{
	buf[0] = 0;
	if (m->nteams != f->nteams) {
		snprintf(buf, n, "%d team(s) mirrored, %d in the database", m->nteams, f->nteams);
		return;
	}
	for (int i = 0; i < m->nteams; i++)
		if (!same_team(&m->teams[i], &f->teams[i])) {
			snprintf(buf, n, "team %lld differs", (long long)f->teams[i].id);
			return;
		}
	for (int i = 0; i < m->nnodes && i < f->nnodes; i++)
		if (!same_node(&m->nodes[i], &f->nodes[i])) {
			snprintf(buf, n, "node '%s' (mirror) / '%s' (database) differs",
				 m->nodes[i].id, f->nodes[i].id);
			return;
		}
	if (m->nnodes != f->nnodes) {
		snprintf(buf, n, "%d node(s) mirrored, %d in the database", m->nnodes, f->nnodes);
		return;
	}
	for (int i = 0; i < m->nallocs && i < f->nallocs; i++)
		if (!same_alloc(&m->allocs[i], &f->allocs[i])) {
			snprintf(buf, n,
				 "allocation of job %lld attempt %lld on '%s' (mirror) / job %lld "
				 "attempt %lld on '%s' (database) differs",
				 (long long)m->allocs[i].job, (long long)m->allocs[i].attempt,
				 m->allocs[i].node, (long long)f->allocs[i].job,
				 (long long)f->allocs[i].attempt, f->allocs[i].node);
			return;
		}
	if (m->nallocs != f->nallocs) {
		snprintf(buf, n, "%d allocation(s) mirrored, %d in the database", m->nallocs,
			 f->nallocs);
		return;
	}
	for (int i = 0; i < m->nports && i < f->nports; i++)
		if (!same_port(&m->ports[i], &f->ports[i])) {
			snprintf(buf, n, "port of job %lld (mirror) / job %lld (database) differs",
				 (long long)m->ports[i].job, (long long)f->ports[i].job);
			return;
		}
	if (m->nports != f->nports)
		snprintf(buf, n, "%d port(s) mirrored, %d in the database", m->nports, f->nports);
}

int sched_mirror_check(struct sched *s, struct ty_err *err)
{
	char why[512];

	for (int round = 0; round < 2; round++) {
		struct sched_mirror fresh = {0};
		int rc;

		if ((rc = load_all(&fresh, s->term.pg, err))) {
			data_free(&fresh);
			return rc;
		}
		diff(why, sizeof(why), &s->world.mirror, &fresh);
		data_free(&fresh);
		if (!why[0])
			return 0;
		if (round == 0) {
			/*
			 * Another session may have committed between the refresh and this
			 * load: collect its notifications, refresh and compare again.
			 */
			sched_notice_jobs(s);
			if ((rc = refresh(&s->world.mirror, s->term.pg, err)))
				return rc;
		}
	}
	ty_error("mirror diverges from PostgreSQL: %s", why);
	return ty_err_set(err, TY_EINVAL, "mirror diverges from PostgreSQL: %s", why);
}
