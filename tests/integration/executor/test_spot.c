/*
 * trainyard-executor's spot notice poller against fake metadata servers
 * on loopback (libmicrohttpd in this process, speaking the three clouds'
 * real formats), with the real broker: the test plays the scheduler as
 * test_executor.c does. A notice must become one preempt_notice and the
 * checkpoint signal in the ranks; an endpoint that stalls or refuses must
 * never stop heartbeats or dispatch.
 * Needs TY_TEST_KAFKA_BOOTSTRAP and TY_EXECUTOR_BIN (tests/run sets both).
 */
#include "proto.h"
#include "ty_buf.h"
#include "ty_kafka.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <librdkafka/rdkafka.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 15000 /* generous upper bound for anything to arrive */
#define EPOCH 5

struct got {
	enum proto_type type;
	int64_t job;
	json_t *data;
};

static struct {
	bool ready;
	char bootstrap[4096];
	const char *bin;
	char dir[2048];
	char node[64]; /* this case's node: each case runs its own executor */
	char state[4096];
	char log[4096];
	pid_t pid;
	rd_kafka_t *producer;
	rd_kafka_t *consumer;
	int32_t partitions;
	int64_t seq;
	struct got *got;
	size_t ngot, capgot;
} T;

/* ---- the fake metadata server ---- */

enum provider { AWS, GCP, AZURE };

