/*
 * trainyard-executor against the real broker: this test plays the
 * scheduler. It produces launch/kill messages to the executor's dispatch
 * partition, reads trainyard.events and trainyard.nodes with a consumer of
 * its own, and looks at the files and processes the ranks leave behind.
 * Needs TY_TEST_KAFKA_BOOTSTRAP and TY_EXECUTOR_BIN (tests/run sets both).
 */
#include "logcred.h"
#include "proto.h"
#include "ty_buf.h"
#include "ty_crypto.h"
#include "ty_kafka.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 15000 /* generous upper bound for anything to arrive */
#define EPOCH 5

struct got {
	enum proto_type type;
	int64_t job;
	int64_t attempt;
	int64_t ts; /* the executor's wall clock when it sent it */
	json_t *data;
};

static struct {
	bool ready;
	char bootstrap[4096];
	const char *bin;
	char node[64];
	char dir[2048]; /* scratch directory of this run */
	char state[4096];
	char log[4096];
	char rules[4096];     /* the --classify-file */
	char ckpt_sh[4096];   /* writes a checkpoint: ckpt.sh STEP [corrupt] */
	char preflight[4096]; /* the --preflight-command script */
	pid_t pid;	      /* the executor, 0 when not running */
	const char *const *extra; /* more options for the next start (NULL-terminated), NULL: none */
	char boot_id[64];
	int log_port;
	rd_kafka_t *producer;
	rd_kafka_t *consumer;
	int32_t partition;
	int64_t seq;
	struct got *got;
	size_t ngot, capgot;
} T;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the executor process ---- */

static void dump_log(void)
{
	char line[2048];
	long lines = 0, skip;
	FILE *f = fopen(T.log, "r");

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		lines++;
	rewind(f);
	skip = lines > 120 ? lines - 120 : 0;
	ty_test_note("last %ld line(s) of the executor log '%s':", lines - skip, T.log);
	while (fgets(line, sizeof(line), f))
		if (skip-- <= 0)
			ty_test_note("| %.*s", (int)strcspn(line, "\n"), line);
	fclose(f);
}

/* Wait up to ms for the executor to exit; its wait status, or -1. */
static int reap(int ms)
{
	int64_t end = now_ms() + ms;
	int status;

	while (T.pid) {
		pid_t r = waitpid(T.pid, &status, WNOHANG);

		if (r == T.pid) {
			T.pid = 0;
			return status;
		}
		if (now_ms() > end)
			return -1;
		usleep(10000);
	}
	return -1;
}

static void executor_spawn(void)
{
	const char *preflight =
	    ty_test_strf("[\"/bin/sh\", \"%s\", \"--node-check\"]", T.preflight);
	const char *argv[] = {T.bin,
			      "--node-id",
			      T.node,
			      "--state-dir",
			      T.state,
			      "--kafka-bootstrap",
			      T.bootstrap,
			      "--fake-gpus",
			      "2",
			      "--labels",
			      "zone=z1,rack=r1",
			      "--heartbeat-ms",
			      "200",
			      "--progress-ms",
			      "200",
			      "--kill-grace-ms",
			      "3000",
			      "--log-max-bytes",
			      "65536",
			      "--log-level",
			      "debug",
			      "--classify-file",
			      T.rules,
			      "--preflight-command",
			      preflight,
			      "--log-pubkey",
			      ty_test_log_pubkey(),
			      "--dispatch-pubkey",
			      ty_test_dispatch_pubkey(),
			      "--node-key-file",
			      ty_test_node_key_file(T.node),
			      /* the launches this test plays carry no team uid (e2e_isolation) */
			      "--isolation",
			      "none",
			      NULL};
	const char *all[64];
	size_t n = 0;
	pid_t pid;

	bool inventory_file = false;

	/* GPUs from a file or from (a stand-in) NVML instead of simulated ones */
	for (const char *const *e = T.extra; e && *e; e++)
		inventory_file |= !strcmp(*e, "--inventory-file") || !strcmp(*e, "--nvml-library");
	for (size_t i = 0; argv[i]; i++) {
		if (inventory_file && !strcmp(argv[i], "--fake-gpus")) {
			i++; /* the alternative the extra options give */
			continue;
		}
		all[n++] = argv[i];
	}
	for (const char *const *e = T.extra; e && *e && n < 63; e++)
		all[n++] = *e; /* a later option wins */
	all[n] = NULL;

	fflush(stdout);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int fd = open(T.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int in = open("/dev/null", O_RDONLY);

		/* never outlive the test, whatever happens to it */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd < 0 || in < 0 || dup2(in, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(T.bin, (char **)all);
		_exit(127);
	}
	T.pid = pid;
}

static void stop_executor(int sig)
{
	if (!T.pid)
		return;
	kill(T.pid, sig);
	if (reap(10000) == -1) {
		kill(T.pid, SIGKILL);
		reap(5000);
	}
}

/* ---- kafka: the test's own producer and consumer ---- */

static void collect(int ms)
{
	int64_t end = now_ms() + ms;

	do {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(T.consumer, 20);
		struct proto_msg pm;

		if (!m)
			continue;
		if (!m->err && proto_decode(&pm, m->payload ? m->payload : "", m->len, NULL) == 0) {
			char buf[PROTO_NODE_KEY_LEN + 2];

			/* everything the executor sends carries its node's MAC */
			if (proto_check_mac(ty_test_node_key(pm.node), m->payload, m->len,
					    proto_header(buf, sizeof(buf), m, PROTO_HDR_MAC)))
				FAIL("a '%s' message from node '%s' without its node's MAC",
				     proto_type_name(pm.type), pm.node);
			if (strcmp(pm.node, T.node) == 0) {
				if (T.ngot == T.capgot) {
					T.capgot = T.capgot ? T.capgot * 2 : 256;
					T.got = realloc(T.got, T.capgot * sizeof(*T.got));
					REQUIRE(T.got != NULL);
				}
				T.got[T.ngot++] = (struct got){pm.type, pm.job, pm.attempt, pm.ts,
							       json_incref(pm.data)};
			}
			proto_msg_clear(&pm);
		}
		rd_kafka_message_destroy(m);
	} while (now_ms() < end);
}

static size_t count_of(enum proto_type t, int64_t job)
{
	size_t n = 0;

	for (size_t i = 0; i < T.ngot; i++)
		n += T.got[i].type == t && T.got[i].job == job;
	return n;
}

/* The n-th (1-based) message of type t for job, waiting for it; NULL after WAIT_MS. */
static const json_t *wait_msg(enum proto_type t, int64_t job, size_t n)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		size_t seen = 0;

		for (size_t i = 0; i < T.ngot; i++)
			if (T.got[i].type == t && T.got[i].job == job && ++seen == n)
				return T.got[i].data;
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

static bool in_list(const json_t *list, int64_t job)
{
	size_t i;
	const json_t *v;

	json_array_foreach(list, i,
			   v) if (json_integer_value(json_object_get(v, "job")) == job) return true;
	return false;
}

/* The first heartbeat of this boot whose finished list holds job. */
static const json_t *wait_heartbeat_finished(int64_t job)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		for (size_t i = 0; i < T.ngot; i++) {
			const json_t *d = T.got[i].data;

			const char *boot = json_string_value(json_object_get(d, "boot_id"));

			if (T.got[i].type == PROTO_HEARTBEAT && boot &&
			    strcmp(boot, T.boot_id) == 0 &&
			    in_list(json_object_get(d, "finished"), job))
				return d;
		}
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

static long long counter(const json_t *hb, const char *name)
{
	return json_integer_value(json_object_get(json_object_get(hb, "counters"), name));
}

/* Produce payload to the node's dispatch partition with header ty-sig = sig (NULL: none). */
static void produce_sig(const char *payload, size_t len, const char *sig)
{
	rd_kafka_resp_err_t e;

	if (sig)
		e = rd_kafka_producev(
		    T.producer, RD_KAFKA_V_TOPIC(PROTO_TOPIC_DISPATCH),
		    RD_KAFKA_V_PARTITION(T.partition), RD_KAFKA_V_KEY(T.node, strlen(T.node)),
		    RD_KAFKA_V_VALUE((void *)payload, len),
		    RD_KAFKA_V_HEADER(PROTO_HDR_SIG, sig, (ssize_t)strlen(sig)),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	else
		e = rd_kafka_producev(
		    T.producer, RD_KAFKA_V_TOPIC(PROTO_TOPIC_DISPATCH),
		    RD_KAFKA_V_PARTITION(T.partition), RD_KAFKA_V_KEY(T.node, strlen(T.node)),
		    RD_KAFKA_V_VALUE((void *)payload, len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		    RD_KAFKA_V_END);
	REQUIRE_INT_EQ(e, 0);
	REQUIRE_INT_EQ(rd_kafka_flush(T.producer, 10000), 0);
}

/* The test dispatch key's signature of payload (scratch). */
static const char *sign(const char *payload, size_t len)
{
	char sig[TY_ED25519_SIG_HEX_LEN + 1];

	REQUIRE_INT_EQ(proto_sign(sig, ty_test_dispatch_signer(), payload, len), 0);
	return ty_test_strf("%s", sig);
}

/* Produce payload signed as the scheduler signs it. */
static void produce_raw(const char *payload, size_t len)
{
	produce_sig(payload, len, sign(payload, len));
}

/* Send a dispatch message (data is JSON with ' for "); returns its seq. */
static int64_t send_seq(enum proto_type t, int64_t job, int64_t epoch, int64_t seq,
			const char *data)
{
	struct proto_msg m = {.type = t, .job = job, .attempt = 1, .epoch = epoch, .seq = seq};
	struct ty_err err = {0};
	char *buf = NULL;
	size_t len;
	json_error_t jerr;

	snprintf(m.node, sizeof(m.node), "%s", T.node);
	m.data = json_loads(ty_test_jf("%s", data), 0, &jerr);
	if (!m.data)
		FAIL("bad test JSON: %s: %s", data, jerr.text);
	REQUIRE(m.data != NULL);
	if (proto_encode(&buf, &len, &m, &err))
		FAIL("cannot encode: %s", err.msg);
	json_decref(m.data);
	REQUIRE(buf != NULL);
	produce_raw(buf, len);
	free(buf);
	return seq;
}

static int64_t send_msg(enum proto_type t, int64_t job, int64_t epoch, const char *data)
{
	return send_seq(t, job, epoch, ++T.seq, data);
}

/* Launch data for a one-node job of n ranks (GPUs n-1..0) running sh -c script. */
static const char *launch_data(int n, const char *script)
{
	json_t *cmd = json_pack("[s, s, s]", "/bin/sh", "-c", script);
	char *c = json_dumps(cmd, JSON_COMPACT), *gpus = ty_test_strf("[");
	const char *d;

	for (int i = n - 1; i >= 0; i--)
		gpus = ty_test_strf("%s%d%s", gpus, i, i ? "," : "]");
	for (char *p = c; *p; p++)
		if (*p == '"')
			*p = '\'';
	d = ty_test_strf("{'node_rank':0,'nnodes':1,'world_size':%d,'local_world_size':%d,"
			 "'first_rank':0,'master_addr':'127.0.0.1','master_port':29400,"
			 "'gpus':%s,'command':%s,'env':{},'launch':'per_gpu'}",
			 n, n, gpus, c);
	free(c);
	json_decref(cmd);
	return d;
}

/* launch_data with more fields, extra being e.g. "'hang_timeout_seconds':1". */
static const char *launch_extra(int n, const char *script, const char *extra)
{
	const char *d = launch_data(n, script);

	return ty_test_strf("%.*s,%s}", (int)strlen(d) - 1, d, extra);
}

/* Start the executor and wait for its register message with a new boot id. */
static const json_t *start_executor(void)
{
	int64_t end;
	const char *url;
	char old[64];
	size_t from = T.ngot; /* a register before the spawn is an earlier boot's */

	snprintf(old, sizeof(old), "%s", T.boot_id);
	executor_spawn();
	end = now_ms() + WAIT_MS;
	for (;;) {
		for (size_t i = from; i < T.ngot; i++) {
			const json_t *d = T.got[i].data;
			const char *boot = json_string_value(json_object_get(d, "boot_id"));

			if (T.got[i].type != PROTO_REGISTER || !boot || strcmp(boot, old) == 0)
				continue;
			snprintf(T.boot_id, sizeof(T.boot_id), "%s", boot);
			url = json_string_value(json_object_get(d, "log_url"));
			REQUIRE(url != NULL);
			REQUIRE(sscanf(url, "http://127.0.0.1:%d", &T.log_port) == 1);
			return d;
		}
		if (now_ms() > end || waitpid(T.pid, NULL, WNOHANG) == T.pid) {
			FAIL("the executor did not register within %d ms", WAIT_MS);
			dump_log();
			ty_test_abort();
		}
		collect(50);
	}
}

static void assign_all(rd_kafka_topic_partition_list_t *l, const char *topic)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *t = rd_kafka_topic_new(T.consumer, topic, NULL);
	int64_t lo, hi;

	REQUIRE_INT_EQ(rd_kafka_metadata(T.consumer, 0, t, &md, 10000), 0);
	REQUIRE_INT_EQ(md->topics[0].err, 0);
	for (int p = 0; p < md->topics[0].partition_cnt; p++) {
		/* explicit end offsets: nothing the executor sends later is missed */
		REQUIRE_INT_EQ(
		    rd_kafka_query_watermark_offsets(T.consumer, topic, p, &lo, &hi, 10000), 0);
		rd_kafka_topic_partition_list_add(l, topic, p)->offset = hi;
	}
	rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);
}

static void teardown(void)
{
	char cmd[4200];

	stop_executor(SIGTERM);
	if (T.consumer)
		ty_kafka_destroy(T.consumer, 0);
	if (T.producer)
		ty_kafka_destroy(T.producer, 5000);
	for (size_t i = 0; i < T.ngot; i++)
		json_decref(T.got[i].data);
	free(T.got);
	if (T.dir[0] && !(getenv("TY_TEST_KEEP") && *getenv("TY_TEST_KEEP"))) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", T.dir);
		if (system(cmd) != 0)
			fprintf(stderr, "cannot remove '%s'\n", T.dir);
	}
	curl_global_cleanup();
}

static void setup(void)
{
	static const char *const cextra[] = {"fetch.wait.max.ms=10", NULL};
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_topic_t *t;
	struct ty_err err = {0};
	const char *bs = getenv("TY_TEST_KAFKA_BOOTSTRAP"), *tmp = getenv("TY_TEST_TMPDIR");

	if (T.ready)
		return;
	if (!bs || !*bs || !(T.bin = getenv("TY_EXECUTOR_BIN"))) {
		FAIL("TY_TEST_KAFKA_BOOTSTRAP and TY_EXECUTOR_BIN are not set: run this test "
		     "with tests/run");
		ty_test_abort();
	}
	REQUIRE(ty_kafka_bootstrap(T.bootstrap, sizeof(T.bootstrap), bs, &err) == 0);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	ty_test_on(TY_TEST_TEARDOWN, teardown);
	ty_test_on(TY_TEST_CASE_FAILED, dump_log);
	snprintf(T.node, sizeof(T.node), "exec-it-%d", (int)getpid());
	snprintf(T.dir, sizeof(T.dir), "%s/ty-executor-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	REQUIRE(mkdtemp(T.dir) != NULL);
	snprintf(T.state, sizeof(T.state), "%s/state", T.dir);
	snprintf(T.log, sizeof(T.log), "%s/executor.log", T.dir);
	snprintf(T.rules, sizeof(T.rules), "%s/rules.conf", T.dir);
	{
		FILE *f = fopen(T.rules, "w");

		REQUIRE(f != NULL);
		fputs("# an operator's rule, checked before the built-in ones\n"
		      "hardware\tTEST-GPU-[0-9]+ BROKE\n",
		      f);
		fclose(f);
	}
	T.seq = 1000;
	snprintf(T.ckpt_sh, sizeof(T.ckpt_sh), "%s/ckpt.sh", T.dir);
	{
		FILE *f = fopen(T.ckpt_sh, "w");

		REQUIRE(f != NULL);
		/* the checkpoint protocol as training code follows it: files, then the manifest */
		fputs("d=\"$TRAINYARD_CHECKPOINT_DIR/step-$1\"\n"
		      "mkdir -p \"$d\"\n"
		      "printf 'weights %s' \"$1\" > \"$d/w\"\n"
		      "sum=$(sha256sum \"$d/w\" | cut -d' ' -f1)\n"
		      "[ \"$2\" = corrupt ] && sum=$(echo $sum | tr 0-9a-f 1-9a-f0)\n"
		      "size=$(wc -c < \"$d/w\")\n"
		      "printf '{\"step\": %s, \"files\": [{\"path\": \"w\", \"size\": %s, "
		      "\"sha256\": \"%s\"}]}' \"$1\" $size \"$sum\" > \"$d/MANIFEST.json.tmp\"\n"
		      "mv \"$d/MANIFEST.json.tmp\" \"$d/MANIFEST.json\"\n",
		      f);
		fclose(f);
	}
	snprintf(T.preflight, sizeof(T.preflight), "%s/preflight.sh", T.dir);
	{
		FILE *f = fopen(T.preflight, "w");

		REQUIRE(f != NULL);
		/* a stand-in for trainyard-allreduce --node-check, steered by the job's env */
		fputs("echo \"preflight $1 rank $RANK of $WORLD_SIZE job $TRAINYARD_JOB_ID\"\n"
		      "case \"$PREFLIGHT\" in\n"
		      "pass) [ \"$RANK\" = 0 ] && echo '{\"node_check\": {\"slow\": [], "
		      "\"nodes\": [\"n1\"], \"median_gbps\": 20}}'; exit 0 ;;\n"
		      "fail) if [ \"$RANK\" = 1 ]; then echo 'slow link'; echo '{\"node_check\": "
		      "{\"slow\": [\"n2\"], \"nodes\": [\"n1\", \"n2\"], \"median_gbps\": "
		      "9.5}}'; exit 5; fi; sleep 60 & wait ;;\n"
		      "hang) sleep 60 & wait ;;\n"
		      "esac\n",
		      f);
		fclose(f);
	}

	REQUIRE(ty_kafka_producer_new(&T.producer, T.bootstrap, NULL, &err) == 0);
	t = rd_kafka_topic_new(T.producer, PROTO_TOPIC_DISPATCH, NULL);
	REQUIRE_INT_EQ(rd_kafka_metadata(T.producer, 0, t, &md, 10000), 0);
	T.partition = proto_node_partition(T.node, md->topics[0].partition_cnt);
	rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);

	REQUIRE(ty_kafka_consumer_new(&T.consumer, T.bootstrap,
				      ty_test_strf("ty-test-executor-%d", (int)getpid()), cextra,
				      &err) == 0);
	l = rd_kafka_topic_partition_list_new(32);
	assign_all(l, PROTO_TOPIC_EVENTS);
	assign_all(l, PROTO_TOPIC_NODES);
	REQUIRE_INT_EQ(rd_kafka_assign(T.consumer, l), 0);
	rd_kafka_topic_partition_list_destroy(l);
	T.ready = true;
}

/* ---- processes and files ---- */

/* Live (not zombie) processes in process group pgid, read from /proc. */
static int group_live(pid_t pgid)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	REQUIRE(d != NULL);
	while ((e = readdir(d))) {
		char path[300], buf[1024], state, *p;
		int pid, ppid, pg, fd;
		ssize_t r;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		r = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (r <= 0)
			continue;
		buf[r] = '\0';
		pid = atoi(buf);
		if ((p = strrchr(buf, ')')) &&
		    sscanf(p + 1, " %c %d %d", &state, &ppid, &pg) == 3 && pg == pgid &&
		    state != 'Z' && state != 'X' && pid > 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Whether a line of the executor's log contains needle. */
static bool log_has(const char *needle)
{
	FILE *f = fopen(T.log, "r");
	char line[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return found;
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = ty_test_alloc(4096);

	if (!f)
		return NULL;
	s[fread(s, 1, 4095, f)] = '\0';
	fclose(f);
	return s;
}

static pid_t rank_pid(int64_t job, size_t n)
{
	const json_t *d = wait_msg(PROTO_RANK_STARTED, job, n);

	return d ? (pid_t)json_integer_value(json_object_get(d, "pid")) : 0;
}

/* ---- HTTP ---- */

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	ty_buf_append(arg, p, sz * n);
	return sz * n;
}

/* The WWW-Authenticate header of the last http_as reply ("" without one). */
static char www_authenticate[256];

static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
	(void)arg;
	if (sz * n > 18 && strncasecmp(p, "WWW-Authenticate: ", 18) == 0)
		snprintf(www_authenticate, sizeof(www_authenticate), "%.*s",
			 (int)strcspn(p + 18, "\r\n"), p + 18);
	return sz * n;
}

/*
 * GET path from the log server with this Authorization header value (NULL:
 * none); status, and the body as a scratch string.
 */
static long http_as(const char *path, const char *authorization, char **body)
{
	CURL *c = curl_easy_init();
	struct ty_buf b = TY_BUF_INIT;
	struct curl_slist *h = NULL;
	long status = 0;

	REQUIRE(c != NULL);
	www_authenticate[0] = '\0';
	if (authorization)
		h = curl_slist_append(NULL, ty_test_strf("Authorization: %s", authorization));
	curl_easy_setopt(c, CURLOPT_URL, ty_test_strf("http://127.0.0.1:%d%s", T.log_port, path));
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	curl_slist_free_all(h);
	*body = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return status;
}

/* The private key at path, loaded once and kept for the program's life. */
static struct ty_ed25519_key *signer_of(const char *path)
{
	static struct ty_ed25519_key *keys[2];
	static const char *paths[2];
	struct ty_err err = {0};

	for (int i = 0; i < 2; i++) {
		if (paths[i] && strcmp(paths[i], path) == 0)
			return keys[i];
		if (!paths[i]) {
			if (ty_ed25519_key_load(&keys[i], path, true, &err)) {
				FAIL("%s", err.msg);
				ty_test_abort();
			}
			paths[i] = strdup(path);
			return keys[i];
		}
	}
	FAIL("signer_of: more than two keys");
	ty_test_abort();
}

/* A log credential as the API mints it, with the test's key (scratch). */
static const char *cred_as(const char *key_path, int64_t job, int64_t attempt, int64_t rank,
			   const char *node, int64_t exp)
{
	struct proto_logcred c = {job, attempt, rank, exp, ""};
	char *out = ty_test_alloc(PROTO_LOGCRED_MAX);
	struct ty_err err = {0};

	snprintf(c.node, sizeof(c.node), "%s", node);
	if (proto_logcred_mint(out, &c, signer_of(key_path), &err)) {
		FAIL("%s", err.msg);
		ty_test_abort();
	}
	return out;
}

static const char *bearer(const char *cred)
{
	return ty_test_strf("Bearer %s", cred);
}

/*
 * GET path from the log server as the API would: a /logs/ path with a
 * valid credential for the log it names (for 1008/1/0 when it names none).
 */
static long http_get(const char *path, char **body)
{
	long long job = 1008, attempt = 1, rank = 0;

	if (strncmp(path, "/logs/", 6) == 0 &&
	    sscanf(path, "/logs/%lld/%lld/%lld", &job, &attempt, &rank) != 3) {
		job = 1008;
		attempt = 1;
		rank = 0;
	}
	if (strncmp(path, "/logs/", 6) != 0)
		return http_as(path, NULL, body);
	return http_as(path,
		       bearer(cred_as(ty_test_log_key(), job, attempt < 1 ? 1 : attempt,
				      rank < 0 ? 0 : rank, T.node, (int64_t)time(NULL) + 60)),
		       body);
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* ---- cases, in order: one executor serves them all ---- */

TY_TEST(registers_and_heartbeats)
{
	const json_t *reg, *hb;

	setup();
	reg = start_executor();
	CHECK_INT_EQ(json_integer_value(json_object_get(reg, "gpus")), 2);
	CHECK(json_is_true(json_object_get(reg, "simulated")));
	CHECK_STR_EQ(json_string_value(json_object_get(reg, "address")), "127.0.0.1");
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(reg, "labels"), "zone")),
		     "z1");
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(reg, "labels"), "rack")),
		     "r1");
	CHECK_INT_EQ(json_array_size(json_object_get(json_object_get(reg, "inventory"), "gpus")),
		     2);
	CHECK_STR_EQ(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(json_object_get(reg, "inventory"), "gpus"), 1),
		"uuid")),
	    "GPU-00000000-0000-0000-0000-000000000001");
	CHECK(json_is_array(json_object_get(json_object_get(reg, "inventory"), "hcas")));
	/* a simulated node reports no CPUs or memory without --cpus / --memory-mb: not limited */
	CHECK(json_object_get(reg, "cpus") == NULL);
	CHECK(json_object_get(reg, "memory_mb") == NULL);
	/* no expected inventory: register says nothing of one */
	CHECK(json_object_get(reg, "expected_gpus") == NULL);
	CHECK(json_object_get(reg, "fault") == NULL);
	CHECK(strlen(T.boot_id) >= 16);
	REQUIRE((hb = wait_msg(PROTO_HEARTBEAT, 0, 2)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(hb, "boot_id")), T.boot_id);
	CHECK(json_is_array(json_object_get(hb, "running")));
	CHECK(json_is_array(json_object_get(hb, "finished")));
}

