/*
 * A scheduling cycle: cancel what was asked to stop, send the kills of
 * preemptions whose grace is over, then build a snapshot of the cluster from
 * the mirrors (mirror.c, queue.c; brought up to date from PostgreSQL with
 * only what changed), let the policy core (core/policy.h) decide, and apply its
 * decisions in one fenced transaction: placements (attempt, allocations,
 * job, event, launch outbox rows), preemptions (preempt.c), pending reasons
 * and queue positions of the jobs whose values changed, and team usage.
 */
#include "core/policy.h"
#include "fault.h"
#include "launch.h"
#include "lifecycle.h"
#include "scheduler.h"
#include "ty_arena.h"
#include "ty_buf.h"
#include "ty_crypto.h"
#include "ty_log.h"
#include "ty_time.h"
#include "what_if.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* old team samples are looked for at most this often */
#define TEAM_PRUNE_MS (3600 * 1000)
/* decayed usage is written back at least this often even when nothing else changed */
#define USAGE_PERSIST_MS 10000
/* fair-share changes smaller than this are not worth a write */
#define FAIRSHARE_EPSILON 1e-4
#define REASON_MAX 512
/* start-time estimates are made at most this often (docs/scheduling.md, "Start-time estimates") */
#define ESTIMATE_MS 5000
#define ESTIMATE_JOBS 10000 /* the first pending jobs in queue order that get one */
#define ESTIMATE_STEPS 256  /* simulated decisions per estimate */
#define ESTIMATE_MIN_STEP_S 30 /* ends this close are one step: late by at most this */
#define SLOW_CYCLE_MS                                                                              \
	250 /* a cycle this long is logged at info level, with where the time went                 \
	     */

_Static_assert(SCHED_NCLASSES == SCHED_CLASS_COUNT,
	       "--min-runtime-seconds has one value per class");

/* What team_usage holds for a team now, to write only what changed. */
struct team_row {
	int64_t id;
	bool have_row;
	int64_t since_ms; /* updated_at (or the team's creation) */
	double fair_share;
	int64_t used, borrowed, lent, pending;
};

/* What jobs holds for a pending job now. */
struct pend_row {
	int q; /* index in s->world.queue */
	int64_t attempt;
	const char *reason;  /* NULL when none */
	int position;	     /* 1-based, 0 when NULL */
	int64_t reserved_ms; /* -1 when NULL */
	const char *why;     /* a held job's reason (arena), NULL: waiting for its attempt */
	int64_t written_ms;  /* as struct sched_qjob */
};

struct snap {
	struct ty_arena *arena;
	struct sched_input in;
	struct sched_node_in *nodes;
	const char **addr; /* registered address per node */
	struct sched_team_in *teams;
	struct team_row *trow;
	struct sched_usage *usage;
	struct sched_running_in *running;
	int64_t *running_attempt;
	struct sched_pending_in *pending;
	struct pend_row *prow;
	/* the nodes held for expedited requeues (sched_xholds), for the reasons */
	struct sched_xhold *xh;
	int nxh;
	/* pending jobs the core does not see: an earlier attempt still holds GPUs */
	int64_t *held;
	int *held_team;
	struct pend_row *hrow;
	int nheld;
	/* start-time estimates to publish (estimate()), their bases owned here */
	struct sched_store_queue_row *est; /* estimate-only rows, by job id */
	int nest;
};

/* Zeroed memory for n items of size from the snapshot's arena. */
static void *snap_alloc(struct snap *sn, size_t n, size_t size)
{
	void *p = ty_arena_alloc(sn->arena, n * size + 1);

	if (p)
		memset(p, 0, n * size + 1);
	return p;
}

