/* api/ audit pure parts: audited methods, text cleaning, the created id, request ids. */
#include "api.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(audited_methods)
{
	static const struct {
		const char *m;
		bool audited;
	} rows[] = {
	    {"POST", true},  {"PUT", true},	 {"PATCH", true}, {"DELETE", true}, {"GET", false},
	    {"HEAD", false}, {"OPTIONS", false}, {"post", false}, {"", false},	    {NULL, false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].m ? rows[i].m : "(null)");
		CHECK(api_audit_method(rows[i].m) == rows[i].audited);
	}
}

TY_TEST(text_keeps_utf8_and_escapes_the_rest)
{
	static const struct {
		const char *in;
		size_t outsz;
		const char *out;
	} rows[] = {
	    {"/v1/jobs/42", 64, "/v1/jobs/42"},
	    {"", 8, ""},
	    {"caf\xc3\xa9", 64, "caf\xc3\xa9"},					  /* é */
	    {"\xe2\x82\xac\xf0\x9f\x9a\x80", 64, "\xe2\x82\xac\xf0\x9f\x9a\x80"}, /* € 🚀 */
	    {"a\tb\nc\x7f", 64, "a\\x09b\\x0ac\\x7f"},	      /* control characters */
	    {"\xff\xfe", 64, "\\xff\\xfe"},		      /* not UTF-8 */
	    {"\xc3(", 64, "\\xc3("},			      /* a cut sequence */
	    {"\xc0\xaf", 64, "\\xc0\\xaf"},		      /* overlong '/' */
	    {"\xed\xa0\x80", 64, "\\xed\\xa0\\x80"},	      /* a surrogate */
	    {"\xf4\x90\x80\x80", 64, "\\xf4\\x90\\x80\\x80"}, /* above U+10FFFF */
	    {"abcdef", 4, "abc"},			      /* cut to fit */
	    {"ab\xc3\xa9", 4, "ab"},			      /* never mid-character */
	    {"ab\x01", 6, "ab"},			      /* never mid-escape */
	    {"ab\x01", 7, "ab\\x01"},
	};
	char out[64];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		size_t n;

		ty_test_context("row %zu", i);
		memset(out, 'Z', sizeof(out));
		n = api_audit_text(out, rows[i].outsz, rows[i].in);
		CHECK_STR_EQ(out, rows[i].out);
		CHECK_INT_EQ(n, strlen(rows[i].out));
	}
	CHECK_INT_EQ(api_audit_text(out, 0, "abc"), 0);
}

TY_TEST(created_id_is_the_leading_id)
{
	static const struct {
		const char *body;
		long long id;
	} rows[] = {
	    {"{\"id\":42,\"name\":\"x\"}", 42},
	    {"{\"id\" : 7, \"team\" : \"a\"}", 7}, /* PostgreSQL's json_build_object */
	    {" {\n\"id\":\t123}", 123},
	    {"{\"id\":999999999999999999}", 999999999999999999LL},
	    {"{\"id\":1234567890123456789}", 0}, /* more than 18 digits */
	    {"{\"name\":\"x\",\"id\":42}", 0},	 /* not the first member */
	    {"{\"id\":\"42\"}", 0},
	    {"{\"id\":-1}", 0},
	    {"{\"identity\":5}", 0},
	    {"[{\"id\":5}]", 0},
	    {"", 0},
	    {"{\"id\":", 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].body);
		CHECK_INT_EQ(api_audit_created_id(rows[i].body, strlen(rows[i].body)), rows[i].id);
	}
	CHECK_INT_EQ(api_audit_created_id(NULL, 0), 0);
	/* the length bounds it, not a NUL */
	CHECK_INT_EQ(api_audit_created_id("{\"id\":4217", 8), 42);
}

TY_TEST(request_ids_are_unique)
{
	char a[API_REQUEST_ID_LEN], b[API_REQUEST_ID_LEN];
	const char *dash;

	api_request_id(a);
	api_request_id(b);
	CHECK(strcmp(a, b) != 0);
	dash = strchr(a, '-');
	REQUIRE(dash != NULL);
	CHECK_INT_EQ(dash - a, 16);
	/* the process part is shared, the sequence differs */
	CHECK(strncmp(a, b, 17) == 0);
	CHECK(strspn(a, "0123456789abcdef-") == strlen(a));
}