TY_TEST(launch_runs_ranks_with_contract_env)
{
	const char *script =
	    "echo \"$RANK $WORLD_SIZE $LOCAL_RANK $MASTER_ADDR $MASTER_PORT "
	    "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER\" > out.$RANK; "
	    "echo \"$TRAINYARD_JOB_ID $TRAINYARD_ATTEMPT $TRAINYARD_NODE_ID $NODE_RANK "
	    "$NNODES $LOCAL_WORLD_SIZE $FOO\" > env.$RANK; "
	    "echo \"$NCCL_IB_DISABLE $NCCL_SOCKET_IFNAME $NCCL_DEBUG "
	    "$TORCH_NCCL_ASYNC_ERROR_HANDLING\" > nccl.$RANK";
	json_t *cmd;
	const json_t *d;
	char *c, *text, *dir;

	setup();
	dir = ty_test_strf("%s/attempts/1001.1", T.state);
	cmd = json_pack("[s, s, s]", "/bin/sh", "-c", script);
	c = json_dumps(cmd, JSON_COMPACT);
	for (char *p = c; *p; p++)
		if (*p == '"')
			*p = '\'';
	/* node 1 of 2, ranks 2 and 3 of 4, GPUs listed as [1, 0]; the job's RANK loses */
	send_msg(PROTO_LAUNCH, 1001, EPOCH,
		 ty_test_strf("{'node_rank':1,'nnodes':2,'world_size':4,'local_world_size':2,"
			      "'first_rank':2,'master_addr':'10.1.2.3','master_port':29500,"
			      "'gpus':[1,0],'command':%s,'env':{'FOO':'bar','RANK':'999',"
			      "'NCCL_DEBUG':'INFO'},"
			      "'launch':'per_gpu'}",
			      c));
	free(c);
	json_decref(cmd);
	d = wait_msg(PROTO_ATTEMPT_EXITED, 1001, 1);
	REQUIRE(d != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1001), 2);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_RUNNING, 1001), 1);
	CHECK_INT_EQ(count_of(PROTO_RANK_EXITED, 1001), 2);
	d = wait_msg(PROTO_ATTEMPT_RUNNING, 1001, 1);
	CHECK(d && json_integer_value(json_object_get(d, "ranks")) == 2);
	for (size_t i = 1; i <= 2; i++) {
		d = wait_msg(PROTO_RANK_STARTED, 1001, i);
		REQUIRE(d != NULL);
		CHECK(json_integer_value(json_object_get(d, "pid")) > 1);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "rank")),
			     2 + json_integer_value(json_object_get(d, "local_rank")));
		d = wait_msg(PROTO_RANK_EXITED, 1001, i);
		REQUIRE(d != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "signal")), 0);
	}
	/* GPUs by the UUIDs of the (simulated) inventory, in PCI bus order */
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/out.2", dir)),
		     "2 4 0 10.1.2.3 29500 GPU-00000000-0000-0000-0000-000000000001 PCI_BUS_ID\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/out.3", dir)),
		     "3 4 1 10.1.2.3 29500 GPU-00000000-0000-0000-0000-000000000000 PCI_BUS_ID\n");
	text = ty_test_strf("1001 1 %s 1 2 2 bar\n", T.node);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/env.2", dir)), text);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/env.3", dir)), text);
	/* the fabric of a node without HCAs, on 127.0.0.1; the job's NCCL_DEBUG wins */
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/nccl.2", dir)), "1 =lo INFO 1\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/nccl.3", dir)), "1 =lo INFO 1\n");
	CHECK(wait_heartbeat_finished(1001) != NULL);
}

/* A checkpoint step-N under dir holding one file "w" = text; bad_sha: a wrong hash. */
static void write_ckpt(const char *dir, int step, const char *text, bool bad_sha)
{
	const char *d = ty_test_strf("%s/step-%d", dir, step);
	const char *cmd =
	    ty_test_strf("mkdir -p '%s' && printf %%s '%s' > '%s/w' && "
			 "sum=$(sha256sum '%s/w' | cut -d' ' -f1) && %s"
			 "printf '{\"step\": %d, \"files\": [{\"path\": \"w\", \"size\": %zu, "
			 "\"sha256\": \"%%s\"}]}' \"$sum\" > '%s/MANIFEST.json.tmp' && "
			 "mv '%s/MANIFEST.json.tmp' '%s/MANIFEST.json'",
			 d, text, d, d, bad_sha ? "sum=$(echo $sum | tr 0-9a-f 1-9a-f0) && " : "",
			 step, strlen(text), d, d, d);

	REQUIRE_INT_EQ(system(cmd), 0);
}

TY_TEST(checkpoint_dir_resume_and_progress_env)
{
	const char *ck = ty_test_strf("%s/checkpoints/job-1077", T.state);
	const char *dir = ty_test_strf("%s/attempts/1077.1", T.state);
	const json_t *d, *resume;

	setup();
	/* step 2 is newer but corrupt: the rank resumes from step 1, and is told so */
	write_ckpt(ck, 1, "one", false);
	write_ckpt(ck, 2, "two", true);
	send_msg(PROTO_LAUNCH, 1077, EPOCH,
		 launch_data(1, "echo \"$TRAINYARD_CHECKPOINT_DIR $TRAINYARD_RESUME_FROM "
				"$TRAINYARD_PROGRESS_FILE\" > ck.$RANK"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1077, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/ck.0", dir)),
		     ty_test_strf("%s %s/step-1 %s/work/progress-0\n", ck, ck, dir));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_RUNNING, 1077, 1)) != NULL);
	resume = json_object_get(d, "resume");
	CHECK_INT_EQ(json_integer_value(json_object_get(resume, "step")), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(resume, "path")),
		     ty_test_strf("%s/step-1", ck));
	CHECK_INT_EQ(json_array_size(json_object_get(resume, "skipped")), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(
			 json_array_get(json_object_get(resume, "skipped"), 0), "status")),
		     "corrupt");

	/* no checkpoint at all: the directory exists, nothing to resume from */
	send_msg(PROTO_LAUNCH, 1078, EPOCH,
		 launch_data(1, "echo \"$TRAINYARD_CHECKPOINT_DIR [$TRAINYARD_RESUME_FROM]\" > "
				"ck.$RANK; test -d \"$TRAINYARD_CHECKPOINT_DIR\""));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1078, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/attempts/1078.1/work/ck.0", T.state)),
		     ty_test_strf("%s/checkpoints/job-1078 []\n", T.state));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_RUNNING, 1078, 1)) != NULL);
	CHECK(json_is_null(json_object_get(json_object_get(d, "resume"), "path")));
}

static long index_of(enum proto_type t, int64_t job, size_t n);

TY_TEST(duplicate_launch_is_ignored)
{
	const char *quick = launch_data(1, "true");
	const json_t *hb, *d;
	int64_t seq;

	setup();
	/* the same attempt again under a new seq: semantic dedupe */
	send_msg(PROTO_LAUNCH, 1001, EPOCH, launch_data(2, "echo again > again.$RANK"));
	/* an exact redelivery (same seq) of another message: refused as a replay */
	seq = send_msg(PROTO_LAUNCH, 1002, EPOCH, quick);
	send_seq(PROTO_LAUNCH, 1002, EPOCH, seq, quick);
	/* the partition is ordered: once 1017 is done, so is everything before it */
	send_msg(PROTO_LAUNCH, 1017, EPOCH, quick);
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1017, 1) != NULL);
	REQUIRE((hb = wait_heartbeat_finished(1017)) != NULL);
	CHECK(counter(hb, "duplicates") >= 1);
	CHECK(log_has("(replayed): 'launch' of job 1002 attempt 1"));
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1001), 2);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1002), 1);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1002), 1);
	/*
	 * Every accepted launch is acknowledged before its ranks start, and a
	 * re-sent one of a finished attempt again (its first ack may be what
	 * was lost); a refused replay is not.
	 */
	REQUIRE((d = wait_msg(PROTO_LAUNCH_ACCEPTED, 1001, 2)) != NULL);
	CHECK(json_is_true(json_object_get(d, "duplicate")));
	CHECK(json_is_false(json_object_get(wait_msg(PROTO_LAUNCH_ACCEPTED, 1001, 1), "duplicate")));
	CHECK(index_of(PROTO_LAUNCH_ACCEPTED, 1001, 1) < index_of(PROTO_RANK_STARTED, 1001, 1));
	REQUIRE(wait_msg(PROTO_LAUNCH_ACCEPTED, 1002, 1) != NULL);
	CHECK_INT_EQ(count_of(PROTO_LAUNCH_ACCEPTED, 1002), 1);
	CHECK(access(ty_test_strf("%s/attempts/1001.1/work/again.0", T.state), F_OK) != 0);
}

TY_TEST(stale_epoch_is_ignored)
{
	const json_t *hb;

	setup();
	send_msg(PROTO_LAUNCH, 1003, EPOCH - 1, launch_data(1, "touch ran"));
	/* placed on an earlier boot of this node: this boot must not run it */
	send_msg(PROTO_LAUNCH, 1005, EPOCH,
		 ty_test_strf("%.*s,'boot_id':'an-earlier-boot'}",
			      (int)strlen(launch_data(1, "touch ran")) - 1,
			      launch_data(1, "touch ran")));
	send_msg(PROTO_LAUNCH, 1004, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1004, 1) != NULL);
	REQUIRE((hb = wait_heartbeat_finished(1004)) != NULL);
	CHECK(counter(hb, "stale") >= 2);
	for (int64_t job = 1003; job <= 1005; job += 2) {
		ty_test_context("job %lld", (long long)job);
		CHECK(!in_list(json_object_get(hb, "finished"), job));
		CHECK(!in_list(json_object_get(hb, "running"), job));
		CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, job), 0);
		CHECK(access(ty_test_strf("%s/attempts/%lld.1", T.state, (long long)job), F_OK) !=
		      0);
	}
	ty_test_context(NULL);
	CHECK(log_has("it was for boot 'an-earlier-boot'"));
}

TY_TEST(failing_rank_stops_the_gang)
{
	const json_t *d;
	pid_t p0, p1;

	setup();
	/* rank 0 fails; rank 1 sleeps in a child of its shell, which must die too */
	send_msg(PROTO_LAUNCH, 1005, EPOCH,
		 launch_data(2, "if [ \"$LOCAL_RANK\" = 0 ]; then sleep 0.3; exit 3; fi; "
				"sleep 60 & wait"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1005, 1) != NULL);
	p0 = rank_pid(1005, 1);
	p1 = rank_pid(1005, 2);
	REQUIRE(p0 > 1 && p1 > 1);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1005, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "user");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 3);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")), "rank 0 exited with code 3");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence")), "rank 0: exit code 3");
	CHECK_INT_EQ(count_of(PROTO_RANK_EXITED, 1005), 2);
	for (size_t i = 1; i <= 2; i++) {
		d = wait_msg(PROTO_RANK_EXITED, 1005, i);
		REQUIRE(d != NULL);
		if (json_integer_value(json_object_get(d, "rank")) == 0)
			CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 3);
		else
			CHECK_INT_EQ(json_integer_value(json_object_get(d, "signal")), SIGTERM);
	}
	CHECK_INT_EQ(group_live(p0), 0);
	CHECK_INT_EQ(group_live(p1), 0);
}

TY_TEST(kill_cancels_and_escalates)
{
	const json_t *d;
	pid_t p0, p1;

	setup();
	/* rank 0 (and its child) ignore SIGTERM: only the SIGKILL after 1 s ends them */
	send_msg(PROTO_LAUNCH, 1006, EPOCH,
		 launch_data(2, "if [ \"$LOCAL_RANK\" = 0 ]; then trap \"\" TERM; fi; "
				"sleep 60 & wait; sleep 60"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1006, 1) != NULL);
	p0 = rank_pid(1006, 1);
	p1 = rank_pid(1006, 2);
	REQUIRE(p0 > 1 && p1 > 1);
	CHECK(group_live(p0) >= 1);
	send_msg(PROTO_KILL, 1006, EPOCH, "{'reason':'cancel','grace_seconds':1}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1006, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "cancelled");
	CHECK(json_integer_value(json_object_get(d, "exit_code")) != 0);
	for (size_t i = 1; i <= 2; i++) {
		d = wait_msg(PROTO_RANK_EXITED, 1006, i);
		REQUIRE(d != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "signal")),
			     json_integer_value(json_object_get(d, "rank")) == 0 ? SIGKILL
										 : SIGTERM);
	}
	CHECK_INT_EQ(group_live(p0), 0);
	CHECK_INT_EQ(group_live(p1), 0);
	/* a kill for an attempt this node never ran is answered, and blocks a late launch */
	send_msg(PROTO_KILL, 1014, EPOCH, "{'reason':'over','grace_seconds':0}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1014, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "cancelled");
	send_msg(PROTO_LAUNCH, 1014, EPOCH, launch_data(1, "true"));
	send_msg(PROTO_LAUNCH, 1015, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1015, 1) != NULL);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1014), 0);
}

/* Lines of a file (0 when it does not exist). */
static int file_lines(const char *path)
{
	char *text = read_text(path);

	return text ? count_lines(text) : 0;
}

/* Wait up to WAIT_MS for path to have at least n lines. */
static bool wait_lines(const char *path, int n)
{
	int64_t end = now_ms() + WAIT_MS;

	while (file_lines(path) < n) {
		if (now_ms() > end)
			return false;
		collect(50);
	}
	return true;
}

TY_TEST(checkpoint_signals_every_rank_once_then_kill_preempts)
{
	const char *dir = ty_test_strf("%s/attempts/1030.1", T.state);
	const json_t *d;
	pid_t p0, p1;

	setup();
	/* both ranks note the checkpoint signal and keep running, as training does */
	send_msg(PROTO_LAUNCH, 1030, EPOCH,
		 launch_data(2, "trap \"echo $$ >> ckpt-$RANK\" USR1; "
				"while :; do sleep 0.1; done"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1030, 1) != NULL);
	p0 = rank_pid(1030, 1);
	p1 = rank_pid(1030, 2);
	REQUIRE(p0 > 1 && p1 > 1);
	/* for an attempt that does not run here, and with a signal no job may choose */
	send_msg(PROTO_CHECKPOINT, 1031, EPOCH, "{'signal':'SIGUSR1','grace_seconds':5}");
	send_msg(PROTO_CHECKPOINT, 1030, EPOCH, "{'signal':'SIGKILL','grace_seconds':5}");
	send_msg(PROTO_CHECKPOINT, 1030, EPOCH, "{'signal':'SIGUSR1','grace_seconds':5}");
	CHECK(wait_lines(ty_test_strf("%s/work/ckpt-0", dir), 1));
	CHECK(wait_lines(ty_test_strf("%s/work/ckpt-1", dir), 1));
	/* a repeated request (another seq) changes nothing; nothing is reported */
	send_msg(PROTO_CHECKPOINT, 1030, EPOCH, "{'signal':'SIGUSR1','grace_seconds':5}");
	collect(800);
	CHECK_INT_EQ(file_lines(ty_test_strf("%s/work/ckpt-0", dir)), 1);
	CHECK_INT_EQ(file_lines(ty_test_strf("%s/work/ckpt-1", dir)), 1);
	CHECK_INT_EQ(count_of(PROTO_RANK_EXITED, 1030), 0);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1030), 0);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1031), 0);
	CHECK(group_live(p0) >= 1);
	CHECK(group_live(p1) >= 1);
	/* after the grace period the scheduler kills it: the same stop, class preempted */
	send_msg(PROTO_KILL, 1030, EPOCH, "{'reason':'preempted','grace_seconds':1}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1030, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "preempted");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), -1);
	CHECK_INT_EQ(count_of(PROTO_RANK_EXITED, 1030), 2);
	for (size_t i = 1; i <= 2; i++) {
		d = wait_msg(PROTO_RANK_EXITED, 1030, i);
		REQUIRE(d != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "signal")), SIGTERM);
	}
	CHECK_INT_EQ(group_live(p0), 0);
	CHECK_INT_EQ(group_live(p1), 0);
	REQUIRE((d = wait_heartbeat_finished(1030)) != NULL);
	CHECK(counter(d, "malformed") >= 1);
	/* a checkpoint after the end is ignored */
	send_msg(PROTO_CHECKPOINT, 1030, EPOCH, "{'signal':'SIGUSR1','grace_seconds':5}");
	collect(300);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1030), 1);
}

TY_TEST(rank_ending_on_the_checkpoint_signal_is_preempted)
{
	const json_t *d;

	setup();
	/* rank 1 takes the default action of SIGUSR2 (it dies); rank 0 checkpoints */
	send_msg(PROTO_LAUNCH, 1032, EPOCH,
		 launch_data(2, "if [ \"$LOCAL_RANK\" = 0 ]; then trap \"echo $$ >> ckpt\" USR2; "
				"fi; while :; do sleep 0.1; done"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1032, 1) != NULL);
	send_msg(PROTO_CHECKPOINT, 1032, EPOCH, "{'signal':'USR2','grace_seconds':30}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1032, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "preempted");
	CHECK(strstr(json_string_value(json_object_get(d, "message")), "checkpoint signal") !=
	      NULL);
	CHECK_INT_EQ(count_of(PROTO_RANK_EXITED, 1032), 2);
}

static const char *str_of(const json_t *d, const char *key)
{
	return json_string_value(json_object_get(d, key));
}

/* The n-th (1-based) checkpoint_written of job that is not a retention deletion, waiting. */
static const json_t *wait_examined(int64_t job, size_t n)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		size_t seen = 0;

		for (size_t i = 0; i < T.ngot; i++)
			if (T.got[i].type == PROTO_CHECKPOINT_WRITTEN && T.got[i].job == job &&
			    strcmp(str_of(T.got[i].data, "status"), "deleted") && ++seen == n)
				return T.got[i].data;
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The steps of job's deletion reports, ascending, as "1 2 ...". */
static const char *deleted_steps(int64_t job)
{
	int64_t steps[64];
	size_t n = 0, at = 0;
	char *out = ty_test_alloc(512);

	out[0] = 0;
	for (size_t i = 0; i < T.ngot && n < 64; i++)
		if (T.got[i].type == PROTO_CHECKPOINT_WRITTEN && T.got[i].job == job &&
		    !strcmp(str_of(T.got[i].data, "status"), "deleted"))
			steps[n++] = json_integer_value(json_object_get(T.got[i].data, "step"));
	qsort(steps, n, sizeof(steps[0]), cmp_i64);
	for (size_t i = 0; i < n; i++)
		at += (size_t)snprintf(out + at, 512 - at, "%s%lld", i ? " " : "",
				       (long long)steps[i]);
	return out;
}

/* launch data with the job env given, e.g. "'A':'1'" */
static const char *with_env(const char *launch, const char *env)
{
	const char *at = strstr(launch, "'env':{}");

	REQUIRE(at != NULL);
	return ty_test_strf("%.*s'env':{%s}%s", (int)(at - launch), launch, env, at + 8);
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Index in T.got of the n-th message of type t for job (waiting for it), or -1. */
static long index_of(enum proto_type t, int64_t job, size_t n)
{
	const json_t *d = wait_msg(t, job, n);

	for (size_t i = 0; d && i < T.ngot; i++)
		if (T.got[i].data == d)
			return (long)i;
	return -1;
}

TY_TEST(checkpoint_handshake_stops_the_gang_at_once)
{
	const char *ck = ty_test_strf("%s/checkpoints/job-1040", T.state);
	const json_t *d;

	setup();
	/* rank 0 answers the signal with a checkpoint; rank 1 only notes it; both go on */
	send_msg(
	    PROTO_LAUNCH, 1040, EPOCH,
	    launch_data(2, ty_test_strf("if [ \"$LOCAL_RANK\" = 0 ]; then trap \"sh %s 7\" USR1; "
					"else trap \"echo sig >> sig-$RANK\" USR1; fi; "
					"while :; do sleep 0.1; done",
					T.ckpt_sh)));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1040, 1) != NULL);
	/* a grace far longer than the wait here: only the handshake can end it this soon */
	send_msg(PROTO_CHECKPOINT, 1040, EPOCH, "{'signal':'SIGUSR1','grace_seconds':600}");
	REQUIRE((d = wait_msg(PROTO_CHECKPOINT_WRITTEN, 1040, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "path"), ty_test_strf("%s/step-7", ck));
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), 7);
	CHECK(json_is_true(json_object_get(d, "valid")));
	CHECK_STR_EQ(str_of(d, "status"), "valid");
	CHECK(json_is_null(json_object_get(d, "reason")));
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "files")), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "bytes")), 9); /* "weights 7" */
	/* rank 0's node is the one verifier: it hashed every file, the digest pins the manifest */
	CHECK(json_is_true(json_object_get(d, "hashed")));
	CHECK(str_of(d, "digest") && strlen(str_of(d, "digest")) == 64);
	CHECK(json_is_true(json_object_get(d, "after_signal")));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1040, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "preempted");
	CHECK_STR_EQ(str_of(d, "message"),
		     "preempted: checkpoint step 7 verified after the checkpoint signal");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), -1);
	CHECK(json_object_get(d, "preflight") == NULL); /* no preflight asked for */
	CHECK(index_of(PROTO_CHECKPOINT_WRITTEN, 1040, 1) <
	      index_of(PROTO_ATTEMPT_EXITED, 1040, 1));
	CHECK_INT_EQ(count_of(PROTO_CHECKPOINT_WRITTEN, 1040), 1);
	for (size_t i = 1; i <= 2; i++) {
		REQUIRE((d = wait_msg(PROTO_RANK_EXITED, 1040, i)) != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "signal")), SIGTERM);
	}
}

