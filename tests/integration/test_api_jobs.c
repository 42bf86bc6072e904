/*
 * POST /v1/jobs and GET /v1/jobs/{id} (docs/api.md "Jobs"): the stored job,
 * defaults, the validation table, boundaries, quota.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#define MINIMAL "'command':['python','train.py'],'resources':{}"

TY_TEST(submit_returns_the_job)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("jobs", 64, -1);
	struct ty_resp r = {0}, g = {0};
	long long id;

	ty_http(
	    &r, "POST", "/v1/jobs", s->admin,
	    ty_tmpl("{'team':'@T','name':'llama-ft','command':['python','train.py','--lr','3e-4'],"
		    "'resources':{'nodes':2,'gpus_per_node':8}}",
		    team),
	    NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK(ty_resp_header(&r, "Content-Type") &&
	      !strncmp(ty_resp_header(&r, "Content-Type"), "application/json", 16));
	id = ty_jint(r.json, "id");
	CHECK(id > 0);
	CHECK_JSTR(r.json, "team", team);
	CHECK_JSTR(r.json, "name", "llama-ft");
	CHECK_JSTR(r.json, "state", "pending");
	CHECK(json_is_false(ty_jpath(r.json, "cancel_requested")));
	CHECK_JINT(r.json, "attempt", 0);
	CHECK_JNULL(r.json, "failure_class");
	CHECK_JTIME(r.json, "created_at");
	CHECK_JTIME(r.json, "updated_at");
	CHECK_JNULL(r.json, "finished_at");
	CHECK_JSTR(r.json, "spec.command[3]", "3e-4");
	CHECK_JINT(r.json, "spec.resources.nodes", 2);
	CHECK_JINT(r.json, "spec.resources.gpus_per_node", 8);
	CHECK_JSTR(r.json, "spec.team", team);
	CHECK_JSTR(r.json, "spec.name", "llama-ft");

	/*
	 * GET returns the same object, and its goodput (null: no attempt has
	 * ended) and start-time estimate (null: no scheduler runs here)
	 */
	ty_http(&g, "GET", ty_test_strf("/v1/jobs/%lld", id), s->admin, NULL, NULL);
	REQUIRE_STATUS(&g, 200);
	for (const char *const *k = (const char *const[]){"goodput", "estimated_start", "estimate", NULL};
	     *k; k++) {
		CHECK(json_is_null(json_object_get(g.json, *k)));
		json_object_del(g.json, *k);
	}
	if (!json_equal(r.json, g.json)) {
		char *a = json_dumps(r.json, JSON_SORT_KEYS | JSON_COMPACT);
		char *b = json_dumps(g.json, JSON_SORT_KEYS | JSON_COMPACT);

		FAIL("GET differs from the POST answer\n    post: %s\n    get:  %s", a, b);
		free(a);
		free(b);
	}
	ty_resp_free(&r);
	ty_resp_free(&g);
}

