/* JSON helpers over Jansson: bounded parsing and strict object checks. */
#ifndef TY_JSON_H
#define TY_JSON_H

#include "ty_err.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Parse buf as one JSON object or array (a bare scalar is refused). Rejects nesting deeper than max_depth (checked
 * before Jansson sees the text), duplicate object keys, invalid UTF-8 and
 * trailing garbage. On success *out is a new reference.
 * Errors: TY_EPARSE (message says where), TY_ETOOBIG (too deep).
 */
int ty_json_parse(json_t **out, const char *buf, size_t len, int max_depth, struct ty_err *err);

/* Maximum nesting depth of the JSON text (strings are skipped). */
int ty_json_depth(const char *buf, size_t len);

/*
 * The first key of obj not listed in allowed (NULL-terminated), or NULL.
 * Borrowed from obj.
 */
const char *ty_json_unknown_key(const json_t *obj, const char *const *allowed);

/* JSON type name for messages: "object", "string", "integer", ... */
const char *ty_json_type_name(const json_t *v);

/* Compact, key-sorted text of v (new string, caller frees); NULL on ENOMEM. */
char *ty_json_canonical(const json_t *v);

#endif
