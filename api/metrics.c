/*
 * GET /metrics: the API's request counters and latency histogram (kept in
 * a process-wide registry that every server thread updates), plus queue,
 * team, node and outbox gauges read from PostgreSQL at scrape time, one
 * query each. docs/metrics.md lists every series.
 */
#include "api.h"
#include "store.h"
#include "ty_log.h"
#include "ty_metrics.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REQUESTS "trainyard_api_requests_total"
#define DURATION "trainyard_api_request_duration_seconds"

static const double duration_bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
					 0.25,	0.5,	1,     2.5,  5,	    10};

static struct ty_metrics *requests;
static pthread_once_t requests_once = PTHREAD_ONCE_INIT;

static void requests_init(void)
{
	static const char *const req_labels[] = {"route", "method", "status", NULL};
	static const char *const dur_labels[] = {"route", NULL};
	struct ty_err err = {0};

	if (!(requests = ty_metrics_new()) ||
	    ty_metrics_family(requests, TY_METRIC_COUNTER, REQUESTS,
			      "API requests answered, by route pattern, method and status.",
			      req_labels, NULL, 0, &err) ||
	    ty_metrics_family(requests, TY_METRIC_HISTOGRAM, DURATION,
			      "Time from a request's arrival to its reply, by route pattern.",
			      dur_labels, duration_bounds,
			      (int)(sizeof(duration_bounds) / sizeof(duration_bounds[0])), &err)) {
		ty_error("metrics: cannot set up the request metrics: %s", err.msg);
		ty_metrics_free(requests);
		requests = NULL;
	}
}

double api__metrics_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void api__metrics_request(const struct api_req *r)
{
	/* unmatched paths share one label value: raw paths would be unbounded */
	const char *route = r->route ? r->route->pattern : "unmatched";
	char status[8];
	double took;

	pthread_once(&requests_once, requests_init);
	if (!requests)
		return;
	snprintf(status, sizeof(status), "%u", r->status);
	ty_metrics_add(requests, REQUESTS, (const char *[]){route, r->method, status}, 1);
	took = api__metrics_now() - r->started;
	ty_metrics_observe(requests, DURATION, (const char *[]){route}, took > 0 ? took : 0);
}

/* One scrape-time gauge family filled by one query. */
struct gauge {
	const char *name, *help;
	const char *labels[3]; /* NULL-terminated */
};

/* The query's first columns are the label values, the rest one value per gauge. */
struct query {
	enum api_gauge_query q;
	int nlabels;
	struct gauge gauges[4];
	int ngauges;
};

static const struct query queries[] = {
    {API_GAUGES_JOBS,
     2,
     {{"trainyard_jobs", "Jobs by state and team.", {"team", "state", NULL}}},
     1},
    {API_GAUGES_QUEUE,
     1,
     {{"trainyard_queue_pending_jobs", "Pending jobs per team.", {"team", NULL}},
      {"trainyard_queue_oldest_pending_age_seconds",
       "Age of the team's oldest pending job (0 when none is pending).",
       {"team", NULL}}},
     2},
    {API_GAUGES_TEAMS,
     1,
     {{"trainyard_team_gpus_allocated",
       "GPUs held by the team's live allocations.",
       {"team", NULL}},
      {"trainyard_team_gpus_nominal", "The team's nominal GPU quota.", {"team", NULL}},
      {"trainyard_team_gpus_borrowed",
       "GPUs the team uses above its nominal quota (as of the last scheduler cycle).",
       {"team", NULL}},
      {"trainyard_team_fair_share",
       "The team's fair-share factor 2^(-usage/share) (as of the last scheduler cycle).",
       {"team", NULL}}},
     4},
    {API_GAUGES_IDLE,
     1,
     {{"trainyard_jobs_gpus_idle",
       "Jobs holding GPUs idle on a node for at least their team's idle_gpu_alert_seconds "
       "(as of the node's last heartbeat).",
       {"team", NULL}}},
     1},
    {API_GAUGES_NODES,
     1,
     {{"trainyard_nodes", "Registered nodes by state, as GET /v1/nodes shows it.",
       {"state", NULL}}},
     1},
    {API_GAUGES_OUTBOX,
     0,
     {{"trainyard_dispatch_outbox_rows",
       "Dispatch messages written and not yet relayed to Kafka.",
       {NULL}}},
     1},
    {API_GAUGES_STORAGE,
     2,
     {{"trainyard_team_checkpoint_bytes",
       "Bytes of the team's checkpoints on the nodes' checkpoint storage (tier local) and in "
       "the object store (tier object_store), as the nodes last reported them.",
       {"team", "tier", NULL}}},
     1},
};
static int scrape_db(struct ty_metrics *m, struct ty_pg *pg, struct ty_arena *a,
		     struct ty_err *err)
{
	for (size_t q = 0; q < sizeof(queries) / sizeof(queries[0]); q++) {
		const struct query *qu = &queries[q];
		struct api_rows res;
		int rc;

		for (int g = 0; g < qu->ngauges; g++) {
			if ((rc = ty_metrics_family(m, TY_METRIC_GAUGE, qu->gauges[g].name,
						    qu->gauges[g].help, qu->gauges[g].labels, NULL,
						    0, err)))
				return rc;
		}
		if ((rc = api_store_gauge_rows(&res, pg, a, qu->q, err)))
			return rc;
		for (int row = 0; row < res.n; row++) {
			const char *const *cols = res.v + (size_t)row * (size_t)res.ncols;
			const char *values[3] = {NULL, NULL, NULL};

			for (int l = 0; l < qu->nlabels; l++)
				values[l] = cols[l];
			for (int g = 0; g < qu->ngauges; g++) {
				double v = strtod(cols[qu->nlabels + g], NULL);

				if ((rc = ty_metrics_set(m, qu->gauges[g].name,
							 qu->nlabels ? values : NULL, v)))
					return ty_err_set(err, rc, "metrics: cannot set %s",
							  qu->gauges[g].name);
			}
		}
	}
	return 0;
}

int api_h_metrics(struct api_req *r, struct ty_err *err)
{
	struct ty_buf out = TY_BUF_INIT;
	struct ty_metrics *db = ty_metrics_new();
	int rc;

	pthread_once(&requests_once, requests_init);
	if (!db || !requests) {
		ty_metrics_free(db);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	if (!(rc = api__pool_get(&r->pg, r->srv, err)) && !(rc = scrape_db(db, r->pg, r->arena, err)) &&
	    !(rc = ty_metrics_write(requests, &out)) && (rc = ty_metrics_write(db, &out)))
		ty_err_set(err, rc, NULL);
	ty_metrics_free(db);
	if (rc) {
		ty_buf_free(&out);
		return rc;
	}
	free(r->resp);
	r->resp_len = out.len;
	r->resp = ty_buf_detach(&out);
	r->status = 200;
	r->content_type = TY_METRICS_CONTENT_TYPE;
	return 0;
}
