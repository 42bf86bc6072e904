/*
 * The policy core's internals, shared by its files (policy*.c) and by
 * nothing else: the decision's state (struct ctx) and its views, and the
 * functions one file uses from another (sched__ prefix). policy.h is the
 * contract.
 */
#ifndef TY_SCHED_POLICY_INTERNAL_H
#define TY_SCHED_POLICY_INTERNAL_H

#include "policy.h"

#include "quota.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NG 65	     /* free-GPU values 0..64 */
#define NGE (NG + 1) /* ge[] entries; ge[NG] stays 0 */
#define NLEV 3	     /* block, rack, zone (levels 0..2); the cluster is level 3 */
#define LEV_CLUSTER 3
#define NOSPARE INT32_MAX

enum { DEFAULT_SCAN = 10000, DEFAULT_PLANS = 1000 };

/* ---- state ------------------------------------------------------------------------------- */

/*
 * Free GPUs per node as one placement pass sees them, with counters that
 * answer "does domain d have N nodes with >= G free" in O(1) and bitmaps
 * that list the nodes with exactly g free in index order (best fit).
 */
struct view {
	int16_t *free;	  /* per node; -1 = not usable */
	int32_t *ge;	  /* [ndoms * NGE]: nodes of the domain with free >= g */
	int64_t *sum;	  /* [ndoms]: free GPUs of the domain */
	int32_t cge[NGE]; /* the same for the whole cluster */
	uint64_t *bits;	  /* [NG * words]: nodes with free == g */
	uint64_t *summ;	  /* [NG * swords]: which words of bits are non-zero */
	int32_t bcnt[NG];
	/* shapes: smallest N known not to fit / largest N known to fit, per (required, G) */
	int32_t nofit[SCHED_TOPO_COUNT][NG];
	int32_t fits[SCHED_TOPO_COUNT][NG];
};

struct portset {
	int *v;
	int n, cap;
	int low; /* no port below this is free (ports are only taken during a decision) */
	bool init;
};

struct hold {
	int pending;
	int nnodes, gpus; /* gpus per node */
	int first;	  /* into ctx.hold_nodes / hold_vp */
	int64_t end_ms;
};

struct evt {
	int64_t t;
	int node;
	int gpus;
};

struct ctx {
	const struct sched_input *in;
	struct sched_decisions *d;
	int64_t now;
	int nn, words, swords;

	/* nodes */
	uint64_t *full, *busy;
	int32_t *spare; /* GPUs a long job may take from a reserved node; NOSPARE = not reserved */
	int *ndom;	/* [nn * NLEV] global domain id or -1 */
	struct portset *ports;

	/* domains: levels stored one after another */
	int ndoms, lev_start[NLEV + 1];
	int *dom_anc;		  /* [ndoms * NLEV]: ancestor at each level (or itself), -1 */
	int *dom_off, *dom_nodes; /* nodes of each domain, ascending */

	struct view main, lng, cap, tmp;
	bool have_resv, cap_built;
	/*
	 * Spot (docs/scheduling.md, "Spot"): the same views with the spot
	 * nodes left out, for jobs kept off them (od), kept in step by
	 * sched__refresh_node(); so such a job costs nothing extra and keeps the
	 * shape memos, which belong to each view. Only when nspot > 0.
	 */
	struct view main_od, lng_od, cap_od;
	bool cap_od_built, od;
	int nspot; /* schedulable spot nodes */

	/* teams */
	struct quota_team *qt;
	int *cohort;		   /* per team, -1 = none */
	int64_t *reclaim_delay_ms; /* per team: its cohort's reclaim delay */
	struct quota_cohort *coh;
	int ncoh;
	/*
	 * GPUs of the input's running gangs minus those stopping or chosen as
	 * victims: what reclaim judges borrowing by. This decision's
	 * placements and holds never make a team a reclaim victim.
	 */
	int64_t *reclaim_used;
	double *spent; /* per team: budget spend, this decision's placements added */
	uint8_t *tier0; /* per pending job: sched_pending_out.within_nominal */
	int *runs_off, *runs;  /* per team: running gangs in victim-preference order */
	int64_t *run_gpus;
	bool *claimed;

