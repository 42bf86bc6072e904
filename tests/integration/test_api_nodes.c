/*
 * Attempts, logs and nodes (docs/api.md "Attempts and logs", "Nodes") as far
 * as they go without executors: empty lists, not-found answers, parameters.
 */
#include "ty_stack.h"
#include "ty_test.h"

TY_TEST(pending_job_has_no_attempts)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("att", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", id), viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_is_array(ty_jpath(r.json, "items")));
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 0);
	ty_http(&r, "GET", "/v1/jobs/987654321/attempts", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(logs_before_any_attempt)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("logs", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs", id), s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=3&tail=10", id), s->admin, NULL,
		NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);
	ty_http(&r, "GET", "/v1/jobs/987654321/logs", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(logs_bad_parameters)
{
	static const struct {
		const char *query, *field;
	} rows[] = {
	    {"tail=0", "tail"},	       {"tail=10001", "tail"}, {"tail=x", "tail"},
	    {"rank=-1", "rank"},       {"rank=x", "rank"},     {"attempt=x", "attempt"},
	    {"attempt=-1", "attempt"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("logp", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?%s", id, rows[i].query),
			s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
	}
	ty_resp_free(&r);
}

TY_TEST(nodes_without_executors)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "GET", "/v1/nodes", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_is_array(ty_jpath(r.json, "items")));
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 0);
	ty_http(&r, "GET", "/v1/nodes?state=ready", s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "GET", "/v1/nodes?state=draining", s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "GET", "/v1/nodes?state=sleeping", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "state");
	ty_http(&r, "GET", "/v1/nodes/987654321", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "node_not_found", NULL);
	ty_resp_free(&r);
}
