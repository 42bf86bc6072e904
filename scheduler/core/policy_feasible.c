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

int sched_feasible_new(struct sched_feasible **out, const struct sched_input *in,
		       const struct sched_pool_in *pools, int npools, struct ty_err *err)
{
	struct sched_feasible *f = calloc(1, sizeof(*f));
	const struct sched_node_in **ix = NULL;
	size_t cap = (size_t)in->nnodes + (size_t)(npools > 0 ? npools : 0);
	int rc = 0;

	*out = NULL;
	if (!f || (in->nnodes > 0 && !(ix = calloc((size_t)in->nnodes, sizeof(*ix)))) ||
	    (cap > 0 && (!(f->shapes = calloc(cap, sizeof(*f->shapes))) ||
			 !(f->names = calloc(cap, sizeof(*f->names))))) ||
	    (in->nteams > 0 && !(f->peers = calloc((size_t)in->nteams, sizeof(*f->peers))))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < in->nnodes; i++)
		ix[i] = &in->nodes[i];
	if (in->nnodes > 1)
		qsort(ix, (size_t)in->nnodes, sizeof(*ix), cmp_node);
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
	for (int t = 0; t < in->nteams; t++) {
		const char *c = in->teams[t].cohort;

		if (!c || !c[0])
			continue;
		for (int p = 0; p < in->nteams; p++) {
			struct quota_team peer = team_of(&in->teams[p]);

			if (p != t && in->teams[p].cohort && !strcmp(in->teams[p].cohort, c))
				f->peers[t] += quota_lendable_max(&peer);
		}
	}
	*out = f;
	f = NULL;
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
