/*
 * The executor's loop: dispatch messages in, events and node messages out
 * (both Kafka queues wake the loop through one pipe), one cron timer for
 * assignment, register and heartbeat, state.json and offset commits
 * flushed once per loop turn, and the shutdown that stops every attempt.
 */
#include "exec.h"
#include "ty_kafka.h"
#include "ty_log.h"
#include "ty_metrics.h"
#include "ty_time.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CRON_MS 100
#define ASSIGN_RETRY_MS 1000
#define METADATA_TIMEOUT_MS 1000
#define OFFSETS_TIMEOUT_MS 2000
#define CONSUME_BATCH 256 /* messages per loop turn, so timers and exits keep running */
#define FLUSH_TIMEOUT_MS 5000
#define ORPHAN_REGISTER_MS 3000 /* register by then, even if orphans linger */
#define ORPHAN_REPORT_MS 10000	/* orphans are reported by then, whatever is left */
/* a preempted gang gets SIGTERM this long plus its kill grace before a deadline */
#define CKPT_DEADLINE_MARGIN_MS 1000
/* after a checkpoint's grace period the scheduler's kill is waited for this long */
#define CKPT_GRACE_SLACK_MS 2000

struct counters {
	uint64_t malformed;  /* not a message (unknown types included), or not a dispatch type */
	uint64_t stale;	     /* epoch older than the newest seen */
	uint64_t duplicates; /* same (job, attempt, type, seq), or a launch already here */
	uint64_t other_node; /* for another node sharing the partition */
};

struct exec {
	const struct exec_opts *o;
	uv_loop_t loop;
	rd_kafka_t *producer;
	rd_kafka_t *consumer;
	rd_kafka_queue_t *pq;		 /* producer main queue: delivery reports, errors */
	rd_kafka_queue_t *cq;		 /* consumer queue: messages, commit results */
	rd_kafka_topic_t *out_topics[2]; /* events and nodes, known before the first send */
	int kfd[2];			 /* both queues write here when they become non-empty */
	uv_poll_t kpoll;
	uv_timer_t cron;
	uv_timer_t kick;    /* continue a consume batch on the next turn */
	uv_prepare_t flush; /* state.json, then offsets, before the loop blocks */
	uv_signal_t sigterm;
	uv_signal_t sigint;
	uv_signal_t sigchld; /* ranks are spawned without libuv: their exits come here */
	bool handles_open;
	struct exec_logsrv *logsrv;
	char log_url[128];
	char boot_id[40];
	char state_path[4096];
	int64_t seq;
	int64_t epoch;
	int64_t dispatch_seq; /* of the newest dispatch message acted on, in epoch: the replay guard */
	struct exec_finished_ring finished;
	struct exec_dedupe dedupe;
	struct exec_attempt *attempts;
	/* attempts a previous boot left running, killed, reported once gone */
	struct exec_running *orphans;
	size_t norphans;
	int64_t orphan_deadline;
	int64_t orphan_register_by;
	bool register_acked; /* the first register was delivered (or failed) */
	int32_t partition;
	bool assigned;
	bool assign_warned;
	int64_t next_assign;
	int64_t next_register;
	int64_t next_heartbeat;
	int64_t hb_delivered; /* when the broker last acknowledged a heartbeat (mono ms) */
	bool fenced;	      /* --fence-after-ms stopped the attempts; until one gets through */
	bool dirty;
	bool commit_pending;
	int64_t commit_offset;
	int64_t save_warned; /* when a failed save was last logged */
	bool stopping;
	struct counters counters;
	struct exec_spot *spot;		/* NULL without --spot-provider */
	bool preempting;		/* a spot notice came: no new work */
	struct exec_spot_notice notice; /* the newest one */
	struct ty_metrics *metrics;	/* served by the log server; see docs/metrics.md */
	struct exec_warm *warm;		/* warm containers (warm.c) */
	struct exec_fabric *fabric;	/* the fabric watch; NULL: off */
	struct hw_conditions *conditions; /* the node's health conditions (health.c) */
	struct exec_health *health;	/* the health watch; NULL: off */
	uv_async_t health_async;	/* the watch saw a new condition */
	struct exec_hcheck *hcheck;	/* health checks on request */
	struct exec_telemetry *telemetry; /* GPU telemetry (telemetry.c); NULL: off */
};

/* ---- metrics (the registry locks itself; the log server thread reads it) ---- */

#define M_ATTEMPTS "trainyard_executor_attempts_running"
#define M_RANKS "trainyard_executor_ranks_running"
#define M_FINISHED "trainyard_executor_attempts_finished_total"
#define M_SKIPPED "trainyard_executor_dispatch_skipped_total"
#define M_NOTICES "trainyard_executor_spot_notices_total"
#define M_REJECTED "trainyard_executor_rejected_messages_total"

static const char *const skip_reasons[] = {"malformed", "stale", "duplicates", "other_node"};

static int metrics_new(struct exec *x, struct ty_err *err)
{
	static const char *const class_label[] = {"failure_class", NULL};
	static const char *const reason_label[] = {"reason", NULL};
	int rc;

	if (!(x->metrics = ty_metrics_new()))
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((rc = ty_metrics_family(x->metrics, TY_METRIC_GAUGE, M_ATTEMPTS,
				    "Attempts this executor runs now.", NULL, NULL, 0, err)) ||
	    (rc = ty_metrics_family(x->metrics, TY_METRIC_GAUGE, M_RANKS,
				    "Ranks (processes) of the attempts this executor runs now.",
				    NULL, NULL, 0, err)) ||
	    (rc = ty_metrics_family(
		 x->metrics, TY_METRIC_COUNTER, M_FINISHED,
		 "Attempts that ended here, by failure class (\"none\": success).", class_label,
		 NULL, 0, err)) ||
	    (rc = ty_metrics_family(x->metrics, TY_METRIC_COUNTER, M_SKIPPED,
				    "Dispatch messages not acted on, by reason (the heartbeat's"
				    " counters).",
				    reason_label, NULL, 0, err)) ||
	    (rc = ty_metrics_family(x->metrics, TY_METRIC_COUNTER, M_NOTICES,
				    "Spot interruption notices received.", NULL, NULL, 0, err)) ||
	    (rc = ty_metrics_family(x->metrics, TY_METRIC_COUNTER, M_REJECTED,
				    "Dispatch messages refused as unsigned, badly signed or "
				    "replayed, never acted on.",
				    reason_label, NULL, 0, err)))
		return rc;
	for (size_t i = 0; i < sizeof(skip_reasons) / sizeof(skip_reasons[0]); i++)
		ty_metrics_add(x->metrics, M_SKIPPED, (const char *[]){skip_reasons[i]}, 0);
	for (int r = PROTO_AUTHENTIC + 1; r < PROTO_REJECT_COUNT; r++)
		ty_metrics_add(x->metrics, M_REJECTED,
			       (const char *[]){proto_reject_name((enum proto_reject)r)}, 0);
	return 0;
}

/* A dispatch message not acted on: the heartbeat counter and the metric. */
static void skipped(struct exec *x, uint64_t *counter, const char *reason)
{
	(*counter)++;
	ty_metrics_add(x->metrics, M_SKIPPED, (const char *[]){reason}, 1);
}

static void count_finished(struct exec *x, const char *failure_class)
{
	const char *cls = failure_class && *failure_class ? failure_class : "none";

	ty_metrics_add(x->metrics, M_FINISHED, (const char *[]){cls}, 1);
}

static void metrics_running(struct exec *x)
{
	int attempts = 0, ranks = 0;

	/* a reported attempt stays listed until its handles close: not counted */
	for (const struct exec_attempt *a = x->attempts; a; a = a->next) {
		if (a->state == EXEC_DONE)
			continue;
		attempts++;
		for (int i = 0; i < a->nranks; i++)
			ranks += !a->ranks[i].exited;
	}
	ty_metrics_set(x->metrics, M_ATTEMPTS, NULL, attempts);
	ty_metrics_set(x->metrics, M_RANKS, NULL, ranks);
}

