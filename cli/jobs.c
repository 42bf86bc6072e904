/* jobctl job commands: submit, status, list, watch, cancel, stop. */
#include "cli.h"
#include "lifecycle.h"
#include "ty_json.h"
#include "ty_time.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A job file bigger than this is refused before it is sent (the server takes 1 MiB). */
#define MAX_SPEC_BYTES (16u << 20)
#define MAX_SPEC_DEPTH 32

static const char submit_help[] =
	"usage: jobctl submit [FLAGS] -- COMMAND [ARGS...]\n"
	"       jobctl submit -f job.json [FLAGS] [-- COMMAND [ARGS...]]\n"
	"\n"
	"Submit a job and print its id. -f reads a full job spec (JSON, as in\n"
	"POST /v1/jobs; '-f -' reads stdin); flags given too override its fields,\n"
	"and a command after '--' replaces its command.\n"
	"\n"
	"flags:\n"
	"  -f, --file FILE            job spec to start from\n"
	"  --team TEAM                team that owns the job (required)\n"
	"  --name NAME                job name\n"
	"  --nodes N                  number of nodes (default 1 when neither the file\n"
	"                             nor a flag gives resources)\n"
	"  --gpus-per-node G          GPUs per node (default 0)\n"
	"  --cpus-per-node C          CPUs the job needs on each node (default 1):\n"
	"                             scheduled, never over-committed on a node, and\n"
	"                             counted against the team's CPU quota\n"
	"  --memory-mb M              memory in MiB the job needs on each node (default\n"
	"                             1024): scheduled and counted like the CPUs\n"
	"  --priority-class P         high, normal (default), low or scavenger\n"
	"  --priority N               -1000..1000, higher first within the team\n"
	"  --max-runtime SECONDS      limit on the run time (default 86400)\n"
	"  --label KEY=VALUE          a label (repeatable)\n"
	"  --env NAME=VALUE           an environment variable (repeatable)\n"
	"  --launch MODE              per_gpu (default) or per_node\n"
	"  --topology LEVEL           the whole gang in one block, rack or zone\n"
	"  --idempotency-key KEY      submitting again with the same key and spec\n"
	"                             returns the job first created\n"
	"  --queue-if-unschedulable   queue it even if it can never run (no node can\n"
	"                             hold it, or more GPUs than the team can ever\n"
	"                             get); it then waits as 'cannot run: ...'\n"
	"  --what-if                  submit nothing: print when the scheduler would\n"
	"                             start it now, and the alternatives that would\n"
	"                             start sooner (fewer nodes, spot allowed, a\n"
	"                             looser topology), each with its estimate\n"
	"\n"
	"Prints 'submitted job ID (STATE)'; with -o json the job object (with\n"
	"--what-if, the answer of POST /v1/queue/what-if).\n";

static const char status_help[] =
	"usage: jobctl status [-o json] ID\n"
	"\n"
	"Show a job: state, current attempt and the failure class of the last failed\n"
	"one, team, name, resources, command and times. A pending job also shows why\n"
	"it waits and its place in the queue ('jobctl queue' shows the whole queue).\n"
	"Then one line per attempt: number, state, nodes, duration, failure class,\n"
	"the node it was blamed on and the classifier's evidence.\n"
	"'jobctl attempts ID' lists the attempts with more columns.\n";

static const char list_help[] =
	"usage: jobctl list [--team T] [--state S[,S...]] [--label KEY=VALUE] [--limit N] [--all]\n"
	"\n"
	"List jobs, newest first: id, team, name, state, nodes x GPUs per node, age.\n"
	"\n"
	"flags:\n"
	"  --team T              only jobs of team T\n"
	"  --state S[,S...]      only jobs in these states (pending, scheduled, starting,\n"
	"                        running, preempting, succeeded, failed, cancelled,\n"
	"                        stopped)\n"
	"  --label KEY=VALUE     only jobs with this label\n"
	"  --limit N             jobs per page, 1..500 (default 50)\n"
	"  --all                 follow the pages to the end\n";

static const char watch_help[] =
	"usage: jobctl watch [-o json] ID\n"
	"\n"
	"Print a job's events (one line each; with -o json one JSON object per line)\n"
	"until the job ends. Once connected, it rides out a server restart or outage\n"
	"of up to about 30 seconds.\n"
	"Exits 0 when the job succeeded or was stopped, 1 when it failed, 3 when it\n"
	"was cancelled.\n";

static const char cancel_help[] =
	"usage: jobctl cancel [-o json] ID\n"
	"\n"
	"Cancel a job. A pending job is cancelled at once; a running one is stopped\n"
	"by the scheduler. Cancelling a finished job is an error (exit 6).\n";

