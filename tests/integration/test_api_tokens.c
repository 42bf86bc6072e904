/* Tokens (docs/api.md "Tokens") and authentication failures. */
#include "ty_stack.h"
#include "ty_test.h"

#include <libpq-fe.h>
#include <string.h>
#include <unistd.h>

TY_TEST(create_list_revoke)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("tok", 4, -1);
	struct ty_resp r = {0};
	const char *secret;
	long long id;
	json_t *item = NULL, *items, *it;
	size_t i;

	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_tmpl("{'name':'ci-bot','role':'member','team':'@T'}", team), NULL);
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	CHECK(id > 0);
	CHECK_JSTR(r.json, "name", "ci-bot");
	CHECK_JSTR(r.json, "role", "member");
	CHECK_JSTR(r.json, "team", team);
	CHECK_JTIME(r.json, "created_at");
	secret = ty_jstr(r.json, "token");
	REQUIRE(secret != NULL);
	CHECK(!strncmp(secret, "ty_", 3));
	secret = ty_test_strf("%s", secret);

	/* the secret works */
	ty_http(&r, "GET", "/v1/jobs", secret, NULL, NULL);
	CHECK_STATUS(&r, 200);

	/* listed without the secret */
	ty_http(&r, "GET", "/v1/tokens", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(strstr(r.body, secret) == NULL);
	items = ty_jpath(r.json, "items");
	REQUIRE(json_is_array(items));
	json_array_foreach(items, i, it)
	{
		if (json_object_get(it, "token"))
			FAIL("GET /v1/tokens item %lld has a 'token' member", ty_jint(it, "id"));
		if (ty_jint(it, "id") == id)
			item = it;
	}
	REQUIRE(item != NULL);
	CHECK_JSTR(item, "name", "ci-bot");
	CHECK_JSTR(item, "role", "member");
	CHECK_JSTR(item, "team", team);
	CHECK_JTIME(item, "created_at");
	CHECK_JNULL(item, "revoked_at");

	/* revoked: 204, stops working at once, listed as revoked */
	ty_http(&r, "DELETE", ty_test_strf("/v1/tokens/%lld", id), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 204);
	CHECK_INT_EQ(r.body_len, 0);
	ty_http(&r, "GET", "/v1/jobs", secret, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "GET", "/v1/tokens", s->admin, NULL, NULL);
	item = NULL;
	json_array_foreach(ty_jpath(r.json, "items"), i, it) if (ty_jint(it, "id") == id) item = it;
	REQUIRE(item != NULL);
	CHECK_JTIME(item, "revoked_at");
	ty_resp_free(&r);
}

TY_TEST(roles_and_teams)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("roles", 4, -1);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_tmpl("{'name':'reader','role':'viewer','team':'@T'}", team), NULL);
	CHECK_STATUS(&r, 201);
	CHECK_JSTR(r.json, "role", "viewer");
	ty_http(&r, "POST", "/v1/tokens", s->admin, ty_tmpl("{'name':'ops','role':'admin'}", NULL),
		NULL);
	CHECK_STATUS(&r, 201);
	CHECK_JNULL(r.json, "team");
	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_tmpl("{'name':'ops2','role':'admin','team':null}", NULL), NULL);
	CHECK_STATUS(&r, 201);
	/* a new admin token can do admin things */
	ty_http(&r, "GET", "/v1/tokens", ty_mk_token("admin", NULL), NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

TY_TEST(tokens_are_unique)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_token("admin", NULL), *b = ty_mk_token("admin", NULL);

	(void)s;
	CHECK(strcmp(a, b) != 0);
}

