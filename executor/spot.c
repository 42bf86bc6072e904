/*
 * Spot interruption notices: the pure parsers of the three providers'
 * metadata answers, and the poller that asks on the daemon's loop through
 * libcurl's multi_socket API (sockets on uv_poll, curl's timer on uv_timer).
 */
#include "exec.h"
#include "ty_buf.h"
#include "ty_log.h"
#include "ty_time.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- providers ---- */

static const char *const provider_names[] = {"none", "aws", "gcp", "azure"};

int exec_spot_provider_parse(const char *name)
{
	for (int i = 0; name && i < 4; i++)
		if (!strcmp(name, provider_names[i]))
			return i;
	return -1;
}

const char *exec_spot_provider_name(enum exec_spot_provider p)
{
	return (int)p >= 0 && (int)p < 4 ? provider_names[p] : "none";
}

const char *exec_spot_default_base(enum exec_spot_provider p)
{
	switch (p) {
	case EXEC_SPOT_AWS:
	case EXEC_SPOT_AZURE:
		return "http://169.254.169.254";
	case EXEC_SPOT_GCP:
		return "http://metadata.google.internal";
	default:
		return "";
	}
}

/* ---- time formats ---- */

/* n decimal digits at *p into *v; advances *p. */
static bool digits(const char **p, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*p)++) {
		if (!isdigit((unsigned char)**p))
			return false;
		*v = *v * 10 + (**p - '0');
	}
	return true;
}

static bool lit(const char **p, char c)
{
	if (**p != c)
		return false;
	(*p)++;
	return true;
}

/* "Mon, 19 Sep 2016 18:29:47 GMT": Azure's NotBefore (RFC 1123). */
static bool rfc1123_ms(int64_t *ms, const char *s)
{
	static const char *const wd[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
	static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
					  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
	int y, mo = 0, d, h, mi, sec, i;

	for (i = 0; i < 7 && strncmp(s, wd[i], 3); i++)
		;
	if (i == 7)
		return false;
	s += 3;
	if (!lit(&s, ',') || !lit(&s, ' '))
		return false;
	/* RFC 1123 has two-digit days; accept one, as some servers send it */
	if (!digits(&s, 1, &d))
		return false;
	if (isdigit((unsigned char)*s))
		d = d * 10 + (*s++ - '0');
	if (!lit(&s, ' '))
		return false;
	for (mo = 0; mo < 12 && strncmp(s, mon[mo], 3); mo++)
		;
	if (mo == 12)
		return false;
	s += 3;
	return lit(&s, ' ') && digits(&s, 4, &y) && lit(&s, ' ') && digits(&s, 2, &h) &&
	       lit(&s, ':') && digits(&s, 2, &mi) && lit(&s, ':') && digits(&s, 2, &sec) &&
	       !strcmp(s, " GMT") && ty_time_civil_ms(ms, y, mo + 1, d, h, mi, sec, 0);
}

/* ---- parsers ---- */

static json_t *load(const char *body, size_t len, const char *who, struct ty_err *err)
{
	json_error_t je;
	json_t *v = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &je);

	if (!v)
		ty_err_set(err, TY_EPARSE, "%s: the answer is not JSON: %s", who, je.text);
	else if (!json_is_object(v)) {
		ty_err_set(err, TY_EPARSE, "%s: the answer is not a JSON object", who);
		json_decref(v);
		v = NULL;
	}
	return v;
}

static int parse_aws(struct exec_spot_notice *out, long status, const char *body, size_t len,
		     struct ty_err *err)
{
	static const char *const who = "aws spot/instance-action";
	const char *action, *when;
	json_t *v;
	int rc = 0;

