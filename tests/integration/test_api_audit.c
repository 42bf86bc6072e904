/*
 * The request audit log (docs/security.md "Audit log", docs/api.md "Audit"):
 * one audit_requests row per mutating request, refused ones included, with
 * exact fields; none for GETs; GET /v1/audit filters and pages, for admins
 * only; no token or webhook secret in the table or the API's log.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

static const char *lld(long long v)
{
	return ty_test_strf("%lld", v);
}

/* The id of the token whose secret is tok. */
static const char *token_id(const char *tok)
{
	return DB("SELECT id FROM api_tokens WHERE token_sha256 = encode(sha256(convert_to($1,"
		  " 'UTF8')), 'hex')",
		  tok);
}

/* A running attempt of job with the hash of a new trial token; returns the token. */
static const char *mk_trial_token(long long job)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char t[48] = "tym_";

	for (int i = 4; i < 47; i++)
		t[i] = b64[rand() % 64];
	t[47] = '\0';
	DB("INSERT INTO nodes (id, address, gpus, state, boot_id) VALUES ('aud-trial', '10.9.0.1',"
	   " 8, 'ready', 'b') ON CONFLICT (id) DO NOTHING",
	   NULL);
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch, metrics_token_sha256)"
	   " VALUES ($1::bigint, 1, 'running', 1, 'aud-trial', '10.9.0.1',"
	   " 20000 + ($1::bigint % 10000)::int, 1, 1, '{}', encode(sha256(convert_to($2, 'UTF8')),"
	   " 'hex'))",
	   lld(job), t);
	DB("UPDATE jobs SET attempt = 1 WHERE id = $1::bigint", lld(job));
	return ty_test_strf("%s", t);
}

/*
 * What one request must leave: NULL strings are SQL NULL, "*" any non-NULL
 * value; targets is the text[] literal of the path's ids.
 */
struct want {
	const char *token_id, *principal, *role, *team, *trial_job;
	const char *route, *targets, *created_id, *code, *summary;
};

/* The one audit row of the reply resp: the row's fields checked against w. */
static void check_row(const struct ty_resp *r, const char *method, const char *path,
		      const struct want *w, const char *t0)
{
	const char *rid = ty_resp_header(r, "X-Request-Id");
	static const char *const cols[] = {"token_id",	 "principal", "role",	    "team",
					   "trial_job",	 "route",     "target_ids", "created_id",
					   "problem_code", "summary"};
	const char *const *want = (const char *const *)w;

	REQUIRE(rid != NULL && *rid);
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests WHERE request_id = $1", rid), "1");
	CHECK_STR_EQ(DB("SELECT method || ' ' || path || ' ' || status || ' ' || host(peer)"
			" FROM audit_requests WHERE request_id = $1",
			rid),
		     ty_test_strf("%s %s %d 127.0.0.1", method, path, r->status));
	/* the server's clock, between the request and now */
	CHECK_STR_EQ(DB("SELECT at BETWEEN $2::timestamptz AND clock_timestamp()"
			" FROM audit_requests WHERE request_id = $1",
			rid, t0),
		     "t");
	for (size_t i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		const char *got = DB(ty_test_strf("SELECT coalesce(%s::text, '<null>')"
						  " FROM audit_requests WHERE request_id = $1",
						  cols[i]),
				     rid);

		ty_test_context("%s %s: %s", method, path, cols[i]);
		if (want[i] && !strcmp(want[i], "*"))
			CHECK(strcmp(got, "<null>") != 0);
		else
			CHECK_STR_EQ(got, want[i] ? want[i] : "<null>");
	}
	ty_test_context(NULL);
}

/* Placeholders in a path or body: {job} {tok} {sweep} {hook} {team} {node}. */
struct vars {
	const char *job, *tok, *sweep, *hook, *team, *node;
};

