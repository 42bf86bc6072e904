/*
 * The policy core's quota admission helpers and the queue order (class,
 * fair-share rank, priority, submit time) with its teams.
 */
#include "policy_internal.h"

/* ---- quota ------------------------------------------------------------------------------- */

struct quota_cohort *sched__cohort_of(struct ctx *c, int t)
{
	return c->cohort[t] >= 0 ? &c->coh[c->cohort[t]] : NULL;
}

void sched__team_add(struct ctx *c, int t, int64_t gpus)
{
	struct quota_cohort *co = sched__cohort_of(c, t);

	if (co)
		quota_cohort_account(co, &c->qt[t], -1);
	c->qt[t].used += gpus;
	if (co)
		quota_cohort_account(co, &c->qt[t], +1);
}

/* Whether team t, after taking `ask` more, still has cap room for `then`. */
static bool res_caps_leave(const struct ctx *c, int t, const struct quota_vec *ask,
			   const struct quota_vec *then)
{
	struct quota_caps k = c->caps[t];

	quota_vec_add(&k.used, ask, +1);
	return quota_caps_check(&k, then) < 0;
}

/*
 * Whether a job of team t taking `need` GPUs (and `ask` CPUs and memory)
 * behind the head leaves the head admissible.
 */
bool sched__resv_quota_ok(struct ctx *c, int t, int64_t need, const struct quota_vec *ask)
{
	const struct quota_team *q = &c->qt[t];
	bool ok;

	if (t == c->head_team) {
		sched__team_add(c, t, need);
		ok = quota_check(&c->qt[t], sched__cohort_of(c, t), c->head_need) == QUOTA_OK;
		sched__team_add(c, t, -need);
		return ok && res_caps_leave(c, t, ask, &c->head_charge);
	}
	/* a peer that borrows competes with a borrowing head for the cohort's idle GPUs */
	if (c->head_borrows && c->cohort[t] >= 0 && c->cohort[t] == c->cohort[c->head_team] &&
	    q->used + need > q->nominal)
		return false;
	return true;
}

static bool okey_less(const struct okey *x, const struct okey *y)
{
	if (x->a != y->a)
		return x->a < y->a;
	if (x->b != y->b)
		return x->b < y->b;
	if (x->c != y->c)
		return x->c < y->c;
	return x->idx < y->idx;
}

uint64_t sched__bias(int64_t v)
{
	return (uint64_t)v ^ (1ull << 63);
}

/* Bottom-up merge sort of k[0..n) using tmp (n entries): no indirect calls, O(n log n). */
void sched__okey_sort(struct okey *k, struct okey *tmp, int n)
{
	struct okey *src = k, *dst = tmp;

	for (int i = 0; i + 1 < n; i += 2)
		if (okey_less(&k[i + 1], &k[i])) {
			struct okey t = k[i];

			k[i] = k[i + 1];
			k[i + 1] = t;
		}
	for (int w = 2; w < n; w *= 2) {
		for (int lo = 0; lo < n; lo += 2 * w) {
			int mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
			int x = lo, y = mid, o = lo;

			while (x < mid && y < hi)
				dst[o++] = okey_less(&src[y], &src[x]) ? src[y++] : src[x++];
			while (x < mid)
				dst[o++] = src[x++];
			while (y < hi)
				dst[o++] = src[y++];
		}
		struct okey *t = src;

		src = dst;
		dst = t;
	}
	if (src != k)
		memcpy(k, src, (size_t)n * sizeof(*k));
}

int sched__cmp_double_desc(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x < y) - (x > y);
}

struct cname {
	const char *name;
	int team;
};

static int cmp_cname(const void *a, const void *b)
{
	const struct cname *x = a, *y = b;
	int r = strcmp(x->name, y->name);

	return r ? r : (x->team > y->team) - (x->team < y->team);
}

/* The reclaim delay of cohort name (NULL: none): its own, else the config's. */
static int64_t reclaim_delay_s(const struct sched_input *in, const char *name)
{
	int64_t d = in->cfg.reclaim_delay_s;

	for (int k = 0; name && k < in->ncohorts; k++)
		if (in->cohorts[k].name && !strcmp(in->cohorts[k].name, name))
			d = in->cohorts[k].reclaim_delay_s;
	return d > 0 ? d : 0;
}

int sched__setup_teams(struct ctx *c, const struct sched_input *in)
{
	int nt = in->nteams;
	struct cname *cn = calloc((size_t)nt + 1, sizeof(*cn));
	int ncn = 0;

	c->qt = calloc((size_t)nt + 1, sizeof(*c->qt));
	c->cohort = calloc((size_t)nt + 1, sizeof(*c->cohort));
	c->reclaim_delay_ms = calloc((size_t)nt + 1, sizeof(*c->reclaim_delay_ms));
	c->coh = calloc((size_t)nt + 1, sizeof(*c->coh));
	c->reclaim_used = calloc((size_t)nt + 1, sizeof(*c->reclaim_used));
	c->team_freed = calloc((size_t)nt + 1, sizeof(*c->team_freed));
	c->runs_off = calloc((size_t)nt + 2, sizeof(*c->runs_off));
	c->spent = calloc((size_t)nt + 1, sizeof(*c->spent));
	if (!c->spent || !cn || !c->qt || !c->cohort || !c->reclaim_delay_ms || !c->coh ||
	    !c->reclaim_used || !c->team_freed || !c->runs_off) {
		free(cn);
		return TY_ENOMEM;
	}
	for (int t = 0; t < nt; t++) {
		const struct sched_team_in *ti = &in->teams[t];

		c->qt[t].nominal = ti->nominal_gpus > 0 ? ti->nominal_gpus : 0;
		c->qt[t].borrowing_limit = ti->borrowing_limit < 0 ? -1 : ti->borrowing_limit;
		c->qt[t].lending_limit = ti->lending_limit < 0 ? -1 : ti->lending_limit;
		c->qt[t].in_cohort = ti->cohort && ti->cohort[0];
		c->cohort[t] = -1;
		c->spent[t] = ti->spent > 0 ? ti->spent : 0;
		c->reclaim_delay_ms[t] = reclaim_delay_s(in, ti->cohort) * 1000;
		if (c->qt[t].in_cohort)
			cn[ncn++] = (struct cname){ti->cohort, t};
	}
	qsort(cn, (size_t)ncn, sizeof(*cn), cmp_cname);
	for (int k = 0; k < ncn; k++) {
		if (k == 0 || strcmp(cn[k - 1].name, cn[k].name))
			c->ncoh++;
		c->cohort[cn[k].team] = c->ncoh - 1;
	}
	free(cn);
	return 0;
}

/* ---- money budgets ----------------------------------------------------------------------- */

bool sched__over_budget(const struct ctx *c, const struct sched_pending_in *p)
{
	const struct sched_team_in *ti = &c->in->teams[p->team];
	double spent = c->spent[p->team], cost = p->max_cost > 0 ? p->max_cost : 0;

	if (!ti->has_budget)
		return false;
	/* a budget of 0 (or one spent) lets nothing start, whatever the job costs */
	return spent >= ti->budget || spent + cost > ti->budget;
}

void sched__budget_charge(struct ctx *c, const struct sched_pending_in *p)
{
	if (p->max_cost > 0)
		c->spent[p->team] += p->max_cost;
}
