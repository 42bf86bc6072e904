/* Scheduler integration fixture: broker, database, API, schedulers, fake executors. */
#include "fixture.h"

#include "ty_kafka.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_NODES 16
#define MAX_SCHEDS 4
#define MAX_PARAMS 16
#define HEARTBEAT_MS 200

struct fx_sched {
	pid_t pid;
	char id[64];
	char log[PATH_MAX];
};

struct fx_node {
	char id[64];
	int gpus;
	bool beating;
	char boot_id[64];
	json_t *running;  /* [{job, attempt}] */
	json_t *finished; /* [{job, attempt, exit_code, failure_class, message}] */
	json_t *notice;	  /* preempt_notice carried in heartbeats, NULL: none */
	json_t *conditions; /* conditions carried in heartbeats, NULL: the field left out */
};

struct sent {
	const char *topic;
	int32_t partition;
	char *key;
	char *payload;
};

struct rx {
	struct proto_msg m;
	bool taken;
};

struct fx {
	bool live;
	char dir[256];
	char bs_file[PATH_MAX];
	char bootstrap[1024];
	pid_t broker_pid;
	const char *db_url;
	struct ty_api *api;
	const char *admin;
	char team[64];
	PGconn *db;

	rd_kafka_t *producer, *consumer, *probe;
	int32_t parts_dispatch, parts_events, parts_nodes;
	pthread_mutex_t kmu; /* produce + flush, and the sent log */
	struct sent *sent;
	int nsent, capsent;
	atomic_llong seq;

	pthread_mutex_t mu; /* nodes */
	struct fx_node nodes[MAX_NODES];
	int nnodes;
	pthread_t hb;
	bool hb_started;
	atomic_bool hb_stop;

	struct fx_sched scheds[MAX_SCHEDS];
	int nscheds;

	struct rx *rx;
	int nrx, caprx;
};

static struct fx world;
static bool hooks_added;

/* ---- small things ---- */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static const char *need(const char *var)
{
	const char *v = getenv(var);

	if (!v || !*v) {
		FAIL("%s is not set: run the scheduler tests with tests/run (ctest sets it)", var);
		ty_test_abort();
	}
	return v;
}

const char *fx_n(long long v)
{
	return ty_test_strf("%lld", v);
}

static char *slurp(const char *path, long max)
{
	FILE *fp = fopen(path, "rb");
	long size;
	char *p;
	size_t n;

	if (!fp)
		return ty_test_strf("%s", "");
	fseek(fp, 0, SEEK_END);
	size = ftell(fp);
	fseek(fp, size > max ? size - max : 0, SEEK_SET);
	p = ty_test_alloc((size_t)(size > max ? max : size) + 1);
	n = fread(p, 1, (size_t)(size > max ? max : size), fp);
	p[n] = '\0';
	fclose(fp);
	return p;
}

static void print_file(const char *title, const char *path)
{
	char *text = slurp(path, 16000), *line, *save = NULL;

	printf("  --- %s (%s) ---\n", title, path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		printf("  | %s\n", line);
	printf("  --- end ---\n");
	fflush(stdout);
}

static pid_t spawn(char *const argv[], const char *log)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	pid_t pid;

	if (fd < 0) {
		FAIL("cannot open '%s': %s", log, strerror(errno));
		ty_test_abort();
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (in >= 0)
			dup2(in, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		dprintf(2, "cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	if (pid < 0) {
		FAIL("fork: %s", strerror(errno));
		ty_test_abort();
	}
	return pid;
}

/* 0 when pid exited within ms (status set), -1 when it still runs. */
static int reap(pid_t pid, int ms, int *status)
{
	int64_t deadline = ty_mono_ms() + ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return 0;
		if (ty_mono_ms() >= deadline)
			return -1;
		sleep_ms(10);
	}
}

/* ---- teardown ---- */

static void *heartbeats(void *arg);

static void sched_logs(void)
{
	for (int i = 0; i < world.nscheds; i++)
		print_file(ty_test_strf("trainyard-scheduler '%s' log", world.scheds[i].id),
			   world.scheds[i].log);
}

static void cleanup(void)
{
	struct fx *f = &world;
	int status;

	if (!f->live)
		return;
	f->live = false;
	if (f->hb_started) {
		atomic_store(&f->hb_stop, true);
		pthread_join(f->hb, NULL);
		f->hb_started = false;
	}
	for (int i = 0; i < f->nscheds; i++)
		if (f->scheds[i].pid > 0) {
			kill(f->scheds[i].pid, SIGKILL);
			reap(f->scheds[i].pid, 5000, &status);
			f->scheds[i].pid = 0;
		}
	if (f->consumer)
		ty_kafka_destroy(f->consumer, 0);
	if (f->probe)
		ty_kafka_destroy(f->probe, 0);
	if (f->producer) {
		rd_kafka_purge(f->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		ty_kafka_destroy(f->producer, 0);
	}
	if (f->broker_pid > 0) {
		kill(f->broker_pid, SIGTERM);
		if (reap(f->broker_pid, 5000, &status)) {
			kill(f->broker_pid, SIGKILL);
			reap(f->broker_pid, 5000, &status);
		}
	}
	if (f->api)
		ty_test_api_stop(f->api);
	if (f->db)
		PQfinish(f->db);
	for (int i = 0; i < f->nsent; i++) {
		free(f->sent[i].key);
		free(f->sent[i].payload);
	}
	free(f->sent);
	for (int i = 0; i < f->nrx; i++)
		proto_msg_clear(&f->rx[i].m);
	free(f->rx);
	for (int i = 0; i < f->nnodes; i++) {
		json_decref(f->nodes[i].running);
		json_decref(f->nodes[i].finished);
		json_decref(f->nodes[i].notice);
		json_decref(f->nodes[i].conditions);
	}
	pthread_mutex_destroy(&f->mu);
	pthread_mutex_destroy(&f->kmu);
	memset(f, 0, sizeof(*f));
}

/* ---- setup ---- */

static int32_t partitions_of(rd_kafka_t *rk, const char *topic)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	int32_t n = 0;

	if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
		if (md->topic_cnt == 1 && !md->topics[0].err)
			n = md->topics[0].partition_cnt;
		rd_kafka_metadata_destroy(md);
	}
	rd_kafka_topic_destroy(rkt);
	if (n <= 0) {
		FAIL("topic '%s' has no partitions on the test broker", topic);
		ty_test_abort();
	}
	return n;
}

