/*
 * The usage ledger's pure parts (scheduler/ledger.c): the rate table
 * (--rates-file) and a row's arithmetic — GPU-seconds, cost by pool and
 * model with the pool's default, the work lost since the last valid
 * checkpoint, and the goodput categories with their precedence (a
 * straggler's share of the gang's time included).
 */
#include "scheduler.h"
#include "ty_test.h"

#include <math.h>
#include <string.h>

#define RATES                                                                                      \
	"{\"spot\": {\"default\": 1.2, \"H100\": 2.5}, \"on-demand\": {\"H100\": 6, "              \
	"\"default\": 3}, \"reserved\": {\"A100\": 0.5}}"

static bool near(double a, double b)
{
	return fabs(a - b) < 1e-9;
}

TY_TEST(rate_of_a_model_then_its_pools_default_then_zero)
{
	static const struct {
		const char *pool, *model;
		double want;
	} cases[] = {
	    {"spot", "H100", 2.5},     {"spot", "A100", 1.2},	 {"spot", "", 1.2},
	    {"spot", NULL, 1.2},       {"on-demand", "H100", 6}, {"on-demand", "L4", 3},
	    {"reserved", "A100", 0.5}, {"reserved", "H100", 0},	 {"nowhere", "H100", 0},
	    {"SPOT", "H100", 0},       {"spot", "h100", 1.2},
	};
	struct sched_rates r = {0};
	struct ty_err err = {0};

	REQUIRE_INT_EQ(sched_rates_parse(&r, RATES, &err), 0);
	CHECK_INT_EQ(r.n, 5);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double got = sched_rate_of(&r, cases[i].pool, cases[i].model);

		ty_test_context("%s/%s", cases[i].pool, cases[i].model ? cases[i].model : "(null)");
		if (!near(got, cases[i].want))
			FAIL("rate %g, want %g", got, cases[i].want);
	}
	sched_rates_free(&r);
	CHECK_INT_EQ(r.n, 0);
	/* no table at all: everything is free */
	CHECK(near(sched_rate_of(&r, "spot", "H100"), 0));
}

TY_TEST(bad_rate_tables_are_refused_naming_the_fault)
{
	static const struct {
		const char *json, *says;
	} cases[] = {
	    {"[]", "expected an object of pools"},
	    {"{\"spot\": 1.2}", "'spot' must be an object of GPU models"},
	    {"{\"spot\": {\"H100\": -1}}", "'spot'.'H100' must be a number >= 0"},
	    {"{\"spot\": {\"H100\": \"2\"}}", "'spot'.'H100' must be a number >= 0"},
	    {"{\"spot\": {\"H100\": null}}", "'spot'.'H100' must be a number >= 0"},
	    {"{\"\": {\"H100\": 1}}", "pool name '' must be"},
	    {"{\"spot\": {\"\": 1}}", "GPU model name '' must be"},
	    {"{\"spot\": {\"H100\": 1, \"H100\": 2}}", "duplicate"},
	    {"{\"spot\": {", ""},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sched_rates r = {0};
		struct ty_err err = {0};

		ty_test_context("%s", cases[i].json);
		CHECK(sched_rates_parse(&r, cases[i].json, &err) < 0);
		CHECK(r.v == NULL && r.n == 0);
		if (!strstr(err.msg, cases[i].says))
			FAIL("message '%s' does not say '%s'", err.msg, cases[i].says);
	}
}

