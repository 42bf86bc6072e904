/* jobctl node-pools: the node shapes a cluster that scales may add (admin writes). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const char pools_help[] =
    "usage: jobctl node-pools [list]\n"
    "       jobctl node-pools put NAME --gpus-per-node G --max-nodes N\n"
    "                             [--cpus-per-node C] [--memory-mb M] [--label K=V]...\n"
    "       jobctl node-pools delete NAME\n"
    "\n"
    "A node pool declares that up to N nodes of a shape may join the cluster\n"
    "(one that scales) though none is registered now: a job only such nodes can\n"
    "hold is then queued rather than refused as unschedulable, and does not show\n"
    "as 'cannot run'. 'list' shows every pool: name, GPUs, CPUs and MiB of memory\n"
    "per node ('-': not limited), the most nodes, labels. 'put' (admin) creates\n"
    "or replaces a pool as a whole; 'delete' (admin) removes it.\n"
    "\n"
    "flags ('put'):\n"
    "  --gpus-per-node G   GPUs of each node, 0..64 (required)\n"
    "  --max-nodes N       the most nodes of the pool, 1..10000 (required)\n"
    "  --cpus-per-node C   allocatable CPUs of each node (default: not limited)\n"
    "  --memory-mb M       allocatable MiB of memory of each node (default: not\n"
    "                      limited)\n"
    "  --label K=V         a label its nodes carry (repeatable; recorded, not\n"
    "                      matched against jobs yet)\n";

static int set_int(json_t *body, const char *key, const char *val, long long lo, long long hi,
		   const char *flag, struct ty_err *err)
{
	long long v;
	int rc;

	if (!val)
		return 0;
	if ((rc = cli_parse_int(&v, val, lo, hi, flag, err)))
		return rc;
	return json_object_set_new(body, key, json_integer(v)) ? ty_err_set(err, TY_ENOMEM, NULL)
							       : 0;
}

static int put_body(json_t **out, const char *gpus, const char *max, const char *cpus,
		    const char *mem, const struct cli_strv *labels, struct ty_err *err)
{
	json_t *body = json_object(), *l = json_object();
	int rc = 0;

	*out = NULL;
	if (!body || !l || json_object_set(body, "labels", l)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (!gpus || !max) {
		rc = ty_err_set(err, TY_ECONFIG,
				"node-pools put needs --gpus-per-node and --max-nodes");
		goto out;
	}
	if ((rc = set_int(body, "gpus_per_node", gpus, 0, 64, "--gpus-per-node", err)) ||
	    (rc = set_int(body, "max_nodes", max, 1, 10000, "--max-nodes", err)) ||
	    (rc = set_int(body, "cpus_per_node", cpus, 1, 4096, "--cpus-per-node", err)) ||
	    (rc = set_int(body, "memory_mb_per_node", mem, 1, 16777216, "--memory-mb", err)))
		goto out;
	for (size_t i = 0; i < labels->n; i++) {
		const char *eq = strchr(labels->v[i], '=');
		char key[256];

		if (!eq || eq == labels->v[i] || (size_t)(eq - labels->v[i]) >= sizeof(key)) {
			rc = ty_err_set(err, TY_ECONFIG, "--label must be KEY=VALUE, not '%.100s'",
					labels->v[i]);
			goto out;
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - labels->v[i]), labels->v[i]);
		if (json_object_set_new(l, key, json_string(eq + 1))) {
			rc = ty_err_set(err, TY_ECONFIG, "--label '%.100s' is not valid UTF-8",
					labels->v[i]);
			goto out;
		}
	}
	*out = body;
	body = NULL;
out:
	json_decref(l);
	json_decref(body);
	return rc;
}

static int print_pools(const json_t *body, struct ty_err *err)
{
	static const char *const header[] = {"NAME",	  "GPUS",      "CPUS",
					     "MEMORY_MB", "MAX_NODES", "LABELS"};
	const json_t *items = json_object_get(body, "items"), *p;
	struct cli_table t = {.ncols = 6};
	char b[4][32];
	size_t i;
	int rc = 0;

	if (!json_is_array(items))
		return ty_err_set(err, TY_EIO, "the node pool list from the server has no 'items'");
	for (i = 0; i < 6; i++)
		rc |= cli_table_add(&t, header[i]);
	json_array_foreach(items, i, p)
	{
		const json_t *labels = json_object_get(p, "labels"), *v;
		const char *k;
		char lab[512] = "";
		size_t len = 0;

		json_object_foreach((json_t *)labels, k, v)
		{
			int w = snprintf(lab + len, sizeof(lab) - len, "%s%s=%s", len ? "," : "", k,
					 json_string_value(v) ? json_string_value(v) : "");

			if (w < 0 || (size_t)w >= sizeof(lab) - len)
				break;
			len += (size_t)w;
		}
		rc |= cli_table_add(&t, cli_json_str(p, "name", "-"));
		rc |=
		    cli_table_addf(&t, "%s", cli_json_num(b[0], sizeof(b[0]), p, "gpus_per_node"));
		rc |=
		    cli_table_addf(&t, "%s", cli_json_num(b[1], sizeof(b[1]), p, "cpus_per_node"));
		rc |= cli_table_addf(&t, "%s",
				     cli_json_num(b[2], sizeof(b[2]), p, "memory_mb_per_node"));
		rc |= cli_table_addf(&t, "%s", cli_json_num(b[3], sizeof(b[3]), p, "max_nodes"));
		rc |= cli_table_addf(&t, "%s", len ? lab : "-");
	}
	if (!rc)
		cli_table_print(stdout, &t);
	cli_table_free(&t);
	return rc ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
}

int cli_cmd_node_pools(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const char *gpus = NULL, *max = NULL, *cpus = NULL, *mem = NULL, *sub;
	struct cli_strv labels = {0}, pos = {0};
	const struct cli_opt opts[] = {
	    {"gpus-per-node", 0, CLI_OPT_STR, &gpus}, {"max-nodes", 0, CLI_OPT_STR, &max},
	    {"cpus-per-node", 0, CLI_OPT_STR, &cpus}, {"memory-mb", 0, CLI_OPT_STR, &mem},
	    {"label", 0, CLI_OPT_LIST, &labels},
	};
	struct ty_buf path = TY_BUF_INIT;
	struct cli_resp resp = {0};
	json_t *body = NULL;
	bool is_put, is_delete;
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, opts, sizeof(opts) / sizeof(opts[0]),
				 err)))
		goto out;
	if (cli->help) {
		fputs(pools_help, stdout);
		goto out;
	}
	sub = pos.n ? pos.v[0] : "list";
	is_put = !strcmp(sub, "put");
	is_delete = !strcmp(sub, "delete");
	if (!is_put && !is_delete && strcmp(sub, "list")) {
		rc = ty_err_set(err, TY_ECONFIG,
				"unknown node-pools command '%.100s' (list, put, delete)", sub);
		goto out;
	}
	if (!is_put && (gpus || max || cpus || mem || labels.n)) {
		rc = ty_err_set(err, TY_ECONFIG,
				"--gpus-per-node, --max-nodes, --cpus-per-node, "
				"--memory-mb and --label are for 'node-pools put'");
		goto out;
	}
	if (!is_put && !is_delete) {
		if (pos.n > 1) {
			rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[1]);
			goto out;
		}
		if ((rc = cli_request(&resp, cli, "GET", "/v1/node-pools", NULL, NULL, 0, err)))
			goto out;
		if (cli->output == CLI_OUT_JSON)
			cli_print_json(resp.body);
		else
			rc = print_pools(resp.body, err);
		goto out;
	}
	if (pos.n != 2 || !*pos.v[1]) {
		rc = ty_err_set(err, TY_ECONFIG,
				pos.n > 2 ? "expected one node pool name, got %zu arguments"
					  : "missing the node pool name",
				pos.n - 1);
		goto out;
	}
	if (is_put && (rc = put_body(&body, gpus, max, cpus, mem, &labels, err)))
		goto out;
	if (ty_buf_puts(&path, "/v1/node-pools/") || cli_buf_escape(&path, pos.v[1])) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc =
		 cli_request(&resp, cli, is_put ? "PUT" : "DELETE", path.data, body, NULL, 0, err)))
		goto out;
	if (is_delete) {
		if (cli->output == CLI_OUT_JSON)
			printf("{\n  \"name\": \"%s\",\n  \"deleted\": true\n}\n", pos.v[1]);
		else
			printf("deleted node pool %s\n", pos.v[1]);
	} else if (cli->output == CLI_OUT_JSON) {
		cli_print_json(resp.body);
	} else {
		printf("node pool %s: up to %s nodes of %s GPUs\n", pos.v[1],
		       cli_json_num((char[32]){0}, 32, resp.body, "max_nodes"),
		       cli_json_num((char[32]){0}, 32, resp.body, "gpus_per_node"));
	}
out:
	json_decref(body);
	cli_resp_free(&resp);
	cli_strv_free(&pos);
	cli_strv_free(&labels);
	ty_buf_free(&path);
	return rc;
}
