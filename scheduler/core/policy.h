/*
 * The policy core: one call turns a snapshot of the cluster (nodes, teams,
 * running gangs, pending jobs, the time and the configuration) into
 * decisions (placements, preemptions, reservations and, for every pending
 * job, its place in the order, its team's fair-share factor and why it
 * waits). Pure: no I/O, no clock, no randomness, no hash order; identical
 * input gives identical output. docs/scheduling.md explains the policy.
 *
 * Ownership: the core borrows everything in struct sched_input for the
 * duration of sched_decide() and keeps no pointer into it afterwards.
 * sched_decide() returns one new struct sched_decisions that owns all its
 * arrays; free it with sched_decisions_free(). Nothing is shared between
 * calls, so concurrent calls on different inputs are safe.
 *
 * Compatibility: this header only grows (new fields at the end of structs,
 * new enum values before the *_COUNT markers, new functions). Zero-filled
 * new fields keep today's behaviour, so initialise inputs with `= {0}` or
 * memset and sched_config_default().
 */
#ifndef TY_SCHED_POLICY_H
#define TY_SCHED_POLICY_H

#include "core.h" /* struct sched_placement, sched_placement_clear() */
#include "ty_err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A node's GPUs are bits of a uint64_t: GPUs past the 64th are never used. */
#define SCHED_MAX_GPUS 64
/*
 * The exact fewest-victims search (above the greedy one) tries at most this
 * many victim sets per pending job, and this many in one decision; past
 * them the greedy, minimal set is kept (stats.victim_search_cutoffs).
 */
#define SCHED_VICTIM_BUDGET 8192
#define SCHED_VICTIM_BUDGET_CYCLE 65536

/*
 * Which nodes a job may use by pool (docs/scheduling.md, "Spot"). ANY (0):
 * spot and on-demand; NEVER: its spec says spot.allowed false; FALLBACK: it
 * reached spot.max_preemptions spot preemptions and its fallback is
 * "on_demand". NEVER and FALLBACK keep it off spot nodes.
 */
enum sched_spot_rule { SCHED_SPOT_ANY = 0, SCHED_SPOT_NEVER = 1, SCHED_SPOT_FALLBACK = 2 };

/* Priority classes, highest first (the numeric value is the rank). */
enum sched_class {
	SCHED_CLASS_HIGH = 0,
	SCHED_CLASS_NORMAL = 1,
	SCHED_CLASS_LOW = 2,
	SCHED_CLASS_SCAVENGER = 3,
	SCHED_CLASS_COUNT
};

/* A topology level; SCHED_TOPO_NONE (0) = no requirement. */
enum sched_topo {
	SCHED_TOPO_NONE = 0,
	SCHED_TOPO_BLOCK = 1, /* NVLink/NVSwitch or IB-leaf domain */
	SCHED_TOPO_RACK = 2,
	SCHED_TOPO_ZONE = 3,
	SCHED_TOPO_COUNT
};

/* "high" … "scavenger", "block" … "zone" ("none" for SCHED_TOPO_NONE); borrowed static strings. */
const char *sched_class_name(enum sched_class c);
const char *sched_topo_name(enum sched_topo t);
/* The enum value of a name, or -1 for an unknown name (NULL → -1 / SCHED_TOPO_NONE). */
int sched_class_parse(const char *name);
int sched_topo_parse(const char *name);

/* ---- input (all borrowed by the core) --------------------------------------------------- */

