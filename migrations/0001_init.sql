-- Teams, API tokens, jobs and their event history: what the API owns.
-- Later migrations add nodes, attempts, allocations, the outbox and the ledger.

CREATE TABLE teams (
	id                   bigserial PRIMARY KEY,
	name                 text NOT NULL UNIQUE
	                     CHECK (name ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
	nominal_gpus         integer NOT NULL CHECK (nominal_gpus BETWEEN 0 AND 1000000),
	borrowing_limit_gpus integer CHECK (borrowing_limit_gpus BETWEEN 0 AND 1000000),
	lending_limit_gpus   integer CHECK (lending_limit_gpus BETWEEN 0 AND 1000000),
	cohort               text CHECK (cohort ~ '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$'),
	weight               double precision NOT NULL DEFAULT 1
	                     CHECK (weight > 0 AND weight <= 1000000),
	created_at           timestamptz NOT NULL DEFAULT now(),
	updated_at           timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
	id           bigserial PRIMARY KEY,
	token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
	name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
	role         text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
	team_id      bigint REFERENCES teams (id),
	created_at   timestamptz NOT NULL DEFAULT now(),
	revoked_at   timestamptz,
	-- admins are global; members and viewers belong to exactly one team
	CHECK ((role = 'admin') = (team_id IS NULL))
);

CREATE TABLE jobs (
	id               bigserial PRIMARY KEY,
	team_id          bigint NOT NULL REFERENCES teams (id),
	name             text,
	spec             jsonb NOT NULL,
	state            text NOT NULL DEFAULT 'pending'
	                 CHECK (state IN ('pending', 'scheduled', 'starting', 'running',
	                                  'preempting', 'succeeded', 'failed', 'cancelled')),
	priority_class   text NOT NULL,
	priority         integer NOT NULL DEFAULT 0,
	labels           jsonb NOT NULL DEFAULT '{}',
	cancel_requested boolean NOT NULL DEFAULT false,
	idempotency_key  text,
	request_sha256   text,
	sweep_id         bigint,
	last_event_seq   integer NOT NULL DEFAULT 0,
	created_at       timestamptz NOT NULL DEFAULT now(),
	updated_at       timestamptz NOT NULL DEFAULT now(),
	finished_at      timestamptz,
	UNIQUE (team_id, idempotency_key)
);
CREATE INDEX jobs_team_id ON jobs (team_id, id DESC);
CREATE INDEX jobs_state_id ON jobs (state, id DESC);
CREATE INDEX jobs_labels ON jobs USING gin (labels jsonb_path_ops);

-- Ordered per job; seq comes from jobs.last_event_seq, bumped in the same
-- transaction, so readers see a gap-free sequence.
CREATE TABLE job_events (
	job_id     bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	seq        integer NOT NULL,
	type       text NOT NULL,
	state      text NOT NULL,
	message    text NOT NULL DEFAULT '',
	data       jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (job_id, seq)
);

-- Wakes long-polling watchers on every API replica.
CREATE FUNCTION job_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_notify('trainyard_job_events', NEW.job_id::text);
	RETURN NULL;
END $$;
CREATE TRIGGER job_events_notify AFTER INSERT ON job_events
	FOR EACH ROW EXECUTE FUNCTION job_events_notify();

-- Who changed what, for teams, tokens and job control.
CREATE TABLE audit_log (
	id         bigserial PRIMARY KEY,
	token_id   bigint REFERENCES api_tokens (id),
	action     text NOT NULL,
	object     text NOT NULL,
	detail     jsonb NOT NULL DEFAULT '{}',
	created_at timestamptz NOT NULL DEFAULT now()
);

-- RFC 3339 UTC with milliseconds, the API's one time format.
CREATE FUNCTION ty_ts(t timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
	SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

CREATE FUNCTION ty_team_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('name', t.name, 'nominal_gpus', t.nominal_gpus,
		'borrowing_limit_gpus', t.borrowing_limit_gpus,
		'lending_limit_gpus', t.lending_limit_gpus, 'cohort', t.cohort,
		'weight', t.weight, 'created_at', ty_ts(t.created_at),
		'updated_at', ty_ts(t.updated_at))
$$;

CREATE FUNCTION ty_job_json(j jobs) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', j.id,
		'team', (SELECT name FROM teams WHERE id = j.team_id),
		'name', j.name, 'state', j.state, 'spec', j.spec,
		'cancel_requested', j.cancel_requested,
		'created_at', ty_ts(j.created_at), 'updated_at', ty_ts(j.updated_at),
		'finished_at', ty_ts(j.finished_at))
$$;

-- Append the next event of a job; returns its seq. Every writer (API,
-- scheduler) goes through this, so per-job sequences have no gaps.
CREATE FUNCTION ty_job_event(p_job bigint, p_type text, p_state text, p_message text,
                             p_data jsonb) RETURNS integer LANGUAGE sql AS $$
	WITH s AS (
		UPDATE jobs SET last_event_seq = last_event_seq + 1, updated_at = now()
		WHERE id = p_job RETURNING last_event_seq)
	INSERT INTO job_events (job_id, seq, type, state, message, data)
	SELECT p_job, last_event_seq, p_type, p_state, p_message, coalesce(p_data, '{}')
	FROM s RETURNING seq
$$;
