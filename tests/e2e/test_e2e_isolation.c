/*
 * Job isolation end to end (docs/security.md, "Job isolation"): both
 * executors run every attempt in a runc container, as its team's uid, in
 * its own cgroup. Two teams' jobs run side by side on the same nodes; what
 * each can see and do is read from its rank log through the API.
 */
#include "e2e.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define UID_BASE 100000 /* the scheduler's --team-uid-base default */

/* Stand-in NVIDIA device nodes (major 195) for the executors' --device-dir. */
static const char *fake_devices(void)
{
	static char dir[4096];

	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "%s/dev", ty_test_workdir());
	mkdir(dir, 0755);
	REQUIRE(mknod(ty_test_strf("%s/nvidia0", dir), S_IFCHR | 0666, makedev(195, 0)) == 0);
	REQUIRE(mknod(ty_test_strf("%s/nvidia1", dir), S_IFCHR | 0666, makedev(195, 1)) == 0);
	REQUIRE(mknod(ty_test_strf("%s/nvidiactl", dir), S_IFCHR | 0666, makedev(195, 255)) == 0);
	chmod(ty_test_strf("%s/nvidia0", dir), 0666);
	chmod(ty_test_strf("%s/nvidia1", dir), 0666);
	return dir;
}

static struct e2e *get(void)
{
	static bool laid_out;
	static const char *args[12];

	if (!laid_out) {
		const char *dev = fake_devices();

		args[0] = "--isolation";
		args[1] = "runc";
		args[2] = "--device-dir";
		args[3] = dev;
		/* the devices again, read-only, where a job can try to open them all */
		args[4] = "--data-mounts";
		args[5] = ty_test_strf("%s:/hostdev", dev);
		args[6] = NULL;
		e2e_set_layout(&(struct e2e_layout){.args = {args, args}});
		laid_out = true;
	}
	return e2e_get();
}

/* Submit as team/token; the new job's id. */
static long long submit_as(const char *team, const char *token, const char *script,
			   const char *extra)
{
	struct ty_resp r = {0};
	json_t *cmd = json_pack("[s, s, s]", "/bin/sh", "-c", script);
	char *c = json_dumps(cmd, JSON_COMPACT);
	const char *body = ty_test_strf("{\"team\":\"%s\",\"command\":%s%s}", team, c, extra);
	long long id;

	free(c);
	json_decref(cmd);
	ty_http(&r, "POST", "/v1/jobs", token, body, NULL);
	CHECK_STATUS(&r, 201);
	id = r.status == 201 ? ty_jint(r.json, "id") : 0;
	ty_resp_free(&r);
	REQUIRE(id > 0);
	return id;
}

static const char *rank_log(const char *token, long long id)
{
	struct ty_resp r = {0};
	const char *body;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/logs?rank=0&attempt=1&tail=1000", id),
		token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	body = ty_test_strf("%s", r.status == 200 ? r.body : "");
	ty_resp_free(&r);
	return body;
}

static long long team_uid(const char *team)
{
	return UID_BASE + atoll(TY_STACK_SQL("SELECT id FROM teams WHERE name = $1", team));
}

/* The job's state once it is one of states (comma-separated), as token sees it; "" after ms. */
static const char *wait_state(long long id, const char *states, const char *token, int ms)
{
	const char *last = "";

	for (int waited = 0; waited <= ms; waited += 100) {
		struct ty_resp r = {0};

		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", id), token, NULL, NULL);
		last = ty_test_strf("%s", r.status == 200 && ty_jstr(r.json, "state")
					      ? ty_jstr(r.json, "state")
					      : "");
		ty_resp_free(&r);
		if (*last && strstr(ty_test_strf(",%s,", states), ty_test_strf(",%s,", last)))
			return last;
		usleep(100 * 1000);
	}
	return "";
}

static void expect_state(struct e2e *e, long long id, const char *state, const char *token)
{
	const char *got = wait_state(id, "succeeded,failed,cancelled", token, 60000);

	(void)e;
	if (strcmp(got, state))
		ty_test_note("job %lld log:\n%s", id, rank_log(token, id));
	CHECK_STR_EQ(got, state);
}

