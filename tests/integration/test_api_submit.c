/*
 * Group commit of POST /v1/jobs (api/submit.c): concurrent submissions
 * share a batch, every answered one is durable, a bad row fails alone, keys
 * are settled inside and across batches, and a batch whose connection is
 * lost answers every client with an error.
 */
#include "api.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NCLIENTS 32

struct client {
	const char *token, *body, *const *headers;
	pthread_barrier_t *start;
	int status;
	long long id;
	char code[64];
};

static void *submit(void *p)
{
	struct client *c = p;
	struct ty_resp r = {0};

	if (c->start)
		pthread_barrier_wait(c->start);
	c->status = ty_http(&r, "POST", "/v1/jobs", c->token, c->body, c->headers);
	c->id = c->status == 201 || c->status == 200 ? ty_jint(r.json, "id") : 0;
	snprintf(c->code, sizeof(c->code), "%s",
		 c->status >= 400 && ty_jstr(r.json, "code") ? ty_jstr(r.json, "code") : "");
	ty_resp_free(&r);
	return NULL;
}

static const char *job_body(const char *team, const char *name)
{
	return ty_tmpl(ty_test_strf("{'team':'@T','name':'%s','command':['true'],"
				    "'resources':{'gpus_per_node':1}}",
				    name),
		       team);
}

TY_TEST(concurrent_submissions_are_all_durable_and_distinct)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("batch", 8, -1);
	struct client c[NCLIENTS];
	pthread_t th[NCLIENTS];
	pthread_barrier_t start;
	struct ty_resp r = {0};

	pthread_barrier_init(&start, NULL, NCLIENTS);
	for (int i = 0; i < NCLIENTS; i++) {
		c[i] = (struct client){s->admin, job_body(team, ty_test_strf("j%d", i)), NULL,
				       &start, 0, 0, ""};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, submit, &c[i]), 0);
	}
	for (int i = 0; i < NCLIENTS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < NCLIENTS; i++) {
		ty_test_context("client %d", i);
		CHECK_INT_EQ(c[i].status, 201);
		for (int j = 0; j < i; j++)
			CHECK(c[i].id != c[j].id);
		/* stored with its name, and its 'submitted' event (the scheduler's wake-up) */
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", c[i].id), s->admin, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK_JSTR(r.json, "name", ty_test_strf("j%d", i));
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events", c[i].id), s->admin, NULL,
			NULL);
		CHECK_STATUS(&r, 200);
		CHECK_JSTR(r.json, "events[0].type", "submitted");
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), NCLIENTS);
	ty_resp_free(&r);
}

/* ---- the batch itself, on a connection of the test's own ---- */

struct batch {
	struct ty_arena *arena;
	struct api_submission *x[8];
	int n;
};

static void add(struct batch *b, const char *team, const char *name, const char *key,
		const char *hash, const char *priority_class)
{
	struct api_submission *x = ty_arena_alloc(b->arena, sizeof(*x));

	REQUIRE(x);
	memset(x, 0, sizeof(*x));
	x->arena = b->arena;
	x->team = team;
	x->team_id = ty_arena_strdup(b->arena,
				     TY_STACK_SQL("SELECT id FROM teams WHERE name = $1", team));
	x->key = key;
	x->hash = hash;
	x->row = json_pack("{s:I, s:s, s:{s:[s], s:{s:i, s:i}}, s:s?, s:i, s:{}, s:s?, s:s?, "
			   "s:s}",
			   "team_id", (json_int_t)atoll(x->team_id), "name", name, "spec",
			   "command", "true", "resources", "nodes", 1, "gpus_per_node", 1,
			   "priority_class", priority_class, "priority", 0, "labels",
			   "idempotency_key", key, "request_sha256", key ? hash : NULL, "message",
			   "submitted by the test");
	REQUIRE(x->row);
	b->x[b->n++] = x;
}

