/*
 * The pure placement core: a snapshot of the cluster in, gang placements out.
 * No I/O, no clock, no database: the daemon builds the snapshot from
 * PostgreSQL, asks for decisions and commits them. The fair-share / quota /
 * topology scheduler replaces sched_core_cycle() behind this interface.
 *
 * Ownership: a snapshot owns everything added to it (ids are copied); a
 * placement owns its arrays (sched_placement_clear frees them).
 */
#ifndef TY_SCHED_CORE_H
#define TY_SCHED_CORE_H

#include "ty_err.h"

#include <stdbool.h>
#include <stdint.h>

struct sched_snapshot; /* opaque */

/* A gang: `nodes` distinct nodes with `gpus_per_node` free GPUs each. */
struct sched_gang {
	int64_t job;
	int nodes;
	int gpus_per_node;
	bool per_node; /* launch per_node: one process per node, else one per GPU */
};

struct sched_placement {
	int64_t job;
	int nnodes;
	int gpus_per_node;
	int local_ranks; /* processes per node */
	int world_size;	 /* nnodes × local_ranks */
	int master_port; /* on node[0] */
	int *node;	 /* nnodes snapshot indices in node-rank order; node[0] is the master */
	int *gpus;	 /* nnodes × gpus_per_node GPU indices, row r for node[r], ascending */
};

/*
 * New empty snapshot; rendezvous ports are chosen from [port_lo, port_hi].
 * NULL when out of memory.
 */
struct sched_snapshot *sched_snapshot_new(int port_lo, int port_hi);
void sched_snapshot_free(struct sched_snapshot *s);

/*
 * Add a node that may take work (id copied). Nodes are tried in the order
 * they are added. Returns the node's index (>= 0), or TY_EINVAL (negative
 * GPU count, duplicate id), TY_ENOMEM.
 */
int sched_snapshot_add_node(struct sched_snapshot *s, const char *id, int gpus, struct ty_err *err);
/* Index of a node, or -1. */
int sched_snapshot_find(const struct sched_snapshot *s, const char *id);
int sched_snapshot_count(const struct sched_snapshot *s);
/* Borrowed id of node i. */
const char *sched_snapshot_node_id(const struct sched_snapshot *s, int i);
/* GPUs of node i that nothing holds. */
int sched_snapshot_free_gpus(const struct sched_snapshot *s, int i);

/* Mark GPU `gpu` of node i held (an index outside the node is ignored). */
void sched_snapshot_use_gpu(struct sched_snapshot *s, int i, int gpu);
/* Mark `port` on node i held by a rendezvous. TY_ENOMEM on failure. */
int sched_snapshot_use_port(struct sched_snapshot *s, int i, int port, struct ty_err *err);
/* Whether port is held on node i. */
bool sched_snapshot_port_used(const struct sched_snapshot *s, int i, int port);

/*
 * First fit of one gang: the first `nodes` nodes (in snapshot order) with
 * enough free GPUs, the master being the first of them with a free port;
 * on each node the lowest free GPU indices. Nothing in s changes.
 * Returns 0 with *out filled (new arrays), TY_ENOTFOUND when the gang does
 * not fit now (err says why, for a pending reason), TY_EINVAL for an
 * impossible gang (nodes < 1, gpus_per_node < 0), TY_ENOMEM.
 */
int sched_core_place(struct sched_placement *out, const struct sched_snapshot *s,
		     const struct sched_gang *g, struct ty_err *err);

/* Mark a placement's GPUs and port held in s (after it was committed). */
int sched_core_take(struct sched_snapshot *s, const struct sched_placement *p, struct ty_err *err);

void sched_placement_clear(struct sched_placement *p);

/*
 * One scheduling pass: gangs are tried in the given order, first fit, each
 * placed gang taken from s before the next is tried; gangs that do not fit
 * are skipped (they stay pending). *out is a new array of *nout placements
 * (free with sched_placements_free); gangs that are impossible are skipped
 * too. Fails only with TY_ENOMEM.
 */
int sched_core_cycle(struct sched_placement **out, int *nout, struct sched_snapshot *s,
		     const struct sched_gang *gangs, int ngangs, struct ty_err *err);
void sched_placements_free(struct sched_placement *p, int n);

#endif
