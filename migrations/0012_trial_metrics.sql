-- Trial metrics (POST/GET /v1/jobs/{id}/metrics) and the per-attempt token
-- that lets a job's own ranks report them.
--
-- The scheduler draws a random "tym_..." token for every attempt it places;
-- the executor puts it in the ranks' TRAINYARD_METRICS_TOKEN. The API finds
-- it by its SHA-256 here. The token itself also rides in attempts.launch,
-- because a re-sent launch must carry the same one; the API never serves
-- that column.
ALTER TABLE attempts ADD COLUMN metrics_token_sha256 text;
CREATE UNIQUE INDEX attempts_metrics_token ON attempts (metrics_token_sha256)
	WHERE metrics_token_sha256 IS NOT NULL;

-- One row per reported step; a second report of the same step merges its
-- metrics into the row (a resumed attempt repeating a step overwrites the
-- values it repeats).
CREATE TABLE job_metrics (
	job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	step        bigint NOT NULL CHECK (step >= 0),
	attempt     integer, -- the reporting attempt; NULL before the first
	metrics     jsonb NOT NULL CHECK (jsonb_typeof(metrics) = 'object'),
	reported_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (job_id, step)
);

-- A job's latest value of every metric it reported: each name's value at
-- the highest step that reported that name, {"val_loss": 0.31, ...}; NULL
-- when it reported nothing.
CREATE FUNCTION ty_job_latest_metrics(p_job bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
	SELECT jsonb_object_agg(k, v) FROM (
		SELECT DISTINCT ON (e.key) e.key AS k, e.value AS v
		FROM job_metrics m, jsonb_each(m.metrics) e
		WHERE m.job_id = p_job ORDER BY e.key, m.step DESC) x
$$;

-- The sweep's best trial: among trials that reported the objective metric,
-- the one whose latest value of it is lowest (minimize) or highest
-- (maximize); ties go to the lower trial index. NULL without an objective
-- or before any trial reported it.
CREATE FUNCTION ty_sweep_best(s sweeps) RETURNS jsonb LANGUAGE sql STABLE AS $$
	SELECT jsonb_build_object('index', t.sweep_trial, 'job_id', t.id, 'state', t.state,
		'params', t.sweep_params, 'metric', s.objective->>'metric', 'value', t.v,
		'step', t.step)
	FROM (SELECT j.id, j.sweep_trial, j.state, j.sweep_params, l.v, l.step
		FROM jobs j, LATERAL (SELECT (m.metrics->>(s.objective->>'metric'))::float8 AS v,
				m.step
			FROM job_metrics m
			WHERE m.job_id = j.id AND m.metrics ? (s.objective->>'metric')
			ORDER BY m.step DESC LIMIT 1) l
		WHERE j.sweep_id = s.id) t
	WHERE s.objective->>'metric' IS NOT NULL
	ORDER BY CASE WHEN s.objective->>'direction' = 'maximize' THEN -t.v ELSE t.v END,
		t.sweep_trial
	LIMIT 1
$$;

-- The API's view of a sweep, now with `best` and each trial's latest metrics.
CREATE OR REPLACE FUNCTION ty_sweep_json(s sweeps, with_trials boolean) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', s.id,
		'team', (SELECT name FROM teams WHERE id = s.team_id),
		'name', s.name,
		'state', CASE WHEN s.cancelled_at IS NOT NULL THEN 'cancelled'
			WHEN c.active > 0 THEN 'active' ELSE 'finished' END,
		'template', s.template, 'search', s.search,
		'max_concurrent', s.max_concurrent, 'objective', s.objective,
		'trial_count', c.total, 'trial_states', c.states,
		'best', ty_sweep_best(s),
		'created_at', ty_ts(s.created_at), 'cancelled_at', ty_ts(s.cancelled_at))::jsonb
		|| CASE WHEN with_trials THEN jsonb_build_object('trials', (
			SELECT coalesce(jsonb_agg(jsonb_build_object('index', j.sweep_trial,
				'job_id', j.id, 'state', j.state,
				'cancel_requested', j.cancel_requested,
				'params', j.sweep_params,
				'metrics', ty_job_latest_metrics(j.id)) ORDER BY j.sweep_trial), '[]')
			FROM jobs j WHERE j.sweep_id = s.id))
		ELSE '{}' END
	FROM (SELECT count(*) AS total,
		count(*) FILTER (WHERE state NOT IN ('succeeded', 'failed', 'cancelled', 'stopped'))
			AS active,
		coalesce((SELECT json_object_agg(st, n) FROM (SELECT state AS st, count(*) AS n
			FROM jobs WHERE sweep_id = s.id GROUP BY state ORDER BY state) x), '{}')
			AS states
		FROM jobs WHERE sweep_id = s.id) c
$$;
