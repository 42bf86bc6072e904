/*
 * executor/telemetry.c: an attempt's account of its GPUs (means, peaks,
 * idle stretches, GPUs that cannot be read), the JSON it reports, and the
 * sampler and --sample-for against the NVML stand-in (TY_FAKE_NVML,
 * tests/unit/executor/fake_nvml.c, driven by the control file
 * FAKE_NVML_FILE): NVML is held only between a request to hold it and the
 * next request to let it go.
 */
#include "exec.h"
#include "ty_test.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define UUID1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

static void near_at(double got, double want, const char *what, const char *file, int line)
{
	double d = got - want;

	if (d > 1e-6 || d < -1e-6)
		ty_test_fail_at(file, line, "%s is %.9g, not %.9g", what, got, want);
}
#define CHECK_NEAR(got, want) near_at((got), (want), #got, __FILE__, __LINE__)

/* ---- the account (pure) ---- */

#define LOST (-1) /* a GPU that cannot be read in a sample */
#define MAXG 3

struct step {
	int64_t at_ms;
	double util[MAXG]; /* LOST: not read */
};

static void feed(struct exec_telem *t, const struct step *s, size_t nsteps, size_t ngpus,
		 double idle_pct, int64_t interval_ms)
{
	for (size_t k = 0; k < nsteps; k++) {
		struct exec_gpu_reading r[MAXG] = {0};

		for (size_t i = 0; i < ngpus; i++) {
			r[i].ok = s[k].util[i] != LOST;
			r[i].util = r[i].ok ? s[k].util[i] : 0;
			if (!r[i].ok)
				snprintf(r[i].error, sizeof(r[i].error), "GPU is lost (error 15)");
		}
		exec_telem_add(t, r, ngpus, s[k].at_ms, idle_pct, interval_ms);
	}
}

