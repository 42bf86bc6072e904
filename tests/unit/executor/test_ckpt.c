/* executor/ckpt.c: checkpoint manifests verified on real directories. */
#include "exec.h"
#include "ty_crypto.h"
#include "ty_test.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define DATA "model weights, not really"
#define DATA2 "optimizer state"
#define TY_TEST_ZERO_SHA "0000000000000000000000000000000000000000000000000000000000000000"

static const char *scratch_dir(void)
{
	char *dir = ty_test_strf("/tmp/ty-test-exec-ckpt-XXXXXX");

	REQUIRE(mkdtemp(dir) != NULL);
	return dir;
}

static void put(const char *path, const char *text)
{
	FILE *f;

	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs(text, f);
	fclose(f);
}

static const char *sha(const char *text)
{
	char *hex = ty_test_alloc(TY_SHA256_HEX_LEN + 1);

	ty_sha256_hex(hex, text, strlen(text));
	return hex;
}

/* A complete checkpoint dir/step-<step> with model.pt and opt/state.bin. */
static const char *make_good(const char *dir, long step)
{
	const char *c = ty_test_strf("%s/step-%ld", dir, step);

	REQUIRE(mkdir(c, 0755) == 0);
	REQUIRE(mkdir(ty_test_strf("%s/opt", c), 0755) == 0);
	put(ty_test_strf("%s/model.pt", c), DATA);
	put(ty_test_strf("%s/opt/state.bin", c), DATA2);
	put(ty_test_strf("%s/MANIFEST.json", c),
	    ty_test_jf("{'step':%ld,'files':[{'path':'model.pt','size':%zu,'sha256':'%s'},"
		       "{'path':'opt/state.bin','size':%zu,'sha256':'%s','extra':1}],"
		       "'note':'extra fields are allowed'}",
		       step, strlen(DATA), sha(DATA), strlen(DATA2), sha(DATA2)));
	return c;
}

static int count_words(const char *s)
{
	int n = 0;

	for (bool in = false; *s; s++) {
		if (*s != ' ' && !in)
			n++;
		in = *s != ' ';
	}
	return n;
}

TY_TEST(step_names)
{
	static const struct {
		const char *name;
		long long want;
	} rows[] = {
	    {"step-0", 0},
	    {"step-1200", 1200},
	    {"step-007", 7},
	    {"step-", -1},
	    {"step--1", -1},
	    {"step-1a", -1},
	    {"step-+3", -1},
	    {"Step-3", -1},
	    {"step3", -1},
	    {"step-1.tmp", -1},
	    {"MANIFEST.json", -1},
	    {"step-9223372036854775807", 9223372036854775807LL},
	    {"step-9223372036854775808", -1},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].name);
		CHECK_INT_EQ(exec_ckpt_step_of(rows[i].name), rows[i].want);
	}
}

