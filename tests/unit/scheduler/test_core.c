/* The pure placement core: first fit, all-or-nothing, GPU and port choice. */
#include "core/core.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#define MAXN 8

/* A node of a table row: id, GPUs, GPUs already held, ports already held. */
struct tnode {
	const char *id;
	int gpus;
	int used[8];
	int nused;
	int ports[4];
	int nports;
};

struct want {
	const char *nodes; /* "a,b" in node-rank order, NULL = does not fit */
	const char *gpus;  /* "0,1|2,3" per node, in node-rank order */
	int local_ranks;
	int world_size;
	int port;
};

struct place_case {
	const char *name;
	struct tnode nodes[MAXN];
	int nnodes;
	struct sched_gang gang;
	int port_lo, port_hi;
	struct want want;
};

static struct sched_snapshot *build(const struct tnode *nodes, int n, int lo, int hi)
{
	struct sched_snapshot *s = sched_snapshot_new(lo, hi);
	struct ty_err err = {0};

	REQUIRE(s != NULL);
	for (int i = 0; i < n; i++) {
		int at = sched_snapshot_add_node(s, nodes[i].id, nodes[i].gpus, &err);

		REQUIRE_INT_EQ(at, i);
		for (int k = 0; k < nodes[i].nused; k++)
			sched_snapshot_use_gpu(s, at, nodes[i].used[k]);
		for (int k = 0; k < nodes[i].nports; k++)
			REQUIRE_INT_EQ(sched_snapshot_use_port(s, at, nodes[i].ports[k], &err), 0);
	}
	return s;
}

/* "a,b" and "0,1|2,3" of a placement. */
static void describe(char *nodes, char *gpus, size_t sz, const struct sched_snapshot *s,
		     const struct sched_placement *p)
{
	size_t nl = 0, gl = 0;

	nodes[0] = gpus[0] = '\0';
	for (int r = 0; r < p->nnodes; r++) {
		nl += (size_t)snprintf(nodes + nl, sz - nl, "%s%s", r ? "," : "",
				       sched_snapshot_node_id(s, p->node[r]));
		if (r)
			gl += (size_t)snprintf(gpus + gl, sz - gl, "|");
		for (int k = 0; k < p->gpus_per_node; k++)
			gl += (size_t)snprintf(gpus + gl, sz - gl, "%s%d", k ? "," : "",
					       p->gpus[r * p->gpus_per_node + k]);
	}
}

