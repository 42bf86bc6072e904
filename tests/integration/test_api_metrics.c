/*
 * GET /metrics (docs/metrics.md): request counters and latency by route
 * pattern, the PostgreSQL gauges read at scrape time (jobs, queue, teams,
 * nodes, outbox) with exact values, `promtool check metrics` on the output,
 * and a real Prometheus that scrapes the server and answers a query.
 */
#include "ty_buf.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

/* The body of GET /metrics (scratch); the case ends unless it is a 200. */
static const char *scrape(void)
{
	struct ty_resp r = {0};
	const char *body;

	ty_http(&r, "GET", "/metrics", NULL, NULL, NULL);
	REQUIRE_INT_EQ(r.status, 200);
	CHECK_STR_EQ(ty_resp_header(&r, "Content-Type"),
		     "text/plain; version=0.0.4; charset=utf-8");
	body = ty_test_strf("%s", r.body);
	ty_resp_free(&r);
	return body;
}

/* The value of the sample "series" (name and labels exactly as written), or -1 if absent. */
static double value(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	}
	return -1;
}

#define CHECK_VALUE(text, series, want)                                                            \
	do {                                                                                       \
		double got_ = value((text), (series));                                             \
		if (got_ != (double)(want))                                                        \
			ty_test_fail_at(__FILE__, __LINE__, "%s: got %.17g, want %.17g", (series), \
					got_, (double)(want));                                     \
	} while (0)

static const char *req(const char *route, const char *method, int status)
{
	return ty_test_strf(
	    "trainyard_api_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"}", route, method,
	    status);
}

static double delta(const char *before, const char *after, const char *series)
{
	double b = value(before, series);

	return value(after, series) - (b < 0 ? 0 : b);
}

TY_TEST(requests_counted_by_route_pattern_method_and_status)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *before, *after;

	before = scrape();
	for (int i = 0; i < 3; i++)
		ty_http(&r, "GET", "/healthz", NULL, NULL, NULL);
	ty_http(&r, "GET", "/v1/jobs/999999999", st->admin, NULL, NULL);
	CHECK_INT_EQ(r.status, 404);
	ty_http(&r, "GET", "/v1/jobs/999999998", st->admin, NULL, NULL);
	ty_http(&r, "GET", "/v1/jobs/1", NULL, NULL, NULL);
	CHECK_INT_EQ(r.status, 401);
	ty_http(&r, "GET", "/no/such/path", NULL, NULL, NULL);
	CHECK_INT_EQ(r.status, 404);
	ty_http(&r, "DELETE", "/healthz", NULL, NULL, NULL);
	CHECK_INT_EQ(r.status, 405);
	ty_resp_free(&r);
	after = scrape();

	CHECK_INT_EQ(delta(before, after, req("/healthz", "GET", 200)), 3);
	CHECK_INT_EQ(delta(before, after, req("/v1/jobs/{}", "GET", 404)), 2);
	CHECK_INT_EQ(delta(before, after, req("/v1/jobs/{}", "GET", 401)), 1);
	CHECK_INT_EQ(delta(before, after, req("unmatched", "GET", 404)), 1);
	CHECK_INT_EQ(delta(before, after, req("unmatched", "DELETE", 405)), 1);
	/* the first scrape is counted by the time of the second */
	CHECK_INT_EQ(delta(before, after, req("/metrics", "GET", 200)), 1);
	/* raw paths never become label values */
	CHECK(strstr(after, "999999999") == NULL);
	CHECK(strstr(after, "/no/such/path") == NULL);

	CHECK_INT_EQ(delta(before, after,
			   "trainyard_api_request_duration_seconds_count{route=\"/healthz\"}"),
		     3);
	CHECK_INT_EQ(
	    delta(before, after,
		  "trainyard_api_request_duration_seconds_bucket{route=\"/healthz\",le=\"+Inf\"}"),
	    3);
	CHECK(value(after, "trainyard_api_request_duration_seconds_sum{route=\"/healthz\"}") >= 0);
	CHECK(strstr(after, "# TYPE trainyard_api_requests_total counter\n") != NULL);
	CHECK(strstr(after, "# TYPE trainyard_api_request_duration_seconds histogram\n") != NULL);
}

/*
 * Team a: 3 jobs submitted (one cancelled, the oldest pending one backdated
 * 100 s), one running with 4 GPUs allocated on node n1, team_usage with 2
 * borrowed GPUs and fair share 0.5. Nodes n1 ready, n2 draining, n3 lost, n4
 * ready with a fault (shown not_ready).
 * Two outbox rows. No scheduler runs, so nothing moves under the test.
 */
