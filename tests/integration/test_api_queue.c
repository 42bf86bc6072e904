/*
 * The queue and the scheduler's published state (docs/api.md "Queue", the
 * team's `usage` and the job's queue fields). No scheduler runs here: the
 * columns and rows it writes each cycle (jobs.pending_reason,
 * queue_position, reserved_until, preemptions; team_usage) are seeded with
 * SQL.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <curl/curl.h>
#include <libpq-fe.h>
#include <stdlib.h>
#include <string.h>

#define NOT_CONSIDERED "not yet considered by the scheduler"

/* ---- SQL on the stack's database ---- */

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

static const char *lld(long long v)
{
	return ty_test_strf("%lld", v);
}

/* The queue is global: a case that checks it whole starts from an empty one. */
static void empty_queue(void)
{
	DB("UPDATE jobs SET state = 'cancelled', finished_at = now() WHERE state = 'pending'");
}

/* Submit a job of nodes x gpn GPUs in a priority class; returns its id. */
static long long mk_job(const char *token, const char *team, const char *name, int nodes,
			int gpn, const char *pclass)
{
	struct ty_resp r = {0};
	long long id;

	ty_http(&r, "POST", "/v1/jobs", token,
		ty_test_jf("{'team':'%s','name':'%s','command':['python','train.py'],"
			   "'resources':{'nodes':%d,'gpus_per_node':%d},'priority_class':'%s'}",
			   team, name, nodes, gpn, pclass),
		NULL);
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	ty_resp_free(&r);
	return id;
}

/* What the scheduler publishes for a pending job; position 0 and reason NULL are SQL NULL. */
static void place(long long job, int position, const char *reason)
{
	DB("UPDATE jobs SET queue_position = NULLIF($2::int, 0), pending_reason = NULLIF($3, '')"
	   " WHERE id = $1::bigint",
	   lld(job), lld(position), reason ? reason : "");
}

static void usage(const char *team, double fair_share, double decayed_seconds, int in_use,
		  int borrowed, int lent, int pending)
{
	DB("INSERT INTO team_usage (team_id, fair_share, decayed_gpu_seconds, gpus_in_use,"
	   " gpus_borrowed, gpus_lent, pending_jobs)"
	   " SELECT id, $2::float8, $3::float8, $4::int, $5::int, $6::int, $7::int"
	   " FROM teams WHERE name = $1"
	   " ON CONFLICT (team_id) DO UPDATE SET fair_share = excluded.fair_share,"
	   " decayed_gpu_seconds = excluded.decayed_gpu_seconds,"
	   " gpus_in_use = excluded.gpus_in_use, gpus_borrowed = excluded.gpus_borrowed,"
	   " gpus_lent = excluded.gpus_lent, pending_jobs = excluded.pending_jobs,"
	   " updated_at = now()",
	   team, ty_test_strf("%.17g", fair_share), ty_test_strf("%.17g", decayed_seconds),
	   lld(in_use), lld(borrowed), lld(lent), lld(pending));
}

static const char *escape(const char *s)
{
	char *e = curl_easy_escape(NULL, s, 0);
	const char *out = ty_test_strf("%s", e);

	curl_free(e);
	return out;
}

/* The object's member names, sorted, joined with ','. */
static const char *keys(const json_t *obj)
{
	const char *names[64], *k;
	size_t n = 0;
	json_t *v;
	char *out = ty_test_strf("%s", "");

	json_object_foreach((json_t *)obj, k, v) {
		if (n < 64)
			names[n++] = k;
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			const char *t = names[j];

			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++)
		out = ty_test_strf("%s%s%s", out, i ? "," : "", names[i]);
	return out;
}

static double jnum(const json_t *root, const char *path)
{
	const json_t *v = ty_jpath(root, path);

	return json_is_number(v) ? json_number_value(v) : -1.0;
}

/*
 * Every entry of GET /v1/queue?QUERY for token, following next_cursor with
 * pages of `limit`; the items are appended to a new array the caller frees.
 */
