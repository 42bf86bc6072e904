/*
 * "Fewest victims" checked against brute force: in seeded random small
 * clusters where one team borrows everything and a team within its nominal
 * quota needs room, the core's victims must be a set that makes the job
 * fit, and no smaller set of the borrower's gangs may make it fit. The
 * oracle asks the core itself whether the job fits with a set removed (a
 * single pending job, preemption off), so the two agree on what "fits"
 * means (gangs, topology) and differ only in the victim search.
 *
 * TY_VICTIMS_SEED / TY_VICTIMS_N change the seed / the number of worlds.
 */
#include "policy_fixture.h"
#include "rng.h"

#include <inttypes.h>

#define MAXJ 12

struct world {
	int nnodes, njobs;
	const char *rack[8];
	/* borrower gangs: per job its nodes and contiguous GPU ranges */
	int jn[MAXJ], jnode[MAXJ][2], jlo[MAXJ][2], jhi[MAXJ][2], prio[MAXJ];
	int pn, pg, preq; /* the pending job */
};

static const char *const node_ids[8] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};

/* Lowest contiguous run of g free GPUs at or after a random offset of node n, or -1. */
static int take(struct rng *r, uint8_t *busy, int g)
{
	int start = rin(r, 0, 8 - g);

	for (int k = 0; k <= 8 - g; k++) {
		int lo = (start + k) % (8 - g + 1), ok = 1;

		for (int x = lo; x < lo + g; x++)
			ok &= !((*busy >> x) & 1);
		if (ok) {
			for (int x = lo; x < lo + g; x++)
				*busy |= (uint8_t)(1u << x);
			return lo;
		}
	}
	return -1;
}

static void gen(struct world *w, struct rng *r)
{
	static const char *const racks[] = {"r1", "r2"};
	static const int shapes[] = {1, 2, 4, 8};
	uint8_t busy[8] = {0};

	memset(w, 0, sizeof(*w));
	w->nnodes = rin(r, 3, 8);
	for (int n = 0; n < w->nnodes; n++)
		w->rack[n] = racks[rin(r, 0, 1)];
	for (int tries = 0; tries < 40 && w->njobs < MAXJ; tries++) {
		int j = w->njobs, two = rin(r, 0, 3) == 0, g = shapes[rin(r, 0, two ? 2 : 3)];
		int a = rin(r, 0, w->nnodes - 1), b = (a + rin(r, 1, w->nnodes - 1)) % w->nnodes;
		uint8_t save[8];
		int lo;

		memcpy(save, busy, sizeof(save));
		if ((lo = take(r, &busy[a], g)) < 0)
			continue;
		w->jnode[j][0] = a;
		w->jlo[j][0] = lo;
		w->jhi[j][0] = lo + g - 1;
		w->jn[j] = 1;
		if (two) {
			if ((lo = take(r, &busy[b], g)) < 0) {
				memcpy(busy, save, sizeof(save));
				continue;
			}
			w->jnode[j][1] = b;
			w->jlo[j][1] = lo;
			w->jhi[j][1] = lo + g - 1;
			w->jn[j] = 2;
		}
		w->prio[j] = rin(r, 0, 2);
		w->njobs++;
	}
	w->pn = rin(r, 1, 3);
	w->pg = shapes[rin(r, 1, 3)];
	w->preq = w->pn > 1 && rin(r, 0, 2) == 0 ? SCHED_TOPO_RACK : SCHED_TOPO_NONE;
}

/*
 * Build the input: team "a" borrows everything (nominal 0), team "b" has
 * the whole cluster as nominal and one pending job (id 1000). Jobs in
 * `removed` (a bit per borrower job) are left out.
 */
