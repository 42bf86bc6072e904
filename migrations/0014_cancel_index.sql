-- The scheduler's cancel pass looks every cycle for unfinished jobs with a
-- cancel (or stop) requested: few rows, but without an index a scan of the
-- whole jobs table, which at 20,000 jobs under churn took 115 ms a cycle
-- (bench/RESULTS.md, "bench/dispatch"). Finished jobs keep the flag, so the
-- index holds only the unfinished ones.
CREATE INDEX jobs_cancel_unfinished ON jobs (id)
	WHERE cancel_requested
	AND state IN ('pending', 'scheduled', 'starting', 'running', 'preempting');