static json_t *all_pages(const char *token, const char *query, int limit, int *pages)
{
	json_t *items = json_array();
	char *cursor = NULL;
	struct ty_resp r = {0};

	*pages = 0;
	for (;;) {
		const char *path =
		    ty_test_strf("/v1/queue?limit=%d%s%s%s%s", limit, *query ? "&" : "", query,
				 cursor ? "&cursor=" : "", cursor ? escape(cursor) : "");
		json_t *next;

		if (++*pages > 100) {
			FAIL("more than 100 pages");
			break;
		}
		ty_http(&r, "GET", path, token, NULL, NULL);
		if (!ty_check_status(&r, 200, __FILE__, __LINE__))
			break;
		CHECK(json_array_size(ty_jpath(r.json, "items")) <= (size_t)limit);
		json_array_extend(items, ty_jpath(r.json, "items"));
		next = ty_jpath(r.json, "next_cursor");
		CHECK(next != NULL && (json_is_null(next) || json_is_string(next)));
		free(cursor);
		cursor = json_is_string(next) ? strdup(json_string_value(next)) : NULL;
		if (!cursor)
			break;
	}
	free(cursor);
	ty_resp_free(&r);
	return items;
}

/* ---- the queue ---- */

TY_TEST(order_and_fields)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("qa", 64, -1), *b = ty_mk_team("qb", 64, -1);
	struct ty_resp r = {0};
	long long j1, j2, j3, j4, j5, gone;
	json_t *it;

	empty_queue();
	j1 = mk_job(s->admin, a, "one", 2, 8, "normal");
	j2 = mk_job(s->admin, b, "two", 1, 4, "high");
	j3 = mk_job(s->admin, a, "three", 1, 0, "low");
	j4 = mk_job(s->admin, a, "four", 4, 2, "scavenger");
	j5 = mk_job(s->admin, b, "five", 1, 1, "normal");
	gone = mk_job(s->admin, a, "gone", 1, 1, "normal");
	place(j3, 1, "waiting for 2 x 8 GPUs in one block");
	place(j2, 2, "behind higher-priority jobs");
	place(j1, 3, NULL); /* positioned, no reason */
	/* j4, j5 submitted since the last cycle: no position, after the rest by id */
	place(gone, 4, "stale");
	DB("UPDATE jobs SET reserved_until = '2031-01-02T03:04:05.678Z' WHERE id = $1::bigint",
	   lld(j3));
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", gone), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	usage(a, 0.71, 7200, 16, 0, 0, 3);

	ty_http(&r, "GET", "/v1/queue", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "next_cursor");
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 5);
	CHECK_JINT(r.json, "items[0].job", j3);
	CHECK_JINT(r.json, "items[1].job", j2);
	CHECK_JINT(r.json, "items[2].job", j1);
	CHECK_JINT(r.json, "items[3].job", j4);
	CHECK_JINT(r.json, "items[4].job", j5);
	CHECK_JINT(r.json, "items[0].position", 1);
	CHECK_JINT(r.json, "items[1].position", 2);
	CHECK_JINT(r.json, "items[2].position", 3);
	CHECK_JNULL(r.json, "items[3].position");
	CHECK_JNULL(r.json, "items[4].position");

	it = ty_jpath(r.json, "items[0]");
	CHECK_STR_EQ(keys(it), "estimate,estimated_start,fair_share,gpus,gpus_per_node,job,name,"
			       "nodes,position,priority,priority_class,reason,reserved_until,"
			       "submitted_at,team");
	CHECK_JNULL(it, "estimated_start"); /* the scheduler has not estimated it */
	CHECK_JNULL(it, "estimate");
	CHECK_JSTR(it, "team", a);
	CHECK_JSTR(it, "name", "three");
	CHECK_JSTR(it, "priority_class", "low");
	CHECK_JINT(it, "priority", 0);
	CHECK_JINT(it, "gpus", 0);
	CHECK_JINT(it, "nodes", 1);
	CHECK_JINT(it, "gpus_per_node", 0);
	CHECK_JTIME(it, "submitted_at");
	CHECK(jnum(it, "fair_share") == 0.71);
	CHECK_JSTR(it, "reason", "waiting for 2 x 8 GPUs in one block");
	CHECK_JSTR(it, "reserved_until", "2031-01-02T03:04:05.678Z");

	it = ty_jpath(r.json, "items[1]");
	CHECK_JSTR(it, "team", b);
	CHECK_JSTR(it, "priority_class", "high");
	CHECK_JINT(it, "gpus", 4);
	/* a team the scheduler has not published yet has the full fair share */
	CHECK(jnum(it, "fair_share") == 1.0);
	CHECK_JNULL(it, "reserved_until");

	it = ty_jpath(r.json, "items[2]");
	CHECK_JINT(it, "gpus", 16);
	CHECK_JINT(it, "nodes", 2);
	CHECK_JINT(it, "gpus_per_node", 8);
	CHECK_JSTR(it, "reason", NOT_CONSIDERED);
	CHECK_JSTR(r.json, "items[3].reason", NOT_CONSIDERED);
	CHECK_JINT(r.json, "items[3].gpus", 8);
	CHECK_JSTR(r.json, "items[3].priority_class", "scavenger");

	/* a job that left the queue is not in it, whatever its stale columns say */
	CHECK(!strstr(r.body, "stale"));
	ty_resp_free(&r);
}

