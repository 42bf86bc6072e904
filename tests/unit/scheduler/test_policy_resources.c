/*
 * The policy core's CPUs and memory (docs/scheduling.md, "CPUs and
 * memory"): nodes never over-committed, nodes that report nothing not
 * limited, team caps, and the pending reasons that name them.
 */
#include "policy_fixture.h"
#include "rng.h"

static struct sched_pending_in *res_pend(struct fx *f, int64_t job, int team, int nodes, int gpn,
					 int64_t cpus, int64_t mem)
{
	struct sched_pending_in *p = fx_pend(f, job, team, nodes, gpn, job);

	p->cpus_per_node = cpus;
	p->memory_mb_per_node = mem;
	return p;
}

static int res_node(struct fx *f, const char *id, int gpus, int64_t cpus, int64_t mem)
{
	int n = fx_node(f, id, gpus, NULL, NULL, NULL);

	f->nodes[n].cpus = cpus;
	f->nodes[n].memory_mb = mem;
	return n;
}

TY_TEST(cpu_only_job_bigger_than_every_node_never_fits)
{
	struct fx f;
	int a;

	fx_init(&f);
	res_node(&f, "n1", 0, 2, 4096);
	res_node(&f, "n2", 8, 4, 8192);
	a = fx_team(&f, "a", 0, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 0, 64, 1024);
	res_pend(&f, 101, a, 1, 0, 1, 65536);
	res_pend(&f, 102, a, 2, 0, 3, 1024); /* only n2 has 3 */
	res_pend(&f, 103, a, 1, 0, 64, 65536); /* both short: CPUs named */
	fx_decide(&f);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_NEVER_FITS_CPUS);
	CHECK_STR_EQ(fx_reason(&f, 100), "no node has 64 CPUs allocatable (largest allocatable: 4)");
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 101)].reason, SCHED_NEVER_FITS_MEMORY);
	CHECK_STR_EQ(fx_reason(&f, 101),
		     "no node has 65536 MiB of memory allocatable (largest allocatable: 8192)");
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 102)].reason, SCHED_NEVER_FITS_CPUS);
	CHECK_STR_EQ(fx_reason(&f, 102), "the cluster has no 2 schedulable nodes with 3 CPUs "
					 "allocatable and 0 GPUs (largest allocatable: 4)");
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 103)].reason, SCHED_NEVER_FITS_CPUS);
	CHECK_INT_EQ(f.d->nplacements, 0);
	fx_done(&f);
}

TY_TEST(never_fits_counts_only_nodes_with_the_gpus)
{
	struct fx f;
	int a;

	/* the big-CPU node has no GPUs: a GPU job asking 32 CPUs never fits */
	fx_init(&f);
	res_node(&f, "cpu", 0, 64, 0);
	res_node(&f, "gpu", 8, 16, 0);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 1, 32, 0);
	res_pend(&f, 101, a, 1, 0, 32, 0); /* no GPU: the CPU node takes it */
	fx_decide(&f);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_NEVER_FITS_CPUS);
	CHECK_STR_EQ(fx_placed(&f, 101), "cpu");
	fx_done(&f);
}

TY_TEST(two_jobs_that_fit_alone_are_not_co_placed)
{
	struct fx f;
	int a;

	/* one node, 8 GPUs, 8 CPUs, 16 GiB: each job fits alone, not both */
	fx_init(&f);
	res_node(&f, "n1", 8, 8, 16384);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 1, 6, 1024);
	res_pend(&f, 101, a, 1, 1, 6, 1024);
	res_pend(&f, 102, a, 1, 1, 1, 12000);
	res_pend(&f, 103, a, 1, 1, 1, 8000);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "n1");
	CHECK(fx_placed(&f, 101) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 101)].reason, SCHED_WAIT_CPUS);
	CHECK_STR_EQ(fx_reason(&f, 101),
		     "no node has 6 free CPUs where GPUs are free (largest free now: 2)");
	CHECK_STR_EQ(fx_placed(&f, 102), "n1");
	CHECK(fx_placed(&f, 103) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 103)].reason, SCHED_WAIT_MEMORY);
	CHECK_STR_EQ(fx_reason(&f, 103), "no node has 8000 free MiB of memory where GPUs are "
					 "free (largest free now: 3360)");
	fx_done(&f);

	/* with a second node the second job goes there, though best fit prefers n1 */
	fx_init(&f);
	res_node(&f, "n1", 8, 8, 16384);
	res_node(&f, "n2", 8, 8, 16384);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 1, 6, 1024);
	res_pend(&f, 101, a, 1, 1, 6, 1024);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "n1");
	CHECK_STR_EQ(fx_placed(&f, 101), "n2");
	fx_done(&f);
}

