/*
 * A test-only stand-in for libnccl and libcudart, for the NCCL module of
 * trainyard-allreduce on a machine without a GPU (tests/worker/nccl_module_test.sh).
 * Built once, installed under both libraries' sonames: the module's symbols
 * all resolve to the first one loaded, so the state below is shared.
 *
 * Driven by the environment:
 *   FAKE_CUDA_DEVICES  visible devices (default 1)
 *   FAKE_NCCL          ok (default): init and every all-reduce finish after a
 *                      few polls; init_hang: the communicator stays in
 *                      progress; hang: an all-reduce never finishes;
 *                      remote_error: a peer fails during the all-reduce
 *   FAKE_NCCL_LOG      a file that gets one line per call that matters
 *                      (setdevice N, init, allreduce, abort, destroy)
 *   FAKE_NCCL_GBPS     this process's "link": an all-reduce of B bytes is not
 *                      done before B / (GBPS x 10^9) seconds have passed
 *                      (default: no limit), so one node of a gang, or all of
 *                      them, can be made slow by a known factor
 * Nothing travels between the ranks: an all-reduce adds to the buffer what
 * the other ranks of trainyard-allreduce's test pattern (worker/data.c)
 * would have contributed, so a gang of any size sums right and a poisoned
 * element stays wrong.
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POLLS 3 /* in progress this many times before done */

struct ncclComm {
	int polls; /* left before the init or the last call is done */
	int nranks, rank;
};

static int stream_polls;  /* left before the stream's work is done; < 0: never */
static double stream_due; /* and not before this time (CLOCK_MONOTONIC seconds) */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static const char *mode(void)
{
	const char *m = getenv("FAKE_NCCL");

	return m && *m ? m : "ok";
}

static void note(const char *fmt, int v)
{
	const char *path = getenv("FAKE_NCCL_LOG");
	FILE *f = path ? fopen(path, "a") : NULL;

	if (!f)
		return;
	fprintf(f, fmt, v);
	fputc('\n', f);
	fclose(f);
}

/* ---- libcudart ---- */

cudaError_t cudaGetDeviceCount(int *count)
{
	const char *n = getenv("FAKE_CUDA_DEVICES");

	*count = n ? atoi(n) : 1;
	return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
	note("setdevice %d", device);
	return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream)
{
	static int one;

	*stream = (cudaStream_t)&one;
	return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream)
{
	(void)stream;
	return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream)
{
	(void)stream;
	if (stream_polls < 0)
		return cudaErrorNotReady;
	if (stream_polls > 0) {
		stream_polls--;
		return cudaErrorNotReady;
	}
	return now_s() < stream_due ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	double left = stream_due - now_s();

	(void)stream;
	if (stream_polls < 0)
		return cudaErrorLaunchTimeout;
	if (left > 0) {
		struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};

		nanosleep(&ts, NULL);
	}
	return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t n)
{
	return (*p = malloc(n)) ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p)
{
	free(p);
	return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
	(void)kind;
	memmove(dst, src, n);
	return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e)
{
	return e == cudaSuccess ? "no error" : "fake CUDA error";
}

/* ---- libnccl ---- */

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	memset(id, 7, sizeof(*id));
	return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
				    ncclConfig_t *config)
{
	(void)id;
	note("init blocking=%d", config ? config->blocking : -1);
	if (!(*comm = calloc(1, sizeof(**comm))))
		return ncclSystemError;
	(*comm)->polls = strcmp(mode(), "init_hang") ? POLLS : -1;
	(*comm)->nranks = nranks;
	(*comm)->rank = rank;
	return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
	if (!strcmp(mode(), "remote_error") && stream_polls != 0 && comm->polls == 0) {
		*state = ncclRemoteError;
		return ncclSuccess;
	}
	if (comm->polls < 0) {
		*state = ncclInProgress;
	} else if (comm->polls > 0) {
		comm->polls--;
		*state = ncclInProgress;
	} else {
		*state = ncclSuccess;
	}
	return ncclSuccess;
}

/*
 * What the ranks other than rank of n contribute to element i in
 * trainyard-allreduce's pattern (worker/data.c: rank r gives
 * (r + 1) (1 + i mod 3) + i mod 4093).
 */
static double others(size_t i, int rank, int n)
{
	double all = (double)n * (n + 1) / 2 * (double)(1 + i % 3) + (double)n * (double)(i % 4093);

	return all - ((double)(rank + 1) * (double)(1 + i % 3) + (double)(i % 4093));
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
			   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	const char *gbps = getenv("FAKE_NCCL_GBPS");
	size_t es = type == ncclFloat64 ? sizeof(double) : sizeof(float);

	(void)op;
	(void)stream;
	note("allreduce%.0d", 0);
	if (send != recv)
		memmove(recv, send, count * es);
	for (size_t i = 0; comm->nranks > 1 && i < count; i++) {
		if (type == ncclFloat64)
			((double *)recv)[i] += others(i, comm->rank, comm->nranks);
		else
			((float *)recv)[i] += (float)others(i, comm->rank, comm->nranks);
	}
	stream_polls = !strcmp(mode(), "ok") ? POLLS : -1;
	stream_due =
	    gbps && atof(gbps) > 0 ? now_s() + (double)(count * es) / (atof(gbps) * 1e9) : 0;
	return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
	note("abort%.0d", 0);
	free(comm);
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
	note("destroy%.0d", 0);
	free(comm);
	return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
	switch (r) {
	case ncclSuccess:
		return "no error";
	case ncclRemoteError:
		return "remote process exited or there was a network error";
	case ncclInProgress:
		return "NCCL operation in progress";
	default:
		return "fake NCCL error";
	}
}
