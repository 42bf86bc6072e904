/* worker/nodecheck.c: the node check's pair schedule, judgement and verdict text. */
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

	for (int k = 0; k < n; k++)
		snprintf(nodes[k].name, sizeof nodes[k].name, "%c", 'a' + k);
	*v = (struct ar_nc_verdict){.n = n, .nodes = nodes, .ratio = ratio};
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
	struct ar_nc_node nodes[3];
	struct ar_nc_verdict v;
	struct ar_pair p[6];
	double gbps[3] = {0.001, 0.001, 1.2};
	char msg[256];
	char *json;

	judge(&v, nodes, 3, gbps, 0.5);
	v.allreduce_backend = "nccl";
	v.allreduce_busbw = 181.25;
	ar_nc_pairs(p, 3);
	json = ar_nc_json(&v, p, gbps, 3, 8388608);
	REQUIRE(json != NULL);
	CHECK_STR_EQ(
	    json,
	    "{\"node_check\": {\"nodes\":[{\"node_rank\":0,\"node\":\"a\",\"gbps\":1.200000},"
	    "{\"node_rank\":1,\"node\":\"b\",\"gbps\":0.001000},"
	    "{\"node_rank\":2,\"node\":\"c\",\"gbps\":1.200000}],"
	    "\"pairs\":[{\"nodes\":[0,1],\"gbps\":0.001000},{\"nodes\":[1,2],\"gbps\":0.001000},"
	    "{\"nodes\":[0,2],\"gbps\":1.200000}],\"bytes\":8388608,\"median_gbps\":1.200000,"
	    "\"slow\":[\"b\"],\"ratio\":0.5,\"note\":\"3 nodes, 3 pairs measured one at a "
	    "time; a node's score is its best pair\",\"measured\":\"tcp\","
	    "\"allreduce\":{\"backend\":\"nccl\",\"busbw_gbps\":181.250000}}}");
	free(json);
	ar_nc_message(msg, sizeof msg, &v);
	CHECK_STR_EQ(msg, "slow node(s): b 0.001 GB/s, gang median 1.2 GB/s (< 0.5 x median)");

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
		CHECK_STR_EQ(
		    json, "{\"node_check\": {\"nodes\":[{\"node_rank\":0,\"node\":\"a\","
			  "\"gbps\":null}],\"pairs\":[],\"bytes\":4096,\"median_gbps\":null,"
			  "\"slow\":[],\"ratio\":0.25,\"note\":\"1 node: nothing to measure\","
			  "\"measured\":\"tcp\",\"allreduce\":{\"backend\":\"tcp\","
			  "\"busbw_gbps\":null}}}");
		free(json);
	}

	/* a small buffer truncates the message, never overflows */
	judge(&v, nodes, 3, gbps, 0.5);
	ar_nc_message(msg, 20, &v);
	CHECK_STR_EQ(msg, "slow node(s): b 0.0");
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
