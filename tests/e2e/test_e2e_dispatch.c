/*
 * Jobs through the whole stack: API → PostgreSQL → scheduler → Kafka →
 * executors → real processes → events → PostgreSQL → API.
 */
#include "e2e.h"
#include "ty_buf.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every rank writes one file named after its rank and its pid, so a rank
 * that ran twice shows up as two files. */
#define RECORD_RANK                                                                      \
	"echo \\\"$RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT $NODE_RANK "   \
	"$NNODES $LOCAL_WORLD_SIZE $TRAINYARD_JOB_ID $TRAINYARD_ATTEMPT\\\" > "          \
	"$OUTDIR/rank-$RANK.$$"

static const char *only_file(struct e2e *e, const char *prefix)
{
	/* the single file with this prefix, or NULL */
	const char *cmd = ty_test_strf("ls %s | grep '^%s' | head -n 2", e->out, prefix);
	FILE *p = popen(cmd, "r");
	char a[256] = "", b[256] = "";

	if (!p)
		return NULL;
	if (!fgets(a, sizeof(a), p))
		a[0] = '\0';
	if (!fgets(b, sizeof(b), p))
		b[0] = '\0';
	pclose(p);
	if (!a[0] || b[0])
		return NULL;
	a[strcspn(a, "\n")] = '\0';
	return ty_test_strf("%s", a);
}

TY_TEST(two_nodes_two_ranks_each_run_exactly_once)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e, "[\"/bin/sh\",\"-c\",\"" RECORD_RANK "\"]",
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":2}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	json_t *att = e2e_attempts(e, id), *a0 = json_array_get(att, 0);
	const char *master = ty_jstr(a0, "master_addr");
	long long port = ty_jint(a0, "master_port");

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_INT_EQ(ty_jint(a0, "world_size"), 4);
	/* these executors run --isolation none, and their nodes say so */
	{
		struct ty_resp r = {0};

		ty_http(&r, "GET", "/v1/nodes/node-a", e->token, NULL, NULL);
		CHECK_STR_EQ(ty_jstr(r.json, "isolation"), "none");
		ty_resp_free(&r);
	}
	CHECK(master && (!strcmp(master, "127.0.0.2") || !strcmp(master, "127.0.0.3")));
	CHECK(port >= 29500 && port <= 29999);
	for (int rank = 0; rank < 4; rank++) {
		const char *f = only_file(e, ty_test_strf("rank-%d.", rank));
		int r = -1, ws = -1, lr = -1, mp = -1, nr = -1, nn = -1, lws = -1, jid = -1, at = -1;
		char ma[64] = "";

		ty_test_context("rank %d", rank);
		CHECK_INT_EQ(e2e_count_files(e, ty_test_strf("rank-%d.", rank)), 1);
		if (!f)
			continue;
		CHECK_INT_EQ(sscanf(e2e_read(e, f), "%d %d %d %63s %d %d %d %d %d %d", &r, &ws, &lr, ma,
				    &mp, &nr, &nn, &lws, &jid, &at),
			     10);
		CHECK_INT_EQ(r, rank);
		CHECK_INT_EQ(ws, 4);
		CHECK_INT_EQ(lr, rank % 2);
		CHECK_INT_EQ(nr, rank / 2);
		CHECK_INT_EQ(nn, 2);
		CHECK_INT_EQ(lws, 2);
		CHECK_STR_EQ(ma, master);
		CHECK_INT_EQ(mp, port);
		CHECK_INT_EQ(jid, id);
		CHECK_INT_EQ(at, 1);
		CHECK_INT_EQ(ty_jint(a0, ty_test_strf("ranks[%d].exit_code", rank)), 0);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(json_array_size(json_object_get(a0, "ranks")), 4);
	json_decref(job);
	json_decref(att);
}

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	return ty_buf_append(arg, p, sz * n) ? 0 : sz * n;
}

