/*
 * PostgreSQL access over libpq: one connection, parameterised statements
 * only, transactions, reconnect after a lost connection, and migrations.
 */
#ifndef TY_PG_H
#define TY_PG_H

#include "ty_err.h"

#include <libpq-fe.h>
#include <stdbool.h>

struct ty_pg; /* opaque */

struct ty_migration {
	int version;
	const char *name;
	const char *sql;
};

/* New connection in *out (caller frees with ty_pg_close). TY_EUNAVAIL when
 * the server cannot be reached. */
int ty_pg_connect(struct ty_pg **out, const char *url, struct ty_err *err);
void ty_pg_close(struct ty_pg *pg);

/* Borrowed libpq handle, for LISTEN and PQsocket. */
PGconn *ty_pg_conn(struct ty_pg *pg);

/*
 * Run one parameterised statement (text parameters; NULL entries are SQL
 * NULL). On success *res (if res is non-NULL) is a new result the caller
 * PQclear()s. Outside a transaction a lost connection is re-established and
 * the statement retried once. Errors: TY_ECONFLICT for unique/exclusion
 * violations and serialization failures, TY_EINVAL for check/foreign-key/
 * data errors, TY_EUNAVAIL when the server is gone, TY_EDB otherwise; the
 * SQLSTATE is kept (ty_pg_sqlstate).
 */
int ty_pg_exec(PGresult **res, struct ty_pg *pg, const char *sql, int nparams,
	       const char *const *params, struct ty_err *err);
/* Same, for a multi-statement script without parameters (migrations). */
int ty_pg_exec_script(struct ty_pg *pg, const char *sql, struct ty_err *err);

int ty_pg_begin(struct ty_pg *pg, struct ty_err *err);
int ty_pg_commit(struct ty_pg *pg, struct ty_err *err);
/* Never fails visibly: a failed rollback drops the connection for a reset. */
void ty_pg_rollback(struct ty_pg *pg);
bool ty_pg_in_tx(const struct ty_pg *pg);

/* SQLSTATE of the last failed statement ("" when none). */
const char *ty_pg_sqlstate(const struct ty_pg *pg);
/* True when the connection is usable (reconnects if it is not). */
bool ty_pg_ok(struct ty_pg *pg);

/*
 * Apply, in version order, every migration not yet recorded in
 * schema_migrations, each in its own transaction; serialised across
 * processes by an advisory lock. *applied (optional) counts the new ones.
 */
int ty_pg_migrate(int *applied, struct ty_pg *pg, const struct ty_migration *m, int n,
		  struct ty_err *err);

/* Text of column col of row 0 (borrowed), or NULL when absent / SQL NULL. */
const char *ty_pg_val(const PGresult *res, int row, int col);

#endif
