/* The crash-point option's parser and counter (scheduler/fault.h): pure, no process dies. */
#include "fault.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(parse_table)
{
	static const struct {
		const char *spec;
		int rc;
		enum sched_fault point;
		int n;
		const char *msg; /* part of the error message */
	} rows[] = {
	    {"cycle_before_commit", 0, SCHED_FAULT_CYCLE_BEFORE_COMMIT, 1, NULL},
	    {"cycle_after_commit:1", 0, SCHED_FAULT_CYCLE_AFTER_COMMIT, 1, NULL},
	    {"relay_mid:3", 0, SCHED_FAULT_RELAY_MID, 3, NULL},
	    {"relay_after_send:1000000", 0, SCHED_FAULT_RELAY_AFTER_SEND, 1000000, NULL},
	    {"events_before_commit:2", 0, SCHED_FAULT_EVENTS_BEFORE_COMMIT, 2, NULL},
	    {"events_after_commit", 0, SCHED_FAULT_EVENTS_AFTER_COMMIT, 1, NULL},
	    {"cancel_after_commit:7", 0, SCHED_FAULT_CANCEL_AFTER_COMMIT, 7, NULL},
	    {"relay_mid:0", TY_EINVAL, 0, 0, "the count must be 1 to 1000000"},
	    {"relay_mid:1000001", TY_EINVAL, 0, 0, "the count must be 1 to 1000000"},
	    {"relay_mid:", TY_EINVAL, 0, 0, "the count must be"},
	    {"relay_mid:2x", TY_EINVAL, 0, 0, "the count must be"},
	    {"relay_mid:-1", TY_EINVAL, 0, 0, "the count must be"},
	    {"relay", TY_EINVAL, 0, 0, "unknown crash point 'relay' (cycle_before_commit"},
	    {"relay_mid_x", TY_EINVAL, 0, 0, "unknown crash point 'relay_mid_x'"},
	    {"RELAY_MID", TY_EINVAL, 0, 0, "unknown crash point"},
	    {":3", TY_EINVAL, 0, 0, "unknown crash point ''"},
	    {"", TY_EINVAL, 0, 0, "unknown crash point ''"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		enum sched_fault point = SCHED_FAULT_COUNT;
		int n = -1, rc;

		ty_test_context("'%s'", rows[i].spec);
		rc = sched_fault_parse(&point, &n, rows[i].spec, &err);
		CHECK_INT_EQ(rc, rows[i].rc);
		if (rows[i].rc == 0) {
			CHECK_INT_EQ(point, rows[i].point);
			CHECK_INT_EQ(n, rows[i].n);
			CHECK_STR_EQ(
			    sched_fault_name(point),
			    ty_test_strf("%.*s", (int)strcspn(rows[i].spec, ":"), rows[i].spec));
		} else {
			CHECK(strstr(err.msg, rows[i].msg) != NULL);
		}
	}
	ty_test_context(NULL);
	CHECK_STR_EQ(sched_fault_name(SCHED_FAULT_COUNT), "?");
}

TY_TEST(arm_counts_only_its_point)
{
	struct ty_err err = {0};

	REQUIRE_INT_EQ(sched_fault_arm(NULL, &err), 0);
	CHECK_INT_EQ(sched_fault_armed, 0);
	REQUIRE_INT_EQ(sched_fault_arm("", &err), 0);
	CHECK_INT_EQ(sched_fault_armed, 0);
	CHECK_INT_EQ(sched_fault_arm("nope", &err), TY_EINVAL);
	CHECK_INT_EQ(sched_fault_armed, 0);

	REQUIRE_INT_EQ(sched_fault_arm("relay_mid:3", &err), 0);
	CHECK_INT_EQ(sched_fault_armed, 1);
	/* other points pass freely and do not count */
	for (int i = 0; i < 5; i++)
		CHECK(!sched_fault_due(SCHED_FAULT_CYCLE_AFTER_COMMIT));
	CHECK(!sched_fault_due(SCHED_FAULT_RELAY_MID));
	CHECK(!sched_fault_due(SCHED_FAULT_RELAY_MID));
	CHECK(sched_fault_due(SCHED_FAULT_RELAY_MID));	/* the third pass */
	CHECK(!sched_fault_due(SCHED_FAULT_RELAY_MID)); /* and only that one */

	/* re-arming starts the count again; an armed point that is never due is harmless */
	REQUIRE_INT_EQ(sched_fault_arm("relay_mid", &err), 0);
	CHECK(sched_fault_due(SCHED_FAULT_RELAY_MID));
	REQUIRE_INT_EQ(sched_fault_arm(NULL, &err), 0);
	CHECK_INT_EQ(sched_fault_armed, 0);
}
