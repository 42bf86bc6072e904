/*
 * The scheduler's statements: job events and dispatch outbox rows,
 * buffered during a fenced transaction and written just before it commits
 * (events.c, outbox.c, and the commit in store.c), a cycle's placements
 * (placements.c), and the typed calls of the other files' statements (a
 * section each, below). Included by scheduler.h, which declares the calls
 * that take a struct sched.
 */
#ifndef TY_SCHED_STORE_H
#define TY_SCHED_STORE_H

#include "proto.h"
#include "ty_buf.h"

#include <stdbool.h>
#include <stdint.h>

/*
 * One transaction's buffered rows. Events are kept as the PostgreSQL array
 * literals ty_job_events() takes (one per column, the closing brace added
 * at the flush), so a savepoint's mark is a length per column; outbox rows
 * as messages without their seq, which is drawn at the flush.
 */
struct sched_store {
	struct sched_store_events {
		int n;
		struct ty_buf job, type, state, message, data;
	} ev;
	struct sched_store_outbox {
		int n, cap;
		struct proto_msg *v; /* .seq 0 until the flush; .data a reference */
	} ob;
};

/* Where the buffers stood at a savepoint (sched_store_mark). */
struct sched_store_mark {
	int nev, nob;
	size_t job, type, state, message, data;
};

/* Forget everything buffered (a new transaction; the last one committed or rolled back). */
void sched_store_reset(struct sched_store *st);
void sched_store_free(struct sched_store *st);
/* The buffers' lengths now, for sched_store_rewind at a ROLLBACK TO SAVEPOINT. */
struct sched_store_mark sched_store_mark(const struct sched_store *st);
/* Drop what was buffered after mark m. */
void sched_store_rewind(struct sched_store *st, struct sched_store_mark m);

/*
 * Append v to a PostgreSQL array literal being built in b ("{" first, ","
 * between; NULL: an SQL NULL). Returns 0 or TY_ENOMEM. sched_store__arr_end
 * closes it ("{}" when empty).
 */
int sched_store__arr_add(struct ty_buf *b, const char *v);
int sched_store__arr_end(struct ty_buf *b);

/* ---- placements.c: a cycle's placements, set-based (the fallback calls them with n = 1) ---- */

/* A job still placeable (pending, no cancel requested), locked for the transaction. */
struct sched_store_job {
	int64_t job;
	int64_t attempt; /* the job's last attempt number (0: none yet) */
	char *spec;	 /* owned: jobs.spec as text */
	int64_t team_id;
	int64_t run_uid; /* -1: the team has none */
	char *team;	 /* owned: teams.name */
};
void sched_store_jobs_free(struct sched_store_job *v, int n);

/* One attempts row of a placement (borrowed strings). */
struct sched_store_attempt {
	int64_t job, attempt;
	const char *master_node, *master_addr;
	int master_port, nnodes, world_size;
	const char *launch;	   /* JSON text */
	const char *token_sha256; /* attempts.metrics_token_sha256 */
};

/* One allocations row (borrowed strings). */
struct sched_store_alloc {
	int64_t job, attempt;
	const char *node;
	int node_rank, first_rank, local_ranks;
	const char *gpus; /* an integer[] literal, "{0,1}" */
};

/* A node's boot (owned strings). */
struct sched_store_boot {
	char *node, *boot_id; /* boot_id "" when NULL */
};
void sched_store_boots_free(struct sched_store_boot *v, int n);
/* The boot of node in v (sorted by strcmp of node, as returned); NULL when absent. */
const char *sched_store_boot_of(const struct sched_store_boot *v, int n, const char *node);

/* ---- exits.c: attempt_exited's plain success (exit 0, no class), set-based ---- */

/* One node's exit of an attempt (borrowed node). */
struct sched_store_exit {
	int64_t job, attempt;
	const char *node;
};

/* What sched_store_exits_mark did with an exit. */
enum sched_store_exit_fate {
	SCHED_EXIT_NONE,   /* nothing to do: reported before, or not the node's attempt */
	SCHED_EXIT_MARKED, /* its part exited 0 and released */
	SCHED_EXIT_DEFER,  /* its attempt is not plain: the per-message path judges it */
};

/* An attempt that sched_store_exits_settle moved to succeeded. */
struct sched_store_ended {
	int64_t job, attempt, nodes;
	bool stopping; /* it was being stopped (not preempted) */
	bool moved;    /* its job moved to succeeded too */
};

/* ---- mirror_load.c: the cluster mirror's rows (mirror.c) ---- */

