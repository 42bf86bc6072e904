/*
 * The nodes SQL as typed calls (store.h): a node's document, the node
 * list, and the admin's drain, undrain and preempt.
 */
#include "notify.h"
#include "store.h"

/*
 * One node as JSON; GPUs in use are those of unreleased allocations, CPUs
 * and memory their jobs' per-node asks (NULL totals: not reported, not
 * limited). Conditions: the current ones (not cleared), fatal first. The state is
 * ty_node_state's: `not_ready` for a ready node whose register named a fault
 * (migrations/0024_node_fault.sql).
 */
#define NODE_JSON_SQL                                                                    \
	"json_build_object('id', n.id, 'address', n.address, 'labels', n.labels,"       \
	" 'state', ty_node_state(n.state, n.fault), 'fault', n.fault,"                  \
	" 'expected_gpus', n.expected_gpus,"                                            \
	" 'simulated', n.simulated, 'isolation', n.isolation,"                          \
	" 'gpus_total', n.gpus,"                                                        \
	" 'gpus_free', n.gpus - coalesce((SELECT sum(cardinality(a.gpus))"              \
	"   FROM allocations a WHERE a.node_id = n.id AND a.released_at IS NULL), 0),"  \
	" 'cpus_total', n.cpus, 'memory_mb_total', n.memory_mb,"                        \
	" 'cpus_free', n.cpus - coalesce((SELECT sum(coalesce("                         \
	"   (j.spec->'resources'->>'cpus_per_node')::bigint, 1)) FROM allocations a"     \
	"   JOIN jobs j ON j.id = a.job_id WHERE a.node_id = n.id"                      \
	"   AND a.released_at IS NULL), 0),"                                            \
	" 'memory_mb_free', n.memory_mb - coalesce((SELECT sum(coalesce("               \
	"   (j.spec->'resources'->>'memory_mb_per_node')::bigint, 1024))"                \
	"   FROM allocations a JOIN jobs j ON j.id = a.job_id WHERE a.node_id = n.id"   \
	"   AND a.released_at IS NULL), 0),"                                            \
	" 'running', coalesce((SELECT json_agg(json_build_object('job', a.job_id,"      \
	"   'attempt', a.attempt) ORDER BY a.job_id) FROM allocations a"                \
	"   JOIN jobs j ON j.id = a.job_id WHERE a.node_id = n.id"                      \
	"   AND a.released_at IS NULL AND ($1::bigint IS NULL OR j.team_id = $1)), '[]'),"   \
	" 'drain_reason', n.drain_reason,"                                              \
	" 'conditions', coalesce((SELECT json_agg(json_build_object('kind', c.kind,"    \
	"   'severity', c.severity, 'gpu', c.gpu, 'gpu_uuid', c.gpu_uuid,"               \
	"   'port', c.port, 'code', c.code, 'evidence', c.evidence,"                     \
	"   'first_seen', ty_ts(c.first_seen), 'last_seen', ty_ts(c.last_seen))"         \
	"   ORDER BY c.severity = 'fatal' DESC, c.first_seen, c.id)"                     \
	"   FROM node_conditions c WHERE c.node_id = n.id AND c.cleared_at IS NULL),"    \
	"   '[]'),"                                                                       \
	" 'preempt', CASE WHEN n.state = 'preempting' THEN json_build_object("         \
	"   'deadline', ty_ts(n.preempt_deadline), 'notice', n.preempt_notice) END,"     \
	" 'hcas', coalesce(n.inventory->'hcas', '[]'),"                                 \
	" 'failures', (SELECT json_build_object('count', count(*),"                     \
	"   'jobs', count(DISTINCT f.job_id),"                                          \
	"   'hardware', count(*) FILTER (WHERE f.failure_class = 'hardware'),"          \
	"   'last_at', ty_ts(max(f.created_at)))"                                       \
	"   FROM node_failures f WHERE f.node_id = n.id"                                \
	"   AND f.created_at > n.failures_since),"                                      \
	" 'last_heartbeat', ty_ts(n.last_heartbeat), 'registered_at',"                  \
	" ty_ts(n.registered_at))"

