/* executor/inventory.c: the CPUs and memory register reports allocatable. */
#include "hw.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A file holding text, under a fresh temporary name; the path is the test's to remove. */
static const char *file_with(const char *text)
{
	char *path = ty_test_strf("%s/meminfo.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	int fd = mkstemp(path);
	FILE *f;

	REQUIRE(fd >= 0);
	REQUIRE((f = fdopen(fd, "w")) != NULL);
	fputs(text, f);
	fclose(f);
	return path;
}

TY_TEST(meminfo_total)
{
	static const struct {
		const char *name, *text;
		int rc;
		int64_t mb;
	} rows[] = {
	    {"linux", "MemTotal:       16318136 kB\nMemFree:  1 kB\n", 0, 15935},
	    {"not first", "Foo: 1 kB\nMemTotal: 2097152 kB\n", 0, 2048},
	    {"missing", "MemFree: 1 kB\n", TY_EPARSE, 0},
	    {"empty", "", TY_EPARSE, 0},
	    {"no unit", "MemTotal: 2097152\n", TY_EPARSE, 0},
	    {"other unit", "MemTotal: 2048 MB\n", TY_EPARSE, 0},
	    {"below a MiB", "MemTotal: 1000 kB\n", TY_EPARSE, 0},
	    {"not a number", "MemTotal: lots kB\n", TY_EPARSE, 0},
	};

	for (size_t k = 0; k < sizeof(rows) / sizeof(rows[0]); k++) {
		const char *path = file_with(rows[k].text);
		struct ty_err err = {0};
		int64_t mb = -1;

		ty_test_context("%s", rows[k].name);
		CHECK_INT_EQ(hw_meminfo_total_mb(&mb, path, &err), rows[k].rc);
		CHECK_INT_EQ(mb, rows[k].mb);
		if (rows[k].rc)
			CHECK(strstr(err.msg, path) != NULL);
		unlink(path);
	}
}

TY_TEST(meminfo_unreadable)
{
	struct ty_err err = {0};
	int64_t mb = -1;

	CHECK_INT_EQ(hw_meminfo_total_mb(&mb, "/nonexistent/meminfo", &err), TY_EIO);
	CHECK_INT_EQ(mb, 0);
	CHECK(strstr(err.msg, "--memory-mb") != NULL);
}

TY_TEST(this_host_has_cpus_and_memory)
{
	struct ty_err err = {0};
	int64_t cpus = 0, mb = 0;

	CHECK_INT_EQ(hw_cpus_online(&cpus, &err), 0);
	CHECK(cpus >= 1);
	CHECK_INT_EQ(hw_meminfo_total_mb(&mb, "/proc/meminfo", &err), 0);
	CHECK(mb >= 1);
}

TY_TEST(allocatable_after_the_reserve)
{
	struct ty_err err = {0};
	int64_t v = -1;

	CHECK_INT_EQ(hw_allocatable(&v, 16, 0, "CPUs", "--reserve-cpus", &err), 0);
	CHECK_INT_EQ(v, 16);
	CHECK_INT_EQ(hw_allocatable(&v, 16, 15, "CPUs", "--reserve-cpus", &err), 0);
	CHECK_INT_EQ(v, 1);
	CHECK_INT_EQ(hw_allocatable(&v, 16, 16, "CPUs", "--reserve-cpus", &err), TY_EINVAL);
	CHECK_INT_EQ(v, 0);
	CHECK_STR_EQ(err.msg, "--reserve-cpus 16 leaves no CPUs of this node's 16 to schedule");
	ty_err_clear(&err);
	CHECK_INT_EQ(hw_allocatable(&v, 4096, 8192, "MiB of memory", "--reserve-memory-mb", &err),
		     TY_EINVAL);
	CHECK_STR_EQ(err.msg,
		     "--reserve-memory-mb 8192 leaves no MiB of memory of this node's 4096 to "
		     "schedule");
	ty_err_clear(&err);
	CHECK_INT_EQ(hw_allocatable(&v, 4, -1, "CPUs", "--reserve-cpus", &err), TY_EINVAL);
}
