/*
 * The policy core's pending reasons: filling them in and the text of each
 * (sched_reason_format).
 */
#include "policy_internal.h"

void sched__nodes_reason(struct ctx *c, struct sched_pending_out *o,
			 const struct sched_pending_in *p)
{
	int cnt = view_main(c)->cge[p->gpus_per_node];

	o->count = cnt;
	o->level = p->nodes > 1 ? p->required : SCHED_TOPO_NONE;
	o->reason = o->level && cnt >= p->nodes ? SCHED_WAIT_TOPOLOGY : SCHED_WAIT_NODES;
}

/*
 * Fill o for a job that CPUs or memory keep off nodes: NEVER_FITS_* when
 * `never` (allocatable too small), else WAIT_* (not free now).
 */
void sched__res_reason(struct ctx *c, struct sched_pending_out *o, const struct sched_pending_in *p,
		       int res, bool never)
{
	int64_t best = 0;
	int cnt = 0;

	for (int n = 0; n < c->nn; n++) {
		const struct sched_node_in *nd = &c->in->nodes[n];
		int64_t have = never ? (res == QUOTA_CPUS ? nd->cpus : nd->memory_mb)
				     : (res == QUOTA_CPUS ? c->cpu_left[n] : c->mem_left[n]);
		bool reports = res == QUOTA_CPUS ? nd->cpus > 0 : nd->memory_mb > 0;

		if (!nd->schedulable)
			continue;
		if (!reports) {
			cnt++;
			continue;
		}
		if (have > best)
			best = have;
		if (have >= (res == QUOTA_CPUS ? p->cpus_per_node : p->memory_mb_per_node))
			cnt++;
	}
	if (res == QUOTA_CPUS)
		o->reason = never ? SCHED_NEVER_FITS_CPUS : SCHED_WAIT_CPUS;
	else
		o->reason = never ? SCHED_NEVER_FITS_MEMORY : SCHED_WAIT_MEMORY;
	o->used = res == QUOTA_CPUS ? p->cpus_per_node : p->memory_mb_per_node;
	o->limit = best > 0 ? best : 0;
	o->count = cnt;
	o->level = SCHED_TOPO_NONE;
}

/*
 * A job that did not fit with c->rx left out: if it fits the GPUs free now
 * without leaving them out, CPUs or memory are what it waits for; say which.
 * Returns whether o was filled. The views are as before on return.
 */
bool sched__res_wait_reason(struct ctx *c, struct sched_pending_out *o,
			    const struct sched_pending_in *p)
{
	bool mem_only;

	if (!c->nrx || !sched__res_fits_without(c, p, -1))
		return false;
	/* memory when it alone stops it; else CPUs (they do, or it takes both) */
	mem_only = sched__res_fits_without(c, p, QUOTA_CPUS) &&
		   !sched__res_fits_without(c, p, QUOTA_MEMORY_MB);
	sched__res_reason(c, o, p, mem_only ? QUOTA_MEMORY_MB : QUOTA_CPUS, false);
	return true;
}

/* ---- reasons ------------------------------------------------------------------------------ */