uv_loop_t *exec__loop(struct exec *x)
{
	return &x->loop;
}

const struct exec_opts *exec__opts(struct exec *x)
{
	return x->o;
}

void exec__register_soon(struct exec *x)
{
	x->next_register = 0; /* the next cron tick */
}

struct hw_conditions *exec__conditions(struct exec *x)
{
	return x->conditions;
}

bool exec__health_sync(struct exec *x, uint64_t *ticket)
{
	if (!x->health)
		return false;
	*ticket = exec_health_sync_request(x->health);
	return true;
}

bool exec__health_synced(struct exec *x, uint64_t ticket)
{
	return !x->health || exec_health_synced(x->health, ticket);
}

char *const *exec__fabric_env(struct exec *x)
{
	return exec__fabric_env_of(x->fabric, x->o);
}

struct exec_attempt *exec__attempts(struct exec *x)
{
	return x->attempts;
}

struct ty_metrics *exec__metrics(struct exec *x)
{
	return x->metrics;
}

struct exec_warm *exec__warm(struct exec *x)
{
	return x->warm;
}

bool exec__stopping(struct exec *x)
{
	return x->stopping;
}

void exec__state_changed(struct exec *x)
{
	x->dirty = true;
}

char *const *exec__inherit(struct exec *x)
{
	return environ;
}

bool exec__pid_running(struct exec *x, pid_t pid)
{
	for (struct exec_attempt *a = x->attempts; a; a = a->next)
		if (exec__attempt_has_pid(a, pid))
			return true;
	return false;
}

/* ---- producing ---- */

static void emit(struct exec *x, enum proto_type t, int64_t job, int64_t attempt, json_t *data,
		 void *opaque)
{
	struct proto_msg m = {.type = t, .job = job, .attempt = attempt, .data = data};
	struct ty_err err = {0};
	const char *key = x->o->node_id;
	char *buf = NULL, jobkey[24], mac[PROTO_NODE_KEY_LEN + 1];
	rd_kafka_resp_err_t e;
	size_t len;

	if (!data) {
		ty_error("cannot build a '%s' message: out of memory", proto_type_name(t));
		return;
	}
	m.seq = x->seq++;
	m.ts = ty_wall_ms();
	snprintf(m.node, sizeof(m.node), "%s", x->o->node_id);
	if (proto_encode(&buf, &len, &m, &err)) {
		ty_error("cannot encode a '%s' message: %s", proto_type_name(t), err.msg);
		goto out;
	}
	if (job) {
		/* one job's events share a key, so they stay in order */
		snprintf(jobkey, sizeof(jobkey), "%lld", (long long)job);
		key = jobkey;
	}
	/* the scheduler takes only what this node's key vouches for */
	proto_mac(mac, x->o->node_key, buf, len);
	e = rd_kafka_producev(x->producer, RD_KAFKA_V_TOPIC(proto_type_topic(t)),
			      RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(buf, len),
			      RD_KAFKA_V_HEADER(PROTO_HDR_MAC, mac, PROTO_NODE_KEY_LEN),
			      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(opaque),
			      RD_KAFKA_V_END);
	if (e)
		ty_error("cannot produce a '%s' message for job %lld: %s", proto_type_name(t),
			 (long long)job, rd_kafka_err2str(e));
	else
		ty_debug("sent '%s' job %lld attempt %lld", proto_type_name(t), (long long)job,
			 (long long)attempt);
out:
	free(buf);
	json_decref(data);
}

void exec__emit(struct exec *x, enum proto_type t, int64_t job, int64_t attempt, json_t *data)
{
	emit(x, t, job, attempt, data, NULL);
}

/* An attempt that never ran (or ran in a previous boot) ends here and now. */
static void finish_now(struct exec *x, int64_t job, int64_t attempt, int exit_code,
		       const char *failure_class, const char *message)
{
	struct exec_finished f = {.job = job, .attempt = attempt, .exit_code = exit_code};

	snprintf(f.failure_class, sizeof(f.failure_class), "%s", failure_class);
	snprintf(f.message, sizeof(f.message), "%s", message);
	exec_finished_add(&x->finished, &f);
	count_finished(x, f.failure_class);
	x->dirty = true;
	exec__emit(x, PROTO_ATTEMPT_EXITED, job, attempt,
		   json_pack("{s:i, s:s, s:s}", "exit_code", f.exit_code, "failure_class",
			     f.failure_class, "message", f.message));
	ty_info("job %lld attempt %lld ended: %s (%s)", (long long)job, (long long)attempt, message,
		*failure_class ? failure_class : "succeeded");
}

/*
 * Attempts the previous boot left running: kill what is left of their
 * groups now (only groups still carrying their environment: ids are
 * recycled). They stay "running" until reported, see report_orphans().
 */
static void kill_orphans(struct exec *x, struct exec_state *st)
{
	x->orphans = st->running;
	x->norphans = st->nrunning;
	st->running = NULL;
	st->nrunning = 0;
	x->orphan_deadline = ty_mono_ms() + ORPHAN_REPORT_MS;
	x->orphan_register_by = ty_mono_ms() + ORPHAN_REGISTER_MS;
	for (size_t i = 0; i < x->norphans; i++) {
		struct exec_running *r = &x->orphans[i];
		char dir[4096], text[160];
		int killed = 0, n;

		if (exec_finished_find(&x->finished, r->job, r->attempt)) {
			r->job = 0; /* reported by the boot before */
			continue;
		}
		/* its ranks finished while no executor watched: never run it twice */
		exec_attempt_dir(dir, sizeof(dir), x->o->state_dir, r->job, r->attempt);
		if ((n = exec_ranks_finished(dir)) > 0) {
			snprintf(text, sizeof(text),
				 "all %d local rank(s) exited with code 0 (while the executor was "
				 "down)",
				 n);
			finish_now(x, r->job, r->attempt, 0, "", text);
		}
		for (int k = 0; k < r->npgids; k++) {
			if (!exec_pgid_is_attempt(r->pgids[k], r->job, r->attempt))
				r->pgids[k] = 0; /* gone, or someone else's by now */
			else if (kill(-r->pgids[k], SIGKILL) == 0)
				killed++;
		}
		ty_info("job %lld attempt %lld was left running by the previous boot: killed %d "
			"process group(s)",
			(long long)r->job, (long long)r->attempt, killed);
	}
}

static bool orphan_pending(struct exec *x, int64_t job, int64_t attempt)
{
	for (size_t i = 0; i < x->norphans; i++)
		if (x->orphans[i].job == job && x->orphans[i].attempt == attempt)
			return true;
	return false;
}

/* Whether nothing is left of an orphan's groups, zombies included. */
static bool orphan_gone(struct exec_running *r)
{
	bool gone = true;

	for (int k = 0; k < r->npgids; k++) {
		if (r->pgids[k] && kill(-r->pgids[k], 0) && errno == ESRCH)
			r->pgids[k] = 0; /* empty: its number may be someone else's next */
		if (!r->pgids[k])
			continue;
		gone = false;
		/* the start-up looked at its members (/proc, once): ours, or zeroed */
		kill(-r->pgids[k], SIGKILL);
	}
	return gone;
}

/*
 * This boot registers only once what the previous boot left is gone (or
 * after ORPHAN_REGISTER_MS): the scheduler retries an attempt as soon as
 * it sees the new boot id, and the retry must not meet the old processes
 * (nor their GPU memory).
 */
