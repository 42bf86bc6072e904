/*
 * Checkpoint tiering (docs/dispatch.md, "Checkpoint retention and
 * tiering"): a checkpoint directory to the object store and back, and the
 * store's own retention. Blocking: called on libuv's thread pool.
 */
#include "exec.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

/* Every object of job's checkpoint name lies under jobs/<job>/<name>/. */
static int key_of(char *out, size_t n, int64_t job, const char *name, const char *path,
		  struct ty_err *err)
{
	if ((size_t)snprintf(out, n, "jobs/%lld/%s%s%s", (long long)job, name, path ? "/" : "",
			     path ? path : "") >= n)
		return ty_err_set(err, TY_EINVAL, "object key for '%s/%s' is too long", name,
				  path ? path : "");
	return 0;
}

static void sha256_hex(char out[65], const void *p, size_t n)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;

	EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < mdlen && i < 32; i++)
		sprintf(out + 2 * i, "%02x", md[i]);
	out[64] = 0;
}

static int read_all(char **out, size_t *len, const char *path, struct ty_err *err)
{
	FILE *f = fopen(path, "rb");
	char *p = NULL;
	long n;

	*out = NULL;
	if (!f)
		return ty_err_set(err, TY_EIO, "cannot open '%s': %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > (long)EXEC_CKPT_MANIFEST_MAX ||
	    fseek(f, 0, SEEK_SET) || !(p = malloc((size_t)n + 1)) ||
	    fread(p, 1, (size_t)n, f) != (size_t)n) {
		fclose(f);
		free(p);
		return ty_err_set(err, TY_EIO, "cannot read '%s'", path);
	}
	fclose(f);
	p[n] = 0;
	*out = p;
	*len = (size_t)n;
	return 0;
}

int exec_tier_upload(int64_t *bytes_out, const struct exec_objstore *s, int64_t job,
		     const char *dir, const char *name, struct ty_err *err)
{
	char mpath[PATH_MAX], key[2048], path[PATH_MAX], want[65], got[65];
	char *mtext = NULL, *back = NULL;
	size_t mlen = 0, blen = 0, i;
	json_t *m = NULL, *f;
	int64_t bytes = 0;
	int rc;

	*bytes_out = 0;
	if ((size_t)snprintf(mpath, sizeof(mpath), "%s/%s/" EXEC_CKPT_MANIFEST, dir, name) >=
	    sizeof(mpath))
		return ty_err_set(err, TY_EINVAL, "'%s/%s' is too long", dir, name);
	if ((rc = read_all(&mtext, &mlen, mpath, err)))
		return rc;
	if (!(m = json_loadb(mtext, mlen, JSON_REJECT_DUPLICATES, NULL)) ||
	    !json_is_array(json_object_get(m, "files"))) {
		rc = ty_err_set(err, TY_EPARSE, "%s: not a manifest", mpath);
		goto out;
	}
	/* the files first, the manifest last: a manifest in the store means it is whole */
	json_array_foreach(json_object_get(m, "files"), i, f)
	{
		const char *p = json_string_value(json_object_get(f, "path"));
		int64_t size = (int64_t)json_integer_value(json_object_get(f, "size")), have;

		if (!p || !exec_ckpt_path_ok(p)) {
			rc = ty_err_set(err, TY_EPARSE, "%s: files[%zu] has no usable path", mpath,
					i);
			goto out;
		}
		if ((size_t)snprintf(path, sizeof(path), "%s/%s/%s", dir, name, p) >=
		    sizeof(path)) {
			rc = ty_err_set(err, TY_EINVAL, "'%s/%s/%s' is too long", dir, name, p);
			goto out;
		}
		if ((rc = key_of(key, sizeof(key), job, name, p, err)) ||
		    (rc = exec_objstore_put_file(s, key, path, err)))
			goto out;
		/* verified: the store holds exactly the manifest's size */
		if ((rc = exec_objstore_size(&have, s, key, err)))
			goto out;
		if (have != size) {
			rc =
			    ty_err_set(err, TY_ECONFLICT,
				       "the object store holds %lld bytes of '%s/%s', the manifest "
				       "says %lld",
				       (long long)have, name, p, (long long)size);
			goto out;
		}
		bytes += size;
	}
	if ((rc = key_of(key, sizeof(key), job, name, EXEC_CKPT_MANIFEST, err)) ||
	    (rc = exec_objstore_put_mem(s, key, mtext, mlen, err)) ||
	    (rc = exec_objstore_get_mem(&back, &blen, s, key, EXEC_CKPT_MANIFEST_MAX, err)))
		goto out;
	sha256_hex(want, mtext, mlen);
	sha256_hex(got, back, blen);
	if (strcmp(want, got)) {
		rc = ty_err_set(err, TY_ECONFLICT,
				"the manifest of '%s' read back from the object store has SHA-256 "
				"%s, the local one %s",
				name, got, want);
		goto out;
	}
	*bytes_out = bytes + (int64_t)mlen;
out:
	json_decref(m);
	free(mtext);
	free(back);
	return rc;
}

