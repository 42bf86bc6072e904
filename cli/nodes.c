/* jobctl views of where jobs run: nodes, a job's attempts and its ranks' logs. */
#include "cli.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const char nodes_help[] =
	"usage: jobctl nodes [list] [--state S]\n"
	"       jobctl nodes get|show NODE\n"
	"       jobctl nodes drain NODE\n"
	"       jobctl nodes undrain NODE\n"
	"       jobctl nodes preempt NODE [--deadline SECONDS]\n"
	"\n"
	"List the nodes executors registered, ordered by id: id, state, address,\n"
	"GPUs free/total (free: not held by an unreleased allocation), HCAs (name:\n"
	"active/all ports), labels, failures blamed on the node since its last\n"
	"undrain (count and distinct jobs), the jobs holding GPUs there and the age\n"
	"of the last heartbeat. 'get' shows one node with the attempt of each job it\n"
	"runs, why it is drained, and the fault its executor registered: a node\n"
	"'not_ready' found fewer GPUs than it expects (--expect-gpus) and takes no\n"
	"new work until its executor registers without a fault.\n"
	"\n"
	"CONDITIONS lists what the node's health watch reports now, fatal ones first:\n"
	"the kind with its code ('xid79'), '!' when fatal (the node was drained for\n"
	"it), e.g. 'xid79!,port_down'; 'get' lists each with its GPU or port, since\n"
	"when and its evidence. After the repair an admin undrains the node.\n"
	"\n"
	"'drain' (admin) stops new work on the node: 'draining' while work still\n"
	"runs there, then 'drained'. 'undrain' (admin) makes it 'ready' again and\n"
	"forgets its failures (and ends a 'preempting' state). Both are idempotent.\n"
	"'preempt' (admin) acts as a spot interruption notice for the node: it is\n"
	"'preempting' (no new work) and the jobs running there checkpoint, are\n"
	"killed before the deadline and requeued elsewhere.\n"
	"\n"
	"flags:\n"
	"  --state S            only nodes in state S (ready, not_ready, suspect,\n"
	"                       draining, drained, preempting, lost)\n"
	"  --deadline SECONDS   'preempt': the node goes away in SECONDS, 0..3600\n"
	"                       (default 30)\n";

static const char attempts_help[] =
	"usage: jobctl attempts [-o json] JOB\n"
	"\n"
	"List a job's attempts, oldest first: attempt, state, nodes (in node rank\n"
	"order), world size, exit code, failure class, where it resumed from (the\n"
	"checkpoint's step, 'scratch', '-' when not reported), its GPUs' utilisation\n"
	"(mean/peak %) and the most memory one GPU used, as the nodes' executors\n"
	"measured it ('-' until they report, when the attempt ends), and when the\n"
	"attempt started (was placed) and ended. -o json adds each attempt's rendezvous\n"
	"address, power draw and idle GPU-seconds, per-node and per-rank details.\n";

static const char checkpoints_help[] =
	"usage: jobctl checkpoints [-o json] JOB\n"
	"\n"
	"List a job's checkpoints as the scheduler recorded them, newest step first:\n"
	"step, status (valid: the node of rank 0 hashed every file; torn: no\n"
	"manifest yet; corrupt: a file differs from the manifest; rejected: a node\n"
	"resuming from it found its copy differs; deleted: retention removed it),\n"
	"the first 12 digits of the manifest's SHA-256, size, files, the node that\n"
	"verified it, the attempt, when, and why it is not valid (or which node\n"
	"reported another digest). NEXT marks the one the next attempt resumes\n"
	"from: the newest valid one; with none, or once the job has ended, there is\n"
	"no resume point. -o json prints the API's document (full digests and\n"
	"paths).\n";

