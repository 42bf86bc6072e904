/* The test runner: case registry, checks, scratch memory and main(). */
#include "ty_test.h"

#include "ty_arena.h"

#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CASES 512
#define MAX_HOOKS 8

struct test_case {
	const char *name;
	void (*fn)(void);
	const char *file;
	int line;
};

static struct test_case cases[MAX_CASES];
static int ncases;

static void (*hooks[TY_TEST_TEARDOWN + 1][MAX_HOOKS])(void);
static int nhooks[TY_TEST_TEARDOWN + 1];

static jmp_buf case_jmp;
static pthread_t case_thread;
static atomic_int case_failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char context[512];
static struct ty_arena *scratch;
static const char *program = "test";

void ty_test__register(const char *name, void (*fn)(void), const char *file, int line)
{
	if (ncases == MAX_CASES) {
		fprintf(stderr, "too many test cases (max %d)\n", MAX_CASES);
		abort();
	}
	cases[ncases++] = (struct test_case){name, fn, file, line};
}

void ty_test_on(enum ty_test_hook hook, void (*fn)(void))
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < nhooks[hook]; i++)
		if (hooks[hook][i] == fn)
			goto out;
	if (nhooks[hook] < MAX_HOOKS)
		hooks[hook][nhooks[hook]++] = fn;
out:
	pthread_mutex_unlock(&lock);
}

static void run_hooks(enum ty_test_hook hook)
{
	for (int i = 0; i < nhooks[hook]; i++)
		hooks[hook][i]();
}

static void vreport(const char *file, int line, const char *fmt, va_list ap)
{
	const char *base = strrchr(file, '/');

	atomic_fetch_add(&case_failures, 1);
	pthread_mutex_lock(&lock);
	printf("  %s:%d: ", base ? base + 1 : file, line);
	if (context[0])
		printf("[%s] ", context);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&lock);
}

void ty_test_fail_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(file, line, fmt, ap);
	va_end(ap);
}

bool ty_test__check(bool ok, const char *expr, const char *file, int line)
{
	if (!ok)
		ty_test_fail_at(file, line, "CHECK(%s) failed", expr);
	return ok;
}

bool ty_test__int_eq(long long a, long long b, const char *ea, const char *eb, const char *file,
		     int line)
{
	if (a != b)
		ty_test_fail_at(file, line, "%s == %s failed: %lld != %lld", ea, eb, a, b);
	return a == b;
}

/* Long values are cut so that one failure stays readable. */
static void quoted(char *out, size_t sz, const char *s)
{
	if (!s)
		snprintf(out, sz, "NULL");
	else if (strlen(s) + 3 > sz) {
		char tail[40];
		int n = snprintf(tail, sizeof(tail), "\"...(%zu bytes)", strlen(s));

		/* the quote, as much of s as fits, then the tail */
		out[0] = '"';
		memcpy(out + 1, s, sz - 2 - (size_t)n);
		memcpy(out + sz - 1 - n, tail, (size_t)n + 1);
	}
	else
		snprintf(out, sz, "\"%s\"", s);
}

bool ty_test__str_eq(const char *a, const char *b, const char *ea, const char *eb, const char *file,
		     int line)
{
	char qa[600], qb[600];
	bool eq = (!a && !b) || (a && b && strcmp(a, b) == 0);

	if (!eq) {
		quoted(qa, sizeof(qa), a);
		quoted(qb, sizeof(qb), b);
		ty_test_fail_at(file, line, "%s == %s failed: %s != %s", ea, eb, qa, qb);
	}
	return eq;
}

_Noreturn void ty_test_abort(void)
{
	if (pthread_equal(pthread_self(), case_thread))
		longjmp(case_jmp, 1);
	pthread_exit(NULL);
}

void ty_test_context(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&lock);
	if (!fmt) {
		context[0] = '\0';
	} else {
		va_start(ap, fmt);
		vsnprintf(context, sizeof(context), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&lock);
}