static const char *subst(const char *s, const struct vars *v)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {{"{job}", offsetof(struct vars, job)},     {"{tok}", offsetof(struct vars, tok)},
		    {"{sweep}", offsetof(struct vars, sweep)}, {"{hook}", offsetof(struct vars, hook)},
		    {"{team}", offsetof(struct vars, team)},   {"{node}", offsetof(struct vars, node)}};
	const char *out = s;

	if (!s)
		return NULL;
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
		const char *val = *(const char *const *)((const char *)v + keys[k].off);
		const char *at;

		while ((at = strstr(out, keys[k].key)))
			out = ty_test_strf("%.*s%s%s", (int)(at - out), out, val ? val : "",
					   at + strlen(keys[k].key));
	}
	return out;
}

TY_TEST(every_mutating_route_writes_one_exact_row)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("aud", 8, -1);
	const char *member = ty_mk_token("member", team);
	const char *viewer = ty_mk_token("viewer", team);
	const char *admin_id = token_id(s->admin), *member_id = token_id(member);
	const char *admin_name = DB("SELECT name FROM api_tokens WHERE id = $1::bigint", admin_id);
	const char *member_name = DB("SELECT name FROM api_tokens WHERE id = $1::bigint", member_id);
	const char *new_team = ty_uniq("audnew");
	long long trial_job = ty_mk_job(member, team, NULL);
	const char *trial = mk_trial_token(trial_job);
	struct vars v = {.team = team, .node = ty_uniq("aud-node")};
	struct ty_resp r = {0};
	/* A: admin, M: member, V: viewer, T: the trial token, N: none, B: a bogus token */
	const char *bogus = "ty_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
	const struct {
		char who;
		const char *method, *path, *body;
		int status;
		const char **save; /* where the created id goes */
		struct want w;
	} rows[] = {
	    {'A', "POST", "/v1/teams", ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":2}", new_team),
	     201, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/teams", "{}", NULL, NULL, new_team}},
	    {'A', "PATCH", "/v1/teams/{team}", "{\"nominal_gpus\":9}", 200, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/teams/{}", "{{team}}", NULL, NULL,
	      NULL}},
	    {'A', "POST", "/v1/tokens", "{\"name\":\"aud-bot\",\"role\":\"viewer\",\"team\":\"{team}\"}",
	     201, &v.tok,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/tokens", "{}", "*", NULL, "aud-bot"}},
	    {'A', "DELETE", "/v1/tokens/{tok}", NULL, 204, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/tokens/{}", "{{tok}}", NULL, NULL,
	      NULL}},
	    {'M', "POST", "/v1/jobs",
	     "{\"team\":\"{team}\",\"name\":\"aud-job\",\"command\":[\"true\"],\"resources\":{},"
	     "\"env\":{\"SECRET_ENV\":\"hunter2-env-value\"}}",
	     201, &v.job,
	     {member_id, member_name, "member", team, NULL, "/v1/jobs", "{}", "*", NULL,
	      "aud-job"}},
	    {'M', "POST", "/v1/jobs/{job}/stop", NULL, 200, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/jobs/{}/stop", "{{job}}", NULL,
	      NULL, NULL}},
	    {'M', "POST", "/v1/jobs/{job}/cancel", NULL, 409, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/jobs/{}/cancel", "{{job}}", NULL,
	      "job_finished", NULL}},
	    {'M', "POST", "/v1/sweeps",
	     "{\"team\":\"{team}\",\"name\":\"aud-sweep\",\"template\":{\"command\":[\"true\"],"
	     "\"resources\":{}},\"grid\":{\"lr\":[0.1,0.01]}}",
	     201, &v.sweep,
	     {member_id, member_name, "member", team, NULL, "/v1/sweeps", "{}", "*", NULL,
	      "aud-sweep"}},
	    {'M', "POST", "/v1/sweeps/{sweep}/cancel", NULL, 200, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/sweeps/{}/cancel", "{{sweep}}",
	      NULL, NULL, NULL}},
	    {'M', "POST", "/v1/webhooks",
	     "{\"team\":\"{team}\",\"url\":\"http://127.0.0.1:9/hook\",\"events\":[\"*\"],"
	     "\"secret\":\"whsec-audit-0123456789\"}",
	     201, &v.hook,
	     {member_id, member_name, "member", team, NULL, "/v1/webhooks", "{}", "*", NULL, NULL}},
	    {'M', "POST", "/v1/webhooks/{hook}/ping", NULL, 202, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/webhooks/{}/ping", "{{hook}}",
	      NULL, NULL, NULL}},
	    {'M', "DELETE", "/v1/webhooks/{hook}", NULL, 200, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/webhooks/{}", "{{hook}}", NULL,
	      NULL, NULL}},
	    {'A', "POST", "/v1/nodes/{node}/drain", NULL, 200, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/nodes/{}/drain", "{{node}}", NULL,
	      NULL, NULL}},
	    {'A', "POST", "/v1/nodes/{node}/undrain", NULL, 200, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/nodes/{}/undrain", "{{node}}", NULL,
	      NULL, NULL}},
	    {'A', "POST", "/v1/nodes/{node}/preempt", "{}", 200, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, "/v1/nodes/{}/preempt", "{{node}}", NULL,
	      NULL, NULL}},
	    {'T', "POST", ty_test_strf("/v1/jobs/%lld/metrics", trial_job),
	     "{\"step\":1,\"metrics\":{\"loss\":0.5}}", 200, NULL,
	     {NULL, ty_test_strf("job %lld attempt 1", trial_job), "member", team, lld(trial_job),
	      "/v1/jobs/{}/metrics", ty_test_strf("{%lld}", trial_job), NULL, NULL, NULL}},
	    /* refused: every one audited with its status and code */
	    {'N', "POST", "/v1/jobs", "{}", 401, NULL,
	     {NULL, NULL, NULL, NULL, NULL, "/v1/jobs", "{}", NULL, "unauthenticated", NULL}},
	    {'B', "DELETE", "/v1/tokens/{tok}", NULL, 401, NULL,
	     {NULL, NULL, NULL, NULL, NULL, "/v1/tokens/{}", "{{tok}}", NULL, "unauthenticated",
	      NULL}},
	    {'M', "POST", "/v1/teams", "{\"name\":\"nope\",\"nominal_gpus\":1}", 403, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/teams", "{}", NULL, "forbidden",
	      "nope"}},
	    {'V', "POST", "/v1/jobs/{job}/cancel", NULL, 403, NULL,
	     {"*", "*", "viewer", team, NULL, "/v1/jobs/{}/cancel", "{{job}}", NULL, "forbidden",
	      NULL}},
	    {'T', "POST", "/v1/jobs/{job}/cancel", NULL, 403, NULL,
	     {NULL, ty_test_strf("job %lld attempt 1", trial_job), "member", team, lld(trial_job),
	      "/v1/jobs/{}/cancel", "{{job}}", NULL, "forbidden", NULL}},
	    /* refused before authentication: the token is still named */
	    {'M', "POST", "/v1/jobs", "{\"team\":", 400, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/jobs", "{}", NULL, "invalid_json",
	      NULL}},
	    {'M', "POST", "/v1/jobs", "{\"team\":\"{team}\",\"name\":\"no-command\"}", 422, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/jobs", "{}", NULL, "missing_field",
	      "no-command"}},
	    {'M', "POST", "/v1/jobs/999999999/cancel", NULL, 404, NULL,
	     {member_id, member_name, "member", team, NULL, "/v1/jobs/{}/cancel", "{999999999}",
	      NULL, "job_not_found", NULL}},
	    {'A', "POST", "/v1/no-such-route", "{}", 404, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, NULL, "{}", NULL, "not_found", NULL}},
	    {'A', "DELETE", "/v1/jobs/{job}", NULL, 405, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, NULL, "{}", NULL, "method_not_allowed",
	      NULL}},
	    {'A', "PUT", "/v1/jobs", "{}", 405, NULL,
	     {admin_id, admin_name, "admin", NULL, NULL, NULL, "{}", NULL, "method_not_allowed",
	      NULL}},
	};

	DB("INSERT INTO nodes (id, address, gpus, state, boot_id) VALUES ($1, '10.9.0.2', 8,"
	   " 'ready', 'b')",
	   v.node);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *tok = rows[i].who == 'A'   ? s->admin
				  : rows[i].who == 'M' ? member
				  : rows[i].who == 'V' ? viewer
				  : rows[i].who == 'T' ? trial
				  : rows[i].who == 'B' ? bogus
						       : NULL;
		const char *path = subst(rows[i].path, &v);
		const char *t0 = DB("SELECT clock_timestamp()::text", NULL);
		struct want w = rows[i].w;
		const char **f = (const char **)&w;

		ty_test_context("%s %s", rows[i].method, path);
		ty_http(&r, rows[i].method, path, tok, subst(rows[i].body, &v), NULL);
		if (!ty_check_status(&r, rows[i].status, __FILE__, __LINE__))
			continue;
		if (rows[i].save)
			*rows[i].save = lld(ty_jint(r.json, "id"));
		for (size_t k = 0; k < sizeof(w) / sizeof(*f); k++)
			f[k] = subst(f[k], &v);
		if (rows[i].save)
			w.created_id = *rows[i].save;
		check_row(&r, rows[i].method, path, &w, t0);
	}
	ty_resp_free(&r);
}