	/* the head job */
	int64_t resv_ms, head_need;
	int head_team;
	bool head_borrows;

	/* holds (jobs waiting for their victims) and this decision's placements, for the timeline
	 */
	struct hold *holds;
	int nholds, cap_holds;
	int *hold_nodes, *hold_vp;
	int nhold_nodes, cap_hold_nodes, cap_hold_vp;

	/* scratch */
	int *pick;
	int16_t *extra;
	int *touched;
	int ntouched;
	int32_t *dcount; /* [ndoms + 1], the cluster last */
	int64_t *team_freed;
	int *cand, *vict;
	int *vict_keep, *vict_use; /* fewest_victims(): the greedy set, the useful candidates */
	int64_t exact_left;	    /* victim sets the exact search may still try */
	int16_t *f;
	struct evt *evts;
	int nevts, cap_evts;

	bool nolearn; /* the job sees fewer nodes (exclusions): sched__fit() must not memo */
	int64_t
	    gen; /* placements + holds so far: preemption plans that failed before stay failed */
	int32_t *plan_memo;
	int64_t *plan_gen;
	int scan_left, plans_left;
	/*
	 * sched__try_preempt() modes: stopping_only = no new victims (a job keeping
	 * the nodes held for it); dry = find out whether protected borrowing
	 * gangs alone stand in the way of reclaim, commit nothing (dry_left
	 * bounds these searches).
	 */
	bool stopping_only, dry;
	int dry_left;

	int cap_pl, cap_plp, cap_pre, cap_res;
	int resv_attempts; /* reservation searches left */
	int *preempting;   /* running gangs already stopping */
	int npreempting;
	/*
	 * Per running gang: the input.pending index of the job it is being
	 * preempted for (preempted_for), -1 = none pending. Only that job may
	 * count on its GPUs: a victim's GPUs are for its beneficiary.
	 */
	int *owner;
	int *lower; /* [team * SCHED_CLASS_COUNT + cls]: preemptible gangs of a class below cls */
	uint8_t *tmark;

	/*
	 * CPUs and memory (docs/scheduling.md, "CPUs and memory"): what is left
	 * of each node's allocatable (NOLIMIT where the node reports none), the
	 * nodes that report some (lim), and each team's caps. rx lists the
	 * nodes the job at hand cannot use for lack of CPUs or memory now; they
	 * are left out of the views like excluded nodes while it is decided.
	 */
	int64_t *cpu_left, *mem_left;
	int64_t cpu_min, mem_min; /* least left on a schedulable node (only falls in a decision) */
	int *lim, nlim;
	int *rx, nrx;
	struct quota_caps *caps;
	struct quota_vec head_charge;
};

#define NOLIMIT INT64_MAX

static inline int popc(uint64_t x)
{
	return __builtin_popcountll(x);
}

static inline int clamp_gpus(int g)
{
	return g < 0 ? 0 : g > SCHED_MAX_GPUS ? SCHED_MAX_GPUS : g;
}

/* Whether node n is left out of the views of jobs kept off spot nodes. */
static inline bool spot_node(const struct ctx *c, int n)
{
	return c->in->nodes[n].spot && c->in->nodes[n].schedulable;
}

/* The views the job at hand sees: with the spot nodes (od) or all. */
static inline struct view *view_main(struct ctx *c)
{
	return c->od ? &c->main_od : &c->main;
}

static inline struct view *view_lng(struct ctx *c)
{
	return c->od ? &c->lng_od : &c->lng;
}

/*
 * The queue order as three unsigned words compared in turn: class, team
 * fair-share rank (equal F, equal rank) and priority (higher first) in a;
 * submit time in b; job id in c; the input index settles the rest.
 */
struct okey {
	uint64_t a, b, c;
	int idx;
};

/* ---- across files ------------------------------------------------------------------------ */

