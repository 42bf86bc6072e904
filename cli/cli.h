/*
 * jobctl internals: the per-run context, option parsing, the HTTP client over
 * libcurl and output helpers shared by the command files. Prefix cli_.
 */
#ifndef CLI_H
#define CLI_H

#include "ty_buf.h"
#include "ty_err.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Exit codes, part of the user-facing contract (--help, cli/README.md). */
enum cli_exit {
	CLI_EXIT_OK = 0,
	CLI_EXIT_JOB_FAILED = 1,
	CLI_EXIT_USAGE = 2,
	CLI_EXIT_JOB_CANCELLED = 3,
	CLI_EXIT_NOT_FOUND = 4,
	CLI_EXIT_AUTH = 5,
	CLI_EXIT_INVALID = 6,
	CLI_EXIT_SERVER = 7,
};

/* CSV: `usage` only; every other command prints its table. */
enum cli_output { CLI_OUT_TEXT, CLI_OUT_JSON, CLI_OUT_CSV };

/* Default request timeout in seconds (--timeout, JOBCTL_TIMEOUT). */
#define CLI_DEFAULT_TIMEOUT 60
/* How long a watch waits per long-poll, and how long it rides out an outage. */
#define CLI_WATCH_WAIT 30
#define CLI_WATCH_RETRY_MS 30000

struct ty_config;

/* One run of jobctl. Strings named _flag are borrowed from argv. */
struct cli {
	enum cli_output output;
	const char *server_flag;
	const char *token_flag;
	const char *token_file_flag;
	const char *timeout_flag;
	const char *cacert_flag;
	/* set by the option parser when -h/--help was given */
	bool help;
	/* resolved by cli_connect(), on the first request */
	struct ty_config *config;
	char *server; /* owned; no trailing '/' */
	const char *token; /* borrowed from config or token_read; may be NULL */
	char *token_read;  /* owned: the token read from --token-file; wiped when freed */
	const char *cacert; /* CA file for https (borrowed from config); NULL: the system's */
	long timeout_s;
	CURL *curl; /* owned; NULL for an http:// server (plain) */
	bool curl_global; /* curl_global_init done: cli_cleanup ends it */
	bool plain;	  /* http://: spoken over a socket, libcurl never loaded */
	/* the settings (not the command line) were at fault: no usage hint */
	bool settings_failed;
	/* commands that succeed but want a non-zero exit (watch) set this */
	int exit_status;
};

/*
 * Options. A command declares a table; the parser adds the global options
 * (--server, --token, --timeout, -o/--output, -h/--help) itself, so they may
 * be given before or after the command name. Values are borrowed from argv.
 */
enum cli_opt_kind {
	CLI_OPT_FLAG, /* bool *dest */
	CLI_OPT_STR, /* const char **dest, the last one given wins */
	CLI_OPT_LIST, /* struct cli_strv *dest, every one given */
};

struct cli_opt {
	const char *name; /* long name, without "--" */
	char short_name; /* 0 when none */
	enum cli_opt_kind kind;
	void *dest;
};

struct cli_strv {
	const char **v; /* owned array of borrowed strings */
	size_t n, cap;
};

void cli_strv_free(struct cli_strv *s);

/*
 * Parse argv[0..argc) (argv[0] is the first argument, not the program).
 * Positional arguments go to pos (an array the caller frees with
 * cli_strv_free). When rest is not NULL, "--" ends the options and what
 * follows goes to rest; otherwise "--" only ends the options and what follows
 * is positional. Errors: TY_ECONFIG (a usage error).
 */
int cli_parse_opts(struct cli_strv *pos, struct cli_strv *rest, struct cli *cli, int argc,
		   char **argv, const struct cli_opt *opts, size_t nopts, struct ty_err *err);

/*
 * Index of the first argument that is neither an option nor the value of a
 * global option ("--server URL"): where a command or subcommand name is.
 * argc when there is none.
 */
int cli_skip_options(int argc, char **argv);

/* Parse a whole decimal integer in [min, max] given for what ("--nodes"). */
int cli_parse_int(long long *out, const char *s, long long min, long long max, const char *what,
		  struct ty_err *err);
/* A job or token id: a positive integer. */
int cli_parse_id(long long *out, const char *s, const char *what, struct ty_err *err);

/* Resolve server, token and timeout (flag > env > config file > default). */
int cli_connect(struct cli *cli, struct ty_err *err);
void cli_disconnect(struct cli *cli);
/* At exit: ends libcurl when an https:// server loaded it. */
void cli_cleanup(struct cli *cli);

struct cli_resp {
	long status;
	json_t *body; /* owned; NULL when the answer had no body */
	bool replayed; /* Idempotent-Replayed: true */
};

void cli_resp_free(struct cli_resp *r);

