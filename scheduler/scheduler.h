/*
 * trainyard-scheduler internals: leadership and fencing, event apply,
 * placement, liveness and reconciliation, the outbox relay and the loop
 * that drives them. docs/dispatch.md is the contract.
 *
 * One thread does everything but serve /metrics (metrics.c). While leading
 * it owns a work connection, a consumer and a producer; every write
 * transaction goes through sched_tx_begin() and sched_tx_commit(), so a
 * deposed leader can never commit, and the rows buffered in store/ are
 * written with the rest.
 */
#ifndef TY_SCHEDULER_H
#define TY_SCHEDULER_H

#include "goodput.h"
#include "proto.h"
#include "store/store.h"
#include "ty_err.h"
#include "ty_pg.h"

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* pg_advisory_lock key of the leader (docs/dispatch.md). */
#define SCHED_LOCK_KEY "7371102"
#define SCHED_CONSUMER_GROUP "trainyard-scheduler"
/* Number of priority classes (high, normal, low, scavenger: core/policy.h). */
#define SCHED_NCLASSES 4

/* One rate of the rate table (--rates-file): per GPU-hour, currency-free. */
struct sched_rate {
	char pool[64];
	char model[128]; /* "" = the pool's default */
	double per_gpu_hour;
};

/* The rate table, sorted by pool, then model. */
struct sched_rates {
	struct sched_rate *v; /* owned */
	int n;
};

/* A cohort's own reclaim delay (--cohort-reclaim-delay-seconds). */
struct sched_cohort_delay {
	char name[128];
	int64_t seconds;
	bool warned; /* no team in that cohort was logged once */
};

struct sched_opts {
	const char *database_url; /* borrowed */
	const char *bootstrap;	  /* resolved "host:port,..." (borrowed) */
	const char *id;		  /* holder name (borrowed) */
	int cycle_ms;
	int node_timeout_ms;
	int reconcile_ms;
	int resend_ms;
	int kill_grace_seconds;
	int64_t team_uid_base; /* --team-uid-base: team N's ranks run as uid and gid base + N */
	int preemption_stop_seconds; /* the core's stop allowance for reservations */
	int port_lo, port_hi;
	int64_t usage_half_life_s;	       /* --usage-half-life-hours */
	int64_t min_runtime_s[SCHED_NCLASSES]; /* --min-runtime-seconds, by class */
	bool check_mirror; /* --check-mirror: compare the mirror with a fresh load every cycle */
	int retry_backoff_s;	 /* --retry-backoff-seconds: first retry's wait, doubled per retry */
	int retry_backoff_max_s; /* --retry-backoff-max-seconds */
	int expedite_hold_s;	 /* --expedite-hold-seconds: an expedited requeue's hold, 0 = off */
	int suspect_after;	 /* --suspect-after-jobs: distinct failed jobs → suspect */
	int drain_after;	 /* --drain-after-jobs: distinct failed jobs → drained */
	int straggler_pct;	 /* --straggler-percent: of the gang's median step rate; 0 = off */
	int straggler_reports;	 /* --straggler-reports: in a row below it → a straggler */
	const struct ty_ed25519_key *dispatch_key; /* --dispatch-key: signs dispatch (borrowed) */
	/* --node-secret-file: every node's key derives from it (proto_node_key) */
	const char *node_secret;
	size_t node_secret_len;
	int failure_window_s;	 /* --failure-window-seconds */
	struct sched_rates rates; /* --rates-file (owned by main) */
	int spot_kill_margin_s;	 /* --spot-kill-margin-seconds: kill this long before a deadline */
	/* a victim's grace from its measured checkpoint duration (preempt.c) */
	int grace_margin_pct;		     /* --grace-margin-percent */
	int64_t grace_min_s[SCHED_NCLASSES]; /* --grace-min-seconds, by class */
	int64_t grace_max_s[SCHED_NCLASSES]; /* --grace-max-seconds, by class */
	int64_t reclaim_delay_s;	     /* --reclaim-delay-seconds */
	/* --cohort-reclaim-delay-seconds (owned by main) */
	struct sched_cohort_delay *cohort_delays;
	int ncohort_delays;
	int team_sample_s;	      /* --team-sample-seconds: teams over time, 0 = off */
	int team_sample_retention_d; /* --team-sample-retention-days */
};

/* Outbox ids produced and not yet deleted, ascending. */
struct sched_ids {
	int64_t *v;
	int n, cap;
};

/* A pending job in the mirror (queue.c): its scheduling inputs and what was published. */
struct sched_qjob {
	int64_t id, team_id, attempt;
	char cls[16];	   /* priority class name */
	char required[16]; /* topology.required, "" for none */
	int priority;
	int64_t submit_ms;
	int nodes, gpus_per_node;
	int64_t cpus_per_node, memory_mb_per_node; /* spec.resources */
	bool per_node;
	int64_t min_runtime_s, max_runtime_s;
	bool held; /* an earlier attempt still holds GPUs: not to be placed yet */
	int64_t not_before_ms; /* jobs.not_before (retry backoff), 0 when none */
	int spot_rule;	       /* enum sched_spot_rule (core/policy.h) */
	int spot_preemptions, spot_max; /* jobs.spot_preemptions, spec.spot.max_preemptions */
	int64_t sweep_id;      /* jobs.sweep_id, 0 when not a sweep trial */
	int sweep_max;	       /* the sweep's max_concurrent, 0 when none */
	char *excluded;	       /* owned: jobs.excluded_nodes joined by ',', NULL when none */
	char *last_failure;    /* owned: "system failure on node-b" of the last attempt, or NULL */
	bool expedited;	       /* its last attempt was ended by the infrastructure (expedited requeue) */
	char *hold_nodes;      /* owned: the nodes that requeue holds, joined by ',', NULL when none */
	int64_t hold_from_ms;  /* its window starts: the later of the attempt's end and not_before */
	bool gone; /* (transient) no longer pending */
	/* as in jobs now */
	char *reason;	     /* owned, NULL when none */
	int position;	     /* 1-based, 0 when none */
	int64_t reserved_ms; /* -1 when none */
	/* when this scheduler wrote them (ty_mono_ms, 0 unknown), kept across
	 * reloads while jobs still holds the same text */
	int64_t written_ms;
};

/* Every pending job, sorted by id. */
struct sched_queue {
	struct sched_qjob *v;
	int n, cap;
};

/* The cluster mirror (mirror.c). A node that is not lost. */
struct sched_mnode {
	char *id, *addr, *zone, *rack, *block; /* owned; labels NULL when absent */
	int gpus;
	int64_t cpus, memory_mb; /* allocatable as registered, 0 = not reported (not limited) */
	bool ready;	 /* takes new work: state ready and no fault */
	bool fault;	 /* its register named a fault (the expected inventory): not ready */
	bool preempting; /* state preempting: its gangs are checkpointed and killed (spot.c) */
	bool spot;	 /* label pool = spot */
};

