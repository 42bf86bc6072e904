-- Webhooks: a team's URLs that job state changes are POSTed to. A delivery
-- is queued by a trigger on job_events in the transaction that changes the
-- job's state, so it is never lost and never sent for a change that rolled
-- back; every API replica's deliverer claims due rows (docs/webhooks.md).

CREATE TABLE webhooks (
	id             bigserial PRIMARY KEY,
	team_id        bigint NOT NULL REFERENCES teams (id),
	url            text NOT NULL CHECK (url ~ '^https?://' AND length(url) <= 2048),
	-- 'job.<state>' names, 'ping' or '*' for every job state change
	events         text[] NOT NULL CHECK (cardinality(events) BETWEEN 1 AND 32),
	-- kept in plain form because it signs; never returned after creation
	secret         text NOT NULL CHECK (length(secret) BETWEEN 16 AND 256),
	active         boolean NOT NULL DEFAULT true,
	created_at     timestamptz NOT NULL DEFAULT now(),
	created_by     bigint REFERENCES api_tokens (id),
	deactivated_at timestamptz,
	CHECK (active = (deactivated_at IS NULL))
);
CREATE INDEX webhooks_team_id ON webhooks (team_id, id DESC);

CREATE TABLE webhook_deliveries (
	id              bigserial PRIMARY KEY,
	webhook_id      bigint NOT NULL REFERENCES webhooks (id),
	event           text NOT NULL,
	-- the exact body sent, frozen when the delivery was queued
	payload         jsonb NOT NULL,
	-- cancelled: its webhook was deleted before it was delivered
	state           text NOT NULL DEFAULT 'pending'
	                CHECK (state IN ('pending', 'delivered', 'failed', 'cancelled')),
	attempts        integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL DEFAULT now(),
	-- a deliverer's claim: no other replica takes the row before this time
	locked_until    timestamptz,
	last_status     integer,
	last_error      text,
	created_at      timestamptz NOT NULL DEFAULT now(),
	delivered_at    timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
	WHERE state = 'pending';
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries (webhook_id, id DESC);

-- One row per POST; n counts from 1. A deliverer that dies mid-POST leaves
-- no row for that attempt, but the delivery's attempts count includes it.
CREATE TABLE webhook_attempts (
	delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id),
	n           integer NOT NULL,
	started_at  timestamptz NOT NULL,
	duration_ms integer NOT NULL,
	http_status integer,
	error       text,
	PRIMARY KEY (delivery_id, n)
);

CREATE FUNCTION ty_webhook_json(w webhooks) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', w.id,
		'team', (SELECT name FROM teams WHERE id = w.team_id),
		'url', w.url, 'events', to_json(w.events), 'active', w.active,
		'created_by', (SELECT name FROM api_tokens WHERE id = w.created_by),
		'created_at', ty_ts(w.created_at), 'deactivated_at', ty_ts(w.deactivated_at))
$$;

CREATE FUNCTION ty_webhook_delivery_json(d webhook_deliveries) RETURNS json
LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', d.id, 'webhook_id', d.webhook_id, 'event', d.event,
		'state', d.state, 'attempt_count', d.attempts,
		'next_attempt_at', CASE WHEN d.state = 'pending' THEN ty_ts(d.next_attempt_at) END,
		'last_status', d.last_status, 'last_error', d.last_error,
		'created_at', ty_ts(d.created_at), 'delivered_at', ty_ts(d.delivered_at),
		'payload', d.payload,
		'attempts', (SELECT coalesce(json_agg(json_build_object('n', a.n,
				'started_at', ty_ts(a.started_at), 'duration_ms', a.duration_ms,
				'http_status', a.http_status, 'error', a.error) ORDER BY a.n), '[]')
			FROM webhook_attempts a WHERE a.delivery_id = d.id))
$$;

-- Queue one delivery per active webhook subscribed to `event` for a job of
-- team `p_team` (NULL job: a ping of webhook p_only); wakes the deliverers.
-- Returns how many were queued.
CREATE FUNCTION ty_webhook_enqueue(p_team bigint, p_only bigint, p_event text, p_job json,
                                   p_time timestamptz) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
	n integer;
BEGIN
	WITH w AS (SELECT w.id, nextval(pg_get_serial_sequence('webhook_deliveries', 'id')) AS d
		FROM webhooks w
		WHERE w.team_id = p_team AND w.active AND (p_only IS NULL OR w.id = p_only)
		AND (p_only IS NOT NULL OR p_event = ANY (w.events) OR '*' = ANY (w.events))
		ORDER BY w.id),
	ins AS (INSERT INTO webhook_deliveries (id, webhook_id, event, payload)
		SELECT w.d, w.id, p_event, jsonb_build_object('id', w.d, 'type', p_event,
			'created_at', ty_ts(p_time))
			|| CASE WHEN p_job IS NULL THEN jsonb_build_object('webhook',
				(SELECT ty_webhook_json(x) FROM webhooks x WHERE x.id = w.id))
			ELSE jsonb_build_object('job', p_job) END
		FROM w RETURNING 1)
	SELECT count(*) INTO n FROM ins;
	IF n > 0 THEN
		PERFORM pg_notify('trainyard_webhooks', '');
	END IF;
	RETURN n;
END $$;

-- A job event whose state differs from the previous event's (or the first
-- one) is a state change: queue 'job.<state>' with the job as its team sees
-- it now, in the same transaction as the change.
CREATE FUNCTION job_events_webhooks() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	j jobs;
BEGIN
	SELECT * INTO j FROM jobs WHERE id = NEW.job_id;
	IF NOT EXISTS (SELECT 1 FROM webhooks WHERE team_id = j.team_id AND active) THEN
		RETURN NULL;
	END IF;
	IF NEW.seq > 1 AND EXISTS (SELECT 1 FROM job_events
			WHERE job_id = NEW.job_id AND seq = NEW.seq - 1 AND state = NEW.state) THEN
		RETURN NULL;
	END IF;
	PERFORM ty_webhook_enqueue(j.team_id, NULL, 'job.' || NEW.state,
		ty_job_json_for(j, j.team_id), NEW.created_at);
	RETURN NULL;
END $$;
CREATE TRIGGER job_events_webhooks AFTER INSERT ON job_events
	FOR EACH ROW EXECUTE FUNCTION job_events_webhooks();
