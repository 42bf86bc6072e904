/*
 * The scheduler's GET /metrics (docs/metrics.md, "Scheduler"): a registry
 * the loop updates (it locks itself) and a libmicrohttpd server on a thread
 * of its own that writes it out. Only what the scheduler alone knows: its
 * role, its cycles and decisions, its view of teams and nodes at the last
 * cycle, Kafka errors and lag, the relay's outbox.
 */
#include "scheduler.h"
#include "lifecycle.h"
#include "core/policy.h"
#include "ty_log.h"
#include "ty_metrics.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define M_LEADER "trainyard_scheduler_leader"
#define M_EPOCH "trainyard_scheduler_epoch"
#define M_CYCLES "trainyard_scheduler_cycles_total"
#define M_CYCLE_FAILURES "trainyard_scheduler_cycle_failures_total"
#define M_CYCLE_SECONDS "trainyard_scheduler_cycle_duration_seconds"
#define M_DECIDE_SECONDS "trainyard_scheduler_decide_duration_seconds"
#define M_QUEUE_WAIT "trainyard_scheduler_queue_wait_seconds"
#define M_DECISIONS "trainyard_scheduler_decisions_total"
#define M_PREEMPTIONS "trainyard_scheduler_preemptions_total"
#define M_REQUEUES "trainyard_scheduler_requeues_total"
#define M_RETRIES "trainyard_scheduler_retries_total"
#define M_TEAM_ALLOCATED "trainyard_scheduler_team_gpus_allocated"
#define M_TEAM_NOMINAL "trainyard_scheduler_team_gpus_nominal"
#define M_TEAM_BORROWED "trainyard_scheduler_team_gpus_borrowed"
#define M_TEAM_FAIR_SHARE "trainyard_scheduler_team_fair_share"
#define M_TEAM_BUDGET "trainyard_scheduler_team_budget_used_ratio"
#define M_NODES "trainyard_scheduler_nodes"
#define M_NOT_READY "trainyard_scheduler_nodes_not_ready"
#define M_PENDING "trainyard_scheduler_pending_jobs"
#define M_OLDEST "trainyard_scheduler_oldest_pending_age_seconds"
#define M_PRODUCE_ERRORS "trainyard_scheduler_kafka_produce_errors_total"
#define M_DELIVERY_FAILURES "trainyard_scheduler_kafka_delivery_failures_total"
#define M_CONSUME_ERRORS "trainyard_scheduler_kafka_consume_errors_total"
#define M_SKIPPED "trainyard_scheduler_events_skipped_total"
#define M_REJECTED "trainyard_scheduler_rejected_messages_total"
#define M_LAG "trainyard_scheduler_kafka_consumer_lag_messages"
#define M_OUTBOX "trainyard_scheduler_outbox_rows"
#define M_INFLIGHT "trainyard_scheduler_outbox_inflight_messages"
#define M_NODE_CONDITIONS "trainyard_node_conditions"
#define M_BAD_CONDITIONS "trainyard_scheduler_node_conditions_invalid_total"

#define SERVER_CONNECTIONS 32
#define SERVER_TIMEOUT_S 10

struct sched_metrics {
	struct ty_metrics *reg;
	struct MHD_Daemon *d;
	char **teams; /* names given team gauges by the last cycle (owned) */
	int nteams;
	char **lags; /* "topic\npartition" series given a lag (owned) */
	int nlags;
	long long skipped;	  /* s->in.malformed already counted */
	long long bad_conditions; /* s->in.bad_conditions already counted */
	char **conds; /* "node\nkind\nseverity" series given a count (owned) */
	int nconds;
	bool led;	   /* gauges hold a leader's values (cleared when standing by) */
};

static const double cycle_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
				      0.25,  0.5,    1,	    2.5,  5,	 10};
static const double wait_bounds[] = {1,	   5,	 15,   30,    60,    120,   300,    600,
				     1800, 3600, 7200, 14400, 28800, 86400, 259200, 604800};

/* ---- the pure parts ---- */

