/* executor/classify.c: failure classes from exits and log tails, the rule files. */
#include "exec.h"
#include "ty_test.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct exec_classifier *defaults(void)
{
	struct exec_classifier *c = NULL;
	struct ty_err err = {0};

	REQUIRE_INT_EQ(exec_classifier_new(&c, &err), 0);
	REQUIRE_INT_EQ(exec_classifier_add(c, exec_classify_defaults, "classify.conf", &err), 0);
	REQUIRE(exec_classifier_count(c) > 30);
	return c;
}

#define NCCL_PEER "trainer:12:34 [0] NCCL WARN NET/Socket : peer closed"
#define TB "Traceback (most recent call last):\n  File \"train.py\", line 3\n"

TY_TEST(classify_table)
{
	/* the ending rank is rank 0 (its log is log0); rank 1's log is log1 */
	static const struct {
		const char *name;
		int exit_code, signal;
		bool cgroup_oom;
		const char *log0, *log1;
		const char *cls, *evidence;
	} rows[] = {
	    {"plain non-zero exit", 1, 0, false, "step 1\n", NULL, "user", "rank 0: exit code 1"},
	    {"exit 2 without logs", 2, 0, false, NULL, NULL, "user", "rank 0: exit code 2"},
	    {"python traceback: the exception line", 1, 0, false, "step 1\n" TB "ValueError: bad\n",
	     NULL, "user", "rank 0: ValueError: bad"},
	    {"a traceback without its exception line", 1, 0, false, "step 1\n" TB, NULL, "user",
	     "rank 0: Traceback (most recent call last):"},
	    {"a dotted exception name", 1, 0, false, TB "torch.distributed.DistBackendError\n", NULL,
	     "user", "rank 0: torch.distributed.DistBackendError"},
	    {"foreign SIGSEGV", 139, SIGSEGV, false, "step 1\n", NULL, "system",
	     "rank 0: killed by signal 11 (SIGSEGV)"},
	    {"SIGKILL without evidence", 137, SIGKILL, false, "step 1\n", NULL, "system",
	     "rank 0: killed by signal 9 (SIGKILL), no OOM evidence"},
	    {"exit 137 without evidence", 137, 0, false, "step\n", NULL, "system",
	     "rank 0: exit code 137 (SIGKILL), no OOM evidence"},
	    {"exit 137 ignores a traceback", 137, 0, false, TB, NULL, "system",
	     "rank 0: exit code 137 (SIGKILL), no OOM evidence"},
	    {"SIGKILL with cgroup oom_kill", 137, SIGKILL, true, "step\n", NULL, "oom",
	     "rank 0: killed by signal 9 (SIGKILL), memory cgroup oom_kill"},
	    {"exit 137 with cgroup oom_kill", 137, 0, true, NULL, NULL, "oom",
	     "rank 0: exit code 137 (SIGKILL), memory cgroup oom_kill"},
	    {"cgroup oom_kill needs a SIGKILL", 1, 0, true, "x\n", NULL, "user",
	     "rank 0: exit code 1"},
	    {"shell says Killed", 137, 0, false, "bash: line 1:  4242 Killed  python t.py\n", NULL,
	     "oom", "rank 0: bash: line 1:  4242 Killed  python t.py"},
	    {"Killed alone", 137, SIGKILL, false, "Killed\n", NULL, "oom", "rank 0: Killed"},
	    {"kernel OOM line", 137, SIGKILL, false, "Out of memory: Killed process 4242 (python)\n",
	     NULL, "oom", "rank 0: Out of memory: Killed process 4242 (python)"},
	    {"Killed with exit 1 is no OOM", 1, 0, false, "Killed\n", NULL, "user",
	     "rank 0: exit code 1"},
	    {"CUDA out of memory", 1, 0, false,
	     TB "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", NULL,
	     "oom", "rank 0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"},
	    {"torch.cuda.OutOfMemoryError", 1, 0, false, "torch.cuda.OutOfMemoryError: oops\n", NULL,
	     "oom", "rank 0: torch.cuda.OutOfMemoryError: oops"},
	    {"host MemoryError", 1, 0, false, TB "MemoryError\n", NULL, "oom",
	     "rank 0: MemoryError"},
	    {"NCCL peer closed", 1, 0, false, NCCL_PEER "\nncclRemoteError: remote process exited\n",
	     NULL, "system", "rank 0: ncclRemoteError: remote process exited"},
	    {"NCCL WARN alone", 1, 0, false, "x\n" NCCL_PEER "\n", NULL, "system",
	     "rank 0: " NCCL_PEER},
	    {"NCCL beats a traceback", 1, 0, false, NCCL_PEER "\n" TB, NULL, "system",
	     "rank 0: " NCCL_PEER},
	    {"ncclSystemError", 1, 0, false,
	     "RuntimeError: NCCL error in: pg.cpp:1, unhandled system error, ncclSystemError\n",
	     NULL, "system",
	     "rank 0: RuntimeError: NCCL error in: pg.cpp:1, unhandled system error, ncclSystemError"},
	    {"watchdog timeout", 134, SIGABRT, false,
	     "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)\n", NULL,
	     "system",
	     "rank 0: [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9)"},
	    {"connection reset in NCCL", 1, 0, false,
	     "NCCL INFO Call to recv failed : Connection reset by peer\n", NULL, "system",
	     "rank 0: NCCL INFO Call to recv failed : Connection reset by peer"},
	    {"connection refused outside NCCL", 1, 0, false,
	     "requests: Connection refused\n", NULL, "user", "rank 0: exit code 1"},
	    {"gloo connection closed", 1, 0, false,
	     "RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer\n", NULL,
	     "system",
	     "rank 0: RuntimeError: [../gloo/transport/tcp/pair.cc:534] Connection closed by peer"},
	    {"filesystem error", 1, 0, false, "OSError: [Errno 116] Stale file handle\n", NULL,
	     "system", "rank 0: OSError: [Errno 116] Stale file handle"},
	    {"illegal memory access is user", 1, 0, false,
	     TB "RuntimeError: CUDA error: an illegal memory access was encountered\n", NULL,
	     "user", "rank 0: RuntimeError: CUDA error: an illegal memory access was encountered"},
	    {"device-side assert is user", 1, 0, false,
	     "RuntimeError: CUDA error: device-side assert triggered\n", NULL, "user",
	     "rank 0: RuntimeError: CUDA error: device-side assert triggered"},
	    {"ECC is hardware", 1, 0, false,
	     TB "RuntimeError: CUDA error: uncorrectable ECC error encountered\n", NULL,
	     "hardware", "rank 0: RuntimeError: CUDA error: uncorrectable ECC error encountered"},
	    {"Xid is hardware", 139, SIGSEGV, false,
	     "NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus.\n", NULL,
	     "hardware", "rank 0: NVRM: Xid (PCI:0000:3b:00): 79, pid=123, GPU has fallen off the bus."},
	    {"hardware on another rank wins", 1, 0, false, NCCL_PEER "\n",
	     "CUDA error: uncorrectable ECC error encountered\n", "hardware",
	     "rank 1: CUDA error: uncorrectable ECC error encountered"},
	    {"own traceback beats a peer's NCCL", 1, 0, false, TB "ValueError: x\n",
	     NCCL_PEER "\n", "user", "rank 0: ValueError: x"},
	    {"a peer's log when its own says nothing", 1, 0, false, "step 1\n",
	     "ncclRemoteError: peer gone\n", "system", "rank 1: ncclRemoteError: peer gone"},
	    {"oom beats system in one log", 1, 0, false, NCCL_PEER "\nCUDA out of memory\n", NULL,
	     "oom", "rank 0: CUDA out of memory"},
	    {"first rule of the class wins", 1, 0, false,
	     TB "RuntimeError: CUDA error: device-side assert triggered\n", NULL, "user",
	     "rank 0: RuntimeError: CUDA error: device-side assert triggered"},
	    {"CRLF line ends", 1, 0, false, "ncclInternalError\r\n", NULL, "system",
	     "rank 0: ncclInternalError"},
	    {"invalid UTF-8 and controls", 1, 0, false, "ncclRemoteError \xff\xc3 \x1b[0m\tend\n",
	     NULL, "system", "rank 0: ncclRemoteError ??  [0m end"},
	    {"valid UTF-8 kept", 1, 0, false, "ncclRemoteError: r\xc3\xa9seau \xe2\x82\xac\n", NULL,
	     "system", "rank 0: ncclRemoteError: r\xc3\xa9seau \xe2\x82\xac"},
	};
	struct exec_classifier *c = defaults();

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_rank_end end = {.rank = 0,
					    .exit_code = rows[i].exit_code,
					    .signal = rows[i].signal,
					    .cgroup_oom = rows[i].cgroup_oom};
		struct exec_rank_log logs[2] = {{0, rows[i].log0}, {1, rows[i].log1}};
		struct exec_verdict v;

		ty_test_context("%s", rows[i].name);
		exec_classify(&v, c, &end, logs, 2);
		CHECK_STR_EQ(v.failure_class, rows[i].cls);
		CHECK_STR_EQ(v.evidence, rows[i].evidence);
	}
	exec_classifier_free(c);
}

