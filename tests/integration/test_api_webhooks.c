/*
 * Webhooks over HTTP (docs/api.md "Webhooks", docs/webhooks.md): job state
 * changes POSTed to a real receiver process (Python's http.server), signed
 * and checked here with an independent HMAC (the openssl command), retried
 * across receiver and API restarts, attempts visible through the API.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * The receiver: logs every request as one JSON line {path, headers, body,
 * status} and answers by path: /ok/... 200, /status/<code>/... that code,
 * /flaky/<k>/... 500 to the first k requests of each delivery id then 200,
 * /hang/... never in time.
 */
static const char receiver_py[] =
	"import http.server, json, sys, threading, time\n"
	"port, logpath = int(sys.argv[1]), sys.argv[2]\n"
	"lock = threading.Lock()\n"
	"seen = {}\n"
	"class H(http.server.BaseHTTPRequestHandler):\n"
	"    def log_message(self, *a):\n"
	"        pass\n"
	"    def do_POST(self):\n"
	"        n = int(self.headers.get('Content-Length', '0'))\n"
	"        body = self.rfile.read(n).decode('utf-8')\n"
	"        parts = self.path.split('/')\n"
	"        status = 200\n"
	"        if parts[1] == 'status':\n"
	"            status = int(parts[2])\n"
	"        elif parts[1] == 'flaky':\n"
	"            key = (self.path, self.headers.get('Trainyard-Delivery'))\n"
	"            with lock:\n"
	"                seen[key] = seen.get(key, 0) + 1\n"
	"                if seen[key] <= int(parts[2]):\n"
	"                    status = 500\n"
	"        elif parts[1] == 'hang':\n"
	"            time.sleep(60)\n"
	"            return\n"
	"        rec = {'path': self.path, 'status': status, 'body': body,\n"
	"               'headers': {k.lower(): v for k, v in self.headers.items()}}\n"
	"        with lock:\n"
	"            with open(logpath, 'a') as f:\n"
	"                f.write(json.dumps(rec) + '\\n')\n"
	"        self.send_response(status)\n"
	"        self.send_header('Content-Length', '2')\n"
	"        self.end_headers()\n"
	"        self.wfile.write(b'ok')\n"
	"class S(http.server.ThreadingHTTPServer):\n"
	"    daemon_threads = True\n"
	"    allow_reuse_address = True\n"
	"    request_queue_size = 128\n"
	"srv = S(('127.0.0.1', port), H)\n"
	"print('listening', flush=True)\n"
	"srv.serve_forever()\n";

/* Short delays and a debug log (in which no secret may appear). */
static const char *const api_args[] = {
    "--webhook-backoff-ms", "100", "--webhook-backoff-max-ms", "400", "--webhook-max-attempts",
    "40", "--webhook-timeout-ms", "1000", "--webhook-concurrency", "4", "--log-level", "debug",
    NULL};

static struct ty_api *api;
static struct ty_daemon *receiver;
static int receiver_port;
static char receiver_log[4096];
/* every secret registered, checked against responses and the API's log */
static const char *secrets[32];
static int nsecrets;

static const struct ty_stack *stack(void)
{
	const struct ty_stack *s = ty_stack_get();

	if (!api) {
		/* the shared server delivers with long delays: this one replaces it */
		ty_test_api_stop(s->api);
		api = ty_test_api_start(s->db_url, api_args);
	}
	ty_test_api_use(api);
	return s;
}

static int free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	REQUIRE(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	REQUIRE(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&sin, &len) == 0);
	port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

/* The receiver process (created stopped, on a fixed port, at first use). */
static void receiver_init(void)
{
	char script[4096];
	FILE *f;

	if (receiver_port)
		return;
	snprintf(script, sizeof(script), "%s/receiver.py", ty_test_workdir());
	snprintf(receiver_log, sizeof(receiver_log), "%s/received.jsonl", ty_test_workdir());
	REQUIRE((f = fopen(script, "w")) != NULL);
	fputs(receiver_py, f);
	fclose(f);
	receiver_port = free_port();
	const char *argv[] = {"/usr/bin/python3", script, ty_test_strf("%d", receiver_port),
			      receiver_log, NULL};
	receiver = ty_test_daemon_start("receiver", argv);
	REQUIRE(ty_test_daemon_wait_log(receiver, "listening", 15000));
}

static void receiver_up(void)
{
	receiver_init();
	if (!ty_test_daemon_running(receiver)) {
		ty_test_daemon_restart(receiver);
		REQUIRE(ty_test_daemon_wait_log(receiver, "listening", 15000));
	}
}

