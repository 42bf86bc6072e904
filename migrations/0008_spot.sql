-- Spot preemption (docs/dispatch.md, "Spot notices"): the `preempting` node
-- state with its notice, the resume point each attempt started from, and the
-- per-job count of spot preemptions the spot policy reads.

-- A node with a spot interruption notice (from its executor, or from
-- POST /v1/nodes/{id}/preempt) takes no new work; its gangs checkpoint and are
-- killed before preempt_deadline. preempt_notice is what the notice said
-- (provider, action, detail; provider 'local' for the API). preempt_seq is the
-- envelope seq of the executor message that carried it (NULL for the API): a
-- later heartbeat of the node without a notice ends the state, an older one
-- (Kafka does not order heartbeats against events) does not.
ALTER TABLE nodes DROP CONSTRAINT nodes_state_check;
ALTER TABLE nodes ADD CONSTRAINT nodes_state_check
	CHECK (state IN ('ready', 'suspect', 'draining', 'drained', 'preempting', 'lost'));
ALTER TABLE nodes ADD COLUMN preempt_deadline timestamptz;
ALTER TABLE nodes ADD COLUMN preempt_notice jsonb;
ALTER TABLE nodes ADD COLUMN preempt_seq bigint;

-- Where the attempt resumed from, as its first node's attempt_running said:
-- resume_from NULL = from scratch; resume_skipped lists the newer checkpoints
-- passed over ([{path, step, status, reason}]), so the attempt record says
-- why it fell back or started from scratch. resume_skipped NULL = not
-- reported (yet, or by an executor that does not verify checkpoints).
ALTER TABLE attempts ADD COLUMN resume_from text;
ALTER TABLE attempts ADD COLUMN resume_step bigint;
ALTER TABLE attempts ADD COLUMN resume_skipped jsonb;
-- The node whose spot notice preempted the attempt (NULL: not a spot preemption).
ALTER TABLE attempts ADD COLUMN spot_node text;

-- Spot preemptions of the job (a subset of jobs.preemptions, which also
-- counts reclaim): after spec.spot.max_preemptions of them a job with
-- fallback "on_demand" is placed only on on-demand nodes.
ALTER TABLE jobs ADD COLUMN spot_preemptions integer NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION ty_job_json_for(j jobs, p_viewer bigint) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', j.id,
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
		'finished_at', ty_ts(j.finished_at))
$$;
