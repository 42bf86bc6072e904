/*
 * The schema's CHECK constraints and proto/lifecycle.h list the same job,
 * attempt and node states and failure classes. And the schema check: on a database below this build's newest migration the
 * scheduler does not lead and says which migration it found and which it
 * needs, at every version from none to the newest but one, applied one at
 * a time under one waiting scheduler; at the newest it leads.
 */
#include "fixture.h"
#include "lifecycle.h"
#include "migrations.h"
#include "ty_pg.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T 15000

/* Poll scheduler i's log until it holds want (true) or ms pass (false). */
static bool log_has(struct fx *f, int i, const char *want, int ms)
{
	for (int waited = 0; waited <= ms; waited += 50) {
		struct timespec ts = {0, 50 * 1000 * 1000};

		if (strstr(fx_sched_log(f, i), want))
			return true;
		nanosleep(&ts, NULL);
	}
	FAIL("the scheduler's log never said \"%s\"", want);
	return false;
}

TY_TEST(waits_at_every_older_schema_and_leads_at_the_newest)
{
	struct fx *f = fx_start();
	const char *db = ty_test_db_new();
	const int newest = ty_migrations_newest;
	const char *const extra[] = {"--database-url", db, NULL};
	struct ty_pg *pg = NULL;
	struct ty_err err = {0};
	int s, applied = 0;

	REQUIRE(ty_migrations_count > 1);
	REQUIRE_INT_EQ(newest, ty_migrations[ty_migrations_count - 1].version);
	REQUIRE_INT_EQ(ty_pg_connect(&pg, db, &err), 0);
	s = fx_sched_start(f, "sched-schema", extra); /* a later --database-url wins */
	log_has(f, s,
		ty_test_strf("cannot take the lead: the database has no schema, this scheduler "
			     "needs migration %04d: run 'trainyard-api --migrate'",
			     newest),
		T);
	for (int k = 0; k < ty_migrations_count - 1; k++) {
		ty_test_context("after %04d_%s", ty_migrations[k].version, ty_migrations[k].name);
		REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, ty_migrations, k + 1, &err), 0);
		CHECK_INT_EQ(applied, 1);
		log_has(f, s,
			ty_test_strf("cannot take the lead: the database schema is at migration "
				     "%04d, this scheduler needs %04d: run 'trainyard-api --migrate'",
				     ty_migrations[k].version, newest),
			T);
		CHECK(strstr(fx_sched_log(f, s), "leading as") == NULL);
	}
	ty_test_context(NULL);
	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, ty_migrations, ty_migrations_count, &err), 0);
	CHECK_INT_EQ(applied, 1);
	log_has(f, s, "leading as 'sched-schema' with epoch 1", T);
	fx_sched_stop(f, s);
	ty_pg_close(pg);
}

/*
 * The quoted names of the CHECK constraint on table.column, sorted and
 * comma-joined (as the constraint's definition lists them).
 */
static char *check_names(struct ty_pg *pg, const char *table, const char *column)
{
	const char *p[] = {table, column};
	PGresult *res = NULL;
	struct ty_err err = {0};
	char *out;

	REQUIRE_INT_EQ(
	    ty_pg_exec(&res, pg,
		       "SELECT string_agg(DISTINCT m[1], ',' ORDER BY m[1]) FROM pg_constraint c,"
		       " regexp_matches(pg_get_constraintdef(c.oid), '''([a-z_]+)''', 'g') m"
		       " WHERE c.conrelid = $1::regclass AND c.contype = 'c'"
		       " AND pg_get_constraintdef(c.oid) LIKE '%(' || $2 || ' %'",
		       2, p, &err),
	    0);
	out = strdup(PQgetisnull(res, 0, 0) ? "" : PQgetvalue(res, 0, 0));
	PQclear(res);
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* names[0..n) sorted and comma-joined. */
static char *joined(const char **names, int n)
{
	static char buf[1024];
	size_t o = 0;

	qsort(names, (size_t)n, sizeof(*names), cmp_str);
	buf[0] = '\0';
	for (int i = 0; i < n; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? "," : "", names[i]);
	return buf;
}

TY_TEST(the_schema_and_proto_name_the_same_states_and_classes)
{
	const char *db = ty_test_db_new();
	struct ty_pg *pg = NULL;
	struct ty_err err = {0};
	const char *names[32];
	char *got;
	int applied = 0, n;

	REQUIRE_INT_EQ(ty_pg_connect(&pg, db, &err), 0);
	REQUIRE_INT_EQ(ty_pg_migrate(&applied, pg, ty_migrations, ty_migrations_count, &err), 0);

	n = 0;
#define NAME3(name, str, x) names[n++] = str;
	PROTO_JOB_STATES(NAME3)
	got = check_names(pg, "jobs", "state");
	CHECK_STR_EQ(got, joined(names, n));
	free(got);

	n = 0;
	PROTO_ATTEMPT_STATES(NAME3)
#undef NAME3
	got = check_names(pg, "attempts", "state");
	CHECK_STR_EQ(got, joined(names, n));
	free(got);

	n = 0;
#define NAME2(name, str) names[n++] = str;
	PROTO_NODE_STATES(NAME2)
#undef NAME2
	got = check_names(pg, "nodes", "state");
	CHECK_STR_EQ(got, joined(names, n));
	free(got);

	n = 0;
#define NAME5(name, str, budget, blames, infra) names[n++] = str;
	PROTO_FAILURE_CLASSES(NAME5)
#undef NAME5
	got = check_names(pg, "attempts", "failure_class");
	CHECK_STR_EQ(got, joined(names, n));
	free(got);
	ty_pg_close(pg);
}
