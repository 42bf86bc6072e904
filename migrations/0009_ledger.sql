-- GPU-time accounting (docs/scheduling.md, "Accounting"): the append-only
-- usage ledger the scheduler writes when an attempt ends, the rate table it
-- publishes for the API, and each attempt's last valid checkpoint (the
-- start of the work lost when it is preempted or fails).

-- When the newest checkpoint_written event with valid = true of the attempt
-- was applied, and its step.
ALTER TABLE attempts ADD COLUMN last_checkpoint_at timestamptz;
ALTER TABLE attempts ADD COLUMN last_checkpoint_step bigint;

-- One row per node of an ended attempt, written once every node of it has
-- released its GPUs, in the transaction that saw the last release (or the
-- attempt end). GPUs count from the attempt's creation (placement) to the
-- node's release: what a team holds is what nobody else can use. No foreign
-- keys: the ledger outlives what it describes.
CREATE TABLE usage_ledger (
	id                bigserial PRIMARY KEY,
	team_id           bigint NOT NULL,
	job_id            bigint NOT NULL,
	attempt           integer NOT NULL,
	node_id           text NOT NULL,
	pool              text NOT NULL,     -- node label `pool`, 'on-demand' without one
	gpu_model         text NOT NULL,     -- inventory.gpus[].name, '' when unknown
	gpus              integer NOT NULL CHECK (gpus >= 0),
	started_at        timestamptz NOT NULL,
	ended_at          timestamptz NOT NULL CHECK (ended_at >= started_at),
	outcome           text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'cancelled')),
	failure_class     text,
	checkpoint_at     timestamptz,       -- the attempt's last valid checkpoint, if any
	gpu_seconds       double precision NOT NULL CHECK (gpu_seconds >= 0),
	lost_gpu_seconds  double precision NOT NULL
	                  CHECK (lost_gpu_seconds >= 0 AND lost_gpu_seconds <= gpu_seconds),
	rate_per_gpu_hour double precision NOT NULL CHECK (rate_per_gpu_hour >= 0),
	cost              double precision NOT NULL CHECK (cost >= 0),
	recorded_at       timestamptz NOT NULL DEFAULT now(),
	UNIQUE (job_id, attempt, node_id)
);
-- fair share reads rows that ended since its last write; the API by team and time
CREATE INDEX usage_ledger_ended ON usage_ledger (ended_at);
CREATE INDEX usage_ledger_team ON usage_ledger (team_id, started_at);

-- Append-only: a row, once written, is never changed or removed.
CREATE FUNCTION usage_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE EXCEPTION 'usage_ledger is append-only: % refused', TG_OP
		USING ERRCODE = 'insufficient_privilege';
END $$;
CREATE TRIGGER usage_ledger_append_only BEFORE UPDATE OR DELETE ON usage_ledger
	FOR EACH ROW EXECUTE FUNCTION usage_ledger_append_only();
CREATE TRIGGER usage_ledger_no_truncate BEFORE TRUNCATE ON usage_ledger
	FOR EACH STATEMENT EXECUTE FUNCTION usage_ledger_append_only();

-- The scheduler's rate table (--rates-file), replaced by each leader when
-- its term starts: the API prices running attempts with it. gpu_model ''
-- is the pool's default.
CREATE TABLE usage_rates (
	pool              text NOT NULL,
	gpu_model         text NOT NULL,
	rate_per_gpu_hour double precision NOT NULL CHECK (rate_per_gpu_hour >= 0),
	PRIMARY KEY (pool, gpu_model)
);

-- The rate of a GPU model in a pool: its own, else the pool's default, else 0.
CREATE FUNCTION ty_usage_rate(p_pool text, p_model text) RETURNS double precision
LANGUAGE sql STABLE AS $$
	SELECT coalesce((SELECT rate_per_gpu_hour FROM usage_rates
			 WHERE pool = p_pool AND gpu_model IN (p_model, '')
			 ORDER BY gpu_model = '' LIMIT 1), 0)
$$;

-- The pool and GPU model of a node's allocation: label `pool` (else
-- on-demand), the name of the first allocated GPU in the inventory (else
-- of the node's first GPU, else '').
CREATE FUNCTION ty_node_pool(p_labels jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
	SELECT coalesce(nullif(p_labels->>'pool', ''), 'on-demand')
$$;
CREATE FUNCTION ty_gpu_model(p_inventory jsonb, p_gpus integer[]) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT coalesce(
		(SELECT g->>'name' FROM jsonb_array_elements(
			CASE WHEN jsonb_typeof(p_inventory->'gpus') = 'array'
			THEN p_inventory->'gpus' ELSE '[]' END) g
		 WHERE g->>'index' = p_gpus[1]::text LIMIT 1),
		p_inventory->'gpus'->0->>'name', '')
$$;
