/*
 * Nodes' health conditions (node_conditions) as their heartbeats, registers
 * and exits report them, the drain a fatal one causes, and their counts.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * A straggler condition is the scheduler's, not in the executor's list:
 * its heartbeats do not clear it while it holds (SCHED_STRAGGLER_HOLD).
 */
#define STRAGGLER_HELD                                                                             \
	"(t.kind = '" SCHED_CONDITION_STRAGGLER "' AND t.last_seen > now() - interval '"           \
	SCHED_STRAGGLER_HOLD "')"

/* cleared conditions are kept this long (pruned when the node registers) */
#define CONDITION_HISTORY_DAYS "30"

/*
 * Record node's conditions ($3, clean ones as [{kind, severity, gpu,
 * gpu_uuid, port, code, evidence, first_seen, last_seen}]) as its boot $2
 * (NULL: the node's current one) reports them. An occurrence is (kind,
 * gpu, port, code, first_seen) of a boot: one recorded before is brought up
 * to date (reopened if an older message had cleared it), a new one
 * inserted. With $4 (a heartbeat's or register's whole list) every current
 * condition not listed is cleared, an earlier boot's included, but for a
 * straggler one while it holds. Rows back:
 * what ('new', 'fatal': listed before as degraded, now fatal; 'cleared'),
 * severity, kind, evidence.
 */
static const char SQL_CONDITIONS_RECORD[] =
    "WITH k AS (SELECT DISTINCT ON (kind, coalesce(gpu, -1), coalesce(port, ''),"
    "  coalesce(code, -1), first_seen) *,"
    "  timestamptz 'epoch' + first_seen * interval '1 millisecond' AS fs,"
    "  timestamptz 'epoch' + last_seen * interval '1 millisecond' AS ls"
    "  FROM jsonb_to_recordset($3::jsonb) AS c(kind text, severity text, gpu integer,"
    "  gpu_uuid text, port text, code bigint, evidence text, first_seen bigint,"
    "  last_seen bigint)"
    "  ORDER BY kind, coalesce(gpu, -1), coalesce(port, ''), coalesce(code, -1), first_seen,"
    "  last_seen DESC),"
    " b AS (SELECT coalesce($2, (SELECT boot_id FROM nodes WHERE id = $1)) AS boot),"
    " old AS (SELECT t.id, t.severity AS was, k.* FROM node_conditions t, k, b"
    "  WHERE t.node_id = $1 AND t.boot_id = b.boot AND t.kind = k.kind"
    "  AND coalesce(t.gpu, -1) = coalesce(k.gpu, -1)"
    "  AND coalesce(t.port, '') = coalesce(k.port, '')"
    "  AND coalesce(t.code, -1) = coalesce(k.code, -1) AND t.first_seen = k.fs),"
    " upd AS (UPDATE node_conditions t SET severity = old.severity,"
    "  gpu_uuid = old.gpu_uuid, evidence = old.evidence,"
    "  last_seen = greatest(t.last_seen, old.ls), cleared_at = NULL"
    "  FROM old WHERE t.id = old.id RETURNING t.id),"
    " ins AS (INSERT INTO node_conditions (node_id, boot_id, kind, severity, gpu, gpu_uuid,"
    "  port, code, evidence, first_seen, last_seen)"
    "  SELECT $1, b.boot, k.kind, k.severity, k.gpu, k.gpu_uuid, k.port, k.code, k.evidence,"
    "  k.fs, k.ls FROM k, b WHERE NOT EXISTS (SELECT 1 FROM old WHERE old.kind = k.kind"
    "  AND old.gpu IS NOT DISTINCT FROM k.gpu AND old.port IS NOT DISTINCT FROM k.port"
    "  AND old.code IS NOT DISTINCT FROM k.code AND old.fs = k.fs)"
    "  RETURNING severity, kind, evidence),"
    " clr AS (UPDATE node_conditions t SET cleared_at = now() WHERE $4::boolean"
    "  AND t.node_id = $1 AND t.cleared_at IS NULL AND t.id NOT IN (SELECT id FROM old)"
    "  AND NOT " STRAGGLER_HELD
    "  RETURNING t.severity, t.kind, t.evidence)"
    " SELECT 'new', severity, kind, evidence FROM ins"
    " UNION ALL SELECT 'fatal', severity, kind, evidence FROM old"
    "  WHERE was <> 'fatal' AND severity = 'fatal'"
    " UNION ALL SELECT 'cleared', severity, kind, evidence FROM clr";

void sched_store_condition_changes_free(struct sched_store_condition_change *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].kind);
		free(v[i].evidence);
	}
	free(v);
}

