/*
 * The audit SQL as typed calls (store.h): the admin actions' audit_log
 * rows.
 */
#include "store.h"

#include <stdio.h>

static const char log_sql[] =
	"INSERT INTO audit_log (token_id, action, object) VALUES ($1, $2, $3)";

int api_store_audit_log(struct ty_pg *pg, int64_t token_id, const char *action,
			const char *object, struct ty_err *err)
{
	char tid[24];
	const char *p[3] = {tid, action, object};

	snprintf(tid, sizeof(tid), "%lld", (long long)token_id);
	return ty_pg_exec(NULL, pg, log_sql, 3, p, err);
}
