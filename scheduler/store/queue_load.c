/*
 * The pending-job mirror's rows (queue.c): every pending job's scheduling
 * inputs, or those of a set of jobs whatever their state; and the open
 * what-if requests (what_if.c) read by the same statement, so a spec means
 * the same to both.
 */
#include "job_spec.h"
#include "lifecycle.h"
#include "notify.h"
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The one statement both reloads use. $1..$10 are the defaults of the spec
 * fields it reads (queue_defaults: a spec stored before a field existed
 * lacks it); the reload of some jobs adds their ids as $11.
 */
#define QUEUE_SELECT_COLS                                                                          \
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
	" coalesce((j.spec->'resources'->>'memory_mb_per_node')::bigint, $10),"                   \
	/* the last attempt's failure class: an infrastructure one expedites the requeue */      \
	" (SELECT t.failure_class FROM attempts t WHERE t.job_id = j.id AND t.attempt = j.attempt)," \
	/* what its expedited requeue holds (store.h), and from when its window runs */           \
	" " SCHED_STORE_HOLD_NODES ","                                                \
	" (SELECT (extract(epoch FROM greatest(t.ended_at, j.not_before)) * 1000)::bigint"         \
	"  FROM attempts t WHERE t.job_id = j.id AND t.attempt = j.attempt)"                       \
	" FROM "
#define QUEUE_SELECT QUEUE_SELECT_COLS "jobs j"

static const char SQL_PENDING[] =
    QUEUE_SELECT " WHERE j.state = 'pending' AND NOT j.cancel_requested ORDER BY j.id";
static const char SQL_OF[] = QUEUE_SELECT " WHERE j.id = ANY ($11::bigint[])";
/*
 * A what-if request as a job that never ran: its id negated, so the
 * statement's look at attempts and allocations finds nothing of a real job.
 */
#define WHAT_IF_AS_JOBS                                                                            \
	"(SELECT -w.id AS id, w.team_id, w.priority_class, w.priority, w.created_at, w.spec,"     \
	" NULL::text AS pending_reason, NULL::integer AS queue_position,"                        \
	" NULL::timestamptz AS reserved_until, 0 AS attempt, 'pending'::text AS state,"          \
	" false AS cancel_requested, NULL::timestamptz AS not_before,"                           \
	" '{}'::text[] AS excluded_nodes, 0 AS spot_preemptions, NULL::bigint AS sweep_id"      \
	" FROM what_if_requests w WHERE w.answered_at IS NULL ORDER BY w.id LIMIT $11) j"
/* oldest first: the ids are negated */
static const char SQL_WHAT_IF[] = QUEUE_SELECT_COLS WHAT_IF_AS_JOBS " ORDER BY j.id DESC";
static const char SQL_WHAT_IF_ANSWER[] =
    "WITH u AS (UPDATE what_if_requests SET answer = $2::jsonb, answered_at = now()"
    " WHERE id = $1 AND answered_at IS NULL RETURNING id)"
    " SELECT pg_notify('" PROTO_NOTIFY_CHANNEL "', '" PROTO_NOTIFY_WHAT_IF_ANSWER "' || id) FROM u";
/* rows an API gave up on without deleting (it died waiting) */
static const char SQL_WHAT_IF_PRUNE[] =
    "DELETE FROM what_if_requests WHERE created_at < now() - interval '10 minutes'";

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
	j->expedited = ty_pg_val(res, r, 27) && proto_failure_infrastructure(PQgetvalue(res, r, 27));
	if (j->expedited && ty_pg_val(res, r, 28) && *PQgetvalue(res, r, 28) &&
	    !(j->hold_nodes = strdup(PQgetvalue(res, r, 28))))
		return TY_ENOMEM;
	j->hold_from_ms = ty_pg_val(res, r, 29) ? sched_col_i64(res, r, 29) : 0;
	return 0;
}

