/* common/ty_metrics: the text exposition, escaping, numbers, bad input. */
#include "ty_err.h"
#include "ty_metrics.h"
#include "ty_test.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static const char *escaped(void (*fn)(struct ty_buf *, const char *), const char *s)
{
	struct ty_buf b = TY_BUF_INIT;
	char *r;

	fn(&b, s);
	r = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return r;
}

TY_TEST(label_values_escape_backslash_quote_newline)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
	    {"", ""},
	    {"plain", "plain"},
	    {"a\\b", "a\\\\b"},
	    {"say \"hi\"", "say \\\"hi\\\""},
	    {"two\nlines", "two\\nlines"},
	    {"\\\"\n", "\\\\\\\"\\n"},
	    {"tab\tstays", "tab\tstays"},
	    {"ünïcode", "ünïcode"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ty_test_context("label %zu", i);
		CHECK_STR_EQ(escaped(ty_metrics_escape_label, cases[i].in), cases[i].want);
	}
}

TY_TEST(help_escapes_backslash_and_newline_only)
{
	CHECK_STR_EQ(escaped(ty_metrics_escape_help, "a \"q\" \\ b\nc"), "a \"q\" \\\\ b\\nc");
	CHECK_STR_EQ(escaped(ty_metrics_escape_help, ""), "");
}

TY_TEST(numbers_are_shortest_round_trip)
{
	static const struct {
		double v;
		const char *want;
	} cases[] = {
	    {0, "0"},
	    {1, "1"},
	    {-3, "-3"},
	    {0.1, "0.1"},
	    {0.005, "0.005"},
	    {2.5, "2.5"},
	    {1e21, "1e+21"},
	    {1234567, "1234567"},
	    {20000, "20000"},
	    {-0.0, "-0"},
	    {1.0 / 3, "0.3333333333333333"},
	};
	struct ty_buf b = TY_BUF_INIT;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ty_test_context("number %zu", i);
		ty_buf_reset(&b);
		ty_metrics_number(&b, cases[i].v);
		CHECK_STR_EQ(b.data, cases[i].want);
	}
	ty_test_context(NULL);
	ty_buf_reset(&b);
	ty_metrics_number(&b, INFINITY);
	ty_metrics_number(&b, -INFINITY);
	ty_metrics_number(&b, NAN);
	CHECK_STR_EQ(b.data, "+Inf-InfNaN");
	ty_buf_free(&b);
}

TY_TEST(names)
{
	CHECK(ty_metrics_name_ok("trainyard_jobs"));
	CHECK(ty_metrics_name_ok("a:b_c9"));
	CHECK(!ty_metrics_name_ok(""));
	CHECK(!ty_metrics_name_ok("9lives"));
	CHECK(!ty_metrics_name_ok("has-dash"));
	CHECK(!ty_metrics_name_ok(NULL));
	CHECK(ty_metrics_label_ok("team"));
	CHECK(!ty_metrics_label_ok("a:b"));
	CHECK(!ty_metrics_label_ok("__name__"));
	CHECK(!ty_metrics_label_ok("1x"));
}