/* Log excerpts as PyTorch, NCCL, CUDA and the kernel print them. */
#define IB_ERR12                                                                                   \
	"trainer-3:81412:81790 [2] NCCL WARN NET/IB : Got completion from peer "                     \
	"10.12.0.7<48112> with error 12, opcode 32753, len 0, vendor err 129 (Recv) localGid "      \
	"::ffff:10.12.0.6 remoteGid ::ffff:10.12.0.7"
#define NCCL_INFO "trainer-3:81412:81790 [2] NCCL INFO Channel 00/32 :    0   1   2   3\n"
#define DDP_TB                                                                                     \
	"Traceback (most recent call last):\n"                                                     \
	"  File \"/workspace/train.py\", line 212, in <module>\n"                                   \
	"    main()\n"                                                                              \
	"  File \"/workspace/train.py\", line 187, in main\n"                                       \
	"    loss = model(batch).loss\n"
#define TORCHRUN_FAIL                                                                              \
	"E1126 10:12:04.512000 81400 torch/distributed/elastic/multiprocessing/api.py:869] "        \
	"failed (exitcode: 1) local_rank: 2 (pid: 81412) of binary: /usr/bin/python3\n"
#define WATCHDOG                                                                                   \
	"[rank2]:[E1126 10:12:01.123456 81412 ProcessGroupNCCL.cpp:616] [Rank 2] Watchdog caught "  \
	"collective operation timeout: WorkNCCL(SeqNum=3127, OpType=ALLREDUCE, NumelIn=262144, "  \
	"NumelOut=262144, Timeout(ms)=600000) ran for 600043 milliseconds before timing out."
