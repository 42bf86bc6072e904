-- Audit log of requests: one row per mutating API request (POST, PUT,
-- PATCH, DELETE), refused ones included, written by the API as the reply is decided
-- (api/audit.c, docs/security.md "Audit log"). Never the request body or
-- the bearer token: who is the token's id and what the API knew of it.
-- audit_log (0001) keeps the handlers' and the scheduler's action rows
-- (team.create, node.drain, ...) written in the mutation's transaction.

CREATE TABLE audit_requests (
	id           bigserial PRIMARY KEY,
	at           timestamptz NOT NULL DEFAULT now(),
	request_id   text NOT NULL,
	-- NULL when the request carried no token the API recognised (401 and
	-- refusals before authentication); not a foreign key, so a row is
	-- never refused and tokens are only ever revoked, not deleted
	token_id     bigint,
	principal    text,       -- the token's name, or 'job N attempt M'
	role         text CHECK (role IN ('admin', 'member', 'viewer')),
	team         text,       -- the token's team (NULL for admins)
	trial_job    bigint,     -- set for a trial metrics ('tym_') token
	method       text NOT NULL,
	route        text,       -- the route pattern, NULL when none matched
	path         text NOT NULL,
	target_ids   text[] NOT NULL DEFAULT '{}', -- the path's "{}" segments
	created_id   bigint,     -- the id a 201 reply created
	status       integer NOT NULL,
	problem_code text,       -- the problem's code for 4xx/5xx replies
	peer         inet,
	summary      text CHECK (length(summary) <= 200)
);
-- since/until and pruning by age; the admin listing pages by id
CREATE INDEX audit_requests_at ON audit_requests (at);
CREATE INDEX audit_requests_token ON audit_requests (token_id, id DESC) WHERE token_id IS NOT NULL;
CREATE INDEX audit_requests_team ON audit_requests (team, id DESC) WHERE team IS NOT NULL;
