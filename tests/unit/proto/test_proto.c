/* proto/: round trips of every message type and a table of malformed input. */
#include "proto.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

/* Minimal valid data for each type, so the round trip covers them all. */
static const char *const valid_data[PROTO_TYPE_COUNT] = {
	[PROTO_LAUNCH] = "{\"node_rank\":0,\"nnodes\":2,\"world_size\":4,\"local_world_size\":2,"
			 "\"first_rank\":0,\"master_addr\":\"10.0.0.1\",\"master_port\":29500,"
			 "\"gpus\":[0,1],\"command\":[\"python3\",\"t.py\"],\"env\":{},"
			 "\"launch\":\"per_gpu\"}",
	[PROTO_KILL] = "{\"reason\":\"cancel\",\"grace_seconds\":10}",
	[PROTO_CHECKPOINT] = "{\"signal\":\"SIGUSR1\",\"grace_seconds\":120}",
	[PROTO_RANK_STARTED] = "{\"rank\":1,\"local_rank\":1,\"pid\":4242}",
	[PROTO_RANK_EXITED] = "{\"rank\":1,\"exit_code\":0,\"signal\":0}",
	[PROTO_ATTEMPT_RUNNING] = "{\"ranks\":2}",
	[PROTO_ATTEMPT_EXITED] = "{\"exit_code\":3,\"failure_class\":\"user\",\"message\":\"x\"}",
	[PROTO_CHECKPOINT_WRITTEN] = "{\"path\":\"step-10\",\"step\":10}",
	[PROTO_PREEMPT_NOTICE] = "{\"deadline\":1764000000000}",
	[PROTO_REGISTER] = "{\"address\":\"10.0.0.1\",\"gpus\":8,\"labels\":{\"rack\":\"r1\"},"
			   "\"boot_id\":\"b1\",\"log_url\":\"http://10.0.0.1:9000\"}",
	[PROTO_HEARTBEAT] = "{\"boot_id\":\"b1\",\"running\":[{\"job\":1,\"attempt\":1}],"
			    "\"finished\":[]}",
};

TY_TEST(every_type_round_trips)
{
	for (int t = 1; t < PROTO_TYPE_COUNT; t++) {
		struct proto_msg in = {0}, out = {0};
		struct ty_err err = {0};
		json_error_t jerr;
		char *text = NULL;
		size_t len = 0;

		ty_test_context("type %s", proto_type_name((enum proto_type)t));
		REQUIRE(valid_data[t] != NULL);
		in.type = (enum proto_type)t;
		strcpy(in.node, "node-a.rack1");
		in.job = 42;
		in.attempt = 2;
		in.epoch = 7;
		in.seq = 913;
		in.ts = 1764000000123;
		in.data = json_loads(valid_data[t], 0, &jerr);
		REQUIRE(in.data != NULL);
		CHECK_INT_EQ(proto_encode(&text, &len, &in, &err), 0);
		REQUIRE(text != NULL);
		CHECK_INT_EQ(len, strlen(text));
		CHECK_INT_EQ(proto_decode(&out, text, len, &err), 0);
		CHECK_INT_EQ(out.type, t);
		CHECK_STR_EQ(out.node, "node-a.rack1");
		CHECK_INT_EQ(out.job, 42);
		CHECK_INT_EQ(out.attempt, 2);
		CHECK_INT_EQ(out.epoch, 7);
		CHECK_INT_EQ(out.seq, 913);
		CHECK_INT_EQ(out.ts, 1764000000123);
		CHECK(json_equal(out.data, in.data));
		CHECK_STR_EQ(proto_type_topic((enum proto_type)t),
			     t <= PROTO_CHECKPOINT	 ? PROTO_TOPIC_DISPATCH
			     : t <= PROTO_PREEMPT_NOTICE ? PROTO_TOPIC_EVENTS
							 : PROTO_TOPIC_NODES);
		free(text);
		proto_msg_clear(&in);
		proto_msg_clear(&out);
	}
}

TY_TEST(encode_refuses_incomplete_messages)
{
	struct proto_msg m = {.type = PROTO_LAUNCH, .job = 1, .attempt = 1};
	struct ty_err err = {0};
	char *text = NULL;
	size_t len;

	strcpy(m.node, "n1");
	m.data = json_pack("{s:i}", "node_rank", 0);
	CHECK_INT_EQ(proto_encode(&text, &len, &m, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "nnodes") != NULL);
	CHECK(text == NULL);
	proto_msg_clear(&m);

	struct proto_msg k = {.type = PROTO_KILL, .job = 0, .attempt = 1};
	strcpy(k.node, "n1");
	k.data = json_pack("{s:s, s:i}", "reason", "cancel", "grace_seconds", 5);
	ty_err_clear(&err);
	CHECK_INT_EQ(proto_encode(&text, &len, &k, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "job") != NULL);
	proto_msg_clear(&k);
}

