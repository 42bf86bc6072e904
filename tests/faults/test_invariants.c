/* The invariant checker's pure part: rank records and the overlap finder. */
#include "invariants.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(rank_records_parse)
{
	static const struct {
		const char *name, *text;
		int rc;
		long long job;
		int attempt, rank;
		long pid;
		long long start, last;
		bool ended;
	} cases[] = {
		{"g-12-1-0.345", "s 100\nb 200\nb 300\ne 310\n", 0, 12, 1, 0, 345, 100, 310, true},
		{"g-12-2-3.9", "s 100\nb 200\n", 0, 12, 2, 3, 9, 100, 200, false},
		/* killed while writing a line: the partial line is still a number */
		{"g-7-1-1.2", "s 5\nb 6", 0, 7, 1, 1, 2, 5, 6, false},
		{"g-7-1-1.2", "s 5\n", 0, 7, 1, 1, 2, 5, 5, false},
		{"g-7-1-1.2", "", -1, 0, 0, 0, 0, 0, 0, false},	   /* no start */
		{"g-7-1-1.2", "b 5\n", -1, 0, 0, 0, 0, 0, 0, false}, /* no start */
		{"g-7-1-1.2", "s 5\nx 6\n", -1, 0, 0, 0, 0, 0, 0, false},
		{"g-7-1-1.2", "s 5\nb \n", -1, 0, 0, 0, 0, 0, 0, false},
		{"g-7-1-1.2", "s 5x\n", -1, 0, 0, 0, 0, 0, 0, false},
		{"g-7-1.2", "s 5\n", -1, 0, 0, 0, 0, 0, 0, false},
		{"g-7-1-1", "s 5\n", -1, 0, 0, 0, 0, 0, 0, false},
		{"g-7-1-1.2x", "s 5\n", -1, 0, 0, 0, 0, 0, 0, false},
		{"h-7-1-1.2", "s 5\n", -1, 0, 0, 0, 0, 0, 0, false},
		{"g--7-1-1.2", "s 5\n", -1, 0, 0, 0, 0, 0, 0, false},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct faults_rank r;

		ty_test_context("%s '%s'", cases[i].name, cases[i].text);
		CHECK_INT_EQ(faults_rank_parse(&r, cases[i].name, cases[i].text), cases[i].rc);
		if (cases[i].rc)
			continue;
		CHECK_INT_EQ(r.job, cases[i].job);
		CHECK_INT_EQ(r.attempt, cases[i].attempt);
		CHECK_INT_EQ(r.rank, cases[i].rank);
		CHECK_INT_EQ(r.pid, cases[i].pid);
		CHECK_INT_EQ(r.start_ns, cases[i].start);
		CHECK_INT_EQ(r.last_ns, cases[i].last);
		CHECK_INT_EQ(r.ended, cases[i].ended);
	}
}

#define R(job, att, rank, pid, s, l) {job, att, rank, pid, s, l, true}

