/*
 * Nodes, attempts and logs (docs/api.md "Attempts and logs", "Nodes"). With
 * no executors here, the rows they and the scheduler would write are seeded
 * with SQL, and a small HTTP server in a thread plays the executors' log
 * endpoint.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- SQL on the stack's database ---- */

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

static const char *lld(long long v)
{
	return ty_test_strf("%lld", v);
}

/* A node row as an executor's registration leaves it. */
static void mk_node(const char *id, const char *address, int gpus, const char *state,
		    const char *log_url)
{
	DB("INSERT INTO nodes (id, address, gpus, state, boot_id, log_url)"
	   " VALUES ($1, $2, $3::int, $4, 'boot-1', $5)",
	   id, address, lld(gpus), state, log_url);
}

/* An attempt row as the scheduler's placement writes it (then updated by the caller). */
static void mk_attempt(long long job, int attempt, const char *state, const char *master_node,
		       int master_port)
{
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch)"
	   " VALUES ($1::bigint, $2::int, $3, 1, $4, (SELECT address FROM nodes WHERE id = $4),"
	   " $5::int, 2, 4, '{}')",
	   lld(job), lld(attempt), state, master_node, lld(master_port));
}

static void mk_alloc(long long job, int attempt, const char *node, int node_rank,
		     const char *gpus, bool released)
{
	DB("INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank, local_ranks,"
	   " gpus, released_at)"
	   " VALUES ($1::bigint, $2::int, $3, $4::int, $4::int * 2, 2, $5::int[],"
	   " CASE WHEN $6::bool THEN now() END)",
	   lld(job), lld(attempt), node, lld(node_rank), gpus, released ? "true" : "false");
}

static void mk_rank(long long job, int attempt, int rank, const char *node)
{
	DB("INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank, pid)"
	   " VALUES ($1::bigint, $2::int, $3::int, $4, $3::int % 2, 1000 + $3::int)",
	   lld(job), lld(attempt), lld(rank), node);
}

/* The object's member names, sorted, joined with ','. */
static const char *keys(const json_t *obj)
{
	const char *names[64], *k;
	size_t n = 0;
	json_t *v;
	char *out;

	json_object_foreach((json_t *)obj, k, v) {
		size_t i = n++;

		if (n > 64)
			return "(too many)";
		while (i > 0 && strcmp(names[i - 1], k) > 0) {
			names[i] = names[i - 1];
			i--;
		}
		names[i] = k;
	}
	out = ty_test_strf("%s", "");
	for (size_t i = 0; i < n; i++)
		out = ty_test_strf("%s%s%s", out, i ? "," : "", names[i]);
	return out;
}

/* The item of list whose "id" is the string id, or NULL. */
static const json_t *find_node(const json_t *list, const char *id)
{
	const json_t *it;
	size_t i;

	json_array_foreach(json_object_get(list, "items"), i, it) {
		if (!strcmp(ty_jstr(it, "id") ? ty_jstr(it, "id") : "", id))
			return it;
	}
	return NULL;
}

static long index_of(const json_t *list, const char *id)
{
	const json_t *it;
	size_t i;

	json_array_foreach(json_object_get(list, "items"), i, it) {
		if (!strcmp(ty_jstr(it, "id") ? ty_jstr(it, "id") : "", id))
			return (long)i;
	}
	return -1;
}

/* ---- a stand-in for the executors' log endpoint ---- */

/*
 * Answers GET <prefix>/logs/<job>/<attempt>/<rank>?tail=N with a body naming
 * the request, so a test sees exactly what the API asked; any path under
 * /broken gets 500, under /gone 404 (no such log). One connection at a time,
 * HTTP/1.0, until the program ends.
 */
static int log_port;
static atomic_int log_requests;

static void serve_one(int c)
{
	char req[4096], method[16] = "", target[1024] = "", body[1200], head[256];
	size_t len = 0;
	ssize_t n;
	struct timeval tv = {5, 0};

	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* the whole request head, so closing does not reset an unread request */
	while (len < sizeof(req) - 1 && (n = read(c, req + len, sizeof(req) - 1 - len)) > 0) {
		len += (size_t)n;
		req[len] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[len] = '\0';
	sscanf(req, "%15s %1023s", method, target);
	atomic_fetch_add(&log_requests, 1);
	if (!strncmp(target, "/broken/", 8)) {
		snprintf(head, sizeof(head),
			 "HTTP/1.0 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n");
		body[0] = '\0';
	} else if (!strncmp(target, "/gone/", 6)) {
		snprintf(head, sizeof(head), "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n");
		body[0] = '\0';
	} else {
		snprintf(body, sizeof(body), "%s %s\nsecond line\n", method, target);
		snprintf(head, sizeof(head),
			 "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
			 strlen(body));
	}
	if (write(c, head, strlen(head)) < 0 || write(c, body, strlen(body)) < 0)
		ty_test_note("log server: write: %s", strerror(errno));
	shutdown(c, SHUT_WR);
	close(c);
}

static void *log_server(void *arg)
{
	int fd = *(int *)arg;

	for (;;) {
		int c = accept(fd, NULL, NULL);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL;
		}
		serve_one(c);
	}
}

/* Listen on 127.0.0.1:0; 0 on failure (reported). */
static int listen_any(bool do_listen, int *fd_out)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    (do_listen && listen(fd, 16)) || getsockname(fd, (struct sockaddr *)&a, &alen)) {
		FAIL("log server socket: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return 0;
	}
	*fd_out = fd;
	return ntohs(a.sin_port);
}

/* Base URL of the log server (started at first use). */
static const char *log_url(void)
{
	static int fd = -1;
	pthread_t t;

	if (!log_port) {
		REQUIRE((log_port = listen_any(true, &fd)) > 0);
		REQUIRE(pthread_create(&t, NULL, log_server, &fd) == 0);
		pthread_detach(t);
	}
	return ty_test_strf("http://127.0.0.1:%d", log_port);
}

/*
 * A URL where nothing answers: a port bound but not listening refuses
 * connections, and stays ours so nobody else can take it.
 */
static const char *dead_url(void)
{
	static int port, fd = -1;

	if (!port)
		REQUIRE((port = listen_any(false, &fd)) > 0);
	return ty_test_strf("http://127.0.0.1:%d", port);
}

/* ---- nodes ---- */

