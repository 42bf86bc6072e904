/* The end-to-end stack: see e2e.h. */
#include "e2e.h"
#include "ty_test.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct e2e stack;
static bool up;
static const char *addrs[E2E_MAX_NODES] = {"127.0.0.2", "127.0.0.3", "127.0.0.4"};
static const char *const nodes[E2E_MAX_NODES] = {"node-a", "node-b", "node-c"};
static int nnodes = 2;
static bool nvml;
static char **prefixes[E2E_MAX_NODES];
static char **extra_args[E2E_MAX_NODES];
static char **sched_args;
static char **broker_args;
static void (*broker_up)(struct e2e *e);

static const char *need(const char *var)
{
	const char *v = getenv(var);

	if (!v || !*v) {
		FAIL("%s is not set: run the end-to-end tests through tests/run", var);
		ty_test_abort();
	}
	return v;
}

static void *xmalloc(size_t n)
{
	void *p = calloc(1, n);

	if (!p) {
		FAIL("out of memory");
		ty_test_abort();
	}
	return p;
}

/* A copy of a NULL-terminated list, or NULL for none. */
static char **copy_argv(const char *const *p)
{
	char **copy;
	int n = 0;

	if (!p)
		return NULL;
	while (p[n])
		n++;
	copy = xmalloc(((size_t)n + 1) * sizeof(char *));
	for (int k = 0; k < n; k++)
		copy[k] = strdup(p[k]);
	return copy;
}

void e2e_set_layout(const struct e2e_layout *layout)
{
	if (up) {
		FAIL("e2e_set_layout after the stack is up: call it before the first e2e_get");
		ty_test_abort();
	}
	if (layout->nodes)
		nnodes = layout->nodes < E2E_MAX_NODES ? layout->nodes : E2E_MAX_NODES;
	nvml = layout->nvml;
	for (int i = 0; i < E2E_MAX_NODES; i++) {
		if (layout->address[i])
			addrs[i] = strdup(layout->address[i]);
		prefixes[i] = copy_argv(layout->prefix[i]);
		extra_args[i] = copy_argv(layout->args[i]);
	}
	sched_args = copy_argv(layout->sched_args);
	broker_args = copy_argv(layout->broker_args);
	broker_up = layout->broker_up;
}

void e2e_start_executor(struct e2e *e, int i)
{
	if (e->exec[i]) {
		ty_test_daemon_restart(e->exec[i]);
		return;
	}
	const char *state = ty_test_strf("%s/state-%s", ty_test_workdir(), nodes[i]);
	/* ranks report trial metrics to the test's API (ranks outside a namespace reach it) */
	const char *api_url = ty_test_api_url(ty_stack_get()->api);
	const char *args[] = {need("TY_EXECUTOR_BIN"), "--node-id", nodes[i], "--api-url", api_url,
			      "--address",
			      addrs[i], "--kafka-bootstrap", e->bootstrap,
			      "--labels", i == 0 ? "rack=r1,block=b1" : "rack=r1,block=b2",
			      "--state-dir", state, "--heartbeat-ms", "300",
			      "--progress-ms", "300", "--kill-grace-ms",
			      "2000", "--log-pubkey", ty_test_log_pubkey(), "--log-level", "debug",
			      "--dispatch-pubkey", ty_test_dispatch_pubkey(), "--node-key-file",
			      ty_test_node_key_file(nodes[i]),
			      /* ranks write $OUTDIR on the host; test_e2e_isolation runs runc */
			      "--isolation", "none", NULL};
	const char *argv[96];
	size_t n = 0;

	for (char **p = prefixes[i]; p && *p && n < 32; p++)
		argv[n++] = *p;
	/* the defaults without their NULL, then the layout's (a later option wins) */
	for (size_t k = 0; k + 1 < sizeof(args) / sizeof(args[0]); k++)
		argv[n++] = args[k];
	if (!nvml) {
		argv[n++] = "--fake-gpus";
		argv[n++] = "2";
	}
	for (char **p = extra_args[i]; p && *p && n < 94; p++)
		argv[n++] = *p;
	argv[n] = NULL;
	mkdir(state, 0755);
	e->exec[i] = ty_test_daemon_start(ty_test_strf("executor-%s", nodes[i]), argv);
}

/* A scheduler's daemon with the test defaults, the layout's arguments, then extra. */
static struct ty_daemon *scheduler_start(struct e2e *e, const char *name, const char *id,
					 const char *const *extra)
{
	const struct ty_stack *s = ty_stack_get();
	const char *argv[] = {need("TY_SCHEDULER_BIN"), "--database-url", s->db_url,
			      "--kafka-bootstrap", e->bootstrap, "--id",
			      id, "--cycle-ms", "200",
			      "--node-timeout-ms", "5000", "--reconcile-ms", "500", "--resend-ms",
			      "1500", "--kill-grace-seconds", "2",
			      /* a retried failure waits 1 s, 2 s, ... rather than 10 s, 20 s */
			      "--retry-backoff-seconds", "1",
			      /* preemption tests must not wait out the default minimum runtimes */
			      "--min-runtime-seconds", "high=0,normal=0,low=0,scavenger=0",
			      /* every cycle compares the in-memory mirror with PostgreSQL */
			      "--check-mirror", "--log-level", "debug", "--dispatch-key",
			      ty_test_dispatch_key(), "--node-secret-file", ty_test_node_secret(),
			      NULL};
	const char *all[64];
	size_t n = 0;

	for (size_t k = 0; k + 1 < sizeof(argv) / sizeof(argv[0]); k++)
		all[n++] = argv[k];
	for (char **p = sched_args; p && *p && n < 63; p++)
		all[n++] = *p;
	for (const char *const *p = extra; p && *p && n < 63; p++)
		all[n++] = *p;
	all[n] = NULL;
	return ty_test_daemon_start(name, all);
}

