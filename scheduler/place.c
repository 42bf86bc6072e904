/*
 * A scheduling cycle: cancel what was asked to stop, then place pending
 * jobs. The decisions come from the pure core (core/core.h); this file
 * builds its snapshot from PostgreSQL and commits each placement - attempt,
 * allocations, job state, event and launch outbox rows - in one fenced
 * transaction.
 */
#include "core/core.h"
#include "scheduler.h"
#include "ty_buf.h"
#include "ty_log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PENDING_MAX "10000" /* jobs considered per cycle */

struct snap {
	struct sched_snapshot *s;
	char **addr; /* registered address per snapshot index */
	int n;
};

static void snap_free(struct snap *sn)
{
	for (int i = 0; i < sn->n; i++)
		free(sn->addr[i]);
	free(sn->addr);
	sched_snapshot_free(sn->s);
	memset(sn, 0, sizeof(*sn));
}

static int snap_load(struct snap *sn, struct sched *s, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc, n;

	memset(sn, 0, sizeof(*sn));
	if (!(sn->s = sched_snapshot_new(s->o.port_lo, s->o.port_hi)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((rc =
		 ty_pg_exec(&res, s->pg,
			    "SELECT id, address, gpus FROM nodes WHERE state = 'ready' ORDER BY id",
			    0, NULL, err)))
		goto out;
	n = PQntuples(res);
	if (n && !(sn->addr = calloc((size_t)n, sizeof(*sn->addr)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < n; i++) {
		if ((rc = sched_snapshot_add_node(sn->s, PQgetvalue(res, i, 0),
						  (int)sched_col_i64(res, i, 2), err)) < 0)
			goto out;
		if (!(sn->addr[sn->n++] = strdup(PQgetvalue(res, i, 1)))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	rc = 0;
	PQclear(res);
	/* GPUs held by allocations whose processes may still run */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT a.node_id, g FROM allocations a"
			     " CROSS JOIN LATERAL unnest(a.gpus) AS g WHERE a.released_at IS NULL",
			     0, NULL, err)))
		goto out;
	for (int i = 0; i < PQntuples(res); i++) {
		int at = sched_snapshot_find(sn->s, PQgetvalue(res, i, 0));

		if (at >= 0)
			sched_snapshot_use_gpu(sn->s, at, (int)sched_col_i64(res, i, 1));
	}
	PQclear(res);
	/* ports of live attempts, and of ended ones whose rank 0 may still hold it */
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT t.master_node, t.master_port FROM attempts t"
			     " WHERE t.ended_at IS NULL OR EXISTS (SELECT 1 FROM allocations a"
			     " WHERE a.job_id = t.job_id AND a.attempt = t.attempt"
			     " AND a.node_id = t.master_node AND a.released_at IS NULL)",
			     0, NULL, err)))
		goto out;
	for (int i = 0; i < PQntuples(res); i++) {
		int at = sched_snapshot_find(sn->s, PQgetvalue(res, i, 0));

		if (at >= 0 &&
		    (rc = sched_snapshot_use_port(sn->s, at, (int)sched_col_i64(res, i, 1), err)))
			goto out;
	}
out:
	PQclear(res);
	if (rc)
		snap_free(sn);
	return rc;
}

static int gangs_load(struct sched_gang **out, int *n, struct sched *s, struct ty_err *err)
{
	struct sched_gang *g = NULL;
	PGresult *res = NULL;
	int rc;

	*out = NULL;
	*n = 0;
	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT id, coalesce((spec->'resources'->>'nodes')::integer, 1),"
			     " coalesce((spec->'resources'->>'gpus_per_node')::integer, 0),"
			     " coalesce(spec->>'launch', 'per_gpu') = 'per_node'"
			     " FROM jobs j WHERE state = 'pending' AND NOT cancel_requested"
			     /* a retry starts once the last attempt's ranks are all gone */
			     " AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.job_id = j.id"
			     "  AND a.released_at IS NULL)"
			     " ORDER BY id LIMIT " PENDING_MAX,
			     0, NULL, err)))
		return rc;
	if (PQntuples(res) > 0 && !(g = calloc((size_t)PQntuples(res), sizeof(*g)))) {
		PQclear(res);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	for (int i = 0; i < PQntuples(res); i++) {
		g[i].job = sched_col_i64(res, i, 0);
		g[i].nodes = (int)sched_col_i64(res, i, 1);
		g[i].gpus_per_node = (int)sched_col_i64(res, i, 2);
		g[i].per_node = !strcmp(PQgetvalue(res, i, 3), "t");
	}
	*n = PQntuples(res);
	*out = g;
	PQclear(res);
	return 0;
}

