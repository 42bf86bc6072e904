/*
 * The leader's Kafka clients: a consumer of trainyard.events and
 * trainyard.nodes, and the idempotent dispatch producer.
 *
 * The consumer assigns itself every partition of both topics under group
 * "trainyard-scheduler" (offsets only, never subscribe()): leadership is
 * decided by PostgreSQL, so a group rebalance would add nothing but delay -
 * a new leader would wait for a killed leader's session to time out before
 * it got the partitions.
 */
#include "fault.h"
#include "scheduler.h"
#include "ty_kafka.h"
#include "ty_log.h"
#include "ty_time.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BATCH_MAX 500
#define METADATA_TIMEOUT_MS 1000
#define PROBE_TIMEOUT_MS 1000
#define RECONNECT_MAX_MS "1000"

static const char *const consumed[] = {PROTO_TOPIC_EVENTS, PROTO_TOPIC_NODES};

/* The dispatch producer: idempotent, with the relay's delivery reports. */
static int producer_new(rd_kafka_t **out, struct sched *s, struct ty_err *err)
{
	const char *const extra[] = {"client.id=trainyard-scheduler", "message.timeout.ms=30000",
				     "reconnect.backoff.max.ms=" RECONNECT_MAX_MS, NULL};

	return ty_kafka_producer_new_dr(out, s->o.bootstrap, extra, sched_relay_dr, s, err);
}

/* Partition count of topic (0 when it does not exist). */
static int partitions(int32_t *out, rd_kafka_t *rk, const char *topic, struct ty_err *err)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	rd_kafka_resp_err_t e;

	*out = 0;
	if (!rkt)
		return ty_err_set(err, TY_EKAFKA, "cannot make a handle for topic '%s'", topic);
	e = rd_kafka_metadata(rk, 0, rkt, &md, METADATA_TIMEOUT_MS);
	rd_kafka_topic_destroy(rkt);
	if (e)
		return ty_err_set(err, TY_EKAFKA, "cannot read metadata of topic '%s': %s", topic,
				  rd_kafka_err2str(e));
	if (md->topic_cnt == 1 && !md->topics[0].err)
		*out = md->topics[0].partition_cnt;
	rd_kafka_metadata_destroy(md);
	return 0;
}

int sched_kafka_refresh(struct sched *s, struct ty_err *err)
{
	rd_kafka_topic_partition_list_t *now = NULL, *add = NULL;
	rd_kafka_error_t *e;
	int32_t n;
	int rc = 0, total = 0;

	if ((rc = partitions(&n, s->bus.producer, PROTO_TOPIC_DISPATCH, err)))
		return rc;
	if (n != s->bus.dispatch_partitions) {
		if (n > 0)
			ty_info("topic '%s' has %d partitions", PROTO_TOPIC_DISPATCH, (int)n);
		else
			ty_warn("topic '%s' does not exist: dispatch waits for it",
				PROTO_TOPIC_DISPATCH);
		s->bus.dispatch_partitions = n;
	}

	if (rd_kafka_assignment(s->bus.consumer, &now))
		return ty_err_set(err, TY_EKAFKA, "cannot read the consumer's assignment");
	add = rd_kafka_topic_partition_list_new(8);
	for (size_t t = 0; t < sizeof(consumed) / sizeof(consumed[0]); t++) {
		if ((rc = partitions(&n, s->bus.consumer, consumed[t], err)))
			goto out;
		if (n == 0)
			ty_warn("topic '%s' does not exist: nothing to consume from it yet",
				consumed[t]);
		for (int32_t p = 0; p < n; p++) {
			total++;
			if (!rd_kafka_topic_partition_list_find(now, consumed[t], p))
				/* the committed offset of the group, else the earliest */
				rd_kafka_topic_partition_list_add(add, consumed[t], p)->offset =
				    RD_KAFKA_OFFSET_STORED;
		}
	}
	if (add->cnt > 0) {
		if ((e = rd_kafka_incremental_assign(s->bus.consumer, add))) {
			rc = ty_err_set(err, TY_EKAFKA, "cannot assign partitions: %s",
					rd_kafka_error_string(e));
			rd_kafka_error_destroy(e);
			goto out;
		}
		ty_info("consuming %d partition(s) of '%s' and '%s'", total, consumed[0],
			consumed[1]);
	}
	s->bus.assigned_partitions = total;
out:
	rd_kafka_topic_partition_list_destroy(now);
	rd_kafka_topic_partition_list_destroy(add);
	return rc;
}

