/*
 * The scheduler's in-memory mirror (scheduler/mirror.c: nodes, live
 * allocations, ports, teams) against PostgreSQL. Every scheduler the
 * fixture starts runs with --check-mirror: each cycle compares the mirror,
 * kept up to date incrementally, with a fresh load and logs "mirror
 * diverges from PostgreSQL" otherwise, which fails the case at teardown.
 * This case drives the mirror through many transitions of every kind —
 * placements, completions, failures, cancels, a node lost and back,
 * preemptions, team changes made behind the scheduler's back — and checks
 * that the incremental path was the one taken.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <string.h>

#define T 15000
#define NNODES 4

static const char *const nodes[NNODES] = {"n1", "n2", "n3", "n4"};

/* The next launch on any node, waiting up to ms. */
static const struct proto_msg *recv_any(struct fx *f, const char *type, int ms,
					const char **node)
{
	int64_t end = ty_mono_ms() + ms;

	do {
		for (int i = 0; i < NNODES; i++) {
			const struct proto_msg *m = fx_recv(f, nodes[i], type, 0, 0);

			if (m) {
				*node = nodes[i];
				return m;
			}
		}
		fx_poll(f, 20);
	} while (ty_mono_ms() < end);
	return NULL;
}

struct run {
	const struct proto_msg *launch;
	const char *node;
	bool live;
};

TY_TEST(mirror_equals_a_fresh_load_through_churn)
{
	static const char *const args[] = {
	    "--node-timeout-ms=1500", "--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0",
	    NULL};
	struct fx *f = fx_start();
	struct run runs[64];
	const char *a, *b, *log;
	int nruns = 0, lost = -1;

	a = fx_team(f, "a", 4, -1, "c1");
	b = fx_team(f, "b", 4, -1, "c1");
	for (int i = 0; i < NNODES; i++)
		fx_node(f, nodes[i], 2);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "4", "SELECT count(*) FROM nodes WHERE state = 'ready'");

	/* rounds of placements and completions (successes, failures, cancels) */
	for (int round = 0; round < 3; round++) {
		int first = nruns;

		for (int j = 0; j < NNODES; j++)
			fx_submit_to(f, a, ",'resources':{'nodes':1,'gpus_per_node':2}");
		for (int j = 0; j < NNODES; j++) {
			struct run *r = &runs[nruns];

			r->launch = recv_any(f, "launch", T, &r->node);
			REQUIRE(r->launch != NULL);
			fx_run(f, r->node, r->launch);
			r->live = true;
			nruns++;
		}
		FX_WAIT(f, T, "8", "SELECT count(*) FROM allocations a, unnest(a.gpus)"
				   " WHERE a.released_at IS NULL");
		/* the team changes behind the scheduler's back (as the API's PATCH does) */
		FX_Q(f, "UPDATE teams SET weight = weight + 1, updated_at = now() WHERE name = $1 "
			"RETURNING id",
		     b);
		fx_exit(f, runs[first].node, runs[first].launch, 0, "", "");
		fx_exit(f, runs[first + 1].node, runs[first + 1].launch, 3, "user", "exit 3");
		fx_cancel(f, runs[first + 2].launch->job);
		fx_exit(f, runs[first + 2].node, runs[first + 2].launch, 143, "cancelled",
			"killed on request");
		fx_exit(f, runs[first + 3].node, runs[first + 3].launch, 0, "", "");
		for (int j = first; j < first + 4; j++)
			runs[j].live = false;
		FX_WAIT(f, T, "0", "SELECT count(*) FROM allocations WHERE released_at IS NULL");
		/* the failed job may be retried: let its attempts run out before the next round */
		FX_WAIT(f, 3 * T, "0",
			"SELECT count(*) FROM jobs WHERE state IN ('pending', 'scheduled',"
			" 'starting', 'running')");
		for (int i = 0; i < NNODES; i++) {
			const struct proto_msg *m;
			const char *node;

			while ((m = recv_any(f, "launch", 0, &node)))
				fx_exit(f, node, m, 0, "", "");
		}
		FX_WAIT(f, T, "0", "SELECT count(*) FROM allocations WHERE released_at IS NULL");
	}

	/* team a fills the cluster (4 of its 8 GPUs borrowed from b) */
	for (int j = 0; j < NNODES; j++)
		fx_submit_to(f, a, ",'resources':{'nodes':1,'gpus_per_node':2}");
	for (int j = 0; j < NNODES; j++) {
		struct run *r = &runs[nruns];

		r->launch = recv_any(f, "launch", T, &r->node);
		REQUIRE(r->launch != NULL);
		fx_run(f, r->node, r->launch);
		r->live = true;
		nruns++;
	}
	/* a node is lost with its gang, then comes back */
	lost = nruns - 1;
	fx_node_beat(f, runs[lost].node, false);
	FX_WAIT(f, T, "lost", "SELECT state FROM nodes WHERE id = $1", runs[lost].node);
	fx_exit(f, runs[lost].node, runs[lost].launch, 143, "cancelled", "node lost");
	fx_node_beat(f, runs[lost].node, true);
	FX_WAIT(f, T, "ready", "SELECT state FROM nodes WHERE id = $1", runs[lost].node);

	/* team b reclaims its nominal GPUs: a's borrowing gangs are preempted */
	fx_submit_to(f, b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	fx_submit_to(f, b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, 2 * T, "t", "SELECT count(*) >= 1 FROM attempts WHERE preempted_for IS NOT NULL");
	fx_poll(f, 1500); /* a few more checked cycles */

	log = fx_sched_log(f, 0);
	CHECK(strstr(log, "mirror: read again") != NULL); /* the incremental path ran */
	CHECK(strstr(log, "mirror diverges from PostgreSQL") == NULL);
	fx_sched_stop(f, 0);
}
