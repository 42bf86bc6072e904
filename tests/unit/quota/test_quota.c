/* quota/: usage decay, the fair-share factor, cohort arithmetic. */
#include "quota.h"
#include "ty_test.h"

#include <math.h>

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

TY_TEST(usage_decays_by_half_each_half_life)
{
	int64_t hl = QUOTA_DEFAULT_HALF_LIFE_S;

	CHECK(NEAR(quota_usage_decay(1000, hl * 1000, hl), 500));
	CHECK(NEAR(quota_usage_decay(1000, 2 * hl * 1000, hl), 250));
	CHECK(NEAR(quota_usage_decay(1000, 0, hl), 1000));
	CHECK(NEAR(quota_usage_decay(1000, -5, hl), 1000));
	CHECK(NEAR(quota_usage_decay(1000, 3600 * 1000, 0), 1000)); /* no half-life: no decay */
	/* decaying in two steps is decaying once */
	CHECK(NEAR(quota_usage_decay(quota_usage_decay(800, 1000 * 1000, hl), 2000 * 1000, hl),
		   quota_usage_decay(800, 3000 * 1000, hl)));
}

TY_TEST(fairshare_factor)
{
	static const struct {
		double usage, total, weight, total_weight, want;
	} rows[] = {
	    {0, 0, 1, 2, 1},		    /* nobody used anything */
	    {0, 100, 1, 2, 1},		    /* this team used nothing */
	    {50, 100, 1, 2, 0.5},	    /* used exactly its share */
	    {100, 100, 1, 2, 0.25},	    /* used twice its share */
	    {25, 100, 1, 2, 0.70710678118}, /* half its share */
	    {75, 100, 3, 4, 0.5},	    /* weight 3 of 4: share .75 */
	    {10, 100, 0, 4, 0},		    /* no share at all */
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		double f = quota_fairshare(rows[k].usage, rows[k].total, rows[k].weight,
					   rows[k].total_weight);

		ty_test_context("row %zu", k);
		if (!(fabs(f - rows[k].want) < 1e-9))
			FAIL("F = %.12f, want %.12f", f, rows[k].want);
	}
}

TY_TEST(cohort_arithmetic)
{
	/* lender L: nominal 16, lending limit 6, uses 4; borrower B: nominal 8, limit 10, uses 8 */
	struct quota_team l = {16, -1, 6, 4, true}, b = {8, 10, -1, 8, true},
			  solo = {8, 4, -1, 8, false};
	struct quota_cohort c = {0};

	quota_cohort_account(&c, &l, +1);
	quota_cohort_account(&c, &b, +1);
	CHECK_INT_EQ(quota_lendable(&l), 6); /* idle 12, lending limit 6 */
	CHECK_INT_EQ(quota_lendable(&b), 0);
	CHECK_INT_EQ(quota_borrowed(&b), 0);
	CHECK_INT_EQ(quota_cohort_available(&b, &c), 6);
	CHECK_INT_EQ(quota_admissible(&b, &c), 14);
	CHECK_INT_EQ(quota_check(&b, &c, 6), QUOTA_OK);
	CHECK_INT_EQ(quota_check(&b, &c, 7), QUOTA_OVER_COHORT);
	/* the lender itself may use all its nominal, the idle part of b is 0 */
	CHECK_INT_EQ(quota_check(&l, &c, 12), QUOTA_OK);
	CHECK_INT_EQ(quota_check(&l, &c, 13), QUOTA_OVER_COHORT);

	/* b borrows 6: nothing left for anyone else to borrow */
	quota_cohort_account(&c, &b, -1);
	b.used = 14;
	quota_cohort_account(&c, &b, +1);
	CHECK_INT_EQ(quota_borrowed(&b), 6);
	CHECK_INT_EQ(quota_cohort_available(&b, &c), 6); /* its own borrowing is what it has */
	CHECK_INT_EQ(quota_check(&b, &c, 1), QUOTA_OVER_COHORT);

	/* borrowing limit below what the cohort offers */
	b.borrowing_limit = 2;
	CHECK_INT_EQ(quota_admissible(&b, &c), 10);
	CHECK_INT_EQ(quota_check(&b, &c, 1), QUOTA_OVER_BORROW_LIMIT);

	/* no cohort: nominal is all */
	CHECK_INT_EQ(quota_admissible(&solo, NULL), 8);
	CHECK_INT_EQ(quota_check(&solo, NULL, 1), QUOTA_OVER_NOMINAL);
	CHECK_INT_EQ(quota_check(&solo, NULL, 0), QUOTA_OK);
	CHECK_INT_EQ(quota_lendable(&solo), 0);
}

