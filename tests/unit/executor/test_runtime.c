/* executor/runtime.h: the OCI config and process, device lookup, data mounts. */
#include "exec.h"
#include "runtime.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static struct exec_rt_spec spec_of(struct exec_rt_mount *m, size_t nm, struct exec_rt_device *d,
				   size_t nd)
{
	static char *init[] = {EXEC_RT_SHIM_PATH, "--init", NULL};
	static const char *const binds[] = {"/usr", "/etc"};

	return (struct exec_rt_spec){.rootfs = "/b/rootfs",
				     .host_root = true,
				     .host_binds = binds,
				     .nhost_binds = 2,
				     .hostname = "h1",
				     .uid = 100007,
				     .gid = 100007,
				     .memory_bytes = 64 << 20,
				     .cpus = 3,
				     .pids_limit = 500,
				     .shm_bytes = 32 << 20,
				     .cgroups_path = "/ex/ty-n-1-1",
				     .mounts = m,
				     .nmounts = nm,
				     .devices = d,
				     .ndevices = nd,
				     .init_argv = init,
				     .nofile = 4096,
				     .memlock = (uint64_t)-1};
}

/* The mount at destination dst, or NULL. */
static json_t *mount_at(json_t *c, const char *dst)
{
	size_t i;
	json_t *m;

	json_array_foreach(json_object_get(c, "mounts"), i, m) if (
	    !strcmp(json_string_value(json_object_get(m, "destination")), dst)) return m;
	return NULL;
}

static bool has_option(json_t *m, const char *opt)
{
	size_t i;
	json_t *o;

	json_array_foreach(json_object_get(m, "options"), i,
			   o) if (!strcmp(json_string_value(o), opt)) return true;
	return false;
}

TY_TEST(config_has_namespaces_limits_and_no_privileges)
{
	struct exec_rt_mount m[3] = {{"/s/work", "/s/work", true, false},
				     {"/data", "/datasets", false, false},
				     {"/b/late/0", "/s/attempts", true, true}};
	struct exec_rt_device d[1] = {{"/dev/nvidia1", 'c', 195, 1, 0666}};
	struct exec_rt_spec s = spec_of(m, 3, d, 1);
	struct ty_err err = {0};
	json_t *c = NULL, *ns, *res, *allow;
	size_t i;
	json_t *v;
	bool net = false, pid = false;

	REQUIRE_INT_EQ(exec_rt_config(&c, &s, &err), 0);
	ns = json_object_get(json_object_get(c, "linux"), "namespaces");
	json_array_foreach(ns, i, v)
	{
		net |= !strcmp(json_string_value(json_object_get(v, "type")), "network");
		pid |= !strcmp(json_string_value(json_object_get(v, "type")), "pid");
	}
	CHECK(pid);
	CHECK(!net); /* the host network, for NCCL and RDMA */
	CHECK(json_is_true(json_object_get(json_object_get(c, "root"), "readonly")));
	CHECK_INT_EQ(ty_jint(c, "process.user.uid"), 100007);
	CHECK(json_is_true(json_object_get(json_object_get(c, "process"), "noNewPrivileges")));
	CHECK_INT_EQ((long long)json_array_size(ty_jpath(c, "process.capabilities.bounding")), 0);
	CHECK_INT_EQ((long long)json_array_size(ty_jpath(c, "process.capabilities.effective")), 0);
	res = ty_jpath(c, "linux.resources");
	CHECK_INT_EQ(ty_jint(res, "memory.limit"), 64 << 20);
	CHECK_INT_EQ(ty_jint(res, "cpu.quota"), 300000);
	CHECK_INT_EQ(ty_jint(res, "cpu.period"), 100000);
	CHECK_INT_EQ(ty_jint(res, "pids.limit"), 500);
	/* deny everything, then exactly the job's devices */
	allow = json_object_get(res, "devices");
	CHECK_INT_EQ((long long)json_array_size(allow), 2);
	CHECK(json_is_false(ty_jpath(allow, "[0].allow")));
	CHECK_STR_EQ(ty_jstr(allow, "[0].access"), "rwm");
	CHECK(json_is_true(ty_jpath(allow, "[1].allow")));
	CHECK_INT_EQ(ty_jint(allow, "[1].major"), 195);
	CHECK_INT_EQ(ty_jint(allow, "[1].minor"), 1);
	CHECK_STR_EQ(ty_jstr(c, "linux.devices[0].path"), "/dev/nvidia1");
	CHECK_STR_EQ(ty_jstr(c, "linux.cgroupsPath"), "/ex/ty-n-1-1");
	/* the work directory writable, data read-only, the host's /usr read-only */
	CHECK(mount_at(c, "/s/work") && has_option(mount_at(c, "/s/work"), "rw"));
	CHECK(mount_at(c, "/datasets") && has_option(mount_at(c, "/datasets"), "ro"));
	CHECK(!has_option(mount_at(c, "/s/work"), "rslave"));
	/* a warm container's late root: what is bound under it later appears inside */
	CHECK(mount_at(c, "/s/attempts") && has_option(mount_at(c, "/s/attempts"), "rslave"));
	CHECK(has_option(mount_at(c, "/s/attempts"), "rw"));
	CHECK(has_option(mount_at(c, "/s/attempts"), "nosuid"));
	CHECK(mount_at(c, "/usr") && has_option(mount_at(c, "/usr"), "ro"));
	CHECK(mount_at(c, "/dev/shm") && has_option(mount_at(c, "/dev/shm"), "size=32768k"));
	CHECK(mount_at(c, "/tmp") != NULL);
	CHECK(ty_jpath(c, "linux.seccomp") == NULL); /* none given */
	json_decref(c);
}

