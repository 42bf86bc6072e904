/*
 * trainyard-allreduce internals shared by the program and its NCCL module:
 * the test pattern every rank contributes, the result check, and the
 * table of functions the NCCL module (loaded with dlopen) exports.
 */
#ifndef AR_ALLREDUCE_H
#define AR_ALLREDUCE_H

#include <stdbool.h>
#include <stddef.h>

enum ar_dtype { AR_FLOAT, AR_DOUBLE };

/* Size in bytes of one element of t. */
size_t ar_dtype_size(enum ar_dtype t);
/* "float" or "double". */
const char *ar_dtype_name(enum ar_dtype t);

/*
 * Fill buf (count elements of t) with rank's contribution. The values are
 * small integers, so every partial sum is exact in float for world sizes
 * up to 1024 and the check can compare for equality. poison >= 0 adds 1
 * to that element (to prove the check catches a wrong sum).
 */
void ar_fill(void *buf, enum ar_dtype t, size_t count, int rank, long long poison);
/* The element i every rank must hold after summing ranks 0..world-1. */
double ar_expected(size_t i, int world);
/*
 * Check buf against ar_expected. Returns the first wrong index, or -1 when
 * every element is right; *got holds the wrong value.
 */
long long ar_check(const void *buf, enum ar_dtype t, size_t count, int world, double *got);

/* ---- the NCCL module (nccl.c, built only with the CUDA toolkit and NCCL) ---- */

#define AR_NCCL_ABI 3
#define AR_NCCL_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */
#define AR_NCCL_SYMBOL "trainyard_allreduce_nccl"
#define AR_NCCL_MODULE "trainyard-allreduce-nccl.so"

struct ar_nccl_job {
	int rank;
	int world;
	int local_rank;
	int local_world; /* ranks on this node: never two on one GPU */
	double timeout;	 /* seconds for the whole run: init and every iteration */
	enum ar_dtype dtype;
	size_t count;
	int iters;
	int warmup;
	long long poison;
};

struct ar_nccl_result {
	int device;	/* CUDA device used */
	double seconds; /* sum over the timed iterations */
	double best;	/* the fastest timed iteration */
	long long bad;	/* first wrong index or -1 */
	double got;	/* its value */
};

/* Every function writes a one-line reason into msg (msgsz bytes) on failure. */
struct ar_nccl_ops {
	int abi; /* AR_NCCL_ABI */
	/* Visible CUDA devices (>= 0), or -1 when the runtime reports an error. */
	int (*device_count)(char *msg, size_t msgsz);
	/* Rank 0: a new NCCL unique id. 0 or -1. */
	int (*unique_id)(unsigned char id[AR_NCCL_ID_BYTES], char *msg, size_t msgsz);
	/* Run the timed all-reduce and check the result. 0 or -1. */
	int (*run)(struct ar_nccl_result *res, const struct ar_nccl_job *job,
		   const unsigned char id[AR_NCCL_ID_BYTES], char *msg, size_t msgsz);
};

/* The module's one exported symbol (AR_NCCL_SYMBOL). */
const struct ar_nccl_ops *trainyard_allreduce_nccl(void);

/* ---- the node check's pure parts (nodecheck.c) ---- */

#define AR_NC_NAME_MAX 63 /* a node name: like an executor node id */

/*
 * The network NCCL uses between nodes, as the NCCL environment the
 * executor gives the ranks says (weakest first; unknown: not said).
 */
enum ar_fabric { AR_FABRIC_UNKNOWN, AR_FABRIC_TCP, AR_FABRIC_ROCE, AR_FABRIC_IB };
#define AR_FABRICS 4

/* "unknown", "tcp", "roce" or "ib". */
const char *ar_fabric_name(enum ar_fabric f);

/*
 * The fabric from the values of NCCL_IB_DISABLE, NCCL_IB_HCA and
 * NCCL_IB_GID_INDEX (each NULL when unset): tcp when IB is disabled (a
 * value other than 0), else with HCAs roce when a GID index is set and ib
 * when not, else unknown.
 */
enum ar_fabric ar_fabric_from_env(const char *ib_disable, const char *ib_hca,
				  const char *gid_index);