static struct {
	struct MHD_Daemon *d;
	int port;
	pthread_mutex_t mu;
	enum provider p;
	int notice;	   /* 0: none, 1: the notice */
	int garbage;	   /* gcp: 1 a word that is not TRUE/FALSE, 2 an answer over 64 KiB */
	char time_str[64]; /* aws time / azure NotBefore of the notice */
	int token_gen;	   /* aws: the valid token is "token-<gen>" */
	int tokens;	   /* aws: tokens handed out */
	int unauthorized;  /* aws: 401 answers */
	int polls;	   /* notice requests answered */
	int bad_headers;   /* requests without the provider's metadata header */
	char last_ttl[32]; /* aws: the TTL header of the last token request */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER};

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *type,
			      const char *body)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result ret;

	MHD_add_response_header(r, "Content-Type", type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static const char *hdr(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static enum MHD_Result serve(void *cls, struct MHD_Connection *c, const char *url,
			     const char *method, const char *version, const char *upload,
			     size_t *upload_size, void **con_cls)
{
	static int first;
	char body[1024], tok[32];
	const char *v;
	enum MHD_Result ret;

	if (!*con_cls) {
		*con_cls = &first;
		return MHD_YES;
	}
	*upload_size = 0;
	pthread_mutex_lock(&S.mu);
	switch (S.p) {
	case AWS:
		snprintf(tok, sizeof(tok), "token-%d", S.token_gen);
		if (!strcmp(url, "/latest/api/token") && !strcmp(method, "PUT")) {
			if (!(v = hdr(c, "X-aws-ec2-metadata-token-ttl-seconds"))) {
				S.bad_headers++;
				ret = answer(c, 400, "text/plain", "");
				break;
			}
			snprintf(S.last_ttl, sizeof(S.last_ttl), "%s", v);
			S.tokens++;
			ret = answer(c, 200, "text/plain", tok);
		} else if (!strcmp(url, "/latest/meta-data/spot/instance-action") &&
			   !strcmp(method, "GET")) {
			v = hdr(c, "X-aws-ec2-metadata-token");
			if (!v || strcmp(v, tok)) {
				S.unauthorized++;
				ret = answer(c, 401, "text/plain", "");
				break;
			}
			S.polls++;
			if (!S.notice) {
				ret = answer(c, 404, "text/html",
					     "<?xml version=\"1.0\" encoding=\"iso-8859-1\"?>\n"
					     "<html><title>404 - Not Found</title></html>\n");
				break;
			}
			snprintf(body, sizeof(body),
				 "{\"action\": \"terminate\", \"time\": \"%s\"}", S.time_str);
			ret = answer(c, 200, "text/plain", body);
		} else {
			ret = answer(c, 404, "text/plain", "");
		}
		break;
	case GCP:
		if (strcmp(url, "/computeMetadata/v1/instance/preempted")) {
			ret = answer(c, 404, "text/html", "not found");
			break;
		}
		if (!(v = hdr(c, "Metadata-Flavor")) || strcmp(v, "Google")) {
			S.bad_headers++;
			ret = answer(c, 403, "text/html", "Missing Metadata-Flavor:Google header.");
			break;
		}
		S.polls++;
		if (S.garbage == 1) {
			ret = answer(c, 200, "application/text", "MAYBE");
		} else if (S.garbage == 2) {
			char *big = calloc(70000, 1);

			memset(big, 'F', 69999);
			ret = answer(c, 200, "application/text", big);
			free(big);
		} else {
			ret = answer(c, 200, "application/text", S.notice ? "TRUE" : "FALSE");
		}
		break;
	default:
		v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "api-version");
		if (strcmp(url, "/metadata/scheduledevents") || !v || strcmp(v, "2020-07-01")) {
			ret = answer(c, 400, "application/json", "{\"error\":\"Bad request\"}");
			break;
		}
		if (!(v = hdr(c, "Metadata")) || strcmp(v, "true")) {
			S.bad_headers++;
			ret = answer(c, 400, "application/json",
				     "{\"error\":\"Bad request. Required metadata header not "
				     "specified\"}");
			break;
		}
		S.polls++;
		/* before the notice: planned maintenance, which is not one */
		snprintf(body, sizeof(body),
			 "{\"DocumentIncarnation\":%d,\"Events\":[{\"EventId\":\"%s\","
			 "\"EventStatus\":\"Scheduled\",\"EventType\":\"%s\","
			 "\"ResourceType\":\"VirtualMachine\",\"Resources\":[\"spot-vm-1\"],"
			 "\"NotBefore\":\"%s\",\"Description\":\"\",\"EventSource\":\"Platform\","
			 "\"DurationInSeconds\":-1}]}",
			 S.notice + 1,
			 S.notice ? "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
				  : "A123BC45-1234-5678-AB90-ABCDEF123456",
			 S.notice ? "Preempt" : "Reboot", S.time_str);
		ret = answer(c, 200, "application/json", body);
	}
	pthread_mutex_unlock(&S.mu);
	return ret;
}

static void server_start(enum provider p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	const union MHD_DaemonInfo *info;

	pthread_mutex_lock(&S.mu);
	S.p = p;
	S.notice = S.garbage = 0;
	S.tokens = S.unauthorized = S.polls = S.bad_headers = 0;
	S.token_gen = 1;
	S.time_str[0] = S.last_ttl[0] = '\0';
	pthread_mutex_unlock(&S.mu);
	S.d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, serve, NULL,
			       MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
	REQUIRE(S.d != NULL);
	info = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_BIND_PORT);
	REQUIRE(info != NULL);
	S.port = info->port;
}

static void server_stop(void)
{
	if (S.d)
		MHD_stop_daemon(S.d);
	S.d = NULL;
}

static int server_get(const int *field)
{
	int v;

	pthread_mutex_lock(&S.mu);
	v = *field;
	pthread_mutex_unlock(&S.mu);
	return v;
}

/* ---- the executor ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void dump_log(void)
{
	char line[2048];
	FILE *f = fopen(T.log, "r");

	if (!f)
		return;
	ty_test_note("executor log '%s':", T.log);
	while (fgets(line, sizeof(line), f))
		ty_test_note("| %.*s", (int)strcspn(line, "\n"), line);
	fclose(f);
}

static int reap(int ms)
{
	int64_t end = now_ms() + ms;
	int status;

	while (T.pid) {
		if (waitpid(T.pid, &status, WNOHANG) == T.pid) {
			T.pid = 0;
			return status;
		}
		if (now_ms() > end)
			return -1;
		usleep(10000);
	}
	return -1;
}

/* SIGTERM; the executor's wait status (-1 when it had to be killed). */
static int stop_executor(void)
{
	int status;

	if (!T.pid)
		return -1;
	kill(T.pid, SIGTERM);
	if ((status = reap(15000)) == -1) {
		kill(T.pid, SIGKILL);
		reap(5000);
	}
	return status;
}

