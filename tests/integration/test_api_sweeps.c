/* Sweeps over HTTP (docs/api.md "Sweeps"): create, read, list, cancel. */
#include "ty_stack.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

static const char *const *key(const char *k)
{
	const char **h = ty_test_alloc(2 * sizeof(*h));

	h[0] = ty_test_strf("Idempotency-Key: %s", k);
	return h;
}

static const char *grid_body(const char *team)
{
	return ty_tmpl("{'team':'@T','name':'lr-search','template':{'command':['python','t.py'],"
		       "'env':{'A':'1'},'resources':{'gpus_per_node':1}},"
		       "'grid':{'lr':[0.1,0.01],'batch':[32,64]},'max_concurrent':2,"
		       "'objective':{'metric':'val_loss','direction':'minimize'}}",
		       team);
}

static int count_sweeps(const char *token, const char *team)
{
	struct ty_resp r = {0};
	int n;

	ty_http(&r, "GET", ty_test_strf("/v1/sweeps?team=%s&limit=500", team), token, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	n = (int)json_array_size(json_object_get(r.json, "items"));
	ty_resp_free(&r);
	return n;
}

TY_TEST(grid_creates_one_job_per_trial_with_its_params)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("sw", 8, -1);
	static const struct {
		const char *params, *lr, *batch;
	} want[] = {
	    {"{\"batch\":32,\"lr\":0.1}", "0.1", "32"},
	    {"{\"batch\":32,\"lr\":0.01}", "0.01", "32"},
	    {"{\"batch\":64,\"lr\":0.1}", "0.1", "64"},
	    {"{\"batch\":64,\"lr\":0.01}", "0.01", "64"},
	};
	struct ty_resp r = {0}, j = {0};
	json_t *search;

	ty_http(&r, "POST", "/v1/sweeps", s->admin, grid_body(team), NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK_JSTR(r.json, "team", team);
	CHECK_JSTR(r.json, "name", "lr-search");
	CHECK_JSTR(r.json, "state", "active");
	CHECK_JINT(r.json, "trial_count", 4);
	CHECK_JINT(r.json, "trial_states.pending", 4);
	CHECK_JINT(r.json, "max_concurrent", 2);
	CHECK_JSTR(r.json, "objective.metric", "val_loss");
	CHECK_JSTR(r.json, "objective.direction", "minimize");
	CHECK_JNULL(r.json, "best");
	CHECK_JTIME(r.json, "created_at");
	CHECK_JNULL(r.json, "cancelled_at");
	search = json_pack("{s:{s:[f,f],s:[i,i]}}", "grid", "lr", 0.1, 0.01, "batch", 32, 64);
	CHECK(json_equal(ty_jpath(r.json, "search"), search));
	json_decref(search);
	REQUIRE(json_array_size(ty_jpath(r.json, "trials")) == 4);
	for (int i = 0; i < 4; i++) {
		const char *tp = ty_test_strf("trials[%d]", i);
		long long id = ty_jint(r.json, ty_test_strf("%s.job_id", tp));

		ty_test_context("trial %d", i);
		CHECK_JINT(r.json, ty_test_strf("%s.index", tp), i);
		CHECK_JSTR(r.json, ty_test_strf("%s.state", tp), "pending");
		ty_http(&j, "GET", ty_test_strf("/v1/jobs/%lld", id), s->admin, NULL, NULL);
		REQUIRE_STATUS(&j, 200);
		CHECK_JSTR(j.json, "team", team);
		CHECK_JSTR(j.json, "state", "pending");
		CHECK_JSTR(j.json, "spec.env.A", "1");
		CHECK_JSTR(j.json, "spec.env.TRAINYARD_PARAMS", want[i].params);
		CHECK_JSTR(j.json, "spec.env.TRAINYARD_PARAM_LR", want[i].lr);
		CHECK_JSTR(j.json, "spec.env.TRAINYARD_PARAM_BATCH", want[i].batch);
		CHECK_JINT(j.json, "spec.resources.gpus_per_node", 1);
		CHECK(json_integer_value(ty_jpath(r.json, ty_test_strf("%s.params.batch", tp))) ==
		      atoll(want[i].batch));
		/* each trial's history starts like any job's: seq 1, submitted */
		ty_http(&j, "GET", ty_test_strf("/v1/jobs/%lld/events", id), s->admin, NULL, NULL);
		REQUIRE_STATUS(&j, 200);
		CHECK_INT_EQ(json_array_size(ty_jpath(j.json, "events")), 1);
		CHECK_JINT(j.json, "events[0].seq", 1);
		CHECK_JSTR(j.json, "events[0].type", "submitted");
		CHECK_JSTR(j.json, "events[0].state", "pending");
		CHECK_JSTR(j.json, "events[0].message",
			   "submitted by token 'test-admin' as a sweep trial");
		CHECK_JINT(j.json, "next_after", 1);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 4);
	/* GET returns the same document */
	ty_http(&j, "GET", ty_test_strf("/v1/sweeps/%lld", ty_jint(r.json, "id")), s->admin, NULL,
		NULL);
	REQUIRE_STATUS(&j, 200);
	CHECK(json_equal(j.json, r.json));
	ty_resp_free(&r);
	ty_resp_free(&j);
}

TY_TEST(random_and_list_sweeps)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("swr", 8, -1);
	const char *body = ty_tmpl(
		"{'team':'@T','template':{'command':['x'],'resources':{}},"
		"'random':{'count':5,'seed':7,'params':{'lr':{'log_uniform':[1e-5,1e-1]},"
		"'batch':{'choice':[32,64]}}}}",
		team);
	struct ty_resp a = {0}, b = {0};

	ty_http(&a, "POST", "/v1/sweeps", s->admin, body, NULL);
	REQUIRE_STATUS(&a, 201);
	ty_http(&b, "POST", "/v1/sweeps", s->admin, body, NULL);
	REQUIRE_STATUS(&b, 201);
	CHECK(ty_jint(a.json, "id") != ty_jint(b.json, "id"));
	CHECK_JINT(a.json, "trial_count", 5);
	CHECK_JNULL(a.json, "max_concurrent");
	CHECK_JNULL(a.json, "objective");
	/* the same seed gives the same parameters */
	for (int i = 0; i < 5; i++) {
		const char *pp = ty_test_strf("trials[%d].params", i);

		ty_test_context("trial %d", i);
		CHECK(json_equal(ty_jpath(a.json, pp), ty_jpath(b.json, pp)));
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(count_sweeps(s->admin, team), 2);
	ty_http(&a, "GET", ty_test_strf("/v1/sweeps?team=%s&limit=1", team), s->admin, NULL, NULL);
	REQUIRE_STATUS(&a, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(a.json, "items")), 1);
	CHECK_JINT(a.json, "items[0].id", ty_jint(b.json, "id"));
	CHECK(ty_jpath(a.json, "items[0].trials") == NULL); /* lists carry no trials */
	REQUIRE(ty_jstr(a.json, "next_cursor") != NULL);
	ty_http(&a, "GET",
		ty_test_strf("/v1/sweeps?team=%s&limit=1&cursor=%s", team,
			     ty_jstr(a.json, "next_cursor")),
		s->admin, NULL, NULL);
	REQUIRE_STATUS(&a, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(a.json, "items")), 1);
	CHECK_JNULL(a.json, "next_cursor");
	ty_http(&a, "GET", "/v1/sweeps?limit=0", s->admin, NULL, NULL);
	CHECK_PROBLEM(&a, 400, "invalid_parameter", "limit");
	ty_http(&a, "GET", "/v1/sweeps?cursor=x", s->admin, NULL, NULL);
	CHECK_PROBLEM(&a, 400, "invalid_parameter", "cursor");
	ty_resp_free(&a);
	ty_resp_free(&b);
}

