/* Integration-test fixtures: databases, the API process, HTTP, response checks. */
#include "ty_stack.h"

#include "proto.h"
#include "ty_buf.h"
#include "ty_crypto.h"
#include "ty_err.h"
#include "ty_test.h"

#include <ctype.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef TY_GOLDEN_DIR
#define TY_GOLDEN_DIR "tests/integration/golden"
#endif

#define START_TIMEOUT_MS 30000
#define TOOL_TIMEOUT_MS 60000
#define STOP_GRACE_MS 5000

struct ty_api {
	char *db_url;
	char **extra; /* NULL-terminated copy */
	pid_t pid;    /* 0 when not running */
	int port;
	char url[64];
	char log_path[PATH_MAX];
	char port_file[PATH_MAX];
	long log_start; /* log offset when the process last started */
	long log_mark;	/* log offset when the current case started */
	char *ca_file;	/* HTTPS with this CA (ty_test_api_start_tls), else NULL: HTTP */
	struct ty_api *next;
};

struct db {
	char *name;
	char *url;
	struct db *next;
};

struct owned {
	char *s;
	struct owned *next;
};

struct ty_daemon {
	char *name;
	char **argv; /* NULL-terminated copy */
	pid_t pid;   /* 0 when not running */
	char log_path[PATH_MAX];
	long log_start, log_mark;
	struct ty_daemon *next;
};

static struct owned *owned;
static struct ty_api *apis;
static struct ty_daemon *daemons;
static struct ty_api *_Atomic current;
static struct db *dbs;
static PGconn *admin_conn;
static PGconn *stack_conn; /* ty_stack_sql's */
static char workdir[PATH_MAX];
static int napis;
static atomic_int uniq_counter;
static bool any_case_failed;
static bool hooks_added;

static struct ty_stack stack;
static enum { STACK_NONE, STACK_OK, STACK_BROKEN } stack_state;

static void teardown(void);
static void on_case_start(void);
static void on_case_failed(void);

/* ---- small utilities ---- */

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n, sz);

	if (!p) {
		fprintf(stderr, "out of memory in the test harness\n");
		abort();
	}
	return p;
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p) {
		fprintf(stderr, "out of memory in the test harness\n");
		abort();
	}
	return p;
}

/* A copy of s that lives until teardown. */
static const char *keep(const char *s)
{
	struct owned *o = xcalloc(1, sizeof(*o));

	o->s = xstrdup(s);
	o->next = owned;
	owned = o;
	return o->s;
}

static void free_owned(void)
{
	while (owned) {
		struct owned *o = owned;

		owned = o->next;
		free(o->s);
		free(o);
	}
}

static void add_hooks(void)
{
	if (hooks_added)
		return;
	hooks_added = true;
	ty_test_on(TY_TEST_CASE_START, on_case_start);
	ty_test_on(TY_TEST_CASE_FAILED, on_case_failed);
	ty_test_on(TY_TEST_TEARDOWN, teardown);
}

static const char *need_env(const char *var, const char *what)
{
	const char *v = getenv(var);

	if (!v || !*v) {
		FAIL("%s is not set (%s): run the integration tests with tests/run, which starts "
		     "PostgreSQL, builds the binaries and sets it",
		     var, what);
		ty_test_abort();
	}
	return v;
}

static const char *work_dir(void)
{
	if (!workdir[0]) {
		char tmpl[PATH_MAX];

		snprintf(tmpl, sizeof(tmpl), "/tmp/ty-test-%s-XXXXXX", ty_test_program());
		if (!mkdtemp(tmpl)) {
			FAIL("cannot create a temporary directory '%s': %s", tmpl, strerror(errno));
			ty_test_abort();
		}
		snprintf(workdir, sizeof(workdir), "%s", tmpl);
	}
	add_hooks();
	return workdir;
}

static char log_key[PATH_MAX], log_pubkey[PATH_MAX];

/* The program's log credential key pair, made at first use (like the work dir). */
static void log_keys(void)
{
	struct ty_err err = {0};

	if (log_key[0])
		return;
	snprintf(log_key, sizeof(log_key), "%s/log-key.pem", work_dir());
	snprintf(log_pubkey, sizeof(log_pubkey), "%s/log-pubkey.pem", work_dir());
	if (ty_ed25519_key_generate(log_key, log_pubkey, &err)) {
		log_key[0] = '\0';
		FAIL("cannot make the log credential key pair: %s", err.msg);
		ty_test_abort();
	}
}

const char *ty_test_log_key(void)
{
	log_keys();
	return log_key;
}

const char *ty_test_log_pubkey(void)
{
	log_keys();
	return log_pubkey;
}

static long file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (long)st.st_size;
}

/* Contents of path from offset on, as a new string (at most max bytes, the end kept). */
static char *read_from(const char *path, long offset, long max)
{
	FILE *f = fopen(path, "rb");
	long size;
	char *p;
	size_t n;

	if (!f)
		return xstrdup("");
	fseek(f, 0, SEEK_END);
	size = ftell(f);
	if (size - offset > max)
		offset = size - max;
	if (offset < 0)
		offset = 0;
	fseek(f, offset, SEEK_SET);
	p = xcalloc(1, (size_t)(size - offset) + 1);
	n = fread(p, 1, (size_t)(size - offset), f);
	p[n] = '\0';
	fclose(f);
	return p;
}

static void print_log(const char *title, const char *path, long offset)
{
	char *text = read_from(path, offset, 12000);
	char *line, *save = NULL;

	printf("  --- %s (%s) ---\n", title, path);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		printf("  | %s\n", line);
	printf("  --- end ---\n");
	fflush(stdout);
	free(text);
}

/* ---- child processes ---- */

