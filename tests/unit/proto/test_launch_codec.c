/*
 * proto/launch.c and proto/job_spec.c: what the scheduler encodes, an
 * executor decodes to the same values; what a node's part adds; the spec
 * table's defaults and names.
 */
#include "launch.h"
#include "ty_test.h"

#include <signal.h>
#include <string.h>

static int decode_data(struct proto_launch *l, json_t *data, struct ty_err *err)
{
	struct proto_msg m = {.type = PROTO_LAUNCH, .job = 7, .attempt = 2, .data = data};
	int rc = proto_launch_decode(l, &m, err);

	json_decref(data);
	return rc;
}

TY_TEST(an_encoded_launch_decodes_to_the_same_values)
{
	char *argv[] = {"python3", "train.py", "--lr", "0.1", NULL};
	json_t *env = json_pack("{s:s}", "EPOCHS", "3");
	struct proto_launch in = {
	    .nnodes = 2,
	    .world_size = 8,
	    .local_world_size = 4,
	    .master_addr = "10.0.0.1",
	    .master_port = 29500,
	    .command = argv,
	    .env = env,
	    .mode = PROTO_LAUNCH_PER_GPU,
	    .max_runtime_ms = 3600000,
	    .kill_grace_ms = 30000,
	    .hang_timeout_ms = 1800000,
	    .start_timeout_ms = 600000,
	    .checkpoint_keep = 5,
	    .checkpoint_keep_every = 1000,
	    .checkpoint_tier = true,
	    .checkpoint_signal = SIGUSR2,
	    .preflight = true,
	    .uid = 20001,
	    .gid = 20001,
	    .cpus = 16,
	    .memory_mb = 65536,
	    .image = "registry.example/ml/train:1",
	};
	int gpus[] = {4, 5, 6, 7};
	struct proto_launch out;
	struct ty_err err = {0};
	json_t *common;

	memset(in.metrics_token, 0, sizeof(in.metrics_token));
	memcpy(in.metrics_token, "tym_", 4);
	memset(in.metrics_token + 4, 'A', 43);
	strcpy(in.team, "ml");
	in.resume = (struct proto_launch_resume){.set = true, .step = 300,
						 .path = "/ckpt/job-7/step-300"};
	memset(in.resume.digest, 'a', PROTO_LAUNCH_DIGEST_LEN);
	REQUIRE((common = proto_launch_common(&in)) != NULL);
	/* the attempt's part carries no node's part */
	CHECK(!json_object_get(common, "node_rank") && !json_object_get(common, "gpus"));
	REQUIRE_INT_EQ(decode_data(&out, proto_launch_data(common, &(struct proto_launch_node){
								    .node_rank = 1,
								    .first_rank = 4,
								    .gpus = gpus,
								    .ngpus = 4,
								    .boot_id = "b1",
								}),
				   &err),
		       0);
	CHECK_INT_EQ(out.job, 7);
	CHECK_INT_EQ(out.attempt, 2);
	CHECK_INT_EQ(out.nnodes, 2);
	CHECK_INT_EQ(out.world_size, 8);
	CHECK_INT_EQ(out.local_world_size, 4);
	CHECK_INT_EQ(out.node_rank, 1);
	CHECK_INT_EQ(out.first_rank, 4);
	CHECK_STR_EQ(out.master_addr, "10.0.0.1");
	CHECK_INT_EQ(out.master_port, 29500);
	REQUIRE(out.command != NULL);
	for (int i = 0; argv[i]; i++)
		CHECK_STR_EQ(out.command[i], argv[i]);
	CHECK(out.command[4] == NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(out.env, "EPOCHS")), "3");
	CHECK_INT_EQ(out.mode, PROTO_LAUNCH_PER_GPU);
	CHECK_INT_EQ(out.max_runtime_ms, 3600000);
	CHECK_INT_EQ(out.kill_grace_ms, 30000);
	CHECK_INT_EQ(out.hang_timeout_ms, 1800000);
	CHECK_INT_EQ(out.start_timeout_ms, 600000);
	CHECK_INT_EQ(out.checkpoint_keep, 5);
	CHECK_INT_EQ(out.checkpoint_keep_every, 1000);
	CHECK(out.checkpoint_tier);
	CHECK_INT_EQ(out.checkpoint_signal, SIGUSR2);
	CHECK(out.preflight);
	CHECK_STR_EQ(out.metrics_token, in.metrics_token);
	CHECK_INT_EQ(out.uid, 20001);
	CHECK_INT_EQ(out.gid, 20001);
	CHECK_INT_EQ(out.cpus, 16);
	CHECK_INT_EQ(out.memory_mb, 65536);
	CHECK_STR_EQ(out.image, "registry.example/ml/train:1");
	CHECK_STR_EQ(out.team, "ml");
	CHECK(out.resume.set);
	CHECK_INT_EQ(out.resume.step, 300);
	CHECK_STR_EQ(out.resume.digest, in.resume.digest);
	CHECK_STR_EQ(out.resume.path, "/ckpt/job-7/step-300");
	REQUIRE_INT_EQ(out.ngpus, 4);
	for (int i = 0; i < 4; i++)
		CHECK_INT_EQ(out.gpus[i], gpus[i]);
	proto_launch_clear(&out);
	json_decref(common);
	json_decref(env);
}

