/* The token bucket behind per-token rate limits (api_bucket_take), on a given clock. */
#include "api.h"
#include "ty_test.h"

TY_TEST(bucket_table)
{
	/* one bucket per case, a run of takes at the given times */
	static const struct {
		double rps, burst;
		struct {
			double now;
			bool taken;
			int retry_after;
		} steps[8];
		int n;
	} cases[] = {
		/* a full bucket of 3 at 1/s: 3 pass, the 4th waits 1 s */
		{1, 3, {{10, true, 0}, {10, true, 0}, {10, true, 0}, {10, false, 1}}, 4},
		/* half a token back after 0.5 s: still 1 s (rounded up), then one passes */
		{1, 1, {{10, true, 0}, {10.5, false, 1}, {11.0, true, 0}, {11.0, false, 1}}, 4},
		/* 2/s refills a token in 0.5 s, yet Retry-After is never below 1 */
		{2, 2, {{0, true, 0}, {0, true, 0}, {0, false, 1}, {0.5, true, 0}}, 4},
		/* any fraction of a second left rounds up to 1 */
		{1, 1, {{5, true, 0}, {5, false, 1}, {5.75, false, 1}, {6, true, 0}}, 4},
		/* 1/s with 3 tokens owed after a burst of 5 then 2 s: 1 s, not 0 */
		{1, 5, {{0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0}, {0, true, 0},
			{2, true, 0}, {2, true, 0}, {2, false, 1}},
		 8},
		/* refill never goes above the burst */
		{1, 2, {{0, true, 0}, {0, true, 0}, {100, true, 0}, {100, true, 0}, {100, false, 1}},
		 5},
		/* a clock that goes backwards refills nothing and is no error */
		{1, 1, {{10, true, 0}, {9, false, 1}, {10.5, false, 1}, {11, true, 0}}, 4},
		/* a high rate: a bucket empty by 0.999 tokens needs 1 s at most, never 0 */
		{1000, 1, {{0, true, 0}, {0, false, 1}, {0.002, true, 0}}, 3},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct api_bucket b = {.tokens = cases[i].burst, .last = cases[i].steps[0].now};

		for (int k = 0; k < cases[i].n; k++) {
			int wait = -1;
			bool taken;

			ty_test_context("case %zu step %d (t=%.3f)", i, k, cases[i].steps[k].now);
			taken = api_bucket_take(&b, cases[i].steps[k].now, cases[i].rps,
						cases[i].burst, &wait);
			CHECK_INT_EQ(taken, cases[i].steps[k].taken);
			CHECK_INT_EQ(wait, cases[i].steps[k].retry_after);
		}
	}
}

TY_TEST(bucket_retry_after_rounds_up)
{
	/* at 1 token per 1 s with 0.2 left, 0.8 s are needed: Retry-After 1 */
	struct api_bucket b = {.tokens = 0.2, .last = 0};
	int wait = 0;

	CHECK(!api_bucket_take(&b, 0, 1, 5, &wait));
	CHECK_INT_EQ(wait, 1);
	/* an empty bucket at 1 rps: 1 s */
	b = (struct api_bucket){.tokens = 0, .last = 0};
	CHECK(!api_bucket_take(&b, 0, 1, 1, &wait));
	CHECK_INT_EQ(wait, 1);
}

TY_TEST(limiter_keys_are_independent)
{
	struct api_ratelimit *rl = api_ratelimit_new(1, 2);

	REQUIRE(rl != NULL);
	CHECK_INT_EQ(api_ratelimit_take(rl, 7, 100), 0);
	CHECK_INT_EQ(api_ratelimit_take(rl, 7, 100), 0);
	CHECK_INT_EQ(api_ratelimit_take(rl, 7, 100), 1);
	/* another key starts full */
	CHECK_INT_EQ(api_ratelimit_take(rl, 8, 100), 0);
	/* many keys: the tables grow and keep every bucket */
	for (int64_t k = 1000; k < 3000; k++)
		CHECK_INT_EQ(api_ratelimit_take(rl, k, 100), 0);
	for (int64_t k = 1000; k < 3000; k++)
		CHECK_INT_EQ(api_ratelimit_take(rl, k, 100), 0);
	for (int64_t k = 1000; k < 3000; k += 500)
		CHECK_INT_EQ(api_ratelimit_take(rl, k, 100), 1);
	CHECK_INT_EQ(api_ratelimit_take(rl, 7, 101), 0);
	api_ratelimit_free(rl);
	/* 0 rps is off: no limiter */
	CHECK(api_ratelimit_new(0, 5) == NULL);
}
