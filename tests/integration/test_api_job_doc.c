/*
 * The job document the API builds in C (api/store_jobs.c) is, byte for
 * byte, the one PostgreSQL's ty_job_json_for (migrations/0017) builds for
 * the same row: for every state, as an admin and as a member (redacted),
 * on submit, read, list and cancel; read and cancel add the job's goodput
 * (null here: no attempt of these jobs is in the ledger).
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

/* What ty_job_json_for gives for job id as viewer (NULL: an admin), copied. */
static const char *sql_doc(long long id, const char *viewer_team)
{
	const char *ids = ty_test_strf("%lld", id), *doc;

	if (!viewer_team)
		doc = TY_STACK_SQL(
		    "SELECT ty_job_json_for(j, NULL)::text FROM jobs j WHERE j.id = $1", ids);
	else
		doc = TY_STACK_SQL("SELECT ty_job_json_for(j, (SELECT id FROM teams"
				   " WHERE name = $2))::text FROM jobs j WHERE j.id = $1",
				   ids, viewer_team);
	return ty_test_strf("%s", doc); /* the next query reuses its scratch */
}

/*
 * sql_doc with the members read and cancel add: goodput, null until an
 * attempt ends, and the start-time estimate, null until the scheduler made one.
 */
static const char *read_doc(long long id, const char *viewer_team)
{
	const char *doc = sql_doc(id, viewer_team);

	return ty_test_strf("%.*s,\"goodput\":null,\"estimated_start\":null,\"estimate\":null}",
			    (int)strlen(doc) - 1, doc);
}

static void check_get(long long id, const char *token, const char *viewer_team)
{
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", id), token, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_STR_EQ(r.body, read_doc(id, viewer_team));
	ty_resp_free(&r);
}

TY_TEST(job_doc_submit_is_the_sql_document)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("doc", 64, -1);
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/jobs", s->admin,
		ty_tmpl("{'team':'@T','name':'q\\\"uo\\\\te \\u00e9\\u0001','command':['x'],"
			"'resources':{'nodes':1,'gpus_per_node':2},'labels':{'b':'1','a':'2'},"
			"'env':{'Z':'1','A':'2'}}",
			team),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_STR_EQ(r.body, sql_doc(ty_jint(r.json, "id"), NULL));
	ty_resp_free(&r);
}

TY_TEST(job_doc_every_state_as_admin_and_member)
{
	static const char *const states[] = {"pending", "scheduled",  "starting",
					     "running", "preempting", "succeeded",
					     "failed",	"cancelled",  "stopped"};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("doc", 64, -1), *other = ty_mk_team("doc", 64, -1);
	const char *member = ty_mk_token("member", team);
	long long theirs = ty_mk_job(s->admin, other, NULL);

	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		long long id = ty_mk_job(s->admin, team, NULL);
		bool over = strcmp(states[i], "pending") && strcmp(states[i], "scheduled") &&
			    strcmp(states[i], "starting") && strcmp(states[i], "running") &&
			    strcmp(states[i], "preempting");

		ty_test_context("state %s", states[i]);
		/* the queue columns as the scheduler may leave them, naming another team's job */
		TY_STACK_SQL("UPDATE jobs SET state = $2, attempt = 2, preemptions = 1,"
			     " spot_preemptions = 1, queue_position = 4,"
			     " reserved_until = now() + interval '1 minute',"
			     " pending_reason = 'behind job ' || $3 || ', job ' || $1,"
			     " failure_class = CASE WHEN $2 = 'failed' THEN 'user_error' END,"
			     " finished_at = CASE WHEN $4 THEN now() END"
			     " WHERE id = $1",
			     ty_test_strf("%lld", id), states[i], ty_test_strf("%lld", theirs),
			     over ? "true" : "false");
		check_get(id, s->admin, NULL);
		check_get(id, member, team);
	}
}

TY_TEST(job_doc_list_and_cancel_are_the_sql_documents)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("doc", 64, -1);
	long long a = ty_mk_job(s->admin, team, NULL), b = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};
	const char *want;

	(void)a;
	(void)b;
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&limit=1", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	want = ty_test_strf("{\"items\":[%s],\"next_cursor\":\"%lld\"}", sql_doc(b, NULL), b);
	CHECK_STR_EQ(r.body, want);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	want = ty_test_strf("{\"items\":[%s, %s],\"next_cursor\":null}", sql_doc(b, NULL),
			    sql_doc(a, NULL));
	CHECK_STR_EQ(r.body, want);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&state=running", team), s->admin, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_STR_EQ(r.body, "{\"items\":[],\"next_cursor\":null}");
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", a), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_STR_EQ(r.body, read_doc(a, NULL));
	CHECK_JSTR(r.json, "state", "cancelled");
	ty_resp_free(&r);
}
