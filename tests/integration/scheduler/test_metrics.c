/*
 * The scheduler's GET /metrics (--metrics-listen, docs/metrics.md): exact
 * values after real cycles (placements, team GPUs, nodes, pending reasons,
 * a requeue with its retry), the leader and a standby, `promtool check
 * metrics` on both, and a real Prometheus scraping the scheduler.
 */
#include "fixture.h"
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
#include <unistd.h>

#define T 15000

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	ty_buf_append(arg, p, size * n);
	return size * n;
}

/* method url; *status the HTTP status (0 on a transport error); the body (scratch). */
static const char *http(long *status, const char *method, const char *url, const char **ctype)
{
	struct ty_buf b = TY_BUF_INIT;
	CURL *c = curl_easy_init();
	const char *out;
	char *ct = NULL;

	REQUIRE(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	*status = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (ctype) {
		curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
		*ctype = ct ? ty_test_strf("%s", ct) : "";
	}
	curl_easy_cleanup(c);
	out = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return out;
}

/* Start a scheduler serving /metrics on a free port (extra: more flags, NULL-terminated). */
static int sched_with_metrics(struct fx *f, const char *id, const char *const *extra, int *port)
{
	const char *file = ty_test_strf("%s/%s.metrics-port", ty_test_workdir(), id);
	const char *argv[16] = {"--metrics-listen=127.0.0.1:0",
				ty_test_strf("--metrics-port-file=%s", file),
				"--retry-backoff-seconds=3600"};
	int i, n = 3;

	for (int k = 0; extra && extra[k] && n < 15; k++)
		argv[n++] = extra[k];
	unlink(file);
	i = fx_sched_start(f, id, argv);
	*port = 0;
	/* written once it listens, before it stands by */
	for (int k = 0; k < 300 && *port <= 0; k++) {
		FILE *p = fopen(file, "r");

		if (!p || fscanf(p, "%d", port) != 1)
			usleep(50 * 1000);
		if (p)
			fclose(p);
	}
	REQUIRE(*port > 0);
	return i;
}

/* GET /metrics; the case ends unless it is a 200 in the Prometheus text format. */
static const char *scrape(int port)
{
	const char *ctype = NULL;
	long status;
	const char *body =
	    http(&status, "GET", ty_test_strf("http://127.0.0.1:%d/metrics", port), &ctype);

	REQUIRE_INT_EQ(status, 200);
	CHECK_STR_EQ(ctype, "text/plain; version=0.0.4; charset=utf-8");
	return body;
}

/* The value of the sample "series" (name and labels exactly as written), or -1 if absent. */
static double value(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

#define CHECK_VALUE(text, series, want)                                                            \
	do {                                                                                       \
		double got_ = value((text), (series));                                             \
		if (got_ != (double)(want))                                                        \
			ty_test_fail_at(__FILE__, __LINE__, "%s: got %.17g, want %.17g", (series), \
					got_, (double)(want));                                     \
	} while (0)

/* How many consumer lag series text has; *sum gets their total. */
static int lag_series(const char *text, double *sum)
{
	static const char name[] = "trainyard_scheduler_kafka_consumer_lag_messages{";
	int n = 0;

	*sum = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		const char *sp;

		if (strncmp(p, name, sizeof(name) - 1) || !(sp = strchr(p, ' ')))
			continue;
		*sum += strtod(sp + 1, NULL);
		n++;
	}
	return n;
}

/* Scrape until series has value want (a bound on a hang, not a timing assertion). */
static const char *scrape_until(int port, const char *series, double want)
{
	const char *t = "";

	for (int i = 0; i < 300; i++) {
		t = scrape(port);
		if (value(t, series) == want)
			break;
		usleep(50 * 1000);
	}
	CHECK_VALUE(t, series, want);
	return t;
}

/* promtool's exit status on text (its output noted). */
static int promtool_check(const char *text)
{
	const char *in = ty_test_strf("%s/sched-metrics.txt", ty_test_workdir());
	const char *out = ty_test_strf("%s/sched-promtool.out", ty_test_workdir());
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

/*
 * Team mt (nominal 16) gets three 1 × 2-GPU jobs on n1 and n2 (4 GPUs each):
 * all placed. Then a 1 × 8-GPU job that never fits, and one of the three
 * fails with a system error and is requeued with its retry (backoff one
 * hour). A standby serves its metrics too: not leading, no teams.
 */
TY_TEST(leader_and_standby_serve_exact_values)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "mt", 16, -1, NULL);
	const struct proto_msg *l[3];
	const char *t, *sb, *node[3];
	long long job[3];
	int a, b, pa, pb;
	double lag = -1;
	long status;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	a = sched_with_metrics(f, "sched-a", NULL, &pa);
	FX_WAIT(f, T, "1 sched-a", "SELECT epoch || ' ' || holder FROM leader");
	b = sched_with_metrics(f, "sched-b", NULL, &pb);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");

	for (int i = 0; i < 3; i++)
		job[i] = fx_submit_to(
		    f, team, ",'resources':{'nodes':1,'gpus_per_node':2},'retry':{'system':1}");
	for (int i = 0; i < 3; i++) {
		FX_WAIT(f, T, "scheduled", "SELECT state FROM jobs WHERE id = $1", fx_n(job[i]));
		node[i] =
		    ty_test_strf("%s", FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1",
					    fx_n(job[i])));
		l[i] = fx_recv(f, node[i], "launch", job[i], T);
		REQUIRE(l[i] != NULL);
	}
	fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':8},"
				   "'queue_if_unschedulable':true");
	t = scrape_until(pa, "trainyard_scheduler_pending_jobs{reason=\"never_fits\"}", 1);

	CHECK_VALUE(t, "trainyard_scheduler_leader", 1);
	CHECK_VALUE(t, "trainyard_scheduler_epoch", 1);
	CHECK(value(t, "trainyard_scheduler_cycles_total") > 0);
	CHECK(value(t, "trainyard_scheduler_cycle_duration_seconds_count") ==
	      value(t, "trainyard_scheduler_cycles_total"));
	CHECK(value(t, "trainyard_scheduler_decide_duration_seconds_count") ==
	      value(t, "trainyard_scheduler_cycles_total"));
	CHECK_VALUE(t, "trainyard_scheduler_decisions_total{outcome=\"placed\",reason=\"none\"}",
		    3);
	CHECK_VALUE(
	    t, "trainyard_scheduler_decisions_total{outcome=\"backfilled\",reason=\"none\"}", -1);
	CHECK(value(t, "trainyard_scheduler_decisions_total{outcome=\"pending\","
		       "reason=\"never_fits\"}") >= 1);
	CHECK_VALUE(t, "trainyard_scheduler_queue_wait_seconds_count{class=\"normal\"}", 3);
	CHECK(value(t, "trainyard_scheduler_queue_wait_seconds_sum{class=\"normal\"}") >= 0);
	CHECK_VALUE(t, ty_test_strf("trainyard_scheduler_team_gpus_allocated{team=\"%s\"}", team),
		    6);
	CHECK_VALUE(t, ty_test_strf("trainyard_scheduler_team_gpus_nominal{team=\"%s\"}", team),
		    16);
	CHECK_VALUE(t, ty_test_strf("trainyard_scheduler_team_gpus_borrowed{team=\"%s\"}", team),
		    0);
	{
		double fs = value(
		    t, ty_test_strf("trainyard_scheduler_team_fair_share{team=\"%s\"}", team));

		CHECK(fs > 0 && fs <= 1);
	}
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"ready\"}", 2);
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"unschedulable\"}", 0);
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"preempting\"}", 0);
	CHECK_VALUE(t, "trainyard_scheduler_nodes_not_ready", 0);
	CHECK_VALUE(t, "trainyard_scheduler_pending_jobs{reason=\"quota\"}", 0);
	CHECK(value(t, "trainyard_scheduler_oldest_pending_age_seconds") >= 0);
	CHECK_VALUE(t, "trainyard_scheduler_preemptions_total{reason=\"reclaim\"}", 0);
	CHECK_VALUE(t, "trainyard_scheduler_kafka_produce_errors_total", 0);
	CHECK_VALUE(t, "trainyard_scheduler_kafka_delivery_failures_total", 0);
	CHECK_VALUE(t, "trainyard_scheduler_kafka_consume_errors_total", 0);
	CHECK_VALUE(t, "trainyard_scheduler_events_skipped_total", 0);
	CHECK_VALUE(t, "trainyard_scheduler_cycle_failures_total", 0);
	CHECK_INT_EQ(promtool_check(t), 0);

	/* a system failure with a retry left: requeued, waiting for its backoff */
	fx_run(f, node[0], l[0]);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job[0]));
	fx_exit(f, node[0], l[0], 1, "system", "rank 0 was killed by signal 9");
	FX_WAIT(f, T, "pending", "SELECT state FROM jobs WHERE id = $1", fx_n(job[0]));
	t = scrape_until(pa, "trainyard_scheduler_pending_jobs{reason=\"backoff\"}", 1);
	CHECK_VALUE(t, "trainyard_scheduler_requeues_total{failure_class=\"system\"}", 1);
	CHECK_VALUE(t, "trainyard_scheduler_retries_total{failure_class=\"system\"}", 1);
	CHECK_VALUE(t, ty_test_strf("trainyard_scheduler_team_gpus_allocated{team=\"%s\"}", team),
		    4);
	/* the failed job's node was blamed once: still ready */
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"ready\"}", 2);
	/* consumed partitions have a lag, and everything produced was consumed */
	fx_sync(f, T);
	for (int i = 0; i < 300; i++) {
		t = scrape(pa);
		if (lag_series(t, &lag) > 0 && lag == 0)
			break;
		usleep(50 * 1000);
	}
	CHECK(lag_series(t, &lag) > 0);
	CHECK(lag == 0);
	CHECK_INT_EQ(promtool_check(t), 0);

	/* the standby: not leading, no teams, no cycles */
	sb = scrape(pb);
	CHECK_VALUE(sb, "trainyard_scheduler_leader", 0);
	CHECK_VALUE(sb, "trainyard_scheduler_epoch", 0);
	CHECK_VALUE(sb, "trainyard_scheduler_cycles_total", 0);
	CHECK(strstr(sb, "trainyard_scheduler_team_gpus_allocated{") == NULL);
	CHECK(strstr(sb, "trainyard_scheduler_kafka_consumer_lag_messages{") == NULL);
	CHECK_VALUE(sb, "trainyard_scheduler_nodes_not_ready", 0);
	CHECK_INT_EQ(promtool_check(sb), 0);

	/* only GET (and HEAD) /metrics */
	http(&status, "GET", ty_test_strf("http://127.0.0.1:%d/", pa), NULL);
	CHECK_INT_EQ(status, 404);
	http(&status, "GET", ty_test_strf("http://127.0.0.1:%d/metrics/x", pa), NULL);
	CHECK_INT_EQ(status, 404);
	http(&status, "POST", ty_test_strf("http://127.0.0.1:%d/metrics", pa), NULL);
	CHECK_INT_EQ(status, 405);
	http(&status, "DELETE", ty_test_strf("http://127.0.0.1:%d/metrics", pa), NULL);
	CHECK_INT_EQ(status, 405);

	/* the leader goes: the standby leads, and its gauges say so */
	fx_sched_stop(f, a);
	FX_WAIT(f, T, "2 sched-b", "SELECT epoch || ' ' || holder FROM leader");
	t = scrape_until(pb, "trainyard_scheduler_leader", 1);
	CHECK_VALUE(t, "trainyard_scheduler_epoch", 2);
	t = scrape_until(
	    pb, ty_test_strf("trainyard_scheduler_team_gpus_nominal{team=\"%s\"}", team), 16);
	fx_sched_stop(f, b);
}