TY_TEST(exposition_of_every_type)
{
	struct ty_metrics *m = ty_metrics_new();
	const char *lbl[] = {"route", "status", NULL};
	const char *team[] = {"team", NULL};
	const double bounds[] = {0.1, 1};
	struct ty_err err = {0};
	struct ty_buf b = TY_BUF_INIT;

	REQUIRE(m);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_COUNTER, "t_requests_total",
					 "Requests\nby \\route.", lbl, NULL, 0, &err),
		       0);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "t_up", "Up.", NULL, NULL, 0, &err),
		       0);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_HISTOGRAM, "t_seconds", "Latency.", team,
					 bounds, 2, &err),
		       0);
	REQUIRE_INT_EQ(
	    ty_metrics_family(m, TY_METRIC_GAUGE, "t_empty", "No series.", team, NULL, 0, &err), 0);
	CHECK_INT_EQ(ty_metrics_add(m, "t_requests_total", (const char *[]){"/v1/jobs", "200"}, 1),
		     0);
	CHECK_INT_EQ(
	    ty_metrics_add(m, "t_requests_total", (const char *[]){"/a\"b\\c\nd", "404"}, 2), 0);
	CHECK_INT_EQ(ty_metrics_add(m, "t_requests_total", (const char *[]){"/v1/jobs", "200"}, 1),
		     0);
	CHECK_INT_EQ(ty_metrics_set(m, "t_up", NULL, 1), 0);
	CHECK_INT_EQ(ty_metrics_add(m, "t_up", NULL, 0.5), 0);
	CHECK_INT_EQ(ty_metrics_observe(m, "t_seconds", (const char *[]){"a"}, 0.05), 0);
	CHECK_INT_EQ(ty_metrics_observe(m, "t_seconds", (const char *[]){"a"}, 0.1), 0);
	CHECK_INT_EQ(ty_metrics_observe(m, "t_seconds", (const char *[]){"a"}, 0.5), 0);
	CHECK_INT_EQ(ty_metrics_observe(m, "t_seconds", (const char *[]){"a"}, 7), 0);
	REQUIRE_INT_EQ(ty_metrics_write(m, &b), 0);
	CHECK_STR_EQ(b.data, "# HELP t_requests_total Requests\\nby \\\\route.\n"
			     "# TYPE t_requests_total counter\n"
			     "t_requests_total{route=\"/v1/jobs\",status=\"200\"} 2\n"
			     "t_requests_total{route=\"/a\\\"b\\\\c\\nd\",status=\"404\"} 2\n"
			     "# HELP t_up Up.\n"
			     "# TYPE t_up gauge\n"
			     "t_up 1.5\n"
			     "# HELP t_seconds Latency.\n"
			     "# TYPE t_seconds histogram\n"
			     "t_seconds_bucket{team=\"a\",le=\"0.1\"} 2\n"
			     "t_seconds_bucket{team=\"a\",le=\"1\"} 3\n"
			     "t_seconds_bucket{team=\"a\",le=\"+Inf\"} 4\n"
			     "t_seconds_sum{team=\"a\"} 7.65\n"
			     "t_seconds_count{team=\"a\"} 4\n"
			     "# HELP t_empty No series.\n"
			     "# TYPE t_empty gauge\n");
	ty_buf_free(&b);
	ty_metrics_free(m);
}

TY_TEST(unlabelled_families_start_at_zero)
{
	struct ty_metrics *m = ty_metrics_new();
	const double bounds[] = {1};
	struct ty_buf b = TY_BUF_INIT;

	REQUIRE(m);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_COUNTER, "c_total", "", NULL, NULL, 0, NULL),
		       0);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_HISTOGRAM, "h", "", NULL, bounds, 1, NULL),
		       0);
	ty_metrics_write(m, &b);
	CHECK_STR_EQ(b.data, "# HELP c_total \n# TYPE c_total counter\nc_total 0\n"
			     "# HELP h \n# TYPE h histogram\nh_bucket{le=\"1\"} 0\n"
			     "h_bucket{le=\"+Inf\"} 0\nh_sum 0\nh_count 0\n");
	ty_buf_free(&b);
	ty_metrics_free(m);
}

TY_TEST(bad_registrations_and_updates)
{
	struct ty_metrics *m = ty_metrics_new();
	const double up[] = {1, 2}, down[] = {2, 1}, inf[] = {INFINITY};
	const char *le[] = {"le", NULL};
	const char *bad[] = {"a-b", NULL};
	const char *nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", NULL};
	struct ty_err err = {0};

	REQUIRE(m);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "bad-name", "", NULL, NULL, 0, &err),
		     TY_EINVAL);
	CHECK(strstr(err.msg, "bad-name") != NULL);
	ty_err_clear(&err);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "g", "", bad, NULL, 0, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "'a-b'") != NULL);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "g", "", nine, NULL, 0, &err),
		     TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_HISTOGRAM, "h", "", le, up, 2, &err),
		     TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_HISTOGRAM, "h", "", NULL, down, 2, &err),
		     TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_HISTOGRAM, "h", "", NULL, inf, 1, &err),
		     TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_HISTOGRAM, "h", "", NULL, up, 0, &err),
		     TY_EINVAL);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_COUNTER, "c_total", "", NULL, NULL, 0, &err),
		       0);
	CHECK_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "c_total", "", NULL, NULL, 0, &err),
		     TY_ECONFLICT);
	CHECK_INT_EQ(ty_metrics_add(m, "missing", NULL, 1), TY_ENOTFOUND);
	CHECK_INT_EQ(ty_metrics_add(m, "c_total", NULL, -1), TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_add(m, "c_total", NULL, NAN), TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_set(m, "c_total", NULL, 1), TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_observe(m, "c_total", NULL, 1), TY_EINVAL);
	CHECK_INT_EQ(ty_metrics_add(NULL, "c_total", NULL, 1), TY_EINVAL);
	ty_metrics_free(m);
	ty_metrics_free(NULL);
}