void sched_store_qjobs_free(struct sched_qjob *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].reason);
		free(v[i].excluded);
		free(v[i].last_failure);
		free(v[i].hold_nodes);
	}
	free(v);
}

/* The rows of res into a new array, with column 16 (pending, not cancelled) in queued. */
static int rows(struct sched_qjob **out, bool **queued, int *nout, const PGresult *res,
		struct ty_err *err)
{
	int n = PQntuples(res);
	struct sched_qjob *v = calloc((size_t)n + 1, sizeof(*v));

	if (!v || (queued && !(*queued = calloc((size_t)n + 1, sizeof(bool))))) {
		free(v);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < n; r++) {
		if (qjob_read(&v[r], res, r)) {
			sched_store_qjobs_free(v, r + 1);
			if (queued) {
				free(*queued);
				*queued = NULL;
			}
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		if (queued)
			(*queued)[r] = !strcmp(PQgetvalue(res, r, 16), "t");
	}
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_queue_pending(struct sched_qjob **out, int *nout, struct ty_pg *pg,
			      struct ty_err *err)
{
	const char *p[QUEUE_NDEFAULTS];
	char buf[QUEUE_NDEFAULTS][24];
	PGresult *res = NULL;
	int rc;

	*out = NULL;
	*nout = 0;
	queue_defaults(p, buf);
	if ((rc = ty_pg_exec(&res, pg, SQL_PENDING, QUEUE_NDEFAULTS, p, err)))
		return rc;
	rc = rows(out, NULL, nout, res, err);
	PQclear(res);
	return rc;
}

int sched_store_queue_of(struct sched_qjob **out, bool **queued, int *nout, struct ty_pg *pg,
			 const int64_t *jobs, int njobs, struct ty_err *err)
{
	const char *p[QUEUE_NDEFAULTS + 1];
	char buf[QUEUE_NDEFAULTS][24], jb[24];
	struct ty_buf ids = TY_BUF_INIT;
	PGresult *res = NULL;
	int rc = 0;

	*out = NULL;
	*queued = NULL;
	*nout = 0;
	for (int i = 0; i < njobs && !rc; i++)
		rc = sched_store__arr_add(&ids, sched_i64(jb, jobs[i]));
	if (rc || sched_store__arr_end(&ids)) {
		ty_buf_free(&ids);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	queue_defaults(p, buf);
	p[QUEUE_NDEFAULTS] = ids.data;
	rc = ty_pg_exec(&res, pg, SQL_OF, QUEUE_NDEFAULTS + 1, p, err);
	ty_buf_free(&ids);
	if (rc)
		return rc;
	rc = rows(out, queued, nout, res, err);
	PQclear(res);
	return rc;
}

int sched_store_what_if_open(struct sched_qjob **out, int *nout, struct ty_pg *pg, int max,
			     struct ty_err *err)
{
	const char *p[QUEUE_NDEFAULTS + 1];
	char buf[QUEUE_NDEFAULTS][24], mb[24];
	PGresult *res = NULL;
	int rc;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(NULL, pg, SQL_WHAT_IF_PRUNE, 0, NULL, err)))
		return rc;
	queue_defaults(p, buf);
	p[QUEUE_NDEFAULTS] = sched_i64(mb, max);
	if ((rc = ty_pg_exec(&res, pg, SQL_WHAT_IF, QUEUE_NDEFAULTS + 1, p, err)))
		return rc;
	rc = rows(out, NULL, nout, res, err);
	PQclear(res);
	for (int i = 0; !rc && i < *nout; i++)
		(*out)[i].id = -(*out)[i].id; /* the request's id again */
	return rc;
}

int sched_store_what_if_answer(struct ty_pg *pg, int64_t id, const char *answer,
			       struct ty_err *err)
{
	char ib[24];
	const char *p[] = {sched_i64(ib, id), answer};

	return ty_pg_exec(NULL, pg, SQL_WHAT_IF_ANSWER, 2, p, err);
}