static void receiver_down(void)
{
	receiver_init();
	if (ty_test_daemon_running(receiver))
		ty_test_daemon_stop(receiver, 2000);
}

static const char *hook_url(const char *path)
{
	receiver_init();
	return ty_test_strf("http://127.0.0.1:%d%s", receiver_port, path);
}

/* Requests the receiver logged whose path is path (a new array). */
static json_t *received(const char *path)
{
	json_t *all = json_array();
	FILE *f = fopen(receiver_log, "r");
	char line[65536];

	if (!f)
		return all;
	while (fgets(line, sizeof(line), f)) {
		json_t *rec = json_loads(line, 0, NULL);

		if (rec && !strcmp(ty_jstr(rec, "path"), path))
			json_array_append(all, rec);
		json_decref(rec);
	}
	fclose(f);
	return all;
}

/* Registers a webhook of team as token; returns its id. */
static long long mk_hook(const char *token, const char *team, const char *path,
			 const char *events, const char *secret)
{
	struct ty_resp r = {0};
	long long id;

	if (nsecrets < 32)
		secrets[nsecrets++] = secret;
	ty_http(&r, "POST", "/v1/webhooks", token,
		ty_test_strf("{\"team\":\"%s\",\"url\":\"%s\",\"events\":%s,\"secret\":\"%s\"}",
			     team, hook_url(path), events, secret),
		NULL);
	REQUIRE_STATUS(&r, 201);
	CHECK(!strstr(r.body, secret));
	CHECK(!json_object_get(r.json, "secret"));
	CHECK_JSTR(r.json, "team", team);
	CHECK_JSTR(r.json, "url", hook_url(path));
	CHECK(ty_jpath(r.json, "active") == json_true());
	CHECK_JNULL(r.json, "deactivated_at");
	CHECK_JTIME(r.json, "created_at");
	id = ty_jint(r.json, "id");
	ty_resp_free(&r);
	return id;
}