int exec_tier_restore(const struct exec_objstore *s, int64_t job, const char *dir, const char *name,
		      int64_t step, struct ty_err *err)
{
	char tmp[PATH_MAX], final[PATH_MAX], key[2048], path[PATH_MAX];
	char *mtext = NULL;
	size_t mlen = 0, i;
	json_t *m = NULL, *f;
	int rc;

	/* not step-*: retention and the resume scan never see a half-restored one */
	if ((size_t)snprintf(final, sizeof(final), "%s/%s", dir, name) >= sizeof(final) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.restore-%s", dir, name) >= sizeof(tmp))
		return ty_err_set(err, TY_EINVAL, "'%s/%s' is too long", dir, name);
	if ((rc = exec_ckpt_remove(tmp, err)))
		return rc;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", dir, strerror(errno));
	if (mkdir(tmp, 0755) < 0)
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", tmp, strerror(errno));
	if ((rc = key_of(key, sizeof(key), job, name, EXEC_CKPT_MANIFEST, err)) ||
	    (rc = exec_objstore_get_mem(&mtext, &mlen, s, key, EXEC_CKPT_MANIFEST_MAX, err)))
		goto out;
	if (!(m = json_loadb(mtext, mlen, JSON_REJECT_DUPLICATES, NULL)) ||
	    !json_is_array(json_object_get(m, "files"))) {
		rc = ty_err_set(err, TY_EPARSE, "the object store's manifest of '%s' is not one",
				name);
		goto out;
	}
	json_array_foreach(json_object_get(m, "files"), i, f)
	{
		const char *p = json_string_value(json_object_get(f, "path"));
		char *slash;

		if (!p || !exec_ckpt_path_ok(p)) {
			rc = ty_err_set(err, TY_EPARSE,
					"the object store's manifest of '%s': files[%zu] has no "
					"usable path",
					name, i);
			goto out;
		}
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", tmp, p) >= sizeof(path)) {
			rc = ty_err_set(err, TY_EINVAL, "'%s/%s' is too long", tmp, p);
			goto out;
		}
		/* the file's directories inside the checkpoint */
		for (slash = strchr(path + strlen(tmp) + 1, '/'); slash;
		     slash = strchr(slash + 1, '/')) {
			*slash = 0;
			if (mkdir(path, 0755) < 0 && errno != EEXIST) {
				rc = ty_err_set(err, TY_EIO, "cannot create '%s': %s", path,
						strerror(errno));
				goto out;
			}
			*slash = '/';
		}
		if ((rc = key_of(key, sizeof(key), job, name, p, err)) ||
		    (rc = exec_objstore_get_file(s, key, path, err)))
			goto out;
	}
	if ((size_t)snprintf(path, sizeof(path), "%s/" EXEC_CKPT_MANIFEST, tmp) >= sizeof(path)) {
		rc = ty_err_set(err, TY_EINVAL, "'%s' is too long", tmp);
		goto out;
	}
	{
		FILE *mf = fopen(path, "wb");

		if (!mf || fwrite(mtext, 1, mlen, mf) != mlen || fclose(mf)) {
			if (mf)
				fclose(mf);
			rc = ty_err_set(err, TY_EIO, "cannot write '%s'", path);
			goto out;
		}
	}
	/* whole and as the manifest says (sizes, SHA-256), or not restored at all */
	if ((rc = exec_ckpt_verify(tmp, step, err)))
		goto out;
	if (rename(tmp, final) < 0)
		rc = ty_err_set(err, TY_EIO, "cannot rename '%s' to '%s': %s", tmp, final,
				strerror(errno));
out:
	if (rc) {
		struct ty_err ignored = {0};

		exec_ckpt_remove(tmp, &ignored);
	}
	json_decref(m);
	free(mtext);
	return rc;
}