TY_TEST(manifest_paths)
{
	static const struct {
		const char *path;
		bool ok;
	} rows[] = {
	    {"model.pt", true}, {"a/b/c.bin", true},  {"./model.pt", true},   {"a..b", true},
	    {"..a/b", true},	{"", false},	      {"/etc/passwd", false}, {"..", false},
	    {"../x", false},	{"a/../../x", false}, {"a/..", false},	      {"a/../b", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("'%s'", rows[i].path);
		CHECK_INT_EQ(exec_ckpt_path_ok(rows[i].path), rows[i].ok);
	}
}

/* Each row damages a good checkpoint one way; verify must name the fault. */
TY_TEST(verify_table)
{
	static const struct {
		const char *name;
		const char *shell;    /* run in the checkpoint directory; NULL: none */
		const char *manifest; /* replaces MANIFEST.json (' for "); NULL: keep */
		int code;
		const char *reason; /* substring of the message */
	} rows[] = {
	    {"valid", NULL, NULL, 0, ""},
	    {"torn: no manifest", "rm MANIFEST.json", NULL, TY_ENOTFOUND,
	     "no MANIFEST.json (torn)"},
	    {"manifest being written", "mv MANIFEST.json MANIFEST.json.tmp", NULL, TY_ENOTFOUND,
	     "torn"},
	    {"corrupt sha", "printf 'model weights, not REALLY' > model.pt", NULL, TY_ECONFLICT,
	     "'model.pt' has SHA-256"},
	    {"truncated file", "truncate -s 5 opt/state.bin", NULL, TY_ECONFLICT,
	     "'opt/state.bin' has 5 bytes, the manifest says 15"},
	    {"missing file", "rm model.pt", NULL, TY_EIO, "'model.pt' is missing"},
	    {"directory instead of a file", "rm model.pt && mkdir model.pt", NULL, TY_EIO,
	     "'model.pt' is not a regular file"},
	    {"bad JSON", NULL, "{'step':3,'files':[", TY_EPARSE, "MANIFEST.json line 1"},
	    {"duplicate key", NULL, "{'step':3,'step':3,'files':[]}", TY_EPARSE, "duplicate"},
	    {"not an object", NULL, "[1,2]", TY_EPARSE, "needs a non-negative integer step"},
	    {"step missing", NULL, "{'files':[]}", TY_EPARSE, "integer step"},
	    {"negative step", NULL, "{'step':-1,'files':[]}", TY_EPARSE, "integer step"},
	    {"step differs from the directory", NULL, "{'step':4,'files':[]}", TY_EPARSE,
	     "says step 4, the directory step 3"},
	    {"files missing", NULL, "{'step':3}", TY_EPARSE, "files array"},
	    {"entry without size", NULL,
	     "{'step':3,'files':[{'path':'model.pt','sha256':'" TY_TEST_ZERO_SHA "'}]}", TY_EPARSE,
	     "files[0] needs"},
	    {"negative size", NULL,
	     "{'step':3,'files':[{'path':'model.pt','size':-1,'sha256':'" TY_TEST_ZERO_SHA "'}]}",
	     TY_EPARSE, "negative size"},
	    {"short sha", NULL, "{'step':3,'files':[{'path':'model.pt','size':25,'sha256':'abc'}]}",
	     TY_EPARSE, "not 64 hex digits"},
	    {"path with ..", NULL,
	     "{'step':3,'files':[{'path':'../step-1/model.pt','size':25,'sha256':'" TY_TEST_ZERO_SHA
	     "'}]}",
	     TY_EINVAL, "'../step-1/model.pt' is not a relative path inside"},
	    {"absolute path", NULL,
	     "{'step':3,'files':[{'path':'/etc/hostname','size':25,'sha256':'" TY_TEST_ZERO_SHA
	     "'}]}",
	     TY_EINVAL, "'/etc/hostname' is not a relative path inside"},
	    {"symlink leading out", "ln -s ../outside.bin link.bin",
	     "{'step':3,'files':[{'path':'link.bin','size':25,'sha256':'" TY_TEST_ZERO_SHA "'}]}",
	     TY_EINVAL, "'link.bin' leads outside the checkpoint"},
	    {"no files is valid", NULL, "{'step':3,'files':[]}", 0, ""},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *dir = scratch_dir(), *c;
		struct ty_err err = {0};
		int rc;

		ty_test_context("%s", rows[i].name);
		put(ty_test_strf("%s/outside.bin", dir), DATA);
		c = make_good(dir, 3);
		if (rows[i].shell)
			REQUIRE(system(ty_test_strf("cd '%s' && %s", c, rows[i].shell)) == 0);
		if (rows[i].manifest)
			put(ty_test_strf("%s/MANIFEST.json", c),
			    ty_test_jf("%s", rows[i].manifest));
		rc = exec_ckpt_verify(c, 3, &err);
		CHECK_INT_EQ(rc, rows[i].code);
		if (!strstr(err.msg, rows[i].reason))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].reason);
		REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
	}
}

