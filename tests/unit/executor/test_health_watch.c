/*
 * executor/health_watch.c against the NVML stand-in (TY_FAKE_NVML,
 * tests/unit/executor/fake_nvml.c), whose control file the cases rewrite
 * while the watch runs: Xid events, ECC counters, a lost GPU, clock event
 * reasons, NVLink links; and the one NVML session it holds, shut down on
 * stop. Waits are generous and nothing is timed.
 */
#include "exec.h"
#include "ty_buf.h"
#include "ty_metrics.h"
#include "ty_test.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"
#define UUID1 "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
#define WAIT_MS 20000

static const char *lib(void)
{
	const char *p = getenv("TY_FAKE_NVML");

	if (!p || !*p) {
		FAIL("TY_FAKE_NVML is not set (tests/executor.cmake sets it)");
		ty_test_abort();
	}
	return p;
}

/*
 * Write the control file: two GPUs (gpu0 and gpu1 are the objects' extra
 * fields) and events. Each write is a byte longer than the last, so the
 * stand-in sees a change even within one tick of the file's clock.
 */
static void control(const char *gpu0, const char *gpu1, const char *events)
{
	static char path[64];
	static int writes;
	FILE *f;
	int fd;

	if (!*path) {
		snprintf(path, sizeof(path), "/tmp/ty-fake-nvml-watch-XXXXXX");
		if ((fd = mkstemp(path)) < 0)
			FAIL("mkstemp: %s", strerror(errno));
		else
			close(fd);
		setenv("FAKE_NVML_FILE", path, 1);
	}
	/* whole files only (a rename): the stand-in never reads half of one */
	REQUIRE((f = fopen(ty_test_strf("%s.tmp", path), "w")) != NULL);
	fputs(ty_test_jf("{'driver_version':'570.86.15','cuda_version':12080,'gpus':["
			 "{'uuid':'" UUID0 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"
			 "'pci_bus_id':'00000000:18:00.0','mig_mode':'disabled'%s%s},"
			 "{'uuid':'" UUID1 "','name':'NVIDIA H100 80GB HBM3','memory_mb':81559,"
			 "'pci_bus_id':'00000000:3B:00.0','mig_mode':'disabled'%s%s}],"
			 "'events':[%s]}",
			 *gpu0 ? "," : "", gpu0, *gpu1 ? "," : "", gpu1, events),
	      f);
	for (int i = 0; i <= writes; i++)
		fputc('\n', f);
	writes++;
	fclose(f);
	REQUIRE(rename(ty_test_strf("%s.tmp", path), path) == 0);
}

/* How many nvmlInit_v2 the stand-in has seen without their nvmlShutdown. */
static int open_inits(void)
{
	void *h = dlopen(lib(), RTLD_NOW | RTLD_NOLOAD);
	int *n = h ? (int *)dlsym(h, "fake_nvml_open") : NULL;
	int v = n ? *n : -1;

	if (h)
		dlclose(h);
	return v;
}

/* What the on_new callback saw (the watch's thread). */
static struct {
	pthread_mutex_t mu;
	int n;
	struct hw_condition last;
} seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void on_new(void *arg, const struct hw_condition *c)
{
	(void)arg;
	pthread_mutex_lock(&seen.mu);
	seen.n++;
	seen.last = *c;
	pthread_mutex_unlock(&seen.mu);
}

static int seen_n(void)
{
	int n;

	pthread_mutex_lock(&seen.mu);
	n = seen.n;
	pthread_mutex_unlock(&seen.mu);
	return n;
}

/* One running watch over the stand-in's GPUs, with its list and metrics. */
struct fixture {
	void *hold; /* keeps the stand-in (and its counter) loaded */
	struct hw_inventory inv;
	struct hw_xid_table *xids;
	struct hw_conditions *l;
	struct ty_metrics *m;
	struct exec_health *h;
};

static void start(struct fixture *f)
{
	struct ty_err err = {0};
	struct exec_health_opts o = {0};

	memset(f, 0, sizeof(*f));
	REQUIRE((f->hold = dlopen(lib(), RTLD_NOW)) != NULL);
	REQUIRE_INT_EQ(hw_nvml_probe(&f->inv, lib(), NULL, &err), 0);
	REQUIRE_INT_EQ((long long)f->inv.ngpus, 2);
	REQUIRE_INT_EQ(hw_xid_table_new(&f->xids, &err), 0);
	REQUIRE_INT_EQ(hw_xid_table_add(f->xids, hw_xid_defaults, "xid.conf", &err), 0);
	REQUIRE((f->m = ty_metrics_new()) != NULL);
	REQUIRE_INT_EQ(hw_conditions_new(&f->l, f->m, &err), 0);
	pthread_mutex_lock(&seen.mu);
	seen.n = 0;
	pthread_mutex_unlock(&seen.mu);
	o.nvml = lib();
	o.inventory = &f->inv;
	o.xids = f->xids;
	o.check_ms = 50;
	o.conditions = f->l;
	o.metrics = f->m;
	o.on_new = on_new;
	if (exec_health_start(&f->h, &o, &err))
		FAIL("the watch does not start: %s", err.msg);
	REQUIRE(f->h != NULL);
	CHECK_INT_EQ(exec_health_gpus(f->h), 2);
	CHECK_INT_EQ(open_inits(), 1); /* one session while it runs */
}