int exec_tier_delete(const struct exec_objstore *s, int64_t job, const json_t *entry,
		     struct ty_err *err)
{
	const char *name = json_string_value(json_object_get(entry, "name"));
	char key[2048];
	json_t *p;
	size_t i;
	int rc;

	/* the manifest first: without it the rest is no checkpoint */
	if ((rc = key_of(key, sizeof(key), job, name, EXEC_CKPT_MANIFEST, err)) ||
	    (rc = exec_objstore_delete(s, key, err)))
		return rc;
	json_array_foreach(json_object_get(entry, "files"), i, p)
	{
		if ((rc = key_of(key, sizeof(key), job, name, json_string_value(p), err)) ||
		    (rc = exec_objstore_delete(s, key, err)))
			return rc;
	}
	return 0;
}

int exec_tier_index_get(json_t **out, const struct exec_objstore *s, int64_t job,
			struct ty_err *err)
{
	char key[256], *text = NULL;
	size_t n = 0;
	json_t *j;
	int rc;

	*out = NULL;
	snprintf(key, sizeof(key), "jobs/%lld/" EXEC_TIER_INDEX, (long long)job);
	rc = exec_objstore_get_mem(&text, &n, s, key, (size_t)16 << 20, err);
	if (rc == TY_ENOTFOUND) {
		ty_err_clear(err);
		*out = json_pack("{s:[]}", "steps");
		return *out ? 0 : ty_err_set(err, TY_ENOMEM, NULL);
	}
	if (rc)
		return rc;
	j = json_loadb(text, n, 0, NULL);
	free(text);
	if (!json_is_array(json_object_get(j, "steps"))) {
		json_decref(j);
		return ty_err_set(err, TY_EPARSE, "the object store's %s is not an index", key);
	}
	*out = j;
	return 0;
}

int exec_tier_index_put(const struct exec_objstore *s, int64_t job, const json_t *idx,
			struct ty_err *err)
{
	char key[256], *text = json_dumps(idx, JSON_COMPACT | JSON_SORT_KEYS);
	int rc;

	if (!text)
		return ty_err_set(err, TY_ENOMEM, NULL);
	snprintf(key, sizeof(key), "jobs/%lld/" EXEC_TIER_INDEX, (long long)job);
	rc = exec_objstore_put_mem(s, key, text, strlen(text), err);
	free(text);
	return rc;
}

void exec_tier_prune_plan(bool *del, const int64_t *steps, size_t n, int keep, int keep_every)
{
	for (size_t i = 0; i < n; i++)
		del[i] = keep > 0 && (int)i >= keep && !exec_ckpt_every(steps[i], keep_every);
}

int64_t exec_tier_bytes(const json_t *idx)
{
	int64_t b = 0;
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(idx, "steps"), i, e)
	{
		b += (int64_t)json_integer_value(json_object_get(e, "bytes"));
	}
	return b;
}

/* The index entries newest first: e inserted in its place (replacing one of its step). */
static int index_add(json_t *idx, json_t *e)
{
	json_t *steps = json_object_get(idx, "steps"), *x;
	int64_t step = (int64_t)json_integer_value(json_object_get(e, "step"));
	size_t i, at = json_array_size(steps);

	json_array_foreach(steps, i, x)
	{
		int64_t s = (int64_t)json_integer_value(json_object_get(x, "step"));

		if (s == step) {
			return json_array_set_new(steps, i, e);
		}
		if (s < step) {
			at = i;
			break;
		}
	}
	return json_array_insert_new(steps, at, e);
}