TY_TEST(what_the_encoder_leaves_out_decodes_to_the_defaults)
{
	char *argv[] = {"true", NULL};
	struct proto_launch in = {
	    .nnodes = 1,
	    .world_size = 1,
	    .local_world_size = 1,
	    .master_addr = "n1",
	    .master_port = 1,
	    .command = argv,
	    .mode = PROTO_LAUNCH_PER_NODE,
	    .kill_grace_ms = -1,
	    .checkpoint_keep = 3,
	    .checkpoint_signal = SIGUSR1,
	    .uid = -1,
	    .gid = -1,
	};
	struct proto_launch out;
	struct ty_err err = {0};
	json_t *common = proto_launch_common(&in);

	REQUIRE(common != NULL);
	/* no token, no uid, no image, no team, no grace: not on the wire */
	CHECK(!json_object_get(common, "metrics_token") && !json_object_get(common, "uid") &&
	      !json_object_get(common, "image") && !json_object_get(common, "team") &&
	      !json_object_get(common, "kill_grace_seconds") && !json_object_get(common, "resume"));
	REQUIRE_INT_EQ(decode_data(&out, proto_launch_data(common, &(struct proto_launch_node){0}),
				   &err),
		       0);
	CHECK_INT_EQ(out.mode, PROTO_LAUNCH_PER_NODE);
	CHECK_INT_EQ(out.kill_grace_ms, -1);
	CHECK_INT_EQ(out.uid, -1);
	CHECK(out.image == NULL);
	CHECK_STR_EQ(out.metrics_token, "");
	CHECK_INT_EQ(out.ngpus, 0);
	CHECK(!out.resume.set && out.resume.path == NULL); /* an older scheduler's launch */
	proto_launch_clear(&out);
	json_decref(common);
}

/* A resume the executor cannot check exactly is refused, never guessed at. */
TY_TEST(a_bad_resume_names_the_field)
{
	static const char *const rows[][2] = {
	    {"'x'", "resume"},
	    {"{'digest':'D','path':'/c/step-1'}", "resume"},
	    {"{'step':-1,'digest':'D','path':'/c/step-1'}", "resume"},
	    {"{'step':1,'digest':'abc','path':'/c/step-1'}", "resume.digest"},
	    {"{'step':1,'digest':'U','path':'/c/step-1'}", "resume.digest"},
	    {"{'step':1,'digest':'D'}", "resume.path"},
	    {"{'step':1,'digest':'D','path':''}", "resume.path"},
	};
	char *argv[] = {"true", NULL};
	struct proto_launch in = {.nnodes = 1, .world_size = 1, .local_world_size = 1,
				  .master_addr = "n1", .master_port = 1, .command = argv,
				  .uid = -1, .gid = -1};
	json_t *common = proto_launch_common(&in);

	REQUIRE(common != NULL);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char text[256], *p;
		struct proto_launch out;
		struct ty_err err = {0};
		json_t *d = proto_launch_data(common, &(struct proto_launch_node){0});

		snprintf(text, sizeof(text), "%s", rows[i][0]);
		for (p = text; *p; p++)
			if (*p == '\'')
				*p = '"';
		/* D: a good digest; U: one in upper case */
		if ((p = strstr(text, "\"D\"")) || (p = strstr(text, "\"U\""))) {
			char c = p[1] == 'D' ? 'a' : 'A';
			char fixed[256];

			snprintf(fixed, sizeof(fixed), "%.*s\"%.*s\"%s", (int)(p - text), text, 64,
				 c == 'a' ? "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
					  : "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
				 p + 3);
			snprintf(text, sizeof(text), "%s", fixed);
		}
		ty_test_context("%s", rows[i][0]);
		REQUIRE(json_object_set_new(d, "resume", json_loads(text, JSON_DECODE_ANY, NULL)) ==
			0);
		CHECK_INT_EQ(decode_data(&out, d, &err), TY_EINVAL);
		CHECK(strstr(err.msg, rows[i][1]) != NULL);
		proto_launch_clear(&out);
	}
	json_decref(common);
}

