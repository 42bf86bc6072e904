/* Growable byte buffers. */
#include "ty_buf.h"
#include "ty_err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(struct ty_buf *b, size_t extra)
{
	size_t need, cap;
	char *p;

	if (b->oom)
		return TY_ENOMEM;
	need = b->len + extra + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : 64;
	while (cap < need)
		cap *= 2;
	p = realloc(b->data, cap);
	if (!p) {
		b->oom = true;
		return TY_ENOMEM;
	}
	b->data = p;
	b->cap = cap;
	return 0;
}

int ty_buf_append(struct ty_buf *b, const void *p, size_t n)
{
	if (grow(b, n))
		return TY_ENOMEM;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int ty_buf_puts(struct ty_buf *b, const char *s)
{
	return ty_buf_append(b, s, strlen(s));
}

int ty_buf_printf(struct ty_buf *b, const char *fmt, ...)
{
	va_list ap, ap2;
	int n;

	va_start(ap, fmt);
	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || grow(b, (size_t)n)) {
		va_end(ap2);
		return TY_ENOMEM;
	}
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
	va_end(ap2);
	b->len += (size_t)n;
	return 0;
}

int ty_buf_json_str(struct ty_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	int rc = ty_buf_append(b, "\"", 1);

	for (const unsigned char *p = (const unsigned char *)s; *p && !rc; p++) {
		switch (*p) {
		case '"':
			rc = ty_buf_puts(b, "\\\"");
			break;
		case '\\':
			rc = ty_buf_puts(b, "\\\\");
			break;
		case '\n':
			rc = ty_buf_puts(b, "\\n");
			break;
		case '\r':
			rc = ty_buf_puts(b, "\\r");
			break;
		case '\t':
			rc = ty_buf_puts(b, "\\t");
			break;
		default:
			if (*p < 0x20) {
				char esc[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
				rc = ty_buf_append(b, esc, 6);
			} else {
				rc = ty_buf_append(b, p, 1);
			}
		}
	}
	return rc ? rc : ty_buf_append(b, "\"", 1);
}

void ty_buf_reset(struct ty_buf *b)
{
	b->len = 0;
	b->oom = false;
	if (b->data)
		b->data[0] = '\0';
}

void ty_buf_free(struct ty_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->oom = false;
}

char *ty_buf_detach(struct ty_buf *b)
{
	char *p = b->data;

	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

int ty_buf_read_text_file(struct ty_buf *b, const char *path, struct ty_err *err)
{
	FILE *f = fopen(path, "r");
	size_t start = b->len, n;
	char chunk[4096];
	int rc = 0;

	if (!f)
		return ty_err_set(err, TY_EIO, "cannot open '%s': %s", path, strerror(errno));
	while (!rc && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		if (ty_buf_append(b, chunk, n))
			rc = ty_err_set(err, TY_ENOMEM, NULL);
	if (!rc && ferror(f))
		rc = ty_err_set(err, TY_EIO, "cannot read '%s': %s", path, strerror(errno));
	else if (!rc && b->len > start && memchr(b->data + start, '\0', b->len - start))
		rc = ty_err_set(err, TY_EINVAL, "%s: not a text file (it holds a NUL byte)", path);
	fclose(f);
	return rc;
}
