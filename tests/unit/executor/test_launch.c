/* executor/launch.c: launch checks and the rank environment contract. */
#include "exec.h"
#include "ty_test.h"

#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

/* A launch of job 7 attempt 2: node 1 of 2, ranks 4..7 of 8 on GPUs 4..7. */
#define BASE                                                                                       \
	"'node_rank':1,'nnodes':2,'world_size':8,'local_world_size':4,'first_rank':4,"             \
	"'master_addr':'10.0.0.1','master_port':29500,'command':['python','train.py']"
#define GPUS "'gpus':[4,5,6,7]"
/* a well-formed trial metrics token: "tym_" and 43 base64url characters */
#define MTOK_BODY "AAAAAAAAAAAAAAAAAAAAb-_9zzzzzzzzzzzzzzzzzzz"
#define MTOK "tym_" MTOK_BODY
#define MTOK_SPACE "AAAAAAAAAAAAAAAAAAAAb-_9zzzzzzzzzz zzzzzzzz"

static int parse(struct proto_launch *l, struct ty_err *err, const char *data)
{
	struct proto_msg m = {.type = PROTO_LAUNCH, .job = 7, .attempt = 2};
	json_error_t jerr;
	int rc;

	m.data = json_loads(ty_test_jf("%s", data), 0, &jerr);
	if (!m.data)
		FAIL("test JSON does not parse: %s: %s", data, jerr.text);
	REQUIRE(m.data != NULL);
	ty_err_clear(err);
	rc = proto_launch_decode(l, &m, err);
	json_decref(m.data);
	return rc;
}

