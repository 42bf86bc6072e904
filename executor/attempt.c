/*
 * One attempt on this node: its ranks as detached process groups, their
 * logs, fail-fast and the stop sequence (SIGTERM, SIGKILL after a grace
 * period), reaping every process of its groups, liveness (hang and start
 * timeouts), the failure class of a failed attempt, and the events on the way.
 */
#include "exec.h"
#include "ty_log.h"
#include "ty_time.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <limits.h>
#include <unistd.h>

extern char **environ;

#define REAP_TICK_MS 20
/* how long after the last rank exit its groups and pipes may take to go */
#define REAP_GRACE_MS 3000
/* how often the job's checkpoint directory is looked at: while running (on
 * the node of rank 0), and after the checkpoint signal (every node) */
#define CKPT_SCAN_MS 1000
#define CKPT_HANDSHAKE_MS 150
/* lines of each preflight log searched for the node check */
#define PREFLIGHT_TAIL_LINES 200
/* how long a failed attempt waits for a pass of the health watch before it reports */
#define HEALTH_WAIT_MS 3000

static void check_done(struct exec_attempt *a);
static void scan_start(struct exec_attempt *a);
static void run_phase(struct exec_attempt *a);

static void ranks_free(struct exec_rank *ranks, int n)
{
	for (int i = 0; ranks && i < n; i++)
		free(ranks[i].pid_path);
	free(ranks);
}

static void attempt_free(struct exec_attempt *a)
{
	free(a->resume_from);
	json_decref(a->resume);
	json_decref(a->preflight_result);
	json_decref(a->condition);
	proto_launch_clear(&a->launch);
	free(a->ckpt_valid);
	ranks_free(a->ranks, a->nranks);
	ranks_free(a->pre, a->nranks);
	free(a);
}

static void handle_closed(struct exec_attempt *a)
{
	if (--a->handles == 0 && a->state == EXEC_DONE)
		attempt_free(a);
}

static void timer_closed(uv_handle_t *h)
{
	handle_closed(h->data);
}

static void rank_handle_closed(uv_handle_t *h)
{
	struct exec_rank *r = h->data;

	handle_closed(r->a);
}

static const char *signal_name(int sig)
{
	const char *s = sigabbrev_np(sig);

	return s ? s : "?";
}

static void set_outcome(struct exec_attempt *a, const char *failure_class, int exit_code,
			const char *fmt, va_list ap)
{
	if (a->have_outcome)
		return;
	a->have_outcome = true;
	a->outcome.job = a->job;
	a->outcome.attempt = a->attempt;
	a->outcome.exit_code = exit_code;
	snprintf(a->outcome.failure_class, sizeof(a->outcome.failure_class), "%s", failure_class);
	vsnprintf(a->outcome.message, sizeof(a->outcome.message), fmt, ap);
}

static void outcome(struct exec_attempt *a, const char *failure_class, int exit_code,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void outcome(struct exec_attempt *a, const char *failure_class, int exit_code,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_outcome(a, failure_class, exit_code, fmt, ap);
	va_end(ap);
}

/*
 * Signal the process group of a rank. While the rank has not been reaped
 * its pid pins the group id; afterwards the id could belong to someone
 * else, so the group is signalled only when a member still carries this
 * attempt's environment.
 */
/*
 * In a container the rank's group is the process the runtime started, whose
 * host pid the runtime writes to r->pid_path once it runs; until then r->pid
 * is the runtime's own `exec` process.
 */
static bool read_small(char *out, size_t outsz, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, out, outsz - 1);
	close(fd);
	if (n < 0)
		return false;
	out[n] = '\0';
	return true;
}

static void rank_pid_resolve(struct exec_rank *r)
{
	char line[32];
	int pid;

	if (!r->pid_path || !read_small(line, sizeof(line), r->pid_path) ||
	    (pid = atoi(line)) <= 0)
		return;
	r->pid = (pid_t)pid;
	free(r->pid_path);
	r->pid_path = NULL;
}

/*
 * Whether the group a rank was spawned into may still have members. The
 * pgid's number cannot be reused while any member lives; once a look finds
 * none it is never signalled again, so only a reuse of the number between
 * two looks (a wrap of the pid space within REAP_TICK_MS) could mislead it.
 */
static bool group_live(struct exec_rank *r)
{
	if (!r->spawned || r->group_gone)
		return false;
	if (kill(-r->pid, 0) && errno == ESRCH)
		r->group_gone = true;
	return !r->group_gone;
}

static void signal_group(struct exec_attempt *a, struct exec_rank *r, int sig)
{
	if (!r->spawned)
		return;
	rank_pid_resolve(r);
	if (r->exited && !group_live(r))
		return;
	if (kill(-r->pid, sig) == 0)
		return;
	if (errno == ESRCH && !r->exited)
		kill(r->pid, sig); /* the rank left its group (setpgid): signal it alone */
	else if (errno == ESRCH)
		r->group_gone = true;
	else
		ty_warn_errno("cannot signal process group %d of job %lld attempt %lld",
			      (int)r->pid, (long long)a->job, (long long)a->attempt);
}

static void log_rotate(struct exec_rank *r)
{
	char rotated[sizeof(r->log_path) + 2];

	snprintf(rotated, sizeof(rotated), "%s.1", r->log_path);
	close(r->log_fd);
	if (rename(r->log_path, rotated))
		ty_warn_errno("cannot rotate '%s'", r->log_path);
	r->log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
	r->log_size = 0;
	if (r->log_fd < 0)
		ty_warn_errno("cannot open '%s'", r->log_path);
}

static void log_append(struct exec_rank *r, const char *p, size_t n)
{
	while (n && r->log_fd >= 0) {
		ssize_t w = write(r->log_fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			/* a full disk must not stop the job: drop output, say so once */
			ty_warn_errno("cannot write '%s', dropping the rest of its output",
				      r->log_path);
			close(r->log_fd);
			r->log_fd = -1;
			return;
		}
		p += w;
		n -= (size_t)w;
		r->log_size += w;
	}
}

/*
 * Log output is appended up to the cap, then the file is rotated once to
 * .1. The cut is made after the last whole line that fits, so both files
 * hold whole lines and together keep at least the last cap bytes.
 */
static void log_write(struct exec_rank *r, const char *p, size_t n)
{
	int64_t cap = exec__opts(r->a->x)->log_max_bytes;

	while (n && r->log_fd >= 0) {
		size_t room = r->log_size < cap ? (size_t)(cap - r->log_size) : 0, take = n;

		if (n > room) {
			const char *nl = room ? memrchr(p, '\n', room) : NULL;

			/* a line longer than the whole cap is split at the cap */
			take = nl ? (size_t)(nl - p) + 1 : r->log_size == 0 ? room : 0;
		}
		log_append(r, p, take);
		p += take;
		n -= take;
		if (n && r->log_fd >= 0)
			log_rotate(r);
	}
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
	struct exec_rank *r = h->data;

	*buf = uv_buf_init(r->rbuf, sizeof(r->rbuf));
}

static void close_output(struct exec_rank *r)
{
	if (!r->out_open)
		return;
	r->out_open = false;
	uv_read_stop((uv_stream_t *)&r->out);
	uv_close((uv_handle_t *)&r->out, rank_handle_closed);
	if (r->log_fd >= 0) {
		close(r->log_fd);
		r->log_fd = -1;
	}
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct exec_rank *r = s->data;

	if (nread > 0) {
		r->last_output_ms = ty_mono_ms();
		if (!r->progress.have_step) /* a rank with a step can print while it hangs */
			r->last_alive_ms = r->last_output_ms;
		log_write(r, buf->base, (size_t)nread);
	} else if (nread < 0) {
		close_output(r); /* EOF: every writer of the pipe is gone */
	}
}


/* Remember the rank's memory cgroup and its oom_kill count (cgroup v1 or v2). */
static void cgroup_note(struct exec_rank *r)
{
	char text[4096];

	if (r->a->contained) { /* the attempt's own cgroup, noted at its creation */
		r->oom_kills = r->a->ctr_ooms;
		snprintf(r->memory_events, sizeof(r->memory_events), "%s", r->a->ctr_events);
		return;
	}
	r->oom_kills = -1;
	r->memory_events[0] = '\0';
	snprintf(text, sizeof(text), "/proc/%d/cgroup", (int)r->pid);
	if (!read_small(text, sizeof(text), text) ||
	    !exec_cgroup_oom_file(r->memory_events, sizeof(r->memory_events), text))
		return;
	if (read_small(text, sizeof(text), r->memory_events))
		r->oom_kills = exec_memory_events_oom_kill(text);
}

/* Whether the rank's cgroup counted an OOM kill since its spawn. */
static bool cgroup_oom_rose(const struct exec_rank *r)
{
	char text[4096];
	long long now;

	if (r->oom_kills < 0 || !read_small(text, sizeof(text), r->memory_events))
		return false;
	now = exec_memory_events_oom_kill(text);
	return now > r->oom_kills;
}

/*
 * What the runtime's `exec` process reports is its own end: the rank's is
 * in the exit file its shim wrote. Without one the shim never ran (the
 * runtime failed: *runtime_failed) or was killed (exit status 128 + signal).
 */
static void container_end(struct exec_rank *r, int *code, int *term_signal, bool *runtime_failed)
{
	char path[sizeof(r->a->dir) + 64];

	*runtime_failed = false;
	if (!exec_rank_exit_path(path, sizeof(path), r->a->dir, r->rank,
				 strstr(r->log_path, ".preflight.log") != NULL) &&
	    exec_rank_exit_read(path, code, term_signal))
		return;
	if (*term_signal)
		return;
	if (*code > 128 && *code < 128 + 65) {
		*term_signal = *code - 128;
		return;
	}
	*runtime_failed = *code != 0;
}

