-- Training progress and stragglers (issue 21; docs/dispatch.md, "Progress",
-- and "Failures, retries and bad nodes"). Only additions: the previous
-- release runs unchanged.

-- One node's ranks as its latest heartbeat reported them (the running
-- entry's progress[], entries that were well formed), each with `below`:
-- how many reports in a row the scheduler found the rank under
-- --straggler-ratio of its gang's median step rate. NULL: none reported.
ALTER TABLE allocations ADD COLUMN progress jsonb;

-- The attempt's straggler verdicts, in the order given:
-- [{rank, node, steps_per_second, median, at}]; NULL: none.
ALTER TABLE attempts ADD COLUMN stragglers jsonb;
