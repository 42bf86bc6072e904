/*
 * An executor killed with SIGKILL while its ranks run, and started again:
 * it does not re-adopt them. On start it kills the previous boot's process
 * groups, reports their attempts as exited class `system` ("executor
 * restarted") and only then registers, so the scheduler retries them
 * (docs/dispatch.md, "Executor duties"). No rank process may outlive that,
 * no gang may run twice, and every job still succeeds.
 */
#include "invariants.h"
#include "ty_test.h"

#include <string.h>

#define ONE_NODE "\"resources\":{\"nodes\":1,\"gpus_per_node\":1},\"retry\":{\"system\":2}"
#define TWO_NODES "\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"retry\":{\"system\":2}"

TY_TEST(sigkill_and_restart_fails_the_attempts_there_and_leaves_no_orphans)
{
	struct e2e *e = e2e_get();
	long long ids[3];
	const char *const states[3] = {"succeeded", "succeeded", "succeeded"};
	int on_b = 0;

	/* the four GPUs full: one gang over both nodes, two single-node jobs */
	ids[0] = e2e_submit(e, FAULTS_RANK_CMD("40"), TWO_NODES);
	ids[1] = e2e_submit(e, FAULTS_RANK_CMD("40"), ONE_NODE);
	ids[2] = e2e_submit(e, FAULTS_RANK_CMD("40"), ONE_NODE);
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
		json_array_foreach(json_object_get(a0, "nodes"), j, k)
			had_b |= ty_jstr(k, "node") && !strcmp(ty_jstr(k, "node"), "node-b");
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