static bool orphans_gone(struct exec *x)
{
	for (size_t i = 0; i < x->norphans; i++)
		if (x->orphans[i].job && !orphan_gone(&x->orphans[i]))
			return false;
	return true;
}

/*
 * Report orphans as "executor restarted" once this boot's register is out
 * (so the scheduler sees the new boot before it retries them) and their
 * groups are entirely gone; or at the deadline.
 */
static void report_orphans(struct exec *x)
{
	int64_t now = ty_mono_ms();

	if (!x->register_acked && now < x->orphan_deadline)
		return;
	for (size_t i = 0; i < x->norphans; i++) {
		struct exec_running *r = &x->orphans[i];

		if (!r->job || (!orphan_gone(r) && now < x->orphan_deadline))
			continue;
		if (!exec_finished_find(&x->finished, r->job, r->attempt))
			finish_now(x, r->job, r->attempt, EXEC_EXIT_NONE, EXEC_CLASS(SYSTEM),
				   "executor restarted");
		r->job = 0;
	}
}

/* register's cpus and memory_mb, when this node reports them (docs/dispatch.md) */
static json_t *with_capacity(json_t *data, const struct exec_opts *o)
{
	if (data && o->cpus > 0)
		json_object_set_new(data, "cpus", json_integer((json_int_t)o->cpus));
	if (data && o->memory_mb > 0)
		json_object_set_new(data, "memory_mb", json_integer((json_int_t)o->memory_mb));
	return data;
}

/* The node's current conditions (proto/proto.h), new; NULL on ENOMEM. */
static json_t *conditions_json(struct exec *x)
{
	json_t *a = hw_conditions_json(x->conditions), *c = exec__hcheck_condition(x->hcheck);

	if (a && c)
		json_array_append_new(a, c);
	else
		json_decref(c);
	return a;
}

/*
 * register's expected_gpus and fault (null: as expected), only when the
 * node expects GPUs: the scheduler keeps a node with a fault out of
 * placement. From the inventory as it is now, at every register.
 */
static json_t *with_expectation(json_t *data, const struct exec_opts *o,
				const struct hw_inventory *inv)
{
	char fault[EXEC_FAULT_MAX];

	if (!data || o->expect_gpus <= 0)
		return data;
	exec_expect_fault(fault, sizeof(fault), o->expect_gpus, inv->ngpus, inv->gpu_fault);
	json_object_set_new(data, "expected_gpus", json_integer(o->expect_gpus));
	json_object_set_new(data, "fault", *fault ? json_string(fault) : json_null());
	return data;
}

static void send_register(struct exec *x)
{
	const struct exec_opts *o = x->o;
	const struct hw_inventory none = {0}, *inv = o->inventory ? o->inventory : &none;
	json_t *inventory = hw_inventory_json(inv);

	if (!inventory) {
		ty_error("cannot build a register message: out of memory");
		return;
	}
	/* finished: what the previous boot's ranks did while no executor watched (kill_orphans) */
	emit(x, PROTO_REGISTER, 0, 0,
	     with_expectation(
		 with_capacity(json_pack("{s:s, s:I, s:O, s:s, s:s, s:b, s:o, s:o*, s:s, s:o*}",
					 "address", o->address, "gpus", (json_int_t)inv->ngpus,
					 "labels", o->labels, "boot_id", x->boot_id, "log_url",
					 x->log_url, "simulated", inv->simulated, "inventory",
					 inventory, "finished", exec_finished_json(&x->finished),
					 "isolation", o->runtime ? "runc" : "none", "conditions",
					 conditions_json(x)),
			       o),
		 o, inv),
	     &x->register_acked);
}


/* The data of a preempt_notice for the newest spot notice (new). */
static json_t *notice_json(struct exec *x)
{
	return json_pack("{s:I, s:s, s:s, s:s}", "deadline", (json_int_t)x->notice.deadline_ms,
			 "provider",
			 exec_spot_provider_name((enum exec_spot_provider)x->o->spot_provider),
			 "action", x->notice.action, "detail", x->notice.detail);
}

static void send_heartbeat(struct exec *x)
{
	json_t *running = json_array(), *finished = exec_finished_json(&x->finished), *hb;
	int64_t now = ty_mono_ms();

	for (struct exec_attempt *a = x->attempts; running && a; a = a->next) {
		json_t *e = json_pack("{s:I, s:I}", "job", (json_int_t)a->job, "attempt",
				      (json_int_t)a->attempt);
		/* once a rank gave a step, at most every --progress-ms */
		json_t *p = !a->progress_sent_ms || now - a->progress_sent_ms >= x->o->progress_ms
				? exec__attempt_progress(a)
				: NULL;

		exec_telem_running(e, &a->telem); /* idle_seconds, gpu_util once sampled */
		if (e && p) {
			json_object_set_new(e, "progress", p);
			a->progress_sent_ms = now;
		} else {
			json_decref(p);
		}
		json_array_append_new(running, e);
	}
	for (size_t i = 0; running && i < x->norphans; i++)
		if (x->orphans[i].job)
			json_array_append_new(
			    running, json_pack("{s:I, s:I}", "job", (json_int_t)x->orphans[i].job,
					       "attempt", (json_int_t)x->orphans[i].attempt));
	if (!running || !finished) {
		json_decref(running);
		json_decref(finished);
		ty_error("cannot build a heartbeat: out of memory");
		return;
	}
	hb = json_pack("{s:s, s:o, s:o, s:{s:I, s:I, s:I, s:I}, s:o*}", "boot_id", x->boot_id,
		       "running", running, "finished", finished, "counters", "malformed",
		       (json_int_t)x->counters.malformed, "stale", (json_int_t)x->counters.stale,
		       "duplicates", (json_int_t)x->counters.duplicates, "other_node",
		       (json_int_t)x->counters.other_node, "conditions", conditions_json(x));
	/* repeated while it lasts: a lost preempt_notice costs one heartbeat */
	if (hb && x->preempting)
		json_object_set_new(hb, "preempt_notice", notice_json(x));
	/* its delivery report says the broker can hear us (--fence-after-ms) */
	emit(x, PROTO_HEARTBEAT, 0, 0, hb, &x->hb_delivered);
}

/*
 * --fence-after-ms: no heartbeat reached the broker for that long, so the
 * scheduler is about to declare this node lost and retry its attempts
 * elsewhere, and any kill it sends will not get here. Stop them now, so the
 * gang never runs twice; they are reported once the broker is reachable.
 */
static void fence_check(struct exec *x, int64_t now)
{
	int stopped = 0;

	if (!x->o->fence_ms || now - x->hb_delivered < x->o->fence_ms)
		return;
	for (struct exec_attempt *a = x->attempts; a; a = a->next)
		if (a->state == EXEC_RUNNING) {
			exec__attempt_stop(a, x->o->kill_grace_ms, EXEC_CLASS(SYSTEM),
					   EXEC_EXIT_NONE,
					   "fenced: no heartbeat reached the broker for %lld ms",
					   (long long)(now - x->hb_delivered));
			stopped++;
		}
	if (!stopped)
		return; /* nothing runs: nothing to fence (a late first heartbeat, orphans) */
	ty_warn("no heartbeat reached the broker for %lld ms (--fence-after-ms %lld): "
		"stopped %d attempt(s)",
		(long long)(now - x->hb_delivered), (long long)x->o->fence_ms, stopped);
	x->fenced = true;
}

/* ---- attempts ---- */

static struct exec_attempt *find_attempt(struct exec *x, int64_t job, int64_t attempt)
{
	for (struct exec_attempt *a = x->attempts; a; a = a->next)
		if (a->job == job && a->attempt == attempt)
			return a;
	return NULL;
}

static void maybe_close(struct exec *x);