static int run(struct batch *b)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_pg *pg = NULL;
	struct ty_err err = {0};
	int rc;

	REQUIRE_INT_EQ(ty_pg_connect(&pg, s->db_url, &err), 0);
	rc = api__submit_batch(pg, b->x, b->n);
	for (int i = 0; i < b->n; i++) {
		json_decref(b->x[i]->row);
		b->x[i]->row = NULL;
	}
	ty_pg_close(pg);
	return rc;
}

static int count(const char *team)
{
	return atoi(TY_STACK_SQL("SELECT count(*) FROM jobs j JOIN teams t ON t.id = j.team_id"
				 " WHERE t.name = $1",
				 team));
}

TY_TEST(a_bad_row_fails_alone)
{
	const char *team = ty_mk_team("batch-bad", 8, -1);
	struct batch b = {ty_arena_new(), {0}, 0};

	add(&b, team, "good-1", NULL, NULL, "normal");
	add(&b, team, "bad", NULL, NULL, NULL); /* priority_class is NOT NULL */
	add(&b, team, "good-2", NULL, NULL, "normal");
	CHECK_INT_EQ(run(&b), 0);
	CHECK_INT_EQ(b.x[0]->result, API_SUB_CREATED);
	CHECK_INT_EQ(b.x[1]->result, API_SUB_FAILED);
	CHECK_INT_EQ(b.x[1]->rc, TY_EINVAL);
	CHECK_INT_EQ(b.x[2]->result, API_SUB_CREATED);
	CHECK(b.x[0]->doc && strstr(b.x[0]->doc, "\"good-1\""));
	CHECK(b.x[2]->doc && strstr(b.x[2]->doc, "\"good-2\""));
	CHECK_INT_EQ(count(team), 2);
	/* each created job has its 'submitted' event, the failed one left nothing */
	CHECK_STR_EQ(TY_STACK_SQL("SELECT count(*) FROM job_events e JOIN jobs j ON j.id = e.job_id"
				  " JOIN teams t ON t.id = j.team_id WHERE t.name = $1"
				  " AND e.type = 'submitted'",
				  team),
		     "2");
	ty_arena_free(b.arena);
}

TY_TEST(one_key_twice_in_a_batch_creates_one_job)
{
	const char *team = ty_mk_team("batch-key", 8, -1), *other = ty_mk_team("batch-key2", 8, -1);
	struct batch b = {ty_arena_new(), {0}, 0};

	add(&b, team, "a", "k1", "h1", "normal");
	add(&b, team, "a", "k1", "h1", "normal");
	add(&b, team, "b", "k1", "h2", "normal"); /* a conflicting body: replayed, found different */
	add(&b, other, "a", "k1", "h1", "normal"); /* keys are per team */
	CHECK_INT_EQ(run(&b), 0);
	CHECK_INT_EQ(b.x[0]->result, API_SUB_CREATED);
	CHECK_INT_EQ(b.x[1]->result, API_SUB_REPLAY);
	CHECK_INT_EQ(b.x[2]->result, API_SUB_REPLAY);
	CHECK_INT_EQ(b.x[3]->result, API_SUB_CREATED);
	CHECK_INT_EQ(count(team), 1);
	CHECK_INT_EQ(count(other), 1);
	ty_arena_free(b.arena);
}

TY_TEST(a_key_from_an_earlier_batch_is_replayed)
{
	const char *team = ty_mk_team("batch-again", 8, -1);
	struct batch b = {ty_arena_new(), {0}, 0}, again = {ty_arena_new(), {0}, 0};

	add(&b, team, "a", "k", "h", "normal");
	CHECK_INT_EQ(run(&b), 0);
	CHECK_INT_EQ(b.x[0]->result, API_SUB_CREATED);
	/* what the handler's own look-up missed, the insert's ON CONFLICT finds */
	add(&again, team, "a", "k", "h", "normal");
	add(&again, team, "c", NULL, NULL, "normal");
	CHECK_INT_EQ(run(&again), 0);
	CHECK_INT_EQ(again.x[0]->result, API_SUB_REPLAY);
	CHECK_INT_EQ(again.x[1]->result, API_SUB_CREATED);
	CHECK_INT_EQ(count(team), 2);
	ty_arena_free(b.arena);
	ty_arena_free(again.arena);
}

