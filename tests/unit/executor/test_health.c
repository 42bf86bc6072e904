/*
 * executor/health.c: the Xid table (built-in entries, an operator's file
 * over them, bad lines), what readings of a GPU and of the HCAs' ports say,
 * and the node's list of conditions (what it keeps, clears, reports).
 */
#include "hw.h"
#include "ty_buf.h"
#include "ty_metrics.h"
#include "ty_test.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UUID0 "GPU-11111111-2222-3333-4444-555555555555"

static struct hw_xid_table *defaults(void)
{
	struct hw_xid_table *t = NULL;
	struct ty_err err = {0};

	REQUIRE_INT_EQ(hw_xid_table_new(&t, &err), 0);
	if (hw_xid_table_add(t, hw_xid_defaults, "xid.conf", &err))
		FAIL("the built-in table does not parse: %s", err.msg);
	return t;
}

static const char *tmpfile_with(const char *text, size_t len)
{
	char *path = ty_test_strf("/tmp/ty-xid-XXXXXX");
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	REQUIRE(write(fd, text, len) == (ssize_t)len);
	close(fd);
	return path;
}

TY_TEST(xid_defaults_follow_nvidias_catalog)
{
	static const struct {
		unsigned xid;
		enum hw_xid_action action;
	} rows[] = {
	    {13, HW_XID_IGNORE},   {31, HW_XID_IGNORE},	  {43, HW_XID_IGNORE},
	    {45, HW_XID_IGNORE},   {48, HW_XID_FATAL},	  {62, HW_XID_FATAL},
	    {63, HW_XID_FATAL},	   {64, HW_XID_FATAL},	  {74, HW_XID_FATAL},
	    {79, HW_XID_FATAL},	   {92, HW_XID_DEGRADED}, {94, HW_XID_FATAL},
	    {95, HW_XID_FATAL},	   {119, HW_XID_FATAL},	  {120, HW_XID_FATAL},
	    {140, HW_XID_FATAL},
	};
	struct hw_xid_table *t = defaults();
	const char *desc;

	CHECK(hw_xid_table_count(t) >= 20);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("Xid %u", rows[i].xid);
		CHECK_INT_EQ(hw_xid_lookup(t, rows[i].xid, &desc), rows[i].action);
		CHECK(desc != NULL && strlen(desc) > 5);
	}
	ty_test_context(NULL);
	CHECK(strstr((hw_xid_lookup(t, 79, &desc), desc), "fallen off the bus") != NULL);
	/* not in the table: degraded, no description */
	CHECK_INT_EQ(hw_xid_lookup(t, 4242, &desc), HW_XID_DEGRADED);
	CHECK(desc == NULL);
	CHECK_INT_EQ(hw_xid_lookup(t, 1ULL << 40, &desc), HW_XID_DEGRADED);
	CHECK_INT_EQ(hw_xid_lookup(NULL, 79, &desc), HW_XID_DEGRADED);
	hw_xid_table_free(t);
}

TY_TEST(an_xid_file_adds_and_overrides)
{
	struct hw_xid_table *t = defaults();
	struct ty_err err = {0};
	size_t n = hw_xid_table_count(t);
	const char *path = tmpfile_with("# ours\n"
					"79\tdegraded\tour lab's flaky riser, not the GPU  \r\n"
					"\n"
					"   13 fatal   in our fleet it is the hardware\n"
					"999 ignore a vendor's own\n",
					strlen("# ours\n"
					       "79\tdegraded\tour lab's flaky riser, not the GPU  \r\n"
					       "\n"
					       "   13 fatal   in our fleet it is the hardware\n"
					       "999 ignore a vendor's own\n"));
	const char *desc;

	REQUIRE_INT_EQ(hw_xid_table_add_file(t, path, &err), 0);
	CHECK_INT_EQ(hw_xid_table_count(t), n + 1);
	CHECK_INT_EQ(hw_xid_lookup(t, 79, &desc), HW_XID_DEGRADED);
	CHECK_STR_EQ(desc, "our lab's flaky riser, not the GPU");
	CHECK_INT_EQ(hw_xid_lookup(t, 13, &desc), HW_XID_FATAL);
	CHECK_STR_EQ(desc, "in our fleet it is the hardware");
	CHECK_INT_EQ(hw_xid_lookup(t, 999, &desc), HW_XID_IGNORE);
	CHECK_INT_EQ(hw_xid_lookup(t, 48, &desc), HW_XID_FATAL); /* the rest stays */
	unlink(path);
	hw_xid_table_free(t);
}

