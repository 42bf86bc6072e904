/*
 * An executor killed with SIGKILL while its ranks run, and started again:
 * it does not re-adopt them. On start it kills the previous boot's process
 * groups, reports their attempts as exited class `system` ("executor
 * restarted") and only then registers, so the scheduler retries them
 * (docs/dispatch.md, "Executor duties"). No rank process may outlive that,
 * no gang may run twice, and every job still succeeds. Ranks that finished
 * meanwhile are reported as finished, from their shims' exit files.
 */
#include "invariants.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define ONE_NODE "\"resources\":{\"nodes\":1,\"gpus_per_node\":1},\"retry\":{\"system\":2}"
#define TWO_NODES "\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"retry\":{\"system\":2}"

TY_TEST(sigkill_and_restart_fails_the_attempts_there_and_leaves_no_orphans)
{
	struct e2e *e = e2e_get();
	long long ids[3];
	const char *const states[3] = {"succeeded", "succeeded", "succeeded"};
	int on_b = 0;

	/*
	 * the four GPUs full: one gang over both nodes, two single-node jobs,
	 * whose ranks outlast the restart even on a busy machine (a rank that
	 * finished meanwhile counts as finished: the case below)
	 */
	ids[0] = e2e_submit(e, FAULTS_RANK_CMD("100"), TWO_NODES);
	ids[1] = e2e_submit(e, FAULTS_RANK_CMD("100"), ONE_NODE);
	ids[2] = e2e_submit(e, FAULTS_RANK_CMD("100"), ONE_NODE);
	for (int i = 0; i < 3; i++)
		json_decref(e2e_wait_state(e, ids[i], "running", 60000));

	ty_test_daemon_kill(e->exec[1]);
	/* its ranks live on, orphaned, until the executor comes back */
	REQUIRE(*faults_live_ranks(e) != '\0');
	e2e_start_executor(e, 1);
	e2e_wait_nodes_ready(e);

	faults_check_invariants(e, ids, states, 3, 60000);
	/* every attempt that had a rank on node-b failed as `system` and was retried */
	for (int i = 0; i < 3; i++) {
		json_t *att = e2e_attempts(e, ids[i]), *a0 = json_array_get(att, 0), *k;
		bool had_b = false;
		size_t j;

		ty_test_context("job %lld", ids[i]);
		json_array_foreach(json_object_get(a0, "nodes"), j, k) had_b |=
		    ty_jstr(k, "node") && !strcmp(ty_jstr(k, "node"), "node-b");
		if (had_b) {
			on_b++;
			CHECK_INT_EQ(json_array_size(att), 2);
			CHECK_STR_EQ(ty_jstr(a0, "state"), "failed");
			CHECK_STR_EQ(ty_jstr(a0, "failure_class"), "system");
		} else {
			CHECK_INT_EQ(json_array_size(att), 1);
		}
		json_decref(att);
	}
	ty_test_context(NULL);
	CHECK(on_b >= 2); /* the gang and at least one single-node job */
}

/*
 * The ranks finish (exit 0) while their executor is down: the new boot
 * reads their shims' exit files and reports the attempt as finished, so
 * the job succeeds once and is never run again.
 */
TY_TEST(ranks_that_finish_while_the_executor_is_down_are_not_run_again)
{
	struct e2e *e = e2e_get();
	long long id;
	const char *const states[1] = {"succeeded"};
	json_t *att;

	id = e2e_submit(e, FAULTS_RANK_CMD("15"), TWO_NODES);
	json_decref(e2e_wait_state(e, id, "running", 60000));
	ty_test_daemon_kill(e->exec[1]);
	for (int i = 0; i < 300 && *faults_live_ranks(e); i++)
		usleep(100 * 1000);
	REQUIRE(*faults_live_ranks(e) == '\0');
	e2e_start_executor(e, 1);
	e2e_wait_nodes_ready(e);

	faults_check_invariants(e, &id, states, 1, 60000);
	att = e2e_attempts(e, id);
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_STR_EQ(ty_jstr(json_array_get(att, 0), "state"), "succeeded");
	json_decref(att);
}

/* A fence that a heartbeat or two late would trip is refused at start. */
TY_TEST(a_fence_within_two_heartbeats_is_refused)
{
	static const char *const fences[] = {"600", "1", "300"};
	const char *bin = getenv("TY_EXECUTOR_BIN");

	REQUIRE(bin != NULL);
	for (size_t i = 0; i < sizeof(fences) / sizeof(fences[0]); i++) {
		const char *err = ty_test_strf("%s/fence-%zu.err", ty_test_workdir(), i);
		int status = system(ty_test_strf(
		    "'%s' --node-id n1 --kafka-bootstrap 127.0.0.1:9 --fake-gpus 1 --state-dir "
		    "'%s' --log-pubkey '%s' --heartbeat-ms 300 --fence-after-ms %s --dispatch-pubkey "
		    "'%s' --node-key-file '%s' 2>'%s' >/dev/null",
		    bin, ty_test_workdir(), ty_test_log_pubkey(), fences[i], ty_test_dispatch_pubkey(),
		    ty_test_node_key_file("n1"), err));
		FILE *f = fopen(err, "r");
		char line[512] = "";

		ty_test_context("--fence-after-ms %s --heartbeat-ms 300", fences[i]);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
		REQUIRE(f != NULL);
		while (fgets(line, sizeof(line), f) && !strstr(line, "fence"))
			;
		fclose(f);
		CHECK_STR_EQ(line, "trainyard-executor: --fence-after-ms must be more than twice "
				   "--heartbeat-ms (or 0)\n");
	}
}
