/*
 * The policy core (policy.h): queue order, quota admission, topology-aware
 * all-or-nothing gang fit, reclaim and class preemption, the head job's
 * reservation and backfill around it. Pure; docs/scheduling.md is the policy.
 */
#include "policy_internal.h"

/* ---- names ------------------------------------------------------------------------------- */

static const char *const class_names[SCHED_CLASS_COUNT] = {"high", "normal", "low", "scavenger"};
static const char *const topo_names[SCHED_TOPO_COUNT] = {"none", "block", "rack", "zone"};

const char *sched_class_name(enum sched_class c)
{
	return (unsigned)c < SCHED_CLASS_COUNT ? class_names[c] : "unknown";
}

const char *sched_topo_name(enum sched_topo t)
{
	return (unsigned)t < SCHED_TOPO_COUNT ? topo_names[t] : "unknown";
}

int sched_class_parse(const char *name)
{
	for (int i = 0; name && i < SCHED_CLASS_COUNT; i++)
		if (!strcmp(name, class_names[i]))
			return i;
	return -1;
}

int sched_topo_parse(const char *name)
{
	if (!name)
		return SCHED_TOPO_NONE;
	for (int i = 1; i < SCHED_TOPO_COUNT; i++)
		if (!strcmp(name, topo_names[i]))
			return i;
	return -1;
}

void sched_config_default(struct sched_config *c)
{
	memset(c, 0, sizeof(*c));
	c->half_life_s = QUOTA_DEFAULT_HALF_LIFE_S;
	/* the daemon's --min-runtime-seconds defaults */
	c->class_min_runtime_s[SCHED_CLASS_HIGH] = 600;
	c->class_min_runtime_s[SCHED_CLASS_NORMAL] = 600;
	c->class_min_runtime_s[SCHED_CLASS_LOW] = 300;
	c->port_lo = 29500;
	c->port_hi = 29999;
	c->backfill = true;
	c->preemption = true;
}

/* ---- views ------------------------------------------------------------------------------- */

int sched__view_alloc(struct view *v, const struct ctx *c)
{
	memset(v, 0, sizeof(*v));
	v->free = calloc((size_t)c->nn + 1, sizeof(*v->free));
	v->ge = calloc((size_t)c->ndoms * NGE + 1, sizeof(*v->ge));
	v->sum = calloc((size_t)c->ndoms + 1, sizeof(*v->sum));
	v->bits = calloc((size_t)NG * (size_t)c->words, sizeof(*v->bits));
	v->summ = calloc((size_t)NG * (size_t)c->swords, sizeof(*v->summ));
	return v->free && v->ge && v->sum && v->bits && v->summ ? 0 : TY_ENOMEM;
}

void sched__view_release(struct view *v)
{
	free(v->free);
	free(v->ge);
	free(v->sum);
	free(v->bits);
	free(v->summ);
}

void sched__view_copy(struct view *dst, const struct view *src, const struct ctx *c)
{
	memcpy(dst->free, src->free, (size_t)c->nn * sizeof(*dst->free));
	memcpy(dst->ge, src->ge, (size_t)c->ndoms * NGE * sizeof(*dst->ge));
	memcpy(dst->sum, src->sum, (size_t)c->ndoms * sizeof(*dst->sum));
	memcpy(dst->bits, src->bits, (size_t)NG * (size_t)c->words * sizeof(*dst->bits));
	memcpy(dst->summ, src->summ, (size_t)NG * (size_t)c->swords * sizeof(*dst->summ));
	memcpy(dst->cge, src->cge, sizeof(dst->cge));
	memcpy(dst->bcnt, src->bcnt, sizeof(dst->bcnt));
	memcpy(dst->nofit, src->nofit, sizeof(dst->nofit));
	memcpy(dst->fits, src->fits, sizeof(dst->fits));
}

static void bit_set(const struct ctx *c, struct view *v, int g, int n)
{
	v->bits[(size_t)g * c->words + n / 64] |= 1ull << (n % 64);
	v->summ[(size_t)g * c->swords + n / 4096] |= 1ull << ((n / 64) % 64);
	v->bcnt[g]++;
}

static void bit_clear(const struct ctx *c, struct view *v, int g, int n)
{
	uint64_t *w = &v->bits[(size_t)g * c->words + n / 64];

	*w &= ~(1ull << (n % 64));
	if (!*w)
		v->summ[(size_t)g * c->swords + n / 4096] &= ~(1ull << ((n / 64) % 64));
	v->bcnt[g]--;
}

/* First node >= from with exactly g free, or -1. */
static int bit_next(const struct ctx *c, const struct view *v, int g, int from)
{
	const uint64_t *b = v->bits + (size_t)g * c->words, *s = v->summ + (size_t)g * c->swords;
	int w, sw;
	uint64_t m;

	if (from >= c->nn || !v->bcnt[g])
		return -1;
	w = from / 64;
	m = b[w] & (~0ull << (from % 64));
	if (m)
		return w * 64 + __builtin_ctzll(m);
	w++;
	sw = w / 64;
	if (sw >= c->swords)
		return -1;
	m = s[sw] & (~0ull << (w % 64));
	while (!m) {
		if (++sw >= c->swords)
			return -1;
		m = s[sw];
	}
	w = sw * 64 + __builtin_ctzll(m);
	return w * 64 + __builtin_ctzll(b[w]);
}

/* Build v from free counts f (-1 = not usable); forgets the shape memos. */
void sched__view_build(const struct ctx *c, struct view *v, const int16_t *f)
{
	memcpy(v->free, f, (size_t)c->nn * sizeof(*f));
	memset(v->ge, 0, (size_t)c->ndoms * NGE * sizeof(*v->ge));
	memset(v->sum, 0, (size_t)c->ndoms * sizeof(*v->sum));
	memset(v->bits, 0, (size_t)NG * (size_t)c->words * sizeof(*v->bits));
	memset(v->summ, 0, (size_t)NG * (size_t)c->swords * sizeof(*v->summ));
	memset(v->cge, 0, sizeof(v->cge));
	memset(v->bcnt, 0, sizeof(v->bcnt));
	memset(v->nofit, 0, sizeof(v->nofit));
	memset(v->fits, 0, sizeof(v->fits));
	for (int n = 0; n < c->nn; n++) {
		int x = f[n];

		if (x < 0)
			continue;
		for (int l = 0; l < NLEV; l++) {
			int dd = c->ndom[(size_t)n * NLEV + l];

			if (dd >= 0) {
				v->ge[(size_t)dd * NGE + x]++;
				v->sum[dd] += x;
			}
		}
		v->cge[x]++;
		bit_set(c, v, x, n);
	}
	for (int dd = 0; dd < c->ndoms; dd++) {
		int32_t *ge = v->ge + (size_t)dd * NGE;

		for (int g = NG - 2; g >= 0; g--)
			ge[g] += ge[g + 1];
	}
	for (int g = NG - 2; g >= 0; g--)
		v->cge[g] += v->cge[g + 1];
}

static void view_set(const struct ctx *c, struct view *v, int n, int nf)
{
	int of = v->free[n], lo, hi, dlt;

	if (of == nf)
		return;
	v->free[n] = (int16_t)nf;
	if (nf > of) {
		lo = of + 1;
		hi = nf;
		dlt = 1;
	} else {
		lo = nf + 1;
		hi = of;
		dlt = -1;
	}
	for (int l = 0; l < NLEV; l++) {
		int dd = c->ndom[(size_t)n * NLEV + l];
		int32_t *ge;

		if (dd < 0)
			continue;
		ge = v->ge + (size_t)dd * NGE;
		for (int g = lo; g <= hi; g++)
			ge[g] += dlt;
		v->sum[dd] += (nf > 0 ? nf : 0) - (of > 0 ? of : 0);
	}
	for (int g = lo; g <= hi; g++)
		v->cge[g] += dlt;
	if (of >= 0)
		bit_clear(c, v, of, n);
	if (nf >= 0)
		bit_set(c, v, nf, n);
}

/* ---- node state ---------------------------------------------------------------------------- */

int sched__actual_free(const struct ctx *c, int n)
{
	if (!c->in->nodes[n].schedulable)
		return -1;
	return popc(c->full[n] & ~c->busy[n]);
}

/* Bring every view's value for node n in line with the node's state. */
void sched__refresh_node(struct ctx *c, int n)
{
	int af = sched__actual_free(c, n), lf = af;
	bool sp = c->nspot && spot_node(c, n);

	view_set(c, &c->main, n, af);
	if (c->nspot)
		view_set(c, &c->main_od, n, sp ? -1 : af);
	if (c->have_resv) {
		if (af >= 0 && c->spare[n] != NOSPARE && c->spare[n] < af)
			lf = c->spare[n];
		view_set(c, &c->lng, n, lf);
		if (c->nspot)
			view_set(c, &c->lng_od, n, sp ? -1 : lf);
	}
}

/* Lowest `k` free GPUs of node n, marked busy; written to out (may be NULL). Returns how many. */
int sched__take_gpus(struct ctx *c, int n, int k, int *out)
{
	uint64_t freem = c->full[n] & ~c->busy[n];
	int got = 0;

	while (got < k && freem) {
		int g = __builtin_ctzll(freem);

		freem &= freem - 1;
		c->busy[n] |= 1ull << g;
		if (out)
			out[got] = g;
		got++;
	}
	return got;
}

int sched__cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

int sched__ports_init(struct ctx *c, int n)
{
	struct portset *p = &c->ports[n];
	const struct sched_node_in *nd = &c->in->nodes[n];
	int k = 0;

	if (p->init)
		return 0;
	p->cap = nd->nports + 4;
	if (!(p->v = malloc((size_t)p->cap * sizeof(*p->v))))
		return TY_ENOMEM;
	if (nd->nports > 0 && nd->ports)
		memcpy(p->v, nd->ports, (size_t)nd->nports * sizeof(*p->v));
	qsort(p->v, (size_t)(nd->ports ? nd->nports : 0), sizeof(*p->v), sched__cmp_int);
	for (int i = 0; nd->ports && i < nd->nports; i++)
		if (k == 0 || p->v[k - 1] != p->v[i])
			p->v[k++] = p->v[i];
	p->n = k;
	p->init = true;
	return 0;
}

