/*
 * Job events: appended to the transaction's buffer, written by one call of
 * ty_job_events() (migrations/0025_job_events_batch.sql) at its commit.
 */
#include "scheduler.h"
#include "ty_log.h"

#include <stdlib.h>

static const char SQL_EVENTS[] =
    "SELECT ty_job_events($1::bigint[], $2::text[], $3::text[], $4::text[], $5::jsonb[])";

int sched_job_event(struct sched *s, int64_t job, const char *type, const char *state,
		    const char *message, const json_t *data, struct ty_err *err)
{
	struct sched_store_events *ev = &s->term.store.ev;
	char jb[24], *d = data ? json_dumps(data, JSON_COMPACT) : NULL;
	struct sched_store_mark m = sched_store_mark(&s->term.store);

	if (data && !d)
		return ty_err_set(err, TY_ENOMEM, NULL);
	if (sched_store__arr_add(&ev->job, sched_i64(jb, job)) ||
	    sched_store__arr_add(&ev->type, type) || sched_store__arr_add(&ev->state, state) ||
	    sched_store__arr_add(&ev->message, message) || sched_store__arr_add(&ev->data, d)) {
		free(d);
		sched_store_rewind(&s->term.store, m);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	free(d);
	ev->n++;
	/* every change of a job's state comes with an event: the queue mirror reads it again */
	sched_touch(&s->world, job);
	ty_info("job %lld: %s", (long long)job, message ? message : "");
	return 0;
}

int sched_store__events_flush(struct sched_term *t, struct ty_err *err)
{
	struct sched_store_events *ev = &t->store.ev;
	int rc;

	if (ev->n == 0)
		return 0;
	if ((rc = sched_store__arr_end(&ev->job)) || (rc = sched_store__arr_end(&ev->type)) ||
	    (rc = sched_store__arr_end(&ev->state)) || (rc = sched_store__arr_end(&ev->message)) ||
	    (rc = sched_store__arr_end(&ev->data)))
		return ty_err_set(err, rc, NULL);
	const char *p[] = {ev->job.data, ev->type.data, ev->state.data, ev->message.data,
			   ev->data.data};

	return ty_pg_exec(NULL, t->pg, SQL_EVENTS, 5, p, err);
}
