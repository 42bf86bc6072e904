/*
 * Training progress through the whole stack (docs/dispatch.md, "Progress"):
 * a gang whose step stops is a hang even while it prints, and is retried;
 * a rank much slower than its gang is a straggler on its node.
 *
 * Its own program: a straggler's node is blamed, so each case undrains both
 * nodes when it is done (which also resets their scores).
 */
#include "e2e.h"
#include "ty_test.h"

#include <string.h>

static void reset_nodes(struct e2e *e)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (int i = 0; i < 2; i++) {
		CHECK_INT_EQ(ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/undrain", e->node[i]),
				     s->admin, NULL, NULL),
			     200);
		ty_resp_free(&r);
	}
	e2e_wait_nodes_ready(e);
}

/* How many events of type the job has. */
static int events_of(struct e2e *e, long long job, const char *type)
{
	struct ty_resp r = {0};
	const json_t *ev;
	size_t i;
	int n = 0;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?limit=1000", job), e->token, NULL,
		NULL);
	REQUIRE(r.status == 200);
	json_array_foreach(json_object_get(r.json, "events"), i, ev)
		n += !strcmp(ty_jstr(ev, "type") ? ty_jstr(ev, "type") : "", type);
	ty_resp_free(&r);
	return n;
}

/*
 * Both ranks write three steps, then keep printing without a step: the
 * executor ends the gang as a hang naming the step, and the retry (on the
 * other node: the hang's node is excluded; its ranks find their marks)
 * succeeds.
 */
TY_TEST(a_gang_that_prints_but_stops_stepping_is_a_hang_and_retried)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(
	    e,
	    "[\"/bin/sh\",\"-c\",\"if mkdir $OUTDIR/tried.$RANK 2>/dev/null; then i=0; "
	    "while [ $i -lt 3 ]; do i=$((i+1)); echo $i > $TRAINYARD_PROGRESS_FILE; "
	    "echo step $i; sleep 0.2; done; while :; do echo still printing; sleep 0.2; done; "
	    "fi; echo done\"]",
	    "\"resources\":{\"nodes\":1,\"gpus_per_node\":2},\"hang_timeout_seconds\":60,"
	    "\"retry\":{\"system\":1}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 120000);
	json_t *att = e2e_attempts(e, id);
	const char *ev;

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	REQUIRE_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "hang");
	ev = ty_jstr(att, "[0].evidence");
	ty_test_context("evidence '%s'", ev ? ev : "(null)");
	CHECK(ev && strncmp(ev, "step 3 unchanged for ", 21) == 0);
	CHECK(ev && strstr(ev, "; last output ") != NULL);
	CHECK(ev && strstr(ev, "still printing") != NULL);
	ty_test_context(NULL);
	/* the last progress the nodes reported is kept with the attempt */
	CHECK_INT_EQ(json_array_size(ty_jpath(att, "[0].progress")), 2);
	CHECK_INT_EQ(json_integer_value(ty_jpath(att, "[0].progress[0].step")), 3);
	CHECK_STR_EQ(ty_jstr(att, "[1].state"), "succeeded");
	json_decref(att);
	json_decref(job);
	reset_nodes(e);
}

/*
 * Rank 0 steps ten times a second, rank 1 (on the other node) once a
 * second: rank 1 is a straggler on its node, in the attempt and the job's
 * events, and the job runs on to succeed.
 */
TY_TEST(a_rank_that_sleeps_longer_per_step_is_a_straggler_on_its_node)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(
	    e,
	    "[\"/bin/sh\",\"-c\",\"n=120; d=0.1; if [ $RANK = 1 ]; then n=12; d=1; fi; i=0; "
	    "while [ $i -lt $n ]; do i=$((i+1)); echo $i > $TRAINYARD_PROGRESS_FILE; "
	    "sleep $d; done\"]",
	    "\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"retry\":{\"system\":0}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 120000);
	json_t *att = e2e_attempts(e, id);
	const char *slow_node = NULL;
	const json_t *k;
	size_t i;

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	REQUIRE_INT_EQ(json_array_size(att), 1);
	json_array_foreach(ty_jpath(att, "[0].ranks"), i, k)
		if (json_integer_value(json_object_get(k, "rank")) == 1)
			slow_node = ty_jstr(k, "node");
	REQUIRE(slow_node != NULL);
	REQUIRE(json_array_size(ty_jpath(att, "[0].stragglers")) >= 1);
	CHECK_INT_EQ(json_integer_value(ty_jpath(att, "[0].stragglers[0].rank")), 1);
	CHECK_STR_EQ(ty_jstr(att, "[0].stragglers[0].node"), slow_node);
	CHECK(events_of(e, id, "straggler") >= 1);
	CHECK_INT_EQ(json_array_size(ty_jpath(att, "[0].progress")), 2);
	json_decref(att);
	json_decref(job);
	reset_nodes(e);
}