TY_TEST(pagination_follows_queue_order)
{
	enum { N = 13 };
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("qpage", 64, -1);
	long long id[N], want[N];
	int pages, limits[] = {1, 4, 5, 13, 50};
	struct ty_resp r = {0};

	empty_queue();
	for (int i = 0; i < N; i++)
		id[i] = mk_job(s->admin, team, ty_test_strf("p%d", i), 1, 1, "normal");
	/* positions reverse the submission order for the first 9; 4 never positioned */
	for (int i = 0; i < 9; i++)
		place(id[i], 9 - i, "waiting");
	for (int i = 0; i < 9; i++)
		want[i] = id[8 - i];
	for (int i = 9; i < N; i++)
		want[i] = id[i];

	for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
		json_t *items;

		ty_test_context("limit=%d", limits[l]);
		items = all_pages(s->admin, "", limits[l], &pages);
		CHECK_INT_EQ(json_array_size(items), N);
		for (int i = 0; i < N && i < (int)json_array_size(items); i++)
			if (ty_jint(json_array_get(items, (size_t)i), "job") != want[i])
				FAIL("entry %d is job %lld, want %lld", i,
				     ty_jint(json_array_get(items, (size_t)i), "job"), want[i]);
		/* a full last page already says there is no more */
		CHECK_INT_EQ(pages, (N + limits[l] - 1) / limits[l]);
		json_decref(items);
	}
	ty_test_context(NULL);

	ty_http(&r, "GET", "/v1/queue?limit=13", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "next_cursor");
	ty_http(&r, "GET", "/v1/queue?limit=12", s->admin, NULL, NULL);
	CHECK(json_is_string(ty_jpath(r.json, "next_cursor")));

	/* default 50, maximum 500 */
	for (int i = 0; i < 40; i++)
		mk_job(s->admin, team, "more", 1, 1, "normal");
	ty_http(&r, "GET", "/v1/queue", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 50);
	CHECK(json_is_string(ty_jpath(r.json, "next_cursor")));
	ty_http(&r, "GET", "/v1/queue?limit=500", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), N + 40);
	CHECK_JNULL(r.json, "next_cursor");
	ty_resp_free(&r);
}

TY_TEST(team_filter)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("qfa", 8, -1), *b = ty_mk_team("qfb", 8, -1);
	struct ty_resp r = {0};
	long long a1, a2, b1;
	json_t *items;
	int pages;

	empty_queue();
	a1 = mk_job(s->admin, a, "a1", 1, 1, "normal");
	b1 = mk_job(s->admin, b, "b1", 1, 1, "normal");
	a2 = mk_job(s->admin, a, "a2", 1, 1, "normal");
	place(b1, 1, "first");
	place(a2, 2, "second");
	place(a1, 3, "third");

	/* positions stay global: a's jobs are 2nd and 3rd */
	ty_http(&r, "GET", ty_test_strf("/v1/queue?team=%s", a), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 2);
	CHECK_JINT(r.json, "items[0].job", a2);
	CHECK_JINT(r.json, "items[0].position", 2);
	CHECK_JINT(r.json, "items[1].job", a1);
	CHECK_JINT(r.json, "items[1].position", 3);
	ty_http(&r, "GET", ty_test_strf("/v1/queue?team=%s", b), s->admin, NULL, NULL);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 1);
	CHECK_JINT(r.json, "items[0].job", b1);
	ty_http(&r, "GET", "/v1/queue?team=no-such-team", s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 0);
	CHECK_JNULL(r.json, "next_cursor");

	/* the filter holds across pages */
	items = all_pages(s->admin, ty_test_strf("team=%s", a), 1, &pages);
	CHECK_INT_EQ(json_array_size(items), 2);
	CHECK_INT_EQ(pages, 2);
	CHECK_INT_EQ(ty_jint(json_array_get(items, 1), "job"), a1);
	json_decref(items);
	ty_resp_free(&r);
}