struct sched_node_in {
	const char *id; /* for messages only */
	int gpus;	/* 0..64 (more are treated as 64) */
	/*
	 * GPUs held by anything (bit g = GPU g). The GPUs of the running gangs
	 * below are added by the core, so either way of filling it is right.
	 */
	uint64_t busy;
	bool schedulable; /* false: draining, lost, cordoned: no new work, running work stays */
	/*
	 * Topology labels, NULL or "" = unlabelled. A domain is identified by
	 * its path: the block of a node is (zone, rack, block), its rack
	 * (zone, rack), its zone (zone), so equal block names in two racks are
	 * two blocks. A node unlabelled at a level shares that level with no
	 * other node; a block counts as inside a rack (for a required rack)
	 * only when its nodes carry the rack label, likewise for zones.
	 */
	const char *zone, *rack, *block;
	const int *ports; /* rendezvous ports held on this node, any order */
	int nports;
	bool spot; /* in the spot pool (label pool=spot); false = on-demand */
	/*
	 * Allocatable CPUs and MiB of memory, as the node's executor reports
	 * them (after its operator reserve). 0 = not reported (an older
	 * executor): that resource is not limited on this node. The gangs on a
	 * node never ask more than this in total.
	 */
	int64_t cpus, memory_mb;
};

struct sched_team_in {
	const char *name;	 /* for pending reasons */
	int64_t nominal_gpus;	 /* >= 0 */
	int64_t borrowing_limit; /* GPUs above nominal it may borrow; -1 = no limit */
	int64_t lending_limit;	 /* GPUs of its idle nominal it may lend; -1 = no limit */
	const char *cohort;	 /* NULL or "" = no cohort (cannot borrow or lend) */
	double weight;		 /* fair-share weight, > 0 (<= 0 is taken as 1) */
	double usage;		 /* decayed GPU-seconds at now (quota_usage_decay), >= 0 */
	/*
	 * Caps on the CPUs and MiB of memory its gangs hold at once (nodes ×
	 * per-node ask), whatever their GPUs; 0 = no cap. Plain ceilings: no
	 * cohort, borrowing or reclaim (quota.h, struct quota_caps).
	 */
	int64_t max_cpus, max_memory_mb;
	/*
	 * Money budget (docs/scheduling.md, "Budgets"); has_budget false = none.
	 * budget >= 0 per period in the rate table's units; spent = the
	 * period's spend before this decision; budget_period ("day", "week",
	 * "month") is for the reason text only. A job starts only while
	 * spent < budget and spent + its max_cost <= budget; a job placed in
	 * this decision adds its max_cost to spent for the jobs after it.
	 */
	bool has_budget;
	double budget, spent;
	const char *budget_period;
};

struct sched_running_in {
	int64_t job;
	int team; /* index into sched_input.teams */
	enum sched_class cls;
	int priority;
	int64_t start_ms;
	int64_t checkpoint_ms; /* newest verified checkpoint; <= start_ms = none (work lost from
				  start) */
	int64_t min_runtime_s; /* the job's own; the class minimum applies too, the larger wins */
	int64_t end_by_ms;     /* start + max_runtime: when it will have ended at the latest */
	bool preemptible;
	/*
	 * Already told to stop (a preemption decided earlier, a cancel): its
	 * GPUs are still held but will be free soon. Never chosen as a victim
	 * again; its GPUs may be counted on by the job it was preempted for
	 * (see preempted_for) or, failing that, by any job needing them.
	 */
	bool preempting;
	int64_t preempted_for; /* job id it is being preempted for, 0 = none/unknown */
	int nnodes;
	const int *node;      /* nnodes indices into sched_input.nodes */
	const uint64_t *gpus; /* nnodes GPU masks, gpus[r] on node[r] */
	int64_t cpus_per_node, memory_mb_per_node; /* held on each of its nodes (0 = none) */
};

