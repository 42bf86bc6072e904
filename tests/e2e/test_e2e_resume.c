/*
 * One resume point per gang through the whole stack: each node keeps its
 * own checkpoint directory (its own --state-dir), node of rank 1 sees a
 * newer checkpoint than the one the scheduler recorded, and the retry
 * resumes from the scheduler's step on both nodes.
 */
#include "e2e.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

/*
 * Every rank writes step-1 (the same bytes on both nodes, as shared storage
 * would show them); rank 1 also writes step-2, which only its node sees.
 * Rank 0 waits for its node's one-second scan to report step 1, then fails
 * as the user's fault (retried, nobody blamed). A resumed rank writes where
 * it resumes from.
 */
static const char script[] =
    "D=$TRAINYARD_CHECKPOINT_DIR\n"
    "if [ -n \"$TRAINYARD_RESUME_FROM\" ]; then\n"
    "  echo \"$TRAINYARD_RESUME_FROM\" > \"$OUTDIR/resume.$RANK\"; exit 0\n"
    "fi\n"
    "mk() {\n"
    "  mkdir -p \"$D/step-$1\" && printf \"w$1\" > \"$D/step-$1/w\" &&\n"
    "  s=$(sha256sum \"$D/step-$1/w\" | cut -d' ' -f1) &&\n"
    "  printf '{\"step\": %d, \"files\": [{\"path\": \"w\", \"size\": 2, \"sha256\": \"%s\"}]}'"
    " \"$1\" \"$s\" > \"$D/step-$1/m.tmp\" && mv \"$D/step-$1/m.tmp\" \"$D/step-$1/MANIFEST.json\"\n"
    "}\n"
    "mk 1\n"
    "if [ \"$RANK\" = 1 ]; then mk 2; fi\n"
    "touch \"$OUTDIR/wrote.$RANK\"\n"
    "sleep 3\n"
    "if [ \"$RANK\" = 0 ]; then echo 'Traceback (most recent call last):'; "
    "echo 'ValueError: diverged'; exit 1; fi\n"
    "sleep 60\n";

TY_TEST(a_gang_resumes_from_the_schedulers_step_on_both_nodes)
{
	struct e2e *e = e2e_get();
	const char *path = ty_test_strf("%s/resume.sh", e->out);
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	const char *r0, *r1, *last;
	json_t *job, *att;
	size_t n;
	long long id;
	FILE *f;

	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs(script, f);
	REQUIRE(fclose(f) == 0);
	id = e2e_submit(e, ty_test_strf("[\"/bin/sh\",\"%s\"]", path),
			"\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"launch\":\"per_node\","
			"\"retry\":{\"user\":1}");
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 90000);
	att = e2e_attempts(e, id);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	REQUIRE_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "user");
	/* both ranks, on both nodes, resumed from step 1: not node-b's newer step 2 */
	r0 = e2e_read(e, "resume.0");
	r1 = e2e_read(e, "resume.1");
	REQUIRE(r0 && r1);
	CHECK(strstr(r0, "/step-1\n") != NULL);
	CHECK(strstr(r1, "/step-1\n") != NULL);
	CHECK_INT_EQ(ty_jint(att, "[1].resume.step"), 1);
	/*
	 * The table: step 1, verified by attempt 1's node of rank 0 (attempt 2's
	 * node of rank 0 may report node-b's step 2 too, should its scan run
	 * before the ranks end: newest first, so step 1 is the last row).
	 */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/checkpoints", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	n = json_array_size(ty_jpath(r.json, "items"));
	REQUIRE(n >= 1);
	last = ty_test_strf("items[%zu]", n - 1);
	CHECK_JINT(r.json, ty_test_strf("%s.step", last), 1);
	CHECK_JSTR(r.json, ty_test_strf("%s.status", last), "valid");
	CHECK_JSTR(r.json, ty_test_strf("%s.node", last), ty_jstr(att, "[0].nodes[0].node"));
	CHECK_JINT(r.json, ty_test_strf("%s.attempt", last), 1);
	ty_resp_free(&r);
	json_decref(att);
	json_decref(job);
}
