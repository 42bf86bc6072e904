-- What the scheduler needs beyond 0004 to preempt gangs and to keep its
-- cycle cheap (docs/dispatch.md, "Preemption"; scheduler/README.md).
--
-- attempts.kill_at: an attempt being preempted is `stopping` with
-- failure_class 'preempted' from the moment the `checkpoint` rows are
-- written; kill_at is when the job's checkpoint grace period ends and the
-- `kill` rows (reason `preempted`) are due. It must live in PostgreSQL, not
-- in the leader's memory: a new leader sends the kills on time too.
-- attempts.preempted_for: the pending job the preemption made room for.
ALTER TABLE attempts ADD COLUMN kill_at timestamptz;
ALTER TABLE attempts ADD COLUMN preempted_for bigint;
CREATE INDEX attempts_kill_due ON attempts (kill_at)
	WHERE state = 'stopping' AND kill_at IS NOT NULL;

-- Decayed usage is brought forward from team_usage.updated_at each cycle by
-- the GPU-seconds of allocations live since then: released allocations are
-- found by their release time instead of by a scan of all history.
CREATE INDEX allocations_released ON allocations (released_at)
	WHERE released_at IS NOT NULL;