TY_TEST(config_refuses_relative_paths_and_takes_the_seccomp_profile)
{
	struct exec_rt_mount m[1] = {{"work", "/w", true, false}};
	struct exec_rt_spec s = spec_of(m, 1, NULL, 0);
	struct ty_err err = {0};
	json_t *c = NULL, *seccomp = json_loads(exec_seccomp_default, 0, NULL);

	CHECK_INT_EQ(exec_rt_config(&c, &s, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "'work'") != NULL);
	ty_err_clear(&err);
	s.nmounts = 0;
	s.rootfs = "rootfs";
	CHECK_INT_EQ(exec_rt_config(&c, &s, &err), TY_EINVAL);
	ty_err_clear(&err);
	s.rootfs = "/b/rootfs";
	REQUIRE(seccomp != NULL);
	s.seccomp = seccomp;
	REQUIRE_INT_EQ(exec_rt_config(&c, &s, &err), 0);
	CHECK_STR_EQ(ty_jstr(c, "linux.seccomp.defaultAction"), "SCMP_ACT_ALLOW");
	CHECK_STR_EQ(ty_jstr(c, "linux.seccomp.syscalls[0].action"), "SCMP_ACT_ERRNO");
	json_decref(c);
	json_decref(seccomp);
}

TY_TEST(rank_process_runs_as_the_team_without_capabilities)
{
	struct exec_rt_spec s = spec_of(NULL, 0, NULL, 0);
	char *argv[] = {EXEC_RT_SHIM_PATH, "/w/rank-0.exit", "python3", NULL};
	char *env[] = {"RANK=0", "TRAINYARD_METRICS_TOKEN=tym_x", NULL};
	json_t *p = exec_rt_process(argv, env, "/w", &s);

	REQUIRE(p != NULL);
	CHECK_INT_EQ(ty_jint(p, "user.uid"), 100007);
	CHECK_INT_EQ(ty_jint(p, "user.gid"), 100007);
	CHECK_STR_EQ(ty_jstr(p, "cwd"), "/w");
	CHECK_STR_EQ(ty_jstr(p, "args[2]"), "python3");
	CHECK_STR_EQ(ty_jstr(p, "env[1]"), "TRAINYARD_METRICS_TOKEN=tym_x");
	CHECK(json_is_true(json_object_get(p, "noNewPrivileges")));
	CHECK_INT_EQ((long long)json_array_size(ty_jpath(p, "capabilities.permitted")), 0);
	CHECK_STR_EQ(ty_jstr(p, "rlimits[0].type"), "RLIMIT_NOFILE");
	CHECK_INT_EQ(ty_jint(p, "rlimits[0].hard"), 4096);
	json_decref(p);
}

static const char *devdir(void)
{
	static char dir[64];

	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "/tmp/ty-rtdev-XXXXXX");
	REQUIRE(mkdtemp(dir) != NULL);
	REQUIRE(mknod(ty_test_strf("%s/nvidia0", dir), S_IFCHR | 0666, makedev(195, 0)) == 0);
	REQUIRE(mknod(ty_test_strf("%s/nvidia2", dir), S_IFCHR | 0666, makedev(195, 2)) == 0);
	REQUIRE(mknod(ty_test_strf("%s/nvidiactl", dir), S_IFCHR | 0666, makedev(195, 255)) == 0);
	REQUIRE(mkdir(ty_test_strf("%s/infiniband", dir), 0755) == 0);
	REQUIRE(mknod(ty_test_strf("%s/infiniband/uverbs0", dir), S_IFCHR | 0666,
		      makedev(231, 192)) == 0);
	return dir;
}

