/* jobctl's HTTP client: settings resolution, requests over libcurl, problem documents. */
#include "cli.h"
#include "ty_config.h"
#include "ty_json.h"

#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/*
 * libcurl, loaded at the first https:// request: a run against an http://
 * server (the common case on a cluster's own network) neither loads it nor
 * the TLS, Kerberos and LDAP libraries it brings.
 */
static struct {
	void *lib;
	CURLcode (*global_init)(long);
	void (*global_cleanup)(void);
	CURL *(*easy_init)(void);
	void (*easy_cleanup)(CURL *);
	void (*easy_reset)(CURL *);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	const char *(*easy_strerror)(CURLcode);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} cx;
#undef curl_easy_setopt /* curl.h's own macros, kept off with CURL_DISABLE_TYPECHECK or not */
#undef curl_easy_getinfo
#define curl_global_init cx.global_init
#define curl_easy_init cx.easy_init
#define curl_easy_cleanup cx.easy_cleanup
#define curl_easy_reset cx.easy_reset
#define curl_easy_setopt cx.easy_setopt
#define curl_easy_perform cx.easy_perform
#define curl_easy_getinfo cx.easy_getinfo
#define curl_easy_strerror cx.easy_strerror
#define curl_slist_append cx.slist_append
#define curl_slist_free_all cx.slist_free_all

static int curl_load(struct ty_err *err)
{
	static const char *const names[] = {
		"curl_global_init",  "curl_global_cleanup", "curl_easy_init",
		"curl_easy_cleanup", "curl_easy_reset",	    "curl_easy_setopt",
		"curl_easy_perform", "curl_easy_getinfo",   "curl_easy_strerror",
		"curl_slist_append", "curl_slist_free_all",
	};
	void **slot[] = {
		(void **)&cx.global_init,  (void **)&cx.global_cleanup, (void **)&cx.easy_init,
		(void **)&cx.easy_cleanup, (void **)&cx.easy_reset,	(void **)&cx.easy_setopt,
		(void **)&cx.easy_perform, (void **)&cx.easy_getinfo,	(void **)&cx.easy_strerror,
		(void **)&cx.slist_append, (void **)&cx.slist_free_all,
	};

	if (cx.lib)
		return 0;
	if (!(cx.lib = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL)))
		return ty_err_set(err, TY_EUNAVAIL, "an https:// server needs libcurl: %s",
				  dlerror());
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!(*slot[i] = dlsym(cx.lib, names[i]))) {
			dlclose(cx.lib);
			cx.lib = NULL;
			return ty_err_set(err, TY_EUNAVAIL, "libcurl.so.4 lacks %s", names[i]);
		}
	return 0;
}

void cli_cleanup(struct cli *cli)
{
	if (cli->curl_global)
		cx.global_cleanup();
	cli->curl_global = false;
}

#ifndef JOBCTL_VERSION
#define JOBCTL_VERSION "0.0.0"
#endif

/* Answers bigger than this are refused rather than buffered without bound. */
#define MAX_ANSWER_BYTES (256u << 20)
/* Nesting limit for answers; the server accepts 32 levels, echoes add a few. */
#define MAX_ANSWER_DEPTH 64
#define CONNECT_TIMEOUT_MS 10000L

static const struct ty_opt conf_opts[] = {
	{"server", TY_OPT_STR, "http://127.0.0.1:8080", 0, 0, "base URL of the Trainyard API"},
	{"token", TY_OPT_STR, NULL, 0, 0, "bearer token"},
	{"token-file", TY_OPT_STR, NULL, 0, 0, "file whose first line is the bearer token"},
	{"timeout", TY_OPT_INT, "60", 1, 86400, "request timeout in seconds"},
	{"cacert", TY_OPT_STR, NULL, 0, 0,
	 "PEM file of the CAs an https:// server is verified against"},
};

/* $XDG_CONFIG_HOME/jobctl/config, else ~/.config/jobctl/config; "" when unknown. */
static void default_config_path(char *out, size_t sz)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");

	out[0] = '\0';
	if (xdg && xdg[0] == '/') {
		snprintf(out, sz, "%s/jobctl/config", xdg);
		return;
	}
	if (!home || !*home) {
		struct passwd *pw = getpwuid(getuid());

		home = pw ? pw->pw_dir : NULL;
	}
	if (home && *home)
		snprintf(out, sz, "%s/.config/jobctl/config", home);
}