	if (status == 404)
		return 0;
	if (status == 401)
		return ty_err_set(err, TY_EAUTH, "%s: the IMDSv2 token was refused (HTTP 401)",
				  who);
	if (status != 200)
		return ty_err_set(err, TY_EUNAVAIL, "%s: unexpected HTTP status %ld", who, status);
	if (!(v = load(body, len, who, err)))
		return TY_EPARSE;
	action = json_string_value(json_object_get(v, "action"));
	when = json_string_value(json_object_get(v, "time"));
	if (!action || (strcmp(action, "terminate") && strcmp(action, "stop") &&
			strcmp(action, "hibernate"))) {
		rc =
		    ty_err_set(err, TY_EPARSE,
			       "%s: 'action' is not \"terminate\", \"stop\" or \"hibernate\"", who);
		goto out;
	}
	if (!when || !ty_time_parse_rfc3339(&out->deadline_ms, when)) {
		rc = ty_err_set(err, TY_EPARSE,
				"%s: 'time' is not an RFC 3339 UTC time like "
				"\"2026-01-02T03:04:05Z\"",
				who);
		goto out;
	}
	out->notice = true;
	snprintf(out->action, sizeof(out->action), "%s", action);
	snprintf(out->detail, sizeof(out->detail), "aws instance-action %s at %.64s", action, when);
	snprintf(out->id, sizeof(out->id), "%s %.64s", action, when);
out:
	json_decref(v);
	return rc;
}

static int parse_gcp(struct exec_spot_notice *out, long status, const char *body, size_t len,
		     int64_t now_ms, struct ty_err *err)
{
	static const char *const who = "gcp instance/preempted";
	size_t a = 0, b = body ? len : 0;

	if (status != 200)
		return ty_err_set(err, TY_EUNAVAIL, "%s: unexpected HTTP status %ld", who, status);
	while (a < b && isspace((unsigned char)body[a]))
		a++;
	while (b > a && isspace((unsigned char)body[b - 1]))
		b--;
	if (b - a == 5 && !memcmp(body + a, "FALSE", 5))
		return 0;
	if (b - a != 4 || memcmp(body + a, "TRUE", 4))
		return ty_err_set(err, TY_EPARSE, "%s: the answer is not \"TRUE\" or \"FALSE\"",
				  who);
	out->notice = true;
	out->deadline_ms = now_ms + EXEC_SPOT_GCP_NOTICE_MS;
	snprintf(out->action, sizeof(out->action), "preempt");
	snprintf(out->detail, sizeof(out->detail),
		 "gcp instance/preempted is TRUE (about %d s of notice)",
		 EXEC_SPOT_GCP_NOTICE_MS / 1000);
	snprintf(out->id, sizeof(out->id), "preempted");
	return 0;
}

static int parse_azure(struct exec_spot_notice *out, long status, const char *body, size_t len,
		       int64_t now_ms, struct ty_err *err)
{
	static const char *const who = "azure scheduledevents";
	json_t *v, *events, *e;
	size_t i;
	int rc = 0;

	if (status != 200)
		return ty_err_set(err, TY_EUNAVAIL, "%s: unexpected HTTP status %ld", who, status);
	if (!(v = load(body, len, who, err)))
		return TY_EPARSE;
	if (!json_is_array(events = json_object_get(v, "Events"))) {
		rc = ty_err_set(err, TY_EPARSE, "%s: 'Events' is not an array", who);
		goto out;
	}
	json_array_foreach(events, i, e)
	{
		const char *type = json_string_value(json_object_get(e, "EventType"));
		const char *st = json_string_value(json_object_get(e, "EventStatus"));
		const char *nb = json_string_value(json_object_get(e, "NotBefore"));
		const char *id = json_string_value(json_object_get(e, "EventId"));
		int64_t when = now_ms;

		if (!json_is_object(e) || !type) {
			rc = ty_err_set(err, TY_EPARSE, "%s: event %zu has no 'EventType'", who, i);
			goto out;
		}
		/* Reboot, Redeploy, Freeze, Terminate...: maintenance, not an eviction */
		if (strcmp(type, "Preempt"))
			continue;
		if (!st || (strcmp(st, "Scheduled") && strcmp(st, "Started")))
			continue; /* a newer API version may list a finished one */
		if (!nb) {
			rc = ty_err_set(err, TY_EPARSE, "%s: Preempt event %zu has no 'NotBefore'",
					who, i);
			goto out;
		}
		/* "" once the event has started: no time left */
		if (*nb && !rfc1123_ms(&when, nb)) {
			rc = ty_err_set(err, TY_EPARSE,
					"%s: 'NotBefore' of Preempt event %zu is not an RFC 1123 "
					"time like \"Mon, 19 Sep 2016 18:29:47 GMT\"",
					who, i);
			goto out;
		}
		if (out->notice && when >= out->deadline_ms)
			continue;
		out->notice = true;
		out->deadline_ms = when;
		snprintf(out->action, sizeof(out->action), "Preempt");
		snprintf(out->detail, sizeof(out->detail), "azure Preempt event %.64s (%s%s)",
			 id ? id : "without EventId", *nb ? "not before " : "started",
			 *nb ? nb : "");
		snprintf(out->id, sizeof(out->id), "%.128s", id ? id : "Preempt");
	}
out:
	if (rc)
		memset(out, 0, sizeof(*out));
	json_decref(v);
	return rc;
}