int sched_store_conditions_record(struct sched_store_condition_change **out, int *nout,
				  struct ty_pg *pg, const char *node, const char *boot_id,
				  const json_t *clean, bool whole, struct ty_err *err)
{
	char *text = json_dumps(clean, JSON_COMPACT);
	const char *p[] = {node, boot_id, text, whole ? "t" : "f"};
	struct sched_store_condition_change *v = NULL;
	PGresult *res = NULL;
	int rc, nv = 0;

	*out = NULL;
	*nout = 0;
	if (!text)
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((rc = ty_pg_exec(&res, pg, SQL_CONDITIONS_RECORD, 4, p, err)))
		goto out;
	if (PQntuples(res) > 0 && !(v = calloc((size_t)PQntuples(res), sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (; nv < PQntuples(res); nv++) {
		const char *what = PQgetvalue(res, nv, 0);

		v[nv].what = !strcmp(what, "cleared") ? SCHED_CONDITION_CLEARED
			     : !strcmp(what, "fatal") ? SCHED_CONDITION_NOW_FATAL
						      : SCHED_CONDITION_NEW;
		v[nv].fatal = !strcmp(PQgetvalue(res, nv, 1), "fatal");
		snprintf(v[nv].severity, sizeof(v[nv].severity), "%s", PQgetvalue(res, nv, 1));
		if (!(v[nv].kind = strdup(PQgetvalue(res, nv, 2))) ||
		    !(v[nv].evidence = strdup(PQgetvalue(res, nv, 3)))) {
			nv++;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = v;
	*nout = nv;
	v = NULL;
out:
	sched_store_condition_changes_free(v, nv);
	PQclear(res);
	free(text);
	return rc;
}

static const char SQL_CONDITION_DRAIN[] =
    "UPDATE nodes n SET drain_reason = $2,"
    " state = CASE WHEN n.state NOT IN ('ready', 'suspect') THEN n.state"
    "  WHEN EXISTS (SELECT 1 FROM allocations a WHERE a.node_id = n.id"
    "  AND a.released_at IS NULL) THEN 'draining' ELSE 'drained' END"
    " WHERE n.id = $1 RETURNING n.state";

int sched_store_condition_drain(char *state, size_t size, struct ty_pg *pg, const char *node,
				const char *reason, struct ty_err *err)
{
	const char *p[] = {node, reason};
	PGresult *res = NULL;
	int rc;

	*state = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_CONDITION_DRAIN, 2, p, err)))
		return rc;
	if (PQntuples(res) == 1)
		snprintf(state, size, "%s", PQgetvalue(res, 0, 0));
	PQclear(res);
	return 0;
}

static const char SQL_CONDITIONS_PRUNE[] =
    "DELETE FROM node_conditions WHERE node_id = $1"
    " AND cleared_at < now() - interval '" CONDITION_HISTORY_DAYS " days'";

int sched_store_conditions_prune(struct ty_pg *pg, const char *node, struct ty_err *err)
{
	const char *p[] = {node};

	return ty_pg_exec(NULL, pg, SQL_CONDITIONS_PRUNE, 1, p, err);
}

static const char SQL_CONDITIONS_COUNT[] =
    "SELECT node_id, kind, severity, count(*) FROM node_conditions"
    " WHERE cleared_at IS NULL GROUP BY 1, 2, 3 ORDER BY 1, 2, 3";

void sched_store_condition_counts_free(struct sched_store_condition_count *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].kind);
		free(v[i].severity);
	}
	free(v);
}

int sched_store_conditions_count(struct sched_store_condition_count **out, int *nout,
				 struct ty_pg *pg, struct ty_err *err)
{
	struct sched_store_condition_count *v = NULL;
	PGresult *res = NULL;
	int rc, nv = 0;

	*out = NULL;
	*nout = 0;
	if ((rc = ty_pg_exec(&res, pg, SQL_CONDITIONS_COUNT, 0, NULL, err)))
		return rc;
	if (PQntuples(res) > 0 && !(v = calloc((size_t)PQntuples(res), sizeof(*v)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (; nv < PQntuples(res); nv++) {
		v[nv].n = (int)sched_col_i64(res, nv, 3);
		if (!(v[nv].node = strdup(PQgetvalue(res, nv, 0))) ||
		    !(v[nv].kind = strdup(PQgetvalue(res, nv, 1))) ||
		    !(v[nv].severity = strdup(PQgetvalue(res, nv, 2)))) {
			nv++;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = v;
	*nout = nv;
	v = NULL;
out:
	sched_store_condition_counts_free(v, nv);
	PQclear(res);
	return rc;
}
