/* Quota and fair-share arithmetic (see quota.h); pure functions. */
#include "quota.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

double quota_usage_decay(double usage, int64_t elapsed_ms, int64_t half_life_s)
{
	if (elapsed_ms <= 0 || half_life_s <= 0)
		return usage;
	return usage * exp2(-((double)elapsed_ms / 1000.0) / (double)half_life_s);
}

double quota_fairshare(double usage, double total_usage, double weight, double total_weight)
{
	double u = total_usage > 0 && usage > 0 ? usage / total_usage : 0;
	double s = weight > 0 && total_weight > 0 ? weight / total_weight : 0;

	if (u <= 0)
		return 1;
	if (s <= 0)
		return 0;
	return exp2(-u / s);
}

int64_t quota_borrowed(const struct quota_team *t)
{
	return t->used > t->nominal ? t->used - t->nominal : 0;
}

int64_t quota_lendable(const struct quota_team *t)
{
	int64_t idle = t->nominal - t->used;

	if (!t->in_cohort || idle <= 0)
		return 0;
	if (t->lending_limit >= 0 && t->lending_limit < idle)
		return t->lending_limit;
	return idle;
}

void quota_cohort_account(struct quota_cohort *c, const struct quota_team *t, int sign)
{
	if (!t->in_cohort)
		return;
	c->lendable += sign * quota_lendable(t);
	c->borrowed += sign * quota_borrowed(t);
}

int64_t quota_cohort_available(const struct quota_team *t, const struct quota_cohort *c)
{
	int64_t v;

	if (!c || !t->in_cohort)
		return 0;
	v = (c->lendable - quota_lendable(t)) - (c->borrowed - quota_borrowed(t));
	return v > 0 ? v : 0;
}

int64_t quota_admissible(const struct quota_team *t, const struct quota_cohort *c)
{
	int64_t b = quota_cohort_available(t, c);

	if (t->borrowing_limit >= 0 && t->borrowing_limit < b)
		b = t->borrowing_limit;
	return t->nominal + b;
}

enum quota_verdict quota_check(const struct quota_team *t, const struct quota_cohort *c,
			       int64_t gpus)
{
	int64_t after = t->used + gpus, borrow;

	if (gpus <= 0 || after <= t->nominal)
		return QUOTA_OK;
	if (!t->in_cohort || !c)
		return QUOTA_OVER_NOMINAL;
	borrow = after - t->nominal;
	if (t->borrowing_limit >= 0 && borrow > t->borrowing_limit)
		return QUOTA_OVER_BORROW_LIMIT;
	/* what it borrows already is part of what the cohort lends it */
	if (borrow > quota_cohort_available(t, c))
		return QUOTA_OVER_COHORT;
	return QUOTA_OK;
}

const char *quota_res_name(enum quota_res r)
{
	switch (r) {
	case QUOTA_CPUS:
		return "CPUs";
	case QUOTA_MEMORY_MB:
		return "MiB of memory";
	default:
		return "unknown resource";
	}
}

static int64_t mul_sat(int64_t a, int64_t b)
{
	if (a <= 0 || b <= 0)
		return 0;
	return a > INT64_MAX / b ? INT64_MAX : a * b;
}

struct quota_vec quota_job_charge(int64_t nodes, int64_t cpus_per_node,
				  int64_t memory_mb_per_node)
{
	struct quota_vec v = {{0}};

	v.v[QUOTA_CPUS] = mul_sat(nodes, cpus_per_node);
	v.v[QUOTA_MEMORY_MB] = mul_sat(nodes, memory_mb_per_node);
	return v;
}

void quota_vec_add(struct quota_vec *v, const struct quota_vec *by, int sign)
{
	for (int r = 0; r < QUOTA_NRES; r++)
		v->v[r] += sign * by->v[r];
}

int quota_caps_check(const struct quota_caps *c, const struct quota_vec *ask)
{
	for (int r = 0; r < QUOTA_NRES; r++) {
		int64_t lim = c->limit.v[r], a = ask->v[r];

		if (lim < 0 || a <= 0)
			continue;
		/* used + a > lim, without overflow */
		if (c->used.v[r] > lim || a > lim - c->used.v[r])
			return r;
	}
	return -1;
}

int64_t quota_lendable_max(const struct quota_team *t)
{
	if (!t->in_cohort)
		return 0;
	if (t->lending_limit >= 0 && t->lending_limit < t->nominal)
		return t->lending_limit;
	return t->nominal;
}

