-- Explicit launch acknowledgements (issue 18): an executor answers every
-- launch it accepts, and every re-sent launch of an attempt it runs or ran,
-- with a launch_accepted event; rank_started and attempt_running count as
-- one too (executors of the previous release send no launch_accepted).
-- accepted_at is when the first acknowledgement was applied, NULL until
-- then: reconciliation re-sends only launches not acknowledged within
-- --resend-ms of being sent (launched_at stays the time of the last send).
-- Allocations of attempts that already started count as acknowledged, so an
-- upgrade re-sends nothing that runs.
ALTER TABLE allocations ADD COLUMN accepted_at timestamptz;
UPDATE allocations SET accepted_at = coalesce(running_at, launched_at)
	WHERE exited_at IS NULL AND (running_at IS NOT NULL OR EXISTS (SELECT 1 FROM ranks r
		WHERE r.job_id = allocations.job_id AND r.attempt = allocations.attempt
		AND r.node_id = allocations.node_id) OR EXISTS (SELECT 1 FROM nodes n
		WHERE n.id = allocations.node_id AND n.running @> jsonb_build_array(
		jsonb_build_object('job', allocations.job_id, 'attempt', allocations.attempt))));
