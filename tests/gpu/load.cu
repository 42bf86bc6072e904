// A CUDA load for tests/gpu/run: keeps GPU 0 busy for SECONDS (argv[1],
// default 10) with arithmetic kernels on every SM and holds MIB (argv[2],
// default 1024) of device memory, so that utilization, power and memory
// readings move; prints one JSON line. Exit 0, 2 on a CUDA error.
#include <cstdio>
#include <cstdlib>
#include <ctime>

#define CHECK(call)                                                                        \
	do {                                                                               \
		cudaError_t e_ = (call);                                                   \
		if (e_ != cudaSuccess) {                                                   \
			fprintf(stderr, "gpu-load: %s: %s\n", #call, cudaGetErrorString(e_)); \
			return 2;                                                          \
		}                                                                          \
	} while (0)

__global__ void spin(float *out, int iters)
{
	float x = (float)threadIdx.x;

	for (int i = 0; i < iters; i++)
		x = x * 0.9999f + 0.0001f;
	out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 10, t0;
	size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 1024;
	cudaDeviceProp prop;
	float *out, *hold;
	long kernels = 0;
	int blocks;

	CHECK(cudaGetDeviceProperties(&prop, 0));
	blocks = prop.multiProcessorCount * 8;
	CHECK(cudaMalloc(&out, (size_t)blocks * 256 * sizeof(float)));
	CHECK(cudaMalloc(&hold, mib << 20));
	CHECK(cudaMemset(hold, 1, mib << 20));
	t0 = now_s();
	while (now_s() - t0 < secs) {
		spin<<<blocks, 256>>>(out, 1 << 16);
		CHECK(cudaGetLastError());
		CHECK(cudaDeviceSynchronize());
		kernels++;
	}
	printf("{\"device\":\"%s\",\"sms\":%d,\"seconds\":%.1f,\"kernels\":%ld,\"held_mib\":%zu}\n",
	       prop.name, prop.multiProcessorCount, now_s() - t0, kernels, mib);
	cudaFree(hold);
	cudaFree(out);
	return 0;
}
