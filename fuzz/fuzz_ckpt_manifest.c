/*
 * The checkpoint manifest parser (executor/ckpt.c): the input is written
 * as MANIFEST.json of a checkpoint directory "step-7" that holds a real
 * file "state.bin" (10 bytes, STATE_BIN), a directory "sub" with
 * "sub/a.pt" (empty), a symbolic link "out" to a file outside the
 * checkpoint and one "loop" to itself, and exec_ckpt_verify_stats checks
 * it (any step, then step 7). exec_ckpt_path_ok and exec_ckpt_step_of get
 * the input as text too. Invariants: a manifest that verifies lists only
 * paths inside the checkpoint; a path exec_ckpt_path_ok accepts has no
 * ".." component and does not start with '/'.
 */
#include "exec.h"
#include "fuzz.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

/* SHA-256 8ddbb2d116530a7785a51dc2442f9a213b1d3dd34f81259fc38982e4eca46ff5 */
#define STATE_BIN "trainyard\n"

static char root[PATH_MAX], ckpt[PATH_MAX], manifest[PATH_MAX];

static void put(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (root[0] && system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char p[PATH_MAX + 32];
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/ty-fuzz-ckpt.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_CHECK(mkdtemp(root));
	atexit(cleanup);
	snprintf(ckpt, sizeof(ckpt), "%s/step-7", root);
	FUZZ_CHECK(mkdir(ckpt, 0755) == 0);
	snprintf(p, sizeof(p), "%s/state.bin", ckpt);
	put(p, STATE_BIN);
	snprintf(p, sizeof(p), "%s/sub", ckpt);
	FUZZ_CHECK(mkdir(p, 0755) == 0);
	snprintf(p, sizeof(p), "%s/sub/a.pt", ckpt);
	put(p, "");
	snprintf(p, sizeof(p), "%s/secret", root);
	put(p, STATE_BIN);
	snprintf(p, sizeof(p), "%s/out", ckpt);
	FUZZ_CHECK(symlink("../secret", p) == 0);
	snprintf(p, sizeof(p), "%s/loop", ckpt);
	FUZZ_CHECK(symlink("loop", p) == 0);
	snprintf(manifest, sizeof(manifest), "%s/" EXEC_CKPT_MANIFEST, ckpt);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ty_err err = {0};
	int64_t files = -1, bytes = -1;
	char *s = fuzz_cstr(data, size);
	int fd, rc;

	if (!s)
		return 0;
	if (strlen(s) == size && exec_ckpt_path_ok(s)) {
		FUZZ_CHECK(s[0] != '/' && s[0] != '\0');
		FUZZ_CHECK(strcmp(s, "..") && strncmp(s, "../", 3) && !strstr(s, "/../"));
		FUZZ_CHECK(size < 3 || strcmp(s + size - 3, "/.."));
	}
	if (strlen(s) == size)
		(void)exec_ckpt_step_of(s);
	free(s);

	fd = open(manifest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size);
	close(fd);
	rc = exec_ckpt_verify_stats(ckpt, -1, &files, &bytes, &err);
	if (rc == 0) {
		/* only state.bin and sub/a.pt (10 and 0 bytes) can verify */
		FUZZ_CHECK(files >= 0 && bytes >= 0 && bytes <= 10 * files);
	} else {
		FUZZ_CHECK(rc == TY_EPARSE || rc == TY_EINVAL || rc == TY_EIO ||
			   rc == TY_ECONFLICT);
		FUZZ_CHECK(err.msg[0]);
	}
	(void)exec_ckpt_verify(ckpt, 7, &err);
	return 0;
}
