/* Node routes and the per-job views that live on nodes: attempts and logs. */
#include "api.h"
#include "store.h"
#include "logcred.h"
#include "ty_log.h"

#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int api_h_nodes_list(struct api_req *r, struct ty_err *err)
{
	const char *state = api_query(r, "state"), *doc;
	int rc;

	if (state && strcmp(state, "ready") && strcmp(state, "not_ready") &&
	    strcmp(state, "suspect") && strcmp(state, "draining") && strcmp(state, "drained") &&
	    strcmp(state, "preempting") && strcmp(state, "lost"))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "state",
				"'state' must be 'ready', 'not_ready', 'suspect', 'draining', "
				"'drained', 'preempting' or 'lost'");
	if ((rc = api_store_nodes_list(&doc, r->pg, r->arena, api_scope(r), state, err)))
		return rc;
	return api_reply_text(r, 200, doc);
}

int api_h_nodes_get(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int rc;

	if ((rc = api_store_node_get(&doc, r->pg, r->arena, api_scope(r), r->params[0], err)))
		return rc;
	if (!doc)
		return api_fail(r, err, API_P_NODE_NOT_FOUND, NULL, "no node '%s'", r->params[0]);
	return api_reply_text(r, 200, doc);
}

/*
 * Drain, undrain and preempt (admin): the change, its audit row and the
 * scheduler's wake-up in one transaction. All are idempotent.
 */
