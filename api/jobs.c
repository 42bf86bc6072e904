/* Job routes: submit, read, list, cancel, stop, events (with long-poll watch). */
#include "api.h"
#include "lifecycle.h"
#include "store.h"
#include "ty_crypto.h"
#include "ty_json.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static int job_not_found(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_JOB_NOT_FOUND, NULL, "no job '%s'", r->params[0]);
}

bool api_idempotency_key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n > 255)
		return false;
	for (; *k; k++)
		if (*k < 0x20 || *k > 0x7e)
			return false;
	return true;
}

int api_submit_team(const char **team_id, struct api_req *r, const char *team, long long gpus,
		    const char *field, const char *what, struct ty_err *err)
{
	bool limited;
	struct api_ask ask = {gpus, 0, 0};

	return api_submit_team_limited(team_id, &limited, r, team, &ask, NULL, NULL, field, what,
				       err);
}

struct api_ask api_ask_of(const json_t *resources)
{
	long long n = json_integer_value(json_object_get(resources, "nodes"));
	struct api_ask a;

	/* validated: nodes <= 1024, per node <= 4096 CPUs, 16 TiB: no overflow */
	a.gpus = n * json_integer_value(json_object_get(resources, "gpus_per_node"));
	a.cpus = n * json_integer_value(json_object_get(resources, "cpus_per_node"));
	a.memory_mb = n * json_integer_value(json_object_get(resources, "memory_mb_per_node"));
	return a;
}

/* The team's default (text, NULL: none) for checkpoint.key where given names none. */
static int ckpt_default(json_t *spec, const json_t *given, const char *key, const char *v)
{
	json_t *c = json_object_get(spec, "checkpoint");

	if (!v || !json_is_object(c) || json_object_get(json_object_get(given, "checkpoint"), key))
		return 0;
	if (!strcmp(key, "tier"))
		return json_object_set_new(c, key, json_boolean(v[0] == 't'));
	return json_object_set_new(c, key, json_integer(atoll(v)));
}

int api_submit_team_limited(const char **team_id, bool *limited, struct api_req *r,
			    const char *team, const struct api_ask *ask, json_t *spec,
			    const json_t *given, const char *field, const char *what,
			    struct ty_err *err)
{
	long long gpus = ask->gpus;
	struct api_team_limits t;
	int rc;

