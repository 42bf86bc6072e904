/*
 * The node check's pure parts: which node pairs to measure, how the pair
 * bandwidths judge each node, and the verdict's JSON line and message.
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

	append(&b, "{\"node_check\": {\"nodes\":[");
	for (int k = 0; k < v->n; k++) {
		append(&b, "%s{\"node_rank\":%d,\"node\":\"%s\",\"gbps\":", k ? "," : "", k,
		       v->nodes[k].name);
		append_gbps(&b, v->nodes[k].gbps);
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
	append(&b, "],\"ratio\":%g,\"note\":\"%s\",\"measured\":\"tcp\"", v->ratio, v->note);
	append(&b, ",\"allreduce\":{\"backend\":\"%s\",\"busbw_gbps\":",
	       v->allreduce_backend ? v->allreduce_backend : "tcp");
	append_gbps(&b, v->allreduce_backend ? v->allreduce_busbw : -1);
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
	if (!v->nslow)
		return;
	m += (size_t)snprintf(buf, bufsz, "slow node(s):");
	for (int k = 0; k < v->n && m < bufsz; k++)
		if (v->nodes[k].slow)
			m += (size_t)snprintf(buf + m, bufsz - m, " %s %.3g GB/s,",
					      v->nodes[k].name, v->nodes[k].gbps);
	if (m < bufsz)
		snprintf(buf + m, bufsz - m, " gang median %.3g GB/s (< %g x median)", v->median,
			 v->ratio);
}
