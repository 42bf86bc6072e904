-- A team's checkpoint retention defaults (issue 19, item 3): NULL is the
-- job spec's own default (proto/job_spec.c). The API puts them in the spec
-- of a job that names none, so the job document shows what applies.
ALTER TABLE teams ADD COLUMN checkpoint_keep integer
	CHECK (checkpoint_keep IS NULL OR checkpoint_keep BETWEEN 1 AND 100);
ALTER TABLE teams ADD COLUMN checkpoint_keep_every integer
	CHECK (checkpoint_keep_every IS NULL OR checkpoint_keep_every BETWEEN 0 AND 1000000000);
ALTER TABLE teams ADD COLUMN checkpoint_tier boolean;

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'max_pending_jobs', t.max_pending_jobs,
		'max_cpus', t.max_cpus, 'max_memory_mb', t.max_memory_mb,
		'run_uid', t.run_uid, 'idle_gpu_alert_seconds', t.idle_gpu_alert_seconds,
		'checkpoint_keep', t.checkpoint_keep,
		'checkpoint_keep_every', t.checkpoint_keep_every,
		'checkpoint_tier', t.checkpoint_tier,
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;

-- Where each job's checkpoints are (issue 19, item 3): the bytes its rank 0
-- node last reported in a checkpoint_tier event, on the node's checkpoint
-- storage and in the object store. Usage and /metrics sum them per team.
CREATE TABLE job_checkpoint_storage (
	job_id bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
	local_bytes bigint NOT NULL DEFAULT 0 CHECK (local_bytes >= 0),
	store_bytes bigint NOT NULL DEFAULT 0 CHECK (store_bytes >= 0),
	-- the last move to the object store failed with this (NULL: it works)
	tier_error text,
	updated_at timestamptz NOT NULL DEFAULT now()
);
