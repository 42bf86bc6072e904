/* jobctl views of what the scheduler publishes: the queue and the teams' quota use. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char queue_help[] =
	"usage: jobctl queue [--team T] [--limit N] [--all]\n"
	"\n"
	"List the pending jobs of every team in the order the scheduler considers\n"
	"them, as of its last cycle: position, job id, team, priority class, GPUs\n"
	"(nodes x GPUs per node), age, the team's fair share, when it is expected\n"
	"to start (docs/scheduling.md, \"Start-time estimates\") and why it waits.\n"
	"Position '-': submitted since the last cycle, not placed yet. Other teams'\n"
	"jobs show no id and no reason (admins see everything).\n"
	"\n"
	"flags:\n"
	"  --team T     only the jobs of team T (positions stay those in the whole queue)\n"
	"  --limit N    entries per page, 1..500 (default 50)\n"
	"  --all        follow the pages to the end\n";

static const char quota_help[] =
	"usage: jobctl quota [TEAM]\n"
	"\n"
	"Show a team's quota and its use as of the scheduler's last cycle: nominal\n"
	"GPUs, borrowing and lending limits, cohort, weight, GPUs in use, borrowed\n"
	"(above nominal) and lent (to the cohort), pending jobs, fair share (1: used\n"
	"nothing; lower goes later) and decayed GPU-hours. Without TEAM, a table of\n"
	"every team the token sees (admins: all, others: their own).\n";

/* A number member in fmt ("%.3g"), or "-" when absent or not a number. */
static const char *real(char *buf, size_t sz, const json_t *obj, const char *key, const char *fmt)
{
	const json_t *v = json_object_get(obj, key);

	if (json_is_number(v))
		snprintf(buf, sz, fmt, json_number_value(v));
	else
		snprintf(buf, sz, "-");
	return buf;
}

/* A limit or the cohort: null means there is none. */
static const char *limit(char *buf, size_t sz, const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);

	if (json_is_null(v))
		return "none";
	if (json_is_string(v))
		return json_string_value(v);
	return cli_json_num(buf, sz, obj, key);
}

/* "2026-11-27 14:02 UTC" of an RFC 3339 UTC time (as the API writes them), else as it is. */
static void utc_minute(char *buf, size_t n, const char *ts)
{
	if (strlen(ts) >= 16 && ts[10] == 'T')
		snprintf(buf, n, "%.10s %.5s UTC", ts, ts + 11);
	else
		snprintf(buf, n, "%s", ts);
}

int cli_estimate_text(char *buf, size_t n, const json_t *obj, bool brief)
{
	const json_t *e = json_object_get(obj, "estimate"), *w = json_object_get(e, "waits_for");
	const char *kind = cli_json_str(e, "kind", NULL), *at = cli_json_str(obj, "estimated_start", NULL);
	char when[64];
	size_t l;

	if (at && (!kind || strcmp(kind, "estimated") == 0)) {
		utc_minute(when, sizeof(when), at);
		if (brief || !json_is_array(w))
			return snprintf(buf, n, "%s", when);
		l = (size_t)snprintf(buf, n, "%s (", when);
		if (json_array_size(w) == 0) {
			l += (size_t)snprintf(buf + (l < n ? l : n), l < n ? n - l : 0, "no job's end");
		} else {
			const json_t *id;
			size_t k;
			long long total = json_integer_value(json_object_get(e, "waits_for_count"));

			l += (size_t)snprintf(buf + (l < n ? l : n), l < n ? n - l : 0, "after job%s ",
					      total > 1 ? "s" : "");
			json_array_foreach(w, k, id)
			{
				char num[32];

				snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(id));
				l += (size_t)snprintf(buf + (l < n ? l : n), l < n ? n - l : 0, "%s%s",
						      k ? ", " : "",
						      json_is_integer(id) ? num : "(another team's)");
			}
			if (total > (long long)json_array_size(w))
				l += (size_t)snprintf(buf + (l < n ? l : n), l < n ? n - l : 0,
						      " and %lld more",
						      total - (long long)json_array_size(w));
			l += (size_t)snprintf(buf + (l < n ? l : n), l < n ? n - l : 0, " end%s",
					      total > 1 ? "" : "s");
		}
		return (int)(l + (size_t)snprintf(buf + (l < n ? l : n), l < n ? n - l : 0,
						  "; runtimes from %s)",
						  strcmp(cli_json_str(e, "runtime_source", ""),
							 "history") == 0
						      ? "history"
						      : "max_runtime_seconds"));
	}
	if (kind && strcmp(kind, "now") == 0)
		return snprintf(buf, n, "now");
	if (kind && strcmp(kind, "never") == 0)
		return snprintf(buf, n, brief ? "never" : "never: it fits no registered node (see the reason)");
	if (kind && strcmp(kind, "beyond_horizon") == 0) {
		utc_minute(when, sizeof(when), cli_json_str(e, "horizon", "?"));
		return snprintf(buf, n, brief ? "after %s" : "not before %s (beyond the horizon)", when);
	}
	if (kind && strcmp(kind, "not_estimated") == 0)
		return snprintf(buf, n, brief ? "-" : "not estimated (too far back in the queue)");
	return snprintf(buf, n, brief ? "-" : "not estimated yet");
}

