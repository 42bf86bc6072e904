/*
 * executor/inventory.c: the GPU probe through the NVML stand-in built by
 * the tests (TY_FAKE_NVML, tests/unit/executor/fake_nvml.c, driven by the
 * control file FAKE_NVML_FILE) with a fake sysfs tree for NUMA nodes, and
 * hw_probe's fallback to the CUDA runtime.
 */
#include "hw.h"
#include "ty_test.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define UUID1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
#define MIG0 "MIG-01234567-89ab-cdef-0123-456789abcdef"
#define MIG1 "MIG-fedcba98-7654-3210-fedc-ba9876543210"

static const char *env(const char *var)
{
	const char *p = getenv(var);

	if (!p || !*p)
		FAIL("%s is not set (tests/executor.cmake sets it)", var);
	return p ? p : "";
}

/* A control file with the given content (ty_test_jf quoting); FAKE_NVML_FILE names it. */
static void control(const char *json)
{
	static char path[64];
	FILE *f;
	int fd;

	if (!*path) {
		snprintf(path, sizeof(path), "/tmp/ty-fake-nvml-XXXXXX");
		if ((fd = mkstemp(path)) < 0)
			FAIL("mkstemp: %s", strerror(errno));
		else
			close(fd);
	}
	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs(json, f);
	fclose(f);
	setenv("FAKE_NVML_FILE", path, 1);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* <root>/bus/pci/devices/0000:18:00.0/numa_node = 1; 0000:3b:00.0 has none */
static const char *sysfs(void)
{
	static char root[64];
	char *dir;

	if (*root)
		return root;
	snprintf(root, sizeof(root), "/tmp/ty-nvml-sysfs-XXXXXX");
	if (!mkdtemp(root))
		FAIL("mkdtemp: %s", strerror(errno));
	REQUIRE_INT_EQ(mkdir(ty_test_strf("%s/bus", root), 0755), 0);
	REQUIRE_INT_EQ(mkdir(ty_test_strf("%s/bus/pci", root), 0755), 0);
	REQUIRE_INT_EQ(mkdir(ty_test_strf("%s/bus/pci/devices", root), 0755), 0);
	dir = ty_test_strf("%s/bus/pci/devices/0000:18:00.0", root);
	REQUIRE_INT_EQ(mkdir(dir, 0755), 0);
	write_file(ty_test_strf("%s/numa_node", dir), "1\n");
	dir = ty_test_strf("%s/bus/pci/devices/0000:3b:00.0", root);
	REQUIRE_INT_EQ(mkdir(dir, 0755), 0);
	write_file(ty_test_strf("%s/numa_node", dir), "-1\n");
	return root;
}

#define GPU_A                                                                                      \
	"{'uuid':'" UUID0 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"                    \
	"'pci_bus_id':'00000000:18:00.0','mig_mode':'disabled'}"
#define GPU_B_MIG                                                                                  \
	"{'uuid':'" UUID1 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"                    \
	"'pci_bus_id':'00000000:3B:00.0','mig_mode':'enabled','mig_devices':['" MIG0 "','" MIG1    \
	"']}"

/* How many nvmlInit_v2 the stand-in has seen without their nvmlShutdown. */
static int open_inits(void)
{
	void *h = dlopen(env("TY_FAKE_NVML"), RTLD_NOW | RTLD_NOLOAD);
	int *n = h ? (int *)dlsym(h, "fake_nvml_open") : NULL;
	int v = n ? *n : -1;

	if (h)
		dlclose(h);
	return v;
}

