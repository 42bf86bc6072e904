/*
 * jobctl usage: GPU-hours, idle GPU-hours, cost and lost work (GET /v1/usage),
 * or with --goodput the GPU-hours of each goodput category per team and pool.
 */
#include "cli.h"
#include "goodput.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const char usage_help[] =
	"usage: jobctl usage [--team T] [--from TIME] [--to TIME] [--group-by team|job|pool|day]\n"
	"       jobctl usage --goodput [--team T] [--from TIME] [--to TIME]\n"
	"\n"
	"GPU time from the usage ledger over a time range, per group: GPU-hours,\n"
	"idle GPU-hours (GPUs held while every one of them on the node was idle, as\n"
	"the executors measured it; counted when the attempt ends),\n"
	"cost (GPU-hours x the scheduler's rate for the node's pool and GPU model),\n"
	"GPU-hours of work lost (since the last valid checkpoint of attempts that\n"
	"were preempted or failed), attempts, and how many of them still run\n"
	"(running attempts count up to now). Rows that straddle the range (or a day)\n"
	"count only the part inside it. Members and viewers see their own team.\n"
	"-o json prints the API's answer, -o csv one line per group with the raw\n"
	"numbers (GPU-seconds, no total line).\n"
	"\n"
	"flags:\n"
	"  --team T        only team T (admins; others may only name their own)\n"
	"  --from TIME     start of the range, RFC 3339 (default: 30 days before --to)\n"
	"  --to TIME       end of the range, RFC 3339 (default: now)\n"
	"  --group-by G    team (default), job, pool or day (UTC days, at most 366)\n"
	"  --goodput       per team and pool, the GPU-hours of each goodput category\n"
	"                  (useful, checkpoint, idle, lost to preemption, to the user,\n"
	"                  to the infrastructure, hang; they add up to GPU-HOURS) and the\n"
	"                  queue wait beside them, of the attempts that ended in the range;\n"
	"                  -o csv prints the server's CSV (GPU-hours and cost per category)\n";

/* A number member with fmt, or "-" when absent. */
static const char *num(char *buf, size_t sz, const json_t *obj, const char *key, const char *fmt,
		       double scale)
{
	const json_t *v = json_object_get(obj, key);

	if (json_is_number(v))
		snprintf(buf, sz, fmt, json_number_value(v) * scale);
	else
		snprintf(buf, sz, "-");
	return buf;
}

/* The group's key cells: team | job, team | pool | day. */
static int key_cells(struct cli_table *t, const json_t *e, const char *group)
{
	char n[32];
	int rc = 0;

	if (!strcmp(group, "job")) {
		rc |= cli_table_addf(t, "%s", cli_json_num(n, sizeof(n), e, "job"));
		rc |= cli_table_add(t, cli_json_str(e, "team", "-"));
	} else {
		rc |= cli_table_add(t, cli_json_str(e, group, "-"));
	}
	return rc;
}

static int metric_cells(struct cli_table *t, const json_t *m)
{
	char b[64];
	int rc = 0;

	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "gpu_hours", "%.2f", 1));
	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "idle_gpu_hours", "%.2f", 1));
	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "cost", "%.2f", 1));
	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "lost_gpu_seconds", "%.2f", 1 / 3600.0));
	rc |= cli_table_addf(t, "%s", cli_json_num(b, sizeof(b), m, "attempts"));
	rc |= cli_table_addf(t, "%s", cli_json_num(b, sizeof(b), m, "running_attempts"));
	return rc;
}

