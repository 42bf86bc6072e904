/* jobctl option parsing: command tables plus the global options, anywhere in argv. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void cli_strv_free(struct cli_strv *s)
{
	if (!s)
		return;
	free(s->v);
	s->v = NULL;
	s->n = s->cap = 0;
}

static int strv_push(struct cli_strv *s, const char *str, struct ty_err *err)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 8;
		const char **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return ty_err_set(err, TY_ENOMEM, NULL);
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = str;
	return 0;
}

static const struct cli_opt *find_long(const struct cli_opt *opts, size_t n, const char *name,
				       size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (opts[i].name && strlen(opts[i].name) == len &&
		    strncmp(opts[i].name, name, len) == 0)
			return &opts[i];
	return NULL;
}

static const struct cli_opt *find_short(const struct cli_opt *opts, size_t n, char c)
{
	for (size_t i = 0; i < n; i++)
		if (opts[i].short_name && opts[i].short_name == c)
			return &opts[i];
	return NULL;
}

static int store(const struct cli_opt *o, const char *val, struct ty_err *err)
{
	switch (o->kind) {
	case CLI_OPT_FLAG:
		*(bool *)o->dest = true;
		return 0;
	case CLI_OPT_STR:
		*(const char **)o->dest = val;
		return 0;
	case CLI_OPT_LIST:
		return strv_push(o->dest, val, err);
	}
	return ty_err_set(err, TY_EINVAL, "bad option kind");
}

int cli_parse_opts(struct cli_strv *pos, struct cli_strv *rest, struct cli *cli, int argc,
		   char **argv, const struct cli_opt *opts, size_t nopts, struct ty_err *err)
{
	const char *output = NULL;
	const struct cli_opt globals[] = {
		{"server", 0, CLI_OPT_STR, &cli->server_flag},
		{"token", 0, CLI_OPT_STR, &cli->token_flag},
		{"token-file", 0, CLI_OPT_STR, &cli->token_file_flag},
		{"timeout", 0, CLI_OPT_STR, &cli->timeout_flag},
		{"cacert", 0, CLI_OPT_STR, &cli->cacert_flag},
		{"output", 'o', CLI_OPT_STR, &output},
		{"help", 'h', CLI_OPT_FLAG, &cli->help},
	};
	const size_t nglobals = sizeof(globals) / sizeof(globals[0]);
	int rc, i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq = NULL;
		const struct cli_opt *o;
		char shown[80];

		if (strcmp(a, "--") == 0) {
			for (i++; i < argc; i++)
				if ((rc = strv_push(rest ? rest : pos, argv[i], err)))
					return rc;
			break;
		}
		if (a[0] != '-' || a[1] == '\0') {
			/* "-" alone is an argument (stdin for -f) */
			if ((rc = strv_push(pos, a, err)))
				return rc;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2;
			size_t len;

			eq = strchr(name, '=');
			len = eq ? (size_t)(eq - name) : strlen(name);
			snprintf(shown, sizeof(shown), "--%.*s", (int)(len > 60 ? 60 : len), name);
			o = find_long(globals, nglobals, name, len);
			if (!o)
				o = find_long(opts, nopts, name, len);
			if (eq)
				val = eq + 1;
		} else {
			snprintf(shown, sizeof(shown), "-%c", a[1]);
			o = find_short(globals, nglobals, a[1]);
			if (!o)
				o = find_short(opts, nopts, a[1]);
			/* "-ojson" */
			if (a[2]) {
				if (o && o->kind == CLI_OPT_FLAG)
					return ty_err_set(err, TY_ECONFIG,
							  "option '%s' takes no value", shown);
				val = a + 2;
				eq = val;
			}
		}
		if (!o)
			return ty_err_set(err, TY_ECONFIG, "unknown option '%s'", shown);
		if (o->kind == CLI_OPT_FLAG) {
			if (eq)
				return ty_err_set(err, TY_ECONFIG, "option '%s' takes no value",
						  shown);
		} else if (!val) {
			if (i + 1 >= argc)
				return ty_err_set(err, TY_ECONFIG, "option '%s' needs a value",
						  shown);
			val = argv[++i];
		}
		if ((rc = store(o, val, err)))
			return rc;
	}

	if (output) {
		if (strcmp(output, "json") == 0)
			cli->output = CLI_OUT_JSON;
		else if (strcmp(output, "text") == 0 || strcmp(output, "table") == 0)
			cli->output = CLI_OUT_TEXT;
		else if (strcmp(output, "csv") == 0)
			cli->output = CLI_OUT_CSV;
		else
			return ty_err_set(err, TY_ECONFIG,
					  "output format must be 'json', 'text' or 'csv', not '%.40s'",
					  output);
	}
	return 0;
}

int cli_skip_options(int argc, char **argv)
{
	static const char *const with_value[] = {"--server", "--token",	 "--token-file",
						 "--timeout", "--cacert", "--output", "-o"};
	int i;

	for (i = 0; i < argc; i++) {
		if (argv[i][0] != '-' || strcmp(argv[i], "-") == 0 || strcmp(argv[i], "--") == 0)
			break;
		for (size_t k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
			if (strcmp(argv[i], with_value[k]) == 0) {
				i++;
				break;
			}
	}
	return i > argc ? argc : i;
}

int cli_parse_int(long long *out, const char *s, long long min, long long max, const char *what,
		  struct ty_err *err)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end)
		return ty_err_set(err, TY_ECONFIG, "%s must be an integer, not '%.40s'", what, s);
	if (v < min || v > max)
		return ty_err_set(err, TY_ECONFIG, "%s must be from %lld to %lld, not %lld", what,
				  min, max, v);
	*out = v;
	return 0;
}

int cli_parse_id(long long *out, const char *s, const char *what, struct ty_err *err)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 1 || s[0] == '+')
		return ty_err_set(err, TY_ECONFIG, "%s must be a positive integer, not '%.40s'",
				  what, s);
	*out = v;
	return 0;
}