TY_TEST(a_bad_xid_line_names_file_and_line_and_adds_nothing)
{
	static const struct {
		const char *text, *want;
	} rows[] = {
	    {"abc fatal x\n", "f:1: 'abc' is not an Xid (1 to 65535)"},
	    {"0 fatal x\n", "f:1: '0' is not an Xid"},
	    {"65536 fatal x\n", "f:1: '65536' is not an Xid"},
	    {"-1 fatal x\n", "f:1: '-1' is not an Xid"},
	    {"79fatal x\n", "f:1: '79fatal' is not an Xid"},
	    {"# c\n\n79 deadly x\n", "f:3: Xid 79: 'deadly' is not fatal, degraded or ignore"},
	    {"79 fatal ok\n80 fatal\n", "f:2: Xid 80: no description after 'fatal'"},
	    {"79 fatal   \t\n", "f:1: Xid 79: no description after 'fatal'"},
	    {"79\n", "f:1: Xid 79: '' is not fatal, degraded or ignore"},
	};
	struct hw_xid_table *t = defaults();
	size_t n = hw_xid_table_count(t);
	const char *desc;

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};

		ty_test_context("%s", rows[i].text);
		CHECK_INT_EQ(hw_xid_table_add(t, rows[i].text, "f", &err), TY_EINVAL);
		if (!strstr(err.msg, rows[i].want))
			FAIL("message \"%s\" lacks \"%s\"", err.msg, rows[i].want);
	}
	ty_test_context(NULL);
	/* "79 fatal ok" before a bad line was not added either */
	CHECK_INT_EQ(hw_xid_table_count(t), n);
	hw_xid_lookup(t, 79, &desc);
	CHECK(strcmp(desc, "ok") != 0);
	{
		struct ty_err err = {0};
		char line[1100], desc_long[HW_XID_DESC_MAX + 10];

		memset(line, 'a', sizeof(line) - 1);
		line[sizeof(line) - 1] = '\0';
		CHECK_INT_EQ(hw_xid_table_add(t, line, "f", &err), TY_EINVAL);
		CHECK(strstr(err.msg, "f:1: line longer than") != NULL);
		memset(desc_long, 'd', sizeof(desc_long) - 1);
		desc_long[sizeof(desc_long) - 1] = '\0';
		ty_err_clear(&err);
		CHECK_INT_EQ(hw_xid_table_add(t, ty_test_strf("7 fatal %s", desc_long), "f", &err),
			     TY_EINVAL);
		CHECK(strstr(err.msg, "f:1: Xid 7: the description is longer than") != NULL);
	}
	{
		struct ty_err err = {0};

		CHECK_INT_EQ(hw_xid_table_add_file(t, "/nonexistent/xids", &err), TY_EIO);
		CHECK(strstr(err.msg, "/nonexistent/xids") != NULL);
	}
	{
		struct ty_err err = {0};
		const char *path = tmpfile_with("79 fatal a\0b\n", 13);

		CHECK_INT_EQ(hw_xid_table_add_file(t, path, &err), TY_EINVAL);
		CHECK(strstr(err.msg, "NUL") != NULL);
		unlink(path);
	}
	{
		/* a file's path is its name in errors */
		struct ty_err err = {0};
		const char *path = tmpfile_with("79 fatal ok\n\n79 oops x\n", 23);

		CHECK_INT_EQ(hw_xid_table_add_file(t, path, &err), TY_EINVAL);
		CHECK(strstr(err.msg, ty_test_strf("%s:3: ", path)) != NULL);
		unlink(path);
	}
	CHECK_INT_EQ(hw_xid_table_count(t), n);
	hw_xid_table_free(t);
}

static struct hw_gpu gpu0(void)
{
	struct hw_gpu g = {.index = 0, .uuid = UUID0};

	return g;
}

