/* trainyard-api: configuration, one-shot admin modes, and the server's life. */
#include "api.h"
#include "migrations.h"
#include "ty_config.h"
#include "ty_crypto.h"
#include "ty_log.h"

#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct ty_opt options[] = {
	{"database-url", TY_OPT_STR, NULL, 0, 0,
	 "libpq connection URL of the PostgreSQL database (required)"},
	{"listen-addr", TY_OPT_STR, "127.0.0.1", 0, 0, "IPv4 address to listen on"},
	{"port", TY_OPT_INT, "8080", 0, 65535, "TCP port to listen on; 0 picks a free one"},
	{"port-file", TY_OPT_STR, NULL, 0, 0,
	 "write the bound port to this file once listening (for tests and scripts)"},
	{"threads", TY_OPT_INT, "16", 1, 256,
	 "HTTP worker threads, each with its own epoll and PostgreSQL connection; a job "
	 "submission waits for its batch's commit without holding one (concurrent "
	 "submissions share one insert and one commit)"},
	{"max-body-bytes", TY_OPT_INT, "1048576", 1024, 67108864,
	 "largest request body accepted; larger ones get 413"},
	{"max-json-depth", TY_OPT_INT, "32", 2, 1000, "deepest JSON nesting accepted"},
	{"connection-timeout", TY_OPT_INT, "30", 1, 3600,
	 "seconds of inactivity after which a connection is closed (slow clients)"},
	{"max-connections", TY_OPT_INT, "1000", 1, 100000, "concurrent connections accepted"},
	{"max-connections-per-ip", TY_OPT_INT, "0", 0, 100000,
	 "concurrent connections accepted from one client address; more are closed at once "
	 "(0: no limit; behind a proxy every client has the proxy's address)"},
	{"body-timeout", TY_OPT_INT, "60", 0, 3600,
	 "seconds a request body may take to arrive after its headers; a client still sending "
	 "then is disconnected (0: no limit)"},
	{"cors-origins", TY_OPT_STR, "", 0, 0,
	 "comma-separated origins allowed to call the API from a browser; empty allows none"},
	{"webhook-timeout-ms", TY_OPT_INT, "10000", 100, 300000,
	 "milliseconds a webhook POST may take, connecting included, before it counts as failed"},
	{"webhook-max-attempts", TY_OPT_INT, "15", 1, 1000,
	 "POSTs of one webhook delivery before it is given up as failed"},
	{"webhook-backoff-ms", TY_OPT_INT, "1000", 1, 86400000,
	 "delay before a webhook delivery's second attempt; it doubles per attempt, with jitter"},
	{"webhook-backoff-max-ms", TY_OPT_INT, "3600000", 1, 86400000,
	 "longest delay between two attempts of a webhook delivery"},
	{"webhook-concurrency", TY_OPT_INT, "8", 0, 1000,
	 "webhook POSTs in flight at once in this process; 0 delivers none here"},
	{"tls-cert", TY_OPT_STR, NULL, 0, 0,
	 "PEM certificate (chain) file: serve HTTPS instead of HTTP; needs --tls-key"},
	{"tls-key", TY_OPT_STR, NULL, 0, 0,
	 "PEM private key file (unencrypted) of --tls-cert; needs --tls-cert"},
	{"rate-limit-rps", TY_OPT_INT, "0", 0, 1000000,
	 "requests a second each API token may make on average; 0 turns rate limits off"},
	{"rate-limit-burst", TY_OPT_INT, "20", 1, 1000000,
	 "requests each API token may make at once before --rate-limit-rps applies"},
	{"audit-retention-days", TY_OPT_INT, "0", 0, 36500,
	 "delete audit records older than this many days, at start and hourly; 0 keeps them all"},
	{"log-key", TY_OPT_STR, NULL, 0, 0,
	 "PEM file of the Ed25519 private key that signs the credentials of relayed rank-log "
	 "requests; executors get its public half as --log-pubkey (required to serve; "
	 "docs/security.md, \"Rank logs\")"},
	{"ui-dir", TY_OPT_STR, NULL, 0, 0,
	 "directory of the built dashboard (portal/dist): served at /ui/, read per request; "
	 "unset serves none"},
	{"log-level", TY_OPT_STR, "info", 0, 0, "debug, info, warn or error"},
	{"log-json", TY_OPT_BOOL, "false", 0, 0, "log JSON lines instead of text"},
	{"migrate", TY_OPT_BOOL, "false", 0, 0, "apply database migrations, then exit"},
	{"bootstrap-token", TY_OPT_STR, NULL, 0, 0,
	 "create an admin token with this name, print it on stdout, then exit"},
	{"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static int write_port_file(const char *path, int port, struct ty_err *err)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return ty_err_set(err, TY_EIO, "cannot write '%s'", tmp);
	fprintf(f, "%d\n", port);
	if (fclose(f) || rename(tmp, path))
		return ty_err_set(err, TY_EIO, "cannot write '%s'", path);
	return 0;
}

static int migrate(const char *url, struct ty_err *err)
{
	struct ty_pg *pg = NULL;
	int applied = 0, rc;

	if ((rc = ty_pg_connect(&pg, url, err)))
		return rc;
	rc = ty_pg_migrate(&applied, pg, ty_migrations, ty_migrations_count, err);
	ty_pg_close(pg);
	if (!rc)
		ty_info("schema is current: %d migration(s) applied now, %d in all", applied,
			ty_migrations_count);
	return rc;
}

static int bootstrap_token(const char *url, const char *name, struct ty_err *err)
{
	struct ty_pg *pg = NULL;
	char secret[64];
	int64_t id;
	int rc;

	if ((rc = ty_pg_connect(&pg, url, err)))
		return rc;
	rc = api_token_insert(&id, NULL, secret, sizeof(secret), pg, name, "admin", NULL, err);
	ty_pg_close(pg);
	if (!rc)
		printf("%s\n", secret);
	return rc;
}