/* Lowest port of the range free on node n (0 = none); ports_init first. */
int sched__port_lowest(struct ctx *c, int n)
{
	struct portset *p = &c->ports[n];
	int from = p->low > c->in->cfg.port_lo ? p->low : c->in->cfg.port_lo, lo = 0, hi = p->n;

	/* first held port >= from */
	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (p->v[mid] < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (int port = from; port <= c->in->cfg.port_hi; port++) {
		if (lo < p->n && p->v[lo] == port) {
			lo++;
			continue;
		}
		p->low = port;
		return port;
	}
	p->low = c->in->cfg.port_hi + 1;
	return 0;
}

int sched__port_take(struct ctx *c, int n, int port)
{
	struct portset *p = &c->ports[n];
	int k;

	if (p->n == p->cap) {
		int cap = p->cap * 2 + 4;
		int *v = realloc(p->v, (size_t)cap * sizeof(*v));

		if (!v)
			return TY_ENOMEM;
		p->v = v;
		p->cap = cap;
	}
	for (k = p->n; k > 0 && p->v[k - 1] > port; k--)
		p->v[k] = p->v[k - 1];
	p->v[k] = port;
	p->n++;
	return 0;
}

/* ---- topology ---------------------------------------------------------------------------- */

struct lbl {
	const char *z, *r, *b;
	int n;
};

static const char *str(const char *s)
{
	return s ? s : "";
}

static int cmp_lbl(const void *a, const void *b)
{
	const struct lbl *x = a, *y = b;
	int r;

	if ((r = strcmp(x->z, y->z)) || (r = strcmp(x->r, y->r)) || (r = strcmp(x->b, y->b)))
		return r;
	return (x->n > y->n) - (x->n < y->n);
}

/* Domains from labels: sorted by path, so ids are the same for the same input. */
int sched__build_domains(struct ctx *c)
{
	struct lbl *l = calloc((size_t)c->nn + 1, sizeof(*l));
	int *local = calloc((size_t)c->nn * NLEV + 1, sizeof(*local));
	int count[NLEV] = {0}, rc = TY_ENOMEM;

	if (!l || !local)
		goto out;
	for (int n = 0; n < c->nn; n++) {
		l[n].z = str(c->in->nodes[n].zone);
		l[n].r = str(c->in->nodes[n].rack);
		l[n].b = str(c->in->nodes[n].block);
		l[n].n = n;
	}
	qsort(l, (size_t)c->nn, sizeof(*l), cmp_lbl);
	for (int k = 0; k < c->nn; k++) {
		const struct lbl *x = &l[k], *p = k ? &l[k - 1] : NULL;
		bool same_z = p && !strcmp(p->z, x->z), same_r = same_z && !strcmp(p->r, x->r);
		bool same_b = same_r && !strcmp(p->b, x->b);
		bool has[NLEV] = {x->b[0] != '\0', x->r[0] != '\0', x->z[0] != '\0'};
		bool same[NLEV] = {same_b, same_r, same_z};

		for (int lv = 0; lv < NLEV; lv++) {
			int *slot = &local[(size_t)x->n * NLEV + lv];

			if (!has[lv]) {
				*slot = -1;
				continue;
			}
			if (!same[lv])
				count[lv]++;
			*slot = count[lv] - 1;
		}
	}
	c->lev_start[0] = 0;
	for (int lv = 0; lv < NLEV; lv++)
		c->lev_start[lv + 1] = c->lev_start[lv] + count[lv];
	c->ndoms = c->lev_start[NLEV];
	c->ndom = malloc(((size_t)c->nn * NLEV + 1) * sizeof(*c->ndom));
	c->dom_anc = malloc(((size_t)c->ndoms * NLEV + 1) * sizeof(*c->dom_anc));
	c->dom_off = calloc((size_t)c->ndoms + 2, sizeof(*c->dom_off));
	c->dom_nodes = malloc(((size_t)c->nn * NLEV + 1) * sizeof(*c->dom_nodes));
	if (!c->ndom || !c->dom_anc || !c->dom_off || !c->dom_nodes)
		goto out;
	for (int n = 0; n < c->nn; n++)
		for (int lv = 0; lv < NLEV; lv++) {
			int x = local[(size_t)n * NLEV + lv];

			c->ndom[(size_t)n * NLEV + lv] = x < 0 ? -1 : c->lev_start[lv] + x;
		}
	for (size_t k = 0; k < (size_t)c->ndoms * NLEV; k++)
		c->dom_anc[k] = -1;
	for (int n = 0; n < c->nn; n++) {
		const int *nd = &c->ndom[(size_t)n * NLEV];

		for (int lv = 0; lv < NLEV; lv++) {
			if (nd[lv] < 0)
				continue;
			c->dom_off[nd[lv] + 1]++;
			/* ancestors along the path; a missing level cuts the chain */
			for (int up = lv; up < NLEV && nd[up] >= 0; up++)
				c->dom_anc[(size_t)nd[lv] * NLEV + up] = nd[up];
		}
	}
	for (int dd = 0; dd < c->ndoms; dd++)
		c->dom_off[dd + 1] += c->dom_off[dd];
	{
		int *fill = calloc((size_t)c->ndoms + 1, sizeof(*fill));

		if (!fill)
			goto out;
		for (int n = 0; n < c->nn; n++)
			for (int lv = 0; lv < NLEV; lv++) {
				int dd = c->ndom[(size_t)n * NLEV + lv];

				if (dd >= 0)
					c->dom_nodes[c->dom_off[dd] + fill[dd]++] = n;
			}
		free(fill);
	}
	rc = 0;
out:
	free(l);
	free(local);
	return rc;
}

/* ---- gang fit ------------------------------------------------------------------------------ */

/*
 * The m nodes of domain dd (the cluster when dd < 0) with >= G free and the
 * fewest free GPUs, ties to the lowest index, appended to out in index
 * order (dd) or best-fit order (cluster). The caller knows there are m.
 */
int sched__pick_best(const struct ctx *c, const struct view *v, int dd, int G, int m, int *out)
{
	const int32_t *ge;
	int t, take_t, k = 0;

	if (m <= 0)
		return 0;
	if (dd < 0) {
		for (int g = G; g < NG && k < m; g++)
			for (int n = bit_next(c, v, g, 0); n >= 0 && k < m;
			     n = bit_next(c, v, g, n + 1))
				out[k++] = n;
		return k;
	}
	ge = v->ge + (size_t)dd * NGE;
	/* smallest t with m nodes in [G, t]: all of [G, t) and the lowest of t */
	for (t = G; t < NG - 1 && ge[G] - ge[t + 1] < m; t++)
		;
	take_t = m - (ge[G] - ge[t]);
	for (int x = c->dom_off[dd]; x < c->dom_off[dd + 1] && k < m; x++) {
		int n = c->dom_nodes[x], f = v->free[n];

		if (f >= G && f < t)
			out[k++] = n;
		else if (f == t && take_t > 0) {
			out[k++] = n;
			take_t--;
		}
	}
	return k;
}

/*
 * N nodes with >= G free in view v, in the smallest domain that fits
 * (block, rack, zone, cluster; up to the required level), best fit: the
 * domain with the fewest free GPUs, inside it the nodes with the fewest
 * free GPUs (then lowest index). Nodes go to c->pick, ascending.
 */
bool sched__fit(struct ctx *c, struct view *v, int N, int G, int req)
{
	int maxlev;

	if (N == 1)
		req = SCHED_TOPO_NONE;
	if (N > c->nn || v->cge[G] < N)
		return false;
	if (v->nofit[req][G] && v->nofit[req][G] <= N)
		return false;
	if (N == 1) {
		for (int g = G; g < NG; g++) {
			int n = bit_next(c, v, g, 0);

			if (n >= 0) {
				c->pick[0] = n;
				return true;
			}
		}
		return false;
	}
	maxlev = req ? req - 1 : LEV_CLUSTER;
	for (int lv = 0; lv <= maxlev; lv++) {
		int best = -1;

		if (lv == LEV_CLUSTER) {
			sched__pick_best(c, v, -1, G, N, c->pick);
			qsort(c->pick, (size_t)N, sizeof(*c->pick), sched__cmp_int);
			return true;
		}
		for (int dd = c->lev_start[lv]; dd < c->lev_start[lv + 1]; dd++) {
			if (v->ge[(size_t)dd * NGE + G] < N)
				continue;
			if (req && c->dom_anc[(size_t)dd * NLEV + (req - 1)] < 0)
				continue;
			if (best < 0 || v->sum[dd] < v->sum[best])
				best = dd;
		}
		if (best < 0)
			continue;
		sched__pick_best(c, v, best, G, N, c->pick);
		return true;
	}
	if (!c->nolearn && (!v->nofit[req][G] || N < v->nofit[req][G]))
		v->nofit[req][G] = N;
	return false;
}

/*
 * Whether the gang could ever fit on the schedulable nodes, all idle (od:
 * on the on-demand ones).
 */
bool sched__could_fit(struct ctx *c, int N, int G, int req, bool od)
{
	int r = N == 1 ? SCHED_TOPO_NONE : req;
	struct view *cap = od ? &c->cap_od : &c->cap;
	bool *built = od ? &c->cap_od_built : &c->cap_built;
	bool ok;

	if (!*built) {
		for (int n = 0; n < c->nn; n++)
			c->f[n] = (int16_t)(c->in->nodes[n].schedulable && !(od && spot_node(c, n))
						? popc(c->full[n])
						: -1);
		sched__view_build(c, cap, c->f);
		*built = true;
	}
	if (cap->fits[r][G] >= N)
		return true;
	ok = sched__fit(c, cap, N, G, req);
	if (ok && cap->fits[r][G] < N)
		cap->fits[r][G] = N;
	return ok;
}

/*
 * Whether the gang could ever fit on the schedulable nodes but those it
 * excludes (and the spot nodes, for a job kept off them), all idle (after
 * sched__could_fit() built the capacity view). Returns the number of distinct
 * schedulable nodes it leaves out in *nx.
 */
bool sched__could_fit_excluding(struct ctx *c, const struct sched_pending_in *p, int *nx)
{
	struct view *cap = c->od ? &c->cap_od : &c->cap;
	bool ok, learn = c->nolearn;

	*nx = 0;
	if (c->od) {
		*nx = c->nspot;
		if (!sched__could_fit(c, p->nodes, p->gpus_per_node, p->required, true))
			return false;
		if (!p->nexclude)
			return true;
	}
	for (int k = 0; k < p->nexclude; k++) {
		int n = p->exclude[k];

		if (n >= 0 && n < c->nn && cap->free[n] >= 0) {
			view_set(c, cap, n, -1);
			(*nx)++;
		}
	}
	c->nolearn = true; /* the shape memos are the whole capacity's */
	ok = sched__fit(c, cap, p->nodes, p->gpus_per_node, p->required);
	c->nolearn = learn;
	for (int k = 0; k < p->nexclude; k++) {
		int n = p->exclude[k];

		if (n >= 0 && n < c->nn && c->in->nodes[n].schedulable && !(c->od && spot_node(c, n)))
			view_set(c, cap, n, popc(c->full[n]));
	}
	return ok;
}

bool sched__fits_quickly_no(const struct view *v, int N, int G, int req)
{
	int r = N == 1 ? SCHED_TOPO_NONE : req;

	return v->cge[G] < N || (v->nofit[r][G] && v->nofit[r][G] <= N);
}

/* ---- output growth ------------------------------------------------------------------------- */

int sched__grow(void **p, int *cap, int need, size_t sz)
{
	void *q;
	int nc;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	if (!(q = realloc(*p, (size_t)nc * sz)))
		return TY_ENOMEM;
	*p = q;
	*cap = nc;
	return 0;
}

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

/* ---- placement ------------------------------------------------------------------------------ */

int sched__place(struct ctx *c, int i, bool lng, bool *placed)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	struct sched_placement pl = {0};
	int master = -1, port = 0, rc, r, N = p->nodes, G = p->gpus_per_node;

	*placed = false;
	for (int k = 0; k < N; k++) {
		if ((rc = sched__ports_init(c, c->pick[k])))
			return rc;
		if ((port = sched__port_lowest(c, c->pick[k]))) {
			master = k;
			break;
		}
	}
	if (master < 0)
		return 0;
	if ((rc = sched__grow((void **)&c->d->placements, &c->cap_pl, c->d->nplacements + 1,
			      sizeof(*c->d->placements))) ||
	    (rc = sched__grow((void **)&c->d->placement_pending, &c->cap_plp, c->d->nplacements + 1,
			      sizeof(*c->d->placement_pending))))
		return rc;
	pl.job = p->job;
	pl.nnodes = N;
	pl.gpus_per_node = G;
	pl.local_ranks = p->per_node ? 1 : (G > 1 ? G : 1);
	pl.world_size = N * pl.local_ranks;
	pl.master_port = port;
	pl.node = calloc((size_t)N, sizeof(*pl.node));
	pl.gpus = calloc((size_t)N * (size_t)G + 1, sizeof(*pl.gpus));
	if (!pl.node || !pl.gpus) {
		sched_placement_clear(&pl);
		return TY_ENOMEM;
	}
	if ((rc = sched__port_take(c, c->pick[master], port))) {
		sched_placement_clear(&pl);
		return rc;
	}
	pl.node[0] = c->pick[master];
	r = 1;
	for (int k = 0; k < N; k++)
		if (k != master)
			pl.node[r++] = c->pick[k];
	for (r = 0; r < N; r++) {
		int n = pl.node[r];

		sched__take_gpus(c, n, G, pl.gpus + (size_t)r * (size_t)G);
		if (lng && c->spare[n] != NOSPARE)
			c->spare[n] -= G;
		if (c->cpu_left[n] != NOLIMIT)
			c->cpu_left[n] -= p->cpus_per_node;
		if (c->mem_left[n] != NOLIMIT)
			c->mem_left[n] -= p->memory_mb_per_node;
		if (c->cpu_left[n] < c->cpu_min)
			c->cpu_min = c->cpu_left[n];
		if (c->mem_left[n] < c->mem_min)
			c->mem_min = c->mem_left[n];
		sched__refresh_node(c, n);
	}
	sched__team_add(c, p->team, (int64_t)N * G);
	{
		struct quota_vec ch =
		    quota_job_charge(N, p->cpus_per_node, p->memory_mb_per_node);

		quota_vec_add(&c->caps[p->team].used, &ch, +1);
	}
	c->d->placements[c->d->nplacements] = pl;
	c->d->placement_pending[c->d->nplacements++] = i;
	c->gen++;
	*placed = true;
	return 0;
}

/* ---- preemption ------------------------------------------------------------------------------ */

struct plan {
	int N, G, lvl, deficit_team;
	int64_t deficit, own_freed;
	int sat;
	bool lng;
	struct view *v;
	int nv;
};

static bool node_usable_for_victims(const struct ctx *c, const struct plan *pl, int n)
{
	if (pl->v->free[n] < 0)
		return false;
	return !(pl->lng && c->have_resv && c->spare[n] != NOSPARE);
}

static int plan_dom(const struct ctx *c, const struct plan *pl, int n)
{
	return pl->lvl == LEV_CLUSTER ? c->ndoms : c->ndom[(size_t)n * NLEV + pl->lvl];
}

static int plan_base(const struct ctx *c, const struct plan *pl, int dd)
{
	return dd == c->ndoms ? pl->v->cge[pl->G] : pl->v->ge[(size_t)dd * NGE + pl->G];
}

static void plan_apply(struct ctx *c, struct plan *pl, int r, int sign)
{
	const struct sched_running_in *ru = &c->in->running[r];

	for (int k = 0; k < ru->nnodes; k++) {
		int n = ru->node[k], add, f, old, now, dd;

		if (!node_usable_for_victims(c, pl, n))
			continue;
		add = popc(ru->gpus[k] & c->full[n]);
		if (!add)
			continue;
		f = pl->v->free[n];
		if (!c->tmark[n]) {
			c->tmark[n] = 1;
			c->touched[c->ntouched++] = n;
		}
		old = f + c->extra[n];
		c->extra[n] = (int16_t)(c->extra[n] + sign * add);
		now = f + c->extra[n];
		if ((dd = plan_dom(c, pl, n)) < 0)
			continue;
		if (old < pl->G && now >= pl->G) {
			if (++c->dcount[dd] + plan_base(c, pl, dd) == pl->N)
				pl->sat++;
		} else if (old >= pl->G && now < pl->G) {
			if (c->dcount[dd]-- + plan_base(c, pl, dd) == pl->N)
				pl->sat--;
		}
	}
	if (ru->team == pl->deficit_team)
		pl->own_freed += sign * c->run_gpus[r];
	c->team_freed[ru->team] += sign * c->run_gpus[r];
}