/*
 * One request to the API. path starts with "/v1/" and includes any query
 * string (built with cli_buf_query). body may be NULL. idem_key adds an
 * Idempotency-Key header when not NULL. timeout_s 0 means the default.
 * A 2xx answer fills *resp; anything else fails with the problem document's
 * detail and code in err->msg, and a code that cli_exit_code() maps:
 * TY_EAUTH/TY_EPERM (401/403), TY_ENOTFOUND (404), TY_EINVAL, TY_ECONFLICT,
 * TY_ETOOBIG (other 4xx), TY_EUNAVAIL (cannot connect, 502-504, 429),
 * TY_ETIMEDOUT (request timed out), TY_EIO (other 5xx, garbage answers).
 */
int cli_request(struct cli_resp *resp, struct cli *cli, const char *method, const char *path,
		const json_t *body, const char *idem_key, long timeout_s, struct ty_err *err);

/*
 * GET path from a route that answers text/plain (logs): the body goes, as
 * is, into text, which must be empty on entry; the caller owns and frees it
 * (it is empty again on failure). Errors as for cli_request.
 */
int cli_get_text(struct ty_buf *text, struct cli *cli, const char *path, struct ty_err *err);

/*
 * GET base, a list route with cursor pagination ({"items", "next_cursor"}),
 * and, when all, every page after it. *items gets a new array of the items
 * of every page fetched (the caller json_decref()s it); last holds the last
 * page's answer (cli_resp_free). what names the list in errors ("job list").
 */
int cli_get_pages(json_t **items, struct cli_resp *last, struct cli *cli, const char *base,
		  bool all, const char *what, struct ty_err *err);
/*
 * -o json of a paged list: the page as the API sent it or, with all, every
 * item in one {"items": [...], "next_cursor": null}. 0 or TY_ENOMEM.
 */
int cli_print_pages(const struct cli_resp *last, const json_t *items, bool all);

struct cli_table;
/*
 * A paged list command's whole output: fetch base (every page with all),
 * then -o json, or a table of the ncols header cells with one row(t, item)
 * per item, and "(more <noun>: ...)" on stderr when more pages exist.
 */
int cli_list_print(struct cli *cli, const char *base, bool all, const char *what, const char *noun,
		   const char *const *header, size_t ncols,
		   int (*row)(struct cli_table *t, const json_t *item), struct ty_err *err);

/* Whether a failed request may succeed when retried (server restarting). */
bool cli_is_transient(int code);

/* Append "?k=v" or "&k=v" with v percent-encoded. */
int cli_buf_query(struct ty_buf *b, const char *key, const char *val);
/* Append s percent-encoded as one path segment. */
int cli_buf_escape(struct ty_buf *b, const char *s);

/* Map a ty code from a failed command to the process exit status. */
int cli_exit_code(int code);

/* Output helpers. */
void cli_print_json(const json_t *v);
/* Borrowed string member, or dflt when absent, null or not a string. */
const char *cli_json_str(const json_t *obj, const char *key, const char *dflt);
/* Integer or real member formatted into buf, or "-" when absent or null. */
const char *cli_json_num(char *buf, size_t sz, const json_t *obj, const char *key);
/* "3s", "5m", "2h", "4d" since an RFC 3339 timestamp, or "-". */
const char *cli_age(char *buf, size_t sz, const char *rfc3339);

/* A text table: add cells row by row, then print with aligned columns. */
struct cli_table {
	size_t ncols;
	struct cli_strv cells; /* borrowed, except the ones listed in owned */
	struct cli_strv owned;
};

/* cell is borrowed: it must live until the table is printed (NULL shows "-"). */
int cli_table_add(struct cli_table *t, const char *cell);
/* Like cli_table_add, but formats a copy the table owns. */
int cli_table_addf(struct cli_table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Two cells: label, then obj's RFC 3339 time at key with its age ("-" when absent). */
int cli_table_add_time(struct cli_table *t, const char *label, const json_t *obj,
		       const char *key);
void cli_table_print(FILE *f, const struct cli_table *t);
void cli_table_free(struct cli_table *t);

/* Commands: argv[0] is the first argument after the command name. */
int cli_cmd_submit(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_status(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_list(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_watch(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_cancel(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_stop(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_teams(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_tokens(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_nodes(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_node_pools(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_attempts(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_checkpoints(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_logs(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_queue(struct cli *cli, int argc, char **argv, struct ty_err *err);
/*
 * A queue entry's or a job's estimated start as text: brief for a table
 * column ("2026-11-27 14:02 UTC", "never", "after ...", "-"), else with its
 * basis ("... (after job 41 ends; runtimes from history)"). Like snprintf.
 */
int cli_estimate_text(char *buf, size_t n, const json_t *obj, bool brief);
int cli_cmd_quota(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_usage(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_sweep(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_webhooks(struct cli *cli, int argc, char **argv, struct ty_err *err);
int cli_cmd_audit(struct cli *cli, int argc, char **argv, struct ty_err *err);

#endif