static int print_table(const json_t *body, const char *group)
{
	static const char *const metrics[] = {"GPU-HOURS",	    "IDLE-GPU-HOURS", "COST",
					      "LOST-GPU-HOURS", "ATTEMPTS",	      "RUNNING"};
	enum { NMETRICS = sizeof(metrics) / sizeof(metrics[0]) };
	const json_t *items = json_object_get(body, "items"), *e;
	size_t nkeys = !strcmp(group, "job") ? 2 : 1, i;
	struct cli_table t = {.ncols = nkeys + NMETRICS};
	int rc = 0;

	if (nkeys == 2) {
		rc |= cli_table_add(&t, "JOB");
		rc |= cli_table_add(&t, "TEAM");
	} else {
		rc |= cli_table_add(&t, !strcmp(group, "team")	 ? "TEAM"
					: !strcmp(group, "pool") ? "POOL"
								 : "DAY");
	}
	for (i = 0; i < NMETRICS; i++)
		rc |= cli_table_add(&t, metrics[i]);
	json_array_foreach(items, i, e) {
		rc |= key_cells(&t, e, group);
		rc |= metric_cells(&t, e);
	}
	rc |= cli_table_add(&t, "TOTAL");
	if (nkeys == 2)
		rc |= cli_table_add(&t, "");
	rc |= metric_cells(&t, json_object_get(body, "totals"));
	if (!rc) {
		printf("%s .. %s\n", cli_json_str(body, "from", "-"), cli_json_str(body, "to", "-"));
		cli_table_print(stdout, &t);
	}
	cli_table_free(&t);
	return rc ? TY_ENOMEM : 0;
}

/* One CSV field: quoted when it holds a comma, a quote or a line break. */
static void csv_field(const char *s, bool last)
{
	if (strpbrk(s, ",\"\r\n")) {
		putchar('"');
		for (; *s; s++) {
			if (*s == '"')
				putchar('"');
			putchar(*s);
		}
		putchar('"');
	} else {
		fputs(s, stdout);
	}
	putchar(last ? '\n' : ',');
}

static void print_csv(const json_t *body, const char *group)
{
	/* new columns go last: scripts may read them by position */
	static const char *const metrics[] = {"gpu_seconds",	  "gpu_hours",
					      "cost",		  "lost_gpu_seconds",
					      "attempts",	  "running_attempts",
					      "idle_gpu_seconds"};
	enum { NMETRICS = sizeof(metrics) / sizeof(metrics[0]) };
	const json_t *e;
	size_t i, k;
	char b[64];

	if (!strcmp(group, "job"))
		fputs("job,team,", stdout);
	else
		printf("%s,", group);
	for (k = 0; k < NMETRICS; k++)
		csv_field(metrics[k], k == NMETRICS - 1);
	json_array_foreach(json_object_get(body, "items"), i, e) {
		if (!strcmp(group, "job")) {
			csv_field(cli_json_num(b, sizeof(b), e, "job"), false);
			csv_field(cli_json_str(e, "team", ""), false);
		} else {
			csv_field(cli_json_str(e, group, ""), false);
		}
		for (k = 0; k < NMETRICS; k++) {
			const json_t *v = json_object_get(e, metrics[k]);

			if (json_is_integer(v))
				snprintf(b, sizeof(b), "%lld", (long long)json_integer_value(v));
			else if (json_is_number(v))
				snprintf(b, sizeof(b), "%.6f", json_number_value(v));
			else
				b[0] = '\0';
			csv_field(b, k == NMETRICS - 1);
		}
	}
}

static const char *const goodput_names[] = {
#define GOODPUT_NAME(name, str) str,
    PROTO_GOODPUT_CATEGORIES(GOODPUT_NAME)
#undef GOODPUT_NAME
};

/* One line of the goodput table: GPU-hours, each category's, queue wait, cost. */
static int goodput_cells(struct cli_table *t, const json_t *m)
{
	char b[64], key[64];
	int rc = 0;

	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "gpu_hours", "%.2f", 1));
	for (int k = 0; k < PROTO_GOODPUT_COUNT; k++) {
		snprintf(key, sizeof(key), "%s_gpu_hours", goodput_names[k]);
		rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, key, "%.2f", 1));
	}
	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "queue_wait_gpu_hours", "%.2f", 1));
	rc |= cli_table_addf(t, "%s", num(b, sizeof(b), m, "cost", "%.2f", 1));
	return rc;
}