/* The replays a client sees, inside a batch and across batches, over HTTP. */
TY_TEST(replays_over_http_inside_and_across_batches)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("batch-http", 8, -1);
	const char **hdr = ty_test_alloc(2 * sizeof(*hdr));
	struct client c[8];
	pthread_t th[8];
	pthread_barrier_t start;
	int created = 0;

	hdr[0] = ty_test_strf("Idempotency-Key: %s", ty_uniq("k"));
	pthread_barrier_init(&start, NULL, 8);
	for (int i = 0; i < 8; i++) {
		c[i] = (struct client){s->admin, job_body(team, "same"), hdr, &start, 0, 0, ""};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, submit, &c[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < 8; i++) {
		ty_test_context("client %d", i);
		CHECK(c[i].status == 201 || c[i].status == 200);
		created += c[i].status == 201;
		CHECK_INT_EQ(c[i].id, c[0].id);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(created, 1);
	/* later, alone: the same job; another body: 409 */
	c[0].start = NULL;
	submit(&c[0]);
	CHECK_INT_EQ(c[0].status, 200);
	CHECK_INT_EQ(c[0].id, c[1].id);
	c[0].body = job_body(team, "other");
	submit(&c[0]);
	CHECK_INT_EQ(c[0].status, 409);
	CHECK_STR_EQ(c[0].code, "idempotency_conflict");
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 1);
}

/*
 * The submitter's connection dies while its batch waits on a team row the
 * test holds: every client of that batch gets an error, and whatever was
 * acknowledged is stored. The next batch works on a new connection.
 */
TY_TEST(a_lost_connection_acknowledges_nothing_it_did_not_commit)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("batch-lost", 8, -1);
	PGconn *hold = PQconnectdb(s->db_url);
	struct client c[4];
	pthread_t th[4];
	const char *pid = "";
	int acked = 0, refused = 0;
	PGresult *res;

	/* a limit makes the batch lock the team's row */
	TY_STACK_SQL("UPDATE teams SET max_pending_jobs = 100 WHERE name = $1", team);
	REQUIRE(PQstatus(hold) == CONNECTION_OK);
	PQclear(PQexec(hold, "BEGIN"));
	res = PQexecParams(hold, "SELECT 1 FROM teams WHERE name = $1 FOR UPDATE", 1, NULL,
			   (const char *const[]){team}, NULL, NULL, 0);
	REQUIRE(PQresultStatus(res) == PGRES_TUPLES_OK);
	PQclear(res);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct client){s->admin, job_body(team, ty_test_strf("l%d", i)), NULL,
				       NULL, 0, 0, ""};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, submit, &c[i]), 0);
	}
	/* wait (bounded) until the submitter's batch waits on the lock */
	for (int i = 0; i < 500 && !*pid; i++) {
		pid = TY_STACK_SQL("SELECT pid::text FROM pg_stat_activity"
				   " WHERE application_name = 'trainyard-api submit'"
				   " AND wait_event_type = 'Lock'");
		if (!*pid)
			usleep(20 * 1000);
	}
	REQUIRE(*pid);
	TY_STACK_SQL("SELECT pg_terminate_backend($1::int)", pid);
	PQclear(PQexec(hold, "ROLLBACK"));
	PQfinish(hold);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 4; i++) {
		ty_test_context("client %d", i);
		if (c[i].status == 201) {
			acked++;
		} else {
			CHECK_INT_EQ(c[i].status, 503);
			CHECK_STR_EQ(c[i].code, "unavailable");
			refused++;
		}
	}
	ty_test_context(NULL);
	CHECK(refused >= 1);
	CHECK_INT_EQ(count(team), acked);
	/* and the next submission is written on a fresh connection */
	c[0].body = job_body(team, "after");
	submit(&c[0]);
	CHECK_INT_EQ(c[0].status, 201);
	CHECK_INT_EQ(count(team), acked + 1);
}