/* Wait until a pass that began now has ended. */
static void sync_pass(struct fixture *f)
{
	uint64_t t = exec_health_sync_request(f->h);
	int waited = 0;

	while (!exec_health_synced(f->h, t) && waited < WAIT_MS) {
		usleep(10000);
		waited += 10;
	}
	REQUIRE(exec_health_synced(f->h, t));
}

static void stop(struct fixture *f)
{
	exec_health_stop(f->h);
	f->h = NULL;
	/* the session is shut down: nvmlShutdown matched the nvmlInit_v2 */
	CHECK_INT_EQ(open_inits(), 0);
	hw_conditions_free(f->l);
	ty_metrics_free(f->m);
	hw_xid_table_free(f->xids);
	hw_inventory_clear(&f->inv);
	dlclose(f->hold);
}

/* The condition of kind (and code, when >= 0) on gpu, waiting for it; NULL after WAIT_MS. */
static json_t *wait_condition(struct fixture *f, const char *kind, int gpu, long long code)
{
	for (int waited = 0; waited <= WAIT_MS; waited += 10) {
		json_t *a = hw_conditions_json(f->l), *v;
		size_t i;

		REQUIRE(a != NULL);
		json_array_foreach(a, i, v)
		{
			struct ty_err err = {0};

			if (proto_condition_check(v, &err))
				FAIL("not a condition: %s", err.msg);
			if (!strcmp(json_string_value(json_object_get(v, "kind")), kind) &&
			    json_integer_value(json_object_get(v, "gpu")) == gpu &&
			    (code < 0 || json_integer_value(json_object_get(v, "code")) == code)) {
				json_incref(v);
				json_decref(a);
				return v;
			}
		}
		json_decref(a);
		usleep(10000);
	}
	return NULL;
}

static const char *metrics_text(struct fixture *f)
{
	struct ty_buf b = TY_BUF_INIT;
	const char *s;

	REQUIRE_INT_EQ(ty_metrics_write(f->m, &b), 0);
	s = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return s;
}

TY_TEST(xid_79_is_a_fatal_xid_condition_with_its_code)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f);
	sync_pass(&f);
	CHECK_INT_EQ(hw_conditions_count(f.l), 0);
	CHECK(strstr(metrics_text(&f), "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" UUID0 "\"} 0\n") !=
	      NULL);
	control("", "", "{'gpu':0,'xid':79}");
	REQUIRE((c = wait_condition(&f, "xid", 0, 79)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "gpu_uuid")), UUID0);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "evidence")),
		     "Xid 79 on GPU 0 (" UUID0 "): GPU has fallen off the bus");
	json_decref(c);
	CHECK_INT_EQ(seen_n(), 1);
	CHECK_INT_EQ(seen.last.code, 79);
	CHECK(strstr(metrics_text(&f), "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" UUID0 "\"} 79\n") !=
	      NULL);
	CHECK(strstr(metrics_text(&f), "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"" UUID1 "\"} 0\n") !=
	      NULL);
	CHECK(strstr(metrics_text(&f), "trainyard_executor_condition{kind=\"xid\",severity=\"fatal\","
				       "gpu=\"0\",port=\"\"} 1\n") != NULL);
	/* fatal: kept, pass after pass */
	sync_pass(&f);
	sync_pass(&f);
	CHECK_INT_EQ(hw_conditions_count(f.l), 1);
	stop(&f);
}

TY_TEST(the_applications_xid_13_makes_nothing)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f);
	sync_pass(&f);
	/* events come in order: once the marker (an unknown Xid on GPU 1) is in, 13 was judged */
	control("", "", "{'gpu':0,'xid':13},{'gpu':1,'xid':4242}");
	REQUIRE((c = wait_condition(&f, "xid", 1, 4242)) != NULL);
	json_decref(c);
	CHECK_INT_EQ(hw_conditions_count(f.l), 1);
	CHECK_INT_EQ(seen_n(), 1);
	/* counted as dcgm-exporter counts it, never a condition */
	CHECK(strstr(metrics_text(&f), "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"" UUID0 "\"} 13\n") !=
	      NULL);
	stop(&f);
}