TY_TEST(nodes_list_get_and_state_filter)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("nodes", 16, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *base = ty_uniq("nd");
	const char *a = ty_test_strf("%s-a", base), *b = ty_test_strf("%s-b", base),
		   *c = ty_test_strf("%s-c", base);
	long long j1 = ty_mk_job(s->admin, team, NULL), j2 = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0}, one = {0};
	const json_t *na, *nb, *nc;

	mk_node(a, "10.1.0.1", 8, "ready", "");
	mk_node(b, "10.1.0.2", 4, "draining", "");
	mk_node(c, "10.1.0.3", 2, "lost", "");
	DB("UPDATE nodes SET labels = '{\"rack\":\"r1\",\"zone\":\"z1\"}',"
	   " last_heartbeat = '2026-01-02 03:04:05.678+00',"
	   " registered_at = '2026-01-02 01:00:00+00' WHERE id = $1",
	   a);
	DB("UPDATE nodes SET simulated = true WHERE id = $1", b);
	/* a reports CPUs and memory; b and c do not (older executors): not limited */
	DB("UPDATE nodes SET cpus = 16, memory_mb = 65536 WHERE id = $1", a);
	/* a: j1's old attempt released 4 GPUs, its current one holds 3, j2 holds 1 */
	mk_attempt(j1, 1, "failed", a, 29500);
	DB("UPDATE attempts SET ended_at = now() WHERE job_id = $1::bigint AND attempt = 1",
	   lld(j1));
	mk_alloc(j1, 1, a, 0, "{0,1,2,3}", true);
	mk_alloc(j1, 1, b, 1, "{0,1}", true);
	mk_attempt(j1, 2, "running", a, 29500);
	mk_alloc(j1, 2, a, 0, "{0,1,2}", false);
	mk_attempt(j2, 1, "running", a, 29501);
	mk_alloc(j2, 1, a, 0, "{7}", false);

	ty_http(&r, "GET", "/v1/nodes", viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_is_array(ty_jpath(r.json, "items")));
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")),
		     atoi(DB("SELECT count(*) FROM nodes")));
	na = find_node(r.json, a);
	nb = find_node(r.json, b);
	nc = find_node(r.json, c);
	REQUIRE(na && nb && nc);
	CHECK(index_of(r.json, a) < index_of(r.json, b));
	CHECK(index_of(r.json, b) < index_of(r.json, c));

	CHECK_STR_EQ(keys(na), "address,conditions,cpus_free,cpus_total,drain_reason,expected_gpus,"
			       "failures,fault,gpus_free,gpus_total,hcas,id,isolation,labels,"
			       "last_heartbeat,memory_mb_free,memory_mb_total,preempt,registered_at,"
			       "running,simulated,state");
	CHECK(json_is_array(ty_jpath(na, "conditions")) &&
	      !json_array_size(ty_jpath(na, "conditions")));
	CHECK_JNULL(na, "drain_reason");
	CHECK_JNULL(na, "fault");	  /* its executor expects no GPUs, or found them */
	CHECK_JNULL(na, "expected_gpus");
	CHECK_JNULL(na, "isolation"); /* not reported by this test's registers */
	CHECK_JNULL(na, "preempt");
	CHECK(json_is_array(ty_jpath(na, "hcas")) && !json_array_size(ty_jpath(na, "hcas")));
	CHECK_STR_EQ(keys(ty_jpath(na, "failures")), "count,hardware,jobs,last_at");
	CHECK_JINT(na, "failures.count", 0);
	CHECK_JNULL(na, "failures.last_at");
	CHECK_JSTR(na, "address", "10.1.0.1");
	CHECK_JSTR(na, "state", "ready");
	CHECK(json_is_false(ty_jpath(na, "simulated")));
	CHECK_JSTR(na, "labels.rack", "r1");
	CHECK_JSTR(na, "labels.zone", "z1");
	CHECK_JINT(na, "gpus_total", 8);
	CHECK_JINT(na, "gpus_free", 4); /* released allocations do not count */
	/* two live allocations of jobs with the default 1 CPU and 1024 MiB per node */
	CHECK_JINT(na, "cpus_total", 16);
	CHECK_JINT(na, "cpus_free", 14);
	CHECK_JINT(na, "memory_mb_total", 65536);
	CHECK_JINT(na, "memory_mb_free", 65536 - 2048);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(na, "running")), 2);
	CHECK_STR_EQ(keys(ty_jpath(na, "running[0]")), "attempt,job");
	CHECK_JINT(na, "running[0].job", j1);
	CHECK_JINT(na, "running[0].attempt", 2);
	CHECK_JINT(na, "running[1].job", j2);
	CHECK_JINT(na, "running[1].attempt", 1);
	CHECK_JSTR(na, "last_heartbeat", "2026-01-02T03:04:05.678Z");
	CHECK_JSTR(na, "registered_at", "2026-01-02T01:00:00.000Z");

	CHECK_JSTR(nb, "state", "draining");
	CHECK(json_is_true(ty_jpath(nb, "simulated")));
	CHECK_JINT(nb, "gpus_total", 4);
	CHECK_JINT(nb, "gpus_free", 4);
	CHECK_JNULL(nb, "cpus_total");
	CHECK_JNULL(nb, "cpus_free");
	CHECK_JNULL(nb, "memory_mb_total");
	CHECK_JNULL(nb, "memory_mb_free");
	CHECK(json_is_array(ty_jpath(nb, "running")) && !json_array_size(ty_jpath(nb, "running")));
	CHECK(json_is_object(ty_jpath(nb, "labels")) && !json_object_size(ty_jpath(nb, "labels")));
	CHECK_JTIME(nb, "last_heartbeat");
	CHECK_JTIME(nb, "registered_at");
	CHECK_JSTR(nc, "state", "lost");
	CHECK_JINT(nc, "gpus_free", 2);

	/* one node: the same object as in the list */
	ty_http(&one, "GET", ty_test_strf("/v1/nodes/%s", a), viewer, NULL, NULL);
	REQUIRE_STATUS(&one, 200);
	CHECK(json_equal(one.json, (json_t *)na));
	ty_http(&one, "GET", "/v1/nodes/no-such-node", viewer, NULL, NULL);
	CHECK_PROBLEM(&one, 404, "node_not_found", NULL);
	ty_http(&one, "GET", "/v1/nodes", NULL, NULL, NULL);
	CHECK_PROBLEM(&one, 401, "unauthenticated", NULL);
	ty_http(&one, "GET", ty_test_strf("/v1/nodes/%s", a), NULL, NULL, NULL);
	CHECK_PROBLEM(&one, 401, "unauthenticated", NULL);

	/* the state filter */
	static const struct {
		const char *state;
		bool a, b, c;
	} rows[] = {
	    {"ready", true, false, false},
	    {"draining", false, true, false},
	    {"lost", false, false, true},
	    {"suspect", false, false, false},
	    {"drained", false, false, false},
	    {"not_ready", false, false, false},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const json_t *it;
		size_t k;

		ty_test_context("?state=%s", rows[i].state);
		ty_http(&r, "GET", ty_test_strf("/v1/nodes?state=%s", rows[i].state), viewer,
			NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK(!!find_node(r.json, a) == rows[i].a);
		CHECK(!!find_node(r.json, b) == rows[i].b);
		CHECK(!!find_node(r.json, c) == rows[i].c);
		json_array_foreach(ty_jpath(r.json, "items"), k, it) {
			CHECK_JSTR(it, "state", rows[i].state);
		}
	}
	ty_resp_free(&r);
	ty_resp_free(&one);
}