static void rank_exited(struct exec_rank *r, int64_t status, int term_signal)
{
	struct exec_attempt *a = r->a;
	int code = term_signal ? 128 + term_signal : (int)status;
	bool runtime_failed = false;

	if (a->contained)
		container_end(r, &code, &term_signal, &runtime_failed);
	rank_pid_resolve(r);

	r->exited = true;
	r->exit_code = code;
	r->signal = term_signal;
	group_live(r); /* at once: its number cannot have been reused yet */
	if (a->phase == EXEC_PHASE_PREFLIGHT) {
		ty_info("job %lld attempt %lld: preflight of rank %d %s %d", (long long)a->job,
			(long long)a->attempt, r->rank,
			term_signal ? "was killed by signal" : "exited with code",
			term_signal ? term_signal : code);
		if (code != 0 && a->state == EXEC_RUNNING) {
			a->pre_failed = r->local;
			exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(SYSTEM),
					   EXEC_EXIT_NONE, "preflight failed");
		} else if (code == 0 && !r->last_alive_ms)
			r->last_alive_ms = ty_mono_ms();
		check_done(a);
		return;
	}
	exec__emit(a->x, PROTO_RANK_EXITED, a->job, a->attempt,
		   json_pack("{s:i, s:i, s:i}", "rank", r->rank, "exit_code", code, "signal",
			     term_signal));
	if (term_signal)
		ty_info("job %lld attempt %lld rank %d was killed by signal %d (%s)",
			(long long)a->job, (long long)a->attempt, r->rank, term_signal,
			signal_name(term_signal));
	else
		ty_info("job %lld attempt %lld rank %d exited with code %d", (long long)a->job,
			(long long)a->attempt, r->rank, code);
	/*
	 * After a checkpoint signal the scheduler is preempting the attempt: a
	 * rank that ends now (having checkpointed, or killed by that very
	 * signal) ends it as preempted, not as a failure of its own.
	 */
	if (runtime_failed && a->state == EXEC_RUNNING)
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE,
				   "the OCI runtime could not start rank %d in the container (exit "
				   "code %d; its message is in the rank's log)",
				   r->rank, code);
	else if (a->state == EXEC_RUNNING && a->checkpoint_signal && (term_signal || code != 0))
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(PREEMPTED), EXEC_EXIT_NONE,
				   "preempted: rank %d ended after the checkpoint signal (%s)",
				   r->rank, signal_name(a->checkpoint_signal));
	/*
	 * While running, Trainyard has sent no signal: any death is foreign.
	 * The class given here is provisional; finish() classifies it from
	 * the exit and every rank's log once all output is in.
	 */
	else if (a->state == EXEC_RUNNING && (term_signal || code != 0)) {
		if (!a->have_outcome) {
			a->classify_rank = r->local;
			r->cgroup_oom = cgroup_oom_rose(r);
		}
		if (term_signal)
			exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(SYSTEM), code,
					   "rank %d was killed by signal %d (%s)", r->rank,
					   term_signal, signal_name(term_signal));
		else
			exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(USER), code,
					   "rank %d exited with code %d", r->rank, code);
	} else if (code == 0 && !r->last_alive_ms)
		r->last_alive_ms = ty_mono_ms(); /* it ran: that counts as started */
	check_done(a);
}

/*
 * The last lines of every local rank's log into logs[] (texts in bufs, the
 * caller frees them); n lines each. Returns how many logs there are.
 */
static size_t read_tails(struct exec_rank_log *logs, struct ty_buf *bufs, struct exec_attempt *a,
			 long n)
{
	size_t k = 0;

	for (int i = 0; i < a->nranks; i++) {
		struct exec_rank *r = &a->ranks[i];
		struct ty_err err = {0};

		if (!r->log_path[0])
			continue;
		bufs[k] = (struct ty_buf)TY_BUF_INIT;
		if (exec_log_tail(&bufs[k], r->log_path, n, 64 * 1024, &err) &&
		    err.code != TY_ENOTFOUND)
			ty_warn("cannot read the log of job %lld rank %d: %s", (long long)a->job,
				r->rank, err.msg);
		logs[k].rank = r->rank;
		logs[k].text = bufs[k].data ? bufs[k].data : "";
		k++;
	}
	return k;
}

static void free_tails(struct ty_buf *bufs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ty_buf_free(&bufs[i]);
}

/* The rank failure that ended the attempt, classified now that all output is in. */
static void classify(struct exec_attempt *a)
{
	struct exec_rank *r = &a->ranks[a->classify_rank];
	struct exec_rank_log *logs = calloc((size_t)a->nranks, sizeof(*logs));
	struct ty_buf *bufs = calloc((size_t)a->nranks, sizeof(*bufs));
	struct exec_rank_end end = {.rank = r->rank,
				    .exit_code = r->exit_code,
				    .signal = r->signal,
				    .cgroup_oom = r->cgroup_oom};
	struct exec_verdict v;
	size_t n = 0;

	if (logs && bufs)
		n = read_tails(logs, bufs, a, EXEC_CLASSIFY_TAIL_LINES);
	exec_classify(&v, exec__opts(a->x)->classifier, &end, logs, n);
	snprintf(a->outcome.failure_class, sizeof(a->outcome.failure_class), "%s", v.failure_class);
	snprintf(a->outcome.evidence, sizeof(a->outcome.evidence), "%s", v.evidence);
	a->outcome.log_only = v.log_only;
	free_tails(bufs, n);
	free(bufs);
	free(logs);
}

/*
 * The node check of the preflight logs (the ranks' logs while a->ranks are
 * the preflight processes) into a->preflight_result.
 */
static void preflight_note(struct exec_attempt *a)
{
	struct exec_rank_log *logs = calloc((size_t)a->nranks, sizeof(*logs));
	struct ty_buf *bufs = calloc((size_t)a->nranks, sizeof(*bufs));
	size_t n = 0;

	if (logs && bufs)
		n = read_tails(logs, bufs, a, PREFLIGHT_TAIL_LINES);
	for (size_t i = 0; i < n && !a->preflight_result; i++)
		a->preflight_result = exec_preflight_node_check(logs[i].text);
	free_tails(bufs, n);
	free(bufs);
	free(logs);
}

/* A failed preflight: its node check and the last lines of every preflight log. */
static void preflight_evidence(struct exec_attempt *a)
{
	struct exec_rank *r = &a->ranks[a->pre_failed];
	struct exec_rank_log *logs = calloc((size_t)a->nranks, sizeof(*logs));
	struct ty_buf *bufs = calloc((size_t)a->nranks, sizeof(*bufs));
	char head[128];
	size_t n = 0;

	preflight_note(a);
	if (r->signal)
		snprintf(head, sizeof(head), "preflight of rank %d killed by signal %d (%s)",
			 r->rank, r->signal, signal_name(r->signal));
	else
		snprintf(head, sizeof(head), "preflight of rank %d exited with code %d", r->rank,
			 r->exit_code);
	if (logs && bufs)
		n = read_tails(logs, bufs, a, 5);
	exec_evidence_tails(a->outcome.evidence, head, logs, n);
	/*
	 * The executor ran the check and saw it fail; but in a job's image the
	 * check's program and its verdict are the job's to write
	 */
	a->outcome.log_only = a->launch.image != NULL;
	free_tails(bufs, n);
	free(bufs);
	free(logs);
}

/* Deleting a container, on the thread pool: the runtime takes a while. */
struct ctr_delete {
	uv_work_t req;
	const struct exec_rt_opts *rt;
	char id[EXEC_RT_ID_MAX];
	pid_t init;
};

static void delete_work(uv_work_t *req)
{
	struct ctr_delete *d = req->data;
	int nice = exec_rt_thread_nice(EXEC_RT_BACKGROUND_NICE);

	exec_rt_delete(d->rt, d->id);
	exec_rt_reap(d->init);
	exec_rt_thread_nice(nice);
}

static void delete_done(uv_work_t *req, int status)
{
	free(req->data);
}

static void container_delete(struct exec_attempt *a)
{
	struct ctr_delete *d;

	if (a->ctr_init <= 0)
		return;
	kill(a->ctr_init, SIGKILL);
	if ((d = calloc(1, sizeof(*d)))) {
		d->rt = exec__opts(a->x)->runtime;
		d->init = a->ctr_init;
		memcpy(d->id, a->ctr_id, sizeof(d->id));
		d->req.data = d;
		if (!uv_queue_work(exec__loop(a->x), &d->req, delete_work, delete_done)) {
			a->ctr_init = 0;
			return;
		}
		free(d);
	}
	exec_rt_delete(exec__opts(a->x)->runtime, a->ctr_id);
	exec_rt_reap(a->ctr_init);
	a->ctr_init = 0;
}

/* The outcome is hardware, decided by condition c (the executor saw it: evidence_source executor). */
static void set_hardware(struct exec_attempt *a, const struct hw_condition *c)
{
	snprintf(a->outcome.failure_class, sizeof(a->outcome.failure_class), "%s",
		 EXEC_CLASS(HARDWARE));
	snprintf(a->outcome.evidence, sizeof(a->outcome.evidence), "%s", c->evidence);
	a->outcome.log_only = false;
	a->job_fault = false;
	json_decref(a->condition);
	a->condition = hw_condition_json(c);
}

/*
 * Item 4's rule (docs/dispatch.md, "Node conditions"): a failed attempt
 * during which a fatal condition was first seen on one of its GPUs (or on
 * the node) failed because of it, whatever its ranks printed. A success
 * stays one: the job's result is its own to judge.
 */
static void hardware_rule(struct exec_attempt *a)
{
	struct hw_condition c;

	if (!a->outcome.failure_class[0] || a->condition ||
	    !hw_conditions_fatal_for(&c, exec__conditions(a->x), a->launch.gpus, a->launch.ngpus,
				     a->started_wall_ms))
		return;
	ty_info("job %lld attempt %lld: %s, not %s: %s was first seen while it ran",
		(long long)a->job, (long long)a->attempt, EXEC_CLASS(HARDWARE),
		a->outcome.failure_class, proto_condition_kind_name(c.kind));
	set_hardware(a, &c);
}

void exec__attempt_hardware(struct exec_attempt *a, const struct hw_condition *c)
{
	if (a->have_outcome || a->state != EXEC_RUNNING)
		return;
	if (c->gpu >= 0)
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(HARDWARE), EXEC_EXIT_NONE,
				   "stopped: fatal %s condition on GPU %d",
				   proto_condition_kind_name(c->kind), c->gpu);
	else
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(HARDWARE), EXEC_EXIT_NONE,
				   "stopped: fatal %s condition of the node",
				   proto_condition_kind_name(c->kind));
	set_hardware(a, c);
	a->classify_rank = -1; /* the condition decided: no rank's log will */
}

/*
 * A failed attempt on GPUs waits for one more pass of the health watch
 * (begun after its ranks ended; at most HEALTH_WAIT_MS) before it reports:
 * what the driver saw (an ECC counter, a lost GPU) may be why they failed.
 */