static const char logs_help[] =
	"usage: jobctl logs [--rank R] [--attempt A] [--tail N] JOB\n"
	"\n"
	"Print the last lines of one rank's stdout and stderr, as is (-o has no\n"
	"effect). The log stays on the node that ran the rank; the API fetches it\n"
	"from there.\n"
	"\n"
	"flags:\n"
	"  --rank R       the rank, 0 or more (default 0)\n"
	"  --attempt A    the attempt, 1 or more (default the job's current one)\n"
	"  --tail N       how many lines, 1..10000 (default 100)\n"
	"\n"
	"Exits 4 when the job or the rank does not exist (yet), 7 when the node\n"
	"holding the log does not answer (logs_unavailable).\n";

/* ---- nodes ---- */

/* "42, 43" from a node's running list; repeated jobs (two attempts) shown once. */
static int format_jobs(struct ty_buf *b, const json_t *running)
{
	json_int_t prev = -1;
	const json_t *r;
	size_t i;
	int rc = 0;

	json_array_foreach(running, i, r) {
		json_int_t job = json_integer_value(json_object_get(r, "job"));

		if (job == prev)
			continue;
		rc |= ty_buf_printf(b, "%s%" JSON_INTEGER_FORMAT, b->len ? "," : "", job);
		prev = job;
	}
	return rc ? TY_ENOMEM : 0;
}

/* "job 42 (attempt 2), job 43 (attempt 1)" */
static int format_running(struct ty_buf *b, const json_t *running)
{
	const json_t *r;
	size_t i;
	int rc = 0;

	json_array_foreach(running, i, r) {
		char job[32], attempt[32];

		rc |= ty_buf_printf(b, "%sjob %s (attempt %s)", i ? ", " : "",
				    cli_json_num(job, sizeof(job), r, "job"),
				    cli_json_num(attempt, sizeof(attempt), r, "attempt"));
	}
	return rc ? TY_ENOMEM : 0;
}

/* "k=v, k2=v2"; values that are not strings as compact JSON. */
static int format_labels(struct ty_buf *b, const json_t *labels)
{
	const char *k;
	json_t *v;
	int rc = 0;

	json_object_foreach((json_t *)labels, k, v) {
		char *dumped = NULL;
		const char *shown = json_string_value(v);

		if (!shown)
			shown = (dumped = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)) ? dumped : "?";
		rc |= ty_buf_printf(b, "%s%s=%s", b->len ? ", " : "", k, shown);
		free(dumped);
	}
	return rc ? TY_ENOMEM : 0;
}

/* "mlx5_0:1/1,mlx5_1:0/2": per HCA, ports in state ACTIVE / all ports. */
static int format_hcas(struct ty_buf *b, const json_t *hcas)
{
	const json_t *h, *p;
	size_t i, k;
	int rc = 0;

	json_array_foreach(hcas, i, h) {
		size_t active = 0;

		json_array_foreach(json_object_get(h, "ports"), k, p)
			active += strcmp(cli_json_str(p, "state", ""), "ACTIVE") == 0;
		rc |= ty_buf_printf(b, "%s%s:%zu/%zu", i ? "," : "", cli_json_str(h, "name", "?"),
				    active, json_array_size(json_object_get(h, "ports")));
	}
	return rc ? TY_ENOMEM : 0;
}

/* "3 (2 jobs)", or "0". */
static int format_failures(struct ty_buf *b, const json_t *failures)
{
	json_int_t count = json_integer_value(json_object_get(failures, "count"));
	json_int_t jobs = json_integer_value(json_object_get(failures, "jobs"));

	if (!count)
		return ty_buf_puts(b, "0") ? TY_ENOMEM : 0;
	return ty_buf_printf(b, "%" JSON_INTEGER_FORMAT " (%" JSON_INTEGER_FORMAT " job%s)", count,
			     jobs, jobs == 1 ? "" : "s")
		       ? TY_ENOMEM
		       : 0;
}

