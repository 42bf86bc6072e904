/* Growable byte buffers (always NUL-terminated once anything is written). */
#ifndef TY_BUF_H
#define TY_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct ty_buf {
	char *data; /* owned; NULL until the first append */
	size_t len;
	size_t cap;
	bool oom; /* sticky: an append failed, contents are truncated */
};

#define TY_BUF_INIT {NULL, 0, 0, false}

/* Appends; on allocation failure they set b->oom and return TY_ENOMEM. */
int ty_buf_append(struct ty_buf *b, const void *p, size_t n);
int ty_buf_puts(struct ty_buf *b, const char *s);
int ty_buf_printf(struct ty_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Append s as a JSON string literal, quotes and escapes included. */
int ty_buf_json_str(struct ty_buf *b, const char *s);
void ty_buf_reset(struct ty_buf *b);
/* Frees the data; the buffer may be reused afterwards. NULL-safe. */
void ty_buf_free(struct ty_buf *b);
/* Give the data to the caller (who frees it) and empty the buffer. */
char *ty_buf_detach(struct ty_buf *b);

struct ty_err;
/*
 * Append the whole text file at path (a configuration file, say). TY_EIO
 * naming the file when it cannot be opened or read, TY_EINVAL when it
 * holds a NUL byte (not text), TY_ENOMEM; b may then hold part of it.
 */
int ty_buf_read_text_file(struct ty_buf *b, const char *path, struct ty_err *err);

#endif
