/*
 * worker/nodecheck.c: the node check's pair schedule, judgement, fabric
 * floor and verdict text.
 */
#include "allreduce.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TY_TEST(nodecheck_pairs)
{
	static const struct {
		int n;
		const char *pairs; /* "a-b a-b ..." in order */
	} rows[] = {
	    {0, ""},
	    {1, ""},
	    {2, "0-1"},
	    {3, "0-1 1-2 0-2"},
	    {4, "0-1 1-2 2-3 0-3 0-2 1-3"},
	    {5, "0-1 1-2 2-3 3-4 0-4 0-2 1-3 2-4 0-3 1-4"},
	    {6, "0-1 1-2 2-3 3-4 4-5 0-5 0-2 1-3 2-4 3-5 0-4 1-5"},
	};

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct ar_pair p[16];
		char got[256] = "";
		size_t m = 0;
		int np = ar_nc_pairs(p, rows[i].n);

		for (int k = 0; k < np; k++)
			m += (size_t)snprintf(got + m, sizeof got - m, "%s%d-%d", k ? " " : "",
					      p[k].a, p[k].b);
		CHECK_STR_EQ(got, rows[i].pairs);
	}
}

TY_TEST(nodecheck_pairs_cover_every_node_twice)
{
	/* each node is in at least two distinct pairs for n >= 3: one bad partner is not enough */
	for (int n = 3; n <= 64; n++) {
		struct ar_pair *p = malloc((size_t)(2 * n) * sizeof *p);
		int *in = calloc((size_t)n, sizeof *in), np;

		REQUIRE(p && in);
		np = ar_nc_pairs(p, n);
		CHECK_INT_EQ(np, n == 3 ? 3 : n == 4 ? 6 : 2 * n);
		for (int k = 0; k < np; k++) {
			CHECK(p[k].a < p[k].b);
			for (int j = 0; j < k; j++)
				CHECK(p[j].a != p[k].a || p[j].b != p[k].b);
			in[p[k].a]++;
			in[p[k].b]++;
		}
		for (int k = 0; k < n; k++)
			CHECK(in[k] >= 2);
		free(p);
		free(in);
	}
}

TY_TEST(nodecheck_median)
{
	double a[] = {3, 1, 2}, b[] = {4, 1, 3, 2}, c[] = {5};

	CHECK(ar_nc_median(a, 3) == 2);
	CHECK(ar_nc_median(b, 4) == 2.5);
	CHECK(ar_nc_median(c, 1) == 5);
	CHECK(ar_nc_median(c, 0) == -1);
}

/* Judge n nodes named a, b, c, ... from the pair bandwidths of ar_nc_pairs(n). */
static void judge(struct ar_nc_verdict *v, struct ar_nc_node *nodes, int n, const double *gbps,
		  double ratio)
{
	struct ar_pair p[16];
	int np = ar_nc_pairs(p, n);

	memset(nodes, 0, (size_t)n * sizeof *nodes);
	for (int k = 0; k < n; k++)
		snprintf(nodes[k].name, sizeof nodes[k].name, "%c", 'a' + k);
	*v = (struct ar_nc_verdict){.n = n, .nodes = nodes, .ratio = ratio, .floor = -1};
	ar_nc_judge(v, p, gbps, np);
}