TY_TEST(lender_using_its_nominal_shrinks_the_pool)
{
	struct quota_team l = {16, -1, -1, 0, true}, b = {0, -1, -1, 8, true};
	struct quota_cohort c = {0};

	quota_cohort_account(&c, &l, +1);
	quota_cohort_account(&c, &b, +1);
	CHECK_INT_EQ(quota_admissible(&b, &c), 16);
	/* the lender starts 12: 4 idle left, b already borrows 8 */
	quota_cohort_account(&c, &l, -1);
	l.used = 12;
	quota_cohort_account(&c, &l, +1);
	CHECK_INT_EQ(quota_cohort_available(&b, &c), 4);
	CHECK_INT_EQ(quota_check(&b, &c, 1), QUOTA_OVER_COHORT); /* 9 > 4: b must give back */
	/* the lender may still use its nominal: others' borrowing does not count against it */
	CHECK_INT_EQ(quota_check(&l, &c, 4), QUOTA_OK);
}

TY_TEST(job_charge_is_nodes_times_per_node)
{
	struct quota_vec v = quota_job_charge(4, 16, 2048);

	CHECK_INT_EQ(v.v[QUOTA_CPUS], 64);
	CHECK_INT_EQ(v.v[QUOTA_MEMORY_MB], 8192);
	v = quota_job_charge(0, 16, 2048); /* nonsense in, nothing charged */
	CHECK_INT_EQ(v.v[QUOTA_CPUS], 0);
	CHECK_INT_EQ(v.v[QUOTA_MEMORY_MB], 0);
	v = quota_job_charge(-3, 16, 2048);
	CHECK_INT_EQ(v.v[QUOTA_CPUS], 0);
	v = quota_job_charge(INT64_MAX / 2, 4, 1); /* saturates, never wraps negative */
	CHECK(v.v[QUOTA_CPUS] == INT64_MAX);
	CHECK_INT_EQ(v.v[QUOTA_MEMORY_MB], INT64_MAX / 2);
}

TY_TEST(caps_table)
{
	static const struct {
		const char *name;
		int64_t lim_cpu, lim_mem, used_cpu, used_mem, ask_cpu, ask_mem;
		int want;
	} rows[] = {
	    {"no caps", -1, -1, 1000, 1000, 1000, 1000, -1},
	    {"cpu fits exactly", 8, -1, 6, 0, 2, 99999, -1},
	    {"cpu one over", 8, -1, 6, 0, 3, 0, QUOTA_CPUS},
	    {"cpu alone too big", 8, -1, 0, 0, 9, 0, QUOTA_CPUS},
	    {"memory over", -1, 4096, 0, 3072, 1, 2048, QUOTA_MEMORY_MB},
	    {"both over: cpus named first", 1, 1, 1, 1, 1, 1, QUOTA_CPUS},
	    {"cap 0 refuses any ask", 0, -1, 0, 0, 1, 0, QUOTA_CPUS},
	    {"asking nothing passes a full cap", 4, 4, 4, 4, 0, 0, -1},
	    {"already over the cap (cap lowered)", 4, -1, 6, 0, 1, 0, QUOTA_CPUS},
	    {"huge ask does not overflow", 4, -1, 2, 0, INT64_MAX, 0, QUOTA_CPUS},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct quota_caps c = {{{rows[k].lim_cpu, rows[k].lim_mem}},
				       {{rows[k].used_cpu, rows[k].used_mem}}};
		struct quota_vec ask = {{rows[k].ask_cpu, rows[k].ask_mem}};

		ty_test_context("%s", rows[k].name);
		CHECK_INT_EQ(quota_caps_check(&c, &ask), rows[k].want);
	}
}

TY_TEST(vec_add_and_names)
{
	struct quota_vec v = {{1, 2}}, by = {{10, 20}};

	quota_vec_add(&v, &by, +1);
	CHECK_INT_EQ(v.v[QUOTA_CPUS], 11);
	CHECK_INT_EQ(v.v[QUOTA_MEMORY_MB], 22);
	quota_vec_add(&v, &by, -1);
	CHECK_INT_EQ(v.v[QUOTA_CPUS], 1);
	CHECK_STR_EQ(quota_res_name(QUOTA_CPUS), "CPUs");
	CHECK_STR_EQ(quota_res_name(QUOTA_MEMORY_MB), "MiB of memory");
	CHECK_STR_EQ(quota_res_name(QUOTA_NRES), "unknown resource");
}