static void rel_time(char *b, size_t n, int64_t dt_ms)
{
	int64_t s = dt_ms <= 0 ? 0 : (dt_ms + 999) / 1000;

	if (s == 0)
		snprintf(b, n, "now");
	else if (s < 60)
		snprintf(b, n, "in %llds", (long long)s);
	else if (s < 3600)
		snprintf(b, n, "in %lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else
		snprintf(b, n, "in %lldh%02lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
}

static const char *plural(long long n)
{
	return n == 1 ? "" : "s";
}

/*
 * Why a job is kept off spot nodes, after `what`: "waiting for on-demand
 * nodes: preempted on spot 3 times (spot.max_preemptions 3)", "waiting for
 * on-demand nodes (spot.allowed is false)".
 */
static const char *spot_why(char *b, size_t n, const char *what, const struct sched_pending_in *p)
{
	if (p->spot == SCHED_SPOT_FALLBACK)
		snprintf(b, n, "%s: preempted on spot %d time%s (spot.max_preemptions %d)", what,
			 p->spot_preemptions, plural(p->spot_preemptions),
			 p->spot_max_preemptions);
	else
		snprintf(b, n, "%s (spot.allowed is false)", what);
	return b;
}

int sched_reason_format(char *buf, size_t n, const struct sched_input *in,
			const struct sched_decisions *d, int i, const char *when)
{
	return sched_reason_format_at(buf, n, in, d, i, when, NULL);
}

int sched_reason_format_at(char *buf, size_t n, const struct sched_input *in,
			   const struct sched_decisions *d, int i, const char *when,
			   const char *protected_when)
{
	const struct sched_pending_out *o = &d->pending[i];
	const struct sched_pending_in *p = &in->pending[i];
	const char *team = o->team >= 0 && o->team < in->nteams && in->teams[o->team].name
			       ? in->teams[o->team].name
			       : "?";
	char tb[48], pb[64], shape[96], prot[200] = "", sw[160];
	int N = p->nodes, G = p->gpus_per_node;

	if (!when) {
		rel_time(tb, sizeof(tb), o->at_ms - in->now_ms);
		when = tb;
	}
	if (o->protected_job && o->protected_count > 0) {
		const char *why = o->protected_by_delay ? "reclaim delay" : "minimum runtime";

		if (!protected_when) {
			char rb[40];

			rel_time(rb, sizeof(rb), o->protected_until_ms - in->now_ms);
			/* "in 9m00s" → "9m00s from now" */
			snprintf(pb, sizeof(pb), "%s from now",
				 strncmp(rb, "in ", 3) ? rb : rb + 3);
			protected_when = pb;
		}
		if (o->protected_count == 1)
			snprintf(prot, sizeof(prot),
				 ": the borrowing job that holds them is protected until %s "
				 "(%s)",
				 protected_when, why);
		else
			snprintf(prot, sizeof(prot),
				 ": the %d borrowing jobs that hold them are protected until %s "
				 "(%s)",
				 o->protected_count, protected_when, why);
	}
	if (N == 1)
		snprintf(shape, sizeof(shape), "a node with %d free GPU%s", G, plural(G));
	else if (o->level)
		snprintf(shape, sizeof(shape), "%d × %d GPUs in one %s", N, G,
			 sched_topo_name(o->level));
	else
		snprintf(shape, sizeof(shape), "%d × %d GPUs", N, G);

	switch (o->reason) {
	case SCHED_PLACED:
		return snprintf(buf, n, "placed");
	case SCHED_WAIT_NODES:
		if (N == 1)
			return snprintf(buf, n, "no node has %d free GPU%s%s", G, plural(G), prot);
		if (o->level)
			return snprintf(buf, n, "waiting for %s%s", shape, prot);
		return snprintf(buf, n, "waiting for %s (%d node%s ha%s %d free)%s", shape,
				o->count, plural(o->count), o->count == 1 ? "s" : "ve", G, prot);
	case SCHED_WAIT_TOPOLOGY:
		return snprintf(buf, n,
				"waiting for %s (%d nodes have %d free, but no %s has %d)%s", shape,
				o->count, G, sched_topo_name(o->level), N, prot);
	case SCHED_NEVER_FITS:
		if (N == 1)
			return snprintf(buf, n, "no schedulable node has %d GPU%s", G, plural(G));
		return snprintf(buf, n, "the cluster has no %d schedulable nodes with %d GPU%s%s%s",
				N, G, plural(G), o->level ? " in one " : "",
				o->level ? sched_topo_name(o->level) : "");
	case SCHED_WAIT_BORROW_LIMIT:
		if (o->used >= o->limit)
			return snprintf(
			    buf, n,
			    "team %s at borrowing limit (%lld of %lld borrowed GPUs in use)", team,
			    (long long)o->used, (long long)o->limit);
		return snprintf(
		    buf, n,
		    "team %s would exceed its borrowing limit (%lld of %lld borrowed GPUs in "
		    "use, job needs %d)",
		    team, (long long)o->used, (long long)o->limit, o->count);
	case SCHED_WAIT_COHORT:
		return snprintf(
		    buf, n,
		    "team %s may hold %lld GPUs now (%lld in use, job needs %d): its cohort "
		    "has no more idle GPUs to lend",
		    team, (long long)o->limit, (long long)o->used, o->count);
	case SCHED_WAIT_NOMINAL:
		return snprintf(
		    buf, n,
		    "team %s at nominal quota (%lld of %lld GPUs in use, job needs %d; no "
		    "cohort to borrow from)",
		    team, (long long)o->used, (long long)o->limit, o->count);
	case SCHED_WAIT_PREEMPTION:
		if (o->count <= 1)
			return snprintf(buf, n, "waiting for job %lld to be preempted",
					(long long)o->other_job);
		return snprintf(buf, n, "waiting for job %lld and %d other%s to be preempted",
				(long long)o->other_job, o->count - 1, plural(o->count - 1));
	case SCHED_WAIT_RESERVED:
		return snprintf(buf, n, "reserved for job %lld until %s", (long long)o->other_job,
				when);
	case SCHED_WAIT_HEAD:
		if (o->on_demand_only)
			return snprintf(buf, n, "%s; next in line, nodes reserved from %s",
					spot_why(sw, sizeof(sw), "waiting for on-demand nodes", p),
					when);
		return snprintf(buf, n, "waiting for %s%s; next in line, nodes reserved from %s",
				shape, prot, when);
	case SCHED_WAIT_BEHIND:
		return snprintf(buf, n, "queued behind job %lld (backfill is off)",
				(long long)o->other_job);
	case SCHED_WAIT_SCAN_LIMIT:
		return snprintf(
		    buf, n, "not considered this cycle (backfill scan limit of %d jobs)", o->count);
	case SCHED_WAIT_PORT:
		return snprintf(buf, n, "no free rendezvous port in %d-%d on the fitting nodes",
				in->cfg.port_lo, in->cfg.port_hi);
	case SCHED_WAIT_BACKOFF:
		if (!p->last_failure || !*p->last_failure)
			return snprintf(buf, n, "retrying after a failure: backoff until %s", when);
		return snprintf(buf, n, "retrying after a%s %s: backoff until %s",
				strchr("aeiou", p->last_failure[0]) ? "n" : "", p->last_failure,
				when);
	case SCHED_NEVER_FITS_EXCLUDED:
		if (N == 1)
			return snprintf(buf, n,
					"no schedulable node has %d GPU%s but the %d node%s "
					"excluded after this job's failures",
					G, plural(G), o->count, plural(o->count));
		return snprintf(buf, n,
				"the cluster has no %d schedulable nodes with %d GPU%s%s%s once "
				"the %d node%s excluded after this job's failures are left out",
				N, G, plural(G), o->level ? " in one " : "",
				o->level ? sched_topo_name(o->level) : "", o->count,
				plural(o->count));
	case SCHED_WAIT_ON_DEMAND:
		return snprintf(buf, n, "%s",
				spot_why(sw, sizeof(sw),
					 o->count ? "the on-demand nodes can never hold it"
						  : "waiting for on-demand nodes",
					 p));
	case SCHED_NEVER_FITS_CPUS:
	case SCHED_NEVER_FITS_MEMORY:
	case SCHED_WAIT_CPUS:
	case SCHED_WAIT_MEMORY: {
		bool cpus = o->reason == SCHED_NEVER_FITS_CPUS || o->reason == SCHED_WAIT_CPUS;
		bool never = o->reason == SCHED_NEVER_FITS_CPUS || o->reason == SCHED_NEVER_FITS_MEMORY;
		const char *what = cpus ? (o->used == 1 ? "CPU" : "CPUs") : "MiB of memory";
		char most[64] = "";

		if (o->limit > 0)
			snprintf(most, sizeof(most), " (largest %s: %lld)",
				 never ? "allocatable" : "free now", (long long)o->limit);
		if (never && N == 1)
			return snprintf(buf, n, "no node has %lld %s allocatable%s",
					(long long)o->used, what, most);
		if (never)
			return snprintf(buf, n,
					"the cluster has no %d schedulable nodes with %lld %s "
					"allocatable and %d GPU%s%s",
					N, (long long)o->used, what, G, plural(G), most);
		if (N == 1)
			return snprintf(buf, n, "no node has %lld free %s%s%s", (long long)o->used,
					what, G ? " where GPUs are free" : "", most);
		return snprintf(buf, n, "waiting for %d nodes with %lld free %s%s%s", N,
				(long long)o->used, what, G ? " and GPUs" : "", most);
	}
	case SCHED_WAIT_QUOTA_CPUS:
		return snprintf(buf, n,
				"team %s at its CPU quota (%lld of %lld CPUs in use, job needs %lld)",
				team, (long long)o->used, (long long)o->limit, (long long)o->need);
	case SCHED_WAIT_QUOTA_MEMORY:
		return snprintf(buf, n,
				"team %s at its memory quota (%lld of %lld MiB in use, job needs "
				"%lld)",
				team, (long long)o->used, (long long)o->limit, (long long)o->need);
	case SCHED_WAIT_BUDGET: {
		const struct sched_team_in *ti = &in->teams[o->team];
		const char *per = ti->budget_period && *ti->budget_period ? ti->budget_period
									 : "period";
		char needs[64] = "";

		if (ti->budget <= 0)
			return snprintf(buf, n, "team %s budget 0.00 per %s: nothing may start",
					team, per);
		if (p->max_cost > 0)
			snprintf(needs, sizeof(needs), ", job needs up to %.2f", p->max_cost);
		return snprintf(buf, n, "team %s budget %.2f per %s: %.2f spent%s", team,
				ti->budget, per, o->spent, needs);
	}
	case SCHED_INVALID:
		if (p->team < 0 || p->team >= in->nteams)
			return snprintf(buf, n, "invalid request: unknown team");
		return snprintf(buf, n, "invalid request: %d node%s with %d GPU%s each", N,
				plural(N), G, plural(G));
	default:
		return snprintf(buf, n, "pending");
	}
}