static int print_goodput(const json_t *body)
{
	struct cli_table t = {.ncols = 2 + 1 + PROTO_GOODPUT_COUNT + 2};
	const json_t *e;
	size_t i;
	int rc = 0;

	rc |= cli_table_add(&t, "TEAM");
	rc |= cli_table_add(&t, "POOL");
	rc |= cli_table_add(&t, "GPU-HOURS");
	for (int k = 0; k < PROTO_GOODPUT_COUNT; k++) {
		char h[64];

		/* lost_preemption: LOST-PREEMPTION */
		for (size_t c = 0; c < sizeof(h) - 1 && (h[c] = goodput_names[k][c]); c++)
			h[c] = h[c] == '_' ? '-' : (char)toupper((unsigned char)h[c]);
		h[sizeof(h) - 1] = '\0';
		rc |= cli_table_addf(&t, "%s", h);
	}
	rc |= cli_table_add(&t, "QUEUE-WAIT");
	rc |= cli_table_add(&t, "COST");
	json_array_foreach(json_object_get(body, "items"), i, e) {
		rc |= cli_table_add(&t, cli_json_str(e, "team", "-"));
		rc |= cli_table_add(&t, cli_json_str(e, "pool", "-"));
		rc |= goodput_cells(&t, e);
	}
	rc |= cli_table_add(&t, "TOTAL");
	rc |= cli_table_add(&t, "");
	rc |= goodput_cells(&t, json_object_get(body, "totals"));
	if (!rc) {
		printf("%s .. %s (GPU-hours)\n", cli_json_str(body, "from", "-"),
		       cli_json_str(body, "to", "-"));
		cli_table_print(stdout, &t);
	}
	cli_table_free(&t);
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_usage(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *team = NULL, *from = NULL, *to = NULL, *group = NULL;
	bool goodput = false;
	const struct cli_opt opts[] = {
		{"team", 0, CLI_OPT_STR, &team},
		{"from", 0, CLI_OPT_STR, &from},
		{"to", 0, CLI_OPT_STR, &to},
		{"group-by", 0, CLI_OPT_STR, &group},
		{"goodput", 0, CLI_OPT_FLAG, &goodput},
	};
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	struct ty_buf path = TY_BUF_INIT, text = TY_BUF_INIT;
	const char *shown;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(usage_help, stdout);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
		goto out;
	}
	if (group && strcmp(group, "team") && strcmp(group, "job") && strcmp(group, "pool") &&
	    strcmp(group, "day")) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--group-by must be team, job, pool or day, not '%.40s'", group);
		goto out;
	}
	if (goodput && group) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--goodput is per team and pool: leave --group-by out");
		goto out;
	}
	/* the server checks the times: it names the parameter it did not like */
	if (ty_buf_puts(&path, "/v1/usage") || (team && cli_buf_query(&path, "team", team)) ||
	    (from && cli_buf_query(&path, "from", from)) ||
	    (to && cli_buf_query(&path, "to", to)) ||
	    (group && cli_buf_query(&path, "group_by", group)) ||
	    (goodput && cli_buf_query(&path, "split", "goodput")) ||
	    (goodput && cli->output == CLI_OUT_CSV && cli_buf_query(&path, "format", "csv"))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (goodput && cli->output == CLI_OUT_CSV) {
		/* one CSV, the server's */
		if (!(rc = cli_get_text(&text, cli, path.data, err)))
			fwrite(text.data ? text.data : "", 1, text.len, stdout);
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
		goto out;
	}
	if (goodput) {
		if (!json_is_array(json_object_get(resp.body, "items")))
			rc = ty_err_set(err, TY_EIO, "the usage from the server has no 'items'");
		else if ((rc = print_goodput(resp.body)))
			ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (!json_is_array(json_object_get(resp.body, "items"))) {
		rc = ty_err_set(err, TY_EIO, "the usage from the server has no 'items'");
		goto out;
	}
	shown = cli_json_str(resp.body, "group_by", "team");
	if (strcmp(shown, "team") && strcmp(shown, "job") && strcmp(shown, "pool") &&
	    strcmp(shown, "day")) {
		rc = ty_err_set(err, TY_EIO, "the server grouped the usage by '%.40s'", shown);
		goto out;
	}
	if (cli->output == CLI_OUT_CSV)
		print_csv(resp.body, shown);
	else if ((rc = print_table(resp.body, shown)))
		ty_err_set(err, TY_ENOMEM, NULL);
out:
	cli_resp_free(&resp);
	cli_strv_free(&pos);
	ty_buf_free(&path);
	ty_buf_free(&text);
	return rc;
}
