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
	[PROTO_HEALTH_CHECK] = "{\"reason\":\"job 3 attempt 1: NCCL WARN (log only)\"}",
	[PROTO_RANK_STARTED] = "{\"rank\":1,\"local_rank\":1,\"pid\":4242}",
	[PROTO_RANK_EXITED] = "{\"rank\":1,\"exit_code\":0,\"signal\":0}",
	[PROTO_ATTEMPT_RUNNING] = "{\"ranks\":2}",
	[PROTO_ATTEMPT_EXITED] = "{\"exit_code\":3,\"failure_class\":\"user\",\"message\":\"x\"}",
	[PROTO_CHECKPOINT_WRITTEN] = "{\"path\":\"step-10\",\"step\":10}",
	[PROTO_CHECKPOINT_TIER] = "{\"status\":\"ok\",\"moved\":1,\"local_bytes\":10}",
	[PROTO_PREEMPT_NOTICE] = "{\"deadline\":1764000000000}",
	[PROTO_LAUNCH_ACCEPTED] = "{\"duplicate\":true}",
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
			     t <= PROTO_HEALTH_CHECK	 ? PROTO_TOPIC_DISPATCH
			     : t <= PROTO_LAUNCH_ACCEPTED ? PROTO_TOPIC_EVENTS
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

/* ---- authenticity (auth.c) ---- */

#define SECRET "0123456789abcdef0123456789abcdef"

static char tmpdir[64];

static void tmpdir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (tmpdir[0] && system(cmd) != 0)
		fprintf(stderr, "cannot remove '%s'\n", tmpdir);
}

/* A file in a fresh temporary directory holding text; its path (static). */
static const char *file_with(const char *name, const char *text)
{
	static char path[128];
	FILE *f;

	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_proto.XXXXXX");
		if (!mkdtemp(tmpdir))
			return NULL;
		ty_test_on(TY_TEST_TEARDOWN, tmpdir_remove);
	}
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	if (!(f = fopen(path, "w")))
		return NULL;
	fputs(text, f);
	fclose(f);
	return path;
}

TY_TEST(node_keys_derive_from_the_secret)
{
	char key[PROTO_NODE_KEY_LEN + 1], other[PROTO_NODE_KEY_LEN + 1], mac[PROTO_NODE_KEY_LEN + 1];

	/* printf 'trainyard-node:gpu-017' | openssl dgst -sha256 -hmac SECRET */
	proto_node_key(key, SECRET, strlen(SECRET), "gpu-017");
	CHECK_STR_EQ(key, "4b7eb4aec6a7087c039882a5a1c6824016d289a1c222f917d3bb620b2ac2d60e");
	proto_node_key(other, SECRET, strlen(SECRET), "gpu-018");
	CHECK(strcmp(key, other) != 0);
	/* printf '{"v":1}' | openssl dgst -sha256 -hmac KEY */
	proto_mac(mac, key, "{\"v\":1}", 7);
	CHECK_STR_EQ(mac, "d9ecb62408e55505b169cd224d920aca41e4cea8db735f589a638a4fafaebdaa");
	CHECK_INT_EQ(proto_check_mac(key, "{\"v\":1}", 7, mac), PROTO_AUTHENTIC);
	CHECK_INT_EQ(proto_check_mac(key, "{\"v\":2}", 7, mac), PROTO_REJECT_BAD_SIGNATURE);
	CHECK_INT_EQ(proto_check_mac(other, "{\"v\":1}", 7, mac), PROTO_REJECT_BAD_SIGNATURE);
	CHECK_INT_EQ(proto_check_mac(key, "{\"v\":1}", 7, NULL), PROTO_REJECT_UNSIGNED);
	CHECK_INT_EQ(proto_check_mac(key, "{\"v\":1}", 7, ""), PROTO_REJECT_UNSIGNED);
	CHECK_INT_EQ(proto_check_mac(key, "{\"v\":1}", 7, "d9ec"), PROTO_REJECT_BAD_SIGNATURE);
	CHECK_STR_EQ(proto_reject_name(PROTO_REJECT_UNSIGNED), "unsigned");
	CHECK_STR_EQ(proto_reject_name(PROTO_REJECT_BAD_SIGNATURE), "bad_signature");
	CHECK_STR_EQ(proto_reject_name(PROTO_REJECT_REPLAYED), "replayed");
}

