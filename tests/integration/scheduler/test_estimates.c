/*
 * Start-time estimates on the daemon (docs/scheduling.md, "Start-time
 * estimates"), the test playing the executor: a waiting job's published
 * estimate is the end of the gang it waits for (start + max runtime, or
 * + the runtime history of its team and name once it has one), runtime
 * history is kept as attempts succeed, and the estimate is cleared when
 * the job starts.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

/* whether job's estimated start is its attempt 1's start + secs (to the millisecond the mirror
 * keeps) */
#define ON_TIME                                                                                    \
	"SELECT (abs(extract(epoch FROM j.estimated_start - (a.created_at"                         \
	" + make_interval(secs => $3::int)))) < 0.002)::text"                                      \
	" FROM jobs j, attempts a WHERE j.id = $1 AND a.job_id = $2 AND a.attempt = 1"

#define BASIS "SELECT estimate_basis->>$2 FROM jobs WHERE id = $1"

TY_TEST(estimates_follow_the_ends_they_wait_for)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "est", 8, -1, NULL);
	const struct proto_msg *l;
	long long a, b, c;

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	a = fx_submit_to(f, team,
			 ",'name':'est-a','resources':{'nodes':1,'gpus_per_node':2},"
			 "'max_runtime_seconds':3600");
	REQUIRE((l = fx_recv(f, "n1", "launch", a, T)) != NULL);
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(a));

	/* b waits for a: from a's start + its max runtime, exactly (one end, one step) */
	b = fx_submit_to(f, team,
			 ",'name':'est-a','resources':{'nodes':1,'gpus_per_node':2},"
			 "'max_runtime_seconds':3600");
	FX_WAIT(f, T, "estimated", BASIS, fx_n(b), "kind");
	CHECK_STR_EQ(FX_Q(f, ON_TIME, fx_n(b), fx_n(a), "3600"), "true");
	CHECK_STR_EQ(FX_Q(f, BASIS, fx_n(b), "runtime_source"), "max_runtime");
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT estimate_basis->'waits_for'->>0 FROM jobs WHERE id = $1", fx_n(b)),
	    fx_n(a));
	/* a job of a shape no node holds (queued anyway): never */
	c = fx_submit_to(
	    f, team, ",'resources':{'nodes':1,'gpus_per_node':4},'queue_if_unschedulable':true");
	FX_WAIT(f, T, "never", BASIS, fx_n(c), "kind");
	CHECK_STR_EQ(FX_Q(f, "SELECT estimated_start IS NULL FROM jobs WHERE id = $1", fx_n(c)),
		     "t");
	fx_cancel(f, c);

	/* a succeeds: its runtime is history; b starts, and its estimate is gone */
	fx_exit(f, "n1", l, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(a));
	FX_WAIT(f, T, "1",
		"SELECT cardinality(runtimes) FROM runtime_history h JOIN teams t"
		" ON t.id = h.team_id WHERE t.name = $1 AND h.name = 'est-a'",
		team);
	REQUIRE((l = fx_recv(f, "n1", "launch", b, T)) != NULL);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (estimated_start IS NULL AND estimate_basis IS NULL)::text"
			  " FROM jobs WHERE id = $1",
			  fx_n(b)),
		     "true");
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(b));

	/* with a history of 10 min for est-a, c waits for b's start + 10 min, not 1 h */
	FX_Q(f,
	     "UPDATE runtime_history SET p80_seconds = 600 WHERE name = 'est-a'"
	     " AND team_id = (SELECT id FROM teams WHERE name = $1) RETURNING 1",
	     team);
	c = fx_submit_to(f, team,
			 ",'name':'est-c','resources':{'nodes':1,'gpus_per_node':2},"
			 "'max_runtime_seconds':3600");
	FX_WAIT(f, T, "history", BASIS, fx_n(c), "runtime_source");
	CHECK_STR_EQ(FX_Q(f, ON_TIME, fx_n(c), fx_n(b), "600"), "true");

	/* the API shows it */
	{
		json_t *j =
		    json_loads(fx_api(f, "GET", ty_test_strf("/v1/jobs/%lld", c), 200), 0, NULL);

		REQUIRE(j != NULL);
		CHECK(json_is_string(json_object_get(j, "estimated_start")));
		CHECK_STR_EQ(json_string_value(ty_jpath(j, "estimate.kind")), "estimated");
		CHECK_INT_EQ(json_integer_value(ty_jpath(j, "estimate.waits_for[0]")), b);
		json_decref(j);
	}
	fx_sched_stop(f, 0);
}

/* the what-if answer of body (' for "), parsed */
static json_t *what_if(struct fx *f, const char *body)
{
	json_t *j = json_loads(fx_api_body(f, "POST", "/v1/queue/what-if", body, 200), 0, NULL);

	REQUIRE(j != NULL);
	return j;
}

