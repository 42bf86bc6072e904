/*
 * The leader's term: the epoch in table leader (read under FOR SHARE to fence
 * a transaction, bumped to start a term) and the advisory lock that decides
 * who leads, held on its own connection.
 */
#include "scheduler.h"

#include <string.h>

static const char SQL_EPOCH[] = "SELECT epoch FROM leader WHERE id = 1 FOR SHARE";
static const char SQL_EPOCH_BUMP[] =
    "UPDATE leader SET epoch = epoch + 1, holder = $1, updated_at = now()"
    " WHERE id = 1 RETURNING epoch";
static const char SQL_LOCK_TRY[] = "SELECT pg_try_advisory_lock(" SCHED_LOCK_KEY ")";
static const char SQL_UNLOCK[] = "SELECT pg_advisory_unlock(" SCHED_LOCK_KEY ")";
static const char SQL_LOCK_HELD[] =
    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
    " AND pid = pg_backend_pid() AND granted"
    " AND ((classid::bigint << 32) | objid::bigint) = " SCHED_LOCK_KEY;

/* The one epoch in res (which it clears) in *epoch. */
static int epoch_of(int64_t *epoch, PGresult *res, struct ty_err *err)
{
	int rc = 0;

	if (PQntuples(res) != 1)
		rc =
		    ty_err_set(err, TY_EDB, "table 'leader' has no row 1: is the schema migrated?");
	else
		*epoch = sched_col_i64(res, 0, 0);
	PQclear(res);
	return rc;
}

int sched_store_term_epoch(int64_t *epoch, struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, SQL_EPOCH, 0, NULL, err)))
		return rc;
	return epoch_of(epoch, res, err);
}

int sched_store_term_bump(int64_t *epoch, struct ty_pg *pg, const char *holder,
			  struct ty_err *err)
{
	const char *p[] = {holder};

	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, SQL_EPOCH_BUMP, 1, p, err)))
		return rc;
	return epoch_of(epoch, res, err);
}

int sched_store_lock_try(bool *got, struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	const char *v;
	int rc;

	*got = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_LOCK_TRY, 0, NULL, err)))
		return rc;
	v = ty_pg_val(res, 0, 0);
	*got = v && !strcmp(v, "t");
	PQclear(res);
	return 0;
}

int sched_store_lock_release(struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc = ty_pg_exec(&res, pg, SQL_UNLOCK, 0, NULL, err);

	PQclear(res);
	return rc;
}

int sched_store_lock_held(bool *held, struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	*held = false;
	if ((rc = ty_pg_exec(&res, pg, SQL_LOCK_HELD, 0, NULL, err))) {
		PQclear(res);
		return rc;
	}
	*held = sched_col_i64(res, 0, 0) > 0;
	PQclear(res);
	return 0;
}