TY_TEST(dispatch_signatures_verify_only_for_their_bytes_and_key)
{
	const char *priv = file_with("d.pem", ""), *pub;
	struct ty_ed25519_key *k = NULL, *other = NULL, *pk = NULL;
	char sig[TY_ED25519_SIG_HEX_LEN + 1];
	char path2[128];
	struct ty_err err = {0};
	const char *msg = "{\"v\":1,\"type\":\"launch\"}";

	REQUIRE(priv != NULL);
	snprintf(path2, sizeof(path2), "%s", priv);
	pub = file_with("d.pub.pem", "");
	REQUIRE(pub != NULL);
	REQUIRE_INT_EQ(ty_ed25519_key_generate(path2, pub, &err), 0);
	REQUIRE_INT_EQ(ty_ed25519_key_load(&k, path2, true, &err), 0);
	REQUIRE_INT_EQ(ty_ed25519_key_load(&pk, pub, false, &err), 0);
	REQUIRE_INT_EQ(ty_ed25519_key_generate(path2, pub, &err), 0);
	REQUIRE_INT_EQ(ty_ed25519_key_load(&other, path2, true, &err), 0);
	REQUIRE_INT_EQ(proto_sign(sig, k, msg, strlen(msg)), 0);
	CHECK_INT_EQ(strlen(sig), TY_ED25519_SIG_HEX_LEN);
	CHECK_INT_EQ(proto_check_sig(pk, msg, strlen(msg), sig), PROTO_AUTHENTIC);
	CHECK_INT_EQ(proto_check_sig(k, msg, strlen(msg), sig), PROTO_AUTHENTIC);
	CHECK_INT_EQ(proto_check_sig(other, msg, strlen(msg), sig), PROTO_REJECT_BAD_SIGNATURE);
	CHECK_INT_EQ(proto_check_sig(pk, msg, strlen(msg) - 1, sig), PROTO_REJECT_BAD_SIGNATURE);
	CHECK_INT_EQ(proto_check_sig(pk, msg, strlen(msg), NULL), PROTO_REJECT_UNSIGNED);
	CHECK_INT_EQ(proto_check_sig(pk, msg, strlen(msg), "zz"), PROTO_REJECT_BAD_SIGNATURE);
	/* a public key cannot sign */
	CHECK(proto_sign(sig, pk, msg, strlen(msg)) != 0);
	ty_ed25519_key_free(k);
	ty_ed25519_key_free(pk);
	ty_ed25519_key_free(other);
}

TY_TEST(key_files_are_checked)
{
	char secret[PROTO_NODE_SECRET_MAX + 1], key[PROTO_NODE_KEY_LEN + 1];
	struct ty_err err = {0};
	const char *p;
	size_t n;

	/* `openssl rand -hex 32` and its newline */
	REQUIRE((p = file_with("secret", SECRET SECRET "\n")) != NULL);
	CHECK_INT_EQ(proto_node_secret_load(secret, &n, p, &err), 0);
	CHECK_INT_EQ(n, 64);
	CHECK_STR_EQ(secret, SECRET SECRET);
	REQUIRE((p = file_with("short", "0123456789\n")) != NULL);
	CHECK_INT_EQ(proto_node_secret_load(secret, &n, p, &err), TY_ECONFIG);
	CHECK(strstr(err.msg, "holds 10 bytes; it needs at least 32") != NULL);
	CHECK(strstr(err.msg, p) != NULL);
	ty_err_clear(&err); /* the first error stays otherwise */
	CHECK_INT_EQ(proto_node_secret_load(secret, &n, "/nonexistent/secret", &err), TY_ECONFIG);
	CHECK(strstr(err.msg, "cannot read node secret file '/nonexistent/secret'") != NULL);

	REQUIRE((p = file_with("key", "4b7eb4aec6a7087c039882a5a1c6824016d289a1c222f917d3bb620b2ac2d60e\n")) !=
		NULL);
	CHECK_INT_EQ(proto_node_key_load(key, p, &err), 0);
	CHECK_STR_EQ(key, "4b7eb4aec6a7087c039882a5a1c6824016d289a1c222f917d3bb620b2ac2d60e");
	static const char *const bad_keys[] = {
	    "4B7EB4AEC6A7087C039882A5A1C6824016D289A1C222F917D3BB620B2AC2D60E\n", /* upper case */
	    "4b7eb4aec6a7087c039882a5a1c6824016d289a1c222f917d3bb620b2ac2d60\n",  /* 63 */
	    "", "not a key\n"};
	for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); i++) {
		ty_test_context("bad key %zu", i);
		REQUIRE((p = file_with("bad", bad_keys[i])) != NULL);
		ty_err_clear(&err);
		CHECK_INT_EQ(proto_node_key_load(key, p, &err), TY_ECONFIG);
		CHECK(strstr(err.msg, "does not hold a node key") != NULL);
	}
	ty_test_context(NULL);
}

