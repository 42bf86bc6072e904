/*
 * Liveness and reconciliation: PostgreSQL is the truth, each node's last
 * heartbeat is what the node says it runs, and the difference is repaired
 * by re-sending launches, re-sending kills and releasing allocations that
 * never started (docs/dispatch.md, "Scheduler duties" 4 and 5).
 */
#include "launch.h"
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A gap between answered probes longer than this is time nobody was heard. */
static int64_t blind_ms(const struct sched *s)
{
	return s->o.node_timeout_ms / 2 > 2000 ? s->o.node_timeout_ms / 2 : 2000;
}

/*
 * The timed node transitions (docs/dispatch.md, "Node states"): a draining
 * node whose last allocation is released is drained; a suspect node whose
 * failures within the window fell below --suspect-after-jobs is ready.
 */
static int node_states(struct sched *s, struct ty_err *err)
{
	struct sched_store_nodes v = {0};
	int rc;

	if ((rc = sched_store_nodes_drained(&v, s->term.pg, err)))
		return rc;
	for (int i = 0; i < v.n; i++) {
		sched_mirror_touch_node(&s->world.mirror, v.v[i]);
		ty_info("node '%s' drained: no work left on it", v.v[i]);
	}
	sched_store_nodes_free(&v);
	if ((rc = sched_store_nodes_ready_again(&v, s->term.pg, s->o.failure_window_s,
						s->o.suspect_after, err)))
		return rc;
	for (int i = 0; i < v.n; i++) {
		sched_mirror_touch_node(&s->world.mirror, v.v[i]);
		s->clock.capacity_freed = true;
		ty_info("node '%s' is ready again: its failures left the window", v.v[i]);
	}
	sched_store_nodes_free(&v);
	return 0;
}

int sched_liveness(struct sched *s, struct ty_err *err)
{
	struct sched_store_nodes lost = {0};
	char why[256];
	int64_t now;
	int rc;

	/*
	 * Silence heard through a broker that does not answer proves nothing,
	 * and neither does silence while this loop was not looking (a stall, a
	 * pause): nobody is judged then, and everyone gets a full timeout after.
	 */
	if (!sched_kafka_reachable(s)) {
		if (!s->bus.down)
			ty_warn("kafka does not answer: no node is declared lost until it does");
		s->bus.down = true;
		return 0;
	}
	/* after the probe: a probe that waited for the broker was a blind spell too */
	now = ty_mono_ms();
	if (s->bus.down || (s->bus.ok && now - s->bus.ok > blind_ms(s))) {
		ty_info("kafka answers again after %lld ms: every node has %d ms to be heard from",
			(long long)(now - s->bus.ok), s->o.node_timeout_ms);
		s->bus.down = false;
		s->bus.back = now;
	}
	s->bus.ok = now;
	if ((rc = sched_tx_begin(&s->term, err)))
		return rc;
	if ((rc = sched_store_nodes_lost(&lost, s->term.pg, s->o.node_timeout_ms,
					 s->bus.back ? now - s->bus.back : -1, err)))
		goto fail;
	for (int i = 0; i < lost.n; i++) {
		const char *node = lost.v[i];

		sched_mirror_touch_node(&s->world.mirror, node);
		ty_warn("node '%s' lost: no heartbeat for %d ms", node, s->o.node_timeout_ms);
		snprintf(why, sizeof(why), "node %s lost: no heartbeat for %d ms", node,
			 s->o.node_timeout_ms);
		if ((rc = sched_node_gone(s, node, "node_lost", why, true, err)))
			goto fail;
	}
	sched_store_nodes_free(&lost);
	if ((rc = node_states(s, err)))
		goto fail;
	return sched_tx_commit(&s->term, err);
fail:
	sched_store_nodes_free(&lost);
	ty_pg_rollback(s->term.pg);
	return rc;
}

/*
 * An active attempt's part whose launch the node, heartbeating since, has
 * not acknowledged (launch_accepted, or a rank started) within --resend-ms.
 */
