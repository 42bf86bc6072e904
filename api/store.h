/*
 * The API's SQL as typed calls (store_*.c): the statements are constants
 * beside their call, no PGresult leaves a store file. Documents come back
 * as JSON text in the caller's arena; "not there" is a NULL document or a
 * false flag, never an error. Every call returns 0 or a ty code with err
 * filled (TY_ECONFLICT for a unique violation).
 */
#ifndef TY_API_STORE_H
#define TY_API_STORE_H

#include "api.h"
#include "quota.h"

/*
 * For the store files only: a copy of res's value at row, col in a (*out
 * NULL for SQL NULL). Returns 0 or TY_ENOMEM.
 */
int api__store_text(const char **out, struct ty_arena *a, const PGresult *res, int row, int col,
		    struct ty_err *err);
/* The first row's first value copied into a (*out NULL: no row, or NULL); res is cleared. */
int api__store_first(const char **out, struct ty_arena *a, PGresult *res, struct ty_err *err);

/* The filters of a list of webhooks or sweeps (texts; NULL: none), newest first. */
struct api_page_filter {
	const char *scope; /* api_scope's */
	const char *team; /* a team's name */
	const char *cursor; /* rows with a smaller id */
	const char *limit;
};

/* ---- store_feasible.c ---- */
/* What a team and the cluster could ever give a job (quota.h). */
struct api_capacity {
	struct quota_team team; /* used 0 */
	int64_t peers_lendable;	/* Σ quota_lendable_max over its cohort's other teams */
	struct quota_shape *shapes; /* arena; not lost nodes grouped by shape */
	int nshapes;
};
/* Team team_id's capacity (TY_ENOTFOUND: no such team). */
int api_store_capacity(struct api_capacity *c, struct ty_pg *pg, struct ty_arena *a,
		       const char *team_id, struct ty_err *err);

/* ---- store_node_pools.c ---- */
/*
 * Create or replace node pool v[0] with labels v[1] (JSON text),
 * gpus_per_node v[2], cpus_per_node v[3], memory_mb_per_node v[4] (NULL:
 * not limited) and max_nodes v[5]; *doc its document, *created whether it
 * is new.
 */
int api_store_node_pool_put(const char **doc, bool *created, struct ty_pg *pg,
			    struct ty_arena *a, const char *const v[6], struct ty_err *err);
/* Every node pool, by name: {"items": [...]}. */
int api_store_node_pools_list(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      struct ty_err *err);
/* Delete node pool name; *found whether there was one. */
int api_store_node_pool_delete(bool *found, struct ty_pg *pg, const char *name,
			       struct ty_err *err);

/* ---- store_audit.c ---- */
/* An audit_log row: token token_id did action to object (in the caller's transaction). */
int api_store_audit_log(struct ty_pg *pg, int64_t token_id, const char *action,
			const char *object, struct ty_err *err);
/* audit_requests' columns, in the order of api_store_audit_request's row. */
#define API_AUDIT_COLUMNS(X)                                                                       \
	X(request_id)                                                                              \
	X(token_id)                                                                                \
	X(principal)                                                                               \
	X(role)                                                                                    \
	X(team)                                                                                    \
	X(trial_job)                                                                               \
	X(method)                                                                                  \
	X(route)                                                                                   \
	X(path)                                                                                    \
	X(target_ids)                                                                              \
	X(created_id)                                                                              \
	X(status)                                                                                  \
	X(problem_code)                                                                            \
	X(peer)                                                                                    \
	X(summary)
enum api_audit_col {
#define API_AUDIT_COL_ENUM(c) API_AUDIT_##c,
	API_AUDIT_COLUMNS(API_AUDIT_COL_ENUM)
#undef API_AUDIT_COL_ENUM
	API_AUDIT_NCOLS
};
/*
 * One audit_requests row (texts; NULL: SQL NULL; target_ids a text[]
 * literal), committed asynchronously: a crash may lose the last few.
 */