TY_TEST(an_xid_not_in_the_table_is_degraded)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f);
	sync_pass(&f);
	control("", "", "{'gpu':1,'xid':4242}");
	REQUIRE((c = wait_condition(&f, "xid", 1, 4242)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "degraded");
	CHECK(strstr(json_string_value(json_object_get(c, "evidence")),
		     "Xid 4242 on GPU 1 (" UUID1 "): not in the Xid table") != NULL);
	json_decref(c);
	/* held for a while after it was seen: the next passes keep it */
	sync_pass(&f);
	CHECK_INT_EQ(hw_conditions_count(f.l), 1);
	stop(&f);
}

TY_TEST(uncorrected_ecc_errors_rising_are_fatal)
{
	struct fixture f;
	json_t *c;

	control("'ecc_dbe':2", "", ""); /* errors before the watch: not new */
	start(&f);
	sync_pass(&f);
	sync_pass(&f);
	CHECK_INT_EQ(hw_conditions_count(f.l), 0);
	control("'ecc_dbe':3", "", "");
	REQUIRE((c = wait_condition(&f, "ecc_dbe", 0, -1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK(strstr(json_string_value(json_object_get(c, "evidence")), "rose from 2 to 3") != NULL);
	json_decref(c);
	stop(&f);
}

TY_TEST(a_double_bit_ecc_event_is_fatal)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f);
	sync_pass(&f);
	control("", "", "{'gpu':1,'type':2,'data':0}");
	REQUIRE((c = wait_condition(&f, "ecc_dbe", 1, -1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "evidence")),
		     "GPU 1 (" UUID1 "): double-bit ECC error event");
	json_decref(c);
	stop(&f);
}

TY_TEST(a_lost_gpu_is_gpu_lost)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f);
	sync_pass(&f);
	control("", "'lost':true", "");
	REQUIRE((c = wait_condition(&f, "gpu_lost", 1, -1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "fatal");
	CHECK(strstr(json_string_value(json_object_get(c, "evidence")),
		     "GPU 1 (" UUID1 ") is lost: ") != NULL);
	json_decref(c);
	/* it stays, even when the GPU answers again (it needs a reset and a restart) */
	control("", "", "");
	sync_pass(&f);
	sync_pass(&f);
	CHECK_INT_EQ(hw_conditions_count(f.l), 1);
	CHECK_INT_EQ(seen_n(), 1);
	stop(&f);
}

TY_TEST(a_gpu_lost_before_the_watch_starts_is_gpu_lost)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f); /* the inventory has both */
	exec_health_stop(f.h);
	control("'lost':true", "", "");
	{
		struct ty_err err = {0};
		struct exec_health_opts o = {.nvml = lib(),
					     .inventory = &f.inv,
					     .xids = f.xids,
					     .check_ms = 50,
					     .conditions = f.l};

		REQUIRE_INT_EQ(exec_health_start(&f.h, &o, &err), 0);
	}
	REQUIRE((c = wait_condition(&f, "gpu_lost", 0, -1)) != NULL);
	CHECK(strstr(json_string_value(json_object_get(c, "evidence")),
		     "nvmlDeviceGetHandleByUUID answered GPU is lost") != NULL);
	json_decref(c);
	stop(&f);
}

