/* api/ pure input checks of hostile text: UTF-8 and controls, NUL characters in bodies. */
#include "api.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(text_ok)
{
	static const struct {
		const char *what, *s;
		size_t n; /* 0: strlen */
		bool ok, ok_no_controls;
	} rows[] = {
	    {"empty", "", 0, true, true},
	    {"ASCII", "/v1/jobs/42", 0, true, true},
	    {"blank and punctuation", "a b'%_;--\\\"", 0, true, true},
	    {"tab", "a\tb", 0, true, false},
	    {"CR LF", "a\r\nX-Injected: yes", 0, true, false},
	    {"DEL", "a\x7f", 0, true, false},
	    {"NUL inside", "a\0b", 3, true, false},
	    {"2 bytes (e acute)", "caf\xc3\xa9", 0, true, true},
	    {"3 bytes (euro)", "\xe2\x82\xac", 0, true, true},
	    {"4 bytes (emoji)", "\xf0\x9f\x98\x80", 0, true, true},
	    {"U+10FFFF", "\xf4\x8f\xbf\xbf", 0, true, true},
	    {"U+FFFF", "\xef\xbf\xbf", 0, true, true},
	    {"past U+10FFFF", "\xf4\x90\x80\x80", 0, false, false},
	    {"lead byte F5", "\xf5\x80\x80\x80", 0, false, false},
	    {"0xff", "\xff", 0, false, false},
	    {"0xfe 0xff", "\xfe\xff", 0, false, false},
	    {"lone continuation", "\x80", 0, false, false},
	    {"overlong '/' (2 bytes)", "\xc0\xaf", 0, false, false},
	    {"overlong C1", "\xc1\xbf", 0, false, false},
	    {"overlong (3 bytes)", "\xe0\x80\xaf", 0, false, false},
	    {"overlong (4 bytes)", "\xf0\x80\x80\xaf", 0, false, false},
	    {"surrogate D800", "\xed\xa0\x80", 0, false, false},
	    {"surrogate DFFF", "\xed\xbf\xbf", 0, false, false},
	    {"last before surrogates", "\xed\x9f\xbf", 0, true, true},
	    {"truncated 2 of 3", "\xe2\x82", 0, false, false},
	    {"truncated at the end", "ok\xc3", 0, false, false},
	    {"continuation missing", "\xc3(", 0, false, false},
	    {"length cuts a sequence", "\xc3\xa9", 1, false, false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t n = rows[i].n ? rows[i].n : strlen(rows[i].s);

		ty_test_context("%s", rows[i].what);
		CHECK(api_text_ok(rows[i].s, n, false) == rows[i].ok);
		CHECK(api_text_ok(rows[i].s, n, true) == rows[i].ok_no_controls);
	}
}

TY_TEST(json_has_nul)
{
	static const struct {
		const char *json, *path; /* path NULL: no NUL */
	} rows[] = {
	    {"{}", NULL},
	    {"{\"a\":\"x\",\"b\":[1,\"y\",{\"c\":null}]}", NULL},
	    {"{\"name\":\"a\\u0000b\"}", "name"},
	    {"{\"command\":[\"x\",\"\\u0000\"]}", "command[1]"},
	    {"{\"env\":{\"A\":\"ok\",\"B\":\"\\u0000\"}}", "env.B"},
	    {"{\"trials\":[{\"a\":1},{\"p\":\"x\\u0000\"}]}", "trials[1].p"},
	    {"{\"t\":{\"command\":[[\"\\u0000\"]]}}", "t.command[0][0]"},
	    {"{\"a\":[],\"b\":{},\"c\":\"\\u0000\"}", "c"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *v = json_loads(rows[i].json, JSON_ALLOW_NUL, NULL);
		char path[64];
		bool has;

		ty_test_context("%s", rows[i].json);
		REQUIRE(v);
		has = api_json_has_nul(path, sizeof(path), v);
		CHECK(has == (rows[i].path != NULL));
		if (has && rows[i].path)
			CHECK_STR_EQ(path, rows[i].path);
		json_decref(v);
	}
}

/* A path longer than the buffer is cut, never overrun. */
TY_TEST(json_has_nul_long_path)
{
	json_t *v = json_loads("{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\":"
			       "{\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\":[\"\\u0000\"]}}",
			       JSON_ALLOW_NUL, NULL);
	char path[16];

	REQUIRE(v);
	CHECK(api_json_has_nul(path, sizeof(path), v));
	CHECK_INT_EQ(strlen(path), sizeof(path) - 1);
	CHECK(strncmp(path, "aaaaaaaaaaaaaaa", 15) == 0);
	json_decref(v);
}
