/*
 * Applying executor events and node messages to PostgreSQL, and the state
 * transitions they cause. Everything here runs inside a fenced transaction
 * and is idempotent: every change is guarded by the current state or by a
 * NULL column, so a redelivered message, or one of an older attempt,
 * changes nothing it should not.
 */
#include "scheduler.h"
#include "job_spec.h"
#include "lifecycle.h"
#include "core/retry.h"
#include "ty_log.h"
#include "ty_time.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FINISHED_FIRST SCHED_FINISHED_FIRST

/* A failure class attempts.failure_class accepts (proto/lifecycle.h), or NULL. */
static const char *norm_class(const char *cls)
{
	return proto_failure_class_name(proto_failure_class_parse(cls));
}

/*
 * Whether a node's part that ended with class cls (and a non-zero exit)
 * failed on its own, rather than being stopped by Trainyard: a stop for a
 * preemption or a kill reports "preempted" or "cancelled".
 */
static bool own_failure(const char *cls)
{
	return !cls || (strcmp(cls, "preempted") && strcmp(cls, "cancelled"));
}

static bool is_active(const char *state)
{
	return state && (!strcmp(state, "scheduled") || !strcmp(state, "starting") ||
			 !strcmp(state, "running"));
}

static int64_t jint(const json_t *o, const char *key, int64_t def)
{
	const json_t *v = json_object_get(o, key);

	return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

static const char *jstr(const json_t *o, const char *key, const char *def)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : def;
}

/* ---- writes shared by apply, placement and reconciliation ---- */

int sched_kill_nodes(int *count, struct sched *s, int64_t job, int64_t attempt, const char *reason,
		     const char *except, struct ty_err *err)
{
	char **nodes = NULL;
	json_t *data = NULL;
	int rc, n = 0;

	if (count)
		*count = 0;
	if ((rc = sched_store_allocs_kill(&nodes, &n, s->term.pg, job, attempt, except, err)))
		goto out;
	data = json_pack("{s:s, s:i}", "reason", reason, "grace_seconds", s->o.kill_grace_seconds);
	if (!data) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++)
		if ((rc = sched_outbox_add(s, PROTO_KILL, nodes[i], job, attempt, data, err)))
			goto out;
	if (count)
		*count = n;
out:
	json_decref(data);
	sched_store_strs_free(nodes, n);
	return rc;
}

bool sched_class_blames(const char *cls)
{
	return proto_failure_blames(cls);
}

/* Teams whose log-only failures make those failures count (docs/dispatch.md). */
#define LOG_ONLY_TEAMS 2

/* What counted, for the node's reason: "evidence: ...". */
static void evidence_account(char *out, size_t outsz, int64_t seen_pts, int64_t log_pts,
			     int64_t log_teams)
{
	if (log_pts == 0)
		snprintf(out, outsz, "evidence: %lld points observed by executors",
			 (long long)seen_pts);
	else if (log_teams >= LOG_ONLY_TEAMS)
		snprintf(out, outsz,
			 "evidence: %lld points observed by executors, %lld from rank logs "
			 "alone of jobs of %lld teams",
			 (long long)seen_pts, (long long)log_pts, (long long)log_teams);
	else
		snprintf(out, outsz,
			 "evidence: %lld points observed by executors; %lld from rank logs "
			 "alone of one team's jobs not counted",
			 (long long)seen_pts, (long long)log_pts);
}

/*
 * Blame from rank logs alone cannot take a node out (a job can print
 * anything), so it asks the node's executor for a check it runs itself
 * (docs/dispatch.md, "Health checks"); a failed check comes back as a fatal
 * condition, which the node's heartbeat carries.
 */