static void collect(int ms)
{
	int64_t end = now_ms() + ms;

	do {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(T.consumer, 20);
		struct proto_msg pm;

		if (!m)
			continue;
		if (!m->err && proto_decode(&pm, m->payload ? m->payload : "", m->len, NULL) == 0) {
			if (strcmp(pm.node, T.node) == 0) {
				if (T.ngot == T.capgot) {
					T.capgot = T.capgot ? T.capgot * 2 : 256;
					T.got = realloc(T.got, T.capgot * sizeof(*T.got));
					REQUIRE(T.got != NULL);
				}
				T.got[T.ngot++] =
				    (struct got){pm.type, pm.job, json_incref(pm.data)};
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

static void send_msg(enum proto_type t, int64_t job, const char *data)
{
	struct proto_msg m = {.type = t, .job = job, .attempt = 1, .epoch = EPOCH, .seq = ++T.seq};
	struct ty_err err = {0};
	char *buf = NULL, sig[TY_ED25519_SIG_HEX_LEN + 1];
	size_t len;
	rd_kafka_resp_err_t e;

	snprintf(m.node, sizeof(m.node), "%s", T.node);
	m.data = json_loads(ty_test_jf("%s", data), 0, NULL);
	REQUIRE(m.data != NULL);
	if (proto_encode(&buf, &len, &m, &err))
		FAIL("cannot encode: %s", err.msg);
	json_decref(m.data);
	REQUIRE(buf != NULL);
	/* signed as the scheduler signs it */
	REQUIRE_INT_EQ(proto_sign(sig, ty_test_dispatch_signer(), buf, len), 0);
	e = rd_kafka_producev(T.producer, RD_KAFKA_V_TOPIC(PROTO_TOPIC_DISPATCH),
			      RD_KAFKA_V_PARTITION(proto_node_partition(T.node, T.partitions)),
			      RD_KAFKA_V_KEY(T.node, strlen(T.node)), RD_KAFKA_V_VALUE(buf, len),
			      RD_KAFKA_V_HEADER(PROTO_HDR_SIG, sig, TY_ED25519_SIG_HEX_LEN),
			      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	free(buf);
	REQUIRE_INT_EQ(e, 0);
	REQUIRE_INT_EQ(rd_kafka_flush(T.producer, 10000), 0);
}

/* Launch data for a one-node job of one rank running sh -c script. */
static const char *launch_data(const char *script)
{
	json_t *cmd = json_pack("[s, s, s]", "/bin/sh", "-c", script);
	char *c = json_dumps(cmd, JSON_COMPACT);
	const char *d;

	for (char *p = c; *p; p++)
		if (*p == '"')
			*p = '\'';
	d = ty_test_strf("{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
			 "'first_rank':0,'master_addr':'127.0.0.1','master_port':29400,"
			 "'gpus':[0],'command':%s,'env':{},'launch':'per_gpu'}",
			 c);
	free(c);
	json_decref(cmd);
	return d;
}

/*
 * Start an executor as node "<name>" with these --spot-* arguments (NULL-
 * terminated, at most 8) and wait for its register.
 */
static void start_executor(const char *name, const char *const *spot)
{
	/* the launches this test plays carry no team uid: no containers */
	const char *argv[64] = {T.bin,	"--node-id",	     NULL,	  "--state-dir",
				NULL,	"--kafka-bootstrap", T.bootstrap, "--fake-gpus",
				"1",	"--heartbeat-ms",    "200",	  "--kill-grace-ms",
				"2000", "--log-level",	     "debug",	  "--log-pubkey",
				ty_test_log_pubkey(), "--isolation", "none"};
	int n = 19;
	int64_t end;
	pid_t pid;

	snprintf(T.node, sizeof(T.node), "spot-%s-%d", name, (int)getpid());
	snprintf(T.state, sizeof(T.state), "%s/%s", T.dir, name);
	snprintf(T.log, sizeof(T.log), "%s/%s.log", T.dir, name);
	argv[2] = T.node;
	argv[4] = T.state;
	argv[n++] = "--dispatch-pubkey";
	argv[n++] = ty_test_dispatch_pubkey();
	argv[n++] = "--node-key-file";
	argv[n++] = ty_test_node_key_file(T.node);
	for (int i = 0; spot[i] && n < 62; i++)
		argv[n++] = spot[i];
	fflush(stdout);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		int fd = open(T.log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		int in = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (fd < 0 || in < 0 || dup2(in, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		execv(T.bin, (char **)argv);
		_exit(127);
	}
	T.pid = pid;
	end = now_ms() + WAIT_MS;
	while (!count_of(PROTO_REGISTER, 0)) {
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

	stop_executor();
	server_stop();
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
}

/* Forget the previous case's messages and server. */
static void case_start(void)
{
	for (size_t i = 0; i < T.ngot; i++)
		json_decref(T.got[i].data);
	T.ngot = 0;
	server_stop();
}

static void setup(void)
{
	static const char *const cextra[] = {"fetch.wait.max.ms=10", NULL};
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_topic_t *t;
	struct ty_err err = {0};
	const char *bs = getenv("TY_TEST_KAFKA_BOOTSTRAP"), *tmp = getenv("TY_TEST_TMPDIR");

	if (T.ready) {
		case_start();
		return;
	}
	if (!bs || !*bs || !(T.bin = getenv("TY_EXECUTOR_BIN"))) {
		FAIL("TY_TEST_KAFKA_BOOTSTRAP and TY_EXECUTOR_BIN are not set: run this test "
		     "with tests/run");
		ty_test_abort();
	}
	REQUIRE(ty_kafka_bootstrap(T.bootstrap, sizeof(T.bootstrap), bs, &err) == 0);
	ty_test_on(TY_TEST_TEARDOWN, teardown);
	ty_test_on(TY_TEST_CASE_FAILED, dump_log);
	snprintf(T.dir, sizeof(T.dir), "%s/ty-spot-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	REQUIRE(mkdtemp(T.dir) != NULL);
	T.seq = 1000;
	REQUIRE(ty_kafka_producer_new(&T.producer, T.bootstrap, NULL, &err) == 0);
	t = rd_kafka_topic_new(T.producer, PROTO_TOPIC_DISPATCH, NULL);
	REQUIRE_INT_EQ(rd_kafka_metadata(T.producer, 0, t, &md, 10000), 0);
	T.partitions = md->topics[0].partition_cnt;
	rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);
	REQUIRE(ty_kafka_consumer_new(&T.consumer, T.bootstrap,
				      ty_test_strf("ty-test-spot-%d", (int)getpid()), cextra,
				      &err) == 0);
	l = rd_kafka_topic_partition_list_new(32);
	assign_all(l, PROTO_TOPIC_EVENTS);
	assign_all(l, PROTO_TOPIC_NODES);
	REQUIRE_INT_EQ(rd_kafka_assign(T.consumer, l), 0);
	rd_kafka_topic_partition_list_destroy(l);
	T.ready = true;
}

/* ---- helpers of the cases ---- */

static int file_lines(const char *path)
{
	FILE *f = fopen(path, "r");
	int n = 0, ch;

	if (!f)
		return 0;
	while ((ch = fgetc(f)) != EOF)
		n += ch == '\n';
	fclose(f);
	return n;
}

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

/* Wait until the server answered at least n notice requests. */
static bool wait_polls(int n)
{
	int64_t end = now_ms() + WAIT_MS;

	while (server_get(&S.polls) < n) {
		if (now_ms() > end)
			return false;
		collect(50);
	}
	return true;
}

static bool log_has(const char *text)
{
	FILE *f = fopen(T.log, "r");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, text) != NULL;
	fclose(f);
	return found;
}

static bool wait_log(const char *text)
{
	int64_t end = now_ms() + WAIT_MS;

	while (!log_has(text)) {
		if (now_ms() > end)
			return false;
		collect(50);
	}
	return true;
}

/*
 * The preempt_notice of the first heartbeat carrying one (heartbeats and
 * events are on different topics: an older heartbeat may arrive later).
 */
static const json_t *heartbeat_notice(void)
{
	int64_t end = now_ms() + WAIT_MS;

	for (;;) {
		for (size_t i = 0; i < T.ngot; i++) {
			const json_t *n = json_object_get(T.got[i].data, "preempt_notice");

			if (T.got[i].type == PROTO_HEARTBEAT && n)
				return n;
		}
		if (now_ms() > end)
			return NULL;
		collect(50);
	}
}

/* A rank that notes the checkpoint signal and trains on. */
#define TRAINING "trap \"echo $$ >> ckpt\" USR1; while :; do sleep 0.1; done"

static const char *spot_url(void)
{
	return ty_test_strf("http://127.0.0.1:%d", S.port);
}

/*
 * The common story: a running attempt, polls without a notice, then the
 * notice → one preempt_notice (job 0) with this deadline and the checkpoint
 * signal in the rank; later launches are refused as preempted. Returns the
 * preempt_notice's data.
 */
static size_t metrics_body(char *p, size_t sz, size_t n, void *arg)
{
	ty_buf_append(arg, p, sz * n);
	return sz * n;
}

/* GET <log_url>/metrics of the running executor (its newest register); the body. */
static const char *executor_metrics(void)
{
	const json_t *reg = wait_msg(PROTO_REGISTER, 0, count_of(PROTO_REGISTER, 0));
	const char *url = json_string_value(json_object_get(reg, "log_url"));
	struct ty_buf b = TY_BUF_INIT;
	CURL *c = curl_easy_init();
	const char *out;
	long status = 0;

	REQUIRE(url != NULL && c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, ty_test_strf("%s/metrics", url));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, metrics_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	CHECK_INT_EQ(status, 200);
	out = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return out;
}

/* Whether text holds the line "series value". */
static bool has_sample(const char *text, const char *line)
{
	const char *p = strstr(text, ty_test_strf("%s\n", line));

	return p && (p == text || p[-1] == '\n');
}

static const json_t *notice_story(const char *provider, int64_t job, void (*announce)(void))
{
	const char *dir = ty_test_strf("%s/attempts/%lld.1", T.state, (long long)job);
	const json_t *d;
	int polls;

	send_msg(PROTO_LAUNCH, job, launch_data(TRAINING));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, job, 1) != NULL);
	/* "no notice" answers: nothing happens */
	REQUIRE(wait_polls(server_get(&S.polls) + 3));
	collect(100);
	CHECK_INT_EQ(count_of(PROTO_PREEMPT_NOTICE, 0), 0);
	CHECK_INT_EQ(file_lines(ty_test_strf("%s/work/ckpt", dir)), 0);
	CHECK_INT_EQ(server_get(&S.bad_headers), 0);
	announce();
	REQUIRE((d = wait_msg(PROTO_PREEMPT_NOTICE, 0, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "provider")), provider);
	CHECK(wait_lines(ty_test_strf("%s/work/ckpt", dir), 1));
	/* every later heartbeat repeats it, in case the event is lost */
	CHECK(json_equal(heartbeat_notice(), (json_t *)d));
	/* polled again, the same notice is not reported again, nor signalled */
	polls = server_get(&S.polls);
	REQUIRE(wait_polls(polls + 3));
	collect(100);
	CHECK_INT_EQ(count_of(PROTO_PREEMPT_NOTICE, 0), 1);
	CHECK_INT_EQ(file_lines(ty_test_strf("%s/work/ckpt", dir)), 1);
	CHECK_INT_EQ(count_of(PROTO_ATTEMPT_EXITED, job), 0);
	/* counted once, however often it is polled */
	CHECK(has_sample(executor_metrics(), "trainyard_executor_spot_notices_total 1"));
	/* no new work on a preempting node: requeued by the scheduler, no retry spent */
	send_msg(PROTO_LAUNCH, job + 1, launch_data("true"));
	{
		const json_t *x = wait_msg(PROTO_ATTEMPT_EXITED, job + 1, 1);

		REQUIRE(x != NULL);
		CHECK_STR_EQ(json_string_value(json_object_get(x, "failure_class")), "preempted");
		CHECK_INT_EQ(count_of(PROTO_RANK_STARTED, job + 1), 0);
	}
	/* the scheduler's kill after the grace period ends it as preempted */
	send_msg(PROTO_KILL, job, "{'reason':'preempted','grace_seconds':1}");
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, job, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "preempted");
	CHECK(has_sample(executor_metrics(),
			 "trainyard_executor_attempts_finished_total{failure_class=\"preempted\"} 2"));
	CHECK_INT_EQ(server_get(&S.bad_headers), 0);
	return wait_msg(PROTO_PREEMPT_NOTICE, 0, 1);
}

static void set_notice(const char *time_str)
{
	pthread_mutex_lock(&S.mu);
	snprintf(S.time_str, sizeof(S.time_str), "%s", time_str);
	S.notice = 1;
	pthread_mutex_unlock(&S.mu);
}

/* A wall time two minutes from now in fmt (UTC), and its epoch ms. */
static const char *future(const char *fmt, int64_t *ms)
{
	time_t t = time(NULL) + 120;
	struct tm tm;
	char buf[64];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), fmt, &tm);
	*ms = (int64_t)t * 1000;
	return ty_test_strf("%s", buf);
}

static int64_t aws_deadline;

static void aws_announce(void)
{
	/* the token is revoked too: the poller must refresh it on the 401 */
	pthread_mutex_lock(&S.mu);
	S.token_gen++;
	pthread_mutex_unlock(&S.mu);
	set_notice(future("%Y-%m-%dT%H:%M:%SZ", &aws_deadline));
}

static int64_t gcp_before, gcp_after;

static void gcp_announce(void)
{
	gcp_before = wall_ms();
	set_notice("");
}

static int64_t azure_deadline;

static void azure_announce(void)
{
	set_notice(future("%a, %d %b %Y %H:%M:%S GMT", &azure_deadline));
}

static void check_clean_exit(void)
{
	int status = stop_executor();

	CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(!log_has("still open at exit"));
}

/* ---- cases ---- */

TY_TEST(aws_imdsv2_notice)
{
	const json_t *d;

	setup();
	server_start(AWS);
	start_executor("aws", (const char *[]){"--spot-provider", "aws", "--spot-metadata-url",
					       spot_url(), "--spot-poll-ms", "200", NULL});
	d = notice_story("aws", 2001, aws_announce);
	REQUIRE(d != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "deadline")), aws_deadline);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "action")), "terminate");
	CHECK(strstr(json_string_value(json_object_get(d, "detail")), "terminate") != NULL);
	/* one token at first, a second one after the revocation's 401 */
	CHECK_INT_EQ(server_get(&S.tokens), 2);
	CHECK(server_get(&S.unauthorized) >= 1);
	pthread_mutex_lock(&S.mu);
	CHECK_STR_EQ(S.last_ttl, "21600");
	pthread_mutex_unlock(&S.mu);
	check_clean_exit();
}

