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
#include "job_spec.h"
#include "scheduler.h"
#include "ty_buf.h"
#include "ty_log.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_RELOAD_MS 60000 /* full reload, in case a change slipped by */
#define TOUCHED_MAX 20000     /* beyond this many changed jobs a full reload is cheaper */

/*
 * The one statement both reloads use. $1..$10 are the defaults of the spec
 * fields it reads (queue_defaults: a spec stored before a field existed
 * lacks it); the reload of some jobs adds their ids as $11.
 */
#define QUEUE_SELECT                                                                               \
	"SELECT j.id, j.team_id, j.priority_class, j.priority,"                                    \
	" (extract(epoch FROM j.created_at) * 1000)::bigint,"                                      \
	" coalesce((j.spec->'resources'->>'nodes')::integer, $1),"                                  \
	" coalesce((j.spec->'resources'->>'gpus_per_node')::integer, $2),"                          \
	" coalesce(j.spec->>'launch', $3) = 'per_node',"                                    \
	" j.spec->'topology'->>'required',"                                                        \
	" coalesce((j.spec->>'min_runtime_seconds')::bigint, $4),"                                  \
	" coalesce((j.spec->>'max_runtime_seconds')::bigint, $5),"                              \
	" j.pending_reason, coalesce(j.queue_position, 0),"                                        \
	" coalesce((extract(epoch FROM j.reserved_until) * 1000)::bigint, -1)," /* a retry starts  \
										   once the last   \
										   attempt's ranks \
										   are all gone */ \
	" EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = j.id"                               \
	"  AND a.released_at IS NULL), j.attempt,"                                                 \
	" j.state = 'pending' AND NOT j.cancel_requested,"                                         \
	" coalesce((extract(epoch FROM j.not_before) * 1000)::bigint, 0),"                         \
	" array_to_string(j.excluded_nodes, ','),"                                                 \
	" (SELECT t.failure_class || ' failure' || coalesce(' on ' || t.blamed_node, '')"          \
	"  FROM attempts t WHERE t.job_id = j.id AND t.attempt = j.attempt),"                      \
	/* the spot rule (core/policy.h, enum sched_spot_rule); absent = not allowed */            \
	" CASE WHEN NOT coalesce((j.spec->'spot'->>'allowed')::boolean, $6) THEN 1"             \
	"  WHEN coalesce(j.spec->'spot'->>'fallback', $7) = 'on_demand'"                  \
	"  AND j.spot_preemptions >= coalesce((j.spec->'spot'->>'max_preemptions')::integer, $8)"   \
	"  THEN 2 ELSE 0 END,"                                                                     \
	" j.spot_preemptions, coalesce((j.spec->'spot'->>'max_preemptions')::integer, $8),"        \
	/* a sweep trial: its sweep and the sweep's max_concurrent (0 = none) */                   \
	" coalesce(j.sweep_id, 0),"                                                                \
	" coalesce((SELECT w.max_concurrent FROM sweeps w WHERE w.id = j.sweep_id), 0),"           \
	" coalesce((j.spec->'resources'->>'cpus_per_node')::bigint, $9),"                           \
	" coalesce((j.spec->'resources'->>'memory_mb_per_node')::bigint, $10)"                    \
	" FROM jobs j"