static bool token_ok(const char *t)
{
	if (!*t)
		return false;
	for (; *t; t++)
		if (*t < 0x21 || *t > 0x7e)
			return false;
	return true;
}

/* Precedence of a ty_config source: flag > env > file > default. */
static int source_rank(const char *src)
{
	return !strcmp(src, "flag") ? 3 : !strcmp(src, "env") ? 2 : !strcmp(src, "file") ? 1 : 0;
}

/*
 * --token-file (JOBCTL_TOKEN_FILE, token_file = FILE) is another way to give
 * the token, one that ps and /proc do not show: of the two, the one from
 * the higher source wins; both from the same source is an error.
 */
static int token_from_file(const char **token, struct cli *cli, struct ty_err *err)
{
	const char *path = ty_config_str(cli->config, "token-file");
	const char *src = ty_config_source(cli->config, "token-file");
	char buf[1024];
	size_t n;
	FILE *f;

	if (!path || !*path)
		return 0;
	if (*token) {
		int rt = source_rank(ty_config_source(cli->config, "token")),
		    rf = source_rank(src);

		if (rt == rf)
			return ty_err_set(err, TY_ECONFIG,
					  "a token and a token file both come from the %s: give one",
					  !strcmp(src, "flag")	? "command line"
					  : !strcmp(src, "env") ? "environment"
								: "config file");
		if (rt > rf)
			return 0;
	}
	if (!(f = fopen(path, "re")))
		return ty_err_set(err, TY_ECONFIG, "cannot read the token file '%.200s' (from %s): %s",
				  path, src, strerror(errno));
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	n = strlen(buf);
	while (n > 0 && (buf[n - 1] == ' ' || buf[n - 1] == '\t'))
		buf[--n] = '\0';
	if (!n) {
		memset(buf, 0, sizeof(buf));
		return ty_err_set(err, TY_ECONFIG, "the token file '%.200s' (from %s) is empty", path,
				  src);
	}
	free(cli->token_read);
	cli->token_read = strdup(buf);
	memset(buf, 0, sizeof(buf));
	if (!cli->token_read)
		return ty_err_set(err, TY_ENOMEM, NULL);
	*token = cli->token_read;
	return 0;
}