static bool health_pending(struct exec_attempt *a)
{
	if (a->health_wait == 0) {
		a->health_wait = 2;
		if (!a->outcome.failure_class[0] || a->launch.ngpus == 0 || a->condition ||
		    !exec__health_sync(a->x, &a->health_ticket))
			return false;
		a->health_wait = 1;
		a->health_deadline = ty_mono_ms() + HEALTH_WAIT_MS;
	}
	if (a->health_wait == 1 && (exec__health_synced(a->x, a->health_ticket) ||
				    ty_mono_ms() >= a->health_deadline))
		a->health_wait = 2;
	return a->health_wait == 1;
}

static void finish(struct exec_attempt *a)
{
	struct exec_finished *o = &a->outcome;
	json_t *data;

	a->state = EXEC_DONE;
	uv_timer_stop(&a->stop_timer);
	uv_timer_stop(&a->runtime_timer);
	uv_timer_stop(&a->live_timer);
	uv_timer_stop(&a->ckpt_timer);
	for (int i = 0; i < a->nranks; i++)
		close_output(&a->ranks[i]);
	for (int i = 0; a->pre && i < a->nranks; i++)
		close_output(&a->pre[i]);
	if (a->classify_rank >= 0)
		classify(a);
	if (a->phase == EXEC_PHASE_PREFLIGHT && a->pre_failed >= 0 &&
	    strcmp(o->failure_class, EXEC_CLASS(SYSTEM)) == 0)
		preflight_evidence(a);
	hardware_rule(a);
	data = json_pack("{s:i, s:s, s:s}", "exit_code", o->exit_code, "failure_class",
			 o->failure_class, "message", o->message);
	if (data && o->evidence[0])
		json_object_set_new(data, "evidence", json_string(o->evidence));
	if (data && o->failure_class[0])
		json_object_set_new(data, PROTO_EVIDENCE_SOURCE_FIELD,
				    json_string(proto_evidence_source_name(
					o->log_only ? PROTO_EVIDENCE_LOG : PROTO_EVIDENCE_EXECUTOR)));
	if (data && a->job_fault)
		json_object_set_new(data, "node_fault", json_false());
	if (data && a->launch.preflight)
		json_object_set(data, "preflight",
				a->preflight_result ? a->preflight_result : json_null());
	if (data && a->condition)
		json_object_set(data, "condition", a->condition);
	/* absent when no sample was taken (no GPU, telemetry off, too short) */
	if (data && a->telem.samples)
		json_object_set_new(data, "telemetry", exec_telem_json(&a->telem));
	exec__emit(a->x, PROTO_ATTEMPT_EXITED, a->job, a->attempt, data);
	container_delete(a);
	exec__warm_fill(a->x); /* if it took one and never ran */
	if (o->failure_class[0])
		ty_info("job %lld attempt %lld ended: %s (%s%s%s)", (long long)a->job,
			(long long)a->attempt, o->message, o->failure_class,
			o->evidence[0] ? ": " : "", o->evidence);
	else
		ty_info("job %lld attempt %lld succeeded", (long long)a->job,
			(long long)a->attempt);
	exec__attempt_done(a->x, a);
}

/* Orphans of a group became our children (we are a subreaper): reap them. */
static void reap_group(struct exec_attempt *a, pid_t pgid)
{
	if (exec__pid_running(a->x, pgid))
		return; /* the id is a live rank's again: never steal libuv's child */
	while (waitpid(-pgid, NULL, WNOHANG) > 0)
		;
}

static void on_reap_tick(uv_timer_t *t)
{
	struct exec_attempt *a = t->data;
	bool alive = false, pipes = false;

	for (int i = 0; i < a->nranks; i++) {
		struct exec_rank *r = &a->ranks[i];

		if (!r->spawned)
			continue;
		reap_group(a, r->pid);
		if (group_live(r)) {
			alive = true;
			kill(-r->pid, SIGKILL);
		}
		pipes = pipes || r->out_open;
	}
	/* a checkpoint being verified is reported before the attempt's end */
	if ((alive || pipes || a->ckpt_busy) && ty_mono_ms() < a->reap_deadline)
		return;
	if (health_pending(a))
		return;
	if (alive)
		ty_warn(
		    "job %lld attempt %lld still has processes after SIGKILL, giving up on them",
		    (long long)a->job, (long long)a->attempt);
	if (pipes)
		ty_warn("job %lld attempt %lld: a process outside its groups holds its output open",
			(long long)a->job, (long long)a->attempt);
	finish(a);
}

/* Every rank has exited: sweep what they left in their groups, then report. */
static void check_done(struct exec_attempt *a)
{
	if (a->state == EXEC_REAPING || a->state == EXEC_DONE)
		return;
	for (int i = 0; i < a->nranks; i++)
		if (a->ranks[i].spawned && !a->ranks[i].exited)
			return;
	if (a->phase == EXEC_PHASE_PREFLIGHT && a->state == EXEC_RUNNING && !a->have_outcome) {
		run_phase(a); /* every preflight exited 0 */
		return;
	}
	if (!a->have_outcome)
		outcome(a, "", 0, "all %d local rank(s) exited with code 0", a->nranks);
	a->state = EXEC_REAPING;
	uv_timer_stop(&a->runtime_timer);
	uv_timer_stop(&a->live_timer);
	uv_timer_stop(&a->ckpt_timer);
	/*
	 * One last look at the checkpoints the ranks wrote since the last one
	 * (a rank that checkpoints on the signal and exits at once): reported
	 * before the attempt's end, so the scheduler can name them as the
	 * next resume point.
	 */
	if ((a->rank0 || a->checkpoint_signal) && a->phase != EXEC_PHASE_PREFLIGHT &&
	    !a->ckpt_busy)
		scan_start(a);
	for (int i = 0; i < a->nranks; i++)
		signal_group(a, &a->ranks[i], SIGKILL);
	/* its init's end ends everything left in the container, in any group */
	if (a->ctr_init > 0)
		kill(a->ctr_init, SIGKILL);
	a->reap_deadline = ty_mono_ms() + REAP_GRACE_MS;
	/* always from a timer, so an attempt never ends inside its own start */
	uv_timer_start(&a->stop_timer, on_reap_tick, 0, REAP_TICK_MS);
}

static void on_grace_over(uv_timer_t *t)
{
	struct exec_attempt *a = t->data;

	if (a->state != EXEC_STOPPING)
		return;
	ty_info("job %lld attempt %lld: grace period over, sending SIGKILL", (long long)a->job,
		(long long)a->attempt);
	for (int i = 0; i < a->nranks; i++)
		signal_group(a, &a->ranks[i], SIGKILL);
}

void exec__attempt_stop(struct exec_attempt *a, int64_t grace_ms, const char *failure_class,
			int exit_code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	set_outcome(a, failure_class, exit_code, fmt, ap);
	va_end(ap);
	if (a->state != EXEC_RUNNING)
		return;
	a->state = EXEC_STOPPING;
	uv_timer_stop(&a->runtime_timer);
	uv_timer_stop(&a->live_timer);
	if (a->phase == EXEC_PHASE_VERIFY && a->work)
		uv_cancel((uv_req_t *)a->work); /* only if it has not begun */
	ty_info("stopping job %lld attempt %lld: %s (SIGKILL in %lld ms)", (long long)a->job,
		(long long)a->attempt, a->outcome.message, (long long)grace_ms);
	for (int i = 0; i < a->nranks; i++)
		signal_group(a, &a->ranks[i], SIGTERM);
	uv_timer_start(&a->stop_timer, on_grace_over, (uint64_t)(grace_ms > 0 ? grace_ms : 0), 0);
	check_done(a);
}

static void on_ckpt_tick(uv_timer_t *t);

/* The newest step whose manifest exists now (cheap: no hashing), or -1. */
static int64_t newest_complete(struct exec_attempt *a)
{
	struct exec_ckpt_entry *e = NULL;
	struct ty_err err = {0};
	int64_t step = -1;
	size_t n = 0;

	if (exec_ckpt_list(&e, &n, a->ckpt_dir, &err))
		ty_warn("job %lld attempt %lld: %s", (long long)a->job, (long long)a->attempt,
			err.msg);
	for (size_t i = 0; i < n && step < 0; i++)
		if (e[i].manifest)
			step = e[i].step;
	free(e);
	return step;
}

bool exec__attempt_checkpoint(struct exec_attempt *a, int sig, int64_t wait_ms)
{
	if (a->state != EXEC_RUNNING || a->checkpoint_signal)
		return false;
	a->checkpoint_signal = sig;
	if (a->phase != EXEC_PHASE_RUN) {
		/* nothing of the job ran: nothing to checkpoint */
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(PREEMPTED), EXEC_EXIT_NONE,
				   "preempted before the job's ranks started");
		return true;
	}
	/* only a manifest newer than every complete one now answers the signal */
	a->ckpt_signal_step = newest_complete(a);
	a->ckpt_wait_ms = wait_ms;
	a->ckpt_stop_at = wait_ms >= 0 ? ty_mono_ms() + wait_ms : 0;
	ty_info("job %lld attempt %lld: sending the checkpoint signal %s to %d rank(s); waiting "
		"%lld ms for a checkpoint newer than step %lld",
		(long long)a->job, (long long)a->attempt, signal_name(sig), a->nranks,
		(long long)wait_ms, (long long)a->ckpt_signal_step);
	for (int i = 0; i < a->nranks; i++)
		signal_group(a, &a->ranks[i], sig);
	uv_timer_start(&a->ckpt_timer, on_ckpt_tick, CKPT_HANDSHAKE_MS, CKPT_HANDSHAKE_MS);
	return true;
}

static bool rank_has_pid(const struct exec_rank *r, pid_t pid)
{
	return r->spawned && !r->exited && (r->pid == pid || r->child == pid);
}

bool exec__attempt_has_pid(const struct exec_attempt *a, pid_t pid)
{
	for (int i = 0; i < a->nranks; i++)
		if (rank_has_pid(&a->ranks[i], pid))
			return true;
	for (int i = 0; a->pre && i < a->nranks; i++)
		if (rank_has_pid(&a->pre[i], pid))
			return true;
	return false;
}