/* Every default of the table in docs/api.md, filled in the stored spec. */
TY_TEST(defaults_filled_in_the_spec)
{
	static const struct {
		const char *path;
		long long i;
		const char *s; /* expected string, or NULL for the integer */
	} ints_and_strings[] = {
	    {"spec.resources.nodes", 1, NULL},
	    {"spec.resources.gpus_per_node", 0, NULL},
	    {"spec.resources.cpus_per_node", 1, NULL},
	    {"spec.resources.memory_mb_per_node", 1024, NULL},
	    {"spec.priority_class", 0, "normal"},
	    {"spec.priority", 0, NULL},
	    {"spec.max_runtime_seconds", 86400, NULL},
	    {"spec.min_runtime_seconds", 0, NULL},
	    {"spec.spot.max_preemptions", 3, NULL},
	    {"spec.spot.fallback", 0, "on_demand"},
	    {"spec.retry.system", 3, NULL},
	    {"spec.retry.user", 0, NULL},
	    {"spec.checkpoint.signal", 0, "SIGUSR1"},
	    {"spec.checkpoint.grace_seconds", 120, NULL},
	    {"spec.checkpoint.keep", 3, NULL},
	    {"spec.checkpoint.keep_every", 0, NULL},
	    {"spec.launch", 0, "per_gpu"},
	    {"spec.hang_timeout_seconds", 1800, NULL},
	    {"spec.start_timeout_seconds", 600, NULL},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("defaults", 8, -1);
	struct ty_resp r = {0};
	json_t *j;

	ty_http(&r, "POST", "/v1/jobs", s->admin, ty_tmpl("{'team':'@T'," MINIMAL "}", team), NULL);
	REQUIRE_STATUS(&r, 201);
	j = r.json;
	for (size_t i = 0; i < sizeof(ints_and_strings) / sizeof(ints_and_strings[0]); i++) {
		if (ints_and_strings[i].s)
			CHECK_JSTR(j, ints_and_strings[i].path, ints_and_strings[i].s);
		else
			CHECK_JINT(j, ints_and_strings[i].path, ints_and_strings[i].i);
	}
	CHECK_JNULL(j, "name");
	CHECK_JNULL(j, "spec.name");
	CHECK_JNULL(j, "spec.topology.required");
	CHECK(json_is_true(ty_jpath(j, "spec.preemptible")));
	CHECK(json_is_false(ty_jpath(j, "spec.spot.allowed")));
	CHECK(json_is_false(ty_jpath(j, "spec.checkpoint.tier")));
	CHECK(json_is_object(ty_jpath(j, "spec.env")) &&
	      json_object_size(ty_jpath(j, "spec.env")) == 0);
	CHECK(json_is_object(ty_jpath(j, "spec.labels")) &&
	      json_object_size(ty_jpath(j, "spec.labels")) == 0);
	CHECK_JSTR(j, "spec.team", team);
	CHECK_JSTR(j, "spec.command[0]", "python");
	ty_resp_free(&r);
}

/* The whole job object, with ids and times masked. */
TY_TEST(golden_job_with_defaults)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'golden','nominal_gpus':16}", NULL), NULL);
	REQUIRE_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'golden','command':['torchrun','train.py'],'resources':"
			"{'gpus_per_node':8},'labels':{'project':'llama'}}",
			NULL),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_GOLDEN(r.json, "job_defaults");
	ty_resp_free(&r);
}

/* A spec with every field set comes back as it was sent (and nothing more). */
TY_TEST(full_spec_round_trips)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("full", 64, 64);
	const char *body = ty_tmpl(
	    "{'team':'@T','name':'full-spec','command':['torchrun','--nproc-per-node=8','t.py'],"
	    "'env':{'HF_HOME':'/data/hf','NCCL_DEBUG':'INFO'},"
	    "'resources':{'nodes':4,'gpus_per_node':8,'cpus_per_node':96,'memory_mb_per_node':"
	    "1000000},'priority_class':'high','priority':-7,'max_runtime_seconds':7200,"
	    "'min_runtime_seconds':600,'preemptible':false,"
	    "'spot':{'allowed':true,'max_preemptions':5,'fallback':'none'},"
	    "'retry':{'system':10,'user':1},"
	    "'checkpoint':{'signal':'SIGUSR2','grace_seconds':300,'keep':5,'keep_every':1000,"
	    "'tier':true},"
	    "'topology':{'required':'block'},'launch':'per_node','hang_timeout_seconds':600,"
	    "'start_timeout_seconds':120,'preflight':true,'queue_if_unschedulable':true,"
	    "'labels':{'project':'llama','example.com/owner':'ml-infra'}}",
	    team);
	json_t *sent = json_loads(body, 0, NULL);
	struct ty_resp r = {0};

	REQUIRE(sent != NULL);
	ty_http(&r, "POST", "/v1/jobs", s->admin, body, NULL);
	CHECK_STATUS(&r, 201);
	if (r.status == 201 && !json_equal(sent, ty_jpath(r.json, "spec"))) {
		char *a = json_dumps(sent, JSON_SORT_KEYS | JSON_COMPACT);
		char *b = json_dumps(ty_jpath(r.json, "spec"), JSON_SORT_KEYS | JSON_COMPACT);

		FAIL("stored spec differs from the one sent\n    sent:   %s\n    stored: %s", a, b);
		free(a);
		free(b);
	}
	json_decref(sent);
	ty_resp_free(&r);
}