static bool plan_feasible(const struct plan *pl)
{
	return pl->sat > 0 && pl->own_freed >= pl->deficit;
}

/* When running gang ru may be preempted at the earliest (its minimum runtime ends). */
static int64_t protected_until(const struct ctx *c, const struct sched_running_in *ru)
{
	int64_t min_s = ru->min_runtime_s, cls_s = 0;

	if ((unsigned)ru->cls < SCHED_CLASS_COUNT)
		cls_s = c->in->cfg.class_min_runtime_s[ru->cls];
	if (cls_s > min_s)
		min_s = cls_s;
	return ru->start_ms + min_s * 1000;
}

static bool protected_run(const struct ctx *c, const struct sched_running_in *ru)
{
	return c->now < protected_until(c, ru);
}

/* Reclaim stays in the cohort: only a cohort peer can borrow a team's nominal. */
static bool same_cohort(const struct ctx *c, int u, int t)
{
	return c->cohort[u] >= 0 && c->cohort[u] == c->cohort[t];
}

/* Whether running gang r may be preempted now for a job of team t, class cls. */
static bool victim_ok(const struct ctx *c, int r, int t, int cls, bool reclaim)
{
	const struct sched_running_in *ru = &c->in->running[r];
	int u = ru->team;

	if (c->claimed[r])
		return false;
	if (ru->preempting)
		return true;
	if (!ru->preemptible)
		return false;
	if (u == t)
		return (int)ru->cls > cls && !protected_run(c, ru);
	if (protected_run(c, ru) && !c->dry)
		return false;
	if (!reclaim || !same_cohort(c, u, t))
		return false;
	/* only while its team still borrows (before this one goes) */
	return c->reclaim_used[u] - c->team_freed[u] > c->qt[u].nominal;
}

/* Victim preference: already stopping, lower class, lower priority, less work lost, younger, id. */
int sched__cmp_victim(const void *a, const void *b, void *arg)
{
	const struct ctx *pref_ctx = arg;
	const struct sched_running_in *x = &pref_ctx->in->running[*(const int *)a];
	const struct sched_running_in *y = &pref_ctx->in->running[*(const int *)b];
	int64_t lx, ly;

	if (x->preempting != y->preempting)
		return x->preempting ? -1 : 1;
	if (x->cls != y->cls)
		return x->cls > y->cls ? -1 : 1;
	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	lx = pref_ctx->now - (x->checkpoint_ms > x->start_ms ? x->checkpoint_ms : x->start_ms);
	ly = pref_ctx->now - (y->checkpoint_ms > y->start_ms ? y->checkpoint_ms : y->start_ms);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	if (x->start_ms != y->start_ms)
		return x->start_ms > y->start_ms ? -1 : 1;
	if (x->job != y->job)
		return x->job < y->job ? -1 : 1;
	return *(const int *)a - *(const int *)b;
}

static void plan_reset(struct ctx *c, struct plan *pl)
{
	for (int k = 0; k < c->ntouched; k++) {
		int n = c->touched[k], dd = plan_dom(c, pl, n);

		c->extra[n] = 0;
		c->tmark[n] = 0;
		if (dd >= 0)
			c->dcount[dd] = 0;
	}
	c->dcount[c->ndoms] = 0;
	c->ntouched = 0;
	for (int k = 0; k < pl->nv; k++)
		c->team_freed[c->in->running[c->vict[k]].team] = 0;
}

int sched__hold_add(struct ctx *c, int i, int N, int G, int64_t end_ms)
{
	int rc;
	struct hold *h;

	if ((rc = sched__grow((void **)&c->holds, &c->cap_holds, c->nholds + 1, sizeof(*c->holds))))
		return rc;
	if ((rc = sched__grow((void **)&c->hold_nodes, &c->cap_hold_nodes, c->nhold_nodes + N,
			      sizeof(*c->hold_nodes))) ||
	    (rc = sched__grow((void **)&c->hold_vp, &c->cap_hold_vp, c->nhold_nodes + N,
			      sizeof(*c->hold_vp))))
		return rc;
	h = &c->holds[c->nholds++];
	h->pending = i;
	h->nnodes = N;
	h->gpus = G;
	h->first = c->nhold_nodes;
	h->end_ms = end_ms;
	c->nhold_nodes += N;
	return 0;
}

int sched__add_reservation(struct ctx *c, int i, enum sched_resv_kind kind, int64_t at, int N,
			   int G, const int *nodes)
{
	struct sched_reservation *r;
	int rc;

	if ((rc = sched__grow((void **)&c->d->reservations, &c->cap_res, c->d->nreservations + 1,
			      sizeof(*c->d->reservations))))
		return rc;
	r = &c->d->reservations[c->d->nreservations];
	memset(r, 0, sizeof(*r));
	if (!(r->node = malloc((size_t)N * sizeof(*r->node))))
		return TY_ENOMEM;
	memcpy(r->node, nodes, (size_t)N * sizeof(*r->node));
	r->job = c->in->pending[i].job;
	r->pending = i;
	r->kind = kind;
	r->start_ms = at;
	r->nnodes = N;
	r->gpus_per_node = G;
	c->d->nreservations++;
	return 0;
}

/*
 * Whether the nodes the previous decision held for pending job p are a
 * valid gang for it in view v: nheld == nodes, distinct, usable, in one
 * domain of its required level, each with >= gpus_per_node free counting
 * extra[] (a preemption plan's victims; NULL = none). Copies them,
 * ascending, to c->pick.
 */
bool sched__held_fits(struct ctx *c, const struct sched_pending_in *p, const struct view *v,
		      const int16_t *extra, bool lng_plan)
{
	int N = p->nodes, G = p->gpus_per_node,
	    lvl = N > 1 && p->required ? (int)p->required - 1 : -1;

	if (!p->held_nodes || p->nheld != N || N > c->nn)
		return false;
	for (int k = 0; k < N; k++) {
		int n = p->held_nodes[k], f;

		if (n < 0 || n >= c->nn)
			return false;
		for (int x = 0; x < k; x++)
			if (p->held_nodes[x] == n)
				return false;
		if ((f = v->free[n]) < 0)
			return false;
		if (lng_plan && c->have_resv && c->spare[n] != NOSPARE)
			return false;
		if (f + (extra ? extra[n] : 0) < G)
			return false;
		if (lvl >= 0 && (c->ndom[(size_t)n * NLEV + lvl] < 0 ||
				 c->ndom[(size_t)n * NLEV + lvl] !=
				     c->ndom[(size_t)p->held_nodes[0] * NLEV + lvl]))
			return false;
	}
	memcpy(c->pick, p->held_nodes, (size_t)N * sizeof(*c->pick));
	qsort(c->pick, (size_t)N, sizeof(*c->pick), sched__cmp_int);
	return true;
}

/* Whether a gang is still stopping for pending job i. */
bool sched__victims_stopping(const struct ctx *c, int i)
{
	for (int k = 0; k < c->npreempting; k++)
		if (c->owner[c->preempting[k]] == i)
			return true;
	return false;
}

/*
 * The exact part of the victim search: whether some `left` more of the
 * useful candidates cand[from..nc), taken in preference order, make the
 * plan feasible. Depth first, so the first set found is the most
 * preferred of its size; on success the set stays applied and is appended
 * to c->vict. *budget counts the sets tried; 0 ends the search (as not
 * found).
 */
struct exact {
	const int *cand;
	int nc, t, cls;
	bool reclaim;
	int64_t budget;
};

static bool exact_dfs(struct ctx *c, struct plan *pl, struct exact *x, int from, int left)
{
	if (left == 0)
		return plan_feasible(pl);
	for (int k = from; k <= x->nc - left; k++) {
		int r = x->cand[k];

		if (x->budget <= 0)
			return false;
		x->budget--;
		if (!victim_ok(c, r, x->t, x->cls, x->reclaim))
			continue;
		plan_apply(c, pl, r, +1);
		c->vict[pl->nv++] = r;
		if (exact_dfs(c, pl, x, k + 1, left - 1))
			return true;
		pl->nv--;
		plan_apply(c, pl, r, -1);
	}
	return false;
}

/*
 * Whether running gang r can help pending job i: GPUs on a usable node
 * that does not already fit the gang's per-node share, or quota its own
 * team needs back.
 */
static bool victim_useful(const struct ctx *c, const struct plan *pl, int r)
{
	const struct sched_running_in *ru = &c->in->running[r];

	if (ru->team == pl->deficit_team && pl->deficit > 0)
		return true;
	for (int k = 0; k < ru->nnodes; k++) {
		int n = ru->node[k];

		if (node_usable_for_victims(c, pl, n) && pl->v->free[n] < pl->G &&
		    popc(ru->gpus[k] & c->full[n]))
			return true;
	}
	return false;
}

/*
 * Greedy-then-pruned victims (pl->vict, the already-stopping ones first)
 * are minimal; look for a smaller set, smallest first. Sets of one were
 * tried exactly before the greedy pass, so only a greedy result of three
 * or more new victims can improve. Bounded by SCHED_VICTIM_BUDGET sets
 * per job and, for the whole decision, by c->exact_left.
 */
static void fewest_victims(struct ctx *c, struct plan *pl, int ncand, int t, int cls,
			   bool reclaim)
{
	int nstop = 0, greedy = 0, nuse = 0;
	struct exact x = {.t = t, .cls = cls, .reclaim = reclaim};

	for (int k = 0; k < pl->nv; k++)
		nstop += c->in->running[c->vict[k]].preempting;
	greedy = pl->nv - nstop;
	if (greedy < 3 || c->exact_left <= 0)
		return;
	/* the greedy victims out (stopping ones stay), keeping their order */
	for (int k = nstop; k < pl->nv; k++) {
		plan_apply(c, pl, c->vict[k], -1);
		c->vict_keep[k - nstop] = c->vict[k];
	}
	pl->nv = nstop;
	for (int k = 0; k < ncand; k++) {
		int r = c->cand[k];

		if (!c->in->running[r].preempting && victim_useful(c, pl, r))
			c->vict_use[nuse++] = r;
	}
	x.cand = c->vict_use;
	x.nc = nuse;
	x.budget = c->exact_left < SCHED_VICTIM_BUDGET ? c->exact_left : SCHED_VICTIM_BUDGET;
	for (int size = 2; size < greedy; size++) {
		int64_t before = x.budget;
		bool found = exact_dfs(c, pl, &x, 0, size);

		c->exact_left -= before - x.budget;
		if (found) {
			c->d->stats.victim_sets_improved++;
			return;
		}
		if (x.budget <= 0) {
			c->d->stats.victim_search_cutoffs++;
			break;
		}
	}
	for (int k = 0; k < greedy; k++) {
		plan_apply(c, pl, c->vict_keep[k], +1);
		c->vict[pl->nv++] = c->vict_keep[k];
	}
}

/*
 * Find the fewest running gangs whose GPUs, added to what is free, let
 * pending job i fit (nodes and, for own-team victims, quota) and commit
 * them: preemptions out, the job's nodes held. *done = whether it did.
 */