TY_TEST(nodecheck_judge)
{
	static const struct {
		int n;
		double gbps[12]; /* per pair, in ar_nc_pairs order */
		double ratio;
		const char *slow;   /* slow node names */
		const char *scores; /* %g of each score */
		const char *note;
	} rows[] = {
	    /* 3 nodes: pairs 0-1 1-2 0-2 */
	    {3,
	     {10, 10, 10},
	     0.5,
	     "",
	     "10 10 10",
	     "3 nodes, 3 pairs measured one at a time; a node's score is its best pair"},
	    {3, {0.1, 0.1, 10}, 0.5, "b", "10 0.1 10", NULL},
	    {3, {0.1, 10, 0.1}, 0.5, "a", "0.1 10 10", NULL},
	    {3, {10, 0.1, 0.1}, 0.5, "c", "10 10 0.1", NULL},
	    /* a node whose pairs are all failed (0) is slow */
	    {3, {0, 0, 10}, 0.5, "b", "10 0 10", NULL},
	    /* just below and just at the threshold: slow means strictly below */
	    {3, {4.9, 4.9, 10}, 0.5, "b", "10 4.9 10", NULL},
	    {3, {5, 5, 10}, 0.5, "", "10 5 10", NULL},
	    {3, {5, 5, 10}, 0.6, "b", "10 5 10", NULL},
	    /* one slow link between two healthy nodes blames nobody */
	    {3, {0.1, 10, 10}, 0.5, "", "10 10 10", NULL},
	    /* 4 nodes: pairs 0-1 1-2 2-3 0-3 0-2 1-3; node c slow */
	    {4,
	     {10, 0.1, 0.1, 10, 0.1, 10},
	     0.5,
	     "c",
	     "10 10 0.1 10",
	     "4 nodes, 6 pairs measured one at a time; a node's score is its best pair"},
	    /* two slow nodes of four: median between them, both below half */
	    {4, {0.1, 0.1, 10, 0.1, 0.1, 0.1}, 0.5, "a b", "0.1 0.1 10 10", NULL},
	    /* everything failed: nothing can be blamed */
	    {4, {0, 0, 0, 0, 0, 0}, 0.5, "", "0 0 0 0", NULL},
	    /* 2 nodes: measured, never blamed */
	    {2, {0.001}, 0.5, "", "0.001 0.001", "2 nodes: a slow link cannot be attributed"},
	    /* 1 node: nothing measured */
	    {1, {0}, 0.5, "", "-1", "1 node: nothing to measure"},
	};

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct ar_nc_node nodes[8];
		struct ar_nc_verdict v;
		char slow[64] = "", scores[128] = "";
		size_t s = 0, c = 0;
		int nslow = 0;

		judge(&v, nodes, rows[i].n, rows[i].gbps, rows[i].ratio);
		for (int k = 0; k < rows[i].n; k++) {
			if (nodes[k].slow) {
				s += (size_t)snprintf(slow + s, sizeof slow - s, "%s%s",
						      s ? " " : "", nodes[k].name);
				nslow++;
			}
			c += (size_t)snprintf(scores + c, sizeof scores - c, "%s%g", k ? " " : "",
					      nodes[k].gbps);
		}
		CHECK_STR_EQ(slow, rows[i].slow);
		CHECK_STR_EQ(scores, rows[i].scores);
		CHECK_INT_EQ(v.nslow, nslow);
		if (rows[i].note)
			CHECK_STR_EQ(v.note, rows[i].note);
	}
}

TY_TEST(nodecheck_json_and_message)
{
	static const double floors[AR_FABRICS] = {0, 0.1, 1.5, 5};
	struct ar_nc_node nodes[3];
	struct ar_nc_verdict v;
	struct ar_pair p[6];
	double gbps[3] = {0.001, 0.001, 1.2};
	char msg[256];
	char *json;

	judge(&v, nodes, 3, gbps, 0.5);
	v.measured = "nccl";
	v.allreduce_backend = "nccl";
	v.allreduce_busbw = 181.25;
	for (int k = 0; k < 3; k++)
		nodes[k].fabric = AR_FABRIC_IB;
	ar_nc_judge_floor(&v, floors);
	ar_nc_pairs(p, 3);
	json = ar_nc_json(&v, p, gbps, 3, 8388608);
	REQUIRE(json != NULL);
	CHECK_STR_EQ(
	    json,
	    "{\"node_check\": {\"nodes\":[{\"node_rank\":0,\"node\":\"a\",\"gbps\":1.200000,"
	    "\"fabric\":\"ib\"},{\"node_rank\":1,\"node\":\"b\",\"gbps\":0.001000,\"fabric\":"
	    "\"ib\"},{\"node_rank\":2,\"node\":\"c\",\"gbps\":1.200000,\"fabric\":\"ib\"}],"
	    "\"pairs\":[{\"nodes\":[0,1],\"gbps\":0.001000},{\"nodes\":[1,2],\"gbps\":0.001000},"
	    "{\"nodes\":[0,2],\"gbps\":1.200000}],\"bytes\":8388608,\"median_gbps\":1.200000,"
	    "\"slow\":[\"b\"],\"ratio\":0.5,\"note\":\"3 nodes, 3 pairs measured one at a "
	    "time; a node's score is its best pair\",\"measured\":\"nccl\","
	    "\"allreduce\":{\"backend\":\"nccl\",\"busbw_gbps\":181.250000,\"fabric\":\"ib\","
	    "\"floor_gbps\":5.000000,\"below_floor\":false,\"floor_note\":null}}}");
	free(json);
	ar_nc_message(msg, sizeof msg, &v);
	CHECK_STR_EQ(msg, "slow node(s): b 0.001 GB/s, gang median 1.2 GB/s (< 0.5 x median)");

	/* the same gang below its floor as well: both in the message */
	v.allreduce_busbw = 0.5;
	ar_nc_judge_floor(&v, floors);
	ar_nc_message(msg, sizeof msg, &v);
	CHECK_STR_EQ(msg, "slow node(s): b 0.001 GB/s, gang median 1.2 GB/s (< 0.5 x median); "
			  "gang all-reduce 0.5 GB/s is below the ib floor of 5 GB/s (nccl bus "
			  "bandwidth, 3 nodes)");

	/* two slow nodes, both named */
	{
		double g4[6] = {0.1, 0.1, 10, 0.1, 0.1, 0.1};
		struct ar_nc_node n4[4];

		judge(&v, n4, 4, g4, 0.5);
		ar_nc_message(msg, sizeof msg, &v);
		CHECK_STR_EQ(msg, "slow node(s): a 0.1 GB/s, b 0.1 GB/s, gang median 5.05 GB/s "
				  "(< 0.5 x median)");
	}

	/* nothing slow: no message; one node: nulls */
	{
		struct ar_nc_node n1[1];

		judge(&v, n1, 1, gbps, 0.25);
		ar_nc_message(msg, sizeof msg, &v);
		CHECK_STR_EQ(msg, "");
		json = ar_nc_json(&v, p, gbps, 0, 4096);
		REQUIRE(json != NULL);
		CHECK_STR_EQ(json,
			     "{\"node_check\": {\"nodes\":[{\"node_rank\":0,\"node\":\"a\","
			     "\"gbps\":null}],\"pairs\":[],\"bytes\":4096,\"median_gbps\":null,"
			     "\"slow\":[],\"ratio\":0.25,\"note\":\"1 node: nothing to measure\","
			     "\"measured\":\"tcp\",\"allreduce\":{\"backend\":\"tcp\","
			     "\"busbw_gbps\":null,\"fabric\":null,\"floor_gbps\":null,"
			     "\"below_floor\":false,\"floor_note\":null}}}");
		free(json);
		/* the TCP backend: no floor, and the note says so */
		v.allreduce_backend = "tcp";
		v.allreduce_busbw = 0.25;
		ar_nc_judge_floor(&v, floors);
		json = ar_nc_json(&v, p, gbps, 0, 4096);
		REQUIRE(json != NULL);
		CHECK(strstr(json, "\"allreduce\":{\"backend\":\"tcp\",\"busbw_gbps\":0.250000,"
				   "\"fabric\":null,\"floor_gbps\":null,\"below_floor\":false,"
				   "\"floor_note\":\"tcp backend (no GPU): no fabric floor\"}}}") !=
		      NULL);
		free(json);
	}

	/* a small buffer truncates the message, never overflows */
	judge(&v, nodes, 3, gbps, 0.5);
	ar_nc_message(msg, 20, &v);
	CHECK_STR_EQ(msg, "slow node(s): b 0.0");
}

