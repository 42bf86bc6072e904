-- What-if requests (issue 21; docs/api.md, "What-if"; docs/scheduling.md,
-- "What-if"). The API writes a job spec here and NOTIFYs the scheduler; the
-- leading scheduler answers from its snapshot and NOTIFYs back. Nothing here
-- is a job: the API deletes its row once answered or given up on, and the
-- scheduler deletes rows left behind (an API that died waiting). Only an
-- addition: the previous release runs unchanged.
CREATE TABLE what_if_requests (
	id             bigserial PRIMARY KEY,
	team_id        bigint NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
	priority_class text NOT NULL,
	priority       integer NOT NULL DEFAULT 0,
	spec           jsonb NOT NULL,
	created_at     timestamptz NOT NULL DEFAULT now(),
	answered_at    timestamptz,
	-- {estimated_start, starts_now, estimate, reason, alternatives[], snapshot_at}
	answer         jsonb,
	CHECK ((answered_at IS NULL) = (answer IS NULL))
);
CREATE INDEX what_if_requests_open ON what_if_requests (id) WHERE answered_at IS NULL;
