/* common/ty_err: the code table and the first-error-wins record. */
#include "ty_err.h"
#include "ty_test.h"

#include <string.h>

struct code_row {
	int code;
	const char *name;
	const char *desc;
};

/* Built from the same X-macro the library uses, so every code is covered. */
static const struct code_row codes[] = {
#define ROW(name, val, id, desc) {TY_##name, id, desc},
    TY_ERRORS(ROW)
#undef ROW
};
#define NCODES (sizeof(codes) / sizeof(codes[0]))

TY_TEST(codes_have_their_names_and_descriptions)
{
	for (size_t i = 0; i < NCODES; i++) {
		ty_test_context("code %d", codes[i].code);
		CHECK_STR_EQ(ty_code_name(codes[i].code), codes[i].name);
		CHECK_STR_EQ(ty_code_desc(codes[i].code), codes[i].desc);
	}
}

TY_TEST(codes_are_unique_and_negative)
{
	for (size_t i = 0; i < NCODES; i++) {
		ty_test_context("code %s", codes[i].name);
		if (i == 0)
			CHECK_INT_EQ(codes[i].code, 0);
		else
			CHECK(codes[i].code < 0);
		for (size_t k = 0; k < i; k++) {
			CHECK(codes[i].code != codes[k].code);
			CHECK(strcmp(codes[i].name, codes[k].name) != 0);
		}
	}
}

/* Numbers are part of the contract: tests and logs compare them. */
TY_TEST(codes_keep_their_numbers)
{
	static const struct {
		int code, value;
	} fixed[] = {
	    {TY_OK, 0},		{TY_ENOMEM, -1},     {TY_EINVAL, -2},	{TY_ENOTFOUND, -3},
	    {TY_ECONFLICT, -4}, {TY_EDB, -5},	     {TY_EIO, -6},	{TY_EPARSE, -7},
	    {TY_EAUTH, -8},	{TY_EPERM, -9},	     {TY_ETOOBIG, -10}, {TY_EUNAVAIL, -11},
	    {TY_EKAFKA, -12},	{TY_ETIMEDOUT, -13}, {TY_ECONFIG, -14}, {TY_EFENCED, -15},
	    {TY_ESTATE, -16},
	};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		CHECK_INT_EQ(fixed[i].code, fixed[i].value);
	CHECK_STR_EQ(ty_code_name(TY_ENOTFOUND), "not_found");
	CHECK_STR_EQ(ty_code_name(TY_EAUTH), "unauthenticated");
}

TY_TEST(unknown_codes)
{
	static const int unknown[] = {1, 42, -17, -1000, 1 << 30};

	for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
		ty_test_context("code %d", unknown[i]);
		CHECK_STR_EQ(ty_code_name(unknown[i]), "unknown");
		CHECK_STR_EQ(ty_code_desc(unknown[i]), "unknown error");
	}
}

TY_TEST(set_records_code_and_message)
{
	struct ty_err err = {0};

	CHECK_INT_EQ(ty_err_set(&err, TY_ENOTFOUND, "no job '%s' (%d)", "x", 7), TY_ENOTFOUND);
	CHECK_INT_EQ(err.code, TY_ENOTFOUND);
	CHECK_STR_EQ(err.msg, "no job 'x' (7)");
}

TY_TEST(first_error_wins)
{
	struct ty_err err = {0};

	ty_err_set(&err, TY_EINVAL, "first");
	/* the second call still returns its own code, for `return ty_err_set(...)` */
	CHECK_INT_EQ(ty_err_set(&err, TY_EDB, "second"), TY_EDB);
	CHECK_INT_EQ(err.code, TY_EINVAL);
	CHECK_STR_EQ(err.msg, "first");

	ty_err_clear(&err);
	CHECK_INT_EQ(err.code, 0);
	CHECK_STR_EQ(err.msg, "");
	ty_err_set(&err, TY_EDB, "after clear");
	CHECK_INT_EQ(err.code, TY_EDB);
	CHECK_STR_EQ(err.msg, "after clear");
}

TY_TEST(null_err_and_null_format)
{
	struct ty_err err = {0};

	CHECK_INT_EQ(ty_err_set(NULL, TY_EIO, "ignored %d", 1), TY_EIO);
	ty_err_clear(NULL);
	ty_err_set(&err, TY_ENOMEM, NULL);
	CHECK_INT_EQ(err.code, TY_ENOMEM);
	CHECK_STR_EQ(err.msg, "out of memory");
}

TY_TEST(long_messages_are_truncated)
{
	struct ty_err err = {0};
	char big[2000];

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ty_err_set(&err, TY_EPARSE, "%s", big);
	CHECK_INT_EQ(strlen(err.msg), TY_ERR_MSG_MAX - 1);
	CHECK_INT_EQ(err.code, TY_EPARSE);
}