int exec_spot_parse(struct exec_spot_notice *out, enum exec_spot_provider p, long status,
		    const char *body, size_t len, int64_t now_ms, struct ty_err *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	switch (p) {
	case EXEC_SPOT_AWS:
		rc = parse_aws(out, status, body, len, err);
		break;
	case EXEC_SPOT_GCP:
		rc = parse_gcp(out, status, body, len, now_ms, err);
		break;
	case EXEC_SPOT_AZURE:
		rc = parse_azure(out, status, body, len, now_ms, err);
		break;
	default:
		return ty_err_set(err, TY_EINVAL, "no spot provider to parse an answer of");
	}
	if (rc)
		memset(out, 0, sizeof(*out));
	return rc;
}

/* ---- the poller ---- */

enum req { REQ_NONE, REQ_TOKEN, REQ_NOTICE };

struct exec_spot {
	uv_loop_t *loop;
	enum exec_spot_provider provider;
	char *base;
	int64_t poll_ms;
	int64_t timeout_ms;
	exec_spot_cb *cb;
	void *arg;
	CURLM *multi;
	uv_timer_t curl_timer; /* libcurl's own timeouts */
	uv_timer_t poll_timer; /* the next poll */
	int handles;	       /* open uv handles; s is freed when the last one closes */
	bool closing;
	CURL *easy; /* the request in flight, or NULL */
	enum req req;
	struct curl_slist *hdrs;
	struct ty_buf body;
	bool too_big;
	char token[512];		    /* IMDSv2 session token, "" when none */
	int64_t token_until;		    /* monotonic ms: refreshed from then on */
	bool retried_auth;		    /* one immediate token refresh per 401 streak */
	char failing[EXEC_SPOT_DETAIL_MAX]; /* the last failure logged as a warning */
	struct exec_spot_notice last;	    /* the last notice reported */
};

/* One socket libcurl asked us to watch. */
struct spot_sock {
	uv_poll_t poll;
	curl_socket_t fd;
	struct exec_spot *s;
};

static int curl_inits;

static void spot_free(struct exec_spot *s)
{
	free(s->base);
	ty_buf_free(&s->body);
	free(s);
	if (--curl_inits == 0)
		curl_global_cleanup();
}

static void on_handle_closed(uv_handle_t *h)
{
	struct exec_spot *s = h->data;

	if (--s->handles == 0 && s->closing)
		spot_free(s);
}

static void on_sock_closed(uv_handle_t *h)
{
	struct spot_sock *k = (struct spot_sock *)h;
	struct exec_spot *s = k->s;

	free(k);
	if (--s->handles == 0 && s->closing)
		spot_free(s);
}

static void check_done(struct exec_spot *s);

static void socket_action(struct exec_spot *s, curl_socket_t fd, int ev)
{
	int running = 0;
	CURLMcode mc = curl_multi_socket_action(s->multi, fd, ev, &running);

	if (mc != CURLM_OK)
		ty_warn("spot poller: libcurl: %s", curl_multi_strerror(mc));
	check_done(s);
}

static void on_sock(uv_poll_t *h, int status, int events)
{
	struct spot_sock *k = (struct spot_sock *)h;
	int ev = 0;

	if (status < 0)
		ev = CURL_CSELECT_ERR;
	if (events & UV_READABLE)
		ev |= CURL_CSELECT_IN;
	if (events & UV_WRITABLE)
		ev |= CURL_CSELECT_OUT;
	socket_action(k->s, k->fd, ev);
}