/* One live (unreleased) allocation with its attempt's and job's scheduling fields. */
struct sched_malloc {
	int64_t job, attempt, team_id;
	int node_rank;
	char node[PROTO_NODE_ID_MAX + 1];
	uint64_t mask; /* GPUs */
	char cls[16];
	int priority;
	int64_t start_ms, min_runtime_s, max_runtime_s;
	int64_t checkpoint_ms; /* attempts.last_checkpoint_at (verified), 0 when none */
	bool preemptible, preempting;
	int64_t preempted_for;
	int64_t cpus_per_node, memory_mb_per_node; /* held on this node (the job's spec) */
};

/* A rendezvous port held (attempts.master_node/master_port). */
struct sched_mport {
	int64_t job, attempt;
	char node[PROTO_NODE_ID_MAX + 1];
	int port;
};

/* A team and its team_usage row. */
struct sched_mteam {
	int64_t id;
	char *name, *cohort; /* owned */
	int64_t nominal, borrowing_limit, lending_limit;
	int64_t max_cpus, max_memory_mb; /* 0 = no cap */
	double weight;
	bool have_row;
	double decayed;
	int64_t since_ms; /* team_usage.updated_at, or the team's creation */
	double fair_share;
	int64_t used, borrowed, lent, pending;
};

struct sched_mirror {
	struct sched_mnode *nodes; /* sorted by id (strcmp) */
	int nnodes;
	struct sched_malloc *allocs; /* sorted by job, attempt, node_rank */
	int nallocs, capallocs;
	struct sched_mport *ports; /* sorted by node, job, attempt */
	int nports, capports;
	struct sched_mteam *teams; /* sorted by id */
	int nteams;
	struct sched_ids tjobs; /* jobs to read again */
	char **tnodes;		/* nodes to read again (owned) */
	int ntnodes, captnodes;
	bool stale;	     /* read everything at the next refresh */
	int64_t loaded;	     /* monotonic ms of the last whole load */
	char team_mark[96]; /* fingerprint of teams when last read (mirror.c) */
};

/* An exit a heartbeat reported that no attempt_exited has confirmed yet. */
struct sched_late_exit {
	char node[PROTO_NODE_ID_MAX + 1];
	int64_t job, attempt;
	int exit_code;
	char failure_class[32];
	char *message;	 /* owned */
	char *evidence;	 /* owned; "" when none (the heartbeat entry's) */
	char *condition; /* owned: the entry's `condition` (JSON text), NULL when none */
	bool log_only;	 /* the entry's evidence_source is "log" */
	int64_t seen_ms; /* monotonic, first seen */
};

/*
 * The nodes the last committed cycle held for jobs waiting for their
 * victims (its SCHED_RESV_PREEMPTION reservations), passed to the next
 * decision as sched_pending_in.held_nodes (place.c). Sorted by job; grown
 * as a cycle needs (a big cluster holds hundreds of nodes at once), freed
 * by sched_holds_free(). Node ids longer than node[] are not kept (the
 * job then starts where it fits best). Forgotten on a new term and when
 * the queue mirror is stale (read again whole).
 */
struct sched_holds {
	int64_t epoch; /* the term they were decided in */
	int n, cap;
	struct sched_hold {
		int64_t job;
		char node[96]; /* node id; longer ids are not kept */
	} *v;	       /* cap entries, n used */
};

/* The connections to PostgreSQL and the term they carry (leader.c). */
struct sched_term {
	struct ty_pg *lock_pg; /* holds the advisory lock while leading */
	struct ty_pg *pg;      /* every other statement */
	bool leading;
	int64_t epoch;	/* of the current term */
	int listen_pid; /* backend pid of pg when LISTEN was issued on it (0: not yet) */
	/* job events and outbox rows of the open transaction, written at its commit (store/) */
	struct sched_store store;
};

/* The broker: the clients of a term, the outbox rows in flight and the broker's health. */
struct sched_bus {
	rd_kafka_t *consumer; /* events + nodes, manual assignment, while leading */
	rd_kafka_queue_t *cq; /* its queue, which writes to wake[1] when it fills */
	int wake[2];	      /* pipe, open while cq is set: see sched_consume */
	rd_kafka_t *producer; /* dispatch, idempotent, while leading */
	int32_t dispatch_partitions;
	int assigned_partitions;    /* of events + nodes */
	struct sched_ids inflight;  /* produced, delivery not reported (or not deleted) */
	struct sched_ids delivered; /* acknowledged, row not deleted yet */
	bool outbox_dirty;	    /* relay now */
	bool down;		    /* the broker did not answer the last liveness probe */
	int64_t back;		    /* monotonic ms when it answered again (0: never lost) */
	int64_t ok;		    /* monotonic ms of the last probe it answered */
};

/* The consumed batch being applied (kafka.c, apply.c) and what it left for later. */
struct sched_inbox {
	rd_kafka_message_t **batch; /* consumed and not yet applied (kept on failure) */
	struct proto_msg *bmsg;	    /* batch[i] decoded, when bok[i] */
	bool *bok;		    /* batch[i] is well formed and its node's (else skipped) */
	int nbatch;
	bool lagging;		      /* the last poll filled a whole batch */
	struct sched_late_exit *late; /* applied by reconciliation when still missing */
	int nlate, caplate;
	long long malformed;	  /* messages skipped as malformed or inapplicable */
	long long bad_conditions; /* node condition entries skipped as invalid */
};

/* What the scheduler knows of jobs and nodes between cycles (queue.c, mirror.c, place.c). */
struct sched_world {
	struct sched_queue queue;   /* the pending-job mirror (queue.c) */
	struct sched_ids touched;   /* jobs whose rows changed since the mirror was refreshed */
	struct sched_ids queued;    /* jobs given a queue position or reason by the last cycle */
	bool queue_stale;	    /* reload the whole mirror at the next cycle */
	int64_t queue_loaded;	    /* monotonic ms of the last whole reload */
	struct sched_mirror mirror; /* nodes, live allocations, ports, teams (mirror.c) */
	struct sched_holds holds;   /* nodes held for jobs waiting for their victims */
	struct sched_estimator *est; /* the start-time estimate under way (estimator.c), NULL */
};

/* When the loop runs what (loop.c). */
struct sched_clock {
	bool capacity_freed; /* run a placement cycle now */
	bool jobs_changed;   /* another session wrote a job event (a submission, a cancel) */
	int64_t last_cycle;  /* monotonic ms of the last cycle's start */
	int64_t cycle_gap;   /* least ms from it to a cycle a change triggers */
	int64_t next_cycle, next_reconcile, next_liveness, next_relay; /* monotonic ms */
	int64_t last_error_log;
	/* database clock (ms) of the last team sample and samples' pruning (place.c) */
	int64_t last_team_sample, last_team_prune;
	int64_t last_estimate; /* monotonic ms of the last cycle that published estimates */
	bool what_if; /* what-if requests may be open (NOTIFY what_if:, place.c) */
};

