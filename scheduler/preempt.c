/*
 * The preemption protocol (docs/dispatch.md, "Preemption"): a victim's
 * attempt gets the job's checkpoint signal on every node, a `kill` (reason
 * preempted) once the checkpoint grace period is over, and when every node
 * has reported (or was lost) the job goes back to pending without spending
 * its retry budget. Every step is guarded by the attempt's state, so a
 * repeated or late step changes nothing.
 */
#include "scheduler.h"
#include "core/policy.h"
#include "ty_log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The grace for a victim of job: from its measured checkpoint duration
 * within its class's bounds (*how says so), or -1 (the job's own
 * checkpoint.grace_seconds: nothing measured yet, or 0).
 */
static int choose_grace(int *grace_s, char *how, size_t howsz, struct sched *s, int64_t job,
			struct ty_err *err)
{
	struct sched_store_grace_in gi;
	int rc, c;

	*grace_s = -1;
	*how = 0;
	/* grace_seconds 0 asks for no checkpoint on preemption: measuring does not change that */
	if ((rc = sched_store_grace_inputs(&gi, s->term.pg, job, err)) || gi.measured_ms < 0 ||
	    gi.spec_grace_s == 0)
		return rc;
	if ((c = sched_class_parse(gi.cls)) < 0)
		c = SCHED_CLASS_NORMAL; /* the spec's default class */
	*grace_s = sched_grace_seconds(gi.measured_ms, s->o.grace_margin_pct, s->o.grace_min_s[c],
				       s->o.grace_max_s[c]);
	snprintf(how, howsz, "measured %.1f s, grace %d s", (double)gi.measured_ms / 1000.0,
		 *grace_s);
	return 0;
}

/*
 * Start the protocol for one attempt: for_job (0: none) is the job it makes
 * room for, spot_node (NULL: none) the node whose spot notice caused it;
 * deadline_ms (0: none) bounds kill_at to the deadline minus the margin.
 */
static int start(bool *started, struct sched *s, int64_t job, int64_t attempt, int64_t for_job,
		 const char *spot_node, int64_t deadline_ms, const char *why, struct ty_err *err)
{
	struct sched_store_preempt_req req = {
	    .job = job,
	    .attempt = attempt,
	    .for_job = for_job,
	    .why = why,
	    .spot_node = spot_node,
	    .deadline_ms = deadline_ms,
	    /* SIGKILL (kill grace after the kill) lands by deadline - margin */
	    .margin_s = s->o.spot_kill_margin_s + s->o.kill_grace_seconds,
	};
	struct sched_store_preempt pr = {0};
	json_t *data = NULL, *edata = NULL;
	char **nodes = NULL, text[512], how[96];
	int rc, nnodes = 0;
	bool moved;

	*started = false;
	if ((rc = choose_grace(&req.grace_s, how, sizeof(how), s, job, err)))
		goto out;
	if ((rc = sched_store_attempt_preempt(&pr, &moved, s->term.pg, &req, err)) || !moved)
		goto out; /* over, or being stopped for another reason: nothing to do */
	if ((rc = sched_store_job_preempting(s->term.pg, job, err)))
		goto out;
	/* the checkpoint signal to every node still running its part */
	if ((rc = sched_store_checkpoint_nodes(&nodes, &nnodes, s->term.pg, job, attempt, err)))
		goto out;
	if (!(data = json_pack("{s:s, s:i}", "signal", pr.signal, "grace_seconds", pr.grace_s))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < nnodes; i++)
		if ((rc = sched_outbox_add(s, PROTO_CHECKPOINT, nodes[i], job, attempt, data, err)))
			goto out;
	/* a spot deadline may cut the measured grace short: the text says both */
	if (*how && pr.grace_s != req.grace_s)
		snprintf(how + strlen(how), sizeof(how) - strlen(how),
			 ", cut to %d s by the deadline", pr.grace_s);
	snprintf(text, sizeof(text), "%s; %s sent to %d node%s, killed in %d s%s%s%s", why,
		 pr.signal, nnodes, nnodes == 1 ? "" : "s", pr.grace_s, *how ? " (" : "", how,
		 *how ? ")" : "");
	edata = json_pack("{s:I, s:s, s:i}", "attempt", (json_int_t)attempt, "signal", pr.signal,
			  "grace_seconds", pr.grace_s);
	if (edata && for_job)
		json_object_set_new(edata, "preempted_for", json_integer(for_job));
	if (edata && spot_node)
		json_object_set_new(edata, "spot_node", json_string(spot_node));
	if (edata && deadline_ms)
		json_object_set_new(edata, "deadline", json_integer(deadline_ms));
	if (edata)
		json_object_set_new(edata, "grace_source",
				    json_string(req.grace_s >= 0 ? "measured" : "spec"));
	if (!edata) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_job_event(s, job, "preempting", "preempting", text, edata, err)))
		goto out;
	*started = true;
	/* no grace: the kill is due now */
	if (pr.grace_s == 0)
		rc = sched_kill_nodes(NULL, s, job, attempt, "preempted", NULL, err);
