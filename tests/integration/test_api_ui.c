/*
 * The dashboard's static files (--ui-dir; docs/api.md "Dashboard"): types,
 * cache and security headers, HEAD, the / redirect, and every way out of
 * the directory refused without leaking a byte of what lies outside.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INDEX "<!doctype html><title>trainyard</title>UI-INDEX"
#define ASSET "console.log('UI-ASSET')"
#define OUTSIDE "SECRET-OUTSIDE"
#define HIDDEN "SECRET-HIDDEN"

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	REQUIRE(f);
	fputs(text, f);
	REQUIRE(fclose(f) == 0);
}

/* A server on a fresh database serving a dashboard directory, made once. */
static struct ty_api *ui_api(void)
{
	static struct ty_api *api;
	static char dir[4096];
	const char *w;

	if (api) {
		ty_test_api_use(api);
		return api;
	}
	w = ty_test_workdir();
	snprintf(dir, sizeof(dir), "%s/ui", w);
	REQUIRE(mkdir(dir, 0755) == 0);
	REQUIRE(mkdir(ty_test_strf("%s/assets", dir), 0755) == 0);
	REQUIRE(mkdir(ty_test_strf("%s/sub", dir), 0755) == 0);
	put(ty_test_strf("%s/index.html", dir), INDEX);
	put(ty_test_strf("%s/assets/index-3f2a9c.js", dir), ASSET);
	put(ty_test_strf("%s/assets/index-3f2a9c.css", dir), "body{}");
	put(ty_test_strf("%s/favicon.ico", dir), "ICO");
	put(ty_test_strf("%s/blob.bin", dir), "BIN");
	put(ty_test_strf("%s/.env", dir), HIDDEN);
	put(ty_test_strf("%s/x", w), OUTSIDE);
	put(ty_test_strf("%s/secret.txt", w), OUTSIDE);
	REQUIRE(symlink("../secret.txt", ty_test_strf("%s/leak.txt", dir)) == 0);
	REQUIRE(symlink(w, ty_test_strf("%s/up", dir)) == 0);
	REQUIRE(symlink("../index.html", ty_test_strf("%s/sub/home.html", dir)) == 0);
	api = ty_test_api_start(ty_test_db_new(), (const char *const[]){"--ui-dir", dir, NULL});
	return api;
}

/*
 * GET path exactly as written (curl would resolve "/ui/../x" to "/x"
 * itself): the status, and the body into resp->body.
 */
static size_t on_body(char *p, size_t size, size_t n, void *cls)
{
	struct ty_resp *r = cls;
	size_t len = size * n;

	r->body = realloc(r->body, r->body_len + len + 1);
	memcpy(r->body + r->body_len, p, len);
	r->body_len += len;
	r->body[r->body_len] = '\0';
	return len;
}

static int get_as_is(struct ty_resp *r, struct ty_api *api, const char *path)
{
	CURL *c = curl_easy_init();
	long status = 0;

	ty_resp_free(r);
	REQUIRE(c);
	curl_easy_setopt(c, CURLOPT_URL, ty_test_strf("%s%s", ty_test_api_url(api), path));
	curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	r->status = (int)status;
	if (!r->body)
		r->body = strdup("");
	return r->status;
}

static void check_header(const struct ty_resp *r, const char *name, const char *want)
{
	const char *v = ty_resp_header(r, name);

	if (!v || strcmp(v, want))
		FAIL("%s: '%s', want '%s'", name, v ? v : "(none)", want);
}

static void check_security_headers(const struct ty_resp *r)
{
	check_header(r, "Content-Security-Policy",
		     "default-src 'self'; connect-src 'self'; img-src 'self' data:; "
		     "style-src 'self'; script-src 'self'; frame-ancestors 'none'; "
		     "base-uri 'none'; form-action 'self'; object-src 'none'");
	check_header(r, "X-Content-Type-Options", "nosniff");
	check_header(r, "Referrer-Policy", "no-referrer");
	check_header(r, "X-Frame-Options", "DENY");
}

TY_TEST(index_at_ui_slash_and_ui)
{
	static const char *const paths[] = {"/ui/", "/ui", "/ui/index.html", "/ui/sub/home.html"};
	struct ty_resp r = {0};

	ui_api();
	for (int i = 0; i < 4; i++) {
		ty_test_context("GET %s", paths[i]);
		ty_http(&r, "GET", paths[i], NULL, NULL, NULL);
		REQUIRE_STATUS(&r, 200);
		CHECK_STR_EQ(r.body, INDEX);
		check_header(&r, "Content-Type", "text/html; charset=utf-8");
		check_header(&r, "Cache-Control", "no-cache");
		check_security_headers(&r);
		CHECK(ty_resp_header(&r, "X-Request-Id") != NULL);
	}
	ty_resp_free(&r);
}

TY_TEST(asset_with_its_type_and_immutable_cache)
{
	static const char *const rows[][3] = {
	    {"/ui/assets/index-3f2a9c.js", "text/javascript; charset=utf-8",
	     "public, max-age=31536000, immutable"},
	    {"/ui/assets/index-3f2a9c.css", "text/css; charset=utf-8",
	     "public, max-age=31536000, immutable"},
	    {"/ui/favicon.ico", "image/x-icon", "no-cache"},
	    {"/ui/blob.bin", "application/octet-stream", "no-cache"},
	};
	struct ty_resp r = {0};

	ui_api();
	for (int i = 0; i < 4; i++) {
		ty_test_context("GET %s", rows[i][0]);
		ty_http(&r, "GET", rows[i][0], "ty_not_a_real_token", NULL, NULL);
		REQUIRE_STATUS(&r, 200); /* public: a bad token changes nothing */
		check_header(&r, "Content-Type", rows[i][1]);
		check_header(&r, "Cache-Control", rows[i][2]);
		check_security_headers(&r);
	}
	ty_http(&r, "GET", "/ui/assets/index-3f2a9c.js", NULL, NULL, NULL);
	CHECK_STR_EQ(r.body, ASSET);
	ty_resp_free(&r);
}