/* Waits for the child it spawned, without blocking; true when it ended. */
static bool rank_wait(struct exec_rank *r)
{
	int status;

	if (!r->spawned || r->exited || waitpid(r->child, &status, WNOHANG) != r->child)
		return false;
	rank_exited(r, WIFEXITED(status) ? WEXITSTATUS(status) : 0,
		    WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return true;
}

void exec__attempt_reap(struct exec_attempt *a)
{
	for (int i = 0; i < a->nranks; i++)
		rank_wait(&a->ranks[i]);
	for (int i = 0; a->pre && i < a->nranks; i++)
		rank_wait(&a->pre[i]);
}

static void on_runtime_over(uv_timer_t *t)
{
	struct exec_attempt *a = t->data;

	exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(TIMEOUT), EXEC_EXIT_NONE,
			   "max runtime exceeded");
}

/*
 * Read the rank's progress file when its mtime changed since the last look:
 * a new step is life; a touch, or what does not parse, is life only for a
 * rank that never gave a step (a garbage file is logged, not believed).
 */
static void check_progress(struct exec_attempt *a, struct exec_rank *r, int64_t now)
{
	char path[sizeof(a->dir) + 32], buf[EXEC_PROGRESS_FILE_MAX + 1];
	struct ty_err err = {0};
	struct stat st;
	int64_t step;
	double samples;
	ssize_t n;
	int fd;

	if (!exec_progress_path(path, sizeof(path), a->dir, r->rank) || stat(path, &st))
		return;
	if (st.st_mtim.tv_sec == r->progress_mtime.tv_sec &&
	    st.st_mtim.tv_nsec == r->progress_mtime.tv_nsec)
		return;
	r->progress_mtime = st.st_mtim;
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return;
	n = read(fd, buf, sizeof(buf)); /* one more than the most: that is too long */
	close(fd);
	if (n < 0)
		return;
	if (exec_progress_parse(&step, &samples, buf, (size_t)n, &err)) {
		if (!r->progress_warned)
			ty_warn("job %lld attempt %lld rank %d: progress file '%s' ignored: %s",
				(long long)a->job, (long long)a->attempt, r->rank, path, err.msg);
		else
			ty_debug("job %lld attempt %lld rank %d: progress file ignored: %s",
				 (long long)a->job, (long long)a->attempt, r->rank, err.msg);
		r->progress_warned = true;
	} else if (step >= 0) {
		if (exec_progress_note(&r->progress, step, samples, now, ty_wall_ms()))
			r->last_alive_ms = now;
		return;
	}
	if (!r->progress.have_step)
		r->last_alive_ms = now;
}

json_t *exec__attempt_progress(const struct exec_attempt *a)
{
	int64_t now = ty_mono_ms();
	json_t *arr = NULL;

	for (int i = 0; a->state == EXEC_RUNNING && i < a->nranks; i++) {
		const struct exec_rank *r = &a->ranks[i];
		json_t *e;

		if (!r->progress.have_step)
			continue;
		if ((!arr && !(arr = json_array())) ||
		    !(e = proto_progress_rank(r->rank, r->progress.step,
					      exec_progress_rate(&r->progress, now),
					      r->progress.samples_per_second,
					      r->progress.step_wall_ms)))
			break;
		json_array_append_new(arr, e);
	}
	return arr;
}

/*
 * The head of a hang's evidence: with steps, which step stood still on
 * which ranks and when output was last seen ("step 120 unchanged for 600 s
 * on ranks 0-3; last output 2 s ago"); else that no rank showed anything.
 */
static void hang_head(char *head, size_t n, const struct exec_attempt *a, int64_t now)
{
	int first = -1, last = -1;
	int64_t lo = 0, hi = 0, step_ms = 0, out_ms = 0;
	char steps[48], ranks[32], output[40];

	for (int i = 0; i < a->nranks; i++) {
		const struct exec_rank *r = &a->ranks[i];

		if (r->last_output_ms > out_ms)
			out_ms = r->last_output_ms;
		if (!r->progress.have_step)
			continue;
		if (first < 0 || r->progress.step < lo)
			lo = r->progress.step;
		if (first < 0 || r->progress.step > hi)
			hi = r->progress.step;
		if (r->progress.step_ms > step_ms)
			step_ms = r->progress.step_ms;
		if (first < 0)
			first = r->rank;
		last = r->rank;
	}
	if (first < 0) {
		snprintf(head, n, "no rank showed output or progress for %lld s",
			 (long long)(a->hang_timeout_ms / 1000));
		return;
	}
	if (lo == hi)
		snprintf(steps, sizeof(steps), "step %lld", (long long)lo);
	else
		snprintf(steps, sizeof(steps), "steps %lld-%lld", (long long)lo, (long long)hi);
	if (first == last)
		snprintf(ranks, sizeof(ranks), "rank %d", first);
	else
		snprintf(ranks, sizeof(ranks), "ranks %d-%d", first, last);
	if (out_ms)
		snprintf(output, sizeof(output), "last output %lld s ago",
			 (long long)((now - out_ms) / 1000));
	else
		snprintf(output, sizeof(output), "no output");
	snprintf(head, n, "%s unchanged for %lld s on %s; %s", steps,
		 (long long)((now - step_ms) / 1000), ranks, output);
}

/* Stop the attempt as cls with the last lines of every rank's log as evidence. */
static void stop_with_tails(struct exec_attempt *a, const char *cls, const char *head)
{
	struct exec_rank_log *logs = calloc((size_t)a->nranks, sizeof(*logs));
	struct ty_buf *bufs = calloc((size_t)a->nranks, sizeof(*bufs));
	size_t n = 0;

	if (logs && bufs)
		n = read_tails(logs, bufs, a, 5);
	for (size_t i = 0; i < n; i++)
		ty_warn("job %lld attempt %lld rank %d, last lines before the %s:\n%s",
			(long long)a->job, (long long)a->attempt, logs[i].rank, cls, logs[i].text);
	exec__attempt_stop(a, a->default_grace_ms, cls, EXEC_EXIT_NONE, "%s", head);
	if (strcmp(a->outcome.failure_class, cls) == 0)
		exec_evidence_tails(a->outcome.evidence, head, logs, n);
	free_tails(bufs, n);
	free(bufs);
	free(logs);
}

/*
 * Liveness: output on a rank's pipe or a change of its progress file; once
 * a rank has given a step, only a change of its step.
 * Start timeout: every rank must show life (or exit 0) within it.
 * Hang: no rank has shown life for the hang timeout.
 */
static void on_live_tick(uv_timer_t *t)
{
	struct exec_attempt *a = t->data;
	int64_t now = ty_mono_ms(), latest = a->phase_ms;
	int silent = -1;
	char head[160];

	if (a->state != EXEC_RUNNING)
		return;
	for (int i = 0; i < a->nranks; i++) {
		struct exec_rank *r = &a->ranks[i];

		check_progress(a, r, now);
		if (r->last_alive_ms > latest)
			latest = r->last_alive_ms;
		if (!r->last_alive_ms && silent < 0)
			silent = i;
	}
	if (!a->started && silent < 0 && a->phase == EXEC_PHASE_RUN) {
		a->started = true;
		ty_info("job %lld attempt %lld: every rank has started", (long long)a->job,
			(long long)a->attempt);
	}
	if (!a->started && a->start_timeout_ms && now - a->started_ms >= a->start_timeout_ms) {
		if (silent < 0)
			snprintf(head, sizeof(head),
				 "the preflight did not end within the start timeout of %lld s",
				 (long long)(a->start_timeout_ms / 1000));
		else
			snprintf(head, sizeof(head),
				 "rank %d%s showed no output or progress within the start timeout "
				 "of %lld s",
				 a->ranks[silent].rank,
				 a->phase == EXEC_PHASE_PREFLIGHT ? " (preflight)" : "",
				 (long long)(a->start_timeout_ms / 1000));
		stop_with_tails(a, EXEC_CLASS(START_TIMEOUT), head);
		return;
	}
	if (a->hang_timeout_ms && now - latest >= a->hang_timeout_ms) {
		hang_head(head, sizeof(head), a, now);
		stop_with_tails(a, EXEC_CLASS(HANG), head);
	}
}

/*
 * Start argv in its own session and process group (pgid = pid), in cwd,
 * stdin on /dev/null, stdout and stderr on out_fd, every signal at its
 * default and none blocked; env NULL: the executor's. posix_spawn, not
 * fork: the child shares the daemon's memory until it execs, so the cost
 * does not grow with the daemon's size. 0, or an errno value.
 */
static int spawn_child(pid_t *pid, char *const *argv, char *const *env, const char *cwd,
		       int out_fd)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t all, none;
	int rc;

	if ((rc = posix_spawn_file_actions_init(&fa)))
		return rc;
	if ((rc = posix_spawnattr_init(&at))) {
		posix_spawn_file_actions_destroy(&fa);
		return rc;
	}
	sigfillset(&all);
	sigemptyset(&none);
	if (!(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF |
						     POSIX_SPAWN_SETSIGMASK)) &&
	    !(rc = posix_spawnattr_setsigdefault(&at, &all)) &&
	    !(rc = posix_spawnattr_setsigmask(&at, &none)) &&
	    !(rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
	    !(rc = posix_spawn_file_actions_adddup2(&fa, out_fd, 1)) &&
	    !(rc = posix_spawn_file_actions_adddup2(&fa, out_fd, 2)) &&
	    !(rc = posix_spawn_file_actions_addchdir_np(&fa, cwd)))
		rc = posix_spawnp(pid, argv[0], &fa, &at, argv, env ? env : environ);
	posix_spawnattr_destroy(&at);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/*
 * Spawn one rank running argv (the job's command, or the preflight with
 * its log in rank-<R>.preflight.log); on failure err says why and nothing
 * of it is running.
 */
