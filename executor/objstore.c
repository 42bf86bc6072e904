/*
 * An S3-compatible object store over libcurl: path-style requests signed
 * with AWS SigV4 (CURLOPT_AWS_SIGV4), blocking, for libuv's thread pool.
 */
#include "exec.h"
#include "ty_json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <curl/curl.h>

int exec_objstore_creds_load(struct exec_objstore *s, const char *path, struct ty_err *err)
{
	static const char *const keys[] = {"access_key_id", "secret_access_key", NULL};
	json_error_t je;
	json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	const char *id, *secret, *unk;
	int rc = 0;

	if (!j)
		return ty_err_set(err, TY_EINVAL, "credentials file '%s': %s", path, je.text);
	id = json_string_value(json_object_get(j, "access_key_id"));
	secret = json_string_value(json_object_get(j, "secret_access_key"));
	if (!json_is_object(j) || (unk = ty_json_unknown_key(j, keys)))
		rc = ty_err_set(err, TY_EINVAL,
				"credentials file '%s' must be an object of access_key_id and "
				"secret_access_key only",
				path);
	else if (!id || !*id || !secret || !*secret || strchr(id, ':') ||
		 strlen(id) >= sizeof(s->access_key) || strlen(secret) >= sizeof(s->secret_key))
		rc =
		    ty_err_set(err, TY_EINVAL,
			       "credentials file '%s' needs a non-empty access_key_id (no ':') and "
			       "secret_access_key, each under 256 characters",
			       path);
	else {
		snprintf(s->access_key, sizeof(s->access_key), "%s", id);
		snprintf(s->secret_key, sizeof(s->secret_key), "%s", secret);
	}
	json_decref(j);
	return rc;
}

/* The object's URL: endpoint/bucket/key, the key percent-encoded but for '/'. */
static int url_of(char *out, size_t n, const struct exec_objstore *s, const char *key,
		  struct ty_err *err)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t at = (size_t)snprintf(out, n, "%s/%s/", s->endpoint, s->bucket);

	for (const unsigned char *p = (const unsigned char *)key; *p && at + 4 < n; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-_.~/", *p)) {
			out[at++] = (char)*p;
		} else {
			out[at++] = '%';
			out[at++] = hex[*p >> 4];
			out[at++] = hex[*p & 15];
		}
	}
	if (at + 4 >= n)
		return ty_err_set(err, TY_EINVAL, "object key '%s' is too long", key);
	out[at] = 0;
	return 0;
}

struct membuf {
	char *p;
	size_t n, max;
};

static size_t to_mem(char *data, size_t size, size_t nmemb, void *ud)
{
	struct membuf *b = ud;
	size_t k = size * nmemb;
	char *np;

	if (b->n + k > b->max || !(np = realloc(b->p, b->n + k + 1)))
		return 0;
	b->p = np;
	memcpy(b->p + b->n, data, k);
	b->n += k;
	b->p[b->n] = 0;
	return k;
}

/*
 * One request: method on key, the body read from in (or none), the answer
 * to out, else into mem, else dropped (an error's body is kept to name the
 * store's code when it goes nowhere else); *length the Content-Length
 * (-1: none). A store that cannot be reached is TY_EIO; a status >= 300
 * is TY_ENOTFOUND (404), TY_EPERM (401, 403) or TY_EIO.
 */
static int request(int64_t *length, struct membuf *mem, const struct exec_objstore *s,
		   const char *method, const char *key, FILE *in, int64_t in_len, FILE *out,
		   struct ty_err *err)
{
	char url[4096], sigv4[128], userpwd[600], cerr[CURL_ERROR_SIZE] = "";
	struct membuf ebuf = {NULL, 0, 4096};
	struct curl_slist *h = NULL;
	curl_off_t cl = -1;
	CURL *c = NULL;
	CURLcode cc;
	long code = 0;
	int rc;