TY_TEST(evidence_source_names)
{
	static const struct {
		const char *name;
		enum proto_evidence_source want;
	} rows[] = {
	    {NULL, PROTO_EVIDENCE_EXECUTOR}, /* an executor from before the field */
	    {"executor", PROTO_EVIDENCE_EXECUTOR},
	    {"log", PROTO_EVIDENCE_LOG},
	    {"", PROTO_EVIDENCE_LOG}, /* unknown: the weaker claim */
	    {"Executor", PROTO_EVIDENCE_LOG},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].name ? rows[i].name : "(absent)");
		CHECK_INT_EQ(proto_evidence_source_parse(rows[i].name), rows[i].want);
	}
	CHECK_STR_EQ(proto_evidence_source_name(PROTO_EVIDENCE_EXECUTOR), "executor");
	CHECK_STR_EQ(proto_evidence_source_name(PROTO_EVIDENCE_LOG), "log");
	CHECK_STR_EQ(proto_evidence_source_name(PROTO_EVIDENCE_SOURCE_COUNT), "unknown");
	CHECK_STR_EQ(PROTO_EVIDENCE_SOURCE_FIELD, "evidence_source");
}

TY_TEST(conditions_are_checked_field_by_field)
{
	static const struct {
		const char *json;
		const char *fault; /* NULL: valid */
	} rows[] = {
	    {"{'kind':'xid','severity':'fatal','gpu':0,'gpu_uuid':'GPU-1','code':79,"
	     "'evidence':'Xid 79 on GPU 0','first_seen':1,'last_seen':2}",
	     NULL},
	    {"{'kind':'port_down','severity':'degraded','port':'mlx5_0/1','gpu':null,"
	     "'evidence':'mlx5_0/1 DOWN','first_seen':5,'last_seen':5,'newer':true}",
	     NULL},
	    {"{'kind':'a_kind_from_a_newer_executor','severity':'degraded','evidence':'x',"
	     "'first_seen':1,'last_seen':1}",
	     NULL},
	    {"[]", "not an object"},
	    {"{'severity':'fatal','evidence':'x','first_seen':1,'last_seen':1}", "kind must be"},
	    {"{'kind':'Xid','severity':'fatal','evidence':'x','first_seen':1,'last_seen':1}",
	     "kind must be"},
	    {"{'kind':'xid','severity':'bad','evidence':'x','first_seen':1,'last_seen':1}",
	     "severity must be"},
	    {"{'kind':'xid','severity':'fatal','evidence':'','first_seen':1,'last_seen':1}",
	     "evidence must be"},
	    {"{'kind':'xid','severity':'fatal','evidence':'x','gpu':-1,'first_seen':1,"
	     "'last_seen':1}",
	     "gpu must be"},
	    {"{'kind':'xid','severity':'fatal','evidence':'x','port':3,'first_seen':1,"
	     "'last_seen':1}",
	     "port must be"},
	    {"{'kind':'xid','severity':'fatal','evidence':'x','code':'79','first_seen':1,"
	     "'last_seen':1}",
	     "code must be"},
	    {"{'kind':'xid','severity':'fatal','evidence':'x','first_seen':3,'last_seen':1}",
	     "first_seen <= last_seen"},
	    {"{'kind':'xid','severity':'fatal','evidence':'x','first_seen':1}", "last_seen"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *c = json_loads(ty_test_jf("%s", rows[i].json), 0, NULL);
		struct ty_err err = {0};
		int rc;

		ty_test_context("%s", rows[i].json);
		rc = proto_condition_check(c, &err);
		if (!rows[i].fault)
			CHECK_INT_EQ(rc, 0);
		else {
			CHECK_INT_EQ(rc, TY_EPARSE);
			CHECK(strstr(err.msg, rows[i].fault) != NULL);
		}
		json_decref(c);
	}
	ty_test_context(NULL);
	CHECK_STR_EQ(proto_condition_kind_name(PROTO_CONDITION_XID), "xid");
	CHECK_STR_EQ(proto_condition_kind_name(PROTO_CONDITION_KIND_COUNT), "unknown");
	CHECK_INT_EQ(proto_severity_parse("fatal"), PROTO_SEVERITY_FATAL);
	CHECK_INT_EQ(proto_severity_parse(NULL), PROTO_SEVERITY_COUNT);
	CHECK_STR_EQ(proto_severity_name(PROTO_SEVERITY_DEGRADED), "degraded");
}

TY_TEST(progress_entries_are_built_and_checked_field_by_field)
{
	static const struct {
		const char *json;
		const char *fault; /* NULL: valid */
	} rows[] = {
	    {"{'rank':3,'step':120,'steps_per_second':2.5,'samples_per_second':512.5,"
	     "'step_at':1764000000000}",
	     NULL},
	    {"{'rank':0,'step':0,'steps_per_second':null,'samples_per_second':null,'step_at':1,"
	     "'newer':true}",
	     NULL},
	    {"{'rank':0,'step':7,'steps_per_second':3,'step_at':1}", NULL}, /* an integer rate */
	    {"[]", "not an object"},
	    {"{'step':1,'step_at':1}", "rank must be"},
	    {"{'rank':-1,'step':1,'step_at':1}", "rank must be"},
	    {"{'rank':2,'step':'1','step_at':1}", "progress of rank 2: step must be"},
	    {"{'rank':2,'step':-4,'step_at':1}", "step must be"},
	    {"{'rank':2,'step':1,'steps_per_second':-0.5,'step_at':1}", "steps_per_second and"},
	    {"{'rank':2,'step':1,'samples_per_second':'fast','step_at':1}", "steps_per_second and"},
	    {"{'rank':2,'step':1}", "step_at must be"},
	    {"{'rank':2,'step':1,'step_at':1.5}", "step_at must be"},
	};
	json_t *built, *want;
	struct ty_err err = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *p = json_loads(ty_test_jf("%s", rows[i].json), 0, NULL);
		int rc;

		memset(&err, 0, sizeof(err));
		ty_test_context("%s", rows[i].json);
		rc = proto_progress_check(p, &err);
		if (!rows[i].fault)
			CHECK_INT_EQ(rc, 0);
		else {
			CHECK_INT_EQ(rc, TY_EPARSE);
			CHECK(strstr(err.msg, rows[i].fault) != NULL);
		}
		json_decref(p);
	}
	ty_test_context(NULL);
	/* the builder's entries pass the check; a negative rate is null */
	built = proto_progress_rank(3, 120, 2.5, -1, 1764000000000);
	REQUIRE(built != NULL);
	memset(&err, 0, sizeof(err));
	CHECK_INT_EQ(proto_progress_check(built, &err), 0);
	want = json_loads(ty_test_jf("{'rank':3,'step':120,'steps_per_second':2.5,"
				     "'samples_per_second':null,'step_at':1764000000000}"),
			  0, NULL);
	CHECK(json_equal(built, want));
	json_decref(want);
	json_decref(built);
}