static const char stop_help[] =
	"usage: jobctl stop [-o json] ID\n"
	"\n"
	"Stop a job early (an HPO service pruning a trial): it ends as 'stopped', a\n"
	"success-like final state, not 'cancelled'. A pending job is stopped at once;\n"
	"a running one is stopped by the scheduler, which frees its GPUs. Stopping a\n"
	"finished job is an error (exit 6).\n";


static int read_all(struct ty_buf *b, const char *file, struct ty_err *err)
{
	bool is_stdin = strcmp(file, "-") == 0;
	FILE *f = is_stdin ? stdin : fopen(file, "r");
	char chunk[65536];
	size_t n;
	int rc = 0;

	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot open '%.200s': %s", file,
				  strerror(errno));
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (b->len + n > MAX_SPEC_BYTES) {
			rc = ty_err_set(err, TY_ETOOBIG, "'%.200s' is larger than %u bytes", file,
					MAX_SPEC_BYTES);
			break;
		}
		if (ty_buf_append(b, chunk, n)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
	}
	if (!rc && ferror(f))
		rc = ty_err_set(err, TY_ECONFIG, "cannot read '%.200s'", file);
	if (!is_stdin)
		fclose(f);
	return rc;
}

static int load_spec(json_t **out, const char *file, struct ty_err *err)
{
	struct ty_buf b = TY_BUF_INIT;
	struct ty_err perr = {0};
	json_t *spec = NULL;
	int rc;

	if ((rc = read_all(&b, file, err)))
		goto out;
	if (ty_json_parse(&spec, b.data ? b.data : "", b.len, MAX_SPEC_DEPTH, &perr)) {
		rc = ty_err_set(err, perr.code == TY_ETOOBIG ? TY_ETOOBIG : TY_EPARSE, "%.200s: %s",
				strcmp(file, "-") == 0 ? "stdin" : file, perr.msg);
		goto out;
	}
	if (!json_is_object(spec)) {
		rc = ty_err_set(err, TY_EINVAL, "%.200s: a job spec must be a JSON object, not %s",
				strcmp(file, "-") == 0 ? "stdin" : file, ty_json_type_name(spec));
		goto out;
	}
	*out = spec;
	spec = NULL;
out:
	json_decref(spec);
	ty_buf_free(&b);
	return rc;
}

/* obj[key] as an object, created when absent. */
static int child_object(json_t **out, json_t *obj, const char *key, struct ty_err *err)
{
	json_t *c = json_object_get(obj, key);

	if (!c || json_is_null(c)) {
		c = json_object();
		if (!c || json_object_set_new(obj, key, c))
			return ty_err_set(err, TY_ENOMEM, NULL);
	} else if (!json_is_object(c)) {
		return ty_err_set(err, TY_EINVAL,
				  "'%s' in the job file must be an object, not %s (invalid_field)",
				  key, ty_json_type_name(c));
	}
	*out = c;
	return 0;
}

static int set_str(json_t *obj, const char *key, const char *val, struct ty_err *err)
{
	if (!val)
		return 0;
	if (json_object_set_new(obj, key, json_string(val)))
		return ty_err_set(err, TY_EINVAL, "'%s' is not valid UTF-8", key);
	return 0;
}

static int set_int(json_t *obj, const char *key, const char *val, const char *flag,
		   struct ty_err *err)
{
	long long v;
	int rc;

