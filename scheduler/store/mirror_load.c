/*
 * The cluster mirror's rows (mirror.c): teams with their team_usage row and
 * the table's fingerprint, nodes, live allocations with their attempt's and
 * job's scheduling fields, rendezvous ports held; all, or those of a set.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_NODES[] =
    "SELECT id, address, gpus, state = 'ready' AND fault IS NULL, labels->>'zone',"
    " labels->>'rack', labels->>'block', state <> 'lost', state = 'preempting',"
    " coalesce(labels->>'pool' = 'spot', false), coalesce(cpus, 0),"
    " coalesce(memory_mb, 0), fault IS NOT NULL FROM nodes WHERE state <> 'lost'";
static const char SQL_NODES_OF[] =
    "SELECT id, address, gpus, state = 'ready' AND fault IS NULL, labels->>'zone',"
    " labels->>'rack', labels->>'block', state <> 'lost', state = 'preempting',"
    " coalesce(labels->>'pool' = 'spot', false), coalesce(cpus, 0),"
    " coalesce(memory_mb, 0), fault IS NOT NULL FROM nodes WHERE id = ANY ($1::text[])";

#define ALLOC_SELECT                                                                               \
	"SELECT a.job_id, a.attempt, a.node_id, array_to_string(a.gpus, ','),"                     \
	" j.team_id, j.priority_class, j.priority,"                                                \
	" (extract(epoch FROM t.created_at) * 1000)::bigint,"                                      \
	" coalesce((j.spec->>'min_runtime_seconds')::bigint, 0),"                                  \
	" coalesce((j.spec->>'max_runtime_seconds')::bigint, 86400),"                              \
	" coalesce((j.spec->>'preemptible')::boolean, true),"                                      \
	" NOT (t.state IN ('scheduled', 'starting', 'running')"                                    \
	"  AND j.attempt = t.attempt AND NOT j.cancel_requested"                                   \
	"  AND j.state IN ('scheduled', 'starting', 'running')),"                                  \
	" coalesce(t.preempted_for, 0), a.node_rank,"                                              \
	" coalesce((j.spec->'resources'->>'cpus_per_node')::bigint, 1),"                           \
	" coalesce((j.spec->'resources'->>'memory_mb_per_node')::bigint, 1024),"                   \
	" coalesce((extract(epoch FROM t.last_checkpoint_at) * 1000)::bigint, 0)"                  \
	" FROM allocations a JOIN attempts t USING (job_id, attempt)"                              \
	" JOIN jobs j ON j.id = a.job_id WHERE a.released_at IS NULL"
static const char SQL_ALLOCS[] = ALLOC_SELECT;
static const char SQL_ALLOCS_OF[] = ALLOC_SELECT " AND a.job_id = ANY ($1::bigint[])";

/* ports of live attempts, and of ended ones whose rank 0 may still hold it */
#define PORT_SELECT                                                                                \
	"SELECT t.job_id, t.attempt, coalesce(t.master_node, ''), coalesce(t.master_port, 0)"     \
	" FROM attempts t WHERE (t.ended_at IS NULL OR EXISTS (SELECT 1 FROM allocations a"        \
	" WHERE a.job_id = t.job_id AND a.attempt = t.attempt"                                     \
	" AND a.node_id = t.master_node AND a.released_at IS NULL))"
static const char SQL_PORTS[] = PORT_SELECT;
static const char SQL_PORTS_OF[] = PORT_SELECT " AND t.job_id = ANY ($1::bigint[])";

static const char SQL_TEAMS[] =
    "SELECT t.id, t.name, t.nominal_gpus,"
    " coalesce(t.borrowing_limit_gpus, -1),"
    " coalesce(t.lending_limit_gpus, -1), t.cohort, t.weight,"
    " u.team_id IS NOT NULL, coalesce(u.decayed_gpu_seconds, 0),"
    " (extract(epoch FROM coalesce(u.updated_at, t.created_at)) * 1000)::bigint,"
    " coalesce(u.fair_share, 1), coalesce(u.gpus_in_use, 0),"
    " coalesce(u.gpus_borrowed, 0), coalesce(u.gpus_lent, 0),"
    " coalesce(u.pending_jobs, 0), coalesce(t.max_cpus, 0), coalesce(t.max_memory_mb, 0)"
    " FROM teams t LEFT JOIN team_usage u ON u.team_id = t.id ORDER BY t.id";

