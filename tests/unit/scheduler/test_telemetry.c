/*
 * GPU telemetry's pure parts (scheduler/telemetry.c): a node's
 * attempt_exited.telemetry read field by field (a malformed field is left
 * out and named, the rest kept), the summary of a gang's reports, and the
 * idle fields of a heartbeat's running[] entries.
 */
#include "scheduler.h"
#include "ty_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool near(double a, double b)
{
	return fabs(a - b) < 1e-9;
}

static json_t *parse_json(const char *text)
{
	json_t *v = json_loads(ty_test_jf("%s", text), JSON_DECODE_ANY, NULL);

	if (!v)
		FAIL("bad JSON %s", text);
	return v;
}

TY_TEST(a_whole_report_is_kept)
{
	json_t *t = parse_json("{'samples':120,'gpus':8,'util_mean':37.5,'util_peak':99,"
			       "'memory_used_peak_mb':71234,'power_mean_w':310.25,"
			       "'power_peak_w':698,'idle_seconds':60.5,'future':'ignored'}");
	struct sched_telemetry v;
	char bad[64];

	CHECK_INT_EQ(sched_telemetry_parse(&v, bad, sizeof(bad), t), 8);
	CHECK_STR_EQ(bad, "");
	CHECK_INT_EQ(v.samples, 120);
	CHECK_INT_EQ(v.gpus, 8);
	CHECK(near(v.util_mean, 37.5) && near(v.util_peak, 99));
	CHECK_INT_EQ(v.memory_used_peak_mb, 71234);
	CHECK(near(v.power_mean_w, 310.25) && near(v.power_peak_w, 698));
	CHECK(near(v.idle_seconds, 60.5));
	json_decref(t);
}

TY_TEST(malformed_fields_are_left_out_and_named)
{
	static const struct {
		const char *json;
		int kept;
		const char *bad;
	} cases[] = {
	    {"{}", 0, ""},
	    {"{'samples':null,'util_mean':null}", 0, ""},
	    {"{'samples':'10','util_mean':12}", 1, "samples"},
	    {"{'samples':-1,'gpus':2}", 1, "samples"},
	    {"{'samples':1.5,'gpus':2}", 1, "samples"},
	    {"{'gpus':5000,'samples':3}", 1, "gpus"},
	    {"{'util_mean':101,'util_peak':-0.5,'samples':1}", 1, "util_mean, util_peak"},
	    {"{'util_mean':true}", 0, "util_mean"},
	    {"{'memory_used_peak_mb':1024.5,'power_mean_w':'high'}", 0,
	     "memory_used_peak_mb, power_mean_w"},
	    {"{'power_peak_w':1e9}", 0, "power_peak_w"},
	    {"{'idle_seconds':-3,'samples':4}", 1, "idle_seconds"},
	    {"{'idle_seconds':1e12}", 0, "idle_seconds"},
	    {"{'idle_seconds':[1]}", 0, "idle_seconds"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *t = parse_json(cases[i].json);
		struct sched_telemetry v;
		char bad[128];

		ty_test_context("%s", cases[i].json);
		CHECK_INT_EQ(sched_telemetry_parse(&v, bad, sizeof(bad), t), cases[i].kept);
		CHECK_STR_EQ(bad, cases[i].bad);
		json_decref(t);
	}
}

TY_TEST(what_is_not_an_object_has_nothing)
{
	static const char *const cases[] = {"[]", "3", "'x'", "null"};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *t = parse_json(cases[i]);
		struct sched_telemetry v;

		ty_test_context("%s", cases[i]);
		CHECK_INT_EQ(sched_telemetry_parse(&v, NULL, 0, t), 0);
		CHECK(v.samples < 0 && v.util_mean < 0 && v.idle_seconds < 0);
		json_decref(t);
	}
}

TY_TEST(a_gangs_reports_combine_weighted_by_samples_and_gpus)
{
	struct sched_telemetry v[2], out;
	const int gpus[] = {8, 4};

	sched_telemetry_init(&v[0]);
	sched_telemetry_init(&v[1]);
	v[0].samples = 100;
	v[0].gpus = 8;
	v[0].util_mean = 80;
	v[0].util_peak = 97;
	v[0].memory_used_peak_mb = 60000;
	v[0].power_mean_w = 400;
	v[0].power_peak_w = 650;
	v[0].idle_seconds = 30;
	v[1].samples = 50;
	v[1].gpus = 4;
	v[1].util_mean = 20;
	v[1].util_peak = 99;
	v[1].memory_used_peak_mb = 70000;
	v[1].power_mean_w = 100;
	v[1].power_peak_w = 300;
	v[1].idle_seconds = 600;
	sched_telemetry_combine(&out, v, gpus, 2);
	CHECK_INT_EQ(out.nodes, 2);
	CHECK_INT_EQ(out.samples, 150);
	/* 800 GPU-samples at 80 %, 200 at 20 % */
	CHECK(near(out.util_mean, (800.0 * 80 + 200.0 * 20) / 1000));
	CHECK(near(out.util_peak, 99));
	CHECK_INT_EQ(out.memory_used_peak_mb, 70000);
	CHECK(near(out.power_mean_w, (800.0 * 400 + 200.0 * 100) / 1000));
	CHECK(near(out.power_peak_w, 650));
	CHECK(near(out.idle_gpu_seconds, 30.0 * 8 + 600.0 * 4));
}

