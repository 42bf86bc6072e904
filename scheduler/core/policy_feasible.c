/*
 * What can never run (docs/scheduling.md, "Cannot run"): the daemon's check
 * of each job left pending, with quota.h's rules and texts, the ones the
 * API refuses a submission with.
 */
#include "policy.h"
#include "lifecycle.h"
#include "quota.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sched_feasible {
	struct quota_shape *shapes; /* the nodes grouped by shape */
	char (*names)[128];	    /* shapes[k].name points here */
	int nshapes;
	int64_t *peers; /* per team: Σ quota_lendable_max of its cohort's other teams */
};

static struct quota_team team_of(const struct sched_team_in *t)
{
	return (struct quota_team){t->nominal_gpus, t->borrowing_limit, t->lending_limit, 0,
				   t->cohort && t->cohort[0]};
}

static int cmp_node(const void *a, const void *b)
{
	const struct sched_node_in *x = *(const struct sched_node_in *const *)a;
	const struct sched_node_in *y = *(const struct sched_node_in *const *)b;

	if (x->gpus != y->gpus)
		return x->gpus < y->gpus ? -1 : 1;
	if (x->cpus != y->cpus)
		return x->cpus < y->cpus ? -1 : 1;
	if (x->memory_mb != y->memory_mb)
		return x->memory_mb < y->memory_mb ? -1 : 1;
	return strcmp(x->id ? x->id : "", y->id ? y->id : "");
}

static bool same_shape(const struct sched_node_in *a, const struct sched_node_in *b)
{
	return a->gpus == b->gpus && a->cpus == b->cpus && a->memory_mb == b->memory_mb;
}

/* Teams by cohort name (qsort): the teams of a cohort next to each other. */
static int cmp_cohort(const void *a, const void *b)
{
	return strcmp((*(const struct sched_team_in *const *)a)->cohort,
		      (*(const struct sched_team_in *const *)b)->cohort);
}

/*
 * peers[t]: Σ quota_lendable_max over the other teams of t's cohort, one
 * sum per cohort (sorted, not every pair: thousands of teams stay cheap).
 * 0 or -1 (out of memory).
 */
static int cohort_peers(int64_t *peers, const struct sched_input *in)
{
	const struct sched_team_in **v = NULL;
	int n = 0;

	if (in->nteams > 0 && !(v = calloc((size_t)in->nteams, sizeof(*v))))
		return -1;
	for (int t = 0; t < in->nteams; t++)
		if (in->teams[t].cohort && in->teams[t].cohort[0])
			v[n++] = &in->teams[t];
	if (n > 1)
		qsort(v, (size_t)n, sizeof(*v), cmp_cohort);
	for (int i = 0, j; i < n; i = j) {
		int64_t sum = 0;

		for (j = i; j < n && !strcmp(v[j]->cohort, v[i]->cohort); j++) {
			struct quota_team q = team_of(v[j]);

			sum += quota_lendable_max(&q);
		}
		for (int k = i; k < j; k++) {
			struct quota_team q = team_of(v[k]);

			peers[v[k] - in->teams] = sum - quota_lendable_max(&q);
		}
	}
	free(v);
	return 0;
}

int sched_feasible_new(struct sched_feasible **out, const struct sched_input *in,
		       const struct sched_pool_in *pools, int npools, struct ty_err *err)
{
	struct sched_feasible *f = calloc(1, sizeof(*f));
	const struct sched_node_in **ix = NULL;
	size_t cap = (size_t)(npools > 0 ? npools : 0);
	int rc = 0;

	*out = NULL;
	if (!f || (in->nnodes > 0 && !(ix = calloc((size_t)in->nnodes, sizeof(*ix)))) ||
	    (in->nteams > 0 && !(f->peers = calloc((size_t)in->nteams, sizeof(*f->peers)))))
		goto oom;
	for (int i = 0; i < in->nnodes; i++)
		ix[i] = &in->nodes[i];
	if (in->nnodes > 1)
		qsort(ix, (size_t)in->nnodes, sizeof(*ix), cmp_node);
	/* a few shapes however many nodes: room for those only */
	for (int i = 0; i < in->nnodes; i++)
		cap += i == 0 || !same_shape(ix[i], ix[i - 1]);
	if (cap > 0 && (!(f->shapes = calloc(cap, sizeof(*f->shapes))) ||
			!(f->names = calloc(cap, sizeof(*f->names)))))
		goto oom;
	for (int i = 0; i < in->nnodes; i++) {
		const struct sched_node_in *nd = ix[i];
		struct quota_shape *s = &f->shapes[f->nshapes - 1];
		char *name;
		size_t len;

		if (i == 0 || !same_shape(nd, ix[i - 1])) {
			s = &f->shapes[f->nshapes];
			*s = (struct quota_shape){f->names[f->nshapes], nd->gpus, nd->cpus,
						  nd->memory_mb, 0};
			f->nshapes++;
		}
		name = f->names[s - f->shapes];
		len = strlen(name);
		if (s->count < 3)
			snprintf(name + len, sizeof(f->names[0]) - len, "%s%s",
				 s->count ? ", " : "", nd->id ? nd->id : "?");
		else if (s->count == 3)
			snprintf(name + len, sizeof(f->names[0]) - len, ", …");
		s->count++;
	}
	for (int i = 0; i < npools; i++) {
		struct quota_shape *sh = &f->shapes[f->nshapes];

		snprintf(f->names[f->nshapes], sizeof(f->names[0]), "pool %s",
			 pools[i].name ? pools[i].name : "?");
		*sh = (struct quota_shape){f->names[f->nshapes], pools[i].gpus, pools[i].cpus,
					   pools[i].memory_mb, pools[i].max_nodes};
		f->nshapes++;
	}
	if ((rc = cohort_peers(f->peers, in)))
		goto oom;
	*out = f;
	f = NULL;
	goto out;
oom:
	rc = ty_err_set(err, TY_ENOMEM, NULL);
out:
	free(ix);
	sched_feasible_free(f);
	return rc;
}

void sched_feasible_free(struct sched_feasible *f)
{
	if (!f)
		return;
	free(f->shapes);
	free(f->names);
	free(f->peers);
	free(f);
}

bool sched_cannot_run(char *buf, size_t n, const struct sched_feasible *f,
		      const struct sched_input *in, int i)
{
	const struct sched_pending_in *p = &in->pending[i];
	static const char prefix[] = PROTO_CANNOT_RUN;
	size_t k = sizeof(prefix) - 1;
	int64_t gpus = (int64_t)p->nodes * p->gpus_per_node;
	struct quota_team t;

	if (n <= k || f->nshapes == 0 || p->team < 0 || p->team >= in->nteams)
		return false; /* no node nor pool yet: nothing is impossible (docs/api.md) */
	memcpy(buf, prefix, k);
	t = team_of(&in->teams[p->team]);
	if (gpus > quota_ceiling(&t, f->peers[p->team])) {
		quota_ceiling_format(buf + k, n - k, in->teams[p->team].name, &t, f->peers[p->team],
				     gpus);
		return true;
	}
	if (!quota_shape_fits(buf + k, n - k, f->shapes, f->nshapes, p->nodes, p->gpus_per_node,
			      p->cpus_per_node, p->memory_mb_per_node))
		return true;
	buf[0] = '\0';
	return false;
}