/* Every refusal stores nothing: no sweep and no job. */
TY_TEST(refusals_store_nothing)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("swbad", 2, 0);
	static const struct {
		const char *body;
		int status;
		const char *code, *field;
	} rows[] = {
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},"
	     "'trials':[{'a':1},{'a':2},{'a':[3]}]}",
	     422, "invalid_field", "trials[2]"},
	    {"{'team':'@T','template':{'resources':{}},'trials':[{'a':1}]}", 422, "missing_field",
	     "template.command"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{},"
	     "'env':{'TRAINYARD_PARAMS':'{}'}},'trials':[{'a':1}]}",
	     422, "reserved_env", "template.env.TRAINYARD_PARAMS"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{},"
	     "'env':{'TRAINYARD_PARAM_A':'1'}},'trials':[{'a':1}]}",
	     422, "reserved_env", "template.env.TRAINYARD_PARAM_A"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{},'bogus':1},"
	     "'trials':[{'a':1}]}",
	     400, "unknown_field", "template.bogus"},
	    {"{'team':'@T','template':{'team':'other','command':['x'],'resources':{}},"
	     "'trials':[{'a':1}]}",
	     422, "invalid_field", "template.team"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{'gpus_per_node':4}},"
	     "'trials':[{'a':1}]}",
	     422, "exceeds_quota", "template.resources"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}}}", 422, "missing_field",
	     "trials"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},'trials':[{'a':1}],"
	     "'grid':{'a':[1]}}",
	     422, "invalid_field", "grid"},
	    {"{'team':'@T','trials':[{'a':1}]}", 422, "missing_field", "template"},
	    {"{'team':'@T','template':[],'trials':[{'a':1}]}", 422, "invalid_field", "template"},
	    {"{'template':{'command':['x'],'resources':{}},'trials':[{'a':1}]}", 422,
	     "missing_field", "team"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},'trials':[{'a':1}],"
	     "'max_concurrent':0}",
	     422, "invalid_field", "max_concurrent"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},'trials':[{'a':1}],"
	     "'objective':{'direction':'minimize'}}",
	     422, "missing_field", "objective.metric"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},'trials':[{'a':1}],"
	     "'objective':{'metric':'m','direction':'up'}}",
	     422, "invalid_field", "objective.direction"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},'trials':[{'a':1}],"
	     "'objective':{'metric':'m','x':1}}",
	     400, "unknown_field", "objective.x"},
	    {"{'team':'@T','template':{'command':['x'],'resources':{}},'trials':[{'a':1}],"
	     "'extra':1}",
	     400, "unknown_field", "extra"},
	    {"{'team':'no-such-team','template':{'command':['x'],'resources':{}},"
	     "'trials':[{'a':1}]}",
	     422, "unknown_team", "team"},
	};
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].body);
		ty_http(&r, "POST", "/v1/sweeps", s->admin, ty_tmpl(rows[i].body, team), NULL);
		CHECK_PROBLEM(&r, rows[i].status, rows[i].code, rows[i].field);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(count_sweeps(s->admin, team), 0);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 0);
	ty_resp_free(&r);
}