static int add_entry_row(struct cli_table *t, const json_t *e)
{
	char est[256];

	char pos[32], job[32], gpus[32], nodes[32], gpn[32], fs[32], age[32];
	int rc = 0;

	rc |= cli_table_addf(t, "%s", cli_json_num(pos, sizeof(pos), e, "position"));
	rc |= cli_table_addf(t, "%s", cli_json_num(job, sizeof(job), e, "job"));
	rc |= cli_table_add(t, cli_json_str(e, "team", "-"));
	rc |= cli_table_add(t, cli_json_str(e, "priority_class", "-"));
	rc |= cli_table_addf(t, "%s (%sx%s)", cli_json_num(gpus, sizeof(gpus), e, "gpus"),
			     cli_json_num(nodes, sizeof(nodes), e, "nodes"),
			     cli_json_num(gpn, sizeof(gpn), e, "gpus_per_node"));
	rc |= cli_table_addf(t, "%s",
			     cli_age(age, sizeof(age), cli_json_str(e, "submitted_at", NULL)));
	rc |= cli_table_addf(t, "%s", real(fs, sizeof(fs), e, "fair_share", "%.3g"));
	cli_estimate_text(est, sizeof(est), e, true);
	rc |= cli_table_addf(t, "%s", est);
	rc |= cli_table_add(t, cli_json_str(e, "reason", "-"));
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_queue(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *team = NULL, *limit_s = NULL;
	bool all = false;
	const struct cli_opt opts[] = {
		{"team", 0, CLI_OPT_STR, &team},
		{"limit", 0, CLI_OPT_STR, &limit_s},
		{"all", 0, CLI_OPT_FLAG, &all},
	};
	static const char *const header[] = {"POS",	   "JOB",	 "TEAM",
					     "CLASS",	   "GPUS",	 "AGE",
					     "FAIR-SHARE", "ESTIMATED START", "REASON"};
	struct cli_strv pos = {0};
	struct ty_buf base = TY_BUF_INIT;
	long long n;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(queue_help, stdout);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
		goto out;
	}
	if (limit_s && (rc = cli_parse_int(&n, limit_s, 1, 500, "--limit", err)))
		goto out;
	if (ty_buf_puts(&base, "/v1/queue") || (team && cli_buf_query(&base, "team", team)) ||
	    (limit_s && cli_buf_query(&base, "limit", limit_s))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	rc = cli_list_print(cli, base.data, all, "queue", "entries", header, 9, add_entry_row, err);
out:
	ty_buf_free(&base);
	cli_strv_free(&pos);
	return rc;
}

static int print_quota(const json_t *team)
{
	const json_t *u = json_object_get(team, "usage");
	const char *updated = cli_json_str(u, "updated_at", NULL);
	struct cli_table t = {.ncols = 2};
	char n[64], age[32];
	int rc = 0;

	rc |= cli_table_add(&t, "team:");
	rc |= cli_table_add(&t, cli_json_str(team, "name", "-"));
	rc |= cli_table_add(&t, "nominal GPUs:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "nominal_gpus"));
	rc |= cli_table_add(&t, "borrowing limit:");
	rc |= cli_table_addf(&t, "%s", limit(n, sizeof(n), team, "borrowing_limit_gpus"));
	rc |= cli_table_add(&t, "lending limit:");
	rc |= cli_table_addf(&t, "%s", limit(n, sizeof(n), team, "lending_limit_gpus"));
	rc |= cli_table_add(&t, "cohort:");
	rc |= cli_table_addf(&t, "%s", limit(n, sizeof(n), team, "cohort"));
	rc |= cli_table_add(&t, "weight:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "weight"));
	rc |= cli_table_add(&t, "GPUs in use:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "gpus_in_use"));
	rc |= cli_table_add(&t, "borrowed:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "gpus_borrowed"));
	rc |= cli_table_add(&t, "lent:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "gpus_lent"));
	rc |= cli_table_add(&t, "pending jobs:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "pending_jobs"));
	rc |= cli_table_add(&t, "fair share:");
	rc |= cli_table_addf(&t, "%s", real(n, sizeof(n), u, "fair_share", "%.3g"));
	rc |= cli_table_add(&t, "decayed GPU-hours:");
	rc |= cli_table_addf(&t, "%s", real(n, sizeof(n), u, "decayed_gpu_hours", "%.1f"));
	rc |= cli_table_add(&t, "as of:");
	if (updated)
		rc |= cli_table_addf(&t, "%s (%s ago)", updated, cli_age(age, sizeof(age), updated));
	else
		rc |= cli_table_add(&t, "- (the scheduler has not published it yet)");
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	return rc ? TY_ENOMEM : 0;
}

static int print_quotas(const json_t *items)
{
	static const char *const header[] = {"TEAM",     "NOMINAL", "BORROW-LIMIT", "LEND-LIMIT",
					     "COHORT",   "WEIGHT",  "IN-USE",       "BORROWED",
					     "LENT",     "PENDING", "FAIR-SHARE",   "GPU-HOURS"};
	struct cli_table t = {.ncols = 12};
	const json_t *team;
	size_t i;
	int rc = 0;

	for (i = 0; i < 12; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, team) {
		const json_t *u = json_object_get(team, "usage");
		char n[64];

		rc |= cli_table_add(&t, cli_json_str(team, "name", "-"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "nominal_gpus"));
		rc |= cli_table_addf(&t, "%s", limit(n, sizeof(n), team, "borrowing_limit_gpus"));
		rc |= cli_table_addf(&t, "%s", limit(n, sizeof(n), team, "lending_limit_gpus"));
		rc |= cli_table_addf(&t, "%s", limit(n, sizeof(n), team, "cohort"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "weight"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "gpus_in_use"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "gpus_borrowed"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "gpus_lent"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "pending_jobs"));
		rc |= cli_table_addf(&t, "%s", real(n, sizeof(n), u, "fair_share", "%.3g"));
		rc |= cli_table_addf(&t, "%s", real(n, sizeof(n), u, "decayed_gpu_hours", "%.1f"));
	}
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_quota(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, NULL, 0, err)))
		goto out;
	if (cli->help) {
		fputs(quota_help, stdout);
		goto out;
	}
	if (pos.n > 1) {
		rc = ty_err_set(err, TY_ECONFIG, "expected at most one team name, got %zu arguments",
				pos.n);
		goto out;
	}
	if (ty_buf_puts(&path, "/v1/teams") ||
	    (pos.n && (ty_buf_puts(&path, "/") || cli_buf_escape(&path, pos.v[0])))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
		goto out;
	}
	if (pos.n)
		rc = print_quota(resp.body);
	else if (!json_is_array(json_object_get(resp.body, "items")))
		rc = ty_err_set(err, TY_EIO, "the team list from the server has no 'items'");
	else
		rc = print_quotas(json_object_get(resp.body, "items"));
	if (rc == TY_ENOMEM)
		ty_err_set(err, TY_ENOMEM, NULL);
out:
	cli_resp_free(&resp);
	cli_strv_free(&pos);
	ty_buf_free(&path);
	return rc;
}
