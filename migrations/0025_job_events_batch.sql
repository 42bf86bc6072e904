-- ty_job_events(): many job events in one statement, what ty_job_event()
-- does for each, in array order (the scheduler writes a transaction's events
-- this way just before it commits). Each job's last_event_seq is bumped once,
-- by its number of events; its events take the seqs that follow, in order,
-- so the sequence stays gap-free. Events of a job that does not exist are
-- dropped, as ty_job_event() drops them. Rows are inserted in array order, so
-- the per-row triggers (NOTIFY, webhooks) see each job's previous event.
CREATE FUNCTION ty_job_events(p_job bigint[], p_type text[], p_state text[], p_message text[],
                              p_data jsonb[]) RETURNS integer LANGUAGE sql AS $$
	WITH e AS (
		SELECT * FROM unnest(p_job, p_type, p_state, p_message, p_data)
			WITH ORDINALITY AS e(job, type, state, message, data, ord)),
	n AS (SELECT job, count(*)::integer AS n FROM e GROUP BY job),
	j AS (
		UPDATE jobs SET last_event_seq = last_event_seq + n.n, updated_at = now()
		FROM n WHERE jobs.id = n.job
		RETURNING jobs.id, jobs.last_event_seq - n.n AS base),
	ins AS (
		INSERT INTO job_events (job_id, seq, type, state, message, data)
		SELECT e.job, j.base + row_number() OVER (PARTITION BY e.job ORDER BY e.ord),
			e.type, e.state, e.message, coalesce(e.data, '{}')
		FROM e JOIN j ON j.id = e.job ORDER BY e.ord
		RETURNING 1)
	SELECT count(*)::integer FROM ins
$$;
