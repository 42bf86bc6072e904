/*
 * GPU telemetry and idle GPUs (docs/dispatch.md, "GPU telemetry and idle
 * GPUs"), the test playing the executors: a gang's attempt_exited
 * telemetry combined into the attempt's summary and the ledger's idle
 * GPU-seconds; malformed telemetry ignored while the exit is applied; and
 * heartbeats reporting an attempt idle beyond its team's limit writing one
 * gpus_idle event per idle stretch, on both heartbeat paths, with the API's
 * trainyard_jobs_gpus_idle gauge following.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define T 15000 /* generous upper bound for anything to happen */

#define JOB_STATE "SELECT state FROM jobs WHERE id = $1"
#define IDLE_EVENTS "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'gpus_idle'"

static json_t *attempt_json(struct fx *f, long long job)
{
	json_t *body =
	    json_loads(fx_api(f, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), 200), 0, NULL);
	json_t *a = json_incref(json_array_get(json_object_get(body, "items"), 0));

	json_decref(body);
	REQUIRE(a != NULL);
	return a;
}

static double num(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_number(v)) {
		FAIL("'%s' is not a number", key);
		return -1;
	}
	return json_number_value(v);
}

/*
 * A placed and running one-node job of team (NULL: the case's): its launch;
 * *node gets the node it runs on (scratch).
 */
static const struct proto_msg *running_job(struct fx *f, const char *team, const char **node,
					   long long *job)
{
	const struct proto_msg *l;

	*job = team ? fx_submit_to(f, team, ",'resources':{'nodes':1,'gpus_per_node':2}")
		    : fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(*job));
	*node = FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(*job));
	l = fx_recv(f, *node, "launch", *job, T);
	REQUIRE(l != NULL);
	fx_run(f, *node, l);
	FX_WAIT(f, T, "running", JOB_STATE, fx_n(*job));
	return l;
}

/* The node's report in the attempt's nodes[] (borrowed). */
static const json_t *node_of(const json_t *a, const char *node)
{
	const json_t *n;
	size_t i;

	json_array_foreach(json_object_get(a, "nodes"), i, n)
	{
		if (!strcmp(json_string_value(json_object_get(n, "node")), node))
			return n;
	}
	FAIL("no node %s in the attempt", node);
	return NULL;
}

/* The idle seconds the scheduler last stored for the job's attempt 1 on node. */
#define STORED_IDLE                                                                                \
	"SELECT floor((r->>'idle_seconds')::float8)::bigint FROM nodes n,"                                \
	" jsonb_array_elements(n.running) r WHERE n.id = $1 AND (r->>'job')::bigint = $2"

/* Heartbeats of node applied for more than a second after now. */
static void beats_pass(struct fx *f, const char *node)
{
	const char *t0 = FX_Q(f, "SELECT now()::text");

	FX_WAIT(f, T, "t",
		"SELECT last_heartbeat > $2::timestamptz + interval '1 second' FROM nodes"
		" WHERE id = $1",
		node, t0);
}

/* trainyard_jobs_gpus_idle{team="team"} as the API serves it, or -1. */
static int idle_gauge(struct fx *f, const char *team)
{
	const char *body = fx_api(f, "GET", "/metrics", 200);
	const char *want = ty_test_strf("trainyard_jobs_gpus_idle{team=\"%s\"} ", team);
	const char *at = strstr(body, want);

	return at ? atoi(at + strlen(want)) : -1;
}

static bool gauge_is(struct fx *f, const char *team, int want)
{
	for (int i = 0; i < T / 100; i++) {
		if (idle_gauge(f, team) == want)
			return true;
		usleep(100 * 1000);
	}
	FAIL("trainyard_jobs_gpus_idle{team=\"%s\"} is %d, want %d", team, idle_gauge(f, team),
	     want);
	return false;
}