TY_TEST(other_teams_entries_show_no_ids)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("qva", 8, -1), *b = ty_mk_team("qvb", 8, -1);
	const char *member = ty_mk_token("member", a), *viewer = ty_mk_token("viewer", a);
	const char *tokens[] = {member, viewer};
	struct ty_resp r = {0};
	long long a1, b1, b2;

	empty_queue();
	b1 = mk_job(s->admin, b, "secret-b-one", 2, 4, "high");
	a1 = mk_job(member, a, "mine", 1, 2, "normal");
	b2 = mk_job(s->admin, b, "secret-b-two", 1, 1, "low");
	place(b1, 1, "preempting job 999999 of another team");
	place(a1, 2, "behind b");
	DB("UPDATE jobs SET reserved_until = now() + interval '1 hour' WHERE id = $1::bigint",
	   lld(b1));
	usage(b, 0.25, 0, 0, 0, 0, 2);

	for (int t = 0; t < 2; t++) {
		json_t *items, *it;
		size_t i;

		ty_test_context("%s token", t ? "viewer" : "member");
		ty_http(&r, "GET", "/v1/queue", tokens[t], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		items = ty_jpath(r.json, "items");
		REQUIRE_INT_EQ(json_array_size(items), 3);
		/* the other team's entries: where they stand and what they ask for */
		CHECK_JINT(r.json, "items[0].position", 1);
		CHECK_JNULL(r.json, "items[0].job");
		CHECK_JNULL(r.json, "items[0].name");
		CHECK_JNULL(r.json, "items[0].reason");
		CHECK_JSTR(r.json, "items[0].team", b);
		CHECK_JSTR(r.json, "items[0].priority_class", "high");
		CHECK_JINT(r.json, "items[0].gpus", 8);
		CHECK_JTIME(r.json, "items[0].submitted_at");
		CHECK_JTIME(r.json, "items[0].reserved_until");
		CHECK(jnum(ty_jpath(r.json, "items[0]"), "fair_share") == 0.25);
		/* its own, in full */
		CHECK_JINT(r.json, "items[1].job", a1);
		CHECK_JSTR(r.json, "items[1].name", "mine");
		CHECK_JSTR(r.json, "items[1].reason", "behind b");
		CHECK_JNULL(r.json, "items[2].position");
		CHECK_JNULL(r.json, "items[2].job");
		CHECK_JNULL(r.json, "items[2].reason");
		/* nothing that names the other team's jobs, anywhere */
		json_array_foreach(items, i, it) {
			CHECK(ty_jint(it, "job") != b1 && ty_jint(it, "job") != b2);
		}
		CHECK(!strstr(r.body, "secret-b"));
		CHECK(!strstr(r.body, "999999"));
		CHECK(!ty_jhas_int(r.json, b1) && !ty_jhas_int(r.json, b2));

		/* filtering by the other team works, and hides the same */
		ty_http(&r, "GET", ty_test_strf("/v1/queue?team=%s", b), tokens[t], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 2);
		CHECK_JNULL(r.json, "items[0].job");
		CHECK_JNULL(r.json, "items[1].job");
		CHECK(!strstr(r.body, "secret-b"));
	}
	ty_test_context(NULL);

	/* an admin sees everything */
	ty_http(&r, "GET", "/v1/queue", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "items[0].job", b1);
	CHECK_JSTR(r.json, "items[0].name", "secret-b-one");
	CHECK_JSTR(r.json, "items[0].reason", "preempting job 999999 of another team");
	CHECK_JINT(r.json, "items[2].job", b2);
	ty_resp_free(&r);
}