TY_TEST(ledger_arithmetic_table)
{
	static const struct {
		const char *name;
		struct sched_ledger_in in;
		double gpu_seconds, lost, cost;
	} cases[] = {
	    /* 8 GPUs for an hour at 2.5 per GPU-hour */
	    {"succeeded: nothing lost", {8, 0, 3600000, 0, "succeeded", 2.5, -1, NULL, 0, 0, 0, 0}, 28800, 0, 20},
	    {"succeeded after a checkpoint: nothing lost",
	     {8, 0, 3600000, 1800000, "succeeded", 2.5, -1, NULL, 0, 0, 0, 0},
	     28800,
	     0,
	     20},
	    {"failed without a checkpoint: all of it",
	     {8, 0, 3600000, 0, "failed", 2.5, -1, NULL, 0, 0, 0, 0},
	     28800,
	     28800,
	     20},
	    {"preempted 15 min after its checkpoint",
	     {4, 1000, 3601000, 2701000, "failed", 1.2, -1, NULL, 0, 0, 0, 0},
	     14400,
	     3600,
	     4.8},
	    {"checkpoint at the very end", {2, 0, 60000, 60000, "failed", 1, -1, NULL, 0, 0, 0, 0}, 120, 0, 120.0 / 3600},
	    {"checkpoint before the start (clamped)",
	     {2, 10000, 70000, 5000, "failed", 1, -1, NULL, 0, 0, 0, 0},
	     120,
	     120,
	     120.0 / 3600},
	    {"checkpoint after the end (nothing lost)",
	     {2, 0, 60000, 90000, "failed", 1, -1, NULL, 0, 0, 0, 0},
	     120,
	     0,
	     120.0 / 3600},
	    {"cancelled: nothing lost", {1, 0, 1800000, 0, "cancelled", 3, -1, NULL, 0, 0, 0, 0}, 1800, 0, 1.5},
	    {"no rate: free", {16, 0, 7200000, 0, "failed", 0, -1, NULL, 0, 0, 0, 0}, 115200, 115200, 0},
	    {"a negative rate counts as 0", {1, 0, 3600000, 0, "succeeded", -5, -1, NULL, 0, 0, 0, 0}, 3600, 0, 0},
	    {"no GPUs: nothing", {0, 0, 3600000, 0, "failed", 9, -1, NULL, 0, 0, 0, 0}, 0, 0, 0},
	    {"ended before it started: nothing", {4, 5000, 1000, 0, "failed", 1, -1, NULL, 0, 0, 0, 0}, 0, 0, 0},
	    {"milliseconds count", {3, 0, 1500, 0, "failed", 3600, -1, NULL, 0, 0, 0, 0}, 4.5, 4.5, 4.5},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sched_ledger_row row;

		ty_test_context("%s", cases[i].name);
		memset(&row, 0xff, sizeof(row));
		sched_ledger_compute(&row, &cases[i].in);
		if (!near(row.gpu_seconds, cases[i].gpu_seconds))
			FAIL("gpu_seconds %.9g, want %.9g", row.gpu_seconds, cases[i].gpu_seconds);
		if (!near(row.lost_gpu_seconds, cases[i].lost))
			FAIL("lost_gpu_seconds %.9g, want %.9g", row.lost_gpu_seconds,
			     cases[i].lost);
		if (!near(row.cost, cases[i].cost))
			FAIL("cost %.9g, want %.9g", row.cost, cases[i].cost);
	}
}