TY_TEST(launch_checks)
{
	static const struct {
		const char *name;
		const char *data;
		const char *err; /* NULL: valid; else a substring of the message */
	} rows[] = {
	    {"valid", "{" BASE "," GPUS ",'env':{'A':'1'},'launch':'per_gpu'}", NULL},
	    {"no GPUs", "{" BASE ",'gpus':[],'env':{},'launch':'per_gpu'}", NULL},
	    {"per_node", "{" BASE ",'gpus':[0,1],'env':{},'launch':'per_node'}", NULL},
	    {"optional fields",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu',"
	     "'max_runtime_seconds':60,'kill_grace_seconds':2}",
	     NULL},
	    {"node_rank = nnodes",
	     "{'node_rank':2,'nnodes':2,'world_size':8,'local_world_size':4,"
	     "'first_rank':4,'master_addr':'a','master_port':1,"
	     "'command':['x']," GPUS ",'env':{},'launch':'per_gpu'}",
	     "'node_rank' is 2"},
	    {"ranks past world",
	     "{'node_rank':1,'nnodes':2,'world_size':8,'local_world_size':4,"
	     "'first_rank':5,'master_addr':'a','master_port':1,"
	     "'command':['x']," GPUS ",'env':{},'launch':'per_gpu'}",
	     "'first_rank' is 5"},
	    {"no local ranks",
	     "{'node_rank':0,'nnodes':1,'world_size':8,'local_world_size':0,"
	     "'first_rank':0,'master_addr':'a','master_port':1,"
	     "'command':['x'],'gpus':[],'env':{},'launch':'per_gpu'}",
	     "'local_world_size' is 0"},
	    {"port 0",
	     "{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
	     "'first_rank':0,'master_addr':'a','master_port':0,"
	     "'command':['x'],'gpus':[],'env':{},'launch':'per_gpu'}",
	     "'master_port' is 0"},
	    {"port 70000",
	     "{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
	     "'first_rank':0,'master_addr':'a','master_port':70000,"
	     "'command':['x'],'gpus':[],'env':{},'launch':'per_gpu'}",
	     "'master_port' is 70000"},
	    {"empty master_addr",
	     "{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
	     "'first_rank':0,'master_addr':'','master_port':1,"
	     "'command':['x'],'gpus':[],'env':{},'launch':'per_gpu'}",
	     "master_addr"},
	    {"bad mode", "{" BASE "," GPUS ",'env':{},'launch':'per_rank'}", "per_rank"},
	    {"GPU twice", "{" BASE ",'gpus':[4,5,5,7],'env':{},'launch':'per_gpu'}", "twice"},
	    {"negative GPU", "{" BASE ",'gpus':[4,5,-6,7],'env':{},'launch':'per_gpu'}", "GPU 2"},
	    {"GPU as string", "{" BASE ",'gpus':['4',5,6,7],'env':{},'launch':'per_gpu'}", "GPU 0"},
	    {"per_gpu GPU count", "{" BASE ",'gpus':[4,5],'env':{},'launch':'per_gpu'}",
	     "lists 2 GPUs"},
	    {"empty command",
	     "{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
	     "'first_rank':0,'master_addr':'a','master_port':1,"
	     "'command':[],'gpus':[],'env':{},'launch':'per_gpu'}",
	     "command"},
	    {"empty program",
	     "{'node_rank':0,'nnodes':1,'world_size':1,'local_world_size':1,"
	     "'first_rank':0,'master_addr':'a','master_port':1,"
	     "'command':['','x'],'gpus':[],'env':{},'launch':'per_gpu'}",
	     "program is empty"},
	    {"argument not a string",
	     "{'node_rank':0,'nnodes':1,'world_size':1,"
	     "'local_world_size':1,'first_rank':0,'master_addr':'a',"
	     "'master_port':1,'command':['x',1],'gpus':[],'env':{},"
	     "'launch':'per_gpu'}",
	     "argument 1"},
	    {"env name digit", "{" BASE "," GPUS ",'env':{'1A':'x'},'launch':'per_gpu'}", "'1A'"},
	    {"env name dash", "{" BASE "," GPUS ",'env':{'A-B':'x'},'launch':'per_gpu'}", "'A-B'"},
	    {"env name empty", "{" BASE "," GPUS ",'env':{'':'x'},'launch':'per_gpu'}", "env name"},
	    {"env value number", "{" BASE "," GPUS ",'env':{'A':1},'launch':'per_gpu'}",
	     "'A' must be a string"},
	    {"negative runtime",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu',"
	     "'max_runtime_seconds':-1}",
	     "max_runtime_seconds"},
	    {"grace too long",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu',"
	     "'kill_grace_seconds':3601}",
	     "kill_grace_seconds"},
	    {"negative hang timeout",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','hang_timeout_seconds':-5}",
	     "launch field 'hang_timeout_seconds' must be an integer in 0.."},
	    {"hang timeout a string",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','hang_timeout_seconds':'60'}",
	     "launch field 'hang_timeout_seconds' must be an integer in 0.."},
	    {"start timeout a float",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','start_timeout_seconds':1.5}",
	     "launch field 'start_timeout_seconds' must be an integer in 0.."},
	    {"timeouts null",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu',"
	     "'hang_timeout_seconds':null,'start_timeout_seconds':null}",
	     NULL},
	    {"keep and preflight",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu',"
	     "'checkpoint_keep':0,'preflight':false}",
	     NULL},
	    {"keep negative",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','checkpoint_keep':-1}",
	     "launch field 'checkpoint_keep' is -1, not in 0..1000"},
	    {"keep a string",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','checkpoint_keep':'3'}",
	     "launch field 'checkpoint_keep' must be an integer"},
	    {"checkpoint_keep_every negative",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','checkpoint_keep_every':-1}",
	     "launch field 'checkpoint_keep_every' is -1, not in 0..1000000000"},
	    {"checkpoint_tier not a boolean",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','checkpoint_tier':1}",
	     "launch field 'checkpoint_tier' must be a boolean"},
	    {"metrics token", "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':'" MTOK "'}",
	     NULL},
	    {"metrics token null", "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':null}",
	     NULL},
	    {"metrics token a team token",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':'ty_" MTOK_BODY "x'}",
	     "launch field 'metrics_token' must be 'tym_' and 43 base64url characters"},
	    {"metrics token short",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':'tym_abc'}",
	     "launch field 'metrics_token' must be"},
	    {"metrics token with a space",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':'tym_" MTOK_SPACE "'}",
	     "launch field 'metrics_token' must be"},
	    {"metrics token a number",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':7}",
	     "launch field 'metrics_token' must be"},
	    {"preflight a string",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','preflight':'yes'}",
	     "launch field 'preflight' must be a boolean"},
	    {"team", "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','team':'ml-research'}", NULL},
	    {"team null", "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','team':null}", NULL},
	    {"team empty", "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','team':''}",
	     "launch field 'team' must be a string of 1..63 characters"},
	    {"team a number", "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','team':3}",
	     "launch field 'team' must be a string"},
	    {"team too long",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','team':"
	     "'a123456789012345678901234567890123456789012345678901234567890123'}",
	     "launch field 'team' must be a string of 1..63 characters"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct proto_launch l;
		struct ty_err err = {0};
		int rc;

		ty_test_context("%s", rows[i].name);
		rc = parse(&l, &err, rows[i].data);
		if (!rows[i].err) {
			CHECK_INT_EQ(rc, 0);
			if (rc)
				ty_test_note("%s", err.msg);
		} else {
			CHECK_INT_EQ(rc, TY_EINVAL);
			if (!strstr(err.msg, rows[i].err))
				FAIL("message '%s' lacks '%s'", err.msg, rows[i].err);
		}
		proto_launch_clear(&l);
	}
}

TY_TEST(launch_copies_fields)
{
	struct proto_launch l;
	struct ty_err err = {0};

	REQUIRE_INT_EQ(parse(&l, &err,
			     "{" BASE "," GPUS ",'env':{'A':'1'},'launch':'per_node',"
			     "'max_runtime_seconds':60,'kill_grace_seconds':2,"
			     "'hang_timeout_seconds':900,'start_timeout_seconds':300}"),
		       0);
	CHECK_INT_EQ(l.job, 7);
	CHECK_INT_EQ(l.attempt, 2);
	CHECK_INT_EQ(l.node_rank, 1);
	CHECK_INT_EQ(l.nnodes, 2);
	CHECK_INT_EQ(l.world_size, 8);
	CHECK_INT_EQ(l.local_world_size, 4);
	CHECK_INT_EQ(l.first_rank, 4);
	CHECK_STR_EQ(l.master_addr, "10.0.0.1");
	CHECK_INT_EQ(l.master_port, 29500);
	CHECK_INT_EQ(l.ngpus, 4);
	CHECK_INT_EQ(l.gpus[3], 7);
	CHECK_STR_EQ(l.command[0], "python");
	CHECK_STR_EQ(l.command[1], "train.py");
	CHECK(l.command[2] == NULL);
	CHECK_INT_EQ(l.mode, PROTO_LAUNCH_PER_NODE);
	CHECK_INT_EQ(l.max_runtime_ms, 60000);
	CHECK_INT_EQ(l.kill_grace_ms, 2000);
	CHECK_INT_EQ(l.hang_timeout_ms, 900000);
	CHECK_INT_EQ(l.start_timeout_ms, 300000);
	CHECK_STR_EQ(l.team, ""); /* a scheduler from before the field */
	proto_launch_clear(&l);
	REQUIRE_INT_EQ(parse(&l, &err,
			     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','team':'ml-research'}"),
		       0);
	CHECK_STR_EQ(l.team, "ml-research");
	proto_launch_clear(&l);
	REQUIRE_INT_EQ(parse(&l, &err, "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}"), 0);
	CHECK_INT_EQ(l.max_runtime_ms, 0);
	CHECK_INT_EQ(l.kill_grace_ms, -1);
	CHECK_INT_EQ(l.hang_timeout_ms, 0);
	CHECK_INT_EQ(l.start_timeout_ms, 0);
	proto_launch_clear(&l);
}

struct kv {
	const char *name;
	const char *value; /* NULL: must be absent */
};

static char *const fabric[] = {"NCCL_IB_HCA==mlx5_0:1", "NCCL_SOCKET_IFNAME==eth0",
			       "NCCL_DEBUG=WARN", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1", NULL};
/* a fabric that tries to set what others own */
static char *const fabric_greedy[] = {"PATH=/fabric/bin", "RANK=99", "TRAINYARD_CHECKPOINT_DIR=/f",
				      "NCCL_DEBUG=WARN", NULL};
static const struct exec_env_extra with_fabric = {.fabric = fabric};
static const struct exec_env_extra with_greedy = {.fabric = fabric_greedy};
static const struct exec_env_extra with_paths = {.fabric = fabric,
						 .checkpoint_dir = "/ckpt/7",
						 .resume_from = "/ckpt/7/step-100",
						 .progress_file = "/state/attempts/7.2/progress"};
static const struct exec_env_extra with_nothing = {0};
static const struct exec_env_extra with_api = {.api_url = "http://10.0.0.9:8080/"};

TY_TEST(env_contract)
{
	static char *const parent[] = {"PATH=/usr/bin:/bin", "HOME=/home/ty",	    "LANG=C.UTF-8",
				       "SECRET=hunter2",     "LD_PRELOAD=/evil.so", NULL};
	static const struct {
		const char *name;
		const char *data;
		int local_rank;
		char *const *inherit;
		struct kv want[20]; /* ends at the first empty entry */
		const struct exec_env_extra *extra;
	} rows[] = {
	    {"per_gpu local rank 0",
	     "{" BASE "," GPUS ",'env':{'A':'1'},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"MASTER_ADDR", "10.0.0.1"},
	      {"MASTER_PORT", "29500"},
	      {"WORLD_SIZE", "8"},
	      {"RANK", "4"},
	      {"LOCAL_RANK", "0"},
	      {"LOCAL_WORLD_SIZE", "4"},
	      {"NODE_RANK", "1"},
	      {"NNODES", "2"},
	      {"CUDA_VISIBLE_DEVICES", "4"}, /* no inventory: by index */
	      {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
	      {"TRAINYARD_JOB_ID", "7"},
	      {"TRAINYARD_ATTEMPT", "2"},
	      {"TRAINYARD_NODE_ID", "node-1"},
	      {"A", "1"},
	      {"PATH", "/usr/bin:/bin"},
	      {"SECRET", NULL},
	      {"LD_PRELOAD", NULL}},
	     NULL},
	    {"per_gpu local rank 3",
	     "{" BASE ",'gpus':[7,6,5,4],'env':{},'launch':'per_gpu'}",
	     3,
	     parent,
	     {{"RANK", "7"},
	      {"LOCAL_RANK", "3"},
	      {"CUDA_VISIBLE_DEVICES", "4"},
	      {"HOME", "/home/ty"},
	      {"LANG", "C.UTF-8"}},
	     NULL},
	    {"per_node sees every GPU",
	     "{" BASE ",'gpus':[0,1,2,3],'env':{},'launch':'per_node'}",
	     2,
	     parent,
	     {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"RANK", "6"}},
	     NULL},
	    {"no GPUs",
	     "{" BASE ",'gpus':[],'env':{},'launch':'per_gpu'}",
	     1,
	     parent,
	     {{"CUDA_VISIBLE_DEVICES", ""}},
	     NULL},
	    {"the job's env beats the inherited one",
	     "{" BASE "," GPUS ",'env':{'PATH':'/opt/conda/bin','HOME':'/w'},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"PATH", "/opt/conda/bin"}, {"HOME", "/w"}, {"LANG", "C.UTF-8"}},
	     NULL},
	    {"the contract beats the job's env",
	     "{" BASE "," GPUS ",'env':{'RANK':'99','CUDA_VISIBLE_DEVICES':'0,1',"
	     "'TRAINYARD_JOB_ID':'1','MASTER_PORT':'1'},'launch':'per_gpu'}",
	     1,
	     parent,
	     {{"RANK", "5"},
	      {"CUDA_VISIBLE_DEVICES", "5"},
	      {"TRAINYARD_JOB_ID", "7"},
	      {"MASTER_PORT", "29500"}},
	     NULL},
	    {"nothing inherited",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}",
	     0,
	     NULL,
	     {{"PATH", NULL}, {"HOME", NULL}, {"RANK", "4"}},
	     NULL},
	    {"fabric variables reach the rank",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"NCCL_IB_HCA", "=mlx5_0:1"},
	      {"NCCL_SOCKET_IFNAME", "=eth0"},
	      {"NCCL_DEBUG", "WARN"},
	      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
	      {"PATH", "/usr/bin:/bin"},
	      {"TRAINYARD_CHECKPOINT_DIR", NULL},
	      {"TRAINYARD_RESUME_FROM", NULL},
	      {"TRAINYARD_PROGRESS_FILE", NULL}},
	     &with_fabric},
	    {"the job's env beats the fabric",
	     "{" BASE "," GPUS ",'env':{'NCCL_DEBUG':'INFO','NCCL_IB_HCA':'=mlx5_1'},"
	     "'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"NCCL_DEBUG", "INFO"},
	      {"NCCL_IB_HCA", "=mlx5_1"},
	      {"NCCL_SOCKET_IFNAME", "=eth0"},
	      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"}},
	     &with_fabric},
	    {"the fabric beats the inherited env, the contract beats the fabric",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}",
	     1,
	     parent,
	     {{"PATH", "/fabric/bin"}, {"RANK", "5"}, {"TRAINYARD_CHECKPOINT_DIR", "/f"}},
	     &with_greedy},
	    {"contract paths are set and beat the job's env",
	     "{" BASE "," GPUS ",'env':{'TRAINYARD_CHECKPOINT_DIR':'/mine',"
	     "'TRAINYARD_PROGRESS_FILE':'/p'},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"TRAINYARD_CHECKPOINT_DIR", "/ckpt/7"},
	      {"TRAINYARD_RESUME_FROM", "/ckpt/7/step-100"},
	      {"TRAINYARD_PROGRESS_FILE", "/state/attempts/7.2/progress"},
	      {"NCCL_DEBUG", "WARN"}},
	     &with_paths},
	    {"unset contract paths leave the job's own",
	     "{" BASE "," GPUS ",'env':{'TRAINYARD_RESUME_FROM':'/r'},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"TRAINYARD_RESUME_FROM", "/r"},
	      {"TRAINYARD_CHECKPOINT_DIR", NULL},
	      {"NCCL_DEBUG", NULL},
	      {"RANK", "4"}},
	     &with_nothing},
	    {"metrics URL and token with an API URL",
	     "{" BASE "," GPUS ",'env':{'TRAINYARD_METRICS_TOKEN':'mine'},'launch':'per_gpu',"
	     "'metrics_token':'" MTOK "'}",
	     0,
	     parent,
	     {{"TRAINYARD_METRICS_URL", "http://10.0.0.9:8080/v1/jobs/7/metrics"},
	      {"TRAINYARD_METRICS_TOKEN", MTOK}},
	     &with_api},
	    {"no metrics env without an API URL",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu','metrics_token':'" MTOK "'}",
	     0,
	     parent,
	     {{"TRAINYARD_METRICS_URL", NULL}, {"TRAINYARD_METRICS_TOKEN", NULL}},
	     &with_paths},
	    {"no metrics env without a token",
	     "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"TRAINYARD_METRICS_URL", NULL}, {"TRAINYARD_METRICS_TOKEN", NULL}},
	     &with_api},
	    {"values with '=' and spaces",
	     "{" BASE "," GPUS ",'env':{'OPTS':'a=b c','EMPTY':''},'launch':'per_gpu'}",
	     0,
	     parent,
	     {{"OPTS", "a=b c"}, {"EMPTY", ""}},
	     NULL},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct proto_launch l;
		struct ty_err err = {0};
		char **env = NULL;

		ty_test_context("%s", rows[i].name);
		REQUIRE_INT_EQ(parse(&l, &err, rows[i].data), 0);
		REQUIRE_INT_EQ(exec_env_build(&env, &l, rows[i].local_rank, "node-1",
					      rows[i].inherit, rows[i].extra, &err),
			       0);
		for (const struct kv *w = rows[i].want; w->name; w++) {
			ty_test_context("%s: %s", rows[i].name, w->name);
			CHECK_STR_EQ(exec_env_get(env, w->name), w->value);
		}
		/* every name once, every entry NAME=value */
		for (char **e = env; *e; e++) {
			size_t nl = strcspn(*e, "=");

			ty_test_context("%s: entry '%s'", rows[i].name, *e);
			CHECK((*e)[nl] == '=');
			for (char **f = e + 1; *f; f++)
				CHECK(!(strncmp(*e, *f, nl + 1) == 0));
		}
		exec_env_free(env);
		proto_launch_clear(&l);
	}
}