/* A failure inside the transaction (a trial job the database refuses) leaves nothing. */
TY_TEST(one_transaction)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("swtx", 8, -1);
	const char *body = ty_tmpl("{'team':'@T','template':{'command':['x'],'resources':{}},"
				   "'trials':[{'a':1},{'a':2},{'a':3}]}",
				   team);
	struct ty_resp r = {0};

	/* the third trial's job insert fails; the sweep and the first two must go too */
	TY_STACK_SQL("CREATE FUNCTION swtx_refuse() RETURNS trigger LANGUAGE plpgsql AS $$"
		     " BEGIN IF NEW.sweep_trial = 2 THEN RAISE EXCEPTION 'refused'; END IF;"
		     " RETURN NEW; END $$");
	TY_STACK_SQL("CREATE TRIGGER swtx_refuse BEFORE INSERT ON jobs FOR EACH ROW"
		     " EXECUTE FUNCTION swtx_refuse()");
	ty_http(&r, "POST", "/v1/sweeps", s->admin, body, NULL);
	TY_STACK_SQL("DROP TRIGGER swtx_refuse ON jobs");
	TY_STACK_SQL("DROP FUNCTION swtx_refuse()");
	CHECK_INT_EQ(r.status, 500);
	CHECK_INT_EQ(count_sweeps(s->admin, team), 0);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 0);
	CHECK_STR_EQ(TY_STACK_SQL("SELECT count(*) FROM sweeps s JOIN teams t ON t.id = s.team_id"
				  " WHERE t.name = $1",
				  team),
		     "0");
	/* and the same body goes through afterwards */
	ty_http(&r, "POST", "/v1/sweeps", s->admin, body, NULL);
	CHECK_STATUS(&r, 201);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 3);
	ty_resp_free(&r);
}

TY_TEST(idempotency_key)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("swidem", 8, -1);
	const char *k = ty_uniq("key");
	struct ty_resp first = {0}, again = {0};

	ty_http(&first, "POST", "/v1/sweeps", s->admin, grid_body(team), key(k));
	REQUIRE_STATUS(&first, 201);
	ty_http(&again, "POST", "/v1/sweeps", s->admin, grid_body(team), key(k));
	CHECK_STATUS(&again, 200);
	CHECK_STR_EQ(ty_resp_header(&again, "Idempotent-Replayed"), "true");
	CHECK(json_equal(again.json, first.json));
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 4);
	ty_http(&again, "POST", "/v1/sweeps", s->admin,
		ty_tmpl("{'team':'@T','template':{'command':['y'],'resources':{}},"
			"'trials':[{'a':1}]}",
			team),
		key(k));
	CHECK_PROBLEM(&again, 409, "idempotency_conflict", NULL);
	ty_http(&again, "POST", "/v1/sweeps", s->admin, grid_body(team), key("caf\xc3\xa9"));
	CHECK_PROBLEM(&again, 400, "invalid_header", "Idempotency-Key");
	CHECK_INT_EQ(count_sweeps(s->admin, team), 1);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 4);
	ty_resp_free(&first);
	ty_resp_free(&again);
}