void exec__attempt_done(struct exec *x, struct exec_attempt *a)
{
	for (struct exec_attempt **p = &x->attempts; *p; p = &(*p)->next)
		if (*p == a) {
			*p = a->next;
			break;
		}
	exec_finished_add(&x->finished, &a->outcome);
	count_finished(x, a->outcome.failure_class);
	x->dirty = true;
	exec__attempt_close(a);
	exec__telemetry_poke(x->telemetry); /* NVML is let go at once when nothing else runs */
	if (x->stopping)
		maybe_close(x);
}

/* ---- dispatch ---- */

/* Stop a with the first fatal condition on its GPUs (or of the node), if there is one. */
static void hardware_check(struct exec *x, struct exec_attempt *a)
{
	struct hw_condition c;

	if (a->state == EXEC_RUNNING &&
	    hw_conditions_fatal_for(&c, x->conditions, a->launch.gpus, a->launch.ngpus, 0))
		exec__attempt_hardware(a, &c);
}

/*
 * The health watch noted a new condition (its thread woke us): the
 * attempts on a GPU with a fatal one stop, and the scheduler hears of it
 * in a heartbeat now rather than at the next --heartbeat-ms.
 */
static void on_health(uv_async_t *h)
{
	struct exec *x = h->data;

	for (struct exec_attempt *a = x->attempts; a; a = a->next)
		hardware_check(x, a);
	x->next_heartbeat = 0;
}

/* On the watch's thread: only uv_async_send is safe here. */
static void health_new(void *arg, const struct hw_condition *c)
{
	struct exec *x = arg;

	(void)c;
	uv_async_send(&x->health_async);
}

static void on_launch(struct exec *x, const struct proto_msg *m)
{
	struct proto_launch l;
	struct exec_attempt *a = NULL;
	struct ty_err err = {0};
	char msg[EXEC_MESSAGE_MAX];

	if (find_attempt(x, m->job, m->attempt) || orphan_pending(x, m->job, m->attempt) ||
	    exec_finished_find(&x->finished, m->job, m->attempt)) {
		skipped(x, &x->counters.duplicates, "duplicates");
		ty_info("ignoring launch of job %lld attempt %lld: it already ran here",
			(long long)m->job, (long long)m->attempt);
		/* a re-sent launch: the acknowledgement of the first one was lost */
		exec__emit(x, PROTO_LAUNCH_ACCEPTED, m->job, m->attempt,
			   json_pack("{s:b}", "duplicate", 1));
		return;
	}
	if (json_is_string(json_object_get(m->data, "boot_id")) &&
	    strcmp(json_string_value(json_object_get(m->data, "boot_id")), x->boot_id)) {
		/* placed on the previous boot: the scheduler fails it when this boot registers */
		skipped(x, &x->counters.stale, "stale");
		ty_info("ignoring launch of job %lld attempt %lld: it was for boot '%s', this is "
			"boot '%s'",
			(long long)m->job, (long long)m->attempt,
			json_string_value(json_object_get(m->data, "boot_id")), x->boot_id);
		return;
	}
	if (x->preempting) {
		/* preempted, not system: the scheduler requeues it without spending a retry */
		ty_info("refusing launch of job %lld attempt %lld: this node is being preempted",
			(long long)m->job, (long long)m->attempt);
		memset(&l, 0, sizeof(l));
		finish_now(x, m->job, m->attempt, EXEC_EXIT_NONE, EXEC_CLASS(PREEMPTED),
			   "not started: this node is being preempted (spot notice)");
		goto out;
	}
	if (proto_launch_decode(&l, m, &err)) {
		ty_warn("rejecting launch of job %lld attempt %lld: %s", (long long)m->job,
			(long long)m->attempt, err.msg);
		snprintf(msg, sizeof(msg), "invalid launch: %.200s", err.msg);
		finish_now(x, m->job, m->attempt, EXEC_EXIT_NONE, EXEC_CLASS(SYSTEM), msg);
		goto out;
	}
	if (exec__attempt_start(&a, x, &l)) {
		finish_now(x, m->job, m->attempt, EXEC_EXIT_NONE, EXEC_CLASS(SYSTEM),
			   "cannot start the attempt: out of memory");
		goto out;
	}
	a->next = x->attempts;
	x->attempts = a;
	x->dirty = true;
	/* before its ranks' events: the scheduler stops re-sending the launch */
	exec__emit(x, PROTO_LAUNCH_ACCEPTED, a->job, a->attempt,
		   json_pack("{s:b}", "duplicate", 0));
	exec__telemetry_poke(x->telemetry); /* its GPUs' first sample now, not at the next tick */
	ty_info("launched job %lld attempt %lld: %d rank(s) from rank %d in '%s'%s",
		(long long)a->job, (long long)a->attempt, a->nranks, a->launch.first_rank, a->dir,
		a->launch.preflight ? ", preflight first" : "");
	hardware_check(x, a); /* placed before the scheduler heard of a fatal condition */
out:
	proto_launch_clear(&l);
}

static void on_kill(struct exec *x, const struct proto_msg *m)
{
	struct exec_attempt *a = find_attempt(x, m->job, m->attempt);
	const char *reason = json_string_value(json_object_get(m->data, "reason"));
	json_int_t grace = json_integer_value(json_object_get(m->data, "grace_seconds"));
	char msg[EXEC_MESSAGE_MAX];

	if (grace < 0 || grace > 3600)
		grace = grace < 0 ? 0 : 3600;
	if (a && reason && !strcmp(reason, "preempted")) {
		exec__attempt_stop(a, (int64_t)grace * 1000, EXEC_CLASS(PREEMPTED), EXEC_EXIT_NONE,
				   "preempted by the scheduler");
		return;
	}
	if (a) {
		exec__attempt_stop(a, (int64_t)grace * 1000, EXEC_CLASS(CANCELLED), EXEC_EXIT_NONE,
				   "killed by the scheduler (reason '%.64s')", reason);
		return;
	}
	if (exec_finished_find(&x->finished, m->job, m->attempt) ||
	    orphan_pending(x, m->job, m->attempt)) {
		ty_debug("kill of job %lld attempt %lld: already over", (long long)m->job,
			 (long long)m->attempt);
		return;
	}
	/* report it, so the scheduler hears from this node and a late launch is ignored */
	snprintf(msg, sizeof(msg), "killed before it ran here (reason '%.64s')", reason);
	finish_now(x, m->job, m->attempt, EXEC_EXIT_NONE, EXEC_CLASS(CANCELLED), msg);
}

/*
 * How long the ranks have to answer the checkpoint signal here:
 * grace_seconds and CKPT_GRACE_SLACK_MS (the scheduler's kill at the end
 * of the grace period normally comes first; this is the backstop when it
 * is lost), and when the message has a `deadline` (epoch ms: the node goes
 * then) at most until the deadline less the kill grace and a second, so
 * that SIGKILL still comes before it.
 */
static int64_t checkpoint_wait_ms(const struct exec_attempt *a, const json_t *data)
{
	json_int_t grace = json_integer_value(json_object_get(data, "grace_seconds"));
	const json_t *deadline = json_object_get(data, "deadline");
	int64_t wait = (int64_t)(grace < 0	 ? 0
				 : grace > 86400 ? 86400
						 : grace) *
			   1000 +
		       CKPT_GRACE_SLACK_MS;

	if (a && json_is_integer(deadline)) {
		int64_t left = (int64_t)json_integer_value(deadline) - ty_wall_ms() -
			       a->default_grace_ms - CKPT_DEADLINE_MARGIN_MS;

		if (left < wait)
			wait = left < 0 ? 0 : left;
	}
	return wait;
}

/*
 * Preemption's first step: the checkpoint signal to every rank of the
 * attempt, once, and the handshake (attempt.c): the gang is stopped as
 * preempted once a newer checkpoint verifies, or when the wait is over;
 * the scheduler's `kill` (reason `preempted`) ends it otherwise.
 */
