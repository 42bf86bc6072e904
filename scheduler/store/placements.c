/*
 * A cycle's placements written set-based: the placeable jobs locked, the
 * nodes' boots read, attempts and allocations inserted from arrays, one
 * statement each whatever the number of gangs (the jobs' move to scheduled
 * is lifecycle.c's).
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_JOBS_LOCK[] =
    "SELECT j.id, j.attempt, j.spec, j.team_id, t.run_uid, t.name, r.step, r.digest, r.path"
    " FROM jobs j JOIN teams t ON t.id = j.team_id"
    " LEFT JOIN LATERAL (SELECT c.step, c.digest, c.path FROM checkpoints c"
    "  WHERE c.job_id = j.id AND c.status = 'valid' ORDER BY c.step DESC LIMIT 1) r ON true"
    " WHERE j.id = ANY ($1::bigint[])"
    " AND j.state = 'pending' AND NOT j.cancel_requested ORDER BY j.id FOR UPDATE OF j";
static const char SQL_BOOTS[] = "SELECT id, coalesce(boot_id::text, '') FROM nodes"
				" WHERE id = ANY ($1::text[]) ORDER BY id COLLATE \"C\"";
static const char SQL_ATTEMPTS[] =
    "INSERT INTO attempts (job_id, attempt, epoch, master_node, master_addr, master_port,"
    " nnodes, world_size, launch, metrics_token_sha256)"
    " SELECT job, attempt, $3::bigint, master_node, master_addr, master_port, nnodes,"
    " world_size, launch, token FROM unnest($1::bigint[], $2::integer[], $4::text[], $5::text[],"
    " $6::integer[], $7::integer[], $8::integer[], $9::jsonb[], $10::text[])"
    " AS a(job, attempt, master_node, master_addr, master_port, nnodes, world_size, launch,"
    " token)";
static const char SQL_ALLOCS[] =
    "INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank, local_ranks,"
    " gpus)"
    " SELECT job, attempt, node, node_rank, first_rank, local_ranks, gpus::integer[]"
    " FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::integer[], $5::integer[],"
    " $6::integer[], $7::text[])"
    " AS a(job, attempt, node, node_rank, first_rank, local_ranks, gpus)";
/* Array literals of n columns, built together; 0 or TY_ENOMEM. */
static int add_i64(struct ty_buf *b, int64_t v)
{
	char buf[24];

	return sched_store__arr_add(b, sched_i64(buf, v));
}

static int end_all(struct ty_buf *b, int n)
{
	int rc = 0;

	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_end(&b[i]);
	return rc;
}

static void free_all(struct ty_buf *b, int n)
{
	for (int i = 0; i < n; i++)
		ty_buf_free(&b[i]);
}

void sched_store_jobs_free(struct sched_store_job *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].spec);
		free(v[i].team);
		free(v[i].resume_path);
	}
	free(v);
}

void sched_store_boots_free(struct sched_store_boot *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].boot_id);
	}
	free(v);
}