struct sched_mnode;
struct sched_malloc;
struct sched_mport;
struct sched_mteam;
struct ty_pg;
struct ty_err;

/* The teams table's fingerprint ("count|sum of row hashes") into buf. */
int sched_store_team_mark(char *buf, size_t n, struct ty_pg *pg, struct ty_err *err);
/*
 * Every team with its team_usage row, sorted by id. The array in *out (and
 * its strings) is new, the caller's whenever it is not NULL: on TY_ENOMEM too,
 * partly filled.
 */
int sched_store_mirror_teams(struct sched_mteam **out, int *nout, struct ty_pg *pg,
			     struct ty_err *err);
/*
 * The nodes that are not lost (ids NULL), or those of ids[0..nids) whatever
 * their state, with (*present)[i] false for a lost one (present may be NULL).
 * New arrays, owned as sched_store_mirror_teams' are.
 */
int sched_store_mirror_nodes(struct sched_mnode **out, bool **present, int *nout,
			     struct ty_pg *pg, const char *const *ids, int nids,
			     struct ty_err *err);
/* Live allocations, and ports held: all (jobs NULL) or those of jobs[0..njobs). New arrays. */
int sched_store_mirror_allocs(struct sched_malloc **out, int *nout, struct ty_pg *pg,
			      const int64_t *jobs, int njobs, struct ty_err *err);
int sched_store_mirror_ports(struct sched_mport **out, int *nout, struct ty_pg *pg,
			     const int64_t *jobs, int njobs, struct ty_err *err);

/* ---- savepoint.c: savepoints with the buffers' mark and rewind ---- */

enum sched_savepoint {
	SCHED_SAVEPOINT_MSG,	    /* kafka.c: one message of a batch */
	SCHED_SAVEPOINT_DECISION,   /* place.c: one decision */
	SCHED_SAVEPOINT_PLACEMENTS, /* place.c: a cycle's placements at once */
};

/* SAVEPOINT sp; where st's buffers stand in *mark. */
int sched_store_savepoint(struct sched_store_mark *mark, struct ty_pg *pg, struct sched_store *st,
			  enum sched_savepoint sp, struct ty_err *err);
/* ROLLBACK TO SAVEPOINT sp; what st buffered since mark is dropped (also when that fails). */
int sched_store_savepoint_rollback(struct ty_pg *pg, struct sched_store *st,
				   enum sched_savepoint sp, struct sched_store_mark mark,
				   struct ty_err *err);
/* RELEASE SAVEPOINT sp. */
int sched_store_savepoint_release(struct ty_pg *pg, enum sched_savepoint sp, struct ty_err *err);

/* ---- term.c: the leader's epoch and advisory lock (leader.c) ---- */

/* The epoch, row 1 of leader read FOR SHARE (in the caller's transaction). */
int sched_store_term_epoch(int64_t *epoch, struct ty_pg *pg, struct ty_err *err);
/* A new term: the epoch incremented with holder, the new one in *epoch. */
int sched_store_term_bump(int64_t *epoch, struct ty_pg *pg, const char *holder,
			  struct ty_err *err);
/* The leader lock (SCHED_LOCK_KEY) on pg's session: taken if free, released, held? */
int sched_store_lock_try(bool *got, struct ty_pg *pg, struct ty_err *err);
int sched_store_lock_release(struct ty_pg *pg, struct ty_err *err);
int sched_store_lock_held(bool *held, struct ty_pg *pg, struct ty_err *err);

/* ---- node_liveness.c: the timed node transitions (reconcile.c) ---- */

/* Node ids, each owned. */
struct sched_store_nodes {
	char **v;
	int n;
};
void sched_store_nodes_free(struct sched_store_nodes *v);

/*
 * Nodes not heard from for timeout_ms, counted from the term's start and,
 * when back_ms >= 0, from back_ms ago (the broker answered again): to lost.
 */
int sched_store_nodes_lost(struct sched_store_nodes *out, struct ty_pg *pg, int timeout_ms,
			   int64_t back_ms, struct ty_err *err);
/* Draining nodes with no live allocation: to drained. */
int sched_store_nodes_drained(struct sched_store_nodes *out, struct ty_pg *pg,
			      struct ty_err *err);
/* Suspect nodes whose failures within window_s fell below suspect_after: to ready. */
int sched_store_nodes_ready_again(struct sched_store_nodes *out, struct ty_pg *pg,
				  int64_t window_s, int64_t suspect_after, struct ty_err *err);

/* ---- reconcile.c: reconciliation's reads and marks (reconcile.c) ---- */

