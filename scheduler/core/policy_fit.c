/*
 * The policy core's nodes: free-GPU views and their shape memos, node
 * state and ports, topology domains, the gang fit, and the nodes CPUs or
 * memory keep a job off.
 */
#include "policy_internal.h"

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
	/* nodes held for another job are free again once the hold lapses */
	int nex = p->nexclude - p->nexclude_held;

	*nx = 0;
	if (c->od) {
		*nx = c->nspot;
		if (!sched__could_fit(c, p->nodes, p->gpus_per_node, p->required, true))
			return false;
		if (nex <= 0)
			return true;
	}
	for (int k = 0; k < nex; k++) {
		int n = p->exclude[k];

		if (n >= 0 && n < c->nn && cap->free[n] >= 0) {
			view_set(c, cap, n, -1);
			(*nx)++;
		}
	}
	c->nolearn = true; /* the shape memos are the whole capacity's */
	ok = sched__fit(c, cap, p->nodes, p->gpus_per_node, p->required);
	c->nolearn = learn;
	for (int k = 0; k < nex; k++) {
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