	*team_id = NULL;
	*limited = false;
	if (r->auth.role != API_ROLE_ADMIN && strcmp(team, r->auth.team) != 0)
		return api_fail(r, err, API_P_FORBIDDEN, "team",
				"a token of team '%s' cannot submit to team '%s'", r->auth.team,
				team);
	if ((rc = api_store_team_limits(&t, r->pg, r->arena, team, err)))
		return rc;
	if (!t.id)
		return api_fail(r, err, API_P_UNKNOWN_TEAM, "team", "no team '%s'", team);
	if (t.borrowing) {
		long long cap = atoll(t.nominal) + atoll(t.borrowing);

		if (gpus > cap)
			return api_fail(r, err, API_P_EXCEEDS_QUOTA, field,
					"%s needs %lld GPUs but team '%s' can never hold more "
					"than %lld (nominal %s + borrowing limit %s)",
					what, gpus, team, cap, t.nominal, t.borrowing);
	}
	if (t.max_cpus && ask->cpus > atoll(t.max_cpus))
		return api_fail(r, err, API_P_EXCEEDS_QUOTA, field,
				"%s needs %lld CPUs but team '%s' can never hold more than %s "
				"(max_cpus)",
				what, ask->cpus, team, t.max_cpus);
	if (t.max_memory_mb && ask->memory_mb > atoll(t.max_memory_mb))
		return api_fail(r, err, API_P_EXCEEDS_QUOTA, field,
				"%s needs %lld MiB of memory but team '%s' can never hold more "
				"than %s (max_memory_mb)",
				what, ask->memory_mb, team, t.max_memory_mb);
	if (spec && (rc = api_submit_feasible(r, t.id, team, spec, field, err)))
		return rc;
	if (spec && (ckpt_default(spec, given, "keep", t.ckpt_keep) ||
		     ckpt_default(spec, given, "keep_every", t.ckpt_keep_every) ||
		     ckpt_default(spec, given, "tier", t.ckpt_tier)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	*team_id = t.id;
	*limited = t.limited;
	return 0;
}

int api_team_lock(long long *max_pending, struct api_req *r, const char *team_id,
		  struct ty_err *err)
{
	return api_store_team_lock(max_pending, r->pg, team_id, err);
}

int api_pending_admit(struct api_req *r, const char *team_id, const char *team,
		      long long max_pending, long long n, struct ty_err *err)
{
	long long pending;
	int rc;

	if (max_pending < 0)
		return 0;
	if ((rc = api_store_jobs_pending(&pending, r->pg, team_id, err)))
		return rc;
	if (pending + n <= max_pending)
		return 0;
	return api_fail(r, err, API_P_PENDING_JOBS_LIMIT, NULL,
			"team '%s' has %lld pending job(s) and a limit of %lld "
			"(max_pending_jobs): %lld more do not fit; submit again when some "
			"have started or were cancelled",
			team, pending, max_pending, n);
}

int api_replay_doc(struct api_req *r, const char *stored_hash, const char *doc, const char *key,
		   const char *hash, struct ty_err *err)
{
	int rc;

	/* constant time: the stored hash is compared like a secret (docs/security.md) */
	if (!ty_secure_equal(stored_hash, hash))
		return api_fail(r, err, API_P_IDEMPOTENCY_CONFLICT, NULL,
				"Idempotency-Key '%s' was used with a different body", key);
	rc = api_reply_text(r, 200, doc);
	api_reply_header(r, "Idempotent-Replayed", "true");
	return rc;
}

/* The job that an earlier request with this key created, replayed or refused. */
static int replay(struct api_req *r, const char *team_id, const char *key, const char *hash,
		  struct ty_err *err)
{
	const char *stored, *doc;
	int rc;

	if ((rc = api_store_job_by_key(&stored, &doc, r->pg, r->arena, team_id, key, api_scope(r),
				       err)))
		return rc;
	if (!doc)
		return ty_err_set(err, TY_ECONFLICT, "idempotency key vanished during submit");
	return api_replay_doc(r, stored, doc, key, hash, err);
}

/* The answer to a submission once its batch is over (the handler's second call). */
static int submitted(struct api_req *r, struct ty_err *err)
{
	struct api_submission *x = r->sub;

	switch (x->result) {
	case API_SUB_CREATED:
		r->audited = true; /* by the batch, with the job */
		return api_reply_text(r, 201, x->doc);
	case API_SUB_REFUSED:
		return api_fail(r, err, API_P_PENDING_JOBS_LIMIT, NULL, "%s", x->doc);
	case API_SUB_REPLAY: {
		int rc = r->pg ? 0 : api__pool_get(&r->pg, r->srv, err);

		return rc ? rc : replay(r, x->team_id, x->key, x->hash, err);
	}
	default:
		*err = x->err;
		return x->rc ? x->rc : TY_EIO;
	}
}

int api_h_jobs_submit(struct api_req *r, struct ty_err *err)
{
	struct api_problem p = {0};
	const char *key = api_header(r, "Idempotency-Key");
	char hash[TY_SHA256_HEX_LEN + 1];
	const char *team, *team_id;
	char *canon = NULL;
	json_t *spec = NULL;
	struct api_submission *x;
	struct api_ask ask;
	bool limited;
	int rc = 0;

	if (r->sub)
		return submitted(r, err);
	if (key && !api_idempotency_key_ok(key))
		return api_fail(r, err, API_P_INVALID_HEADER, "Idempotency-Key",
				"'Idempotency-Key' must be 1 to 255 printable ASCII characters");
	if (!(spec = api_validate_job(r->json, &p)))
		return api_fail_problem(r, err, &p);
	team = json_string_value(json_object_get(spec, "team"));
	ask = api_ask_of(json_object_get(spec, "resources"));
	if ((rc = api_submit_team_limited(&team_id, &limited, r, team, &ask, spec, r->json,
					  "resources", "the job", err)))
		goto out;
	/* same key + same body (as parsed, so whitespace does not matter) = same job */
	if (!(canon = ty_json_canonical(r->json))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	ty_sha256_hex(hash, canon, strlen(canon));
	/* a key seen before needs no batch (a race with one in flight is the batch's to settle) */
	if (key && (rc = replay(r, team_id, key, hash, err)) != TY_ECONFLICT)
		goto out; /* replayed, refused, or failed */
	ty_err_clear(err);
	rc = 0;
	if (!(x = ty_arena_alloc(r->arena, sizeof(*x)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	memset(x, 0, sizeof(*x));
	x->team_id = team_id;
	x->team = ty_arena_strdup(r->arena, team);
	x->key = key ? ty_arena_strdup(r->arena, key) : NULL;
	x->hash = ty_arena_strdup(r->arena, hash);
	x->limited = limited;
	x->row = json_pack("{s:I, s:O?, s:O, s:O?, s:O?, s:O?, s:s?, s:s?, s:s++, s:o}", "team_id",
			   (json_int_t)atoll(team_id), "name", json_object_get(spec, "name"),
			   "spec", spec, "priority_class", json_object_get(spec, "priority_class"),
			   "priority", json_object_get(spec, "priority"), "labels",
			   json_object_get(spec, "labels"), "idempotency_key", key,
			   "request_sha256", key ? hash : NULL, "message",
			   "submitted by token '", r->auth.token_name ? r->auth.token_name : "", "'",
			   "audit", api__audit_facts(r));
	if (!x->row || !x->team || !x->hash || (key && !x->key)) {
		json_decref(x->row);
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	/* the pooled connection is not needed while the batch runs */
	api__pool_put(r->srv, r->pg);
	r->pg = NULL;
	if (!api__submit_park(r, x))
		rc = submitted(r, err);
out:
	json_decref(spec);
	free(canon);
	return rc;
}

int api_h_jobs_get(struct api_req *r, struct ty_err *err)
{
	const char *doc;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return job_not_found(r, err);
	if ((rc = api_store_job_get(&doc, r->pg, r->arena, r->params[0], api_scope(r), err)))
		return rc;
	return doc ? api_reply_text(r, 200, doc) : job_not_found(r, err);
}

const char *api_job_states_param(struct ty_arena *a, const char *list)
{
	struct ty_buf b = TY_BUF_INIT;
	const char *s = list, *out;

	ty_buf_puts(&b, "{");
	while (*s) {
		size_t len = strcspn(s, ",");
		char name[32];

		snprintf(name, sizeof(name), "%.*s", (int)(len < sizeof(name) ? len : 0), s);
		if (proto_job_state_parse(name) == PROTO_JOB_STATE_COUNT) {
			ty_buf_free(&b);
			return NULL;
		}
		ty_buf_printf(&b, "%s%s", b.len > 1 ? "," : "", name);
		s += len;
		if (*s == ',')
			s++;
	}
	ty_buf_puts(&b, "}");
	out = b.oom ? NULL : ty_arena_strdup(a, b.data);
	ty_buf_free(&b);
	return out;
}

const char *api_like_contains(struct ty_arena *a, const char *s)
{
	size_t n = strlen(s);
	char *out = ty_arena_alloc(a, 2 * n + 3), *w = out;

	if (!out)
		return NULL;
	*w++ = '%';
	for (; *s; s++) {
		if (*s == '%' || *s == '_' || *s == '\\')
			*w++ = '\\';
		*w++ = *s;
	}
	*w++ = '%';
	*w = '\0';
	return out;
}

/* Characters of UTF-8 text (already checked to be UTF-8 by the dispatcher). */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

int api_h_jobs_list(struct api_req *r, struct ty_err *err)
{
	const char *team = api_query(r, "team"), *state = api_query(r, "state");
	const char *q = api_query(r, "q");
	const char *label = api_query(r, "label"), *cursor = api_query(r, "cursor");
	const char *limit_s = api_query(r, "limit");
	struct api_jobs_filter f = {api_scope(r), team, NULL, NULL, cursor, 50, NULL, NULL};
	const char *items, *next;
	int64_t v;
	int rc;

	if (state && !(f.states = api_job_states_param(r->arena, state)))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "state",
				"'state' must be a comma-separated list of job states");
	if (label) {
		const char *eq = strchr(label, '=');
		json_t *o;
		char *k, *t;

		if (!eq || eq == label)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "label",
					"'label' must be 'key=value'");
		k = ty_arena_strndup(r->arena, label, (size_t)(eq - label));
		o = json_pack("{s:s}", k, eq + 1);
		t = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!t)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "label",
					"'label' must be valid UTF-8 'key=value'");
		f.labels = ty_arena_strdup(r->arena, t);
		free(t);
	}
	if (q) {
		size_t n = utf8_chars(q);

		if (n < 1 || n > API_JOBS_Q_MAX)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "q",
					"'q' must be 1 to %d characters, not %zu", API_JOBS_Q_MAX,
					n);
		if (!(f.name_like = api_like_contains(r->arena, q)))
			return ty_err_set(err, TY_ENOMEM, NULL);
		if (api_parse_id(&v, q))
			f.id = q; /* the search box's "42" is job 42, and names holding 42 */
	}
	if (cursor && !api_parse_id(&v, cursor))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "cursor",
				"'cursor' is not one this server gave out");
	if (limit_s) {
		if (!api_parse_id(&v, limit_s) || v > 500)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "limit",
					"'limit' must be an integer from 1 to 500");
		f.limit = (int)v;
	}
	if ((rc = api_store_jobs_page(&items, &next, r->pg, r->arena, &f, err)))
		return rc;
	return api_reply_page(r, items, next, err);
}

