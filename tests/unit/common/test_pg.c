/*
 * common/ty_pg against a real PostgreSQL (TY_TEST_PG_URL): parameters,
 * error classes, transactions, migrations, reconnects.
 */
#include "ty_pg.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *shared_db;

static struct ty_pg *connect_to(const char *url)
{
	struct ty_err err = {0};
	struct ty_pg *pg = NULL;

	if (ty_pg_connect(&pg, url, &err)) {
		FAIL("cannot connect to %s: %s", url, err.msg);
		ty_test_abort();
	}
	return pg;
}

static struct ty_pg *connect_shared(void)
{
	if (!shared_db)
		shared_db = ty_test_db_new();
	return connect_to(shared_db);
}

/* Run sql, requiring success; first value of the first row (scratch) or NULL. */
static const char *q(struct ty_pg *pg, const char *sql, int n, const char *const *params)
{
	struct ty_err err = {0};
	PGresult *r = NULL;
	const char *v;

	if (ty_pg_exec(&r, pg, sql, n, params, &err)) {
		FAIL("%s: %s", sql, err.msg);
		ty_test_abort();
	}
	v = ty_pg_val(r, 0, 0);
	v = v ? ty_test_strf("%s", v) : NULL;
	PQclear(r);
	return v;
}

TY_TEST(connect_to_nothing_is_unavailable)
{
	struct ty_err err = {0};
	struct ty_pg *pg = (struct ty_pg *)1;

	CHECK_INT_EQ(
	    ty_pg_connect(&pg, "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", &err),
	    TY_EUNAVAIL);
	CHECK(pg == NULL);
	CHECK(err.msg[0] != '\0');
	ty_pg_close(NULL);
}

TY_TEST(exec_with_params)
{
	struct ty_pg *pg = connect_shared();
	const char *p[] = {"2", "3", "it's \"quoted\"; DROP TABLE x"};
	struct ty_err err = {0};
	PGresult *r = NULL;

	CHECK_STR_EQ(q(pg, "SELECT $1::int + $2::int", 2, p), "5");
	/* parameters are data, never SQL */
	CHECK_STR_EQ(q(pg, "SELECT $1::text", 1, p + 2), p[2]);
	REQUIRE_INT_EQ(
	    ty_pg_exec(&r, pg, "SELECT g, g * 2 FROM generate_series(1, 3) g", 0, NULL, &err), 0);
	CHECK_INT_EQ(PQntuples(r), 3);
	CHECK_STR_EQ(ty_pg_val(r, 2, 1), "6");
	CHECK_STR_EQ(ty_pg_val(r, 3, 0), NULL);
	CHECK_STR_EQ(ty_pg_val(r, 0, 2), NULL);
	CHECK_STR_EQ(ty_pg_sqlstate(pg), "");
	PQclear(r);
	/* res may be NULL when the caller wants no rows */
	CHECK_INT_EQ(ty_pg_exec(NULL, pg, "SELECT 1", 0, NULL, &err), 0);
	ty_pg_close(pg);
}

TY_TEST(null_params)
{
	struct ty_pg *pg = connect_shared();
	const char *p[] = {NULL, "x"};

	CHECK_STR_EQ(q(pg, "SELECT $1::text IS NULL", 1, p), "t");
	CHECK_STR_EQ(q(pg, "SELECT $1::text", 1, p), NULL);
	CHECK_STR_EQ(q(pg, "SELECT coalesce($1::text, $2::text)", 2, p), "x");
	ty_pg_close(pg);
}

TY_TEST(error_classification)
{
	static const struct {
		const char *sql;
		int code;
		const char *sqlstate;
	} rows[] = {
	    {"INSERT INTO cls VALUES (1, 1, NULL)", TY_ECONFLICT, "23505"},
	    {"INSERT INTO cls VALUES (2, -1, NULL)", TY_EINVAL, "23514"},
	    {"INSERT INTO cls VALUES (NULL, 1, NULL)", TY_EINVAL, "23502"},
	    {"INSERT INTO cls VALUES (3, 1, 999)", TY_EINVAL, "23503"},
	    {"SELECT 'abc'::int", TY_EINVAL, "22P02"},
	    {"SELECT 1 / 0", TY_EINVAL, "22012"},
	    {"SELEC 1", TY_EDB, "42601"},
	    {"SELECT * FROM no_such_table", TY_EDB, "42P01"},
	};
	struct ty_pg *pg = connect_shared();

	struct ty_err serr = {0};

	if (ty_pg_exec_script(pg,
			      "CREATE TABLE cls_parent (id int PRIMARY KEY);"
			      "CREATE TABLE cls (id int PRIMARY KEY, v int CHECK (v > 0),"
			      " parent int REFERENCES cls_parent (id));"
			      "INSERT INTO cls VALUES (1, 1, NULL)",
			      &serr)) {
		FAIL("setup: %s", serr.msg);
		ty_pg_close(pg);
		return;
	}
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		PGresult *r = (PGresult *)1;

		ty_test_context("%s", rows[i].sql);
		CHECK_INT_EQ(ty_pg_exec(&r, pg, rows[i].sql, 0, NULL, &err), rows[i].code);
		CHECK(r == NULL);
		CHECK_INT_EQ(err.code, rows[i].code);
		CHECK_STR_EQ(ty_pg_sqlstate(pg), rows[i].sqlstate);
		CHECK(err.msg[0] != '\0');
	}
	ty_test_context(NULL);
	/* a success clears the SQLSTATE */
	q(pg, "SELECT 1", 0, NULL);
	CHECK_STR_EQ(ty_pg_sqlstate(pg), "");
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM cls", 0, NULL), "1");
	ty_pg_close(pg);
}