TY_TEST(head_has_the_headers_and_no_body)
{
	struct ty_resp r = {0};

	ui_api();
	ty_http(&r, "HEAD", "/ui/assets/index-3f2a9c.js", NULL, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(r.body_len == 0);
	check_header(&r, "Content-Type", "text/javascript; charset=utf-8");
	check_header(&r, "Content-Length", ty_test_strf("%zu", strlen(ASSET)));
	check_security_headers(&r);
	ty_http(&r, "HEAD", "/ui/nope.js", NULL, NULL, NULL);
	CHECK_STATUS(&r, 404);
	ty_resp_free(&r);
}

TY_TEST(root_redirects_to_ui)
{
	struct ty_resp r = {0};

	ui_api();
	ty_http(&r, "GET", "/", NULL, NULL, NULL);
	REQUIRE_STATUS(&r, 302);
	check_header(&r, "Location", "/ui/");
	ty_resp_free(&r);
}

TY_TEST(other_methods_are_405)
{
	struct ty_resp r = {0};

	ui_api();
	ty_http(&r, "POST", "/ui/index.html", NULL, "{}", NULL);
	CHECK_PROBLEM(&r, 405, "method_not_allowed", NULL);
	check_header(&r, "Allow", "GET, HEAD");
	ty_resp_free(&r);
}

TY_TEST(missing_file_is_404_problem)
{
	static const char *const paths[] = {"/ui/nope.html", "/ui/assets/", "/ui/assets",
					    "/ui/sub/"};
	struct ty_resp r = {0};

	ui_api();
	for (int i = 0; i < 4; i++) {
		ty_test_context("GET %s", paths[i]);
		ty_http(&r, "GET", paths[i], NULL, NULL, NULL);
		CHECK_PROBLEM(&r, 404, "not_found", NULL);
		check_security_headers(&r);
		check_header(&r, "Cache-Control", "no-store");
	}
	ty_resp_free(&r);
}

/* Each answer is a 404 (by route or file) that shows nothing from outside the directory. */
TY_TEST(no_way_out_of_the_directory)
{
	static const char *const paths[] = {
	    "/ui/../x",	       "/ui/%2e%2e/x",	  "/ui/%2E%2E/x",     "/ui/..%2fx",
	    "/ui/a%2fb",       "/ui/%2e%2e%2fx",  "/ui/sub/../../x", "/ui/./index.html",
	    "/ui/leak.txt",    "/ui/up/x",	  "/ui/up/secret.txt", "/ui/.env",
	    "/ui/%2eenv",      "/ui/assets/%2e%2e/%2e%2e/x", "/ui/index.html%00.js",
	    "/ui/..%5cx",      "/ui//etc/passwd", "/ui/%252e%252e/x",
	};
	struct ty_api *api = ui_api();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		ty_test_context("GET %s", paths[i]);
		get_as_is(&r, api, paths[i]);
		CHECK(r.status == 404);
		CHECK(!strstr(r.body, OUTSIDE) && !strstr(r.body, HIDDEN) &&
		      !strstr(r.body, "root:"));
	}
	ty_resp_free(&r);
}

TY_TEST(without_ui_dir_it_is_ui_not_installed)
{
	static const char *const paths[] = {"/ui/", "/ui", "/ui/index.html", "/"};
	const struct ty_stack *s = ty_stack_get(); /* a server without --ui-dir */
	struct ty_resp r = {0};

	ty_test_api_use(s->api);
	for (int i = 0; i < 4; i++) {
		ty_test_context("GET %s", paths[i]);
		ty_http(&r, "GET", paths[i], s->admin, NULL, NULL);
		CHECK_PROBLEM(&r, 404, "ui_not_installed", NULL);
		CHECK(ty_jstr(r.json, "detail") && strstr(ty_jstr(r.json, "detail"), "--ui-dir"));
	}
	ty_resp_free(&r);
}

TY_TEST(a_missing_ui_dir_stops_the_start)
{
	/* not started: the harness would end the case; the binary's own check is enough */
	const char *dir = ty_test_strf("%s/no-such-dir", ty_test_workdir());
	const char *cmd = ty_test_strf("%s --database-url '%s' --log-key '%s' --ui-dir '%s' "
				       "--port 0 >%s/nodir.log 2>&1",
				       getenv("TY_API_BIN"), ty_stack_get()->db_url,
				       ty_test_log_key(), dir, ty_test_workdir());
	FILE *f;
	char line[1024] = "";

	CHECK(system(cmd) != 0);
	f = fopen(ty_test_strf("%s/nodir.log", ty_test_workdir()), "r");
	REQUIRE(f);
	while (fgets(line, sizeof(line), f) && !strstr(line, "--ui-dir"))
		;
	fclose(f);
	CHECK(strstr(line, "--ui-dir") && strstr(line, "no-such-dir"));
}