	if (!val)
		return 0;
	if ((rc = cli_parse_int(&v, val, LLONG_MIN, LLONG_MAX, flag, err)))
		return rc;
	if (json_object_set_new(obj, key, json_integer(v)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

/* Merge "KEY=VALUE" flags into obj[key]. */
static int set_pairs(json_t *spec, const char *key, const struct cli_strv *pairs,
		     const char *flag, struct ty_err *err)
{
	json_t *obj;
	int rc;

	if (!pairs->n)
		return 0;
	if ((rc = child_object(&obj, spec, key, err)))
		return rc;
	for (size_t i = 0; i < pairs->n; i++) {
		const char *eq = strchr(pairs->v[i], '=');
		char *k;

		if (!eq)
			return ty_err_set(err, TY_ECONFIG, "%s must be KEY=VALUE, not '%.100s'",
					  flag, pairs->v[i]);
		if (!(k = strndup(pairs->v[i], (size_t)(eq - pairs->v[i]))))
			return ty_err_set(err, TY_ENOMEM, NULL);
		rc = json_object_set_new(obj, k, json_string(eq + 1));
		free(k);
		if (rc)
			return ty_err_set(err, TY_EINVAL, "%s '%.100s' is not valid UTF-8", flag,
					  pairs->v[i]);
	}
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

static long long job_id(const json_t *job)
{
	return (long long)json_integer_value(json_object_get(job, "id"));
}

/* One estimate of a what-if answer: "LABEL: WHEN" and, when it waits, why. */
static void what_if_line(const char *indent, const char *label, const json_t *e)
{
	char when[512];
	const char *reason = cli_json_str(e, "reason", NULL);

	if (json_is_true(json_object_get(e, "starts_now")))
		snprintf(when, sizeof(when), "now");
	else
		cli_estimate_text(when, sizeof(when), e, false);
	printf("%s%s: %s\n", indent, label, when);
	if (reason && !json_is_true(json_object_get(e, "starts_now")))
		printf("%s  %s\n", indent, reason);
}

/* POST /v1/queue/what-if with spec, printed (docs/cli.md, "What-if"). */
static int print_what_if(struct cli *cli, json_t *spec, struct ty_err *err)
{
	struct cli_resp resp = {0};
	const json_t *alts, *a;
	size_t k;
	int rc;

	if ((rc = cli_request(&resp, cli, "POST", "/v1/queue/what-if", spec, NULL, 0, err)))
		return rc;
	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
		cli_resp_free(&resp);
		return 0;
	}
	what_if_line("", "as asked", resp.body);
	alts = json_object_get(resp.body, "alternatives");
	if (json_array_size(alts) == 0)
		printf("no alternative starts sooner\n");
	else
		printf("sooner:\n");
	json_array_foreach(alts, k, a)
		what_if_line("  ", cli_json_str(a, "summary", "?"), a);
	printf("(nothing was submitted; as of %s)\n",
	       cli_json_str(resp.body, "snapshot_at", "now"));
	cli_resp_free(&resp);
	return 0;
}

int cli_cmd_submit(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *file = NULL, *team = NULL, *name = NULL, *nodes = NULL, *gpus = NULL,
		   *cpus = NULL, *mem = NULL, *pclass = NULL, *prio = NULL, *max_rt = NULL,
		   *launch = NULL, *idem = NULL, *topo = NULL;
	bool anyway = false, what_if = false;
	struct cli_strv labels = {0}, envs = {0}, pos = {0}, rest = {0};
	const struct cli_opt opts[] = {
		{"file", 'f', CLI_OPT_STR, &file},
		{"team", 0, CLI_OPT_STR, &team},
		{"name", 0, CLI_OPT_STR, &name},
		{"nodes", 0, CLI_OPT_STR, &nodes},
		{"gpus-per-node", 0, CLI_OPT_STR, &gpus},
		{"cpus-per-node", 0, CLI_OPT_STR, &cpus},
		{"memory-mb", 0, CLI_OPT_STR, &mem},
		{"priority-class", 0, CLI_OPT_STR, &pclass},
		{"priority", 0, CLI_OPT_STR, &prio},
		{"max-runtime", 0, CLI_OPT_STR, &max_rt},
		{"label", 0, CLI_OPT_LIST, &labels},
		{"env", 0, CLI_OPT_LIST, &envs},
		{"launch", 0, CLI_OPT_STR, &launch},
		{"topology", 0, CLI_OPT_STR, &topo},
		{"idempotency-key", 0, CLI_OPT_STR, &idem},
		{"queue-if-unschedulable", 0, CLI_OPT_FLAG, &anyway},
		{"what-if", 0, CLI_OPT_FLAG, &what_if},
	};
	struct cli_resp resp = {0};
	json_t *spec = NULL, *res, *cmd;
	int rc;

	if ((rc = cli_parse_opts(&pos, &rest, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(submit_help, stdout);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG,
				"unexpected argument '%.100s' (the job's command goes after '--')",
				pos.v[0]);
		goto out;
	}
	if (idem && !idem_key_ok(idem)) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--idempotency-key must be 1 to 255 printable ASCII characters");
		goto out;
	}
	if (file)
		rc = load_spec(&spec, file, err);
	else if (!(spec = json_object()))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	if (rc)
		goto out;

	if ((rc = set_str(spec, "team", team, err)) || (rc = set_str(spec, "name", name, err)) ||
	    (rc = set_str(spec, "priority_class", pclass, err)) ||
	    (rc = set_int(spec, "priority", prio, "--priority", err)) ||
	    (rc = set_int(spec, "max_runtime_seconds", max_rt, "--max-runtime", err)) ||
	    (rc = set_str(spec, "launch", launch, err)) ||
	    (rc = set_pairs(spec, "labels", &labels, "--label", err)) ||
	    (rc = set_pairs(spec, "env", &envs, "--env", err)))
		goto out;
	if (anyway && json_object_set_new(spec, "queue_if_unschedulable", json_true())) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (topo && ((rc = child_object(&res, spec, "topology", err)) ||
		     (rc = set_str(res, "required", topo, err))))
		goto out;
	/* the API wants resources stated; a bare submit means one node */
	if (!nodes && !json_object_get(spec, "resources"))
		nodes = "1";
	if (nodes || gpus || cpus || mem) {
		if ((rc = child_object(&res, spec, "resources", err)) ||
		    (rc = set_int(res, "nodes", nodes, "--nodes", err)) ||
		    (rc = set_int(res, "gpus_per_node", gpus, "--gpus-per-node", err)) ||
		    (rc = set_int(res, "cpus_per_node", cpus, "--cpus-per-node", err)) ||
		    (rc = set_int(res, "memory_mb_per_node", mem, "--memory-mb", err)))
			goto out;
	}
	if (rest.n) {
		if (!(cmd = json_array()) || json_object_set_new(spec, "command", cmd)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		for (size_t i = 0; i < rest.n; i++)
			if (json_array_append_new(cmd, json_string(rest.v[i]))) {
				rc = ty_err_set(err, TY_EINVAL,
						"command argument %zu is not valid UTF-8", i + 1);
				goto out;
			}
	}

	if (what_if && idem) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--what-if submits nothing: --idempotency-key has no use with it");
		goto out;
	}
	if (what_if) {
		rc = print_what_if(cli, spec, err);
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "POST", "/v1/jobs", spec, idem, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON)
		cli_print_json(resp.body);
	else if (resp.replayed)
		printf("job %lld was already submitted with this idempotency key (%s)\n",
		       job_id(resp.body), cli_json_str(resp.body, "state", "?"));
	else
		printf("submitted job %lld (%s)\n", job_id(resp.body),
		       cli_json_str(resp.body, "state", "?"));
out:
	cli_resp_free(&resp);
	json_decref(spec);
	cli_strv_free(&labels);
	cli_strv_free(&envs);
	cli_strv_free(&pos);
	cli_strv_free(&rest);
	return rc;
}

/* Parse "COMMAND [opts] ID" with no command flags; *id gets the id. */
static int parse_id_only(long long *id, struct cli *cli, int argc, char **argv, const char *help,
			 struct ty_err *err)
{
	struct cli_strv pos = {0};
	int rc;

	*id = 0;
	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, NULL, 0, err)))
		goto out;
	if (cli->help) {
		fputs(help, stdout);
		goto out;
	}
	if (pos.n != 1)
		rc = ty_err_set(err, TY_ECONFIG, pos.n ? "expected one job id, got %zu arguments"
						       : "missing the job id",
				pos.n);
	else
		rc = cli_parse_id(id, pos.v[0], "the job id", err);
out:
	cli_strv_free(&pos);
	return rc;
}

