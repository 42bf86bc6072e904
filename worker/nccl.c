/*
 * The NCCL backend of trainyard-allreduce, a module the program loads with
 * dlopen only for --backend nccl|auto, so the program itself starts on nodes
 * without libcudart or libnccl.
 */
#include "allreduce.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

_Static_assert(NCCL_UNIQUE_ID_BYTES == AR_NCCL_ID_BYTES, "NCCL unique id size changed");

#define CUDA_OK(call, what)                                                                        \
	do {                                                                                       \
		cudaError_t ce_ = (call);                                                          \
		if (ce_ != cudaSuccess) {                                                          \
			snprintf(msg, msgsz, "%s: %s (CUDA error %d)", what,                       \
				 cudaGetErrorString(ce_), (int)ce_);                               \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

#define NCCL_OK(call, what)                                                                        \
	do {                                                                                       \
		ncclResult_t ne_ = (call);                                                         \
		if (ne_ != ncclSuccess) {                                                          \
			snprintf(msg, msgsz, "%s: %s", what, ncclGetErrorString(ne_));             \
			goto out;                                                                  \
		}                                                                                  \
	} while (0)

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int device_count(char *msg, size_t msgsz)
{
	int n = 0;

	CUDA_OK(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
	return n;
out:
	return -1;
}

static int unique_id(unsigned char id[AR_NCCL_ID_BYTES], char *msg, size_t msgsz)
{
	ncclUniqueId u;

	NCCL_OK(ncclGetUniqueId(&u), "ncclGetUniqueId");
	memcpy(id, u.internal, AR_NCCL_ID_BYTES);
	return 0;
out:
	return -1;
}

/* ~1 ms between polls of a communicator or stream that is not done */
static void pause_briefly(void)
{
	struct timespec ts = {0, 1000000};

	nanosleep(&ts, NULL);
}

/*
 * Wait for a non-blocking communicator to leave ncclInProgress (its init
 * or an enqueued call), or for its error; false with msg on error or past
 * the deadline.
 */
static bool comm_ready(ncclComm_t comm, double deadline, const char *what, double timeout,
		       char *msg, size_t msgsz)
{
	ncclResult_t state;

	for (;;) {
		if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
			state = ncclInternalError;
		if (state == ncclSuccess)
			return true;
		if (state != ncclInProgress) {
			snprintf(msg, msgsz, "%s: %s", what, ncclGetErrorString(state));
			return false;
		}
		if (now_s() > deadline) {
			snprintf(msg, msgsz, "%s: not done within the %g s timeout", what, timeout);
			return false;
		}
		pause_briefly();
	}
}

/*
 * Wait for the stream's work (the all-reduce) while watching the
 * communicator: a peer that died shows as its async error, a hang as the
 * deadline passing.
 */
static bool stream_done(cudaStream_t stream, ncclComm_t comm, double deadline, double timeout,
			char *msg, size_t msgsz)
{
	cudaError_t ce;
	ncclResult_t state;

	while ((ce = cudaStreamQuery(stream)) == cudaErrorNotReady) {
		if (ncclCommGetAsyncError(comm, &state) == ncclSuccess && state != ncclSuccess &&
		    state != ncclInProgress) {
			snprintf(msg, msgsz, "ncclAllReduce: %s", ncclGetErrorString(state));
			return false;
		}
		if (now_s() > deadline) {
			snprintf(msg, msgsz, "ncclAllReduce: not done within the %g s timeout",
				 timeout);
			return false;
		}
		pause_briefly();
	}
	if (ce != cudaSuccess) {
		snprintf(msg, msgsz, "cudaStreamQuery: %s (CUDA error %d)", cudaGetErrorString(ce),
			 (int)ce);
		return false;
	}
	return true;
}

/*
 * The device of this rank: with one visible device, that one (one process
 * per GPU); with several, the local rank's, and never two local ranks on
 * one device. -1 with msg.
 */
static int pick_device(const struct ar_nccl_job *job, int ndev, char *msg, size_t msgsz)
{
	if (ndev <= 0) {
		snprintf(msg, msgsz, "no CUDA device is visible");
		return -1;
	}
	if (ndev == 1)
		return 0;
	if (job->local_world > ndev) {
		snprintf(msg, msgsz,
			 "%d local ranks on %d visible GPUs would put two ranks on one GPU",
			 job->local_world, ndev);
		return -1;
	}
	return job->local_rank;
}

static int run(struct ar_nccl_result *res, const struct ar_nccl_job *job,
	       const unsigned char id[AR_NCCL_ID_BYTES], char *msg, size_t msgsz)
{
	size_t bytes = job->count * ar_dtype_size(job->dtype);
	ncclDataType_t dt = job->dtype == AR_DOUBLE ? ncclFloat64 : ncclFloat32;
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	double deadline = now_s() + job->timeout;
	ncclComm_t comm = NULL;
	cudaStream_t stream = NULL;
	void *host = NULL, *dev = NULL;
	ncclUniqueId u;
	ncclResult_t nr;
	int ndev = 0, rc = -1;
	bool broken = false; /* the communicator errored or hung: abort, never destroy */

	res->bad = -1;
	res->seconds = 0;
	res->best = -1;
	memcpy(u.internal, id, AR_NCCL_ID_BYTES);
	CUDA_OK(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
	if ((res->device = pick_device(job, ndev, msg, msgsz)) < 0)
		goto out;
	CUDA_OK(cudaSetDevice(res->device), "cudaSetDevice");
	CUDA_OK(cudaStreamCreate(&stream), "cudaStreamCreate");
	host = malloc(bytes ? bytes : 1);
	if (!host) {
		snprintf(msg, msgsz, "cannot allocate %zu host bytes", bytes);
		goto out;
	}
	CUDA_OK(cudaMalloc(&dev, bytes ? bytes : 1), "cudaMalloc");
	/* non-blocking: a peer that never comes cannot hang us past the deadline */
	config.blocking = 0;
	nr = ncclCommInitRankConfig(&comm, job->world, u, job->rank, &config);
	if (nr != ncclSuccess && nr != ncclInProgress) {
		snprintf(msg, msgsz, "ncclCommInitRankConfig: %s", ncclGetErrorString(nr));
		broken = comm != NULL;
		goto out;
	}
	if (!comm_ready(comm, deadline, "ncclCommInitRankConfig", job->timeout, msg, msgsz)) {
		broken = true;
		goto out;
	}
	for (int it = 0; it < job->warmup + job->iters; it++) {
		double t0;

		ar_fill(host, job->dtype, job->count, job->rank, job->poison);
		CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
		t0 = now_s();
		nr = ncclAllReduce(dev, dev, job->count, dt, ncclSum, comm, stream);
		if ((nr != ncclSuccess && nr != ncclInProgress) ||
		    (nr == ncclInProgress &&
		     !comm_ready(comm, deadline, "ncclAllReduce", job->timeout, msg, msgsz)) ||
		    !stream_done(stream, comm, deadline, job->timeout, msg, msgsz)) {
			if (nr != ncclSuccess && nr != ncclInProgress)
				snprintf(msg, msgsz, "ncclAllReduce: %s", ncclGetErrorString(nr));
			broken = true;
			goto out;
		}
		if (it >= job->warmup) {
			double t = now_s() - t0;

			res->seconds += t;
			if (res->best < 0 || t < res->best)
				res->best = t;
		}
		CUDA_OK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
		res->bad = ar_check(host, job->dtype, job->count, job->world, &res->got);
		if (res->bad >= 0)
			break;
	}
	rc = 0;
out:
	if (comm && broken) {
		size_t n = strlen(msg);

		ncclCommAbort(comm); /* frees what a hung or failed communicator holds */
		snprintf(msg + n, msgsz - n, "; communicator aborted");
	} else if (comm) {
		ncclCommDestroy(comm);
	}
	if (dev)
		cudaFree(dev);
	if (stream)
		cudaStreamDestroy(stream);
	free(host);
	return rc;
}

static const struct ar_nccl_ops ops = {
    .abi = AR_NCCL_ABI,
    .device_count = device_count,
    .unique_id = unique_id,
    .run = run,
};

const struct ar_nccl_ops *trainyard_allreduce_nccl(void)
{
	return &ops;
}
