-- Early stopping (POST /v1/jobs/{id}/stop): `stopped` is a final job state
-- like `cancelled` but success-like — an HPO service pruned the trial. A stop
-- sets cancel_requested too, so the scheduler stops the gang exactly as for a
-- cancel; stop_requested only changes the final state it records (`stopped`
-- instead of `cancelled`). The attempt itself still ends `cancelled`.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
	CHECK (state IN ('pending', 'scheduled', 'starting', 'running', 'preempting',
	                 'succeeded', 'failed', 'cancelled', 'stopped'));
ALTER TABLE jobs ADD COLUMN stop_requested boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD CHECK (NOT stop_requested OR cancel_requested);