int api_store_audit_request(struct ty_pg *pg, const char *const row[API_AUDIT_NCOLS],
			    struct ty_err *err);
/* GET /v1/audit's filters (texts; NULL: none), newest first. */
struct api_audit_filter {
	const char *token_id, *principal, *team, *method, *path_prefix, *status;
	const char *since_ms, *until_ms; /* epoch milliseconds: at >= since, at < until */
	const char *before_id; /* the cursor: rows with a smaller id */
	const char *limit;
};
/* A page: its JSON array in *items, the next page's cursor or NULL in *next. */
int api_store_audit_page(const char **items, const char **next, struct ty_pg *pg,
			 struct ty_arena *a, const struct api_audit_filter *f, struct ty_err *err);
/* Delete up to batch rows older than days days; *n how many. */
int api_store_audit_prune(long long *n, struct ty_pg *pg, int days, int batch, struct ty_err *err);

/* ---- store_teams.c ---- */
/*
 * The team columns a body sets, in their order in both statements; each is
 * also the body's field name (api_validate_team checks the values).
 */
#define API_TEAM_COLUMNS(X)                                                                        \
	X(nominal_gpus)                                                                            \
	X(borrowing_limit_gpus)                                                                    \
	X(lending_limit_gpus)                                                                      \
	X(cohort)                                                                                  \
	X(weight)                                                                                  \
	X(max_pending_jobs)                                                                        \
	X(max_cpus)                                                                                \
	X(max_memory_mb)                                                                           \
	X(run_uid)                                                                                 \
	X(idle_gpu_alert_seconds)                                                                  \
	X(checkpoint_keep)                                                                         \
	X(checkpoint_keep_every)                                                                   \
	X(checkpoint_tier)
enum api_team_col {
#define API_TEAM_COL_ENUM(c) API_TEAM_##c,
	API_TEAM_COLUMNS(API_TEAM_COL_ENUM)
#undef API_TEAM_COL_ENUM
	API_TEAM_NCOLS
};
/* The body field of column c (static). */
const char *api_team_col_name(enum api_team_col c);
/* Column values as text (NULL: SQL NULL); given: whether a patch sets it. */
struct api_team_set {
	bool given[API_TEAM_NCOLS];
	const char *value[API_TEAM_NCOLS];
};
/*
 * Set team name's money budget (amount as text, period "day", "week" or
 * "month"; both NULL: none) and forget its period's alert; *doc its
 * document, NULL when there is no such team.
 */
int api_store_team_budget_set(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      const char *name, const char *amount, const char *period,
			      struct ty_err *err);
/* Insert team name with s's values (weight NULL: 1); *doc its document. */
int api_store_team_insert(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
			  const struct api_team_set *s, struct ty_err *err);
/* Set s's given columns of team name; *doc its document, NULL when no such team. */
int api_store_team_update(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
			  const struct api_team_set *s, struct ty_err *err);
/* Whether some team runs as uid (text). */
int api_store_team_uid_taken(bool *taken, struct ty_pg *pg, const char *uid, struct ty_err *err);
/* {"items": [...]} of every team, or of team only (not NULL). */
int api_store_teams_list(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *team,
			 struct ty_err *err);
/* Team name's document, NULL when none (or when own is set and is not name). */
int api_store_team_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *name,
		       const char *own, struct ty_err *err);
/* What a submission to a team is checked against (texts; NULL: SQL NULL). */
struct api_team_limits {
	const char *id; /* NULL: no such team */
	const char *nominal, *borrowing; /* GPUs */
	const char *max_cpus, *max_memory_mb;
	const char *ckpt_keep, *ckpt_keep_every, *ckpt_tier; /* checkpoint defaults ("t"/"f") */
	bool limited; /* it has a max_pending_jobs */
};
/* Team name's limits. */
int api_store_team_limits(struct api_team_limits *t, struct ty_pg *pg, struct ty_arena *a,
			  const char *name, struct ty_err *err);