/* The whole scheduler: only the loop and the files that orchestrate several parts take it. */
struct sched {
	struct sched_opts o;
	struct sched_term term;
	struct sched_bus bus;
	struct sched_inbox in;
	struct sched_world world;
	struct sched_clock clock;
	struct sched_metrics *metrics; /* --metrics-listen (metrics.c); NULL: no metrics */
};

/* ---- estimator.c: start-time estimates in a side thread ---- */

struct sched_estimator; /* opaque */
struct sched_input;	/* core/policy.h */
struct sched_estimate_in;
struct sched_estimates;
struct sched_estimate;
struct sched_pool_in;
struct sched_what_if_ask; /* what_if.h */
/*
 * Decide and estimate (core/policy.h, sched_estimate) over a deep copy of
 * in and x, in a new thread; then answer asks[0..nasks) (copied) with
 * sched_what_if_run(), pools (copied) counted as in the cannot-run check.
 * *out new; free with sched_estimator_free().
 */
int sched_estimator_start(struct sched_estimator **out, const struct sched_input *in,
			  const struct sched_estimate_in *x, const struct sched_what_if_ask *asks,
			  int nasks, const struct sched_pool_in *pools, int npools,
			  struct ty_err *err);
/* Whether its thread has finished (never blocks). */
bool sched_estimator_done(const struct sched_estimator *e);
/*
 * Wait for its thread; *out and *in (the copy its out is parallel to) are
 * borrowed from e. The estimate's own error when it failed.
 */
int sched_estimator_result(const struct sched_estimates **out, const struct sched_input **in,
			   struct sched_estimator *e, struct ty_err *err);
/*
 * After sched_estimator_result(): the what-if requests it was given, each
 * answered (borrowed from e), or the error that stopped them.
 */
int sched_estimator_what_ifs(const struct sched_what_if_ask **asks, int *nasks,
			     struct sched_estimator *e, struct ty_err *err);
/* Waits for its thread, then frees; NULL-safe. */
void sched_estimator_free(struct sched_estimator *e);
/* estimate_basis: what an estimate rests on (new; docs/api.md, "Start-time estimates") */
json_t *sched_estimate_basis(const struct sched_estimate *e);
/* ms since the epoch as the API writes times ("2026-11-27T14:02:00.000Z", ty_ts) */
#define SCHED_RFC3339_LEN 64
void sched_rfc3339(char *buf, size_t n, int64_t ms);

/* ---- leader.c ---- */

/*
 * Begin a write transaction on pg fenced by epoch:
 * `SELECT epoch FROM leader WHERE id = 1 FOR SHARE` must return epoch, else
 * the transaction is rolled back and TY_EFENCED returned. The row lock
 * makes a new leader's epoch bump wait for this transaction to end.
 */
int sched_tx_fence(struct ty_pg *pg, int64_t epoch, struct ty_err *err);
/*
 * sched_tx_fence() on t->pg with t's epoch, with empty store/
 * buffers (the last transaction committed or rolled back). Ended by
 * sched_tx_commit() (store/store.c) or ty_pg_rollback().
 */
int sched_tx_begin(struct sched_term *t, struct ty_err *err);

/* Start a new term: increment leader.epoch (new value in *epoch), record holder. */
int sched_epoch_bump(int64_t *epoch, struct ty_pg *pg, const char *holder, struct ty_err *err);

/*
 * Try once to become leader: take the advisory lock on s->term.lock_pg, bump the
 * epoch, create the Kafka clients. *won tells whether it did; on any
 * failure after the lock was taken, the lock is released again.
 */
int sched_lead_try(bool *won, struct sched *s, struct ty_err *err);
/* Stop leading: drop the Kafka clients and in-memory state, release the lock. */
void sched_step_down(struct sched *s, const char *why);
/*
 * Clean end of a term (shutdown): let the producer deliver what it holds
 * (up to flush_ms), delete what was acknowledged, close the clients and
 * release the lock so a standby takes over at once.
 */
void sched_resign(struct sched *s, int flush_ms);
/* Whether the lock connection still holds the advisory lock. */
bool sched_lock_held(struct sched *s);

/* ---- kafka.c ---- */

int sched_kafka_start(struct sched *s, struct ty_err *err);
/* flush_ms: how long the producer may deliver what it holds. */
void sched_kafka_stop(struct sched *s, int flush_ms);
/* Replace the producer after a fatal (idempotence) error. */
int sched_kafka_producer_check(struct sched *s, struct ty_err *err);
/* Assign newly appeared partitions of the consumed topics; refresh dispatch's count. */
int sched_kafka_refresh(struct sched *s, struct ty_err *err);
/* Whether the broker answers the consumer now (a watermark query). */
bool sched_kafka_reachable(struct sched *s);
/* Poll up to a batch of messages into s->in.batch (waiting up to wait_ms for the first). */
void sched_consume(struct sched *s, int wait_ms);
/* Apply s->in.batch in one fenced transaction, then commit its offsets. */
int sched_consume_apply(struct sched *s, struct ty_err *err);

/* ---- relay.c ---- */

/*
 * Produce every outbox row not in flight (read on pg) with b's producer,
 * signed with key; m (may be NULL) counts errors and the backlog.
 */
int sched_relay(struct sched_bus *b, struct ty_pg *pg, const struct ty_ed25519_key *key,
		struct sched_metrics *m, struct ty_err *err);
/*
 * Serve delivery reports and delete the rows Kafka acknowledged. Takes the
 * whole: it may replace the producer (sched_kafka_producer_check).
 */
int sched_relay_settle(struct sched *s, struct ty_err *err);
void sched_ids_free(struct sched_ids *ids);
/* Delivery report callback (the producer's opaque is s). */
void sched_relay_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque);

/* ---- apply.c: inside a fenced transaction ---- */

/* Apply one decoded message (idempotent). Inapplicable messages are ignored. */
int sched_apply(struct sched *s, const struct proto_msg *m, struct ty_err *err);
/*
 * Apply every rank_started and rank_exited among the n messages at once
 * (two statements, whatever n): what sched_apply does for each, in their
 * order, ignoring those of nodes without a part in the attempt. done[i] is
 * set for each such message. *bad: a rank_exited names a rank outside its
 * node's range (the caller rolls back and applies one by one, which skips
 * it with a warning). ok[i] false: message i is to be left alone.
 */
