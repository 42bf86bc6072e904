/*
 * Hostile HTTP against the running API (docs/api.md, "Limits"): broken
 * framing, huge headers, paths that climb or hide bytes, SQL metacharacters
 * in every string and query parameter, NUL characters, numbers past every
 * limit, duplicate keys, deep JSON, slow clients. Each table row is a raw
 * request (sent over a socket, so nothing is normalised on the way) with
 * the answer it must get; after each table the API still serves, and
 * nothing a refused request carried was stored. What the API does accept
 * reads back byte for byte. test_api_http (configured_limits),
 * test_api_jobs (validation_table) and test_api_slow_clients cover the
 * plain cases; this program covers what they leave out.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int port_of(const char *url)
{
	const char *colon = strrchr(url, ':');

	return colon ? atoi(colon + 1) : 0;
}

/* A connection to the API from source address src (any 127.x.y.z), or -1. */
static int dial(const char *src, int port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	struct sockaddr_in me = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	inet_pton(AF_INET, src, &me.sin_addr);
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) != 0 ||
	    connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Send all of buf; false once the server closed (it may answer early). */
static bool send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		buf += n;
		len -= (size_t)n;
	}
	return true;
}

/* Whether the server closed fd (EOF or reset) within timeout_ms; what it sent first is read. */
static bool closed_by_server(int fd, int timeout_ms)
{
	long long end = now_ms() + timeout_ms;
	char buf[4096];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		long long left = end - now_ms() > 0 ? end - now_ms() : 0;
		ssize_t n;

		if (poll(&p, 1, (int)left) <= 0)
			return false;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			return true;
		if (n < 0 && left == 0)
			return false;
	}
}

/*
 * Parse a raw HTTP/1.1 answer into resp (status 0: the server closed
 * without answering). The body is parsed as JSON when its Content-Type
 * says so.
 */
static void parse_answer(struct ty_resp *resp, const char *raw, size_t len)
{
	const char *end = memmem(raw, len, "\r\n\r\n", 4), *line, *ct;
	const char *body;

	ty_resp_free(resp);
	if (len < 12 || strncmp(raw, "HTTP/1.", 7) != 0 || !end)
		return;
	resp->status = atoi(raw + 9);
	line = strstr(raw, "\r\n") + 2;
	while (line < end) {
		const char *eol = strstr(line, "\r\n"),
			   *colon = memchr(line, ':', (size_t)(eol - line));

		if (colon) {
			const char *v = colon + 1;
			struct ty_header *h;

			while (*v == ' ')
				v++;
			resp->headers = realloc(resp->headers, (resp->nheaders + 1) * sizeof(*h));
			h = &resp->headers[resp->nheaders++];
			h->name = strndup(line, (size_t)(colon - line));
			h->value = strndup(v, (size_t)(eol - v));
		}
		line = eol + 2;
	}
	body = end + 4;
	resp->body_len = len - (size_t)(body - raw);
	resp->body = malloc(resp->body_len + 1);
	memcpy(resp->body, body, resp->body_len);
	resp->body[resp->body_len] = '\0';
	ct = ty_resp_header(resp, "Content-Type");
	if (ct && strstr(ct, "json"))
		resp->json = json_loadb(resp->body, resp->body_len, 0, NULL);
}

/*
 * One raw exchange from 127.0.0.1: send head, then body (when given), read
 * until the server closes (every request says Connection: close).
 */
static void exchange(struct ty_resp *resp, int port, const char *head, size_t head_len,
		     const char *body, size_t body_len)
{
	struct {
		char *p;
		size_t len, cap;
	} in = {0};
	int fd = dial("127.0.0.1", port);
	long long end = now_ms() + 30000;

	ty_resp_free(resp);
	if (fd < 0) {
		snprintf(resp->error, sizeof(resp->error), "cannot connect: %s", strerror(errno));
		return;
	}
	if (send_all(fd, head, head_len) && body)
		send_all(fd, body, body_len);
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (now_ms() >= end || poll(&p, 1, (int)(end - now_ms())) <= 0) {
			snprintf(resp->error, sizeof(resp->error), "no close within 30 s");
			break;
		}
		if (in.len + 65536 > in.cap) {
			in.cap = in.cap * 2 + 65536;
			in.p = realloc(in.p, in.cap);
		}
		n = recv(fd, in.p + in.len, in.cap - in.len - 1, 0);
		if (n <= 0)
			break;
		in.len += (size_t)n;
	}
	close(fd);
	if (in.p) {
		in.p[in.len] = '\0';
		parse_answer(resp, in.p, in.len);
	}
	free(in.p);
}

/* ---- the request tables ---- */

/* What the harness fills into a row's templates. */
struct world {
	const char *team, *job, *admin;
	int port;
};

/*
 * Bodies and heads too big to write out: each builds on the row's template
 * (head = the request head up to its blank line, without it).
 */
enum gen {
	G_NONE,
	G_HEADER_64K,	  /* one header line of 64 KiB */
	G_HEADERS_10K,	  /* 10,000 short headers */
	G_TARGET_64K,	  /* a request target of 64 KiB */
	G_DEEP_ARRAYS,	  /* a label value nested 100,000 arrays deep */
	G_DEEP_OBJECTS,	  /* 100,000 nested objects */
	G_UNBALANCED,	  /* 100,000 '[' and nothing else */
	G_BODY_10M_AHEAD, /* Content-Length: 10 MiB announced, nothing sent */
	G_CHUNKED_10M,	  /* 10 MiB of JSON whitespace in 64 KiB chunks */
	G_AUTH_8K,	  /* a bearer token of 8 KiB */
};

struct row {
	const char *what;
	/*
	 * "METHOD target" (template); the harness adds Host, Connection:
	 * close, the admin token and, with a body, its type and length. raw
	 * (template) is the whole request instead.
	 */
	const char *line, *body, *raw;
	enum gen gen;
	int status;	   /* 0: closed without an answer */
	const char *code;  /* problem code; NULL: libmicrohttpd's own answer; "[]": 200, no items */
	const char *field; /* as CHECK_PROBLEM */
};

/*
 * Templates: @T team, @J a job of it, @K the admin token, @0 a NUL byte,
 * @@ an '@'. ' stays ' (bodies are written with \" where JSON needs it).
 */
static char *fill(size_t *len, const char *tmpl, const struct world *w)
{
	size_t cap = strlen(tmpl) * 2 + 1024, n = 0;
	char *out = ty_test_alloc(cap);

	for (const char *p = tmpl; *p; p++) {
		const char *ins = NULL;
		char one[2] = {0};

		if (p[0] == '@' && p[1]) {
			switch (p[1]) {
			case 'T':
				ins = w->team;
				break;
			case 'J':
				ins = w->job;
				break;
			case 'K':
				ins = w->admin;
				break;
			case '@':
				ins = "@";
				break;
			case '0':
				out[n++] = '\0';
				p++;
				continue;
			}
		}
		if (ins)
			p++;
		else
			one[0] = *p, ins = one;
		if (n + strlen(ins) + 1 > cap) {
			char *bigger = ty_test_alloc(cap * 2 + strlen(ins));

			memcpy(bigger, out, n);
			out = bigger;
			cap = cap * 2 + strlen(ins);
		}
		memcpy(out + n, ins, strlen(ins));
		n += strlen(ins);
	}
	*len = n;
	return out;
}

static char *repeat(const char *unit, size_t times, const char *tail)
{
	size_t u = strlen(unit), t = strlen(tail);
	char *out = ty_test_alloc(u * times + t + 1);

	for (size_t i = 0; i < times; i++)
		memcpy(out + i * u, unit, u);
	memcpy(out + u * times, tail, t);
	return out;
}

