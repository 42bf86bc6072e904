/*
 * trainyard-executor: the node daemon that turns dispatch messages into
 * supervised rank processes and reports their fate.
 *
 * The first half of this header is pure (no loop, no broker) and unit
 * tested: launch checks, the environment contract, failure classification,
 * labels, the dedupe window, finished attempts, the state file, log tails,
 * process groups and attempts' GPU telemetry.
 * The second half is the daemon's cross-file internals (exec__*).
 *
 * Ownership: "new" results are the caller's to free with the named
 * function; "borrowed" arguments are only read during the call.
 */
#ifndef TY_EXEC_H
#define TY_EXEC_H

#include "hw.h"
#include "launch.h"
#include "lifecycle.h"
#include "proto.h"
#include "runtime.h"
#include "ty_buf.h"
#include "ty_err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>
#include <uv.h>

#define EXEC_FINISHED_MAX 256	/* finished attempts kept and heartbeated */
#define EXEC_DEDUPE_WINDOW 4096 /* dispatch keys remembered */
#define EXEC_TAIL_DEFAULT 100
#define EXEC_TAIL_MAX 10000
#define EXEC_TAIL_MAX_BYTES (8u << 20) /* bytes one tail reply may hold */
#define EXEC_CLASS_MAX 16
#define EXEC_MESSAGE_MAX 256

/* A failure class's name, from proto/lifecycle.h's list (docs/dispatch.md): EXEC_CLASS(SYSTEM). */
#define EXEC_CLASS(name) proto_failure_class_name(PROTO_FAILURE_##name)
#define EXEC_EVIDENCE_MAX 1024 /* bytes of attempt_exited.evidence */
/* exit_code of an attempt that Trainyard ended rather than one of its ranks */
#define EXEC_EXIT_NONE (-1)

/* ---- launch messages and the environment contract (launch.c) ---- */

/*
 * CUDA_VISIBLE_DEVICES of a local rank into out: per_gpu the one GPU of
 * that local rank, per_node every GPU comma-separated, "" without GPUs.
 * GPUs are named by the UUIDs inv (borrowed, may be NULL) gives for their
 * indices when it gives one for every GPU named, by index otherwise (a
 * UUID names the same GPU whatever order CUDA enumerates in). When out is
 * too small the list ends at the last whole entry; HW_UUID_MAX per GPU is
 * enough.
 */
void exec_cuda_devices(char *out, size_t outsz, const struct proto_launch *l, int local_rank,
		       const struct hw_inventory *inv);

/*
 * What a rank's environment carries besides the launch: the NCCL variables
 * of the node's fabric (hw_nccl_env) and the contract's checkpoint and
 * progress paths, which other parts of the executor compute.
 */
struct exec_env_extra {
	char *const *fabric;	    /* "NAME=value" array, borrowed; NULL: none */
	const char *checkpoint_dir; /* TRAINYARD_CHECKPOINT_DIR; NULL: not set */
	const char *resume_from;    /* TRAINYARD_RESUME_FROM; NULL: not set */
	const char *progress_file;  /* TRAINYARD_PROGRESS_FILE; NULL: not set */
	/* the node's GPUs, for CUDA_VISIBLE_DEVICES by UUID; NULL: by index */
	const struct hw_inventory *inventory;
	/*
	 * The API's base URL as ranks reach it; with the launch's metrics
	 * token it sets TRAINYARD_METRICS_URL (<api_url>/v1/jobs/<id>/metrics)
	 * and TRAINYARD_METRICS_TOKEN. NULL: neither is set.
	 */
	const char *api_url;
};

/*
 * The environment of one local rank as a new NULL-terminated array of new
 * "NAME=value" strings (free with exec_env_free). Lowest to highest
 * precedence: PATH, HOME and LANG from inherit (an environ-style array,
 * borrowed, may be NULL), extra->fabric (the NCCL variables), the job's
 * env (so a user may override NCCL settings), then the contract
 * (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, NODE_RANK, NNODES, CUDA_VISIBLE_DEVICES (exec_cuda_devices
 * with extra->inventory), CUDA_DEVICE_ORDER=PCI_BUS_ID,
 * TRAINYARD_JOB_ID, TRAINYARD_ATTEMPT, TRAINYARD_NODE_ID, those of
 * extra's paths that are not NULL, and the trial metrics URL and token
 * when both extra->api_url and the launch's token are there). extra (borrowed) may be NULL. Every
 * name appears once; a fabric entry without '=' is TY_EINVAL.
 */
int exec_env_build(char ***out, const struct proto_launch *l, int local_rank, const char *node_id,
		   char *const *inherit, const struct exec_env_extra *extra, struct ty_err *err);
void exec_env_free(char **env);
/* Value of name in env (borrowed from env), or NULL. */
const char *exec_env_get(char *const *env, const char *name);

/*
 * A command line given as a JSON array of strings (the first non-empty)
 * into a new NULL-terminated argv (free with exec_env_free). TY_EINVAL
 * names the fault.
 */
int exec_argv_parse(char ***out, const char *text, struct ty_err *err);

/*
 * The node check a preflight printed: the object of the first line of
 * text (a log) that parses as {"node_check": {...}}, as a new reference,
 * or NULL when there is none.
 */
json_t *exec_preflight_node_check(const char *text);

/*
 * The progress file of a rank, "<dir>/work/progress-<rank>" (dir: the attempt
 * directory), exported as TRAINYARD_PROGRESS_FILE (docs/dispatch.md,
 * "Progress"). False when it does not fit outsz.
 */
bool exec_progress_path(char *out, size_t outsz, const char *dir, int rank);

/* ---- training progress (progress.c, pure) ---- */

#define EXEC_PROGRESS_FILE_MAX 4096	 /* bytes of a progress file read */
#define EXEC_PROGRESS_WINDOW_MS 60000 /* the step rate's window */
#define EXEC_PROGRESS_RING 32

/*
 * What a progress file says: one JSON object {"step": N,
 * "samples_per_second": X} (both optional, other members ignored: the SDK
 * adds "time"), or a bare non-negative integer, the step (for shell jobs);
 * an empty or blank file says nothing (a touch: liveness only). *step -1
 * and *samples -1 when not said. TY_EPARSE naming the fault otherwise.
 */
int exec_progress_parse(int64_t *step, double *samples, const char *buf, size_t len,
			struct ty_err *err);

/* A rank's step as the node has seen it; zeroed: no step yet. */
struct exec_progress {
	bool have_step;
	int64_t step;
	int64_t step_ms;	   /* monotonic: when step took its value */
	int64_t step_wall_ms;	   /* wall clock of the same */
	double samples_per_second; /* the rank's own figure; -1: not given */
	int n, head;		   /* the ring of step changes, oldest at head */
	struct {
		int64_t ms, step;
	} ring[EXEC_PROGRESS_RING];
};

/*
 * Note a reading (step >= 0; samples -1 when not given) at now (monotonic
 * ms) and wall (ms). True when the step changed (or is the first): the
 * rank's liveness. A step lower than before starts the rate afresh.
 */
bool exec_progress_note(struct exec_progress *p, int64_t step, double samples, int64_t now,
			int64_t wall);
/*
 * Steps per second over the last EXEC_PROGRESS_WINDOW_MS at now: from the
 * newest change before the window (else the oldest kept) to now; 0 once
 * the step has not changed for a window; -1 (unknown) before two changes
 * or a window have been seen.
 */
double exec_progress_rate(const struct exec_progress *p, int64_t now);

/* ---- failure classification (classify.c) ---- */

/*
 * Rules map log lines to failure classes: "class<TAB>regex" lines (POSIX
 * ERE, case-sensitive; blank lines and lines starting with # ignored).
 * Rule classes, strongest evidence first (exec_classify has the whole
 * order): hardware, oom, system (an error NCCL, the network or the
 * filesystem reported as the failure itself), user_traceback (the
 * exception line of a Python traceback that is the job's own error, or a
 * CUDA error its kernels caused: verdict user), weak_system (lines that
 * accompany a peer's crash as much as a network fault, such as NCCL WARN:
 * verdict system), user; oom_kill (evidence that the kernel killed a rank
 * for memory; it counts only for a rank killed by a SIGKILL the executor
 * did not send, or exit code 137); not_user (decides nothing: a line it
 * matches is never user_traceback evidence, e.g. a RuntimeError that
 * reports NCCL). executor/classify.conf holds the defaults, built into the
 * binary; operators' rules (--classify-file) are added before them.
 */
