/* api/ webhook pure parts: event names, backoff with jitter, the signature header. */
#include "api.h"
#include "ty_test.h"

#include <stdint.h>
#include <string.h>

TY_TEST(event_names)
{
	static const struct {
		const char *name;
		bool ok;
	} rows[] = {
	    {"*", true},		{"job.pending", true},	  {"job.scheduled", true},
	    {"job.starting", true},	{"job.running", true},	  {"job.preempting", true},
	    {"job.succeeded", true},	{"job.failed", true},	  {"job.cancelled", true},
	    {"job.stopped", true},	{"ping", false},	  {"job.", false},
	    {"job.*", false},		{"job.Running", false},	  {"running", false},
	    {"job.running ", false},	{"", false},		  {"**", false},
	    {"job.cancel_requested", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("'%s'", rows[i].name);
		CHECK(api_webhook_event_ok(rows[i].name) == rows[i].ok);
	}
}

TY_TEST(backoff_doubles_to_the_cap_with_equal_jitter)
{
	static const struct {
		int base, cap, attempts;
		uint32_t rnd;
		int64_t want;
	} rows[] = {
	    /* rnd 0: the lower end, d/2 */
	    {1000, 60000, 1, 0, 500},
	    {1000, 60000, 2, 0, 1000},
	    {1000, 60000, 3, 0, 2000},
	    {1000, 60000, 7, 0, 30000},
	    {1000, 60000, 8, 0, 30000}, /* 128 s capped at 60 s */
	    {1000, 60000, 1000, 0, 30000}, /* no overflow however many */
	    /* rnd = the span: the upper end, d */
	    {1000, 60000, 1, 500, 1000},
	    {1000, 60000, 3, 2000, 4000},
	    /* rnd wraps modulo the span + 1 */
	    {1000, 60000, 1, 501, 500},
	    {100, 400, 4, 0, 200},
	    {100, 400, 4, 200, 400},
	    {1, 1, 5, 7, 1},
	    {0, 0, 3, 9, 0},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("base %d cap %d after %d attempts, rnd %u", rows[i].base,
				rows[i].cap, rows[i].attempts, rows[i].rnd);
		CHECK_INT_EQ(api_webhook_backoff_ms(rows[i].base, rows[i].cap, rows[i].attempts,
						    rows[i].rnd),
			     rows[i].want);
	}
}

TY_TEST(signature_header)
{
	char out[API_WEBHOOK_SIG_LEN];
	const char *body = "{\"id\":1,\"type\":\"ping\"}";

	/* printf '%s' '1700000000.<body>' | openssl dgst -sha256 -hmac whsec-test-secret-16 */
	CHECK_INT_EQ(api_webhook_signature(out, sizeof(out), "whsec-test-secret-16", 1700000000LL,
					   body, strlen(body)),
		     0);
	CHECK_STR_EQ(out, "t=1700000000,v1=b3f19d5ba8c3fa054ee4d971f67e2143575fb1003c68ea819328a"
			  "ee85c96c083");
	/* a buffer too small is an error, never a cut signature */
	CHECK(api_webhook_signature(out, 40, "whsec-test-secret-16", 1700000000LL, body,
				    strlen(body)) != 0);
}
