/*
 * Kafka over librdkafka: configuration, an idempotent producer and a
 * consumer. Topic names live in proto/; this layer knows none of them.
 */
#ifndef TY_KAFKA_H
#define TY_KAFKA_H

#include "ty_err.h"

#include <librdkafka/rdkafka.h>
#include <stddef.h>

/*
 * Bootstrap servers from `spec`: either a "host:port,..." list or "@PATH",
 * a file whose first line is that list (the embedded broker writes one).
 * Result copied to out.
 */
int ty_kafka_bootstrap(char *out, size_t outsz, const char *spec, struct ty_err *err);

/*
 * New producer in *out: idempotent (enable.idempotence), acks=all, with the
 * extra "key=value" settings in extra (NULL-terminated, may be NULL).
 */
int ty_kafka_producer_new(rd_kafka_t **out, const char *bootstrap, const char *const *extra,
			  struct ty_err *err);

/*
 * The same, with a delivery-report callback (rd_kafka_conf_set_dr_msg_cb)
 * and the opaque it receives (rd_kafka_opaque()); dr may be NULL.
 */
int ty_kafka_producer_new_dr(rd_kafka_t **out, const char *bootstrap, const char *const *extra,
			     void (*dr)(rd_kafka_t *, const rd_kafka_message_t *, void *),
			     void *opaque, struct ty_err *err);

/*
 * New consumer in *out in consumer group `group`, auto-commit off (callers
 * commit after their own durable write), with extra settings as above.
 */
int ty_kafka_consumer_new(rd_kafka_t **out, const char *bootstrap, const char *group,
			  const char *const *extra, struct ty_err *err);

/*
 * The operator's librdkafka properties (TLS, SASL, timeouts, ...) for every
 * producer and consumer this process makes from now on, applied after
 * Trainyard's own: a file of "key = value" lines, '#' comments and blank
 * lines (as Kafka's client.properties). Each is checked now: an unknown
 * key or bad value, a property Trainyard sets itself (bootstrap.servers,
 * group.id, enable.idempotence, acks, enable.auto.commit), an unreadable
 * "*.location" file, or a set librdkafka cannot make a client from (TLS
 * material) is TY_ECONFIG naming the key, file and line (a value shows only
 * as a file path or where librdkafka quotes an invalid one). NULL clears
 * them. Not thread-safe: call at start-up, before any client exists.
 */
int ty_kafka_properties_load(const char *path, struct ty_err *err);
/* How many operator properties are in force (for a start-up log line). */
size_t ty_kafka_properties_count(void);

/* Set one librdkafka property; TY_ECONFIG names the key and says why. */
int ty_kafka_conf_set(rd_kafka_conf_t *conf, const char *key, const char *value,
		      struct ty_err *err);

/*
 * librdkafka log callback (rd_kafka_conf_set_log_cb) that writes through
 * ty_log at the matching level; safe from librdkafka's threads. The
 * handles made by ty_kafka_producer_new/consumer_new already use it.
 */
void ty_kafka_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf);

/*
 * Destroy a handle after flushing (producers) or closing (consumers; then
 * waiting TY_KAFKA_CLOSE_SETTLE_MS, see kafka.c). Every consumer is
 * destroyed through this.
 */
#define TY_KAFKA_CLOSE_SETTLE_MS 200
void ty_kafka_destroy(rd_kafka_t *rk, int flush_ms);

#endif