TY_TEST(a_gangs_telemetry_combines_into_the_attempt_and_the_ledger)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	long long job;
	json_t *a, *g;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", NULL);
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", JOB_STATE, fx_n(job));
	/* the GPUs are held long enough that the idle time below fits in them */
	usleep(1500 * 1000);
	fx_exit_with(f, "n1", l1, 0, "", "",
		     ",'telemetry':{'samples':100,'gpus':2,'util_mean':80,'util_peak':97,"
		     "'memory_used_peak_mb':60000,'power_mean_w':400,'power_peak_w':650,"
		     "'idle_seconds':0.25}");
	fx_sync(f, T);
	/* one node so far: its own numbers */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (gpu_telemetry->>'util_mean')::float8 || ' '"
			  " || (gpu_telemetry->>'nodes_reported') FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "80 1");
	fx_exit_with(f, "n2", l2, 0, "", "",
		     ",'telemetry':{'samples':50,'gpus':2,'util_mean':20,'util_peak':99,"
		     "'memory_used_peak_mb':70000,'power_mean_w':100,'power_peak_w':300,"
		     "'idle_seconds':0.5,'sampler':'nvml'}");
	FX_WAIT(f, T, "succeeded", JOB_STATE, fx_n(job));

	/* 200 GPU-samples at 80 %, 100 at 20 %; peaks the highest; idle 0.25 × 2 + 0.5 × 2 */
	a = attempt_json(f, job);
	g = json_object_get(a, "gpu_telemetry");
	REQUIRE(json_is_object(g));
	CHECK(num(g, "util_mean") == 60);
	CHECK(num(g, "util_peak") == 99);
	CHECK(num(g, "memory_used_peak_mb") == 70000);
	CHECK(num(g, "power_mean_w") == 300);
	CHECK(num(g, "power_peak_w") == 650);
	CHECK(num(g, "idle_gpu_seconds") == 1.5);
	CHECK(num(g, "samples") == 150);
	/* each node's own report, as it was kept */
	CHECK(num(json_object_get(node_of(a, "n2"), "gpu_telemetry"), "util_mean") == 20);
	json_decref(a);

	/* the ledger: each node's idle seconds × its GPUs */
	CHECK_STR_EQ(
	    FX_Q(f,
		 "SELECT string_agg(node_id || '=' || idle_gpu_seconds, ' ' ORDER BY node_id)"
		 " FROM usage_ledger WHERE job_id = $1",
		 fx_n(job)),
	    "n1=0.5 n2=1");

	/* a repeated report changes nothing: the first one counts */
	fx_send(f, "n2", "attempt_exited", job, 1,
		"{'exit_code':0,'failure_class':'','message':'',"
		"'telemetry':{'samples':5,'gpus':2,'util_mean':1,'idle_seconds':0.1}}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (gpu_telemetry->>'util_mean')::float8 || ' '"
			  " || (gpu_telemetry->>'samples') FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "60 150");
	fx_sched_stop(f, 0);
}

TY_TEST(malformed_telemetry_is_ignored_and_the_exit_applied)
{
	static const struct {
		const char *extra, *node_kept, *log;
	} cases[] = {
	    /* the well-formed field is kept, the others named in the log */
	    {",'telemetry':{'samples':'many','util_mean':150,'util_peak':90,'idle_seconds':-4}",
	     "{\"util_peak\": 90.0}", "malformed telemetry (samples, util_mean, idle_seconds)"},
	    {",'telemetry':[1,2]", NULL, "telemetry that is array, not an object"},
	    {",'telemetry':{'util_mean':'high'}", NULL, "malformed telemetry (util_mean)"},
	    {",'telemetry':null", NULL, NULL},
	    {"", NULL, NULL},
	};
	struct fx *f = fx_start();

	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct proto_msg *l;
		const char *node;
		long long job;
		json_t *a;

		ty_test_context("%s", cases[i].extra);
		l = running_job(f, NULL, &node, &job);
		fx_exit_with(f, node, l, 0, "", "", cases[i].extra);
		FX_WAIT(f, T, "succeeded", JOB_STATE, fx_n(job));
		CHECK_STR_EQ(
		    FX_Q(f, "SELECT telemetry::text FROM allocations WHERE job_id = $1", fx_n(job)),
		    cases[i].node_kept);
		a = attempt_json(f, job);
		if (cases[i].node_kept) {
			const json_t *g = json_object_get(a, "gpu_telemetry");

			CHECK(num(g, "util_peak") == 90);
			CHECK(json_is_null(json_object_get(g, "util_mean")));
			CHECK(json_is_null(json_object_get(g, "idle_gpu_seconds")));
		} else {
			CHECK(json_is_null(json_object_get(a, "gpu_telemetry")));
		}
		json_decref(a);
		/* no idle time reported: unknown in the ledger, not 0 */
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT count(*) FROM usage_ledger WHERE job_id = $1"
				  " AND idle_gpu_seconds IS NULL",
				  fx_n(job)),
			     "1");
		if (cases[i].log && !strstr(fx_sched_log(f, 0), cases[i].log))
			FAIL("the scheduler's log does not say '%s'", cases[i].log);
	}
	fx_sched_stop(f, 0);
}