static int connect_settings(struct cli *cli, struct ty_err *err)
{
	char path[4096], conf_arg[4200];
	char *argv[12];
	int argc = 0, rc;
	const char *server, *token;
	size_t len;

	if (cli->curl || cli->plain)
		return 0;
	cli_disconnect(cli); /* the leftovers of an earlier failed attempt */
	if (!(cli->config = ty_config_new(conf_opts, sizeof(conf_opts) / sizeof(conf_opts[0]),
					  "JOBCTL")))
		return ty_err_set(err, TY_ENOMEM, NULL);

	/* ty_config reads JOBCTL_CONFIG itself; otherwise use the default file if present */
	argv[argc++] = "jobctl";
	if (!getenv("JOBCTL_CONFIG")) {
		default_config_path(path, sizeof(path));
		if (path[0] && access(path, F_OK) == 0) {
			snprintf(conf_arg, sizeof(conf_arg), "--config=%s", path);
			argv[argc++] = conf_arg;
		}
	}
	if (cli->server_flag) {
		argv[argc++] = "--server";
		argv[argc++] = (char *)cli->server_flag;
	}
	if (cli->token_flag) {
		argv[argc++] = "--token";
		argv[argc++] = (char *)cli->token_flag;
	}
	if (cli->token_file_flag) {
		argv[argc++] = "--token-file";
		argv[argc++] = (char *)cli->token_file_flag;
	}
	if (cli->timeout_flag) {
		argv[argc++] = "--timeout";
		argv[argc++] = (char *)cli->timeout_flag;
	}
	if (cli->cacert_flag) {
		argv[argc++] = "--cacert";
		argv[argc++] = (char *)cli->cacert_flag;
	}
	argv[argc] = NULL;
	if ((rc = ty_config_load(cli->config, argc, argv, NULL, err)))
		return rc;

	server = ty_config_str(cli->config, "server");
	token = ty_config_str(cli->config, "token");
	cli->timeout_s = (long)ty_config_int(cli->config, "timeout");
	if (!server || (strncmp(server, "http://", 7) != 0 && strncmp(server, "https://", 8) != 0))
		return ty_err_set(err, TY_ECONFIG,
				  "server URL must start with http:// or https://, not '%.200s'",
				  server ? server : "");
	if (token && !*token)
		token = NULL;
	if ((rc = token_from_file(&token, cli, err)))
		return rc;
	if (token && !token_ok(token))
		/* never echo the token itself */
		return ty_err_set(err, TY_ECONFIG,
				  "the token (from %s) contains invalid characters",
				  token == cli->token_read ? "the token file"
							   : ty_config_source(cli->config, "token"));
	cli->token = token;
	cli->cacert = ty_config_str(cli->config, "cacert");
	if (cli->cacert && !*cli->cacert)
		cli->cacert = NULL;
	if (cli->cacert && access(cli->cacert, R_OK) != 0)
		return ty_err_set(err, TY_ECONFIG, "cannot read the CA file '%.200s' (from %s): %s",
				  cli->cacert, ty_config_source(cli->config, "cacert"),
				  strerror(errno));
	if (!(cli->server = strdup(server)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	len = strlen(cli->server);
	while (len > 0 && cli->server[len - 1] == '/')
		cli->server[--len] = '\0';

	if ((cli->plain = strncasecmp(cli->server, "http://", 7) == 0))
		return 0;
	if ((rc = curl_load(err)))
		return rc;
	if (!cli->curl_global) {
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			return ty_err_set(err, TY_ENOMEM, "cannot initialise libcurl");
		cli->curl_global = true;
	}
	if (!(cli->curl = curl_easy_init()))
		return ty_err_set(err, TY_ENOMEM, "cannot initialise libcurl");
	return 0;
}

int cli_connect(struct cli *cli, struct ty_err *err)
{
	int rc = connect_settings(cli, err);

	if (rc == TY_ECONFIG)
		cli->settings_failed = true;
	return rc;
}

void cli_disconnect(struct cli *cli)
{
	if (cli->curl)
		curl_easy_cleanup(cli->curl);
	cli->curl = NULL;
	cli->plain = false;
	ty_config_free(cli->config);
	cli->config = NULL;
	free(cli->server);
	cli->server = NULL;
	cli->token = NULL;
	if (cli->token_read) {
		memset(cli->token_read, 0, strlen(cli->token_read));
		free(cli->token_read);
		cli->token_read = NULL;
	}
	cli->cacert = NULL;
}

void cli_resp_free(struct cli_resp *r)
{
	if (!r)
		return;
	json_decref(r->body);
	r->body = NULL;
	r->status = 0;
	r->replayed = false;
}

bool cli_is_transient(int code)
{
	return code == TY_EUNAVAIL || code == TY_ETIMEDOUT;
}

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct ty_buf *b = ud;

	if (b->len + size * n > MAX_ANSWER_BYTES || ty_buf_append(b, p, size * n))
		return 0; /* makes curl fail with CURLE_WRITE_ERROR */
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	static const char name[] = "idempotent-replayed:";
	struct cli_resp *resp = ud;
	size_t len = size * n, nl = sizeof(name) - 1;

	/* a new status line starts a new response (after 100 Continue) */
	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0)
		resp->replayed = false;
	if (len > nl && strncasecmp(p, name, nl) == 0) {
		const char *v = p + nl, *end = p + len;

		while (v < end && (*v == ' ' || *v == '\t'))
			v++;
		resp->replayed = (size_t)(end - v) >= 4 && strncasecmp(v, "true", 4) == 0;
	}
	return len;
}

static int status_code(long status)
{
	switch (status) {
	case 401:
		return TY_EAUTH;
	case 403:
		return TY_EPERM;
	case 404:
		return TY_ENOTFOUND;
	case 409:
		return TY_ECONFLICT;
	case 413:
		return TY_ETOOBIG;
	case 429:
	case 502:
	case 503:
	case 504:
		return TY_EUNAVAIL;
	}
	if (status >= 400 && status < 500)
		return TY_EINVAL;
	return TY_EIO;
}

