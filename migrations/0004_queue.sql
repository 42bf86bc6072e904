-- What the policy scheduler publishes each cycle, for GET /v1/queue and
-- the team views: why each pending job waits, where it stands, and each
-- team's fair-share inputs. Written by the leader in its cycle transaction;
-- read by the API. See docs/scheduling.md.

ALTER TABLE jobs ADD COLUMN pending_reason text;      -- NULL unless pending
ALTER TABLE jobs ADD COLUMN queue_position integer;   -- 1-based, NULL unless pending
ALTER TABLE jobs ADD COLUMN reserved_until timestamptz; -- a head job's reservation
ALTER TABLE jobs ADD COLUMN preemptions integer NOT NULL DEFAULT 0;
-- submit time for ordering: a preempted job keeps its place
CREATE INDEX jobs_queue ON jobs (queue_position) WHERE state = 'pending';

CREATE TABLE team_usage (
	team_id             bigint PRIMARY KEY REFERENCES teams (id) ON DELETE CASCADE,
	decayed_gpu_seconds double precision NOT NULL DEFAULT 0,
	fair_share          double precision NOT NULL DEFAULT 1, -- F = 2^(-u/s)
	gpus_in_use         integer NOT NULL DEFAULT 0,
	gpus_borrowed       integer NOT NULL DEFAULT 0,  -- in use above nominal
	gpus_lent           integer NOT NULL DEFAULT 0,  -- own nominal used by cohort peers
	pending_jobs        integer NOT NULL DEFAULT 0,
	updated_at          timestamptz NOT NULL DEFAULT now()
);