#define DIST_SYSERR                                                                                \
	"torch.distributed.DistBackendError: NCCL error in: "                                       \
	"../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run "    \
	"with NCCL_DEBUG=INFO for details), NCCL version 2.19.3"
#define NCCL_SYSERR                                                                                \
	"ncclSystemError: System call (e.g. socket, malloc) or external library call failed or "    \
	"device error."
#define CUDA_OOM                                                                                   \
	"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 2 has a "     \
	"total capacity of 79.15 GiB of which 3.62 MiB is free."
#define GLOO_TIMEOUT                                                                               \
	"RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "    \
	"waiting 1800000ms for recv operation to complete"
#define XID                                                                                        \
	"NVRM: Xid (PCI:0000:b3:00): 79, pid=81412, name=python3, GPU has fallen off the bus."

/*
 * The strongest evidence decides, and evidence_source says whether the
 * logs alone decided it: rank output must never be enough to take a node
 * out (docs/dispatch.md, "Failures, retries and bad nodes").
 */
TY_TEST(classify_strongest_evidence)
{
	static const struct {
		const char *name;
		int exit_code, signal;
		bool cgroup_oom;
		const char *log0, *log1;
		const char *cls, *evidence;
		bool log_only;
	} rows[] = {
	    /* user: a traceback's own error outranks NCCL WARN lines */
	    {"KeyError beside an NCCL WARN", 1, 0, false,
	     NCCL_INFO IB_ERR12 "\n" DDP_TB "KeyError: 'lr'\n", NULL, "user", "rank 0: KeyError: 'lr'",
	     true},
	    {"a shape mismatch beside an NCCL WARN", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB
	     "RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)\n",
	     NULL, "user",
	     "rank 0: RuntimeError: mat1 and mat2 shapes cannot be multiplied (64x512 and 256x10)",
	     true},
	    {"a state_dict of DistributedDataParallel", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB "RuntimeError: Error(s) in loading state_dict for "
			       "DistributedDataParallel: Missing key(s) in state_dict: \"fc.bias\".\n",
	     NULL, "user",
	     "rank 0: RuntimeError: Error(s) in loading state_dict for DistributedDataParallel: "
	     "Missing key(s) in state_dict: \"fc.bias\".",
	     true},
	    {"AssertionError with torchrun's summary", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB "AssertionError\n" TORCHRUN_FAIL, NULL, "user",
	     "rank 0: AssertionError", true},
	    {"a missing module", 1, 0, false,
	     "Traceback (most recent call last):\n  File \"/workspace/train.py\", line 3, in "
	     "<module>\n    import transformers\nModuleNotFoundError: No module named "
	     "'transformers'\n",
	     NULL, "user", "rank 0: ModuleNotFoundError: No module named 'transformers'", true},
	    {"the job's own file missing", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB "FileNotFoundError: [Errno 2] No such file or directory: "
			       "'/workspace/data/train.bin'\n",
	     NULL, "user",
	     "rank 0: FileNotFoundError: [Errno 2] No such file or directory: "
	     "'/workspace/data/train.bin'",
	     true},
	    {"a dotted user exception", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB "omegaconf.errors.ConfigKeyError: Key 'lr' is not in struct\n",
	     NULL, "user", "rank 0: omegaconf.errors.ConfigKeyError: Key 'lr' is not in struct",
	     true},
	    {"the ending rank's traceback beats a peer's NCCL error", 1, 0, false,
	     DDP_TB "TypeError: forward() missing 1 required positional argument: 'x'\n",
	     IB_ERR12 "\n" DIST_SYSERR "\n" NCCL_SYSERR "\n", "user",
	     "rank 0: TypeError: forward() missing 1 required positional argument: 'x'", true},
	    /* system: NCCL and the network with no user traceback */
	    {"NCCL WARN NET/IB error 12 alone", 1, 0, false, NCCL_INFO IB_ERR12 "\n", NULL,
	     "system", "rank 0: " IB_ERR12, true},
	    {"NCCL WARN and a bare traceback", 1, 0, false,
	     IB_ERR12 "\nTraceback (most recent call last):\n", NULL, "system",
	     "rank 0: " IB_ERR12, true},
	    {"an NCCL system error in the traceback", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB DIST_SYSERR "\n" NCCL_SYSERR "\n", NULL, "system",
	     "rank 0: " NCCL_SYSERR, true},
	    {"a RuntimeError that reports NCCL is no user error", 1, 0, false,
	     DDP_TB "RuntimeError: NCCL communicator was aborted on rank 2.\n", NULL, "system",
	     "rank 0: RuntimeError: NCCL communicator was aborted on rank 2.", true},
	    {"a CUDA RuntimeError does not outrank NCCL WARN", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB "RuntimeError: CUDA error: unspecified launch failure\n", NULL,
	     "system", "rank 0: " IB_ERR12, true},
	    {"a node's device file missing", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB "FileNotFoundError: [Errno 2] No such file or directory: "
			       "'/dev/infiniband/uverbs0'\n",
	     NULL, "system", "rank 0: " IB_ERR12, true},
	    {"watchdog timeout, aborted", 134, SIGABRT, false, WATCHDOG "\n", NULL, "system",
	     "rank 0: " WATCHDOG, false},
	    {"watchdog timeout, exit 1", 1, 0, false, WATCHDOG "\n", NULL, "system",
	     "rank 0: " WATCHDOG, true},
	    {"gloo timeout", 1, 0, false, DDP_TB GLOO_TIMEOUT "\n", NULL, "system",
	     "rank 0: " GLOO_TIMEOUT, true},
	    {"a foreign SIGSEGV", 139, SIGSEGV, false, "step 7\n", NULL, "system",
	     "rank 0: killed by signal 11 (SIGSEGV)", false},
	    {"exit 137 with no evidence is the job's exit", 137, 0, false, "step 7\n", NULL,
	     "system", "rank 0: exit code 137 (SIGKILL), no OOM evidence", true},
	    /* oom and hardware keep winning */
	    {"CUDA OOM beside a user traceback", 1, 0, false,
	     IB_ERR12 "\n" DDP_TB CUDA_OOM "\n", NULL, "oom", "rank 0: " CUDA_OOM, true},
	    {"the kernel's OOM kill", 137, SIGKILL, false,
	     "step 7\n/bin/sh: line 1: 81412 Killed                  python3 train.py\n", NULL,
	     "oom", "rank 0: /bin/sh: line 1: 81412 Killed                  python3 train.py",
	     true},
	    {"the memory cgroup's OOM kill", 137, SIGKILL, true, DDP_TB "KeyError: 'x'\n", NULL,
	     "oom", "rank 0: killed by signal 9 (SIGKILL), memory cgroup oom_kill", false},
	    {"a killed rank's traceback is not the job's word", 137, SIGKILL, false,
	     DDP_TB "KeyError: 'lr'\n", NULL, "system",
	     "rank 0: killed by signal 9 (SIGKILL), no OOM evidence", false},
	    {"Xid on a peer beats a user traceback", 1, 0, false, DDP_TB "KeyError: 'lr'\n",
	     XID "\n", "hardware", "rank 1: " XID, true},
	    /* user fallbacks */
	    {"device-side assert", 1, 0, false,
	     DDP_TB "RuntimeError: CUDA error: device-side assert triggered\n", NULL, "user",
	     "rank 0: RuntimeError: CUDA error: device-side assert triggered", true},
	    {"plain exit 1", 1, 0, false, "step 7\n", NULL, "user", "rank 0: exit code 1", true},
	};
	struct exec_classifier *c = defaults();

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_rank_end end = {.rank = 0,
					    .exit_code = rows[i].exit_code,
					    .signal = rows[i].signal,
					    .cgroup_oom = rows[i].cgroup_oom};
		struct exec_rank_log logs[2] = {{0, rows[i].log0}, {1, rows[i].log1}};
		struct exec_verdict v;

		ty_test_context("%s", rows[i].name);
		exec_classify(&v, c, &end, logs, 2);
		CHECK_STR_EQ(v.failure_class, rows[i].cls);
		CHECK_STR_EQ(v.evidence, rows[i].evidence);
		CHECK_INT_EQ(v.log_only, rows[i].log_only);
	}
	exec_classifier_free(c);
}