json_t *sched_launch_data(const json_t *common, int node_rank, int first_rank, const json_t *gpus)
{
	json_t *d = json_deep_copy(common);

	if (!d || json_object_set_new(d, "node_rank", json_integer(node_rank)) ||
	    json_object_set_new(d, "first_rank", json_integer(first_rank)) ||
	    json_object_set_new(d, "gpus", json_deep_copy(gpus))) {
		json_decref(d);
		return NULL;
	}
	return d;
}

/* "{0,1,2}" and [0,1,2] of one node's GPUs. */
static int gpu_lists(struct ty_buf *b, json_t **arr, const int *gpus, int n)
{
	*arr = json_array();
	ty_buf_reset(b);
	ty_buf_puts(b, "{");
	for (int k = 0; k < n; k++) {
		ty_buf_printf(b, "%s%d", k ? "," : "", gpus[k]);
		if (*arr)
			json_array_append_new(*arr, json_integer(gpus[k]));
	}
	ty_buf_puts(b, "}");
	return !*arr || b->oom ? TY_ENOMEM : 0;
}

/*
 * Commit one placement. *placed is false when the job is no longer
 * placeable (cancelled, placed meanwhile) or a rendezvous port raced.
 */
static int commit(bool *placed, struct sched *s, const struct snap *sn,
		  const struct sched_placement *pl, struct ty_err *err)
{
	char jb[24], ab[24], eb[24], pb[24], nb[24], wb[24], rb[24], fb[24], lb[24], text[512];
	const char *master = sched_snapshot_node_id(sn->s, pl->node[0]);
	struct ty_buf gb = TY_BUF_INIT, names = TY_BUF_INIT;
	json_t *spec = NULL, *common = NULL, *gpus = NULL, *data = NULL, *edata = NULL;
	char *common_text = NULL;
	PGresult *res = NULL;
	int64_t attempt;
	int rc;

	*placed = false;
	if ((rc = sched_tx_begin(s->pg, s->epoch, err)))
		return rc;
	{
		const char *p[] = {sched_i64(jb, pl->job)};

		if ((rc = ty_pg_exec(
			 &res, s->pg,
			 "SELECT attempt, spec FROM jobs WHERE id = $1 AND state = 'pending'"
			 " AND NOT cancel_requested FOR UPDATE",
			 1, p, err)))
			goto fail;
	}
	if (PQntuples(res) != 1)
		goto fail; /* rc 0: nothing to do */
	attempt = sched_col_i64(res, 0, 0) + 1;
	spec = json_loads(PQgetvalue(res, 0, 1), 0, NULL);
	PQclear(res);
	res = NULL;
	if (!json_is_object(spec)) {
		rc = ty_err_set(err, TY_EPARSE, "job %lld has no valid spec", (long long)pl->job);
		goto fail;
	}
	const json_t *command = json_object_get(spec, "command");
	const json_t *env = json_object_get(spec, "env");
	const json_t *launch = json_object_get(spec, "launch");

	if (!json_is_array(command)) {
		rc = ty_err_set(err, TY_EPARSE, "job %lld has no command", (long long)pl->job);
		goto fail;
	}
	common = json_pack(
	    "{s:i, s:i, s:i, s:s, s:i, s:O, s:o, s:s, s:I, s:i}", "nnodes", pl->nnodes,
	    "world_size", pl->world_size, "local_world_size", pl->local_ranks, "master_addr",
	    sn->addr[pl->node[0]], "master_port", pl->master_port, "command", command, "env",
	    json_is_object(env) ? json_deep_copy(env) : json_object(), "launch",
	    json_is_string(launch) ? json_string_value(launch) : "per_gpu", "max_runtime_seconds",
	    (json_int_t)json_integer_value(json_object_get(spec, "max_runtime_seconds")),
	    "kill_grace_seconds", s->o.kill_grace_seconds);
	if (!common || !(common_text = json_dumps(common, JSON_COMPACT))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto fail;
	}
	{
		const char *p[] = {sched_i64(jb, pl->job),
				   sched_i64(ab, attempt),
				   sched_i64(eb, s->epoch),
				   master,
				   sn->addr[pl->node[0]],
				   sched_i64(pb, pl->master_port),
				   sched_i64(nb, pl->nnodes),
				   sched_i64(wb, pl->world_size),
				   common_text};

		if ((rc = ty_pg_exec(NULL, s->pg,
				     "INSERT INTO attempts (job_id, attempt, epoch, master_node,"
				     " master_addr, master_port, nnodes, world_size, launch)"
				     " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)",
				     9, p, err)))
			goto fail;
	}
	for (int r = 0; r < pl->nnodes; r++) {
		const char *node = sched_snapshot_node_id(sn->s, pl->node[r]);
		int first = r * pl->local_ranks;

		if (gpu_lists(&gb, &gpus, pl->gpus + (size_t)r * (size_t)pl->gpus_per_node,
			      pl->gpus_per_node)) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto fail;
		}
		const char *p[] = {sched_i64(jb, pl->job),
				   sched_i64(ab, attempt),
				   node,
				   sched_i64(rb, r),
				   sched_i64(fb, first),
				   sched_i64(lb, pl->local_ranks),
				   gb.data};
		if ((rc = ty_pg_exec(NULL, s->pg,
				     "INSERT INTO allocations (job_id, attempt, node_id, node_rank,"
				     " first_rank, local_ranks, gpus)"
				     " VALUES ($1, $2, $3, $4, $5, $6, $7::integer[])",
				     7, p, err)))
			goto fail;
		if (!(data = sched_launch_data(common, r, first, gpus))) {
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto fail;
		}
		if ((rc = sched_outbox_add(s, PROTO_LAUNCH, node, pl->job, attempt, data, err)))
			goto fail;
		json_decref(data);
		json_decref(gpus);
		data = gpus = NULL;
		ty_buf_printf(&names, "%s%s", r ? ", " : "", node);
	}
	{
		const char *p[] = {sched_i64(jb, pl->job), sched_i64(ab, attempt)};

		if ((rc = ty_pg_exec(
			 NULL, s->pg,
			 "UPDATE jobs SET state = 'scheduled', attempt = $2 WHERE id = $1", 2, p,
			 err)))
			goto fail;
	}
	snprintf(text, sizeof(text), "attempt %lld scheduled on %s: %d rank%s, master %s:%d",
		 (long long)attempt, names.data ? names.data : "", pl->world_size,
		 pl->world_size == 1 ? "" : "s", master, pl->master_port);
	edata = json_pack("{s:I, s:i, s:s, s:i}", "attempt", (json_int_t)attempt, "world_size",
			  pl->world_size, "master_node", master, "master_port", pl->master_port);
	if ((rc = sched_job_event(s, pl->job, "scheduled", "scheduled", text, edata, err)))
		goto fail;
	if ((rc = ty_pg_commit(s->pg, err)))
		goto out;
	*placed = true;
	goto out;