/*
 * Cancel (stop false) or stop a job: a pending one ends at once, an active
 * one gets cancel_requested (and stop_requested) and the scheduler stops its
 * gang. The first request wins: a later cancel or stop of a job already being
 * cancelled or stopped changes nothing.
 */
static int end_job(struct api_req *r, bool stop, struct ty_err *err)
{
	const char *who = r->auth.token_name ? r->auth.token_name : "";
	const char *state;
	bool requested, pending;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return job_not_found(r, err);
	if ((rc = ty_pg_begin(r->pg, err)))
		return rc;
	if ((rc = api_store_job_lock(&state, &requested, r->pg, r->arena, r->params[0],
				     api_scope(r), err)))
		goto fail;
	if (!state) {
		ty_pg_rollback(r->pg);
		return job_not_found(r, err);
	}
	if (proto_job_state_terminal(state)) {
		ty_pg_rollback(r->pg);
		return api_fail(r, err, API_P_JOB_FINISHED, NULL, "job %s is already %s",
				r->params[0], state);
	}
	pending = !strcmp(state, "pending");
	if (pending || !requested)
		rc = api_store_job_end(
			r->pg, r->params[0], pending, stop,
			pending ? (stop ? ty_arena_printf(r->arena, "stopped by token '%s'", who)
					: "cancelled while pending")
				: (stop ? ty_arena_printf(r->arena, "stop requested by token '%s'",
							  who)
					: "cancel requested"),
			err);
	if (rc || (rc = ty_pg_commit(r->pg, err)))
		goto fail;
	return api_h_jobs_get(r, err);
fail:
	ty_pg_rollback(r->pg);
	return rc;
}