/* Indexed by enum sched_reason: the label of each pending reason. */
static const char *const reason_labels[SCHED_REASON_COUNT] = {
    [SCHED_PLACED] = "none",
    [SCHED_WAIT_NODES] = "resources",
    [SCHED_WAIT_TOPOLOGY] = "topology",
    [SCHED_NEVER_FITS] = "never_fits",
    [SCHED_WAIT_BORROW_LIMIT] = "quota",
    [SCHED_WAIT_COHORT] = "quota",
    [SCHED_WAIT_NOMINAL] = "quota",
    [SCHED_WAIT_PREEMPTION] = "preemption",
    [SCHED_WAIT_RESERVED] = "reservation",
    [SCHED_WAIT_HEAD] = "resources",
    [SCHED_WAIT_BEHIND] = "order",
    [SCHED_WAIT_SCAN_LIMIT] = "order",
    [SCHED_WAIT_PORT] = "ports",
    [SCHED_INVALID] = "invalid",
    [SCHED_WAIT_BACKOFF] = "backoff",
    [SCHED_NEVER_FITS_EXCLUDED] = "never_fits",
    [SCHED_WAIT_ON_DEMAND] = "resources",
    [SCHED_NEVER_FITS_CPUS] = "never_fits",
    [SCHED_NEVER_FITS_MEMORY] = "never_fits",
    [SCHED_WAIT_CPUS] = "resources",
    [SCHED_WAIT_MEMORY] = "resources",
    [SCHED_WAIT_QUOTA_CPUS] = "quota",
    [SCHED_WAIT_QUOTA_MEMORY] = "quota",
    [SCHED_WAIT_BUDGET] = "budget",
};

/*
 * Every pending-reason label, each once (the gauge has all of them, 0
 * included): the core's, then two for jobs the daemon holds back from it —
 * an earlier attempt still holds GPUs, the sweep runs max_concurrent trials.
 */
static const char *const pending_labels[] = {
    "resources",	"topology",    "never_fits", "quota",	"preemption",
    "reservation",	"order",       "ports",	     "invalid", "backoff",
    "previous_attempt", "sweep_limit", "budget",     NULL};
#define PENDING_PREVIOUS 10
#define PENDING_SWEEP 11

double sched_metrics_budget_ratio(const struct sched_team_in *t)
{
	if (!t->has_budget)
		return 0;
	return t->budget > 0 ? t->spent / t->budget : 1;
}

const char *sched_metrics_reason(int reason)
{
	if (reason < 0 || reason >= SCHED_REASON_COUNT || !reason_labels[reason])
		return "other";
	return reason_labels[reason];
}

const char *sched_metrics_outcome(const struct sched_decisions *d, int i)
{
	const struct sched_pending_out *o = &d->pending[i];

	if (o->reason == SCHED_PLACED) {
		/* started while the head job, ahead of it in the order, waits */
		if (d->head >= 0 && d->head != i && d->pending[d->head].reason != SCHED_PLACED &&
		    o->position > d->pending[d->head].position)
			return "backfilled";
		return "placed";
	}
	for (int r = 0; r < d->nreservations; r++)
		if (d->reservations[r].pending == i)
			return "reserved";
	return "pending";
}

const char *sched_metrics_class(const char *cls)
{
	const char *known = proto_failure_class_name(proto_failure_class_parse(cls));

	return known ? known : "other";
}

int sched_metrics_listen_parse(struct sockaddr_in *out, const char *spec)
{
	char host[64];
	const char *colon = spec ? strrchr(spec, ':') : NULL;
	char *end;
	long port;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
		return TY_EINVAL;
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port < 0 || port > 65535)
		return TY_EINVAL;
	memset(out, 0, sizeof(*out));
	out->sin_family = AF_INET;
	out->sin_port = htons((uint16_t)port);
	if (!strcmp(host, "localhost"))
		snprintf(host, sizeof(host), "127.0.0.1");
	if (inet_pton(AF_INET, host, &out->sin_addr) != 1)
		return TY_EINVAL;
	return 0;
}

/* ---- the registry ---- */

