/*
 * A fake CUDA runtime for the GPU probe's tests, loaded by path through
 * the same dlopen code as the real libcudart. FAKE_CUDART selects what it
 * does on each call:
 *   "0"          cudaGetDeviceCount says 0 devices (and cudaSuccess)
 *   "2"          two devices (the default when unset)
 *   "nodevice"   cudaErrorNoDevice (100)
 *   "driver"     cudaErrorInsufficientDriver (35)
 *   "props"      two devices, cudaGetDeviceProperties_v2 of device 1 fails (101)
 *   "busid"      two devices, cudaDeviceGetPCIBusId of device 0 fails (999)
 *   "huge"       2000 devices
 * The layout written by the properties call is the head of CUDA's
 * struct cudaDeviceProp (name[256], uuid[16], luid[8], unsigned int,
 * size_t totalGlobalMem); the rest of the caller's buffer is scribbled on
 * up to 1008 bytes, the size of the whole struct in CUDA 13.
 *
 * Built three times (tests/executor.cmake): as is; with FAKE_CUDART_V1,
 * exporting the pre-CUDA-12 name cudaGetDeviceProperties instead of the
 * _v2 one; with FAKE_CUDART_NO_BUSID, lacking cudaDeviceGetPCIBusId.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROP_SIZE 1008

#ifdef FAKE_CUDART_V1
#define PROPS_FN cudaGetDeviceProperties
#else
#define PROPS_FN cudaGetDeviceProperties_v2
#endif

/* exported: the names of the CUDA runtime API */
int cudaGetDeviceCount(int *count);
int PROPS_FN(void *prop, int device);
#ifndef FAKE_CUDART_NO_BUSID
int cudaDeviceGetPCIBusId(char *id, int len, int device);
#endif
const char *cudaGetErrorString(int error);

static const char *mode(void)
{
	const char *m = getenv("FAKE_CUDART");

	return m && *m ? m : "2";
}

int cudaGetDeviceCount(int *count)
{
	const char *m = mode();

	*count = 0;
	if (!strcmp(m, "nodevice"))
		return 100;
	if (!strcmp(m, "driver"))
		return 35;
	*count = !strcmp(m, "0") ? 0 : !strcmp(m, "huge") ? 2000 : 2;
	return 0;
}

int PROPS_FN(void *prop, int device)
{
	struct {
		char name[256];
		unsigned char uuid[16];
		char luid[8];
		unsigned int mask;
		size_t total;
	} head;

	if (!strcmp(mode(), "props") && device == 1)
		return 101;
	if (device < 0 || device > 1)
		return 101;
	memset(prop, 0xab, PROP_SIZE);
	memset(&head, 0, sizeof(head));
	snprintf(head.name, sizeof(head.name), "Fake H100 80GB HBM3 #%d", device);
	for (int i = 0; i < 16; i++)
		head.uuid[i] = (unsigned char)(device * 16 + i);
	head.total = (size_t)81559 * 1024 * 1024 + 12345; /* a part-MiB is dropped */
	memcpy(prop, &head, sizeof(head));
	return 0;
}

#ifndef FAKE_CUDART_NO_BUSID
int cudaDeviceGetPCIBusId(char *id, int len, int device)
{
	if (!strcmp(mode(), "busid") && device == 0)
		return 999;
	snprintf(id, (size_t)len, "0000:%02X:00.0", 0x18 + device * 0x23);
	return 0;
}
#endif

const char *cudaGetErrorString(int error)
{
	switch (error) {
	case 35:
		return "CUDA driver version is insufficient for CUDA runtime version";
	case 100:
		return "no CUDA-capable device is detected";
	case 101:
		return "invalid device ordinal";
	default:
		return "unknown error";
	}
}