/*
 * A fingerprint of every team row, computed by the server (one row back).
 * Not max(updated_at): updated_at is the writing transaction's start, so a
 * PATCH that started before and committed after the last read would not
 * move it.
 */
static const char SQL_TEAM_MARK[] =
    "SELECT count(*), coalesce(sum(hashtext(t::text)), 0) FROM teams t";

static char *dup_or_null(const PGresult *res, int r, int c, bool *oom)
{
	const char *v = ty_pg_val(res, r, c);
	char *d;

	if (!v)
		return NULL;
	if (!(d = strdup(v)))
		*oom = true;
	return d;
}

static bool col_true(const PGresult *res, int r, int c)
{
	return !strcmp(PQgetvalue(res, r, c), "t");
}

static uint64_t gpu_mask(const char *list)
{
	uint64_t m = 0;

	while (list && *list) {
		char *end;
		long g = strtol(list, &end, 10);

		if (end == list)
			break;
		if (g >= 0 && g < 64)
			m |= (uint64_t)1 << g;
		list = *end == ',' ? end + 1 : end;
	}
	return m;
}

/* The literal of ids (a text[] or, quoted numbers, a bigint[]); 0 or TY_ENOMEM. */
static int ids_text(struct ty_buf *b, const char *const *ids, int n)
{
	int rc = 0;

	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_add(b, ids[i]);
	return rc ? rc : sched_store__arr_end(b);
}

static int ids_i64(struct ty_buf *b, const int64_t *ids, int n)
{
	char buf[24];
	int rc = 0;

	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_add(b, sched_i64(buf, ids[i]));
	return rc ? rc : sched_store__arr_end(b);
}

int sched_store_team_mark(char *buf, size_t n, struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, SQL_TEAM_MARK, 0, NULL, err)))
		return rc;
	snprintf(buf, n, "%s|%s", PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1));
	PQclear(res);
	return 0;
}

int sched_store_mirror_teams(struct sched_mteam **out, int *nout, struct ty_pg *pg,
			     struct ty_err *err)
{
	PGresult *res = NULL;
	struct sched_mteam *v;
	bool oom = false;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_TEAMS, 0, NULL, err)))
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		struct sched_mteam *t = &v[i];

		t->id = sched_col_i64(res, i, 0);
		if (!(t->name = dup_or_null(res, i, 1, &oom)))
			oom = true;
		t->nominal = sched_col_i64(res, i, 2);
		t->borrowing_limit = sched_col_i64(res, i, 3);
		t->lending_limit = sched_col_i64(res, i, 4);
		t->cohort = dup_or_null(res, i, 5, &oom);
		t->weight = strtod(PQgetvalue(res, i, 6), NULL);
		t->have_row = col_true(res, i, 7);
		t->decayed = strtod(PQgetvalue(res, i, 8), NULL);
		t->since_ms = sched_col_i64(res, i, 9);
		t->fair_share = strtod(PQgetvalue(res, i, 10), NULL);
		t->used = sched_col_i64(res, i, 11);
		t->borrowed = sched_col_i64(res, i, 12);
		t->lent = sched_col_i64(res, i, 13);
		t->pending = sched_col_i64(res, i, 14);
		t->max_cpus = sched_col_i64(res, i, 15);
		t->max_memory_mb = sched_col_i64(res, i, 16);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return oom ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
}