/*
 * Apply the plain heartbeats among the n messages at once: those of ready
 * nodes (not lost, not preempting), of the boot they registered, without a
 * spot notice or a condition (whatever conditions those nodes had are
 * cleared), of nodes with no other node message in the batch. The
 * newest per node is applied (what sched_apply does for it; older ones are
 * superseded); done[i] is set for each heartbeat so taken care of. The
 * rest are left to sched_apply. done[] is only ever set here, never cleared.
 */
int sched_apply_heartbeats(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
			   bool *done, struct ty_err *err);
int sched_apply_ranks(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
		      bool *done, bool *bad, struct ty_err *err);
/*
 * Apply every launch_accepted among the n messages at once (one statement,
 * whatever n): the first acknowledgement of each allocation sets its
 * accepted_at; those of nodes without a part in the attempt are ignored.
 * done[i] is set for each such message.
 */
/*
 * Apply the attempt_running among the n messages at once (one statement,
 * whatever n): what sched_apply does for each, in their order — each node's
 * part running, the first resume kept, attempts whose every node runs and
 * their jobs to running, with the job event. Left to sched_apply: those of
 * an attempt with other messages in the batch (an exit other than a plain
 * success: order matters) and of a node with a register or notice in it. done[i] is set for each taken.
 */
int sched_apply_running(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
			bool *done, struct ty_err *err);
int sched_apply_acks(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
		     bool *done, struct ty_err *err);
/*
 * Apply the plain successful attempt_exited (exit 0, no failure class,
 * condition, pre-flight or telemetry) among the n messages at once, after
 * the other set-based paths (whose done[] it reads): each node's part
 * exited and released, attempts whose every node exited 0 and their jobs to
 * succeeded with the job event, their ledger rows — a few statements
 * whatever n. Left to sched_apply: exits of an attempt with a message in
 * the batch no set-based path took, of a node with a register or notice in
 * it, and of an attempt not plain (being preempted, ended, or with a part
 * that ended otherwise). done[i] is set for each taken.
 */
int sched_apply_exits(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
		      bool *done, struct ty_err *err);

/*
 * `kill` to every node of the attempt that has not reported an exit and is
 * not lost (except `except`, may be NULL); sets killed_at. *count (may be
 * NULL) gets the number of kills written.
 */
int sched_kill_nodes(int *count, struct sched *s, int64_t job, int64_t attempt, const char *reason,
		     const char *except, struct ty_err *err);
/*
 * An active attempt failed with class cls, reported by node: mark it, kill
 * the rest of the gang, and requeue the job if its retry budget allows
 * (with backoff, jobs.not_before), else fail it (or cancel it when cancel
 * was requested). With SCHED_FAIL_BLAME in how, a class that blames the node (sched_class_blames) records
 * the failure against it (node_failures, maybe suspect/drained) and
 * excludes it from the job's later attempts. exit_code and evidence (the
 * classifier's matching line) may be NULL.
 */
enum {
	SCHED_FAIL_BLAME = 1, /* blame node (as above) */
	SCHED_FAIL_FREE = 2,  /* requeue without spending a retry (the job is not at fault) */
	/* the class was decided by rank output alone (evidence_source "log", sched_blame_node) */
	SCHED_FAIL_LOG_ONLY = 4,
	/*
	 * a health condition of node decided the class (attempt_exited.condition;
	 * evidence is its evidence): requeued without spending a retry, and the
	 * event names the node and the condition
	 */
	SCHED_FAIL_CONDITION = 8,
};
int sched_fail_attempt(struct sched *s, int64_t job, int64_t attempt, const char *node,
		       const char *cls, const int *exit_code, const char *why,
		       const char *evidence, int how, struct ty_err *err);
/*
 * node_failures.message of a node the pre-flight bandwidth check measured
 * slow: such a node is suspect at once and stays so for the failure window.
 */
#define SCHED_PREFLIGHT_WHY "slow in the pre-flight bandwidth check"
/* Whether a failure of class cls is blamed on the node that reported it. */
bool sched_class_blames(const char *cls);
/*
 * Record a failure of (job, attempt) of class cls against node, and move
 * the node to suspect or draining/drained when its failures across
 * different jobs within --failure-window-seconds reach the thresholds.
 * src: who saw the evidence. Failures the rank logs alone decided
 * (PROTO_EVIDENCE_LOG) count only while those within the window come from
 * jobs of at least two teams: a job prints what it likes, so one team's
 * jobs never take a node out. Idempotent per (job, attempt, node).
 */
int sched_blame_node(struct sched *s, const char *node, int64_t job, int64_t attempt,
		     const char *cls, const char *evidence, const char *why,
		     enum proto_evidence_source src, struct ty_err *err);
/* After an allocation ended: succeed a finished attempt, or cancel a stopped one. */
int sched_settle_attempt(struct sched *s, int64_t job, int64_t attempt, struct ty_err *err);
/*
 * Apply the exits heartbeats reported at least min_age_ms ago whose
 * attempt_exited never came, and forget them.
 */
int sched_apply_late_exits(struct sched *s, int64_t min_age_ms, struct ty_err *err);
/* Forget every remembered late exit (end of a term). */
void sched_late_exits_clear(struct sched *s);
/*
 * Outside a transaction, with metrics on: count the current node conditions
 * by node, kind and severity for trainyard_node_conditions.
 */
int sched_conditions_metrics(struct sched *s, struct ty_err *err);
/*
 * Record condition c (borrowed; checked as a heartbeat's are) of node's
 * current boot from the scheduler's own observation, beside what the
 * executor lists (a fatal one drains the node as any would).
 */
int sched_condition_note(struct sched *s, const char *node, const json_t *c, struct ty_err *err);
/*
 * Release every live allocation on node (lost, or restarted) and fail their
 * attempts; blame: hold the node responsible (sched_fail_attempt).
 */
int sched_node_gone(struct sched *s, const char *node, const char *cls, const char *why,
		    bool blame, struct ty_err *err);

/* ---- place.c ---- */

/*
 * One scheduling cycle: cancel pass, due preemption kills, then the policy
 * core over a snapshot read from PostgreSQL, and its decisions (placements,
 * preemptions, pending reasons, queue positions, team usage) applied in one
 * fenced transaction.
 */
int sched_cycle(struct sched *s, struct ty_err *err);
/*
 * The holds (struct sched_holds): replace h with decision d's
 * SCHED_RESV_PREEMPTION reservations over in's nodes, decided in term
 * epoch; TY_ENOMEM keeps none. The entries of job: how many, the first at
 * *first. Free: NULL-safe, h is empty after.
 */
struct sched_input;
struct sched_decisions;
int sched_holds_keep(struct sched_holds *h, int64_t epoch, const struct sched_input *in,
		     const struct sched_decisions *d);