/*
 * Team a (nominal 2, cohort c1) fills two 2-GPU nodes by borrowing b's idle
 * nominal GPUs; b submits a job: one of a's gangs is preempted to reclaim
 * them (checkpoint grace 0: killed at once), the job waits for it, the
 * victim is requeued (class preempted, no retry spent) and b's job placed.
 */
TY_TEST(reclaim_preemption_and_requeue_are_counted)
{
	struct fx *f = fx_start();
	const char *a = fx_team(f, "a", 2, -1, "c1"), *b = fx_team(f, "b", 2, -1, "c1");
	const char *spec =
	    ",'resources':{'nodes':1,'gpus_per_node':2},'checkpoint':{'grace_seconds':0}";
	const struct proto_msg *l[2], *k;
	const char *node[2], *t, *vnode = NULL;
	long long ja[2], jb, victim;
	int s, port;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	s = sched_with_metrics(
	    f, "sched-r",
	    (const char *const[]){"--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0", NULL},
	    &port);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	for (int i = 0; i < 2; i++) {
		ja[i] = fx_submit_to(f, a, spec);
		FX_WAIT(f, T, "scheduled", "SELECT state FROM jobs WHERE id = $1", fx_n(ja[i]));
		node[i] =
		    ty_test_strf("%s", FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1",
					    fx_n(ja[i])));
		l[i] = fx_recv(f, node[i], "launch", ja[i], T);
		REQUIRE(l[i] != NULL);
		fx_run(f, node[i], l[i]);
	}
	t = scrape_until(port,
			 ty_test_strf("trainyard_scheduler_team_gpus_borrowed{team=\"%s\"}", a), 2);
	CHECK_VALUE(t, ty_test_strf("trainyard_scheduler_team_gpus_allocated{team=\"%s\"}", a), 4);
	CHECK_VALUE(t, ty_test_strf("trainyard_scheduler_team_gpus_allocated{team=\"%s\"}", b), 0);

	jb = fx_submit_to(f, b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "1",
		"SELECT count(*) FROM jobs WHERE id IN ($1, $2) AND state = 'preempting'",
		fx_n(ja[0]), fx_n(ja[1]));
	victim = !strcmp(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(ja[0])), "preempting")
		     ? 0
		     : 1;
	vnode = node[victim];
	t = scrape_until(port, "trainyard_scheduler_preemptions_total{reason=\"reclaim\"}", 1);
	CHECK_VALUE(t, "trainyard_scheduler_preemptions_total{reason=\"priority\"}", 0);
	CHECK_VALUE(t, "trainyard_scheduler_preemptions_total{reason=\"spot\"}", 0);
	t = scrape_until(port, "trainyard_scheduler_pending_jobs{reason=\"preemption\"}", 1);
	CHECK(value(t, "trainyard_scheduler_decisions_total{outcome=\"reserved\","
		       "reason=\"preemption\"}") >= 1);

	/* killed at once (grace 0); the node reports; the victim is requeued, b placed */
	k = fx_recv(f, vnode, "kill", ja[victim], T);
	REQUIRE(k != NULL);
	fx_exit(f, vnode, l[victim], -1, "preempted", "preempted by the scheduler");
	REQUIRE(fx_recv(f, vnode, "launch", jb, T) != NULL);
	t = scrape_until(port, "trainyard_scheduler_requeues_total{failure_class=\"preempted\"}",
			 1);
	CHECK_VALUE(t, "trainyard_scheduler_retries_total{failure_class=\"preempted\"}", -1);
	t = scrape_until(
	    port, ty_test_strf("trainyard_scheduler_team_gpus_allocated{team=\"%s\"}", b), 2);
	CHECK_VALUE(t, "trainyard_scheduler_preemptions_total{reason=\"reclaim\"}", 1);
	CHECK_INT_EQ(promtool_check(t), 0);
	fx_sched_stop(f, s);
}

