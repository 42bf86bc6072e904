/* executor/tail.c: rank log tails and log URLs. */
#include "exec.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *scratch_dir(void)
{
	char *dir = ty_test_strf("/tmp/ty-test-exec-tail-XXXXXX");

	REQUIRE(mkdtemp(dir) != NULL);
	return dir;
}

static void put(const char *path, const char *text)
{
	FILE *f;

	unlink(path);
	if (!text)
		return;
	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs(text, f);
	fclose(f);
}

TY_TEST(tail_lines)
{
	static const struct {
		const char *name;
		const char *cur; /* NULL: no file */
		const char *old; /* the rotated part, NULL: none */
		long lines;
		size_t max;
		const char *want;
	} rows[] = {
	    {"last two", "a\nb\nc\n", NULL, 2, 1024, "b\nc\n"},
	    {"no final newline", "a\nb\nc", NULL, 2, 1024, "b\nc"},
	    {"fewer than asked", "a\nb\nc\n", NULL, 10, 1024, "a\nb\nc\n"},
	    {"exactly all", "a\nb\nc\n", NULL, 3, 1024, "a\nb\nc\n"},
	    {"empty file", "", NULL, 5, 1024, ""},
	    {"empty lines", "\n\n\n", NULL, 2, 1024, "\n\n"},
	    {"one line", "only\n", NULL, 1, 1024, "only\n"},
	    {"into the rotated part", "4\n5\n", "1\n2\n3\n", 4, 1024, "2\n3\n4\n5\n"},
	    {"rotated part not needed", "4\n5\n", "1\n2\n3\n", 2, 1024, "4\n5\n"},
	    {"only the rotated part", NULL, "x\ny\n", 1, 1024, "y\n"},
	    {"empty current file", "", "x\ny\n", 5, 1024, "x\ny\n"},
	    {"cut at a line boundary", "aaaa\nbbbb\ncccc\n", NULL, 100, 8, "cccc\n"},
	    {"cut inside one long line", "0123456789", NULL, 5, 4, "6789"},
	};
	const char *dir = scratch_dir(), *path = ty_test_strf("%s/rank-0.log", dir),
		   *rotated = ty_test_strf("%s.1", path);

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_buf out = TY_BUF_INIT;
		struct ty_err err = {0};

		ty_test_context("%s", rows[i].name);
		put(path, rows[i].cur);
		put(rotated, rows[i].old);
		CHECK_INT_EQ(exec_log_tail(&out, path, rows[i].lines, rows[i].max, &err), 0);
		CHECK_STR_EQ(out.data ? out.data : "", rows[i].want);
		ty_buf_free(&out);
	}
	put(path, NULL);
	put(rotated, NULL);
	rmdir(dir);
}

TY_TEST(tail_of_large_files)
{
	const char *dir = scratch_dir(), *path = ty_test_strf("%s/big.log", dir);
	struct ty_buf out = TY_BUF_INIT;
	struct ty_err err = {0};
	FILE *f = fopen(path, "w");
	int n = 0;

	REQUIRE(f != NULL);
	for (int i = 1; i <= 100000; i++)
		fprintf(f, "line %06d\n", i); /* 12 bytes a line: 1.2 MB, many chunks */
	fclose(f);
	REQUIRE_INT_EQ(exec_log_tail(&out, path, 3, EXEC_TAIL_MAX_BYTES, &err), 0);
	CHECK_STR_EQ(out.data, "line 099998\nline 099999\nline 100000\n");
	ty_buf_free(&out);
	REQUIRE_INT_EQ(exec_log_tail(&out, path, EXEC_TAIL_MAX, EXEC_TAIL_MAX_BYTES, &err), 0);
	for (size_t i = 0; i < out.len; i++)
		n += out.data[i] == '\n';
	CHECK_INT_EQ(n, EXEC_TAIL_MAX);
	CHECK(strncmp(out.data, "line 090001\n", 12) == 0);
	ty_buf_free(&out);
	/* the byte cap wins over the line count */
	REQUIRE_INT_EQ(exec_log_tail(&out, path, EXEC_TAIL_MAX, 120, &err), 0);
	CHECK_INT_EQ(out.len, 120);
	CHECK(strncmp(out.data, "line 099991\n", 12) == 0);
	ty_buf_free(&out);
	unlink(path);
	CHECK_INT_EQ(exec_log_tail(&out, path, 3, 1024, &err), TY_ENOTFOUND);
	rmdir(dir);
}

TY_TEST(log_request_parse)
{
	static const struct {
		const char *url;
		const char *tail;
		int rc;
		int64_t job, attempt;
		int rank;
		long lines;
	} rows[] = {
	    {"/logs/1/2/3", NULL, 0, 1, 2, 3, EXEC_TAIL_DEFAULT},
	    {"/logs/42/1/0", "5", 0, 42, 1, 0, 5},
	    {"/logs/42/1/0", "10000", 0, 42, 1, 0, 10000},
	    {"/logs/42/1/0", "10001", TY_EINVAL, 0, 0, 0, 0},
	    {"/logs/42/1/0", "0", TY_EINVAL, 0, 0, 0, 0},
	    {"/logs/42/1/0", "", TY_EINVAL, 0, 0, 0, 0},
	    {"/logs/42/1/0", "-1", TY_EINVAL, 0, 0, 0, 0},
	    {"/logs/42/1/0", "1x", TY_EINVAL, 0, 0, 0, 0},
	    {"/logs/42/1/0", "05", TY_EINVAL, 0, 0, 0, 0},
	    {"/logs/0/1/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/0/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/01/1/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/1/00", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/1/", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/1", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/1/0/", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/1/0/x", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/-1/1/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/+1/1/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/1/1/a", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/99999999999999999999/1/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logs/../../etc/passwd", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/logz/1/1/0", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	    {"/", NULL, TY_ENOTFOUND, 0, 0, 0, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int64_t job = 0, attempt = 0;
		int rank = 0;
		long lines = 0;

		ty_test_context("%s?tail=%s", rows[i].url, rows[i].tail ? rows[i].tail : "(none)");
		CHECK_INT_EQ(exec_log_request_parse(&job, &attempt, &rank, &lines, rows[i].url,
						    rows[i].tail),
			     rows[i].rc);
		if (rows[i].rc)
			continue;
		CHECK_INT_EQ(job, rows[i].job);
		CHECK_INT_EQ(attempt, rows[i].attempt);
		CHECK_INT_EQ(rank, rows[i].rank);
		CHECK_INT_EQ(lines, rows[i].lines);
	}
}
