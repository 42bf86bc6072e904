/* Logging: one line per message, written with a single write(2). */
#include "ty_log.h"
#include "ty_buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *log_program = "trainyard";
static enum ty_log_level log_level = TY_LOG_INFO;
static bool log_json;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void ty_log_init(const char *program, enum ty_log_level level, bool json)
{
	if (program)
		log_program = program;
	log_level = level;
	log_json = json;
}

int ty_log_level_parse(const char *s)
{
	for (int i = 0; i < 4; i++)
		if (s && strcmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

bool ty_log_enabled(enum ty_log_level level)
{
	return level >= log_level;
}

void ty_log_write(enum ty_log_level level, int errnum, const char *fmt, ...)
{
	char msg[2048], ts[40];
	struct timeval tv;
	struct tm tm;
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (errnum) {
		n = strlen(msg);
		snprintf(msg + n, sizeof(msg) - n, ": %s", strerror(errnum));
	}
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03ldZ", (long)(tv.tv_usec / 1000));

	struct ty_buf b = TY_BUF_INIT;
	if (log_json) {
		ty_buf_printf(&b, "{\"ts\":\"%s\",\"level\":\"%s\",\"program\":", ts,
			      level_names[level]);
		ty_buf_json_str(&b, log_program);
		ty_buf_puts(&b, ",\"msg\":");
		ty_buf_json_str(&b, msg);
		ty_buf_puts(&b, "}\n");
	} else {
		ty_buf_printf(&b, "%s %s[%d] %s: %s\n", ts, log_program, (int)getpid(),
			      level_names[level], msg);
	}
	if (b.data) {
		ssize_t r = write(STDERR_FILENO, b.data, b.len);
		(void)r;
	}
	ty_buf_free(&b);
}
