/* executor/health_check.c: the evidence a failed health check reports. */
#include "exec.h"
#include "ty_test.h"

#include <string.h>

TY_TEST(health_check_evidence_says_how_the_check_failed)
{
	static const struct {
		int status;
		const char *msg;
		const char *want;
	} rows[] = {
	    {1, "node-health: GPU 3 ECC", "health check 'nhc' exited 1: node-health: GPU 3 ECC"},
	    {124, "", "health check 'nhc' timed out after 3 s"},
	    {128 + 9, "", "health check 'nhc' timed out after 3 s"}, /* timeout -k */
	    {-1, "cannot run 'timeout': No such file or directory",
	     "health check 'nhc' could not run: cannot run 'timeout': No such file or directory"},
	    {2, "bad\tbyte\x01", "health check 'nhc' exited 2: bad byte "},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		char out[PROTO_CONDITION_EVIDENCE_MAX + 1];

		ty_test_context("status %d", rows[i].status);
		exec_hcheck_evidence(out, sizeof(out), "nhc", rows[i].status, 2500, rows[i].msg);
		CHECK_STR_EQ(out, rows[i].want);
	}
	ty_test_context(NULL);
}

TY_TEST(health_check_evidence_fits_a_condition)
{
	char cmd[1024], msg[1024], out[PROTO_CONDITION_EVIDENCE_MAX + 1];

	memset(cmd, 'c', sizeof(cmd) - 1);
	cmd[sizeof(cmd) - 1] = '\0';
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	exec_hcheck_evidence(out, sizeof(out), cmd, 1, 1000, msg);
	CHECK(strlen(out) <= PROTO_CONDITION_EVIDENCE_MAX);
	CHECK(strncmp(out, "health check 'ccc", 17) == 0);
}