int sched__try_preempt(struct ctx *c, int i, bool lng, struct view *v, int64_t deficit, bool *done)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	const struct quota_team *q = &c->qt[p->team];
	int64_t need = (int64_t)p->nodes * p->gpus_per_node;
	bool reclaim = c->tier0[i] && q->used + need <= q->nominal;
	struct plan pl = {0};
	int ncand = 0, t = p->team, req = p->nodes == 1 ? SCHED_TOPO_NONE : p->required, rc = 0;
	size_t mk;
	bool ok = false;
	int chosen = 0, first_new = -1;
	int64_t own = 0; /* GPUs of its own team's victims: the hold takes their place */

	*done = false;
	if (!c->in->cfg.preemption || (c->dry ? c->dry_left == 0 : c->plans_left == 0))
		return 0;
	/* a failed plan stays failed for bigger jobs of the same key until something is placed */
	mk = ((((size_t)t * SCHED_CLASS_COUNT + (size_t)p->cls) * SCHED_TOPO_COUNT + (size_t)req) *
		  2 +
	      (lng ? 1 : 0)) *
		 NG +
	     (size_t)p->gpus_per_node;
	if (!c->dry && c->plan_gen[mk] == c->gen && c->plan_memo[mk] &&
	    c->plan_memo[mk] <= p->nodes && !p->nexclude && !c->od)
		return 0;
	if (!reclaim && !c->npreempting && !c->lower[(size_t)t * SCHED_CLASS_COUNT + p->cls])
		return 0;
	/* candidates: anything already stopping, own lower classes, borrowing teams' gangs */
	for (int k = 0; k < c->npreempting; k++) {
		int r = c->preempting[k];

		if (!c->claimed[r] && (c->owner[r] < 0 || c->owner[r] == i))
			c->cand[ncand++] = r;
	}
	for (int u = 0; u < c->in->nteams; u++) {
		if (u == t ? !c->lower[(size_t)t * SCHED_CLASS_COUNT + p->cls]
			   : !(reclaim && same_cohort(c, u, t) &&
			       c->reclaim_used[u] > c->qt[u].nominal))
			continue;
		for (int x = c->runs_off[u]; x < c->runs_off[u + 1]; x++) {
			int r = c->runs[x];

			if (!c->in->running[r].preempting && victim_ok(c, r, t, p->cls, reclaim))
				c->cand[ncand++] = r;
		}
	}
	if (ncand == 0)
		return 0;
	if (c->dry) {
		c->dry_left--;
	} else {
		c->plans_left--;
		c->d->stats.preemption_plans++;
	}
	qsort_r(c->cand, (size_t)ncand, sizeof(*c->cand), sched__cmp_victim, c);

	pl.N = p->nodes;
	pl.G = p->gpus_per_node;
	pl.lvl = req ? req - 1 : LEV_CLUSTER;
	pl.deficit_team = t;
	pl.deficit = deficit;
	pl.lng = lng;
	pl.v = v;
	if (pl.lvl == LEV_CLUSTER)
		pl.sat = v->cge[pl.G] >= pl.N;
	else
		for (int dd = c->lev_start[pl.lvl]; dd < c->lev_start[pl.lvl + 1]; dd++)
			pl.sat += v->ge[(size_t)dd * NGE + pl.G] >= pl.N;

	/* already-stopping gangs cost nothing */
	for (int k = 0; k < ncand && c->in->running[c->cand[k]].preempting; k++) {
		plan_apply(c, &pl, c->cand[k], +1);
		c->vict[pl.nv++] = c->cand[k];
	}
	if (plan_feasible(&pl))
		ok = true;
	/* the most preferred single victim that is enough */
	for (int k = 0; !ok && k < ncand; k++) {
		int r = c->cand[k];

		if (c->stopping_only || c->in->running[r].preempting ||
		    !victim_ok(c, r, t, p->cls, reclaim))
			continue;
		plan_apply(c, &pl, r, +1);
		if (plan_feasible(&pl)) {
			c->vict[pl.nv++] = r;
			ok = true;
		} else {
			plan_apply(c, &pl, r, -1);
		}
	}
	/* else add in preference order until it fits */
	for (int k = 0; !ok && k < ncand; k++) {
		int r = c->cand[k];

		if (c->stopping_only || c->in->running[r].preempting ||
		    !victim_ok(c, r, t, p->cls, reclaim))
			continue;
		plan_apply(c, &pl, r, +1);
		c->vict[pl.nv++] = r;
		ok = plan_feasible(&pl);
	}
	if (!ok)
		goto fail;
	/*
	 * drop victims that are not needed, the least preferred first (not when
	 * keeping held nodes: the nodes decide which stopping gangs are needed)
	 */
	for (int k = pl.nv - 1; k >= 0 && !c->stopping_only; k--) {
		int r = c->vict[k];

		plan_apply(c, &pl, r, -1);
		if (plan_feasible(&pl)) {
			memmove(&c->vict[k], &c->vict[k + 1],
				(size_t)(pl.nv - k - 1) * sizeof(*c->vict));
			pl.nv--;
		} else {
			plan_apply(c, &pl, r, +1);
		}
	}

	if (!c->stopping_only && !c->dry)
		fewest_victims(c, &pl, ncand, t, p->cls, reclaim);

	/* the nodes: a satisfied domain (most nodes made by victims), victim-made nodes first */
	{
		int best = -1, bestc = -1, k = 0;

		for (int x = 0; x < c->ntouched; x++) {
			int n = c->touched[x], dd = plan_dom(c, &pl, n);

			if (dd < 0 || c->dcount[dd] + plan_base(c, &pl, dd) < pl.N)
				continue;
			if (c->dcount[dd] > bestc || (c->dcount[dd] == bestc && dd < best)) {
				best = dd;
				bestc = c->dcount[dd];
			}
		}
		if (sched__held_fits(c, p, v, c->extra, lng)) {
			/* the nodes the previous decision held for it */
			k = pl.N;
		} else if (c->stopping_only) {
			goto fail; /* only to keep waiting for those */
		} else if (best < 0) {
			/* nodes fit without victims (the victims are for quota) */
			if (!sched__fit(c, v, pl.N, pl.G, req))
				goto fail;
			k = pl.N;
		} else {
			for (int x = 0; x < c->ntouched; x++) {
				int n = c->touched[x], f = v->free[n];

				if (plan_dom(c, &pl, n) == best && f >= 0 && f < pl.G &&
				    f + c->extra[n] >= pl.G)
					c->pick[k++] = n;
			}
			qsort(c->pick, (size_t)k, sizeof(*c->pick), sched__cmp_int);
			if (k > pl.N)
				k = pl.N;
			k += sched__pick_best(c, v, best == c->ndoms ? -1 : best, pl.G, pl.N - k,
					      c->pick + k);
			qsort(c->pick, (size_t)k, sizeof(*c->pick), sched__cmp_int);
		}
		if (k < pl.N)
			goto fail;
	}
	/* keep only victims the chosen nodes (or the quota) need */
	for (int k = pl.nv - 1; k >= 0; k--) {
		int r = c->vict[k];
		bool need_it = false;

		plan_apply(c, &pl, r, -1);
		if (pl.own_freed < pl.deficit)
			need_it = true;
		for (int x = 0; x < pl.N && !need_it; x++) {
			int n = c->pick[x];

			if (v->free[n] + c->extra[n] < pl.G)
				need_it = true;
		}
		if (need_it) {
			plan_apply(c, &pl, r, +1);
		} else {
			memmove(&c->vict[k], &c->vict[k + 1],
				(size_t)(pl.nv - k - 1) * sizeof(*c->vict));
			pl.nv--;
		}
	}
	if (pl.nv == 0)
		goto fail;
	if (c->dry) {
		struct sched_pending_out *o = &c->d->pending[i];
		int64_t until = 0;

		for (int k = 0; k < pl.nv; k++) {
			const struct sched_running_in *ru = &c->in->running[c->vict[k]];
			int64_t u;

			if (ru->preempting || !protected_run(c, ru))
				continue;
			u = protected_until(c, ru);
			o->protected_count++;
			if (!o->protected_job || u > until ||
			    (u == until && ru->job < o->protected_job)) {
				o->protected_job = ru->job;
				until = u;
			}
		}
		o->protected_until_ms = until;
		*done = o->protected_count > 0;
		plan_reset(c, &pl);
		return 0;
	}

	/* commit: new preemptions, victims claimed, the job's nodes held */
	for (int k = 0; k < pl.nv; k++) {
		int r = c->vict[k];
		const struct sched_running_in *ru = &c->in->running[r];
		struct sched_preemption *e;

		c->claimed[r] = true;
		chosen++;
		if (ru->team == t)
			own += c->run_gpus[r];
		if (ru->preempting)
			continue;
		if ((rc = sched__grow((void **)&c->d->preemptions, &c->cap_pre,
				      c->d->npreemptions + 1, sizeof(*c->d->preemptions))))
			goto fail;
		e = &c->d->preemptions[c->d->npreemptions++];
		e->victim = ru->job;
		e->running = r;
		e->for_job = p->job;
		e->pending = i;
		e->why = ru->team == t ? SCHED_PREEMPT_CLASS : SCHED_PREEMPT_RECLAIM;
		c->reclaim_used[ru->team] -= c->run_gpus[r];
		if (first_new < 0)
			first_new = k;
	}
	plan_reset(c, &pl);
	if ((rc = sched__hold_add(c, i, pl.N, pl.G, c->now + p->max_runtime_s * 1000)))
		return rc;
	for (int x = 0; x < pl.N; x++) {
		int n = c->pick[x], took = sched__take_gpus(c, n, pl.G, NULL);

		c->hold_nodes[c->holds[c->nholds - 1].first + x] = n;
		c->hold_vp[c->holds[c->nholds - 1].first + x] = pl.G - took;
		if (lng && c->have_resv && c->spare[n] != NOSPARE)
			c->spare[n] = c->spare[n] >= pl.G ? c->spare[n] - pl.G : 0;
		sched__refresh_node(c, n);
	}
	/* its own victims' GPUs are already counted for the team: count only the rest */
	sched__team_add(c, t, own >= need ? 0 : need - own);
	c->gen++;
	if ((rc = sched__add_reservation(c, i, SCHED_RESV_PREEMPTION, c->now, pl.N, pl.G, c->pick)))
		return rc;
	{
		struct sched_pending_out *o = &c->d->pending[i];

		o->reason = SCHED_WAIT_PREEMPTION;
		o->other_job = c->in->running[c->vict[first_new >= 0 ? first_new : 0]].job;
		o->count = chosen;
	}
	*done = true;
	return 0;
fail:
	plan_reset(c, &pl);
	if (!rc && !p->nexclude && !c->od && !c->dry && !c->stopping_only) {
		c->plan_gen[mk] = c->gen;
		if (!c->plan_memo[mk] || p->nodes < c->plan_memo[mk])
			c->plan_memo[mk] = p->nodes;
	}
	return rc;
}

/* ---- reservation ------------------------------------------------------------------------------
 */

static int evt_push(struct ctx *c, int64_t t, int n, int g)
{
	int rc;

	if (g == 0 || !c->in->nodes[n].schedulable)
		return 0;
	if ((rc = sched__grow((void **)&c->evts, &c->cap_evts, c->nevts + 1, sizeof(*c->evts))))
		return rc;
	c->evts[c->nevts++] = (struct evt){t, n, g};
	return 0;
}

static int cmp_evt(const void *a, const void *b)
{
	const struct evt *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->gpus > y->gpus) - (x->gpus < y->gpus);
}

/* Free GPUs at the time of event index upto (exclusive) in c->f; then build c->tmp. */
static void probe_view(struct ctx *c, const struct sched_pending_in *p, int upto)
{
	for (int n = 0; n < c->nn; n++)
		c->f[n] = (int16_t)sched__actual_free(c, n);
	/*
	 * Events of one time may pass through a negative count (a hold's take
	 * sorts before its victim's release): only unschedulable nodes (no
	 * events) are unusable, a count is clamped once all are applied.
	 */
	for (int k = 0; k < upto; k++)
		c->f[c->evts[k].node] = (int16_t)(c->f[c->evts[k].node] + c->evts[k].gpus);
	for (int n = 0; n < c->nn; n++) {
		if (!c->in->nodes[n].schedulable)
			c->f[n] = -1;
		else if (c->f[n] < 0)
			c->f[n] = 0;
		else if (c->f[n] > popc(c->full[n]))
			c->f[n] = (int16_t)popc(c->full[n]);
	}
	for (int k = 0; k < p->nexclude; k++)
		if (p->exclude[k] >= 0 && p->exclude[k] < c->nn)
			c->f[p->exclude[k]] = -1;
	for (int n = 0; c->od && n < c->nn; n++)
		if (spot_node(c, n))
			c->f[n] = -1;
	/* a reservation counts on GPUs only: nodes short of CPUs or memory now are left out */
	for (int k = 0; k < c->nrx; k++)
		c->f[c->rx[k]] = -1;
	sched__view_build(c, &c->tmp, c->f);
}

/*
 * The head job: the earliest time at which the running gangs' limits (and
 * this decision's placements and holds) leave room for it, and the nodes
 * it would get then. *found = whether there is such a time.
 */