static int spawn_rank(struct exec_attempt *a, struct exec_rank *r, char *const *argv,
		      bool preflight, struct ty_err *err)
{
	const struct proto_launch *l = &a->launch;
	uv_loop_t *loop = exec__loop(a->x);
	char **env = NULL, **shim_argv = NULL, **rt_argv = NULL;
	int fds[2] = {-1, -1}, rc, urc;
	size_t n;
	struct stat st;
	char progress[sizeof(a->dir) + 32], exit_path[sizeof(a->dir) + 48];

	if (!exec_progress_path(progress, sizeof(progress), a->dir, r->rank)) {
		rc = ty_err_set(err, TY_EINVAL, "progress path in '%s' is too long", a->dir);
		goto out;
	}
	if ((rc = exec_env_build(&env, l, r->local, exec__opts(a->x)->node_id, exec__inherit(a->x),
				 &(struct exec_env_extra){.fabric = exec__fabric_env(a->x),
							  .checkpoint_dir = a->ckpt_dir,
							  .resume_from = a->resume_from,
							  .progress_file = progress,
							  .inventory = exec__opts(a->x)->inventory,
							  .api_url = exec__opts(a->x)->api_url},
				 err)))
		goto out;
	if ((size_t)snprintf(r->log_path, sizeof(r->log_path), "%s/rank-%d%s.log", a->dir, r->rank,
			     preflight ? ".preflight" : "") >= sizeof(r->log_path) ||
	    exec_rank_exit_path(exit_path, sizeof(exit_path), a->dir, r->rank, preflight)) {
		rc = ty_err_set(err, TY_EINVAL, "log path in '%s' is too long", a->dir);
		goto out;
	}
	/* the shim runs whatever it is given: a missing program must fail here (an image's is the image's) */
	if (!a->launch.image && (rc = exec_command_check(argv[0], env, err)))
		goto out;
	for (n = 0; argv[n]; n++)
		;
	if (!(shim_argv = calloc((size_t)n + 3, sizeof(*shim_argv)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	shim_argv[0] = (char *)exec__opts(a->x)->rank_shim;
	shim_argv[1] = exit_path;
	memcpy(shim_argv + 2, argv, (size_t)n * sizeof(*argv));
	if (a->contained) {
		json_t *proc;

		shim_argv[0] = EXEC_RT_SHIM_PATH;
		proc = exec_rt_process(shim_argv, env, a->workdir, &a->rt);
		rc = proc ? exec_rt_exec_argv(&rt_argv, &r->pid_path, exec__opts(a->x)->runtime,
					      a->ctr_id, r->rank, preflight ? ".preflight" : "",
					      proc, err)
			  : ty_err_set(err, TY_ENOMEM, NULL);
		json_decref(proc);
		if (rc)
			goto out;
	}
	unlink(exit_path); /* an old end must not pass for this one */
	r->log_fd = open(r->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (r->log_fd < 0 || fstat(r->log_fd, &st)) {
		rc = ty_err_set(err, TY_EIO, "cannot open '%s': %s", r->log_path, strerror(errno));
		goto out;
	}
	r->log_size = st.st_size;
	/* one pipe for stdout and stderr keeps their lines in order */
	if ((urc = uv_pipe(fds, UV_NONBLOCK_PIPE, 0))) {
		rc = ty_err_set(err, TY_EIO, "cannot create a pipe: %s", uv_strerror(urc));
		goto out;
	}
	/* in a container the runtime runs as the executor, the rank as in its process.json */
	urc = spawn_child(&r->child, rt_argv ? rt_argv : shim_argv, rt_argv ? NULL : env,
			  rt_argv ? a->dir : a->workdir, fds[1]);
	close(fds[1]);
	fds[1] = -1;
	if (urc) {
		rc = ty_err_set(err, TY_EIO, "cannot run '%s': %s", argv[0], strerror(urc));
		goto out;
	}
	r->spawned = true;
	r->pid = r->child;
	cgroup_note(r);
	r->out.data = r;
	if ((urc = uv_pipe_init(loop, &r->out, 0)) == 0) {
		a->handles++;
		r->out_open = true;
		if ((urc = uv_pipe_open(&r->out, fds[0])) == 0) {
			fds[0] = -1;
			urc = uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
		}
		if (urc) {
			/* the rank runs; only its output is lost */
			ty_warn("cannot read the output of job %lld rank %d: %s", (long long)a->job,
				r->rank, uv_strerror(urc));
			close_output(r);
		}
	}
	rc = 0;
out:
	if (fds[0] >= 0)
		close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	if (!r->spawned && r->log_fd >= 0) {
		close(r->log_fd);
		r->log_fd = -1;
	}
	exec_env_free(env);
	exec_env_free(rt_argv);
	free(shim_argv);
	return rc;
}

/* ---- the checkpoint watch ---- */

/* One look at the checkpoint directory on the thread pool. */
struct scan {
	uv_work_t req;
	struct exec_attempt *a;
	/* in, copied: the loop may change the attempt meanwhile */
	char dir[4096];
	int64_t examined;
	int keep; /* 0: no retention here (not rank 0's node) */
	int keep_every;
	const struct exec_objstore *store; /* the job tiers: the store; NULL: none */
	int64_t job;
	bool tier_retry; /* a failed move is due again: retention even without a new checkpoint */
	bool hash; /* hash every file: rank 0's node (the verifier), or --ckpt-rehash */
	char *protect;
	int64_t *known;
	size_t nknown;
	/* out */
	int64_t newest;	      /* newest step with a manifest, or examined */
	int64_t newest_valid; /* -1: none */
	json_t *reports;      /* checkpoint_written data, newest first */
	json_t *deleted;
	int64_t *valid;
	size_t nvalid;
	char error[TY_ERR_MSG_MAX];
	char tier_error[TY_ERR_MSG_MAX]; /* "": none */
	bool retained;			 /* retention ran */
	int64_t local_bytes;		 /* the step-* directories' files; -1: unknown */
	int moved;			 /* checkpoints moved to the store */
	int64_t store_bytes;		 /* what the store holds of the job; -1: not looked at */
};

static void scan_free(struct scan *w)
{
	free(w->protect);
	free(w->known);
	free(w->valid);
	json_decref(w->reports);
	json_decref(w->deleted);
	free(w);
}

/*
 * The step-* directories newer than examined up to the newest complete
 * one, newest first, until one verifies: each reported (valid, torn or
 * corrupt). Then, when one verified and this node keeps them, retention.
 */
static void scan_work(uv_work_t *req)
{
	struct scan *w = req->data;
	struct exec_ckpt_entry *e = NULL;
	struct ty_err err = {0};
	size_t n = 0;

	w->newest = w->examined;
	w->newest_valid = -1;
	if (exec_ckpt_list(&e, &n, w->dir, &err)) {
		snprintf(w->error, sizeof(w->error), "%s", err.msg);
		return;
	}
	for (size_t i = 0; i < n && w->newest == w->examined; i++)
		if (e[i].manifest && e[i].step > w->examined)
			w->newest = e[i].step;
	if (w->newest > w->examined && !(w->reports = json_array()))
		goto out;
	for (size_t i = 0; i < n && w->newest > w->examined; i++) {
		struct exec_ckpt_info info = {.files = 0};
		struct ty_err verr = {0};
		char full[PATH_MAX];
		int vrc;

		if (e[i].step > w->newest)
			continue;
		if (e[i].step <= w->examined)
			break;
		if ((size_t)snprintf(full, sizeof(full), "%s/%s", w->dir, e[i].name) >=
		    sizeof(full))
			continue;
		vrc = exec_ckpt_check(&info, full, e[i].step, NULL, w->hash, &verr);
		json_array_append_new(
		    w->reports,
		    json_pack("{s:s, s:I, s:b, s:s, s:s?, s:s?, s:b, s:I, s:I}", "path", full, "step",
			      (json_int_t)e[i].step, "valid", vrc == 0, "status",
			      vrc == 0		    ? "valid"
			      : vrc == TY_ENOTFOUND ? "torn"
						    : "corrupt",
			      "reason", vrc ? verr.msg : NULL, "digest", vrc ? NULL : info.digest,
			      "hashed", w->hash, "files", (json_int_t)info.files, "bytes",
			      (json_int_t)info.bytes));
		/* checkpoint overhead in the ledger (docs/scheduling.md, "Goodput") */
		if (vrc == 0)
			json_object_set_new(json_array_get(w->reports, json_array_size(w->reports) - 1),
					    "write_ms", json_integer(exec_ckpt_write_ms(full)));
		if (vrc == 0) {
			w->newest_valid = e[i].step;
			break;
		}
	}
	w->store_bytes = -1;
	if ((w->newest_valid >= 0 || w->tier_retry) && w->keep > 0) {
		int64_t *known = realloc(w->known, (w->nknown + 1) * sizeof(*known));
		struct exec_tier_ctx tc = {w->store, w->job, w->keep, w->keep_every, NULL, 0};

		if (!known)
			goto out;
		w->known = known;
		if (w->newest_valid >= 0)
			w->known[w->nknown++] = w->newest_valid;
		ty_err_clear(&err);
		w->retained = true;
		if (exec_ckpt_retain(&w->deleted, &w->valid, &w->nvalid, w->dir, w->keep,
				     w->keep_every, w->protect, w->known, w->nknown,
				     w->store ? exec_tier_move : NULL, &tc, w->tier_error, &err))
			snprintf(w->error, sizeof(w->error), "retention: %.400s", err.msg);
		if (tc.idx)
			w->store_bytes = exec_tier_bytes(tc.idx);
		w->moved = tc.moved;
		json_decref(tc.idx);
		w->local_bytes = exec_ckpt_bytes(w->dir);
	}
out:
	free(e);
}

/* Remember step as verified (newest kept; bounded). */
static void note_valid(struct exec_attempt *a, int64_t step)
{
	int64_t *v;

	for (size_t i = 0; i < a->nckpt_valid; i++)
		if (a->ckpt_valid[i] == step)
			return;
	if (a->nckpt_valid >= 64) {
		/* forget the oldest */
		size_t lo = 0;

		for (size_t i = 1; i < a->nckpt_valid; i++)
			if (a->ckpt_valid[i] < a->ckpt_valid[lo])
				lo = i;
		a->ckpt_valid[lo] = step;
		return;
	}
	if (!(v = realloc(a->ckpt_valid, (a->nckpt_valid + 1) * sizeof(*v))))
		return;
	a->ckpt_valid = v;
	a->ckpt_valid[a->nckpt_valid++] = step;
}

/*
 * After retention: where the job's checkpoints are (bytes locally and in
 * the object store) when that changed, each move, each failure of one and
 * the first success after failures are a checkpoint_tier event. A move
 * that failed keeps the local copies and is tried again after a backoff
 * (1 s doubling to 5 min).
 */
static void tier_report(struct exec_attempt *a, const struct scan *w)
{
	bool failed = w->tier_error[0] != 0;
	json_t *d;

	if (!w->retained)
		return;
	/* nothing new: the figures as last reported, nothing moved or failing */
	if (!failed && !w->moved && !a->tier_retry_at && w->local_bytes == a->ckpt_local_bytes &&
	    (w->store_bytes < 0 || w->store_bytes == a->ckpt_store_bytes))
		return;
	a->ckpt_local_bytes = w->local_bytes;
	if (w->store_bytes >= 0)
		a->ckpt_store_bytes = w->store_bytes;
	if (failed) {
		a->tier_backoff_ms = a->tier_backoff_ms ? a->tier_backoff_ms * 2 : 1000;
		if (a->tier_backoff_ms > 300000)
			a->tier_backoff_ms = 300000;
		a->tier_retry_at = ty_mono_ms() + a->tier_backoff_ms;
		ty_warn("job %lld attempt %lld: checkpoints kept locally, the object store failed "
			"(retry in %lld ms): %s",
			(long long)a->job, (long long)a->attempt, (long long)a->tier_backoff_ms,
			w->tier_error);
	} else {
		if (a->tier_retry_at)
			ty_info("job %lld attempt %lld: the object store works again",
				(long long)a->job, (long long)a->attempt);
		a->tier_retry_at = 0;
		a->tier_backoff_ms = 0;
	}
	d = json_pack("{s:s, s:s?, s:i, s:I}", "status", failed ? "error" : "ok", "error",
		      failed ? w->tier_error : NULL, "moved", w->moved, "local_bytes",
		      (json_int_t)w->local_bytes);
	if (d && w->store_bytes >= 0)
		json_object_set_new(d, "store_bytes", json_integer((json_int_t)w->store_bytes));
	if (failed)
		json_object_set_new(d, "retry_ms", json_integer((json_int_t)a->tier_backoff_ms));
	exec__emit(a->x, PROTO_CHECKPOINT_TIER, a->job, a->attempt, d);
}

/*
 * A checkpoint retention deleted: logged, and (unless the object store
 * holds it) reported, so the scheduler never names it as a resume point.
 */
static void report_deleted(struct exec_attempt *a, const struct scan *w, const char *path)
{
	const char *name = strrchr(path, '/');
	char why[160];

	snprintf(why, sizeof(why), "retention: keeping the newest %d valid and every %d-th step",
		 a->launch.checkpoint_keep, a->launch.checkpoint_keep_every);
	ty_info("job %lld: deleted checkpoint %s (%s%s)", (long long)a->job, path, why,
		w->store ? "; older ones are in the object store" : "");
	if (w->store || exec_ckpt_step_of(name ? name + 1 : path) < 0)
		return;
	exec__emit(a->x, PROTO_CHECKPOINT_WRITTEN, a->job, a->attempt,
		   json_pack("{s:s, s:I, s:b, s:s, s:s}", "path", path, "step",
			     (json_int_t)exec_ckpt_step_of(name ? name + 1 : path), "valid", 0,
			     "status", "deleted", "reason", why));
}

static void scan_done(uv_work_t *req, int status)
{
	struct scan *w = req->data;
	struct exec_attempt *a = w->a;
	json_t *r;
	size_t i;

	a->ckpt_busy = false;
	if (status || a->state == EXEC_DONE)
		goto out;
	if (w->error[0])
		ty_warn("job %lld attempt %lld: checkpoints: %s", (long long)a->job,
			(long long)a->attempt, w->error);
	if (w->newest > a->ckpt_examined)
		a->ckpt_examined = w->newest;
	json_array_foreach(w->reports, i, r)
	{
		bool valid = json_is_true(json_object_get(r, "valid"));
		int64_t step = json_integer_value(json_object_get(r, "step"));
		bool answer = a->checkpoint_signal && step > a->ckpt_signal_step;

		if (valid)
			ty_info("job %lld attempt %lld: checkpoint %s verified%s",
				(long long)a->job, (long long)a->attempt,
				json_string_value(json_object_get(r, "path")),
				answer ? " (after the checkpoint signal)" : "");
		else
			ty_warn("job %lld attempt %lld: checkpoint %s is %s: %s", (long long)a->job,
				(long long)a->attempt,
				json_string_value(json_object_get(r, "path")),
				json_string_value(json_object_get(r, "status")),
				json_string_value(json_object_get(r, "reason")));
		json_object_set_new(r, "after_signal", json_boolean(answer));
		exec__emit(a->x, PROTO_CHECKPOINT_WRITTEN, a->job, a->attempt, json_incref(r));
	}
	for (i = 0; i < w->nvalid; i++)
		note_valid(a, w->valid[i]);
	json_array_foreach(w->deleted, i, r)
		report_deleted(a, w, json_string_value(r));
	tier_report(a, w);
	/* the handshake: the ranks answered the signal with a good checkpoint */
	if (a->state == EXEC_RUNNING && a->checkpoint_signal && w->newest_valid >= 0 &&
	    w->newest_valid > a->ckpt_signal_step)
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(PREEMPTED), EXEC_EXIT_NONE,
				   "preempted: checkpoint step %lld verified after the checkpoint "
				   "signal",
				   (long long)w->newest_valid);
out:
	if (a->work == &w->req)
		a->work = NULL;
	scan_free(w);
	handle_closed(a);
}

static void scan_start(struct exec_attempt *a)
{
	struct scan *w = calloc(1, sizeof(*w));
	int urc;

	if (!w)
		return;
	w->a = a;
	w->req.data = w;
	snprintf(w->dir, sizeof(w->dir), "%s", a->ckpt_dir);
	w->examined = a->ckpt_examined;
	w->keep = a->rank0 ? a->launch.checkpoint_keep : 0;
	w->keep_every = a->launch.checkpoint_keep_every;
	w->job = a->job;
	w->store = a->launch.checkpoint_tier ? exec__opts(a->x)->tier_store : NULL;
	w->tier_retry = w->store && a->tier_retry_at && ty_mono_ms() >= a->tier_retry_at;
	/* one verifier: the other nodes check the manifest and sizes, not every byte again */
	w->hash = a->rank0 || exec__opts(a->x)->ckpt_rehash;
	if ((a->resume_from && !(w->protect = strdup(a->resume_from))) ||
	    (a->nckpt_valid && !(w->known = malloc(a->nckpt_valid * sizeof(int64_t))))) {
		scan_free(w);
		return;
	}
	if (a->nckpt_valid)
		memcpy(w->known, a->ckpt_valid, a->nckpt_valid * sizeof(int64_t));
	w->nknown = a->nckpt_valid;
	if ((urc = uv_queue_work(exec__loop(a->x), &w->req, scan_work, scan_done))) {
		ty_warn("job %lld attempt %lld: cannot look at the checkpoints: %s",
			(long long)a->job, (long long)a->attempt, uv_strerror(urc));
		scan_free(w);
		return;
	}
	a->ckpt_busy = true;
	a->handles++; /* the attempt outlives the request */
}

static void on_ckpt_tick(uv_timer_t *t)
{
	struct exec_attempt *a = t->data;

	if (a->state != EXEC_RUNNING && a->state != EXEC_STOPPING)
		return;
	if (a->state == EXEC_RUNNING && a->ckpt_stop_at && ty_mono_ms() >= a->ckpt_stop_at) {
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(PREEMPTED), EXEC_EXIT_NONE,
				   "preempted: no newer checkpoint within %lld ms of the "
				   "checkpoint signal",
				   (long long)a->ckpt_wait_ms);
		return;
	}
	if (!a->ckpt_busy)
		scan_start(a);
}

/* ---- starting: verification, preflight, the job's ranks ---- */

/* Spawn every local rank with argv; false (the attempt stopping) when one fails. */
static bool spawn_all(struct exec_attempt *a, char *const *argv, bool preflight)
{
	struct ty_err err = {0};

	/* what a restarted executor needs to tell a finished attempt (rank_exit.c) */
	if (!preflight && exec_local_ranks_write(a->dir, a->nranks, &err)) {
		exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE,
				   "the job's ranks could not be started: %s", err.msg);
		return false;
	}
	for (int i = 0; i < a->nranks; i++) {
		struct exec_rank *r = &a->ranks[i];

		ty_err_clear(&err);
		if (spawn_rank(a, r, argv, preflight, &err)) {
			ty_warn("cannot start job %lld rank %d%s: %s", (long long)a->job, r->rank,
				preflight ? " (preflight)" : "", err.msg);
			exec__attempt_stop(a, a->default_grace_ms, EXEC_CLASS(SYSTEM),
					   EXEC_EXIT_NONE, "rank %d could not be started%s: %s",
					   r->rank, preflight ? " (preflight)" : "", err.msg);
			return false;
		}
		/* state.json lists its group (killed after an executor restart) */
		exec__state_changed(a->x);
		if (!preflight)
			exec__emit(a->x, PROTO_RANK_STARTED, a->job, a->attempt,
				   json_pack("{s:i, s:i, s:i}", "rank", r->rank, "local_rank",
					     r->local, "pid", (int)r->pid));
	}
	return true;
}

static void init_ranks(struct exec_attempt *a, struct exec_rank *ranks)
{
	for (int i = 0; i < a->nranks; i++) {
		ranks[i].a = a;
		ranks[i].local = i;
		ranks[i].rank = a->launch.first_rank + i;
		ranks[i].log_fd = -1;
	}
}

/* The job's ranks: after the verification, or once every preflight exited 0. */
static void run_phase(struct exec_attempt *a)
{
	struct exec_rank *ranks;
	int64_t runtime_ms = a->launch.max_runtime_ms;

	if (a->phase == EXEC_PHASE_PREFLIGHT) {
		preflight_note(a);
		ty_info("job %lld attempt %lld: preflight passed on %d rank(s)", (long long)a->job,
			(long long)a->attempt, a->nranks);
		if (!(ranks = calloc((size_t)a->nranks, sizeof(*ranks)))) {
			exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE,
					   "cannot start the ranks: out of memory");
			return;
		}
		/* what the preflight left behind must not meet the job */
		for (int i = 0; i < a->nranks; i++)
			signal_group(a, &a->ranks[i], SIGKILL);
		init_ranks(a, ranks);
		a->pre = a->ranks;
		a->ranks = ranks;
		a->started = false;
	}
	a->phase = EXEC_PHASE_RUN;
	a->phase_ms = ty_mono_ms();
	if (!spawn_all(a, a->launch.command, false))
		return;
	exec__emit(a->x, PROTO_ATTEMPT_RUNNING, a->job, a->attempt,
		   json_pack("{s:i, s:O?}", "ranks", a->nranks, "resume", a->resume));
	exec__warm_fill(a->x); /* the next warm container, now that this attempt started */
	if (runtime_ms > 0)
		uv_timer_start(&a->runtime_timer, on_runtime_over, (uint64_t)runtime_ms, 0);
	if (a->rank0)
		uv_timer_start(&a->ckpt_timer, on_ckpt_tick, CKPT_SCAN_MS, CKPT_SCAN_MS);
}