static int resend_launches(struct sched *s, struct ty_err *err)
{
	struct sched_store_unacked *v = NULL;
	bool behind = false;
	int rc, n = 0;

	/*
	 * While this consumer lags, a launch's acknowledgement may be waiting
	 * unread: heartbeats (another topic) can be read seconds ahead of it
	 * (measured: 18.8 re-sends per gang in bench/dispatch at 2,000 nodes).
	 */
	if (s->in.lagging) {
		ty_debug("events are still being read: no launch is re-sent this pass");
		return 0;
	}
	/*
	 * While the relay is a period behind, a launch may simply not have
	 * left yet: sending it again would only lengthen the backlog (measured:
	 * 55,000 re-sends in one bench/dispatch run that way).
	 */
	if ((rc = sched_store_relay_behind(&behind, s->term.pg, s->o.resend_ms, err)))
		return rc;
	if (behind) {
		ty_debug("the outbox relay is behind: no launch is re-sent this pass");
		return 0;
	}
	if ((rc = sched_store_unacked(&v, &n, s->term.pg, s->o.resend_ms, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		const struct sched_store_unacked *u = &v[i];
		json_t *gpus = u->gpus ? json_loads(u->gpus, 0, NULL) : NULL;
		json_t *common = u->launch ? json_loads(u->launch, 0, NULL) : NULL;
		json_t *data = NULL;
		const char *node = u->node;
		bool finished = false;

		/* a node that lists it as finished got it: its exit is on the way */
		for (int k = 0; k < s->in.nlate && !finished; k++)
			finished = s->in.late[k].job == u->job &&
				   s->in.late[k].attempt == u->attempt &&
				   !strcmp(s->in.late[k].node, node);
		if (finished) {
			json_decref(gpus);
			json_decref(common);
			continue;
		}
		if (gpus && common && json_array_size(gpus) <= PROTO_LAUNCH_MAX_GPU_INDEX + 1) {
			int g[PROTO_LAUNCH_MAX_GPU_INDEX + 1], ng = (int)json_array_size(gpus);

			for (int k = 0; k < ng; k++)
				g[k] = (int)json_integer_value(json_array_get(gpus, (size_t)k));
			data = proto_launch_data(common, &(struct proto_launch_node){
							     .node_rank = u->node_rank,
							     .first_rank = u->first_rank,
							     .gpus = g,
							     .ngpus = ng,
							     .boot_id = u->boot_id,
							 });
		}
		if (!data) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		} else if (!(rc = sched_outbox_add(s, PROTO_LAUNCH, node, u->job, u->attempt, data,
						   err))) {
			ty_info("job %lld: re-sending the launch of attempt %lld to node '%s', "
				"which has not acknowledged it",
				(long long)u->job, (long long)u->attempt, node);
			rc = sched_store_part_launched(s->term.pg, u->job, u->attempt, node, err);
		}
		json_decref(gpus);
		json_decref(common);
		json_decref(data);
	}
	sched_store_unacked_free(v, n);
	return rc;
}

/*
 * Attempts a node runs that are over, or that the database never heard of.
 * A part whose end the node reported itself (exit_code set) is left alone:
 * a heartbeat sent before that report may be applied after it.
 */
static int resend_kills(struct sched *s, struct ty_err *err)
{
	struct sched_store_part_found *v = NULL;
	json_t *data = NULL, *pdata = NULL;
	int rc, n = 0;

	if ((rc = sched_store_strays(&v, &n, s->term.pg, s->o.resend_ms, err)))
		return rc;
	if (n > 0 && (!(data = json_pack("{s:s, s:i}", "reason", "over", "grace_seconds",
					  s->o.kill_grace_seconds)) ||
		      !(pdata = json_pack("{s:s, s:i}", "reason", "preempted", "grace_seconds",
					  s->o.kill_grace_seconds)))) {
		json_decref(data);
		sched_store_parts_found_free(v, n);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n && !rc; i++) {
		const struct sched_store_part_found *k = &v[i];

		ty_info("job %lld: node '%s' runs attempt %lld, which is %s: killing it",
			(long long)k->job, k->node, (long long)k->attempt,
			k->preempted ? "being preempted" : "over");
		if ((rc = sched_outbox_add(s, PROTO_KILL, k->node, k->job, k->attempt,
					   k->preempted ? pdata : data, err)))
			break;
		if (k->allocated)
			rc = sched_store_part_killed(s->term.pg, k->job, k->attempt, k->node, err);
	}
	json_decref(data);
	json_decref(pdata);
	sched_store_parts_found_free(v, n);
	return rc;
}

/*
 * A killed attempt's part on a node that has heartbeated since the kill and
 * neither runs it nor finished it: the node never got the launch. Its GPUs
 * are free.
 */
static int release_unstarted(struct sched *s, struct ty_err *err)
{
	struct sched_store_part_found *v = NULL;
	int rc, n = 0;

	if ((rc = sched_store_release_unstarted(&v, &n, s->term.pg, s->o.resend_ms, err)))
		return rc;
	for (int i = 0; i < n && !rc; i++) {
		ty_info("job %lld: node '%s' never ran attempt %lld: its GPUs are free",
			(long long)v[i].job, v[i].node, (long long)v[i].attempt);
		s->clock.capacity_freed = true;
		sched_touch(&s->world, v[i].job);
		rc = sched_settle_attempt(s, v[i].job, v[i].attempt, err);
	}
	sched_store_parts_found_free(v, n);
	return rc;
}

int sched_reconcile(struct sched *s, struct ty_err *err)
{
	int rc;

	if ((rc = sched_tx_begin(&s->term, err)))
		return rc;
	/* an exit event gets one reconcile period to arrive before the heartbeat's word is taken */
	if ((rc = sched_apply_late_exits(s, s->o.reconcile_ms, err)) ||
	    (rc = resend_launches(s, err)) || (rc = resend_kills(s, err)) ||
	    (rc = release_unstarted(s, err))) {
		ty_pg_rollback(s->term.pg);
		return rc;
	}
	return sched_tx_commit(&s->term, err);
}
