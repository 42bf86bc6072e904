-- What the scheduler needs beyond 0002 to apply node messages and kills
-- idempotently (docs/dispatch.md, "Scheduler duties").
--
-- nodes.last_seq: the highest envelope seq applied from the node's
-- trainyard.nodes messages. Executors' seq grows across restarts, so a
-- redelivered or replayed register/heartbeat (seq <= last_seq) changes
-- nothing: without it a replayed old heartbeat would refresh last_heartbeat
-- of a dead node, or bring a lost node back, or flip boot_id back.
ALTER TABLE nodes ADD COLUMN last_seq bigint NOT NULL DEFAULT 0;

-- allocations.killed_at: when the last `kill` for this node's part of the
-- attempt was written. Reconciliation re-sends a kill at most once per
-- --resend-ms, and releases the GPUs of a killed attempt that a node, having
-- heartbeated since, neither runs nor finished (it never got the launch).
ALTER TABLE allocations ADD COLUMN killed_at timestamptz;