static void broker_start(struct fx *f)
{
	char *argv[] = {(char *)need("TY_BROKER_BIN"),
			"--bootstrap-file",
			f->bs_file,
			"--dispatch-partitions",
			"8",
			"--events-partitions",
			"4",
			"--nodes-partitions",
			"4",
			NULL};
	const char *log = ty_test_strf("%s/broker.log", f->dir);
	int64_t deadline = ty_mono_ms() + 15000;
	FILE *fp;

	f->broker_pid = spawn(argv, log);
	while (access(f->bs_file, R_OK) != 0) {
		if (ty_mono_ms() > deadline) {
			print_file("broker log", log);
			FAIL("trainyard-broker did not write '%s' within 15 s", f->bs_file);
			ty_test_abort();
		}
		sleep_ms(20);
	}
	fp = fopen(f->bs_file, "r");
	if (!fp || !fgets(f->bootstrap, sizeof(f->bootstrap), fp)) {
		FAIL("cannot read '%s'", f->bs_file);
		ty_test_abort();
	}
	fclose(fp);
	f->bootstrap[strcspn(f->bootstrap, "\r\n")] = '\0';
}

static void kafka_start(struct fx *f)
{
	static const char *const consumer_extra[] = {"fetch.wait.max.ms=10", NULL};
	rd_kafka_topic_partition_list_t *l;
	struct ty_err err = {0};

	if (ty_kafka_producer_new(&f->producer, f->bootstrap, NULL, &err) ||
	    /* manual assignment: a group only for this, never used with subscribe */
	    ty_kafka_consumer_new(&f->consumer, f->bootstrap, "trainyard-test-executors",
				  consumer_extra, &err) ||
	    /* reads the scheduler's committed offsets; never joins its group */
	    ty_kafka_consumer_new(&f->probe, f->bootstrap, "trainyard-scheduler", NULL, &err)) {
		FAIL("kafka clients: %s", err.msg);
		ty_test_abort();
	}
	f->parts_dispatch = partitions_of(f->producer, PROTO_TOPIC_DISPATCH);
	f->parts_events = partitions_of(f->producer, PROTO_TOPIC_EVENTS);
	f->parts_nodes = partitions_of(f->producer, PROTO_TOPIC_NODES);
	l = rd_kafka_topic_partition_list_new(f->parts_dispatch);
	for (int32_t p = 0; p < f->parts_dispatch; p++)
		rd_kafka_topic_partition_list_add(l, PROTO_TOPIC_DISPATCH, p)->offset =
		    RD_KAFKA_OFFSET_BEGINNING;
	if (rd_kafka_assign(f->consumer, l)) {
		FAIL("cannot assign the dispatch partitions");
		ty_test_abort();
	}
	rd_kafka_topic_partition_list_destroy(l);
}

static void on_case_start(void)
{
	cleanup();
}

static void on_case_failed(void)
{
	sched_logs();
}

/* its heartbeat thread uses the case's scratch strings, which are freed next */
static void on_case_end(void)
{
	cleanup();
}

static void on_teardown(void)
{
	cleanup();
}

struct fx *fx_start(void)
{
	struct fx *f = &world;
	struct ty_resp r = {0};
	char tmpl[128];
	const char *body;

	if (!hooks_added) {
		ty_test_on(TY_TEST_CASE_START, on_case_start);
		ty_test_on(TY_TEST_CASE_FAILED, on_case_failed);
		ty_test_on(TY_TEST_CASE_END, on_case_end);
		ty_test_on(TY_TEST_TEARDOWN, on_teardown);
		hooks_added = true;
	}
	cleanup();
	f->live = true;
	pthread_mutex_init(&f->mu, NULL);
	pthread_mutex_init(&f->kmu, NULL);
	atomic_store(&f->seq, ty_wall_ms());
	need("TY_SCHEDULER_BIN");
	snprintf(tmpl, sizeof(tmpl), "/tmp/ty-sched-%.40s-XXXXXX", ty_test_program());
	if (!mkdtemp(tmpl)) {
		FAIL("mkdtemp: %s", strerror(errno));
		ty_test_abort();
	}
	snprintf(f->dir, sizeof(f->dir), "%s", tmpl);
	snprintf(f->bs_file, sizeof(f->bs_file), "%.255s/kafka.bootstrap", f->dir);