struct sched_pending_in {
	int64_t job;
	int team; /* index into sched_input.teams */
	enum sched_class cls;
	int priority; /* higher first within a class and fair-share tie */
	int64_t submit_ms;
	int nodes;	   /* >= 1 */
	int gpus_per_node; /* 0..64 */
	bool per_node;	   /* launch per_node: one process per node, else one per GPU */
	enum sched_topo required;
	int64_t min_runtime_s; /* carried into the job's protection once it runs */
	int64_t max_runtime_s; /* > 0; a placed job ends by now + this */
	const int *exclude;    /* node indices this job must not use (e.g. a suspect node) */
	int nexclude;
	/*
	 * Of exclude, the last nexclude_held are nodes held for another job's
	 * expedited requeue: kept off like the rest, but a hold lapses, so
	 * they never make the job SCHED_NEVER_FITS_EXCLUDED.
	 */
	int nexclude_held;
	/*
	 * The nodes the previous decision held for this job while its victims
	 * stop (that decision's SCHED_RESV_PREEMPTION reservation), node
	 * indices in any order; NULL/0 = none. Used only when nheld == nodes:
	 * once they fit the job it starts there rather than wherever fits best,
	 * and while a gang stopping for it (preempted_for) still holds GPUs it
	 * keeps waiting for them (new victims are not chosen for it then), so
	 * the head job's reservation, computed with that hold, stays valid.
	 */
	const int *held_nodes;
	int nheld;
	/*
	 * Retry backoff: not eligible before this time (<= now_ms: eligible).
	 * Such a job keeps its place in the order but is not tried, takes no
	 * quota and reserves nothing: SCHED_WAIT_BACKOFF, at_ms = this.
	 * last_failure (NULL = "a failure") names why, for the reason text,
	 * e.g. "system failure on node-b".
	 */
	int64_t not_before_ms;
	const char *last_failure;
	/*
	 * Spot: spot nodes are left out like excluded ones unless ANY; the
	 * counts are for the reason text (SCHED_WAIT_ON_DEMAND).
	 */
	enum sched_spot_rule spot;
	int spot_preemptions;	  /* spot preemptions so far */
	int spot_max_preemptions; /* its spot.max_preemptions */
	/*
	 * CPUs and MiB of memory it needs on each node (>= 0; 0 = none). A node
	 * takes it only with that much left of what it reports allocatable
	 * (nodes that report nothing are not limited); its team is charged
	 * nodes × these against max_cpus / max_memory_mb.
	 */
	int64_t cpus_per_node, memory_mb_per_node;
	/*
	 * The most it can cost (GPUs × max_runtime × the highest rate), for its
	 * team's budget; 0 = unknown, and then only a spent budget stops it.
	 */
	double max_cost;
	/*
	 * Requeued after an infrastructure failure (expedited requeue): ahead
	 * of every job of its class and fair-share rank that is not, its own
	 * team's included; among expedited jobs the usual order.
	 */
	bool expedited;
};

struct sched_config {
	/*
	 * Usage half-life. The core does not decay: the caller passes usage
	 * already decayed to now with quota_usage_decay(); kept here so one
	 * struct carries the policy (default 7 days).
	 */
	int64_t half_life_s;
	/*
	 * Minimum runtime before a job of each class may be preempted
	 * (default high 600 s, normal 600 s, low 300 s, scavenger 0 s).
	 */
	int64_t class_min_runtime_s[SCHED_CLASS_COUNT];
	/*
	 * Reclaim delay: a borrowing gang is protected against a cohort peer
	 * reclaiming its nominal quota for at most this long after its start,
	 * whatever its minimum runtime (which still protects it against class
	 * preemption). Per cohort in sched_input.cohorts; this is the rest's
	 * (default 60 s).
	 */
	int64_t reclaim_delay_s;
	/*
	 * A victim's checkpoint grace from its measured checkpoint duration
	 * (sched_grace_seconds): the margin in percent and each class's bounds
	 * (default 50 %; high, normal, low 30-1800, 30-900, 30-600 s,
	 * scavenger 10-300 s: the daemon's --grace-* defaults). The core does
	 * not use them; kept here so the daemon and the simulation share them.
	 */
	int grace_margin_pct;
	int64_t grace_min_s[SCHED_CLASS_COUNT], grace_max_s[SCHED_CLASS_COUNT];
	int port_lo, port_hi; /* rendezvous port range (default 29500-29999) */
	bool backfill;	      /* false: nothing behind the head job starts (default true) */
	/*
	 * Bound on backfill work: jobs behind the head job that are tried
	 * against the nodes (those rejected in O(1) by quota or by a shape
	 * already known not to fit are not counted). Jobs past it wait with
	 * SCHED_WAIT_SCAN_LIMIT. 0 = default (10,000); < 0 = unlimited.
	 */
	int backfill_max_scan;
	/*
	 * Bound on preemption planning: pending jobs per cycle for which
	 * victims are searched. 0 = default (1,000); < 0 = unlimited.
	 */
	int max_preemption_plans;
	/* Whether reclaim and class preemption run at all (default true). */
	bool preemption;
	/*
	 * Seconds a gang told to stop (preempting, or chosen as a victim in
	 * this decision) is assumed to still hold its GPUs: the head job's
	 * reservation counts on them only from now + this. Set it to the
	 * checkpoint grace period plus the stop time. 0 = free now (the
	 * reservation may then be early by up to the real stop time).
	 */
	int64_t stop_allowance_s;
};