static int families(struct ty_metrics *m, struct ty_err *err)
{
	static const char *const outcome_reason[] = {"outcome", "reason", NULL};
	static const char *const reason[] = {"reason", NULL};
	static const char *const cls[] = {"class", NULL};
	static const char *const failure_class[] = {"failure_class", NULL};
	static const char *const team[] = {"team", NULL};
	static const char *const state[] = {"state", NULL};
	static const char *const topic_partition[] = {"topic", "partition", NULL};
	static const char *const node_kind_severity[] = {"node", "kind", "severity", NULL};
	static const struct {
		enum ty_metric_type type;
		const char *name, *help;
		const char *const *labels;
		const double *bounds;
		int nbounds;
	} f[] = {
	    {TY_METRIC_GAUGE, M_LEADER, "1 while this scheduler leads, 0 while it stands by.", NULL,
	     NULL, 0},
	    {TY_METRIC_GAUGE, M_EPOCH, "The epoch of this scheduler's term (0 while it stands by).",
	     NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_CYCLES, "Scheduling cycles committed.", NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_CYCLE_FAILURES, "Scheduling cycles that failed (rolled back).",
	     NULL, NULL, 0},
	    {TY_METRIC_HISTOGRAM, M_CYCLE_SECONDS,
	     "Duration of committed scheduling cycles (cancel pass to commit).", NULL, cycle_bounds,
	     (int)(sizeof(cycle_bounds) / sizeof(cycle_bounds[0]))},
	    {TY_METRIC_HISTOGRAM, M_DECIDE_SECONDS,
	     "Duration of the policy decision within committed cycles.", NULL, cycle_bounds,
	     (int)(sizeof(cycle_bounds) / sizeof(cycle_bounds[0]))},
	    {TY_METRIC_HISTOGRAM, M_QUEUE_WAIT,
	     "Time from submission to placement of jobs placed for their first attempt, by "
	     "priority class.",
	     cls, wait_bounds, (int)(sizeof(wait_bounds) / sizeof(wait_bounds[0]))},
	    {TY_METRIC_COUNTER, M_DECISIONS,
	     "Decisions of committed cycles, one per pending job per cycle, by outcome and "
	     "reason class.",
	     outcome_reason, NULL, 0},
	    {TY_METRIC_COUNTER, M_PREEMPTIONS, "Preemptions started, by reason.", reason, NULL, 0},
	    {TY_METRIC_COUNTER, M_REQUEUES,
	     "Jobs sent back to pending after an attempt ended, by the attempt's failure class.",
	     failure_class, NULL, 0},
	    {TY_METRIC_COUNTER, M_RETRIES,
	     "Requeues that spent a retry of the job's budget, by failure class.", failure_class,
	     NULL, 0},
	    {TY_METRIC_GAUGE, M_TEAM_ALLOCATED,
	     "GPUs the team holds after the last cycle's decisions (as the policy counts them).",
	     team, NULL, 0},
	    {TY_METRIC_GAUGE, M_TEAM_NOMINAL, "The team's nominal GPU quota at the last cycle.",
	     team, NULL, 0},
	    {TY_METRIC_GAUGE, M_TEAM_BORROWED,
	     "GPUs the team uses above its nominal quota after the last cycle's decisions.", team,
	     NULL, 0},
	    {TY_METRIC_GAUGE, M_TEAM_FAIR_SHARE,
	     "The team's fair-share factor 2^(-usage/share) at the last cycle.", team, NULL, 0},
	    {TY_METRIC_GAUGE, M_TEAM_BUDGET,
	     "The team's spend in its budget period over its budget at the last cycle (0: no "
	     "budget; a budget of 0 counts as used up).",
	     team, NULL, 0},
	    {TY_METRIC_GAUGE, M_NODES,
	     "Nodes the scheduler knows at the last cycle, by state (lost ones excluded).", state,
	     NULL, 0},
	    {TY_METRIC_GAUGE, M_NOT_READY,
	     "Nodes not lost whose register named a fault (fewer GPUs than expected, GPUs that "
	     "cannot be read): no new work goes there.",
	     NULL, NULL, 0},
	    {TY_METRIC_GAUGE, M_PENDING, "Pending jobs at the last cycle, by reason class.", reason,
	     NULL, 0},
	    {TY_METRIC_GAUGE, M_OLDEST,
	     "Age of the oldest pending job (from submission) at the last cycle; 0 when none.",
	     NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_PRODUCE_ERRORS,
	     "Outbox rows the dispatch producer refused (queue full excluded).", NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_DELIVERY_FAILURES,
	     "Dispatch messages Kafka did not acknowledge (produced again later).", NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_CONSUME_ERRORS,
	     "Errors the event consumer reported (end of partition excluded).", NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_SKIPPED,
	     "Consumed messages skipped as malformed or inapplicable.", NULL, NULL, 0},
	    {TY_METRIC_COUNTER, M_REJECTED,
	     "Consumed messages refused as not their node's (no MAC, or not its key's), by "
	     "reason; never applied.",
	     reason, NULL, 0},
	    {TY_METRIC_GAUGE, M_LAG,
	     "Messages of a consumed partition not yet consumed (high watermark - position).",
	     topic_partition, NULL, 0},
	    {TY_METRIC_GAUGE, M_OUTBOX,
	     "Dispatch outbox rows the last relay pass saw: not produced yet (at most 1000) "
	     "plus in flight.",
	     NULL, NULL, 0},
	    {TY_METRIC_GAUGE, M_INFLIGHT,
	     "Dispatch messages produced and not yet deleted from the outbox.", NULL, NULL, 0},
	    {TY_METRIC_GAUGE, M_NODE_CONDITIONS,
	     "Current health conditions of a node (its executor's heartbeats list them), by kind "
	     "and severity.",
	     node_kind_severity, NULL, 0},
	    {TY_METRIC_COUNTER, M_BAD_CONDITIONS,
	     "Node condition entries skipped as invalid (the rest of their message applied).",
	     NULL, NULL, 0},
	};
	int rc;

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
		if ((rc = ty_metrics_family(m, f[i].type, f[i].name, f[i].help, f[i].labels,
					    f[i].bounds, f[i].nbounds, err)))
			return rc;
	/* series that exist from the start, 0 included */
	for (int i = 0; pending_labels[i]; i++)
		ty_metrics_set(m, M_PENDING, (const char *[]){pending_labels[i]}, 0);
	ty_metrics_set(m, M_NODES, (const char *[]){"ready"}, 0);
	ty_metrics_set(m, M_NODES, (const char *[]){"unschedulable"}, 0);
	ty_metrics_set(m, M_NODES, (const char *[]){"preempting"}, 0);
	ty_metrics_set(m, M_NOT_READY, NULL, 0);
	ty_metrics_add(m, M_PREEMPTIONS, (const char *[]){"reclaim"}, 0);
	ty_metrics_add(m, M_PREEMPTIONS, (const char *[]){"priority"}, 0);
	ty_metrics_add(m, M_PREEMPTIONS, (const char *[]){"spot"}, 0);
	ty_metrics_add(m, M_REJECTED, (const char *[]){proto_reject_name(PROTO_REJECT_UNSIGNED)}, 0);
	ty_metrics_add(m, M_REJECTED,
		       (const char *[]){proto_reject_name(PROTO_REJECT_BAD_SIGNATURE)}, 0);
	return 0;
}

