/*
 * Configuration from defaults, a file, the environment and flags, in that
 * order of increasing precedence: a flag beats the environment, which beats
 * the file, which beats the default. Every option is declared once, with its
 * help text, so --help and docs/configuration.md list them all.
 *
 * Option "listen-port" is set by --listen-port=V (or --listen-port V), by
 * PREFIX_LISTEN_PORT in the environment, and by "listen_port = V" (or
 * "listen-port = V") in the file named by --config or PREFIX_CONFIG.
 */
#ifndef TY_CONFIG_H
#define TY_CONFIG_H

#include "ty_err.h"

#include <stdbool.h>
#include <stdio.h>

enum ty_opt_type { TY_OPT_STR, TY_OPT_INT, TY_OPT_BOOL };

struct ty_opt {
	const char *name;
	enum ty_opt_type type;
	const char *def; /* NULL: unset */
	long long min, max; /* TY_OPT_INT only; min == max == 0: no range */
	const char *help;
};

struct ty_config; /* opaque */

/* Borrows opts (static storage) and env_prefix; returns NULL on ENOMEM. */
struct ty_config *ty_config_new(const struct ty_opt *opts, size_t n, const char *env_prefix);
void ty_config_free(struct ty_config *c);

/*
 * Load file, environment and argv[1..]. Arguments after "--" are left for the
 * caller: *rest_index is set to the first of them (argc when none). Unknown
 * options or file keys, bad values and missing option arguments fail with
 * TY_ECONFIG naming the option and where it came from.
 */
int ty_config_load(struct ty_config *c, int argc, char **argv, int *rest_index,
		   struct ty_err *err);

/* Borrowed value, NULL when unset. Names must be declared (aborts if not). */
const char *ty_config_str(const struct ty_config *c, const char *name);
long long ty_config_int(const struct ty_config *c, const char *name);
bool ty_config_bool(const struct ty_config *c, const char *name);
/* "default", "file", "env" or "flag". */
const char *ty_config_source(const struct ty_config *c, const char *name);

/* Print every option with its flag, variable, default and help. */
void ty_config_usage(FILE *f, const struct ty_opt *opts, size_t n, const char *env_prefix);

#endif