TY_TEST(gcp_preempted_notice)
{
	const json_t *d;
	int64_t deadline;

	setup();
	server_start(GCP);
	start_executor("gcp", (const char *[]){"--spot-provider", "gcp", "--spot-metadata-url",
					       spot_url(), "--spot-poll-ms", "200", NULL});
	d = notice_story("gcp", 2011, gcp_announce);
	gcp_after = wall_ms();
	REQUIRE(d != NULL);
	/* GCP gives no time: about 30 s from when the executor saw TRUE */
	deadline = json_integer_value(json_object_get(d, "deadline"));
	CHECK(deadline >= gcp_before + 30000 && deadline <= gcp_after + 30000);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "action")), "preempt");
	check_clean_exit();
}

TY_TEST(azure_preempt_event_notice)
{
	const json_t *d;

	setup();
	server_start(AZURE);
	/* the base URL's trailing slash is tolerated */
	start_executor("azure", (const char *[]){"--spot-provider", "azure", "--spot-metadata-url",
						 ty_test_strf("%s/", spot_url()), "--spot-poll-ms",
						 "200", NULL});
	pthread_mutex_lock(&S.mu);
	snprintf(S.time_str, sizeof(S.time_str), "Sun, 22 Nov 2026 15:45:00 GMT");
	pthread_mutex_unlock(&S.mu);
	d = notice_story("azure", 2021, azure_announce);
	REQUIRE(d != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "deadline")), azure_deadline);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "action")), "Preempt");
	CHECK(strstr(json_string_value(json_object_get(d, "detail")),
		     "C7061BAC-AFDC-4513-B24B-AA5F13A16123") != NULL);
	check_clean_exit();
}

