/*
 * Trial metrics over HTTP (docs/api.md "Trial metrics"): POST and GET
 * /v1/jobs/{id}/metrics, the per-attempt token's scope and lifetime, and a
 * sweep's `best`. With no scheduler here, the attempt row (and its token's
 * hash) that a placement would write is seeded with SQL; e2e_hpo covers the
 * token's way through the scheduler and an executor to a real rank.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

static const char *lld(long long v)
{
	return ty_test_strf("%lld", v);
}

/* A fresh well-formed trial token: "tym_" and 43 base64url characters. */
static const char *new_trial_token(void)
{
	static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	char t[48] = "tym_";

	for (int i = 4; i < 47; i++)
		t[i] = b64[rand() % 64];
	t[47] = '\0';
	return ty_test_strf("%s", t);
}

/*
 * An attempt of job as a placement leaves it, with the hash of a new trial
 * token, ended `ended_ago` ("" = still running); returns the token.
 */
static const char *mk_attempt(long long job, int attempt, const char *ended_ago)
{
	const char *tok = new_trial_token();

	DB("INSERT INTO nodes (id, address, gpus, state, boot_id) VALUES ('jm-n1', '10.1.0.1', 8,"
	   " 'ready', 'b') ON CONFLICT (id) DO NOTHING",
	   NULL);
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch, metrics_token_sha256, ended_at)"
	   " VALUES ($1::bigint, $2::int, CASE WHEN $4 = '' THEN 'running' ELSE 'succeeded' END,"
	   " 1, 'jm-n1', '10.1.0.1', 29500 + $2::int + ($1::bigint % 1000)::int, 1, 1, '{}',"
	   " encode(sha256(convert_to($3, 'UTF8')), 'hex'),"
	   " CASE WHEN $4 = '' THEN NULL ELSE now() - $4::interval END)",
	   lld(job), lld(attempt), tok, ended_ago);
	DB("UPDATE jobs SET attempt = $2::int WHERE id = $1::bigint", lld(job), lld(attempt));
	return tok;
}

static int post(struct ty_resp *r, const char *token, long long job, const char *body)
{
	return ty_http(r, "POST", ty_test_strf("/v1/jobs/%lld/metrics", job), token,
		       ty_tmpl(body, ""), NULL);
}

TY_TEST(trial_token_reports_its_jobs_metrics)
{
	const char *team = ty_mk_team("jm", 8, -1);
	const char *member = ty_mk_token("member", team);
	long long job = ty_mk_job(member, team, NULL);
	const char *tok = mk_attempt(job, 1, "");
	struct ty_resp r = {0};

	post(&r, tok, job, "{'step':10,'metrics':{'val_loss':0.31,'acc':0.9}}");
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "job_id", job);
	CHECK_JINT(r.json, "step", 10);
	CHECK_JINT(r.json, "attempt", 1);
	CHECK(json_real_value(ty_jpath(r.json, "metrics.val_loss")) == 0.31);
	CHECK_JTIME(r.json, "reported_at");

	/* the same step again merges; the newest value of a name wins */
	post(&r, tok, job, "{'step':10,'metrics':{'val_loss':0.25,'lr':0.01}}");
	REQUIRE_STATUS(&r, 200);
	CHECK(json_real_value(ty_jpath(r.json, "metrics.val_loss")) == 0.25);
	CHECK(json_real_value(ty_jpath(r.json, "metrics.acc")) == 0.9);
	CHECK(json_real_value(ty_jpath(r.json, "metrics.lr")) == 0.01);
	CHECK_STR_EQ(DB("SELECT count(*) FROM job_metrics WHERE job_id = $1::bigint", lld(job)),
		     "1");

	/* a member reports too (an HPO service on the trial's behalf): the current attempt */
	post(&r, member, job, "{'step':20,'metrics':{'val_loss':0.2}}");
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "attempt", 1);

	/* the trial token reads its own job's metrics */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", job), tok, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "items[0].step", 10);
	CHECK_JINT(r.json, "items[1].step", 20);
	CHECK(json_real_value(ty_jpath(r.json, "latest.val_loss")) == 0.2);
	CHECK(json_real_value(ty_jpath(r.json, "latest.acc")) == 0.9);
	ty_resp_free(&r);
}