int sched_holds_of(const struct sched_holds *h, int64_t job, int *first);
void sched_holds_free(struct sched_holds *h);
/*
 * Expedited requeue's holds (docs/scheduling.md, "Expedited requeue"):
 * whether pending job q's nodes are held for it at now_ms with a window of
 * window_s seconds (0 = off): from the requeue until window_s after its
 * backoff. Derived from PostgreSQL (the queue load), so they outlive a term.
 */
bool sched_hold_active(const struct sched_qjob *q, int64_t now_ms, int64_t window_s);
/* A node (index into the snapshot's nodes) held for job until until_ms. */
struct sched_xhold {
	int64_t job;
	int node;
	int64_t until_ms;
};
/*
 * The active holds of the n jobs q over in's nodes (sorted by id, as a
 * snapshot's are) into *out (new array, *nout entries, in q's order: by
 * job, as the queue is sorted; NULL/0 for none); nodes not among them are
 * left out. TY_ENOMEM on failure.
 */
int sched_xholds(struct sched_xhold **out, int *nout, const struct sched_qjob *q, int n,
		 const struct sched_input *in, int64_t window_s);
/*
 * Whether hold k of h[nh] (as sched_xholds made them) keeps job off its
 * node: another job's, on a node not held for job too (two jobs whose
 * gangs shared a node may both use it).
 */
bool sched_xhold_keeps_off(const struct sched_xhold *h, int nh, int k, int64_t job);

/* ---- preempt.c: the preemption protocol (docs/dispatch.md, "Preemption") ---- */

/*
 * Inside a fenced transaction: start preempting the victim's attempt for
 * for_job — attempt `stopping` (class preempted, kill_at = now + its grace:
 * from its measured checkpoint duration, else the job's checkpoint
 * grace_seconds), job `preempting`, a `checkpoint` row to every node of
 * the gang, the event (message why). *started tells whether it did (the
 * attempt may have ended meanwhile).
 */
int sched_preempt(bool *started, struct sched *s, int64_t job, int64_t attempt, int64_t for_job,
		  const char *why, struct ty_err *err);
/*
 * The same for a spot notice on node: no job it makes room for, the attempt
 * records node (attempts.spot_node, so the requeue counts a spot
 * preemption), and kill_at is bounded by deadline_ms (epoch ms; 0 = none)
 * minus --spot-kill-margin-seconds.
 */
int sched_preempt_spot(bool *started, struct sched *s, int64_t job, int64_t attempt,
		       const char *node, int64_t deadline_ms, const char *why, struct ty_err *err);
/*
 * Inside a fenced transaction, for a valid checkpoint_written with
 * after_signal from node of attempt: the first such commit of a preempted
 * attempt records its duration since the signal (the job's measured
 * checkpoint duration) and sends the kills now rather than at kill_at.
 * Anything else changes nothing.
 */
int sched_preempt_committed(struct sched *s, int64_t job, int64_t attempt, const char *node,
			    int64_t step, struct ty_err *err);
/*
 * Parse "COHORT=SECONDS,..." (--cohort-reclaim-delay-seconds): *out new
 * (free it), *n entries. Refuses (TY_EINVAL, naming the entry) an empty or
 * repeated name, and seconds that are not an integer in 0-31536000.
 */
int sched_cohort_delays_parse(struct sched_cohort_delay **out, int *n, const char *spec,
			      struct ty_err *err);
/* In its own fenced transaction: `kill` (reason preempted) for attempts whose grace is over. */
int sched_preempt_kills(struct sched *s, struct ty_err *err);
/*
 * Inside a fenced transaction, once every node of a preempted attempt has
 * reported or been lost: the attempt ends (failed, class preempted) and the
 * job goes back to pending (preemptions + 1, retry budget untouched), or to
 * cancelled when that was requested meanwhile.
 */
int sched_preempt_settle(struct sched *s, int64_t job, int64_t attempt, struct ty_err *err);

/* ---- spot.c: spot interruption notices (docs/dispatch.md, "Spot notices") ---- */

/*
 * Inside a fenced transaction: node reported a spot notice (the data of a
 * preempt_notice event or a heartbeat's preempt_notice, envelope seq `seq`):
 * the node becomes `preempting` with the notice's deadline and every gang
 * with a rank on it starts the preemption protocol (sched_spot_handshake).
 * A notice without a valid deadline is TY_EINVAL; an unknown or lost node
 * is ignored; a repeated notice changes nothing.
 */
int sched_spot_notice(struct sched *s, const char *node, int64_t seq, const json_t *notice,
		      struct ty_err *err);
/*
 * Inside a fenced transaction: start the preemption protocol (kill bounded
 * by the node's deadline) for every active attempt with a rank on node,
 * which must be `preempting`, and bring forward the kills of its attempts
 * already being preempted to that bound. Idempotent.
 */
int sched_spot_handshake(struct sched *s, const char *node, struct ty_err *err);
/*
 * Inside a fenced transaction: node is no longer being preempted (a newer
 * heartbeat without a notice, or a new boot): back to ready, or
 * draining/drained when it has a drain reason. why is logged.
 */
int sched_spot_clear(struct sched *s, const char *node, const char *why, struct ty_err *err);
/*
 * In its own fenced transaction, from the cycle: the handshake for every
 * preempting node (of the mirror) that still has active attempts — what
 * the API's POST /v1/nodes/{id}/preempt and a placement that raced the
 * notice leave to it.
 */
int sched_spot_sweep(struct sched *s, struct ty_err *err);

/* ---- usage.c: decayed GPU-seconds per team ---- */

/* One team's usage as persisted in team_usage (or its creation when there is no row). */
struct sched_usage {
	int64_t team;
	double decayed; /* GPU-seconds, decayed to since_ms */
	int64_t since_ms;
};

/*
 * Bring each team's decayed usage forward to now_ms:
 * u(now) = u(since) · 2^(−(now − since)/half-life) + GPU-seconds in
 * (since, now] of its usage ledger rows and, for attempts not in the ledger
 * yet, of its allocations (held until released, or now): those released
 * read on pg, the live ones from the mirror m. half_life_s:
 * --usage-half-life-hours. teams (n of them, sorted by team id) are
 * updated in place.
 */
int sched_usage_advance(struct sched_usage *teams, int n, struct ty_pg *pg,
			const struct sched_mirror *m, int64_t half_life_s, int64_t now_ms,
			struct ty_err *err);

/* ---- ledger.c: the usage ledger (docs/scheduling.md, "Accounting") ---- */

/*
 * Pure: parse a rate table, {"POOL": {"default": R, "MODEL": R, ...}, ...}
 * (R a number >= 0, per GPU-hour), into *out (sorted; free with
 * sched_rates_free). TY_EINVAL naming the offending member.
 */