/* GET url straight from a node, with this Authorization value (NULL: none); the status. */
static long node_get(const char *url, const char *authorization, char **body)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = NULL;
	struct ty_buf b = TY_BUF_INIT;
	long status = 0;

	REQUIRE(c != NULL);
	if (authorization)
		h = curl_slist_append(NULL, ty_test_strf("Authorization: %s", authorization));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	*body = ty_test_strf("%.*s", (int)b.len, b.data ? b.data : "");
	ty_buf_free(&b);
	return status;
}

TY_TEST(rank_logs_are_read_through_the_api_not_from_the_node)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e, "[\"/bin/sh\",\"-c\",\"echo private words of rank $RANK\"]",
				  "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	struct ty_resp r = {0};
	const char *log_url, *url;
	char *body;

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	json_decref(job);
	/* an authorised user reads it through the API's relay */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=0", id), e->token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_STR_EQ(r.body, "private words of rank 0\n");
	ty_resp_free(&r);
	/* someone on the network who asks the node itself reads nothing */
	log_url = TY_STACK_SQL("SELECT n.log_url FROM ranks k JOIN nodes n ON n.id = k.node_id"
			       " WHERE k.job_id = $1 AND k.rank = 0",
			       ty_test_strf("%lld", id));
	REQUIRE(strncmp(log_url, "http://", 7) == 0);
	url = ty_test_strf("%s/logs/%lld/1/0", log_url, id);
	CHECK_INT_EQ(node_get(url, NULL, &body), 401);
	CHECK(strstr(body, "a log credential is required") != NULL);
	CHECK_INT_EQ(node_get(url, ty_test_strf("Bearer %s", e->token), &body), 401);
	CHECK(strstr(body, "malformed") != NULL);
	CHECK(strstr(body, "private words") == NULL);
	/* the node's metrics stay open to Prometheus, and count the refusals */
	CHECK_INT_EQ(node_get(ty_test_strf("%s/metrics", log_url), NULL, &body), 200);
	CHECK(strstr(body, "trainyard_executor_log_requests_refused_total{reason=\"missing\"}") !=
	      NULL);
}

