/*
 * Authorization (docs/api.md "Conventions"): role admin / member / viewer
 * x own team / other team x every /v1 route, and what lists show to whom.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

enum actor { ADMIN, MEMBER, VIEWER };
enum scope { OWN, OTHER };

static const char *const actor_names[] = {"admin", "member", "viewer"};
static const char *const scope_names[] = {"own team", "other team"};

struct world {
	const char *team[2]; /* A = own, B = other (for member and viewer of A) */
	const char *token[3];
	const char *member_b;
	long long job[2];
};

static struct world setup(void)
{
	const struct ty_stack *s = ty_stack_get();
	struct world w;

	w.team[OWN] = ty_mk_team("team-a", 64, -1);
	w.team[OTHER] = ty_mk_team("team-b", 64, -1);
	w.token[ADMIN] = s->admin;
	w.token[MEMBER] = ty_mk_token("member", w.team[OWN]);
	w.token[VIEWER] = ty_mk_token("viewer", w.team[OWN]);
	w.member_b = ty_mk_token("member", w.team[OTHER]);
	w.job[OWN] = ty_mk_job(s->admin, w.team[OWN], NULL);
	w.job[OTHER] = ty_mk_job(s->admin, w.team[OTHER], NULL);
	return w;
}

enum route {
	LIST_TEAMS,
	GET_TEAM,
	CREATE_TEAM,
	PATCH_TEAM,
	CREATE_TOKEN,
	LIST_TOKENS,
	DELETE_TOKEN,
	SUBMIT_JOB,
	LIST_JOBS,
	GET_JOB,
	CANCEL_JOB,
	STOP_JOB,
	JOB_EVENTS,
	JOB_ATTEMPTS,
	JOB_CHECKPOINTS,
	JOB_LOGS,
	NROUTES
};

struct expect {
	int status;
	const char *code; /* for failures */
};

/* clang-format off */
#define OK(st) {st, NULL}
#define FORBIDDEN {403, "forbidden"}
#define NO_TEAM {404, "team_not_found"}
#define NO_JOB {404, "job_not_found"}
#define NO_RANK {404, "rank_not_found"}

/* want[route][actor][scope] */
static const struct expect want[NROUTES][3][2] = {
	[LIST_TEAMS]   = {{OK(200), OK(200)},     {OK(200), OK(200)},     {OK(200), OK(200)}},
	[GET_TEAM]     = {{OK(200), OK(200)},     {OK(200), NO_TEAM},     {OK(200), NO_TEAM}},
	[CREATE_TEAM]  = {{OK(201), OK(201)},     {FORBIDDEN, FORBIDDEN}, {FORBIDDEN, FORBIDDEN}},
	[PATCH_TEAM]   = {{OK(200), OK(200)},     {FORBIDDEN, FORBIDDEN}, {FORBIDDEN, FORBIDDEN}},
	[CREATE_TOKEN] = {{OK(201), OK(201)},     {FORBIDDEN, FORBIDDEN}, {FORBIDDEN, FORBIDDEN}},
	[LIST_TOKENS]  = {{OK(200), OK(200)},     {FORBIDDEN, FORBIDDEN}, {FORBIDDEN, FORBIDDEN}},
	[DELETE_TOKEN] = {{OK(204), OK(204)},     {FORBIDDEN, FORBIDDEN}, {FORBIDDEN, FORBIDDEN}},
	[SUBMIT_JOB]   = {{OK(201), OK(201)},     {OK(201), FORBIDDEN},   {FORBIDDEN, FORBIDDEN}},
	[LIST_JOBS]    = {{OK(200), OK(200)},     {OK(200), OK(200)},     {OK(200), OK(200)}},
	[GET_JOB]      = {{OK(200), OK(200)},     {OK(200), NO_JOB},      {OK(200), NO_JOB}},
	/* "never 403" for another team's job: a viewer learns nothing either */
	[CANCEL_JOB]   = {{OK(200), OK(200)},     {OK(200), NO_JOB},      {FORBIDDEN, NO_JOB}},
	[STOP_JOB]     = {{OK(200), OK(200)},     {OK(200), NO_JOB},      {FORBIDDEN, NO_JOB}},
	[JOB_EVENTS]   = {{OK(200), OK(200)},     {OK(200), NO_JOB},      {OK(200), NO_JOB}},
	[JOB_ATTEMPTS] = {{OK(200), OK(200)},     {OK(200), NO_JOB},      {OK(200), NO_JOB}},
	[JOB_CHECKPOINTS] = {{OK(200), OK(200)},  {OK(200), NO_JOB},      {OK(200), NO_JOB}},
	/* the jobs are pending: readable, but no attempt has a rank 0 yet */
	[JOB_LOGS]     = {{NO_RANK, NO_RANK},     {NO_RANK, NO_JOB},      {NO_RANK, NO_JOB}},
};
/* clang-format on */

