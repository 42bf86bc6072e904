/*
 * The nodes a committed cycle held for jobs waiting for their victims
 * (struct sched_holds, scheduler/place.c): kept whole however many, so the
 * next cycle gives every such job its held_nodes. And expedited requeue's
 * holds (sched_hold_active, sched_xholds): when one runs, which nodes.
 */
#include "core/policy.h"
#include "scheduler.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NNODES 1000
#define NJOBS 150 /* × 6 nodes: 900 holds, more than the old table's 512 */
#define PER 6

struct world {
	char ids[NNODES][112];
	struct sched_node_in nodes[NNODES];
	int node_of[NJOBS + 2][PER];
	struct sched_reservation resv[NJOBS + 2];
	struct sched_input in;
	struct sched_decisions d;
};

/* NJOBS preemption holds (job 1000 + j on nodes j, j + NJOBS, ...), a head reservation, one long id. */
static void world_init(struct world *w, int njobs)
{
	memset(w, 0, sizeof(*w));
	for (int n = 0; n < NNODES; n++) {
		snprintf(w->ids[n], sizeof(w->ids[n]), "node-%04d", n);
		w->nodes[n].id = w->ids[n];
	}
	/* an id too long for sched_hold.node */
	memset(w->ids[NNODES - 1], 'x', 100);
	w->ids[NNODES - 1][100] = '\0';
	for (int j = 0; j < njobs; j++) {
		for (int k = 0; k < PER; k++)
			w->node_of[j][k] = j + k * NJOBS;
		w->resv[j] = (struct sched_reservation){.job = 1000 + j,
							.kind = SCHED_RESV_PREEMPTION,
							.nnodes = PER,
							.gpus_per_node = 8,
							.node = w->node_of[j]};
	}
	w->node_of[njobs][0] = NNODES - 2;
	w->resv[njobs] = (struct sched_reservation){
	    .job = 7, .kind = SCHED_RESV_HEAD, .nnodes = 1, .node = w->node_of[njobs]};
	w->node_of[njobs + 1][0] = NNODES - 1;
	w->resv[njobs + 1] = (struct sched_reservation){
	    .job = 8, .kind = SCHED_RESV_PREEMPTION, .nnodes = 1, .node = w->node_of[njobs + 1]};
	w->d.reservations = w->resv;
	w->d.nreservations = njobs + 2;
	w->in.nodes = w->nodes;
	w->in.nnodes = NNODES;
}

TY_TEST(more_than_512_holds_are_kept)
{
	static struct world w;
	struct sched_holds h = {0};
	int first;

	world_init(&w, NJOBS);
	REQUIRE_INT_EQ(sched_holds_keep(&h, 3, &w.in, &w.d), 0);
	CHECK_INT_EQ(h.n, NJOBS * PER);
	CHECK(h.epoch == 3);
	for (int j = 0; j < NJOBS; j++) {
		REQUIRE_INT_EQ(sched_holds_of(&h, 1000 + j, &first), PER);
		for (int k = 0; k < PER; k++) {
			char want[32];

			/* sorted by node id within the job */
			snprintf(want, sizeof(want), "node-%04d", j + k * NJOBS);
			CHECK_STR_EQ(h.v[first + k].node, want);
			CHECK(h.v[first + k].job == 1000 + j);
		}
	}
	CHECK_INT_EQ(sched_holds_of(&h, 7, &first), 0); /* the head's reservation is no hold */
	CHECK_INT_EQ(sched_holds_of(&h, 8, &first), 0); /* an id too long: not kept */
	CHECK_INT_EQ(sched_holds_of(&h, 999, &first), 0);
	CHECK_INT_EQ(sched_holds_of(&h, 5000, &first), 0);
	sched_holds_free(&h);
	CHECK(h.v == NULL && h.n == 0 && h.cap == 0);
	sched_holds_free(&h);
	sched_holds_free(NULL);
}