/*
 * The handshake on a notice: the rank answers SIGUSR1 with a checkpoint,
 * which verifies, and the gang is stopped as preempted at once — without
 * it the node would wait until shortly before the notice's deadline (GCP:
 * 30 s), or for the scheduler's kill.
 */
TY_TEST(notice_checkpoint_handshake_stops_at_once)
{
	const char *sh;
	const json_t *d;
	FILE *f;

	setup();
	sh = ty_test_strf("%s/ckpt.sh", T.dir);
	REQUIRE((f = fopen(sh, "w")) != NULL);
	fputs("d=\"$TRAINYARD_CHECKPOINT_DIR/step-9\"\n"
	      "mkdir -p \"$d\" && printf nine > \"$d/w\"\n"
	      "sum=$(sha256sum \"$d/w\" | cut -d' ' -f1)\n"
	      "printf '{\"step\": 9, \"files\": [{\"path\": \"w\", \"size\": 4, \"sha256\": "
	      "\"%s\"}]}' \"$sum\" > \"$d/m.tmp\" && mv \"$d/m.tmp\" \"$d/MANIFEST.json\"\n",
	      f);
	fclose(f);
	server_start(GCP);
	start_executor("gcpck", (const char *[]){"--spot-provider", "gcp", "--spot-metadata-url",
						 spot_url(), "--spot-poll-ms", "200", NULL});
	send_msg(PROTO_LAUNCH, 2031,
		 launch_data(ty_test_strf("trap \"sh %s\" USR1; while :; do sleep 0.1; done", sh)));
	REQUIRE(wait_msg(PROTO_ATTEMPT_RUNNING, 2031, 1) != NULL);
	gcp_announce();
	REQUIRE((d = wait_msg(PROTO_CHECKPOINT_WRITTEN, 2031, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "step")), 9);
	CHECK(json_is_true(json_object_get(d, "valid")));
	CHECK(json_is_true(json_object_get(d, "after_signal")));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, 2031, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "preempted");
	CHECK_STR_EQ(json_string_value(json_object_get(d, "message")),
		     "preempted: checkpoint step 9 verified after the checkpoint signal");
	check_clean_exit();
}

