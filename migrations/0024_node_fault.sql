-- An expected inventory (issue 17): an executor told how many GPUs its node
-- should have (--expect-gpus, or the label trainyard.io/expected-gpus)
-- registers that count and, when it finds fewer or cannot read one, a fault
-- ("found 7 of 8 expected GPUs; GPU 3: ... GPU is lost"). The scheduler
-- stores both at every register (NULL: no expectation / no fault; a register
-- without a fault clears it) and places nothing new on a node with a fault.
-- The fault is a column beside the state, not a state of its own: it comes
-- and goes with registers only, whatever the admin's drain or the automatic
-- suspect/drained rule does to the state, and none of those touches it.
ALTER TABLE nodes ADD COLUMN fault text;
ALTER TABLE nodes ADD COLUMN expected_gpus integer
	CHECK (expected_gpus IS NULL OR expected_gpus >= 1);

-- The state the API and jobctl show, and filter by: a `ready` node with a
-- fault takes no new work, so it reads `not_ready`; every other state is
-- shown as it is (a drained node with a fault is drained, and says why in
-- its fault).
CREATE FUNCTION ty_node_state(p_state text, p_fault text) RETURNS text
	LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE WHEN p_state = 'ready' AND p_fault IS NOT NULL THEN 'not_ready'
		ELSE p_state END
$$;