int sched_rates_parse(struct sched_rates *out, const char *json_text, struct ty_err *err);
/* Read and parse the rate table in file path (sched_rates_parse). */
int sched_rates_load(struct sched_rates *out, const char *path, struct ty_err *err);
void sched_rates_free(struct sched_rates *r);
/* Pure: the rate of model in pool: its own, else the pool's "default", else 0. */
double sched_rate_of(const struct sched_rates *r, const char *pool, const char *model);

/* From from_ms on, stragglers cost the gang this share of its time (0: none). */
struct sched_straggler_share {
	int64_t from_ms;
	double share;
};

/* What one ledger row is computed from: one node's part of an ended attempt. */
struct sched_ledger_in {
	int gpus;
	int64_t start_ms, end_ms; /* the attempt's creation, the node's release */
	int64_t checkpoint_ms;	  /* the attempt's last valid checkpoint, 0 when none */
	const char *outcome;	  /* "succeeded", "failed" (preemptions too) or "cancelled" */
	double rate;		  /* per GPU-hour */
	double idle_seconds;	  /* the node's telemetry: all its GPUs idle; < 0 unknown */
	const char *failure_class;   /* a failed attempt's class; NULL when none */
	int64_t checkpoint_write_ms; /* writing the checkpoints it kept (attempts column) */
	int64_t queued_ms;	     /* waiting since: submission or the previous attempt's end */
	/*
	 * The share of the gang's time its stragglers cost, as a step function
	 * of time (attempts.straggler_shares): straggler[k].share from
	 * straggler[k].from_ms until the next entry's from_ms, the last until
	 * the end. Ascending; none: no straggler.
	 */
	const struct sched_straggler_share *straggler;
	int nstraggler;
};

struct sched_ledger_row {
	double gpu_seconds;	 /* gpus × (end − start) */
	double lost_gpu_seconds; /* failed: gpus × (end − last checkpoint, or start); else 0 */
	double cost;		 /* gpu_seconds / 3600 × rate */
	double idle_gpu_seconds; /* gpus × idle_seconds, at most gpu_seconds; < 0 unknown */
	/* GPU-milliseconds, exact: goodput[] adds up to gpu_ms (docs/scheduling.md, "Goodput") */
	int64_t gpu_ms;
	int64_t goodput[PROTO_GOODPUT_COUNT];
	int64_t queue_wait_gpu_ms; /* gpus × (start − queued), beside the categories */
};

/* Pure: the ledger arithmetic. A negative span counts as 0. */
void sched_ledger_compute(struct sched_ledger_row *out, const struct sched_ledger_in *in);
/* Pure: the category of the work lost by a failed attempt of class failure_class. */
enum proto_goodput sched_goodput_lost_category(const char *failure_class);

/*
 * Inside a fenced transaction on pg, from every path that ends an attempt (or
 * releases a node of an ended one): once the attempt has ended and every
 * node of it released its GPUs, write its ledger rows (one per node, at rates).
 * Idempotent: an attempt already in the ledger, still active or still
 * holding GPUs is left alone.
 */
int sched_ledger_attempt_end(struct ty_pg *pg, const struct sched_rates *rates, int64_t job,
			     int64_t attempt, struct ty_err *err);
/* sched_ledger_attempt_end for the attempts (jobs[i], attempts[i]) of n: two statements. */
int sched_ledger_attempts_end(struct ty_pg *pg, const struct sched_rates *rates,
			      const int64_t *jobs, const int64_t *attempts, int n,
			      struct ty_err *err);
/* In its own fenced transaction of term t: replace usage_rates with r (for the API). */
int sched_rates_publish(struct sched_term *t, const struct sched_rates *r, struct ty_err *err);

/* ---- telemetry.c: GPU telemetry and idle GPUs (docs/dispatch.md) ---- */

/*
 * GPU telemetry: one node's part of an attempt (attempt_exited.telemetry),
 * or the attempt's summary over its nodes (sched_telemetry_combine).
 * Negative is unknown. Percentages and watts are per GPU.
 */
struct sched_telemetry {
	int64_t samples;		   /* sampling rounds */
	int64_t gpus;			   /* GPUs sampled (a node's only) */
	double util_mean, util_peak;	   /* % of time busy: mean, the highest one GPU had */
	int64_t memory_used_peak_mb;	   /* the most memory one GPU had in use */
	double power_mean_w, power_peak_w; /* draw of one GPU: mean, highest */
	double idle_seconds;		   /* a node's: seconds with all its GPUs idle */
	double idle_gpu_seconds;	   /* the summary's: Σ idle_seconds × GPUs held */
	int nodes;			   /* the summary's: nodes whose reports are in it */
};

/* The smallest teams.idle_gpu_alert_seconds: shorter idle stretches need no look. */
#define SCHED_IDLE_ALERT_MIN_S 60

/* Pure: every field unknown. */
void sched_telemetry_init(struct sched_telemetry *t);
/*
 * Pure: read a node's telemetry object t (borrowed). Every field is
 * optional; one that is malformed (a wrong type, negative, a percentage
 * above 100, absurdly large) is left unknown and its name appended to bad
 * ("a, b"; badsz may be 0). Unknown members are ignored. Returns the
 * number of fields kept.
 */
int sched_telemetry_parse(struct sched_telemetry *out, char *bad, size_t badsz, const json_t *t);
/*
 * Pure: the attempt's summary of n nodes' reports; gpus[i] is node i's
 * allocation. samples summed; means weighted by samples × GPUs sampled (a
 * node without samples counts as one, one without `gpus` by the GPUs it
 * holds); peaks the highest; idle GPU-seconds Σ idle_seconds × gpus[i].
 */
void sched_telemetry_combine(struct sched_telemetry *out, const struct sched_telemetry *v,
			     const int *gpus, int n);
/* New object: a node's known fields as stored in allocations.telemetry; NULL: no memory. */
json_t *sched_telemetry_node_json(const struct sched_telemetry *t);
/* New object: the summary as stored in attempts.gpu_telemetry (unknown: null). */
json_t *sched_telemetry_attempt_json(const struct sched_telemetry *t);
/*
 * Inside a fenced transaction on pg: keep m's (an attempt_exited) telemetry on
 * its node's allocation, the first report only, and write the attempt's
 * summary again. A missing or malformed telemetry is logged and ignored:
 * it never fails the message.
 */
int sched_telemetry_record(struct ty_pg *pg, const struct proto_msg *m, struct ty_err *err);
/*
 * Pure: a heartbeat running[] entry's idle_seconds and gpu_util (-1 when
 * absent or malformed); false when either is present and malformed.
 */
bool sched_running_fields(double *idle, double *util, const json_t *e);
/*
 * New object: entry e of node's heartbeat as kept in nodes.running (job,
 * attempt, and idle_seconds, gpu_util when well formed; a malformed one is
 * logged, at most once a minute); NULL when job or attempt is not valid.
 */
