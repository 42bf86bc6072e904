/*
 * The read-only log server: GET /logs/<job>/<attempt>/<rank>?tail=N, only
 * against the API's log credential for that log on this node
 * (proto/logcred.h), and GET /metrics, on a libmicrohttpd thread of its
 * own. It shares with the loop only the state directory name (paths are
 * built from parsed integers only), the public key (read-only) and the
 * metrics registry, which locks itself.
 */
#include "exec.h"
#include "logcred.h"
#include "ty_log.h"
#include "ty_metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOGSRV_CONNECTIONS 64
#define LOGSRV_TIMEOUT_S 10
#define M_REFUSED "trainyard_executor_log_requests_refused_total"

struct exec_logsrv {
	struct MHD_Daemon *d;
	char *state_dir; /* owned */
	char *node_id;	 /* owned */
	const struct ty_ed25519_key *pubkey; /* borrowed */
	struct ty_metrics *metrics; /* borrowed; may be NULL */
};

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '.'))
		msg[--n] = '\0';
	ty_warn("log server: %s", msg);
}

static enum MHD_Result reply_as(struct MHD_Connection *c, unsigned status, char *body, size_t len,
				bool owned, const char *ctype)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	if (!body)
		owned = false; /* an empty log: nothing was allocated, MHD must not free "" */
	r = MHD_create_response_from_buffer(len, body ? body : (char *)"",
					    owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	if (status == MHD_HTTP_UNAUTHORIZED) /* RFC 6750 §3 */
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
					"Bearer realm=\"trainyard-executor-logs\", "
					"error=\"invalid_token\"");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
			     bool owned)
{
	return reply_as(c, status, body, len, owned, "text/plain; charset=utf-8");
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
	return reply(c, status, (char *)msg, strlen(msg), false);
}

/*
 * A refused rank-log request: 401 or 403 with a body that says why (never
 * the credential itself), counted by reason.
 */
static enum MHD_Result refuse(struct MHD_Connection *c, const struct exec_logsrv *s,
			      enum proto_logcred_verdict v, const struct proto_logcred *cl,
			      int64_t now)
{
	char msg[512], *body;

	switch (v) {
	case PROTO_LOGCRED_MISSING:
		snprintf(msg, sizeof(msg),
			 "a log credential is required (Authorization: Bearer <credential>): "
			 "read rank logs through the API, GET /v1/jobs/{id}/logs\n");
		break;
	case PROTO_LOGCRED_MALFORMED:
		snprintf(msg, sizeof(msg), "the log credential is malformed\n");
		break;
	case PROTO_LOGCRED_BAD_SIGNATURE:
		snprintf(msg, sizeof(msg),
			 "the log credential's signature does not verify with this node's "
			 "--log-pubkey (is it the public half of the API's --log-key?)\n");
		break;
	case PROTO_LOGCRED_EXPIRED:
		snprintf(msg, sizeof(msg),
			 "the log credential expired %lld s ago (they live %d s: check the "
			 "clocks of the API and of node '%s')\n",
			 (long long)(now - cl->exp), PROTO_LOGCRED_TTL_S, s->node_id);
		break;
	default:
		snprintf(msg, sizeof(msg),
			 "the log credential is for job %lld attempt %lld rank %lld on node '%s', "
			 "not this log on node '%s'\n",
			 (long long)cl->job, (long long)cl->attempt, (long long)cl->rank, cl->node,
			 s->node_id);
		break;
	}
	ty_metrics_add(s->metrics, M_REFUSED, (const char *[]){proto_logcred_verdict_name(v)}, 1);
	ty_debug("log server: refused a rank log request (%s)", proto_logcred_verdict_name(v));
	if (!(body = strdup(msg)))
		return MHD_NO;
	return reply(c, proto_logcred_verdict_status(v), body, strlen(body), true);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	const struct exec_logsrv *s = cls;
	struct ty_buf out = TY_BUF_INIT;
	struct ty_err err = {0};
	char dir[4096], path[4200];
	struct proto_logcred cred;
	enum proto_logcred_verdict v;
	int64_t job, attempt, now;
	long tail;
	int rank, rc;
	size_t len;

	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (s->metrics && strcmp(url, "/metrics") == 0) {
		if (ty_metrics_write(s->metrics, &out)) {
			ty_buf_free(&out);
			return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
		}
		len = out.len;
		return reply_as(c, MHD_HTTP_OK, ty_buf_detach(&out), len, true,
				TY_METRICS_CONTENT_TYPE);
	}
	if (strncmp(url, "/logs/", 6) != 0)
		return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
	/* the credential before anything else: without one, nothing is revealed */
	now = (int64_t)time(NULL);
	v = proto_logcred_check(
	    &cred,
	    proto_logcred_from_authorization(
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION)),
	    s->pubkey, now);
	if (v != PROTO_LOGCRED_VALID)
		return refuse(c, s, v, &cred, now);
	rc = exec_log_request_parse(&job, &attempt, &rank, &tail, url,
				    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "tail"));
	if (rc == TY_EINVAL)
		return text(c, MHD_HTTP_BAD_REQUEST, "tail must be an integer in 1..10000\n");
	if (rc)
		return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
	if (!proto_logcred_covers(&cred, job, attempt, rank, s->node_id))
		return refuse(c, s, PROTO_LOGCRED_OUT_OF_SCOPE, &cred, now);
	exec_attempt_dir(dir, sizeof(dir), s->state_dir, job, attempt);
	snprintf(path, sizeof(path), "%s/rank-%d.log", dir, rank);
	rc = exec_log_tail(&out, path, tail, EXEC_TAIL_MAX_BYTES, &err);
	if (rc == TY_ENOTFOUND)
		return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
	if (rc) {
		ty_warn("cannot serve log '%s': %s", path, err.msg);
		ty_buf_free(&out);
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "cannot read the log\n");
	}
	len = out.len;
	return reply(c, MHD_HTTP_OK, ty_buf_detach(&out), len, true);
}

