/*
 * api/ the job document built in C (api_job_doc), pure: for a job in each
 * state, the bytes PostgreSQL's json_build_object (migrations/0017) gave
 * for the same row, written down here; and api_fail, the handlers' refusals
 * as errors.
 */
#include "api.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#define SPEC "{\"name\": \"a\", \"team\": \"ml\", \"image\": \"img\", \"command\": [\"x\"]}"
#define T0 "1795752000123999" /* 2026-11-27T04:00:00.123999Z: truncated, not rounded */
#define T1 "1795752061500000"
#define T2 "1795752122000001"

static struct api_job_row row(const char *state)
{
	struct api_job_row j = {0};

	j.id = "42";
	j.team = "ml";
	j.name = "a";
	j.state = state;
	j.spec = SPEC;
	j.attempt = "0";
	j.preemptions = "0";
	j.spot_preemptions = "0";
	j.created_at_us = T0;
	j.updated_at_us = T1;
	return j;
}

static void check(const struct api_job_row *j, const char *want)
{
	struct ty_buf b = TY_BUF_INIT;

	CHECK_INT_EQ(api_job_doc(&b, j), 0);
	CHECK_STR_EQ(b.data, want);
	ty_buf_free(&b);
}

TY_TEST(job_doc_pending_not_yet_considered)
{
	struct api_job_row j = row("pending");

	check(&j, "{\"id\" : 42, \"team\" : \"ml\", \"name\" : \"a\", \"state\" : \"pending\", "
		  "\"spec\" : " SPEC ", \"cancel_requested\" : false, \"attempt\" : 0, "
		  "\"failure_class\" : null, \"pending_reason\" : \"not yet considered by the "
		  "scheduler\", \"queue_position\" : null, \"reserved_until\" : null, "
		  "\"preemptions\" : 0, \"spot_preemptions\" : 0, \"created_at\" : "
		  "\"2026-11-27T04:00:00.123Z\", \"updated_at\" : \"2026-11-27T04:01:01.500Z\", "
		  "\"finished_at\" : null}");
}

TY_TEST(job_doc_pending_queued_and_reserved)
{
	struct api_job_row j = row("pending");

	j.pending_reason = "waiting for 8 GPUs; job 7 holds them";
	j.queue_position = "3";
	j.reserved_until_us = T2;
	j.name = NULL;
	check(&j, "{\"id\" : 42, \"team\" : \"ml\", \"name\" : null, \"state\" : \"pending\", "
		  "\"spec\" : " SPEC ", \"cancel_requested\" : false, \"attempt\" : 0, "
		  "\"failure_class\" : null, \"pending_reason\" : \"waiting for 8 GPUs; job 7 "
		  "holds them\", \"queue_position\" : 3, \"reserved_until\" : "
		  "\"2026-11-27T04:02:02.000Z\", \"preemptions\" : 0, \"spot_preemptions\" : 0, "
		  "\"created_at\" : \"2026-11-27T04:00:00.123Z\", \"updated_at\" : "
		  "\"2026-11-27T04:01:01.500Z\", \"finished_at\" : null}");
}

/* a job out of the queue: the columns the scheduler has not cleared yet are not shown */
TY_TEST(job_doc_active_states)
{
	static const char *const states[] = {"scheduled", "starting", "running", "preempting"};

	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		struct api_job_row j = row(states[i]);
		char want[1024];

		j.pending_reason = "stale";
		j.queue_position = "1";
		j.reserved_until_us = T2;
		j.attempt = "2";
		j.preemptions = "1";
		j.spot_preemptions = "1";
		j.cancel_requested = i == 3;
		snprintf(want, sizeof(want),
			 "{\"id\" : 42, \"team\" : \"ml\", \"name\" : \"a\", \"state\" : \"%s\", "
			 "\"spec\" : " SPEC ", \"cancel_requested\" : %s, \"attempt\" : 2, "
			 "\"failure_class\" : null, \"pending_reason\" : null, "
			 "\"queue_position\" : null, \"reserved_until\" : null, "
			 "\"preemptions\" : 1, \"spot_preemptions\" : 1, \"created_at\" : "
			 "\"2026-11-27T04:00:00.123Z\", \"updated_at\" : "
			 "\"2026-11-27T04:01:01.500Z\", \"finished_at\" : null}",
			 states[i], i == 3 ? "true" : "false");
		ty_test_context("state %s", states[i]);
		check(&j, want);
	}
}