	broker_start(f);
	f->db_url = ty_test_db_new();
	f->api = ty_test_api_start(f->db_url, NULL);
	f->admin = ty_test_admin_token(f->db_url, "sched-test-admin");
	snprintf(f->team, sizeof(f->team), "%s", ty_uniq("sched"));
	body = ty_test_jf("{'name':'%s','nominal_gpus':1000}", f->team);
	if (ty_http(&r, "POST", "/v1/teams", f->admin, body, NULL) != 201) {
		FAIL("cannot create team %s: HTTP %d %s", f->team, r.status, r.body ? r.body : "");
		ty_resp_free(&r);
		ty_test_abort();
	}
	ty_resp_free(&r);
	f->db = PQconnectdb(f->db_url);
	if (PQstatus(f->db) != CONNECTION_OK) {
		FAIL("cannot connect to %s: %s", f->db_url, PQerrorMessage(f->db));
		ty_test_abort();
	}
	kafka_start(f);
	if (pthread_create(&f->hb, NULL, heartbeats, f)) {
		FAIL("cannot start the heartbeat thread");
		ty_test_abort();
	}
	f->hb_started = true;
	return f;
}

const char *fx_db_url(struct fx *f)
{
	return f->db_url;
}

/* ---- schedulers ---- */

int fx_sched_start(struct fx *f, const char *id, const char *const *extra)
{
	struct fx_sched *s;
	char *argv[64];
	int argc = 0;

	if (f->nscheds == MAX_SCHEDS) {
		FAIL("too many schedulers");
		ty_test_abort();
	}
	s = &f->scheds[f->nscheds];
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->log, sizeof(s->log), "%s/sched-%s.log", f->dir, id);
	argv[argc++] = (char *)need("TY_SCHEDULER_BIN");
	argv[argc++] = "--database-url";
	argv[argc++] = (char *)f->db_url;
	argv[argc++] = "--kafka-bootstrap";
	argv[argc++] = ty_test_strf("@%s", f->bs_file);
	argv[argc++] = "--id";
	argv[argc++] = s->id;
	argv[argc++] = "--cycle-ms=200";
	argv[argc++] = "--reconcile-ms=300";
	argv[argc++] = "--resend-ms=30000";
	argv[argc++] = "--node-timeout-ms=10000";
	argv[argc++] = "--kill-grace-seconds=7";
	argv[argc++] = "--log-level=debug";
	argv[argc++] = "--dispatch-key";
	argv[argc++] = (char *)ty_test_dispatch_key();
	argv[argc++] = "--node-secret-file";
	argv[argc++] = (char *)ty_test_node_secret();
	/* every cycle compares the in-memory mirror with a fresh load (teardown checks the log) */
	argv[argc++] = "--check-mirror";
	for (int i = 0; extra && extra[i] && argc < 62; i++)
		argv[argc++] = (char *)extra[i];
	argv[argc] = NULL;
	s->pid = spawn(argv, s->log);
	return f->nscheds++;
}

static void sanitizer_check(struct fx_sched *s)
{
	char *text = slurp(s->log, 1L << 22);

	if (strstr(text, "ERROR: AddressSanitizer") || strstr(text, "ERROR: LeakSanitizer") ||
	    strstr(text, "runtime error:"))
		FAIL("trainyard-scheduler '%s' reported a sanitizer error (log %s)", s->id, s->log);
	if (strstr(text, "mirror diverges from PostgreSQL"))
		FAIL("trainyard-scheduler '%s': its mirror diverged from PostgreSQL (log %s)", s->id,
		     s->log);
}

void fx_sched_stop(struct fx *f, int i)
{
	struct fx_sched *s = &f->scheds[i];
	int status = 0;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	if (reap(s->pid, 10000, &status)) {
		FAIL("trainyard-scheduler '%s' did not stop within 10 s of SIGTERM", s->id);
		kill(s->pid, SIGKILL);
		reap(s->pid, 5000, &status);
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		FAIL("trainyard-scheduler '%s' ended with status 0x%x on SIGTERM", s->id, status);
	}
	s->pid = 0;
	sanitizer_check(s);
}

void fx_sched_kill(struct fx *f, int i)
{
	struct fx_sched *s = &f->scheds[i];
	int status;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGKILL);
	reap(s->pid, 5000, &status);
	s->pid = 0;
	sanitizer_check(s);
}

const char *fx_sched_log(struct fx *f, int i)
{
	return slurp(f->scheds[i].log, 1L << 22);
}

/* ---- SQL ---- */