static int job_path(struct ty_buf *b, long long id, const char *suffix, struct ty_err *err)
{
	if (ty_buf_printf(b, "/v1/jobs/%lld%s", id, suffix))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

/* Shell-like rendering of a command array, quoting what needs it. */
static int format_command(struct ty_buf *b, const json_t *cmd)
{
	size_t i;
	json_t *a;
	int rc = 0;

	json_array_foreach(cmd, i, a) {
		const char *s = json_string_value(a);

		if (!s)
			continue;
		if (i)
			rc |= ty_buf_puts(b, " ");
		if (*s && !s[strcspn(s, " \t\n'\"\\$`!*?&;|<>(){}[]#~")]) {
			rc |= ty_buf_puts(b, s);
			continue;
		}
		rc |= ty_buf_puts(b, "'");
		for (; *s; s++)
			rc |= *s == '\'' ? ty_buf_puts(b, "'\\''") : ty_buf_append(b, s, 1);
		rc |= ty_buf_puts(b, "'");
	}
	return rc ? TY_ENOMEM : 0;
}

static int format_pairs(struct ty_buf *b, const json_t *obj)
{
	const char *k;
	json_t *v;
	int rc = 0;

	json_object_foreach((json_t *)obj, k, v) {
		if (b->len)
			rc |= ty_buf_puts(b, ", ");
		rc |= ty_buf_printf(b, "%s=%s", k, json_is_string(v) ? json_string_value(v) : "?");
	}
	return rc ? TY_ENOMEM : 0;
}

static int print_job(const json_t *job)
{
	const json_t *spec = json_object_get(job, "spec"),
		     *res = json_object_get(spec, "resources"),
		     *goodput = json_object_get(job, "goodput");
	const char *state = cli_json_str(job, "state", "?"), *reason;
	struct cli_table t = {.ncols = 2};
	struct ty_buf cmd = TY_BUF_INIT, labels = TY_BUF_INIT, env = TY_BUF_INIT;
	char n1[32], n2[32], n3[32], n4[32];
	int rc = 0;

	reason = cli_json_str(job, "pending_reason", NULL);
	rc |= format_command(&cmd, json_object_get(spec, "command"));
	rc |= format_pairs(&labels, json_object_get(spec, "labels"));
	rc |= format_pairs(&env, json_object_get(spec, "env"));
	rc |= cli_table_add(&t, "id:");
	rc |= cli_table_addf(&t, "%lld", job_id(job));
	rc |= cli_table_add(&t, "team:");
	rc |= cli_table_add(&t, cli_json_str(job, "team", "-"));
	rc |= cli_table_add(&t, "name:");
	rc |= cli_table_add(&t, cli_json_str(job, "name", "-"));
	rc |= cli_table_add(&t, "state:");
	if (json_is_true(json_object_get(job, "cancel_requested")) && !proto_job_state_terminal(state))
		rc |= cli_table_addf(&t, "%s (cancel requested)", state);
	else
		rc |= cli_table_add(&t, state);
	if (reason) {
		rc |= cli_table_add(&t, "reason:");
		rc |= cli_table_add(&t, reason);
	}
	if (strcmp(state, "pending") == 0) {
		rc |= cli_table_add(&t, "queue position:");
		if (json_is_integer(json_object_get(job, "queue_position")))
			rc |= cli_table_addf(&t, "%s",
					     cli_json_num(n1, sizeof(n1), job, "queue_position"));
		else
			rc |= cli_table_add(&t, "- (not placed yet)");
		if (cli_json_str(job, "reserved_until", NULL)) {
			rc |= cli_table_add(&t, "reserved from:");
			rc |= cli_table_add(&t, cli_json_str(job, "reserved_until", NULL));
		}
		if (json_object_get(job, "estimate")) {
			char est[512];

			cli_estimate_text(est, sizeof(est), job, false);
			rc |= cli_table_add(&t, "estimated start:");
			rc |= cli_table_addf(&t, "%s", est);
		}
	}
	if (json_integer_value(json_object_get(job, "preemptions")) > 0) {
		rc |= cli_table_add(&t, "preemptions:");
		rc |= cli_table_addf(&t, "%s", cli_json_num(n1, sizeof(n1), job, "preemptions"));
	}
	rc |= cli_table_add(&t, "attempt:");
	rc |= cli_table_addf(&t, "%s", cli_json_num(n1, sizeof(n1), job, "attempt"));
	rc |= cli_table_add(&t, "failure class:");
	rc |= cli_table_add(&t, cli_json_str(job, "failure_class", "-"));
	if (json_is_number(json_object_get(goodput, "ratio"))) {
		/* the effective training time ratio, over the attempts that ended */
		rc |= cli_table_add(&t, "goodput:");
		rc |= cli_table_addf(
		    &t, "%.1f%% (useful %.0f s of %.0f s since the first start)",
		    100 * json_number_value(json_object_get(goodput, "ratio")),
		    json_number_value(json_object_get(goodput, "useful_seconds")),
		    json_number_value(json_object_get(goodput, "wall_seconds")));
	}
	rc |= cli_table_add(&t, "resources:");
	rc |= cli_table_addf(&t, "%s node(s) x %s GPU(s), %s CPU(s), %s MiB per node",
			     cli_json_num(n1, sizeof(n1), res, "nodes"),
			     cli_json_num(n2, sizeof(n2), res, "gpus_per_node"),
			     cli_json_num(n3, sizeof(n3), res, "cpus_per_node"),
			     cli_json_num(n4, sizeof(n4), res, "memory_mb_per_node"));
	rc |= cli_table_add(&t, "priority:");
	rc |= cli_table_addf(&t, "%s, %s", cli_json_str(spec, "priority_class", "-"),
			     cli_json_num(n1, sizeof(n1), spec, "priority"));
	rc |= cli_table_add(&t, "max runtime:");
	rc |= cli_table_addf(&t, "%s s", cli_json_num(n1, sizeof(n1), spec, "max_runtime_seconds"));
	rc |= cli_table_add(&t, "launch:");
	rc |= cli_table_add(&t, cli_json_str(spec, "launch", "-"));
	rc |= cli_table_add(&t, "command:");
	rc |= cli_table_add(&t, cmd.len ? cmd.data : "-");
	rc |= cli_table_add(&t, "labels:");
	rc |= cli_table_add(&t, labels.len ? labels.data : "-");
	rc |= cli_table_add(&t, "env:");
	rc |= cli_table_add(&t, env.len ? env.data : "-");
	rc |= cli_table_add_time(&t, "created:", job, "created_at");
	rc |= cli_table_add_time(&t, "updated:", job, "updated_at");
	rc |= cli_table_add_time(&t, "finished:", job, "finished_at");
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	ty_buf_free(&cmd);
	ty_buf_free(&labels);
	ty_buf_free(&env);
	return rc ? TY_ENOMEM : 0;
}

/* "2m05s", "1h02m", "40s" from seconds. */
static void duration_text(char *buf, size_t n, double secs)
{
	long long s = secs < 0 ? 0 : (long long)(secs + 0.5);

	if (s < 60)
		snprintf(buf, n, "%llds", s);
	else if (s < 3600)
		snprintf(buf, n, "%lldm%02llds", s / 60, s % 60);
	else
		snprintf(buf, n, "%lldh%02lldm", s / 3600, s % 3600 / 60);
}

/*
 * "attempts:" and one line per attempt: "1  failed  node-a,node-b  2m00s
 * system on node-b: <evidence>".
 */
static int print_attempt_lines(const json_t *items)
{
	struct cli_table t = {.ncols = 6};
	struct ty_buf nodes = TY_BUF_INIT;
	const json_t *a;
	size_t i;
	int rc = 0;

	if (!json_array_size(items))
		return 0;
	json_array_foreach(items, i, a) {
		const json_t *n;
		size_t k;
		char num[32], dur[32];

		ty_buf_reset(&nodes);
		json_array_foreach(json_object_get(a, "nodes"), k, n)
			rc |= ty_buf_printf(&nodes, "%s%s", k ? "," : "", cli_json_str(n, "node", "?"));
		duration_text(dur, sizeof(dur),
			      json_number_value(json_object_get(a, "duration_seconds")));
		rc |= cli_table_addf(&t, "  %s", cli_json_num(num, sizeof(num), a, "attempt"));
		rc |= cli_table_add(&t, cli_json_str(a, "state", "-"));
		rc |= cli_table_addf(&t, "%s", nodes.len ? nodes.data : "-");
		rc |= cli_table_addf(&t, "%s", dur);
		if (cli_json_str(a, "blamed_node", NULL))
			rc |= cli_table_addf(&t, "%s on %s", cli_json_str(a, "failure_class", "-"),
					     cli_json_str(a, "blamed_node", "-"));
		else
			rc |= cli_table_add(&t, cli_json_str(a, "failure_class", "-"));
		rc |= cli_table_add(&t, cli_json_str(a, "evidence", "-"));
	}
	if (!rc) {
		printf("attempts:\n");
		cli_table_print(stdout, &t);
	}
	cli_table_free(&t);
	ty_buf_free(&nodes);
	return rc ? TY_ENOMEM : 0;
}

/* "2" or "0.4": a rate as people read it */
static const char *rate_text(char *buf, size_t n, double v)
{
	snprintf(buf, n, "%.3g", v);
	return buf;
}

/*
 * The newest attempt's training progress on one line (steps and step rates
 * over its ranks, the slowest), and one line per straggler verdict.
 */
static void print_progress_lines(const json_t *items)
{
	const json_t *a, *e, *last = NULL;
	size_t i, k;
	char b1[32], b2[32], b3[32], b4[32];

	json_array_foreach(items, i, a)
		if (json_array_size(json_object_get(a, "progress")))
			last = a;
	if (last) {
		long long lo = -1, hi = -1;
		double rlo = -1, rhi = -1;
		const json_t *slow = NULL;

		json_array_foreach(json_object_get(last, "progress"), k, e) {
			long long st = (long long)json_integer_value(json_object_get(e, "step"));
			const json_t *r = json_object_get(e, "steps_per_second");

			if (lo < 0 || st < lo)
				lo = st;
			if (st > hi)
				hi = st;
			if (!json_is_number(r))
				continue;
			if (rlo < 0 || json_number_value(r) < rlo) {
				rlo = json_number_value(r);
				slow = e;
			}
			if (json_number_value(r) > rhi)
				rhi = json_number_value(r);
		}
		printf("progress:  attempt %s: ", cli_json_num(b1, sizeof(b1), last, "attempt"));
		if (lo == hi)
			printf("step %lld", lo);
		else
			printf("steps %lld-%lld", lo, hi);
		printf(" on %zu rank(s)", json_array_size(json_object_get(last, "progress")));
		if (!slow)
			printf(", steps/s not known yet\n");
		else if (rlo == rhi)
			printf(", %s steps/s\n", rate_text(b2, sizeof(b2), rlo));
		else
			printf(", %s-%s steps/s, slowest rank %s on %s\n",
			       rate_text(b2, sizeof(b2), rlo), rate_text(b3, sizeof(b3), rhi),
			       cli_json_num(b1, sizeof(b1), slow, "rank"),
			       cli_json_str(slow, "node", "?"));
	}
	json_array_foreach(items, i, a)
		json_array_foreach(json_object_get(a, "stragglers"), k, e)
			printf("straggler: attempt %s: rank %s on %s at %s steps/s against the "
			       "gang's median %s\n",
			       cli_json_num(b1, sizeof(b1), a, "attempt"),
			       cli_json_num(b2, sizeof(b2), e, "rank"), cli_json_str(e, "node", "?"),
			       rate_text(b3, sizeof(b3),
					 json_number_value(json_object_get(e, "steps_per_second"))),
			       rate_text(b4, sizeof(b4),
					 json_number_value(json_object_get(e, "median"))));
}

int cli_cmd_status(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	struct cli_resp resp = {0}, att = {0};
	long long id;
	int rc;

	if ((rc = parse_id_only(&id, cli, argc, argv, status_help, err)) || cli->help)
		goto out;
	if ((rc = job_path(&path, id, "", err)) ||
	    (rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
		goto out;
	}
	if (print_job(resp.body)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	ty_buf_reset(&path);
	if ((rc = job_path(&path, id, "/attempts", err)) ||
	    (rc = cli_request(&att, cli, "GET", path.data, NULL, NULL, 0, err)))
		goto out;
	if (print_attempt_lines(json_object_get(att.body, "items")))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	else
		print_progress_lines(json_object_get(att.body, "items"));
out:
	cli_resp_free(&att);
	cli_resp_free(&resp);
	ty_buf_free(&path);
	return rc;
}

/* POST /v1/jobs/ID/<verb>: cancel or stop; done is the state it ends in. */
static int end_job(struct cli *cli, int argc, char **argv, const char *help, const char *verb,
		   const char *done, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	struct cli_resp resp = {0};
	char suffix[16];
	const char *state;
	long long id;
	int rc;

	if ((rc = parse_id_only(&id, cli, argc, argv, help, err)) || cli->help)
		goto out;
	snprintf(suffix, sizeof(suffix), "/%s", verb);
	if ((rc = job_path(&path, id, suffix, err)) ||
	    (rc = cli_request(&resp, cli, "POST", path.data, NULL, NULL, 0, err)))
		goto out;
	state = cli_json_str(resp.body, "state", "?");
	if (cli->output == CLI_OUT_JSON)
		cli_print_json(resp.body);
	else if (strcmp(state, done) == 0)
		printf("%s job %lld\n", done, id);
	else
		printf("%s requested for job %lld (%s)\n", verb, id, state);
out:
	cli_resp_free(&resp);
	ty_buf_free(&path);
	return rc;
}

int cli_cmd_cancel(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	return end_job(cli, argc, argv, cancel_help, "cancel", "cancelled", err);
}

int cli_cmd_stop(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	return end_job(cli, argc, argv, stop_help, "stop", "stopped", err);
}

static int add_job_row(struct cli_table *t, const json_t *job)
{
	const json_t *res = json_object_get(json_object_get(job, "spec"), "resources");
	char n1[32], n2[32], age[32];
	int rc = 0;

	rc |= cli_table_addf(t, "%lld", job_id(job));
	rc |= cli_table_add(t, cli_json_str(job, "team", "-"));
	rc |= cli_table_add(t, cli_json_str(job, "name", "-"));
	rc |= cli_table_add(t, cli_json_str(job, "state", "-"));
	rc |= cli_table_addf(t, "%sx%s", cli_json_num(n1, sizeof(n1), res, "nodes"),
			     cli_json_num(n2, sizeof(n2), res, "gpus_per_node"));
	rc |= cli_table_addf(t, "%s",
			     cli_age(age, sizeof(age), cli_json_str(job, "created_at", NULL)));
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_list(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *team = NULL, *state = NULL, *label = NULL, *limit = NULL;
	bool all = false;
	const struct cli_opt opts[] = {
		{"team", 0, CLI_OPT_STR, &team},   {"state", 0, CLI_OPT_STR, &state},
		{"label", 0, CLI_OPT_STR, &label}, {"limit", 0, CLI_OPT_STR, &limit},
		{"all", 0, CLI_OPT_FLAG, &all},
	};
	static const char *const header[] = {"ID", "TEAM", "NAME", "STATE", "NODESxGPUS", "AGE"};
	struct cli_strv pos = {0};
	struct ty_buf base = TY_BUF_INIT;
	long long n;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(list_help, stdout);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
		goto out;
	}
	if (limit && (rc = cli_parse_int(&n, limit, 1, 500, "--limit", err)))
		goto out;
	if (label && !strchr(label, '=')) {
		rc = ty_err_set(err, TY_ECONFIG, "--label must be KEY=VALUE, not '%.100s'", label);
		goto out;
	}
	if (ty_buf_puts(&base, "/v1/jobs") || (team && cli_buf_query(&base, "team", team)) ||
	    (state && cli_buf_query(&base, "state", state)) ||
	    (label && cli_buf_query(&base, "label", label)) ||
	    (limit && cli_buf_query(&base, "limit", limit))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	rc = cli_list_print(cli, base.data, all, "job list", "jobs", header, 6, add_job_row, err);
out:
	ty_buf_free(&base);
	cli_strv_free(&pos);
	return rc;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void print_event(const struct cli *cli, const json_t *ev)
{
	char seq[32];

	if (cli->output == CLI_OUT_JSON) {
		if (json_dumpf(ev, stdout, JSON_COMPACT) == 0)
			fputc('\n', stdout);
	} else {
		const char *msg = cli_json_str(ev, "message", NULL);

		printf("%s  #%s  %s  %s%s%s\n", cli_json_str(ev, "time", "-"),
		       cli_json_num(seq, sizeof(seq), ev, "seq"), cli_json_str(ev, "type", "-"),
		       cli_json_str(ev, "state", "-"), msg && *msg ? "  " : "", msg ? msg : "");
	}
	/* a watch is often piped into something that wants each line now */
	fflush(stdout);
}

int cli_cmd_watch(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	struct cli_resp resp = {0};
	char *state = NULL;
	long long id, after = 0;
	int64_t down_since = -1;
	long backoff = 250;
	bool terminal = false, answered = false;
	int rc;

	if ((rc = parse_id_only(&id, cli, argc, argv, watch_help, err)) || cli->help)
		goto out;
	for (;;) {
		struct ty_err rerr = {0};
		/* once the job has ended, collect what is left without waiting */
		int wait = terminal ? 0 : CLI_WATCH_WAIT;
		const json_t *events, *ev;
		const char *st;
		size_t i;

		ty_buf_reset(&path);
		if (ty_buf_printf(&path, "/v1/jobs/%lld/events?after=%lld&wait=%d", id, after,
				  wait)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		cli_resp_free(&resp);
		rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL,
				 wait + (cli->timeout_s > 0 ? cli->timeout_s : CLI_DEFAULT_TIMEOUT),
				 &rerr);
		if (rc) {
			int64_t now = ty_mono_ms();

			/* ride out a restart, but fail fast on a server never reached */
			if (!cli_is_transient(rc) || !answered ||
			    (down_since >= 0 && now - down_since >= CLI_WATCH_RETRY_MS)) {
				ty_err_set(err, rc, "%s", rerr.msg);
				goto out;
			}
			if (down_since < 0) {
				down_since = now;
				fprintf(stderr, "jobctl: %s; retrying for up to %d s\n", rerr.msg,
					CLI_WATCH_RETRY_MS / 1000);
			}
			sleep_ms(backoff);
			backoff = backoff * 2 > 4000 ? 4000 : backoff * 2;
			continue;
		}
		answered = true;
		if (down_since >= 0 && cli->output != CLI_OUT_JSON)
			fputs("jobctl: reconnected\n", stderr);
		down_since = -1;
		backoff = 250;

		events = json_object_get(resp.body, "events");
		if (!json_is_array(events)) {
			rc = ty_err_set(err, TY_EIO,
					"the event list from the server has no 'events'");
			goto out;
		}
		json_array_foreach(events, i, ev) {
			json_int_t seq = json_integer_value(json_object_get(ev, "seq"));

			/* an event already shown (a replayed page) is not shown twice */
			if (seq && seq <= after)
				continue;
			print_event(cli, ev);
			if (seq > after)
				after = seq;
		}
		if (json_is_integer(json_object_get(resp.body, "next_after")) &&
		    json_integer_value(json_object_get(resp.body, "next_after")) > after)
			after = json_integer_value(json_object_get(resp.body, "next_after"));
		st = cli_json_str(resp.body, "state", NULL);
		if (!st && json_array_size(events))
			st = cli_json_str(json_array_get(events, json_array_size(events) - 1),
					  "state", NULL);
		if (st) {
			free(state);
			if (!(state = strdup(st))) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
		}
		if (terminal && !json_array_size(events))
			break;
		terminal = proto_job_state_terminal(state);
	}

	if (cli->output != CLI_OUT_JSON)
		printf("job %lld %s\n", id, state);
	if (strcmp(state, "failed") == 0)
		cli->exit_status = CLI_EXIT_JOB_FAILED;
	else if (strcmp(state, "cancelled") == 0)
		cli->exit_status = CLI_EXIT_JOB_CANCELLED;
out:
	free(state);
	cli_resp_free(&resp);
	ty_buf_free(&path);
	return rc;
}