static const struct {
	const char *text;
	int code;
	const char *mentions;
} bad[] = {
	{"", TY_EPARSE, "not JSON"},
	{"not json", TY_EPARSE, "not JSON"},
	{"[1,2]", TY_EPARSE, "object"},
	{"{\"v\":2,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,"
	 "\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EINVAL, "version 2"},
	{"{\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,"
	 "\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EPARSE, "'v'"},
	{"{\"v\":1,\"type\":\"explode\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,\"seq\":1,"
	 "\"ts\":1,\"data\":{}}",
	 TY_EPARSE, "unknown message type 'explode'"},
	{"{\"v\":1,\"type\":7,\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,\"seq\":1,\"ts\":1,"
	 "\"data\":{}}",
	 TY_EPARSE, "type"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"job\":0,\"attempt\":0,\"epoch\":1,\"seq\":1,"
	 "\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EPARSE, "node"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"node\":\"../etc\",\"job\":0,\"attempt\":0,"
	 "\"epoch\":1,\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EPARSE, "node id"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":\"1\",\"attempt\":0,"
	 "\"epoch\":1,\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EPARSE, "'job'"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,"
	 "\"epoch\":-1,\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EPARSE, "negative"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,"
	 "\"seq\":1,\"ts\":1}",
	 TY_EPARSE, "'data'"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,"
	 "\"seq\":1,\"ts\":1,\"data\":[]}",
	 TY_EPARSE, "'data'"},
	{"{\"v\":1,\"type\":\"kill\",\"node\":\"n\",\"job\":0,\"attempt\":1,\"epoch\":1,\"seq\":1,"
	 "\"ts\":1,\"data\":{\"reason\":\"x\",\"grace_seconds\":1}}",
	 TY_EPARSE, "job and an attempt"},
	{"{\"v\":1,\"type\":\"kill\",\"node\":\"n\",\"job\":1,\"attempt\":1,\"epoch\":1,\"seq\":1,"
	 "\"ts\":1,\"data\":{\"reason\":\"x\"}}",
	 TY_EPARSE, "grace_seconds"},
	{"{\"v\":1,\"type\":\"kill\",\"node\":\"n\",\"job\":1,\"attempt\":1,\"epoch\":1,\"seq\":1,"
	 "\"ts\":1,\"data\":{\"reason\":5,\"grace_seconds\":1}}",
	 TY_EPARSE, "must be a string"},
	{"{\"v\":1,\"type\":\"heartbeat\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":0,"
	 "\"seq\":1,\"ts\":1,\"data\":{\"boot_id\":\"b\",\"running\":{},\"finished\":[]}}",
	 TY_EPARSE, "must be an array"},
	{"{\"v\":1,\"v\":1,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,"
	 "\"epoch\":1,\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}}",
	 TY_EPARSE, "not JSON"},
	{"{\"v\":1,\"type\":\"preempt_notice\",\"node\":\"n\",\"job\":0,\"attempt\":0,\"epoch\":1,"
	 "\"seq\":1,\"ts\":1,\"data\":{\"deadline\":1}} trailing",
	 TY_EPARSE, "not JSON"},
};

/*
 * Types DESIGN.md §5 names but the protocol dropped (docs/dispatch.md,
 * "Messages"): each is refused like any unknown type, so the scheduler and
 * the executors count it as malformed. The data is what each used to need.
 */
TY_TEST(dropped_types_are_unknown)
{
	static const struct {
		const char *type, *topic, *data;
		int job;
	} dropped[] = {
	    {"drain", "dispatch", "{}", 0},
	    {"progress", "events", "{'step':10}", 7},
	    {"metrics", "events", "{'metrics':{'loss':0.5}}", 7},
	    {"state", "nodes", "{'state':'draining'}", 0},
	};

	for (size_t i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++) {
		const char *text =
		    ty_test_jf("{'v':1,'type':'%s','node':'n1','job':%d,'attempt':%d,'epoch':1,"
			       "'seq':1,'ts':1,'data':%s}",
			       dropped[i].type, dropped[i].job, dropped[i].job ? 1 : 0,
			       dropped[i].data);
		struct proto_msg m;
		struct ty_err err = {0};

		ty_test_context("%s (was on %s)", dropped[i].type, dropped[i].topic);
		CHECK_INT_EQ(proto_type_parse(dropped[i].type), PROTO_NONE);
		CHECK_INT_EQ(proto_decode(&m, text, strlen(text), &err), TY_EPARSE);
		CHECK_STR_EQ(err.msg, ty_test_strf("unknown message type '%s'", dropped[i].type));
		CHECK_INT_EQ(m.type, PROTO_NONE);
		CHECK(m.data == NULL);
	}
}

TY_TEST(malformed_messages_are_refused_with_a_reason)
{
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct proto_msg m;
		struct ty_err err = {0};

		ty_test_context("case %zu: %.60s", i, bad[i].text);
		CHECK_INT_EQ(proto_decode(&m, bad[i].text, strlen(bad[i].text), &err), bad[i].code);
		CHECK(strstr(err.msg, bad[i].mentions) != NULL);
		if (!strstr(err.msg, bad[i].mentions))
			ty_test_note("message was: %s", err.msg);
		CHECK(m.data == NULL);
		CHECK_INT_EQ(m.type, PROTO_NONE);
	}
}

TY_TEST(node_partition_is_stable_and_in_range)
{
	/* FNV-1a 32 of "node-a" is 0x04c3b593: pinned so that a change of hash,
	 * which would strand executors on the wrong partition, fails here */
	CHECK_INT_EQ(proto_node_partition("node-a", 64), 0x04c3b593u % 64);
	CHECK_INT_EQ(proto_node_partition("node-a", 1), 0);
	for (int i = 0; i < 1000; i++) {
		char id[32];
		int32_t p;

		snprintf(id, sizeof(id), "n%d", i);
		p = proto_node_partition(id, 64);
		CHECK(p >= 0 && p < 64);
		CHECK_INT_EQ(p, proto_node_partition(id, 64));
	}
}

TY_TEST(node_ids)
{
	CHECK(proto_node_id_ok("gpu-node-17.rack3"));
	CHECK(proto_node_id_ok("a"));
	CHECK(!proto_node_id_ok(""));
	CHECK(!proto_node_id_ok(NULL));
	CHECK(!proto_node_id_ok("-lead"));
	CHECK(!proto_node_id_ok("a/b"));
	CHECK(!proto_node_id_ok("a b"));
	CHECK(!proto_node_id_ok("0123456789012345678901234567890123456789012345678901234567890123"));
}