static const char *vq(struct fx *f, const char *sql, va_list ap)
{
	const char *params[MAX_PARAMS];
	const char *p, *v = NULL;
	PGresult *r;
	int n = 0;

	while ((p = va_arg(ap, const char *)) && n < MAX_PARAMS)
		params[n++] = p;
	r = PQexecParams(f->db, sql, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK) {
		FAIL("SQL '%s' failed: %s", sql, PQresultErrorMessage(r));
		PQclear(r);
		ty_test_abort();
	}
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		v = ty_test_strf("%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

const char *fx_q(struct fx *f, const char *sql, ...)
{
	va_list ap;
	const char *v;

	va_start(ap, sql);
	v = vq(f, sql, ap);
	va_end(ap);
	return v;
}

bool fx_wait_at(const char *file, int line, struct fx *f, int timeout_ms, const char *want,
		const char *sql, ...)
{
	int64_t deadline = ty_mono_ms() + timeout_ms;
	const char *got;

	for (;;) {
		va_list ap;

		va_start(ap, sql);
		got = vq(f, sql, ap);
		va_end(ap);
		if ((!got && !want) || (got && want && !strcmp(got, want)))
			return true;
		if (ty_mono_ms() > deadline)
			break;
		fx_poll(f, 20);
	}
	ty_test_fail_at(file, line, "waited %d ms for '%s' to be '%s'; it is '%s'", timeout_ms, sql,
			want ? want : "(null)", got ? got : "(null)");
	return false;
}

/* ---- jobs ---- */

const char *fx_team(struct fx *f, const char *prefix, int nominal, int borrowing_limit,
		    const char *cohort)
{
	struct ty_resp r = {0};
	const char *name = ty_uniq(prefix);
	const char *body =
	    ty_test_jf("{'name':'%s','nominal_gpus':%d,'borrowing_limit_gpus':%s,'cohort':%s}",
		       name, nominal, borrowing_limit < 0 ? "null" : fx_n(borrowing_limit),
		       cohort ? ty_test_strf("'%s'", cohort) : "null");

	ty_test_api_use(f->api);
	if (ty_http(&r, "POST", "/v1/teams", f->admin, body, NULL) != 201) {
		FAIL("cannot create team %s: HTTP %d %s", name, r.status, r.body ? r.body : "");
		ty_resp_free(&r);
		ty_test_abort();
	}
	ty_resp_free(&r);
	return name;
}

long long fx_submit(struct fx *f, const char *extra)
{
	return fx_submit_to(f, f->team, extra);
}

long long fx_submit_to(struct fx *f, const char *team, const char *extra)
{
	struct ty_resp r = {0};
	const char *body = ty_test_jf("{'team':'%s','command':['python','train.py']%s}", team,
				      extra ? ty_test_jf("%s", extra) : "");
	long long id;

	ty_test_api_use(f->api);
	if (ty_http(&r, "POST", "/v1/jobs", f->admin, body, NULL) != 201 ||
	    (id = ty_jint(r.json, "id")) < 0) {
		FAIL("cannot submit %s: HTTP %d %s", body, r.status, r.body ? r.body : "");
		ty_resp_free(&r);
		ty_test_abort();
	}
	ty_resp_free(&r);
	return id;
}

void fx_cancel(struct fx *f, long long job)
{
	struct ty_resp r = {0};

	ty_test_api_use(f->api);
	if (ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", job), f->admin, NULL, NULL) !=
	    200) {
		FAIL("cannot cancel job %lld: HTTP %d %s", job, r.status, r.body ? r.body : "");
		ty_resp_free(&r);
		ty_test_abort();
	}
	ty_resp_free(&r);
}

const char *fx_api(struct fx *f, const char *method, const char *path, int want)
{
	return fx_api_body(f, method, path, NULL, want);
}

const char *fx_api_body(struct fx *f, const char *method, const char *path, const char *body,
			int want)
{
	return fx_api_as(f, NULL, method, path, body, want);
}

const char *fx_token(struct fx *f, const char *role, const char *team)
{
	const char *body = ty_test_strf("{'name':'%s','role':'%s','team':'%s'}", ty_uniq("tok"),
					role, team);
	json_t *j = json_loads(fx_api_body(f, "POST", "/v1/tokens", body, 201), 0, NULL);
	const char *tok = ty_test_strf("%s", j ? ty_jstr(j, "token") : "");

	json_decref(j);
	return tok;
}

const char *fx_api_as(struct fx *f, const char *token, const char *method, const char *path,
		      const char *body, int want)
{
	struct ty_resp r = {0};
	const char *out;

	ty_test_api_use(f->api);
	if (ty_http(&r, method, path, token ? token : f->admin,
		    body ? ty_test_jf("%s", body) : NULL, NULL) != want) {
		FAIL("%s %s: HTTP %d, not %d: %s", method, path, r.status, want,
		     r.body ? r.body : "");
		ty_resp_free(&r);
		ty_test_abort();
	}
	out = ty_test_strf("%s", r.body ? r.body : "");
	ty_resp_free(&r);
	return out;
}

/* ---- producing ---- */

/* The node a payload's envelope names (scratch), else fallback. */
static const char *payload_node(const char *payload, const char *fallback)
{
	json_t *o = json_loads(payload, 0, NULL);
	const char *node = json_string_value(json_object_get(o, "node"));
	const char *out = ty_test_strf("%s", node ? node : fallback);

	json_decref(o);
	return out;
}

/* Produce payload with the MAC of mac_node's key (NULL: none, unsigned). */
static void produce_as(struct fx *f, const char *topic, int32_t partition, const char *key,
		       const char *payload, const char *mac_node, bool record)
{
	char mac[PROTO_NODE_KEY_LEN + 1] = "";
	rd_kafka_resp_err_t e;

	if (mac_node)
		proto_mac(mac, ty_test_node_key(mac_node), payload, strlen(payload));
	pthread_mutex_lock(&f->kmu);
	if (mac_node)
		e = rd_kafka_producev(
		    f->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
		    RD_KAFKA_V_KEY(key, strlen(key)),
		    RD_KAFKA_V_VALUE((void *)payload, strlen(payload)),
		    RD_KAFKA_V_HEADER(PROTO_HDR_MAC, mac, PROTO_NODE_KEY_LEN),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	else
		e = rd_kafka_producev(
		    f->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
		    RD_KAFKA_V_KEY(key, strlen(key)),
		    RD_KAFKA_V_VALUE((void *)payload, strlen(payload)),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	if (!e)
		e = rd_kafka_flush(f->producer, 10000);
	if (!e && record) {
		if (f->nsent == f->capsent) {
			f->capsent = f->capsent ? f->capsent * 2 : 64;
			f->sent = realloc(f->sent, (size_t)f->capsent * sizeof(*f->sent));
		}
		f->sent[f->nsent++] = (struct sent){topic, partition, strdup(key), strdup(payload)};
	}
	pthread_mutex_unlock(&f->kmu);
	if (e)
		FAIL("cannot produce to %s [%d]: %s", topic, (int)partition, rd_kafka_err2str(e));
}

/* As the node the envelope names (its key's MAC), like a real executor. */
static void produce(struct fx *f, const char *topic, int32_t partition, const char *key,
		    const char *payload, bool record)
{
	produce_as(f, topic, partition, key, payload, payload_node(payload, key), record);
}

static char *encode(struct fx *f, const char *node, enum proto_type t, long long job,
		    long long attempt, json_t *data, long long *seq)
{
	struct proto_msg m = {.type = t, .job = job, .attempt = attempt, .ts = ty_wall_ms()};
	struct ty_err err = {0};
	char *out = NULL;
	size_t len;

	m.seq = atomic_fetch_add(&f->seq, 1) + 1;
	m.data = data;
	snprintf(m.node, sizeof(m.node), "%s", node);
	if (proto_encode(&out, &len, &m, &err))
		FAIL("cannot encode a %s message: %s", proto_type_name(t), err.msg);
	if (seq)
		*seq = m.seq;
	return out;
}

static void send_msg(struct fx *f, const char *node, enum proto_type t, long long job,
		     long long attempt, json_t *data, long long *seq, bool record)
{
	char *payload = encode(f, node, t, job, attempt, data, seq);
	const char *topic = proto_type_topic(t);
	char key[64];
	int32_t part;

	if (!payload)
		return;
	if (!strcmp(topic, PROTO_TOPIC_NODES)) {
		snprintf(key, sizeof(key), "%s", node);
		part = proto_node_partition(node, f->parts_nodes);
	} else {
		snprintf(key, sizeof(key), "%lld", job);
		part = (int32_t)(job % f->parts_events);
	}
	produce(f, topic, part, key, payload, record);
	free(payload);
}

long long fx_send(struct fx *f, const char *node, const char *type, long long job,
		  long long attempt, const char *data)
{
	enum proto_type t = proto_type_parse(type);
	json_t *d = data ? json_loads(ty_test_jf("%s", data), 0, NULL) : json_object();
	long long seq = 0;

	if (!t || !d) {
		FAIL("bad message %s %s", type, data ? data : "");
		json_decref(d);
		ty_test_abort();
	}
	send_msg(f, node, t, job, attempt, d, &seq, true);
	json_decref(d);
	return seq;
}

void fx_send_raw(struct fx *f, const char *topic, const char *node, const char *payload)
{
	produce(f, topic, 0, node, ty_test_jf("%s", payload), true);
}

void fx_send_as(struct fx *f, const char *topic, const char *mac_node, const char *payload)
{
	const char *p = ty_test_jf("%s", payload);

	produce_as(f, topic, 0, payload_node(p, "?"), p, mac_node, true);
}

int fx_sent_count(struct fx *f)
{
	int n;

	pthread_mutex_lock(&f->kmu);
	n = f->nsent;
	pthread_mutex_unlock(&f->kmu);
	return n;
}

void fx_replay(struct fx *f, int from, int to)
{
	for (int i = from; i < to; i++) {
		struct sent s;

		pthread_mutex_lock(&f->kmu);
		s = f->sent[i];
		s.key = strdup(s.key);
		s.payload = strdup(s.payload);
		pthread_mutex_unlock(&f->kmu);
		produce(f, s.topic, s.partition, s.key, s.payload, false);
		free(s.key);
		free(s.payload);
	}
}

/* ---- nodes ---- */

static struct fx_node *node_find(struct fx *f, const char *id)
{
	for (int i = 0; i < f->nnodes; i++)
		if (!strcmp(f->nodes[i].id, id))
			return &f->nodes[i];
	return NULL;
}

static void *heartbeats(void *arg)
{
	struct fx *f = arg;

	while (!atomic_load(&f->hb_stop)) {
		for (int i = 0;; i++) {
			char id[64], boot[64];
			json_t *data;

			pthread_mutex_lock(&f->mu);
			if (i >= f->nnodes) {
				pthread_mutex_unlock(&f->mu);
				break;
			}
			if (!f->nodes[i].beating) {
				pthread_mutex_unlock(&f->mu);
				continue;
			}
			snprintf(id, sizeof(id), "%s", f->nodes[i].id);
			snprintf(boot, sizeof(boot), "%s", f->nodes[i].boot_id);
			/* copies: the test changes the lists while this thread sends */
			data = json_pack("{s:s, s:o, s:o}", "boot_id", boot, "running",
					 json_deep_copy(f->nodes[i].running), "finished",
					 json_deep_copy(f->nodes[i].finished));
			if (data && f->nodes[i].notice)
				json_object_set_new(data, "preempt_notice",
						    json_deep_copy(f->nodes[i].notice));
			if (data && f->nodes[i].conditions)
				json_object_set_new(data, "conditions",
						    json_deep_copy(f->nodes[i].conditions));
			pthread_mutex_unlock(&f->mu);
			if (data)
				send_msg(f, id, PROTO_HEARTBEAT, 0, 0, data, NULL, false);
			json_decref(data);
		}
		sleep_ms(HEARTBEAT_MS);
	}
	return NULL;
}

void fx_node(struct fx *f, const char *id, int gpus)
{
	fx_node_pool(f, id, gpus, NULL);
}

void fx_node_pool(struct fx *f, const char *id, int gpus, const char *pool)
{
	fx_node_res_pool(f, id, gpus, 0, 0, pool);
}

void fx_node_res(struct fx *f, const char *id, int gpus, long long cpus, long long memory_mb)
{
	fx_node_res_pool(f, id, gpus, cpus, memory_mb, NULL);
}

void fx_node_res_pool(struct fx *f, const char *id, int gpus, long long cpus,
		      long long memory_mb, const char *pool)
{
	struct fx_node *n;
	json_t *data;

	pthread_mutex_lock(&f->mu);
	if (f->nnodes == MAX_NODES || node_find(f, id)) {
		pthread_mutex_unlock(&f->mu);
		FAIL("cannot add node %s", id);
		ty_test_abort();
	}
	n = &f->nodes[f->nnodes];
	snprintf(n->id, sizeof(n->id), "%s", id);
	snprintf(n->boot_id, sizeof(n->boot_id), "boot-%s-%lld", id, (long long)ty_wall_ms());
	n->gpus = gpus;
	n->running = json_array();
	n->finished = json_array();
	data = json_pack("{s:s, s:i, s:{s:s}, s:s, s:s, s:b}", "address",
			 ty_test_strf("10.0.0.%d", f->nnodes + 1), "gpus", gpus, "labels", "zone",
			 "test", "boot_id", n->boot_id, "log_url",
			 ty_test_strf("http://10.0.0.%d:8081", f->nnodes + 1), "simulated", 1);
	if (data && pool)
		json_object_set_new(json_object_get(data, "labels"), "pool", json_string(pool));
	/* an executor that does not report them leaves them out (docs/dispatch.md) */
	if (data && cpus > 0)
		json_object_set_new(data, "cpus", json_integer(cpus));
	if (data && memory_mb > 0)
		json_object_set_new(data, "memory_mb", json_integer(memory_mb));
	f->nnodes++;
	pthread_mutex_unlock(&f->mu);
	send_msg(f, id, PROTO_REGISTER, 0, 0, data, NULL, true);
	json_decref(data);
	pthread_mutex_lock(&f->mu);
	n->beating = true;
	pthread_mutex_unlock(&f->mu);
}

void fx_node_register(struct fx *f, const char *id, int gpus, const char *extra)
{
	struct fx_node *n;
	json_t *data = NULL, *more = NULL;
	int i;

	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id))) {
		i = (int)(n - f->nodes);
		n->gpus = gpus;
		data = json_pack("{s:s, s:i, s:{s:s}, s:s, s:s, s:b}", "address",
				 ty_test_strf("10.0.0.%d", i + 1), "gpus", gpus, "labels", "zone",
				 "test", "boot_id", n->boot_id, "log_url",
				 ty_test_strf("http://10.0.0.%d:8081", i + 1), "simulated", 1);
	}
	pthread_mutex_unlock(&f->mu);
	if (!n) {
		FAIL("no node %s", id);
		ty_test_abort();
	}
	if (extra && (!(more = json_loads(ty_test_jf("{%s}", extra), 0, NULL)) ||
		      json_object_update(data, more))) {
		FAIL("bad register fields %s", extra);
		ty_test_abort();
	}
	json_decref(more);
	send_msg(f, id, PROTO_REGISTER, 0, 0, data, NULL, true);
	json_decref(data);
}

void fx_node_notice(struct fx *f, const char *id, const char *notice)
{
	struct fx_node *n;
	json_t *v = notice ? json_loads(ty_test_jf("%s", notice), 0, NULL) : NULL;

	if (notice && !v)
		FAIL("bad notice %s", notice);
	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id))) {
		json_decref(n->notice);
		n->notice = v;
		v = NULL;
	}
	pthread_mutex_unlock(&f->mu);
	json_decref(v);
	if (!n)
		FAIL("no node %s", id);
}