TY_TEST(classify_not_user_only_vetoes_user_traceback)
{
	struct exec_classifier *c = NULL;
	struct ty_err err = {0};
	struct exec_rank_end end = {.rank = 0, .exit_code = 1};
	struct exec_rank_log logs[1] = {{0, "x\nValueError: bad shard 3\n"}};
	struct exec_verdict v;

	REQUIRE_INT_EQ(exec_classifier_new(&c, &err), 0);
	REQUIRE_INT_EQ(exec_classifier_add(c, "weak_system\tshard\nuser_traceback\t^ValueError\n",
					   "ops.conf", &err),
		       0);
	exec_classify(&v, c, &end, logs, 1);
	CHECK_STR_EQ(v.failure_class, "user");
	CHECK_STR_EQ(v.evidence, "rank 0: ValueError: bad shard 3");
	/* an operator's not_user rule hands the line back to weak_system */
	REQUIRE_INT_EQ(exec_classifier_add(c, "not_user\tbad shard\n", "ops2.conf", &err), 0);
	exec_classify(&v, c, &end, logs, 1);
	CHECK_STR_EQ(v.failure_class, "system");
	CHECK_STR_EQ(v.evidence, "rank 0: ValueError: bad shard 3");
	CHECK(v.log_only);
	exec_classifier_free(c);
}

