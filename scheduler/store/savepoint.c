/*
 * Savepoints of a fenced transaction, with the buffers' mark and rewind: a
 * rolled-back savepoint drops the events and outbox rows buffered since.
 */
#include "scheduler.h"

/* By enum sched_savepoint: a name cannot be a parameter, so each is a constant. */
static const char *const SQL_SAVEPOINT[] = {"SAVEPOINT msg", "SAVEPOINT decision",
					    "SAVEPOINT placements"};
static const char *const SQL_ROLLBACK_TO[] = {"ROLLBACK TO SAVEPOINT msg",
					      "ROLLBACK TO SAVEPOINT decision",
					      "ROLLBACK TO SAVEPOINT placements"};
static const char *const SQL_RELEASE[] = {"RELEASE SAVEPOINT msg", "RELEASE SAVEPOINT decision",
					  "RELEASE SAVEPOINT placements"};

int sched_store_savepoint(struct sched_store_mark *mark, struct ty_pg *pg, struct sched_store *st,
			  enum sched_savepoint sp, struct ty_err *err)
{
	*mark = sched_store_mark(st);
	return ty_pg_exec(NULL, pg, SQL_SAVEPOINT[sp], 0, NULL, err);
}

int sched_store_savepoint_rollback(struct ty_pg *pg, struct sched_store *st,
				   enum sched_savepoint sp, struct sched_store_mark mark,
				   struct ty_err *err)
{
	sched_store_rewind(st, mark); /* its events and outbox rows too */
	return ty_pg_exec(NULL, pg, SQL_ROLLBACK_TO[sp], 0, NULL, err);
}

int sched_store_savepoint_release(struct ty_pg *pg, enum sched_savepoint sp, struct ty_err *err)
{
	return ty_pg_exec(NULL, pg, SQL_RELEASE[sp], 0, NULL, err);
}