int sched_kafka_producer_check(struct sched *s, struct ty_err *err)
{
	char why[512];
	rd_kafka_resp_err_t e;

	if (!s->bus.producer || !(e = rd_kafka_fatal_error(s->bus.producer, why, sizeof(why))))
		return 0;
	/* an idempotent producer that lost its guarantees is replaced */
	ty_error("dispatch producer failed (%s): %s; starting a new one", rd_kafka_err2name(e),
		 why);
	rd_kafka_purge(s->bus.producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	rd_kafka_poll(s->bus.producer, 0);
	rd_kafka_destroy(s->bus.producer);
	s->bus.producer = NULL;
	/* what it delivered is deleted below (delivered ⊆ inflight, so it fits), the rest is
	 * produced again */
	s->bus.inflight.n = 0;
	for (int i = 0; i < s->bus.delivered.n; i++)
		s->bus.inflight.v[s->bus.inflight.n++] = s->bus.delivered.v[i];
	s->bus.outbox_dirty = true;
	return producer_new(&s->bus.producer, s, err);
}

/*
 * The consumer's queue writes a byte to a pipe when it goes from empty to
 * not empty, so that the loop can wait for messages and for PostgreSQL's
 * notifications at once (sched_consume): a wait in rd_kafka_consumer_poll
 * alone left a submission's NOTIFY unread for up to 100 ms.
 */
static int consumer_wakeup(struct sched *s, struct ty_err *err)
{
	int fds[2];

	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC))
		return ty_err_set(err, TY_EIO, "cannot create a pipe: %s", strerror(errno));
	if (!(s->bus.cq = rd_kafka_queue_get_consumer(s->bus.consumer))) {
		close(fds[0]);
		close(fds[1]);
		return ty_err_set(err, TY_EKAFKA, "cannot get the kafka consumer queue");
	}
	/* the pipe is open exactly while s->bus.cq is set */
	s->bus.wake[0] = fds[0];
	s->bus.wake[1] = fds[1];
	/* before any assignment, so no message can arrive unannounced */
	rd_kafka_queue_io_event_enable(s->bus.cq, s->bus.wake[1], "c", 1);
	return 0;
}

int sched_kafka_start(struct sched *s, struct ty_err *err)
{
	static const char *const extra[] = {
	    "client.id=trainyard-scheduler",
	    /* a long-poll fetch is not always woken by new data: keep it short */
	    "fetch.wait.max.ms=10",
	    /* back within a second of the broker: heartbeats are judged by the clock */
	    "reconnect.backoff.max.ms=" RECONNECT_MAX_MS,
	    NULL,
	};
	int rc;

	if ((rc = ty_kafka_consumer_new(&s->bus.consumer, s->o.bootstrap, SCHED_CONSUMER_GROUP,
					extra, err)) ||
	    (rc = consumer_wakeup(s, err)) || (rc = producer_new(&s->bus.producer, s, err)) ||
	    (rc = sched_kafka_refresh(s, err))) {
		sched_kafka_stop(s, 0);
		return rc;
	}
	return 0;
}

bool sched_kafka_reachable(struct sched *s)
{
	int64_t lo, hi;

	return s->bus.consumer && s->bus.assigned_partitions > 0 &&
	       rd_kafka_query_watermark_offsets(s->bus.consumer, PROTO_TOPIC_NODES, 0, &lo, &hi,
						PROBE_TIMEOUT_MS) == RD_KAFKA_RESP_ERR_NO_ERROR;
}

static void batch_drop(struct sched *s)
{
	for (int i = 0; i < s->in.nbatch; i++) {
		if (s->in.bok[i])
			proto_msg_clear(&s->in.bmsg[i]);
		rd_kafka_message_destroy(s->in.batch[i]);
	}
	s->in.nbatch = 0;
}