TY_TEST(an_xid_event_is_judged_by_the_table)
{
	struct hw_xid_table *t = defaults();
	struct hw_gpu g = gpu0();
	struct hw_condition c;

	REQUIRE(hw_xid_judge(&c, t, &g, 79));
	CHECK_INT_EQ(c.kind, PROTO_CONDITION_XID);
	CHECK_INT_EQ(c.severity, PROTO_SEVERITY_FATAL);
	CHECK_INT_EQ(c.code, 79);
	CHECK_INT_EQ(c.gpu, 0);
	CHECK_STR_EQ(c.gpu_uuid, UUID0);
	CHECK_STR_EQ(c.evidence, "Xid 79 on GPU 0 (" UUID0 "): GPU has fallen off the bus");
	CHECK_INT_EQ(c.hold_ms, 0);
	/* the application's own: nothing */
	CHECK(!hw_xid_judge(&c, t, &g, 13));
	CHECK(!hw_xid_judge(&c, t, &g, 31));
	/* unknown: degraded, held a while */
	REQUIRE(hw_xid_judge(&c, t, &g, 4242));
	CHECK_INT_EQ(c.severity, PROTO_SEVERITY_DEGRADED);
	CHECK_INT_EQ(c.code, 4242);
	CHECK_INT_EQ(c.hold_ms, HW_HOLD_MS);
	CHECK(strstr(c.evidence, "Xid 4242 on GPU 0 (" UUID0 "): not in the Xid table") != NULL);
	REQUIRE(hw_xid_judge(&c, t, &g, 92));
	CHECK_INT_EQ(c.severity, PROTO_SEVERITY_DEGRADED);
	hw_xid_table_free(t);
}

/* A reading with links 0 and 1 active, counters at zero. */
static struct hw_gpu_reading healthy(void)
{
	struct hw_gpu_reading r;

	memset(&r, 0, sizeof(r));
	r.ecc_known = r.remap_known = r.retired_known = r.reasons_known = true;
	r.nlinks = 2;
	for (int l = 0; l < 2; l++)
		r.links[l] = (struct hw_link_reading){true, true, true, {0, 0, 0, 0}};
	return r;
}

TY_TEST(readings_make_conditions)
{
	struct hw_gpu g = gpu0();
	struct hw_gpu_reading start = healthy(), prev = healthy(), cur;
	struct hw_condition out[PROTO_CONDITION_KIND_COUNT];

	/* healthy: nothing; the first reading (no start, no prev) too */
	cur = healthy();
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, NULL, NULL, &cur), 0);
	/* the SW power cap is normal under load */
	cur.clock_reasons = 0x4 | 0x1;
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);

	/* lost: that alone */
	cur = healthy();
	cur.lost = true;
	cur.remap_pending = true;
	snprintf(cur.lost_call, sizeof(cur.lost_call), "nvmlDeviceGetTotalEccErrors");
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_GPU_LOST);
	CHECK_INT_EQ(out[0].severity, PROTO_SEVERITY_FATAL);
	CHECK_STR_EQ(out[0].evidence, "GPU 0 (" UUID0 ") is lost: nvmlDeviceGetTotalEccErrors "
				      "answered GPU is lost");

	/* the uncorrected volatile counter rising; not without a previous reading */
	cur = healthy();
	prev.ecc_dbe = 1;
	cur.ecc_dbe = 3;
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_ECC_DBE);
	CHECK_INT_EQ(out[0].severity, PROTO_SEVERITY_FATAL);
	CHECK(strstr(out[0].evidence, "rose from 1 to 3") != NULL);
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, NULL, &cur), 0);
	prev.ecc_known = false;
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);
	prev = healthy();

	/* row remapping and retired pages: a reset is needed, fatal */
	cur = healthy();
	cur.remap_pending = cur.remap_failed = cur.retired_pending = true;
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 3);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_ROW_REMAP_FAILED);
	CHECK_INT_EQ(out[1].kind, PROTO_CONDITION_ROW_REMAP_PENDING);
	CHECK_INT_EQ(out[2].kind, PROTO_CONDITION_RETIRED_PAGES_PENDING);
	for (int i = 0; i < 3; i++)
		CHECK_INT_EQ(out[i].severity, PROTO_SEVERITY_FATAL);
	cur.remap_known = cur.retired_known = false; /* not supported: no evidence */
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);

	/* clock event reasons */
	cur = healthy();
	cur.clock_reasons = 0x40 | 0x8;
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_THERMAL_SLOWDOWN);
	CHECK_INT_EQ(out[0].severity, PROTO_SEVERITY_DEGRADED);
	CHECK(strstr(out[0].evidence, "HW thermal slowdown") != NULL);
	cur.clock_reasons = 0x20;
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_THERMAL_SLOWDOWN);
	cur.clock_reasons = 0x80 | 0x8;
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_POWER_SLOWDOWN);
	CHECK(strstr(out[0].evidence, "HW power brake") != NULL);
	cur.clock_reasons = 0x8; /* HW slowdown for no thermal reason */
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_POWER_SLOWDOWN);
	cur.reasons_known = false;
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);

	/* NVLink: a link active at start goes down; counters rising */
	cur = healthy();
	cur.links[1].active = false;
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_NVLINK_ERRORS);
	CHECK_INT_EQ(out[0].severity, PROTO_SEVERITY_DEGRADED);
	CHECK_STR_EQ(out[0].evidence, "GPU 0 (" UUID0 "): NVLink 1 down (active at start)");
	CHECK_INT_EQ(out[0].hold_ms, 0);
	/* inactive at start (not cabled, a single-GPU VM): nothing */
	start.links[1].active = false;
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);
	start = healthy();
	cur = healthy();
	cur.links[0].errors[2] = HW_NVLINK_ERRORS_PER_CHECK - 1; /* a few CRC errors: normal */
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 0);
	cur.links[0].errors[2] = HW_NVLINK_ERRORS_PER_CHECK;
	cur.links[1].errors[1] = 1; /* one recovery: never normal */
	REQUIRE_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 1);
	CHECK_STR_EQ(out[0].evidence,
		     "GPU 0 (" UUID0 "): NVLink 0: 100 CRC flit errors since the last check; "
		     "NVLink 1: 1 recovery errors since the last check");
	CHECK_INT_EQ(out[0].hold_ms, HW_HOLD_MS);
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, NULL, &cur), 0);

	/* everything at once, and no more than max */
	cur = healthy();
	prev.ecc_dbe = 0;
	cur.ecc_dbe = 1;
	cur.remap_pending = true;
	cur.clock_reasons = 0x40;
	cur.links[0].active = false;
	CHECK_INT_EQ(hw_health_judge(out, 16, &g, &start, &prev, &cur), 4);
	CHECK_INT_EQ(hw_health_judge(out, 2, &g, &start, &prev, &cur), 2);
	/* a GPU without a UUID is named by its index */
	g.uuid[0] = '\0';
	REQUIRE(hw_health_judge(out, 1, &g, &start, &prev, &cur) == 1);
	CHECK(strncmp(out[0].evidence, "GPU 0: ", 7) == 0);
}