enum exec_rule_class {
	EXEC_RULE_HARDWARE,
	EXEC_RULE_OOM,
	EXEC_RULE_SYSTEM,
	EXEC_RULE_USER_TRACEBACK,
	EXEC_RULE_WEAK_SYSTEM,
	EXEC_RULE_USER,
	EXEC_RULE_OOM_KILL,
	EXEC_RULE_NOT_USER,
	EXEC_RULE_CLASSES
};
#define EXEC_CLASSIFY_TAIL_LINES 50 /* log lines per rank the classifier reads */

struct exec_classifier;

/* The default rules text (classify.conf, embedded at build time). */
extern const char exec_classify_defaults[];

/* A new classifier without rules in *out (free with exec_classifier_free). */
int exec_classifier_new(struct exec_classifier **out, struct ty_err *err);
/*
 * Compile the rules in text (borrowed; `name` names it in errors) and
 * append them. TY_EINVAL "name:line: ..." for an unknown class, a missing
 * regex or a regex regcomp rejects (with its error); nothing is added then.
 */
int exec_classifier_add(struct exec_classifier *c, const char *text, const char *name,
			struct ty_err *err);
/* exec_classifier_add of a file's contents; TY_EIO when it cannot be read. */
int exec_classifier_add_file(struct exec_classifier *c, const char *path, struct ty_err *err);
size_t exec_classifier_count(const struct exec_classifier *c);
void exec_classifier_free(struct exec_classifier *c);

/* How the rank that ended an attempt ended. */
struct exec_rank_end {
	int rank;
	int exit_code;	 /* exit status, or 128 + signal */
	int signal;	 /* 0: it exited */
	bool cgroup_oom; /* its memory cgroup's oom_kill count rose while it ran */
};

/* The log tail of one local rank (text borrowed, may be NULL). */
struct exec_rank_log {
	int rank;
	const char *text;
};

struct exec_verdict {
	char failure_class[EXEC_CLASS_MAX];
	char evidence[EXEC_EVIDENCE_MAX + 1];
	/*
	 * Decided by what the ranks wrote or the exit code they chose alone
	 * (attempt_exited.evidence_source "log"), not by what the executor
	 * observed itself (a signal it did not send, a cgroup OOM kill).
	 */
	bool log_only;
};

/*
 * Classify a failed attempt from the rank that ended it (a non-zero exit
 * or a signal the executor did not send) and the log tails of every local
 * rank. In order, the first that applies decides:
 * 1. a hardware rule matching any rank's log;
 * 2. an oom, system, user_traceback, weak_system, then user rule matching
 *    the ending rank's log (so a user's traceback outranks an NCCL WARN
 *    line, and an NCCL error with no such traceback stays system; the user
 *    classes are skipped when it was SIGKILLed or exited 137: something
 *    outside killed it);
 * 3. SIGKILL / exit 137 with cgroup_oom or an oom_kill rule matching its log: oom;
 * 4. the same classes as in 2 on another rank's log (same skip);
 * 5. a signal or exit 137: system; another non-zero exit: user.
 * log_only is false only for a signal and for cgroup_oom (what the
 * executor saw); every rule match and a bare exit code are the job's.
 * Within a class the first rule (in rule order) matching some line wins,
 * and its first matching line (rank order, oldest line first) is the
 * evidence as "rank R: <line>" (cut to EXEC_EVIDENCE_MAX, exec_text_clean);
 * without a line the evidence describes the exit, e.g.
 * "rank 0: exit code 137 (SIGKILL), memory cgroup oom_kill".
 */
void exec_classify(struct exec_verdict *v, const struct exec_classifier *c,
		   const struct exec_rank_end *end, const struct exec_rank_log *logs, size_t nlogs);

/*
 * Make s (in place) printable, valid UTF-8 that JSON can carry: control
 * characters become ' ', bytes outside a valid sequence (a sequence cut at
 * the end included) '?'.
 */
void exec_text_clean(char *s);

/*
 * The evidence of a failed health check (health_check.c): the command, and
 * how it failed from exec_rt_run's status (-1: could not run; 124 or
 * SIGKILL: `timeout` ended it after timeout_ms) and message, cleaned.
 */
void exec_hcheck_evidence(char *out, size_t outsz, const char *command, int status,
			  int64_t timeout_ms, const char *msg);

/*
 * Evidence of a hang or start timeout: head (e.g. "no output or progress
 * for 30 s") followed by the last lines of every rank's log, each rank's
 * share of EXEC_EVIDENCE_MAX kept, as "head; rank R: a | b". Into out
 * (EXEC_EVIDENCE_MAX + 1 bytes).
 */
void exec_evidence_tails(char *out, const char *head, const struct exec_rank_log *logs,
			 size_t nlogs);

/*
 * The file that counts OOM kills of a process's memory cgroup, from the
 * text of /proc/<pid>/cgroup: cgroup v1 "N:memory:/p" (also on a hybrid
 * host) gives /sys/fs/cgroup/memory/p/memory.oom_control, else v2 "0::/p"
 * /sys/fs/cgroup/p/memory.events. False when there is neither or it does
 * not fit outsz.
 */
bool exec_cgroup_oom_file(char *out, size_t outsz, const char *proc_cgroup);
/* The oom_kill count in the text of memory.events or memory.oom_control, or -1. */
long long exec_memory_events_oom_kill(const char *text);

/* ---- labels (labels.c) ---- */

/*
 * "k=v,k=v" into a new JSON object in *out. "" gives {}. Keys are 1–63 of
 * [A-Za-z0-9._/-] starting alphanumeric, values 0–63 of [A-Za-z0-9._-];
 * a key given twice is an error, and so is a `pool` other than "spot" or
 * "on-demand" or an EXEC_LABEL_EXPECTED_GPUS that is not a count
 * (exec_labels_expected_gpus). TY_EINVAL names the fault.
 */
int exec_labels_parse(json_t **out, const char *spec, struct ty_err *err);

/* ---- the expected inventory (labels.c) ---- */

/* The label that gives --expect-gpus (the option wins when both are given). */
#define EXEC_LABEL_EXPECTED_GPUS "trainyard.io/expected-gpus"
#define EXEC_EXPECT_GPUS_MAX 1024
/* register.fault's room: a sentence and the inventory's gpu_fault */
#define EXEC_FAULT_MAX (HW_FAULT_MAX + 64)

/*
 * The GPUs labels (borrowed) say this node should have, in *out: 0 (no
 * expectation) when the label is absent. TY_EINVAL naming the label when
 * its value is not a whole number from 0 to EXEC_EXPECT_GPUS_MAX
 * (exec_labels_parse refuses such labels already).
 */
int exec_labels_expected_gpus(int *out, const json_t *labels, struct ty_err *err);

/*
 * What register's `fault` says of a node that expects expected GPUs (0:
 * no expectation), found found and could not read the GPUs gpu_fault
 * names (the inventory's, borrowed; NULL or "" none), into out ("" when
 * nothing is wrong; cut to outsz): "found 7 of 8 expected GPUs", with
 * "; <gpu_fault>" when some could not be read, or "found 8 GPUs (8
 * expected), but <gpu_fault>". More GPUs than expected is no fault;
 * without an expectation nothing is (the node registers as before).
 */
void exec_expect_fault(char *out, size_t outsz, int expected, size_t found, const char *gpu_fault);

/* ---- dispatch dedupe window (dedupe.c) ---- */

struct exec_dedupe_key {
	int64_t job;
	int64_t attempt;
	int64_t seq;
	int type;
};

/* Zero-initialise. The last EXEC_DEDUPE_WINDOW keys, oldest overwritten. */
struct exec_dedupe {
	struct exec_dedupe_key keys[EXEC_DEDUPE_WINDOW];
	size_t n;
	size_t next;
};

/* True when (job, attempt, type, seq) is in the window; else remembers it. */
bool exec_dedupe_seen(struct exec_dedupe *d, int64_t job, int64_t attempt, int type, int64_t seq);

/*
 * Where a validly signed dispatch message for this node stands against the
 * newest one accepted, (last_epoch, last_seq): EXEC_NEWER acts (and becomes
 * the newest), EXEC_STALE is from an older leader's term, EXEC_REPLAYED
 * is of the current term and not newer (a copy produced again, or one
 * overtaken by a later message: reconciliation re-sends what matters).
 */
