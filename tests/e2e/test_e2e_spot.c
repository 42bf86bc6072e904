/*
 * Spot preemption end to end: node-a (label pool=spot) polls a fake AWS
 * IMDSv2 metadata server that runs in this process on the bridge's address,
 * node-b is on-demand; each executor runs in a network namespace of its own
 * (netns.h) and both share one --checkpoint-root, as nodes share storage in
 * a cluster. A notice on node-a must turn into a checkpoint, a requeue and a
 * resume on node-b from that checkpoint's step, with both attempts in the
 * usage ledger.
 */
#include "e2e.h"
#include "netns.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PYTHON "/usr/bin/python3" /* the interpreter with the system's packages */
#define WAIT_MS 60000		  /* generous upper bound for anything to happen */
/* the scheduler's --rates-file: per GPU-hour by pool (any GPU model) */
#define RATE_SPOT 1.25
#define RATE_ON_DEMAND 4.5
#define RATES "{\"spot\": {\"default\": 1.25}, \"on-demand\": {\"default\": 4.5}}"

/* ---- the fake AWS IMDSv2 endpoint (only node-a asks it) ---- */

static struct {
	struct MHD_Daemon *d;
	pthread_mutex_t mu;
	bool notice;	   /* spot/instance-action answers the notice, else 404 */
	char time_str[64]; /* the notice's "time" (RFC 3339, UTC) */
	int polls;	   /* instance-action requests answered with a valid token */
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *body)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", "text/plain");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* What IMDSv2 says: a token for a PUT with a TTL, then 404 or the notice. */
static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url,
			     const char *method, const char *version, const char *upload,
			     size_t *upload_size, void **con_cls)
{
	static int first;
	const char *tok =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-aws-ec2-metadata-token");
	char body[256];
	enum MHD_Result ret;

	(void)cls;
	(void)version;
	(void)upload;
	if (!*con_cls) {
		*con_cls = &first;
		return MHD_YES;
	}
	*upload_size = 0;
	if (!strcmp(url, "/latest/api/token") && !strcmp(method, "PUT"))
		return MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						   "X-aws-ec2-metadata-token-ttl-seconds")
			   ? answer(c, 200, "imds-token")
			   : answer(c, 400, "");
	if (strcmp(url, "/latest/meta-data/spot/instance-action") || strcmp(method, "GET"))
		return answer(c, 404, "");
	if (!tok || strcmp(tok, "imds-token"))
		return answer(c, 401, "");
	pthread_mutex_lock(&M.mu);
	M.polls++;
	if (M.notice)
		snprintf(body, sizeof(body), "{\"action\": \"terminate\", \"time\": \"%s\"}",
			 M.time_str);
	ret = M.notice ? answer(c, 200, body)
		       : answer(c, 404,
				"<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n"
				"<html><title>404 - Not Found</title></html>\n");
	pthread_mutex_unlock(&M.mu);
	return ret;
}

/* Serves on addr (the bridge's, which the namespaces reach); returns the base URL. */
static const char *meta_start(const char *addr)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	const union MHD_DaemonInfo *info;

	REQUIRE(inet_pton(AF_INET, addr, &sa.sin_addr) == 1);
	M.d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, serve, NULL,
			       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
	REQUIRE(M.d != NULL);
	info = MHD_get_daemon_info(M.d, MHD_DAEMON_INFO_BIND_PORT);
	REQUIRE(info != NULL);
	return ty_test_strf("http://%s:%u", addr, (unsigned)info->port);
}

/* The notice from now on, with the deadline seconds from now; false: no notice. */
static void meta_notice(bool on, int seconds)
{
	time_t t = time(NULL) + seconds;
	struct tm tm;

	gmtime_r(&t, &tm);
	pthread_mutex_lock(&M.mu);
	M.notice = on;
	strftime(M.time_str, sizeof(M.time_str), "%Y-%m-%dT%H:%M:%SZ", &tm);
	pthread_mutex_unlock(&M.mu);
}

static int meta_polls(void)
{
	int n;

	pthread_mutex_lock(&M.mu);
	n = M.polls;
	pthread_mutex_unlock(&M.mu);
	return n;
}

/* ---- the stack ---- */

static const char *script(const char *name, const char *text);

static const struct netns_plan *net;
static const char *ckroot; /* both executors' --checkpoint-root */
static struct e2e *E;
static bool announced;	   /* node-a has had a notice since its executor started */
static long long last_job; /* the last case's job: cancelled if a failed case left it */