/* "xid79!,port_down" (at most CONDITIONS_SHOWN, then "+N"): '!' marks a fatal one. */
#define CONDITIONS_SHOWN 3
static int format_conditions_short(struct ty_buf *b, const json_t *conditions)
{
	const json_t *c;
	size_t i, n = json_array_size(conditions);
	int rc = 0;

	json_array_foreach(conditions, i, c) {
		char code[32];

		if (i == CONDITIONS_SHOWN) {
			rc |= ty_buf_printf(b, ",+%zu", n - i);
			break;
		}
		rc |= ty_buf_printf(b, "%s%s%s%s", i ? "," : "", cli_json_str(c, "kind", "?"),
				    json_is_integer(json_object_get(c, "code"))
					? cli_json_num(code, sizeof(code), c, "code")
					: "",
				    strcmp(cli_json_str(c, "severity", ""), "fatal") ? "" : "!");
	}
	return rc ? TY_ENOMEM : 0;
}

/*
 * One row per condition under the label "conditions:": "fatal xid 79 on GPU
 * 0 (GPU-...) since T (5m ago): evidence".
 */
static int add_conditions(struct cli_table *t, const json_t *conditions)
{
	const json_t *c;
	size_t i;
	int rc = 0;

	json_array_foreach(conditions, i, c) {
		struct ty_buf where = TY_BUF_INIT;
		const char *since = cli_json_str(c, "first_seen", NULL);
		char code[32], gpu[32], age[32];

		if (json_is_integer(json_object_get(c, "code")))
			rc |= ty_buf_printf(&where, " %s", cli_json_num(code, sizeof(code), c, "code"));
		if (json_is_integer(json_object_get(c, "gpu")))
			rc |= ty_buf_printf(&where, " on GPU %s%s%s%s",
					    cli_json_num(gpu, sizeof(gpu), c, "gpu"),
					    cli_json_str(c, "gpu_uuid", NULL) ? " (" : "",
					    cli_json_str(c, "gpu_uuid", ""),
					    cli_json_str(c, "gpu_uuid", NULL) ? ")" : "");
		else if (cli_json_str(c, "port", NULL))
			rc |= ty_buf_printf(&where, " on %s", cli_json_str(c, "port", ""));
		rc |= cli_table_add(t, i ? "" : "conditions:");
		rc |= cli_table_addf(t, "%s %s%s since %s (%s ago): %s",
				     cli_json_str(c, "severity", "?"), cli_json_str(c, "kind", "?"),
				     where.len ? where.data : "", since ? since : "-",
				     since ? cli_age(age, sizeof(age), since) : "?",
				     cli_json_str(c, "evidence", ""));
		ty_buf_free(&where);
	}
	return rc ? TY_ENOMEM : 0;
}

/* "k=v,k2=v2" for a table cell. */
static int format_labels_short(struct ty_buf *b, const json_t *labels)
{
	const char *k;
	json_t *v;
	int rc = 0;

	json_object_foreach((json_t *)labels, k, v) {
		rc |= ty_buf_printf(b, "%s%s=%s", b->len ? "," : "", k,
				    json_is_string(v) ? json_string_value(v) : "?");
	}
	return rc ? TY_ENOMEM : 0;
}

/* What the node's executor says isolates its jobs (docs/security.md, "Job isolation"). */
static const char *isolation_text(const char *isolation)
{
	if (!strcmp(isolation, "none"))
		return "none: jobs run on the host as the executor's user and can read, change and "
		       "stop each other's files and processes";
	return isolation; /* runc: a container per attempt, as its team's uid */
}

