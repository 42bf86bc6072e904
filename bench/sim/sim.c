/*
 * The simulation driver: simulated time advances one tick per scheduling
 * cycle; between cycles jobs run, checkpoint, complete and stop, and teams'
 * decayed usage follows what ran. Every decision of the core is checked
 * against the invariants it promises.
 */
#include "sim.h"
#include "sim_int.h"

#include "core/policy.h"
#include "quota.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum jstate { J_FUTURE, J_PENDING, J_RUNNING, J_STOPPING, J_DONE };

#define HIST 20 /* runtimes kept per team, as migration 0035's runtime_history */
#define EST_MIN_WAIT 600 /* accuracy counts jobs predicted this long before they start */

/* The life of one job in the simulation. */
struct jrun {
	enum jstate st;
	int64_t start;	 /* current attempt, s */
	int64_t done;	 /* checkpointed work, s */
	int64_t finish;	 /* when the current attempt completes the work */
	int64_t stop_at; /* J_STOPPING: when its GPUs come back */
	int64_t preempted_for;
	int64_t last_for;    /* pending again after being preempted for this job */
	int64_t first_start; /* -1 until it starts */
	int nnodes;
	int *node;
	uint64_t *gpus;
	int port;
	int preemptions;
	/* the reservation rule */
	int64_t promise_ms; /* reservation of the current head stretch, 0 = none */
	int64_t last_resv_ms;
	bool ever_reserved, displaced;
	bool reclaimed; /* J_STOPPING: for another team's job */
	/* checkpoint-aware preemption */
	int64_t signal_at;     /* J_STOPPING: the checkpoint signal */
	bool saved_on_signal;  /* ... and its checkpoint committed before the kill */
	int64_t measured;      /* its job's measured checkpoint time, s; -1: none yet */
	int64_t nominal_since; /* pending: the reclaim wait's start (apply()); -1: none */
	bool reclaimed_for;    /* reclaim preempted gangs for it since then */
};

struct team_acc {
	double usage;	       /* decayed GPU-seconds */
	double tick_gs;	       /* GPU-seconds in the current tick */
	double window_gs;      /* delivered in [warmup, horizon) */
	double demand_gs;      /* work left at warmup + submitted in [warmup, horizon) */
	int64_t backlog_ticks; /* window ticks with pending work */
	int64_t used;	       /* GPUs held now */
	int64_t reclaimed;     /* of which by gangs stopping for other teams' jobs */
	int64_t placed_now;    /* this cycle: GPUs of its placements */
	int64_t reclaim_need;  /* this cycle: GPUs of its jobs that victims are preempted for */
	int pending;
	int64_t started, preempted;
};

struct sim {
	const struct sim_workload *w;
	const struct sim_config *c;
	struct sim_report *r;
	struct jrun *jr;
	struct team_acc *ta;
	int *pend, npend;      /* job indices, ascending */
	int *run, nrun;	       /* job indices of J_RUNNING and J_STOPPING */
	int next;	       /* next job to arrive */
	uint64_t *busy;	       /* per node, to check the core never double-books */
	int *block;	       /* per node block number */
	char (*labels)[4][16]; /* per node zone, rack, block, id */
	int64_t now, window_ticks;
	double window_used; /* GPU-seconds in [warmup, horizon) */
	double *delays[SIM_NCLASS + 1];
	int64_t ndelays[SIM_NCLASS + 1];
	double **team_delays;
	int64_t *team_ndelays;
	double *reclaim_waits;
	int64_t nreclaim_waits;
	int *pend_at;		  /* per job: its index in pend while pending */
	int *promised, npromised; /* jobs holding a reservation promise */
	/* start-time estimates: per mode and job, the first predicted start and when */
	int64_t *pred[SIM_NEST], *pred_at[SIM_NEST];
	double *est_err[SIM_NEST];
	int64_t nest_err[SIM_NEST];
	int64_t *hist; /* per team: the last HIST runtimes of completed attempts, a ring */
	int *hist_n;
	int64_t *run_end, *pend_rt; /* scratch for the estimator's input */
	bool *run_hist, *pend_hist;
	/* scratch for one cycle's input, reused */
	struct sched_node_in *nodes;
	struct sched_team_in *teams;
	struct sched_running_in *rin;
	struct sched_pending_in *pin;
	int *ports, *port_at, *port_n;
};