static pid_t spawn(char *const argv[], int out_fd, int err_fd)
{
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		int in = open("/dev/null", O_RDONLY);

		/* a test killed by its timeout must not leave a server behind */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (in >= 0)
			dup2(in, 0);
		dup2(out_fd, 1);
		dup2(err_fd, 2);
		execv(argv[0], argv);
		dprintf(2, "cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

/* 0 when pid exited within timeout_ms (status set), -1 when it still runs. */
static int wait_exit(pid_t pid, int timeout_ms, int *status)
{
	long long deadline = now_ms() + timeout_ms;

	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return 0;
		if (now_ms() >= deadline)
			return -1;
		sleep_ms(10);
	}
}

static void describe_status(char *out, size_t sz, int status)
{
	if (WIFEXITED(status))
		snprintf(out, sz, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, sz, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(out, sz, "status 0x%x", status);
}

static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	if (fd < 0) {
		FAIL("cannot open '%s': %s", path, strerror(errno));
		ty_test_abort();
	}
	return fd;
}

static void log_command(int fd, char *const argv[])
{
	dprintf(fd, "=== test harness runs:");
	for (int i = 0; argv[i]; i++)
		dprintf(fd, " %s", argv[i]);
	dprintf(fd, "\n");
}

/*
 * Run a tool to completion: stdout to out_path (or the log), stderr to the
 * log. Ends the case when it cannot run, times out or exits non-zero.
 */
static void run_tool(char *const argv[], const char *log_path, const char *out_path,
		     const char *what)
{
	int log_fd = open_log(log_path), out_fd = log_fd, status = 0;
	long offset = file_size(log_path);
	char desc[128];
	pid_t pid;

	if (out_path) {
		out_fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (out_fd < 0) {
			close(log_fd);
			FAIL("cannot create '%s': %s", out_path, strerror(errno));
			ty_test_abort();
		}
	}
	log_command(log_fd, argv);
	pid = spawn(argv, out_fd, log_fd);
	if (out_fd != log_fd)
		close(out_fd);
	close(log_fd);
	if (pid < 0) {
		FAIL("fork: %s", strerror(errno));
		ty_test_abort();
	}
	if (wait_exit(pid, TOOL_TIMEOUT_MS, &status)) {
		kill(pid, SIGKILL);
		wait_exit(pid, 5000, &status);
		print_log(what, log_path, offset);
		FAIL("%s did not finish within %d s", what, TOOL_TIMEOUT_MS / 1000);
		ty_test_abort();
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		describe_status(desc, sizeof(desc), status);
		print_log(what, log_path, offset);
		FAIL("%s failed: %s", what, desc);
		ty_test_abort();
	}
}

/* ---- databases ---- */

static PGconn *admin(void)
{
	const char *url = need_env("TY_TEST_PG_URL", "a libpq URL to the postgres database of a "
						     "test server, as a superuser");

	if (admin_conn && PQstatus(admin_conn) != CONNECTION_OK)
		PQreset(admin_conn);
	if (!admin_conn) {
		add_hooks();
		admin_conn = PQconnectdb(url);
	}
	if (PQstatus(admin_conn) != CONNECTION_OK) {
		FAIL("cannot connect to TY_TEST_PG_URL '%s': %s", url, PQerrorMessage(admin_conn));
		ty_test_abort();
	}
	return admin_conn;
}

void ty_test_pg_restart(const char *mode)
{
	const char *ctl = need_env("TY_TEST_PG_CTL", "the pg_ctl of the test server");
	const char *data = need_env("TY_TEST_PG_DATA", "the data directory of the test server");
	char m[32];
	char *as_root[] = {"/usr/sbin/runuser", "-u", "postgres", "--", (char *)ctl, "-D",
			   (char *)data, "-m", m, "-w", "-t", "60", "restart", NULL};
	char *as_user[] = {(char *)ctl, "-D", (char *)data, "-m", m, "-w", "-t", "60", "restart",
			   NULL};

	snprintf(m, sizeof(m), "%s", mode);
	run_tool(geteuid() == 0 ? as_root : as_user,
		 ty_test_strf("%s/pg_ctl.log", work_dir()), NULL, "pg_ctl restart");
	if (admin_conn)
		PQreset(admin_conn);
	if (stack_conn)
		PQreset(stack_conn);
}

/* pg_ctl -D $TY_TEST_PG_DATA -w -t 60 args... as the server's user. */
static void pg_ctl(const char *const *args, const char *what)
{
	const char *ctl = need_env("TY_TEST_PG_CTL", "the pg_ctl of the test server");
	const char *data = need_env("TY_TEST_PG_DATA", "the data directory of the test server");
	const char *argv[24];
	size_t n = 0;

	if (geteuid() == 0) {
		argv[n++] = "/usr/sbin/runuser";
		argv[n++] = "-u";
		argv[n++] = "postgres";
		argv[n++] = "--";
	}
	argv[n++] = ctl;
	argv[n++] = "-D";
	argv[n++] = data;
	argv[n++] = "-w";
	argv[n++] = "-t";
	argv[n++] = "60";
	while (*args && n < 23)
		argv[n++] = *args++;
	argv[n] = NULL;
	run_tool((char *const *)argv, ty_test_strf("%s/pg_ctl.log", work_dir()), NULL, what);
}

void ty_test_pg_stop(const char *mode)
{
	pg_ctl((const char *const[]){"-m", mode, "stop", NULL}, "pg_ctl stop");
}

void ty_test_pg_start(void)
{
	const char *url = need_env("TY_TEST_PG_URL", "the test server");
	const char *host = strstr(url, "@127.0.0.1:");
	int port = host ? atoi(host + strlen("@127.0.0.1:")) : 0;

	if (port <= 0) {
		FAIL("cannot find the port of TY_TEST_PG_URL '%s' (postgresql://...@127.0.0.1:PORT/...)",
		     url);
		ty_test_abort();
	}
	pg_ctl((const char *const[]){"-o", ty_test_strf("-p %d", port), "start", NULL},
	       "pg_ctl start");
	if (admin_conn)
		PQreset(admin_conn);
	if (stack_conn)
		PQreset(stack_conn);
}

const char *ty_test_sql(const char *sql)
{
	PGconn *c = admin();
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	const char *v = "";

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		FAIL("SQL '%s' failed: %s", sql, PQresultErrorMessage(r));
		PQclear(r);
		ty_test_abort();
	}
	if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0)
		v = ty_test_strf("%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

/* base with its database replaced by name; base is a URL or key=value pairs. */
static char *url_with_db(const char *base, const char *name)
{
	const char *scheme = strstr(base, "://"), *auth_end, *query;
	struct ty_buf b = TY_BUF_INIT;

	if (!scheme || (strncmp(base, "postgresql://", 13) && strncmp(base, "postgres://", 11))) {
		ty_buf_printf(&b, "%s dbname=%s", base, name);
		return ty_buf_detach(&b);
	}
	auth_end = scheme + 3 + strcspn(scheme + 3, "/?");
	query = strchr(auth_end, '?');
	ty_buf_append(&b, base, (size_t)(auth_end - base));
	ty_buf_printf(&b, "/%s%s", name, query ? query : "");
	return ty_buf_detach(&b);
}

const char *ty_test_db_new(void)
{
	static int seq;
	PGconn *c = admin();
	char name[64], *ident, *sql;
	PGresult *r;
	struct db *d;
	size_t i;

	snprintf(name, sizeof(name), "ty_%.30s_%d_%d", ty_test_program(), (int)getpid(), ++seq);
	for (i = 0; name[i]; i++)
		name[i] =
		    isalnum((unsigned char)name[i]) ? (char)tolower((unsigned char)name[i]) : '_';
	ident = PQescapeIdentifier(c, name, strlen(name));
	sql = ty_test_strf("CREATE DATABASE %s", ident);
	PQfreemem(ident);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		FAIL("cannot create database '%s': %s", name, PQresultErrorMessage(r));
		PQclear(r);
		ty_test_abort();
	}
	PQclear(r);
	d = xcalloc(1, sizeof(*d));
	d->name = xstrdup(name);
	d->url = url_with_db(getenv("TY_TEST_PG_URL"), name);
	d->next = dbs;
	dbs = d;
	return d->url;
}