void e2e_start_scheduler(struct e2e *e, int i)
{
	if (e->sched[i]) {
		ty_test_daemon_restart(e->sched[i]);
		return;
	}
	e->sched[i] = scheduler_start(e, i == 0 ? "scheduler-1" : "scheduler-2",
				      i == 0 ? "sched-1" : "sched-2", NULL);
}

struct ty_daemon *e2e_scheduler_new(struct e2e *e, const char *name, const char *id,
				    const char *const *extra)
{
	return scheduler_start(e, name, id, extra);
}

void e2e_wait_nodes_ready(struct e2e *e)
{
	const struct ty_stack *s = ty_stack_get();

	for (int tries = 0; tries < 300; tries++) {
		struct ty_resp r = {0};
		int ready = 0;

		ty_http(&r, "GET", "/v1/nodes?state=ready", s->admin, NULL, NULL);
		if (r.status == 200) {
			json_t *items = json_object_get(r.json, "items"), *n;
			size_t i;

			json_array_foreach(items, i, n) {
				const char *id = json_string_value(json_object_get(n, "id"));
				for (int k = 0; id && k < nnodes; k++)
					ready += !strcmp(id, nodes[k]);
			}
		}
		ty_resp_free(&r);
		if (ready == nnodes)
			return;
		usleep(100 * 1000);
	}
	FAIL("the %d executors did not register as ready nodes within 30 s", nnodes);
	ty_test_abort();
}

struct e2e *e2e_get(void)
{
	struct e2e *e = &stack;

	if (!up) {
		const char *bsfile = ty_test_strf("%s/kafka.bootstrap", ty_test_workdir());
		const char *argv[32] = {need("TY_BROKER_BIN"), "--bootstrap-file", bsfile};
		size_t n = 3;

		for (char **p = broker_args; p && *p && n < 31; p++)
			argv[n++] = *p;
		argv[n] = NULL;

		ty_stack_get(); /* database, API and admin token */
		/* a broker of our own: consumer groups and node partitions of other
		 * test programs running at the same time must not mix with ours */
		e->broker = ty_test_daemon_start("broker", argv);
		for (int i = 0; i < 100 && access(bsfile, R_OK) != 0; i++)
			usleep(50 * 1000);
		REQUIRE(access(bsfile, R_OK) == 0);
		/* case scratch strings die with the case: this one must outlive it */
		e->bootstrap = strdup(ty_test_strf("@%s", bsfile));
		e->nodes = nnodes;
		for (int i = 0; i < nnodes; i++) {
			e->node[i] = nodes[i];
			e->address[i] = addrs[i];
		}
		if (broker_up)
			broker_up(e);
		e2e_start_scheduler(e, 0);
		for (int i = 0; i < nnodes; i++)
			e2e_start_executor(e, i);
		up = true;
	}
	e2e_wait_nodes_ready(e);
	e->team = ty_mk_team("e2e", 64, -1);
	e->token = ty_mk_token("member", e->team);
	e->out = ty_test_strf("%s/%s", ty_test_workdir(), ty_uniq("out"));
	REQUIRE(mkdir(e->out, 0777) == 0);
	return e;
}

long long e2e_submit(struct e2e *e, const char *command_json, const char *extra_json)
{
	struct ty_resp r = {0};
	long long id;
	const char *body = ty_test_strf("{\"team\":\"%s\",\"command\":%s,\"env\":{\"OUTDIR\":\"%s\"}%s%s}",
					e->team, command_json, e->out,
					extra_json && *extra_json ? "," : "",
					extra_json ? extra_json : "");

	ty_http(&r, "POST", "/v1/jobs", e->token, body, NULL);
	if (r.status != 201) {
		FAIL("submit failed: HTTP %d %s", r.status, r.body);
		ty_resp_free(&r);
		ty_test_abort();
	}
	id = ty_jint(r.json, "id");
	ty_resp_free(&r);
	return id;
}