/* What exec_ckpt_newest picks among several checkpoints, and what it reports. */
TY_TEST(newest_table)
{
	static const struct {
		const char *name;
		const char *setup;   /* shell in the job's checkpoint dir, after step-1..3 */
		long want;	     /* step chosen, -1: none */
		const char *skipped; /* "step:status,..." newest first */
	} rows[] = {
	    {"newest valid", "true", 3, ""},
	    {"torn newest falls back", "rm step-3/MANIFEST.json", 2, "3:torn"},
	    {"corrupt newest falls back", "echo x >> step-3/model.pt", 2, "3:corrupt"},
	    {"two bad ones", "rm step-3/MANIFEST.json; rm step-2/opt/state.bin", 1,
	     "3:torn,2:corrupt"},
	    {"none valid", "rm step-*/MANIFEST.json", -1, "3:torn,2:torn,1:torn"},
	    {"numeric not lexical order",
	     "mv step-1 step-10; sed -i 's/\"step\": *1,/\"step\":10,/' "
	     "step-10/MANIFEST.json",
	     10, ""},
	    {"non-checkpoint entries ignored",
	     "mkdir step-99.tmp other; touch step-50; echo '{}' > other/MANIFEST.json", 3, ""},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *dir = scratch_dir();
		struct ty_err err = {0};
		json_t *report = NULL, *sk;
		char *path = NULL, got[256] = "";
		size_t at = 0;

		ty_test_context("%s", rows[i].name);
		for (long s = 1; s <= 3; s++)
			make_good(dir, s);
		REQUIRE(system(ty_test_strf("cd '%s' && %s", dir, rows[i].setup)) == 0);
		REQUIRE_INT_EQ(exec_ckpt_newest(&path, &report, dir, &err), 0);
		REQUIRE(report != NULL);
		if (rows[i].want < 0) {
			CHECK(path == NULL);
			CHECK(json_is_null(json_object_get(report, "path")));
			CHECK(json_is_null(json_object_get(report, "step")));
		} else {
			CHECK_STR_EQ(path, ty_test_strf("%s/step-%ld", dir, rows[i].want));
			CHECK_STR_EQ(json_string_value(json_object_get(report, "path")), path);
			CHECK_INT_EQ(json_integer_value(json_object_get(report, "step")),
				     rows[i].want);
		}
		sk = json_object_get(report, "skipped");
		REQUIRE(json_is_array(sk));
		for (size_t k = 0; k < json_array_size(sk); k++) {
			json_t *e = json_array_get(sk, k);
			const char *reason = json_string_value(json_object_get(e, "reason"));

			at += (size_t)snprintf(
			    got + at, sizeof got - at, "%s%lld:%s", k ? "," : "",
			    (long long)json_integer_value(json_object_get(e, "step")),
			    json_string_value(json_object_get(e, "status")));
			CHECK(reason != NULL && reason[0] != 0);
			CHECK(strncmp(json_string_value(json_object_get(e, "path")), dir,
				      strlen(dir)) == 0);
		}
		CHECK_STR_EQ(got, rows[i].skipped);
		free(path);
		json_decref(report);
		REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
	}
}

TY_TEST(newest_without_a_directory)
{
	const char *dir = scratch_dir();
	struct ty_err err = {0};
	json_t *report = NULL;
	char *path = (char *)"sentinel";

	CHECK_INT_EQ(exec_ckpt_newest(&path, &report, ty_test_strf("%s/none", dir), &err), 0);
	CHECK(path == NULL);
	CHECK(json_is_null(json_object_get(report, "path")));
	CHECK_INT_EQ(json_array_size(json_object_get(report, "skipped")), 0);
	json_decref(report);
	/* an existing file where the directory should be cannot be read */
	put(ty_test_strf("%s/file", dir), "x");
	CHECK_INT_EQ(exec_ckpt_newest(&path, NULL, ty_test_strf("%s/file", dir), &err), TY_EIO);
	if (!strstr(err.msg, "cannot read checkpoint directory"))
		FAIL("message '%s'", err.msg);
	REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
}

/*
 * Checkpoints written by worker/examples/trainyard_ckpt.py (what training
 * code uses) verify here, and a corrupt newest one is passed over.
 */
