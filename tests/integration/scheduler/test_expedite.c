/*
 * Expedited requeue's hold in the daemon (docs/scheduling.md, "Expedited
 * requeue"), the test playing the executors: the nodes of an attempt the
 * infrastructure ended, but the blamed one, are held for its job for
 * --expedite-hold-seconds after its backoff; another team's job that would
 * fit there waits, the blamed node is free to it; the hold lapses at the
 * window's end or when the job is cancelled, survives a leader change, and
 * is off with 0.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

struct gang {
	long long job;
	const struct proto_msg *l1, *l2; /* launches on n1 and n2 */
};

/*
 * n1..n3, 4 GPUs each, scheduler started with args: x (2 × 4, the case's
 * team) runs on n1 and n2, a filler on n3.
 */
static struct gang cluster(struct fx *f, const char *const *args)
{
	struct gang x;
	const struct proto_msg *lf;
	long long fill;

	for (int i = 1; i <= 3; i++)
		fx_node(f, ty_test_strf("n%d", i), 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	x.job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4},'retry':{'system':3}");
	FX_WAIT(f, T, "n1,n2",
		"SELECT string_agg(node_id, ',' ORDER BY node_id) FROM allocations"
		" WHERE job_id = $1",
		fx_n(x.job));
	REQUIRE((x.l1 = fx_recv(f, "n1", "launch", x.job, T)) != NULL);
	REQUIRE((x.l2 = fx_recv(f, "n2", "launch", x.job, T)) != NULL);
	fx_run(f, "n1", x.l1);
	fx_run(f, "n2", x.l2);
	fill = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	FX_WAIT(f, T, "n3", "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(fill));
	REQUIRE((lf = fx_recv(f, "n3", "launch", fill, T)) != NULL);
	fx_run(f, "n3", lf);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(x.job));
	return x;
}

/* A job of another team (a better fair share than x's) that waits now. */
static long long other(struct fx *f, const char *team, int nodes)
{
	long long j = fx_submit_to(
	    f, team, ty_test_strf(",'resources':{'nodes':%d,'gpus_per_node':4}", nodes));

	FX_WAIT(f, T, "t", "SELECT pending_reason IS NOT NULL FROM jobs WHERE id = $1", fx_n(j));
	return j;
}

/* x's attempt 1 fails with cls on n1 (node_fault false: nobody blamed); n2 reports the kill. */
static void fail(struct fx *f, const struct gang *x, const char *cls, bool node_fault)
{
	fx_exit_with(f, "n1", x->l1, 1, cls, "rank 0: NCCL error",
		     node_fault ? "" : ",'node_fault':false");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'requeued'",
		fx_n(x->job));
	REQUIRE(fx_recv(f, "n2", "kill", x->job, T) != NULL);
	fx_exit(f, "n2", x->l2, 137, "", "killed");
}

/* The requeued event's message (key NULL) or data member key, as text. */
static const char *requeued(struct fx *f, long long job, const char *key)
{
	if (!key)
		return FX_Q(f, "SELECT message FROM job_events WHERE job_id = $1"
			       " AND type = 'requeued'",
			    fx_n(job));
	return FX_Q(f, "SELECT data->>$2 FROM job_events WHERE job_id = $1 AND type = 'requeued'",
		    fx_n(job), key);
}

static const char *nodes_of(struct fx *f, long long job, int attempt)
{
	return FX_Q(f,
		    "SELECT string_agg(node_id, ',' ORDER BY node_id) FROM allocations"
		    " WHERE job_id = $1 AND attempt = $2",
		    fx_n(job), fx_n(attempt));
}

/*
 * Nobody blamed: n1 and n2 are held. During x's backoff y (another team,
 * better fair share, would fit n1 + n2) waits; then x starts there again.
 */
TY_TEST(expedited_job_gets_its_held_nodes_back_while_another_teams_job_waits)
{
	static const char *const args[] = {"--retry-backoff-seconds=2",
					   "--retry-backoff-max-seconds=2", NULL};
	struct fx *f = fx_start();
	struct gang x = cluster(f, args);
	const char *b = fx_team(f, "b", 12, -1, NULL);
	long long y = other(f, b, 2);

	fail(f, &x, "system", false);
	CHECK_STR_EQ(requeued(f, x.job, "held_nodes"), "[\"n1\", \"n2\"]");
	CHECK_STR_EQ(requeued(f, x.job, "hold_seconds"), "60");
	CHECK_STR_EQ(requeued(f, x.job, NULL),
		     "attempt 1 failed: rank 0: NCCL error (system); requeued for attempt 2 "
		     "(system retry 1 of 3, backoff 2s); expedited: first in its team's order; "
		     "nodes n1, n2 held for it for 60s after its backoff");
	FX_WAIT(f, T, "2",
		"SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2", fx_n(x.job));
	CHECK_STR_EQ(nodes_of(f, x.job, 2), "n1,n2");
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || count(a.job_id) FROM jobs j"
			     " LEFT JOIN allocations a ON a.job_id = j.id WHERE j.id = $1"
			     " GROUP BY j.state",
			  fx_n(y)),
		     "pending 0");
	fx_sched_stop(f, 0);
}