json_t *e2e_wait_state(struct e2e *e, long long job, const char *states, int timeout_ms)
{
	const char *last = "?";

	for (int waited = 0; waited <= timeout_ms; waited += 100) {
		struct ty_resp r = {0};

		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), e->token, NULL, NULL);
		if (r.status == 200) {
			const char *st = ty_jstr(r.json, "state");
			char list[256];

			snprintf(list, sizeof(list), ",%s,", states);
			last = ty_test_strf("%s", st ? st : "?");
			if (st && strstr(list, ty_test_strf(",%s,", st))) {
				json_t *j = json_incref(r.json);
				ty_resp_free(&r);
				return j;
			}
		}
		ty_resp_free(&r);
		usleep(100 * 1000);
	}
	FAIL("job %lld did not reach '%s' within %d ms (last state '%s')", job, states, timeout_ms,
	     last);
	ty_test_abort();
}

json_t *e2e_attempts(struct e2e *e, long long job)
{
	struct ty_resp r = {0};
	json_t *j;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), e->token, NULL, NULL);
	REQUIRE(r.status == 200);
	j = json_incref(json_object_get(r.json, "items"));
	ty_resp_free(&r);
	return j;
}

int e2e_count_files(struct e2e *e, const char *prefix)
{
	DIR *d = opendir(e->out);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)))
			n++;
	closedir(d);
	return n;
}

const char *e2e_read(struct e2e *e, const char *name)
{
	FILE *f = fopen(ty_test_strf("%s/%s", e->out, name), "r");
	char buf[4096];
	size_t n;

	if (!f)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return ty_test_strf("%s", buf);
}

const char *e2e_read_all(struct e2e *e, const char *name)
{
	FILE *f = fopen(ty_test_strf("%s/%s", e->out, name), "r");
	char *text;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
		fclose(f);
		return NULL;
	}
	text = ty_test_alloc((size_t)n + 1);
	n = (long)fread(text, 1, (size_t)n, f);
	fclose(f);
	text[n] = '\0';
	return text;
}

/* Alive and not a zombie: a dead rank waits a moment for PID 1 to reap it. */
static bool running(long pid)
{
	char path[64], buf[512];
	FILE *f;
	const char *close_paren;
	size_t n;

	if (kill((pid_t)pid, 0) != 0 && errno != EPERM)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (!(f = fopen(path, "r")))
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')' */
	close_paren = strrchr(buf, ')');
	return !(close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z');
}

bool e2e_pid_running(long pid)
{
	return running(pid);
}

bool e2e_any_alive(struct e2e *e, const char *prefix)
{
	DIR *d = opendir(e->out);
	struct dirent *de;
	bool alive = false;

	if (!d)
		return false;
	while ((de = readdir(d))) {
		const char *text;

		if (strncmp(de->d_name, prefix, strlen(prefix)) ||
		    !(text = e2e_read(e, de->d_name)))
			continue;
		for (const char *p = text; *p;) {
			long pid = strtol(p, (char **)&p, 10);

			if (pid > 1 && running(pid)) {
				ty_test_note("process %ld (%s) is still alive", pid, de->d_name);
				alive = true;
			}
			while (*p && (*p < '0' || *p > '9'))
				p++;
		}
	}
	closedir(d);
	return alive;
}

static const char *existing(const char *var, const char *name)
{
	const char *path = ty_test_strf("%s/%s", need(var), name);

	if (access(path, R_OK) != 0) {
		FAIL("'%s' ($%s/%s) does not exist: %s", path, var, name, strerror(errno));
		ty_test_abort();
	}
	return path;
}

/* Scan one file for the secrets; false when it cannot be read. */
static bool scan_log(const char *file, const struct e2e_secret *secrets, size_t n)
{
	FILE *f = fopen(file, "r");
	char *line = NULL;
	size_t cap = 0;
	long no = 0;

	if (!f)
		return false;
	while (getline(&line, &cap, f) >= 0) {
		no++;
		for (size_t i = 0; i < n; i++)
			if (secrets[i].value && *secrets[i].value && strstr(line, secrets[i].value))
				FAIL("%s:%ld holds the %s", file, no, secrets[i].what);
	}
	free(line);
	fclose(f);
	return true;
}

int e2e_assert_no_secret_in_logs(struct e2e *e, const struct e2e_secret *secrets, size_t n)
{
	const char *tmp = getenv("TY_TEST_TMPDIR");
	struct ty_daemon *daemons[] = {e->broker, e->sched[0], e->sched[1], e->exec[0], e->exec[1]};
	int files = 0;

	for (size_t i = 0; i < sizeof(daemons) / sizeof(daemons[0]); i++) {
		if (!daemons[i])
			continue;
		if (!scan_log(ty_test_daemon_log(daemons[i]), secrets, n))
			FAIL("cannot read %s", ty_test_daemon_log(daemons[i]));
		else
			files++;
	}
	if (!scan_log(ty_test_api_log(ty_stack_get()->api), secrets, n))
		FAIL("cannot read %s", ty_test_api_log(ty_stack_get()->api));
	else
		files++;
	/* the shared PostgreSQL's log: tests/run keeps it there */
	if (tmp && scan_log(ty_test_strf("%s/log/postgres.log", tmp), secrets, n))
		files++;
	return files;
}

const char *e2e_source_path(const char *rel)
{
	return existing("TY_SOURCE_DIR", rel);
}

const char *e2e_bin_path(const char *name)
{
	return existing("TY_BIN_DIR", name);
}