/* GET the deliveries of a webhook (all, oldest first; a new array). */
static json_t *deliveries(const char *token, long long hook)
{
	struct ty_resp r = {0};
	json_t *items;

	ty_http(&r, "GET", ty_test_strf("/v1/webhooks/%lld/deliveries?limit=500", hook), token,
		NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	for (int i = 0; i < nsecrets; i++)
		CHECK(!strstr(r.body, secrets[i]));
	items = json_array();
	for (size_t i = json_array_size(json_object_get(r.json, "items")); i > 0; i--)
		json_array_append(items, json_array_get(json_object_get(r.json, "items"), i - 1));
	ty_resp_free(&r);
	return items;
}

enum until { ALL_DELIVERED, ALL_FINISHED, ALL_TRIED_TWICE, ALL_TRIED_ONCE };

static bool done(const json_t *items, size_t want, enum until u)
{
	size_t i;
	json_t *d;

	if (json_array_size(items) < want)
		return false;
	json_array_foreach(items, i, d) {
		const char *st = ty_jstr(d, "state");
		size_t recorded = json_array_size(json_object_get(d, "attempts"));

		if ((u == ALL_DELIVERED && strcmp(st, "delivered")) ||
		    (u == ALL_FINISHED && !strcmp(st, "pending")) ||
		    (u == ALL_TRIED_TWICE && recorded < 2) || (u == ALL_TRIED_ONCE && recorded < 1))
			return false;
	}
	return true;
}

/* Poll until `want` deliveries meet u (a bound, not a timing check); a new array. */
static json_t *wait_deliveries(const char *token, long long hook, size_t want, enum until u)
{
	for (int i = 0; i < 300; i++) {
		json_t *items = deliveries(token, hook);

		if (done(items, want, u))
			return items;
		json_decref(items);
		usleep(100 * 1000);
	}
	ty_test_fail_at(__FILE__, __LINE__, "webhook %lld: %zu deliveries did not get there in 30 s",
			hook, want);
	ty_test_abort();
	return NULL;
}

/* Lowercase hex HMAC-SHA256 by the openssl command, over "<t>.<body>". */
static const char *openssl_hmac(const char *secret, const char *t, const char *body)
{
	char path[4096], out[256] = "";
	FILE *f, *p;

	snprintf(path, sizeof(path), "%s/signed.txt", ty_test_workdir());
	REQUIRE((f = fopen(path, "w")) != NULL);
	fprintf(f, "%s.%s", t, body);
	fclose(f);
	p = popen(ty_test_strf("openssl dgst -sha256 -r -hmac '%s' '%s'", secret, path), "r");
	REQUIRE(p != NULL);
	if (!fgets(out, sizeof(out), p))
		out[0] = '\0';
	REQUIRE(pclose(p) == 0);
	out[strcspn(out, " \n")] = '\0'; /* -r: "<hex> *<file>" */
	return ty_test_strf("%s", out);
}

static void post_ok(const char *path, const char *token)
{
	struct ty_resp r = {0};

	ty_http(&r, "POST", path, token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

/* No secret registered so far appears in the API's (debug) log. */
static void check_log_clean(void)
{
	char *text;
	long n = 0;
	FILE *f;

	REQUIRE((f = fopen(ty_test_api_log(api), "r")) != NULL);
	text = ty_test_alloc(1 << 24);
	n = (long)fread(text, 1, (1 << 24) - 1, f);
	fclose(f);
	text[n] = '\0';
	for (int i = 0; i < nsecrets; i++) {
		ty_test_context("secret %s in the API log", secrets[i]);
		CHECK(strstr(text, secrets[i]) == NULL);
	}
}

TY_TEST(signature_verifies_with_an_independent_hmac)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whsig", 4, -1);
	const char *member = ty_mk_token("member", team);
	const char *secret = "whsec-0123456789-abcdef";
	static const char *const want_event[] = {"job.pending", "job.cancelled"};
	long long hook, job;
	json_t *items, *got;
	size_t i;
	json_t *rec;

	(void)s;
	receiver_up();
	hook = mk_hook(member, team, "/ok/sig", "[\"job.pending\",\"job.cancelled\"]", secret);
	job = ty_mk_job(member, team, NULL);
	post_ok(ty_test_strf("/v1/jobs/%lld/cancel", job), member);
	items = wait_deliveries(member, hook, 2, ALL_DELIVERED);
	REQUIRE_INT_EQ(json_array_size(items), 2);
	got = received("/ok/sig");
	REQUIRE_INT_EQ(json_array_size(got), 2);
	json_array_foreach(got, i, rec) {
		const char *sig = ty_jstr(rec, "headers.trainyard-signature");
		const char *body = ty_jstr(rec, "body");
		char t[32] = "", v1[80] = "";
		json_t *doc;

		ty_test_context("request %zu", i);
		REQUIRE(sig && body);
		REQUIRE_INT_EQ(sscanf(sig, "t=%31[0-9],v1=%79[0-9a-f]", t, v1), 2);
		CHECK_INT_EQ(strlen(v1), 64);
		CHECK_STR_EQ(ty_test_strf("t=%s,v1=%s", t, v1), sig);
		CHECK_STR_EQ(openssl_hmac(secret, t, body), v1);
		/* a receiver with another secret, or a changed body or time, rejects it */
		CHECK(strcmp(openssl_hmac("whsec-0123456789-abcdeX", t, body), v1) != 0);
		CHECK(strcmp(openssl_hmac(secret, ty_test_strf("%lld", atoll(t) + 1), body), v1));
		CHECK(llabs(atoll(t) - (long long)time(NULL)) < 300);
		CHECK_STR_EQ(ty_jstr(rec, "headers.content-type"), "application/json");
		CHECK_STR_EQ(ty_jstr(rec, "headers.trainyard-event"), want_event[i]);
		CHECK(!strncmp(ty_jstr(rec, "headers.user-agent"), "Trainyard-Webhooks/", 19));
		CHECK_STR_EQ(ty_jstr(rec, "headers.trainyard-delivery"),
			     ty_test_strf("%lld", ty_jint(json_array_get(items, i), "id")));
		REQUIRE((doc = json_loads(body, 0, NULL)) != NULL);
		CHECK_JINT(doc, "id", ty_jint(json_array_get(items, i), "id"));
		CHECK_JSTR(doc, "type", want_event[i]);
		CHECK_JTIME(doc, "created_at");
		CHECK_JINT(doc, "job.id", job);
		CHECK_JSTR(doc, "job.team", team);
		CHECK_JSTR(doc, "job.state", want_event[i] + 4);
		/* the delivery lists the exact body it sent */
		CHECK(json_equal(doc, json_object_get(json_array_get(items, i), "payload")));
		json_decref(doc);
		CHECK(!strstr(body, secret));
	}
	json_array_foreach(items, i, rec) {
		ty_test_context("delivery %zu", i);
		CHECK_JSTR(rec, "event", want_event[i]);
		CHECK_JSTR(rec, "state", "delivered");
		CHECK_JINT(rec, "attempt_count", 1);
		CHECK_JINT(rec, "attempts[0].n", 1);
		CHECK_JINT(rec, "attempts[0].http_status", 200);
		CHECK_JNULL(rec, "attempts[0].error");
		CHECK_JTIME(rec, "attempts[0].started_at");
		CHECK_JTIME(rec, "delivered_at");
		CHECK_JNULL(rec, "next_attempt_at");
		CHECK_JINT(rec, "last_status", 200);
		CHECK_JINT(rec, "webhook_id", hook);
	}
	json_decref(items);
	json_decref(got);
	check_log_clean();
}

TY_TEST(only_subscribed_state_changes_of_the_team_are_queued)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whflt", 4, -1);
	const char *other = ty_mk_team("whoth", 4, -1);
	const char *member = ty_mk_token("member", team);
	const char *omember = ty_mk_token("member", other);
	long long some, all, theirs, job;
	json_t *items;
	const char *jid;

	(void)s;
	receiver_up();
	some = mk_hook(member, team, "/ok/some", "[\"job.running\",\"job.succeeded\"]",
		       "filter-secret-0001");
	all = mk_hook(member, team, "/ok/all", "[\"*\"]", "filter-secret-0002");
	theirs = mk_hook(omember, other, "/ok/theirs", "[\"*\"]", "filter-secret-0003");
	job = ty_mk_job(member, team, NULL);
	jid = ty_test_strf("%lld", job);
	/* what the scheduler writes: a state change, an event within a state, the end */
	TY_STACK_SQL("UPDATE jobs SET state = 'running' WHERE id = $1", jid);
	TY_STACK_SQL("SELECT ty_job_event($1, 'running', 'running', 'all ranks up', NULL)", jid);
	TY_STACK_SQL("SELECT ty_job_event($1, 'stopping', 'running', 'not a change', NULL)", jid);
	TY_STACK_SQL("UPDATE jobs SET state = 'succeeded', finished_at = now() WHERE id = $1", jid);
	TY_STACK_SQL("SELECT ty_job_event($1, 'succeeded', 'succeeded', 'exit 0', NULL)", jid);

	items = wait_deliveries(member, some, 2, ALL_DELIVERED);
	CHECK_INT_EQ(json_array_size(items), 2);
	CHECK_JSTR(items, "[0].event", "job.running");
	CHECK_JSTR(items, "[0].payload.job.state", "running");
	CHECK_JSTR(items, "[1].event", "job.succeeded");
	CHECK_JSTR(items, "[1].payload.job.state", "succeeded");
	CHECK_JTIME(items, "[1].payload.job.finished_at");
	json_decref(items);
	items = wait_deliveries(member, all, 3, ALL_DELIVERED);
	CHECK_INT_EQ(json_array_size(items), 3);
	CHECK_JSTR(items, "[0].event", "job.pending");
	CHECK_JSTR(items, "[1].event", "job.running");
	CHECK_JSTR(items, "[2].event", "job.succeeded");
	json_decref(items);
	items = deliveries(omember, theirs);
	CHECK_INT_EQ(json_array_size(items), 0);
	json_decref(items);
	check_log_clean();
}

TY_TEST(retry_across_a_receiver_restart_delivers_each_once)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whrr", 4, -1);
	const char *member = ty_mk_token("member", team);
	long long hook;
	json_t *items, *got, *d, *seen;
	struct ty_resp r = {0};
	size_t i;

	(void)s;
	receiver_down();
	hook = mk_hook(member, team, "/ok/rr", "[\"*\"]", "restart-secret-0001");
	for (int k = 0; k < 3; k++)
		ty_mk_job(member, team, NULL);
	items = wait_deliveries(member, hook, 3, ALL_TRIED_TWICE);
	json_array_foreach(items, i, d) {
		ty_test_context("delivery %zu while the receiver is down", i);
		CHECK_JSTR(d, "state", "pending");
		CHECK_JNULL(d, "attempts[0].http_status");
		CHECK(ty_jstr(d, "attempts[0].error") && *ty_jstr(d, "attempts[0].error"));
		CHECK(ty_jstr(d, "last_error") && *ty_jstr(d, "last_error"));
		CHECK_JTIME(d, "next_attempt_at");
		CHECK_JNULL(d, "delivered_at");
	}
	json_decref(items);
	receiver_up();
	items = wait_deliveries(member, hook, 3, ALL_DELIVERED);
	CHECK_INT_EQ(json_array_size(items), 3);
	got = received("/ok/rr");
	/* at least once, and here (one replica, no crash) exactly once per delivery id */
	CHECK_INT_EQ(json_array_size(got), 3);
	seen = json_object();
	json_array_foreach(got, i, d)
		json_object_set_new(seen, ty_jstr(d, "headers.trainyard-delivery"), json_true());
	json_array_foreach(items, i, d) {
		ty_test_context("delivery %zu", i);
		CHECK(json_object_get(seen, ty_test_strf("%lld", ty_jint(d, "id"))) != NULL);
		CHECK(ty_jint(d, "attempt_count") >= 3);
		CHECK_INT_EQ(ty_jint(d, "attempt_count"),
			     (long long)json_array_size(json_object_get(d, "attempts")));
		CHECK_JINT(d, "last_status", 200);
		CHECK_JNULL(d, "last_error");
	}
	json_decref(seen);
	json_decref(got);
	json_decref(items);
	/* deliveries page like the other lists */
	ty_http(&r, "GET", ty_test_strf("/v1/webhooks/%lld/deliveries?limit=2", hook), member, NULL,
		NULL);
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 2);
	REQUIRE(ty_jstr(r.json, "next_cursor"));
	ty_http(&r, "GET",
		ty_test_strf("/v1/webhooks/%lld/deliveries?limit=2&cursor=%s", hook,
			     ty_jstr(r.json, "next_cursor")),
		member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 1);
	CHECK_JNULL(r.json, "next_cursor");
	ty_resp_free(&r);
	check_log_clean();
}

