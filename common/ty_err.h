/* Error codes and the caller-owned error record every fallible call fills. */
#ifndef TY_ERR_H
#define TY_ERR_H

#include <stdarg.h>

/*
 * One list of codes; the enum and the name/description tables are generated
 * from it. Codes are negative; 0 is success. Never renumber: logs and
 * problem documents carry the names, not the numbers, but tests compare both.
 */
#define TY_ERRORS(X)                                                          \
	X(OK, 0, "ok", "success")                                             \
	X(ENOMEM, -1, "out_of_memory", "out of memory")                       \
	X(EINVAL, -2, "invalid_argument", "invalid argument")                 \
	X(ENOTFOUND, -3, "not_found", "not found")                            \
	X(ECONFLICT, -4, "conflict", "conflict")                              \
	X(EDB, -5, "database_error", "database error")                        \
	X(EIO, -6, "io_error", "input/output error")                          \
	X(EPARSE, -7, "parse_error", "parse error")                           \
	X(EAUTH, -8, "unauthenticated", "authentication required")            \
	X(EPERM, -9, "forbidden", "permission denied")                        \
	X(ETOOBIG, -10, "too_large", "too large")                             \
	X(EUNAVAIL, -11, "unavailable", "service unavailable")                \
	X(EKAFKA, -12, "kafka_error", "kafka error")                          \
	X(ETIMEDOUT, -13, "timed_out", "timed out")                           \
	X(ECONFIG, -14, "config_error", "configuration error")                \
	X(EFENCED, -15, "fenced", "write fenced by a newer leader epoch")     \
	X(ESTATE, -16, "invalid_state", "operation not valid in this state")

enum ty_code {
#define TY_ERR_ENUM(name, val, id, desc) TY_##name = (val),
	TY_ERRORS(TY_ERR_ENUM)
#undef TY_ERR_ENUM
};

/* As long as an API problem's detail (api/api.h), which refusals carry here. */
#define TY_ERR_MSG_MAX 768

/* Caller-owned; zero-initialise it (struct ty_err err = {0};). */
struct ty_err {
	int code;
	char msg[TY_ERR_MSG_MAX];
};

/* Stable identifier of a code ("not_found"); "unknown" for foreign values. */
const char *ty_code_name(int code);
/* Short human description of a code ("not found"). */
const char *ty_code_desc(int code);

/*
 * Record code and message in err (which may be NULL) and return code, so
 * failure paths read `return ty_err_set(err, TY_EINVAL, "bad '%s'", x);`.
 * The first error wins: an err that already holds a failure is left as it
 * is, so a cleanup path never masks the lower, more precise error.
 */
int ty_err_set(struct ty_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int ty_err_setv(struct ty_err *err, int code, const char *fmt, va_list ap);
/* Forget any recorded error. */
void ty_err_clear(struct ty_err *err);

#endif