/* ---- the server ---- */

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
			     bool owned, const char *ctype)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body,
					    owned ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (!r) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned status, const char *msg)
{
	return reply(c, status, (char *)msg, strlen(msg), false, "text/plain; charset=utf-8");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
			      const char *method, const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct sched_metrics *m = cls;
	struct ty_buf out = TY_BUF_INIT;
	size_t len;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(url, "/metrics") != 0)
		return text(c, MHD_HTTP_NOT_FOUND, "not found\n");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (ty_metrics_write(m->reg, &out)) {
		ty_buf_free(&out);
		return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	len = out.len;
	if (len == 0) {
		ty_buf_free(&out);
		return text(c, MHD_HTTP_OK, "");
	}
	return reply(c, MHD_HTTP_OK, ty_buf_detach(&out), len, true, TY_METRICS_CONTENT_TYPE);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '.'))
		msg[--n] = '\0';
	ty_warn("metrics server: %s", msg);
}

int sched_metrics_start(struct sched_metrics **out, int *port, const char *listen,
			struct ty_err *err)
{
	struct sched_metrics *m = NULL;
	struct sockaddr_in sa;
	const union MHD_DaemonInfo *info;
	int rc = 0;

	*out = NULL;
	if (sched_metrics_listen_parse(&sa, listen))
		return ty_err_set(err, TY_ECONFIG,
				  "option 'metrics-listen': '%s' is not IPV4-ADDRESS:PORT", listen);
	if (!(m = calloc(1, sizeof(*m))) || !(m->reg = ty_metrics_new())) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if ((rc = families(m->reg, err)))
		goto out;
	m->d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, m,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)SERVER_CONNECTIONS,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)SERVER_TIMEOUT_S, MHD_OPTION_END);
	if (!m->d) {
		rc = ty_err_set(err, TY_EIO, "cannot serve metrics on '%s'", listen);
		goto out;
	}
	info = MHD_get_daemon_info(m->d, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : ntohs(sa.sin_port);
	*out = m;
	m = NULL;
out:
	sched_metrics_stop(m);
	return rc;
}