static void drop_dbs(void)
{
	bool keep = getenv("TY_TEST_KEEP") && *getenv("TY_TEST_KEEP");

	while (dbs) {
		struct db *d = dbs;

		dbs = d->next;
		if (keep) {
			printf("  # kept database %s\n", d->url);
		} else if (admin_conn && PQstatus(admin_conn) == CONNECTION_OK) {
			char *ident = PQescapeIdentifier(admin_conn, d->name, strlen(d->name));
			char sql[256];
			PGresult *r;

			snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s WITH (FORCE)",
				 ident ? ident : "\"?\"");
			PQfreemem(ident);
			r = PQexec(admin_conn, sql);
			if (PQresultStatus(r) != PGRES_COMMAND_OK)
				printf("  # cannot drop database %s: %s", d->name,
				       PQresultErrorMessage(r));
			PQclear(r);
		}
		free(d->name);
		free(d->url);
		free(d);
	}
}

/* ---- the API server ---- */

static const char *api_bin(void)
{
	return need_env("TY_API_BIN", "the path of the trainyard-api binary");
}

static int read_port(const char *path)
{
	char buf[32] = "";
	FILE *f = fopen(path, "r");
	char *end;
	long port;

	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	port = strtol(buf, &end, 10);
	if (end == buf || port <= 0 || port > 65535)
		return 0;
	return (int)port;
}

static void api_fail(struct ty_api *api, const char *fmt, const char *detail)
{
	print_log("trainyard-api log", api->log_path, api->log_start);
	FAIL(fmt, detail);
	ty_test_abort();
}

static void api_spawn(struct ty_api *api)
{
	const char *bin = api_bin();
	char *argv[64];
	int argc = 0, log_fd, status = 0;
	long long deadline;
	char desc[128];

	argv[argc++] = (char *)bin;
	argv[argc++] = "--database-url";
	argv[argc++] = api->db_url;
	argv[argc++] = "--listen-addr";
	argv[argc++] = "127.0.0.1";
	argv[argc++] = "--port";
	argv[argc++] = "0";
	argv[argc++] = "--port-file";
	argv[argc++] = api->port_file;
	/* before the extra arguments, so that a test can give another (the last wins) */
	argv[argc++] = "--log-key";
	argv[argc++] = (char *)ty_test_log_key();
	for (int i = 0; api->extra[i] && argc < 63; i++)
		argv[argc++] = api->extra[i];
	argv[argc] = NULL;

	unlink(api->port_file);
	api->log_start = file_size(api->log_path);
	log_fd = open_log(api->log_path);
	log_command(log_fd, argv);
	api->pid = spawn(argv, log_fd, log_fd);
	close(log_fd);
	if (api->pid < 0) {
		api->pid = 0;
		FAIL("fork: %s", strerror(errno));
		ty_test_abort();
	}

	deadline = now_ms() + START_TIMEOUT_MS;
	for (;;) {
		struct ty_resp r = {0};
		int port;

		if (waitpid(api->pid, &status, WNOHANG) == api->pid) {
			api->pid = 0;
			describe_status(desc, sizeof(desc), status);
			api_fail(api, "trainyard-api exited during start-up: %s", desc);
		}
		if ((port = read_port(api->port_file)) > 0) {
			api->port = port;
			snprintf(api->url, sizeof(api->url), "%s://127.0.0.1:%d",
				 api->ca_file ? "https" : "http", port);
			if (ty_http_raw(&r, api, "GET", "/healthz", NULL, NULL, 0, NULL) == 200) {
				ty_resp_free(&r);
				break;
			}
			ty_resp_free(&r);
		}
		if (now_ms() > deadline) {
			ty_test_api_stop(api);
			api_fail(api,
				 "trainyard-api did not answer GET /healthz with 200 within %s",
				 "30 s (see --port-file)");
		}
		sleep_ms(20);
	}
	current = api;
}

static struct ty_api *api_start(const char *db_url, const char *const *extra_args,
				const char *ca_file, bool migrate_first)
{
	const char *bin = api_bin();
	const char *dir = work_dir();
	struct ty_api *api;
	int n = 0;
	char *migrate[] = {(char *)bin, "--database-url", NULL, "--migrate", NULL};

	api = xcalloc(1, sizeof(*api));
	api->db_url = xstrdup(db_url);
	api->ca_file = ca_file ? xstrdup(ca_file) : NULL;
	while (extra_args && extra_args[n])
		n++;
	api->extra = xcalloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		api->extra[i] = xstrdup(extra_args[i]);
	napis++;
	snprintf(api->log_path, sizeof(api->log_path), "%s/api-%d.log", dir, napis);
	snprintf(api->port_file, sizeof(api->port_file), "%s/api-%d.port", dir, napis);
	api->next = apis;
	apis = api;

	migrate[2] = api->db_url;
	api->log_start = file_size(api->log_path);
	if (migrate_first)
		run_tool(migrate, api->log_path, NULL, "trainyard-api --migrate");
	api_spawn(api);
	return api;
}

struct ty_api *ty_test_api_start(const char *db_url, const char *const *extra_args)
{
	return api_start(db_url, extra_args, NULL, true);
}

struct ty_api *ty_test_api_start_as_is(const char *db_url, const char *const *extra_args)
{
	return api_start(db_url, extra_args, NULL, false);
}

struct ty_api *ty_test_api_start_tls(const char *db_url, const char *const *extra_args,
				     const char *ca_file)
{
	return api_start(db_url, extra_args, ca_file, true);
}