TY_TEST(partial_reports_combine_what_they_have)
{
	struct sched_telemetry v[3], out;
	const int gpus[] = {2, 2, 2};

	for (int i = 0; i < 3; i++)
		sched_telemetry_init(&v[i]);
	/* samples and gpus left out: one sample of the GPUs it holds */
	v[0].util_mean = 50;
	/* no samples taken: its mean weighs nothing */
	v[1].samples = 0;
	v[1].util_mean = 90;
	v[1].idle_seconds = 10;
	/* only a peak */
	v[2].util_peak = 70;
	sched_telemetry_combine(&out, v, gpus, 3);
	CHECK_INT_EQ(out.nodes, 3);
	CHECK_INT_EQ(out.samples, 0);
	CHECK(near(out.util_mean, 50));
	CHECK(near(out.util_peak, 70));
	CHECK(out.power_mean_w < 0 && out.power_peak_w < 0 && out.memory_used_peak_mb < 0);
	CHECK(near(out.idle_gpu_seconds, 20));

	/* nothing known at all: everything unknown */
	sched_telemetry_init(&v[0]);
	sched_telemetry_combine(&out, v, gpus, 1);
	CHECK(out.samples < 0 && out.util_mean < 0 && out.util_peak < 0 &&
	      out.idle_gpu_seconds < 0);
	sched_telemetry_combine(&out, v, gpus, 0);
	CHECK_INT_EQ(out.nodes, 0);
}

TY_TEST(stored_forms_keep_the_known_fields_rounded)
{
	struct sched_telemetry v;
	json_t *o;
	char *s;

	sched_telemetry_init(&v);
	v.samples = 3;
	v.util_mean = 12.34567;
	v.idle_seconds = 0;
	o = sched_telemetry_node_json(&v);
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	CHECK_STR_EQ(s, "{\"idle_seconds\":0.0,\"samples\":3,\"util_mean\":12.346}");
	free(s);
	json_decref(o);

	v.nodes = 1;
	v.idle_gpu_seconds = 7;
	o = sched_telemetry_attempt_json(&v);
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
	CHECK_STR_EQ(s,
		     "{\"idle_gpu_seconds\":7.0,\"memory_used_peak_mb\":null,\"nodes_reported\":1,"
		     "\"power_mean_w\":null,\"power_peak_w\":null,\"samples\":3,"
		     "\"util_mean\":12.346,\"util_peak\":null}");
	free(s);
	json_decref(o);
}

TY_TEST(heartbeat_entries_keep_well_formed_idle_fields)
{
	static const struct {
		const char *json;
		bool entry, ok;
		double idle, util;
	} cases[] = {
	    {"{'job':1,'attempt':2}", true, true, -1, -1},
	    {"{'job':1,'attempt':2,'idle_seconds':1860,'gpu_util':0.4}", true, true, 1860, 0.4},
	    {"{'job':1,'attempt':2,'idle_seconds':0,'gpu_util':100}", true, true, 0, 100},
	    {"{'job':1,'attempt':2,'idle_seconds':'long','gpu_util':3}", true, false, -1, 3},
	    {"{'job':1,'attempt':2,'idle_seconds':5,'gpu_util':250}", true, false, 5, -1},
	    {"{'job':1,'attempt':2,'idle_seconds':-1}", true, false, -1, -1},
	    {"{'job':0,'attempt':2,'idle_seconds':5}", false, true, 5, -1},
	    {"{'job':1,'attempt':3000000000}", false, true, -1, -1},
	    {"{'job':'1','attempt':2}", false, true, -1, -1},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *e = parse_json(cases[i].json), *r;
		double idle, util;

		ty_test_context("%s", cases[i].json);
		CHECK(sched_running_fields(&idle, &util, e) == cases[i].ok);
		CHECK(near(idle, cases[i].idle) && near(util, cases[i].util));
		r = sched_running_entry(e, "n1");
		CHECK((r != NULL) == cases[i].entry);
		if (r) {
			CHECK(json_integer_value(json_object_get(r, "job")) == 1);
			CHECK((json_object_get(r, "idle_seconds") != NULL) == (cases[i].idle >= 0));
			CHECK((json_object_get(r, "gpu_util") != NULL) == (cases[i].util >= 0));
			CHECK_INT_EQ(json_object_size(r),
				     2 + (cases[i].idle >= 0) + (cases[i].util >= 0));
		}
		json_decref(r);
		json_decref(e);
	}
}

TY_TEST(only_entries_idle_a_minute_are_candidates)
{
	json_t *running =
	    parse_json("[{'job':1,'attempt':1,'idle_seconds':59.9},"
		       "{'job':2,'attempt':1,'idle_seconds':60},"
		       "{'job':3,'attempt':1},{'job':4,'attempt':2,'idle_seconds':7200}]");
	json_t *beats = json_array(), *none = json_array(), *rec;

	CHECK_INT_EQ(sched_idle_candidates(beats, "n1", 3, running), 2);
	/* a heartbeat without idle attempts still says it is the node's newest */
	CHECK_INT_EQ(sched_idle_candidates(beats, "n2", 4, none), 0);
	CHECK_INT_EQ(json_array_size(beats), 2);
	rec = json_array_get(beats, 0);
	CHECK_STR_EQ(json_string_value(json_object_get(rec, "node")), "n1");
	CHECK_INT_EQ(json_integer_value(json_object_get(rec, "ord")), 3);
	CHECK_INT_EQ(json_array_size(json_object_get(rec, "running")), 2);
	CHECK_INT_EQ(json_integer_value(json_object_get(
			 json_array_get(json_object_get(rec, "running"), 1), "job")),
		     4);
	json_decref(beats);
	json_decref(none);
	json_decref(running);
}