static const struct place_case cases[] = {
    {"one node fits",
     {{"a", 8, {0}, 0, {0}, 0}},
     1,
     {1, 1, 8, false},
     29500,
     29999,
     {"a", "0,1,2,3,4,5,6,7", 8, 8, 29500}},
    {"two nodes, first fit in snapshot order",
     {{"a", 4, {0}, 0, {0}, 0}, {"b", 4, {0}, 0, {0}, 0}, {"c", 4, {0}, 0, {0}, 0}},
     3,
     {2, 2, 2, false},
     29500,
     29999,
     {"a,b", "0,1|0,1", 2, 4, 29500}},
    {"all or nothing: one node short",
     {{"a", 8, {0}, 0, {0}, 0}, {"b", 8, {0, 1, 2, 3, 4}, 5, {0}, 0}},
     2,
     {3, 2, 4, false},
     29500,
     29999,
     {NULL, NULL, 0, 0, 0}},
    {"all or nothing: second node has too few free GPUs",
     {{"a", 8, {0}, 0, {0}, 0}, {"b", 8, {0, 1, 2, 3, 4}, 5, {0}, 0}},
     2,
     {4, 2, 4, false},
     29500,
     29999,
     {NULL, NULL, 0, 0, 0}},
    {"busy node skipped, lowest free GPU indices chosen",
     {{"a", 4, {0, 1, 2}, 3, {0}, 0}, {"b", 4, {1, 3}, 2, {0}, 0}, {"c", 4, {0}, 1, {0}, 0}},
     3,
     {5, 2, 2, false},
     29500,
     29999,
     {"b,c", "0,2|1,2", 2, 4, 29500}},
    {"ports in use on the master are skipped",
     {{"a", 2, {0}, 0, {29500, 29501, 29503}, 3}, {"b", 2, {0}, 0, {0}, 0}},
     2,
     {6, 2, 1, false},
     29500,
     29999,
     {"a,b", "0|0", 1, 2, 29502}},
    {"master moves to a node with a free port",
     {{"a", 2, {0}, 0, {29500, 29501}, 2}, {"b", 2, {0}, 0, {0}, 0}, {"c", 2, {0}, 0, {0}, 0}},
     3,
     {7, 2, 1, false},
     29500,
     29501,
     {"b,a", "0|0", 1, 2, 29500}},
    {"no free port anywhere",
     {{"a", 2, {0}, 0, {29500}, 1}, {"b", 2, {0}, 0, {29500}, 1}},
     2,
     {8, 1, 1, false},
     29500,
     29500,
     {NULL, NULL, 0, 0, 0}},
    {"per_node launch: one rank per node",
     {{"a", 8, {0}, 0, {0}, 0}, {"b", 8, {0}, 0, {0}, 0}},
     2,
     {9, 2, 8, true},
     29500,
     29999,
     {"a,b", "0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7", 1, 2, 29500}},
    {"per_gpu launch: one rank per GPU",
     {{"a", 8, {0}, 0, {0}, 0}, {"b", 8, {0}, 0, {0}, 0}},
     2,
     {10, 2, 8, false},
     29500,
     29999,
     {"a,b", "0,1,2,3,4,5,6,7|0,1,2,3,4,5,6,7", 8, 16, 29500}},
    {"zero-GPU job fits nodes without GPUs, one rank each",
     {{"cpu1", 0, {0}, 0, {0}, 0}, {"cpu2", 0, {0}, 0, {0}, 0}, {"gpu", 8, {0}, 0, {0}, 0}},
     3,
     {11, 3, 0, false},
     29500,
     29999,
     {"cpu1,cpu2,gpu", "||", 1, 3, 29500}},
    {"zero-GPU job fits a fully busy GPU node",
     {{"a", 2, {0, 1}, 2, {0}, 0}},
     1,
     {12, 1, 0, true},
     29500,
     29999,
     {"a", "", 1, 1, 29500}},
    {"empty cluster",
     {{NULL, 0, {0}, 0, {0}, 0}},
     0,
     {13, 1, 0, false},
     29500,
     29999,
     {NULL, NULL, 0, 0, 0}},
};

TY_TEST(place_table)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct place_case *c = &cases[i];
		struct sched_snapshot *s = build(c->nodes, c->nnodes, c->port_lo, c->port_hi);
		struct sched_placement p;
		struct ty_err err = {0};
		char nodes[256], gpus[256];
		int rc;

		ty_test_context("%s", c->name);
		rc = sched_core_place(&p, s, &c->gang, &err);
		if (!c->want.nodes) {
			CHECK_INT_EQ(rc, TY_ENOTFOUND);
			CHECK(err.msg[0] != '\0');
			CHECK(p.node == NULL);
		} else {
			CHECK_INT_EQ(rc, 0);
			if (rc == 0) {
				describe(nodes, gpus, sizeof(nodes), s, &p);
				CHECK_STR_EQ(nodes, c->want.nodes);
				CHECK_STR_EQ(gpus, c->want.gpus);
				CHECK_INT_EQ(p.local_ranks, c->want.local_ranks);
				CHECK_INT_EQ(p.world_size, c->want.world_size);
				CHECK_INT_EQ(p.master_port, c->want.port);
				CHECK_INT_EQ(p.job, c->gang.job);
			}
		}
		sched_placement_clear(&p);
		sched_snapshot_free(s);
	}
}

TY_TEST(place_changes_nothing_take_holds)
{
	struct tnode nodes[] = {{"a", 4, {0}, 0, {0}, 0}, {"b", 4, {0}, 0, {0}, 0}};
	struct sched_snapshot *s = build(nodes, 2, 29500, 29999);
	struct sched_gang g = {1, 2, 2, false};
	struct sched_placement p, q;
	struct ty_err err = {0};

	REQUIRE_INT_EQ(sched_core_place(&p, s, &g, &err), 0);
	CHECK_INT_EQ(sched_snapshot_free_gpus(s, 0), 4);
	CHECK(!sched_snapshot_port_used(s, 0, 29500));
	REQUIRE_INT_EQ(sched_core_take(s, &p, &err), 0);
	CHECK_INT_EQ(sched_snapshot_free_gpus(s, 0), 2);
	CHECK_INT_EQ(sched_snapshot_free_gpus(s, 1), 2);
	CHECK(sched_snapshot_port_used(s, 0, 29500));
	/* the same gang again gets the other GPUs and the next port */
	REQUIRE_INT_EQ(sched_core_place(&q, s, &g, &err), 0);
	CHECK_INT_EQ(q.gpus[0], 2);
	CHECK_INT_EQ(q.gpus[1], 3);
	CHECK_INT_EQ(q.master_port, 29501);
	REQUIRE_INT_EQ(sched_core_take(s, &q, &err), 0);
	/* and a third does not fit at all */
	sched_placement_clear(&q);
	CHECK_INT_EQ(sched_core_place(&q, s, &g, &err), TY_ENOTFOUND);
	sched_placement_clear(&p);
	sched_placement_clear(&q);
	sched_snapshot_free(s);
}

