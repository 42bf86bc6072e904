/*
 * Pure quota and fair-share arithmetic: usage decay, the fair-share factor
 * and what a team may hold given its cohort. No I/O, no clock: every time
 * is an argument. Used by scheduler/core and by the daemon that keeps the
 * decayed usage.
 *
 * GPU quantities are int64_t; a limit of -1 means "no limit".
 * Nothing here allocates; every function only reads its arguments.
 */
#ifndef TY_QUOTA_H
#define TY_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define QUOTA_NO_LIMIT (-1)
#define QUOTA_DEFAULT_HALF_LIFE_S (7 * 24 * 3600)

/*
 * Usage decayed over elapsed_ms with the given half-life:
 * usage × 2^(−elapsed / half_life). elapsed <= 0 returns usage unchanged;
 * half_life_s <= 0 means no decay. Decay then add the new GPU-seconds:
 * u = quota_usage_decay(u, now - last, hl) + gpu_seconds.
 */
double quota_usage_decay(double usage, int64_t elapsed_ms, int64_t half_life_s);

/*
 * Fair-share factor, Slurm's classic form F = 2^(−u/s) with
 * u = usage / total_usage (0 when total_usage <= 0) and
 * s = weight / total_weight. In (0, 1]: 1 for a team that used nothing,
 * 0.5 for a team that used exactly its share. A weight <= 0 is taken as a
 * share of 0, which gives F = 0 unless u = 0 (then 1).
 */
double quota_fairshare(double usage, double total_usage, double weight, double total_weight);

/* One team's quota and current use. */
struct quota_team {
	int64_t nominal;	 /* >= 0 */
	int64_t borrowing_limit; /* -1 = no limit */
	int64_t lending_limit;	 /* -1 = no limit */
	int64_t used;		 /* GPUs in use (running + placed) */
	bool in_cohort;		 /* false: neither borrows nor lends */
};

/* GPUs in use above nominal: max(0, used − nominal). */
int64_t quota_borrowed(const struct quota_team *t);
/*
 * Idle nominal the team lends out now: min(lending limit, max(0, nominal −
 * used)); 0 outside a cohort.
 */
int64_t quota_lendable(const struct quota_team *t);

/* Sums over the members of one cohort, kept current as use changes. */
struct quota_cohort {
	int64_t lendable; /* Σ quota_lendable */
	int64_t borrowed; /* Σ quota_borrowed */
};

/* Add (sign = +1) or remove (sign = −1) t's current contribution to c. */
void quota_cohort_account(struct quota_cohort *c, const struct quota_team *t, int sign);

/*
 * GPUs the cohort can lend t now: the peers' lendable idle nominal minus
 * what the peers already borrow, never below 0:
 * max(0, (c.lendable − lendable(t)) − (c.borrowed − borrowed(t))).
 * c is t's cohort with t accounted in it; NULL or !t->in_cohort gives 0.
 */
int64_t quota_cohort_available(const struct quota_team *t, const struct quota_cohort *c);

/*
 * GPUs t may hold now: nominal + min(borrowing limit, cohort available).
 * c as for quota_cohort_available().
 */
int64_t quota_admissible(const struct quota_team *t, const struct quota_cohort *c);

/* Why `gpus` more GPUs are not admissible for t now. */
enum quota_verdict {
	QUOTA_OK = 0,
	QUOTA_OVER_NOMINAL,	 /* no cohort: would exceed nominal */
	QUOTA_OVER_BORROW_LIMIT, /* would borrow more than its borrowing limit */
	QUOTA_OVER_COHORT /* the cohort cannot lend enough now (idle nominal, lending limits) */
};

/* Whether t may take `gpus` more GPUs now, and if not which limit stops it. */
enum quota_verdict quota_check(const struct quota_team *t, const struct quota_cohort *c,
			       int64_t gpus);

/*
 * CPUs and memory: a team's quota may cap them besides GPUs. These caps are
 * plain ceilings on what the team holds at once (no cohort, no borrowing or
 * lending, no reclaim): simple to predict, and GPUs stay the resource that
 * is shared and fought over. A job is charged nodes × per-node ask.
 */
enum quota_res { QUOTA_CPUS = 0, QUOTA_MEMORY_MB = 1, QUOTA_NRES };

/* One vector of the capped resources (CPUs, MiB of memory). */
struct quota_vec {
	int64_t v[QUOTA_NRES];
};

/* A team's caps (-1 = no cap on that resource) and what it holds now. */
struct quota_caps {
	struct quota_vec limit;
	struct quota_vec used;
};

/* "CPUs", "MiB of memory": borrowed static strings for messages. */
const char *quota_res_name(enum quota_res r);

/*
 * What a job of `nodes` × (cpus_per_node, memory_mb_per_node) is charged:
 * the products, saturating at INT64_MAX (never negative for >= 0 input).
 */
struct quota_vec quota_job_charge(int64_t nodes, int64_t cpus_per_node,
				  int64_t memory_mb_per_node);

/* Add sign × `by` to *v (sign +1 or −1). */
void quota_vec_add(struct quota_vec *v, const struct quota_vec *by, int sign);

/*
 * The first resource whose cap `ask` more would exceed (used + ask >
 * limit), or -1 when every capped resource has room. A resource asked 0
 * always has room, so a team over a cap still runs jobs that ask none.
 */
int quota_caps_check(const struct quota_caps *c, const struct quota_vec *ask);

/*
 * What can never run (docs/scheduling.md, "Cannot run"): the API refuses
 * such a job at submission (422 unschedulable) and the scheduler gives a
 * queued one the reason "cannot run: " + the same text.
 *
 * The most of its nominal a team could ever lend: min(nominal, lending
 * limit); 0 outside a cohort.
 */
int64_t quota_lendable_max(const struct quota_team *t);
/*
 * The most GPUs t can ever hold, whatever the others use: nominal +
 * min(borrowing limit, peers_lendable), where peers_lendable is the sum of
 * quota_lendable_max over the other teams of its cohort; outside a cohort
 * its nominal. t->used is not read.
 */
int64_t quota_ceiling(const struct quota_team *t, int64_t peers_lendable);
/*
 * Why `need` GPUs exceed that, as one lowercase line, e.g. "team 'ml' can
 * get at most 4 GPUs (nominal 4, no borrowing: no cohort), the job needs
 * 6". Writes at most n bytes; returns the length it wanted, like snprintf.
 */
int quota_ceiling_format(char *buf, size_t n, const char *team, const struct quota_team *t,
			 int64_t peers_lendable, int64_t need);

/*
 * A node shape the cluster has or may have: a registered node that is not
 * lost (count 1) or an operator-declared node pool (count = its max_nodes).
 * cpus or memory_mb 0 = not reported: that resource does not limit it.
 */
struct quota_shape {
	const char *name; /* node id or "pool NAME", for messages (borrowed) */
	int64_t gpus, cpus, memory_mb;
	int64_t count;
};
/*
 * Whether `nodes` nodes of (gpus, cpus, memory_mb) each could ever be found
 * among the shapes s[0..ns). No shape at all (a fresh install before any
 * executor registered) fits everything. When it does not fit, buf gets why
 * (at most n bytes, NUL-terminated), e.g. "no node can hold 9 GPUs: the
 * largest node has 2 (node-a, node-b)".
 */
bool quota_shape_fits(char *buf, size_t n, const struct quota_shape *s, int ns, int64_t nodes,
		      int64_t gpus, int64_t cpus, int64_t memory_mb);

#endif