TY_TEST(running_and_stopping_gangs_hold_cpus_and_memory)
{
	struct fx f;
	struct sched_running_in *ru;
	int a;

	fx_init(&f);
	res_node(&f, "n1", 8, 8, 8192);
	res_node(&f, "n2", 8, 8, 8192);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	ru = fx_run(&f, 1, a, "n1:0", 60, 3600);
	ru->cpus_per_node = 6;
	ru = fx_run(&f, 2, a, "n2:0", 60, 3600);
	ru->memory_mb_per_node = 8000;
	ru->preempting = true; /* stopping: still holds them */
	res_pend(&f, 100, a, 1, 1, 4, 1024);
	res_pend(&f, 101, a, 1, 0, 2, 192); /* fits exactly in n1's leftovers */
	fx_decide(&f);
	/* n1 lacks the CPUs, n2 the memory: neither alone stops it, CPUs are named */
	CHECK(fx_placed(&f, 100) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_WAIT_CPUS);
	CHECK_STR_EQ(fx_placed(&f, 101), "n1");
	CHECK_INT_EQ(f.d->teams[a].cpus_used, 6 + 2);
	CHECK_INT_EQ(f.d->teams[a].memory_mb_used, 8000 + 192);
	fx_done(&f);
}

TY_TEST(nodes_that_report_nothing_are_not_limited)
{
	struct fx f;
	int a;

	fx_init(&f);
	res_node(&f, "old", 8, 0, 0);	/* an executor from before: reports neither */
	res_node(&f, "half", 8, 4, 0); /* CPUs only: memory not limited */
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 8, 4096, 16777216);
	res_pend(&f, 101, a, 1, 1, 4, 16777216);
	res_pend(&f, 102, a, 1, 1, 1, 1);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "old");
	CHECK_STR_EQ(fx_placed(&f, 101), "half");
	CHECK(fx_placed(&f, 102) == NULL); /* half's 4 CPUs are taken, old's GPUs too */
	fx_done(&f);
}

TY_TEST(multi_node_gang_needs_the_cpus_on_every_node)
{
	struct fx f;
	int a;

	fx_init(&f);
	res_node(&f, "n1", 8, 16, 0);
	res_node(&f, "n2", 8, 4, 0);
	res_node(&f, "n3", 8, 16, 0);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 2, 8, 8, 0);
	res_pend(&f, 101, a, 2, 0, 9, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "n1,n3");
	CHECK(fx_placed(&f, 101) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 101)].reason, SCHED_WAIT_CPUS);
	CHECK_STR_EQ(fx_reason(&f, 101), "waiting for 2 nodes with 9 free CPUs (largest free now: 8)");
	fx_done(&f);
}

