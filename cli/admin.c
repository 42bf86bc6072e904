/* jobctl team and token commands. */
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char teams_help[] =
	"usage: jobctl teams [list]\n"
	"       jobctl teams get NAME\n"
	"       jobctl teams create NAME --nominal-gpus N [--borrowing-limit N]\n"
	"                          [--lending-limit N] [--cohort C] [--weight W]\n"
	"                          [--max-cpus N] [--max-memory-mb N] [--run-uid UID]\n"
	"                          [--idle-gpu-alert-seconds S] [--budget AMOUNT/PERIOD]\n"
	"       jobctl teams update NAME [--nominal-gpus N] [--borrowing-limit N|none]\n"
	"                          [--lending-limit N|none] [--cohort C|none] [--weight W]\n"
	"                          [--max-cpus N|none] [--max-memory-mb N|none]\n"
	"                          [--run-uid UID|none] [--idle-gpu-alert-seconds S|none]\n"
	"                          [--budget AMOUNT/PERIOD|none]\n"
	"\n"
	"List, show, create (admin) and update (admin) teams and their quotas.\n"
	"\n"
	"flags:\n"
	"  --nominal-gpus N      GPUs the team is guaranteed\n"
	"  --borrowing-limit N   most GPUs it may borrow from its cohort ('none': no limit)\n"
	"  --lending-limit N     most of its GPUs others may borrow ('none': no limit)\n"
	"  --cohort C            cohort it borrows in and lends to ('none': no cohort)\n"
	"  --weight W            fair-share weight, a number > 0 (default 1)\n"
	"  --max-cpus N          most CPUs its running jobs hold at once, nodes x\n"
	"                        cpus_per_node, GPU-less jobs included ('none': no limit)\n"
	"  --max-memory-mb N     the same for memory in MiB ('none': no limit)\n"
	"  --run-uid UID         uid and gid its ranks run as on the nodes, 1000 or more,\n"
	"                        no other team's ('none': the scheduler's --team-uid-base\n"
	"                        plus the team's id)\n"
	"  --idle-gpu-alert-seconds S\n"
	"                        report a job that holds GPUs idle on a node this long,\n"
	"                        60..604800: a gpus_idle job event and the\n"
	"                        trainyard_jobs_gpus_idle metric ('none': never, the default)\n"
	"  --budget AMOUNT/PERIOD\n"
	"                        money budget per calendar period in UTC (day, week, month),\n"
	"                        in the units of the scheduler's rate table, e.g. 1000/month;\n"
	"                        a job that could exceed it waits, 0 lets nothing start\n"
	"                        ('none': no budget)\n";

static const char tokens_help[] =
	"usage: jobctl tokens create --name NAME --role admin|member|viewer [--team TEAM]\n"
	"       jobctl tokens [list]\n"
	"       jobctl tokens revoke ID\n"
	"\n"
	"Manage API tokens (admin only). 'create' prints the new token on stdout;\n"
	"it is shown only this once. member and viewer tokens belong to a team.\n";

/*
 * Take the subcommand out of argv: the first argument that is no option
 * ("jobctl teams --server URL get NAME" works). None means "list".
 */
static const char *subcommand(int *argc, char ***argv)
{
	int i = cli_skip_options(*argc, *argv);
	char *sub;

	if (i >= *argc || (*argv)[i][0] == '-')
		return "list";
	sub = (*argv)[i];
	memmove(&(*argv)[1], &(*argv)[0], (size_t)i * sizeof(char *));
	(*argc)--;
	(*argv)++;
	return sub;
}

