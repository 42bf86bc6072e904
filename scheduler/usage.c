/*
 * Decayed GPU usage per team, derived from the usage ledger and brought
 * forward incrementally: each team's value is persisted in team_usage as of
 * a time, and only ledger rows that ended since then, plus the allocations
 * of attempts not in the ledger yet released since then, are read — never
 * the whole history. What is held now comes from the cluster mirror, which
 * holds every unreleased allocation and is refreshed before this runs.
 */
#include "quota.h"
#include "scheduler.h"

#include <stdlib.h>

static int team_at(const struct sched_usage *t, int n, int64_t id)
{
	int lo = 0, hi = n;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (t[mid].team < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && t[lo].team == id ? lo : -1;
}

/* GPUs held from lo to hi (ms) by a team, counted from its since_ms up to now. */
static void accrue(double *add, const struct sched_usage *teams, int n, int64_t team,
		   int64_t gpus, int64_t lo, int64_t hi, int64_t now_ms)
{
	int i = team_at(teams, n, team);

	if (i < 0 || gpus <= 0)
		return;
	if (hi > now_ms)
		hi = now_ms;
	if (lo < teams[i].since_ms)
		lo = teams[i].since_ms;
	if (hi > lo)
		add[i] += (double)gpus * (double)(hi - lo) / 1000.0;
}

int sched_usage_advance(struct sched_usage *teams, int n, struct ty_pg *pg,
			const struct sched_mirror *m, int64_t half_life_s, int64_t now_ms,
			struct ty_err *err)
{
	struct sched_store_span *spans = NULL;
	double *add = NULL;
	int64_t from = now_ms;
	int rc, nspans = 0;

	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++)
		if (teams[i].since_ms < from)
			from = teams[i].since_ms;
	if (!(add = calloc((size_t)n, sizeof(*add))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	/*
	 * Held from the attempt's creation until released, as the ledger
	 * counts: what a team holds is what others cannot use, whether its
	 * ranks run yet or not. An attempt is either in the ledger (all of its
	 * rows, written at once, once every node released) or accrues from its
	 * allocations, never both: live ones from the mirror (none of them is
	 * in the ledger), released ones from PostgreSQL.
	 */
	if ((rc = sched_store_usage_spans(&spans, &nspans, pg, from, err)))
		goto out;
	for (int r = 0; r < nspans; r++) {
		int i = team_at(teams, n, spans[r].team);

		accrue(add, teams, n, spans[r].team, spans[r].gpus, spans[r].start_ms,
		       spans[r].end_ms, now_ms);
		/*
		 * Work the infrastructure lost (lost_infra) is not the team's:
		 * charged while it ran, it is refunded whole, undecayed, once
		 * its ledger row is written (docs/scheduling.md, "Goodput"):
		 * in the one advance whose (since, now] holds the row's end.
		 */
		if (i >= 0 && spans[r].end_ms > teams[i].since_ms && spans[r].end_ms <= now_ms)
			add[i] -= (double)spans[r].lost_infra_gpu_ms / 1000.0;
	}
	for (int k = 0; k < m->nallocs; k++) {
		const struct sched_malloc *a = &m->allocs[k];

		accrue(add, teams, n, a->team_id, __builtin_popcountll(a->mask), a->start_ms,
		       now_ms, now_ms);
	}
	for (int i = 0; i < n; i++) {
		if (now_ms <= teams[i].since_ms)
			continue;
		teams[i].decayed =
		    quota_usage_decay(teams[i].decayed, now_ms - teams[i].since_ms, half_life_s) +
		    add[i];
		if (teams[i].decayed < 0) /* a refund larger than what is left after decay */
			teams[i].decayed = 0;
		teams[i].since_ms = now_ms;
	}
out:
	free(spans);
	free(add);
	return rc;
}