TY_TEST(nodes_bad_state_and_unknown_node)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};

	ty_http(&r, "GET", "/v1/nodes", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_is_array(ty_jpath(r.json, "items")));
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")),
		     atoi(DB("SELECT count(*) FROM nodes")));
	ty_http(&r, "GET", "/v1/nodes?state=sleeping", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "state");
	CHECK_JSTR(r.json, "detail", "'state' must be 'ready', 'not_ready', 'suspect', 'draining', "
				     "'drained', 'preempting' or 'lost'");
	ty_http(&r, "GET", "/v1/nodes?state=not%20ready", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "state");
	ty_http(&r, "GET", "/v1/nodes/987654321", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "node_not_found", NULL);
	ty_resp_free(&r);
}

/*
 * A condition row as the scheduler records it from a heartbeat (gpu, port,
 * code "": null); cleared: no longer listed.
 */
static void mk_condition(const char *node, const char *kind, const char *severity,
			 const char *gpu, const char *port, const char *code, const char *evidence,
			 const char *first_seen, bool cleared)
{
	DB("INSERT INTO node_conditions (node_id, boot_id, kind, severity, gpu, gpu_uuid, port,"
	   " code, evidence, first_seen, last_seen, cleared_at)"
	   " VALUES ($1, 'boot-1', $2, $3, nullif($4, '')::int, 'GPU-' || nullif($4, ''),"
	   " nullif($5, ''), nullif($6, '')::bigint, $7, $8::timestamptz,"
	   " $8::timestamptz + interval '90 seconds', CASE WHEN $9::bool THEN now() END)",
	   node, kind, severity, gpu, port, code, evidence, first_seen, cleared ? "true" : "false");
}

/*
 * The node's current conditions, fatal first then by first_seen, with
 * every field; cleared ones and other nodes' are not shown. Anyone who
 * reads nodes sees them.
 */
TY_TEST(nodes_show_their_current_conditions)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("conds", 4, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *base = ty_uniq("cd");
	const char *a = ty_test_strf("%s-a", base), *b = ty_test_strf("%s-b", base);
	struct ty_resp r = {0}, one = {0};
	const json_t *na, *c0, *c1;

	mk_node(a, "10.6.0.1", 8, "drained", "");
	mk_node(b, "10.6.0.2", 8, "ready", "");
	DB("UPDATE nodes SET drain_reason = 'hardware: Xid 79 on GPU 0' WHERE id = $1", a);
	mk_condition(a, "port_down", "degraded", "", "mlx5_0/1", "", "mlx5_0/1 is DOWN",
		     "2026-03-01 10:00:00+00", false);
	mk_condition(a, "xid", "fatal", "0", "", "79", "Xid 79 on GPU 0",
		     "2026-03-01 11:00:00.250+00", false);
	mk_condition(a, "thermal_slowdown", "degraded", "1", "", "", "GPU 1 clocks down",
		     "2026-03-01 09:00:00+00", true);
	mk_condition(b, "port_rate_low", "degraded", "", "mlx5_1/1", "", "mlx5_1/1 at 100 Gb/s",
		     "2026-03-01 09:00:00+00", true);

	ty_http(&r, "GET", "/v1/nodes", viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE((na = find_node(r.json, a)) != NULL);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(na, "conditions")), 2);
	c0 = ty_jpath(na, "conditions[0]");
	c1 = ty_jpath(na, "conditions[1]");
	CHECK_STR_EQ(keys(c0), "code,evidence,first_seen,gpu,gpu_uuid,kind,last_seen,port,severity");
	CHECK_JSTR(c0, "kind", "xid");
	CHECK_JSTR(c0, "severity", "fatal");
	CHECK_JINT(c0, "gpu", 0);
	CHECK_JSTR(c0, "gpu_uuid", "GPU-0");
	CHECK_JNULL(c0, "port");
	CHECK_JINT(c0, "code", 79);
	CHECK_JSTR(c0, "evidence", "Xid 79 on GPU 0");
	CHECK_JSTR(c0, "first_seen", "2026-03-01T11:00:00.250Z");
	CHECK_JSTR(c0, "last_seen", "2026-03-01T11:01:30.250Z");
	CHECK_JSTR(c1, "kind", "port_down");
	CHECK_JSTR(c1, "severity", "degraded");
	CHECK_JNULL(c1, "gpu");
	CHECK_JNULL(c1, "gpu_uuid");
	CHECK_JSTR(c1, "port", "mlx5_0/1");
	CHECK_JNULL(c1, "code");
	CHECK_JSTR(na, "drain_reason", "hardware: Xid 79 on GPU 0");
	/* b's only condition was cleared */
	CHECK(json_is_array(ty_jpath(find_node(r.json, b), "conditions")) &&
	      !json_array_size(ty_jpath(find_node(r.json, b), "conditions")));

	ty_http(&one, "GET", ty_test_strf("/v1/nodes/%s", a), s->admin, NULL, NULL);
	REQUIRE_STATUS(&one, 200);
	CHECK(json_equal(ty_jpath(one.json, "conditions"), ty_jpath(na, "conditions")));
	ty_resp_free(&r);
	ty_resp_free(&one);
}

