/*
 * The world of one scheduler integration case: a private trainyard-broker,
 * a fresh migrated database with trainyard-api in front of it, an admin
 * token and a team, trainyard-scheduler processes, and fake executors
 * played by the test over rdkafka (register, heartbeat, job events; the
 * dispatch topic read back and checked).
 *
 * Each case gets its own broker and database, so cases and test programs
 * never see each other's messages or rows. Everything is torn down when the
 * next case starts or the program ends; a scheduler that fails to stop
 * cleanly on SIGTERM or reports a sanitizer error fails the case.
 *
 * Environment: TY_TEST_PG_URL, TY_API_BIN, TY_SCHEDULER_BIN, TY_BROKER_BIN.
 * Strings returned are scratch (they live until the end of the case);
 * setup failures end the case (REQUIRE style).
 */
#ifndef TY_SCHED_FIXTURE_H
#define TY_SCHED_FIXTURE_H

#include "proto.h"

#include <stdbool.h>

struct fx;

/* Broker, database, API, admin token, team. No scheduler yet. */
struct fx *fx_start(void);
/* The database URL of the case (for direct connections). */
const char *fx_db_url(struct fx *f);

/* ---- schedulers ---- */

/*
 * Start trainyard-scheduler --id ID with fast test timings (cycle 200 ms,
 * reconcile 300 ms, resend 30 s, node timeout 10 s, kill grace 7 s,
 * --check-mirror: a divergence of its mirror fails the case) and extra arguments (NULL-terminated, later flags win). Returns its index.
 */
int fx_sched_start(struct fx *f, const char *id, const char *const *extra);
/* SIGTERM; fails the case unless it exits 0 within 10 s, cleanly. */
void fx_sched_stop(struct fx *f, int i);
/* SIGKILL, no questions. */
void fx_sched_kill(struct fx *f, int i);
/* The scheduler's log so far (scratch). */
const char *fx_sched_log(struct fx *f, int i);

/* ---- SQL on the case's database ---- */

/*
 * First column of the first row of a parameterised query (params are a
 * NULL-terminated list of strings), as scratch; NULL for no row or SQL NULL.
 */
const char *fx_q(struct fx *f, const char *sql, ...);
/* Poll a query until it returns want (NULL: SQL NULL or no row), or fail. */
bool fx_wait_at(const char *file, int line, struct fx *f, int timeout_ms, const char *want,
		const char *sql, ...);
#define FX_WAIT(f, ms, want, ...)                                                                  \
	fx_wait_at(__FILE__, __LINE__, (f), (ms), (want), __VA_ARGS__, NULL)
#define FX_Q(f, ...) fx_q((f), __VA_ARGS__, NULL)
/* Decimal text of a number (scratch), for parameters. */
const char *fx_n(long long v);

/* ---- jobs through the API ---- */

/* Submit a job to the case's team; extra is ",'k':v..." JSON (' for ") or NULL. */
long long fx_submit(struct fx *f, const char *extra);
/*
 * Create a team (a unique name from prefix) with nominal GPUs, a borrowing
 * limit (-1: none) and a cohort (NULL: none); returns its name.
 */
const char *fx_team(struct fx *f, const char *prefix, int nominal, int borrowing_limit,
		    const char *cohort);
/* Submit a job to team, as fx_submit. */
long long fx_submit_to(struct fx *f, const char *team, const char *extra);
void fx_cancel(struct fx *f, long long job);
/* An admin request without a body that must answer with status want; its body (scratch). */
const char *fx_api(struct fx *f, const char *method, const char *path, int want);
/* The same with a JSON body (' for "; NULL: none). */
const char *fx_api_body(struct fx *f, const char *method, const char *path, const char *body,
			int want);
/* The same as token (NULL: the admin). */
const char *fx_api_as(struct fx *f, const char *token, const char *method, const char *path,
		      const char *body, int want);
/* A new token of role for team, made by the admin; returns the secret. */
const char *fx_token(struct fx *f, const char *role, const char *team);

/* ---- fake executors ---- */

/* Register node id with gpus GPUs and keep it heartbeating (every 200 ms). */
void fx_node(struct fx *f, const char *id, int gpus);
/* The same with label pool = pool (NULL: no pool label). */
void fx_node_pool(struct fx *f, const char *id, int gpus, const char *pool);
/*
 * The same with allocatable CPUs and MiB of memory in the register (<= 0:
 * left out, as an executor that does not report them).
 */
void fx_node_res(struct fx *f, const char *id, int gpus, long long cpus, long long memory_mb);
void fx_node_res_pool(struct fx *f, const char *id, int gpus, long long cpus,
		      long long memory_mb, const char *pool);
/*
 * Register node id again, as its executor does every --register-ms (same
 * boot, address and zone label; no pool, CPUs or memory), with gpus GPUs
 * and the extra fields (JSON members, ' for ", e.g. "'fault':'...'"; NULL:
 * none), which replace the usual ones.
 */