/* policy_fit.c: node views, topology domains, gang fit, CPUs and memory */
int sched__view_alloc(struct view *v, const struct ctx *c);
void sched__view_release(struct view *v);
void sched__view_copy(struct view *dst, const struct view *src, const struct ctx *c);
void sched__view_build(const struct ctx *c, struct view *v, const int16_t *f);
int sched__actual_free(const struct ctx *c, int n);
void sched__refresh_node(struct ctx *c, int n);
int sched__take_gpus(struct ctx *c, int n, int k, int *out);
int sched__cmp_int(const void *a, const void *b);
int sched__ports_init(struct ctx *c, int n);
int sched__port_lowest(struct ctx *c, int n);
int sched__port_take(struct ctx *c, int n, int port);
int sched__build_domains(struct ctx *c);
int sched__pick_best(const struct ctx *c, const struct view *v, int dd, int G, int m, int *out);
bool sched__fit(struct ctx *c, struct view *v, int N, int G, int req);
bool sched__could_fit(struct ctx *c, int N, int G, int req, bool od);
bool sched__could_fit_excluding(struct ctx *c, const struct sched_pending_in *p, int *nx);
bool sched__fits_quickly_no(const struct view *v, int N, int G, int req);
void sched__set_excluded(struct ctx *c, const struct sched_pending_in *p, bool on);
void sched__res_scan(struct ctx *c, const struct sched_pending_in *p);
void sched__res_exclude(struct ctx *c, bool on);
bool sched__could_fit_res(struct ctx *c, const struct sched_pending_in *p, int res);
bool sched__res_fits_without(struct ctx *c, const struct sched_pending_in *p, int res);

/* policy_order.c: quota admission helpers, the queue order, teams */
struct quota_cohort *sched__cohort_of(struct ctx *c, int t);
void sched__team_add(struct ctx *c, int t, int64_t gpus);
bool sched__resv_quota_ok(struct ctx *c, int t, int64_t need, const struct quota_vec *ask);
uint64_t sched__bias(int64_t v);
void sched__okey_sort(struct okey *k, struct okey *tmp, int n);
int sched__cmp_double_desc(const void *a, const void *b);
int sched__setup_teams(struct ctx *c, const struct sched_input *in);
/* Whether starting p would exceed its team's money budget (policy.h, has_budget). */
bool sched__over_budget(const struct ctx *c, const struct sched_pending_in *p);
/* Count p's max_cost against its team's budget: it was placed. */
void sched__budget_charge(struct ctx *c, const struct sched_pending_in *p);

/* policy_decide.c: placement, one job's decision, sched_decide() */
int sched__grow(void **p, int *cap, int need, size_t sz);
int sched__place(struct ctx *c, int i, bool lng, bool *placed);

/* policy_victims.c: preemption planning */
int sched__cmp_victim(const void *a, const void *b, void *arg);
bool sched__held_fits(struct ctx *c, const struct sched_pending_in *p, const struct view *v,
		      const int16_t *extra, bool lng_plan);
bool sched__victims_stopping(const struct ctx *c, int i);
int sched__try_preempt(struct ctx *c, int i, bool lng, struct view *v, int64_t deficit, bool *done);

/* policy_reservations.c: holds, reservations, the head job's time */
int sched__hold_add(struct ctx *c, int i, int N, int G, int64_t end_ms);
int sched__add_reservation(struct ctx *c, int i, enum sched_resv_kind kind, int64_t at, int N,
			   int G, const int *nodes);
int sched__reserve(struct ctx *c, int i, bool *found);

/* policy_reasons.c: pending reasons and their text */
void sched__nodes_reason(struct ctx *c, struct sched_pending_out *o,
			 const struct sched_pending_in *p);
void sched__res_reason(struct ctx *c, struct sched_pending_out *o, const struct sched_pending_in *p,
		       int res, bool never);
bool sched__res_wait_reason(struct ctx *c, struct sched_pending_out *o,
			    const struct sched_pending_in *p);

#endif
