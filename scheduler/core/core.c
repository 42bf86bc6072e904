/* First-fit gang placement over an in-memory snapshot; no I/O. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

struct node {
	char *id;
	int gpus;
	int free;
	unsigned char *used; /* gpus entries */
	int *ports;	     /* held rendezvous ports, ascending */
	int nports, cap_ports;
};

struct sched_snapshot {
	struct node *nodes;
	int n, cap;
	int port_lo, port_hi;
};

struct sched_snapshot *sched_snapshot_new(int port_lo, int port_hi)
{
	struct sched_snapshot *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->port_lo = port_lo;
	s->port_hi = port_hi;
	return s;
}

void sched_snapshot_free(struct sched_snapshot *s)
{
	if (!s)
		return;
	for (int i = 0; i < s->n; i++) {
		free(s->nodes[i].id);
		free(s->nodes[i].used);
		free(s->nodes[i].ports);
	}
	free(s->nodes);
	free(s);
}

int sched_snapshot_find(const struct sched_snapshot *s, const char *id)
{
	for (int i = 0; i < s->n; i++)
		if (strcmp(s->nodes[i].id, id) == 0)
			return i;
	return -1;
}

int sched_snapshot_add_node(struct sched_snapshot *s, const char *id, int gpus, struct ty_err *err)
{
	struct node *nd;

	if (gpus < 0)
		return ty_err_set(err, TY_EINVAL, "node '%s' has %d GPUs", id, gpus);
	if (sched_snapshot_find(s, id) >= 0)
		return ty_err_set(err, TY_EINVAL, "node '%s' is in the snapshot twice", id);
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 16;
		struct node *p = realloc(s->nodes, (size_t)cap * sizeof(*p));

		if (!p)
			return ty_err_set(err, TY_ENOMEM, NULL);
		s->nodes = p;
		s->cap = cap;
	}
	nd = &s->nodes[s->n];
	memset(nd, 0, sizeof(*nd));
	nd->id = strdup(id);
	nd->used = calloc((size_t)gpus + 1, 1);
	if (!nd->id || !nd->used) {
		free(nd->id);
		free(nd->used);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	nd->gpus = gpus;
	nd->free = gpus;
	return s->n++;
}

int sched_snapshot_count(const struct sched_snapshot *s)
{
	return s->n;
}

const char *sched_snapshot_node_id(const struct sched_snapshot *s, int i)
{
	return s->nodes[i].id;
}

int sched_snapshot_free_gpus(const struct sched_snapshot *s, int i)
{
	return s->nodes[i].free;
}

void sched_snapshot_use_gpu(struct sched_snapshot *s, int i, int gpu)
{
	struct node *nd = &s->nodes[i];

	/* a node that re-registered with fewer GPUs may still have old allocations */
	if (gpu < 0 || gpu >= nd->gpus || nd->used[gpu])
		return;
	nd->used[gpu] = 1;
	nd->free--;
}

bool sched_snapshot_port_used(const struct sched_snapshot *s, int i, int port)
{
	const struct node *nd = &s->nodes[i];

	for (int k = 0; k < nd->nports && nd->ports[k] <= port; k++)
		if (nd->ports[k] == port)
			return true;
	return false;
}

int sched_snapshot_use_port(struct sched_snapshot *s, int i, int port, struct ty_err *err)
{
	struct node *nd = &s->nodes[i];
	int k;

	if (sched_snapshot_port_used(s, i, port))
		return 0;
	if (nd->nports == nd->cap_ports) {
		int cap = nd->cap_ports ? nd->cap_ports * 2 : 4;
		int *p = realloc(nd->ports, (size_t)cap * sizeof(*p));

		if (!p)
			return ty_err_set(err, TY_ENOMEM, NULL);
		nd->ports = p;
		nd->cap_ports = cap;
	}
	for (k = nd->nports; k > 0 && nd->ports[k - 1] > port; k--)
		nd->ports[k] = nd->ports[k - 1];
	nd->ports[k] = port;
	nd->nports++;
	return 0;
}

/* Lowest port of the range not held on node i, or 0. */
static int free_port(const struct sched_snapshot *s, int i)
{
	const struct node *nd = &s->nodes[i];
	int port = s->port_lo, k = 0;

	while (k < nd->nports && nd->ports[k] < port)
		k++;
	for (; port <= s->port_hi; port++) {
		if (k < nd->nports && nd->ports[k] == port) {
			k++;
			continue;
		}
		return port;
	}
	return 0;
}

