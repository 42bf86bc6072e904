/* Node routes and the per-job views that live on nodes: attempts and logs. */
#include "api.h"
#include "logcred.h"
#include "ty_log.h"

#include <curl/curl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * One node as JSON; GPUs in use are those of unreleased allocations, CPUs
 * and memory their jobs' per-node asks (NULL totals: not reported, not
 * limited). Conditions: the current ones (not cleared), fatal first. The state is
 * ty_node_state's: `not_ready` for a ready node whose register named a fault
 * (migrations/0024_node_fault.sql).
 */
#define NODE_JSON_SQL                                                                    \
	"json_build_object('id', n.id, 'address', n.address, 'labels', n.labels,"       \
	" 'state', ty_node_state(n.state, n.fault), 'fault', n.fault,"                  \
	" 'expected_gpus', n.expected_gpus,"                                            \
	" 'simulated', n.simulated, 'isolation', n.isolation,"                          \
	" 'gpus_total', n.gpus,"                                                        \
	" 'gpus_free', n.gpus - coalesce((SELECT sum(cardinality(a.gpus))"              \
	"   FROM allocations a WHERE a.node_id = n.id AND a.released_at IS NULL), 0),"  \
	" 'cpus_total', n.cpus, 'memory_mb_total', n.memory_mb,"                        \
	" 'cpus_free', n.cpus - coalesce((SELECT sum(coalesce("                         \
	"   (j.spec->'resources'->>'cpus_per_node')::bigint, 1)) FROM allocations a"     \
	"   JOIN jobs j ON j.id = a.job_id WHERE a.node_id = n.id"                      \
	"   AND a.released_at IS NULL), 0),"                                            \
	" 'memory_mb_free', n.memory_mb - coalesce((SELECT sum(coalesce("               \
	"   (j.spec->'resources'->>'memory_mb_per_node')::bigint, 1024))"                \
	"   FROM allocations a JOIN jobs j ON j.id = a.job_id WHERE a.node_id = n.id"   \
	"   AND a.released_at IS NULL), 0),"                                            \
	" 'running', coalesce((SELECT json_agg(json_build_object('job', a.job_id,"      \
	"   'attempt', a.attempt) ORDER BY a.job_id) FROM allocations a"                \
	"   JOIN jobs j ON j.id = a.job_id WHERE a.node_id = n.id"                      \
	"   AND a.released_at IS NULL AND ($1::bigint IS NULL OR j.team_id = $1)), '[]'),"   \
	" 'drain_reason', n.drain_reason,"                                              \
	" 'conditions', coalesce((SELECT json_agg(json_build_object('kind', c.kind,"    \
	"   'severity', c.severity, 'gpu', c.gpu, 'gpu_uuid', c.gpu_uuid,"               \
	"   'port', c.port, 'code', c.code, 'evidence', c.evidence,"                     \
	"   'first_seen', ty_ts(c.first_seen), 'last_seen', ty_ts(c.last_seen))"         \
	"   ORDER BY c.severity = 'fatal' DESC, c.first_seen, c.id)"                     \
	"   FROM node_conditions c WHERE c.node_id = n.id AND c.cleared_at IS NULL),"    \
	"   '[]'),"                                                                       \
	" 'preempt', CASE WHEN n.state = 'preempting' THEN json_build_object("         \
	"   'deadline', ty_ts(n.preempt_deadline), 'notice', n.preempt_notice) END,"     \
	" 'hcas', coalesce(n.inventory->'hcas', '[]'),"                                 \
	" 'failures', (SELECT json_build_object('count', count(*),"                     \
	"   'jobs', count(DISTINCT f.job_id),"                                          \
	"   'hardware', count(*) FILTER (WHERE f.failure_class = 'hardware'),"          \
	"   'last_at', ty_ts(max(f.created_at)))"                                       \
	"   FROM node_failures f WHERE f.node_id = n.id"                                \
	"   AND f.created_at > n.failures_since),"                                      \
	" 'last_heartbeat', ty_ts(n.last_heartbeat), 'registered_at',"                  \
	" ty_ts(n.registered_at))"