void fx_node_conditions(struct fx *f, const char *id, const char *conditions)
{
	struct fx_node *n;
	json_t *v = conditions ? json_loads(ty_test_jf("%s", conditions), 0, NULL) : NULL;

	if (conditions && !v) {
		FAIL("bad conditions %s", conditions);
		ty_test_abort();
	}
	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id))) {
		json_decref(n->conditions);
		n->conditions = v;
		v = NULL;
	}
	pthread_mutex_unlock(&f->mu);
	json_decref(v);
	if (!n)
		FAIL("no node %s", id);
}

const char *fx_node_boot(struct fx *f, const char *id)
{
	struct fx_node *n;
	const char *boot = NULL;

	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id)))
		boot = ty_test_strf("%s", n->boot_id);
	pthread_mutex_unlock(&f->mu);
	if (!n)
		FAIL("no node %s", id);
	return boot;
}

void fx_node_reboot(struct fx *f, const char *id)
{
	struct fx_node *n;

	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id))) {
		snprintf(n->boot_id, sizeof(n->boot_id), "boot-%s-%lld", id,
			 (long long)ty_wall_ms() + 1);
		json_array_clear(n->running);
		json_array_clear(n->finished);
		json_decref(n->notice);
		n->notice = NULL;
		json_decref(n->conditions);
		n->conditions = NULL;
	}
	pthread_mutex_unlock(&f->mu);
	if (!n)
		FAIL("no node %s", id);
}

