/*
 * HTTPS on the API: a self-signed certificate made with the openssl CLI,
 * verified by libcurl; plain HTTP and unverified clients refused; every
 * bad --tls-cert / --tls-key combination a start-up error naming it.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Run argv with stdout and stderr into a new scratch string; returns the exit status or -1. */
static int run(char **out, char *const *argv)
{
	const char *log = ty_test_strf("%s/run.out", ty_test_workdir());
	int fd, status = 0;
	pid_t pid;
	FILE *f;
	char buf[8192];
	size_t n;

	fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	REQUIRE(fd >= 0);
	pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	f = fopen(log, "r");
	REQUIRE(f != NULL);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	*out = ty_test_strf("%s", buf);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *openssl_bin(void)
{
	static const char *const paths[] = {"/usr/bin/openssl", "/bin/openssl",
					    "/usr/local/bin/openssl"};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	FAIL("no openssl CLI in /usr/bin, /bin or /usr/local/bin (apt-get install openssl)");
	ty_test_abort();
}

/* A self-signed EC certificate for 127.0.0.1 and localhost: DIR/NAME.crt and DIR/NAME.key. */
static void mk_cert(const char *name)
{
	const char *dir = ty_test_workdir();
	char *crt = ty_test_strf("%s/%s.crt", dir, name), *key = ty_test_strf("%s/%s.key", dir, name);
	char *argv[] = {(char *)openssl_bin(),
			"req",
			"-x509",
			"-newkey",
			"ec",
			"-pkeyopt",
			"ec_paramgen_curve:prime256v1",
			"-nodes",
			"-days",
			"2",
			"-subj",
			"/CN=127.0.0.1",
			"-addext",
			"subjectAltName=IP:127.0.0.1,DNS:localhost",
			"-keyout",
			key,
			"-out",
			crt,
			NULL};
	char *out;

	if (run(&out, argv) != 0) {
		FAIL("openssl req failed:\n%s", out);
		ty_test_abort();
	}
}

static const char *path_of(const char *name, const char *ext)
{
	return ty_test_strf("%s/%s.%s", ty_test_workdir(), name, ext);
}

static struct ty_api *tls_api;

/* The HTTPS server on the shared stack's database, with certificate "srv". */
static struct ty_api *https_api(void)
{
	const struct ty_stack *s = ty_stack_get();

	if (!tls_api) {
		const char *args[] = {"--tls-cert", path_of("srv", "crt"), "--tls-key",
				      path_of("srv", "key"), NULL};

		mk_cert("srv");
		mk_cert("other");
		tls_api = ty_test_api_start_tls(s->db_url, args, path_of("srv", "crt"));
	}
	ty_test_api_use(tls_api);
	return tls_api;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

/* GET url with libcurl and the given CA file (NULL: the system's); the CURLcode. */
static CURLcode get(long *status, const char *url, const char *ca)
{
	CURL *c = curl_easy_init();
	CURLcode rc;

	*status = 0;
	REQUIRE(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	if (ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	rc = curl_easy_perform(c);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	curl_easy_cleanup(c);
	return rc;
}

TY_TEST(https_request_verified_against_the_ca)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_api *api = https_api();
	const char *team = NULL;
	struct ty_resp r = {0};
	const char *host = ty_test_strf("https://localhost:%s/healthz",
					strrchr(ty_test_api_url(api), ':') + 1);
	long status;

	CHECK(strncmp(ty_test_api_url(api), "https://127.0.0.1:", 18) == 0);
	/* an authenticated write and read over TLS, verified against the CA */
	ty_test_api_use(api);
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":4}", team = ty_uniq("tls")), NULL);
	CHECK_STATUS(&r, 201);
	ty_http(&r, "GET", ty_test_strf("/v1/teams/%s", team), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "name", team);
	ty_resp_free(&r);
	/* the certificate names localhost too */
	CHECK_INT_EQ(get(&status, host, path_of("srv", "crt")), CURLE_OK);
	CHECK_INT_EQ(status, 200);
}

TY_TEST(plain_http_to_the_tls_port_gets_no_answer)
{
	struct ty_api *api = https_api();
	const char *url = ty_test_strf("http://127.0.0.1:%s/healthz",
				       strrchr(ty_test_api_url(api), ':') + 1);
	long status;
	CURLcode rc = get(&status, url, NULL);

	/* the server reads a TLS record where "GET" is: it closes without a reply */
	CHECK(rc == CURLE_GOT_NOTHING || rc == CURLE_RECV_ERROR);
	CHECK_INT_EQ(status, 0);
}

TY_TEST(client_without_the_ca_fails_verification)
{
	struct ty_api *api = https_api();
	const char *url = ty_test_strf("%s/healthz", ty_test_api_url(api));
	long status;

	/* another self-signed certificate as the only CA */
	CHECK_INT_EQ(get(&status, url, path_of("other", "crt")), CURLE_PEER_FAILED_VERIFICATION);
	CHECK_INT_EQ(status, 0);
	/* the system's CAs do not know it either */
	CHECK_INT_EQ(get(&status, url, NULL), CURLE_PEER_FAILED_VERIFICATION);
	CHECK_INT_EQ(status, 0);
	/* the server still serves verified clients */
	CHECK_INT_EQ(get(&status, url, path_of("srv", "crt")), CURLE_OK);
	CHECK_INT_EQ(status, 200);
}

struct watcher {
	const char *path, *token;
	struct ty_resp r;
};

static void *watch(void *p)
{
	struct watcher *w = p;

	ty_http(&w->r, "GET", w->path, w->token, NULL, NULL);
	return NULL;
}

/* A long-poll is suspended and resumed under TLS as under HTTP: woken by the event. */
TY_TEST(long_poll_over_tls)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	const char *team;
	struct watcher w;
	pthread_t th;
	long long id;

	https_api();
	team = ty_uniq("tls-watch");
	ty_http(&r, "POST", "/v1/teams", s->admin,
		ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":4}", team), NULL);
	REQUIRE_STATUS(&r, 201);
	id = ty_mk_job(s->admin, team, NULL);
	REQUIRE(id > 0);
	w = (struct watcher){ty_test_strf("/v1/jobs/%lld/events?after=1&wait=30", id), s->admin,
			     {0}};
	REQUIRE_INT_EQ(pthread_create(&th, NULL, watch, &w), 0);
	nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL); /* most often it parks first */
	ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	pthread_join(th, NULL);
	/* parked before the cancel or not, the answer holds the cancel event */
	CHECK_STATUS(&w.r, 200);
	CHECK_JSTR(w.r.json, "events[0].type", "cancelled");
	ty_resp_free(&w.r);
	ty_resp_free(&r);
}

