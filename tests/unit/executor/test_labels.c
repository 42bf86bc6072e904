/* executor/labels.c: --labels parsing, the expected-GPUs label and register's fault. */
#include "exec.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(labels_parse)
{
	static const struct {
		const char *spec;
		const char *json; /* canonical JSON with ' for ", or NULL for an error */
		const char *err;  /* substring of the error */
	} rows[] = {
	    {"", "{}", NULL},
	    {"zone=a", "{'zone':'a'}", NULL},
	    {"zone=us-east-1a,rack=r1,block=nvl.3",
	     "{'block':'nvl.3','rack':'r1','zone':'us-east-1a'}", NULL},
	    {"topology.k8s.io/zone=x", "{'topology.k8s.io/zone':'x'}", NULL},
	    {"spot=", "{'spot':''}", NULL},
	    {"zone", NULL, "not key=value"},
	    {"=a", NULL, "1-63 characters"},
	    {"zone=a,", NULL, "empty label"},
	    {",zone=a", NULL, "empty label"},
	    {"zone=a,,rack=b", NULL, "empty label"},
	    {"zone=a,zone=b", NULL, "given twice"},
	    {"zone=a b", NULL, "value may only hold"},
	    {"zone=a/b", NULL, "value may only hold"},
	    {"-zone=a", NULL, "starting alphanumeric"},
	    {"zo ne=a", NULL, "key 'zo ne' may only hold"},
	    {"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk=a", NULL,
	     "1-63 characters"},
	    {"k=vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv", NULL, "over 63"},
	    {"zone=a,pool=spot", "{'pool':'spot','zone':'a'}", NULL},
	    {"pool=on-demand,rack=r2,block=b1",
	     "{'block':'b1','pool':'on-demand','rack':'r2'}", NULL},
	    {"pool=Spot", NULL, "label pool 'Spot' is not spot or on-demand"},
	    {"pool=", NULL, "label pool '' is not spot or on-demand"},
	    {"pool=reserved", NULL, "label pool 'reserved' is not spot or on-demand"},
	    {"trainyard.io/expected-gpus=8,zone=a", "{'trainyard.io/expected-gpus':'8','zone':'a'}",
	     NULL},
	    {"trainyard.io/expected-gpus=0", "{'trainyard.io/expected-gpus':'0'}", NULL},
	    {"trainyard.io/expected-gpus=1024", "{'trainyard.io/expected-gpus':'1024'}", NULL},
	    {"trainyard.io/expected-gpus=eight", NULL,
	     "label trainyard.io/expected-gpus 'eight' is not a number of GPUs from 0 to 1024"},
	    {"trainyard.io/expected-gpus=", NULL, "label trainyard.io/expected-gpus '' is not"},
	    {"trainyard.io/expected-gpus=-1", NULL, "label trainyard.io/expected-gpus '-1' is not"},
	    {"trainyard.io/expected-gpus=8.0", NULL, "'8.0' is not a number of GPUs"},
	    {"trainyard.io/expected-gpus=1025", NULL, "'1025' is not a number of GPUs"},
	    {"trainyard.io/expected-gpus=99999999999999999999", NULL, "is not a number of GPUs"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct ty_err err = {0};
		json_t *obj = (json_t *)1;
		int rc;

		ty_test_context("'%s'", rows[i].spec);
		rc = exec_labels_parse(&obj, rows[i].spec, &err);
		if (rows[i].json) {
			char *got;

			REQUIRE_INT_EQ(rc, 0);
			got = json_dumps(obj, JSON_COMPACT | JSON_SORT_KEYS);
			CHECK_STR_EQ(got, ty_test_jf("%s", rows[i].json));
			free(got);
			json_decref(obj);
		} else {
			CHECK_INT_EQ(rc, TY_EINVAL);
			CHECK(obj == NULL);
			if (!strstr(err.msg, rows[i].err))
				FAIL("message '%s' lacks '%s'", err.msg, rows[i].err);
		}
	}
}

TY_TEST(expected_gpus_label)
{
	static const struct {
		const char *labels; /* JSON with ' for " */
		int rc, want;
	} rows[] = {
	    {"{}", 0, 0},
	    {"{'zone':'a'}", 0, 0},
	    {"{'trainyard.io/expected-gpus':'8'}", 0, 8},
	    {"{'trainyard.io/expected-gpus':'08'}", 0, 8},
	    {"{'trainyard.io/expected-gpus':'0'}", 0, 0},
	    {"{'trainyard.io/expected-gpus':'1024'}", 0, 1024},
	    {"{'trainyard.io/expected-gpus':'1025'}", TY_EINVAL, 0},
	    {"{'trainyard.io/expected-gpus':' 8'}", TY_EINVAL, 0},
	    {"{'trainyard.io/expected-gpus':'+8'}", TY_EINVAL, 0},
	    {"{'trainyard.io/expected-gpus':'8 '}", TY_EINVAL, 0},
	    {"{'trainyard.io/expected-gpus':''}", TY_EINVAL, 0},
	    /* only the exact key: a look-alike is just a label */
	    {"{'expected-gpus':'x','trainyard.io/expected_gpus':'y'}", 0, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		json_t *labels = json_loads(ty_test_jf("%s", rows[i].labels), 0, NULL);
		struct ty_err err = {0};
		int n = -1;

		ty_test_context("%s", rows[i].labels);
		REQUIRE(labels != NULL);
		CHECK_INT_EQ(exec_labels_expected_gpus(&n, labels, &err), rows[i].rc);
		CHECK_INT_EQ(n, rows[i].want);
		if (rows[i].rc && !strstr(err.msg, "label trainyard.io/expected-gpus '"))
			FAIL("message '%s' does not name the label", err.msg);
		json_decref(labels);
	}
}

TY_TEST(expect_fault)
{
	static const char lost[] = "GPU 3: nvmlDeviceGetUUID: GPU is lost (error 15)";
	static const struct {
		int expected;
		size_t found;
		const char *gpu_fault, *want;
	} rows[] = {
	    /* no expectation: nothing is a fault, as before */
	    {0, 0, NULL, ""},
	    {0, 7, lost, ""},
	    {-1, 0, "", ""},
	    /* as expected, or more */
	    {8, 8, NULL, ""},
	    {8, 8, "", ""},
	    {8, 9, NULL, ""},
	    {1, 1024, NULL, ""},
	    /* fewer */
	    {8, 7, NULL, "found 7 of 8 expected GPUs"},
	    {8, 0, "", "found 0 of 8 expected GPUs"},
	    {8, 7, lost, "found 7 of 8 expected GPUs; GPU 3: nvmlDeviceGetUUID: GPU is lost (error 15)"},
	    {1024, 1023, NULL, "found 1023 of 1024 expected GPUs"},
	    /* enough, but one the probe counted could not be read */
	    {8, 8, lost, "found 8 GPUs (8 expected), but GPU 3: nvmlDeviceGetUUID: GPU is lost "
			 "(error 15)"},
	    {4, 8, lost, "found 8 GPUs (4 expected), but GPU 3: nvmlDeviceGetUUID: GPU is lost "
			 "(error 15)"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char out[EXEC_FAULT_MAX];

		ty_test_context("expected %d, found %zu, gpu_fault '%s'", rows[i].expected,
				rows[i].found, rows[i].gpu_fault ? rows[i].gpu_fault : "(null)");
		memset(out, 'x', sizeof(out));
		exec_expect_fault(out, sizeof(out), rows[i].expected, rows[i].found,
				  rows[i].gpu_fault);
		CHECK_STR_EQ(out, rows[i].want);
	}
	ty_test_context(NULL);

	/* the inventory's longest gpu_fault fits beside the sentence; a short buffer is cut */
	{
		char gpu_fault[HW_FAULT_MAX], out[EXEC_FAULT_MAX], small[16];

		memset(gpu_fault, 'g', sizeof(gpu_fault) - 1);
		gpu_fault[sizeof(gpu_fault) - 1] = '\0';
		exec_expect_fault(out, sizeof(out), 1024, 1023, gpu_fault);
		CHECK(strncmp(out, "found 1023 of 1024 expected GPUs; ggg", 37) == 0);
		CHECK_INT_EQ((long long)strlen(out), (long long)(34 + sizeof(gpu_fault) - 1));
		exec_expect_fault(small, sizeof(small), 8, 7, lost);
		CHECK_STR_EQ(small, "found 7 of 8 ex");
		exec_expect_fault(small, 0, 8, 7, lost); /* writes nothing */
	}
}
