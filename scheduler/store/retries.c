/*
 * What a failed attempt's judgement reads of its job and writes besides its
 * state: the retry budget used, the backoff, the nodes excluded, whether a
 * stop was requested, the nodes an expedited requeue holds.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sched_store_job_retry_free(struct sched_store_job_retry *r)
{
	free(r->retry);
	free(r->retries);
	memset(r, 0, sizeof(*r));
}

static const char SQL_JOB_RETRY[] = "SELECT state, attempt, cancel_requested, spec->'retry',"
				    " retries, stop_requested FROM jobs WHERE id = $1 FOR UPDATE";

int sched_store_job_retry(struct sched_store_job_retry *out, struct ty_pg *pg, int64_t job,
			  struct ty_err *err)
{
	char jb[24];
	const char *p[] = {sched_i64(jb, job)};
	PGresult *res = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = ty_pg_exec(&res, pg, SQL_JOB_RETRY, 1, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		out->exists = true;
		snprintf(out->state, sizeof(out->state), "%s", PQgetvalue(res, 0, 0));
		out->attempt = sched_col_i64(res, 0, 1);
		out->cancel_requested = !strcmp(PQgetvalue(res, 0, 2), "t");
		out->stop_requested = !strcmp(PQgetvalue(res, 0, 5), "t");
		if ((ty_pg_val(res, 0, 3) && !(out->retry = strdup(ty_pg_val(res, 0, 3)))) ||
		    (ty_pg_val(res, 0, 4) && !(out->retries = strdup(ty_pg_val(res, 0, 4))))) {
			sched_store_job_retry_free(out);
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		}
	}
	PQclear(res);
	return rc;
}

static const char SQL_JOB_RETRY_SPENT[] = "UPDATE jobs SET retries = $2::jsonb,"
					  " not_before = CASE WHEN $3::int > 0"
					  "  THEN now() + make_interval(secs => $3::int) END,"
					  " excluded_nodes = CASE WHEN $4::text IS NULL"
					  "  OR $4 = ANY (excluded_nodes) THEN excluded_nodes"
					  "  ELSE excluded_nodes || $4::text END"
					  " WHERE id = $1";

int sched_store_job_retry_spent(struct ty_pg *pg, int64_t job, const char *retries,
				int64_t backoff_s, const char *exclude, struct ty_err *err)
{
	char jb[24], bb[24];
	const char *p[] = {sched_i64(jb, job), retries, sched_i64(bb, backoff_s), exclude};

	return ty_pg_exec(NULL, pg, SQL_JOB_RETRY_SPENT, 4, p, err);
}

static const char SQL_JOB_EXCLUDE[] =
    "UPDATE jobs SET excluded_nodes = excluded_nodes || $3::text"
    " WHERE id = $1 AND attempt = $2 AND NOT ($3 = ANY (excluded_nodes))";

int sched_store_job_exclude(struct ty_pg *pg, int64_t job, int64_t attempt, const char *node,
			    struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt), node};

	return ty_pg_exec(NULL, pg, SQL_JOB_EXCLUDE, 3, p, err);
}

static const char SQL_JOB_STOP_REQUESTED[] = "SELECT stop_requested FROM jobs WHERE id = $1";

int sched_store_job_stop_requested(bool *stop, struct ty_pg *pg, int64_t job, struct ty_err *err)
{
	char jb[24];
	const char *p[] = {sched_i64(jb, job)};
	PGresult *res = NULL;
	int rc;

	*stop = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_JOB_STOP_REQUESTED, 1, p, err)))
		return rc;
	*stop = PQntuples(res) == 1 && !strcmp(PQgetvalue(res, 0, 0), "t");
	PQclear(res);
	return 0;
}

static const char SQL_HOLD_NODES[] =
    "SELECT " SCHED_STORE_HOLD_NODES " FROM jobs j WHERE j.id = $1 AND j.attempt = $2";

int sched_store_hold_nodes(char **csv, struct ty_pg *pg, int64_t job, int64_t attempt,
			   struct ty_err *err)
{
	char jb[24], ab[24];
	const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
	PGresult *res = NULL;
	int rc;

	*csv = NULL;
	if ((rc = ty_pg_exec(&res, pg, SQL_HOLD_NODES, 2, p, err)))
		goto out;
	if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0) &&
	    !(*csv = strdup(PQgetvalue(res, 0, 0))))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	PQclear(res);
	return rc;
}