static int print_node(const json_t *node)
{
	struct cli_table t = {.ncols = 2};
	struct ty_buf running = TY_BUF_INIT, labels = TY_BUF_INIT, hcas = TY_BUF_INIT,
		      failures = TY_BUF_INIT;
	char free_s[32], total_s[32];
	int rc = 0;

	rc |= format_running(&running, json_object_get(node, "running"));
	rc |= format_labels(&labels, json_object_get(node, "labels"));
	rc |= cli_table_add(&t, "id:");
	rc |= cli_table_add(&t, cli_json_str(node, "id", "-"));
	rc |= cli_table_add(&t, "state:");
	rc |= cli_table_add(&t, cli_json_str(node, "state", "-"));
	rc |= cli_table_add(&t, "address:");
	rc |= cli_table_add(&t, cli_json_str(node, "address", "-"));
	rc |= cli_table_add(&t, "simulated:");
	rc |= cli_table_add(&t, json_is_true(json_object_get(node, "simulated")) ? "yes" : "no");
	if (cli_json_str(node, "isolation", NULL)) {
		rc |= cli_table_add(&t, "isolation:");
		rc |= cli_table_add(&t, isolation_text(cli_json_str(node, "isolation", "")));
	}
	rc |= cli_table_add(&t, "GPUs:");
	rc |= cli_table_addf(&t, "%s free of %s",
			     cli_json_num(free_s, sizeof(free_s), node, "gpus_free"),
			     cli_json_num(total_s, sizeof(total_s), node, "gpus_total"));
	rc |= cli_table_add(&t, "running:");
	rc |= cli_table_add(&t, running.len ? running.data : "-");
	rc |= cli_table_add(&t, "labels:");
	rc |= cli_table_add(&t, labels.len ? labels.data : "-");
	rc |= format_hcas(&hcas, json_object_get(node, "hcas"));
	rc |= cli_table_add(&t, "HCAs:");
	rc |= cli_table_add(&t, hcas.len ? hcas.data : "-");
	rc |= format_failures(&failures, json_object_get(node, "failures"));
	rc |= cli_table_add(&t, "failures:");
	rc |= cli_table_add(&t, failures.len ? failures.data : "0");
	if (json_is_integer(json_object_get(node, "expected_gpus"))) {
		rc |= cli_table_add(&t, "expected GPUs:");
		rc |= cli_table_addf(&t, "%s",
				     cli_json_num(total_s, sizeof(total_s), node, "expected_gpus"));
	}
	if (cli_json_str(node, "fault", NULL)) {
		rc |= cli_table_add(&t, "fault:");
		rc |= cli_table_addf(&t, "%s (no new work until its executor registers without one)",
				     cli_json_str(node, "fault", NULL));
	}
	if (cli_json_str(node, "drain_reason", NULL)) {
		rc |= cli_table_add(&t, "drain reason:");
		rc |= cli_table_add(&t, cli_json_str(node, "drain_reason", NULL));
	}
	if (json_array_size(json_object_get(node, "conditions")))
		rc |= add_conditions(&t, json_object_get(node, "conditions"));
	else {
		rc |= cli_table_add(&t, "conditions:");
		rc |= cli_table_add(&t, "-");
	}
	if (json_is_object(json_object_get(node, "preempt"))) {
		const json_t *pr = json_object_get(node, "preempt");

		rc |= cli_table_add_time(&t, "preempt deadline:", pr, "deadline");
		rc |= cli_table_add(&t, "spot notice:");
		rc |= cli_table_addf(
		    &t, "%s %s", cli_json_str(json_object_get(pr, "notice"), "provider", "?"),
		    cli_json_str(json_object_get(pr, "notice"), "detail", ""));
	}
	rc |= cli_table_add_time(&t, "last heartbeat:", node, "last_heartbeat");
	rc |= cli_table_add_time(&t, "registered:", node, "registered_at");
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	ty_buf_free(&running);
	ty_buf_free(&labels);
	ty_buf_free(&hcas);
	ty_buf_free(&failures);
	return rc ? TY_ENOMEM : 0;
}