TY_TEST(python_helper_checkpoints)
{
	const char *dir = scratch_dir();
	struct ty_err err = {0};
	json_t *report = NULL, *sk;
	char *path = NULL;
	int rc;

	rc = system(ty_test_strf("PYTHONDONTWRITEBYTECODE=1 PYTHONPATH='%s' python3 -c '"
				 "import trainyard_ckpt as ck\n"
				 "for s in (100, 200, 300):\n"
				 "    ck.save(s, {\"model.pt\": bytes(range(256)) * s, "
				 "\"sub/opt.bin\": lambda f: f.write(b\"x\" * 7)}, \"%s\")\n'",
				 TY_WORKER_EXAMPLES_DIR, dir));
	REQUIRE_INT_EQ(rc, 0);
	for (int s = 100; s <= 300; s += 100) {
		ty_test_context("step %d", s);
		CHECK_INT_EQ(exec_ckpt_verify(ty_test_strf("%s/step-%d", dir, s), s, &err), 0);
		CHECK_STR_EQ(err.msg, "");
	}
	ty_test_context(NULL);
	/* flip one byte of the newest model: same size, different hash */
	REQUIRE(system(ty_test_strf("printf 'Z' | dd of='%s/step-300/model.pt' bs=1 seek=9 "
				    "conv=notrunc status=none",
				    dir)) == 0);
	REQUIRE_INT_EQ(exec_ckpt_newest(&path, &report, dir, &err), 0);
	CHECK_STR_EQ(path, ty_test_strf("%s/step-200", dir));
	sk = json_object_get(report, "skipped");
	REQUIRE_INT_EQ(json_array_size(sk), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(sk, 0), "status")),
		     "corrupt");
	if (!strstr(json_string_value(json_object_get(json_array_get(sk, 0), "reason")),
		    "'model.pt' has SHA-256"))
		FAIL("reason: %s",
		     json_string_value(json_object_get(json_array_get(sk, 0), "reason")));
	/* and the helper's own reader agrees */
	rc = system(ty_test_strf("PYTHONDONTWRITEBYTECODE=1 python3 '%s/trainyard_ckpt.py' newest "
				 "'%s' 2>/dev/null | grep -q '\"step\": 200'",
				 TY_WORKER_EXAMPLES_DIR, dir));
	CHECK_INT_EQ(rc, 0);
	free(path);
	json_decref(report);
	REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
}

/* Retention decisions: "step:state" newest first, V valid, T torn, C corrupt, ? unknown,
 * a trailing * protects it; the result is the steps deleted. */
