-- A team's uid on the nodes (issue 16): the uid and gid its ranks run as in
-- their containers. NULL: the scheduler's --team-uid-base + the team's id.
-- An admin sets one to match an existing identity (shared storage, LDAP);
-- two teams never share one.
ALTER TABLE teams ADD COLUMN run_uid integer
	CHECK (run_uid IS NULL OR run_uid BETWEEN 1000 AND 2147483646);
CREATE UNIQUE INDEX teams_run_uid ON teams (run_uid) WHERE run_uid IS NOT NULL;

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'max_pending_jobs', t.max_pending_jobs,
		'max_cpus', t.max_cpus, 'max_memory_mb', t.max_memory_mb,
		'run_uid', t.run_uid,
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;