/*
 * Lock team team_id's row (api_team_lock) and read its max_pending_jobs
 * (-1: none, or no such team).
 */
int api_store_team_lock(long long *max_pending, struct ty_pg *pg, const char *team_id,
			struct ty_err *err);
/* A limited team of a submission batch: its max_pending_jobs (-1: none) and pending jobs. */
struct api_team_pending {
	long long id, max, pending;
};
/*
 * Lock the rows of teams team_ids[0..n) (texts, in id order, held to the
 * commit) and count their pending jobs after the lock; *out a new array of
 * *nt (free) of the teams there are.
 */
int api_store_teams_pending(struct api_team_pending **out, int *nt, struct ty_pg *pg,
			    const char *const *team_ids, int n, struct ty_err *err);
/* Team name's id (text), NULL when none. */
int api_store_team_id(const char **id, struct ty_pg *pg, struct ty_arena *a, const char *name,
		      struct ty_err *err);

/* ---- store_team_history.c ---- */
/*
 * {"items": [...], "totals": {...}} of team name's samples in [since_ms,
 * until_ms) (texts, ms since the epoch), oldest first; NULL when there is
 * no such team (or when own is set and is not name).
 */
int api_store_team_history(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			   const char *name, const char *own, const char *since_ms,
			   const char *until_ms, struct ty_err *err);

/* ---- store_nodes.c ---- */
/* {"items": [...]} of the nodes, of those in state only when it is set; scope as api_scope. */
int api_store_nodes_list(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *scope,
			 const char *state, struct ty_err *err);
/* Node id's document (its running jobs those of scope), NULL when none. */
int api_store_node_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *scope,
		       const char *id, struct ty_err *err);
/* What an admin does to a node (docs/api.md "Nodes"). */
enum api_node_op { API_NODE_DRAIN, API_NODE_UNDRAIN, API_NODE_PREEMPT };
/*
 * Apply op to node id (arg: preempt's deadline in seconds, text; unused
 * otherwise) and notify the scheduler ('node:<id>' on
 * trainyard_job_events), in the caller's transaction. *doc the node's
 * document, NULL when none. Idempotent.
 */
int api_store_node_admin(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			 enum api_node_op op, const char *id, const char *arg, struct ty_err *err);

/* ---- store_checkpoints.c ---- */
/*
 * {"resume_step", "items": [...]} of job id's checkpoints, newest first,
 * NULL when no such job in scope.
 */
int api_store_job_checkpoints(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      const char *id, const char *scope, struct ty_err *err);

/* ---- store_attempts.c ---- */
/* {"items": [...]} of job id's attempts, NULL when no such job in scope. */
int api_store_job_attempts(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			   const char *scope, struct ty_err *err);
/* Where a rank's log is (texts in the arena). */
struct api_log_where {
	bool job; /* the job is there, in scope */
	const char *attempt; /* the attempt asked for (or the current one); NULL: none */
	bool rank; /* that attempt has the rank */
	const char *log_url, *node; /* of the rank's node */
};
/* Rank rank (text) of job id's attempt (text; NULL: the current one). */
int api_store_log_where(struct api_log_where *w, struct ty_pg *pg, struct ty_arena *a,
			const char *id, const char *scope, const char *rank, const char *attempt,
			struct ty_err *err);

/* ---- store_queue.c ---- */
/* A page of the pending queue (texts; NULL: no filter, no cursor). */
struct api_queue_filter {
	const char *team; /* only this team's jobs */
	const char *after_key, *after_id; /* the cursor: the previous page's last entry */
	const char *limit; /* entries per page */
	const char *viewer; /* the caller's team id (api_scope): other teams' jobs are masked */
};
/* The page's JSON array in *items, and the next page's cursor or NULL in *next. */
int api_store_queue_page(const char **items, const char **next, struct ty_pg *pg,
			 struct ty_arena *a, const struct api_queue_filter *f, struct ty_err *err);
