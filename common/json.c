/* JSON helpers. */
#include "ty_json.h"

#include <string.h>

int ty_json_depth(const char *buf, size_t len)
{
	int depth = 0, max = 0;
	bool in_str = false;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
			continue;
		}
		if (c == '"')
			in_str = true;
		else if (c == '{' || c == '[') {
			if (++depth > max)
				max = depth;
		} else if (c == '}' || c == ']')
			depth--;
	}
	return max;
}

int ty_json_parse(json_t **out, const char *buf, size_t len, int max_depth, struct ty_err *err)
{
	json_error_t jerr;
	json_t *v;
	int depth;

	*out = NULL;
	if ((depth = ty_json_depth(buf, len)) > max_depth)
		return ty_err_set(err, TY_ETOOBIG, "JSON nested %d deep, the limit is %d", depth,
				  max_depth);
	v = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!v)
		return ty_err_set(err, TY_EPARSE, "invalid JSON at line %d column %d: %s", jerr.line,
				  jerr.column, jerr.text);
	*out = v;
	return 0;
}

const char *ty_json_unknown_key(const json_t *obj, const char *const *allowed)
{
	const char *key;
	json_t *val;

	json_object_foreach((json_t *)obj, key, val) {
		const char *const *a;

		for (a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				break;
		if (!*a)
			return key;
	}
	return NULL;
}

const char *ty_json_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	case JSON_NULL:
		return "null";
	}
	return "unknown";
}

char *ty_json_canonical(const json_t *v)
{
	return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}