TY_TEST(trial_token_cannot_reach_another_job_or_route)
{
	const char *team = ty_mk_team("jm", 8, -1), *other_team = ty_mk_team("jm", 8, -1);
	const char *member = ty_mk_token("member", team);
	const char *other_member = ty_mk_token("member", other_team);
	long long job = ty_mk_job(member, team, NULL), sibling = ty_mk_job(member, team, NULL);
	long long foreign = ty_mk_job(other_member, other_team, NULL);
	const char *tok = mk_attempt(job, 1, "");
	struct ty_resp r = {0};

	/* another job of the same team, and another team's job */
	post(&r, tok, sibling, "{'step':1,'metrics':{'x':1}}");
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	CHECK(strstr(ty_jstr(r.json, "detail"), ty_test_strf("job %lld only", job)) != NULL);
	post(&r, tok, foreign, "{'step':1,'metrics':{'x':1}}");
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", sibling), tok, NULL, NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	CHECK_STR_EQ(DB("SELECT count(*) FROM job_metrics WHERE job_id IN ($1::bigint, $2::bigint)",
			lld(sibling), lld(foreign)),
		     "0");

	/* no other route, its own job's included */
	static const char *const routes[][2] = {
	    {"GET", "/v1/jobs/%lld"},	     {"POST", "/v1/jobs/%lld/cancel"},
	    {"POST", "/v1/jobs/%lld/stop"},   {"GET", "/v1/jobs/%lld/logs"},
	    {"GET", "/v1/jobs"},		     {"GET", "/v1/queue"},
	};
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		ty_test_context("%s %s", routes[i][0], routes[i][1]);
		ty_http(&r, routes[i][0], ty_test_strf(routes[i][1], job), tok, NULL, NULL);
		CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	}
	ty_http(&r, "POST", "/v1/jobs", tok,
		ty_tmpl("{'team':'@T','command':['true'],'resources':{'gpus_per_node':0}}", team),
		NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	CHECK_STR_EQ(DB("SELECT cancel_requested::text FROM jobs WHERE id = $1::bigint", lld(job)),
		     "false");

	/* other tokens: a viewer reads but does not write; another team sees nothing */
	const char *viewer = ty_mk_token("viewer", team);
	post(&r, viewer, job, "{'step':1,'metrics':{'x':1}}");
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", job), viewer, NULL, NULL);
	CHECK_STATUS(&r, 200);
	post(&r, other_member, job, "{'step':1,'metrics':{'x':1}}");
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", job), other_member, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(trial_token_lifetime)
{
	const char *team = ty_mk_team("jm", 8, -1);
	const char *member = ty_mk_token("member", team);
	long long recent = ty_mk_job(member, team, NULL), old = ty_mk_job(member, team, NULL);
	const char *tok_recent = mk_attempt(recent, 1, "1 minute");
	const char *tok_old = mk_attempt(old, 1, "6 minutes");
	struct ty_resp r = {0};

	/* a last report racing the ranks' exit is still taken */
	post(&r, tok_recent, recent, "{'step':5,'metrics':{'loss':1.5}}");
	CHECK_STATUS(&r, 200);
	post(&r, tok_old, old, "{'step':5,'metrics':{'loss':1.5}}");
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	CHECK(strstr(ty_jstr(r.json, "detail"), "ended more than 5 minutes ago") != NULL);
	/* a well-formed token nobody drew, and a malformed one */
	post(&r, new_trial_token(), recent, "{'step':5,'metrics':{'loss':1.5}}");
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	post(&r, "tym_short", recent, "{'step':5,'metrics':{'loss':1.5}}");
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	CHECK_STR_EQ(DB("SELECT count(*) FROM job_metrics WHERE job_id = $1::bigint", lld(old)),
		     "0");
	ty_resp_free(&r);
}

TY_TEST(bad_reports_name_the_field_and_store_nothing)
{
	const char *team = ty_mk_team("jm", 8, -1);
	const char *member = ty_mk_token("member", team);
	long long job = ty_mk_job(member, team, NULL);
	static const struct {
		const char *body;
		int status;
		const char *code, *field, *detail;
	} rows[] = {
	    {"{'metrics':{'x':1}}", 422, "missing_field", "step", "'step' is required"},
	    {"{'step':-1,'metrics':{'x':1}}", 422, "invalid_field", "step",
	     "from 0 to 9007199254740991"},
	    {"{'step':1.5,'metrics':{'x':1}}", 422, "invalid_field", "step", "an integer"},
	    {"{'step':'3','metrics':{'x':1}}", 422, "invalid_field", "step", "an integer"},
	    {"{'step':9007199254740992,'metrics':{'x':1}}", 422, "invalid_field", "step",
	     "9007199254740991"},
	    {"{'step':1}", 422, "missing_field", "metrics", "'metrics' is required"},
	    {"{'step':1,'metrics':{}}", 422, "invalid_field", "metrics", "1 to 100 names"},
	    {"{'step':1,'metrics':[1]}", 422, "invalid_field", "metrics", "an object"},
	    {"{'step':1,'metrics':{@K101}}", 422, "invalid_field", "metrics", "1 to 100 names"},
	    {"{'step':1,'metrics':{'1x':1}}", 422, "invalid_field", "metrics.1x",
	     "metric name '1x'"},
	    {"{'step':1,'metrics':{'a b':1}}", 422, "invalid_field", "metrics.a b",
	     "metric name 'a b'"},
	    {"{'step':1,'metrics':{'':1}}", 422, "invalid_field", "metrics.", "metric name ''"},
	    {"{'step':1,'metrics':{'@A129':1}}", 422, "invalid_field", TY_ANY_FIELD,
	     "1 to 128 characters"},
	    {"{'step':1,'metrics':{'loss':'0.3'}}", 422, "invalid_field", "metrics.loss",
	     "a finite number, not string"},
	    {"{'step':1,'metrics':{'loss':true}}", 422, "invalid_field", "metrics.loss",
	     "not boolean"},
	    {"{'step':1,'metrics':{'loss':null}}", 422, "invalid_field", "metrics.loss",
	     "not null"},
	    {"{'step':1,'metrics':{'loss':{'v':1}}}", 422, "invalid_field", "metrics.loss",
	     "not object"},
	    {"{'step':1,'metrics':{'x':1},'epoch':2}", 400, "unknown_field", "epoch",
	     "unknown field 'epoch'"},
	    {"{'step':1,'metrics':{'x':1e999}}", 400, "invalid_json", NULL, NULL},
	    {"[1]", 400, "invalid_json", NULL, "JSON object"},
	};
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].body);
		post(&r, member, job, rows[i].body);
		CHECK_PROBLEM(&r, rows[i].status, rows[i].code, rows[i].field);
		if (rows[i].detail && ty_jstr(r.json, "detail"))
			CHECK(strstr(ty_jstr(r.json, "detail"), rows[i].detail) != NULL);
	}
	CHECK_STR_EQ(DB("SELECT count(*) FROM job_metrics WHERE job_id = $1::bigint", lld(job)),
		     "0");
	/* the limits themselves are fine */
	{
		char body[4096] = "{'step':9007199254740991,'metrics':{";

		for (int k = 1; k <= 100; k++)
			snprintf(body + strlen(body), sizeof(body) - strlen(body), "%s'm%d':%d",
				 k > 1 ? "," : "", k, k);
		strcat(body, "}}");
		post(&r, member, job, body);
		CHECK_STATUS(&r, 200);
		CHECK_JINT(r.json, "metrics.m100", 100);
	}
	post(&r, member, job, "{'step':0,'metrics':{'_a.b:c/d-1':-1e300,'@A128':0}}");
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