TY_TEST(team_cpu_cap_holds_gpu_less_jobs_included)
{
	struct fx f;
	struct sched_running_in *ru;
	int a, b;

	fx_init(&f);
	res_node(&f, "n1", 8, 64, 0);
	res_node(&f, "n2", 8, 64, 0);
	a = fx_team(&f, "a", 0, -1, -1, NULL);
	b = fx_team(&f, "b", 0, -1, -1, NULL);
	f.teams[a].max_cpus = 4;
	ru = fx_run(&f, 1, a, "n1:0", 60, 3600);
	ru->nnodes = 1;
	ru->gpus = f.run_gpus[0];
	f.run_gpus[0][0] = 0; /* a GPU-less gang */
	ru->cpus_per_node = 3;
	res_pend(&f, 100, a, 1, 0, 2, 0);  /* 3 + 2 > 4 */
	res_pend(&f, 101, a, 1, 0, 1, 0);  /* 3 + 1 = 4 */
	res_pend(&f, 102, a, 1, 0, 1, 0);  /* the cap is now full */
	res_pend(&f, 103, b, 2, 0, 16, 0); /* b has no cap */
	fx_decide(&f);
	CHECK(fx_placed(&f, 100) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_WAIT_QUOTA_CPUS);
	CHECK_STR_EQ(fx_reason(&f, 100), "team a at its CPU quota (3 of 4 CPUs in use, job needs 2)");
	CHECK(fx_placed(&f, 101) != NULL);
	CHECK(fx_placed(&f, 102) == NULL);
	CHECK_STR_EQ(fx_reason(&f, 102), "team a at its CPU quota (4 of 4 CPUs in use, job needs 1)");
	CHECK(fx_placed(&f, 103) != NULL);
	CHECK_INT_EQ(f.d->teams[a].cpus_used, 4);
	CHECK_INT_EQ(f.d->teams[b].cpus_used, 32);
	fx_done(&f);

	/* a multi-node job is charged nodes × per node */
	fx_init(&f);
	res_node(&f, "n1", 8, 64, 0);
	res_node(&f, "n2", 8, 64, 0);
	a = fx_team(&f, "a", 16, -1, -1, NULL);
	f.teams[a].max_cpus = 6;
	res_pend(&f, 100, a, 2, 1, 4, 0);
	res_pend(&f, 101, a, 2, 1, 3, 0);
	fx_decide(&f);
	CHECK_STR_EQ(fx_reason(&f, 100), "team a at its CPU quota (0 of 6 CPUs in use, job needs 8)");
	CHECK(fx_placed(&f, 101) != NULL);
	fx_done(&f);
}

TY_TEST(team_memory_cap)
{
	struct fx f;
	int a;

	fx_init(&f);
	res_node(&f, "n1", 8, 0, 0);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	f.teams[a].max_memory_mb = 4096;
	res_pend(&f, 100, a, 1, 1, 1, 3072);
	res_pend(&f, 101, a, 1, 1, 1, 2048);
	fx_decide(&f);
	CHECK(fx_placed(&f, 100) != NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 101)].reason, SCHED_WAIT_QUOTA_MEMORY);
	CHECK_STR_EQ(fx_reason(&f, 101),
		     "team a at its memory quota (3072 of 4096 MiB in use, job needs 2048)");
	CHECK_INT_EQ(f.d->teams[a].memory_mb_used, 3072);
	fx_done(&f);
}

TY_TEST(caps_never_preempt)
{
	struct fx f;
	struct sched_running_in *ru;
	int a;

	/* a high job blocked by its team's CPU cap does not preempt the team's low job */
	fx_init(&f);
	res_node(&f, "n1", 8, 64, 0);
	a = fx_team(&f, "a", 8, -1, -1, NULL);
	f.teams[a].max_cpus = 4;
	ru = fx_run(&f, 1, a, "n1:0-3", 3600, 3600);
	ru->cls = SCHED_CLASS_LOW;
	ru->cpus_per_node = 4;
	res_pend(&f, 100, a, 1, 1, 2, 0)->cls = SCHED_CLASS_HIGH;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "");
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_WAIT_QUOTA_CPUS);
	fx_done(&f);
}

TY_TEST(victims_only_where_the_cpus_are)
{
	struct fx f;
	struct sched_running_in *ru;
	int a;

	/*
	 * n1's CPUs are held by a gang that may not be preempted: preempting the
	 * low job there would free GPUs the high job could not use. The victim
	 * is the low job on n2, though n1's is younger (preferred otherwise).
	 */
	fx_init(&f);
	res_node(&f, "n1", 4, 4, 0);
	res_node(&f, "n2", 4, 8, 0);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	ru = fx_run(&f, 10, a, "n1:0-3", 3600, 3600);
	ru->cls = SCHED_CLASS_LOW;
	ru->cpus_per_node = 1;
	ru = fx_run(&f, 11, a, "n1:0", 7200, 3600);
	f.run_gpus[1][0] = 0;
	ru->preemptible = false;
	ru->cpus_per_node = 3;
	ru = fx_run(&f, 12, a, "n2:0-3", 7200, 3600);
	ru->cls = SCHED_CLASS_LOW;
	ru->cpus_per_node = 1;
	res_pend(&f, 100, a, 1, 4, 4, 0)->cls = SCHED_CLASS_HIGH;
	fx_decide(&f);
	CHECK_STR_EQ(fx_victims(&f), "12");
	fx_done(&f);
}

