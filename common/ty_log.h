/* Leveled logging to stderr, as text for people or JSON lines for machines. */
#ifndef TY_LOG_H
#define TY_LOG_H

#include <stdbool.h>

enum ty_log_level { TY_LOG_DEBUG, TY_LOG_INFO, TY_LOG_WARN, TY_LOG_ERROR };

/* Process-wide settings; call before starting threads. */
void ty_log_init(const char *program, enum ty_log_level level, bool json);
/* Parse "debug|info|warn|error"; returns -1 when unknown. */
int ty_log_level_parse(const char *s);
bool ty_log_enabled(enum ty_log_level level);

void ty_log_write(enum ty_log_level level, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Messages are lowercase, no trailing period, subjects quoted:
 *   ty_warn("cannot open '%s'", path)      → appends nothing
 *   ty_warn_errno("cannot open '%s'", path) → appends ": <strerror(errno)>"
 * The level is checked before anything is formatted.
 */
#define ty_log_at(lvl, en, ...)                                               \
	do {                                                                  \
		if (ty_log_enabled(lvl))                                      \
			ty_log_write((lvl), (en), __VA_ARGS__);               \
	} while (0)
#define ty_debug(...) ty_log_at(TY_LOG_DEBUG, 0, __VA_ARGS__)
#define ty_info(...) ty_log_at(TY_LOG_INFO, 0, __VA_ARGS__)
#define ty_warn(...) ty_log_at(TY_LOG_WARN, 0, __VA_ARGS__)
#define ty_error(...) ty_log_at(TY_LOG_ERROR, 0, __VA_ARGS__)
#define ty_warn_errno(...) ty_log_at(TY_LOG_WARN, errno, __VA_ARGS__)
#define ty_error_errno(...) ty_log_at(TY_LOG_ERROR, errno, __VA_ARGS__)

#endif