static void on_checkpoint(struct exec *x, const struct proto_msg *m)
{
	struct exec_attempt *a = find_attempt(x, m->job, m->attempt);
	const char *name = json_string_value(json_object_get(m->data, "signal"));
	int sig = proto_ckpt_signal_parse(name);

	if (sig < 0) {
		skipped(x, &x->counters.malformed, "malformed");
		ty_warn("ignoring checkpoint of job %lld attempt %lld: '%.64s' is not a checkpoint "
			"signal",
			(long long)m->job, (long long)m->attempt, name ? name : "");
		return;
	}
	if (!a) {
		ty_info("ignoring checkpoint of job %lld attempt %lld: it does not run here",
			(long long)m->job, (long long)m->attempt);
		return;
	}
	if (!exec__attempt_checkpoint(a, sig, checkpoint_wait_ms(a, m->data)))
		ty_info("ignoring checkpoint of job %lld attempt %lld: %s", (long long)m->job,
			(long long)m->attempt,
			a->checkpoint_signal ? "already signalled" : "it is stopping");
}

/*
 * A spot interruption notice (spot.c), once per notice: no new work from
 * now on, a node-level preempt_notice (job 0) for the scheduler, and the
 * checkpoint signal to every local attempt at once — the notice's deadline
 * may be shorter than a round trip through the scheduler.
 */
static void on_spot_notice(void *arg, const struct exec_spot_notice *n)
{
	struct exec *x = arg;
	const char *provider =
	    exec_spot_provider_name((enum exec_spot_provider)x->o->spot_provider);
	int signalled = 0;

	x->preempting = true;
	x->notice = *n;
	ty_metrics_add(x->metrics, M_NOTICES, NULL, 1);
	ty_warn("spot notice from %s: %s; deadline in %lld ms: no new work, checkpointing",
		provider, n->detail, (long long)(n->deadline_ms - ty_wall_ms()));
	exec__emit(x, PROTO_PREEMPT_NOTICE, 0, 0, notice_json(x));
	for (struct exec_attempt *a = x->attempts; a; a = a->next) {
		int64_t left =
		    n->deadline_ms - ty_wall_ms() - a->default_grace_ms - CKPT_DEADLINE_MARGIN_MS;

		signalled +=
		    exec__attempt_checkpoint(a, a->launch.checkpoint_signal, left < 0 ? 0 : left);
	}
	ty_info("spot notice: sent the checkpoint signal to %d attempt(s)", signalled);
}

/* A message refused as not the scheduler's: logged, counted, never acted on. */
static void rejected(struct exec *x, enum proto_reject why, int64_t offset, const char *what)
{
	ty_metrics_add(x->metrics, M_REJECTED, (const char *[]){proto_reject_name(why)}, 1);
	ty_warn("refusing dispatch message at offset %lld (%s): %s", (long long)offset,
		proto_reject_name(why), what);
}

/*
 * Signature first (nothing of an unsigned message is believed), then the
 * node, then the epoch and seq: only a validly signed message addressed
 * to this node moves the epoch, and none acts twice.
 */
static void dispatch(struct exec *x, const rd_kafka_message_t *km)
{
	const void *buf = km->payload;
	size_t len = buf ? km->len : 0;
	int64_t offset = km->offset;
	struct proto_msg m;
	struct ty_err err = {0};
	char sigbuf[TY_ED25519_SIG_HEX_LEN + 2];
	const char *sig = proto_header(sigbuf, sizeof(sigbuf), km, PROTO_HDR_SIG);
	enum proto_reject why = proto_check_sig(x->o->dispatch_key, buf ? buf : "", len, sig);

	if (why) {
		rejected(x, why, offset,
			 why == PROTO_REJECT_UNSIGNED
			     ? "no '" PROTO_HDR_SIG "' header"
			     : "its '" PROTO_HDR_SIG "' header is not the scheduler's signature of it");
		return;
	}
	if (proto_decode(&m, buf ? buf : "", len, &err)) {
		skipped(x, &x->counters.malformed, "malformed");
		ty_warn("skipping malformed dispatch message at offset %lld: %s", (long long)offset,
			err.msg);
		return;
	}
	if (strcmp(proto_type_topic(m.type), PROTO_TOPIC_DISPATCH) != 0) {
		skipped(x, &x->counters.malformed, "malformed");
		ty_warn("skipping '%s' message at offset %lld: not a dispatch message",
			proto_type_name(m.type), (long long)offset);
		goto out;
	}
	if (strcmp(m.node, x->o->node_id) != 0) {
		skipped(x, &x->counters.other_node, "other_node");
		goto out;
	}
	switch (exec_dispatch_order(m.epoch, m.seq, x->epoch, x->dispatch_seq)) {
	case EXEC_STALE:
		skipped(x, &x->counters.stale, "stale");
		ty_info("dropping '%s' of job %lld attempt %lld: epoch %lld is older than %lld",
			proto_type_name(m.type), (long long)m.job, (long long)m.attempt,
			(long long)m.epoch, (long long)x->epoch);
		goto out;
	case EXEC_REPLAYED: {
		char what[160];

		snprintf(what, sizeof(what),
			 "'%s' of job %lld attempt %lld, epoch %lld seq %lld, is not newer than "
			 "seq %lld",
			 proto_type_name(m.type), (long long)m.job, (long long)m.attempt,
			 (long long)m.epoch, (long long)m.seq, (long long)x->dispatch_seq);
		rejected(x, PROTO_REJECT_REPLAYED, offset, what);
		goto out;
	}
	case EXEC_NEWER:
		/* saved before the offset is committed (the flush's order) */
		x->epoch = m.epoch;
		x->dispatch_seq = m.seq;
		x->dirty = true;
		break;
	}
	if (exec_dedupe_seen(&x->dedupe, m.job, m.attempt, m.type, m.seq)) {
		skipped(x, &x->counters.duplicates, "duplicates");
		ty_info("ignoring duplicate '%s' of job %lld attempt %lld (seq %lld)",
			proto_type_name(m.type), (long long)m.job, (long long)m.attempt,
			(long long)m.seq);
		goto out;
	}
	switch (m.type) {
	case PROTO_LAUNCH:
		on_launch(x, &m);
		break;
	case PROTO_KILL:
		on_kill(x, &m);
		break;
	case PROTO_CHECKPOINT:
		on_checkpoint(x, &m);
		break;
	case PROTO_HEALTH_CHECK:
		exec__hcheck_request(x->hcheck,
				     json_string_value(json_object_get(m.data, "reason")));
		break;
	default:
		break; /* not a dispatch type: skipped above */
	}
out:
	proto_msg_clear(&m);
}

/* ---- kafka in the loop ---- */

static void producer_event(struct exec *x, rd_kafka_event_t *ev)
{
	const rd_kafka_message_t *m;

	/* only delivery reports are enabled as events; errors are logged by librdkafka */
	while (rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DR &&
	       (m = rd_kafka_event_message_next(ev))) {
		if (m->_private == &x->register_acked)
			x->register_acked = true; /* delivered or given up: go on */
		if (m->_private == &x->hb_delivered && !m->err) {
			x->hb_delivered = ty_mono_ms();
			if (x->fenced)
				ty_info("heartbeats reach the broker again: no longer fenced");
			x->fenced = false;
		}
		if (m->err)
			/* heartbeats carry finished attempts again */
			ty_warn("message to '%s' not delivered: %s", rd_kafka_topic_name(m->rkt),
				rd_kafka_message_errstr(m));
	}
	rd_kafka_event_destroy(ev);
}

static void serve_producer(struct exec *x)
{
	rd_kafka_event_t *ev;

	while ((ev = rd_kafka_queue_poll(x->pq, 0)))
		producer_event(x, ev);
}