/*
 * The scheduler's texts name jobs ("waiting for job 57 to be preempted"),
 * often of other teams: members and viewers see those as "a job of another
 * team", wherever the text shows (reason, events, attempts).
 */
TY_TEST(other_teams_job_ids_in_texts_are_redacted)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("qra", 8, -1), *b = ty_mk_team("qrb", 8, -1);
	const char *member = ty_mk_token("member", a), *viewer = ty_mk_token("viewer", a);
	const char *tokens[] = {member, viewer};
	const char *reason, *hidden, *msg, *hidden_msg;
	struct ty_resp r = {0};
	long long a1, a2, b1;

	empty_queue();
	a1 = mk_job(s->admin, a, "a1", 1, 1, "normal");
	b1 = mk_job(s->admin, b, "b1", 1, 1, "high");
	a2 = mk_job(s->admin, a, "a2", 1, 1, "normal");
	reason = ty_test_strf("waiting for job %lld to be preempted, then Job %lld", b1, a2);
	hidden = ty_test_strf("waiting for a job of another team to be preempted, then Job %lld",
			      a2);
	place(a1, 1, reason);
	msg = ty_test_strf("attempt 1 preempted to place job %lld (team %s); job %lld next", b1,
			   b, a2);
	hidden_msg = ty_test_strf("attempt 1 preempted to place a job of another team (team %s); "
				  "job %lld next",
				  b, a2);
	DB("SELECT ty_job_event($1::bigint, 'preempting', 'pending', $2,"
	   " jsonb_build_object('attempt', 1, 'preempted_for', $3::bigint, 'signal', 'SIGUSR1'))",
	   lld(a1), msg, lld(b1));
	DB("SELECT ty_job_event($1::bigint, 'preempting', 'pending', 'for our own',"
	   " jsonb_build_object('preempted_for', $2::bigint))",
	   lld(a1), lld(a2));
	DB("INSERT INTO nodes (id, address, gpus, boot_id) VALUES ('qr-node', '10.9.9.9', 8, 'b')"
	   " ON CONFLICT DO NOTHING");
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch, failure_class, message, ended_at)"
	   " VALUES ($1::bigint, 1, 'failed', 1, 'qr-node', '10.9.9.9', 29400, 1, 1, '{}',"
	   " 'preempted', $2, now())",
	   lld(a1), msg);

	for (int t = 0; t < 2; t++) {
		ty_test_context("%s token", t ? "viewer" : "member");
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", a1), tokens[t], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JSTR(r.json, "pending_reason", hidden);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&state=pending", a), tokens[t],
			NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JINT(r.json, "items[1].id", a1);
		CHECK_JSTR(r.json, "items[1].pending_reason", hidden);
		ty_http(&r, "GET", "/v1/queue", tokens[t], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JINT(r.json, "items[0].job", a1);
		CHECK_JSTR(r.json, "items[0].reason", hidden);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", a1), tokens[t], NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JSTR(r.json, "events[1].message", hidden_msg);
		CHECK_JNULL(r.json, "events[1].data.preempted_for");
		CHECK_JSTR(r.json, "events[1].data.signal", "SIGUSR1");
		CHECK_JINT(r.json, "events[2].data.preempted_for", a2);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", a1), tokens[t], NULL,
			NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JSTR(r.json, "items[0].message", hidden_msg);
		CHECK(!strstr(r.body, ty_test_strf("job %lld ", b1)));
	}
	ty_test_context(NULL);

	/* admins see the texts as written */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", a1), s->admin, NULL, NULL);
	CHECK_JSTR(r.json, "pending_reason", reason);
	ty_http(&r, "GET", "/v1/queue", s->admin, NULL, NULL);
	CHECK_JSTR(r.json, "items[0].reason", reason);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", a1), s->admin, NULL, NULL);
	CHECK_JSTR(r.json, "events[1].message", msg);
	CHECK_JINT(r.json, "events[1].data.preempted_for", b1);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", a1), s->admin, NULL, NULL);
	CHECK_JSTR(r.json, "items[0].message", msg);
	ty_resp_free(&r);
}