TY_TEST(get_unknown_job_is_404)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "GET", "/v1/jobs/987654321", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

/* ---- the validation table ---- */

enum gen { PLAIN, DEEP, HUGE, NOT_UTF8, MANY_ENV, MANY_LABELS, LONG_COMMAND };

struct bad {
	const char *what;
	enum gen gen;
	const char *body;	    /* template (see ty_tmpl) */
	const char *const *headers; /* extra request headers */
	int status;
	const char *code, *field;
};

static const char *build(const struct bad *b, const char *team)
{
	const char *head;
	char *p;
	size_t n;

	switch (b->gen) {
	case PLAIN:
		return ty_tmpl(b->body, team);
	case DEEP: /* 40 levels inside a label value */
		return ty_tmpl("{'team':'@T'," MINIMAL ",'labels':{'x':"
			       "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
			       "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}",
			       team);
	case HUGE: /* valid JSON, one byte over 1 MiB */
		head = ty_tmpl("{'team':'@T'," MINIMAL ",'name':'", team);
		n = 1048577;
		p = ty_test_alloc(n + 1);
		memset(p, 'a', n);
		memcpy(p, head, strlen(head));
		memcpy(p + n - 2, "\"}", 2);
		return p;
	case NOT_UTF8:
		return ty_tmpl("{'team':'@T'," MINIMAL ",'name':'bad \xff\xfe bytes'}", team);
	case MANY_ENV:
		return ty_tmpl("{'team':'@T'," MINIMAL ",'env':{@K257}}", team);
	case MANY_LABELS:
		return ty_tmpl("{'team':'@T'," MINIMAL ",'labels':{@K33}}", team);
	case LONG_COMMAND: {
		char *s = ty_test_strf("{\"team\":\"%s\",\"resources\":{},\"command\":[", team);
		size_t len = strlen(s);
		char *out = ty_test_alloc(len + 1025 * 4 + 8);

		memcpy(out, s, len);
		for (int i = 0; i < 1025; i++)
			len += (size_t)sprintf(out + len, "%s\"x\"", i ? "," : "");
		strcpy(out + len, "]}");
		return out;
	}
	}
	return NULL;
}

#define H(...) ((const char *const[]){__VA_ARGS__, NULL})
#define T "'team':'@T',"
/* 422 invalid_field rows: a top-level member added, or one of resources */
#define BAD_FIELD(what, json, field)                                                               \
	{                                                                                          \
		what, PLAIN, "{" T MINIMAL "," json "}", NULL, 422, "invalid_field", field         \
	}
#define BAD_RES(what, json, field)                                                                 \
	{                                                                                          \
		what, PLAIN, "{" T "'command':['python'],'resources':{" json "}}", NULL, 422,      \
		    "invalid_field", field                                                         \
	}