TY_TEST(transactions)
{
	struct ty_pg *pg = connect_shared();
	struct ty_err err = {0};

	q(pg, "CREATE TABLE tx (id int PRIMARY KEY)", 0, NULL);
	CHECK(!ty_pg_in_tx(pg));

	REQUIRE_INT_EQ(ty_pg_begin(pg, &err), 0);
	CHECK(ty_pg_in_tx(pg));
	q(pg, "INSERT INTO tx VALUES (1), (2)", 0, NULL);
	ty_pg_rollback(pg);
	CHECK(!ty_pg_in_tx(pg));
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM tx", 0, NULL), "0");

	REQUIRE_INT_EQ(ty_pg_begin(pg, &err), 0);
	q(pg, "INSERT INTO tx VALUES (3)", 0, NULL);
	REQUIRE_INT_EQ(ty_pg_commit(pg, &err), 0);
	CHECK(!ty_pg_in_tx(pg));
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM tx", 0, NULL), "1");

	/* a failed statement aborts the transaction; rollback recovers it */
	REQUIRE_INT_EQ(ty_pg_begin(pg, &err), 0);
	q(pg, "INSERT INTO tx VALUES (4)", 0, NULL);
	CHECK_INT_EQ(ty_pg_exec(NULL, pg, "INSERT INTO tx VALUES (3)", 0, NULL, &err),
		     TY_ECONFLICT);
	ty_err_clear(&err);
	CHECK(ty_pg_exec(NULL, pg, "SELECT 1", 0, NULL, &err) != 0); /* 25P02 */
	ty_pg_rollback(pg);
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM tx", 0, NULL), "1");
	ty_pg_close(pg);
}

static const struct ty_migration good[] = {
    {1, "first", "CREATE TABLE m_log (v int); INSERT INTO m_log VALUES (1)"},
    {2, "second", "CREATE TABLE m_two (x int); INSERT INTO m_log VALUES (2)"},
    {3, "third", "ALTER TABLE m_two ADD COLUMN y int; INSERT INTO m_log VALUES (3)"},
};

TY_TEST(migrate_applies_in_order_once)
{
	struct ty_pg *pg = connect_to(ty_test_db_new());
	struct ty_err err = {0};
	int applied = -1;

	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, good, 2, &err), 0);
	CHECK_INT_EQ(applied, 2);
	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, good, 3, &err), 0);
	CHECK_INT_EQ(applied, 1);
	CHECK_STR_EQ(q(pg, "SELECT string_agg(v::text, ',' ORDER BY ctid) FROM m_log", 0, NULL),
		     "1,2,3");
	CHECK_STR_EQ(q(pg,
		       "SELECT string_agg(version || ':' || name, ',' ORDER BY version)"
		       " FROM schema_migrations",
		       0, NULL),
		     "1:first,2:second,3:third");
	/* a second run is a no-op */
	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, good, 3, &err), 0);
	CHECK_INT_EQ(applied, 0);
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM m_log", 0, NULL), "3");
	CHECK(!ty_pg_in_tx(pg));
	ty_pg_close(pg);
}

/* The header promises version order, whatever order the array is in. */
TY_TEST(migrate_sorts_by_version)
{
	const struct ty_migration shuffled[] = {good[2], good[0], good[1]};
	struct ty_pg *pg = connect_to(ty_test_db_new());
	struct ty_err err = {0};
	int applied = -1;

	CHECK_INT_EQ(ty_pg_migrate(&applied, pg, shuffled, 3, &err), 0);
	if (err.code)
		ty_test_note("error: %s", err.msg);
	CHECK_INT_EQ(applied, 3);
	ty_pg_close(pg);
}

