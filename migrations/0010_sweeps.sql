-- Sweeps: one job template run once per parameter set (the trials). A
-- trial is an ordinary job with sweep_id and sweep_trial set; the sweep row
-- and all its trial jobs are written in one transaction.

CREATE TABLE sweeps (
	id              bigserial PRIMARY KEY,
	team_id         bigint NOT NULL REFERENCES teams (id),
	name            text,
	template        jsonb NOT NULL,
	-- {"trials": [...]}, {"grid": {...}} or {"random": {...}} as submitted
	search          jsonb NOT NULL,
	max_concurrent  integer CHECK (max_concurrent BETWEEN 1 AND 1000),
	objective       jsonb,
	idempotency_key text,
	request_sha256  text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	cancelled_at    timestamptz,
	UNIQUE (team_id, idempotency_key)
);
CREATE INDEX sweeps_team_id ON sweeps (team_id, id DESC);

-- jobs.sweep_id exists since 0001; it now points at a sweep.
ALTER TABLE jobs ADD CONSTRAINT jobs_sweep_id_fkey FOREIGN KEY (sweep_id) REFERENCES sweeps (id);
ALTER TABLE jobs ADD COLUMN sweep_trial integer CHECK (sweep_trial >= 0);
ALTER TABLE jobs ADD COLUMN sweep_params jsonb;
ALTER TABLE jobs ADD CHECK ((sweep_id IS NULL) = (sweep_trial IS NULL));
CREATE UNIQUE INDEX jobs_sweep_trial ON jobs (sweep_id, sweep_trial) WHERE sweep_id IS NOT NULL;

-- The API's view of a sweep; with_trials adds every trial (index, job id,
-- state, params). `best` stays null until trials report metrics.
CREATE FUNCTION ty_sweep_json(s sweeps, with_trials boolean) RETURNS jsonb LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', s.id,
		'team', (SELECT name FROM teams WHERE id = s.team_id),
		'name', s.name,
		'state', CASE WHEN s.cancelled_at IS NOT NULL THEN 'cancelled'
			WHEN c.active > 0 THEN 'active' ELSE 'finished' END,
		'template', s.template, 'search', s.search,
		'max_concurrent', s.max_concurrent, 'objective', s.objective,
		'trial_count', c.total, 'trial_states', c.states,
		'best', NULL,
		'created_at', ty_ts(s.created_at), 'cancelled_at', ty_ts(s.cancelled_at))::jsonb
		|| CASE WHEN with_trials THEN jsonb_build_object('trials', (
			SELECT coalesce(jsonb_agg(jsonb_build_object('index', j.sweep_trial,
				'job_id', j.id, 'state', j.state,
				'cancel_requested', j.cancel_requested,
				'params', j.sweep_params) ORDER BY j.sweep_trial), '[]')
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
