/* trainyard-broker's --control-fifo line protocol (deploy/local/broker_control.h). */
#include "broker_control.h"
#include "ty_test.h"

#include <librdkafka/rdkafka.h>

#include <string.h>

TY_TEST(commands_parse)
{
	static const struct {
		const char *line;
		enum bc_op op;
		int api, error, count, broker, rtt;
		const char *topic;
		int partition, shift;
		const char *key_type, *key;
	} ok[] = {
		{"errors Produce NOT_LEADER_FOR_PARTITION", BC_ERRORS, 0,
		 RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, 1, 0, 0, "", -1, 0, "", ""},
		{"errors Fetch REQUEST_TIMED_OUT 5", BC_ERRORS, 1, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
		 5, 0, 0, "", -1, 0, "", ""},
		{"  errors\t8  COORDINATOR_NOT_AVAILABLE   2 ", BC_ERRORS, 8,
		 RD_KAFKA_RESP_ERR_COORDINATOR_NOT_AVAILABLE, 2, 0, 0, "", -1, 0, "", ""},
		{"errors OffsetCommit 15", BC_ERRORS, 8, 15, 1, 0, 0, "", -1, 0, "", ""},
		{"errors Produce _TRANSPORT", BC_ERRORS, 0, RD_KAFKA_RESP_ERR__TRANSPORT, 1, 0, 0, "",
		 -1, 0, "", ""},
		{"broker-errors 3 Produce REQUEST_TIMED_OUT 2 300", BC_BROKER_ERRORS, 0, 7, 2, 3, 300,
		 "", -1, 0, "", ""},
		{"broker-errors 1 Fetch 0 1 50", BC_BROKER_ERRORS, 1, 0, 1, 1, 50, "", -1, 0, "", ""},
		{"clear FindCoordinator", BC_CLEAR, 10, 0, 1, 0, 0, "", -1, 0, "", ""},
		{"broker-down 2", BC_BROKER_DOWN, 0, 0, 1, 2, 0, "", -1, 0, "", ""},
		{"broker-up 3", BC_BROKER_UP, 0, 0, 1, 3, 0, "", -1, 0, "", ""},
		{"rtt 1 250", BC_RTT, 0, 0, 1, 1, 250, "", -1, 0, "", ""},
		{"leader trainyard.events 7 2", BC_LEADER, 0, 0, 1, 2, 0, "trainyard.events", 7, 0, "",
		 ""},
		{"leaders trainyard.dispatch 2", BC_LEADERS, 0, 0, 1, 0, 0, "trainyard.dispatch", -1,
		 2, "", ""},
		{"follower trainyard.nodes 0 1", BC_FOLLOWER, 0, 0, 1, 1, 0, "trainyard.nodes", 0, 0,
		 "", ""},
		{"coordinator group trainyard-scheduler 3", BC_COORDINATOR, 0, 0, 1, 3, 0, "", -1, 0,
		 "group", "trainyard-scheduler"},
		{"coordinator txn t1 1", BC_COORDINATOR, 0, 0, 1, 1, 0, "", -1, 0, "txn", "t1"},
	};
	static const struct {
		const char *line, *err;
	} bad[] = {
		{"", "empty command"},
		{"   ", "empty command"},
		{"explode 1", "unknown command 'explode' (errors, broker-errors, clear, broker-down, "
			      "broker-up, rtt, leader, leaders, follower, coordinator)"},
		{"errors Produce", "'errors' takes at least 2 word(s), got 1: errors API ERROR [COUNT]"},
		{"errors Produce REQUEST_TIMED_OUT 1 2",
		 "'errors' takes at least 2 word(s), got 4: errors API ERROR [COUNT]"},
		{"errors Nope REQUEST_TIMED_OUT", "unknown ApiKey 'Nope' (a number or Produce, Fetch, "
						  "ListOffsets, Metadata, OffsetCommit, "
						  "OffsetFetch, FindCoordinator, JoinGroup, "
						  "Heartbeat, LeaveGroup, SyncGroup, ApiVersions, "
						  "CreateTopics, InitProducerId)"},
		{"errors Produce NOT_AN_ERROR", "unknown error 'NOT_AN_ERROR' (a librdkafka name such "
						"as NOT_LEADER_FOR_PARTITION, or a number)"},
		{"errors Produce 7 0", "count '0' is not a number 1..100000"},
		{"errors Produce 7 -1", "count '-1' is not a number 1..100000"},
		{"errors Produce 7 3x", "count '3x' is not a number 1..100000"},
		{"errors -1 7", "unknown ApiKey '-1' (a number or Produce, Fetch, ListOffsets, "
				"Metadata, OffsetCommit, OffsetFetch, FindCoordinator, JoinGroup, "
				"Heartbeat, LeaveGroup, SyncGroup, ApiVersions, CreateTopics, "
				"InitProducerId)"},
		{"broker-down 0", "broker '0' is not one of 1..3"},
		{"broker-down 4", "broker '4' is not one of 1..3"},
		{"broker-down two", "broker 'two' is not one of 1..3"},
		{"broker-up", "'broker-up' takes 1 word(s), got 0: broker-up ID"},
		{"broker-errors 1 Produce 7 2", "'broker-errors' takes 5 word(s), got 4: broker-errors "
						"ID API ERROR COUNT RTT_MS"},
		{"broker-errors 1 Produce 7 2 -5", "delay '-5' is not a number 0..600000 ms"},
		{"rtt 1 fast", "delay 'fast' is not a number 0..600000 ms"},
		{"leader trainyard.events x 1", "partition 'x' is not a number"},
		{"leader trainyard.events -1 1", "partition '-1' is not a number"},
		{"leaders trainyard.events -1", "shift '-1' is not a number 0..1000000"},
		{"coordinator broker k 1", "coordinator kind 'broker' is not 'group' or 'txn'"},
		{"errors a b c d e f g h i", "too many or too long words in 'errors a b c d e f g h i'"},
	};
	struct ty_err err = {0};
	struct bc_cmd c;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		ty_test_context("'%s'", ok[i].line);
		ty_err_clear(&err);
		if (bc_parse(&c, ok[i].line, 3, &err) != 0) {
			FAIL("refused: %s", err.msg);
			continue;
		}
		CHECK_INT_EQ(c.op, ok[i].op);
		CHECK_INT_EQ(c.api, ok[i].api);
		CHECK_INT_EQ(c.error, ok[i].error);
		CHECK_INT_EQ(c.count, ok[i].count);
		CHECK_INT_EQ(c.broker, ok[i].broker);
		CHECK_INT_EQ(c.rtt_ms, ok[i].rtt);
		CHECK_STR_EQ(c.topic, ok[i].topic);
		CHECK_INT_EQ(c.partition, ok[i].partition);
		CHECK_INT_EQ(c.shift, ok[i].shift);
		CHECK_STR_EQ(c.key_type, ok[i].key_type);
		CHECK_STR_EQ(c.key, ok[i].key);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("'%s'", bad[i].line);
		ty_err_clear(&err); /* the first error would win */
		CHECK_INT_EQ(bc_parse(&c, bad[i].line, 3, &err), TY_EINVAL);
		CHECK_STR_EQ(err.msg, bad[i].err);
	}
}

TY_TEST(a_word_of_256_bytes_is_refused)
{
	char line[300] = "broker-down ";
	struct ty_err err = {0};
	struct bc_cmd c;

	memset(line + strlen(line), '1', 256);
	line[12 + 256] = '\0';
	CHECK_INT_EQ(bc_parse(&c, line, 3, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "too many or too long words") == err.msg);
}
