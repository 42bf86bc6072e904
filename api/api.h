/*
 * trainyard-api internals: the server, its route table and handlers.
 * Every handler runs with an authenticated request (when its route needs
 * one), a pooled database connection and a per-request arena.
 */
#ifndef TY_API_H
#define TY_API_H

#include "ty_arena.h"
#include "ty_buf.h"
#include "ty_err.h"
#include "ty_pg.h"

#include <jansson.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

enum api_role { API_ROLE_NONE, API_ROLE_VIEWER, API_ROLE_MEMBER, API_ROLE_ADMIN };
/* "admin", "member" or "viewer" (static), NULL for API_ROLE_NONE. */
const char *api_role_name(enum api_role role);

/* Route flags. */
#define API_AUTH 0x1 /* needs a bearer token */
#define API_BODY 0x2 /* expects a JSON object body */
#define API_JOB 0x4 /* the first "{}" is a job id: other teams' jobs are 404, never 403 */
#define API_TRIAL 0x8 /* also open to a trial metrics token (its own job only) */

struct api_server;
struct api_req;
struct api_submission;
struct ty_ed25519_key;

/*
 * A handler replies with api_reply_* (which return 0) or returns a negative
 * ty code with err filled; the dispatcher turns that into a problem.
 */
typedef int (*api_handler_fn)(struct api_req *r, struct ty_err *err);

struct api_route {
	const char *method;
	/* "{}" matches one path segment; a trailing "{*}" the rest of the path, "" too */
	const char *pattern;
	api_handler_fn fn;
	enum api_role role; /* minimum role; API_ROLE_NONE for open routes */
	unsigned flags;
};

extern const struct api_route api_routes[];
extern const int api_routes_count;

/*
 * The route of method and path (pure): the first route whose pattern
 * matches path with that method, its "{}" segments copied into params
 * (arena text), or NULL with allow (allowsz bytes) holding the methods the
 * path does have, comma-separated ("" when no pattern matches: a 404).
 */
const struct api_route *api_route_find(const char *method, const char *path, struct ty_arena *a,
				       const char *params[4], char *allow, size_t allowsz);

struct api_auth {
	int64_t token_id;
	enum api_role role;
	int64_t team_id; /* 0 for admins */
	const char *team; /* NULL for admins; arena-owned */
	const char *token_name;
	/*
	 * A trial metrics token ("tym_..."): the job and attempt it was drawn
	 * for (0 otherwise). It has the member role in the job's team, but
	 * only routes flagged API_TRIAL accept it, and only for that job.
	 */
	int64_t trial_job;
	int trial_attempt;
};

/* Long-poll waiter, linked into the watcher while its request is parked. */
struct api_waiter {
	struct api_waiter *next;
	int64_t job_id; /* 0: any job's event (the event feed) */
	int64_t deadline_ms; /* monotonic */
	bool woken;
	struct MHD_Connection *conn;
};

/* "<16 hex of the process>-<hex sequence>" and its NUL. */
#define API_REQUEST_ID_LEN 40

struct api_req {
	struct api_server *srv;
	struct MHD_Connection *conn;
	struct ty_arena *arena;
	const char *method;
	const char *path;
	const struct api_route *route;
	const char *params[4]; /* "{}" captures in order, arena-owned */
	struct ty_buf body;
	bool body_too_large;
	json_t *json; /* parsed body (owned) */
	struct api_auth auth;
	struct ty_pg *pg; /* borrowed from the pool while the handler runs */
	const char *origin; /* allowed CORS origin to echo, or NULL */
	/* the reply */
	unsigned status;
	char *resp; /* malloc'd body */
	size_t resp_len;
	const char *content_type;
	const char *hdr_name[8], *hdr_value[8];
	int nhdr;
	/* long-poll state */
	struct api_waiter waiter;
	bool parked;
	int64_t wait_deadline_ms;
	double started; /* api__metrics_now() at arrival */
	char request_id[API_REQUEST_ID_LEN]; /* X-Request-Id of the reply */
	const char *problem_code; /* the reply's problem code (arena), or NULL */
	const char *problem_field; /* the field of a problem returned by api_fail (arena) */
	struct api_submission *sub; /* a job submission parked for its batch (submit.c) */
	const char *what_if_id; /* a what-if request waiting for its answer (what_if.c) */
	bool audited; /* its audit row is written already (by the submission batch) */
};

/*
 * Every problem the API answers with (docs/api.md "Errors"): its stable
 * code (the problem+json "code" and the tail of its "type"), HTTP status
 * and title. The one table: code names a problem, never a status.
 */
