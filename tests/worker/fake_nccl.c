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
 * Only a world of one sums right (the buffer is left as it is).
 */
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLLS 3 /* in progress this many times before done */

struct ncclComm {
	int polls; /* left before the init or the last call is done */
};

static int stream_polls; /* left before the stream's work is done; < 0: never */

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
	return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream)
{
	(void)stream;
	return stream_polls < 0 ? cudaErrorLaunchTimeout : cudaSuccess;
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
	(void)nranks;
	(void)id;
	(void)rank;
	note("init blocking=%d", config ? config->blocking : -1);
	if (!(*comm = calloc(1, sizeof(**comm))))
		return ncclSystemError;
	(*comm)->polls = strcmp(mode(), "init_hang") ? POLLS : -1;
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

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
			   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
	(void)send;
	(void)recv;
	(void)count;
	(void)type;
	(void)op;
	(void)comm;
	(void)stream;
	note("allreduce%.0d", 0);
	/* a world of one: the sum is the buffer itself */
	stream_polls = !strcmp(mode(), "ok") ? POLLS : -1;
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
