/*
 * The node check's pure parts: which node pairs to measure, how the pair
 * bandwidths judge each node, the gang's fabric and its floor, and the
 * verdict's JSON line and message.
 */
#include "allreduce.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool ar_nc_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > AR_NC_NAME_MAX || !isalnum((unsigned char)s[0]))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

const char *ar_fabric_name(enum ar_fabric f)
{
	switch (f) {
	case AR_FABRIC_TCP:
		return "tcp";
	case AR_FABRIC_ROCE:
		return "roce";
	case AR_FABRIC_IB:
		return "ib";
	default:
		return "unknown";
	}
}

enum ar_fabric ar_fabric_from_env(const char *ib_disable, const char *ib_hca, const char *gid_index)
{
	/* NCCL reads NCCL_IB_DISABLE as an integer: "0" (and "") leave IB on */
	if (ib_disable && *ib_disable && strtol(ib_disable, NULL, 10) != 0)
		return AR_FABRIC_TCP;
	if (!ib_hca || !*ib_hca)
		return AR_FABRIC_UNKNOWN;
	/* the executor sets a GID index only when every usable port is RoCE */
	return gid_index && *gid_index ? AR_FABRIC_ROCE : AR_FABRIC_IB;
}

static bool have_pair(const struct ar_pair *p, int np, int a, int b)
{
	for (int i = 0; i < np; i++)
		if (p[i].a == a && p[i].b == b)
			return true;
	return false;
}

