-- The API's views of what the scheduler publishes (0004): job objects gain
-- the queue fields, team objects their usage. See docs/api.md, "Queue".

-- Why a job waits: NULL unless it is pending. A pending job the scheduler
-- has not looked at yet (submitted since its last cycle) still gets a reason.
CREATE FUNCTION ty_pending_reason(p_state text, p_reason text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN p_state = 'pending'
		THEN coalesce(p_reason, 'not yet considered by the scheduler') END
$$;

-- The scheduler's free text (pending reasons, event and attempt messages)
-- names jobs as "job N", and those may be other teams' jobs, whose ids the
-- API never shows to members and viewers (docs/api.md): for a viewer of team
-- p_viewer each such job becomes "a job of another team". NULL p_viewer (an
-- admin) sees the text as written.
CREATE FUNCTION ty_redact_jobs(p_text text, p_viewer bigint) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE
	m text[];
	shown text := p_text;
BEGIN
	IF p_viewer IS NULL OR p_text IS NULL OR p_text !~* '\mjob [0-9]' THEN
		RETURN p_text;
	END IF;
	FOR m IN SELECT regexp_matches(p_text, '\mjob ([0-9]{1,18})\M', 'gi') LOOP
		IF NOT EXISTS (SELECT 1 FROM jobs
			       WHERE id = m[1]::bigint AND team_id = p_viewer) THEN
			shown := regexp_replace(shown, '\mjob ' || m[1] || '\M',
						'a job of another team', 'gi');
		END IF;
	END LOOP;
	RETURN shown;
END $$;

-- The job object as a viewer of team p_viewer sees it (NULL: an admin).
-- The scheduler clears the queue columns when a job leaves the queue, but
-- only in its next cycle: a job the API cancelled must not show them meanwhile.
CREATE FUNCTION ty_job_json_for(j jobs, p_viewer bigint) RETURNS json LANGUAGE sql STABLE AS $$
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
		'created_at', ty_ts(j.created_at), 'updated_at', ty_ts(j.updated_at),
		'finished_at', ty_ts(j.finished_at))
$$;

-- The admin's view; a migration that changes the job object changes
-- ty_job_json_for.
CREATE OR REPLACE FUNCTION ty_job_json(j jobs) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT ty_job_json_for(j, NULL)
$$;

-- Event data the scheduler writes may name the job a preemption made room
-- for; like the text, it is hidden from viewers of other teams.
CREATE FUNCTION ty_redact_event_data(p_data jsonb, p_viewer bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN p_viewer IS NOT NULL AND p_data ? 'preempted_for'
		AND NOT EXISTS (SELECT 1 FROM jobs WHERE team_id = p_viewer
			AND id = CASE WHEN p_data->>'preempted_for' ~ '^[0-9]{1,18}$'
				THEN (p_data->>'preempted_for')::bigint END)
		THEN jsonb_set(p_data, '{preempted_for}', 'null') ELSE p_data END
$$;

-- GET /v1/queue pages through the queue in this order (api/queue.c): never-
-- positioned jobs last, by id. Without it every page sorts all pending jobs.
CREATE INDEX jobs_queue_order ON jobs ((coalesce(queue_position, 2147483647)), id)
	WHERE state = 'pending';

-- A team's usage as of the scheduler's last cycle; a team it has not
-- published yet uses nothing and has the full fair share.
CREATE FUNCTION ty_team_usage_json(p_team bigint) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('gpus_in_use', coalesce(u.gpus_in_use, 0),
		'gpus_borrowed', coalesce(u.gpus_borrowed, 0),
		'gpus_lent', coalesce(u.gpus_lent, 0),
		'pending_jobs', coalesce(u.pending_jobs, 0),
		'decayed_gpu_hours',
			round(coalesce(u.decayed_gpu_seconds, 0)::numeric / 3600, 3)::float8,
		'fair_share', coalesce(u.fair_share, 1),
		'updated_at', ty_ts(u.updated_at))
	FROM (SELECT 1) one LEFT JOIN team_usage u ON u.team_id = p_team
$$;

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;
