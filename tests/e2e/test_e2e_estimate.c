/*
 * Start-time estimates and what-if through the whole stack
 * (docs/scheduling.md, "Start-time estimates" and "What-if"): with the
 * cluster filled by jobs of known runtimes, a waiting job's estimate is the
 * end it waits for, and `jobctl submit --what-if` names a smaller shape that
 * starts now.
 */
#include "e2e.h"
#include "ty_test.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLEEP "[\"/bin/sh\",\"-c\",\"sleep 300\"]"
#define WAIT_MS 60000

/* ms since the epoch of an RFC 3339 time the API wrote, or -1 */
static int64_t ms_of(const char *ts)
{
	int64_t ms;

	return ts && ty_time_parse_rfc3339(&ms, ts) ? ms : -1;
}

/* GET /v1/jobs/ID once its estimate is published (the job document, new) */
static json_t *estimated(struct e2e *e, long long id)
{
	struct ty_resp r = {0};

	for (int i = 0; i < WAIT_MS / 100; i++) {
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", id), e->token, NULL, NULL);
		REQUIRE_INT_EQ(r.status, 200);
		if (ty_jstr(r.json, "estimated_start")) {
			json_t *j = json_incref(r.json);

			ty_resp_free(&r);
			return j;
		}
		ty_resp_free(&r);
		usleep(100 * 1000);
	}
	FAIL("job %lld got no estimate within %d ms", id, WAIT_MS);
	ty_test_abort();
	return NULL;
}

/* jobctl's standard output for `jobctl submit ARGS` (shell-quoted), its exit status in *status */
static const char *jobctl_submit(struct e2e *e, const char *args, int *status)
{
	const char *cmd =
	    ty_test_strf("%s submit --server %s --token %s %s", e2e_bin_path("jobctl"),
			 ty_test_api_url(ty_stack_get()->api), e->token, args);
	FILE *p = popen(cmd, "r");
	static char out[8192];
	size_t n;

	REQUIRE(p != NULL);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	*status = pclose(p);
	printf("$ jobctl submit %s\n%s", args, out);
	return out;
}

TY_TEST(a_filled_cluster_estimates_the_end_and_what_if_finds_a_shape_that_starts_now)
{
	struct e2e *e = e2e_get();
	long long a, b, c;
	json_t *ja, *jc;
	int64_t a_start, c_est;
	const char *out, *line;
	int status;

	/* node X: a (2 GPUs, up to 10 min); node Y: b (1 GPU, up to 15 min), 1 GPU left */
	a = e2e_submit(e, SLEEP,
		       "\"resources\":{\"nodes\":1,\"gpus_per_node\":2},"
		       "\"max_runtime_seconds\":600");
	ja = e2e_wait_state(e, a, "running", WAIT_MS);
	b = e2e_submit(e, SLEEP,
		       "\"resources\":{\"nodes\":1,\"gpus_per_node\":1},"
		       "\"max_runtime_seconds\":900");
	json_decref(e2e_wait_state(e, b, "running", WAIT_MS));
	{
		/* a gang's expected end counts from its attempt's creation */
		json_t *att = e2e_attempts(e, a);

		a_start = ms_of(ty_jstr(att, "[0].created_at"));
		json_decref(att);
	}
	REQUIRE(a_start > 0);

	/* c needs a whole node: X once a ends, by its max runtime */
	c = e2e_submit(e, SLEEP,
		       "\"resources\":{\"nodes\":1,\"gpus_per_node\":2},"
		       "\"max_runtime_seconds\":60");
	jc = estimated(e, c);
	c_est = ms_of(ty_jstr(jc, "estimated_start"));
	ty_test_context("a started %lld, c estimated %lld", (long long)a_start, (long long)c_est);
	/* within a cycle (200 ms), the timestamps' whole seconds and the start's lag */
	CHECK(c_est >= a_start + 600 * 1000 - 3000);
	CHECK(c_est <= a_start + 600 * 1000 + 3000);
	CHECK_INT_EQ(json_integer_value(ty_jpath(jc, "estimate.waits_for[0]")), a);
	ty_test_context(NULL);

	/* 2 nodes x 1 GPU waits for X (after c); 1 node x 1 GPU fits Y now */
	out = jobctl_submit(e,
			    ty_test_strf("--what-if --team %s --nodes 2 --gpus-per-node 1 "
					 "--max-runtime 60 -- true",
					 e->team),
			    &status);
	CHECK_INT_EQ(status, 0);
	CHECK(strncmp(out, "as asked: ", 10) == 0);
	CHECK(strstr(out, "as asked: now") == NULL);
	CHECK(strstr(out, "\nsooner:\n  1 node instead of 2: now\n") != NULL);
	CHECK(strstr(out, "(nothing was submitted; as of ") != NULL);
	line = strstr(out, "as asked: ");
	CHECK(line && strstr(line, " UTC (after job") != NULL);
	/* nothing was submitted */
	{
		struct ty_resp r = {0};

		ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&state=pending", e->team),
			e->token, NULL, NULL);
		REQUIRE_INT_EQ(r.status, 200);
		CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 1);
		ty_resp_free(&r);
	}
	/* -o json is the API's answer */
	out = jobctl_submit(e,
			    ty_test_strf("-o json --what-if --team %s --nodes 2 --gpus-per-node 1 "
					 "-- true",
					 e->team),
			    &status);
	CHECK_INT_EQ(status, 0);
	{
		json_t *j = json_loads(out, 0, NULL);

		REQUIRE(j != NULL);
		CHECK(json_is_false(json_object_get(j, "starts_now")));
		CHECK_INT_EQ(
		    json_integer_value(ty_jpath(j, "alternatives[0].spec_patch.resources.nodes")),
		    1);
		json_decref(j);
	}
	json_decref(ja);
	json_decref(jc);
	{
		const long long ids[] = {a, b, c};

		for (int i = 0; i < 3; i++) {
			struct ty_resp r = {0};

			ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", ids[i]), e->token,
				"{}", NULL);
			ty_resp_free(&r);
		}
	}
}