/*
 * A node whose register named a fault (the expected inventory; the
 * scheduler writes nodes.fault and expected_gpus): shown `not_ready` while
 * its state is ready, its other states as they are, with the fault and the
 * expected count; ?state= filters by the state shown; an undrain leaves
 * the fault.
 */
TY_TEST(a_node_with_a_fault_is_shown_not_ready)
{
	static const char lost[] =
	    "found 7 of 8 expected GPUs; GPU 3: nvmlDeviceGetUUID: GPU is lost (error 15)";
	const struct ty_stack *s = ty_stack_get();
	const char *base = ty_uniq("nf");
	const char *bad = ty_test_strf("%s-bad", base), *off = ty_test_strf("%s-off", base),
		   *good = ty_test_strf("%s-good", base);
	struct ty_resp r = {0};
	const json_t *n;

	mk_node(bad, "10.3.0.1", 7, "ready", "");
	mk_node(off, "10.3.0.2", 4, "drained", "");
	mk_node(good, "10.3.0.3", 8, "ready", "");
	DB("UPDATE nodes SET fault = $2, expected_gpus = 8 WHERE id = $1", bad, lost);
	DB("UPDATE nodes SET fault = 'found 3 of 4 expected GPUs', expected_gpus = 4,"
	   " drain_reason = 'drained by an admin' WHERE id = $1",
	   off);
	DB("UPDATE nodes SET expected_gpus = 8 WHERE id = $1", good);

	ty_http(&r, "GET", ty_test_strf("/v1/nodes/%s", bad), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "not_ready");
	CHECK_JSTR(r.json, "fault", lost);
	CHECK_JINT(r.json, "expected_gpus", 8);
	CHECK_JINT(r.json, "gpus_total", 7);
	ty_http(&r, "GET", "/v1/nodes", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE((n = find_node(r.json, off)) != NULL);
	CHECK_JSTR(n, "state", "drained"); /* the admin's state, the fault beside it */
	CHECK_JSTR(n, "fault", "found 3 of 4 expected GPUs");
	CHECK_JINT(n, "expected_gpus", 4);
	REQUIRE((n = find_node(r.json, good)) != NULL);
	CHECK_JSTR(n, "state", "ready");
	CHECK_JNULL(n, "fault");
	CHECK_JINT(n, "expected_gpus", 8);

	ty_http(&r, "GET", "/v1/nodes?state=not_ready", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(find_node(r.json, bad) != NULL);
	CHECK(find_node(r.json, off) == NULL);
	CHECK(find_node(r.json, good) == NULL);
	ty_http(&r, "GET", "/v1/nodes?state=ready", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(find_node(r.json, bad) == NULL);
	CHECK(find_node(r.json, good) != NULL);

	/* the undrain ends the admin's drain, not the fault */
	ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/undrain", off), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "not_ready");
	CHECK_JNULL(r.json, "drain_reason");
	CHECK_JSTR(r.json, "fault", "found 3 of 4 expected GPUs");
	CHECK_STR_EQ(DB("SELECT state FROM nodes WHERE id = $1", off), "ready");
	/* and a drain of a node with a fault is an ordinary drain */
	ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/drain", bad), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "drained");
	CHECK_JSTR(r.json, "fault", lost);
	ty_resp_free(&r);
}

/* ---- drain and undrain ---- */

TY_TEST(drain_and_undrain_states_audit_and_idempotence)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("drain", 16, -1);
	const char *base = ty_uniq("dr");
	const char *busy = ty_test_strf("%s-busy", base), *idle = ty_test_strf("%s-idle", base),
		   *gone = ty_test_strf("%s-gone", base), *sus = ty_test_strf("%s-sus", base);
	long long j = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};
	/* node, action, state after, drain_reason after (NULL: null) */
	static const struct {
		int node; /* 0 busy, 1 idle, 2 gone, 3 sus */
		const char *action, *state, *reason;
	} steps[] = {
	    {0, "drain", "draining", "drained by an admin"},
	    {0, "drain", "draining", "drained by an admin"}, /* idempotent */
	    {1, "drain", "drained", "drained by an admin"},
	    {1, "drain", "drained", "drained by an admin"},
	    {2, "drain", "lost", "drained by an admin"}, /* comes back drained */
	    {3, "drain", "drained", "drained by an admin"},
	    {0, "undrain", "ready", NULL},
	    {0, "undrain", "ready", NULL},
	    {1, "undrain", "ready", NULL},
	    {2, "undrain", "lost", NULL}, /* comes back ready */
	};
	const char *ids[4];

	ids[0] = busy;
	ids[1] = idle;
	ids[2] = gone;
	ids[3] = sus;
	mk_node(busy, "10.3.0.1", 8, "ready", "");
	mk_node(idle, "10.3.0.2", 8, "ready", "");
	mk_node(gone, "10.3.0.3", 8, "lost", "");
	mk_node(sus, "10.3.0.4", 8, "suspect", "");
	mk_attempt(j, 1, "running", busy, 29500);
	mk_alloc(j, 1, busy, 0, "{0,1}", false);
	DB("INSERT INTO node_failures (node_id, job_id, attempt, failure_class, evidence,"
	   " created_at) VALUES ($1, $2::bigint, 1, 'hardware', 'Xid 79', '2026-01-01 00:00:00+00')",
	   busy, lld(j));

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		const char *id = ids[steps[i].node];

		ty_test_context("step %zu: %s %s", i, steps[i].action, id);
		ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/%s", id, steps[i].action), s->admin,
			NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JSTR(r.json, "id", id);
		CHECK_JSTR(r.json, "state", steps[i].state);
		if (steps[i].reason)
			CHECK_JSTR(r.json, "drain_reason", steps[i].reason);
		else
			CHECK_JNULL(r.json, "drain_reason");
		CHECK_STR_EQ(DB("SELECT state FROM nodes WHERE id = $1", id), steps[i].state);
		if (steps[i].node == 0 && !strcmp(steps[i].action, "drain"))
			CHECK_JINT(r.json, "failures.hardware", 1); /* a drain keeps the count */
		if (!strcmp(steps[i].action, "undrain"))
			CHECK_JINT(r.json, "failures.count", 0); /* an undrain forgets it */
	}
	ty_test_context(NULL);
	/* each call is audited, with the admin's token */
	CHECK_STR_EQ(DB("SELECT string_agg(action, ',' ORDER BY id) FROM audit_log WHERE object = $1",
			busy),
		     "node.drain,node.drain,node.undrain,node.undrain");
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_log a JOIN api_tokens t ON t.id = a.token_id"
			" WHERE a.object = $1 AND t.role = 'admin'",
			idle),
		     "3");
	/* the failure rows stay; only the count restarts */
	CHECK_STR_EQ(DB("SELECT count(*) FROM node_failures WHERE node_id = $1", busy), "1");
	ty_resp_free(&r);
}