TY_TEST(classify_evidence_is_capped_valid_text)
{
	struct exec_classifier *c = defaults();
	struct exec_rank_end end = {.rank = 0, .exit_code = 1};
	char *line = malloc(4000);
	struct exec_rank_log logs[1] = {{0, line}};
	struct exec_verdict v;
	size_t o;

	REQUIRE(line != NULL);
	o = (size_t)sprintf(line, "NCCL WARN ");
	while (o < 3990) { /* two-byte characters, so the cap may fall inside one */
		line[o++] = '\xc3';
		line[o++] = '\xa9';
	}
	line[o] = '\0';
	for (size_t shift = 0; shift < 2; shift++) {
		ty_test_context("shift %zu", shift);
		if (shift)
			memmove(line + 1, line, strlen(line) + 1), line[0] = 'x';
		exec_classify(&v, c, &end, logs, 1);
		CHECK_STR_EQ(v.failure_class, "system");
		CHECK_INT_EQ(strlen(v.evidence), EXEC_EVIDENCE_MAX);
		/* only a cut sequence may have become '?', and only at the very end */
		CHECK(strchr(v.evidence, '?') == NULL ||
		      strchr(v.evidence, '?') == v.evidence + EXEC_EVIDENCE_MAX - 1);
	}
	free(line);
	exec_classifier_free(c);
}