TY_TEST(cycle_first_fit_skips_what_does_not_fit)
{
	struct tnode nodes[] = {{"a", 8, {0}, 0, {0}, 0}, {"b", 8, {0}, 0, {0}, 0}};
	struct sched_snapshot *s = build(nodes, 2, 29500, 29999);
	struct sched_gang gangs[] = {
	    {1, 2, 6, false}, /* fits: a and b keep 2 free each */
	    {2, 1, 4, false}, /* does not fit any more */
	    {3, 3, 0, false}, /* three nodes: never with two */
	    {4, 2, 2, false}, /* fits the rest */
	    {5, 1, 1, false}, /* nothing left */
	    {6, 0, 1, false}, /* impossible: skipped */
	};
	struct sched_placement *pl = NULL;
	struct ty_err err = {0};
	int n = -1;

	REQUIRE_INT_EQ(sched_core_cycle(&pl, &n, s, gangs, 6, &err), 0);
	REQUIRE_INT_EQ(n, 2);
	CHECK_INT_EQ(pl[0].job, 1);
	CHECK_INT_EQ(pl[1].job, 4);
	CHECK_INT_EQ(pl[1].gpus[0], 6);
	CHECK_INT_EQ(pl[1].gpus[1], 7);
	CHECK_INT_EQ(pl[1].master_port, 29501);
	CHECK_INT_EQ(sched_snapshot_free_gpus(s, 0), 0);
	CHECK_INT_EQ(sched_snapshot_free_gpus(s, 1), 0);
	sched_placements_free(pl, n);
	sched_snapshot_free(s);
}

TY_TEST(snapshot_rejects_bad_nodes)
{
	struct sched_snapshot *s = sched_snapshot_new(1, 2);
	struct ty_err err = {0};

	REQUIRE(s != NULL);
	CHECK_INT_EQ(sched_snapshot_add_node(s, "a", 2, &err), 0);
	ty_err_clear(&err);
	CHECK_INT_EQ(sched_snapshot_add_node(s, "a", 2, &err), TY_EINVAL);
	ty_err_clear(&err);
	CHECK_INT_EQ(sched_snapshot_add_node(s, "b", -1, &err), TY_EINVAL);
	CHECK_INT_EQ(sched_snapshot_count(s), 1);
	CHECK_INT_EQ(sched_snapshot_find(s, "a"), 0);
	CHECK_INT_EQ(sched_snapshot_find(s, "b"), -1);
	/* GPU indices outside the node (it re-registered smaller) are ignored */
	sched_snapshot_use_gpu(s, 0, 5);
	sched_snapshot_use_gpu(s, 0, 1);
	sched_snapshot_use_gpu(s, 0, 1);
	CHECK_INT_EQ(sched_snapshot_free_gpus(s, 0), 1);
	sched_snapshot_free(s);
}

TY_TEST(impossible_gangs)
{
	struct tnode nodes[] = {{"a", 8, {0}, 0, {0}, 0}};
	struct sched_snapshot *s = build(nodes, 1, 29500, 29999);
	struct sched_gang zero = {1, 0, 1, false}, neg = {2, 1, -1, false};
	struct sched_placement p;
	struct ty_err err = {0};

	CHECK_INT_EQ(sched_core_place(&p, s, &zero, &err), TY_EINVAL);
	ty_err_clear(&err);
	CHECK_INT_EQ(sched_core_place(&p, s, &neg, &err), TY_EINVAL);
	sched_snapshot_free(s);
}