void sched_kafka_stop(struct sched *s, int flush_ms)
{
	batch_drop(s);
	free(s->in.batch);
	free(s->in.bmsg);
	free(s->in.bok);
	s->in.batch = NULL;
	s->in.bmsg = NULL;
	s->in.bok = NULL;
	if (s->bus.producer) {
		if (flush_ms > 0) {
			/* delivery reports arrive during the flush */
			rd_kafka_flush(s->bus.producer, flush_ms);
		} else {
			rd_kafka_purge(s->bus.producer,
				       RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
			rd_kafka_poll(s->bus.producer, 0);
		}
		rd_kafka_destroy(s->bus.producer);
		s->bus.producer = NULL;
	}
	if (s->bus.cq) {
		rd_kafka_queue_io_event_enable(s->bus.cq, -1, NULL, 0);
		rd_kafka_queue_destroy(s->bus.cq);
		s->bus.cq = NULL;
		close(s->bus.wake[0]);
		close(s->bus.wake[1]);
	}
	if (s->bus.consumer) {
		ty_kafka_destroy(s->bus.consumer, 0);
		s->bus.consumer = NULL;
	}
	s->bus.inflight.n = 0;
	s->bus.delivered.n = 0;
	sched_late_exits_clear(s);
	s->bus.dispatch_partitions = 0;
	s->bus.assigned_partitions = 0;
}

/*
 * Whether a decoded message is its node's: the MAC in its header under the
 * key of the node its envelope names. Logged and counted when not.
 */
static bool authentic(struct sched *s, const rd_kafka_message_t *km, const struct proto_msg *m)
{
	char key[PROTO_NODE_KEY_LEN + 1], macbuf[PROTO_NODE_KEY_LEN + 2];
	const char *mac = proto_header(macbuf, sizeof(macbuf), km, PROTO_HDR_MAC);
	enum proto_reject why;

	proto_node_key(key, s->o.node_secret, s->o.node_secret_len, m->node);
	why = proto_check_mac(key, km->payload, km->len, mac);
	memset(key, 0, sizeof(key));
	if (why == PROTO_AUTHENTIC)
		return true;
	sched_metrics_rejected(s, why);
	ty_warn("refusing %s message claiming node '%s' at %s [%d] offset %lld (%s): %s",
		proto_type_name(m->type), m->node, rd_kafka_topic_name(km->rkt),
		(int)km->partition, (long long)km->offset, proto_reject_name(why),
		why == PROTO_REJECT_UNSIGNED ? "no '" PROTO_HDR_MAC "' header"
					     : "its MAC is not that node's key's");
	return false;
}

/*
 * Add a polled message to the batch (errors are counted and dropped),
 * decoded and authenticated once: a malformed or refused one stays in the
 * batch only for its offset.
 */
static void take(struct sched *s, rd_kafka_message_t *km)
{
	struct proto_msg *m = &s->in.bmsg[s->in.nbatch];
	struct ty_err merr = {0};

	if (km->err) {
		if (km->err != RD_KAFKA_RESP_ERR__PARTITION_EOF) {
			sched_metrics_kafka_error(s->metrics, SCHED_KAFKA_CONSUME);
			ty_warn("kafka consumer: %s", rd_kafka_message_errstr(km));
		}
		rd_kafka_message_destroy(km);
		return;
	}
	s->in.bok[s->in.nbatch] = false;
	if (proto_decode(m, km->payload ? km->payload : "", km->payload ? km->len : 0, &merr)) {
		s->in.malformed++;
		ty_warn("skipping malformed message at %s [%d] offset %lld: %s",
			rd_kafka_topic_name(km->rkt), (int)km->partition, (long long)km->offset,
			merr.msg);
	} else if (!authentic(s, km, m)) {
		proto_msg_clear(m);
	} else {
		s->in.bok[s->in.nbatch] = true;
	}
	s->in.batch[s->in.nbatch++] = km;
}

/*
 * Up to wait_ms for a message or for data on the database connection (a
 * notification), whichever comes first.
 */
static void wait_for_work(struct sched *s, int wait_ms)
{
	PGconn *conn = s->term.pg ? ty_pg_conn(s->term.pg) : NULL;
	struct pollfd p[2] = {{.fd = s->bus.wake[0], .events = POLLIN}, {.fd = -1}};
	char buf[64];

	if (conn && PQstatus(conn) == CONNECTION_OK && !ty_pg_in_tx(s->term.pg))
		p[1] = (struct pollfd){.fd = PQsocket(conn), .events = POLLIN};
	if (poll(p, 2, wait_ms) > 0 && (p[0].revents & POLLIN))
		while (read(s->bus.wake[0], buf, sizeof(buf)) > 0)
			; /* drained: a write after this is a new wake-up */
}

void sched_consume(struct sched *s, int wait_ms)
{
	rd_kafka_message_t *km;

	if (s->in.nbatch > 0) /* a batch that failed to apply is retried first */
		return;
	if (!s->in.batch) {
		s->in.batch = calloc(BATCH_MAX, sizeof(*s->in.batch));
		s->in.bmsg = calloc(BATCH_MAX, sizeof(*s->in.bmsg));
		s->in.bok = calloc(BATCH_MAX, sizeof(*s->in.bok));
		if (!s->in.batch || !s->in.bmsg || !s->in.bok) {
			free(s->in.batch);
			free(s->in.bmsg);
			free(s->in.bok);
			s->in.batch = NULL;
			s->in.bmsg = NULL;
			s->in.bok = NULL;
			return;
		}
	}
	if (wait_ms > 0 && s->bus.cq) {
		if ((km = rd_kafka_consumer_poll(s->bus.consumer, 0)))
			take(s, km);
		else
			wait_for_work(s, wait_ms);
		wait_ms = 0;
	}
	while (s->in.nbatch < BATCH_MAX) {
		if (!(km =
			  rd_kafka_consumer_poll(s->bus.consumer, s->in.nbatch == 0 ? wait_ms : 0)))
			break;
		take(s, km);
	}
	s->in.lagging = s->in.nbatch == BATCH_MAX;
}

/* The next offset of every partition the batch touched. */
static rd_kafka_topic_partition_list_t *batch_offsets(struct sched *s)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);

	for (int i = 0; i < s->in.nbatch; i++) {
		const rd_kafka_message_t *km = s->in.batch[i];
		const char *topic = rd_kafka_topic_name(km->rkt);
		rd_kafka_topic_partition_t *tp =
		    rd_kafka_topic_partition_list_find(l, topic, km->partition);

		if (!tp)
			tp = rd_kafka_topic_partition_list_add(l, topic, km->partition);
		if (km->offset + 1 > tp->offset)
			tp->offset = km->offset + 1;
	}
	return l;
}

