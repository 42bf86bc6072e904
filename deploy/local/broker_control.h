/*
 * The fault-injection line protocol of trainyard-broker's --control-fifo
 * (deploy/local/README.md, "Fault injection"): one command per line, words
 * separated by blanks. Brokers are numbered 1..brokers, ApiKeys and errors
 * are names (Produce, NOT_LEADER_FOR_PARTITION) or numbers.
 *
 *   errors API ERROR [COUNT]              the next COUNT (1) API requests to any
 *                                         broker fail with ERROR
 *   broker-errors ID API ERROR COUNT RTT  the same on broker ID only, each answer
 *                                         delayed by RTT ms (ERROR may be 0: delay only)
 *   clear API                             drop the queued errors of API
 *   broker-down ID | broker-up ID         one broker refuses connections / is back
 *   rtt ID MS                             broker ID answers MS ms late (0: on time)
 *   leader TOPIC PARTITION ID             move a partition's leader
 *   leaders TOPIC SHIFT                   partition p gets leader ((p + SHIFT) mod brokers) + 1
 *   follower TOPIC PARTITION ID           the partition's preferred read replica
 *   coordinator group|txn KEY ID          the coordinator of a group or transaction id
 *
 * This part only parses (pure); broker.c applies a command to the cluster.
 */
#ifndef TY_BROKER_CONTROL_H
#define TY_BROKER_CONTROL_H

#include "ty_err.h"

#include <stdint.h>

enum bc_op {
	BC_ERRORS,
	BC_BROKER_ERRORS,
	BC_CLEAR,
	BC_BROKER_DOWN,
	BC_BROKER_UP,
	BC_RTT,
	BC_LEADER,
	BC_LEADERS,
	BC_FOLLOWER,
	BC_COORDINATOR,
};

struct bc_cmd {
	enum bc_op op;
	int16_t api;	 /* errors, broker-errors, clear */
	int error;	 /* an rd_kafka_resp_err_t; errors, broker-errors */
	int count;	 /* errors, broker-errors */
	int32_t broker;	 /* 1..brokers */
	int rtt_ms;	 /* broker-errors, rtt */
	char topic[256]; /* leader, leaders, follower */
	int32_t partition;
	int shift;	    /* leaders */
	char key_type[256];  /* coordinator: "group" or "txn" */
	char key[256];	    /* coordinator */
};

/*
 * Parse one line (no trailing newline) for a cluster of `brokers` brokers.
 * Returns 0, or TY_EINVAL with err naming what is wrong (unknown command,
 * missing or extra word, broker out of range, unknown ApiKey or error name,
 * negative count or delay). Empty lines and lines starting with '#' are
 * TY_EINVAL too: the caller skips them first if it wants to.
 */
int bc_parse(struct bc_cmd *c, const char *line, int brokers, struct ty_err *err);

/* The ApiKey called name ("Produce", "Fetch", ... or a number 0..32767), or -1. */
int bc_api_key(const char *name);

/* The librdkafka error code called name ("REQUEST_TIMED_OUT" or a number), via *out; 0 or -1. */
int bc_error_code(const char *name, int *out);

#endif