enum exec_order { EXEC_NEWER, EXEC_STALE, EXEC_REPLAYED };
enum exec_order exec_dispatch_order(int64_t epoch, int64_t seq, int64_t last_epoch,
				    int64_t last_seq);

/* ---- finished attempts and the state file (state.c) ---- */

struct exec_finished {
	int64_t job;
	int64_t attempt;
	int exit_code;
	char failure_class[EXEC_CLASS_MAX]; /* "" for success */
	char message[EXEC_MESSAGE_MAX];
	char evidence[EXEC_EVIDENCE_MAX + 1]; /* "" when there is none */
	bool log_only; /* the class came from rank output alone: evidence_source "log" */
};

/* Zero-initialise. The last EXEC_FINISHED_MAX finished attempts. */
struct exec_finished_ring {
	struct exec_finished items[EXEC_FINISHED_MAX];
	size_t n;
	size_t head; /* index of the oldest */
};

/* Copies f in, dropping the oldest entry when full. */
void exec_finished_add(struct exec_finished_ring *r, const struct exec_finished *f);
/* Entry i (0 = oldest, borrowed), NULL past the end. */
const struct exec_finished *exec_finished_at(const struct exec_finished_ring *r, size_t i);
/* The entry of (job, attempt) (borrowed), or NULL. */
const struct exec_finished *exec_finished_find(const struct exec_finished_ring *r, int64_t job,
					       int64_t attempt);
/* A new JSON array of the entries, oldest first; NULL on ENOMEM. */
json_t *exec_finished_json(const struct exec_finished_ring *r);

struct exec_running {
	int64_t job;
	int64_t attempt;
	int npgids;
	pid_t *pgids; /* owned */
};

/* What state.json holds. Zero-initialise; exec_state_clear frees. */
struct exec_state {
	int64_t epoch;		      /* newest dispatch epoch seen */
	int64_t seq;		      /* seq of the newest dispatch message acted on, in epoch */
	struct exec_running *running; /* owned; attempts started by that boot */
	size_t nrunning;
	struct exec_finished_ring finished;
};

/*
 * Write state atomically (path.tmp, fsync, rename): epoch and seq of the
 * newest dispatch message acted on (the replay guard), the running
 * attempts (borrowed, nrunning of them) and the finished ring.
 */
int exec_state_write(const char *path, const char *node_id, int64_t epoch, int64_t seq,
		     const struct exec_running *running, size_t nrunning,
		     const struct exec_finished_ring *finished, struct ty_err *err);
/*
 * Read path into s (cleared first). TY_ENOTFOUND when there is no file,
 * TY_EPARSE when it is not a state file (the message says what is wrong).
 */
int exec_state_read(struct exec_state *s, const char *path, struct ty_err *err);
void exec_state_clear(struct exec_state *s);
/* mkdir -p path (mode 0755); TY_EIO names the directory that failed. */
int exec_mkdirs(const char *path, struct ty_err *err);

/* ---- rank logs (tail.c) ---- */

/*
 * Append the last `lines` lines of the log at path to out, reading path.1
 * (the rotated part) first when path alone has fewer lines. A last line
 * without a newline counts. At most max_bytes are returned: a longer tail
 * is cut at the first line boundary inside the last max_bytes.
 * TY_ENOTFOUND when neither file exists, TY_EIO on read errors.
 */
int exec_log_tail(struct ty_buf *out, const char *path, long lines, size_t max_bytes,
		  struct ty_err *err);

/*
 * Parse "/logs/<job>/<attempt>/<rank>" (decimal, no signs or leading
 * zeros, job and attempt >= 1) and a tail value (NULL: the default;
 * 1..EXEC_TAIL_MAX). Returns 0, TY_ENOTFOUND for a path that names no log,
 * TY_EINVAL for a bad tail.
 */
int exec_log_request_parse(int64_t *job, int64_t *attempt, int *rank, long *tail, const char *url,
			   const char *tail_arg);

/* ---- process groups (proc.c) ---- */

/* Number of live (not zombie) processes in process group pgid, from /proc. */
int exec_pgid_live(pid_t pgid);
/*
 * Whether a live member of pgid was started for (job, attempt): its initial
 * environment has TRAINYARD_JOB_ID and TRAINYARD_ATTEMPT with those values.
 * Guards against killing a recycled process group after a restart.
 */
bool exec_pgid_is_attempt(pid_t pgid, int64_t job, int64_t attempt);

/* ---- how ranks ended, through trainyard-rank-shim (rank_exit.c) ---- */

/*
 * <state_dir>/attempts/<job>.<attempt>, where an attempt's ranks log; the
 * executor's. Its subdirectory work/ (EXEC_WORK_DIR) is the ranks' working
 * directory, theirs to write (owned by the team's uid in a container):
 * progress and exit files live there, logs and local_ranks do not.
 */
void exec_attempt_dir(char *out, size_t size, const char *state_dir, int64_t job, int64_t attempt);
#define EXEC_WORK_DIR "work"

/*
 * Whether cmd can be run with env's PATH (as execvp would find it), so that
 * a missing program fails the spawn rather than the rank behind the shim.
 */
int exec_command_check(const char *cmd, char *const *env, struct ty_err *err);
/* <dir>/work/rank-<R>[.preflight].exit, the file the rank's shim writes; -1 when too long. */
int exec_rank_exit_path(char *out, size_t size, const char *dir, int rank, bool preflight);
/* Record in dir that n local ranks of the job are being started. */
int exec_local_ranks_write(const char *dir, int n, struct ty_err *err);
/*
 * How many local ranks of the job in attempt dir ended with exit 0 by
 * their shims' files, when that is every one of them; else 0.
 */
int exec_ranks_finished(const char *dir);
/*
 * How the shim says its rank ended, from an exit file: *code the exit
 * status (128 + signal for a signal) and *sig the signal or 0. False when
 * the file is missing or holds neither "exit N" nor "signal S".
 */
bool exec_rank_exit_read(const char *path, int *code, int *sig);

/* ---- GPU telemetry (telemetry.c) ---- */

/*
 * While attempts with GPUs run, NVML is held and every GPU of the node is
 * read every --telemetry-ms (utilization, memory used, power) on the
 * thread pool; each attempt accounts the readings of its own GPUs. NVML
 * is initialised when the first attempt with GPUs starts and shut down as
 * soon as none runs, so an idle node never blocks a GPU reset.
 */
#define EXEC_TELEMETRY_MS 5000	     /* default --telemetry-ms */
#define EXEC_IDLE_UTIL_PERCENT 5     /* default --idle-util-percent */
#define EXEC_TELEM_ERROR_MAX 160

/* One GPU read once. */
struct exec_gpu_reading {
	bool ok;		/* read; else error says why and nothing else is set */
	double util;		/* percent of the driver's last period with a kernel running */
	int64_t memory_used_mb; /* MiB */
	bool has_power;		/* NVML gave a power reading */
	double power_w;
	char error[EXEC_TELEM_ERROR_MAX]; /* "nvmlDeviceGetUtilizationRates: GPU is lost (error 15)" */
};

/*
 * An attempt's telemetry so far. Zero-initialise; exec_telem_add per
 * sample. Means, peaks and memory are per GPU (one GPU's reading), over
 * every GPU of the attempt read in every sample.
 */
struct exec_telem {
	int64_t samples; /* samples in which at least one of its GPUs was read */
	int gpus;	 /* its GPUs (the most in one sample) */
	double util_sum, util_peak;
	int64_t util_n;
	int64_t memory_peak_mb;
	double power_sum, power_peak;
	int64_t power_n;
	double idle_s;	   /* seconds in which all its GPUs were idle, in total */
	double idle_run_s; /* ... the stretch that lasts now; 0 after a sample that was not */
	double last_util;  /* the last counted sample's mean over its GPUs */
	int64_t last_ms;   /* monotonic ms of the last sample looked at; 0: none */
};

/*
 * Account one sample, taken at now_ms (monotonic), of an attempt's n GPUs
 * (r: one reading per GPU). A sample stands for the time since the one
 * before (NVML's utilization, too, describes the recent past): that time
 * is idle when every one of the n GPUs was read and below idle_pct
 * percent, and added to idle_s and idle_run_s; otherwise idle_run_s goes
 * back to 0. A gap longer than twice interval_ms (the sampler was held up,
 * samples failed) counts as one interval. A sample in which none of the
 * GPUs could be read (lost, NVML gone) is not counted: only its time is
 * spent, as not idle.
 */