TY_TEST(database_gauges_at_scrape_time)
{
	const struct ty_stack *st = ty_stack_get();
	const char *a = ty_mk_team("ma", 8, -1), *b = ty_mk_team("mb", 2, -1);
	long long j1 = ty_mk_job(st->admin, a, NULL), j2 = ty_mk_job(st->admin, a, NULL);
	long long j3 = ty_mk_job(st->admin, a, NULL), j4 = ty_mk_job(st->admin, a, NULL);
	struct ty_resp r = {0};
	const char *t;

	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", j2), st->admin, NULL, NULL);
	CHECK_INT_EQ(r.status, 200);
	ty_resp_free(&r);
	DB("UPDATE jobs SET created_at = now() - interval '100 seconds' WHERE id = $1::bigint",
	   ty_test_strf("%lld", j1));
	DB("INSERT INTO nodes (id, address, gpus, state, boot_id) VALUES"
	   " ('mn1', '127.0.0.1', 8, 'ready', 'b'), ('mn2', '127.0.0.1', 8, 'draining', 'b'),"
	   " ('mn3', '127.0.0.1', 8, 'lost', 'b')");
	DB("INSERT INTO nodes (id, address, gpus, state, boot_id, fault, expected_gpus) VALUES"
	   " ('mn4', '127.0.0.1', 7, 'ready', 'b', 'found 7 of 8 expected GPUs', 8)");
	DB("UPDATE jobs SET state = 'running', attempt = 1 WHERE id = $1::bigint",
	   ty_test_strf("%lld", j4));
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch) VALUES"
	   " ($1::bigint, 1, 'running', 1, 'mn1', '127.0.0.1', 29500, 1, 4, '{}')",
	   ty_test_strf("%lld", j4));
	DB("INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank, local_ranks,"
	   " gpus) VALUES ($1::bigint, 1, 'mn1', 0, 0, 4, '{0,1,2,3}')",
	   ty_test_strf("%lld", j4));
	DB("INSERT INTO team_usage (team_id, gpus_in_use, gpus_borrowed, fair_share)"
	   " SELECT id, 4, 2, 0.5 FROM teams WHERE name = $1",
	   a);
	DB("INSERT INTO dispatch_outbox (node_id, epoch, payload) VALUES ('mn1', 1, '{}'),"
	   " ('mn1', 1, '{}')");

	t = scrape();
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs{team=\"%s\",state=\"pending\"}", a), 2);
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs{team=\"%s\",state=\"cancelled\"}", a), 1);
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs{team=\"%s\",state=\"running\"}", a), 1);
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs{team=\"%s\",state=\"scheduled\"}", a), 0);
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs{team=\"%s\",state=\"pending\"}", b), 0);
	CHECK_VALUE(t, ty_test_strf("trainyard_queue_pending_jobs{team=\"%s\"}", a), 2);
	CHECK_VALUE(t, ty_test_strf("trainyard_queue_pending_jobs{team=\"%s\"}", b), 0);
	CHECK(value(t, ty_test_strf("trainyard_queue_oldest_pending_age_seconds{team=\"%s\"}",
				    a)) >= 100);
	CHECK_VALUE(t, ty_test_strf("trainyard_queue_oldest_pending_age_seconds{team=\"%s\"}", b),
		    0);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_allocated{team=\"%s\"}", a), 4);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_allocated{team=\"%s\"}", b), 0);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_nominal{team=\"%s\"}", a), 8);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_nominal{team=\"%s\"}", b), 2);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_borrowed{team=\"%s\"}", a), 2);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_borrowed{team=\"%s\"}", b), 0);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_fair_share{team=\"%s\"}", a), 0.5);
	CHECK_VALUE(t, ty_test_strf("trainyard_team_fair_share{team=\"%s\"}", b), 1);
	CHECK_VALUE(t, "trainyard_nodes{state=\"ready\"}", 1);
	CHECK_VALUE(t, "trainyard_nodes{state=\"draining\"}", 1);
	CHECK_VALUE(t, "trainyard_nodes{state=\"lost\"}", 1);
	CHECK_VALUE(t, "trainyard_nodes{state=\"suspect\"}", 0);
	CHECK_VALUE(t, "trainyard_nodes{state=\"not_ready\"}", 1);
	CHECK_VALUE(t, "trainyard_dispatch_outbox_rows", 2);

	/* the allocation released: the GPUs leave the team's count */
	DB("UPDATE allocations SET released_at = now() WHERE job_id = $1::bigint",
	   ty_test_strf("%lld", j4));
	DB("DELETE FROM dispatch_outbox");
	t = scrape();
	CHECK_VALUE(t, ty_test_strf("trainyard_team_gpus_allocated{team=\"%s\"}", a), 0);
	CHECK_VALUE(t, "trainyard_dispatch_outbox_rows", 0);
	(void)j3;
}