static int print_nodes(const json_t *items)
{
	static const char *const header[] = {"ID",	 "STATE",      "ADDRESS", "FREE/TOTAL",
					     "HCAS",	 "LABELS",     "FAILURES", "CONDITIONS",
					     "JOBS",	 "HEARTBEAT"};
	struct cli_table t = {.ncols = 10};
	struct ty_buf jobs = TY_BUF_INIT;
	const json_t *node;
	size_t i;
	int rc = 0;

	for (i = 0; i < 10; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, node) {
		char free_s[32], total_s[32], age[32];

		rc |= cli_table_add(&t, cli_json_str(node, "id", "-"));
		if (!strcmp(cli_json_str(node, "isolation", ""), "none"))
			rc |= cli_table_addf(&t, "%s (no isolation)", cli_json_str(node, "state", "-"));
		else
			rc |= cli_table_add(&t, cli_json_str(node, "state", "-"));
		rc |= cli_table_add(&t, cli_json_str(node, "address", "-"));
		rc |= cli_table_addf(&t, "%s/%s",
				     cli_json_num(free_s, sizeof(free_s), node, "gpus_free"),
				     cli_json_num(total_s, sizeof(total_s), node, "gpus_total"));
		ty_buf_reset(&jobs);
		rc |= format_hcas(&jobs, json_object_get(node, "hcas"));
		rc |= cli_table_addf(&t, "%s", jobs.len ? jobs.data : "-");
		ty_buf_reset(&jobs);
		rc |= format_labels_short(&jobs, json_object_get(node, "labels"));
		rc |= cli_table_addf(&t, "%s", jobs.len ? jobs.data : "-");
		ty_buf_reset(&jobs);
		rc |= format_failures(&jobs, json_object_get(node, "failures"));
		rc |= cli_table_addf(&t, "%s", jobs.len ? jobs.data : "0");
		ty_buf_reset(&jobs);
		rc |= format_conditions_short(&jobs, json_object_get(node, "conditions"));
		rc |= cli_table_addf(&t, "%s", jobs.len ? jobs.data : "-");
		ty_buf_reset(&jobs);
		rc |= format_jobs(&jobs, json_object_get(node, "running"));
		rc |= cli_table_addf(&t, "%s", jobs.len ? jobs.data : "-");
		if (cli_json_str(node, "last_heartbeat", NULL))
			rc |= cli_table_addf(
				&t, "%s ago",
				cli_age(age, sizeof(age), cli_json_str(node, "last_heartbeat", NULL)));
		else
			rc |= cli_table_add(&t, "-");
	}
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	ty_buf_free(&jobs);
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_nodes(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *state = NULL, *deadline = NULL;
	const struct cli_opt opts[] = {{"state", 0, CLI_OPT_STR, &state},
				       {"deadline", 0, CLI_OPT_STR, &deadline}};
	json_t *body = NULL;
	struct ty_buf path = TY_BUF_INIT;
	struct cli_strv pos = {0};
	struct cli_resp resp = {0};
	const char *sub;
	bool is_get, is_admin;
	int rc;

	/* options first, so "nodes --state ready" is no subcommand "ready" */
	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, 2, err)))
		goto out;
	if (cli->help) {
		fputs(nodes_help, stdout);
		goto out;
	}
	sub = pos.n ? pos.v[0] : "list";
	is_get = strcmp(sub, "get") == 0 || strcmp(sub, "show") == 0;
	is_admin = strcmp(sub, "drain") == 0 || strcmp(sub, "undrain") == 0 ||
		   strcmp(sub, "preempt") == 0;
	if (!is_get && !is_admin && strcmp(sub, "list") != 0) {
		rc = ty_err_set(err, TY_ECONFIG,
				"unknown nodes command '%.100s' (list, get, show, drain, undrain, "
				"preempt)",
				sub);
		goto out;
	}
	if (deadline && strcmp(sub, "preempt") != 0) {
		rc = ty_err_set(err, TY_ECONFIG, "--deadline is for 'nodes preempt'");
		goto out;
	}
	if (!strcmp(sub, "preempt")) {
		char *end;
		long long secs = deadline ? strtoll(deadline, &end, 10) : -1;

		if (deadline && (!*deadline || *end || secs < 0 || secs > 3600)) {
			rc = ty_err_set(err, TY_ECONFIG,
					"--deadline must be a number of seconds from 0 to 3600, "
					"not '%.100s'",
					deadline);
			goto out;
		}
		body = deadline ? json_pack("{s:I}", "deadline_seconds", (json_int_t)secs)
				: json_object();
		if (!body) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if (is_get || is_admin) {
		if (pos.n != 2 || !*pos.v[1]) {
			rc = ty_err_set(err, TY_ECONFIG,
					pos.n > 2 ? "expected one node id, got %zu arguments"
						  : "missing the node id",
					pos.n - 1);
			goto out;
		}
		if (state) {
			rc = ty_err_set(err, TY_ECONFIG, "--state is for 'nodes list'");
			goto out;
		}
		if (ty_buf_puts(&path, "/v1/nodes/") || cli_buf_escape(&path, pos.v[1]) ||
		    (is_admin && ty_buf_printf(&path, "/%s", sub))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	} else {
		if (pos.n > 1) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[1]);
			goto out;
		}
		if (ty_buf_puts(&path, "/v1/nodes") ||
		    (state && cli_buf_query(&path, "state", state))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if ((rc = cli_request(&resp, cli, is_admin ? "POST" : "GET", path.data, body, NULL, 0,
			      err)))
		goto out;
	if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
	} else if (is_admin) {
		const char *st = cli_json_str(resp.body, "state", "?");

		printf("node %s: %s%s\n", pos.v[1], st,
		       !strcmp(st, "draining") ? " (takes no new work; drained once its work ends)"
		       : !strcmp(st, "preempting")
			   ? " (takes no new work; its jobs checkpoint and are requeued elsewhere)"
		       : !strcmp(st, "lost") && !strcmp(sub, "drain")
			   ? " (not heard from; drained when it returns)"
		       : !strcmp(st, "lost") ? " (not heard from; ready when it returns)"
		       : !strcmp(st, "not_ready")
			   ? " (takes no new work until its executor registers without its fault)"
			   : "");
	} else if (is_get) {
		if (print_node(resp.body))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	} else if (!json_is_array(json_object_get(resp.body, "items"))) {
		rc = ty_err_set(err, TY_EIO, "the node list from the server has no 'items'");
	} else if (print_nodes(json_object_get(resp.body, "items"))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	}
out:
	json_decref(body);
	cli_resp_free(&resp);
	cli_strv_free(&pos);
	ty_buf_free(&path);
	return rc;
}

