/* The route table: everything the dispatcher checks before a handler runs. */
#include "api.h"
#include "sweep.h"

const struct api_route api_routes[] = {
	/* method   pattern                   handler               role             flags */
	{"GET", "/healthz", api_h_healthz, API_ROLE_NONE, 0},
	{"GET", "/readyz", api_h_readyz, API_ROLE_NONE, 0},
	{"GET", "/openapi.json", api_h_openapi, API_ROLE_NONE, 0},
	{"GET", "/metrics", api_h_metrics, API_ROLE_NONE, 0},
	{"POST", "/v1/teams", api_h_teams_create, API_ROLE_ADMIN, API_AUTH | API_BODY},
	{"GET", "/v1/teams", api_h_teams_list, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/teams/{}", api_h_teams_get, API_ROLE_VIEWER, API_AUTH},
	{"PATCH", "/v1/teams/{}", api_h_teams_patch, API_ROLE_ADMIN, API_AUTH | API_BODY},
	{"GET", "/v1/teams/{}/history", api_h_teams_history, API_ROLE_VIEWER, API_AUTH},
	{"POST", "/v1/tokens", api_h_tokens_create, API_ROLE_ADMIN, API_AUTH | API_BODY},
	{"GET", "/v1/tokens", api_h_tokens_list, API_ROLE_ADMIN, API_AUTH},
	{"DELETE", "/v1/tokens/{}", api_h_tokens_delete, API_ROLE_ADMIN, API_AUTH},
	{"POST", "/v1/jobs", api_h_jobs_submit, API_ROLE_MEMBER, API_AUTH | API_BODY},
	{"GET", "/v1/jobs", api_h_jobs_list, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/jobs/{}", api_h_jobs_get, API_ROLE_VIEWER, API_AUTH | API_JOB},
	{"POST", "/v1/jobs/{}/cancel", api_h_jobs_cancel, API_ROLE_MEMBER, API_AUTH | API_JOB},
	{"POST", "/v1/jobs/{}/stop", api_h_jobs_stop, API_ROLE_MEMBER, API_AUTH | API_JOB},
	{"GET", "/v1/jobs/{}/events", api_h_jobs_events, API_ROLE_VIEWER, API_AUTH | API_JOB},
	{"GET", "/v1/jobs/{}/attempts", api_h_jobs_attempts, API_ROLE_VIEWER, API_AUTH | API_JOB},
	{"GET", "/v1/jobs/{}/checkpoints", api_h_jobs_checkpoints, API_ROLE_VIEWER,
	 API_AUTH | API_JOB},
	{"GET", "/v1/jobs/{}/logs", api_h_jobs_logs, API_ROLE_VIEWER, API_AUTH | API_JOB},
	{"POST", "/v1/jobs/{}/metrics", api_h_job_metrics_post, API_ROLE_MEMBER,
	 API_AUTH | API_BODY | API_JOB | API_TRIAL},
	{"GET", "/v1/jobs/{}/metrics", api_h_job_metrics_get, API_ROLE_VIEWER,
	 API_AUTH | API_JOB | API_TRIAL},
	{"POST", "/v1/sweeps", api_h_sweeps_create, API_ROLE_MEMBER, API_AUTH | API_BODY},
	{"GET", "/v1/sweeps", api_h_sweeps_list, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/sweeps/{}", api_h_sweeps_get, API_ROLE_VIEWER, API_AUTH},
	/* viewer: the handler answers 404 for other teams' sweeps before 403 */
	{"POST", "/v1/sweeps/{}/cancel", api_h_sweeps_cancel, API_ROLE_VIEWER, API_AUTH},
	{"POST", "/v1/webhooks", api_h_webhooks_create, API_ROLE_MEMBER, API_AUTH | API_BODY},
	{"GET", "/v1/webhooks", api_h_webhooks_list, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/webhooks/{}", api_h_webhooks_get, API_ROLE_VIEWER, API_AUTH},
	/* viewer: the handlers answer 404 for other teams' webhooks before 403 */
	{"DELETE", "/v1/webhooks/{}", api_h_webhooks_delete, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/webhooks/{}/deliveries", api_h_webhooks_deliveries, API_ROLE_VIEWER, API_AUTH},
	{"POST", "/v1/webhooks/{}/ping", api_h_webhooks_ping, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/queue", api_h_queue_list, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/nodes", api_h_nodes_list, API_ROLE_VIEWER, API_AUTH},
	{"GET", "/v1/nodes/{}", api_h_nodes_get, API_ROLE_VIEWER, API_AUTH},
	{"POST", "/v1/nodes/{}/drain", api_h_nodes_drain, API_ROLE_ADMIN, API_AUTH},
	{"POST", "/v1/nodes/{}/undrain", api_h_nodes_undrain, API_ROLE_ADMIN, API_AUTH},
	{"GET", "/v1/usage", api_h_usage, API_ROLE_VIEWER, API_AUTH},
	{"POST", "/v1/nodes/{}/preempt", api_h_nodes_preempt, API_ROLE_ADMIN, API_AUTH | API_BODY},
	{"GET", "/v1/audit", api_h_audit_list, API_ROLE_ADMIN, API_AUTH},
};
const int api_routes_count = sizeof(api_routes) / sizeof(api_routes[0]);