static void broker_up(struct e2e *e)
{
	netns_relay_loopback(e->bootstrap);
}

static void admin_post(const char *path)
{
	struct ty_resp r = {0};

	ty_http(&r, "POST", path, ty_stack_get()->admin, "{}", NULL);
	REQUIRE_STATUS(&r, 200);
	ty_resp_free(&r);
}

/*
 * The stack with node-a (spot, polling the fake endpoint) and node-b
 * (on-demand) in namespaces of their own, both ready: an executor that has
 * had a notice keeps it until it restarts, so node-a is restarted after a
 * case that announced one, and node-b is undrained.
 */
static struct e2e *stack(void)
{
	if (!net) {
		struct e2e_layout l = {.broker_up = broker_up};

		net = netns_up(2);
		ckroot = strdup(ty_test_strf("%s/checkpoints", ty_test_workdir()));
		REQUIRE(mkdir(ckroot, 0777) == 0);

		/* copied by e2e_set_layout; later options win over the defaults */
		const char *a[] = {"--labels",
				   "rack=r1,block=b1,pool=spot",
				   "--checkpoint-root",
				   ckroot,
				   "--spot-provider",
				   "aws",
				   "--spot-metadata-url",
				   meta_start(net->gateway),
				   "--spot-poll-ms",
				   "200",
				   "--spot-timeout-ms",
				   "200",
				   NULL};
		const char *b[] = {"--labels", "rack=r1,block=b2,pool=on-demand",
				   "--checkpoint-root", ckroot, NULL};
		/*
		 * The margin keeps the scheduler's kill at a notice's deadline well
		 * before the executor's own backstop (the deadline less its kill
		 * grace and 1 s), so that the scheduler's kill is the one that ends
		 * a worker ignoring the signal even on a loaded machine.
		 */
		const char *sched[] = {"--spot-kill-margin-seconds", "10", "--rates-file",
				       script("rates.json", RATES), NULL};

		for (int i = 0; i < 2; i++) {
			l.address[i] = net->addr[i];
			l.prefix[i] = netns_exec_prefix(i);
		}
		l.args[0] = a;
		l.args[1] = b;
		l.sched_args = sched;
		e2e_set_layout(&l);
	} else {
		/* a case that failed half-way must not leave its job holding GPUs */
		if (last_job) {
			const char *job = ty_test_strf("/v1/jobs/%lld", last_job);
			const char *st = "";
			struct ty_resp r = {0};

			ty_http(&r, "POST", ty_test_strf("%s/cancel", job), ty_stack_get()->admin,
				"{}", NULL);
			ty_resp_free(&r);
			for (int waited = 0; waited < WAIT_MS; waited += 100) {
				ty_http(&r, "GET", job, ty_stack_get()->admin, NULL, NULL);
				st = ty_test_strf(
				    "%s", ty_jstr(r.json, "state") ? ty_jstr(r.json, "state") : "");
				ty_resp_free(&r);
				if (!strcmp(st, "succeeded") || !strcmp(st, "failed") ||
				    !strcmp(st, "cancelled"))
					break;
				usleep(100 * 1000);
			}
			last_job = 0;
		}
		meta_notice(false, 0);
		if (announced) {
			e2e_start_executor(E, 0);
			announced = false;
		}
		admin_post("/v1/nodes/node-b/undrain");
	}
	E = e2e_get();
	return E;
}

/* ---- helpers ---- */

static const char *argv_json(const char *const *argv)
{
	json_t *a = json_array();
	char *s;
	const char *out;

	for (int i = 0; argv[i]; i++)
		json_array_append_new(a, json_string(argv[i]));
	s = json_dumps(a, JSON_COMPACT);
	out = ty_test_strf("%s", s);
	free(s);
	json_decref(a);
	return out;
}

static const char *script(const char *name, const char *text)
{
	const char *path = ty_test_strf("%s/%s", ty_test_workdir(), name);
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	REQUIRE(fputs(text, f) >= 0);
	REQUIRE(fclose(f) == 0);
	return path;
}

