/* jobctl sweep: submit, status, cancel and list sweeps (POST/GET /v1/sweeps). */
#include "cli.h"
#include "ty_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SWEEP_BYTES (16u << 20)
#define MAX_SWEEP_DEPTH 32

static const char sweep_help[] =
	"usage: jobctl sweep submit -f FILE [--team T] [--name N] [--idempotency-key KEY]\n"
	"       jobctl sweep status ID\n"
	"       jobctl sweep cancel ID\n"
	"       jobctl sweep list [--team T] [--limit N] [--all]\n"
	"\n"
	"A sweep runs a job template once per parameter set (docs/api.md \"Sweeps\").\n"
	"submit reads the sweep body (JSON: team, name, template and one of trials,\n"
	"grid or random; '-f -' reads stdin), sets --team and --name over it and\n"
	"prints the sweep id and its trial jobs. status shows the sweep and every\n"
	"trial (index, job, state, parameters). cancel cancels every unfinished\n"
	"trial. list shows the sweeps the token sees, newest first.\n"
	"\n"
	"flags:\n"
	"  -f, --file FILE            sweep body to submit\n"
	"  --team T                   the team (submit: overrides the file; list: filter)\n"
	"  --name N                   the sweep's name (submit)\n"
	"  --idempotency-key KEY      retry-safe submit: the same key and body give the\n"
	"                             same sweep\n"
	"  --limit N                  sweeps per page, 1..500 (default 50; list)\n"
	"  --all                      follow the pages to the end (list)\n";

static int load_body(json_t **out, const char *file, struct ty_err *err)
{
	bool is_stdin = strcmp(file, "-") == 0;
	const char *shown = is_stdin ? "stdin" : file;
	FILE *f = is_stdin ? stdin : fopen(file, "r");
	struct ty_buf b = TY_BUF_INIT;
	struct ty_err perr = {0};
	char chunk[65536];
	json_t *v = NULL;
	size_t n;
	int rc = 0;

	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot open '%.200s': %s", file,
				  strerror(errno));
	while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b.len + n > MAX_SWEEP_BYTES)
			rc = ty_err_set(err, TY_ETOOBIG, "'%.200s' is larger than %u bytes", shown,
					MAX_SWEEP_BYTES);
		else if (ty_buf_append(&b, chunk, n))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
	if (!rc && ferror(f))
		rc = ty_err_set(err, TY_ECONFIG, "cannot read '%.200s'", shown);
	if (!is_stdin)
		fclose(f);
	if (!rc && ty_json_parse(&v, b.data ? b.data : "", b.len, MAX_SWEEP_DEPTH, &perr))
		rc = ty_err_set(err, perr.code == TY_ETOOBIG ? TY_ETOOBIG : TY_EPARSE, "%.200s: %s",
				shown, perr.msg);
	if (!rc && !json_is_object(v))
		rc = ty_err_set(err, TY_EINVAL, "%.200s: a sweep must be a JSON object, not %s",
				shown, ty_json_type_name(v));
	ty_buf_free(&b);
	if (rc) {
		json_decref(v);
		return rc;
	}
	*out = v;
	return 0;
}

static bool idem_key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n < 1 || n > 255)
		return false;
	for (; *k; k++)
		if (*k < 0x20 || *k > 0x7e)
			return false;
	return true;
}

static int set_str(json_t *obj, const char *key, const char *val, struct ty_err *err)
{
	if (!val)
		return 0;
	if (json_object_set_new(obj, key, json_string(val)))
		return ty_err_set(err, TY_EINVAL, "%s '%.100s' is not valid UTF-8", key, val);
	return 0;
}

/* A scalar as text; a real in the shortest form that reads back the same. */
static char *value_text(const json_t *v)
{
	char buf[64];

	if (!json_is_real(v))
		return json_dumps(v, JSON_ENCODE_ANY);
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, json_real_value(v));
		if (strtod(buf, NULL) == json_real_value(v))
			break;
	}
	return strdup(buf);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "k=v k=v" of a trial's parameters, keys in byte order. */
static char *params_text(const json_t *params)
{
	struct ty_buf b = TY_BUF_INIT;
	const char **keys = calloc(json_object_size(params) + 1, sizeof(*keys));
	const char *k;
	json_t *v;
	size_t n = 0;
	char *out = NULL;

	if (!keys)
		return NULL;
	json_object_foreach((json_t *)params, k, v)
		keys[n++] = k;
	qsort(keys, n, sizeof(*keys), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char *t = value_text(json_object_get(params, keys[i]));

		ty_buf_printf(&b, "%s%s=%s", i ? " " : "", keys[i], t ? t : "?");
		free(t);
	}
	if (!b.oom)
		out = strdup(b.data ? b.data : "");
	ty_buf_free(&b);
	free(keys);
	return out;
}