/* Fill c with the defaults above. */
void sched_config_default(struct sched_config *c);

/*
 * A preempted gang's grace in seconds from its job's measured checkpoint
 * duration (signal to committed): measured × (100 + margin_pct) / 100
 * rounded up, within [min_s, max_s] (docs/dispatch.md, "Preemption").
 */
int sched_grace_seconds(int64_t measured_ms, int margin_pct, int64_t min_s, int64_t max_s);

/* A cohort whose reclaim delay is not sched_config.reclaim_delay_s (borrowed name). */
struct sched_cohort_in {
	const char *name;
	int64_t reclaim_delay_s; /* >= 0 */
};

struct sched_input {
	int64_t now_ms;
	struct sched_config cfg;
	const struct sched_cohort_in *cohorts; /* names no team has are ignored */
	int ncohorts;
	const struct sched_node_in *nodes;
	int nnodes;
	const struct sched_team_in *teams;
	int nteams;
	const struct sched_running_in *running;
	int nrunning;
	const struct sched_pending_in *pending;
	int npending;
};

/* ---- output (owned by struct sched_decisions) ------------------------------------------- */

enum sched_preempt_why {
	SCHED_PREEMPT_RECLAIM = 1, /* its team borrows (running gangs above nominal in the input)
				      from the cohort of a team below nominal that reclaims */
	SCHED_PREEMPT_CLASS = 2	   /* a higher priority class of its own team needs the GPUs */
};

struct sched_preemption {
	int64_t victim;	 /* job id of the running gang to stop (the whole gang) */
	int running;	 /* its index in sched_input.running */
	int64_t for_job; /* the pending job it makes room for */
	int pending;	 /* that job's index in sched_input.pending */
	enum sched_preempt_why why;
};

enum sched_resv_kind {
	/* The head job: capacity the running jobs' limits free by start_ms. */
	SCHED_RESV_HEAD = 1,
	/* A job whose victims are being preempted: start_ms = now, capacity held meanwhile. */
	SCHED_RESV_PREEMPTION = 2
};

struct sched_reservation {
	int64_t job;
	int pending; /* index in sched_input.pending */
	enum sched_resv_kind kind;
	int64_t start_ms;
	int nnodes;
	int gpus_per_node;
	int *node; /* nnodes node indices (ascending) the reservation holds gpus_per_node GPUs on */
};

/*
 * Why a pending job did not start. Fields of struct sched_pending_out used
 * by each (others 0); sched_reason_format() turns them into text.
 */