TY_TEST(api_killed_with_deliveries_pending_delivers_after_restart)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whkill", 4, -1);
	const char *member = ty_mk_token("member", team);
	long long hook, jobs[2];
	json_t *items, *got;

	receiver_down();
	hook = mk_hook(member, team, "/ok/kill", "[\"*\"]", "killing-secret-0001");
	for (int k = 0; k < 2; k++)
		jobs[k] = ty_mk_job(member, team, NULL);
	json_decref(wait_deliveries(member, hook, 2, ALL_TRIED_ONCE));
	ty_test_api_kill(api);
	/* the scheduler goes on changing states while no API runs: still queued */
	for (int k = 0; k < 2; k++) {
		const char *jid = ty_test_strf("%lld", jobs[k]);

		TY_STACK_SQL("UPDATE jobs SET state = 'scheduled' WHERE id = $1", jid);
		TY_STACK_SQL("SELECT ty_job_event($1, 'scheduled', 'scheduled', 'placed', NULL)",
			     jid);
	}
	CHECK_STR_EQ(TY_STACK_SQL("SELECT count(*) FROM webhook_deliveries d JOIN webhooks w"
				  " ON w.id = d.webhook_id WHERE w.url LIKE '%/ok/kill'"
				  " AND d.state = 'pending'"),
		     "4");
	(void)s;
	receiver_up();
	ty_test_api_restart(api);
	ty_test_api_use(api);
	items = wait_deliveries(member, hook, 4, ALL_DELIVERED);
	CHECK_INT_EQ(json_array_size(items), 4);
	CHECK_JSTR(items, "[2].event", "job.scheduled");
	CHECK_JSTR(items, "[3].event", "job.scheduled");
	got = received("/ok/kill");
	CHECK_INT_EQ(json_array_size(got), 4);
	json_decref(got);
	json_decref(items);
	check_log_clean();
}

