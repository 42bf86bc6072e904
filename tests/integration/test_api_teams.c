/* Teams (docs/api.md "Teams"): create, get, list, patch, validation. */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>
#include <unistd.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

TY_TEST(create_and_get)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'ml-research','nominal_gpus':64,'borrowing_limit_gpus':32,"
			"'lending_limit_gpus':16,'cohort':'research','weight':1}",
			NULL),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JSTR(r.json, "name", "ml-research");
	CHECK_JINT(r.json, "nominal_gpus", 64);
	CHECK_JINT(r.json, "borrowing_limit_gpus", 32);
	CHECK_JINT(r.json, "lending_limit_gpus", 16);
	CHECK_JSTR(r.json, "cohort", "research");
	CHECK(json_number_value(ty_jpath(r.json, "weight")) == 1.0);
	CHECK_JTIME(r.json, "created_at");
	CHECK_JTIME(r.json, "updated_at");
	CHECK_GOLDEN(r.json, "team");

	ty_http(&r, "GET", "/v1/teams/ml-research", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_GOLDEN(r.json, "team");
	ty_resp_free(&r);
}

TY_TEST(defaults)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("plain");
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin, ty_tmpl("{'name':'@T','nominal_gpus':0}", name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "nominal_gpus", 0);
	CHECK_JNULL(r.json, "borrowing_limit_gpus");
	CHECK_JNULL(r.json, "lending_limit_gpus");
	CHECK_JNULL(r.json, "cohort");
	CHECK(json_is_number(ty_jpath(r.json, "weight")) &&
	      json_number_value(ty_jpath(r.json, "weight")) == 1.0);
	/* idle GPUs are not reported unless the team asks */
	CHECK_JNULL(r.json, "idle_gpu_alert_seconds");
	/* explicit nulls mean the same */
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T-n','nominal_gpus':1,'borrowing_limit_gpus':null,"
			"'lending_limit_gpus':null,'cohort':null}",
			name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JNULL(r.json, "borrowing_limit_gpus");
	CHECK_JNULL(r.json, "cohort");
	ty_resp_free(&r);
}

TY_TEST(duplicate_is_409_team_exists)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_mk_team("dup", 1, -1);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin, ty_tmpl("{'name':'@T','nominal_gpus':5}", name),
		NULL);
	CHECK_PROBLEM(&r, 409, "team_exists", TY_FIELD_UNCHECKED);
	/* the first one is unchanged */
	ty_http(&r, "GET", ty_test_strf("/v1/teams/%s", name), s->admin, NULL, NULL);
	CHECK_JINT(r.json, "nominal_gpus", 1);
	ty_resp_free(&r);
}

