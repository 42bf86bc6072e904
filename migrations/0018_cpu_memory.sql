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

-- A team's usage adds the CPUs and memory its live allocations hold (one
-- allocation row per node of a gang, each holding the job's per-node ask),
-- read live: what the caps are checked against.
CREATE OR REPLACE FUNCTION ty_team_usage_json(p_team bigint) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('gpus_in_use', coalesce(u.gpus_in_use, 0),
		'gpus_borrowed', coalesce(u.gpus_borrowed, 0),
		'gpus_lent', coalesce(u.gpus_lent, 0),
		'cpus_in_use', h.cpus, 'memory_mb_in_use', h.memory_mb,
		'pending_jobs', coalesce(u.pending_jobs, 0),
		'decayed_gpu_hours',
			round(coalesce(u.decayed_gpu_seconds, 0)::numeric / 3600, 3)::float8,
		'fair_share', coalesce(u.fair_share, 1),
		'updated_at', ty_ts(u.updated_at))
	FROM (SELECT coalesce(sum(coalesce((j.spec->'resources'->>'cpus_per_node')::bigint, 1)),
			0) AS cpus,
		coalesce(sum(coalesce((j.spec->'resources'->>'memory_mb_per_node')::bigint, 1024)),
			0) AS memory_mb
		FROM allocations a JOIN jobs j ON j.id = a.job_id
		WHERE j.team_id = p_team AND a.released_at IS NULL) h
	LEFT JOIN team_usage u ON u.team_id = p_team
$$;

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'max_pending_jobs', t.max_pending_jobs,
		'max_cpus', t.max_cpus, 'max_memory_mb', t.max_memory_mb,
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;
