-- Checkpoint-aware preemption (docs/dispatch.md, "Preemption";
-- docs/scheduling.md §3): the grace a victim gets is sized from how long its
-- job took to commit a checkpoint after the signal, and the kill goes out
-- as soon as that checkpoint is committed.
--
-- attempts.checkpoint_signal_at: when the preemption's checkpoint signal was
-- sent (the checkpoint rows written). attempts.checkpoint_committed_at: the
-- first valid checkpoint_written with after_signal for it; set once, so a
-- checkpoint reported by several nodes or redelivered is measured once.
ALTER TABLE attempts ADD COLUMN checkpoint_signal_at timestamptz;
ALTER TABLE attempts ADD COLUMN checkpoint_committed_at timestamptz;

-- jobs.checkpoint_durations_ms: the job's last measured signal → committed
-- durations, oldest first, at most three. The grace is sized from their
-- maximum: one quick checkpoint must not shrink the grace below what a slow
-- one needed, while a job that got faster is believed after three.
ALTER TABLE jobs ADD COLUMN checkpoint_durations_ms integer[] NOT NULL DEFAULT '{}';
