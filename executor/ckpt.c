/* Checkpoint manifests (DESIGN.md §7): verify them and pick the newest good one. */
#include "exec.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "ty_crypto.h"

int64_t exec_ckpt_step_of(const char *name)
{
	int64_t v = 0;
	const char *p;

	if (strncmp(name, "step-", 5) || !name[5])
		return -1;
	for (p = name + 5; *p; p++) {
		if (*p < '0' || *p > '9' || v > (INT64_MAX - (*p - '0')) / 10)
			return -1;
		v = v * 10 + (*p - '0');
	}
	return v;
}

bool exec_ckpt_path_ok(const char *path)
{
	const char *p = path;

	if (!*path || *path == '/')
		return false;
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return false;
		p += n;
		if (*p == '/')
			p++;
	}
	return true;
}

/* Lowercase hex SHA-256 of the file open on fd, read to the end. */
static int sha256_fd(char out[65], int fd, const char *name, struct ty_err *err)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	unsigned char md[EVP_MAX_MD_SIZE], buf[1 << 16];
	unsigned mdlen = 0;
	int rc = 0;

	if (!ctx)
		return ty_err_set(err, TY_ENOMEM, "out of memory hashing '%s'", name);
	if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		rc = ty_err_set(err, TY_EIO, "cannot start SHA-256 of '%s'", name);
		goto out;
	}
	for (;;) {
		ssize_t k = read(fd, buf, sizeof buf);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = ty_err_set(err, TY_EIO, "cannot read '%s': %s", name, strerror(errno));
			goto out;
		}
		if (k == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)k);
	}
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	for (unsigned i = 0; i < mdlen && i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	out[64] = 0;
out:
	EVP_MD_CTX_free(ctx);
	return rc;
}

static bool is_hex64(const char *s)
{
	size_t n = strspn(s, "0123456789abcdefABCDEF");

	return n == 64 && !s[64];
}

/* One manifest entry: inside root (resolved as rroot), regular, size, and with hash its hash. */
static int verify_file(const char *ckpt, const char *rroot, json_t *f, size_t i, bool hash,
		       struct ty_err *err)
{
	json_t *jp = json_object_get(f, "path"), *js = json_object_get(f, "size"),
	       *jh = json_object_get(f, "sha256");
	char path[PATH_MAX], real[PATH_MAX], hex[65];
	const char *p;
	struct stat st;
	size_t rl = strlen(rroot);
	int fd, rc;