static int node_admin(struct api_req *r, const char *action, enum api_node_op op, const char *arg,
		      struct ty_err *err)
{
	const char *doc;
	int rc;

	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	rc = api_store_node_admin(&doc, r->pg, r->arena, op, r->params[0], arg, err);
	if (!rc && !doc) {
		ty_pg_rollback(r->pg);
		return api_fail(r, err, API_P_NODE_NOT_FOUND, NULL, "no node '%s'", r->params[0]);
	}
	if (rc || (rc = api_store_audit_log(r->pg, r->auth.token_id, action, r->params[0], err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		ty_pg_rollback(r->pg);
		return rc;
	}
	return api_reply_text(r, 200, doc);
}

int api_h_nodes_drain(struct api_req *r, struct ty_err *err)
{
	return node_admin(r, "node.drain", API_NODE_DRAIN, NULL, err);
}

int api_h_nodes_undrain(struct api_req *r, struct ty_err *err)
{
	return node_admin(r, "node.undrain", API_NODE_UNDRAIN, NULL, err);
}

/*
 * The local spot trigger: the node becomes `preempting` with a deadline
 * deadline_seconds from now, exactly as if its executor had reported a
 * spot notice; the scheduler (woken by the notification) checkpoints and
 * kills its gangs and sends it no new work. The executor is not told: a
 * preempting node gets no launches, which is all "no new work" needs.
 */
int api_h_nodes_preempt(struct api_req *r, struct ty_err *err)
{
	const json_t *d = json_object_get(r->json, "deadline_seconds");
	const char *key, *secs;
	json_t *v;

	json_object_foreach(r->json, key, v)
	{
		if (strcmp(key, "deadline_seconds"))
			return api_fail(r, err, API_P_UNKNOWN_FIELD, key,
					"unknown field '%s' (only 'deadline_seconds')", key);
	}
	if (d && (!json_is_integer(d) || json_integer_value(d) < 0 ||
		  json_integer_value(d) > API_PREEMPT_DEADLINE_MAX))
		return api_fail(r, err, API_P_INVALID_FIELD, "deadline_seconds",
				"'deadline_seconds' must be an integer from 0 to %d",
				API_PREEMPT_DEADLINE_MAX);
	secs =
	    ty_arena_printf(r->arena, "%lld",
			    d ? (long long)json_integer_value(d) : (long long)API_PREEMPT_DEADLINE);
	if (!secs)
		return ty_err_set(err, TY_ENOMEM, NULL);
	return node_admin(r, "node.preempt", API_NODE_PREEMPT, secs, err);
}

static int no_job(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
}

int api_h_jobs_attempts(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return no_job(r, err);
	if ((rc = api_store_job_attempts(&doc, r->pg, r->arena, r->params[0], api_scope(r), err)))
		return rc;
	return doc ? api_reply_text(r, 200, doc) : no_job(r, err);
}

static size_t collect(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	struct ty_buf *b = userdata;
	size_t n = size * nmemb;

	if (b->len + n > 16 * 1024 * 1024 || ty_buf_append(b, ptr, n))
		return 0; /* aborts the transfer */
	return n;
}

/*
 * Logs stay on the node that ran the rank; the executor serves them and this
 * route relays, so clients need to reach only the API. The executor serves
 * a log only against a credential for exactly it, minted here per request
 * (proto/logcred.h): whoever reaches a node's port without the API reads
 * nothing.
 */
int api_h_jobs_logs(struct api_req *r, struct ty_err *err)
{
	const char *rank_s = api_query(r, "rank"), *attempt_s = api_query(r, "attempt");
	const char *tail_s = api_query(r, "tail");
	const char *rank = "0", *attempt = NULL;
	struct api_log_where w;
	struct ty_buf body = TY_BUF_INIT;
	char url[1024], errbuf[CURL_ERROR_SIZE] = "", cred[PROTO_LOGCRED_MAX], auth[320];
	struct proto_logcred claims = {0};
	struct curl_slist *hdrs = NULL;
	long long tail = 100, status = 0;
	int64_t id, v;
	CURL *c = NULL;
	CURLcode cc;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return no_job(r, err);
	if (rank_s && strcmp(rank_s, "0") != 0 && (!api_parse_id(&v, rank_s) || v > INT_MAX))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "rank",
				"'rank' must be a rank number from 0 to %d", INT_MAX);
	if (rank_s && strcmp(rank_s, "0") != 0)
		rank = ty_arena_printf(r->arena, "%lld", (long long)v);
	if (attempt_s && (!api_parse_id(&v, attempt_s) || v > INT_MAX))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "attempt",
				"'attempt' must be an attempt number from 1 to %d", INT_MAX);
	if (attempt_s)
		attempt = ty_arena_printf(r->arena, "%lld", (long long)v);
	if (tail_s && (!api_parse_id(&v, tail_s) || v > 10000))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "tail",
				"'tail' must be an integer from 1 to 10000");
	if (tail_s)
		tail = v;
	if (!rank || (attempt_s && !attempt))
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((rc = api_store_log_where(&w, r->pg, r->arena, r->params[0], api_scope(r), rank,
				      attempt, err)))
		return rc;
	if (!w.job)
		return no_job(r, err);
	if (!w.attempt || !w.rank)
		return api_fail(r, err, API_P_RANK_NOT_FOUND, "rank",
				"job %s has no rank %s in %s attempt", r->params[0], rank,
				attempt_s ? "that" : "its current");
	snprintf(url, sizeof(url), "%s/logs/%s/%s/%s?tail=%lld", w.log_url ? w.log_url : "",
		 r->params[0], w.attempt, rank, tail);
	claims.job = id;
	claims.attempt = strtoll(w.attempt, NULL, 10);
	claims.rank = strtoll(rank, NULL, 10);
	claims.exp = (int64_t)time(NULL) + PROTO_LOGCRED_TTL_S;
	snprintf(claims.node, sizeof(claims.node), "%s", w.node ? w.node : "");
	if ((rc = proto_logcred_mint(cred, &claims, api__log_key(r->srv), err)))
		goto out;
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", cred);
	if (!(c = curl_easy_init()) || !(hdrs = curl_slist_append(NULL, auth))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	/* the credential is for this node only: never follow a redirect elsewhere */
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (cc == CURLE_OK && status == 404) {
		rc = api_fail(r, err, API_P_LOG_NOT_FOUND, "rank",
			      "rank %s of job %s has no log on its node (yet)", rank, r->params[0]);
		goto out;
	}
	if (cc == CURLE_OK && (status == 401 || status == 403)) {
		/* a deployment fault, not the client's: the keys or the clocks disagree */
		int n = (int)(body.len < 300 ? body.len : 300);

		while (n > 0 && body.data[n - 1] == '\n')
			n--;
		for (int i = 0; i < n; i++) /* one log line, whatever the node sent */
			if ((unsigned char)body.data[i] < 0x20 || body.data[i] == 0x7f)
				body.data[i] = '?';
		ty_warn("node '%s' refused the log credential for job %s attempt %s rank %s with "
			"%lld: %.*s",
			claims.node, r->params[0], w.attempt, rank, status, n, n ? body.data : "");
		rc = api_fail(r, err, API_P_LOGS_UNAVAILABLE, NULL,
			      "the node holding rank %s's log refused the API's log credential "
			      "(HTTP %lld): its --log-pubkey must be the public half of the "
			      "API's --log-key, and their clocks must agree",
			      rank, status);
		goto out;
	}
	if (cc != CURLE_OK || status != 200) {
		rc = api_fail(r, err, API_P_LOGS_UNAVAILABLE, NULL,
			      "the node holding rank %s's log did not answer: %s", rank,
			      cc != CURLE_OK ? errbuf : "unexpected status");
		goto out;
	}
	{
		size_t len = body.len;
		char *text = ty_buf_detach(&body);

		free(r->resp);
		r->resp = text ? text : strdup("");
		r->resp_len = text ? len : 0;
		r->status = 200;
		r->content_type = "text/plain; charset=utf-8";
		rc = 0;
	}
out:
	if (c)
		curl_easy_cleanup(c);
	curl_slist_free_all(hdrs);
	ty_buf_free(&body);
	return rc;
}
