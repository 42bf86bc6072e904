/*
 * Spot interruption notices (docs/dispatch.md, "Spot notices"): a node with
 * a notice is `preempting` (no new work) and every gang with a rank on it
 * goes through the preemption protocol of preempt.c, its kill bounded by
 * the notice's deadline; the requeue counts a spot preemption.
 */
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *jstr(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

int sched_spot_notice(struct sched *s, const char *node, int64_t seq, const json_t *notice,
		      struct ty_err *err)
{
	const json_t *dl = json_object_get(notice, "deadline");
	char *text = NULL;
	json_t *keep = NULL;
	int64_t deadline;
	bool changed = false;
	int rc;

	if (!json_is_integer(dl) || json_integer_value(dl) <= 0)
		return ty_err_set(err, TY_EINVAL, "spot notice of node '%s' without a deadline",
				  node);
	deadline = (int64_t)json_integer_value(dl);
	/* only what the scheduler shows: provider, action and detail, bounded */
	keep = json_object();
	if (!keep)
		return ty_err_set(err, TY_ENOMEM, NULL);
	{
		static const char *const keys[] = {"provider", "action", "detail", NULL};

		for (int i = 0; keys[i]; i++) {
			const char *v = jstr(notice, keys[i]);

			if (v)
				json_object_set_new(keep, keys[i], json_stringn(v, strnlen(v, 512)));
		}
	}
	if (!(text = json_dumps(keep, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_store_spot_notice(&changed, s->term.pg, node, deadline, text, seq, err)) ||
	    !changed)
		goto out;
	sched_mirror_touch_node(&s->world.mirror, node);
	ty_warn("node '%s' is preempting: spot notice (%s %s), deadline in %lld ms", node,
		jstr(notice, "provider") ? jstr(notice, "provider") : "unknown provider",
		jstr(notice, "action") ? jstr(notice, "action") : "",
		(long long)(deadline - ty_wall_ms()));
	rc = sched_spot_handshake(s, node, err);
out:
	json_decref(keep);
	free(text);
	return rc;
}

int sched_spot_handshake(struct sched *s, const char *node, struct ty_err *err)
{
	struct sched_store_spot_gang *v = NULL;
	char why[512];
	int rc, n = 0;

	/* the kill comes kill grace early, so SIGKILL lands by deadline - margin */
	if ((rc = sched_store_spot_kill_by(
		 s->term.pg, node, s->o.spot_kill_margin_s + s->o.kill_grace_seconds, err)) ||
	    (rc = sched_store_spot_gangs(&v, &n, s->term.pg, node, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		bool started;

		snprintf(why, sizeof(why),
			 "attempt %lld preempted: node %s has a spot interruption notice (%s, "
			 "deadline in %lld s)",
			 (long long)v[i].attempt, node, v[i].provider, (long long)v[i].left_s);
		rc = sched_preempt_spot(&started, s, v[i].job, v[i].attempt, node,
					v[i].deadline_ms, why, err);
	}
	sched_store_spot_gangs_free(v, n);
	return rc;
}

int sched_spot_clear(struct sched *s, const char *node, const char *why, struct ty_err *err)
{
	char state[16];
	int rc;

	if ((rc = sched_store_spot_clear(state, sizeof(state), s->term.pg, node, err)))
		return rc;
	if (state[0]) {
		ty_info("node '%s' is %s again: %s", node, state, why);
		sched_mirror_touch_node(&s->world.mirror, node);
		s->clock.capacity_freed = true;
	}
	return 0;
}

int sched_spot_sweep(struct sched *s, struct ty_err *err)
{
	struct sched_store_nodes v = {0};
	bool any = false;
	int rc;

	/* a node the mirror has yet to read again (the API's trigger) may be preempting too */
	any = s->world.mirror.stale || s->world.mirror.ntnodes > 0;
	for (int i = 0; i < s->world.mirror.nnodes && !any; i++)
		any = s->world.mirror.nodes[i].preempting;
	if (!any)
		return 0; /* the usual case costs no query */
	if ((rc = sched_store_spot_preempting(&v, s->term.pg, err)))
		return rc;
	if (v.n == 0)
		goto out;
	if ((rc = sched_tx_begin(&s->term, err)))
		goto out;
	for (int i = 0; i < v.n && !rc; i++)
		rc = sched_spot_handshake(s, v.v[i], err);
	if (rc)
		ty_pg_rollback(s->term.pg);
	else
		rc = sched_tx_commit(&s->term, err);
out:
	sched_store_nodes_free(&v);
	return rc;
}