/* The index of node id in in->nodes (sorted by id with strcmp), or -1. */
static int node_of_id(const struct sched_input *in, const char *id)
{
	int lo = 0, hi = in->nnodes;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		int c = strcmp(in->nodes[mid].id, id);

		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static int node_index(const struct snap *sn, const char *id)
{
	return node_of_id(&sn->in, id);
}

static int team_index(const struct snap *sn, int64_t id)
{
	int lo = 0, hi = sn->in.nteams;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (sn->trow[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < sn->in.nteams && sn->trow[lo].id == id ? lo : -1;
}

static enum sched_class class_of(const char *name)
{
	int c = sched_class_parse(name);

	return c < 0 ? SCHED_CLASS_NORMAL : (enum sched_class)c;
}

static void snap_free(struct snap *sn)
{
	for (int i = 0; i < sn->nest; i++)
		json_decref(sn->est[i].basis);
	ty_arena_free(sn->arena);
	memset(sn, 0, sizeof(*sn));
}

/*
 * Money budgets (docs/scheduling.md, "Budgets"): each team's amount and
 * its period's spend, read every cycle (running attempts accrue cost).
 */
static int load_budgets(struct snap *sn, struct sched *s, struct ty_err *err)
{
	struct sched_store_budget *b = NULL;
	int rc, n = 0;

	if ((rc = sched_store_budgets(&b, &n, s->term.pg, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		int t = team_index(sn, b[i].team);
		struct sched_team_in *ti;

		if (t < 0)
			continue; /* a team newer than this snapshot's */
		ti = &sn->teams[t];
		ti->has_budget = true;
		ti->budget = b[i].amount;
		ti->spent = b[i].spent;
		if (!(ti->budget_period = ty_arena_strdup(sn->arena, b[i].period)))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
	free(b);
	return rc;
}

/* The highest rate of the table: what a job costs at most per GPU-hour, wherever it lands. */
static double max_rate(const struct sched_rates *r)
{
	double m = 0;

	for (int i = 0; i < r->n; i++)
		if (r->v[i].per_gpu_hour > m)
			m = r->v[i].per_gpu_hour;
	return m;
}

/*
 * --cohort-reclaim-delay-seconds for the core; a cohort no team is in is
 * logged once (a typo would otherwise leave the default in force silently).
 */
static int load_cohort_delays(struct snap *sn, struct sched *s, struct ty_err *err)
{
	struct sched_cohort_in *v;
	int n = s->o.ncohort_delays;

	if (n == 0)
		return 0;
	if (!(v = snap_alloc(sn, (size_t)n, sizeof(*v))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int k = 0; k < n; k++) {
		struct sched_cohort_delay *d = &s->o.cohort_delays[k];
		bool known = false;

		v[k] = (struct sched_cohort_in){d->name, d->seconds};
		for (int t = 0; t < sn->in.nteams && !known; t++)
			known = sn->teams[t].cohort && !strcmp(sn->teams[t].cohort, d->name);
		if (!known && !d->warned)
			ty_warn("option 'cohort-reclaim-delay-seconds': no team is in cohort '%s'",
				d->name);
		d->warned = !known;
	}
	sn->in.cohorts = v;
	sn->in.ncohorts = n;
	return 0;
}

/* Teams from the mirror (mirror.c), usage brought forward to now. */
static int load_teams(struct snap *sn, struct sched *s, struct ty_err *err)
{
	const struct sched_mirror *m = &s->world.mirror;
	int rc, n = m->nteams;

	sn->teams = snap_alloc(sn, (size_t)n, sizeof(*sn->teams));
	sn->trow = snap_alloc(sn, (size_t)n, sizeof(*sn->trow));
	sn->usage = snap_alloc(sn, (size_t)n, sizeof(*sn->usage));
	if (!sn->teams || !sn->trow || !sn->usage)
		return ty_err_set(err, TY_ENOMEM, NULL);
	/* strings are borrowed from the mirror, which changes only between cycles */
	for (int i = 0; i < n; i++) {
		const struct sched_mteam *mt = &m->teams[i];
		struct sched_team_in *t = &sn->teams[i];
		struct team_row *r = &sn->trow[i];

		r->id = mt->id;
		t->name = mt->name;
		t->nominal_gpus = mt->nominal;
		t->borrowing_limit = mt->borrowing_limit;
		t->lending_limit = mt->lending_limit;
		t->cohort = mt->cohort;
		t->weight = mt->weight;
		t->max_cpus = mt->max_cpus;
		t->max_memory_mb = mt->max_memory_mb;
		r->have_row = mt->have_row;
		sn->usage[i].team = r->id;
		sn->usage[i].decayed = mt->decayed;
		sn->usage[i].since_ms = r->since_ms = mt->since_ms;
		r->fair_share = mt->fair_share;
		r->used = mt->used;
		r->borrowed = mt->borrowed;
		r->lent = mt->lent;
		r->pending = mt->pending;
	}
	sn->in.teams = sn->teams;
	sn->in.nteams = n;
	if ((rc = load_cohort_delays(sn, s, err)))
		return rc;
	if ((rc = sched_usage_advance(sn->usage, n, s->term.pg, &s->world.mirror,
				      s->o.usage_half_life_s, sn->in.now_ms, err)))
		return rc;
	for (int i = 0; i < n; i++)
		sn->teams[i].usage = sn->usage[i].decayed;
	return load_budgets(sn, s, err);
}

/* Nodes not lost and the ports held on them, from the mirror. */
static int load_nodes(struct snap *sn, struct sched *s, struct ty_err *err)
{
	const struct sched_mirror *m = &s->world.mirror;
	int *ports = NULL;
	int n = m->nnodes;

	sn->nodes = snap_alloc(sn, (size_t)n, sizeof(*sn->nodes));
	sn->addr = snap_alloc(sn, (size_t)n, sizeof(*sn->addr));
	if (!sn->nodes || !sn->addr)
		return ty_err_set(err, TY_ENOMEM, NULL);
	/* sorted by id with strcmp, as node_index() searches */
	for (int i = 0; i < n; i++) {
		const struct sched_mnode *mn = &m->nodes[i];
		struct sched_node_in *nd = &sn->nodes[i];

		nd->id = mn->id;
		sn->addr[i] = mn->addr;
		nd->gpus = mn->gpus;
		nd->schedulable = mn->ready;
		nd->spot = mn->spot;
		nd->zone = mn->zone;
		nd->rack = mn->rack;
		nd->block = mn->block;
		nd->cpus = mn->cpus;
		nd->memory_mb = mn->memory_mb;
	}
	sn->in.nodes = sn->nodes;
	sn->in.nnodes = n;
	/* the mirror's ports are sorted by node: each node's are contiguous */
	if (!(ports = snap_alloc(sn, (size_t)m->nports, sizeof(*ports))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < m->nports; i++) {
		int at = node_index(sn, m->ports[i].node);

		ports[i] = m->ports[i].port;
		if (at < 0)
			continue;
		if (!sn->nodes[at].ports)
			sn->nodes[at].ports = &ports[i];
		sn->nodes[at].nports++;
	}
	return 0;
}

/* Gangs holding GPUs, from the mirror's live allocations. */
static int load_running(struct snap *sn, struct sched *s, struct ty_err *err)
{
	const struct sched_mirror *m = &s->world.mirror;
	int *node = NULL, n = m->nallocs, g = -1;
	uint64_t *gpus = NULL;

	sn->running = snap_alloc(sn, (size_t)n, sizeof(*sn->running));
	sn->running_attempt = snap_alloc(sn, (size_t)n, sizeof(*sn->running_attempt));
	node = snap_alloc(sn, (size_t)n, sizeof(*node));
	gpus = snap_alloc(sn, (size_t)n, sizeof(*gpus));
	if (!sn->running || !sn->running_attempt || !node || !gpus)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		const struct sched_malloc *a = &m->allocs[i];
		int at = node_index(sn, a->node);
		struct sched_running_in *r;
		size_t k;

		if (g < 0 || sn->running[g].job != a->job || sn->running_attempt[g] != a->attempt) {
			int team = team_index(sn, a->team_id);

			if (team < 0)
				continue; /* a team newer than this snapshot's */
			r = &sn->running[++g];
			sn->running_attempt[g] = a->attempt;
			r->job = a->job;
			r->team = team;
			r->cls = class_of(a->cls);
			r->priority = a->priority;
			r->start_ms = a->start_ms;
			/* work since the newest verified checkpoint (or the start) is at stake */
			r->checkpoint_ms = a->checkpoint_ms > a->start_ms ? a->checkpoint_ms
									  : a->start_ms;
			r->min_runtime_s = a->min_runtime_s;
			r->end_by_ms = r->start_ms + a->max_runtime_s * 1000;
			r->preemptible = a->preemptible;
			r->preempting = a->preempting;
			r->preempted_for = a->preempted_for;
			r->cpus_per_node = a->cpus_per_node;
			r->memory_mb_per_node = a->memory_mb_per_node;
			r->node = &node[i];
			r->gpus = &gpus[i];
		}
		r = &sn->running[g];
		if (at < 0)
			continue; /* a lost node's: its GPUs are nobody's to place */
		/* rows of one gang are contiguous: its slice starts at its first row, k <= i */
		k = (size_t)(r->node - node) + (size_t)r->nnodes;
		node[k] = at;
		gpus[k] = a->mask;
		sn->nodes[at].busy |= gpus[k];
		r->nnodes++;
	}
	sn->in.running = sn->running;
	/* a gang whose every node is gone holds nothing the core could use */
	n = 0;
	for (int i = 0; i <= g; i++)
		if (sn->running[i].nnodes > 0) {
			sn->running_attempt[n] = sn->running_attempt[i];
			sn->running[n++] = sn->running[i];
		}
	sn->in.nrunning = n;
	return 0;
}

/* The indices of the snapshot's nodes among "a,b,c" (nodes not in it are left out). */
static int excluded_nodes(struct sched_pending_in *p, struct snap *sn, const char *list)
{
	int n = 1, k = 0;
	int *v;

	for (const char *c = list; *c; c++)
		n += *c == ',';
	if (!(v = snap_alloc(sn, (size_t)n, sizeof(*v))))
		return TY_ENOMEM;
	for (const char *c = list; *c;) {
		const char *end = strchr(c, ',');
		size_t len = end ? (size_t)(end - c) : strlen(c);
		char id[PROTO_NODE_ID_MAX + 1];
		int at;

		if (len < sizeof(id)) {
			memcpy(id, c, len);
			id[len] = '\0';
			if ((at = node_index(sn, id)) >= 0)
				v[k++] = at;
		}
		c += len + (end != NULL);
	}
	p->exclude = v;
	p->nexclude = k;
	return 0;
}

/* A sweep with max_concurrent: its trials running now and admitted this cycle. */
struct sweep_run {
	int64_t id;
	int max, active, admitted;
};

/*
 * The sweeps of pending trials that have max_concurrent, with how many of
 * their trials run (or stop) now; *out NULL when there are none (the usual
 * case costs no query).
 */
static int load_sweeps(struct sweep_run **out, int *nout, struct snap *sn, struct sched *s,
		       struct ty_err *err)
{
	struct sweep_run *v = NULL;
	int64_t *ids = NULL;
	int *active = NULL;
	int n = 0, rc = 0;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < s->world.queue.n; i++) {
		const struct sched_qjob *q = &s->world.queue.v[i];
		bool seen = false;

		if (!q->sweep_id || q->sweep_max <= 0)
			continue;
		for (int k = 0; k < n && !seen; k++)
			seen = v[k].id == q->sweep_id;
		if (seen)
			continue;
		if (!v && (!(v = snap_alloc(sn, (size_t)s->world.queue.n, sizeof(*v))) ||
			   !(ids = snap_alloc(sn, (size_t)s->world.queue.n, sizeof(*ids))) ||
			   !(active = snap_alloc(sn, (size_t)s->world.queue.n, sizeof(*active)))))
			return ty_err_set(err, TY_ENOMEM, NULL);
		v[n] = (struct sweep_run){.id = q->sweep_id, .max = q->sweep_max};
		ids[n++] = q->sweep_id;
	}
	if (n == 0)
		return 0;
	if ((rc = sched_store_sweeps_active(active, s->term.pg, ids, n, err)))
		return rc;
	for (int k = 0; k < n; k++)
		v[k].active = active[k];
	*out = v;
	*nout = n;
	return 0;
}

/*
 * Whether pending trial q must wait for its sweep's max_concurrent; if so
 * *why says so (arena). Trials are admitted in id order (trial order) up to
 * the free slots; the core may place fewer.
 */
static bool sweep_full(const char **why, struct snap *sn, struct sweep_run *v, int n,
		       const struct sched_qjob *q)
{
	for (int k = 0; k < n; k++) {
		if (v[k].id != q->sweep_id)
			continue;
		if (v[k].active + v[k].admitted < v[k].max) {
			v[k].admitted++;
			return false;
		}
		*why = ty_arena_printf(sn->arena,
				       "waiting for a trial of sweep %lld to end: it runs its "
				       "max_concurrent %d trials",
				       (long long)q->sweep_id, v[k].max);
		return true;
	}
	return false;
}

/* q as the core's pending job of team (an index), its cost bound at rate per GPU-hour. */
static void pending_of(struct sched_pending_in *p, const struct sched_qjob *q, int team,
		       double rate)
{
	int topo = sched_topo_parse(q->required[0] ? q->required : NULL);

	memset(p, 0, sizeof(*p));
	p->job = q->id;
	p->team = team;
	p->cls = class_of(q->cls);
	p->priority = q->priority;
	p->submit_ms = q->submit_ms;
	p->nodes = q->nodes;
	p->gpus_per_node = q->gpus_per_node;
	p->cpus_per_node = q->cpus_per_node;
	p->memory_mb_per_node = q->memory_mb_per_node;
	p->per_node = q->per_node;
	p->required = topo < 0 ? SCHED_TOPO_NONE : (enum sched_topo)topo;
	p->min_runtime_s = q->min_runtime_s;
	p->max_runtime_s = q->max_runtime_s;
	p->not_before_ms = q->not_before_ms;
	p->last_failure = q->last_failure;
	p->spot = (enum sched_spot_rule)q->spot_rule;
	p->spot_preemptions = q->spot_preemptions;
	p->spot_max_preemptions = q->spot_max;
	/* max_runtime_seconds is always enforced (its default too): a true bound */
	p->max_cost =
	    (double)q->nodes * q->gpus_per_node * (double)q->max_runtime_s / 3600.0 * rate;
	p->expedited = q->expedited;
}

/* Pending jobs from the mirror (queue.c), refreshed first. */
static int load_pending(struct snap *sn, struct sched *s, struct ty_err *err)
{
	int rc, n, np = 0, nsweeps = 0;
	struct sweep_run *sweeps = NULL;
	double rate = max_rate(&s->o.rates);

	if ((rc = sched_queue_refresh(&s->world, s->term.pg, err)) ||
	    (rc = load_sweeps(&sweeps, &nsweeps, sn, s, err)))
		return rc;
	n = s->world.queue.n;
	sn->pending = snap_alloc(sn, (size_t)n, sizeof(*sn->pending));
	sn->prow = snap_alloc(sn, (size_t)n, sizeof(*sn->prow));
	sn->held = snap_alloc(sn, (size_t)n, sizeof(*sn->held));
	sn->held_team = snap_alloc(sn, (size_t)n, sizeof(*sn->held_team));
	sn->hrow = snap_alloc(sn, (size_t)n, sizeof(*sn->hrow));
	if (!sn->pending || !sn->prow || !sn->held || !sn->held_team || !sn->hrow)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		const struct sched_qjob *q = &s->world.queue.v[i];
		int team = team_index(sn, q->team_id);
		struct pend_row *row;
		const char *why = NULL;

		if (team < 0)
			continue; /* a team newer than this snapshot's */
		if (q->held || (q->sweep_max > 0 && sweep_full(&why, sn, sweeps, nsweeps, q))) {
			if (!q->held && !why)
				return ty_err_set(err, TY_ENOMEM, NULL);
			sn->held[sn->nheld] = q->id;
			sn->held_team[sn->nheld] = team;
			row = &sn->hrow[sn->nheld++];
			row->why = why;
		} else {
			struct sched_pending_in *p = &sn->pending[np];

			pending_of(p, q, team, rate);
			if (q->excluded && (rc = excluded_nodes(p, sn, q->excluded)))
				return ty_err_set(err, rc, NULL);
			row = &sn->prow[np++];
		}
		/* borrowed from the mirror, which changes only after the cycle's commit */
		row->q = i;
		row->reason = q->reason;
		row->position = q->position;
		row->reserved_ms = q->reserved_ms;
		row->attempt = q->attempt;
		row->written_ms = q->written_ms;
	}
	sn->in.pending = sn->pending;
	sn->in.npending = np;
	return 0;
}

static int snap_load(struct snap *sn, struct sched *s, struct ty_err *err)
{
	int rc;

	memset(sn, 0, sizeof(*sn));
	if (!(sn->arena = ty_arena_new()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	/* one clock for the whole cycle: the database's */
	if ((rc = sched_store_now_ms(&sn->in.now_ms, s->term.pg, err)))
		goto out;
	sched_config_default(&sn->in.cfg);
	sn->in.cfg.half_life_s = s->o.usage_half_life_s;
	for (int c = 0; c < SCHED_NCLASSES; c++)
		sn->in.cfg.class_min_runtime_s[c] = s->o.min_runtime_s[c];
	sn->in.cfg.port_lo = s->o.port_lo;
	sn->in.cfg.port_hi = s->o.port_hi;
	sn->in.cfg.stop_allowance_s = s->o.preemption_stop_seconds;
	sn->in.cfg.reclaim_delay_s = s->o.reclaim_delay_s;
	if ((rc = sched_mirror_refresh(s, err)) || (rc = load_teams(sn, s, err)) || (rc = load_nodes(sn, s, err)) ||
	    (rc = load_running(sn, s, err)) || (rc = load_pending(sn, s, err)))
		goto out;
out:
	if (rc)
		snap_free(sn);
	return rc;
}

/* "{0,1,2}" of one node's GPUs (an integer[] literal). */
static int gpu_list(struct ty_buf *b, const int *gpus, int n)
{
	ty_buf_reset(b);
	ty_buf_puts(b, "{");
	for (int k = 0; k < n; k++)
		ty_buf_printf(b, "%s%d", k ? "," : "", gpus[k]);
	ty_buf_puts(b, "}");
	return b->oom ? TY_ENOMEM : 0;
}

/*
 * An integer field of a job spec (obj NULL: top level), the table's default
 * when absent (specs stored before the field existed: proto/job_spec.c).
 */
static int64_t spec_int(const json_t *spec, const char *obj, const char *key)
{
	const json_t *v = json_object_get(obj ? json_object_get(spec, obj) : spec, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v)
				  : (int64_t)proto_spec_default_int(obj, key);
}

/* A string field of a job spec, the table's default when absent. */
static const char *spec_str(const json_t *spec, const char *obj, const char *key)
{
	const char *v = json_string_value(json_object_get(obj ? json_object_get(spec, obj) : spec, key));

	return v ? v : proto_spec_default_str(obj, key);
}

/*
 * The attempt's part of the launch (proto/launch.h) of placement pl of the
 * job with spec, run as uid by team, with the attempt's metrics token.
 */
static json_t *common_of(const struct sched *s, const struct snap *sn,
			 const struct sched_placement *pl, const json_t *spec, int64_t uid,
			 const struct sched_store_job *row, const char *token)
{
	const char *team = row->team;
	const json_t *command = json_object_get(spec, "command"), *res = json_object_get(spec, "resources");
	const json_t *cpus = json_object_get(res, "cpus_per_node"), *mem = json_object_get(res, "memory_mb_per_node");
	struct proto_launch l = {
	    .nnodes = pl->nnodes,
	    .world_size = pl->world_size,
	    .local_world_size = pl->local_ranks,
	    .master_addr = (char *)sn->addr[pl->node[0]],
	    .master_port = pl->master_port,
	    .env = json_is_object(json_object_get(spec, "env")) ? json_object_get(spec, "env") : NULL,
	    .mode = proto_launch_mode_parse(spec_str(spec, NULL, "launch")),
	    .max_runtime_ms = spec_int(spec, NULL, "max_runtime_seconds") * 1000,
	    .kill_grace_ms = (int64_t)s->o.kill_grace_seconds * 1000,
	    .hang_timeout_ms = spec_int(spec, NULL, "hang_timeout_seconds") * 1000,
	    .start_timeout_ms = spec_int(spec, NULL, "start_timeout_seconds") * 1000,
	    .checkpoint_keep = (int)spec_int(spec, "checkpoint", "keep"),
	    .checkpoint_keep_every = (int)spec_int(spec, "checkpoint", "keep_every"),
	    .checkpoint_tier = json_is_true(json_object_get(json_object_get(spec, "checkpoint"), "tier")),
	    .checkpoint_signal = proto_ckpt_signal_parse(spec_str(spec, "checkpoint", "signal")),
	    .preflight = json_is_true(json_object_get(spec, "preflight")),
	    /* the container: the team's uid, the job's limits per node, its image */
	    .uid = uid,
	    .gid = uid,
	    /* a spec from before the limits existed has none: not limited (0) */
	    .cpus = json_is_integer(cpus) ? (int)json_integer_value(cpus) : 0,
	    .memory_mb = json_is_integer(mem) ? (int64_t)json_integer_value(mem) : 0,
	    .image = (char *)json_string_value(json_object_get(spec, "image")),
	};
	size_t n = json_array_size(command);
	const char **argv = calloc(n + 1, sizeof(*argv));
	json_t *out;

	if (!argv)
		return NULL;
	for (size_t i = 0; i < n; i++)
		argv[i] = json_string_value(json_array_get(command, i));
	l.command = (char **)argv;
	if (l.mode == PROTO_LAUNCH_MODE_COUNT)
		l.mode = PROTO_LAUNCH_PER_GPU;
	snprintf(l.metrics_token, sizeof(l.metrics_token), "%s", token);
	/* a label of the node's GPU series (executor/telemetry.c) */
	snprintf(l.team, sizeof(l.team), "%s", team);
	/* every node resumes from the one checkpoint the table names (docs/dispatch.md, "Resume") */
	if (row->resume_step >= 0) {
		l.resume.set = true;
		l.resume.step = row->resume_step;
		snprintf(l.resume.digest, sizeof(l.resume.digest), "%s", row->resume_digest);
		l.resume.path = row->resume_path;
	}
	out = proto_launch_common(&l);
	free(argv);
	return out;
}

/* One gang being written: its locked job row and its launch's common part. */
struct gang {
	const struct sched_placement *pl;
	int64_t attempt;
	json_t *common;
	char *common_text;
	char token_hash[TY_SHA256_HEX_LEN + 1];
};

static void gang_clear(struct gang *g)
{
	json_decref(g->common);
	free(g->common_text);
	g->common = NULL;
	g->common_text = NULL;
}

/*
 * The launch data every node of the gang shares (proto_launch_data adds a
 * node's own), from the job's spec, with a fresh metrics token whose hash
 * goes to attempts. TY_EPARSE: the job's spec is not one we can launch.
 */
static int launch_common(struct gang *g, struct sched *s, const struct snap *sn,
			 const struct sched_store_job *row, struct ty_err *err)
{
	const struct sched_placement *pl = g->pl;
	json_t *spec = NULL, *common = NULL;
	char token[64];
	int64_t uid;
	int rc = 0;

	/* the team's own uid, else the base + its id (docs/security.md, "Job isolation") */
	uid = row->run_uid < 0 ? s->o.team_uid_base + row->team_id : row->run_uid;
	spec = json_loads(row->spec, 0, NULL);
	if (!json_is_object(spec)) {
		rc = ty_err_set(err, TY_EPARSE, "job %lld has no valid spec", (long long)pl->job);
		goto out;
	}
	if (!json_is_array(json_object_get(spec, "command"))) {
		rc = ty_err_set(err, TY_EPARSE, "job %lld has no command", (long long)pl->job);
		goto out;
	}
	/* the ranks' TRAINYARD_METRICS_TOKEN: this job's metrics, this attempt only */
	if ((rc = ty_token_new_prefixed(token, sizeof(token), "tym_"))) {
		rc = ty_err_set(err, rc, "cannot draw random bytes for a metrics token");
		goto out;
	}
	ty_sha256_hex(g->token_hash, token, strlen(token));
	common = common_of(s, sn, pl, spec, uid, row, token);
	if (!common || !(g->common_text = json_dumps(common, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	g->common = common;
	common = NULL;
out:
	json_decref(spec);
	json_decref(common);
	return rc;
}

static const struct sched_store_job *row_of(const struct sched_store_job *v, int n, int64_t job)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (v[mid].job == job)
			return &v[mid];
		if (v[mid].job < job)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* The gang's `scheduled` event. */
static int scheduled_event(struct sched *s, const struct snap *sn, const struct gang *g,
			   struct ty_err *err)
{
	const struct sched_placement *pl = g->pl;
	const char *master = sn->nodes[pl->node[0]].id;
	struct ty_buf names = TY_BUF_INIT;
	char text[512];
	json_t *edata;
	int rc;

	for (int r = 0; r < pl->nnodes; r++)
		ty_buf_printf(&names, "%s%s", r ? ", " : "", sn->nodes[pl->node[r]].id);
	snprintf(text, sizeof(text), "attempt %lld scheduled on %s: %d rank%s, master %s:%d",
		 (long long)g->attempt, names.data ? names.data : "", pl->world_size,
		 pl->world_size == 1 ? "" : "s", master, pl->master_port);
	edata = json_pack("{s:I, s:i, s:s, s:i}", "attempt", (json_int_t)g->attempt, "world_size",
			  pl->world_size, "master_node", master, "master_port", pl->master_port);
	rc = sched_job_event(s, pl->job, "scheduled", "scheduled", text, edata, err);
	json_decref(edata);
	ty_buf_free(&names);
	return rc;
}

/*
 * Write n placements inside the cycle's transaction, set-based: a fixed
 * number of statements whatever n (store/placements.c), launches and events
 * through the store's buffers. A job no longer placeable (cancelled, placed
 * meanwhile, deleted) is left out; one whose spec cannot be launched is
 * left out with a warning. *placed: the gangs written. Any failed statement
 * fails the whole set (the caller rolls it back).
 */
static int place_set(int *placed, struct sched *s, const struct snap *sn,
		     const struct sched_placement *const *pls, int n, struct ty_err *err)
{
	struct sched_store_job *rows = NULL;
	struct sched_store_boot *boots = NULL;
	struct sched_store_attempt *att = NULL;
	struct sched_store_alloc *al = NULL;
	struct gang *g = NULL;
	int64_t *ids = NULL, *attempts = NULL;
	const char **nodes = NULL;
	char **gpus_text = NULL;
	struct ty_buf gb = TY_BUF_INIT;
	json_t *data = NULL;
	int nrows = 0, nboots = 0, ng = 0, nnodes = 0, nal = 0, rc;

	*placed = 0;
	if (!(ids = calloc((size_t)n, sizeof(*ids))) || !(g = calloc((size_t)n, sizeof(*g)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		ids[i] = pls[i]->job;
		nnodes += pls[i]->nnodes;
	}
	if ((rc = sched_store_jobs_lock(&rows, &nrows, s->term.pg, ids, n, err)))
		goto out;
	for (int i = 0; i < n; i++) {
		const struct sched_store_job *row = row_of(rows, nrows, pls[i]->job);
		struct ty_err gerr = {0};

		if (!row)
			continue; /* nothing to do */
		g[ng] = (struct gang){.pl = pls[i], .attempt = row->attempt + 1};
		if ((rc = launch_common(&g[ng], s, sn, row, &gerr))) {
			gang_clear(&g[ng]);
			if (rc == TY_ENOMEM) {
				rc = ty_err_set(err, rc, "%s", gerr.msg);
				goto out;
			}
			ty_warn("cannot place job %lld: %s", (long long)pls[i]->job, gerr.msg);
			rc = 0;
			continue;
		}
		ng++;
	}
	if (ng == 0)
		goto out;
	if (!(nodes = calloc((size_t)nnodes, sizeof(*nodes))) ||
	    !(al = calloc((size_t)nnodes, sizeof(*al))) ||
	    !(gpus_text = calloc((size_t)nnodes, sizeof(*gpus_text))) ||
	    !(att = calloc((size_t)ng, sizeof(*att))) ||
	    !(attempts = calloc((size_t)ng, sizeof(*attempts)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	nnodes = 0;
	for (int i = 0; i < ng; i++)
		for (int r = 0; r < g[i].pl->nnodes; r++)
			nodes[nnodes++] = sn->nodes[g[i].pl->node[r]].id;
	/* the launch names the node's boot: a later boot must not run it */
	if ((rc = sched_store_boots(&boots, &nboots, s->term.pg, nodes, nnodes, err)))
		goto out;
	for (int i = 0; i < ng; i++) {
		const struct sched_placement *pl = g[i].pl;

		ids[i] = pl->job;
		attempts[i] = g[i].attempt;
		att[i] = (struct sched_store_attempt){
		    .job = pl->job,
		    .attempt = g[i].attempt,
		    .master_node = sn->nodes[pl->node[0]].id,
		    .master_addr = sn->addr[pl->node[0]],
		    .master_port = pl->master_port,
		    .nnodes = pl->nnodes,
		    .world_size = pl->world_size,
		    .launch = g[i].common_text,
		    .token_sha256 = g[i].token_hash,
		};
		for (int r = 0; r < pl->nnodes; r++) {
			const char *node = sn->nodes[pl->node[r]].id;
			const char *boot = sched_store_boot_of(boots, nboots, node);
			int first = r * pl->local_ranks;

			const int *gl = pl->gpus + (size_t)r * (size_t)pl->gpus_per_node;

			if (gpu_list(&gb, gl, pl->gpus_per_node) ||
			    !(gpus_text[nal] = strdup(gb.data))) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			al[nal] = (struct sched_store_alloc){
			    .job = pl->job,
			    .attempt = g[i].attempt,
			    .node = node,
			    .node_rank = r,
			    .first_rank = first,
			    .local_ranks = pl->local_ranks,
			    .gpus = gpus_text[nal],
			};
			nal++;
			/* no boot: the node is gone, and the allocation's insert fails */
			data = proto_launch_data(g[i].common, &(struct proto_launch_node){
								  .node_rank = r,
								  .first_rank = first,
								  .gpus = gl,
								  .ngpus = pl->gpus_per_node,
								  .boot_id = boot ? boot : "",
							      });
			if (!data) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			if ((rc = sched_outbox_add(s, PROTO_LAUNCH, node, pl->job, g[i].attempt,
						   data, err)))
				goto out;
			json_decref(data);
			data = NULL;
		}
	}
	if ((rc = sched_store_attempts_add(&s->term, att, ng, err)) ||
	    (rc = sched_store_allocs_add(s->term.pg, al, nal, err)) ||
	    (rc = sched_store_jobs_scheduled(s->term.pg, ids, attempts, ng, err)))
		goto out;
	for (int i = 0; i < ng; i++)
		if ((rc = scheduled_event(s, sn, &g[i], err)))
			goto out;
	*placed = ng;
out:
	for (int i = 0; g && i < ng; i++)
		gang_clear(&g[i]);
	for (int i = 0; gpus_text && i < nal; i++)
		free(gpus_text[i]);
	sched_store_jobs_free(rows, nrows);
	sched_store_boots_free(boots, nboots);
	json_decref(data);
	ty_buf_free(&gb);
	free(g);
	free(ids);
	free(attempts);
	free(nodes);
	free(gpus_text);
	free(att);
	free(al);
	return rc;
}

/*
 * Stop every active job whose cancel (or stop) was requested; end pending
 * ones at once, as `stopped` when stop_requested, else `cancelled`.
 */
static int cancel_pass(struct sched *s, struct ty_err *err)
{
	struct sched_store_cancel *v = NULL;
	int rc, n = 0;

	if ((rc = sched_store_cancels(&v, &n, s->term.pg, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		int64_t job = v[i].job, attempt = v[i].attempt;
		const char *state = v[i].state;
		char text[256];
		int kills = 0;

		if ((rc = sched_tx_begin(&s->term, err)))
			break;
		if (!strcmp(state, "pending")) {
			const char *to;

			rc = sched_store_job_cancel_pending(&to, s->term.pg, job, err);
			if (!rc && to)
				rc = sched_job_event(s, job, to, to,
						     !strcmp(to, "stopped") ? "stopped while pending"
									    : "cancelled while pending",
						     NULL, err);
		} else {
			bool moved = false;

			rc = sched_store_attempt_stopping(&moved, s->term.pg, job, attempt, err);
			if (!rc && moved) {
				json_t *data = json_pack("{s:I}", "attempt", (json_int_t)attempt);

				if (!(rc = sched_kill_nodes(&kills, s, job, attempt, "cancel", NULL,
							    err))) {
					snprintf(text, sizeof(text),
						 "%s requested: stopping attempt %lld (kill sent to "
						 "%d node%s)",
						 v[i].stop ? "stop" : "cancel", (long long)attempt,
						 kills, kills == 1 ? "" : "s");
					rc = sched_job_event(s, job, "stopping", state, text, data,
							     err);
				}
				json_decref(data);
				if (!rc)
					rc = sched_settle_attempt(s, job, attempt, err);
			}
		}
		if (rc)
			ty_pg_rollback(s->term.pg);
		else if (!(rc = sched_tx_commit(&s->term, err)) && kills > 0)
			SCHED_FAULT(SCHED_FAULT_CANCEL_AFTER_COMMIT);
	}
	free(v);
	return rc;
}

/* ---- applying the decisions ---- */

static bool fatal(int rc)
{
	return rc == TY_EFENCED || rc == TY_EUNAVAIL || rc == TY_ENOMEM;
}

/*
 * Run one decision under a savepoint: one job's trouble (a raced port, a
 * spec that does not parse) must not undo the others.
 */
static int savepoint(struct sched *s, struct sched_store_mark mark, const char *what, int64_t job,
		     int rc, const struct ty_err *derr, struct ty_err *err)
{
	if (rc && fatal(rc))
		return ty_err_set(err, rc, "%s", derr->msg);
	if (rc) {
		ty_warn("cannot %s job %lld: %s", what, (long long)job, derr->msg);
		/* with the events and outbox rows buffered since */
		return sched_store_savepoint_rollback(s->term.pg, &s->term.store,
						      SCHED_SAVEPOINT_DECISION, mark, err);
	}
	return sched_store_savepoint_release(s->term.pg, SCHED_SAVEPOINT_DECISION, err);
}

/*
 * All of the cycle's placements set-based, under one savepoint; should that
 * fail (a raced port, a node gone), one at a time, each under its own, so
 * that one gang's trouble does not undo the others.
 */
static int apply_placements(int *placed, struct sched *s, const struct snap *sn,
			    const struct sched_decisions *d, struct ty_err *err)
{
	const struct sched_placement **all = NULL;
	struct sched_store_mark mark;
	struct ty_err derr = {0};
	int rc = 0;

	*placed = 0;
	if (d->nplacements == 0)
		return 0;
	if (!(all = calloc((size_t)d->nplacements, sizeof(*all))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < d->nplacements; i++)
		all[i] = &d->placements[i];
	if ((rc = sched_store_savepoint(&mark, s->term.pg, &s->term.store,
					SCHED_SAVEPOINT_PLACEMENTS, err)))
		goto out;
	if (!(rc = place_set(placed, s, sn, all, d->nplacements, &derr))) {
		rc = sched_store_savepoint_release(s->term.pg, SCHED_SAVEPOINT_PLACEMENTS, err);
		goto out;
	}
	*placed = 0;
	if (fatal(rc)) {
		rc = ty_err_set(err, rc, "%s", derr.msg);
		goto out;
	}
	ty_warn("cannot write the cycle's %d placement%s at once, writing them one by one: %s",
		d->nplacements, d->nplacements == 1 ? "" : "s", derr.msg);
	if ((rc = sched_store_savepoint_rollback(s->term.pg, &s->term.store,
						 SCHED_SAVEPOINT_PLACEMENTS, mark, err)))
		goto out;
	for (int i = 0; i < d->nplacements && !rc; i++) {
		int ok = 0;

		ty_err_clear(&derr);
		if ((rc = sched_store_savepoint(&mark, s->term.pg, &s->term.store,
						SCHED_SAVEPOINT_DECISION, err)))
			break;
		rc = savepoint(s, mark, "place", all[i]->job,
			       place_set(&ok, s, sn, &all[i], 1, &derr), &derr, err);
		*placed += ok;
	}
out:
	free(all);
	return rc;
}

static int apply_preemptions(struct sched *s, const struct snap *sn,
			     const struct sched_decisions *d, struct ty_err *err)
{
	int rc = 0;

	for (int i = 0; i < d->npreemptions && !rc; i++) {
		const struct sched_preemption *p = &d->preemptions[i];
		const struct sched_pending_in *for_job = &sn->pending[p->pending];
		const char *team = sn->teams[for_job->team].name;
		int64_t attempt = sn->running_attempt[p->running];
		struct sched_store_mark mark;
		struct ty_err derr = {0};
		char why[REASON_MAX];
		bool started = false;

		if (p->why == SCHED_PREEMPT_CLASS)
			snprintf(why, sizeof(why),
				 "attempt %lld preempted to place job %lld (a %s priority job of "
				 "team %s)",
				 (long long)attempt, (long long)p->for_job,
				 sched_class_name(for_job->cls), team);
		else
			snprintf(why, sizeof(why),
				 "attempt %lld preempted to place job %lld (team %s reclaiming its "
				 "nominal quota)",
				 (long long)attempt, (long long)p->for_job, team);
		if ((rc = sched_store_savepoint(&mark, s->term.pg, &s->term.store,
						SCHED_SAVEPOINT_DECISION, err)))
			break;
		rc = savepoint(
		    s, mark, "preempt", p->victim,
		    sched_preempt(&started, s, p->victim, attempt, p->for_job, why, &derr), &derr,
		    err);
	}
	return rc;
}

/*
 * A reservation time as people read it: "14:02 UTC", or with the date when
 * not today; with seconds ("14:02:10 UTC") for short waits such as a backoff.
 */
static void when_text(char *buf, size_t n, int64_t at_ms, int64_t now_ms, bool seconds)
{
	time_t at = (time_t)((at_ms + (seconds ? 999 : 0)) / 1000), now = (time_t)(now_ms / 1000);
	struct tm a, b;

	gmtime_r(&at, &a);
	gmtime_r(&now, &b);
	if (a.tm_year == b.tm_year && a.tm_yday == b.tm_yday)
		strftime(buf, n, seconds ? "%H:%M:%S UTC" : "%H:%M UTC", &a);
	else
		strftime(buf, n, seconds ? "%Y-%m-%d %H:%M:%S UTC" : "%Y-%m-%d %H:%M UTC", &a);
}

/* Whether h holds node for job; h is grouped by job in id order. */
static bool xheld_for(const struct sched_xhold *h, int nh, int64_t job, int node)
{
	int lo = 0, hi = nh;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (h[mid].job < job)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < nh && h[lo].job == job; lo++)
		if (h[lo].node == node)
			return true;
	return false;
}

bool sched_xhold_keeps_off(const struct sched_xhold *h, int nh, int k, int64_t job)
{
	return h[k].job != job && !xheld_for(h, nh, job, h[k].node);
}

/*
 * A job waiting for nodes while some that could hold it are held for
 * another job's expedited requeue: say so, and until when (the last).
 */
static void xhold_reason(char *reason, size_t n, const struct snap *sn, int i,
			 const struct sched_pending_out *o)
{
	const struct sched_pending_in *p = &sn->in.pending[i];
	int64_t until = 0, job = 0;
	int cnt = 0;
	size_t len = strlen(reason);
	char when[64];

	if (p->nexclude_held == 0 ||
	    (o->reason != SCHED_WAIT_NODES && o->reason != SCHED_WAIT_TOPOLOGY &&
	     o->reason != SCHED_WAIT_HEAD))
		return;
	for (int k = 0; k < sn->nxh; k++) {
		const struct sched_xhold *h = &sn->xh[k];

		if (!sched_xhold_keeps_off(sn->xh, sn->nxh, k, p->job) ||
		    sn->in.nodes[h->node].gpus < p->gpus_per_node)
			continue;
		job = cnt++ == 0 || job == h->job ? h->job : -1;
		if (h->until_ms > until)
			until = h->until_ms;
	}
	if (cnt == 0)
		return;
	when_text(when, sizeof(when), until, sn->in.now_ms, true);
	if (job > 0)
		snprintf(reason + len, n - len,
			 "; %d node%s held for job %lld's expedited requeue until %s", cnt,
			 cnt > 1 ? "s" : "", (long long)job, when);
	else
		snprintf(reason + len, n - len, "; %d nodes held for expedited requeues until %s",
			 cnt, when);
}

/* A queue row written this cycle, to be recorded in the mirror once committed. */
struct qchange {
	int q;
	const char *reason; /* the snapshot's arena */
	int position;
	int64_t reserved_ms;
	int64_t written_ms;
};

struct qchanges {
	struct qchange *v;
	int n;
};

/*
 * Positions and reasons up to QUEUE_EXACT are published exactly. Further
 * back a row is written again only once what it shows is QUEUE_REFRESH_MS
 * old (plus up to a minute, by job id, so that refreshes do not all fall
 * in one cycle), or when the job moved up to the first QUEUE_EXACT.
 * Otherwise every placement near the head rewrites every row behind it:
 * a position moves with each placement ahead, and a far-back reason names
 * the head job ("reserved for job 812 until 14:02") or counts free nodes.
 * With 14,000 pending jobs at 2,000 nodes that was 70-90 % of every cycle
 * (bench/dispatch), and the churn bloated the jobs table for every other
 * query.
 */
#define QUEUE_EXACT 1000
#define QUEUE_REFRESH_MS 60000

static bool far_back_fresh(const struct pend_row *was, int64_t job, int position,
			   int64_t now_ms)
{
	return was->position > QUEUE_EXACT && position > QUEUE_EXACT &&
	       now_ms - was->written_ms < QUEUE_REFRESH_MS + (job % 60) * 1000;
}

/* Whether reason (NULL: none) is a cannot-run one. */
static bool cannot_run(const char *reason)
{
	return reason && !strncmp(reason, PROTO_CANNOT_RUN, strlen(PROTO_CANNOT_RUN));
}

static int queue_row(struct sched_store_queue_row *rows, int *nrows, struct qchanges *ch,
		     struct snap *sn, int64_t job,
		     const struct pend_row *was, const char *reason, int position,
		     int64_t reserved_ms, int64_t now_ms)
{
	struct qchange *c = &ch->v[ch->n];

	/* a verdict that changed is written at once: its event is sent once */
	if (was->reason && was->reserved_ms == reserved_ms &&
	    cannot_run(was->reason) == cannot_run(reason) &&
	    ((was->position == position && !strcmp(was->reason, reason)) ||
	     far_back_fresh(was, job, position, now_ms)))
		return 0; /* unchanged, or far back and recent enough: no write */
	if (!(c->reason = ty_arena_strdup(sn->arena, reason)))
		return -1;
	c->q = was->q;
	c->position = position;
	c->reserved_ms = reserved_ms;
	c->written_ms = now_ms;
	ch->n++;
	rows[(*nrows)++] = (struct sched_store_queue_row){
	    .job = job, .reason = c->reason, .position = position, .reserved_ms = reserved_ms};
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_row(const void *a, const void *b)
{
	int64_t x = ((const struct sched_store_queue_row *)a)->job,
		y = ((const struct sched_store_queue_row *)b)->job;

	return (x > y) - (x < y);
}

/* Every declared node pool as the core takes it, in sn's arena (*n 0: none). */
static int read_pools(struct sched_pool_in **out, int *n, struct snap *sn, struct sched *s,
		      struct ty_err *err)
{
	struct sched_store_pool *sp = NULL;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = sched_store_node_pools(&sp, n, s->term.pg, err)) || *n == 0)
		goto out;
	if (!(*out = snap_alloc(sn, (size_t)*n, sizeof(**out)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < *n; i++) {
		const char *name = ty_arena_strdup(sn->arena, sp[i].name);

		if (!name) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		(*out)[i] = (struct sched_pool_in){name, sp[i].gpus, sp[i].cpus, sp[i].memory_mb,
						   sp[i].max_nodes};
	}
out:
	free(sp);
	if (rc)
		*n = 0;
	return rc;
}

/*
 * The cannot-run summary again with the declared node pools. Read only when
 * a job looks impossible without them, or no node is registered: most
 * cycles run no query for them.
 */
static int add_pools(struct sched_feasible **fe, struct snap *sn, struct sched *s,
		     struct ty_err *err)
{
	struct sched_pool_in *pin;
	struct sched_feasible *nf = NULL;
	int n, rc;

	if ((rc = read_pools(&pin, &n, sn, s, err)) || n == 0)
		return rc;
	if ((rc = sched_feasible_new(&nf, &sn->in, pin, n, err)))
		return rc;
	sched_feasible_free(*fe);
	*fe = nf;
	return 0;
}

/*
 * Pending reasons, queue positions (1-based) and the head job's
 * reservation, written only for jobs whose values changed; jobs that left
 * the queue since the last cycle (cancelled through the API) are cleared.
 * *now_queued gets the sorted ids of every job in the queue now.
 */
static int publish_queue(struct sched_ids *now_queued, struct qchanges *ch, struct sched *s,
			 struct snap *sn, const struct sched_decisions *d, struct ty_err *err)
{
	const struct sched_input *in = &sn->in;
	struct sched_store_queue_row *rows = NULL;
	int64_t *gone = NULL, mono = ty_mono_ms();
	char reason[REASON_MAX], when[64], pwhen[64];
	int rc = 0, n = 0, nrows = 0, ngone = 0, nnever = 0;
	struct sched_feasible *fe = NULL;
	int64_t *never = NULL; /* jobs that cannot run: their estimate says never */
	bool pools = false;

	memset(now_queued, 0, sizeof(*now_queued));
	ch->n = 0;
	/* without it (out of memory) the jobs just keep their waiting reasons */
	if (in->npending > 0 && sched_feasible_new(&fe, in, NULL, 0, err))
		ty_err_clear(err);
	if (fe && in->nnodes == 0) {
		pools = true;
		if ((rc = add_pools(&fe, sn, s, err)))
			goto out;
	}
	if (!(ch->v = snap_alloc(sn, (size_t)(in->npending + sn->nheld), sizeof(*ch->v))) ||
	    !(rows = snap_alloc(sn, (size_t)(in->npending + sn->nheld + sn->nest),
				sizeof(*rows))) ||
	    !(gone = snap_alloc(sn, (size_t)s->world.queued.n, sizeof(*gone))) ||
	    !(never = snap_alloc(sn, (size_t)in->npending, sizeof(*never))))
		goto oom;
	if (in->npending + sn->nheld > 0 &&
	    !(now_queued->v = calloc((size_t)(in->npending + sn->nheld), sizeof(int64_t))))
		goto oom;
	now_queued->cap = in->npending + sn->nheld;
	for (int i = 0; i < in->npending; i++) {
		const struct sched_pending_out *o = &d->pending[i];
		int64_t resv = -1;

		if (o->reason == SCHED_PLACED)
			continue; /* its placement clears the queue fields */
		now_queued->v[n++] = in->pending[i].job;
		for (int r = 0; r < d->nreservations; r++)
			if (d->reservations[r].pending == i &&
			    d->reservations[r].kind == SCHED_RESV_HEAD)
				resv = d->reservations[r].start_ms;
		when_text(when, sizeof(when), o->at_ms, in->now_ms,
			  o->reason == SCHED_WAIT_BACKOFF);
		when_text(pwhen, sizeof(pwhen), o->protected_until_ms, in->now_ms, false);
		if (fe && !pools && sched_cannot_run(reason, sizeof(reason), fe, in, i)) {
			pools = true;
			if ((rc = add_pools(&fe, sn, s, err)))
				goto out;
		}
		if (fe && sched_cannot_run(reason, sizeof(reason), fe, in, i)) {
			never[nnever++] = in->pending[i].job;
			if (!cannot_run(sn->prow[i].reason) &&
			    (rc = sched_job_event(s, in->pending[i].job, PROTO_EVENT_UNSCHEDULABLE,
						  "pending", reason, NULL, err)))
				goto out;
		} else {
			sched_reason_format_at(reason, sizeof(reason), in, d, i, when, pwhen);
			xhold_reason(reason, sizeof(reason), sn, i, o);
			if (cannot_run(sn->prow[i].reason) &&
			    (rc = sched_job_event(s, in->pending[i].job, PROTO_EVENT_SCHEDULABLE,
						  "pending", reason, NULL, err)))
				goto out;
		}
		if (queue_row(rows, &nrows, ch, sn, in->pending[i].job, &sn->prow[i], reason,
			      o->position + 1, resv, mono))
			goto oom;
	}
	for (int i = 0; i < sn->nheld; i++) {
		if (sn->hrow[i].why)
			snprintf(reason, sizeof(reason), "%s", sn->hrow[i].why);
		else
			snprintf(reason, sizeof(reason),
				 "waiting for attempt %lld to stop on every node",
				 (long long)sn->hrow[i].attempt);
		now_queued->v[n++] = sn->held[i];
		if (queue_row(rows, &nrows, ch, sn, sn->held[i], &sn->hrow[i], reason, 0, -1, mono))
			goto oom;
	}
	now_queued->n = n;
	if (n > 0)
		qsort(now_queued->v, (size_t)n, sizeof(int64_t), cmp_i64);
	for (int i = 0; i < s->world.queued.n; i++)
		if (n == 0 || !bsearch(&s->world.queued.v[i], now_queued->v, (size_t)n,
				       sizeof(int64_t), cmp_i64))
			gone[ngone++] = s->world.queued.v[i];
	/*
	 * The estimates go out in the same statement (one lock order for all
	 * rows): on a queue row of the same job, or as an estimate-only row.
	 */
	if (sn->nest > 0) {
		int nq = nrows;

		if (nq > 0)
			qsort(rows, (size_t)nq, sizeof(*rows), cmp_row);
		if (nnever > 0)
			qsort(never, (size_t)nnever, sizeof(*never), cmp_i64);
		for (int k = 0; k < sn->nest; k++) {
			struct sched_store_queue_row *q =
			    nq > 0 ? bsearch(&sn->est[k], rows, (size_t)nq, sizeof(*rows), cmp_row)
				   : NULL;

			/* the simulation only sees it wait; the cycle knows it never starts */
			if (nnever > 0 && bsearch(&sn->est[k].job, never, (size_t)nnever,
						  sizeof(*never), cmp_i64)) {
				sn->est[k].est_ms = -1;
				if (json_object_clear(sn->est[k].basis) ||
				    json_object_set_new(sn->est[k].basis, "kind", json_string("never")))
					goto oom;
			}

			if (q) {
				q->estimate = true;
				q->est_ms = sn->est[k].est_ms;
				q->basis = sn->est[k].basis;
			} else {
				rows[nrows++] = sn->est[k];
			}
		}
	}
	if ((rc = sched_store_queue_publish(s->term.pg, rows, nrows, err)) ||
	    (rc = sched_store_queue_left(s->term.pg, gone, ngone, err)))
		goto out;
	if (nrows + ngone > 0)
		ty_debug("queue: %d job(s) with a new position or reason, %d left the queue", nrows,
			 ngone);
	goto out;
oom:
	rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	sched_feasible_free(fe);
	if (rc)
		sched_ids_free(now_queued);
	return rc;
}

/* Team i's numbers as this cycle decided them: what team_usage and its samples get. */
static struct sched_store_team_usage team_now(const struct snap *sn,
					      const struct sched_decisions *d, int i)
{
	const struct sched_team_out *t = &d->teams[i];
	int64_t pending = t->pending;

	for (int h = 0; h < sn->nheld; h++)
		pending += sn->held_team[h] == i;
	return (struct sched_store_team_usage){.team = sn->trow[i].id,
					       .decayed = sn->usage[i].decayed,
					       .fair_share = t->fairshare,
					       .used = t->used,
					       .borrowed = t->borrowed,
					       .lent = t->lent,
					       .pending = pending};
}

/*
 * Teams over time (docs/scheduling.md, "Team history"): every team's numbers
 * once per --team-sample-seconds, by the database's clock, in the cycle's
 * transaction (a standby, which runs no cycle, never writes); old samples
 * pruned at most once an hour, whether sampling is on or not. *sampled and
 * *pruned say what to record once the transaction committed.
 */
static int sample_teams(bool *sampled, bool *pruned, struct sched *s, const struct snap *sn,
			const struct sched_decisions *d, struct ty_err *err)
{
	const struct sched_input *in = &sn->in;
	struct sched_store_team_usage *rows = NULL;
	int64_t deleted;
	int rc, n = 0;

	*sampled = *pruned = false;
	if (in->now_ms - s->clock.last_team_prune >= TEAM_PRUNE_MS) {
		if ((rc = sched_store_team_samples_prune(&deleted, s->term.pg, in->now_ms,
							 s->o.team_sample_retention_d, err)))
			return rc;
		if (deleted > 0)
			ty_info("team samples: %lld older than %d days deleted", (long long)deleted,
				s->o.team_sample_retention_d);
		*pruned = true;
	}
	if (s->o.team_sample_s <= 0 ||
	    in->now_ms - s->clock.last_team_sample < (int64_t)s->o.team_sample_s * 1000)
		return 0;
	if (in->nteams > 0 && !(rows = calloc((size_t)in->nteams, sizeof(*rows))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < in->nteams && i < d->nteams; i++)
		rows[n++] = team_now(sn, d, i);
	rc = sched_store_team_samples_write(s->term.pg, rows, n, in->now_ms, s->o.team_sample_s,
					    err);
	free(rows);
	*sampled = !rc;
	return rc;
}

/*
 * team_usage: written for a team when what the API shows of it changed, or
 * when its decayed usage was last written USAGE_PERSIST_MS ago; the decayed
 * value is always written with the time it is as of.
 */
static int publish_teams(struct sched_store_team_usage **written, int *nwritten, struct sched *s,
			 const struct snap *sn, const struct sched_decisions *d,
			 struct ty_err *err)
{
	const struct sched_input *in = &sn->in;
	struct sched_store_team_usage *rows = NULL;
	int rc, n = 0;

	*written = NULL;
	*nwritten = 0;
	if (in->nteams > 0 && !(rows = calloc((size_t)in->nteams, sizeof(*rows))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < in->nteams && i < d->nteams; i++) {
		const struct team_row *was = &sn->trow[i];
		struct sched_store_team_usage u = team_now(sn, d, i);

		if (was->have_row && was->used == u.used && was->borrowed == u.borrowed &&
		    was->lent == u.lent && was->pending == u.pending &&
		    fabs(was->fair_share - u.fair_share) < FAIRSHARE_EPSILON &&
		    in->now_ms - was->since_ms < USAGE_PERSIST_MS)
			continue;
		rows[n++] = u;
	}
	if ((rc = sched_store_team_usage_write(s->term.pg, rows, n, in->now_ms, err))) {
		free(rows);
		return rc;
	}
	*written = rows; /* recorded in the mirror once committed */
	*nwritten = n;
	return 0;
}

/* Every decision of the cycle in one fenced transaction. */
/* The 80 % budget alerts of the teams at or above it (once per period: migration 0032). */
static int budget_alerts(struct sched *s, struct snap *sn, struct ty_err *err)
{
	int64_t *teams;
	double *spent;
	int n = 0, fired, rc;

	teams = snap_alloc(sn, (size_t)sn->in.nteams, sizeof(*teams));
	spent = snap_alloc(sn, (size_t)sn->in.nteams, sizeof(*spent));
	if (!teams || !spent)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < sn->in.nteams; i++) {
		const struct sched_team_in *t = &sn->teams[i];

		if (t->has_budget && t->budget > 0 && t->spent >= 0.8 * t->budget) {
			teams[n] = sn->trow[i].id;
			spent[n++] = t->spent;
		}
	}
	if ((rc = sched_store_budget_alerts(&fired, s->term.pg, teams, spent, n, err)))
		return rc;
	if (fired > 0)
		ty_info("budget: %d team%s reached 80 %% of their budget", fired,
			fired == 1 ? "" : "s");
	return 0;
}

/* ---- start-time estimates (core/estimate.c; docs/scheduling.md, "Start-time estimates") ---- */

/*
 * The open what-if requests (at most SCHED_WHAT_IF_PER_ESTIMATE) as asks
 * with their variants (a new array), and the declared node pools for their
 * cannot-run check (in sn's arena). A request of a team
 * newer than the snapshot waits for the next one. Clears the clock's
 * what_if flag unless more are left.
 */
static int what_if_asks(struct sched_what_if_ask **asks, int *nasks, struct sched_pool_in **pools,
			int *npools, struct snap *sn, struct sched *s, struct ty_err *err)
{
	struct sched_qjob *q = NULL;
	double rate = max_rate(&s->o.rates);
	int nq = 0, n, rc;

	if ((rc = sched_store_what_if_open(&q, &nq, s->term.pg, SCHED_WHAT_IF_PER_ESTIMATE + 1,
					   err)))
		return rc;
	s->clock.what_if = nq > SCHED_WHAT_IF_PER_ESTIMATE;
	n = nq > SCHED_WHAT_IF_PER_ESTIMATE ? SCHED_WHAT_IF_PER_ESTIMATE : nq;
	if (n > 0 && (rc = read_pools(pools, npools, sn, s, err)))
		goto out;
	rc = TY_ENOMEM;
	if (!(*asks = calloc((size_t)n + 1, sizeof(**asks))))
		goto out;
	for (int i = 0; i < n; i++) {
		int team = team_index(sn, q[i].team_id);
		struct sched_pending_in p;

		if (team < 0) {
			s->clock.what_if = true;
			continue;
		}
		pending_of(&p, &q[i], team, rate);
		p.last_failure = NULL; /* q's text is freed below; a request never failed */
		(*asks)[*nasks].id = q[i].id;
		(*asks)[*nasks].n = sched_what_if_variants((*asks)[*nasks].v, &p);
		(*nasks)++;
	}
	rc = 0;
out:
	sched_store_qjobs_free(q, nq);
	if (rc)
		ty_err_set(err, rc, NULL);
	return rc;
}

/*
 * Start an estimate over the cycle's snapshot in the side thread
 * (estimator.c), with the runtime history of the gangs and of the jobs it
 * estimates, read here. A failure costs the estimates only, never the cycle.
 */
static void estimate_start(struct snap *sn, struct sched *s, const struct sched_decisions *d)
{
	const struct sched_input *in = &sn->in;
	struct sched_estimate_in e = {0};
	struct ty_err err = {0};
	int64_t *ids, *secs, *run_end, *pend_rt;
	bool *run_hist, *pend_hist;
	struct sched_what_if_ask *asks = NULL;
	struct sched_pool_in *pools = NULL;
	int n = 0, nasks = 0, npools = 0, rc = TY_ENOMEM;

	e.cfg.max_jobs = ESTIMATE_JOBS;
	e.cfg.max_steps = ESTIMATE_STEPS;
	e.cfg.min_step_s = ESTIMATE_MIN_STEP_S;
	ids = snap_alloc(sn, (size_t)(in->nrunning + in->npending), sizeof(*ids));
	secs = snap_alloc(sn, (size_t)(in->nrunning + in->npending), sizeof(*secs));
	run_end = snap_alloc(sn, (size_t)in->nrunning, sizeof(*run_end));
	run_hist = snap_alloc(sn, (size_t)in->nrunning, sizeof(*run_hist));
	pend_rt = snap_alloc(sn, (size_t)in->npending, sizeof(*pend_rt));
	pend_hist = snap_alloc(sn, (size_t)in->npending, sizeof(*pend_hist));
	if (!ids || !secs || !run_end || !run_hist || !pend_rt || !pend_hist)
		goto out;
	/* the history of every gang and of the jobs the estimator looks at */
	for (int r = 0; r < in->nrunning; r++)
		ids[n++] = in->running[r].job;
	for (int q = 0, k = 0; q < d->npending && k < e.cfg.max_jobs; q++)
		if (d->pending[d->order[q]].reason != SCHED_PLACED) {
			ids[n++] = in->pending[d->order[q]].job;
			k++;
		}
	if (n > 0)
		qsort(ids, (size_t)n, sizeof(*ids), cmp_i64);
	if ((rc = sched_store_runtimes(secs, s->term.pg, ids, n, &err)))
		goto out;
	for (int r = 0; r < in->nrunning; r++) {
		int64_t *at = bsearch(&in->running[r].job, ids, (size_t)n, sizeof(*ids), cmp_i64);
		int64_t h = at ? secs[at - ids] : 0;

		if (h > 0) {
			run_end[r] = in->running[r].start_ms + h * 1000;
			run_hist[r] = true;
		}
	}
	for (int i = 0; i < in->npending; i++) {
		int64_t *at = bsearch(&in->pending[i].job, ids, (size_t)n, sizeof(*ids), cmp_i64);

		pend_rt[i] = at ? secs[at - ids] : 0;
		pend_hist[i] = pend_rt[i] > 0;
	}
	e.run_end_ms = run_end;
	e.run_history = run_hist;
	e.pend_runtime_s = pend_rt;
	e.pend_history = pend_hist;
	if (s->clock.what_if && (rc = what_if_asks(&asks, &nasks, &pools, &npools, sn, s, &err)))
		goto out;
	rc = sched_estimator_start(&s->world.est, in, &e, asks, nasks, pools, npools, &err);
out:
	free(asks);
	if (rc && nasks > 0)
		s->clock.what_if = true; /* asked again with the next estimate */
	if (rc)
		ty_warn("estimate: not started: %s", err.msg[0] ? err.msg : ty_code_desc(rc));
}

/*
 * Answer the what-if requests the finished estimator was given, each in its
 * own statement (not the cycle's transaction: a failed cycle keeps them).
 * One that cannot be answered is asked again with the next estimate.
 */
static void what_if_answer(struct sched *s, const struct sched_input *in)
{
	const struct sched_what_if_ask *asks;
	struct ty_err err = {0};
	int n = 0, rc;

	if ((rc = sched_estimator_what_ifs(&asks, &n, s->world.est, &err))) {
		ty_warn("what-if: %d request(s) not answered: %s", n,
			err.msg[0] ? err.msg : ty_code_desc(rc));
		s->clock.what_if = n > 0;
		return;
	}
	for (int k = 0; k < n; k++) {
		json_t *a = sched_what_if_answer(&asks[k], in->now_ms);
		char *text = a ? json_dumps(a, JSON_COMPACT) : NULL;

		ty_err_clear(&err);
		if (!text || sched_store_what_if_answer(s->term.pg, asks[k].id, text, &err)) {
			ty_warn("what-if: request %lld not answered: %s", (long long)asks[k].id,
				text ? err.msg : "out of memory");
			s->clock.what_if = true; /* asked again with the next estimate */
		}
		free(text);
		json_decref(a);
	}
}

/*
 * The finished estimate's rows, for apply() to publish with the cycle (a job
 * that left pending meanwhile is skipped there). Frees the estimator.
 */
static void estimate_collect(struct snap *sn, struct sched *s)
{
	const struct sched_estimates *out = NULL;
	const struct sched_input *ein = NULL;
	struct ty_err err = {0};
	int nest = 0, rc;

	rc = sched_estimator_result(&out, &ein, s->world.est, &err);
	what_if_answer(s, ein ? ein : &sn->in);
	if (rc)
		goto out;
	rc = TY_ENOMEM;
	if (!(sn->est = snap_alloc(sn, (size_t)ein->npending, sizeof(*sn->est))))
		goto out;
	for (int i = 0; i < ein->npending; i++) {
		const struct sched_estimate *x = &out->job[i];
		struct sched_store_queue_row *row = &sn->est[nest];

		if (x->kind == SCHED_EST_NOW)
			continue; /* placed: leaving pending clears it (migration 0035) */
		row->job = ein->pending[i].job;
		row->estimate_only = row->estimate = true;
		row->est_ms = x->kind == SCHED_EST_AT ? x->start_ms : -1;
		if (!(row->basis = sched_estimate_basis(x)))
			goto out;
		nest++;
	}
	if (nest > 0)
		qsort(sn->est, (size_t)nest, sizeof(*sn->est), cmp_row);
	ty_debug("estimate: %d job(s) in %d step(s), up to %lld s ahead", nest, out->steps,
		 (long long)((out->reached_ms - ein->now_ms) / 1000));
	rc = 0;
out:
	sn->nest = nest;
	if (rc)
		ty_warn("estimate: none published: %s", err.msg[0] ? err.msg : ty_code_desc(rc));
	sched_estimator_free(s->world.est);
	s->world.est = NULL;
}

static int apply(struct sched *s, struct snap *sn, const struct sched_decisions *d,
		 struct ty_err *err)
{
	struct sched_ids queued = {0};
	struct sched_store_team_usage *usage = NULL;
	struct qchanges ch = {0};
	int rc, placed = 0, nusage = 0;
	bool sampled = false, pruned = false;

	if ((rc = sched_tx_begin(&s->term, err))) {
		sched_mirror_stale(&s->world.mirror, "cycle not begun");
		return rc;
	}
	if ((rc = apply_placements(&placed, s, sn, d, err)) ||
	    (rc = apply_preemptions(s, sn, d, err)) ||
	    (rc = publish_queue(&queued, &ch, s, sn, d, err)) ||
	    (rc = publish_teams(&usage, &nusage, s, sn, d, err)) ||
	    (rc = sample_teams(&sampled, &pruned, s, sn, d, err)) ||
	    (rc = budget_alerts(s, sn, err))) {
		ty_pg_rollback(s->term.pg);
		sched_mirror_stale(&s->world.mirror, "cycle rolled back");
		goto out;
	}
	if (placed || d->npreemptions)
		SCHED_FAULT(SCHED_FAULT_CYCLE_BEFORE_COMMIT);
	if ((rc = sched_tx_commit(&s->term, err))) {
		sched_mirror_stale(&s->world.mirror, "cycle commit failed");
		goto out;
	}
	if (placed || d->npreemptions)
		SCHED_FAULT(SCHED_FAULT_CYCLE_AFTER_COMMIT);
	if (sampled)
		s->clock.last_team_sample = sn->in.now_ms;
	if (pruned)
		s->clock.last_team_prune = sn->in.now_ms;
	/* committed: the team_usage rows it wrote are what the mirror holds now */
	for (int i = 0; i < nusage; i++)
		sched_mirror_team_usage(&s->world.mirror, usage[i].team, usage[i].decayed,
					usage[i].fair_share, usage[i].used, usage[i].borrowed,
					usage[i].lent, usage[i].pending, sn->in.now_ms);
	sched_ids_free(&s->world.queued);
	s->world.queued = queued;
	memset(&queued, 0, sizeof(queued));
	/* the mirror holds what jobs holds now */
	for (int i = 0; i < ch.n; i++)
		if (sched_queue_set_reason(&s->world.queue, ch.v[i].q, ch.v[i].reason,
					   ch.v[i].position, ch.v[i].reserved_ms,
					   ch.v[i].written_ms))
			s->world.queue_stale = true; /* out of memory: read it all again */
	if (placed || d->npreemptions)
		ty_debug("cycle: placed %d of %d pending job(s), %d preemption(s)", placed,
			 sn->in.npending, d->npreemptions);
out:
	free(usage);
	sched_ids_free(&queued);
	return rc;
}

int sched_holds_of(const struct sched_holds *h, int64_t job, int *first)
{
	int lo = 0, hi = h->n, k;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (h->v[mid].job < job)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (k = lo; k < h->n && h->v[k].job == job; k++)
		;
	*first = lo;
	return k - lo;
}

/* Tell each pending job the nodes the last cycle held for it (held_nodes). */
static int holds_load(struct snap *sn, const struct sched *s, struct ty_err *err)
{
	const struct sched_holds *h = &s->world.holds;

	for (int i = 0; i < sn->in.npending && h->n > 0; i++) {
		struct sched_pending_in *p = &sn->pending[i];
		int lo, cnt = sched_holds_of(h, p->job, &lo), m = 0, *nodes;

		if (cnt == 0 || cnt != p->nodes)
			continue;
		if (!(nodes = snap_alloc(sn, (size_t)cnt, sizeof(*nodes))))
			return ty_err_set(err, TY_ENOMEM, NULL);
		for (int x = lo; x < lo + cnt; x++) {
			int at = node_index(sn, h->v[x].node);

			if (at < 0)
				break; /* a node gone: no hold */
			nodes[m++] = at;
		}
		if (m == cnt) {
			p->held_nodes = nodes;
			p->nheld = m;
		}
	}
	return 0;
}

static int cmp_hold(const void *a, const void *b)
{
	const struct sched_hold *x = a, *y = b;

	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return strcmp(x->node, y->node);
}

int sched_holds_keep(struct sched_holds *h, int64_t epoch, const struct sched_input *in,
		     const struct sched_decisions *d)
{
	size_t need = 0;

	h->n = 0;
	h->epoch = epoch;
	for (int r = 0; r < d->nreservations; r++)
		if (d->reservations[r].kind == SCHED_RESV_PREEMPTION)
			need += (size_t)d->reservations[r].nnodes;
	if (need > (size_t)h->cap) {
		size_t cap = h->cap > 0 ? (size_t)h->cap : 64;
		struct sched_hold *v;

		while (cap < need)
			cap *= 2;
		if (cap > INT32_MAX || !(v = realloc(h->v, cap * sizeof(*v))))
			return TY_ENOMEM;
		h->v = v;
		h->cap = (int)cap;
	}
	for (int r = 0; r < d->nreservations; r++) {
		const struct sched_reservation *rv = &d->reservations[r];
		bool fits = rv->kind == SCHED_RESV_PREEMPTION;

		for (int x = 0; x < rv->nnodes && fits; x++)
			fits = strlen(in->nodes[rv->node[x]].id) < sizeof(h->v[0].node);
		if (!fits)
			continue;
		for (int x = 0; x < rv->nnodes; x++) {
			h->v[h->n].job = rv->job;
			snprintf(h->v[h->n].node, sizeof(h->v[0].node), "%s",
				 in->nodes[rv->node[x]].id);
			h->n++;
		}
	}
	if (h->n)
		qsort(h->v, (size_t)h->n, sizeof(h->v[0]), cmp_hold);
	return 0;
}

void sched_holds_free(struct sched_holds *h)
{
	if (!h)
		return;
	free(h->v);
	h->v = NULL;
	h->n = h->cap = 0;
}

bool sched_hold_active(const struct sched_qjob *q, int64_t now_ms, int64_t window_s)
{
	return window_s > 0 && q->expedited && q->hold_nodes &&
	       now_ms < q->hold_from_ms + window_s * 1000;
}

int sched_xholds(struct sched_xhold **out, int *nout, const struct sched_qjob *q, int n,
		 const struct sched_input *in, int64_t window_s)
{
	struct sched_xhold *v = NULL;
	size_t need = 0;
	int k = 0;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < n; i++)
		if (sched_hold_active(&q[i], in->now_ms, window_s))
			for (const char *c = q[i].hold_nodes; c; c = strchr(c + 1, ','))
				need++;
	if (need == 0)
		return 0;
	if (!(v = calloc(need, sizeof(*v))))
		return TY_ENOMEM;
	for (int i = 0; i < n; i++) {
		if (!sched_hold_active(&q[i], in->now_ms, window_s))
			continue;
		for (const char *c = q[i].hold_nodes; *c;) {
			const char *end = strchr(c, ',');
			size_t len = end ? (size_t)(end - c) : strlen(c);
			char id[PROTO_NODE_ID_MAX + 1];
			int at;

			if (len < sizeof(id)) {
				memcpy(id, c, len);
				id[len] = '\0';
				/* a node gone from the snapshot holds nothing */
				if ((at = node_of_id(in, id)) >= 0)
					v[k++] = (struct sched_xhold){
					    q[i].id, at, q[i].hold_from_ms + window_s * 1000};
			}
			c += len + (end != NULL);
		}
	}
	if (k == 0) {
		free(v);
		return 0;
	}
	*out = v;
	*nout = k;
	return 0;
}

/*
 * Keep every pending job off the nodes held for another one: they join its
 * excluded nodes, counted apart (nexclude_held) so that its reason never
 * blames them on its failures.
 */
static int xholds_apply(struct snap *sn, const struct sched *s, struct ty_err *err)
{
	struct sched_xhold *h = NULL;
	int nh = 0, rc;

	if ((rc = sched_xholds(&h, &nh, s->world.queue.v, s->world.queue.n, &sn->in,
			       s->o.expedite_hold_s)))
		return ty_err_set(err, rc, NULL);
	for (int i = 0; i < sn->in.npending && nh > 0; i++) {
		struct sched_pending_in *p = &sn->pending[i];
		int m = 0, *v;

		for (int k = 0; k < nh; k++)
			m += sched_xhold_keeps_off(h, nh, k, p->job);
		if (m == 0)
			continue;
		if (!(v = snap_alloc(sn, (size_t)(p->nexclude + m), sizeof(*v)))) {
			free(h);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		if (p->nexclude)
			memcpy(v, p->exclude, (size_t)p->nexclude * sizeof(*v));
		for (int k = 0, x = p->nexclude; k < nh; k++)
			if (sched_xhold_keeps_off(h, nh, k, p->job))
				v[x++] = h[k].node;
		p->exclude = v;
		p->nexclude += m;
		p->nexclude_held = m;
	}
	if (nh > 0 && (sn->xh = snap_alloc(sn, (size_t)nh, sizeof(*h)))) {
		memcpy(sn->xh, h, (size_t)nh * sizeof(*h));
		sn->nxh = nh; /* out of memory: the reasons just do not mention them */
	}
	free(h);
	return 0;
}

/* Keep what this committed decision held for jobs waiting for their victims. */
static void holds_keep(struct sched *s, const struct snap *sn, const struct sched_decisions *d)
{
	/* out of memory: the jobs start where they fit best next cycle */
	if (sched_holds_keep(&s->world.holds, s->term.epoch, &sn->in, d))
		ty_warn("cycle: out of memory keeping the nodes held for preemptions");
}

int sched_cycle(struct sched *s, struct ty_err *err)
{
	struct sched_decisions *d = NULL;
	struct snap sn = {0};
	int64_t t0 = ty_mono_ms(), t1, t2, t3;
	double m0 = sched_metrics_clock(), m1, m2;
	int rc;

	if ((rc = cancel_pass(s, err)) || (rc = sched_spot_sweep(s, err)) ||
	    (rc = sched_preempt_kills(s, err)))
		return rc;
	/* holds of another term, or from before a whole reload, are not trusted */
	if (s->world.queue_stale || s->world.holds.epoch != s->term.epoch)
		s->world.holds.n = 0;
	if ((rc = snap_load(&sn, s, err)))
		return rc;
	if ((rc = holds_load(&sn, s, err)) || (rc = xholds_apply(&sn, s, err)))
		goto out;
	t1 = ty_mono_ms();
	m1 = sched_metrics_clock();
	if ((rc = sched_decide(&d, &sn.in, err)))
		goto out;
	t2 = ty_mono_ms();
	m2 = sched_metrics_clock();
	if (sched_estimator_done(s->world.est))
		estimate_collect(&sn, s);
	/* a what-if is answered by the next estimate, however soon */
	if (!s->world.est && (s->clock.what_if || !s->clock.last_estimate ||
			      t2 - s->clock.last_estimate >= ESTIMATE_MS)) {
		estimate_start(&sn, s, d);
		s->clock.last_estimate = t2;
	}
	t3 = ty_mono_ms();
	rc = apply(s, &sn, d, err);
	if (rc)
		s->world.holds.n = 0;
	else
		holds_keep(s, &sn, d);
	if (!rc)
		sched_metrics_cycle(s, &sn.in, d, sched_metrics_clock() - m0, m2 - m1);
	/* the cost of a cycle, for operators sizing --cycle-ms (read = mirror refresh + usage) */
	ty_log_at(ty_mono_ms() - t0 >= SLOW_CYCLE_MS ? TY_LOG_INFO : TY_LOG_DEBUG, 0,
		  "cycle: %lld ms (read %lld, decide %lld, estimate start %lld, write %lld) for %d "
		  "node(s), %d running gang(s), %d pending job(s)",
		  (long long)(ty_mono_ms() - t0), (long long)(t1 - t0), (long long)(t2 - t1),
		  (long long)(t3 - t2), (long long)(ty_mono_ms() - t3), sn.in.nnodes, sn.in.nrunning, sn.in.npending);
out:
	sched_decisions_free(d);
	snap_free(&sn);
	return rc;
}