TY_TEST(validation_table)
{
	const struct bad rows[] = {
	    /* not JSON, not an object, too deep, duplicate keys, bad bytes */
	    {"not JSON", PLAIN, "{team:", NULL, 400, "invalid_json", NULL},
	    {"empty body", PLAIN, "", NULL, 400, "invalid_json", NULL},
	    {"array body", PLAIN, "[]", NULL, 400, "invalid_json", NULL},
	    {"string body", PLAIN, "'hello'", NULL, 400, "invalid_json", NULL},
	    {"trailing garbage", PLAIN, "{" T MINIMAL "} x", NULL, 400, "invalid_json", NULL},
	    {"deep nesting", DEEP, NULL, NULL, 400, "json_too_deep", NULL},
	    {"duplicate keys", PLAIN, "{" T "'team':'@T'," MINIMAL "}", NULL, 400, "invalid_json",
	     NULL},
	    {"duplicate nested keys", PLAIN,
	     "{" T "'command':['x'],'resources':{'nodes':1,'nodes':2}}", NULL, 400, "invalid_json",
	     NULL},
	    {"invalid UTF-8", NOT_UTF8, NULL, NULL, 400, "invalid_json", NULL},
	    /* unknown fields */
	    {"unknown top-level field", PLAIN, "{" T MINIMAL ",'gpus':8}", NULL, 400,
	     "unknown_field", "gpus"},
	    {"unknown nested field", PLAIN, "{" T "'command':['x'],'resources':{'gpu':8}}", NULL,
	     400, "unknown_field", "resources.gpu"},
	    {"unknown field in spot", PLAIN, "{" T MINIMAL ",'spot':{'allow':true}}", NULL, 400,
	     "unknown_field", "spot.allow"},
	    {"unknown field in checkpoint", PLAIN, "{" T MINIMAL ",'checkpoint':{'every':5}}", NULL,
	     400, "unknown_field", "checkpoint.every"},
	    /* required fields */
	    {"missing team", PLAIN, "{" MINIMAL "}", NULL, 422, "missing_field", "team"},
	    {"missing command", PLAIN, "{" T "'resources':{}}", NULL, 422, "missing_field",
	     "command"},
	    {"missing resources", PLAIN, "{" T "'command':['x']}", NULL, 422, "missing_field",
	     "resources"},
	    /* wrong types */
	    {"team not a string", PLAIN, "{'team':7," MINIMAL "}", NULL, 422, "invalid_field",
	     "team"},
	    {"resources not an object", PLAIN, "{" T "'command':['x'],'resources':[]}", NULL, 422,
	     "invalid_field", "resources"},
	    {"command not an array", PLAIN, "{" T "'command':'python t.py','resources':{}}", NULL,
	     422, "invalid_field", "command"},
	    {"empty command", PLAIN, "{" T "'command':[],'resources':{}}", NULL, 422,
	     "invalid_field", "command"},
	    {"command with a number", PLAIN, "{" T "'command':['python',1],'resources':{}}", NULL,
	     422, "invalid_field", "command[1]"},
	    {"command starting empty", PLAIN, "{" T "'command':['','x'],'resources':{}}", NULL, 422,
	     "invalid_field", "command[0]"},
	    {"command of 1025 strings", LONG_COMMAND, NULL, NULL, 422, "invalid_field", "command"},
	    /* resources out of range or of the wrong type */
	    BAD_RES("nodes 0", "'nodes':0", "resources.nodes"),
	    BAD_RES("nodes 10001", "'nodes':10001", "resources.nodes"),
	    BAD_RES("nodes as a string", "'nodes':'2'", "resources.nodes"),
	    BAD_RES("nodes 1.5", "'nodes':1.5", "resources.nodes"),
	    BAD_RES("nodes a boolean", "'nodes':true", "resources.nodes"),
	    BAD_RES("gpus_per_node 65", "'gpus_per_node':65", "resources.gpus_per_node"),
	    BAD_RES("gpus_per_node -1", "'gpus_per_node':-1", "resources.gpus_per_node"),
	    BAD_RES("cpus_per_node 0", "'cpus_per_node':0", "resources.cpus_per_node"),
	    BAD_RES("cpus_per_node 4097", "'cpus_per_node':4097", "resources.cpus_per_node"),
	    BAD_RES("memory 0", "'memory_mb_per_node':0", "resources.memory_mb_per_node"),
	    BAD_RES("memory 16777217", "'memory_mb_per_node':16777217",
		    "resources.memory_mb_per_node"),
	    /* scalar fields */
	    BAD_FIELD("name empty", "'name':''", "name"),
	    BAD_FIELD("name 129 characters", "'name':'@A129'", "name"),
	    BAD_FIELD("priority 1001", "'priority':1001", "priority"),
	    BAD_FIELD("priority -1001", "'priority':-1001", "priority"),
	    BAD_FIELD("priority as a string", "'priority':'1'", "priority"),
	    BAD_FIELD("bad priority_class", "'priority_class':'urgent'", "priority_class"),
	    BAD_FIELD("priority_class a number", "'priority_class':1", "priority_class"),
	    BAD_FIELD("bad launch", "'launch':'per_rank'", "launch"),
	    BAD_FIELD("bad topology.required", "'topology':{'required':'datacenter'}",
		      "topology.required"),
	    BAD_FIELD("topology not an object", "'topology':'block'", "topology"),
	    BAD_FIELD("max_runtime 0", "'max_runtime_seconds':0", "max_runtime_seconds"),
	    BAD_FIELD("max_runtime over a year", "'max_runtime_seconds':31536001",
		      "max_runtime_seconds"),
	    BAD_FIELD("min_runtime > max_runtime",
		      "'max_runtime_seconds':50,'min_runtime_seconds':100", "min_runtime_seconds"),
	    BAD_FIELD("min_runtime > default max_runtime", "'min_runtime_seconds':86401",
		      "min_runtime_seconds"),
	    BAD_FIELD("min_runtime -1", "'min_runtime_seconds':-1", "min_runtime_seconds"),
	    BAD_FIELD("hang_timeout 30", "'hang_timeout_seconds':30", "hang_timeout_seconds"),
	    BAD_FIELD("hang_timeout 59", "'hang_timeout_seconds':59", "hang_timeout_seconds"),
	    BAD_FIELD("start_timeout 9", "'start_timeout_seconds':9", "start_timeout_seconds"),
	    BAD_FIELD("start_timeout -1", "'start_timeout_seconds':-1", "start_timeout_seconds"),
	    BAD_FIELD("start_timeout 86401", "'start_timeout_seconds':86401",
		      "start_timeout_seconds"),
	    BAD_FIELD("preflight string", "'preflight':'yes'", "preflight"),
	    BAD_FIELD("queue_if_unschedulable string", "'queue_if_unschedulable':'yes'",
		      "queue_if_unschedulable"),
	    BAD_FIELD("hang_timeout over a week", "'hang_timeout_seconds':604801",
		      "hang_timeout_seconds"),
	    BAD_FIELD("preemptible as a string", "'preemptible':'yes'", "preemptible"),
	    BAD_FIELD("spot.allowed as 1", "'spot':{'allowed':1}", "spot.allowed"),
	    BAD_FIELD("spot.max_preemptions 1001", "'spot':{'max_preemptions':1001}",
		      "spot.max_preemptions"),
	    BAD_FIELD("bad spot.fallback", "'spot':{'fallback':'spot'}", "spot.fallback"),
	    BAD_FIELD("retry.system 101", "'retry':{'system':101}", "retry.system"),
	    BAD_FIELD("retry.user -1", "'retry':{'user':-1}", "retry.user"),
	    BAD_FIELD("checkpoint.signal SIGKILL", "'checkpoint':{'signal':'SIGKILL'}",
		      "checkpoint.signal"),
	    BAD_FIELD("checkpoint.grace_seconds 3601", "'checkpoint':{'grace_seconds':3601}",
		      "checkpoint.grace_seconds"),
	    BAD_FIELD("checkpoint.keep 0", "'checkpoint':{'keep':0}", "checkpoint.keep"),
	    BAD_FIELD("checkpoint.keep 101", "'checkpoint':{'keep':101}", "checkpoint.keep"),
	    BAD_FIELD("checkpoint.keep -3", "'checkpoint':{'keep':-3}", "checkpoint.keep"),
	    BAD_FIELD("checkpoint.keep_every -1", "'checkpoint':{'keep_every':-1}",
		      "checkpoint.keep_every"),
	    BAD_FIELD("checkpoint.keep_every absurd", "'checkpoint':{'keep_every':10000000000}",
		      "checkpoint.keep_every"),
	    BAD_FIELD("checkpoint.keep_every as a string", "'checkpoint':{'keep_every':'10'}",
		      "checkpoint.keep_every"),
	    BAD_FIELD("checkpoint.tier as 1", "'checkpoint':{'tier':1}", "checkpoint.tier"),
	    /* env */
	    {"reserved env RANK", PLAIN, "{" T MINIMAL ",'env':{'RANK':'0'}}", NULL, 422,
	     "reserved_env", "env.RANK"},
	    {"reserved env TRAINYARD_X", PLAIN, "{" T MINIMAL ",'env':{'TRAINYARD_X':'1'}}", NULL,
	     422, "reserved_env", "env.TRAINYARD_X"},
	    {"reserved env CUDA_VISIBLE_DEVICES", PLAIN,
	     "{" T MINIMAL ",'env':{'A':'1','CUDA_VISIBLE_DEVICES':'0'}}", NULL, 422,
	     "reserved_env", "env.CUDA_VISIBLE_DEVICES"},
	    {"reserved env MASTER_PORT", PLAIN, "{" T MINIMAL ",'env':{'MASTER_PORT':'1'}}", NULL,
	     422, "reserved_env", "env.MASTER_PORT"},
	    BAD_FIELD("env key with a dash", "'env':{'BAD-KEY':'1'}", "env.BAD-KEY"),
	    BAD_FIELD("env key starting with a digit", "'env':{'1X':'1'}", "env.1X"),
	    BAD_FIELD("env key of 257 characters", "'env':{'@A257':'1'}", "env.@A257"),
	    BAD_FIELD("env value a number", "'env':{'A':1}", "env.A"),
	    BAD_FIELD("env not an object", "'env':['A=1']", "env"),
	    {"257 env entries", MANY_ENV, NULL, NULL, 422, "invalid_field", "env"},
	    /* labels */
	    {"33 labels", MANY_LABELS, NULL, NULL, 422, "invalid_field", "labels"},
	    BAD_FIELD("label value of 257 characters", "'labels':{'k':'@A257'}", "labels.k"),
	    BAD_FIELD("label key starting with '-'", "'labels':{'-x':'v'}", "labels.-x"),
	    BAD_FIELD("label key of 64 characters", "'labels':{'@A64':'v'}", "labels.@A64"),
	    BAD_FIELD("label key with a space", "'labels':{'a b':'v'}", "labels.a b"),
	    BAD_FIELD("label value a number", "'labels':{'k':1}", "labels.k"),
	    /* team and quota */
	    {"unknown team", PLAIN, "{'team':'no-such-team'," MINIMAL "}", NULL, 422,
	     "unknown_team", "team"},
	    {"exceeds quota (3 x 8 > 8 + 8)", PLAIN,
	     "{" T "'command':['x'],'resources':{'nodes':3,'gpus_per_node':8}}", NULL, 422,
	     "exceeds_quota", TY_FIELD_UNCHECKED},
	    /* transport-level */
	    {"body over 1 MiB", HUGE, NULL, NULL, 413, "body_too_large", NULL},
	    {"text/plain", PLAIN, "{" T MINIMAL "}", H("Content-Type: text/plain"), 415,
	     "unsupported_media_type", NULL},
	    {"form content type", PLAIN, "{" T MINIMAL "}",
	     H("Content-Type: application/x-www-form-urlencoded"), 415, "unsupported_media_type",
	     NULL},
	    {"no content type", PLAIN, "{" T MINIMAL "}", H("Content-Type:"), 415,
	     "unsupported_media_type", NULL},
	    {"Idempotency-Key of 256 characters", PLAIN, "{" T MINIMAL "}",
	     H("Idempotency-Key: "
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	       "a"
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	       "a"
	       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	       "a"
	       "aaaa"),
	     400, "invalid_header", TY_FIELD_UNCHECKED},
	    {"Idempotency-Key not ASCII", PLAIN, "{" T MINIMAL "}",
	     H("Idempotency-Key: caf\xc3\xa9"), 400, "invalid_header", TY_FIELD_UNCHECKED},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("val", 8, 8);
	int before_team, before_all;
	struct ty_resp r = {0};

	before_team = ty_count_jobs(s->admin, ty_test_strf("team=%s", team));
	before_all = ty_count_jobs(s->admin, "");
	CHECK(sizeof(rows) / sizeof(rows[0]) >= 30);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *body = build(&rows[i], team);
		const char *field = rows[i].field;

		if (field && field != TY_FIELD_UNCHECKED && strchr(field, '@'))
			field = ty_tmpl(field, team);
		ty_test_context("row %zu: %s", i, rows[i].what);
		ty_http_raw(&r, s->api, "POST", "/v1/jobs", s->admin, body, strlen(body),
			    rows[i].headers);
		CHECK_PROBLEM(&r, rows[i].status, rows[i].code, field);
		/* "unknown fields rejected with a message naming them" */
		if (!strcmp(rows[i].code, "unknown_field") && r.status == 400) {
			const char *detail = ty_jstr(r.json, "detail");
			const char *last = strrchr(field, '.') ? strrchr(field, '.') + 1 : field;

			if (!detail || !strstr(detail, last))
				FAIL("detail \"%s\" does not name '%s'", detail ? detail : "",
				     last);
		}
	}
	ty_test_context(NULL);
	/* nothing was stored */
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), before_team);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ""), before_all);
	ty_resp_free(&r);
}