void ty_test_note(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&lock);
	fputs("  # ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	pthread_mutex_unlock(&lock);
}

bool ty_test_failed(void)
{
	return atomic_load(&case_failures) > 0;
}

void *ty_test_alloc(size_t n)
{
	void *p;

	pthread_mutex_lock(&lock);
	if (!scratch)
		scratch = ty_arena_new();
	p = scratch ? ty_arena_alloc(scratch, n) : NULL;
	pthread_mutex_unlock(&lock);
	if (!p) {
		fprintf(stderr, "out of memory in the test harness\n");
		abort();
	}
	memset(p, 0, n);
	return p;
}

static char *vstrf(const char *fmt, va_list ap)
{
	va_list ap2;
	char *p;
	int n;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		abort();
	p = ty_test_alloc((size_t)n + 1);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	return p;
}

char *ty_test_strf(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = vstrf(fmt, ap);
	va_end(ap);
	return p;
}

char *ty_test_jf(const char *fmt, ...)
{
	va_list ap;
	char *p;

	va_start(ap, fmt);
	p = vstrf(fmt, ap);
	va_end(ap);
	for (char *s = p; *s; s++)
		if (*s == '\'')
			*s = '"';
	return p;
}

const char *ty_test_program(void)
{
	return program;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int by_place(const void *a, const void *b)
{
	const struct test_case *x = a, *y = b;
	int c = strcmp(x->file, y->file);

	return c ? c : x->line - y->line;
}

static bool selected(const char *name, int argc, char **argv)
{
	if (argc < 2)
		return true;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], name) == 0)
			return true;
	return false;
}

static void usage(void)
{
	printf("usage: %s [--list] [CASE...]\n"
	       "runs every case, or the named ones; exits 1 when any fails\n",
	       program);
}

int main(int argc, char **argv)
{
	/* volatile: a REQUIRE longjmps back into the loop that counts them */
	volatile int passed = 0, failed = 0;
	const char *slash = strrchr(argv[0], '/');

	program = slash ? slash + 1 : argv[0];
	setvbuf(stdout, NULL, _IOLBF, 0);
	qsort(cases, (size_t)ncases, sizeof(cases[0]), by_place);

	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage();
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (int i = 0; i < ncases; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		int k;

		for (k = 0; k < ncases && strcmp(cases[k].name, argv[i]) != 0; k++)
			;
		if (k == ncases) {
			fprintf(stderr, "%s: no test case '%s' (see --list)\n", program, argv[i]);
			return 2;
		}
	}

	case_thread = pthread_self();
	for (int i = 0; i < ncases; i++) {
		const struct test_case *tc = &cases[i];
		int64_t start;

		if (!selected(tc->name, argc, argv))
			continue;
		atomic_store(&case_failures, 0);
		ty_test_context(NULL);
		run_hooks(TY_TEST_CASE_START);
		start = now_ms();
		if (setjmp(case_jmp) == 0)
			tc->fn();
		ty_test_context(NULL);
		if (ty_test_failed()) {
			run_hooks(TY_TEST_CASE_FAILED);
			printf("FAIL %s (%" PRId64 " ms)\n", tc->name, now_ms() - start);
			failed++;
		} else {
			printf("ok   %s (%" PRId64 " ms)\n", tc->name, now_ms() - start);
			passed++;
		}
		if (setjmp(case_jmp) == 0)
			run_hooks(TY_TEST_CASE_END);
		pthread_mutex_lock(&lock);
		ty_arena_free(scratch);
		scratch = NULL;
		pthread_mutex_unlock(&lock);
	}

	atomic_store(&case_failures, 0);
	if (setjmp(case_jmp) == 0)
		run_hooks(TY_TEST_TEARDOWN);
	if (ty_test_failed()) {
		printf("FAIL teardown\n");
		failed++;
	}
	ty_arena_free(scratch);
	scratch = NULL;

	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