TY_TEST(nvml_two_gpus_one_in_mig_mode)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	/* held open so that the stand-in's counter outlives the probe's dlclose */
	void *hold = dlopen(env("TY_FAKE_NVML"), RTLD_NOW);

	REQUIRE(hold != NULL);
	control(ty_test_jf("{'driver_version':'570.86.15','cuda_version':12080,'gpus':[" GPU_A
			   "," GPU_B_MIG "]}"));
	/* a previous inventory's GPUs are replaced, never kept */
	REQUIRE_INT_EQ(hw_inventory_fake(&inv, 3, &err), 0);
	REQUIRE_INT_EQ(hw_nvml_probe(&inv, env("TY_FAKE_NVML"), sysfs(), &err), 0);
	CHECK_STR_EQ(inv.gpu_source, "nvml");
	CHECK_STR_EQ(inv.driver_version, "570.86.15");
	CHECK_STR_EQ(inv.cuda_version, "12.8");
	CHECK_STR_EQ(inv.gpu_fault, "");
	REQUIRE_INT_EQ((long long)inv.ngpus, 2);
	CHECK_INT_EQ(inv.gpus[0].index, 0);
	CHECK_STR_EQ(inv.gpus[0].uuid, UUID0);
	CHECK_STR_EQ(inv.gpus[0].name, "NVIDIA H100 80GB HBM3");
	CHECK_INT_EQ(inv.gpus[0].memory_mb, 81559);
	/* NVML's 8-digit domain and capitals, as sysfs spells it */
	CHECK_STR_EQ(inv.gpus[0].pci_bus_id, "0000:18:00.0");
	CHECK_INT_EQ(inv.gpus[0].numa_node, 1);
	CHECK_INT_EQ(inv.gpus[0].mig_mode, HW_MIG_DISABLED);
	CHECK_INT_EQ(inv.gpus[0].nmig, 0);
	CHECK_INT_EQ(inv.gpus[1].index, 1);
	CHECK_STR_EQ(inv.gpus[1].uuid, UUID1);
	CHECK_STR_EQ(inv.gpus[1].pci_bus_id, "0000:3b:00.0");
	CHECK_INT_EQ(inv.gpus[1].numa_node, -1); /* sysfs says -1: one node */
	CHECK_INT_EQ(inv.gpus[1].mig_mode, HW_MIG_ENABLED);
	REQUIRE_INT_EQ(inv.gpus[1].nmig, 2);
	CHECK_STR_EQ(inv.gpus[1].mig_uuids[0], MIG0);
	CHECK_STR_EQ(inv.gpus[1].mig_uuids[1], MIG1);
	/* nvmlShutdown matched the init: nothing is held after the probe */
	CHECK_INT_EQ(open_inits(), 0);
	hw_inventory_clear(&inv);
	dlclose(hold);
}

TY_TEST(nvml_failures)
{
	static const struct {
		const char *name;
		const char *control;
		int rc;
		size_t ngpus;
		const char *msg;   /* substring of the error ("" none) */
		const char *fault; /* substring of inv.gpu_fault ("" none) */
	} rows[] = {
	    {"nvmlInit_v2 fails", "{'init_error':9,'gpus':[" GPU_A "]}", TY_EUNAVAIL, 0,
	     "nvmlInit_v2: Driver Not Loaded (error 9)", ""},
	    {"no control file: the stand-in's init fails", NULL, TY_EUNAVAIL, 0,
	     "nvmlInit_v2: Unknown Error (error 999)", ""},
	    {"counting fails", "{'count_error':15,'gpus':[" GPU_A "]}", TY_EIO, 0,
	     "nvmlDeviceGetCount_v2: GPU is lost (error 15)", ""},
	    {"no GPU", "{'gpus':[]}", TY_ENOTFOUND, 0, "reports no GPU", ""},
	    {"a GPU's handle cannot be had: the other is kept",
	     "{'gpus':[" GPU_A ",{'uuid':'" UUID1 "','name':'x','memory_mb':1,"
	     "'pci_bus_id':'00000000:3B:00.0','handle_error':15}]}",
	     0, 1, "", "GPU 1: nvmlDeviceGetHandleByIndex_v2: GPU is lost (error 15)"},
	    {"a GPU's UUID cannot be read",
	     "{'gpus':[{'uuid':'" UUID0 "','name':'x','memory_mb':1,"
	     "'pci_bus_id':'00000000:18:00.0','uuid_error':2}," GPU_B_MIG "]}",
	     0, 1, "", "GPU 0: nvmlDeviceGetUUID: Invalid Argument (error 2)"},
	    {"no GPU can be read",
	     "{'gpus':[{'uuid':'" UUID0 "','name':'x','memory_mb':1,"
	     "'pci_bus_id':'00000000:18:00.0','handle_error':15}]}",
	     TY_EIO, 0, "no GPU could be read: GPU 0: nvmlDeviceGetHandleByIndex_v2", "GPU 0: "},
	    {"a bus id that is not one",
	     "{'gpus':[{'uuid':'" UUID0 "','name':'x','memory_mb':1,'pci_bus_id':'nowhere'}]}",
	     TY_EIO, 0, "bus id 'nowhere' not understood",
	     "GPU 0: nvmlDeviceGetPciInfo_v3: bus id"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct hw_inventory inv = {0};
		struct ty_err err = {0};

		ty_test_context("%s", rows[i].name);
		if (rows[i].control)
			control(ty_test_jf("%s", rows[i].control));
		else
			unsetenv("FAKE_NVML_FILE");
		CHECK_INT_EQ(hw_nvml_probe(&inv, env("TY_FAKE_NVML"), sysfs(), &err), rows[i].rc);
		CHECK_INT_EQ((long long)inv.ngpus, (long long)rows[i].ngpus);
		if (!strstr(err.msg, rows[i].msg))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].msg);
		if (rows[i].rc && !strstr(err.msg, env("TY_FAKE_NVML")))
			FAIL("message '%s' does not name the library", err.msg);
		if (!strstr(inv.gpu_fault, rows[i].fault) || (!*rows[i].fault && *inv.gpu_fault))
			FAIL("gpu_fault '%s', expected '%s'", inv.gpu_fault, rows[i].fault);
		CHECK_STR_EQ(inv.gpu_source, rows[i].rc ? "" : "nvml");
		hw_inventory_clear(&inv);
	}
}