const char *sched_store_boot_of(const struct sched_store_boot *v, int n, const char *node)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2, c = strcmp(v[mid].node, node);

		if (!c)
			return v[mid].boot_id;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int sched_store_jobs_lock(struct sched_store_job **out, int *nout, struct ty_pg *pg,
			  const int64_t *jobs, int n, struct ty_err *err)
{
	struct ty_buf ids = TY_BUF_INIT;
	struct sched_store_job *v = NULL;
	PGresult *res = NULL;
	int rc = 0, rows = 0;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < n && !rc; i++)
		rc = add_i64(&ids, jobs[i]);
	if (rc || (rc = sched_store__arr_end(&ids))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {ids.data};

	if ((rc = ty_pg_exec(&res, pg, SQL_JOBS_LOCK, 1, p, err)))
		goto out;
	rows = PQntuples(res);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++) {
		v[i].job = sched_col_i64(res, i, 0);
		v[i].attempt = sched_col_i64(res, i, 1);
		v[i].team_id = sched_col_i64(res, i, 3);
		v[i].run_uid = PQgetisnull(res, i, 4) ? -1 : sched_col_i64(res, i, 4);
		v[i].resume_step = PQgetisnull(res, i, 6) ? -1 : sched_col_i64(res, i, 6);
		snprintf(v[i].resume_digest, sizeof(v[i].resume_digest), "%s",
			 PQgetvalue(res, i, 7));
		if (!(v[i].spec = strdup(PQgetvalue(res, i, 2))) ||
		    !(v[i].team = strdup(PQgetvalue(res, i, 5))) ||
		    (v[i].resume_step >= 0 && !(v[i].resume_path = strdup(PQgetvalue(res, i, 8))))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = v;
	*nout = rows;
	v = NULL;
out:
	sched_store_jobs_free(v, rows);
	PQclear(res);
	ty_buf_free(&ids);
	return rc;
}

int sched_store_boots(struct sched_store_boot **out, int *nout, struct ty_pg *pg,
		      const char *const *nodes, int n, struct ty_err *err)
{
	struct ty_buf ids = TY_BUF_INIT;
	struct sched_store_boot *v = NULL;
	PGresult *res = NULL;
	int rc = 0, rows = 0;

	*out = NULL;
	*nout = 0;
	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_add(&ids, nodes[i]);
	if (rc || (rc = sched_store__arr_end(&ids))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {ids.data};

	if ((rc = ty_pg_exec(&res, pg, SQL_BOOTS, 1, p, err)))
		goto out;
	rows = PQntuples(res);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++)
		if (!(v[i].node = strdup(PQgetvalue(res, i, 0))) ||
		    !(v[i].boot_id = strdup(PQgetvalue(res, i, 1)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	*out = v;
	*nout = rows;
	v = NULL;
out:
	sched_store_boots_free(v, rows);
	PQclear(res);
	ty_buf_free(&ids);
	return rc;
}

int sched_store_attempts_add(const struct sched_term *t, const struct sched_store_attempt *v, int n,
			     struct ty_err *err)
{
	struct ty_buf b[9] = {0};
	char eb[24];
	int rc = 0;

	if (n == 0)
		return 0;
	for (int i = 0; i < n && !rc; i++)
		rc = add_i64(&b[0], v[i].job) || add_i64(&b[1], v[i].attempt) ||
			     sched_store__arr_add(&b[2], v[i].master_node) ||
			     sched_store__arr_add(&b[3], v[i].master_addr) ||
			     add_i64(&b[4], v[i].master_port) || add_i64(&b[5], v[i].nnodes) ||
			     add_i64(&b[6], v[i].world_size) ||
			     sched_store__arr_add(&b[7], v[i].launch) ||
			     sched_store__arr_add(&b[8], v[i].token_sha256)
			 ? TY_ENOMEM
			 : 0;
	if (rc || end_all(b, 9)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	} else {
		const char *p[] = {b[0].data, b[1].data, sched_i64(eb, t->epoch),
				   b[2].data, b[3].data, b[4].data,
				   b[5].data, b[6].data, b[7].data,
				   b[8].data};

		rc = ty_pg_exec(NULL, t->pg, SQL_ATTEMPTS, 10, p, err);
	}
	free_all(b, 9);
	return rc;
}

int sched_store_allocs_add(struct ty_pg *pg, const struct sched_store_alloc *v, int n,
			   struct ty_err *err)
{
	struct ty_buf b[7] = {0};
	int rc = 0;

	if (n == 0)
		return 0;
	for (int i = 0; i < n && !rc; i++)
		rc = add_i64(&b[0], v[i].job) || add_i64(&b[1], v[i].attempt) ||
			     sched_store__arr_add(&b[2], v[i].node) ||
			     add_i64(&b[3], v[i].node_rank) || add_i64(&b[4], v[i].first_rank) ||
			     add_i64(&b[5], v[i].local_ranks) ||
			     sched_store__arr_add(&b[6], v[i].gpus)
			 ? TY_ENOMEM
			 : 0;
	if (rc || end_all(b, 7)) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	} else {
		const char *p[] = {b[0].data, b[1].data, b[2].data, b[3].data,
				   b[4].data, b[5].data, b[6].data};

		rc = ty_pg_exec(NULL, pg, SQL_ALLOCS, 7, p, err);
	}
	free_all(b, 7);
	return rc;
}
