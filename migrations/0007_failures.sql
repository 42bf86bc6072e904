-- Failure handling (docs/dispatch.md, "Failures, retries and bad nodes"):
-- what an attempt's failure is blamed on, retry backoff and node exclusion
-- per job, and the node states and bookkeeping that take failing nodes out
-- of service.

-- The classifier's evidence (the matching log line) of the attempt's
-- failure, and the node the failure is blamed on: the node whose report
-- failed the attempt first (apply.c, "blame").
ALTER TABLE attempts ADD COLUMN evidence text;
ALTER TABLE attempts ADD COLUMN blamed_node text;

-- Nodes this job's later attempts must not use (each blamed for one of its
-- failures), and when a requeued job may be placed again (retry backoff).
ALTER TABLE jobs ADD COLUMN excluded_nodes text[] NOT NULL DEFAULT '{}';
ALTER TABLE jobs ADD COLUMN not_before timestamptz;

-- ready → suspect → drained automatically on failures of different jobs;
-- an admin drain makes a node draining while work runs on it, then drained;
-- undrain makes it ready and forgets its failures (failures_since).
ALTER TABLE nodes DROP CONSTRAINT nodes_state_check;
ALTER TABLE nodes ADD CONSTRAINT nodes_state_check
	CHECK (state IN ('ready', 'suspect', 'draining', 'drained', 'lost'));
ALTER TABLE nodes ADD COLUMN drain_reason text; -- why draining/drained/suspect, NULL when ready
ALTER TABLE nodes ADD COLUMN failures_since timestamptz NOT NULL DEFAULT '-infinity';

-- One row per attempt failure blamed on a node.
CREATE TABLE node_failures (
	id            bigserial PRIMARY KEY,
	node_id       text NOT NULL REFERENCES nodes (id),
	job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	attempt       integer NOT NULL,
	failure_class text NOT NULL,
	evidence      text,
	message       text,
	created_at    timestamptz NOT NULL DEFAULT now(),
	UNIQUE (job_id, attempt, node_id)
);
CREATE INDEX node_failures_node ON node_failures (node_id, created_at);