	if (!json_is_object(f) || !json_is_string(jp) || !json_is_integer(js) ||
	    !json_is_string(jh))
		return ty_err_set(err, TY_EPARSE,
				  "files[%zu] needs a string path, an integer size and a "
				  "string sha256",
				  i);
	p = json_string_value(jp);
	if (strlen(p) != json_string_length(jp) || !exec_ckpt_path_ok(p))
		return ty_err_set(
		    err, TY_EINVAL,
		    "files[%zu] path '%s' is not a relative path inside the checkpoint", i, p);
	if (json_integer_value(js) < 0)
		return ty_err_set(err, TY_EPARSE, "files[%zu] '%s' has a negative size", i, p);
	if (!is_hex64(json_string_value(jh)))
		return ty_err_set(err, TY_EPARSE, "files[%zu] '%s' sha256 is not 64 hex digits", i,
				  p);
	if ((size_t)snprintf(path, sizeof path, "%s/%s", ckpt, p) >= sizeof path)
		return ty_err_set(err, TY_EINVAL, "files[%zu] path '%s' is too long", i, p);
	if (!realpath(path, real))
		return ty_err_set(err, TY_EIO, "'%s' is missing: %s", p, strerror(errno));
	if (strncmp(real, rroot, rl) || real[rl] != '/')
		return ty_err_set(err, TY_EINVAL, "'%s' leads outside the checkpoint (to '%s')", p,
				  real);
	fd = open(real, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ty_err_set(err, TY_EIO, "cannot open '%s': %s", p, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ty_err_set(err, TY_EIO, "'%s' is not a regular file", p);
	}
	if ((json_int_t)st.st_size != json_integer_value(js)) {
		close(fd);
		return ty_err_set(err, TY_ECONFLICT, "'%s' has %lld bytes, the manifest says %lld",
				  p, (long long)st.st_size, (long long)json_integer_value(js));
	}
	if (!hash) {
		close(fd);
		return 0;
	}
	rc = sha256_fd(hex, fd, p, err);
	close(fd);
	if (rc)
		return rc;
	if (strcasecmp(hex, json_string_value(jh)))
		return ty_err_set(err, TY_ECONFLICT, "'%s' has SHA-256 %s, the manifest says %s", p,
				  hex, json_string_value(jh));
	return 0;
}

int exec_ckpt_verify(const char *ckpt, int64_t want_step, struct ty_err *err)
{
	return exec_ckpt_verify_stats(ckpt, want_step, NULL, NULL, err);
}

int exec_ckpt_verify_stats(const char *ckpt, int64_t want_step, int64_t *files_out,
			   int64_t *bytes_out, struct ty_err *err)
{
	struct exec_ckpt_info info;
	int rc = exec_ckpt_check(&info, ckpt, want_step, NULL, true, err);

	if (!rc && files_out)
		*files_out = info.files;
	if (!rc && bytes_out)
		*bytes_out = info.bytes;
	return rc;
}

/* The manifest's bytes (at most EXEC_CKPT_MANIFEST_MAX) in *out (new), NUL-terminated. */
static int read_manifest(char **out, size_t *len, const char *mpath, struct ty_err *err)
{
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	int fd, rc = 0;

	*out = NULL;
	fd = open(mpath, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return ty_err_set(err, TY_ENOTFOUND, "no " EXEC_CKPT_MANIFEST " (torn)");
		return ty_err_set(err, TY_EIO, "cannot read " EXEC_CKPT_MANIFEST ": %s",
				  strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > (off_t)EXEC_CKPT_MANIFEST_MAX) {
		rc = ty_err_set(err, TY_EPARSE,
				EXEC_CKPT_MANIFEST " is not a regular file of at most %u bytes",
				EXEC_CKPT_MANIFEST_MAX);
		goto out;
	}
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		rc = ty_err_set(err, TY_ENOMEM, "out of memory");
		goto out;
	}
	while (n < (size_t)st.st_size) {
		ssize_t k = read(fd, buf + n, (size_t)st.st_size - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			rc = ty_err_set(err, TY_EIO, "cannot read " EXEC_CKPT_MANIFEST ": %s",
					strerror(errno));
			goto out;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	buf[n] = 0;
	*out = buf;
	*len = n;
	buf = NULL;
out:
	free(buf);
	close(fd);
	return rc;
}

int exec_ckpt_check(struct exec_ckpt_info *info, const char *ckpt, int64_t want_step,
		    const char *want_digest, bool hash, struct ty_err *err)
{
	char mpath[PATH_MAX], rroot[PATH_MAX], digest[65];
	json_t *m = NULL, *files, *step, *f;
	json_error_t je;
	char *text = NULL;
	size_t len = 0, i;
	int rc = 0;

	if ((size_t)snprintf(mpath, sizeof mpath, "%s/" EXEC_CKPT_MANIFEST, ckpt) >= sizeof mpath)
		return ty_err_set(err, TY_EINVAL, "checkpoint path '%s' is too long", ckpt);
	if ((rc = read_manifest(&text, &len, mpath, err)))
		return rc;
	/* the digest pins the manifest, and the manifest every file's hash */
	ty_sha256_hex(digest, text, len);
	if (want_digest && strcmp(digest, want_digest)) {
		rc = ty_err_set(err, TY_ECONFLICT,
				EXEC_CKPT_MANIFEST " has SHA-256 %s, the launch names %s", digest,
				want_digest);
		goto out;
	}
	if (!realpath(ckpt, rroot)) {
		rc = ty_err_set(err, TY_EIO, "cannot resolve '%s': %s", ckpt, strerror(errno));
		goto out;
	}
	m = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!m) {
		rc = ty_err_set(err, TY_EPARSE, EXEC_CKPT_MANIFEST " line %d: %s", je.line,
				je.text);
		goto out;
	}
	step = json_object_get(m, "step");
	files = json_object_get(m, "files");
	if (!json_is_object(m) || !json_is_integer(step) || json_integer_value(step) < 0 ||
	    !json_is_array(files)) {
		rc = ty_err_set(err, TY_EPARSE,
				EXEC_CKPT_MANIFEST " needs a non-negative integer step and a "
						   "files array");
		goto out;
	}
	if (want_step >= 0 && json_integer_value(step) != want_step) {
		rc = ty_err_set(err, TY_EPARSE,
				EXEC_CKPT_MANIFEST " says step %lld, the directory step %lld",
				(long long)json_integer_value(step), (long long)want_step);
		goto out;
	}
	for (i = 0; i < json_array_size(files) && !rc; i++)
		rc = verify_file(ckpt, rroot, json_array_get(files, i), i, hash, err);
	if (rc || !info)
		goto out;
	memcpy(info->digest, digest, sizeof(info->digest));
	info->files = (int64_t)json_array_size(files);
	info->bytes = 0;
	json_array_foreach(files, i, f)
	{
		info->bytes += (int64_t)json_integer_value(json_object_get(f, "size"));
	}
out:
	json_decref(m);
	free(text);
	return rc;
}

struct cand {
	int64_t step;
	char *name;
};

/* The oldest mtime (ms) of the regular files under dir but path skip, depth levels down. */
static void oldest_mtime(int64_t *oldest, const char *dir, const char *skip, int depth)
{
	DIR *d = depth > 0 ? opendir(dir) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char full[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (size_t)snprintf(full, sizeof full, "%s/%s", dir, de->d_name) >= sizeof full ||
		    !strcmp(full, skip) || lstat(full, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			oldest_mtime(oldest, full, skip, depth - 1);
		} else if (S_ISREG(st.st_mode)) {
			int64_t ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;

			if (*oldest < 0 || ms < *oldest)
				*oldest = ms;
		}
	}
	if (d)
		closedir(d);
}

int64_t exec_ckpt_write_ms(const char *ckpt)
{
	char mpath[PATH_MAX];
	struct stat st;
	int64_t oldest = -1, done;

	if ((size_t)snprintf(mpath, sizeof mpath, "%s/" EXEC_CKPT_MANIFEST, ckpt) >= sizeof mpath ||
	    stat(mpath, &st))
		return -1;
	done = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
	oldest_mtime(&oldest, ckpt, mpath, 8);
	/* a manifest alone, or clocks that disagree: nothing measured */
	return oldest >= 0 && done > oldest ? done - oldest : 0;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->step < y->step ? 1 : x->step > y->step ? -1 : strcmp(x->name, y->name);
}

int exec_ckpt_newest(char **path_out, json_t **report_out, const char *dir, struct ty_err *err)
{
	struct cand *c = NULL;
	size_t n = 0, cap = 0;
	json_t *report = NULL, *skipped = NULL;
	char *found = NULL;
	int64_t found_step = -1;
	DIR *d = NULL;
	struct dirent *de;
	int rc = 0;

	*path_out = NULL;
	if (report_out)
		*report_out = NULL;
	report = json_object();
	skipped = json_array();
	if (!report || !skipped || json_object_set(report, "skipped", skipped)) {
		rc = ty_err_set(err, TY_ENOMEM, "out of memory");
		goto out;
	}
	d = opendir(dir);
	if (!d && errno != ENOENT) {
		rc = ty_err_set(err, TY_EIO, "cannot read checkpoint directory '%s': %s", dir,
				strerror(errno));
		goto out;
	}
	while (d && (errno = 0, de = readdir(d))) {
		int64_t s = exec_ckpt_step_of(de->d_name);
		char full[PATH_MAX];
		struct stat st;

		if (s < 0)
			continue;
		snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
		if (stat(full, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			struct cand *nc = realloc(c, ncap * sizeof *c);

			if (!nc) {
				rc = ty_err_set(err, TY_ENOMEM, "out of memory");
				goto out;
			}
			c = nc;
			cap = ncap;
		}
		c[n].step = s;
		if (!(c[n].name = strdup(de->d_name))) {
			rc = ty_err_set(err, TY_ENOMEM, "out of memory");
			goto out;
		}
		n++;
	}
	if (d && errno) {
		rc = ty_err_set(err, TY_EIO, "cannot read checkpoint directory '%s': %s", dir,
				strerror(errno));
		goto out;
	}
	if (n)
		qsort(c, n, sizeof *c, cand_cmp);
	for (size_t i = 0; i < n; i++) {
		struct ty_err verr = {0};
		char full[PATH_MAX];
		int vrc;

		snprintf(full, sizeof full, "%s/%s", dir, c[i].name);
		vrc = exec_ckpt_verify(full, c[i].step, &verr);
		if (vrc == 0) {
			if (!(found = strdup(full))) {
				rc = ty_err_set(err, TY_ENOMEM, "out of memory");
				goto out;
			}
			found_step = c[i].step;
			break;
		}
		if (vrc == TY_ENOMEM) {
			rc = ty_err_set(err, vrc, "%s", verr.msg);
			goto out;
		}
		if (json_array_append_new(skipped,
					  json_pack("{s:s, s:I, s:s, s:s}", "path", full, "step",
						    (json_int_t)c[i].step, "status",
						    vrc == TY_ENOTFOUND ? "torn" : "corrupt",
						    "reason", verr.msg))) {
			rc = ty_err_set(err, TY_ENOMEM, "out of memory");
			goto out;
		}
	}
	if (json_object_set_new(report, "path", found ? json_string(found) : json_null()) ||
	    json_object_set_new(report, "step",
				found ? json_integer((json_int_t)found_step) : json_null())) {
		rc = ty_err_set(err, TY_ENOMEM, "out of memory");
		goto out;
	}
	*path_out = found;
	found = NULL;
	if (report_out) {
		*report_out = report;
		report = NULL;
	}
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(c[i].name);
	free(c);
	free(found);
	json_decref(skipped);
	json_decref(report);
	return rc;
}

static int entry_cmp(const void *a, const void *b)
{
	const struct exec_ckpt_entry *x = a, *y = b;

	return x->step < y->step ? 1 : x->step > y->step ? -1 : strcmp(x->name, y->name);
}

int exec_ckpt_list(struct exec_ckpt_entry **out, size_t *nout, const char *dir, struct ty_err *err)
{
	struct exec_ckpt_entry *e = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	*out = NULL;
	*nout = 0;
	if (!(d = opendir(dir))) {
		if (errno == ENOENT)
			return 0;
		return ty_err_set(err, TY_EIO, "cannot read checkpoint directory '%s': %s", dir,
				  strerror(errno));
	}
	while ((errno = 0, de = readdir(d))) {
		int64_t s = exec_ckpt_step_of(de->d_name);
		char full[PATH_MAX];
		struct stat st;

		if (s < 0 || strlen(de->d_name) >= sizeof(e->name))
			continue;
		snprintf(full, sizeof full, "%s/%s", dir, de->d_name);
		if (stat(full, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (n == cap) {
			size_t ncap = cap ? 2 * cap : 16;
			struct exec_ckpt_entry *ne = realloc(e, ncap * sizeof *e);

			if (!ne) {
				rc = ty_err_set(err, TY_ENOMEM, "out of memory");
				goto out;
			}
			e = ne;
			cap = ncap;
		}
		memset(&e[n], 0, sizeof e[n]);
		e[n].step = s;
		memcpy(e[n].name, de->d_name, strlen(de->d_name) + 1); /* fits: checked above */
		snprintf(full, sizeof full, "%s/%s/" EXEC_CKPT_MANIFEST, dir, de->d_name);
		e[n].manifest = stat(full, &st) == 0;
		n++;
	}
	if (errno) {
		rc = ty_err_set(err, TY_EIO, "cannot read checkpoint directory '%s': %s", dir,
				strerror(errno));
		goto out;
	}
	if (n)
		qsort(e, n, sizeof *e, entry_cmp);
	*out = e;
	*nout = n;
	e = NULL;
out:
	closedir(d);
	free(e);
	return rc;
}

bool exec_ckpt_every(int64_t step, int keep_every)
{
	return keep_every > 0 && step % keep_every == 0;
}

void exec_ckpt_retain_plan(struct exec_ckpt_entry *e, size_t n, int keep, int keep_every)
{
	int valid = 0;

	for (size_t i = 0; i < n; i++) {
		bool bad = e[i].state == EXEC_CKPT_TORN || e[i].state == EXEC_CKPT_CORRUPT;

		e[i].del = false;
		if (keep <= 0)
			continue;
		if (!e[i].protect) {
			if (valid > 0 && bad)
				e[i].del = true;
			/* every K-th is kept whole, unless it is known to be bad */
			else if (valid >= keep && !exec_ckpt_every(e[i].step, keep_every))
				e[i].del = true;
		}
		valid += e[i].state == EXEC_CKPT_VALID;
	}
}

static _Thread_local int64_t bytes_sum;

static int add_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)path;
	if (flag == FTW_F && S_ISREG(st->st_mode) && ftw->level >= 1)
		bytes_sum += (int64_t)st->st_size;
	return 0;
}

int64_t exec_ckpt_bytes(const char *dir)
{
	struct exec_ckpt_entry *e = NULL;
	struct ty_err err = {0};
	int64_t total = 0;
	size_t n = 0;

	if (exec_ckpt_list(&e, &n, dir, &err))
		return -1;
	for (size_t i = 0; i < n; i++) {
		char full[PATH_MAX];

		snprintf(full, sizeof full, "%s/%s", dir, e[i].name);
		bytes_sum = 0;
		/* level 0 is the step directory: its files are at level 1 or deeper */
		if (nftw(full, add_one, 16, FTW_PHYS) == 0)
			total += bytes_sum;
	}
	free(e);
	return total;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(path) : unlink(path)) && errno != ENOENT ? -1 : 0;
}

int exec_ckpt_remove(const char *path, struct ty_err *err)
{
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
		return ty_err_set(err, TY_EIO, "cannot remove '%s': %s", path, strerror(errno));
	return 0;
}

static bool step_known(const int64_t *known, size_t nknown, int64_t step)
{
	for (size_t i = 0; i < nknown; i++)
		if (known[i] == step)
			return true;
	return false;
}

int exec_ckpt_retain(json_t **deleted_out, int64_t **valid_out, size_t *nvalid_out, const char *dir,
		     int keep, int keep_every, const char *protect, const int64_t *known,
		     size_t nknown, exec_ckpt_move_fn move, void *ud, char *move_error,
		     struct ty_err *err)
{
	bool moving = move != NULL;
	struct exec_ckpt_entry *e = NULL;
	json_t *deleted = json_array();
	int64_t *valid = NULL;
	size_t n = 0, nvalid = 0;
	int rc, found = 0;

	*deleted_out = NULL;
	*valid_out = NULL;
	*nvalid_out = 0;
	if (!deleted)
		return ty_err_set(err, TY_ENOMEM, "out of memory");
	if ((rc = exec_ckpt_list(&e, &n, dir, err)))
		goto out;
	if (n && !(valid = calloc(n, sizeof *valid))) {
		rc = ty_err_set(err, TY_ENOMEM, "out of memory");
		goto out;
	}
	/* the state of the newest ones, until keep of them are valid */
	for (size_t i = 0; i < n && found < keep; i++) {
		char full[PATH_MAX];
		struct ty_err verr = {0};

		snprintf(full, sizeof full, "%s/%s", dir, e[i].name);
		if (step_known(known, nknown, e[i].step))
			e[i].state = EXEC_CKPT_VALID;
		else if (!e[i].manifest)
			e[i].state = EXEC_CKPT_TORN;
		else if (exec_ckpt_verify(full, e[i].step, &verr) == 0)
			e[i].state = EXEC_CKPT_VALID;
		else
			e[i].state = EXEC_CKPT_CORRUPT;
		if (e[i].state == EXEC_CKPT_VALID) {
			found++;
			valid[nvalid++] = e[i].step;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char full[PATH_MAX];

		snprintf(full, sizeof full, "%s/%s", dir, e[i].name);
		e[i].protect = protect && strcmp(protect, full) == 0;
		/* beyond the window only a missing manifest is cheap to see */
		if (e[i].state == EXEC_CKPT_UNKNOWN && !e[i].manifest)
			e[i].state = EXEC_CKPT_TORN;
	}
	if (move_error)
		*move_error = 0;
	/* with a store, the every-th ones are the store's to keep */
	exec_ckpt_retain_plan(e, n, keep, move ? 0 : keep_every);
	for (size_t i = 0; i < n; i++) {
		char full[PATH_MAX];

		if (!e[i].del)
			continue;
		if (move && e[i].state != EXEC_CKPT_TORN && e[i].state != EXEC_CKPT_CORRUPT) {
			struct ty_err merr = {0};

			/* never deleted before its upload verified */
			if (!moving || move(ud, dir, &e[i], &merr)) {
				if (moving && move_error)
					snprintf(move_error, TY_ERR_MSG_MAX, "%s", merr.msg);
				moving = false;
				continue;
			}
		}
		snprintf(full, sizeof full, "%s/%s", dir, e[i].name);
		if ((rc = exec_ckpt_remove(full, err)))
			goto out;
		if (json_array_append_new(deleted, json_string(full))) {
			rc = ty_err_set(err, TY_ENOMEM, "out of memory");
			goto out;
		}
	}
	*deleted_out = deleted;
	deleted = NULL;
	*valid_out = valid;
	*nvalid_out = nvalid;
	valid = NULL;
out:
	free(e);
	free(valid);
	json_decref(deleted);
	return rc;
}