static void request(struct ty_resp *r, const struct world *w, enum route route, enum actor a,
		    enum scope sc)
{
	const struct ty_stack *s = ty_stack_get();
	const char *tok = w->token[a], *team = w->team[sc];
	long long job = w->job[sc], id;
	struct ty_resp t = {0};

	switch (route) {
	case LIST_TEAMS:
		ty_http(r, "GET", "/v1/teams", tok, NULL, NULL);
		break;
	case GET_TEAM:
		ty_http(r, "GET", ty_test_strf("/v1/teams/%s", team), tok, NULL, NULL);
		break;
	case CREATE_TEAM:
		ty_http(r, "POST", "/v1/teams", tok,
			ty_tmpl("{'name':'@T','nominal_gpus':1}", ty_uniq("new")), NULL);
		break;
	case PATCH_TEAM:
		ty_http(r, "PATCH", ty_test_strf("/v1/teams/%s", team), tok, "{\"weight\":2}",
			NULL);
		break;
	case CREATE_TOKEN:
		ty_http(r, "POST", "/v1/tokens", tok,
			ty_tmpl("{'name':'t','role':'viewer','team':'@T'}", team), NULL);
		break;
	case LIST_TOKENS:
		ty_http(r, "GET", "/v1/tokens", tok, NULL, NULL);
		break;
	case DELETE_TOKEN:
		ty_http(&t, "POST", "/v1/tokens", s->admin,
			ty_tmpl("{'name':'victim','role':'viewer','team':'@T'}", team), NULL);
		id = ty_jint(t.json, "id");
		ty_resp_free(&t);
		ty_http(r, "DELETE", ty_test_strf("/v1/tokens/%lld", id), tok, NULL, NULL);
		break;
	case SUBMIT_JOB:
		ty_http(r, "POST", "/v1/jobs", tok,
			ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", team), NULL);
		break;
	case LIST_JOBS:
		ty_http(r, "GET", ty_test_strf("/v1/jobs?team=%s", team), tok, NULL, NULL);
		break;
	case GET_JOB:
		ty_http(r, "GET", ty_test_strf("/v1/jobs/%lld", job), tok, NULL, NULL);
		break;
	case CANCEL_JOB: /* a fresh pending job each time */
		job = ty_mk_job(s->admin, team, NULL);
		ty_http(r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), tok, NULL, NULL);
		break;
	case STOP_JOB: /* a fresh pending job each time */
		job = ty_mk_job(s->admin, team, NULL);
		ty_http(r, "POST", ty_test_strf("/v1/jobs/%lld/stop", job), tok, NULL, NULL);
		break;
	case JOB_EVENTS:
		ty_http(r, "GET", ty_test_strf("/v1/jobs/%lld/events", job), tok, NULL, NULL);
		break;
	case JOB_ATTEMPTS:
		ty_http(r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), tok, NULL, NULL);
		break;
	case JOB_CHECKPOINTS:
		ty_http(r, "GET", ty_test_strf("/v1/jobs/%lld/checkpoints", job), tok, NULL, NULL);
		break;
	case JOB_LOGS:
		ty_http(r, "GET", ty_test_strf("/v1/jobs/%lld/logs", job), tok, NULL, NULL);
		break;
	case NROUTES:
		break;
	}
}

static const char *const route_names[] = {
    "GET /v1/teams",
    "GET /v1/teams/{name}",
    "POST /v1/teams",
    "PATCH /v1/teams/{name}",
    "POST /v1/tokens",
    "GET /v1/tokens",
    "DELETE /v1/tokens/{id}",
    "POST /v1/jobs",
    "GET /v1/jobs?team=",
    "GET /v1/jobs/{id}",
    "POST /v1/jobs/{id}/cancel",
    "POST /v1/jobs/{id}/stop",
    "GET /v1/jobs/{id}/events",
    "GET /v1/jobs/{id}/attempts",
    "GET /v1/jobs/{id}/checkpoints",
    "GET /v1/jobs/{id}/logs",
};
_Static_assert(sizeof(route_names) / sizeof(route_names[0]) == NROUTES, "a name per route");