void exec_telem_add(struct exec_telem *t, const struct exec_gpu_reading *r, size_t n,
		    int64_t now_ms, double idle_pct, int64_t interval_ms);
/*
 * attempt_exited's `telemetry` as a new object: {"samples", "gpus",
 * "util_mean", "util_peak", "memory_used_peak_mb", "power_mean_w",
 * "power_peak_w", "idle_seconds"} (power 0 when NVML gave none); NULL when
 * no sample was counted (or on ENOMEM).
 */
json_t *exec_telem_json(const struct exec_telem *t);
/*
 * A heartbeat's running entry (borrowed, may be NULL) gets "idle_seconds"
 * (idle_run_s: 0 when its GPUs are busy) and "gpu_util" (the last sample's
 * mean); nothing when no sample was counted.
 */
void exec_telem_running(json_t *entry, const struct exec_telem *t);

struct nvml;
/*
 * Read GPU g through n (NVML initialised): its handle by UUID (by index
 * when the UUID is unknown or NVML lacks the call), utilization, memory
 * used and power (optional: has_power false without it). Never fails:
 * r->ok false and r->error name the call and NVML's error.
 */
void exec_gpu_read(struct exec_gpu_reading *r, const struct nvml *n, const struct hw_gpu *g);

/* One request's result (on the loop). */
struct exec_sample {
	int64_t at_ms; /* monotonic, when the readings were taken */
	bool held;     /* NVML is held after this request */
	char error[TY_ERR_MSG_MAX]; /* NVML could not be loaded or initialised: why; "" none */
	const struct exec_gpu_reading *gpus; /* borrowed; one per inventory GPU, NULL: none read */
	size_t ngpus;
};
typedef void exec_sampler_cb(void *arg, const struct exec_sample *s);

/*
 * The sampler: NVML (lib, dlopened) on libuv's thread pool, one request at
 * a time, so a slow or hung driver call never holds the loop. inv's GPUs
 * are copied. cb (with arg) is called on the loop once per request.
 */
struct exec_sampler;
int exec_sampler_new(struct exec_sampler **out, uv_loop_t *loop, const char *lib,
		     const struct hw_inventory *inv, exec_sampler_cb *cb, void *arg,
		     struct ty_err *err);
/*
 * hold: load and initialise NVML unless held, then read every GPU; !hold:
 * shut NVML down and unload it if held (no GPU read). False, doing
 * nothing, while a request is in flight or when the pool refuses it.
 */
bool exec_sampler_request(struct exec_sampler *s, bool hold);
bool exec_sampler_busy(const struct exec_sampler *s);
/* NVML is initialised, as of the last request that completed. */
bool exec_sampler_held(const struct exec_sampler *s);
/*
 * No more callbacks; NVML is shut down and s freed, at once (blocking) or,
 * with a request in flight, when it completes (the loop must run on). NULL-safe.
 */
void exec_sampler_close(struct exec_sampler *s);

/*
 * trainyard-executor --sample-for: NVML (lib) initialised, every GPU of
 * inv read every interval_ms for seconds, one JSON line per sample on out
 * ({"t_ms", "gpus": [{"gpu", "uuid", "util", "memory_used_mb", "power_w"}
 * or {"gpu", "uuid", "error"}]}), then {"summary": {"samples", "counted"
 * (samples that read at least one GPU), "seconds", "gpus": [{"gpu", "uuid",
 * "name", and exec_telem_json's fields, or "samples": 0}]}}; NVML
 * shut down. TY_EUNAVAIL when NVML cannot be loaded or initialised,
 * TY_ENOTFOUND when no GPU could be read in any sample (the lines are
 * written all the same).
 */
int exec_telemetry_sample_for(FILE *out, const char *lib, const struct hw_inventory *inv,
			      int64_t seconds, int64_t interval_ms, double idle_pct,
			      struct ty_err *err);

/* ---- the daemon (daemon.c) ---- */

struct ty_ed25519_key;
struct exec_opts {
	const char *node_id;
	const char *address;   /* IPv4; register.address and the log server */
	const char *bootstrap; /* host:port list */
	int fake_gpus;	       /* < 0: no simulated inventory */
	/*
	 * CPUs and MiB of memory register reports allocatable (the scheduler
	 * never places more on this node); 0 = not reported (not limited).
	 */
	int64_t cpus, memory_mb;
	/* what register reports (hw.h), borrowed; NULL: no GPU, no HCA. The
	 * fabric watch (fabric_watch.c, on the loop) updates its HCAs' ports. */
	struct hw_inventory *inventory;
	const char *nccl_iface; /* NCCL_SOCKET_IFNAME's interface; "" none */
	const char *sysfs_root; /* where the fabric watch reads ports; NULL: /sys */
	int64_t fabric_check_ms; /* 0: the ports are read at start only */
	char *const *fabric_env; /* NCCL variables for every rank (hw_nccl_env); may be NULL */
	const json_t *labels;	 /* borrowed object */
	/* GPUs the node should have (--expect-gpus or its label); 0: no expectation */
	int expect_gpus;
	const char *state_dir;
	/*
	 * Jobs' checkpoint directories are <checkpoint_root>/job-<id>: shared
	 * storage in a real cluster, so that a retry on another node resumes.
	 */
	const char *checkpoint_root;
	/* hash checkpoints fully here too, not only on rank 0's node (--ckpt-rehash) */
	bool ckpt_rehash;
	int64_t heartbeat_ms;
	int64_t progress_ms; /* --progress-ms: progress in a heartbeat at most this often */
	int64_t fetch_wait_ms; /* fetch.wait.max.ms of the dispatch consumer */
	int64_t register_ms;
	int64_t kill_grace_ms;
	/*
	 * Self-fencing: when no heartbeat was delivered to the broker for this
	 * long, stop every attempt (SIGTERM, SIGKILL after kill_grace_ms): a
	 * partitioned node cannot hear the kill that follows its loss. 0: never.
	 */
	int64_t fence_ms;
	int log_port; /* 0: any free port */
	int64_t log_max_bytes;
	/* verifies the API's log credentials (--log-pubkey; borrowed, required) */
	const struct ty_ed25519_key *log_pubkey;
	/* spot notices (spot.c); spot_provider EXEC_SPOT_NONE: no poller */
	int spot_provider;    /* enum exec_spot_provider */
	const char *spot_url; /* metadata base URL */
	int64_t spot_poll_ms;
	int64_t spot_timeout_ms;
	const struct exec_classifier *classifier; /* borrowed; failure classes */
	/*
	 * Health checks the scheduler asks for (health_check.c): a shell
	 * command (NULL: none), its time limit, and how long a verdict stands.
	 */
	const char *health_check_command;
	int64_t health_check_timeout_ms;
	int64_t health_check_interval_ms;
	/* argv of the preflight run as every local rank (launch `preflight`) */
	char *const *preflight_command;
	/* the API's base URL for ranks' trial metrics (TRAINYARD_METRICS_URL); NULL: none */
	const char *api_url;
	/* checkpoint tiering's object store (--tier-*); NULL: none, tier jobs keep all locally */
	const struct exec_objstore *tier_store;
	/* trainyard-rank-shim, the parent of every rank (rank_shim.c) */
	const char *rank_shim;
	/*
	 * Containers (runtime.h): NULL runtime means --isolation none, ranks
	 * run on the host as the executor's user (docs/security.md).
	 */
	const struct exec_rt_opts *runtime;
	const struct exec_rt_mount *data_mounts; /* read-only in every container */
	size_t ndata_mounts;
	const char *device_dir; /* where GPU and RDMA device nodes are looked up (/dev) */
	int64_t pids_limit;	/* per attempt; 0: none */
	int64_t shm_mb;		/* /dev/shm; 0: half the attempt's memory (64 MiB without) */
	const char *seccomp;	/* the containers' linux.seccomp profile, JSON text */
	const char *image_cache; /* where images are unpacked, one directory per manifest digest */
	int warm_containers;	 /* created ahead for host-root attempts (warm.c); 0: none */
	/* the scheduler's public key: only dispatch messages it signed act (borrowed) */
	const struct ty_ed25519_key *dispatch_key;
	/* this node's key (proto_node_key): the MAC of every message it sends */
	const char *node_key;
	/*
	 * The health watch (health_watch.c): NVML from nvml_library (the
	 * inventory's), counters read every health_check_ms (0: off), Xids
	 * judged by xids (borrowed); port_rate_low below expect_port_gbps (0:
	 * not checked) from the fabric watch.
	 */
	const char *nvml_library;
	int64_t health_check_ms;
	const struct hw_xid_table *xids;
	double expect_port_gbps;
	/* GPU telemetry (telemetry.c): how often (0: off), the idle threshold */
	int64_t telemetry_ms;
	int idle_util_pct;
};

