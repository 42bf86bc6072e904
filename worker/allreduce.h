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

#define AR_NCCL_ABI 1
#define AR_NCCL_ID_BYTES 128 /* NCCL_UNIQUE_ID_BYTES */
#define AR_NCCL_SYMBOL "trainyard_allreduce_nccl"
#define AR_NCCL_MODULE "trainyard-allreduce-nccl.so"

struct ar_nccl_job {
	int rank;
	int world;
	int local_rank;
	enum ar_dtype dtype;
	size_t count;
	int iters;
	int warmup;
	long long poison;
};

struct ar_nccl_result {
	int device;	/* CUDA device used */
	double seconds; /* sum over the timed iterations */
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

#endif