int sched_store_mirror_nodes(struct sched_mnode **out, bool **present, int *nout,
			     struct ty_pg *pg, const char *const *ids, int nids,
			     struct ty_err *err)
{
	struct ty_buf lit = TY_BUF_INIT;
	PGresult *res = NULL;
	struct sched_mnode *v;
	bool oom = false;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if (present)
		*present = NULL;
	if (ids) {
		if (ids_text(&lit, ids, nids)) {
			ty_buf_free(&lit);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		const char *p[] = {lit.data};

		rc = ty_pg_exec(&res, pg, SQL_NODES_OF, 1, p, err);
	} else {
		rc = ty_pg_exec(&res, pg, SQL_NODES, 0, NULL, err);
	}
	ty_buf_free(&lit);
	if (rc)
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v))) ||
	    (present && !(*present = calloc((size_t)n + 1, sizeof(bool))))) {
		free(v);
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < n; r++) {
		struct sched_mnode *nd = &v[r];

		nd->id = dup_or_null(res, r, 0, &oom);
		nd->addr = dup_or_null(res, r, 1, &oom);
		nd->gpus = (int)sched_col_i64(res, r, 2);
		nd->ready = col_true(res, r, 3);
		nd->zone = dup_or_null(res, r, 4, &oom);
		nd->rack = dup_or_null(res, r, 5, &oom);
		nd->block = dup_or_null(res, r, 6, &oom);
		nd->preempting = col_true(res, r, 8);
		nd->spot = col_true(res, r, 9);
		nd->cpus = sched_col_i64(res, r, 10);
		nd->memory_mb = sched_col_i64(res, r, 11);
		nd->fault = col_true(res, r, 12);
		if (present)
			(*present)[r] = col_true(res, r, 7);
		if (!nd->id)
			oom = true;
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return oom ? ty_err_set(err, TY_ENOMEM, NULL) : 0;
}

int sched_store_mirror_allocs(struct sched_malloc **out, int *nout, struct ty_pg *pg,
			      const int64_t *jobs, int njobs, struct ty_err *err)
{
	PGresult *res = NULL;
	struct sched_malloc *v;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if (jobs) {
		struct ty_buf lit = TY_BUF_INIT;

		if (ids_i64(&lit, jobs, njobs)) {
			ty_buf_free(&lit);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		const char *p[] = {lit.data};

		rc = ty_pg_exec(&res, pg, SQL_ALLOCS_OF, 1, p, err);
		ty_buf_free(&lit);
	} else {
		rc = ty_pg_exec(&res, pg, SQL_ALLOCS, 0, NULL, err);
	}
	if (rc)
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < n; r++) {
		struct sched_malloc *a = &v[r];

		a->job = sched_col_i64(res, r, 0);
		a->attempt = sched_col_i64(res, r, 1);
		snprintf(a->node, sizeof(a->node), "%s", PQgetvalue(res, r, 2));
		a->mask = gpu_mask(PQgetvalue(res, r, 3));
		a->team_id = sched_col_i64(res, r, 4);
		snprintf(a->cls, sizeof(a->cls), "%s", PQgetvalue(res, r, 5));
		a->priority = (int)sched_col_i64(res, r, 6);
		a->start_ms = sched_col_i64(res, r, 7);
		a->min_runtime_s = sched_col_i64(res, r, 8);
		a->max_runtime_s = sched_col_i64(res, r, 9);
		a->preemptible = col_true(res, r, 10);
		a->preempting = col_true(res, r, 11);
		a->preempted_for = sched_col_i64(res, r, 12);
		a->node_rank = (int)sched_col_i64(res, r, 13);
		a->cpus_per_node = sched_col_i64(res, r, 14);
		a->memory_mb_per_node = sched_col_i64(res, r, 15);
		a->checkpoint_ms = sched_col_i64(res, r, 16);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_mirror_ports(struct sched_mport **out, int *nout, struct ty_pg *pg,
			     const int64_t *jobs, int njobs, struct ty_err *err)
{
	PGresult *res = NULL;
	struct sched_mport *v;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if (jobs) {
		struct ty_buf lit = TY_BUF_INIT;

		if (ids_i64(&lit, jobs, njobs)) {
			ty_buf_free(&lit);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		const char *p[] = {lit.data};

		rc = ty_pg_exec(&res, pg, SQL_PORTS_OF, 1, p, err);
		ty_buf_free(&lit);
	} else {
		rc = ty_pg_exec(&res, pg, SQL_PORTS, 0, NULL, err);
	}
	if (rc)
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int r = 0; r < n; r++) {
		v[r].job = sched_col_i64(res, r, 0);
		v[r].attempt = sched_col_i64(res, r, 1);
		snprintf(v[r].node, sizeof(v[r].node), "%s", PQgetvalue(res, r, 2));
		v[r].port = (int)sched_col_i64(res, r, 3);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}