/*
 * n1 blamed: only n2 is held. y takes n1 at once; z, which would fit n2,
 * waits until the 3 s window after the failure has passed, then gets it.
 */
TY_TEST(blamed_node_is_not_held_and_the_hold_lapses_after_its_window)
{
	static const char *const args[] = {"--retry-backoff-seconds=0",
					   "--expedite-hold-seconds=3", NULL};
	struct fx *f = fx_start();
	struct gang x = cluster(f, args);
	const char *b = fx_team(f, "b", 12, -1, NULL);
	long long y = other(f, b, 1), z;

	fail(f, &x, "system", true);
	CHECK_STR_EQ(requeued(f, x.job, "held_nodes"), "[\"n2\"]");
	CHECK(strstr(requeued(f, x.job, NULL), "; node n2 held for it for 3s") != NULL);
	FX_WAIT(f, T, "n1", "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(y));
	z = other(f, b, 1);
	FX_WAIT(f, T, "n2", "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(z));
	/* not before the window's end (no backoff: it starts with the failure) */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT z.created_at >= x.ended_at + interval '3 seconds'"
			  " FROM attempts z, attempts x WHERE z.job_id = $1 AND z.attempt = 1"
			  " AND x.job_id = $2 AND x.attempt = 1",
			  fx_n(z), fx_n(x.job)),
		     "t");
	/* x (n1 excluded, n3 busy) still waits */
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(x.job)), "pending");
	fx_sched_stop(f, 0);
}

/*
 * While held, z's reason names the hold (and no exclusion of its own).
 * Cancelled, the job holds nothing: z gets n2 long before the window's end.
 */
TY_TEST(hold_lapses_when_the_job_is_cancelled)
{
	static const char *const args[] = {"--retry-backoff-seconds=0",
					   "--expedite-hold-seconds=600", NULL};
	struct fx *f = fx_start();
	struct gang x = cluster(f, args);
	const char *b = fx_team(f, "b", 12, -1, NULL);
	long long y = other(f, b, 1), z;
	const char *reason;

	fail(f, &x, "system", true);
	FX_WAIT(f, T, "n1", "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(y));
	z = other(f, b, 1);
	FX_WAIT(f, T, "t", "SELECT pending_reason LIKE $2 FROM jobs WHERE id = $1", fx_n(z),
		ty_test_strf("waiting for a node with 4 free GPUs%%; 1 node held for job %lld's "
			     "expedited requeue until %%",
			     x.job));
	reason = FX_Q(f, "SELECT pending_reason FROM jobs WHERE id = $1", fx_n(z));
	CHECK(reason && !strstr(reason, "excluded"));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(z)), "0");
	fx_cancel(f, x.job);
	FX_WAIT(f, T, "n2", "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(z));
	fx_sched_stop(f, 0);
}

/* The hold is derived from PostgreSQL: a new leader keeps it. */
TY_TEST(hold_survives_a_leader_change)
{
	static const char *const args[] = {"--retry-backoff-seconds=4",
					   "--retry-backoff-max-seconds=4", NULL};
	struct fx *f = fx_start();
	struct gang x = cluster(f, args);
	const char *b = fx_team(f, "b", 12, -1, NULL);
	long long y = other(f, b, 2);

	fail(f, &x, "system", false);
	fx_sched_kill(f, 0);
	fx_sched_start(f, "s2", args);
	FX_WAIT(f, T, "2",
		"SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = 2", fx_n(x.job));
	CHECK_STR_EQ(nodes_of(f, x.job, 2), "n1,n2");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(y)), "0");
	fx_sched_stop(f, 1);
}

/* --expedite-hold-seconds=0: nothing is held, y and z take n1 and n2 at once. */
TY_TEST(hold_zero_is_off)
{
	static const char *const args[] = {"--retry-backoff-seconds=0",
					   "--expedite-hold-seconds=0", NULL};
	struct fx *f = fx_start();
	struct gang x = cluster(f, args);
	const char *b = fx_team(f, "b", 12, -1, NULL);
	long long y = other(f, b, 1), z = other(f, b, 1);

	fail(f, &x, "system", false);
	CHECK(requeued(f, x.job, "held_nodes") == NULL);
	CHECK(strstr(requeued(f, x.job, NULL), "held") == NULL);
	FX_WAIT(f, T, "n1,n2",
		"SELECT string_agg(node_id, ',' ORDER BY node_id) FROM allocations"
		" WHERE job_id IN ($1, $2)",
		fx_n(y), fx_n(z));
	fx_sched_stop(f, 0);
}
