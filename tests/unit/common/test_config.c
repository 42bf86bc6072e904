/* common/ty_config: precedence, flag forms, files, errors. */
#include "ty_config.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct ty_opt opts[] = {
    {"listen-port", TY_OPT_INT, "8080", 1, 65535, "port to listen on"},
    {"listen-addr", TY_OPT_STR, "127.0.0.1", 0, 0, "address to listen on"},
    {"verbose", TY_OPT_BOOL, "false", 0, 0, "log more"},
    {"database-url", TY_OPT_STR, NULL, 0, 0, "libpq URL"},
    {"workers", TY_OPT_INT, "4", 0, 0, "worker threads (no range)"},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))
#define PREFIX "TYTEST"

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOARGS ((const char *const[]){NULL})

static const char *const env_vars[] = {"TYTEST_LISTEN_PORT", "TYTEST_LISTEN_ADDR",
				       "TYTEST_VERBOSE",     "TYTEST_DATABASE_URL",
				       "TYTEST_WORKERS",     "TYTEST_CONFIG"};

static void clear_env(void)
{
	for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); i++)
		unsetenv(env_vars[i]);
}

/* A new config loaded from args (after argv[0]); the status in *rc. */
static struct ty_config *load(int *rc, struct ty_err *err, int *rest, const char *const *args)
{
	char *argv[64];
	int argc = 0;
	struct ty_config *c;

	argv[argc++] = "prog";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	argv[argc] = NULL;
	c = ty_config_new(opts, NOPTS, PREFIX);
	REQUIRE(c != NULL);
	ty_err_clear(err);
	*rc = ty_config_load(c, argc, argv, rest, err);
	return c;
}

/* A temporary file holding text; the caller unlinks it. */
static const char *write_file(const char *text)
{
	char *path = ty_test_strf("/tmp/ty-test-config-XXXXXX");
	int fd = mkstemp(path);
	FILE *f;

	REQUIRE(fd >= 0);
	f = fdopen(fd, "w");
	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
	return path;
}

TY_TEST(defaults)
{
	struct ty_err err = {0};
	int rc, rest = -1;
	struct ty_config *c;

	clear_env();
	c = load(&rc, &err, &rest, NOARGS);
	CHECK_INT_EQ(rc, 0);
	CHECK_INT_EQ(ty_config_int(c, "listen-port"), 8080);
	CHECK_STR_EQ(ty_config_str(c, "listen-addr"), "127.0.0.1");
	CHECK(!ty_config_bool(c, "verbose"));
	CHECK_STR_EQ(ty_config_str(c, "database-url"), NULL);
	CHECK_STR_EQ(ty_config_source(c, "listen-port"), "default");
	CHECK_INT_EQ(rest, 1);
	ty_config_free(c);
}

/* flag > env > file > default, for every combination of the three. */
TY_TEST(precedence)
{
	static const struct {
		bool file, env, flag;
		long long want;
		const char *src;
	} rows[] = {
	    {false, false, false, 8080, "default"}, {true, false, false, 1001, "file"},
	    {false, true, false, 1002, "env"},	    {false, false, true, 1003, "flag"},
	    {true, true, false, 1002, "env"},	    {true, false, true, 1003, "flag"},
	    {false, true, true, 1003, "flag"},	    {true, true, true, 1003, "flag"},
	};
	const char *path = write_file("listen-port = 1001\n");

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		const char *args[8];
		int n = 0, rc;
		struct ty_config *c;

		ty_test_context("file=%d env=%d flag=%d", rows[i].file, rows[i].env, rows[i].flag);
		clear_env();
		if (rows[i].file)
			args[n++] = ty_test_strf("--config=%s", path);
		if (rows[i].env)
			setenv("TYTEST_LISTEN_PORT", "1002", 1);
		if (rows[i].flag)
			args[n++] = "--listen-port=1003";
		args[n] = NULL;
		c = load(&rc, &err, NULL, args);
		CHECK_INT_EQ(rc, 0);
		CHECK_INT_EQ(ty_config_int(c, "listen-port"), rows[i].want);
		CHECK_STR_EQ(ty_config_source(c, "listen-port"), rows[i].src);
		ty_config_free(c);
	}
	clear_env();
	unlink(path);
}