TY_TEST(server_error_then_success_and_timeouts_are_recorded)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whflaky", 4, -1);
	const char *member = ty_mk_token("member", team);
	long long flaky, hang;
	json_t *items, *got;
	struct ty_resp r = {0};

	(void)s;
	receiver_up();
	flaky = mk_hook(member, team, "/flaky/1/x", "[\"job.pending\"]", "flaky-secret-00001");
	hang = mk_hook(member, team, "/hang/x", "[\"job.pending\"]", "hang-secret-000001");
	ty_mk_job(member, team, NULL);

	items = wait_deliveries(member, flaky, 1, ALL_DELIVERED);
	CHECK_JINT(items, "[0].attempt_count", 2);
	CHECK_JINT(items, "[0].attempts[0].http_status", 500);
	CHECK_JSTR(items, "[0].attempts[0].error", "HTTP 500");
	CHECK_JINT(items, "[0].attempts[1].http_status", 200);
	CHECK_JNULL(items, "[0].attempts[1].error");
	got = received("/flaky/1/x");
	CHECK_INT_EQ(json_array_size(got), 2);
	/* a retry sends the same delivery: same id, same body */
	CHECK_STR_EQ(ty_jstr(json_array_get(got, 0), "headers.trainyard-delivery"),
		     ty_jstr(json_array_get(got, 1), "headers.trainyard-delivery"));
	CHECK_STR_EQ(ty_jstr(json_array_get(got, 0), "body"),
		     ty_jstr(json_array_get(got, 1), "body"));
	json_decref(got);
	json_decref(items);

	items = wait_deliveries(member, hang, 1, ALL_TRIED_ONCE);
	CHECK_JSTR(items, "[0].state", "pending");
	CHECK_JNULL(items, "[0].attempts[0].http_status");
	CHECK(ty_jstr(items, "[0].attempts[0].error") &&
	      strstr(ty_jstr(items, "[0].attempts[0].error"), "timed out"));
	CHECK(ty_jint(items, "[0].attempts[0].duration_ms") >= 0);
	json_decref(items);

	/* deleting deactivates it: its pending delivery is cancelled and stays listed */
	ty_http(&r, "DELETE", ty_test_strf("/v1/webhooks/%lld", hang), member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK(ty_jpath(r.json, "active") == json_false());
	CHECK_JTIME(r.json, "deactivated_at");
	items = wait_deliveries(member, hang, 1, ALL_FINISHED);
	CHECK_JSTR(items, "[0].state", "cancelled");
	json_decref(items);
	ty_http(&r, "GET", ty_test_strf("/v1/webhooks/%lld/deliveries?state=cancelled", hang),
		member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 1);
	/* a deleted webhook gets nothing new */
	ty_http(&r, "POST", ty_test_strf("/v1/webhooks/%lld/ping", hang), member, NULL, NULL);
	CHECK_PROBLEM(&r, 409, "webhook_inactive", NULL);
	ty_mk_job(member, team, NULL);
	items = deliveries(member, hang);
	CHECK_INT_EQ(json_array_size(items), 1);
	json_decref(items);
	ty_resp_free(&r);
	check_log_clean();
}