TY_TEST(drain_and_undrain_auth_and_unknown_node)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("drauth", 8, -1);
	const char *member = ty_mk_token("member", team), *viewer = ty_mk_token("viewer", team);
	const char *node = ty_uniq("dra");
	static const char *const actions[] = {"drain", "undrain"};
	struct ty_resp r = {0};

	mk_node(node, "10.4.0.1", 8, "ready", "");
	for (int a = 0; a < 2; a++) {
		const char *path = ty_test_strf("/v1/nodes/%s/%s", node, actions[a]);

		ty_test_context("%s", actions[a]);
		ty_http(&r, "POST", path, NULL, NULL, NULL);
		CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
		ty_http(&r, "POST", path, viewer, NULL, NULL);
		CHECK_PROBLEM(&r, 403, "forbidden", NULL);
		ty_http(&r, "POST", path, member, NULL, NULL);
		CHECK_PROBLEM(&r, 403, "forbidden", NULL);
		CHECK_STR_EQ(DB("SELECT state FROM nodes WHERE id = $1", node), "ready");
		ty_http(&r, "POST", ty_test_strf("/v1/nodes/no-such-node/%s", actions[a]), s->admin,
			NULL, NULL);
		CHECK_PROBLEM(&r, 404, "node_not_found", NULL);
		ty_http(&r, "GET", path, s->admin, NULL, NULL);
		CHECK_STATUS(&r, 405);
	}
	ty_test_context(NULL);
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_log WHERE object IN ($1, 'no-such-node')", node),
		     "0");
	ty_resp_free(&r);
}

/* ---- the local spot trigger ---- */

TY_TEST(preempt_states_deadline_and_audit)
{
	const struct ty_stack *s = ty_stack_get();
	const char *base = ty_uniq("pre");
	const char *rdy = ty_test_strf("%s-rdy", base), *drn = ty_test_strf("%s-drn", base),
		   *gone = ty_test_strf("%s-gone", base);
	struct ty_resp r = {0};
	/* node, body, state after, deadline seconds from now (-1: not preempting) */
	static const struct {
		int node; /* 0 ready, 1 drained, 2 lost */
		const char *body;
		const char *state;
		int deadline;
	} steps[] = {
	    {0, "{}", "preempting", 30}, /* the default deadline */
	    {0, "{\"deadline_seconds\": 120}", "preempting", 120}, /* a new notice replaces it */
	    {0, "{\"deadline_seconds\": 0}", "preempting", 0},
	    {1, "{\"deadline_seconds\": 3600}", "preempting", 3600},
	    {2, "{\"deadline_seconds\": 10}", "lost", -1}, /* a lost node stays lost */
	};
	const char *ids[3];

	ids[0] = rdy;
	ids[1] = drn;
	ids[2] = gone;
	mk_node(rdy, "10.5.0.1", 8, "ready", "");
	mk_node(drn, "10.5.0.2", 8, "drained", "");
	mk_node(gone, "10.5.0.3", 8, "lost", "");
	DB("UPDATE nodes SET drain_reason = 'drained by an admin' WHERE id = $1", drn);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		const char *id = ids[steps[i].node];

		ty_test_context("step %zu: %s %s", i, id, steps[i].body);
		ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/preempt", id), s->admin,
			steps[i].body, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_JSTR(r.json, "id", id);
		CHECK_JSTR(r.json, "state", steps[i].state);
		CHECK_STR_EQ(DB("SELECT state FROM nodes WHERE id = $1", id), steps[i].state);
		if (steps[i].deadline < 0) {
			CHECK_JNULL(r.json, "preempt");
			continue;
		}
		CHECK_STR_EQ(keys(ty_jpath(r.json, "preempt")), "deadline,notice");
		CHECK_JTIME(r.json, "preempt.deadline");
		CHECK_JSTR(r.json, "preempt.notice.provider", "local");
		CHECK_STR_EQ(DB("SELECT abs(extract(epoch FROM preempt_deadline - now())"
				" - $2::int) < 5 FROM nodes WHERE id = $1",
				id, lld(steps[i].deadline)),
			     "t");
		/* an API notice is not ended by the executor's heartbeats */
		CHECK_STR_EQ(DB("SELECT preempt_seq IS NULL FROM nodes WHERE id = $1", id), "t");
	}
	ty_test_context(NULL);
	/* the drain reason stays: the node comes back drained after its notice */
	CHECK_STR_EQ(DB("SELECT drain_reason FROM nodes WHERE id = $1", drn), "drained by an admin");
	/* a drain keeps a preempting node preempting; undrain ends it */
	ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/drain", rdy), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "preempting");
	ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/undrain", rdy), s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "ready");
	CHECK_JNULL(r.json, "preempt");
	CHECK_STR_EQ(DB("SELECT preempt_deadline IS NULL AND preempt_notice IS NULL FROM nodes"
			" WHERE id = $1",
			rdy),
		     "t");
	/* the state filter knows it */
	ty_http(&r, "GET", "/v1/nodes?state=preempting", s->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(find_node(r.json, drn) != NULL && find_node(r.json, rdy) == NULL);
	CHECK_STR_EQ(DB("SELECT string_agg(action, ',' ORDER BY id) FROM audit_log WHERE object = $1",
			rdy),
		     "node.preempt,node.preempt,node.preempt,node.drain,node.undrain");
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_log a JOIN api_tokens t ON t.id = a.token_id"
			" WHERE a.object = $1 AND t.role = 'admin' AND a.action = 'node.preempt'",
			gone),
		     "1");
	ty_resp_free(&r);
}