TY_TEST(overlaps_are_found_and_only_real_ones)
{
	static const struct {
		const char *what;
		struct faults_rank recs[6];
		size_t n;
		int found;
		const char *report;
	} cases[] = {
		{"nothing", {{0}}, 0, 0, ""},
		{"one attempt of two ranks", {R(1, 1, 0, 10, 100, 200), R(1, 1, 1, 11, 150, 250)}, 2, 0,
		 ""},
		{"a retry after the first attempt ended",
		 {R(1, 1, 0, 10, 100, 200), R(1, 1, 1, 11, 100, 210), R(1, 2, 0, 12, 211, 300)}, 3, 0,
		 ""},
		/* rank 1 of attempt 1 was still alive when attempt 2 started */
		{"a retry while one rank of the first still ran",
		 {R(1, 1, 0, 10, 100, 200), R(1, 1, 1, 11, 100, 260), R(1, 2, 0, 12, 250, 300)}, 3, 1,
		 "job 1: attempts 1 and 2 ran concurrently (for 10 ns: attempt 1 alive after the "
		 "other started)\n"},
		{"listed newest first",
		 {R(1, 2, 0, 12, 250, 300), R(1, 1, 0, 10, 100, 260)}, 2, 1,
		 "job 1: attempts 1 and 2 ran concurrently (for 10 ns: attempt 1 alive after the "
		 "other started)\n"},
		{"two jobs at the same time are fine",
		 {R(1, 1, 0, 10, 100, 300), R(2, 1, 0, 11, 100, 300)}, 2, 0, ""},
		{"a rank launched twice in one attempt",
		 {R(3, 1, 0, 10, 100, 200), R(3, 1, 0, 20, 400, 500)}, 2, 1,
		 "job 3 attempt 1 rank 0 started twice (pids 10 and 20)\n"},
		{"touching intervals count (same nanosecond)",
		 {R(4, 1, 0, 10, 100, 200), R(4, 2, 0, 11, 200, 300)}, 2, 1,
		 "job 4: attempts 1 and 2 ran concurrently (for 0 ns: attempt 1 alive after the "
		 "other started)\n"},
		{"three attempts, the last overlapping both",
		 {R(5, 1, 0, 1, 100, 200), R(5, 2, 0, 2, 300, 400), R(5, 3, 0, 3, 150, 350)}, 3, 2,
		 "job 5: attempts 1 and 3 ran concurrently (for 50 ns: attempt 1 alive after the "
		 "other started)\njob 5: attempts 2 and 3 ran concurrently (for 50 ns: attempt 2 "
		 "alive after the other started)\n"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char report[1024];

		ty_test_context("%s", cases[i].what);
		CHECK_INT_EQ(faults_overlaps(cases[i].recs, cases[i].n, report, sizeof(report)),
			     cases[i].found);
		CHECK_STR_EQ(report, cases[i].report);
	}
}

TY_TEST(a_small_report_is_truncated_not_overrun)
{
	const struct faults_rank recs[] = {R(1, 1, 0, 10, 100, 200), R(1, 1, 0, 11, 100, 200),
					   R(1, 1, 0, 12, 100, 200)};
	char report[16];

	memset(report, 'x', sizeof(report));
	CHECK_INT_EQ(faults_overlaps(recs, 3, report, sizeof(report)), 3);
	CHECK_STR_EQ(report, "job 1 attempt 1");
}

/* R() with the end mark as given: a rank killed before its end wrote none. */
#define RE(job, att, rank, ended) {job, att, rank, 10 + (rank), 100, 200, ended}

TY_TEST(a_finished_job_started_again_is_found)
{
	static const struct faults_world worlds[] = {{1, 2}, {2, 1}};
	static const struct {
		const char *what;
		struct faults_rank recs[6];
		size_t n;
		int found;
		const char *report;
	} cases[] = {
		{"nothing ran", {{0}}, 0, 0, ""},
		{"one attempt that finished", {RE(1, 1, 0, true), RE(1, 1, 1, true)}, 2, 0, ""},
		/* preempted or failed: a rank was stopped before its end, the retry is right */
		{"a retry after a rank was stopped",
		 {RE(1, 1, 0, true), RE(1, 1, 1, false), RE(1, 2, 0, true), RE(1, 2, 1, true)},
		 4,
		 0,
		 ""},
		{"a retry after a rank never started",
		 {RE(1, 1, 0, true), RE(1, 2, 0, true), RE(1, 2, 1, true)},
		 3,
		 0,
		 ""},
		{"every rank ended, then a second attempt",
		 {RE(1, 1, 0, true), RE(1, 1, 1, true), RE(1, 2, 0, false)},
		 3,
		 1,
		 "job 1: attempt 1 finished (all 2 ranks wrote their end mark) and attempt 2 "
		 "started again\n"},
		{"listed out of order, two reruns reported once",
		 {RE(2, 3, 0, true), RE(2, 2, 0, true), RE(2, 1, 0, true)},
		 3,
		 1,
		 "job 2: attempt 1 finished (all 1 ranks wrote their end mark) and attempt 3 "
		 "started again\n"},
		{"a job the check was not told about is not judged",
		 {RE(9, 1, 0, true), RE(9, 2, 0, true)},
		 2,
		 0,
		 ""},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char report[1024];

		ty_test_context("%s", cases[i].what);
		CHECK_INT_EQ(faults_reruns(cases[i].recs, cases[i].n, worlds, 2, report,
					   sizeof(report)),
			     cases[i].found);
		CHECK_STR_EQ(report, cases[i].report);
	}
}