/* A pair of nodes (node ranks a < b) whose link the node check measures. */
struct ar_pair {
	int a, b;
};

struct ar_nc_node {
	char name[AR_NC_NAME_MAX + 1];
	double gbps; /* score: the best pair it is in, GB/s; < 0 when not measured */
	bool slow;
	enum ar_fabric fabric; /* its leader's NCCL environment (nccl only) */
};

struct ar_nc_verdict {
	int n;			  /* nodes */
	struct ar_nc_node *nodes; /* n entries, by node rank (borrowed) */
	double median;		  /* median score, < 0 when there is none */
	double ratio;		  /* slow when score < ratio x median */
	/* what measured the pairs: "tcp" (leader to leader) or "nccl" (a two-rank all-reduce) */
	const char *measured;
	/* the gang's all-reduce before the check: its backend and bus bandwidth (GB/s) */
	const char *allreduce_backend;
	double allreduce_busbw;
	int nslow;
	char note[160];
	/* set by ar_nc_judge_floor */
	enum ar_fabric fabric; /* the gang's: its weakest node's */
	double floor;	       /* GB/s the gang's all-reduce must reach; < 0: none compared */
	bool below_floor;
	char floor_note[160]; /* why no floor was compared, or that the nodes' fabrics differ */
};

/* Whether s is a usable node name: 1-63 of [A-Za-z0-9._-], alphanumeric first. */
bool ar_nc_name_ok(const char *s);

/*
 * The pairs to measure among n nodes, in order: for n >= 3 each distinct
 * unordered pair among {k, k+1 mod n} and {k, k+2 mod n}; for n = 2 the
 * one pair; none for n <= 1. out needs room for 2n entries. Returns the count.
 */
int ar_nc_pairs(struct ar_pair *out, int n);

/*
 * Judge v->n nodes from the measured pairs (pair_gbps[i] for pairs[i], 0
 * when the pair could not move its bytes): each node's score is its best
 * pair; with n >= 3 a node is slow when its score < v->ratio x the median
 * score. Fills v->nodes[].gbps and .slow, v->median, v->nslow and v->note.
 */
void ar_nc_judge(struct ar_nc_verdict *v, const struct ar_pair *pairs, const double *pair_gbps,
		 int npairs);

/*
 * Compare the gang's NCCL all-reduce (v->allreduce_busbw) with the floor of
 * its fabric, floors[fabric] GB/s (<= 0: none for that fabric). The gang's
 * fabric is its weakest node's (v->nodes[].fabric), unknown when any node's
 * is. Nothing is compared for the tcp backend, one node (the all-reduce
 * never crossed the fabric), an unknown fabric or a fabric without floor:
 * v->floor is then -1 and v->floor_note says why. Sets v->fabric, v->floor,
 * v->below_floor and v->floor_note.
 */
void ar_nc_judge_floor(struct ar_nc_verdict *v, const double floors[AR_FABRICS]);

/* Median of n values (mean of the middle two when n is even); -1 when n is 0. */
double ar_nc_median(const double *v, int n);

/*
 * The JSON line rank 0 prints (without the newline): {"node_check": {...}}
 * with the nodes (and for nccl their fabric), the pairs and bytes measured,
 * the median, the slow names, the ratio, the note, what measured the pairs
 * ("measured": v->measured) and the gang's all-reduce ("allreduce":
 * backend, bus bandwidth, fabric, floor, below_floor, floor_note). Returns
 * a new string (free), NULL when out of memory.
 */
char *ar_nc_json(const struct ar_nc_verdict *v, const struct ar_pair *pairs,
		 const double *pair_gbps, int npairs, unsigned long long bytes);

/*
 * "slow node(s): node-b 0.00105 GB/s, gang median 1.2 GB/s (< 0.5 x median)"
 * and/or "gang all-reduce 0.0133 GB/s is below the ib floor of 5 GB/s (nccl
 * bus bandwidth, 3 nodes)", joined by "; ", into buf (bufsz bytes,
 * truncated); "" when no node is slow and the floor was met.
 */
void ar_nc_message(char *buf, size_t bufsz, const struct ar_nc_verdict *v);

#endif