void fx_node_beat(struct fx *f, const char *id, bool on)
{
	struct fx_node *n;

	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id)))
		n->beating = on;
	pthread_mutex_unlock(&f->mu);
	if (!n)
		FAIL("no node %s", id);
}

void fx_node_runs(struct fx *f, const char *id, long long job, long long attempt, bool on)
{
	struct fx_node *n;
	size_t i;
	json_t *e;

	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id))) {
		json_array_foreach(n->running, i, e)
		{
			if (json_integer_value(json_object_get(e, "job")) == job &&
			    json_integer_value(json_object_get(e, "attempt")) == attempt) {
				json_array_remove(n->running, i);
				break;
			}
		}
		if (on)
			json_array_append_new(n->running,
					      json_pack("{s:I, s:I}", "job", (json_int_t)job,
							"attempt", (json_int_t)attempt));
	}
	pthread_mutex_unlock(&f->mu);
	if (!n)
		FAIL("no node %s", id);
}

void fx_node_idle(struct fx *f, const char *id, long long job, long long attempt,
		  double idle_seconds, double gpu_util)
{
	struct fx_node *n;
	json_t *e, *found = NULL;
	size_t i;

	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id)))
		json_array_foreach(n->running, i, e)
		{
			if (json_integer_value(json_object_get(e, "job")) == job &&
			    json_integer_value(json_object_get(e, "attempt")) == attempt)
				found = e;
		}
	if (found) {
		if (idle_seconds >= 0)
			json_object_set_new(found, "idle_seconds", json_real(idle_seconds));
		else
			json_object_del(found, "idle_seconds");
		if (gpu_util >= 0)
			json_object_set_new(found, "gpu_util", json_real(gpu_util));
		else
			json_object_del(found, "gpu_util");
	}
	pthread_mutex_unlock(&f->mu);
	if (!found)
		FAIL("node %s does not run job %lld attempt %lld", id, job, attempt);
}

