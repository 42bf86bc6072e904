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

#include "goodput.h"
#include "proto.h"
#include "ty_buf.h"

#include <stdbool.h>
#include <stddef.h>
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
int sched_store__arr_i64(struct ty_buf *b, int64_t v);
int sched_store__arr_end(struct ty_buf *b);
/* Free v[n] and its strings (the string lists calls return); NULL-safe. */
void sched_store_strs_free(char **v, int n);

struct ty_pg;

/* ---- placements.c: a cycle's placements, set-based (the fallback calls them with n = 1) ---- */

/* A job still placeable (pending, no cancel requested), locked for the transaction. */
struct sched_store_job {
	int64_t job;
	int64_t attempt; /* the job's last attempt number (0: none yet) */
	char *spec;	 /* owned: jobs.spec as text */
	int64_t team_id;
	int64_t run_uid; /* -1: the team has none */
	char *team;	 /* owned: teams.name */
	/* the job's newest valid checkpoint (store/checkpoints.c): the launch's resume */
	int64_t resume_step; /* -1: none */
	char resume_digest[65];
	char *resume_path; /* owned; NULL when none */
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

/* The states of attempts t whose exits the set-based path settles as sched_settle_attempt would. */
#define SCHED_STORE_PLAIN_STATE                                                                    \
	"(t.state IN ('scheduled', 'starting', 'running')"                                         \
	" OR (t.state = 'stopping' AND t.failure_class IS DISTINCT FROM 'preempted'))"

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

/* ---- lifecycle.c: from the scheduler's decisions (place.c, preempt.c) ---- */

struct ty_pg;
struct ty_err;

/* A job's attempt. */
struct sched_store_ja {
	int64_t job, attempt;
};

/* Move n jobs to `scheduled` with their new attempt, queue fields cleared; one statement. */
int sched_store_jobs_scheduled(struct ty_pg *pg, const int64_t *jobs, const int64_t *attempts,
			       int n, struct ty_err *err);
/*
 * A pending job whose cancel (or stop) was requested ended: *to "stopped"
 * (stop_requested) or "cancelled" (static strings), NULL when it was no
 * longer pending.
 */
int sched_store_job_cancel_pending(const char **to, struct ty_pg *pg, int64_t job,
				   struct ty_err *err);
/* An active attempt to stopping (a cancel); *moved false when it was not active. */
int sched_store_attempt_stopping(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
				 struct ty_err *err);

/* What starts a preemption (borrowed strings). */
struct sched_store_preempt_req {
	int64_t job, attempt;
	int64_t for_job;       /* 0: none */
	const char *why;       /* attempts.message */
	const char *spot_node; /* NULL: none */
	int64_t deadline_ms;   /* 0: none */
	int64_t margin_s;      /* kill_at is at most deadline - margin */
	int grace_s;	       /* the grace chosen from measurements; < 0: the job's spec's */
};
/* A preemption started: the job's checkpoint signal and the seconds until kill_at. */
struct sched_store_preempt {
	char *signal; /* owned */
	int grace_s;
};
/*
 * The attempt of an active job with no cancel requested to stopping, failure
 * class preempted, checkpoint_signal_at now, kill_at after r->grace_s or the
 * job's checkpoint grace (cut short by a deadline); *moved false when it
 * was over or being stopped already. out->signal is new (free it).
 */
int sched_store_attempt_preempt(struct sched_store_preempt *out, bool *moved, struct ty_pg *pg,
				const struct sched_store_preempt_req *r, struct ty_err *err);
/* The job to preempting (its attempt moved by sched_store_attempt_preempt). */
int sched_store_job_preempting(struct ty_pg *pg, int64_t job, struct ty_err *err);
/* The stopping attempts whose kill_at passed and that hold unkilled nodes: *out new. */
int sched_store_kills_due(struct sched_store_ja **out, int *nout, struct ty_pg *pg,
			  struct ty_err *err);
/* Lock the attempt (FOR UPDATE); *due whether it is still stopping and past kill_at. */
int sched_store_kill_due_lock(bool *due, struct ty_pg *pg, int64_t job, int64_t attempt,
			      struct ty_err *err);
/* A preempted attempt that ended on every node. */
struct sched_store_preempted {
	int64_t for_job; /* 0: none */
	char *spot_node; /* owned; NULL: not a spot preemption */
};
/*
 * A stopping, preempted attempt to failed; *moved false when settled
 * before. out->spot_node is new (free it).
 */
int sched_store_attempt_preempt_failed(struct sched_store_preempted *out, bool *moved,
				       struct ty_pg *pg, int64_t job, int64_t attempt,
				       struct ty_err *err);
/*
 * A preempting job whose cancel (or stop) was requested meanwhile ended: *to
 * "stopped" or "cancelled" (static), NULL when it was not so.
 */
int sched_store_job_preempt_cancelled(const char **to, struct ty_pg *pg, int64_t job,
				      int64_t attempt, struct ty_err *err);
/*
 * A preempting job back to pending, no retry spent: preemptions (and
 * spot_preemptions when spot) + 1, their new values in *preemptions and
 * *spot_preemptions; *moved false when it was not preempting.
 */
int sched_store_job_preempt_requeued(bool *moved, int64_t *preemptions, int64_t *spot_preemptions,
			     struct ty_pg *pg, int64_t job, int64_t attempt, bool spot,
			     struct ty_err *err);

/* ---- preemptions.c: what the preemption protocol reads ---- */

/* The nodes still running a part of the attempt (not lost), by node rank: *out new. */
int sched_store_checkpoint_nodes(char ***out, int *nout, struct ty_pg *pg, int64_t job,
				 int64_t attempt, struct ty_err *err);

/* ---- cancels.c: the cancels (stops) the scheduler has still to carry out ---- */

/* A job whose cancel or stop was requested. */
struct sched_store_cancel {
	int64_t job, attempt;
	char state[16]; /* jobs.state: pending, or active with an active attempt */
	bool stop;	/* stop_requested */
};
/* The jobs to end (pending) or stop (active attempt), by id: *out new. */
int sched_store_cancels(struct sched_store_cancel **out, int *nout, struct ty_pg *pg,
			struct ty_err *err);

/* ---- cycle_load.c: what a cycle reads beside the mirror ---- */

/* The database's clock in ms since the epoch (one clock for the whole cycle). */
int sched_store_now_ms(int64_t *now_ms, struct ty_pg *pg, struct ty_err *err);
/* active[k]: how many jobs of sweep sweeps[k] are scheduled, starting, running or preempting. */
int sched_store_sweeps_active(int *active, struct ty_pg *pg, const int64_t *sweeps, int n,
			      struct ty_err *err);

/* ---- queue_publish.c: what a cycle publishes of the queue and the teams ---- */

/* A pending job's queue fields (borrowed reason) and start-time estimate. */
struct sched_store_queue_row {
	int64_t job;
	const char *reason;
	int position;	     /* 1-based; 0: none (NULL) */
	int64_t reserved_ms; /* -1: none (NULL) */
	bool estimate_only;  /* the queue fields above are left as they are */
	bool estimate;	     /* estimated_start/estimate_basis are written (migration 0035) */
	int64_t est_ms;	     /* -1: none (NULL) */
	json_t *basis;	     /* borrowed; NULL: SQL NULL */
};
/*
 * Write v[n]'s queue fields and estimates where the job is still pending:
 * one statement for the rows with queue fields, locked in id order; one
 * more for estimate-only rows, only those whose estimate changed and whose
 * job no other transaction holds (SKIP LOCKED: left for the next estimate).
 */
int sched_store_queue_publish(struct ty_pg *pg, const struct sched_store_queue_row *v, int n,
			      struct ty_err *err);
/* Clear the queue fields of jobs[n] that are no longer pending; one statement. */
int sched_store_queue_left(struct ty_pg *pg, const int64_t *jobs, int n, struct ty_err *err);
/* ---- estimates.c: start-time estimates and the runtime history behind them ---- */

/*
 * secs[i]: the p80 of the recent successful runtimes of jobs[i]'s team and
 * name (runtime_history), 0 when it has none; jobs[] sorted ascending.
 */
int sched_store_runtimes(int64_t *secs, struct ty_pg *pg, const int64_t *jobs, int n,
			 struct ty_err *err);
/* A team's team_usage row. */
struct sched_store_team_usage {
	int64_t team;
	double decayed, fair_share;
	int64_t used, borrowed, lent, pending;
};
/* v[n] as the JSON rows (team, decayed, fs, used, borrowed, lent, pending) the team statements read (new, in *text). */
int sched_store_team_usage_json(char **text, const struct sched_store_team_usage *v, int n,
				struct ty_err *err);
/* Upsert v[n]'s team_usage rows (teams that exist), as of now_ms; one statement. */
int sched_store_team_usage_write(struct ty_pg *pg, const struct sched_store_team_usage *v, int n,
				 int64_t now_ms, struct ty_err *err);

/* ---- team_samples.c: teams over time (migration 0034) ---- */

/*
 * Insert v[n] as the team_samples rows at now_ms (teams that exist), each
 * with the preemptions its team suffered and caused since the previous
 * sample (or in the interval_s before now_ms when there is none); one
 * statement. In the caller's transaction.
 */
int sched_store_team_samples_write(struct ty_pg *pg, const struct sched_store_team_usage *v,
				   int n, int64_t now_ms, int interval_s, struct ty_err *err);
/* Delete the samples older than retention_days before now_ms; *deleted how many. */
int sched_store_team_samples_prune(int64_t *deleted, struct ty_pg *pg, int64_t now_ms,
				   int retention_days, struct ty_err *err);

/*
 * Mark the n exits' parts exited 0 and released (one statement) where the
 * attempt is plain: active, or stopping but not preempted, with no part
 * ended other than by exiting 0. fate[n] says what became of each.
 */
int sched_store_exits_mark(enum sched_store_exit_fate *fate, struct ty_pg *pg,
			   const struct sched_store_exit *v, int n, struct ty_err *err);

/* ---- lifecycle.c: every write of jobs.state and attempts.state ---- */

/* An attempt being preempted (a condition on attempts): it may still end on its own. */
#define SCHED_STORE_PREEMPTING "(state = 'stopping' AND failure_class = 'preempted')"

/*
 * The job's move from a live state (scheduled, starting, running,
 * preempting) while attempt is its current one; *moved says whether it
 * moved. cls (NULL: kept) becomes jobs.failure_class. All but requeued set
 * finished_at.
 */
int sched_store_job_succeeded(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			      struct ty_err *err);
int sched_store_job_failed(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			   const char *cls, struct ty_err *err);
int sched_store_job_requeued(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			     const char *cls, struct ty_err *err);
/*
 * The nodes an expedited requeue holds (docs/scheduling.md, "Expedited
 * requeue"): those of the job's last attempt but the ones it excludes (the
 * blamed node among them) and those lost, draining or drained, by id and
 * joined by ','; NULL for none. One rule for the requeued event and the
 * queue load (queue_load.c): a subquery over jobs j.
 */
#define SCHED_STORE_HOLD_NODES                                                                     \
	"(SELECT string_agg(a.node_id, ',' ORDER BY a.node_id) FROM allocations a"                 \
	" JOIN nodes n ON n.id = a.node_id"                                                        \
	" WHERE a.job_id = j.id AND a.attempt = j.attempt"                                         \
	" AND NOT a.node_id = ANY (coalesce(j.excluded_nodes, '{}'))"                              \
	" AND n.state NOT IN ('lost', 'draining', 'drained'))"
/* The nodes attempt's requeue holds for job, into *csv (new, NULL for none). */
int sched_store_hold_nodes(char **csv, struct ty_pg *pg, int64_t job, int64_t attempt,
			   struct ty_err *err);
/* To stopped (stopped) or cancelled. */
int sched_store_job_cancelled(bool *moved, struct ty_pg *pg, int64_t job, int64_t attempt,
			      bool stopped, const char *cls, struct ty_err *err);

/* An attempt's failure (borrowed strings; NULL: SQL NULL). */
struct sched_store_failure {
	int64_t job, attempt;
	const int *exit_code;
	const char *cls, *message, *evidence, *blamed;
};
/* The attempt to failed while active or being preempted; *moved: it was. */
int sched_store_attempt_failed(bool *moved, struct ty_pg *pg, const struct sched_store_failure *f,
			       struct ty_err *err);
/* The attempt to succeeded (stopping: "finished before it was stopped"); the caller judged it. */
int sched_store_attempt_succeeded(struct ty_pg *pg, int64_t job, int64_t attempt,
				  struct ty_err *err);
/* The attempt to cancelled ("cancelled as requested"); the caller judged it. */
int sched_store_attempt_cancelled(struct ty_pg *pg, int64_t job, int64_t attempt,
				  struct ty_err *err);

/* A rank's start or end as reported (borrowed node). */
struct sched_store_rank {
	int64_t job, attempt, rank;
	const char *node;
	int64_t local_rank, pid;  /* rank_started */
	int64_t exit_code, signal; /* rank_exited */
};
/*
 * A started rank: its row when the node has a part in the attempt (*mine),
 * the launch acknowledged, and on the attempt's first rank the attempt and
 * the job to starting (*moved). One statement.
 */
int sched_store_attempt_starting(bool *mine, bool *moved, struct ty_pg *pg,
				 const struct sched_store_rank *r, struct ty_err *err);

/* A job that moved, with its attempt; first: the index in v of its first started rank. */
struct sched_store_moved {
	int64_t job, attempt;
	int first;
};
/*
 * The n started ranks of a batch (in order) as sched_store_attempt_starting
 * each, one statement: *out (new, sorted by job) the jobs moved to starting.
 */
int sched_store_attempts_starting(struct sched_store_moved **out, int *nout, struct ty_pg *pg,
				  const struct sched_store_rank *v, int n, struct ty_err *err);

/* A node's attempt_running (borrowed). */
struct sched_store_running {
	int64_t job, attempt;
	const char *node;
	const json_t *skipped; /* the resume's skipped checkpoints; NULL: no resume reported */
	const char *path;      /* where it resumed from; NULL: none */
	int64_t step;	       /* -1: none */
};
/* An attempt (and its job) that moved to running. */
struct sched_store_run {
	int64_t job, attempt, nodes, world_size;
	bool resumed;	   /* its resume is recorded */
	char *resume_from; /* owned; NULL: started from scratch */
	int64_t resume_step, nskipped;
};
void sched_store_runs_free(struct sched_store_run *v, int n);
/*
 * The n attempt_running messages (in order), one statement: each node's
 * part running (its first report), the resume of the first node that
 * reports one kept, and the attempts whose every node runs, with their
 * jobs, to running. *out (new, sorted by job): the jobs moved.
 */
int sched_store_attempts_running(struct sched_store_run **out, int *nout, struct ty_pg *pg,
				 const struct sched_store_running *v, int n, struct ty_err *err);
/*
 * Of the attempts of v[n], those whose every node has exited 0 and that are
 * still plain, with their jobs, to succeeded (one statement): *out (new,
 * sorted by job, attempt) with *nout rows.
 */
int sched_store_attempts_succeeded(struct sched_store_ended **out, int *nout, struct ty_pg *pg,
				   const struct sched_store_exit *v, int n, struct ty_err *err);

/* ---- allocations.c: the nodes' parts of attempts as reported ---- */

/* A node's part of an attempt (borrowed node). */
struct sched_store_part {
	int64_t job, attempt;
	const char *node;
};
/* The n launches acknowledged (each part's first acknowledgement), one statement. */
int sched_store_allocs_accepted(struct ty_pg *pg, const struct sched_store_part *v, int n,
				struct ty_err *err);
/*
 * The attempt's parts not exited, on nodes not lost, but except's (NULL:
 * none) killed now: their nodes in *nodes (new) with *n entries.
 */
int sched_store_allocs_kill(char ***nodes, int *n, struct ty_pg *pg, int64_t job, int64_t attempt,
			    const char *except, struct ty_err *err);
/* The part's first report of its end (cls NULL: none), its GPUs released; *applied: it was. */
int sched_store_alloc_exited(bool *applied, struct ty_pg *pg, const struct sched_store_part *a,
			     int exit_code, const char *cls, struct ty_err *err);
/*
 * Every part the node still holds ended (class cls where none was
 * reported) and released: *out (new; .node is node) with *nout parts.
 */
int sched_store_node_released(struct sched_store_part **out, int *nout, struct ty_pg *pg,
			      const char *node, const char *cls, struct ty_err *err);
/* Whether the node has a part in the attempt. */
int sched_store_alloc_exists(bool *exists, struct ty_pg *pg, const struct sched_store_part *a,
			     struct ty_err *err);
/* The attempt's state into state (size bytes; "" when there is no such attempt). */
int sched_store_attempt_state(char *state, size_t size, struct ty_pg *pg, int64_t job,
			      int64_t attempt, struct ty_err *err);

/* An attempt as a node's exit finds it (sched_store_attempt_after_exit). */
struct sched_store_after_exit {
	bool exists;
	char state[16];
	/* being preempted, and no other node's part ended other than by exiting 0 */
	bool preempting_alone;
};
int sched_store_attempt_after_exit(struct sched_store_after_exit *out, struct ty_pg *pg,
				   const struct sched_store_part *a, struct ty_err *err);

/* An attempt's parts, to settle it. */
struct sched_store_parts {
	bool exists; /* the attempt has parts */
	char state[16];
	bool preempted; /* attempts.failure_class is preempted */
	int64_t live;	/* parts not exited */
	int64_t bad;	/* parts that ended other than by their ranks' own exit 0 */
	int64_t total;
};
int sched_store_attempt_parts(struct sched_store_parts *out, struct ty_pg *pg, int64_t job,
			      int64_t attempt, struct ty_err *err);

/* ---- retries.c: a failed attempt's job: budget, backoff, exclusions ---- */

/* What judging a failure reads of the job (sched_store_job_retry). */
struct sched_store_job_retry {
	bool exists;
	char state[16];
	int64_t attempt;
	bool cancel_requested, stop_requested;
	char *retry;   /* owned: spec->'retry' as text; NULL when absent */
	char *retries; /* owned: jobs.retries as text; NULL when NULL */
};
void sched_store_job_retry_free(struct sched_store_job_retry *r);
/* The job, locked for the transaction (FOR UPDATE). */
int sched_store_job_retry(struct sched_store_job_retry *out, struct ty_pg *pg, int64_t job,
			  struct ty_err *err);
/*
 * A retry taken: jobs.retries (JSON text), not_before backoff_s from now
 * (none when 0), exclude (NULL: none) added to excluded_nodes.
 */
int sched_store_job_retry_spent(struct ty_pg *pg, int64_t job, const char *retries,
				int64_t backoff_s, const char *exclude, struct ty_err *err);
/* node excluded from the job's later attempts while attempt is still its latest. */
int sched_store_job_exclude(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			    struct ty_err *err);
/* Whether the job's cancel is a stop (jobs.stop_requested). */
int sched_store_job_stop_requested(bool *stop, struct ty_pg *pg, int64_t job, struct ty_err *err);

/* ---- node_failures.c: failures blamed on nodes, and the states they lead to ---- */

/* A failure blamed on a node (borrowed strings). */
struct sched_store_node_failure {
	const char *node;
	int64_t job, attempt;
	const char *cls, *evidence, *message, *source; /* source: evidence_source's name */
};
/* Record it, when the node exists and the failure is new (*added). */
int sched_store_node_failure_add(bool *added, struct ty_pg *pg,
				 const struct sched_store_node_failure *f, struct ty_err *err);

/* A node's blame within the failure window (sched_store_node_score). */
struct sched_store_node_score {
	bool exists;
	char state[16];
	int64_t score;	  /* the points that count */
	bool busy;	  /* it holds GPUs of an attempt */
	int64_t seen_pts; /* points observed by executors */
	int64_t log_pts;  /* points from rank logs alone, counted or not */
	int64_t log_teams; /* teams of the jobs of those */
};
/*
 * The node's points from failures of distinct jobs within window_s since its
 * last undrain (hardware counts 2); those from rank logs alone count when
 * they come from log_only_teams teams or more. Locks the node.
 */
int sched_store_node_score(struct sched_store_node_score *out, struct ty_pg *pg, const char *node,
			   int64_t window_s, int64_t log_only_teams, struct ty_err *err);
/* The node to state to with drain_reason reason (NULL: none). */
int sched_store_node_blamed(struct ty_pg *pg, const char *node, const char *to, const char *reason,
			    struct ty_err *err);
/* The node to suspect if it is ready. */
int sched_store_node_suspect(struct ty_pg *pg, const char *node, struct ty_err *err);

/* ---- node_conditions.c: nodes' health conditions ---- */

/* What recording a node's conditions changed (sched_store_conditions_record). */
enum sched_condition_what {
	SCHED_CONDITION_NEW,	   /* recorded for the first time */
	SCHED_CONDITION_NOW_FATAL, /* recorded before as degraded, now fatal */
	SCHED_CONDITION_CLEARED,   /* no longer listed */
};
struct sched_store_condition_change {
	enum sched_condition_what what;
	char severity[16];
	bool fatal; /* severity is fatal */
	char *kind, *evidence; /* owned */
};
void sched_store_condition_changes_free(struct sched_store_condition_change *v, int n);
/*
 * Record the node's conditions clean (a JSON array of clean conditions:
 * kind, severity, gpu, gpu_uuid, port, code, evidence, first_seen,
 * last_seen) as its boot boot_id (NULL: the node's current one) reports
 * them; whole: clean is the whole current list, so every current condition
 * not in it is cleared. *out (new): what changed.
 */
int sched_store_conditions_record(struct sched_store_condition_change **out, int *nout,
				  struct ty_pg *pg, const char *node, const char *boot_id,
				  const json_t *clean, bool whole, struct ty_err *err);
/*
 * A fatal condition's drain: drain_reason reason, and a ready or suspect
 * node draining (busy) or drained. The node's state after it into state
 * (size bytes; "" when there is no such node).
 */
int sched_store_condition_drain(char *state, size_t size, struct ty_pg *pg, const char *node,
				const char *reason, struct ty_err *err);
/* Delete the node's conditions cleared more than CONDITION_HISTORY_DAYS ago. */
int sched_store_conditions_prune(struct ty_pg *pg, const char *node, struct ty_err *err);
/* The current conditions per node, kind and severity (owned strings). */
struct sched_store_condition_count {
	char *node, *kind, *severity;
	int n;
};
void sched_store_condition_counts_free(struct sched_store_condition_count *v, int n);
int sched_store_conditions_count(struct sched_store_condition_count **out, int *nout,
				 struct ty_pg *pg, struct ty_err *err);

/* ---- nodes_reported.c: registers, heartbeats and the exits they repeat ---- */

/* A node's row as a register or heartbeat finds it (sched_store_node_get). */
struct sched_store_node {
	bool exists;
	bool lost;
	bool preempting;
	int64_t preempt_seq; /* 0: none, or set through the API */
	int64_t last_seq;
	int gpus;
	int64_t cpus, memory_mb; /* 0 = not reported */
	char boot_id[256];
};
/* The node, locked for the transaction (FOR UPDATE). */
int sched_store_node_get(struct sched_store_node *n, struct ty_pg *pg, const char *node,
			 struct ty_err *err);

/* A register (borrowed strings; NULL: SQL NULL). */
struct sched_store_register {
	const char *node, *address, *labels, *boot_id, *log_url, *inventory; /* JSON: labels, inventory */
	int64_t gpus, seq;
	bool simulated;
	int64_t cpus, memory_mb, expected_gpus; /* 0 or less: not reported (NULL) */
	const char *isolation, *fault;
};
/*
 * Insert or update the node (its state left alone, a lost one back):
 * *fault_was (new; NULL when none) its fault before this register.
 */
int sched_store_node_register(char **fault_was, struct ty_pg *pg,
			      const struct sched_store_register *r, struct ty_err *err);
/* A heartbeat of the node (running: JSON text of its cleaned running[]); a lost node is back. */
int sched_store_node_heartbeat(struct ty_pg *pg, const char *node, int64_t seq,
			       const char *running, const char *boot_id, struct ty_err *err);

/* A plain heartbeat (borrowed). */
struct sched_store_beat {
	const char *node, *boot_id;
	int64_t seq;
	const json_t *running; /* cleaned running[] */
};
/* A node whose heartbeat sched_store_node_heartbeats applied (owned strings). */
struct sched_store_beat_applied {
	char *node;
	char *cleared; /* its conditions cleared, as one text; NULL: none */
};
void sched_store_beats_free(struct sched_store_beat_applied *v, int n);
/*
 * The n plain heartbeats (in order), one statement: the newest of each node
 * that is not lost nor preempting, of the boot it registered and newer than
 * what was applied, its current conditions cleared. *out (new, sorted by
 * node): the nodes applied.
 */
int sched_store_node_heartbeats(struct sched_store_beat_applied **out, int *nout, struct ty_pg *pg,
				const struct sched_store_beat *v, int n, struct ty_err *err);

/* A finished attempt a heartbeat repeats whose part has not exited. */
struct sched_store_finished {
	char node[PROTO_NODE_ID_MAX + 1];
	int64_t job, attempt;
	int exit_code;
	char failure_class[32];
	char *message, *evidence; /* owned */
	char *condition;	  /* owned JSON text; NULL when none */
	bool log_only;
};
void sched_store_finished_free(struct sched_store_finished *v, int n);
/*
 * Of records (a JSON array of {node, job, attempt, exit_code,
 * failure_class, message, evidence, log_only, condition}), those whose part
 * has not exited, once per part: *out (new).
 */
int sched_store_finished_unconfirmed(struct sched_store_finished **out, int *nout,
				     struct ty_pg *pg, const json_t *records, struct ty_err *err);
/* live[i]: whether part v[i] has not exited; one statement. */
int sched_store_parts_live(bool *live, struct ty_pg *pg, const struct sched_store_part *v, int n,
			   struct ty_err *err);

/* ---- checkpoints.c: attempts' verified checkpoints ---- */

/* A verified checkpoint at step, reported by node a->node of the attempt. */
int sched_store_checkpoint_written(struct ty_pg *pg, const struct sched_store_part *a,
				   int64_t step, struct ty_err *err);

/* One checkpoint_written report (borrowed strings; digest, path, reason may be NULL). */
struct sched_store_ckpt_report {
	int64_t job, attempt;
	const char *node;
	int64_t step;
	const char *path, *status, *digest, *reason;
	int64_t bytes, files;
	bool hashed; /* the node hashed every file (rank 0's, --ckpt-rehash) */
};
struct sched_store_ckpt_outcome {
	enum {
		SCHED_CKPT_NOTHING,   /* known already, or not from a node of the attempt */
		SCHED_CKPT_RECORDED,  /* a new row, or a torn one now valid */
		SCHED_CKPT_DISAGREES, /* another digest than the valid row's: node, digest */
		SCHED_CKPT_REJECTED,  /* the resume checkpoint rejected; next_step resumes */
	} what;
	char node[128];
	char digest[65];
	int64_t next_step; /* -1: no valid one left */
	char job_state[32]; /* the job's, for the event */
};
/*
 * Apply r to the checkpoints table, idempotently: the first hashed report
 * of a step wins, a later valid one with another digest is recorded as a
 * disagreement (never overwriting), a rejected one marks the valid row
 * with that digest rejected. *out says what changed.
 */
int sched_store_checkpoint_report(struct sched_store_ckpt_outcome *out, struct ty_pg *pg,
				  const struct sched_store_ckpt_report *r, struct ty_err *err);

/* ---- storage.c: where jobs' checkpoints are ---- */

/*
 * The bytes of job's checkpoints on node's storage and in the object store
 * (< 0: unchanged), as node (one the job had an allocation on) reported.
 */
int sched_store_checkpoint_storage(struct ty_pg *pg, int64_t job, const char *node,
				   int64_t local_bytes, int64_t store_bytes, struct ty_err *err);
/*
 * Record the error of job's last move to the object store (NULL: it
 * worked), as node reported; *changed when it failed after working or
 * works after failing (state: the job's then), false when node has no
 * allocation of job.
 */
int sched_store_checkpoint_tier_error(bool *changed, char state[32], struct ty_pg *pg, int64_t job,
				      const char *node, const char *error, struct ty_err *err);
/* ---- grace.c: measured checkpoint durations (checkpoint-aware preemption) ---- */

/* What a victim's grace is sized from. */
struct sched_store_grace_in {
	char cls[16];	      /* the job's priority class */
	int64_t measured_ms;  /* the longest of its last measured durations; -1: none */
	int64_t spec_grace_s; /* its spec's checkpoint.grace_seconds */
};
/*
 * The job's class, measured checkpoint duration and spec's grace (zeroed,
 * measured_ms -1, when no such job).
 */
int sched_store_grace_inputs(struct sched_store_grace_in *out, struct ty_pg *pg, int64_t job,
			     struct ty_err *err);
/*
 * A valid checkpoint written after the checkpoint signal, reported by node
 * a->node of a preempted attempt: the first one (per attempt) is recorded
 * and its duration since the signal kept for the job (the last three).
 * *ms: that duration; -1 when nothing was recorded (not preempted, no
 * signal, measured before, a node without a part in it).
 */
int sched_store_checkpoint_committed(int64_t *ms, struct ty_pg *pg,
				     const struct sched_store_part *a, struct ty_err *err);

/* ---- ranks.c: ranks' ends ---- */

/* v[n] as the JSON records the rank statements read ($1): new text in *out. */
int sched_store__ranks_json(char **out, const struct sched_store_rank *v, int n, bool started,
			    struct ty_err *err);
/*
 * An ended rank, when the node has a part in the attempt (*mine) and it is
 * in the node's range; the range back (*first, *nranks) to judge it.
 */
int sched_store_rank_exited(bool *mine, int64_t *first, int64_t *nranks, struct ty_pg *pg,
			    const struct sched_store_rank *r, struct ty_err *err);
/* The n ended ranks of a batch, one statement; *bad: one is outside its node's range. */
int sched_store_ranks_exited(bool *bad, struct ty_pg *pg, const struct sched_store_rank *v, int n,
			     struct ty_err *err);

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

/* A node's part of an attempt as reconciliation found it (strays, unstarted parts). */
struct sched_store_part_found {
	int64_t job, attempt;
	char *node;	/* owned */
	bool allocated; /* strays: the node has an allocation of it */
	bool preempted; /* strays: it is stopping, preempted */
};
void sched_store_parts_found_free(struct sched_store_part_found *v, int n);
/*
 * Attempts nodes (not lost) say they run that are over (not killed, or
 * killed more than age_ms ago and heartbeating since) or unknown, by node,
 * job, attempt; a part whose node reported its exit is left out. A new array.
 */
int sched_store_strays(struct sched_store_part_found **out, int *nout, struct ty_pg *pg, int age_ms,
		       struct ty_err *err);
/*
 * Parts of ended attempts killed more than age_ms ago on a node that has
 * heartbeated since and does not run them: released as exited, cancelled.
 */
int sched_store_release_unstarted(struct sched_store_part_found **out, int *nout, struct ty_pg *pg,
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
/*
 * The open what-if requests (docs/api.md, "What-if"), at most max, oldest
 * first, read as jobs by the queue's statement: id is the request's,
 * submit_ms when it was asked. Requests older than 10 minutes are deleted
 * first (an API that died waiting left them).
 */
int sched_store_what_if_open(struct sched_qjob **out, int *nout, struct ty_pg *pg, int max,
			     struct ty_err *err);
/* Answer request id (answer: JSON text) and NOTIFY the API; a request already gone is no error. */
int sched_store_what_if_answer(struct ty_pg *pg, int64_t id, const char *answer,
			       struct ty_err *err);

/* ---- ledger.c: the usage ledger's rows (ledger.c) ---- */

/* A node's part of an ended attempt, as read, and its ledger row as computed. */
struct sched_store_ledger {
	int64_t team, job, attempt;
	char *node, *pool, *model; /* owned: ty_node_pool, ty_gpu_model */
	int gpus;
	int64_t start_ms, end_ms, checkpoint_ms; /* checkpoint 0: none */
	char *outcome, *failure_class;		 /* owned: attempts.state; NULL when none */
	double idle_seconds;			 /* -1 when not reported */
	int64_t checkpoint_write_ms;		 /* attempts.checkpoint_write_ms */
	int64_t queued_ms; /* the previous attempt's end, else the job's submission */
	/* owned: attempts.straggler_shares (for the previous release's verdict,
	 * [straggler_at, straggler_lost]); NULL when none */
	struct sched_straggler_share *straggler;
	int nstraggler;
	/* filled by the caller for sched_store_ledger_insert */
	double rate, gpu_seconds, lost_gpu_seconds, cost;
	double idle_gpu_seconds; /* < 0: unknown (NULL) */
	int64_t gpu_ms, goodput[PROTO_GOODPUT_COUNT], queue_wait_gpu_ms;
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
/*
 * Add write_ms to the attempt's checkpoint writing time for step, once: only
 * a step newer than any counted, of a live or stopping attempt, from a node
 * of it (attempts.checkpoint_write_*).
 */
int sched_store_checkpoint_write(struct ty_pg *pg, const struct sched_store_part *a, int64_t step,
				 int64_t write_ms, struct ty_err *err);
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

/* ---- progress.c: training progress and stragglers (progress.c) ---- */

/*
 * The running attempt's nodes with progress as JSON text [{node,
 * progress}] in *gang, the job's state in *state (both new) and the share
 * last appended to attempts.straggler_shares in *share (0: none); both
 * NULL when the attempt is not the job's current running one or node
 * holds no live part of it.
 */
int sched_store_progress_gang(char **gang, char **state, double *share, struct ty_pg *pg,
			      int64_t job, int64_t attempt, const char *node, struct ty_err *err);
/* The node's allocation's progress set to progress (JSON text). */
int sched_store_progress_node(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			      const char *progress, struct ty_err *err);
/* verdict (JSON text, an object) appended to attempts.stragglers with `at`, now. */
int sched_store_straggler(struct ty_pg *pg, int64_t job, int64_t attempt, const char *verdict,
			  struct ty_err *err);
/*
 * [now in ms, share] appended to attempts.straggler_shares, unless it holds
 * SCHED_STORE_STRAGGLER_SHARES entries already (the ledger then counts the
 * last one on).
 */
#define SCHED_STORE_STRAGGLER_SHARES 1000
int sched_store_straggler_share(struct ty_pg *pg, int64_t job, int64_t attempt, double share,
				struct ty_err *err);

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

/* GPUs a team held from start_ms to end_ms; of a ledger row, its lost_infra GPU-ms. */
struct sched_store_span {
	int64_t team, gpus, start_ms, end_ms;
	int64_t lost_infra_gpu_ms;
};
/*
 * The spans that ended after from_ms: ledger rows, and released allocations
 * of attempts not in the ledger yet. A new array (free()).
 */
int sched_store_usage_spans(struct sched_store_span **out, int *nout, struct ty_pg *pg,
			    int64_t from_ms, struct ty_err *err);

/* ---- node_pools.c: declared node pools (place.c, "cannot run") ---- */

struct sched_store_pool {
	char name[64];
	int64_t gpus, cpus, memory_mb; /* per node; 0 = not limited */
	int64_t max_nodes;
};
/* Every node pool, by name. A new array (free()). */
int sched_store_node_pools(struct sched_store_pool **out, int *nout, struct ty_pg *pg,
			   struct ty_err *err);

/* ---- budgets.c: money budgets (place.c) ---- */

/* A team's budget and its current period's spend (ty_budget_spent, migration 0032). */
struct sched_store_budget {
	int64_t team;
	double amount, spent;
	char period[8]; /* "day", "week", "month" */
};
/* Every team with a budget, by id. A new array (free()). */
int sched_store_budgets(struct sched_store_budget **out, int *nout, struct ty_pg *pg,
			struct ty_err *err);
/*
 * The 80 % alert of each of teams[0..n) at spent[i] (ty_budget_alert: once
 * per period, a team.budget webhook delivery); *fired = how many fired.
 * In the caller's transaction.
 */
int sched_store_budget_alerts(int *fired, struct ty_pg *pg, const int64_t *teams,
			      const double *spent, int n, struct ty_err *err);

#endif