/* Run one row against w's server and check its answer. */
static void run_row(const struct row *row, const struct world *w)
{
	struct ty_resp resp = {0};
	char *head = NULL, *body = NULL, *line;
	size_t head_len = 0, body_len = 0, line_len;
	const char *extra = "";

	if (row->raw) {
		head = fill(&head_len, row->raw, w);
	} else {
		line = fill(&line_len, row->line, w);
		if (row->body)
			body = fill(&body_len, row->body, w);
		switch (row->gen) {
		case G_HEADER_64K:
			extra = ty_test_strf("X-Big: %s\r\n", repeat("a", 65536, ""));
			break;
		case G_HEADERS_10K: {
			size_t cap = 10000 * 16 + 1, n = 0;
			char *h = ty_test_alloc(cap);

			for (int i = 0; i < 10000; i++)
				n += (size_t)snprintf(h + n, cap - n, "X-H%d: v\r\n", i);
			extra = h;
			break;
		}
		case G_TARGET_64K:
			line = ty_test_strf("%s?pad=%s", line, repeat("a", 65536, ""));
			line_len = strlen(line);
			break;
		case G_DEEP_ARRAYS:
			body = ty_test_strf("{\"team\":\"%s\",\"command\":[\"x\"],\"resources\":{},"
					    "\"labels\":{\"k\":%s}}",
					    w->team, repeat("[", 100000, repeat("]", 100000, "")));
			body_len = strlen(body);
			break;
		case G_DEEP_OBJECTS:
			body = repeat("{\"a\":", 100000, repeat("}", 100000, ""));
			body_len = strlen(body);
			break;
		case G_UNBALANCED:
			body = repeat("[", 100000, "");
			body_len = strlen(body);
			break;
		case G_BODY_10M_AHEAD:
			extra = ty_test_strf("Content-Type: application/json\r\n"
					     "Content-Length: %d\r\n",
					     10 * MIB);
			break;
		case G_CHUNKED_10M: {
			size_t chunk = 65536, n = 0, nchunks = 10 * MIB / chunk;
			char *b = malloc(nchunks * (chunk + 16) + 16);

			for (size_t i = 0; i < nchunks; i++) {
				n += (size_t)sprintf(b + n, "%zx\r\n", chunk);
				memset(b + n, ' ', chunk);
				if (i == 0)
					b[n] = '{';
				n += chunk;
				memcpy(b + n, "\r\n", 2);
				n += 2;
			}
			n += (size_t)sprintf(b + n, "1\r\n}\r\n0\r\n\r\n");
			body = ty_test_alloc(n);
			memcpy(body, b, n);
			body_len = n;
			free(b);
			extra = "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n";
			break;
		}
		default:
			break;
		}
		head = ty_test_strf(
		    "%.*s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%s",
		    (int)line_len, line,
		    row->gen == G_AUTH_8K
			? ty_test_strf("Authorization: Bearer ty_%s\r\n", repeat("A", 8192, ""))
			: ty_test_strf("Authorization: Bearer %s\r\n", w->admin),
		    extra,
		    body && row->gen != G_CHUNKED_10M
			? ty_test_strf("Content-Type: application/json\r\nContent-Length: %zu\r\n",
				       body_len)
			: "",
		    "\r\n");
		head_len = strlen(head);
	}
	exchange(&resp, w->port, head, head_len, body, body_len);
	if (!row->code) {
		if (resp.status != row->status)
			FAIL("HTTP status %d, want %d (%s)", resp.status, row->status,
			     resp.status     ? resp.body
			     : resp.error[0] ? resp.error
					     : "closed");
	} else if (!strcmp(row->code, "[]")) {
		CHECK_STATUS(&resp, 200);
		if (resp.status == 200 && (!json_is_array(ty_jpath(resp.json, "items")) ||
					   json_array_size(ty_jpath(resp.json, "items")) != 0))
			FAIL("want no items, got %s", resp.body);
	} else {
		CHECK_PROBLEM(&resp, row->status, row->code, row->field);
	}
	/* libmicrohttpd never answers 100 Continue to a body it will refuse */
	if (resp.body && strstr(resp.body, "100 Continue"))
		FAIL("the answer holds a 100 Continue");
	if (ty_resp_header(&resp, "X-Injected"))
		FAIL("a header was injected through the path");
	ty_resp_free(&resp);
}

/* Row counts of every table a request could write to. */
static const char *stored_rows(void)
{
	return TY_STACK_SQL("SELECT format('jobs %s, teams %s, tokens %s, webhooks %s, sweeps %s,"
			    " metrics %s, audit %s',"
			    " (SELECT count(*) FROM jobs), (SELECT count(*) FROM teams),"
			    " (SELECT count(*) FROM api_tokens), (SELECT count(*) FROM webhooks),"
			    " (SELECT count(*) FROM sweeps), (SELECT count(*) FROM job_metrics),"
			    " (SELECT count(*) FROM audit_log))");
}

/*
 * The rows, then: nothing was stored, the API answers /healthz, and a normal
 * submission still works.
 */
static void run_table(const struct row *rows, size_t n)
{
	const struct ty_stack *s = ty_stack_get();
	struct world w = {0};
	const char *before, *after;
	struct ty_resp r = {0};
	long long job;

	w.team = ty_mk_team("abuse", 8, 8);
	w.job = ty_test_strf("%lld", ty_mk_job(s->admin, w.team, NULL));
	w.admin = s->admin;
	w.port = port_of(ty_test_api_url(s->api));
	before = stored_rows();
	for (size_t i = 0; i < n; i++) {
		ty_test_context("row %zu: %s", i, rows[i].what);
		run_row(&rows[i], &w);
	}
	ty_test_context(NULL);
	after = stored_rows();
	CHECK_STR_EQ(after, before);
	ty_http(&r, "GET", "/healthz", NULL, NULL, NULL);
	CHECK_STATUS(&r, 200);
	job = ty_mk_job(s->admin, w.team, NULL);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	CHECK_JSTR(r.json, "state", "pending");
	ty_resp_free(&r);
}

#define H11 " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"