void fx_node_progress(struct fx *f, const char *id, long long job, long long attempt,
		      const char *progress)
{
	json_t *p = progress ? json_loads(ty_test_jf("%s", progress), 0, NULL) : NULL;
	struct fx_node *n;
	json_t *e, *found = NULL;
	size_t i;

	if (progress && !p)
		FAIL("bad test JSON: %s", progress);
	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id)))
		json_array_foreach(n->running, i, e)
		{
			if (json_integer_value(json_object_get(e, "job")) == job &&
			    json_integer_value(json_object_get(e, "attempt")) == attempt)
				found = e;
		}
	if (found && p)
		json_object_set(found, "progress", p);
	else if (found)
		json_object_del(found, "progress");
	pthread_mutex_unlock(&f->mu);
	json_decref(p);
	if (!found)
		FAIL("node %s does not run job %lld attempt %lld", id, job, attempt);
}

void fx_node_finished(struct fx *f, const char *id, long long job, long long attempt, int code,
		      const char *cls, const char *message)
{
	fx_node_finished_ev(f, id, job, attempt, code, cls, message, NULL);
}

void fx_node_finished_ev(struct fx *f, const char *id, long long job, long long attempt,
			 int code, const char *cls, const char *message, const char *evidence)
{
	fx_node_finished_src(f, id, job, attempt, code, cls, message, evidence, NULL);
}

void fx_node_finished_src(struct fx *f, const char *id, long long job, long long attempt,
			  int code, const char *cls, const char *message, const char *evidence,
			  const char *src)
{
	fx_node_finished_cond(f, id, job, attempt, code, cls, message, evidence, src, NULL);
}

void fx_node_finished_cond(struct fx *f, const char *id, long long job, long long attempt,
			   int code, const char *cls, const char *message, const char *evidence,
			   const char *src, const char *condition)
{
	json_t *c = condition ? json_loads(ty_test_jf("%s", condition), 0, NULL) : NULL;
	struct fx_node *n;

	if (condition && !c) {
		FAIL("bad condition %s", condition);
		ty_test_abort();
	}
	pthread_mutex_lock(&f->mu);
	if ((n = node_find(f, id)))
		json_array_append_new(n->finished,
				      json_pack("{s:I, s:I, s:i, s:s, s:s, s:s*, s:s*, s:o*}", "job",
						(json_int_t)job, "attempt", (json_int_t)attempt,
						"exit_code", code, "failure_class", cls, "message",
						message, "evidence", evidence, "evidence_source",
						src, "condition", c));
	else
		json_decref(c);
	pthread_mutex_unlock(&f->mu);
	if (!n)
		FAIL("no node %s", id);
}

/* ---- the scheduler caught up ---- */

