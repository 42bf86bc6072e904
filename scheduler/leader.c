/* Leadership: the advisory lock, the epoch of each term, fenced transactions. */
#include "scheduler.h"
#include "migrations.h"
#include "ty_log.h"

#include <stdlib.h>
#include <string.h>

int sched_tx_fence(struct ty_pg *pg, int64_t epoch, struct ty_err *err)
{
	int64_t current = 0;
	int rc;

	if ((rc = ty_pg_begin(pg, err)))
		return rc;
	if ((rc = sched_store_term_epoch(&current, pg, err)))
		goto fail;
	if (current != epoch) {
		rc = ty_err_set(err, TY_EFENCED, "leader epoch is %lld, this term's is %lld",
				(long long)current, (long long)epoch);
		goto fail;
	}
	return 0;
fail:
	ty_pg_rollback(pg);
	return rc;
}

int sched_tx_begin(struct sched_term *t, struct ty_err *err)
{
	sched_store_reset(&t->store);
	return sched_tx_fence(t->pg, t->epoch, err);
}

int sched_epoch_bump(int64_t *epoch, struct ty_pg *pg, const char *holder, struct ty_err *err)
{
	int rc;

	*epoch = 0;
	if ((rc = ty_pg_begin(pg, err)))
		return rc;
	if ((rc = sched_store_term_bump(epoch, pg, holder, err)) ||
	    (rc = ty_pg_commit(pg, err))) {
		ty_pg_rollback(pg);
		*epoch = 0;
		return rc;
	}
	return 0;
}

/* A standby reads nothing from its work connection: it must not collect notifications. */
static void unlisten(struct sched *s)
{
	struct ty_err err = {0};

	if (s->term.listen_pid && !ty_pg_in_tx(s->term.pg) &&
	    ty_pg_exec(NULL, s->term.pg, "UNLISTEN *", 0, NULL, &err))
		ty_debug("cannot stop listening: %s", err.msg);
	s->term.listen_pid = 0;
	s->clock.jobs_changed = false;
	s->world.queued.n = 0;
	sched_queue_clear(&s->world);
	sched_store_free(&s->term.store);
}

static void unlock(struct sched *s)
{
	struct ty_err err = {0};

	if (sched_store_lock_release(s->term.lock_pg, &err))
		ty_warn("cannot release the leader lock: %s", err.msg);
}

bool sched_lock_held(struct sched *s)
{
	struct ty_err err = {0};
	bool held = false;

	/* a lost connection took the session lock with it: no reconnect here */
	if (PQstatus(ty_pg_conn(s->term.lock_pg)) != CONNECTION_OK)
		return false;
	if (sched_store_lock_held(&held, s->term.lock_pg, &err)) {
		ty_warn("cannot check the leader lock: %s", err.msg);
		return false;
	}
	return held;
}

int sched_lead_try(bool *won, struct sched *s, struct ty_err *err)
{
	bool got = false;
	int rc;

	*won = false;
	if ((rc = sched_store_lock_try(&got, s->term.lock_pg, err)))
		return rc;
	if (!got)
		return 0;
	if ((rc = ty_schema_check(s->term.pg, "scheduler", err)) ||
	    (rc = sched_epoch_bump(&s->term.epoch, s->term.pg, s->o.id, err)) ||
	    (rc = sched_rates_publish(&s->term, &s->o.rates, err))) {
		unlock(s);
		return rc;
	}
	ty_info("leading as '%s' with epoch %lld", s->o.id, (long long)s->term.epoch);
	if ((rc = sched_kafka_start(s, err))) {
		unlock(s);
		s->term.epoch = 0;
		return rc;
	}
	s->term.leading = true;
	s->bus.down = false;
	s->bus.back = 0;
	s->bus.ok = 0;
	s->clock.capacity_freed = true;
	s->bus.outbox_dirty = true;
	s->world.queue_stale = true; /* the mirror is read whole at the first cycle */
	sched_mirror_stale(&s->world.mirror, "new term");
	s->clock.next_cycle = s->clock.next_reconcile = s->clock.next_liveness =
	    s->clock.next_relay = 0;
	*won = true;
	return 0;
}

void sched_step_down(struct sched *s, const char *why)
{
	if (!s->term.leading)
		return;
	ty_warn("no longer leading (epoch %lld): %s", (long long)s->term.epoch, why);
	/* rows in flight stay in the outbox: the next leader produces them again */
	sched_kafka_stop(s, 0);
	if (ty_pg_in_tx(s->term.pg))
		ty_pg_rollback(s->term.pg);
	unlisten(s);
	unlock(s);
	s->term.leading = false;
	s->term.epoch = 0;
}

void sched_resign(struct sched *s, int flush_ms)
{
	struct ty_err err = {0};

	if (!s->term.leading)
		return;
	if (s->bus.producer)
		rd_kafka_flush(s->bus.producer, flush_ms);
	if (sched_relay_settle(s, &err))
		ty_warn(
		    "cannot delete delivered outbox rows (the next leader sends them again): %s",
		    err.msg);
	sched_kafka_stop(s, 0);
	if (ty_pg_in_tx(s->term.pg))
		ty_pg_rollback(s->term.pg);
	unlisten(s);
	unlock(s);
	ty_info("resigned the lead (epoch %lld)", (long long)s->term.epoch);
	s->term.leading = false;
	s->term.epoch = 0;
}
