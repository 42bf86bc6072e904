/*
 * The dashboard's static files (--ui-dir): GET and HEAD /ui/<path>, read
 * from the directory per request, with the browser security headers.
 */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Vite's bundles stay far below this; a bigger file is not one of ours. */
#define UI_MAX_FILE (32 << 20)

static const struct {
	const char *ext, *type;
} types[] = {
	{"html", "text/html; charset=utf-8"},
	{"js", "text/javascript; charset=utf-8"},
	{"mjs", "text/javascript; charset=utf-8"},
	{"css", "text/css; charset=utf-8"},
	{"svg", "image/svg+xml"},
	{"png", "image/png"},
	{"ico", "image/x-icon"},
	{"json", "application/json"},
	{"map", "application/json"},
	{"woff2", "font/woff2"},
	{"txt", "text/plain; charset=utf-8"},
};

const char *api_ui_content_type(const char *path)
{
	const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');

	if (dot && (!slash || dot > slash))
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (!strcmp(dot + 1, types[i].ext))
				return types[i].type;
	return "application/octet-stream";
}

bool api_ui_path_ok(const char *rel)
{
	const char *s = rel;

	if (!*rel || strlen(rel) > 1024)
		return false;
	for (;;) {
		size_t len = strcspn(s, "/");

		/* empty, ".", "..", hidden; '\' and '%' (a second decoding's raw material) */
		if (len == 0 || s[0] == '.' || memchr(s, '\\', len) || memchr(s, '%', len))
			return false;
		if (!s[len])
			return true;
		s += len + 1;
	}
}

/* Headers of every UI reply, the refusals included (docs/security.md, "Dashboard"). */
static void security_headers(struct api_req *r)
{
	api_reply_header(r, "Content-Security-Policy",
			 "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
			 "style-src 'self'; script-src 'self'; frame-ancestors 'none'; "
			 "base-uri 'none'; form-action 'self'; object-src 'none'");
	api_reply_header(r, "X-Content-Type-Options", "nosniff");
	api_reply_header(r, "Referrer-Policy", "no-referrer");
	api_reply_header(r, "X-Frame-Options", "DENY");
}

static int not_installed(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_UI_NOT_INSTALLED, NULL,
			"no dashboard here: start trainyard-api with --ui-dir DIR (the built "
			"portal/dist) to serve it");
}

static int no_file(struct api_req *r, struct ty_err *err)
{
	return api_fail(r, err, API_P_NOT_FOUND, NULL, "no dashboard file '%s'", r->path);
}

/*
 * Read root/rel into a new buffer: 0, or TY_ENOTFOUND for anything but a
 * regular file inside root (a symlink may point within root, never out).
 */
static int read_file(char **data, size_t *len, const char *root, const char *rel)
{
	char *path = NULL, *real = NULL, *buf = NULL;
	size_t rootlen = strlen(root);
	struct stat st;
	int fd = -1, rc = TY_ENOTFOUND;
	size_t got = 0;

	*data = NULL;
	*len = 0;
	if (!(path = malloc(rootlen + strlen(rel) + 2)))
		return TY_ENOMEM;
	strcpy(path, root);
	path[rootlen] = '/';
	strcpy(path + rootlen + 1, rel);
	if (!(real = realpath(path, NULL))) {
		rc = errno == ENOMEM ? TY_ENOMEM : TY_ENOTFOUND;
		goto out;
	}
	if (strncmp(real, root, rootlen) || real[rootlen] != '/')
		goto out; /* a symlink out of the directory */
	/* resolved already: the last component is no symlink unless swapped since */
	if ((fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0 ||
	    fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > UI_MAX_FILE)
		goto out;
	if (!(buf = malloc((size_t)st.st_size + 1))) {
		rc = TY_ENOMEM;
		goto out;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* shrank meanwhile: serve what is there */
		got += (size_t)n;
	}
	*data = buf;
	*len = got;
	buf = NULL;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	free(real);
	free(path);
	return rc;
}

int api_h_ui_root(struct api_req *r, struct ty_err *err)
{
	security_headers(r);
	if (!api__ui_dir(r->srv))
		return not_installed(r, err);
	api__reply_take(r, 302, NULL, 0, NULL);
	return api_reply_header(r, "Location", "/ui/");
}

int api_h_ui(struct api_req *r, struct ty_err *err)
{
	const char *root = api__ui_dir(r->srv);
	const char *rel = r->params[0] && *r->params[0] ? r->params[0] : "index.html";
	char *data;
	size_t len;
	int rc;

	security_headers(r);
	if (!root)
		return not_installed(r, err);
	if (!api_ui_path_ok(rel))
		return no_file(r, err);
	if ((rc = read_file(&data, &len, root, rel)))
		return rc == TY_ENOTFOUND ? no_file(r, err) : ty_err_set(err, rc, NULL);
	api__reply_take(r, 200, data, len, api_ui_content_type(rel));
	/* Vite's assets/ names carry their content's hash: they never change */
	return api_reply_header(r, "Cache-Control",
				strncmp(rel, "assets/", 7) ? "no-cache"
							   : "public, max-age=31536000, immutable");
}