TY_TEST(authentication_required)
{
	struct ty_resp r = {0};

	ty_stack_get();
	ty_http(&r, "GET", "/v1/queue", NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "GET", "/v1/queue", "ty_not_a_real_token", NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "POST", "/v1/queue", ty_stack_get()->admin, "{}", NULL);
	CHECK_PROBLEM(&r, 405, "method_not_allowed", NULL);
	ty_resp_free(&r);
}

TY_TEST(bad_parameters)
{
	static const struct {
		const char *query, *field;
	} rows[] = {
	    {"limit=0", "limit"},
	    {"limit=501", "limit"},
	    {"limit=abc", "limit"},
	    {"limit=-1", "limit"},
	    {"limit=", "limit"},
	    {"limit=1.5", "limit"},
	    {"cursor=", "cursor"},
	    {"cursor=abc", "cursor"},
	    {"cursor=12", "cursor"},
	    {"cursor=1.", "cursor"},
	    {"cursor=.1", "cursor"},
	    {"cursor=0.1", "cursor"},
	    {"cursor=1.0", "cursor"},
	    {"cursor=1.-1", "cursor"},
	    {"cursor=-1.1", "cursor"},
	    {"cursor=%2B1.1", "cursor"},
	    {"cursor=2147483648.1", "cursor"},
	    {"cursor=1.2.3", "cursor"},
	    {"cursor=99999999999999999999.1", "cursor"},
	    {"team=", "team"},
	    {"team=Bad_Name", "team"},
	    {"team=%FF", "team"},
	    {"team=-a", "team"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("qbad", 1, -1);
	const char *viewer = ty_mk_token("viewer", team);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/queue?%s", rows[i].query), s->admin, NULL,
			NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
		ty_http(&r, "GET", ty_test_strf("/v1/queue?%s", rows[i].query), viewer, NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
	}
	ty_test_context(NULL);
	/* the largest key (a never-positioned job) is a valid cursor */
	ty_http(&r, "GET", "/v1/queue?cursor=2147483647.1", s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

/* ---- the job object's queue fields ---- */

TY_TEST(job_queue_fields)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("qjob", 16, -1);
	const char *path;
	struct ty_resp r = {0};
	long long j;

	j = mk_job(s->admin, team, "fields", 1, 8, "normal");
	path = ty_test_strf("/v1/jobs/%lld", j);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "pending_reason", NOT_CONSIDERED);
	CHECK_JNULL(r.json, "queue_position");
	CHECK_JNULL(r.json, "reserved_until");
	CHECK_JINT(r.json, "preemptions", 0);

	place(j, 7, "waiting for 8 GPUs on one node");
	DB("UPDATE jobs SET reserved_until = '2031-05-06T07:08:09.010Z', preemptions = 2"
	   " WHERE id = $1::bigint",
	   lld(j));
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "pending_reason", "waiting for 8 GPUs on one node");
	CHECK_JINT(r.json, "queue_position", 7);
	CHECK_JSTR(r.json, "reserved_until", "2031-05-06T07:08:09.010Z");
	CHECK_JINT(r.json, "preemptions", 2);
	/* the list shows the same object */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s", team), s->admin, NULL, NULL);
	CHECK_JINT(r.json, "items[0].queue_position", 7);
	CHECK_JSTR(r.json, "items[0].pending_reason", "waiting for 8 GPUs on one node");

	/* a job out of the queue has no queue fields, before the scheduler clears them */
	ty_http(&r, "POST", ty_test_strf("%s/cancel", path), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "cancelled");
	CHECK_JNULL(r.json, "pending_reason");
	CHECK_JNULL(r.json, "queue_position");
	CHECK_JNULL(r.json, "reserved_until");
	CHECK_JINT(r.json, "preemptions", 2);
	ty_resp_free(&r);
}

/*
 * Start-time estimates (docs/api.md, "Start-time estimates"): what the
 * scheduler wrote, in the queue entry and GET /v1/jobs/{id}, the ids of
 * other teams' jobs it waits for hidden, gone once the job leaves pending.
 */
TY_TEST(estimates_shown_and_redacted)
{
	const struct ty_stack *s = ty_stack_get();
	const char *a = ty_mk_team("qea", 8, -1), *b = ty_mk_team("qeb", 8, -1);
	const char *member = ty_mk_token("member", a);
	const char *path;
	struct ty_resp r = {0};
	long long a1, a2, b1;

	empty_queue();
	a1 = mk_job(member, a, "est", 1, 2, "normal");
	a2 = mk_job(member, a, "est-far", 1, 2, "normal");
	b1 = mk_job(s->admin, b, "other", 1, 1, "normal");
	place(a1, 1, "waiting for 2 GPUs on one node");
	place(a2, 2, "behind");
	DB("UPDATE jobs SET estimated_start = '2031-01-02T03:04:05.678Z',"
	   " estimate_basis = jsonb_build_object('kind', 'estimated', 'waits_for',"
	   " jsonb_build_array($2::bigint, $3::bigint), 'waits_for_count', 3,"
	   " 'runtime_source', 'history') WHERE id = $1::bigint",
	   lld(a1), lld(b1), lld(a2));
	DB("UPDATE jobs SET estimate_basis = '{\"kind\": \"beyond_horizon\","
	   " \"horizon\": \"2031-01-09T00:00:00.000Z\"}' WHERE id = $1::bigint",
	   lld(a2));

	/* the admin sees every id */
	ty_http(&r, "GET", "/v1/queue", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "items[0].estimated_start", "2031-01-02T03:04:05.678Z");
	CHECK_JSTR(r.json, "items[0].estimate.kind", "estimated");
	CHECK_JINT(r.json, "items[0].estimate.waits_for[0]", b1);
	CHECK_JINT(r.json, "items[0].estimate.waits_for[1]", a2);
	CHECK_JINT(r.json, "items[0].estimate.waits_for_count", 3);
	CHECK_JSTR(r.json, "items[0].estimate.runtime_source", "history");
	CHECK_JNULL(r.json, "items[1].estimated_start");
	CHECK_JSTR(r.json, "items[1].estimate.kind", "beyond_horizon");
	CHECK_JSTR(r.json, "items[1].estimate.horizon", "2031-01-09T00:00:00.000Z");

	/* team a's member: team b's job is not named */
	ty_http(&r, "GET", "/v1/queue", member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "items[0].estimate.waits_for[0]");
	CHECK_JINT(r.json, "items[0].estimate.waits_for[1]", a2);
	CHECK(!ty_jhas_int(r.json, b1));
	path = ty_test_strf("/v1/jobs/%lld", a1);
	ty_http(&r, "GET", path, member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "estimated_start", "2031-01-02T03:04:05.678Z");
	CHECK_JNULL(r.json, "estimate.waits_for[0]");
	CHECK_JINT(r.json, "estimate.waits_for[1]", a2);
	CHECK_JSTR(r.json, "estimate.runtime_source", "history");
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_JINT(r.json, "estimate.waits_for[0]", b1);

	/* leaving pending clears the columns (migration 0035's trigger) */
	ty_http(&r, "POST", ty_test_strf("%s/cancel", path), member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ty_http(&r, "GET", path, member, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JNULL(r.json, "estimated_start");
	CHECK_JNULL(r.json, "estimate");
	CHECK_STR_EQ(DB("SELECT coalesce(estimated_start::text, 'null') || ' ' ||"
					" coalesce(estimate_basis::text, 'null') FROM jobs"
					" WHERE id = $1::bigint",
					lld(a1)),
		     "null null");
	ty_resp_free(&r);
}

/* ---- the team's usage ---- */

static void check_usage_zero(const json_t *team)
{
	const json_t *u = ty_jpath(team, "usage");

	CHECK_STR_EQ(keys(u), "cpus_in_use,decayed_gpu_hours,fair_share,gpus_borrowed,gpus_in_use,"
			      "gpus_lent,memory_mb_in_use,pending_jobs,updated_at");
	CHECK_JINT(u, "gpus_in_use", 0);
	CHECK_JINT(u, "cpus_in_use", 0);
	CHECK_JINT(u, "memory_mb_in_use", 0);
	CHECK_JINT(u, "gpus_borrowed", 0);
	CHECK_JINT(u, "gpus_lent", 0);
	CHECK_JINT(u, "pending_jobs", 0);
	CHECK(jnum(u, "decayed_gpu_hours") == 0.0);
	CHECK(jnum(u, "fair_share") == 1.0);
	CHECK_JNULL(u, "updated_at");
}

TY_TEST(team_usage)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq("quse");
	const char *path = ty_test_strf("/v1/teams/%s", name);
	const char *viewer;
	struct ty_resp r = {0};
	json_t *it;
	size_t i;
	bool found = false;

	/* before the scheduler publishes anything: zeros, full fair share */
	ty_http(&r, "POST", "/v1/teams", s->admin, ty_tmpl("{'name':'@T','nominal_gpus':8}", name),
		NULL);
	REQUIRE_STATUS(&r, 201);
	check_usage_zero(r.json);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	check_usage_zero(r.json);

	usage(name, 0.5, 5400, 12, 4, 0, 3);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "usage.gpus_in_use", 12);
	CHECK_JINT(r.json, "usage.gpus_borrowed", 4);
	CHECK_JINT(r.json, "usage.gpus_lent", 0);
	CHECK_JINT(r.json, "usage.pending_jobs", 3);
	CHECK(jnum(r.json, "usage.decayed_gpu_hours") == 1.5);
	CHECK(jnum(r.json, "usage.fair_share") == 0.5);
	CHECK_JTIME(r.json, "usage.updated_at");

	/* hours to the nearest 0.001 */
	usage(name, 0.125, 1000, 0, 0, 6, 0);
	ty_http(&r, "PATCH", path, s->admin, "{\"weight\":2}", NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(jnum(r.json, "usage.decayed_gpu_hours") == 0.278);
	CHECK(jnum(r.json, "usage.fair_share") == 0.125);
	CHECK_JINT(r.json, "usage.gpus_lent", 6);

	ty_http(&r, "GET", "/v1/teams", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(ty_jpath(r.json, "items"), i, it) {
		if (!json_is_object(ty_jpath(it, "usage")))
			FAIL("team '%s' in the list has no usage", ty_jstr(it, "name"));
		if (ty_jstr(it, "name") && !strcmp(ty_jstr(it, "name"), name)) {
			found = true;
			CHECK_JINT(it, "usage.gpus_lent", 6);
		}
	}
	CHECK(found);

	/* usage is read-only */
	ty_http(&r, "PATCH", path, s->admin, "{\"usage\":{\"fair_share\":1}}", NULL);
	CHECK_PROBLEM(&r, 400, "unknown_field", "usage");
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_tmpl("{'name':'@T-x','nominal_gpus':8,'usage':{}}", name), NULL);
	CHECK_PROBLEM(&r, 400, "unknown_field", "usage");

	/* a viewer sees its own team's usage */
	viewer = ty_mk_token("viewer", name);
	ty_http(&r, "GET", "/v1/teams", viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 1);
	CHECK(jnum(r.json, "items[0].usage.fair_share") == 0.125);
	ty_resp_free(&r);
}

/* ---- the description ---- */

TY_TEST(openapi_describes_the_queue)
{
	static const char *const paths[] = {
	    "paths./v1/queue.get",
	    "components.schemas.QueueEntry",
	    "components.schemas.QueueList",
	    "components.schemas.TeamUsage",
	    "components.schemas.Team.properties.usage",
	    "components.schemas.Job.properties.pending_reason",
	    "components.schemas.Job.properties.queue_position",
	    "components.schemas.Job.properties.reserved_until",
	    "components.schemas.Job.properties.preemptions",
	    "components.schemas.Job.properties.estimated_start",
	    "components.schemas.Job.properties.estimate",
	    "components.schemas.Estimate",
	};
	struct ty_resp r = {0};

	ty_stack_get();
	ty_http(&r, "GET", "/openapi.json", NULL, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		const char *p = paths[i];
		const json_t *v = r.json;
		char part[128];

		/* path segments split on '.', except the one inside "/v1/queue" */
		while (*p && v) {
			size_t n = strcspn(p, ".");

			if (p[0] == '/')
				n = strcspn(p + 1, ".") + 1;
			snprintf(part, sizeof(part), "%.*s", (int)n, p);
			v = json_object_get(v, part);
			p += n + (p[n] == '.');
		}
		if (!json_is_object(v))
			FAIL("openapi.json has no %s", paths[i]);
	}
	ty_resp_free(&r);
}