/* CURLMOPT_SOCKETFUNCTION: start, change or stop watching fd. */
static int on_curl_socket(CURL *e, curl_socket_t fd, int what, void *userp, void *sockp)
{
	struct exec_spot *s = userp;
	struct spot_sock *k = sockp;
	int events = 0;

	if (what == CURL_POLL_REMOVE) {
		if (k) {
			/* before libcurl closes fd: uv_close stops polling it now */
			if (!s->closing)
				curl_multi_assign(s->multi, fd, NULL);
			uv_close((uv_handle_t *)&k->poll, on_sock_closed);
		}
		return 0;
	}
	if (!k) {
		if (!(k = calloc(1, sizeof(*k))))
			return -1;
		k->fd = fd;
		k->s = s;
		if (uv_poll_init_socket(s->loop, &k->poll, fd)) {
			free(k);
			return -1;
		}
		s->handles++;
		curl_multi_assign(s->multi, fd, k);
	}
	if (what & CURL_POLL_IN)
		events |= UV_READABLE;
	if (what & CURL_POLL_OUT)
		events |= UV_WRITABLE;
	return uv_poll_start(&k->poll, events, on_sock) ? -1 : 0;
}

static void on_curl_timer(uv_timer_t *t)
{
	socket_action(t->data, CURL_SOCKET_TIMEOUT, 0);
}

/* CURLMOPT_TIMERFUNCTION: -1 stops the timer, otherwise (re)arm it. */
static int on_curl_timeout(CURLM *m, long timeout_ms, void *userp)
{
	struct exec_spot *s = userp;

	if (s->closing)
		return 0;
	if (timeout_ms < 0)
		uv_timer_stop(&s->curl_timer);
	else /* 0: at once, but from the loop, never from inside libcurl */
		uv_timer_start(&s->curl_timer, on_curl_timer, (uint64_t)timeout_ms, 0);
	return 0;
}

static size_t on_body(char *p, size_t sz, size_t n, void *arg)
{
	struct exec_spot *s = arg;

	if (s->body.len + sz * n > EXEC_SPOT_BODY_MAX) {
		s->too_big = true;
		return 0; /* aborts the transfer */
	}
	return ty_buf_append(&s->body, p, sz * n) ? 0 : sz * n;
}

static void end_request(struct exec_spot *s)
{
	if (s->easy) {
		curl_multi_remove_handle(s->multi, s->easy);
		curl_easy_cleanup(s->easy);
		s->easy = NULL;
	}
	curl_slist_free_all(s->hdrs);
	s->hdrs = NULL;
	s->req = REQ_NONE;
	ty_buf_reset(&s->body);
	s->too_big = false;
}

/* A failed poll: a warning when it starts or changes, debug while it lasts. */
static void failed(struct exec_spot *s, const char *msg)
{
	if (strcmp(s->failing, msg)) {
		ty_warn("spot poller (%s): %s; polling on every %lld ms",
			exec_spot_provider_name(s->provider), msg, (long long)s->poll_ms);
		snprintf(s->failing, sizeof(s->failing), "%s", msg);
	} else {
		ty_debug("spot poller (%s): %s", exec_spot_provider_name(s->provider), msg);
	}
}

static void recovered(struct exec_spot *s)
{
	if (s->failing[0])
		ty_info("spot poller (%s): the metadata endpoint answers again",
			exec_spot_provider_name(s->provider));
	s->failing[0] = '\0';
}

static int start_request(struct exec_spot *s, enum req r);

