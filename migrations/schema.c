/* The one schema check of every program that runs SQL: is the database at this build's migration. */
#include "migrations.h"

#include <stdlib.h>
#include <string.h>

int ty_schema_check(struct ty_pg *pg, const char *program, struct ty_err *err)
{
	PGresult *res = NULL;
	const char *v;
	long have;
	int rc;

	rc = ty_pg_exec(&res, pg, "SELECT coalesce(max(version), 0) FROM schema_migrations", 0,
			NULL, err);
	if (rc) {
		if (!strcmp(ty_pg_sqlstate(pg), "42P01")) { /* undefined_table */
			ty_err_clear(err);
			rc = ty_err_set(err, TY_ESTATE,
					"the database has no schema, this %s needs migration %04d: "
					"run 'trainyard-api --migrate'",
					program, ty_migrations_newest);
		}
		PQclear(res);
		return rc;
	}
	v = ty_pg_val(res, 0, 0);
	have = v ? strtol(v, NULL, 10) : 0;
	PQclear(res);
	if (have < ty_migrations_newest)
		return ty_err_set(err, TY_ESTATE,
				  "the database schema is at migration %04ld, this %s needs %04d: "
				  "run 'trainyard-api --migrate'",
				  have, program, ty_migrations_newest);
	return 0;
}