/* HTTP framing: libmicrohttpd answers most of these itself, before any route. */
TY_TEST(framing_table)
{
	const struct row rows[] = {
	    {"request line garbage", NULL, NULL, "GARBAGE\r\n\r\n", G_NONE, 0, NULL, NULL},
	    {"no HTTP version", NULL, NULL, "GET /healthz\r\n\r\n", G_NONE, 400, NULL, NULL},
	    {"HTTP/9.9", NULL, NULL, "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", G_NONE, 505, NULL,
	     NULL},
	    {"header without a colon", NULL, NULL, "GET /healthz" H11 "NoColon\r\n\r\n", G_NONE,
	     400, NULL, NULL},
	    {"header line of 64 KiB", "GET /healthz", NULL, NULL, G_HEADER_64K, 431, NULL, NULL},
	    {"10,000 headers", "GET /healthz", NULL, NULL, G_HEADERS_10K, 431, NULL, NULL},
	    {"request target of 64 KiB", "GET /healthz", NULL, NULL, G_TARGET_64K, 414, NULL, NULL},
	    {"bearer token of 8 KiB", "GET /v1/teams", NULL, NULL, G_AUTH_8K, 401,
	     "unauthenticated", NULL},
	    {"bearer token of SQL", NULL, NULL,
	     "GET /v1/teams" H11 "Authorization: Bearer ' OR '1'='1'; --\r\n\r\n", G_NONE, 401,
	     "unauthenticated", NULL},
	    {"Content-Length not a number", NULL, NULL,
	     "POST /v1/teams" H11 "Content-Length: abc\r\n\r\n", G_NONE, 400, NULL, NULL},
	    {"Content-Length -1", NULL, NULL, "POST /v1/teams" H11 "Content-Length: -1\r\n\r\n",
	     G_NONE, 400, NULL, NULL},
	    {"Content-Length 10^23", NULL, NULL,
	     "POST /v1/teams" H11 "Content-Length: 100000000000000000000000\r\n\r\n", G_NONE, 413,
	     NULL, NULL},
	    {"two different Content-Lengths", NULL, NULL,
	     "POST /v1/teams" H11 "Authorization: Bearer @K\r\nContent-Type: application/json\r\n"
	     "Content-Length: 2\r\nContent-Length: 40\r\n\r\n"
	     "{}{\"name\":\"smuggled\",\"nominal_gpus\":1}",
	     G_NONE, 400, "invalid_header", "Content-Length"},
	    {"Content-Length with Transfer-Encoding", NULL, NULL,
	     "POST /v1/teams" H11 "Authorization: Bearer @K\r\nContent-Type: application/json\r\n"
	     "Content-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n"
	     "2\r\n{}\r\n0\r\n\r\n{\"name\":\"smuggled\",\"nominal_gpus\":1}",
	     G_NONE, 400, "invalid_header", "Content-Length"},
	    {"chunk size past 64 bits", NULL, NULL,
	     "POST /v1/teams" H11 "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffffff\r\n",
	     G_NONE, 413, NULL, NULL},
	    {"10 MiB announced", "POST /v1/jobs", NULL, NULL, G_BODY_10M_AHEAD, 413,
	     "body_too_large", NULL},
	    {"10 MiB announced with Expect: 100-continue", NULL, NULL,
	     "POST /v1/jobs" H11 "Authorization: Bearer @K\r\nContent-Type: application/json\r\n"
	     "Content-Length: 10485760\r\nExpect: 100-continue\r\n\r\n",
	     G_NONE, 413, "body_too_large", NULL},
	    {"10 MiB chunked", "POST /v1/jobs", NULL, NULL, G_CHUNKED_10M, 413, "body_too_large",
	     NULL},
	    {"JSON 100,000 arrays deep", "POST /v1/jobs", NULL, NULL, G_DEEP_ARRAYS, 400,
	     "json_too_deep", NULL},
	    {"JSON 100,000 objects deep", "POST /v1/sweeps", NULL, NULL, G_DEEP_OBJECTS, 400,
	     "json_too_deep", NULL},
	    {"100,000 unclosed '['", "POST /v1/teams", NULL, NULL, G_UNBALANCED, 400,
	     "json_too_deep", NULL},
	};

	run_table(rows, sizeof(rows) / sizeof(rows[0]));
}

/* Paths: dot segments, encoded dots and slashes, NUL, bytes that are not UTF-8, ids that are not.
 */