enum sched_reason {
	SCHED_PLACED = 0,    /* not pending: placed in this decision */
	SCHED_WAIT_NODES,    /* no fitting nodes now: count = nodes with >= gpus_per_node
				free GPUs (within one `level` domain if level != NONE) */
	SCHED_WAIT_TOPOLOGY, /* enough nodes, but not within one `level` domain */
	SCHED_NEVER_FITS,    /* the schedulable nodes could not hold it even if idle */
	/* quota reasons: team, count = the job's GPUs (nodes × gpus_per_node) */
	SCHED_WAIT_BORROW_LIMIT, /* used = borrowed GPUs in use, limit = its borrowing limit */
	SCHED_WAIT_COHORT,	 /* used = GPUs in use, limit = admissible GPUs now
				    (nominal + what the cohort can lend) */
	SCHED_WAIT_NOMINAL,	 /* team without a cohort: used = GPUs in use, limit = nominal */
	SCHED_WAIT_PREEMPTION,	 /* other_job = a victim being preempted for it, count = victims */
	SCHED_WAIT_RESERVED,	 /* would delay the head's reservation (its nodes or the quota it
				    needs): other_job = head, at_ms = reservation time */
	SCHED_WAIT_HEAD,	 /* the head job itself: count and level as SCHED_WAIT_NODES,
				    at_ms = its reservation time */
	SCHED_WAIT_BEHIND,	 /* backfill off: queued behind head job other_job */
	SCHED_WAIT_SCAN_LIMIT,	 /* not tried: backfill scan limit (count) reached */
	SCHED_WAIT_PORT,	 /* nodes fit but no rendezvous port is free on any of them */
	SCHED_INVALID, /* impossible request (nodes < 1, gpus_per_node out of range, bad team) */
	SCHED_WAIT_BACKOFF,	   /* retry backoff: at_ms = its not_before_ms */
	SCHED_NEVER_FITS_EXCLUDED, /* it would fit the schedulable nodes, but not without the
				      nodes it excludes: count = excluded schedulable nodes */
	SCHED_WAIT_ON_DEMAND, /* kept off spot nodes (spot rule NEVER or FALLBACK) and does not
				 fit the on-demand ones now (or ever: count = 1), while some
				 schedulable spot node exists */
	/*
	 * CPUs and memory. Node reasons: used = the job's per-node ask, limit =
	 * the largest allocatable (NEVER_FITS_*) or free now (WAIT_*) amount on
	 * a schedulable node that reports it, count = schedulable nodes with that
	 * much (NEVER: allocatable; WAIT: free now, not limited ones included).
	 * NEVER_FITS_*: enough GPUs on the idle cluster, but not on nodes with
	 * that much allocatable; WAIT_*: GPUs are free now where the CPUs or
	 * memory are not. Quota reasons: team, used = held by its gangs, limit =
	 * its cap, need = the job's charge (nodes × per-node).
	 */
	SCHED_NEVER_FITS_CPUS,
	SCHED_NEVER_FITS_MEMORY,
	SCHED_WAIT_CPUS,
	SCHED_WAIT_MEMORY,
	SCHED_WAIT_QUOTA_CPUS,
	SCHED_WAIT_QUOTA_MEMORY,
	/*
	 * Its team's money budget: team, spent = the team's spend as this
	 * decision counted it (its earlier placements included). Like
	 * SCHED_WAIT_BACKOFF it is not tried, takes no quota, reserves nothing.
	 */
	SCHED_WAIT_BUDGET,
	SCHED_REASON_COUNT
};

struct sched_pending_out {
	int position;	  /* 0-based place in the order (0 = next to be considered) */
	double fairshare; /* its team's F = 2^(-u/s), in (0, 1] */
	enum sched_reason reason;
	enum sched_topo level; /* the domain level the reason is about, if any */
	int team;	       /* team index (copy of the input) */
	int count;
	int64_t other_job;
	int64_t at_ms;
	int64_t used, limit;
	/*
	 * In the first tier of the order: its team's GPUs in use plus this
	 * job and the team's earlier first-tier jobs fit within its nominal
	 * quota (docs/scheduling.md §1). Only such jobs reclaim.
	 */
	bool within_nominal;
	/*
	 * SCHED_WAIT_NODES, SCHED_WAIT_TOPOLOGY, SCHED_WAIT_HEAD of a first-tier
	 * job that reclaim would make room for but for borrowing gangs younger
	 * than their minimum runtime and their cohort's reclaim delay:
	 * protected_count such gangs would be needed, protected_job is the one
	 * protected longest, protected_until_ms when the last of them may be
	 * preempted (protected_by_delay: that is its reclaim delay's end, not its
	 * minimum runtime's). 0 = not the case.
	 */
	int64_t protected_job;
	int protected_count;
	int64_t protected_until_ms;
	bool protected_by_delay;
	/*
	 * Kept off spot nodes (spot rule NEVER or FALLBACK) while some
	 * schedulable spot node exists: SCHED_WAIT_HEAD's text says it waits
	 * for on-demand nodes.
	 */
	bool on_demand_only;
	int64_t need; /* SCHED_WAIT_QUOTA_*: the job's CPUs or MiB (nodes × per-node) */
	double spent; /* SCHED_WAIT_BUDGET: its team's spend this decision counted */
};

