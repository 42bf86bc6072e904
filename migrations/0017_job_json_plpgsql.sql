-- The job document in PL/pgSQL rather than SQL: a SQL function that cannot
-- be inlined (this one has a sub-select) is parsed and planned again for
-- every statement that calls it, which was a quarter of the API backends'
-- time on a submission (bench/RESULTS.md, bench/slurm). PL/pgSQL keeps the
-- plan of its expression for the session. The document is unchanged.
CREATE OR REPLACE FUNCTION ty_job_json_for(j jobs, p_viewer bigint) RETURNS json
LANGUAGE plpgsql STABLE AS $$
BEGIN
	RETURN json_build_object('id', j.id,
		'team', (SELECT name FROM teams WHERE id = j.team_id),
		'name', j.name, 'state', j.state, 'spec', j.spec,
		'cancel_requested', j.cancel_requested, 'attempt', j.attempt,
		'failure_class', j.failure_class,
		'pending_reason',
			ty_redact_jobs(ty_pending_reason(j.state, j.pending_reason), p_viewer),
		'queue_position', CASE WHEN j.state = 'pending' THEN j.queue_position END,
		'reserved_until', CASE WHEN j.state = 'pending' THEN ty_ts(j.reserved_until) END,
		'preemptions', j.preemptions,
		'spot_preemptions', j.spot_preemptions,
		'created_at', ty_ts(j.created_at), 'updated_at', ty_ts(j.updated_at),
		'finished_at', ty_ts(j.finished_at));
END
$$;