TY_TEST(failing_migration_rolls_back)
{
	const struct ty_migration bad[] = {
	    good[0],
	    good[1],
	    {3, "broken", "CREATE TABLE m_half (x int); INSERT INTO m_log VALUES (3); SELECT 1/0"},
	    {4, "after", "CREATE TABLE m_after (x int)"},
	};
	struct ty_pg *pg = connect_to(ty_test_db_new());
	struct ty_err err = {0};
	int applied = -1;

	CHECK(ty_pg_migrate(&applied, pg, bad, 4, &err) != 0);
	CHECK_INT_EQ(applied, 2);
	if (!strstr(err.msg, "0003") || !strstr(err.msg, "broken"))
		FAIL("error \"%s\" does not name migration 0003_broken", err.msg);
	CHECK(!ty_pg_in_tx(pg));
	CHECK_STR_EQ(q(pg,
		       "SELECT string_agg(version::text, ',' ORDER BY version)"
		       " FROM schema_migrations",
		       0, NULL),
		     "1,2");
	CHECK_STR_EQ(q(pg, "SELECT to_regclass('m_half') IS NULL", 0, NULL), "t");
	CHECK_STR_EQ(q(pg, "SELECT to_regclass('m_after') IS NULL", 0, NULL), "t");
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM m_log", 0, NULL), "2");

	/* fixed, it applies on the next run */
	ty_err_clear(&err);
	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, good, 3, &err), 0);
	CHECK_INT_EQ(applied, 1);
	ty_pg_close(pg);
}

struct migrate_arg {
	const char *url;
	int applied, rc;
};

static void *migrate_thread(void *p)
{
	struct migrate_arg *a = p;
	struct ty_err err = {0};
	struct ty_pg *pg = NULL;

	if ((a->rc = ty_pg_connect(&pg, a->url, &err)) == 0) {
		a->rc = ty_pg_migrate(&a->applied, pg, good, 3, &err);
		ty_pg_close(pg);
	}
	if (a->rc)
		ty_test_note("migrate: %s", err.msg);
	return NULL;
}