int sched__reserve(struct ctx *c, int i, bool *found)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	int N = p->nodes, G = p->gpus_per_node, rc, lo, hi, m = 0;
	int64_t *times = NULL;
	int *upto = NULL;

	int64_t stop = c->now + (c->in->cfg.stop_allowance_s > 0
				     ? c->in->cfg.stop_allowance_s * 1000
				     : 0);

	*found = false;
	c->nevts = 0;
	for (int r = 0; r < c->in->nrunning; r++) {
		const struct sched_running_in *ru = &c->in->running[r];
		/* gangs told to stop hold their GPUs for the stop allowance */
		int64_t t = ru->end_by_ms > c->now ? ru->end_by_ms : c->now;

		if ((c->claimed[r] || (ru->preempting && c->in->cfg.stop_allowance_s > 0)) &&
		    t > stop)
			t = stop;
		/* stopping for a later job, which will take its GPUs (at most its max runtime) */
		if (ru->preempting && !c->claimed[r] && c->owner[r] >= 0 && c->owner[r] != i)
			t = (stop > c->now ? stop : c->now) +
			    c->in->pending[c->owner[r]].max_runtime_s * 1000;

		for (int k = 0; k < ru->nnodes; k++)
			if ((rc = evt_push(c, t, ru->node[k],
					   popc(ru->gpus[k] & c->full[ru->node[k]]))))
				return rc;
	}
	for (int h = 0; h < c->nholds; h++) {
		const struct hold *ho = &c->holds[h];

		for (int x = 0; x < ho->nnodes; x++) {
			int n = c->hold_nodes[ho->first + x];

			/* a hold takes its victims' GPUs when they stop */
			if ((rc = evt_push(c, stop, n, -c->hold_vp[ho->first + x])) ||
			    (rc = evt_push(c, ho->end_ms, n, ho->gpus)))
				return rc;
		}
	}
	for (int k = 0; k < c->d->nplacements; k++) {
		const struct sched_placement *pl = &c->d->placements[k];
		const struct sched_pending_in *pp = &c->in->pending[c->d->placement_pending[k]];

		for (int r = 0; r < pl->nnodes; r++)
			if ((rc = evt_push(c, c->now + pp->max_runtime_s * 1000, pl->node[r],
					   pl->gpus_per_node)))
				return rc;
	}
	if (c->nevts)
		qsort(c->evts, (size_t)c->nevts, sizeof(*c->evts), cmp_evt);
	times = malloc(((size_t)c->nevts + 1) * sizeof(*times));
	upto = malloc(((size_t)c->nevts + 1) * sizeof(*upto));
	if (!times || !upto) {
		rc = TY_ENOMEM;
		goto out;
	}
	/* distinct times; the state at times[j] includes every event up to upto[j] */
	times[m] = c->now;
	upto[m] = 0;
	for (int k = 0; k < c->nevts; k++) {
		if (c->evts[k].t > times[m]) {
			m++;
			times[m] = c->evts[k].t;
		}
		upto[m] = k + 1;
	}
	m++;
	lo = 0;
	hi = m - 1;
	c->d->stats.reservation_probes++;
	probe_view(c, p, upto[hi]);
	if (!sched__fit(c, &c->tmp, N, G, p->required)) {
		rc = 0;
		goto out;
	}
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		c->d->stats.reservation_probes++;
		probe_view(c, p, upto[mid]);
		if (sched__fit(c, &c->tmp, N, G, p->required))
			hi = mid;
		else
			lo = mid + 1;
	}
	probe_view(c, p, upto[lo]);
	if (!sched__fit(c, &c->tmp, N, G, p->required)) {
		rc = 0; /* cannot happen: fit is monotone in time */
		goto out;
	}
	c->resv_ms = times[lo];
	/* long view: reserved nodes keep what the head needs at resv_ms */
	for (int n = 0; n < c->nn; n++)
		c->spare[n] = NOSPARE;
	for (int k = 0; k < N; k++) {
		int n = c->pick[k];

		c->spare[n] = c->tmp.free[n] - G;
	}
	sched__view_copy(&c->lng, &c->main, c);
	if (c->nspot)
		sched__view_copy(&c->lng_od, &c->main_od, c);
	c->have_resv = true;
	for (int k = 0; k < N; k++)
		sched__refresh_node(c, c->pick[k]);
	if ((rc = sched__add_reservation(c, i, SCHED_RESV_HEAD, c->resv_ms, N, G, c->pick)))
		goto out;
	*found = true;
	rc = 0;
out:
	free(times);
	free(upto);
	return rc;
}

/* ---- the decision ------------------------------------------------------------------------------
 */

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

static bool pending_valid(const struct ctx *c, const struct sched_pending_in *p)
{
	return p->team >= 0 && p->team < c->in->nteams && p->nodes >= 1 && p->gpus_per_node >= 0 &&
	       p->gpus_per_node <= SCHED_MAX_GPUS && (unsigned)p->cls < SCHED_CLASS_COUNT &&
	       (unsigned)p->required < SCHED_TOPO_COUNT && p->max_runtime_s > 0 &&
	       p->cpus_per_node >= 0 && p->memory_mb_per_node >= 0;
}

void sched__nodes_reason(struct ctx *c, struct sched_pending_out *o,
			 const struct sched_pending_in *p)
{
	int cnt = view_main(c)->cge[p->gpus_per_node];

	o->count = cnt;
	o->level = p->nodes > 1 ? p->required : SCHED_TOPO_NONE;
	o->reason = o->level && cnt >= p->nodes ? SCHED_WAIT_TOPOLOGY : SCHED_WAIT_NODES;
}

void sched__set_excluded(struct ctx *c, const struct sched_pending_in *p, bool on)
{
	for (int k = 0; k < p->nexclude; k++) {
		int n = p->exclude[k];

		if (n < 0 || n >= c->nn)
			continue;
		if (on) {
			view_set(c, view_main(c), n, -1);
			if (c->have_resv)
				view_set(c, view_lng(c), n, -1);
		} else {
			sched__refresh_node(c, n);
		}
	}
}

/* ---- CPUs and memory ---------------------------------------------------------------------- */

/* Whether node n can never give p its CPUs (QUOTA_CPUS) or memory: its allocatable is smaller. */
static bool res_never(const struct ctx *c, const struct sched_pending_in *p, int n, int res)
{
	const struct sched_node_in *nd = &c->in->nodes[n];

	if (res == QUOTA_CPUS)
		return nd->cpus > 0 && nd->cpus < p->cpus_per_node;
	return nd->memory_mb > 0 && nd->memory_mb < p->memory_mb_per_node;
}

/* Whether node n lacks p's CPUs (QUOTA_CPUS) or memory now. */
static bool res_short(const struct ctx *c, const struct sched_pending_in *p, int n, int res)
{
	/* nothing asked is never short, even on a node over-committed by a smaller register */
	if (res == QUOTA_CPUS)
		return p->cpus_per_node > 0 && c->cpu_left[n] < p->cpus_per_node;
	return p->memory_mb_per_node > 0 && c->mem_left[n] < p->memory_mb_per_node;
}

/* c->rx = the schedulable nodes short of p's CPUs or memory now. */
void sched__res_scan(struct ctx *c, const struct sched_pending_in *p)
{
	c->nrx = 0;
	/* the common case, every node has room: no pass over the nodes */
	if ((p->cpus_per_node <= 0 || p->cpus_per_node <= c->cpu_min) &&
	    (p->memory_mb_per_node <= 0 || p->memory_mb_per_node <= c->mem_min))
		return;
	for (int k = 0; k < c->nlim; k++) {
		int n = c->lim[k];

		if (c->in->nodes[n].schedulable &&
		    (res_short(c, p, n, QUOTA_CPUS) || res_short(c, p, n, QUOTA_MEMORY_MB)))
			c->rx[c->nrx++] = n;
	}
}

/* Leave c->rx out of the views (on), or bring them back (off; refresh_node restores). */
void sched__res_exclude(struct ctx *c, bool on)
{
	for (int k = 0; k < c->nrx; k++) {
		int n = c->rx[k];

		if (on) {
			view_set(c, view_main(c), n, -1);
			if (c->have_resv)
				view_set(c, view_lng(c), n, -1);
		} else {
			sched__refresh_node(c, n);
		}
	}
}

/*
 * For a job that fits the idle cluster's GPUs: whether it also fits once
 * the nodes whose allocatable CPUs (res = QUOTA_CPUS), memory
 * (QUOTA_MEMORY_MB) or either (-1) are too small are left out.
 */
bool sched__could_fit_res(struct ctx *c, const struct sched_pending_in *p, int res)
{
	bool ok, learn = c->nolearn, any = false;

	for (int k = 0; k < c->nlim; k++) {
		int n = c->lim[k];

		if (c->cap.free[n] >= 0 &&
		    ((res != QUOTA_MEMORY_MB && res_never(c, p, n, QUOTA_CPUS)) ||
		     (res != QUOTA_CPUS && res_never(c, p, n, QUOTA_MEMORY_MB)))) {
			view_set(c, &c->cap, n, -1);
			any = true;
		}
	}
	if (!any)
		return true;
	c->nolearn = true; /* the shape memos are the whole capacity's */
	ok = sched__fit(c, &c->cap, p->nodes, p->gpus_per_node, p->required);
	c->nolearn = learn;
	for (int k = 0; k < c->nlim; k++) {
		int n = c->lim[k];

		if (c->in->nodes[n].schedulable)
			view_set(c, &c->cap, n, popc(c->full[n]));
	}
	return ok;
}

/*
 * Fill o for a job that CPUs or memory keep off nodes: NEVER_FITS_* when
 * `never` (allocatable too small), else WAIT_* (not free now).
 */
void sched__res_reason(struct ctx *c, struct sched_pending_out *o, const struct sched_pending_in *p,
		       int res, bool never)
{
	int64_t best = 0;
	int cnt = 0;

	for (int n = 0; n < c->nn; n++) {
		const struct sched_node_in *nd = &c->in->nodes[n];
		int64_t have = never ? (res == QUOTA_CPUS ? nd->cpus : nd->memory_mb)
				     : (res == QUOTA_CPUS ? c->cpu_left[n] : c->mem_left[n]);
		bool reports = res == QUOTA_CPUS ? nd->cpus > 0 : nd->memory_mb > 0;

		if (!nd->schedulable)
			continue;
		if (!reports) {
			cnt++;
			continue;
		}
		if (have > best)
			best = have;
		if (have >= (res == QUOTA_CPUS ? p->cpus_per_node : p->memory_mb_per_node))
			cnt++;
	}
	if (res == QUOTA_CPUS)
		o->reason = never ? SCHED_NEVER_FITS_CPUS : SCHED_WAIT_CPUS;
	else
		o->reason = never ? SCHED_NEVER_FITS_MEMORY : SCHED_WAIT_MEMORY;
	o->used = res == QUOTA_CPUS ? p->cpus_per_node : p->memory_mb_per_node;
	o->limit = best > 0 ? best : 0;
	o->count = cnt;
	o->level = SCHED_TOPO_NONE;
}

/*
 * Whether the job fits the main view (its own exclusions applied) with only
 * the nodes of c->rx short of `res` (-1: none of them) left out. The views
 * are back to c->rx left out on return.
 */
bool sched__res_fits_without(struct ctx *c, const struct sched_pending_in *p, int res)
{
	bool ok;

	sched__res_exclude(c, false);
	if (p->nexclude)
		sched__set_excluded(c, p, true);
	for (int k = 0; res >= 0 && k < c->nrx; k++)
		if (res_short(c, p, c->rx[k], res))
			view_set(c, view_main(c), c->rx[k], -1);
	ok = sched__fit(c, view_main(c), p->nodes, p->gpus_per_node, p->required);
	sched__res_exclude(c, false);
	if (p->nexclude)
		sched__set_excluded(c, p, true);
	sched__res_exclude(c, true);
	return ok;
}

/*
 * A job that did not fit with c->rx left out: if it fits the GPUs free now
 * without leaving them out, CPUs or memory are what it waits for; say which.
 * Returns whether o was filled. The views are as before on return.
 */
bool sched__res_wait_reason(struct ctx *c, struct sched_pending_out *o,
			    const struct sched_pending_in *p)
{
	bool mem_only;

	if (!c->nrx || !sched__res_fits_without(c, p, -1))
		return false;
	/* memory when it alone stops it; else CPUs (they do, or it takes both) */
	mem_only = sched__res_fits_without(c, p, QUOTA_CPUS) &&
		   !sched__res_fits_without(c, p, QUOTA_MEMORY_MB);
	sched__res_reason(c, o, p, mem_only ? QUOTA_MEMORY_MB : QUOTA_CPUS, false);
	return true;
}