TY_TEST(ping_and_giving_up_after_max_attempts)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whfail", 4, -1);
	const char *member = ty_mk_token("member", team);
	static const char *const args[] = {"--webhook-max-attempts", "2", "--webhook-backoff-ms",
					   "50", NULL};
	struct ty_api *other;
	struct ty_resp r = {0};
	long long hook;
	json_t *items;

	receiver_up();
	hook = mk_hook(member, team, "/status/503/fail", "[\"job.succeeded\"]",
		       "failing-secret-0001");
	/* a replica that gives up sooner takes over the queue */
	ty_test_api_stop(api);
	other = ty_test_api_start(s->db_url, args);
	ty_http(&r, "POST", ty_test_strf("/v1/webhooks/%lld/ping", hook), member, NULL, NULL);
	REQUIRE_STATUS(&r, 202);
	CHECK_JSTR(r.json, "event", "ping");
	CHECK_JSTR(r.json, "state", "pending");
	CHECK_JSTR(r.json, "payload.type", "ping");
	CHECK_JINT(r.json, "payload.webhook.id", hook);
	CHECK_JINT(r.json, "payload.id", ty_jint(r.json, "id"));
	items = wait_deliveries(member, hook, 1, ALL_FINISHED);
	CHECK_JSTR(items, "[0].state", "failed");
	CHECK_JINT(items, "[0].attempt_count", 2);
	CHECK_INT_EQ(json_array_size(json_object_get(json_array_get(items, 0), "attempts")), 2);
	CHECK_JINT(items, "[0].attempts[1].http_status", 503);
	CHECK_JINT(items, "[0].last_status", 503);
	CHECK_JSTR(items, "[0].last_error", "HTTP 503");
	CHECK_JNULL(items, "[0].next_attempt_at");
	CHECK_JNULL(items, "[0].delivered_at");
	json_decref(items);
	ty_test_api_stop(other);
	ty_test_api_restart(api);
	ty_test_api_use(api);
	ty_resp_free(&r);
	check_log_clean();
}

TY_TEST(two_replicas_deliver_each_delivery_once)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whrep", 4, -1);
	const char *member = ty_mk_token("member", team);
	struct ty_api *second;
	long long hook;
	json_t *items, *got, *d, *seen;
	size_t i;

	receiver_up();
	hook = mk_hook(member, team, "/ok/replicas", "[\"*\"]", "replica-secret-0001");
	/* both claim from the same queue as the jobs are submitted and cancelled */
	second = ty_test_api_start(s->db_url, api_args);
	ty_test_api_use(api);
	for (int k = 0; k < 10; k++) {
		long long job = ty_mk_job(member, team, NULL);

		ty_test_api_use(k % 2 ? second : api);
		post_ok(ty_test_strf("/v1/jobs/%lld/cancel", job), member);
	}
	ty_test_api_use(api);
	items = wait_deliveries(member, hook, 20, ALL_DELIVERED);
	CHECK_INT_EQ(json_array_size(items), 20);
	got = received("/ok/replicas");
	CHECK_INT_EQ(json_array_size(got), 20);
	seen = json_object();
	json_array_foreach(got, i, d)
		json_object_set_new(seen, ty_jstr(d, "headers.trainyard-delivery"), json_true());
	CHECK_INT_EQ(json_object_size(seen), 20);
	json_decref(seen);
	json_decref(got);
	json_decref(items);
	ty_test_api_stop(second);
	check_log_clean();
}