static void names_free(char ***v, int *n)
{
	for (int i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

void sched_metrics_stop(struct sched_metrics *m)
{
	if (!m)
		return;
	if (m->d)
		MHD_stop_daemon(m->d);
	ty_metrics_free(m->reg);
	names_free(&m->teams, &m->nteams);
	names_free(&m->lags, &m->nlags);
	names_free(&m->conds, &m->nconds);
	free(m);
}

/* ---- updates from the loop (all NULL-safe: no --metrics-listen, no metrics) ---- */

static struct ty_metrics *mreg(const struct sched_metrics *m)
{
	return m ? m->reg : NULL;
}

static struct ty_metrics *reg(const struct sched *s)
{
	return mreg(s->metrics);
}

double sched_metrics_clock(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* In each of the families names, zero the series of labels in old[] that now[] lacks. */
static void gauges_forget(struct ty_metrics *m, const char *const *names, int nnames, char **old,
			  int nold, char *const *now, int n)
{
	for (int i = 0; i < nold; i++) {
		bool kept = false;

		for (int k = 0; k < n && !kept; k++)
			kept = !strcmp(old[i], now[k]);
		for (int f = 0; f < nnames && !kept; f++)
			ty_metrics_set(m, names[f], (const char *[]){old[i]}, 0);
	}
}

static const char *const team_families[] = {M_TEAM_ALLOCATED, M_TEAM_NOMINAL, M_TEAM_BORROWED,
					    M_TEAM_FAIR_SHARE, M_TEAM_BUDGET};
#define NTEAM_FAMILIES ((int)(sizeof(team_families) / sizeof(team_families[0])))

/* Set the team gauges to now (n names; NULL/0: no teams), zeroing teams gone since. */
static void teams_set(struct sched_metrics *sm, char **now, int n)
{
	gauges_forget(sm->reg, team_families, NTEAM_FAMILIES, sm->teams, sm->nteams, now, n);
	names_free(&sm->teams, &sm->nteams);
	sm->teams = now;
	sm->nteams = n;
}

void sched_metrics_role(struct sched *s)
{
	struct ty_metrics *m = reg(s);

	if (!m)
		return;
	ty_metrics_set(m, M_LEADER, NULL, s->term.leading ? 1 : 0);
	ty_metrics_set(m, M_EPOCH, NULL, s->term.leading ? (double)s->term.epoch : 0);
	if (s->term.leading || !s->metrics->led)
		return;
	/* stepped down: a standby knows no queue, teams, nodes or partitions */
	s->metrics->led = false;
	teams_set(s->metrics, NULL, 0);
	for (int k = 0; pending_labels[k]; k++)
		ty_metrics_set(m, M_PENDING, (const char *[]){pending_labels[k]}, 0);
	ty_metrics_set(m, M_OLDEST, NULL, 0);
	ty_metrics_set(m, M_NODES, (const char *[]){"ready"}, 0);
	ty_metrics_set(m, M_NODES, (const char *[]){"unschedulable"}, 0);
	ty_metrics_set(m, M_NODES, (const char *[]){"preempting"}, 0);
	ty_metrics_set(m, M_NOT_READY, NULL, 0);
	ty_metrics_set(m, M_OUTBOX, NULL, 0);
	ty_metrics_set(m, M_INFLIGHT, NULL, 0);
	sched_metrics_node_conditions(s, NULL, 0);
	sched_metrics_kafka(s); /* no consumer: every lag 0 */
}

/* Decisions of one cycle by (outcome, reason): 4 outcomes × the reason labels at most. */
struct decided {
	const char *outcome, *reason; /* static strings */
	double n;
};
#define DECIDED_MAX 64

static void decided_add(struct decided *v, int *n, const char *outcome, const char *reason)
{
	for (int i = 0; i < *n; i++)
		if (!strcmp(v[i].outcome, outcome) && !strcmp(v[i].reason, reason)) {
			v[i].n++;
			return;
		}
	if (*n < DECIDED_MAX)
		v[(*n)++] = (struct decided){outcome, reason, 1};
}

void sched_metrics_cycle(struct sched *s, const struct sched_input *in,
			 const struct sched_decisions *d, double seconds, double decide_seconds)
{
	struct sched_metrics *sm = s->metrics;
	struct ty_metrics *m = reg(s);
	double pending[sizeof(pending_labels) / sizeof(pending_labels[0])] = {0};
	int64_t oldest = -1;
	struct decided decided[DECIDED_MAX];
	char **names = NULL;
	bool *placed = NULL;
	int ready = 0, unschedulable = 0, preempting = 0, not_ready = 0, nnames = 0, nplaced = 0,
	    ndecided = 0;

	if (!m)
		return;
	sm->led = true;
	ty_metrics_add(m, M_CYCLES, NULL, 1);
	ty_metrics_observe(m, M_CYCLE_SECONDS, NULL, seconds > 0 ? seconds : 0);
	ty_metrics_observe(m, M_DECIDE_SECONDS, NULL, decide_seconds > 0 ? decide_seconds : 0);

	for (int i = 0; i < in->npending && i < d->npending; i++) {
		const struct sched_pending_out *o = &d->pending[i];
		const char *outcome = sched_metrics_outcome(d, i);
		const char *label = sched_metrics_reason((int)o->reason);

		decided_add(decided, &ndecided, outcome, label);
		if (o->reason == SCHED_PLACED) {
			int q = sched_queue_find(&s->world.queue, in->pending[i].job);

			/* a requeued job's submission predates its earlier attempts */
			if (q >= 0 && s->world.queue.v[q].attempt == 0)
				ty_metrics_observe(
				    m, M_QUEUE_WAIT,
				    (const char *[]){sched_class_name(in->pending[i].cls)},
				    in->now_ms > in->pending[i].submit_ms
					? (double)(in->now_ms - in->pending[i].submit_ms) / 1000.0
					: 0);
			continue;
		}
		for (int k = 0; pending_labels[k]; k++)
			if (!strcmp(pending_labels[k], label))
				pending[k]++;
	}
	/* the queue mirror still holds the jobs given to this cycle, and those it held back */
	if (s->world.queue.n > 0 && !(placed = calloc((size_t)s->world.queue.n, sizeof(*placed))))
		return;
	for (int k = 0; k < d->nplacements; k++) {
		int q = sched_queue_find(&s->world.queue, d->placements[k].job);

		if (q >= 0 && !placed[q]) {
			placed[q] = true;
			nplaced++;
		}
	}
	for (int q = 0; q < s->world.queue.n; q++) {
		const struct sched_qjob *j = &s->world.queue.v[q];

		if (placed[q])
			continue;
		if (oldest < 0 || j->submit_ms < oldest)
			oldest = j->submit_ms;
		if (j->held)
			pending[PENDING_PREVIOUS]++;
	}
	free(placed);
	/* neither given to the core nor held: waiting for their sweep's max_concurrent */
	{
		double counted = 0;

		for (int k = 0; pending_labels[k]; k++)
			counted += pending[k];
		if (s->world.queue.n - nplaced > (int)counted)
			pending[PENDING_SWEEP] += (double)(s->world.queue.n - nplaced) - counted;
	}
	/* one update per series, not per job: the queue may hold tens of thousands */
	for (int k = 0; k < ndecided; k++)
		ty_metrics_add(m, M_DECISIONS,
			       (const char *[]){decided[k].outcome, decided[k].reason},
			       decided[k].n);
	for (int k = 0; pending_labels[k]; k++)
		ty_metrics_set(m, M_PENDING, (const char *[]){pending_labels[k]}, pending[k]);
	ty_metrics_set(m, M_OLDEST, NULL,
		       oldest >= 0 && in->now_ms > oldest ? (double)(in->now_ms - oldest) / 1000.0
							  : 0);

	for (int i = 0; i < d->npreemptions; i++)
		ty_metrics_add(m, M_PREEMPTIONS,
			       (const char *[]){d->preemptions[i].why == SCHED_PREEMPT_CLASS
						    ? "priority"
						    : "reclaim"},
			       1);

	if (in->nteams > 0 && !(names = calloc((size_t)in->nteams, sizeof(*names))))
		return;
	for (int i = 0; i < in->nteams && i < d->nteams; i++) {
		const char *t[] = {in->teams[i].name};

		if (!t[0] || !(names[nnames] = strdup(t[0])))
			continue;
		nnames++;
		ty_metrics_set(m, M_TEAM_ALLOCATED, t, (double)d->teams[i].used);
		ty_metrics_set(m, M_TEAM_NOMINAL, t, (double)in->teams[i].nominal_gpus);
		ty_metrics_set(m, M_TEAM_BORROWED, t, (double)d->teams[i].borrowed);
		ty_metrics_set(m, M_TEAM_FAIR_SHARE, t, d->teams[i].fairshare);
		ty_metrics_set(m, M_TEAM_BUDGET, t, sched_metrics_budget_ratio(&in->teams[i]));
	}
	teams_set(sm, names, nnames);

	for (int i = 0; i < s->world.mirror.nnodes; i++) {
		const struct sched_mnode *n = &s->world.mirror.nodes[i];

		not_ready += n->fault;
		if (n->preempting)
			preempting++;
		else if (n->ready)
			ready++;
		else
			unschedulable++;
	}
	ty_metrics_set(m, M_NODES, (const char *[]){"ready"}, ready);
	ty_metrics_set(m, M_NODES, (const char *[]){"unschedulable"}, unschedulable);
	ty_metrics_set(m, M_NODES, (const char *[]){"preempting"}, preempting);
	ty_metrics_set(m, M_NOT_READY, NULL, not_ready);
}

void sched_metrics_cycle_failed(struct sched *s)
{
	if (reg(s))
		ty_metrics_add(reg(s), M_CYCLE_FAILURES, NULL, 1);
}

void sched_metrics_preempted(struct sched *s, const char *reason)
{
	if (reg(s))
		ty_metrics_add(reg(s), M_PREEMPTIONS, (const char *[]){reason}, 1);
}

void sched_metrics_requeued(struct sched *s, const char *cls, bool retry)
{
	const char *c[] = {sched_metrics_class(cls)};

	if (!reg(s))
		return;
	ty_metrics_add(reg(s), M_REQUEUES, c, 1);
	if (retry)
		ty_metrics_add(reg(s), M_RETRIES, c, 1);
}

void sched_metrics_kafka_error(struct sched_metrics *m, enum sched_kafka_error what)
{
	static const char *const names[] = {
	    [SCHED_KAFKA_PRODUCE] = M_PRODUCE_ERRORS,
	    [SCHED_KAFKA_DELIVERY] = M_DELIVERY_FAILURES,
	    [SCHED_KAFKA_CONSUME] = M_CONSUME_ERRORS,
	};

	if (mreg(m) && (int)what >= 0 && (size_t)what < sizeof(names) / sizeof(names[0]))
		ty_metrics_add(mreg(m), names[what], NULL, 1);
}

void sched_metrics_rejected(struct sched *s, enum proto_reject why)
{
	if (reg(s))
		ty_metrics_add(reg(s), M_REJECTED, (const char *[]){proto_reject_name(why)}, 1);
}

void sched_metrics_outbox(struct sched_metrics *m, int unsent, int inflight)
{
	if (!mreg(m))
		return;
	ty_metrics_set(mreg(m), M_OUTBOX, NULL, (double)unsent + inflight);
	ty_metrics_set(mreg(m), M_INFLIGHT, NULL, inflight);
}

void sched_metrics_kafka(struct sched *s)
{
	struct sched_metrics *sm = s->metrics;
	rd_kafka_topic_partition_list_t *parts = NULL;
	char **now = NULL;
	int n = 0;

	if (!sm)
		return;
	if (s->in.malformed > sm->skipped) {
		ty_metrics_add(sm->reg, M_SKIPPED, NULL, (double)(s->in.malformed - sm->skipped));
		sm->skipped = s->in.malformed;
	}
	if (s->in.bad_conditions > sm->bad_conditions) {
		ty_metrics_add(sm->reg, M_BAD_CONDITIONS, NULL,
			       (double)(s->in.bad_conditions - sm->bad_conditions));
		sm->bad_conditions = s->in.bad_conditions;
	}
	if (s->bus.consumer && !rd_kafka_assignment(s->bus.consumer, &parts) &&
	    rd_kafka_position(s->bus.consumer, parts) == RD_KAFKA_RESP_ERR_NO_ERROR &&
	    (now = calloc((size_t)parts->cnt + 1, sizeof(*now)))) {
		for (int i = 0; i < parts->cnt; i++) {
			const rd_kafka_topic_partition_t *p = &parts->elems[i];
			int64_t lo, hi;
			char pb[16];

			/* cached by the fetcher: no request; unknown until the first fetch */
			if (p->offset < 0 ||
			    rd_kafka_get_watermark_offsets(s->bus.consumer, p->topic, p->partition,
							   &lo, &hi) ||
			    hi < 0)
				continue;
			snprintf(pb, sizeof(pb), "%d", (int)p->partition);
			if (!(now[n] = malloc(strlen(p->topic) + strlen(pb) + 2)))
				continue;
			sprintf(now[n], "%s\n%s", p->topic, pb);
			n++;
			ty_metrics_set(sm->reg, M_LAG, (const char *[]){p->topic, pb},
				       (double)(hi > p->offset ? hi - p->offset : 0));
		}
	}
	if (parts)
		rd_kafka_topic_partition_list_destroy(parts);
	/* partitions no longer assigned (a standby has none): 0 */
	for (int i = 0; i < sm->nlags; i++) {
		bool kept = false;
		char *nl = strchr(sm->lags[i], '\n');

		for (int k = 0; k < n && !kept; k++)
			kept = !strcmp(sm->lags[i], now[k]);
		if (!kept && nl) {
			*nl = '\0';
			ty_metrics_set(sm->reg, M_LAG, (const char *[]){sm->lags[i], nl + 1}, 0);
		}
	}
	names_free(&sm->lags, &sm->nlags);
	sm->lags = now;
	sm->nlags = n;
}

void sched_metrics_node_conditions(struct sched *s, const struct sched_condition_count *v, int n)
{
	struct sched_metrics *sm = s->metrics;
	char **now = NULL;
	int k = 0;

	if (!sm)
		return;
	if (n > 0 && !(now = calloc((size_t)n, sizeof(*now))))
		return;
	for (int i = 0; i < n; i++) {
		const char *l[] = {v[i].node, v[i].kind, v[i].severity};

		ty_metrics_set(sm->reg, M_NODE_CONDITIONS, l, v[i].n);
		if ((now[k] = malloc(strlen(l[0]) + strlen(l[1]) + strlen(l[2]) + 3)))
			sprintf(now[k++], "%s\n%s\n%s", l[0], l[1], l[2]);
	}
	/* series no longer current: 0 (the registry cannot drop them) */
	for (int i = 0; i < sm->nconds; i++) {
		char *a = sm->conds[i], *b, *c;
		bool kept = false;

		for (int j = 0; j < k && !kept; j++)
			kept = !strcmp(a, now[j]);
		if (kept || !(b = strchr(a, '\n')) || !(c = strchr(b + 1, '\n')))
			continue;
		*b++ = '\0';
		*c++ = '\0';
		ty_metrics_set(sm->reg, M_NODE_CONDITIONS, (const char *[]){a, b, c}, 0);
	}
	names_free(&sm->conds, &sm->nconds);
	sm->conds = now;
	sm->nconds = k;
}
