/*
 * Wire formats of the three Kafka topics, shared by scheduler and executors.
 *
 * Every message is one JSON object, the envelope:
 *   {"v":1,"type":"launch","node":"n1","job":42,"attempt":1,"epoch":7,
 *    "seq":913,"ts":1764000000000,"data":{...}}
 * `node` is the executor the message is for or from; `job`/`attempt` are 0 in
 * node messages; `epoch` is the scheduler leader's term (0 from executors);
 * `seq` orders and deduplicates messages of one sender; `ts` is wall-clock
 * milliseconds. `data` holds the type's fields, checked by proto_decode
 * against the table in proto.c: required fields must be present with the
 * right JSON type; unknown fields are allowed (newer senders may add some).
 */
#ifndef TY_PROTO_H
#define TY_PROTO_H

#include "ty_err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define PROTO_VERSION 1
#define PROTO_TOPIC_DISPATCH "trainyard.dispatch"
#define PROTO_TOPIC_EVENTS "trainyard.events"
#define PROTO_TOPIC_NODES "trainyard.nodes"
#define PROTO_NODE_ID_MAX 63

/* name, topic */
#define PROTO_TYPES(X)                                                        \
	X(LAUNCH, "launch", PROTO_TOPIC_DISPATCH)                             \
	X(KILL, "kill", PROTO_TOPIC_DISPATCH)                                 \
	X(CHECKPOINT, "checkpoint", PROTO_TOPIC_DISPATCH)                     \
	X(RANK_STARTED, "rank_started", PROTO_TOPIC_EVENTS)                   \
	X(RANK_EXITED, "rank_exited", PROTO_TOPIC_EVENTS)                     \
	X(ATTEMPT_RUNNING, "attempt_running", PROTO_TOPIC_EVENTS)             \
	X(ATTEMPT_EXITED, "attempt_exited", PROTO_TOPIC_EVENTS)               \
	X(CHECKPOINT_WRITTEN, "checkpoint_written", PROTO_TOPIC_EVENTS)       \
	X(PREEMPT_NOTICE, "preempt_notice", PROTO_TOPIC_EVENTS)               \
	X(REGISTER, "register", PROTO_TOPIC_NODES)                            \
	X(HEARTBEAT, "heartbeat", PROTO_TOPIC_NODES)

enum proto_type {
	PROTO_NONE = 0,
#define PROTO_ENUM(name, str, topic) PROTO_##name,
	PROTO_TYPES(PROTO_ENUM)
#undef PROTO_ENUM
	PROTO_TYPE_COUNT
};

struct proto_msg {
	enum proto_type type;
	char node[PROTO_NODE_ID_MAX + 1];
	int64_t job;
	int64_t attempt;
	int64_t epoch;
	int64_t seq;
	int64_t ts;
	json_t *data; /* owned; an object */
};

/* "launch" etc.; "unknown" out of range. */
const char *proto_type_name(enum proto_type t);
/* The topic a type travels on. */
const char *proto_type_topic(enum proto_type t);
/* PROTO_NONE when the name is unknown. */
enum proto_type proto_type_parse(const char *name);

/*
 * Serialise m into *out (new, caller frees) and *len. m->data may be NULL
 * (sent as {}). Fails with TY_EINVAL when m lacks what its type requires.
 */
int proto_encode(char **out, size_t *len, const struct proto_msg *m, struct ty_err *err);

/*
 * Parse and validate one message. On success m holds a new reference in
 * m->data (free with proto_msg_clear). Errors, with a message naming the
 * fault: TY_EPARSE (not JSON, not an object, missing or mistyped envelope or
 * data field, unknown type), TY_EINVAL (unsupported version "v").
 * Consumers log, count and skip such messages: never crash, never stall.
 */
int proto_decode(struct proto_msg *m, const void *buf, size_t len, struct ty_err *err);
void proto_msg_clear(struct proto_msg *m);

/*
 * Partition of trainyard.dispatch that carries a node's messages: a stable
 * hash (FNV-1a 32) of the node id modulo the partition count. The scheduler
 * produces to it explicitly and the executor assigns itself only that
 * partition, so neither depends on a client library's partitioner.
 */
int32_t proto_node_partition(const char *node, int32_t partitions);

/* Node ids: 1–63 characters of [A-Za-z0-9._-], starting alphanumeric. */
bool proto_node_id_ok(const char *node);

#endif