/* Turn a non-2xx answer into err: "<detail> (<code>)". */
static int problem(struct cli *cli, long status, const struct ty_buf *b, struct ty_err *err)
{
	int code = status_code(status);
	const char *detail = NULL, *pcode = NULL, *field = NULL;
	struct ty_err perr = {0};
	json_t *doc = NULL;
	int rc;

	if (b->len && !ty_json_parse(&doc, b->data, b->len, MAX_ANSWER_DEPTH, &perr) &&
	    json_is_object(doc)) {
		detail = cli_json_str(doc, "detail", NULL);
		if (!detail)
			detail = cli_json_str(doc, "title", NULL);
		pcode = cli_json_str(doc, "code", NULL);
		field = cli_json_str(doc, "field", NULL);
	}
	if (!detail && !pcode) {
		rc = ty_err_set(err, code, "%s answered HTTP %ld", cli->server, status);
	} else if (field && detail && !strstr(detail, field)) {
		/* the field leads, as in a compiler message, so "(code)" stays last */
		rc = ty_err_set(err, code, "%s: %s (%s)", field, detail, pcode ? pcode : "error");
	} else {
		rc = ty_err_set(err, code, "%s (%s)", detail ? detail : "request failed",
				pcode ? pcode : "error");
	}
	if (status == 401 && !cli->token && err && err->code == rc)
		snprintf(err->msg + strlen(err->msg), sizeof(err->msg) - strlen(err->msg),
			 "; no token is set: use --token-file, JOBCTL_TOKEN_FILE, JOBCTL_TOKEN or "
			 "'token = ...' in the config file");
	json_decref(doc);
	return rc;
}

/* Append the header "<prefix><value>" to *list. */
static int header_add(struct curl_slist **list, const char *prefix, const char *value,
		      struct ty_err *err)
{
	struct ty_buf b = TY_BUF_INIT;
	struct curl_slist *l;
	int rc = 0;

	if (ty_buf_puts(&b, prefix) || ty_buf_puts(&b, value))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	else if (!(l = curl_slist_append(*list, b.data)))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	else
		*list = l;
	if (b.data)
		memset(b.data, 0, b.len); /* it may hold the token */
	ty_buf_free(&b);
	return rc;
}

static int transport_error(struct cli *cli, CURLcode cc, const char *errbuf, long timeout_s,
			   struct ty_err *err)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cc);

	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		return ty_err_set(err, TY_ETIMEDOUT, "no answer from %s within %ld s", cli->server,
				  timeout_s);
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_URL_MALFORMAT:
		cli->settings_failed = true;
		return ty_err_set(err, TY_ECONFIG, "bad server URL '%.200s': %s", cli->server, why);
	case CURLE_WRITE_ERROR:
		return ty_err_set(err, TY_EIO, "the answer from %s is too large", cli->server);
	case CURLE_PEER_FAILED_VERIFICATION:
		return ty_err_set(err, TY_EUNAVAIL,
				  "cannot verify %s: %s (give its CA with --cacert or JOBCTL_CACERT)",
				  cli->server, why);
	case CURLE_OUT_OF_MEMORY:
		return ty_err_set(err, TY_ENOMEM, NULL);
	default:
		return ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s", cli->server, why);
	}
}


/* ---- plain HTTP/1.1 for an http:// server ---------------------------------- */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait for events on fd until deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline)
{
	for (;;) {
		long long left = deadline - now_ms();
		struct pollfd p = {.fd = fd, .events = events};
		int n;

		if (left <= 0)
			return 0;
		n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
		if (n > 0)
			return 1;
		if (n < 0 && errno != EINTR)
			return -1;
	}
}

struct plain_url {
	char host[256], port[8];
	const char *authority; /* the Host header: host[:port] as given */
	size_t authority_len;
	const char *prefix; /* the path the server URL names ("" or "/api") */
};