TY_TEST(config_file_named_three_ways)
{
	const char *path = write_file("listen-addr = 10.0.0.1\n");
	static const char *const forms[] = {"--config=", "--config", "env"};

	for (int i = 0; i < 3; i++) {
		struct ty_err err = {0};
		struct ty_config *c;
		int rc;

		ty_test_context("%s", forms[i]);
		clear_env();
		if (i == 0)
			c = load(&rc, &err, NULL, ARGS(ty_test_strf("--config=%s", path)));
		else if (i == 1)
			c = load(&rc, &err, NULL, ARGS("--config", path));
		else {
			setenv("TYTEST_CONFIG", path, 1);
			c = load(&rc, &err, NULL, NOARGS);
		}
		CHECK_INT_EQ(rc, 0);
		CHECK_STR_EQ(ty_config_str(c, "listen-addr"), "10.0.0.1");
		CHECK_STR_EQ(ty_config_source(c, "listen-addr"), "file");
		ty_config_free(c);
	}
	clear_env();
	unlink(path);
}

TY_TEST(flag_forms)
{
	const struct {
		const char *const *args;
		const char *opt, *want;
	} rows[] = {
	    {ARGS("--listen-port=9000"), "listen-port", "9000"},
	    {ARGS("--listen-port", "9001"), "listen-port", "9001"},
	    {ARGS("--listen-addr=a=b"), "listen-addr", "a=b"},
	    {ARGS("--listen-addr="), "listen-addr", ""},
	    {ARGS("--verbose"), "verbose", "true"},
	    {ARGS("--verbose=false"), "verbose", "false"},
	    {ARGS("--verbose=yes"), "verbose", "true"},
	    {ARGS("--verbose=OFF"), "verbose", "false"},
	    {ARGS("--no-verbose"), "verbose", "false"},
	    {ARGS("--verbose", "--no-verbose"), "verbose", "false"},
	    {ARGS("--no-verbose", "--verbose"), "verbose", "true"},
	    {ARGS("--listen-port=1", "--listen-port=2"), "listen-port", "2"},
	    {ARGS("--workers=-5"), "workers", "-5"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		struct ty_config *c;
		int rc;

		ty_test_context("%s%s", rows[i].args[0], rows[i].args[1] ? " ..." : "");
		clear_env();
		c = load(&rc, &err, NULL, rows[i].args);
		CHECK_INT_EQ(rc, 0);
		if (!strcmp(rows[i].want, "true") || !strcmp(rows[i].want, "false"))
			CHECK_INT_EQ(ty_config_bool(c, rows[i].opt), !strcmp(rows[i].want, "true"));
		else
			CHECK_STR_EQ(ty_config_str(c, rows[i].opt), rows[i].want);
		CHECK_STR_EQ(ty_config_source(c, rows[i].opt), "flag");
		ty_config_free(c);
	}
}

TY_TEST(no_flag_beats_environment)
{
	struct ty_err err = {0};
	struct ty_config *c;
	int rc;

	clear_env();
	setenv("TYTEST_VERBOSE", "1", 1);
	c = load(&rc, &err, NULL, NOARGS);
	CHECK_INT_EQ(rc, 0);
	CHECK(ty_config_bool(c, "verbose"));
	CHECK_STR_EQ(ty_config_source(c, "verbose"), "env");
	ty_config_free(c);

	c = load(&rc, &err, NULL, ARGS("--no-verbose"));
	CHECK_INT_EQ(rc, 0);
	CHECK(!ty_config_bool(c, "verbose"));
	ty_config_free(c);
	clear_env();
}

TY_TEST(environment_names)
{
	struct ty_err err = {0};
	struct ty_config *c;
	int rc;

	clear_env();
	setenv("TYTEST_DATABASE_URL", "postgresql://x/y", 1);
	setenv("TYTEST_LISTEN_ADDR", "0.0.0.0", 1);
	c = load(&rc, &err, NULL, NOARGS);
	CHECK_INT_EQ(rc, 0);
	CHECK_STR_EQ(ty_config_str(c, "database-url"), "postgresql://x/y");
	CHECK_STR_EQ(ty_config_str(c, "listen-addr"), "0.0.0.0");
	CHECK_STR_EQ(ty_config_source(c, "database-url"), "env");
	ty_config_free(c);
	clear_env();
}

/* Every error is TY_ECONFIG and its message names the culprit. */
TY_TEST(errors_name_the_option)
{
	const struct {
		const char *const *args;
		const char *env_var, *env_val;
		const char *must_mention[3];
	} rows[] = {
	    {ARGS("--bogus"), NULL, NULL, {"'--bogus'"}},
	    {ARGS("--bogus=1"), NULL, NULL, {"'--bogus'"}},
	    {ARGS("--no-listen-port"), NULL, NULL, {"--no-listen-port"}},
	    {ARGS("--listen-port=0"), NULL, NULL, {"listen-port", "0"}},
	    {ARGS("--listen-port=65536"), NULL, NULL, {"listen-port", "65536"}},
	    {ARGS("--listen-port=12x"), NULL, NULL, {"listen-port", "12x"}},
	    {ARGS("--listen-port="), NULL, NULL, {"listen-port"}},
	    {ARGS("--listen-port", "abc"), NULL, NULL, {"listen-port", "abc"}},
	    {ARGS("--listen-port=99999999999999999999"), NULL, NULL, {"listen-port"}},
	    {ARGS("--verbose=maybe"), NULL, NULL, {"verbose", "maybe"}},
	    {ARGS("--listen-addr"), NULL, NULL, {"listen-addr", "value"}},
	    {ARGS("stray"), NULL, NULL, {"stray"}},
	    {NOARGS, "TYTEST_VERBOSE", "maybe", {"verbose", "TYTEST_VERBOSE"}},
	    {NOARGS, "TYTEST_LISTEN_PORT", "70000", {"listen-port", "TYTEST_LISTEN_PORT"}},
	    {NOARGS, "TYTEST_CONFIG", "/nonexistent/ty.conf", {"/nonexistent/ty.conf"}},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		struct ty_config *c;
		int rc;

		ty_test_context("row %zu: %s %s", i, rows[i].args[0] ? rows[i].args[0] : "",
				rows[i].env_var ? rows[i].env_var : "");
		clear_env();
		if (rows[i].env_var)
			setenv(rows[i].env_var, rows[i].env_val, 1);
		c = load(&rc, &err, NULL, rows[i].args);
		CHECK_INT_EQ(rc, TY_ECONFIG);
		CHECK_INT_EQ(err.code, TY_ECONFIG);
		for (int k = 0; k < 3 && rows[i].must_mention[k]; k++)
			if (!strstr(err.msg, rows[i].must_mention[k]))
				FAIL("message \"%s\" does not mention \"%s\"", err.msg,
				     rows[i].must_mention[k]);
		ty_config_free(c);
	}
	clear_env();
}

TY_TEST(int_range)
{
	static const struct {
		const char *opt, *val;
		bool ok;
	} rows[] = {
	    {"listen-port", "1", true},
	    {"listen-port", "65535", true},
	    {"listen-port", "0", false},
	    {"listen-port", "65536", false},
	    {"listen-port", "-1", false},
	    {"listen-port", "5 ", false},
	    {"listen-port", "0x10", false},
	    {"listen-port", "", false},
	    {"workers", "0", true},
	    {"workers", "-9223372036854775808", true},
	    {"workers", "9223372036854775807", true},
	    {"workers", "9223372036854775808", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		struct ty_config *c;
		int rc;

		ty_test_context("--%s=%s", rows[i].opt, rows[i].val);
		clear_env();
		c = load(&rc, &err, NULL, ARGS(ty_test_strf("--%s=%s", rows[i].opt, rows[i].val)));
		CHECK_INT_EQ(rc, rows[i].ok ? 0 : TY_ECONFIG);
		if (rows[i].ok)
			CHECK_INT_EQ(ty_config_int(c, rows[i].opt), strtoll(rows[i].val, NULL, 10));
		ty_config_free(c);
	}
}

TY_TEST(rest_index)
{
	const struct {
		const char *const *args;
		int rest;
	} rows[] = {
	    {NOARGS, 1},
	    {ARGS("--verbose"), 2},
	    {ARGS("--listen-port", "5", "--", "python", "train.py"), 4},
	    {ARGS("--", "--bogus", "x"), 2},
	    {ARGS("--verbose", "--"), 3},
	    {ARGS("--listen-addr", "--", "--", "x"), 4},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		struct ty_config *c;
		int rc, rest = -1;

		ty_test_context("row %zu", i);
		clear_env();
		c = load(&rc, &err, &rest, rows[i].args);
		CHECK_INT_EQ(rc, 0);
		CHECK_INT_EQ(rest, rows[i].rest);
		ty_config_free(c);
	}
}

TY_TEST(file_syntax)
{
	const char *path = write_file("# a comment\n"
				      "\n"
				      "   # an indented comment\n"
				      "listen_port = 4242\n"
				      "listen-addr=10.1.2.3   \n"
				      "\tverbose\t=\tyes\n"
				      "database_url = postgresql://u@h/db?sslmode=disable\n");
	struct ty_err err = {0};
	struct ty_config *c;
	int rc;

	clear_env();
	c = load(&rc, &err, NULL, ARGS("--config", path));
	CHECK_INT_EQ(rc, 0);
	CHECK_INT_EQ(ty_config_int(c, "listen-port"), 4242);
	CHECK_STR_EQ(ty_config_str(c, "listen-addr"), "10.1.2.3");
	CHECK(ty_config_bool(c, "verbose"));
	CHECK_STR_EQ(ty_config_str(c, "database-url"), "postgresql://u@h/db?sslmode=disable");
	CHECK_STR_EQ(ty_config_source(c, "listen-port"), "file");
	ty_config_free(c);
	unlink(path);
}

TY_TEST(file_errors_name_key_and_line)
{
	static const struct {
		const char *text;
		const char *mention[2];
	} rows[] = {
	    {"listen-port = 1\nbogus_key = 1\n", {"bogus_key", ":2"}},
	    {"# c\n\nno equals sign here\n", {":3", NULL}},
	    {"listen-port = 0\n", {"listen-port", ":1"}},
	    {"verbose = perhaps\n", {"verbose", "perhaps"}},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const char *path = write_file(rows[i].text);
		struct ty_err err = {0};
		struct ty_config *c;
		int rc;

		ty_test_context("row %zu", i);
		clear_env();
		c = load(&rc, &err, NULL, ARGS(ty_test_strf("--config=%s", path)));
		CHECK_INT_EQ(rc, TY_ECONFIG);
		if (!strstr(err.msg, path))
			FAIL("message \"%s\" does not name the file", err.msg);
		for (int k = 0; k < 2 && rows[i].mention[k]; k++)
			if (!strstr(err.msg, rows[i].mention[k]))
				FAIL("message \"%s\" does not mention \"%s\"", err.msg,
				     rows[i].mention[k]);
		ty_config_free(c);
		unlink(path);
	}
}

TY_TEST(usage_lists_every_option)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	REQUIRE(f != NULL);
	ty_config_usage(f, opts, NOPTS, PREFIX);
	fclose(f);
	for (size_t i = 0; i < NOPTS; i++) {
		const char *flag = ty_test_strf("--%s", opts[i].name);

		if (!strstr(text, flag))
			FAIL("usage does not mention %s", flag);
		if (!strstr(text, opts[i].help))
			FAIL("usage does not show the help of %s", flag);
	}
	CHECK(strstr(text, "TYTEST_LISTEN_PORT") != NULL);
	CHECK(strstr(text, "TYTEST_CONFIG") != NULL);
	CHECK(strstr(text, "8080") != NULL);
	CHECK(strstr(text, "1..65535") != NULL);
	free(text);
}