static int serve(const struct ty_config *c, struct ty_err *err)
{
	struct api_options o = {
		.listen_addr = ty_config_str(c, "listen-addr"),
		.port = (int)ty_config_int(c, "port"),
		.port_file = ty_config_str(c, "port-file"),
		.database_url = ty_config_str(c, "database-url"),
		.threads = (int)ty_config_int(c, "threads"),
		.max_body_bytes = (size_t)ty_config_int(c, "max-body-bytes"),
		.max_json_depth = (int)ty_config_int(c, "max-json-depth"),
		.connection_timeout = (int)ty_config_int(c, "connection-timeout"),
		.max_connections = (int)ty_config_int(c, "max-connections"),
		.max_connections_per_ip = (int)ty_config_int(c, "max-connections-per-ip"),
		.body_timeout = (int)ty_config_int(c, "body-timeout"),
		.cors_origins = ty_config_str(c, "cors-origins"),
		.webhook =
			{
				.timeout_ms = (int)ty_config_int(c, "webhook-timeout-ms"),
				.max_attempts = (int)ty_config_int(c, "webhook-max-attempts"),
				.backoff_ms = (int)ty_config_int(c, "webhook-backoff-ms"),
				.backoff_max_ms = (int)ty_config_int(c, "webhook-backoff-max-ms"),
				.concurrency = (int)ty_config_int(c, "webhook-concurrency"),
			},
		.rate_limit_rps = (int)ty_config_int(c, "rate-limit-rps"),
		.rate_limit_burst = (int)ty_config_int(c, "rate-limit-burst"),
		.audit_retention_days = (int)ty_config_int(c, "audit-retention-days"),
		.ui_dir = ty_config_str(c, "ui-dir") && *ty_config_str(c, "ui-dir")
				  ? ty_config_str(c, "ui-dir")
				  : NULL,
	};
	struct api_tls tls = {0};
	struct api_server *s = NULL;
	struct ty_ed25519_key *log_key = NULL;
	const char *log_key_path = ty_config_str(c, "log-key");
	struct ty_err key_err = {0};
	struct sigaction sa = {.sa_handler = on_signal};
	int rc;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((rc = ty_ed25519_key_load(&log_key, log_key_path, true, &key_err)))
		return ty_err_set(err, rc, "--log-key: %s", key_err.msg);
	o.log_key = log_key;
	if ((rc = api_tls_load(&tls, ty_config_str(c, "tls-cert"), ty_config_str(c, "tls-key"),
			       err)))
		goto out;
	o.tls_cert_pem = tls.cert;
	o.tls_key_pem = tls.key;
	if ((rc = api_server_start(&s, &o, err)))
		goto out;
	if (o.port_file && (rc = write_port_file(o.port_file, api_server_port(s), err))) {
		api_server_stop(s);
		goto out;
	}
	ty_info("listening on %s://%s:%d", tls.cert ? "https" : "http", o.listen_addr,
		api_server_port(s));
	while (!stop_signal)
		pause();
	ty_info("stopping on signal %d", (int)stop_signal);
	api_server_stop(s);
out:
	api_tls_free(&tls);
	ty_ed25519_key_free(log_key);
	return rc;
}

int main(int argc, char **argv)
{
	struct ty_config *c = ty_config_new(options, NOPTS, "TRAINYARD");
	struct ty_err err = {0};
	int rc, level;

	if (!c)
		return 1;
	if ((rc = ty_config_load(c, argc, argv, NULL, &err))) {
		fprintf(stderr, "trainyard-api: %s\n", err.msg);
		fprintf(stderr, "try 'trainyard-api --help'\n");
		ty_config_free(c);
		return 2;
	}
	if (ty_config_bool(c, "help")) {
		printf("usage: trainyard-api [options]\n\nThe Trainyard REST API server.\n\n");
		ty_config_usage(stdout, options, NOPTS, "TRAINYARD");
		ty_config_free(c);
		return 0;
	}
	level = ty_log_level_parse(ty_config_str(c, "log-level"));
	if (level < 0) {
		fprintf(stderr, "trainyard-api: log level '%s' is not debug, info, warn or error\n",
			ty_config_str(c, "log-level"));
		ty_config_free(c);
		return 2;
	}
	ty_log_init("trainyard-api", (enum ty_log_level)level, ty_config_bool(c, "log-json"));
	if (!ty_config_str(c, "database-url")) {
		fprintf(stderr, "trainyard-api: no database: set --database-url or "
				"TRAINYARD_DATABASE_URL\n");
		ty_config_free(c);
		return 2;
	}
	if (!ty_config_bool(c, "migrate") && !ty_config_str(c, "bootstrap-token") &&
	    (!ty_config_str(c, "log-key") || !*ty_config_str(c, "log-key"))) {
		fprintf(stderr, "trainyard-api: no log credential key: set --log-key or "
				"TRAINYARD_LOG_KEY to an Ed25519 private key in PEM form "
				"(openssl genpkey -algorithm ed25519 -out FILE)\n");
		ty_config_free(c);
		return 2;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT); /* before threads: it is not thread-safe */
	if (ty_config_bool(c, "migrate"))
		rc = migrate(ty_config_str(c, "database-url"), &err);
	else if (ty_config_str(c, "bootstrap-token"))
		rc = bootstrap_token(ty_config_str(c, "database-url"),
				     ty_config_str(c, "bootstrap-token"), &err);
	else
		rc = serve(c, &err);
	if (rc)
		ty_error("%s", err.msg);
	curl_global_cleanup();
	ty_config_free(c);
	return rc ? 1 : 0;
}