TY_TEST(retain_plan_table)
{
	static const struct {
		const char *name;
		const char *entries;
		int keep, every;
		const char *deleted;
	} rows[] = {
	    {"nothing", "", 3, 0, ""},
	    {"fewer than keep", "3V 2V 1V", 3, 0, ""},
	    {"older than the keep-th valid", "5V 4V 3V 2? 1?", 3, 0, "2 1"},
	    {"keep 1", "5V 4V 3V", 1, 0, "4 3"},
	    {"keep 0 keeps everything", "5V 4T 3C 2V", 0, 0, ""},
	    {"keep 0 keeps everything, every-th or not", "5V 4T 3C 2V", 0, 2, ""},
	    {"torn and corrupt below the newest valid", "5V 4T 3C 2V", 3, 0, "4 3"},
	    {"newer than any valid is kept (being written)", "7T 6C 5V 4V", 2, 0, ""},
	    {"bad ones counted out", "9T 8V 7C 6T 5V 4V 3?", 2, 0, "7 6 4 3"},
	    {"protected resume is never deleted", "5V 4V 3V*", 1, 0, "4"},
	    {"protected torn kept", "5V 4T* 3V", 3, 0, ""},
	    {"unknown before the keep-th valid is kept", "5V 4? 3V", 2, 0, ""},
	    {"no valid at all", "5T 4C 3T", 2, 0, ""},
	    /* keep_every: the last N valid and every K-th step, exactly */
	    {"last 2 and every 4th", "10V 9V 8? 7? 6? 5? 4? 3? 2? 1? 0?", 2, 4, "7 6 5 3 2 1"},
	    {"every K-th within the window counts once", "8V 7V 6? 4? 2?", 2, 4, "6 2"},
	    {"every 1st keeps all", "5V 4V 3? 2? 1?", 1, 1, ""},
	    {"a torn K-th below the newest valid goes", "9V 8T 4? 2C", 1, 2, "8 2"},
	    {"a torn K-th newer than any valid stays", "8T 7V 6V 4?", 1, 4, "6"},
	    {"the protected resume beside every K-th", "9V 8V 7? 6? 5?*", 1, 3, "8 7"},
	    {"steps beyond the K-th are not rounded", "100V 99? 50? 49? 0?", 1, 50, "99 49"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_ckpt_entry e[16];
		char got[128] = "", *save = NULL, *tok;
		char *text = ty_test_strf("%s", rows[i].entries);
		size_t n = 0, at = 0;

		ty_test_context("%s", rows[i].name);
		memset(e, 0, sizeof(e));
		for (tok = strtok_r(text, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
			char *p;

			REQUIRE(n < 16);
			e[n].step = strtoll(tok, &p, 10);
			e[n].state = *p == 'V'	 ? EXEC_CKPT_VALID
				     : *p == 'T' ? EXEC_CKPT_TORN
				     : *p == 'C' ? EXEC_CKPT_CORRUPT
						 : EXEC_CKPT_UNKNOWN;
			e[n].protect = p[1] == '*';
			e[n].del = true; /* the plan sets every entry */
			n++;
		}
		exec_ckpt_retain_plan(e, n, rows[i].keep, rows[i].every);
		for (size_t k = 0; k < n; k++)
			if (e[k].del)
				at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%lld",
						       at ? " " : "", (long long)e[k].step);
		CHECK_STR_EQ(got, rows[i].deleted);
	}
}

TY_TEST(list_and_verify_stats)
{
	const char *dir = scratch_dir();
	struct exec_ckpt_entry *e = NULL;
	struct ty_err err = {0};
	int64_t files = -1, bytes = -1;
	size_t n = 0;

	make_good(dir, 2);
	make_good(dir, 10);
	REQUIRE(mkdir(ty_test_strf("%s/step-7", dir), 0755) == 0); /* being written */
	REQUIRE(mkdir(ty_test_strf("%s/other", dir), 0755) == 0);
	put(ty_test_strf("%s/step-8", dir), "a file, not a checkpoint");
	REQUIRE_INT_EQ(exec_ckpt_list(&e, &n, dir, &err), 0);
	REQUIRE_INT_EQ(n, 3);
	CHECK_INT_EQ(e[0].step, 10);
	CHECK(e[0].manifest);
	CHECK_INT_EQ(e[1].step, 7);
	CHECK_STR_EQ(e[1].name, "step-7");
	CHECK(!e[1].manifest);
	CHECK_INT_EQ(e[2].step, 2);
	free(e);
	CHECK_INT_EQ(
	    exec_ckpt_verify_stats(ty_test_strf("%s/step-10", dir), 10, &files, &bytes, &err), 0);
	CHECK_INT_EQ(files, 2);
	CHECK_INT_EQ(bytes, (int64_t)(strlen(DATA) + strlen(DATA2)));
	CHECK_INT_EQ(exec_ckpt_list(&e, &n, ty_test_strf("%s/none", dir), &err), 0);
	CHECK_INT_EQ(n, 0);
	CHECK(e == NULL);
	CHECK_INT_EQ(exec_ckpt_list(&e, &n, ty_test_strf("%s/step-8", dir), &err), TY_EIO);
	REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
}

/* Retention on disk: what is deleted, what verified, the protected resume kept. */
TY_TEST(retain_on_disk)
{
	static const struct {
		const char *name;
		const char *setup; /* shell in the dir after step-1..5 */
		int keep, every;
		const char *protect; /* a step name or NULL */
		const char *known;   /* steps known valid (no rehash), "" */
		const char *left;    /* ls of what remains */
		const char *valid;   /* steps found valid, newest first */
	} rows[] = {
	    {"keep 3", "true", 3, 0, NULL, "", "step-3 step-4 step-5", "5 4 3"},
	    {"keep 2 protects the resume", "true", 2, 0, "step-1", "", "step-1 step-4 step-5",
	     "5 4"},
	    {"corrupt and torn below the newest valid",
	     "echo x >> step-4/model.pt; rm "
	     "step-3/MANIFEST.json",
	     2, 0, NULL, "", "step-2 step-5", "5 2"},
	    {"newer torn kept", "mkdir step-9", 1, 0, NULL, "", "step-5 step-9", "5"},
	    {"known steps are not verified again", "echo x >> step-5/model.pt", 1, 0, NULL, "5",
	     "step-5", "5"},
	    {"keep 0 deletes nothing", "true", 0, 0, NULL, "",
	     "step-1 step-2 step-3 step-4 step-5", ""},
	    {"keep 1 and every 2nd", "true", 1, 2, NULL, "", "step-2 step-4 step-5", "5"},
	    {"a torn every-th goes", "rm step-2/MANIFEST.json", 1, 2, NULL, "",
	     "step-4 step-5", "5"},
	    {"every 2nd and the resume", "true", 1, 2, "step-3", "",
	     "step-2 step-3 step-4 step-5", "5"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *dir = scratch_dir();
		struct ty_err err = {0};
		json_t *deleted = NULL;
		int64_t *valid = NULL, known[4];
		size_t nvalid = 0, nknown = 0, at = 0;
		char got[256] = "";
		FILE *ls;

		ty_test_context("%s", rows[i].name);
		for (long s = 1; s <= 5; s++)
			make_good(dir, s);
		if (*rows[i].known)
			known[nknown++] = atoll(rows[i].known);
		REQUIRE(system(ty_test_strf("cd '%s' && %s", dir, rows[i].setup)) == 0);
		REQUIRE_INT_EQ(exec_ckpt_retain(&deleted, &valid, &nvalid, dir, rows[i].keep,
						rows[i].every, rows[i].protect
						    ? ty_test_strf("%s/%s", dir, rows[i].protect)
						    : NULL,
						known, nknown, NULL, NULL, NULL, &err),
			       0);
		REQUIRE((ls = popen(ty_test_strf("ls '%s' | tr '\\n' ' '", dir), "r")) != NULL);
		REQUIRE(fgets(got, sizeof(got), ls) != NULL || true);
		pclose(ls);
		got[strcspn(got, "\n")] = 0;
		if (*got && got[strlen(got) - 1] == ' ')
			got[strlen(got) - 1] = 0;
		CHECK_STR_EQ(got, rows[i].left);
		/* step-1..5, and step-9 where the setup made it */
		CHECK_INT_EQ(json_array_size(deleted), (strstr(rows[i].setup, "step-9") ? 6 : 5) -
							   (size_t)count_words(rows[i].left));
		for (size_t k = 0; k < nvalid; k++)
			at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%lld", k ? " " : "",
					       (long long)valid[k]);
		got[at] = 0;
		CHECK_STR_EQ(got, rows[i].valid);
		json_decref(deleted);
		free(valid);
		REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
	}
}

/* Set path's modification time to ms after the epoch. */
static void mtime(const char *path, int64_t ms)
{
	struct timespec ts[2] = {{ms / 1000, (ms % 1000) * 1000000}, {ms / 1000, (ms % 1000) * 1000000}};

	REQUIRE(utimensat(AT_FDCWD, path, ts, 0) == 0);
}

/* The write time of a checkpoint: the oldest file's mtime to the manifest's. */
TY_TEST(write_time_from_the_oldest_file_to_the_manifest)
{
	static const struct {
		const char *name;
		int64_t model, state, manifest, want; /* ms after T; -1: remove it */
	} cases[] = {
	    {"files then the manifest", 0, 2000, 7500, 7500},
	    {"the oldest file counts, nested too", 3000, 1000, 4000, 3000},
	    {"a manifest older than its files: nothing measured", 5000, 6000, 1000, 0},
	    {"the manifest alone", -1, -1, 1000, 0},
	    {"no manifest: not a checkpoint", 0, 1000, -1, -1},
	};
	const int64_t t = 1700000000000LL;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *dir = scratch_dir(), *c = make_good(dir, 1);
		const char *model = ty_test_strf("%s/model.pt", c),
			   *state = ty_test_strf("%s/opt/state.bin", c),
			   *manifest = ty_test_strf("%s/MANIFEST.json", c);

		ty_test_context("%s", cases[i].name);
		if (cases[i].model < 0)
			REQUIRE(unlink(model) == 0);
		else
			mtime(model, t + cases[i].model);
		if (cases[i].state < 0)
			REQUIRE(unlink(state) == 0);
		else
			mtime(state, t + cases[i].state);
		if (cases[i].manifest < 0)
			REQUIRE(unlink(manifest) == 0);
		else
			mtime(manifest, t + cases[i].manifest);
		CHECK_INT_EQ(exec_ckpt_write_ms(c), cases[i].want);
		REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
	}
}
/* The object store's retention: steps newest first, the deleted ones. */
TY_TEST(tier_prune_plan_table)
{
	static const struct {
		const char *name;
		int64_t steps[8];
		size_t n;
		int keep, every;
		const char *deleted;
	} rows[] = {
	    {"nothing", {0}, 0, 2, 0, ""},
	    {"the newest keep", {9, 8, 7, 6}, 4, 2, 0, "7 6"},
	    {"and every 3rd", {9, 8, 7, 6, 5, 3}, 6, 1, 3, "8 7 5"},
	    {"keep 0 keeps all", {9, 8, 7}, 3, 0, 2, ""},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		bool del[8] = {false};
		char got[64] = "";
		size_t at = 0;

		ty_test_context("%s", rows[i].name);
		exec_tier_prune_plan(del, rows[i].steps, rows[i].n, rows[i].keep, rows[i].every);
		for (size_t k = 0; k < rows[i].n; k++)
			if (del[k])
				at += (size_t)snprintf(got + at, sizeof(got) - at, "%s%lld",
						       at ? " " : "", (long long)rows[i].steps[k]);
		CHECK_STR_EQ(got, rows[i].deleted);
	}
}