/*
 * A what-if request for the leading scheduler (docs/api.md, "What-if"):
 * spec (JSON text) of team team_id stored and announced; *id the request's.
 */
int api_store_what_if_ask(const char **id, struct ty_pg *pg, struct ty_arena *a,
			  const char *team_id, const char *priority_class, const char *priority,
			  const char *spec, struct ty_err *err);
/* Its answer as viewer (a team id, NULL: all) may see it, or *answer NULL while none. */
int api_store_what_if_answer(const char **answer, struct ty_pg *pg, struct ty_arena *a,
			     const char *id, const char *viewer, struct ty_err *err);
/* Delete the request (answered, or given up on). */
int api_store_what_if_forget(struct ty_pg *pg, const char *id, struct ty_err *err);

/* ---- store_jobs.c (more) ---- */
/*
 * Cancel sweep sweep_id's unfinished trials (in the caller's transaction):
 * pending ones end now, started ones get cancel_requested; each gets its
 * job event.
 */
int api_store_jobs_end_of_sweep(struct ty_pg *pg, struct ty_arena *a, const char *sweep_id,
				struct ty_err *err);
/* A page of a job's events (texts in the arena). */
struct api_job_events {
	const char *state; /* the job's; NULL: no such job in scope */
	const char *events; /* their JSON array, redacted for the viewer */
	const char *last; /* the last one's seq; NULL: none after the cursor */
};
/* Up to limit events of job id after seq after (scope as api_scope's). */
int api_store_job_events(struct api_job_events *ev, struct ty_pg *pg, struct ty_arena *a,
			 const char *id, const char *scope, long long after, long long limit,
			 struct ty_err *err);
/* ---- store_events.c ---- */
/* A page of the cross-job event feed (texts in the arena). */
struct api_events_feed {
	const char *events; /* their JSON array, redacted for the viewer */
	int count;
	struct api_feed_cursor last; /* the last event's position; the cursor given when none */
	uint64_t horizon; /* the oldest running transaction's id: nothing below it is to come */
	bool held_back; /* some event waits above the horizon for older transactions */
};
/*
 * Up to limit events after cursor after that scope (api_scope's) may see,
 * of team (a name; NULL: every team), in commit order below the horizon.
 */
int api_store_events_feed(struct api_events_feed *f, struct ty_pg *pg, struct ty_arena *a,
			  const char *scope, const char *team, const struct api_feed_cursor *after,
			  long long limit, struct ty_err *err);
/* An Idempotency-Key of a team, and whether a job has it. */
struct api_job_key {
	const char *team_id, *key;
	bool taken; /* out */
};
/* Which of k[0..n) some job already has. */
int api_store_jobs_keyed(struct api_job_key *k, int n, struct ty_pg *pg, struct ty_err *err);
/* How many of team team_id's jobs are pending. */
int api_store_jobs_pending(long long *n, struct ty_pg *pg, const char *team_id,
			   struct ty_err *err);
/* Whether job id (text) is there, in scope (api_scope's; NULL: any team). */
int api_store_job_visible(bool *found, struct ty_pg *pg, const char *id, const char *scope,
			  struct ty_err *err);

/* ---- store_tokens.c (more) ---- */
/* {"items": [...]} of every token (no secrets). */
int api_store_tokens_list(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			  struct ty_err *err);
/* Revoke token id (text; idempotent); *found false when there is none. */
int api_store_token_revoke(bool *found, struct ty_pg *pg, const char *id, struct ty_err *err);