TY_TEST(reads_are_not_audited)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("audget", 4, -1);
	const char *member = ty_mk_token("member", team);
	long long job = ty_mk_job(member, team, NULL);
	static const char *const paths[] = {"/v1/jobs", "/v1/jobs/%lld", "/v1/jobs/%lld/events",
					    "/v1/teams", "/v1/queue", "/v1/audit", "/healthz",
					    "/v1/nope"};
	struct ty_resp r = {0};
	const char *before = DB("SELECT count(*) FROM audit_requests", NULL);

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		ty_test_context("%s", paths[i]);
		ty_http(&r, "GET", ty_test_strf(paths[i], job),
			strstr(paths[i], "audit") ? s->admin : member, NULL, NULL);
		CHECK(r.status == 200 || r.status == 404);
		/* every reply has its request id */
		CHECK(ty_resp_header(&r, "X-Request-Id") != NULL);
		CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests WHERE request_id = $1",
				ty_resp_header(&r, "X-Request-Id")),
			     "0");
	}
	ty_test_context(NULL);
	/* the one POST above (ty_mk_job) and ty_mk_token, ty_mk_team came before `before` */
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests", NULL), before);
	ty_resp_free(&r);
}

/* Ids of the items of GET /v1/audit?query, following every page of limit. */
static const char *list_ids(const char *token, const char *query, int limit)
{
	struct ty_resp r = {0};
	const char *ids = "", *cursor = NULL;
	int pages = 0;

	do {
		json_t *it;
		size_t i;

		ty_http(&r, "GET",
			ty_test_strf("/v1/audit?%s&limit=%d%s%s", query, limit,
				     cursor ? "&cursor=" : "", cursor ? cursor : ""),
			token, NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		json_array_foreach(ty_jpath(r.json, "items"), i, it)
			ids = ty_test_strf("%s%s%lld", ids, *ids ? "," : "", ty_jint(it, "id"));
		cursor = ty_jstr(r.json, "next_cursor");
		cursor = cursor ? ty_test_strf("%s", cursor) : NULL;
		REQUIRE(++pages < 100);
	} while (cursor);
	ty_resp_free(&r);
	return ids;
}

TY_TEST(list_filters_and_pages)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("audlist", 4, -1);
	const char *member = ty_mk_token("member", team);
	const char *mid = token_id(member);
	const char *mname = DB("SELECT name FROM api_tokens WHERE id = $1::bigint", mid);
	const char *t0 = DB("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC',"
			    " 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
			    NULL);
	struct ty_resp r = {0};
	long long job;
	const char *t1;

	/* 5 by the member: 1 submit (201), 2 refused submits (422), 1 cancel, 1 bad cancel */
	job = ty_mk_job(member, team, NULL);
	for (int i = 0; i < 2; i++) {
		ty_http(&r, "POST", "/v1/jobs", member, ty_tmpl("{'team':'@T'}", team), NULL);
		CHECK_STATUS(&r, 422);
	}
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), member, NULL, NULL);
	CHECK_STATUS(&r, 409);
	t1 = DB("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC',"
		" 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')",
		NULL);
	/* and one by the admin on the team */
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), s->admin, "{\"weight\":2}", NULL);
	CHECK_STATUS(&r, 200);

	static const struct {
		const char *query, *sql;
	} rows[] = {
	    {"team=%1$s", "team = p_team"},
	    {"token_id=%2$s", "token_id = p_tok"},
	    {"principal=%3$s", "principal = p_principal"},
	    {"team=%1$s&status=422", "team = p_team AND status = 422"},
	    {"team=%1$s&method=POST&status=409",
	     "team = p_team AND method = 'POST' AND status = 409"},
	    {"token_id=%2$s&path_prefix=/v1/jobs/", "token_id = p_tok AND path LIKE '/v1/jobs/%%'"},
	    {"path_prefix=/v1/teams/%1$s", "path = '/v1/teams/' || p_team"},
	    {"method=PATCH&path_prefix=/v1/teams/%1$s",
	     "method = 'PATCH' AND path = '/v1/teams/' || p_team"},
	    {"token_id=%2$s&since=%4$s", "token_id = p_tok AND at >= p_since"},
	    {"team=%1$s&until=%5$s", "team = p_team AND at < p_until"},
	    {"principal=%3$s&since=%4$s&until=%5$s",
	     "principal = p_principal AND at >= p_since AND at < p_until"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char q[512], sql[512];
		const char *want;

		snprintf(q, sizeof(q), rows[i].query, team, mid, mname, t0, t1);
		snprintf(sql, sizeof(sql),
			 "WITH p AS (SELECT $1::text AS p_team, $2::bigint AS p_tok, $3::text AS"
			 " p_principal, $4::timestamptz AS p_since, $5::timestamptz AS p_until)"
			 " SELECT coalesce(string_agg(id::text, ',' ORDER BY id DESC), '')"
			 " FROM audit_requests, p WHERE %s",
			 rows[i].sql);
		ty_test_context("%s", q);
		want = DB(sql, team, mid, mname, t0, t1);
		CHECK(*want != '\0');
		/* one page of 500 and pages of 2 list the same rows, newest first */
		CHECK_STR_EQ(list_ids(s->admin, q, 500), want);
		CHECK_STR_EQ(list_ids(s->admin, q, 2), want);
	}
	ty_test_context(NULL);
	/* the counts the requests above imply (an admin token has no team) */
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests WHERE team = $1", team), "5");
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests WHERE token_id = $1::bigint", mid), "5");

	/* an item's fields */
	ty_http(&r, "GET", ty_test_strf("/v1/audit?team=%s&status=409", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 1);
	CHECK_JINT(r.json, "items[0].token_id", atoll(mid));
	CHECK_JSTR(r.json, "items[0].principal", mname);
	CHECK_JSTR(r.json, "items[0].role", "member");
	CHECK_JSTR(r.json, "items[0].team", team);
	CHECK_JNULL(r.json, "items[0].trial_job");
	CHECK_JSTR(r.json, "items[0].method", "POST");
	CHECK_JSTR(r.json, "items[0].route", "/v1/jobs/{}/cancel");
	CHECK_JSTR(r.json, "items[0].path", ty_test_strf("/v1/jobs/%lld/cancel", job));
	CHECK_JSTR(r.json, "items[0].target_ids[0]", lld(job));
	CHECK_JNULL(r.json, "items[0].created_id");
	CHECK_JINT(r.json, "items[0].status", 409);
	CHECK_JSTR(r.json, "items[0].problem_code", "job_finished");
	CHECK_JSTR(r.json, "items[0].peer", "127.0.0.1");
	CHECK_JNULL(r.json, "items[0].summary");
	CHECK_JTIME(r.json, "items[0].time");
	CHECK(ty_jstr(r.json, "items[0].request_id") != NULL);
	CHECK_JNULL(r.json, "next_cursor");
	ty_resp_free(&r);
}

TY_TEST(list_is_for_admins_and_checks_its_parameters)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("audperm", 4, -1);
	static const struct {
		const char *query, *field;
	} bad[] = {
	    {"token_id=x", "token_id"},	  {"token_id=0", "token_id"}, {"method=GET", "method"},
	    {"status=99", "status"},	  {"status=600", "status"},   {"status=abc", "status"},
	    {"since=yesterday", "since"}, {"until=2026-13-01", "until"}, {"cursor=abc", "cursor"},
	    {"limit=0", "limit"},	  {"limit=501", "limit"},
	};
	struct ty_resp r = {0};

	ty_http(&r, "GET", "/v1/audit", ty_mk_token("member", team), NULL, NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "GET", "/v1/audit", ty_mk_token("viewer", team), NULL, NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "GET", "/v1/audit", NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("%s", bad[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/audit?%s", bad[i].query), s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", bad[i].field);
	}
	ty_resp_free(&r);
}

/* The first line number of file holding needle, or 0. */
static int line_with(const char *file, const char *needle)
{
	FILE *f = fopen(file, "r");
	char line[16384];
	int n = 0, hit = 0;

	REQUIRE(f != NULL);
	while (!hit && fgets(line, sizeof(line), f))
		if (++n, strstr(line, needle))
			hit = n;
	fclose(f);
	return hit;
}

TY_TEST(no_secret_in_the_table_or_the_log)
{
	const struct ty_stack *s = ty_stack_get();
	static const char *const debug[] = {"--log-level", "debug", NULL};
	struct ty_api *api = ty_test_api_start(s->db_url, debug);
	const char *team = ty_mk_team("audsec", 4, -1);
	const char *member = ty_mk_token("member", team);
	const char *hook_secret = "whsec-never-logged-4242424242";
	long long job = ty_mk_job(member, team, NULL);
	const char *trial = mk_trial_token(job);
	const char *bogus = "ty_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ";
	struct ty_resp r = {0};
	const char *created;

	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_tmpl("{'name':'audsec-bot','role':'member','team':'@T'}", team), NULL);
	REQUIRE_STATUS(&r, 201);
	created = ty_test_strf("%s", ty_jstr(r.json, "token"));
	ty_http(&r, "POST", "/v1/jobs", created, ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", team),
		NULL);
	CHECK_STATUS(&r, 201);
	ty_http(&r, "POST", "/v1/webhooks", member,
		ty_test_strf("{\"team\":\"%s\",\"url\":\"http://127.0.0.1:9/h\",\"events\":[\"*\"],"
			     "\"secret\":\"%s\"}",
			     team, hook_secret),
		NULL);
	CHECK_STATUS(&r, 201);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/metrics", job), trial,
		"{\"step\":1,\"metrics\":{\"a\":1}}", NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), trial, NULL, NULL);
	CHECK_STATUS(&r, 403);
	ty_http(&r, "POST", "/v1/jobs", bogus, "{}", NULL);
	CHECK_STATUS(&r, 401);
	ty_http(&r, "POST", "/v1/jobs", member, "{not json", NULL);
	CHECK_STATUS(&r, 400);
	ty_test_api_stop(api);
	ty_test_api_use(s->api);

	const char *secrets[] = {s->admin, member, created, trial, bogus, hook_secret};
	for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
		ty_test_context("secret %zu", i);
		CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests a"
				" WHERE strpos(row_to_json(a)::text, $1) > 0",
				secrets[i]),
			     "0");
		int line = line_with(ty_test_api_log(api), secrets[i]);

		if (line)
			FAIL("%s:%d holds secret %zu", ty_test_api_log(api), line, i);
	}
	ty_test_context(NULL);
	/* the debug log did see these requests: the scan above read something */
	CHECK(line_with(ty_test_api_log(api), "POST /v1/webhooks 201") > 0);
	CHECK(line_with(ty_test_api_log(api), "POST /v1/jobs 401") > 0);
	ty_resp_free(&r);
}