TY_TEST(corrupt_checkpoint_is_reported_and_does_not_stop_the_gang)
{
	const json_t *d;

	setup();
	send_msg(PROTO_LAUNCH, 1041, EPOCH,
		 launch_data(1, ty_test_strf("trap \"sh %s 3 corrupt\" USR1; "
					     "while :; do sleep 0.1; done",
					     T.ckpt_sh)));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1041, 1) != NULL);
	send_msg(PROTO_CHECKPOINT, 1041, EPOCH, "{'signal':'SIGUSR1','grace_seconds':600}");
	REQUIRE((d = wait_msg(PROTO_CHECKPOINT_WRITTEN, 1041, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), 3);
	CHECK(json_is_false(json_object_get(d, "valid")));
	CHECK_STR_EQ(str_of(d, "status"), "corrupt");
	CHECK(str_of(d, "reason") && strstr(str_of(d, "reason"), "'w' has SHA-256"));
	CHECK(json_is_true(json_object_get(d, "after_signal")));
	/* it keeps running: the scheduler's kill ends it */
	collect(1000);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1041), 0);
	CHECK_INT_EQ(count_of(PROTO_CHECKPOINT_WRITTEN, 1041), 1);
	send_msg(PROTO_KILL, 1041, EPOCH, "{'reason':'preempted','grace_seconds':1}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1041, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "preempted");
	CHECK_STR_EQ(str_of(d, "message"), "preempted by the scheduler");
}

/* The lowercase hex SHA-256 of dir/step-N/MANIFEST.json. */
static const char *manifest_digest(const char *dir, int step)
{
	char *text = read_text(ty_test_strf("%s/step-%d/MANIFEST.json", dir, step));
	char *hex = ty_test_alloc(TY_SHA256_HEX_LEN + 1);

	REQUIRE(text != NULL);
	ty_sha256_hex(hex, text, strlen(text));
	return hex;
}

/* Launch data for node_rank 1 of a 2-node job of one rank each, resuming from resume. */
static const char *launch_node_b(const char *script, const char *resume)
{
	const char *d = launch_data(1, script);
	const char *from = strstr(d, "'node_rank':0,'nnodes':1,'world_size':1,");
	const char *rest;

	REQUIRE(from != NULL);
	rest = from + strlen("'node_rank':0,'nnodes':1,'world_size':1,");
	REQUIRE((rest = strstr(rest, "'master_addr'")) != NULL);
	/* rank 1 of 2; rank 0 runs elsewhere */
	return ty_test_strf("%.*s'node_rank':1,'nnodes':2,'world_size':2,'local_world_size':1,"
			    "'first_rank':1,%.*s,'resume':%s}",
			    (int)(from - d), d, (int)strlen(rest) - 1, rest, resume);
}

/*
 * The gang resumes from the checkpoint the launch names: this node (not
 * rank 0's) sees a newer valid one and still resumes from the named step,
 * checking the manifest's digest and the sizes only.
 */
TY_TEST(named_resume_wins_over_a_newer_checkpoint_here)
{
	const char *ck = ty_test_strf("%s/checkpoints/job-1090", T.state);
	const char *dir = ty_test_strf("%s/attempts/1090.1", T.state);
	const json_t *d, *resume;
	const char *digest, *l;

	setup();
	write_ckpt(ck, 1, "one", false);
	write_ckpt(ck, 2, "two", false);
	digest = manifest_digest(ck, 1);
	l = launch_node_b("echo \"$TRAINYARD_RESUME_FROM\" > ck.$RANK",
			  ty_test_strf("{'step':1,'digest':'%s','path':'/on/node-a/step-1'}", digest));
	send_msg(PROTO_LAUNCH, 1090, EPOCH, l);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1090, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/ck.1", dir)),
		     ty_test_strf("%s/step-1\n", ck));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_RUNNING, 1090, 1)) != NULL);
	resume = json_object_get(d, "resume");
	CHECK_INT_EQ(json_integer_value(json_object_get(resume, "step")), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(resume, "digest")), digest);
	CHECK(json_is_false(json_object_get(resume, "hashed")));
	CHECK_INT_EQ(json_array_size(json_object_get(resume, "skipped")), 0);
	/* nothing is reported or rejected: step 2 is not this node's to judge */
	CHECK_INT_EQ(count_of(PROTO_CHECKPOINT_WRITTEN, 1090), 0);
}

/*
 * A named checkpoint whose manifest or files differ here fails the attempt
 * with the step and what differed, reports it rejected, and never falls
 * back to another step.
 */
TY_TEST(named_resume_that_differs_fails_the_attempt)
{
	const char *ck = ty_test_strf("%s/checkpoints/job-1091", T.state);
	const char *zero = "0000000000000000000000000000000000000000000000000000000000000000";
	const char *digest;
	const json_t *d;

	setup();
	write_ckpt(ck, 1, "one", false);
	write_ckpt(ck, 2, "two", false);
	send_msg(PROTO_LAUNCH, 1091, EPOCH,
		 launch_extra(1, "exit 0",
			      ty_test_strf("'resume':{'step':2,'digest':'%s','path':'%s/step-2'}",
					   zero, ck)));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1091, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK(strstr(str_of(d, "message"), "the resume checkpoint step 2 does not match the launch: "
					   "MANIFEST.json has SHA-256") != NULL);
	CHECK(strstr(str_of(d, "message"), zero) != NULL);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_RUNNING, 1091), 0);
	REQUIRE((d = wait_msg(PROTO_CHECKPOINT_WRITTEN, 1091, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), 2);
	CHECK_STR_EQ(str_of(d, "status"), "rejected");
	CHECK_STR_EQ(str_of(d, "digest"), zero);
	CHECK(strstr(str_of(d, "reason"), "MANIFEST.json has SHA-256") != NULL);

	/* the right digest, a file of another size: named too */
	ck = ty_test_strf("%s/checkpoints/job-1092", T.state);
	write_ckpt(ck, 1, "one", false);
	digest = manifest_digest(ck, 1);
	REQUIRE_INT_EQ(system(ty_test_strf("printf 'three' > '%s/step-1/w'", ck)), 0);
	send_msg(PROTO_LAUNCH, 1092, EPOCH,
		 launch_extra(1, "exit 0",
			      ty_test_strf("'resume':{'step':1,'digest':'%s','path':'%s/step-1'}",
					   digest, ck)));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1092, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK(strstr(str_of(d, "message"), "the resume checkpoint step 1 does not match the launch: "
					   "'w' has 5 bytes, the manifest says 3") != NULL);
}

TY_TEST(checkpoint_wait_ends_at_the_grace_or_the_deadline)
{
	const char *loop = "trap \"echo sig >> sig\" USR1; while :; do sleep 0.1; done";
	const json_t *d;

	setup();
	send_msg(PROTO_LAUNCH, 1042, EPOCH, launch_data(1, loop));
	send_msg(PROTO_LAUNCH, 1043, EPOCH, launch_data(1, loop));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1042, 1) != NULL);
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1043, 1) != NULL);
	/* the scheduler's kill is lost: the grace and 2 s later the node stops it itself */
	send_msg(PROTO_CHECKPOINT, 1042, EPOCH, "{'signal':'SIGUSR1','grace_seconds':1}");
	/* the node goes now: no time is left to wait (the kill grace comes first) */
	send_msg(PROTO_CHECKPOINT, 1043, EPOCH,
		 ty_test_strf("{'signal':'SIGUSR1','grace_seconds':600,'deadline':%lld}",
			      (long long)wall_ms()));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1042, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "preempted");
	CHECK_STR_EQ(str_of(d, "message"),
		     "preempted: no newer checkpoint within 3000 ms of the checkpoint signal");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1043, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "preempted");
	CHECK_STR_EQ(str_of(d, "message"),
		     "preempted: no newer checkpoint within 0 ms of the checkpoint signal");
	CHECK_INT_EQ(count_of(PROTO_CHECKPOINT_WRITTEN, 1042), 0);
}

TY_TEST(periodic_checkpoints_are_reported_and_the_newest_k_kept)
{
	static const struct {
		int step;
		const char *status;
	} want[] = {{1, "valid"}, {2, "valid"}, {4, "valid"}, {5, "corrupt"}, {6, "valid"}};
	const char *ck = ty_test_strf("%s/checkpoints/job-1044", T.state);
	const char *dir = ty_test_strf("%s/attempts/1044.1", T.state);
	const json_t *d;

	setup();
	/* the attempt resumes from step 0: never deleted while it runs */
	write_ckpt(ck, 0, "zero", false);
	/* step 3 is left torn, step 5 corrupt; each waits until the test saw the last */
	send_msg(PROTO_LAUNCH, 1044, EPOCH,
		 launch_extra(1,
			      ty_test_strf("for s in 1 2 3 4 5 6; do case $s in "
					   "3) mkdir -p \"$TRAINYARD_CHECKPOINT_DIR/step-3\"; "
					   "continue ;; 5) sh %s 5 corrupt ;; *) sh %s $s ;; esac; "
					   "while [ ! -e seen-$s ]; do sleep 0.05; done; done",
					   T.ckpt_sh, T.ckpt_sh),
			      "'checkpoint_keep':2"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_RUNNING, 1044, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(d, "resume"), "step")), 0);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		ty_test_context("step %d", want[i].step);
		REQUIRE((d = wait_examined(1044, i + 1)) != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), want[i].step);
		CHECK_STR_EQ(str_of(d, "status"), want[i].status);
		CHECK(json_is_false(json_object_get(d, "after_signal")));
		/* the writing time, for the ledger: of a valid checkpoint only */
		if (!strcmp(want[i].status, "valid"))
			CHECK(json_integer_value(json_object_get(d, "write_ms")) >= 0 &&
			      json_is_integer(json_object_get(d, "write_ms")));
		else
			CHECK(json_object_get(d, "write_ms") == NULL);
		if (want[i].step == 2)
			/* keep 2: step 1 and 2 stay, and the resume step 0 (protected) */
			CHECK_INT_EQ(system(ty_test_strf("test -d '%s/step-0' && test -d "
							 "'%s/step-1' && test -d '%s/step-2'",
							 ck, ck, ck)),
				     0);
		REQUIRE(system(ty_test_strf("touch '%s/work/seen-%d'", dir, want[i].step)) == 0);
	}
	ty_test_context("end");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1044, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	/* the five it examined, and a report of each one retention deleted */
	CHECK_INT_EQ(count_of(PROTO_CHECKPOINT_WRITTEN, 1044), 9);
	CHECK_STR_EQ(deleted_steps(1044), "1 2 3 5");
	/* the newest two valid ones, and the one the attempt resumed from */
	REQUIRE(system(ty_test_strf("ls '%s' | tr '\\n' ' ' > '%s/ls'", ck, T.dir)) == 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/ls", T.dir)), "step-0 step-4 step-6 ");
}

/* Open the write end of a FIFO the executor's verification is blocked on. */
static void unblock_fifo(const char *path)
{
	int64_t end = now_ms() + WAIT_MS;
	int fd;

	/* ENXIO until the reader has it open */
	while ((fd = open(path, O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO && now_ms() < end)
		usleep(20000);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
}

/* A checkpoint step-1 of job whose file is a FIFO: verifying it blocks in open(). */
static const char *blocking_ckpt(int64_t job)
{
	const char *d = ty_test_strf("%s/checkpoints/job-%lld/step-1", T.state, (long long)job);

	REQUIRE(system(ty_test_strf("mkdir -p '%s' && mkfifo '%s/w' && printf '{\"step\": 1, "
				    "\"files\": [{\"path\": \"w\", \"size\": 0, \"sha256\": "
				    "\"%064d\"}]}' > '%s/MANIFEST.json'",
				    d, d, 0, d)) == 0);
	return ty_test_strf("%s/w", d);
}

/* Heartbeats of this boot listing job as running (the launch was taken). */
static size_t heartbeats_running(int64_t job)
{
	size_t n = 0;

	for (size_t i = 0; i < T.ngot; i++) {
		const char *boot = json_string_value(json_object_get(T.got[i].data, "boot_id"));

		n += T.got[i].type == PROTO_HEARTBEAT && boot && strcmp(boot, T.boot_id) == 0 &&
		     in_list(json_object_get(T.got[i].data, "running"), job);
	}
	return n;
}

static bool wait_heartbeats_running(int64_t job, size_t n)
{
	int64_t end = now_ms() + WAIT_MS;

	while (heartbeats_running(job) < n) {
		if (now_ms() > end)
			return false;
		collect(50);
	}
	return true;
}

TY_TEST(resume_verification_does_not_stop_heartbeats)
{
	const char *fifo;
	const json_t *d, *sk;

	setup();
	fifo = blocking_ckpt(1045);
	send_msg(PROTO_LAUNCH, 1045, EPOCH,
		 launch_data(1, "echo \"[$TRAINYARD_RESUME_FROM]\" > ck.$RANK"));
	/* hashing never ends until the FIFO gets a writer; the loop heartbeats meanwhile */
	CHECK(wait_heartbeats_running(1045, 3));
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1045), 0);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_RUNNING, 1045), 0);
	unblock_fifo(fifo);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1045, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/attempts/1045.1/work/ck.0", T.state)), "[]\n");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_RUNNING, 1045, 1)) != NULL);
	sk = json_array_get(json_object_get(json_object_get(d, "resume"), "skipped"), 0);
	CHECK_STR_EQ(str_of(sk, "status"), "corrupt");
	CHECK(str_of(sk, "reason") && strstr(str_of(sk, "reason"), "not a regular file"));
}

TY_TEST(kill_while_the_resume_is_verified)
{
	const char *fifo;
	const json_t *d;

	setup();
	fifo = blocking_ckpt(1046);
	send_msg(PROTO_LAUNCH, 1046, EPOCH, launch_data(1, "touch ran"));
	CHECK(wait_heartbeats_running(1046, 1));
	send_msg(PROTO_KILL, 1046, EPOCH, "{'reason':'cancel','grace_seconds':0}");
	/* answered while the verification is still blocked */
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1046, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "cancelled");
	unblock_fifo(fifo);
	/* the verification's end starts nothing */
	send_msg(PROTO_LAUNCH, 1051, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1051, 1) != NULL);
	collect(300);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1046), 0);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_RUNNING, 1046), 0);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1046), 1);
	CHECK(access(ty_test_strf("%s/attempts/1046.1/work/ran", T.state), F_OK) != 0);
}

TY_TEST(preflight_passes_then_the_job_runs)
{
	const char *dir = ty_test_strf("%s/attempts/1047.1", T.state);
	const json_t *d, *pf;

	setup();
	send_msg(PROTO_LAUNCH, 1047, EPOCH,
		 with_env(launch_extra(2, "echo ran > ran.$RANK", "'preflight':true"),
			  "'PREFLIGHT':'pass'"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1047, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	pf = json_object_get(d, "preflight");
	CHECK(json_is_object(pf));
	CHECK(json_number_value(json_object_get(pf, "median_gbps")) == 20);
	CHECK_INT_EQ(json_array_size(json_object_get(pf, "slow")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/rank-0.preflight.log", dir)),
		     "preflight --node-check rank 0 of 2 job 1047\n{\"node_check\": {\"slow\": [], "
		     "\"nodes\": [\"n1\"], \"median_gbps\": 20}}\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/rank-1.preflight.log", dir)),
		     "preflight --node-check rank 1 of 2 job 1047\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/ran.0", dir)), "ran\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/work/ran.1", dir)), "ran\n");
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1047), 2); /* the job's ranks only */
	CHECK_INT_EQ(count_of(PROTO_RANK_EXITED, 1047), 2);
}

TY_TEST(preflight_failure_ends_the_attempt_as_system)
{
	const char *dir = ty_test_strf("%s/attempts/1048.1", T.state);
	const json_t *d, *pf;

	setup();
	send_msg(
	    PROTO_LAUNCH, 1048, EPOCH,
	    with_env(launch_extra(2, "touch ran.$RANK", "'preflight':true"), "'PREFLIGHT':'fail'"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1048, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK_STR_EQ(str_of(d, "message"), "preflight failed");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), -1);
	CHECK(str_of(d, "evidence") &&
	      strncmp(str_of(d, "evidence"), "preflight of rank 1 exited with code 5; ", 40) == 0);
	CHECK(str_of(d, "evidence") && strstr(str_of(d, "evidence"), "slow link"));
	pf = json_object_get(d, "preflight");
	CHECK(json_is_object(pf));
	CHECK_STR_EQ(json_string_value(json_array_get(json_object_get(pf, "slow"), 0)), "n2");
	CHECK(json_number_value(json_object_get(pf, "median_gbps")) == 9.5);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1048), 0);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_RUNNING, 1048), 0);
	CHECK(access(ty_test_strf("%s/work/ran.0", dir), F_OK) != 0);
	CHECK(access(ty_test_strf("%s/work/ran.1", dir), F_OK) != 0);

	/* a preflight that never ends is a start timeout, and carries no node check */
	send_msg(PROTO_LAUNCH, 1049, EPOCH,
		 with_env(launch_extra(1, "touch ran.$RANK",
				       "'preflight':true,'start_timeout_seconds':1"),
			  "'PREFLIGHT':'hang'"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1049, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "start_timeout");
	CHECK_STR_EQ(str_of(d, "message"),
		     "the preflight did not end within the start timeout of 1 s");
	CHECK(json_is_null(json_object_get(d, "preflight")));
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1049), 0);
}

TY_TEST(hang_is_detected_and_the_gang_killed)
{
	const json_t *d;
	const char *ev;
	pid_t p0, p1;

	setup();
	/* both ranks say one line, then sleep silently (in a child of the shell) */
	send_msg(
	    PROTO_LAUNCH, 1100, EPOCH,
	    launch_extra(2, "echo \"rank $RANK up\"; sleep 60 & wait", "'hang_timeout_seconds':1"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1100, 1) != NULL);
	p0 = rank_pid(1100, 1);
	p1 = rank_pid(1100, 2);
	REQUIRE(p0 > 1 && p1 > 1);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1100, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "hang");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), -1);
	CHECK_STR_EQ(str_of(d, "message"), "no rank showed output or progress for 1 s");
	ev = str_of(d, "evidence");
	CHECK_STR_EQ(ev, "no rank showed output or progress for 1 s; rank 0: rank 0 up; "
			 "rank 1: rank 1 up");
	CHECK_STR_EQ(str_of(d, "evidence_source"), "executor"); /* it timed the hang itself */
	for (size_t i = 1; i <= 2; i++) {
		REQUIRE((d = wait_msg(PROTO_RANK_EXITED, 1100, i)) != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "signal")), SIGTERM);
	}
	CHECK_INT_EQ(group_live(p0), 0);
	CHECK_INT_EQ(group_live(p1), 0);
	/* the evidence is kept with the finished attempt */
	REQUIRE((d = wait_heartbeat_finished(1100)) != NULL);
	d = json_object_get(d, "finished");
	for (size_t i = 0; i < json_array_size(d); i++)
		if (json_integer_value(json_object_get(json_array_get(d, i), "job")) == 1100) {
			CHECK_STR_EQ(str_of(json_array_get(d, i), "evidence"), ev);
			CHECK_STR_EQ(str_of(json_array_get(d, i), "evidence_source"), "executor");
		}
}

TY_TEST(output_or_progress_keeps_a_rank_alive)
{
	const json_t *d;

	setup();
	/* output only; progress file only (no output at all): 3 s under a 1 s timeout */
	send_msg(PROTO_LAUNCH, 1101, EPOCH,
		 launch_extra(1,
			      "i=0; while [ $i -lt 15 ]; do echo step $i; sleep 0.2; "
			      "i=$((i+1)); done",
			      "'hang_timeout_seconds':1,'start_timeout_seconds':1"));
	send_msg(PROTO_LAUNCH, 1102, EPOCH,
		 launch_extra(1,
			      "i=0; while [ $i -lt 15 ]; do touch progress-$RANK; sleep 0.2; "
			      "i=$((i+1)); done",
			      "'hang_timeout_seconds':1,'start_timeout_seconds':1"));
	/* two ranks, only one of them busy: the gang is alive */
	send_msg(PROTO_LAUNCH, 1103, EPOCH,
		 launch_extra(2,
			      "if [ \"$RANK\" = 0 ]; then sleep 2; exit 0; fi; "
			      "i=0; while [ $i -lt 15 ]; do echo tick; sleep 0.2; i=$((i+1)); done",
			      "'hang_timeout_seconds':1"));
	for (int64_t job = 1101; job <= 1103; job++) {
		ty_test_context("job %lld", (long long)job);
		REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, job, 1)) != NULL);
		CHECK_STR_EQ(str_of(d, "failure_class"), "");
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
		CHECK(json_object_get(d, "evidence") == NULL);
		CHECK(json_object_get(d, "evidence_source") == NULL); /* no failure, no source */
	}
}

/* The progress entries of job's newest heartbeat entry that has some; NULL: none. */
static const json_t *heartbeat_progress(int64_t job)
{
	const json_t *found = NULL;

	for (size_t i = 0; i < T.ngot; i++) {
		const json_t *e;
		size_t k;

		if (T.got[i].type != PROTO_HEARTBEAT)
			continue;
		json_array_foreach(json_object_get(T.got[i].data, "running"), k, e)
		{
			if (json_integer_value(json_object_get(e, "job")) == job &&
			    json_object_get(e, "progress"))
				found = json_object_get(e, "progress");
		}
	}
	return found;
}