TY_TEST(gpus_idle_beyond_the_team_limit_write_one_event_per_stretch)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "idle", 8, -1, NULL);
	const char *node;
	long long job;
	const char *msg;

	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team), "{'idle_gpu_alert_seconds':60}",
		    200);
	fx_node(f, "n1", 2);
	fx_sched_start(f, "s1", NULL);
	running_job(f, team, &node, &job);
	CHECK_INT_EQ(idle_gauge(f, team), 0);

	/* under the limit: nothing */
	fx_node_idle(f, "n1", job, 1, 59.5, 0.5);
	FX_WAIT(f, T, "59", STORED_IDLE, "n1", fx_n(job));
	beats_pass(f, "n1");
	CHECK_STR_EQ(FX_Q(f, IDLE_EVENTS, fx_n(job)), "0");
	CHECK_INT_EQ(idle_gauge(f, team), 0);

	/* over it: one event, however many heartbeats say so */
	fx_node_idle(f, "n1", job, 1, 61, 0.4);
	FX_WAIT(f, T, "1", IDLE_EVENTS, fx_n(job));
	gauge_is(f, team, 1);
	beats_pass(f, "n1");
	CHECK_STR_EQ(FX_Q(f, IDLE_EVENTS, fx_n(job)), "1");
	msg = FX_Q(f,
		   "SELECT message || ' | ' || state || ' | ' || (data->>'gpus')"
		   " || ' ' || (data->>'limit_seconds') || ' ' || (data->>'node')"
		   " FROM job_events WHERE job_id = $1 AND type = 'gpus_idle'",
		   fx_n(job));
	CHECK_STR_EQ(msg, "attempt 1 has held 2 GPUs on n1 idle for 61 s (GPU utilisation 0.4 %; "
			  "team limit 60 s) | running | 2 60 n1");
	/* not a state change: no webhook, and the job stays running */
	CHECK_STR_EQ(FX_Q(f, JOB_STATE, fx_n(job)), "running");

	/* busy again: the gauge drops */
	fx_node_idle(f, "n1", job, 1, 0, 97);
	gauge_is(f, team, 0);

	/*
	 * A new stretch past the limit is reported again. A real one takes a
	 * minute to get there: the last event is moved back instead, as if the
	 * stretch it reported were long over.
	 */
	FX_Q(f,
	     "UPDATE attempts SET idle_alert_at = idle_alert_at - interval '10 minutes'"
	     " WHERE job_id = $1 RETURNING 1",
	     fx_n(job));
	fx_node_idle(f, "n1", job, 1, 125, -1);
	FX_WAIT(f, T, "2", IDLE_EVENTS, fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'gpus_idle'"
			  " ORDER BY seq DESC LIMIT 1",
			  fx_n(job)),
		     "attempt 1 has held 2 GPUs on n1 idle for 2 min (team limit 60 s)");
	gauge_is(f, team, 1);

	/* the limit switched off: the gauge drops, no more events */
	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", team),
		    "{'idle_gpu_alert_seconds':null}", 200);
	gauge_is(f, team, 0);
	fx_sched_stop(f, 0);
}

TY_TEST(idle_attempts_of_teams_without_a_limit_or_under_it_write_nothing)
{
	struct fx *f = fx_start();
	const char *limited = fx_team(f, "lim", 8, -1, NULL);
	const char *free_team = fx_team(f, "free", 8, -1, NULL);
	const char *na, *nb, *boot;
	long long a, b;

	fx_api_body(f, "PATCH", ty_test_strf("/v1/teams/%s", limited),
		    "{'idle_gpu_alert_seconds':600}", 200);
	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", NULL);
	running_job(f, free_team, &na, &a);
	running_job(f, limited, &nb, &b);
	/*
	 * b's node's heartbeats carry a spot notice without a deadline (ignored
	 * with a warning): they are applied one by one (on_heartbeat), a's
	 * node's all at once (sched_apply_heartbeats).
	 */
	fx_node_notice(f, nb, "{'provider':'aws'}");
	fx_node_idle(f, na, a, 1, 86400, 0);
	fx_node_idle(f, nb, b, 1, 599, 0);
	FX_WAIT(f, T, "86400", STORED_IDLE, na, fx_n(a));
	FX_WAIT(f, T, "599", STORED_IDLE, nb, fx_n(b));
	beats_pass(f, na);
	beats_pass(f, nb);
	CHECK_STR_EQ(FX_Q(f, IDLE_EVENTS, fx_n(a)), "0");
	CHECK_STR_EQ(FX_Q(f, IDLE_EVENTS, fx_n(b)), "0");
	CHECK_INT_EQ(idle_gauge(f, free_team), 0);
	CHECK_INT_EQ(idle_gauge(f, limited), 0);

	/* the one-by-one path reports too */
	fx_node_idle(f, nb, b, 1, 600, 1.5);
	FX_WAIT(f, T, "1", IDLE_EVENTS, fx_n(b));
	gauge_is(f, limited, 1);
	beats_pass(f, nb);
	CHECK_STR_EQ(FX_Q(f, IDLE_EVENTS, fx_n(b)), "1");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1"
			  " AND type = 'gpus_idle'",
			  fx_n(b)),
		     ty_test_strf("attempt 1 has held 2 GPUs on %s idle for 10 min (GPU "
				  "utilisation 1.5 %%; team limit 10 min)",
				  nb));

	/* malformed idle fields are dropped with a warning; the heartbeat is applied */
	fx_node_beat(f, na, false);
	boot = FX_Q(f, "SELECT boot_id FROM nodes WHERE id = $1", na);
	fx_send(f, na, "heartbeat", 0, 0,
		ty_test_strf("{'boot_id':'%s','finished':[],'running':[{'job':%lld,"
			     "'attempt':1,'idle_seconds':'long','gpu_util':300}]}",
			     boot, a));
	FX_WAIT(f, T, ty_test_strf("[{\"job\": %lld, \"attempt\": 1}]", a),
		"SELECT running::text FROM nodes WHERE id = $1", na);
	if (!strstr(fx_sched_log(f, 0), "malformed idle_seconds or gpu_util"))
		FAIL("the scheduler's log does not name the malformed heartbeat fields");
	fx_node_beat(f, na, true);
	CHECK_STR_EQ(FX_Q(f, JOB_STATE, fx_n(a)), "running");
	fx_sched_stop(f, 0);
}