/*
 * trainyard_node_conditions counts each node's current conditions by kind
 * and severity (a fatal one drains the node, a degraded one does not); a
 * condition no longer listed drops to 0. Invalid entries are counted. A
 * standby serves none.
 */
TY_TEST(node_conditions_are_counted_by_node_kind_and_severity)
{
	static const char xid[] = "{'kind':'xid','severity':'fatal','gpu':0,'code':79,"
				  "'evidence':'Xid 79 on GPU 0','first_seen':1,'last_seen':2}";
	static const char port[] = "{'kind':'port_down','severity':'degraded','port':'mlx5_0/1',"
				   "'evidence':'mlx5_0/1 is DOWN','first_seen':1,'last_seen':2}";
	static const char port2[] = "{'kind':'port_down','severity':'degraded','port':'mlx5_1/1',"
				    "'evidence':'mlx5_1/1 is DOWN','first_seen':1,'last_seen':2}";
	struct fx *f = fx_start();
	const char *t, *sb;
	int a, b, pa, pb;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	a = sched_with_metrics(f, "sched-a", NULL, &pa);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	t = scrape(pa);
	CHECK(strstr(t, "trainyard_node_conditions{") == NULL);
	CHECK_VALUE(t, "trainyard_scheduler_node_conditions_invalid_total", 0);

	fx_node_conditions(f, "n1", ty_test_strf("[%s,%s]", xid, port));
	fx_node_conditions(f, "n2", ty_test_strf("[%s,%s,{'kind':'bad kind'}]", port, port2));
	t = scrape_until(pa, "trainyard_node_conditions{node=\"n2\",kind=\"port_down\","
			     "severity=\"degraded\"}",
			 2);
	t = scrape_until(pa, "trainyard_node_conditions{node=\"n1\",kind=\"xid\","
			     "severity=\"fatal\"}",
			 1);
	CHECK_VALUE(t, "trainyard_node_conditions{node=\"n1\",kind=\"port_down\","
		       "severity=\"degraded\"}",
		    1);
	CHECK(value(t, "trainyard_scheduler_node_conditions_invalid_total") >= 1);
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(id || ':' || state, ',' ORDER BY id) FROM nodes"),
		     "n1:drained,n2:ready");
	CHECK_INT_EQ(promtool_check(t), 0);

	/* n1's degraded one clears: its series is 0, the fatal one stays */
	fx_node_conditions(f, "n1", ty_test_strf("[%s]", xid));
	t = scrape_until(pa, "trainyard_node_conditions{node=\"n1\",kind=\"port_down\","
			     "severity=\"degraded\"}",
			 0);
	CHECK_VALUE(t, "trainyard_node_conditions{node=\"n1\",kind=\"xid\",severity=\"fatal\"}",
		    1);

	/* a standby counts none */
	b = sched_with_metrics(f, "sched-b", NULL, &pb);
	sb = scrape(pb);
	CHECK_VALUE(sb, "trainyard_scheduler_leader", 0);
	CHECK(strstr(sb, "trainyard_node_conditions{") == NULL);
	fx_sched_stop(f, b);
	fx_sched_stop(f, a);
}

