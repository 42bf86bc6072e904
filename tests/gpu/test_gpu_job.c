/*
 * A PyTorch job on this machine's GPU, launched by a real trainyard-executor
 * (tests/gpu/run, check pytorch_nccl_job): this program plays the scheduler
 * against a private trainyard-broker. It starts the broker and an executor
 * that probes the real inventory (--isolation none: no OCI runtime needed),
 * sends one signed launch of worker/examples/ddp_train.py on GPU 0, and
 * checks the attempt's exit, the job's own report that it trained with the
 * nccl backend, and that the step the job wrote through the SDK reached the
 * executor's heartbeats (docs/dispatch.md, "Progress").
 *
 * Environment: TY_EXECUTOR_BIN, TY_BROKER_BIN, TY_WORKER_EXAMPLES (required);
 * TY_GPU_PYTHON (a Python with torch, default python3); TY_GPU_FAKE_GPUS=N:
 * a simulated inventory and the gloo backend expected instead (to try this
 * program on a machine without a GPU); TY_TEST_KEEP=1 keeps the scratch
 * directory (ty_test_workdir()).
 */
#include "proto.h"
#include "ty_crypto.h"
#include "ty_kafka.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define NODE "gpu-node"
#define JOB 4242
#define START_MS 30000 /* broker up, executor registered */
#define JOB_MS 240000  /* importing torch, CUDA and NCCL init, the steps */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = NULL;
	size_t n = 0, cap = 0;
	int c;

	if (!f)
		return NULL;
	while ((c = fgetc(f)) != EOF) {
		if (n + 2 > cap) {
			cap = cap ? 2 * cap : 4096;
			s = realloc(s, cap);
			REQUIRE(s != NULL);
		}
		s[n++] = (char)c;
	}
	fclose(f);
	if (s)
		s[n] = 0;
	return s;
}

static const char *need_env(const char *name)
{
	const char *v = getenv(name);

	if (!v || !*v) {
		FAIL("%s is not set: run this program through tests/gpu/run", name);
		ty_test_abort();
	}
	return v;
}

/* The broker's bootstrap list, once it has written its file. */
static const char *start_broker(const char *bin)
{
	const char *file = ty_test_strf("%s/kafka.bootstrap", ty_test_workdir());
	const char *argv[] = {bin, "--bootstrap-file", file, NULL};
	int64_t end = now_ms() + START_MS;
	struct ty_err err = {0};
	char list[4096];
	struct stat st;

	ty_test_daemon_start("broker", argv);
	while (stat(file, &st) != 0 || st.st_size == 0) {
		if (now_ms() > end) {
			FAIL("the broker wrote no bootstrap file within %d ms", START_MS);
			ty_test_abort();
		}
		usleep(50000);
	}
	usleep(100000); /* written, not necessarily flushed */
	if (ty_kafka_bootstrap(list, sizeof(list), ty_test_strf("@%s", file), &err)) {
		FAIL("the broker's bootstrap file: %s", err.msg);
		ty_test_abort();
	}
	return ty_test_strf("%s", list);
}

/* Read the events and nodes topics from their current ends. */
static rd_kafka_t *consumer_at_end(const char *bootstrap)
{
	static const char *const extra[] = {"fetch.wait.max.ms=10", NULL};
	static const char *const topics[] = {PROTO_TOPIC_EVENTS, PROTO_TOPIC_NODES};
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(32);
	rd_kafka_t *c = NULL;
	struct ty_err err = {0};

	if (ty_kafka_consumer_new(&c, bootstrap, "ty-test-gpu-job", extra, &err)) {
		FAIL("consumer: %s", err.msg);
		ty_test_abort();
	}
	for (size_t i = 0; i < 2; i++) {
		const struct rd_kafka_metadata *md = NULL;
		rd_kafka_topic_t *t = rd_kafka_topic_new(c, topics[i], NULL);
		int64_t lo, hi;

		REQUIRE_INT_EQ(rd_kafka_metadata(c, 0, t, &md, 10000), 0);
		for (int p = 0; p < md->topics[0].partition_cnt; p++) {
			REQUIRE_INT_EQ(
			    rd_kafka_query_watermark_offsets(c, topics[i], p, &lo, &hi, 10000), 0);
			rd_kafka_topic_partition_list_add(l, topics[i], p)->offset = hi;
		}
		rd_kafka_metadata_destroy(md);
		rd_kafka_topic_destroy(t);
	}
	REQUIRE_INT_EQ(rd_kafka_assign(c, l), 0);
	rd_kafka_topic_partition_list_destroy(l);
	return c;
}

