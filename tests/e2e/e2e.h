/*
 * A whole Trainyard on this machine for end-to-end tests: the test's own
 * broker, the API (ty_stack), a scheduler and two executors ("node-a" on
 * 127.0.0.2, "node-b" on 127.0.0.3 unless e2e_set_layout says otherwise;
 * a third, "node-c" on 127.0.0.4, when the layout asks for it) with two
 * simulated GPUs each.
 */
#ifndef TY_E2E_H
#define TY_E2E_H

#include "ty_stack.h"

#include <stdbool.h>

#define E2E_MAX_NODES 3

struct e2e {
	const char *bootstrap; /* "@<file>" of the test's broker */
	struct ty_daemon *broker;
	struct ty_daemon *sched[2]; /* [1] only when started with a standby */
	int nodes;		  /* executors: 2, or 3 when the layout asks */
	struct ty_daemon *exec[E2E_MAX_NODES];
	const char *node[E2E_MAX_NODES];    /* "node-a", "node-b", "node-c" */
	const char *address[E2E_MAX_NODES]; /* their --address */
	const char *team;
	const char *token; /* member of team */
	const char *out; /* a fresh directory ranks write into ($OUTDIR) */
};

/*
 * Where the executors run; set it before the first e2e_get (copied).
 * address[i]: executor i's --address (NULL: 127.0.0.2 / 127.0.0.3);
 * prefix[i]: a NULL-terminated argv run in front of executor i, e.g.
 * {"/usr/sbin/ip", "netns", "exec", "ns0", NULL} (NULL: none); args[i]: a
 * NULL-terminated list of more arguments for executor i, after the defaults,
 * so they win over them (e.g. {"--labels", "rack=r1,block=b1,pool=spot",
 * NULL}; NULL: none); sched_args: the same for every scheduler;
 * broker_up: called once the broker has written its bootstrap file, before
 * any executor starts (NULL: nothing); broker_args: more arguments for the
 * broker, after its defaults (e.g. {"--control-fifo", path, NULL}; NULL: none).
 * nodes: how many executors (0: 2; at most E2E_MAX_NODES). nvml: the
 * executors take their GPUs from NVML (--nvml-library in args[i]) instead
 * of --fake-gpus 2.
 */
struct e2e_layout {
	int nodes;
	bool nvml;
	const char *address[E2E_MAX_NODES];
	const char *const *prefix[E2E_MAX_NODES];
	const char *const *args[E2E_MAX_NODES];
	const char *const *sched_args;
	void (*broker_up)(struct e2e *e);
	const char *const *broker_args;
};
void e2e_set_layout(const struct e2e_layout *layout);

/* Brings everything up (once per program) and gives each case a fresh team and $OUTDIR. */
struct e2e *e2e_get(void);
/* Start (or restart) executor i, or scheduler i. */
void e2e_start_executor(struct e2e *e, int i);
void e2e_start_scheduler(struct e2e *e, int i);
/*
 * Start one more scheduler, not kept in e->sched: the arguments of
 * e2e_start_scheduler with --id id, then the layout's sched_args, then
 * extra (NULL-terminated, may be NULL; a later option wins), its log
 * "<name>.log" in the work directory. The caller stops it (or the harness at
 * exit); ty_test_daemon_restart starts it again with the same arguments.
 */
struct ty_daemon *e2e_scheduler_new(struct e2e *e, const char *name, const char *id,
				    const char *const *extra);
/* Wait until every node is registered and ready. */
void e2e_wait_nodes_ready(struct e2e *e);

/* Submit a job (spec fields after "team" and "command" as JSON text) and return its id. */
long long e2e_submit(struct e2e *e, const char *command_json, const char *extra_json);
/* Wait until the job is in one of the comma-separated states; returns the job JSON (new). */
json_t *e2e_wait_state(struct e2e *e, long long job, const char *states, int timeout_ms);
/* GET /v1/jobs/{id}/attempts (new reference). */
json_t *e2e_attempts(struct e2e *e, long long job);
/* Number of files in e->out whose name starts with prefix. */
int e2e_count_files(struct e2e *e, const char *prefix);
/* Contents of e->out/name (scratch string) or NULL. */
const char *e2e_read(struct e2e *e, const char *name);
/* Contents of e->out/name however long (scratch string) or NULL. */
const char *e2e_read_all(struct e2e *e, const char *name);
/* Whether process pid exists and is not a zombie. */
bool e2e_pid_running(long pid);
/* Whether any of the pids listed one per line in e->out files starting with prefix is alive. */
bool e2e_any_alive(struct e2e *e, const char *prefix);

/* A secret a test used, and what it is (named in failures instead of its value). */
struct e2e_secret {
	const char *what;
	const char *value;
};
/*
 * Fails the case for every line of a log that holds one of the n secrets,
 * naming the file, the line number and the secret's `what` (never the
 * value): the logs of every daemon started (broker, schedulers, executors),
 * the API's, and the test PostgreSQL's ($TY_TEST_TMPDIR/log/postgres.log,
 * when readable). Returns how many files it read.
 */
int e2e_assert_no_secret_in_logs(struct e2e *e, const struct e2e_secret *secrets, size_t n);

/*
 * Paths of things the tests run that are not daemons, checked to exist
 * (else the case fails and ends): the repository's rel (e.g.
 * "worker/examples/ddp_train.py", from $TY_SOURCE_DIR) and the built
 * program name (e.g. "trainyard-allreduce", from $TY_BIN_DIR).
 */
const char *e2e_source_path(const char *rel);
const char *e2e_bin_path(const char *name);

#endif