void ty_test_api_kill(struct ty_api *api)
{
	int status = 0;

	if (!api || !api->pid)
		return;
	kill(api->pid, SIGKILL);
	wait_exit(api->pid, STOP_GRACE_MS, &status);
	api->pid = 0;
	api->url[0] = '\0';
	if (current == api)
		current = stack_state == STACK_OK && stack.api != api && stack.api->pid ? stack.api
											: NULL;
}

void ty_test_api_stop(struct ty_api *api)
{
	int status = 0;
	char desc[128], *text;

	if (!api || !api->pid)
		return;
	kill(api->pid, SIGTERM);
	if (wait_exit(api->pid, STOP_GRACE_MS, &status)) {
		ty_test_note("trainyard-api did not stop within 5 s of SIGTERM: killing it");
		kill(api->pid, SIGKILL);
		wait_exit(api->pid, STOP_GRACE_MS, &status);
	} else if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		describe_status(desc, sizeof(desc), status);
		ty_test_note("trainyard-api ended on SIGTERM with %s", desc);
	}
	api->pid = 0;
	api->url[0] = '\0';
	if (current == api)
		current = stack_state == STACK_OK && stack.api != api && stack.api->pid ? stack.api
											: NULL;
	/* memory errors in the server are failures of whichever case sees them */
	text = read_from(api->log_path, api->log_start, 1L << 22);
	if (strstr(text, "ERROR: AddressSanitizer") || strstr(text, "ERROR: LeakSanitizer") ||
	    strstr(text, "runtime error:")) {
		print_log("trainyard-api log", api->log_path, api->log_start);
		FAIL("trainyard-api reported a sanitizer error (log %s)", api->log_path);
	}
	free(text);
}

void ty_test_api_restart(struct ty_api *api)
{
	ty_test_api_stop(api);
	api_spawn(api);
}

const char *ty_test_api_url(const struct ty_api *api)
{
	return api->url;
}

const char *ty_test_api_log(const struct ty_api *api)
{
	return api->log_path;
}

void ty_test_api_use(struct ty_api *api)
{
	current = api;
}

const char *ty_test_admin_token(const char *db_url, const char *name)
{
	const char *dir = work_dir();
	char *argv[] = {(char *)api_bin(),   "--database-url", (char *)db_url,
			"--bootstrap-token", (char *)name,     NULL};
	char *out_path = ty_test_strf("%s/token.out", dir);
	char *log_path = ty_test_strf("%s/tools.log", dir);
	char *text, *s, *e;
	const char *tok;

	run_tool(argv, log_path, out_path, "trainyard-api --bootstrap-token");
	text = read_from(out_path, 0, 4096);
	unlink(out_path);
	for (s = text; isspace((unsigned char)*s); s++)
		;
	for (e = s + strlen(s); e > s && isspace((unsigned char)e[-1]); e--)
		;
	*e = '\0';
	if (!*s || strchr(s, '\n') || strchr(s, ' ')) {
		FAIL("trainyard-api --bootstrap-token printed '%s', not one token", text);
		free(text);
		ty_test_abort();
	}
	/* lives as long as the program: the stack keeps it across cases */
	tok = keep(s);
	free(text);
	return tok;
}

static void free_apis(void)
{
	while (apis) {
		struct ty_api *api = apis;

		apis = api->next;
		ty_test_api_stop(api);
		for (int i = 0; api->extra[i]; i++)
			free(api->extra[i]);
		free(api->extra);
		free(api->db_url);
		free(api->ca_file);
		free(api);
	}
}

/*
 * More arguments for the shared stack's API from $TY_STACK_API_ARGS, split
 * at spaces (e.g. "--ui-dir /path/to/dist"); NULL when unset. Set by the
 * stack launcher (tests/e2e/stack.c), never by ctest.
 */
static const char *const *stack_api_args(void)
{
	static char *argv[17];
	const char *env = getenv("TY_STACK_API_ARGS");
	char *copy, *save = NULL;
	int n = 0;

	if (!env || !*env)
		return NULL;
	copy = strdup(env);
	for (char *t = strtok_r(copy, " ", &save); t && n < 16; t = strtok_r(NULL, " ", &save))
		argv[n++] = t;
	argv[n] = NULL;
	return (const char *const *)argv;
}

const struct ty_stack *ty_stack_get(void)
{
	if (stack_state == STACK_OK) {
		if (!current)
			current = stack.api;
		return &stack;
	}
	if (stack_state == STACK_BROKEN) {
		FAIL("the shared test stack failed to start in an earlier case (see above)");
		ty_test_abort();
	}
	stack_state = STACK_BROKEN; /* until every step below has worked */
	stack.db_url = ty_test_db_new();
	stack.api = ty_test_api_start(stack.db_url, stack_api_args());
	stack.admin = ty_test_admin_token(stack.db_url, "test-admin");
	stack_state = STACK_OK;
	return &stack;
}

/* ---- hooks ---- */

static void on_case_start(void)
{
	for (struct ty_api *a = apis; a; a = a->next)
		a->log_mark = file_size(a->log_path);
	for (struct ty_daemon *d = daemons; d; d = d->next)
		d->log_mark = file_size(d->log_path);
}

static void on_case_failed(void)
{
	any_case_failed = true;
	for (struct ty_api *a = apis; a; a = a->next)
		if (file_size(a->log_path) > a->log_mark)
			print_log("trainyard-api log during this case", a->log_path, a->log_mark);
	for (struct ty_daemon *d = daemons; d; d = d->next)
		if (file_size(d->log_path) > d->log_mark)
			print_log(d->name, d->log_path, d->log_mark);
}