json_t *sched_running_entry(const json_t *e, const char *node);
/*
 * Append {node, ord, running: the entries of running (cleaned by
 * sched_running_entry) idle at least SCHED_IDLE_ALERT_MIN_S} to beats.
 * Returns how many entries were taken, -1 without memory.
 */
int sched_idle_candidates(json_t *beats, const char *node, int ord, const json_t *running);
/*
 * Inside a fenced transaction, for the applied heartbeats in beats (from
 * sched_idle_candidates; the highest ord per node is its newest): write a
 * gpus_idle job event for each live attempt idle on a node for at least
 * its team's idle_gpu_alert_seconds, once per idle stretch
 * (attempts.idle_alert_at).
 */
int sched_idle_check(struct sched *s, const json_t *beats, struct ty_err *err);

/* ---- progress.c: training progress and stragglers ---- */

/*
 * The node condition of a straggler verdict, the scheduler's own: degraded,
 * kept through the executor's heartbeats (which list only what it sees)
 * until SCHED_STRAGGLER_HOLD after the verdict.
 */
#define SCHED_CONDITION_STRAGGLER "straggler"
#define SCHED_STRAGGLER_HOLD "15 minutes"
/* node_failures.message of a straggler verdict (sched_blame_node's why) */
#define SCHED_STRAGGLER_WHY "a straggler: far below its gang's median step rate"

/*
 * Pure: the gang's median step rate, the upper median (for two ranks the
 * faster) of the non-negative rates of v (n of them); -1 when fewer than
 * two are known or the median is 0 (a stalled gang is the hang timeout's).
 */
double sched_gang_median(const double *v, int n);
/*
 * Pure: judge node's new progress entries mine (checked ones, modified:
 * each gets `below`, the reports in a row under pct % of the median,
 * counted on from prev's entry of the same rank) against the gang: mine
 * and others (the gang's [{node, progress}] as stored; node's own entry is
 * skipped). *median is the gang's (-1: none). Returns how many ranks of
 * mine just reached `reports` reports in a row below (stragglers), their
 * indices in flagged[] (at most nflagged).
 */
int sched_straggler_judge(size_t *flagged, size_t nflagged, double *median, json_t *mine,
			  const json_t *prev, const json_t *others, const char *node, int pct,
			  int reports);
/*
 * Pure: the share of the gang's time a rank at rate costs a gang whose
 * median is median, 1 − rate / median (the goodput ledger's straggler
 * time); 0 when either is unknown or the rank is not slower.
 */
double sched_straggler_lost(double rate, double median);
/*
 * Pure: the share of its time the gang loses to its stragglers now: the
 * largest sched_straggler_lost() of the ranks whose `below` is at least
 * reports (judged: mine; others as stored, node's own entry skipped).
 */
double sched_straggler_share(const json_t *mine, const json_t *others, const char *node,
			     double median, int reports);
/* how far the share moves before the ledger is told (a rate is noisy) */
#define SCHED_STRAGGLER_SHARE_STEP 0.05
/*
 * Inside a fenced transaction, for the running[] entries of node's applied
 * heartbeat: keep each live attempt's well-formed progress[] with its
 * allocation and judge its ranks (sched_straggler_judge). A straggler gets
 * a job event `straggler`, a verdict in attempts.stragglers and its node
 * blamed (sched_blame_node, SCHED_STRAGGLER_WHY). When the gang's
 * straggler share (sched_straggler_share) moves by SCHED_STRAGGLER_SHARE_STEP
 * or to or from 0, the new share is appended to attempts.straggler_shares
 * for the ledger. Off with --straggler-percent 0 (progress is still kept).
 */
int sched_progress_apply(struct sched *s, const char *node, const json_t *running,
			 struct ty_err *err);

/* ---- mirror.c: nodes, live allocations, ports and teams ---- */

/* A job's allocations, attempts or state may have changed: read them again. */
void sched_mirror_touch_job(struct sched_mirror *m, int64_t job);
/* A node registered, came back or was lost: read it again. */
void sched_mirror_touch_node(struct sched_mirror *m, const char *node);
/* What a committed cycle wrote to team_usage for team. */
void sched_mirror_team_usage(struct sched_mirror *m, int64_t team, double decayed,
			     double fair_share, int64_t used, int64_t borrowed, int64_t lent,
			     int64_t pending, int64_t since_ms);
/* Read everything again at the next refresh (why: for the debug log, may be NULL). */
void sched_mirror_stale(struct sched_mirror *m, const char *why);
/*
 * Bring s->world.mirror up to date (outside any transaction): whole when
 * stale or every minute, else the touched jobs and nodes, and the teams
 * when their count or max(updated_at) changed. With --check-mirror, then
 * compares it with a fresh load (sched_mirror_check).
 */
int sched_mirror_refresh(struct sched *s, struct ty_err *err);
/*
 * Compare s->world.mirror with a fresh load; 0 when equal, else logs "mirror
 * diverges from PostgreSQL: ..." and returns TY_EINVAL. Takes the whole:
 * before comparing again it collects the notifications (sched_notice_jobs).
 */
int sched_mirror_check(struct sched *s, struct ty_err *err);
/* Free the mirror; it is read whole at the next refresh. */
void sched_mirror_clear(struct sched_mirror *m);

/* ---- queue.c: the pending-job mirror ---- */

/* Note that job's row changed (its next refresh reads it, and its allocations, again). */
void sched_touch(struct sched_world *w, int64_t job);
/*
 * Bring w->queue up to date from pg: a whole reload when stale (new term,
 * lost notifications) or every minute, else the touched jobs only.
 */
int sched_queue_refresh(struct sched_world *w, struct ty_pg *pg, struct ty_err *err);
/* Index of job in q, or -1. */
int sched_queue_find(const struct sched_queue *q, int64_t job);
/* Record what was published for q->v[i] at written_ms (reason copied). TY_ENOMEM. */
int sched_queue_set_reason(struct sched_queue *q, int i, const char *reason, int position,
			   int64_t reserved_ms, int64_t written_ms);
/* Forget the mirror and the cluster mirror (end of a term); the next refresh reloads them. */
void sched_queue_clear(struct sched_world *w);

/* ---- loop.c: cycle triggers ---- */

/*
 * LISTEN on s->term.pg for job events (re-issued after a reconnect, which marks
 * the queue mirror stale) and note, in s->clock.jobs_changed and the touched
 * jobs, events written by any other session.
 */
void sched_notice_jobs(struct sched *s);

/* ---- reconcile.c ---- */

/* Nodes without a heartbeat for --node-timeout-ms become lost. */
int sched_liveness(struct sched *s, struct ty_err *err);
/* Re-send unacknowledged launches, kill what is over, release what never ran. */
int sched_reconcile(struct sched *s, struct ty_err *err);