out:
	json_decref(data);
	json_decref(edata);
	sched_store_strs_free(nodes, nnodes);
	free(pr.signal);
	return rc;
}

int sched_preempt(bool *started, struct sched *s, int64_t job, int64_t attempt, int64_t for_job,
		  const char *why, struct ty_err *err)
{
	return start(started, s, job, attempt, for_job, NULL, 0, why, err);
}

int sched_preempt_spot(bool *started, struct sched *s, int64_t job, int64_t attempt,
		       const char *node, int64_t deadline_ms, const char *why, struct ty_err *err)
{
	int rc = start(started, s, job, attempt, 0, node, deadline_ms, why, err);

	if (!rc && *started)
		sched_metrics_preempted(s, "spot");
	return rc;
}

int sched_preempt_committed(struct sched *s, int64_t job, int64_t attempt, const char *node,
			    int64_t step, struct ty_err *err)
{
	const struct sched_store_part part = {job, attempt, node};
	json_t *data = NULL;
	char text[256];
	int64_t ms;
	int rc, kills = 0;

	if ((rc = sched_store_checkpoint_committed(&ms, s->term.pg, &part, err)) || ms < 0)
		return rc;
	/* the checkpoint is safe: waiting for kill_at would only idle the GPUs */
	if ((rc = sched_kill_nodes(&kills, s, job, attempt, "preempted", NULL, err)) || kills == 0)
		return rc;
	if (!(data = json_pack("{s:I, s:I, s:I, s:i}", "attempt", (json_int_t)attempt, "step",
			       (json_int_t)step, "checkpoint_ms", (json_int_t)ms, "kills", kills)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	snprintf(text, sizeof(text),
		 "checkpoint step %lld of attempt %lld committed %.1f s after the signal: kill "
		 "sent to %d node%s",
		 (long long)step, (long long)attempt, (double)ms / 1000.0, kills,
		 kills == 1 ? "" : "s");
	rc = sched_job_event(s, job, "stopping", "preempting", text, data, err);
	json_decref(data);
	return rc;
}

int sched_cohort_delays_parse(struct sched_cohort_delay **out, int *n, const char *spec,
			      struct ty_err *err)
{
	struct sched_cohort_delay *v = NULL;
	int cap = 0, k = 0, rc = 0;

	*out = NULL;
	*n = 0;
	while (spec && *spec) {
		size_t len = strcspn(spec, "=,");
		char *end;
		long long sec;

		if (len == 0 || len >= sizeof(v->name) || spec[len] != '=') {
			rc = ty_err_set(err, TY_EINVAL, "'%.*s' is not COHORT=SECONDS",
					(int)strcspn(spec, ","), spec);
			goto out;
		}
		for (int i = 0; i < k; i++)
			if (strlen(v[i].name) == len && !strncmp(v[i].name, spec, len)) {
				rc = ty_err_set(err, TY_EINVAL, "cohort '%.*s' is given twice",
						(int)len, spec);
				goto out;
			}
		errno = 0;
		sec = strtoll(spec + len + 1, &end, 10);
		if (end == spec + len + 1 || (*end && *end != ',') || errno || sec < 0 ||
		    sec > 31536000) {
			rc = ty_err_set(err, TY_EINVAL,
					"cohort '%.*s': '%.*s' is not a number of seconds in "
					"0-31536000",
					(int)len, spec, (int)strcspn(spec + len + 1, ","),
					spec + len + 1);
			goto out;
		}
		if (k == cap) {
			struct sched_cohort_delay *nv;

			cap = cap ? cap * 2 : 4;
			if (!(nv = realloc(v, (size_t)cap * sizeof(*v)))) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			v = nv;
		}
		memset(&v[k], 0, sizeof(v[k]));
		memcpy(v[k].name, spec, len);
		v[k++].seconds = sec;
		spec = *end ? end + 1 : end;
	}
	*out = v;
	*n = k;
	v = NULL;
out:
	free(v);
	return rc;
}

int sched_preempt_kills(struct sched *s, struct ty_err *err)
{
	struct sched_store_ja *due = NULL;
	int rc, n = 0;

	if ((rc = sched_store_kills_due(&due, &n, s->term.pg, err)))
		return rc;
	if (n == 0)
		goto out;
	if ((rc = sched_tx_begin(&s->term, err)))
		goto out;
	for (int i = 0; i < n && !rc; i++) {
		int64_t job = due[i].job, attempt = due[i].attempt;
		char text[256];
		bool still = false;
		int kills = 0;

		if ((rc = sched_store_kill_due_lock(&still, s->term.pg, job, attempt, err)))
			break;
		if (still &&
		    !(rc = sched_kill_nodes(&kills, s, job, attempt, "preempted", NULL, err)) &&
		    kills > 0) {
			json_t *data = json_pack("{s:I}", "attempt", (json_int_t)attempt);

			snprintf(text, sizeof(text),
				 "checkpoint grace period of attempt %lld over: kill sent to %d "
				 "node%s",
				 (long long)attempt, kills, kills == 1 ? "" : "s");
			rc = sched_job_event(s, job, "stopping", "preempting", text, data, err);
			json_decref(data);
		}
	}
	if (rc)
		ty_pg_rollback(s->term.pg);
	else
		rc = sched_tx_commit(&s->term, err);
out:
	free(due);
	return rc;
}

int sched_preempt_settle(struct sched *s, int64_t job, int64_t attempt, struct ty_err *err)
{
	struct sched_store_preempted pd = {0};
	int64_t preemptions, spot_preemptions;
	json_t *data = NULL;
	const char *to;
	char text[512];
	bool moved;
	int rc;

	if ((rc = sched_store_attempt_preempt_failed(&pd, &moved, s->term.pg, job, attempt, err)) ||
	    !moved)
		goto out; /* settled before */
	if ((rc = sched_ledger_attempt_end(s->term.pg, &s->o.rates, job, attempt, err)))
		goto out;
	if (!(data = json_pack("{s:I, s:s}", "attempt", (json_int_t)attempt, "failure_class",
			       "preempted"))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (pd.for_job)
		json_object_set_new(data, "preempted_for", json_integer(pd.for_job));
	if (pd.spot_node)
		json_object_set_new(data, "spot_node", json_string(pd.spot_node));
	s->clock.capacity_freed = true;
	/* a cancel requested while it was being preempted wins */
	if ((rc = sched_store_job_preempt_cancelled(&to, s->term.pg, job, attempt, err)))
		goto out;
	if (to) {
		snprintf(text, sizeof(text),
			 "%s: attempt %lld (being preempted) stopped on every node", to,
			 (long long)attempt);
		rc = sched_job_event(s, job, to, to, text, data, err);
		goto out;
	}
	/* back in the queue at its old place (ordered by submit time); no retry is spent */
	if ((rc = sched_store_job_preempt_requeued(&moved, &preemptions, &spot_preemptions,
						   s->term.pg, job, attempt, pd.spot_node != NULL,
						   err)))
		goto out;
	if (moved && pd.spot_node) {
		json_object_set_new(data, "spot_preemptions", json_integer(spot_preemptions));
		snprintf(text, sizeof(text),
			 "attempt %lld preempted: stopped on every node; requeued for attempt %lld "
			 "(spot preemption %lld, retry budget untouched)",
			 (long long)attempt, (long long)attempt + 1, (long long)spot_preemptions);
		rc = sched_job_event(s, job, "requeued", "pending", text, data, err);
		sched_metrics_requeued(s, "preempted", false);
	} else if (moved) {
		snprintf(text, sizeof(text),
			 "attempt %lld preempted: stopped on every node; requeued for attempt %lld "
			 "(preemption %lld, retry budget untouched)",
			 (long long)attempt, (long long)attempt + 1, (long long)preemptions);
		rc = sched_job_event(s, job, "requeued", "pending", text, data, err);
		sched_metrics_requeued(s, "preempted", false);
	}
out:
	json_decref(data);
	free(pd.spot_node);
	return rc;
}