/* Whether the outbox's oldest row is older than age_ms (the relay is behind). */
int sched_store_relay_behind(bool *behind, struct ty_pg *pg, int age_ms, struct ty_err *err);

/* An active attempt's part whose launch its node, heartbeating since, has not acknowledged. */
struct sched_store_unacked {
	int64_t job, attempt;
	int node_rank, first_rank;
	char *node;    /* owned */
	char *gpus;    /* owned: a JSON array of GPU indices */
	char *launch;  /* owned: attempts.launch as JSON text */
	char *boot_id; /* owned; NULL when the node has none */
};
void sched_store_unacked_free(struct sched_store_unacked *v, int n);
/* Those launched more than age_ms ago, by job, attempt, node rank: a new array. */
int sched_store_unacked(struct sched_store_unacked **out, int *nout, struct ty_pg *pg,
			int age_ms, struct ty_err *err);
/* allocations.launched_at / killed_at of one part set to now. */
int sched_store_part_launched(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			      struct ty_err *err);
int sched_store_part_killed(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			    struct ty_err *err);

/* A node's part of an attempt. */
struct sched_store_part {
	int64_t job, attempt;
	char *node;	/* owned */
	bool allocated; /* strays: the node has an allocation of it */
	bool preempted; /* strays: it is stopping, preempted */
};
void sched_store_parts_free(struct sched_store_part *v, int n);
/*
 * Attempts nodes (not lost) say they run that are over (not killed, or
 * killed more than age_ms ago and heartbeating since) or unknown, by node,
 * job, attempt; a part whose node reported its exit is left out. A new array.
 */
int sched_store_strays(struct sched_store_part **out, int *nout, struct ty_pg *pg, int age_ms,
		       struct ty_err *err);
/*
 * Parts of ended attempts killed more than age_ms ago on a node that has
 * heartbeated since and does not run them: released as exited, cancelled.
 */
int sched_store_release_unstarted(struct sched_store_part **out, int *nout, struct ty_pg *pg,
				  int age_ms, struct ty_err *err);

/* ---- spot_drain.c: spot notices' rows (spot.c) ---- */

/*
 * Node to preempting with its notice's deadline, text (jsonb) and first
 * message seq; *changed false when it was already so (or is lost).
 */
int sched_store_spot_notice(bool *changed, struct ty_pg *pg, const char *node,
			    int64_t deadline_ms, const char *notice, int64_t seq,
			    struct ty_err *err);
/* Attempts on node already being preempted: kill_at no later than its deadline - margin_s. */
int sched_store_spot_kill_by(struct ty_pg *pg, const char *node, int margin_s,
			     struct ty_err *err);

/* An active attempt with a live rank on a preempting node. */
struct sched_store_spot_gang {
	int64_t job, attempt;
	int64_t deadline_ms; /* the node's, epoch ms */
	int64_t left_s;	     /* seconds to it, rounded up, >= 0 */
	char *provider;	     /* owned: the notice's, "unknown" when absent */
};
void sched_store_spot_gangs_free(struct sched_store_spot_gang *v, int n);
/* Those of node (if preempting), by job and attempt: a new array. */
int sched_store_spot_gangs(struct sched_store_spot_gang **out, int *nout, struct ty_pg *pg,
			   const char *node, struct ty_err *err);
/*
 * A preempting node back to ready, draining or drained, its notice cleared;
 * the new state in state ("" when it was not preempting).
 */
int sched_store_spot_clear(char *state, size_t len, struct ty_pg *pg, const char *node,
			   struct ty_err *err);
/* The preempting nodes with an active attempt's live rank on them, by id. */
int sched_store_spot_preempting(struct sched_store_nodes *out, struct ty_pg *pg,
				struct ty_err *err);

/* ---- queue_load.c: the pending-job mirror's rows (queue.c) ---- */

struct sched_qjob;
void sched_store_qjobs_free(struct sched_qjob *v, int n);
/* Every pending job not cancelled, by id: a new array (and strings) in *out. */
int sched_store_queue_pending(struct sched_qjob **out, int *nout, struct ty_pg *pg,
			      struct ty_err *err);
/*
 * The jobs of jobs[0..njobs) whatever their state, (*queued)[i] true for a
 * pending one not cancelled: new arrays in *out and *queued.
 */
int sched_store_queue_of(struct sched_qjob **out, bool **queued, int *nout, struct ty_pg *pg,
			 const int64_t *jobs, int njobs, struct ty_err *err);

/* ---- ledger.c: the usage ledger's rows (ledger.c) ---- */