static void violation(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void violation(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (s->r->violations++ == 0) {
		int n = snprintf(s->r->first_violation, sizeof(s->r->first_violation),
				 "t=%llds: ", (long long)s->now);

		va_start(ap, fmt);
		vsnprintf(s->r->first_violation + n, sizeof(s->r->first_violation) - (size_t)n, fmt,
			  ap);
		va_end(ap);
	}
}

/* Behaviour DESIGN §6 argues against, counted and reported but not an error. */
static void anomaly(struct sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void anomaly(struct sim *s, const char *fmt, ...)
{
	va_list ap;

	if (s->r->reclaim_not_borrowing++ == 0) {
		int n = snprintf(s->r->first_anomaly, sizeof(s->r->first_anomaly),
				 "t=%llds: ", (long long)s->now);

		va_start(ap, fmt);
		vsnprintf(s->r->first_anomaly + n, sizeof(s->r->first_anomaly) - (size_t)n, fmt,
			  ap);
		va_end(ap);
	}
}

static int gpus_of(const struct sim_job *j)
{
	return j->nodes * j->gpus_per_node;
}

/* Seconds of [a, b) that fall in [lo, hi). */
static double overlap(int64_t a, int64_t b, int64_t lo, int64_t hi)
{
	int64_t x = a > lo ? a : lo, y = b < hi ? b : hi;

	return y > x ? (double)(y - x) : 0;
}

static int add_delay(double **v, int64_t *n, double d)
{
	/* capacity 16, then doubled whenever n reaches a power of two >= 16 */
	if (*n == 0 || (*n >= 16 && (*n & (*n - 1)) == 0)) {
		double *p = realloc(*v, (size_t)(*n ? *n * 2 : 16) * sizeof(*p));

		if (!p)
			return TY_ENOMEM;
		*v = p;
	}
	(*v)[(*n)++] = d;
	return 0;
}

/* Free a gang's GPUs in the busy masks and forget its nodes. */
static void release(struct sim *s, struct jrun *j)
{
	const struct sim_job *job = &s->w->jobs[j - s->jr];

	for (int r = 0; r < j->nnodes; r++)
		s->busy[j->node[r]] &= ~j->gpus[r];
	s->ta[job->team].used -= gpus_of(job);
	free(j->node);
	free(j->gpus);
	j->node = NULL;
	j->gpus = NULL;
	j->nnodes = 0;
}

/*
 * Work kept by the newest checkpoint of the attempt that ran from j->start
 * committed by t, the daemon's view: one started every ckpt_every counts
 * once its committed event is in, ckpt_cost later. *at: that event's time
 * (attempts.last_checkpoint_at), j->start when none.
 */
static int64_t checkpointed(const struct jrun *j, const struct sim_job *job, int64_t t, int64_t *at)
{
	int64_t ran = t - j->start - job->ckpt_cost;
	int64_t k = ran >= job->ckpt_every ? ran / job->ckpt_every : 0;

	*at = k ? j->start + k * job->ckpt_every + job->ckpt_cost : j->start;
	return k * job->ckpt_every;
}

/*
 * Move time from s->now to `to`: account GPU-seconds, complete finished
 * gangs, return stopped ones to pending, admit arrivals.
 */
static int advance(struct sim *s, int64_t to)
{
	const struct sim_config *c = s->c;
	int keep = 0;

	for (int t = 0; t < s->w->nteams; t++)
		s->ta[t].tick_gs = 0;
	for (int i = 0; i < s->nrun; i++) {
		struct jrun *j = &s->jr[s->run[i]];
		const struct sim_job *job = &s->w->jobs[s->run[i]];
		int64_t end =
		    j->st == J_STOPPING && j->stop_at < j->finish ? j->stop_at : j->finish;
		int g = gpus_of(job);
		double win;

		s->ta[job->team].tick_gs += g * overlap(j->start, end, s->now, to);
		win = g * overlap(j->start, end, s->now > c->warmup ? s->now : c->warmup,
				  to < c->horizon ? to : c->horizon);
		s->ta[job->team].window_gs += win;
		s->window_used += win;
		if (end > to) {
			s->run[keep++] = s->run[i];
			continue;
		}
		if (j->st == J_STOPPING && j->reclaimed)
			s->ta[job->team].reclaimed -= g;
		if (end == j->finish) {
			int t = job->team;

			/* the runtime history the daemon keeps per team and name (here: team) */
			s->hist[t * HIST + s->hist_n[t] % HIST] = end - j->start;
			s->hist_n[t]++;
			j->st = J_DONE;
			s->r->completed++;
			release(s, j);
			continue;
		}
		/* stopped by a preemption: back to pending, keeping its submit time */
		{
			int64_t at, ck = j->saved_on_signal ? j->signal_at - j->start
							    : checkpointed(j, job, end, &at);

			s->r->lost_gpu_seconds += (int64_t)g * (end - j->start - ck);
			j->done += ck;
			j->st = J_PENDING;
			j->last_for = j->preempted_for;
			j->preempted_for = 0;
			release(s, j);
			s->ta[job->team].pending++;
		}
	}
	s->nrun = keep;
	for (int t = 0; t < s->w->nteams; t++)
		s->ta[t].usage =
		    quota_usage_decay(s->ta[t].usage, (to - s->now) * 1000, c->half_life) +
		    s->ta[t].tick_gs;
	while (s->next < s->w->njobs && s->w->jobs[s->next].submit <= to) {
		const struct sim_job *job = &s->w->jobs[s->next];

		s->jr[s->next].st = J_PENDING;
		s->ta[job->team].pending++;
		if (job->submit >= c->warmup && job->submit < c->horizon)
			s->ta[job->team].demand_gs += (double)gpus_of(job) * (double)job->duration;
		s->next++;
	}
	if (s->now < c->warmup && to >= c->warmup)
		for (int i = 0; i < s->next; i++) {
			const struct jrun *j = &s->jr[i];
			const struct sim_job *job = &s->w->jobs[i];
			int64_t left = job->duration - j->done;

			if (j->st == J_DONE || job->submit >= c->warmup)
				continue;
			if (j->st == J_RUNNING || j->st == J_STOPPING)
				left -= to - j->start;
			if (left > 0)
				s->ta[job->team].demand_gs += (double)gpus_of(job) * (double)left;
		}
	s->now = to;
	/* pending = every job in J_PENDING, ascending (submit order) */
	s->npend = 0;
	for (int i = 0; i < s->next; i++)
		if (s->jr[i].st == J_PENDING) {
			s->pend_at[i] = s->npend;
			s->pend[s->npend++] = i;
		}
	if (s->npend > s->r->max_pending)
		s->r->max_pending = s->npend;
	if (s->now > c->warmup && s->now <= c->horizon) {
		s->window_ticks++;
		for (int t = 0; t < s->w->nteams; t++)
			if (s->ta[t].pending > 0)
				s->ta[t].backlog_ticks++;
	}
	return 0;
}

static void build_input(struct sched_input *in, struct sim *s)
{
	const struct sim_config *c = s->c;
	int nports = 0;

	memset(in, 0, sizeof(*in));
	sched_config_default(&in->cfg);
	in->cfg.half_life_s = c->half_life;
	/* a preempted gang stops within its grace and the stop: the reservation knows */
	in->cfg.stop_allowance_s = c->spec_grace + c->stop_delay;
	in->cfg.reclaim_delay_s = c->reclaim_delay;
	in->now_ms = s->now * 1000;
	for (int t = 0; t < s->w->nteams; t++) {
		const struct sim_team *tm = &s->w->teams[t];

		s->teams[t] = (struct sched_team_in){
		    .name = tm->name,
		    .nominal_gpus = tm->nominal,
		    .borrowing_limit = tm->borrow_limit,
		    .lending_limit = tm->lend_limit,
		    .cohort = tm->cohort_name,
		    .weight = tm->weight,
		    .usage = s->ta[t].usage,
		};
	}
	/* rendezvous ports held: the masters of the running gangs */
	for (int n = 0; n < c->nodes; n++)
		s->port_n[n] = 0;
	for (int i = 0; i < s->nrun; i++)
		s->port_n[s->jr[s->run[i]].node[0]]++;
	for (int n = 0; n < c->nodes; n++) {
		s->port_at[n] = nports;
		nports += s->port_n[n];
		s->port_n[n] = 0;
	}
	for (int i = 0; i < s->nrun; i++) {
		const struct jrun *j = &s->jr[s->run[i]];
		int n = j->node[0];

		s->ports[s->port_at[n] + s->port_n[n]++] = j->port;
	}
	for (int n = 0; n < c->nodes; n++)
		s->nodes[n] = (struct sched_node_in){
		    .id = s->labels[n][3],
		    .gpus = c->gpus_per_node,
		    .busy = 0, /* the core adds the running gangs */
		    .schedulable = true,
		    .zone = s->labels[n][0],
		    .rack = s->labels[n][1],
		    .block = s->labels[n][2],
		    .ports = s->ports + s->port_at[n],
		    .nports = s->port_n[n],
		};
	for (int i = 0; i < s->nrun; i++) {
		const struct jrun *j = &s->jr[s->run[i]];
		const struct sim_job *job = &s->w->jobs[s->run[i]];
		int64_t at;

		checkpointed(j, job, s->now, &at);
		s->rin[i] = (struct sched_running_in){
		    .job = job->id,
		    .team = job->team,
		    .cls = (enum sched_class)job->cls,
		    .priority = job->prio,
		    .start_ms = j->start * 1000,
		    /* the daemon's input: committed checkpoints as their events arrive */
		    .checkpoint_ms = (c->victims_by_age ? j->start : at) * 1000,
		    .min_runtime_s = c->min_runtime,
		    .end_by_ms = (j->start + job->max_runtime) * 1000,
		    .preemptible = job->preemptible,
		    .preempting = j->st == J_STOPPING,
		    .preempted_for = j->preempted_for,
		    .nnodes = j->nnodes,
		    .node = j->node,
		    .gpus = j->gpus,
		};
	}
	for (int i = 0; i < s->npend; i++) {
		const struct sim_job *job = &s->w->jobs[s->pend[i]];

		s->pin[i] = (struct sched_pending_in){
		    .job = job->id,
		    .team = job->team,
		    .cls = (enum sched_class)job->cls,
		    .priority = job->prio,
		    .submit_ms = job->submit * 1000,
		    .nodes = job->nodes,
		    .gpus_per_node = job->gpus_per_node,
		    .required = job->need_block ? SCHED_TOPO_BLOCK : SCHED_TOPO_NONE,
		    .min_runtime_s = c->min_runtime,
		    .max_runtime_s = job->max_runtime,
		};
	}
	in->nodes = s->nodes;
	in->nnodes = c->nodes;
	in->teams = s->teams;
	in->nteams = s->w->nteams;
	in->running = s->rin;
	in->nrunning = s->nrun;
	in->pending = s->pin;
	in->npending = s->npend;
}

/* Team t's quota state for the quota.h checks. */
static struct quota_team qteam(const struct sim *s, int t)
{
	const struct sim_team *tm = &s->w->teams[t];

	return (struct quota_team){.nominal = tm->nominal,
				   .borrowing_limit = tm->borrow_limit,
				   .lending_limit = tm->lend_limit,
				   .used = s->ta[t].used,
				   .in_cohort = true};
}

/* After team t took GPUs: may it hold what it holds, given its cohort? */
static void check_quota(struct sim *s, int t, int64_t job)
{
	const struct sim_team *tm = &s->w->teams[t];
	struct quota_cohort co = {0};
	struct quota_team me = qteam(s, t);

	if (me.used <= me.nominal)
		return;
	if (tm->borrow_limit >= 0 && me.used - me.nominal > tm->borrow_limit)
		violation(s, "job %lld: team %s holds %lld GPUs, nominal %d + borrowing limit %d",
			  (long long)job, tm->name, (long long)me.used, tm->nominal,
			  tm->borrow_limit);
	for (int u = 0; u < s->w->nteams; u++)
		if (s->w->teams[u].cohort == tm->cohort) {
			struct quota_team q = qteam(s, u);

			quota_cohort_account(&co, &q, +1);
		}
	if (co.borrowed > co.lendable)
		violation(s, "job %lld: cohort of %s borrows %lld GPUs, lends only %lld",
			  (long long)job, tm->name, (long long)co.borrowed, (long long)co.lendable);
}

static int start_job(struct sim *s, const struct sched_decisions *d, int i, bool backfill)
{
	const struct sched_placement *p = &d->placements[i];
	int k = d->placement_pending[i];
	int ji = s->pend[k];
	struct jrun *j = &s->jr[ji];
	const struct sim_job *job = &s->w->jobs[ji];
	double delay;
	int rc;

	if (p->job != job->id || p->nnodes != job->nodes ||
	    p->gpus_per_node != job->gpus_per_node) {
		violation(s, "placement %d is for job %lld (%d x %d), pending[%d] is job %lld", i,
			  (long long)p->job, p->nnodes, p->gpus_per_node, k, (long long)job->id);
		return 0;
	}
	if (j->st != J_PENDING) {
		violation(s, "job %lld placed twice", (long long)job->id);
		return 0;
	}
	j->node = calloc((size_t)p->nnodes, sizeof(*j->node));
	j->gpus = calloc((size_t)p->nnodes, sizeof(*j->gpus));
	if (!j->node || !j->gpus)
		return TY_ENOMEM;
	for (int r = 0; r < p->nnodes; r++) {
		int n = p->node[r];
		uint64_t m = 0;

		if (n < 0 || n >= s->c->nodes) {
			violation(s, "job %lld placed on node index %d", (long long)job->id, n);
			continue;
		}
		for (int q = 0; q < r; q++)
			if (p->node[q] == n)
				violation(s, "job %lld uses node %d twice", (long long)job->id, n);
		for (int g = 0; g < p->gpus_per_node; g++) {
			int gpu = p->gpus[(size_t)r * (size_t)p->gpus_per_node + (size_t)g];

			if (gpu < 0 || gpu >= s->c->gpus_per_node)
				violation(s, "job %lld got GPU %d of node %d", (long long)job->id,
					  gpu, n);
			else
				m |= 1ULL << gpu;
		}
		if (m & s->busy[n])
			violation(s, "job %lld got held GPUs on node %d (mask %#llx over %#llx)",
				  (long long)job->id, n, (unsigned long long)m,
				  (unsigned long long)s->busy[n]);
		if (job->need_block && s->block[n] != s->block[p->node[0]])
			violation(s, "job %lld needs one block, got blocks %d and %d",
				  (long long)job->id, s->block[p->node[0]], s->block[n]);
		s->busy[n] |= m;
		j->node[r] = n;
		j->gpus[r] = m;
	}
	for (int q = 0; q < s->nrun; q++) {
		const struct jrun *o = &s->jr[s->run[q]];

		if (o->node[0] == p->node[0] && o->port == p->master_port)
			violation(s, "job %lld got port %d on node %d, held by job %lld",
				  (long long)job->id, p->master_port, p->node[0],
				  (long long)s->w->jobs[s->run[q]].id);
	}
	if (j->last_for) {
		int64_t f = j->last_for - 1; /* ids are 1-based indices */

		if (f >= 0 && f < s->w->njobs && s->jr[f].st == J_PENDING) {
			enum sched_reason why = d->pending[s->pend_at[f]].reason;

			s->r->restarted_before_for++;
			/*
			 * The job it was preempted for still fits: it is being given
			 * room (holds nodes while victims stop) or fits but for a
			 * rendezvous port. Not: it waits for quota someone else took
			 * meanwhile, for nodes (its room went to a job ahead of it) or
			 * behind the head's reservation.
			 */
			if (why == SCHED_WAIT_PREEMPTION || why == SCHED_WAIT_PORT) {
				if (j->reclaimed)
					s->r->restarted_reclaim_fits++;
				else
					s->r->restarted_class_fits++;
			}
		}
		j->last_for = 0;
	}
	if (j->first_start < 0)
		for (int m = 0; m < SIM_NEST; m++) {
			int64_t pr = s->pred[m][ji], wait = s->now - s->pred_at[m][ji];

			if (pr < 0 || wait <= EST_MIN_WAIT)
				continue;
			/* the simulation decides once a tick: the prediction's next one */
			pr = (pr + s->c->tick - 1) / s->c->tick * s->c->tick;
			if ((rc = add_delay(&s->est_err[m], &s->nest_err[m],
					    (double)(pr > s->now ? pr - s->now : s->now - pr) /
						(double)wait)))
				return rc;
		}
	j->nnodes = p->nnodes;
	j->port = p->master_port;
	j->st = J_RUNNING;
	j->start = s->now;
	j->finish = s->now + (job->duration - j->done);
	s->run[s->nrun++] = ji;
	s->ta[job->team].used += gpus_of(job);
	s->ta[job->team].pending--;
	s->r->starts++;
	if (backfill)
		s->r->backfill_starts++;
	check_quota(s, job->team, job->id);
	if (j->promise_ms) {
		int64_t late = s->now * 1000 - j->promise_ms;

		/*
		 * One tick of cycle granularity: the core is told the stop delay
		 * (stop_allowance_s) and counts on a stopping gang's GPUs only
		 * from then.
		 */
		if (late > s->c->tick * 1000) {
			s->r->reserved_late++;
			if ((double)late / 1000 > s->r->worst_lateness) {
				s->r->worst_lateness = (double)late / 1000;
				s->r->worst_late_job = job->id;
			}
		} else {
			s->r->reserved_on_time++;
		}
		j->promise_ms = 0;
		j->displaced = false;
	}
	if (j->reclaimed_for && j->nominal_since >= 0 &&
	    (rc = add_delay(&s->reclaim_waits, &s->nreclaim_waits,
			    (double)(s->now - j->nominal_since))))
		return rc;
	j->reclaimed_for = false;
	j->nominal_since = -1;
	if (j->first_start >= 0)
		return 0;
	j->first_start = s->now;
	s->r->started++;
	s->ta[job->team].started++;
	delay = (double)(s->now - job->submit);
	if ((rc = add_delay(&s->delays[SIM_NCLASS], &s->ndelays[SIM_NCLASS], delay)) ||
	    (rc = add_delay(&s->delays[job->cls], &s->ndelays[job->cls], delay)) ||
	    (rc = add_delay(&s->team_delays[job->team], &s->team_ndelays[job->team], delay)))
		return rc;
	return 0;
}

/*
 * DESIGN §6: reclaim takes only from a team that borrows, for a job of
 * another team of its cohort that fits within its own nominal quota; class
 * preemption takes only lower classes of the job's own team.
 */
static void check_victim(struct sim *s, const struct sched_decisions *d, int i,
			 const struct sim_job *victim)
{
	const struct sched_preemption *pr = &d->preemptions[i];
	const struct sim_job *forj;
	const struct sim_team *vt = &s->w->teams[victim->team], *ft;
	bool first = true;

	if (pr->pending < 0 || pr->pending >= s->npend) {
		violation(s, "preemption of job %lld names pending index %d", (long long)victim->id,
			  pr->pending);
		return;
	}
	forj = &s->w->jobs[s->pend[pr->pending]];
	ft = &s->w->teams[forj->team];
	if (forj->id != pr->for_job) {
		violation(s, "preemption for job %lld names pending[%d] = job %lld",
			  (long long)pr->for_job, pr->pending, (long long)forj->id);
		return;
	}
	if (pr->why == SCHED_PREEMPT_CLASS) {
		if (victim->team != forj->team || victim->cls <= forj->cls)
			violation(s,
				  "class preemption of job %lld (%s, class %d) for job %lld (%s, "
				  "class %d)",
				  (long long)victim->id, vt->name, victim->cls, (long long)forj->id,
				  ft->name, forj->cls);
		return;
	}
	if (pr->why != SCHED_PREEMPT_RECLAIM) {
		violation(s, "preemption of job %lld with reason %d", (long long)victim->id,
			  pr->why);
		return;
	}
	if (victim->team == forj->team)
		violation(s, "reclaim of job %lld for job %lld of the same team %s",
			  (long long)victim->id, (long long)forj->id, ft->name);
	/*
	 * DESIGN §6 does not confine reclaim to the cohort the victim borrows
	 * from: freeing nodes for a gang may take a borrower of another cohort.
	 * Counted, not an error.
	 */
	if (vt->cohort != ft->cohort)
		s->r->reclaim_cross_cohort++;
	/*
	 * The victim's team runs on borrowed GPUs: its running gangs, plus
	 * what this cycle places for it, less gangs already stopping for other
	 * teams' jobs, exceed its nominal quota. GPUs held for its own pending
	 * jobs (waiting for victims) do not count: they are not running work.
	 */
	{
		const struct team_acc *va = &s->ta[victim->team];
		int64_t held = va->used + va->placed_now - va->reclaimed;

		if (held <= vt->nominal)
			anomaly(
			    s,
			    "reclaim of job %lld (%d GPUs) for job %lld (%s): team %s runs %lld "
			    "GPUs (+%lld placed now, -%lld already being reclaimed), nominal "
			    "%d; the core counts %lld in use, %lld borrowed (GPUs held for its "
			    "pending jobs included)",
			    (long long)victim->id, gpus_of(victim), (long long)forj->id, ft->name,
			    vt->name, (long long)va->used, (long long)va->placed_now,
			    (long long)va->reclaimed, vt->nominal,
			    d->teams ? (long long)d->teams[victim->team].used : -1LL,
			    d->teams ? (long long)d->teams[victim->team].borrowed : -1LL);
	}
	for (int k = 0; k < i; k++)
		if (d->preemptions[k].for_job == pr->for_job)
			first = false;
	if (first)
		s->ta[forj->team].reclaim_need += gpus_of(forj);
	if (s->ta[forj->team].used + s->ta[forj->team].reclaim_need > ft->nominal)
		violation(s,
			  "reclaim for job %lld (%d GPUs): team %s holds %lld GPUs and "
			  "reclaims %lld in all, nominal %d",
			  (long long)forj->id, gpus_of(forj), ft->name,
			  (long long)s->ta[forj->team].used,
			  (long long)s->ta[forj->team].reclaim_need, ft->nominal);
}

static void preempt(struct sim *s, const struct sched_decisions *d, int i)
{
	const struct sched_preemption *pr = &d->preemptions[i];
	int ji, min;
	int64_t grace;
	struct jrun *j;
	const struct sim_job *job;
	struct sched_config def;

	/* applied before any placement, so s->run is still the input's order */
	if (pr->running < 0 || pr->running >= s->nrun) {
		violation(s, "preemption of running index %d", pr->running);
		return;
	}
	ji = s->run[pr->running];
	j = &s->jr[ji];
	job = &s->w->jobs[ji];
	if (pr->victim != job->id) {
		violation(s, "preemption victim %lld, running[%d] is %lld", (long long)pr->victim,
			  pr->running, (long long)job->id);
		return;
	}
	if (j->st != J_RUNNING) {
		violation(s, "job %lld preempted while %s", (long long)job->id,
			  j->st == J_STOPPING ? "already stopping" : "not running");
		return;
	}
	sched_config_default(&def);
	min = (int)(def.class_min_runtime_s[job->cls] > s->c->min_runtime
			? def.class_min_runtime_s[job->cls]
			: s->c->min_runtime);
	/* reclaim waits at most the reclaim delay */
	if (pr->why == SCHED_PREEMPT_RECLAIM && s->c->reclaim_delay < min)
		min = (int)s->c->reclaim_delay;
	if (!job->preemptible)
		violation(s, "job %lld (not preemptible) preempted for job %lld",
			  (long long)job->id, (long long)pr->for_job);
	if (s->now - j->start < min)
		violation(s, "job %lld preempted after %llds, minimum runtime %ds",
			  (long long)job->id, (long long)(s->now - j->start), min);
	check_victim(s, d, i, job);
	j->reclaimed = pr->why == SCHED_PREEMPT_RECLAIM;
	if (j->reclaimed)
		s->ta[job->team].reclaimed += gpus_of(job);
	j->st = J_STOPPING;
	j->signal_at = s->now;
	/* the daemon's grace: the spec's until measured, then from the measured time */
	grace = j->measured < 0 || s->c->spec_grace == 0
		    ? s->c->spec_grace
		    : sched_grace_seconds(j->measured * 1000, def.grace_margin_pct,
					  def.grace_min_s[job->cls], def.grace_max_s[job->cls]);
	if (j->measured >= 0 && s->c->spec_grace > 0)
		s->r->measured_graces++;
	/* killed as its checkpoint commits, else when the grace is over */
	j->saved_on_signal = job->signal_ckpt && job->ckpt_cost <= grace;
	if (j->saved_on_signal) {
		j->measured = job->ckpt_cost;
		s->r->killed_on_commit++;
	}
	j->stop_at = s->now + (j->saved_on_signal ? job->ckpt_cost : grace) + s->c->stop_delay;
	if (pr->why == SCHED_PREEMPT_RECLAIM && pr->for_job >= 1 && pr->for_job <= s->w->njobs) {
		struct jrun *f = &s->jr[pr->for_job - 1];

		f->reclaimed_for = true;
		if (f->nominal_since < 0)
			f->nominal_since = s->now;
	}
	j->preempted_for = pr->for_job;
	j->preemptions++;
	s->r->preemptions++;
	if (pr->why == SCHED_PREEMPT_RECLAIM)
		s->r->preempt_reclaim++;
	else if (pr->why == SCHED_PREEMPT_CLASS)
		s->r->preempt_class++;
	s->ta[job->team].preempted++;
}

/*
 * The reservation rule: the head job's reservation is a promise; it must
 * start no later than that (within one tick: cycles run once a tick).
 * Only a more urgent job or a quota change may break it, so each cycle,
 * for every job holding a promise:
 * - a job ahead of it in the order was placed or had victims preempted
 *   for it, or is now the head: the promise is void (renewed with the new
 *   reservation if it is still the head);
 * - it now waits for quota (lenders took their nominal back, its own team
 *   holds the borrowing room): void, the reservation never covered quota;
 * - anything else (jobs behind it backfilled, its own victims being
 *   preempted): the promise stands.
 * Runs after the placements were applied.
 */
static int track_head(struct sim *s, const struct sched_decisions *d)
{
	int head = d->head >= 0 ? s->pend[d->head] : -1;
	int headpos = d->head >= 0 ? d->pending[d->head].position : -1;
	int served = d->npending; /* smallest position served this cycle */
	int64_t resv = 0;
	int keep = 0;

	for (int i = 0; i < d->nreservations; i++)
		if (d->reservations[i].kind == SCHED_RESV_HEAD &&
		    d->reservations[i].pending == d->head)
			resv = d->reservations[i].start_ms;
	for (int i = 0; i < d->nplacements; i++)
		if (d->pending[d->placement_pending[i]].position < served)
			served = d->pending[d->placement_pending[i]].position;
	for (int i = 0; i < d->npreemptions; i++)
		if (d->pending[d->preemptions[i].pending].position < served)
			served = d->pending[d->preemptions[i].pending].position;
	for (int q = 0; q < s->npromised; q++) {
		int ji = s->promised[q], k = s->pend_at[ji];
		struct jrun *j = &s->jr[ji];
		const struct sched_pending_out *o;

		if (j->st != J_PENDING || !j->promise_ms)
			continue; /* started (judged in start_job) */
		o = &d->pending[k];
		if (ji == head) {
			if (served < o->position) {
				s->r->promise_renewed++;
				j->promise_ms = resv;
			} else if (resv > j->last_resv_ms + s->c->tick * 1000) {
				s->r->reservation_slips++;
			}
			j->last_resv_ms = resv;
		} else if (o->reason == SCHED_WAIT_COHORT || o->reason == SCHED_WAIT_BORROW_LIMIT ||
			   o->reason == SCHED_WAIT_NOMINAL) {
			s->r->promise_void_quota++;
			j->promise_ms = 0;
		} else if (served < o->position || (headpos >= 0 && headpos < o->position)) {
			s->r->promise_void_ahead++;
			j->promise_ms = 0;
		}
		if (j->promise_ms)
			s->promised[keep++] = ji;
		else
			j->displaced = true;
	}
	s->npromised = keep;
	if (head < 0 || !resv || s->jr[head].promise_ms)
		return 0;
	{
		struct jrun *j = &s->jr[head];

		if (!j->ever_reserved) {
			j->ever_reserved = true;
			s->r->reserved_heads++;
		}
		j->promise_ms = resv;
		j->last_resv_ms = resv;
		if (s->npromised == 0 ||
		    (s->npromised >= 16 && (s->npromised & (s->npromised - 1)) == 0)) {
			int *p =
			    realloc(s->promised,
				    (size_t)(s->npromised ? s->npromised * 2 : 16) * sizeof(*p));

			if (!p)
				return TY_ENOMEM;
			s->promised = p;
		}
		s->promised[s->npromised++] = head;
	}
	return 0;
}

/*
 * No double counting: what the core reports a team uses after a decision
 * is at most what it physically holds (running and stopping gangs, and
 * this decision's placements) plus, for each of its jobs waiting for
 * victims, the GPUs its own team's new victims for that job do not already
 * give it. Runs before the decision is applied.
 */
static void check_counts(struct sim *s, const struct sched_decisions *d)
{
	int64_t bound[SIM_MAX_TEAMS];

	for (int t = 0; t < s->w->nteams; t++)
		bound[t] = s->ta[t].used + s->ta[t].placed_now;
	for (int k = 0; k < d->nreservations; k++) {
		const struct sched_reservation *rv = &d->reservations[k];
		const struct sim_job *j;
		int64_t need, own = 0;

		if (rv->kind != SCHED_RESV_PREEMPTION || rv->pending < 0 || rv->pending >= s->npend)
			continue;
		j = &s->w->jobs[s->pend[rv->pending]];
		need = gpus_of(j);
		for (int i = 0; i < d->npreemptions; i++) {
			const struct sched_preemption *pr = &d->preemptions[i];

			if (pr->for_job == j->id && pr->running >= 0 && pr->running < s->nrun &&
			    s->w->jobs[s->run[pr->running]].team == j->team)
				own += gpus_of(&s->w->jobs[s->run[pr->running]]);
		}
		bound[j->team] += own >= need ? 0 : need - own;
	}
	for (int t = 0; t < s->w->nteams; t++)
		if (d->teams[t].used > bound[t] && s->r->overcounted++ == 0)
			snprintf(s->r->first_overcount, sizeof(s->r->first_overcount),
				 "t=%llds: team %s counted %lld in use, holds %lld (+%lld placed "
				 "now) and waits for victims for the rest",
				 (long long)s->now, s->w->teams[t].name, (long long)d->teams[t].used,
				 (long long)s->ta[t].used, (long long)s->ta[t].placed_now);
}

static int apply(struct sim *s, const struct sched_decisions *d)
{
	int headpos = d->head >= 0 ? d->pending[d->head].position : -1;
	int rc;

	/* the victims first: their indices refer to the input's running array */
	for (int t = 0; t < s->w->nteams; t++)
		s->ta[t].reclaim_need = s->ta[t].placed_now = 0;
	for (int i = 0; i < d->nplacements; i++) {
		int k = d->placement_pending[i];

		if (k >= 0 && k < s->npend)
			s->ta[s->w->jobs[s->pend[k]].team].placed_now +=
			    gpus_of(&s->w->jobs[s->pend[k]]);
	}
	check_counts(s, d);
	/*
	 * The lender's reclaim wait: from the first cycle in which only
	 * borrowers stood in its way — reclaim would make room but for their
	 * protection (protected_job), or made room and it waits for its
	 * victims — to its start; a cycle with neither (nor its start) ends the
	 * stretch: it then waits for something else.
	 */
	for (int i = 0; i < d->npending && i < s->npend; i++) {
		struct jrun *j = &s->jr[s->pend[i]];
		enum sched_reason why = d->pending[i].reason;

		if (d->pending[i].protected_job || why == SCHED_WAIT_PREEMPTION) {
			if (j->nominal_since < 0)
				j->nominal_since = s->now;
		} else if (why != SCHED_PLACED) {
			j->nominal_since = -1;
			j->reclaimed_for = false;
		}
	}
	for (int i = 0; i < d->npreemptions; i++)
		preempt(s, d, i);
	for (int i = 0; i < d->nplacements; i++) {
		int k = d->placement_pending[i];

		if (k < 0 || k >= s->npend) {
			violation(s, "placement %d names pending index %d", i, k);
			continue;
		}
		if ((rc = start_job(s, d, i, headpos >= 0 && d->pending[k].position > headpos)))
			return rc;
	}
	if ((rc = track_head(s, d)))
		return rc;
	for (int i = 0; i < d->npending; i++)
		if (d->pending[i].reason < 16)
			s->r->reason_counts[d->pending[i].reason]++;
	s->r->fit_attempts += d->stats.fit_attempts;
	s->r->fast_rejects += d->stats.fast_rejects;
	s->r->preemption_plans += d->stats.preemption_plans;
	s->r->reservation_probes += d->stats.reservation_probes;
	return 0;
}

/*
 * Target shares over the window: per cohort (borrowing never crosses one),
 * each team's allotment is clamp(λ·weight, lo, hi) where lo = min(nominal,
 * demand) is what reclaim guarantees it and hi = min(demand, nominal +
 * borrowing limit) what it may hold; the cohort's capacity is its nominal
 * GPUs less idle nominal that lending limits keep from being lent.
 */
static void targets(struct sim_report *r, const struct sim *s)
{
	const struct sim_workload *w = s->w;
	double span = (double)(s->c->horizon - s->c->warmup), total = 0;
	double wt[SIM_MAX_TEAMS], lo[SIM_MAX_TEAMS], hi[SIM_MAX_TEAMS], x[SIM_MAX_TEAMS];
	int idx[SIM_MAX_TEAMS];

	for (int co = 0; co < s->c->cohorts; co++) {
		double cap = 0, unlendable = 0;
		int n = 0;

		for (int t = 0; t < w->nteams; t++) {
			const struct sim_team *tm = &w->teams[t];
			double demand = s->ta[t].demand_gs / span;

			if (tm->cohort != co)
				continue;
			idx[n] = t;
			wt[n] = tm->weight;
			lo[n] = demand < tm->nominal ? demand : tm->nominal;
			hi[n] =
			    tm->borrow_limit < 0 ? 1e300 : (double)(tm->nominal + tm->borrow_limit);
			if (demand < hi[n])
				hi[n] = demand;
			cap += tm->nominal;
			n++;
		}
		/* idle nominal above a lending limit stays idle; two rounds settle it */
		for (int round = 0; round < 3; round++) {
			sim__water_fill(x, wt, lo, hi, n, cap - unlendable);
			unlendable = 0;
			for (int k = 0; k < n; k++) {
				const struct sim_team *tm = &w->teams[idx[k]];
				double idle = tm->nominal - x[k];

				if (tm->lend_limit >= 0 && idle > tm->lend_limit)
					unlendable += idle - tm->lend_limit;
			}
		}
		for (int k = 0; k < n; k++) {
			r->teams[idx[k]].target = x[k];
			total += x[k];
		}
	}
	for (int t = 0; t < w->nteams; t++)
		r->teams[t].target = total > 0 ? r->teams[t].target / total : 0;
}

static int finish_report(struct sim *s)
{
	struct sim_report *r = s->r;
	double delivered = 0;

	for (int t = 0; t < s->w->nteams; t++)
		delivered += s->ta[t].window_gs;
	for (int t = 0; t < s->w->nteams; t++) {
		const struct sim_team *tm = &s->w->teams[t];
		struct sim_team_report *tr = &r->teams[t];

		memcpy(tr->name, tm->name, sizeof(tr->name));
		tr->weight = tm->weight;
		tr->nominal = tm->nominal;
		tr->borrow_limit = tm->borrow_limit;
		tr->gpu_seconds = s->ta[t].window_gs;
		tr->achieved = delivered > 0 ? s->ta[t].window_gs / delivered : 0;
		tr->backlogged =
		    s->window_ticks ? (double)s->ta[t].backlog_ticks / (double)s->window_ticks : 0;
		tr->started = s->ta[t].started;
		tr->preempted = s->ta[t].preempted;
		sim__delay_fill(&tr->delay, s->team_delays[t], s->team_ndelays[t]);
	}
	targets(r, s);
	for (int t = 0; t < s->w->nteams; t++) {
		double e = r->teams[t].achieved - r->teams[t].target;

		if (e < 0)
			e = -e;
		if (e > r->max_share_error)
			r->max_share_error = e;
	}
	r->utilization = s->window_used / ((double)s->c->nodes * s->c->gpus_per_node *
					   (double)(s->c->horizon - s->c->warmup));
	r->window_capacity_gs = (double)s->c->nodes * s->c->gpus_per_node * (double)s->now;
	sim__delay_fill(&r->delay, s->delays[SIM_NCLASS], s->ndelays[SIM_NCLASS]);
	sim__delay_fill(&r->reclaim_wait, s->reclaim_waits, s->nreclaim_waits);
	for (int m = 0; m < SIM_NEST; m++)
		sim__delay_fill(&r->est_error[m], s->est_err[m], s->nest_err[m]);
	for (int k = 0; k < SIM_NCLASS; k++)
		sim__delay_fill(&r->delay_by_class[k], s->delays[k], s->ndelays[k]);
	for (int i = 0; i < s->w->njobs; i++) {
		const struct jrun *j = &s->jr[i];

		if (j->st != J_DONE)
			r->unfinished++;
		if (!j->ever_reserved)
			continue;
		if (j->first_start < 0)
			r->reserved_unstarted++;
		else if (j->displaced)
			r->reserved_displaced++;
	}
	return 0;
}

static void sim_free(struct sim *s)
{
	if (s->jr)
		for (int i = 0; i < s->w->njobs; i++) {
			free(s->jr[i].node);
			free(s->jr[i].gpus);
		}
	free(s->jr);
	free(s->ta);
	free(s->pend);
	free(s->pend_at);
	free(s->promised);
	free(s->run);
	free(s->busy);
	free(s->block);
	free(s->labels);
	for (int k = 0; k <= SIM_NCLASS; k++)
		free(s->delays[k]);
	free(s->reclaim_waits);
	for (int t = 0; s->team_delays && t < s->w->nteams; t++)
		free(s->team_delays[t]);
	free(s->team_delays);
	free(s->team_ndelays);
	free(s->nodes);
	free(s->teams);
	free(s->rin);
	free(s->pin);
	free(s->ports);
	free(s->port_at);
	free(s->port_n);
	free(s->hist);
	free(s->hist_n);
	free(s->run_end);
	free(s->pend_rt);
	free(s->run_hist);
	free(s->pend_hist);
	for (int m = 0; m < SIM_NEST; m++) {
		free(s->pred[m]);
		free(s->pred_at[m]);
		free(s->est_err[m]);
	}
}

static int sim_init(struct sim *s, const struct sim_workload *w)
{
	const struct sim_config *c = &w->cfg;
	size_t nj = (size_t)w->njobs + 1, nn = (size_t)c->nodes;
	size_t ngpu = nn * (size_t)c->gpus_per_node + 1, nt = (size_t)w->nteams;

	memset(s, 0, sizeof(*s));
	s->w = w;
	s->c = c;
	s->r = calloc(1, sizeof(*s->r));
	s->jr = calloc(nj, sizeof(*s->jr));
	s->ta = calloc(nt, sizeof(*s->ta));
	s->pend = calloc(nj, sizeof(*s->pend));
	s->pend_at = calloc(nj, sizeof(*s->pend_at));
	s->run = calloc(nj, sizeof(*s->run));
	s->busy = calloc(nn, sizeof(*s->busy));
	s->block = calloc(nn, sizeof(*s->block));
	s->labels = calloc(nn, sizeof(*s->labels));
	s->team_delays = calloc(nt, sizeof(*s->team_delays));
	s->team_ndelays = calloc(nt, sizeof(*s->team_ndelays));
	s->nodes = calloc(nn, sizeof(*s->nodes));
	s->teams = calloc(nt, sizeof(*s->teams));
	s->rin = calloc(ngpu < nj ? ngpu : nj, sizeof(*s->rin));
	s->pin = calloc(nj, sizeof(*s->pin));
	s->ports = calloc(ngpu, sizeof(*s->ports));
	s->port_at = calloc(nn, sizeof(*s->port_at));
	s->port_n = calloc(nn, sizeof(*s->port_n));
	if (!s->r || !s->jr || !s->ta || !s->pend || !s->pend_at || !s->run || !s->busy ||
	    !s->block || !s->labels || !s->team_delays || !s->team_ndelays || !s->nodes ||
	    !s->teams || !s->rin || !s->pin || !s->ports || !s->port_at || !s->port_n)
		return TY_ENOMEM;
	s->hist = calloc(nt * HIST, sizeof(*s->hist));
	s->hist_n = calloc(nt, sizeof(*s->hist_n));
	s->run_end = calloc(nj, sizeof(*s->run_end));
	s->pend_rt = calloc(nj, sizeof(*s->pend_rt));
	s->run_hist = calloc(nj, sizeof(*s->run_hist));
	s->pend_hist = calloc(nj, sizeof(*s->pend_hist));
	if (!s->hist || !s->hist_n || !s->run_end || !s->pend_rt || !s->run_hist || !s->pend_hist)
		return TY_ENOMEM;
	for (int m = 0; m < SIM_NEST; m++) {
		if (!(s->pred[m] = calloc(nj, sizeof(*s->pred[m]))) ||
		    !(s->pred_at[m] = calloc(nj, sizeof(*s->pred_at[m]))))
			return TY_ENOMEM;
		for (size_t i = 0; i < nj; i++)
			s->pred[m][i] = -1;
	}
	s->r->cfg = *c;
	s->r->nteams = w->nteams;
	s->r->jobs = w->njobs;
	if (!(s->r->teams = calloc(nt, sizeof(*s->r->teams))))
		return TY_ENOMEM;
	s->r->lost_gpu_seconds_by_age = s->r->preemptions_by_age = -1;
	for (int i = 0; i < w->njobs; i++) {
		s->jr[i].first_start = -1;
		s->jr[i].measured = -1;
		s->jr[i].nominal_since = -1;
	}
	for (int n = 0; n < c->nodes; n++) {
		int b = n / c->block_nodes, rack = b / c->blocks_per_rack;

		s->block[n] = b;
		snprintf(s->labels[n][0], sizeof(s->labels[n][0]), "z%d", rack / c->racks_per_zone);
		snprintf(s->labels[n][1], sizeof(s->labels[n][1]), "r%d", rack);
		snprintf(s->labels[n][2], sizeof(s->labels[n][2]), "b%d", b);
		snprintf(s->labels[n][3], sizeof(s->labels[n][3]), "n%05d", n);
	}
	return 0;
}

/* p80 of team t's completed runtimes, 0 = none yet */
static int64_t hist_p80(const struct sim *s, int t)
{
	int64_t v[HIST];
	int n = s->hist_n[t] < HIST ? s->hist_n[t] : HIST;

	if (n == 0)
		return 0;
	memcpy(v, s->hist + t * HIST, (size_t)n * sizeof(*v));
	for (int i = 1; i < n; i++)
		for (int k = i; k > 0 && v[k - 1] > v[k]; k--) {
			int64_t x = v[k];

			v[k] = v[k - 1];
			v[k - 1] = x;
		}
	/* percentile_disc(0.8): the first value with 80 % at or below it */
	return v[(n * 8 + 9) / 10 - 1];
}

/* sched_estimate() over this cycle's decision in every mode; first predictions kept. */
static int estimate(struct sim *s, const struct sched_input *in, const struct sched_decisions *d,
		    struct ty_err *err)
{
	for (int m = 0; m < SIM_NEST; m++) {
		struct sched_estimate_in e = {.cfg = {.max_steps = 256, .min_step_s = 30}};
		struct sched_estimates *x = NULL;
		int rc;

		for (int i = 0; i < in->nrunning; i++) {
			const struct jrun *j = &s->jr[s->run[i]];
			int64_t h = hist_p80(s, in->running[i].team);

			s->run_end[i] = m == SIM_EST_EXACT ? (j->st == J_STOPPING ? j->stop_at : j->finish)
				      : h > 0	      ? j->start + h
						      : 0;
			s->run_end[i] *= 1000;
			s->run_hist[i] = m == SIM_EST_HISTORY && h > 0;
		}
		for (int i = 0; i < in->npending; i++) {
			int ji = s->pend[i];
			const struct sim_job *job = &s->w->jobs[ji];
			int64_t h = hist_p80(s, job->team);

			s->pend_rt[i] = m == SIM_EST_EXACT ? job->duration - s->jr[ji].done : h;
			if (s->pend_rt[i] < 1)
				s->pend_rt[i] = 1;
			s->pend_hist[i] = m == SIM_EST_HISTORY && h > 0;
		}
		if (m != SIM_EST_MAX_RUNTIME) {
			e.run_end_ms = s->run_end;
			e.run_history = s->run_hist;
			e.pend_runtime_s = s->pend_rt;
			e.pend_history = s->pend_hist;
		}
		if ((rc = sched_estimate(&x, in, d, &e, err)))
			return rc;
		s->r->estimates++;
		for (int i = 0; i < in->npending; i++) {
			int ji = s->pend[i];

			if (x->job[i].kind != SCHED_EST_AT || s->pred[m][ji] >= 0)
				continue;
			s->pred[m][ji] = x->job[i].start_ms / 1000;
			s->pred_at[m][ji] = s->now;
			s->r->est_jobs[m]++;
		}
		sched_estimates_free(x);
	}
	return 0;
}

int sim_run(struct sim_report **out, const struct sim_workload *w, struct ty_err *err)
{
	const struct sim_config *c = &w->cfg;
	struct sim s;
	int rc;

	*out = NULL;
	if ((rc = sim_init(&s, w))) {
		ty_err_set(err, rc, "allocating the simulation");
		goto out;
	}
	for (int64_t t = c->tick; t <= c->horizon + c->drain; t += c->tick) {
		struct sched_input in;
		struct sched_decisions *d = NULL;

		if ((rc = advance(&s, t)))
			goto out;
		if (s.next == w->njobs && s.npend == 0 && s.nrun == 0)
			break;
		if (s.npend == 0)
			continue;
		build_input(&in, &s);
		if ((rc = sched_decide(&d, &in, err)))
			goto out;
		s.r->cycles++;
		if (c->estimate_every > 0 && t % c->estimate_every == 0 &&
		    (rc = estimate(&s, &in, d, err))) {
			sched_decisions_free(d);
			goto out;
		}
		rc = apply(&s, d);
		sched_decisions_free(d);
		if (rc) {
			ty_err_set(err, rc, "applying decisions");
			goto out;
		}
	}
	finish_report(&s);
	*out = s.r;
	s.r = NULL;
out:
	sim_report_free(s.r);
	sim_free(&s);
	return rc;
}

int sim_compare(struct sim_report **out, const struct sim_workload *w, struct ty_err *err)
{
	struct sim_workload old = *w; /* shares the jobs and teams: only cfg differs */
	struct sim_report *r = NULL, *o = NULL;
	int rc;

	*out = NULL;
	if ((rc = sim_run(&r, w, err)))
		return rc;
	old.cfg.victims_by_age = true;
	if ((rc = sim_run(&o, &old, err))) {
		sim_report_free(r);
		return rc;
	}
	r->lost_gpu_seconds_by_age = o->lost_gpu_seconds;
	r->preemptions_by_age = o->preemptions;
	sim_report_free(o);
	*out = r;
	return 0;
}
