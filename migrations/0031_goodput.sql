-- Goodput accounting (issue 19; docs/scheduling.md, "Goodput"): every
-- GPU-millisecond of a ledger row in exactly one category, the queue wait
-- beside them, and the time an attempt spent writing the checkpoints it
-- kept. Only additions: rows the previous release's scheduler writes during
-- an upgrade leave the new columns NULL, and the goodput split leaves them out.

-- Milliseconds the attempt spent writing its verified checkpoints, summed
-- over their checkpoint_written reports (write_ms: the oldest file of the
-- checkpoint's directory to its manifest), each step once however many
-- nodes report it: checkpoint_write_step is the newest one counted.
ALTER TABLE attempts ADD COLUMN checkpoint_write_ms bigint NOT NULL DEFAULT 0
	CHECK (checkpoint_write_ms >= 0);
ALTER TABLE attempts ADD COLUMN checkpoint_write_step bigint;

-- GPU-milliseconds: gpus x (ended - started), and its categories, which add
-- up to it exactly. queue_wait: gpus x (started - the previous attempt's end,
-- or the job's submission), beside the categories, not one of them.
ALTER TABLE usage_ledger
	ADD COLUMN gpu_ms bigint CHECK (gpu_ms >= 0),
	ADD COLUMN useful_gpu_ms bigint CHECK (useful_gpu_ms >= 0),
	ADD COLUMN checkpoint_gpu_ms bigint CHECK (checkpoint_gpu_ms >= 0),
	ADD COLUMN idle_gpu_ms bigint CHECK (idle_gpu_ms >= 0),
	ADD COLUMN lost_preemption_gpu_ms bigint CHECK (lost_preemption_gpu_ms >= 0),
	ADD COLUMN lost_user_gpu_ms bigint CHECK (lost_user_gpu_ms >= 0),
	ADD COLUMN lost_infra_gpu_ms bigint CHECK (lost_infra_gpu_ms >= 0),
	ADD COLUMN hang_gpu_ms bigint CHECK (hang_gpu_ms >= 0),
	ADD COLUMN queue_wait_gpu_ms bigint CHECK (queue_wait_gpu_ms >= 0),
	ADD CONSTRAINT usage_ledger_goodput_sum CHECK (gpu_ms IS NULL OR
		useful_gpu_ms + checkpoint_gpu_ms + idle_gpu_ms + lost_preemption_gpu_ms
		+ lost_user_gpu_ms + lost_infra_gpu_ms + hang_gpu_ms = gpu_ms);

-- The rows already there, once, by the same precedence from what they
-- recorded (no checkpoint writing time, no queue wait): the ledger is
-- append-only for everyone else.
ALTER TABLE usage_ledger DISABLE TRIGGER usage_ledger_append_only;
UPDATE usage_ledger l SET gpu_ms = x.g, useful_gpu_ms = x.g - x.lost - x.idle,
	checkpoint_gpu_ms = 0, idle_gpu_ms = x.idle,
	lost_preemption_gpu_ms = CASE WHEN x.cat = 'preemption' THEN x.lost ELSE 0 END,
	lost_user_gpu_ms = CASE WHEN x.cat = 'user' THEN x.lost ELSE 0 END,
	lost_infra_gpu_ms = CASE WHEN x.cat = 'infra' THEN x.lost ELSE 0 END,
	hang_gpu_ms = CASE WHEN x.cat = 'hang' THEN x.lost ELSE 0 END
FROM (SELECT id, g, lost, least(idle, g - lost) AS idle, cat FROM (
	SELECT id, round(gpu_seconds * 1000)::bigint AS g,
		least(round(lost_gpu_seconds * 1000)::bigint,
		      round(gpu_seconds * 1000)::bigint) AS lost,
		coalesce(round(idle_gpu_seconds * 1000)::bigint, 0) AS idle,
		CASE failure_class WHEN 'preempted' THEN 'preemption' WHEN 'hang' THEN 'hang'
		WHEN 'system' THEN 'infra' WHEN 'hardware' THEN 'infra'
		WHEN 'node_lost' THEN 'infra' WHEN 'start_timeout' THEN 'infra'
		ELSE 'user' END AS cat
	FROM usage_ledger WHERE gpu_ms IS NULL) y) x
WHERE l.id = x.id;
ALTER TABLE usage_ledger ENABLE TRIGGER usage_ledger_append_only;