TY_TEST(ports_make_conditions)
{
	struct hw_hca hcas[2];
	struct hw_condition out[8];

	memset(hcas, 0, sizeof(hcas));
	snprintf(hcas[0].name, sizeof(hcas[0].name), "mlx5_0");
	hcas[0].nports = 2;
	hcas[0].ports[0] = (struct hw_port){1, "ACTIVE", "InfiniBand", 200, -1};
	hcas[0].ports[1] = (struct hw_port){2, "DOWN", "InfiniBand", 200, -1};
	snprintf(hcas[1].name, sizeof(hcas[1].name), "mlx5_1");
	hcas[1].nports = 1;
	hcas[1].ports[0] = (struct hw_port){1, "ACTIVE", "Ethernet", 100, 3};

	REQUIRE_INT_EQ(hw_port_conditions(out, 8, hcas, 2, 0), 1);
	CHECK_INT_EQ(out[0].kind, PROTO_CONDITION_PORT_DOWN);
	CHECK_INT_EQ(out[0].severity, PROTO_SEVERITY_DEGRADED);
	CHECK_STR_EQ(out[0].port, "mlx5_0/2");
	CHECK_INT_EQ(out[0].gpu, -1);
	CHECK_STR_EQ(out[0].evidence, "mlx5_0 port 2 is DOWN (InfiniBand): NCCL does not use it");
	REQUIRE_INT_EQ(hw_port_conditions(out, 8, hcas, 2, 200), 2);
	CHECK_INT_EQ(out[1].kind, PROTO_CONDITION_PORT_RATE_LOW);
	CHECK_STR_EQ(out[1].port, "mlx5_1/1");
	CHECK_STR_EQ(out[1].evidence, "mlx5_1 port 1 runs at 100 Gb/s, below the expected 200 "
				      "Gb/s (--expect-port-gbps)");
	CHECK_INT_EQ(hw_port_conditions(out, 8, hcas, 2, 100), 1);
	CHECK_INT_EQ(hw_port_conditions(out, 1, hcas, 2, 200), 1);
	CHECK_INT_EQ(hw_port_conditions(out, 8, hcas, 0, 200), 0);
}