/* Start-up with bad TLS settings: exit status 1 or 2, and a message naming the fault. */
TY_TEST(bad_tls_settings_fail_start_up)
{
	const struct ty_stack *s = ty_stack_get();
	const char *bin = getenv("TY_API_BIN");
	const char *dir = ty_test_workdir();
	const char *garbage = ty_test_strf("%s/garbage.pem", dir);
	const char *missing = ty_test_strf("%s/missing.pem", dir);
	FILE *f;
	struct {
		const char *cert, *key;
		int status;
		const char *message;
	} cases[] = {
		{path_of("srv", "crt"), NULL, 1, "--tls-cert is set but --tls-key is not"},
		{NULL, path_of("srv", "key"), 1, "--tls-key is set but --tls-cert is not"},
		{missing, path_of("srv", "key"), 1,
		 ty_test_strf("cannot read TLS certificate '%s': No such file", missing)},
		{path_of("srv", "crt"), missing, 1,
		 ty_test_strf("cannot read TLS key '%s': No such file", missing)},
		{path_of("srv", "crt"), path_of("other", "key"), 1,
		 ty_test_strf("TLS key '%s' does not match certificate '%s'", path_of("other", "key"),
			      path_of("srv", "crt"))},
		{garbage, path_of("srv", "key"), 1,
		 ty_test_strf("TLS certificate '%s' holds no PEM certificate", garbage)},
		{path_of("srv", "crt"), garbage, 1,
		 ty_test_strf("TLS key '%s' holds no unencrypted PEM private key", garbage)},
		/* the key where the certificate belongs */
		{path_of("srv", "key"), path_of("srv", "key"), 1,
		 ty_test_strf("TLS certificate '%s' holds no PEM certificate",
			      path_of("srv", "key"))},
	};

	REQUIRE(bin != NULL);
	https_api(); /* makes the certificates */
	f = fopen(garbage, "w");
	REQUIRE(f != NULL);
	fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", f);
	fclose(f);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[16], *out;
		int n = 0, status;

		ty_test_context("case %zu: cert %s, key %s", i, cases[i].cert ? cases[i].cert : "-",
				cases[i].key ? cases[i].key : "-");
		argv[n++] = (char *)bin;
		argv[n++] = "--database-url";
		argv[n++] = (char *)s->db_url;
		argv[n++] = "--port";
		argv[n++] = "0";
		argv[n++] = "--log-key";
		argv[n++] = (char *)ty_test_log_key();
		if (cases[i].cert) {
			argv[n++] = "--tls-cert";
			argv[n++] = (char *)cases[i].cert;
		}
		if (cases[i].key) {
			argv[n++] = "--tls-key";
			argv[n++] = (char *)cases[i].key;
		}
		argv[n] = NULL;
		status = run(&out, argv);
		CHECK_INT_EQ(status, cases[i].status);
		if (!strstr(out, cases[i].message))
			FAIL("the output does not say \"%s\":\n%s", cases[i].message, out);
		/* the key's PEM text never reaches the log */
		CHECK(!strstr(out, "PRIVATE KEY"));
	}
}

/* The environment variables work like the options. */
TY_TEST(tls_from_the_environment)
{
	const struct ty_stack *s = ty_stack_get();
	const char *bin = getenv("TY_API_BIN");
	char *argv[] = {(char *)bin,  "--database-url", (char *)s->db_url,		"--port",
			"0",	      "--log-key",	(char *)ty_test_log_key(), NULL};
	char *out;

	REQUIRE(bin != NULL);
	https_api();
	setenv("TRAINYARD_TLS_KEY", path_of("srv", "key"), 1);
	CHECK_INT_EQ(run(&out, argv), 1);
	if (!strstr(out, "--tls-key is set but --tls-cert is not"))
		FAIL("the output does not name the missing option:\n%s", out);
	unsetenv("TRAINYARD_TLS_KEY");
}