TY_TEST(env_rejects_local_rank_out_of_range)
{
	struct proto_launch l;
	struct ty_err err = {0};
	char **env = (char **)1;

	REQUIRE_INT_EQ(parse(&l, &err, "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}"), 0);
	CHECK_INT_EQ(exec_env_build(&env, &l, 4, "n", NULL, NULL, &err), TY_EINVAL);
	CHECK(env == NULL);
	CHECK_INT_EQ(exec_env_build(&env, &l, -1, "n", NULL, NULL, &err), TY_EINVAL);
	proto_launch_clear(&l);
}

TY_TEST(env_rejects_bad_fabric_entries)
{
	static char *const no_eq[] = {"NCCL_DEBUG=WARN", "GARBAGE", NULL};
	static char *const no_name[] = {"=x", NULL};
	static const struct {
		const struct exec_env_extra extra;
		const char *msg;
	} rows[] = {
	    {{.fabric = no_eq}, "fabric variable 'GARBAGE' is not NAME=value"},
	    {{.fabric = no_name}, "fabric variable '=x' is not NAME=value"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct proto_launch l;
		struct ty_err err = {0};
		char **env = (char **)1;

		ty_test_context("%s", rows[i].msg);
		REQUIRE_INT_EQ(parse(&l, &err, "{" BASE "," GPUS ",'env':{},'launch':'per_gpu'}"),
			       0);
		CHECK_INT_EQ(exec_env_build(&env, &l, 0, "n", NULL, &rows[i].extra, &err),
			     TY_EINVAL);
		CHECK_STR_EQ(err.msg, rows[i].msg);
		CHECK(env == NULL);
		proto_launch_clear(&l);
	}
}

TY_TEST(cuda_devices)
{
	struct proto_launch l = {.mode = PROTO_LAUNCH_PER_NODE, .local_world_size = 1};
	int gpus[] = {3, 1, 2};
	char out[16];

	l.gpus = gpus;
	l.ngpus = 3;
	exec_cuda_devices(out, sizeof(out), &l, 0, NULL);
	CHECK_STR_EQ(out, "3,1,2");
	exec_cuda_devices(out, 5, &l, 0, NULL); /* never a cut-off list */
	CHECK_STR_EQ(out, "3,1");
	l.mode = PROTO_LAUNCH_PER_GPU;
	exec_cuda_devices(out, sizeof(out), &l, 1, NULL);
	CHECK_STR_EQ(out, "1");
	l.ngpus = 0;
	exec_cuda_devices(out, sizeof(out), &l, 0, NULL);
	CHECK_STR_EQ(out, "");
}

/* GPU i of the inventory has index i and UUID GPU-...-00000000000<i>; GPU 2 has none */
static struct hw_gpu inv_gpus[4];
static const struct hw_inventory inv4 = {.gpus = inv_gpus, .ngpus = 4};

static void inv_init(void)
{
	for (int i = 0; i < 4; i++) {
		inv_gpus[i].index = i;
		if (i != 2)
			snprintf(inv_gpus[i].uuid, sizeof(inv_gpus[i].uuid),
				 "GPU-00000000-0000-0000-0000-00000000000%d", i);
	}
}

TY_TEST(cuda_devices_by_uuid)
{
	struct proto_launch l = {.mode = PROTO_LAUNCH_PER_NODE, .local_world_size = 2};
	int gpus[] = {3, 1};
	char out[128];

	inv_init();
	l.gpus = gpus;
	l.ngpus = 2;
	exec_cuda_devices(out, sizeof(out), &l, 0, &inv4);
	CHECK_STR_EQ(out, "GPU-00000000-0000-0000-0000-000000000003,"
			  "GPU-00000000-0000-0000-0000-000000000001");
	/* only whole UUIDs: the second does not fit */
	exec_cuda_devices(out, 60, &l, 0, &inv4);
	CHECK_STR_EQ(out, "GPU-00000000-0000-0000-0000-000000000003");
	l.mode = PROTO_LAUNCH_PER_GPU;
	exec_cuda_devices(out, sizeof(out), &l, 1, &inv4);
	CHECK_STR_EQ(out, "GPU-00000000-0000-0000-0000-000000000001");
	/* a GPU without a UUID (GPU 2), or one the inventory lacks (5): indices, all of them */
	gpus[1] = 2;
	l.mode = PROTO_LAUNCH_PER_NODE;
	exec_cuda_devices(out, sizeof(out), &l, 0, &inv4);
	CHECK_STR_EQ(out, "3,2");
	gpus[1] = 5;
	exec_cuda_devices(out, sizeof(out), &l, 0, &inv4);
	CHECK_STR_EQ(out, "3,5");
	/* per_gpu looks only at the rank's own GPU */
	l.mode = PROTO_LAUNCH_PER_GPU;
	exec_cuda_devices(out, sizeof(out), &l, 0, &inv4);
	CHECK_STR_EQ(out, "GPU-00000000-0000-0000-0000-000000000003");
	exec_cuda_devices(out, sizeof(out), &l, 1, &inv4);
	CHECK_STR_EQ(out, "5");
}

TY_TEST(env_names_gpus_by_uuid_in_pci_order)
{
	const struct exec_env_extra extra = {.inventory = &inv4};
	struct proto_launch l;
	struct ty_err err = {0};
	char **env = NULL;

	inv_init();
	REQUIRE_INT_EQ(parse(&l, &err, "{" BASE ",'gpus':[1,0,3],'env':{'CUDA_DEVICE_ORDER':"
					"'FASTEST_FIRST'},'launch':'per_node'}"),
		       0);
	REQUIRE_INT_EQ(exec_env_build(&env, &l, 0, "n", NULL, &extra, &err), 0);
	CHECK_STR_EQ(exec_env_get(env, "CUDA_VISIBLE_DEVICES"),
		     "GPU-00000000-0000-0000-0000-000000000001,"
		     "GPU-00000000-0000-0000-0000-000000000000,"
		     "GPU-00000000-0000-0000-0000-000000000003");
	/* the contract's order wins over the job's */
	CHECK_STR_EQ(exec_env_get(env, "CUDA_DEVICE_ORDER"), "PCI_BUS_ID");
	exec_env_free(env);
	proto_launch_clear(&l);
}

TY_TEST(checkpoint_keep_and_preflight_fields)
{
	static const struct {
		const char *extra;
		int keep;
		bool preflight;
		int signal;
	} rows[] = {
	    {"", 3, false, SIGUSR1},
	    {",'checkpoint_keep':null,'preflight':null,'checkpoint_signal':null",
	     3, false, SIGUSR1},
	    {",'checkpoint_keep':1,'preflight':true,'checkpoint_signal':'SIGUSR2'", 1, true,
	     SIGUSR2},
	    {",'checkpoint_keep':0,'checkpoint_signal':'TERM'", 0, false, SIGTERM},
	    {",'checkpoint_keep':1000,'preflight':false", 1000, false, SIGUSR1},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct proto_launch l;
		struct ty_err err = {0};

		ty_test_context("%s", rows[i].extra);
		CHECK_INT_EQ(parse(&l, &err,
				   ty_test_strf("{" BASE "," GPUS ",'env':{},'launch':'per_gpu'%s}",
						rows[i].extra)),
			     0);
		CHECK_INT_EQ(l.checkpoint_keep, rows[i].keep);
		CHECK_INT_EQ(l.preflight, rows[i].preflight);
		CHECK_INT_EQ(l.checkpoint_signal, rows[i].signal);
		proto_launch_clear(&l);
	}
	/* a signal the job spec cannot name is refused, naming the field */
	for (size_t i = 0; i < 2; i++) {
		struct proto_launch l;
		struct ty_err err = {0};

		CHECK_INT_EQ(parse(&l, &err,
				   ty_test_strf("{" BASE "," GPUS ",'env':{},'launch':'per_gpu',"
						"'checkpoint_signal':%s}",
						i ? "9" : "'SIGKILL'")),
			     TY_EINVAL);
		CHECK(strstr(err.msg, "'checkpoint_signal'") != NULL);
		proto_launch_clear(&l);
	}
}

TY_TEST(preflight_node_check)
{
	static const struct {
		const char *name;
		const char *log;
		const char *want; /* compact JSON of the object, NULL: none */
	} rows[] = {
	    {"none", "starting\nall good\n", NULL},
	    {"empty", "", NULL},
	    {"found among lines",
	     "warming up\n{\"node_check\": {\"slow\": [\"n2\"], \"nodes\": [\"n1\", \"n2\"], "
	     "\"median_gbps\": 9.5}}\nbye\n",
	     "{\"slow\":[\"n2\"],\"nodes\":[\"n1\",\"n2\"],\"median_gbps\":9.5}"},
	    {"last line without newline", "x\n  {\"node_check\": {\"slow\": []}}", "{\"slow\":[]}"},
	    {"first of two", "{\"node_check\": {\"a\": 1}}\n{\"node_check\": {\"a\": 2}}\n",
	     "{\"a\":1}"},
	    {"not an object", "{\"node_check\": [1]}\n{\"node_check\": 3}\n", NULL},
	    {"broken JSON", "{\"node_check\": {\"slow\": [}\n", NULL},
	    {"other key", "{\"other\": {\"slow\": []}}\n", NULL},
	    {"other keys too", "{\"rank\": 1, \"node_check\": {\"slow\": []}}\n", "{\"slow\":[]}"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *nc = exec_preflight_node_check(rows[i].log);
		char *text = nc ? json_dumps(nc, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

		ty_test_context("%s", rows[i].name);
		if (rows[i].want)
			CHECK_STR_EQ(text ? text : "(none)", rows[i].want);
		else
			CHECK(nc == NULL);
		free(text);
		json_decref(nc);
	}
}

TY_TEST(argv_parse)
{
	static const struct {
		const char *text;
		int rc;
		int argc;
		const char *last;
		const char *err;
	} rows[] = {
	    {"[\"/bin/x\", \"--node-check\", \"8M\"]", 0, 3, "8M", NULL},
	    {"[\"x\"]", 0, 1, "x", NULL},
	    {"[]", TY_EINVAL, 0, NULL, "not a JSON array of 1.."},
	    {"\"x\"", TY_EINVAL, 0, NULL, "not a JSON array"},
	    {"[\"x\"", TY_EINVAL, 0, NULL, "not a JSON array"},
	    {"[\"\", \"a\"]", TY_EINVAL, 0, NULL, "argument 0 of"},
	    {"[\"x\", 1]", TY_EINVAL, 0, NULL, "argument 1 of"},
	    {"[\"x\", \"a\\u0000b\"]", TY_EINVAL, 0, NULL, "not a JSON array"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		char **v = NULL;
		int n = 0;

		ty_test_context("%s", rows[i].text);
		CHECK_INT_EQ(exec_argv_parse(&v, rows[i].text, &err), rows[i].rc);
		if (rows[i].rc) {
			CHECK(v == NULL);
			if (!strstr(err.msg, rows[i].err))
				FAIL("message '%s' lacks '%s'", err.msg, rows[i].err);
			continue;
		}
		REQUIRE(v != NULL);
		while (v[n])
			n++;
		CHECK_INT_EQ(n, rows[i].argc);
		CHECK_STR_EQ(v[n - 1], rows[i].last);
		exec_env_free(v);
	}
}
