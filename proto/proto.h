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

#include "ty_crypto.h"
#include "ty_err.h"

#include <jansson.h>
#include <librdkafka/rdkafka.h>
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
	X(HEALTH_CHECK, "health_check", PROTO_TOPIC_DISPATCH)                 \
	X(RANK_STARTED, "rank_started", PROTO_TOPIC_EVENTS)                   \
	X(RANK_EXITED, "rank_exited", PROTO_TOPIC_EVENTS)                     \
	X(ATTEMPT_RUNNING, "attempt_running", PROTO_TOPIC_EVENTS)             \
	X(ATTEMPT_EXITED, "attempt_exited", PROTO_TOPIC_EVENTS)               \
	X(CHECKPOINT_WRITTEN, "checkpoint_written", PROTO_TOPIC_EVENTS)       \
	X(CHECKPOINT_TIER, "checkpoint_tier", PROTO_TOPIC_EVENTS)             \
	X(PREEMPT_NOTICE, "preempt_notice", PROTO_TOPIC_EVENTS)               \
	X(LAUNCH_ACCEPTED, "launch_accepted", PROTO_TOPIC_EVENTS)             \
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
 * attempt_exited.evidence_source (and a heartbeat `finished` entry's): who
 * saw what decided failure_class. "log": the ranks' output, or the exit
 * code they chose, alone — which a job can write at will, so it never
 * takes a node out of service by itself (docs/dispatch.md, "Failures,
 * retries and bad nodes"); "executor": the executor observed it itself (a
 * signal it did not send, a cgroup OOM kill, a hang or start timeout, a
 * preflight it ran, a rank it could not spawn, its runtime). Sent with
 * every failure class.
 */
#define PROTO_EVIDENCE_SOURCE_FIELD "evidence_source"
#define PROTO_EVIDENCE_SOURCES(X)                                             \
	X(EXECUTOR, "executor")                                               \
	X(LOG, "log")

enum proto_evidence_source {
#define PROTO_EVIDENCE_ENUM(name, str) PROTO_EVIDENCE_##name,
	PROTO_EVIDENCE_SOURCES(PROTO_EVIDENCE_ENUM)
#undef PROTO_EVIDENCE_ENUM
	PROTO_EVIDENCE_SOURCE_COUNT
};

/* "executor", "log"; "unknown" out of range. */
const char *proto_evidence_source_name(enum proto_evidence_source e);
/*
 * The source a message claims: NULL (a field left out, as executors before
 * it do) is PROTO_EVIDENCE_EXECUTOR, which is what the scheduler assumed
 * before the field; "log" and any name it does not know are
 * PROTO_EVIDENCE_LOG, the weaker claim.
 */
enum proto_evidence_source proto_evidence_source_parse(const char *name);

/*
 * Node conditions: what an executor's health watch sees wrong with its
 * hardware (docs/dispatch.md, "Node conditions"). A heartbeat (and a
 * register) carries the node's current ones in `conditions[]`, each
 *   {"kind":"xid","severity":"fatal","gpu":0,"gpu_uuid":"GPU-...",
 *    "port":null,"code":79,"evidence":"Xid 79 on GPU 0 (GPU-...): ...",
 *    "first_seen":1764000000000,"last_seen":1764000002000}
 * gpu (index) and gpu_uuid for a GPU's condition, port ("mlx5_0/1") for an
 * HCA port's, both null or absent for the node's; code is the kind's number
 * where it has one (the Xid), else null or absent; the times are wall-clock
 * ms. A condition is listed while it holds: a fatal one until the executor
 * restarts (the GPU needs a reset or a replacement; a health_check one
 * until a later check passes), a degraded one while the watch still sees it. One condition is (kind, gpu or port, code).
 * attempt_exited.condition is the one that made an attempt `hardware`.
 *
 * Kinds are names ([a-z0-9_], at most PROTO_CONDITION_KIND_MAX): those
 * below are what this release's executor sends; a consumer keeps and shows
 * one it does not know. The severity decides what the scheduler does:
 * fatal (the GPU or node cannot be trusted: it drains the node and the
 * attempts on it fail as `hardware`), degraded (it works, slower or with
 * less: shown, not drained).
 */
#define PROTO_CONDITION_KIND_MAX 32
#define PROTO_CONDITION_EVIDENCE_MAX 512
#define PROTO_CONDITION_KINDS(X)                                              \
	X(XID, "xid")                           /* an Xid event (NVML) */    \
	X(ECC_DBE, "ecc_dbe")                   /* uncorrectable ECC */      \
	X(ROW_REMAP_PENDING, "row_remap_pending") /* reset to remap rows */  \
	X(ROW_REMAP_FAILED, "row_remap_failed") /* no spare rows left */     \
	X(RETIRED_PAGES_PENDING, "retired_pages_pending")                     \
	X(GPU_LOST, "gpu_lost")                 /* NVML_ERROR_GPU_IS_LOST */ \
	X(THERMAL_SLOWDOWN, "thermal_slowdown")                               \
	X(POWER_SLOWDOWN, "power_slowdown")                                   \
	X(NVLINK_ERRORS, "nvlink_errors")       /* link down, CRC, replay */ \
	X(PORT_DOWN, "port_down")               /* an HCA port not ACTIVE */ \
	X(PORT_RATE_LOW, "port_rate_low")       /* below --expect-port-gbps */ \
	X(HEALTH_CHECK, "health_check")         /* --health-check-command failed */

enum proto_condition_kind {
#define PROTO_CONDITION_ENUM(name, str) PROTO_CONDITION_##name,
	PROTO_CONDITION_KINDS(PROTO_CONDITION_ENUM)
#undef PROTO_CONDITION_ENUM
	PROTO_CONDITION_KIND_COUNT
};

#define PROTO_SEVERITIES(X)                                                   \
	X(FATAL, "fatal")                                                     \
	X(DEGRADED, "degraded")

enum proto_severity {
#define PROTO_SEVERITY_ENUM(name, str) PROTO_SEVERITY_##name,
	PROTO_SEVERITIES(PROTO_SEVERITY_ENUM)
#undef PROTO_SEVERITY_ENUM
	PROTO_SEVERITY_COUNT
};

/* "xid" etc.; "unknown" out of range. */
const char *proto_condition_kind_name(enum proto_condition_kind k);
/* "fatal", "degraded"; "unknown" out of range. */
const char *proto_severity_name(enum proto_severity s);
/* PROTO_SEVERITY_COUNT when name is NULL or not a severity. */
enum proto_severity proto_severity_parse(const char *name);

/*
 * Whether c (borrowed) is a condition as above: an object; kind a name;
 * severity known; evidence a string of 1 to PROTO_CONDITION_EVIDENCE_MAX
 * bytes; gpu a non-negative integer, gpu_uuid and port strings, code an
 * integer (each may be null or absent); first_seen and last_seen integers
 * with first_seen <= last_seen. TY_EPARSE naming the field otherwise.
 * Unknown fields are allowed.
 */
int proto_condition_check(const json_t *c, struct ty_err *err);

/*
 * Training progress (docs/dispatch.md, "Progress"): a heartbeat's running
 * entry carries `progress[]`, one entry per local rank that has written a
 * step to its progress file,
 *   {"rank":3,"step":120,"steps_per_second":2.1,"samples_per_second":512.5,
 *    "step_at":1764000000000}
 * steps_per_second null until the node has seen the step advance over a
 * while, samples_per_second null when the rank does not say, step_at the
 * wall-clock ms when the node saw the step change last.
 */
/* One entry (new; NULL when out of memory); a negative rate is sent as null. */
json_t *proto_progress_rank(int rank, int64_t step, double steps_per_second,
			    double samples_per_second, int64_t step_at);
/*
 * Whether p (borrowed) is such an entry: rank and step non-negative
 * integers, the rates non-negative numbers, null or absent, step_at a non-negative
 * integer. TY_EPARSE naming the field otherwise; unknown fields are allowed.
 */
int proto_progress_check(const json_t *p, struct ty_err *err);

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

/*
 * Who sent a message (auth.c; docs/dispatch.md, "Authenticity"). The
 * envelope is unchanged: a Kafka header carries the proof over the exact
 * payload bytes.
 *
 * - trainyard.dispatch: header PROTO_HDR_SIG, the scheduler's Ed25519
 *   signature (128 hex digits) under its dispatch key; executors hold the
 *   public half.
 * - trainyard.events and trainyard.nodes: header PROTO_HDR_MAC, the
 *   HMAC-SHA256 (64 hex digits) of the payload under the sending node's
 *   key, node_key = hex HMAC-SHA256(node secret, "trainyard-node:" + node
 *   id); the key's 64 ASCII hex digits are the HMAC key. The scheduler
 *   holds the secret and derives the key of the node the envelope names.
 */
#define PROTO_HDR_SIG "ty-sig"
#define PROTO_HDR_MAC "ty-mac"
#define PROTO_NODE_KEY_LEN 64
#define PROTO_NODE_KEY_CONTEXT "trainyard-node:"
#define PROTO_NODE_SECRET_MIN 32  /* bytes */
#define PROTO_NODE_SECRET_MAX 1024

/* Why a message is refused; the metrics' `reason` label. */
#define PROTO_REJECTS(X)                                                      \
	X(UNSIGNED, "unsigned")                                               \
	X(BAD_SIGNATURE, "bad_signature")                                     \
	X(REPLAYED, "replayed")

enum proto_reject {
	PROTO_AUTHENTIC = 0,
#define PROTO_REJECT_ENUM(name, str) PROTO_REJECT_##name,
	PROTO_REJECTS(PROTO_REJECT_ENUM)
#undef PROTO_REJECT_ENUM
	PROTO_REJECT_COUNT
};

/* "unsigned" etc.; "authentic" for PROTO_AUTHENTIC. */
const char *proto_reject_name(enum proto_reject r);

/*
 * The node secret from path: the file's bytes less trailing blanks and
 * newlines, at least PROTO_NODE_SECRET_MIN and at most PROTO_NODE_SECRET_MAX
 * of them (`openssl rand -hex 32` makes one), into out (n bytes).
 * TY_ECONFIG names the file and the fault.
 */
int proto_node_secret_load(char out[PROTO_NODE_SECRET_MAX + 1], size_t *n, const char *path,
			   struct ty_err *err);
/* A node's key, derived from the secret (secret: n bytes). */
void proto_node_key(char out[PROTO_NODE_KEY_LEN + 1], const void *secret, size_t n,
		    const char *node);
/*
 * A node key from path: 64 lowercase hex digits, a trailing newline
 * allowed (what `trainyard-scheduler --print-node-key` prints). TY_ECONFIG
 * names the file and the fault.
 */
int proto_node_key_load(char out[PROTO_NODE_KEY_LEN + 1], const char *path, struct ty_err *err);

/* The PROTO_HDR_MAC value of payload under node_key. */
void proto_mac(char out[PROTO_NODE_KEY_LEN + 1], const char *node_key, const void *payload,
	       size_t n);
/* The PROTO_HDR_SIG value of payload; TY_EINVAL without a private key, TY_EIO when OpenSSL fails. */
int proto_sign(char out[TY_ED25519_SIG_HEX_LEN + 1], const struct ty_ed25519_key *k,
	       const void *payload, size_t n);

/*
 * Checks of a payload against its header value (NULL: no header):
 * PROTO_AUTHENTIC, PROTO_REJECT_UNSIGNED or PROTO_REJECT_BAD_SIGNATURE.
 * The MAC is compared in constant time.
 */
enum proto_reject proto_check_sig(const struct ty_ed25519_key *k, const void *payload, size_t n,
				  const char *sig);
enum proto_reject proto_check_mac(const char *node_key, const void *payload, size_t n,
				  const char *mac);

/*
 * The value of header `name` of a consumed message, NUL-terminated, in buf
 * (borrowed by the return value); NULL when the message has none, or one
 * that is empty, longer than bufsz - 1 or holds a NUL byte.
 */
const char *proto_header(char *buf, size_t bufsz, const rd_kafka_message_t *km,
			 const char *name);

#endif