	if (length)
		*length = -1;
	if ((rc = url_of(url, sizeof(url), s, key, err)))
		return rc;
	if (!(c = curl_easy_init()))
		return ty_err_set(err, TY_ENOMEM, "cannot start a request to the object store");
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", s->region);
	snprintf(userpwd, sizeof(userpwd), "%s:%s", s->access_key, s->secret_key);
	/* the payload is not hashed: the manifest's digests are checked after the upload */
	h = curl_slist_append(h, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)s->timeout_ms);
	/* a slow store is fine, a stalled one is not: under 1 KiB/s for the timeout */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)((s->timeout_ms + 999) / 1000));
	if (!strcmp(method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READDATA, in);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)in_len);
	} else if (!strcmp(method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (strcmp(method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	if (out) {
		curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
	} else {
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, to_mem);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, mem ? mem : &ebuf);
	}
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	if (cc != CURLE_OK) {
		rc = ty_err_set(err, TY_EIO, "object store %s %s: %s", method, url,
				*cerr ? cerr : curl_easy_strerror(cc));
		goto out;
	}
	if (code >= 300) {
		const char *body = mem && mem->p ? mem->p : ebuf.p ? ebuf.p : "";
		const char *c0 = strstr(body, "<Code>"), *c1 = c0 ? strstr(c0, "</Code>") : NULL;
		int len = c0 && c1 ? (int)(c1 - c0 - 6) : 0;

		rc = ty_err_set(err,
				code == 404		     ? TY_ENOTFOUND
				: code == 401 || code == 403 ? TY_EPERM
							     : TY_EIO,
				"object store %s %s: HTTP %ld%s%.*s", method, url, code,
				len > 0 ? " " : "", len, len > 0 ? c0 + 6 : "");
		goto out;
	}
	if (length && curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK)
		*length = (int64_t)cl;
out:
	free(ebuf.p);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return rc;
}

int exec_objstore_put_file(const struct exec_objstore *s, const char *key, const char *path,
			   struct ty_err *err)
{
	struct stat st;
	FILE *f = fopen(path, "rb");
	int rc;

	if (!f)
		return ty_err_set(err, TY_EIO, "cannot open '%s': %s", path, strerror(errno));
	if (fstat(fileno(f), &st) < 0) {
		fclose(f);
		return ty_err_set(err, TY_EIO, "cannot stat '%s': %s", path, strerror(errno));
	}
	rc = request(NULL, NULL, s, "PUT", key, f, (int64_t)st.st_size, NULL, err);
	fclose(f);
	return rc;
}

int exec_objstore_put_mem(const struct exec_objstore *s, const char *key, const char *data,
			  size_t len, struct ty_err *err)
{
	FILE *f = fmemopen((void *)data, len ? len : 1, "rb");
	int rc;

	if (!f)
		return ty_err_set(err, TY_ENOMEM, NULL);
	rc = request(NULL, NULL, s, "PUT", key, f, (int64_t)len, NULL, err);
	fclose(f);
	return rc;
}

int exec_objstore_get_file(const struct exec_objstore *s, const char *key, const char *path,
			   struct ty_err *err)
{
	FILE *f = fopen(path, "wb");
	int rc;

	if (!f)
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", path, strerror(errno));
	rc = request(NULL, NULL, s, "GET", key, NULL, 0, f, err);
	if (fclose(f) && !rc)
		rc = ty_err_set(err, TY_EIO, "cannot write '%s': %s", path, strerror(errno));
	return rc;
}

int exec_objstore_get_mem(char **out, size_t *len, const struct exec_objstore *s, const char *key,
			  size_t max, struct ty_err *err)
{
	struct membuf b = {NULL, 0, max};
	int rc;

	*out = NULL;
	*len = 0;
	if ((rc = request(NULL, &b, s, "GET", key, NULL, 0, NULL, err))) {
		free(b.p);
		return rc;
	}
	if (!b.p && !(b.p = calloc(1, 1)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	*out = b.p;
	*len = b.n;
	return 0;
}

int exec_objstore_size(int64_t *size, const struct exec_objstore *s, const char *key,
		       struct ty_err *err)
{
	return request(size, NULL, s, "HEAD", key, NULL, 0, NULL, err);
}

int exec_objstore_delete(const struct exec_objstore *s, const char *key, struct ty_err *err)
{
	int rc = request(NULL, NULL, s, "DELETE", key, NULL, 0, NULL, err);

	return rc == TY_ENOTFOUND ? 0 : rc;
}