TY_TEST(devices_are_the_jobs_gpus_control_devices_and_the_fabric)
{
	struct exec_rt_device d[16];
	struct ty_err err = {0};
	int gpus[] = {2};
	size_t n = 0;

	REQUIRE_INT_EQ(exec_rt_devices(d, 16, &n, devdir(), gpus, 1, true, false, &err), 0);
	REQUIRE_INT_EQ((long long)n, 3);
	CHECK_STR_EQ(d[0].path, "/dev/nvidia2");
	CHECK_INT_EQ(d[0].major, 195);
	CHECK_INT_EQ(d[0].minor, 2);
	CHECK_STR_EQ(d[1].path, "/dev/nvidiactl");
	CHECK_STR_EQ(d[2].path, "/dev/infiniband/uverbs0");
	/* without the fabric and without GPUs: nothing, not even the control devices */
	REQUIRE_INT_EQ(exec_rt_devices(d, 16, &n, devdir(), NULL, 0, false, false, &err), 0);
	CHECK_INT_EQ((long long)n, 0);
}

TY_TEST(a_missing_gpu_device_names_it_unless_the_node_is_simulated)
{
	struct exec_rt_device d[16];
	struct ty_err err = {0};
	int gpus[] = {0, 1};
	size_t n = 0;

	CHECK_INT_EQ(exec_rt_devices(d, 16, &n, devdir(), gpus, 2, false, false, &err),
		     TY_ENOTFOUND);
	CHECK(strstr(err.msg, "GPU 1") && strstr(err.msg, "nvidia1"));
	ty_err_clear(&err);
	REQUIRE_INT_EQ(exec_rt_devices(d, 16, &n, devdir(), gpus, 2, false, true, &err), 0);
	CHECK_INT_EQ((long long)n, 2); /* nvidia0 and nvidiactl */
	/* a regular file where a device should be */
	{
		const char *f = ty_test_strf("%s/nvidia3", devdir());
		FILE *fp = fopen(f, "w");
		int three[] = {3};

		REQUIRE(fp != NULL);
		fclose(fp);
		CHECK_INT_EQ(exec_rt_devices(d, 16, &n, devdir(), three, 1, false, false, &err),
			     TY_EINVAL);
		CHECK(strstr(err.msg, "not a device node") != NULL);
		unlink(f);
	}
}

TY_TEST(data_mounts_parse_and_refuse_what_would_cover_the_container)
{
	struct exec_rt_mount m[4];
	struct ty_err err = {0};
	size_t n = 9;

	REQUIRE_INT_EQ(exec_rt_mounts_parse(m, 4, &n, "/tmp,/usr:/data/usr", &err), 0);
	CHECK_INT_EQ((long long)n, 2);
	CHECK_STR_EQ(m[0].src, "/tmp");
	CHECK_STR_EQ(m[0].dst, "/tmp");
	CHECK(!m[0].rw);
	CHECK_STR_EQ(m[1].dst, "/data/usr");
	REQUIRE_INT_EQ(exec_rt_mounts_parse(m, 4, &n, "", &err), 0);
	CHECK_INT_EQ((long long)n, 0);
	CHECK_INT_EQ(exec_rt_mounts_parse(m, 4, &n, "relative", &err), TY_EINVAL);
	CHECK(strstr(err.msg, "relative") != NULL);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_rt_mounts_parse(m, 4, &n, "/nonexistent-ty", &err), TY_ENOTFOUND);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_rt_mounts_parse(m, 4, &n, "/tmp:/proc/x", &err), TY_EINVAL);
	CHECK(strstr(err.msg, "cover") != NULL);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_rt_mounts_parse(m, 4, &n, "/tmp:/", &err), TY_EINVAL);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_rt_mounts_parse(m, 1, &n, "/tmp,/usr", &err), TY_EINVAL);
}

TY_TEST(container_ids_and_the_executors_cgroup)
{
	char id[EXEC_RT_ID_MAX], cg[4096];

	exec_rt_id(id, "node-a", 42, 3);
	CHECK_STR_EQ(id, "ty-node-a-42-3");
	CHECK(exec_rt_own_cgroup(cg, sizeof(cg)));
	CHECK(cg[0] == '/');
}