TY_TEST(create_validation)
{
	static const struct {
		const char *what, *body;
		int status;
		const char *code, *field;
	} rows[] = {
	    {"not JSON", "{'name'", 400, "invalid_json", NULL},
	    {"unknown field", "{'name':'x','role':'admin','scope':'all'}", 400, "unknown_field",
	     "scope"},
	    {"missing name", "{'role':'admin'}", 422, "missing_field", "name"},
	    {"missing role", "{'name':'x'}", 422, "missing_field", "role"},
	    {"empty name", "{'name':'','role':'admin'}", 422, "invalid_field", "name"},
	    {"name of 129 characters", "{'name':'@A129','role':'admin'}", 422, "invalid_field",
	     "name"},
	    {"bad role", "{'name':'x','role':'root'}", 422, "invalid_field", "role"},
	    {"role a number", "{'name':'x','role':1}", 422, "invalid_field", "role"},
	    {"member without team", "{'name':'x','role':'member'}", 422, "missing_field", "team"},
	    {"viewer without team", "{'name':'x','role':'viewer','team':null}", 422,
	     "missing_field", "team"},
	    {"member of an unknown team", "{'name':'x','role':'member','team':'no-such-team'}", 422,
	     "unknown_team", "team"},
	    {"admin with a team", "{'name':'x','role':'admin','team':'@T'}", 422, "invalid_field",
	     "team"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("tv", 1, -1);
	struct ty_resp r = {0};
	int before;

	ty_http(&r, "GET", "/v1/tokens", s->admin, NULL, NULL);
	before = (int)json_array_size(ty_jpath(r.json, "items"));
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("row %zu: %s", i, rows[i].what);
		ty_http(&r, "POST", "/v1/tokens", s->admin, ty_tmpl(rows[i].body, team), NULL);
		CHECK_PROBLEM(&r, rows[i].status, rows[i].code, rows[i].field);
	}
	ty_test_context(NULL);
	ty_http(&r, "GET", "/v1/tokens", s->admin, NULL, NULL);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), before);
	/* a 128-character name is fine */
	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_tmpl("{'name':'@A128','role':'viewer','team':'@T'}", team), NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(delete_unknown_is_404)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "DELETE", "/v1/tokens/987654321", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "token_not_found", NULL);
	/* an id no token can have is refused before any query */
	ty_http(&r, "DELETE", "/v1/tokens/abc", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "token_not_found", NULL);
	ty_http(&r, "DELETE", "/v1/tokens/0", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "token_not_found", NULL);
	ty_resp_free(&r);
}