TY_TEST(thermal_slowdown_is_degraded_and_clears)
{
	struct fixture f;
	json_t *c;

	control("", "", "");
	start(&f);
	sync_pass(&f);
	control("'clock_reasons':64", "", ""); /* HW thermal slowdown */
	REQUIRE((c = wait_condition(&f, "thermal_slowdown", 0, -1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "degraded");
	json_decref(c);
	CHECK(strstr(metrics_text(&f), "trainyard_executor_condition{kind=\"thermal_slowdown\","
				       "severity=\"degraded\",gpu=\"0\",port=\"\"} 1\n") != NULL);
	control("", "", "");
	for (int waited = 0; hw_conditions_count(f.l) && waited < WAIT_MS; waited += 10)
		usleep(10000);
	CHECK_INT_EQ(hw_conditions_count(f.l), 0);
	CHECK(strstr(metrics_text(&f), "trainyard_executor_condition{kind=\"thermal_slowdown\","
				       "severity=\"degraded\",gpu=\"0\",port=\"\"} 0\n") != NULL);
	stop(&f);
}

TY_TEST(an_nvlink_that_goes_down_is_degraded)
{
	struct fixture f;
	json_t *c;

	/* GPU 1's link 1 was never up: not news when it stays down */
	control("'nvlinks':[{'active':true},{'active':true}]",
		"'nvlinks':[{'active':true},{'active':false}]", "");
	start(&f);
	sync_pass(&f);
	sync_pass(&f);
	CHECK_INT_EQ(hw_conditions_count(f.l), 0);
	control("'nvlinks':[{'active':true},{'active':false}]",
		"'nvlinks':[{'active':true},{'active':false}]", "");
	REQUIRE((c = wait_condition(&f, "nvlink_errors", 0, -1)) != NULL);
	CHECK_STR_EQ(json_string_value(json_object_get(c, "severity")), "degraded");
	CHECK_STR_EQ(json_string_value(json_object_get(c, "evidence")),
		     "GPU 0 (" UUID0 "): NVLink 1 down (active at start)");
	json_decref(c);
	CHECK_INT_EQ(hw_conditions_count(f.l), 1);
	/* back up: cleared */
	control("'nvlinks':[{'active':true},{'active':true}]",
		"'nvlinks':[{'active':true},{'active':false}]", "");
	for (int waited = 0; hw_conditions_count(f.l) && waited < WAIT_MS; waited += 10)
		usleep(10000);
	CHECK_INT_EQ(hw_conditions_count(f.l), 0);
	stop(&f);
}

/* A GPU that reports no event types is still read: counters only. */
TY_TEST(a_gpu_without_events_is_still_read)
{
	struct fixture f;
	json_t *c;

	control("'events':0", "", "");
	start(&f);
	sync_pass(&f);
	/* GPU 0's Xid cannot be delivered; GPU 1's marker after it is */
	control("'events':0,'clock_reasons':32", "", "{'gpu':0,'xid':79},{'gpu':1,'xid':4242}");
	REQUIRE((c = wait_condition(&f, "xid", 1, 4242)) != NULL);
	json_decref(c);
	REQUIRE((c = wait_condition(&f, "thermal_slowdown", 0, -1)) != NULL);
	json_decref(c);
	CHECK_INT_EQ(hw_conditions_count(f.l), 2);
	stop(&f);
}

TY_TEST(the_watch_is_off_where_it_cannot_run)
{
	struct hw_inventory inv = {0};
	struct exec_health *h = (struct exec_health *)&inv; /* set to NULL by every refusal */
	struct hw_conditions *l = NULL;
	struct ty_err err = {0};
	void *hold = dlopen(lib(), RTLD_NOW);
	struct exec_health_opts o = {.nvml = lib(), .inventory = &inv, .check_ms = 50};

	REQUIRE(hold != NULL);
	REQUIRE_INT_EQ(hw_conditions_new(&l, NULL, &err), 0);
	o.conditions = l;
	control("", "", "");
	REQUIRE_INT_EQ(hw_nvml_probe(&inv, lib(), NULL, &err), 0);

	o.check_ms = 0;
	CHECK_INT_EQ(exec_health_start(&h, &o, &err), TY_EUNAVAIL);
	CHECK(h == NULL);
	CHECK(strstr(err.msg, "--health-check-ms is 0") != NULL);
	o.check_ms = 50;

	ty_err_clear(&err);
	o.nvml = "/nonexistent/libnvidia-ml.so.1";
	CHECK_INT_EQ(exec_health_start(&h, &o, &err), TY_EUNAVAIL);
	CHECK(strstr(err.msg, "/nonexistent/libnvidia-ml.so.1") != NULL);
	o.nvml = lib();

	/* NVML that loads but does not initialise: nothing left open */
	ty_err_clear(&err);
	{
		FILE *f = fopen(getenv("FAKE_NVML_FILE"), "w");

		REQUIRE(f != NULL);
		fputs("{\"init_error\": 9, \"gpus\": []}\n\n\n\n\n\n\n\n\n\n\n\n", f);
		fclose(f);
	}
	CHECK_INT_EQ(exec_health_start(&h, &o, &err), TY_EUNAVAIL);
	CHECK(strstr(err.msg, "nvmlInit_v2") != NULL);
	CHECK_INT_EQ(open_inits(), 0);

	ty_err_clear(&err);
	inv.simulated = true;
	CHECK_INT_EQ(exec_health_start(&h, &o, &err), TY_EUNAVAIL);
	CHECK(strstr(err.msg, "simulated") != NULL);
	inv.simulated = false;

	ty_err_clear(&err);
	snprintf(inv.gpu_source, sizeof(inv.gpu_source), "cudart");
	CHECK_INT_EQ(exec_health_start(&h, &o, &err), TY_EUNAVAIL);
	CHECK(strstr(err.msg, "cudart") != NULL);

	hw_inventory_clear(&inv);
	ty_err_clear(&err);
	CHECK_INT_EQ(exec_health_start(&h, &o, &err), TY_EUNAVAIL);
	CHECK(strstr(err.msg, "no GPU") != NULL);
	exec_health_stop(NULL);
	hw_conditions_free(l);
	dlclose(hold);
}