TY_TEST(each_cycle_replaces_the_holds)
{
	static struct world w;
	struct sched_holds h = {0};
	int first;

	world_init(&w, NJOBS);
	REQUIRE_INT_EQ(sched_holds_keep(&h, 3, &w.in, &w.d), 0);
	world_init(&w, 2);
	REQUIRE_INT_EQ(sched_holds_keep(&h, 4, &w.in, &w.d), 0);
	CHECK_INT_EQ(h.n, 2 * PER);
	CHECK(h.epoch == 4);
	CHECK_INT_EQ(sched_holds_of(&h, 1001, &first), PER);
	CHECK_INT_EQ(sched_holds_of(&h, 1002, &first), 0);
	CHECK_INT_EQ(sched_holds_of(&h, 1100, &first), 0);
	/* nothing held: empty, and still fine to grow again */
	world_init(&w, 0);
	REQUIRE_INT_EQ(sched_holds_keep(&h, 4, &w.in, &w.d), 0);
	CHECK_INT_EQ(h.n, 0);
	CHECK_INT_EQ(sched_holds_of(&h, 1000, &first), 0);
	world_init(&w, NJOBS);
	REQUIRE_INT_EQ(sched_holds_keep(&h, 5, &w.in, &w.d), 0);
	CHECK_INT_EQ(h.n, NJOBS * PER);
	sched_holds_free(&h);
}

/* A pending job requeued expedited at from_ms with nodes held (NULL: none). */
static struct sched_qjob xjob(int64_t id, bool expedited, const char *nodes, int64_t from_ms)
{
	return (struct sched_qjob){
	    .id = id, .expedited = expedited, .hold_nodes = (char *)nodes, .hold_from_ms = from_ms};
}

TY_TEST(an_expedited_hold_runs_for_its_window_after_the_backoff)
{
	struct sched_qjob q = xjob(1, true, "n1", 10000);

	/* from the requeue (before its backoff ends) to the window after it */
	CHECK(sched_hold_active(&q, 0, 60));
	CHECK(sched_hold_active(&q, 10000, 60));
	CHECK(sched_hold_active(&q, 69999, 60));
	CHECK(!sched_hold_active(&q, 70000, 60));
	CHECK(!sched_hold_active(&q, 10000, 0)); /* 0 = off */
	q.expedited = false;
	CHECK(!sched_hold_active(&q, 10000, 60));
	q = xjob(1, true, NULL, 10000); /* nothing to hold */
	CHECK(!sched_hold_active(&q, 10000, 60));
}

TY_TEST(expedited_holds_name_the_snapshots_nodes_of_each_active_job)
{
	static const char *const ids[] = {"a", "b", "c", "d"};
	struct sched_node_in nodes[4] = {{0}};
	struct sched_input in = {.nodes = nodes, .nnodes = 4, .now_ms = 5000};
	struct sched_qjob q[] = {
	    xjob(1, true, "b,d", 0),	      /* active */
	    xjob(2, true, "a", -60000),	      /* lapsed */
	    xjob(3, false, "c", 0),	      /* not expedited */
	    xjob(4, true, "gone,c,toolong" "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	       "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 0),
	};
	struct sched_xhold *h = NULL;
	int n = -1;

	for (int i = 0; i < 4; i++)
		nodes[i].id = ids[i];
	REQUIRE_INT_EQ(sched_xholds(&h, &n, q, 4, &in, 60), 0);
	REQUIRE_INT_EQ(n, 3);
	CHECK(h[0].job == 1 && h[0].node == 1);
	CHECK(h[1].job == 1 && h[1].node == 3);
	/* a node not in the snapshot, or an id too long, holds nothing */
	CHECK(h[2].job == 4 && h[2].node == 2);
	free(h);

	/* off, or nothing active: none, and nothing allocated */
	REQUIRE_INT_EQ(sched_xholds(&h, &n, q, 4, &in, 0), 0);
	CHECK(h == NULL && n == 0);
	REQUIRE_INT_EQ(sched_xholds(&h, &n, &q[1], 2, &in, 60), 0);
	CHECK(h == NULL && n == 0);
	/* only unknown nodes: none */
	q[0].hold_nodes = "x,y";
	REQUIRE_INT_EQ(sched_xholds(&h, &n, q, 1, &in, 60), 0);
	CHECK(h == NULL && n == 0);
}

TY_TEST(a_hold_keeps_off_every_other_job_but_one_holding_the_node_too)
{
	/* job 1 holds nodes 0 and 1, job 2 holds node 1 (their gangs shared it) */
	static const struct sched_xhold h[] = {{1, 0, 0}, {1, 1, 0}, {2, 1, 0}};

	CHECK(!sched_xhold_keeps_off(h, 3, 0, 1)); /* its own */
	CHECK(sched_xhold_keeps_off(h, 3, 0, 2));  /* node 0: job 1's alone */
	CHECK(!sched_xhold_keeps_off(h, 3, 1, 2)); /* node 1: job 2's too */
	CHECK(!sched_xhold_keeps_off(h, 3, 2, 1));
	for (int k = 0; k < 3; k++) /* a job holding nothing */
		CHECK(sched_xhold_keeps_off(h, 3, k, 3));
}