static void remove_workdir(void)
{
	DIR *d;
	struct dirent *e;

	if (!workdir[0] || !(d = opendir(workdir)))
		return;
	while ((e = readdir(d))) {
		char path[PATH_MAX + 256];

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", workdir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(workdir);
}

static void free_daemons(void)
{
	while (daemons) {
		struct ty_daemon *d = daemons;

		daemons = d->next;
		ty_test_daemon_stop(d, STOP_GRACE_MS);
		for (int i = 0; d->argv[i]; i++)
			free(d->argv[i]);
		free(d->argv);
		free(d->name);
		free(d);
	}
}

static void teardown(void)
{
	bool keep = getenv("TY_TEST_KEEP") && *getenv("TY_TEST_KEEP");

	/* daemons first: an executor or scheduler may still talk to the API */
	free_daemons();
	free_apis();
	drop_dbs();
	free_owned();
	stack_state = STACK_NONE;
	if (admin_conn)
		PQfinish(admin_conn);
	admin_conn = NULL;
	if (workdir[0]) {
		if (keep || any_case_failed || ty_test_failed())
			printf("  # logs kept in %s\n", workdir);
		else
			remove_workdir();
	}
}

/* ---- SQL on the shared stack's database ---- */


static void stack_conn_close(void)
{
	if (stack_conn)
		PQfinish(stack_conn);
	stack_conn = NULL;
}

const char *ty_stack_sql(const char *sql, ...)
{
	const char *params[16];
	const char *v = "";
	int n = 0;
	va_list ap;
	PGresult *r;

	va_start(ap, sql);
	while (n < 16 && (params[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	if (!stack_conn) {
		stack_conn = PQconnectdb(ty_stack_get()->db_url);
		ty_test_on(TY_TEST_TEARDOWN, stack_conn_close);
	}
	if (PQstatus(stack_conn) != CONNECTION_OK) {
		FAIL("cannot connect to the test database: %s", PQerrorMessage(stack_conn));
		ty_test_abort();
	}
	r = PQexecParams(stack_conn, sql, n, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK) {
		FAIL("SQL '%s' failed: %s", sql, PQresultErrorMessage(r));
		PQclear(r);
		ty_test_abort();
	}
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0)
		v = ty_test_strf("%s", PQgetvalue(r, 0, 0));
	PQclear(r);
	return v;
}

/* ---- other daemons ---- */

const char *ty_test_workdir(void)
{
	return work_dir();
}

/* ---- keys ---- */

static pthread_mutex_t keys_mu = PTHREAD_MUTEX_INITIALIZER;
static char *key_paths[3]; /* private, public, node secret */
static struct ty_ed25519_key *signer;

static void keys_made(void)
{
	const char *env[3] = {getenv("TY_TEST_DISPATCH_KEY"), getenv("TY_TEST_DISPATCH_PUBKEY"),
			      getenv("TY_TEST_NODE_SECRET")};
	struct ty_err err = {0};

	if (key_paths[0])
		return;
	if (env[0] && *env[0] && env[1] && *env[1] && env[2] && *env[2]) {
		for (int i = 0; i < 3; i++)
			key_paths[i] = xstrdup(env[i]);
	} else {
		char secret[65];
		FILE *f;

		key_paths[0] = xstrdup(ty_test_strf("%s/dispatch.pem", work_dir()));
		key_paths[1] = xstrdup(ty_test_strf("%s/dispatch.pub.pem", work_dir()));
		key_paths[2] = xstrdup(ty_test_strf("%s/node-secret", work_dir()));
		if (ty_ed25519_key_generate(key_paths[0], key_paths[1], &err)) {
			FAIL("cannot make the test dispatch key: %s", err.msg);
			ty_test_abort();
		}
		/* 64 hex digits of a random token's hash, as `openssl rand -hex 32` writes */
		if (ty_token_new(secret, sizeof(secret))) {
			FAIL("cannot make the test node secret");
			ty_test_abort();
		}
		ty_sha256_hex(secret, secret, strlen(secret));
		if (!(f = fopen(key_paths[2], "w")) || fprintf(f, "%s\n", secret) < 0 ||
		    fclose(f)) {
			FAIL("cannot write '%s'", key_paths[2]);
			ty_test_abort();
		}
		chmod(key_paths[2], 0600);
	}
	if (ty_ed25519_key_load(&signer, key_paths[0], true, &err)) {
		FAIL("test dispatch key: %s", err.msg);
		ty_test_abort();
	}
}

static const char *key_path(int i)
{
	const char *p;

	pthread_mutex_lock(&keys_mu);
	keys_made();
	p = key_paths[i];
	pthread_mutex_unlock(&keys_mu);
	return p;
}

const char *ty_test_dispatch_key(void)
{
	return key_path(0);
}

const char *ty_test_dispatch_pubkey(void)
{
	return key_path(1);
}

const char *ty_test_node_secret(void)
{
	return key_path(2);
}

const struct ty_ed25519_key *ty_test_dispatch_signer(void)
{
	key_path(0);
	return signer;
}

const char *ty_test_node_key(const char *node)
{
	char secret[PROTO_NODE_SECRET_MAX + 1], key[PROTO_NODE_KEY_LEN + 1];
	struct ty_err err = {0};
	size_t n;

	if (proto_node_secret_load(secret, &n, ty_test_node_secret(), &err)) {
		FAIL("test node secret: %s", err.msg);
		ty_test_abort();
	}
	proto_node_key(key, secret, n, node);
	return ty_test_strf("%s", key);
}

const char *ty_test_node_key_file(const char *node)
{
	const char *path = ty_test_strf("%s/node-%s.key", work_dir(), node);
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%s\n", ty_test_node_key(node)) < 0 || fclose(f)) {
		FAIL("cannot write '%s'", path);
		ty_test_abort();
	}
	chmod(path, 0600);
	return path;
}

static void daemon_spawn(struct ty_daemon *d)
{
	int fd = open_log(d->log_path);

	d->log_start = file_size(d->log_path);
	log_command(fd, d->argv);
	d->pid = spawn(d->argv, fd, fd);
	close(fd);
	if (d->pid < 0) {
		d->pid = 0;
		FAIL("fork: %s", strerror(errno));
		ty_test_abort();
	}
}

struct ty_daemon *ty_test_daemon_start(const char *name, const char *const *argv)
{
	struct ty_daemon *d = xcalloc(1, sizeof(*d));
	int n = 0;

	while (argv[n])
		n++;
	d->name = xstrdup(name);
	d->argv = xcalloc((size_t)n + 1, sizeof(char *));
	for (int i = 0; i < n; i++)
		d->argv[i] = xstrdup(argv[i]);
	snprintf(d->log_path, sizeof(d->log_path), "%s/%s.log", work_dir(), name);
	d->next = daemons;
	daemons = d;
	daemon_spawn(d);
	return d;
}

static void daemon_reaped(struct ty_daemon *d)
{
	char *text = read_from(d->log_path, d->log_start, 1L << 22);

	d->pid = 0;
	if (strstr(text, "ERROR: AddressSanitizer") || strstr(text, "ERROR: LeakSanitizer") ||
	    strstr(text, "runtime error:")) {
		print_log(d->name, d->log_path, d->log_start);
		FAIL("%s reported a sanitizer error (log %s)", d->name, d->log_path);
	}
	free(text);
}

int ty_test_daemon_stop(struct ty_daemon *d, int grace_ms)
{
	int status = 0;

	if (!d || !d->pid)
		return -1;
	kill(d->pid, SIGTERM);
	if (wait_exit(d->pid, grace_ms, &status)) {
		ty_test_note("%s did not stop within %d ms of SIGTERM: killing it", d->name,
			     grace_ms);
		kill(d->pid, SIGKILL);
		wait_exit(d->pid, STOP_GRACE_MS, &status);
	}
	daemon_reaped(d);
	return status;
}

void ty_test_daemon_kill(struct ty_daemon *d)
{
	int status;

	if (!d || !d->pid)
		return;
	kill(d->pid, SIGKILL);
	wait_exit(d->pid, STOP_GRACE_MS, &status);
	d->pid = 0; /* no sanitizer report after SIGKILL */
}

void ty_test_daemon_restart(struct ty_daemon *d)
{
	if (d->pid)
		ty_test_daemon_stop(d, STOP_GRACE_MS);
	daemon_spawn(d);
}

void ty_test_daemon_signal(struct ty_daemon *d, int sig)
{
	if (d && d->pid)
		kill(d->pid, sig);
}

bool ty_test_daemon_running(struct ty_daemon *d)
{
	int status;

	if (!d || !d->pid)
		return false;
	if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
		daemon_reaped(d);
		return false;
	}
	return true;
}

int ty_test_daemon_pid(const struct ty_daemon *d)
{
	return d ? (int)d->pid : 0;
}

const char *ty_test_daemon_log(const struct ty_daemon *d)
{
	return d->log_path;
}

bool ty_test_daemon_wait_log(struct ty_daemon *d, const char *needle, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;

	for (;;) {
		char *text = read_from(d->log_path, d->log_start, 1L << 24);
		bool found = strstr(text, needle) != NULL;

		free(text);
		if (found)
			return true;
		if (now_ms() >= deadline)
			return false;
		sleep_ms(20);
	}
}

/* ---- HTTP ---- */

__attribute__((constructor)) static void http_init(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

__attribute__((destructor)) static void http_fini(void)
{
	curl_global_cleanup();
}

static void free_headers(struct ty_resp *r)
{
	for (size_t i = 0; i < r->nheaders; i++) {
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	r->headers = NULL;
	r->nheaders = 0;
}

void ty_resp_free(struct ty_resp *r)
{
	if (!r)
		return;
	free_headers(r);
	free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof(*r));
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct ty_resp *r = ud;
	size_t len = size * n, nl, vl;
	const char *colon, *v;
	struct ty_header *h;

	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		free_headers(r); /* a new response (after 100 Continue) */
		return len;
	}
	if (!(colon = memchr(p, ':', len)))
		return len;
	nl = (size_t)(colon - p);
	v = colon + 1;
	vl = len - nl - 1;
	while (vl && (*v == ' ' || *v == '\t'))
		v++, vl--;
	while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
		vl--;
	h = realloc(r->headers, (r->nheaders + 1) * sizeof(*h));
	if (!h)
		return 0;
	r->headers = h;
	h[r->nheaders].name = strndup(p, nl);
	h[r->nheaders].value = strndup(v, vl);
	r->nheaders++;
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	return ty_buf_append(ud, p, size * n) ? 0 : size * n;
}

const char *ty_resp_header(const struct ty_resp *r, const char *name)
{
	const char *v = NULL;

	for (size_t i = 0; i < r->nheaders; i++)
		if (r->headers[i].name && !strcasecmp(r->headers[i].name, name))
			v = r->headers[i].value;
	return v;
}

int ty_http_raw(struct ty_resp *r, struct ty_api *api, const char *method, const char *path,
		const char *token, const char *body, size_t body_len, const char *const *headers)
{
	struct curl_slist *hl = NULL;
	struct ty_buf b = TY_BUF_INIT;
	char *url = NULL, *auth = NULL;
	bool has_ct = false;
	CURLcode rc;
	CURL *c;
	long code = 0;
	const char *ct;

	ty_resp_free(r);
	if (!api || !api->url[0]) {
		snprintf(r->error, sizeof(r->error), "no API server is running");
		r->body = xstrdup("");
		return 0;
	}
	if (!(c = curl_easy_init())) {
		snprintf(r->error, sizeof(r->error), "curl_easy_init failed");
		r->body = xstrdup("");
		return 0;
	}
	url = xcalloc(1, strlen(api->url) + strlen(path) + 1);
	strcpy(url, api->url);
	strcat(url, path);
	for (int i = 0; headers && headers[i]; i++)
		if (!strncasecmp(headers[i], "content-type:", 13))
			has_ct = true;
	if (token) {
		auth = xcalloc(1, strlen(token) + 32);
		sprintf(auth, "Authorization: Bearer %s", token);
		hl = curl_slist_append(hl, auth);
	}
	if (!has_ct)
		hl = curl_slist_append(hl,
				       body ? "Content-Type: application/json" : "Content-Type:");
	hl = curl_slist_append(hl, "Expect:");
	for (int i = 0; headers && headers[i]; i++)
		hl = curl_slist_append(hl, headers[i]);

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 90000L);
	curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	if (api->ca_file)
		curl_easy_setopt(c, CURLOPT_CAINFO, api->ca_file);
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (body || !strcmp(method, "POST") || !strcmp(method, "PATCH") ||
		 !strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? body_len : 0));
	}
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);

	rc = curl_easy_perform(c);
	if (rc == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		r->status = (int)code;
	} else {
		snprintf(r->error, sizeof(r->error), "%s %s: %s", method, path,
			 curl_easy_strerror(rc));
	}
	r->body_len = b.len;
	r->body = b.data ? ty_buf_detach(&b) : xstrdup("");
	if (r->status && (ct = ty_resp_header(r, "Content-Type")) && strstr(ct, "json"))
		r->json = json_loadb(r->body, r->body_len, JSON_DECODE_ANY, NULL);

	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(url);
	free(auth);
	ty_buf_free(&b);
	return r->status;
}