TY_TEST(matrix)
{
	struct world w = setup();
	struct ty_resp r = {0};

	for (int route = 0; route < NROUTES; route++)
		for (int a = 0; a < 3; a++)
			for (int sc = 0; sc < 2; sc++) {
				const struct expect *e = &want[route][a][sc];

				ty_test_context("%s as %s, %s", route_names[route], actor_names[a],
						scope_names[sc]);
				request(&r, &w, (enum route)route, (enum actor)a, (enum scope)sc);
				if (e->code) /* a field may name the team at fault */
					CHECK_PROBLEM(&r, e->status, e->code, TY_FIELD_UNCHECKED);
				else
					CHECK_STATUS(&r, e->status);
			}
	ty_resp_free(&r);
}

/* A team-B member asking for team A's job: 404 job_not_found on every job route. */
TY_TEST(other_team_job_is_not_found)
{
	struct world w = setup();
	struct ty_resp r = {0};
	long long job = w.job[OWN];

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), w.member_b, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", job), w.member_b, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), w.member_b, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/stop", job), w.member_b, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	/* the same answer as for a job that does not exist at all */
	ty_http(&r, "GET", "/v1/jobs/987654321", w.member_b, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	/* and the job was neither cancelled nor stopped */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), w.token[ADMIN], NULL, NULL);
	CHECK_JSTR(r.json, "state", "pending");
	ty_resp_free(&r);
}

static bool lists_only(const json_t *items, const char *key, const char *value)
{
	const json_t *it;
	size_t i;

	json_array_foreach(items, i, it) if (!ty_jstr(it, key) ||
					     strcmp(ty_jstr(it, key), value)) return false;
	return true;
}

static bool lists_id(const json_t *items, long long id)
{
	const json_t *it;
	size_t i;

	json_array_foreach(items, i, it) if (ty_jint(it, "id") == id) return true;
	return false;
}

TY_TEST(lists_show_only_the_callers_team)
{
	struct world w = setup();
	struct ty_resp r = {0};

	for (int a = MEMBER; a <= VIEWER; a++) {
		ty_test_context("%s", actor_names[a]);
		ty_http(&r, "GET", "/v1/jobs?limit=500", w.token[a], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK(lists_only(ty_jpath(r.json, "items"), "team", w.team[OWN]));
		CHECK(lists_id(ty_jpath(r.json, "items"), w.job[OWN]));
		CHECK(!lists_id(ty_jpath(r.json, "items"), w.job[OTHER]));

		/* filtering on another team shows nothing of it */
		ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s", w.team[OTHER]), w.token[a],
			NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 0);

		ty_http(&r, "GET", "/v1/teams", w.token[a], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 1);
		CHECK_JSTR(r.json, "items[0].name", w.team[OWN]);
	}
	ty_test_context(NULL);
	/* admins see every team and every job */
	ty_http(&r, "GET", "/v1/jobs?limit=500", w.token[ADMIN], NULL, NULL);
	CHECK(lists_id(ty_jpath(r.json, "items"), w.job[OWN]));
	CHECK(lists_id(ty_jpath(r.json, "items"), w.job[OTHER]));
	ty_http(&r, "GET", "/v1/teams", w.token[ADMIN], NULL, NULL);
	CHECK(json_array_size(ty_jpath(r.json, "items")) >= 2);
	ty_resp_free(&r);
}

/* Refused requests change nothing. */
TY_TEST(refused_requests_store_nothing)
{
	struct world w = setup();
	const struct ty_stack *s = ty_stack_get();
	int before = ty_count_jobs(s->admin, ty_test_strf("team=%s", w.team[OTHER]));
	struct ty_resp r = {0};

	ty_http(&r, "POST", "/v1/jobs", w.token[MEMBER],
		ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", w.team[OTHER]), NULL);
	CHECK(r.status >= 400);
	ty_http(&r, "POST", "/v1/jobs", w.token[VIEWER],
		ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", w.team[OWN]), NULL);
	CHECK(r.status >= 400);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", w.team[OTHER])), before);
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", w.team[OWN]), w.token[MEMBER],
		"{\"nominal_gpus\":1000}", NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/teams/%s", w.team[OWN]), s->admin, NULL, NULL);
	CHECK_JINT(r.json, "nominal_gpus", 64);
	ty_resp_free(&r);
}