TY_TEST(concurrent_migrations_apply_once)
{
	const char *url = ty_test_db_new();
	struct migrate_arg args[4];
	pthread_t th[4];
	struct ty_pg *pg;

	for (int i = 0; i < 4; i++) {
		args[i] = (struct migrate_arg){url, -1, -1};
		REQUIRE_INT_EQ(pthread_create(&th[i], NULL, migrate_thread, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 4; i++)
		CHECK_INT_EQ(args[i].rc, 0);
	CHECK_INT_EQ(args[0].applied + args[1].applied + args[2].applied + args[3].applied, 3);
	pg = connect_to(url);
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM m_log", 0, NULL), "3");
	ty_pg_close(pg);
}

static void terminate(const char *pid)
{
	ty_test_sql(ty_test_strf("SELECT pg_terminate_backend(%d, 5000)", atoi(pid)));
}

TY_TEST(reconnects_after_terminate)
{
	struct ty_pg *pg = connect_shared();
	const char *pid = q(pg, "SELECT pg_backend_pid()", 0, NULL), *pid2;

	REQUIRE(pid != NULL);
	terminate(pid);
	/* outside a transaction the statement is retried on a new connection */
	pid2 = q(pg, "SELECT pg_backend_pid()", 0, NULL);
	REQUIRE(pid2 != NULL);
	CHECK(strcmp(pid, pid2) != 0);
	CHECK(ty_pg_ok(pg));
	CHECK_STR_EQ(q(pg, "SELECT 40 + 2", 0, NULL), "42");
	ty_pg_close(pg);
}

TY_TEST(lost_connection_inside_transaction_is_not_retried)
{
	struct ty_pg *pg = connect_shared();
	struct ty_err err = {0};
	const char *pid;

	q(pg, "CREATE TABLE tx_lost (id int)", 0, NULL);
	REQUIRE_INT_EQ(ty_pg_begin(pg, &err), 0);
	q(pg, "INSERT INTO tx_lost VALUES (1)", 0, NULL);
	pid = q(pg, "SELECT pg_backend_pid()", 0, NULL);
	terminate(pid);
	CHECK_INT_EQ(ty_pg_exec(NULL, pg, "INSERT INTO tx_lost VALUES (2)", 0, NULL, &err),
		     TY_EUNAVAIL);
	ty_pg_rollback(pg);
	CHECK(!ty_pg_in_tx(pg));
	CHECK(ty_pg_ok(pg));
	CHECK_STR_EQ(q(pg, "SELECT count(*) FROM tx_lost", 0, NULL), "0");
	ty_pg_close(pg);
}

TY_TEST(ok_reports_a_live_connection)
{
	struct ty_pg *pg = connect_shared();

	CHECK(ty_pg_ok(pg));
	CHECK(ty_pg_conn(pg) != NULL);
	CHECK_INT_EQ(PQstatus(ty_pg_conn(pg)), CONNECTION_OK);
	ty_pg_close(pg);
}

static const char *prepared_count(struct ty_pg *pg, const char *like)
{
	const char *p[] = {like};

	return q(pg, "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE $1", 1, p);
}

TY_TEST(a_statement_is_prepared_once_per_session)
{
	struct ty_pg *pg = connect_shared();
	const char *p[] = {"41"};

	for (int i = 0; i < 3; i++)
		CHECK_STR_EQ(q(pg, "SELECT $1::int + 1 AS once", 1, p), "42");
	CHECK_STR_EQ(prepared_count(pg, "SELECT $1::int + 1 AS once"), "1");
	/* a new session prepares it again */
	terminate(q(pg, "SELECT pg_backend_pid()", 0, NULL));
	CHECK_STR_EQ(q(pg, "SELECT $1::int + 1 AS once", 1, p), "42");
	CHECK_STR_EQ(prepared_count(pg, "SELECT $1::int + 1 AS once"), "1");
	ty_pg_close(pg);
}

TY_TEST(a_table_changed_under_a_prepared_statement)
{
	struct ty_pg *pg = connect_shared();
	struct ty_err err = {0};
	PGresult *r = NULL;

	q(pg, "CREATE TABLE changed (a int)", 0, NULL);
	q(pg, "INSERT INTO changed VALUES (7)", 0, NULL);
	CHECK_STR_EQ(q(pg, "SELECT * FROM changed", 0, NULL), "7");
	/* outside a transaction it is prepared again and runs */
	q(pg, "ALTER TABLE changed ADD COLUMN b text DEFAULT 'x'", 0, NULL);
	REQUIRE_INT_EQ(ty_pg_exec(&r, pg, "SELECT * FROM changed", 0, NULL, &err), 0);
	CHECK_INT_EQ(PQnfields(r), 2);
	CHECK_STR_EQ(ty_pg_val(r, 0, 1), "x");
	PQclear(r);
	CHECK_STR_EQ(q(pg, "SELECT * FROM changed", 0, NULL), "7"); /* prepared again */
	/* inside one the transaction fails, and the next one runs it */
	q(pg, "ALTER TABLE changed ADD COLUMN c int DEFAULT 3", 0, NULL);
	REQUIRE_INT_EQ(ty_pg_begin(pg, &err), 0);
	CHECK_INT_EQ(ty_pg_exec(&r, pg, "SELECT * FROM changed", 0, NULL, &err), TY_EDB);
	ty_test_note("%s", err.msg);
	CHECK(strstr(err.msg, "result type") != NULL);
	ty_pg_rollback(pg);
	REQUIRE_INT_EQ(ty_pg_begin(pg, &err), 0);
	REQUIRE_INT_EQ(ty_pg_exec(&r, pg, "SELECT * FROM changed", 0, NULL, &err), 0);
	CHECK_INT_EQ(PQnfields(r), 3);
	PQclear(r);
	REQUIRE_INT_EQ(ty_pg_commit(pg, &err), 0);
	ty_pg_close(pg);
}

TY_TEST(more_statements_than_a_session_keeps_still_run)
{
	struct ty_pg *pg = connect_shared();
	int n;

	for (int i = 0; i < 600; i++)
		CHECK_STR_EQ(q(pg, ty_test_strf("SELECT %d AS many", i), 0, NULL),
			     ty_test_strf("%d", i));
	n = atoi(prepared_count(pg, "SELECT % AS many"));
	ty_test_note("%d of 600 prepared", n);
	CHECK(n > 400 && n <= 512);
	CHECK_STR_EQ(q(pg, "SELECT 599 AS many", 0, NULL), "599");
	ty_pg_close(pg);
}

TY_TEST(a_statement_that_does_not_parse_is_an_error_each_time)
{
	struct ty_pg *pg = connect_shared();
	struct ty_err err = {0};

	for (int i = 0; i < 2; i++) {
		CHECK_INT_EQ(ty_pg_exec(NULL, pg, "SELEC 1", 0, NULL, &err), TY_EDB);
		CHECK(strstr(err.msg, "syntax error") != NULL);
		CHECK_STR_EQ(ty_pg_sqlstate(pg), "42601");
	}
	CHECK_STR_EQ(prepared_count(pg, "SELEC 1"), "0");
	ty_pg_close(pg);
}
