-- GPU telemetry per attempt and idle GPUs (issue 17; docs/dispatch.md,
-- "GPU telemetry and idle GPUs"): what each node's executor measured over
-- its part of an attempt, the attempt's summary, the idle GPU-seconds in the
-- usage ledger, and the team's limit on GPUs held idle with the mark of the
-- last gpus_idle event. Only additions: the previous release runs unchanged.

-- One node's part, from its attempt_exited.telemetry as the scheduler kept
-- it (the documented fields that were well formed; NULL: none reported).
ALTER TABLE allocations ADD COLUMN telemetry jsonb;

-- The attempt's summary over the nodes that reported: samples summed, means
-- weighted by samples x GPUs, peaks the maximum, idle GPU-seconds summed
-- (each node's idle seconds x its GPUs); NULL until a node reported.
-- Written again whenever another node's report arrives.
ALTER TABLE attempts ADD COLUMN gpu_telemetry jsonb;

-- When the scheduler last wrote a gpus_idle event for the attempt. Another
-- is written only for an idle stretch that began after it: once per
-- stretch, and again after the attempt was busy on that node in between.
ALTER TABLE attempts ADD COLUMN idle_alert_at timestamptz;

-- GPUs x seconds the node held them with every one below the executor's
-- idle threshold (its telemetry's idle_seconds x the row's GPUs, at most
-- gpu_seconds); NULL when the node reported no telemetry (older executors,
-- a lost node). Rows of the previous release's scheduler leave it NULL.
ALTER TABLE usage_ledger ADD COLUMN idle_gpu_seconds double precision
	CHECK (idle_gpu_seconds IS NULL OR (idle_gpu_seconds >= 0
	       AND idle_gpu_seconds <= gpu_seconds));

-- Seconds a job may hold GPUs idle (on one node, uninterrupted) before the
-- scheduler writes a gpus_idle event and trainyard_jobs_gpus_idle counts
-- it. NULL: off, the default (interactive and debugging jobs idle by
-- design; a team opts in). 60 s to 7 days.
ALTER TABLE teams ADD COLUMN idle_gpu_alert_seconds integer
	CHECK (idle_gpu_alert_seconds IS NULL OR idle_gpu_alert_seconds BETWEEN 60 AND 604800);

CREATE OR REPLACE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'max_pending_jobs', t.max_pending_jobs,
		'max_cpus', t.max_cpus, 'max_memory_mb', t.max_memory_mb,
		'run_uid', t.run_uid, 'idle_gpu_alert_seconds', t.idle_gpu_alert_seconds,
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;
