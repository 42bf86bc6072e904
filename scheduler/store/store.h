/*
 * The scheduler's writes that are buffered during a fenced transaction and
 * written set-based just before it commits: job events and dispatch outbox
 * rows (events.c, outbox.c), and the transaction's commit (store.c).
 * Included by scheduler.h, which declares the calls that take a struct sched.
 */
#ifndef TY_SCHED_STORE_H
#define TY_SCHED_STORE_H

#include "proto.h"
#include "ty_buf.h"

#include <stdint.h>

/*
 * One transaction's buffered rows. Events are kept as the PostgreSQL array
 * literals ty_job_events() takes (one per column, the closing brace added
 * at the flush), so a savepoint's mark is a length per column; outbox rows
 * as messages without their seq, which is drawn at the flush.
 */
struct sched_store {
	struct sched_store_events {
		int n;
		struct ty_buf job, type, state, message, data;
	} ev;
	struct sched_store_outbox {
		int n, cap;
		struct proto_msg *v; /* .seq 0 until the flush; .data a reference */
	} ob;
};

/* Where the buffers stood at a savepoint (sched_store_mark). */
struct sched_store_mark {
	int nev, nob;
	size_t job, type, state, message, data;
};

/* Forget everything buffered (a new transaction; the last one committed or rolled back). */
void sched_store_reset(struct sched_store *st);
void sched_store_free(struct sched_store *st);
/* The buffers' lengths now, for sched_store_rewind at a ROLLBACK TO SAVEPOINT. */
struct sched_store_mark sched_store_mark(const struct sched_store *st);
/* Drop what was buffered after mark m. */
void sched_store_rewind(struct sched_store *st, struct sched_store_mark m);

/*
 * Append v to a PostgreSQL array literal being built in b ("{" first, ","
 * between; NULL: an SQL NULL). Returns 0 or TY_ENOMEM. sched_store__arr_end
 * closes it ("{}" when empty).
 */
int sched_store__arr_add(struct ty_buf *b, const char *v);
int sched_store__arr_end(struct ty_buf *b);

#endif
