/*
 * Savepoints of a fenced transaction, with the buffers' mark and rewind: a
 * rolled-back savepoint drops the events and outbox rows buffered since.
 */
#include "scheduler.h"

/* A name cannot be a parameter: one constant per savepoint and statement. */
static const char SQL_SAVEPOINT_MSG[] = "SAVEPOINT msg";
static const char SQL_SAVEPOINT_DECISION[] = "SAVEPOINT decision";
static const char SQL_SAVEPOINT_PLACEMENTS[] = "SAVEPOINT placements";
static const char SQL_ROLLBACK_MSG[] = "ROLLBACK TO SAVEPOINT msg";
static const char SQL_ROLLBACK_DECISION[] = "ROLLBACK TO SAVEPOINT decision";
static const char SQL_ROLLBACK_PLACEMENTS[] = "ROLLBACK TO SAVEPOINT placements";
static const char SQL_RELEASE_MSG[] = "RELEASE SAVEPOINT msg";
static const char SQL_RELEASE_DECISION[] = "RELEASE SAVEPOINT decision";
static const char SQL_RELEASE_PLACEMENTS[] = "RELEASE SAVEPOINT placements";

int sched_store_savepoint(struct sched_store_mark *mark, struct ty_pg *pg, struct sched_store *st,
			  enum sched_savepoint sp, struct ty_err *err)
{
	*mark = sched_store_mark(st);
	switch (sp) {
	case SCHED_SAVEPOINT_MSG:
		return ty_pg_exec(NULL, pg, SQL_SAVEPOINT_MSG, 0, NULL, err);
	case SCHED_SAVEPOINT_DECISION:
		return ty_pg_exec(NULL, pg, SQL_SAVEPOINT_DECISION, 0, NULL, err);
	case SCHED_SAVEPOINT_PLACEMENTS:
		return ty_pg_exec(NULL, pg, SQL_SAVEPOINT_PLACEMENTS, 0, NULL, err);
	}
	return ty_err_set(err, TY_EINVAL, "unknown savepoint %d", (int)sp);
}

int sched_store_savepoint_rollback(struct ty_pg *pg, struct sched_store *st,
				   enum sched_savepoint sp, struct sched_store_mark mark,
				   struct ty_err *err)
{
	sched_store_rewind(st, mark); /* its events and outbox rows too */
	switch (sp) {
	case SCHED_SAVEPOINT_MSG:
		return ty_pg_exec(NULL, pg, SQL_ROLLBACK_MSG, 0, NULL, err);
	case SCHED_SAVEPOINT_DECISION:
		return ty_pg_exec(NULL, pg, SQL_ROLLBACK_DECISION, 0, NULL, err);
	case SCHED_SAVEPOINT_PLACEMENTS:
		return ty_pg_exec(NULL, pg, SQL_ROLLBACK_PLACEMENTS, 0, NULL, err);
	}
	return ty_err_set(err, TY_EINVAL, "unknown savepoint %d", (int)sp);
}

int sched_store_savepoint_release(struct ty_pg *pg, enum sched_savepoint sp, struct ty_err *err)
{
	switch (sp) {
	case SCHED_SAVEPOINT_MSG:
		return ty_pg_exec(NULL, pg, SQL_RELEASE_MSG, 0, NULL, err);
	case SCHED_SAVEPOINT_DECISION:
		return ty_pg_exec(NULL, pg, SQL_RELEASE_DECISION, 0, NULL, err);
	case SCHED_SAVEPOINT_PLACEMENTS:
		return ty_pg_exec(NULL, pg, SQL_RELEASE_PLACEMENTS, 0, NULL, err);
	}
	return ty_err_set(err, TY_EINVAL, "unknown savepoint %d", (int)sp);
}