/* Job of team running attempt 1 on node with 2 GPUs; returns its id as text. */
static const char *running_on(const char *team, const char *node)
{
	static int port = 29600; /* one rendezvous port per live attempt of a node */
	const char *j = ty_test_strf("%lld", ty_mk_job(ty_stack_get()->admin, team, NULL));

	DB("UPDATE jobs SET state = 'running', attempt = 1 WHERE id = $1::bigint", j);
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch) VALUES"
	   " ($1::bigint, 1, 'running', 1, $2, '127.0.0.1', $3::int, 1, 2, '{}')",
	   j, node, ty_test_strf("%d", port++));
	DB("INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank, local_ranks,"
	   " gpus) VALUES ($1::bigint, 1, $2, 0, 0, 2, '{0,1}')",
	   j, node);
	return j;
}

/* What node's last heartbeat said of job (attempt 1): idle that long. */
static void beat(const char *node, const char *const *jobs, const double *idle, int n)
{
	json_t *running = json_array();
	char *text;

	for (int i = 0; i < n; i++)
		json_array_append_new(running, json_pack("{s:I, s:i, s:f}", "job",
							 (json_int_t)atoll(jobs[i]), "attempt", 1,
							 "idle_seconds", idle[i]));
	text = json_dumps(running, JSON_COMPACT);
	DB("UPDATE nodes SET running = $2::jsonb WHERE id = $1", node, text);
	free(text);
	json_decref(running);
}

TY_TEST(jobs_holding_gpus_idle_beyond_their_teams_limit)
{
	const char *a = ty_mk_team("idle-a", 8, -1), *b = ty_mk_team("idle-b", 8, -1);
	const char *c = ty_mk_team("idle-c", 8, -1);
	const char *n1 = ty_uniq("idle-n"), *n2 = ty_uniq("idle-n");
	const char *ja, *ja2, *jb, *jc, *jd, *t;

	DB("UPDATE teams SET idle_gpu_alert_seconds = 600 WHERE name IN ($1, $2)", a, c);
	DB("INSERT INTO nodes (id, address, gpus, state, boot_id) VALUES"
	   " ($1, '127.0.0.1', 8, 'ready', 'b'), ($2, '127.0.0.1', 8, 'lost', 'b')",
	   n1, n2);
	ja = running_on(a, n1);
	ja2 = running_on(a, n1);
	jb = running_on(b, n1);
	jc = running_on(c, n1);
	jd = running_on(c, n2);
	/* a's two jobs over its limit, b's without a limit, c's under it, c's other on a lost node */
	beat(n1, (const char *const[]){ja, ja2, jb, jc}, (const double[]){700, 600, 99999, 599.9},
	     4);
	beat(n2, (const char *const[]){jd}, (const double[]){7000}, 1);
	t = scrape();
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs_gpus_idle{team=\"%s\"}", a), 2);
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs_gpus_idle{team=\"%s\"}", b), 0);
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs_gpus_idle{team=\"%s\"}", c), 0);

	/* busy again, or ended: no longer counted */
	beat(n1, (const char *const[]){ja, ja2}, (const double[]){0, 600}, 2);
	DB("UPDATE allocations SET exited_at = now(), released_at = now()"
	   " WHERE job_id = $1::bigint",
	   ja2);
	t = scrape();
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs_gpus_idle{team=\"%s\"}", a), 0);
	/* the limit lowered: counted at once */
	DB("UPDATE teams SET idle_gpu_alert_seconds = 60 WHERE name = $1", c);
	beat(n1, (const char *const[]){jc}, (const double[]){599.9}, 1);
	t = scrape();
	CHECK_VALUE(t, ty_test_strf("trainyard_jobs_gpus_idle{team=\"%s\"}", c), 1);
}

