/* jobctl's HTTP client: settings resolution, requests over libcurl, problem documents. */
#include "cli.h"
#include "ty_config.h"
#include "ty_json.h"

#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

	if (cli->curl)
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

	/* TLS is set up for an https:// server only: a plain one pays nothing for it */
	if (!cli->curl_global) {
		if (curl_global_init(strncasecmp(cli->server, "https://", 8) == 0
					     ? CURL_GLOBAL_SSL
					     : CURL_GLOBAL_NOTHING) != CURLE_OK)
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