TY_TEST(a_step_that_stops_is_a_hang_while_the_ranks_print)
{
	const json_t *d, *p, *e;
	const char *msg;
	size_t i;

	setup();
	/* three steps in the SDK's JSON, then output every 0.2 s but no step */
	send_msg(PROTO_LAUNCH, 1190, EPOCH,
		 launch_extra(2,
			      "i=1; while [ $i -le 3 ]; do "
			      "echo \"{\\\"step\\\": $i, \\\"samples_per_second\\\": 8}\" "
			      "> progress-$RANK; echo tick $i; sleep 0.2; i=$((i+1)); done; "
			      "while :; do echo still here; sleep 0.2; done",
			      "'hang_timeout_seconds':1"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1190, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "hang");
	CHECK_STR_EQ(str_of(d, "evidence_source"), "executor");
	msg = str_of(d, "message");
	ty_test_context("message '%s'", msg);
	CHECK(strncmp(msg, "step 3 unchanged for ", 21) == 0);
	CHECK(strstr(msg, " s on ranks 0-1; last output ") != NULL);
	CHECK(strncmp(str_of(d, "evidence"), msg, strlen(msg)) == 0);
	CHECK(strstr(str_of(d, "evidence"), "still here") != NULL); /* the tails follow */
	ty_test_context(NULL);
	/* the heartbeats carried each rank's step while it ran */
	REQUIRE((p = heartbeat_progress(1190)) != NULL);
	CHECK_INT_EQ(json_array_size(p), 2);
	json_array_foreach(p, i, e)
	{
		struct ty_err err = {0};

		ty_test_context("progress %zu", i);
		CHECK_INT_EQ(proto_progress_check(e, &err), 0);
		CHECK_INT_EQ(json_integer_value(json_object_get(e, "rank")), (json_int_t)i);
		CHECK_INT_EQ(json_integer_value(json_object_get(e, "step")), 3);
		CHECK(json_real_value(json_object_get(e, "samples_per_second")) == 8);
	}
}

TY_TEST(bare_steps_are_reported_and_garbage_is_logged_not_believed)
{
	const json_t *d, *p;

	setup();
	/* a shell job's bare step, without any timeout: still read and reported */
	send_msg(PROTO_LAUNCH, 1191, EPOCH,
		 launch_data(1, "echo 5 > progress-$RANK; sleep 3"));
	/* garbage in the file: ignored, and output keeps the rank alive */
	send_msg(PROTO_LAUNCH, 1192, EPOCH,
		 launch_extra(1,
			      "echo step-five > progress-$RANK; i=0; while [ $i -lt 10 ]; do "
			      "echo out $i; sleep 0.2; i=$((i+1)); done",
			      "'hang_timeout_seconds':1"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1192, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "");
	CHECK(heartbeat_progress(1192) == NULL);
	CHECK(log_has("job 1192 attempt 1 rank 0: progress file '"));
	CHECK(log_has("ignored: not a step (a non-negative integer) or a JSON object"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1191, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "");
	REQUIRE((p = heartbeat_progress(1191)) != NULL);
	CHECK_INT_EQ(json_array_size(p), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(p, 0), "step")), 5);
	CHECK(json_is_null(json_object_get(json_array_get(p, 0), "samples_per_second")));
}

TY_TEST(start_timeout_kills_a_gang_with_a_silent_rank)
{
	const json_t *d;
	pid_t p0, p1;

	setup();
	send_msg(PROTO_LAUNCH, 1104, EPOCH,
		 launch_extra(2, "if [ \"$RANK\" = 0 ]; then echo ready; fi; sleep 60 & wait",
			      "'start_timeout_seconds':1"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1104, 1) != NULL);
	p0 = rank_pid(1104, 1);
	p1 = rank_pid(1104, 2);
	REQUIRE(p0 > 1 && p1 > 1);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1104, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "start_timeout");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), -1);
	CHECK_STR_EQ(str_of(d, "message"),
		     "rank 1 showed no output or progress within the start timeout of 1 s");
	CHECK_STR_EQ(str_of(d, "evidence"),
		     "rank 1 showed no output or progress within the start timeout of 1 s; "
		     "rank 0: ready; rank 1: (no output)");
	CHECK_INT_EQ(group_live(p0), 0);
	CHECK_INT_EQ(group_live(p1), 0);
	/* a program that cannot be run is a system failure at once, not a timeout */
	send_msg(PROTO_LAUNCH, 1105, EPOCH,
		 ty_test_strf("{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
			      "'first_rank':0,'master_addr':'127.0.0.1','master_port':29400,"
			      "'gpus':[],'command':['/nonexistent/trainer'],'env':{},"
			      "'launch':'per_gpu','start_timeout_seconds':1}"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1105, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK(strstr(str_of(d, "message"), "could not be started") != NULL);
	CHECK_STR_EQ(str_of(d, "evidence_source"), "executor");
}

TY_TEST(log_lines_and_exits_decide_the_class)
{
	const json_t *d;

	setup();
	send_msg(PROTO_LAUNCH, 1106, EPOCH,
		 launch_extra(2,
			      "if [ \"$RANK\" = 1 ]; then echo step 1; "
			      "echo \"host:12:34 [1] NCCL WARN NET/Socket : peer closed\"; "
			      "echo \"ncclRemoteError: remote process exited\" >&2; exit 1; fi; "
			      "echo step 1; sleep 60 & wait",
			      "'hang_timeout_seconds':600"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1106, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 1);
	CHECK_STR_EQ(str_of(d, "message"), "rank 1 exited with code 1");
	CHECK_STR_EQ(str_of(d, "evidence"), "rank 1: ncclRemoteError: remote process exited");
	CHECK_STR_EQ(str_of(d, "evidence_source"), "log"); /* the job printed it */
	/* an operator's rule from --classify-file */
	send_msg(PROTO_LAUNCH, 1107, EPOCH,
		 launch_data(1, "echo \"Traceback (most recent call last):\"; "
				"echo \"TEST-GPU-3 BROKE\"; exit 2"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1107, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "hardware");
	CHECK_STR_EQ(str_of(d, "evidence"), "rank 0: TEST-GPU-3 BROKE");
	/* a SIGKILL nobody here sent: OOM only with evidence */
	send_msg(PROTO_LAUNCH, 1108, EPOCH, launch_data(1, "echo step 1; kill -9 $$"));
	send_msg(PROTO_LAUNCH, 1109, EPOCH,
		 launch_data(1, "echo step 1; echo \"sh: line 1: 4242 Killed  python t.py\"; "
				"kill -9 $$"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1108, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 137);
	CHECK_STR_EQ(str_of(d, "evidence"),
		     "rank 0: killed by signal 9 (SIGKILL), no OOM evidence");
	CHECK_STR_EQ(str_of(d, "evidence_source"), "executor");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1109, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "oom");
	CHECK_STR_EQ(str_of(d, "evidence"), "rank 0: sh: line 1: 4242 Killed  python t.py");
	CHECK_STR_EQ(str_of(d, "evidence_source"), "log");
}

/* Run the executor with argv (argv[0] T.bin) to its end; its exit status, stderr in *out. */
static int run_executor(char **out, const char *const *argv)
{
	int fds[2], status = 0;
	pid_t pid;
	ssize_t n;

	REQUIRE(pipe(fds) == 0);
	fflush(stdout);
	REQUIRE((pid = fork()) >= 0);
	if (pid == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	close(fds[1]);
	*out = ty_test_alloc(4096);
	for (size_t got = 0; got < 4095; got += (size_t)n) {
		n = read(fds[0], *out + got, 4095 - got);
		if (n <= 0 && !(n < 0 && errno == EINTR)) {
			(*out)[got] = '\0';
			break;
		}
		if (n < 0)
			n = 0;
		(*out)[got + (size_t)n] = '\0';
	}
	close(fds[0]);
	REQUIRE(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The executor with its required options and extra ones (NULL-terminated), to its exit. */
static int run_briefly(char **out, const char *const *extra)
{
	const char *argv[32] = {T.bin,
				"--state-dir",
				T.state,
				"--kafka-bootstrap",
				"127.0.0.1:9",
				"--log-pubkey",
				ty_test_log_pubkey(),
				"--dispatch-pubkey",
				ty_test_dispatch_pubkey(),
				"--node-key-file",
				ty_test_node_key_file(T.node)};
	int n_args = 11;

	for (; *extra && n_args < 31; extra++)
		argv[n_args++] = *extra;
	return run_executor(out, argv);
}

/* Run the executor with a rules file; its exit status, stderr in *out. */
static int run_with_rules(char **out, const char *rules)
{
	const char *path = ty_test_strf("%s/bad-rules.conf", T.dir);
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	fputs(rules, f);
	fclose(f);
	return run_briefly(out, (const char *const[]){"--classify-file", path, NULL});
}

TY_TEST(isolation_options_are_checked_at_start)
{
	char *err;

	setup();
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--isolation", "runc", "--runtime",
							      "/nonexistent/runc", NULL}),
		     2);
	CHECK(strstr(err, "the OCI runtime '/nonexistent/runc' cannot be run") != NULL);
	CHECK(strstr(err, "--isolation none") != NULL);
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--isolation", "chroot", NULL}), 2);
	CHECK(strstr(err, "--isolation 'chroot' is not runc or none") != NULL);
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--data-mounts", "data", NULL}), 2);
	CHECK(strstr(err, "--data-mounts: data mount 'data': both paths must be absolute") != NULL);
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--data-mounts", "/usr:/proc/usr",
							      NULL}),
		     2);
	CHECK(strstr(err, "would cover the container's own '/proc/usr'") != NULL);
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--seccomp-profile", "/nonexistent",
							      NULL}),
		     2);
	CHECK(strstr(err, "--seccomp-profile: cannot read '/nonexistent'") != NULL);
}

TY_TEST(the_executor_needs_the_log_credential_public_key)
{
	const char *junk = ty_test_strf("%s/junk.pem", T.dir);
	const struct {
		const char *what, *pubkey, *says;
	} rows[] = {
	    {"none", NULL,
	     "trainyard-executor: no log credential key: set --log-pubkey (or "
	     "TRAINYARD_EXECUTOR_LOG_PUBKEY)"},
	    {"empty", "", "no log credential key: set --log-pubkey"},
	    {"missing file", "/nonexistent/log-pubkey.pem",
	     "--log-pubkey: cannot open the key file '/nonexistent/log-pubkey.pem': No such file"},
	    {"not a key", junk, ty_test_strf("--log-pubkey: '%s' holds no public or private key", junk)},
	    {"the private key", ty_test_log_key(),
	     ty_test_strf("--log-pubkey '%s' holds a private key: give executors only its public "
			  "half",
			  ty_test_log_key())},
	};
	char *err;
	FILE *f;

	setup();
	REQUIRE((f = fopen(junk, "w")) != NULL);
	fputs("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n", f);
	fclose(f);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *argv[] = {T.bin,
				      "--state-dir",
				      T.state,
				      "--kafka-bootstrap",
				      "127.0.0.1:9",
				      "--fake-gpus",
				      "1",
				      "--dispatch-pubkey",
				      ty_test_dispatch_pubkey(),
				      "--node-key-file",
				      ty_test_node_key_file(T.node),
				      rows[i].pubkey ? "--log-pubkey" : NULL,
				      rows[i].pubkey,
				      NULL};

		ty_test_context("%s", rows[i].what);
		CHECK_INT_EQ(run_executor(&err, argv), 2);
		if (!strstr(err, rows[i].says))
			FAIL("stderr does not say \"%s\":\n%s", rows[i].says, err);
		/* a key's text never reaches the output */
		CHECK(strstr(err, "PRIVATE KEY") == NULL);
	}
}

TY_TEST(bad_rules_file_stops_the_executor)
{
	char *err;

	setup();
	CHECK_INT_EQ(run_with_rules(&err, "# ok\nsystem\tfine\nuser\t[unclosed\n"), 2);
	CHECK(strstr(err, ty_test_strf("--classify-file: %s/bad-rules.conf:3: bad regular "
				       "expression '[unclosed': ",
				       T.dir)) != NULL);
	CHECK_INT_EQ(run_with_rules(&err, "fatal\tx\n"), 2);
	CHECK(strstr(err, ty_test_strf("--classify-file: %s/bad-rules.conf:1: unknown class "
				       "'fatal' (hardware, oom, system, user_traceback, "
				       "weak_system, user, oom_kill or not_user)",
				       T.dir)) != NULL);
}

/* An --xid-file line the table cannot take stops the executor, naming file and line. */
TY_TEST(bad_xid_file_stops_the_executor)
{
	const char *path = ty_test_strf("%s/xids.conf", T.dir);
	FILE *f;
	char *err;

	setup();
	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs("# our fleet's\n79 degraded riser\n\n119 fatl GSP\n", f);
	fclose(f);
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--xid-file", path, NULL}), 2);
	CHECK(strstr(err, ty_test_strf("--xid-file: %s:4: Xid 119: 'fatl' is not fatal, degraded "
				       "or ignore",
				       path)) != NULL);
	CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--xid-file", "/nonexistent/x", NULL}),
		     2);
	CHECK(strstr(err, "--xid-file: cannot open '/nonexistent/x'") != NULL);
}

TY_TEST(malformed_message_is_skipped)
{
	setup();
	const char *bad[] = {
	    "this is not JSON",
	    "[1,2,3]",
	    ty_test_jf("{'v':1,'type':'launch','node':'%s','job':1007,'attempt':1,'epoch':%d,"
		       "'seq':1,'ts':0,'data':{'nnodes':1}}",
		       T.node, EPOCH),
	    ty_test_jf("{'v':1,'type':'heartbeat','node':'%s','job':0,'attempt':0,'epoch':0,"
		       "'seq':1,'ts':0,'data':{'boot_id':'x','running':[],'finished':[]}}",
		       T.node),
	    "",
	    /* types DESIGN.md names but the protocol dropped: unknown, like any other */
	    ty_test_jf("{'v':1,'type':'drain','node':'%s','job':0,'attempt':0,'epoch':%d,"
		       "'seq':1,'ts':0,'data':{}}",
		       T.node, EPOCH),
	    ty_test_jf("{'v':1,'type':'progress','node':'%s','job':1007,'attempt':1,'epoch':%d,"
		       "'seq':2,'ts':0,'data':{'step':10}}",
		       T.node, EPOCH),
	    ty_test_jf("{'v':1,'type':'metrics','node':'%s','job':1007,'attempt':1,'epoch':%d,"
		       "'seq':3,'ts':0,'data':{'metrics':{'loss':0.5}}}",
		       T.node, EPOCH),
	    ty_test_jf("{'v':1,'type':'state','node':'%s','job':0,'attempt':0,'epoch':%d,"
		       "'seq':4,'ts':0,'data':{'state':'draining'}}",
		       T.node, EPOCH),
	};
	const json_t *d, *hb;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		produce_raw(bad[i], strlen(bad[i]));
	/* well-formed but impossible: 3 per-GPU ranks on one GPU */
	send_msg(PROTO_LAUNCH, 1012, EPOCH,
		 "{'node_rank':0,'nnodes':1,'world_size':3,'local_world_size':3,'first_rank':0,"
		 "'master_addr':'127.0.0.1','master_port':29400,'gpus':[0],'command':['true'],"
		 "'env':{},'launch':'per_gpu'}");
	/* a program that is not there: the attempt fails as system, nothing is left */
	send_msg(PROTO_LAUNCH, 1016, EPOCH,
		 "{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,'first_rank':0,"
		 "'master_addr':'127.0.0.1','master_port':29400,'gpus':[],"
		 "'command':['/nonexistent/trainyard-test'],'env':{},'launch':'per_gpu'}");
	send_msg(PROTO_LAUNCH, 1007, EPOCH, launch_data(1, "echo fine"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1007, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1012, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK(strstr(json_string_value(json_object_get(d, "message")), "invalid launch") != NULL);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1012), 0);
	/* a rejected launch is answered by its exit alone, never acknowledged */
	CHECK_INT_EQ(count_of(PROTO_LAUNCH_ACCEPTED, 1012), 0);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1016, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK(strstr(json_string_value(json_object_get(d, "message")), "could not be started") !=
	      NULL);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1016), 0);
	REQUIRE((hb = wait_heartbeat_finished(1007)) != NULL);
	CHECK(counter(hb, "malformed") >= 9);
	CHECK(json_object_get(json_object_get(hb, "counters"), "unsupported") == NULL);
	for (const char *const *t =
		 (const char *const[]){"drain", "progress", "metrics", "state", NULL};
	     *t; t++) {
		ty_test_context("type %s", *t);
		CHECK(log_has(ty_test_strf(": unknown message type '%s'", *t)));
	}
	CHECK(T.pid && waitpid(T.pid, NULL, WNOHANG) == 0);
}

TY_TEST(logs_over_http)
{
	static const struct {
		const char *path;
		long status;
	} bad[] = {
	    {"/logs/1008/1/5", 404},
	    {"/logs/1008/2/0", 404},
	    {"/logs/01008/1/0", 404},
	    {"/logs/1008/1/0/", 404},
	    {"/logs/1008/1/-0", 404},
	    {"/logs/../../etc/passwd", 404},
	    {"/logs/1008/1/0/../../../state.json", 404},
	    {"/logs/1008/1/0%2f..%2f..%2fstate.json", 404},
	    {"/state.json", 404},
	    {"/logs/1008/1/0?tail=0", 400},
	    {"/logs/1008/1/0?tail=10001", 400},
	    {"/logs/1008/1/0?tail=abc", 400},
	};
	char *body;
	const char *last;

	setup();
	send_msg(PROTO_LAUNCH, 1008, EPOCH,
		 launch_data(1, "i=1; while [ $i -le 300 ]; do echo \"line $i\"; i=$((i+1)); "
				"done; echo \"to stderr\" >&2"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1008, 1) != NULL);
	CHECK_INT_EQ(http_get("/logs/1008/1/0?tail=3", &body), 200);
	CHECK_STR_EQ(body, "line 299\nline 300\nto stderr\n");
	CHECK_INT_EQ(http_get("/logs/1008/1/0", &body), 200);
	CHECK_INT_EQ(count_lines(body), 100);
	CHECK(strncmp(body, "line 202\n", 9) == 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("GET %s", bad[i].path);
		CHECK_INT_EQ(http_get(bad[i].path, &body), bad[i].status);
	}
	ty_test_context(NULL);

	/* a rank that wrote nothing (yet): an empty answer, and the server lives on */
	send_msg(PROTO_LAUNCH, 1093, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1093, 1) != NULL);
	CHECK_INT_EQ(http_get("/logs/1093/1/0?tail=5", &body), 200);
	CHECK_STR_EQ(body, "");
	CHECK_INT_EQ(http_get("/logs/1008/1/0?tail=1", &body), 200);
	CHECK_STR_EQ(body, "to stderr\n");

	/* 2000 lines of 62 bytes pass the 64 KiB cap: one rotation, nothing lost yet */
	send_msg(PROTO_LAUNCH, 1009, EPOCH,
		 launch_data(1, "i=1; while [ $i -le 2000 ]; do printf \"line %05d "
				"..................................................\\n\" $i; "
				"i=$((i+1)); done"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1009, 1) != NULL);
	{
		struct stat cur, old;
		const char *base = ty_test_strf("%s/attempts/1009.1/rank-0.log", T.state);

		REQUIRE(stat(base, &cur) == 0);
		REQUIRE(stat(ty_test_strf("%s.1", base), &old) == 0);
		CHECK(cur.st_size <= 65536 && old.st_size <= 65536);
		CHECK_INT_EQ(cur.st_size + old.st_size, 2000 * 62);
	}
	CHECK_INT_EQ(http_get("/logs/1009/1/0?tail=2000", &body), 200);
	CHECK_INT_EQ(count_lines(body), 2000);
	CHECK(strncmp(body, "line 00001 ", 11) == 0);
	last = strrchr(body, '\n');
	while (last && last > body && last[-1] != '\n')
		last--;
	CHECK(last && strncmp(last, "line 02000 ", 11) == 0);
}

