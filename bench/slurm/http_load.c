/*
 * trainyard-bench-submit: submits N trivial jobs (1 node, no GPU, one
 * command) to the Trainyard API over K concurrent keep-alive connections
 * (libcurl multi), then (--wait) polls GET /v1/jobs until none of them is
 * active and counts the succeeded ones. The Trainyard half of
 * bench/slurm/run; prints one JSON object.
 */
#include "ty_config.h"
#include "ty_err.h"

#include <curl/curl.h>
#include <jansson.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "trainyard-bench-submit"
#define ENV_PREFIX "TRAINYARD_BENCH_SUBMIT"

static const struct ty_opt options[] = {
    {"server", TY_OPT_STR, "http://127.0.0.1:8080", 0, 0, "API base URL"},
    {"token", TY_OPT_STR, NULL, 0, 0, "bearer token (a member of --team, or admin)"},
    {"team", TY_OPT_STR, NULL, 0, 0, "the jobs' team (must exist)"},
    {"jobs", TY_OPT_INT, "100", 1, 10000000, "jobs to submit"},
    {"clients", TY_OPT_INT, "16", 1, 1024,
     "concurrent connections (one request in flight each)"},
    {"command", TY_OPT_STR, "true", 0, 0, "the job's command (one program, no arguments)"},
    {"wait", TY_OPT_BOOL, "false", 0, 0,
     "after submitting, poll until every job of --team finished and time it"},
    {"poll-ms", TY_OPT_INT, "50", 1, 10000, "poll interval of --wait"},
    {"timeout-seconds", TY_OPT_INT, "900", 1, 86400, "give up waiting after this long"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

/* One connection: an easy handle reused for request after request. */
struct conn {
	CURL *h;
	char body[4096]; /* the response body, truncated (only errors are read) */
	size_t len;
	double started;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of v (sorted, n > 0). */
static double pct(const double *v, int n, double p)
{
	int i = (int)(p / 100.0 * n + 0.999999) - 1;

	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct conn *c = arg;
	size_t len = size * n, room = sizeof(c->body) - 1 - c->len;

	memcpy(c->body + c->len, p, len < room ? len : room);
	c->len += len < room ? len : room;
	c->body[c->len] = '\0';
	return len;
}

/* A growing response buffer for the polls. */
struct resp {
	char *p;
	size_t len;
};

static size_t on_resp(char *p, size_t size, size_t n, void *arg)
{
	struct resp *r = arg;
	size_t len = size * n;
	char *q = realloc(r->p, r->len + len + 1);

	if (!q)
		return 0;
	memcpy(q + r->len, p, len);
	r->p = q;
	r->len += len;
	r->p[r->len] = '\0';
	return len;
}

/* GET url into a new JSON value (*out); fails unless 200 and JSON. */
static int get_json(json_t **out, CURL *h, const char *url, struct ty_err *err)
{
	struct resp r = {0};
	json_error_t je;
	long code = 0;
	CURLcode cc;

	*out = NULL;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_resp);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
	cc = curl_easy_perform(h);
	if (cc != CURLE_OK) {
		free(r.p);
		return ty_err_set(err, TY_EIO, "GET '%s': %s", url, curl_easy_strerror(cc));
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	if (code != 200) {
		ty_err_set(err, TY_EIO, "GET '%s': status %ld: %.200s", url, code, r.p ? r.p : "");
		free(r.p);
		return err->code;
	}
	*out = json_loadb(r.p ? r.p : "", r.len, 0, &je);
	free(r.p);
	if (!*out)
		return ty_err_set(err, TY_EPARSE, "GET '%s': not JSON: %s", url, je.text);
	return 0;
}

/* Jobs of the team in the given states, counted page by page (limit 500). */
static int count_jobs(long *n, CURL *h, const char *server, const char *team, const char *states,
		      int limit, struct ty_err *err)
{
	char url[2048], *cursor = NULL;
	int rc = 0;

	*n = 0;
	do {
		json_t *j = NULL, *items, *next;

		snprintf(url, sizeof(url), "%s/v1/jobs?team=%s&state=%s&limit=%d%s%s", server, team,
			 states, limit, cursor ? "&cursor=" : "", cursor ? cursor : "");
		free(cursor);
		cursor = NULL;
		rc = get_json(&j, h, url, err);
		if (rc)
			break;
		items = json_object_get(j, "items");
		next = json_object_get(j, "next_cursor");
		if (!json_is_array(items)) {
			json_decref(j);
			rc = ty_err_set(err, TY_EPARSE, "GET '%s': no 'items' array", url);
			break;
		}
		*n += (long)json_array_size(items);
		if (json_is_string(next) && limit > 1) {
			char *esc = curl_easy_escape(h, json_string_value(next), 0);

			cursor = esc ? strdup(esc) : NULL;
			curl_free(esc);
		}
		json_decref(j);
	} while (cursor);
	free(cursor);
	return rc;
}

static void conn_start(struct conn *c, CURLM *m)
{
	c->len = 0;
	c->body[0] = '\0';
	c->started = now();
	curl_multi_add_handle(m, c->h);
}

int main(int argc, char **argv)
{
	struct ty_config *cfg = ty_config_new(options, NOPTS, ENV_PREFIX);
	struct conn *conns = NULL;
	struct curl_slist *hdr = NULL;
	struct ty_err err = {0};
	CURLM *m = NULL;
	CURL *poll = NULL;
	double *lat = NULL, t0, t1, done_at = 0;
	char auth[1024], body[1024];
	const char *server, *team, *token;
	int rest, status = 2, njobs, clients, sent = 0, done = 0, running = 0;
	long succeeded = 0, bad = 0;

	if (!cfg) {
		fprintf(stderr, PROG ": out of memory\n");
		return 2;
	}
	if (ty_config_load(cfg, argc, argv, &rest, &err)) {
		fprintf(stderr, PROG ": %s (try --help)\n", err.msg);
		goto out;
	}
	if (ty_config_bool(cfg, "help")) {
		printf("usage: " PROG " --token T --team T [options]\n\n"
		       "Submits --jobs trivial jobs (1 node, no GPU, --command) to POST /v1/jobs\n"
		       "over --clients concurrent keep-alive connections and prints the\n"
		       "submission rate and latency; with --wait also the time until none of\n"
		       "the team's jobs is active, from the first submission, and checks that\n"
		       "all succeeded (bench/README.md, \"bench/slurm\").\n\n");
		ty_config_usage(stdout, options, NOPTS, ENV_PREFIX);
		status = 0;
		goto out;
	}
	if (rest < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[rest]);
		goto out;
	}
	server = ty_config_str(cfg, "server");
	team = ty_config_str(cfg, "team");
	token = ty_config_str(cfg, "token");
	if (!team || !token) {
		fprintf(stderr, PROG ": --team and --token are required\n");
		goto out;
	}
	njobs = (int)ty_config_int(cfg, "jobs");
	clients = (int)ty_config_int(cfg, "clients");
	if (clients > njobs)
		clients = njobs;
	{
		json_t *b = json_pack("{s:s, s:s, s:[s], s:{s:i, s:i}}", "team", team, "name",
				      "bench", "command", ty_config_str(cfg, "command"),
				      "resources", "nodes", 1, "gpus_per_node", 0);
		char *s = b ? json_dumps(b, JSON_COMPACT) : NULL;

		json_decref(b);
		if (!s || strlen(s) >= sizeof(body)) {
			free(s);
			fprintf(stderr, PROG ": cannot build the job body\n");
			goto out;
		}
		strcpy(body, s);
		free(s);
	}
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	hdr = curl_slist_append(hdr, auth);
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	hdr = curl_slist_append(hdr, "Expect:");
	m = curl_multi_init();
	conns = calloc((size_t)clients, sizeof(*conns));
	lat = calloc((size_t)njobs, sizeof(*lat));
	poll = curl_easy_init();
	if (!hdr || !m || !conns || !lat || !poll) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)clients);
	curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)clients);
	{
		char url[2048];

		snprintf(url, sizeof(url), "%s/v1/jobs", server);
		for (int i = 0; i < clients; i++) {
			CURL *h = curl_easy_init();

			if (!h) {
				fprintf(stderr, PROG ": out of memory\n");
				goto out;
			}
			conns[i].h = h;
			curl_easy_setopt(h, CURLOPT_URL, url);
			curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
			curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
			curl_easy_setopt(h, CURLOPT_WRITEDATA, &conns[i]);
			curl_easy_setopt(h, CURLOPT_PRIVATE, &conns[i]);
			curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
		}
	}

	t0 = now();
	for (int i = 0; i < clients; i++, sent++)
		conn_start(&conns[i], m);
	while (done < njobs) {
		CURLMsg *msg;
		int left;

		int finished = 0;

		if (curl_multi_perform(m, &running) != CURLM_OK) {
			fprintf(stderr, PROG ": curl_multi_perform failed\n");
			goto out;
		}
		while ((msg = curl_multi_info_read(m, &left))) {
			struct conn *c = NULL;
			long code = 0;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
			curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &code);
			if (msg->data.result != CURLE_OK || code != 201) {
				fprintf(stderr, PROG ": POST /v1/jobs: %s, status %ld: %.300s\n",
					curl_easy_strerror(msg->data.result), code, c->body);
				goto out;
			}
			lat[done++] = now() - c->started;
			finished++;
			curl_multi_remove_handle(m, c->h);
			if (sent < njobs) {
				conn_start(c, m);
				sent++;
			}
		}
		/* a request just re-added is started by the next perform, not waited for */
		if (!finished && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK) {
			fprintf(stderr, PROG ": curl_multi_poll failed\n");
			goto out;
		}
	}
	t1 = now();

	if (ty_config_bool(cfg, "wait")) {
		int poll_ms = (int)ty_config_int(cfg, "poll-ms");
		double deadline = t0 + (double)ty_config_int(cfg, "timeout-seconds");

		curl_easy_setopt(poll, CURLOPT_HTTPHEADER, hdr);
		for (;;) {
			long active = 0;

			if (count_jobs(&active, poll, server, team,
				       "pending,scheduled,starting,running,preempting", 1, &err)) {
				fprintf(stderr, PROG ": %s\n", err.msg);
				goto out;
			}
			if (!active)
				break;
			if (now() > deadline) {
				fprintf(stderr, PROG ": jobs of team '%s' still active after %lld s\n",
					team, ty_config_int(cfg, "timeout-seconds"));
				goto out;
			}
			usleep((useconds_t)poll_ms * 1000);
		}
		done_at = now();
		if (count_jobs(&succeeded, poll, server, team, "succeeded", 500, &err) ||
		    count_jobs(&bad, poll, server, team, "failed,cancelled,stopped", 500, &err)) {
			fprintf(stderr, PROG ": %s\n", err.msg);
			goto out;
		}
	}
	qsort(lat, (size_t)njobs, sizeof(*lat), cmp_double);
	printf("{\"jobs\":%d,\"clients\":%d,\"submit_seconds\":%.4f,\"submit_per_second\":%.1f,"
	       "\"latency_ms\":{\"p50\":%.2f,\"p99\":%.2f}",
	       njobs, clients, t1 - t0, njobs / (t1 - t0), pct(lat, njobs, 50) * 1e3,
	       pct(lat, njobs, 99) * 1e3);
	if (ty_config_bool(cfg, "wait"))
		printf(",\"complete_seconds\":%.4f,\"complete_per_second\":%.1f,\"failed\":%ld",
		       done_at - t0, njobs / (done_at - t0), bad);
	printf("}\n");
	status = 0;
	if (ty_config_bool(cfg, "wait") && (bad || succeeded != njobs)) {
		fprintf(stderr, PROG ": team '%s': %ld jobs succeeded, %ld did not, of %d submitted\n",
			team, succeeded, bad, njobs);
		status = 1;
	}
out:
	if (conns)
		for (int i = 0; i < clients; i++)
			if (conns[i].h) {
				if (m)
					curl_multi_remove_handle(m, conns[i].h);
				curl_easy_cleanup(conns[i].h);
			}
	if (poll)
		curl_easy_cleanup(poll);
	if (m)
		curl_multi_cleanup(m);
	curl_slist_free_all(hdr);
	free(conns);
	free(lat);
	ty_config_free(cfg);
	return status;
}