/* A series of something gone (a job that held a GPU) can be dropped; the family stays. */
TY_TEST(series_can_be_removed)
{
	struct ty_metrics *m = ty_metrics_new();
	const char *lbl[] = {"gpu", "job", NULL};
	const char *eight[] = {"a", "b", "c", "d", "e", "f", "g", "h", NULL};
	struct ty_buf b = TY_BUF_INIT;

	REQUIRE(m);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "u", "U.", lbl, NULL, 0, NULL), 0);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "one", "", NULL, NULL, 0, NULL), 0);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_GAUGE, "wide", "", eight, NULL, 0, NULL), 0);
	ty_metrics_set(m, "u", (const char *[]){"0", "7"}, 90);
	ty_metrics_set(m, "u", (const char *[]){"1", ""}, 3);
	ty_metrics_set(m, "u", (const char *[]){"2", "8"}, 50);
	CHECK_INT_EQ(ty_metrics_remove(m, "u", (const char *[]){"0", "7"}), 0);
	CHECK_INT_EQ(ty_metrics_remove(m, "u", (const char *[]){"0", "7"}), TY_ENOTFOUND);
	CHECK_INT_EQ(ty_metrics_remove(m, "u", (const char *[]){"1", "7"}), TY_ENOTFOUND);
	CHECK_INT_EQ(ty_metrics_remove(m, "missing", (const char *[]){"1", ""}), TY_ENOTFOUND);
	CHECK_INT_EQ(ty_metrics_remove(m, "one", NULL), TY_ENOTFOUND);
	CHECK_INT_EQ(ty_metrics_remove(NULL, "u", (const char *[]){"1", ""}), TY_EINVAL);
	/* the last one removed, a new one goes to the end */
	CHECK_INT_EQ(ty_metrics_remove(m, "u", (const char *[]){"2", "8"}), 0);
	ty_metrics_set(m, "u", (const char *[]){"0", "9"}, 0);
	ty_metrics_set(m, "wide", (const char *[]){"1", "2", "3", "4", "5", "6", "7", "8"}, 1);
	REQUIRE_INT_EQ(ty_metrics_write(m, &b), 0);
	CHECK_STR_EQ(b.data, "# HELP u U.\n# TYPE u gauge\n"
			     "u{gpu=\"1\",job=\"\"} 3\n"
			     "u{gpu=\"0\",job=\"9\"} 0\n"
			     "# HELP one \n# TYPE one gauge\none 0\n"
			     "# HELP wide \n# TYPE wide gauge\n"
			     "wide{a=\"1\",b=\"2\",c=\"3\",d=\"4\",e=\"5\",f=\"6\",g=\"7\",h=\"8\"} 1\n");
	ty_buf_free(&b);
	/* every series gone: the family is still written, without samples */
	ty_metrics_remove(m, "u", (const char *[]){"1", ""});
	ty_metrics_remove(m, "u", (const char *[]){"0", "9"});
	ty_metrics_set(m, "u", (const char *[]){"3", ""}, 4);
	REQUIRE_INT_EQ(ty_metrics_write(m, &b), 0);
	CHECK(strstr(b.data, "# TYPE u gauge\nu{gpu=\"3\",job=\"\"} 4\n") != NULL);
	ty_buf_free(&b);
	ty_metrics_free(m);
}

static void *bump(void *arg)
{
	for (int i = 0; i < 10000; i++)
		ty_metrics_add(arg, "n_total", (const char *[]){i % 2 ? "odd" : "even"}, 1);
	return NULL;
}

TY_TEST(threads_update_concurrently)
{
	struct ty_metrics *m = ty_metrics_new();
	const char *lbl[] = {"k", NULL};
	pthread_t t[4];
	struct ty_buf b = TY_BUF_INIT;

	REQUIRE(m);
	REQUIRE_INT_EQ(ty_metrics_family(m, TY_METRIC_COUNTER, "n_total", "", lbl, NULL, 0, NULL),
		       0);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, bump, m);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ty_metrics_write(m, &b);
	CHECK_STR_EQ(b.data, "# HELP n_total \n# TYPE n_total counter\n"
			     "n_total{k=\"even\"} 20000\nn_total{k=\"odd\"} 20000\n");
	ty_buf_free(&b);
	ty_metrics_free(m);
}
