/* trainyard-broker's control line protocol: see broker_control.h. */
#include "broker_control.h"

#include <librdkafka/rdkafka.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WORDS 8

/* The Kafka protocol ApiKeys Trainyard's clients send. */
static const struct {
	const char *name;
	int key;
} api_keys[] = {
	{"Produce", 0},	       {"Fetch", 1},	      {"ListOffsets", 2},  {"Metadata", 3},
	{"OffsetCommit", 8},   {"OffsetFetch", 9},    {"FindCoordinator", 10},
	{"JoinGroup", 11},     {"Heartbeat", 12},     {"LeaveGroup", 13},  {"SyncGroup", 14},
	{"ApiVersions", 18},   {"CreateTopics", 19},  {"InitProducerId", 22},
};

/* A whole decimal number in [lo, hi] into *out: 0, or -1. */
static int number(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!*s || (!isdigit((unsigned char)*s) && *s != '-'))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int bc_api_key(const char *name)
{
	long v;

	for (size_t i = 0; i < sizeof(api_keys) / sizeof(api_keys[0]); i++)
		if (!strcmp(api_keys[i].name, name))
			return api_keys[i].key;
	return number(name, 0, 32767, &v) ? -1 : (int)v;
}

int bc_error_code(const char *name, int *out)
{
	const struct rd_kafka_err_desc *descs;
	size_t n;
	long v;

	rd_kafka_get_err_descs(&descs, &n);
	for (size_t i = 0; i < n; i++)
		if (descs[i].name && !strcmp(descs[i].name, name)) {
			*out = descs[i].code;
			return 0;
		}
	if (number(name, -200, 32767, &v))
		return -1;
	*out = (int)v;
	return 0;
}

static int words(char w[MAX_WORDS][256], const char *line)
{
	int n = 0;

	for (const char *p = line;;) {
		size_t len;

		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return n;
		len = strcspn(p, " \t");
		if (n == MAX_WORDS || len >= 256)
			return -1;
		memcpy(w[n], p, len);
		w[n][len] = '\0';
		n++;
		p += len;
	}
}