static int decide_one(struct ctx *c, int i)
{
	const struct sched_pending_in *p = &c->in->pending[i];
	struct sched_pending_out *o = &c->d->pending[i];
	int t = p->team, N = p->nodes, G = p->gpus_per_node, rc = 0;
	int64_t need = (int64_t)N * G;
	bool lng, placed = false, done = false, fitted = false, narrowed = false;
	struct view *v;
	enum quota_verdict qv;
	struct quota_vec charge;
	int capped;

	c->nrx = 0;
	c->od = c->nspot > 0 && p->spot != SCHED_SPOT_ANY;
	if (!pending_valid(c, p)) {
		o->reason = SCHED_INVALID;
		return 0;
	}
	charge = quota_job_charge(N, p->cpus_per_node, p->memory_mb_per_node);
	lng = c->have_resv && c->now + p->max_runtime_s * 1000 > c->resv_ms;
	v = lng ? view_lng(c) : view_main(c);
	qv = quota_check(&c->qt[t], sched__cohort_of(c, t), need);
	if (p->not_before_ms > c->now) {
		/* retry backoff: not tried, takes nothing (docs/scheduling.md) */
		o->reason = SCHED_WAIT_BACKOFF;
		o->at_ms = p->not_before_ms;
		return 0;
	}
	if (qv == QUOTA_OK && !sched__could_fit(c, N, G, p->required, false)) {
		o->reason = SCHED_NEVER_FITS;
		o->count = N;
		o->level = N > 1 ? p->required : SCHED_TOPO_NONE;
		return 0;
	}
	if (qv == QUOTA_OK && c->nlim && (p->cpus_per_node > 0 || p->memory_mb_per_node > 0) &&
	    !sched__could_fit_res(c, p, -1)) {
		/* CPUs first when they alone are enough to keep it off every fitting node */
		sched__res_reason(
		    c, o, p, sched__could_fit_res(c, p, QUOTA_CPUS) ? QUOTA_MEMORY_MB : QUOTA_CPUS,
		    true);
		return 0;
	}
	if (qv == QUOTA_OK && (p->nexclude || c->od)) {
		int nx;

		if (!sched__could_fit_excluding(c, p, &nx)) {
			o->reason = SCHED_NEVER_FITS_EXCLUDED;
			o->count = nx;
			o->level = N > 1 ? p->required : SCHED_TOPO_NONE;
			return 0;
		}
	}
	/* CPU and memory caps are plain ceilings: nothing is preempted for them */
	if ((capped = quota_caps_check(&c->caps[t], &charge)) >= 0) {
		o->reason = capped == QUOTA_CPUS ? SCHED_WAIT_QUOTA_CPUS : SCHED_WAIT_QUOTA_MEMORY;
		o->team = t;
		o->used = c->caps[t].used.v[capped];
		o->limit = c->caps[t].limit.v[capped];
		o->need = charge.v[capped];
		return 0;
	}
	sched__res_scan(c, p);
	narrowed = p->nexclude || c->nrx;
	if (p->nexclude)
		sched__set_excluded(c, p, true);
	if (c->nrx)
		sched__res_exclude(c, true);
	if (narrowed)
		c->nolearn = true;
	if (qv != QUOTA_OK) {
		/* only its own lower classes can make quota room */
		int64_t deficit =
		    c->qt[t].used + need - quota_admissible(&c->qt[t], sched__cohort_of(c, t));

		if (c->d->head < 0 || c->in->cfg.backfill) {
			if ((rc = sched__try_preempt(c, i, lng, v, deficit > 0 ? deficit : 1,
						     &done)) ||
			    done)
				goto out;
		}
		o->team = t;
		o->count = (int)(need > INT_MAX ? INT_MAX : need);
		switch (qv) {
		case QUOTA_OVER_NOMINAL:
			o->reason = SCHED_WAIT_NOMINAL;
			o->used = c->qt[t].used;
			o->limit = c->qt[t].nominal;
			break;
		case QUOTA_OVER_BORROW_LIMIT:
			o->reason = SCHED_WAIT_BORROW_LIMIT;
			o->used = quota_borrowed(&c->qt[t]);
			o->limit = c->qt[t].borrowing_limit;
			break;
		default:
			o->reason = SCHED_WAIT_COHORT;
			o->used = c->qt[t].used;
			o->limit = quota_admissible(&c->qt[t], sched__cohort_of(c, t));
			break;
		}
		goto out;
	}
	/*
	 * Quota the head needs is kept from every job behind it, short or
	 * long: a head that became quota-blocked would lose its place.
	 */
	if (c->have_resv && !sched__resv_quota_ok(c, t, need, &charge)) {
		o->reason = SCHED_WAIT_RESERVED;
		o->other_job = c->in->pending[c->d->head].job;
		o->at_ms = c->resv_ms;
		goto out;
	}
	if (c->d->head >= 0 && !c->in->cfg.backfill) {
		if ((rc = sched__try_preempt(c, i, lng, v, 0, &done)) || done)
			goto out;
		o->reason = SCHED_WAIT_BEHIND;
		o->other_job = c->in->pending[c->d->head].job;
		goto out;
	}
	if (p->nheld == N && sched__held_fits(c, p, v, NULL, false)) {
		/* its victims are gone: it starts on the nodes held for it */
		fitted = true;
	} else if (p->nheld == N && sched__victims_stopping(c, i)) {
		/* keep waiting for the held nodes rather than start elsewhere */
		c->stopping_only = true;
		rc = sched__try_preempt(c, i, lng, v, 0, &done);
		c->stopping_only = false;
		if (rc || done)
			goto out;
	}
	if (fitted) {
		/* placed below */
	} else if (sched__fits_quickly_no(v, N, G, p->required) && !narrowed) {
		c->d->stats.fast_rejects++;
	} else {
		if (c->d->head >= 0) {
			if (c->scan_left == 0) {
				o->reason = SCHED_WAIT_SCAN_LIMIT;
				o->count = c->in->cfg.backfill_max_scan > 0
					       ? c->in->cfg.backfill_max_scan
					       : DEFAULT_SCAN;
				goto out;
			}
			if (c->scan_left > 0)
				c->scan_left--;
		}
		c->d->stats.fit_attempts++;
		fitted = sched__fit(c, v, N, G, p->required);
	}
	if (fitted) {
		if ((rc = sched__place(c, i, lng, &placed)))
			goto out;
		if (placed) {
			o->reason = SCHED_PLACED;
		} else {
			o->reason = SCHED_WAIT_PORT;
		}
		goto out;
	}
	if ((rc = sched__try_preempt(c, i, lng, v, 0, &done)) || done)
		goto out;
	/* reclaim would make room but for protected borrowing gangs: say so */
	if (c->tier0[i] && c->qt[t].used + need <= c->qt[t].nominal) {
		bool blocked = false;

		c->dry = true;
		rc = sched__try_preempt(c, i, lng, v, 0, &blocked);
		c->dry = false;
		if (rc)
			goto out;
	}
	if (c->d->head < 0 && c->resv_attempts > 0) {
		bool found = false;

		c->resv_attempts--;
		if (c->nrx)
			sched__res_exclude(c, false);
		if (p->nexclude)
			sched__set_excluded(c, p, false);
		rc = sched__reserve(c, i, &found);
		if (p->nexclude)
			sched__set_excluded(c, p, true);
		if (c->nrx)
			sched__res_exclude(c, true);
		if (rc)
			goto out;
		if (!sched__res_wait_reason(c, o, p))
			sched__nodes_reason(c, o, p);
		if (found) {
			c->d->head = i;
			c->head_team = t;
			c->head_need = need;
			c->head_charge = charge;
			c->head_borrows = c->qt[t].used + need > c->qt[t].nominal;
			o->reason = SCHED_WAIT_HEAD;
			o->at_ms = c->resv_ms;
		}
		goto out;
	}
	if (lng && !sched__fits_quickly_no(view_main(c), N, G, p->required) &&
	    sched__fit(c, view_main(c), N, G, p->required)) {
		/* it would fit but for the reservation */
		o->protected_job = 0;
		o->protected_count = 0;
		o->protected_until_ms = 0;
		o->reason = SCHED_WAIT_RESERVED;
		o->other_job = c->in->pending[c->d->head].job;
		o->at_ms = c->resv_ms;
		goto out;
	}
	if (!sched__res_wait_reason(c, o, p))
		sched__nodes_reason(c, o, p);
out:
	if (c->nrx)
		sched__res_exclude(c, false);
	if (p->nexclude)
		sched__set_excluded(c, p, false);
	if (narrowed)
		c->nolearn = false;
	c->nrx = 0;
	return rc;
}

static int validate(const struct sched_input *in, struct ty_err *err)
{
	if (in->nnodes < 0 || in->nteams < 0 || in->nrunning < 0 || in->npending < 0)
		return ty_err_set(err, TY_EINVAL, "negative count in scheduler input");
	if ((in->nnodes && !in->nodes) || (in->nteams && !in->teams) ||
	    (in->nrunning && !in->running) || (in->npending && !in->pending))
		return ty_err_set(err, TY_EINVAL, "missing array in scheduler input");
	if (in->cfg.port_lo > in->cfg.port_hi || in->cfg.port_lo < 1)
		return ty_err_set(err, TY_EINVAL, "bad rendezvous port range %d-%d",
				  in->cfg.port_lo, in->cfg.port_hi);
	for (int r = 0; r < in->nrunning; r++) {
		const struct sched_running_in *ru = &in->running[r];

		if (ru->team < 0 || ru->team >= in->nteams)
			return ty_err_set(err, TY_EINVAL, "running job %lld has team index %d",
					  (long long)ru->job, ru->team);
		if (ru->nnodes < 0 || (ru->nnodes && (!ru->node || !ru->gpus)))
			return ty_err_set(err, TY_EINVAL, "running job %lld has no node list",
					  (long long)ru->job);
		for (int k = 0; k < ru->nnodes; k++)
			if (ru->node[k] < 0 || ru->node[k] >= in->nnodes)
				return ty_err_set(err, TY_EINVAL,
						  "running job %lld has node index %d",
						  (long long)ru->job, ru->node[k]);
	}
	return 0;
}

static void ctx_free(struct ctx *c)
{
	free(c->full);
	free(c->busy);
	free(c->spare);
	free(c->ndom);
	if (c->ports)
		for (int n = 0; n < c->nn; n++)
			free(c->ports[n].v);
	free(c->ports);
	free(c->dom_anc);
	free(c->dom_off);
	free(c->dom_nodes);
	sched__view_release(&c->main);
	sched__view_release(&c->lng);
	sched__view_release(&c->cap);
	sched__view_release(&c->tmp);
	sched__view_release(&c->main_od);
	sched__view_release(&c->lng_od);
	sched__view_release(&c->cap_od);
	free(c->qt);
	free(c->cohort);
	free(c->coh);
	free(c->reclaim_used);
	free(c->tier0);
	free(c->runs_off);
	free(c->runs);
	free(c->run_gpus);
	free(c->claimed);
	free(c->holds);
	free(c->hold_nodes);
	free(c->hold_vp);
	free(c->pick);
	free(c->extra);
	free(c->touched);
	free(c->dcount);
	free(c->team_freed);
	free(c->cand);
	free(c->vict);
	free(c->vict_keep);
	free(c->vict_use);
	free(c->preempting);
	free(c->owner);
	free(c->lower);
	free(c->tmark);
	free(c->f);
	free(c->evts);
	free(c->plan_memo);
	free(c->plan_gen);
	free(c->cpu_left);
	free(c->mem_left);
	free(c->lim);
	free(c->rx);
	free(c->caps);
}