TY_TEST(get_unknown_is_404)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "GET", "/v1/teams/no-such-team", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "team_not_found", NULL);
	ty_http(&r, "PATCH", "/v1/teams/no-such-team", s->admin, "{\"nominal_gpus\":1}", NULL);
	CHECK_PROBLEM(&r, 404, "team_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(list_is_ordered_by_name)
{
	const struct ty_stack *s = ty_stack_get();
	const char *names[] = {"zz-last", "aa-first", "mm-middle"};
	struct ty_resp r = {0};
	json_t *items, *item;
	const char *prev = "";
	size_t i;
	int found = 0;

	for (int k = 0; k < 3; k++) {
		ty_http(&r, "POST", "/v1/teams", s->admin,
			ty_tmpl("{'name':'@T','nominal_gpus':1}", names[k]), NULL);
		CHECK_STATUS(&r, 201);
	}
	ty_http(&r, "GET", "/v1/teams", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	items = ty_jpath(r.json, "items");
	REQUIRE(json_is_array(items));
	json_array_foreach(items, i, item)
	{
		const char *name = ty_jstr(item, "name");

		REQUIRE(name != NULL);
		if (strcmp(prev, name) >= 0)
			FAIL("'%s' listed after '%s'", name, prev);
		prev = name;
		for (int k = 0; k < 3; k++)
			found += !strcmp(name, names[k]);
		if (!ty_jpath(item, "nominal_gpus") || !ty_jpath(item, "created_at"))
			FAIL("item '%s' is not a full team object", name);
	}
	CHECK_INT_EQ(found, 3);
	ty_resp_free(&r);
}

TY_TEST(patch)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("patch");
	const char *path = ty_test_strf("/v1/teams/%s", name);
	struct ty_resp r = {0};
	char created[64], updated[64];

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T','nominal_gpus':8,'borrowing_limit_gpus':4,"
			"'lending_limit_gpus':2,'cohort':'c1','weight':2}",
			name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	snprintf(created, sizeof(created), "%s", ty_jstr(r.json, "created_at"));
	snprintf(updated, sizeof(updated), "%s", ty_jstr(r.json, "updated_at"));

	/* a subset changes only those fields */
	ty_http(&r, "PATCH", path, s->admin, "{\"nominal_gpus\":16,\"weight\":0.5}", NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "nominal_gpus", 16);
	CHECK(json_number_value(ty_jpath(r.json, "weight")) == 0.5);
	CHECK_JINT(r.json, "borrowing_limit_gpus", 4);
	CHECK_JINT(r.json, "lending_limit_gpus", 2);
	CHECK_JSTR(r.json, "cohort", "c1");
	CHECK_JSTR(r.json, "name", name);
	CHECK_JSTR(r.json, "created_at", created);
	CHECK(ty_jstr(r.json, "updated_at") && strcmp(ty_jstr(r.json, "updated_at"), updated) >= 0);

	/* null clears a limit and the cohort */
	ty_http(&r, "PATCH", path, s->admin,
		"{\"borrowing_limit_gpus\":null,\"lending_limit_gpus\":null,\"cohort\":null}",
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "borrowing_limit_gpus");
	CHECK_JNULL(r.json, "lending_limit_gpus");
	CHECK_JNULL(r.json, "cohort");
	CHECK_JINT(r.json, "nominal_gpus", 16);

	/* and GET sees it */
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_JINT(r.json, "nominal_gpus", 16);
	CHECK_JNULL(r.json, "borrowing_limit_gpus");

	/* an empty patch changes nothing */
	ty_http(&r, "PATCH", path, s->admin, "{}", NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JINT(r.json, "nominal_gpus", 16);
	ty_resp_free(&r);
}

struct bad {
	const char *what, *body;
	int status;
	const char *code, *field;
};

TY_TEST(create_validation)
{
	static const struct bad rows[] = {
	    {"not JSON", "{", 400, "invalid_json", NULL},
	    {"array", "[]", 400, "invalid_json", NULL},
	    {"unknown field", "{'name':'v1','nominal_gpus':1,'quota':2}", 400, "unknown_field",
	     "quota"},
	    {"missing name", "{'nominal_gpus':1}", 422, "missing_field", "name"},
	    {"missing nominal_gpus", "{'name':'v2'}", 422, "missing_field", "nominal_gpus"},
	    {"empty name", "{'name':'','nominal_gpus':1}", 422, "invalid_field", "name"},
	    {"name 64 characters", "{'name':'@A64','nominal_gpus':1}", 422, "invalid_field",
	     "name"},
	    {"uppercase name", "{'name':'ML','nominal_gpus':1}", 422, "invalid_field", "name"},
	    {"underscore in name", "{'name':'ml_research','nominal_gpus':1}", 422, "invalid_field",
	     "name"},
	    {"name starting with -", "{'name':'-ml','nominal_gpus':1}", 422, "invalid_field",
	     "name"},
	    {"name ending with -", "{'name':'ml-','nominal_gpus':1}", 422, "invalid_field", "name"},
	    {"name a number", "{'name':5,'nominal_gpus':1}", 422, "invalid_field", "name"},
	    {"nominal_gpus -1", "{'name':'v3','nominal_gpus':-1}", 422, "invalid_field",
	     "nominal_gpus"},
	    {"nominal_gpus 1000001", "{'name':'v3','nominal_gpus':1000001}", 422, "invalid_field",
	     "nominal_gpus"},
	    {"nominal_gpus a string", "{'name':'v3','nominal_gpus':'8'}", 422, "invalid_field",
	     "nominal_gpus"},
	    {"nominal_gpus null", "{'name':'v3','nominal_gpus':null}", 422, "invalid_field",
	     "nominal_gpus"},
	    {"borrowing -1", "{'name':'v3','nominal_gpus':1,'borrowing_limit_gpus':-1}", 422,
	     "invalid_field", "borrowing_limit_gpus"},
	    {"lending 1000001", "{'name':'v3','nominal_gpus':1,'lending_limit_gpus':1000001}", 422,
	     "invalid_field", "lending_limit_gpus"},
	    {"bad cohort", "{'name':'v3','nominal_gpus':1,'cohort':'Research Team'}", 422,
	     "invalid_field", "cohort"},
	    {"weight 0", "{'name':'v3','nominal_gpus':1,'weight':0}", 422, "invalid_field",
	     "weight"},
	    {"weight -1", "{'name':'v3','nominal_gpus':1,'weight':-1}", 422, "invalid_field",
	     "weight"},
	    {"weight 1000001", "{'name':'v3','nominal_gpus':1,'weight':1000001}", 422,
	     "invalid_field", "weight"},
	    {"weight a string", "{'name':'v3','nominal_gpus':1,'weight':'1'}", 422, "invalid_field",
	     "weight"},
	    {"max_cpus 0", "{'name':'v3','nominal_gpus':1,'max_cpus':0}", 422, "invalid_field",
	     "max_cpus"},
	    {"max_cpus -4", "{'name':'v3','nominal_gpus':1,'max_cpus':-4}", 422, "invalid_field",
	     "max_cpus"},
	    {"max_cpus 100000001", "{'name':'v3','nominal_gpus':1,'max_cpus':100000001}", 422,
	     "invalid_field", "max_cpus"},
	    {"max_cpus a string", "{'name':'v3','nominal_gpus':1,'max_cpus':'8'}", 422,
	     "invalid_field", "max_cpus"},
	    {"max_cpus fractional", "{'name':'v3','nominal_gpus':1,'max_cpus':2.5}", 422,
	     "invalid_field", "max_cpus"},
	    {"max_memory_mb 0", "{'name':'v3','nominal_gpus':1,'max_memory_mb':0}", 422,
	     "invalid_field", "max_memory_mb"},
	    {"max_memory_mb too big", "{'name':'v3','nominal_gpus':1,'max_memory_mb':1000000000001}",
	     422, "invalid_field", "max_memory_mb"},
	    {"max_memory_mb a bool", "{'name':'v3','nominal_gpus':1,'max_memory_mb':true}", 422,
	     "invalid_field", "max_memory_mb"},
	    {"max_cpu misspelt", "{'name':'v3','nominal_gpus':1,'max_cpu':4}", 400,
	     "unknown_field", "max_cpu"},
	    {"idle alert 59", "{'name':'v3','nominal_gpus':1,'idle_gpu_alert_seconds':59}", 422,
	     "invalid_field", "idle_gpu_alert_seconds"},
	    {"idle alert 604801", "{'name':'v3','nominal_gpus':1,'idle_gpu_alert_seconds':604801}",
	     422, "invalid_field", "idle_gpu_alert_seconds"},
	    {"idle alert a string", "{'name':'v3','nominal_gpus':1,'idle_gpu_alert_seconds':'1h'}",
	     422, "invalid_field", "idle_gpu_alert_seconds"},
	    {"idle alert fractional",
	     "{'name':'v3','nominal_gpus':1,'idle_gpu_alert_seconds':90.5}", 422, "invalid_field",
	     "idle_gpu_alert_seconds"},
	    {"idle alert a bool", "{'name':'v3','nominal_gpus':1,'idle_gpu_alert_seconds':true}",
	     422, "invalid_field", "idle_gpu_alert_seconds"},
	    {"idle alert misspelt", "{'name':'v3','nominal_gpus':1,'idle_alert_seconds':600}", 400,
	     "unknown_field", "idle_alert_seconds"},
	};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("row %zu: %s", i, rows[i].what);
		ty_http(&r, "POST", "/v1/teams", s->admin, ty_tmpl(rows[i].body, NULL), NULL);
		CHECK_PROBLEM(&r, rows[i].status, rows[i].code, rows[i].field);
	}
	ty_test_context(NULL);
	/* none of them was created */
	ty_http(&r, "GET", "/v1/teams/v3", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "team_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(create_boundaries)
{
	static const char *const ok[] = {
	    "{'name':'a','nominal_gpus':0}",
	    ("{'name':'@A63','nominal_gpus':1000000,'borrowing_limit_gpus':1000000,"
	     "'lending_limit_gpus':0}"),
	    "{'name':'0-9','nominal_gpus':1,'cohort':'a-1','weight':1000000}",
	    "{'name':'w','nominal_gpus':1,'weight':0.001}",
	    "{'name':'caps-lo','nominal_gpus':0,'max_cpus':1,'max_memory_mb':1}",
	    "{'name':'caps-hi','nominal_gpus':0,'max_cpus':100000000,'max_memory_mb':1000000000000}",
	    "{'name':'caps-null','nominal_gpus':0,'max_cpus':null,'max_memory_mb':null}",
	    "{'name':'idle-lo','nominal_gpus':0,'idle_gpu_alert_seconds':60}",
	    "{'name':'idle-hi','nominal_gpus':0,'idle_gpu_alert_seconds':604800}",
	    "{'name':'idle-null','nominal_gpus':0,'idle_gpu_alert_seconds':null}",
	};
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ty_test_context("%s", ok[i]);
		ty_http(&r, "POST", "/v1/teams", s->admin, ty_tmpl(ok[i], NULL), NULL);
		CHECK_STATUS(&r, 201);
	}
	ty_resp_free(&r);
}

TY_TEST(patch_validation)
{
	static const struct bad rows[] = {
	    {"not JSON", "nope", 400, "invalid_json", NULL},
	    {"unknown field", "{'quota':1}", 400, "unknown_field", "quota"},
	    {"nominal_gpus -1", "{'nominal_gpus':-1}", 422, "invalid_field", "nominal_gpus"},
	    {"nominal_gpus null", "{'nominal_gpus':null}", 422, "invalid_field", "nominal_gpus"},
	    {"weight 0", "{'weight':0}", 422, "invalid_field", "weight"},
	    {"weight null", "{'weight':null}", 422, "invalid_field", "weight"},
	    {"bad cohort", "{'cohort':'UPPER'}", 422, "invalid_field", "cohort"},
	    {"borrowing a string", "{'borrowing_limit_gpus':'4'}", 422, "invalid_field",
	     "borrowing_limit_gpus"},
	    {"max_cpus 0", "{'max_cpus':0}", 422, "invalid_field", "max_cpus"},
	    {"max_memory_mb -1", "{'max_memory_mb':-1}", 422, "invalid_field", "max_memory_mb"},
	    {"max_memory_mb a string", "{'max_memory_mb':'1G'}", 422, "invalid_field",
	     "max_memory_mb"},
	    {"idle alert 0", "{'idle_gpu_alert_seconds':0}", 422, "invalid_field",
	     "idle_gpu_alert_seconds"},
	    {"idle alert -60", "{'idle_gpu_alert_seconds':-60}", 422, "invalid_field",
	     "idle_gpu_alert_seconds"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_mk_team("pv", 3, 3);
	const char *path = ty_test_strf("/v1/teams/%s", name);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("row %zu: %s", i, rows[i].what);
		ty_http(&r, "PATCH", path, s->admin, ty_tmpl(rows[i].body, NULL), NULL);
		CHECK_PROBLEM(&r, rows[i].status, rows[i].code, rows[i].field);
	}
	ty_test_context(NULL);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_JINT(r.json, "nominal_gpus", 3);
	CHECK_JINT(r.json, "borrowing_limit_gpus", 3);
	ty_resp_free(&r);
}

TY_TEST(cpu_and_memory_caps)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("caps");
	const char *path = ty_test_strf("/v1/teams/%s", name);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T','nominal_gpus':0,'max_cpus':8,'max_memory_mb':16384}", name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "max_cpus", 8);
	CHECK_JINT(r.json, "max_memory_mb", 16384);
	CHECK_JINT(r.json, "usage.cpus_in_use", 0);
	CHECK_JINT(r.json, "usage.memory_mb_in_use", 0);
	CHECK_STR_EQ(DB("SELECT max_cpus || '/' || max_memory_mb FROM teams WHERE name = $1", name),
		     "8/16384");

	/* one field at a time; the other stays */
	ty_http(&r, "PATCH", path, s->admin, "{\"max_cpus\":64}", NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "max_cpus", 64);
	CHECK_JINT(r.json, "max_memory_mb", 16384);
	/* memory above 2^31 MiB fits */
	ty_http(&r, "PATCH", path, s->admin, "{\"max_memory_mb\":4294967296}", NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "max_memory_mb", 4294967296LL);
	/* null removes a cap */
	ty_http(&r, "PATCH", path, s->admin, "{\"max_cpus\":null}", NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "max_cpus");
	CHECK_JINT(r.json, "max_memory_mb", 4294967296LL);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_JNULL(r.json, "max_cpus");

	/* the message says what is allowed */
	ty_http(&r, "PATCH", path, s->admin, "{\"max_cpus\":0}", NULL);
	CHECK_PROBLEM(&r, 422, "invalid_field", "max_cpus");
	CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
		     "'max_cpus' must be an integer from 1 to 100000000 (CPUs) or null (no limit)") !=
	      NULL);
	ty_resp_free(&r);
}