TY_TEST(retention_prunes_old_records)
{
	const struct ty_stack *s = ty_stack_get();
	static const char *const args[] = {"--audit-retention-days", "2", NULL};
	const char *mark = ty_uniq("prune");
	struct ty_api *api;
	const char *left = NULL;

	/* 3 records of 3 days ago, 2 of a day ago, as if written then */
	DB("INSERT INTO audit_requests (at, request_id, method, path, status)"
	   " SELECT now() - ($2::int || ' days')::interval, $1 || '-' || g, 'POST', '/v1/x', 200"
	   " FROM generate_series(1, $3::int) g",
	   ty_test_strf("%s-old", mark), "3", "3");
	DB("INSERT INTO audit_requests (at, request_id, method, path, status)"
	   " SELECT now() - ($2::int || ' days')::interval, $1 || '-' || g, 'POST', '/v1/x', 200"
	   " FROM generate_series(1, $3::int) g",
	   ty_test_strf("%s-new", mark), "1", "2");
	/* the stack's server keeps everything (the default) */
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_requests WHERE starts_with(request_id, $1)",
			mark),
		     "5");
	/* a server with a retention prunes at start */
	api = ty_test_api_start(s->db_url, args);
	for (int i = 0; i < 100; i++) {
		left = DB("SELECT string_agg(request_id, ',' ORDER BY request_id) FROM audit_requests"
			  " WHERE starts_with(request_id, $1)",
			  mark);
		if (!strstr(left, "-old-"))
			break;
		usleep(100 * 1000);
	}
	CHECK_STR_EQ(left, ty_test_strf("%s-new-1,%s-new-2", mark, mark));
	ty_test_api_stop(api);
	ty_test_api_use(s->api);
	/* its log says so, with the count */
	{
		FILE *f = fopen(ty_test_api_log(api), "r");
		char line[4096];
		bool said = false;

		REQUIRE(f != NULL);
		while (fgets(line, sizeof(line), f))
			said |= strstr(line, "audit: pruned 3 record(s) older than 2 day(s)") != NULL;
		fclose(f);
		CHECK(said);
	}
}