/* Accepts connections and never answers them. */
static struct {
	int fd;
	int accepted;
	int held[256];
	pthread_t thread;
} Z = {.fd = -1};

static void *stall(void *arg)
{
	int c;

	while ((c = accept(Z.fd, NULL, NULL)) >= 0) {
		if (Z.accepted < 256)
			Z.held[Z.accepted] = c;
		else
			close(c);
		__atomic_add_fetch(&Z.accepted, 1, __ATOMIC_SEQ_CST);
	}
	return NULL;
}

/* Open a loopback listener; its port. */
static int listener(int *fd)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(*fd >= 0);
	REQUIRE(bind(*fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(getsockname(*fd, (struct sockaddr *)&sa, &len) == 0);
	REQUIRE(listen(*fd, 64) == 0);
	return ntohs(sa.sin_port);
}

/* Heartbeats of this case so far. */
static size_t heartbeats(void)
{
	return count_of(PROTO_HEARTBEAT, 0);
}

/* While the metadata endpoint is broken the node works as usual. */
static void check_node_works(int64_t job)
{
	const json_t *d;
	size_t hb;

	hb = heartbeats();
	REQUIRE(wait_msg(PROTO_HEARTBEAT, 0, hb + 5) != NULL);
	send_msg(PROTO_LAUNCH, job, launch_data("echo ran > out"));
	REQUIRE((d = wait_msg(PROTO_ATTEMPT_EXITED, job, 1)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(d, "exit_code")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "failure_class")), "");
	hb = heartbeats();
	REQUIRE(wait_msg(PROTO_HEARTBEAT, 0, hb + 5) != NULL);
	CHECK_INT_EQ(count_of(PROTO_PREEMPT_NOTICE, 0), 0);
	CHECK(json_object_get(wait_msg(PROTO_HEARTBEAT, 0, hb + 5), "preempt_notice") == NULL);
}