/* Every limit itself is accepted and stored as sent. */
TY_TEST(boundaries_accepted)
{
	const struct {
		const char *what, *json, *path;
		long long i;
		const char *s;
	} rows[] = {
	    {"nodes 10000 x 64 GPUs without a borrowing limit",
	     "'resources':{'nodes':10000,'gpus_per_node':64}", "spec.resources.nodes", 10000, NULL},
	    {"cpus 4096, memory 16777216",
	     "'resources':{'cpus_per_node':4096,'memory_mb_per_node':16777216}",
	     "spec.resources.memory_mb_per_node", 16777216, NULL},
	    {"hang_timeout 0 (off)", "'resources':{},'hang_timeout_seconds':0",
	     "spec.hang_timeout_seconds", 0, NULL},
	    {"hang_timeout 60", "'resources':{},'hang_timeout_seconds':60",
	     "spec.hang_timeout_seconds", 60, NULL},
	    {"hang_timeout 604800", "'resources':{},'hang_timeout_seconds':604800",
	     "spec.hang_timeout_seconds", 604800, NULL},
	    {"min_runtime = max_runtime",
	     "'resources':{},'max_runtime_seconds':31536000,'min_runtime_seconds':31536000",
	     "spec.min_runtime_seconds", 31536000, NULL},
	    {"priority -1000", "'resources':{},'priority':-1000", "spec.priority", -1000, NULL},
	    {"priority 1000", "'resources':{},'priority':1000", "spec.priority", 1000, NULL},
	    {"priority_class scavenger", "'resources':{},'priority_class':'scavenger'",
	     "spec.priority_class", 0, "scavenger"},
	    {"name of 128 characters", "'resources':{},'name':'@A128'", "name", 0, NULL},
	    {"32 labels", "'resources':{},'labels':{@K32}", "spec.labels.K32", 0, "v"},
	    {"label key of 63 characters, value of 256", "'resources':{},'labels':{'@A63':'@A256'}",
	     NULL, 0, NULL},
	    {"label key with . _ / -", "'resources':{},'labels':{'example.com/a_b-c':'v'}", NULL, 0,
	     NULL},
	    {"256 env entries", "'resources':{},'env':{@K256}", "spec.env.K256", 0, "v"},
	    {"env key of 256 characters", "'resources':{},'env':{'_@A255':'x'}", NULL, 0, NULL},
	    {"env value empty", "'resources':{},'env':{'EMPTY':''}", "spec.env.EMPTY", 0, ""},
	    {"topology null", "'resources':{},'topology':{'required':null}", NULL, 0, NULL},
	    {"topology zone", "'resources':{},'topology':{'required':'zone'}",
	     "spec.topology.required", 0, "zone"},
	    {"launch per_node", "'resources':{},'launch':'per_node'", "spec.launch", 0, "per_node"},
	    {"later command arguments may be empty", "'resources':{}", NULL, 0, NULL},
	    {"checkpoint SIGHUP, grace 0, keep 100",
	     "'resources':{},'checkpoint':{'signal':'SIGHUP','grace_seconds':0,'keep':100}",
	     "spec.checkpoint.keep", 100, NULL},
	    {"checkpoint keep_every at its bound", "'resources':{},'checkpoint':{'keep_every':1000000000}",
	     "spec.checkpoint.keep_every", 1000000000, NULL},
	    {"retry 100 and 100", "'resources':{},'retry':{'system':100,'user':100}",
	     "spec.retry.user", 100, NULL},
	    {"spot.max_preemptions 0", "'resources':{},'spot':{'max_preemptions':0}",
	     "spec.spot.max_preemptions", 0, NULL},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("edge", 8, -1);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *body = ty_tmpl(
		    ty_test_strf("{'team':'@T','command':['python','','x'],%s}", rows[i].json),
		    team);

		ty_test_context("%s", rows[i].what);
		ty_http(&r, "POST", "/v1/jobs", s->admin, body, NULL);
		CHECK_STATUS(&r, 201);
		if (r.status != 201 || !rows[i].path)
			continue;
		if (!strcmp(rows[i].path, "name"))
			CHECK_INT_EQ(strlen(ty_jstr(r.json, "name") ? ty_jstr(r.json, "name") : ""),
				     128);
		else if (rows[i].s)
			CHECK_JSTR(r.json, rows[i].path, rows[i].s);
		else
			CHECK_JINT(r.json, rows[i].path, rows[i].i);
	}
	ty_resp_free(&r);
}