/* The highest step a heartbeat's running entry for JOB reports (hb borrowed), at least *step. */
static void note_progress(const json_t *hb, int64_t *step)
{
	size_t i, k;
	const json_t *e, *p;

	json_array_foreach(json_object_get(hb, "running"), i, e)
	{
		if (json_integer_value(json_object_get(e, "job")) != JOB)
			continue;
		json_array_foreach(json_object_get(e, "progress"), k, p)
		{
			json_int_t s = json_integer_value(json_object_get(p, "step"));

			if (s > *step)
				*step = s;
		}
	}
}

/*
 * The data (new reference) of the next message of type t about job (-1: any)
 * from NODE; on the way, the highest step of JOB in NODE's heartbeats into
 * *step when step is not NULL.
 */
static json_t *next_msg_noting(rd_kafka_t *c, enum proto_type t, int64_t job, int ms, int64_t *step)
{
	int64_t end = now_ms() + ms;

	while (now_ms() < end) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
		struct proto_msg pm;
		json_t *found = NULL;

		if (!m)
			continue;
		if (!m->err && !proto_decode(&pm, m->payload ? m->payload : "", m->len, NULL)) {
			if (pm.type == t && !strcmp(pm.node, NODE) && (job < 0 || pm.job == job))
				found = json_incref(pm.data);
			else if (step && pm.type == PROTO_HEARTBEAT && !strcmp(pm.node, NODE))
				note_progress(pm.data, step);
			proto_msg_clear(&pm);
		}
		rd_kafka_message_destroy(m);
		if (found)
			return found;
	}
	return NULL;
}

static json_t *next_msg(rd_kafka_t *c, enum proto_type t, int64_t job, int ms)
{
	return next_msg_noting(c, t, job, ms, NULL);
}

/* Produce a launch of command for JOB attempt 1 on NODE's partition, signed as the scheduler. */
static void send_launch(const char *bootstrap, json_t *data)
{
	struct proto_msg m = {.type = PROTO_LAUNCH, .job = JOB, .attempt = 1, .epoch = 1, .seq = 1};
	const struct rd_kafka_metadata *md = NULL;
	char sig[TY_ED25519_SIG_HEX_LEN + 1], *buf = NULL;
	struct ty_err err = {0};
	rd_kafka_t *p = NULL;
	rd_kafka_topic_t *t;
	int32_t part;
	size_t len;

	snprintf(m.node, sizeof(m.node), "%s", NODE);
	m.data = data;
	REQUIRE_INT_EQ(proto_encode(&buf, &len, &m, &err), 0);
	REQUIRE_INT_EQ(proto_sign(sig, ty_test_dispatch_signer(), buf, len), 0);
	REQUIRE_INT_EQ(ty_kafka_producer_new(&p, bootstrap, NULL, &err), 0);
	t = rd_kafka_topic_new(p, PROTO_TOPIC_DISPATCH, NULL);
	REQUIRE_INT_EQ(rd_kafka_metadata(p, 0, t, &md, 10000), 0);
	part = proto_node_partition(NODE, md->topics[0].partition_cnt);
	rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);
	REQUIRE_INT_EQ(
	    rd_kafka_producev(p, RD_KAFKA_V_TOPIC(PROTO_TOPIC_DISPATCH), RD_KAFKA_V_PARTITION(part),
			      RD_KAFKA_V_KEY(NODE, strlen(NODE)), RD_KAFKA_V_VALUE(buf, len),
			      RD_KAFKA_V_HEADER(PROTO_HDR_SIG, sig, (ssize_t)strlen(sig)),
			      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
	    0);
	REQUIRE_INT_EQ(rd_kafka_flush(p, 10000), 0);
	ty_kafka_destroy(p, 5000);
	free(buf);
}

/* The "done" line ddp_train.py printed in text (new reference), NULL when none. */
static json_t *done_line(const char *text)
{
	for (const char *p = text; p && *p;) {
		const char *end = strchr(p, '\n');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		json_t *j = n && *p == '{' ? json_loadb(p, n, 0, NULL) : NULL;

		if (j && json_is_string(json_object_get(j, "event")) &&
		    !strcmp(json_string_value(json_object_get(j, "event")), "done"))
			return j;
		json_decref(j);
		p = end ? end + 1 : NULL;
	}
	return NULL;
}

