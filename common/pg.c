/* libpq wrapper. */
#include "ty_pg.h"
#include "ty_log.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Statements are prepared on first use and kept per connection, keyed by
 * their text: parsing and planning a statement again for every execution
 * was a large part of a submission's and a scheduling cycle's cost. A
 * connection keeps at most STMT_MAX; text beyond that runs unprepared.
 */
#define STMT_MAX 512

struct pg_stmt {
	uint64_t hash;
	char *sql;
	char name[24];
};

struct ty_pg {
	PGconn *conn;
	char *url;
	bool in_tx;
	char sqlstate[6];
	struct pg_stmt *stmts;
	int nstmts;
	unsigned long next_stmt; /* names are never reused within a session */
};

static void stmts_forget(struct ty_pg *pg)
{
	for (int i = 0; i < pg->nstmts; i++)
		free(pg->stmts[i].sql);
	free(pg->stmts);
	pg->stmts = NULL;
	pg->nstmts = 0;
}

static int conn_error(struct ty_pg *pg, int code, const char *what, struct ty_err *err)
{
	const char *m = pg->conn ? PQerrorMessage(pg->conn) : "no connection";
	size_t n = strlen(m);

	while (n && (m[n - 1] == '\n' || m[n - 1] == ' '))
		n--;
	return ty_err_set(err, code, "%s: %.*s", what, (int)n, m);
}

/* Server notices ("relation already exists, skipping") are debug chatter. */
static void on_notice(void *arg, const char *msg)
{
	size_t n = strlen(msg);

	while (n && msg[n - 1] == '\n')
		n--;
	ty_debug("postgres: %.*s", (int)n, msg);
}