TY_TEST(auth_matrix)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("swa", 8, -1), *other = ty_mk_team("swb", 8, -1);
	const char *member = ty_mk_token("member", team), *viewer = ty_mk_token("viewer", team);
	const char *o_member = ty_mk_token("member", other);
	const char *o_viewer = ty_mk_token("viewer", other);
	struct ty_resp r = {0};
	const char *get, *cancel;

	ty_http(&r, "POST", "/v1/sweeps", NULL, grid_body(team), NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "POST", "/v1/sweeps", viewer, grid_body(team), NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", TY_FIELD_UNCHECKED);
	ty_http(&r, "POST", "/v1/sweeps", o_member, grid_body(team), NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", "team");
	ty_http(&r, "POST", "/v1/sweeps", member, grid_body(team), NULL);
	REQUIRE_STATUS(&r, 201);
	get = ty_test_strf("/v1/sweeps/%lld", ty_jint(r.json, "id"));
	cancel = ty_test_strf("%s/cancel", get);

	ty_http(&r, "GET", get, viewer, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "GET", get, o_member, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "sweep_not_found", NULL);
	ty_http(&r, "GET", get, o_viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "sweep_not_found", NULL);
	ty_http(&r, "GET", "/v1/sweeps/abc", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "sweep_not_found", NULL);
	ty_http(&r, "GET", "/v1/sweeps/999999999", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "sweep_not_found", NULL);
	CHECK_INT_EQ(count_sweeps(o_member, team), 0);
	CHECK_INT_EQ(count_sweeps(viewer, team), 1);
	ty_http(&r, "POST", cancel, o_member, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "sweep_not_found", NULL);
	ty_http(&r, "POST", cancel, o_viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "sweep_not_found", NULL);
	ty_http(&r, "POST", cancel, viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "GET", get, s->admin, NULL, NULL);
	CHECK_JSTR(r.json, "state", "active");
	ty_http(&r, "POST", cancel, member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "cancelled");
	ty_resp_free(&r);
}

TY_TEST(cancel_ends_pending_trials_and_asks_running_ones_to_stop)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("swc", 8, -1);
	struct ty_resp r = {0}, e = {0};
	long long running, done, pend;
	const char *cancel;

	ty_http(&r, "POST", "/v1/sweeps", s->admin, grid_body(team), NULL);
	REQUIRE_STATUS(&r, 201);
	cancel = ty_test_strf("/v1/sweeps/%lld/cancel", ty_jint(r.json, "id"));
	running = ty_jint(r.json, "trials[0].job_id");
	done = ty_jint(r.json, "trials[1].job_id");
	pend = ty_jint(r.json, "trials[2].job_id");
	TY_STACK_SQL("UPDATE jobs SET state = 'running' WHERE id = $1",
		     ty_test_strf("%lld", running));
	TY_STACK_SQL("UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = $1",
		     ty_test_strf("%lld", done));

	ty_http(&r, "POST", cancel, s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "cancelled");
	CHECK_JTIME(r.json, "cancelled_at");
	CHECK_JSTR(r.json, "trials[0].state", "running");
	CHECK(json_is_true(ty_jpath(r.json, "trials[0].cancel_requested")));
	CHECK_JSTR(r.json, "trials[1].state", "succeeded");
	CHECK(json_is_false(ty_jpath(r.json, "trials[1].cancel_requested")));
	CHECK_JSTR(r.json, "trials[2].state", "cancelled");
	CHECK_JSTR(r.json, "trials[3].state", "cancelled");
	CHECK_JINT(r.json, "trial_states.cancelled", 2);
	/* each trial's history says why, as a job cancel does */
	ty_http(&e, "GET", ty_test_strf("/v1/jobs/%lld/events", pend), s->admin, NULL, NULL);
	REQUIRE_STATUS(&e, 200);
	CHECK_JSTR(e.json, "events[1].type", "cancelled");
	CHECK_JSTR(e.json, "events[1].message", "cancelled while pending (sweep cancel)");
	ty_http(&e, "GET", ty_test_strf("/v1/jobs/%lld/events", running), s->admin, NULL, NULL);
	REQUIRE_STATUS(&e, 200);
	CHECK_JSTR(e.json, "events[1].type", "cancel_requested");
	CHECK_JSTR(e.json, "events[1].state", "running");
	ty_http(&e, "GET", ty_test_strf("/v1/jobs/%lld/events", done), s->admin, NULL, NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(e.json, "events")), 1);
	/* again: nothing more to do, no new events */
	ty_http(&r, "POST", cancel, s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&e, "GET", ty_test_strf("/v1/jobs/%lld/events", running), s->admin, NULL, NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(e.json, "events")), 2);
	ty_resp_free(&r);
	ty_resp_free(&e);
}
