/* common/ty_json: bounded parsing, strict objects, canonical text. */
#include "ty_json.h"
#include "ty_test.h"

#include <string.h>

/* Text nested n deep: [[[...]]] */
static const char *nested(int n, char open, char close)
{
	char *s = ty_test_alloc((size_t)n * 2 + 1);

	for (int i = 0; i < n; i++) {
		s[i] = open;
		s[n * 2 - 1 - i] = close;
	}
	return s;
}

TY_TEST(depth)
{
	static const struct {
		const char *text;
		int depth;
	} rows[] = {
	    {"1", 0},
	    {"\"[[[\"", 0},
	    {"[]", 1},
	    {"{}", 1},
	    {"[[]]", 2},
	    {"[[],[]]", 2},
	    {"{\"a\":[{}]}", 3},
	    {"[\"[[[\", \"]]]\"]", 1},
	    {"[\"\\\"[[\"]", 1},
	    {"[\"\\\\\", [1]]", 2},
	    {"{\"k\\\"}\":{\"x\":{}}}", 3},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].text);
		CHECK_INT_EQ(ty_json_depth(rows[i].text, strlen(rows[i].text)), rows[i].depth);
	}
	CHECK_INT_EQ(ty_json_depth(nested(100, '[', ']'), 200), 100);
}