TY_TEST(excluded_nodes_and_cpus_together)
{
	struct fx f;
	struct sched_pending_in *p;
	int a, n2;

	fx_init(&f);
	res_node(&f, "n1", 8, 2, 0);
	n2 = res_node(&f, "n2", 8, 16, 0);
	res_node(&f, "n3", 8, 16, 0);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	p = res_pend(&f, 100, a, 1, 1, 8, 0);
	p->exclude = &n2;
	p->nexclude = 1;
	fx_decide(&f);
	CHECK_STR_EQ(fx_placed(&f, 100), "n3");
	fx_done(&f);
}

TY_TEST(bad_cpu_or_memory_ask_is_invalid)
{
	struct fx f;
	int a;

	fx_init(&f);
	res_node(&f, "n1", 8, 8, 8192);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 1, -1, 0);
	res_pend(&f, 101, a, 1, 1, 0, -5);
	res_pend(&f, 102, a, 1, 1, 0, 0); /* asks nothing: fine anywhere */
	fx_decide(&f);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_INVALID);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 101)].reason, SCHED_INVALID);
	CHECK_STR_EQ(fx_placed(&f, 102), "n1");
	fx_done(&f);
}

TY_TEST(unlimited_input_decides_as_before)
{
	struct fx f, g;
	int a;

	/* asks on nodes that report nothing change no decision */
	for (int k = 0; k < 2; k++) {
		struct fx *x = k ? &g : &f;

		fx_init(x);
		fx_node(x, "n1", 8, NULL, NULL, NULL);
		fx_node(x, "n2", 8, NULL, NULL, NULL);
		a = fx_team(x, "a", 12, -1, -1, NULL);
		fx_run(x, 1, a, "n1:0-3", 60, 3600);
		for (int j = 0; j < 6; j++)
			res_pend(x, 100 + j, a, 1 + j % 2, 2 + j, k ? 96 : 0, k ? 65536 : 0);
		fx_decide(x);
	}
	REQUIRE_INT_EQ(f.d->nplacements, g.d->nplacements);
	for (int j = 0; j < 6; j++) {
		const char *pf = fx_placed(&f, 100 + j);
		const char *pg = fx_placed(&g, 100 + j);

		ty_test_context("job %d", 100 + j);
		CHECK((pf == NULL) == (pg == NULL));
		if (pf && pg)
			CHECK_STR_EQ(pf, pg);
		CHECK_INT_EQ(f.d->pending[j].reason, g.d->pending[j].reason);
	}
	fx_done(&f);
	fx_done(&g);
}

TY_TEST(over_committed_node_still_takes_what_asks_nothing)
{
	struct fx f;
	struct sched_running_in *ru;
	int a;

	/* n1 re-registered with fewer CPUs than its gangs hold: 2 reported, 4 held */
	fx_init(&f);
	res_node(&f, "n1", 8, 2, 0);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	ru = fx_run(&f, 1, a, "n1:0", 60, 3600);
	ru->cpus_per_node = 4;
	res_pend(&f, 100, a, 1, 1, 1, 0);
	res_pend(&f, 101, a, 1, 1, 0, 512);
	fx_decide(&f);
	CHECK(fx_placed(&f, 100) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 100)].reason, SCHED_WAIT_CPUS);
	CHECK_STR_EQ(fx_reason(&f, 100), "no node has 1 free CPU where GPUs are free");
	CHECK_STR_EQ(fx_placed(&f, 101), "n1");
	fx_done(&f);
}