void sched_placement_clear(struct sched_placement *p)
{
	if (!p)
		return;
	free(p->node);
	free(p->gpus);
	memset(p, 0, sizeof(*p));
}

int sched_core_place(struct sched_placement *out, const struct sched_snapshot *s,
		     const struct sched_gang *g, struct ty_err *err)
{
	struct sched_placement p = {0};
	int fit = 0, master = -1, port = 0, r;

	memset(out, 0, sizeof(*out));
	if (g->nodes < 1 || g->gpus_per_node < 0)
		return ty_err_set(err, TY_EINVAL, "job %lld asks for %d nodes with %d GPUs each",
				  (long long)g->job, g->nodes, g->gpus_per_node);
	for (int i = 0; i < s->n; i++) {
		if (s->nodes[i].free < g->gpus_per_node)
			continue;
		fit++;
		if (master < 0 && (port = free_port(s, i)))
			master = i;
	}
	if (fit < g->nodes)
		return ty_err_set(err, TY_ENOTFOUND,
				  "waiting for %d node%s with %d free GPU%s (%d %s)", g->nodes,
				  g->nodes == 1 ? "" : "s", g->gpus_per_node,
				  g->gpus_per_node == 1 ? "" : "s", fit, fit == 1 ? "has" : "have");
	if (master < 0)
		return ty_err_set(err, TY_ENOTFOUND, "no free rendezvous port in %d-%d on any node",
				  s->port_lo, s->port_hi);

	p.job = g->job;
	p.nnodes = g->nodes;
	p.gpus_per_node = g->gpus_per_node;
	p.local_ranks = g->per_node ? 1 : (g->gpus_per_node > 1 ? g->gpus_per_node : 1);
	p.world_size = p.nnodes * p.local_ranks;
	p.master_port = port;
	p.node = calloc((size_t)p.nnodes, sizeof(*p.node));
	p.gpus = calloc((size_t)p.nnodes * (size_t)p.gpus_per_node + 1, sizeof(*p.gpus));
	if (!p.node || !p.gpus) {
		sched_placement_clear(&p);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	p.node[0] = master;
	r = 1;
	for (int i = 0; i < s->n && r < p.nnodes; i++)
		if (i != master && s->nodes[i].free >= g->gpus_per_node)
			p.node[r++] = i;
	for (r = 0; r < p.nnodes; r++) {
		const struct node *nd = &s->nodes[p.node[r]];
		int *row = p.gpus + (size_t)r * (size_t)p.gpus_per_node, k = 0;

		for (int gpu = 0; gpu < nd->gpus && k < p.gpus_per_node; gpu++)
			if (!nd->used[gpu])
				row[k++] = gpu;
	}
	*out = p;
	return 0;
}

int sched_core_take(struct sched_snapshot *s, const struct sched_placement *p, struct ty_err *err)
{
	for (int r = 0; r < p->nnodes; r++)
		for (int k = 0; k < p->gpus_per_node; k++)
			sched_snapshot_use_gpu(s, p->node[r],
					       p->gpus[(size_t)r * (size_t)p->gpus_per_node + k]);
	return sched_snapshot_use_port(s, p->node[0], p->master_port, err);
}

void sched_placements_free(struct sched_placement *p, int n)
{
	for (int i = 0; p && i < n; i++)
		sched_placement_clear(&p[i]);
	free(p);
}

int sched_core_cycle(struct sched_placement **out, int *nout, struct sched_snapshot *s,
		     const struct sched_gang *gangs, int ngangs, struct ty_err *err)
{
	struct sched_placement *res = NULL;
	int n = 0, rc = 0;

	*out = NULL;
	*nout = 0;
	if (ngangs > 0 && !(res = calloc((size_t)ngangs, sizeof(*res))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	for (int i = 0; i < ngangs; i++) {
		struct ty_err why = {0};

		rc = sched_core_place(&res[n], s, &gangs[i], &why);
		if (rc == TY_ENOTFOUND || rc == TY_EINVAL) {
			rc = 0;
			continue;
		}
		if (rc) {
			ty_err_set(err, rc, "%s", why.msg);
			goto out;
		}
		if ((rc = sched_core_take(s, &res[n], err))) {
			sched_placement_clear(&res[n]);
			goto out;
		}
		n++;
	}
	*out = res;
	*nout = n;
	res = NULL;
	n = 0;
out:
	sched_placements_free(res, n);
	return rc;
}
