-- job_events.xid: the transaction that wrote each event, for the cross-job
-- feed (GET /v1/events, docs/api.md "Event feed"). An identity id as a cursor
-- would skip an event whose transaction commits after one with a later id
-- was read; transaction ids let the feed return only events of transactions
-- older than every one still running (pg_snapshot_xmin), so none can appear
-- behind a cursor later.
--
-- Added nullable and the default set afterwards: a NOT NULL column with a
-- volatile default would rewrite the whole table under an exclusive lock.
-- Rows from before this migration keep NULL, which the feed treats as older
-- than any cursor (a client starts its cursor at "now").
ALTER TABLE job_events ADD COLUMN xid xid8;
ALTER TABLE job_events ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
-- The feed's order; a partial index skips the rows from before.
CREATE INDEX job_events_feed ON job_events (xid, job_id, seq) WHERE xid IS NOT NULL;