/* ---- the health watch (health_watch.c) ---- */

struct exec_health;
struct exec_health_opts {
	const char *nvml;			/* the library; NULL: HW_NVML_DEFAULT */
	const struct hw_inventory *inventory;	/* its GPUs are copied at start */
	const struct hw_xid_table *xids;	/* borrowed for the watch's life */
	int64_t check_ms;			/* counters read this often; 0: off */
	struct hw_conditions *conditions;	/* borrowed: where conditions go */
	struct ty_metrics *metrics;		/* DCGM_FI_DEV_XID_ERRORS; may be NULL */
	/* called on the watch's thread with each new condition (borrowed); may be NULL */
	void (*on_new)(void *arg, const struct hw_condition *c);
	void *arg;
};

/*
 * Start the watch over the inventory's GPUs (by UUID): one NVML session
 * (nvmlInit_v2 here, nvmlShutdown in exec_health_stop), an event set for
 * Xid and double-bit ECC events, and a thread that reads every GPU at once
 * and then every check_ms, waiting for events in between. TY_EUNAVAIL with
 * the reason when it cannot run here (check_ms 0, a simulated inventory,
 * no GPU, GPUs not from NVML, NVML that does not load or initialise): the
 * caller logs it and goes on without. TY_ENOMEM, TY_EIO otherwise.
 */
int exec_health_start(struct exec_health **out, const struct exec_health_opts *o,
		      struct ty_err *err);
/* Stop the thread (within one wait slice or pass) and shut NVML down. NULL-safe. */
void exec_health_stop(struct exec_health *h);
/*
 * Ask for a pass now: the ticket is done (exec_health_synced) once a pass
 * that began after this call has ended.
 */
uint64_t exec_health_sync_request(struct exec_health *h);
bool exec_health_synced(struct exec_health *h, uint64_t ticket);
/* How many GPUs it watches. */
size_t exec_health_gpus(const struct exec_health *h);

/*
 * Run until SIGTERM or SIGINT, then stop every attempt, flush and return 0.
 * Fails early (before serving) on a bad state file, log server or broker
 * client setup.
 */
int exec_run(const struct exec_opts *o, struct ty_err *err);

/* ---- daemon internals ---- */

struct exec;
struct exec_attempt;

struct exec_rank {
	struct exec_attempt *a;
	int local;
	int rank;
	pid_t child; /* what was spawned (the shim, or the runtime's exec), waited for */
	uv_pipe_t out; /* the rank's stdout and stderr */
	bool spawned;
	bool exited;
	bool out_open;
	pid_t pid; /* == its process group */
	bool group_gone; /* a look found no member of its group left: never signal it again */
	int exit_code;
	int signal;
	int log_fd;
	int64_t log_size;
	int64_t last_alive_ms; /* monotonic: last sign of life (below); 0: none */
	int64_t last_output_ms; /* monotonic: last output; 0: none */
	struct timespec progress_mtime; /* of its progress file when last looked at */
	struct exec_progress progress;	/* once it has a step, only a step change is life */
	bool progress_warned;		/* a bad progress file was logged at warning level */
	char *pid_path; /* owned; in a container: where the runtime writes its host pid */
	long long oom_kills;	 /* its memory cgroup's oom_kill count at spawn; -1: unknown */
	char memory_events[512]; /* the file with that count, "" if unknown */
	bool cgroup_oom;	 /* the count rose by the time it died */
	char log_path[4096];
	char rbuf[65536];
};

enum exec_phase {
	EXEC_PHASE_VERIFY,    /* the resume checkpoint is verified on the thread pool */
	EXEC_PHASE_PREFLIGHT, /* ranks are the preflight command */
	EXEC_PHASE_RUN,	      /* ranks are the job's command */
};

enum exec_attempt_state {
	EXEC_RUNNING,  /* ranks live, none failed */
	EXEC_STOPPING, /* SIGTERM sent, SIGKILL at the grace deadline */
	EXEC_REAPING,  /* every rank exited; waiting for its groups and pipes */
	EXEC_DONE,     /* reported; closing handles */
};

struct exec_attempt {
	struct exec *x;
	struct exec_attempt *next;
	int64_t job;
	int64_t attempt;
	enum exec_attempt_state state;
	int nranks;
	struct exec_rank *ranks; /* owned */
	char dir[4096];
	int64_t default_grace_ms;
	uv_timer_t stop_timer;	      /* SIGKILL escalation, then reaping ticks */
	uv_timer_t runtime_timer;     /* max_runtime_seconds */
	uv_timer_t live_timer;	      /* hang and start timeouts */
	int64_t started_ms;	      /* monotonic, at launch */
	int64_t hang_timeout_ms;      /* 0: off */
	int64_t start_timeout_ms;     /* 0: off */
	bool started;		      /* every rank showed a sign of life (or exited 0) */
	int classify_rank;	      /* index of the rank whose failure ended it; -1: none */
	int handles;		      /* open uv handles; freed when 0 after EXEC_DONE */
	int64_t reap_deadline;	      /* monotonic ms */
	struct exec_finished outcome; /* set by the first cause of the end */
	bool have_outcome;
	int checkpoint_signal;	   /* sent on a `checkpoint` (preemption); 0: none yet */
	char ckpt_dir[4096];	   /* the job's TRAINYARD_CHECKPOINT_DIR */
	char *resume_from;	   /* owned; the newest checkpoint that verified, NULL = none */
	json_t *resume;		   /* owned; exec_ckpt_newest's report, for attempt_running */
	struct proto_launch launch; /* owned; moved in from the launch message */
	enum exec_phase phase;
	int64_t phase_ms; /* monotonic: when the current phase began */
	int64_t progress_sent_ms; /* monotonic: its progress last went in a heartbeat; 0: never */
	/* the checkpoint watch (handshake, checkpoint_written, retention) */
	uv_timer_t ckpt_timer;
	bool ckpt_busy;		  /* a scan runs on the thread pool */
	bool rank0;		  /* this node runs rank 0: periodic reports and retention */
	int64_t ckpt_examined;	  /* newest step looked at (or reported at start); -1: none */
	int64_t ckpt_signal_step; /* newest complete step when the signal was sent; -1: none */
	int64_t ckpt_stop_at;	  /* monotonic: stop by then after the signal; 0: no limit */
	int64_t ckpt_wait_ms;	  /* that wait, for the message */
	int64_t *ckpt_valid;	  /* owned; steps known to verify (retention needs no rehash) */
	int64_t tier_retry_at;	  /* monotonic: retry a failed move to the store then; 0: none */
	int64_t tier_backoff_ms;  /* the wait after the last failure (doubled, at most 5 min) */
	int64_t ckpt_local_bytes; /* as last reported in checkpoint_tier (0 at first) */
	int64_t ckpt_store_bytes;
	size_t nckpt_valid;
	uv_work_t *work; /* the thread-pool request in flight, NULL: none */
	/* preflight */
	struct exec_rank *pre;	  /* owned; the preflight processes once the job's ranks run */
	int pre_failed;		  /* local index of the preflight rank that failed; -1: none */
	json_t *preflight_result; /* owned; the node_check a preflight printed, NULL: none */
	/* the container (runtime.h); NULL runtime in the options: none */
	bool contained;
	char ctr_id[EXEC_RT_ID_MAX];
	pid_t ctr_init; /* the container's init (our child: we are a subreaper); 0: none */
	struct exec_rt_spec rt; /* uid, gid and limits, for each rank's process.json */
	char ctr_events[512];	/* its cgroup's memory events file; "": unknown */
	long long ctr_ooms;	/* the oom_kill count there at creation; -1: unknown */
	char workdir[4096];	/* <dir>/work: the ranks' working directory, theirs to write */
	bool job_fault; /* it failed for the job's or the launch's reason: node_fault false */
	/* health: conditions first seen since started_wall_ms are this attempt's to suffer */
	int64_t started_wall_ms;
	json_t *condition;	/* owned; the fatal condition that made it hardware, NULL: none */
	int health_wait;	/* 0: not asked, 1: waiting for a pass of the watch, 2: done */
	uint64_t health_ticket;
	int64_t health_deadline; /* monotonic */
	struct exec_telem telem; /* its GPUs' telemetry so far (telemetry.c) */
};