/* The store's credentials file: exactly the two keys, or an error naming the file. */
TY_TEST(objstore_credentials_file)
{
	static const struct {
		const char *text;
		const char *error; /* NULL: loads */
	} rows[] = {
	    {"{\"access_key_id\": \"AK\", \"secret_access_key\": \"SK\"}", NULL},
	    {"{\"access_key_id\": \"AK\"}", "needs a non-empty access_key_id"},
	    {"{\"access_key_id\": \"\", \"secret_access_key\": \"SK\"}",
	     "needs a non-empty access_key_id"},
	    {"{\"access_key_id\": \"A:K\", \"secret_access_key\": \"SK\"}", "(no ':')"},
	    {"{\"access_key_id\": \"AK\", \"secret_access_key\": \"SK\", \"token\": \"T\"}",
	     "access_key_id and secret_access_key only"},
	    {"[]", "access_key_id and secret_access_key only"},
	    {"not json", "credentials file"},
	};
	const char *dir = scratch_dir();

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_objstore s = {0};
		struct ty_err err = {0};
		const char *path = ty_test_strf("%s/creds-%zu.json", dir, i);
		int rc;

		ty_test_context("%s", rows[i].text);
		put(path, rows[i].text);
		rc = exec_objstore_creds_load(&s, path, &err);
		if (!rows[i].error) {
			CHECK_INT_EQ(rc, 0);
			CHECK_STR_EQ(s.access_key, "AK");
			CHECK_STR_EQ(s.secret_key, "SK");
			continue;
		}
		CHECK_INT_EQ(rc, TY_EINVAL);
		if (!strstr(err.msg, rows[i].error))
			FAIL("'%s' does not say '%s'", err.msg, rows[i].error);
	}
	ty_test_context(NULL);
	{
		struct exec_objstore s = {0};
		struct ty_err err = {0};

		CHECK_INT_EQ(exec_objstore_creds_load(&s, ty_test_strf("%s/none.json", dir), &err),
			     TY_EINVAL);
	}
	REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
}

