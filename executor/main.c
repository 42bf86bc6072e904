/* trainyard-executor: options, then the daemon's life (daemon.c). */
#include "exec.h"
#include "ty_config.h"
#include "ty_crypto.h"
#include "ty_kafka.h"
#include "ty_log.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "trainyard-executor"
#define ENV_PREFIX "TRAINYARD_EXECUTOR"

static const struct ty_opt options[] = {
    {"node-id", TY_OPT_STR, NULL, 0, 0,
     "this node's id: 1-63 of [A-Za-z0-9._-], starting alphanumeric (default: the hostname)"},
    {"address", TY_OPT_STR, "127.0.0.1", 0, 0,
     "IPv4 address of this node: ranks use it as MASTER_ADDR and the log server binds it"},
    {"kafka-bootstrap", TY_OPT_STR, NULL, 0, 0,
     "Kafka bootstrap servers 'host:port,...' or '@FILE' holding that list (required)"},
    {"kafka-properties-file", TY_OPT_STR, NULL, 0, 0,
     "file of librdkafka 'key = value' properties (TLS, SASL) for every Kafka client; "
     "see docs/security.md"},
    {"dispatch-pubkey", TY_OPT_STR, NULL, 0, 0,
     "PEM file of the scheduler's Ed25519 public key: only dispatch messages it signed are "
     "acted on, see docs/security.md (required)"},
    {"node-key-file", TY_OPT_STR, NULL, 0, 0,
     "file holding this node's key, as 'trainyard-scheduler --print-node-key NODE' prints "
     "it: every message this node sends carries its MAC (required)"},
    {"fake-gpus", TY_OPT_INT, NULL, 0, 1024,
     "simulated inventory of N GPUs and no HCA (registered with simulated: true)"},
    {"fabric-check-ms", TY_OPT_INT, "30000", 0, 86400000,
     "how often the HCAs' ports are read again from sysfs; a port that went down or changed "
     "its rate gives later launches a new NCCL environment (0: at start only)"},
    {"expect-port-gbps", TY_OPT_INT, "0", 0, 100000,
     "an ACTIVE HCA port slower than this many Gb/s is a degraded port_rate_low condition "
     "(0: not checked; a port not ACTIVE is always port_down)"},
    {"health-check-ms", TY_OPT_INT, "5000", 0, 3600000,
     "the health watch: how often each GPU's ECC, row remapping, clock event reasons and "
     "NVLink counters are read through NVML, Xid events being waited for in between "
     "(0: off; off anyway with a simulated inventory or GPUs not from NVML)"},
    {"xid-file", TY_OPT_STR, NULL, 0, 0,
     "Xid entries '<xid> <fatal|degraded|ignore> <description>' added to the built-in table "
     "(executor/xid.conf), replacing its entries for the same Xids"},
    {"watch-for", TY_OPT_INT, NULL, 1, 86400,
     "diagnose this node and exit: probe the GPUs, run the health watch for SECONDS without "
     "Kafka, print each condition as a JSON line and a summary line on stdout; exit 0 when "
     "none was seen, 3 when one was, 2 when the watch cannot run"},
    {"sysfs-root", TY_OPT_STR, NULL, 0, 0,
     "where the fabric watch reads the HCAs' ports (default /sys; with --inventory-file, "
     "only from a tree given here)"},
    {"inventory-file", TY_OPT_STR, NULL, 0, 0,
     "simulated inventory from a JSON file {\"gpus\":[...],\"hcas\":[...]} as register "
     "reports it (simulated: true; not with --fake-gpus)"},
    {"cpus", TY_OPT_INT, NULL, 1, 1000000,
     "CPUs to report allocatable instead of the online CPUs minus --reserve-cpus (for "
     "simulated nodes; with --fake-gpus or --inventory-file nothing is reported without it)"},
    {"memory-mb", TY_OPT_INT, NULL, 1, 1099511627776LL,
     "MiB of memory to report allocatable instead of MemTotal minus --reserve-memory-mb "
     "(for simulated nodes, like --cpus)"},
    {"reserve-cpus", TY_OPT_INT, "0", 0, 1000000,
     "CPUs kept for the system and the executor: the scheduler places jobs' "
     "cpus_per_node on the online CPUs minus these"},
    {"reserve-memory-mb", TY_OPT_INT, "0", 0, 1099511627776LL,
     "MiB kept for the system and the executor: the scheduler places jobs' "
     "memory_mb_per_node on MemTotal (/proc/meminfo) minus these"},
    {"nvml-library", TY_OPT_STR, HW_NVML_DEFAULT, 0, 0,
     "NVML library to dlopen for the GPU probe, the health watch and telemetry (the driver's; "
     "the watch holds one NVML session while the executor runs, never a CUDA context: stop "
     "the executor before nvidia-smi -r)"},
    {"telemetry-ms", TY_OPT_INT, "5000", 0, 3600000,
     "how often the GPUs are read through NVML (utilization, memory used, power) while "
     "attempts with GPUs run: attempt_exited.telemetry, the heartbeat's idle_seconds and "
     "gpu_util, the DCGM_FI_DEV_* series on /metrics; NVML is held only while such attempts "
     "run (0: off; off on a simulated inventory)"},
    {"idle-util-percent", TY_OPT_INT, "5", 0, 100,
     "a GPU below this utilization (percent) is idle: the seconds in which every GPU of an "
     "attempt was idle are its idle_seconds"},
    {"sample-for", TY_OPT_INT, NULL, 1, 86400,
     "diagnostic: probe the GPUs, read them every --telemetry-ms for SECONDS without Kafka, "
     "print one JSON line per sample and a summary line, then exit (0; 2 when no GPU could "
     "be read); see docs/operations.md"},
    {"cudart", TY_OPT_STR, NULL, 0, 0,
     "CUDA runtime to dlopen for the GPU probe when NVML cannot be loaded or initialised "
     "(default: libcudart.so, libcudart.so.13, libcudart.so.12)"},
    {"probe", TY_OPT_BOOL, "false", 0, 0,
     "print this node's inventory as one line of JSON (what register sends: the GPUs from "
     "NVML or the CUDA runtime, the HCAs; or --fake-gpus, --inventory-file) and exit 0; "
     "needs no other option"},
    {"labels", TY_OPT_STR, "", 0, 0,
     "node labels 'key=value,...': zone, rack and block place gangs by topology, "
     "pool is spot or on-demand"},
    {"expect-gpus", TY_OPT_INT, "0", 0, EXEC_EXPECT_GPUS_MAX,
     "GPUs this node should have (0: no expectation; the label "
     "trainyard.io/expected-gpus=N says the same, and this option wins): finding fewer, or "
     "GPUs NVML cannot read, registers the node with a fault and it gets no new work "
     "(docs/operations.md, \"Expected inventory\")"},
    {"state-dir", TY_OPT_STR, NULL, 0, 0,
     "directory for state.json and attempts/<job>.<attempt>/ (required)"},
    {"checkpoint-root", TY_OPT_STR, NULL, 0, 0,
     "jobs' checkpoint directories are <DIR>/job-<id> (TRAINYARD_CHECKPOINT_DIR); shared "
     "storage, so a retry on another node resumes (default: <state-dir>/checkpoints)"},
    {"heartbeat-ms", TY_OPT_INT, "2000", 50, 600000, "heartbeat interval"},
    {"progress-ms", TY_OPT_INT, "10000", 50, 600000,
     "the ranks' progress (step, steps/s, samples/s) rides on a heartbeat at most this often "
     "per attempt"},
    {"fetch-wait-ms", TY_OPT_INT, "500", 1, 10000,
     "longest wait of a fetch of the dispatch partition in the broker (fetch.wait.max.ms): "
     "Kafka answers as soon as a message is there, so an idle node long-polls at no cost to "
     "launch latency; librdkafka's mock cluster (trainyard-broker) always waits it out, so the "
     "local stack sets 10"},
    {"register-ms", TY_OPT_INT, "60000", 1000, 86400000, "re-register interval"},
    {"ckpt-rehash", TY_OPT_BOOL, "false", 0, 0,
     "hash every file of the checkpoint a launch resumes from (and of those seen after the "
     "checkpoint signal) on this node too, not only on the node of rank 0; without it this "
     "node checks the manifest's digest and the files' sizes"},
    {"kill-grace-ms", TY_OPT_INT, "5000", 0, 3600000,
     "SIGTERM to SIGKILL grace when ranks are stopped (a launch or kill may set its own)"},
    {"fence-after-ms", TY_OPT_INT, "0", 0, 86400000,
     "stop every attempt when no heartbeat reached the broker for this long (0: never); "
     "with the kill grace, below the scheduler's --node-timeout-ms (docs/dispatch.md, "
     "\"Partitions\")"},
    {"log-port", TY_OPT_INT, "0", 0, 65535, "TCP port of the log server; 0 picks a free one"},
    {"log-pubkey", TY_OPT_STR, NULL, 0, 0,
     "PEM file of the Ed25519 public key whose log credentials the log server accepts, the "
     "public half of the API's --log-key; docs/security.md, \"Rank logs\" (required)"},
    {"log-max-bytes", TY_OPT_INT, "67108864", 65536, 1099511627776LL,
     "size at which a rank log is rotated to .1 (one rotation kept)"},
    {"spot-provider", TY_OPT_STR, "none", 0, 0,
     "spot interruption notices to poll: none, aws (IMDSv2), gcp or azure (Scheduled Events)"},
    {"spot-metadata-url", TY_OPT_STR, NULL, 0, 0,
     "metadata base URL (default: http://169.254.169.254 for aws and azure, "
     "http://metadata.google.internal for gcp)"},
    {"spot-poll-ms", TY_OPT_INT, "5000", 100, 3600000, "spot notice poll interval"},
    {"spot-timeout-ms", TY_OPT_INT, "2000", 50, 60000,
     "timeout of one metadata request, connecting included (at most the poll interval)"},
    {"tier-endpoint", TY_OPT_STR, NULL, 0, 0,
     "base URL (http:// or https://) of the S3-compatible object store that jobs with "
     "checkpoint.tier move older checkpoints to, path-style; unset: no tiering (such jobs' "
     "retention is the plain one: the newest checkpoint.keep and every keep_every-th)"},
    {"tier-bucket", TY_OPT_STR, "trainyard-checkpoints", 0, 0,
     "the object store's bucket (objects jobs/<job>/step-<N>/...)"},
    {"tier-region", TY_OPT_STR, "us-east-1", 0, 0, "the region requests are signed for (SigV4)"},
    {"tier-credentials-file", TY_OPT_STR, NULL, 0, 0,
     "JSON file {\"access_key_id\": ..., \"secret_access_key\": ...} of the object store "
     "(required with --tier-endpoint)"},
    {"tier-timeout-ms", TY_OPT_INT, "10000", 100, 600000,
     "an object store request fails when connecting, or a transfer stalled, takes this long"},
    {"preflight-command", TY_OPT_STR, NULL, 0, 0,
     "JSON array: the program and arguments run as every local rank, with the rank's "
     "environment, before a job that asks for a preflight; all exit 0 or the attempt fails "
     "as system (default: [\"<the executor's directory>/trainyard-allreduce\", "
     "\"--node-check\", \"--bytes\", \"8M\", \"--timeout\", \"60\"])"},
    {"health-check-command", TY_OPT_STR, NULL, 0, 0,
     "a shell command run on the host when the scheduler asks for a health check (a failure "
     "on rank logs alone was blamed on this node); exit 0 is healthy, anything else a fatal "
     "health_check condition until a later check passes (default: none, the health watch's "
     "conditions answer)"},
    {"health-check-timeout-ms", TY_OPT_INT, "300000", 1000, 86400000,
     "how long a health check may run before it counts as failed"},
    {"health-check-interval-ms", TY_OPT_INT, "60000", 0, 86400000,
     "requests within this long of the last check's end are answered by its verdict"},
    {"api-url", TY_OPT_STR, NULL, 0, 0,
     "the API's base URL as ranks reach it (http[s]://host:port): ranks get "
     "TRAINYARD_METRICS_URL and their attempt's TRAINYARD_METRICS_TOKEN to report trial "
     "metrics (default: not set)"},
    {"classify-file", TY_OPT_STR, NULL, 0, 0,
     "failure classification rules 'class<TAB>regex' checked before the built-in ones "
     "(executor/classify.conf)"},
    {"isolation", TY_OPT_STR, "runc", 0, 0,
     "runc: every attempt in its own OCI container, as its team's uid, within its limits "
     "(docs/security.md); none: ranks run on the host as the executor's user, with no "
     "isolation between jobs (only for a machine without an OCI runtime)"},
    {"runtime", TY_OPT_STR, "runc", 0, 0, "the OCI runtime program (runc; crun on pure cgroup v2)"},
    {"runtime-root", TY_OPT_STR, NULL, 0, 0,
     "the runtime's state directory (its --root; default: <state-dir>/runtime)"},
    {"cgroup-parent", TY_OPT_STR, NULL, 0, 0,
     "attempts' cgroups are <PATH>/<container id> (default: the executor's own cgroup)"},
    {"data-mounts", TY_OPT_STR, "", 0, 0,
     "shared data every container sees read-only: 'SRC[:DST],...' (absolute paths)"},
    {"device-dir", TY_OPT_STR, "/dev", 0, 0,
     "where the GPU (nvidiaN, nvidiactl, nvidia-uvm...) and RDMA (infiniband/) device nodes "
     "are looked up"},
    {"pids-limit", TY_OPT_INT, "32768", 0, 4194304,
     "most processes and threads of one attempt on this node (0: no limit)"},
    {"warm-containers", TY_OPT_INT, "2", 0, EXEC_WARM_MAX,
     "containers created ahead, with everything but the attempt's directories and limits, "
     "for the next host-root attempts whose devices are theirs (docs/security.md, "
     "\"Warm containers\"); 0: every attempt creates its own"},
    {"shm-size-mb", TY_OPT_INT, "0", 0, 16777216,
     "size of a container's /dev/shm (0: half the attempt's memory_mb_per_node)"},
    {"image-cache", TY_OPT_STR, NULL, 0, 0,
     "where jobs' OCI images (oci:DIR[:TAG], oci-archive:FILE[:TAG]) are unpacked once per "
     "manifest digest (default: <state-dir>/images)"},
    {"seccomp-profile", TY_OPT_STR, NULL, 0, 0,
     "the containers' seccomp profile, an OCI linux.seccomp JSON object (default: "
     "executor/seccomp.json, built in)"},
    {"log-level", TY_OPT_STR, "info", 0, 0, "debug, info, warn or error"},
    {"log-json", TY_OPT_BOOL, "false", 0, 0, "log JSON lines instead of text"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: " PROG " --state-dir DIR --kafka-bootstrap SERVERS --log-pubkey FILE "
		   "[options]\n"
		   "\n"
		   "The Trainyard node executor: registers this node, consumes its dispatch\n"
		   "partition, runs and supervises ranks, reports events, serves rank logs.\n"
		   "\n");
	ty_config_usage(f, options, NOPTS, ENV_PREFIX);
}