/*
 * rd_kafka_flush() does not serve delivery report events, and a message
 * counts as queued until its event is served: flush by serving them.
 */
static void producer_drain(struct exec *x, int timeout_ms)
{
	int64_t end = ty_mono_ms() + timeout_ms;
	rd_kafka_event_t *ev;

	while (rd_kafka_outq_len(x->producer) > 0 && ty_mono_ms() < end)
		if ((ev = rd_kafka_queue_poll(x->pq, 100)))
			producer_event(x, ev);
	if (rd_kafka_outq_len(x->producer) > 0)
		ty_warn("kafka producer: %d message(s) not delivered before exit",
			rd_kafka_outq_len(x->producer));
}

static void on_kick(uv_timer_t *t);

static void serve_consumer(struct exec *x)
{
	rd_kafka_message_t *m;

	for (int n = 0; n < CONSUME_BATCH; n++) {
		if (!(m = rd_kafka_consumer_poll(x->consumer, 0)))
			return;
		if (m->err) {
			if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
				ty_warn("dispatch consumer: %s", rd_kafka_message_errstr(m));
		} else if (!x->stopping) {
			/* while stopping nothing is acted on or committed: the next boot will */
			dispatch(x, m);
			x->commit_offset = m->offset + 1;
			x->commit_pending = true;
		}
		rd_kafka_message_destroy(m);
	}
	if (x->handles_open)
		uv_timer_start(&x->kick, on_kick, 0, 0);
}

static void kafka_serve(struct exec *x)
{
	char buf[256];

	/* drain the wake-up pipe first: a write after this is a new wake-up */
	while (read(x->kfd[0], buf, sizeof(buf)) > 0)
		;
	serve_producer(x);
	serve_consumer(x);
}

static void on_kick(uv_timer_t *t)
{
	kafka_serve(t->data);
}

static void on_kafka(uv_poll_t *h, int status, int events)
{
	kafka_serve(h->data);
}

static void on_committed(rd_kafka_t *rk, rd_kafka_resp_err_t e,
			 rd_kafka_topic_partition_list_t *offsets, void *opaque)
{
	if (e)
		ty_warn("cannot commit the dispatch offset: %s", rd_kafka_err2str(e));
	else if (offsets && offsets->cnt > 0)
		ty_debug("committed dispatch offset %lld", (long long)offsets->elems[0].offset);
}

static void commit(struct exec *x, bool sync)
{
	rd_kafka_topic_partition_list_t *l;
	rd_kafka_resp_err_t e;

	if (!x->commit_pending || !x->assigned)
		return;
	l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, PROTO_TOPIC_DISPATCH, x->partition)->offset =
	    x->commit_offset;
	e = sync ? rd_kafka_commit(x->consumer, l, 0)
		 : rd_kafka_commit_queue(x->consumer, l, x->cq, on_committed, x);
	if (e)
		ty_warn("cannot commit the dispatch offset %lld: %s", (long long)x->commit_offset,
			rd_kafka_err2str(e));
	else
		x->commit_pending = false;
	rd_kafka_topic_partition_list_destroy(l);
}

/*
 * Assign this node's partition explicitly, at the committed offset or else
 * at the end, so that "registered" means "will see every later dispatch".
 * Blocks for at most a few seconds; retried from cron.
 */
static int try_assign(struct exec *x, struct ty_err *err)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_partition_list_t *l = NULL;
	rd_kafka_topic_t *t = NULL;
	rd_kafka_resp_err_t e;
	int64_t lo, hi, off;
	int32_t n;
	int rc = 0;

	if (!(t = rd_kafka_topic_new(x->consumer, PROTO_TOPIC_DISPATCH, NULL)))
		return ty_err_set(err, TY_EKAFKA, "cannot use topic '%s'", PROTO_TOPIC_DISPATCH);
	e = rd_kafka_metadata(x->consumer, 0, t, &md, METADATA_TIMEOUT_MS);
	if (!e && md->topic_cnt == 1)
		e = md->topics[0].err;
	if (!e && (md->topic_cnt != 1 || md->topics[0].partition_cnt < 1))
		e = RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
	if (e) {
		rc = ty_err_set(err, TY_EKAFKA, "no metadata for topic '%s': %s",
				PROTO_TOPIC_DISPATCH, rd_kafka_err2str(e));
		goto out;
	}
	n = md->topics[0].partition_cnt;
	x->partition = proto_node_partition(x->o->node_id, n);
	l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, PROTO_TOPIC_DISPATCH, x->partition);
	e = rd_kafka_committed(x->consumer, l, OFFSETS_TIMEOUT_MS);
	if (e || l->elems[0].err) {
		rc = ty_err_set(err, TY_EKAFKA, "cannot read the committed offset: %s",
				rd_kafka_err2str(e ? e : l->elems[0].err));
		goto out;
	}
	off = l->elems[0].offset;
	if (off < 0) {
		e = rd_kafka_query_watermark_offsets(x->consumer, PROTO_TOPIC_DISPATCH,
						     x->partition, &lo, &hi, OFFSETS_TIMEOUT_MS);
		if (e) {
			rc = ty_err_set(err, TY_EKAFKA, "cannot read the end offset: %s",
					rd_kafka_err2str(e));
			goto out;
		}
		l->elems[0].offset = hi;
	}
	/* the producer knows where events and node messages go before we register */
	for (int i = 0; i < 2 && x->out_topics[i]; i++) {
		const struct rd_kafka_metadata *pmd = NULL;

		if (!(e = rd_kafka_metadata(x->producer, 0, x->out_topics[i], &pmd,
					    METADATA_TIMEOUT_MS)) &&
		    pmd->topic_cnt == 1)
			e = pmd->topics[0].err;
		if (pmd)
			rd_kafka_metadata_destroy(pmd);
		if (e) {
			rc = ty_err_set(err, TY_EKAFKA, "no metadata for topic '%s': %s",
					rd_kafka_topic_name(x->out_topics[i]), rd_kafka_err2str(e));
			goto out;
		}
	}
	if ((e = rd_kafka_assign(x->consumer, l))) {
		rc = ty_err_set(err, TY_EKAFKA, "cannot assign partition %d: %s", x->partition,
				rd_kafka_err2str(e));
		goto out;
	}
	ty_info("consuming '%s' partition %d of %d from offset %lld (%s)", PROTO_TOPIC_DISPATCH,
		x->partition, n, (long long)l->elems[0].offset,
		off < 0 ? "its end: nothing committed" : "the committed offset");
	x->assigned = true;
out:
	if (l)
		rd_kafka_topic_partition_list_destroy(l);
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);
	return rc;
}

/* ---- the loop's own callbacks ---- */

/*
 * As a subreaper we inherit what ranks leave behind outside their groups;
 * reap those when they exit, never a rank that libuv is waiting for.
 */
static void reap_strays(struct exec *x)
{
	for (int i = 0; i < 64; i++) {
		siginfo_t si = {0};

		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) || si.si_pid == 0 ||
		    exec__pid_running(x, si.si_pid) || exec_rt_waits_for(si.si_pid))
			return;
		waitpid(si.si_pid, NULL, WNOHANG);
	}
}

static void on_cron(uv_timer_t *t)
{
	struct exec *x = t->data;
	struct ty_err err = {0};
	int64_t now = ty_mono_ms();

	if (!x->assigned && !x->stopping && now >= x->next_assign) {
		if (try_assign(x, &err)) {
			if (!x->assign_warned)
				ty_warn("%s; retrying every %d ms", err.msg, ASSIGN_RETRY_MS);
			x->assign_warned = true;
			x->next_assign = ty_mono_ms() + ASSIGN_RETRY_MS;
		} else {
			x->next_register = x->next_heartbeat = x->hb_delivered = now = ty_mono_ms();
		}
	}
	if (x->assigned && !x->stopping &&
	    (!x->norphans || now >= x->orphan_register_by || orphans_gone(x))) {
		if (now >= x->next_register) {
			send_register(x);
			x->next_register = now + x->o->register_ms;
		}
		if (now >= x->next_heartbeat) {
			send_heartbeat(x);
			x->next_heartbeat = now + x->o->heartbeat_ms;
		}
		fence_check(x, now);
	}
	reap_strays(x);
	report_orphans(x);
	metrics_running(x);
	/* a safety net only: the queues wake the loop through kfd */
	kafka_serve(x);
}

