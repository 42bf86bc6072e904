/* executor/labels.c: --labels parsing. */
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