/*
 * The verification of the resume checkpoint and the creation of the
 * attempt's container, on the thread pool.
 */
struct resume {
	uv_work_t req;
	struct exec_attempt *a;
	char dir[4096];
	char *path;
	json_t *report;
	int rc;
	char error[TY_ERR_MSG_MAX];
	/* tiering: the store (NULL: none), what came back from it or why not */
	const struct exec_objstore *store;
	int64_t job, restored;
	char tier_error[TY_ERR_MSG_MAX];
	/* the checkpoint the launch names (named.set), copied: checked, not searched for */
	struct proto_launch_resume named;
	bool rehash;   /* --ckpt-rehash: hash every file of it too */
	bool rejected; /* it did not check out: rc and error say why */
	/* the container (a->contained): its spec, with what it points to */
	const struct exec_rt_opts *rt;
	const struct exec_opts *o;
	char id[EXEC_RT_ID_MAX]; /* the container init is of: a warm one taken, or own_id */
	char own_id[EXEC_RT_ID_MAX]; /* the attempt's own container */
	struct exec_rt_spec spec;
	struct exec_ctr_storage st;
	bool warm; /* a warm container was taken (init set): claim it (warm.c) */
	struct exec_warm_limits warm_has;
	const char *seccomp; /* JSON text, borrowed from the options */
	const char *image;	  /* the launch's, borrowed; NULL: the host's root */
	const char *image_cache; /* borrowed from the options */
	char rootfs[4096];	  /* the image's unpacked root */
	char work[4096];
	pid_t init;
	int crc;
	bool job_fault; /* crc is the image's fault, not the node's */
	char cerror[TY_ERR_MSG_MAX];
};

