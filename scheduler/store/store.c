/* The buffers' bookkeeping, and the commit of a fenced transaction that writes them first. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

static void bufs_truncate(struct sched_store_events *ev, const struct sched_store_mark *m)
{
	struct ty_buf *b[] = {&ev->job, &ev->type, &ev->state, &ev->message, &ev->data};
	const size_t len[] = {m->job, m->type, m->state, m->message, m->data};

	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++)
		if (b[i]->data && len[i] <= b[i]->len) {
			b[i]->len = len[i];
			b[i]->data[len[i]] = '\0';
		}
}

struct sched_store_mark sched_store_mark(const struct sched_store *st)
{
	return (struct sched_store_mark){
	    .nev = st->ev.n,
	    .nob = st->ob.n,
	    .job = st->ev.job.len,
	    .type = st->ev.type.len,
	    .state = st->ev.state.len,
	    .message = st->ev.message.len,
	    .data = st->ev.data.len,
	};
}

void sched_store_rewind(struct sched_store *st, struct sched_store_mark m)
{
	bufs_truncate(&st->ev, &m);
	if (m.nev < st->ev.n)
		st->ev.n = m.nev;
	for (int i = m.nob; i < st->ob.n; i++)
		json_decref(st->ob.v[i].data);
	if (m.nob < st->ob.n)
		st->ob.n = m.nob;
}

void sched_store_reset(struct sched_store *st)
{
	sched_store_rewind(st, (struct sched_store_mark){0});
	/* an aborted flush may have closed the literals: start them again */
	ty_buf_reset(&st->ev.job);
	ty_buf_reset(&st->ev.type);
	ty_buf_reset(&st->ev.state);
	ty_buf_reset(&st->ev.message);
	ty_buf_reset(&st->ev.data);
}

void sched_store_free(struct sched_store *st)
{
	sched_store_reset(st);
	ty_buf_free(&st->ev.job);
	ty_buf_free(&st->ev.type);
	ty_buf_free(&st->ev.state);
	ty_buf_free(&st->ev.message);
	ty_buf_free(&st->ev.data);
	free(st->ob.v);
	memset(st, 0, sizeof(*st));
}

int sched_store__arr_add(struct ty_buf *b, const char *v)
{
	ty_buf_puts(b, b->len ? "," : "{");
	if (!v) {
		ty_buf_puts(b, "NULL");
	} else {
		ty_buf_puts(b, "\"");
		for (const char *p = v; *p; p++) {
			size_t n = strcspn(p, "\"\\");

			ty_buf_append(b, p, n);
			p += n;
			if (!*p)
				break;
			ty_buf_append(b, "\\", 1);
			ty_buf_append(b, p, 1);
		}
		ty_buf_puts(b, "\"");
	}
	return b->oom ? TY_ENOMEM : 0;
}

int sched_store__arr_i64(struct ty_buf *b, int64_t v)
{
	char buf[24];

	return sched_store__arr_add(b, sched_i64(buf, v));
}

int sched_store__arr_end(struct ty_buf *b)
{
	ty_buf_puts(b, b->len ? "}" : "{}");
	return b->oom ? TY_ENOMEM : 0;
}

int sched_store_flush(struct sched_term *t, struct ty_err *err)
{
	int rc;

	if ((rc = sched_store__events_flush(t, err)) || (rc = sched_store__outbox_flush(t, err)))
		return rc;
	sched_store_reset(&t->store);
	return 0;
}

int sched_tx_commit(struct sched_term *t, struct ty_err *err)
{
	int rc = sched_store_flush(t, err);

	sched_store_reset(&t->store);
	if (rc) {
		ty_pg_rollback(t->pg);
		return rc;
	}
	return ty_pg_commit(t->pg, err);
}

void sched_store_strs_free(char **v, int n)
{
	for (int i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

int64_t sched_col_i64(const PGresult *res, int row, int col)
{
	const char *v = ty_pg_val(res, row, col);

	return v ? strtoll(v, NULL, 10) : 0;
}