TY_TEST(stalled_endpoint_never_blocks_the_loop)
{
	int port;

	setup();
	port = listener(&Z.fd);
	REQUIRE(pthread_create(&Z.thread, NULL, stall, NULL) == 0);
	/* every request hangs until its timeout; the loop must go on meanwhile */
	start_executor("stall",
		       (const char *[]){"--spot-provider", "gcp", "--spot-metadata-url",
					ty_test_strf("http://127.0.0.1:%d", port), "--spot-poll-ms",
					"300", "--spot-timeout-ms", "250", NULL});
	check_node_works(2031);
	CHECK(wait_log("spot poller (gcp): notice request: Timeout"));
	CHECK(__atomic_load_n(&Z.accepted, __ATOMIC_SEQ_CST) >= 2);
	check_clean_exit();
	shutdown(Z.fd, SHUT_RDWR);
	close(Z.fd);
	pthread_join(Z.thread, NULL);
	for (int i = 0; i < Z.accepted && i < 256; i++)
		close(Z.held[i]);
}

TY_TEST(refused_endpoint_is_a_warning)
{
	int fd, port;

	setup();
	/* a port nothing listens on any more */
	port = listener(&fd);
	close(fd);
	start_executor("refused", (const char *[]){"--spot-provider", "aws", "--spot-metadata-url",
						   ty_test_strf("http://127.0.0.1:%d", port),
						   "--spot-poll-ms", "200", NULL});
	CHECK(wait_log("warn: spot poller (aws): aws IMDSv2 token: Couldn't connect"));
	check_node_works(2041);
	CHECK(kill(T.pid, 0) == 0);
	check_clean_exit();
}