TY_TEST(preempt_auth_bad_deadline_and_unknown_node)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("preauth", 8, -1);
	const char *member = ty_mk_token("member", team), *viewer = ty_mk_token("viewer", team);
	const char *node = ty_uniq("pra");
	const char *path = ty_test_strf("/v1/nodes/%s/preempt", node);
	struct ty_resp r = {0};
	/* body, status, code, field */
	static const struct {
		const char *body;
		int status;
		const char *code, *field;
	} bad[] = {
	    {"{\"deadline_seconds\": -1}", 422, "invalid_field", "deadline_seconds"},
	    {"{\"deadline_seconds\": 3601}", 422, "invalid_field", "deadline_seconds"},
	    {"{\"deadline_seconds\": 1.5}", 422, "invalid_field", "deadline_seconds"},
	    {"{\"deadline_seconds\": \"30\"}", 422, "invalid_field", "deadline_seconds"},
	    {"{\"deadline_seconds\": null}", 422, "invalid_field", "deadline_seconds"},
	    {"{\"deadline\": 30}", 400, "unknown_field", "deadline"},
	    {"[30]", 400, "invalid_json", NULL},
	    {"{", 400, "invalid_json", NULL},
	};

	mk_node(node, "10.6.0.1", 8, "ready", "");
	ty_http(&r, "POST", path, NULL, "{}", NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_http(&r, "POST", path, viewer, "{}", NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	ty_http(&r, "POST", path, member, "{}", NULL);
	CHECK_PROBLEM(&r, 403, "forbidden", NULL);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("body %s", bad[i].body);
		ty_http(&r, "POST", path, s->admin, bad[i].body, NULL);
		CHECK_PROBLEM(&r, bad[i].status, bad[i].code, bad[i].field);
	}
	ty_test_context(NULL);
	CHECK_STR_EQ(DB("SELECT state FROM nodes WHERE id = $1", node), "ready");
	ty_http(&r, "POST", "/v1/nodes/no-such-node/preempt", s->admin, "{}", NULL);
	CHECK_PROBLEM(&r, 404, "node_not_found", NULL);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_STATUS(&r, 405);
	CHECK_STR_EQ(DB("SELECT count(*) FROM audit_log WHERE object IN ($1, 'no-such-node')", node),
		     "0");
	ty_resp_free(&r);
}

/* ---- attempts ---- */

