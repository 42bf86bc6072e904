/* GET /v1/whoami (docs/api.md "Who am I"): the calling token, as the dashboard shows it. */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

/* A new token of role (team NULL: none) named name: its secret, and its id in *id. */
static const char *token(long long *id, const char *name, const char *role, const char *team)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	const char *secret;

	ty_http(&r, "POST", "/v1/tokens", s->admin,
		team ? ty_test_jf("{'name':'%s','role':'%s','team':'%s'}", name, role, team)
		     : ty_test_jf("{'name':'%s','role':'%s'}", name, role),
		NULL);
	REQUIRE_STATUS(&r, 201);
	secret = ty_test_strf("%s", ty_jstr(r.json, "token"));
	*id = ty_jint(r.json, "id");
	ty_resp_free(&r);
	return secret;
}

TY_TEST(each_role_sees_its_name_role_and_team)
{
	const char *team = ty_mk_team("who", 4, -1);
	static const char *const roles[] = {"admin", "member", "viewer"};
	struct ty_resp r = {0};
	long long id;

	for (int i = 0; i < 3; i++) {
		bool admin = !strcmp(roles[i], "admin");
		const char *name = ty_uniq(roles[i]);
		const char *tok = token(&id, name, roles[i], admin ? NULL : team);

		ty_test_context("%s", roles[i]);
		ty_http(&r, "GET", "/v1/whoami", tok, NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JSTR(r.json, "token", name);
		CHECK_JSTR(r.json, "role", roles[i]);
		if (admin)
			CHECK_JNULL(r.json, "team");
		else
			CHECK_JSTR(r.json, "team", team);
		CHECK(json_object_size(r.json) == 3);
	}
	ty_resp_free(&r);
}

TY_TEST(no_or_revoked_token_is_401)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("who", 4, -1);
	struct ty_resp r = {0};
	long long id;
	const char *tok = token(&id, "gone", "member", team);

	ty_http(&r, "GET", "/v1/whoami", tok, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ty_http(&r, "DELETE", ty_test_strf("/v1/tokens/%lld", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 204);
	ty_http(&r, "GET", "/v1/whoami", tok, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "GET", "/v1/whoami", NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "GET", "/v1/whoami", "ty_not_a_real_token", NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_resp_free(&r);
}
