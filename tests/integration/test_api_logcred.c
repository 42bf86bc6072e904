/*
 * The API's rank-log relay and its log credentials (docs/security.md, "Rank
 * logs"): this test plays a node's log server, looks at the credential each
 * relayed request carries and checks it with the public key, and starts the
 * API without its key, with a bad one and with a public one.
 */
#include "logcred.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- a node's log server, as the executor's answers it ---- */

static struct {
	struct MHD_Daemon *d;
	int port;
	pthread_mutex_t mu;
	unsigned status; /* what it answers */
	char authorization[512];
	char url[256];
	int requests;
} N = {.mu = PTHREAD_MUTEX_INITIALIZER, .status = 200};

static enum MHD_Result node_handle(void *cls, struct MHD_Connection *c, const char *url,
				   const char *method, const char *version, const char *upload,
				   size_t *upload_size, void **con_cls)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *tail = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "tail");
	struct MHD_Response *r;
	enum MHD_Result ret;
	const char *body;
	unsigned status;

	(void)cls, (void)method, (void)version, (void)upload, (void)upload_size, (void)con_cls;
	pthread_mutex_lock(&N.mu);
	snprintf(N.authorization, sizeof(N.authorization), "%s", auth ? auth : "");
	snprintf(N.url, sizeof(N.url), "%s?tail=%s", url, tail ? tail : "");
	N.requests++;
	status = N.status;
	pthread_mutex_unlock(&N.mu);
	body = status == 200   ? "step 1 loss 2.5\n"
	       : status == 401 ? "the log credential expired 75 s ago (they live 60 s: check the "
				 "clocks of the API and of node 'node-x')\n"
			       : "the log credential is for job 1 attempt 1 rank 0 on node 'a'\n";
	r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static void node_stop(void)
{
	if (N.d)
		MHD_stop_daemon(N.d);
	N.d = NULL;
}

static void node_start(void)
{
	const union MHD_DaemonInfo *info;

	if (N.d)
		return;
	N.d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, node_handle, NULL,
			       MHD_OPTION_END);
	REQUIRE(N.d != NULL);
	info = MHD_get_daemon_info(N.d, MHD_DAEMON_INFO_BIND_PORT);
	REQUIRE(info != NULL);
	N.port = info->port;
	ty_test_on(TY_TEST_TEARDOWN, node_stop);
}

static void node_answers(unsigned status)
{
	pthread_mutex_lock(&N.mu);
	N.status = status;
	N.authorization[0] = N.url[0] = '\0';
	pthread_mutex_unlock(&N.mu);
}

/* ---- fixtures ---- */

static struct {
	long long job;
	char *token; /* a member of the job's team; kept for the program's life */
} F;

/* A job whose attempt 1 ran ranks 0 and 1 on node-x, whose log server is the fake. */
static void fixture(void)
{
	const char *team, *job;

	node_start();
	if (F.job)
		return;
	team = ty_mk_team("logcred", 8, -1);
	F.token = strdup(ty_mk_token("member", team)); /* scratch strings end with the case */
	REQUIRE(F.token != NULL);
	F.job = ty_mk_job(F.token, team, NULL);
	job = ty_test_strf("%lld", F.job);
	TY_STACK_SQL("INSERT INTO nodes (id, address, gpus, boot_id, log_url, labels)"
		     " VALUES ('node-x', '127.0.0.1', 8, 'boot-x', $1, '{}')",
		     ty_test_strf("http://127.0.0.1:%d", N.port));
	TY_STACK_SQL("INSERT INTO attempts (job_id, attempt, state, epoch, master_node,"
		     " master_addr, master_port, nnodes, world_size, launch, running_at)"
		     " VALUES ($1, 1, 'running', 1, 'node-x', '127.0.0.1', 29500, 1, 2, '{}', now())",
		     job);
	TY_STACK_SQL("INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank,"
		     " local_ranks, gpus) VALUES ($1, 1, 'node-x', 0, 0, 2, '{0,1}')",
		     job);
	TY_STACK_SQL("INSERT INTO ranks (job_id, attempt, rank, node_id, local_rank, pid)"
		     " VALUES ($1, 1, 0, 'node-x', 0, 100), ($1, 1, 1, 'node-x', 1, 101)",
		     job);
	TY_STACK_SQL("UPDATE jobs SET state = 'running', attempt = 1 WHERE id = $1", job);
}

static struct ty_ed25519_key *pubkey(void)
{
	static struct ty_ed25519_key *k;
	struct ty_err err = {0};

	if (!k && ty_ed25519_key_load(&k, ty_test_log_pubkey(), false, &err)) {
		FAIL("%s", err.msg);
		ty_test_abort();
	}
	return k;
}