/*
 * Whether a failed apply may succeed when retried (the batch is kept) rather
 * than being the message's fault (the message is skipped): lost connection,
 * fencing, memory, and SQLSTATE classes 40 (deadlock, serialization),
 * 53 (resources), 55 (lock not available), 57 (shutdown), 08 (connection).
 */
static bool transient(int rc, const char *sqlstate)
{
	static const char *const classes[] = {"40", "53", "55", "57", "08", NULL};

	if (rc == TY_EUNAVAIL || rc == TY_ENOMEM || rc == TY_EFENCED)
		return true;
	for (int i = 0; classes[i]; i++)
		if (!strncmp(sqlstate, classes[i], 2))
			return true;
	return false;
}

#define APPLY_BAD 1 /* apply_fast: a message's own fault; redo the batch carefully */

/* Apply batch message i under a savepoint: a bad one is skipped, not fatal. */
static int apply_one(struct sched *s, int i, struct ty_err *err)
{
	const struct proto_msg *m = &s->in.bmsg[i];
	struct sched_store_mark mark = {0};
	struct ty_err merr = {0};
	int rc;

	if (!s->in.bok[i])
		return 0; /* malformed or refused: counted when taken */
	if ((rc = sched_store_savepoint(&mark, s->term.pg, &s->term.store, SCHED_SAVEPOINT_MSG,
					err)))
		goto out;
	if ((rc = sched_apply(s, m, &merr))) {
		if (transient(rc, ty_pg_sqlstate(s->term.pg))) {
			ty_err_set(err, rc, "%s", merr.msg);
			goto out;
		}
		s->in.malformed++;
		ty_warn("skipping %s message from node '%s' (job %lld attempt %lld): %s",
			proto_type_name(m->type), m->node, (long long)m->job, (long long)m->attempt,
			merr.msg);
		rc = sched_store_savepoint_rollback(s->term.pg, &s->term.store, SCHED_SAVEPOINT_MSG,
						    mark, err);
		goto out;
	}
	rc = sched_store_savepoint_release(s->term.pg, SCHED_SAVEPOINT_MSG, err);
out:
	return rc;
}