/* ---- a real Prometheus ---- */

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

/*
 * Nodes whose register named a fault (the expected inventory) are counted
 * while they have it, whatever their state, and are not ready; the
 * TrainyardNodesNotReady alert reads the gauge.
 */
TY_TEST(nodes_with_a_fault_are_counted)
{
	struct fx *f = fx_start();
	const char *t;
	int a, pa;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_node(f, "n3", 4);
	a = sched_with_metrics(f, "sched-a", NULL, &pa);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	fx_node_register(f, "n1", 3, "'expected_gpus':4,'fault':'found 3 of 4 expected GPUs'");
	fx_node_register(f, "n2", 4,
			 "'expected_gpus':4,'fault':'found 4 GPUs (4 expected), but GPU 4: "
			 "nvmlDeviceGetHandleByIndex_v2: GPU is lost (error 15)'");
	/* a drained node with a fault still has one */
	fx_api(f, "POST", "/v1/nodes/n2/drain", 200);
	t = scrape_until(pa, "trainyard_scheduler_nodes_not_ready", 2);
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"ready\"}", 1);
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"unschedulable\"}", 2);
	CHECK_INT_EQ(promtool_check(t), 0);
	fx_node_register(f, "n1", 4, "'expected_gpus':4,'fault':null");
	t = scrape_until(pa, "trainyard_scheduler_nodes_not_ready", 1);
	CHECK_VALUE(t, "trainyard_scheduler_nodes{state=\"ready\"}", 2);
	fx_node_register(f, "n2", 4, NULL);
	scrape_until(pa, "trainyard_scheduler_nodes_not_ready", 0);
	fx_sched_stop(f, a);
}