static void build(struct fx *f, const struct world *w, unsigned removed, bool preemption)
{
	int a, b;

	fx_done(f); /* a previous decision of f */
	fx_init(f);
	for (int n = 0; n < w->nnodes; n++)
		fx_node(f, node_ids[n], 8, "z1", w->rack[n], NULL);
	a = fx_team(f, "a", 0, -1, -1, "c1");
	b = fx_team(f, "b", (int64_t)w->nnodes * 8, -1, -1, "c1");
	for (int j = 0; j < w->njobs; j++) {
		char hold[64];
		struct sched_running_in *ru;

		if (removed & (1u << j))
			continue;
		if (w->jn[j] == 1)
			snprintf(hold, sizeof(hold), "%s:%d-%d", node_ids[w->jnode[j][0]],
				 w->jlo[j][0], w->jhi[j][0]);
		else
			snprintf(hold, sizeof(hold), "%s:%d-%d|%s:%d-%d", node_ids[w->jnode[j][0]],
				 w->jlo[j][0], w->jhi[j][0], node_ids[w->jnode[j][1]],
				 w->jlo[j][1], w->jhi[j][1]);
		ru = fx_run(f, 100 + j, a, hold, 86400, 86400);
		ru->priority = w->prio[j];
	}
	fx_pend(f, 1000, b, w->pn, w->pg, 1)->required = (enum sched_topo)w->preq;
	f->in.cfg.preemption = preemption;
}

/* Whether the pending job is placed once the jobs in `removed` are gone. */
static bool fits_without(struct fx *f, const struct world *w, unsigned removed)
{
	build(f, w, removed, false);
	fx_decide(f);
	return fx_placed(f, 1000) != NULL;
}

/* Next k-subset of n bits after s (Gosper's hack); 0 when done. */
static unsigned next_subset(unsigned s, int n)
{
	unsigned c = s & -s, r = s + c, nx = (((r ^ s) >> 2) / c) | r;

	return nx >> n ? 0 : nx;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);

	return v && *v ? strtoull(v, NULL, 0) : dflt;
}

TY_TEST(fewest_victims_is_minimum)
{
	uint64_t seed = env_u64("TY_VICTIMS_SEED", 20261122);
	int worlds = (int)env_u64("TY_VICTIMS_N", 600), with_victims = 0, bigger = 0;
	static struct fx f, g;

	for (int i = 0; i < worlds; i++) {
		struct rng r = {seed + (uint64_t)i};
		struct world w;
		unsigned chosen = 0;
		int k = 0;

		gen(&w, &r);
		build(&f, &w, 0, true);
		fx_decide(&f);
		for (int x = 0; x < f.d->npreemptions; x++) {
			int j = (int)(f.d->preemptions[x].victim - 100);

			REQUIRE(j >= 0 && j < w.njobs);
			CHECK(f.d->preemptions[x].for_job == 1000);
			chosen |= 1u << j;
			k++;
		}
		ty_test_context("seed %" PRIu64 " world %d: %d nodes, %d gangs, job %dx%d req %d, "
				"victims %s",
				seed, i, w.nnodes, w.njobs, w.pn, w.pg, w.preq, fx_victims(&f));
		if (fx_placed(&f, 1000)) {
			CHECK_INT_EQ(k, 0);
			continue;
		}
		if (k == 0) {
			/* no victims: then not even all of them would do */
			CHECK(!fits_without(&g, &w, (1u << w.njobs) - 1));
			continue;
		}
		with_victims++;
		bigger += k >= 3;
		/* the chosen set works ... */
		CHECK(fits_without(&g, &w, chosen));
		/* ... and no smaller one does */
		for (int s = 1; s < k; s++)
			for (unsigned sub = (1u << s) - 1; sub; sub = next_subset(sub, w.njobs))
				if (fits_without(&g, &w, sub)) {
					CHECK_INT_EQ(s, k);
					s = k;
					break;
				}
		fx_done(&g);
	}
	fx_done(&f);
	/* the generator must exercise the search, or the test proves nothing */
	CHECK(with_victims >= worlds / 4);
	CHECK(bigger >= 10);
	ty_test_context("%d of %d worlds preempted, %d with 3+ victims", with_victims, worlds,
			bigger);
	printf("# %d of %d worlds preempted, %d with 3+ victims\n", with_victims, worlds, bigger);
}
