/* executor/progress.c: progress files read, steps and step rates. */
#include "exec.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(progress_files_are_json_a_bare_step_or_nothing)
{
	static const struct {
		const char *text;
		int64_t step;
		double samples;
		const char *fault; /* NULL: read */
	} rows[] = {
	    /* what the SDK writes */
	    {"{\"time\": 1764000000.5, \"step\": 120, \"samples_per_second\": 512.5}\n", 120, 512.5,
	     NULL},
	    {"{\"step\": 0}", 0, -1, NULL},
	    {"{\"samples_per_second\": 3}", -1, 3, NULL},
	    {"{\"time\": 1, \"step\": null}", -1, -1, NULL},
	    /* a shell job's */
	    {"42\n", 42, -1, NULL},
	    {"  7  ", 7, -1, NULL},
	    /* a touch */
	    {"", -1, -1, NULL},
	    {" \n\t", -1, -1, NULL},
	    /* garbage */
	    {"step 5\n", -1, -1, "not a step"},
	    {"-3\n", -1, -1, "not a step"},
	    {"12 13\n", -1, -1, "not a step"},
	    {"99999999999999999999999\n", -1, -1, "not a step"},
	    {"{\"step\": 1", -1, -1, "not JSON"},
	    {"{\"step\": \"5\"}", -1, -1, "step must be"},
	    {"{\"step\": -1}", -1, -1, "step must be"},
	    {"{\"step\": 1.5}", -1, -1, "step must be"},
	    {"{\"step\": 5, \"samples_per_second\": \"fast\"}", -1, -1, "samples_per_second must"},
	    {"{\"step\": 5, \"samples_per_second\": -1}", -1, -1, "samples_per_second must"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		int64_t step = 99;
		double samples = 99;
		int rc;

		ty_test_context("%s", rows[i].text);
		rc = exec_progress_parse(&step, &samples, rows[i].text, strlen(rows[i].text), &err);
		if (rows[i].fault) {
			CHECK_INT_EQ(rc, TY_EPARSE);
			CHECK(strstr(err.msg, rows[i].fault) != NULL);
		} else {
			CHECK_INT_EQ(rc, 0);
		}
		CHECK_INT_EQ(step, rows[i].step);
		CHECK(samples == rows[i].samples);
	}
}

TY_TEST(progress_files_too_long_or_with_nul_are_refused)
{
	static char big[EXEC_PROGRESS_FILE_MAX + 2];
	struct ty_err err = {0};
	int64_t step;
	double samples;

	memset(big, ' ', sizeof(big) - 1);
	big[0] = '1';
	CHECK_INT_EQ(exec_progress_parse(&step, &samples, big, EXEC_PROGRESS_FILE_MAX, &err), 0);
	CHECK_INT_EQ(step, 1);
	CHECK_INT_EQ(exec_progress_parse(&step, &samples, big, EXEC_PROGRESS_FILE_MAX + 1, &err),
		     TY_EPARSE);
	CHECK(strstr(err.msg, "longer than 4096 bytes") != NULL);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(exec_progress_parse(&step, &samples, "12\0", 3, &err), TY_EPARSE);
	CHECK_STR_EQ(err.msg, "holds a NUL byte");
}

TY_TEST(a_step_change_is_life_and_the_rate_is_over_the_window)
{
	struct exec_progress p = {0};
	const int64_t w = EXEC_PROGRESS_WINDOW_MS;

	CHECK(exec_progress_rate(&p, 1000) == -1); /* no step yet */
	CHECK(exec_progress_note(&p, 10, -1, 1000, 5000));
	CHECK(p.have_step);
	CHECK_INT_EQ(p.step_ms, 1000);
	CHECK_INT_EQ(p.step_wall_ms, 5000);
	CHECK(exec_progress_rate(&p, 2000) == -1); /* one change: not yet a rate */
	/* the same step again is no life, but carries the rank's samples/s */
	CHECK(!exec_progress_note(&p, 10, 64, 1500, 5500));
	CHECK_INT_EQ(p.step_ms, 1000);
	CHECK(p.samples_per_second == 64);
	/* two steps a second */
	for (int i = 1; i <= 10; i++)
		CHECK(exec_progress_note(&p, 10 + 2 * i, -1, 1000 + 1000 * i, 5000 + 1000 * i));
	CHECK(p.samples_per_second == -1);
	CHECK(exec_progress_rate(&p, 11000) == 2.0);
	/* a stall makes the rate fall, and after a whole window it is 0 */
	CHECK(exec_progress_rate(&p, 21000) == 1.0);
	CHECK(exec_progress_rate(&p, 11000 + w) == 0);
	/* later changes: the rate is over the window only, from the newest change before it */
	for (int i = 1; i <= 40; i++)
		exec_progress_note(&p, 30 + i, -1, 11000 + w + 1000 * i, 0);
	CHECK_INT_EQ(p.n, EXEC_PROGRESS_RING);
	CHECK(exec_progress_rate(&p, 11000 + w + 40000) == 1.0);
	/* a step going back (the job counts afresh) starts the rate afresh */
	CHECK(exec_progress_note(&p, 3, -1, 200000, 0));
	CHECK_INT_EQ(p.n, 1);
	CHECK(exec_progress_rate(&p, 201000) == -1);
	CHECK(exec_progress_note(&p, 5, -1, 202000, 0));
	CHECK(exec_progress_rate(&p, 204000) == 0.5);
}