void fx_node_register(struct fx *f, const char *id, int gpus, const char *extra);
/* Carry preempt_notice (JSON, ' for "; NULL: none) in the node's heartbeats from now on. */
void fx_node_notice(struct fx *f, const char *id, const char *notice);
/*
 * Carry conditions (a JSON array, ' for "; NULL: the field left out, as an
 * older executor does) in the node's heartbeats from now on.
 */
void fx_node_conditions(struct fx *f, const char *id, const char *conditions);
/* The node's current boot id (scratch). */
const char *fx_node_boot(struct fx *f, const char *id);
/*
 * The executor restarted: a new boot id in its heartbeats, nothing running, no notice, no
 * conditions.
 */
void fx_node_reboot(struct fx *f, const char *id);
/* Stop or resume a node's heartbeats. */
void fx_node_beat(struct fx *f, const char *id, bool on);
/* Add (on) or remove an attempt from the running list of the node's heartbeats. */
void fx_node_runs(struct fx *f, const char *id, long long job, long long attempt, bool on);
/*
 * Report in the node's heartbeats that the attempt's GPUs have been idle for
 * idle_seconds (its running entry's idle_seconds) at gpu_util percent; a
 * negative value leaves the field out. The attempt must be in its running list.
 */
void fx_node_idle(struct fx *f, const char *id, long long job, long long attempt,
		  double idle_seconds, double gpu_util);
/*
 * Report in the node's heartbeats the attempt's ranks' progress: progress
 * is the running entry's progress[] as JSON (' for "), NULL to leave it
 * out. The attempt must be in its running list.
 */
void fx_node_progress(struct fx *f, const char *id, long long job, long long attempt,
		      const char *progress);
/* Add a finished entry to the node's heartbeats (as if attempt_exited were lost). */
void fx_node_finished(struct fx *f, const char *id, long long job, long long attempt, int code,
		      const char *cls, const char *message);
/* The same with the classifier's evidence (NULL: none). */
void fx_node_finished_ev(struct fx *f, const char *id, long long job, long long attempt,
			 int code, const char *cls, const char *message, const char *evidence);
/* The same saying who saw the evidence ("log", "executor"; NULL: the field left out). */
void fx_node_finished_src(struct fx *f, const char *id, long long job, long long attempt,
			  int code, const char *cls, const char *message, const char *evidence,
			  const char *src);
/* The same with the condition that decided its class (JSON, ' for "; NULL: none). */
void fx_node_finished_cond(struct fx *f, const char *id, long long job, long long attempt,
			   int code, const char *cls, const char *message, const char *evidence,
			   const char *src, const char *condition);
/* Produce one message from node (data JSON with ' for "; NULL for {}). Returns its seq. */
long long fx_send(struct fx *f, const char *node, const char *type, long long job,
		  long long attempt, const char *data);
/* Produce payload as it is (JSON with ' for ") to topic, partition 0, key node. */
void fx_send_raw(struct fx *f, const char *topic, const char *node, const char *payload);
/*
 * Produce payload (JSON with ' for ") to topic, partition 0, keyed by the node
 * its envelope names, with the MAC of mac_node's key (NULL: no MAC at all):
 * a node speaking for another, or someone without a key.
 */
void fx_send_as(struct fx *f, const char *topic, const char *mac_node, const char *payload);
/* Messages produced so far (a mark for fx_replay). */
int fx_sent_count(struct fx *f);
/* Produce again, byte for byte and to the same partitions, messages [from, to). */
void fx_replay(struct fx *f, int from, int to);
/*
 * Wait until the scheduler has applied and committed everything produced so
 * far (its consumer group's offsets reached the high watermarks).
 */
void fx_sync(struct fx *f, int timeout_ms);

/*
 * The next dispatch message for node of type (and job, when job > 0) not
 * taken before, waiting up to timeout_ms; NULL on timeout. The message is
 * owned by the fixture. Checks it came on the node's partition.
 */
const struct proto_msg *fx_recv(struct fx *f, const char *node, const char *type, long long job,
				int timeout_ms);
/* Poll the dispatch topic for ms milliseconds (to see what else arrives). */
void fx_poll(struct fx *f, int ms);
/* How many matching dispatch messages arrived so far, taken or not (attempt 0: any). */
int fx_count(struct fx *f, const char *node, const char *type, long long job, long long attempt);

/*
 * Act on a launch like an executor: rank_started for every local rank,
 * attempt_running, and list the attempt as running in heartbeats.
 */
void fx_run(struct fx *f, const char *node, const struct proto_msg *launch);
/*
 * End it: rank_exited for every local rank (the last exits with code, the
 * others 0), attempt_exited (code, cls, message), and drop it from running.
 */
void fx_exit(struct fx *f, const char *node, const struct proto_msg *launch, int code,
	     const char *cls, const char *message);
/* The same with more members in attempt_exited's data (",'telemetry':{...}", ' for "). */
void fx_exit_with(struct fx *f, const char *node, const struct proto_msg *launch, int code,
		  const char *cls, const char *message, const char *extra);

#endif
