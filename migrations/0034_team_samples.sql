-- Teams over time (docs/scheduling.md, "Team history"): every
-- --team-sample-seconds the leader writes one row per team with what it
-- publishes to team_usage, and the preemptions the team suffered (its
-- attempts preempted) and caused (attempts preempted to make room for its
-- jobs) since the previous sample. GET /v1/teams/{name}/history reads them.
CREATE TABLE team_samples (
	team_id              bigint NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
	at                   timestamptz NOT NULL,
	gpus_in_use          integer NOT NULL,
	gpus_borrowed        integer NOT NULL,
	gpus_lent            integer NOT NULL,
	decayed_gpu_seconds  double precision NOT NULL,
	fair_share           double precision NOT NULL,
	pending_jobs         integer NOT NULL,
	preemptions_suffered integer NOT NULL,
	preemptions_caused   integer NOT NULL,
	PRIMARY KEY (team_id, at)
);
-- the retention delete, and the previous sample's time
CREATE INDEX team_samples_at ON team_samples (at);

-- Preemptions are counted from the attempts themselves, by when their
-- checkpoint signal went out (set by the preemption's start only): what
-- a sample counts is committed with the preemption, so a leader change
-- loses none.
CREATE INDEX attempts_preempted_at ON attempts (checkpoint_signal_at)
	WHERE checkpoint_signal_at IS NOT NULL;
