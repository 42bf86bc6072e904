-- Straggler time as it happened (docs/scheduling.md, "Goodput"): the share
-- of the gang's time its stragglers cost it, as a step function of time,
-- [[ms since the epoch, share], ...] in order, each share in effect until
-- the next entry and the last until the attempt's end; 0 when no rank is a
-- straggler any more. The scheduler appends an entry when the share moves
-- (a verdict, a slower straggler, a recovery). It replaces straggler_at and
-- straggler_lost, which counted the largest share from the first verdict
-- to the end; they are no longer written, and the ledger reads them only
-- for an attempt judged by the previous release.
ALTER TABLE attempts ADD COLUMN straggler_shares jsonb
	CHECK (jsonb_typeof(straggler_shares) = 'array');