/* promtool's exit status on text (its output noted); 127 when promtool is missing. */
static int promtool_check(const char *text)
{
	const char *in = ty_test_strf("%s/metrics.txt", ty_test_workdir());
	const char *out = ty_test_strf("%s/promtool.out", ty_test_workdir());
	FILE *f = fopen(in, "w");
	char line[512];
	int status;

	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
	status = system(ty_test_strf("promtool check metrics < '%s' > '%s' 2>&1", in, out));
	if ((f = fopen(out, "r"))) {
		while (fgets(line, sizeof(line), f))
			ty_test_note("promtool: %s", line);
		fclose(f);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TY_TEST(promtool_check_metrics_passes)
{
	const struct ty_stack *st = ty_stack_get();
	const char *team = ty_mk_team("mp", 4, -1);
	struct ty_resp r = {0};

	ty_mk_job(st->admin, team, NULL);
	ty_http(&r, "GET", "/v1/jobs/1", NULL, NULL, NULL);
	ty_resp_free(&r);
	/* a label value that needs escaping must still pass */
	DB("INSERT INTO nodes (id, address, gpus, boot_id) VALUES ('mp1', 'x', 1, 'b')"
	   " ON CONFLICT DO NOTHING");
	CHECK_INT_EQ(promtool_check(scrape()), 0);
	/* and the check is real: a counter without _total and a bad line fail it */
	CHECK(promtool_check("# HELP x_requests Requests.\n# TYPE x_requests counter\n"
			     "x_requests 1\n") != 0);
	CHECK(promtool_check("not a metric line {\n") != 0);
}

/* ---- a real Prometheus ---- */

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct ty_buf *b = arg;

	ty_buf_append(b, p, size * n);
	return size * n;
}

/* GET url; the body (scratch), or "" on a transport error. */
static const char *http_get(const char *url)
{
	struct ty_buf b = TY_BUF_INIT;
	CURL *c = curl_easy_init();
	const char *out;

	REQUIRE(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	curl_easy_perform(c);
	curl_easy_cleanup(c);
	out = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return out;
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

TY_TEST(prometheus_scrapes_the_api)
{
	const struct ty_stack *st = ty_stack_get();
	const char *team = ty_mk_team("mprom", 6, -1);
	const char *dir = ty_test_workdir();
	const char *cfg = ty_test_strf("%s/prometheus.yml", dir);
	const char *api = ty_test_api_url(st->api);
	const char *listen = ty_test_strf("127.0.0.1:%d", free_port());
	const char *query, *body = "";
	struct ty_daemon *d;
	FILE *f = fopen(cfg, "w");

	REQUIRE(f != NULL);
	REQUIRE(strncmp(api, "http://", 7) == 0);
	fprintf(f,
		"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
		"scrape_configs:\n  - job_name: trainyard-api\n    scrape_interval: 1s\n"
		"    static_configs:\n      - targets: ['%s']\n",
		api + 7);
	fclose(f);
	d = ty_test_daemon_start(
	    "prometheus",
	    (const char *const[]){"/usr/bin/prometheus", ty_test_strf("--config.file=%s", cfg),
				  ty_test_strf("--storage.tsdb.path=%s/tsdb", dir),
				  ty_test_strf("--web.listen-address=%s", listen), NULL});
	REQUIRE(d != NULL);
	query = ty_test_strf(
	    "http://%s/api/v1/query?query=trainyard_team_gpus_nominal%%7Bteam%%3D%%22%s%%22%%7D",
	    listen, team);
	/* 60 s for the first scrape: a bound on a hang, not a timing assertion */
	for (int i = 0; i < 600; i++) {
		body = http_get(query);
		if (strstr(body, "\"result\":[{"))
			break;
		usleep(100 * 1000);
	}
	ty_test_note("prometheus answered: %s", body);
	CHECK(strstr(body, "\"status\":\"success\"") != NULL);
	CHECK(strstr(body, ty_test_strf("\"team\":\"%s\"", team)) != NULL);
	CHECK(strstr(body, "\"job\":\"trainyard-api\"") != NULL);
	CHECK(strstr(body, ",\"6\"]") != NULL);
	/* the target is healthy: Prometheus parsed every scrape */
	body = http_get(ty_test_strf("http://%s/api/v1/query?query=up", listen));
	CHECK(strstr(body, ",\"1\"]") != NULL);
	CHECK_INT_EQ(ty_test_daemon_stop(d, 5000) & 0x7f, 0);
}
