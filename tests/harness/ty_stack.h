/*
 * Integration-test helpers: private databases on the server named by
 * TY_TEST_PG_URL, the API server ($TY_API_BIN) as a child process, an HTTP
 * client over libcurl, and small helpers for API tests (problem documents,
 * JSON paths, golden files, teams/tokens/jobs).
 *
 * Every function that sets something up ends the current case (REQUIRE
 * style) when it cannot, saying why. Without TY_TEST_PG_URL or TY_API_BIN
 * the tests fail and say to run them with tests/run: they never skip.
 *
 * Strings returned as const char * are owned by the harness and live until
 * the program exits, unless said otherwise.
 */
#ifndef TY_STACK_H
#define TY_STACK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* ---- databases ---- */

/*
 * Creates a new, uniquely named, empty database on TY_TEST_PG_URL's server
 * and returns its URL. It is dropped at exit unless TY_TEST_KEEP is set.
 */
const char *ty_test_db_new(void);

/*
 * Runs one statement on the TY_TEST_PG_URL (superuser) connection and
 * returns the first column of its first row as a new scratch string (until
 * the end of the case), "" for no rows. Fails the case on an error.
 */
const char *ty_test_sql(const char *sql);

/*
 * Restart the TY_TEST_PG_URL server (pg_ctl restart -m MODE, "fast" or
 * "immediate") from TY_TEST_PG_DATA with TY_TEST_PG_CTL; only for test
 * programs that run alone (ctest RUN_SERIAL). Ends the case on failure.
 */
void ty_test_pg_restart(const char *mode);
/* The same in two steps, for a longer outage: pg_ctl stop -m MODE, pg_ctl start. */
void ty_test_pg_stop(const char *mode);
void ty_test_pg_start(void);

/* ---- the API server ---- */

struct ty_api; /* opaque: one trainyard-api process (or none, when stopped) */

/*
 * Runs `$TY_API_BIN --database-url URL --migrate`, then starts
 * `$TY_API_BIN --database-url URL --listen-addr 127.0.0.1 --port 0
 * --port-file F --log-key ty_test_log_key() [extra_args...]`, waits for F
 * and for GET /healthz = 200.
 * extra_args is NULL-terminated and may be NULL (copied). The new server
 * becomes the current one (the target of ty_http). Stopped at exit.
 */
struct ty_api *ty_test_api_start(const char *db_url, const char *const *extra_args);
/* The same without --migrate: the server on the database's schema as it is. */
struct ty_api *ty_test_api_start_as_is(const char *db_url, const char *const *extra_args);
/*
 * The same over HTTPS: extra_args must hold the server's --tls-cert and
 * --tls-key; ty_http then talks https://127.0.0.1:PORT and verifies the
 * server against ca_file (copied) as its only CA.
 */
struct ty_api *ty_test_api_start_tls(const char *db_url, const char *const *extra_args,
				     const char *ca_file);
/* SIGTERM, wait up to 5 s, then SIGKILL. The handle stays for a restart. */
void ty_test_api_stop(struct ty_api *api);
/* SIGKILL and reap: a crash. The handle stays for a restart. */
void ty_test_api_kill(struct ty_api *api);
/* Start again on the same database with the same arguments (new port). */
void ty_test_api_restart(struct ty_api *api);
/* "http://127.0.0.1:PORT" of the running server (borrowed). */
const char *ty_test_api_url(const struct ty_api *api);
/* Path of the server's log file (its stdout and stderr, kept across restarts). */
const char *ty_test_api_log(const struct ty_api *api);
/* Make api the target of ty_http. */
void ty_test_api_use(struct ty_api *api);

/* A new admin token through `$TY_API_BIN --database-url URL --bootstrap-token NAME`. */
const char *ty_test_admin_token(const char *db_url, const char *name);

/*
 * The shared stack of one test program: a database, a server on it and an
 * admin token, set up at first use and kept for every case.
 */
struct ty_stack {
	const char *db_url;
	struct ty_api *api;
	const char *admin; /* admin token */
};
const struct ty_stack *ty_stack_get(void);

/*
 * One statement with text parameters (a NULL-terminated list) on the shared
 * stack's database; returns the first column of the first row (scratch),
 * "" for none. Ends the case on an error. TY_STACK_SQL adds the NULL.
 */
const char *ty_stack_sql(const char *sql, ...);
#define TY_STACK_SQL(...) ty_stack_sql(__VA_ARGS__, (const char *)NULL)