TY_TEST(depth_limit)
{
	static const struct {
		int depth, limit, want;
	} rows[] = {
	    {1, 32, 0},		{32, 32, 0}, {33, 32, TY_ETOOBIG}, {1000, 32, TY_ETOOBIG},
	    {3, 2, TY_ETOOBIG}, {2, 2, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		const char *text = nested(rows[i].depth, '[', ']');
		json_t *v = (json_t *)1;

		ty_test_context("depth %d limit %d", rows[i].depth, rows[i].limit);
		CHECK_INT_EQ(ty_json_parse(&v, text, strlen(text), rows[i].limit, &err),
			     rows[i].want);
		if (rows[i].want) {
			CHECK(v == NULL);
			CHECK_INT_EQ(err.code, rows[i].want);
			CHECK(err.msg[0] != '\0');
		} else {
			CHECK(json_is_array(v));
		}
		json_decref(v);
	}
}

TY_TEST(parse_accepts)
{
	static const char *const ok[] = {
	    "{}",
	    "  {\"a\": 1}  \n",
	    "[1, 2.5, \"x\", true, false, null]",
	    "[\"caf\xc3\xa9\"]",
	    "[\"\\u00e9\\ud83d\\ude00\"]",
	    "{\"a\":{\"a\":1}}", /* the same key at two levels is not a duplicate */
	    "{\"k\":\"nul \\u0000 inside\"}",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct ty_err err = {0};
		json_t *v = NULL;

		ty_test_context("%s", ok[i]);
		CHECK_INT_EQ(ty_json_parse(&v, ok[i], strlen(ok[i]), 32, &err), 0);
		CHECK(v != NULL);
		json_decref(v);
	}
}

TY_TEST(parse_rejects)
{
	static const struct {
		const char *text;
		size_t len; /* 0: strlen */
		int want;
	} rows[] = {
	    {"", 0, TY_EPARSE},
	    {"{", 0, TY_EPARSE},
	    {"{\"a\":1,}", 0, TY_EPARSE},
	    {"{} x", 0, TY_EPARSE},
	    {"{}{}", 0, TY_EPARSE},
	    {"{'a':1}", 0, TY_EPARSE},
	    {"{\"a\":1,\"a\":2}", 0, TY_EPARSE},
	    {"{\"x\":{\"b\":1,\"b\":1}}", 0, TY_EPARSE},
	    {"[{\"k\":1,\"k\":null}]", 0, TY_EPARSE},
	    {"[\"\xff\"]", 0, TY_EPARSE},
	    {"[\"\xc3\"]", 0, TY_EPARSE},
	    {"[\"\xc0\xaf\"]", 0, TY_EPARSE},	      /* overlong */
	    {"[\"\xed\xa0\x80\"]", 0, TY_EPARSE},     /* encoded surrogate */
	    {"[\"\xf4\x90\x80\x80\"]", 0, TY_EPARSE}, /* above U+10FFFF */
	    {"{\"k\xfe\":1}", 0, TY_EPARSE},
	    {"{}\0", 3, TY_EPARSE},
	    {"[NaN]", 0, TY_EPARSE},
	    {"[\"ok\", \"\xff\"]", 0, TY_EPARSE},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t len = rows[i].len ? rows[i].len : strlen(rows[i].text);
		struct ty_err err = {0};
		json_t *v = (json_t *)1;

		ty_test_context("row %zu", i);
		CHECK_INT_EQ(ty_json_parse(&v, rows[i].text, len, 32, &err), rows[i].want);
		CHECK(v == NULL);
		CHECK_INT_EQ(err.code, rows[i].want);
		CHECK(err.msg[0] != '\0');
	}
}

TY_TEST(unknown_key)
{
	static const char *const allowed[] = {"team", "command", "resources", NULL};
	static const char *const none[] = {NULL};
	static const struct {
		const char *text;
		const char *const *allowed;
		const char *want;
	} rows[] = {
	    {"{}", allowed, NULL},
	    {"{\"team\":1,\"command\":2}", allowed, NULL},
	    {"{\"team\":1,\"bogus\":2}", allowed, "bogus"},
	    {"{\"Team\":1}", allowed, "Team"},
	    {"{\"teams\":1}", allowed, "teams"},
	    {"{\"tea\":1}", allowed, "tea"},
	    {"{\"a\":1}", none, "a"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *v = json_loads(rows[i].text, 0, NULL);

		ty_test_context("%s", rows[i].text);
		REQUIRE(v != NULL);
		CHECK_STR_EQ(ty_json_unknown_key(v, rows[i].allowed), rows[i].want);
		json_decref(v);
	}
}

TY_TEST(canonical_sorts_keys)
{
	static const struct {
		const char *text, *want;
	} rows[] = {
	    {"{\"b\":1,\"a\":2}", "{\"a\":2,\"b\":1}"},
	    {"{ \"z\" : { \"y\":[3, {\"d\":1,\"c\":2}], \"x\":null } , \"a\":\"s\" }",
	     "{\"a\":\"s\",\"z\":{\"x\":null,\"y\":[3,{\"c\":2,\"d\":1}]}}"},
	    {"[2,1]", "[2,1]"},
	    {"\"x\"", "\"x\""},
	    {"{}", "{}"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *v = json_loads(rows[i].text, JSON_DECODE_ANY, NULL);
		char *c;

		ty_test_context("%s", rows[i].text);
		REQUIRE(v != NULL);
		c = ty_json_canonical(v);
		CHECK_STR_EQ(c, rows[i].want);
		free(c);
		json_decref(v);
	}
}

TY_TEST(canonical_equal_for_reordered_objects)
{
	json_t *a =
	    json_loads("{\"team\":\"t\",\"resources\":{\"nodes\":2,\"gpus_per_node\":8}}", 0, NULL);
	json_t *b =
	    json_loads("{\"resources\":{\"gpus_per_node\":8,\"nodes\":2},\"team\":\"t\"}", 0, NULL);
	char *ca, *cb;

	REQUIRE(a && b);
	ca = ty_json_canonical(a);
	cb = ty_json_canonical(b);
	CHECK_STR_EQ(ca, cb);
	free(ca);
	free(cb);
	json_decref(a);
	json_decref(b);
}

TY_TEST(type_names)
{
	static const struct {
		const char *text, *name;
	} rows[] = {
	    {"{}", "object"},  {"[]", "array"},	    {"\"s\"", "string"},  {"1", "integer"},
	    {"1.5", "number"}, {"true", "boolean"}, {"false", "boolean"}, {"null", "null"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *v = json_loads(rows[i].text, JSON_DECODE_ANY, NULL);

		REQUIRE(v != NULL);
		CHECK_STR_EQ(ty_json_type_name(v), rows[i].name);
		json_decref(v);
	}
}