TY_TEST(means_peaks_and_idle_stretches)
{
	static const struct {
		const char *what;
		size_t ngpus;
		double idle_pct;
		struct step steps[6];
		size_t nsteps;
		int64_t samples;
		double mean, peak, last, idle, run;
	} rows[] = {
	    {"busy throughout: nothing idle",
	     2, 5, {{1000, {90, 70}}, {1100, {90, 70}}, {1200, {90, 70}}}, 3, 3, 80, 90, 80, 0, 0},
	    {"busy, then idle: the time since the busy sample counts",
	     1, 5, {{1000, {90}}, {1100, {0}}, {1200, {0}}, {1300, {3}}}, 4, 4, 23.25, 90, 3, 0.3,
	     0.3},
	    {"a busy sample ends the stretch, the total goes on",
	     1, 5, {{1000, {0}}, {1100, {0}}, {1200, {50}}, {1300, {0}}, {1400, {0}}}, 5, 5, 10,
	     50, 0, 0.3, 0.2},
	    {"one busy GPU keeps the attempt busy",
	     2, 5, {{1000, {0, 0}}, {1100, {0, 60}}, {1200, {0, 0}}}, 3, 3, 10, 60, 0, 0.1, 0.1},
	    {"below the threshold, not at it",
	     1, 5, {{1000, {5}}, {1100, {5}}, {1200, {4.9}}}, 3, 3, 4.9666666667, 5, 4.9, 0.1, 0.1},
	    {"a threshold of 0 makes nothing idle",
	     1, 0, {{1000, {0}}, {1100, {0}}}, 2, 2, 0, 0, 0, 0, 0},
	    {"the first sample alone: idle for 0 seconds",
	     1, 5, {{1000, {0}}}, 1, 1, 0, 0, 0, 0, 0},
	    {"a gap longer than two intervals counts as one",
	     1, 5, {{1000, {0}}, {6000, {0}}, {6100, {0}}}, 3, 3, 0, 0, 0, 0.2, 0.2},
	    {"a clock that goes back counts nothing",
	     1, 5, {{1000, {0}}, {900, {0}}, {1000, {0}}}, 3, 3, 0, 0, 0, 0.1, 0.1},
	    {"a GPU lost midway: read ones count, a sample with one unread is never idle",
	     2, 5, {{1000, {90, 80}}, {1100, {0, LOST}}, {1200, {0, LOST}}}, 3, 3, 42.5, 90, 0, 0,
	     0},
	    {"a sample with no GPU read is not counted and ends the stretch",
	     2, 5, {{1000, {0, 0}}, {1100, {0, 0}}, {1200, {LOST, LOST}}, {1300, {0, 0}}}, 4, 3, 0,
	     0, 0, 0.2, 0.1},
	    {"every GPU lost from the start: no sample",
	     2, 5, {{1000, {LOST, LOST}}, {1100, {LOST, LOST}}}, 2, 0, 0, 0, 0, 0, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_telem t = {0};
		json_t *j;

		ty_test_context("%s", rows[i].what);
		feed(&t, rows[i].steps, rows[i].nsteps, rows[i].ngpus, rows[i].idle_pct, 100);
		CHECK_INT_EQ(t.samples, rows[i].samples);
		CHECK_INT_EQ(t.gpus, (int)rows[i].ngpus);
		CHECK_NEAR(t.util_n ? t.util_sum / (double)t.util_n : 0, rows[i].mean);
		CHECK_NEAR(t.util_peak, rows[i].peak);
		CHECK_NEAR(t.last_util, rows[i].last);
		CHECK_NEAR(t.idle_s, rows[i].idle);
		CHECK_NEAR(t.idle_run_s, rows[i].run);
		j = exec_telem_json(&t);
		if (rows[i].samples == 0) {
			CHECK(j == NULL);
		} else {
			REQUIRE(j != NULL);
			CHECK_INT_EQ(json_integer_value(json_object_get(j, "samples")),
				     rows[i].samples);
			CHECK_NEAR(json_real_value(json_object_get(j, "util_peak")), rows[i].peak);
			CHECK_NEAR(json_real_value(json_object_get(j, "idle_seconds")),
				   rows[i].idle);
		}
		json_decref(j);
	}
}

TY_TEST(memory_and_power_peaks_and_means)
{
	struct exec_gpu_reading a[2] = {{.ok = true, .util = 50, .memory_used_mb = 1000,
					 .has_power = true, .power_w = 200.5},
					{.ok = true, .util = 30, .memory_used_mb = 3000,
					 .has_power = false}};
	struct exec_gpu_reading b[2] = {{.ok = true, .util = 70, .memory_used_mb = 2000,
					 .has_power = true, .power_w = 300.25},
					{.ok = false}};
	struct exec_telem t = {0};
	json_t *j;
	char *text;

	exec_telem_add(&t, a, 2, 5000, 5, 5000);
	exec_telem_add(&t, b, 2, 10000, 5, 5000);
	REQUIRE((j = exec_telem_json(&t)) != NULL);
	text = json_dumps(j, JSON_COMPACT);
	/* the wire format, exactly (docs/dispatch.md): power per GPU, only where NVML gave it */
	CHECK_STR_EQ(text, "{\"samples\":2,\"gpus\":2,\"util_mean\":50.0,\"util_peak\":70.0,"
			   "\"memory_used_peak_mb\":3000,\"power_mean_w\":250.375,"
			   "\"power_peak_w\":300.25,\"idle_seconds\":0.0}");
	free(text);
	json_decref(j);

	/* without a power reading at all: 0 */
	memset(&t, 0, sizeof(t));
	exec_telem_add(&t, &a[1], 1, 5000, 5, 5000);
	REQUIRE((j = exec_telem_json(&t)) != NULL);
	CHECK_NEAR(json_real_value(json_object_get(j, "power_mean_w")), 0);
	CHECK_NEAR(json_real_value(json_object_get(j, "power_peak_w")), 0);
	json_decref(j);
}

TY_TEST(a_heartbeat_entry_says_the_current_stretch)
{
	struct exec_gpu_reading busy = {.ok = true, .util = 90}, idle = {.ok = true, .util = 1};
	struct exec_telem t = {0};
	json_t *e = json_pack("{s:i, s:i}", "job", 1, "attempt", 1);

	/* nothing sampled: nothing said */
	exec_telem_running(e, &t);
	CHECK(json_object_get(e, "idle_seconds") == NULL);
	CHECK(json_object_get(e, "gpu_util") == NULL);
	exec_telem_add(&t, &busy, 1, 1000, 5, 1000);
	exec_telem_running(e, &t);
	CHECK_NEAR(json_real_value(json_object_get(e, "idle_seconds")), 0);
	CHECK_NEAR(json_real_value(json_object_get(e, "gpu_util")), 90);
	exec_telem_add(&t, &idle, 1, 2000, 5, 1000);
	exec_telem_add(&t, &idle, 1, 3500, 5, 1000);
	exec_telem_running(e, &t);
	CHECK_NEAR(json_real_value(json_object_get(e, "idle_seconds")), 2.5);
	CHECK_NEAR(json_real_value(json_object_get(e, "gpu_util")), 1);
	exec_telem_add(&t, &busy, 1, 4500, 5, 1000);
	exec_telem_running(e, &t);
	CHECK_NEAR(json_real_value(json_object_get(e, "idle_seconds")), 0);
	exec_telem_running(NULL, &t); /* an entry that could not be built */
	json_decref(e);
}

/* ---- the sampler against the stand-in ---- */

static const char *env(const char *var)
{
	const char *p = getenv(var);

	if (!p || !*p)
		FAIL("%s is not set (tests/executor.cmake sets it)", var);
	return p ? p : "";
}

/* Write the control file (ty_test_jf quoting); FAKE_NVML_FILE names it. */
static void control(const char *json)
{
	static char path[64];
	FILE *f;
	int fd;

	if (!*path) {
		snprintf(path, sizeof(path), "/tmp/ty-fake-nvml-XXXXXX");
		if ((fd = mkstemp(path)) < 0)
			FAIL("mkstemp: %s", strerror(errno));
		else
			close(fd);
	}
	REQUIRE((f = fopen(path, "w")) != NULL);
	fputs(ty_test_jf("%s", json), f);
	fclose(f);
	setenv("FAKE_NVML_FILE", path, 1);
}

/* nvmlInit_v2 calls the stand-in has seen without their nvmlShutdown. */
static int open_inits(void)
{
	void *h = dlopen(env("TY_FAKE_NVML"), RTLD_NOW | RTLD_NOLOAD);
	int *n = h ? (int *)dlsym(h, "fake_nvml_open") : NULL;
	int v = n ? *n : -1;

	if (h)
		dlclose(h);
	return v;
}

#define GPUS(u0, extra1)                                                                           \
	"{'gpus':[{'uuid':'" UUID0 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"           \
	"'pci_bus_id':'00000000:18:00.0','utilization':" #u0 ",'memory_used_mb':1000,"             \
	"'power_mw':250500},"                                                                      \
	"{'uuid':'" UUID1 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"                    \
	"'pci_bus_id':'00000000:3b:00.0','utilization':10,'memory_used_mb':2048" extra1 "}]}"

struct seen {
	int calls;
	struct exec_sample last;
	struct exec_gpu_reading r[4];
};

static void on_sample(void *arg, const struct exec_sample *s)
{
	struct seen *seen = arg;

	seen->calls++;
	seen->last = *s;
	if (s->gpus && s->ngpus <= 4)
		memcpy(seen->r, s->gpus, s->ngpus * sizeof(*s->gpus));
}

/* One request, the loop run until its callback. */
static void request(uv_loop_t *loop, struct exec_sampler *s, struct seen *seen, bool hold)
{
	int calls = seen->calls;

	REQUIRE(exec_sampler_request(s, hold));
	CHECK(exec_sampler_busy(s));
	CHECK(!exec_sampler_request(s, hold)); /* one at a time */
	while (seen->calls == calls)
		uv_run(loop, UV_RUN_ONCE);
	CHECK(!exec_sampler_busy(s));
}

/* The inventory the executor would have: the probe through the same stand-in. */
static void probe(struct hw_inventory *inv)
{
	struct ty_err err = {0};

	if (hw_nvml_probe(inv, env("TY_FAKE_NVML"), NULL, &err))
		FAIL("probe: %s", err.msg);
	REQUIRE_INT_EQ(inv->ngpus, 2);
}

TY_TEST(the_sampler_holds_nvml_only_between_hold_and_release)
{
	/* held open so that the stand-in's counter outlives each dlclose */
	void *hold = dlopen(env("TY_FAKE_NVML"), RTLD_NOW);
	struct hw_inventory inv = {0};
	struct exec_sampler *s = NULL;
	struct ty_err err = {0};
	struct seen seen = {0};
	uv_loop_t loop;

	REQUIRE(hold != NULL);
	REQUIRE_INT_EQ(uv_loop_init(&loop), 0);
	control(GPUS(90, ""));
	probe(&inv);
	REQUIRE_INT_EQ(open_inits(), 0);
	REQUIRE_INT_EQ(exec_sampler_new(&s, &loop, env("TY_FAKE_NVML"), &inv, on_sample, &seen,
					&err),
		       0);
	CHECK(!exec_sampler_held(s));

	/* the first attempt starts: loaded, initialised, every GPU read */
	request(&loop, s, &seen, true);
	CHECK_STR_EQ(seen.last.error, "");
	CHECK(seen.last.held);
	CHECK(exec_sampler_held(s));
	CHECK_INT_EQ(open_inits(), 1);
	REQUIRE_INT_EQ(seen.last.ngpus, 2);
	CHECK(seen.r[0].ok);
	CHECK_NEAR(seen.r[0].util, 90);
	CHECK_INT_EQ(seen.r[0].memory_used_mb, 1000);
	CHECK(seen.r[0].has_power);
	CHECK_NEAR(seen.r[0].power_w, 250.5);
	CHECK_NEAR(seen.r[1].util, 10);
	CHECK_INT_EQ(seen.r[1].memory_used_mb, 2048);
	CHECK(seen.last.at_ms > 0);

	/* the load changes under a held NVML; a second sample does not initialise again */
	control(GPUS(0, ",'lost':true"));
	request(&loop, s, &seen, true);
	CHECK_INT_EQ(open_inits(), 1);
	REQUIRE_INT_EQ(seen.last.ngpus, 2);
	CHECK(seen.r[0].ok);
	CHECK_NEAR(seen.r[0].util, 0);
	/* a lost GPU is a reading that failed, never a crash */
	CHECK(!seen.r[1].ok);
	CHECK_STR_EQ(seen.r[1].error, "nvmlDeviceGetHandleByUUID: GPU is lost (error 15)");

	/* the last attempt ended: shut down and unloaded */
	request(&loop, s, &seen, false);
	CHECK(!seen.last.held);
	CHECK(seen.last.gpus == NULL);
	CHECK(!exec_sampler_held(s));
	CHECK_INT_EQ(open_inits(), 0);
	/* and again for the next one */
	control(GPUS(55, ""));
	request(&loop, s, &seen, true);
	CHECK_INT_EQ(open_inits(), 1);
	CHECK_NEAR(seen.r[0].util, 55);
	CHECK(seen.r[1].ok);

	/* closed while a request is in flight: no callback, NVML let go when it completes */
	REQUIRE(exec_sampler_request(s, true));
	exec_sampler_close(s);
	CHECK_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT_EQ(open_inits(), 0);
	CHECK_INT_EQ(seen.calls, 4);
	CHECK_INT_EQ(uv_loop_close(&loop), 0);
	hw_inventory_clear(&inv);
	dlclose(hold);
}

TY_TEST(nvml_that_cannot_be_had_is_an_error_in_the_sample)
{
	void *hold = dlopen(env("TY_FAKE_NVML"), RTLD_NOW);
	struct hw_inventory inv = {0};
	struct exec_sampler *s = NULL;
	struct ty_err err = {0};
	struct seen seen = {0};
	uv_loop_t loop;

	REQUIRE(hold != NULL);
	REQUIRE_INT_EQ(uv_loop_init(&loop), 0);
	control(GPUS(90, ""));
	probe(&inv);

	/* the driver went away after the start probe */
	control("{'init_error':9,'gpus':[]}");
	REQUIRE_INT_EQ(exec_sampler_new(&s, &loop, env("TY_FAKE_NVML"), &inv, on_sample, &seen,
					&err),
		       0);
	request(&loop, s, &seen, true);
	CHECK(!seen.last.held);
	CHECK(seen.last.gpus == NULL);
	CHECK_STR_EQ(seen.last.error,
		     ty_test_strf("NVML '%s': nvmlInit_v2: Driver Not Loaded (error 9)",
				  env("TY_FAKE_NVML")));
	CHECK_INT_EQ(open_inits(), 0);
	/* it comes back: the next request works */
	control(GPUS(90, ""));
	request(&loop, s, &seen, true);
	CHECK_STR_EQ(seen.last.error, "");
	CHECK(seen.last.held);
	CHECK_INT_EQ(open_inits(), 1);
	/* closed while held and idle: shut down at once */
	exec_sampler_close(s);
	CHECK_INT_EQ(open_inits(), 0);

	/* a library that cannot be loaded */
	REQUIRE_INT_EQ(exec_sampler_new(&s, &loop, "/nonexistent/libnvidia-ml.so.1", &inv,
					on_sample, &seen, &err),
		       0);
	request(&loop, s, &seen, true);
	CHECK(!seen.last.held);
	CHECK(strstr(seen.last.error, "cannot load '/nonexistent/libnvidia-ml.so.1'") != NULL);
	/* letting go of nothing is fine */
	request(&loop, s, &seen, false);
	CHECK_STR_EQ(seen.last.error, "");
	exec_sampler_close(s);
	exec_sampler_close(NULL);
	CHECK_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
	CHECK_INT_EQ(uv_loop_close(&loop), 0);
	hw_inventory_clear(&inv);
	dlclose(hold);
}

/* ---- --sample-for ---- */

/* exec_telemetry_sample_for into a file; its lines in *lines (scratch), their count. */
static int sample_for(int *rc, char ***lines, const struct hw_inventory *inv, const char *lib,
		      struct ty_err *err)
{
	char *buf = NULL, *save = NULL, *line;
	size_t len = 0;
	int n = 0;
	FILE *f = open_memstream(&buf, &len);

	REQUIRE(f != NULL);
	*rc = exec_telemetry_sample_for(f, lib, inv, 1, 250, 5, err);
	fclose(f);
	*lines = ty_test_alloc(64 * sizeof(char *));
	for (line = strtok_r(buf, "\n", &save); line && n < 63; line = strtok_r(NULL, "\n", &save))
		(*lines)[n++] = ty_test_strf("%s", line);
	free(buf);
	return n;
}

TY_TEST(sample_for_prints_a_line_per_sample_and_a_summary)
{
	void *hold = dlopen(env("TY_FAKE_NVML"), RTLD_NOW);
	struct hw_inventory inv = {0};
	struct ty_err err = {0};
	json_t *j, *g;
	char **lines;
	int rc, n;

	REQUIRE(hold != NULL);
	control(GPUS(90, ""));
	probe(&inv);
	control(GPUS(90, ",'lost':true"));
	n = sample_for(&rc, &lines, &inv, env("TY_FAKE_NVML"), &err);
	CHECK_INT_EQ(rc, 0);
	CHECK_INT_EQ(open_inits(), 0);
	/* a sample at 0, 250, 500, 750 and 1000 ms, then the summary */
	REQUIRE_INT_EQ(n, 6);
	REQUIRE((j = json_loads(lines[0], 0, NULL)) != NULL);
	CHECK(json_integer_value(json_object_get(j, "t_ms")) < 250);
	g = json_array_get(json_object_get(j, "gpus"), 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(g, "gpu")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(g, "uuid")), UUID0);
	CHECK_NEAR(json_real_value(json_object_get(g, "util")), 90);
	CHECK_INT_EQ(json_integer_value(json_object_get(g, "memory_used_mb")), 1000);
	CHECK_NEAR(json_real_value(json_object_get(g, "power_w")), 250.5);
	g = json_array_get(json_object_get(j, "gpus"), 1);
	CHECK_STR_EQ(json_string_value(json_object_get(g, "error")),
		     "nvmlDeviceGetHandleByUUID: GPU is lost (error 15)");
	json_decref(j);
	REQUIRE((j = json_loads(lines[5], 0, NULL)) != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(j, "summary"), "samples")),
		     5);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(j, "summary"), "counted")),
		     5);
	g = json_array_get(json_object_get(json_object_get(j, "summary"), "gpus"), 0);
	CHECK_NEAR(json_real_value(json_object_get(g, "util_mean")), 90);
	CHECK_NEAR(json_real_value(json_object_get(g, "util_peak")), 90);
	CHECK_STR_EQ(json_string_value(json_object_get(g, "name")), "NVIDIA H100 80GB HBM3");
	g = json_array_get(json_object_get(json_object_get(j, "summary"), "gpus"), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(g, "samples")), 0);
	CHECK(json_object_get(g, "util_mean") == NULL);
	json_decref(j);

	/* every GPU lost: the lines all the same, and TY_ENOTFOUND */
	control("{'gpus':[{'uuid':'" UUID0 "','lost':true},{'uuid':'" UUID1 "','lost':true}]}");
	n = sample_for(&rc, &lines, &inv, env("TY_FAKE_NVML"), &err);
	CHECK_INT_EQ(rc, TY_ENOTFOUND);
	CHECK_STR_EQ(err.msg, "no GPU could be read in 5 sample(s)");
	CHECK_INT_EQ(n, 6);
	CHECK_INT_EQ(open_inits(), 0);
	ty_err_clear(&err);

	/* no driver: nothing printed */
	control("{'init_error':9}");
	n = sample_for(&rc, &lines, &inv, env("TY_FAKE_NVML"), &err);
	CHECK_INT_EQ(rc, TY_EUNAVAIL);
	CHECK(strstr(err.msg, "nvmlInit_v2: Driver Not Loaded (error 9)") != NULL);
	CHECK_INT_EQ(n, 0);
	CHECK_INT_EQ(open_inits(), 0);
	hw_inventory_clear(&inv);
	dlclose(hold);
}