/* ---- other daemons (scheduler, executors, a private broker) ---- */

struct ty_daemon; /* opaque: one long-running child process */

/*
 * Start argv (argv[0] a path; NULL-terminated; copied) with stdout and
 * stderr appended to "<workdir>/<name>.log". It runs until stopped; at exit
 * it is stopped, and its log is printed for any case that fails while it
 * runs. A sanitizer report in its log fails the case that stops it.
 */
struct ty_daemon *ty_test_daemon_start(const char *name, const char *const *argv);
/* SIGTERM, then SIGKILL after grace_ms; returns the wait status (-1 if not running). */
int ty_test_daemon_stop(struct ty_daemon *d, int grace_ms);
/* SIGKILL and reap: a crash, as far as everyone else can tell. */
void ty_test_daemon_kill(struct ty_daemon *d);
/* Start it again with the same arguments (after stop or kill). */
void ty_test_daemon_restart(struct ty_daemon *d);
void ty_test_daemon_signal(struct ty_daemon *d, int sig);
bool ty_test_daemon_running(struct ty_daemon *d);
int ty_test_daemon_pid(const struct ty_daemon *d);
const char *ty_test_daemon_log(const struct ty_daemon *d);
/* Wait until the log written since the last start contains needle. */
bool ty_test_daemon_wait_log(struct ty_daemon *d, const char *needle, int timeout_ms);
/* The test program's scratch directory (removed at exit unless kept). */
const char *ty_test_workdir(void);

/*
 * The test program's log credential key pair (docs/security.md, "Rank
 * logs"), generated into the scratch directory at first use (the private
 * key 0600): the path of the private key that every API the harness starts
 * gets as --log-key, and of its public half, for executors' --log-pubkey.
 */
const char *ty_test_log_key(void);
const char *ty_test_log_pubkey(void);

/*
 * Keys every scheduler and executor needs (docs/security.md, "Control plane
 * and nodes"): the dispatch key pair and the node secret of the run, from
 * TY_TEST_DISPATCH_KEY, TY_TEST_DISPATCH_PUBKEY and TY_TEST_NODE_SECRET
 * (tests/run makes them once per run), else made once per program in the
 * workdir. Paths; they live until exit.
 */
const char *ty_test_dispatch_key(void);
const char *ty_test_dispatch_pubkey(void);
const char *ty_test_node_secret(void);
/* The loaded private dispatch key, to sign what a test produces as the scheduler. */
const struct ty_ed25519_key *ty_test_dispatch_signer(void);
/* node's key derived from the node secret, and a file in the workdir holding it (scratch). */
const char *ty_test_node_key(const char *node);
const char *ty_test_node_key_file(const char *node);

/* ---- HTTP ---- */

struct ty_header {
	char *name;
	char *value;
};

/* Zero-initialise; ty_http frees what a previous call left in it. */
struct ty_resp {
	int status; /* 0 when the request did not complete */
	char *body; /* NUL-terminated ("" when empty) */
	size_t body_len;
	json_t *json; /* the body parsed, when its Content-Type is JSON and it parses */
	struct ty_header *headers;
	size_t nheaders;
	char error[256]; /* transport error, when status is 0 */
};

/*
 * One request to the current server. token may be NULL (no Authorization
 * header); body may be NULL (none) and is sent with
 * "Content-Type: application/json" unless headers (NULL-terminated
 * "Name: value" strings, may be NULL) set Content-Type ("Content-Type:"
 * with no value sends none). Returns resp->status. Thread-safe.
 */
int ty_http(struct ty_resp *resp, const char *method, const char *path, const char *token,
	    const char *body, const char *const *headers);
/* The same against a given server, with a body of body_len bytes. */
int ty_http_raw(struct ty_resp *resp, struct ty_api *api, const char *method, const char *path,
		const char *token, const char *body, size_t body_len, const char *const *headers);
/* Value of the last header called name (case-insensitive), or NULL. */
const char *ty_resp_header(const struct ty_resp *resp, const char *name);
void ty_resp_free(struct ty_resp *resp);

/* ---- checks on responses ---- */

/*
 * The value at a path such as "spec.resources.nodes" or "items[2].id"
 * (borrowed), or NULL when any step is missing.
 */
json_t *ty_jpath(const json_t *root, const char *path);