/* The value of the sample "series" in a /metrics text, or -1 if absent. */
static double metric(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

static const char *scrape_metrics(void)
{
	char *body;

	REQUIRE_INT_EQ(http_get("/metrics", &body), 200);
	return body;
}

static double refused(const char *text, const char *reason)
{
	return metric(text, ty_test_strf("trainyard_executor_log_requests_refused_total"
					 "{reason=\"%s\"}",
					 reason));
}

TY_TEST(rank_logs_need_a_credential_for_exactly_that_log)
{
	const char *key = ty_test_log_key();
	const char *other_key = ty_test_strf("%s/other-log-key.pem", T.dir);
	int64_t now = (int64_t)time(NULL), later = now + 60;
	const char *valid, *metrics0, *metrics1;
	struct ty_err err = {0};
	char *body;

	setup();
	REQUIRE(ty_ed25519_key_generate(other_key, ty_test_strf("%s.pub", other_key), &err) == 0);
	/* attempt 2 with two ranks: rank 1 wrote the log asked for */
	send_msg(PROTO_LAUNCH, 1201, EPOCH, launch_data(2, "echo \"secret of rank $RANK\""));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1201, 1) != NULL);
	metrics0 = scrape_metrics();
	valid = cred_as(key, 1201, 1, 1, T.node, later);
	CHECK_INT_EQ(http_as("/logs/1201/1/1", bearer(valid), &body), 200);
	CHECK_STR_EQ(body, "secret of rank 1\n");

	const struct {
		const char *what, *authorization, *path;
		long status;
		const char *says;
	} rows[] = {
	    {"no credential", NULL, "/logs/1201/1/1", 401, "a log credential is required"},
	    {"another scheme", "Basic dXNlcjpwYXNz", "/logs/1201/1/1", 401,
	     "a log credential is required"},
	    {"an empty bearer", "Bearer ", "/logs/1201/1/1", 401, "a log credential is required"},
	    {"no credential, a path that names no log", NULL, "/logs/../../etc/passwd", 401,
	     "a log credential is required"},
	    {"malformed", "Bearer tylog1.1201.1.1", "/logs/1201/1/1", 401, "malformed"},
	    {"an API token", "Bearer ty_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "/logs/1201/1/1",
	     401, "malformed"},
	    {"expired", bearer(cred_as(key, 1201, 1, 1, T.node, now - 1)), "/logs/1201/1/1", 401,
	     "expired"},
	    {"long expired", bearer(cred_as(key, 1201, 1, 1, T.node, 1)), "/logs/1201/1/1", 401,
	     "expired"},
	    {"signed with another key", bearer(cred_as(other_key, 1201, 1, 1, T.node, later)),
	     "/logs/1201/1/1", 401, "signature does not verify with this node's --log-pubkey"},
	    {"tampered: another rank in a credential for rank 1",
	     ty_test_strf("Bearer tylog1.1201.1.0%s", valid + 15),
	     "/logs/1201/1/0", 401, "signature"},
	    {"for another job", bearer(cred_as(key, 1008, 1, 1, T.node, later)), "/logs/1201/1/1",
	     403, "is for job 1008 attempt 1 rank 1"},
	    {"for another attempt", bearer(cred_as(key, 1201, 2, 1, T.node, later)),
	     "/logs/1201/1/1", 403, "attempt 2"},
	    {"for another rank", bearer(valid), "/logs/1201/1/0", 403, "rank 1 on node"},
	    {"for another node", bearer(cred_as(key, 1201, 1, 1, "some-other-node", later)),
	     "/logs/1201/1/1", 403, "on node 'some-other-node', not this log on node"},
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].what);
		CHECK_INT_EQ(http_as(rows[i].path, rows[i].authorization, &body), rows[i].status);
		if (!strstr(body, rows[i].says))
			FAIL("the body does not say \"%s\": %s", rows[i].says, body);
		CHECK(strstr(body, "secret of rank") == NULL);
		/* the answer never echoes a credential */
		CHECK(strstr(body, "tylog1.") == NULL);
		if (rows[i].status == 401)
			CHECK(strncmp(www_authenticate, "Bearer realm=", 13) == 0);
		else
			CHECK_STR_EQ(www_authenticate, "");
	}
	ty_test_context(NULL);

	/* every refusal counted by reason; /metrics itself needs no credential */
	metrics1 = scrape_metrics();
	CHECK_INT_EQ((int)(refused(metrics1, "missing") - refused(metrics0, "missing")), 4);
	CHECK_INT_EQ((int)(refused(metrics1, "malformed") - refused(metrics0, "malformed")), 2);
	CHECK_INT_EQ((int)(refused(metrics1, "expired") - refused(metrics0, "expired")), 2);
	CHECK_INT_EQ((int)(refused(metrics1, "bad_signature") - refused(metrics0, "bad_signature")),
		     2);
	CHECK_INT_EQ((int)(refused(metrics1, "out_of_scope") - refused(metrics0, "out_of_scope")),
		     4);
	CHECK(refused(metrics0, "missing") >= 0);
	/* and the server is still there for the API */
	CHECK_INT_EQ(http_as("/logs/1201/1/0", bearer(cred_as(key, 1201, 1, 0, T.node, later)),
			     &body),
		     200);
	CHECK_STR_EQ(body, "secret of rank 0\n");
}

/* Poll /metrics until series has value want (WAIT_MS at most); the last text. */
static const char *wait_metric(const char *series, double want)
{
	int64_t until = now_ms() + WAIT_MS;
	const char *t;

	do {
		t = scrape_metrics();
		if (metric(t, series) == want)
			return t;
		usleep(20 * 1000);
	} while (now_ms() < until);
	ty_test_fail_at(__FILE__, __LINE__, "%s never became %g (last %g)", series, want,
			metric(t, series));
	return t;
}

#define FINISHED(cls) "trainyard_executor_attempts_finished_total{failure_class=\"" cls "\"}"
#define SKIPPED(why) "trainyard_executor_dispatch_skipped_total{reason=\"" why "\"}"

TY_TEST(metrics_count_attempts_classes_and_skipped_messages)
{
	const char *before, *after, *in = ty_test_strf("%s/metrics.txt", T.state), *t;
	FILE *f;
	int status;

	setup();
	before = wait_metric("trainyard_executor_attempts_running", 0);
	CHECK_INT_EQ(metric(before, "trainyard_executor_ranks_running"), 0);
	send_msg(PROTO_LAUNCH, 1901, EPOCH - 1, launch_data(1, "true"));
	send_msg(PROTO_LAUNCH, 1902, EPOCH, launch_data(1, "exit 3"));
	send_msg(PROTO_LAUNCH, 1903, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1902, 1) != NULL);
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1903, 1) != NULL);
	send_msg(PROTO_LAUNCH, 1904, EPOCH, launch_data(2, "sleep 60 & wait"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1904, 1) != NULL);
	/*
	 * The gauges are taken every 100 ms: one taken while 1902 and 1903 ran
	 * also says 2 ranks. Wait for the one that has 1904 alone.
	 */
	{
		int64_t until = now_ms() + WAIT_MS;

		do
			t = scrape_metrics();
		while ((metric(t, "trainyard_executor_ranks_running") != 2 ||
			metric(t, "trainyard_executor_attempts_running") != 1) &&
		       now_ms() < until && usleep(20 * 1000) == 0);
		CHECK_INT_EQ(metric(t, "trainyard_executor_ranks_running"), 2);
		CHECK_INT_EQ(metric(t, "trainyard_executor_attempts_running"), 1);
	}
	send_msg(PROTO_KILL, 1904, EPOCH, "{'reason':'cancel','grace_seconds':1}");
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1904, 1) != NULL);
	after = wait_metric("trainyard_executor_attempts_running", 0);

	CHECK_INT_EQ(metric(after, FINISHED("user")) - (metric(before, FINISHED("user")) > 0
							    ? metric(before, FINISHED("user"))
							    : 0),
		     1);
	CHECK_INT_EQ(metric(after, FINISHED("cancelled")) -
			 (metric(before, FINISHED("cancelled")) > 0
			      ? metric(before, FINISHED("cancelled"))
			      : 0),
		     1);
	CHECK_INT_EQ(metric(after, FINISHED("none")) - (metric(before, FINISHED("none")) > 0
							    ? metric(before, FINISHED("none"))
							    : 0),
		     1);
	CHECK_INT_EQ(metric(after, SKIPPED("stale")) - metric(before, SKIPPED("stale")), 1);
	CHECK_INT_EQ(metric(after, SKIPPED("other_node")) - metric(before, SKIPPED("other_node")),
		     0);
	CHECK_INT_EQ(metric(after, "trainyard_executor_ranks_running"), 0);
	CHECK_INT_EQ(metric(after, "trainyard_executor_spot_notices_total"), 0);
	CHECK(strstr(after, "# TYPE trainyard_executor_attempts_finished_total counter\n") != NULL);

	/* promtool must pass on it (and be there: a missing promtool fails) */
	REQUIRE((f = fopen(in, "w")) != NULL);
	fputs(after, f);
	fclose(f);
	status = system(ty_test_strf("promtool check metrics < '%s' >&2", in));
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the log routes still answer next to it */
	CHECK_INT_EQ(http_get("/metrics/x", &(char *){NULL}), 404);
}

/*
 * The executor in containers (--isolation runc): launches that name a uid
 * run as it in their own work directory; what cannot run says why.
 */
TY_TEST(containers_run_as_the_launchs_uid_and_failures_say_why)
{
	const char *data = ty_test_strf("%s/data", T.dir);
	const char *work = ty_test_strf("%s/attempts/1303.1/work", T.state);
	const json_t *d;
	struct stat st;

	setup();
	REQUIRE(mkdir(data, 0755) == 0);
	stop_executor(SIGTERM);
	/* each attempt creates its own container (warm ones: the next test) */
	T.extra = (const char *const[]){"--isolation",	"runc", "--data-mounts",
					data,		"--warm-containers", "0",
					NULL};
	start_executor();

	send_msg(PROTO_LAUNCH, 1301, EPOCH, launch_data(1, "true"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1301, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK(strstr(json_string_value(json_object_get(d, "message")),
		     "container: the launch names no uid for the job's team") != NULL);
	CHECK(json_is_false(json_object_get(d, "node_fault"))); /* the launch's fault */

	send_msg(PROTO_LAUNCH, 1302, EPOCH,
		 launch_extra(1, "true", "'uid':100123,'image':'oci:/images/x:1'"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1302, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK(strstr(json_string_value(json_object_get(d, "message")), "image 'oci:/images/x:1'") !=
	      NULL);
	CHECK(json_object_get(d, "node_fault") == NULL); /* not on this node: the node's */

	send_msg(PROTO_LAUNCH, 1303, EPOCH,
		 launch_extra(2, "id -u > uid.$RANK; ls -d /proc/[0-9]* | wc -l > procs.$RANK",
			      "'uid':100123,'gid':100124,'cpus':1,'memory_mb':256"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1303, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/uid.0", work)), "100123\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/uid.1", work)), "100123\n");
	/* both ranks in one container: init, two shims, their shells and commands, no more */
	ty_test_context("procs.0: %s", read_text(ty_test_strf("%s/procs.0", work)));
	CHECK(atoi(read_text(ty_test_strf("%s/procs.0", work))) <= 12);
	ty_test_context(NULL);
	REQUIRE(stat(work, &st) == 0);
	CHECK_INT_EQ((long long)st.st_uid, 100123);
	CHECK_INT_EQ((long long)st.st_gid, 100124);
	CHECK_INT_EQ((long long)(st.st_mode & 0777), 0700);
	/* the container is deleted once the attempt ended (on the thread pool, soon after) */
	{
		const char *bundle = ty_test_strf("%s/containers/ty-%s-1303-1", T.state, T.node);
		int64_t end = now_ms() + WAIT_MS;

		while (access(bundle, F_OK) == 0 && now_ms() < end)
			usleep(20000);
		CHECK(access(bundle, F_OK) != 0);
	}

	/* a data mount whose source vanished: the runtime's own words */
	REQUIRE(rmdir(data) == 0);
	send_msg(PROTO_LAUNCH, 1304, EPOCH, launch_extra(1, "true", "'uid':100123"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1304, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK(strstr(json_string_value(json_object_get(d, "message")), "container: 'runc run' exited "
									   "with code 1") != NULL);
	CHECK(strstr(json_string_value(json_object_get(d, "message")), data) != NULL);

	stop_executor(SIGTERM);
	T.extra = NULL;
	start_executor();
}

/* Whether anything is mounted under dir/ in this (the executor's) mount namespace. */
static bool mounts_under(const char *dir)
{
	const char *needle = ty_test_strf(" %s/", dir);
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[8192];
	bool found = false;

	REQUIRE(f != NULL);
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* read_text, "" for a file that is not there (yet). */
static const char *text_of(const char *path)
{
	const char *t = read_text(path);

	return t ? t : "";
}

/* Wait for warm container n of this node to be running; its bundle directory. */
static const char *wait_warm(int n)
{
	const char *bundle = ty_test_strf("%s/containers/ty-%s-warm-%d", T.state, T.node, n);
	int64_t end = now_ms() + WAIT_MS;

	while (access(ty_test_strf("%s/init.pid", bundle), F_OK) && now_ms() < end)
		usleep(20000);
	return access(ty_test_strf("%s/init.pid", bundle), F_OK) ? NULL : bundle;
}

/*
 * Warm containers (--warm-containers): created ahead; the attempt that
 * takes one sees exactly its own directories, runs as its uid within its
 * limits, and the container is deleted (mounts and all) after it.
 */
TY_TEST(a_warm_container_takes_the_attempts_directories_and_limits)
{
	const char *work = ty_test_strf("%s/attempts/1311.1/work", T.state);
	const char *cg = "$(grep :memory: /proc/self/cgroup | cut -d: -f3)";
	const char *cpu_cg = "$(grep -e :cpu: -e :cpu,cpuacct: /proc/self/cgroup | cut -d: -f3)";
	const char *bundle, *next;
	const json_t *d;

	setup();
	stop_executor(SIGTERM);
	T.extra = (const char *const[]){"--isolation", "runc", "--warm-containers", "1", NULL};
	start_executor();
	REQUIRE((bundle = wait_warm(1)) != NULL);
	/* another job's directories exist on the host: the attempt must not see them */
	REQUIRE(system(ty_test_strf("mkdir -p '%s/checkpoints/job-999' '%s/attempts/999.1'", T.state,
				    T.state)) == 0);

	send_msg(PROTO_LAUNCH, 1311, EPOCH,
		 launch_extra(1,
			      ty_test_strf("id -u > uid; cat /proc/self/cgroup > cgroup; "
					   "ls %s/checkpoints > ckpts; ls %s/attempts > attempts; "
					   "cat /sys/fs/cgroup/memory%s/memory.limit_in_bytes > mem; "
					   "cat /sys/fs/cgroup/cpu%s/cpu.cfs_quota_us > quota; "
					   "echo mine > $TRAINYARD_CHECKPOINT_DIR/f",
					   T.state, T.state, cg, cpu_cg),
			      "'uid':100123,'gid':100123,'cpus':2,'memory_mb':96"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1311, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")),
		     "all 1 local rank(s) exited with code 0");
	CHECK(strstr(text_of(ty_test_strf("%s/cgroup", work)), "warm-1") != NULL);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/uid", work)), "100123\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/ckpts", work)), "job-1311\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/attempts", work)), "1311.1\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/mem", work)), "100663296\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/quota", work)), "200000\n");
	CHECK_STR_EQ(read_text(ty_test_strf("%s/checkpoints/job-1311/f", T.state)), "mine\n");
	/* deleted after the attempt, its binds unmounted; the next one is ready */
	{
		int64_t end = now_ms() + WAIT_MS;

		while ((access(bundle, F_OK) == 0 || mounts_under(bundle)) && now_ms() < end)
			usleep(20000);
		CHECK(access(bundle, F_OK) != 0);
		CHECK(!mounts_under(bundle));
	}
	REQUIRE((next = wait_warm(2)) != NULL);

	/* over its memory in a warm container: oom, as in its own */
	send_msg(PROTO_LAUNCH, 1312, EPOCH,
		 launch_extra(1, "head -c 300000000 /dev/zero | tail",
			      "'uid':100123,'memory_mb':64"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1312, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "oom");

	/* a job with an image never takes one: warm-3 waits on */
	REQUIRE(wait_warm(3) != NULL);
	send_msg(PROTO_LAUNCH, 1313, EPOCH,
		 launch_extra(1, "true", "'uid':100123,'image':'oci:/images/x:1'"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1313, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK(access(ty_test_strf("%s/containers/ty-%s-warm-3/init.pid", T.state, T.node), F_OK) ==
	      0);

	/* warm-3 was made with 1312's limits: no memory limit and one CPU are set on it */
	work = ty_test_strf("%s/attempts/1314.1/work", T.state);
	send_msg(PROTO_LAUNCH, 1314, EPOCH,
		 launch_extra(1,
			      ty_test_strf("cat /proc/self/cgroup > cgroup; "
					   "cat /sys/fs/cgroup/memory%s/memory.limit_in_bytes > mem; "
					   "cat /sys/fs/cgroup/cpu%s/cpu.cfs_quota_us > quota",
					   cg, cpu_cg),
			      "'uid':100123,'cpus':1"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1314, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	CHECK(strstr(text_of(ty_test_strf("%s/cgroup", work)), "warm-3") != NULL);
	CHECK(atoll(text_of(ty_test_strf("%s/mem", work))) > (1LL << 40)); /* none */
	CHECK_STR_EQ(read_text(ty_test_strf("%s/quota", work)), "100000\n");
	REQUIRE(wait_warm(4) != NULL);

	/* a stop deletes the ready one with its mounts */
	stop_executor(SIGTERM);
	CHECK(access(ty_test_strf("%s/containers/ty-%s-warm-4", T.state, T.node), F_OK) != 0);
	CHECK(!mounts_under(ty_test_strf("%s/containers", T.state)));
	T.extra = NULL;
	start_executor();
}

/*
 * An executor killed with a warm container ready: the next boot deletes
 * it, mounts and all, and makes a new one.
 */
TY_TEST(a_restart_deletes_the_warm_containers_a_killed_boot_left)
{
	const char *old, *pidf, *before;
	int64_t end;

	setup();
	stop_executor(SIGTERM);
	T.extra = (const char *const[]){"--isolation", "runc", "--warm-containers", "1", NULL};
	start_executor();
	REQUIRE((old = wait_warm(1)) != NULL);
	CHECK(mounts_under(old));
	pidf = ty_test_strf("%s/init.pid", old);
	before = ty_test_strf("%s", text_of(pidf));
	REQUIRE(atoi(before) > 1);
	stop_executor(SIGKILL);
	start_executor();
	/* the new boot counts from 1 again: its warm-1 is a new container */
	end = now_ms() + WAIT_MS;
	while ((!strcmp(text_of(pidf), before) || !*text_of(pidf)) && now_ms() < end)
		usleep(20000);
	ty_test_context("init pid before '%s', now '%s'", before, text_of(pidf));
	CHECK(strcmp(text_of(pidf), before) != 0);
	/* the old init is gone (or a zombie of whoever inherited it) */
	CHECK(!strstr(text_of(ty_test_strf("/proc/%d/status", atoi(before))), "State:\tS"));
	ty_test_context(NULL);
	stop_executor(SIGTERM);
	CHECK(!mounts_under(ty_test_strf("%s/containers", T.state)));
	T.extra = NULL;
	start_executor();
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

static const json_t *wait_heartbeat_condition(const char *kind, int gpu, long long code);

/*
 * The fabric watch (--fabric-check-ms): an HCA port that goes down in
 * (a stand-in) sysfs turns RDMA off for later launches only, and the
 * next register says so.
 */
TY_TEST(a_port_that_goes_down_turns_the_fabric_off_for_later_launches)
{
	const char *sys = ty_test_strf("%s/sys", T.dir);
	const char *port = ty_test_strf("%s/class/infiniband/mlx5_0/ports/1", sys);
	const char *inv = ty_test_strf("%s/inventory.json", T.dir);
	const char *before = ty_test_strf("%s/attempts/1321.1/work/ib", T.state);
	const char *after = ty_test_strf("%s/attempts/1322.1/work/ib", T.state);
	const json_t *d, *reg;
	size_t regs;
	int64_t end;

	setup();
	REQUIRE(system(ty_test_strf("mkdir -p '%s'", port)) == 0);
	write_file(ty_test_strf("%s/state", port), "4: ACTIVE\n");
	write_file(ty_test_strf("%s/link_layer", port), "InfiniBand\n");
	write_file(ty_test_strf("%s/rate", port), "200 Gb/sec (4X HDR)\n");
	write_file(inv, "{\"gpus\":[{\"index\":0,\"name\":\"Stand-in\",\"memory_mb\":1024},"
			"{\"index\":1,\"name\":\"Stand-in\",\"memory_mb\":1024}],"
			"\"hcas\":[{\"name\":\"mlx5_0\",\"ports\":[{\"port\":1,\"state\":\"ACTIVE\","
			"\"link_layer\":\"InfiniBand\",\"rate_gbps\":200}]}]}");
	stop_executor(SIGTERM);
	T.extra = (const char *const[]){"--inventory-file", inv, "--sysfs-root", sys,
					"--fabric-check-ms", "100", NULL};
	start_executor();

	send_msg(PROTO_LAUNCH, 1321, EPOCH, launch_data(1, "env | grep ^NCCL_IB > ib; sleep 2"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1321, 1) != NULL);
	end = now_ms() + WAIT_MS;
	while (!read_text(before) && now_ms() < end)
		usleep(20000);
	regs = count_of(PROTO_REGISTER, 0);
	write_file(ty_test_strf("%s/state", port), "1: DOWN\n");
	end = now_ms() + WAIT_MS;
	while (!log_has("fabric changed") && now_ms() < end)
		usleep(20000);
	CHECK(log_has("fabric: mlx5_0 port 1: ACTIVE 200 Gb/s -> DOWN 200 Gb/s"));

	send_msg(PROTO_LAUNCH, 1322, EPOCH, launch_data(1, "env | grep ^NCCL_IB > ib"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1322, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	ty_test_context("before: %s, after: %s", text_of(before), text_of(after));
	CHECK(strstr(text_of(before), "NCCL_IB_HCA=") != NULL); /* launched on the good fabric */
	CHECK(strstr(text_of(before), "NCCL_IB_DISABLE") == NULL);
	CHECK(strstr(text_of(after), "NCCL_IB_DISABLE=1") != NULL);
	CHECK(strstr(text_of(after), "NCCL_IB_HCA") == NULL);
	ty_test_context(NULL);
	/* the running attempt kept its environment and ends as it would have */
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1321, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	/* and the node says so at once, not at the next --register-ms */
	REQUIRE((reg = wait_msg(PROTO_REGISTER, 0, regs + 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(
			 json_array_get(json_object_get(json_array_get(json_object_get(
								json_object_get(reg, "inventory"), "hcas"),
							    0),
						    "ports"),
					0),
			 "state")),
		     "DOWN");
	/* a port_down condition, in that register and in heartbeats while it lasts */
	d = json_array_get(json_object_get(reg, "conditions"), 0);
	REQUIRE(d != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "kind")), "port_down");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "severity")), "degraded");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "port")), "mlx5_0/1");
	CHECK(json_is_null(json_object_get(d, "gpu")));
	REQUIRE((d = wait_heartbeat_condition("port_down", -1, -1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence")),
		     "mlx5_0 port 1 is DOWN (InfiniBand): NCCL does not use it");
	CHECK(metric(scrape_metrics(), "trainyard_executor_condition{kind=\"port_down\","
				       "severity=\"degraded\",gpu=\"\",port=\"mlx5_0/1\"}") == 1);
	/* back up: the condition clears */
	write_file(ty_test_strf("%s/state", port), "4: ACTIVE\n");
	end = now_ms() + WAIT_MS;
	while (metric(scrape_metrics(), "trainyard_executor_condition{kind=\"port_down\","
					"severity=\"degraded\",gpu=\"\",port=\"mlx5_0/1\"}") != 0 &&
	       now_ms() < end)
		usleep(50000);
	CHECK(metric(scrape_metrics(), "trainyard_executor_condition{kind=\"port_down\","
				       "severity=\"degraded\",gpu=\"\",port=\"mlx5_0/1\"}") == 0);

	stop_executor(SIGTERM);
	T.extra = NULL;
	start_executor();
}

/* The health_check condition of the first heartbeat after the n-th (1-based), NULL if it has none. */
static const json_t *health_condition_after(size_t n)
{
	const json_t *hb = wait_msg(PROTO_HEARTBEAT, 0, n + 1), *c;
	size_t i;

	REQUIRE(hb != NULL);
	json_array_foreach(json_object_get(hb, "conditions"), i, c)
	{
		if (!strcmp(json_string_value(json_object_get(c, "kind")), "health_check"))
			return c;
	}
	return NULL;
}

static bool wait_log(const char *needle)
{
	int64_t end = now_ms() + WAIT_MS;

	while (!log_has(needle) && now_ms() < end)
		collect(50);
	return log_has(needle);
}

/*
 * A health check the scheduler asks for (dispatch health_check) runs
 * --health-check-command on the host: a failure is a fatal condition in
 * every heartbeat until a later check passes; a check that runs too long
 * fails; without a command the request is only logged.
 */
TY_TEST(a_failed_health_check_is_a_fatal_condition_until_one_passes)
{
	const char *sick = ty_test_strf("%s/sick", T.dir);
	const json_t *c;
	struct ty_err err = {0};

	setup();
	send_msg(PROTO_HEALTH_CHECK, 0, EPOCH, "{'reason':'no command here'}");
	CHECK(wait_log("health check asked for (no command here): no --health-check-command"));

	stop_executor(SIGTERM);
	T.extra = (const char *const[]){
	    "--health-check-command", ty_test_strf("test ! -e '%s' || { echo GPU 3 bad; exit 2; }", sick),
	    "--health-check-interval-ms", "0", NULL};
	start_executor();
	send_msg(PROTO_HEALTH_CHECK, 0, EPOCH, "{'reason':'first'}");
	CHECK(wait_log("health check passed"));
	CHECK(health_condition_after(count_of(PROTO_HEARTBEAT, 0)) == NULL);

	write_file(sick, "x");
	send_msg(PROTO_HEALTH_CHECK, 0, EPOCH, "{'reason':'second'}");
	CHECK(wait_log("exited 2: GPU 3 bad"));
	REQUIRE((c = health_condition_after(count_of(PROTO_HEARTBEAT, 0))) != NULL);
	CHECK_INT_EQ(proto_condition_check(c, &err), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK(strstr(json_string_value(json_object_get(c, "evidence")), "exited 2: GPU 3 bad") !=
	      NULL);

	unlink(sick);
	send_msg(PROTO_HEALTH_CHECK, 0, EPOCH, "{'reason':'third'}");
	CHECK(wait_log("the health_check condition is cleared"));
	CHECK(health_condition_after(count_of(PROTO_HEARTBEAT, 0)) == NULL);

	stop_executor(SIGTERM);
	T.extra = (const char *const[]){"--health-check-command", "sleep 30",
					"--health-check-timeout-ms", "1000", NULL};
	start_executor();
	send_msg(PROTO_HEALTH_CHECK, 0, EPOCH, "{'reason':'slow'}");
	CHECK(wait_log("health check 'sleep 30' timed out after 1 s"));
	REQUIRE((c = health_condition_after(count_of(PROTO_HEARTBEAT, 0))) != NULL);
	CHECK(strstr(json_string_value(json_object_get(c, "evidence")), "timed out") != NULL);

	stop_executor(SIGTERM);
	T.extra = NULL;
	start_executor();
}

/* ---- the health watch, with GPUs from the NVML stand-in (TY_FAKE_NVML) ---- */

#define NV_UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define NV_UUID1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

/*
 * The stand-in's control file at path: two GPUs, each with its extra fields
 * (JSON members with ', "" none), and events. Written whole (a rename),
 * each write longer than the last so the stand-in sees every change.
 */
static void nvml_control_at(const char *path, const char *gpu0, const char *gpu1,
			    const char *events)
{
	static int writes;
	const char *tmp = ty_test_strf("%s.tmp", path);
	FILE *f = fopen(tmp, "w");

	REQUIRE(f != NULL);
	fputs(ty_test_jf("{'driver_version':'570.86.15','cuda_version':12080,'gpus':["
			 "{'uuid':'" NV_UUID0 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"
			 "'pci_bus_id':'00000000:18:00.0','mig_mode':'disabled'%s%s},"
			 "{'uuid':'" NV_UUID1 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"
			 "'pci_bus_id':'00000000:3B:00.0','mig_mode':'disabled'%s%s}],'events':[%s]}",
			 *gpu0 ? "," : "", gpu0, *gpu1 ? "," : "", gpu1, events),
	      f);
	for (int i = 0; i <= writes; i++)
		fputc('\n', f);
	writes++;
	fclose(f);
	REQUIRE(rename(tmp, path) == 0);
}

/* The health cases' control file (FAKE_NVML_FILE, which the executor inherits): gpu0's extras. */
static const char *nvml_control(const char *gpu0, const char *events)
{
	const char *path = ty_test_strf("%s/nvml.json", T.dir);

	nvml_control_at(path, gpu0, "", events);
	setenv("FAKE_NVML_FILE", path, 1);
	return path;
}

/* A fresh executor whose GPUs come from the stand-in, their counters read every check_ms. */
static void start_nvml_executor(const char *check_ms)
{
	/* T.extra outlives this call: the next start (a restart within a case) reads it */
	static char ms[16];
	static const char *extra[] = {"--nvml-library", NULL, "--health-check-ms", ms, NULL};
	const char *lib = getenv("TY_FAKE_NVML");
	const json_t *reg;

	REQUIRE(lib && *lib);
	nvml_control("", "");
	stop_executor(SIGTERM);
	extra[1] = lib;
	snprintf(ms, sizeof(ms), "%s", check_ms);
	T.extra = extra;
	reg = start_executor();
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(reg, "inventory"),
						       "gpu_source")),
		     "nvml");
	CHECK(json_is_false(json_object_get(reg, "simulated")));
	CHECK_INT_EQ(json_array_size(json_object_get(reg, "conditions")), 0);
}

/* A one-rank launch on GPU gpu running sh -c script. */
static const char *launch_on_gpu(int gpu, const char *script)
{
	const char *d = launch_data(1, script);
	const char *g = strstr(d, "'gpus':[0]");

	REQUIRE(g != NULL);
	return ty_test_strf("%.*s'gpus':[%d]%s", (int)(g - d), d, gpu, g + strlen("'gpus':[0]"));
}

/* The first condition of kind on gpu (-1: any) with code (-1: any) in one of this boot's heartbeats. */
static const json_t *wait_heartbeat_condition(const char *kind, int gpu, long long code)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		for (size_t i = 0; i < T.ngot; i++) {
			const json_t *d = T.got[i].data, *c;
			const char *boot = json_string_value(json_object_get(d, "boot_id"));
			size_t k;

			if (T.got[i].type != PROTO_HEARTBEAT || !boot || strcmp(boot, T.boot_id))
				continue;
			json_array_foreach(json_object_get(d, "conditions"), k, c)
			{
				struct ty_err err = {0};

				if (proto_condition_check(c, &err))
					FAIL("a heartbeat's condition: %s", err.msg);
				if (!strcmp(json_string_value(json_object_get(c, "kind")), kind) &&
				    (gpu < 0 || json_integer_value(json_object_get(c, "gpu")) == gpu) &&
				    (code < 0 || json_integer_value(json_object_get(c, "code")) == code))
					return c;
			}
		}
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

/*
 * A fatal Xid on GPU 0 (injected into the running stand-in): the attempt on
 * GPU 0 is stopped as hardware with the condition, the one on GPU 1 runs
 * on, the heartbeat and /metrics carry it, and a later launch on GPU 0 ends
 * at once.
 */
TY_TEST(a_fatal_xid_stops_the_attempt_on_its_gpu_only)
{
	const json_t *d, *c;
	struct ty_err err = {0};
	const char *m;
	pid_t p0;

	setup();
	start_nvml_executor("100");
	send_msg(PROTO_LAUNCH, 1701, EPOCH, launch_on_gpu(0, "echo on $CUDA_VISIBLE_DEVICES; "
							     "sleep 60 & wait"));
	send_msg(PROTO_LAUNCH, 1702, EPOCH, launch_on_gpu(1, "sleep 60 & wait"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1701, 1) != NULL);
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1702, 1) != NULL);
	p0 = rank_pid(1701, 1);
	REQUIRE(p0 > 1);

	nvml_control("", "{'gpu':0,'xid':79}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1701, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "hardware");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence_source")), "executor");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), -1);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence")),
		     "Xid 79 on GPU 0 (" NV_UUID0 "): GPU has fallen off the bus");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")),
		     "stopped: fatal xid condition on GPU 0");
	c = json_object_get(d, "condition");
	if (proto_condition_check(c, &err))
		FAIL("attempt_exited.condition: %s", err.msg);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "kind")), "xid");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK_INT_EQ(json_integer_value(json_object_get(c, "code")), 79);
	CHECK_INT_EQ(json_integer_value(json_object_get(c, "gpu")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "gpu_uuid")), NV_UUID0);
	CHECK_INT_EQ(group_live(p0), 0);

	/* the node says so in its heartbeats */
	REQUIRE((c = wait_heartbeat_condition("xid", 0, 79)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK(log_has("condition: fatal xid on GPU 0: Xid 79 on GPU 0"));
	m = scrape_metrics();
	CHECK(metric(m, "trainyard_executor_condition{kind=\"xid\",severity=\"fatal\",gpu=\"0\","
			"port=\"\"}") == 1);
	CHECK(metric(m, "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" NV_UUID0 "\"}") == 79);
	CHECK(metric(m, "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"" NV_UUID1 "\"}") == 0);

	/* GPU 1's attempt was not touched: still running, a heartbeat after says so */
	collect(500);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1702), 0);
	CHECK(wait_heartbeats_running(1702, heartbeats_running(1702) + 1));

	/* a launch on the broken GPU (the scheduler had not heard yet) ends at once */
	send_msg(PROTO_LAUNCH, 1703, EPOCH, launch_on_gpu(0, "touch ran; sleep 60"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1703, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "hardware");
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(d, "condition"), "code")),
		     79);

	send_msg(PROTO_KILL, 1702, EPOCH, "{'reason':'cancel','grace_seconds':1}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1702, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "cancelled");
	CHECK(json_object_get(d, "condition") == NULL);
}

