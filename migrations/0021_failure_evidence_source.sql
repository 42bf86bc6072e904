-- Who saw what decided a blamed failure's class (attempt_exited's
-- evidence_source, proto.h): 'log' when rank output alone decided it, which
-- a job can print at will, so such failures count towards suspect/drained
-- only when they come from jobs of several teams (docs/dispatch.md,
-- "Failures, retries and bad nodes"). Rows from before are 'executor', as
-- they counted then.
ALTER TABLE node_failures ADD COLUMN evidence_source text NOT NULL DEFAULT 'executor'
	CHECK (evidence_source IN ('executor', 'log'));
