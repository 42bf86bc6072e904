/*
 * A network partition of one executor's namespace (netns_partition: veth
 * down, its broker connections stalled), shorter and longer than the
 * scheduler's node timeout (8 s here; heartbeats every 300 ms).
 * Shorter: nothing happens, the same attempt succeeds. Longer: the node is
 * declared lost, the attempt fails as node_lost and is retried on the other
 * node; the partitioned node must have stopped its ranks by then by itself
 * (--fence-after-ms: it cannot hear a kill), so no gang runs twice, and
 * once the link is back the node is ready again with nothing left running.
 */
#include "invariants.h"
#include "netns.h"
#include "ty_test.h"

#include <string.h>
#include <unistd.h>

static const struct netns_plan *net;

static void broker_up(struct e2e *e)
{
	netns_relay_loopback(e->bootstrap);
}

/*
 * Executor i in namespace i, fencing itself 4 s after its last delivered
 * heartbeat; with its 2 s kill grace the old ranks are gone 6 s after it,
 * before the scheduler's node timeout of 8 s (docs/dispatch.md,
 * "Partitions": fence + grace < node timeout). The margins are wide so that
 * a loaded machine's late heartbeats do not fence the short partition.
 */
static struct e2e *stack(void)
{
	if (!net) {
		static const char *const fence[] = {"--fence-after-ms", "4000", NULL};
		static const char *const timeout[] = {"--node-timeout-ms", "8000", NULL};
		struct e2e_layout l = {.broker_up = broker_up, .sched_args = timeout};

		net = netns_up(2);
		for (int i = 0; i < 2; i++) {
			l.address[i] = net->addr[i];
			l.prefix[i] = netns_exec_prefix(i);
			l.args[i] = fence;
		}
		e2e_set_layout(&l);
	}
	return e2e_get();
}

/* The node (0 or 1) attempt `attempt` of job runs on; -1 when unknown. */
static int node_of(struct e2e *e, long long job, int attempt)
{
	json_t *att = e2e_attempts(e, job), *a = json_array_get(att, (size_t)attempt - 1);
	const char *node = ty_jstr(a, "nodes[0].node");
	int i = !node ? -1 : !strcmp(node, e->node[0]) ? 0 : !strcmp(node, e->node[1]) ? 1 : -1;

	json_decref(att);
	return i;
}

/* Wait until attempt n of job runs (or the job succeeded at attempt n or later). */
static void wait_attempt_running(struct e2e *e, long long job, int n, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 100) {
		struct ty_resp r = {0};
		bool there;

		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), e->token, NULL, NULL);
		there = r.status == 200 && ty_jint(r.json, "attempt") >= n && ty_jstr(r.json, "state") &&
			(!strcmp(ty_jstr(r.json, "state"), "running") ||
			 !strcmp(ty_jstr(r.json, "state"), "succeeded"));
		ty_resp_free(&r);
		if (there)
			return;
		usleep(100 * 1000);
	}
	FAIL("attempt %d of job %lld did not run within %d ms", n, job, timeout_ms);
	ty_test_abort();
}

TY_TEST(a_partition_shorter_than_the_node_timeout_changes_nothing)
{
	struct e2e *e = stack();
	long long id = e2e_submit(e, FAULTS_RANK_CMD("40"),
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	const char *const states[] = {"succeeded"};
	json_t *job;

	json_decref(e2e_wait_state(e, id, "running", 60000));
	netns_partition(1, true);
	usleep(1000 * 1000); /* well below the fence (4 s) and the node timeout (8 s) */
	netns_partition(1, false);
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	CHECK_INT_EQ(ty_jint(job, "attempt"), 1);
	json_decref(job);
	faults_check_invariants(e, &id, states, 1, 60000);
}

TY_TEST(a_partition_longer_than_the_node_timeout_moves_the_job_and_fences_the_old_ranks)
{
	struct e2e *e = stack();
	/* a whole node's GPUs, so the retry takes the other node */
	long long id = e2e_submit(e, FAULTS_RANK_CMD("150"),
				  "\"resources\":{\"nodes\":1,\"gpus_per_node\":2},"
				  "\"retry\":{\"system\":2}");
	const char *const states[] = {"succeeded"};
	json_t *att;
	int cut;

	json_decref(e2e_wait_state(e, id, "running", 60000));
	REQUIRE((cut = node_of(e, id, 1)) >= 0);
	netns_partition(cut, true);
	/* lost after 8 s of silence; the retry runs on the other node */
	wait_attempt_running(e, id, 2, 30000);
	usleep(2000 * 1000); /* attempt 2 runs while the old node is still cut off */
	netns_partition(cut, false);
	e2e_wait_nodes_ready(e);

	faults_check_invariants(e, &id, states, 1, 60000);
	att = e2e_attempts(e, id);
	CHECK_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(json_array_get(att, 0), "failure_class"), "node_lost");
	CHECK_STR_EQ(ty_jstr(json_array_get(att, 1), "state"), "succeeded");
	json_decref(att);
	CHECK_INT_EQ(node_of(e, id, 2), 1 - cut);
	/* and it was the fence, not the kill after the link came back, that stopped them */
	CHECK(ty_test_daemon_wait_log(e->exec[cut], "(--fence-after-ms 4000): stopped 1 attempt(s)",
				      1000));
}
