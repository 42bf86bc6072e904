-- Job isolation on nodes (issue 16): what the executor's register says of its
-- attempts, 'runc' (each in its own container, as its team's uid, within its
-- limits) or 'none' (--isolation none: ranks on the host as the executor's
-- user). NULL = not reported (an executor from before this migration).
ALTER TABLE nodes ADD COLUMN isolation text CHECK (isolation IN ('runc', 'none'));
