/* The API is stateless: a restart on the same database loses nothing. */
#include "ty_stack.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

static json_t *get(const char *path, const char *token)
{
	struct ty_resp r = {0};
	json_t *v;

	ty_http(&r, "GET", path, token, NULL, NULL);
	if (!ty_check_status(&r, 200, __FILE__, __LINE__)) {
		ty_resp_free(&r);
		ty_test_abort();
	}
	v = json_incref(r.json);
	ty_resp_free(&r);
	return v;
}

static void check_same(const char *what, json_t *before, json_t *after)
{
	if (!json_equal(before, after)) {
		char *a = json_dumps(before, JSON_SORT_KEYS | JSON_COMPACT);
		char *b = json_dumps(after, JSON_SORT_KEYS | JSON_COMPACT);

		FAIL("%s changed across the restart\n    before: %s\n    after:  %s", what, a, b);
		free(a);
		free(b);
	}
}

TY_TEST(restart_keeps_everything)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("durable", 16, 8);
	const char *member = ty_mk_token("member", team);
	const char *revoked_secret;
	long long job = ty_mk_job(member, team, ",\"labels\":{\"keep\":\"me\"}");
	long long done = ty_mk_job(member, team, NULL);
	struct ty_resp r = {0};
	const char *paths[5];
	json_t *before[5];
	long long revoked_id;

	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", done), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_tmpl("{'name':'old','role':'viewer','team':'@T'}", team), NULL);
	REQUIRE_STATUS(&r, 201);
	revoked_secret = ty_test_strf("%s", ty_jstr(r.json, "token"));
	revoked_id = ty_jint(r.json, "id");
	ty_http(&r, "DELETE", ty_test_strf("/v1/tokens/%lld", revoked_id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 204);

	paths[0] = "/v1/teams";
	paths[1] = "/v1/tokens";
	paths[2] = ty_test_strf("/v1/jobs?team=%s", team);
	paths[3] = ty_test_strf("/v1/jobs/%lld", job);
	paths[4] = ty_test_strf("/v1/jobs/%lld/events", done);
	for (int i = 0; i < 5; i++)
		before[i] = get(paths[i], s->admin);

	ty_test_api_restart(s->api);

	for (int i = 0; i < 5; i++) {
		json_t *after = get(paths[i], s->admin);

		check_same(paths[i], before[i], after);
		json_decref(after);
		json_decref(before[i]);
	}
	/* old tokens still work; the revoked one still does not */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "spec.labels.keep", "me");
	ty_http(&r, "GET", "/v1/jobs", revoked_secret, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	/* and it goes on working: new jobs, cancels, the same id sequence */
	{
		long long next = ty_mk_job(member, team, NULL);

		CHECK(next > done);
		ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), member, NULL, NULL);
		CHECK_STATUS(&r, 200);
	}
	ty_resp_free(&r);
}

TY_TEST(restart_keeps_idempotency_keys)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("durable-key", 8, -1);
	const char *const hdr[] = {"Idempotency-Key: survives-restarts", NULL};
	const char *body = ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", team);
	struct ty_resp r = {0};
	long long id;

	ty_http(&r, "POST", "/v1/jobs", s->admin, body, hdr);
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	ty_test_api_restart(s->api);
	ty_http(&r, "POST", "/v1/jobs", s->admin, body, hdr);
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(ty_jint(r.json, "id"), id);
	ty_resp_free(&r);
}
