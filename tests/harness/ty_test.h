/*
 * A tiny test runner: TY_TEST(name) cases registered at load time, CHECK
 * macros that report and continue, REQUIRE macros that end the case, and a
 * main() that runs every case (or the ones named on the command line).
 *
 *	TY_TEST(sums_small_numbers)
 *	{
 *		CHECK_INT_EQ(add(2, 2), 4);
 *		REQUIRE(p != NULL);
 *	}
 *
 * Cases run one after another on the main thread in file/line order.
 * CHECK and REQUIRE may be used from other threads too: there REQUIRE ends
 * the thread (pthread_exit), not the case.
 */
#ifndef TY_TEST_H
#define TY_TEST_H

#include <stdbool.h>
#include <stddef.h>

void ty_test__register(const char *name, void (*fn)(void), const char *file, int line);

#define TY_TEST(name)                                                                              \
	static void ty_test_case_##name(void);                                                     \
	__attribute__((constructor)) static void ty_test_reg_##name(void)                          \
	{                                                                                          \
		ty_test__register(#name, ty_test_case_##name, __FILE__, __LINE__);                 \
	}                                                                                          \
	static void ty_test_case_##name(void)

/* Each returns whether the check held; a failure is reported and counted. */
bool ty_test__check(bool ok, const char *expr, const char *file, int line);
bool ty_test__int_eq(long long a, long long b, const char *ea, const char *eb, const char *file,
		     int line);
bool ty_test__str_eq(const char *a, const char *b, const char *ea, const char *eb, const char *file,
		     int line);

#define CHECK(c) ((void)ty_test__check(!!(c), #c, __FILE__, __LINE__))
#define CHECK_INT_EQ(a, b)                                                                         \
	((void)ty_test__int_eq((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__))
/* Either side may be NULL; two NULLs are equal. */
#define CHECK_STR_EQ(a, b) ((void)ty_test__str_eq((a), (b), #a, #b, __FILE__, __LINE__))

#define REQUIRE(c)                                                                                 \
	do {                                                                                       \
		if (!ty_test__check(!!(c), #c, __FILE__, __LINE__))                                \
			ty_test_abort();                                                           \
	} while (0)
#define REQUIRE_INT_EQ(a, b)                                                                       \
	do {                                                                                       \
		if (!ty_test__int_eq((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__))  \
			ty_test_abort();                                                           \
	} while (0)
#define REQUIRE_STR_EQ(a, b)                                                                       \
	do {                                                                                       \
		if (!ty_test__str_eq((a), (b), #a, #b, __FILE__, __LINE__))                        \
			ty_test_abort();                                                           \
	} while (0)

/* Report a failure at file:line with a printf-style message; the case goes on. */
void ty_test_fail_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FAIL(...) ty_test_fail_at(__FILE__, __LINE__, __VA_ARGS__)

/* End the current case (on the case's thread) or the calling thread (others). */
_Noreturn void ty_test_abort(void);

/*
 * A label printed in front of every failure until changed or cleared with
 * NULL; reset at the start of each case. Table-driven cases set it per row.
 */
void ty_test_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Diagnostic output (a "# " prefixed line), kept with the failures. */
void ty_test_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* True once the current case has failed a check. */
bool ty_test_failed(void);

/*
 * Scratch strings that live until the end of the current case (thread-safe).
 * ty_test_strf formats; ty_test_jf formats and then turns every ' into ", so
 * JSON reads naturally in C: ty_test_jf("{'team':'%s'}", name).
 */
char *ty_test_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *ty_test_jf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* n bytes of scratch memory, zeroed. */
void *ty_test_alloc(size_t n);

/* Basename of the running test program (for naming databases and files). */
const char *ty_test_program(void);

/*
 * Hooks for fixtures. case_failed runs after a case that failed (to print
 * logs); case_end after every case (after case_failed), before the case's
 * scratch memory is freed: a fixture's threads that use it stop there;
 * teardown runs once after the last case, and a failure reported there
 * fails the run.
 */
enum ty_test_hook { TY_TEST_CASE_START, TY_TEST_CASE_FAILED, TY_TEST_CASE_END, TY_TEST_TEARDOWN };
void ty_test_on(enum ty_test_hook hook, void (*fn)(void));

#endif