TY_TEST(a_teams_own_uid)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_uniq("uid-a"), *b = ty_uniq("uid-b");
	/* a uid no other run of this database hands out: unique per test program */
	long long uid = 3000000 + (long long)getpid();
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":0,\"run_uid\":%lld}", a, uid), NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "run_uid", uid);
	/* no other team may run as it, at creation or later */
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":0,\"run_uid\":%lld}", b, uid), NULL);
	CHECK_PROBLEM(&r, 409, "uid_taken", "run_uid");
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":0}", b), NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JNULL(r.json, "run_uid");
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", b), s->admin,
		ty_test_strf("{\"run_uid\":%lld}", uid), NULL);
	CHECK_PROBLEM(&r, 409, "uid_taken", "run_uid");
	/* a team without one is refused by name, not by uid */
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":0}", b), NULL);
	CHECK_PROBLEM(&r, 409, "team_exists", "name");
	/* null gives it back to the scheduler's base + id */
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", a), s->admin, "{\"run_uid\":null}", NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "run_uid");
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", b), s->admin,
		ty_test_strf("{\"run_uid\":%lld}", uid), NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "run_uid", uid);
	/* the range: no system account, no negative id */
	for (int i = 0; i < 4; i++) {
		static const char *const bad[] = {"999", "0", "2147483647", "\"1000\""};

		ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", a), s->admin,
			ty_test_strf("{\"run_uid\":%s}", bad[i]), NULL);
		CHECK_PROBLEM(&r, 422, "invalid_field", "run_uid");
	}
	CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
		     "'run_uid' must be an integer from 1000 to 2147483646") != NULL);
	ty_resp_free(&r);
}