TY_TEST(classify_operator_rules_first)
{
	struct exec_classifier *c = NULL;
	struct ty_err err = {0};
	struct exec_rank_end end = {.rank = 3, .exit_code = 1};
	struct exec_rank_log logs[1] = {{3, "my-lib: storage backend gone\nTraceback (most recent "
					    "call last):\n"}};
	struct exec_verdict v;

	REQUIRE_INT_EQ(exec_classifier_new(&c, &err), 0);
	REQUIRE_INT_EQ(exec_classifier_add(c, "# ours\nsystem\tstorage backend gone\n"
					      "user  ^my-lib: storage\n",
					   "ops.conf", &err),
		       0);
	REQUIRE_INT_EQ(exec_classifier_add(c, exec_classify_defaults, "classify.conf", &err), 0);
	exec_classify(&v, c, &end, logs, 1);
	CHECK_STR_EQ(v.failure_class, "system");
	CHECK_STR_EQ(v.evidence, "rank 3: my-lib: storage backend gone");
	exec_classifier_free(c);

	/* no rules at all: the exit decides */
	REQUIRE_INT_EQ(exec_classifier_new(&c, &err), 0);
	exec_classify(&v, c, &end, logs, 1);
	CHECK_STR_EQ(v.failure_class, "user");
	CHECK_STR_EQ(v.evidence, "rank 3: exit code 1");
	exec_classifier_free(c);
}

TY_TEST(classify_rule_file_errors)
{
	static const struct {
		const char *text;
		const char *msg;
	} rows[] = {
	    {"bogus\tx\n", "ops.conf:1: unknown class 'bogus' (hardware, oom, system, "
			   "user_traceback, weak_system, user, oom_kill or not_user)"},
	    {"# c\n\nuser\t(unclosed\n", NULL}, /* regerror text varies: prefix checked */
	    {"user\n", "ops.conf:1: no regular expression after 'user'"},
	    {"user   \t \n", "ops.conf:1: no regular expression after 'user'"},
	    {"system\tok\nOOM\tx\n", "ops.conf:2: unknown class 'OOM' (hardware, oom, system, "
				  "user_traceback, weak_system, user, oom_kill or not_user)"},
	    {"hang\tx\n", "ops.conf:1: unknown class 'hang' (hardware, oom, system, "
			  "user_traceback, weak_system, user, oom_kill or not_user)"},
	};
	struct ty_err err = {0};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_classifier *c = NULL;

		ty_test_context("row %zu", i);
		REQUIRE_INT_EQ(exec_classifier_new(&c, &err), 0);
		ty_err_clear(&err);
		CHECK_INT_EQ(exec_classifier_add(c, rows[i].text, "ops.conf", &err), TY_EINVAL);
		if (rows[i].msg)
			CHECK_STR_EQ(err.msg, rows[i].msg);
		else
			CHECK(strncmp(err.msg, "ops.conf:3: bad regular expression '(unclosed': ",
				      48) == 0 &&
			      strlen(err.msg) > 48);
		CHECK_INT_EQ(exec_classifier_count(c), 0); /* nothing of a bad file is kept */
		exec_classifier_free(c);
	}
}

TY_TEST(classify_rule_files)
{
	char dir[] = "/tmp/ty-test-classify-XXXXXX", path[256];
	struct exec_classifier *c = NULL;
	struct ty_err err = {0};
	FILE *f;

	REQUIRE(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/ops.conf", dir);
	REQUIRE_INT_EQ(exec_classifier_new(&c, &err), 0);
	CHECK_INT_EQ(exec_classifier_add_file(c, path, &err), TY_EIO);
	CHECK(strstr(err.msg, "cannot open '") && strstr(err.msg, "No such file"));

	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs("hardware\tmy GPU broke\nuser\tok\nsystem\t[z-a]\n", f);
	fclose(f);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_classifier_add_file(c, path, &err), TY_EINVAL);
	CHECK(strncmp(err.msg, path, strlen(path)) == 0 && strstr(err.msg, ":3: bad regular"));
	CHECK_INT_EQ(exec_classifier_count(c), 0);

	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs("hardware\tmy GPU broke\r\nuser\tok", f); /* CRLF, no final newline */
	fclose(f);
	CHECK_INT_EQ(exec_classifier_add_file(c, path, &err), 0);
	CHECK_INT_EQ(exec_classifier_count(c), 2);

	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs("user\ta\n", f);
	fputc('\0', f);
	fclose(f);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_classifier_add_file(c, path, &err), TY_EINVAL);
	CHECK_INT_EQ(exec_classifier_count(c), 2);

	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs("", f);
	fclose(f);
	CHECK_INT_EQ(exec_classifier_add_file(c, path, &err), 0);
	CHECK_INT_EQ(exec_classifier_count(c), 2);
	exec_classifier_free(c);
	unlink(path);
	rmdir(dir);
}