/* Keep the stand-in's file as it is now aside under name; the current one stays as it was. */
static const char *nvml_aside(const char *gpu0, const char *events, const char *name)
{
	const char *aside = ty_test_strf("%s/%s", T.dir, name);

	REQUIRE(rename(nvml_control(gpu0, events), aside) == 0);
	return aside;
}

/*
 * Item 4's rule: a rank that fails on its own, printing its own traceback,
 * while a fatal condition appears on its GPU failed because of the GPU:
 * hardware, with the condition's evidence. Here the rank makes the stand-in
 * raise GPU 0's uncorrected ECC counter as it exits, and counters are read
 * only every minute: the pass a failed attempt waits for before it reports
 * is the one that sees it.
 */
TY_TEST(a_failure_during_which_its_gpu_broke_is_hardware)
{
	const char *path = ty_test_strf("%s/nvml.json", T.dir), *dbe, *x13;
	const json_t *d, *c;

	setup();
	start_nvml_executor("60000");
	dbe = nvml_aside("'ecc_dbe':2", "", "nvml-dbe.json");
	x13 = nvml_aside("'ecc_dbe':2", "{'gpu':1,'xid':13}", "nvml-xid13.json");
	nvml_control("", "");
	send_msg(PROTO_LAUNCH, 1704, EPOCH,
		 launch_on_gpu(0, ty_test_strf("echo \"Traceback (most recent call last):\"; "
					       "echo \"ValueError: bad shape\"; mv %s %s; exit 1",
					       dbe, path)));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1704, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "hardware");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence_source")), "executor");
	/* the rank's own end, not a stop of the executor's */
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence")),
		     "GPU 0 (" NV_UUID0 "): volatile uncorrected ECC errors rose from 0 to 2");
	c = json_object_get(d, "condition");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "kind")), "ecc_dbe");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK(log_has("job 1704 attempt 1: hardware, not user: ecc_dbe was first seen while it ran"));

	/* an Xid the table calls the application's (13) leaves the class to the ranks */
	send_msg(PROTO_LAUNCH, 1705, EPOCH,
		 launch_on_gpu(1, ty_test_strf("echo \"Traceback (most recent call last):\"; "
					       "echo \"ValueError: bad shape\"; mv %s %s; exit 1",
					       x13, path)));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1705, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "user");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "evidence")), "rank 0: ValueError: bad shape");
	CHECK(json_object_get(d, "condition") == NULL);

	/* the rest of the cases run on simulated GPUs again */
	stop_executor(SIGTERM);
	T.extra = NULL;
	start_executor();
}

/* trainyard-executor --watch-for with extra options; its exit status, stdout and stderr. */
static int watch_for(const char *args, char **out, char **err)
{
	const char *o = ty_test_strf("%s/watch.out", T.dir), *e = ty_test_strf("%s/watch.err", T.dir);
	int status = system(ty_test_strf("'%s' --watch-for 1 --nvml-library '%s' %s >'%s' 2>'%s'",
					 T.bin, getenv("TY_FAKE_NVML"), args, o, e));

	*out = read_text(o);
	*err = read_text(e);
	REQUIRE(*out && *err);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * The operator's diagnostic: the health watch alone, no broker, no keys;
 * each condition a JSON line on stdout, then a summary; exit 0 healthy, 3
 * when a condition was seen, 2 when it cannot watch.
 */
TY_TEST(watch_for_diagnoses_the_gpus_without_a_broker)
{
	char *out, *err, *nl;
	json_t *j;

	setup();
	REQUIRE(getenv("TY_FAKE_NVML") != NULL);
	nvml_control("", "");
	CHECK_INT_EQ(watch_for("--health-check-ms 100", &out, &err), 0);
	ty_test_context("stdout: %s", out);
	REQUIRE((j = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(j, "summary"), "gpus")), 2);
	CHECK(json_is_true(json_object_get(json_object_get(j, "summary"), "healthy")));
	json_decref(j);
	CHECK(strstr(err, "health watch: 2 GPU(s)") != NULL);

	nvml_control("'remap_pending':true", "");
	CHECK_INT_EQ(watch_for("--health-check-ms 100", &out, &err), 3);
	ty_test_context("stdout: %s", out);
	REQUIRE((nl = strchr(out, '\n')) != NULL);
	*nl = '\0';
	REQUIRE((j = json_loads(out, 0, NULL)) != NULL);
	{
		struct ty_err e = {0};

		if (proto_condition_check(j, &e))
			FAIL("the first line is not a condition: %s", e.msg);
	}
	CHECK_STR_EQ(json_string_value(json_object_get(j, "kind")), "row_remap_pending");
	CHECK_INT_EQ(json_integer_value(json_object_get(j, "gpu")), 0);
	json_decref(j);
	REQUIRE((j = json_loads(nl + 1, JSON_DISABLE_EOF_CHECK, NULL)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(j, "summary"), "fatal")), 1);
	json_decref(j);
	ty_test_context(NULL);

	/* it watches real GPUs only */
	CHECK_INT_EQ(watch_for("--fake-gpus 2", &out, &err), 2);
	CHECK(strstr(err, "not with --fake-gpus or --inventory-file") != NULL);
	CHECK_INT_EQ(watch_for("--health-check-ms 0", &out, &err), 2);
	CHECK(strstr(err, "the health watch cannot run: --health-check-ms is 0") != NULL);
	CHECK_INT_EQ(watch_for("--nvml-library /nonexistent/libnvidia-ml.so.1 --cudart /nonexistent",
			       &out, &err),
		     2);
	CHECK(strstr(err, "the health watch cannot run: no GPU in the inventory") != NULL);
}

/* ---- GPU telemetry, with the GPUs of the NVML stand-in (TY_FAKE_NVML) ---- */

#define TGPU0 NV_UUID0
#define TGPU1 NV_UUID1

/* The telemetry cases' control file: GPU 0 at util0 percent, 1000 MiB, 250 W; GPU 1 at 10 %, or lost. */
static void telem_control(const char *path, int util0, bool lost1)
{
	nvml_control_at(path,
			ty_test_strf("'utilization':%d,'memory_used_mb':1000,'power_mw':250000", util0),
			ty_test_strf("'utilization':10,'memory_used_mb':2048,'power_mw':70000,'lost':%s",
				     lost1 ? "true" : "false"),
			"");
}

/* A DCGM series of this node's GPU (0 or 1) with the job labels given ("" none). */
static const char *dcgm(const char *name, int gpu, const char *job, const char *team)
{
	return ty_test_strf("%s{gpu=\"%d\",UUID=\"%s\",modelName=\"NVIDIA H100 80GB HBM3\","
			    "Hostname=\"%s\",job=\"%s\",attempt=\"%s\",team=\"%s\"}",
			    name, gpu, gpu ? TGPU1 : TGPU0, T.node, job, *job ? "1" : "", team);
}

/*
 * The running entry of job in the first heartbeat of this boot, from
 * message *from on, whose `key` is above `above`; *from moves past it.
 * NULL after WAIT_MS.
 */
static const json_t *wait_running_above(size_t *from, int64_t job, const char *key, double above)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		for (; *from < T.ngot; (*from)++) {
			const json_t *d = T.got[*from].data, *e;
			const char *boot = json_string_value(json_object_get(d, "boot_id"));
			size_t i;

			if (T.got[*from].type != PROTO_HEARTBEAT || !boot || strcmp(boot, T.boot_id))
				continue;
			json_array_foreach(json_object_get(d, "running"), i, e)
			{
				const json_t *v = json_object_get(e, key);

				if (json_integer_value(json_object_get(e, "job")) == job &&
				    json_is_number(v) && json_number_value(v) > above) {
					(*from)++;
					return e;
				}
			}
		}
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

/* Lines of the executor log that hold needle. */
static int log_count(const char *needle)
{
	FILE *f = fopen(T.log, "r");
	char line[4096];
	int n = 0;

	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return n;
}

static double num_of(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_number(v))
		FAIL("'%s' is not a number", key);
	return json_number_value(v);
}

/*
 * Issue 17 item 3: an attempt on a GPU at 90 % that then goes idle. The
 * heartbeat says how long it has been idle, attempt_exited sums it up,
 * /metrics shows the GPU under the job's name while it runs, and NVML is
 * let go when it ends.
 */
TY_TEST(telemetry_of_an_attempt_whose_gpu_goes_idle)
{
	const char *ctl = ty_test_strf("%s/nvml.json", T.dir);
	const char *lib = getenv("TY_FAKE_NVML");
	const char *prom = ty_test_strf("%s/dcgm.txt", T.dir), *m, *out;
	const json_t *d, *reg, *tel, *e;
	double idle1;
	size_t from;
	int64_t end;
	FILE *f;

	setup();
	if (!lib || !*lib) {
		FAIL("TY_FAKE_NVML is not set (tests/executor.cmake sets it)");
		return;
	}
	/* the simulated GPUs of the other cases have nothing to read */
	send_msg(PROTO_LAUNCH, 2101, EPOCH, launch_data(1, "true"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 2101, 1)) != NULL);
	CHECK(json_object_get(d, "telemetry") == NULL);
	CHECK(log_has("telemetry: off: the inventory is simulated"));

	telem_control(ctl, 90, false);
	setenv("FAKE_NVML_FILE", ctl, 1);
	stop_executor(SIGTERM);
	T.extra = (const char *const[]){"--nvml-library", lib, "--telemetry-ms", "100", NULL};
	reg = start_executor();
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(reg, "inventory"),
						       "gpu_source")),
		     "nvml");
	CHECK(log_has("telemetry: 2 GPU(s) sampled every 100 ms"));
	/* nothing runs: NVML is not held and no GPU series is shown */
	CHECK(strstr(scrape_metrics(), "DCGM_FI_DEV_GPU_UTIL{") == NULL);

	from = T.ngot;
	send_msg(PROTO_LAUNCH, 2102, EPOCH,
		 launch_extra(1, "sleep 60 & wait", "'team':'ml-research'"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 2102, 1) != NULL);
	/* GPU 0 under the job's name, GPU 1 free */
	wait_metric(dcgm("DCGM_FI_DEV_GPU_UTIL", 0, "2102", "ml-research"), 90);
	m = wait_metric(dcgm("DCGM_FI_DEV_GPU_UTIL", 1, "", ""), 10);
	CHECK_INT_EQ(metric(m, dcgm("DCGM_FI_DEV_FB_USED", 0, "2102", "ml-research")), 1000);
	CHECK_INT_EQ(metric(m, dcgm("DCGM_FI_DEV_POWER_USAGE", 0, "2102", "ml-research")), 250);
	CHECK_INT_EQ(metric(m, dcgm("DCGM_FI_DEV_FB_USED", 1, "", "")), 2048);
	CHECK(strstr(m, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n") != NULL);
	/* promtool parses it; its one complaint is dcgm-exporter's own label name */
	REQUIRE((f = fopen(prom, "w")) != NULL);
	fputs(m, f);
	fclose(f);
	CHECK(system(ty_test_strf("promtool check metrics < '%s' > '%s.out' 2>&1", prom, prom)) !=
	      -1);
	out = text_of(ty_test_strf("%s.out", prom));
	for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") {
		if (*p == '\n')
			continue;
		if (strncmp(p, "DCGM_FI_DEV_", 12) != 0 ||
		    !strstr(p, "label names should be written in 'snake_case' not 'camelCase'"))
			FAIL("promtool: %.*s", (int)strcspn(p, "\n"), p);
	}

	/* busy: the heartbeat says so */
	REQUIRE((e = wait_running_above(&from, 2102, "gpu_util", 89)) != NULL);
	CHECK(num_of(e, "idle_seconds") == 0);
	/* idle (and the other GPU lost): the stretch grows from one heartbeat to a later one */
	telem_control(ctl, 0, true);
	REQUIRE((e = wait_running_above(&from, 2102, "idle_seconds", 0)) != NULL);
	idle1 = num_of(e, "idle_seconds");
	CHECK(num_of(e, "gpu_util") < 1);
	REQUIRE((e = wait_running_above(&from, 2102, "idle_seconds", idle1)) != NULL);
	CHECK(num_of(e, "gpu_util") < 1);
	m = wait_metric(dcgm("DCGM_FI_DEV_GPU_UTIL", 0, "2102", "ml-research"), 0);
	/* a GPU that cannot be read: said once, left out, nothing else changes */
	CHECK(metric(m, dcgm("DCGM_FI_DEV_GPU_UTIL", 1, "", "")) == -1);
	CHECK_INT_EQ(log_count("telemetry: GPU 1 (" TGPU1 "): nvmlDeviceGetHandleByUUID: GPU is "
			       "lost (error 15); its samples are skipped until it reads again"),
		     1);

	send_msg(PROTO_KILL, 2102, EPOCH, "{'reason':'cancel','grace_seconds':1}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 2102, 1)) != NULL);
	tel = json_object_get(d, "telemetry");
	REQUIRE(json_is_object(tel));
	{
		char *t = json_dumps(tel, JSON_COMPACT);

		ty_test_context("telemetry %s", t ? t : "");
		free(t);
	}
	CHECK(num_of(tel, "samples") >= 3);
	CHECK_INT_EQ(num_of(tel, "gpus"), 1);
	CHECK(num_of(tel, "util_peak") == 90);
	CHECK(num_of(tel, "util_mean") > 0 && num_of(tel, "util_mean") < 90);
	CHECK_INT_EQ(num_of(tel, "memory_used_peak_mb"), 1000);
	CHECK(num_of(tel, "power_mean_w") == 250);
	CHECK(num_of(tel, "power_peak_w") == 250);
	CHECK(num_of(tel, "idle_seconds") >= idle1);
	ty_test_context(NULL);

	/* nothing runs any more: NVML shut down, the GPU series gone */
	end = now_ms() + WAIT_MS;
	while (!log_has("telemetry: NVML shut down") && now_ms() < end)
		usleep(20000);
	CHECK(log_has("telemetry: NVML shut down (no attempt with GPUs runs)"));
	end = now_ms() + WAIT_MS;
	while (strstr(m = scrape_metrics(), "DCGM_FI_DEV_GPU_UTIL{") && now_ms() < end)
		usleep(20000);
	CHECK(strstr(m, "DCGM_FI_DEV_GPU_UTIL{") == NULL);

	stop_executor(SIGTERM);
	T.extra = NULL;
	unsetenv("FAKE_NVML_FILE");
	start_executor();
}

/*
 * --sample-for: an operator's look at the GPUs without Kafka, keys or a
 * state directory: a JSON line per sample and a summary, exit 0; 2 when
 * no GPU can be read.
 */
TY_TEST(sample_for_reads_the_gpus_and_exits)
{
	const char *ctl = ty_test_strf("%s/nvml-sample.json", T.dir);
	const char *lib = getenv("TY_FAKE_NVML");
	const char *outp = ty_test_strf("%s/sample-for.out", T.dir);
	const char *text, *last;
	json_t *j, *g;
	int status;

	setup();
	if (!lib || !*lib) {
		FAIL("TY_FAKE_NVML is not set (tests/executor.cmake sets it)");
		return;
	}
	telem_control(ctl, 90, false);
	status = system(ty_test_strf("FAKE_NVML_FILE='%s' '%s' --nvml-library '%s' --sample-for 1 "
				     "--telemetry-ms 200 > '%s' 2> '%s.err'",
				     ctl, T.bin, lib, outp, outp));
	REQUIRE(WIFEXITED(status));
	CHECK_INT_EQ(WEXITSTATUS(status), 0);
	text = text_of(outp);
	ty_test_context("stdout: %s", text);
	/* samples at 0, 200, ... 1000 ms, then the summary */
	CHECK_INT_EQ(count_lines(text), 7);
	last = text;
	for (const char *p = text; (p = strstr(p, "\n{")); p++)
		last = p + 1; /* the summary */
	REQUIRE((j = json_loads(last, 0, NULL)) != NULL);
	g = json_array_get(json_object_get(json_object_get(j, "summary"), "gpus"), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(g, "uuid")), TGPU0);
	CHECK(num_of(g, "util_mean") == 90);
	CHECK(num_of(g, "util_peak") == 90);
	g = json_array_get(json_object_get(json_object_get(j, "summary"), "gpus"), 1);
	CHECK(num_of(g, "util_peak") == 10);
	json_decref(j);
	ty_test_context(NULL);

	/* the driver is gone: nothing to read, exit 2 */
	write_file(ctl, "{\"init_error\":9}");
	status = system(ty_test_strf("FAKE_NVML_FILE='%s' '%s' --nvml-library '%s' --sample-for 1 "
				     "--telemetry-ms 200 > '%s' 2> '%s.err'",
				     ctl, T.bin, lib, outp, outp));
	REQUIRE(WIFEXITED(status));
	CHECK_INT_EQ(WEXITSTATUS(status), 2);
	CHECK(strstr(text_of(ty_test_strf("%s.err", outp)), "no GPU to sample") != NULL);
	/* simulated GPUs are not sampled */
	status = system(ty_test_strf("'%s' --fake-gpus 2 --sample-for 1 > '%s' 2> '%s.err'", T.bin,
				     outp, outp));
	REQUIRE(WIFEXITED(status));
	CHECK_INT_EQ(WEXITSTATUS(status), 2);
	CHECK(strstr(text_of(ty_test_strf("%s.err", outp)),
		     "--sample-for reads the real GPUs: not with --fake-gpus") != NULL);
}