static int health_check_ask(struct sched *s, const char *node, int64_t job, int64_t attempt,
			    const char *cls, struct ty_err *err)
{
	char reason[160];
	json_t *data;
	int rc;

	snprintf(reason, sizeof(reason), "job %lld attempt %lld failed here (%s) on rank logs alone",
		 (long long)job, (long long)attempt, cls);
	if (!(data = json_pack("{s:s}", "reason", reason)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	ty_info("node '%s': asking for a health check: %s", node, reason);
	rc = sched_outbox_add(s, PROTO_HEALTH_CHECK, node, 0, 0, data, err);
	json_decref(data);
	return rc;
}

int sched_blame_node(struct sched *s, const char *node, int64_t job, int64_t attempt,
		     const char *cls, const char *evidence, const char *why,
		     enum proto_evidence_source src, struct ty_err *err)
{
	char reason[768], account[192];
	struct sched_store_node_score sc;
	int64_t score, seen_pts, log_pts, log_teams;
	const char *state, *to = NULL;
	bool added;
	int rc;

	if ((rc = sched_store_node_failure_add(
		 &added, s->term.pg,
		 &(struct sched_store_node_failure){node, job, attempt, cls, evidence, why,
						    proto_evidence_source_name(src)},
		 err)) ||
	    !added)
		goto out; /* recorded before */
	if (src == PROTO_EVIDENCE_LOG && (rc = health_check_ask(s, node, job, attempt, cls, err)))
		goto out;
	/*
	 * Distinct jobs within the window since the last undrain; jobs whose
	 * failures here were decided by rank logs alone count only when such
	 * jobs come from LOG_ONLY_TEAMS teams.
	 */
	if ((rc = sched_store_node_score(&sc, s->term.pg, node, s->o.failure_window_s,
					 LOG_ONLY_TEAMS, err)) ||
	    !sc.exists)
		goto out;
	state = sc.state;
	score = sc.score;
	seen_pts = sc.seen_pts;
	log_pts = sc.log_pts;
	log_teams = sc.log_teams;
	if (score >= s->o.drain_after && (!strcmp(state, "ready") || !strcmp(state, "suspect")))
		to = sc.busy ? "draining" : "drained";
	else if (score >= s->o.suspect_after && !strcmp(state, "ready"))
		to = "suspect";
	if (!to) {
		if (src == PROTO_EVIDENCE_LOG && log_teams < LOG_ONLY_TEAMS &&
		    seen_pts + log_pts >= s->o.suspect_after && !strcmp(state, "ready"))
			ty_info("node '%s' stays ready: its failures from rank logs alone "
				"(last: job %lld attempt %lld, %s) come from one team's jobs",
				node, (long long)job, (long long)attempt, cls);
		goto out;
	}
	evidence_account(account, sizeof(account), seen_pts, log_pts, log_teams);
	snprintf(reason, sizeof(reason),
		 "blamed for failures of different jobs: %lld points within %d s (threshold %d; "
		 "last: job %lld attempt %lld, %s; %s)",
		 (long long)score, s->o.failure_window_s,
		 !strcmp(to, "suspect") ? s->o.suspect_after : s->o.drain_after, (long long)job,
		 (long long)attempt, cls, account);
	if ((rc = sched_store_node_blamed(s->term.pg, node, to,
					  !strcmp(to, "suspect") ? NULL : reason, err)))
		goto out;
	sched_mirror_touch_node(&s->world.mirror, node);
	ty_warn("node '%s' is %s: %s", node, to, reason);
out:
	return rc;
}

/* Tries of the budget's classes already used, from jobs.retries. */
static int used_of(const json_t *retries, const char *budget)
{
	const char *cls;
	json_t *v;
	int used = 0;

	json_object_foreach((json_t *)retries, cls, v)
	{
		const char *b = proto_budget_name(proto_failure_budget(cls));

		if (b && !strcmp(b, budget) && json_is_integer(v))
			used += (int)json_integer_value(v);
	}
	return used;
}

/*
 * An infrastructure failure's requeue is expedited (docs/scheduling.md,
 * "Expedited requeue"): the requeued event says so, in its text and as
 * data.expedited, and names the nodes held for it (data.held_nodes,
 * data.hold_seconds; none with --expedite-hold-seconds=0). Called once the
 * blamed node is among the job's excluded nodes.
 */
static int expedite_note(char *text, size_t n, json_t *data, struct sched *s, int64_t job,
			 int64_t attempt, const char *cls, int64_t backoff, struct ty_err *err)
{
	size_t len = strlen(text);
	char *held = NULL;
	json_t *list = NULL;
	int rc = 0;

	if (!proto_failure_infrastructure(cls))
		return 0;
	snprintf(text + len, n - len, "; expedited: first in its team's order");
	json_object_set_new(data, "expedited", json_true());
	if (s->o.expedite_hold_s <= 0)
		return 0;
	if ((rc = sched_store_hold_nodes(&held, s->term.pg, job, attempt, err)) || !held)
		goto out;
	if (!(list = json_array())) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (char *c = held, *end; c; c = end ? end + 1 : NULL) {
		if ((end = strchr(c, ',')))
			*end = '\0';
		if (json_array_append_new(list, json_string(c))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	for (size_t i = 0; i < json_array_size(list); i++) {
		len = strlen(text);
		snprintf(text + len, n - len, "%s%s",
			 i ? ", " : json_array_size(list) > 1 ? "; nodes " : "; node ",
			 json_string_value(json_array_get(list, i)));
	}
	len = strlen(text);
	snprintf(text + len, n - len, " held for it for %ds%s", s->o.expedite_hold_s,
		 backoff > 0 ? " after its backoff" : "");
	json_object_set_new(data, "held_nodes", list);
	json_object_set_new(data, "hold_seconds", json_integer(s->o.expedite_hold_s));
	list = NULL;
out:
	json_decref(list);
	free(held);
	return rc;
}

int sched_fail_attempt(struct sched *s, int64_t job, int64_t attempt, const char *node,
		       const char *cls, const int *exit_code, const char *why, const char *evidence,
		       int how, struct ty_err *err)
{
	bool by_condition = how & SCHED_FAIL_CONDITION;
	bool blame = how & SCHED_FAIL_BLAME, spend = !(how & (SCHED_FAIL_FREE | SCHED_FAIL_CONDITION));
	char text[1024], *retries_text = NULL;
	const char *blamed;
	const char *budget, *state;
	struct sched_store_job_retry jr = {0};
	json_t *spec_retry = NULL, *retries = NULL, *data = NULL;
	struct sched_retry_out verdict;
	int rc;
	bool moved;

	if (!norm_class(cls))
		cls = "system";
	if (evidence && !*evidence)
		evidence = NULL;
	/* blame: the node whose report failed the attempt first (docs/dispatch.md) */
	blamed = blame && node && sched_class_blames(cls) ? node : NULL;
	if ((rc = sched_store_attempt_failed(
		 &moved, s->term.pg,
		 &(struct sched_store_failure){job, attempt, exit_code, cls, why, evidence, blamed},
		 err)) ||
	    !moved)
		goto out; /* already over: nothing to do */
	/* written now when every node has released its GPUs, else at the last release */
	if ((rc = sched_ledger_attempt_end(s->term.pg, &s->o.rates, job, attempt, err)))
		goto out;
	if (blamed &&
	    (rc = sched_blame_node(s, blamed, job, attempt, cls, evidence, why,
				   how & SCHED_FAIL_LOG_ONLY ? PROTO_EVIDENCE_LOG
							     : PROTO_EVIDENCE_EXECUTOR,
				   err)))
		goto out;
	/* fail fast: the rest of the gang stops at once */
	if ((rc = sched_kill_nodes(NULL, s, job, attempt,
				   !strcmp(cls, "node_lost") ? "node_lost" : "fail_fast", node,
				   err)))
		goto out;

	if ((rc = sched_store_job_retry(&jr, s->term.pg, job, err)))
		goto out;
	if (!jr.exists || jr.attempt != attempt ||
	    !(is_active(jr.state) || !strcmp(jr.state, "preempting")))
		goto out; /* the job has moved on */
	spec_retry = json_loads(jr.retry ? jr.retry : "{}", 0, NULL);
	retries = json_loads(jr.retries ? jr.retries : "{}", 0, NULL);
	if (!json_is_object(retries)) {
		json_decref(retries);
		retries = json_object();
	}
	sched_retry_decide(
	    &verdict,
	    &(struct sched_retry_in){
		.cls = cls,
		.spend = spend,
		.cancel_requested = jr.cancel_requested,
		.limit_user = (int)jint(spec_retry, "user", proto_spec_default_int("retry", "user")),
		.limit_system =
		    (int)jint(spec_retry, "system", proto_spec_default_int("retry", "system")),
		.used_user = used_of(retries, "user"),
		.used_system = used_of(retries, "system"),
		.backoff_base_s = s->o.retry_backoff_s,
		.backoff_max_s = s->o.retry_backoff_max_s,
	    });
	budget = proto_budget_name(verdict.budget);
	data = json_pack("{s:I, s:s, s:s?, s:s?}", "attempt", (json_int_t)attempt, "failure_class",
			 cls, "node", node, "evidence", evidence);
	if (!data || !retries) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (exit_code)
		json_object_set_new(data, "exit_code", json_integer(*exit_code));

	if (verdict.verdict == SCHED_RETRY_END) {
		state = jr.stop_requested ? "stopped" : "cancelled";
		snprintf(text, sizeof(text), "attempt %lld failed: %s (%s); %s as requested",
			 (long long)attempt, why, cls, state);
		if ((rc = sched_store_job_cancelled(&moved, s->term.pg, job, attempt,
						    !strcmp(state, "stopped"), cls, err)))
			goto out;
	} else if (verdict.verdict == SCHED_RETRY_REQUEUE) {
		int64_t backoff = verdict.backoff_s;
		char excl[160] = "", backoff_text[48] = "";

		if (spend)
			json_object_set_new(retries, cls, json_integer(jint(retries, cls, 0) + 1));
		if (blamed)
			snprintf(excl, sizeof(excl), ", node %s excluded", blamed);
		if (backoff > 0)
			snprintf(backoff_text, sizeof(backoff_text), ", backoff %llds",
				 (long long)backoff);
		if (budget)
			snprintf(
			    text, sizeof(text),
			    "attempt %lld failed: %s (%s); requeued for attempt %lld (%s retry "
			    "%d of %d%s%s)",
			    (long long)attempt, why, cls, (long long)attempt + 1, budget,
			    verdict.used + 1, verdict.limit, backoff_text, excl);
		else if (by_condition && node)
			/* the node's health, not the job: say which node, and what it saw */
			snprintf(text, sizeof(text),
				 "attempt %lld failed: %s (%s, node %s); requeued for attempt %lld "
				 "(no retry spent: a health condition of node %s)%s",
				 (long long)attempt, evidence ? evidence : why, cls, node,
				 (long long)attempt + 1, node, excl);
		else if (!spend)
			snprintf(text, sizeof(text),
				 "attempt %lld failed: %s (%s); requeued for attempt %lld (no retry "
				 "spent)",
				 (long long)attempt, why, cls, (long long)attempt + 1);
		else
			snprintf(text, sizeof(text), "attempt %lld %s; requeued for attempt %lld",
				 (long long)attempt, why, (long long)attempt + 1);
		state = "pending";
		if (!(retries_text = json_dumps(retries, JSON_COMPACT))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
		if (backoff > 0)
			json_object_set_new(data, "backoff_seconds", json_integer(backoff));
		if ((rc = sched_store_job_retry_spent(s->term.pg, job, retries_text, backoff,
						      blamed, err)))
			goto out;
		if ((rc = sched_store_job_requeued(&moved, s->term.pg, job, attempt, cls, err)))
			goto out;
		if (moved && (rc = expedite_note(text, sizeof(text), data, s, job, attempt, cls,
						 backoff, err)))
			goto out;
		s->clock.capacity_freed = true;
	} else {
		snprintf(text, sizeof(text), "attempt %lld failed: %s (%s)", (long long)attempt,
			 why, cls);
		state = "failed";
		if ((rc = sched_store_job_failed(&moved, s->term.pg, job, attempt, cls, err)))
			goto out;
	}
	if (moved)
		rc = sched_job_event(s, job, !strcmp(state, "pending") ? "requeued" : state, state,
				     text, data, err);
	if (moved && !rc && !strcmp(state, "pending"))
		sched_metrics_requeued(s, cls, spend);
out:
	sched_store_job_retry_free(&jr);
	json_decref(spec_retry);
	json_decref(retries);
	json_decref(data);
	free(retries_text);
	return rc;
}

/* The state a job whose cancel was requested ends in: "stopped" or "cancelled". */
static int end_state(const char **to, struct sched *s, int64_t job, struct ty_err *err)
{
	bool stop;
	int rc;

	*to = "cancelled";
	if ((rc = sched_store_job_stop_requested(&stop, s->term.pg, job, err)))
		return rc;
	if (stop)
		*to = "stopped";
	return 0;
}

int sched_settle_attempt(struct sched *s, int64_t job, int64_t attempt, struct ty_err *err)
{
	char text[256];
	struct sched_store_parts a;
	const char *state, *to;
	int64_t live, bad, total;
	json_t *data = NULL;
	bool moved, preempting, stopping;
	int rc;

	if ((rc = sched_store_attempt_parts(&a, s->term.pg, job, attempt, err)) || !a.exists)
		goto out;
	state = a.state;
	live = a.live;
	bad = a.bad;
	total = a.total;
	stopping = !strcmp(state, "stopping");
	preempting = stopping && a.preempted;
	if (live > 0)
		goto out;
	if (preempting && bad > 0) {
		/* the preemption stopped a part of it: requeue (or cancel) */
		rc = sched_preempt_settle(s, job, attempt, err);
		goto out;
	}
	if (!(data = json_pack("{s:I}", "attempt", (json_int_t)attempt))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((is_active(state) || stopping) && bad == 0) {
		/* every rank exited 0 on its own: finished, whatever stop had begun */
		if ((rc = sched_store_attempt_succeeded(s->term.pg, job, attempt, err)) ||
		    (rc = sched_store_job_succeeded(&moved, s->term.pg, job, attempt, err)))
			goto out;
		snprintf(text, sizeof(text),
			 "attempt %lld succeeded: every rank on %lld node%s exited 0%s",
			 (long long)attempt, (long long)total, total == 1 ? "" : "s",
			 stopping ? " (" FINISHED_FIRST ")" : "");
		if (moved)
			rc = sched_job_event(s, job, "succeeded", "succeeded", text, data, err);
	} else if (stopping) {
		if ((rc = sched_store_attempt_cancelled(s->term.pg, job, attempt, err)) ||
		    (rc = end_state(&to, s, job, err)) ||
		    (rc = sched_store_job_cancelled(&moved, s->term.pg, job, attempt,
						    !strcmp(to, "stopped"), NULL, err)))
			goto out;
		snprintf(text, sizeof(text), "%s: attempt %lld stopped on every node", to,
			 (long long)attempt);
		if (moved)
			rc = sched_job_event(s, job, to, to, text, data, err);
	}
	/* succeeded, cancelled or stopped, or the last node of a failed gang released */
	if (!rc)
		rc = sched_ledger_attempt_end(s->term.pg, &s->o.rates, job, attempt, err);
out:
	json_decref(data);
	return rc;
}

/* ---- node conditions (docs/dispatch.md, "Node conditions") ---- */

/* gpu_uuid and port longer than this are no condition's (bytes) */
#define CONDITION_NAME_MAX 128
/* first_seen and last_seen: epoch ms up to the end of year 9999 */
#define CONDITION_MS_MAX INT64_C(253402300799999)


/*
 * A copy of condition c with its documented fields only into *out (new), or
 * TY_EPARSE saying why it is none: proto_condition_check's rules, and what
 * the table holds (gpu an int, gpu_uuid and port of at most
 * CONDITION_NAME_MAX bytes, times from 1970 to the year 9999).
 */
static int condition_clean(json_t **out, const json_t *c, struct ty_err *err)
{
	const json_t *gpu, *code;
	const char *kind, *uuid, *port;
	int64_t first, last;
	int rc;

	*out = NULL;
	if ((rc = proto_condition_check(c, err)))
		return rc;
	kind = jstr(c, "kind", "");
	gpu = json_object_get(c, "gpu");
	code = json_object_get(c, "code");
	uuid = jstr(c, "gpu_uuid", NULL);
	port = jstr(c, "port", NULL);
	first = jint(c, "first_seen", -1);
	last = jint(c, "last_seen", -1);
	if (json_is_integer(gpu) && json_integer_value(gpu) > INT_MAX)
		return ty_err_set(err, TY_EPARSE, "condition '%s': gpu must be an index or null",
				  kind);
	if ((uuid && strlen(uuid) > CONDITION_NAME_MAX) ||
	    (port && strlen(port) > CONDITION_NAME_MAX))
		return ty_err_set(err, TY_EPARSE,
				  "condition '%s': gpu_uuid and port must be at most %d bytes", kind,
				  CONDITION_NAME_MAX);
	if (first < 0 || last > CONDITION_MS_MAX)
		return ty_err_set(err, TY_EPARSE,
				  "condition '%s': first_seen and last_seen must be ms from 1970 to "
				  "the year 9999",
				  kind);
	*out = json_pack("{s:s, s:s, s:o, s:s?, s:s?, s:o, s:s, s:I, s:I}", "kind", kind,
			 "severity", jstr(c, "severity", ""), "gpu",
			 json_is_integer(gpu) ? json_integer(json_integer_value(gpu)) : json_null(),
			 "gpu_uuid", uuid, "port", port, "code",
			 json_is_integer(code) ? json_integer(json_integer_value(code)) : json_null(),
			 "evidence", jstr(c, "evidence", ""), "first_seen", (json_int_t)first,
			 "last_seen", (json_int_t)last);
	return *out ? 0 : ty_err_set(err, TY_ENOMEM, NULL);
}

/*
 * The conditions a node's message lists (its `conditions`; absent or null:
 * none) into *out (new array): each entry that is not a condition is logged,
 * counted (s->in.bad_conditions) and skipped, never failing the message. *out
 * is NULL when the list itself is not an array: nothing can be said of the
 * node's conditions then, and they are left as they are.
 */
static int conditions_clean(json_t **out, struct sched *s, const struct proto_msg *m,
			    struct ty_err *err)
{
	const json_t *list = json_object_get(m->data, "conditions"), *e;
	size_t i;

	*out = NULL;
	if (list && !json_is_null(list) && !json_is_array(list)) {
		s->in.bad_conditions++;
		ty_warn("node '%s': the conditions of its %s are not a list: left as they were",
			m->node, proto_type_name(m->type));
		return 0;
	}
	if (!(*out = json_array()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	json_array_foreach(list, i, e)
	{
		struct ty_err cerr = {0};
		json_t *c;
		int rc = condition_clean(&c, e, &cerr);

		if (rc == TY_ENOMEM || (!rc && json_array_append_new(*out, c))) {
			json_decref(*out);
			*out = NULL;
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		if (rc) {
			s->in.bad_conditions++;
			ty_warn("node '%s': skipping condition %zu of its %s: %s", m->node, i,
				proto_type_name(m->type), cerr.msg);
		}
	}
	return 0;
}

/*
 * A fatal condition newly recorded on node (evidence: what it says): no new
 * work goes there. A ready or suspect node becomes draining while work runs
 * there, else drained; a draining, drained, preempting or lost one keeps its
 * state. The reason "hardware: <evidence>" replaces any earlier one: it says
 * what to repair before an admin undrains the node.
 */
static int condition_drain(struct sched *s, const char *node, const char *evidence,
			   struct ty_err *err)
{
	char reason[PROTO_CONDITION_EVIDENCE_MAX + 16], state[16];
	int rc;

	snprintf(reason, sizeof(reason), "hardware: %s", evidence);
	if ((rc = sched_store_condition_drain(state, sizeof(state), s->term.pg, node, reason, err)))
		return rc;
	if (*state) {
		sched_mirror_touch_node(&s->world.mirror, node);
		ty_warn("node '%s' is %s: %s", node, state, reason);
	}
	return 0;
}

/*
 * Record clean conditions of node (CONDITIONS_RECORD_SQL; boot_id NULL:
 * the node's current boot) and log what changed. The first fatal one
 * recorded for the first time drains the node (condition_drain); one
 * recorded before never does again, so after an undrain the node stays
 * ready while its executor keeps listing it.
 */
static int conditions_record(struct sched *s, const char *node, const char *boot_id,
			     const json_t *clean, bool whole, struct ty_err *err)
{
	struct sched_store_condition_change *v = NULL;
	const char *drain = NULL;
	int rc, n = 0;

	if ((rc = sched_store_conditions_record(&v, &n, s->term.pg, node, boot_id, clean, whole,
						err)))
		return rc;
	for (int r = 0; r < n; r++) {
		const char *sev = v[r].severity, *kind = v[r].kind, *ev = v[r].evidence;

		if (v[r].what == SCHED_CONDITION_CLEARED)
			ty_info("node '%s': %s condition %s cleared: %s", node, sev, kind, ev);
		else if (v[r].fatal)
			ty_warn("node '%s': fatal condition %s%s: %s", node, kind,
				v[r].what == SCHED_CONDITION_NOW_FATAL ? " (degraded before)" : "",
				ev);
		else
			ty_info("node '%s': degraded condition %s: %s", node, kind, ev);
		if (v[r].fatal && v[r].what != SCHED_CONDITION_CLEARED && !drain)
			drain = ev;
	}
	if (drain)
		rc = condition_drain(s, node, drain, err);
	sched_store_condition_changes_free(v, n);
	return rc;
}

/*
 * The conditions a heartbeat or register of node's boot boot_id lists: the
 * whole current set (docs/dispatch.md, "Node conditions").
 */
static int conditions_apply(struct sched *s, const struct proto_msg *m, const char *boot_id,
			    struct ty_err *err)
{
	json_t *clean = NULL;
	int rc;

	if ((rc = conditions_clean(&clean, s, m, err)) || !clean)
		return rc;
	rc = conditions_record(s, m->node, boot_id, clean, true, err);
	json_decref(clean);
	return rc;
}

int sched_condition_note(struct sched *s, const char *node, const json_t *c, struct ty_err *err)
{
	json_t *one = json_array(), *clean = NULL;
	int rc;

	if (!one)
		return ty_err_set(err, TY_ENOMEM, NULL);
	if (!(rc = condition_clean(&clean, c, err)) &&
	    !(rc = json_array_append_new(one, clean) ? ty_err_set(err, TY_ENOMEM, NULL) : 0))
		rc = conditions_record(s, node, NULL, one, false, err);
	json_decref(one);
	return rc;
}

int sched_conditions_metrics(struct sched *s, struct ty_err *err)
{
	struct sched_store_condition_count *c = NULL;
	struct sched_condition_count *v = NULL;
	int rc, n = 0;

	if (!s->metrics)
		return 0;
	if ((rc = sched_store_conditions_count(&c, &n, s->term.pg, err)))
		return rc;
	if (n > 0 && !(v = calloc((size_t)n, sizeof(*v)))) {
		sched_store_condition_counts_free(c, n);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < n; r++)
		v[r] = (struct sched_condition_count){c[r].node, c[r].kind, c[r].severity, c[r].n};
	sched_metrics_node_conditions(s, v, n);
	free(v);
	sched_store_condition_counts_free(c, n);
	return 0;
}

/* Exclude node from job's later attempts, while attempt is still its latest. */
static int exclude_node(struct sched *s, int64_t job, int64_t attempt, const char *node,
			struct ty_err *err)
{
	int rc = sched_store_job_exclude(s->term.pg, job, attempt, node, err);

	sched_touch(&s->world, job);
	return rc;
}

/*
 * The pre-flight bandwidth check of attempt found nodes far below the
 * gang's median (attempt_exited.preflight, trainyard-allreduce
 * --node-check): each of them that is part of the attempt is blamed, made
 * suspect at once (a slow link needs no second job to be believed) and
 * excluded from the job's later attempts. A verdict the job could have
 * written (src log: the check ran from the job's image) only blames and
 * excludes: like any log-only failure it counts once jobs of several teams
 * say so. A gang whose all-reduce was below its fabric's floor
 * (allreduce.below_floor) names no node: it is only logged.
 */
static int preflight_slow(struct sched *s, int64_t job, int64_t attempt, const json_t *verdict,
			  enum proto_evidence_source src, struct ty_err *err)
{
	const json_t *slow = json_object_get(verdict, "slow"), *v;
	const json_t *ar = json_object_get(verdict, "allreduce");
	double median = json_number_value(json_object_get(verdict, "median_gbps"));
	size_t i;
	int rc = 0;

	if (json_is_true(json_object_get(ar, "below_floor")))
		ty_warn("job %lld attempt %lld: preflight: the gang's all-reduce reached %.3g GB/s, "
			"below the %s floor of %g GB/s (no node can be named for it)",
			(long long)job, (long long)attempt,
			json_number_value(json_object_get(ar, "busbw_gbps")),
			json_is_string(json_object_get(ar, "fabric"))
			    ? json_string_value(json_object_get(ar, "fabric"))
			    : "fabric's",
			json_number_value(json_object_get(ar, "floor_gbps")));

	json_array_foreach(slow, i, v)
	{
		const char *node = json_string_value(v);
		const json_t *nv;
		double gbps = 0;
		char evidence[256];
		size_t k;
		bool mine;

		if (!node)
			continue;
		if ((rc = sched_store_alloc_exists(
			 &mine, s->term.pg, &(struct sched_store_part){job, attempt, node}, err)))
			return rc;
		if (!mine)
			continue; /* not a node of this gang: ignore what it says */
		json_array_foreach(json_object_get(verdict, "nodes"), k, nv)
			if (json_is_string(json_object_get(nv, "node")) &&
			    !strcmp(json_string_value(json_object_get(nv, "node")), node))
				gbps = json_number_value(json_object_get(nv, "gbps"));
		snprintf(evidence, sizeof(evidence),
			 "preflight: node %s at %.3g GB/s, gang median %.3g GB/s", node, gbps,
			 median);
		if ((rc = sched_blame_node(s, node, job, attempt, "system", evidence,
					   SCHED_PREFLIGHT_WHY, src, err)) ||
		    (rc = exclude_node(s, job, attempt, node, err)))
			return rc;
		if (src == PROTO_EVIDENCE_LOG) {
			ty_warn("job %lld attempt %lld: %s (its own image's check: the node is "
				"not made suspect on it alone)",
				(long long)job, (long long)attempt, evidence);
			continue;
		}
		if ((rc = sched_store_node_suspect(s->term.pg, node, err)))
			return rc;
		sched_mirror_touch_node(&s->world.mirror, node);
		ty_warn("job %lld attempt %lld: %s; node '%s' is suspect", (long long)job,
			(long long)attempt, evidence, node);
	}
	return rc;
}

/*
 * A node's part of an attempt ended: record it, release its GPUs, judge the
 * gang. preflight: attempt_exited's `preflight` member when the launch had
 * a pre-flight check (NULL when it had none). node_fault false: the node
 * says the failure is the job's or the launch's (attempt_exited's
 * `node_fault`), so it is not blamed. src: attempt_exited's
 * `evidence_source` (sched_blame_node). condition: attempt_exited's
 * `condition` (NULL when none): a class `hardware` that a health condition
 * decided is recorded as the node's condition, blames the node on the
 * condition's evidence and requeues without spending the job's budget.
 */
static int alloc_exit(bool *applied, struct sched *s, const char *node, int64_t job,
		      int64_t attempt, int exit_code, const char *cls, const char *message, const char *evidence,
		      const json_t *condition, const json_t *preflight, bool node_fault,
		      enum proto_evidence_source src, struct ty_err *err)
{
	const struct sched_store_part part = {job, attempt, node};
	struct sched_store_after_exit t;
	char why[768];
	json_t *cond = NULL, *one = NULL;
	bool done;
	int rc;

	if (applied)
		*applied = false;
	if ((rc = sched_store_alloc_exited(&done, s->term.pg, &part, exit_code,
					   cls && *cls ? cls : NULL, err)) ||
	    !done)
		goto out; /* reported before, or never ours */
	if (applied)
		*applied = true;
	s->clock.capacity_freed = true;
	sched_touch(&s->world, job); /* a requeued job may start once its last GPUs are released */
	if (exit_code != 0 && cls && !strcmp(cls, "hardware") && condition &&
	    !json_is_null(condition)) {
		struct ty_err cerr = {0};

		if ((rc = condition_clean(&cond, condition, &cerr)) == TY_ENOMEM) {
			rc = ty_err_set(err, rc, NULL);
			goto out;
		}
		if (rc) {
			rc = 0;
			s->in.bad_conditions++;
			ty_warn("job %lld attempt %lld: node '%s' reports a hardware failure with "
				"a condition that is none (%s): judged like any hardware failure",
				(long long)job, (long long)attempt, node, cerr.msg);
		} else {
			/* seen by the node: recorded (and drains it) even if its heartbeat is late */
			if (!(one = json_pack("[O]", cond))) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			if ((rc = conditions_record(s, node, NULL, one, false, err)))
				goto out;
			evidence = json_string_value(json_object_get(cond, "evidence"));
			src = PROTO_EVIDENCE_EXECUTOR;
		}
	}
	if ((rc = sched_store_attempt_after_exit(&t, s->term.pg, &part, err)) || !t.exists)
		goto out;
	if (exit_code != 0 && json_is_object(preflight) &&
	    (rc = preflight_slow(s, job, attempt, preflight, src, err)))
		goto out;
	if (exit_code != 0 && (is_active(t.state) || (t.preempting_alone && own_failure(cls)))) {
		if (message && *message)
			snprintf(why, sizeof(why), "%s", message);
		else
			snprintf(why, sizeof(why), "node %s exited with code %d", node, exit_code);
		/* a failed pre-flight says nothing about the node that reports it */
		rc = sched_fail_attempt(s, job, attempt, node,
					norm_class(cls) ? cls : (cls && *cls ? "system" : "user"),
					&exit_code, why, evidence,
					cond ? SCHED_FAIL_BLAME | SCHED_FAIL_CONDITION
					     : (preflight || !node_fault ? 0 : SCHED_FAIL_BLAME) |
						   (src == PROTO_EVIDENCE_LOG ? SCHED_FAIL_LOG_ONLY
									      : 0),
					err);
	} else {
		/*
		 * A later report of a gang that already failed: its node is blamed
		 * too only when it reports hardware (node-local by nature); the
		 * rest of the gang was killed because of the first failure.
		 */
		if (exit_code != 0 && cls && !strcmp(cls, "hardware") &&
		    !strcmp(t.state, "failed")) {
			snprintf(why, sizeof(why), "%s",
				 message && *message ? message : "hardware failure");
			if ((rc = sched_blame_node(s, node, job, attempt, cls,
						   evidence && *evidence ? evidence : NULL, why, src,
						   err)) ||
			    (rc = exclude_node(s, job, attempt, node, err)))
				goto out;
		}
		rc = sched_settle_attempt(s, job, attempt, err);
	}
out:
	json_decref(cond);
	json_decref(one);
	return rc;
}

int sched_node_gone(struct sched *s, const char *node, const char *cls, const char *why, bool blame,
		    struct ty_err *err)
{
	struct sched_store_part *parts = NULL;
	int rc, n = 0;

	if ((rc = sched_store_node_released(&parts, &n, s->term.pg, node, cls, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		int64_t job = parts[i].job, attempt = parts[i].attempt;
		char state[16];

		s->clock.capacity_freed = true;
		sched_touch(&s->world, job);
		if ((rc = sched_store_attempt_state(state, sizeof(state), s->term.pg, job, attempt,
						    err)))
			break;
		if (is_active(state))
			rc = sched_fail_attempt(s, job, attempt, node, cls, NULL, why, NULL, blame,
						err);
		else
			rc = sched_settle_attempt(s, job, attempt, err);
	}
	free(parts);
	return rc;
}

/* ---- node messages ---- */

/*
 * A new boot of node: what its previous boot's ranks finished while no
 * executor watched (the register's `finished`, read from their shims) is
 * applied first; every other attempt there is lost.
 */
static int boot_changed(struct sched *s, const char *node, const struct sched_store_node *n,
			const char *boot_id, const json_t *finished, struct ty_err *err)
{
	const json_t *e;
	char why[256];
	size_t i;
	int rc;

	if (!n->exists || !strcmp(n->boot_id, boot_id))
		return 0;
	ty_warn("node '%s' restarted (boot id '%s' -> '%s')", node, n->boot_id, boot_id);
	json_array_foreach(finished, i, e)
	{
		const json_t *code = json_object_get(e, "exit_code");

		/* a live allocation only (alloc_exit): the ring repeats older ends */
		if (jint(e, "job", 0) >= 1 && jint(e, "attempt", 0) >= 1 && json_is_integer(code) &&
		    (rc = alloc_exit(NULL, s, node, jint(e, "job", 0), jint(e, "attempt", 0),
				     (int)json_integer_value(code), jstr(e, "failure_class", ""),
				     jstr(e, "message", ""), jstr(e, "evidence", ""),
				     json_object_get(e, "condition"), NULL, true,
				     proto_evidence_source_parse(
					 jstr(e, PROTO_EVIDENCE_SOURCE_FIELD, NULL)),
				     err)))
			return rc;
	}
	snprintf(why, sizeof(why), "node %s restarted (boot id changed)", node);
	/* the executor restarted: its host is not blamed (the process may simply have been
	 * upgraded or restarted by hand) */
	if ((rc = sched_node_gone(s, node, "system", why, false, err)))
		return rc;
	/* a new boot has no notice until it reports one (its heartbeat, its event) */
	return n->preempting ? sched_spot_clear(s, node, "new boot without a spot notice", err)
			     : 0;
}

static int on_register(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	const json_t *d = m->data;
	const json_t *inv = json_object_get(d, "inventory");
	const json_t *sim = json_object_get(d, "simulated");
	const char *boot_id = jstr(d, "boot_id", "");
	char *labels = NULL, *inventory = NULL, *was = NULL, cb[24], mb[24];
	struct sched_store_node n;
	int64_t gpus = jint(d, "gpus", 0);
	/* absent (an older executor) or not a positive count: not limited (NULL) */
	int64_t cpus = jint(d, "cpus", 0), memory_mb = jint(d, "memory_mb", 0);
	/* what isolates its attempts; anything but the two known words: not reported */
	const char *isolation = jstr(d, "isolation", "");
	/*
	 * The expected inventory: what the node found short of it (NULL: nothing,
	 * or a field that is not a non-empty string) keeps it out of placement
	 * until a register without one; expected_gpus is shown, never used.
	 */
	const char *fault = jstr(d, "fault", "");
	int64_t expected = jint(d, "expected_gpus", 0);
	int rc;

	if (strcmp(isolation, "runc") && strcmp(isolation, "none"))
		isolation = NULL;
	if (!*fault)
		fault = NULL;
	if (expected > INT_MAX)
		expected = INT_MAX;

	if (cpus > INT_MAX)
		cpus = INT_MAX;

	if ((rc = sched_store_node_get(&n, s->term.pg, m->node, err)))
		return rc;
	if (n.exists && m->seq <= n.last_seq)
		return 0; /* redelivered or replayed */
	if ((rc = boot_changed(s, m->node, &n, boot_id, json_object_get(d, "finished"), err)))
		return rc;
	labels = json_dumps(json_object_get(d, "labels"), JSON_COMPACT);
	inventory = json_is_object(inv) ? json_dumps(inv, JSON_COMPACT) : strdup("{}");
	if (!labels || !inventory) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_store_node_register(
		 &was, s->term.pg,
		 &(struct sched_store_register){.node = m->node,
						.address = jstr(d, "address", ""),
						.labels = labels,
						.boot_id = boot_id,
						.log_url = jstr(d, "log_url", ""),
						.inventory = inventory,
						.gpus = gpus,
						.seq = m->seq,
						.simulated = json_is_true(sim),
						.cpus = cpus,
						.memory_mb = memory_mb,
						.expected_gpus = expected,
						.isolation = isolation,
						.fault = fault},
		 err)))
		goto out;
	/* address, labels, capacity or state may be new */
	sched_mirror_touch_node(&s->world.mirror, m->node);
	/* its conditions now; the history of long cleared ones goes */
	if ((rc = conditions_apply(s, m, boot_id, err)) ||
	    (rc = sched_store_conditions_prune(s->term.pg, m->node, err)))
		goto out;
	if (!n.exists)
		ty_info("node '%s' registered: %lld GPUs, %s CPUs, %s MiB at %s", m->node,
			(long long)gpus, cpus > 0 ? sched_i64(cb, cpus) : "unreported",
			memory_mb > 0 ? sched_i64(mb, memory_mb) : "unreported",
			jstr(d, "address", ""));
	else if (n.lost)
		ty_info("node '%s' is back", m->node);
	if (fault && (!was || strcmp(was, fault)))
		ty_warn("node '%s' registered with a fault: %s; no new work is placed there until "
			"it registers without one",
			m->node, fault);
	else if (!fault && was)
		ty_info("node '%s' registered without its fault (%s): it takes new work again",
			m->node, was);
	if (!n.exists || n.lost || n.gpus != gpus || n.cpus != (cpus > 0 ? cpus : 0) ||
	    n.memory_mb != (memory_mb > 0 ? memory_mb : 0) || (!fault && was))
		s->clock.capacity_freed = true;
out:
	free(was);
	free(labels);
	free(inventory);
	return rc;
}

/* Append node's well-formed `finished` entries to clean (records with the node). */
static int finished_records(json_t *clean, const char *node, const json_t *finished)
{
	const json_t *e;
	size_t i;

	json_array_foreach(finished, i, e)
	{
		int64_t job = jint(e, "job", 0), attempt = jint(e, "attempt", 0);
		const json_t *code = json_object_get(e, "exit_code");

		const json_t *cond = json_object_get(e, "condition");

		/* the condition as sent: judged when the exit is applied (alloc_exit) */
		if (job >= 1 && attempt >= 1 && attempt <= INT_MAX && json_is_integer(code) &&
		    json_integer_value(code) >= INT_MIN && json_integer_value(code) <= INT_MAX &&
		    json_array_append_new(
			clean,
			json_pack("{s:s, s:I, s:I, s:I, s:s, s:s, s:s, s:b, s:O?}", "node", node,
				  "job", (json_int_t)job, "attempt", (json_int_t)attempt,
				  "exit_code", json_integer_value(code), "failure_class",
				  jstr(e, "failure_class", ""), "message", jstr(e, "message", ""),
				  "evidence", jstr(e, "evidence", ""), "log_only",
				  proto_evidence_source_parse(jstr(e, PROTO_EVIDENCE_SOURCE_FIELD,
								   NULL)) == PROTO_EVIDENCE_LOG,
				  "condition", json_is_object(cond) ? cond : NULL)))
			return TY_ENOMEM;
	}
	return 0;
}

/*
 * A heartbeat repeats the node's last finished attempts every time: one
 * query picks the few whose exit is not recorded yet (for any number of
 * heartbeats: clean holds finished_records of each). They are remembered,
 * not applied: the attempt_exited event (with the rank_exited events before
 * it) normally follows on the events topic, and reconciliation applies only
 * what is still missing a period later (docs/dispatch.md, duty 5).
 */
static int note_finished(struct sched *s, const json_t *clean, struct ty_err *err)
{
	struct sched_store_finished *f = NULL;
	int rc = 0, nf = 0;

	if (json_array_size(clean) == 0)
		return 0;
	if ((rc = sched_store_finished_unconfirmed(&f, &nf, s->term.pg, clean, err)))
		return rc;
	for (int r = 0; r < nf; r++) {
		struct sched_late_exit *x;
		int k;

		for (k = 0; k < s->in.nlate; k++)
			if (s->in.late[k].job == f[r].job &&
			    s->in.late[k].attempt == f[r].attempt &&
			    !strcmp(s->in.late[k].node, f[r].node))
				break;
		if (k < s->in.nlate)
			continue;
		if (s->in.nlate == s->in.caplate) {
			int cap = s->in.caplate ? s->in.caplate * 2 : 16;
			struct sched_late_exit *v = realloc(s->in.late, (size_t)cap * sizeof(*v));

			if (!v) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			s->in.late = v;
			s->in.caplate = cap;
		}
		x = &s->in.late[s->in.nlate];
		memset(x, 0, sizeof(*x));
		snprintf(x->node, sizeof(x->node), "%s", f[r].node);
		x->job = f[r].job;
		x->attempt = f[r].attempt;
		x->exit_code = f[r].exit_code;
		snprintf(x->failure_class, sizeof(x->failure_class), "%s", f[r].failure_class);
		/* moved: the store's row keeps none of them */
		x->message = f[r].message;
		x->evidence = f[r].evidence;
		x->condition = f[r].condition;
		f[r].message = f[r].evidence = f[r].condition = NULL;
		x->log_only = f[r].log_only;
		x->seen_ms = ty_mono_ms();
		s->in.nlate++;
	}
out:
	sched_store_finished_free(f, nf);
	return rc;
}

void sched_late_exits_clear(struct sched *s)
{
	for (int i = 0; i < s->in.nlate; i++) {
		free(s->in.late[i].message);
		free(s->in.late[i].evidence);
		free(s->in.late[i].condition);
	}
	free(s->in.late);
	s->in.late = NULL;
	s->in.nlate = s->in.caplate = 0;
}

/*
 * Which due late exits (*due[i]) are still unconfirmed (their part has not
 * exited), in one statement: most were confirmed by their attempt_exited
 * meanwhile, and alloc_exit would find nothing to do, one statement each.
 */
static int late_pending(bool *pending, struct sched *s, const bool *due, struct ty_err *err)
{
	struct sched_store_part *v = calloc((size_t)s->in.nlate + 1, sizeof(*v));
	bool *live = calloc((size_t)s->in.nlate + 1, sizeof(*live));
	int *idx = calloc((size_t)s->in.nlate + 1, sizeof(*idx));
	int rc = 0, nv = 0;

	if (!v || !live || !idx) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < s->in.nlate; i++) {
		pending[i] = false;
		if (!due[i])
			continue;
		v[nv] = (struct sched_store_part){s->in.late[i].job, s->in.late[i].attempt,
						  s->in.late[i].node};
		idx[nv++] = i;
	}
	if (nv == 0 || (rc = sched_store_parts_live(live, s->term.pg, v, nv, err)))
		goto out;
	for (int k = 0; k < nv; k++)
		pending[idx[k]] = live[k];
out:
	free(v);
	free(live);
	free(idx);
	return rc;
}

int sched_apply_late_exits(struct sched *s, int64_t min_age_ms, struct ty_err *err)
{
	int64_t now = ty_mono_ms();
	bool *due = calloc((size_t)s->in.nlate + 1, sizeof(*due)),
	     *pending = calloc((size_t)s->in.nlate + 1, sizeof(*pending));
	int rc = 0, keep = 0;

	if (!due || !pending) {
		free(due);
		free(pending);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < s->in.nlate; i++)
		due[i] = now - s->in.late[i].seen_ms >= min_age_ms;
	if ((rc = late_pending(pending, s, due, err))) {
		free(due);
		free(pending);
		return rc;
	}
	for (int i = 0; i < s->in.nlate; i++) {
		struct sched_late_exit *x = &s->in.late[i];
		json_t *cond;
		bool applied = false;

		if (rc || !due[i]) {
			s->in.late[keep++] = *x;
			continue;
		}
		if (!pending[i]) {
			/* its attempt_exited came meanwhile */
			free(x->message);
			free(x->evidence);
			free(x->condition);
			continue;
		}
		cond = x->condition ? json_loads(x->condition, 0, NULL) : NULL;
		/* a no-op when the event came meanwhile */
		rc = alloc_exit(&applied, s, x->node, x->job, x->attempt, x->exit_code,
				x->failure_class, x->message, x->evidence, cond, NULL, true,
				x->log_only ? PROTO_EVIDENCE_LOG : PROTO_EVIDENCE_EXECUTOR, err);
		if (!rc && applied)
			ty_info("job %lld: applied attempt %lld's exit on node '%s' from its "
				"heartbeats: its attempt_exited never arrived",
				(long long)x->job, (long long)x->attempt, x->node);
		json_decref(cond);
		free(x->message);
		free(x->evidence);
		free(x->condition);
	}
	s->in.nlate = keep;
	free(due);
	free(pending);
	return rc;
}

static int on_heartbeat(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	const json_t *d = m->data, *e, *notice;
	const char *boot_id = jstr(d, "boot_id", "");
	json_t *running = json_array();
	char *rtext = NULL;
	struct sched_store_node n;
	size_t i;
	int rc;

	if (!running)
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((rc = sched_store_node_get(&n, s->term.pg, m->node, err)))
		goto out;
	if (!n.exists) {
		ty_debug("heartbeat from unregistered node '%s' ignored", m->node);
		goto out;
	}
	if (m->seq <= n.last_seq)
		goto out;
	if ((rc = boot_changed(s, m->node, &n, boot_id, json_object_get(d, "finished"), err)))
		goto out;
	/* keep only well-formed entries: reconciliation reads them back as records */
	json_array_foreach(json_object_get(d, "running"), i, e)
	{
		json_t *r = sched_running_entry(e, m->node);

		if (r)
			json_array_append_new(running, r);
	}
	if (!(rtext = json_dumps(running, JSON_COMPACT | JSON_REAL_PRECISION(15)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_store_node_heartbeat(s->term.pg, m->node, m->seq, rtext, boot_id, err)))
		goto out;
	if (n.lost) {
		sched_mirror_touch_node(&s->world.mirror, m->node);
		ty_info("node '%s' is back", m->node);
		s->clock.capacity_freed = true;
	}
	if ((rc = conditions_apply(s, m, boot_id, err)))
		goto out;
	/* the ranks' steps, and stragglers */
	if ((rc = sched_progress_apply(s, m->node, json_object_get(d, "running"), err)))
		goto out;
	/* attempts holding GPUs idle longer than their team allows */
	{
		json_t *beats = json_array();
		int k = beats ? sched_idle_candidates(beats, m->node, 0, running) : -1;

		rc = k < 0 ? ty_err_set(err, TY_ENOMEM, NULL)
			   : k > 0 ? sched_idle_check(s, beats, err) : 0;
		json_decref(beats);
		if (rc)
			goto out;
	}
	/* the executor repeats its spot notice in every heartbeat while it lasts */
	notice = json_object_get(d, "preempt_notice");
	if (json_is_object(notice)) {
		if ((rc = sched_spot_notice(s, m->node, m->seq, notice, err)) == TY_EINVAL) {
			ty_warn("node '%s': %s", m->node, err->msg);
			rc = 0;
		}
		if (rc)
			goto out;
	} else if (n.preempting && n.preempt_seq > 0 && m->seq > n.preempt_seq &&
		   (rc = sched_spot_clear(s, m->node, "its heartbeat reports no spot notice",
					  err))) {
		goto out;
	}
	/* attempts the node finished whose attempt_exited may never have come */
	{
		json_t *clean = json_array();

		rc = !clean || finished_records(clean, m->node, json_object_get(d, "finished"))
			 ? ty_err_set(err, TY_ENOMEM, NULL)
			 : note_finished(s, clean, err);
		json_decref(clean);
	}
out:
	json_decref(running);
	free(rtext);
	return rc;
}

/* ---- job events ---- */

/*
 * A rank started: on the attempt's first rank the attempt and the job move
 * to `starting`. *mine is false when the node has no allocation in it
 * (ignored).
 */
static int on_rank_started(bool *mine, struct sched *s, const struct proto_msg *m,
			   struct ty_err *err)
{
	const struct sched_store_rank r = {.job = m->job,
					   .attempt = m->attempt,
					   .rank = jint(m->data, "rank", 0),
					   .node = m->node,
					   .local_rank = jint(m->data, "local_rank", 0),
					   .pid = jint(m->data, "pid", 0)};
	char text[256];
	json_t *data = NULL;
	bool moved;
	int rc;

	if ((rc = sched_store_attempt_starting(mine, &moved, s->term.pg, &r, err)) || !moved)
		return rc;
	snprintf(text, sizeof(text), "attempt %lld starting: rank %lld started on node %s",
		 (long long)m->attempt, (long long)r.rank, m->node);
	data = json_pack("{s:I, s:s}", "attempt", (json_int_t)m->attempt, "node", m->node);
	rc = sched_job_event(s, m->job, "starting", "starting", text, data, err);
	json_decref(data);
	return rc;
}

/*
 * Where the attempt resumed from (attempt_running.resume), as it is kept:
 * *skipped gets the skipped list with only its documented fields (new; NULL
 * when the message has no resume: an executor that does not verify
 * checkpoints), *path and *step (borrowed; NULL, -1 when none).
 */
static int resume_clean(json_t **skipped, const char **path, int64_t *step,
			const struct proto_msg *m, struct ty_err *err)
{
	const json_t *r = json_object_get(m->data, "resume"), *e;
	const json_t *jp = json_object_get(r, "path"), *js = json_object_get(r, "step");
	size_t i;

	*skipped = NULL;
	*path = json_is_string(jp) ? json_string_value(jp) : NULL;
	*step = *path && json_is_integer(js) ? (int64_t)json_integer_value(js) : -1;
	if (!json_is_object(r))
		return 0;
	if (!(*skipped = json_array()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	json_array_foreach(json_object_get(r, "skipped"), i, e)
	{
		json_t *k = json_object();
		static const char *const strs[] = {"path", "status", "reason", NULL};

		if (!k || json_array_append_new(*skipped, k)) {
			json_decref(*skipped);
			*skipped = NULL;
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		for (int f = 0; strs[f]; f++) {
			const char *v = jstr(e, strs[f], NULL);

			json_object_set_new(k, strs[f], v ? json_stringn(v, strnlen(v, 1024))
							  : json_null());
		}
		json_object_set_new(k, "step", json_is_integer(json_object_get(e, "step"))
						   ? json_integer(jint(e, "step", 0))
						   : json_null());
		if (i >= 63)
			break; /* the newest are enough to say why */
	}
	return 0;
}

/*
 * An attempt_exited the set-based path takes: exit 0, no failure class, no
 * condition, no pre-flight verdict, no telemetry (whose summary is combined
 * per message), the node not blamed for anything.
 */
static bool plain_exit(const struct proto_msg *m)
{
	const char *cls = jstr(m->data, "failure_class", NULL);
	const json_t *c = json_object_get(m->data, "condition"),
		     *t = json_object_get(m->data, "telemetry");

	return m->type == PROTO_ATTEMPT_EXITED && jint(m->data, "exit_code", 0) == 0 &&
	       (!cls || !*cls) && (!c || json_is_null(c)) && (!t || json_is_null(t)) &&
	       !json_is_object(json_object_get(m->data, "preflight"));
}

/* Whether message i's attempt or node has other news in the batch, which keeps it in order. */
static bool running_entangled(const struct proto_msg *m, const bool *ok, int n, int i)
{
	for (int j = 0; j < n; j++) {
		if (j == i || !ok[j])
			continue;
		if (m[j].job == m[i].job && m[j].attempt == m[i].attempt &&
		    m[j].type != PROTO_ATTEMPT_RUNNING && m[j].type != PROTO_RANK_STARTED &&
		    m[j].type != PROTO_RANK_EXITED && m[j].type != PROTO_LAUNCH_ACCEPTED &&
		    m[j].type != PROTO_CHECKPOINT_WRITTEN && !plain_exit(&m[j]))
			return true;
		/* a register or notice of the node may end its attempts first */
		if (!m[j].job && m[j].type != PROTO_HEARTBEAT && !strcmp(m[j].node, m[i].node))
			return true;
	}
	return false;
}

int sched_apply_running(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
			bool *done, struct ty_err *err)
{
	struct sched_store_running *v = calloc((size_t)n + 1, sizeof(*v));
	json_t **skipped = calloc((size_t)n + 1, sizeof(*skipped));
	struct sched_store_run *runs = NULL;
	int rc = 0, nv = 0, nruns = 0;

	if (!v || !skipped) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const char *path;
		int64_t step;

		if (!ok[i] || m[i].type != PROTO_ATTEMPT_RUNNING || running_entangled(m, ok, n, i))
			continue;
		if ((rc = resume_clean(&skipped[nv], &path, &step, &m[i], err)))
			goto out;
		v[nv] = (struct sched_store_running){m[i].job, m[i].attempt, m[i].node,
						     skipped[nv], path, step};
		nv++;
		done[i] = true;
	}
	if (nv == 0)
		goto out;
	if ((rc = sched_store_attempts_running(&runs, &nruns, s->term.pg, v, nv, err)))
		goto out;
	for (int r = 0; r < nruns && !rc; r++) {
		const struct sched_store_run *u = &runs[r];
		char msg[640], resume[320] = "";
		json_t *data;

		/* where it resumed from, when the executor said (attempt_running.resume) */
		if (u->resumed) {
			char sk[64] = "";

			if (u->nskipped > 0)
				snprintf(sk, sizeof(sk), "%lld %scheckpoint%s failed verification",
					 (long long)u->nskipped, u->resume_from ? "newer " : "",
					 u->nskipped == 1 ? "" : "s");
			if (u->resume_from)
				snprintf(resume, sizeof(resume),
					 "; resumed from step %lld (%.200s%s%s)",
					 (long long)u->resume_step, u->resume_from, *sk ? "; " : "",
					 sk);
			else
				snprintf(resume, sizeof(resume), "; started from scratch (%s)",
					 *sk ? sk : "no checkpoint");
		}
		snprintf(msg, sizeof(msg), "attempt %lld running: %lld rank%s on %lld node%s%s",
			 (long long)u->attempt, (long long)u->world_size,
			 u->world_size == 1 ? "" : "s", (long long)u->nodes,
			 u->nodes == 1 ? "" : "s", resume);
		if (!(data = json_pack("{s:I}", "attempt", (json_int_t)u->attempt))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		rc = sched_job_event(s, u->job, "running", "running", msg, data, err);
		json_decref(data);
	}
out:
	for (int i = 0; skipped && i < nv; i++)
		json_decref(skipped[i]);
	free(skipped);
	free(v);
	sched_store_runs_free(runs, nruns);
	return rc;
}

/* The batch path with n = 1. */
static int on_attempt_running(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	bool ok = true, done = false;

	return sched_apply_running(s, m, &ok, 1, &done, err);
}

/* Whether node has a register or notice in the batch, which may end its attempts first. */
static bool node_busy(const struct proto_msg *m, const bool *ok, int n, const char *node)
{
	for (int j = 0; j < n; j++)
		if (ok[j] && !m[j].job && m[j].type != PROTO_HEARTBEAT && !strcmp(m[j].node, node))
			return true;
	return false;
}

/*
 * Whether plain exit i must wait for the per-message path: its attempt has
 * a message in the batch that no set-based path before it took (nor is a
 * plain exit), or a node of it with an exit in the batch has a register or
 * notice there. All exits of an attempt go the same way.
 */
static bool exit_entangled(const struct proto_msg *m, const bool *ok, const bool *done, int n,
			   int i)
{
	for (int j = 0; j < n; j++) {
		if (!ok[j] || m[j].job != m[i].job || m[j].attempt != m[i].attempt)
			continue;
		if (plain_exit(&m[j]) ? node_busy(m, ok, n, m[j].node) : !done[j])
			return true;
	}
	return false;
}

int sched_apply_exits(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
		      bool *done, struct ty_err *err)
{
	struct sched_store_exit *x = calloc((size_t)n + 1, sizeof(*x));
	enum sched_store_exit_fate *fate = calloc((size_t)n + 1, sizeof(*fate));
	struct sched_store_ended *ended = NULL;
	int64_t *jobs = NULL, *attempts = NULL;
	int *idx = calloc((size_t)n + 1, sizeof(*idx)), nx = 0, nmarked = 0, nended = 0, rc = 0;

	if (!x || !fate || !idx) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if (!ok[i] || done[i] || !plain_exit(&m[i]) || exit_entangled(m, ok, done, n, i))
			continue;
		x[nx] = (struct sched_store_exit){m[i].job, m[i].attempt, m[i].node};
		idx[nx++] = i;
	}
	if (nx == 0)
		goto out;
	if ((rc = sched_store_exits_mark(fate, s->term.pg, x, nx, err)))
		goto out;
	/* the marked ones' attempts may have ended; the deferred ones go in order */
	for (int k = 0; k < nx; k++) {
		if (fate[k] == SCHED_EXIT_DEFER)
			continue;
		done[idx[k]] = true;
		if (fate[k] != SCHED_EXIT_MARKED)
			continue;
		s->clock.capacity_freed = true;
		/* a requeued job may start once its last GPUs are released */
		sched_touch(&s->world, x[k].job);
		x[nmarked++] = x[k];
	}
	if (nmarked == 0)
		goto out;
	if ((rc = sched_store_attempts_succeeded(&ended, &nended, s->term.pg, x, nmarked, err)) ||
	    nended == 0)
		goto out;
	if (!(jobs = calloc((size_t)nended, sizeof(*jobs))) ||
	    !(attempts = calloc((size_t)nended, sizeof(*attempts)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int e = 0; e < nended && !rc; e++) {
		const struct sched_store_ended *d = &ended[e];
		char text[256];
		json_t *data;

		jobs[e] = d->job;
		attempts[e] = d->attempt;
		if (!d->moved)
			continue;
		snprintf(text, sizeof(text),
			 "attempt %lld succeeded: every rank on %lld node%s exited 0%s",
			 (long long)d->attempt, (long long)d->nodes, d->nodes == 1 ? "" : "s",
			 d->stopping ? " (" FINISHED_FIRST ")" : "");
		if (!(data = json_pack("{s:I}", "attempt", (json_int_t)d->attempt))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		rc = sched_job_event(s, d->job, "succeeded", "succeeded", text, data, err);
		json_decref(data);
	}
	if (!rc)
		rc =
		    sched_ledger_attempts_end(s->term.pg, &s->o.rates, jobs, attempts, nended, err);
out:
	free(x);
	free(fate);
	free(idx);
	free(ended);
	free(jobs);
	free(attempts);
	return rc;
}

/*
 * One statement per rank: the rank's end when it is one of the node's
 * ranks in the attempt. *mine is false when the node has no part in it
 * (ignored); a rank outside the node's range is TY_EINVAL.
 */
static int on_rank_exited(bool *mine, struct sched *s, const struct proto_msg *m,
			  struct ty_err *err)
{
	const struct sched_store_rank r = {.job = m->job,
					   .attempt = m->attempt,
					   .rank = jint(m->data, "rank", -1),
					   .node = m->node,
					   .exit_code = jint(m->data, "exit_code", 0),
					   .signal = jint(m->data, "signal", 0)};
	int64_t first, n;
	int rc;

	if ((rc = sched_store_rank_exited(mine, &first, &n, s->term.pg, &r, err)) || !*mine)
		return rc;
	if (r.rank < first || r.rank >= first + n)
		return ty_err_set(err, TY_EINVAL, "rank %lld is not one of node %s's ranks %lld-%lld",
				  (long long)r.rank, m->node, (long long)first,
				  (long long)(first + n - 1));
	return 0;
}

/*
 * A heartbeat the set-based path takes: no spot notice and no condition (a
 * node's usual heartbeat). One that lists conditions, or whose list is not
 * one, is applied by on_heartbeat.
 */
static bool plain_heartbeat(const struct proto_msg *m)
{
	const json_t *c = json_object_get(m->data, "conditions");

	return m->type == PROTO_HEARTBEAT &&
	       !json_is_object(json_object_get(m->data, "preempt_notice")) &&
	       (!c || json_is_null(c) || (json_is_array(c) && json_array_size(c) == 0));
}

int sched_apply_heartbeats(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
			   bool *done, struct ty_err *err)
{
	json_t *clean = json_array(), *idle = json_array();
	/* each heartbeat's cleaned running[] (NULL: not taken here) */
	json_t **cleaned = calloc((size_t)n + 1, sizeof(*cleaned));
	struct sched_store_beat *beats = calloc((size_t)n + 1, sizeof(*beats));
	struct sched_store_beat_applied *applied = NULL;
	int rc = 0, nidle = 0, nbeats = 0, napplied = 0;

	if (!beats || !clean || !idle || !cleaned) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		const json_t *running = json_object_get(m[i].data, "running"), *e;
		json_t *clean_running;
		bool other = false;
		size_t k;

		if (!ok[i] || !plain_heartbeat(&m[i]))
			continue;
		/* a node's other messages in the batch keep all of its in order */
		for (int j = 0; j < n && !other; j++)
			other = ok[j] && j != i && !m[j].job && m[j].type != PROTO_HEARTBEAT &&
				!strcmp(m[j].node, m[i].node);
		if (other || !(clean_running = json_array())) {
			if (!other) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			continue;
		}
		json_array_foreach(running, k, e)
		{
			json_t *r = sched_running_entry(e, m[i].node);

			if (r)
				json_array_append_new(clean_running, r);
		}
		cleaned[i] = clean_running;
		beats[nbeats++] = (struct sched_store_beat){m[i].node, jstr(m[i].data, "boot_id", ""),
							    m[i].seq, clean_running};
	}
	if (nbeats == 0)
		goto out;
	/*
	 * The newest heartbeat of each node that is ready, of the boot it
	 * registered and newer than what was applied: what on_heartbeat does in
	 * that case, for all at once. The others (and every heartbeat of a node
	 * the statement skipped) are left to sched_apply one by one.
	 */
	if ((rc = sched_store_node_heartbeats(&applied, &napplied, s->term.pg, beats, nbeats, err)))
		goto out;
	for (int r = 0; r < napplied; r++)
		if (applied[r].cleared)
			ty_info("node '%s': cleared %s", applied[r].node, applied[r].cleared);
	for (int i = 0; i < n; i++) {
		const char *key[] = {m[i].node};

		if (!ok[i] || !plain_heartbeat(&m[i]))
			continue;
		/* sorted ids: a binary search */
		int lo = 0, hi = napplied;

		while (lo < hi) {
			int mid = lo + (hi - lo) / 2;
			int c = strcmp(applied[mid].node, key[0]);

			if (c < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < napplied && !strcmp(applied[lo].node, key[0])) {
			int k;

			done[i] = true;
			if ((rc = finished_records(clean, m[i].node,
						   json_object_get(m[i].data, "finished")))) {
				rc = ty_err_set(err, rc, NULL);
				goto out;
			}
			if ((k = sched_idle_candidates(idle, m[i].node, i, cleaned[i])) < 0) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			nidle += k;
			/* the ranks' steps, and stragglers */
			if ((rc = sched_progress_apply(s, m[i].node,
						       json_object_get(m[i].data, "running"), err)))
				goto out;
		}
	}
	/* attempts the nodes finished whose attempt_exited may never have come */
	if ((rc = note_finished(s, clean, err)))
		goto out;
	/* attempts holding GPUs idle longer than their team allows */
	if (nidle > 0)
		rc = sched_idle_check(s, idle, err);
out:
	sched_store_beats_free(applied, napplied);
	free(beats);
	json_decref(clean);
	json_decref(idle);
	for (int i = 0; cleaned && i < n; i++)
		json_decref(cleaned[i]);
	free(cleaned);
	return rc;
}

int sched_apply_ranks(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
		      bool *done, bool *bad, struct ty_err *err)
{
	struct sched_store_rank *started = calloc((size_t)n + 1, sizeof(*started));
	struct sched_store_rank *exited = calloc((size_t)n + 1, sizeof(*exited));
	struct sched_store_moved *moved = NULL;
	int rc = 0, nstarted = 0, nexited = 0, nmoved = 0;

	*bad = false;
	if (!started || !exited) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		done[i] = false;
		if (!ok[i] || (m[i].type != PROTO_RANK_STARTED && m[i].type != PROTO_RANK_EXITED))
			continue;
		if (m[i].type == PROTO_RANK_STARTED)
			started[nstarted++] = (struct sched_store_rank){
			    .job = m[i].job,
			    .attempt = m[i].attempt,
			    .rank = jint(m[i].data, "rank", -1),
			    .node = m[i].node,
			    .local_rank = jint(m[i].data, "local_rank", 0),
			    .pid = jint(m[i].data, "pid", 0)};
		else
			exited[nexited++] = (struct sched_store_rank){
			    .job = m[i].job,
			    .attempt = m[i].attempt,
			    .rank = jint(m[i].data, "rank", -1),
			    .node = m[i].node,
			    .exit_code = jint(m[i].data, "exit_code", 0),
			    .signal = jint(m[i].data, "signal", 0)};
		done[i] = true;
	}
	if (nexited &&
	    ((rc = sched_store_ranks_exited(bad, s->term.pg, exited, nexited, err)) || *bad))
		goto out;
	if (nstarted && (rc = sched_store_attempts_starting(&moved, &nmoved, s->term.pg, started,
							    nstarted, err)))
		goto out;
	for (int r = 0; r < nmoved && !rc; r++) {
		const struct sched_store_rank *f = &started[moved[r].first];
		char text[256];
		json_t *data;

		snprintf(text, sizeof(text), "attempt %lld starting: rank %lld started on node %s",
			 (long long)moved[r].attempt, (long long)f->rank, f->node);
		data = json_pack("{s:I, s:s}", "attempt", (json_int_t)moved[r].attempt, "node",
				 f->node);
		rc = sched_job_event(s, moved[r].job, "starting", "starting", text, data, err);
		json_decref(data);
	}
out:
	free(started);
	free(exited);
	free(moved);
	return rc;
}

int sched_apply_acks(struct sched *s, const struct proto_msg *m, const bool *ok, int n,
		     bool *done, struct ty_err *err)
{
	struct sched_store_part *v = calloc((size_t)n + 1, sizeof(*v));
	int rc = 0, nv = 0;

	if (!v)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		if (!ok[i] || m[i].type != PROTO_LAUNCH_ACCEPTED)
			continue;
		v[nv++] = (struct sched_store_part){m[i].job, m[i].attempt, m[i].node};
		done[i] = true;
	}
	if (nv > 0)
		rc = sched_store_allocs_accepted(s->term.pg, v, nv, err);
	free(v);
	return rc;
}

/* A week: a longer checkpoint write is a broken clock, not a measurement. */
#define CHECKPOINT_WRITE_MAX_MS (7LL * 86400 * 1000)

/* write_ms of a verified checkpoint, for the ledger's checkpoint overhead; absent or bad: none. */
static int checkpoint_write_time(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	const json_t *w = json_object_get(m->data, "write_ms");

	if (!json_is_integer(w) || json_integer_value(w) <= 0 ||
	    json_integer_value(w) > CHECKPOINT_WRITE_MAX_MS)
		return 0;
	return sched_store_checkpoint_write(
	    s->term.pg, &(struct sched_store_part){m->job, m->attempt, m->node},
	    jint(m->data, "step", 0), json_integer_value(w), err);
}

/*
 * One written after the checkpoint signal of a preemption: its duration is
 * measured and the kill need not wait for kill_at (preempt.c).
 */
static int on_checkpoint_committed(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	if (!json_is_true(json_object_get(m->data, "after_signal")))
		return 0;
	return sched_preempt_committed(s, m->job, m->attempt, m->node, jint(m->data, "step", 0),
				       err);
}

/*
 * The job event a checkpoint report calls for: a node whose digest differs
 * from the verifier's, or the resume checkpoint rejected (and where the
 * next attempt resumes); none otherwise.
 */
static int checkpoint_report_event(struct sched *s, const struct proto_msg *m,
				   const struct sched_store_ckpt_report *r,
				   const struct sched_store_ckpt_outcome *o, struct ty_err *err)
{
	char text[512];
	json_t *data;
	int rc;

	if (o->what == SCHED_CKPT_DISAGREES) {
		snprintf(text, sizeof(text),
			 "checkpoint step %lld: node %s reports MANIFEST.json digest %.12s, node %s "
			 "verified %.12s",
			 (long long)r->step, r->node, r->digest, o->node, o->digest);
		data = json_pack("{s:I, s:I, s:s, s:s, s:s, s:s}", "attempt", (json_int_t)r->attempt,
				 "step", (json_int_t)r->step, "node", r->node, "digest", r->digest,
				 "verified_by", o->node, "verified_digest", o->digest);
		rc = sched_job_event(s, m->job, "checkpoint_disagreement", o->job_state, text, data,
				     err);
		json_decref(data);
		return rc;
	}
	if (o->what == SCHED_CKPT_REJECTED) {
		char next[64] = "the start (no valid checkpoint left)";

		if (o->next_step >= 0)
			snprintf(next, sizeof(next), "step %lld", (long long)o->next_step);
		snprintf(text, sizeof(text),
			 "checkpoint step %lld rejected by node %s: %.300s; the next attempt resumes "
			 "from %s",
			 (long long)r->step, r->node, r->reason ? r->reason : "", next);
		data = json_pack("{s:I, s:I, s:s, s:s?, s:o}", "attempt", (json_int_t)r->attempt,
				 "step", (json_int_t)r->step, "node", r->node, "reason", r->reason,
				 "next_step",
				 o->next_step >= 0 ? json_integer((json_int_t)o->next_step)
						  : json_null());
		rc = sched_job_event(s, m->job, "checkpoint_rejected", o->job_state, text, data, err);
		json_decref(data);
		return rc;
	}
	return 0;
}

/*
 * A checkpoint a node examined: the checkpoints table (the next launch's
 * resume point, store/checkpoints.c) and, when valid, the start of the work
 * lost should the attempt be preempted or fail (the ledger). A redelivered
 * event changes nothing.
 */
static int on_checkpoint_written(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	struct sched_store_ckpt_outcome o;
	const json_t *hashed = json_object_get(m->data, "hashed");
	struct sched_store_ckpt_report r = {
	    .job = m->job,
	    .attempt = m->attempt,
	    .node = m->node,
	    .step = jint(m->data, "step", 0),
	    .path = jstr(m->data, "path", ""),
	    .status = jstr(m->data, "status", json_is_true(json_object_get(m->data, "valid"))
						     ? "valid"
						     : "corrupt"),
	    .digest = jstr(m->data, "digest", NULL),
	    .reason = jstr(m->data, "reason", NULL),
	    .bytes = jint(m->data, "bytes", 0),
	    .files = jint(m->data, "files", 0),
	    /* executors before the field hashed everything on every node */
	    .hashed = !json_is_false(hashed),
	};
	int rc;

	if (r.step < 0 || (strcmp(r.status, "valid") && strcmp(r.status, "torn") &&
			   strcmp(r.status, "corrupt") && strcmp(r.status, "rejected") &&
			   strcmp(r.status, "deleted")))
		return 0; /* not one we know: the table's check would refuse it */
	if (r.digest && (strlen(r.digest) != 64 || strspn(r.digest, "0123456789abcdef") != 64))
		r.digest = NULL;
	if ((rc = sched_store_checkpoint_report(&o, s->term.pg, &r, err)) ||
	    (rc = checkpoint_report_event(s, m, &r, &o, err)) || o.what == SCHED_CKPT_REJECTED)
		return rc;
	if (strcmp(r.status, "valid"))
		return 0; /* torn or corrupt: resume and loss go by the older one */
	/* the mirror's allocations carry it: victims are chosen by the work they would lose */
	sched_mirror_touch_job(&s->world.mirror, m->job);
	if ((rc = checkpoint_write_time(s, m, err)))
		return rc;
	if ((rc = sched_store_checkpoint_written(
		 s->term.pg, &(struct sched_store_part){m->job, m->attempt, m->node}, r.step, err)))
		return rc;
	return on_checkpoint_committed(s, m, err);
}

/*
 * A job event when moving checkpoints to the object store starts failing
 * (local copies kept, retried) or works again; a failure that goes on is
 * only logged, however often the node retries.
 */
static int checkpoint_tier_event(struct sched *s, const struct proto_msg *m, const char *error,
				 struct ty_err *err)
{
	char state[32], text[TY_ERR_MSG_MAX + 160];
	bool changed;
	json_t *data;
	int rc;

	if (!error && !json_is_integer(json_object_get(m->data, "moved")))
		return 0; /* an attempt's start: a restore, not a move */
	if ((rc = sched_store_checkpoint_tier_error(&changed, state, s->term.pg, m->job, m->node,
						    error, err)) ||
	    !changed)
		return rc;
	if (error)
		snprintf(text, sizeof(text),
			 "cannot move checkpoints to the object store (node %s): %s; local copies "
			 "kept, retried in %lld s",
			 m->node, error, (long long)(jint(m->data, "retry_ms", 0) / 1000));
	else
		snprintf(text, sizeof(text), "checkpoints move to the object store again (node %s)",
			 m->node);
	data = json_pack("{s:I, s:s, s:s?}", "attempt", (json_int_t)m->attempt, "node", m->node,
			 "error", error);
	rc = sched_job_event(s, m->job, "checkpoint_tier", state, text, data, err);
	json_decref(data);
	return rc;
}

/*
 * Where a job's checkpoints are, and how moving them to the object store
 * went: the figures kept for usage and /metrics, a failure logged (the
 * executor keeps the local copies and retries).
 */
static int on_checkpoint_tier(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	const char *e = jstr(m->data, "error", NULL);
	int rc;

	if (e)
		ty_warn("job %lld attempt %lld: node '%s' cannot use the object store: %s",
			(long long)m->job, (long long)m->attempt, m->node, e);
	if ((rc = checkpoint_tier_event(s, m, e, err)))
		return rc;
	if (!json_is_integer(json_object_get(m->data, "local_bytes")) &&
	    !json_is_integer(json_object_get(m->data, "store_bytes")))
		return 0;
	return sched_store_checkpoint_storage(s->term.pg, m->job, m->node,
					      jint(m->data, "local_bytes", -1),
					      jint(m->data, "store_bytes", -1), err);
}

/* A spot interruption notice (job 0): the node, not an attempt, is being taken. */
static int on_preempt_notice(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	struct sched_store_node n;
	int rc;

	if ((rc = sched_store_node_get(&n, s->term.pg, m->node, err)))
		return rc;
	if (!n.exists || n.lost) {
		ty_info("spot notice from %s node '%s' ignored", n.exists ? "lost" : "unknown",
			m->node);
		return 0;
	}
	/*
	 * Heartbeats after a notice repeat it: one newer than this notice that
	 * left the node not preempting says it is over (or from an earlier boot).
	 */
	if (!n.preempting && m->seq < n.last_seq) {
		ty_info("stale spot notice from node '%s' ignored", m->node);
		return 0;
	}
	return sched_spot_notice(s, m->node, m->seq, m->data, err);
}

int sched_apply(struct sched *s, const struct proto_msg *m, struct ty_err *err)
{
	int rc;

	switch (m->type) {
	case PROTO_REGISTER:
		return on_register(s, m, err);
	case PROTO_HEARTBEAT:
		return on_heartbeat(s, m, err);
	case PROTO_PREEMPT_NOTICE:
		return on_preempt_notice(s, m, err);
	case PROTO_LAUNCH_ACCEPTED: {
		bool ok = true, done = false;

		return sched_apply_acks(s, m, &ok, 1, &done, err);
	}
	case PROTO_RANK_STARTED:
	case PROTO_RANK_EXITED: {
		bool mine = true;

		rc = m->type == PROTO_RANK_STARTED ? on_rank_started(&mine, s, m, err)
						   : on_rank_exited(&mine, s, m, err);
		if (!rc && !mine)
			ty_debug("ignoring %s of job %lld attempt %lld: node '%s' has no part in it",
				 proto_type_name(m->type), (long long)m->job,
				 (long long)m->attempt, m->node);
		return rc;
	}
	case PROTO_ATTEMPT_RUNNING:
		return on_attempt_running(s, m, err);
	case PROTO_CHECKPOINT_WRITTEN:
		return on_checkpoint_written(s, m, err);
	case PROTO_CHECKPOINT_TIER:
		return on_checkpoint_tier(s, m, err);
	case PROTO_ATTEMPT_EXITED:
		break;
	default:
		ty_debug("ignoring %s message from node '%s'", proto_type_name(m->type), m->node);
		return 0;
	}
	/* every write below names the node's allocation: one of a node with no part is a no-op */
	if (plain_exit(m)) {
		bool ok = true, done = false;

		if ((rc = sched_apply_exits(s, m, &ok, 1, &done, err)) || done)
			return rc;
	}
	/* first, so that the ledger row of the gang's last node counts its idle time */
	if ((rc = sched_telemetry_record(s->term.pg, m, err)))
		return rc;
	return alloc_exit(NULL, s, m->node, m->job, m->attempt, (int)jint(m->data, "exit_code", 0),
			  jstr(m->data, "failure_class", NULL), jstr(m->data, "message", NULL),
			  jstr(m->data, "evidence", NULL), json_object_get(m->data, "condition"),
			  json_object_get(m->data, "preflight"),
			  !json_is_false(json_object_get(m->data, "node_fault")),
			  proto_evidence_source_parse(
			      jstr(m->data, PROTO_EVIDENCE_SOURCE_FIELD, NULL)),
			  err);
}