int ty_http(struct ty_resp *r, const char *method, const char *path, const char *token,
	    const char *body, const char *const *headers)
{
	return ty_http_raw(r, current, method, path, token, body, body ? strlen(body) : 0, headers);
}

/* ---- checks ---- */

json_t *ty_jpath(const json_t *root, const char *path)
{
	json_t *v = (json_t *)root;
	const char *p = path;

	while (v && *p) {
		if (*p == '[') {
			char *end;
			long i = strtol(p + 1, &end, 10);

			if (*end != ']' || !json_is_array(v))
				return NULL;
			v = json_array_get(v, (size_t)i);
			p = end + 1;
		} else {
			size_t n = strcspn(p, ".[");
			char key[256];

			if (n >= sizeof(key) || !json_is_object(v))
				return NULL;
			memcpy(key, p, n);
			key[n] = '\0';
			v = json_object_get(v, key);
			p += n;
		}
		if (*p == '.')
			p++;
	}
	return v;
}

long long ty_jint(const json_t *root, const char *path)
{
	json_t *v = ty_jpath(root, path);

	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

const char *ty_jstr(const json_t *root, const char *path)
{
	return json_string_value(ty_jpath(root, path));
}

bool ty_jhas_int(const json_t *root, long long n)
{
	const char *key;
	json_t *item;
	size_t i;

	if (json_is_integer(root))
		return json_integer_value(root) == n;
	if (json_is_array(root))
		json_array_foreach (root, i, item)
			if (ty_jhas_int(item, n))
				return true;
	if (json_is_object(root))
		json_object_foreach ((json_t *)root, key, item)
			if (ty_jhas_int(item, n))
				return true;
	return false;
}

static const char *short_body(const struct ty_resp *r)
{
	if (!r->status)
		return r->error;
	if (r->body_len > 700)
		return ty_test_strf("%.700s...(%zu bytes)", r->body, r->body_len);
	return r->body ? r->body : "";
}

bool ty_check_status(const struct ty_resp *r, int status, const char *file, int line)
{
	if (r->status == status)
		return true;
	ty_test_fail_at(file, line, "HTTP status %d, want %d; body: %s", r->status, status,
			short_body(r));
	return false;
}

bool ty_check_problem(const struct ty_resp *r, int status, const char *code, const char *field,
		      const char *file, int line)
{
	const char *ct = ty_resp_header(r, "Content-Type");
	const json_t *j = r->json;
	const char *got_field = ty_jstr(j, "field");
	bool named = field && field != TY_ANY_FIELD && field != TY_FIELD_UNCHECKED;
	char why[512] = "";

	if (r->status != status)
		snprintf(why, sizeof(why), "HTTP status %d, want %d", r->status, status);
	else if (!ct || strncmp(ct, "application/problem+json", 24) != 0)
		snprintf(why, sizeof(why), "Content-Type '%s', want application/problem+json",
			 ct ? ct : "(none)");
	else if (!json_is_object(j))
		snprintf(why, sizeof(why), "body is not a JSON object");
	else if (!ty_jstr(j, "code") || strcmp(ty_jstr(j, "code"), code) != 0)
		snprintf(why, sizeof(why), "code '%s', want '%s'",
			 ty_jstr(j, "code") ? ty_jstr(j, "code") : "(none)", code);
	else if (field == NULL && ty_jpath(j, "field") && !json_is_null(ty_jpath(j, "field")))
		snprintf(why, sizeof(why), "field '%s' present, want none",
			 got_field ? got_field : "(not a string)");
	else if (field == TY_FIELD_UNCHECKED)
		;
	else if (field == TY_ANY_FIELD && !got_field)
		snprintf(why, sizeof(why), "no field, want one");
	else if (named && (!got_field || strcmp(got_field, field) != 0))
		snprintf(why, sizeof(why), "field '%s', want '%s'",
			 got_field ? got_field : "(none)", field);
	else if (ty_jint(j, "status") != status)
		snprintf(why, sizeof(why), "member status %lld, want %d", ty_jint(j, "status"),
			 status);
	else if (!ty_jstr(j, "title") || !*ty_jstr(j, "title"))
		snprintf(why, sizeof(why), "no title");
	else if (!ty_jstr(j, "detail") || !*ty_jstr(j, "detail"))
		snprintf(why, sizeof(why), "no detail");
	else if (!ty_jstr(j, "type") ||
		 strcmp(ty_jstr(j, "type"),
			ty_test_strf("https://trainyard.dev/problems/%s", code)))
		snprintf(why, sizeof(why), "type '%s', want 'https://trainyard.dev/problems/%s'",
			 ty_jstr(j, "type") ? ty_jstr(j, "type") : "(none)", code);
	if (!why[0])
		return true;
	ty_test_fail_at(file, line, "not the problem %d %s%s%s: %s; body: %s", status, code,
			named ? " field " : "", named ? field : "", why, short_body(r));
	return false;
}

bool ty_check_jint(const json_t *root, const char *path, long long want, const char *file, int line)
{
	json_t *v = ty_jpath(root, path);
	char *text;

	if (json_is_integer(v) && json_integer_value(v) == want)
		return true;
	text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	ty_test_fail_at(file, line, "%s is %s, want %lld", path, text ? text : "missing", want);
	free(text);
	return false;
}

bool ty_check_jstr(const json_t *root, const char *path, const char *want, const char *file,
		   int line)
{
	json_t *v = ty_jpath(root, path);
	char *text;

	if (json_is_string(v) && !strcmp(json_string_value(v), want))
		return true;
	text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	ty_test_fail_at(file, line, "%s is %s, want \"%s\"", path, text ? text : "missing", want);
	free(text);
	return false;
}

bool ty_check_jnull(const json_t *root, const char *path, const char *file, int line)
{
	json_t *v = ty_jpath(root, path);
	char *text;

	if (json_is_null(v))
		return true;
	text = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	ty_test_fail_at(file, line, "%s is %s, want null", path, text ? text : "missing");
	free(text);
	return false;
}

bool ty_check_jtime(const json_t *root, const char *path, const char *file, int line)
{
	static const char shape[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	const char *v = ty_jstr(root, path);
	bool ok = v && strlen(v) == sizeof(shape) - 1;

	for (size_t i = 0; ok && i < sizeof(shape) - 1; i++)
		ok = shape[i] == 'd' ? isdigit((unsigned char)v[i]) != 0 : v[i] == shape[i];
	if (!ok) {
		json_t *j = ty_jpath(root, path);
		char *text = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

		ty_test_fail_at(file, line, "%s is %s, want an RFC 3339 UTC time with milliseconds",
				path, text ? text : "missing");
		free(text);
	}
	return ok;
}

static void mask(json_t *v)
{
	static const char *const keys[] = {"id",   "created_at", "updated_at", "finished_at",
					   "time", "token",	 "revoked_at", NULL};
	const char *key;
	json_t *val;
	size_t i;

	if (json_is_array(v)) {
		json_array_foreach(v, i, val) mask(val);
		return;
	}
	if (!json_is_object(v))
		return;
	json_object_foreach(v, key, val)
	{
		bool masked = false;

		for (int k = 0; keys[k]; k++)
			if (!strcmp(key, keys[k]) && !json_is_null(val))
				masked = true;
		if (masked)
			json_object_set_new(v, key, json_string("<masked>"));
		else
			mask(val);
	}
}

bool ty_check_golden(const json_t *v, const char *name, const char *file, int line)
{
	char *path = ty_test_strf("%s/%s.json", TY_GOLDEN_DIR, name);
	const char *update = getenv("TY_GOLDEN_UPDATE");
	json_t *got = json_deep_copy(v), *want = NULL;
	json_error_t jerr;
	bool ok = false;

	if (!got) {
		ty_test_fail_at(file, line, "golden %s: no JSON to compare", name);
		return false;
	}
	mask(got);
	if (update && *update) {
		char *text = json_dumps(got, JSON_INDENT(2) | JSON_SORT_KEYS);
		FILE *f = fopen(path, "w");

		if (f && text) {
			fprintf(f, "%s\n", text);
			ty_test_note("golden %s rewritten", path);
			ok = true;
		} else {
			ty_test_fail_at(file, line, "cannot write %s: %s", path, strerror(errno));
		}
		if (f)
			fclose(f);
		free(text);
		json_decref(got);
		return ok;
	}
	if (!(want = json_load_file(path, 0, &jerr))) {
		ty_test_fail_at(file, line, "golden %s: %s (TY_GOLDEN_UPDATE=1 writes it)", path,
				jerr.text);
	} else {
		mask(want);
		if (!(ok = json_equal(got, want))) {
			char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
			char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);

			ty_test_fail_at(file, line,
					"differs from golden %s\n    got:  %s\n    want: %s", path,
					g ? g : "?", w ? w : "?");
			free(g);
			free(w);
		}
	}
	json_decref(got);
	json_decref(want);
	return ok;
}

/* ---- fixtures ---- */

const char *ty_tmpl(const char *tmpl, const char *team)
{
	struct ty_buf b = TY_BUF_INIT;
	const char *p = tmpl;
	char *out;

	while (*p) {
		if (p[0] == '@' && p[1] == 'T') {
			ty_buf_puts(&b, team ? team : "");
			p += 2;
		} else if (p[0] == '@' && (p[1] == 'A' || p[1] == 'K') &&
			   isdigit((unsigned char)p[2])) {
			char kind = p[1], *end;
			long n = strtol(p + 2, &end, 10);

			for (long i = 0; i < n; i++)
				if (kind == 'A')
					ty_buf_append(&b, "a", 1);
				else
					ty_buf_printf(&b, "%s\"K%ld\":\"v\"", i ? "," : "", i + 1);
			p = end;
		} else {
			ty_buf_append(&b, *p == '\'' ? "\"" : p, 1);
			p++;
		}
	}
	if (b.oom) {
		fprintf(stderr, "out of memory in the test harness\n");
		abort();
	}
	out = ty_test_alloc(b.len + 1);
	memcpy(out, b.data ? b.data : "", b.len);
	ty_buf_free(&b);
	return out;
}

const char *ty_uniq(const char *prefix)
{
	return ty_test_strf("%s-%d", prefix, atomic_fetch_add(&uniq_counter, 1) + 1);
}

const char *ty_mk_team(const char *prefix, int nominal, int borrowing)
{
	const struct ty_stack *s = ty_stack_get();
	const char *name = ty_uniq(prefix);
	const char *body;
	struct ty_resp r = {0};

	if (borrowing >= 0)
		body = ty_test_jf("{'name':'%s','nominal_gpus':%d,'borrowing_limit_gpus':%d}", name,
				  nominal, borrowing);
	else
		body = ty_test_jf("{'name':'%s','nominal_gpus':%d}", name, nominal);
	if (ty_http(&r, "POST", "/v1/teams", s->admin, body, NULL) != 201) {
		FAIL("cannot create team %s: HTTP %d %s", name, r.status, short_body(&r));
		ty_resp_free(&r);
		ty_test_abort();
	}
	ty_resp_free(&r);
	return name;
}

const char *ty_mk_token(const char *role, const char *team)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	const char *body, *tok;

	if (team)
		body =
		    ty_test_jf("{'name':'%s','role':'%s','team':'%s'}", ty_uniq("tok"), role, team);
	else
		body = ty_test_jf("{'name':'%s','role':'%s'}", ty_uniq("tok"), role);
	if (ty_http(&r, "POST", "/v1/tokens", s->admin, body, NULL) != 201 ||
	    !(tok = ty_jstr(r.json, "token"))) {
		FAIL("cannot create a %s token for %s: HTTP %d %s", role, team ? team : "(none)",
		     r.status, short_body(&r));
		ty_resp_free(&r);
		ty_test_abort();
	}
	tok = ty_test_strf("%s", tok);
	ty_resp_free(&r);
	return tok;
}