static void resume_free(struct resume *w)
{
	free(w->path);
	json_decref(w->report);
	exec__ctr_storage_free(&w->st);
	free(w);
}

/* The ranks' directories become the team's, and theirs alone. */
static int give(const char *path, unsigned uid, unsigned gid, struct ty_err *err)
{
	if (chown(path, uid, gid) || chmod(path, 0700))
		return ty_err_set(err, TY_EIO, "cannot give '%s' to uid %u: %s", path, uid,
				  strerror(errno));
	return 0;
}

static int container_create(struct resume *w, struct ty_err *err)
{
	json_t *seccomp = NULL;
	int rc;

	if ((rc = give(w->work, w->spec.uid, w->spec.gid, err)) ||
	    (rc = give(w->dir, w->spec.uid, w->spec.gid, err)))
		return rc;
	if (w->warm) {
		if (!(rc = exec__warm_claim(w->o, w->id, w->work, w->dir, &w->spec, &w->warm_has,
					    err)))
			return 0;
		/* a container of the attempt's own instead, after saying why */
		ty_warn("warm container %s cannot be used: %s", w->id, err->msg);
		exec_rt_delete(w->rt, w->id);
		exec_rt_reap(w->init);
		w->init = 0;
		memcpy(w->id, w->own_id, sizeof(w->id));
		*err = (struct ty_err){0};
	}
	if (w->image) {
		if ((rc = exec_image_rootfs(w->rootfs, sizeof(w->rootfs), w->image_cache, w->image,
					    err))) {
			/* a malformed or broken image fails everywhere; a missing one is this node's */
			w->job_fault = rc != TY_ENOTFOUND;
			return rc;
		}
		w->spec.rootfs = w->rootfs;
	}
	if (w->seccomp && !(seccomp = json_loads(w->seccomp, 0, NULL)))
		return ty_err_set(err, TY_EINVAL, "the seccomp profile is not JSON");
	w->spec.seccomp = seccomp;
	rc = exec_rt_create(w->rt, w->own_id, &w->spec, &w->init, err);
	w->spec.seccomp = NULL;
	json_decref(seccomp);
	return rc;
}

/*
 * The checkpoint the launch names, in this node's checkpoint directory:
 * exactly that step with that manifest digest, never another one. The path
 * is this node's (the verifier's may be mounted elsewhere).
 */
static int resume_named(struct resume *w, struct ty_err *err)
{
	struct exec_ckpt_info info;
	char full[sizeof(w->dir) + 32];
	int rc;

	if ((size_t)snprintf(full, sizeof(full), "%s/step-%lld", w->dir,
			     (long long)w->named.step) >= sizeof(full))
		return ty_err_set(err, TY_EINVAL, "checkpoint path '%s' is too long", w->dir);
	if ((rc = exec_ckpt_check(&info, full, w->named.step, w->named.digest, w->rehash, err))) {
		w->rejected = rc != TY_ENOMEM;
		return rc;
	}
	if (!(w->path = strdup(full)) ||
	    !(w->report = json_pack("{s:s, s:I, s:s, s:b, s:[]}", "path", full, "step",
				    (json_int_t)w->named.step, "digest", info.digest, "hashed",
				    w->rehash, "skipped")))
		return ty_err_set(err, TY_ENOMEM, "out of memory");
	return 0;
}

/*
 * Tiering: bring the resume checkpoint back from the object store when its
 * local copy is gone — the one the launch names, or (an older scheduler)
 * the store's newest when it is newer than every local one.
 */
static int restore_from_store(struct resume *w, struct ty_err *err)
{
	char name[64], manifest[sizeof(w->dir) + 96];
	int rc;

	if (!w->named.set)
		return exec_tier_restore_newer(&w->restored, w->store, w->job, w->dir, err);
	snprintf(name, sizeof(name), "step-%lld", (long long)w->named.step);
	snprintf(manifest, sizeof(manifest), "%s/%s/MANIFEST.json", w->dir, name);
	if (access(manifest, F_OK) == 0)
		return 0;
	if (!(rc = exec_tier_restore(w->store, w->job, w->dir, name, w->named.step, err)))
		w->restored = w->named.step;
	return rc;
}

static void resume_work(uv_work_t *req)
{
	struct resume *w = req->data;
	struct ty_err err = {0};

	/* the local copy gone, the store's (verified before it lands) is the resume point */
	w->restored = -1;
	if (w->store && restore_from_store(w, &err)) {
		snprintf(w->tier_error, sizeof(w->tier_error), "%s", err.msg);
		ty_err_clear(&err);
	}
	if (w->named.set)
		w->rc = resume_named(w, &err);
	else /* an older scheduler: the newest that verifies here */
		w->rc = exec_ckpt_newest(&w->path, &w->report, w->dir, &err);
	if (w->rc) {
		snprintf(w->error, sizeof(w->error), "%s", err.msg);
		return;
	}
	if (w->rt && (w->crc = container_create(w, &err)))
		snprintf(w->cerror, sizeof(w->cerror), "%s", err.msg);
}

/* The memory cgroup of the new container and its oom_kill count now. */
static void container_note(struct exec_attempt *a)
{
	char text[4096];

	a->ctr_ooms = -1;
	if (exec_rt_memory_events(a->ctr_events, sizeof(a->ctr_events), a->ctr_init) &&
	    read_small(text, sizeof(text), a->ctr_events))
		a->ctr_ooms = exec_memory_events_oom_kill(text);
}

/*
 * The container's spec from the launch and the options, on the loop (it
 * looks at device nodes); TY_* with err naming what is missing.
 */
static int container_spec(struct exec_attempt *a, struct resume *w, struct ty_err *err)
{
	const struct exec_opts *o = exec__opts(a->x);
	const struct proto_launch *l = &a->launch;
	struct exec_rt_spec *s = &w->spec;
	struct exec_rt_mount *m;
	int rc;

	if (l->uid < 0)
		return ty_err_set(err, TY_EINVAL,
				  "the launch names no uid for the job's team: the scheduler must "
				  "give every team a uid (docs/security.md)");
	w->rt = o->runtime;
	w->o = o;
	exec_rt_id(w->own_id, o->node_id, a->job, a->attempt);
	memcpy(w->id, w->own_id, sizeof(w->id));
	memcpy(a->ctr_id, w->id, sizeof(a->ctr_id));
	if ((rc = exec__ctr_spec_node(s, &w->st, o, w->own_id, 4, err)) ||
	    (rc = exec_rt_devices(w->st.devices, EXEC_RT_MAX_DEVICES, &s->ndevices,
				  o->device_dir ? o->device_dir : "/dev", l->gpus, l->ngpus,
				  exec_env_get(exec__fabric_env(a->x), "NCCL_IB_HCA") != NULL,
				  o->inventory && o->inventory->simulated, err)))
		return rc;
	m = w->st.mounts;
	snprintf(m[s->nmounts].src, sizeof(m->src), "%s", a->workdir);
	snprintf(m[s->nmounts].dst, sizeof(m->dst), "%s", a->workdir);
	m[s->nmounts++].rw = true;
	snprintf(m[s->nmounts].src, sizeof(m->src), "%s", a->ckpt_dir);
	snprintf(m[s->nmounts].dst, sizeof(m->dst), "%s", a->ckpt_dir);
	m[s->nmounts++].rw = true;
	/* an image's root: the host's names, as the host network needs them */
	for (int i = 0; l->image && i < 2; i++) {
		const char *f = i ? "/etc/resolv.conf" : "/etc/hosts";

		if (access(f, R_OK))
			continue;
		snprintf(m[s->nmounts].src, sizeof(m->src), "%s", f);
		snprintf(m[s->nmounts].dst, sizeof(m->dst), "%s", f);
		s->nmounts++;
	}
	s->host_root = l->image == NULL;
	w->image = l->image;   /* the launch outlives the request */
	w->image_cache = o->image_cache;
	s->uid = (unsigned)l->uid;
	s->gid = (unsigned)l->gid;
	s->memory_bytes = l->memory_mb * 1024 * 1024;
	s->cpus = l->cpus;
	s->shm_bytes = o->shm_mb > 0	   ? o->shm_mb << 20
		       : l->memory_mb > 0 ? (l->memory_mb << 20) / 2
					  : (int64_t)64 << 20;
	w->seccomp = o->seccomp;
	snprintf(w->work, sizeof(w->work), "%s", a->workdir);
	/* a warm container with exactly these devices, when one is ready */
	if (!l->image)
		w->warm = exec__warm_take(a->x, w->st.devices, s->ndevices,
					  &(struct exec_warm_limits){s->memory_bytes, s->cpus}, w->id,
					  &w->init, &w->warm_has);
	a->rt = *s; /* its scalars, for the ranks' process.json */
	a->rt.mounts = NULL;
	a->rt.devices = NULL;
	a->rt.init_argv = NULL;
	a->rt.hostname = NULL;
	a->rt.cgroups_path = NULL;
	return 0;
}

