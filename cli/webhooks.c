/* jobctl webhooks: create, list, delete, ping and show deliveries (/v1/webhooks). */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char webhooks_help[] =
	"usage: jobctl webhooks create --team T --url URL [--event E]... --secret-file FILE\n"
	"       jobctl webhooks list [--team T] [--limit N] [--all]\n"
	"       jobctl webhooks delete ID\n"
	"       jobctl webhooks ping ID\n"
	"       jobctl webhooks deliveries ID [--state S] [--limit N] [--all]\n"
	"\n"
	"A webhook receives a team's job state changes as signed POSTs\n"
	"(docs/webhooks.md). create registers one (events default to \"*\", every\n"
	"state change; the secret, 16 to 256 characters, is read from a file so it\n"
	"stays out of the process list, and is never shown again). delete\n"
	"deactivates it and cancels its pending deliveries. ping queues a test\n"
	"delivery. deliveries lists what was sent, newest first, with each attempt.\n"
	"\n"
	"flags:\n"
	"  --team T               the team (create; list: filter)\n"
	"  --url URL              http or https URL to POST to (create)\n"
	"  --event E              job.<state> or \"*\"; repeat for several (create)\n"
	"  --secret-file FILE     file holding the signing secret, '-' for stdin; one\n"
	"                         trailing newline is dropped (create)\n"
	"  --state S              pending, delivered, failed or cancelled (deliveries)\n"
	"  --limit N              items per page, 1..500 (default 50; list, deliveries)\n"
	"  --all                  follow the pages to the end (list, deliveries)\n";

#define MAX_SECRET_FILE 4096