TY_TEST(job_doc_terminal_states)
{
	static const struct {
		const char *state, *failure_class;
	} rows[] = {
	    {"succeeded", NULL}, {"failed", "user_error"}, {"cancelled", NULL}, {"stopped", NULL}};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct api_job_row j = row(rows[i].state);
		char want[1024];

		j.failure_class = rows[i].failure_class;
		j.finished_at_us = T2;
		j.attempt = "1";
		snprintf(want, sizeof(want),
			 "{\"id\" : 42, \"team\" : \"ml\", \"name\" : \"a\", \"state\" : \"%s\", "
			 "\"spec\" : " SPEC ", \"cancel_requested\" : false, \"attempt\" : 1, "
			 "\"failure_class\" : %s, \"pending_reason\" : null, "
			 "\"queue_position\" : null, \"reserved_until\" : null, "
			 "\"preemptions\" : 0, \"spot_preemptions\" : 0, \"created_at\" : "
			 "\"2026-11-27T04:00:00.123Z\", \"updated_at\" : "
			 "\"2026-11-27T04:01:01.500Z\", \"finished_at\" : "
			 "\"2026-11-27T04:02:02.000Z\"}",
			 rows[i].state, rows[i].failure_class ? "\"user_error\"" : "null");
		ty_test_context("state %s", rows[i].state);
		check(&j, want);
	}
}

/* escape_json's rules: short escapes, other controls as lowercase \u00xx, UTF-8 as is */
TY_TEST(job_doc_strings_escaped_as_postgresql_does)
{
	struct api_job_row j = row("running");

	j.name = "q\"b\\s/\b\f\n\r\t\x01\x1f caf\xc3\xa9";
	j.team = NULL;
	j.created_at_us = "0";
	j.updated_at_us = "-1000";
	check(&j, "{\"id\" : 42, \"team\" : null, \"name\" : \"q\\\"b\\\\s/\\b\\f\\n\\r\\t"
		  "\\u0001\\u001f caf\xc3\xa9\", \"state\" : \"running\", \"spec\" : " SPEC
		  ", \"cancel_requested\" : false, \"attempt\" : 0, \"failure_class\" : null, "
		  "\"pending_reason\" : null, \"queue_position\" : null, \"reserved_until\" : "
		  "null, \"preemptions\" : 0, \"spot_preemptions\" : 0, \"created_at\" : "
		  "\"1970-01-01T00:00:00.000Z\", \"updated_at\" : \"1969-12-31T23:59:59.999Z\", "
		  "\"finished_at\" : null}");
}

/* api_fail: a handler's refusal as an error that api_reply_from_err answers (server.c) */
TY_TEST(fail_carries_the_problem)
{
	struct api_req r;
	struct ty_err err = {0};
	int rc;

	memset(&r, 0, sizeof(r));
	r.arena = ty_arena_new();
	REQUIRE(r.arena);
	/* an earlier, handled error does not mask the refusal */
	ty_err_set(&err, TY_ECONFLICT, "idempotency key vanished");
	rc = api_fail(&r, &err, API_P_INVALID_PARAMETER, "limit", "'%s' must be %d to %d",
		      "limit", 1, 500);
	CHECK_INT_EQ(rc, API_ERR_PROBLEM(API_P_INVALID_PARAMETER));
	CHECK_INT_EQ(err.code, rc);
	CHECK_STR_EQ(err.msg, "'limit' must be 1 to 500");
	CHECK_STR_EQ(r.problem_field, "limit");
	/* below every ty code, one per problem */
	CHECK(API_ERR_PROBLEM(0) < TY_ESTATE);
	CHECK(API_ERR_PROBLEM(API_P_JOB_NOT_FOUND) != API_ERR_PROBLEM(API_P_JOB_FINISHED));
	ty_err_clear(&err);
	rc = api_fail(&r, &err, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", "7");
	CHECK_INT_EQ(rc, API_ERR_PROBLEM(API_P_JOB_NOT_FOUND));
	CHECK(r.problem_field == NULL);
	ty_arena_free(r.arena);
}
