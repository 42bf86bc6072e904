/*
 * The pending-job mirror: every pending job's scheduling inputs and what
 * was last published for it, kept in memory across cycles. It is loaded
 * whole at the start of a term (and every QUEUE_RELOAD_MS as a safety
 * net); in between only jobs known to have changed are read again: those
 * another session wrote a job event for (NOTIFY trainyard_job_events,
 * whose payload is the job id, delivered only after the commit) and those
 * this scheduler touched itself (every job event it writes, every
 * allocation it releases). A job's inputs (spec, team, class, priority,
 * submit time) never change while it is pending; what does — its state,
 * cancel_requested, whether an earlier attempt still holds GPUs — always
 * comes with one of those.
 */
#include "scheduler.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_RELOAD_MS 60000 /* full reload, in case a change slipped by */
#define TOUCHED_MAX 20000     /* beyond this many changed jobs a full reload is cheaper */

void sched_touch(struct sched_world *w, int64_t job)
{
	struct sched_ids *t = &w->touched;

	sched_mirror_touch_job(&w->mirror, job); /* its allocations and attempts too */
	if (w->queue_stale)
		return;
	if (t->n == TOUCHED_MAX) {
		w->queue_stale = true;
		t->n = 0;
		return;
	}
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 256;
		int64_t *v = realloc(t->v, (size_t)cap * sizeof(*v));

		if (!v) {
			w->queue_stale = true; /* read everything again rather than miss one */
			t->n = 0;
			return;
		}
		t->v = v;
		t->cap = cap;
	}
	t->v[t->n++] = job;
}

static void qjob_clear(struct sched_qjob *j)
{
	free(j->reason);
	free(j->excluded);
	free(j->last_failure);
	free(j->hold_nodes);
	j->reason = j->excluded = j->last_failure = j->hold_nodes = NULL;
}

void sched_queue_clear(struct sched_world *w)
{
	for (int i = 0; i < w->queue.n; i++)
		qjob_clear(&w->queue.v[i]);
	free(w->queue.v);
	memset(&w->queue, 0, sizeof(w->queue));
	sched_ids_free(&w->touched);
	w->queue_stale = true;
	sched_mirror_clear(&w->mirror);
}

static int find(const struct sched_qjob *v, int n, int64_t job)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (v[mid].id < job)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo].id == job ? lo : -1;
}

int sched_queue_find(const struct sched_queue *q, int64_t job)
{
	return find(q->v, q->n, job);
}

int sched_queue_set_reason(struct sched_queue *q, int i, const char *reason, int position,
			   int64_t reserved_ms, int64_t written_ms)
{
	struct sched_qjob *j = &q->v[i];
	char *r = reason ? strdup(reason) : NULL;

	if (reason && !r)
		return TY_ENOMEM;
	free(j->reason);
	j->reason = r;
	j->position = position;
	j->reserved_ms = reserved_ms;
	j->written_ms = written_ms;
	return 0;
}

/* Keep what was written for a job read again, while jobs holds the same text. */
static void keep_written(struct sched_qjob *now, const struct sched_qjob *was)
{
	if (now->reason && was->reason && !strcmp(now->reason, was->reason))
		now->written_ms = was->written_ms;
}

static int cmp_qjob(const void *a, const void *b)
{
	int64_t x = ((const struct sched_qjob *)a)->id, y = ((const struct sched_qjob *)b)->id;

	return (x > y) - (x < y);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static int reserve(struct sched_queue *q, int n)
{
	struct sched_qjob *v;
	int cap = q->cap ? q->cap : 256;

	if (n <= q->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	if (!(v = realloc(q->v, (size_t)cap * sizeof(*v))))
		return TY_ENOMEM;
	q->v = v;
	q->cap = cap;
	return 0;
}

static int reload_all(struct sched_world *w, struct ty_pg *pg, struct ty_err *err)
{
	struct sched_queue q = {0};
	int rc;

	if ((rc = sched_store_queue_pending(&q.v, &q.n, pg, err)))
		return rc;
	q.cap = q.n + 1;
	for (int i = 0, k = 0; i < q.n && k < w->queue.n;) {
		if (q.v[i].id == w->queue.v[k].id)
			keep_written(&q.v[i++], &w->queue.v[k++]);
		else if (q.v[i].id < w->queue.v[k].id)
			i++;
		else
			k++;
	}
	for (int i = 0; i < w->queue.n; i++)
		qjob_clear(&w->queue.v[i]);
	free(w->queue.v);
	w->queue = q;
	return 0;
}

/* Read the touched jobs again: update, add or drop each. */
static int reload_touched(struct sched_world *w, struct ty_pg *pg, struct ty_err *err)
{
	struct sched_ids *t = &w->touched;
	struct sched_qjob *got = NULL;
	bool *queued = NULL, drop = false, unsorted = false;
	int rc, k = 0, n0, ngot = 0;

	qsort(t->v, (size_t)t->n, sizeof(int64_t), cmp_i64);
	for (int i = 0; i < t->n; i++)
		if (i == 0 || t->v[i] != t->v[i - 1])
			t->v[k++] = t->v[i];
	t->n = k;
	if ((rc = sched_store_queue_of(&got, &queued, &ngot, pg, t->v, t->n, err)))
		return rc;
	if (reserve(&w->queue, w->queue.n + ngot)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	n0 = w->queue.n; /* the sorted part: rows appended below are not searched */
	for (int r = 0; r < ngot; r++) {
		int at = find(w->queue.v, n0, got[r].id);

		if (at >= 0 && !queued[r]) {
			w->queue.v[at].gone = true; /* compacted below */
			drop = true;
			continue;
		}
		if (at >= 0) {
			struct sched_qjob was = w->queue.v[at];

			w->queue.v[at] = got[r];
			keep_written(&w->queue.v[at], &was);
			qjob_clear(&was);
		} else if (queued[r]) {
			w->queue.v[w->queue.n++] = got[r];
			unsorted = true;
		} else {
			continue;
		}
		memset(&got[r], 0, sizeof(got[r])); /* moved into the queue */
	}
	if (drop) {
		int n = 0;

		for (int i = 0; i < w->queue.n; i++) {
			if (w->queue.v[i].gone)
				qjob_clear(&w->queue.v[i]);
			else
				w->queue.v[n++] = w->queue.v[i];
		}
		w->queue.n = n;
	}
	if (unsorted)
		qsort(w->queue.v, (size_t)w->queue.n, sizeof(*w->queue.v), cmp_qjob);
out:
	sched_store_qjobs_free(got, ngot);
	free(queued);
	return rc;
}

int sched_queue_refresh(struct sched_world *w, struct ty_pg *pg, struct ty_err *err)
{
	int64_t now = ty_mono_ms();
	int rc;

	if (w->queue_stale || now >= w->queue_loaded + QUEUE_RELOAD_MS) {
		/* what is touched from here on is read again next time */
		w->touched.n = 0;
		if ((rc = reload_all(w, pg, err)))
			return rc;
		w->queue_stale = false;
		w->queue_loaded = now;
		ty_debug("queue: %d pending job(s) loaded", w->queue.n);
		return 0;
	}
	if (w->touched.n == 0)
		return 0;
	if ((rc = reload_touched(w, pg, err))) {
		w->queue_stale = true;
		w->touched.n = 0;
		return rc;
	}
	w->touched.n = 0;
	return 0;
}
