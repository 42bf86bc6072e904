/* jobctl: the Trainyard command-line client. Owns main, the command table and exit codes. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#ifndef JOBCTL_VERSION
#define JOBCTL_VERSION "0.0.0"
#endif

static const char main_help[] =
	"usage: jobctl [GLOBAL OPTIONS] COMMAND [ARGS...]\n"
	"\n"
	"Submit and manage Trainyard training jobs.\n"
	"\n"
	"commands:\n"
	"  submit    submit a job (flags, or -f job.json; the command after '--')\n"
	"  status    show one job\n"
	"  list      list jobs, newest first\n"
	"  queue     list the pending jobs in queue order and why they wait\n"
	"  watch     print a job's events until it ends\n"
	"  cancel    cancel a job\n"
	"  stop      stop a job early: it ends as 'stopped' (HPO pruning)\n"
	"  sweep     submit, show, cancel and list sweeps (one job per parameter set)\n"
	"  webhooks  create, list, delete and ping webhooks; show their deliveries\n"
	"  attempts  list a job's attempts: nodes, exit codes, failure classes, GPU use\n"
	"  checkpoints  list a job's checkpoints and the one the next attempt resumes from\n"
	"  logs      print the end of one rank's log\n"
	"  nodes     list, show, drain, undrain and preempt the nodes jobs run on\n"
	"  node-pools  list, put and delete the node shapes a cluster that scales may add\n"
	"  teams     list, show, create and update teams\n"
	"  quota     show teams' quotas, GPUs in use, borrowed and lent, fair share\n"
	"  usage     GPU-hours (idle too), cost and lost work per team, job, pool or day\n"
	"  tokens    create, list and revoke API tokens (admin)\n"
	"  audit     list the audit log of mutating requests (admin)\n"
	"  version   print jobctl's version\n"
	"  help      show the help of a command (or 'jobctl COMMAND --help')\n"
	"\n"
	"global options (before or after the command):\n"
	"  --server URL      API base URL, default http://127.0.0.1:8080\n"
	"  --token TOKEN     bearer token; other users of this machine can read a\n"
	"                    command line (ps, /proc): prefer --token-file,\n"
	"                    JOBCTL_TOKEN_FILE or JOBCTL_TOKEN\n"
	"  --token-file FILE read the bearer token from FILE's first line\n"
	"  --timeout SECS    request timeout in seconds, default 60\n"
	"  --cacert FILE     PEM CA file to verify an https:// server against\n"
	"                    (default: the system's CAs)\n"
	"  -o, --output FMT  'text' (default, for people), 'json' (for scripts) or 'csv'\n"
	"                    (usage only; other commands print their table)\n"
	"  -h, --help        show help\n"
	"\n"
	"Settings come from the flags, else the environment (JOBCTL_SERVER,\n"
	"JOBCTL_TOKEN, JOBCTL_TOKEN_FILE, JOBCTL_TIMEOUT, JOBCTL_CACERT), else the\n"
	"config file: the one named by JOBCTL_CONFIG, or $XDG_CONFIG_HOME/jobctl/config\n"
	"(~/.config/jobctl/config), with lines 'server = URL', 'token = TOKEN',\n"
	"'token_file = FILE', 'timeout = SECS', 'cacert = FILE' and '#' comments.\n"
	"\n"
	"exit status:\n"
	"  0  success\n"
	"  1  the watched job failed\n"
	"  2  usage error: bad command, flag or argument, bad settings\n"
	"  3  the watched job was cancelled\n"
	"  4  not found (HTTP 404; also another team's job, a rank without a log)\n"
	"  5  not authenticated or not allowed (HTTP 401, 403)\n"
	"  6  invalid request (HTTP 400, 409, 413, 415, 422; a job file that is not JSON)\n"
	"  7  server or connection error (HTTP 5xx, cannot connect, timeout; a node\n"
	"     that does not answer for its logs)\n";

static int cmd_version(struct cli *cli, int argc, char **argv, struct ty_err *err);
static int cmd_help(struct cli *cli, int argc, char **argv, struct ty_err *err);

static const struct cmd {
	const char *name;
	int (*fn)(struct cli *cli, int argc, char **argv, struct ty_err *err);
} cmds[] = {
	{"submit", cli_cmd_submit},
	{"status", cli_cmd_status},
	{"list", cli_cmd_list},
	{"queue", cli_cmd_queue},
	{"watch", cli_cmd_watch},
	{"cancel", cli_cmd_cancel},
	{"stop", cli_cmd_stop},
	{"attempts", cli_cmd_attempts},
	{"checkpoints", cli_cmd_checkpoints},
	{"logs", cli_cmd_logs},
	{"nodes", cli_cmd_nodes},
	{"node-pools", cli_cmd_node_pools},
	{"teams", cli_cmd_teams},
	{"quota", cli_cmd_quota},
	{"usage", cli_cmd_usage},
	{"sweep", cli_cmd_sweep},
	{"webhooks", cli_cmd_webhooks},
	{"tokens", cli_cmd_tokens},
	{"audit", cli_cmd_audit},
	{"version", cmd_version},
	{"help", cmd_help},
};

static const struct cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(cmds[i].name, name) == 0)
			return &cmds[i];
	return NULL;
}

int cli_exit_code(int code)
{
	switch (code) {
	case TY_OK:
		return CLI_EXIT_OK;
	case TY_ECONFIG:
		return CLI_EXIT_USAGE;
	case TY_ENOTFOUND:
		return CLI_EXIT_NOT_FOUND;
	case TY_EAUTH:
	case TY_EPERM:
		return CLI_EXIT_AUTH;
	case TY_EINVAL:
	case TY_ECONFLICT:
	case TY_ETOOBIG:
	case TY_EPARSE:
	case TY_ESTATE:
		return CLI_EXIT_INVALID;
	default:
		return CLI_EXIT_SERVER;
	}
}

static int cmd_version(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	struct cli_strv pos = {0};
	int rc;

	if ((rc = cli_parse_opts(&pos, NULL, cli, argc, argv, NULL, 0, err)))
		goto out;
	if (cli->help) {
		fputs("usage: jobctl version [-o json]\n\nPrint jobctl's version.\n", stdout);
		goto out;
	}
	if (pos.n) {
		rc = ty_err_set(err, TY_ECONFIG, "unexpected argument '%.100s'", pos.v[0]);
		goto out;
	}
	if (cli->output == CLI_OUT_JSON)
		printf("{\n  \"version\": \"%s\"\n}\n", JOBCTL_VERSION);
	else
		printf("jobctl %s\n", JOBCTL_VERSION);
out:
	cli_strv_free(&pos);
	return rc;
}

static int cmd_help(struct cli *cli, int argc, char **argv, struct ty_err *err)
{
	const struct cmd *c;
	char *help_argv[] = {"--help", NULL};

	if (argc == 0 || strcmp(argv[0], "help") == 0) {
		fputs(main_help, stdout);
		return 0;
	}
	if (!(c = find_cmd(argv[0])))
		return ty_err_set(err, TY_ECONFIG, "unknown command '%.100s'", argv[0]);
	return c->fn(cli, 1, help_argv, err);
}

int main(int argc, char **argv)
{
	struct cli cli = {0};
	struct ty_err err = {0};
	struct cli_strv pos = {0};
	bool version = false;
	const struct cli_opt main_opts[] = {{"version", 0, CLI_OPT_FLAG, &version}};
	const struct cmd *c = NULL;
	const char *name = NULL;
	int rc, ci, status;

	ci = 1 + cli_skip_options(argc - 1, argv + 1);
	if (ci < argc && strcmp(argv[ci], "--") == 0) {
		rc = ty_err_set(&err, TY_ECONFIG, "'--' before any command");
		goto out;
	}
	/* options before the command; it parses its own, globals included */
	if ((rc = cli_parse_opts(&pos, NULL, &cli, ci - 1, argv + 1, main_opts, 1, &err)))
		goto out;
	if (version) {
		rc = cmd_version(&cli, 0, NULL, &err);
		goto out;
	}
	if (ci >= argc) {
		fputs(main_help, cli.help ? stdout : stderr);
		if (!cli.help)
			rc = ty_err_set(&err, TY_ECONFIG, "no command given");
		goto out;
	}
	name = argv[ci];
	if (!(c = find_cmd(name))) {
		rc = ty_err_set(&err, TY_ECONFIG, "unknown command '%.100s'", name);
		name = NULL;
		goto out;
	}
	rc = c->fn(&cli, argc - ci - 1, argv + ci + 1, &err);
out:
	status = rc ? cli_exit_code(rc) : cli.exit_status;
	if (rc) {
		fprintf(stderr, "jobctl: %s\n", err.msg[0] ? err.msg : ty_code_desc(rc));
		if (status == CLI_EXIT_USAGE && !cli.settings_failed) {
			if (name)
				fprintf(stderr, "run 'jobctl %s --help' for its usage\n", name);
			else
				fputs("run 'jobctl --help' for usage\n", stderr);
		}
	}
	if (fflush(stdout) != 0 && !rc) {
		fputs("jobctl: cannot write the output\n", stderr);
		status = CLI_EXIT_SERVER;
	}
	cli_strv_free(&pos);
	cli_disconnect(&cli);
	cli_cleanup(&cli);
	return status;
}
