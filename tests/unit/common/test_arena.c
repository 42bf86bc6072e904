/* common/ty_arena: alignment, large and many small allocations, strings. */
#include "ty_arena.h"
#include "ty_test.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

TY_TEST(alignment)
{
	struct ty_arena *a = ty_arena_new();

	REQUIRE(a != NULL);
	for (size_t n = 0; n < 200; n++) {
		void *p = ty_arena_alloc(a, n);

		ty_test_context("size %zu", n);
		REQUIRE(p != NULL);
		CHECK_INT_EQ((uintptr_t)p % alignof(max_align_t), 0);
		memset(p, 0xab, n);
	}
	ty_arena_free(a);
}

TY_TEST(zero_size_allocations_are_distinct)
{
	struct ty_arena *a = ty_arena_new();
	void *p, *q;

	REQUIRE(a != NULL);
	p = ty_arena_alloc(a, 0);
	q = ty_arena_alloc(a, 0);
	CHECK(p != NULL && q != NULL && p != q);
	ty_arena_free(a);
}

TY_TEST(large_allocations)
{
	static const size_t sizes[] = {4097, 8192, 8193, 65536, 1 << 20, 5 << 20};
	struct ty_arena *a = ty_arena_new();
	unsigned char *blocks[6], *small[3];

	REQUIRE(a != NULL);
	small[0] = ty_arena_alloc(a, 16);
	for (size_t i = 0; i < 6; i++) {
		ty_test_context("size %zu", sizes[i]);
		blocks[i] = ty_arena_alloc(a, sizes[i]);
		REQUIRE(blocks[i] != NULL);
		CHECK_INT_EQ((uintptr_t)blocks[i] % alignof(max_align_t), 0);
		memset(blocks[i], (int)i + 1, sizes[i]);
	}
	ty_test_context(NULL);
	/* small ones still come after the big ones */
	small[1] = ty_arena_alloc(a, 24);
	small[2] = ty_arena_alloc(a, 24);
	REQUIRE(small[1] && small[2]);
	memset(small[1], 0x11, 24);
	memset(small[2], 0x22, 24);
	for (size_t i = 0; i < 6; i++) {
		ty_test_context("size %zu", sizes[i]);
		CHECK(blocks[i][0] == i + 1 && blocks[i][sizes[i] - 1] == i + 1);
	}
	CHECK(ty_arena_used(a) >= 16 + 48 + (1 << 20) + (5 << 20));
	ty_arena_free(a);
}

TY_TEST(many_small)
{
	enum { N = 100000 };
	struct ty_arena *a = ty_arena_new();
	uint64_t **ptrs = ty_test_alloc(N * sizeof(*ptrs));
	size_t used = 0;

	REQUIRE(a != NULL);
	for (uint64_t i = 0; i < N; i++) {
		size_t n = 8 + (i % 5) * 8;

		ptrs[i] = ty_arena_alloc(a, n);
		REQUIRE(ptrs[i] != NULL);
		ptrs[i][0] = i * 2654435761u;
		ptrs[i][n / 8 - 1] = ~i;
		used += n;
	}
	for (uint64_t i = 0; i < N; i++) {
		size_t n = 8 + (i % 5) * 8;

		if (ptrs[i][n / 8 - 1] != ~i || (n > 8 && ptrs[i][0] != i * 2654435761u)) {
			FAIL("allocation %llu was overwritten", (unsigned long long)i);
			break;
		}
	}
	CHECK(ty_arena_used(a) >= used);
	ty_arena_free(a);
}

TY_TEST(strings)
{
	struct ty_arena *a = ty_arena_new();
	char src[] = "hello, arena";
	char *s, *t, *u;

	REQUIRE(a != NULL);
	s = ty_arena_strdup(a, src);
	t = ty_arena_strndup(a, src, 5);
	u = ty_arena_printf(a, "%s #%d %s", "job", 42, "x");
	src[0] = 'J';
	CHECK_STR_EQ(s, "hello, arena");
	CHECK_STR_EQ(t, "hello");
	CHECK_STR_EQ(u, "job #42 x");
	CHECK_STR_EQ(ty_arena_strdup(a, ""), "");
	CHECK_STR_EQ(ty_arena_strndup(a, "abc", 0), "");
	ty_arena_free(a);
	ty_arena_free(NULL);
}

TY_TEST(used_counts)
{
	struct ty_arena *a = ty_arena_new();

	REQUIRE(a != NULL);
	CHECK_INT_EQ(ty_arena_used(a), 0);
	ty_arena_alloc(a, 100);
	CHECK(ty_arena_used(a) >= 100);
	ty_arena_free(a);
}