/* ---- container specs (container_spec.c) and warm containers (warm.c) ---- */

/* What a container spec points to; mounts owned (exec__ctr_storage_free). */
struct exec_ctr_storage {
	struct exec_rt_mount *mounts;
	struct exec_rt_device devices[EXEC_RT_MAX_DEVICES];
	char *init_argv[3];
	char hostname[256];
	char cgroup[4096];
};
void exec__ctr_storage_free(struct exec_ctr_storage *st);
/*
 * The part of container id's spec that every container of this node
 * shares (the data mounts, the shim, hostname, cgroup, init, pids limit,
 * rlimits; host_root set), in s and st; st->mounts has room for extra more
 * after s->nmounts, and st->devices for the caller's devices.
 */
int exec__ctr_spec_node(struct exec_rt_spec *s, struct exec_ctr_storage *st,
			const struct exec_opts *o, const char *id, size_t extra, struct ty_err *err);

#define EXEC_WARM_MAX 8 /* --warm-containers at most */
struct exec_warm;
/* The limits a warm container has, or an attempt wants; 0: none. */
struct exec_warm_limits {
	int64_t memory_bytes;
	int cpus;
};
int exec__warm_new(struct exec_warm **out);
void exec__warm_free(struct exec_warm *w);
/* Start creating one more warm container if fewer than --warm-containers are ready or coming. */
void exec__warm_fill(struct exec *x);
/*
 * Take a ready warm container whose devices are exactly these (in order):
 * its id, init and limits into id, *init and *has (the caller's to claim
 * or delete). False: none. Either way the next ones are made with want's
 * limits. The caller calls exec__warm_fill once the attempt runs.
 */
bool exec__warm_take(struct exec *x, const struct exec_rt_device *devices, size_t ndevices,
		     const struct exec_warm_limits *want, char id[EXEC_RT_ID_MAX], pid_t *init,
		     struct exec_warm_limits *has);
/*
 * Blocking: bind the attempt's work and checkpoint directories into taken
 * warm container id and change the limits it has to s's memory and CPUs.
 */
int exec__warm_claim(const struct exec_opts *o, const char *id, const char *work,
		     const char *ckpt, const struct exec_rt_spec *s,
		     const struct exec_warm_limits *has, struct ty_err *err);
/* Delete the ready ones (blocking): the executor stops. */
void exec__warm_stop(struct exec *x);

/* ---- the fabric watch (fabric_watch.c) ---- */
struct exec_fabric;
/* Start it (*out NULL when off: no HCA, --fabric-check-ms 0, a simulated node). */
/* Health checks on request (health_check.c). */
struct exec_hcheck;
int exec__hcheck_new(struct exec_hcheck **out, struct exec *x);
/* Frees it, or lets a running check free it when it ends. */
void exec__hcheck_close(struct exec_hcheck *h);
/* Run --health-check-command unless one runs or the last verdict still stands. */
void exec__hcheck_request(struct exec_hcheck *h, const char *reason);
/* The fatal health_check condition of the last failed check (new), NULL when none. */
json_t *exec__hcheck_condition(const struct exec_hcheck *h);
int exec__fabric_start(struct exec_fabric **out, struct exec *x);
void exec__fabric_close(struct exec_fabric *f);
/* The NCCL variables for a launch now: f's after a change, else the options'. */
char *const *exec__fabric_env_of(const struct exec_fabric *f, const struct exec_opts *o);

/* Daemon services the attempts use (daemon.c). */
/* The node's conditions (health.c): heartbeats carry them, fatal ones end attempts. */
struct hw_conditions *exec__conditions(struct exec *x);
/* A sync ticket of the health watch (exec_health_sync_request); false when it is off. */
bool exec__health_sync(struct exec *x, uint64_t *ticket);
bool exec__health_synced(struct exec *x, uint64_t ticket);
char *const *exec__fabric_env(struct exec *x);
/* Send register (with the inventory) on the next cron tick, not at --register-ms. */
void exec__register_soon(struct exec *x);
struct exec_warm *exec__warm(struct exec *x);
bool exec__stopping(struct exec *x);
uv_loop_t *exec__loop(struct exec *x);
const struct exec_opts *exec__opts(struct exec *x);
char *const *exec__inherit(struct exec *x);
/* Produce one event for (job, attempt); takes data. */
void exec__emit(struct exec *x, enum proto_type t, int64_t job, int64_t attempt, json_t *data);
/* An attempt reported attempt_exited: record it (copied) and unlink it. */
void exec__attempt_done(struct exec *x, struct exec_attempt *a);
/* state.json must be written again (e.g. new process groups to kill after a restart). */
void exec__state_changed(struct exec *x);
/* Whether pid is a rank of any attempt that libuv has not reaped yet. */
bool exec__pid_running(struct exec *x, pid_t pid);

/* Attempts (attempt.c). */
/*
 * Start an attempt for l, whose contents move into the attempt (l is
 * zeroed). The resume checkpoint is verified on the thread pool, then the
 * preflight (if asked for) and the job's ranks are spawned; on a failure to
 * start, the attempt ends as system and is still reported. *out is linked
 * by the caller. Only TY_ENOMEM fails.
 */
int exec__attempt_start(struct exec_attempt **out, struct exec *x, struct proto_launch *l);
/* Begin the stop sequence (SIGTERM, SIGKILL after grace_ms) with this outcome
 * unless the attempt already has one. */
