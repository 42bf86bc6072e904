/*
 * OCI images on the node (runtime.h): an image layout ("oci:DIR[:TAG]")
 * or an archive of one ("oci-archive:FILE[:TAG]") that the operator made
 * available, unpacked once per node with umoci and cached by the digest of
 * its manifest. Blocking: called on the thread pool.
 */
#include "exec.h"
#include "runtime.h"
#include "ty_crypto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REF_NAME "org.opencontainers.image.ref.name"

int exec_image_ref_parse(struct exec_image_ref *r, const char *ref, struct ty_err *err)
{
	const char *rest, *colon;

	memset(r, 0, sizeof(*r));
	if (!strncmp(ref, "oci:", 4)) {
		rest = ref + 4;
	} else if (!strncmp(ref, "oci-archive:", 12)) {
		rest = ref + 12;
		r->archive = true;
	} else {
		return ty_err_set(err, TY_EINVAL,
				  "image '%s' is not oci:DIR[:TAG] or oci-archive:FILE[:TAG]", ref);
	}
	if (rest[0] != '/')
		return ty_err_set(err, TY_EINVAL, "image '%s': the path must be absolute", ref);
	colon = strrchr(rest, ':');
	if (colon && strchr(colon, '/'))
		colon = NULL; /* a ':' inside the path, not a tag */
	if ((size_t)(colon ? colon - rest : (ptrdiff_t)strlen(rest)) >= sizeof(r->path) ||
	    (colon && strlen(colon + 1) >= sizeof(r->tag)))
		return ty_err_set(err, TY_EINVAL, "image '%s' is too long", ref);
	snprintf(r->path, sizeof(r->path), "%.*s",
		 (int)(colon ? colon - rest : (ptrdiff_t)strlen(rest)), rest);
	snprintf(r->tag, sizeof(r->tag), "%s", colon && colon[1] ? colon + 1 : "latest");
	for (const char *p = r->tag; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *p))
			return ty_err_set(err, TY_EINVAL, "image '%s': tag '%s' is not valid", ref,
					  r->tag);
	return 0;
}

int exec_image_digest(char hex[65], const char *layout, const char *tag, struct ty_err *err)
{
	char path[4200];
	json_error_t jerr;
	json_t *index, *m;
	size_t i;
	int rc = TY_ENOTFOUND;

	snprintf(path, sizeof(path), "%s/index.json", layout);
	if (!(index = json_load_file(path, 0, &jerr)))
		return ty_err_set(err, access(path, F_OK) ? TY_ENOTFOUND : TY_EPARSE,
				  "'%s': %s", path, access(path, F_OK) ? strerror(errno) : jerr.text);
	json_array_foreach(json_object_get(index, "manifests"), i, m)
	{
		const char *name = json_string_value(
		    json_object_get(json_object_get(m, "annotations"), REF_NAME));
		const char *digest = json_string_value(json_object_get(m, "digest"));

		if (!name || strcmp(name, tag))
			continue;
		if (!digest || strncmp(digest, "sha256:", 7) || strlen(digest) != 71 ||
		    strspn(digest + 7, "0123456789abcdef") != 64) {
			rc = ty_err_set(err, TY_EPARSE, "'%s': tag '%s' has no sha256 digest", path,
					tag);
			goto out;
		}
		memcpy(hex, digest + 7, 65);
		rc = 0;
		goto out;
	}
	rc = ty_err_set(err, TY_ENOTFOUND, "'%s' has no tag '%s'", path, tag);
out:
	json_decref(index);
	return rc;
}

/* The archive unpacked to a layout under cache, keyed by its path, size and mtime. */
static int archive_layout(char *out, size_t outsz, const char *cache, const char *file,
			  struct ty_err *err)
{
	char key[4200], hex[TY_SHA256_HEX_LEN + 1], tmp[4300];
	struct stat st;
	int rc;

	if (stat(file, &st))
		return ty_err_set(err, TY_ENOTFOUND, "'%s': %s", file, strerror(errno));
	snprintf(key, sizeof(key), "%s\n%lld\n%lld", file, (long long)st.st_size,
		 (long long)st.st_mtime);
	ty_sha256_hex(hex, key, strlen(key));
	snprintf(out, outsz, "%s/layouts/%.32s", cache, hex);
	if (!access(out, F_OK))
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", out, (int)getpid());
	if ((rc = exec_mkdirs(tmp, err)))
		return rc;
	{
		char *argv[] = {"tar", "-xf", (char *)file, "-C", tmp, NULL};
		char msg[300];

		if ((rc = exec_rt_run(argv, NULL, msg, sizeof(msg))) != 0) {
			exec_rt_remove_tree(tmp);
			return ty_err_set(err, TY_EIO, "'%s' does not unpack with tar: %s", file,
					  msg);
		}
	}
	if (rename(tmp, out))
		exec_rt_remove_tree(tmp); /* another attempt was first */
	return 0;
}

int exec_image_rootfs(char *out, size_t outsz, const char *cache, const char *ref,
		      struct ty_err *err)
{
	struct exec_image_ref r;
	char layout[4200], hex[65], dest[4300], done[4400], tmp[4400], image[4400], msg[300];
	struct ty_err why = {0};
	int rc;

	if ((rc = exec_image_ref_parse(&r, ref, err)))
		return rc;
	if (r.archive) {
		if ((rc = archive_layout(layout, sizeof(layout), cache, r.path, &why)))
			return ty_err_set(err, rc, "image '%s': %s", ref, why.msg);
	} else {
		snprintf(layout, sizeof(layout), "%s", r.path);
	}
	if ((rc = exec_image_digest(hex, layout, r.tag, &why)))
		return ty_err_set(err, rc, "image '%s' does not exist on this node: %s", ref,
				  why.msg);
	snprintf(dest, sizeof(dest), "%s/sha256-%s", cache, hex);
	snprintf(done, sizeof(done), "%s/.unpacked", dest);
	if ((size_t)snprintf(out, outsz, "%s/rootfs", dest) >= outsz)
		return ty_err_set(err, TY_EINVAL, "image cache path '%s' is too long", cache);
	if (!access(done, F_OK))
		return 0; /* cached */
	snprintf(tmp, sizeof(tmp), "%s/.unpack-%s-%d-%lx", cache, hex, (int)getpid(),
		 (unsigned long)(uintptr_t)&r);
	snprintf(image, sizeof(image), "%s:%s", layout, r.tag);
	if ((rc = exec_mkdirs(cache, err)))
		return rc;
	{
		char *argv[] = {"umoci", "unpack", "--image", image, tmp, NULL};

		if (exec_rt_run(argv, NULL, msg, sizeof(msg)) != 0) {
			exec_rt_remove_tree(tmp);
			return ty_err_set(err, TY_EIO, "image '%s' does not unpack: %s", ref, msg);
		}
	}
	{
		char mark[4500];
		int fd;

		snprintf(mark, sizeof(mark), "%s/.unpacked", tmp);
		if ((fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) >= 0)
			close(fd);
	}
	if (rename(tmp, dest))
		exec_rt_remove_tree(tmp); /* unpacked meanwhile */
	if (access(done, F_OK))
		return ty_err_set(err, TY_EIO, "image '%s': cannot keep it in '%s': %s", ref, dest,
				  strerror(errno));
	return 0;
}
