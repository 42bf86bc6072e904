/* Calendar times: RFC 3339 parsing and civil dates (common/time.c). */
#include "ty_test.h"
#include "ty_time.h"

TY_TEST(rfc3339_table)
{
	static const struct {
		const char *in;
		bool ok;
		int64_t ms;
	} rows[] = {
	    {"1970-01-01T00:00:00Z", true, 0},
	    {"2026-11-22T15:30:00Z", true, 1795361400000LL},
	    {"2026-11-22t15:30:00z", true, 1795361400000LL},
	    {"2026-11-22T15:30:00.25Z", true, 1795361400250LL},
	    {"2026-11-22T15:30:00.123456789Z", true, 1795361400123LL},
	    {"2026-11-22T16:30:00+01:00", true, 1795361400000LL},
	    {"2026-11-22T14:00:00-01:30", true, 1795361400000LL},
	    {"2024-02-29T00:00:00Z", true, 1709164800000LL},
	    {"2016-12-31T23:59:60Z", true, 1483228799999LL}, /* a leap second */
	    {"2023-02-29T00:00:00Z", false, 0},
	    {"2026-13-01T00:00:00Z", false, 0},
	    {"2026-11-31T00:00:00Z", false, 0},
	    {"2026-11-22T24:00:00Z", false, 0},
	    {"2026-11-22T15:60:00Z", false, 0},
	    {"2026-11-22 15:30:00Z", false, 0},
	    {"2026-11-22T15:30:00", false, 0},
	    {"2026-11-22T15:30:00.Z", false, 0},
	    {"2026-11-22T15:30:00.1234567890Z", false, 0},
	    {"2026-11-22T15:30:00+0100", false, 0},
	    {"2026-11-22T15:30:00+24:00", false, 0},
	    {"1969-12-31T23:59:59Z", false, 0},
	    {"2026-11-22T15:30:00Zjunk", false, 0},
	    {"", false, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int64_t ms = -1;

		ty_test_context("%s", rows[i].in);
		CHECK_INT_EQ(ty_time_parse_rfc3339(&ms, rows[i].in), rows[i].ok);
		if (rows[i].ok)
			CHECK_INT_EQ(ms, rows[i].ms);
	}
	CHECK(!ty_time_parse_rfc3339(&(int64_t){0}, NULL));
}

TY_TEST(civil_ms_bounds)
{
	int64_t ms = 0;

	CHECK(ty_time_civil_ms(&ms, 2000, 3, 1, 0, 0, 0, 0));
	CHECK_INT_EQ(ms, 951868800000LL);
	CHECK(ty_time_civil_ms(&ms, 9999, 12, 31, 23, 59, 59, 999));
	CHECK(!ty_time_civil_ms(&ms, 10000, 1, 1, 0, 0, 0, 0));
	CHECK(!ty_time_civil_ms(&ms, 2026, 1, 1, 0, 0, 0, 1000));
	CHECK(!ty_time_civil_ms(&ms, 2026, 0, 1, 0, 0, 0, 0));
	CHECK(!ty_time_civil_ms(&ms, 2026, 4, 31, 0, 0, 0, 0));
	CHECK(!ty_time_civil_ms(&ms, 2100, 2, 29, 0, 0, 0, 0));
}