#define API_PROBLEMS(X) \
	X(BODY_TOO_LARGE, "body_too_large", 413, "Body too large") \
	X(CONFLICT, "conflict", 409, "Conflict") \
	X(CORS_FORBIDDEN, "cors_forbidden", 403, "Cors forbidden") \
	X(EXCEEDS_QUOTA, "exceeds_quota", 422, "Exceeds quota") \
	X(FORBIDDEN, "forbidden", 403, "Forbidden") \
	X(IDEMPOTENCY_CONFLICT, "idempotency_conflict", 409, "Idempotency conflict") \
	X(INTERNAL, "internal", 500, "Internal") \
	X(INVALID_FIELD, "invalid_field", 422, "Invalid field") \
	X(INVALID_HEADER, "invalid_header", 400, "Invalid header") \
	X(INVALID_JSON, "invalid_json", 400, "Invalid json") \
	X(INVALID_PARAMETER, "invalid_parameter", 400, "Invalid parameter") \
	X(JOB_FINISHED, "job_finished", 409, "Job finished") \
	X(JOB_NOT_FOUND, "job_not_found", 404, "Job not found") \
	X(JSON_TOO_DEEP, "json_too_deep", 400, "Json too deep") \
	X(LOG_NOT_FOUND, "log_not_found", 404, "Log not found") \
	X(LOGS_UNAVAILABLE, "logs_unavailable", 503, "Logs unavailable") \
	X(METHOD_NOT_ALLOWED, "method_not_allowed", 405, "Method not allowed") \
	X(MISSING_FIELD, "missing_field", 422, "Missing field") \
	X(NODE_NOT_FOUND, "node_not_found", 404, "Node not found") \
	X(NODE_POOL_NOT_FOUND, "node_pool_not_found", 404, "Node pool not found") \
	X(NOT_FOUND, "not_found", 404, "Not found") \
	X(PENDING_JOBS_LIMIT, "pending_jobs_limit", 429, "Pending jobs limit") \
	X(RANK_NOT_FOUND, "rank_not_found", 404, "Rank not found") \
	X(RATE_LIMITED, "rate_limited", 429, "Rate limited") \
	X(RESERVED_ENV, "reserved_env", 422, "Reserved env") \
	X(SWEEP_NOT_FOUND, "sweep_not_found", 404, "Sweep not found") \
	X(TEAM_EXISTS, "team_exists", 409, "Team exists") \
	X(TEAM_NOT_FOUND, "team_not_found", 404, "Team not found") \
	X(TOKEN_NOT_FOUND, "token_not_found", 404, "Token not found") \
	X(UID_TAKEN, "uid_taken", 409, "Uid taken") \
	X(UNAUTHENTICATED, "unauthenticated", 401, "Unauthenticated") \
	X(UNAVAILABLE, "unavailable", 503, "Unavailable") \
	X(UNKNOWN_FIELD, "unknown_field", 400, "Unknown field") \
	X(UNKNOWN_TEAM, "unknown_team", 422, "Unknown team") \
	X(UNSCHEDULABLE, "unschedulable", 422, "Unschedulable") \
	X(UI_NOT_INSTALLED, "ui_not_installed", 404, "Ui not installed") \
	X(UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", 415, "Unsupported media type") \
	X(WEBHOOK_INACTIVE, "webhook_inactive", 409, "Webhook inactive") \
	X(WEBHOOK_LIMIT, "webhook_limit", 409, "Webhook limit") \
	X(WEBHOOK_NOT_FOUND, "webhook_not_found", 404, "Webhook not found")

enum api_pcode {
#define API_PCODE_ENUM(name, code, status, title) API_P_##name,
	API_PROBLEMS(API_PCODE_ENUM)
#undef API_PCODE_ENUM
	API_P_COUNT
};

/* A problem to report: status and stable code (from the table), offending field, detail. */
struct api_problem {
	unsigned status;
	const char *code;
	char field[320];
	char detail[768];
};

/* Fill p with problem pc (pure); returns TY_EINVAL. */
int api_problem_set(struct api_problem *p, enum api_pcode pc, const char *field,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The title of the problem whose code is code (static), or NULL for none in the table. */
const char *api_problem_title(const char *code);

/* Replies. They copy what they are given; all return 0 (or TY_ENOMEM). */
int api_reply_json(struct api_req *r, unsigned status, json_t *body); /* steals body */
int api_reply_text(struct api_req *r, unsigned status, const char *json_text);
int api_reply_problem(struct api_req *r, const struct api_problem *p);
int api_reply_error(struct api_req *r, enum api_pcode pc, const char *field, const char *fmt,
		    ...) __attribute__((format(printf, 4, 5)));
/* Up to 8 a reply; a Cache-Control given here replaces the default no-store. */
int api_reply_header(struct api_req *r, const char *name, const char *value);
/* Reply with body (malloc'd, len bytes, may be NULL), taking it; ctype static or NULL. */
void api__reply_take(struct api_req *r, unsigned status, char *body, size_t len,
		     const char *ctype);
/* 200 {"items": <items_json>, "next_cursor": <cursor or null>} (cursor may be NULL). */
int api_reply_page(struct api_req *r, const char *items_json, const char *cursor,
		   struct ty_err *err);
/*
 * Map a ty code (and message) to a problem reply: the one translation
 * point from errors to problems (whose status comes from API_PROBLEMS).
 */
int api_reply_from_err(struct api_req *r, int code, const struct ty_err *err);
/*
 * A handler's refusal as an error: err gets problem pc's code (below TY's
 * codes: API_ERR_PROBLEM) and the detail, r the field (may be NULL); it
 * returns that code for the handler to return, and api_reply_from_err
 * answers it with problem pc. It overwrites what err held: the refusal is
 * the answer.
 */
#define API_ERR_PROBLEM(pc) (-1000 - (int)(pc))
int api_fail(struct api_req *r, struct ty_err *err, enum api_pcode pc, const char *field,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* api_fail with the problem a pure check filled (api_validate_team and the like). */
int api_fail_problem(struct api_req *r, struct ty_err *err, const struct api_problem *p);

/*
 * Integer query parameter name in min..max into *out (def when absent).
 * 0, or the 400 invalid_parameter refusal naming it (api_fail) when it is
 * malformed or out of range.
 */
int api_int_param(struct api_req *r, struct ty_err *err, long long *out, const char *name,
		  long long def, long long min, long long max);
/* The team id non-admins are limited to (arena text), or NULL for an admin. */
const char *api_scope(struct api_req *r);
/* Query parameter (borrowed from MHD) or NULL. */
const char *api_query(struct api_req *r, const char *name);
const char *api_header(struct api_req *r, const char *name);

/* Webhook delivery (deliver.c); concurrency 0 runs no deliverer here. */
struct api_webhook_options {
	int timeout_ms; /* per POST, connecting included */
	int max_attempts; /* then the delivery is 'failed' */
	int backoff_ms; /* delay before the second attempt */
	int backoff_max_ms; /* cap of the doubling delay */
	int concurrency; /* POSTs in flight per process */
};

/* Server configuration (values borrowed from the config). */
struct api_options {
	const char *listen_addr;
	int port;
	const char *port_file;
	const char *database_url;
	int threads;
	size_t max_body_bytes;
	int max_json_depth;
	int connection_timeout;
	int max_connections;
	int max_connections_per_ip; /* 0: no limit */
	int body_timeout;	    /* seconds from the end of the headers; 0: none */
	const char *cors_origins;
	struct api_webhook_options webhook;
	/* HTTPS when both are set: PEM text (borrowed; see api_tls_load) */
	const char *tls_cert_pem, *tls_key_pem;
	/* per-token token bucket (ratelimit.c); rps 0 turns it off */
	int rate_limit_rps, rate_limit_burst;
	int audit_retention_days; /* 0: keep every audit record */
	/* signs the log credentials of relayed rank-log requests (--log-key; borrowed) */
	const struct ty_ed25519_key *log_key;
	const char *ui_dir; /* --ui-dir: the dashboard's files (ui.c), or NULL */
};

/* TLS material (tls.c): PEM text read from the --tls-cert and --tls-key files. */
struct api_tls {
	char *cert, *key; /* owned; NULL without TLS */
};
/*
 * Read and check cert_path and key_path into *out: neither set is plain
 * HTTP (0, both NULL); one without the other, an unreadable file, a file
 * without a PEM certificate or unencrypted key, a key that is not the
 * certificate's, or a libmicrohttpd without TLS are TY_ECONFIG naming the
 * option and file. Free with api_tls_free (which also wipes the key).
 */
int api_tls_load(struct api_tls *out, const char *cert_path, const char *key_path,
		 struct ty_err *err);
/* The checks of api_tls_load on PEM text already read (pure; paths only name them). */
int api_tls_check(const char *cert_pem, const char *key_pem, const char *cert_path,
		  const char *key_path, struct ty_err *err);
void api_tls_free(struct api_tls *t);

/* A token bucket (pure): tokens now, refilled since last (seconds, monotonic). */
struct api_bucket {
	double tokens;
	double last;
};
/*
 * Refill b to time now at rps tokens a second, up to burst, and take one:
 * true when taken; otherwise false with *retry_after the whole seconds
 * (at least 1) until one token is there. *retry_after is 0 when taken.
 */
bool api_bucket_take(struct api_bucket *b, double now, double rps, double burst,
		     int *retry_after);
/* Buckets per token id, thread-safe (ratelimit.c). NULL when rps <= 0 (off) or no memory. */
struct api_ratelimit;
struct api_ratelimit *api_ratelimit_new(int rps, int burst);
void api_ratelimit_free(struct api_ratelimit *rl);
/* Take one token from key's bucket (full at first use): 0, or seconds to wait. */
int api_ratelimit_take(struct api_ratelimit *rl, int64_t key, double now);
/*
 * 0, or when the authenticated request r is over its token's limit in rl
 * (may be NULL: off) the error of a 429 rate_limited problem, with its
 * Retry-After header queued.
 */
int api__ratelimit_check(struct api_req *r, struct api_ratelimit *rl, struct ty_err *err);

int api_server_start(struct api_server **out, const struct api_options *o, struct ty_err *err);
/* Stops accepting, ends parked watches, waits for handlers, frees. */
void api_server_stop(struct api_server *s);
int api_server_port(const struct api_server *s);
/* The private key that signs log credentials (borrowed). */
const struct ty_ed25519_key *api__log_key(const struct api_server *s);

/* The --ui-dir directory resolved (realpath) at start, or NULL: no dashboard. */
const char *api__ui_dir(const struct api_server *s);
/* The dashboard's files (ui.c): GET / (a redirect to /ui/) and GET/HEAD /ui/{*}. */
int api_h_ui_root(struct api_req *r, struct ty_err *err);
int api_h_ui(struct api_req *r, struct ty_err *err);
/* The Content-Type of a dashboard file by its extension (pure; static text). */
const char *api_ui_content_type(const char *path);
/*
 * Whether rel (the decoded path after /ui/) may name a dashboard file
 * (pure): segments that are not empty, do not start with '.' (no "..",
 * no hidden file) and hold no '\' or '%'.
 */
bool api_ui_path_ok(const char *rel);

/* Connection pool. */
int api__pool_get(struct ty_pg **out, struct api_server *s, struct ty_err *err);
void api__pool_put(struct api_server *s, struct ty_pg *pg);

/* Authentication: fills r->auth from the Authorization header. */
int api__authenticate(struct api_req *r, struct ty_err *err);
/*
 * The token cache (auth.c): api_tokens rows by hash, so a request spends no
 * query on its token. Served only while live: the watcher (watch.c) LISTENs
 * on trainyard_tokens (migrations/0027_token_notify.sql) and drops a
 * revoked token's entry; while its connection is down the cache is empty
 * and not filled. Thread-safe.
 */
struct api_tokens;
struct api_tokens *api__tokens_new(void); /* NULL: no memory */
void api__tokens_free(struct api_tokens *t);
/* Drop token id's entry; id 0 drops every entry. */
void api__tokens_forget(struct api_tokens *t, int64_t id);
/* Listening (true: emptied and served from now) or not (emptied, not served). */
void api__tokens_live(struct api_tokens *t, bool live);
struct api_tokens *api__tokens(struct api_server *s);

/* Watch: park a long-poll until an event for job_id (0: any job) or the deadline. */
int api__watch_start(struct api_server *s, const char *database_url, struct ty_err *err);
void api__watch_stop(struct api_server *s);
/* True when parked (the caller returns and is called again on wake). */
bool api__watch_park(struct api_req *r);
void api__watch_arm(struct api_req *r, int64_t job_id, int64_t deadline_ms);
void api__watch_disarm(struct api_req *r);

/*
 * A position in the event feed (GET /v1/events): after the event (xid, job,
 * seq) in commit order, as the opaque text "<xid>.<job>.<seq>".
 */
struct api_feed_cursor {
	uint64_t xid;
	int64_t job;
	int seq;
};
/* Parse a cursor this server gave out (pure): plain decimal, no sign or leading zero. */
bool api_feed_cursor_parse(struct api_feed_cursor *out, const char *s);
/* Its text, into out (at least API_FEED_CURSOR_LEN bytes). */
#define API_FEED_CURSOR_LEN 64
void api_feed_cursor_format(char *out, const struct api_feed_cursor *c);
int api_h_events(struct api_req *r, struct ty_err *err);

/* Handlers. */
int api_h_healthz(struct api_req *r, struct ty_err *err);
int api_h_readyz(struct api_req *r, struct ty_err *err);
int api_h_openapi(struct api_req *r, struct ty_err *err);
int api_h_teams_create(struct api_req *r, struct ty_err *err);
int api_h_teams_list(struct api_req *r, struct ty_err *err);
int api_h_teams_get(struct api_req *r, struct ty_err *err);
int api_h_teams_patch(struct api_req *r, struct ty_err *err);
int api_h_teams_history(struct api_req *r, struct ty_err *err);
int api_h_tokens_create(struct api_req *r, struct ty_err *err);
int api_h_tokens_list(struct api_req *r, struct ty_err *err);
int api_h_tokens_delete(struct api_req *r, struct ty_err *err);
/* GET /v1/whoami: the calling token's name, role and team. */
int api_h_whoami(struct api_req *r, struct ty_err *err);
int api_h_jobs_submit(struct api_req *r, struct ty_err *err);
int api_h_jobs_list(struct api_req *r, struct ty_err *err);
int api_h_jobs_get(struct api_req *r, struct ty_err *err);
int api_h_jobs_cancel(struct api_req *r, struct ty_err *err);
int api_h_jobs_stop(struct api_req *r, struct ty_err *err);
int api_h_jobs_events(struct api_req *r, struct ty_err *err);
int api_h_jobs_attempts(struct api_req *r, struct ty_err *err);
int api_h_jobs_checkpoints(struct api_req *r, struct ty_err *err);
int api_h_jobs_logs(struct api_req *r, struct ty_err *err);
int api_h_queue_list(struct api_req *r, struct ty_err *err);
int api_h_queue_what_if(struct api_req *r, struct ty_err *err);
int api_h_nodes_list(struct api_req *r, struct ty_err *err);
int api_h_nodes_get(struct api_req *r, struct ty_err *err);
int api_h_nodes_drain(struct api_req *r, struct ty_err *err);
int api_h_nodes_undrain(struct api_req *r, struct ty_err *err);
int api_h_node_pools_put(struct api_req *r, struct ty_err *err);
int api_h_node_pools_list(struct api_req *r, struct ty_err *err);
int api_h_node_pools_delete(struct api_req *r, struct ty_err *err);
int api_h_usage(struct api_req *r, struct ty_err *err);

/* Whether k is a valid Idempotency-Key: 1-255 printable ASCII characters. */
bool api_idempotency_key_ok(const char *k);
/*
 * The team a job (or each sweep trial) of gpus GPUs is submitted to: the
 * token may submit there (else 403 forbidden), the team exists (else 422
 * unknown_team) and can ever hold gpus (else 422 exceeds_quota at field,
 * "<what> needs N GPUs ..."). *team_id: its id (arena). Returns 0, a ty
 * code, or the refusal's (api_fail).
 */
int api_submit_team(const char **team_id, struct api_req *r, const char *team, long long gpus,
		    const char *field, const char *what, struct ty_err *err);
/*
 * feasible.c: unless the validated spec sets queue_if_unschedulable, 422
 * unschedulable at field when the job could never run: more GPUs than team
 * (id team_id) can ever get, or a shape no node that is not lost nor
 * declared node pool can hold (quota.h). With neither nothing is refused.
 * Returns 0, a ty code, or the refusal's (api_fail).
 */
int api_submit_feasible(struct api_req *r, const char *team_id, const char *team,
			const json_t *spec, const char *field, struct ty_err *err);
/* Bounds of a team's max_cpus and max_memory_mb (migrations/0018_cpu_memory.sql). */
#define API_MAX_CPUS 100000000LL
#define API_MAX_MEMORY_MB 1000000000000LL
/* Bounds of a team's run_uid: no system account, no negative id (migrations/0020_team_uid.sql). */
#define API_MIN_RUN_UID 1000
#define API_MAX_RUN_UID 2147483646
/*
 * Bounds of a team's idle_gpu_alert_seconds (migrations/0023): below a
 * minute a data-loader pause or a checkpoint write would be reported; past
 * a week nobody is waiting for the event.
 */
#define API_MIN_IDLE_ALERT_S 60
#define API_MAX_IDLE_ALERT_S 604800

/* What a job (or each trial) holds while it runs: nodes × its per-node asks. */
struct api_ask {
	long long gpus, cpus, memory_mb;
};
/* The ask of a validated spec's resources object (borrowed; defaults applied). */
struct api_ask api_ask_of(const json_t *resources);
/*
 * The same, and *limited: whether the team has a max_pending_jobs (jobs and
 * sweeps then check it with api_pending_admit before they insert). The
 * team must be able to ever hold the whole ask: GPUs as above, CPUs and
 * memory within its max_cpus / max_memory_mb (else 422 exceeds_quota).
 * spec (a validated spec, may be NULL) gets the team's checkpoint defaults
 * (checkpoint_keep, _keep_every, _tier) for each field the submitted spec
 * given (borrowed) does not name.
 */
int api_submit_team_limited(const char **team_id, bool *limited, struct api_req *r,
			    const char *team, const struct api_ask *ask, json_t *spec,
			    const json_t *given, const char *field, const char *what,
			    struct ty_err *err);
/*
 * Inside the caller's transaction: lock team_id's row (FOR UPDATE, held to
 * the commit, so concurrent submissions to the team queue here) and read
 * its max_pending_jobs into *max_pending (-1: none). The count must come
 * after, in a statement of its own: one in the locking statement would
 * read the snapshot from before the wait and miss the jobs of the
 * submission that held the lock.
 */
int api_team_lock(long long *max_pending, struct api_req *r, const char *team_id,
		  struct ty_err *err);
/*
 * After api_team_lock: whether n more pending jobs fit under max_pending
 * (< 0: no limit). 0 when they fit, else a 429 pending_jobs_limit refusal
 * naming team (api_fail).
 */
int api_pending_admit(struct api_req *r, const char *team_id, const char *team,
		      long long max_pending, long long n, struct ty_err *err);
/*
 * Answer a repeated Idempotency-Key from the stored request_sha256 and the
 * created object's JSON: the same body hash replays it (200,
 * Idempotent-Replayed), another is a 409 idempotency_conflict refusal.
 */
int api_replay_doc(struct api_req *r, const char *stored_hash, const char *doc, const char *key,
		   const char *hash, struct ty_err *err);

/*
 * The job store (store_jobs.c): the API's job SQL as typed calls; no
 * PGresult outside it. Documents and texts it returns are copies in the
 * arena a.
 *
 * A job row's columns as text (NULL for SQL NULL; times as epoch
 * microseconds), borrowed. pending_reason is the scheduler's, already
 * redacted for the viewer; queue fields are ignored unless state is pending.
 */
struct api_job_row {
	const char *id, *team, *name, *state, *spec, *attempt, *failure_class, *pending_reason,
		*queue_position, *reserved_until_us, *preemptions, *spot_preemptions,
		*created_at_us, *updated_at_us, *finished_at_us;
	bool cancel_requested;
};
/*
 * Append the job document (docs/api.md, "Jobs") of j to b: the bytes that
 * PostgreSQL's json_build_object gave before (migrations/0017). Pure;
 * 0 or TY_ENOMEM (b->oom).
 */
int api_job_doc(struct ty_buf *b, const struct api_job_row *j);
/*
 * *doc: job id as a viewer of team scope (NULL: an admin) sees it, with its
 * "goodput" (only here: it reads the ledger), or NULL when none.
 */
int api_store_job_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *id,
		      const char *scope, struct ty_err *err);
/* The job of team_id with Idempotency-Key key: its request hash and document, or both NULL. */
int api_store_job_by_key(const char **hash, const char **doc, struct ty_pg *pg,
			 struct ty_arena *a, const char *team_id, const char *key,
			 const char *scope, struct ty_err *err);
/* GET /v1/jobs: NULL members are no condition; all texts are SQL parameters. */
struct api_jobs_filter {
	const char *scope, *team, *states /* text[] */, *labels /* jsonb */, *before /* id */;
	int limit; /* 1..500 */
	/* q: an ILIKE pattern on the name (api_like_contains), or an id; both NULL: no q */
	const char *name_like, *id;
};
/* The longest q of GET /v1/jobs, in characters. */
#define API_JOBS_Q_MAX 128
/*
 * The ILIKE pattern (ESCAPE '\') that matches any text containing s
 * literally: '%', '_' and '\' escaped, '%' at both ends (arena text, or
 * NULL on ENOMEM). Pure.
 */
const char *api_like_contains(struct ty_arena *a, const char *s);
/* *items: a JSON array of up to f->limit documents, newest first; *cursor: NULL on the last page. */
int api_store_jobs_page(const char **items, const char **cursor, struct ty_pg *pg,
			struct ty_arena *a, const struct api_jobs_filter *f, struct ty_err *err);
/* Lock job id (FOR UPDATE) as scope sees it: its state (NULL: no such job) and cancel flag. */
int api_store_job_lock(const char **state, bool *cancel_requested, struct ty_pg *pg,
		       struct ty_arena *a, const char *id, const char *scope, struct ty_err *err);
/*
 * In the caller's transaction, after api_store_job_lock: end a pending job
 * (cancelled, or stopped), or ask the scheduler to end an active one; the
 * job event carries message.
 */
int api_store_job_end(struct ty_pg *pg, const char *id, bool pending, bool stop,
		      const char *message, struct ty_err *err);
/*
 * Insert the submissions of rows (a JSON array of jobs columns, each with
 * its index into x as "ord" and its request's audit facts as "audit"), one
 * job_events row each, and the audit_requests row (201) of each one that
 * has "audit": each one named is CREATED with its document (in its arena)
 * or REPLAY (its key has a job).
 */
int api_store_jobs_insert(struct api_submission **x, struct ty_pg *pg, const char *rows,
			  struct ty_err *err);

/*
 * Group commit of job submissions (submit.c): one thread with its own
 * connection takes every submission queued while its previous batch
 * committed and writes them with one multi-row INSERT and one COMMIT; a
 * client is answered only after that commit.
 */
enum api_sub_result {
	API_SUB_QUEUED,
	API_SUB_CREATED, /* doc: the job document */
	API_SUB_REPLAY,	 /* the key exists (an earlier or same-batch request): replay it */
	API_SUB_REFUSED, /* doc: the 429 pending_jobs_limit detail */
	API_SUB_FAILED,	 /* rc and err */
};
struct api_submission {
	struct api_submission *next;
	struct MHD_Connection *conn;
	struct ty_arena *arena; /* the request's: doc is written there */
	/* the jobs row and its job_events message (owned; freed by the submitter) */
	json_t *row;
	const char *team_id, *team, *key, *hash; /* arena */
	bool limited;			   /* the team has a max_pending_jobs */
	enum api_sub_result result;
	const char *doc;
	int rc;
	struct ty_err err;
};
int api__submit_start(struct api_server *s, const char *database_url, struct ty_err *err);
/* Writes and answers what is still queued, then joins the thread. */
void api__submit_stop(struct api_server *s);
/*
 * Queue x for the next batch and suspend r's connection (r->parked): the
 * handler is called again once x->result is set. False (x failed with
 * TY_EUNAVAIL) when the submitter is stopping.
 */
bool api__submit_park(struct api_req *r, struct api_submission *x);
/*
 * Write the submissions x[0..n) (n at most 512) on pg, the submitter's own
 * connection: the batch path itself, with no thread or connection of the
 * server, which tests drive directly. Each ends CREATED, REPLAY, REFUSED or
 * FAILED. Returns 0, or the code that failed every one of them.
 */
int api__submit_batch(struct ty_pg *pg, struct api_submission **x, int n);

/* Trial metrics (job_metrics.c). */
#define API_METRIC_NAME_MAX 128
#define API_METRICS_PER_REPORT 100
/* Whether s is a metric name: 1-128 of [A-Za-z0-9_.:/-], not starting with a digit or . : / -. */
bool api_metric_name_ok(const char *s);
/*
 * Check a POST /v1/jobs/{id}/metrics body (pure): {"step": 0..2^53-1,
 * "metrics": {name: finite number, ...}} with 1-100 names and no other
 * field. 0, or -1 with p filled (400 unknown_field, 422 missing_field or
 * invalid_field naming the field).
 */
int api_metrics_report_check(const json_t *body, struct api_problem *p);
int api_h_job_metrics_post(struct api_req *r, struct ty_err *err);
int api_h_job_metrics_get(struct api_req *r, struct ty_err *err);
/* GET /metrics (metrics.c): the Prometheus text exposition. */
int api_h_metrics(struct api_req *r, struct ty_err *err);
/* Monotonic seconds, for request latency. */
double api__metrics_now(void);
/* Count an answered request (route pattern, method, status) and its latency. */
void api__metrics_request(const struct api_req *r);
/* POST /v1/nodes/{id}/preempt: deadline_seconds default and maximum. */
#define API_PREEMPT_DEADLINE 30
#define API_PREEMPT_DEADLINE_MAX 3600
int api_h_nodes_preempt(struct api_req *r, struct ty_err *err);

/* Webhooks (webhooks.c, deliver.c; docs/webhooks.md). */
int api_h_webhooks_create(struct api_req *r, struct ty_err *err);
int api_h_webhooks_list(struct api_req *r, struct ty_err *err);
int api_h_webhooks_get(struct api_req *r, struct ty_err *err);
int api_h_webhooks_delete(struct api_req *r, struct ty_err *err);
int api_h_webhooks_deliveries(struct api_req *r, struct ty_err *err);
int api_h_webhooks_ping(struct api_req *r, struct ty_err *err);
#define API_WEBHOOK_URL_MAX 2048
#define API_WEBHOOK_SECRET_MIN 16
#define API_WEBHOOK_SECRET_MAX 256
#define API_WEBHOOK_EVENTS_MAX 32
#define API_WEBHOOKS_PER_TEAM 25
/* Whether name is an event a webhook may subscribe to: "job.<state>" or "*". */
bool api_webhook_event_ok(const char *name);
/*
 * POST /v1/webhooks body (pure): {team, url, events, secret}; 0 or a
 * problem (400 unknown_field, 422 missing_field / invalid_field with field
 * "events[i]" naming a bad event).
 */
int api_validate_webhook(const json_t *body, struct api_problem *p);
/*
 * Delay in ms before attempt `attempts` + 1 when `attempts` have failed:
 * base * 2^(attempts-1) capped at cap, then "equal jitter": a value in
 * [d/2, d] picked by rnd. Pure.
 */
int64_t api_webhook_backoff_ms(int base, int cap, int attempts, uint32_t rnd);
/*
 * The Trainyard-Signature header value "t=<t>,v1=<hex HMAC-SHA256(secret,
 * "<t>.<body>")>" into out (at least API_WEBHOOK_SIG_LEN bytes). Returns 0
 * or TY_ENOMEM.
 */
#define API_WEBHOOK_SIG_LEN 96
int api_webhook_signature(char *out, size_t outsz, const char *secret, long long t,
			  const char *body, size_t len);
/* The deliverer thread: started and stopped with the server. */
int api__deliver_start(struct api_server *s, const char *database_url,
		       const struct api_webhook_options *o, struct ty_err *err);
void api__deliver_stop(struct api_server *s);

/* Audit log (audit.c; docs/security.md "Audit log"). */
/* Whether method is audited: POST, PUT, PATCH or DELETE. */
bool api_audit_method(const char *method);
/* A new request id, unique across processes, into out. Thread-safe. */
void api_request_id(char out[API_REQUEST_ID_LEN]);
/*
 * Copy in to out (outsz bytes, NUL included) keeping valid UTF-8 and
 * writing every other byte and every control character as "\xHH", cut
 * (never inside a character or an escape) to fit. Returns the length. Pure.
 */
size_t api_audit_text(char *out, size_t outsz, const char *in);
/* The id of a reply body that starts {"id": N (what a 201 created), or 0. Pure. */
int64_t api_audit_created_id(const char *body, size_t len);
/*
 * Write r's audit_requests row when its method is audited (one INSERT on r->pg,
 * or a pooled connection when it holds none), then return r->pg to the
 * pool. A failed write is logged, never turned into the reply.
 */
void api__audit_request(struct api_req *r);
/*
 * r's audit_requests columns that do not depend on the reply (all but
 * created_id, status and problem_code) as a new JSON object of texts, or
 * NULL: for the submission batch, which writes a created job's row itself.
 */
json_t *api__audit_facts(struct api_req *r);
int api_h_audit_list(struct api_req *r, struct ty_err *err);
/*
 * The retention pruner: a thread with its own connection that deletes
 * audit_requests rows older than days at start and then hourly, in batches.
 * days <= 0 starts nothing (*out NULL). Stop is NULL-safe and joins it.
 */
struct api_audit_pruner;
int api__audit_prune_start(struct api_audit_pruner **out, const char *database_url, int days,
			   struct ty_err *err);
void api__audit_prune_stop(struct api_audit_pruner *p);
/*
 * The `state` query parameter of a job list ("running,pending") as a
 * PostgreSQL text array ("{running,pending}", arena text), or NULL when a
 * name is not a job state (or on ENOMEM). Pure.
 */
const char *api_job_states_param(struct ty_arena *a, const char *list);

/* Job spec validation (pure): a normalised spec with defaults, or a problem. */
json_t *api_validate_job(const json_t *body, struct api_problem *p);
/* Team bodies; `create` requires name and nominal_gpus, a patch forbids name. */
int api_validate_team(const json_t *body, bool create, struct api_problem *p);

/*
 * Whether some string in v (a parsed body) holds a NUL character (\u0000),
 * which neither C strings nor PostgreSQL text can carry: true, with the
 * first one's dotted path ("command[1]", "env.A") in path.
 */
bool api_json_has_nul(char *path, size_t pathsz, const json_t *v);
/*
 * Whether the n bytes at s are well-formed UTF-8 (no overlong forms,
 * surrogates or code points above U+10FFFF), and, when no_controls, free
 * of C0 controls and DEL.
 */
bool api_text_ok(const char *s, size_t n, bool no_controls);

/* Whether s is a valid team (or cohort) name: 1-63 of [a-z0-9-], no '-' at either end. */
bool api_team_name_ok(const char *s);
/*
 * A PUT /v1/node-pools/{name} body: labels (as a job's), gpus_per_node
 * 0-64 and max_nodes 1-10,000 required, cpus_per_node 1-4096 and
 * memory_mb_per_node 1-16,777,216 optional (null: not limited). 0 or -1
 * with p filled.
 */
int api_validate_node_pool(const json_t *body, struct api_problem *p);
/* Parse a decimal id ("42"); false if not a positive int64. */
bool api_parse_id(int64_t *out, const char *s);
/* Write the issuing of a new token (secret into out) for bootstrap and API. */
/* created_at (optional) receives the RFC 3339 creation time (32 bytes). */
int api_token_insert(int64_t *id, char *created_at, char *secret, size_t secretsz,
		     struct ty_pg *pg, const char *name, const char *role, const char *team_id,
		     struct ty_err *err);

/*
 * The token store (store_tokens.c): typed calls, no PGresult outside it.
 * Lookups fill a (texts in arena) and set *found; no row is not an error.
 */
/* How long a trial metrics token outlives its attempt (a last report may race the exit). */
#define API_TRIAL_TOKEN_GRACE "5 minutes"
/* The unrevoked API token whose SHA-256 (hex) is hash. */
int api_store_token_by_hash(bool *found, struct api_auth *a, struct ty_pg *pg,
			    struct ty_arena *arena, const char *hash, struct ty_err *err);
/* The attempt whose trial metrics token hashes to hash, while it runs or within the grace. */
int api_store_trial_token_by_hash(bool *found, struct api_auth *a, struct ty_pg *pg,
				  struct ty_arena *arena, const char *hash, struct ty_err *err);
/* Store a token by its hash; created_at as in api_token_insert. */
int api_store_token_insert(int64_t *id, char *created_at, struct ty_pg *pg, const char *hash,
			   const char *name, const char *role, const char *team_id,
			   struct ty_err *err);

#endif