TY_TEST(read_filters_and_pages)
{
	const char *team = ty_mk_team("jm", 8, -1);
	const char *member = ty_mk_token("member", team);
	long long job = ty_mk_job(member, team, NULL);
	struct ty_resp r = {0};

	/* train_loss every step 1..5, val_loss at 2 and 4 */
	for (int step = 1; step <= 5; step++) {
		const char *body =
		    step % 2 == 0
			? ty_test_strf("{'step':%d,'metrics':{'train_loss':%d.5,'val_loss':%d.25}}",
				       step, 10 - step, 10 - step)
			: ty_test_strf("{'step':%d,'metrics':{'train_loss':%d.5}}", step, 10 - step);
		post(&r, member, job, body);
		REQUIRE_STATUS(&r, 200);
	}
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", job), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ((int)json_array_size(json_object_get(r.json, "items")), 5);
	CHECK_JNULL(r.json, "next_after_step");
	CHECK_JNULL(r.json, "items[0].attempt"); /* no attempt yet */
	CHECK(json_real_value(ty_jpath(r.json, "latest.train_loss")) == 5.5);
	CHECK(json_real_value(ty_jpath(r.json, "latest.val_loss")) == 6.25);

	/* name= keeps the steps that reported it, with that metric only */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics?name=val_loss", job), member, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ((int)json_array_size(json_object_get(r.json, "items")), 2);
	CHECK_JINT(r.json, "items[0].step", 2);
	CHECK_JINT(r.json, "items[1].step", 4);
	CHECK(ty_jpath(r.json, "items[0].metrics.train_loss") == NULL);
	CHECK(json_real_value(ty_jpath(r.json, "items[1].metrics.val_loss")) == 6.25);

	/* pages of two: after_step is exclusive, next_after_step null on the last page */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics?limit=2", job), member, NULL, NULL);
	CHECK_JINT(r.json, "items[1].step", 2);
	CHECK_JINT(r.json, "next_after_step", 2);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics?limit=2&after_step=2", job), member,
		NULL, NULL);
	CHECK_JINT(r.json, "items[0].step", 3);
	CHECK_JINT(r.json, "next_after_step", 4);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics?limit=2&after_step=4", job), member,
		NULL, NULL);
	CHECK_INT_EQ((int)json_array_size(json_object_get(r.json, "items")), 1);
	CHECK_JNULL(r.json, "next_after_step");
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics?name=nothing", job), member, NULL,
		NULL);
	CHECK_INT_EQ((int)json_array_size(json_object_get(r.json, "items")), 0);

	static const char *const bad[][2] = {
	    {"name=1x", "name"},	 {"name=a%20b", "name"},     {"after_step=-2", "after_step"},
	    {"after_step=x", "after_step"}, {"limit=0", "limit"}, {"limit=1001", "limit"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("%s", bad[i][0]);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics?%s", job, bad[i][0]), member,
			NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", bad[i][1]);
	}
	ty_http(&r, "GET", "/v1/jobs/99999999/metrics", member, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

static long long trial_job(const json_t *sweep, int index)
{
	return ty_jint(sweep, ty_test_strf("trials[%d].job_id", index));
}

TY_TEST(sweep_best_follows_the_objective)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("jm", 8, -1);
	const char *member = ty_mk_token("member", team);
	struct ty_resp r = {0};
	static const struct {
		const char *direction;
		int best; /* trial index */
		double value;
	} rows[] = {{"minimize", 2, 0.2}, {"maximize", 1, 0.9}};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].direction);
		ty_http(&r, "POST", "/v1/sweeps", s->admin,
			ty_tmpl(ty_test_strf("{'team':'@T','template':{'command':['true'],"
					     "'resources':{'gpus_per_node':0}},"
					     "'trials':[{'lr':1},{'lr':2},{'lr':3},{'lr':4}],"
					     "'objective':{'metric':'val_loss','direction':'%s'}}",
					     rows[i].direction),
				team),
			NULL);
		REQUIRE_STATUS(&r, 201);
		long long sweep = ty_jint(r.json, "id");
		CHECK_JNULL(r.json, "best");
		long long t[4];
		for (int k = 0; k < 4; k++)
			t[k] = trial_job(r.json, k);

		/* trial 0 was best at step 1 but ended at 0.5; trial 1 ends at 0.9;
		 * trial 2 at 0.2; trial 3 reports another metric only */
		post(&r, member, t[0], "{'step':1,'metrics':{'val_loss':0.1}}");
		post(&r, member, t[0], "{'step':2,'metrics':{'val_loss':0.5}}");
		post(&r, member, t[1], "{'step':2,'metrics':{'val_loss':0.9}}");
		post(&r, member, t[2], "{'step':3,'metrics':{'val_loss':0.2,'acc':0.7}}");
		post(&r, member, t[3], "{'step':3,'metrics':{'acc':0.99}}");
		ty_http(&r, "GET", ty_test_strf("/v1/sweeps/%lld", sweep), member, NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JINT(r.json, "best.index", rows[i].best);
		CHECK_JINT(r.json, "best.job_id", t[rows[i].best]);
		CHECK_JSTR(r.json, "best.metric", "val_loss");
		CHECK(json_number_value(ty_jpath(r.json, "best.value")) == rows[i].value);
		CHECK_JINT(r.json, "best.params.lr", rows[i].best + 1);
		CHECK(json_real_value(ty_jpath(r.json, "trials[0].metrics.val_loss")) == 0.5);
		CHECK(json_real_value(ty_jpath(r.json, "trials[2].metrics.acc")) == 0.7);
		CHECK(ty_jpath(r.json, "trials[1].metrics.acc") == NULL);
	}

	/* without an objective there is no best, whatever was reported */
	ty_http(&r, "POST", "/v1/sweeps", s->admin,
		ty_tmpl("{'team':'@T','template':{'command':['true'],"
			"'resources':{'gpus_per_node':0}},'trials':[{'lr':1}]}",
			team),
		NULL);
	REQUIRE_STATUS(&r, 201);
	long long sweep = ty_jint(r.json, "id");
	post(&r, member, trial_job(r.json, 0), "{'step':1,'metrics':{'val_loss':0.1}}");
	CHECK_STATUS(&r, 200);
	ty_http(&r, "GET", ty_test_strf("/v1/sweeps/%lld", sweep), member, NULL, NULL);
	CHECK_JNULL(r.json, "best");
	ty_resp_free(&r);
}

