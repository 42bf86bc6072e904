/*
 * Failure classes through the whole stack: the executor classifies from the
 * ranks' exits and logs, the scheduler spends the right retry budget,
 * blames the node and retries elsewhere after a backoff.
 *
 * Its own program: blamed nodes count towards `suspect`, so each case
 * undrains both nodes when it is done (which also resets their scores).
 */
#include "e2e.h"
#include "ty_test.h"

#include <string.h>
#include <unistd.h>

static void reset_nodes(struct e2e *e)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (int i = 0; i < 2; i++) {
		CHECK_INT_EQ(ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/undrain", e->node[i]),
				     s->admin, NULL, NULL),
			     200);
	}
	ty_resp_free(&r);
	e2e_wait_nodes_ready(e);
}

/*
 * The first attempt prints what NCCL prints when a peer goes away and exits
 * 1; the retry (elsewhere) succeeds and records its node.
 */
TY_TEST(nccl_error_is_system_and_retried_on_the_other_node)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(
	    e,
	    "[\"/bin/sh\",\"-c\",\"if mkdir $OUTDIR/tried 2>/dev/null; then "
	    "echo 'node-x:1234:1240 [0] NCCL WARN NET/Socket : peer 10.0.0.3<45678> closed'; "
	    "echo 'RuntimeError: NCCL communicator was aborted on rank 0. ncclRemoteError: A "
	    "call failed possibly due to a network error or a remote process exiting "
	    "prematurely.'; exit 1; fi; echo $TRAINYARD_NODE_ID > $OUTDIR/ok\"]",
	    "\"resources\":{\"nodes\":1,\"gpus_per_node\":1},\"retry\":{\"system\":2}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	json_t *att = e2e_attempts(e, id);
	const char *first, *second, *ran;

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	REQUIRE_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "system");
	CHECK(ty_jstr(att, "[0].evidence") &&
	      strstr(ty_jstr(att, "[0].evidence"), "ncclRemoteError") != NULL);
	first = ty_jstr(att, "[0].ranks[0].node");
	second = ty_jstr(att, "[1].ranks[0].node");
	REQUIRE(first && second);
	/* the failing node is blamed and the retry goes elsewhere */
	CHECK_STR_EQ(ty_jstr(att, "[0].blamed_node"), first);
	CHECK(strcmp(first, second) != 0);
	ran = e2e_read(e, "ok");
	CHECK(ran && strncmp(ran, second, strlen(second)) == 0);
	json_decref(att);
	json_decref(job);
	reset_nodes(e);
}

/* A Python traceback is the user's: no retry by default, nobody blamed. */
TY_TEST(traceback_is_user_and_not_retried)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(
	    e,
	    "[\"/bin/sh\",\"-c\",\"echo 'Traceback (most recent call last):'; "
	    "echo '  File \\\"train.py\\\", line 3, in <module>'; "
	    "echo \\\"KeyError: 'lr'\\\"; exit 1\"]",
	    "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	json_t *att = e2e_attempts(e, id);

	CHECK_STR_EQ(ty_jstr(job, "state"), "failed");
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "user");
	CHECK(ty_jstr(att, "[0].evidence") &&
	      strstr(ty_jstr(att, "[0].evidence"), "KeyError: 'lr'") != NULL);
	CHECK(json_is_null(ty_jpath(att, "[0].blamed_node")));
	json_decref(att);
	json_decref(job);
}

/*
 * A 2-node gang whose ranks go silent: the hang timeout ends it on every
 * node, the ranks are gone, and with no system retries left it fails.
 */
TY_TEST(silent_gang_is_a_hang_and_every_rank_is_killed)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(
	    e, "[\"/bin/sh\",\"-c\",\"echo $$ > $OUTDIR/pid.$RANK; echo started; exec sleep 600\"]",
	    "\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"hang_timeout_seconds\":60,"
	    "\"retry\":{\"system\":0}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	json_t *att = e2e_attempts(e, id);

	CHECK_STR_EQ(ty_jstr(job, "state"), "failed");
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "hang");
	CHECK(ty_jstr(att, "[0].evidence") != NULL);
	CHECK_INT_EQ(e2e_count_files(e, "pid."), 2);
	/*
	 * The first node to report fails the job; the other may still be in its
	 * stop sequence (SIGTERM, SIGKILL after the kill grace): give it that long.
	 */
	for (int i = 0; i < 100 && e2e_any_alive(e, "pid."); i++)
		usleep(100 * 1000);
	CHECK(!e2e_any_alive(e, "pid."));
	json_decref(att);
	json_decref(job);
	reset_nodes(e);
}

/*
 * preflight: true runs the real node check (trainyard-allreduce
 * --node-check, next to the executor) on the gang before the job: with two
 * healthy nodes it passes and the job runs after it.
 */
TY_TEST(preflight_check_runs_before_the_job)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e, "[\"/bin/sh\",\"-c\",\"echo $RANK > $OUTDIR/ran.$RANK\"]",
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":1},"
				  "\"preflight\":true,\"retry\":{\"system\":0}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 120000);
	json_t *att = e2e_attempts(e, id);

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_INT_EQ(e2e_count_files(e, "ran."), 2);
	json_decref(att);
	json_decref(job);
}