static int parse_none_or_int(json_t **out, const char *val, const char *flag, struct ty_err *err)
{
	long long v;
	int rc;

	if (strcmp(val, "none") == 0) {
		*out = json_null();
		return 0;
	}
	if ((rc = cli_parse_int(&v, val, LLONG_MIN, LLONG_MAX, flag, err)))
		return rc;
	if (!(*out = json_integer(v)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

static int parse_number(json_t **out, const char *val, const char *flag, struct ty_err *err)
{
	long long i;
	char *end;
	double d;

	/* an integral weight goes out as an integer, the rest as a real */
	if (cli_parse_int(&i, val, LLONG_MIN, LLONG_MAX, flag, NULL) == 0) {
		*out = json_integer(i);
	} else {
		errno = 0;
		d = strtod(val, &end);
		if (errno || end == val || *end || !isfinite(d))
			return ty_err_set(err, TY_ECONFIG, "%s must be a number, not '%.40s'", flag,
					  val);
		*out = json_real(d);
	}
	if (!*out)
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

struct team_flags {
	const char *nominal, *borrowing, *lending, *cohort, *weight, *max_cpus, *max_memory,
		*run_uid, *idle_alert, *budget;
};

/*
 * --budget AMOUNT/PERIOD ("1000/month") or "none": the body's budget. The
 * server checks the amount and period; here only the shape.
 */
static int parse_budget(json_t **out, const char *val, struct ty_err *err)
{
	const char *slash = strchr(val, '/');
	char amount[64];
	json_t *a = NULL;
	int rc;

	*out = NULL;
	if (!strcmp(val, "none")) {
		*out = json_null();
		return 0;
	}
	if (!slash || (size_t)(slash - val) >= sizeof(amount) || !slash[1])
		return ty_err_set(err, TY_ECONFIG,
				  "--budget must be AMOUNT/PERIOD (e.g. 1000/month; period day, "
				  "week or month) or none, not '%.40s'",
				  val);
	memcpy(amount, val, (size_t)(slash - val));
	amount[slash - val] = '\0';
	if ((rc = parse_number(&a, amount, "--budget's amount", err)))
		return rc;
	if (!(*out = json_pack("{s:o, s:s}", "amount", a, "period", slash + 1)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

/* Fill body from the flags given; "none" clears a limit or the cohort. */
static int team_body(json_t *body, const struct team_flags *f, struct ty_err *err)
{
	json_t *v = NULL;
	int rc;

	if (f->nominal) {
		if ((rc = parse_none_or_int(&v, f->nominal, "--nominal-gpus", err)))
			return rc;
		if (json_is_null(v)) {
			json_decref(v);
			return ty_err_set(err, TY_ECONFIG, "--nominal-gpus must be an integer");
		}
		json_object_set_new(body, "nominal_gpus", v);
	}
	if (f->borrowing) {
		if ((rc = parse_none_or_int(&v, f->borrowing, "--borrowing-limit", err)))
			return rc;
		json_object_set_new(body, "borrowing_limit_gpus", v);
	}
	if (f->lending) {
		if ((rc = parse_none_or_int(&v, f->lending, "--lending-limit", err)))
			return rc;
		json_object_set_new(body, "lending_limit_gpus", v);
	}
	if (f->cohort) {
		v = strcmp(f->cohort, "none") == 0 ? json_null() : json_string(f->cohort);
		if (!v)
			return ty_err_set(err, TY_ECONFIG, "--cohort is not valid UTF-8");
		json_object_set_new(body, "cohort", v);
	}
	if (f->weight) {
		if ((rc = parse_number(&v, f->weight, "--weight", err)))
			return rc;
		json_object_set_new(body, "weight", v);
	}
	if (f->max_cpus) {
		if ((rc = parse_none_or_int(&v, f->max_cpus, "--max-cpus", err)))
			return rc;
		json_object_set_new(body, "max_cpus", v);
	}
	if (f->max_memory) {
		if ((rc = parse_none_or_int(&v, f->max_memory, "--max-memory-mb", err)))
			return rc;
		json_object_set_new(body, "max_memory_mb", v);
	}
	if (f->run_uid) {
		if ((rc = parse_none_or_int(&v, f->run_uid, "--run-uid", err)))
			return rc;
		json_object_set_new(body, "run_uid", v);
	}
	if (f->idle_alert) {
		if ((rc = parse_none_or_int(&v, f->idle_alert, "--idle-gpu-alert-seconds", err)))
			return rc;
		json_object_set_new(body, "idle_gpu_alert_seconds", v);
	}
	if (f->budget) {
		if ((rc = parse_budget(&v, f->budget, err)))
			return rc;
		json_object_set_new(body, "budget", v);
	}
	return 0;
}

static int print_team(const json_t *team)
{
	const json_t *u = json_object_get(team, "usage");
	struct cli_table t = {.ncols = 2};
	char n[64];
	int rc = 0;

	rc |= cli_table_add(&t, "name:");
	rc |= cli_table_add(&t, cli_json_str(team, "name", "-"));
	rc |= cli_table_add(&t, "nominal GPUs:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "nominal_gpus"));
	rc |= cli_table_add(&t, "borrowing limit:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "borrowing_limit_gpus"));
	rc |= cli_table_add(&t, "lending limit:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "lending_limit_gpus"));
	rc |= cli_table_add(&t, "cohort:");
	rc |= cli_table_add(&t, cli_json_str(team, "cohort", "-"));
	rc |= cli_table_add(&t, "weight:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "weight"));
	rc |= cli_table_add(&t, "max CPUs:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "max_cpus"));
	rc |= cli_table_add(&t, "max memory MiB:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "max_memory_mb"));
	rc |= cli_table_add(&t, "run uid:");
	rc |= cli_table_addf(&t, "%s", json_is_integer(json_object_get(team, "run_uid"))
					   ? cli_json_num(n, sizeof(n), team, "run_uid")
					   : "the scheduler's base + the team's id");
	rc |= cli_table_add(&t, "idle GPU alert:");
	if (json_is_integer(json_object_get(team, "idle_gpu_alert_seconds")))
		rc |= cli_table_addf(&t, "after %s s idle",
				     cli_json_num(n, sizeof(n), team, "idle_gpu_alert_seconds"));
	else
		rc |= cli_table_add(&t, "none");
	rc |= cli_table_add(&t, "budget:");
	if (json_is_object(json_object_get(team, "budget"))) {
		const json_t *b = json_object_get(team, "budget");

		rc |= cli_table_addf(&t, "%.2f per %s (%.2f spent since %s)",
				     json_number_value(json_object_get(b, "amount")),
				     cli_json_str(b, "period", "?"),
				     json_number_value(json_object_get(b, "spent")),
				     cli_json_str(b, "period_start", "-"));
	} else {
		rc |= cli_table_add(&t, "none");
	}
	rc |= cli_table_add(&t, "CPUs in use:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "cpus_in_use"));
	rc |= cli_table_add(&t, "memory MiB in use:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), u, "memory_mb_in_use"));
	rc |= cli_table_add(&t, "created:");
	rc |= cli_table_add(&t, cli_json_str(team, "created_at", "-"));
	rc |= cli_table_add(&t, "updated:");
	rc |= cli_table_add(&t, cli_json_str(team, "updated_at", "-"));
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	return rc ? TY_ENOMEM : 0;
}

static int teams_list(struct cli *cli, const json_t *body, struct ty_err *err)
{
	static const char *const header[] = {"NAME",	   "NOMINAL",  "BORROWING",
					     "LENDING",	   "COHORT",   "WEIGHT",
					     "MAX-CPUS",   "MAX-MEM-MB", "IDLE-ALERT-S"};
	struct cli_table t = {.ncols = 9};
	const json_t *items = json_object_get(body, "items"), *team;
	char n[64];
	size_t i;
	int rc = 0;

	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(body);
		return 0;
	}
	if (!json_is_array(items))
		return ty_err_set(err, TY_EIO, "the team list from the server has no 'items'");
	for (i = 0; i < 9; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, team) {
		rc |= cli_table_add(&t, cli_json_str(team, "name", "-"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "nominal_gpus"));
		rc |= cli_table_addf(&t, "%s",
				     cli_json_num(n, sizeof(n), team, "borrowing_limit_gpus"));
		rc |= cli_table_addf(&t, "%s",
				     cli_json_num(n, sizeof(n), team, "lending_limit_gpus"));
		rc |= cli_table_add(&t, cli_json_str(team, "cohort", "-"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "weight"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "max_cpus"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), team, "max_memory_mb"));
		rc |= cli_table_addf(&t, "%s",
				     cli_json_num(n, sizeof(n), team, "idle_gpu_alert_seconds"));
	}
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	return rc ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
}

int cli_cmd_teams(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *sub = subcommand(&argc, &argv);
	struct team_flags f = {0};
	const struct cli_opt team_opts[] = {
		{"nominal-gpus", 0, CLI_OPT_STR, &f.nominal},
		{"borrowing-limit", 0, CLI_OPT_STR, &f.borrowing},
		{"lending-limit", 0, CLI_OPT_STR, &f.lending},
		{"cohort", 0, CLI_OPT_STR, &f.cohort},
		{"weight", 0, CLI_OPT_STR, &f.weight},
		{"max-cpus", 0, CLI_OPT_STR, &f.max_cpus},
		{"max-memory-mb", 0, CLI_OPT_STR, &f.max_memory},
		{"run-uid", 0, CLI_OPT_STR, &f.run_uid},
		{"idle-gpu-alert-seconds", 0, CLI_OPT_STR, &f.idle_alert},
		{"budget", 0, CLI_OPT_STR, &f.budget},
	};
	bool is_list = strcmp(sub, "list") == 0, is_get = strcmp(sub, "get") == 0;
	bool is_create = strcmp(sub, "create") == 0, is_update = strcmp(sub, "update") == 0;
	struct ty_buf path = TY_BUF_INIT;
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	json_t *body = NULL;
	int rc;

	if (!is_list && !is_get && !is_create && !is_update) {
		/* "jobctl teams NAME" is a likely slip for "teams get NAME" */
		return ty_err_set(err, TY_ECONFIG,
				  "unknown teams command '%.100s' (list, get, create, update)",
				  sub);
	}
	rc = cli_parse_opts(&pos, NULL, cli, argc, argv, is_create || is_update ? team_opts : NULL,
			    is_create || is_update ? sizeof(team_opts) / sizeof(team_opts[0]) : 0,
			    err);
	if (rc)
		goto out;
	if (cli->help) {
		fputs(teams_help, stdout);
		goto out;
	}
	if (is_list) {
		if (pos.n) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
			goto out;
		}
		if ((rc = cli_request(&resp, cli, "GET", "/v1/teams", NULL, NULL, 0, err)))
			goto out;
		rc = teams_list(cli, resp.body, err);
		goto out;
	}
	if (pos.n != 1) {
		rc = ty_err_set(err, TY_ECONFIG, pos.n ? "expected one team name, got %zu arguments"
						       : "missing the team name",
				pos.n);
		goto out;
	}
	if (is_create && !f.nominal) {
		rc = ty_err_set(err, TY_ECONFIG, "teams create needs --nominal-gpus");
		goto out;
	}
	if (is_update && !f.nominal && !f.borrowing && !f.lending && !f.cohort && !f.weight &&
	    !f.max_cpus && !f.max_memory && !f.run_uid && !f.idle_alert && !f.budget) {
		rc = ty_err_set(err, TY_ECONFIG, "teams update needs at least one field to change");
		goto out;
	}
	if (!(body = json_object())) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (is_create && json_object_set_new(body, "name", json_string(pos.v[0]))) {
		rc = ty_err_set(err, TY_ECONFIG, "the team name is not valid UTF-8");
		goto out;
	}
	if ((rc = team_body(body, &f, err)))
		goto out;
	if (is_create) {
		rc = cli_request(&resp, cli, "POST", "/v1/teams", body, NULL, 0, err);
	} else {
		if (ty_buf_puts(&path, "/v1/teams/") || cli_buf_escape(&path, pos.v[0])) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		rc = cli_request(&resp, cli, is_get ? "GET" : "PATCH", path.data,
				 is_get ? NULL : body, NULL, 0, err);
	}
	if (rc)
		goto out;
	if (cli->output == CLI_OUT_JSON)
		cli_print_json(resp.body);
	else if (is_get)
		rc = print_team(resp.body) ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
	else
		printf("%s team %s\n", is_create ? "created" : "updated",
		       cli_json_str(resp.body, "name", pos.v[0]));
out:
	json_decref(body);
	cli_resp_free(&resp);
	cli_strv_free(&pos);
	ty_buf_free(&path);
	return rc;
}

static int tokens_list(struct cli *cli, const json_t *body, struct ty_err *err)
{
	static const char *const header[] = {"ID", "NAME", "ROLE", "TEAM", "CREATED", "REVOKED"};
	struct cli_table t = {.ncols = 6};
	const json_t *items = json_object_get(body, "items"), *tok;
	char n[32];
	size_t i;
	int rc = 0;

	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(body);
		return 0;
	}
	if (!json_is_array(items))
		return ty_err_set(err, TY_EIO, "the token list from the server has no 'items'");
	for (i = 0; i < 6; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, tok) {
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), tok, "id"));
		rc |= cli_table_add(&t, cli_json_str(tok, "name", "-"));
		rc |= cli_table_add(&t, cli_json_str(tok, "role", "-"));
		rc |= cli_table_add(&t, cli_json_str(tok, "team", "-"));
		rc |= cli_table_add(&t, cli_json_str(tok, "created_at", "-"));
		rc |= cli_table_add(&t, cli_json_str(tok, "revoked_at", "-"));
	}
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	return rc ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
}

int cli_cmd_tokens(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *sub = subcommand(&argc, &argv);
	const char *name = NULL, *role = NULL, *team = NULL;
	const struct cli_opt create_opts[] = {
		{"name", 0, CLI_OPT_STR, &name},
		{"role", 0, CLI_OPT_STR, &role},
		{"team", 0, CLI_OPT_STR, &team},
	};
	bool is_list = strcmp(sub, "list") == 0, is_create = strcmp(sub, "create") == 0;
	bool is_revoke = strcmp(sub, "revoke") == 0;
	struct ty_buf path = TY_BUF_INIT;
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	json_t *body = NULL;
	long long id;
	int rc;

	if (!is_list && !is_create && !is_revoke)
		return ty_err_set(err, TY_ECONFIG,
				  "unknown tokens command '%.100s' (create, list, revoke)", sub);
	rc = cli_parse_opts(&pos, NULL, cli, argc, argv, is_create ? create_opts : NULL,
			    is_create ? sizeof(create_opts) / sizeof(create_opts[0]) : 0, err);
	if (rc)
		goto out;
	if (cli->help) {
		fputs(tokens_help, stdout);
		goto out;
	}
	if (is_revoke) {
		if (pos.n != 1) {
			rc = ty_err_set(err, TY_ECONFIG,
					pos.n ? "expected one token id, got %zu arguments"
					      : "missing the token id",
					pos.n);
			goto out;
		}
		if ((rc = cli_parse_id(&id, pos.v[0], "the token id", err)))
			goto out;
		if (ty_buf_printf(&path, "/v1/tokens/%lld", id)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		if ((rc = cli_request(&resp, cli, "DELETE", path.data, NULL, NULL, 0, err)))
			goto out;
		if (cli->output == CLI_OUT_JSON)
			printf("{\n  \"id\": %lld,\n  \"revoked\": true\n}\n", id);
		else
			printf("revoked token %lld\n", id);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
		goto out;
	}
	if (is_list) {
		if ((rc = cli_request(&resp, cli, "GET", "/v1/tokens", NULL, NULL, 0, err)))
			goto out;
		rc = tokens_list(cli, resp.body, err);
		goto out;
	}
	if (!name || !role) {
		rc = ty_err_set(err, TY_ECONFIG, "tokens create needs --name and --role");
		goto out;
	}
	if (!(body = json_object()) || json_object_set_new(body, "name", json_string(name)) ||
	    json_object_set_new(body, "role", json_string(role)) ||
	    (team && json_object_set_new(body, "team", json_string(team)))) {
		rc = ty_err_set(err, TY_ECONFIG, "--name, --role and --team must be valid UTF-8");
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "POST", "/v1/tokens", body, NULL, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
	} else {
		/* the secret alone on stdout, so TOKEN=$(jobctl tokens create ...) works */
		printf("%s\n", cli_json_str(resp.body, "token", ""));
		fprintf(stderr, "created token %s '%s' (%s%s%s); it is shown only this once\n",
			cli_json_num((char[32]){0}, 32, resp.body, "id"),
			cli_json_str(resp.body, "name", name),
			cli_json_str(resp.body, "role", role),
			cli_json_str(resp.body, "team", NULL) ? " of team " : "",
			cli_json_str(resp.body, "team", ""));
	}
out:
	json_decref(body);
	cli_resp_free(&resp);
	cli_strv_free(&pos);
	ty_buf_free(&path);
	return rc;
}