TY_TEST(prometheus_scrapes_the_scheduler)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "mprom", 5, -1, NULL);
	const char *dir = ty_test_workdir();
	const char *cfg = ty_test_strf("%s/sched-prometheus.yml", dir);
	const char *listen = ty_test_strf("127.0.0.1:%d", free_port());
	const char *query, *body = "";
	struct ty_daemon *d;
	FILE *c = fopen(cfg, "w");
	long status;
	int port, s;

	s = sched_with_metrics(f, "sched-p", NULL, &port);
	FX_WAIT(f, T, "1 sched-p", "SELECT epoch || ' ' || holder FROM leader");
	REQUIRE(c != NULL);
	fprintf(c,
		"global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
		"scrape_configs:\n  - job_name: trainyard-scheduler\n    scrape_interval: 1s\n"
		"    static_configs:\n      - targets: ['127.0.0.1:%d']\n",
		port);
	fclose(c);
	d = ty_test_daemon_start(
	    "prometheus-sched",
	    (const char *const[]){"/usr/bin/prometheus", ty_test_strf("--config.file=%s", cfg),
				  ty_test_strf("--storage.tsdb.path=%s/sched-tsdb", dir),
				  ty_test_strf("--web.listen-address=%s", listen), NULL});
	REQUIRE(d != NULL);
	query = ty_test_strf("http://%s/api/v1/query?query=trainyard_scheduler_team_gpus_nominal"
			     "%%7Bteam%%3D%%22%s%%22%%7D",
			     listen, team);
	/* 60 s for the first scrape: a bound on a hang, not a timing assertion */
	for (int i = 0; i < 600; i++) {
		body = http(&status, "GET", query, NULL);
		if (strstr(body, "\"result\":[{"))
			break;
		usleep(100 * 1000);
	}
	ty_test_note("prometheus answered: %s", body);
	CHECK(strstr(body, "\"status\":\"success\"") != NULL);
	CHECK(strstr(body, ty_test_strf("\"team\":\"%s\"", team)) != NULL);
	CHECK(strstr(body, "\"job\":\"trainyard-scheduler\"") != NULL);
	CHECK(strstr(body, ",\"5\"]") != NULL);
	body = http(&status, "GET",
		    ty_test_strf("http://%s/api/v1/query?query=trainyard_scheduler_leader", listen),
		    NULL);
	CHECK(strstr(body, ",\"1\"]") != NULL);
	/* the target is healthy: Prometheus parsed every scrape */
	body = http(&status, "GET", ty_test_strf("http://%s/api/v1/query?query=up", listen), NULL);
	CHECK(strstr(body, ",\"1\"]") != NULL);
	CHECK_INT_EQ(ty_test_daemon_stop(d, 5000) & 0x7f, 0);
	fx_sched_stop(f, s);
}