static void save_state(struct exec *x)
{
	struct exec_running *run = NULL;
	struct ty_err err = {0};
	size_t n = 0, k = 0;

	for (struct exec_attempt *a = x->attempts; a; a = a->next)
		n++;
	for (size_t i = 0; i < x->norphans; i++)
		n += x->orphans[i].job != 0;
	if (n && !(run = calloc(n, sizeof(*run))))
		goto fail;
	/* orphans not reported yet: the next boot must still report them */
	for (size_t i = 0; i < x->norphans; i++, k++) {
		const struct exec_running *o = &x->orphans[i];

		if (!o->job) {
			k--;
			continue;
		}
		run[k].job = o->job;
		run[k].attempt = o->attempt;
		if (o->npgids && !(run[k].pgids = calloc((size_t)o->npgids, sizeof(pid_t))))
			goto fail;
		for (int g = 0; g < o->npgids; g++)
			if (o->pgids[g])
				run[k].pgids[run[k].npgids++] = o->pgids[g];
	}
	for (struct exec_attempt *a = x->attempts; a; a = a->next, k++) {
		run[k].job = a->job;
		run[k].attempt = a->attempt;
		if (!(run[k].pgids = calloc((size_t)a->nranks, sizeof(pid_t))))
			goto fail;
		for (int i = 0; i < a->nranks; i++)
			if (a->ranks[i].spawned)
				run[k].pgids[run[k].npgids++] = a->ranks[i].pid;
	}
	if (exec_state_write(x->state_path, x->o->node_id, x->epoch, x->dispatch_seq, run, n, &x->finished, &err)) {
		/* retried every loop turn (offsets wait for it); said every 10 s */
		if (ty_mono_ms() - x->save_warned >= 10000) {
			ty_error("%s", err.msg);
			x->save_warned = ty_mono_ms();
		}
	} else {
		x->dirty = false;
	}
	goto out;
fail:
	ty_error("cannot save '%s': out of memory", x->state_path);
out:
	for (size_t i = 0; run && i < n; i++)
		free(run[i].pgids);
	free(run);
}

/* Before the loop blocks: make this turn's changes durable, then commit. */
static void on_flush(uv_prepare_t *p)
{
	struct exec *x = p->data;

	if (x->dirty)
		save_state(x);
	/* an offset is committed only once what its message caused is on disk */
	if (!x->dirty)
		commit(x, false);
}

static void close_handles(struct exec *x)
{
	if (!x->handles_open)
		return;
	x->handles_open = false;
	uv_close((uv_handle_t *)&x->kpoll, NULL);
	uv_close((uv_handle_t *)&x->cron, NULL);
	uv_close((uv_handle_t *)&x->kick, NULL);
	uv_close((uv_handle_t *)&x->flush, NULL);
	uv_close((uv_handle_t *)&x->sigterm, NULL);
	uv_close((uv_handle_t *)&x->sigint, NULL);
	uv_close((uv_handle_t *)&x->sigchld, NULL);
	exec_spot_close(x->spot);
	x->spot = NULL;
	exec__fabric_close(x->fabric);
	x->fabric = NULL;
	exec__hcheck_close(x->hcheck);
	x->hcheck = NULL;
	/* the thread first: it may still wake the async */
	exec_health_stop(x->health);
	x->health = NULL;
	uv_close((uv_handle_t *)&x->health_async, NULL);
	exec__telemetry_close(x->telemetry);
	x->telemetry = NULL;
}

static void maybe_close(struct exec *x)
{
	if (x->stopping && !x->attempts)
		close_handles(x);
}

/* A child ended: each attempt waits for the ranks it spawned (signals coalesce: all of them). */
static void on_sigchld(uv_signal_t *h, int sig)
{
	struct exec *x = h->data;
	struct exec_attempt *a, *next;

	for (a = x->attempts; a; a = next) {
		next = a->next;
		exec__attempt_reap(a);
	}
}

static void on_signal(uv_signal_t *h, int sig)
{
	struct exec *x = h->data;

	if (x->stopping) {
		ty_info("already stopping (signal %d)", sig);
		return;
	}
	x->stopping = true;
	ty_info("stopping on signal %d", sig);
	exec__warm_stop(x);
	for (struct exec_attempt *a = x->attempts; a; a = a->next)
		exec__attempt_stop(a, x->o->kill_grace_ms, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE,
				   "executor stopped");
	maybe_close(x);
}

/* ---- start and end ---- */