TY_TEST(a_pytorch_nccl_job_runs_under_a_real_executor)
{
	const char *exec_bin = need_env("TY_EXECUTOR_BIN"), *broker = need_env("TY_BROKER_BIN");
	const char *examples = need_env("TY_WORKER_EXAMPLES"), *fake = getenv("TY_GPU_FAKE_GPUS");
	const char *python = getenv("TY_GPU_PYTHON") && *getenv("TY_GPU_PYTHON")
				 ? getenv("TY_GPU_PYTHON")
				 : "python3";
	const char *want = fake && *fake ? "gloo" : "nccl";
	const char *state = ty_test_strf("%s/state", ty_test_workdir());
	const char *bootstrap = start_broker(broker);
	const char *argv[] = {exec_bin,
			      "--node-id",
			      NODE,
			      "--address",
			      "127.0.0.1",
			      "--state-dir",
			      state,
			      "--kafka-bootstrap",
			      bootstrap,
			      "--heartbeat-ms",
			      "500",
			      "--progress-ms",
			      "200",
			      "--log-pubkey",
			      ty_test_log_pubkey(),
			      "--dispatch-pubkey",
			      ty_test_dispatch_pubkey(),
			      "--node-key-file",
			      ty_test_node_key_file(NODE),
			      "--isolation",
			      "none",
			      fake && *fake ? "--fake-gpus" : NULL,
			      fake,
			      NULL};
	rd_kafka_t *c = consumer_at_end(bootstrap);
	json_t *reg, *exited, *done = NULL, *data;
	int64_t step = -1;
	const json_t *gpus;
	char *log;

	/* its log is printed if the case fails while it runs */
	ty_test_daemon_start("executor", argv);
	reg = next_msg(c, PROTO_REGISTER, -1, START_MS);
	if (!reg) {
		FAIL("the executor did not register within %d ms", START_MS);
		ty_test_abort();
	}
	gpus = json_object_get(json_object_get(reg, "inventory"), "gpus");
	printf("inventory: %zu GPU(s), first %s (%s)\n", json_array_size(gpus),
	       json_string_value(json_object_get(json_array_get(gpus, 0), "name")),
	       json_string_value(json_object_get(json_array_get(gpus, 0), "uuid")));
	REQUIRE(json_array_size(gpus) >= 1);

	data = json_pack(
	    "{s:i, s:i, s:i, s:i, s:i, s:s, s:i, s:[i], s:[s, s, s, s, s, s, s, s, s, s], "
	    "s:{}, s:s}",
	    "node_rank", 0, "nnodes", 1, "world_size", 1, "local_world_size", 1, "first_rank", 0,
	    "master_addr", "127.0.0.1", "master_port", 20000 + (int)(getpid() % 20000), "gpus", 0,
	    "command", python, ty_test_strf("%s/ddp_train.py", examples), "--steps", "60",
	    "--step-sleep", "0.05", "--checkpoint-every", "1000", "--timeout", "120", "env",
	    "launch", "per_gpu");
	REQUIRE(data != NULL);
	send_launch(bootstrap, data);
	json_decref(data);

	exited = next_msg_noting(c, PROTO_ATTEMPT_EXITED, JOB, JOB_MS, &step);
	log = read_text(ty_test_strf("%s/attempts/%d.1/rank-0.log", state, JOB));
	if (log) {
		done = done_line(log);
		printf("rank 0 log (last 1500 bytes):\n%s\n",
		       strlen(log) > 1500 ? log + strlen(log) - 1500 : log);
	}
	REQUIRE(exited != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(exited, "exit_code")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(exited, "failure_class")), "");
	REQUIRE(done != NULL);
	{
		char *s = json_dumps(done, JSON_COMPACT);

		printf("ddp: %s\n", s ? s : "?");
		free(s);
	}
	printf("progress: highest step in a heartbeat %lld of 60\n", (long long)step);
	CHECK(step > 0);
	CHECK_STR_EQ(json_string_value(json_object_get(done, "backend")), want);
	CHECK(json_is_true(json_object_get(done, "ok")));
	json_decref(done);
	json_decref(exited);
	json_decref(reg);
	free(log);
	ty_kafka_destroy(c, 0);
}
