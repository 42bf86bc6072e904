/*
 * GET /v1/jobs/{id}/checkpoints: the job's checkpoints table, newest first,
 * with the one the next launch resumes from; scoped like every job read.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

static const char *dg(char c)
{
	char *s = ty_test_alloc(65);

	memset(s, c, 64);
	s[64] = 0;
	return s;
}

TY_TEST(checkpoints_newest_first_with_the_resume_point)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("ckpt", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	long long id = ty_mk_job(s->admin, team, NULL);
	const char *job = ty_test_strf("%lld", id);
	const char *path = ty_test_strf("/v1/jobs/%lld/checkpoints", id);
	struct ty_resp r = {0};

	/* none yet: nothing to resume from */
	ty_http(&r, "GET", path, viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 0);
	CHECK_JNULL(r.json, "resume_step");

	DB("INSERT INTO checkpoints (job_id, step, path, digest, bytes, files, node_id, attempt,"
	   " status, reason) VALUES"
	   " ($1, 100, '/c/step-100', $2, 1000, 2, 'n1', 1, 'valid', NULL),"
	   " ($1, 200, '/c/step-200', $3, 2000, 2, 'n1', 1, 'rejected',"
	   "  'MANIFEST.json has SHA-256 x, the launch names y'),"
	   " ($1, 300, '/c/step-300', NULL, 0, 0, 'n1', 2, 'torn', 'no MANIFEST.json (torn)')"
	   " RETURNING 1",
	   job, dg('1'), dg('2'));
	ty_http(&r, "GET", path, viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(r.json, "items")) == 3);
	/* the next launch names the newest valid one, not a newer rejected or torn one */
	CHECK_JINT(r.json, "resume_step", 100);
	CHECK_JINT(r.json, "items[0].step", 300);
	CHECK_JSTR(r.json, "items[0].status", "torn");
	CHECK_JNULL(r.json, "items[0].digest");
	CHECK_JSTR(r.json, "items[0].reason", "no MANIFEST.json (torn)");
	CHECK(json_is_false(ty_jpath(r.json, "items[0].resume")));
	CHECK_JSTR(r.json, "items[1].status", "rejected");
	CHECK_JSTR(r.json, "items[1].reason", "MANIFEST.json has SHA-256 x, the launch names y");
	CHECK_JINT(r.json, "items[2].step", 100);
	CHECK_JSTR(r.json, "items[2].status", "valid");
	CHECK_JSTR(r.json, "items[2].digest", dg('1'));
	CHECK_JSTR(r.json, "items[2].path", "/c/step-100");
	CHECK_JINT(r.json, "items[2].bytes", 1000);
	CHECK_JINT(r.json, "items[2].files", 2);
	CHECK_JSTR(r.json, "items[2].node", "n1");
	CHECK_JINT(r.json, "items[2].attempt", 1);
	CHECK_JTIME(r.json, "items[2].verified_at");
	CHECK_JNULL(r.json, "items[2].reason");
	CHECK(json_is_true(ty_jpath(r.json, "items[2].resume")));
	/* an ended job resumes from nothing: its checkpoints stay listed */
	DB("UPDATE jobs SET state = 'succeeded' WHERE id = $1 RETURNING 1", job);
	ty_http(&r, "GET", path, viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "resume_step");
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 3);
	CHECK(json_is_false(ty_jpath(r.json, "items[2].resume")));
	ty_resp_free(&r);
}

TY_TEST(checkpoints_of_no_job_another_team_or_no_token)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("ckpt-a", 8, -1), *other = ty_mk_team("ckpt-b", 8, -1);
	const char *member_b = ty_mk_token("member", other);
	long long id = ty_mk_job(s->admin, team, NULL);
	const char *path = ty_test_strf("/v1/jobs/%lld/checkpoints", id);
	static const char *const bad[] = {"/v1/jobs/987654321/checkpoints", "/v1/jobs/abc/checkpoints",
					  "/v1/jobs/-1/checkpoints", "/v1/jobs/0/checkpoints",
					  "/v1/jobs/99999999999999999999999/checkpoints"};
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("%s", bad[i]);
		ty_http(&r, "GET", bad[i], s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	}
	ty_test_context(NULL);
	/* another team's job: not found, as for every job read */
	ty_http(&r, "GET", path, member_b, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", path, NULL, NULL, NULL);
	CHECK_STATUS(&r, 401);
	ty_http(&r, "POST", path, s->admin, "{}", NULL);
	CHECK_STATUS(&r, 405);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}