fail:
	ty_pg_rollback(s->pg);
out:
	PQclear(res);
	json_decref(spec);
	json_decref(common);
	json_decref(gpus);
	json_decref(data);
	json_decref(edata);
	free(common_text);
	ty_buf_free(&gb);
	ty_buf_free(&names);
	return rc;
}

/* Stop every active job whose cancel was requested; cancel pending ones at once. */
static int cancel_pass(struct sched *s, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	if ((rc = ty_pg_exec(&res, s->pg,
			     "SELECT j.id, j.attempt, j.state FROM jobs j LEFT JOIN attempts t"
			     " ON t.job_id = j.id AND t.attempt = j.attempt"
			     " WHERE j.cancel_requested AND (j.state = 'pending'"
			     " OR (j.state IN ('scheduled', 'starting', 'running', 'preempting')"
			     " AND t.state IN ('scheduled', 'starting', 'running')))"
			     " ORDER BY j.id",
			     0, NULL, err)))
		return rc;
	for (int i = 0; i < PQntuples(res) && !rc; i++) {
		int64_t job = sched_col_i64(res, i, 0), attempt = sched_col_i64(res, i, 1);
		const char *state = PQgetvalue(res, i, 2);
		char jb[24], ab[24], text[256];
		const char *p[] = {sched_i64(jb, job), sched_i64(ab, attempt)};
		PGresult *up = NULL;
		int kills = 0;

		if ((rc = sched_tx_begin(s->pg, s->epoch, err)))
			break;
		if (!strcmp(state, "pending")) {
			rc = ty_pg_exec(&up, s->pg,
					"UPDATE jobs SET state = 'cancelled', finished_at = now()"
					" WHERE id = $1 AND state = 'pending' RETURNING 1",
					1, p, err);
			if (!rc && PQntuples(up) > 0)
				rc = sched_job_event(s, job, "cancelled", "cancelled",
						     "cancelled while pending", NULL, err);
		} else {
			rc = ty_pg_exec(
			    &up, s->pg,
			    "UPDATE attempts SET state = 'stopping' WHERE job_id = $1"
			    " AND attempt = $2"
			    " AND state IN ('scheduled', 'starting', 'running') RETURNING 1",
			    2, p, err);
			if (!rc && PQntuples(up) > 0) {
				json_t *data = json_pack("{s:I}", "attempt", (json_int_t)attempt);

				if (!(rc = sched_kill_nodes(&kills, s, job, attempt, "cancel", NULL,
							    err))) {
					snprintf(
					    text, sizeof(text),
					    "cancel requested: stopping attempt %lld (kill sent to "
					    "%d node%s)",
					    (long long)attempt, kills, kills == 1 ? "" : "s");
					rc = sched_job_event(s, job, "stopping", state, text, data,
							     err);
				}
				json_decref(data);
				if (!rc)
					rc = sched_settle_attempt(s, job, attempt, err);
			}
		}
		PQclear(up);
		if (rc)
			ty_pg_rollback(s->pg);
		else
			rc = ty_pg_commit(s->pg, err);
	}
	PQclear(res);
	return rc;
}

