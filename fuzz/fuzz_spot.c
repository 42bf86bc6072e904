/*
 * The spot interruption notice parsers (executor/spot.c): what a cloud's
 * metadata endpoint answers, through exec_spot_parse. The first byte picks
 * the provider (1 aws, 2 gcp, 0/3 azure, modulo 4), the second the HTTP
 * status (200, 404, 401, 503 by its value modulo 4), the rest is the body,
 * not NUL-terminated. Invariants: a notice has an action, every text
 * field is terminated within its array, and an error is no notice.
 */
#include "exec.h"
#include "fuzz.h"

#define NOW 1795361400000LL /* 2026-11-22T15:30:00Z */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const enum exec_spot_provider providers[] = {EXEC_SPOT_AZURE, EXEC_SPOT_AWS,
							    EXEC_SPOT_GCP, EXEC_SPOT_AZURE};
	static const long statuses[] = {200, 404, 401, 503};
	struct exec_spot_notice n;
	struct ty_err err = {0};
	char *body;
	int rc;

	if (size < 2)
		return 0;
	/* a copy of exactly the body's length, so reading past it is caught */
	body = malloc(size - 2 ? size - 2 : 1);
	FUZZ_CHECK(body);
	memcpy(body, data + 2, size - 2);
	rc = exec_spot_parse(&n, providers[data[0] % 4], statuses[data[1] % 4], body, size - 2, NOW,
			     &err);
	if (rc) {
		FUZZ_CHECK(rc == TY_EPARSE || rc == TY_EAUTH || rc == TY_EUNAVAIL);
		FUZZ_CHECK(!n.notice && err.msg[0]);
	} else if (n.notice) {
		FUZZ_CHECK(memchr(n.action, 0, sizeof(n.action)) && n.action[0]);
		FUZZ_CHECK(memchr(n.detail, 0, sizeof(n.detail)));
		FUZZ_CHECK(memchr(n.id, 0, sizeof(n.id)));
	}
	free(body);
	return 0;
}