/* register of a boot started with extra options (NULL-terminated; the node's own labels kept) */
static const json_t *register_with(const char *const *extra)
{
	const json_t *reg;

	stop_executor(SIGTERM);
	T.extra = extra;
	reg = start_executor();
	T.extra = NULL;
	return reg;
}

/*
 * The expected inventory (docs/dispatch.md, "register"): --expect-gpus or
 * the label trainyard.io/expected-gpus, the option winning; register
 * carries expected_gpus and fault (null when the GPUs are as expected)
 * only when the node expects GPUs.
 */
TY_TEST(an_expected_inventory_is_registered_with_its_fault)
{
	const char *inv = ty_test_strf("%s/inventory-lost.json", T.dir);
	const json_t *reg;
	size_t regs;

	setup();
	/* --fake-gpus 2 (the harness's) against 3 expected */
	reg = register_with(
	    (const char *const[]){"--expect-gpus", "3", "--register-ms", "1000", NULL});
	CHECK_INT_EQ(json_integer_value(json_object_get(reg, "gpus")), 2);
	CHECK_INT_EQ(json_integer_value(json_object_get(reg, "expected_gpus")), 3);
	CHECK_STR_EQ(str_of(reg, "fault"), "found 2 of 3 expected GPUs");
	CHECK(log_has("inventory: found 2 of 3 expected GPUs: the node registers with this fault"));
	/* every later register says it again */
	regs = count_of(PROTO_REGISTER, 0);
	REQUIRE((reg = wait_msg(PROTO_REGISTER, 0, regs + 1)) != NULL);
	CHECK_STR_EQ(str_of(reg, "fault"), "found 2 of 3 expected GPUs");

	/* a GPU the probe counted but could not read is named, from the label's expectation */
	write_file(inv, "{\"gpus\":[{\"index\":0,\"name\":\"Stand-in\",\"memory_mb\":1024},"
			"{\"index\":1,\"name\":\"Stand-in\",\"memory_mb\":1024}],\"hcas\":[],"
			"\"gpu_fault\":\"GPU 2: nvmlDeviceGetUUID: GPU is lost (error 15)\"}");
	reg = register_with((const char *const[]){"--inventory-file", inv, "--labels",
						   "zone=z1,trainyard.io/expected-gpus=3", NULL});
	CHECK_INT_EQ(json_integer_value(json_object_get(reg, "expected_gpus")), 3);
	CHECK_STR_EQ(str_of(reg, "fault"),
		     "found 2 of 3 expected GPUs; GPU 2: nvmlDeviceGetUUID: GPU is lost (error 15)");
	CHECK_STR_EQ(str_of(json_object_get(reg, "labels"), "trainyard.io/expected-gpus"), "3");
	/* enough GPUs, but one lost: still a fault */
	reg = register_with((const char *const[]){"--inventory-file", inv, "--expect-gpus", "2",
						   NULL});
	CHECK_STR_EQ(str_of(reg, "fault"),
		     "found 2 GPUs (2 expected), but GPU 2: nvmlDeviceGetUUID: GPU is lost (error 15)");
	/* without an expectation the lost GPU is only in the inventory, as before */
	reg = register_with((const char *const[]){"--inventory-file", inv, NULL});
	CHECK(json_object_get(reg, "expected_gpus") == NULL);
	CHECK(json_object_get(reg, "fault") == NULL);
	CHECK_STR_EQ(str_of(json_object_get(reg, "inventory"), "gpu_fault"),
		     "GPU 2: nvmlDeviceGetUUID: GPU is lost (error 15)");

	/* the option wins over a label that disagrees, and says so */
	reg = register_with((const char *const[]){"--labels", "trainyard.io/expected-gpus=4",
						   "--expect-gpus", "2", NULL});
	CHECK_INT_EQ(json_integer_value(json_object_get(reg, "expected_gpus")), 2);
	CHECK(json_is_null(json_object_get(reg, "fault")));
	CHECK(log_has("--expect-gpus 2 overrides the label trainyard.io/expected-gpus=4"));
	/* --expect-gpus 0 turns a label's expectation off */
	reg = register_with((const char *const[]){"--labels", "trainyard.io/expected-gpus=4",
						   "--expect-gpus", "0", NULL});
	CHECK(json_object_get(reg, "expected_gpus") == NULL);
	CHECK(json_object_get(reg, "fault") == NULL);
	CHECK(log_has("--expect-gpus 0 overrides the label trainyard.io/expected-gpus=4"));
	/* more GPUs than expected is fine */
	reg = register_with((const char *const[]){"--expect-gpus", "1", NULL});
	CHECK_INT_EQ(json_integer_value(json_object_get(reg, "expected_gpus")), 1);
	CHECK(json_is_null(json_object_get(reg, "fault")));
	CHECK(log_has("inventory: 2 GPUs, more than the 1 expected"));

	stop_executor(SIGTERM);
	start_executor();
}

/* A bad expectation stops the executor at start, naming the option or the label. */
TY_TEST(a_bad_expectation_stops_the_executor)
{
	static const struct {
		const char *opt, *val, *want;
	} rows[] = {
	    {"--labels", "zone=a,trainyard.io/expected-gpus=eight",
	     "trainyard-executor: --labels: label trainyard.io/expected-gpus 'eight' is not a "
	     "number of GPUs from 0 to 1024"},
	    {"--labels", "trainyard.io/expected-gpus=-8",
	     "--labels: label trainyard.io/expected-gpus '-8' is not a number of GPUs"},
	    {"--labels", "trainyard.io/expected-gpus=2000",
	     "--labels: label trainyard.io/expected-gpus '2000' is not a number of GPUs"},
	    {"--expect-gpus", "-1", "option 'expect-gpus'"},
	    {"--expect-gpus", "1025", "option 'expect-gpus'"},
	    {"--expect-gpus", "eight", "option 'expect-gpus'"},
	};
	char *err;

	setup();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s %s", rows[i].opt, rows[i].val);
		CHECK_INT_EQ(run_briefly(&err, (const char *const[]){"--fake-gpus", "1", rows[i].opt,
								      rows[i].val, NULL}),
			     2);
		if (!strstr(err, rows[i].want))
			FAIL("stderr lacks \"%s\": %s", rows[i].want, err);
	}
	ty_test_context(NULL);
}


TY_TEST(restart_kills_orphans)
{
	const json_t *d, *hb;
	pid_t p0, p1;

	setup();
	send_msg(PROTO_LAUNCH, 1010, EPOCH, launch_data(2, "sleep 60 & wait"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1010, 1) != NULL);
	p0 = rank_pid(1010, 1);
	p1 = rank_pid(1010, 2);
	REQUIRE(p0 > 1 && p1 > 1);
	stop_executor(SIGKILL);
	CHECK(group_live(p0) >= 1 && group_live(p1) >= 1); /* detached: they outlive it */

	start_executor();
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1010, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")), "executor restarted");
	CHECK_INT_EQ(group_live(p0), 0);
	CHECK_INT_EQ(group_live(p1), 0);

	/* finished attempts survive the restart: a late launch of one is ignored */
	send_msg(PROTO_LAUNCH, 1001, EPOCH, launch_data(1, "true"));
	send_msg(PROTO_LAUNCH, 1011, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1011, 1) != NULL);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1001), 2);
	REQUIRE((hb = wait_heartbeat_finished(1011)) != NULL);
	CHECK(in_list(json_object_get(hb, "finished"), 1010));
	CHECK(in_list(json_object_get(hb, "finished"), 1001));
	/* offsets were committed: the malformed messages were not read again */
	CHECK_INT_EQ(counter(hb, "malformed"), 0);
}

/*
 * Ranks that finish while no executor runs: their shims' exit files tell
 * the next boot, which reports the attempt as finished (not lost).
 */
TY_TEST(ranks_that_finish_while_the_executor_is_down_are_reported_finished)
{
	const json_t *d;
	size_t boots;
	pid_t p0;

	setup();
	send_msg(PROTO_LAUNCH, 1018, EPOCH, launch_data(2, "sleep 1"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1018, 1) != NULL);
	p0 = rank_pid(1018, 1);
	stop_executor(SIGKILL);
	for (int i = 0; i < 100 && group_live(p0) > 0; i++)
		usleep(100 * 1000);
	usleep(500 * 1000);
	boots = count_of(PROTO_REGISTER, 0);
	start_executor();
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1018, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")),
		     "all 2 local rank(s) exited with code 0 (while the executor was down)");
	/* and the new boot's register says so, for the scheduler to apply before its losses */
	REQUIRE((d = wait_msg(PROTO_REGISTER, 0, boots + 1)) != NULL);
	CHECK(in_list(json_object_get(d, "finished"), 1018));
}

/* ---- authenticity (docs/dispatch.md, "Authenticity") ---- */

#define REJECTED(why) "trainyard_executor_rejected_messages_total{reason=\"" why "\"}"

/* A dispatch message for this node as JSON text (scratch); data uses ' for ". */
static const char *msg_text(enum proto_type t, int64_t job, int64_t epoch, int64_t seq,
			    const char *data)
{
	struct proto_msg m = {.type = t, .job = job, .attempt = 1, .epoch = epoch, .seq = seq};
	struct ty_err err = {0};
	const char *out;
	char *buf = NULL;
	size_t len;

	snprintf(m.node, sizeof(m.node), "%s", T.node);
	m.data = json_loads(ty_test_jf("%s", data), 0, NULL);
	REQUIRE(m.data != NULL);
	REQUIRE_INT_EQ(proto_encode(&buf, &len, &m, &err), 0);
	json_decref(m.data);
	out = ty_test_strf("%s", buf);
	free(buf);
	return out;
}

static double metric_delta(const char *after, const char *before, const char *series)
{
	double b = metric(before, series);

	return metric(after, series) - (b > 0 ? b : 0);
}

TY_TEST(forged_dispatch_runs_nothing)
{
	const char *other = ty_test_strf("%s/other.pem", T.dir), *before, *after, *text, *real;
	struct ty_ed25519_key *k = NULL;
	char sig[TY_ED25519_SIG_HEX_LEN + 1];
	struct ty_err err = {0};
	const int64_t huge = (int64_t)1 << 40;

	setup();
	REQUIRE_INT_EQ(ty_ed25519_key_generate(other, ty_test_strf("%s.pub", other), &err), 0);
	REQUIRE_INT_EQ(ty_ed25519_key_load(&k, other, true, &err), 0);
	before = scrape_metrics();
	/* unsigned: a launch, and one with a huge epoch that would silence the scheduler */
	text = msg_text(PROTO_LAUNCH, 1950, EPOCH, ++T.seq, launch_data(1, "touch forged"));
	produce_sig(text, strlen(text), NULL);
	text = msg_text(PROTO_LAUNCH, 1951, huge, ++T.seq, launch_data(1, "touch forged"));
	produce_sig(text, strlen(text), NULL);
	/* signed, but with another key: the same two */
	text = msg_text(PROTO_LAUNCH, 1952, EPOCH, ++T.seq, launch_data(1, "touch forged"));
	REQUIRE_INT_EQ(proto_sign(sig, k, text, strlen(text)), 0);
	produce_sig(text, strlen(text), sig);
	text = msg_text(PROTO_KILL, 1952, huge, ++T.seq, "{'reason':'cancel','grace_seconds':1}");
	REQUIRE_INT_EQ(proto_sign(sig, k, text, strlen(text)), 0);
	produce_sig(text, strlen(text), sig);
	/* the scheduler's signature of another message, and one that is not hex */
	text = msg_text(PROTO_LAUNCH, 1953, EPOCH, ++T.seq, launch_data(1, "touch forged"));
	real = msg_text(PROTO_LAUNCH, 1953, EPOCH, T.seq, launch_data(1, "true"));
	produce_sig(text, strlen(text), sign(real, strlen(real)));
	produce_sig(text, strlen(text), "zz");
	/* the scheduler's next launch still runs: no epoch was taken from the forgeries */
	send_msg(PROTO_LAUNCH, 1954, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1954, 1) != NULL);
	after = scrape_metrics();
	for (int64_t job = 1950; job <= 1953; job++) {
		ty_test_context("job %lld", (long long)job);
		CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, job), 0);
		CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, job), 0);
		CHECK(access(ty_test_strf("%s/attempts/%lld.1", T.state, (long long)job), F_OK) !=
		      0);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(metric_delta(after, before, REJECTED("unsigned")), 2);
	CHECK_INT_EQ(metric_delta(after, before, REJECTED("bad_signature")), 4);
	CHECK(log_has("(unsigned): no 'ty-sig' header"));
	CHECK(log_has("(bad_signature): its 'ty-sig' header is not the scheduler's signature"));
	CHECK(!log_has(ty_test_strf("epoch %lld", (long long)huge)));
	ty_ed25519_key_free(k);
}

TY_TEST(replayed_dispatch_does_not_act_twice)
{
	const char *launch, *kill_msg, *lsig, *ksig, *before, *after;

	setup();
	launch = msg_text(PROTO_LAUNCH, 1960, EPOCH, ++T.seq, launch_data(1, "sleep 60 & wait"));
	lsig = sign(launch, strlen(launch));
	produce_sig(launch, strlen(launch), lsig);
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1960, 1) != NULL);
	kill_msg =
	    msg_text(PROTO_KILL, 1960, EPOCH, ++T.seq, "{'reason':'cancel','grace_seconds':1}");
	ksig = sign(kill_msg, strlen(kill_msg));
	produce_sig(kill_msg, strlen(kill_msg), ksig);
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1960, 1) != NULL);

	/* byte for byte again, validly signed: refused as replays */
	before = scrape_metrics();
	produce_sig(launch, strlen(launch), lsig);
	produce_sig(kill_msg, strlen(kill_msg), ksig);
	send_msg(PROTO_LAUNCH, 1961, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1961, 1) != NULL);
	after = scrape_metrics();
	CHECK_INT_EQ(metric_delta(after, before, REJECTED("replayed")), 2);

	/* and after a restart: the guard is kept in state.json */
	stop_executor(SIGTERM);
	start_executor();
	produce_sig(launch, strlen(launch), lsig);
	produce_sig(kill_msg, strlen(kill_msg), ksig);
	send_msg(PROTO_LAUNCH, 1962, EPOCH, launch_data(1, "true"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_EXITED, 1962, 1) != NULL);
	CHECK_INT_EQ(metric(scrape_metrics(), REJECTED("replayed")), 2);
	CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, 1960), 1);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, 1960), 1);
	CHECK(log_has("(replayed): 'kill' of job 1960 attempt 1"));
}

TY_TEST(start_refused_without_keys)
{
	const char *garbage = ty_test_strf("%s/garbage.pem", T.dir);
	const char *badkey = ty_test_strf("%s/bad-node.key", T.dir);
	const char *missing = ty_test_strf("%s/missing.pem", T.dir);
	const struct {
		const char *pubkey, *node_key, *want;
	} cases[] = {
	    {NULL, "K", "no dispatch key: set --dispatch-pubkey"},
	    {garbage, "K",
	     ty_test_strf("--dispatch-pubkey: '%s' holds no public or private key in PEM form",
			  garbage)},
	    {missing, "K", ty_test_strf("cannot open the key file '%s'", missing)},
	    {ty_test_dispatch_key(), "K", "holds the scheduler's private key"},
	    {"P", NULL, "no node key: set --node-key-file"},
	    {"P", badkey,
	     ty_test_strf("--node-key-file: node key file '%s' does not hold a node key", badkey)},
	    {"P", missing, ty_test_strf("cannot read node key file '%s'", missing)},
	};
	FILE *f;

	setup();
	REQUIRE((f = fopen(garbage, "w")) != NULL);
	fputs("-----BEGIN PUBLIC KEY-----\nnot a key\n-----END PUBLIC KEY-----\n", f);
	fclose(f);
	REQUIRE((f = fopen(badkey, "w")) != NULL);
	fputs("not-hex\n", f);
	fclose(f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[16];
		char *err;
		int n = 0;

		ty_test_context("case %zu", i);
		argv[n++] = T.bin;
		argv[n++] = "--state-dir";
		argv[n++] = T.state;
		argv[n++] = "--kafka-bootstrap";
		argv[n++] = "127.0.0.1:9";
		argv[n++] = "--log-pubkey";
		argv[n++] = ty_test_log_pubkey();
		if (cases[i].pubkey) {
			argv[n++] = "--dispatch-pubkey";
			argv[n++] = !strcmp(cases[i].pubkey, "P") ? ty_test_dispatch_pubkey()
								  : cases[i].pubkey;
		}
		if (cases[i].node_key) {
			argv[n++] = "--node-key-file";
			argv[n++] = !strcmp(cases[i].node_key, "K") ? ty_test_node_key_file(T.node)
								    : cases[i].node_key;
		}
		argv[n] = NULL;
		CHECK_INT_EQ(run_executor(&err, argv), 2);
		if (!strstr(err, cases[i].want))
			FAIL("stderr lacks \"%s\": %s", cases[i].want, err);
	}
	ty_test_context(NULL);
}

TY_TEST(sigterm_stops_cleanly)
{
	const char *fifo;
	const json_t *d;
	int status;
	pid_t p0;

	setup();
	REQUIRE(T.pid != 0);
	send_msg(PROTO_LAUNCH, 1013, EPOCH, launch_data(1, "sleep 60 & wait"));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 1013, 1) != NULL);
	p0 = rank_pid(1013, 1);
	REQUIRE(p0 > 1);
	/* and one whose resume checkpoint is being verified (blocked on a FIFO) */
	fifo = blocking_ckpt(1050);
	send_msg(PROTO_LAUNCH, 1050, EPOCH, launch_data(1, "touch ran"));
	CHECK(wait_heartbeats_running(1050, 1));
	kill(T.pid, SIGTERM);
	/* reported at once; the executor exits once the verification lets go */
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1050, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")), "executor stopped");
	unblock_fifo(fifo);
	status = reap(20000);
	CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (status != -1 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		ty_test_note("executor wait status 0x%x", (unsigned)status);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1013, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "system");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")), "executor stopped");
	CHECK_INT_EQ(group_live(p0), 0);
}

/*
 * What register reports allocatable is decided before the executor
 * connects: a reserve that leaves nothing stops it with a message naming
 * the option; --cpus / --memory-mb are checked like every option.
 */
