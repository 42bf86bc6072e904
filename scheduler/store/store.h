/*
 * The scheduler's set-based writes: job events and dispatch outbox rows,
 * buffered during a fenced transaction and written just before it commits
 * (events.c, outbox.c, and the commit in store.c), and a cycle's placements
 * (placements.c). Included by scheduler.h, which declares the calls that
 * take a struct sched.
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
};
/* A preemption started: the job's checkpoint signal and the seconds until kill_at. */
struct sched_store_preempt {
	char *signal; /* owned */
	int grace_s;
};
/*
 * The attempt of an active job with no cancel requested to stopping, failure
 * class preempted, kill_at after the job's checkpoint grace (cut short by a
 * deadline); *moved false when it was over or being stopped already.
 * out->signal is new (free it).
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
int sched_store_job_requeued(bool *moved, int64_t *preemptions, int64_t *spot_preemptions,
			     struct ty_pg *pg, int64_t job, int64_t attempt, bool spot,
			     struct ty_err *err);

/* ---- preemptions.c: what the preemption protocol reads ---- */

/* The nodes still running a part of the attempt (not lost), by node rank: *out new. */
int sched_store_checkpoint_nodes(char ***out, int *nout, struct ty_pg *pg, int64_t job,
				 int64_t attempt, struct ty_err *err);
/* Free v[n] and its strings; NULL-safe. */
void sched_store_strs_free(char **v, int n);

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

/* A pending job's queue fields (borrowed reason). */
struct sched_store_queue_row {
	int64_t job;
	const char *reason;
	int position;	     /* 1-based; 0: none (NULL) */
	int64_t reserved_ms; /* -1: none (NULL) */
};
/* Write v[n]'s queue fields where the job is still pending; one statement. */
int sched_store_queue_publish(struct ty_pg *pg, const struct sched_store_queue_row *v, int n,
			      struct ty_err *err);
/* Clear the queue fields of jobs[n] that are no longer pending; one statement. */
int sched_store_queue_left(struct ty_pg *pg, const int64_t *jobs, int n, struct ty_err *err);
/* A team's team_usage row. */
struct sched_store_team_usage {
	int64_t team;
	double decayed, fair_share;
	int64_t used, borrowed, lent, pending;
};
/* Upsert v[n]'s team_usage rows (teams that exist), as of now_ms; one statement. */
int sched_store_team_usage_write(struct ty_pg *pg, const struct sched_store_team_usage *v, int n,
				 int64_t now_ms, struct ty_err *err);

#endif