TY_TEST(path_table)
{
	const struct row rows[] = {
	    {"../ out of /v1/jobs", "GET /v1/jobs/../teams", NULL, NULL, G_NONE, 404, "not_found",
	     NULL},
	    {"../../ after a job", "GET /v1/jobs/@J/../../teams", NULL, NULL, G_NONE, 404,
	     "not_found", NULL},
	    {"log route, ../ after it", "GET /v1/jobs/@J/logs/../../../../etc/passwd", NULL, NULL,
	     G_NONE, 404, "not_found", NULL},
	    {"log route, %2e%2e as the job", "GET /v1/jobs/%2e%2e/logs", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"log route, encoded ../../", "GET /v1/jobs/..%2f..%2fteams/logs", NULL, NULL, G_NONE,
	     404, "not_found", NULL},
	    {"log route, %2e%2e%2f to /etc/passwd",
	     "GET /v1/jobs/%2e%2e%2f%2e%2e%2fetc%2fpasswd/logs", NULL, NULL, G_NONE, 404,
	     "not_found", NULL},
	    {"log route, backslashes", "GET /v1/jobs/..%5c..%5c/logs", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"log route, rank ../../etc/passwd", "GET /v1/jobs/@J/logs?rank=../../etc/passwd", NULL,
	     NULL, G_NONE, 400, "invalid_parameter", "rank"},
	    {"log route, rank with encoded slashes", "GET /v1/jobs/@J/logs?rank=0%2f..%2f..%2f1",
	     NULL, NULL, G_NONE, 400, "invalid_parameter", "rank"},
	    {"log route, rank -1", "GET /v1/jobs/@J/logs?rank=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "rank"},
	    {"log route, rank %00", "GET /v1/jobs/@J/logs?rank=%00", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "rank"},
	    {"log route, attempt ..%2f1", "GET /v1/jobs/@J/logs?attempt=..%2f1", NULL, NULL, G_NONE,
	     400, "invalid_parameter", "attempt"},
	    {"log route, tail 2^63", "GET /v1/jobs/@J/logs?tail=9223372036854775808", NULL, NULL,
	     G_NONE, 400, "invalid_parameter", "tail"},
	    {"log route, tail -1", "GET /v1/jobs/@J/logs?tail=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "tail"},
	    {"log route, job id then %00", "GET /v1/jobs/@J%00/logs", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"job id then %00 and more", "GET /v1/jobs/@J%00x", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"job id -1", "GET /v1/jobs/-1", NULL, NULL, G_NONE, 404, "job_not_found", NULL},
	    {"job id 0", "GET /v1/jobs/0", NULL, NULL, G_NONE, 404, "job_not_found", NULL},
	    {"job id 2^63", "GET /v1/jobs/9223372036854775808", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"job id 1e3", "GET /v1/jobs/1e3", NULL, NULL, G_NONE, 404, "job_not_found", NULL},
	    {"job id 0x10", "GET /v1/jobs/0x10", NULL, NULL, G_NONE, 404, "job_not_found", NULL},
	    {"job id +N", "GET /v1/jobs/+@J", NULL, NULL, G_NONE, 404, "job_not_found", NULL},
	    {"job id with a blank", "GET /v1/jobs/%20@J", NULL, NULL, G_NONE, 404, "job_not_found",
	     NULL},
	    {"job id of SQL", "GET /v1/jobs/1%20OR%201=1", NULL, NULL, G_NONE, 404, "job_not_found",
	     NULL},
	    {"cancel of job N'", "POST /v1/jobs/@J'/cancel", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"stop of job %2e%2e", "POST /v1/jobs/%2e%2e/stop", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"events of job ..;", "GET /v1/jobs/..;/events", NULL, NULL, G_NONE, 404,
	     "job_not_found", NULL},
	    {"team not UTF-8 (encoded)", "GET /v1/teams/%ff%fe", NULL, NULL, G_NONE, 404,
	     "not_found", NULL},
	    {"team not UTF-8 (raw bytes)", "GET /v1/teams/\xff\xfe", NULL, NULL, G_NONE, 404,
	     "not_found", NULL},
	    {"team as a UTF-16 surrogate", "GET /v1/teams/%ed%a0%80", NULL, NULL, G_NONE, 404,
	     "not_found", NULL},
	    {"team as an overlong '/'", "GET /v1/teams/%c0%af", NULL, NULL, G_NONE, 404,
	     "not_found", NULL},
	    {"team with CR LF and a header", "GET /v1/teams/%0d%0aX-Injected:%20yes", NULL, NULL,
	     G_NONE, 404, "not_found", NULL},
	    {"team of SQL", "GET /v1/teams/%27%3B%20DROP%20TABLE%20jobs%3B--", NULL, NULL, G_NONE,
	     404, "team_not_found", NULL},
	    {"team %", "GET /v1/teams/%25", NULL, NULL, G_NONE, 404, "team_not_found", NULL},
	    {"team _", "GET /v1/teams/_", NULL, NULL, G_NONE, 404, "team_not_found", NULL},
	    {"team then %00", "GET /v1/teams/@T%00", NULL, NULL, G_NONE, 404, "team_not_found",
	     NULL},
	    {"patch of ..%2f..", "PATCH /v1/teams/..%2f..", "{}", NULL, G_NONE, 404, "not_found",
	     NULL},
	    {"node ..\\..", "GET /v1/nodes/..%5c..%5cetc", NULL, NULL, G_NONE, 404,
	     "node_not_found", NULL},
	    {"node of SQL", "GET /v1/nodes/%27%20OR%20%271%27=%271", NULL, NULL, G_NONE, 404,
	     "node_not_found", NULL},
	    {"drain of node '--", "POST /v1/nodes/%27--/drain", NULL, NULL, G_NONE, 404,
	     "node_not_found", NULL},
	    {"token id of SQL", "DELETE /v1/tokens/1%20OR%201=1", NULL, NULL, G_NONE, 404,
	     "token_not_found", NULL},
	    {"sweep id 1;DROP", "GET /v1/sweeps/1;DROP", NULL, NULL, G_NONE, 404, "sweep_not_found",
	     NULL},
	    {"cancel of sweep -1", "POST /v1/sweeps/-1/cancel", NULL, NULL, G_NONE, 404,
	     "sweep_not_found", NULL},
	    {"webhook 1'--", "GET /v1/webhooks/1'--", NULL, NULL, G_NONE, 404, "webhook_not_found",
	     NULL},
	    {"delete of webhook 0", "DELETE /v1/webhooks/0", NULL, NULL, G_NONE, 404,
	     "webhook_not_found", NULL},
	    {"deliveries of webhook -1", "GET /v1/webhooks/-1/deliveries", NULL, NULL, G_NONE, 404,
	     "webhook_not_found", NULL},
	    {"ping of webhook 1e1", "POST /v1/webhooks/1e1/ping", NULL, NULL, G_NONE, 404,
	     "webhook_not_found", NULL},
	};

	run_table(rows, sizeof(rows) / sizeof(rows[0]));
}

/* Query parameters: SQL, LIKE wildcards, numbers past their range, bytes that are not UTF-8. */
TY_TEST(query_table)
{
	const struct row rows[] = {
	    {"jobs: team of SQL", "GET /v1/jobs?team=%27%20OR%201%3D1--", NULL, NULL, G_NONE, 200,
	     "[]", NULL},
	    {"jobs: team '; DROP", "GET /v1/jobs?team=x%27%3B%20DROP%20TABLE%20jobs%3B--", NULL,
	     NULL, G_NONE, 200, "[]", NULL},
	    {"jobs: team with %00", "GET /v1/jobs?team=@T%00", NULL, NULL, G_NONE, 200, "[]", NULL},
	    {"jobs: team not UTF-8", "GET /v1/jobs?team=%ff", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "team"},
	    {"jobs: a parameter name not UTF-8", "GET /v1/jobs?%ff=1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", NULL},
	    {"jobs: label %=%", "GET /v1/jobs?label=%25=%25", NULL, NULL, G_NONE, 200, "[]", NULL},
	    {"jobs: label _=_", "GET /v1/jobs?label=_=_", NULL, NULL, G_NONE, 200, "[]", NULL},
	    {"jobs: label value of SQL", "GET /v1/jobs?label=k=%27%20OR%20%27%27=%27", NULL, NULL,
	     G_NONE, 200, "[]", NULL},
	    {"jobs: label of JSON", "GET /v1/jobs?label=%22%3A%22=%7D%22%7B", NULL, NULL, G_NONE,
	     200, "[]", NULL},
	    {"jobs: label not UTF-8", "GET /v1/jobs?label=%ff=1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "label"},
	    {"jobs: state of SQL", "GET /v1/jobs?state=pending%27--", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "state"},
	    {"jobs: state list with a quote", "GET /v1/jobs?state=pending,%27", NULL, NULL, G_NONE,
	     400, "invalid_parameter", "state"},
	    {"jobs: cursor of SQL", "GET /v1/jobs?cursor=1%20OR%201=1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "cursor"},
	    {"jobs: cursor -1", "GET /v1/jobs?cursor=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "cursor"},
	    {"jobs: limit 0", "GET /v1/jobs?limit=0", NULL, NULL, G_NONE, 400, "invalid_parameter",
	     "limit"},
	    {"jobs: limit -1", "GET /v1/jobs?limit=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"jobs: limit 2^63", "GET /v1/jobs?limit=9223372036854775808", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"jobs: limit 1e2", "GET /v1/jobs?limit=1e2", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"jobs: limit 50;DROP", "GET /v1/jobs?limit=50;DROP", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"queue: team of SQL", "GET /v1/queue?team=a%27--", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "team"},
	    {"queue: limit -1", "GET /v1/queue?limit=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"queue: cursor '", "GET /v1/queue?cursor=%27", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "cursor"},
	    {"usage: team of SQL", "GET /v1/usage?team=%27%3B--", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "team"},
	    {"usage: from with a quote", "GET /v1/usage?from=2026-01-01T00:00:00Z%27", NULL, NULL,
	     G_NONE, 400, "invalid_parameter", "from"},
	    {"usage: to of digits", "GET /v1/usage?to=99999999999999999999", NULL, NULL, G_NONE,
	     400, "invalid_parameter", "to"},
	    {"usage: group_by of SQL", "GET /v1/usage?group_by=team%27--", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "group_by"},
	    {"nodes: state of SQL", "GET /v1/nodes?state=ready%27%20OR%20%271%27%3D%271", NULL,
	     NULL, G_NONE, 400, "invalid_parameter", "state"},
	    {"sweeps: team '", "GET /v1/sweeps?team=%27", NULL, NULL, G_NONE, 200, "[]", NULL},
	    {"sweeps: cursor '", "GET /v1/sweeps?cursor=%27", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "cursor"},
	    {"sweeps: limit -1", "GET /v1/sweeps?limit=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"webhooks: team of SQL", "GET /v1/webhooks?team=%27%20OR%201=1--", NULL, NULL, G_NONE,
	     200, "[]", NULL},
	    {"webhooks: limit 1e3", "GET /v1/webhooks?limit=1e3", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "limit"},
	    {"events: after -1", "GET /v1/jobs/@J/events?after=-1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "after"},
	    {"events: after '", "GET /v1/jobs/@J/events?after=%27", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "after"},
	    {"events: wait 61", "GET /v1/jobs/@J/events?wait=61", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "wait"},
	    {"events: wait 1e1", "GET /v1/jobs/@J/events?wait=1e1", NULL, NULL, G_NONE, 400,
	     "invalid_parameter", "wait"},
	    {"events: limit 2^63", "GET /v1/jobs/@J/events?limit=9223372036854775808", NULL, NULL,
	     G_NONE, 400, "invalid_parameter", "limit"},
	    {"metrics: name of SQL", "GET /v1/jobs/@J/metrics?name=%27%3B--", NULL, NULL, G_NONE,
	     400, "invalid_parameter", "name"},
	    {"metrics: after_step -2", "GET /v1/jobs/@J/metrics?after_step=-2", NULL, NULL, G_NONE,
	     400, "invalid_parameter", "after_step"},
	};

	run_table(rows, sizeof(rows) / sizeof(rows[0]));
}

#define JOB "{\"team\":\"@T\",\"command\":[\"x\"],\"resources\":{}"
#define SWEEP "{\"team\":\"@T\",\"template\":{\"command\":[\"x\"],\"resources\":{}}"
#define HOOK "{\"team\":\"@T\",\"url\":\"http://hooks.example/x\",\"events\":[\"*\"]"

/*
 * Bodies the JSON parser or the validators must refuse: NUL characters
 * (\u0000), lone surrogates and bytes that are not UTF-8, numbers past
 * their range or past 64 bits, duplicate keys, SQL metacharacters in
 * fields with a format. Every route with a body.
 */
TY_TEST(body_table)
{
	const struct row rows[] = {
	    /* NUL characters: C strings and PostgreSQL text cannot hold them */
	    {"team name with \\u0000", "POST /v1/teams",
	     "{\"name\":\"ab\\u0000cd\",\"nominal_gpus\":1}", NULL, G_NONE, 422, "invalid_field",
	     "name"},
	    {"team cohort with \\u0000", "POST /v1/teams",
	     "{\"name\":\"nul-cohort\",\"nominal_gpus\":1,\"cohort\":\"c\\u0000d\"}", NULL, G_NONE,
	     422, "invalid_field", "cohort"},
	    {"team patch with \\u0000", "PATCH /v1/teams/@T", "{\"cohort\":\"a\\u0000\"}", NULL,
	     G_NONE, 422, "invalid_field", "cohort"},
	    {"token name with \\u0000", "POST /v1/tokens",
	     "{\"name\":\"x\\u0000y\",\"role\":\"viewer\",\"team\":\"@T\"}", NULL, G_NONE, 422,
	     "invalid_field", "name"},
	    {"token team with \\u0000", "POST /v1/tokens",
	     "{\"name\":\"x\",\"role\":\"viewer\",\"team\":\"@T\\u0000zz\"}", NULL, G_NONE, 422,
	     "invalid_field", "team"},
	    {"job team with \\u0000", "POST /v1/jobs",
	     "{\"team\":\"@T\\u0000\",\"command\":[\"x\"],\"resources\":{}}", NULL, G_NONE, 422,
	     "invalid_field", "team"},
	    {"job argument with \\u0000", "POST /v1/jobs",
	     "{\"team\":\"@T\",\"command\":[\"x\",\"a\\u0000b\"],\"resources\":{}}", NULL, G_NONE,
	     422, "invalid_field", "command[1]"},
	    {"job env value \\u0000", "POST /v1/jobs", JOB ",\"env\":{\"A\":\"\\u0000\"}}", NULL,
	     G_NONE, 422, "invalid_field", "env.A"},
	    {"job label value with \\u0000", "POST /v1/jobs",
	     JOB ",\"labels\":{\"k\":\"v\\u0000\"}}", NULL, G_NONE, 422, "invalid_field",
	     "labels.k"},
	    {"webhook event with \\u0000", "POST /v1/webhooks",
	     "{\"team\":\"@T\",\"url\":\"http://h.example/x\",\"events\":[\"job.failed\\u0000x\"],"
	     "\"secret\":\"0123456789abcdef\"}",
	     NULL, G_NONE, 422, "invalid_field", "events[0]"},
	    {"webhook secret with \\u0000", "POST /v1/webhooks",
	     HOOK ",\"secret\":\"0123456789abcdef\\u0000xyz\"}", NULL, G_NONE, 422, "invalid_field",
	     "secret"},
	    {"sweep name with \\u0000", "POST /v1/sweeps",
	     SWEEP ",\"name\":\"a\\u0000\",\"trials\":[{\"a\":1}]}", NULL, G_NONE, 422,
	     "invalid_field", "name"},
	    {"sweep parameter value with \\u0000", "POST /v1/sweeps",
	     SWEEP ",\"trials\":[{\"a\":\"x\\u0000y\"}]}", NULL, G_NONE, 422, "invalid_field",
	     "trials[0].a"},
	    {"sweep template argument with \\u0000", "POST /v1/sweeps",
	     "{\"team\":\"@T\",\"template\":{\"command\":[\"x\\u0000\"],\"resources\":{}},"
	     "\"trials\":[{\"a\":1}]}",
	     NULL, G_NONE, 422, "invalid_field", "template.command[0]"},
	    {"key with \\u0000", "POST /v1/teams", "{\"na\\u0000me\":\"x\",\"nominal_gpus\":1}",
	     NULL, G_NONE, 400, "invalid_json", NULL},
	    {"metric name with \\u0000", "POST /v1/jobs/@J/metrics",
	     "{\"step\":1,\"metrics\":{\"a\\u0000\":1}}", NULL, G_NONE, 400, "invalid_json", NULL},
	    /* not UTF-8 */
	    {"lone high surrogate", "POST /v1/jobs", JOB ",\"name\":\"\\ud800\"}", NULL, G_NONE,
	     400, "invalid_json", NULL},
	    {"lone low surrogate", "POST /v1/jobs", JOB ",\"name\":\"\\udc00x\"}", NULL, G_NONE,
	     400, "invalid_json", NULL},
	    {"surrogates reversed", "POST /v1/teams",
	     "{\"name\":\"\\udc00\\ud800\",\"nominal_gpus\":1}", NULL, G_NONE, 400, "invalid_json",
	     NULL},
	    {"surrogate as raw UTF-8 bytes", "POST /v1/jobs", JOB ",\"name\":\"\xed\xa0\x80\"}",
	     NULL, G_NONE, 400, "invalid_json", NULL},
	    {"overlong '/'", "POST /v1/tokens",
	     "{\"name\":\"\xc0\xaf\",\"role\":\"viewer\",\"team\":\"@T\"}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    {"truncated sequence", "POST /v1/sweeps", SWEEP ",\"trials\":[{\"a\":\"\xe2\x82\"}]}",
	     NULL, G_NONE, 400, "invalid_json", NULL},
	    {"0xff in a key", "POST /v1/jobs", JOB ",\"labels\":{\"\xff\":\"v\"}}", NULL, G_NONE,
	     400, "invalid_json", NULL},
	    {"raw NUL byte", "POST /v1/jobs", JOB ",\"name\":\"a@0b\"}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    /* numbers */
	    {"priority 1e999", "POST /v1/jobs", JOB ",\"priority\":1e999}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    {"priority -1e999", "POST /v1/jobs", JOB ",\"priority\":-1e999}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    {"priority 2^63", "POST /v1/jobs", JOB ",\"priority\":9223372036854775808}", NULL,
	     G_NONE, 400, "invalid_json", NULL},
	    {"priority -2^63-1", "POST /v1/jobs", JOB ",\"priority\":-9223372036854775809}", NULL,
	     G_NONE, 400, "invalid_json", NULL},
	    {"priority 2^63-1", "POST /v1/jobs", JOB ",\"priority\":9223372036854775807}", NULL,
	     G_NONE, 422, "invalid_field", "priority"},
	    {"priority -2^63", "POST /v1/jobs", JOB ",\"priority\":-9223372036854775808}", NULL,
	     G_NONE, 422, "invalid_field", "priority"},
	    {"priority NaN", "POST /v1/jobs", JOB ",\"priority\":NaN}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    {"priority 1e2 (a real)", "POST /v1/jobs", JOB ",\"priority\":1e2}", NULL, G_NONE, 422,
	     "invalid_field", "priority"},
	    {"nodes 1.0", "POST /v1/jobs",
	     "{\"team\":\"@T\",\"command\":[\"x\"],\"resources\":{\"nodes\":1.0}}", NULL, G_NONE,
	     422, "invalid_field", "resources.nodes"},
	    {"max_runtime 2^32+1", "POST /v1/jobs", JOB ",\"max_runtime_seconds\":4294967297}",
	     NULL, G_NONE, 422, "invalid_field", "max_runtime_seconds"},
	    {"nominal_gpus -1", "POST /v1/teams", "{\"name\":\"neg-gpus\",\"nominal_gpus\":-1}",
	     NULL, G_NONE, 422, "invalid_field", "nominal_gpus"},
	    {"nominal_gpus 2^63-1", "POST /v1/teams",
	     "{\"name\":\"big-gpus\",\"nominal_gpus\":9223372036854775807}", NULL, G_NONE, 422,
	     "invalid_field", "nominal_gpus"},
	    {"weight 1e-999 (0)", "PATCH /v1/teams/@T", "{\"weight\":1e-999}", NULL, G_NONE, 422,
	     "invalid_field", "weight"},
	    {"weight -0.0", "PATCH /v1/teams/@T", "{\"weight\":-0.0}", NULL, G_NONE, 422,
	     "invalid_field", "weight"},
	    {"weight 1e308", "PATCH /v1/teams/@T", "{\"weight\":1e308}", NULL, G_NONE, 422,
	     "invalid_field", "weight"},
	    {"borrowing limit 2^63", "PATCH /v1/teams/@T",
	     "{\"borrowing_limit_gpus\":9223372036854775808}", NULL, G_NONE, 400, "invalid_json",
	     NULL},
	    {"sweep seed -1", "POST /v1/sweeps",
	     SWEEP ",\"random\":{\"count\":1,\"seed\":-1,\"params\":{\"a\":{\"choice\":[1]}}}}",
	     NULL, G_NONE, 422, "invalid_field", "random.seed"},
	    {"sweep seed 2^64", "POST /v1/sweeps",
	     SWEEP ",\"random\":{\"count\":1,\"seed\":18446744073709551616,\"params\":{}}}", NULL,
	     G_NONE, 400, "invalid_json", NULL},
	    {"sweep max_concurrent 0", "POST /v1/sweeps",
	     SWEEP ",\"trials\":[{\"a\":1}],\"max_concurrent\":0}", NULL, G_NONE, 422,
	     "invalid_field", "max_concurrent"},
	    {"metric step -1", "POST /v1/jobs/@J/metrics", "{\"step\":-1,\"metrics\":{\"a\":1}}",
	     NULL, G_NONE, 422, "invalid_field", "step"},
	    {"metric step 2^63", "POST /v1/jobs/@J/metrics",
	     "{\"step\":9223372036854775808,\"metrics\":{\"a\":1}}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    {"metric value 1e999", "POST /v1/jobs/@J/metrics",
	     "{\"step\":1,\"metrics\":{\"a\":1e999}}", NULL, G_NONE, 400, "invalid_json", NULL},
	    {"preempt deadline -1", "POST /v1/nodes/no-such-node/preempt",
	     "{\"deadline_seconds\":-1}", NULL, G_NONE, 422, "invalid_field", "deadline_seconds"},
	    {"preempt deadline 2^63-1", "POST /v1/nodes/no-such-node/preempt",
	     "{\"deadline_seconds\":9223372036854775807}", NULL, G_NONE, 422, "invalid_field",
	     "deadline_seconds"},
	    /* duplicate keys, on every route with a body */
	    {"team: name twice", "POST /v1/teams",
	     "{\"name\":\"a\",\"name\":\"b\",\"nominal_gpus\":1}", NULL, G_NONE, 400,
	     "invalid_json", NULL},
	    {"team patch: weight twice", "PATCH /v1/teams/@T", "{\"weight\":1,\"weight\":2}", NULL,
	     G_NONE, 400, "invalid_json", NULL},
	    {"token: name twice", "POST /v1/tokens",
	     "{\"name\":\"a\",\"name\":\"b\",\"role\":\"viewer\",\"team\":\"@T\"}", NULL, G_NONE,
	     400, "invalid_json", NULL},
	    {"webhook: url twice", "POST /v1/webhooks",
	     HOOK ",\"url\":\"http://other.example/\",\"secret\":\"0123456789abcdef\"}", NULL,
	     G_NONE, 400, "invalid_json", NULL},
	    {"sweep: grid key twice", "POST /v1/sweeps", SWEEP ",\"grid\":{\"a\":[1],\"a\":[2]}}",
	     NULL, G_NONE, 400, "invalid_json", NULL},
	    {"sweep: template resources twice", "POST /v1/sweeps",
	     "{\"team\":\"@T\",\"template\":{\"command\":[\"x\"],\"resources\":{},"
	     "\"resources\":{}},\"trials\":[{\"a\":1}]}",
	     NULL, G_NONE, 400, "invalid_json", NULL},
	    {"metrics: a metric twice", "POST /v1/jobs/@J/metrics",
	     "{\"step\":1,\"metrics\":{\"a\":1,\"a\":2}}", NULL, G_NONE, 400, "invalid_json", NULL},
	    {"preempt: deadline twice", "POST /v1/nodes/no-such-node/preempt",
	     "{\"deadline_seconds\":1,\"deadline_seconds\":2}", NULL, G_NONE, 400, "invalid_json",
	     NULL},
	    /* SQL metacharacters where a field has a format */
	    {"team name '; DROP", "POST /v1/teams",
	     "{\"name\":\"x'; DROP TABLE jobs;--\",\"nominal_gpus\":1}", NULL, G_NONE, 422,
	     "invalid_field", "name"},
	    {"cohort ' OR '1'='1", "PATCH /v1/teams/@T", "{\"cohort\":\"a' OR '1'='1\"}", NULL,
	     G_NONE, 422, "invalid_field", "cohort"},
	    {"token role admin' --", "POST /v1/tokens",
	     "{\"name\":\"x\",\"role\":\"admin' --\",\"team\":null}", NULL, G_NONE, 422,
	     "invalid_field", "role"},
	    {"token team ' OR '1'='1", "POST /v1/tokens",
	     "{\"name\":\"x\",\"role\":\"viewer\",\"team\":\"@T' OR '1'='1\"}", NULL, G_NONE, 422,
	     "unknown_team", "team"},
	    {"job team ' OR 1=1--", "POST /v1/jobs",
	     "{\"team\":\"' OR 1=1--\",\"command\":[\"x\"],\"resources\":{}}", NULL, G_NONE, 422,
	     "unknown_team", "team"},
	    {"job team %", "POST /v1/jobs", "{\"team\":\"%\",\"command\":[\"x\"],\"resources\":{}}",
	     NULL, G_NONE, 422, "unknown_team", "team"},
	    {"job priority_class normal'--", "POST /v1/jobs",
	     JOB ",\"priority_class\":\"normal'--\"}", NULL, G_NONE, 422, "invalid_field",
	     "priority_class"},
	    {"job label key k';--", "POST /v1/jobs", JOB ",\"labels\":{\"k';--\":\"v\"}}", NULL,
	     G_NONE, 422, "invalid_field", "labels.k';--"},
	    {"job env key A;DROP", "POST /v1/jobs", JOB ",\"env\":{\"A;DROP\":\"v\"}}", NULL,
	     G_NONE, 422, "invalid_field", "env.A;DROP"},
	    {"job checkpoint signal with a backslash", "POST /v1/jobs",
	     JOB ",\"checkpoint\":{\"signal\":\"SIGUSR1\\\\\"}}", NULL, G_NONE, 422,
	     "invalid_field", "checkpoint.signal"},
	    {"webhook url '; DROP", "POST /v1/webhooks",
	     "{\"team\":\"@T\",\"url\":\"http://h.example/x'; DROP TABLE jobs;--\","
	     "\"events\":[\"*\"],\"secret\":\"0123456789abcdef\"}",
	     NULL, G_NONE, 422, "invalid_field", "url"},
	    {"webhook team x'--", "POST /v1/webhooks",
	     "{\"team\":\"x'--\",\"url\":\"http://h.example/x\",\"events\":[\"*\"],"
	     "\"secret\":\"0123456789abcdef\"}",
	     NULL, G_NONE, 422, "invalid_field", "team"},
	    {"webhook event job.%", "POST /v1/webhooks",
	     "{\"team\":\"@T\",\"url\":\"http://h.example/x\",\"events\":[\"job.%\"],"
	     "\"secret\":\"0123456789abcdef\"}",
	     NULL, G_NONE, 422, "invalid_field", "events[0]"},
	    {"sweep direction minimize'--", "POST /v1/sweeps",
	     SWEEP ",\"trials\":[{\"a\":1}],\"objective\":{\"metric\":\"m\","
		   "\"direction\":\"minimize'--\"}}",
	     NULL, G_NONE, 422, "invalid_field", "objective.direction"},
	    {"metric name '; DROP", "POST /v1/jobs/@J/metrics",
	     "{\"step\":1,\"metrics\":{\"loss'; DROP TABLE jobs;--\":1}}", NULL, G_NONE, 422,
	     "invalid_field", TY_FIELD_UNCHECKED},
	};

	run_table(rows, sizeof(rows) / sizeof(rows[0]));
}

/* ---- what is accepted reads back byte for byte ---- */

/* Strings full of SQL and LIKE metacharacters, quotes and escapes; each a valid name. */
static const char *const hostile[] = {
    "'; DROP TABLE jobs;--",
    "\" OR \"\"=\"",
    "x' OR '1'='1",
    "back\\slash \\\\ \\' \\\"",
    "100% _wild_ %_% \\%",
    "$1 $$ $q$ ::text E'\\x41'",
    "semi;colon -- comment /* c */ #",
    "tab\tnew\nline\rcr",
    "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x80\xa8",
    "{\"json\":[1,2]} @> '{}'",
};
#define NHOSTILE (sizeof(hostile) / sizeof(hostile[0]))

/* Percent-encode every byte outside the unreserved set. */
static const char *url_encode(const char *s)
{
	char *out = ty_test_alloc(strlen(s) * 3 + 1), *w = out;

	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~", *p))
			*w++ = (char)*p;
		else
			w += sprintf(w, "%%%02X", *p);
	}
	return out;
}

/* The string at path is exactly want (length and bytes). */
static void check_exact(const json_t *root, const char *path, const char *want)
{
	const json_t *v = ty_jpath(root, path);

	if (!json_is_string(v) || json_string_length(v) != strlen(want) ||
	    memcmp(json_string_value(v), want, strlen(want)) != 0)
		FAIL("%s is %s, want the string sent", path,
		     json_is_string(v) ? json_string_value(v) : "not a string");
}

TY_TEST(accepted_metacharacters_round_trip)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("meta", 8, -1);
	long long jobs[NHOSTILE];
	int before = atoi(TY_STACK_SQL("SELECT count(*) FROM jobs"));
	struct ty_resp r = {0};

	for (size_t i = 0; i < NHOSTILE; i++) {
		const char *str = hostile[i];
		/* printable ASCII with every metacharacter: a valid Idempotency-Key */
		const char *key = ty_test_strf("k%zu'; DROP TABLE jobs;-- %%_\\\"", i);
		const char *headers[] = {ty_test_strf("Idempotency-Key: %s", key), NULL};
		json_t *body = json_pack("{s:s, s:s, s:[s,s], s:{s:s}, s:{s:s}, s:{}}", "team",
					 team, "name", str, "command", "echo", str, "env", "V", str,
					 "labels", "k", str, "resources");
		char *text = json_dumps(body, JSON_COMPACT);
		json_t *got;
		const char *id;

		ty_test_context("string %zu", i);
		ty_http(&r, "POST", "/v1/jobs", s->admin, text, headers);
		REQUIRE_STATUS(&r, 201);
		jobs[i] = ty_jint(r.json, "id");
		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", jobs[i]), s->admin, NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		check_exact(r.json, "name", str);
		check_exact(r.json, "spec.command[1]", str);
		check_exact(r.json, "spec.env.V", str);
		check_exact(r.json, "spec.labels.k", str);
		/* the label as a query parameter finds this job and no other */
		ty_http(&r, "GET",
			ty_test_strf("/v1/jobs?team=%s&label=%s", team,
				     url_encode(ty_test_strf("k=%s", str))),
			s->admin, NULL, NULL);
		CHECK_STATUS(&r, 200);
		got = ty_jpath(r.json, "items");
		if (json_array_size(got) != 1 || ty_jint(r.json, "items[0].id") != jobs[i])
			FAIL("label filter found %zu jobs, want job %lld alone",
			     json_array_size(got), jobs[i]);
		/* the same key and body replay the job */
		ty_http(&r, "POST", "/v1/jobs", s->admin, text, headers);
		CHECK_STATUS(&r, 200);
		CHECK_INT_EQ(ty_jint(r.json, "id"), jobs[i]);
		CHECK_STR_EQ(ty_resp_header(&r, "Idempotent-Replayed"), "true");
		free(text);
		json_decref(body);

		/* a token named by it */
		body = json_pack("{s:s, s:s, s:s}", "name", str, "role", "viewer", "team", team);
		text = json_dumps(body, JSON_COMPACT);
		ty_http(&r, "POST", "/v1/tokens", s->admin, text, NULL);
		REQUIRE_STATUS(&r, 201);
		check_exact(r.json, "name", str);
		id = ty_test_strf("%lld", ty_jint(r.json, "id"));
		CHECK_STR_EQ(
		    TY_STACK_SQL("SELECT name = $2 FROM api_tokens WHERE id = $1", id, str), "t");
		free(text);
		json_decref(body);

		/* a sweep named by it, with it as a parameter value */
		body = json_pack("{s:s, s:s, s:{s:[s], s:{}}, s:[{s:s}]}", "team", team, "name",
				 str, "template", "command", "x", "resources", "trials", "p", str);
		text = json_dumps(body, JSON_COMPACT);
		ty_http(&r, "POST", "/v1/sweeps", s->admin, text, NULL);
		REQUIRE_STATUS(&r, 201);
		id = ty_test_strf("%lld", ty_jint(r.json, "id"));
		ty_http(&r, "GET", ty_test_strf("/v1/sweeps/%s", id), s->admin, NULL, NULL);
		CHECK_STATUS(&r, 200);
		check_exact(r.json, "name", str);
		check_exact(r.json, "trials[0].params.p", str);
		ty_http(&r, "GET",
			ty_test_strf("/v1/jobs/%lld", ty_jint(r.json, "trials[0].job_id")),
			s->admin, NULL, NULL);
		CHECK_STATUS(&r, 200);
		check_exact(r.json, "spec.env.TRAINYARD_PARAM_P", str);
		free(text);
		json_decref(body);
	}
	ty_test_context(NULL);

	/* a webhook whose URL and secret carry them (the secret is never shown) */
	{
		json_t *hook = json_pack("{s:s, s:s, s:[s], s:s}", "team", team, "url",
					 "https://h.example/x?q=%27;--&a=%25_", "events", "*",
					 "secret", "'; DROP TABLE jobs;-- \\ %_");
		char *text = json_dumps(hook, JSON_COMPACT);

		ty_http(&r, "POST", "/v1/webhooks", s->admin, text, NULL);
		free(text);
		json_decref(hook);
	}
	CHECK_STATUS(&r, 201);
	CHECK_JSTR(r.json, "url", "https://h.example/x?q=%27;--&a=%25_");
	CHECK_STR_EQ(TY_STACK_SQL("SELECT secret FROM webhooks WHERE id = $1",
				  ty_test_strf("%lld", ty_jint(r.json, "id"))),
		     "'; DROP TABLE jobs;-- \\ %_");

	/* exactly these rows: a job and a trial per string, nothing else */
	CHECK_INT_EQ(atoi(TY_STACK_SQL("SELECT count(*) FROM jobs")), before + 2 * (int)NHOSTILE);
	CHECK_INT_EQ(ty_count_jobs(s->admin, ty_test_strf("team=%s", team)), 2 * (int)NHOSTILE);
	CHECK_INT_EQ(
	    atoi(TY_STACK_SQL("SELECT count(*) FROM jobs j JOIN teams t"
			      " ON t.id = j.team_id WHERE t.name = $1 AND j.name IS NOT NULL",
			      team)),
	    (int)NHOSTILE);
	ty_resp_free(&r);
}

/* ---- slow clients ---- */

#define PER_IP 6

/* Send one byte on each open fd; close and forget those the server closed. */
static int trickle(int *fds, int n, char byte)
{
	int open_fds = 0;

	for (int i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (!send_all(fds[i], &byte, 1) || closed_by_server(fds[i], 0)) {
			close(fds[i]);
			fds[i] = -1;
			continue;
		}
		open_fds++;
	}
	return open_fds;
}

/* A thread sending one byte on each connection of fds every 200 ms until told to stop. */
struct trickler {
	int *fds, n;
	char byte;
	atomic_bool stop;
	int open_fds; /* when it stopped */
};

static void *trickle_loop(void *arg)
{
	struct trickler *t = arg;

	while (!atomic_load(&t->stop)) {
		t->open_fds = trickle(t->fds, t->n, t->byte);
		sleep_ms(200);
	}
	t->open_fds = trickle(t->fds, t->n, t->byte);
	return NULL;
}

/*
 * Slowloris: connections that trickle a header byte at a time never go
 * idle, so the idle timeout cannot end them; --max-connections-per-ip
 * bounds how many one address holds, and others are served meanwhile. A
 * body trickled in is ended by --body-timeout. Connections up to the
 * whole --max-connections limit make new ones wait, not fail.
 */
TY_TEST(slowloris)
{
	const struct ty_stack *s = ty_stack_get();
	const char *const args[] = {
	    "--connection-timeout",
	    "2",
	    "--body-timeout",
	    "3",
	    "--max-connections-per-ip",
	    "6",
	    "--max-connections",
	    "24",
	    "--threads",
	    "2",
	    NULL,
	};
	struct ty_api *api = ty_test_api_start(s->db_url, args);
	int port = port_of(ty_test_api_url(api)), fds[3 * PER_IP], bodies[4], full[24];
	const char *team = ty_mk_team("slow", 8, -1);
	struct ty_resp r = {0};
	int open_fds = 0;
	long long end;

	/* three times the per-address limit from 127.0.0.2, sending headers a byte at a time */
	for (int i = 0; i < 3 * PER_IP; i++) {
		fds[i] = dial("127.0.0.2", port);
		if (fds[i] >= 0 && !send_all(fds[i], "GET /healthz HTTP/1.1\r\nHost: x\r\n", 33)) {
			close(fds[i]);
			fds[i] = -1;
		}
	}
	/* trickle for two idle timeouts, and serve others meanwhile */
	{
		struct trickler t = {.fds = fds, .n = 3 * PER_IP, .byte = 'x'};
		pthread_t th;

		REQUIRE(pthread_create(&th, NULL, trickle_loop, &t) == 0);
		end = now_ms() + 4500;
		while (now_ms() < end) {
			ty_http_raw(&r, api, "GET", "/v1/teams", s->admin, NULL, 0, NULL);
			CHECK_INT_EQ(r.status, 200);
			sleep_ms(300);
		}
		atomic_store(&t.stop, true);
		pthread_join(th, NULL);
		/* the limit admitted PER_IP; the others were closed at once */
		CHECK_INT_EQ(t.open_fds, PER_IP);
	}
	/* once they stop sending, the idle timeout ends them */
	for (int i = 0; i < 3 * PER_IP; i++) {
		if (fds[i] < 0)
			continue;
		ty_test_context("trickling connection %d", i);
		CHECK(closed_by_server(fds[i], 15000));
		close(fds[i]);
	}
	ty_test_context(NULL);

	/* bodies trickled in after their headers, from 127.0.0.3 */
	for (int i = 0; i < 4; i++) {
		const char *head = ty_test_strf(
		    "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
		    "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{",
		    s->admin);

		bodies[i] = dial("127.0.0.3", port);
		if (bodies[i] >= 0 && !send_all(bodies[i], head, strlen(head))) {
			close(bodies[i]);
			bodies[i] = -1;
		}
		CHECK(bodies[i] >= 0);
	}
	end = now_ms() + 20000;
	while (now_ms() < end && (open_fds = trickle(bodies, 4, ' ')) > 0) {
		ty_http_raw(&r, api, "GET", "/healthz", NULL, NULL, 0, NULL);
		CHECK_INT_EQ(r.status, 200);
		sleep_ms(500);
	}
	/* ended by --body-timeout although never idle (allow 20 s for 3) */
	CHECK_INT_EQ(open_fds, 0);
	for (int i = 0; i < 4; i++)
		if (bodies[i] >= 0)
			close(bodies[i]);

	/* the whole --max-connections limit held by stalled clients from four addresses */
	for (int i = 0; i < 24; i++) {
		full[i] = dial(ty_test_strf("127.0.0.%d", 4 + i / PER_IP), port);
		if (full[i] >= 0 && !send_all(full[i], "GET /healthz HTTP/1.1\r\n", 23)) {
			close(full[i]);
			full[i] = -1;
		}
	}
	/* a new client waits for a slot the idle timeout frees, and is then served */
	ty_http_raw(&r, api, "GET", "/healthz", NULL, NULL, 0, NULL);
	CHECK_INT_EQ(r.status, 200);
	r.status = 0;
	{
		const char *body = ty_tmpl("{'team':'@T','command':['x'],'resources':{}}", team);

		ty_http_raw(&r, api, "POST", "/v1/jobs", s->admin, body, strlen(body), NULL);
		CHECK_INT_EQ(r.status, 201);
	}
	for (int i = 0; i < 24; i++) {
		if (full[i] < 0)
			continue;
		ty_test_context("stalled connection %d", i);
		CHECK(closed_by_server(full[i], 15000));
		close(full[i]);
	}
	ty_test_context(NULL);
	ty_resp_free(&r);
	ty_test_api_stop(api);
	ty_test_api_use(s->api);
}