int api_h_nodes_list(struct api_req *r, struct ty_err *err)
{
	const char *p[2] = {api_scope(r), api_query(r, "state")};
	PGresult *res = NULL;
	int rc;

	if (p[1] && strcmp(p[1], "ready") && strcmp(p[1], "not_ready") && strcmp(p[1], "suspect") &&
	    strcmp(p[1], "draining") && strcmp(p[1], "drained") && strcmp(p[1], "preempting") &&
	    strcmp(p[1], "lost"))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "state",
				       "'state' must be 'ready', 'not_ready', 'suspect', 'draining', "
				       "'drained', 'preempting' or 'lost'");
	rc = ty_pg_exec(&res, r->pg,
			"SELECT json_build_object('items', coalesce(json_agg(" NODE_JSON_SQL
			" ORDER BY n.id), '[]'))::text FROM nodes n"
			" WHERE $2::text IS NULL OR ty_node_state(n.state, n.fault) = $2",
			2, p, err);
	if (rc)
		return rc;
	rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_nodes_get(struct api_req *r, struct ty_err *err)
{
	const char *p[2] = {api_scope(r), r->params[0]};
	PGresult *res = NULL;
	int rc;

	rc = ty_pg_exec(&res, r->pg, "SELECT " NODE_JSON_SQL "::text FROM nodes n WHERE n.id = $2",
			2, p, err);
	if (rc)
		return rc;
	if (PQntuples(res) == 0)
		rc = api_reply_error(r, API_P_NODE_NOT_FOUND, NULL, "no node '%s'", r->params[0]);
	else
		rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

/*
 * Drain, undrain and preempt (admin): one UPDATE, its audit row and a
 * notification that wakes the scheduler ("node:ID" on trainyard_job_events),
 * in one transaction. All are idempotent. A lost node keeps its state;
 * draining it still records the drain, so it comes back drained. sql is
 * NODE_ADMIN_SQL(set), whose SET clause may use $3 = arg when arg is not NULL.
 */
#define NODE_ADMIN_SQL(set)                                                                        \
	"WITH u AS (UPDATE nodes n SET " set " WHERE n.id = $2"                                    \
	" RETURNING n.*) SELECT " NODE_JSON_SQL "::text FROM u n"
static int node_admin(struct api_req *r, const char *action, const char *sql, const char *arg,
		      struct ty_err *err)
{
	const char *p[3] = {NULL, r->params[0], arg};
	char tid[24];
	const char *a[3] = {tid, action, r->params[0]};
	PGresult *res = NULL;
	int rc;

	snprintf(tid, sizeof(tid), "%lld", (long long)r->auth.token_id);
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	/* sql is one of three literals: SQL is never built at run time */
	rc = ty_pg_exec(&res, r->pg, sql, arg ? 3 : 2, p, err);
	if (!rc && PQntuples(res) == 0) {
		PQclear(res);
		ty_pg_rollback(r->pg);
		return api_reply_error(r, API_P_NODE_NOT_FOUND, NULL, "no node '%s'",
				       r->params[0]);
	}
	if (rc ||
	    (rc = ty_pg_exec(NULL, r->pg,
			     "INSERT INTO audit_log (token_id, action, object) VALUES ($1, $2, $3)",
			     3, a, err)) ||
	    (rc = ty_pg_exec(NULL, r->pg,
			     "SELECT pg_notify('trainyard_job_events', 'node:' || $1)", 1, p + 1,
			     err)) ||
	    (rc = ty_pg_commit(r->pg, err))) {
		PQclear(res);
		ty_pg_rollback(r->pg);
		return rc;
	}
	rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
}

int api_h_nodes_drain(struct api_req *r, struct ty_err *err)
{
	/* a preempting node stays so; its drain reason makes it come back drained */
	return node_admin(r, "node.drain",
			  NODE_ADMIN_SQL("state = CASE WHEN n.state IN ('lost', 'preempting') THEN n.state"
			  " WHEN EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id"
			  "  AND a.released_at IS NULL) THEN 'draining' ELSE 'drained' END,"
			  " drain_reason = coalesce(n.drain_reason, 'drained by an admin')"),
			  NULL, err);
}

int api_h_nodes_undrain(struct api_req *r, struct ty_err *err)
{
	return node_admin(r, "node.undrain",
			  NODE_ADMIN_SQL("state = CASE WHEN n.state = 'lost' THEN 'lost' ELSE 'ready' END,"
			  " drain_reason = NULL, failures_since = now(),"
			  " preempt_deadline = NULL, preempt_notice = NULL, preempt_seq = NULL"),
			  NULL, err);
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
	const char *key;
	json_t *v;

	json_object_foreach(r->json, key, v)
	{
		if (strcmp(key, "deadline_seconds"))
			return api_reply_error(r, API_P_UNKNOWN_FIELD, key,
					       "unknown field '%s' (only 'deadline_seconds')",
					       key);
	}
	if (d && (!json_is_integer(d) || json_integer_value(d) < 0 ||
		  json_integer_value(d) > API_PREEMPT_DEADLINE_MAX))
		return api_reply_error(r, API_P_INVALID_FIELD, "deadline_seconds",
				       "'deadline_seconds' must be an integer from 0 to %d",
				       API_PREEMPT_DEADLINE_MAX);
	return node_admin(
	    r, "node.preempt",
	    NODE_ADMIN_SQL("state = CASE WHEN n.state = 'lost' THEN 'lost' ELSE 'preempting' END,"
	    " preempt_deadline = now() + make_interval(secs => $3::int),"
	    " preempt_notice = '{\"provider\": \"local\", \"action\": \"preempt\","
	    " \"detail\": \"POST /v1/nodes/{id}/preempt\"}',"
	    /* an executor's own notice keeps its seq: its heartbeats still end it */
	    " preempt_seq = CASE WHEN n.state = 'preempting' THEN n.preempt_seq END"),
	    ty_arena_printf(r->arena, "%lld",
			    d ? (long long)json_integer_value(d) : (long long)API_PREEMPT_DEADLINE),
	    err);
}

int api_h_jobs_attempts(struct api_req *r, struct ty_err *err)
{
	const char *p[2] = {r->params[0], api_scope(r)};
	PGresult *res = NULL;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	rc = ty_pg_exec(&res, r->pg,
			"SELECT json_build_object('items', coalesce((SELECT json_agg("
			" json_build_object('attempt', t.attempt, 'state', t.state,"
			"  'master_addr', t.master_addr, 'master_port', t.master_port,"
			"  'nnodes', t.nnodes, 'world_size', t.world_size,"
			"  'exit_code', t.exit_code, 'failure_class', t.failure_class,"
			"  'message', ty_redact_jobs(t.message, $2::bigint),"
			"  'evidence', t.evidence, 'blamed_node', t.blamed_node,"
			"  'spot_node', t.spot_node,"
			"  'resume', CASE WHEN t.resume_skipped IS NOT NULL THEN json_build_object("
			"   'path', t.resume_from, 'step', t.resume_step,"
			"   'skipped', t.resume_skipped) END,"
			"  'duration_seconds', round(extract(epoch FROM"
			"   coalesce(t.ended_at, now()) - t.created_at)::numeric, 3)::float8,"
			"  'created_at', ty_ts(t.created_at),"
			"  'running_at', ty_ts(t.running_at), 'ended_at', ty_ts(t.ended_at),"
			"  'gpu_telemetry', t.gpu_telemetry,"
			"  'nodes', (SELECT coalesce(json_agg(json_build_object('node', a.node_id,"
			"    'node_rank', a.node_rank, 'gpus', a.gpus, 'exit_code', a.exit_code,"
			"    'failure_class', a.failure_class, 'gpu_telemetry', a.telemetry)"
			"    ORDER BY a.node_rank), '[]')"
			"    FROM allocations a WHERE a.job_id = t.job_id AND a.attempt = t.attempt),"
			"  'ranks', (SELECT coalesce(json_agg(json_build_object('rank', k.rank,"
			"    'node', k.node_id, 'local_rank', k.local_rank, 'pid', k.pid,"
			"    'exit_code', k.exit_code, 'signal', k.signal) ORDER BY k.rank), '[]')"
			"    FROM ranks k WHERE k.job_id = t.job_id AND k.attempt = t.attempt))"
			" ORDER BY t.attempt) FROM attempts t WHERE t.job_id = j.id), '[]'))::text"
			" FROM jobs j WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)",
			2, p, err);
	if (rc)
		return rc;
	if (PQntuples(res) == 0)
		rc = api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	else
		rc = api_reply_text(r, 200, PQgetvalue(res, 0, 0));
	PQclear(res);
	return rc;
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
	const char *p[4] = {r->params[0], api_scope(r), "0", NULL};
	struct ty_buf body = TY_BUF_INIT;
	char url[1024], errbuf[CURL_ERROR_SIZE] = "", cred[PROTO_LOGCRED_MAX], auth[320];
	struct proto_logcred claims = {0};
	struct curl_slist *hdrs = NULL;
	PGresult *res = NULL;
	long long tail = 100, status = 0;
	int64_t id, v;
	CURL *c = NULL;
	CURLcode cc;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
	if (rank_s && strcmp(rank_s, "0") != 0 && (!api_parse_id(&v, rank_s) || v > INT_MAX))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "rank",
				       "'rank' must be a rank number from 0 to %d", INT_MAX);
	if (rank_s && strcmp(rank_s, "0") != 0)
		p[2] = ty_arena_printf(r->arena, "%lld", (long long)v);
	if (attempt_s && (!api_parse_id(&v, attempt_s) || v > INT_MAX))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "attempt",
				       "'attempt' must be an attempt number from 1 to %d", INT_MAX);
	if (attempt_s)
		p[3] = ty_arena_printf(r->arena, "%lld", (long long)v);
	if (tail_s && (!api_parse_id(&v, tail_s) || v > 10000))
		return api_reply_error(r, API_P_INVALID_PARAMETER, "tail",
				       "'tail' must be an integer from 1 to 10000");
	if (tail_s)
		tail = v;
	rc = ty_pg_exec(&res, r->pg,
			"SELECT j.id, t.attempt, n.log_url, k.rank IS NOT NULL, k.node_id"
			" FROM jobs j"
			" LEFT JOIN attempts t ON t.job_id = j.id"
			"  AND t.attempt = coalesce($4::int, j.attempt)"
			" LEFT JOIN ranks k ON k.job_id = j.id AND k.attempt = t.attempt"
			"  AND k.rank = $3::int"
			" LEFT JOIN nodes n ON n.id = k.node_id"
			" WHERE j.id = $1 AND ($2::bigint IS NULL OR j.team_id = $2)",
			4, p, err);
	if (rc)
		return rc;
	if (PQntuples(res) == 0) {
		rc = api_reply_error(r, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
		goto out;
	}
	if (!ty_pg_val(res, 0, 1) || PQgetvalue(res, 0, 3)[0] != 't') {
		rc = api_reply_error(r, API_P_RANK_NOT_FOUND, "rank",
				     "job %s has no rank %s in %s attempt", r->params[0], p[2],
				     attempt_s ? "that" : "its current");
		goto out;
	}
	snprintf(url, sizeof(url), "%s/logs/%s/%s/%s?tail=%lld", PQgetvalue(res, 0, 2),
		 r->params[0], PQgetvalue(res, 0, 1), p[2], tail);
	claims.job = id;
	claims.attempt = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	claims.rank = strtoll(p[2], NULL, 10);
	claims.exp = (int64_t)time(NULL) + PROTO_LOGCRED_TTL_S;
	snprintf(claims.node, sizeof(claims.node), "%s", PQgetvalue(res, 0, 4));
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
		rc = api_reply_error(r, API_P_LOG_NOT_FOUND, "rank",
				     "rank %s of job %s has no log on its node (yet)", p[2],
				     r->params[0]);
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
			claims.node, r->params[0], PQgetvalue(res, 0, 1), p[2], status, n,
			n ? body.data : "");
		rc = api_reply_error(r, API_P_LOGS_UNAVAILABLE, NULL,
				     "the node holding rank %s's log refused the API's log credential "
				     "(HTTP %lld): its --log-pubkey must be the public half of the "
				     "API's --log-key, and their clocks must agree",
				     p[2], status);
		goto out;
	}
	if (cc != CURLE_OK || status != 200) {
		rc = api_reply_error(r, API_P_LOGS_UNAVAILABLE, NULL,
				     "the node holding rank %s's log did not answer: %s", p[2],
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
	PQclear(res);
	return rc;
}