static struct hw_condition cond(enum proto_condition_kind k, enum proto_severity s, int gpu,
				const char *port, long long code, const char *evidence)
{
	struct hw_condition c;

	memset(&c, 0, sizeof(c));
	c.kind = k;
	c.severity = s;
	c.gpu = gpu;
	if (gpu >= 0)
		snprintf(c.gpu_uuid, sizeof(c.gpu_uuid), "GPU-%d", gpu);
	snprintf(c.port, sizeof(c.port), "%s", port ? port : "");
	c.code = code;
	snprintf(c.evidence, sizeof(c.evidence), "%s", evidence);
	return c;
}

static char *metrics_text(struct ty_metrics *m)
{
	struct ty_buf b = TY_BUF_INIT;
	char *s;

	REQUIRE_INT_EQ(ty_metrics_write(m, &b), 0);
	s = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	return s;
}

TY_TEST(the_list_keeps_fatal_ones_and_clears_degraded_ones)
{
	struct ty_metrics *m = ty_metrics_new();
	struct hw_conditions *l = NULL;
	struct ty_err err = {0};
	struct hw_condition xid = cond(PROTO_CONDITION_XID, PROTO_SEVERITY_FATAL, 0, NULL, 79,
				       "Xid 79 on GPU 0: gone"),
			    hot = cond(PROTO_CONDITION_THERMAL_SLOWDOWN, PROTO_SEVERITY_DEGRADED,
				       1, NULL, -1, "hot"),
			    port = cond(PROTO_CONDITION_PORT_DOWN, PROTO_SEVERITY_DEGRADED, -1,
					"mlx5_0/1", -1, "down"),
			    odd = cond(PROTO_CONDITION_XID, PROTO_SEVERITY_DEGRADED, 1, NULL, 4242,
				       "odd"),
			    got;
	json_t *j;
	size_t i;
	json_t *v;

	REQUIRE(m != NULL);
	REQUIRE_INT_EQ(hw_conditions_new(&l, m, &err), 0);
	odd.hold_ms = 1000;
	CHECK(hw_conditions_note(l, &xid, 100, &got));
	CHECK_INT_EQ(got.first_seen, 100);
	CHECK_INT_EQ(got.last_seen, 100);
	CHECK(!hw_conditions_note(l, &xid, 200, NULL)); /* the same one: seen again */
	CHECK(hw_conditions_note(l, &hot, 200, NULL));
	CHECK(hw_conditions_note(l, &port, 200, NULL));
	CHECK(hw_conditions_note(l, &odd, 200, NULL));
	/* another code is another condition */
	xid.code = 48;
	CHECK(hw_conditions_note(l, &xid, 250, NULL));
	xid.code = 79;
	CHECK_INT_EQ(hw_conditions_count(l), 5);

	/* every listed one is a condition as proto/proto.h says */
	REQUIRE((j = hw_conditions_json(l)) != NULL);
	REQUIRE_INT_EQ(json_array_size(j), 5);
	json_array_foreach(j, i, v)
	{
		struct ty_err e = {0};

		if (proto_condition_check(v, &e))
			FAIL("condition %zu: %s", i, e.msg);
	}
	v = json_array_get(j, 0);
	CHECK_STR_EQ(json_string_value(json_object_get(v, "kind")), "xid");
	CHECK_STR_EQ(json_string_value(json_object_get(v, "severity")), "fatal");
	CHECK_INT_EQ(json_integer_value(json_object_get(v, "gpu")), 0);
	CHECK_STR_EQ(json_string_value(json_object_get(v, "gpu_uuid")), "GPU-0");
	CHECK(json_is_null(json_object_get(v, "port")));
	CHECK_INT_EQ(json_integer_value(json_object_get(v, "code")), 79);
	CHECK_INT_EQ(json_integer_value(json_object_get(v, "first_seen")), 100);
	CHECK_INT_EQ(json_integer_value(json_object_get(v, "last_seen")), 200);
	v = json_array_get(j, 2);
	CHECK(json_is_null(json_object_get(v, "gpu")));
	CHECK(json_is_null(json_object_get(v, "gpu_uuid")));
	CHECK(json_is_null(json_object_get(v, "code")));
	CHECK_STR_EQ(json_string_value(json_object_get(v, "port")), "mlx5_0/1");
	json_decref(j);
	CHECK(strstr(metrics_text(m), "trainyard_executor_condition{kind=\"xid\",severity=\"fatal\","
				      "gpu=\"0\",port=\"\"} 1\n") != NULL);
	CHECK(strstr(metrics_text(m), "trainyard_executor_condition{kind=\"port_down\",severity="
				      "\"degraded\",gpu=\"\",port=\"mlx5_0/1\"} 1\n") != NULL);

	/* GPU 0's pass sees nothing: the fatal ones stay */
	CHECK_INT_EQ(hw_conditions_expire(l, 0, ~0u, NULL, 0, 300), 0);
	/* GPU 1's pass, the thermal kind only, still hot: stays, evidence updated */
	hot.evidence[0] = 'H';
	CHECK(!hw_conditions_note(l, &hot, 300, NULL));
	CHECK_INT_EQ(hw_conditions_expire(l, 1, 1u << PROTO_CONDITION_THERMAL_SLOWDOWN, &hot, 1, 300),
		     0);
	/* cooled down: cleared at once; the Xid is held until last_seen + hold */
	CHECK_INT_EQ(hw_conditions_expire(l, 1, ~0u, NULL, 0, 400), 1);
	CHECK_INT_EQ(hw_conditions_count(l), 4);
	CHECK(strstr(metrics_text(m), "kind=\"thermal_slowdown\",severity=\"degraded\",gpu=\"1\","
				      "port=\"\"} 0\n") != NULL);
	CHECK_INT_EQ(hw_conditions_expire(l, 1, ~0u, NULL, 0, 1199), 0);
	CHECK_INT_EQ(hw_conditions_expire(l, 1, ~0u, NULL, 0, 1200), 1);
	/* a port pass (any GPU, the port kinds) clears the port */
	CHECK_INT_EQ(hw_conditions_expire(l, -1, 1u << PROTO_CONDITION_PORT_DOWN, NULL, 0, 1300), 1);
	CHECK_INT_EQ(hw_conditions_count(l), 2);
	hw_conditions_free(l);
	ty_metrics_free(m);
}