/* GET /v1/jobs/{id}/logs of a rank in an attempt (scratch; "" when there is none). */
static const char *rank_log(struct e2e *e, long long id, int attempt, int rank)
{
	struct ty_resp r = {0};
	const char *body;

	ty_http(&r, "GET",
		ty_test_strf("/v1/jobs/%lld/logs?rank=%d&attempt=%d&tail=10000", id, rank, attempt),
		e->token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	body = ty_test_strf("%s", r.status == 200 ? r.body : "");
	ty_resp_free(&r);
	return body;
}

/* Every event message of the job, one per line (scratch). */
static const char *event_messages(struct e2e *e, long long id)
{
	struct ty_resp r = {0};
	json_t *ev;
	size_t i;
	const char *all = "";

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?limit=1000", id), e->token, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(json_object_get(r.json, "events"), i, ev) all =
	    ty_test_strf("%s%s\n", all, json_string_value(json_object_get(ev, "message")));
	ty_resp_free(&r);
	return all;
}

static const char *node_state(const char *node)
{
	struct ty_resp r = {0};
	const char *st;

	ty_http(&r, "GET", ty_test_strf("/v1/nodes/%s", node), ty_stack_get()->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	st = ty_test_strf("%s", ty_jstr(r.json, "state") ? ty_jstr(r.json, "state") : "?");
	ty_resp_free(&r);
	return st;
}

static const char *ckpt_dir(long long id)
{
	return ty_test_strf("%s/job-%lld", ckroot, id);
}

/* Wait until checkpoint step-<step> of the job is complete (its manifest exists). */
static void wait_checkpoint(long long id, long step)
{
	const char *m = ty_test_strf("%s/step-%ld/MANIFEST.json", ckpt_dir(id), step);

	for (int waited = 0; waited < WAIT_MS; waited += 50) {
		if (access(m, R_OK) == 0)
			return;
		usleep(50 * 1000);
	}
	FAIL("'%s' did not appear within %d ms", m, WAIT_MS);
	ty_test_abort();
}

/* The steps of the job's complete checkpoints, newest first; returns how many. */
static int checkpoint_steps(long long id, long *steps, int max)
{
	DIR *d = opendir(ckpt_dir(id));
	struct dirent *de;
	int n = 0;

	REQUIRE(d != NULL);
	while ((de = readdir(d)) && n < max) {
		char *end;
		long s;

		if (strncmp(de->d_name, "step-", 5))
			continue;
		s = strtol(de->d_name + 5, &end, 10);
		if (*end || access(ty_test_strf("%s/%s/MANIFEST.json", ckpt_dir(id), de->d_name),
				   R_OK) != 0)
			continue;
		steps[n++] = s;
	}
	closedir(d);
	for (int i = 0; i < n; i++)
		for (int k = i + 1; k < n; k++)
			if (steps[k] > steps[i]) {
				long t = steps[i];
				steps[i] = steps[k];
				steps[k] = t;
			}
	return n;
}

/* The integer after `key` in text (e.g. `"step": `), or -1. */
static long number_after(const char *text, const char *key)
{
	const char *p = strstr(text, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/*
 * The ledger rows of a job, ';' separated, each "attempt node pool outcome
 * class checkpoint lost rate": checkpoint true when the row has the
 * attempt's last valid checkpoint, lost "none" (0), "part" (less than the
 * attempt's GPU-seconds) or "all", rate the price per GPU-hour.
 */
static const char *ledger(long long id)
{
	return TY_STACK_SQL(
	    "SELECT string_agg(attempt || ' ' || node_id || ' ' || pool || ' ' || "
	    "outcome || ' ' || coalesce(failure_class, '-') || ' ' || "
	    "(checkpoint_at IS NOT NULL) || ' ' || CASE WHEN lost_gpu_seconds = 0 "
	    "THEN 'none' WHEN lost_gpu_seconds < gpu_seconds THEN 'part' ELSE 'all' "
	    "END || ' ' || rate_per_gpu_hour, ';' ORDER BY attempt)"
	    " FROM usage_ledger WHERE job_id = $1",
	    ty_test_strf("%lld", id));
}

/* Wait until the job's attempt ended (its record has ended_at). */
static json_t *wait_attempt_ended(struct e2e *e, long long id, int attempt)
{
	for (int waited = 0; waited < WAIT_MS; waited += 100) {
		json_t *att = e2e_attempts(e, id);
		json_t *a = json_array_get(att, (size_t)attempt - 1);

		if (a && json_is_string(json_object_get(a, "ended_at")))
			return att;
		json_decref(att);
		usleep(100 * 1000);
	}
	FAIL("attempt %d of job %lld did not end within %d ms", attempt, id, WAIT_MS);
	ty_test_abort();
}

/*
 * A job on node-a alone (node-b is drained before the submit): 1 node × 2
 * GPUs, spot (the spec's spot object; NULL: {"allowed":true}), more spec
 * fields in extra (may be NULL).
 */
static long long submit_on_a(struct e2e *e, const char *command, const char *spot,
			     const char *extra)
{
	/* no retries, unless extra names its own */
	const char *retry = extra && strstr(extra, "\"retry\"")
				? ""
				: "\"retry\":{\"system\":0,\"user\":0},";
	long long id;
	json_t *job, *att;

	admin_post("/v1/nodes/node-b/drain");
	id = e2e_submit(e, command,
			ty_test_strf("\"resources\":{\"nodes\":1,\"gpus_per_node\":2},"
				     "\"spot\":%s,%s\"max_runtime_seconds\":300%s%s",
				     spot ? spot : "{\"allowed\":true}", retry, extra ? "," : "",
				     extra ? extra : ""));
	last_job = id;
	job = e2e_wait_state(e, id, "running", WAIT_MS);
	att = e2e_attempts(e, id);
	CHECK_STR_EQ(ty_jstr(att, "[0].nodes[0].node"), "node-a");
	json_decref(att);
	json_decref(job);
	return id;
}

/* The notice on node-a, deadline seconds from now, once its executor is polling. */
static void announce(int deadline)
{
	for (int i = 0; i < 100 && meta_polls() == 0; i++)
		usleep(50 * 1000);
	REQUIRE(meta_polls() > 0); /* node-a reaches us across the bridge */
	meta_notice(true, deadline);
	announced = true;
}

/*
 * A standard-library worker (one rank per node, launch per_node): a step
 * every PAUSE seconds until STEPS, a checkpoint (trainyard_ckpt.save, file
 * state.bin) by rank 0 every EVERY steps up to step LAST, resume from
 * TRAINYARD_RESUME_FROM. MODE checkpoint: on SIGUSR1 checkpoint at the
 * current step and exit 75; MODE ignore: note the signal and train on.
 * argv: EXAMPLES_DIR MODE STEPS EVERY LAST PAUSE.
 */
static const char worker_py[] =
    "import json, os, signal, sys, time\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "import trainyard_ckpt as ck\n"
    "mode, steps, every, last = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), "
    "int(sys.argv[5])\n"
    "pause = float(sys.argv[6])\n"
    "rank = int(os.environ['RANK'])\n"
    "got = []\n"
    "def emit(**kw):\n"
    "    print(json.dumps(kw), flush=True)\n"
    "def on_usr1(signum, frame):\n"
    "    got.append(signum)\n"
    "signal.signal(signal.SIGUSR1, on_usr1)\n"
    "def save(step):\n"
    "    if rank == 0:\n"
    "        ck.save(step, {'state.bin': ('step %d\\n' % step).encode() * 512})\n"
    "        emit(event='checkpoint', rank=rank, step=step)\n"
    "step = 0\n"
    "if ck.resume_from():\n"
    "    step = ck.verify(ck.resume_from())['step']\n"
    "    emit(event='resumed', rank=rank, step=step, path=ck.resume_from())\n"
    "while step < steps:\n"
    "    time.sleep(pause)\n"
    "    step += 1\n"
    "    if got and mode == 'checkpoint':\n"
    "        save(step)\n"
    "        emit(event='stopped', rank=rank, step=step)\n"
    "        sys.exit(75)\n"
    "    if got and got[0]:\n"
    "        emit(event='ignored', rank=rank, signal=got[0], step=step)\n"
    "        got[0] = 0\n"
    "    if step % every == 0 and step <= last:\n"
    "        save(step)\n"
    "emit(event='done', rank=rank, step=step)\n";

static const char *worker_command(const char *mode, int steps, int every, int last,
				  const char *pause)
{
	char dir[4096];
	const char *ckpy = e2e_source_path("worker/examples/trainyard_ckpt.py");

	snprintf(dir, sizeof(dir), "%s", ckpy);
	*strrchr(dir, '/') = '\0';
	return argv_json((const char *[]){PYTHON, script("spot_worker.py", worker_py), dir, mode,
					  ty_test_strf("%d", steps), ty_test_strf("%d", every),
					  ty_test_strf("%d", last), pause, NULL});
}

/* ---- the cases ---- */

/*
 * The DDP example (2 ranks, gloo) starts on node-a; once it has written a
 * periodic checkpoint node-a's metadata announces its interruption. The job
 * checkpoints on the signal, attempt 1 ends preempted, attempt 2 runs on
 * node-b from that checkpoint's step (the step continues, not restarts) and
 * succeeds; the ledger has both attempts with their pools and the work lost.
 */
TY_TEST(ddp_preempted_on_spot_resumes_on_demand)
{
	struct e2e *e = stack();
	const char *cmd = argv_json((const char *[]){
	    PYTHON, e2e_source_path("worker/examples/ddp_train.py"), "--steps", "50",
	    "--checkpoint-every", "5", "--step-sleep", "0.2", "--target-loss", "0.01", NULL});
	long long id = submit_on_a(e, cmd, NULL, NULL);
	json_t *job, *att, *a1, *a2;
	struct ty_resp r = {0};
	const char *log1, *log2, *events;
	long stopped;

	/* node-b may take it as soon as node-a is preempting */
	admin_post("/v1/nodes/node-b/undrain");
	wait_checkpoint(id, 5);
	announce(40);
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 120000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_JINT(job, "attempt", 2);
	CHECK_JINT(job, "preemptions", 1);
	CHECK_JINT(job, "spot_preemptions", 1);
	att = e2e_attempts(e, id);
	REQUIRE_INT_EQ(json_array_size(att), 2);
	a1 = json_array_get(att, 0);
	a2 = json_array_get(att, 1);

	/*
	 * Attempt 1: node-a, checkpointed on the signal at step S (the
	 * checkpoint_written the scheduler applied last; the periodic one at 5
	 * came before the notice) and left preempted. Its ranks exit 75 after
	 * the checkpoint, unless the executor's stop, which follows the
	 * checkpoint's verification at once, comes first (then rank 0's log may
	 * end before its "stopped" line).
	 */
	stopped = atol(TY_STACK_SQL("SELECT last_checkpoint_step FROM attempts"
				    " WHERE job_id = $1 AND attempt = 1",
				    ty_test_strf("%lld", id)));
	CHECK(stopped > 5);
	log1 = rank_log(e, id, 1, 0);
	CHECK(number_after(log1, "{\"event\": \"stopped\", \"rank\": 0, \"step\": ") == stopped ||
	      !strstr(log1, "\"event\": \"stopped\""));
	CHECK_STR_EQ(ty_jstr(a1, "nodes[0].node"), "node-a");
	CHECK_STR_EQ(ty_jstr(a1, "state"), "failed");
	CHECK_STR_EQ(ty_jstr(a1, "failure_class"), "preempted");
	CHECK_STR_EQ(ty_jstr(a1, "spot_node"), "node-a");
	for (int rank = 0; rank < 2; rank++) {
		long long code = ty_jint(a1, ty_test_strf("ranks[%d].exit_code", rank));

		ty_test_context("attempt 1 rank %d exit code %lld", rank, code);
		CHECK(code == 75 ||
		      (code == 128 + SIGTERM &&
		       ty_jint(a1, ty_test_strf("ranks[%d].signal", rank)) == SIGTERM));
	}
	ty_test_context(NULL);

	/* attempt 2: node-b, resumed from step S and trained on to the end */
	CHECK_STR_EQ(ty_jstr(a2, "nodes[0].node"), "node-b");
	CHECK_STR_EQ(ty_jstr(a2, "state"), "succeeded");
	CHECK_JNULL(a2, "spot_node");
	CHECK_JINT(a2, "resume.step", stopped);
	CHECK_JSTR(a2, "resume.path", ty_test_strf("%s/step-%ld", ckpt_dir(id), stopped));
	CHECK_INT_EQ(json_array_size(ty_jpath(a2, "resume.skipped")), 0);
	log2 = rank_log(e, id, 2, 0);
	CHECK(strstr(log2, ty_test_strf("{\"event\": \"resumed\", \"rank\": 0, \"step\": %ld,",
					stopped)) != NULL);
	CHECK(strstr(log2, ty_test_strf("\"start_step\": %ld, \"steps\": 50,", stopped)) != NULL);
	CHECK(strstr(log2, "\"ok\": true}") != NULL);
	CHECK(strstr(rank_log(e, id, 2, 1),
		     ty_test_strf("{\"event\": \"resumed\", \"rank\": 1, \"step\": %ld,",
				  stopped)) != NULL);

	events = event_messages(e, id);
	CHECK(strstr(events, "attempt 1 preempted: node node-a has a spot interruption notice "
			     "(aws, deadline in ") != NULL);
	/* the checkpoint ended it within the grace period: no kill was needed */
	CHECK(strstr(events, "checkpoint grace period of attempt 1 over") == NULL);
	CHECK(strstr(events, "spot preemption 1, retry budget untouched") != NULL);
	CHECK(strstr(events, ty_test_strf("resumed from step %ld (%s/step-%ld)", stopped,
					  ckpt_dir(id), stopped)) != NULL);

	/*
	 * The ledger: both attempts, their pools; attempt 1 lost only what
	 * followed its checkpoint: nothing when the scheduler applied the
	 * checkpoint and the attempt's end in one transaction, else a moment.
	 */
	{
		const char *rows = ledger(id);

		if (strcmp(rows, "1 node-a spot failed preempted true none 1.25;"
				 "2 node-b on-demand succeeded - true none 4.5"))
			CHECK_STR_EQ(rows, "1 node-a spot failed preempted true part 1.25;"
					   "2 node-b on-demand succeeded - true none 4.5");
	}
	ty_http(&r, "GET", ty_test_strf("/v1/usage?team=%s&group_by=pool", e->team), e->token, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ(json_array_size(json_object_get(r.json, "items")), 2);
	CHECK_JSTR(r.json, "items[0].pool", "on-demand");
	CHECK_JINT(r.json, "items[0].attempts", 1);
	CHECK(json_number_value(ty_jpath(r.json, "items[0].lost_gpu_seconds")) == 0 &&
	      json_number_value(ty_jpath(r.json, "items[0].gpu_seconds")) > 0);
	CHECK_JSTR(r.json, "items[1].pool", "spot");
	CHECK_JINT(r.json, "items[1].attempts", 1);
	CHECK(json_number_value(ty_jpath(r.json, "items[1].lost_gpu_seconds")) <
	      json_number_value(ty_jpath(r.json, "items[1].gpu_seconds")));
	/* the API's sums are the ledger's (to its 3 decimals), priced by pool */
	for (int i = 0; i < 2; i++) {
		const char *sql = TY_STACK_SQL(
		    "SELECT sum(gpu_seconds) || ' ' || sum(lost_gpu_seconds) FROM usage_ledger"
		    " WHERE job_id = $1 AND attempt = $2",
		    ty_test_strf("%lld", id), i == 0 ? "2" : "1");
		char *end;
		double gs = strtod(sql, &end), lost = strtod(end, NULL);

		ty_test_context("usage of pool %s: ledger says %s", i == 0 ? "on-demand" : "spot",
				sql);
		CHECK(fabs(json_number_value(
			       ty_jpath(r.json, ty_test_strf("items[%d].gpu_seconds", i))) -
			   gs) < 0.002);
		CHECK(fabs(json_number_value(
			       ty_jpath(r.json, ty_test_strf("items[%d].lost_gpu_seconds", i))) -
			   lost) < 0.002);
		CHECK(fabs(json_number_value(ty_jpath(r.json, ty_test_strf("items[%d].cost", i))) -
			   gs / 3600 * (i == 0 ? RATE_ON_DEMAND : RATE_SPOT)) < 0.00001);
	}
	ty_test_context(NULL);
	CHECK_JINT(r.json, "totals.attempts", 2);
	CHECK_JINT(r.json, "totals.running_attempts", 0);
	ty_resp_free(&r);
	ty_http(&r, "GET", ty_test_strf("/v1/usage?team=%s&group_by=job", e->team), e->token, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_JINT(r.json, "items[0].job", id);
	CHECK_JINT(r.json, "items[0].attempts", 2);
	ty_resp_free(&r);

	/* node-a stays preempting: its notice is not over */
	CHECK_STR_EQ(node_state("node-a"), "preempting");
	json_decref(att);
	json_decref(job);
}

/*
 * The checkpoint the scheduler names for attempt 2 is damaged (its state
 * file cut short) after attempt 1 ended and before attempt 2 starts
 * (node-b stays drained meanwhile): node-b's check against the manifest
 * fails attempt 2 as system and rejects that checkpoint, and attempt 3
 * resumes from the newest valid one before it (docs/dispatch.md, "Resume").
 */
TY_TEST(a_damaged_resume_checkpoint_is_rejected_and_the_previous_one_used)
{
	struct e2e *e = stack();
	long long id = submit_on_a(e, worker_command("checkpoint", 30, 3, 30, "0.2"), NULL,
				   "\"launch\":\"per_node\",\"retry\":{\"system\":1,\"user\":0}");
	json_t *job, *att, *a, *ck;
	long named = -1, before = -1;
	const char *file, *events;
	struct ty_resp r = {0};
	struct stat st;
	size_t i;

	wait_checkpoint(id, 3);
	/* one checkpoint in the scheduler's table before the signal adds another */
	for (int k = 0; k < 300; k++) { /* a bound on a hang (30 s), not a timing assertion */
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/checkpoints", id), e->token, NULL,
			NULL);
		REQUIRE_STATUS(&r, 200);
		if (json_is_integer(json_object_get(r.json, "resume_step")))
			break;
		usleep(100 * 1000);
	}
	REQUIRE(json_is_integer(json_object_get(r.json, "resume_step")));
	ty_resp_free(&r);
	announce(40);
	att = wait_attempt_ended(e, id, 1);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "preempted");
	json_decref(att);
	/* nothing can start it while node-a is preempting and node-b drained */
	job = e2e_wait_state(e, id, "pending", WAIT_MS);
	json_decref(job);
	/* the scheduler's resume point, and the newest valid one before it */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/checkpoints", id), e->token, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	ty_test_context("checkpoints: %.900s", r.body);
	REQUIRE(json_is_integer(json_object_get(r.json, "resume_step")));
	ty_test_context(NULL);
	named = (long)json_integer_value(json_object_get(r.json, "resume_step"));
	json_array_foreach(json_object_get(r.json, "items"), i, ck)
	{
		long step = (long)json_integer_value(json_object_get(ck, "step"));

		if (before < 0 && step < named && !strcmp(ty_jstr(ck, "status"), "valid"))
			before = step;
	}
	ty_resp_free(&r);
	REQUIRE(before >= 0);
	file = ty_test_strf("%s/step-%ld/state.bin", ckpt_dir(id), named);
	REQUIRE(stat(file, &st) == 0 && st.st_size > 1);
	REQUIRE(truncate(file, st.st_size - 1) == 0);

	admin_post("/v1/nodes/node-b/undrain");
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", WAIT_MS);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	att = e2e_attempts(e, id);
	REQUIRE_INT_EQ(json_array_size(att), 3);
	a = json_array_get(att, 1);
	CHECK_STR_EQ(ty_jstr(a, "nodes[0].node"), "node-b");
	CHECK_STR_EQ(ty_jstr(a, "failure_class"), "system");
	CHECK(strstr(ty_jstr(a, "message") ? ty_jstr(a, "message") : "",
		     ty_test_strf("the resume checkpoint step %ld does not match the launch", named)) !=
	      NULL);
	a = json_array_get(att, 2);
	CHECK_STR_EQ(ty_jstr(a, "nodes[0].node"), "node-b");
	CHECK_JINT(a, "resume.step", before);
	CHECK_JSTR(a, "resume.path", ty_test_strf("%s/step-%ld", ckpt_dir(id), before));
	CHECK(strstr(rank_log(e, id, 3, 0),
		     ty_test_strf("{\"event\": \"resumed\", \"rank\": 0, \"step\": %ld,",
				  before)) != NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/checkpoints", id), e->token, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(json_object_get(r.json, "items"), i, ck)
	{
		if (json_integer_value(json_object_get(ck, "step")) == named)
			CHECK_STR_EQ(ty_jstr(ck, "status"), "rejected");
	}
	ty_resp_free(&r);
	events = event_messages(e, id);
	CHECK(strstr(events, ty_test_strf("checkpoint step %ld rejected by node node-b", named)) !=
	      NULL);
	CHECK(strstr(events, ty_test_strf("the next attempt resumes from step %ld", before)) !=
	      NULL);
	json_decref(att);
	json_decref(job);
}

/*
 * A worker that notes the checkpoint signal and trains on without writing a
 * checkpoint (its last periodic one is at step 6): the notice's deadline
 * less the kill margin ends attempt 1, killed, and attempt 2 resumes from
 * step 6; the ledger counts the work lost since that checkpoint.
 */
TY_TEST(a_worker_that_ignores_the_signal_is_killed_and_resumes_from_its_last_checkpoint)
{
	struct e2e *e = stack();
	long long id = submit_on_a(e, worker_command("ignore", 40, 3, 6, "0.2"), NULL,
				   "\"launch\":\"per_node\"");
	json_t *job, *att, *a1, *a2;
	const char *log1;
	long steps[16];

	admin_post("/v1/nodes/node-b/undrain");
	wait_checkpoint(id, 6);
	/*
	 * killed at the deadline less --spot-kill-margin-seconds (10) and the
	 * kill grace (2): about 3 s from now
	 */
	announce(15);
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", WAIT_MS);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	att = e2e_attempts(e, id);
	REQUIRE_INT_EQ(json_array_size(att), 2);
	a1 = json_array_get(att, 0);
	a2 = json_array_get(att, 1);
	CHECK_STR_EQ(ty_jstr(a1, "failure_class"), "preempted");
	CHECK_STR_EQ(ty_jstr(a1, "spot_node"), "node-a");
	/* it did not exit on its own: the stop sequence's signal ended it */
	CHECK(ty_jint(a1, "ranks[0].signal") > 0);
	log1 = rank_log(e, id, 1, 0);
	CHECK(strstr(log1, "{\"event\": \"ignored\", \"rank\": 0, \"signal\": 10,") != NULL);
	CHECK(strstr(log1, "\"event\": \"stopped\"") == NULL);
	/* no checkpoint after the signal: the newest is the last periodic one */
	CHECK_INT_EQ(checkpoint_steps(id, steps, 16) > 0 ? steps[0] : -1, 6);
	CHECK_STR_EQ(ty_jstr(a2, "nodes[0].node"), "node-b");
	CHECK_JINT(a2, "resume.step", 6);
	CHECK_INT_EQ(json_array_size(ty_jpath(a2, "resume.skipped")), 0);
	CHECK(strstr(rank_log(e, id, 2, 0), "{\"event\": \"resumed\", \"rank\": 0, \"step\": 6,") !=
	      NULL);
	CHECK(strstr(rank_log(e, id, 2, 0), "{\"event\": \"done\", \"rank\": 0, \"step\": 40}") !=
	      NULL);
	CHECK(strstr(event_messages(e, id),
		     "attempt 1 preempted: node node-a has a spot interruption notice (aws, ") !=
	      NULL);
	/* the scheduler's kill at the deadline less its margin ended it */
	CHECK(strstr(event_messages(e, id),
		     "checkpoint grace period of attempt 1 over: kill sent to 1 node\n") != NULL);
	/* the work since step 6 is lost, not all of attempt 1; attempt 2 wrote
	 * no checkpoint of its own and, having succeeded, lost nothing */
	CHECK_STR_EQ(ledger(id), "1 node-a spot failed preempted true part 1.25;"
				 "2 node-b on-demand succeeded - false none 4.5");
	json_decref(att);
	json_decref(job);
}

/*
 * spot.max_preemptions 1, fallback on_demand: once preempted on node-a the
 * job waits for an on-demand node even when node-a is ready again (its
 * executor restarted, the notice over), and runs on node-b once there is one.
 */
TY_TEST(after_max_preemptions_the_job_only_lands_on_demand)
{
	struct e2e *e = stack();
	long long id =
	    submit_on_a(e, worker_command("checkpoint", 15, 3, 15, "0.2"),
			"{\"allowed\":true,\"max_preemptions\":1,\"fallback\":\"on_demand\"}",
			"\"launch\":\"per_node\"");
	json_t *job = NULL, *att;
	const char *reason = "";

	wait_checkpoint(id, 3);
	announce(40);
	json_decref(wait_attempt_ended(e, id, 1));
	job = e2e_wait_state(e, id, "pending", WAIT_MS);
	ty_test_note("pending while node-a is preempting: %s", ty_jstr(job, "pending_reason"));
	/* node-a's notice is over and its executor new: ready, and spot */
	meta_notice(false, 0);
	e2e_start_executor(e, 0);
	announced = false;
	for (int waited = 0; waited < WAIT_MS && strcmp(node_state("node-a"), "ready");
	     waited += 100)
		usleep(100 * 1000);
	REQUIRE_STR_EQ(node_state("node-a"), "ready");
	/* a cycle that saw node-a ready keeps the job off it, and says why */
	for (int waited = 0; waited < WAIT_MS; waited += 100) {
		json_decref(job);
		job = e2e_wait_state(e, id, "pending", WAIT_MS);
		reason = ty_jstr(job, "pending_reason") ? ty_jstr(job, "pending_reason") : "";
		if (strstr(reason, "preempted on spot"))
			break;
		usleep(100 * 1000);
	}
	CHECK(strstr(reason, ": preempted on spot 1 time (spot.max_preemptions 1)") != NULL);
	CHECK_JINT(job, "spot_preemptions", 1);
	json_decref(job);
	admin_post("/v1/nodes/node-b/undrain");
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", WAIT_MS);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	att = e2e_attempts(e, id);
	CHECK_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(att, "[0].nodes[0].node"), "node-a");
	CHECK_STR_EQ(ty_jstr(att, "[1].nodes[0].node"), "node-b");
	CHECK_JNULL(json_array_get(att, 1), "spot_node");
	json_decref(att);
	json_decref(job);
}