/* ---- attempts ---- */

/* One job id as the only argument; opts may add flags. */
static int parse_job_arg(long long *id, struct cli *cli, int argc, char **argv,
			 const struct cli_opt *opts, size_t nopts, const char *help,
			 struct ty_err *err)
{
	struct cli_strv pos = {0};
	int rc;

	*id = 0;
	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, nopts, err)))
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

/* "node-a,node-b" in node rank order (the API's order). */
static int format_nodes(struct ty_buf *b, const json_t *nodes)
{
	const json_t *n;
	size_t i;
	int rc = 0;

	json_array_foreach(nodes, i, n) {
		rc |= ty_buf_printf(b, "%s%s", i ? "," : "", cli_json_str(n, "node", "?"));
	}
	return rc ? TY_ENOMEM : 0;
}

static int add_age(struct cli_table *t, const json_t *obj, const char *key)
{
	const char *ts = cli_json_str(obj, key, NULL);
	char age[32];

	if (!ts)
		return cli_table_add(t, "-");
	return cli_table_addf(t, "%s ago", cli_age(age, sizeof(age), ts));
}

/* "60/99%": the mean and peak utilisation; "-" for what is not known. */
static int add_util(struct cli_table *t, const json_t *g)
{
	const json_t *mean = json_object_get(g, "util_mean"), *peak = json_object_get(g, "util_peak");
	char m[16] = "-", p[16] = "-";

	if (!json_is_number(mean) && !json_is_number(peak))
		return cli_table_add(t, "-");
	if (json_is_number(mean))
		snprintf(m, sizeof(m), "%.0f", json_number_value(mean));
	if (json_is_number(peak))
		snprintf(p, sizeof(p), "%.0f", json_number_value(peak));
	return cli_table_addf(t, "%s/%s%%", m, p);
}

