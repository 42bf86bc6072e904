/*
 * The e2e stack for tests written outside C (the browser tests, the Python
 * SDK's): the harness's database, API, broker, scheduler and two executors
 * (e2e.h), kept up until SIGTERM or SIGINT, or until the parent dies.
 *
 * Once every node is ready it writes $TY_STACK_ENV_FILE (atomically: a
 * reader that sees the file sees all of it), one KEY=VALUE per line:
 * TY_API_URL, TY_ADMIN_TOKEN, TY_DB_URL, TY_TEAM and TY_TOKEN (a team with
 * 64 nominal GPUs and a member token of it), TY_OUTDIR (a directory the
 * ranks may write into) and TY_NODES (comma-separated node ids).
 * $TY_STACK_API_ARGS adds arguments to the API (ty_stack.c). SIGUSR1 restarts
 * the API (stopped with SIGTERM, started again on the same database: a new
 * port) and writes the file again with its new TY_API_URL. Run it with the
 * environment ctest gives the e2e tests (tests/e2e.cmake).
 */
#include "e2e.h"
#include "ty_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

static void write_env(const char *path, struct e2e *e)
{
	const struct ty_stack *st = ty_stack_get();
	const char *tmp = ty_test_strf("%s.tmp", path);
	FILE *f = fopen(tmp, "w");

	REQUIRE(f != NULL);
	fprintf(f, "TY_API_URL=%s\n", ty_test_api_url(st->api));
	fprintf(f, "TY_ADMIN_TOKEN=%s\n", st->admin);
	fprintf(f, "TY_DB_URL=%s\n", st->db_url);
	fprintf(f, "TY_TEAM=%s\nTY_TOKEN=%s\nTY_OUTDIR=%s\n", e->team, e->token, e->out);
	fprintf(f, "TY_NODES=");
	for (int i = 0; i < e->nodes; i++)
		fprintf(f, "%s%s", i ? "," : "", e->node[i]);
	fprintf(f, "\n");
	REQUIRE(fclose(f) == 0);
	REQUIRE(rename(tmp, path) == 0);
}

TY_TEST(serve)
{
	const char *path = getenv("TY_STACK_ENV_FILE");
	sigset_t set;
	int sig = 0;

	if (!path || !*path) {
		FAIL("TY_STACK_ENV_FILE is not set: name the file the stack's settings go to");
		return;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGUSR1);
	REQUIRE(sigprocmask(SIG_BLOCK, &set, NULL) == 0);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		return; /* the parent went before we could watch it */
	struct e2e *e = e2e_get();

	write_env(path, e);
	while (sigwait(&set, &sig) == 0 && sig == SIGUSR1) {
		ty_test_note("stack: restarting the API");
		ty_test_api_restart(ty_stack_get()->api);
		write_env(path, e);
	}
	ty_test_note("stack: signal %d, stopping", sig);
}
