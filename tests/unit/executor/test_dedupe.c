/* executor/dedupe.c: the window of recent dispatch keys. */
#include "exec.h"
#include "ty_test.h"

#include <stdlib.h>

TY_TEST(dedupe_remembers_each_field)
{
	struct exec_dedupe *d = calloc(1, sizeof(*d));

	REQUIRE(d != NULL);
	CHECK(!exec_dedupe_seen(d, 1, 1, PROTO_LAUNCH, 10));
	CHECK(exec_dedupe_seen(d, 1, 1, PROTO_LAUNCH, 10));
	/* any field that differs makes a new key */
	CHECK(!exec_dedupe_seen(d, 2, 1, PROTO_LAUNCH, 10));
	CHECK(!exec_dedupe_seen(d, 1, 2, PROTO_LAUNCH, 10));
	CHECK(!exec_dedupe_seen(d, 1, 1, PROTO_KILL, 10));
	CHECK(!exec_dedupe_seen(d, 1, 1, PROTO_LAUNCH, 11));
	CHECK(exec_dedupe_seen(d, 1, 1, PROTO_KILL, 10));
	CHECK_INT_EQ(d->n, 5);
	free(d);
}

TY_TEST(dedupe_window_forgets_the_oldest)
{
	struct exec_dedupe *d = calloc(1, sizeof(*d));

	REQUIRE(d != NULL);
	CHECK(!exec_dedupe_seen(d, 42, 1, PROTO_LAUNCH, 1));
	for (int64_t s = 100; s < 100 + EXEC_DEDUPE_WINDOW - 1; s++)
		CHECK(!exec_dedupe_seen(d, 7, 1, PROTO_KILL, s));
	/* the window is full and still holds the first key */
	CHECK_INT_EQ(d->n, EXEC_DEDUPE_WINDOW);
	CHECK(exec_dedupe_seen(d, 42, 1, PROTO_LAUNCH, 1));
	/* one more pushes it out */
	CHECK(!exec_dedupe_seen(d, 7, 1, PROTO_KILL, 99));
	CHECK(!exec_dedupe_seen(d, 42, 1, PROTO_LAUNCH, 1));
	CHECK(exec_dedupe_seen(d, 7, 1, PROTO_KILL, 99));
	CHECK_INT_EQ(d->n, EXEC_DEDUPE_WINDOW);
	free(d);
}

TY_TEST(dispatch_order_is_epoch_then_seq)
{
	static const struct {
		int64_t epoch, seq, last_epoch, last_seq;
		enum exec_order want;
	} cases[] = {
	    {1, 1, 0, 0, EXEC_NEWER},	  /* a fresh node takes the first */
	    {3, 10, 3, 9, EXEC_NEWER},	  /* the next of the term */
	    {3, 9, 3, 9, EXEC_REPLAYED},  /* the same message again */
	    {3, 5, 3, 9, EXEC_REPLAYED},  /* an older one of the term */
	    {4, 1, 3, 9, EXEC_NEWER},	  /* a new leader, whatever its seq */
	    {2, 100, 3, 9, EXEC_STALE},	  /* an old leader, whatever its seq */
	    {3, 0, 3, 0, EXEC_REPLAYED},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_INT_EQ(exec_dispatch_order(cases[i].epoch, cases[i].seq, cases[i].last_epoch,
						 cases[i].last_seq),
			     cases[i].want);
}