/* "68.4GiB" from MiB; "-" when not known. */
static int add_mem(struct cli_table *t, const json_t *g)
{
	const json_t *v = json_object_get(g, "memory_used_peak_mb");

	if (!json_is_number(v))
		return cli_table_add(t, "-");
	return cli_table_addf(t, "%.1fGiB", json_number_value(v) / 1024);
}

static int print_attempts(const json_t *items)
{
	static const char *const header[] = {"ATTEMPT", "STATE",   "NODES", "WORLD",
					     "EXIT",	"CLASS",   "RESUMED", "UTIL",
					     "MEM",	"STARTED", "ENDED"};
	enum { NCOLS = sizeof(header) / sizeof(header[0]) };
	struct cli_table t = {.ncols = NCOLS};
	struct ty_buf nodes = TY_BUF_INIT;
	const json_t *a;
	size_t i;
	int rc = 0;

	for (i = 0; i < NCOLS; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, a) {
		const json_t *res = json_object_get(a, "resume");
		const json_t *g = json_object_get(a, "gpu_telemetry");
		char n1[32], n2[32], n3[32], n4[32];

		ty_buf_reset(&nodes);
		rc |= format_nodes(&nodes, json_object_get(a, "nodes"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n1, sizeof(n1), a, "attempt"));
		rc |= cli_table_add(&t, cli_json_str(a, "state", "-"));
		rc |= cli_table_addf(&t, "%s", nodes.len ? nodes.data : "-");
		rc |= cli_table_addf(&t, "%s", cli_json_num(n2, sizeof(n2), a, "world_size"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n3, sizeof(n3), a, "exit_code"));
		rc |= cli_table_add(&t, cli_json_str(a, "failure_class", "-"));
		/* where it resumed from: a checkpoint's step, scratch, or not reported */
		if (!json_is_object(res))
			rc |= cli_table_add(&t, "-");
		else if (json_is_string(json_object_get(res, "path")))
			rc |= cli_table_addf(&t, "step %s", cli_json_num(n4, sizeof(n4), res, "step"));
		else
			rc |= cli_table_add(&t, "scratch");
		rc |= add_util(&t, g);
		rc |= add_mem(&t, g);
		rc |= add_age(&t, a, "created_at");
		rc |= add_age(&t, a, "ended_at");
	}
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	ty_buf_free(&nodes);
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_attempts(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	struct cli_resp resp = {0};
	const json_t *items;
	long long id;
	int rc;

	if ((rc = parse_job_arg(&id, cli, argc, argv, NULL, 0, attempts_help, err)) || cli->help)
		goto out;
	if (ty_buf_printf(&path, "/v1/jobs/%lld/attempts", id)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL, 0, err)))
		goto out;
	items = json_object_get(resp.body, "items");
	if (cli->output == CLI_OUT_JSON)
		cli_print_json(resp.body);
	else if (!json_is_array(items))
		rc = ty_err_set(err, TY_EIO, "the attempt list from the server has no 'items'");
	else if (print_attempts(items))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	cli_resp_free(&resp);
	ty_buf_free(&path);
	return rc;
}

/* ---- checkpoints ---- */

/* "1.5GiB" (binary units, as the memory column); "-" when not a number. */
static int add_size(struct cli_table *t, const json_t *v)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double n = json_is_integer(v) ? (double)json_integer_value(v) : -1;
	size_t u = 0;

	if (n < 0)
		return cli_table_add(t, "-");
	while (n >= 1024 && u + 1 < sizeof(unit) / sizeof(unit[0])) {
		n /= 1024;
		u++;
	}
	return u ? cli_table_addf(t, "%.1f%s", n, unit[u]) : cli_table_addf(t, "%.0fB", n);
}