TY_TEST(a_reserve_that_leaves_nothing_is_refused)
{
	static const struct {
		const char *args, *want;
	} rows[] = {
	    {"--reserve-cpus 1000000", "trainyard-executor: --reserve-cpus 1000000 leaves no CPUs of "
				       "this node's "},
	    {"--reserve-memory-mb 1099511627776",
	     "trainyard-executor: --reserve-memory-mb 1099511627776 leaves no MiB of memory of "
	     "this node's "},
	    {"--fake-gpus 1 --cpus 0", "option 'cpus'"},
	    {"--fake-gpus 1 --memory-mb -1", "option 'memory-mb'"},
	};
	const char *bin = getenv("TY_EXECUTOR_BIN");
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	REQUIRE(bin != NULL);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *err = ty_test_strf("%s/ty-exec-reserve-%d-%zu.err", tmp, (int)getpid(), i);
		int status = system(ty_test_strf(
		    "'%s' --node-id n1 --kafka-bootstrap 127.0.0.1:9 --state-dir '%s' --log-pubkey '%s' "
		    "--dispatch-pubkey '%s' --node-key-file '%s' %s 2>'%s' >/dev/null",
		    bin, tmp, ty_test_log_pubkey(), ty_test_dispatch_pubkey(),
		    ty_test_node_key_file("n1"), rows[i].args, err));
		FILE *f = fopen(err, "r");
		char line[512] = "";
		bool found = false;

		ty_test_context("%s", rows[i].args);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
		REQUIRE(f != NULL);
		while (!found && fgets(line, sizeof(line), f))
			found = strstr(line, rows[i].want) != NULL;
		fclose(f);
		if (!found)
			FAIL("no line with '%s' in %s", rows[i].want, err);
		else
			unlink(err);
	}
}

/*
 * ---- checkpoint tiering against s3rver behind tests/s3/sigv4-gate.js, which
 * checks every request's SigV4 signature (tests/run installs both) ----
 */

#define S3_SECRET "tier-test-secret" /* the gate's; S3RVER is the only key id s3rver knows */
#define SHA256_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA256_HELLO "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

static struct {
	pid_t pid;
	char url[128];
	char data[4096];
} S3;

static void s3_stop(void)
{
	if (S3.pid > 0) {
		kill(-S3.pid, SIGTERM);
		kill(S3.pid, SIGTERM);
		waitpid(S3.pid, NULL, 0);
	}
	S3.pid = 0;
}

/* A credentials file (--tier-credentials-file's format) in T.dir; its path. */
static const char *s3_creds(const char *key_id, const char *secret)
{
	const char *creds = ty_test_strf("%s/s3-%s-%s.json", T.dir, key_id, secret);

	REQUIRE(system(ty_test_strf("printf '{\"access_key_id\": \"%s\", \"secret_access_key\": "
				    "\"%s\"}' > '%s'",
				    key_id, secret, creds)) == 0);
	return creds;
}

/* The gate and its s3rver on a port of its choosing, with bucket ckpt; its URL in S3.url. */
static void s3_start(void)
{
	const char *gate = getenv("TY_S3_GATE");
	const char *log = ty_test_strf("%s/s3.log", T.dir);
	const char *creds;
	int64_t end = now_ms() + WAIT_MS;
	int port = 0;

	REQUIRE(gate != NULL);
	s3_stop(); /* a case that failed half-way left it */
	ty_test_on(TY_TEST_TEARDOWN, s3_stop);
	creds = s3_creds("S3RVER", S3_SECRET);
	snprintf(S3.data, sizeof(S3.data), "%s/s3", T.dir);
	unlink(log); /* an earlier one's port is not this one's */
	fflush(stdout);
	S3.pid = fork();
	REQUIRE(S3.pid >= 0);
	if (S3.pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		setpgid(0, 0);
		execlp("node", "node", gate, "--credentials-file", creds, "--directory", S3.data,
		       "--port", "0", "--bucket", "ckpt", (char *)NULL);
		_exit(127);
	}
	while (!port && now_ms() < end) {
		FILE *f = fopen(log, "r");
		char line[256];

		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "sigv4-gate listening on 127.0.0.1:%d", &port) == 1)
				break;
		if (f)
			fclose(f);
		if (!port)
			usleep(50000);
	}
	if (!port)
		FAIL("the S3 gate did not start: %s", read_text(log));
	REQUIRE(port > 0);
	snprintf(S3.url, sizeof(S3.url), "http://127.0.0.1:%d", port);
}

/*
 * curl's answer to a request of key of bucket ckpt signed with secret (NULL:
 * unsigned) and extra curl arguments: "STATUS CODE" (CODE: the error's, or -).
 */
static const char *s3_curl(const char *secret, const char *key, const char *args)
{
	const char *out = ty_test_strf("%s/s3-answer", T.dir);
	const char *sign =
	    secret ? ty_test_strf("--aws-sigv4 aws:amz:us-east-1:s3 --user 'S3RVER:%s'", secret)
		   : "";
	const char *body;
	const char *c0, *c1;
	int status = 0;

	/* curl before 8 sends no x-amz-content-sha256: an empty body's, unless args has one */
	REQUIRE(system(ty_test_strf("curl -s -o '%s.body' -w '%%{http_code}' %s %s %s '%s/ckpt/%s' "
				    "> '%s'",
				    out, sign,
				    strstr(args, "x-amz-content-sha256")
					? ""
					: "-H 'x-amz-content-sha256: " SHA256_EMPTY "'",
				    args, S3.url, key, out)) == 0);
	REQUIRE(sscanf(read_text(out), "%d", &status) == 1);
	body = read_text(ty_test_strf("%s.body", out));
	c0 = strstr(body, "<Code>");
	c1 = c0 ? strstr(c0, "</Code>") : NULL;
	if (!c0 || !c1)
		return ty_test_strf("%d -", status);
	return ty_test_strf("%d %.*s", status, (int)(c1 - c0 - 6), c0 + 6);
}

/* Whether the store holds key of bucket ckpt (a signed read). */
static bool s3_has(const char *key)
{
	const char *answer = s3_curl(S3_SECRET, key, "");

	return !strcmp(answer, "200 -");
}

/* Restart the executor with tiering to endpoint, as access key id with secret. */
static void tier_executor(const char *endpoint, const char *key_id, const char *secret)
{
	const char *creds = s3_creds(key_id, secret);

	stop_executor(SIGTERM);
	T.extra = (const char *const[]){"--tier-endpoint", ty_test_strf("%s", endpoint),
					"--tier-bucket",   "ckpt",
					"--tier-credentials-file", creds,
					"--tier-timeout-ms", "2000",
					NULL};
	start_executor();
}

/* A launch of job as attempt (send_msg's are all attempt 1). */
static void launch_attempt(int64_t job, int64_t attempt, const char *data)
{
	struct proto_msg m = {.type = PROTO_LAUNCH, .job = job, .attempt = attempt, .epoch = EPOCH,
			      .seq = ++T.seq};
	struct ty_err err = {0};
	char *buf = NULL;
	size_t len;

	snprintf(m.node, sizeof(m.node), "%s", T.node);
	m.data = json_loads(ty_test_jf("%s", data), 0, NULL);
	REQUIRE(m.data != NULL);
	REQUIRE_INT_EQ(proto_encode(&buf, &len, &m, &err), 0);
	json_decref(m.data);
	produce_raw(buf, len);
	free(buf);
}

/* The n-th message of type t of job's attempt, waiting for it. */
static const json_t *wait_attempt(enum proto_type t, int64_t job, int64_t attempt, size_t n)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		size_t seen = 0;

		for (size_t i = 0; i < T.ngot; i++)
			if (T.got[i].type == t && T.got[i].job == job &&
			    T.got[i].attempt == attempt && ++seen == n)
				return T.got[i].data;
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

/* The n-th checkpoint_tier event of job that moved something or failed to, waiting for it. */
static const json_t *wait_move(int64_t job, size_t n)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		size_t seen = 0;

		for (size_t i = 0; i < T.ngot; i++) {
			const json_t *d = T.got[i].data;
			const char *st = str_of(d, "status");

			if (T.got[i].type == PROTO_CHECKPOINT_TIER && T.got[i].job == job &&
			    json_object_get(d, "moved") &&
			    (json_integer_value(json_object_get(d, "moved")) > 0 ||
			     (st && !strcmp(st, "error"))) &&
			    ++seen == n)
				return d;
		}
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

TY_TEST(tiering_moves_old_checkpoints_and_a_resume_restores_one)
{
	const char *ck, *dir;
	const json_t *d;

	setup();
	ck = ty_test_strf("%s/checkpoints/job-1501", T.state);
	dir = ty_test_strf("%s/attempts/1501.1", T.state);
	s3_start();
	tier_executor(S3.url, "S3RVER", S3_SECRET);
	/* keep 1 locally; the store keeps its newest one and every 2nd step */
	send_msg(PROTO_LAUNCH, 1501, EPOCH,
		 launch_extra(1,
			      ty_test_strf("for s in 1 2 3 4; do sh %s $s; "
					   "while [ ! -e seen-$s ]; do sleep 0.05; done; done",
					   T.ckpt_sh),
			      "'checkpoint_keep':1,'checkpoint_keep_every':2,"
			      "'checkpoint_tier':true"));
	for (int s = 1; s <= 4; s++) {
		ty_test_context("step %d", s);
		REQUIRE((d = wait_msg(PROTO_CHECKPOINT_WRITTEN, 1501, (size_t)s)) != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), s);
		if (s > 1) {
			/* step s-1 moved: verified in the store before it went locally */
			REQUIRE((d = wait_move(1501, (size_t)s - 1)) != NULL);
			CHECK_STR_EQ(str_of(d, "status"), "ok");
			CHECK_INT_EQ(json_integer_value(json_object_get(d, "moved")), 1);
			CHECK(json_integer_value(json_object_get(d, "store_bytes")) > 0);
			CHECK(s3_has(ty_test_strf("jobs/1501/step-%d/MANIFEST.json", s - 1)));
			CHECK(s3_has(ty_test_strf("jobs/1501/step-%d/w", s - 1)));
		}
		REQUIRE(system(ty_test_strf("touch '%s/work/seen-%d'", dir, s)) == 0);
	}
	ty_test_context(NULL);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1501, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	REQUIRE(system(ty_test_strf("ls '%s' | tr '\\n' ' ' > '%s/ls'", ck, T.dir)) == 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/ls", T.dir)), "step-4 ");
	/* the store: its newest (3) and every 2nd (2); step 1 was deleted there */
	CHECK(s3_has("jobs/1501/step-3/MANIFEST.json"));
	CHECK(s3_has("jobs/1501/step-2/MANIFEST.json"));
	CHECK(!s3_has("jobs/1501/step-1/MANIFEST.json"));
	CHECK(!s3_has("jobs/1501/step-1/w"));
	CHECK(s3_has("jobs/1501/index.json"));
	/* where the checkpoints are: step 4 locally ("weights 4" + its manifest), 2 and 3 stored */
	d = wait_move(1501, 3);
	REQUIRE(d != NULL);
	CHECK(json_integer_value(json_object_get(d, "local_bytes")) > 9);
	CHECK(json_integer_value(json_object_get(d, "store_bytes")) > 18);

	/* the local copies lost: the next attempt resumes from the store's newest, verified */
	REQUIRE(system(ty_test_strf("rm -rf '%s/step-4'", ck)) == 0);
	launch_attempt(1501, 2,
		       launch_extra(1, "echo \"$TRAINYARD_RESUME_FROM\" > resume",
				    "'checkpoint_keep':1,'checkpoint_keep_every':2,"
				    "'checkpoint_tier':true"));
	REQUIRE((d = wait_attempt(PROTO_CHECKPOINT_TIER, 1501, 2, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "status"), "ok");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "restored")), 3);
	REQUIRE((d = wait_attempt(PROTO_ATTEMPT_RUNNING, 1501, 2, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(d, "resume"), "step")), 3);
	REQUIRE((d = wait_attempt(PROTO_ATTEMPT_EXITED, 1501, 2, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/attempts/1501.2/work/resume", T.state)),
		     ty_test_strf("%s/step-3\n", ck));
	CHECK_STR_EQ(read_text(ty_test_strf("%s/step-3/w", ck)), "weights 3");
	s3_stop();
}

TY_TEST(tiering_refused_or_down_keeps_local_copies_reports_and_retries)
{
	static const struct {
		const char *name;
		int64_t job;
		int store_up;	    /* 1: the gate; 0: a closed port */
		const char *key_id; /* the credentials */
		const char *secret;
		const char *error; /* in the checkpoint_tier event */
	} rows[] = {
	    {"key id refused", 1511, 1, "WRONGKEY", S3_SECRET, "HTTP 403 InvalidAccessKeyId"},
	    {"store down", 1512, 0, "S3RVER", S3_SECRET, "Couldn't connect to server"},
	    /* the right key id: only a store that checks signatures refuses it */
	    {"secret refused", 1513, 1, "S3RVER", "wrong-secret", "HTTP 403 SignatureDoesNotMatch"},
	};

	setup();
	s3_start();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *ck = ty_test_strf("%s/checkpoints/job-%lld", T.state,
					      (long long)rows[i].job);
		const char *dir = ty_test_strf("%s/attempts/%lld.1", T.state,
					       (long long)rows[i].job);
		const json_t *d;

		ty_test_context("%s", rows[i].name);
		tier_executor(rows[i].store_up ? S3.url : "http://127.0.0.1:1", rows[i].key_id,
			      rows[i].secret);
		send_msg(PROTO_LAUNCH, rows[i].job, EPOCH,
			 launch_extra(1,
				      ty_test_strf("for s in 1 2 3; do sh %s $s; done; "
						   "while [ ! -e done ]; do sleep 0.05; done",
						   T.ckpt_sh),
				      "'checkpoint_keep':1,'checkpoint_tier':true"));
		/* the resume's look into the store failed first: reported, the job started */
		REQUIRE((d = wait_msg(PROTO_CHECKPOINT_TIER, rows[i].job, 1)) != NULL);
		CHECK_STR_EQ(str_of(d, "status"), "error");
		CHECK(json_is_null(json_object_get(d, "restored")));
		REQUIRE((d = wait_move(rows[i].job, 1)) != NULL);
		CHECK_STR_EQ(str_of(d, "status"), "error");
		CHECK(strstr(str_of(d, "error"), rows[i].error) != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "moved")), 0);
		CHECK(json_integer_value(json_object_get(d, "retry_ms")) > 0);
		/* tried again after the backoff, still failing: every copy is still here */
		REQUIRE((d = wait_move(rows[i].job, 2)) != NULL);
		CHECK_STR_EQ(str_of(d, "status"), "error");
		CHECK(json_integer_value(json_object_get(d, "retry_ms")) >
		      json_integer_value(json_object_get(wait_move(rows[i].job, 1), "retry_ms")));
		CHECK_INT_EQ(system(ty_test_strf("test -f '%s/step-1/w' && test -f '%s/step-2/w' "
						 "&& test -f '%s/step-3/w'",
						 ck, ck, ck)),
			     0);
		CHECK(!s3_has(ty_test_strf("jobs/%lld/step-1/MANIFEST.json",
					   (long long)rows[i].job)));
		/* the job goes on */
		REQUIRE(system(ty_test_strf("touch '%s/work/done'", dir)) == 0);
		REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, rows[i].job, 1)) != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	}
	ty_test_context(NULL);
	s3_stop();
	stop_executor(SIGTERM);
	T.extra = NULL;
	start_executor();
}

/*
 * The store checks every request's signature (tests/s3/sigv4-gate.js):
 * unsigned, wrongly signed or with a body that is not the signed one, it
 * is refused with S3's error and nothing is stored.
 */
TY_TEST(tiering_store_refuses_unsigned_and_badly_signed_requests)
{
	static const struct {
		const char *name;
		const char *secret; /* NULL: unsigned */
		const char *key;
		const char *args;
		const char *want; /* "STATUS CODE" */
	} rows[] = {
	    {"signed write", S3_SECRET, "a",
	     "-X PUT --data-binary hello -H 'x-amz-content-sha256: " SHA256_HELLO "'", "200 -"},
	    {"signed read", S3_SECRET, "a", "", "200 -"},
	    {"signed read, unsigned payload", S3_SECRET, "a",
	     "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'", "200 -"},
	    {"unsigned read", NULL, "a", "", "403 AccessDenied"},
	    {"wrong secret", "wrong-secret", "a", "", "403 SignatureDoesNotMatch"},
	    {"wrong secret, unsigned payload", "wrong-secret", "a",
	     "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD'", "403 SignatureDoesNotMatch"},
	    {"unsigned write", NULL, "b", "-X PUT --data-binary hello", "403 AccessDenied"},
	    {"wrong secret write", "wrong-secret", "b",
	     "-X PUT --data-binary hello -H 'x-amz-content-sha256: " SHA256_HELLO "'",
	     "403 SignatureDoesNotMatch"},
	    {"body not the signed one", S3_SECRET, "b",
	     "-X PUT --data-binary hellp -H 'x-amz-content-sha256: " SHA256_HELLO "'",
	     "400 XAmzContentSHA256Mismatch"},
	    {"a made-up signature", NULL, "a",
	     "-H 'x-amz-date: 20260101T000000Z' -H 'Authorization: AWS4-HMAC-SHA256 "
	     "Credential=S3RVER/20260101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, "
	     "Signature=0000000000000000000000000000000000000000000000000000000000000000'",
	     "403 SignatureDoesNotMatch"},
	    {"a malformed Authorization", NULL, "a", "-H 'Authorization: AWS4-HMAC-SHA256 x'",
	     "400 AuthorizationHeaderMalformed"},
	    {"nothing of the refused writes stored", S3_SECRET, "b", "", "404 NoSuchKey"},
	};

	setup();
	s3_start();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].name);
		CHECK_STR_EQ(s3_curl(rows[i].secret, rows[i].key, rows[i].args), rows[i].want);
	}
	ty_test_context(NULL);
	s3_stop();
}

/*
 * A launch names a stored checkpoint whose local copy is gone while a newer
 * one is local: that one comes back from the store and the ranks resume
 * from it; one the store does not have either fails the attempt.
 */
TY_TEST(tiering_restores_the_named_checkpoint_or_fails_the_attempt)
{
	const char *ck = ty_test_strf("%s/checkpoints/job-1521", T.state);
	const char *dir = ty_test_strf("%s/attempts/1521.1", T.state);
	const char *policy = "'checkpoint_keep':1,'checkpoint_keep_every':2,'checkpoint_tier':true";
	const char *script = "echo \"$TRAINYARD_RESUME_FROM\" > resume; "
			     "cat \"$TRAINYARD_RESUME_FROM/w\" > resumed-w";
	char digest[3][65];
	const json_t *d;

	setup();
	s3_start();
	tier_executor(S3.url, "S3RVER", S3_SECRET);
	send_msg(PROTO_LAUNCH, 1521, EPOCH,
		 launch_extra(1,
			      ty_test_strf("for s in 1 2 3; do sh %s $s; "
					   "while [ ! -e seen-$s ]; do sleep 0.05; done; done",
					   T.ckpt_sh),
			      policy));
	for (int s = 1; s <= 3; s++) {
		ty_test_context("step %d", s);
		REQUIRE((d = wait_msg(PROTO_CHECKPOINT_WRITTEN, 1521, (size_t)s)) != NULL);
		REQUIRE(str_of(d, "digest") != NULL);
		snprintf(digest[s - 1], sizeof(digest[s - 1]), "%s", str_of(d, "digest"));
		if (s > 1)
			REQUIRE((d = wait_move(1521, (size_t)s - 1)) != NULL);
		REQUIRE(system(ty_test_strf("touch '%s/work/seen-%d'", dir, s)) == 0);
	}
	ty_test_context(NULL);
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 1521, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	/* step 3 here; step 2 only in the store (its newest and a 2nd); step 1 nowhere */
	REQUIRE(system(ty_test_strf("ls '%s' | tr '\\n' ' ' > '%s/ls'", ck, T.dir)) == 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/ls", T.dir)), "step-3 ");
	CHECK(s3_has("jobs/1521/step-2/MANIFEST.json"));
	CHECK(!s3_has("jobs/1521/step-1/MANIFEST.json"));

	/* the scheduler names step 2: restored and resumed from, step 3 ignored */
	launch_attempt(1521, 2,
		       launch_extra(1, script,
				    ty_test_strf("%s,'resume':{'step':2,'digest':'%s',"
						 "'path':'%s/step-2'}",
						 policy, digest[1], ck)));
	REQUIRE((d = wait_attempt(PROTO_CHECKPOINT_TIER, 1521, 2, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "status"), "ok");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "restored")), 2);
	REQUIRE((d = wait_attempt(PROTO_ATTEMPT_RUNNING, 1521, 2, 1)) != NULL);
	d = json_object_get(d, "resume");
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), 2);
	CHECK_STR_EQ(str_of(d, "digest"), digest[1]);
	CHECK_STR_EQ(str_of(d, "path"), ty_test_strf("%s/step-2", ck));
	REQUIRE((d = wait_attempt(PROTO_ATTEMPT_EXITED, 1521, 2, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(read_text(ty_test_strf("%s/attempts/1521.2/work/resume", T.state)),
		     ty_test_strf("%s/step-2\n", ck));
	CHECK_STR_EQ(read_text(ty_test_strf("%s/attempts/1521.2/work/resumed-w", T.state)),
		     "weights 2");
	CHECK(access(ty_test_strf("%s/step-3/MANIFEST.json", ck), F_OK) == 0);

	/* the scheduler names step 1, which the store deleted: the attempt fails, never step 3 */
	launch_attempt(1521, 3,
		       launch_extra(1, script,
				    ty_test_strf("%s,'resume':{'step':1,'digest':'%s',"
						 "'path':'%s/step-1'}",
						 policy, digest[0], ck)));
	REQUIRE((d = wait_attempt(PROTO_CHECKPOINT_TIER, 1521, 3, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "status"), "error");
	CHECK(json_is_null(json_object_get(d, "restored")));
	CHECK(strstr(str_of(d, "error"), "jobs/1521/step-1/MANIFEST.json: HTTP 404 NoSuchKey") !=
	      NULL);
	REQUIRE((d = wait_attempt(PROTO_ATTEMPT_EXITED, 1521, 3, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "failure_class"), "system");
	CHECK_STR_EQ(str_of(d, "message"),
		     "checkpoints: the resume checkpoint step 1 does not match the launch: "
		     "no MANIFEST.json (torn)");
	REQUIRE((d = wait_attempt(PROTO_CHECKPOINT_WRITTEN, 1521, 3, 1)) != NULL);
	CHECK_STR_EQ(str_of(d, "status"), "rejected");
	CHECK_STR_EQ(str_of(d, "digest"), digest[0]);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_RUNNING, 1521), 2);
	CHECK(access(ty_test_strf("%s/attempts/1521.3/work/resume", T.state), F_OK) != 0);
	s3_stop();
}