TY_TEST(placements_in_one_decision_add_up)
{
	struct fx f;
	int a;

	/* the least room left falls as jobs are placed: the third finds no room */
	fx_init(&f);
	res_node(&f, "n1", 8, 4, 0);
	res_node(&f, "n2", 8, 4, 0);
	a = fx_team(&f, "a", 64, -1, -1, NULL);
	res_pend(&f, 100, a, 1, 1, 3, 0);
	res_pend(&f, 101, a, 1, 1, 3, 0);
	res_pend(&f, 102, a, 1, 1, 2, 0);
	res_pend(&f, 103, a, 1, 1, 1, 0);
	res_pend(&f, 104, a, 1, 1, 1, 0);
	fx_decide(&f);
	CHECK(fx_placed(&f, 100) != NULL);
	CHECK(fx_placed(&f, 101) != NULL);
	CHECK(strcmp(fx_placed(&f, 100), ty_test_strf("%s", fx_placed(&f, 101))) != 0);
	CHECK(fx_placed(&f, 102) == NULL);
	CHECK_INT_EQ(f.d->pending[fx_pidx(&f, 102)].reason, SCHED_WAIT_CPUS);
	CHECK(fx_placed(&f, 103) != NULL);
	CHECK(fx_placed(&f, 104) != NULL);
	CHECK(strcmp(fx_placed(&f, 103), ty_test_strf("%s", fx_placed(&f, 104))) != 0);
	fx_done(&f);
}

/*
 * Over random clusters (some nodes reporting CPUs and memory, some not),
 * running gangs, teams with and without caps and pending jobs: what a
 * decision places never takes a node past what it reports, nor a team past
 * its caps, counting the gangs already there; and a job left waiting for
 * CPUs or memory names a resource that some node is indeed short of.
 */
