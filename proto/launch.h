/*
 * The launch message's data (docs/dispatch.md, "launch") as a typed struct,
 * with the one encoder the scheduler uses and the one decoder executors use,
 * so that its field names, ranges and defaults live here only.
 *
 * The scheduler encodes an attempt's part once (proto_launch_common: what
 * is the same on every node, stored in attempts.launch to re-send it) and
 * adds each node's part (proto_launch_data). The decoder checks everything
 * beyond JSON types: ranges, the rank arithmetic, the GPU list against the
 * launch mode, environment names.
 */
#ifndef TY_PROTO_LAUNCH_H
#define TY_PROTO_LAUNCH_H

#include "job_spec.h"
#include "proto.h"
#include "ty_err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define PROTO_LAUNCH_MAX_LOCAL_RANKS 1024
#define PROTO_LAUNCH_MAX_GPU_INDEX 1023
#define PROTO_LAUNCH_MAX_ARGS 4096
#define PROTO_LAUNCH_MAX_ENV 1024
#define PROTO_LAUNCH_TOKEN_LEN 47 /* "tym_" and 43 base64url characters */

#define PROTO_LAUNCH_DIGEST_LEN 64 /* lowercase hex SHA-256 of a MANIFEST.json */
#define PROTO_LAUNCH_RESUME_PATH_MAX 4096

/* The checkpoint every node of the gang resumes from (docs/dispatch.md, "Resume"). */
struct proto_launch_resume {
	bool set; /* false: none named (a first attempt, an older scheduler) */
	int64_t step;
	char digest[PROTO_LAUNCH_DIGEST_LEN + 1];
	char *path; /* owned when decoded, borrowed when encoding: where the verifier saw it */
};

/* One node's part of a launch. */
struct proto_launch_node {
	int node_rank;
	int first_rank;
	const int *gpus; /* borrowed when encoding; ngpus device indices */
	int ngpus;
	const char *boot_id; /* the node's boot the launch is for; NULL: any */
};

struct proto_launch {
	int64_t job;
	int64_t attempt;
	/* the attempt's: the same on every node */
	int nnodes;
	int world_size;
	int local_world_size;
	char *master_addr; /* owned */
	int master_port;
	char **command; /* owned; NULL-terminated argv */
	json_t *env;	/* owned reference: object of string values */
	enum proto_launch_mode mode;
	int64_t max_runtime_ms;	  /* 0: no limit */
	int64_t kill_grace_ms;	  /* < 0: the executor's --kill-grace-ms */
	int64_t hang_timeout_ms;  /* 0: no hang detection */
	int64_t start_timeout_ms; /* 0: no start timeout */
	int checkpoint_keep;	  /* valid checkpoints retention keeps */
	int checkpoint_keep_every; /* and every step that is a multiple of it; 0: none */
	bool checkpoint_tier;	   /* move older checkpoints to the object store */
	int checkpoint_signal;	  /* the job's checkpoint signal (spot notices) */
	bool preflight;		  /* run the preflight command before the job's */
	/* the attempt's trial metrics token (TRAINYARD_METRICS_TOKEN); "": none */
	char metrics_token[PROTO_LAUNCH_TOKEN_LEN + 1];
	/* the container: the team's uid and gid (-1: none given), limits, image */
	int64_t uid, gid;
	int cpus;	   /* 0: no CPU limit */
	int64_t memory_mb; /* 0: no memory limit */
	char *image;	   /* owned; NULL: the host's root, read-only */
	/* the team's name, for the GPU series on /metrics; "": none */
	char team[64];
	struct proto_launch_resume resume;
	/* this node's part (decoded; the encoder takes a struct proto_launch_node) */
	int node_rank;
	int first_rank;
	int *gpus; /* owned; ngpus device indices */
	int ngpus;
};

/*
 * The attempt's part of l (node fields ignored) as a new JSON object, or
 * NULL when out of memory. Durations are whole seconds on the wire.
 */
json_t *proto_launch_common(const struct proto_launch *l);
/* common (from proto_launch_common) with node's part: a launch message's data, or NULL. */
json_t *proto_launch_data(const json_t *common, const struct proto_launch_node *node);
/*
 * Check a launch message that proto_decode accepted and copy it into l.
 * l is zeroed first; free it with proto_launch_clear, after a failure too.
 * TY_EINVAL with a message naming the field and the fault.
 */
int proto_launch_decode(struct proto_launch *l, const struct proto_msg *m, struct ty_err *err);
void proto_launch_clear(struct proto_launch *l);

#endif