TY_TEST(nodecheck_fabric_from_env)
{
	static const struct {
		const char *disable, *hca, *gid;
		enum ar_fabric want;
	} rows[] = {
	    /* what hw_nccl_env gives ranks (executor/hw.h) */
	    {"1", NULL, NULL, AR_FABRIC_TCP},
	    {NULL, "=mlx5_0:1,mlx5_1:1", NULL, AR_FABRIC_IB},
	    {NULL, "=mlx5_0:1", "3", AR_FABRIC_ROCE},
	    /* NCCL reads the variable as a number: 0 leaves IB on */
	    {"0", "=mlx5_0:1", NULL, AR_FABRIC_IB},
	    {"0", NULL, NULL, AR_FABRIC_UNKNOWN},
	    {"", "mlx5_0", "", AR_FABRIC_IB},
	    {"1", "=mlx5_0:1", "3", AR_FABRIC_TCP},
	    /* nothing said: NCCL decides for itself */
	    {NULL, NULL, NULL, AR_FABRIC_UNKNOWN},
	    {NULL, "", "3", AR_FABRIC_UNKNOWN},
	};

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		CHECK_STR_EQ(
		    ar_fabric_name(ar_fabric_from_env(rows[i].disable, rows[i].hca, rows[i].gid)),
		    ar_fabric_name(rows[i].want));
	CHECK_STR_EQ(ar_fabric_name(AR_FABRIC_UNKNOWN), "unknown");
	CHECK_STR_EQ(ar_fabric_name(AR_FABRIC_TCP), "tcp");
	CHECK_STR_EQ(ar_fabric_name(AR_FABRIC_ROCE), "roce");
	CHECK_STR_EQ(ar_fabric_name(AR_FABRIC_IB), "ib");
}