struct sched_team_out {
	double fairshare; /* F = 2^(-u/s) */
	double u, s;	  /* normalised usage and share that F came from */
	/*
	 * After this decision: running gangs (those stopping included: they
	 * still hold their GPUs) + placed + held for its jobs waiting for
	 * victims, a hold counting only the GPUs its team's own victims do
	 * not already give it (a hold never counts the same GPUs twice).
	 */
	int64_t used;	    /* GPUs in use */
	int64_t borrowed;   /* used above nominal */
	int64_t lent;	    /* own idle nominal in use by cohort peers (attributed in team order) */
	int64_t admissible; /* GPUs it could hold now: nominal + what it may borrow */
	int pending;	    /* pending jobs */
	int64_t cpus_used, memory_mb_used; /* held by its gangs (nodes × per-node ask) */
};

struct sched_stats {
	int64_t fit_attempts;	    /* node searches that were run */
	int64_t fast_rejects;	    /* jobs rejected without a node search */
	int64_t preemption_plans;   /* victim searches */
	int64_t reservation_probes; /* fit checks made to find the reservation time */
	int64_t victim_sets_improved;  /* exact search found fewer victims than greedy */
	int64_t victim_search_cutoffs; /* exact search stopped by its budget (greedy kept) */
};

struct sched_decisions {
	/* New placements, in decision order; placement_pending[i] = index in input.pending. */
	struct sched_placement *placements;
	int *placement_pending;
	int nplacements;
	struct sched_preemption *preemptions; /* new victims only (not ones already preempting) */
	int npreemptions;
	struct sched_reservation *reservations;
	int nreservations;
	struct sched_pending_out *pending; /* parallel to input.pending (npending entries) */
	int npending;
	struct sched_team_out *teams; /* parallel to input.teams */
	int nteams;
	int head;   /* input.pending index of the head job, -1 = none */
	int *order; /* npending input.pending indices, in order (order[position]) */
	struct sched_stats stats;
};

/*
 * One scheduling decision over a snapshot. Returns 0 with *out a new
 * struct sched_decisions (free with sched_decisions_free), TY_EINVAL when
 * the input is malformed as a whole (negative counts, a running gang
 * naming a node or team out of range — err says which), TY_ENOMEM.
 * A single bad pending job is not an error: it gets SCHED_INVALID.
 */
int sched_decide(struct sched_decisions **out, const struct sched_input *in, struct ty_err *err);
void sched_decisions_free(struct sched_decisions *d);

/*
 * The pending reason of input.pending[i] as one lowercase line, e.g.
 * "waiting for 2 × 8 GPUs in one block", "team ml-research at borrowing
 * limit (24 of 24 borrowed GPUs in use)", "reserved for job 812 until
 * 14:02", "waiting for job 40 to be preempted". `when` is the caller's
 * rendering of the reason's at_ms (e.g. "14:02"); NULL renders it relative
 * to in->now_ms ("in 12m30s"). Writes at most n bytes (NUL-terminated);
 * returns the length it wanted, like snprintf. `in` must be the input d
 * was decided from (team names come from it).
 */
int sched_reason_format(char *buf, size_t n, const struct sched_input *in,
			const struct sched_decisions *d, int i, const char *when);
