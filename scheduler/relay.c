/*
 * The outbox relay: every dispatch_outbox row is produced to its node's
 * partition of trainyard.dispatch, at most once at a time per process, and
 * deleted only after Kafka acknowledged it. A failed delivery leaves the row
 * to be produced again on the next pass. Each carries the scheduler's
 * signature of its exact bytes (PROTO_HDR_SIG), made as it is produced: the
 * payload in the table is what executors verify.
 */
#include "fault.h"
#include "scheduler.h"
#include "ty_log.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(void *) >= sizeof(int64_t), "outbox ids travel as message opaques");

void sched_ids_free(struct sched_ids *ids)
{
	free(ids->v);
	memset(ids, 0, sizeof(*ids));
}

static int ids_find(const struct sched_ids *ids, int64_t id)
{
	int lo = 0, hi = ids->n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (ids->v[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int ids_add(struct sched_ids *ids, int64_t id)
{
	int at = ids_find(ids, id);

	if (at < ids->n && ids->v[at] == id)
		return 0;
	if (ids->n == ids->cap) {
		int cap = ids->cap ? ids->cap * 2 : 256;
		int64_t *v = realloc(ids->v, (size_t)cap * sizeof(*v));

		if (!v)
			return TY_ENOMEM;
		ids->v = v;
		ids->cap = cap;
	}
	memmove(ids->v + at + 1, ids->v + at, (size_t)(ids->n - at) * sizeof(*ids->v));
	ids->v[at] = id;
	ids->n++;
	return 0;
}

static void ids_del(struct sched_ids *ids, int64_t id)
{
	int at = ids_find(ids, id);

	if (at >= ids->n || ids->v[at] != id)
		return;
	memmove(ids->v + at, ids->v + at + 1, (size_t)(ids->n - at - 1) * sizeof(*ids->v));
	ids->n--;
}

void sched_relay_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct sched *s = opaque;
	int64_t id = (int64_t)(intptr_t)m->_private;

	if (m->err) {
		/* produced again on the next pass */
		ids_del(&s->bus.inflight, id);
		if (m->err != RD_KAFKA_RESP_ERR__PURGE_QUEUE &&
		    m->err != RD_KAFKA_RESP_ERR__PURGE_INFLIGHT) {
			sched_metrics_kafka_error(s->metrics, SCHED_KAFKA_DELIVERY);
			ty_warn("delivery of outbox row %lld failed: %s", (long long)id,
				rd_kafka_err2str(m->err));
		}
		return;
	}
	/* out of memory: produce again rather than lose it */
	if (ids_add(&s->bus.delivered, id))
		ids_del(&s->bus.inflight, id);
}

int sched_relay(struct sched_bus *b, struct ty_pg *pg, const struct ty_ed25519_key *key,
		struct sched_metrics *m, struct ty_err *err)
{
	struct sched_store_outbox_row *v = NULL;
	int rc = 0, sent = 0, n = 0;

	if (!b->producer || b->dispatch_partitions <= 0)
		return 0;
	if ((rc = sched_store_outbox_next(&v, &n, pg, b->inflight.v, b->inflight.n, err)))
		return rc;
	for (int i = 0; i < n; i++) {
		int64_t id = v[i].id;
		const char *node = v[i].node;
		const char *payload = v[i].payload;
		size_t len = v[i].len;
		char sig[TY_ED25519_SIG_HEX_LEN + 1];
		rd_kafka_resp_err_t e;

		if (proto_sign(sig, key, payload, len)) {
			ty_error("cannot sign outbox row %lld for node '%s': left for the next pass",
				 (long long)id, node);
			continue;
		}
		e = rd_kafka_producev(
		    b->producer, RD_KAFKA_V_TOPIC(PROTO_TOPIC_DISPATCH),
		    RD_KAFKA_V_PARTITION(proto_node_partition(node, b->dispatch_partitions)),
		    RD_KAFKA_V_KEY(node, strlen(node)), RD_KAFKA_V_VALUE((void *)payload, len),
		    RD_KAFKA_V_HEADER(PROTO_HDR_SIG, sig, TY_ED25519_SIG_HEX_LEN),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		    RD_KAFKA_V_OPAQUE((void *)(intptr_t)id), RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		if (e) {
			sched_metrics_kafka_error(m, SCHED_KAFKA_PRODUCE);
			ty_warn("cannot produce outbox row %lld for node '%s': %s", (long long)id,
				node, rd_kafka_err2str(e));
			continue;
		}
		if (ids_add(&b->inflight, id)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			break;
		}
		sent++;
		if (sched_fault_armed && sent == 1 && n > 1 &&
		    sched_fault_due(SCHED_FAULT_RELAY_MID)) {
			/* the first row really is on the broker */
			rd_kafka_flush(b->producer, 5000);
			sched_fault_crash(SCHED_FAULT_RELAY_MID);
		}
	}
	if (sent)
		ty_debug("relayed %d dispatch message(s)", sent);
	sched_metrics_outbox(m, n - sent, b->inflight.n);
	sched_store_outbox_rows_free(v, n);
	return rc;
}

int sched_relay_settle(struct sched *s, struct ty_err *err)
{
	int rc;

	if (!s->bus.producer)
		return 0;
	rd_kafka_poll(s->bus.producer, 0);
	if ((rc = sched_kafka_producer_check(s, err)))
		return rc;
	if (s->bus.delivered.n == 0)
		return 0;
	SCHED_FAULT(SCHED_FAULT_RELAY_AFTER_SEND);
	if ((rc = sched_tx_begin(&s->term, err)))
		return rc;
	if ((rc = sched_store_outbox_delete(s->term.pg, s->bus.delivered.v, s->bus.delivered.n,
					    err))) {
		ty_pg_rollback(s->term.pg);
		return rc;
	}
	if ((rc = sched_tx_commit(&s->term, err)))
		return rc;
	for (int i = 0; i < s->bus.delivered.n; i++)
		ids_del(&s->bus.inflight, s->bus.delivered.v[i]);
	s->bus.delivered.n = 0;
	return 0;
}
