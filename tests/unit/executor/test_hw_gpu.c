/*
 * executor/inventory.c: the GPU probe through a fake libcudart built by the
 * tests (TY_FAKE_CUDART, _V1, _NO_BUSID: paths set by tests/executor.cmake)
 * and through the real CUDA runtime of this machine, which has no GPU.
 */
#include "hw.h"
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>

static const char *lib(const char *var)
{
	const char *p = getenv(var);

	if (!p || !*p)
		FAIL("%s is not set (tests/executor.cmake sets it)", var);
	return p ? p : "";
}

TY_TEST(gpus_fake_cudart)
{
	static const struct {
		const char *name;
		const char *libvar; /* environment variable naming the library */
		const char *mode;   /* FAKE_CUDART */
		int rc;
		size_t ngpus;
		const char *msg; /* substring of the error */
	} rows[] = {
	    {"two devices", "TY_FAKE_CUDART", "2", 0, 2, NULL},
	    {"two devices, pre-12 symbol name", "TY_FAKE_CUDART_V1", "2", 0, 2, NULL},
	    {"zero devices", "TY_FAKE_CUDART", "0", TY_ENOTFOUND, 0, "reports no device"},
	    {"cudaErrorNoDevice", "TY_FAKE_CUDART", "nodevice", TY_ENOTFOUND, 0,
	     "cudaGetDeviceCount: no CUDA-capable device is detected (error 100)"},
	    {"driver too old", "TY_FAKE_CUDART", "driver", TY_EIO, 0,
	     "cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
	     "(error 35)"},
	    {"properties of one device fail", "TY_FAKE_CUDART", "props", TY_EIO, 0,
	     "cudaGetDeviceProperties of GPU 1: invalid device ordinal (error 101)"},
	    {"bus id fails", "TY_FAKE_CUDART", "busid", TY_EIO, 0,
	     "cudaDeviceGetPCIBusId of GPU 0: unknown error (error 999)"},
	    {"absurd device count", "TY_FAKE_CUDART", "huge", TY_EIO, 0,
	     "reports 2000 devices (over 1024)"},
	    {"missing symbol", "TY_FAKE_CUDART_NO_BUSID", "2", TY_EUNAVAIL, 0,
	     "lacks cudaDeviceGetPCIBusId"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *libs[] = {lib(rows[i].libvar), NULL};
		struct hw_inventory inv = {0};
		struct ty_err err = {0};

		ty_test_context("%s", rows[i].name);
		setenv("FAKE_CUDART", rows[i].mode, 1);
		/* a previous probe's GPUs are replaced, never kept */
		REQUIRE_INT_EQ(hw_inventory_fake(&inv, 3, &err), 0);
		CHECK_INT_EQ(hw_gpus_probe(&inv, libs, &err), rows[i].rc);
		CHECK_INT_EQ((long long)inv.ngpus, (long long)rows[i].ngpus);
		if (rows[i].msg && !strstr(err.msg, rows[i].msg))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].msg);
		if (rows[i].msg && !strstr(err.msg, libs[0]))
			FAIL("message '%s' does not name the library", err.msg);
		if (rows[i].ngpus == 2) {
			CHECK_INT_EQ(inv.gpus[0].index, 0);
			CHECK_STR_EQ(inv.gpus[0].name, "Fake H100 80GB HBM3 #0");
			CHECK_INT_EQ(inv.gpus[0].memory_mb, 81559);
			CHECK_STR_EQ(inv.gpus[0].uuid, "GPU-00010203-0405-0607-0809-0a0b0c0d0e0f");
			CHECK_STR_EQ(inv.gpus[0].pci_bus_id, "0000:18:00.0");
			CHECK_INT_EQ(inv.gpus[1].index, 1);
			CHECK_STR_EQ(inv.gpus[1].name, "Fake H100 80GB HBM3 #1");
			CHECK_STR_EQ(inv.gpus[1].uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1e1f");
			CHECK_STR_EQ(inv.gpus[1].pci_bus_id, "0000:3B:00.0");
		}
		hw_inventory_clear(&inv);
	}
	unsetenv("FAKE_CUDART");
}

TY_TEST(gpus_no_library)
{
	const char *missing[] = {"/nonexistent/libcudart.so.13", "libcudart-no-such.so", NULL};
	const char *none[] = {NULL};
	struct hw_inventory inv = {0};
	struct ty_err err = {0};

	CHECK_INT_EQ(hw_gpus_probe(&inv, missing, &err), TY_EUNAVAIL);
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	if (!strstr(err.msg, "no CUDA runtime: cannot load /nonexistent/libcudart.so.13, "
			     "libcudart-no-such.so (last: "))
		FAIL("message '%s'", err.msg);
	ty_err_clear(&err);
	CHECK_INT_EQ(hw_gpus_probe(&inv, none, &err), TY_EUNAVAIL);
	if (!strstr(err.msg, "(no library given)"))
		FAIL("message '%s'", err.msg);
}

TY_TEST(gpus_first_loadable_library_wins)
{
	const char *libs[] = {"/nonexistent/libcudart.so", lib("TY_FAKE_CUDART"), NULL};
	struct hw_inventory inv = {0};
	struct ty_err err = {0};

	setenv("FAKE_CUDART", "2", 1);
	CHECK_INT_EQ(hw_gpus_probe(&inv, libs, &err), 0);
	CHECK_INT_EQ((long long)inv.ngpus, 2);
	hw_inventory_clear(&inv);
	unsetenv("FAKE_CUDART");
}

/* This machine has the CUDA runtime but no GPU and no driver: the no-device path. */
TY_TEST(gpus_real_runtime_without_gpu)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	int rc = hw_gpus_probe(&inv, hw_cudart_default, &err);

	/* the runtime loads (libcudart.so is on the loader path here) and reports no device */
	CHECK(rc == TY_EIO || rc == TY_ENOTFOUND);
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	CHECK(inv.gpus == NULL);
	if (!strstr(err.msg, "cudaGetDeviceCount: "))
		FAIL("message '%s' does not name the failing call", err.msg);
	ty_test_note("real probe: %s", err.msg);
}

TY_TEST(probe_real_machine)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};

	/* no NVML, no GPU, no RDMA device here: an empty, non-simulated inventory */
	CHECK_INT_EQ(hw_probe(&inv, NULL, NULL, &err), 0);
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	CHECK_INT_EQ((long long)inv.nhcas, 0);
	CHECK(!inv.simulated);
	hw_inventory_clear(&inv);
	/* a --cudart path that does not exist is the same: no GPU, no failure */
	CHECK_INT_EQ(hw_probe(&inv, NULL, "/nonexistent/libcudart.so", &err), 0);
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	hw_inventory_clear(&inv);
}
