/*
 * The message decoders (proto/proto.c) and what consumers do next with a
 * message they accept. The first byte picks the topic the rest arrives on
 * (0 dispatch, 1 events, 2 nodes, modulo 3); the rest goes through
 * proto_decode. A message of another topic is dropped (as the executor and
 * scheduler consumers do); on the dispatch topic a launch is checked by
 * proto_launch_decode and, when valid, the environment of its first and last
 * local rank is built (exec_env_build, exec_cuda_devices); a checkpoint's
 * signal goes through proto_ckpt_signal_parse. Invariants: whatever decodes
 * encodes again, and that encoding decodes to the same message.
 */
#include "exec.h"
#include "fuzz.h"
#include "proto.h"

static const char *const topics[] = {PROTO_TOPIC_DISPATCH, PROTO_TOPIC_EVENTS, PROTO_TOPIC_NODES};

static void launch(const struct proto_msg *m)
{
	static char *const inherit[] = {"PATH=/usr/bin:/bin", "HOME=/root", NULL};
	static char *const fabric[] = {"NCCL_SOCKET_IFNAME=eth0", NULL};
	struct exec_env_extra extra = {.fabric = fabric,
				       .checkpoint_dir = "/ckpt/job",
				       .progress_file = "/run/progress-0",
				       .api_url = "http://127.0.0.1:8080"};
	struct ty_err err = {0};
	struct proto_launch l;

	if (proto_launch_decode(&l, m, &err)) {
		FUZZ_CHECK(err.code == TY_EINVAL || err.code == TY_EPARSE);
		proto_launch_clear(&l);
		return;
	}
	FUZZ_CHECK(l.command && l.command[0]);
	FUZZ_CHECK(l.local_world_size >= 1 && l.local_world_size <= PROTO_LAUNCH_MAX_LOCAL_RANKS);
	for (int pass = 0; pass < 2; pass++) {
		int lr = pass ? l.local_world_size - 1 : 0;
		char cuda[8192];
		char **env = NULL;

		exec_cuda_devices(cuda, sizeof(cuda), &l, lr, NULL);
		if (!exec_env_build(&env, &l, lr, m->node, inherit, &extra, &err)) {
			FUZZ_CHECK(exec_env_get(env, "RANK"));
			exec_env_free(env);
		}
	}
	proto_launch_clear(&l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ty_err err = {0};
	struct proto_msg m, back;
	const char *topic;
	char *enc = NULL;
	size_t len = 0;

	if (size < 1)
		return 0;
	topic = topics[data[0] % 3];
	if (proto_decode(&m, data + 1, size - 1, &err)) {
		FUZZ_CHECK(err.code == TY_EPARSE || err.code == TY_EINVAL);
		FUZZ_CHECK(m.type == PROTO_NONE && !m.data);
		return 0;
	}
	FUZZ_CHECK(m.type > PROTO_NONE && m.type < PROTO_TYPE_COUNT);
	FUZZ_CHECK(proto_node_id_ok(m.node) && json_is_object(m.data));
	FUZZ_CHECK(proto_node_partition(m.node, 12) < 12);

	/* round trip */
	FUZZ_CHECK(!proto_encode(&enc, &len, &m, &err));
	FUZZ_CHECK(!proto_decode(&back, enc, len, &err));
	FUZZ_CHECK(back.type == m.type && !strcmp(back.node, m.node) && back.job == m.job &&
		   back.attempt == m.attempt && back.epoch == m.epoch && back.seq == m.seq &&
		   back.ts == m.ts && json_equal(back.data, m.data));
	proto_msg_clear(&back);
	free(enc);

	if (strcmp(proto_type_topic(m.type), topic) == 0 &&
	    strcmp(topic, PROTO_TOPIC_DISPATCH) == 0) {
		if (m.type == PROTO_LAUNCH)
			launch(&m);
		else if (m.type == PROTO_CHECKPOINT)
			(void)proto_ckpt_signal_parse(json_string_value(json_object_get(m.data, "signal")));
	}
	proto_msg_clear(&m);
	return 0;
}