/* The refusal counter, every reason at 0 from the start (a rate needs a first sample). */
static int metrics_family(struct ty_metrics *m, struct ty_err *err)
{
	static const char *const reason_label[] = {"reason", NULL};
	int rc;

	if (!m)
		return 0;
	rc = ty_metrics_family(m, TY_METRIC_COUNTER, M_REFUSED,
			       "Rank log requests refused for their log credential, by reason"
			       " (401: missing, malformed, bad_signature, expired; 403: out_of_scope).",
			       reason_label, NULL, 0, err);
	for (int v = PROTO_LOGCRED_VALID + 1; !rc && v < PROTO_LOGCRED_NVERDICTS; v++)
		rc = ty_metrics_add(m, M_REFUSED,
				    (const char *[]){
					proto_logcred_verdict_name((enum proto_logcred_verdict)v)},
				    0);
	return rc == TY_ENOMEM ? ty_err_set(err, rc, NULL) : rc;
}

int exec__logsrv_start(struct exec_logsrv **out, int *port, const char *address, int port_req,
		       const char *state_dir, const char *node_id,
		       const struct ty_ed25519_key *log_pubkey, struct ty_metrics *metrics,
		       struct ty_err *err)
{
	struct exec_logsrv *s = NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port_req)};
	const union MHD_DaemonInfo *info;
	int rc = 0;

	*out = NULL;
	if (inet_pton(AF_INET, address, &sa.sin_addr) != 1)
		return ty_err_set(err, TY_ECONFIG, "address '%s' is not an IPv4 address", address);
	if (!log_pubkey)
		return ty_err_set(err, TY_ECONFIG, "the log server needs a public key (--log-pubkey)");
	if (!(s = calloc(1, sizeof(*s))) || !(s->state_dir = strdup(state_dir)) ||
	    !(s->node_id = strdup(node_id))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = metrics_family(metrics, err)))
		goto out;
	s->pubkey = log_pubkey;
	s->metrics = metrics;
	s->d = MHD_start_daemon(
	    MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, s,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)LOGSRV_CONNECTIONS,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)LOGSRV_TIMEOUT_S, MHD_OPTION_END);
	if (!s->d) {
		rc = ty_err_set(err, TY_EIO, "cannot serve logs on %s:%d", address, port_req);
		goto out;
	}
	info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : port_req;
	*out = s;
	s = NULL;
out:
	exec__logsrv_stop(s);
	return rc;
}

void exec__logsrv_stop(struct exec_logsrv *s)
{
	if (!s)
		return;
	if (s->d)
		MHD_stop_daemon(s->d);
	free(s->state_dir);
	free(s->node_id);
	free(s);
}