TY_TEST(ranks_run_as_their_team_uid_in_their_own_directories)
{
	struct e2e *e = get();
	long long id;
	const char *log, *want;

	e2e_wait_nodes_ready(e);
	/* the nodes say how their jobs are isolated */
	for (int i = 0; i < 2; i++) {
		struct ty_resp r = {0};

		ty_http(&r, "GET", ty_test_strf("/v1/nodes/%s", e->node[i]), e->token, NULL, NULL);
		CHECK_STATUS(&r, 200);
		CHECK_STR_EQ(ty_jstr(r.json, "isolation"), "runc");
		ty_resp_free(&r);
	}
	id = submit_as(e->team, e->token,
		       "echo uid=$(id -u) gid=$(id -g); "
		       "echo ckpt=$(stat -c '%u %a' \"$TRAINYARD_CHECKPOINT_DIR\"); "
		       "echo work=$(stat -c '%u %a' .); echo hello > \"$TRAINYARD_CHECKPOINT_DIR/f\"; "
		       "echo root=$(touch /usr/x 2>&1 | grep -c 'Read-only'); "
		       "echo caps=$(grep CapEff /proc/self/status | tr -d '\\t'); "
		       "echo nnp=$(grep NoNewPrivs /proc/self/status | tr -d '\\t')",
		       ",\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	expect_state(e, id, "succeeded", e->token);
	log = rank_log(e->token, id);
	want = ty_test_strf("uid=%lld gid=%lld\n", team_uid(e->team), team_uid(e->team));
	CHECK(strstr(log, want) != NULL);
	CHECK(strstr(log, "uid=0 ") == NULL);
	CHECK(strstr(log, ty_test_strf("ckpt=%lld 700\n", team_uid(e->team))) != NULL);
	CHECK(strstr(log, ty_test_strf("work=%lld 700\n", team_uid(e->team))) != NULL);
	CHECK(strstr(log, "root=1\n") != NULL);
	CHECK(strstr(log, "caps=CapEff:0000000000000000\n") != NULL);
	CHECK(strstr(log, "nnp=NoNewPrivs:1\n") != NULL);
	if (!(strstr(log, want) != NULL))
		ty_test_note("log:\n%s", log);
}

TY_TEST(a_team_with_its_own_uid_runs_as_it)
{
	struct e2e *e = get();
	const char *team = ty_mk_team("iso-u", 64, -1), *token = ty_mk_token("member", team);
	long long uid = 2000000 + (long long)getpid(), id;
	struct ty_resp r = {0};

	e2e_wait_nodes_ready(e);
	ty_http(&r, "PATCH", ty_test_strf("/v1/teams/%s", team), ty_stack_get()->admin,
		ty_test_strf("{\"run_uid\":%lld}", uid), NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
	id = submit_as(team, token, "echo uid=$(id -u) gid=$(id -g)",
		       ",\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	expect_state(e, id, "succeeded", token);
	CHECK(strstr(rank_log(token, id), ty_test_strf("uid=%lld gid=%lld\n", uid, uid)) != NULL);
}

TY_TEST(a_team_cannot_see_another_teams_files_processes_or_environment)
{
	struct e2e *e = get();
	const char *team_b = ty_mk_team("iso-b", 64, -1), *token_b = ty_mk_token("member", team_b);
	long long b, a;
	const char *log;

	e2e_wait_nodes_ready(e);
	/* B: a secret in its environment and its checkpoint directory, running a while */
	b = submit_as(team_b, token_b,
		      "echo secret-b-file > \"$TRAINYARD_CHECKPOINT_DIR/secret\"; "
		      "echo b-ready; exec sleep 31.4711",
		      ",\"env\":{\"SECRET_B\":\"hush-b-4711\"},"
		      "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	REQUIRE_STR_EQ(wait_state(b, "running", token_b, 30000), "running");
	/* its checkpoint directory on the host: <root>/job-<b>, mode 0700, B's uid */
	a = submit_as(e->team, e->token,
		      ty_test_strf(
			  "d=$(dirname \"$TRAINYARD_CHECKPOINT_DIR\")/job-%lld; "
			  "ls \"$d\" >/dev/null 2>&1 && echo list=yes || echo list=no; "
			  "cat \"$d/secret\" 2>/dev/null && echo read=yes || echo read=no; "
			  "(echo x > \"$d/planted\") 2>/dev/null && echo write=yes || echo write=no; "
			  "echo procs=$(ls -d /proc/[0-9]* | wc -l); "
			  "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | "
			  "grep -c hush-b-4711 | sed 's/^/env=/'; "
			  /* the pattern is not in this script's own command line */
			  "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | "
			  "grep -c 'sleep 31[.]4711' | sed 's/^/seen=/'",
			  b),
		      ",\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	expect_state(e, a, "succeeded", e->token);
	log = rank_log(e->token, a);
	CHECK(strstr(log, "list=no\n") != NULL);
	CHECK(strstr(log, "read=no\n") != NULL);
	CHECK(strstr(log, "write=no\n") != NULL);
	CHECK(strstr(log, "env=0\n") != NULL);
	CHECK(strstr(log, "seen=0\n") != NULL);
	CHECK(strstr(log, "secret-b-file") == NULL);
	/* its own container holds its init, the shim, the shell and a few commands */
	{
		const char *p = strstr(log, "procs=");
		CHECK(p && atoi(p + 6) > 0 && atoi(p + 6) < 10);
	}
	if (!(strstr(log, "list=no\n") && strstr(log, "env=0\n")))
		ty_test_note("log:\n%s", log);
	/* B ran on, untouched */
	CHECK_STR_EQ(wait_state(b, "running", token_b, 1000), "running");
	{
		struct ty_resp r = {0};

		ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", b), token_b, "{}", NULL);
		ty_resp_free(&r);
	}
}

TY_TEST(over_its_memory_an_attempt_ends_oom_while_another_runs_on)
{
	struct e2e *e = get();
	const char *team_b = ty_mk_team("iso-m", 64, -1), *token_b = ty_mk_token("member", team_b);
	long long hog, calm;
	json_t *att;

	e2e_wait_nodes_ready(e);
	calm = submit_as(team_b, token_b, "sleep 4; echo calm-done",
			 ",\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	REQUIRE_STR_EQ(wait_state(calm, "running", token_b, 30000), "running");
	/* 512 MiB, written, against a 64 MiB limit */
	hog = submit_as(e->team, e->token, "python3 -c 'b = bytes(1) * (512 << 20)'",
			",\"resources\":{\"nodes\":1,\"gpus_per_node\":1,"
			"\"memory_mb_per_node\":64}");
	expect_state(e, hog, "failed", e->token);
	att = e2e_attempts(e, hog);
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "oom");
	json_decref(att);
	expect_state(e, calm, "succeeded", token_b);
	CHECK(strstr(rank_log(token_b, calm), "calm-done") != NULL);
}

TY_TEST(a_gpu_the_job_was_not_given_cannot_be_opened)
{
	struct e2e *e = get();
	long long id;
	const char *log;
	int mine, other;

	e2e_wait_nodes_ready(e);
	/* every stand-in device is in /hostdev; the cgroup lets only the job's own be opened */
	id = submit_as(e->team, e->token,
		       "echo visible=$CUDA_VISIBLE_DEVICES; unset CUDA_VISIBLE_DEVICES; "
		       "for i in 0 1; do cat /hostdev/nvidia$i 2>&1 | sed \"s/^/gpu$i: /\"; done; "
		       "ls /dev | grep nvidia | tr '\\n' ' ' | sed 's/^/dev: /'; echo",
		       ",\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	expect_state(e, id, "succeeded", e->token);
	log = rank_log(e->token, id);
	REQUIRE(strstr(log, "visible=GPU-") != NULL);
	/* by UUID: a simulated GPU's is GPU-00000000-0000-0000-0000-<its index in hex> */
	mine = (int)strtol(strstr(log, "visible=GPU-") + 8 + 28, NULL, 16);
	other = 1 - mine;
	/* the driver is missing, so its own device opens to ENXIO, not EPERM */
	CHECK(strstr(log, ty_test_strf("gpu%d: cat: /hostdev/nvidia%d: No such device or address",
				       mine, mine)) != NULL);
	CHECK(strstr(log, ty_test_strf("gpu%d: cat: /hostdev/nvidia%d: Operation not permitted",
				       other, other)) != NULL);
	/* its /dev holds its GPU and the control device, not the other GPU */
	CHECK(strstr(log, ty_test_strf("nvidia%d ", mine)) != NULL);
	CHECK(strstr(log, ty_test_strf("nvidia%d ", other)) == NULL);
	CHECK(strstr(log, "nvidiactl") != NULL);
	if (!(strstr(log, "Operation not permitted") != NULL))
		ty_test_note("log:\n%s", log);
}

/*
 * An OCI image layout made with umoci: dash as /bin/sh with its libraries
 * and a marker file, nothing else of the host; also as an archive.
 */
static const char *image_layout(void)
{
	static char dir[4096];
	FILE *f;

	if (dir[0])
		return dir;
	snprintf(dir, sizeof(dir), "%s/img", ty_test_workdir());
	const char *script = ty_test_strf(
	    "set -e; cd '%s'; umoci init --layout layout; umoci new --image layout:v1; "
	    "umoci unpack --image layout:v1 bundle; r=bundle/rootfs; mkdir -p $r/bin $r/etc; "
	    "cp /usr/bin/dash $r/bin/sh; "
	    "for l in $(ldd /usr/bin/dash | grep -o '/[^ ]*'); do "
	    "mkdir -p $r$(dirname $l); cp -L $l $r$l; done; "
	    "echo from-image > $r/etc/image-marker; umoci repack --image layout:v1 bundle; "
	    "tar -C layout -cf image.tar .; "
	    /* a layout that lists a manifest it does not hold: it does not unpack */
	    "mkdir -p broken/blobs/sha256; cp layout/oci-layout broken/; "
	    "printf '{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":"
	    "\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:%%064d\","
	    "\"size\":9,\"annotations\":{\"org.opencontainers.image.ref.name\":\"v1\"}}]}' 0 "
	    "> broken/index.json",
	    dir);

	mkdir(dir, 0755);
	REQUIRE((f = fopen(ty_test_strf("%s/make.sh", dir), "w")) != NULL);
	fputs(script, f);
	fclose(f);
	if (system(ty_test_strf("/bin/sh '%s/make.sh' >'%s/make.log' 2>&1", dir, dir)) != 0) {
		FAIL("the test image was not made: %s", ty_test_strf("see %s/make.log", dir));
		dir[0] = '\0';
		ty_test_abort();
	}
	return dir;
}

static int cached_images(const char *node)
{
	const char *out =
	    ty_test_strf("%s/count-%s", ty_test_workdir(), node), *cmd = ty_test_strf(
	    "ls -d '%s/state-%s/images/sha256-'* 2>/dev/null | wc -l > '%s'", ty_test_workdir(),
	    node, out);
	FILE *f;
	int n = -1;

	REQUIRE(system(cmd) == 0);
	REQUIRE((f = fopen(out, "r")) != NULL);
	if (fscanf(f, "%d", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

TY_TEST(a_job_runs_in_its_image_unpacked_once_per_node)
{
	struct e2e *e = get();
	const char *dir = image_layout();
	const char *script = "read m < /etc/image-marker; echo marker=$m; "
			     "if [ -e /usr/bin/apt ]; then echo host=yes; else echo host=no; fi; "
			     "while read k v rest; do [ \"$k\" = Uid: ] && echo uid=$v; done "
			     "< /proc/self/status; echo done";
	const char *refs[] = {ty_test_strf("oci:%s/layout:v1", dir),
			      ty_test_strf("oci:%s/layout:v1", dir),
			      ty_test_strf("oci-archive:%s/image.tar:v1", dir)};

	e2e_wait_nodes_ready(e);
	for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); i++) {
		long long id = submit_as(
		    e->team, e->token, script,
		    ty_test_strf(",\"image\":\"%s\",\"resources\":{\"nodes\":2,\"gpus_per_node\":1}",
				 refs[i]));
		const char *log;

		ty_test_context("%s", refs[i]);
		expect_state(e, id, "succeeded", e->token);
		log = rank_log(e->token, id);
		CHECK(strstr(log, "marker=from-image\n") != NULL);
		CHECK(strstr(log, "host=no\n") != NULL);
		CHECK(strstr(log, ty_test_strf("uid=%lld\n", team_uid(e->team))) != NULL);
	}
	/* the layout and its archive hold the same manifest: one unpacked copy per node */
	CHECK_INT_EQ(cached_images("node-a"), 1);
	CHECK_INT_EQ(cached_images("node-b"), 1);
}

/* Failures blamed on both nodes since their last undrain. */
static long long blamed_failures(struct e2e *e)
{
	long long n = 0;

	for (int i = 0; i < 2; i++) {
		struct ty_resp r = {0};

		ty_http(&r, "GET", ty_test_strf("/v1/nodes/%s", e->node[i]), e->token, NULL, NULL);
		CHECK_STATUS(&r, 200);
		n += ty_jint(r.json, "failures.count");
		ty_resp_free(&r);
	}
	return n;
}

TY_TEST(an_image_that_is_missing_or_broken_fails_the_attempt_as_system)
{
	struct e2e *e = get();
	const char *dir = image_layout();
	const struct {
		const char *ref, *says;
		bool nodes_fault;
	} rows[] = {
	    /* broken everywhere: the image's fault, no node is blamed */
	    {ty_test_strf("oci:%s/broken:v1", dir), "does not unpack", false},
	    /* not on this node: the node is blamed, so the job may go elsewhere */
	    {ty_test_strf("oci:%s/none:v1", dir), "does not exist on this node", true},
	    {ty_test_strf("oci:%s/layout:v9", dir), "has no tag 'v9'", true},
	};

	e2e_wait_nodes_ready(e);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		/* counted before the submission: the job may fail before a later look */
		long long blamed = blamed_failures(e);
		long long id = submit_as(
		    e->team, e->token, "echo never",
		    ty_test_strf(",\"image\":\"%s\",\"retry\":{\"system\":0},"
				 "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}",
				 rows[i].ref));
		json_t *att;

		ty_test_context("%s", rows[i].ref);
		expect_state(e, id, "failed", e->token);
		CHECK_INT_EQ(blamed_failures(e) > blamed, rows[i].nodes_fault);
		att = e2e_attempts(e, id);
		CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "system");
		if (!strstr(ty_jstr(att, "[0].message") ? ty_jstr(att, "[0].message") : "",
			    rows[i].says))
			FAIL("attempt message '%s' does not say '%s'", ty_jstr(att, "[0].message"),
			     rows[i].says);
		json_decref(att);
	}
}
