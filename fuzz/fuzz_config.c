/*
 * The config parser (common/config.c): a config file, environment
 * variables and flags at once. The input is the file's text, then a line
 * "%%", then one command-line argument per line; an argument line
 * "ENV:NAME=value" sets TYFUZZ_NAME in the environment instead (removed
 * again after the call; TYFUZZ_CONFIG is never set). Every "--config..."
 * argument is pointed at the file written from the input, so the parser
 * never reads another file. The
 * options are those of trainyard-api's kind: strings, ranged and
 * unranged integers, booleans. Invariants: a failure is TY_ECONFIG (or
 * TY_ENOMEM) with a message; after a success every ranged integer is in
 * range, every source is one of the four, rest_index is within argv.
 */
#include "fuzz.h"
#include "ty_config.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

#define MAX_ARGS 64
#define MAX_ENV 8

static const struct ty_opt opts[] = {
	{"database-url", TY_OPT_STR, NULL, 0, 0, "PostgreSQL URL"},
	{"listen-addr", TY_OPT_STR, "127.0.0.1", 0, 0, "address"},
	{"port", TY_OPT_INT, "8080", 0, 65535, "port"},
	{"threads", TY_OPT_INT, "4", 1, 256, "threads"},
	{"max-body-bytes", TY_OPT_INT, "1048576", 1024, 67108864, "bytes"},
	{"offset", TY_OPT_INT, NULL, 0, 0, "any integer"},
	{"log-json", TY_OPT_BOOL, "false", 0, 0, "bool"},
	{"migrate", TY_OPT_BOOL, NULL, 0, 0, "bool"},
	{"x", TY_OPT_STR, NULL, 0, 0, "a one-letter name"},
};
#define NOPTS (sizeof(opts) / sizeof(opts[0]))

static char file[PATH_MAX], config_arg[PATH_MAX + 16];

static void cleanup(void)
{
	if (file[0])
		unlink(file);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	int fd;

	snprintf(file, sizeof(file), "%s/ty-fuzz-config.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_CHECK((fd = mkstemp(file)) >= 0);
	close(fd);
	atexit(cleanup);
	snprintf(config_arg, sizeof(config_arg), "--config=%s", file);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = fuzz_cstr(data, size), *args, *argv[MAX_ARGS + 2], *envs[MAX_ENV];
	size_t flen;
	int argc = 1, nenv = 0, rest = -1, fd, rc;
	struct ty_config *c;
	struct ty_err err = {0};

	if (!text)
		return 0;
	args = strstr(text, "\n%%\n");
	flen = args ? (size_t)(args - text) + 1 : size;
	fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	FUZZ_CHECK(write(fd, text, flen) == (ssize_t)flen);
	close(fd);

	argv[0] = "fuzz";
	if (args) {
		char *line = args + 4, *save = NULL;

		for (line = strtok_r(line, "\n", &save); line && argc < MAX_ARGS + 1;
		     line = strtok_r(NULL, "\n", &save)) {
			char *eq;

			if (!strncmp(line, "ENV:", 4) && (eq = strchr(line, '=')) && eq > line + 4 &&
			    nenv < MAX_ENV) {
				char name[256];

				*eq = '\0';
				snprintf(name, sizeof(name), "TYFUZZ_%s", line + 4);
				if (!strchr(name, '=') && strcmp(name, "TYFUZZ_CONFIG") &&
				    setenv(name, eq + 1, 1) == 0)
					envs[nenv++] = strdup(name);
				continue;
			}
			argv[argc++] = strncmp(line, "--config", 8) ? line : config_arg;
		}
	}
	argv[argc] = NULL;

	c = ty_config_new(opts, NOPTS, "TYFUZZ");
	FUZZ_CHECK(c);
	rc = ty_config_load(c, argc, argv, &rest, &err);
	if (rc) {
		FUZZ_CHECK(rc == TY_ECONFIG || rc == TY_ENOMEM);
		FUZZ_CHECK(err.msg[0]);
	} else {
		FUZZ_CHECK(rest >= 1 && rest <= argc);
		for (size_t i = 0; i < NOPTS; i++) {
			const char *src = ty_config_source(c, opts[i].name);

			FUZZ_CHECK(!strcmp(src, "default") || !strcmp(src, "file") ||
				   !strcmp(src, "env") || !strcmp(src, "flag"));
			if (opts[i].type == TY_OPT_INT && ty_config_str(c, opts[i].name) &&
			    (opts[i].min || opts[i].max)) {
				long long v = ty_config_int(c, opts[i].name);

				FUZZ_CHECK(v >= opts[i].min && v <= opts[i].max);
			}
			if (opts[i].type == TY_OPT_BOOL)
				(void)ty_config_bool(c, opts[i].name);
		}
	}
	ty_config_free(c);
	for (int i = 0; i < nenv; i++) {
		if (envs[i])
			unsetenv(envs[i]);
		free(envs[i]);
	}
	free(text);
	return 0;
}
