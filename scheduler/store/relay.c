/*
 * The outbox relay's rows (relay.c): the next rows to produce, and those
 * delivered deleted. (Rows are added at a transaction's commit: outbox.c.)
 */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

/* 1000 rows per pass */
static const char SQL_NEXT[] = "SELECT id, node_id, payload FROM dispatch_outbox"
			       " WHERE id <> ALL ($1::bigint[]) ORDER BY id LIMIT 1000";
static const char SQL_DELETE[] = "DELETE FROM dispatch_outbox WHERE id = ANY ($1::bigint[])";

/* The literal of ids[0..n) in b; 0 or TY_ENOMEM. */
static int ids_literal(struct ty_buf *b, const int64_t *ids, int n)
{
	char buf[24];
	int rc = 0;

	for (int i = 0; i < n && !rc; i++)
		rc = sched_store__arr_add(b, sched_i64(buf, ids[i]));
	return rc ? rc : sched_store__arr_end(b);
}

void sched_store_outbox_rows_free(struct sched_store_outbox_row *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].payload);
	}
	free(v);
}

int sched_store_outbox_next(struct sched_store_outbox_row **out, int *nout, struct ty_pg *pg,
			    const int64_t *skip, int nskip, struct ty_err *err)
{
	struct ty_buf lit = TY_BUF_INIT;
	struct sched_store_outbox_row *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if (ids_literal(&lit, skip, nskip)) {
		ty_buf_free(&lit);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	const char *p[] = {lit.data};

	rc = ty_pg_exec(&res, pg, SQL_NEXT, 1, p, err);
	ty_buf_free(&lit);
	if (rc)
		return rc;
	n = PQntuples(res);
	if (n && !(v = calloc((size_t)n, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		size_t len = (size_t)PQgetlength(res, i, 2);

		v[i].id = sched_col_i64(res, i, 0);
		v[i].len = len;
		if (!(v[i].node = strdup(PQgetvalue(res, i, 1))) ||
		    !(v[i].payload = malloc(len + 1))) {
			PQclear(res);
			sched_store_outbox_rows_free(v, n);
			return ty_err_set(err, TY_ENOMEM, NULL);
		}
		memcpy(v[i].payload, PQgetvalue(res, i, 2), len + 1);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_outbox_delete(struct ty_pg *pg, const int64_t *ids, int n, struct ty_err *err)
{
	struct ty_buf lit = TY_BUF_INIT;
	int rc;

	if (ids_literal(&lit, ids, n)) {
		ty_buf_free(&lit);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	const char *p[] = {lit.data};

	rc = ty_pg_exec(NULL, pg, SQL_DELETE, 1, p, err);
	ty_buf_free(&lit);
	return rc;
}