TY_TEST(idle_gpu_seconds_are_the_nodes_idle_time_on_every_gpu_capped_by_what_was_held)
{
	static const struct {
		const char *name;
		int gpus;
		int64_t start_ms, end_ms;
		double idle_seconds, want;
	} cases[] = {
	    {"8 GPUs idle 10 min of an hour", 8, 0, 3600000, 600, 4800},
	    {"busy throughout", 8, 0, 3600000, 0, 0},
	    {"no telemetry: unknown", 8, 0, 3600000, -1, -1},
	    {"idle longer than held: capped", 2, 0, 60000, 90, 120},
	    {"fractions of seconds count", 3, 0, 3600000, 1.5, 4.5},
	    {"no GPUs: nothing idle", 0, 0, 3600000, 600, 0},
	    {"ended before it started: nothing", 4, 5000, 1000, 30, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sched_ledger_in in = {
		    .gpus = cases[i].gpus,
		    .start_ms = cases[i].start_ms,
		    .end_ms = cases[i].end_ms,
		    .outcome = "succeeded",
		    .idle_seconds = cases[i].idle_seconds,
		};
		struct sched_ledger_row row;

		ty_test_context("%s", cases[i].name);
		sched_ledger_compute(&row, &in);
		if (cases[i].want < 0 ? row.idle_gpu_seconds >= 0
				      : !near(row.idle_gpu_seconds, cases[i].want))
			FAIL("idle_gpu_seconds %.9g, want %.9g", row.idle_gpu_seconds,
			     cases[i].want);
		CHECK(row.idle_gpu_seconds <= row.gpu_seconds);
	}
}

/* A straggler share's steps, and how many: the last two fields of sched_ledger_in. */
#define SHARES(...)                                                                                \
	(const struct sched_straggler_share[]){__VA_ARGS__},                                       \
	    (int)(sizeof((const struct sched_straggler_share[]){__VA_ARGS__}) /                    \
		  sizeof(struct sched_straggler_share))

/* The categories of one row, in PROTO_GOODPUT_CATEGORIES' order, GPU-ms. */
struct goodput_want {
	int64_t useful, checkpoint, idle, lost_preemption, lost_user, lost_infra, hang, straggler;
};

TY_TEST(goodput_categories_table_add_up_exactly)
{
	const struct {
		const char *name;
		struct sched_ledger_in in;
		struct goodput_want want;
	} cases[] = {
	    /*
	     * gpus, start, end, checkpoint, outcome, rate, idle s, class, ckpt write ms, queued,
	     * the straggler share's steps ({from ms, share}, ...) and their count
	     */
	    {"succeeded, nothing else: all useful",
	     {8, 0, 3600000, 0, "succeeded", 1, -1, NULL, 0, 0, NULL, 0},
	     {28800000, 0, 0, 0, 0, 0, 0, 0}},
	    {"succeeded with 60 s of checkpoint writing and 10 min idle",
	     {8, 0, 3600000, 1800000, "succeeded", 1, 600, NULL, 60000, 0, NULL, 0},
	     {28800000 - 480000 - 4800000, 480000, 4800000, 0, 0, 0, 0, 0}},
	    {"preempted 15 min after its checkpoint",
	     {4, 1000, 3601000, 2701000, "failed", 1, -1, "preempted", 0, 0, NULL, 0},
	     {10800000, 0, 0, 3600000, 0, 0, 0, 0}},
	    {"hardware failure without a checkpoint: all infrastructure",
	     {2, 0, 60000, 0, "failed", 1, 30, "hardware", 5000, 0, NULL, 0},
	     {0, 0, 0, 0, 0, 120000, 0, 0}},
	    {"node lost after a checkpoint, idle and writing come from the kept part",
	     {2, 0, 100000, 40000, "failed", 1, 10, "node_lost", 5000, 0, NULL, 0},
	     {80000 - 10000 - 20000, 10000, 20000, 0, 0, 120000, 0, 0}},
	    {"system and start_timeout are infrastructure",
	     {1, 0, 1000, 0, "failed", 1, -1, "system", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 0, 1000, 0, 0}},
	    {"start_timeout", {1, 0, 1000, 0, "failed", 1, -1, "start_timeout", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 0, 1000, 0, 0}},
	    {"hang since the checkpoint",
	     {1, 0, 10000, 4000, "failed", 1, -1, "hang", 0, 0, NULL, 0},
	     {4000, 0, 0, 0, 0, 0, 6000, 0}},
	    {"user failure", {3, 0, 2000, 0, "failed", 1, -1, "user", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 6000, 0, 0, 0}},
	    {"oom is the user's", {1, 0, 2000, 0, "failed", 1, -1, "oom", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 2000, 0, 0, 0}},
	    {"timeout is the user's", {1, 0, 2000, 0, "failed", 1, -1, "timeout", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 2000, 0, 0, 0}},
	    {"no class is the user's: only a known class blames the infrastructure",
	     {1, 0, 2000, 0, "failed", 1, -1, NULL, 0, 0, NULL, 0},
	     {0, 0, 0, 0, 2000, 0, 0, 0}},
	    {"an unknown class is the user's", {1, 0, 2000, 0, "failed", 1, -1, "gremlins", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 2000, 0, 0, 0}},
	    {"cancelled: nothing lost", {1, 0, 2000, 0, "cancelled", 1, -1, "cancelled", 0, 0, NULL, 0},
	     {2000, 0, 0, 0, 0, 0, 0, 0}},
	    {"checkpoint writing longer than the kept part: capped",
	     {2, 0, 10000, 3000, "failed", 1, -1, "preempted", 60000, 0, NULL, 0},
	     {0, 6000, 0, 14000, 0, 0, 0, 0}},
	    {"idle longer than what is left after writing: capped",
	     {2, 0, 10000, 0, "succeeded", 1, 9, NULL, 4000, 0, NULL, 0},
	     {0, 8000, 12000, 0, 0, 0, 0, 0}},
	    {"a negative writing time counts as 0",
	     {1, 0, 1000, 0, "succeeded", 1, -1, NULL, -50, 0, NULL, 0},
	     {1000, 0, 0, 0, 0, 0, 0, 0}},
	    {"fractions of an idle second round to the millisecond",
	     {3, 0, 10000, 0, "succeeded", 1, 1.2504, NULL, 0, 0, NULL, 0},
	     {30000 - 3750, 0, 3750, 0, 0, 0, 0, 0}},
	    {"no GPUs: nothing", {0, 0, 3600000, 0, "failed", 1, 5, "hardware", 10, 0, NULL, 0},
	     {0, 0, 0, 0, 0, 0, 0, 0}},
	    {"ended before it started: nothing", {4, 5000, 1000, 0, "failed", 1, -1, "hang", 0, 0, NULL, 0},
	     {0, 0, 0, 0, 0, 0, 0, 0}},
	    {"a straggler at half the median from 30 min in: half the rest is straggler",
	     {8, 0, 3600000, 0, "succeeded", 1, -1, NULL, 0, 0, SHARES({1800000, 0.5})},
	     {28800000 - 7200000, 0, 0, 0, 0, 0, 0, 7200000}},
	    {"a verdict that lost nothing changes nothing",
	     {8, 0, 3600000, 0, "succeeded", 1, -1, NULL, 0, 0, SHARES({1800000, 0})},
	     {28800000, 0, 0, 0, 0, 0, 0, 0}},
	    {"failed after the verdict: straggler until the checkpoint, lost after it",
	     {2, 0, 100000, 60000, "failed", 1, -1, "hardware", 0, 0, SHARES({20000, 0.25})},
	     {100000, 0, 0, 0, 0, 80000, 0, 20000}},
	    {"a verdict in the lost window: the lost work is only lost",
	     {2, 0, 100000, 60000, "failed", 1, -1, "preempted", 0, 0, SHARES({70000, 0.5})},
	     {120000, 0, 0, 80000, 0, 0, 0, 0}},
	    {"a verdict before the start counts from the start",
	     {1, 10000, 20000, 0, "succeeded", 1, -1, NULL, 0, 0, SHARES({5000, 0.1})},
	     {9000, 0, 0, 0, 0, 0, 0, 1000}},
	    {"checkpoint writing and idle GPUs come first: straggler capped",
	     {2, 0, 10000, 0, "succeeded", 1, 6, NULL, 2000, 0, SHARES({1, 1})},
	     {0, 4000, 12000, 0, 0, 0, 0, 4000}},
	    {"a fraction above 1 counts as 1",
	     {1, 0, 1000, 0, "succeeded", 1, -1, NULL, 0, 0, SHARES({500, 3})},
	     {500, 0, 0, 0, 0, 0, 0, 500}},
	    {"straggler time rounds to the millisecond",
	     {3, 0, 1000, 0, "succeeded", 1, -1, NULL, 0, 0, SHARES({1, 1.0 / 3})},
	     {2001, 0, 0, 0, 0, 0, 0, 999}},
	    {"a straggler that recovers counts only while it straggled",
	     {8, 0, 3600000, 0, "succeeded", 1, -1, NULL, 0, 0,
	      SHARES({1800000, 0.5}, {2700000, 0})},
	     {28800000 - 3600000, 0, 0, 0, 0, 0, 0, 3600000}},
	    {"a later, slower straggler counts from its own verdict",
	     {1, 0, 3600000, 0, "succeeded", 1, -1, NULL, 0, 0,
	      SHARES({600000, 0.25}, {2400000, 0.5})},
	     {3600000 - 1050000, 0, 0, 0, 0, 0, 0, 1050000}},
	    {"steps past the checkpoint of a failed attempt are lost work only",
	     {2, 0, 100000, 60000, "failed", 1, -1, "hardware", 0, 0,
	      SHARES({20000, 0.5}, {50000, 0.25}, {70000, 1})},
	     {120000 - 35000, 0, 0, 0, 0, 80000, 0, 35000}},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct goodput_want *w = &cases[i].want;
		const int64_t want[PROTO_GOODPUT_COUNT] = {
		    [PROTO_GOODPUT_USEFUL] = w->useful,
		    [PROTO_GOODPUT_CHECKPOINT] = w->checkpoint,
		    [PROTO_GOODPUT_IDLE] = w->idle,
		    [PROTO_GOODPUT_LOST_PREEMPTION] = w->lost_preemption,
		    [PROTO_GOODPUT_LOST_USER] = w->lost_user,
		    [PROTO_GOODPUT_LOST_INFRA] = w->lost_infra,
		    [PROTO_GOODPUT_HANG] = w->hang,
		    [PROTO_GOODPUT_STRAGGLER] = w->straggler,
		};
		struct sched_ledger_row row;
		int64_t sum = 0;

		ty_test_context("%s", cases[i].name);
		memset(&row, 0xff, sizeof(row));
		sched_ledger_compute(&row, &cases[i].in);
		for (int k = 0; k < PROTO_GOODPUT_COUNT; k++) {
			if (row.goodput[k] != want[k])
				FAIL("category %d: %lld GPU-ms, want %lld", k,
				     (long long)row.goodput[k], (long long)want[k]);
			sum += row.goodput[k];
		}
		CHECK_INT_EQ(sum, row.gpu_ms);
		if (!near((double)row.gpu_ms / 1000.0, row.gpu_seconds))
			FAIL("gpu_ms %lld is not gpu_seconds %.9g", (long long)row.gpu_ms,
			     row.gpu_seconds);
		/* the lost categories are the ledger's lost work, nothing more */
		CHECK_INT_EQ(row.goodput[PROTO_GOODPUT_LOST_PREEMPTION] +
				 row.goodput[PROTO_GOODPUT_LOST_USER] +
				 row.goodput[PROTO_GOODPUT_LOST_INFRA] +
				 row.goodput[PROTO_GOODPUT_HANG],
			     llround(row.lost_gpu_seconds * 1000));
	}
}

TY_TEST(straggler_lost_is_the_share_below_the_gang_median)
{
	static const struct {
		const char *name;
		double rate, median, want;
	} cases[] = {
	    {"a quarter of the median", 0.5, 2, 0.75},
	    {"stalled", 0, 2, 1},
	    {"at the median", 2, 2, 0},
	    {"faster than the median", 3, 2, 0},
	    {"no median", 1, -1, 0},
	    {"a zero median", 1, 0, 0},
	    {"no rate", -1, 2, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		double got = sched_straggler_lost(cases[i].rate, cases[i].median);

		ty_test_context("%s", cases[i].name);
		if (!near(got, cases[i].want))
			FAIL("lost %.9g, want %.9g", got, cases[i].want);
	}
}

TY_TEST(queue_wait_is_beside_the_categories)
{
	static const struct {
		const char *name;
		int gpus;
		int64_t queued_ms, start_ms;
		int64_t want;
	} cases[] = {
	    {"4 GPUs waited 30 s", 4, 10000, 40000, 120000},
	    {"placed at once", 4, 40000, 40000, 0},
	    {"unknown submission", 4, 0, 40000, 0},
	    {"a clock that went back counts nothing", 2, 50000, 40000, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sched_ledger_in in = {
		    .gpus = cases[i].gpus,
		    .start_ms = cases[i].start_ms,
		    .end_ms = cases[i].start_ms + 1000,
		    .outcome = "succeeded",
		    .idle_seconds = -1,
		    .queued_ms = cases[i].queued_ms,
		};
		struct sched_ledger_row row;

		ty_test_context("%s", cases[i].name);
		sched_ledger_compute(&row, &in);
		CHECK_INT_EQ(row.queue_wait_gpu_ms, cases[i].want);
		CHECK_INT_EQ(row.goodput[PROTO_GOODPUT_USEFUL], row.gpu_ms);
	}
}