/* ---- store_webhooks.c ---- */
/* Active webhooks of team team_id (text), counted under a lock of the team's row. */
int api_store_webhooks_active(int *n, struct ty_pg *pg, const char *team_id, struct ty_err *err);
/* A webhook to register (texts; events a JSON array of event names). */
struct api_webhook_new {
	const char *team_id, *url, *events, *secret, *created_by;
};
/* Insert w; *doc its document. */
int api_store_webhook_insert(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			     const struct api_webhook_new *w, struct ty_err *err);
/* Webhook id's document, NULL when none in scope (api_scope's; NULL: any team). */
int api_store_webhook_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			  const char *scope, struct ty_err *err);
/* A page: its JSON array in *items, the next page's cursor or NULL in *next. */
int api_store_webhooks_page(const char **items, const char **next, struct ty_pg *pg,
			    struct ty_arena *a, const struct api_page_filter *f,
			    struct ty_err *err);
/* Lock webhook id for a write (in the caller's transaction); *found false when none in scope. */
int api_store_webhook_lock(bool *found, bool *active, struct ty_pg *pg, const char *id,
			   const char *scope, struct ty_err *err);
/* Whether webhook id is there, in scope. */
int api_store_webhook_visible(bool *found, struct ty_pg *pg, const char *id, const char *scope,
			      struct ty_err *err);
/* Deactivate webhook id and cancel its pending deliveries (idempotent). */
int api_store_webhook_deactivate(struct ty_pg *pg, const char *id, struct ty_err *err);
/* Queue a ping to webhook id; *doc its delivery's document. */
int api_store_webhook_ping(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			   struct ty_err *err);
/* A page of webhook webhook_id's deliveries (state NULL: any), as api_store_webhooks_page. */
int api_store_deliveries_page(const char **items, const char **next, struct ty_pg *pg,
			      struct ty_arena *a, const char *webhook_id, const char *state,
			      const char *cursor, const char *limit, struct ty_err *err);

/* ---- store_deliveries.c ---- */
/* A delivery claimed for a POST (strings owned by it). */
struct api_delivery_claim {
	int64_t id;
	int n; /* this attempt's number */
	char *event, *body, *url, *secret;
};
/*
 * Claim up to limit due deliveries for lease_ms; *out a new array of *n
 * (api_store_claims_free). The result's copy of the secrets is wiped.
 */
int api_store_deliveries_claim(struct api_delivery_claim **out, int *n, struct ty_pg *pg,
			       int limit, int lease_ms, struct ty_err *err);
/* Free n claims, their secrets wiped first (NULL-safe). */
void api_store_claims_free(struct api_delivery_claim *c, int n);
/* Milliseconds until the next pending delivery is due; *any false when none is pending. */
int api_store_deliveries_next_due(bool *any, int64_t *ms, struct ty_pg *pg, struct ty_err *err);
/* One finished POST of a claimed delivery. */
struct api_delivery_attempt {
	int64_t id;
	int n, duration_ms;
	bool answered; /* an HTTP status came back */
	long http_status;
	const char *error; /* NULL: none */
	bool ok; /* delivered */
	int max_attempts; /* failed after this many */
	int64_t delay_ms; /* until the next attempt when not delivered */
};
/* Record at and the delivery's next state; *failed when it has now failed for good. */
int api_store_delivery_record(bool *failed, int64_t *webhook_id, struct ty_pg *pg,
			      const struct api_delivery_attempt *at, struct ty_err *err);
/* Hand claims ids[0..n) back at once (those still pending). */
int api_store_deliveries_release(struct ty_pg *pg, const int64_t *ids, int n, struct ty_err *err);

/* ---- store_sweeps.c ---- */
/* The sweep team_id created with Idempotency-Key key: *hash its request_sha256 (NULL: none). */
int api_store_sweep_by_key(const char **hash, const char **doc, struct ty_pg *pg,
			   struct ty_arena *a, const char *team_id, const char *key,
			   struct ty_err *err);