/* ---- loop.c ---- */

/* Run until *stop is set: standby, lead, clean shutdown. */
int sched_run(struct sched *s, volatile sig_atomic_t *stop, struct ty_err *err);

/* ---- metrics.c: GET /metrics (docs/metrics.md, "Scheduler") ---- */

struct sched_decisions;
struct sched_input;
struct sched_team_in;
struct sockaddr_in;

/*
 * Serve GET /metrics on listen ("IPV4-ADDRESS:PORT", port 0 = any free one)
 * from a libmicrohttpd thread of its own; *out gets the registry and server
 * (free with sched_metrics_stop), *port the bound port. TY_ECONFIG for a
 * bad address, TY_EIO when it cannot listen, TY_ENOMEM.
 */
int sched_metrics_start(struct sched_metrics **out, int *port, const char *listen,
			struct ty_err *err);
/* Stop serving and free everything (NULL-safe). */
void sched_metrics_stop(struct sched_metrics *m);
/*
 * Updates from the loop's thread; each does nothing when s->metrics (or m) is NULL.
 * role: leader 1/0 and epoch (each turn; a standby drops the team gauges).
 */
void sched_metrics_role(struct sched *s);
/*
 * After a cycle committed: cycles, durations (seconds, of which
 * decide_seconds in sched_decide), decisions, queue wait of placed first
 * attempts, preemptions it decided, pending jobs by reason (s->world.queue must
 * still be the queue the cycle read), team gauges, nodes by state.
 */
void sched_metrics_cycle(struct sched *s, const struct sched_input *in,
			 const struct sched_decisions *d, double seconds, double decide_seconds);
void sched_metrics_cycle_failed(struct sched *s);
/* A preemption started for a reason: "reclaim", "priority" or "spot". */
void sched_metrics_preempted(struct sched *s, const char *reason);
/* A job went back to pending after an attempt of class cls; retry: it spent a retry. */
void sched_metrics_requeued(struct sched *s, const char *cls, bool retry);
enum sched_kafka_error { SCHED_KAFKA_PRODUCE, SCHED_KAFKA_DELIVERY, SCHED_KAFKA_CONSUME };
void sched_metrics_kafka_error(struct sched_metrics *m, enum sched_kafka_error what);
/* A consumed message refused as not its node's (proto.h's reasons). */
void sched_metrics_rejected(struct sched *s, enum proto_reject why);
/* The relay saw unsent rows not produced yet, and inflight in flight. */
void sched_metrics_outbox(struct sched_metrics *m, int unsent, int inflight);
/*
 * Consumer lag per assigned partition (cached watermarks), skipped messages
 * and skipped condition entries.
 */
void sched_metrics_kafka(struct sched *s);
/* One series of trainyard_node_conditions: a node's current conditions of a kind and severity. */
struct sched_condition_count {
	const char *node, *kind, *severity; /* borrowed */
	int n;
};
/* The node conditions now current (n series; 0 on a standby), zeroing series gone since. */
void sched_metrics_node_conditions(struct sched *s, const struct sched_condition_count *v, int n);

/* Monotonic seconds, for durations. */
double sched_metrics_clock(void);
/* A team's budget gauge: spend over budget, 0 without one, 1 for a budget of 0. */
double sched_metrics_budget_ratio(const struct sched_team_in *t);
/* Pure: the label of an enum sched_reason ("resources", "quota", ...; "other" if unknown). */
const char *sched_metrics_reason(int reason);
/* Pure: "placed", "backfilled", "reserved" or "pending" for d->pending[i]. */
const char *sched_metrics_outcome(const struct sched_decisions *d, int i);
/* Pure: cls if it is a known failure class, else "other" (bounded label values). */
const char *sched_metrics_class(const char *cls);
/* Pure: parse "IPV4-ADDRESS:PORT" ("localhost" allowed) into *out; TY_EINVAL. */
int sched_metrics_listen_parse(struct sockaddr_in *out, const char *spec);

/* ---- store/: buffered writes of a fenced transaction ---- */

/*
 * Write one dispatch message to the outbox (seq = row id, epoch = s->term.epoch)
 * at the commit (store/outbox.c); takes a reference to data, which must not
 * change afterwards. Sets s->bus.outbox_dirty.
 */
int sched_outbox_add(struct sched *s, enum proto_type type, const char *node, int64_t job,
		     int64_t attempt, json_t *data, struct ty_err *err);
/*
 * Append a job event, as ty_job_event() would, at the commit (store/events.c:
 * ty_job_events(), in the order appended); data may be NULL (copied). Touches
 * the job and logs the message now.
 */
int sched_job_event(struct sched *s, int64_t job, const char *type, const char *state,
		    const char *message, const json_t *data, struct ty_err *err);
/* Write what is buffered (events, then outbox rows) and empty the buffers. */
int sched_store_flush(struct sched_term *t, struct ty_err *err);
/*
 * Commit the fenced transaction: sched_store_flush(), then COMMIT; on a
 * failure of the flush, roll back. The buffers are empty afterwards.
 */
int sched_tx_commit(struct sched_term *t, struct ty_err *err);
int sched_store__events_flush(struct sched_term *t, struct ty_err *err);
/*
 * Lock the jobs of jobs[n] that are still placeable (SELECT ... FOR UPDATE,
 * one statement): *out (new, sorted by job) with *nout rows.
 */
int sched_store_jobs_lock(struct sched_store_job **out, int *nout, struct ty_pg *pg,
			  const int64_t *jobs, int n, struct ty_err *err);
/* The boots of nodes[n] (one statement): *out new, sorted by node id (strcmp). */
int sched_store_boots(struct sched_store_boot **out, int *nout, struct ty_pg *pg,
		      const char *const *nodes, int n, struct ty_err *err);
/* Insert n attempts rows (epoch t->epoch), one statement. */
int sched_store_attempts_add(const struct sched_term *t, const struct sched_store_attempt *v, int n,
			     struct ty_err *err);
/* Insert n allocations rows, one statement. */
int sched_store_allocs_add(struct ty_pg *pg, const struct sched_store_alloc *v, int n,
			   struct ty_err *err);
int sched_store__outbox_flush(struct sched_term *t, struct ty_err *err);
/* attempts.message of an attempt whose ranks all exited 0 while it was being stopped */
#define SCHED_FINISHED_FIRST "finished before it was stopped"
/* ---- small helpers (loop.c) ---- */

/* Decimal text of v in buf (which must hold 24 bytes); returns buf. */
const char *sched_i64(char *buf, int64_t v);
/* Parse a decimal integer column; 0 when NULL. */
int64_t sched_col_i64(const PGresult *res, int row, int col);

#endif
