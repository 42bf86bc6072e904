/* executor/spot.c: the providers' notice answers, in their real formats. */
#include "exec.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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
	    /* AWS sends UTC ("Z"), but any RFC 3339 offset means the same instant */
	    {EXEC_SPOT_AWS, 200, "{'action':'terminate','time':'2026-11-22T16:32:00+01:00'}", 0,
	     true, 1795361520000LL, "terminate", "terminate 2026-11-22T16:32:00+01:00"},
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

TY_TEST(spot_start_checks_options)
{
	static const struct {
		enum exec_spot_provider p;
		const char *url;
		int64_t poll_ms, timeout_ms;
		const char *err;
	} rows[] = {
	    {EXEC_SPOT_NONE, "http://127.0.0.1:1", 1000, 100, "no spot provider"},
	    {EXEC_SPOT_AWS, NULL, 1000, 100, "is not an http(s) URL"},
	    {EXEC_SPOT_AWS, "ftp://169.254.169.254", 1000, 100, "'ftp://169.254.169.254' is not"},
	    {EXEC_SPOT_GCP, "http://127.0.0.1:1", 0, 100, "must be positive"},
	    {EXEC_SPOT_AZURE, "http://127.0.0.1:1", 1000, 0, "must be positive"},
	};
	uv_loop_t loop;

	REQUIRE_INT_EQ(uv_loop_init(&loop), 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct exec_spot_opts o = {rows[i].p, rows[i].url, rows[i].poll_ms,
					   rows[i].timeout_ms};
		struct exec_spot *s = (struct exec_spot *)1;
		struct ty_err err = {0};

		ty_test_context("row %zu", i);
		CHECK_INT_EQ(exec_spot_start(&s, &loop, &o, NULL, NULL, &err), TY_EINVAL);
		CHECK(s == NULL);
		if (!strstr(err.msg, rows[i].err))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].err);
	}
	ty_test_context(NULL);
	exec_spot_close(NULL);
	CHECK_INT_EQ(uv_loop_close(&loop), 0);
}

/*
 * Closing with a request in flight (to a listener that never answers)
 * leaves nothing open on the loop, and ASan sees nothing leak.
 */
TY_TEST(spot_close_mid_request)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	struct exec_spot_opts o = {EXEC_SPOT_AWS, NULL, 60000, 5000};
	struct exec_spot *s = NULL;
	struct ty_err err = {0};
	uv_loop_t loop;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c;

	REQUIRE(fd >= 0);
	REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
	REQUIRE(listen(fd, 4) == 0);
	o.base_url = ty_test_strf("http://127.0.0.1:%d/", ntohs(sa.sin_port));
	REQUIRE_INT_EQ(uv_loop_init(&loop), 0);
	REQUIRE_INT_EQ(exec_spot_start(&s, &loop, &o, NULL, NULL, &err), 0);
	/* the first poll starts the token request: wait until it has connected */
	for (int i = 0; i < 200; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		uv_run(&loop, UV_RUN_NOWAIT);
		if (poll(&p, 1, 10) == 1)
			break;
	}
	REQUIRE((c = accept(fd, NULL, NULL)) >= 0);
	for (int i = 0; i < 3; i++)
		uv_run(&loop, UV_RUN_NOWAIT);
	exec_spot_close(s);
	exec_spot_close(NULL);
	uv_run(&loop, UV_RUN_DEFAULT);
	CHECK_INT_EQ(uv_loop_close(&loop), 0);
	close(c);
	close(fd);
}