TY_TEST(validation_table)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whval", 4, -1);
	const char *other = ty_mk_team("whval", 4, -1);
	const char *member = ty_mk_token("member", team);
	const char *viewer = ty_mk_token("viewer", team);
	const char *url = hook_url("/ok/val");
	const char *ok_events = "['job.failed']", *ok_secret = "'0123456789abcdef'";
	char long_url[2100];
	const struct {
		const char *name, *token, *team, *url, *events, *secret, *extra;
		int status;
		const char *code, *field;
	} rows[] = {
	    {"ok", NULL, team, NULL, NULL, NULL, "", 201, NULL, NULL},
	    {"ftp scheme", NULL, team, "'ftp://127.0.0.1/x'", NULL, NULL, "", 422, "invalid_field",
	     "url"},
	    {"no scheme", NULL, team, "'127.0.0.1/x'", NULL, NULL, "", 422, "invalid_field", "url"},
	    {"no host", NULL, team, "'http://'", NULL, NULL, "", 422, "invalid_field", "url"},
	    {"blank in url", NULL, team, "'http://h/a b'", NULL, NULL, "", 422, "invalid_field",
	     "url"},
	    {"credentials", NULL, team, "'http://u:p@h/'", NULL, NULL, "", 422, "invalid_field",
	     "url"},
	    {"too long", NULL, team, long_url, NULL, NULL, "", 422, "invalid_field", "url"},
	    {"url not a string", NULL, team, "7", NULL, NULL, "", 422, "invalid_field", "url"},
	    {"bad event", NULL, team, NULL, "['job.pending','job.exploded']", NULL, "", 422,
	     "invalid_field", "events[1]"},
	    {"state without job.", NULL, team, NULL, "['failed']", NULL, "", 422, "invalid_field",
	     "events[0]"},
	    {"twice", NULL, team, NULL, "['*','*']", NULL, "", 422, "invalid_field", "events[1]"},
	    {"no events", NULL, team, NULL, "[]", NULL, "", 422, "invalid_field", "events"},
	    {"events not array", NULL, team, NULL, "'job.failed'", NULL, "", 422, "invalid_field",
	     "events"},
	    {"short secret", NULL, team, NULL, NULL, "'0123456789abcde'", "", 422, "invalid_field",
	     "secret"},
	    {"long secret", NULL, team, NULL, NULL, "'@A257'", "", 422, "invalid_field", "secret"},
	    {"control in secret", NULL, team, NULL, NULL, "'0123456789abcdef\\n'", "", 422,
	     "invalid_field", "secret"},
	    {"unknown field", NULL, team, NULL, NULL, NULL, ",'active':false", 400, "unknown_field",
	     "active"},
	    {"bad team name", NULL, "Not_A_Team", NULL, NULL, NULL, "", 422, "invalid_field",
	     "team"},
	    {"unknown team", NULL, "no-such-team-x", NULL, NULL, NULL, "", 422, "unknown_team",
	     "team"},
	    {"member of another team", member, other, NULL, NULL, NULL, "", 403, "forbidden",
	     "team"},
	    {"viewer", viewer, team, NULL, NULL, NULL, "", 403, "forbidden", TY_FIELD_UNCHECKED},
	};
	struct ty_resp r = {0};
	long long id = 0;

	memcpy(long_url, "'http://h/", 10);
	memset(long_url + 10, 'a', 2040);
	strcpy(long_url + 2050, "'");
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *body = ty_tmpl(
			ty_test_strf("{'team':'@T','url':%s,'events':%s,'secret':%s%s}",
				     rows[i].url ? rows[i].url : ty_test_strf("'%s'", url),
				     rows[i].events ? rows[i].events : ok_events,
				     rows[i].secret ? rows[i].secret : ok_secret, rows[i].extra),
			rows[i].team);

		ty_test_context("%s", rows[i].name);
		ty_http(&r, "POST", "/v1/webhooks", rows[i].token ? rows[i].token : s->admin, body,
			NULL);
		if (rows[i].status == 201) {
			CHECK_STATUS(&r, 201);
			id = ty_jint(r.json, "id");
		} else {
			CHECK_PROBLEM(&r, rows[i].status, rows[i].code, rows[i].field);
		}
	}
	ty_test_context("reads and writes");
	REQUIRE(id > 0);
	{
		const char *omember = ty_mk_token("member", other);
		const char *oviewer = ty_mk_token("viewer", other);
		const struct {
			const char *method, *path, *token;
			int status;
			const char *code;
		} acc[] = {
		    {"GET", "/v1/webhooks/%lld", omember, 404, "webhook_not_found"},
		    {"GET", "/v1/webhooks/%lld/deliveries", oviewer, 404, "webhook_not_found"},
		    {"DELETE", "/v1/webhooks/%lld", omember, 404, "webhook_not_found"},
		    {"POST", "/v1/webhooks/%lld/ping", oviewer, 404, "webhook_not_found"},
		    {"DELETE", "/v1/webhooks/%lld", viewer, 403, "forbidden"},
		    {"POST", "/v1/webhooks/%lld/ping", viewer, 403, "forbidden"},
		    {"GET", "/v1/webhooks/%lld/deliveries?state=lost", member, 400,
		     "invalid_parameter"},
		    {"GET", "/v1/webhooks/%lld/deliveries?limit=0", member, 400,
		     "invalid_parameter"},
		    {"GET", "/v1/webhooks/x%lld", member, 404, "webhook_not_found"},
		    {"GET", "/v1/webhooks/%lld0000", member, 404, "webhook_not_found"},
		};

		for (size_t i = 0; i < sizeof(acc) / sizeof(acc[0]); i++) {
			ty_test_context("%s %s", acc[i].method, acc[i].path);
			ty_http(&r, acc[i].method, ty_test_strf(acc[i].path, id), acc[i].token,
				NULL, NULL);
			CHECK_PROBLEM(&r, acc[i].status, acc[i].code, TY_FIELD_UNCHECKED);
		}
		ty_test_context("lists");
		/* a team sees only its own webhooks; the viewer may read them */
		ty_http(&r, "GET", "/v1/webhooks", omember, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 0);
		ty_http(&r, "GET", "/v1/webhooks", viewer, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 1);
		CHECK_JINT(r.json, "items[0].id", id);
		CHECK(!strstr(r.body, "0123456789abcdef"));
		ty_http(&r, "GET", ty_test_strf("/v1/webhooks?team=%s", team), s->admin, NULL,
			NULL);
		CHECK_STATUS(&r, 200);
		CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 1);
		ty_http(&r, "GET", ty_test_strf("/v1/webhooks/%lld", id), viewer, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK_JSTR(r.json, "events[0]", "job.failed");
		CHECK_JSTR(r.json, "created_by", "test-admin");
		CHECK(!strstr(r.body, "0123456789abcdef"));
		/* delete twice: the same answer */
		ty_http(&r, "DELETE", ty_test_strf("/v1/webhooks/%lld", id), member, NULL, NULL);
		CHECK_STATUS(&r, 200);
		ty_http(&r, "DELETE", ty_test_strf("/v1/webhooks/%lld", id), member, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK(ty_jpath(r.json, "active") == json_false());
	}
	ty_resp_free(&r);
	check_log_clean();
}

