-- Straggler time as its own goodput category (issue 21; docs/scheduling.md,
-- "Goodput"): from an attempt's first straggler verdict to its end, the
-- share of the gang's GPU time the slowest straggling rank cost it. Only
-- additions: the previous release's scheduler leaves the new attempt
-- columns alone and writes ledger rows whose straggler time is 0 (useful).

-- The first verdict's time, and the largest lost fraction of its verdicts,
-- 1 - steps_per_second / median (the slowest straggling rank's); NULL: none.
ALTER TABLE attempts
	ADD COLUMN straggler_at timestamptz,
	ADD COLUMN straggler_lost float8
		CHECK (straggler_lost >= 0 AND straggler_lost <= 1);

-- The ledger's category, and the sum that now includes it.
ALTER TABLE usage_ledger
	ADD COLUMN straggler_gpu_ms bigint NOT NULL DEFAULT 0
		CHECK (straggler_gpu_ms >= 0),
	DROP CONSTRAINT usage_ledger_goodput_sum,
	ADD CONSTRAINT usage_ledger_goodput_sum CHECK (gpu_ms IS NULL OR
		useful_gpu_ms + checkpoint_gpu_ms + idle_gpu_ms + lost_preemption_gpu_ms
		+ lost_user_gpu_ms + lost_infra_gpu_ms + hang_gpu_ms + straggler_gpu_ms
		= gpu_ms);
