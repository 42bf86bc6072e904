/* common/ty_buf: growth, formatting, JSON string escaping. */
#include "ty_buf.h"
#include "ty_err.h"
#include "ty_test.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

TY_TEST(starts_empty)
{
	struct ty_buf b = TY_BUF_INIT;

	CHECK(b.data == NULL);
	CHECK_INT_EQ(b.len, 0);
	CHECK_INT_EQ(ty_buf_append(&b, "", 0), 0);
	REQUIRE(b.data != NULL);
	CHECK_STR_EQ(b.data, "");
	ty_buf_free(&b);
	ty_buf_free(NULL);
}

TY_TEST(printf_grows)
{
	struct ty_buf b = TY_BUF_INIT;
	char want[16];

	for (int i = 0; i < 5000; i++)
		REQUIRE_INT_EQ(ty_buf_printf(&b, "%04d,", i), 0);
	CHECK_INT_EQ(b.len, 5000 * 5);
	CHECK_INT_EQ(strlen(b.data), b.len);
	CHECK(b.cap > b.len);
	CHECK(!b.oom);
	for (int i = 0; i < 5000; i += 997) {
		snprintf(want, sizeof(want), "%04d,", i);
		CHECK(memcmp(b.data + 5 * i, want, 5) == 0);
	}
	ty_buf_free(&b);
}

TY_TEST(one_large_printf)
{
	struct ty_buf b = TY_BUF_INIT;
	size_t n = 300000;
	char *big = ty_test_alloc(n + 1);

	memset(big, 'z', n);
	ty_buf_puts(&b, "<");
	REQUIRE_INT_EQ(ty_buf_printf(&b, "%s>%d", big, 42), 0);
	CHECK_INT_EQ(b.len, n + 4);
	CHECK(b.data[0] == '<' && b.data[n] == 'z' && b.data[n + 1] == '>');
	CHECK_STR_EQ(b.data + n + 1, ">42");
	ty_buf_free(&b);
}

TY_TEST(append_binary_and_puts)
{
	struct ty_buf b = TY_BUF_INIT;

	ty_buf_append(&b, "a\0b", 3);
	CHECK_INT_EQ(b.len, 3);
	CHECK(memcmp(b.data, "a\0b", 4) == 0);
	ty_buf_puts(&b, "cd");
	CHECK_INT_EQ(b.len, 5);
	CHECK(b.data[5] == '\0');
	ty_buf_free(&b);
}

TY_TEST(reset_and_detach)
{
	struct ty_buf b = TY_BUF_INIT;
	size_t cap;
	char *p;

	ty_buf_puts(&b, "hello");
	cap = b.cap;
	ty_buf_reset(&b);
	CHECK_INT_EQ(b.len, 0);
	CHECK_STR_EQ(b.data, "");
	CHECK_INT_EQ(b.cap, cap);
	ty_buf_puts(&b, "again");
	p = ty_buf_detach(&b);
	CHECK_STR_EQ(p, "again");
	CHECK(b.data == NULL);
	CHECK_INT_EQ(b.len, 0);
	free(p);
	/* usable after detach */
	ty_buf_puts(&b, "x");
	CHECK_STR_EQ(b.data, "x");
	ty_buf_free(&b);
	CHECK(b.data == NULL);
}

TY_TEST(json_str_escapes)
{
	static const struct {
		const char *in, *out;
	} rows[] = {
	    {"", "\"\""},
	    {"plain", "\"plain\""},
	    {"say \"hi\"", "\"say \\\"hi\\\"\""},
	    {"back\\slash", "\"back\\\\slash\""},
	    {"a\nb\rc\td", "\"a\\nb\\rc\\td\""},
	    {"\x01", "\"\\u0001\""},
	    {"\x1f", "\"\\u001f\""},
	    {"\b\f", "\"\\u0008\\u000c\""},
	    {"\x7f", "\"\x7f\""},
	    {"/", "\"/\""},
	    {"caf\xc3\xa9 \xe2\x82\xac", "\"caf\xc3\xa9 \xe2\x82\xac\""},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_buf b = TY_BUF_INIT;
		json_t *v;

		ty_test_context("row %zu", i);
		REQUIRE_INT_EQ(ty_buf_json_str(&b, rows[i].in), 0);
		CHECK_STR_EQ(b.data, rows[i].out);
		/* and it round-trips through a real JSON parser */
		v = json_loads(b.data, JSON_DECODE_ANY, NULL);
		CHECK(json_is_string(v));
		if (json_is_string(v))
			CHECK_STR_EQ(json_string_value(v), rows[i].in);
		json_decref(v);
		ty_buf_free(&b);
	}
}

TY_TEST(json_str_every_control_char_round_trips)
{
	char in[40];
	struct ty_buf b = TY_BUF_INIT;
	json_t *v;

	for (int i = 1; i < 32; i++)
		in[i - 1] = (char)i;
	in[31] = '\0';
	REQUIRE_INT_EQ(ty_buf_json_str(&b, in), 0);
	for (size_t i = 0; i < b.len; i++)
		CHECK((unsigned char)b.data[i] >= 0x20);
	v = json_loads(b.data, JSON_DECODE_ANY, NULL);
	REQUIRE(json_is_string(v));
	CHECK_STR_EQ(json_string_value(v), in);
	json_decref(v);
	ty_buf_free(&b);
}

TY_TEST(json_str_appends)
{
	struct ty_buf b = TY_BUF_INIT;

	ty_buf_puts(&b, "{\"k\":");
	ty_buf_json_str(&b, "v");
	ty_buf_puts(&b, "}");
	CHECK_STR_EQ(b.data, "{\"k\":\"v\"}");
	ty_buf_free(&b);
}

/* A scratch file holding n bytes of text; its path (scratch). */
static const char *scratch_file(const char *text, size_t n)
{
	char *path = ty_test_strf("/tmp/ty-buf-test-XXXXXX");
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	REQUIRE(write(fd, text, n) == (ssize_t)n);
	close(fd);
	return path;
}

TY_TEST(read_text_file_appends_the_file_or_says_why_not)
{
	struct ty_buf b = TY_BUF_INIT;
	struct ty_err err = {0};
	const char *ok = scratch_file("79 fatal GPU fell off the bus\n", 30);
	const char *nul = scratch_file("a\0b", 3);
	const char *empty = scratch_file("", 0);

	ty_buf_puts(&b, "# ");
	CHECK_INT_EQ(ty_buf_read_text_file(&b, ok, &err), 0);
	CHECK_STR_EQ(b.data, "# 79 fatal GPU fell off the bus\n");
	ty_buf_reset(&b);
	CHECK_INT_EQ(ty_buf_read_text_file(&b, empty, &err), 0);
	CHECK_INT_EQ(b.len, 0);
	CHECK_INT_EQ(ty_buf_read_text_file(&b, nul, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "not a text file") != NULL && strstr(err.msg, nul) != NULL);
	err = (struct ty_err){0};
	CHECK_INT_EQ(ty_buf_read_text_file(&b, "/nonexistent/ty-buf", &err), TY_EIO);
	CHECK(strstr(err.msg, "cannot open '/nonexistent/ty-buf'") != NULL);
	err = (struct ty_err){0};
	CHECK_INT_EQ(ty_buf_read_text_file(&b, "/", &err), TY_EIO); /* a directory */
	CHECK(strstr(err.msg, "cannot read '/'") != NULL);
	unlink(ok);
	unlink(nul);
	unlink(empty);
	ty_buf_free(&b);
}