int64_t quota_ceiling(const struct quota_team *t, int64_t peers_lendable)
{
	int64_t b = peers_lendable > 0 ? peers_lendable : 0;

	if (!t->in_cohort)
		return t->nominal;
	if (t->borrowing_limit >= 0 && t->borrowing_limit < b)
		b = t->borrowing_limit;
	return t->nominal + b;
}

int quota_ceiling_format(char *buf, size_t n, const char *team, const struct quota_team *t,
			 int64_t peers_lendable, int64_t need)
{
	long long cap = (long long)quota_ceiling(t, peers_lendable);
	long long nom = (long long)t->nominal, peers = (long long)peers_lendable;
	char why[128];

	if (!t->in_cohort)
		snprintf(why, sizeof(why), "no borrowing: no cohort");
	else if (t->borrowing_limit >= 0 && t->borrowing_limit < peers_lendable)
		snprintf(why, sizeof(why), "+ borrowing limit %lld", (long long)t->borrowing_limit);
	else
		snprintf(why, sizeof(why), "+ %lld its cohort can lend at most", peers);
	return snprintf(buf, n,
			"team '%s' can get at most %lld GPUs (nominal %lld, %s), the job needs "
			"%lld",
			team, cap, nom, why, (long long)need);
}

/* Append name to a list of at most three, then "…". */
static void name_add(char *list, size_t n, int *k, const char *name)
{
	size_t len = strlen(list);

	if (*k < 3)
		snprintf(list + len, n - len, "%s%s", *k ? ", " : "", name ? name : "?");
	else if (*k == 3)
		snprintf(list + len, n - len, ", …");
	(*k)++;
}

/* Whether a node with `have` of a resource holds `want` (0: not reported, not limited). */
static bool holds(int64_t have, int64_t want)
{
	return have == 0 || have >= want;
}

/* Whether s holds want[q] of each resource q < upto (GPUs: always counted). */
static bool holds_upto(const struct quota_shape *s, const int64_t want[3], int upto)
{
	const int64_t have[3] = {s->gpus, s->cpus, s->memory_mb};

	for (int q = 0; q < upto; q++)
		if (q == 0 ? have[q] < want[q] : !holds(have[q], want[q]))
			return false;
	return true;
}

static int64_t have_of(const struct quota_shape *s, int r)
{
	return r == 0 ? s->gpus : r == 1 ? s->cpus : s->memory_mb;
}

bool quota_shape_fits(char *buf, size_t n, const struct quota_shape *s, int ns, int64_t nodes,
		      int64_t gpus, int64_t cpus, int64_t memory_mb)
{
	static const char *const what[] = {"GPUs", "CPUs", "MiB of memory"};
	const int64_t want[3] = {gpus, cpus, memory_mb};
	int64_t found = 0;
	char names[256] = "";
	int k = 0;

	if (n)
		buf[0] = '\0';
	if (ns <= 0)
		return true;
	/* each resource in turn, among the shapes that hold the ones before it */
	for (int r = 0; r < 3; r++) {
		int64_t best = -1;
		bool ok = false;

		for (int i = 0; i < ns; i++) {
			if (!holds_upto(&s[i], want, r))
				continue;
			if (holds_upto(&s[i], want, r + 1))
				ok = true;
			else if (have_of(&s[i], r) > best)
				best = have_of(&s[i], r);
		}
		if (ok || best < 0)
			continue;
		for (int i = 0; i < ns; i++)
			if (holds_upto(&s[i], want, r) && have_of(&s[i], r) == best)
				name_add(names, sizeof(names), &k, s[i].name);
		if (r == 0)
			snprintf(buf, n, "no node can hold %lld GPUs: the largest node has %lld (%s)",
				 (long long)gpus, (long long)best, names);
		else if (gpus == 0)
			snprintf(buf, n, "no node can hold %lld %s: the most a node has is %lld (%s)",
				 (long long)want[r], what[r], (long long)best, names);
		else
			snprintf(buf, n,
				 "no node with %lld GPUs can hold %lld %s: the most such a node "
				 "has is %lld (%s)",
				 (long long)gpus, (long long)want[r], what[r], (long long)best,
				 names);
		return false;
	}
	for (int i = 0; i < ns; i++)
		if (holds_upto(&s[i], want, 3)) {
			found += s[i].count > 0 ? s[i].count : 0;
			name_add(names, sizeof(names), &k, s[i].name);
		}
	if (found >= nodes)
		return true;
	snprintf(buf, n,
		 "the job needs %lld nodes of %lld GPUs, %lld CPUs and %lld MiB: at most %lld "
		 "exist (%s)",
		 (long long)nodes, (long long)gpus, (long long)cpus, (long long)memory_mb,
		 (long long)found, names);
	return false;
}