static int print_sweep(const json_t *s)
{
	struct cli_table t = {.ncols = 2}, tr = {.ncols = 4};
	const json_t *obj = json_object_get(s, "objective"), *trial;
	char n[64], m[64];
	size_t i;
	int rc = 0;

	rc |= cli_table_add(&t, "sweep:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), s, "id"));
	rc |= cli_table_add(&t, "team:");
	rc |= cli_table_add(&t, cli_json_str(s, "team", "-"));
	rc |= cli_table_add(&t, "name:");
	rc |= cli_table_add(&t, cli_json_str(s, "name", "-"));
	rc |= cli_table_add(&t, "state:");
	rc |= cli_table_add(&t, cli_json_str(s, "state", "-"));
	rc |= cli_table_add(&t, "trials:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), s, "trial_count"));
	rc |= cli_table_add(&t, "max concurrent:");
	rc |= cli_table_addf(&t, "%s", json_is_null(json_object_get(s, "max_concurrent"))
					       ? "no limit"
					       : cli_json_num(m, sizeof(m), s, "max_concurrent"));
	rc |= cli_table_add(&t, "objective:");
	if (json_is_object(obj))
		rc |= cli_table_addf(&t, "%s %s", cli_json_str(obj, "direction", "-"),
				     cli_json_str(obj, "metric", "-"));
	else
		rc |= cli_table_add(&t, "-");
	rc |= cli_table_add_time(&t, "created:", s, "created_at");
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	rc |= cli_table_add(&tr, "INDEX");
	rc |= cli_table_add(&tr, "JOB");
	rc |= cli_table_add(&tr, "STATE");
	rc |= cli_table_add(&tr, "PARAMS");
	json_array_foreach(json_object_get(s, "trials"), i, trial) {
		char *p = params_text(json_object_get(trial, "params"));

		rc |= cli_table_addf(&tr, "%s", cli_json_num(n, sizeof(n), trial, "index"));
		rc |= cli_table_addf(&tr, "%s", cli_json_num(m, sizeof(m), trial, "job_id"));
		rc |= cli_table_addf(&tr, "%s%s", cli_json_str(trial, "state", "-"),
				     json_is_true(json_object_get(trial, "cancel_requested"))
					     ? " (cancel requested)"
					     : "");
		rc |= p ? cli_table_addf(&tr, "%s", p) : TY_ENOMEM;
		free(p);
	}
	if (!rc) {
		putchar('\n');
		cli_table_print(stdout, &tr);
	}
	cli_table_free(&tr);
	return rc ? TY_ENOMEM : 0;
}

static int add_sweep_row(struct cli_table *t, const json_t *s)
{
	char id[32], n[32], age[32];
	int rc = 0;

	rc |= cli_table_addf(t, "%s", cli_json_num(id, sizeof(id), s, "id"));
	rc |= cli_table_add(t, cli_json_str(s, "team", "-"));
	rc |= cli_table_add(t, cli_json_str(s, "name", "-"));
	rc |= cli_table_add(t, cli_json_str(s, "state", "-"));
	rc |= cli_table_addf(t, "%s", cli_json_num(n, sizeof(n), s, "trial_count"));
	rc |= cli_table_addf(t, "%s",
			     cli_age(age, sizeof(age), cli_json_str(s, "created_at", NULL)));
	return rc ? TY_ENOMEM : 0;
}

static int sweep_path(struct ty_buf *b, const struct cli_strv *pos, const char *suffix,
		      struct ty_err *err)
{
	long long id;
	int rc;

	if (pos->n != 2)
		return ty_err_set(err, TY_ECONFIG,
				  pos->n > 2 ? "expected one sweep id, got %zu arguments"
					     : "missing the sweep id",
				  pos->n - 1);
	if ((rc = cli_parse_id(&id, pos->v[1], "the sweep id", err)))
		return rc;
	if (ty_buf_printf(b, "/v1/sweeps/%lld%s", id, suffix))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

int cli_cmd_sweep(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *file = NULL, *team = NULL, *name = NULL, *idem = NULL, *limit_s = NULL;
	bool all = false;
	const struct cli_opt opts[] = {
		{"file", 'f', CLI_OPT_STR, &file},
		{"team", 0, CLI_OPT_STR, &team},
		{"name", 0, CLI_OPT_STR, &name},
		{"idempotency-key", 0, CLI_OPT_STR, &idem},
		{"limit", 0, CLI_OPT_STR, &limit_s},
		{"all", 0, CLI_OPT_FLAG, &all},
	};
	static const char *const header[] = {"ID", "TEAM", "NAME", "STATE", "TRIALS", "AGE"};
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	struct ty_buf path = TY_BUF_INIT;
	json_t *body = NULL;
	const char *sub;
	long long n;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(sweep_help, stdout);
		goto out;
	}
	if (!pos.n) {
		rc = ty_err_set(err, TY_ECONFIG,
				"missing the sweep command (submit, status, cancel, list)");
		goto out;
	}
	sub = pos.v[0];
	if (strcmp(sub, "submit") && strcmp(sub, "status") && strcmp(sub, "cancel") &&
	    strcmp(sub, "list")) {
		rc = ty_err_set(err, TY_ECONFIG,
				"unknown sweep command '%.100s' (submit, status, cancel, list)", sub);
		goto out;
	}
	if (strcmp(sub, "submit") && (file || name || idem)) {
		rc = ty_err_set(err, TY_ECONFIG,
				"-f, --name and --idempotency-key are for 'sweep submit'");
		goto out;
	}
	if (strcmp(sub, "list") && (limit_s || all)) {
		rc = ty_err_set(err, TY_ECONFIG, "--limit and --all are for 'sweep list'");
		goto out;
	}
	if (team && strcmp(sub, "submit") && strcmp(sub, "list")) {
		rc = ty_err_set(err, TY_ECONFIG, "--team is for 'sweep submit' and 'sweep list'");
		goto out;
	}

	if (!strcmp(sub, "submit")) {
		if (pos.n > 1) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[1]);
			goto out;
		}
		if (!file) {
			rc = ty_err_set(err, TY_ECONFIG, "'sweep submit' needs -f FILE");
			goto out;
		}
		if (idem && !idem_key_ok(idem)) {
			rc = ty_err_set(err, TY_ECONFIG,
					"--idempotency-key must be 1 to 255 printable ASCII "
					"characters");
			goto out;
		}
		if ((rc = load_body(&body, file, err)) ||
		    (rc = set_str(body, "team", team, err)) ||
		    (rc = set_str(body, "name", name, err)) ||
		    (rc = cli_request(&resp, cli, "POST", "/v1/sweeps", body, idem, 0, err)))
			goto out;
		if (cli->output == CLI_OUT_JSON) {
			cli_print_json(resp.body);
		} else {
			const json_t *tr = json_object_get(resp.body, "trials");
			char id[32], a[32], z[32];

			printf("sweep %s: %zu trials, jobs %s to %s%s\n",
			       cli_json_num(id, sizeof(id), resp.body, "id"), json_array_size(tr),
			       cli_json_num(a, sizeof(a), json_array_get(tr, 0), "job_id"),
			       cli_json_num(z, sizeof(z),
					    json_array_get(tr, json_array_size(tr) - 1), "job_id"),
			       resp.replayed ? " (already submitted with this key)" : "");
		}
	} else if (!strcmp(sub, "list")) {
		if (pos.n > 1) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[1]);
			goto out;
		}
		if (limit_s && (rc = cli_parse_int(&n, limit_s, 1, 500, "--limit", err)))
			goto out;
		if (ty_buf_puts(&path, "/v1/sweeps") ||
		    (team && cli_buf_query(&path, "team", team)) ||
		    (limit_s && cli_buf_query(&path, "limit", limit_s))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		rc = cli_list_print(cli, path.data, all, "sweep list", "sweeps", header, 6,
				    add_sweep_row, err);
	} else if (!strcmp(sub, "status")) {
		if ((rc = sweep_path(&path, &pos, "", err)) ||
		    (rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL, 0, err)))
			goto out;
		if (cli->output == CLI_OUT_JSON)
			cli_print_json(resp.body);
		else if (print_sweep(resp.body))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	} else {
		const json_t *trial, *st;
		size_t i, stopping = 0;
		char id[32];

		if ((rc = sweep_path(&path, &pos, "/cancel", err)) ||
		    (rc = cli_request(&resp, cli, "POST", path.data, NULL, NULL, 0, err)))
			goto out;
		json_array_foreach(json_object_get(resp.body, "trials"), i, trial)
			stopping += json_is_true(json_object_get(trial, "cancel_requested")) &&
				    strcmp(cli_json_str(trial, "state", ""), "cancelled") != 0;
		st = json_object_get(json_object_get(resp.body, "trial_states"), "cancelled");
		if (cli->output == CLI_OUT_JSON)
			cli_print_json(resp.body);
		else
			printf("cancelled sweep %s: %lld trials cancelled, %zu stopping\n",
			       cli_json_num(id, sizeof(id), resp.body, "id"),
			       (long long)json_integer_value(st), stopping);
	}
out:
	json_decref(body);
	cli_resp_free(&resp);
	ty_buf_free(&path);
	cli_strv_free(&pos);
	return rc;
}