int sched_cycle(struct sched *s, struct ty_err *err)
{
	struct sched_placement *pl = NULL;
	struct sched_gang *gangs = NULL;
	struct snap sn = {0};
	int rc, ngangs = 0, npl = 0, placed = 0;

	if ((rc = cancel_pass(s, err)))
		return rc;
	if ((rc = gangs_load(&gangs, &ngangs, s, err)))
		return rc;
	if (ngangs == 0)
		goto out;
	if ((rc = snap_load(&sn, s, err)))
		goto out;
	if ((rc = sched_core_cycle(&pl, &npl, sn.s, gangs, ngangs, err)))
		goto out;
	for (int i = 0; i < npl; i++) {
		struct ty_err perr = {0};
		bool ok = false;

		if ((rc = commit(&ok, s, &sn, &pl[i], &perr))) {
			if (rc == TY_EFENCED || rc == TY_EUNAVAIL) {
				ty_err_set(err, rc, "%s", perr.msg);
				goto out;
			}
			/* one job's trouble must not block the others */
			ty_warn("cannot place job %lld: %s", (long long)pl[i].job, perr.msg);
			rc = 0;
		}
		placed += ok;
	}
	if (placed)
		ty_debug("placed %d of %d pending job(s)", placed, ngangs);
out:
	sched_placements_free(pl, npl);
	snap_free(&sn);
	free(gangs);
	return rc;
}