/* server is "http://host[:port][/prefix]"; -1 when it is not one. */
static int plain_url(struct plain_url *u, const char *server)
{
	const char *h = server + 7, *end = h + strcspn(h, "/?#"), *port = NULL;
	size_t hl;

	if (memchr(h, '@', (size_t)(end - h)) || (*end && *end != '/'))
		return -1; /* credentials in the URL, or a query: not a base URL */
	u->authority = h;
	u->authority_len = (size_t)(end - h);
	u->prefix = end;
	if (*h == '[') {
		const char *rb = memchr(h, ']', (size_t)(end - h));

		if (!rb || (rb + 1 < end && rb[1] != ':'))
			return -1;
		hl = (size_t)(rb - h - 1);
		h++;
		port = rb + 1 < end ? rb + 2 : NULL;
	} else {
		const char *colon = memchr(h, ':', (size_t)(end - h));

		hl = (size_t)((colon ? colon : end) - h);
		port = colon ? colon + 1 : NULL;
	}
	if (hl == 0 || hl >= sizeof(u->host))
		return -1;
	memcpy(u->host, h, hl);
	u->host[hl] = '\0';
	if (!port) {
		strcpy(u->port, "80");
		return 0;
	}
	if (end - port < 1 || end - port > 5 || strspn(port, "0123456789") < (size_t)(end - port))
		return -1;
	memcpy(u->port, port, (size_t)(end - port));
	u->port[end - port] = '\0';
	return 0;
}

static int plain_connect(int *out, struct cli *cli, const struct plain_url *u,
			 long long deadline, long timeout_s, struct ty_err *err)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
	long long cdeadline = now_ms() + CONNECT_TIMEOUT_MS;
	int g, last = ECONNREFUSED;

	*out = -1;
	if ((g = getaddrinfo(u->host, u->port, &hints, &ai)))
		return ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s", cli->server,
				  gai_strerror(g));
	if (cdeadline > deadline)
		cdeadline = deadline;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
				a->ai_protocol);
		int e = 0, w;
		socklen_t el = sizeof(e);

		if (fd < 0) {
			last = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
			last = errno;
		} else if ((w = wait_fd(fd, POLLOUT, cdeadline)) == 1 &&
			   getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0) {
			*out = fd;
			break;
		} else {
			last = w == 0 ? ETIMEDOUT : e ? e : errno;
		}
		close(fd);
	}
	freeaddrinfo(ai);
	if (*out >= 0)
		return 0;
	if (last == ETIMEDOUT)
		return ty_err_set(err, TY_ETIMEDOUT, "no answer from %s within %ld s", cli->server,
				  timeout_s);
	return ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s", cli->server, strerror(last));
}

/* The body of a chunked answer, decoded in place; -1 when it is malformed. */
static int unchunk(struct ty_buf *b, size_t from)
{
	size_t r = from, w = from;

	for (;;) {
		char *end;
		unsigned long n;
		const char *eol;

		if (r >= b->len || !(eol = memchr(b->data + r, '\n', b->len - r)))
			return -1;
		n = strtoul(b->data + r, &end, 16);
		if (end == b->data + r)
			return -1;
		r = (size_t)(eol - b->data) + 1;
		if (n == 0)
			break;
		if (n > b->len - r || b->len - r - n < 2)
			return -1;
		memmove(b->data + w, b->data + r, n);
		w += n;
		r += n + 2; /* the chunk's CRLF */
	}
	b->len = w;
	b->data[w] = '\0';
	return 0;
}

/*
 * One request over a new connection (Connection: close): the answer's
 * headers go through on_header, its body through on_body, as with libcurl.
 */
