-- Start-time estimates (docs/scheduling.md, "Start-time estimates"): the
-- leader's cycle writes each pending job's estimate and its basis; the
-- runtime history of named jobs gives the estimator better ends than
-- max_runtime_seconds.
ALTER TABLE jobs ADD COLUMN estimated_start timestamptz;
ALTER TABLE jobs ADD COLUMN estimate_basis jsonb;

-- An estimate is about a pending job only: whatever moves a job out of
-- pending (placement, cancel) clears it, so no writer can forget to.
CREATE FUNCTION ty_estimate_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.estimated_start := NULL;
	NEW.estimate_basis := NULL;
	RETURN NEW;
END
$$;
CREATE TRIGGER jobs_estimate_clear BEFORE UPDATE OF state ON jobs FOR EACH ROW
	WHEN (NEW.state <> 'pending' AND
	      (OLD.estimated_start IS NOT NULL OR OLD.estimate_basis IS NOT NULL))
	EXECUTE FUNCTION ty_estimate_clear();

-- Per (team, job name): the runtimes (attempt created to ended, seconds)
-- of its last 20 successful attempts, newest last, and their 80th
-- percentile, kept by the trigger below as each attempt succeeds.
CREATE TABLE runtime_history (
	team_id     bigint NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
	name        text NOT NULL,
	runtimes    integer[] NOT NULL,
	p80_seconds integer NOT NULL CHECK (p80_seconds >= 0),
	updated_at  timestamptz NOT NULL,
	PRIMARY KEY (team_id, name)
);

CREATE FUNCTION ty_runtime_history_add() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	t bigint;
	n text;
	secs integer := greatest(0, ceil(extract(epoch FROM NEW.ended_at - NEW.created_at)))::integer;
	rs integer[];
BEGIN
	SELECT team_id, name INTO t, n FROM jobs WHERE id = NEW.job_id;
	IF n IS NULL THEN
		RETURN NULL;
	END IF;
	SELECT runtimes INTO rs FROM runtime_history WHERE team_id = t AND name = n FOR UPDATE;
	rs := coalesce(rs, '{}') || secs;
	IF cardinality(rs) > 20 THEN
		rs := rs[cardinality(rs) - 19 :];
	END IF;
	INSERT INTO runtime_history (team_id, name, runtimes, p80_seconds, updated_at)
	VALUES (t, n, rs,
		(SELECT percentile_disc(0.8) WITHIN GROUP (ORDER BY x) FROM unnest(rs) AS x),
		now())
	ON CONFLICT (team_id, name) DO UPDATE SET runtimes = EXCLUDED.runtimes,
		p80_seconds = EXCLUDED.p80_seconds, updated_at = EXCLUDED.updated_at;
	RETURN NULL;
END
$$;
CREATE TRIGGER attempts_runtime_history AFTER UPDATE OF state ON attempts FOR EACH ROW
	WHEN (NEW.state = 'succeeded' AND OLD.state <> 'succeeded' AND NEW.ended_at IS NOT NULL)
	EXECUTE FUNCTION ty_runtime_history_add();

-- The API's "estimate" member: the basis with the ids of jobs it waits for
-- hidden (null) from viewers of other teams, as ty_redact_jobs hides them
-- in text.
CREATE FUNCTION ty_estimate_json(p_basis jsonb, p_viewer bigint) RETURNS jsonb
LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN p_basis IS NULL OR p_viewer IS NULL
		OR jsonb_typeof(p_basis->'waits_for') IS DISTINCT FROM 'array' THEN p_basis
	ELSE jsonb_set(p_basis, '{waits_for}', (
		SELECT coalesce(jsonb_agg(CASE WHEN EXISTS (SELECT 1 FROM jobs
				WHERE team_id = p_viewer AND id = CASE WHEN w.v ~ '^[0-9]{1,18}$'
					THEN w.v::bigint END)
			THEN to_jsonb(w.v::bigint) ELSE 'null'::jsonb END ORDER BY w.ord), '[]')
		FROM jsonb_array_elements_text(p_basis->'waits_for') WITH ORDINALITY AS w(v, ord)))
	END
$$;