TY_TEST(the_relay_sends_a_credential_for_exactly_that_log)
{
	struct proto_logcred c;
	struct ty_resp r = {0};
	int64_t before, after;
	const char *cred;

	fixture();
	node_answers(200);
	before = (int64_t)time(NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=1&tail=7", F.job), F.token, NULL,
		NULL);
	after = (int64_t)time(NULL);
	CHECK_STATUS(&r, 200);
	CHECK_STR_EQ(r.body, "step 1 loss 2.5\n");
	pthread_mutex_lock(&N.mu);
	CHECK_STR_EQ(N.url, ty_test_strf("/logs/%lld/1/1?tail=7", F.job));
	cred = proto_logcred_from_authorization(N.authorization);
	cred = cred ? ty_test_strf("%s", cred) : NULL;
	pthread_mutex_unlock(&N.mu);
	REQUIRE(cred != NULL);
	CHECK(strncmp(cred, "tylog1.", 7) == 0);
	/* signed by the API's --log-key, for this job, attempt, rank and node */
	CHECK_INT_EQ(proto_logcred_check(&c, cred, pubkey(), after), PROTO_LOGCRED_VALID);
	CHECK_INT_EQ(c.job, F.job);
	CHECK_INT_EQ(c.attempt, 1);
	CHECK_INT_EQ(c.rank, 1);
	CHECK_STR_EQ(c.node, "node-x");
	CHECK(proto_logcred_covers(&c, F.job, 1, 1, "node-x"));
	/* and for a minute from when it was made */
	CHECK(c.exp >= before + PROTO_LOGCRED_TTL_S && c.exp <= after + PROTO_LOGCRED_TTL_S);
	CHECK_INT_EQ(proto_logcred_check(&c, cred, pubkey(), c.exp), PROTO_LOGCRED_EXPIRED);

	/* each request gets its own, for its own rank */
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs", F.job), F.token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	pthread_mutex_lock(&N.mu);
	cred = proto_logcred_from_authorization(N.authorization);
	cred = cred ? ty_test_strf("%s", cred) : NULL;
	pthread_mutex_unlock(&N.mu);
	REQUIRE(cred != NULL);
	CHECK_INT_EQ(proto_logcred_check(&c, cred, pubkey(), after), PROTO_LOGCRED_VALID);
	CHECK_INT_EQ(c.rank, 0);
	ty_resp_free(&r);
}

TY_TEST(a_refused_credential_is_a_503_that_names_the_keys)
{
	const unsigned statuses[] = {401, 403};
	struct ty_resp r = {0};

	fixture();
	for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
		ty_test_context("the node answers %u", statuses[i]);
		node_answers(statuses[i]);
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=1", F.job), F.token, NULL,
			NULL);
		CHECK_PROBLEM(&r, 503, "logs_unavailable", NULL);
		if (!strstr(r.body, "refused the API's log credential") ||
		    !strstr(r.body, "--log-pubkey must be the public half of the API's --log-key"))
			FAIL("the detail does not say why: %s", r.body);
		/* never the credential, nor the node's words, to the client */
		CHECK(strstr(r.body, "tylog1.") == NULL);
		CHECK(strstr(r.body, "node-x") == NULL);
	}
	ty_test_context(NULL);
	node_answers(200);
	ty_resp_free(&r);
	/* the operator's log says which node refused and why; no credential anywhere in it */
	{
		FILE *f = fopen(ty_test_api_log(ty_stack_get()->api), "r");
		char line[4096];
		bool said = false;

		REQUIRE(f != NULL);
		while (fgets(line, sizeof(line), f)) {
			said = said || (strstr(line, "node 'node-x' refused the log credential") &&
					strstr(line, "expired 75 s ago"));
			if (strstr(line, "tylog1."))
				FAIL("the API's log holds a credential: %s", line);
		}
		fclose(f);
		CHECK(said);
	}
}

/* Run argv; its exit status, stdout and stderr in *out. */
static int run(char **out, char *const *argv)
{
	const char *path = ty_test_strf("%s/run.out", ty_test_workdir());
	char buf[8192];
	int fd, status = 0;
	size_t n;
	pid_t pid;
	FILE *f;

	REQUIRE((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0);
	fflush(stdout);
	REQUIRE((pid = fork()) >= 0);
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	REQUIRE((f = fopen(path, "r")) != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	*out = ty_test_strf("%s", buf);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TY_TEST(the_api_needs_its_log_key_to_serve)
{
	const char *bin = getenv("TY_API_BIN"), *db = ty_stack_get()->db_url;
	const char *junk = ty_test_strf("%s/junk.pem", ty_test_workdir());
	const struct {
		const char *what, *key;
		int status;
		const char *says;
	} rows[] = {
	    {"none", NULL, 2,
	     "trainyard-api: no log credential key: set --log-key or TRAINYARD_LOG_KEY"},
	    {"empty", "", 2, "no log credential key: set --log-key"},
	    {"missing file", "/nonexistent/log-key.pem", 1,
	     "--log-key: cannot open the key file '/nonexistent/log-key.pem': No such file"},
	    {"not a key", junk, 1, ty_test_strf("--log-key: '%s' holds no private key", junk)},
	    {"the public key", ty_test_log_pubkey(), 1,
	     ty_test_strf("--log-key: '%s' holds no private key", ty_test_log_pubkey())},
	};
	char *out;
	FILE *f;

	REQUIRE(bin != NULL);
	REQUIRE((f = fopen(junk, "w")) != NULL);
	fputs("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n", f);
	fclose(f);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char *argv[] = {(char *)bin, "--database-url", (char *)db, "--port", "0",
				rows[i].key ? "--log-key" : NULL, (char *)rows[i].key, NULL};

		ty_test_context("%s", rows[i].what);
		CHECK_INT_EQ(run(&out, argv), rows[i].status);
		if (!strstr(out, rows[i].says))
			FAIL("the output does not say \"%s\":\n%s", rows[i].says, out);
		CHECK(strstr(out, "PRIVATE KEY") == NULL);
	}
	ty_test_context(NULL);
	/* the one-shot modes never sign anything: they need no key */
	{
		char *argv[] = {(char *)bin, "--database-url", (char *)db, "--migrate", NULL};

		CHECK_INT_EQ(run(&out, argv), 0);
	}
}