int ar_nc_pairs(struct ar_pair *out, int n)
{
	int np = 0;

	if (n == 2)
		out[np++] = (struct ar_pair){0, 1};
	if (n < 3)
		return np;
	/* all the distance-1 pairs first, so a slow node shows up early in a log */
	for (int d = 1; d <= 2; d++)
		for (int k = 0; k < n; k++) {
			int j = (k + d) % n, a = k < j ? k : j, b = k < j ? j : k;

			if (!have_pair(out, np, a, b))
				out[np++] = (struct ar_pair){a, b};
		}
	return np;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

double ar_nc_median(const double *v, int n)
{
	double *s, m;

	if (n <= 0)
		return -1;
	s = malloc((size_t)n * sizeof *s);
	if (!s)
		return -1;
	memcpy(s, v, (size_t)n * sizeof *s);
	qsort(s, (size_t)n, sizeof *s, cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

void ar_nc_judge(struct ar_nc_verdict *v, const struct ar_pair *pairs, const double *pair_gbps,
		 int npairs)
{
	double *score;

	v->nslow = 0;
	v->median = -1;
	for (int k = 0; k < v->n; k++) {
		v->nodes[k].gbps = -1;
		v->nodes[k].slow = false;
	}
	for (int i = 0; i < npairs; i++)
		for (int s = 0; s < 2; s++) {
			struct ar_nc_node *nd = &v->nodes[s ? pairs[i].b : pairs[i].a];

			if (pair_gbps[i] > nd->gbps)
				nd->gbps = pair_gbps[i];
		}
	if (v->n <= 1) {
		snprintf(v->note, sizeof v->note, "%d node: nothing to measure", v->n);
		return;
	}
	score = malloc((size_t)v->n * sizeof *score);
	for (int k = 0; score && k < v->n; k++)
		score[k] = v->nodes[k].gbps;
	v->median = score ? ar_nc_median(score, v->n) : -1;
	free(score);
	if (v->n == 2) {
		snprintf(v->note, sizeof v->note, "2 nodes: a slow link cannot be attributed");
		return;
	}
	for (int k = 0; k < v->n; k++)
		if (v->nodes[k].gbps < v->ratio * v->median) {
			v->nodes[k].slow = true;
			v->nslow++;
		}
	snprintf(v->note, sizeof v->note,
		 "%d nodes, %d pairs measured one at a time; a node's score is its best pair", v->n,
		 npairs);
}

void ar_nc_judge_floor(struct ar_nc_verdict *v, const double floors[AR_FABRICS])
{
	bool differ = false;
	size_t m;

	v->fabric = AR_FABRIC_UNKNOWN;
	v->floor = -1;
	v->below_floor = false;
	v->floor_note[0] = 0;
	if (!v->allreduce_backend || strcmp(v->allreduce_backend, "nccl")) {
		snprintf(v->floor_note, sizeof v->floor_note,
			 "tcp backend (no GPU): no fabric floor");
		return;
	}
	for (int k = 0; k < v->n; k++) {
		if (k == 0 || v->nodes[k].fabric < v->fabric)
			v->fabric = v->nodes[k].fabric;
		if (v->nodes[k].fabric != v->nodes[0].fabric)
			differ = true;
	}
	if (v->n < 2) {
		snprintf(v->floor_note, sizeof v->floor_note,
			 "1 node: the all-reduce did not cross the fabric");
		return;
	}
	if (v->fabric == AR_FABRIC_UNKNOWN) {
		for (int k = 0; k < v->n; k++)
			if (v->nodes[k].fabric == AR_FABRIC_UNKNOWN) {
				snprintf(v->floor_note, sizeof v->floor_note,
					 "fabric unknown on %s (neither NCCL_IB_DISABLE nor "
					 "NCCL_IB_HCA is set): no floor",
					 v->nodes[k].name);
				break;
			}
		return;
	}
	if (!(floors[v->fabric] > 0)) {
		snprintf(v->floor_note, sizeof v->floor_note, "no floor for %s (--floor-%s 0)",
			 ar_fabric_name(v->fabric), ar_fabric_name(v->fabric));
		return;
	}
	v->floor = floors[v->fabric];
	v->below_floor = v->allreduce_busbw < v->floor;
	if (differ) {
		/* a node with a weaker fabric makes the whole gang's traffic take it */
		bool first = true;

		m = (size_t)snprintf(v->floor_note, sizeof v->floor_note, "fabrics differ: %s on",
				     ar_fabric_name(v->fabric));
		for (int k = 0; k < v->n && m < sizeof v->floor_note; k++)
			if (v->nodes[k].fabric == v->fabric) {
				m += (size_t)snprintf(v->floor_note + m, sizeof v->floor_note - m,
						      "%s %s", first ? "" : ",", v->nodes[k].name);
				first = false;
			}
		if (m < sizeof v->floor_note)
			snprintf(v->floor_note + m, sizeof v->floor_note - m,
				 " sets the gang's floor");
	}
}

/* A growing string; on allocation failure it stays failed and append does nothing. */
struct sbuf {
	char *s;
	size_t len, cap;
	bool failed;
};

static void append(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void append(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (b->failed)
		return;
	for (;;) {
		size_t room = b->cap - b->len;

		va_start(ap, fmt);
		k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->failed = true;
			return;
		}
		if (b->s && (size_t)k < room) {
			b->len += (size_t)k;
			return;
		}
		size_t cap = (b->cap ? b->cap : 256) + (size_t)k + 256;
		char *p = realloc(b->s, cap);

		if (!p) {
			b->failed = true;
			return;
		}
		b->s = p;
		b->cap = cap;
	}
}

/* A bandwidth as a JSON number, or null when it was not measured. */
static void append_gbps(struct sbuf *b, double g)
{
	if (g < 0)
		append(b, "null");
	else
		append(b, "%.6f", g);
}

char *ar_nc_json(const struct ar_nc_verdict *v, const struct ar_pair *pairs,
		 const double *pair_gbps, int npairs, unsigned long long bytes)
{
	struct sbuf b = {0};
	bool first = true;
	bool nccl = v->allreduce_backend && !strcmp(v->allreduce_backend, "nccl");

	append(&b, "{\"node_check\": {\"nodes\":[");
	for (int k = 0; k < v->n; k++) {
		append(&b, "%s{\"node_rank\":%d,\"node\":\"%s\",\"gbps\":", k ? "," : "", k,
		       v->nodes[k].name);
		append_gbps(&b, v->nodes[k].gbps);
		if (nccl)
			append(&b, ",\"fabric\":\"%s\"", ar_fabric_name(v->nodes[k].fabric));
		append(&b, "}");
	}
	append(&b, "],\"pairs\":[");
	for (int i = 0; i < npairs; i++) {
		append(&b, "%s{\"nodes\":[%d,%d],\"gbps\":", i ? "," : "", pairs[i].a, pairs[i].b);
		append_gbps(&b, pair_gbps[i]);
		append(&b, "}");
	}
	append(&b, "],\"bytes\":%llu,\"median_gbps\":", bytes);
	append_gbps(&b, v->median);
	append(&b, ",\"slow\":[");
	for (int k = 0; k < v->n; k++)
		if (v->nodes[k].slow) {
			append(&b, "%s\"%s\"", first ? "" : ",", v->nodes[k].name);
			first = false;
		}
	/* names are checked by ar_nc_name_ok and the note is ours: nothing to escape */
	append(&b, "],\"ratio\":%g,\"note\":\"%s\",\"measured\":\"%s\"", v->ratio, v->note,
	       v->measured ? v->measured : "tcp");
	append(&b, ",\"allreduce\":{\"backend\":\"%s\",\"busbw_gbps\":",
	       v->allreduce_backend ? v->allreduce_backend : "tcp");
	append_gbps(&b, v->allreduce_backend ? v->allreduce_busbw : -1);
	if (nccl && v->fabric != AR_FABRIC_UNKNOWN)
		append(&b, ",\"fabric\":\"%s\"", ar_fabric_name(v->fabric));
	else
		append(&b, ",\"fabric\":null");
	append(&b, ",\"floor_gbps\":");
	append_gbps(&b, v->floor);
	append(&b, ",\"below_floor\":%s,\"floor_note\":", v->below_floor ? "true" : "false");
	/* the floor note is ours and names checked node names */
	if (v->floor_note[0])
		append(&b, "\"%s\"", v->floor_note);
	else
		append(&b, "null");
	append(&b, "}}}");
	if (b.failed) {
		free(b.s);
		return NULL;
	}
	return b.s;
}

void ar_nc_message(char *buf, size_t bufsz, const struct ar_nc_verdict *v)
{
	size_t m = 0;

	buf[0] = 0;
	if (v->nslow) {
		m += (size_t)snprintf(buf, bufsz, "slow node(s):");
		for (int k = 0; k < v->n && m < bufsz; k++)
			if (v->nodes[k].slow)
				m += (size_t)snprintf(buf + m, bufsz - m, " %s %.3g GB/s,",
						      v->nodes[k].name, v->nodes[k].gbps);
		if (m < bufsz)
			m += (size_t)snprintf(buf + m, bufsz - m,
					      " gang median %.3g GB/s (< %g x median)", v->median,
					      v->ratio);
	}
	if (v->below_floor && m < bufsz)
		snprintf(buf + m, bufsz - m,
			 "%sgang all-reduce %.3g GB/s is below the %s floor of %g GB/s (%s bus "
			 "bandwidth, %d nodes)",
			 m ? "; " : "", v->allreduce_busbw, ar_fabric_name(v->fabric), v->floor,
			 v->allreduce_backend ? v->allreduce_backend : "tcp", v->n);
}