TY_TEST(idle_gpu_alert_set_changed_and_cleared)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("idle");
	const char *path = ty_test_strf("/v1/teams/%s", name);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T','nominal_gpus':4,'idle_gpu_alert_seconds':3600}", name), NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JINT(r.json, "idle_gpu_alert_seconds", 3600);
	/* a PATCH without it leaves it alone */
	ty_http(&r, "PATCH", path, s->admin, "{\"nominal_gpus\":5}", NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JINT(r.json, "idle_gpu_alert_seconds", 3600);
	ty_http(&r, "PATCH", path, s->admin, "{\"idle_gpu_alert_seconds\":600}", NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JINT(r.json, "idle_gpu_alert_seconds", 600);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_JINT(r.json, "idle_gpu_alert_seconds", 600);
	/* the message says what is allowed */
	ty_http(&r, "PATCH", path, s->admin, "{\"idle_gpu_alert_seconds\":30}", NULL);
	CHECK_PROBLEM(&r, 422, "invalid_field", "idle_gpu_alert_seconds");
	CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
		     "'idle_gpu_alert_seconds' must be an integer from 60 to 604800") != NULL);
	/* null switches it off */
	ty_http(&r, "PATCH", path, s->admin, "{\"idle_gpu_alert_seconds\":null}", NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JNULL(r.json, "idle_gpu_alert_seconds");
	/* members see it, may not change it */
	ty_http(&r, "PATCH", path, ty_mk_token("member", name), "{\"idle_gpu_alert_seconds\":60}",
		NULL);
	CHECK_STATUS(&r, 403);
	ty_http(&r, "GET", path, ty_mk_token("viewer", name), NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JNULL(r.json, "idle_gpu_alert_seconds");
	ty_resp_free(&r);
}

TY_TEST(a_job_larger_than_a_cap_is_refused)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("capjob");
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T','nominal_gpus':8,'max_cpus':8,'max_memory_mb':4096}", name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	/* 2 nodes × 8 CPUs = 16 > 8, GPU-less included */
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['true'],'resources':{'nodes':2,'gpus_per_node':0,"
			"'cpus_per_node':8}}",
			name),
		NULL);
	CHECK_PROBLEM(&r, 422, "exceeds_quota", "resources");
	CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
		     "the job needs 16 CPUs but team") != NULL);
	/* memory: the default 1024 MiB per node × 5 nodes */
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['true'],'resources':{'nodes':5,'gpus_per_node':0}}",
			name),
		NULL);
	CHECK_PROBLEM(&r, 422, "exceeds_quota", "resources");
	CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
		     "needs 5120 MiB of memory") != NULL);
	/* a sweep's trials, each */
	ty_http(&r, "POST", "/v1/sweeps", s->admin,
		ty_tmpl("{'team':'@T','template':{'command':['x'],'resources':{'gpus_per_node':0,"
			"'cpus_per_node':16}},'trials':[{'a':1}]}",
			name),
		NULL);
	CHECK_PROBLEM(&r, 422, "exceeds_quota", "template.resources");
	CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
		     "each trial needs 16 CPUs") != NULL);
	/* exactly the caps: accepted (it waits its turn in the scheduler) */
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['true'],'resources':{'nodes':2,'gpus_per_node':0,"
			"'cpus_per_node':4,'memory_mb_per_node':2048}}",
			name),
		NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(budget_set_changed_and_cleared)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("budget");
	const char *path = ty_test_strf("/v1/teams/%s", name);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T','nominal_gpus':4,'budget':{'amount':1000,'period':'month'}}",
			name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK(json_number_value(ty_jpath(r.json, "budget.amount")) == 1000.0);
	CHECK_JSTR(r.json, "budget.period", "month");
	CHECK(json_number_value(ty_jpath(r.json, "budget.spent")) == 0.0);
	CHECK_JTIME(r.json, "budget.period_start");
	/* a PATCH without it leaves it alone */
	ty_http(&r, "PATCH", path, s->admin, "{\"nominal_gpus\":5}", NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "budget.period", "month");
	ty_http(&r, "PATCH", path, s->admin, "{\"budget\":{\"amount\":12.5,\"period\":\"day\"}}",
		NULL);
	CHECK_STATUS(&r, 200);
	CHECK(json_number_value(ty_jpath(r.json, "budget.amount")) == 12.5);
	CHECK_JSTR(r.json, "budget.period", "day");
	/* 0 is a budget (nothing may start), not an error */
	ty_http(&r, "PATCH", path, s->admin, "{\"budget\":{\"amount\":0,\"period\":\"week\"}}",
		NULL);
	CHECK_STATUS(&r, 200);
	CHECK(json_number_value(ty_jpath(r.json, "budget.amount")) == 0.0);
	CHECK_JSTR(r.json, "budget.period", "week");
	CHECK_STR_EQ(DB("SELECT budget_amount || '/' || budget_period FROM teams WHERE name = $1",
			name),
		     "0/week");
	/* members see it, may not change it */
	ty_http(&r, "PATCH", path, ty_mk_token("member", name),
		"{\"budget\":{\"amount\":5,\"period\":\"day\"}}", NULL);
	CHECK_STATUS(&r, 403);
	ty_http(&r, "GET", path, ty_mk_token("viewer", name), NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "budget.period", "week");
	/* null lifts it */
	ty_http(&r, "PATCH", path, s->admin, "{\"budget\":null}", NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JNULL(r.json, "budget");
	ty_resp_free(&r);
}