TY_TEST(ceiling_is_nominal_plus_what_the_cohort_could_ever_lend)
{
	struct quota_team alone = {4, QUOTA_NO_LIMIT, QUOTA_NO_LIMIT, 3, false};
	struct quota_team capped = {4, 2, QUOTA_NO_LIMIT, 0, true};
	struct quota_team open = {4, QUOTA_NO_LIMIT, QUOTA_NO_LIMIT, 0, true};
	struct quota_team lender = {8, QUOTA_NO_LIMIT, 3, 8, true};
	char buf[256];

	CHECK(quota_lendable_max(&alone) == 0);
	CHECK(quota_lendable_max(&lender) == 3); /* its lending limit, whatever it uses now */
	CHECK(quota_lendable_max(&open) == 4);
	CHECK(quota_ceiling(&alone, 100) == 4); /* no cohort: its borrowing limit means nothing */
	CHECK(quota_ceiling(&capped, 100) == 6);
	CHECK(quota_ceiling(&capped, 1) == 5);
	CHECK(quota_ceiling(&open, 3) == 7);
	CHECK(quota_ceiling(&open, -1) == 4);

	quota_ceiling_format(buf, sizeof(buf), "ml", &alone, 0, 6);
	CHECK_STR_EQ(buf, "team 'ml' can get at most 4 GPUs (nominal 4, no borrowing: no cohort), "
		       "the job needs 6");
	quota_ceiling_format(buf, sizeof(buf), "ml", &capped, 100, 7);
	CHECK_STR_EQ(buf, "team 'ml' can get at most 6 GPUs (nominal 4, + borrowing limit 2), the "
		       "job needs 7");
	quota_ceiling_format(buf, sizeof(buf), "ml", &open, 3, 8);
	CHECK_STR_EQ(buf, "team 'ml' can get at most 7 GPUs (nominal 4, + 3 its cohort can lend at "
		       "most), the job needs 8");
}

TY_TEST(shapes_that_can_never_hold_a_job)
{
	static const struct quota_shape two[] = {
	    {"node-a", 2, 16, 65536, 1}, {"node-b", 2, 0, 0, 1}, {"node-c", 1, 8, 1024, 1}};
	static const struct quota_shape mixed[] = {
	    {"node-a", 8, 32, 4096, 1}, {"pool big", 8, 64, 8192, 3}, {"node-b", 2, 128, 0, 1}};
	char buf[256];

	CHECK(quota_shape_fits(buf, sizeof(buf), NULL, 0, 100, 64, 4096, 1)); /* empty cluster */
	CHECK_STR_EQ(buf, "");
	CHECK(!quota_shape_fits(buf, sizeof(buf), two, 3, 1, 9, 1, 1));
	CHECK_STR_EQ(buf, "no node can hold 9 GPUs: the largest node has 2 (node-a, node-b)");
	CHECK(quota_shape_fits(buf, sizeof(buf), two, 3, 1, 2, 4096, 1 << 20)); /* node-b unlimited */
	CHECK(!quota_shape_fits(buf, sizeof(buf), two, 3, 2, 2, 4096, 1 << 20));
	CHECK(!quota_shape_fits(buf, sizeof(buf), two, 3, 3, 2, 1, 1));
	CHECK_STR_EQ(buf, "the job needs 3 nodes of 2 GPUs, 1 CPUs and 1 MiB: at most 2 exist "
		       "(node-a, node-b)");
	CHECK(quota_shape_fits(buf, sizeof(buf), two, 3, 3, 1, 8, 1024));
	CHECK(quota_shape_fits(buf, sizeof(buf), two, 3, 1, 0, 1, 1 << 20)); /* node-b's memory */
	/* CPUs among the nodes with enough GPUs: node-b's 128 do not count for 8 GPUs */
	CHECK(!quota_shape_fits(buf, sizeof(buf), mixed, 3, 1, 8, 100, 1));
	CHECK_STR_EQ(buf, "no node with 8 GPUs can hold 100 CPUs: the most such a node has is 64 "
		       "(pool big)");
	CHECK(!quota_shape_fits(buf, sizeof(buf), mixed, 3, 1, 8, 1, 10000));
	CHECK_STR_EQ(buf, "no node with 8 GPUs can hold 10000 MiB of memory: the most such a node "
		       "has is 8192 (pool big)");
	/* no GPUs asked: every node is a candidate */
	CHECK(!quota_shape_fits(buf, sizeof(buf), mixed, 3, 1, 0, 200, 1));
	CHECK_STR_EQ(buf, "no node can hold 200 CPUs: the most a node has is 128 (node-b)");
	CHECK(quota_shape_fits(buf, sizeof(buf), mixed, 3, 4, 8, 32, 4096)); /* 1 node + 3 pooled */
	CHECK(!quota_shape_fits(buf, sizeof(buf), mixed, 3, 4, 8, 33, 4096));
	CHECK_STR_EQ(buf, "the job needs 4 nodes of 8 GPUs, 33 CPUs and 4096 MiB: at most 3 exist "
		       "(pool big)");
}