int ty_pg_connect(struct ty_pg **out, const char *url, struct ty_err *err)
{
	struct ty_pg *pg = calloc(1, sizeof(*pg));
	int rc;

	*out = NULL;
	if (!pg || !(pg->url = strdup(url ? url : ""))) {
		free(pg);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	pg->conn = PQconnectdb(pg->url);
	if (!pg->conn || PQstatus(pg->conn) != CONNECTION_OK) {
		rc = conn_error(pg, TY_EUNAVAIL, "cannot connect to PostgreSQL", err);
		ty_pg_close(pg);
		return rc;
	}
	PQsetNoticeProcessor(pg->conn, on_notice, NULL);
	*out = pg;
	return 0;
}

void ty_pg_close(struct ty_pg *pg)
{
	if (!pg)
		return;
	if (pg->conn)
		PQfinish(pg->conn);
	stmts_forget(pg);
	free(pg->url);
	free(pg);
}

PGconn *ty_pg_conn(struct ty_pg *pg)
{
	return pg->conn;
}

bool ty_pg_ok(struct ty_pg *pg)
{
	if (PQstatus(pg->conn) == CONNECTION_OK)
		return true;
	PQreset(pg->conn);
	stmts_forget(pg); /* a new session has none of them */
	pg->in_tx = false;
	return PQstatus(pg->conn) == CONNECTION_OK;
}

static int classify(const char *state)
{
	if (!state)
		return TY_EUNAVAIL;
	if (!strcmp(state, "23505") || !strcmp(state, "23P01") || !strcmp(state, "40001") ||
	    !strcmp(state, "40P01"))
		return TY_ECONFLICT;
	if (!strncmp(state, "23", 2) || !strncmp(state, "22", 2))
		return TY_EINVAL;
	if (!strncmp(state, "08", 2) || !strcmp(state, "57P01") || !strcmp(state, "57P02") ||
	    !strcmp(state, "57P03"))
		return TY_EUNAVAIL;
	return TY_EDB;
}

static int check_result(PGresult *r, struct ty_pg *pg, struct ty_err *err)
{
	ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
	const char *state, *msg;
	size_t n;

	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return 0;
	state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	snprintf(pg->sqlstate, sizeof(pg->sqlstate), "%s", state ? state : "");
	msg = r ? PQresultErrorMessage(r) : PQerrorMessage(pg->conn);
	if (!msg || !*msg)
		msg = PQerrorMessage(pg->conn);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
		n--;
	if (PQstatus(pg->conn) != CONNECTION_OK)
		return ty_err_set(err, TY_EUNAVAIL, "database connection lost: %.*s", (int)n, msg);
	return ty_err_set(err, classify(state), "database: %.*s", (int)n, msg);
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

/*
 * Execute sql as a prepared statement, preparing it first when this
 * session has not; a failed preparation is returned as the result (it is
 * the error the statement itself would have raised).
 */
static PGresult *exec_prepared(struct ty_pg *pg, const char *sql, int nparams,
			       const char *const *params)
{
	uint64_t h = fnv1a(sql);
	struct pg_stmt *st = NULL;
	PGresult *r;

	for (int i = 0; i < pg->nstmts; i++)
		if (pg->stmts[i].hash == h && !strcmp(pg->stmts[i].sql, sql)) {
			st = &pg->stmts[i];
			break;
		}
	if (!st) {
		char name[24];
		char *copy;

		if (pg->nstmts == STMT_MAX || !(copy = strdup(sql)))
			return PQexecParams(pg->conn, sql, nparams, NULL, params, NULL, NULL, 0);
		if (!pg->stmts && !(pg->stmts = calloc(STMT_MAX, sizeof(*pg->stmts)))) {
			free(copy);
			return PQexecParams(pg->conn, sql, nparams, NULL, params, NULL, NULL, 0);
		}
		snprintf(name, sizeof(name), "ty_%lu", pg->next_stmt++);
		r = PQprepare(pg->conn, name, sql, nparams, NULL);
		if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
			free(copy);
			return r;
		}
		PQclear(r);
		st = &pg->stmts[pg->nstmts++];
		st->hash = h;
		st->sql = copy;
		memcpy(st->name, name, sizeof(name));
	}
	r = PQexecPrepared(pg->conn, st->name, nparams, params, NULL, NULL, 0);
	if (r && PQresultStatus(r) == PGRES_FATAL_ERROR &&
	    !strcmp(PQresultErrorField(r, PG_DIAG_SQLSTATE) ? PQresultErrorField(r, PG_DIAG_SQLSTATE)
							    : "",
		    "0A000")) {
		/*
		 * "cached plan must not change result type": a migration changed
		 * a table under it. Forget it: the next use prepares it again,
		 * and outside a transaction this one runs again right away.
		 */
		free(st->sql);
		*st = pg->stmts[--pg->nstmts];
		if (!pg->in_tx) {
			PQclear(r);
			r = PQexecParams(pg->conn, sql, nparams, NULL, params, NULL, NULL, 0);
		}
	}
	return r;
}

int ty_pg_exec(PGresult **res, struct ty_pg *pg, const char *sql, int nparams,
	       const char *const *params, struct ty_err *err)
{
	PGresult *r;
	int rc;

	if (res)
		*res = NULL;
	pg->sqlstate[0] = '\0';
	if (!pg->in_tx && PQstatus(pg->conn) != CONNECTION_OK && !ty_pg_ok(pg))
		return conn_error(pg, TY_EUNAVAIL, "database unavailable", err);
	r = exec_prepared(pg, sql, nparams, params);
	if (!pg->in_tx && PQstatus(pg->conn) != CONNECTION_OK) {
		/* the server went away between statements: one fresh try */
		PQclear(r);
		if (!ty_pg_ok(pg))
			return conn_error(pg, TY_EUNAVAIL, "database unavailable", err);
		ty_info("reconnected to PostgreSQL");
		r = exec_prepared(pg, sql, nparams, params);
	}
	if ((rc = check_result(r, pg, err))) {
		PQclear(r);
		return rc;
	}
	if (res)
		*res = r;
	else
		PQclear(r);
	return 0;
}

int ty_pg_exec_script(struct ty_pg *pg, const char *sql, struct ty_err *err)
{
	PGresult *r = PQexec(pg->conn, sql);
	int rc = check_result(r, pg, err);

	PQclear(r);
	return rc;
}

int ty_pg_begin(struct ty_pg *pg, struct ty_err *err)
{
	int rc = ty_pg_exec(NULL, pg, "BEGIN", 0, NULL, err);

	if (!rc)
		pg->in_tx = true;
	return rc;
}

int ty_pg_commit(struct ty_pg *pg, struct ty_err *err)
{
	int rc = ty_pg_exec(NULL, pg, "COMMIT", 0, NULL, err);

	pg->in_tx = false;
	return rc;
}

void ty_pg_rollback(struct ty_pg *pg)
{
	PGresult *r;

	if (!pg)
		return;
	r = PQexec(pg->conn, "ROLLBACK");
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQstatus(pg->conn) == CONNECTION_OK) {
		PQreset(pg->conn);
		stmts_forget(pg);
	}
	PQclear(r);
	pg->in_tx = false;
}