int api_h_jobs_cancel(struct api_req *r, struct ty_err *err)
{
	return end_job(r, false, err);
}

int api_h_jobs_stop(struct api_req *r, struct ty_err *err)
{
	return end_job(r, true, err);
}

int api_int_param(struct api_req *r, struct ty_err *err, long long *out, const char *name,
		  long long def, long long min, long long max)
{
	const char *s = api_query(r, name);
	char *end;

	*out = def;
	if (!s)
		return 0;
	*out = strtoll(s, &end, 10);
	if (!*s || *end || *out < min || *out > max)
		return api_fail(r, err, API_P_INVALID_PARAMETER, name,
				"'%s' must be an integer from %lld to %lld", name, min, max);
	return 0;
}

int api_h_jobs_events(struct api_req *r, struct ty_err *err)
{
	long long after, wait, limit;
	struct api_job_events ev;
	int64_t id;
	int rc;

	if (!api_parse_id(&id, r->params[0]))
		return job_not_found(r, err);
	if ((rc = api_int_param(r, err, &after, "after", 0, 0, 2147483647)) ||
	    (rc = api_int_param(r, err, &wait, "wait", 0, 0, 60)) ||
	    (rc = api_int_param(r, err, &limit, "limit", 100, 1, 1000)))
		return rc;
	if (!r->wait_deadline_ms)
		r->wait_deadline_ms = ty_mono_ms() + wait * 1000;
	for (;;) {
		bool waiting = ty_mono_ms() < r->wait_deadline_ms;

		/* armed before the query, so an event written meanwhile wakes us */
		if (waiting)
			api__watch_arm(r, id, r->wait_deadline_ms);
		rc = api_store_job_events(&ev, r->pg, r->arena, r->params[0], api_scope(r), after,
					  limit, err);
		if (rc || !ev.state || ev.last || !waiting) {
			api__watch_disarm(r);
			break;
		}
		if (api__watch_park(r))
			return 0; /* called again when woken */
	}
	if (rc)
		return rc;
	if (!ev.state)
		return job_not_found(r, err);
	{
		struct ty_buf b = TY_BUF_INIT;

		ty_buf_printf(&b, "{\"events\":%s,\"next_after\":", ev.events);
		if (ev.last)
			ty_buf_puts(&b, ev.last);
		else
			ty_buf_printf(&b, "%lld", after);
		ty_buf_printf(&b, ",\"state\":\"%s\"}", ev.state);
		rc = b.oom ? ty_err_set(err, TY_ENOMEM, NULL) : api_reply_text(r, 200, b.data);
		ty_buf_free(&b);
	}
	return rc;
}
