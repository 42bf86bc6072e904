-- Money budgets (docs/scheduling.md, "Budgets"): a team may have an amount
-- per calendar period (UTC) in the rate table's units; a job that could
-- exceed it waits. Both columns NULL = no budget.
ALTER TABLE teams
	ADD COLUMN budget_amount double precision CHECK (budget_amount >= 0),
	ADD COLUMN budget_period text CHECK (budget_period IN ('day', 'week', 'month')),
	-- the start of the period whose 80 % alert was sent: once per period
	ADD COLUMN budget_alerted_at timestamptz,
	ADD CONSTRAINT teams_budget_whole CHECK ((budget_amount IS NULL) = (budget_period IS NULL));

-- spend in a period reads a team's ledger rows by their end
CREATE INDEX usage_ledger_team_ended ON usage_ledger (team_id, ended_at);

-- The start of the calendar period holding p_at, in UTC (weeks start on Monday).
CREATE FUNCTION ty_budget_period_start(p_period text, p_at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
	SELECT date_trunc(p_period, p_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
$$;

-- A team's spend since p_since: the ledger cost of attempts that ended
-- since then, plus what every allocation not in the ledger yet has cost
-- from its attempt's creation to its release (or now), priced as the
-- ledger will price it (ty_usage_rate, the leader's rate table). A running
-- attempt is counted whole, however long ago it started: its ledger rows
-- will fall in the period it ends in.
CREATE FUNCTION ty_budget_spent(p_team bigint, p_since timestamptz) RETURNS double precision
LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT sum(l.cost) FROM usage_ledger l
			 WHERE l.team_id = p_team AND l.ended_at >= p_since), 0)
	     + coalesce((SELECT sum(cardinality(a.gpus)
			* greatest(extract(epoch FROM coalesce(a.released_at, now()) - t.created_at), 0)
			/ 3600 * ty_usage_rate(ty_node_pool(n.labels), ty_gpu_model(n.inventory, a.gpus)))
			FROM jobs j JOIN attempts t ON t.job_id = j.id
			JOIN allocations a ON a.job_id = t.job_id AND a.attempt = t.attempt
			JOIN nodes n ON n.id = a.node_id
			WHERE j.team_id = p_team
			AND (a.released_at IS NULL OR a.released_at >= p_since)
			AND NOT EXISTS (SELECT 1 FROM usage_ledger l WHERE l.job_id = t.job_id
					AND l.attempt = t.attempt)), 0)
$$;

-- A team's budget as the API shows it, NULL without one.
CREATE FUNCTION ty_team_budget_json(t teams) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT CASE WHEN t.budget_amount IS NULL THEN NULL ELSE json_build_object(
		'amount', t.budget_amount, 'period', t.budget_period,
		'period_start', ty_ts(ty_budget_period_start(t.budget_period, now())),
		'spent', round(ty_budget_spent(t.id,
			ty_budget_period_start(t.budget_period, now()))::numeric, 2)) END
$$;

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
		'budget', ty_team_budget_json(t),
		'usage', ty_team_usage_json(t.id),
		'created_at', ty_ts(t.created_at), 'updated_at', ty_ts(t.updated_at))
$$;

-- The 80 % alert of a team's budget, once per period: when p_spent reaches
-- 80 % of the amount and no alert was sent for the period holding p_at,
-- record it and queue a 'team.budget' delivery to the team's webhooks that
-- subscribe to it (or '*'), the team as its document shows it. Returns
-- whether it fired.
CREATE FUNCTION ty_budget_alert(p_team bigint, p_spent double precision, p_at timestamptz)
RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
	t teams;
	since timestamptz;
BEGIN
	SELECT * INTO t FROM teams WHERE id = p_team FOR UPDATE;
	-- a budget of 0 is a stop, not something to be warned about
	IF NOT FOUND OR coalesce(t.budget_amount, 0) <= 0 OR p_spent < 0.8 * t.budget_amount THEN
		RETURN false;
	END IF;
	since := ty_budget_period_start(t.budget_period, p_at);
	IF t.budget_alerted_at IS NOT NULL AND t.budget_alerted_at >= since THEN
		RETURN false;
	END IF;
	UPDATE teams SET budget_alerted_at = since WHERE id = p_team;
	WITH w AS (SELECT w.id, nextval(pg_get_serial_sequence('webhook_deliveries', 'id')) AS d
		FROM webhooks w
		WHERE w.team_id = p_team AND w.active
		AND ('team.budget' = ANY (w.events) OR '*' = ANY (w.events))
		ORDER BY w.id)
	INSERT INTO webhook_deliveries (id, webhook_id, event, payload)
	SELECT w.d, w.id, 'team.budget', jsonb_build_object('id', w.d, 'type', 'team.budget',
		'created_at', ty_ts(p_at), 'team', ty_team_json(t),
		'budget', jsonb_build_object('amount', t.budget_amount, 'period', t.budget_period,
			'period_start', ty_ts(since), 'spent', round(p_spent::numeric, 2),
			'used_ratio', round((p_spent / nullif(t.budget_amount, 0))::numeric, 4)))
	FROM w;
	IF FOUND THEN
		PERFORM pg_notify('trainyard_webhooks', '');
	END IF;
	RETURN true;
END $$;