TY_TEST(pending_job_has_no_attempts)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("att", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", id), viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_STR_EQ(keys(r.json), "items");
	CHECK(json_is_array(ty_jpath(r.json, "items")));
	CHECK_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 0);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", id), viewer, NULL, NULL);
	CHECK_JINT(r.json, "attempt", 0);
	CHECK_JNULL(r.json, "failure_class");
	ty_http(&r, "GET", "/v1/jobs/987654321/attempts", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", "/v1/jobs/abc/attempts", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(attempts_content_and_order)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("att", 8, -1), *other = ty_mk_team("att", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *stranger = ty_mk_token("member", other);
	const char *base = ty_uniq("an");
	const char *x = ty_test_strf("%s-x", base), *y = ty_test_strf("%s-y", base);
	long long j = ty_mk_job(s->admin, team, NULL);
	const char *js = lld(j);
	const char *path = ty_test_strf("/v1/jobs/%lld/attempts", j);
	struct ty_resp r = {0};
	const json_t *a1, *a2;

	mk_node(x, "10.2.0.1", 8, "ready", "");
	mk_node(y, "10.2.0.2", 8, "ready", "");
	/* rows written out of order: the answer orders them */
	mk_attempt(j, 2, "running", y, 29600);
	DB("UPDATE attempts SET running_at = now() WHERE job_id = $1::bigint AND attempt = 2", js);
	mk_attempt(j, 1, "failed", x, 29500);
	DB("UPDATE attempts SET created_at = '2026-01-01 00:00:00+00',"
	   " running_at = '2026-01-01 00:01:00+00', ended_at = '2026-01-01 00:02:00.5+00',"
	   " exit_code = 1, failure_class = 'user', message = 'rank 3 exited with 1'"
	   " WHERE job_id = $1::bigint AND attempt = 1",
	   js);
	mk_alloc(j, 1, y, 1, "{2,3}", true);
	mk_alloc(j, 1, x, 0, "{0,1}", true);
	DB("UPDATE allocations SET exit_code = 1, failure_class = 'user'"
	   " WHERE job_id = $1::bigint AND attempt = 1 AND node_id = $2",
	   js, y);
	DB("UPDATE allocations SET exit_code = 0 WHERE job_id = $1::bigint AND attempt = 1"
	   " AND node_id = $2",
	   js, x);
	mk_rank(j, 1, 3, y);
	mk_rank(j, 1, 1, x);
	mk_rank(j, 1, 2, y);
	mk_rank(j, 1, 0, x);
	DB("UPDATE ranks SET exit_code = 0, signal = 0, ended_at = now()"
	   " WHERE job_id = $1::bigint AND attempt = 1 AND rank IN (0, 1)",
	   js);
	DB("UPDATE ranks SET signal = 15, ended_at = now()"
	   " WHERE job_id = $1::bigint AND attempt = 1 AND rank = 2",
	   js);
	DB("UPDATE ranks SET exit_code = 1, signal = 0, ended_at = now()"
	   " WHERE job_id = $1::bigint AND attempt = 1 AND rank = 3",
	   js);
	mk_alloc(j, 2, y, 0, "{4,5}", false);
	mk_alloc(j, 2, x, 1, "{6,7}", false);
	mk_rank(j, 2, 0, y); /* x has not reported its ranks yet */
	mk_rank(j, 2, 1, y);
	DB("UPDATE jobs SET state = 'running', attempt = 2, failure_class = 'user'"
	   " WHERE id = $1::bigint",
	   js);
	/* attempt 1's GPU telemetry as the scheduler keeps it: x reported, y did not */
	DB("UPDATE allocations SET telemetry = '{\"samples\": 10, \"gpus\": 2,"
	   " \"util_mean\": 41.5, \"idle_seconds\": 3}'"
	   " WHERE job_id = $1::bigint AND attempt = 1 AND node_id = $2",
	   js, x);
	DB("UPDATE attempts SET gpu_telemetry = '{\"util_mean\": 41.5, \"util_peak\": null,"
	   " \"memory_used_peak_mb\": null, \"power_mean_w\": null, \"power_peak_w\": null,"
	   " \"idle_gpu_seconds\": 6, \"samples\": 10, \"nodes_reported\": 1}'"
	   " WHERE job_id = $1::bigint AND attempt = 1",
	   js);

	ty_http(&r, "GET", path, viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	REQUIRE_INT_EQ(json_array_size(ty_jpath(r.json, "items")), 2);
	a1 = ty_jpath(r.json, "items[0]");
	a2 = ty_jpath(r.json, "items[1]");
	CHECK_STR_EQ(keys(a1), "attempt,blamed_node,created_at,duration_seconds,ended_at,evidence,"
			       "exit_code,failure_class,gpu_telemetry,master_addr,master_port,"
			       "message,nnodes,nodes,progress,ranks,resume,running_at,spot_node,"
			       "state,stragglers,world_size");
	/* no rank wrote a step: neither progress nor stragglers yet */
	CHECK(json_is_null(ty_jpath(a1, "progress")) && json_is_null(ty_jpath(a1, "stragglers")));
	CHECK_STR_EQ(keys(ty_jpath(a1, "gpu_telemetry")),
		     "idle_gpu_seconds,memory_used_peak_mb,nodes_reported,power_mean_w,"
		     "power_peak_w,samples,util_mean,util_peak");
	CHECK(json_number_value(ty_jpath(a1, "gpu_telemetry.util_mean")) == 41.5);
	CHECK(json_number_value(ty_jpath(a1, "gpu_telemetry.idle_gpu_seconds")) == 6);
	CHECK_JNULL(a1, "gpu_telemetry.util_peak");
	CHECK_JINT(a1, "gpu_telemetry.samples", 10);
	CHECK_JNULL(a1, "resume"); /* not reported */
	CHECK_JNULL(a1, "spot_node");
	CHECK_JNULL(a1, "evidence");
	CHECK_JNULL(a1, "blamed_node");
	/* ended − created: 2 min 0.5 s */
	CHECK(json_is_number(ty_jpath(a1, "duration_seconds")) &&
	      json_number_value(ty_jpath(a1, "duration_seconds")) == 120.5);
	CHECK_JINT(a1, "attempt", 1);
	CHECK_JSTR(a1, "state", "failed");
	CHECK_JSTR(a1, "master_addr", "10.2.0.1");
	CHECK_JINT(a1, "master_port", 29500);
	CHECK_JINT(a1, "nnodes", 2);
	CHECK_JINT(a1, "world_size", 4);
	CHECK_JINT(a1, "exit_code", 1);
	CHECK_JSTR(a1, "failure_class", "user");
	CHECK_JSTR(a1, "message", "rank 3 exited with 1");
	CHECK_JSTR(a1, "created_at", "2026-01-01T00:00:00.000Z");
	CHECK_JSTR(a1, "running_at", "2026-01-01T00:01:00.000Z");
	CHECK_JSTR(a1, "ended_at", "2026-01-01T00:02:00.500Z");
	/* nodes in node rank order */
	REQUIRE_INT_EQ(json_array_size(ty_jpath(a1, "nodes")), 2);
	CHECK_STR_EQ(keys(ty_jpath(a1, "nodes[0]")),
		     "exit_code,failure_class,gpu_telemetry,gpus,node,node_rank");
	CHECK(json_number_value(ty_jpath(a1, "nodes[0].gpu_telemetry.idle_seconds")) == 3);
	CHECK_JNULL(a1, "nodes[1].gpu_telemetry");
	CHECK_JSTR(a1, "nodes[0].node", x);
	CHECK_JINT(a1, "nodes[0].node_rank", 0);
	CHECK_JINT(a1, "nodes[0].gpus[0]", 0);
	CHECK_JINT(a1, "nodes[0].gpus[1]", 1);
	CHECK_INT_EQ(json_array_size(ty_jpath(a1, "nodes[0].gpus")), 2);
	CHECK_JINT(a1, "nodes[0].exit_code", 0);
	CHECK_JNULL(a1, "nodes[0].failure_class");
	CHECK_JSTR(a1, "nodes[1].node", y);
	CHECK_JINT(a1, "nodes[1].node_rank", 1);
	CHECK_JINT(a1, "nodes[1].gpus[0]", 2);
	CHECK_JINT(a1, "nodes[1].exit_code", 1);
	CHECK_JSTR(a1, "nodes[1].failure_class", "user");
	/* ranks in rank order */
	REQUIRE_INT_EQ(json_array_size(ty_jpath(a1, "ranks")), 4);
	CHECK_STR_EQ(keys(ty_jpath(a1, "ranks[0]")), "exit_code,local_rank,node,pid,rank,signal");
	for (int k = 0; k < 4; k++) {
		const json_t *rk = ty_jpath(a1, ty_test_strf("ranks[%d]", k));

		ty_test_context("attempt 1 rank %d", k);
		CHECK_JINT(rk, "rank", k);
		CHECK_JSTR(rk, "node", k < 2 ? x : y);
		CHECK_JINT(rk, "local_rank", k % 2);
		CHECK_JINT(rk, "pid", 1000 + k);
	}
	ty_test_context(NULL);
	CHECK_JINT(a1, "ranks[0].exit_code", 0);
	CHECK_JINT(a1, "ranks[0].signal", 0);
	CHECK_JNULL(a1, "ranks[2].exit_code");
	CHECK_JINT(a1, "ranks[2].signal", 15);
	CHECK_JINT(a1, "ranks[3].exit_code", 1);

	CHECK_STR_EQ(keys(a2), keys(a1));
	CHECK_JINT(a2, "attempt", 2);
	CHECK_JSTR(a2, "state", "running");
	CHECK_JSTR(a2, "master_addr", "10.2.0.2");
	CHECK_JNULL(a2, "exit_code");
	CHECK_JNULL(a2, "failure_class");
	CHECK_JNULL(a2, "message");
	CHECK_JTIME(a2, "created_at");
	CHECK_JTIME(a2, "running_at");
	CHECK_JNULL(a2, "ended_at");
	CHECK_JNULL(a2, "gpu_telemetry"); /* nothing until a node reports, as it ends */
	CHECK_JSTR(a2, "nodes[0].node", y);
	CHECK_JSTR(a2, "nodes[1].node", x);
	CHECK_JNULL(a2, "nodes[0].exit_code");
	CHECK_INT_EQ(json_array_size(ty_jpath(a2, "ranks")), 2);
	CHECK_JNULL(a2, "ranks[1].exit_code");
	CHECK_JNULL(a2, "ranks[1].signal");

	/* the job object carries the current attempt and the last failure */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", j), viewer, NULL, NULL);
	CHECK_JINT(r.json, "attempt", 2);
	CHECK_JSTR(r.json, "failure_class", "user");
	CHECK_JSTR(r.json, "state", "running");

	/* another team's job does not exist for the caller */
	ty_http(&r, "GET", path, stranger, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", path, s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "GET", path, NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_resp_free(&r);
}

/* ---- logs ---- */

TY_TEST(logs_before_any_attempt)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("logs", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs", id), s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=3&tail=10", id), s->admin, NULL,
		NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);
	ty_http(&r, "GET", "/v1/jobs/987654321/logs", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_resp_free(&r);
}

TY_TEST(logs_bad_parameters)
{
	static const struct {
		const char *query, *field;
	} rows[] = {
	    {"tail=0", "tail"},	       {"tail=10001", "tail"}, {"tail=x", "tail"},
	    {"tail=", "tail"},	       {"tail=-5", "tail"},    {"rank=-1", "rank"},
	    {"rank=x", "rank"},	       {"rank=", "rank"},      {"rank=1.5", "rank"},
	    {"attempt=x", "attempt"},  {"attempt=0", "attempt"}, {"attempt=-1", "attempt"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("logp", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?%s", id, rows[i].query),
			s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
	}
	ty_resp_free(&r);
}

/*
 * Numbers too large for a rank or an attempt are malformed parameters like
 * the others (docs/api.md: 400 invalid_parameter), not a database error.
 */
TY_TEST(logs_out_of_range_numbers)
{
	static const struct {
		const char *query, *field;
	} rows[] = {
	    {"rank=99999999999", "rank"},
	    {"attempt=99999999999", "attempt"},
	    {"tail=99999999999", "tail"},
	};
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("logr", 8, -1);
	long long id = ty_mk_job(s->admin, team, NULL);
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?%s", id, rows[i].query),
			s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", rows[i].field);
	}
	ty_resp_free(&r);
}

TY_TEST(logs_relayed_from_the_node)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("logs", 8, -1), *other = ty_mk_team("logs", 8, -1);
	const char *viewer = ty_mk_token("viewer", team);
	const char *stranger = ty_mk_token("viewer", other);
	const char *base = ty_uniq("lg");
	const char *up = ty_test_strf("%s-up", base), *broken = ty_test_strf("%s-broken", base),
		   *dead = ty_test_strf("%s-dead", base), *gone = ty_test_strf("%s-gone", base);
	long long j = ty_mk_job(s->admin, team, NULL);
	const char *logs = ty_test_strf("/v1/jobs/%lld/logs", j);
	struct ty_resp r = {0};
	const char *ct;
	int before;

	mk_node(up, "10.3.0.1", 8, "ready", log_url());
	mk_node(broken, "10.3.0.2", 8, "ready", ty_test_strf("%s/broken", log_url()));
	mk_node(dead, "10.3.0.3", 8, "ready", dead_url());
	mk_node(gone, "10.3.0.4", 8, "ready", ty_test_strf("%s/gone", log_url()));
	mk_attempt(j, 1, "failed", up, 29500);
	DB("UPDATE attempts SET ended_at = now(), exit_code = 1, failure_class = 'user'"
	   " WHERE job_id = $1::bigint AND attempt = 1",
	   lld(j));
	mk_rank(j, 1, 0, up);
	mk_rank(j, 1, 1, up);
	mk_rank(j, 1, 2, broken);
	mk_rank(j, 1, 3, dead);
	mk_rank(j, 1, 5, gone);
	mk_attempt(j, 2, "running", up, 29500);
	mk_rank(j, 2, 0, up);
	mk_rank(j, 2, 1, dead);
	DB("UPDATE jobs SET state = 'running', attempt = 2 WHERE id = $1::bigint", lld(j));

	/* defaults: rank 0 of the current attempt, the last 100 lines */
	ty_http(&r, "GET", logs, viewer, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ct = ty_resp_header(&r, "Content-Type");
	CHECK(ct && !strncmp(ct, "text/plain", 10));
	CHECK_STR_EQ(r.body, ty_test_strf("GET /logs/%lld/2/0?tail=100\nsecond line\n", j));

	static const struct {
		const char *query, *want; /* want: the executor's path after /logs/<job>/ */
	} rows[] = {
	    {"rank=0", "2/0?tail=100"},
	    {"rank=1&attempt=1&tail=5", "1/1?tail=5"},
	    {"attempt=1", "1/0?tail=100"},
	    {"tail=1", "2/0?tail=1"},
	    {"tail=10000&attempt=2", "2/0?tail=10000"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("?%s", rows[i].query);
		ty_http(&r, "GET", ty_test_strf("%s?%s", logs, rows[i].query), viewer, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK_STR_EQ(r.body,
			     ty_test_strf("GET /logs/%lld/%s\nsecond line\n", j, rows[i].want));
	}
	ty_test_context(NULL);

	/* a rank the attempt does not have (yet) */
	ty_http(&r, "GET", ty_test_strf("%s?rank=2", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);
	ty_http(&r, "GET", ty_test_strf("%s?rank=4&attempt=1", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);
	ty_http(&r, "GET", ty_test_strf("%s?attempt=3", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "rank_not_found", TY_FIELD_UNCHECKED);

	/* the node answers with an error, or not at all */
	ty_http(&r, "GET", ty_test_strf("%s?rank=2&attempt=1", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 503, "logs_unavailable", NULL);
	ty_http(&r, "GET", ty_test_strf("%s?rank=3&attempt=1", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 503, "logs_unavailable", NULL);
	ty_http(&r, "GET", ty_test_strf("%s?rank=1", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 503, "logs_unavailable", NULL);
	/* the node has no log for the rank (yet): the client's 404, not the node's fault */
	ty_http(&r, "GET", ty_test_strf("%s?rank=5&attempt=1", logs), viewer, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "log_not_found", "rank");

	/* another team's job: not found, and its node is never asked */
	before = atomic_load(&log_requests);
	ty_http(&r, "GET", logs, stranger, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	ty_http(&r, "GET", ty_test_strf("%s?rank=1&attempt=1", logs), stranger, NULL, NULL);
	CHECK_PROBLEM(&r, 404, "job_not_found", NULL);
	CHECK_INT_EQ(atomic_load(&log_requests), before);
	ty_http(&r, "GET", logs, s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_http(&r, "GET", logs, NULL, NULL, NULL);
	CHECK_PROBLEM(&r, 401, "unauthenticated", NULL);
	ty_resp_free(&r);
}
