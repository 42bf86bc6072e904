/*
 * What nodes report of themselves: registers and heartbeats (one at a time
 * and set-based), and the finished attempts their heartbeats repeat, whose
 * exits reconciliation applies when their attempt_exited never comes.
 */
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char SQL_NODE_GET[] = "SELECT boot_id, state, last_seq, gpus, preempt_seq,"
				   " coalesce(cpus, 0), coalesce(memory_mb, 0) FROM nodes"
				   " WHERE id = $1 FOR UPDATE";

int sched_store_node_get(struct sched_store_node *n, struct ty_pg *pg, const char *node,
			 struct ty_err *err)
{
	const char *p[] = {node};
	PGresult *res = NULL;
	int rc;

	memset(n, 0, sizeof(*n));
	if ((rc = ty_pg_exec(&res, pg, SQL_NODE_GET, 1, p, err)))
		return rc;
	if (PQntuples(res) == 1) {
		n->exists = true;
		snprintf(n->boot_id, sizeof(n->boot_id), "%s", PQgetvalue(res, 0, 0));
		n->lost = !strcmp(PQgetvalue(res, 0, 1), "lost");
		n->last_seq = sched_col_i64(res, 0, 2);
		n->gpus = (int)sched_col_i64(res, 0, 3);
		n->preempting = !strcmp(PQgetvalue(res, 0, 1), "preempting");
		n->preempt_seq = sched_col_i64(res, 0, 4);
		n->cpus = sched_col_i64(res, 0, 5);
		n->memory_mb = sched_col_i64(res, 0, 6);
	}
	PQclear(res);
	return 0;
}

/*
 * The state is left alone (an admin's drain, suspect, preempting): the
 * fault is beside it, and the mirror reads a node as ready only in state
 * ready without one. RETURNING gives the fault before this register (the
 * CTE reads the row as it was; sched_store_node_get locked it).
 */
static const char SQL_NODE_REGISTER[] =
    "WITH old AS (SELECT fault FROM nodes WHERE id = $1)"
    " INSERT INTO nodes (id, address, labels, gpus, simulated, boot_id,"
    " log_url, inventory, last_seq, cpus, memory_mb, isolation, fault,"
    " expected_gpus)"
    " VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8::jsonb, $9, $10, $11, $12,"
    " $13, $14)"
    " ON CONFLICT (id) DO UPDATE SET address = EXCLUDED.address,"
    " labels = EXCLUDED.labels, gpus = EXCLUDED.gpus,"
    " cpus = EXCLUDED.cpus, memory_mb = EXCLUDED.memory_mb,"
    " isolation = EXCLUDED.isolation,"
    " simulated = EXCLUDED.simulated, boot_id = EXCLUDED.boot_id,"
    " log_url = EXCLUDED.log_url, inventory = EXCLUDED.inventory,"
    " fault = EXCLUDED.fault, expected_gpus = EXCLUDED.expected_gpus,"
    " last_seq = EXCLUDED.last_seq, last_heartbeat = now(),"
    " state = CASE WHEN nodes.state <> 'lost' THEN nodes.state"
    "  WHEN nodes.drain_reason IS NULL THEN 'ready' ELSE 'drained' END"
    " RETURNING (SELECT fault FROM old)";

int sched_store_node_register(char **fault_was, struct ty_pg *pg,
			      const struct sched_store_register *r, struct ty_err *err)
{
	char gb[24], sb[24], cb[24], mb[24], eb[24];
	const char *p[] = {r->node,
			   r->address,
			   r->labels,
			   sched_i64(gb, r->gpus),
			   r->simulated ? "t" : "f",
			   r->boot_id,
			   r->log_url,
			   r->inventory,
			   sched_i64(sb, r->seq),
			   r->cpus > 0 ? sched_i64(cb, r->cpus) : NULL,
			   r->memory_mb > 0 ? sched_i64(mb, r->memory_mb) : NULL,
			   r->isolation,
			   r->fault,
			   r->expected_gpus > 0 ? sched_i64(eb, r->expected_gpus) : NULL};
	PGresult *res = NULL;
	int rc;

	*fault_was = NULL;
	if ((rc = ty_pg_exec(&res, pg, SQL_NODE_REGISTER, 14, p, err)))
		return rc;
	if (ty_pg_val(res, 0, 0) && !(*fault_was = strdup(ty_pg_val(res, 0, 0))))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	PQclear(res);
	return rc;
}