/*
 * The same with protected_when, the caller's rendering of the reason's
 * protected_until_ms (NULL renders it relative to in->now_ms), e.g.
 * "waiting for a node with 2 free GPUs: the borrowing job that holds them is
 * protected until 14:35 (minimum runtime); next in line, nodes reserved from
 * 18:00". sched_reason_format() is this with protected_when NULL.
 */
int sched_reason_format_at(char *buf, size_t n, const struct sched_input *in,
			   const struct sched_decisions *d, int i, const char *when,
			   const char *protected_when);

/*
 * What can never run (docs/scheduling.md, "Cannot run"), with quota.h's
 * rules: more GPUs than the job's team can ever get with its cohort, or a
 * shape the input's nodes (those not lost) and the declared node pools can
 * never hold. With neither nothing is impossible. sched_feasible_new() returns a new
 * summary of in (nodes grouped by shape, each team's cohort peers) that
 * borrows nothing; free it with sched_feasible_free() (NULL-safe).
 */
struct sched_feasible;
/*
 * A node pool an operator declares for a cluster that scales: up to
 * max_nodes nodes of this shape may exist though none is registered
 * (cpus, memory_mb 0: not limited). name is for messages ("pool NAME").
 */
struct sched_pool_in {
	const char *name;
	int64_t gpus, cpus, memory_mb;
	int64_t max_nodes;
};
/* pools[0..npools) (borrowed, copied) count like registered nodes. */
int sched_feasible_new(struct sched_feasible **out, const struct sched_input *in,
		       const struct sched_pool_in *pools, int npools, struct ty_err *err);
void sched_feasible_free(struct sched_feasible *f);
/*
 * Whether in->pending[i] can never run; if so buf gets "cannot run: " and
 * why, e.g. "cannot run: no node can hold 9 GPUs: the largest node has 2
 * (node-a, node-b)" (at most n bytes). f must come from the same in.
 */
bool sched_cannot_run(char *buf, size_t n, const struct sched_feasible *f,
		      const struct sched_input *in, int i);

/* ---- start-time estimates (estimate.c; docs/scheduling.md, "Start-time estimates") -------- */

enum sched_est_kind {
	SCHED_EST_NONE = 0,	/* not estimated: past max_jobs in the queue order */
	SCHED_EST_NOW = 1,	/* placed by the decision itself: start_ms = now */
	SCHED_EST_AT = 2,	/* start_ms = when the simulation started it */
	SCHED_EST_NEVER = 3,	/* a never-fits or invalid reason: no end helps it */
	SCHED_EST_HORIZON = 4	/* not started by horizon_ms (the horizon, or nothing left ends) */
};

/* How far the estimate looks and what it may cost; zero fields take the defaults. */
struct sched_estimate_cfg {
	int max_jobs;	    /* pending jobs estimated, first in queue order (default 10,000) */
	int max_steps;	    /* simulated decisions (default 48) */
	int64_t horizon_s;  /* how far past now (default 7 days) */
	/*
	 * Ends within this per mille of the wait so far are one step, taken at
	 * the latest of them: an estimate is late by at most that share of its
	 * wait, never early (default 20 = 2 %).
	 */
	int coalesce_permille;
	/* ends within this many seconds of a step's first are in it too (default 0) */
	int64_t min_step_s;
	/*
	 * Stop once the last pending job has its answer, or once it cannot get
	 * one (past max_jobs): what-if asks about that job only. The others
	 * still waiting then read SCHED_EST_HORIZON at the time it stopped.
	 */
	bool until_last;
};

/*
 * What the simulation is told about the future: per running gang of the
 * input (parallel to in->running) when it is expected to end (0 = its
 * end_by_ms; taken no later than end_by_ms) and whether that came from
 * runtime history; per pending job (parallel to in->pending) its expected
 * runtime in seconds (0 = max_runtime_s; capped by it) and the same flag.
 * NULL arrays = everything by max_runtime.
 */
