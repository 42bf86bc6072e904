/*
 * Dispatch outbox rows: appended to the transaction's buffer; at its commit
 * their ids are drawn from the outbox's sequence in one statement, the
 * messages encoded with those ids as seq, and all rows inserted in another.
 */
#include "scheduler.h"
#include "ty_time.h"

#include <stdio.h>

#include <stdlib.h>
#include <string.h>

static const char SQL_IDS[] =
    "SELECT nextval(pg_get_serial_sequence('dispatch_outbox', 'id'))"
    " FROM generate_series(1, $1::integer)";
static const char SQL_INSERT[] =
    "INSERT INTO dispatch_outbox (id, node_id, epoch, payload)"
    " SELECT id, node, $3::bigint, payload FROM unnest($1::bigint[], $2::text[], $4::text[])"
    " AS o(id, node, payload)";

int sched_outbox_add(struct sched *s, enum proto_type type, const char *node, int64_t job,
		     int64_t attempt, json_t *data, struct ty_err *err)
{
	struct sched_store_outbox *ob = &s->term.store.ob;
	struct proto_msg *m;
	char *payload = NULL;
	size_t len;
	int rc;

	if (ob->n == ob->cap) {
		int cap = ob->cap ? ob->cap * 2 : 64;
		struct proto_msg *v = realloc(ob->v, (size_t)cap * sizeof(*v));

		if (!v)
			return ty_err_set(err, TY_ENOMEM, NULL);
		ob->v = v;
		ob->cap = cap;
	}
	m = &ob->v[ob->n++];
	*m = (struct proto_msg){
	    .type = type,
	    .job = job,
	    .attempt = attempt,
	    .epoch = s->term.epoch,
	    .ts = ty_wall_ms(),
	    .data = json_incref(data),
	};
	snprintf(m->node, sizeof(m->node), "%s", node);
	/* refused now, not at the commit: a bad message fails its own decision alone */
	if ((rc = proto_encode(&payload, &len, m, err))) {
		json_decref(m->data);
		ob->n--;
		return rc;
	}
	free(payload);
	s->bus.outbox_dirty = true;
	return 0;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int sched_store__outbox_flush(struct sched_term *t, struct ty_err *err)
{
	struct sched_store_outbox *ob = &t->store.ob;
	struct ty_buf ids = {0}, nodes = {0}, payloads = {0};
	PGresult *res = NULL;
	int64_t *seq = NULL;
	char nb[24], eb[24];
	int rc;

	if (ob->n == 0)
		return 0;
	const char *pn[] = {sched_i64(nb, ob->n)};

	if ((rc = ty_pg_exec(&res, t->pg, SQL_IDS, 1, pn, err)))
		goto out;
	if (PQntuples(res) != ob->n) {
		rc = ty_err_set(err, TY_EDB, "drew %d outbox ids, wanted %d", PQntuples(res), ob->n);
		goto out;
	}
	if (!(seq = malloc((size_t)ob->n * sizeof(*seq)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < ob->n; i++)
		seq[i] = sched_col_i64(res, i, 0);
	/* in the order written, as one row at a time drew them */
	qsort(seq, (size_t)ob->n, sizeof(*seq), cmp_i64);
	for (int i = 0; i < ob->n && !rc; i++) {
		char *payload = NULL;
		size_t len;

		ob->v[i].seq = seq[i];
		if ((rc = proto_encode(&payload, &len, &ob->v[i], err)))
			break;
		if (sched_store__arr_add(&ids, sched_i64(nb, seq[i])) ||
		    sched_store__arr_add(&nodes, ob->v[i].node) ||
		    sched_store__arr_add(&payloads, payload))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
		free(payload);
	}
	if (!rc && (sched_store__arr_end(&ids) || sched_store__arr_end(&nodes) ||
		    sched_store__arr_end(&payloads)))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	if (!rc) {
		const char *p[] = {ids.data, nodes.data, sched_i64(eb, t->epoch), payloads.data};

		rc = ty_pg_exec(NULL, t->pg, SQL_INSERT, 4, p, err);
	}
out:
	PQclear(res);
	free(seq);
	ty_buf_free(&ids);
	ty_buf_free(&nodes);
	ty_buf_free(&payloads);
	return rc;
}