static const char SQL_NODE_HEARTBEAT[] =
    "UPDATE nodes SET last_heartbeat = now(), last_seq = $2,"
    " running = $3::jsonb, boot_id = $4,"
    " state = CASE WHEN state <> 'lost' THEN state"
    "  WHEN drain_reason IS NULL THEN 'ready' ELSE 'drained' END"
    " WHERE id = $1";

int sched_store_node_heartbeat(struct ty_pg *pg, const char *node, int64_t seq, const char *running,
			       const char *boot_id, struct ty_err *err)
{
	char sb[24];
	const char *p[] = {node, sched_i64(sb, seq), running, boot_id};

	return ty_pg_exec(NULL, pg, SQL_NODE_HEARTBEAT, 4, p, err);
}

/*
 * The newest heartbeat of each node that is ready (not lost, not
 * preempting), of the boot it registered and newer than what was
 * applied: what a heartbeat one at a time does in that case, for all at
 * once — a plain heartbeat lists no condition, so the node's current ones
 * are cleared (column 2 says which).
 */
static const char SQL_NODE_HEARTBEATS[] =
    "WITH m AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS m(node text, seq bigint,"
    "  boot text, running jsonb, ord integer)),"
    " l AS (SELECT DISTINCT ON (node) * FROM m ORDER BY node, ord DESC),"
    " u AS (UPDATE nodes n SET last_heartbeat = now(), last_seq = l.seq,"
    "  running = l.running FROM l WHERE n.id = l.node AND n.boot_id = l.boot"
    "  AND n.state NOT IN ('lost', 'preempting') AND n.last_seq < l.seq"
    "  RETURNING n.id),"
    " cl AS (UPDATE node_conditions t SET cleared_at = now() FROM u"
    "  WHERE t.node_id = u.id AND t.cleared_at IS NULL"
    /* the scheduler's own straggler condition, while it holds (node_conditions.c) */
    "  AND NOT (t.kind = '" SCHED_CONDITION_STRAGGLER "'"
    "  AND t.last_seen > now() - interval '" SCHED_STRAGGLER_HOLD "')"
    "  RETURNING t.node_id, t.severity || ' condition ' || t.kind || ': ' || t.evidence"
    "  AS what)"
    " SELECT id, (SELECT string_agg(what, '; ') FROM cl WHERE cl.node_id = u.id)"
    " FROM u ORDER BY id";

void sched_store_beats_free(struct sched_store_beat_applied *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].node);
		free(v[i].cleared);
	}
	free(v);
}