static const char list_sql[] =
	"SELECT json_build_object('items', coalesce(json_agg(" NODE_JSON_SQL
	" ORDER BY n.id), '[]'))::text FROM nodes n"
	" WHERE $2::text IS NULL OR ty_node_state(n.state, n.fault) = $2";

int api_store_nodes_list(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *scope,
			 const char *state, struct ty_err *err)
{
	const char *p[2] = {scope, state};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, list_sql, 2, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

static const char get_sql[] = "SELECT " NODE_JSON_SQL "::text FROM nodes n WHERE n.id = $2";

int api_store_node_get(const char **doc, struct ty_pg *pg, struct ty_arena *a, const char *scope,
		       const char *id, struct ty_err *err)
{
	const char *p[2] = {scope, id};
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, pg, get_sql, 2, p, err)))
		return rc;
	return api__store_first(doc, a, res, err);
}

/*
 * One UPDATE each (NODE_ADMIN_SET, its SET clause, NODE_ADMIN_RETURN), whose
 * SET clause may use $3 (the op's argument), returning
 * the node's document. A lost node keeps its state; draining it still
 * records the drain, so it comes back drained.
 */
#define NODE_ADMIN_SET "WITH u AS (UPDATE nodes n SET "
#define NODE_ADMIN_RETURN " WHERE n.id = $2 RETURNING n.*) SELECT " NODE_JSON_SQL "::text FROM u n"

/* a preempting node stays so; its drain reason makes it come back drained */
static const char drain_sql[] =
	NODE_ADMIN_SET "state = CASE WHEN n.state IN ('lost', 'preempting') THEN n.state"
	" WHEN EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id"
	"  AND a.released_at IS NULL) THEN 'draining' ELSE 'drained' END,"
	" drain_reason = coalesce(n.drain_reason, 'drained by an admin')" NODE_ADMIN_RETURN;

static const char undrain_sql[] =
	NODE_ADMIN_SET "state = CASE WHEN n.state = 'lost' THEN 'lost' ELSE 'ready' END,"
	" drain_reason = NULL, failures_since = now(),"
	" preempt_deadline = NULL, preempt_notice = NULL, preempt_seq = NULL" NODE_ADMIN_RETURN;

static const char preempt_sql[] =
	NODE_ADMIN_SET "state = CASE WHEN n.state = 'lost' THEN 'lost' ELSE 'preempting' END,"
	" preempt_deadline = now() + make_interval(secs => $3::int),"
	" preempt_notice = '{\"provider\": \"local\", \"action\": \"preempt\","
	" \"detail\": \"POST /v1/nodes/{id}/preempt\"}',"
	/* an executor's own notice keeps its seq: its heartbeats still end it */
	" preempt_seq = CASE WHEN n.state = 'preempting' THEN n.preempt_seq END" NODE_ADMIN_RETURN;

static const char notify_sql[] =
    "SELECT pg_notify('" PROTO_NOTIFY_CHANNEL "', '" PROTO_NOTIFY_NODE "' || $1)";

int api_store_node_admin(const char **doc, struct ty_pg *pg, struct ty_arena *a,
			 enum api_node_op op, const char *id, const char *arg, struct ty_err *err)
{
	const char *p[3] = {NULL, id, arg};
	PGresult *res = NULL;
	int rc;

	*doc = NULL;
	switch (op) {
	case API_NODE_DRAIN:
		rc = ty_pg_exec(&res, pg, drain_sql, 2, p, err);
		break;
	case API_NODE_UNDRAIN:
		rc = ty_pg_exec(&res, pg, undrain_sql, 2, p, err);
		break;
	case API_NODE_PREEMPT:
		rc = ty_pg_exec(&res, pg, preempt_sql, 3, p, err);
		break;
	default:
		return ty_err_set(err, TY_EINVAL, "no node operation %d", (int)op);
	}
	if (rc || (rc = api__store_first(doc, a, res, err)) || !*doc)
		return rc;
	return ty_pg_exec(NULL, pg, notify_sql, 1, p + 1, err);
}