void fx_sync(struct fx *f, int timeout_ms)
{
	rd_kafka_topic_partition_list_t *high = rd_kafka_topic_partition_list_new(16);
	const char *topics[] = {PROTO_TOPIC_EVENTS, PROTO_TOPIC_NODES};
	int32_t parts[] = {f->parts_events, f->parts_nodes};
	int64_t deadline = ty_mono_ms() + timeout_ms;

	for (int t = 0; t < 2; t++)
		for (int32_t p = 0; p < parts[t]; p++) {
			int64_t lo = 0, hi = 0;

			if (rd_kafka_query_watermark_offsets(f->producer, topics[t], p, &lo, &hi,
							     5000)) {
				FAIL("cannot read the watermarks of %s [%d]", topics[t], (int)p);
				rd_kafka_topic_partition_list_destroy(high);
				ty_test_abort();
			}
			if (hi > lo)
				rd_kafka_topic_partition_list_add(high, topics[t], p)->offset = hi;
		}
	for (;;) {
		rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(high);
		bool done = rd_kafka_committed(f->probe, c, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR;
		const char *behind = "";

		for (int i = 0; done && i < c->cnt; i++)
			if (c->elems[i].offset < high->elems[i].offset) {
				done = false;
				behind = ty_test_strf("%s [%d] at %lld of %lld", c->elems[i].topic,
						      (int)c->elems[i].partition,
						      (long long)c->elems[i].offset,
						      (long long)high->elems[i].offset);
			}
		rd_kafka_topic_partition_list_destroy(c);
		if (done)
			break;
		if (ty_mono_ms() > deadline) {
			FAIL("the scheduler did not catch up within %d ms: %s", timeout_ms, behind);
			rd_kafka_topic_partition_list_destroy(high);
			ty_test_abort();
		}
		fx_poll(f, 50);
	}
	rd_kafka_topic_partition_list_destroy(high);
}

/* ---- dispatch ---- */

static void take_one(struct fx *f, rd_kafka_message_t *km)
{
	struct ty_err err = {0};
	struct rx *r;

	if (km->err) {
		if (km->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			FAIL("dispatch consumer: %s", rd_kafka_message_errstr(km));
		return;
	}
	if (f->nrx == f->caprx) {
		f->caprx = f->caprx ? f->caprx * 2 : 64;
		f->rx = realloc(f->rx, (size_t)f->caprx * sizeof(*f->rx));
	}
	r = &f->rx[f->nrx];
	memset(r, 0, sizeof(*r));
	if (proto_decode(&r->m, km->payload, km->len, &err)) {
		FAIL("the scheduler sent a malformed dispatch message: %s: %.*s", err.msg,
		     (int)km->len, (const char *)km->payload);
		return;
	}
	{
		char buf[TY_ED25519_SIG_HEX_LEN + 2];
		enum proto_reject why =
		    proto_check_sig(ty_test_dispatch_signer(), km->payload, km->len,
				    proto_header(buf, sizeof(buf), km, PROTO_HDR_SIG));

		if (why)
			FAIL("the scheduler sent a %s dispatch message: %.*s", proto_reject_name(why),
			     (int)km->len, (const char *)km->payload);
	}
	if (km->partition != proto_node_partition(r->m.node, f->parts_dispatch))
		FAIL("%s for node %s came on partition %d, not %d", proto_type_name(r->m.type),
		     r->m.node, (int)km->partition,
		     (int)proto_node_partition(r->m.node, f->parts_dispatch));
	if (!km->key || km->key_len != strlen(r->m.node) ||
	    memcmp(km->key, r->m.node, km->key_len) != 0)
		FAIL("%s for node %s is not keyed by the node id", proto_type_name(r->m.type),
		     r->m.node);
	f->nrx++;
}

void fx_poll(struct fx *f, int ms)
{
	int64_t deadline = ty_mono_ms() + ms;

	do {
		rd_kafka_message_t *km = rd_kafka_consumer_poll(f->consumer, 10);

		if (km) {
			take_one(f, km);
			rd_kafka_message_destroy(km);
		}
	} while (ty_mono_ms() < deadline);
}

static bool matches(const struct rx *r, const char *node, const char *type, long long job,
		    long long attempt)
{
	return !strcmp(r->m.node, node) && !strcmp(proto_type_name(r->m.type), type) &&
	       (job <= 0 || r->m.job == job) && (attempt <= 0 || r->m.attempt == attempt);
}

const struct proto_msg *fx_recv(struct fx *f, const char *node, const char *type, long long job,
				int timeout_ms)
{
	int64_t deadline = ty_mono_ms() + timeout_ms;

	for (;;) {
		for (int i = 0; i < f->nrx; i++)
			if (!f->rx[i].taken && matches(&f->rx[i], node, type, job, 0)) {
				f->rx[i].taken = true;
				return &f->rx[i].m;
			}
		if (ty_mono_ms() > deadline)
			return NULL;
		fx_poll(f, 20);
	}
}

int fx_count(struct fx *f, const char *node, const char *type, long long job, long long attempt)
{
	int n = 0;

	for (int i = 0; i < f->nrx; i++)
		n += matches(&f->rx[i], node, type, job, attempt);
	return n;
}

/* ---- acting on a launch ---- */

static long long li(const struct proto_msg *m, const char *key)
{
	return (long long)json_integer_value(json_object_get(m->data, key));
}

void fx_run(struct fx *f, const char *node, const struct proto_msg *launch)
{
	long long first = li(launch, "first_rank"), n = li(launch, "local_world_size");

	fx_node_runs(f, node, launch->job, launch->attempt, true);
	for (long long r = 0; r < n; r++)
		fx_send(f, node, "rank_started", launch->job, launch->attempt,
			ty_test_strf("{'rank':%lld,'local_rank':%lld,'pid':%lld}", first + r, r,
				     1000 + first + r));
	fx_send(f, node, "attempt_running", launch->job, launch->attempt,
		ty_test_strf("{'ranks':%lld}", n));
}

void fx_exit(struct fx *f, const char *node, const struct proto_msg *launch, int code,
	     const char *cls, const char *message)
{
	fx_exit_with(f, node, launch, code, cls, message, NULL);
}

void fx_exit_with(struct fx *f, const char *node, const struct proto_msg *launch, int code,
		  const char *cls, const char *message, const char *extra)
{
	long long first = li(launch, "first_rank"), n = li(launch, "local_world_size");

	for (long long r = 0; r < n; r++)
		fx_send(f, node, "rank_exited", launch->job, launch->attempt,
			ty_test_strf("{'rank':%lld,'exit_code':%d,'signal':0}", first + r,
				     r == n - 1 ? code : 0));
	fx_send(f, node, "attempt_exited", launch->job, launch->attempt,
		ty_test_strf("{'exit_code':%d,'failure_class':'%s','message':'%s'%s}", code, cls,
			     message, extra ? extra : ""));
	fx_node_runs(f, node, launch->job, launch->attempt, false);
}