/* No token, a bad one, a malformed header, a revoked one: 401 on every /v1 route. */
TY_TEST(unauthenticated)
{
	static const struct {
		const char *method, *path;
	} routes[] = {
	    {"POST", "/v1/teams"},
	    {"GET", "/v1/teams"},
	    {"GET", "/v1/teams/x"},
	    {"PATCH", "/v1/teams/x"},
	    {"POST", "/v1/tokens"},
	    {"GET", "/v1/tokens"},
	    {"DELETE", "/v1/tokens/1"},
	    {"POST", "/v1/jobs"},
	    {"GET", "/v1/jobs"},
	    {"GET", "/v1/jobs/1"},
	    {"POST", "/v1/jobs/1/cancel"},
	    {"GET", "/v1/jobs/1/events"},
	    {"GET", "/v1/jobs/1/attempts"},
	    {"GET", "/v1/jobs/1/checkpoints"},
	    {"GET", "/v1/jobs/1/logs"},
	    {"GET", "/v1/nodes"},
	    {"GET", "/v1/nodes/1"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *revoked = NULL;
	struct ty_resp r = {0};
	long long id;

	/* a revoked admin token */
	ty_http(&r, "POST", "/v1/tokens", s->admin, "{\"name\":\"gone\",\"role\":\"admin\"}", NULL);
	REQUIRE_STATUS(&r, 201);
	revoked = ty_test_strf("%s", ty_jstr(r.json, "token"));
	id = ty_jint(r.json, "id");
	ty_http(&r, "DELETE", ty_test_strf("/v1/tokens/%lld", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 204);

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const char *body =
		    strcmp(routes[i].method, "GET") && strcmp(routes[i].method, "DELETE") ? "{}"
											  : NULL;
		const char *const *hdrs[] = {
		    NULL,
		    (const char *const[]){"Authorization: Basic dXNlcjpwYXNz", NULL},
		    (const char *const[]){"Authorization: Bearer", NULL},
		    (const char *const[]){"Authorization: Bearer ", NULL},
		    (const char *const[]){ty_test_strf("Authorization: Token %s", s->admin), NULL},
		};
		const char *tokens[] = {"ty_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "garbage",
					revoked, ty_test_strf("%s ", s->admin)};
		const char *www;

		for (int k = 0; k < 5; k++) {
			ty_test_context("%s %s header %d", routes[i].method, routes[i].path, k);
			ty_http(&r, routes[i].method, routes[i].path, NULL, body, hdrs[k]);
			CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
			www = ty_resp_header(&r, "WWW-Authenticate");
			CHECK(www && !strncmp(www, "Bearer", 6));
		}
		for (int k = 0; k < 3; k++) {
			ty_test_context("%s %s token %d", routes[i].method, routes[i].path, k);
			ty_http(&r, routes[i].method, routes[i].path, tokens[k], body, NULL);
			CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
			www = ty_resp_header(&r, "WWW-Authenticate");
			CHECK(www && !strncmp(www, "Bearer", 6));
		}
	}
	ty_resp_free(&r);
}

/* ---- the token cache (api/auth.c) across replicas ---- */

/* A new member token of team and its id. */
static const char *mk_token(long long *id, const char *team)
{
	struct ty_resp r = {0};
	const char *secret;

	ty_http(&r, "POST", "/v1/tokens", ty_stack_get()->admin,
		ty_tmpl(ty_test_strf("{'name':'%s','role':'member','team':'@T'}", ty_uniq("c")),
			team),
		NULL);
	REQUIRE_STATUS(&r, 201);
	*id = ty_jint(r.json, "id");
	secret = ty_test_strf("%s", ty_jstr(r.json, "token"));
	ty_resp_free(&r);
	return secret;
}

/* GET /v1/jobs with token on the current server until it is refused (bounded): the last status. */
static int until_refused(const char *token)
{
	struct ty_resp r = {0};
	int status = 0;

	for (int i = 0; i < 1000 && status != 401; i++) {
		status = ty_http(&r, "GET", "/v1/jobs", token, NULL, NULL);
		if (status != 401)
			usleep(5 * 1000);
	}
	ty_resp_free(&r);
	return status;
}

static void use_twice(const char *token)
{
	struct ty_resp r = {0};

	/* the first fills the cache, the second is answered from it */
	for (int i = 0; i < 2; i++) {
		ty_http(&r, "GET", "/v1/jobs", token, NULL, NULL);
		CHECK_STATUS(&r, 200);
	}
	ty_resp_free(&r);
}

TY_TEST(revocation_reaches_every_replica)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("tok-cache", 4, -1);
	struct ty_api *b = ty_test_api_start(s->db_url, NULL);
	struct ty_resp r = {0};
	long long id, id2;
	const char *tok = mk_token(&id, team), *tok2 = mk_token(&id2, team);

	ty_test_api_use(b);
	use_twice(tok);
	use_twice(tok2);
	/* revoked through the first server: the second hears it */
	ty_test_api_use(s->api);
	use_twice(tok);
	ty_http(&r, "DELETE", ty_test_strf("/v1/tokens/%lld", id), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 204);
	CHECK_INT_EQ(until_refused(tok), 401);
	ty_test_api_use(b);
	CHECK_INT_EQ(until_refused(tok), 401);
	/* revoked by an operator's SQL: the trigger tells both */
	TY_STACK_SQL("UPDATE api_tokens SET revoked_at = now() WHERE id = $1",
		     ty_test_strf("%lld", id2));
	CHECK_INT_EQ(until_refused(tok2), 401);
	ty_test_api_use(s->api);
	CHECK_INT_EQ(until_refused(tok2), 401);
	ty_test_api_stop(b);
	ty_resp_free(&r);
}

/*
 * A revocation nobody was told of (triggers off in that session): a
 * replica whose listen connection is lost empties its cache, so it finds
 * out at its next look-up.
 */
TY_TEST(a_lost_listen_connection_empties_the_cache)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("tok-lost", 4, -1);
	long long id;
	const char *tok = mk_token(&id, team);
	PGconn *c = PQconnectdb(s->db_url);
	struct ty_resp r = {0};
	PGresult *res;

	use_twice(tok);
	REQUIRE(PQstatus(c) == CONNECTION_OK);
	PQclear(PQexec(c, "SET session_replication_role = replica"));
	res = PQexecParams(c, "UPDATE api_tokens SET revoked_at = now() WHERE id = $1", 1, NULL,
			   (const char *const[]){ty_test_strf("%lld", id)}, NULL, NULL, 0);
	REQUIRE(PQresultStatus(res) == PGRES_COMMAND_OK);
	PQclear(res);
	PQfinish(c);
	/* unheard, the cached entry still answers: the cache is in use */
	ty_http(&r, "GET", "/v1/jobs", tok, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
	TY_STACK_SQL("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
		     " WHERE application_name = 'trainyard-api watch'");
	CHECK_INT_EQ(until_refused(tok), 401);
}