TY_TEST(nodecheck_floor)
{
	static const double floors[AR_FABRICS] = {0, 0.1, 1.5, 5};
	static const double no_roce[AR_FABRICS] = {0, 0.1, 0, 5};
	static const struct {
		const char *backend;
		int n;
		const char *fabrics; /* one letter per node: u t r i */
		double busbw;
		const double *floors;
		const char *fabric; /* the gang's */
		double floor;
		bool below;
		const char *note;
	} rows[] = {
	    {"nccl", 3, "iii", 20, floors, "ib", 5, false, ""},
	    {"nccl", 3, "iii", 4.9, floors, "ib", 5, true, ""},
	    /* at the floor is not below it */
	    {"nccl", 2, "rr", 1.5, floors, "roce", 1.5, false, ""},
	    {"nccl", 2, "rr", 1.49, floors, "roce", 1.5, true, ""},
	    {"nccl", 4, "tttt", 0.01, floors, "tcp", 0.1, true, ""},
	    /* the weakest node's fabric sets the floor, and the note names it */
	    {"nccl", 4, "iiti", 0.5, floors, "tcp", 0.1, false,
	     "fabrics differ: tcp on c sets the gang's floor"},
	    {"nccl", 3, "irr", 1, floors, "roce", 1.5, true,
	     "fabrics differ: roce on b, c sets the gang's floor"},
	    /* nothing compared */
	    {"nccl", 3, "iui", 0.001, floors, "unknown", -1, false,
	     "fabric unknown on b (neither NCCL_IB_DISABLE nor NCCL_IB_HCA is set): no floor"},
	    {"nccl", 1, "i", 0.001, floors, "ib", -1, false,
	     "1 node: the all-reduce did not cross the fabric"},
	    {"nccl", 2, "rr", 0.001, no_roce, "roce", -1, false,
	     "no floor for roce (--floor-roce 0)"},
	    {"tcp", 3, "iii", 0.001, floors, "unknown", -1, false,
	     "tcp backend (no GPU): no fabric floor"},
	};

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		struct ar_nc_node nodes[4];
		struct ar_nc_verdict v;
		double none[8] = {0};

		judge(&v, nodes, rows[i].n, none, 0.5);
		for (int k = 0; k < rows[i].n; k++)
			nodes[k].fabric = rows[i].fabrics[k] == 'i'   ? AR_FABRIC_IB
					  : rows[i].fabrics[k] == 'r' ? AR_FABRIC_ROCE
					  : rows[i].fabrics[k] == 't' ? AR_FABRIC_TCP
								      : AR_FABRIC_UNKNOWN;
		v.allreduce_backend = rows[i].backend;
		v.allreduce_busbw = rows[i].busbw;
		ar_nc_judge_floor(&v, rows[i].floors);
		CHECK_STR_EQ(ar_fabric_name(v.fabric), rows[i].fabric);
		CHECK(v.floor == rows[i].floor);
		CHECK(v.below_floor == rows[i].below);
		CHECK_STR_EQ(v.floor_note, rows[i].note);
	}
}

TY_TEST(nodecheck_floor_message)
{
	static const double floors[AR_FABRICS] = {0, 0.1, 1.5, 5};
	struct ar_nc_node nodes[3];
	struct ar_nc_verdict v;
	double gbps[3] = {0.01, 0.01, 0.01};
	char msg[256];

	judge(&v, nodes, 3, gbps, 0.5);
	for (int k = 0; k < 3; k++)
		nodes[k].fabric = AR_FABRIC_ROCE;
	v.allreduce_backend = "nccl";
	v.allreduce_busbw = 0.0133;
	ar_nc_judge_floor(&v, floors);
	ar_nc_message(msg, sizeof msg, &v);
	/* no node is slow (all alike): only the floor speaks */
	CHECK_INT_EQ(v.nslow, 0);
	CHECK_STR_EQ(msg, "gang all-reduce 0.0133 GB/s is below the roce floor of 1.5 GB/s (nccl "
			  "bus bandwidth, 3 nodes)");
	v.allreduce_busbw = 2;
	ar_nc_judge_floor(&v, floors);
	ar_nc_message(msg, sizeof msg, &v);
	CHECK_STR_EQ(msg, "");
}

TY_TEST(nodecheck_names)
{
	static const struct {
		const char *name;
		bool ok;
	} rows[] = {
	    {"node-a", true},
	    {"gpu01.rack3_x", true},
	    {"0", true},
	    {"", false},
	    {"-a", false},
	    {".a", false},
	    {"a b", false},
	    {"a/b", false},
	    {"a\"b", false},
	    {"a\\b", false},
	    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", true},	 /* 63 */
	    {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false}, /* 64 */
	};

	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (ar_nc_name_ok(rows[i].name) != rows[i].ok) {
			fprintf(stderr, "  name '%s'\n", rows[i].name);
			CHECK(ar_nc_name_ok(rows[i].name) == rows[i].ok);
		}
	CHECK(!ar_nc_name_ok(NULL));
}
