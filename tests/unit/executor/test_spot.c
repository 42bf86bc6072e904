/* executor/spot.c: the providers' notice answers, in their real formats. */
#include "exec.h"
#include "ty_test.h"

#include <string.h>

#define NOW 1795361400000LL /* 2026-11-22T15:30:00Z */

TY_TEST(spot_parse)
{
	static const struct {
		enum exec_spot_provider p;
		long status;
		const char *body; /* with ' for " */
		int rc;
		bool notice;
		int64_t deadline_ms;
		const char *action;
		const char *id; /* the notice's id, or a substring of the error */
	} rows[] = {
	    /* AWS IMDSv2 spot/instance-action: 404 until a notice */
	    {EXEC_SPOT_AWS, 200, "{'action': 'terminate', 'time': '2026-11-22T15:32:00Z'}", 0, true,
	     1795361520000LL, "terminate", "terminate 2026-11-22T15:32:00Z"},
	    {EXEC_SPOT_AWS, 200, "{'action':'stop','time':'2026-11-22T15:32:00Z'}", 0, true,
	     1795361520000LL, "stop", "stop 2026-11-22T15:32:00Z"},
	    {EXEC_SPOT_AWS, 200, "{'action':'hibernate','time':'2024-02-29T23:59:59.250Z'}", 0,
	     true, 1709251199250LL, "hibernate", "hibernate 2024-02-29T23:59:59.250Z"},
	    {EXEC_SPOT_AWS, 404,
	     "<?xml version='1.0' encoding='iso-8859-1'?>\n<html><title>404 - Not Found</title>"
	     "</html>",
	     0, false, 0, "", ""},
	    {EXEC_SPOT_AWS, 401, "", TY_EAUTH, false, 0, "",
	     "aws spot/instance-action: the IMDSv2"},
	    {EXEC_SPOT_AWS, 503, "", TY_EUNAVAIL, false, 0, "", "unexpected HTTP status 503"},
	    {EXEC_SPOT_AWS, 200, "{'action':'terminate','time':", TY_EPARSE, false, 0, "",
	     "aws spot/instance-action: the answer is not JSON"},
	    {EXEC_SPOT_AWS, 200, "['terminate']", TY_EPARSE, false, 0, "", "not a JSON object"},
	    {EXEC_SPOT_AWS, 200, "{'action':'reboot','time':'2026-11-22T15:32:00Z'}", TY_EPARSE,
	     false, 0, "", "aws spot/instance-action: 'action' is not"},
	    {EXEC_SPOT_AWS, 200, "{'time':'2026-11-22T15:32:00Z'}", TY_EPARSE, false, 0, "",
	     "'action' is not"},
	    {EXEC_SPOT_AWS, 200, "{'action':'terminate','time':'2026-11-22 15:32:00'}", TY_EPARSE,
	     false, 0, "", "aws spot/instance-action: 'time' is not an RFC 3339"},
	    {EXEC_SPOT_AWS, 200, "{'action':'terminate','time':'2026-02-30T15:32:00Z'}", TY_EPARSE,
	     false, 0, "", "'time' is not"},
	    {EXEC_SPOT_AWS, 200, "{'action':'terminate','time':'2026-11-22T15:32:00+01:00'}",
	     TY_EPARSE, false, 0, "", "'time' is not"},
	    {EXEC_SPOT_AWS, 200, "{'action':'terminate','time':1795361520}", TY_EPARSE, false, 0,
	     "", "'time' is not"},
	    {EXEC_SPOT_AWS, 200, "", TY_EPARSE, false, 0, "", "not JSON"},
	    /* GCP instance/preempted: TRUE or FALSE, about 30 s of notice */
	    {EXEC_SPOT_GCP, 200, "TRUE", 0, true, NOW + 30000, "preempt", "preempted"},
	    {EXEC_SPOT_GCP, 200, "TRUE\n", 0, true, NOW + 30000, "preempt", "preempted"},
	    {EXEC_SPOT_GCP, 200, "FALSE", 0, false, 0, "", ""},
	    {EXEC_SPOT_GCP, 200, "true", TY_EPARSE, false, 0, "",
	     "gcp instance/preempted: the answer is not \"TRUE\" or \"FALSE\""},
	    {EXEC_SPOT_GCP, 200, "<html>Moved</html>", TY_EPARSE, false, 0, "", "not \"TRUE\""},
	    {EXEC_SPOT_GCP, 200, "", TY_EPARSE, false, 0, "", "not \"TRUE\""},
	    {EXEC_SPOT_GCP, 403, "Missing Metadata-Flavor:Google header.", TY_EUNAVAIL, false, 0,
	     "", "gcp instance/preempted: unexpected HTTP status 403"},
	    /* Azure Scheduled Events */
	    {EXEC_SPOT_AZURE, 200,
	     "{'DocumentIncarnation':2,'Events':[{'EventId':'C7061BAC-AFDC-4513-B24B-AA5F13A16123',"
	     "'EventStatus':'Scheduled','EventType':'Preempt','ResourceType':'VirtualMachine',"
	     "'Resources':['spot-vm-1'],'NotBefore':'Sun, 22 Nov 2026 15:30:40 GMT',"
	     "'Description':'','EventSource':'Platform','DurationInSeconds':-1}]}",
	     0, true, 1795361440000LL, "Preempt", "C7061BAC-AFDC-4513-B24B-AA5F13A16123"},
	    {EXEC_SPOT_AZURE, 200,
	     "{'DocumentIncarnation':3,'Events':[{'EventId':'E1','EventStatus':'Started',"
	     "'EventType':'Preempt','ResourceType':'VirtualMachine','Resources':['spot-vm-1'],"
	     "'NotBefore':''}]}",
	     0, true, NOW, "Preempt", "E1"},
	    {EXEC_SPOT_AZURE, 200,
	     "{'DocumentIncarnation':1,'Events':[{'EventId':'R1','EventStatus':'Scheduled',"
	     "'EventType':'Reboot','ResourceType':'VirtualMachine','Resources':['spot-vm-1'],"
	     "'NotBefore':'Sun, 22 Nov 2026 15:45:00 GMT','DurationInSeconds':-1}]}",
	     0, false, 0, "", ""},
	    {EXEC_SPOT_AZURE, 200, "{'DocumentIncarnation':0,'Events':[]}", 0, false, 0, "", ""},
	    {EXEC_SPOT_AZURE, 200,
	     "{'DocumentIncarnation':5,'Events':["
	     "{'EventId':'F1','EventStatus':'Scheduled','EventType':'Freeze',"
	     "'NotBefore':'Sun, 22 Nov 2026 15:30:05 GMT'},"
	     "{'EventId':'P2','EventStatus':'Scheduled','EventType':'Preempt',"
	     "'NotBefore':'Sun, 22 Nov 2026 15:31:07 GMT'},"
	     "{'EventId':'P1','EventStatus':'Scheduled','EventType':'Preempt',"
	     "'NotBefore':'Sun, 22 Nov 2026 15:30:40 GMT'}]}",
	     0, true, 1795361440000LL, "Preempt", "P1"},
	    {EXEC_SPOT_AZURE, 200,
	     "{'Events':[{'EventId':'P3','EventStatus':'Completed','EventType':'Preempt',"
	     "'NotBefore':''}]}",
	     0, false, 0, "", ""},
	    {EXEC_SPOT_AZURE, 200,
	     "{'Events':[{'EventId':'P4','EventStatus':'Scheduled','EventType':'Preempt',"
	     "'NotBefore':'2026-11-22T15:30:40Z'}]}",
	     TY_EPARSE, false, 0, "",
	     "azure scheduledevents: 'NotBefore' of Preempt event 0 is not an RFC 1123"},
	    {EXEC_SPOT_AZURE, 200,
	     "{'Events':[{'EventId':'P5','EventStatus':'Scheduled','EventType':'Preempt'}]}",
	     TY_EPARSE, false, 0, "", "Preempt event 0 has no 'NotBefore'"},
	    {EXEC_SPOT_AZURE, 200, "{'DocumentIncarnation':0}", TY_EPARSE, false, 0, "",
	     "azure scheduledevents: 'Events' is not an array"},
	    {EXEC_SPOT_AZURE, 200, "{'Events':[{'EventId':'X'}]}", TY_EPARSE, false, 0, "",
	     "event 0 has no 'EventType'"},
	    {EXEC_SPOT_AZURE, 200, "{'Events':[", TY_EPARSE, false, 0, "",
	     "azure scheduledevents: the answer is not JSON"},
	    {EXEC_SPOT_AZURE, 400,
	     "{'error':'Bad request. Required metadata header not specified'}", TY_EUNAVAIL, false,
	     0, "", "azure scheduledevents: unexpected HTTP status 400"},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_spot_notice n;
		struct ty_err err = {0};
		const char *body = ty_test_jf("%s", rows[i].body);
		int rc;

		ty_test_context("row %zu: %s %ld '%s'", i, exec_spot_provider_name(rows[i].p),
				rows[i].status, rows[i].body);
		memset(&n, 0x5a, sizeof(n));
		rc = exec_spot_parse(&n, rows[i].p, rows[i].status, body, strlen(body), NOW, &err);
		CHECK_INT_EQ(rc, rows[i].rc);
		CHECK_INT_EQ(n.notice, rows[i].notice);
		CHECK_INT_EQ(n.deadline_ms, rows[i].deadline_ms);
		CHECK_STR_EQ(n.action, rows[i].action);
		if (rc) {
			CHECK_STR_EQ(n.id, "");
			if (!strstr(err.msg, rows[i].id))
				FAIL("message '%s' lacks '%s'", err.msg, rows[i].id);
		} else {
			CHECK_STR_EQ(n.id, rows[i].id);
			CHECK_STR_EQ(err.msg, "");
			CHECK(n.notice == (n.detail[0] != '\0'));
		}
	}
	ty_test_context(NULL);
}