TY_TEST(unreadable_answers_are_warnings_not_notices)
{
	const json_t *d;

	setup();
	server_start(GCP);
	pthread_mutex_lock(&S.mu);
	S.garbage = 1;
	pthread_mutex_unlock(&S.mu);
	start_executor("garbage", (const char *[]){"--spot-provider", "gcp", "--spot-metadata-url",
						   spot_url(), "--spot-poll-ms", "200", NULL});
	CHECK(wait_log("warn: spot poller (gcp): gcp instance/preempted: the answer is not "
		       "\"TRUE\" or \"FALSE\""));
	pthread_mutex_lock(&S.mu);
	S.garbage = 2;
	pthread_mutex_unlock(&S.mu);
	CHECK(wait_log("warn: spot poller (gcp): notice request: an answer over 65536 bytes"));
	CHECK(wait_polls(server_get(&S.polls) + 2));
	collect(100);
	CHECK_INT_EQ(count_of(PROTO_PREEMPT_NOTICE, 0), 0);
	/* the endpoint recovers; its notice is heard */
	pthread_mutex_lock(&S.mu);
	S.garbage = 0;
	S.notice = 1;
	pthread_mutex_unlock(&S.mu);
	REQUIRE((d = wait_msg(PROTO_PREEMPT_NOTICE, 0, 1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(d, "provider")), "gcp");
	CHECK(log_has("spot poller (gcp): the metadata endpoint answers again"));
	check_clean_exit();
}