/*
 * A created job's row is written by the submission batch, in the job's own
 * transaction (api/store_jobs.c); a replay of its key, answered after the
 * batch, still gets a row of its own: one row each, the right status.
 */
TY_TEST(audit_submission_rows_from_the_batch)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("aud", 64, -1);
	const char *body = ty_tmpl("{'team':'@T','name':'aud-batch','command':['true'],"
				   "'resources':{}}",
				   team);
	const char *hdr[] = {"Idempotency-Key: aud-batch-1", NULL};
	struct ty_resp r = {0};
	const char *rid, *id;

	ty_http(&r, "POST", "/v1/jobs", s->admin, body, hdr);
	REQUIRE_STATUS(&r, 201);
	rid = ty_test_strf("%s", ty_resp_header(&r, "X-Request-Id"));
	id = lld(ty_jint(r.json, "id"));
	CHECK_STR_EQ(DB("SELECT count(*) || ' ' || min(status) || ' ' || min(created_id)"
			" || ' ' || min(summary) || ' ' || min(route)"
			" FROM audit_requests WHERE request_id = $1",
			rid),
		     ty_test_strf("1 201 %s aud-batch /v1/jobs", id));
	ty_http(&r, "POST", "/v1/jobs", s->admin, body, hdr);
	REQUIRE_STATUS(&r, 200);
	rid = ty_test_strf("%s", ty_resp_header(&r, "X-Request-Id"));
	CHECK_STR_EQ(DB("SELECT count(*) || ' ' || min(status) || ' ' || (min(created_id) IS NULL)"
			" FROM audit_requests WHERE request_id = $1",
			rid),
		     "1 200 true");
	ty_resp_free(&r);
}
