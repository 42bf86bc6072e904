-- One row per checkpoint (job, step) the gang may resume from (docs/dispatch.md,
-- "Resume"): filled from the checkpoint_written events of the node that
-- hashed it (rank 0's), first report wins. The scheduler names the newest
-- 'valid' one in the launch; a node that finds its copy differs rejects it.
CREATE TABLE checkpoints (
	job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	step        bigint NOT NULL CHECK (step >= 0),
	path        text NOT NULL,
	-- lowercase hex SHA-256 of the MANIFEST.json bytes; NULL unless it verified
	digest      text CHECK (digest ~ '^[0-9a-f]{64}$'),
	bytes       bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0),
	files       bigint NOT NULL DEFAULT 0 CHECK (files >= 0),
	node_id     text NOT NULL,
	attempt     integer NOT NULL CHECK (attempt >= 1),
	verified_at timestamptz NOT NULL DEFAULT now(),
	status      text NOT NULL CHECK (status IN ('valid', 'torn', 'corrupt', 'rejected', 'deleted')),
	reason      text,
	PRIMARY KEY (job_id, step),
	CHECK (status <> 'valid' OR digest IS NOT NULL)
);