TY_TEST(the_per_team_limit_counts_active_webhooks)
{
	const struct ty_stack *s = stack();
	const char *team = ty_mk_team("whlim", 4, -1);
	const char *member = ty_mk_token("member", team);
	const char *body = ty_test_strf("{\"team\":\"%s\",\"url\":\"%s\",\"events\":[\"*\"],"
					"\"secret\":\"0123456789abcdef\"}",
					team, hook_url("/ok/lim"));
	struct ty_resp r = {0};
	long long first = 0;

	(void)s;
	for (int i = 0; i < 25; i++) {
		ty_http(&r, "POST", "/v1/webhooks", member, body, NULL);
		REQUIRE_STATUS(&r, 201);
		if (i == 0)
			first = ty_jint(r.json, "id");
	}
	ty_http(&r, "POST", "/v1/webhooks", member, body, NULL);
	CHECK_PROBLEM(&r, 409, "webhook_limit", "team");
	CHECK(strstr(ty_jstr(r.json, "detail"), "already has 25 active webhooks") != NULL);
	/* a deleted webhook no longer counts */
	ty_http(&r, "DELETE", ty_test_strf("/v1/webhooks/%lld", first), member, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "POST", "/v1/webhooks", member, body, NULL);
	CHECK_STATUS(&r, 201);
	ty_resp_free(&r);
}