TY_TEST(evidence_tails)
{
	static const struct {
		const char *name;
		const char *a, *b;
		const char *want;
	} rows[] = {
	    {"two ranks", "one\ntwo\n", "x\n",
	     "no progress; rank 4: one|two; rank 5: x"},
	    {"silent rank", "", NULL, "no progress; rank 4: (no output); rank 5: (no output)"},
	    {"tabs and CR", "a\tb\r\n", "c", "no progress; rank 4: a b; rank 5: c"},
	    {"binary output", "\xff\x01ok\n", "\xe2\x82", "no progress; rank 4: ? ok; rank 5: ??"},
	};
	char out[EXEC_EVIDENCE_MAX + 1];
	char big[3000];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_rank_log logs[2] = {{4, rows[i].a}, {5, rows[i].b}};

		ty_test_context("%s", rows[i].name);
		exec_evidence_tails(out, "no progress", logs, 2);
		CHECK_STR_EQ(out, rows[i].want);
	}
	/* long tails: each rank keeps the end of its own, within the cap */
	memset(big, 'y', sizeof(big) - 2);
	big[sizeof(big) - 2] = 'Z';
	big[sizeof(big) - 1] = '\0';
	{
		struct exec_rank_log logs[2] = {{0, big}, {1, "last\n"}};

		exec_evidence_tails(out, "head", logs, 2);
		CHECK(strlen(out) <= EXEC_EVIDENCE_MAX);
		CHECK(strstr(out, "yZ; rank 1: last") != NULL);
		CHECK(strncmp(out, "head; rank 0: yyy", 17) == 0);
	}
}

TY_TEST(cgroup_files)
{
	static const struct {
		const char *text;
		const char *path; /* NULL: none */
	} cg[] = {
	    {"0::/system.slice/trainyard.service\n",
	     "/sys/fs/cgroup/system.slice/trainyard.service/memory.events"},
	    {"0::/\n", "/sys/fs/cgroup/memory.events"},
	    {"4:memory:/process_api/ab12\n3:cpuset:/\n0::/\n",
	     "/sys/fs/cgroup/memory/process_api/ab12/memory.oom_control"},
	    {"0::/x\n7:cpu,memory:/\n", "/sys/fs/cgroup/memory/memory.oom_control"},
	    {"12:memoryx:/x\n4:cpu:/y\n", NULL},
	    {"9:name=systemd:/\n", NULL},
	    {"", NULL},
	    {"0::\n", NULL},
	    {"garbage\n", NULL},
	};
	static const struct {
		const char *text;
		long long want;
	} ev[] = {
	    {"low 0\nhigh 0\nmax 0\noom 2\noom_kill 1\noom_group_kill 0\n", 1},
	    {"oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", 7},
	    {"oom_kill 0", 0},
	    {"oom 4\n", -1},
	    {"oom_kill x\n", -1},
	    {"oom_kill_disable 3\n", -1},
	    {"", -1},
	};
	char out[128];

	for (size_t i = 0; i < sizeof(cg) / sizeof(cg[0]); i++) {
		bool ok = exec_cgroup_oom_file(out, sizeof(out), cg[i].text);

		ty_test_context("cgroup %zu", i);
		CHECK_INT_EQ(ok, cg[i].path != NULL);
		if (ok && cg[i].path)
			CHECK_STR_EQ(out, cg[i].path);
	}
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		ty_test_context("oom counts %zu", i);
		CHECK_INT_EQ(exec_memory_events_oom_kill(ev[i].text), ev[i].want);
	}
	CHECK(!exec_cgroup_oom_file(out, 16, "0::/too/long/for/this\n"));
}

TY_TEST(progress_path)
{
	char out[40];

	CHECK(exec_progress_path(out, sizeof(out), "/s/attempts/7.2", 13));
	CHECK_STR_EQ(out, "/s/attempts/7.2/work/progress-13");
	CHECK(!exec_progress_path(out, 10, "/s/attempts/7.2", 13));
}