static int read_secret(char **out, const char *file, struct ty_err *err)
{
	bool is_stdin = strcmp(file, "-") == 0;
	FILE *f = is_stdin ? stdin : fopen(file, "r");
	char *buf;
	size_t n;

	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot open '%.200s': %s", file,
				  strerror(errno));
	if (!(buf = calloc(1, MAX_SECRET_FILE + 1))) {
		if (!is_stdin)
			fclose(f);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	n = fread(buf, 1, MAX_SECRET_FILE, f);
	if (!is_stdin)
		fclose(f);
	if (n == MAX_SECRET_FILE) {
		free(buf);
		return ty_err_set(err, TY_ECONFIG, "'%.200s' is too long for a secret", file);
	}
	if (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	if (n && buf[n - 1] == '\r')
		buf[--n] = '\0';
	*out = buf;
	return 0;
}

static int add_webhook_row(struct cli_table *t, const json_t *w)
{
	char id[32], age[32];
	const json_t *e;
	struct ty_buf ev = TY_BUF_INIT;
	size_t i;
	int rc = 0;

	json_array_foreach(json_object_get(w, "events"), i, e)
		ty_buf_printf(&ev, "%s%s", i ? "," : "", json_string_value(e));
	rc |= cli_table_addf(t, "%s", cli_json_num(id, sizeof(id), w, "id"));
	rc |= cli_table_add(t, cli_json_str(w, "team", "-"));
	rc |= cli_table_add(t, cli_json_str(w, "url", "-"));
	rc |= ev.oom ? TY_ENOMEM : cli_table_addf(t, "%s", ev.data ? ev.data : "-");
	rc |= cli_table_add(t, json_is_true(json_object_get(w, "active")) ? "yes" : "no");
	rc |= cli_table_addf(t, "%s",
			     cli_age(age, sizeof(age), cli_json_str(w, "created_at", NULL)));
	ty_buf_free(&ev);
	return rc ? TY_ENOMEM : 0;
}

static int add_delivery_row(struct cli_table *t, const json_t *d)
{
	char id[32], n[32], st[32], age[32];
	const char *err = cli_json_str(d, "last_error", NULL);
	int rc = 0;

	rc |= cli_table_addf(t, "%s", cli_json_num(id, sizeof(id), d, "id"));
	rc |= cli_table_add(t, cli_json_str(d, "event", "-"));
	rc |= cli_table_add(t, cli_json_str(d, "state", "-"));
	rc |= cli_table_addf(t, "%s", cli_json_num(n, sizeof(n), d, "attempt_count"));
	if (err)
		rc |= cli_table_addf(t, "%.80s", err);
	else
		rc |= cli_table_addf(t, "%s", cli_json_num(st, sizeof(st), d, "last_status"));
	rc |= cli_table_addf(t, "%s",
			     cli_age(age, sizeof(age), cli_json_str(d, "created_at", NULL)));
	return rc ? TY_ENOMEM : 0;
}

static int webhook_path(struct ty_buf *b, const struct cli_strv *pos, const char *suffix,
			struct ty_err *err)
{
	long long id;
	int rc;

	if (pos->n != 2)
		return ty_err_set(err, TY_ECONFIG,
				  pos->n > 2 ? "expected one webhook id, got %zu arguments"
					     : "missing the webhook id",
				  pos->n - 1);
	if ((rc = cli_parse_id(&id, pos->v[1], "the webhook id", err)))
		return rc;
	if (ty_buf_printf(b, "/v1/webhooks/%lld%s", id, suffix))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

static int create(struct cli *cli, const char *team, const char *url,
		  const struct cli_strv *events, const char *secret_file, struct ty_err *err)
{
	struct cli_resp resp = {0};
	json_t *body = NULL, *ev = json_array();
	char *secret = NULL, id[32];
	int rc;

	if (!team || !url || !secret_file) {
		json_decref(ev);
		return ty_err_set(err, TY_ECONFIG,
				  "'webhooks create' needs --team, --url and --secret-file");
	}
	if ((rc = read_secret(&secret, secret_file, err))) {
		json_decref(ev);
		return rc;
	}
	for (size_t i = 0; ev && i < events->n; i++)
		json_array_append_new(ev, json_string(events->v[i]));
	if (ev && !events->n)
		json_array_append_new(ev, json_string("*"));
	/* fails on text that is not UTF-8; it takes ev either way */
	body = json_pack("{s:s, s:s, s:o, s:s}", "team", team, "url", url, "events", ev, "secret",
			 secret);
	if (!body) {
		rc = ty_err_set(err, TY_EINVAL, "--team, --url and the secret must be UTF-8");
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "POST", "/v1/webhooks", body, NULL, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON)
		cli_print_json(resp.body);
	else
		printf("webhook %s: %s for team %s\n", cli_json_num(id, sizeof(id), resp.body, "id"),
		       cli_json_str(resp.body, "url", "-"), cli_json_str(resp.body, "team", "-"));
out:
	json_decref(body);
	cli_resp_free(&resp);
	if (secret) {
		memset(secret, 0, strlen(secret));
		free(secret);
	}
	return rc;
}

int cli_cmd_webhooks(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *team = NULL, *url = NULL, *secret_file = NULL, *state = NULL, *limit_s = NULL;
	struct cli_strv events = {0};
	bool all = false;
	const struct cli_opt opts[] = {
		{"team", 0, CLI_OPT_STR, &team},
		{"url", 0, CLI_OPT_STR, &url},
		{"event", 0, CLI_OPT_LIST, &events},
		{"secret-file", 0, CLI_OPT_STR, &secret_file},
		{"state", 0, CLI_OPT_STR, &state},
		{"limit", 0, CLI_OPT_STR, &limit_s},
		{"all", 0, CLI_OPT_FLAG, &all},
	};
	static const char *const hook_header[] = {"ID", "TEAM", "URL", "EVENTS", "ACTIVE", "AGE"};
	static const char *const del_header[] = {"ID", "EVENT", "STATE", "ATTEMPTS", "LAST",
						 "AGE"};
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	struct ty_buf path = TY_BUF_INIT;
	const char *sub;
	char id[32];
	long long n;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(webhooks_help, stdout);
		goto out;
	}
	if (!pos.n) {
		rc = ty_err_set(err, TY_ECONFIG,
				"missing the webhooks command (create, list, delete, ping, "
				"deliveries)");
		goto out;
	}
	sub = pos.v[0];
	if (strcmp(sub, "create") && strcmp(sub, "list") && strcmp(sub, "delete") &&
	    strcmp(sub, "ping") && strcmp(sub, "deliveries")) {
		rc = ty_err_set(err, TY_ECONFIG,
				"unknown webhooks command '%.100s' (create, list, delete, ping, "
				"deliveries)",
				sub);
		goto out;
	}
	if (strcmp(sub, "create") && (url || events.n || secret_file)) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--url, --event and --secret-file are for 'webhooks create'");
		goto out;
	}
	if (team && strcmp(sub, "create") && strcmp(sub, "list")) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--team is for 'webhooks create' and 'webhooks list'");
		goto out;
	}
	if (strcmp(sub, "list") && strcmp(sub, "deliveries") && (limit_s || all)) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--limit and --all are for 'webhooks list' and 'webhooks deliveries'");
		goto out;
	}
	if (state && strcmp(sub, "deliveries")) {
		rc = ty_err_set(err, TY_ECONFIG, "--state is for 'webhooks deliveries'");
		goto out;
	}
	if (limit_s && (rc = cli_parse_int(&n, limit_s, 1, 500, "--limit", err)))
		goto out;

	if (!strcmp(sub, "create")) {
		if (pos.n > 1) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[1]);
			goto out;
		}
		rc = create(cli, team, url, &events, secret_file, err);
	} else if (!strcmp(sub, "list")) {
		if (pos.n > 1) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[1]);
			goto out;
		}
		if (ty_buf_puts(&path, "/v1/webhooks") ||
		    (team && cli_buf_query(&path, "team", team)) ||
		    (limit_s && cli_buf_query(&path, "limit", limit_s))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		rc = cli_list_print(cli, path.data, all, "webhook list", "webhooks", hook_header, 6,
				    add_webhook_row, err);
	} else if (!strcmp(sub, "deliveries")) {
		if ((rc = webhook_path(&path, &pos, "/deliveries", err)))
			goto out;
		if ((state && cli_buf_query(&path, "state", state)) ||
		    (limit_s && cli_buf_query(&path, "limit", limit_s))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		rc = cli_list_print(cli, path.data, all, "delivery list", "deliveries", del_header,
				    6, add_delivery_row, err);
	} else if (!strcmp(sub, "delete")) {
		if ((rc = webhook_path(&path, &pos, "", err)) ||
		    (rc = cli_request(&resp, cli, "DELETE", path.data, NULL, NULL, 0, err)))
			goto out;
		if (cli->output == CLI_OUT_JSON)
			cli_print_json(resp.body);
		else
			printf("deleted webhook %s: pending deliveries cancelled\n",
			       cli_json_num(id, sizeof(id), resp.body, "id"));
	} else {
		if ((rc = webhook_path(&path, &pos, "/ping", err)) ||
		    (rc = cli_request(&resp, cli, "POST", path.data, NULL, NULL, 0, err)))
			goto out;
		if (cli->output == CLI_OUT_JSON)
			cli_print_json(resp.body);
		else
			printf("ping queued: delivery %s\n",
			       cli_json_num(id, sizeof(id), resp.body, "id"));
	}
out:
	cli_resp_free(&resp);
	ty_buf_free(&path);
	cli_strv_free(&pos);
	cli_strv_free(&events);
	return rc;
}
