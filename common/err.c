/* Error code tables and the ty_err record. */
#include "ty_err.h"

#include <stdio.h>
#include <string.h>

const char *ty_code_name(int code)
{
	switch (code) {
#define TY_ERR_NAME(name, val, id, desc)                                      \
	case (val):                                                           \
		return id;
		TY_ERRORS(TY_ERR_NAME)
#undef TY_ERR_NAME
	}
	return "unknown";
}

const char *ty_code_desc(int code)
{
	switch (code) {
#define TY_ERR_DESC(name, val, id, desc)                                      \
	case (val):                                                           \
		return desc;
		TY_ERRORS(TY_ERR_DESC)
#undef TY_ERR_DESC
	}
	return "unknown error";
}

int ty_err_setv(struct ty_err *err, int code, const char *fmt, va_list ap)
{
	if (!err || err->code != 0)
		return code;
	err->code = code;
	if (fmt)
		vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	else
		snprintf(err->msg, sizeof(err->msg), "%s", ty_code_desc(code));
	return code;
}

int ty_err_set(struct ty_err *err, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ty_err_setv(err, code, fmt, ap);
	va_end(ap);
	return code;
}

void ty_err_clear(struct ty_err *err)
{
	if (err) {
		err->code = 0;
		err->msg[0] = '\0';
	}
}
