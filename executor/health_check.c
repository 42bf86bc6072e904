/*
 * Health checks the scheduler asks for (dispatch `health_check`,
 * docs/dispatch.md "Health checks"): when only rank output blamed this node,
 * the executor runs --health-check-command itself, on the thread pool, under
 * `timeout`. A failure is a fatal `health_check` condition, sent with every
 * heartbeat until a later check passes; that is evidence a job cannot
 * write, so the scheduler may act on it.
 */
#include "exec.h"
#include "runtime.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct exec_hcheck {
	struct exec *x;
	uv_work_t req;
	bool busy;
	bool closed;	       /* closed while busy: the work's end frees us */
	int64_t last_end;      /* mono ms of the last check's end; 0: none yet */
	/* the last check's verdict */
	bool failed;
	char evidence[PROTO_CONDITION_EVIDENCE_MAX + 1];
	int64_t first_seen, last_seen; /* wall ms of the failure (first_seen kept while it lasts) */
	/* the work's result */
	int status;
	char msg[256];
};

int exec__hcheck_new(struct exec_hcheck **out, struct exec *x)
{
	if (!(*out = calloc(1, sizeof(**out))))
		return TY_ENOMEM;
	(*out)->x = x;
	return 0;
}

void exec__hcheck_close(struct exec_hcheck *h)
{
	if (!h)
		return;
	if (h->busy)
		h->closed = true;
	else
		free(h);
}

static void work(uv_work_t *req)
{
	struct exec_hcheck *h = req->data;
	const struct exec_opts *o = exec__opts(h->x);
	char secs[24], script[4096];
	/* stdout joins stderr, whose last line exec_rt_run keeps */
	char *argv[] = {"timeout", "-k", "5", secs, "/bin/sh", "-c", script, NULL};

	snprintf(secs, sizeof(secs), "%lld", (long long)((o->health_check_timeout_ms + 999) / 1000));
	snprintf(script, sizeof(script), "exec 1>&2; %s", o->health_check_command);
	h->status = exec_rt_run(argv, NULL, h->msg, sizeof(h->msg));
}

void exec_hcheck_evidence(char *out, size_t outsz, const char *command, int status,
			  int64_t timeout_ms, const char *msg)
{
	if (status < 0)
		snprintf(out, outsz, "health check '%.200s' could not run: %.200s", command, msg);
	else if (status == 124 || status == 128 + 9)
		snprintf(out, outsz, "health check '%.200s' timed out after %lld s", command,
			 (long long)((timeout_ms + 999) / 1000));
	else
		snprintf(out, outsz, "health check '%.200s' exited %d: %.200s", command, status,
			 msg);
	exec_text_clean(out);
}

static void done(uv_work_t *req, int status)
{
	struct exec_hcheck *h = req->data;
	const struct exec_opts *o;
	int64_t now = ty_wall_ms();

	(void)status;
	h->busy = false;
	if (h->closed) {
		free(h);
		return;
	}
	o = exec__opts(h->x);
	h->last_end = ty_mono_ms();
	if (h->status == 0) {
		if (h->failed)
			ty_info("health check passed: the health_check condition is cleared");
		else
			ty_info("health check passed");
		h->failed = false;
		return;
	}
	exec_hcheck_evidence(h->evidence, sizeof(h->evidence), o->health_check_command, h->status,
			     o->health_check_timeout_ms, h->msg);
	if (!h->failed)
		h->first_seen = now;
	h->failed = true;
	h->last_seen = now;
	ty_warn("%s", h->evidence);
	exec__register_soon(h->x); /* the condition reaches the scheduler at once */
}

void exec__hcheck_request(struct exec_hcheck *h, const char *reason)
{
	const struct exec_opts *o = exec__opts(h->x);
	int rc;

	if (!o->health_check_command) {
		ty_info("health check asked for (%s): no --health-check-command, so the health "
			"watch's conditions are the answer",
			reason);
		return;
	}
	if (h->busy) {
		ty_info("health check asked for (%s): one is running", reason);
		return;
	}
	if (h->last_end && ty_mono_ms() - h->last_end < o->health_check_interval_ms) {
		ty_info("health check asked for (%s): the last one ended less than %lld ms ago, "
			"its verdict stands",
			reason, (long long)o->health_check_interval_ms);
		return;
	}
	ty_info("health check asked for (%s): running '%s'", reason, o->health_check_command);
	h->req.data = h;
	if ((rc = uv_queue_work(exec__loop(h->x), &h->req, work, done))) {
		ty_error("health check: cannot queue it: %s", uv_strerror(rc));
		return;
	}
	h->busy = true;
}

json_t *exec__hcheck_condition(const struct exec_hcheck *h)
{
	if (!h || !h->failed)
		return NULL;
	return json_pack("{s:s, s:s, s:n, s:n, s:n, s:n, s:s, s:I, s:I}", "kind",
			 proto_condition_kind_name(PROTO_CONDITION_HEALTH_CHECK), "severity",
			 proto_severity_name(PROTO_SEVERITY_FATAL), "gpu", "gpu_uuid", "port", "code",
			 "evidence", h->evidence, "first_seen", (json_int_t)h->first_seen,
			 "last_seen", (json_int_t)h->last_seen);
}
