/* The schema migrations, embedded at build time from migrations/NNNN_*.sql. */
#ifndef TY_MIGRATIONS_H
#define TY_MIGRATIONS_H

#include "ty_pg.h"

extern const struct ty_migration ty_migrations[];
extern const int ty_migrations_count;
/*
 * The newest migration's version: the schema every program of this build
 * needs, whatever its SQL uses (migrations/README.md). Derived from the
 * files, so a new migration raises it without anyone remembering to.
 */
extern const int ty_migrations_newest;

/*
 * 0 when the database's schema is at ty_migrations_newest or later (a newer
 * one serves older binaries during an upgrade); TY_ESTATE, with a message
 * naming the version found, the one needed and program (e.g. "scheduler"),
 * when it is older or missing; the statement's own code when the query
 * fails otherwise.
 */
int ty_schema_check(struct ty_pg *pg, const char *program, struct ty_err *err);

#endif