static int print_checkpoints(const json_t *doc)
{
	static const char *const header[] = {"STEP",	  "STATUS",   "DIGEST", "SIZE",
					     "FILES",	  "NODE",     "ATTEMPT", "VERIFIED",
					     "NEXT",	  "REASON"};
	enum { NCOLS = sizeof(header) / sizeof(header[0]) };
	const json_t *items = json_object_get(doc, "items"), *c;
	struct cli_table t = {.ncols = NCOLS};
	char n[32];
	size_t i;
	int rc = 0;

	for (i = 0; i < NCOLS; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, c) {
		const char *digest = cli_json_str(c, "digest", NULL);

		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), c, "step"));
		rc |= cli_table_add(&t, cli_json_str(c, "status", "-"));
		rc |= digest ? cli_table_addf(&t, "%.12s", digest) : cli_table_add(&t, "-");
		rc |= add_size(&t, json_object_get(c, "bytes"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), c, "files"));
		rc |= cli_table_add(&t, cli_json_str(c, "node", "-"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(n, sizeof(n), c, "attempt"));
		rc |= add_age(&t, c, "verified_at");
		rc |= cli_table_add(&t, json_is_true(json_object_get(c, "resume")) ? "*" : "");
		rc |= cli_table_add(&t, cli_json_str(c, "reason", "-"));
	}
	if (rc)
		goto out;
	if (json_is_integer(json_object_get(doc, "resume_step")))
		printf("next attempt resumes from step %s\n",
		       cli_json_num(n, sizeof(n), doc, "resume_step"));
	else
		printf("no resume point: no valid checkpoint, or the job has ended\n");
	if (json_array_size(items))
		cli_table_print(stdout, &t);
out:
	cli_table_free(&t);
	return rc ? TY_ENOMEM : 0;
}

int cli_cmd_checkpoints(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	struct cli_resp resp = {0};
	long long id;
	int rc;

	if ((rc = parse_job_arg(&id, cli, argc, argv, NULL, 0, checkpoints_help, err)) ||
	    cli->help)
		goto out;
	if (ty_buf_printf(&path, "/v1/jobs/%lld/checkpoints", id)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = cli_request(&resp, cli, "GET", path.data, NULL, NULL, 0, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON)
		cli_print_json(resp.body);
	else if (!json_is_array(json_object_get(resp.body, "items")))
		rc = ty_err_set(err, TY_EIO, "the checkpoint list from the server has no 'items'");
	else if (print_checkpoints(resp.body))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	cli_resp_free(&resp);
	ty_buf_free(&path);
	return rc;
}

/* ---- logs ---- */

static int query_int(struct ty_buf *b, const char *key, long long v)
{
	char num[32];

	snprintf(num, sizeof(num), "%lld", v);
	return cli_buf_query(b, key, num);
}

int cli_cmd_logs(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *rank_s = NULL, *attempt_s = NULL, *tail_s = NULL;
	const struct cli_opt opts[] = {
		{"rank", 0, CLI_OPT_STR, &rank_s},
		{"attempt", 0, CLI_OPT_STR, &attempt_s},
		{"tail", 0, CLI_OPT_STR, &tail_s},
	};
	struct ty_buf path = TY_BUF_INIT, text = TY_BUF_INIT;
	long long id, rank = 0, attempt = 0, tail = 0;
	int rc;

	if ((rc = parse_job_arg(&id, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				logs_help, err)) ||
	    cli->help)
		goto out;
	if ((rank_s && (rc = cli_parse_int(&rank, rank_s, 0, INT_MAX, "--rank", err))) ||
	    (attempt_s && (rc = cli_parse_int(&attempt, attempt_s, 1, INT_MAX, "--attempt", err))) ||
	    (tail_s && (rc = cli_parse_int(&tail, tail_s, 1, 10000, "--tail", err))))
		goto out;
	/* only what was given: the server knows the defaults */
	if (ty_buf_printf(&path, "/v1/jobs/%lld/logs", id) ||
	    (rank_s && query_int(&path, "rank", rank)) ||
	    (attempt_s && query_int(&path, "attempt", attempt)) ||
	    (tail_s && query_int(&path, "tail", tail))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = cli_get_text(&text, cli, path.data, err)))
		goto out;
	if (text.len)
		fwrite(text.data, 1, text.len, stdout);
out:
	ty_buf_free(&text);
	ty_buf_free(&path);
	return rc;
}
