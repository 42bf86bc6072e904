/*
 * The scheduler's one loop: stand by until the lock is ours, then per turn
 * consume and apply events, settle deliveries, and run the timers (liveness,
 * placement cycle, reconciliation, relay). A fenced write ends the term.
 */
#include "notify.h"
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define STANDBY_TRY_MS 500
#define TURN_WAIT_MAX_MS 100
#define LAG_DRAIN_MS 500 /* at most this long applying a backlog before a cycle */
#define RELAY_EVERY_MS 1000
#define ERROR_BACKOFF_MS 200
#define SHUTDOWN_FLUSH_MS 5000
/*
 * Least time between the starts of cycles a change triggers: four times
 * the last cycle's length, within these bounds, so that a burst of
 * submissions is one cycle and cycles take at most a fifth of the loop,
 * while on a quiet cluster a job submitted just after a cycle is not held
 * back for long (a fixed 50 ms was most of an idle stack's submit ->
 * scheduled time: the previous job's end had just triggered a cycle).
 */
#define CYCLE_GAP_MIN_MS 5
#define CYCLE_GAP_MAX_MS 50

const char *sched_i64(char *buf, int64_t v)
{
	snprintf(buf, 24, "%lld", (long long)v);
	return buf;
}

/* Sleeps up to ms; a signal ends it early. */
static void nap(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

void sched_notice_jobs(struct sched *s)
{
	PGconn *conn = ty_pg_conn(s->term.pg);
	struct ty_err err = {0};
	PGnotify *n;
	int pid;

	if (!conn || PQstatus(conn) != CONNECTION_OK || ty_pg_in_tx(s->term.pg))
		return;
	pid = PQbackendPID(conn);
	if (pid != s->term.listen_pid) {
		/* a new session (first turn, or ty_pg reconnected): listen again, and since
		 * notifications may have been missed meanwhile, look once now */
		if (ty_pg_exec(NULL, s->term.pg, "LISTEN " PROTO_NOTIFY_CHANNEL, 0, NULL, &err)) {
			ty_warn("cannot listen for job events (cycles run every %d ms): %s",
				s->o.cycle_ms, err.msg);
			return;
		}
		s->term.listen_pid = PQbackendPID(ty_pg_conn(s->term.pg));
		s->clock.jobs_changed = true;
		s->clock.what_if = true; /* requests may have been asked meanwhile */
		s->world.queue_stale = true;
		sched_mirror_stale(&s->world.mirror, "new session");
		conn = ty_pg_conn(s->term.pg);
	}
	PQconsumeInput(conn);
	while ((n = PQnotifies(conn))) {
		/* our own events touched their jobs when written (sched_job_event) */
		if (n->be_pid != s->term.listen_pid) {
			char *end;
			long long job = strtoll(n->extra, &end, 10);

			s->clock.jobs_changed = true;
			if (end != n->extra && !*end && job > 0)
				sched_touch(&s->world, job);
			else if (!strncmp(n->extra, PROTO_NOTIFY_NODE, strlen(PROTO_NOTIFY_NODE)) &&
				 n->extra[strlen(PROTO_NOTIFY_NODE)]) {
				/* the API drained or undrained a node */
				sched_mirror_touch_node(&s->world.mirror,
							n->extra + strlen(PROTO_NOTIFY_NODE));
				s->clock.capacity_freed = true;
			} else if (!strncmp(n->extra, PROTO_NOTIFY_WHAT_IF,
					    strlen(PROTO_NOTIFY_WHAT_IF))) {
				s->clock.what_if = true; /* answered by the next estimate */
			} else if (!strncmp(n->extra, PROTO_NOTIFY_WHAT_IF_ANSWER,
					    strlen(PROTO_NOTIFY_WHAT_IF_ANSWER))) {
				/* another scheduler's answer (one that led before us) */
			} else {
				s->world.queue_stale = true; /* a payload we do not understand */
				sched_mirror_stale(&s->world.mirror, "notification not understood");
			}
		}
		PQfreemem(n);
	}
}

static int lead_turn(struct sched *s, struct ty_err *err)
{
	int64_t now = ty_mono_ms(), next;
	int wait, rc;

	/* notifications libpq read along with the last turn's results: before any wait */
	sched_notice_jobs(s);
	next = min64(min64(s->clock.next_cycle, s->clock.next_reconcile),
		     min64(s->clock.next_liveness, s->clock.next_relay));
	wait = (int)(next > now ? min64(next - now, TURN_WAIT_MAX_MS) : 0);
	if ((s->clock.capacity_freed || s->clock.jobs_changed) &&
	    wait > s->clock.last_cycle + s->clock.cycle_gap - now)
		wait = (int)(s->clock.last_cycle + s->clock.cycle_gap > now
				 ? s->clock.last_cycle + s->clock.cycle_gap - now
				 : 0);
	if (s->bus.outbox_dirty || s->bus.delivered.n > 0)
		wait = 0;
	sched_consume(s, wait);
	if ((rc = sched_consume_apply(s, err)) || (rc = sched_relay_settle(s, err)))
		return rc;
	/*
	 * A lagging consumer drains for a while before the next cycle: a
	 * cycle at scale takes hundreds of milliseconds, and one batch per
	 * cycle let exits wait until their launches were sent again.
	 */
	for (int64_t until = ty_mono_ms() + LAG_DRAIN_MS; s->in.lagging && ty_mono_ms() < until;) {
		sched_consume(s, 0);
		if ((rc = sched_consume_apply(s, err)))
			return rc;
	}

	now = ty_mono_ms();
	/* a lagging consumer has heartbeats still unread: judge no one by them */
	if (now >= s->clock.next_liveness && !s->in.lagging) {
		s->clock.next_liveness = now + min64(500, s->o.node_timeout_ms / 4);
		if ((rc = sched_liveness(s, err)))
			return rc;
	}
	sched_notice_jobs(s);
	/* on change, but at most every cycle_gap: a burst of submissions is one cycle */
	if (((s->clock.capacity_freed || s->clock.jobs_changed) &&
	     now >= s->clock.last_cycle + s->clock.cycle_gap) ||
	    now >= s->clock.next_cycle) {
		s->clock.capacity_freed = s->clock.jobs_changed = false;
		s->clock.last_cycle = now;
		s->clock.next_cycle = now + s->o.cycle_ms;
		rc = sched_cycle(s, err);
		s->clock.cycle_gap =
		    min64(max64(4 * (ty_mono_ms() - now), CYCLE_GAP_MIN_MS), CYCLE_GAP_MAX_MS);
		if (rc) {
			sched_metrics_cycle_failed(s);
			return rc;
		}
	}
	if (now >= s->clock.next_reconcile) {
		s->clock.next_reconcile = now + s->o.reconcile_ms;
		if (!sched_lock_held(s))
			return ty_err_set(err, TY_EFENCED, "the leader lock was lost");
		struct ty_err kerr = {0};

		/* new partitions can wait for the next pass; the database cannot */
		if (sched_kafka_refresh(s, &kerr))
			ty_warn("%s", kerr.msg);
		sched_metrics_kafka(s);
		if (sched_conditions_metrics(s, &kerr))
			ty_warn("cannot count the node conditions for /metrics: %s", kerr.msg);
		if ((rc = sched_reconcile(s, err)))
			return rc;
	}
	if (s->bus.outbox_dirty || now >= s->clock.next_relay) {
		s->bus.outbox_dirty = false;
		s->clock.next_relay = now + RELAY_EVERY_MS;
		if ((rc = sched_relay(&s->bus, s->term.pg, s->o.dispatch_key, s->metrics, err)))
			return rc;
	}
	return 0;
}

static int connect_all(struct sched *s, volatile sig_atomic_t *stop)
{
	bool warned = false;

	while (!*stop) {
		struct ty_err err = {0};

		if ((s->term.pg || !ty_pg_connect(&s->term.pg, s->o.database_url, &err)) &&
		    (s->term.lock_pg || !ty_pg_connect(&s->term.lock_pg, s->o.database_url, &err)))
			return 0;
		if (!warned)
			ty_warn("%s (retrying)", err.msg);
		warned = true;
		nap(1000);
	}
	return TY_EUNAVAIL;
}

int sched_run(struct sched *s, volatile sig_atomic_t *stop, struct ty_err *err)
{
	int64_t last_warn = 0;
	char last_refusal[TY_ERR_MSG_MAX] = "";

	if (connect_all(s, stop))
		goto out;
	ty_info("standing by as '%s'", s->o.id);
	while (!*stop) {
		struct ty_err e = {0};
		int rc;

		sched_metrics_role(s);
		if (!s->term.leading) {
			bool won = false;

			/* a new reason (the schema moved on) is told at once, the same one every 10 s */
			if (sched_lead_try(&won, s, &e) &&
			    (strcmp(e.msg, last_refusal) || ty_mono_ms() - last_warn > 10000)) {
				ty_warn("cannot take the lead: %s", e.msg);
				snprintf(last_refusal, sizeof(last_refusal), "%s", e.msg);
				last_warn = ty_mono_ms();
			}
			if (!won)
				nap(STANDBY_TRY_MS);
			continue;
		}
		rc = lead_turn(s, &e);
		if (rc) /* whatever it was: read it all again */
			sched_mirror_stale(&s->world.mirror, "a turn failed");
		if (rc == TY_EFENCED) {
			sched_step_down(s, e.msg);
		} else if (rc) {
			if (ty_mono_ms() - last_warn > 1000) {
				ty_warn("%s", e.msg);
				last_warn = ty_mono_ms();
			}
			nap(ERROR_BACKOFF_MS);
		}
	}
	ty_info("stopping");
	sched_resign(s, SHUTDOWN_FLUSH_MS);
out:
	sched_kafka_stop(s, 0);
	sched_ids_free(&s->bus.inflight);
	sched_ids_free(&s->bus.delivered);
	sched_ids_free(&s->world.queued);
	sched_estimator_free(s->world.est);
	s->world.est = NULL;
	sched_queue_clear(&s->world);
	sched_store_free(&s->term.store);
	ty_pg_close(s->term.pg);
	ty_pg_close(s->term.lock_pg);
	s->term.pg = s->term.lock_pg = NULL;
	(void)err;
	return 0;
}