static void make_boot_id(char *out, size_t sz)
{
	unsigned char b[16] = {0};
	uint64_t t = (uint64_t)ty_wall_ms() ^ ((uint64_t)getpid() << 32);

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		memcpy(b, &t, sizeof(t)); /* unique enough to tell boots apart */
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, sz, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

static int kafka_open(struct exec *x, struct ty_err *err)
{
	/*
	 * Delivery reports as events on the main queue (enabled_events = DR).
	 * After a broker outage heartbeats must flow again well within the
	 * scheduler's node timeout: cap the reconnect backoff (default 10 s).
	 */
	static const char *const pextra[] = {"enabled_events=1", "reconnect.backoff.max.ms=1000",
					     NULL};
	/*
	 * An idle node long-polls (--fetch-wait-ms): a broker answers a fetch
	 * as soon as one byte is there (fetch.min.bytes), so a long wait costs
	 * a new launch nothing and an idle node two fetches a second, not a
	 * hundred.
	 */
	char wait[48];
	const char *const cextra[] = {wait,
				      "fetch.min.bytes=1",
				      "auto.offset.reset=latest",
				      "enable.partition.eof=false",
				      "reconnect.backoff.max.ms=1000",
				      NULL};
	char group[16 + PROTO_NODE_ID_MAX + 1];
	int rc;

	snprintf(wait, sizeof(wait), "fetch.wait.max.ms=%lld", (long long)x->o->fetch_wait_ms);
	if (pipe2(x->kfd, O_NONBLOCK | O_CLOEXEC))
		return ty_err_set(err, TY_EIO, "cannot create a pipe: %s", strerror(errno));
	if ((rc = ty_kafka_producer_new(&x->producer, x->o->bootstrap, pextra, err)))
		return rc;
	snprintf(group, sizeof(group), "trainyard-executor-%s", x->o->node_id);
	if ((rc = ty_kafka_consumer_new(&x->consumer, x->o->bootstrap, group, cextra, err)))
		return rc;
	/*
	 * Topic handles make the producer learn both topics now: otherwise the
	 * first event waits for a metadata round trip that a heartbeat, on a
	 * topic already known, does not, and overtakes it.
	 */
	x->out_topics[0] = rd_kafka_topic_new(x->producer, PROTO_TOPIC_EVENTS, NULL);
	x->out_topics[1] = rd_kafka_topic_new(x->producer, PROTO_TOPIC_NODES, NULL);
	x->pq = rd_kafka_queue_get_main(x->producer);
	x->cq = rd_kafka_queue_get_consumer(x->consumer);
	if (!x->pq || !x->cq)
		return ty_err_set(err, TY_EKAFKA, "cannot get the kafka queues");
	/* before any assignment, so no message can arrive unannounced */
	rd_kafka_queue_io_event_enable(x->pq, x->kfd[1], "p", 1);
	rd_kafka_queue_io_event_enable(x->cq, x->kfd[1], "c", 1);
	return 0;
}

static void kafka_close(struct exec *x)
{
	if (x->consumer) {
		if (!x->dirty)
			commit(x, true); /* only what is on disk */
		if (x->cq)
			rd_kafka_queue_io_event_enable(x->cq, -1, NULL, 0);
		rd_kafka_assign(x->consumer, NULL);
	}
	if (x->producer) {
		if (x->pq) {
			rd_kafka_queue_io_event_enable(x->pq, -1, NULL, 0);
			producer_drain(x, FLUSH_TIMEOUT_MS);
		}
	}
	if (x->cq)
		rd_kafka_queue_destroy(x->cq);
	if (x->pq)
		rd_kafka_queue_destroy(x->pq);
	for (int i = 0; i < 2; i++)
		if (x->out_topics[i])
			rd_kafka_topic_destroy(x->out_topics[i]);
	ty_kafka_destroy(x->consumer, 0);
	ty_kafka_destroy(x->producer, 0); /* drained above */
	if (x->kfd[0] >= 0)
		close(x->kfd[0]);
	if (x->kfd[1] >= 0)
		close(x->kfd[1]);
}

static void loop_start(struct exec *x)
{
	uv_poll_init(&x->loop, &x->kpoll, x->kfd[0]);
	uv_timer_init(&x->loop, &x->cron);
	uv_timer_init(&x->loop, &x->kick);
	uv_prepare_init(&x->loop, &x->flush);
	uv_signal_init(&x->loop, &x->sigterm);
	uv_signal_init(&x->loop, &x->sigint);
	uv_signal_init(&x->loop, &x->sigchld);
	uv_async_init(&x->loop, &x->health_async, on_health);
	x->kpoll.data = x->cron.data = x->kick.data = x->flush.data = x;
	x->sigterm.data = x->sigint.data = x->sigchld.data = x->health_async.data = x;
	x->handles_open = true;
	uv_poll_start(&x->kpoll, UV_READABLE, on_kafka);
	uv_timer_start(&x->cron, on_cron, 0, CRON_MS);
	uv_prepare_start(&x->flush, on_flush);
	uv_signal_start(&x->sigterm, on_signal, SIGTERM);
	uv_signal_start(&x->sigint, on_signal, SIGINT);
	uv_signal_start(&x->sigchld, on_sigchld, SIGCHLD);
}

static int health_start(struct exec *x, struct ty_err *err)
{
	const struct exec_opts *o = x->o;
	struct exec_health_opts ho = {.nvml = o->nvml_library,
				      .inventory = o->inventory,
				      .xids = o->xids,
				      .check_ms = o->health_check_ms,
				      .conditions = x->conditions,
				      .metrics = x->metrics,
				      .on_new = health_new,
				      .arg = x};
	struct ty_err why = {0};
	int rc = exec_health_start(&x->health, &ho, &why);

	if (rc == TY_EUNAVAIL) {
		ty_info("health watch off: %s", why.msg);
		return 0;
	}
	return rc ? ty_err_set(err, rc, "%s", why.msg) : 0;
}

static void walk_report(uv_handle_t *h, void *arg)
{
	ty_error("handle of type '%s' still open at exit", uv_handle_type_name(h->type));
}

int exec_run(const struct exec_opts *o, struct ty_err *err)
{
	struct exec *x = NULL;
	struct exec_state st = {0};
	char dir[4096];
	int rc, urc, port = 0;
	bool loop_ok = false;

	if (!(x = calloc(1, sizeof(*x))) || exec__warm_new(&x->warm)) {
		free(x);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	x->o = o;
	x->kfd[0] = x->kfd[1] = -1;
	x->seq = ty_wall_ms(); /* grows across restarts (docs/dispatch.md) */
	make_boot_id(x->boot_id, sizeof(x->boot_id));
	/* orphans of our ranks' groups become our children, so we can reap them */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
		ty_warn_errno("cannot become a child subreaper");

	/* every path below it must fit PATH_MAX-sized buffers */
	if (strlen(o->state_dir) > 2048) {
		rc = ty_err_set(err, TY_ECONFIG, "state directory name is over 2048 characters");
		goto out;
	}
	snprintf(dir, sizeof(dir), "%s/attempts", o->state_dir);
	if ((rc = exec_mkdirs(dir, err)))
		goto out;
	snprintf(x->state_path, sizeof(x->state_path), "%s/state.json", o->state_dir);
	rc = exec_state_read(&st, x->state_path, err);
	if (rc == TY_ENOTFOUND) {
		ty_err_clear(err);
		rc = 0;
	} else if (rc) {
		char msg[TY_ERR_MSG_MAX];

		snprintf(msg, sizeof(msg), "%s", err->msg);
		ty_err_clear(err);
		ty_err_set(err, rc, "%.400s (move it aside to start afresh)", msg);
		goto out;
	}
	x->epoch = st.epoch;
	x->dispatch_seq = st.seq;
	x->finished = st.finished;

	if ((urc = uv_loop_init(&x->loop))) {
		rc = ty_err_set(err, TY_EIO, "cannot create the event loop: %s", uv_strerror(urc));
		goto out;
	}
	loop_ok = true;
	if ((rc = metrics_new(x, err)) ||
	    (rc = hw_conditions_new(&x->conditions, x->metrics, err)) ||
	    (rc = exec__logsrv_start(&x->logsrv, &port, o->address, o->log_port, o->state_dir,
				     o->node_id, o->log_pubkey, x->metrics, err)))
		goto out;
	snprintf(x->log_url, sizeof(x->log_url), "http://%s:%d", o->address, port);
	if ((rc = kafka_open(x, err)))
		goto out;
	loop_start(x);
	if (o->spot_provider != EXEC_SPOT_NONE) {
		struct exec_spot_opts so = {(enum exec_spot_provider)o->spot_provider, o->spot_url,
					    o->spot_poll_ms, o->spot_timeout_ms};

		if ((rc = exec_spot_start(&x->spot, &x->loop, &so, on_spot_notice, x, err)))
			goto out;
	}
	ty_info("node '%s' boot %s: logs at %s/logs/, state in '%s', epoch %lld", o->node_id,
		x->boot_id, x->log_url, o->state_dir, (long long)x->epoch);
	kill_orphans(x, &st);
	save_state(x);
	exec__warm_fill(x);
	if ((rc = exec__fabric_start(&x->fabric, x)) || (rc = exec__hcheck_new(&x->hcheck, x))) {
		rc = ty_err_set(err, rc, NULL);
		goto out;
	}
	if ((rc = health_start(x, err)) || (rc = exec__telemetry_start(&x->telemetry, x, err)))
		goto out;

	uv_run(&x->loop, UV_RUN_DEFAULT);
	if (x->dirty)
		save_state(x);
out:
	exec_state_clear(&st);
	if (x->handles_open) {
		/* a failure after the handles opened: close them before the loop */
		close_handles(x);
		uv_run(&x->loop, UV_RUN_DEFAULT);
	}
	kafka_close(x);
	exec__logsrv_stop(x->logsrv);
	hw_conditions_free(x->conditions);
	ty_metrics_free(x->metrics);
	exec__warm_free(x->warm);
	if (loop_ok && (urc = uv_loop_close(&x->loop))) {
		ty_error("event loop did not close: %s", uv_strerror(urc));
		uv_walk(&x->loop, walk_report, NULL);
		assert(urc == 0); /* a handle leaked: a bug, fail loudly in tests */
		if (!rc)
			rc = ty_err_set(err, TY_ESTATE, "event loop did not close");
	}
	for (size_t i = 0; i < x->norphans; i++)
		free(x->orphans[i].pgids);
	free(x->orphans);
	free(x);
	return rc;
}