TY_TEST(nvml_library_missing)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};

	CHECK_INT_EQ(hw_nvml_probe(&inv, "/nonexistent/libnvidia-ml.so.1", NULL, &err),
		     TY_EUNAVAIL);
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	if (!strstr(err.msg, "no NVML: cannot load '/nonexistent/libnvidia-ml.so.1': "))
		FAIL("message '%s'", err.msg);
	ty_err_clear(&err);
	/* a library that is not NVML lacks its symbols */
	CHECK_INT_EQ(hw_nvml_probe(&inv, env("TY_FAKE_CUDART"), NULL, &err), TY_EUNAVAIL);
	if (!strstr(err.msg, "lacks nvmlInit_v2"))
		FAIL("message '%s'", err.msg);
}

/* hw_probe: NVML first; the CUDA runtime only when NVML cannot be loaded or initialised */
TY_TEST(probe_prefers_nvml_and_falls_back_to_cudart)
{
	struct hw_inventory inv = {0};
	struct ty_err err = {0};

	setenv("FAKE_CUDART", "2", 1);
	control(
	    ty_test_jf("{'driver_version':'570.86.15','cuda_version':12080,'gpus':[" GPU_A "]}"));
	REQUIRE_INT_EQ(hw_probe(&inv, env("TY_FAKE_NVML"), env("TY_FAKE_CUDART"), &err), 0);
	CHECK_STR_EQ(inv.gpu_source, "nvml");
	CHECK_INT_EQ((long long)inv.ngpus, 1);
	hw_inventory_clear(&inv);

	/* NVML missing: the CUDA runtime's two GPUs */
	REQUIRE_INT_EQ(
	    hw_probe(&inv, "/nonexistent/libnvidia-ml.so.1", env("TY_FAKE_CUDART"), &err), 0);
	CHECK_STR_EQ(inv.gpu_source, "cudart");
	CHECK_INT_EQ((long long)inv.ngpus, 2);
	CHECK_INT_EQ(inv.gpus[0].mig_mode, HW_MIG_UNKNOWN);
	CHECK_STR_EQ(inv.driver_version, "");
	hw_inventory_clear(&inv);

	/* nvmlInit_v2 failing is the same */
	control(ty_test_jf("{'init_error':9,'gpus':[" GPU_A "]}"));
	REQUIRE_INT_EQ(hw_probe(&inv, env("TY_FAKE_NVML"), env("TY_FAKE_CUDART"), &err), 0);
	CHECK_STR_EQ(inv.gpu_source, "cudart");
	hw_inventory_clear(&inv);

	/* NVML that works but finds no GPU is believed: no fallback */
	control(ty_test_jf("{'gpus':[]}"));
	REQUIRE_INT_EQ(hw_probe(&inv, env("TY_FAKE_NVML"), env("TY_FAKE_CUDART"), &err), 0);
	CHECK_STR_EQ(inv.gpu_source, "");
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	hw_inventory_clear(&inv);

	/* neither: no GPU, no failure */
	REQUIRE_INT_EQ(
	    hw_probe(&inv, "/nonexistent/libnvidia-ml.so.1", "/nonexistent/libcudart.so", &err), 0);
	CHECK_INT_EQ((long long)inv.ngpus, 0);
	CHECK_STR_EQ(inv.gpu_source, "");
	hw_inventory_clear(&inv);
	unsetenv("FAKE_CUDART");
}

TY_TEST(numa_node_from_sysfs)
{
	CHECK_INT_EQ(hw_numa_node(sysfs(), "00000000:18:00.0"), 1);
	CHECK_INT_EQ(hw_numa_node(sysfs(), "0000:18:00.0"), 1);
	CHECK_INT_EQ(hw_numa_node(sysfs(), "0000:3B:00.0"), -1);
	CHECK_INT_EQ(hw_numa_node(sysfs(), "0000:5e:00.0"), -1); /* no such device */
	CHECK_INT_EQ(hw_numa_node(sysfs(), "../../etc"), -1);
	CHECK_INT_EQ(hw_numa_node(sysfs(), ""), -1);
}