static void notice_done(struct exec_spot *s, long status)
{
	struct exec_spot_notice n;
	struct ty_err err = {0};
	int rc =
	    exec_spot_parse(&n, s->provider, status, s->body.data, s->body.len, ty_wall_ms(), &err);

	if (rc == TY_EAUTH && s->provider == EXEC_SPOT_AWS) {
		s->token[0] = '\0';
		if (!s->retried_auth) {
			s->retried_auth = true;
			ty_info("spot poller (aws): %s; asking for a new token", err.msg);
			end_request(s);
			start_request(s, REQ_TOKEN);
			return;
		}
	}
	end_request(s);
	if (rc) {
		failed(s, err.msg);
		return;
	}
	s->retried_auth = false;
	recovered(s);
	if (!n.notice) {
		ty_debug("spot poller (%s): no notice", exec_spot_provider_name(s->provider));
		return;
	}
	if (s->last.notice && !strcmp(s->last.id, n.id))
		return; /* the same notice again */
	s->last = n;
	s->cb(s->arg, &n);
}

static void token_done(struct exec_spot *s, long status)
{
	size_t n = s->body.len;

	while (n && isspace((unsigned char)s->body.data[n - 1]))
		n--;
	if (status != 200 || n == 0 || n >= sizeof(s->token)) {
		char msg[EXEC_SPOT_DETAIL_MAX];

		snprintf(msg, sizeof(msg),
			 status != 200 ? "aws IMDSv2 token: unexpected HTTP status %ld"
				       : "aws IMDSv2 token: an empty or over-long token (HTTP %ld)",
			 status);
		end_request(s);
		failed(s, msg);
		return;
	}
	memcpy(s->token, s->body.data, n);
	s->token[n] = '\0';
	/* refresh a minute before it expires */
	s->token_until = ty_mono_ms() + (EXEC_SPOT_TOKEN_TTL_S - 60) * 1000LL;
	end_request(s);
	start_request(s, REQ_NOTICE);
}

/* Completed transfers: hand each answer to its parser. */
static void check_done(struct exec_spot *s)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(s->multi, &left))) {
		long status = 0;
		char msg[EXEC_SPOT_DETAIL_MAX];
		enum req r = s->req;

		if (m->msg != CURLMSG_DONE || m->easy_handle != s->easy)
			continue;
		if (m->data.result != CURLE_OK) {
			const char *what = r == REQ_TOKEN ? "aws IMDSv2 token" : "notice request";

			if (s->too_big)
				snprintf(msg, sizeof(msg), "%s: an answer over %d bytes", what,
					 EXEC_SPOT_BODY_MAX);
			else
				snprintf(msg, sizeof(msg), "%s: %s", what,
					 curl_easy_strerror(m->data.result));
			end_request(s);
			failed(s, msg);
			continue;
		}
		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
		if (r == REQ_TOKEN)
			token_done(s, status);
		else
			notice_done(s, status);
	}
}