int sched__setup_teams(struct ctx *c, const struct sched_input *in)
{
	int nt = in->nteams;
	struct cname *cn = calloc((size_t)nt + 1, sizeof(*cn));
	int ncn = 0;

	c->qt = calloc((size_t)nt + 1, sizeof(*c->qt));
	c->cohort = calloc((size_t)nt + 1, sizeof(*c->cohort));
	c->coh = calloc((size_t)nt + 1, sizeof(*c->coh));
	c->reclaim_used = calloc((size_t)nt + 1, sizeof(*c->reclaim_used));
	c->team_freed = calloc((size_t)nt + 1, sizeof(*c->team_freed));
	c->runs_off = calloc((size_t)nt + 2, sizeof(*c->runs_off));
	if (!cn || !c->qt || !c->cohort || !c->coh || !c->reclaim_used || !c->team_freed ||
	    !c->runs_off) {
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

int sched_decide(struct sched_decisions **out, const struct sched_input *in, struct ty_err *err)
{
	struct ctx c = {0};
	struct sched_decisions *d = NULL;
	struct okey *keys = NULL, *ktmp = NULL;
	double *fs = NULL;
	int *frank = NULL;
	double tot_u = 0, tot_w = 0;
	int rc;

	*out = NULL;
	if ((rc = validate(in, err)))
		return rc;
	c.in = in;
	c.now = in->now_ms;
	c.nn = in->nnodes;
	c.words = (c.nn + 63) / 64 + 1;
	c.swords = (c.words + 63) / 64 + 1;
	c.scan_left = in->cfg.backfill_max_scan == 0  ? DEFAULT_SCAN
		      : in->cfg.backfill_max_scan < 0 ? -1
						      : in->cfg.backfill_max_scan;
	c.plans_left = in->cfg.max_preemption_plans == 0  ? DEFAULT_PLANS
		       : in->cfg.max_preemption_plans < 0 ? -1
							  : in->cfg.max_preemption_plans;
	c.dry_left = c.plans_left;
	c.exact_left = SCHED_VICTIM_BUDGET_CYCLE;
	rc = TY_ENOMEM;
	if (!(d = calloc(1, sizeof(*d))))
		goto out;
	c.d = d;
	d->head = -1;
	d->npending = in->npending;
	d->nteams = in->nteams;
	d->pending = calloc((size_t)in->npending + 1, sizeof(*d->pending));
	d->order = calloc((size_t)in->npending + 1, sizeof(*d->order));
	d->teams = calloc((size_t)in->nteams + 1, sizeof(*d->teams));
	c.full = calloc((size_t)c.nn + 1, sizeof(*c.full));
	c.busy = calloc((size_t)c.nn + 1, sizeof(*c.busy));
	c.spare = calloc((size_t)c.nn + 1, sizeof(*c.spare));
	c.ports = calloc((size_t)c.nn + 1, sizeof(*c.ports));
	c.pick = calloc((size_t)c.nn + 1, sizeof(*c.pick));
	c.extra = calloc((size_t)c.nn + 1, sizeof(*c.extra));
	c.touched = calloc((size_t)c.nn + 1, sizeof(*c.touched));
	c.f = calloc((size_t)c.nn + 1, sizeof(*c.f));
	c.run_gpus = calloc((size_t)in->nrunning + 1, sizeof(*c.run_gpus));
	c.claimed = calloc((size_t)in->nrunning + 1, sizeof(*c.claimed));
	c.runs = calloc((size_t)in->nrunning + 1, sizeof(*c.runs));
	c.cand = calloc((size_t)in->nrunning + 1, sizeof(*c.cand));
	c.vict = calloc((size_t)in->nrunning + 1, sizeof(*c.vict));
	c.vict_keep = calloc((size_t)in->nrunning + 1, sizeof(*c.vict_keep));
	c.vict_use = calloc((size_t)in->nrunning + 1, sizeof(*c.vict_use));
	c.preempting = calloc((size_t)in->nrunning + 1, sizeof(*c.preempting));
	c.owner = calloc((size_t)in->nrunning + 1, sizeof(*c.owner));
	c.lower = calloc((size_t)in->nteams * SCHED_CLASS_COUNT + 1, sizeof(*c.lower));
	c.tmark = calloc((size_t)c.nn + 1, sizeof(*c.tmark));
	c.tier0 = calloc((size_t)in->npending + 1, sizeof(*c.tier0));
	c.cpu_left = calloc((size_t)c.nn + 1, sizeof(*c.cpu_left));
	c.mem_left = calloc((size_t)c.nn + 1, sizeof(*c.mem_left));
	c.lim = calloc((size_t)c.nn + 1, sizeof(*c.lim));
	c.rx = calloc((size_t)c.nn + 1, sizeof(*c.rx));
	c.caps = calloc((size_t)in->nteams + 1, sizeof(*c.caps));
	c.resv_attempts = 8;
	keys = calloc((size_t)in->npending + 1, sizeof(*keys));
	ktmp = calloc((size_t)in->npending + 1, sizeof(*ktmp));
	fs = calloc((size_t)in->nteams + 1, sizeof(*fs));
	frank = calloc((size_t)in->nteams + 1, sizeof(*frank));
	if (!d->pending || !d->order || !d->teams || !c.full || !c.busy || !c.spare || !c.ports ||
	    !c.pick || !c.extra || !c.touched || !c.f || !c.run_gpus || !c.claimed || !c.runs ||
	    !c.cand || !c.vict || !c.vict_keep || !c.vict_use || !c.preempting || !c.owner || !c.lower || !c.tmark || !c.tier0 || !c.cpu_left || !c.mem_left || !c.lim || !c.rx || !c.caps || !keys ||
	    !ktmp || !fs || !frank)
		goto out;
	if ((rc = sched__setup_teams(&c, in)))
		goto out;
	rc = TY_ENOMEM;
	{
		size_t nm = (size_t)in->nteams * SCHED_CLASS_COUNT * SCHED_TOPO_COUNT * 2 * NG + 1;

		c.plan_memo = calloc(nm, sizeof(*c.plan_memo));
		c.plan_gen = calloc(nm, sizeof(*c.plan_gen));
		if (!c.plan_memo || !c.plan_gen)
			goto out;
	}
	if ((rc = sched__build_domains(&c)))
		goto out;
	rc = TY_ENOMEM;
	c.dcount = calloc((size_t)c.ndoms + 2, sizeof(*c.dcount));
	if (!c.dcount || sched__view_alloc(&c.main, &c) || sched__view_alloc(&c.lng, &c) ||
	    sched__view_alloc(&c.cap, &c) || sched__view_alloc(&c.tmp, &c))
		goto out;
	for (int n = 0; n < c.nn; n++)
		c.nspot += in->nodes[n].spot && in->nodes[n].schedulable;
	if (c.nspot && (sched__view_alloc(&c.main_od, &c) || sched__view_alloc(&c.lng_od, &c) ||
			sched__view_alloc(&c.cap_od, &c)))
		goto out;

	/* nodes and what the running gangs hold */
	for (int n = 0; n < c.nn; n++) {
		int g = clamp_gpus(in->nodes[n].gpus);

		c.full[n] = g >= 64 ? ~0ull : (1ull << g) - 1;
		c.busy[n] = in->nodes[n].busy & c.full[n];
		c.spare[n] = NOSPARE;
		c.cpu_left[n] = in->nodes[n].cpus > 0 ? in->nodes[n].cpus : NOLIMIT;
		c.mem_left[n] = in->nodes[n].memory_mb > 0 ? in->nodes[n].memory_mb : NOLIMIT;
		if (in->nodes[n].cpus > 0 || in->nodes[n].memory_mb > 0)
			c.lim[c.nlim++] = n;
	}
	for (int t = 0; t < in->nteams; t++) {
		c.caps[t].limit.v[QUOTA_CPUS] = in->teams[t].max_cpus > 0 ? in->teams[t].max_cpus : -1;
		c.caps[t].limit.v[QUOTA_MEMORY_MB] =
		    in->teams[t].max_memory_mb > 0 ? in->teams[t].max_memory_mb : -1;
	}
	for (int r = 0; r < in->nrunning; r++) {
		const struct sched_running_in *ru = &in->running[r];

		struct quota_vec ch =
		    quota_job_charge(ru->nnodes, ru->cpus_per_node, ru->memory_mb_per_node);

		for (int k = 0; k < ru->nnodes; k++) {
			int n = ru->node[k];

			c.busy[n] |= ru->gpus[k] & c.full[n];
			c.run_gpus[r] += popc(ru->gpus[k]);
			/* stopping gangs too: they hold their CPUs and memory until gone */
			if (c.cpu_left[n] != NOLIMIT && ru->cpus_per_node > 0)
				c.cpu_left[n] -= ru->cpus_per_node;
			if (c.mem_left[n] != NOLIMIT && ru->memory_mb_per_node > 0)
				c.mem_left[n] -= ru->memory_mb_per_node;
		}
		quota_vec_add(&c.caps[ru->team].used, &ch, +1);
		c.qt[ru->team].used += c.run_gpus[r];
		c.runs_off[ru->team + 1]++;
		if (ru->preempting) {
			c.preempting[c.npreempting++] = r;
			c.reclaim_used[ru->team] -= c.run_gpus[r];
		} else if (ru->preemptible)
			for (int cl = 0; cl < SCHED_CLASS_COUNT && cl < (int)ru->cls; cl++)
				c.lower[(size_t)ru->team * SCHED_CLASS_COUNT + cl]++;
	}
	for (int t = 0; t < in->nteams; t++) {
		c.runs_off[t + 1] += c.runs_off[t];
		c.reclaim_used[t] += c.qt[t].used; /* minus gangs already stopping, below */
		if (c.cohort[t] >= 0)
			quota_cohort_account(&c.coh[c.cohort[t]], &c.qt[t], +1);
	}
	{
		int *fill = calloc((size_t)in->nteams + 1, sizeof(*fill));

		if (!fill)
			goto out;
		for (int r = 0; r < in->nrunning; r++) {
			int t = in->running[r].team;

			c.runs[c.runs_off[t] + fill[t]++] = r;
		}
		free(fill);
		for (int t = 0; t < in->nteams; t++)
			qsort_r(c.runs + c.runs_off[t], (size_t)(c.runs_off[t + 1] - c.runs_off[t]),
				sizeof(*c.runs), sched__cmp_victim, &c);
	}
	/* which pending job each stopping gang is for (sorted ids, one pass over pending) */
	for (int r = 0; r < in->nrunning; r++)
		c.owner[r] = -1;
	if (c.npreempting) {
		struct okey *pf = calloc((size_t)c.npreempting * 2, sizeof(*pf));
		int m = 0;

		rc = TY_ENOMEM;
		if (!pf)
			goto out;
		for (int k = 0; k < c.npreempting; k++)
			if (in->running[c.preempting[k]].preempted_for) {
				pf[m].c = sched__bias(in->running[c.preempting[k]].preempted_for);
				pf[m].idx = c.preempting[k];
				m++;
			}
		sched__okey_sort(pf, pf + c.npreempting, m);
		for (int i = 0; i < in->npending && m; i++) {
			uint64_t id = sched__bias(in->pending[i].job);
			int lo = 0, hi = m;

			while (lo < hi) {
				int mid = (lo + hi) / 2;

				if (pf[mid].c < id)
					lo = mid + 1;
				else
					hi = mid;
			}
			for (; lo < m && pf[lo].c == id; lo++)
				c.owner[pf[lo].idx] = i;
		}
		free(pf);
	}
	c.cpu_min = c.mem_min = NOLIMIT;
	for (int n = 0; n < c.nn; n++) {
		c.f[n] = (int16_t)sched__actual_free(&c, n);
		if (!in->nodes[n].schedulable)
			continue;
		if (c.cpu_left[n] < c.cpu_min)
			c.cpu_min = c.cpu_left[n];
		if (c.mem_left[n] < c.mem_min)
			c.mem_min = c.mem_left[n];
	}
	sched__view_build(&c, &c.main, c.f);
	if (c.nspot) {
		for (int n = 0; n < c.nn; n++)
			if (spot_node(&c, n))
				c.f[n] = -1;
		sched__view_build(&c, &c.main_od, c.f);
	}

	/* fair share and the order */
	for (int t = 0; t < in->nteams; t++) {
		double w = in->teams[t].weight > 0 ? in->teams[t].weight : 1;

		tot_u += in->teams[t].usage > 0 ? in->teams[t].usage : 0;
		tot_w += w;
	}
	for (int t = 0; t < in->nteams; t++) {
		double w = in->teams[t].weight > 0 ? in->teams[t].weight : 1;
		double u = in->teams[t].usage > 0 ? in->teams[t].usage : 0;

		d->teams[t].fairshare = quota_fairshare(u, tot_u, w, tot_w);
		d->teams[t].u = tot_u > 0 ? u / tot_u : 0;
		d->teams[t].s = tot_w > 0 ? w / tot_w : 0;
	}
	/* teams ranked by F, highest first; equal F, equal rank; unknown teams last */
	for (int t = 0; t < in->nteams; t++)
		fs[t] = d->teams[t].fairshare;
	qsort(fs, (size_t)in->nteams, sizeof(*fs), sched__cmp_double_desc);
	for (int t = 0; t < in->nteams; t++) {
		int lo = 0, hi = in->nteams - 1;

		while (lo < hi) {
			int mid = (lo + hi) / 2;

			if (fs[mid] > d->teams[t].fairshare)
				lo = mid + 1;
			else
				hi = mid;
		}
		frank[t] = lo;
	}
	for (int i = 0; i < in->npending; i++) {
		const struct sched_pending_in *p = &in->pending[i];
		bool team_ok = p->team >= 0 && p->team < in->nteams;
		uint64_t cls =
		    (unsigned)p->cls < SCHED_CLASS_COUNT ? (uint64_t)p->cls : SCHED_CLASS_COUNT;
		uint64_t rank = team_ok ? (uint64_t)frank[p->team] : (uint64_t)in->nteams;
		/* priority clamped to ±2^23, higher first */
		int64_t pr = p->priority > 0x7fffff    ? 0x7fffff
			     : p->priority < -0x800000 ? -0x800000
						       : p->priority;

		keys[i].a = cls << 60 | (rank & 0xfffffffull) << 24 | (uint64_t)(0x7fffff - pr);
		keys[i].b = sched__bias(p->submit_ms);
		keys[i].c = sched__bias(p->job);
		keys[i].idx = i;
		d->pending[i].team = p->team;
		d->pending[i].fairshare = team_ok ? d->teams[p->team].fairshare : 0;
		if (team_ok)
			d->teams[p->team].pending++;
	}
	sched__okey_sort(keys, ktmp, in->npending);
	/*
	 * Two tiers (docs/scheduling.md §1): first every job that its team can
	 * run within its nominal quota, then the jobs that must borrow, each
	 * tier in the order above. A team's first-tier jobs are a greedy pick
	 * in that order: its GPUs in use plus the jobs picked so far plus this
	 * one within nominal. Borrowed capacity goes only to work no team needs
	 * within its own quota, so a reclaim victim (whose team borrows) never
	 * goes ahead of the job it was preempted for.
	 */
	{
		int64_t *acc = calloc((size_t)in->nteams + 1, sizeof(*acc));
		int *stop_cls = calloc((size_t)in->nteams + 1, sizeof(*stop_cls));
		int n0 = 0, n1 = 0;

		rc = TY_ENOMEM;
		if (!acc || !stop_cls) {
			free(acc);
			free(stop_cls);
			goto out;
		}
		for (int t = 0; t < in->nteams; t++) {
			acc[t] = c.qt[t].used;
			stop_cls[t] = SCHED_CLASS_COUNT;
		}
		for (int k = 0; k < in->npending; k++) {
			int i = keys[k].idx;
			const struct sched_pending_in *p = &in->pending[i];
			int64_t need;

			if (!pending_valid(&c, p))
				continue;
			need = (int64_t)p->nodes * p->gpus_per_node;
			/*
			 * Below a class with a second-tier job of the same team nothing
			 * of that team is first-tier: such a job may preempt the lower
			 * class for quota, which must not come back ahead of it.
			 */
			if ((int)p->cls <= stop_cls[p->team] &&
			    acc[p->team] + need <= c.qt[p->team].nominal) {
				acc[p->team] += need;
				c.tier0[i] = 1;
				d->pending[i].within_nominal = true;
			} else if ((int)p->cls < stop_cls[p->team]) {
				stop_cls[p->team] = (int)p->cls;
			}
		}
		free(acc);
		free(stop_cls);
		for (int k = 0; k < in->npending; k++)
			n1 += !c.tier0[keys[k].idx];
		n1 = in->npending - n1; /* first-tier count: second tier starts there */
		for (int k = 0; k < in->npending; k++) {
			if (c.tier0[keys[k].idx])
				ktmp[n0++] = keys[k];
			else
				ktmp[n1++] = keys[k];
		}
		memcpy(keys, ktmp, (size_t)in->npending * sizeof(*keys));
	}
	for (int k = 0; k < in->npending; k++) {
		d->order[k] = keys[k].idx;
		d->pending[keys[k].idx].position = k;
	}

	for (int k = 0; k < in->npending; k++) {
		/* the input is read in queue order: fetch ahead what the next jobs touch */
		if (k + 8 < in->npending) {
			__builtin_prefetch(&in->pending[d->order[k + 8]]);
			__builtin_prefetch(&d->pending[d->order[k + 8]], 1);
		}
		if ((rc = decide_one(&c, d->order[k])))
			goto out;
	}
	/* waiting for nodes while kept off spot ones: say that is why */
	for (int i = 0; i < in->npending && c.nspot > 0; i++) {
		struct sched_pending_out *o = &d->pending[i];

		if (in->pending[i].spot == SCHED_SPOT_ANY)
			continue;
		o->on_demand_only = true;
		if (o->reason == SCHED_WAIT_NODES || o->reason == SCHED_WAIT_TOPOLOGY ||
		    o->reason == SCHED_NEVER_FITS_EXCLUDED) {
			o->count = o->reason == SCHED_NEVER_FITS_EXCLUDED;
			o->reason = SCHED_WAIT_ON_DEMAND;
			o->level = SCHED_TOPO_NONE;
			o->protected_job = 0;
			o->protected_count = 0;
			o->protected_until_ms = 0;
		}
	}

	/* teams after the decision; lent = peers' borrowing attributed to lenders in team order */
	for (int t = 0; t < in->nteams; t++) {
		struct sched_team_out *to = &d->teams[t];

		to->used = c.qt[t].used;
		to->cpus_used = c.caps[t].used.v[QUOTA_CPUS];
		to->memory_mb_used = c.caps[t].used.v[QUOTA_MEMORY_MB];
		to->borrowed = quota_borrowed(&c.qt[t]);
		to->admissible = quota_admissible(&c.qt[t], sched__cohort_of(&c, t));
	}
	for (int co = 0; co < c.ncoh; co++) {
		int64_t left = c.coh[co].borrowed;

		for (int t = 0; t < in->nteams && left > 0; t++) {
			int64_t idle = c.qt[t].nominal - c.qt[t].used, x;

			if (c.cohort[t] != co || idle <= 0)
				continue;
			x = idle < left ? idle : left;
			d->teams[t].lent = x;
			left -= x;
		}
	}
	*out = d;
	d = NULL;
	rc = 0;
out:
	if (rc == TY_ENOMEM)
		ty_err_set(err, rc, NULL);
	sched_decisions_free(d);
	ctx_free(&c);
	free(keys);
	free(ktmp);
	free(fs);
	free(frank);
	return rc;
}

void sched_decisions_free(struct sched_decisions *d)
{
	if (!d)
		return;
	sched_placements_free(d->placements, d->nplacements);
	free(d->placement_pending);
	free(d->preemptions);
	for (int k = 0; k < d->nreservations; k++)
		free(d->reservations[k].node);
	free(d->reservations);
	free(d->pending);
	free(d->teams);
	free(d->order);
	free(d);
}

/* ---- reasons ------------------------------------------------------------------------------ */

static void rel_time(char *b, size_t n, int64_t dt_ms)
{
	int64_t s = dt_ms <= 0 ? 0 : (dt_ms + 999) / 1000;

	if (s == 0)
		snprintf(b, n, "now");
	else if (s < 60)
		snprintf(b, n, "in %llds", (long long)s);
	else if (s < 3600)
		snprintf(b, n, "in %lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else
		snprintf(b, n, "in %lldh%02lldm", (long long)(s / 3600),
			 (long long)(s % 3600 / 60));
}

static const char *plural(long long n)
{
	return n == 1 ? "" : "s";
}

/*
 * Why a job is kept off spot nodes, after `what`: "waiting for on-demand
 * nodes: preempted on spot 3 times (spot.max_preemptions 3)", "waiting for
 * on-demand nodes (spot.allowed is false)".
 */
static const char *spot_why(char *b, size_t n, const char *what, const struct sched_pending_in *p)
{
	if (p->spot == SCHED_SPOT_FALLBACK)
		snprintf(b, n, "%s: preempted on spot %d time%s (spot.max_preemptions %d)", what,
			 p->spot_preemptions, plural(p->spot_preemptions),
			 p->spot_max_preemptions);
	else
		snprintf(b, n, "%s (spot.allowed is false)", what);
	return b;
}

int sched_reason_format(char *buf, size_t n, const struct sched_input *in,
			const struct sched_decisions *d, int i, const char *when)
{
	return sched_reason_format_at(buf, n, in, d, i, when, NULL);
}

int sched_reason_format_at(char *buf, size_t n, const struct sched_input *in,
			   const struct sched_decisions *d, int i, const char *when,
			   const char *protected_when)
{
	const struct sched_pending_out *o = &d->pending[i];
	const struct sched_pending_in *p = &in->pending[i];
	const char *team = o->team >= 0 && o->team < in->nteams && in->teams[o->team].name
			       ? in->teams[o->team].name
			       : "?";
	char tb[48], pb[64], shape[96], prot[200] = "", sw[160];
	int N = p->nodes, G = p->gpus_per_node;

	if (!when) {
		rel_time(tb, sizeof(tb), o->at_ms - in->now_ms);
		when = tb;
	}
	if (o->protected_job && o->protected_count > 0) {
		if (!protected_when) {
			char rb[40];

			rel_time(rb, sizeof(rb), o->protected_until_ms - in->now_ms);
			/* "in 9m00s" → "9m00s from now" */
			snprintf(pb, sizeof(pb), "%s from now",
				 strncmp(rb, "in ", 3) ? rb : rb + 3);
			protected_when = pb;
		}
		if (o->protected_count == 1)
			snprintf(prot, sizeof(prot),
				 ": the borrowing job that holds them is protected until %s "
				 "(minimum runtime)",
				 protected_when);
		else
			snprintf(prot, sizeof(prot),
				 ": the %d borrowing jobs that hold them are protected until %s "
				 "(minimum runtime)",
				 o->protected_count, protected_when);
	}
	if (N == 1)
		snprintf(shape, sizeof(shape), "a node with %d free GPU%s", G, plural(G));
	else if (o->level)
		snprintf(shape, sizeof(shape), "%d × %d GPUs in one %s", N, G,
			 sched_topo_name(o->level));
	else
		snprintf(shape, sizeof(shape), "%d × %d GPUs", N, G);

	switch (o->reason) {
	case SCHED_PLACED:
		return snprintf(buf, n, "placed");
	case SCHED_WAIT_NODES:
		if (N == 1)
			return snprintf(buf, n, "no node has %d free GPU%s%s", G, plural(G), prot);
		if (o->level)
			return snprintf(buf, n, "waiting for %s%s", shape, prot);
		return snprintf(buf, n, "waiting for %s (%d node%s ha%s %d free)%s", shape,
				o->count, plural(o->count), o->count == 1 ? "s" : "ve", G, prot);
	case SCHED_WAIT_TOPOLOGY:
		return snprintf(buf, n,
				"waiting for %s (%d nodes have %d free, but no %s has %d)%s", shape,
				o->count, G, sched_topo_name(o->level), N, prot);
	case SCHED_NEVER_FITS:
		if (N == 1)
			return snprintf(buf, n, "no schedulable node has %d GPU%s", G, plural(G));
		return snprintf(buf, n, "the cluster has no %d schedulable nodes with %d GPU%s%s%s",
				N, G, plural(G), o->level ? " in one " : "",
				o->level ? sched_topo_name(o->level) : "");
	case SCHED_WAIT_BORROW_LIMIT:
		if (o->used >= o->limit)
			return snprintf(
			    buf, n,
			    "team %s at borrowing limit (%lld of %lld borrowed GPUs in use)", team,
			    (long long)o->used, (long long)o->limit);
		return snprintf(
		    buf, n,
		    "team %s would exceed its borrowing limit (%lld of %lld borrowed GPUs in "
		    "use, job needs %d)",
		    team, (long long)o->used, (long long)o->limit, o->count);
	case SCHED_WAIT_COHORT:
		return snprintf(
		    buf, n,
		    "team %s may hold %lld GPUs now (%lld in use, job needs %d): its cohort "
		    "has no more idle GPUs to lend",
		    team, (long long)o->limit, (long long)o->used, o->count);
	case SCHED_WAIT_NOMINAL:
		return snprintf(
		    buf, n,
		    "team %s at nominal quota (%lld of %lld GPUs in use, job needs %d; no "
		    "cohort to borrow from)",
		    team, (long long)o->used, (long long)o->limit, o->count);
	case SCHED_WAIT_PREEMPTION:
		if (o->count <= 1)
			return snprintf(buf, n, "waiting for job %lld to be preempted",
					(long long)o->other_job);
		return snprintf(buf, n, "waiting for job %lld and %d other%s to be preempted",
				(long long)o->other_job, o->count - 1, plural(o->count - 1));
	case SCHED_WAIT_RESERVED:
		return snprintf(buf, n, "reserved for job %lld until %s", (long long)o->other_job,
				when);
	case SCHED_WAIT_HEAD:
		if (o->on_demand_only)
			return snprintf(buf, n, "%s; next in line, nodes reserved from %s",
					spot_why(sw, sizeof(sw), "waiting for on-demand nodes", p),
					when);
		return snprintf(buf, n, "waiting for %s%s; next in line, nodes reserved from %s",
				shape, prot, when);
	case SCHED_WAIT_BEHIND:
		return snprintf(buf, n, "queued behind job %lld (backfill is off)",
				(long long)o->other_job);
	case SCHED_WAIT_SCAN_LIMIT:
		return snprintf(
		    buf, n, "not considered this cycle (backfill scan limit of %d jobs)", o->count);
	case SCHED_WAIT_PORT:
		return snprintf(buf, n, "no free rendezvous port in %d-%d on the fitting nodes",
				in->cfg.port_lo, in->cfg.port_hi);
	case SCHED_WAIT_BACKOFF:
		if (!p->last_failure || !*p->last_failure)
			return snprintf(buf, n, "retrying after a failure: backoff until %s", when);
		return snprintf(buf, n, "retrying after a%s %s: backoff until %s",
				strchr("aeiou", p->last_failure[0]) ? "n" : "", p->last_failure,
				when);
	case SCHED_NEVER_FITS_EXCLUDED:
		if (N == 1)
			return snprintf(buf, n,
					"no schedulable node has %d GPU%s but the %d node%s "
					"excluded after this job's failures",
					G, plural(G), o->count, plural(o->count));
		return snprintf(buf, n,
				"the cluster has no %d schedulable nodes with %d GPU%s%s%s once "
				"the %d node%s excluded after this job's failures are left out",
				N, G, plural(G), o->level ? " in one " : "",
				o->level ? sched_topo_name(o->level) : "", o->count,
				plural(o->count));
	case SCHED_WAIT_ON_DEMAND:
		return snprintf(buf, n, "%s",
				spot_why(sw, sizeof(sw),
					 o->count ? "the on-demand nodes can never hold it"
						  : "waiting for on-demand nodes",
					 p));
	case SCHED_NEVER_FITS_CPUS:
	case SCHED_NEVER_FITS_MEMORY:
	case SCHED_WAIT_CPUS:
	case SCHED_WAIT_MEMORY: {
		bool cpus = o->reason == SCHED_NEVER_FITS_CPUS || o->reason == SCHED_WAIT_CPUS;
		bool never = o->reason == SCHED_NEVER_FITS_CPUS || o->reason == SCHED_NEVER_FITS_MEMORY;
		const char *what = cpus ? (o->used == 1 ? "CPU" : "CPUs") : "MiB of memory";
		char most[64] = "";

		if (o->limit > 0)
			snprintf(most, sizeof(most), " (largest %s: %lld)",
				 never ? "allocatable" : "free now", (long long)o->limit);
		if (never && N == 1)
			return snprintf(buf, n, "no node has %lld %s allocatable%s",
					(long long)o->used, what, most);
		if (never)
			return snprintf(buf, n,
					"the cluster has no %d schedulable nodes with %lld %s "
					"allocatable and %d GPU%s%s",
					N, (long long)o->used, what, G, plural(G), most);
		if (N == 1)
			return snprintf(buf, n, "no node has %lld free %s%s%s", (long long)o->used,
					what, G ? " where GPUs are free" : "", most);
		return snprintf(buf, n, "waiting for %d nodes with %lld free %s%s%s", N,
				(long long)o->used, what, G ? " and GPUs" : "", most);
	}
	case SCHED_WAIT_QUOTA_CPUS:
		return snprintf(buf, n,
				"team %s at its CPU quota (%lld of %lld CPUs in use, job needs %lld)",
				team, (long long)o->used, (long long)o->limit, (long long)o->need);
	case SCHED_WAIT_QUOTA_MEMORY:
		return snprintf(buf, n,
				"team %s at its memory quota (%lld of %lld MiB in use, job needs "
				"%lld)",
				team, (long long)o->used, (long long)o->limit, (long long)o->need);
	case SCHED_INVALID:
		if (p->team < 0 || p->team >= in->nteams)
			return snprintf(buf, n, "invalid request: unknown team");
		return snprintf(buf, n, "invalid request: %d node%s with %d GPU%s each", N,
				plural(N), G, plural(G));
	default:
		return snprintf(buf, n, "pending");
	}
}