static void resume_done(uv_work_t *req, int status)
{
	struct resume *w = req->data;
	struct exec_attempt *a = w->a;
	const json_t *sk;
	size_t i;

	a->work = NULL;
	if (w->init > 0) {
		memcpy(a->ctr_id, w->id, sizeof(a->ctr_id)); /* a warm one's, if claimed */
		a->ctr_init = w->init;
		container_note(a);
		ty_info("job %lld attempt %lld: %s container %s ready %lld ms after the launch",
			(long long)a->job, (long long)a->attempt, w->warm ? "warm" : "new", a->ctr_id,
			(long long)(ty_mono_ms() - a->started_ms));
	}
	if (status || a->state != EXEC_RUNNING) {
		container_delete(a); /* finish() may have come first */
		goto out;	     /* stopped (kill, shutdown) while it ran */
	}
	if (w->tier_error[0] || w->restored >= 0) {
		if (w->tier_error[0])
			ty_warn("job %lld attempt %lld: cannot restore from the object store: %s",
				(long long)a->job, (long long)a->attempt, w->tier_error);
		else
			ty_info("job %lld attempt %lld: checkpoint step %lld restored from the "
				"object store",
				(long long)a->job, (long long)a->attempt, (long long)w->restored);
		exec__emit(a->x, PROTO_CHECKPOINT_TIER, a->job, a->attempt,
			   json_pack("{s:s, s:s?, s:o}", "status", w->tier_error[0] ? "error" : "ok",
				     "error", w->tier_error[0] ? w->tier_error : NULL, "restored",
				     w->restored >= 0 ? json_integer((json_int_t)w->restored)
						      : json_null()));
	}
	if (w->rejected) {
		char full[sizeof(w->dir) + 32];

		/* the scheduler marks it rejected and names an older one next time */
		snprintf(full, sizeof(full), "%s/step-%lld", w->dir, (long long)w->named.step);
		ty_warn("job %lld attempt %lld: resume checkpoint step %lld rejected: %s",
			(long long)a->job, (long long)a->attempt, (long long)w->named.step,
			w->error);
		exec__emit(a->x, PROTO_CHECKPOINT_WRITTEN, a->job, a->attempt,
			   json_pack("{s:s, s:I, s:b, s:s, s:s, s:s, s:b}", "path", full, "step",
				     (json_int_t)w->named.step, "valid", 0, "status", "rejected",
				     "digest", w->named.digest, "reason", w->error, "hashed",
				     w->rehash));
		/* the checkpoint's fault, not the node's: the retry may come back here */
		a->job_fault = true;
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE,
				   "checkpoints: the resume checkpoint step %lld does not match the "
				   "launch: %s",
				   (long long)w->named.step, w->error);
		goto out;
	}
	if (w->rc) {
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE, "checkpoints: %s",
				   w->error);
		goto out;
	}
	if (w->crc) {
		a->job_fault = w->job_fault;
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE, "container: %s",
				   w->cerror);
		goto out;
	}
	a->resume_from = w->path;
	w->path = NULL;
	a->resume = w->report;
	w->report = NULL;
	a->ckpt_examined = json_integer_value(json_object_get(a->resume, "step"));
	if (!a->resume_from)
		a->ckpt_examined = -1;
	else
		note_valid(a, a->ckpt_examined);
	json_array_foreach(json_object_get(a->resume, "skipped"), i, sk)
	{
		int64_t step = json_integer_value(json_object_get(sk, "step"));

		if (step > a->ckpt_examined)
			a->ckpt_examined = step; /* reported in attempt_running */
		ty_warn("job %lld attempt %lld: checkpoint %s skipped (%s): %s", (long long)a->job,
			(long long)a->attempt, json_string_value(json_object_get(sk, "path")),
			json_string_value(json_object_get(sk, "status")),
			json_string_value(json_object_get(sk, "reason")));
	}
	if (a->resume_from)
		ty_info("job %lld attempt %lld resumes from %s", (long long)a->job,
			(long long)a->attempt, a->resume_from);
	/* the start timeout counts from here: hashing a large checkpoint is not a hang */
	a->started_ms = a->phase_ms = ty_mono_ms();
	{
		/* without either timeout the tick still reads the progress files */
		int64_t shortest = a->hang_timeout_ms, tick;

		if (!shortest || (a->start_timeout_ms && a->start_timeout_ms < shortest))
			shortest = a->start_timeout_ms;
		tick = shortest ? shortest / 4 : 1000;
		tick = tick < 100 ? 100 : tick > 1000 ? 1000 : tick;
		uv_timer_start(&a->live_timer, on_live_tick, (uint64_t)tick, (uint64_t)tick);
	}
	if (a->launch.preflight) {
		a->phase = EXEC_PHASE_PREFLIGHT;
		ty_info("job %lld attempt %lld: running the preflight on %d rank(s)",
			(long long)a->job, (long long)a->attempt, a->nranks);
		spawn_all(a, exec__opts(a->x)->preflight_command, true);
	} else {
		run_phase(a);
	}
out:
	resume_free(w);
	handle_closed(a);
}

int exec__attempt_start(struct exec_attempt **out, struct exec *x, struct proto_launch *l)
{
	const struct exec_opts *o = exec__opts(x);
	struct exec_attempt *a;
	struct resume *w;
	struct ty_err err = {0};
	int urc;

	*out = NULL;
	if (!(a = calloc(1, sizeof(*a))) ||
	    !(a->ranks = calloc((size_t)l->local_world_size, sizeof(*a->ranks))) ||
	    !(w = calloc(1, sizeof(*w)))) {
		if (a)
			free(a->ranks);
		free(a);
		return TY_ENOMEM;
	}
	a->launch = *l;
	memset(l, 0, sizeof(*l)); /* moved */
	l = &a->launch;
	a->x = x;
	a->job = l->job;
	a->attempt = l->attempt;
	a->state = EXEC_RUNNING;
	a->phase = EXEC_PHASE_VERIFY;
	a->nranks = l->local_world_size;
	a->rank0 = l->first_rank == 0;
	a->ckpt_examined = a->ckpt_signal_step = -1;
	a->pre_failed = -1;
	a->default_grace_ms = l->kill_grace_ms >= 0 ? l->kill_grace_ms : o->kill_grace_ms;
	exec_attempt_dir(a->dir, sizeof(a->dir), o->state_dir, a->job, a->attempt);
	uv_timer_init(exec__loop(x), &a->stop_timer);
	uv_timer_init(exec__loop(x), &a->runtime_timer);
	uv_timer_init(exec__loop(x), &a->live_timer);
	uv_timer_init(exec__loop(x), &a->ckpt_timer);
	a->stop_timer.data = a->runtime_timer.data = a->live_timer.data = a->ckpt_timer.data = a;
	a->handles = 4;
	a->classify_rank = -1;
	a->started_ms = a->phase_ms = ty_mono_ms();
	a->started_wall_ms = ty_wall_ms();
	a->hang_timeout_ms = l->hang_timeout_ms;
	a->start_timeout_ms = l->start_timeout_ms;
	init_ranks(a, a->ranks);
	*out = a;

	if ((size_t)snprintf(a->workdir, sizeof(a->workdir), "%s/" EXEC_WORK_DIR, a->dir) >=
		    sizeof(a->workdir) ||
	    exec_mkdirs(a->workdir, &err)) {
		free(w);
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE, "%s", err.msg);
		return 0;
	}
	if ((size_t)snprintf(a->ckpt_dir, sizeof(a->ckpt_dir), "%s/job-%lld", o->checkpoint_root,
			     (long long)a->job) >= sizeof(a->ckpt_dir) ||
	    exec_mkdirs(a->ckpt_dir, &err)) {
		free(w);
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE, "checkpoints: %s",
				   err.msg[0] ? err.msg : "checkpoint root is too long");
		return 0;
	}
	a->contained = o->runtime != NULL;
	if (a->contained && container_spec(a, w, &err)) {
		/* no uid: the launch's (the scheduler's) fault; a device missing: the node's */
		a->job_fault = l->uid < 0;
		resume_free(w);
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE, "container: %s",
				   err.msg);
		return 0;
	}
	/* hashing a multi-gigabyte checkpoint must not stop heartbeats: off the loop */
	w->a = a;
	w->req.data = w;
	snprintf(w->dir, sizeof(w->dir), "%s", a->ckpt_dir);
	w->job = a->job;
	w->store = l->checkpoint_tier ? exec__opts(x)->tier_store : NULL;
	if (l->checkpoint_tier && !w->store)
		ty_warn("job %lld asks for checkpoint tiering, but this executor has no "
			"--tier-endpoint: plain retention",
			(long long)a->job);
	/* the path stays the launch's (it outlives the request); only step and digest are used */
	w->named = l->resume;
	w->named.path = NULL;
	w->rehash = o->ckpt_rehash;
	if ((urc = uv_queue_work(exec__loop(x), &w->req, resume_work, resume_done))) {
		if (w->init > 0) { /* a warm one taken: the attempt's to delete */
			memcpy(a->ctr_id, w->id, sizeof(a->ctr_id));
			a->ctr_init = w->init;
		}
		resume_free(w);
		exec__attempt_stop(a, 0, EXEC_CLASS(SYSTEM), EXEC_EXIT_NONE,
				   "checkpoints: cannot verify them: %s", uv_strerror(urc));
		return 0;
	}
	a->work = &w->req;
	a->handles++; /* the attempt outlives the request */
	return 0;
}

void exec__attempt_close(struct exec_attempt *a)
{
	a->state = EXEC_DONE;
	uv_close((uv_handle_t *)&a->stop_timer, timer_closed);
	uv_close((uv_handle_t *)&a->runtime_timer, timer_closed);
	uv_close((uv_handle_t *)&a->live_timer, timer_closed);
	uv_close((uv_handle_t *)&a->ckpt_timer, timer_closed);
}