static int fail(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n");
	return 2;
}

/* The program name next to this executor's binary, in *out (new). */
static int sibling(char **out, const char *name, struct ty_err *err)
{
	char self[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	*out = NULL;
	if (n <= 0)
		return ty_err_set(err, TY_EIO, "cannot find the executor's binary: %s",
				  strerror(errno));
	self[n] = '\0';
	if ((slash = strrchr(self, '/')))
		*slash = '\0';
	if (asprintf(out, "%s/%s", self, name) < 0) {
		*out = NULL;
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	return 0;
}

/*
 * The CPUs and memory register reports allocatable: --cpus / --memory-mb
 * as given; else the host's online CPUs and MemTotal minus the reserves,
 * except on a simulated node (many share one host), which reports none
 * (not limited) unless told.
 */
static int capacity(struct exec_opts *o, struct ty_config *c, bool simulated, struct ty_err *err)
{
	int64_t total;
	int rc;

	if (ty_config_str(c, "cpus"))
		o->cpus = ty_config_int(c, "cpus");
	else if (!simulated &&
		 ((rc = hw_cpus_online(&total, err)) ||
		  (rc = hw_allocatable(&o->cpus, total, ty_config_int(c, "reserve-cpus"), "CPUs",
				       "--reserve-cpus", err))))
		return rc;
	if (ty_config_str(c, "memory-mb"))
		o->memory_mb = ty_config_int(c, "memory-mb");
	else if (!simulated &&
		 ((rc = hw_meminfo_total_mb(&total, "/proc/meminfo", err)) ||
		  (rc = hw_allocatable(&o->memory_mb, total, ty_config_int(c, "reserve-memory-mb"),
				       "MiB of memory", "--reserve-memory-mb", err))))
		return rc;
	if (o->cpus > 0 || o->memory_mb > 0)
		ty_info("allocatable: %lld CPUs, %lld MiB of memory (0: not reported, not limited)",
			(long long)o->cpus, (long long)o->memory_mb);
	return 0;
}

/*
 * --sample-for SECONDS: the GPUs NVML finds, read every --telemetry-ms, as
 * JSON lines on stdout (the log stays on stderr). 2 when no GPU could be
 * read at all, or the options do not allow a sample.
 */
static int sample_for(struct ty_config *c)
{
	const char *lib = ty_config_str(c, "nvml-library");
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	int rc = 2;

	if (ty_config_str(c, "fake-gpus") || ty_config_str(c, "inventory-file"))
		return fail("%s", "--sample-for reads the real GPUs: not with --fake-gpus or "
				  "--inventory-file");
	if (ty_config_int(c, "telemetry-ms") <= 0)
		return fail("%s", "--sample-for needs --telemetry-ms above 0");
	if (hw_probe(&inv, lib, ty_config_str(c, "cudart"), &err)) {
		fail("%s", err.msg);
		goto out;
	}
	if (strcmp(inv.gpu_source, "nvml") != 0 || !inv.ngpus) {
		fail("no GPU to sample: NVML '%s' gave none (the log above says why)", lib);
		goto out;
	}
	if (exec_telemetry_sample_for(stdout, lib, &inv, ty_config_int(c, "sample-for"),
				      ty_config_int(c, "telemetry-ms"),
				      (double)ty_config_int(c, "idle-util-percent"), &err)) {
		fail("%s", err.msg);
		goto out;
	}
	rc = 0;
out:
	hw_inventory_clear(&inv);
	return rc;
}

/*
 * --probe: the inventory register would send, on stdout; what the probe
 * logs (which source gave the GPUs, what could not be read) on stderr.
 */
static int probe(struct ty_config *c)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	json_t *j = NULL;
	char *text = NULL;
	int rc;

	if (ty_config_str(c, "fake-gpus") && ty_config_str(c, "inventory-file"))
		return fail("%s", "--fake-gpus and --inventory-file are alternatives: give one");
	if (ty_config_str(c, "fake-gpus"))
		rc = hw_inventory_fake(&inv, (int)ty_config_int(c, "fake-gpus"), &err);
	else if (ty_config_str(c, "inventory-file"))
		rc = hw_inventory_load(&inv, ty_config_str(c, "inventory-file"), &err);
	else
		rc = hw_probe(&inv, ty_config_str(c, "nvml-library"), ty_config_str(c, "cudart"),
			      &err);
	if (rc) {
		rc = fail("%s", err.msg);
		goto out;
	}
	if (!(j = hw_inventory_json(&inv)) || !(text = json_dumps(j, JSON_COMPACT))) {
		rc = fail("%s", "out of memory");
		goto out;
	}
	printf("%s\n", text);
	rc = fflush(stdout) ? 1 : 0;
out:
	free(text);
	json_decref(j);
	hw_inventory_clear(&inv);
	return rc;
}

/*
 * The GPUs this node should have: --expect-gpus when given (overruling the
 * label, with a warning when they disagree), else the label's count (0:
 * no expectation). What was found against it is logged; register carries
 * it as the fault (daemon.c).
 */
static int expectation(const struct ty_config *c, const json_t *labels,
		       const struct hw_inventory *inv)
{
	char fault[EXEC_FAULT_MAX];
	struct ty_err err = {0};
	int label = 0, n;

	exec_labels_expected_gpus(&label, labels, &err); /* exec_labels_parse checked it */
	n = label;
	if (strcmp(ty_config_source(c, "expect-gpus"), "default")) {
		n = (int)ty_config_int(c, "expect-gpus");
		if (json_object_get(labels, EXEC_LABEL_EXPECTED_GPUS) && n != label)
			ty_warn("--expect-gpus %d overrides the label " EXEC_LABEL_EXPECTED_GPUS
				"=%d",
				n, label);
	}
	if (n <= 0)
		return 0;
	exec_expect_fault(fault, sizeof(fault), n, inv->ngpus, inv->gpu_fault);
	if (*fault)
		ty_warn("inventory: %s: the node registers with this fault and gets no new work "
			"until it registers without one",
			fault);
	else if (inv->ngpus > (size_t)n)
		ty_info("inventory: %zu GPUs, more than the %d expected", inv->ngpus, n);
	return n;
}

/* trainyard-allreduce --node-check next to this executor's binary. */
static int preflight_default(char ***out, struct ty_err *err)
{
	static const char *const args[] = {"--node-check", "--bytes", "8M", "--timeout", "60"};
	char **v;

	*out = NULL;
	if (!(v = calloc(sizeof(args) / sizeof(args[0]) + 2, sizeof(*v))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	*out = v;
	if (sibling(&v[0], "trainyard-allreduce", err))
		return err->code;
	for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++)
		if (!(v[i + 1] = strdup(args[i])))
			return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

/*
 * The Ed25519 public key of a required option into *out; what is wrong is
 * printed (fail): none given (missing), a file that holds no key, or a
 * private key (private_fmt, with the path), which a node must never hold.
 */
static int public_key(struct ty_ed25519_key **out, struct ty_config *c, const char *option,
		      const char *missing, const char *private_fmt)
{
	const char *path = ty_config_str(c, option);
	struct ty_err err = {0};

	if (!path || !*path)
		return fail("%s", missing);
	if (ty_ed25519_key_load(out, path, false, &err)) {
		fprintf(stderr, PROG ": --%s: %s\n", option, err.msg);
		return 2;
	}
	if (ty_ed25519_key_is_private(*out))
		return fail(private_fmt, path);
	return 0;
}

/* A whole small file into a new string; NULL with err set. */
static char *slurp(const char *path, struct ty_err *err)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0;

	if (!f) {
		ty_err_set(err, TY_EIO, "cannot read '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (getdelim(&buf, &len, '\0', f) < 0) {
		ty_err_set(err, TY_EIO, "cannot read '%s'", path);
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

/*
 * The container options (--isolation runc): the runtime must run, its
 * leftovers from a previous boot are deleted, data mounts and the seccomp
 * profile must parse.
 */
static int isolation_opts(struct exec_opts *o, struct exec_rt_opts *rt, struct ty_config *c,
			  struct exec_rt_mount **mounts, char **seccomp, char *root, char *bundles,
			  char *cgroup, char *images, struct ty_err *err)
{
	struct ty_err why = {0};
	const char *v;
	json_t *j;
	int n;

	rt->runtime = ty_config_str(c, "runtime");
	if ((v = ty_config_str(c, "runtime-root")) && *v)
		snprintf(root, 4096, "%s", v);
	else if ((size_t)snprintf(root, 4096, "%s/runtime", o->state_dir) >= 4096)
		return ty_err_set(err, TY_EINVAL, "state directory '%s' is too long", o->state_dir);
	if ((size_t)snprintf(bundles, 4096, "%s/containers", o->state_dir) >= 4096)
		return ty_err_set(err, TY_EINVAL, "state directory '%s' is too long", o->state_dir);
	if ((v = ty_config_str(c, "image-cache")) && *v)
		snprintf(images, 4096, "%s", v);
	else
		snprintf(images, 4096, "%s/images", o->state_dir);
	o->image_cache = images;
	if ((v = ty_config_str(c, "cgroup-parent")) && *v) {
		if (v[0] != '/')
			return ty_err_set(err, TY_EINVAL, "--cgroup-parent '%s' is not absolute", v);
		snprintf(cgroup, 4096, "%s", v);
	} else if (!exec_rt_own_cgroup(cgroup, 4096)) {
		return ty_err_set(err, TY_EIO,
				  "cannot read this executor's cgroup from /proc/self/cgroup: set "
				  "--cgroup-parent");
	}
	rt->root = root;
	rt->bundles = bundles;
	rt->cgroup_parent = cgroup;
	rt->shim = o->rank_shim;
	if (exec_rt_check(rt, &why))
		return ty_err_set(err, why.code,
				  "%s (install it, or run with --isolation none and no isolation "
				  "between jobs)",
				  why.msg);
	if (!(*mounts = calloc(EXEC_RT_MAX_MOUNTS, sizeof(**mounts))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	if (exec_rt_mounts_parse(*mounts, EXEC_RT_MAX_MOUNTS, &o->ndata_mounts,
				 ty_config_str(c, "data-mounts"), &why))
		return ty_err_set(err, why.code, "--data-mounts: %s", why.msg);
	o->data_mounts = *mounts;
	if ((v = ty_config_str(c, "seccomp-profile")) && *v) {
		if (!(*seccomp = slurp(v, &why)))
			return ty_err_set(err, why.code, "--seccomp-profile: %s", why.msg);
		o->seccomp = *seccomp;
	} else {
		o->seccomp = exec_seccomp_default;
	}
	if (!(j = json_loads(o->seccomp, 0, NULL)) || !json_is_object(j)) {
		json_decref(j);
		return ty_err_set(err, TY_EINVAL, "the seccomp profile is not a JSON object");
	}
	json_decref(j);
	o->device_dir = ty_config_str(c, "device-dir");
	o->pids_limit = ty_config_int(c, "pids-limit");
	o->shm_mb = ty_config_int(c, "shm-size-mb");
	o->warm_containers = (int)ty_config_int(c, "warm-containers");
	o->runtime = rt;
	if ((n = exec_rt_delete_all(rt)) > 0)
		ty_info("deleted %d container(s) a previous boot left", n);
	ty_info("isolation: every attempt in a %s container under cgroup %s", rt->runtime, cgroup);
	return 0;
}

/* The Xid table: the built-in entries, then --xid-file's over them. */
static int xid_table(struct hw_xid_table **out, struct ty_config *c, struct ty_err *err)
{
	const char *file = ty_config_str(c, "xid-file");
	int rc;

	if ((rc = hw_xid_table_new(out, err)) ||
	    (rc = hw_xid_table_add(*out, hw_xid_defaults, "xid.conf (built in)", err)))
		return rc;
	if (file && *file && (rc = hw_xid_table_add_file(*out, file, err)))
		return rc;
	return 0;
}

/* What --watch-for has seen; written by the watch's thread, read after it stopped. */
struct watch_seen {
	pthread_mutex_t mu;
	int fatal, degraded;
};

/* Each new condition, one JSON line on stdout. */
static void watch_print(void *arg, const struct hw_condition *cond)
{
	struct watch_seen *seen = arg;
	json_t *j = hw_condition_json(cond);
	char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;

	pthread_mutex_lock(&seen->mu);
	if (line) {
		puts(line);
		fflush(stdout);
	}
	if (cond->severity == PROTO_SEVERITY_FATAL)
		seen->fatal++;
	else
		seen->degraded++;
	pthread_mutex_unlock(&seen->mu);
	free(line);
	json_decref(j);
}

/*
 * --watch-for SECONDS: an operator's diagnostic (docs/operations.md): the
 * GPU probe and the health watch alone, no broker, no state. Exit 0 when
 * no condition was seen, 3 when one was, 2 when the watch cannot run here.
 */
static int watch_for(struct ty_config *c, const struct hw_xid_table *xids)
{
	long long seconds = ty_config_int(c, "watch-for");
	struct watch_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct hw_inventory inv = {0};
	struct hw_conditions *l = NULL;
	struct exec_health *h = NULL;
	struct ty_err err = {0};
	struct exec_health_opts ho = {0};
	struct timespec left;
	json_t *sum;
	char *line;
	int rc;

	if (ty_config_str(c, "fake-gpus") || ty_config_str(c, "inventory-file"))
		return fail("%s", "--watch-for watches this machine's GPUs: not with --fake-gpus "
				  "or --inventory-file");
	if (hw_probe(&inv, ty_config_str(c, "nvml-library"), ty_config_str(c, "cudart"), &err)) {
		fail("%s", err.msg);
		rc = 1;
		goto out;
	}
	if (hw_conditions_new(&l, NULL, &err)) {
		fail("%s", err.msg);
		rc = 1;
		goto out;
	}
	ho.nvml = ty_config_str(c, "nvml-library");
	ho.inventory = &inv;
	ho.xids = xids;
	ho.check_ms = ty_config_int(c, "health-check-ms");
	ho.conditions = l;
	ho.on_new = watch_print;
	ho.arg = &seen;
	if ((rc = exec_health_start(&h, &ho, &err))) {
		fprintf(stderr, PROG ": --watch-for: the health watch cannot run: %s\n", err.msg);
		rc = rc == TY_EUNAVAIL ? 2 : 1;
		goto out;
	}
	left.tv_sec = (time_t)seconds;
	left.tv_nsec = 0;
	while (nanosleep(&left, &left) && errno == EINTR)
		;
	exec_health_stop(h);
	h = NULL;
	sum = json_pack("{s:{s:I, s:I, s:i, s:i, s:I, s:b}}", "summary", "seconds",
			(json_int_t)seconds, "gpus", (json_int_t)inv.ngpus, "fatal", seen.fatal,
			"degraded", seen.degraded, "listed_at_end", (json_int_t)hw_conditions_count(l),
			"healthy", seen.fatal + seen.degraded == 0);
	if (sum && (line = json_dumps(sum, JSON_COMPACT))) {
		puts(line);
		free(line);
	}
	fflush(stdout);
	json_decref(sum);
	rc = seen.fatal + seen.degraded ? 3 : 0;
out:
	exec_health_stop(h);
	hw_conditions_free(l);
	hw_inventory_clear(&inv);
	return rc;
}

int main(int argc, char **argv)
{
	struct ty_config *c = ty_config_new(options, NOPTS, ENV_PREFIX);
	struct exec_opts o = {0};
	struct exec_classifier *classifier = NULL;
	struct hw_xid_table *xids = NULL;
	struct ty_err err = {0};
	struct hw_inventory inv = {0};
	json_t *labels = NULL;
	char host[256] = "", bootstrap[4096], iface[64] = "", **fabric = NULL, ckroot[4096];
	char **preflight = NULL, *shim = NULL, *seccomp = NULL;
	char node_key[PROTO_NODE_KEY_LEN + 1] = "";
	struct ty_ed25519_key *log_pubkey = NULL, *dispatch_key = NULL;
	char rt_root[4096], rt_bundles[4096], cgroup[4096], images[4096];
	struct exec_rt_opts rt = {0};
	struct exec_rt_mount *mounts = NULL;
	struct exec_objstore store = {0};
	const char *tier;
	int rc = 2, rc2, level;

	if (!c)
		return 1;
	if (ty_config_load(c, argc, argv, NULL, &err)) {
		fail("%s", err.msg);
		fprintf(stderr, "try '" PROG " --help'\n");
		goto out;
	}
	if (ty_config_bool(c, "help")) {
		usage(stdout);
		rc = 0;
		goto out;
	}
	level = ty_log_level_parse(ty_config_str(c, "log-level"));
	if (level < 0) {
		fail("log level '%s' is not debug, info, warn or error",
		     ty_config_str(c, "log-level"));
		goto out;
	}
	ty_log_init(PROG, (enum ty_log_level)level, ty_config_bool(c, "log-json"));
	/* a bad line stops the executor at start, naming FILE:LINE */
	if (xid_table(&xids, c, &err)) {
		fail("--xid-file: %s", err.msg);
		goto out;
	}
	if (ty_config_str(c, "sample-for")) {
		rc = sample_for(c); /* a diagnostic: no node, no Kafka, no keys */
		goto out;
	}
	if (ty_config_str(c, "watch-for")) {
		rc = watch_for(c, xids);
		goto out;
	}
	if (ty_config_bool(c, "probe")) {
		rc = probe(c);
		goto out;
	}

	o.node_id = ty_config_str(c, "node-id");
	if (!o.node_id) {
		if (gethostname(host, sizeof(host) - 1)) {
			fail("%s", "cannot read the hostname: set --node-id");
			goto out;
		}
		o.node_id = host;
	}
	if (!proto_node_id_ok(o.node_id)) {
		fail("node id '%s' is not 1-63 of [A-Za-z0-9._-] starting alphanumeric: set "
		     "--node-id",
		     o.node_id);
		goto out;
	}
	/* without it anyone who can write to the dispatch topic runs commands here */
	if (public_key(&dispatch_key, c, "dispatch-pubkey",
		       "no dispatch key: set --dispatch-pubkey or "
		       "TRAINYARD_EXECUTOR_DISPATCH_PUBKEY to the scheduler's public key file",
		       /* a node that holds the private key could sign dispatch for every node */
		       "--dispatch-pubkey: '%s' holds the scheduler's private key; give executors "
		       "only its public half ('openssl pkey -in KEY -pubout')"))
		goto out;
	o.dispatch_key = dispatch_key;
	if (!ty_config_str(c, "node-key-file") || !*ty_config_str(c, "node-key-file")) {
		fail("%s", "no node key: set --node-key-file or TRAINYARD_EXECUTOR_NODE_KEY_FILE "
			   "(trainyard-scheduler --print-node-key NODE prints it)");
		goto out;
	}
	if (proto_node_key_load(node_key, ty_config_str(c, "node-key-file"), &err)) {
		fail("--node-key-file: %s", err.msg);
		goto out;
	}
	o.node_key = node_key;
	if (!(o.state_dir = ty_config_str(c, "state-dir")) || !*o.state_dir) {
		fail("%s", "no state directory: set --state-dir or TRAINYARD_EXECUTOR_STATE_DIR");
		goto out;
	}
	o.checkpoint_root = ty_config_str(c, "checkpoint-root");
	if (!o.checkpoint_root || !*o.checkpoint_root) {
		if ((size_t)snprintf(ckroot, sizeof(ckroot), "%s/checkpoints", o.state_dir) >=
		    sizeof(ckroot)) {
			fail("state directory '%s' is too long", o.state_dir);
			goto out;
		}
		o.checkpoint_root = ckroot;
	}
	if (ty_kafka_bootstrap(bootstrap, sizeof(bootstrap), ty_config_str(c, "kafka-bootstrap"),
			       &err)) {
		fail("%s (set --kafka-bootstrap or TRAINYARD_EXECUTOR_KAFKA_BOOTSTRAP)", err.msg);
		goto out;
	}
	if (ty_kafka_properties_load(ty_config_str(c, "kafka-properties-file"), &err)) {
		fail("%s", err.msg);
		goto out;
	}
	if (exec_labels_parse(&labels, ty_config_str(c, "labels"), &err)) {
		fail("--labels: %s", err.msg);
		goto out;
	}
	/* operators' rules first: within a class the first matching rule wins */
	if (exec_classifier_new(&classifier, &err) ||
	    (ty_config_str(c, "classify-file") &&
	     exec_classifier_add_file(classifier, ty_config_str(c, "classify-file"), &err)) ||
	    exec_classifier_add(classifier, exec_classify_defaults, "classify.conf (built in)",
				&err)) {
		fail("--classify-file: %s", err.msg);
		goto out;
	}
	o.classifier = classifier;
	o.address = ty_config_str(c, "address");
	if (ty_config_str(c, "fake-gpus") && ty_config_str(c, "inventory-file")) {
		fail("%s", "--fake-gpus and --inventory-file are alternatives: give one");
		goto out;
	}
	if (ty_config_str(c, "fake-gpus"))
		rc2 = hw_inventory_fake(&inv, (int)ty_config_int(c, "fake-gpus"), &err);
	else if (ty_config_str(c, "inventory-file"))
		rc2 = hw_inventory_load(&inv, ty_config_str(c, "inventory-file"), &err);
	else
		rc2 = hw_probe(&inv, ty_config_str(c, "nvml-library"), ty_config_str(c, "cudart"),
			       &err);
	if (rc2) {
		fail("%s", err.msg);
		goto out;
	}
	if (hw_iface_of(iface, sizeof(iface), o.address, &err)) {
		ty_warn("NCCL_SOCKET_IFNAME not set: %s", err.msg);
		ty_err_clear(&err);
	}
	if (hw_nccl_env(&fabric, &inv, iface, &err)) {
		fail("%s", err.msg);
		goto out;
	}
	ty_info("inventory: %zu GPUs (from %s), %zu HCAs; ranks get %s, NCCL_SOCKET_IFNAME=%s%s",
		inv.ngpus, *inv.gpu_source ? inv.gpu_source : "none found", inv.nhcas, fabric[0],
		*iface ? "=" : "(unset)", iface);
	o.inventory = &inv;
	o.fabric_env = fabric;
	o.nccl_iface = iface;
	o.sysfs_root = ty_config_str(c, "sysfs-root");
	o.fabric_check_ms = ty_config_int(c, "fabric-check-ms");
	o.expect_port_gbps = (double)ty_config_int(c, "expect-port-gbps");
	o.health_check_ms = ty_config_int(c, "health-check-ms");
	o.nvml_library = ty_config_str(c, "nvml-library");
	o.xids = xids;
	o.bootstrap = bootstrap;
	o.fake_gpus = ty_config_str(c, "fake-gpus") ? (int)ty_config_int(c, "fake-gpus") : -1;
	if (capacity(&o, c, inv.simulated, &err)) {
		fail("%s", err.msg);
		goto out;
	}
	o.labels = labels;
	o.expect_gpus = expectation(c, labels, &inv);
	o.heartbeat_ms = ty_config_int(c, "heartbeat-ms");
	o.progress_ms = ty_config_int(c, "progress-ms");
	o.fetch_wait_ms = ty_config_int(c, "fetch-wait-ms");
	o.register_ms = ty_config_int(c, "register-ms");
	o.kill_grace_ms = ty_config_int(c, "kill-grace-ms");
	o.ckpt_rehash = ty_config_bool(c, "ckpt-rehash");
	o.fence_ms = ty_config_int(c, "fence-after-ms");
	if (o.fence_ms && o.fence_ms <= 2 * o.heartbeat_ms) {
		fail("%s", "--fence-after-ms must be more than twice --heartbeat-ms (or 0)");
		goto out;
	}
	o.log_port = (int)ty_config_int(c, "log-port");
	if (public_key(&log_pubkey, c, "log-pubkey",
		       "no log credential key: set --log-pubkey (or "
		       "TRAINYARD_EXECUTOR_LOG_PUBKEY) to the public half of the API's --log-key",
		       /* a node that could mint credentials could read every node's logs */
		       "--log-pubkey '%s' holds a private key: give executors only its public half "
		       "(openssl pkey -in KEY -pubout)"))
		goto out;
	o.log_pubkey = log_pubkey;
	o.log_max_bytes = ty_config_int(c, "log-max-bytes");
	if ((o.spot_provider = exec_spot_provider_parse(ty_config_str(c, "spot-provider"))) < 0) {
		fail("--spot-provider '%s' is not none, aws, gcp or azure",
		     ty_config_str(c, "spot-provider"));
		goto out;
	}
	o.spot_url = ty_config_str(c, "spot-metadata-url");
	if (!o.spot_url || !*o.spot_url)
		o.spot_url = exec_spot_default_base((enum exec_spot_provider)o.spot_provider);
	else if (strncmp(o.spot_url, "http://", 7) && strncmp(o.spot_url, "https://", 8)) {
		fail("--spot-metadata-url '%s' is not an http:// or https:// URL", o.spot_url);
		goto out;
	}
	o.api_url = ty_config_str(c, "api-url");
	if (o.api_url && *o.api_url && strncmp(o.api_url, "http://", 7) &&
	    strncmp(o.api_url, "https://", 8)) {
		fail("--api-url '%s' is not an http:// or https:// URL", o.api_url);
		goto out;
	}
	if (ty_config_str(c, "preflight-command"))
		rc2 = exec_argv_parse(&preflight, ty_config_str(c, "preflight-command"), &err);
	else
		rc2 = preflight_default(&preflight, &err);
	if (rc2) {
		fail("--preflight-command: %s", err.msg);
		goto out;
	}
	o.preflight_command = preflight;
	if (sibling(&shim, "trainyard-rank-shim", &err)) {
		fail("%s", err.msg);
		goto out;
	}
	if (access(shim, X_OK)) {
		fail("cannot run ranks without '%s', which is built and installed with the "
		     "executor",
		     shim);
		goto out;
	}
	o.rank_shim = shim;
	if (!strcmp(ty_config_str(c, "isolation"), "runc")) {
		if (isolation_opts(&o, &rt, c, &mounts, &seccomp, rt_root, rt_bundles, cgroup, images,
				   &err)) {
			fail("%s", err.msg);
			goto out;
		}
	} else if (!strcmp(ty_config_str(c, "isolation"), "none")) {
		ty_warn("--isolation none: ranks run on the host as this executor's user, with no "
			"container, no team uid and no limits: jobs on this node can read, change "
			"and stop each other (docs/security.md)");
	} else {
		fail("--isolation '%s' is not runc or none", ty_config_str(c, "isolation"));
		goto out;
	}
	o.nvml_library = ty_config_str(c, "nvml-library");
	o.telemetry_ms = ty_config_int(c, "telemetry-ms");
	o.idle_util_pct = (int)ty_config_int(c, "idle-util-percent");
	o.spot_poll_ms = ty_config_int(c, "spot-poll-ms");
	o.health_check_command = ty_config_str(c, "health-check-command");
	if (o.health_check_command && !*o.health_check_command)
		o.health_check_command = NULL;
	o.health_check_timeout_ms = ty_config_int(c, "health-check-timeout-ms");
	o.health_check_interval_ms = ty_config_int(c, "health-check-interval-ms");
	o.spot_timeout_ms = ty_config_int(c, "spot-timeout-ms");
	tier = ty_config_str(c, "tier-endpoint");
	if (tier && *tier) {
		const char *b = ty_config_str(c, "tier-bucket"), *rg = ty_config_str(c, "tier-region");
		const char *cred = ty_config_str(c, "tier-credentials-file");
		size_t n = strlen(tier);

		while (n && tier[n - 1] == '/')
			n--;
		if ((strncmp(tier, "http://", 7) && strncmp(tier, "https://", 8)) ||
		    n >= sizeof(store.endpoint)) {
			fail("--tier-endpoint '%s' is not an http:// or https:// URL", tier);
			goto out;
		}
		if (!b || !*b || strlen(b) >= sizeof(store.bucket) || strchr(b, '/')) {
			fail("--tier-bucket '%s' is not a bucket name", b ? b : "");
			goto out;
		}
		if (!rg || !*rg || strlen(rg) >= sizeof(store.region) || strchr(rg, ':')) {
			fail("--tier-region '%s' is not a region", rg ? rg : "");
			goto out;
		}
		if (!cred || !*cred) {
			fail("%s", "--tier-endpoint needs --tier-credentials-file");
			goto out;
		}
		if (exec_objstore_creds_load(&store, cred, &err)) {
			fail("--tier-credentials-file: %s", err.msg);
			goto out;
		}
		snprintf(store.endpoint, sizeof(store.endpoint), "%.*s", (int)n, tier);
		snprintf(store.bucket, sizeof(store.bucket), "%s", b);
		snprintf(store.region, sizeof(store.region), "%s", rg);
		store.timeout_ms = ty_config_int(c, "tier-timeout-ms");
		o.tier_store = &store;
	}

	/* the log server may write to a closed socket; ranks get SIG_DFL back (libuv) */
	signal(SIGPIPE, SIG_IGN);
	rc = exec_run(&o, &err) ? 1 : 0;
	if (rc)
		ty_error("%s", err.msg);
out:
	json_decref(labels);
	hw_names_free(fabric);
	hw_inventory_clear(&inv);
	exec_classifier_free(classifier);
	hw_xid_table_free(xids);
	exec_env_free(preflight);
	free(shim);
	free(seccomp);
	free(mounts);
	ty_ed25519_key_free(log_pubkey);
	ty_ed25519_key_free(dispatch_key);
	memset(node_key, 0, sizeof(node_key));
	memset(&store, 0, sizeof(store));
	ty_config_free(c);
	return rc;
}