int sched_store_node_heartbeats(struct sched_store_beat_applied **out, int *nout, struct ty_pg *pg,
				const struct sched_store_beat *v, int n, struct ty_err *err)
{
	json_t *beats = json_array();
	struct sched_store_beat_applied *o = NULL;
	PGresult *res = NULL;
	char *text = NULL;
	int rc = 0, no = 0;

	*out = NULL;
	*nout = 0;
	if (!beats)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++) {
		json_t *rec = json_pack("{s:s, s:I, s:s, s:O, s:i}", "node", v[i].node, "seq",
					(json_int_t)v[i].seq, "boot", v[i].boot_id, "running",
					v[i].running, "ord", i);

		if (!rec || json_array_append_new(beats, rec)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	if (!(text = json_dumps(beats, JSON_COMPACT | JSON_REAL_PRECISION(15)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {text};

	if ((rc = ty_pg_exec(&res, pg, SQL_NODE_HEARTBEATS, 1, p, err)))
		goto out;
	if (PQntuples(res) > 0 && !(o = calloc((size_t)PQntuples(res), sizeof(*o)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (; no < PQntuples(res); no++)
		if (!(o[no].node = strdup(PQgetvalue(res, no, 0))) ||
		    (ty_pg_val(res, no, 1) && !(o[no].cleared = strdup(ty_pg_val(res, no, 1))))) {
			no++;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	*out = o;
	*nout = no;
	o = NULL;
out:
	sched_store_beats_free(o, no);
	PQclear(res);
	json_decref(beats);
	free(text);
	return rc;
}

/*
 * Of the finished attempts the heartbeats list ($1: records {node, job,
 * attempt, exit_code, failure_class, message, evidence, log_only,
 * condition}), those whose part has not exited yet.
 */
static const char SQL_FINISHED_UNCONFIRMED[] =
    "SELECT DISTINCT ON (f.node, f.job, f.attempt) f.job, f.attempt,"
    " f.exit_code, f.failure_class, f.message, f.evidence, f.node,"
    " f.log_only, nullif(f.condition, 'null')::text"
    " FROM jsonb_to_recordset($1::jsonb) AS f(node text, job bigint,"
    "  attempt integer, exit_code integer, failure_class text, message text,"
    "  evidence text, log_only boolean, condition jsonb)"
    " JOIN allocations a ON a.job_id = f.job AND a.attempt = f.attempt"
    "  AND a.node_id = f.node"
    " WHERE a.exited_at IS NULL";

void sched_store_finished_free(struct sched_store_finished *v, int n)
{
	for (int i = 0; v && i < n; i++) {
		free(v[i].message);
		free(v[i].evidence);
		free(v[i].condition);
	}
	free(v);
}

int sched_store_finished_unconfirmed(struct sched_store_finished **out, int *nout, struct ty_pg *pg,
				     const json_t *records, struct ty_err *err)
{
	struct sched_store_finished *o = NULL;
	PGresult *res = NULL;
	char *text = NULL;
	int rc = 0, no = 0;

	*out = NULL;
	*nout = 0;
	if (!(text = json_dumps(records, JSON_COMPACT)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	const char *p[] = {text};

	if ((rc = ty_pg_exec(&res, pg, SQL_FINISHED_UNCONFIRMED, 1, p, err)))
		goto out;
	if (PQntuples(res) > 0 && !(o = calloc((size_t)PQntuples(res), sizeof(*o)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (; no < PQntuples(res); no++) {
		struct sched_store_finished *x = &o[no];

		x->job = sched_col_i64(res, no, 0);
		x->attempt = sched_col_i64(res, no, 1);
		x->exit_code = (int)sched_col_i64(res, no, 2);
		snprintf(x->failure_class, sizeof(x->failure_class), "%s", PQgetvalue(res, no, 3));
		snprintf(x->node, sizeof(x->node), "%s", PQgetvalue(res, no, 6));
		x->log_only = !strcmp(PQgetvalue(res, no, 7), "t");
		if (!(x->message = strdup(PQgetvalue(res, no, 4))) ||
		    !(x->evidence = strdup(PQgetvalue(res, no, 5))) ||
		    (ty_pg_val(res, no, 8) && !(x->condition = strdup(ty_pg_val(res, no, 8))))) {
			no++;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = o;
	*nout = no;
	o = NULL;
out:
	sched_store_finished_free(o, no);
	PQclear(res);
	free(text);
	return rc;
}

/* Which of the parts given ($1: {i, job, attempt, node}) have not exited: their i. */
static const char SQL_PARTS_LIVE[] =
    "SELECT k.i FROM jsonb_to_recordset($1::jsonb)"
    " AS k(i integer, job bigint, attempt integer, node text)"
    " JOIN allocations a ON a.job_id = k.job AND a.attempt = k.attempt"
    "  AND a.node_id = k.node WHERE a.exited_at IS NULL";

int sched_store_parts_live(bool *live, struct ty_pg *pg, const struct sched_store_part *v, int n,
			   struct ty_err *err)
{
	json_t *keys = json_array();
	PGresult *res = NULL;
	char *text = NULL;
	int rc = 0;

	for (int i = 0; i < n; i++)
		live[i] = false;
	if (!keys)
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < n; i++)
		if (json_array_append_new(
			keys, json_pack("{s:i, s:I, s:I, s:s}", "i", i, "job", (json_int_t)v[i].job,
					"attempt", (json_int_t)v[i].attempt, "node", v[i].node))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	if (!(text = json_dumps(keys, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	const char *p[] = {text};

	if ((rc = ty_pg_exec(&res, pg, SQL_PARTS_LIVE, 1, p, err)))
		goto out;
	for (int r = 0; r < PQntuples(res); r++) {
		int64_t i = sched_col_i64(res, r, 0);

		if (i >= 0 && i < n)
			live[i] = true;
	}
out:
	PQclear(res);
	free(text);
	json_decref(keys);
	return rc;
}