TY_TEST(a_launch_out_of_range_names_the_field)
{
	static const struct {
		const char *json;
		const char *names;
	} rows[] = {
	    {"{'nnodes':0}", "nnodes"},
	    {"{'nnodes':2,'node_rank':2}", "node_rank"},
	    {"{'nnodes':1,'node_rank':0,'world_size':2,'local_world_size':3}", "local_world_size"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char text[256];
		struct proto_launch out;
		struct ty_err err = {0};

		snprintf(text, sizeof(text), "%s", rows[i].json);
		for (char *p = text; *p; p++)
			if (*p == '\'')
				*p = '"';
		ty_test_context("%s", rows[i].json);
		CHECK_INT_EQ(decode_data(&out, json_loads(text, 0, NULL), &err), TY_EINVAL);
		CHECK(strstr(err.msg, rows[i].names) != NULL);
		proto_launch_clear(&out);
	}
}

TY_TEST(the_spec_table_gives_each_default_once)
{
	CHECK_INT_EQ(proto_spec_default_int("checkpoint", "keep"), 3);
	CHECK_INT_EQ(proto_spec_default_int(NULL, "hang_timeout_seconds"), 1800);
	CHECK_INT_EQ(proto_spec_default_int(NULL, "start_timeout_seconds"), 600);
	CHECK_INT_EQ(proto_spec_default_int(NULL, "max_runtime_seconds"), 86400);
	CHECK_STR_EQ(proto_spec_default_str(NULL, "launch"), "per_gpu");
	CHECK_STR_EQ(proto_spec_default_str("checkpoint", "signal"), "SIGUSR1");
	CHECK(proto_spec_default_str("topology", "required") == NULL);
	/* a field of the top level is not one of a sub-object, nor the reverse */
	CHECK(proto_spec_field("checkpoint", "launch") == NULL);
	CHECK(proto_spec_field(NULL, "keep") == NULL);
	/* every table entry is found by its own name, and every range holds its default */
	for (size_t i = 0; i < proto_spec_nfields; i++) {
		const struct proto_spec_field *f = &proto_spec_fields[i];

		ty_test_context("%s.%s", f->obj ? f->obj : "", f->key);
		CHECK(proto_spec_field(f->obj, f->key) == f);
		if (f->type == PROTO_SPEC_INT)
			CHECK(f->idef >= f->min && f->idef <= f->max);
	}
}

TY_TEST(launch_modes_and_signals_by_name)
{
	CHECK_INT_EQ(proto_launch_mode_parse("per_node"), PROTO_LAUNCH_PER_NODE);
	CHECK_INT_EQ(proto_launch_mode_parse("per_rank"), PROTO_LAUNCH_MODE_COUNT);
	CHECK_INT_EQ(proto_launch_mode_parse(NULL), PROTO_LAUNCH_MODE_COUNT);
	CHECK_STR_EQ(proto_launch_mode_name(PROTO_LAUNCH_PER_GPU), "per_gpu");
	CHECK_INT_EQ(proto_ckpt_signal_parse("SIGTERM"), SIGTERM);
	CHECK_INT_EQ(proto_ckpt_signal_parse("HUP"), SIGHUP);
	CHECK_INT_EQ(proto_ckpt_signal_parse("SIGKILL"), -1);
	CHECK_INT_EQ(proto_ckpt_signal_parse("SIG"), -1);
	CHECK_INT_EQ(proto_ckpt_signal_parse(NULL), -1);
}