static int plain_exchange(long *status, struct cli_resp *resp, struct ty_buf *answer,
			  struct cli *cli, const char *method, const char *path,
			  const char *accept, const char *payload, const char *idem_key,
			  long timeout_s, struct ty_err *err)
{
	long long deadline = now_ms() + timeout_s * 1000LL;
	struct ty_buf req = TY_BUF_INIT, raw = TY_BUF_INIT;
	struct plain_url u;
	char *hend = NULL;
	long long length = -1;
	bool chunked = false;
	size_t off = 0, body_at;
	int fd = -1, rc = 0;

	*status = 0;
	if (plain_url(&u, cli->server) != 0) {
		cli->settings_failed = true;
		return ty_err_set(err, TY_ECONFIG, "bad server URL '%.200s'", cli->server);
	}
	ty_buf_printf(&req, "%s %s%s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: jobctl/" JOBCTL_VERSION
			    "\r\nAccept: %s\r\nConnection: close\r\n",
		      method, u.prefix, path, (int)u.authority_len, u.authority, accept);
	if (cli->token)
		ty_buf_printf(&req, "Authorization: Bearer %s\r\n", cli->token);
	if (idem_key)
		ty_buf_printf(&req, "Idempotency-Key: %s\r\n", idem_key);
	if (payload)
		ty_buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
			      strlen(payload), payload);
	else if (strcmp(method, "GET") != 0)
		ty_buf_puts(&req, "Content-Length: 0\r\n\r\n");
	else
		ty_buf_puts(&req, "\r\n");
	if (req.oom) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = plain_connect(&fd, cli, &u, deadline, timeout_s, err)))
		goto out;
	while (off < req.len) {
		ssize_t n = send(fd, req.data + off, req.len - off, MSG_NOSIGNAL);
		int w;

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			rc = ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s", cli->server,
					strerror(errno));
			goto out;
		}
		if ((w = wait_fd(fd, POLLOUT, deadline)) <= 0) {
			rc = w == 0 ? ty_err_set(err, TY_ETIMEDOUT, "no answer from %s within %ld s",
						 cli->server, timeout_s)
				    : ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s",
						 cli->server, strerror(errno));
			goto out;
		}
	}
	/* the whole answer: the server closes the connection after it */
	for (;;) {
		char chunk[16384];
		ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
		int w;

		if (n > 0) {
			if (raw.len + (size_t)n > MAX_ANSWER_BYTES + 65536) {
				rc = ty_err_set(err, TY_EIO, "the answer from %s is too large",
						cli->server);
				goto out;
			}
			if (ty_buf_append(&raw, chunk, (size_t)n)) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			if (!hend && (hend = strstr(raw.data, "\r\n\r\n"))) {
				const char *h = strstr(raw.data, "\r\n") + 2;

				*hend = '\0';
				for (const char *l = h; l && *l; l = strstr(l, "\r\n") ? strstr(l, "\r\n") + 2 : NULL) {
					size_t ll = strcspn(l, "\r");

					if (!strncasecmp(l, "content-length:", 15))
						length = strtoll(l + 15, NULL, 10);
					else if (!strncasecmp(l, "transfer-encoding:", 18) &&
						 strstr(l, "chunked"))
						chunked = true;
					on_header((char *)l, 1, ll, resp);
				}
				*hend = '\r';
			}
			if (hend && length >= 0 && !chunked &&
			    raw.len - (size_t)(hend + 4 - raw.data) >= (size_t)length)
				break;
			continue;
		}
		if (n == 0)
			break;
		if (errno != EAGAIN && errno != EINTR) {
			rc = ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s", cli->server,
					strerror(errno));
			goto out;
		}
		if ((w = wait_fd(fd, POLLIN, deadline)) <= 0) {
			rc = w == 0 ? ty_err_set(err, TY_ETIMEDOUT, "no answer from %s within %ld s",
						 cli->server, timeout_s)
				    : ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: %s",
						 cli->server, strerror(errno));
			goto out;
		}
	}
	if (!hend || strncmp(raw.data, "HTTP/1.", 7) != 0 || raw.len < 12 ||
	    (*status = strtol(raw.data + 9, NULL, 10)) < 100) {
		rc = ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: not an HTTP answer",
				cli->server);
		goto out;
	}
	body_at = (size_t)(hend + 4 - raw.data);
	if (chunked && unchunk(&raw, body_at)) {
		rc = ty_err_set(err, TY_EUNAVAIL, "cannot reach %s: a malformed chunked answer",
				cli->server);
		goto out;
	}
	if (length >= 0 && !chunked && raw.len - body_at > (size_t)length)
		raw.len = body_at + (size_t)length;
	if (raw.len > body_at && !on_body(raw.data + body_at, 1, raw.len - body_at, answer))
		rc = ty_err_set(err, TY_EIO, "the answer from %s is too large", cli->server);
out:
	if (fd >= 0)
		close(fd);
	if (req.data)
		memset(req.data, 0, req.len); /* it may hold the token */
	ty_buf_free(&req);
	ty_buf_free(&raw);
	return rc;
}

