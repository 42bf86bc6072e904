-- Node conditions (issue 17; docs/dispatch.md, "Node conditions"): what an
-- executor's health watch finds wrong with its node's hardware, listed in
-- its heartbeats and registers (proto.h, PROTO_CONDITION_KINDS).
--
-- One row per occurrence: a condition (kind, gpu or port, code) that one
-- boot of the node's executor first saw at first_seen. It is current
-- (cleared_at NULL) while the node's messages list it; once a later
-- heartbeat or register of that boot leaves it out, or a new boot reports,
-- it is cleared and stays as history. A fatal occurrence drains the node
-- when the scheduler first records it, never again: after an admin's
-- undrain the same listed condition leaves the node ready.
CREATE TABLE node_conditions (
	id          bigserial PRIMARY KEY,
	node_id     text NOT NULL REFERENCES nodes (id),
	boot_id     text NOT NULL,
	kind        text NOT NULL CHECK (kind ~ '^[a-z0-9_]{1,32}$'),
	severity    text NOT NULL CHECK (severity IN ('fatal', 'degraded')),
	gpu         integer CHECK (gpu >= 0),
	gpu_uuid    text,
	port        text,
	code        bigint,
	evidence    text NOT NULL,
	first_seen  timestamptz NOT NULL, -- the executor's clock
	last_seen   timestamptz NOT NULL, -- the executor's clock, as last listed
	recorded_at timestamptz NOT NULL DEFAULT now(), -- when the scheduler first recorded it
	cleared_at  timestamptz           -- NULL: current
);
-- An occurrence is recorded once; the coalesces make a missing gpu, port or code one value.
CREATE UNIQUE INDEX node_conditions_occurrence ON node_conditions
	(node_id, boot_id, kind, coalesce(gpu, -1), coalesce(port, ''), coalesce(code, -1),
	 first_seen);
CREATE INDEX node_conditions_current ON node_conditions (node_id) WHERE cleared_at IS NULL;
