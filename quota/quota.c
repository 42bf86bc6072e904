/* Quota and fair-share arithmetic (see quota.h); pure functions. */
#include "quota.h"

#include <math.h>
#include <stdint.h>

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