/* The bytes of the step-* directories only (MANIFEST.json included). */
TY_TEST(checkpoint_bytes_count_step_directories)
{
	const char *dir = scratch_dir();

	CHECK_INT_EQ(exec_ckpt_bytes(ty_test_strf("%s/none", dir)), 0);
	put(ty_test_strf("%s/other-file", dir), "not a checkpoint");
	REQUIRE(mkdir(ty_test_strf("%s/step-1", dir), 0755) == 0);
	REQUIRE(mkdir(ty_test_strf("%s/step-1/sub", dir), 0755) == 0);
	put(ty_test_strf("%s/step-1/a", dir), "12345");
	put(ty_test_strf("%s/step-1/sub/b", dir), "678");
	REQUIRE(mkdir(ty_test_strf("%s/.restore-step-2", dir), 0755) == 0);
	put(ty_test_strf("%s/.restore-step-2/c", dir), "half");
	CHECK_INT_EQ(exec_ckpt_bytes(dir), 8);
	REQUIRE(system(ty_test_strf("rm -rf '%s'", dir)) == 0);
}

static const char *file_sha(const char *path)
{
	char *text = NULL, *hex = ty_test_alloc(TY_SHA256_HEX_LEN + 1);
	size_t n = 0;
	FILE *f;

	REQUIRE((f = fopen(path, "r")) != NULL);
	text = ty_test_alloc(1 << 16);
	n = fread(text, 1, 1 << 16, f);
	fclose(f);
	ty_sha256_hex(hex, text, n);
	return hex;
}