/* Field expectations for CHECK_PROBLEM: present with any value; not checked. */
#define TY_ANY_FIELD ((const char *)1)
#define TY_FIELD_UNCHECKED ((const char *)2)

/*
 * resp is a problem document: the given status, Content-Type
 * application/problem+json, a JSON object with string type
 * ("https://trainyard.dev/problems/<code>"), title and detail, integer status
 * equal to the HTTP status, the given code, and field equal to field (NULL:
 * absent; TY_ANY_FIELD: present with any value; TY_FIELD_UNCHECKED: either).
 */
bool ty_check_problem(const struct ty_resp *resp, int status, const char *code, const char *field,
		      const char *file, int line);
#define CHECK_PROBLEM(resp, status, code, field)                                                   \
	((void)ty_check_problem((resp), (status), (code), (field), __FILE__, __LINE__))

/* Status check that prints the body when it differs. */
bool ty_check_status(const struct ty_resp *resp, int status, const char *file, int line);
#define CHECK_STATUS(resp, status) ((void)ty_check_status((resp), (status), __FILE__, __LINE__))
#define REQUIRE_STATUS(resp, status)                                                               \
	do {                                                                                       \
		if (!ty_check_status((resp), (status), __FILE__, __LINE__))                        \
			ty_test_abort();                                                           \
	} while (0)

/* Integer / string / JSON-null at path (the path missing fails). */
bool ty_check_jint(const json_t *root, const char *path, long long want, const char *file,
		   int line);
bool ty_check_jstr(const json_t *root, const char *path, const char *want, const char *file,
		   int line);
bool ty_check_jnull(const json_t *root, const char *path, const char *file, int line);
#define CHECK_JINT(root, path, want)                                                               \
	((void)ty_check_jint((root), (path), (want), __FILE__, __LINE__))
#define CHECK_JSTR(root, path, want)                                                               \
	((void)ty_check_jstr((root), (path), (want), __FILE__, __LINE__))
#define CHECK_JNULL(root, path) ((void)ty_check_jnull((root), (path), __FILE__, __LINE__))
/* A string "YYYY-MM-DDTHH:MM:SS.mmmZ" (RFC 3339 UTC with milliseconds) at path. */
bool ty_check_jtime(const json_t *root, const char *path, const char *file, int line);
#define CHECK_JTIME(root, path) ((void)ty_check_jtime((root), (path), __FILE__, __LINE__))
/* Integer at path, or -1 (and no failure) when absent or not an integer. */
long long ty_jint(const json_t *root, const char *path);
/* String at path (borrowed), or NULL. */
const char *ty_jstr(const json_t *root, const char *path);
/*
 * Whether any integer anywhere in the document equals n: how a test asks
 * whether an id is shown (a search of the body's text would also match a
 * timestamp's digits or a longer id).
 */
bool ty_jhas_int(const json_t *root, long long n);

/*
 * Compare v with tests/integration/golden/NAME.json after masking the values
 * of "id", "created_at", "updated_at", "finished_at", "time" and "token"
 * (non-null ones become "<masked>") in both. TY_GOLDEN_UPDATE=1 rewrites
 * the file instead.
 */
bool ty_check_golden(const json_t *v, const char *name, const char *file, int line);
#define CHECK_GOLDEN(v, name) ((void)ty_check_golden((v), (name), __FILE__, __LINE__))

/*
 * JSON from a template (scratch): ' becomes ", @T becomes team, @A<n> becomes
 * n letters 'a' (for length limits), @K<n> becomes n members
 * "K1":"v",...,"Kn":"v" (for entry limits). Other bytes pass unchanged.
 */
const char *ty_tmpl(const char *tmpl, const char *team);

/* ---- fixtures through the API (with the stack's admin token) ---- */

/* A unique name "PREFIX-N" (scratch, like every string below). */
const char *ty_uniq(const char *prefix);
/* Creates team PREFIX-N with nominal GPUs and a borrowing limit (< 0: none). */
const char *ty_mk_team(const char *prefix, int nominal_gpus, int borrowing_limit_gpus);
/* Creates a token of role for team (NULL for admin); returns the secret. */
const char *ty_mk_token(const char *role, const char *team);
/* Submits a minimal job to team as token; extra is ",'k':v..." JSON (' for ") or NULL. */
long long ty_mk_job(const char *token, const char *team, const char *extra);
/* Number of jobs GET /v1/jobs?QUERY lists for token, paging through all. */
int ty_count_jobs(const char *token, const char *query);

#endif