TY_TEST(ranks_report_trial_metrics_with_their_attempts_token)
{
	struct e2e *e = e2e_get();
	const char *client = e2e_source_path("worker/examples/trainyard_metrics.py");
	/* every rank reports its own step; rank 1 also tries another job's URL */
	long long id = e2e_submit(
	    e,
	    ty_test_strf("[\"/bin/sh\",\"-c\",\"/usr/bin/python3 %s --step $RANK "
			 "loss=$((RANK + 1)).5 && if [ $RANK = 1 ]; then /usr/bin/python3 %s "
			 "--url ${TRAINYARD_METRICS_URL%%/*/metrics}/%lld/metrics --step 9 x=1 "
			 "2> $OUTDIR/other.err; echo $? > $OUTDIR/other.rc; fi\"]",
			 client, client, 987654321LL),
	    "\"resources\":{\"nodes\":1,\"gpus_per_node\":2}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	struct ty_resp r = {0};

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", id), e->token, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 2);
	for (int rank = 0; rank < 2; rank++) {
		ty_test_context("rank %d", rank);
		CHECK_JINT(r.json, ty_test_strf("items[%d].step", rank), rank);
		CHECK_JINT(r.json, ty_test_strf("items[%d].attempt", rank), 1);
		CHECK(json_number_value(ty_jpath(r.json, ty_test_strf("items[%d].metrics.loss",
									 rank))) == rank + 1.5);
	}
	ty_test_context(NULL);
	/* the token is this job's only: the client exits 1 with the API's reason */
	CHECK_STR_EQ(e2e_read(e, "other.rc"), "1\n");
	CHECK(e2e_read(e, "other.err") && strstr(e2e_read(e, "other.err"), "HTTP 403") &&
	      strstr(e2e_read(e, "other.err"), ty_test_strf("for job %lld only", id)));
	/* and it is never written to a daemon's log */
	{
		const char *launch = ty_stack_sql(
		    "SELECT launch->>'metrics_token' FROM attempts WHERE job_id = $1::bigint",
		    ty_test_strf("%lld", id), (const char *)NULL);
		const struct e2e_secret secret = {"trial metrics token", launch};

		REQUIRE(launch && strncmp(launch, "tym_", 4) == 0);
		CHECK(e2e_assert_no_secret_in_logs(e, &secret, 1) >= 4);
	}
	ty_resp_free(&r);
	json_decref(job);
}

TY_TEST(a_failing_rank_stops_the_whole_gang)
{
	struct e2e *e = e2e_get();
	/* rank 3 fails after a moment; the others would sleep for 5 minutes */
	long long id = e2e_submit(
		e,
		"[\"/bin/sh\",\"-c\",\"echo $$ > $OUTDIR/pid-$RANK; if [ $RANK = 3 ]; then sleep 1; "
		"exit 3; fi; exec sleep 300\"]",
		"\"resources\":{\"nodes\":2,\"gpus_per_node\":2},\"retry\":{\"user\":0}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	json_t *att = e2e_attempts(e, id), *a0 = json_array_get(att, 0);

	CHECK_STR_EQ(ty_jstr(job, "state"), "failed");
	CHECK_STR_EQ(ty_jstr(job, "failure_class"), "user");
	CHECK_STR_EQ(ty_jstr(a0, "failure_class"), "user");
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_INT_EQ(e2e_count_files(e, "pid-"), 4);
	/* the gang is gone: give the last SIGKILLs a moment to land */
	for (int i = 0; i < 50 && e2e_any_alive(e, "pid-"); i++)
		usleep(100 * 1000);
	CHECK(!e2e_any_alive(e, "pid-"));
	for (int rank = 0; rank < 4; rank++) {
		json_t *k = ty_jpath(a0, ty_test_strf("ranks[%d]", rank));

		ty_test_context("rank %d", rank);
		if (rank == 3)
			CHECK_INT_EQ(ty_jint(k, "exit_code"), 3);
		else
			CHECK(ty_jint(k, "signal") != 0 || ty_jint(k, "exit_code") != 0);
	}
	json_decref(job);
	json_decref(att);
}

TY_TEST(cancel_stops_a_running_job)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e,
				  "[\"/bin/sh\",\"-c\",\"echo $$ > $OUTDIR/pid-$RANK; exec sleep 300\"]",
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	struct ty_resp r = {0};
	json_t *job;

	json_decref(e2e_wait_state(e, id, "running", 60000));
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), e->token, NULL, NULL);
	CHECK_INT_EQ(r.status, 200);
	ty_resp_free(&r);
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 30000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "cancelled");
	for (int i = 0; i < 50 && e2e_any_alive(e, "pid-"); i++)
		usleep(100 * 1000);
	CHECK(!e2e_any_alive(e, "pid-"));
	json_decref(job);
}