struct sched_estimate_in {
	const int64_t *run_end_ms;
	const bool *run_history;
	const int64_t *pend_runtime_s;
	const bool *pend_history;
	struct sched_estimate_cfg cfg;
};

#define SCHED_EST_MAX_WAITS 8

struct sched_estimate {
	enum sched_est_kind kind;
	int64_t start_ms;   /* SCHED_EST_NOW, SCHED_EST_AT; SCHED_EST_HORIZON: the horizon */
	/*
	 * The gangs whose ends its start depends on: those ending at the step it
	 * started in that held GPUs on nodes it got (any of that step's when
	 * none did), job ids, at most SCHED_EST_MAX_WAITS, nwaits_total in all.
	 */
	int64_t waits_for[SCHED_EST_MAX_WAITS];
	int nwaits, nwaits_total;
	bool history; /* an end it waits for came from runtime history */
};

struct sched_estimates {
	struct sched_estimate *job; /* parallel to in->pending */
	int njobs;
	int steps;		 /* simulated decisions run */
	int64_t reached_ms;	 /* the simulated time it stopped at */
};

/*
 * Start-time estimates for the pending jobs of in, from the decision d made
 * over it (its placements start now): sched_decide() run forward with
 * preemption off, each step at the next expected end (or retry backoff's
 * end), its placements added as gangs that end after their expected
 * runtime. Pure like sched_decide(); borrows in, d and e. Returns 0 with
 * *out new (free with sched_estimates_free), TY_EINVAL (err says why),
 * TY_ENOMEM.
 */
int sched_estimate(struct sched_estimates **out, const struct sched_input *in,
		   const struct sched_decisions *d, const struct sched_estimate_in *e,
		   struct ty_err *err);
void sched_estimates_free(struct sched_estimates *s);

/* ---- what-if (what_if.c; docs/scheduling.md, "What-if") --------------------------------- */

/* How an alternative differs from the job as asked. */
enum sched_what_if_change {
	SCHED_WI_AS_ASKED = 0,
	SCHED_WI_NODES,	   /* fewer nodes (job.nodes) */
	SCHED_WI_SPOT,	   /* spot capacity allowed (job.spot = SCHED_SPOT_ANY) */
	SCHED_WI_TOPOLOGY, /* a looser topology (job.required) */
};

#define SCHED_WHAT_IF_MAX 8
/* the job id a what-if job has in the input it is decided in: after every real one */
#define SCHED_WHAT_IF_JOB INT64_MAX

struct sched_what_if {
	enum sched_what_if_change change;
	struct sched_pending_in job; /* the pointers are the asked job's (borrowed) */
	/* sched_what_if_run's answer */
	struct sched_estimate est;
	bool cannot_run;
	char reason[256]; /* its pending reason in the first decision, or "cannot run: …" */
};

/*
 * The job as asked (v[0]) and the alternatives worth asking about: fewer
 * nodes (half, a quarter, one), spot allowed when it is not, each looser
 * topology level. Returns how many (1 to SCHED_WHAT_IF_MAX) it wrote to v.
 */
int sched_what_if_variants(struct sched_what_if v[SCHED_WHAT_IF_MAX],
			   const struct sched_pending_in *asked);
/*
 * Each of v[0..n) as if submitted now: appended to in's pending jobs (id
 * SCHED_WHAT_IF_JOB), decided, checked against f (sched_feasible_new of in;
 * NULL: nothing is impossible), then estimated with e (its per-pending arrays,
 * if any, are in's: the what-if job's runtime does not change its own start).
 * Pure; borrows in, f and e. 0, TY_EINVAL (err says why), TY_ENOMEM.
 */
int sched_what_if_run(struct sched_what_if *v, int n, const struct sched_input *in,
		      const struct sched_feasible *f, const struct sched_estimate_in *e,
		      struct ty_err *err);
/* Whether w would start before asked does (never and unknown starts last): worth offering. */
bool sched_what_if_sooner(const struct sched_what_if *w, const struct sched_what_if *asked);

#endif
