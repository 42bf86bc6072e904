/* Configuration: declared options, one precedence rule. */
#include "ty_config.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum src { SRC_DEFAULT, SRC_FILE, SRC_ENV, SRC_FLAG };
static const char *const src_names[] = {"default", "file", "env", "flag"};

struct ty_config {
	const struct ty_opt *opts;
	size_t n;
	const char *prefix;
	char **vals;
	enum src *srcs;
};

struct ty_config *ty_config_new(const struct ty_opt *opts, size_t n, const char *env_prefix)
{
	struct ty_config *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->opts = opts;
	c->n = n;
	c->prefix = env_prefix;
	c->vals = calloc(n, sizeof(char *));
	c->srcs = calloc(n, sizeof(enum src));
	if (!c->vals || !c->srcs) {
		ty_config_free(c);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		if (opts[i].def && !(c->vals[i] = strdup(opts[i].def))) {
			ty_config_free(c);
			return NULL;
		}
	return c;
}

void ty_config_free(struct ty_config *c)
{
	if (!c)
		return;
	if (c->vals)
		for (size_t i = 0; i < c->n; i++)
			free(c->vals[i]);
	free(c->vals);
	free(c->srcs);
	free(c);
}

/* "listen_port" and "listen-port" name the same option. */
static bool name_eq(const char *opt, const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len && opt[i]; i++) {
		char a = opt[i], b = s[i] == '_' ? '-' : s[i];
		if (a != b)
			return false;
	}
	return i == len && opt[i] == '\0';
}

static int find(const struct ty_config *c, const char *s, size_t len)
{
	for (size_t i = 0; i < c->n; i++)
		if (name_eq(c->opts[i].name, s, len))
			return (int)i;
	return -1;
}

static int parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"1", "true", "yes", "on"};
	static const char *const no[] = {"0", "false", "no", "off"};

	for (int i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return *out = true, 0;
		if (strcasecmp(v, no[i]) == 0)
			return *out = false, 0;
	}
	return -1;
}

static int set(struct ty_config *c, int i, const char *v, enum src src, const char *where,
	       struct ty_err *err)
{
	const struct ty_opt *o = &c->opts[i];
	char *copy;

	if (o->type == TY_OPT_INT) {
		char *end;
		long long x;

		errno = 0;
		x = strtoll(v, &end, 10);
		if (errno || end == v || *end)
			return ty_err_set(err, TY_ECONFIG, "option '%s' from %s: '%s' is not an integer",
					  o->name, where, v);
		if ((o->min || o->max) && (x < o->min || x > o->max))
			return ty_err_set(err, TY_ECONFIG,
					  "option '%s' from %s: %lld is outside %lld..%lld", o->name,
					  where, x, o->min, o->max);
	} else if (o->type == TY_OPT_BOOL) {
		bool b;

		if (parse_bool(v, &b))
			return ty_err_set(err, TY_ECONFIG,
					  "option '%s' from %s: '%s' is not a boolean", o->name, where, v);
	}
	if (!(copy = strdup(v)))
		return ty_err_set(err, TY_ENOMEM, NULL);
	free(c->vals[i]);
	c->vals[i] = copy;
	c->srcs[i] = src;
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = '\0';
	return s;
}

static int load_file(struct ty_config *c, const char *path, struct ty_err *err)
{
	char line[4096], where[600];
	int lineno = 0, rc = 0;
	FILE *f = fopen(path, "r");

	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot open config file '%s': %s", path,
				  strerror(errno));
	while (!rc && fgets(line, sizeof(line), f)) {
		char *s = trim(line), *eq, *key, *val;
		int i;

		lineno++;
		if (!*s || *s == '#')
			continue;
		snprintf(where, sizeof(where), "%s:%d", path, lineno);
		if (!(eq = strchr(s, '='))) {
			rc = ty_err_set(err, TY_ECONFIG, "%s: expected 'key = value'", where);
			break;
		}
		*eq = '\0';
		key = trim(s);
		val = trim(eq + 1);
		if ((i = find(c, key, strlen(key))) < 0) {
			rc = ty_err_set(err, TY_ECONFIG, "%s: unknown option '%s'", where, key);
			break;
		}
		rc = set(c, i, val, SRC_FILE, where, err);
	}
	fclose(f);
	return rc;
}