/* A sweep to create (texts, JSON as text; NULL: SQL NULL). */
struct api_sweep_new {
	const char *team_id, *name, *template, *search, *max_concurrent, *objective;
	const char *key, *hash; /* the Idempotency-Key and the body's hash */
	const char *trials; /* [{"spec": ..., "params": ...}, ...] */
	const char *priority_class, *priority; /* of every trial */
	const char *message; /* of every trial's submitted event */
};
/* Insert s, its trial jobs and their events; *id the sweep's (TY_ECONFLICT: key taken). */
int api_store_sweep_insert(const char **id, struct ty_pg *pg, struct ty_arena *a,
			   const struct api_sweep_new *s, struct ty_err *err);
/* Sweep id's document, NULL when none in scope (api_scope's; NULL: any team). */
int api_store_sweep_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
			const char *scope, struct ty_err *err);
/* A page of sweeps (their documents without trials). */
int api_store_sweeps_page(const char **items, const char **next, struct ty_pg *pg,
			  struct ty_arena *a, const struct api_page_filter *f, struct ty_err *err);
/* Lock sweep id for a write (in the caller's transaction); *found false when none in scope. */
int api_store_sweep_lock(bool *found, struct ty_pg *pg, const char *id, const char *scope,
			 struct ty_err *err);
/* Mark sweep id cancelled (idempotent). */
int api_store_sweep_cancelled(struct ty_pg *pg, const char *id, struct ty_err *err);

/* ---- store_usage.c ---- */
/*
 * GET /v1/usage's document: usage of team team_id (NULL: all teams) from
 * from_ms to to_ms (epoch milliseconds as text; NULL: 30 days before to,
 * and now), grouped by group_by (team, job, pool or day).
 */
int api_store_usage(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *team_id,
		    const char *from_ms, const char *to_ms, const char *group_by,
		    struct ty_err *err);
/*
 * GET /v1/usage?split=goodput's document: the goodput categories of the
 * ledger rows of team team_id (NULL: all) that ended in the range (as
 * api_store_usage's), per team and pool.
 */
int api_store_usage_goodput(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			    const char *team_id, const char *from_ms, const char *to_ms,
			    struct ty_err *err);

/* ---- store_job_metrics.c ---- */
/* One trial metrics report (texts; attempt NULL: the job's current one). */
struct api_metrics_report {
	const char *job_id, *step, *attempt;
	const char *metrics; /* a JSON object of name to number */
	const char *scope; /* api_scope's */
};
/* Store m, merged into an earlier report of its step; *doc the stored row, NULL: no such job. */
int api_store_job_metrics_put(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			      const struct api_metrics_report *m, struct ty_err *err);
/*
 * GET /v1/jobs/{id}/metrics's document: up to limit steps after after_step
 * (of metric name only, when not NULL); NULL when no such job in scope.
 */
int api_store_job_metrics_page(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			       const char *job_id, const char *scope, const char *name,
			       long long after_step, long long limit, struct ty_err *err);

/* ---- store_metrics.c ---- */
/* GET /metrics's scrape-time queries: their first columns label, the rest are gauge values. */
enum api_gauge_query {
	API_GAUGES_JOBS, /* team, state | jobs */
	API_GAUGES_QUEUE, /* team | pending jobs, oldest pending age */
	API_GAUGES_TEAMS, /* team | allocated, nominal, borrowed GPUs, fair share */
	API_GAUGES_IDLE, /* team | jobs holding idle GPUs */
	API_GAUGES_NODES, /* state | nodes */
	API_GAUGES_OUTBOX, /* | dispatch outbox rows */
	API_GAUGES_STORAGE, /* team, tier | checkpoint bytes */
	API_GAUGES_COUNT
};
/* Rows of text (SQL NULL as ""), row-major: v[row * ncols + col]. */
struct api_rows {
	int n, ncols;
	const char **v;
};
/* The rows of query q (in the arena). */
int api_store_gauge_rows(struct api_rows *rows, struct ty_pg *pg, struct ty_arena *a,
			 enum api_gauge_query q, struct ty_err *err);

#endif
