/* The schema migrations, embedded at build time from migrations/NNNN_*.sql. */
#ifndef TY_MIGRATIONS_H
#define TY_MIGRATIONS_H

#include "ty_pg.h"

extern const struct ty_migration ty_migrations[];
extern const int ty_migrations_count;

#endif