int exec_tier_move(void *ud, const char *dir, const struct exec_ckpt_entry *e, struct ty_err *err)
{
	struct exec_tier_ctx *t = ud;
	json_t *steps, *entry = NULL, *files = NULL, *m = NULL;
	char mpath[PATH_MAX];
	int64_t bytes = 0, *st = NULL;
	bool *del = NULL;
	size_t i, n;
	json_t *f;
	int rc;

	if (!t->idx && (rc = exec_tier_index_get(&t->idx, t->store, t->job, err)))
		return rc;
	if ((rc = exec_tier_upload(&bytes, t->store, t->job, dir, e->name, err)))
		return rc;
	if ((size_t)snprintf(mpath, sizeof(mpath), "%s/%s/" EXEC_CKPT_MANIFEST, dir, e->name) >=
	    sizeof(mpath)) {
		rc = ty_err_set(err, TY_EINVAL, "'%s/%s' is too long", dir, e->name);
		goto out;
	}
	if (!(m = json_load_file(mpath, 0, NULL)) || !(files = json_array())) {
		rc = ty_err_set(err, TY_EIO, "cannot read '%s' again", mpath);
		goto out;
	}
	json_array_foreach(json_object_get(m, "files"), i, f)
	{
		json_array_append(files, json_object_get(f, "path"));
	}
	entry = json_pack("{s:I, s:s, s:I, s:O}", "step", (json_int_t)e->step, "name", e->name,
			  "bytes", (json_int_t)bytes, "files", files);
	if (!entry || index_add(t->idx, entry)) {
		entry = NULL;
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	entry = NULL;
	/* the store's own retention: its newest keep and every keep_every-th */
	steps = json_object_get(t->idx, "steps");
	n = json_array_size(steps);
	if (!(st = calloc(n + 1, sizeof(*st))) || !(del = calloc(n + 1, sizeof(*del)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (i = 0; i < n; i++)
		st[i] =
		    (int64_t)json_integer_value(json_object_get(json_array_get(steps, i), "step"));
	exec_tier_prune_plan(del, st, n, t->keep, t->keep_every);
	for (i = n; i-- > 0;) {
		if (!del[i])
			continue;
		if ((rc = exec_tier_delete(t->store, t->job, json_array_get(steps, i), err)))
			break;
		json_array_remove(steps, i);
	}
	/* the index says what the store holds, even after a failed delete */
	{
		struct ty_err ierr = {0};
		int irc = exec_tier_index_put(t->store, t->job, t->idx, &ierr);

		if (!rc && irc) {
			rc = irc;
			*err = ierr;
		}
	}
	if (!rc)
		t->moved++;
out:
	free(st);
	free(del);
	json_decref(entry);
	json_decref(files);
	json_decref(m);
	return rc;
}

int exec_tier_restore_newer(int64_t *restored, const struct exec_objstore *s, int64_t job,
			    const char *dir, struct ty_err *err)
{
	struct exec_ckpt_entry *e = NULL;
	json_t *idx = NULL, *top;
	int64_t step;
	size_t n = 0;
	const char *name;
	int rc;

	*restored = -1;
	if ((rc = exec_tier_index_get(&idx, s, job, err)))
		return rc;
	top = json_array_get(json_object_get(idx, "steps"), 0);
	name = json_string_value(json_object_get(top, "name"));
	step = (int64_t)json_integer_value(json_object_get(top, "step"));
	if (!top || !name || exec_ckpt_step_of(name) != step)
		goto out;
	if ((rc = exec_ckpt_list(&e, &n, dir, err)))
		goto out;
	/* a local one as new (a manifest: whole, or to be judged by the resume) wins */
	for (size_t i = 0; i < n; i++)
		if (e[i].manifest && e[i].step >= step)
			goto out;
	if (!(rc = exec_tier_restore(s, job, dir, name, step, err)))
		*restored = step;
out:
	free(e);
	json_decref(idx);
	return rc;
}