TY_TEST(what_if_names_a_smaller_shape_that_starts_now)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "wif", 8, -1, NULL);
	const char *other, *member;
	const struct proto_msg *l;
	const json_t *alt;
	json_t *j;
	long long a;

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	a = fx_submit_to(f, team,
			 ",'resources':{'nodes':1,'gpus_per_node':2},'max_runtime_seconds':3600");
	REQUIRE((l = fx_recv(f, "n1", "launch", a, T)) != NULL);
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(a));
	fx_node(f, "n2", 2); /* idle */
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");

	/* both nodes: once a ends (its start + max runtime); one node: now; spot allowed
	 * would not help (no spot node): not offered */
	j = what_if(f, ty_test_strf("{'team':'%s','command':['true'],"
				    "'resources':{'nodes':2,'gpus_per_node':2},"
				    "'max_runtime_seconds':600}",
				    team));
	CHECK(json_is_false(json_object_get(j, "starts_now")));
	CHECK_STR_EQ(json_string_value(ty_jpath(j, "estimate.kind")), "estimated");
	CHECK_INT_EQ(json_integer_value(ty_jpath(j, "estimate.waits_for[0]")), a);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (abs(extract(epoch FROM $1::timestamptz - (a.created_at"
			  " + interval '3600 s'))) < 1)::text FROM attempts a"
			  " WHERE a.job_id = $2 AND a.attempt = 1",
			  json_string_value(json_object_get(j, "estimated_start")), fx_n(a)),
		     "true");
	CHECK(strstr(json_string_value(json_object_get(j, "reason")), "waiting for") != NULL);
	REQUIRE_INT_EQ(json_array_size(json_object_get(j, "alternatives")), 1);
	alt = json_array_get(json_object_get(j, "alternatives"), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(alt, "summary")), "1 node instead of 2");
	CHECK(json_is_true(json_object_get(alt, "starts_now")));
	CHECK_INT_EQ(json_integer_value(ty_jpath(alt, "spec_patch.resources.nodes")), 1);
	CHECK_STR_EQ(json_string_value(ty_jpath(alt, "estimate.kind")), "now");
	json_decref(j);

	/* another team's member asks the same: it learns when, not which job it waits for
	 * (redacted as in the queue), and may not ask for a team not its own */
	other = fx_team(f, "wifo", 8, -1, NULL);
	member = fx_token(f, "member", other);
	j = json_loads(fx_api_as(f, member, "POST", "/v1/queue/what-if",
				 ty_test_strf("{'team':'%s','command':['true'],"
					      "'resources':{'nodes':2,'gpus_per_node':2},"
					      "'max_runtime_seconds':600}",
					      other),
				 200),
		       0, NULL);
	REQUIRE(j != NULL);
	CHECK_STR_EQ(json_string_value(ty_jpath(j, "estimate.kind")), "estimated");
	CHECK(json_is_string(json_object_get(j, "estimated_start")));
	CHECK(json_is_null(ty_jpath(j, "estimate.waits_for[0]")));
	CHECK_INT_EQ(json_array_size(json_object_get(j, "alternatives")), 1);
	json_decref(j);
	fx_api_as(f, member, "POST", "/v1/queue/what-if",
		  ty_test_strf("{'team':'%s','command':['true'],'resources':{'nodes':1}}", team),
		  403);

	/* nothing was submitted, and the request is gone once answered */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM jobs j JOIN teams t ON t.id = j.team_id"
			  " WHERE t.name = $1",
			  team),
		     "1");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM what_if_requests"), "0");

	/* a shape no node holds: never, saying why, with no alternative that helps */
	j = what_if(f, ty_test_strf("{'team':'%s','command':['true'],"
				    "'resources':{'nodes':2,'gpus_per_node':4}}",
				    team));
	CHECK(json_is_null(json_object_get(j, "estimated_start")));
	CHECK_STR_EQ(json_string_value(ty_jpath(j, "estimate.kind")), "never");
	CHECK(strncmp(json_string_value(json_object_get(j, "reason")), "cannot run: ", 12) == 0);
	/* spot allowed would not help either: no alternative is offered */
	CHECK_INT_EQ(json_array_size(json_object_get(j, "alternatives")), 0);
	json_decref(j);

	/* a spec a submission would refuse is refused the same way */
	CHECK(strstr(fx_api_body(f, "POST", "/v1/queue/what-if",
				 ty_test_strf("{'team':'%s','resources':{'nodes':1}}", team), 422),
		     "command") != NULL);
	CHECK(strstr(fx_api_body(
			 f, "POST", "/v1/queue/what-if",
			 "{'team':'no-such-team','command':['true'],'resources':{'nodes':1}}", 422),
		     "no team 'no-such-team'") != NULL);
	fx_sched_stop(f, 0);
}

TY_TEST(what_if_without_a_scheduler_says_so_once_its_wait_runs_out)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "wif2", 8, -1, NULL);
	const char *body;

	fx_node(f, "n1", 2);
	body = fx_api_body(
	    f, "POST", "/v1/queue/what-if?wait=1",
	    ty_test_strf("{'team':'%s','command':['true'],'resources':{'nodes':1}}", team), 503);
	CHECK(strstr(body, "no scheduler answered") != NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM what_if_requests"), "0");
	CHECK(strstr(fx_api_body(f, "POST", "/v1/queue/what-if?wait=61",
				 ty_test_strf("{'team':'%s','command':['true'],"
					      "'resources':{'nodes':1}}",
					      team),
				 400),
		     "'wait' must be an integer from 1 to 60") != NULL);
}