int bc_parse(struct bc_cmd *c, const char *line, int brokers, struct ty_err *err)
{
	static const struct {
		const char *name;
		enum bc_op op;
		int nargs;	/* words after the command */
		int opt;	/* of which the last `opt` may be left out */
		const char *usage;
	} cmds[] = {
		{"errors", BC_ERRORS, 3, 1, "errors API ERROR [COUNT]"},
		{"broker-errors", BC_BROKER_ERRORS, 5, 0, "broker-errors ID API ERROR COUNT RTT_MS"},
		{"clear", BC_CLEAR, 1, 0, "clear API"},
		{"broker-down", BC_BROKER_DOWN, 1, 0, "broker-down ID"},
		{"broker-up", BC_BROKER_UP, 1, 0, "broker-up ID"},
		{"rtt", BC_RTT, 2, 0, "rtt ID MS"},
		{"leader", BC_LEADER, 3, 0, "leader TOPIC PARTITION ID"},
		{"leaders", BC_LEADERS, 2, 0, "leaders TOPIC SHIFT"},
		{"follower", BC_FOLLOWER, 3, 0, "follower TOPIC PARTITION ID"},
		{"coordinator", BC_COORDINATOR, 3, 0, "coordinator group|txn KEY ID"},
	};
	char w[MAX_WORDS][256];
	int n = words(w, line), k;
	long v;
	const char *id = NULL, *api = NULL, *error = NULL, *count = NULL, *rtt = NULL,
		   *partition = NULL;

	memset(c, 0, sizeof(*c));
	if (n < 0)
		return ty_err_set(err, TY_EINVAL, "too many or too long words in '%s'", line);
	if (n == 0)
		return ty_err_set(err, TY_EINVAL, "empty command");
	for (k = 0; k < (int)(sizeof(cmds) / sizeof(cmds[0])); k++)
		if (!strcmp(cmds[k].name, w[0]))
			break;
	if (k == (int)(sizeof(cmds) / sizeof(cmds[0])))
		return ty_err_set(err, TY_EINVAL,
				  "unknown command '%s' (errors, broker-errors, clear, "
				  "broker-down, broker-up, rtt, leader, leaders, follower, "
				  "coordinator)",
				  w[0]);
	if (n - 1 > cmds[k].nargs || n - 1 < cmds[k].nargs - cmds[k].opt)
		return ty_err_set(err, TY_EINVAL, "'%s' takes %s%d word(s), got %d: %s", w[0],
				  cmds[k].opt ? "at least " : "", cmds[k].nargs - cmds[k].opt,
				  n - 1, cmds[k].usage);
	c->op = cmds[k].op;
	c->count = 1;
	c->partition = -1;
	switch (c->op) {
	case BC_ERRORS:
		api = w[1], error = w[2], count = n > 3 ? w[3] : NULL;
		break;
	case BC_BROKER_ERRORS:
		id = w[1], api = w[2], error = w[3], count = w[4], rtt = w[5];
		break;
	case BC_CLEAR:
		api = w[1];
		break;
	case BC_BROKER_DOWN:
	case BC_BROKER_UP:
		id = w[1];
		break;
	case BC_RTT:
		id = w[1], rtt = w[2];
		break;
	case BC_LEADER:
	case BC_FOLLOWER:
		snprintf(c->topic, sizeof(c->topic), "%s", w[1]);
		partition = w[2], id = w[3];
		break;
	case BC_LEADERS:
		snprintf(c->topic, sizeof(c->topic), "%s", w[1]);
		if (number(w[2], 0, 1000000, &v))
			return ty_err_set(err, TY_EINVAL, "shift '%s' is not a number 0..1000000",
					  w[2]);
		c->shift = (int)v;
		break;
	case BC_COORDINATOR:
		if (strcmp(w[1], "group") && strcmp(w[1], "txn"))
			return ty_err_set(err, TY_EINVAL,
					  "coordinator kind '%s' is not 'group' or 'txn'", w[1]);
		snprintf(c->key_type, sizeof(c->key_type), "%s", w[1]);
		snprintf(c->key, sizeof(c->key), "%s", w[2]);
		id = w[3];
		break;
	}
	if (id) {
		if (number(id, 1, brokers, &v))
			return ty_err_set(err, TY_EINVAL, "broker '%s' is not one of 1..%d", id,
					  brokers);
		c->broker = (int32_t)v;
	}
	if (api && (c->api = (int16_t)bc_api_key(api)) < 0)
		return ty_err_set(err, TY_EINVAL,
				  "unknown ApiKey '%s' (a number or Produce, Fetch, ListOffsets, "
				  "Metadata, OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, "
				  "Heartbeat, LeaveGroup, SyncGroup, ApiVersions, CreateTopics, "
				  "InitProducerId)",
				  api);
	if (error && bc_error_code(error, &c->error))
		return ty_err_set(err, TY_EINVAL,
				  "unknown error '%s' (a librdkafka name such as "
				  "NOT_LEADER_FOR_PARTITION, or a number)",
				  error);
	if (count) {
		if (number(count, 1, 100000, &v))
			return ty_err_set(err, TY_EINVAL, "count '%s' is not a number 1..100000",
					  count);
		c->count = (int)v;
	}
	if (rtt) {
		if (number(rtt, 0, 600000, &v))
			return ty_err_set(err, TY_EINVAL, "delay '%s' is not a number 0..600000 ms",
					  rtt);
		c->rtt_ms = (int)v;
	}
	if (partition) {
		if (number(partition, 0, 1000000, &v))
			return ty_err_set(err, TY_EINVAL, "partition '%s' is not a number", partition);
		c->partition = (int32_t)v;
	}
	return 0;
}