TY_TEST(concurrent_jobs_on_one_node_get_different_ports)
{
	struct e2e *e = e2e_get();
	const char *cmd = "[\"/bin/sh\",\"-c\",\"sleep 3\"]";
	long long a = e2e_submit(e, cmd, "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	long long b = e2e_submit(e, cmd, "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	json_t *ja, *jb, *aa, *ab;

	json_decref(e2e_wait_state(e, a, "running", 60000));
	json_decref(e2e_wait_state(e, b, "running", 60000));
	aa = e2e_attempts(e, a);
	ab = e2e_attempts(e, b);
	/* both gangs span both nodes, so both masters live on one of them */
	REQUIRE_STR_EQ(ty_jstr(json_array_get(aa, 0), "master_addr"),
		       ty_jstr(json_array_get(ab, 0), "master_addr"));
	CHECK(ty_jint(json_array_get(aa, 0), "master_port") !=
	      ty_jint(json_array_get(ab, 0), "master_port"));
	ja = e2e_wait_state(e, a, "succeeded,failed,cancelled", 60000);
	jb = e2e_wait_state(e, b, "succeeded,failed,cancelled", 60000);
	CHECK_STR_EQ(ty_jstr(ja, "state"), "succeeded");
	CHECK_STR_EQ(ty_jstr(jb, "state"), "succeeded");
	json_decref(ja);
	json_decref(jb);
	json_decref(aa);
	json_decref(ab);
}

TY_TEST(scheduler_restart_mid_job_launches_nothing_twice)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e, "[\"/bin/sh\",\"-c\",\"" RECORD_RANK "; sleep 3\"]",
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	json_t *job;

	json_decref(e2e_wait_state(e, id, "starting,running", 60000));
	ty_test_daemon_kill(e->sched[0]);
	usleep(500 * 1000);
	e2e_start_scheduler(e, 0);
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(ty_jint(job, "attempt"), 1);
	CHECK_INT_EQ(e2e_count_files(e, "rank-0."), 1);
	CHECK_INT_EQ(e2e_count_files(e, "rank-1."), 1);
	json_decref(job);
}

TY_TEST(executor_restart_mid_job_fails_the_attempt_and_the_retry_succeeds)
{
	struct e2e *e = e2e_get();
	/* the first attempt sleeps long; the second finishes at once */
	long long id = e2e_submit(
		e,
		"[\"/bin/sh\",\"-c\",\"echo $$ > $OUTDIR/pid-$TRAINYARD_ATTEMPT-$RANK; "
		"if [ $TRAINYARD_ATTEMPT = 1 ]; then exec sleep 300; fi\"]",
		"\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"retry\":{\"system\":2}");
	json_t *job, *att;

	json_decref(e2e_wait_state(e, id, "running", 60000));
	ty_test_daemon_kill(e->exec[1]);
	e2e_start_executor(e, 1);
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	att = e2e_attempts(e, id);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(json_array_get(att, 0), "failure_class"), "system");
	CHECK(!e2e_any_alive(e, "pid-1-"));
	json_decref(job);
	json_decref(att);
}

TY_TEST(a_lost_node_fails_its_attempt_as_node_lost)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e,
				  "[\"/bin/sh\",\"-c\",\"echo $$ > $OUTDIR/pid-$RANK; exec sleep 300\"]",
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":1},\"retry\":{\"system\":0}");
	json_t *job;

	json_decref(e2e_wait_state(e, id, "running", 60000));
	ty_test_daemon_kill(e->exec[1]); /* its heartbeats stop; it stays down */
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 30000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "failed");
	CHECK_STR_EQ(ty_jstr(job, "failure_class"), "node_lost");
	json_decref(job);
	/* fail fast: the surviving node's ranks are stopped at once; the lost
	 * node's orphans go when its executor comes back and finds them */
	{
		json_t *att = e2e_attempts(e, id), *k;
		size_t i;

		json_array_foreach(json_object_get(json_array_get(att, 0), "ranks"), i, k) {
			const char *f = ty_test_strf("pid-%lld", ty_jint(k, "rank"));

			if (!strcmp(ty_jstr(k, "node") ? ty_jstr(k, "node") : "", "node-a")) {
				for (int t = 0; t < 50 && e2e_any_alive(e, f); t++)
					usleep(100 * 1000);
				CHECK(!e2e_any_alive(e, f));
			}
		}
		json_decref(att);
	}
	e2e_start_executor(e, 1);
	e2e_wait_nodes_ready(e);
	for (int t = 0; t < 100 && e2e_any_alive(e, "pid-"); t++)
		usleep(100 * 1000);
	CHECK(!e2e_any_alive(e, "pid-"));
}