TY_TEST(fatal_conditions_are_found_for_an_attempts_gpus)
{
	struct hw_conditions *l = NULL;
	struct ty_err err = {0};
	struct hw_condition c, on1 = cond(PROTO_CONDITION_XID, PROTO_SEVERITY_FATAL, 1, NULL, 79, "a"),
			       slow0 = cond(PROTO_CONDITION_THERMAL_SLOWDOWN, PROTO_SEVERITY_DEGRADED,
					    0, NULL, -1, "b"),
			       node = cond(PROTO_CONDITION_GPU_LOST, PROTO_SEVERITY_FATAL, -1, NULL,
					   -1, "c");
	const int gpus01[] = {0, 1}, gpus0[] = {0};

	REQUIRE_INT_EQ(hw_conditions_new(&l, NULL, &err), 0);
	CHECK(!hw_conditions_fatal_for(&c, l, gpus01, 2, 0));
	hw_conditions_note(l, &slow0, 1000, NULL);
	hw_conditions_note(l, &on1, 2000, NULL);
	/* degraded ones never count; another GPU's fatal one does not touch it */
	CHECK(!hw_conditions_fatal_for(&c, l, gpus0, 1, 0));
	REQUIRE(hw_conditions_fatal_for(&c, l, gpus01, 2, 0));
	CHECK_INT_EQ(c.code, 79);
	CHECK_STR_EQ(c.evidence, "a");
	/* first seen before the attempt began: not the attempt's */
	CHECK(hw_conditions_fatal_for(&c, l, gpus01, 2, 2000));
	CHECK(!hw_conditions_fatal_for(&c, l, gpus01, 2, 2001));
	CHECK(!hw_conditions_fatal_for(&c, l, NULL, 0, 0));
	/* the node's own fatal condition is every attempt's */
	hw_conditions_note(l, &node, 3000, NULL);
	REQUIRE(hw_conditions_fatal_for(&c, l, NULL, 0, 2500));
	CHECK_INT_EQ(c.kind, PROTO_CONDITION_GPU_LOST);
	CHECK(hw_conditions_fatal_for(&c, l, gpus0, 1, 0));
	hw_conditions_free(l);
	CHECK(!hw_conditions_fatal_for(&c, NULL, gpus0, 1, 0));
}