void sched_touch(struct sched *s, int64_t job)
{
	struct sched_ids *t = &s->touched;

	sched_mirror_touch_job(s, job); /* its allocations and attempts too */
	if (s->queue_stale)
		return;
	if (t->n == TOUCHED_MAX) {
		s->queue_stale = true;
		t->n = 0;
		return;
	}
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 256;
		int64_t *v = realloc(t->v, (size_t)cap * sizeof(*v));

		if (!v) {
			s->queue_stale = true; /* read everything again rather than miss one */
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
	j->reason = j->excluded = j->last_failure = NULL;
}

void sched_queue_clear(struct sched *s)
{
	for (int i = 0; i < s->queue.n; i++)
		qjob_clear(&s->queue.v[i]);
	free(s->queue.v);
	memset(&s->queue, 0, sizeof(s->queue));
	sched_ids_free(&s->touched);
	s->queue_stale = true;
	sched_mirror_clear(s);
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

int sched_queue_find(const struct sched *s, int64_t job)
{
	return find(s->queue.v, s->queue.n, job);
}

int sched_queue_set_reason(struct sched *s, int i, const char *reason, int position,
			   int64_t reserved_ms, int64_t written_ms)
{
	struct sched_qjob *j = &s->queue.v[i];
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

/* QUEUE_SELECT's parameters $1..$10, from the job spec table (proto/job_spec.c). */
#define QUEUE_NDEFAULTS 10
static void queue_defaults(const char *p[QUEUE_NDEFAULTS], char buf[QUEUE_NDEFAULTS][24])
{
	static const struct {
		const char *obj, *key;
	} fields[] = {{"resources", "nodes"},	   {"resources", "gpus_per_node"},
		    {NULL, "launch"},		   {NULL, "min_runtime_seconds"},
		    {NULL, "max_runtime_seconds"}, {"spot", "allowed"},
		    {"spot", "fallback"},	   {"spot", "max_preemptions"},
		    {"resources", "cpus_per_node"}, {"resources", "memory_mb_per_node"}};

	for (int i = 0; i < QUEUE_NDEFAULTS; i++) {
		const struct proto_spec_field *f = proto_spec_field(fields[i].obj, fields[i].key);

		if (f->type == PROTO_SPEC_ENUM)
			p[i] = f->sdef;
		else if (f->type == PROTO_SPEC_BOOL)
			p[i] = f->idef ? "true" : "false";
		else
			p[i] = sched_i64(buf[i], f->idef);
	}
}

/* Row r of a QUEUE_SELECT result into j (cleared first). */
static int qjob_read(struct sched_qjob *j, const PGresult *res, int r)
{
	const char *reason = ty_pg_val(res, r, 11);

	memset(j, 0, sizeof(*j));
	j->id = sched_col_i64(res, r, 0);
	j->team_id = sched_col_i64(res, r, 1);
	snprintf(j->cls, sizeof(j->cls), "%s", PQgetvalue(res, r, 2));
	j->priority = (int)sched_col_i64(res, r, 3);
	j->submit_ms = sched_col_i64(res, r, 4);
	j->nodes = (int)sched_col_i64(res, r, 5);
	j->gpus_per_node = (int)sched_col_i64(res, r, 6);
	j->per_node = !strcmp(PQgetvalue(res, r, 7), "t");
	snprintf(j->required, sizeof(j->required), "%s",
		 ty_pg_val(res, r, 8) ? PQgetvalue(res, r, 8) : "");
	j->min_runtime_s = sched_col_i64(res, r, 9);
	j->max_runtime_s = sched_col_i64(res, r, 10);
	j->position = (int)sched_col_i64(res, r, 12);
	j->reserved_ms = sched_col_i64(res, r, 13);
	j->held = !strcmp(PQgetvalue(res, r, 14), "t");
	j->attempt = sched_col_i64(res, r, 15);
	j->not_before_ms = sched_col_i64(res, r, 17);
	if (reason && !(j->reason = strdup(reason)))
		return TY_ENOMEM;
	if (ty_pg_val(res, r, 18) && *PQgetvalue(res, r, 18) &&
	    !(j->excluded = strdup(PQgetvalue(res, r, 18))))
		return TY_ENOMEM;
	if (ty_pg_val(res, r, 19) && !(j->last_failure = strdup(PQgetvalue(res, r, 19))))
		return TY_ENOMEM;
	j->spot_rule = (int)sched_col_i64(res, r, 20);
	j->spot_preemptions = (int)sched_col_i64(res, r, 21);
	j->spot_max = (int)sched_col_i64(res, r, 22);
	j->sweep_id = sched_col_i64(res, r, 23);
	j->sweep_max = (int)sched_col_i64(res, r, 24);
	j->cpus_per_node = sched_col_i64(res, r, 25);
	j->memory_mb_per_node = sched_col_i64(res, r, 26);
	return 0;
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

static int reload_all(struct sched *s, struct ty_err *err)
{
	struct sched_queue q = {0};
	PGresult *res = NULL;
	int rc;

	const char *p[QUEUE_NDEFAULTS];
	char buf[QUEUE_NDEFAULTS][24];

	queue_defaults(p, buf);
	if ((rc = ty_pg_exec(&res, s->pg,
			     QUEUE_SELECT " WHERE j.state = 'pending' AND NOT j.cancel_requested"
					  " ORDER BY j.id",
			     QUEUE_NDEFAULTS, p, err)))
		return rc;
	if (reserve(&q, PQntuples(res))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < PQntuples(res); r++) {
		if (qjob_read(&q.v[q.n], res, r)) {
			q.n++;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		q.n++;
	}
	PQclear(res);
	if (rc) {
		for (int i = 0; i < q.n; i++)
			qjob_clear(&q.v[i]);
		free(q.v);
		return rc;
	}
	for (int i = 0, k = 0; i < q.n && k < s->queue.n;) {
		if (q.v[i].id == s->queue.v[k].id)
			keep_written(&q.v[i++], &s->queue.v[k++]);
		else if (q.v[i].id < s->queue.v[k].id)
			i++;
		else
			k++;
	}
	for (int i = 0; i < s->queue.n; i++)
		qjob_clear(&s->queue.v[i]);
	free(s->queue.v);
	s->queue = q;
	return 0;
}

/* Read the touched jobs again: update, add or drop each. */
static int reload_touched(struct sched *s, struct ty_err *err)
{
	struct sched_ids *t = &s->touched;
	struct ty_buf ids = TY_BUF_INIT;
	PGresult *res = NULL;
	bool drop = false, unsorted = false;
	int rc, k = 0, n0;

	qsort(t->v, (size_t)t->n, sizeof(int64_t), cmp_i64);
	ty_buf_puts(&ids, "{");
	for (int i = 0; i < t->n; i++)
		if (i == 0 || t->v[i] != t->v[i - 1])
			ty_buf_printf(&ids, "%s%lld", k++ ? "," : "", (long long)t->v[i]);
	ty_buf_puts(&ids, "}");
	if (ids.oom) {
		ty_buf_free(&ids);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	const char *p[QUEUE_NDEFAULTS + 1];
	char buf[QUEUE_NDEFAULTS][24];

	queue_defaults(p, buf);
	p[QUEUE_NDEFAULTS] = ids.data;
	rc = ty_pg_exec(&res, s->pg, QUEUE_SELECT " WHERE j.id = ANY ($11::bigint[])",
			QUEUE_NDEFAULTS + 1, p, err);
	ty_buf_free(&ids);
	if (rc)
		return rc;
	if (reserve(&s->queue, s->queue.n + PQntuples(res))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	n0 = s->queue.n; /* the sorted part: rows appended below are not searched */
	for (int r = 0; r < PQntuples(res) && !rc; r++) {
		int64_t id = sched_col_i64(res, r, 0);
		bool queued = !strcmp(PQgetvalue(res, r, 16), "t");
		int at = find(s->queue.v, n0, id);

		if (at >= 0 && !queued) {
			s->queue.v[at].gone = true; /* compacted below */
			drop = true;
		} else if (at >= 0) {
			struct sched_qjob was = s->queue.v[at];

			if (qjob_read(&s->queue.v[at], res, r))
				rc = ty_err_set(err, TY_ENOMEM, NULL);
			keep_written(&s->queue.v[at], &was);
			qjob_clear(&was);
		} else if (queued) {
			if (qjob_read(&s->queue.v[s->queue.n++], res, r))
				rc = ty_err_set(err, TY_ENOMEM, NULL);
			unsorted = true;
		}
	}
	PQclear(res);
	if (drop) {
		int n = 0;

		for (int i = 0; i < s->queue.n; i++) {
			if (s->queue.v[i].gone)
				qjob_clear(&s->queue.v[i]);
			else
				s->queue.v[n++] = s->queue.v[i];
		}
		s->queue.n = n;
	}
	if (unsorted)
		qsort(s->queue.v, (size_t)s->queue.n, sizeof(*s->queue.v), cmp_qjob);
	return rc;
}

int sched_queue_refresh(struct sched *s, struct ty_err *err)
{
	int64_t now = ty_mono_ms();
	int rc;

	if (s->queue_stale || now >= s->queue_loaded + QUEUE_RELOAD_MS) {
		/* what is touched from here on is read again next time */
		s->touched.n = 0;
		if ((rc = reload_all(s, err)))
			return rc;
		s->queue_stale = false;
		s->queue_loaded = now;
		ty_debug("queue: %d pending job(s) loaded", s->queue.n);
		return 0;
	}
	if (s->touched.n == 0)
		return 0;
	if ((rc = reload_touched(s, err))) {
		s->queue_stale = true;
		s->touched.n = 0;
		return rc;
	}
	s->touched.n = 0;
	return 0;
}