static int start_request(struct exec_spot *s, enum req r)
{
	char url[4096], hdr[600];
	const char *path;
	CURL *e;

	if (s->closing || s->easy)
		return 0;
	switch (s->provider) {
	case EXEC_SPOT_AWS:
		path =
		    r == REQ_TOKEN ? "/latest/api/token" : "/latest/meta-data/spot/instance-action";
		break;
	case EXEC_SPOT_GCP:
		path = "/computeMetadata/v1/instance/preempted";
		break;
	default:
		path = "/metadata/scheduledevents?api-version=2020-07-01";
		break;
	}
	snprintf(url, sizeof(url), "%s%s", s->base, path);
	if (!(e = curl_easy_init()))
		return TY_ENOMEM;
	if (s->provider == EXEC_SPOT_AWS && r == REQ_TOKEN) {
		snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token-ttl-seconds: %d",
			 EXEC_SPOT_TOKEN_TTL_S);
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "PUT");
	} else if (s->provider == EXEC_SPOT_AWS) {
		snprintf(hdr, sizeof(hdr), "X-aws-ec2-metadata-token: %s", s->token);
	} else if (s->provider == EXEC_SPOT_GCP) {
		snprintf(hdr, sizeof(hdr), "Metadata-Flavor: Google");
	} else {
		snprintf(hdr, sizeof(hdr), "Metadata: true");
	}
	s->hdrs = curl_slist_append(NULL, hdr);
	curl_easy_setopt(e, CURLOPT_URL, url);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, s->hdrs);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	/* the metadata service is link-local: never through a proxy */
	curl_easy_setopt(e, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	if (!s->hdrs || curl_multi_add_handle(s->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		curl_slist_free_all(s->hdrs);
		s->hdrs = NULL;
		return TY_ENOMEM;
	}
	s->easy = e;
	s->req = r;
	return 0;
}

static void on_poll(uv_timer_t *t)
{
	struct exec_spot *s = t->data;
	enum req r = REQ_NOTICE;

	if (s->easy) {
		/* cannot happen while timeout_ms < poll_ms; never two at once */
		ty_debug("spot poller: the previous request is still running");
		return;
	}
	if (s->provider == EXEC_SPOT_AWS && (!s->token[0] || ty_mono_ms() >= s->token_until))
		r = REQ_TOKEN;
	if (start_request(s, r))
		failed(s, "cannot start a request: out of memory");
}

int exec_spot_start(struct exec_spot **out, uv_loop_t *loop, const struct exec_spot_opts *o,
		    exec_spot_cb *cb, void *arg, struct ty_err *err)
{
	struct exec_spot *s;
	size_t n;

	*out = NULL;
	if (o->provider != EXEC_SPOT_AWS && o->provider != EXEC_SPOT_GCP &&
	    o->provider != EXEC_SPOT_AZURE)
		return ty_err_set(err, TY_EINVAL, "no spot provider to poll");
	if (!o->base_url || strncmp(o->base_url, "http", 4) || strlen(o->base_url) > 2048)
		return ty_err_set(err, TY_EINVAL,
				  "spot metadata URL '%.100s' is not an http(s) URL of at most "
				  "2048 characters",
				  o->base_url ? o->base_url : "");
	if (o->poll_ms < 1 || o->timeout_ms < 1)
		return ty_err_set(err, TY_EINVAL,
				  "spot poll interval and timeout must be positive");
	if (!(s = calloc(1, sizeof(*s))) || !(s->base = strdup(o->base_url))) {
		free(s);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	if (curl_inits++ == 0 && curl_global_init(CURL_GLOBAL_DEFAULT)) {
		spot_free(s);
		return ty_err_set(err, TY_EIO, "cannot initialise libcurl");
	}
	/* a blocking resolver would stall the loop on every poll of a name */
	if (!(curl_version_info(CURLVERSION_NOW)->features & CURL_VERSION_ASYNCHDNS))
		ty_warn("spot poller: this libcurl resolves names synchronously: a slow DNS "
			"answer for the metadata host blocks the executor's loop");
	n = strlen(s->base);
	while (n && s->base[n - 1] == '/')
		s->base[--n] = '\0';
	s->loop = loop;
	s->provider = o->provider;
	s->poll_ms = o->poll_ms;
	s->timeout_ms = o->timeout_ms < o->poll_ms ? o->timeout_ms : o->poll_ms;
	s->cb = cb;
	s->arg = arg;
	if (!(s->multi = curl_multi_init())) {
		spot_free(s);
		return ty_err_set(err, TY_EIO, "cannot create a libcurl multi handle");
	}
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
	curl_multi_setopt(s->multi, CURLMOPT_SOCKETDATA, s);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERFUNCTION, on_curl_timeout);
	curl_multi_setopt(s->multi, CURLMOPT_TIMERDATA, s);
	uv_timer_init(loop, &s->curl_timer);
	uv_timer_init(loop, &s->poll_timer);
	s->curl_timer.data = s->poll_timer.data = s;
	s->handles = 2;
	uv_timer_start(&s->poll_timer, on_poll, 0, (uint64_t)s->poll_ms);
	ty_info("spot poller: asking %s (%s) every %lld ms, %lld ms per request", s->base,
		exec_spot_provider_name(s->provider), (long long)s->poll_ms,
		(long long)s->timeout_ms);
	*out = s;
	return 0;
}

void exec_spot_close(struct exec_spot *s)
{
	if (!s || s->closing)
		return;
	/* socket callbacks (CURL_POLL_REMOVE) close their uv_polls during this */
	end_request(s);
	s->closing = true;
	curl_multi_cleanup(s->multi);
	s->multi = NULL;
	uv_close((uv_handle_t *)&s->curl_timer, on_handle_closed);
	uv_close((uv_handle_t *)&s->poll_timer, on_handle_closed);
}
