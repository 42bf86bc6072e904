/* jobctl audit: the request audit log, newest first (GET /v1/audit, admin). */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char audit_help[] =
	"usage: jobctl audit [--token-id N] [--principal NAME] [--team T] [--method M]\n"
	"                    [--path-prefix P] [--status N] [--since T] [--until T]\n"
	"                    [--limit N] [--all]\n"
	"\n"
	"Lists the audit log (admin tokens only): one record per POST, PUT, PATCH or\n"
	"DELETE the API answered, refused ones included, newest first: when, who\n"
	"(token id and name, or the job of a trial metrics token), what (method\n"
	"and path), the HTTP status and problem code, and the client address.\n"
	"\n"
	"flags:\n"
	"  --token-id N       requests made with this token id\n"
	"  --principal NAME   requests whose principal (token name) is NAME\n"
	"  --team T           requests made with a token of team T\n"
	"  --method M         POST, PUT, PATCH or DELETE\n"
	"  --path-prefix P    requests whose path starts with P (e.g. /v1/tokens)\n"
	"  --status N         requests answered with HTTP status N\n"
	"  --since T          at or after T (RFC 3339, e.g. 2026-01-31T00:00:00Z)\n"
	"  --until T          before T (RFC 3339)\n"
	"  --limit N          items per page, 1..500 (default 50)\n"
	"  --all              follow the pages to the end\n";

static int add_row(struct cli_table *t, const json_t *a)
{
	char id[32], status[32], tok[32];
	const char *who = cli_json_str(a, "principal", NULL);
	const char *code = cli_json_str(a, "problem_code", NULL);
	int rc = 0;

	rc |= cli_table_addf(t, "%s", cli_json_num(id, sizeof(id), a, "id"));
	rc |= cli_table_add(t, cli_json_str(a, "time", "-"));
	if (who)
		rc |= cli_table_addf(t, "%s (%s)", who, cli_json_num(tok, sizeof(tok), a, "token_id"));
	else
		rc |= cli_table_add(t, "(unknown)");
	rc |= cli_table_add(t, cli_json_str(a, "team", "-"));
	rc |= cli_table_addf(t, "%s %.100s", cli_json_str(a, "method", "?"),
			     cli_json_str(a, "path", "?"));
	if (code)
		rc |= cli_table_addf(t, "%s %s", cli_json_num(status, sizeof(status), a, "status"),
				     code);
	else
		rc |= cli_table_addf(t, "%s", cli_json_num(status, sizeof(status), a, "status"));
	rc |= cli_table_add(t, cli_json_str(a, "peer", "-"));
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_audit(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *token_id = NULL, *principal = NULL, *team = NULL, *method = NULL;
	const char *prefix = NULL, *status = NULL, *since = NULL, *until = NULL, *limit = NULL;
	bool all = false;
	const struct cli_opt opts[] = {
		{"token-id", 0, CLI_OPT_STR, &token_id},
		{"principal", 0, CLI_OPT_STR, &principal},
		{"team", 0, CLI_OPT_STR, &team},
		{"method", 0, CLI_OPT_STR, &method},
		{"path-prefix", 0, CLI_OPT_STR, &prefix},
		{"status", 0, CLI_OPT_STR, &status},
		{"since", 0, CLI_OPT_STR, &since},
		{"until", 0, CLI_OPT_STR, &until},
		{"limit", 0, CLI_OPT_STR, &limit},
		{"all", 0, CLI_OPT_FLAG, &all},
	};
	static const char *const header[] = {"ID", "TIME", "WHO", "TEAM", "REQUEST", "STATUS",
					     "PEER"};
	struct cli_strv pos = {0};
	struct ty_buf path = TY_BUF_INIT;
	long long n;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(audit_help, stdout);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
		goto out;
	}
	if ((token_id && (rc = cli_parse_id(&n, token_id, "--token-id", err))) ||
	    (status && (rc = cli_parse_int(&n, status, 100, 599, "--status", err))) ||
	    (limit && (rc = cli_parse_int(&n, limit, 1, 500, "--limit", err))))
		goto out;
	if (method && strcmp(method, "POST") && strcmp(method, "PUT") && strcmp(method, "PATCH") &&
	    strcmp(method, "DELETE")) {
		rc = ty_err_set(err, TY_ECONFIG, "--method must be POST, PUT, PATCH or DELETE");
		goto out;
	}
	if (ty_buf_puts(&path, "/v1/audit") || (limit && cli_buf_query(&path, "limit", limit)) ||
	    (token_id && cli_buf_query(&path, "token_id", token_id)) ||
	    (principal && cli_buf_query(&path, "principal", principal)) ||
	    (team && cli_buf_query(&path, "team", team)) ||
	    (method && cli_buf_query(&path, "method", method)) ||
	    (prefix && cli_buf_query(&path, "path_prefix", prefix)) ||
	    (status && cli_buf_query(&path, "status", status)) ||
	    (since && cli_buf_query(&path, "since", since)) ||
	    (until && cli_buf_query(&path, "until", until))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	rc = cli_list_print(cli, path.data, all, "audit log", "records", header,
			    sizeof(header) / sizeof(header[0]), add_row, err);
out:
	cli_strv_free(&pos);
	ty_buf_free(&path);
	return rc;
}
