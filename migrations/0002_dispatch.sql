-- Nodes, attempts, allocations, ranks, the dispatch outbox and the leader
-- epoch: what the scheduler and the executors share through PostgreSQL.
-- See docs/dispatch.md for who writes what.

CREATE TABLE leader (
	id         integer PRIMARY KEY CHECK (id = 1),
	epoch      bigint NOT NULL,
	holder     text NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO leader (id, epoch, holder) VALUES (1, 0, '');

CREATE TABLE nodes (
	id             text PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$'),
	address        text NOT NULL,
	labels         jsonb NOT NULL DEFAULT '{}',
	gpus           integer NOT NULL CHECK (gpus >= 0),
	simulated      boolean NOT NULL DEFAULT false,
	state          text NOT NULL DEFAULT 'ready'
	               CHECK (state IN ('ready', 'draining', 'lost')),
	boot_id        text NOT NULL,
	log_url        text NOT NULL DEFAULT '',
	inventory      jsonb NOT NULL DEFAULT '{}',
	running        jsonb NOT NULL DEFAULT '[]', -- as of the last heartbeat
	registered_at  timestamptz NOT NULL DEFAULT now(),
	last_heartbeat timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs ADD COLUMN attempt integer NOT NULL DEFAULT 0; -- current try, 0 = none yet
ALTER TABLE jobs ADD COLUMN failure_class text;
ALTER TABLE jobs ADD COLUMN retries jsonb NOT NULL DEFAULT '{}'; -- class -> tries used
CREATE INDEX jobs_pending ON jobs (id) WHERE state = 'pending';
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('scheduled', 'starting', 'running', 'preempting');

CREATE TABLE attempts (
	job_id        bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
	attempt       integer NOT NULL CHECK (attempt >= 1),
	state         text NOT NULL DEFAULT 'scheduled'
	              CHECK (state IN ('scheduled', 'starting', 'running', 'stopping',
	                               'succeeded', 'failed', 'cancelled')),
	epoch         bigint NOT NULL,
	master_node   text NOT NULL REFERENCES nodes (id),
	master_addr   text NOT NULL,
	master_port   integer NOT NULL CHECK (master_port BETWEEN 1 AND 65535),
	nnodes        integer NOT NULL,
	world_size    integer NOT NULL,
	launch        jsonb NOT NULL, -- the launch data common to every node
	created_at    timestamptz NOT NULL DEFAULT now(),
	running_at    timestamptz,
	ended_at      timestamptz,
	exit_code     integer,
	failure_class text CHECK (failure_class IN ('user', 'oom', 'system', 'hardware', 'hang',
	                                            'node_lost', 'preempted', 'start_timeout',
	                                            'timeout', 'cancelled')),
	message       text,
	PRIMARY KEY (job_id, attempt)
);
-- two live attempts never share a rendezvous port on one node
CREATE UNIQUE INDEX attempts_port ON attempts (master_node, master_port)
	WHERE ended_at IS NULL;

CREATE TABLE allocations (
	job_id        bigint NOT NULL,
	attempt       integer NOT NULL,
	node_id       text NOT NULL REFERENCES nodes (id),
	node_rank     integer NOT NULL,
	first_rank    integer NOT NULL,
	local_ranks   integer NOT NULL,
	gpus          integer[] NOT NULL DEFAULT '{}',
	launched_at   timestamptz NOT NULL DEFAULT now(), -- last (re)send of its launch
	running_at    timestamptz,
	exited_at     timestamptz,
	exit_code     integer,
	failure_class text,
	released_at   timestamptz, -- GPUs free again
	PRIMARY KEY (job_id, attempt, node_id),
	FOREIGN KEY (job_id, attempt) REFERENCES attempts (job_id, attempt) ON DELETE CASCADE
);
CREATE INDEX allocations_live ON allocations (node_id) WHERE released_at IS NULL;

CREATE TABLE ranks (
	job_id     bigint NOT NULL,
	attempt    integer NOT NULL,
	rank       integer NOT NULL,
	node_id    text NOT NULL,
	local_rank integer NOT NULL,
	pid        integer,
	started_at timestamptz NOT NULL DEFAULT now(),
	exit_code  integer,
	signal     integer,
	ended_at   timestamptz,
	PRIMARY KEY (job_id, attempt, rank),
	FOREIGN KEY (job_id, attempt) REFERENCES attempts (job_id, attempt) ON DELETE CASCADE
);

-- Written in the same transaction as the decision; deleted only after Kafka
-- acknowledged the message. id is the message's seq.
CREATE TABLE dispatch_outbox (
	id         bigserial PRIMARY KEY,
	node_id    text NOT NULL,
	epoch      bigint NOT NULL,
	payload    text NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);

CREATE OR REPLACE FUNCTION ty_job_json(j jobs) RETURNS json LANGUAGE sql STABLE AS $$
	SELECT json_build_object('id', j.id,
		'team', (SELECT name FROM teams WHERE id = j.team_id),
		'name', j.name, 'state', j.state, 'spec', j.spec,
		'cancel_requested', j.cancel_requested, 'attempt', j.attempt,
		'failure_class', j.failure_class,
		'created_at', ty_ts(j.created_at), 'updated_at', ty_ts(j.updated_at),
		'finished_at', ty_ts(j.finished_at))
$$;