/*
 * The check a node makes of the checkpoint a launch names: the manifest's
 * digest and the sizes pin it; the content is hashed only when asked.
 */
TY_TEST(check_against_the_launch_digest)
{
	const char *dir = scratch_dir(), *c = make_good(dir, 4);
	const char *digest = file_sha(ty_test_strf("%s/MANIFEST.json", c));
	struct exec_ckpt_info info;
	struct ty_err err = {0};

	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, digest, false, &err), 0);
	CHECK_STR_EQ(info.digest, digest);
	CHECK_INT_EQ(info.files, 2);
	CHECK_INT_EQ(info.bytes, (int64_t)(strlen(DATA) + strlen(DATA2)));
	/* another manifest than the one the verifier hashed */
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, TY_TEST_ZERO_SHA, false, &err), TY_ECONFLICT);
	CHECK(strstr(err.msg, ty_test_strf("MANIFEST.json has SHA-256 %s, the launch names %s",
					   digest, TY_TEST_ZERO_SHA)) != NULL);
	/* same size, other bytes: only a full hash sees it */
	put(ty_test_strf("%s/model.pt", c), "MODEL WEIGHTS, NOT REALLY");
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, digest, false, &err), 0);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, digest, true, &err), TY_ECONFLICT);
	CHECK(strstr(err.msg, "'model.pt' has SHA-256") != NULL);
	/* a size differs, a file is gone: named */
	put(ty_test_strf("%s/opt/state.bin", c), "short");
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, digest, false, &err), TY_ECONFLICT);
	CHECK(strstr(err.msg, "'opt/state.bin' has 5 bytes, the manifest says") != NULL);
	REQUIRE(unlink(ty_test_strf("%s/opt/state.bin", c)) == 0);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, digest, false, &err), TY_EIO);
	CHECK(strstr(err.msg, "'opt/state.bin' is missing") != NULL);
	/* no manifest: torn */
	REQUIRE(unlink(ty_test_strf("%s/MANIFEST.json", c)) == 0);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_ckpt_check(&info, c, 4, digest, false, &err), TY_ENOTFOUND);
	CHECK(strstr(err.msg, "torn") != NULL);
	CHECK_INT_EQ(exec_ckpt_remove(dir, &err), 0);
}
