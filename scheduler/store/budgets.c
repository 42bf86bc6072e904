/*
 * Money budgets' rows (place.c): every team's budget with its period's
 * spend, and the 80 % alerts, both computed by migration 0032's functions.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_BUDGETS[] =
    "SELECT id, budget_amount, budget_period,"
    " ty_budget_spent(id, ty_budget_period_start(budget_period, now()))"
    " FROM teams WHERE budget_amount IS NOT NULL ORDER BY id";

/* ty_budget_alert is once per period by itself: calling it every cycle is safe */
static const char SQL_ALERTS[] =
    "SELECT count(*) FILTER (WHERE ty_budget_alert(u.team, u.spent, now()))"
    " FROM unnest($1::bigint[], $2::float8[]) AS u(team, spent)";

int sched_store_budgets(struct sched_store_budget **out, int *nout, struct ty_pg *pg,
			struct ty_err *err)
{
	struct sched_store_budget *v = NULL;
	PGresult *res = NULL;
	int rc, n;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_BUDGETS, 0, NULL, err)))
		return rc;
	n = PQntuples(res);
	if (!(v = calloc((size_t)n + 1, sizeof(*v)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < n; i++) {
		v[i].team = sched_col_i64(res, i, 0);
		v[i].amount = strtod(PQgetvalue(res, i, 1), NULL);
		snprintf(v[i].period, sizeof(v[i].period), "%s", PQgetvalue(res, i, 2));
		v[i].spent = strtod(PQgetvalue(res, i, 3), NULL);
	}
	PQclear(res);
	*out = v;
	*nout = n;
	return 0;
}

int sched_store_budget_alerts(int *fired, struct ty_pg *pg, const int64_t *teams,
			      const double *spent, int n, struct ty_err *err)
{
	struct ty_buf tb = {0}, sb = {0};
	PGresult *res = NULL;
	char buf[40];
	int rc = 0;

	*fired = 0;
	if (n <= 0)
		return 0;
	for (int i = 0; i < n && !rc; i++) {
		snprintf(buf, sizeof(buf), "%.17g", spent[i]);
		if (sched_store__arr_i64(&tb, teams[i]) ||
		    sched_store__arr_add(&sb, buf))
			rc = TY_ENOMEM;
	}
	if (rc || (rc = sched_store__arr_end(&tb)) || (rc = sched_store__arr_end(&sb))) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	const char *p[] = {tb.data, sb.data};

	if ((rc = ty_pg_exec(&res, pg, SQL_ALERTS, 2, p, err)))
		goto out;
	*fired = (int)sched_col_i64(res, 0, 0);
out:
	PQclear(res);
	ty_buf_free(&tb);
	ty_buf_free(&sb);
	return rc;
}