/*
 * Secrets never reach a log (docs/security.md "Secrets"): a whole flow with
 * the admin token, a team token and one the admin creates, a refused bogus
 * token, a webhook secret whose deliveries are attempted, a job whose env
 * holds a secret and whose ranks report metrics with their trial token;
 * then every daemon's log and PostgreSQL's is scanned for each of them.
 */
TY_TEST(no_secret_reaches_a_log)
{
	struct e2e *e = e2e_get();
	const struct ty_stack *s = ty_stack_get();
	const char *client = e2e_source_path("worker/examples/trainyard_metrics.py");
	const char *hook_secret = ty_test_strf("whsec-e2e-%d-%ld", getpid(), random());
	const char *env_secret = ty_test_strf("envsecret-%d-%ld", getpid(), random());
	const char *bogus = "ty_BOGUSBOGUSBOGUSBOGUSBOGUSBOGUSBOGUSBOGUSBOG";
	struct ty_resp r = {0};
	const char *created, *trial, *hook;
	long long id;
	json_t *job;

	ty_http(&r, "POST", "/v1/webhooks", e->token,
		ty_test_strf("{\"team\":\"%s\",\"url\":\"http://127.0.0.1:9/hook\",\"events\":[\"*\"],"
			     "\"secret\":\"%s\"}",
			     e->team, hook_secret),
		NULL);
	REQUIRE_STATUS(&r, 201);
	hook = ty_test_strf("%lld", ty_jint(r.json, "id"));
	ty_http(&r, "POST", "/v1/tokens", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"role\":\"member\",\"team\":\"%s\"}",
			     ty_uniq("e2e-secret"), e->team),
		NULL);
	REQUIRE_STATUS(&r, 201);
	created = ty_test_strf("%s", ty_jstr(r.json, "token"));
	ty_http(&r, "GET", "/v1/jobs", bogus, NULL, NULL);
	CHECK_STATUS(&r, 401);

	ty_http(&r, "POST", "/v1/jobs", created,
		ty_test_strf("{\"team\":\"%s\",\"command\":[\"/bin/sh\",\"-c\",\"/usr/bin/python3 %s "
			     "--step $RANK loss=1.5 && test -n \\\"$E2E_SECRET\\\"\"],"
			     "\"env\":{\"E2E_SECRET\":\"%s\"},"
			     "\"resources\":{\"nodes\":1,\"gpus_per_node\":2}}",
			     e->team, client, env_secret),
		NULL);
	REQUIRE_STATUS(&r, 201);
	id = ty_jint(r.json, "id");
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	json_decref(job);
	trial = ty_stack_sql("SELECT launch->>'metrics_token' FROM attempts WHERE job_id = $1::bigint",
			     ty_test_strf("%lld", id), (const char *)NULL);
	REQUIRE(trial && !strncmp(trial, "tym_", 4));
	/* the ranks used it: their metrics are there */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/metrics", id), e->token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 2);
	/* the deliverer signed with the secret (and failed: nothing listens on port 9) */
	for (int t = 0; t < 100; t++) {
		ty_http(&r, "GET", ty_test_strf("/v1/webhooks/%s/deliveries", hook), e->token, NULL,
			NULL);
		if (ty_jint(r.json, "items[0].attempt_count") >= 1)
			break;
		usleep(100 * 1000);
	}
	CHECK(ty_jint(r.json, "items[0].attempt_count") >= 1);

	const struct e2e_secret secrets[] = {
	    {"admin token", s->admin},		 {"team token", e->token},
	    {"created token", created},		 {"refused bogus token", bogus},
	    {"trial metrics token", trial},	 {"webhook secret", hook_secret},
	    {"secret in the job's env", env_secret},
	};
	/* broker, scheduler, two executors, the API (and PostgreSQL's when readable) */
	CHECK(e2e_assert_no_secret_in_logs(e, secrets, sizeof(secrets) / sizeof(secrets[0])) >= 5);
	ty_resp_free(&r);
}