/*
 * The batch in one go, without savepoints: the rank events (most of the
 * batch) in two statements, plain heartbeats, launch acknowledgements and
 * attempt_running in one each, plain successful exits in a few, then the
 * rest in order. A message's own fault
 * is APPLY_BAD (the caller redoes the batch carefully).
 */
static int apply_fast(struct sched *s, struct ty_err *err)
{
	const struct proto_msg *m = s->in.bmsg;
	const bool *ok = s->in.bok;
	bool *done = calloc((size_t)s->in.nbatch, sizeof(*done)), bad;
	int rc = 0;

	if (!done) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = sched_apply_ranks(s, m, ok, s->in.nbatch, done, &bad, err)) ||
	    (rc = sched_apply_heartbeats(s, m, ok, s->in.nbatch, done, err)) ||
	    (rc = sched_apply_acks(s, m, ok, s->in.nbatch, done, err)) ||
	    (rc = sched_apply_running(s, m, ok, s->in.nbatch, done, err)) ||
	    (rc = sched_apply_exits(s, m, ok, s->in.nbatch, done, err)))
		goto fail;
	if (bad) {
		ty_debug("a rank event names a rank outside its node's range: applying the batch "
			 "again message by message");
		rc = APPLY_BAD;
		goto out;
	}
	for (int i = 0; i < s->in.nbatch && !rc; i++) {
		if (!ok[i] || done[i])
			continue;
		if ((rc = sched_apply(s, &m[i], err)))
			goto fail;
	}
	goto out;
fail:
	if (!transient(rc, ty_pg_sqlstate(s->term.pg))) {
		ty_debug("applying a batch failed (%s): again message by message", err->msg);
		rc = APPLY_BAD;
	}
out:
	free(done);
	return rc;
}

/* Whether the batch holds a message of trainyard.events (not only node messages). */
static bool batch_has_events(const struct sched *s)
{
	for (int i = 0; i < s->in.nbatch; i++)
		if (!strcmp(rd_kafka_topic_name(s->in.batch[i]->rkt), PROTO_TOPIC_EVENTS))
			return true;
	return false;
}

int sched_consume_apply(struct sched *s, struct ty_err *err)
{
	rd_kafka_topic_partition_list_t *offsets = NULL;
	rd_kafka_resp_err_t e;
	int rc;

	if (s->in.nbatch == 0)
		return 0;
	/* first in one go; should a message be bad, again with a savepoint each */
	for (bool careful = false;; careful = true) {
		if ((rc = sched_tx_begin(&s->term, err)))
			return rc;
		if (!careful)
			rc = apply_fast(s, err);
		for (int i = 0; careful && i < s->in.nbatch && !rc; i++)
			rc = apply_one(s, i, err);
		if (!rc)
			break;
		ty_pg_rollback(s->term.pg);
		sched_mirror_stale(&s->world.mirror, "event batch rolled back");
		if (rc != APPLY_BAD || careful)
			return rc; /* the batch is kept and applied again */
	}
	if (sched_fault_armed && batch_has_events(s))
		SCHED_FAULT(SCHED_FAULT_EVENTS_BEFORE_COMMIT);
	if ((rc = sched_tx_commit(&s->term, err))) {
		sched_mirror_stale(&s->world.mirror, "event batch commit failed");
		return rc;
	}
	if (sched_fault_armed && batch_has_events(s))
		SCHED_FAULT(SCHED_FAULT_EVENTS_AFTER_COMMIT);
	/* only now may Kafka forget these messages */
	offsets = batch_offsets(s);
	/* asynchronous: a broker outage must not stall the loop (and its liveness clock) */
	if ((e = rd_kafka_commit(s->bus.consumer, offsets, 1)))
		ty_warn("cannot commit consumer offsets (the events will be applied again, "
			"harmlessly): %s",
			rd_kafka_err2str(e));
	rd_kafka_topic_partition_list_destroy(offsets);
	ty_debug("applied %d message(s)", s->in.nbatch);
	batch_drop(s);
	return 0;
}