long long ty_mk_job(const char *token, const char *team, const char *extra)
{
	struct ty_resp r = {0};
	const char *body;
	long long id;

	body = ty_test_jf("{'team':'%s','command':['python','train.py'],'resources':{}%s}", team,
			  extra ? extra : "");
	if (ty_http(&r, "POST", "/v1/jobs", token, body, NULL) != 201 ||
	    (id = ty_jint(r.json, "id")) < 0) {
		FAIL("cannot submit a job to %s: HTTP %d %s", team, r.status, short_body(&r));
		ty_resp_free(&r);
		ty_test_abort();
	}
	ty_resp_free(&r);
	return id;
}

int ty_count_jobs(const char *token, const char *query)
{
	struct ty_resp r = {0};
	char *cursor = NULL;
	int count = 0;

	for (int page = 0; page < 1000; page++) {
		char *path;
		json_t *next;

		if (cursor) {
			char *esc = curl_easy_escape(NULL, cursor, 0);

			path = ty_test_strf("/v1/jobs?%s%slimit=500&cursor=%s", query ? query : "",
					    query && *query ? "&" : "", esc);
			curl_free(esc);
		} else {
			path = ty_test_strf("/v1/jobs?%s%slimit=500", query ? query : "",
					    query && *query ? "&" : "");
		}
		if (ty_http(&r, "GET", path, token, NULL, NULL) != 200 ||
		    !json_is_array(ty_jpath(r.json, "items"))) {
			FAIL("GET %s: HTTP %d %s", path, r.status, short_body(&r));
			free(cursor);
			ty_resp_free(&r);
			ty_test_abort();
		}
		count += (int)json_array_size(ty_jpath(r.json, "items"));
		next = ty_jpath(r.json, "next_cursor");
		free(cursor);
		cursor = json_is_string(next) ? xstrdup(json_string_value(next)) : NULL;
		if (!cursor)
			break;
	}
	free(cursor);
	ty_resp_free(&r);
	return count;
}