TY_TEST(property_never_over_commits)
{
	static char ids[FX_MAXN][16];
	int worlds = 400, placed_total = 0, res_waits = 0;

	for (int w = 0; w < worlds; w++) {
		struct rng r = {(uint64_t)w * 7919 + 17};
		struct fx f;
		int64_t cpu_used[FX_MAXN] = {0}, mem_used[FX_MAXN] = {0};
		int64_t tcpu[FX_MAXT] = {0}, tmem[FX_MAXT] = {0}, pcpu[FX_MAXT] = {0},
			pmem[FX_MAXT] = {0};
		int nn = (int)rin(&r, 1, 12), nt = (int)rin(&r, 1, 3);

		fx_init(&f);
		for (int n = 0; n < nn; n++) {
			snprintf(ids[n], sizeof(ids[n]), "n%d", n);
			res_node(&f, ids[n], (int)rin(&r, 0, 8), chance(&r, 80) ? rin(&r, 1, 32) : 0,
				 chance(&r, 70) ? rin(&r, 512, 65536) : 0);
		}
		for (int t = 0; t < nt; t++) {
			int k = fx_team(&f, t == 0 ? "a" : t == 1 ? "b" : "c", rin(&r, 0, 64), -1, -1,
					NULL);

			f.teams[k].max_cpus = chance(&r, 50) ? rin(&r, 1, 64) : 0;
			f.teams[k].max_memory_mb = chance(&r, 30) ? rin(&r, 1024, 65536) : 0;
		}
		/* running gangs of one node each, within what the node reports */
		for (int g = 0; g < (int)rin(&r, 0, 6); g++) {
			int n = (int)rin(&r, 0, nn - 1);
			int64_t c = rin(&r, 1, 4), m = rin(&r, 1, 4096);
			struct sched_running_in *ru;

			if ((f.nodes[n].cpus && cpu_used[n] + c > f.nodes[n].cpus) ||
			    (f.nodes[n].memory_mb && mem_used[n] + m > f.nodes[n].memory_mb))
				continue;
			ru = fx_run(&f, 1 + g, (int)rin(&r, 0, nt - 1), ty_test_strf("%s:0", ids[n]),
				    60, 3600);
			f.run_gpus[f.in.nrunning - 1][0] = 0; /* no GPUs: CPUs and memory only */
			ru->cpus_per_node = c;
			ru->memory_mb_per_node = m;
			cpu_used[n] += c;
			mem_used[n] += m;
			tcpu[ru->team] += c;
			tmem[ru->team] += m;
		}
		for (int j = 0; j < (int)rin(&r, 1, 20); j++)
			res_pend(&f, 100 + j, (int)rin(&r, 0, nt - 1), (int)rin(&r, 1, 3),
				 (int)rin(&r, 0, 4), rin(&r, 1, 24), rin(&r, 1, 40000));
		fx_decide(&f);
		for (int k = 0; k < f.d->nplacements; k++) {
			const struct sched_placement *pl = &f.d->placements[k];
			const struct sched_pending_in *p = &f.pend[f.d->placement_pending[k]];

			for (int x = 0; x < pl->nnodes; x++) {
				cpu_used[pl->node[x]] += p->cpus_per_node;
				mem_used[pl->node[x]] += p->memory_mb_per_node;
			}
			tcpu[p->team] += (int64_t)pl->nnodes * p->cpus_per_node;
			tmem[p->team] += (int64_t)pl->nnodes * p->memory_mb_per_node;
			pcpu[p->team] += (int64_t)pl->nnodes * p->cpus_per_node;
			pmem[p->team] += (int64_t)pl->nnodes * p->memory_mb_per_node;
			placed_total++;
		}
		ty_test_context("world %d", w);
		for (int n = 0; n < nn; n++) {
			if (f.nodes[n].cpus && cpu_used[n] > f.nodes[n].cpus)
				FAIL("node %s: %lld CPUs placed, %lld reported", ids[n],
				     (long long)cpu_used[n], (long long)f.nodes[n].cpus);
			if (f.nodes[n].memory_mb && mem_used[n] > f.nodes[n].memory_mb)
				FAIL("node %s: %lld MiB placed, %lld reported", ids[n],
				     (long long)mem_used[n], (long long)f.nodes[n].memory_mb);
		}
		for (int t = 0; t < nt; t++) {
			CHECK_INT_EQ(f.d->teams[t].cpus_used, tcpu[t]);
			CHECK_INT_EQ(f.d->teams[t].memory_mb_used, tmem[t]);
			/* a team that got a placement is within its caps afterwards */
			if (pcpu[t] && f.teams[t].max_cpus && tcpu[t] > f.teams[t].max_cpus)
				FAIL("team %d placed past its CPU cap: %lld > %lld", t,
				     (long long)tcpu[t], (long long)f.teams[t].max_cpus);
			if (pmem[t] && f.teams[t].max_memory_mb && tmem[t] > f.teams[t].max_memory_mb)
				FAIL("team %d placed past its memory cap: %lld > %lld", t,
				     (long long)tmem[t], (long long)f.teams[t].max_memory_mb);
		}
		for (int i = 0; i < f.in.npending; i++) {
			enum sched_reason why = f.d->pending[i].reason;

			if (why == SCHED_WAIT_CPUS || why == SCHED_WAIT_MEMORY ||
			    why == SCHED_NEVER_FITS_CPUS || why == SCHED_NEVER_FITS_MEMORY) {
				bool cpu = why == SCHED_WAIT_CPUS || why == SCHED_NEVER_FITS_CPUS;
				bool never = why == SCHED_NEVER_FITS_CPUS ||
					     why == SCHED_NEVER_FITS_MEMORY;
				int64_t ask = cpu ? f.pend[i].cpus_per_node
						  : f.pend[i].memory_mb_per_node;
				bool short_somewhere = false;

				for (int n = 0; n < nn; n++) {
					int64_t have = cpu ? f.nodes[n].cpus : f.nodes[n].memory_mb;

					if (have && !never)
						have -= cpu ? cpu_used[n] : mem_used[n];
					if ((cpu ? f.nodes[n].cpus : f.nodes[n].memory_mb) &&
					    have < ask)
						short_somewhere = true;
				}
				if (!short_somewhere)
					FAIL("job %lld waits for %s (asks %lld) that no node lacks",
					     (long long)f.pend[i].job, cpu ? "CPUs" : "memory",
					     (long long)ask);
				res_waits += !never;
			}
		}
		fx_done(&f);
	}
	ty_test_context(NULL);
	ty_test_note("%d worlds, %d placements, %d jobs waiting for CPUs or memory", worlds,
		     placed_total, res_waits);
	CHECK(placed_total > 0);
	CHECK(res_waits > 0);
}
