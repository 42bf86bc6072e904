/*
 * Checkpoint-aware preemption's pure parts: a victim's grace from its
 * measured checkpoint duration (core/policy.c, sched_grace_seconds), and
 * the per-cohort reclaim delays of --cohort-reclaim-delay-seconds with
 * their bad input (preempt.c).
 */
#include "core/policy.h"
#include "scheduler.h"
#include "ty_test.h"

#include <stdlib.h>

TY_TEST(grace_is_the_measured_duration_with_its_margin_within_the_bounds)
{
	static const struct {
		int64_t ms;
		int pct;
		int64_t min_s, max_s;
		int want;
	} rows[] = {
	    {42000, 50, 30, 900, 63},	 /* the docs' example */
	    {42001, 50, 30, 900, 64},	 /* rounded up: never less than measured + margin */
	    {10000, 50, 30, 900, 30},	 /* the class minimum */
	    {1000000, 50, 30, 900, 900}, /* the class maximum */
	    {42000, 0, 0, 900, 42},	 /* no margin */
	    {0, 50, 0, 900, 0},		 /* committed at once */
	    {5000, 50, 10, 10, 10},	 /* min = max */
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		ty_test_context("%lld ms, %d %%", (long long)rows[k].ms, rows[k].pct);
		CHECK_INT_EQ(
		    sched_grace_seconds(rows[k].ms, rows[k].pct, rows[k].min_s, rows[k].max_s),
		    rows[k].want);
	}
	ty_test_context(NULL);
}

/* The daemon's --grace-* defaults are the core's (the simulation uses those). */
TY_TEST(grace_defaults)
{
	struct sched_config c;

	sched_config_default(&c);
	CHECK_INT_EQ(c.grace_margin_pct, 50);
	CHECK_INT_EQ(c.grace_min_s[SCHED_CLASS_NORMAL], 30);
	CHECK_INT_EQ(c.grace_max_s[SCHED_CLASS_NORMAL], 900);
	CHECK_INT_EQ(c.grace_min_s[SCHED_CLASS_SCAVENGER], 10);
	CHECK_INT_EQ(c.grace_max_s[SCHED_CLASS_HIGH], 1800);
	CHECK_INT_EQ(c.reclaim_delay_s, 60);
}

TY_TEST(cohort_delays_parse)
{
	struct sched_cohort_delay *v = NULL;
	struct ty_err err = {0};
	int n = -1;

	CHECK_INT_EQ(sched_cohort_delays_parse(&v, &n, "research=120,prod=0", &err), 0);
	REQUIRE(n == 2);
	CHECK_STR_EQ(v[0].name, "research");
	CHECK_INT_EQ(v[0].seconds, 120);
	CHECK_STR_EQ(v[1].name, "prod");
	CHECK_INT_EQ(v[1].seconds, 0);
	CHECK(!v[0].warned);
	free(v);
	v = NULL;
	/* none: the option's default */
	CHECK_INT_EQ(sched_cohort_delays_parse(&v, &n, NULL, &err), 0);
	CHECK_INT_EQ(n, 0);
	CHECK(v == NULL);
	CHECK_INT_EQ(sched_cohort_delays_parse(&v, &n, "", &err), 0);
	CHECK_INT_EQ(n, 0);
}

TY_TEST(cohort_delays_refuse_bad_input)
{
	static const struct {
		const char *spec, *msg;
	} rows[] = {
	    {"research=-5", "cohort 'research': '-5' is not a number of seconds in 0-31536000"},
	    {"research=1.5", "cohort 'research': '1.5' is not a number of seconds in 0-31536000"},
	    {"research=ten", "cohort 'research': 'ten' is not a number of seconds in 0-31536000"},
	    {"research=", "cohort 'research': '' is not a number of seconds in 0-31536000"},
	    {"research=31536001",
	     "cohort 'research': '31536001' is not a number of seconds in 0-31536000"},
	    {"research=99999999999999999999",
	     "cohort 'research': '99999999999999999999' is not a number of seconds in "
	     "0-31536000"},
	    {"research", "'research' is not COHORT=SECONDS"},
	    {"=60", "'=60' is not COHORT=SECONDS"},
	    {"a=1,,b=2", "'' is not COHORT=SECONDS"},
	    {"a=1,a=2", "cohort 'a' is given twice"},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		struct sched_cohort_delay *v = NULL;
		struct ty_err err = {0};
		int n = -1;

		ty_test_context("%s", rows[k].spec);
		CHECK_INT_EQ(sched_cohort_delays_parse(&v, &n, rows[k].spec, &err), TY_EINVAL);
		CHECK_STR_EQ(err.msg, rows[k].msg);
		CHECK(v == NULL);
		CHECK_INT_EQ(n, 0);
	}
	ty_test_context(NULL);
}