/*
 * One exchange: a 2xx answer's status and headers go to resp and its body,
 * unparsed, to answer (which the caller frees either way); anything else
 * fails as described at cli_request.
 */
static int exchange(struct cli_resp *resp, struct ty_buf *answer, struct cli *cli,
		    const char *method, const char *path, const char *accept, const json_t *body,
		    const char *idem_key, long timeout_s, struct ty_err *err)
{
	struct ty_buf url = TY_BUF_INIT;
	struct curl_slist *hdrs = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	char *payload = NULL;
	CURLcode cc;
	CURL *c;
	long status = 0;
	int rc;

	memset(resp, 0, sizeof(*resp));
	if ((rc = cli_connect(cli, err)))
		return rc;
	if (timeout_s <= 0)
		timeout_s = cli->timeout_s;
	if (cli->plain) {
		if (body && !(payload = json_dumps(body, JSON_COMPACT)))
			return ty_err_set(err, TY_ENOMEM, NULL);
		rc = plain_exchange(&status, resp, answer, cli, method, path, accept, payload,
				    idem_key, timeout_s, err);
		free(payload);
		resp->status = status;
		if (!rc && (status < 200 || status > 299))
			rc = problem(cli, status, answer, err);
		if (rc)
			cli_resp_free(resp);
		return rc;
	}
	c = cli->curl;
	/* keeps the connection cache, forgets the previous request's options */
	curl_easy_reset(c);

	if (ty_buf_puts(&url, cli->server) || ty_buf_puts(&url, path)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	/* no "Expect: 100-continue" round trip for large bodies */
	if ((rc = header_add(&hdrs, "Accept: ", accept, err)) ||
	    (rc = header_add(&hdrs, "Expect:", "", err)))
		goto out;
	if (cli->token && (rc = header_add(&hdrs, "Authorization: Bearer ", cli->token, err)))
		goto out;
	if (idem_key && (rc = header_add(&hdrs, "Idempotency-Key: ", idem_key, err)))
		goto out;
	if (body) {
		if (!(payload = json_dumps(body, JSON_COMPACT))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		if ((rc = header_add(&hdrs, "Content-Type: ", "application/json", err)))
			goto out;
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
	} else if (strcmp(method, "POST") == 0) {
		/* an empty body, and no form Content-Type for it */
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
		if ((rc = header_add(&hdrs, "Content-Type:", "", err)))
			goto out;
	}
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	else if (strcmp(method, "POST") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);

	curl_easy_setopt(c, CURLOPT_URL, url.data);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (cli->cacert)
		curl_easy_setopt(c, CURLOPT_CAINFO, cli->cacert);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout_s * 1000L < CONNECT_TIMEOUT_MS ? timeout_s * 1000L
								: CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_s * 1000L);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "jobctl/" JOBCTL_VERSION);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, answer);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);

	if ((cc = curl_easy_perform(c)) != CURLE_OK) {
		rc = transport_error(cli, cc, errbuf, timeout_s, err);
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	resp->status = status;
	if (status < 200 || status > 299) {
		rc = problem(cli, status, answer, err);
		goto out;
	}
	rc = 0;
out:
	if (rc)
		cli_resp_free(resp);
	/* the handle must not keep pointers into what is freed here */
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, NULL);
	curl_slist_free_all(hdrs);
	free(payload);
	ty_buf_free(&url);
	return rc;
}

int cli_request(struct cli_resp *resp, struct cli *cli, const char *method, const char *path,
		const json_t *body, const char *idem_key, long timeout_s, struct ty_err *err)
{
	struct ty_buf answer = TY_BUF_INIT;
	struct ty_err perr = {0};
	int rc;

	rc = exchange(resp, &answer, cli, method, path, "application/json", body, idem_key,
		      timeout_s, err);
	if (!rc && answer.len &&
	    ty_json_parse(&resp->body, answer.data, answer.len, MAX_ANSWER_DEPTH, &perr)) {
		cli_resp_free(resp);
		rc = ty_err_set(err, TY_EIO, "%s sent an answer that is not JSON: %s", cli->server,
				perr.msg);
	}
	ty_buf_free(&answer);
	return rc;
}