bool ty_pg_in_tx(const struct ty_pg *pg)
{
	return pg->in_tx;
}

const char *ty_pg_sqlstate(const struct ty_pg *pg)
{
	return pg->sqlstate;
}

const char *ty_pg_val(const PGresult *res, int row, int col)
{
	if (!res || row >= PQntuples(res) || col >= PQnfields(res) ||
	    PQgetisnull(res, row, col))
		return NULL;
	return PQgetvalue(res, row, col);
}

/* Any constant shared by every Trainyard process that migrates. */
#define MIGRATE_LOCK_KEY "7371101"

static int by_version(const void *a, const void *b)
{
	const struct ty_migration *x = *(const struct ty_migration *const *)a;
	const struct ty_migration *y = *(const struct ty_migration *const *)b;

	return (x->version > y->version) - (x->version < y->version);
}

int ty_pg_migrate(int *applied, struct ty_pg *pg, const struct ty_migration *list, int n,
		  struct ty_err *err)
{
	const struct ty_migration **m = NULL;
	PGresult *r = NULL;
	int rc, count = 0;

	if (n > 0 && !(m = malloc((size_t)n * sizeof(*m))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++)
		m[i] = &list[i];
	if (n > 0)
		qsort(m, (size_t)n, sizeof(*m), by_version);

	if (applied)
		*applied = 0;
	/* the lock comes first: concurrent CREATE TABLE IF NOT EXISTS can fail */
	if ((rc = ty_pg_exec(NULL, pg, "SELECT pg_advisory_lock(" MIGRATE_LOCK_KEY ")", 0, NULL,
			     err))) {
		free(m);
		return rc;
	}
	rc = ty_pg_exec(NULL, pg,
			"CREATE TABLE IF NOT EXISTS schema_migrations ("
			" version integer PRIMARY KEY, name text NOT NULL,"
			" applied_at timestamptz NOT NULL DEFAULT now())",
			0, NULL, err);
	for (int i = 0; i < n && !rc; i++) {
		char ver[16];
		const char *p[2] = {ver, m[i]->name};

		snprintf(ver, sizeof(ver), "%d", m[i]->version);
		if ((rc = ty_pg_exec(&r, pg, "SELECT 1 FROM schema_migrations WHERE version = $1",
				     1, p, err)))
			break;
		bool done = PQntuples(r) > 0;
		PQclear(r);
		r = NULL;
		if (done)
			continue;
		if ((rc = ty_pg_begin(pg, err)))
			break;
		if ((rc = ty_pg_exec_script(pg, m[i]->sql, err)) ||
		    (rc = ty_pg_exec(NULL, pg,
				     "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
				     2, p, err)) ||
		    (rc = ty_pg_commit(pg, err))) {
			ty_pg_rollback(pg);
			char msg[TY_ERR_MSG_MAX];
			snprintf(msg, sizeof(msg), "%s", err ? err->msg : "");
			if (err) {
				ty_err_clear(err);
				ty_err_set(err, rc, "migration %04d_%s: %s", m[i]->version, m[i]->name,
					   msg);
			}
			break;
		}
		ty_info("applied migration %04d_%s", m[i]->version, m[i]->name);
		count++;
	}
	PGresult *u = PQexec(pg->conn, "SELECT pg_advisory_unlock(" MIGRATE_LOCK_KEY ")");
	PQclear(u);
	if (applied)
		*applied = count;
	free(m);
	return rc;
}
