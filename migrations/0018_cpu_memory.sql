-- CPUs and memory become scheduled resources (issue 16).
-- nodes.cpus / nodes.memory_mb: what the executor reports allocatable in its
-- register (online CPUs and MemTotal minus its operator reserve, or the
-- --cpus / --memory-mb override). NULL = not reported (an executor from
-- before this migration): the scheduler does not limit that resource there.
-- teams.max_cpus / teams.max_memory_mb: caps on what a team's running jobs
-- hold at once (nodes × per-node ask, GPU-less jobs included); NULL = none.
ALTER TABLE nodes ADD COLUMN cpus integer CHECK (cpus IS NULL OR cpus >= 1);
ALTER TABLE nodes ADD COLUMN memory_mb bigint CHECK (memory_mb IS NULL OR memory_mb >= 1);
ALTER TABLE teams ADD COLUMN max_cpus integer
	CHECK (max_cpus IS NULL OR max_cpus BETWEEN 1 AND 100000000);
ALTER TABLE teams ADD COLUMN max_memory_mb bigint
	CHECK (max_memory_mb IS NULL OR max_memory_mb BETWEEN 1 AND 1000000000000);

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'max_pending_jobs', t.max_pending_jobs,
		'max_cpus', t.max_cpus, 'max_memory_mb', t.max_memory_mb,
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;