void exec__attempt_stop(struct exec_attempt *a, int64_t grace_ms, const char *failure_class,
			int exit_code, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/*
 * The scheduler (or a spot notice) preempts the attempt: send sig to every
 * rank's process group, once (a repeated request changes nothing), and
 * watch the checkpoint directory for a newer manifest: once one verifies,
 * or after wait_ms (< 0: no local limit), the gang is stopped as
 * `preempted`. From then on a rank that ends by a signal or non-zero stops
 * the attempt as `preempted` too. Before the job's ranks run (verification,
 * preflight) it is stopped as `preempted` at once. Returns whether the
 * request was acted on now.
 */
bool exec__attempt_checkpoint(struct exec_attempt *a, int sig, int64_t wait_ms);
/*
 * A fatal condition on the attempt's GPUs (or the node's): stop it with
 * the stop sequence as `hardware`, the condition's evidence (observed by
 * the executor) and the condition in attempt_exited, unless it already has
 * an outcome.
 */
void exec__attempt_hardware(struct exec_attempt *a, const struct hw_condition *c);
/* Whether pid is a live (unreaped) process spawned by this attempt. */
bool exec__attempt_has_pid(const struct exec_attempt *a, pid_t pid);
/* Waits, without blocking, for its spawned children; each that ended is a rank's exit (SIGCHLD). */
void exec__attempt_reap(struct exec_attempt *a);
/*
 * The heartbeat's `progress` of a (new array of proto_progress_rank
 * entries, one per local rank with a step), or NULL when none has one.
 */
json_t *exec__attempt_progress(const struct exec_attempt *a);
/* Close the handles of an attempt that reported; frees it afterwards. */
void exec__attempt_close(struct exec_attempt *a);

/*
 * Log server (logsrv.c), a libmicrohttpd thread reading rank logs and
 * serving GET /metrics from metrics (a thread-safe registry the loop
 * updates; NULL: no /metrics). A rank log is served only against a log
 * credential (proto/logcred.h) that log_pubkey (borrowed, not NULL)
 * verifies, for that log on node_id (copied); refusals are counted in
 * metrics.
 */
struct exec_logsrv;
struct ty_metrics;
int exec__logsrv_start(struct exec_logsrv **out, int *port, const char *address, int port_req,
		       const char *state_dir, const char *node_id,
		       const struct ty_ed25519_key *log_pubkey, struct ty_metrics *metrics,
		       struct ty_err *err);
void exec__logsrv_stop(struct exec_logsrv *s);

/*
 * The telemetry of the daemon (telemetry.c): the timer, the sampler, the
 * attempts' accounts and the GPU series on /metrics. Off (*out NULL, said
 * once in the log) with --telemetry-ms 0 or without GPUs from NVML (a
 * simulated inventory, the CUDA runtime's).
 */
struct exec_telemetry;
int exec__telemetry_start(struct exec_telemetry **out, struct exec *x, struct ty_err *err);
/* Something changed (an attempt with GPUs started or ended): sample or release now. */
void exec__telemetry_poke(struct exec_telemetry *t);
void exec__telemetry_close(struct exec_telemetry *t);
/* Daemon services the telemetry uses (daemon.c). */
struct exec_attempt *exec__attempts(struct exec *x);
struct ty_metrics *exec__metrics(struct exec *x);

/* ---- checkpoints (ckpt.c) ---- */

/*
 * The checkpoint protocol of DESIGN.md §7: a checkpoint is a directory
 * "step-<N>" under the job's checkpoint directory, complete once its
 * MANIFEST.json ({"step": N, "files": [{"path", "size", "sha256"}]}) exists.
 */
#define EXEC_CKPT_MANIFEST "MANIFEST.json"
#define EXEC_CKPT_MANIFEST_MAX (16u << 20) /* bytes a manifest may have */

/* N of a directory name "step-<N>" (decimal, no sign, fits int64), or -1. */
int64_t exec_ckpt_step_of(const char *name);
/*
 * Whether a manifest path stays inside its checkpoint: non-empty, relative,
 * no ".." component, no NUL. (Symbolic links are checked on disk.)
 */
bool exec_ckpt_path_ok(const char *path);
/*
 * Verify the checkpoint directory ckpt: MANIFEST.json parses, its step
 * equals want_step (< 0: any), and every listed file lies inside ckpt (also
 * after resolving links), is a regular file of the listed size and has the
 * listed SHA-256. 0 when it verifies; TY_ENOTFOUND when there is no
 * manifest (torn); TY_EPARSE (bad manifest), TY_EINVAL (a path escapes),
 * TY_EIO (a file is missing or unreadable) or TY_ECONFLICT (size or hash
 * differ) when it is corrupt. The message names the file and the fault.
 */
int exec_ckpt_verify(const char *ckpt, int64_t want_step, struct ty_err *err);
/* What exec_ckpt_check found in a checkpoint that checked out. */
struct exec_ckpt_info {
	char digest[65]; /* lowercase hex SHA-256 of the MANIFEST.json bytes */
	int64_t files, bytes;
};
/*
 * Check the checkpoint directory ckpt: MANIFEST.json's SHA-256 equals
 * want_digest (NULL: any), it parses, its step equals want_step (< 0: any),
 * and every listed file lies inside ckpt, is regular and has the listed
 * size; with hash, its SHA-256 equals the listed one too. *info (optional)
 * is filled when it checks out. TY_ENOTFOUND: no manifest (torn);
 * TY_ECONFLICT: the digest, a size or a hash differs; TY_EPARSE, TY_EINVAL,
 * TY_EIO otherwise; err names the file and what differed.
 */
int exec_ckpt_check(struct exec_ckpt_info *info, const char *ckpt, int64_t want_step,
		    const char *want_digest, bool hash, struct ty_err *err);
/* exec_ckpt_verify that also gives, when it verifies, the number of files and
 * their total size from the manifest (either pointer may be NULL). */
int exec_ckpt_verify_stats(const char *ckpt, int64_t want_step, int64_t *files_out,
			   int64_t *bytes_out, struct ty_err *err);
/*
 * How long checkpoint ckpt took to write, in ms, as its files' times say:
 * from the oldest modification time of a file in it (8 directories deep at
 * most) to the manifest's, written last. 0 when there is nothing but the
 * manifest or the times run backwards; -1 without a manifest. The first
 * file's own writing is not in it: no portable file time says when it began.
 */
int64_t exec_ckpt_write_ms(const char *ckpt);

enum exec_ckpt_state { EXEC_CKPT_UNKNOWN, EXEC_CKPT_VALID, EXEC_CKPT_TORN, EXEC_CKPT_CORRUPT };

/* One step-* directory of a job's checkpoint directory. */
struct exec_ckpt_entry {
	int64_t step;
	char name[64];		    /* "step-<N>" as on disk (leading zeros kept) */
	bool manifest;		    /* MANIFEST.json exists (it is written last) */
	enum exec_ckpt_state state; /* for exec_ckpt_retain_plan */
	bool protect;		    /* never delete (a running attempt resumes from it) */
	bool del;		    /* out: exec_ckpt_retain_plan deletes it */
};

/*
 * The step-* directories under dir (names up to 63 characters), newest
 * step first, as a new array (free()); state UNKNOWN. A missing dir is 0
 * entries; TY_EIO when it cannot be read, TY_ENOMEM.
 */
int exec_ckpt_list(struct exec_ckpt_entry **out, size_t *n, const char *dir, struct ty_err *err);
/* Whether step is one of every keep_every-th that retention keeps (keep_every <= 0: none). */
bool exec_ckpt_every(int64_t step, int keep_every);
/*
 * Retention (pure): e holds n entries newest first with their state known
 * at least until keep of them are VALID (UNKNOWN beyond). Sets del on
 * every entry older than the keep-th valid one whose step is not a
 * multiple of keep_every (> 0; 0: none), and on torn or corrupt ones older
 * than the newest valid one (every keep_every-th too); never on a
 * protected entry, on anything newer than the newest valid one, or
 * anything at all when keep <= 0. UNKNOWN entries before the keep-th valid
 * one are kept.
 */
void exec_ckpt_retain_plan(struct exec_ckpt_entry *e, size_t n, int keep, int keep_every);
/* The bytes of the regular files in dir's step-* directories; -1 when dir cannot be read. */
int64_t exec_ckpt_bytes(const char *dir);
/* rm -rf path (no symbolic link is followed); TY_EIO names it. */
int exec_ckpt_remove(const char *path, struct ty_err *err);
/*
 * Keep the newest keep valid checkpoints under dir, and every keep_every-th
 * step, and delete what exec_ckpt_retain_plan says. Newest first, until
 * keep are valid, each is VALID when its step is in known[] (verified
 * before), TORN without a manifest, else verified now; older ones are TORN
 * without a manifest, else not looked at. protect (may be NULL) is a "dir/<name>"
 * path never deleted. *deleted_out: a new array of the deleted paths;
 * *valid_out (new, free()) the *nvalid_out steps found valid. TY_EIO when
 * something cannot be read or deleted, TY_ENOMEM.
 */
/*
 * Moves one checkpoint (dir/e->name) elsewhere before retention deletes it;
 * non-zero keeps the local copy.
 */
typedef int (*exec_ckpt_move_fn)(void *ud, const char *dir, const struct exec_ckpt_entry *e,
				 struct ty_err *err);
/*
 * With move (may be NULL) every checkpoint retention would delete, but for
 * torn or corrupt ones, is first moved with it, and every keep_every-th
 * too (the store keeps those, not the local disk); one whose move fails
 * is kept, and no later one is tried: the first failure's message is in
 * *move_error (TY_ERR_MSG_MAX), "" when none.
 */
int exec_ckpt_retain(json_t **deleted_out, int64_t **valid_out, size_t *nvalid_out, const char *dir,
		     int keep, int keep_every, const char *protect, const int64_t *known,
		     size_t nknown, exec_ckpt_move_fn move, void *ud, char *move_error,
		     struct ty_err *err);
/*
 * The newest checkpoint under dir that verifies, trying step-* directories
 * from the highest step down. *path_out: a new string "dir/step-<N>", or
 * NULL when none verifies (or dir does not exist). *report_out (may be
 * NULL): a new JSON object {"path": string|null, "step": N|null,
 * "skipped": [{"path", "step", "status": "torn"|"corrupt", "reason"}]}
 * listing every newer checkpoint passed over. Returns 0, or TY_EIO when dir
 * exists but cannot be read, TY_ENOMEM.
 */
int exec_ckpt_newest(char **path_out, json_t **report_out, const char *dir, struct ty_err *err);

/* ---- the object store (objstore.c) and checkpoint tiering (ckpt_tier.c) ---- */

/* An S3-compatible store: path-style URLs endpoint/bucket/key, SigV4-signed. */
struct exec_objstore {
	char endpoint[512]; /* http(s)://host[:port], no trailing '/' */
	char bucket[64];
	char region[64];
	char access_key[256];
	char secret_key[256];
	int64_t timeout_ms; /* connecting, and a transfer stalled that long */
};
/*
 * The access key and secret from the JSON file path:
 * {"access_key_id": "...", "secret_access_key": "..."}, nothing else;
 * TY_EINVAL names the fault.
 */
int exec_objstore_creds_load(struct exec_objstore *s, const char *path, struct ty_err *err);
/*
 * Blocking requests (the thread pool's). TY_EIO when the store cannot be
 * reached or answers 5xx, TY_EPERM for 401/403 (credentials refused),
 * TY_ENOTFOUND for 404; the message names the method, URL and the store's
 * error code.
 */
int exec_objstore_put_file(const struct exec_objstore *s, const char *key, const char *path,
			   struct ty_err *err);
int exec_objstore_put_mem(const struct exec_objstore *s, const char *key, const char *data,
			  size_t len, struct ty_err *err);
/* The object into path (created or truncated). */
int exec_objstore_get_file(const struct exec_objstore *s, const char *key, const char *path,
			   struct ty_err *err);
/* The object as a new NUL-terminated buffer (free()) of at most max bytes. */
int exec_objstore_get_mem(char **out, size_t *len, const struct exec_objstore *s, const char *key,
			  size_t max, struct ty_err *err);
/* The object's size (HEAD). */
int exec_objstore_size(int64_t *size, const struct exec_objstore *s, const char *key,
		       struct ty_err *err);
/* Delete key; one already gone is 0. */
int exec_objstore_delete(const struct exec_objstore *s, const char *key, struct ty_err *err);

/* What the store holds of a job, jobs/<job>/index.json: {"steps": [{step, name, bytes, files}]} */
#define EXEC_TIER_INDEX "index.json"
/*
 * Upload checkpoint dir/name as jobs/<job>/<name>/<path>: its files, then
 * its manifest last; verified (each object's size is the manifest's, the
 * manifest read back has the local one's SHA-256). *bytes_out: the bytes
 * stored, the manifest's included.
 */
int exec_tier_upload(int64_t *bytes_out, const struct exec_objstore *s, int64_t job,
		     const char *dir, const char *name, struct ty_err *err);
/*
 * Download checkpoint name (of step) into dir/name through a hidden
 * dir/.restore-<name>, renamed only once exec_ckpt_verify passes.
 */
int exec_tier_restore(const struct exec_objstore *s, int64_t job, const char *dir,
		      const char *name, int64_t step, struct ty_err *err);
/*
 * When the store's newest checkpoint of job is newer than every local one
 * with a manifest under dir (or there is none), restore it
 * (exec_tier_restore); *restored its step, -1 when nothing was.
 */
int exec_tier_restore_newer(int64_t *restored, const struct exec_objstore *s, int64_t job,
			    const char *dir, struct ty_err *err);
/* Delete an index entry's objects, the manifest first. */
int exec_tier_delete(const struct exec_objstore *s, int64_t job, const json_t *entry,
		     struct ty_err *err);
/* The job's index (a new object; {"steps": []} when the store has none). */
int exec_tier_index_get(json_t **out, const struct exec_objstore *s, int64_t job,
			struct ty_err *err);
int exec_tier_index_put(const struct exec_objstore *s, int64_t job, const json_t *idx,
			struct ty_err *err);
/* The store's retention (pure): steps newest first; del[i] for all but the newest keep and every keep_every-th. */
void exec_tier_prune_plan(bool *del, const int64_t *steps, size_t n, int keep, int keep_every);
/* The bytes an index says the store holds. */
int64_t exec_tier_bytes(const json_t *idx);
/* exec_ckpt_retain's mover (ud a struct exec_tier_ctx): upload, verify, index, prune. */
struct exec_tier_ctx {
	const struct exec_objstore *store;
	int64_t job;
	int keep, keep_every;
	json_t *idx; /* owned; loaded on the first move */
	int moved;   /* out: checkpoints moved */
};
int exec_tier_move(void *ud, const char *dir, const struct exec_ckpt_entry *e, struct ty_err *err);

/* ---- spot notices (spot.c) ---- */

/*
 * A spot node's interruption notice, read from the cloud's metadata
 * endpoint. The parsers are pure: (HTTP status, body, now) in, a notice,
 * "no notice" or an error naming the provider and the fault out. The
 * poller runs one request at a time on the daemon's loop through libcurl's
 * multi_socket API, so a slow or dead endpoint never blocks the loop.
 */
enum exec_spot_provider { EXEC_SPOT_NONE, EXEC_SPOT_AWS, EXEC_SPOT_GCP, EXEC_SPOT_AZURE };

#define EXEC_SPOT_ACTION_MAX 32
#define EXEC_SPOT_DETAIL_MAX 256
#define EXEC_SPOT_BODY_MAX 65536      /* longer metadata answers are an error */
#define EXEC_SPOT_GCP_NOTICE_MS 30000 /* GCP's preemption notice: about 30 s */
#define EXEC_SPOT_POLL_MS 5000	      /* default poll interval */
#define EXEC_SPOT_TIMEOUT_MS 2000     /* per request, connect included */
#define EXEC_SPOT_TOKEN_TTL_S 21600   /* IMDSv2 token TTL asked for (6 h, the maximum) */

struct exec_spot_notice {
	bool notice;
	int64_t deadline_ms;		   /* wall-clock epoch ms; with notice only */
	char action[EXEC_SPOT_ACTION_MAX]; /* terminate, stop, hibernate; preempt; Preempt */
	char detail[EXEC_SPOT_DETAIL_MAX]; /* what the endpoint said, for people */
	/* the same notice polled again has the same id: aws "<action> <time>",
	 * gcp "preempted", azure the EventId (or "Preempt" without one) */
	char id[EXEC_SPOT_DETAIL_MAX];
};

/* "none", "aws", "gcp", "azure" → the provider, or -1. */
int exec_spot_provider_parse(const char *name);
/* The name of p ("none" for anything unknown); a static string. */
const char *exec_spot_provider_name(enum exec_spot_provider p);
/* The provider's real metadata base URL (static), "" for none. */
const char *exec_spot_default_base(enum exec_spot_provider p);

/*
 * Parse one answer of p's notice endpoint (AWS spot/instance-action, GCP
 * instance/preempted, Azure scheduledevents); body is borrowed, len bytes,
 * not necessarily NUL-terminated; now_ms is wall-clock epoch ms. *out is
 * zeroed first. Returns 0 with out->notice telling whether there is one
 * ("no notice" answers: AWS 404, GCP "FALSE", Azure without a Scheduled or
 * Started Preempt event). Errors, never a notice: TY_EAUTH for AWS 401
 * (the token expired), TY_EUNAVAIL for another HTTP status, TY_EPARSE for
 * a malformed answer; the message names the provider and the fault.
 * AWS time is RFC 3339 UTC, Azure NotBefore RFC 1123 ("" = started: the
 * deadline is now); GCP has no time: now + EXEC_SPOT_GCP_NOTICE_MS. Of
 * several Azure Preempt events the earliest deadline wins.
 */
int exec_spot_parse(struct exec_spot_notice *out, enum exec_spot_provider p, long status,
		    const char *body, size_t len, int64_t now_ms, struct ty_err *err);

struct exec_spot_opts {
	enum exec_spot_provider provider;
	const char *base_url; /* copied; no trailing slash needed */
	int64_t poll_ms;
	int64_t timeout_ms;
};

/* Called on the loop for every new notice (a notice seen before is not repeated). */
typedef void exec_spot_cb(void *arg, const struct exec_spot_notice *n);

struct exec_spot;

/*
 * Start polling on loop (first request at once, then every poll_ms); cb
 * gets arg. Request failures are logged (warn once per streak), never
 * fatal. TY_EINVAL for a bad option, TY_ENOMEM, TY_EIO when libcurl or
 * libuv refuse.
 */
int exec_spot_start(struct exec_spot **out, uv_loop_t *loop, const struct exec_spot_opts *o,
		    exec_spot_cb *cb, void *arg, struct ty_err *err);
/*
 * Abort the request in flight and close every handle; s is freed from the
 * last close callback, so the loop must run on. NULL-safe, once.
 */
void exec_spot_close(struct exec_spot *s);

#endif