int cli_get_text(struct ty_buf *text, struct cli *cli, const char *path, struct ty_err *err)
{
	struct cli_resp resp = {0};
	int rc;

	rc = exchange(&resp, text, cli, "GET", path, "text/plain, application/problem+json", NULL,
		      NULL, 0, err);
	if (rc)
		ty_buf_free(text); /* the problem document, already in err */
	cli_resp_free(&resp);
	return rc;
}

int cli_get_pages(json_t **items, struct cli_resp *last, struct cli *cli, const char *base,
		  bool all, const char *what, struct ty_err *err)
{
	struct ty_buf path = TY_BUF_INIT;
	json_t *acc = json_array();
	char *cursor = NULL;
	int rc = 0;

	*items = NULL;
	if (!acc)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (;;) {
		const char *next;

		ty_buf_reset(&path);
		if (ty_buf_puts(&path, base) || (cursor && cli_buf_query(&path, "cursor", cursor))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		cli_resp_free(last);
		if ((rc = cli_request(last, cli, "GET", path.data, NULL, NULL, 0, err)))
			break;
		if (!json_is_array(json_object_get(last->body, "items"))) {
			rc = ty_err_set(err, TY_EIO, "the %s from the server has no 'items'", what);
			break;
		}
		if (json_array_extend(acc, json_object_get(last->body, "items"))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		next = cli_json_str(last->body, "next_cursor", NULL);
		if (!all || !next || !*next)
			break;
		if (cursor && strcmp(cursor, next) == 0) {
			rc = ty_err_set(err, TY_EIO, "the server returned the same cursor twice");
			break;
		}
		free(cursor);
		if (!(cursor = strdup(next))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
	}
	free(cursor);
	ty_buf_free(&path);
	if (rc) {
		json_decref(acc);
		return rc;
	}
	*items = acc;
	return 0;
}

int cli_print_pages(const struct cli_resp *last, const json_t *items, bool all)
{
	json_t *out;

	if (!all) {
		cli_print_json(last->body);
		return 0;
	}
	if (!(out = json_pack("{s:O,s:n}", "items", items, "next_cursor")))
		return TY_ENOMEM;
	cli_print_json(out);
	json_decref(out);
	return 0;
}

static int buf_escape(struct ty_buf *b, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc = 0;

	for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			rc = ty_buf_append(b, p, 1);
		} else {
			char esc[3] = {'%', hex[*p >> 4], hex[*p & 15]};

			rc = ty_buf_append(b, esc, 3);
		}
	}
	return rc;
}

int cli_buf_escape(struct ty_buf *b, const char *s)
{
	return buf_escape(b, s);
}

int cli_buf_query(struct ty_buf *b, const char *key, const char *val)
{
	bool first = !b->data || !memchr(b->data, '?', b->len);

	if (ty_buf_puts(b, first ? "?" : "&") || buf_escape(b, key) || ty_buf_puts(b, "=") ||
	    buf_escape(b, val))
		return TY_ENOMEM;
	return 0;
}

int cli_list_print(struct cli *cli, const char *base, bool all, const char *what, const char *noun,
		   const char *const *header, size_t ncols,
		   int (*row)(struct cli_table *t, const json_t *item), struct ty_err *err)
{
	struct cli_table t = {.ncols = ncols};
	struct cli_resp resp = {0};
	json_t *items = NULL;
	int rc;

	if ((rc = cli_get_pages(&items, &resp, cli, base, all, what, err)))
		goto out;
	if (cli->output == CLI_OUT_JSON) {
		if (cli_print_pages(&resp, items, all))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (size_t i = 0; i < ncols; i++)
		rc |= cli_table_add(&t, header[i]);
	for (size_t i = 0; i < json_array_size(items); i++)
		rc |= row(&t, json_array_get(items, i));
	if (rc) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	cli_table_print(stdout, &t);
	if (!all && cli_json_str(resp.body, "next_cursor", NULL))
		fprintf(stderr, "(more %s: use --all, or a larger --limit)\n", noun);
out:
	json_decref(items);
	cli_resp_free(&resp);
	cli_table_free(&t);
	return rc;
}