static void env_name(char *out, size_t sz, const char *prefix, const char *name)
{
	size_t o = 0;

	o = (size_t)snprintf(out, sz, "%s_", prefix);
	for (; *name && o + 1 < sz; name++)
		out[o++] = *name == '-' ? '_' : (char)toupper((unsigned char)*name);
	out[o] = '\0';
}

int ty_config_load(struct ty_config *c, int argc, char **argv, int *rest_index,
		   struct ty_err *err)
{
	const char *file = NULL;
	char var[256];
	int rc, i;

	/* the file comes first in precedence order, so find its name first */
	env_name(var, sizeof(var), c->prefix, "config");
	file = getenv(var);
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strncmp(argv[i], "--config=", 9) == 0)
			file = argv[i] + 9;
		else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
			file = argv[++i];
	}
	if (file && *file && (rc = load_file(c, file, err)))
		return rc;

	for (size_t k = 0; k < c->n; k++) {
		const char *v;

		env_name(var, sizeof(var), c->prefix, c->opts[k].name);
		if ((v = getenv(var)) && (rc = set(c, (int)k, v, SRC_ENV, var, err)))
			return rc;
	}

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *eq, *v;
		int k;

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strncmp(a, "--", 2) != 0)
			return ty_err_set(err, TY_ECONFIG, "unexpected argument '%s'", a);
		a += 2;
		eq = strchr(a, '=');
		if (strncmp(a, "config", 6) == 0 && (a[6] == '\0' || a[6] == '=')) {
			i += a[6] == '\0';
			continue;
		}
		if ((k = find(c, a, eq ? (size_t)(eq - a) : strlen(a))) < 0) {
			/* --no-foo for booleans */
			if (!eq && strncmp(a, "no-", 3) == 0 && (k = find(c, a + 3, strlen(a + 3))) >= 0 &&
			    c->opts[k].type == TY_OPT_BOOL) {
				if ((rc = set(c, k, "false", SRC_FLAG, "the command line", err)))
					return rc;
				continue;
			}
			return ty_err_set(err, TY_ECONFIG, "unknown option '--%.*s'",
					  (int)(eq ? eq - a : (long)strlen(a)), a);
		}
		if (eq)
			v = eq + 1;
		else if (c->opts[k].type == TY_OPT_BOOL)
			v = "true";
		else if (i + 1 < argc)
			v = argv[++i];
		else
			return ty_err_set(err, TY_ECONFIG, "option '--%s' needs a value", c->opts[k].name);
		if ((rc = set(c, k, v, SRC_FLAG, "the command line", err)))
			return rc;
	}
	if (rest_index)
		*rest_index = i > argc ? argc : i;
	return 0;
}

static int must_find(const struct ty_config *c, const char *name)
{
	int i = find(c, name, strlen(name));

	if (i < 0) {
		fprintf(stderr, "BUG: undeclared option '%s'\n", name);
		abort();
	}
	return i;
}

const char *ty_config_str(const struct ty_config *c, const char *name)
{
	return c->vals[must_find(c, name)];
}

long long ty_config_int(const struct ty_config *c, const char *name)
{
	const char *v = c->vals[must_find(c, name)];

	return v ? strtoll(v, NULL, 10) : 0;
}

bool ty_config_bool(const struct ty_config *c, const char *name)
{
	const char *v = c->vals[must_find(c, name)];
	bool b = false;

	if (v)
		parse_bool(v, &b);
	return b;
}

const char *ty_config_source(const struct ty_config *c, const char *name)
{
	return src_names[c->srcs[must_find(c, name)]];
}

void ty_config_usage(FILE *f, const struct ty_opt *opts, size_t n, const char *env_prefix)
{
	static const char *const types[] = {"string", "integer", "boolean"};
	char var[256];

	fprintf(f, "options (flag > environment > config file > default):\n");
	fprintf(f, "  --config FILE  (%s_CONFIG)\n      file of 'key = value' lines\n", env_prefix);
	for (size_t i = 0; i < n; i++) {
		env_name(var, sizeof(var), env_prefix, opts[i].name);
		fprintf(f, "  --%s  (%s, %s", opts[i].name, var, types[opts[i].type]);
		if (opts[i].def)
			fprintf(f, ", default '%s'", opts[i].def);
		if (opts[i].min || opts[i].max)
			fprintf(f, ", %lld..%lld", opts[i].min, opts[i].max);
		fprintf(f, ")\n      %s\n", opts[i].help);
	}
}
