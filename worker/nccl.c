/*
 * The NCCL backend of trainyard-allreduce, a module the program loads with
 * dlopen only for --backend nccl|auto, so the program itself starts on nodes
 * without libcudart or libnccl.
 */
#include "allreduce.h"

#include <cuda_runtime_api.h>
#include <nccl.h>
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

static int run(struct ar_nccl_result *res, const struct ar_nccl_job *job,
	       const unsigned char id[AR_NCCL_ID_BYTES], char *msg, size_t msgsz)
{
	size_t bytes = job->count * ar_dtype_size(job->dtype);
	ncclDataType_t dt = job->dtype == AR_DOUBLE ? ncclFloat64 : ncclFloat32;
	ncclComm_t comm = NULL;
	cudaStream_t stream = NULL;
	void *host = NULL, *dev = NULL;
	ncclUniqueId u;
	int ndev = 0, rc = -1;

	res->bad = -1;
	res->seconds = 0;
	memcpy(u.internal, id, AR_NCCL_ID_BYTES);
	CUDA_OK(cudaGetDeviceCount(&ndev), "cudaGetDeviceCount");
	if (ndev <= 0) {
		snprintf(msg, msgsz, "no CUDA device is visible");
		goto out;
	}
	/* one process per GPU sees one device; one per node picks by local rank */
	res->device = job->local_rank % ndev;
	CUDA_OK(cudaSetDevice(res->device), "cudaSetDevice");
	CUDA_OK(cudaStreamCreate(&stream), "cudaStreamCreate");
	host = malloc(bytes ? bytes : 1);
	if (!host) {
		snprintf(msg, msgsz, "cannot allocate %zu host bytes", bytes);
		goto out;
	}
	CUDA_OK(cudaMalloc(&dev, bytes ? bytes : 1), "cudaMalloc");
	NCCL_OK(ncclCommInitRank(&comm, job->world, u, job->rank), "ncclCommInitRank");
	for (int it = 0; it < job->warmup + job->iters; it++) {
		double t0;

		ar_fill(host, job->dtype, job->count, job->rank, job->poison);
		CUDA_OK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
		t0 = now_s();
		NCCL_OK(ncclAllReduce(dev, dev, job->count, dt, ncclSum, comm, stream),
			"ncclAllReduce");
		CUDA_OK(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
		if (it >= job->warmup)
			res->seconds += now_s() - t0;
		CUDA_OK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
		res->bad = ar_check(host, job->dtype, job->count, job->world, &res->got);
		if (res->bad >= 0)
			break;
	}
	rc = 0;
out:
	if (comm)
		ncclCommDestroy(comm);
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