/* A node's part of an ended attempt, as read, and its ledger row as computed. */
struct sched_store_ledger {
	int64_t team, job, attempt;
	char *node, *pool, *model; /* owned: ty_node_pool, ty_gpu_model */
	int gpus;
	int64_t start_ms, end_ms, checkpoint_ms; /* checkpoint 0: none */
	char *outcome, *failure_class;		 /* owned: attempts.state; NULL when none */
	double idle_seconds;			 /* -1 when not reported */
	/* filled by the caller for sched_store_ledger_insert */
	double rate, gpu_seconds, lost_gpu_seconds, cost;
	double idle_gpu_seconds; /* < 0: unknown (NULL) */
};
void sched_store_ledger_free(struct sched_store_ledger *v, int n);
/*
 * One per node of the attempts (jobs[i], attempts[i]) that have ended with
 * every node released and are not in the ledger yet, by job, attempt and
 * node rank: a new array.
 */
int sched_store_ledger_ended(struct sched_store_ledger **out, int *nout, struct ty_pg *pg,
			     const int64_t *jobs, const int64_t *attempts, int n,
			     struct ty_err *err);
/* v[0..n)'s ledger rows, in one statement (a row already there is left alone). */
int sched_store_ledger_insert(struct ty_pg *pg, const struct sched_store_ledger *v, int n,
			      struct ty_err *err);
/* usage_rates replaced by v[0..n). */
struct sched_rate;
int sched_store_rates_replace(struct ty_pg *pg, const struct sched_rate *v, int n,
			      struct ty_err *err);

/* ---- telemetry.c: GPU telemetry's rows (telemetry.c) ---- */

/*
 * A node's telemetry (JSON text) kept with its allocation unless one is
 * there already; *first: it was not.
 */
int sched_store_telemetry_node(bool *first, struct ty_pg *pg, int64_t job, int64_t attempt,
			       const char *node, const char *telemetry, struct ty_err *err);
/* A node's telemetry as kept, and its GPU count. */
struct sched_store_telemetry {
	char *telemetry; /* owned: JSON text */
	int gpus;
};
void sched_store_telemetry_free(struct sched_store_telemetry *v, int n);
/* The attempt's nodes with telemetry, by node rank: a new array. */
int sched_store_telemetry_nodes(struct sched_store_telemetry **out, int *nout, struct ty_pg *pg,
				int64_t job, int64_t attempt, struct ty_err *err);
/* attempts.gpu_telemetry set to telemetry (JSON text). */
int sched_store_telemetry_attempt(struct ty_pg *pg, int64_t job, int64_t attempt,
				  const char *telemetry, struct ty_err *err);

/* An attempt idle past its team's limit on a node, its alert just stamped. */
struct sched_store_idle {
	int64_t job, attempt, gpus, limit_s;
	char *node, *state; /* owned; state: the job's */
	double idle_seconds, util;
	bool has_util;
};
void sched_store_idle_free(struct sched_store_idle *v, int n);
/*
 * From beats (JSON [{node, ord, running}], the newest of each node counts):
 * the live attempts idle at least their team's limit since after their last
 * alert, one node each (the longest idle), their idle_alert_at set to now.
 */
int sched_store_idle_alerts(struct sched_store_idle **out, int *nout, struct ty_pg *pg,
			    const char *beats, struct ty_err *err);

/* ---- relay.c: the outbox relay's rows (relay.c) ---- */

/* A dispatch_outbox row to produce. */
struct sched_store_outbox_row {
	int64_t id;
	char *node;    /* owned */
	char *payload; /* owned, NUL-terminated */
	size_t len;
};
void sched_store_outbox_rows_free(struct sched_store_outbox_row *v, int n);
/* The oldest rows (1000 at most) but those of skip[0..nskip), by id: a new array. */
int sched_store_outbox_next(struct sched_store_outbox_row **out, int *nout, struct ty_pg *pg,
			    const int64_t *skip, int nskip, struct ty_err *err);
/* The rows of ids[0..n) deleted (delivered). */
int sched_store_outbox_delete(struct ty_pg *pg, const int64_t *ids, int n, struct ty_err *err);

/* ---- usage.c: usage accrual's rows (usage.c) ---- */

/* GPUs a team held from start_ms to end_ms. */
struct sched_store_span {
	int64_t team, gpus, start_ms, end_ms;
};
/*
 * The spans that ended after from_ms: ledger rows, and released allocations
 * of attempts not in the ledger yet. A new array (free()).
 */
int sched_store_usage_spans(struct sched_store_span **out, int *nout, struct ty_pg *pg,
			    int64_t from_ms, struct ty_err *err);

#endif