TY_TEST(content_type_with_charset_is_json)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("charset", 8, -1);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/jobs", s->admin, ty_tmpl("{'team':'@T'," MINIMAL "}", team),
		H("Content-Type: application/json; charset=utf-8"));
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}

TY_TEST(quota_boundary)
{
	const struct ty_stack *s = ty_stack_get();
	const char *bounded = ty_mk_team("bounded", 8, 8);
	const char *unbounded = ty_mk_team("unbounded", 8, -1);
	struct ty_resp r = {0};

	/* 2 x 8 = nominal + borrowing: fits */
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['x'],'resources':{'nodes':2,'gpus_per_node':8}}",
			bounded),
		NULL);
	CHECK_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['x'],'resources':{'nodes':17,'gpus_per_node':1}}",
			bounded),
		NULL);
	CHECK_PROBLEM(&r, 422, "exceeds_quota", TY_FIELD_UNCHECKED);
	/* without a borrowing limit the scheduler decides: accepted, pending */
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['x'],'resources':{'nodes':3,'gpus_per_node':8}}",
			unbounded),
		NULL);
	CHECK_STATUS(&r, 201);
	CHECK_JSTR(r.json, "state", "pending");
	/* a CPU-only job never exceeds a GPU quota */
	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','command':['x'],'resources':{'nodes':100}}", bounded), NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}