TY_TEST(spot_body_not_terminated)
{
	/* the body is len bytes, not a C string: what follows is not read */
	static const char buf[] = "FALSEGARBAGE";
	struct exec_spot_notice n;

	CHECK_INT_EQ(exec_spot_parse(&n, EXEC_SPOT_GCP, 200, buf, 5, NOW, NULL), 0);
	CHECK(!n.notice);
	CHECK_INT_EQ(exec_spot_parse(&n, EXEC_SPOT_GCP, 200, NULL, 0, NOW, NULL), TY_EPARSE);
	CHECK_INT_EQ(exec_spot_parse(&n, EXEC_SPOT_NONE, 200, "TRUE", 4, NOW, NULL), TY_EINVAL);
}

TY_TEST(spot_providers)
{
	static const struct {
		const char *name;
		int p;
		const char *base;
	} rows[] = {
	    {"none", EXEC_SPOT_NONE, ""},
	    {"aws", EXEC_SPOT_AWS, "http://169.254.169.254"},
	    {"gcp", EXEC_SPOT_GCP, "http://metadata.google.internal"},
	    {"azure", EXEC_SPOT_AZURE, "http://169.254.169.254"},
	    {"AWS", -1, NULL},
	    {"", -1, NULL},
	    {NULL, -1, NULL},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("'%s'", rows[i].name ? rows[i].name : "(null)");
		CHECK_INT_EQ(exec_spot_provider_parse(rows[i].name), rows[i].p);
		if (rows[i].p >= 0) {
			CHECK_STR_EQ(exec_spot_provider_name((enum exec_spot_provider)rows[i].p),
				     rows[i].name);
			CHECK_STR_EQ(exec_spot_default_base((enum exec_spot_provider)rows[i].p),
				     rows[i].base);
		}
	}
	ty_test_context(NULL);
}
