-- A team's limit on jobs waiting in the queue (issue 9): NULL is no limit.
-- The API counts the team's pending jobs under a row lock on the team, so
-- two concurrent submissions cannot both take the last slot; the partial
-- index keeps that count to the team's pending rows.
ALTER TABLE teams ADD COLUMN max_pending_jobs integer
	CHECK (max_pending_jobs IS NULL OR max_pending_jobs >= 0);

CREATE INDEX jobs_team_pending ON jobs (team_id) WHERE state = 'pending';

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'max_pending_jobs', t.max_pending_jobs,
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;