TY_TEST(budget_validation)
{
	static const struct {
		const char *body, *code, *field, *detail;
	} rows[] = {
	    {"{'budget':5}", "invalid_field", "budget", "'budget' must be an object"},
	    {"{'budget':{'period':'month'}}", "missing_field", "budget.amount", NULL},
	    {"{'budget':{'amount':100}}", "missing_field", "budget.period", NULL},
	    {"{'budget':{'amount':-1,'period':'month'}}", "invalid_field", "budget.amount",
	     "'budget.amount' must be a number from 0 to"},
	    {"{'budget':{'amount':'100','period':'month'}}", "invalid_field", "budget.amount",
	     NULL},
	    {"{'budget':{'amount':1e13,'period':'month'}}", "invalid_field", "budget.amount", NULL},
	    {"{'budget':{'amount':100,'period':'year'}}", "invalid_field", "budget.period",
	     "'budget.period' must be one of 'day', 'week', 'month'"},
	    {"{'budget':{'amount':100,'period':null}}", "invalid_field", "budget.period", NULL},
	    {"{'budget':{'amount':100,'period':'month','currency':'EUR'}}", "unknown_field",
	     "budget", "unknown field 'budget.currency'"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_mk_team("budgetv", 1, -1);
	const char *path = ty_test_strf("/v1/teams/%s", name);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].body);
		ty_http(&r, "PATCH", path, s->admin, ty_tmpl(rows[i].body, NULL), NULL);
		CHECK_PROBLEM(&r, strcmp(rows[i].code, "unknown_field") ? 422 : 400, rows[i].code,
			      rows[i].field);
		if (rows[i].detail)
			CHECK(strstr(ty_jstr(r.json, "detail") ? ty_jstr(r.json, "detail") : "",
				     rows[i].detail) != NULL);
		/* nothing changed */
		CHECK_STR_EQ(DB("SELECT budget_amount IS NULL FROM teams WHERE name = $1", name),
			     "t");
	}
	/* the same checks on create, and nothing is created */
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T-c','nominal_gpus':1,'budget':{'amount':-5,'period':'day'}}",
			name),
		NULL);
	CHECK_PROBLEM(&r, 422, "invalid_field", "budget.amount");
	ty_http(&r, "GET", ty_test_strf("/v1/teams/%s-c", name), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 404);
	ty_resp_free(&r);
}
