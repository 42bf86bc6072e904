/* The retry policy (retry.h). */
#include "retry.h"

#include <string.h>

int64_t sched_backoff_s(int base_s, int max_s, int tries)
{
	int64_t b = base_s;

	if (base_s <= 0 || tries < 1)
		return 0;
	for (int i = 1; i < tries && b < max_s; i++)
		b *= 2;
	return b > max_s ? max_s : b;
}

void sched_retry_decide(struct sched_retry_out *out, const struct sched_retry_in *in)
{
	bool preempted = in->cls && !strcmp(in->cls, "preempted");

	memset(out, 0, sizeof(*out));
	/* a preemption is never the job's doing: it spends nothing */
	out->budget = !preempted && in->spend ? proto_failure_budget(in->cls) : PROTO_BUDGET_NONE;
	if (out->budget == PROTO_BUDGET_USER) {
		out->limit = in->limit_user;
		out->used = in->used_user;
	} else if (out->budget == PROTO_BUDGET_SYSTEM) {
		out->limit = in->limit_system;
		out->used = in->used_system;
	}
	if (in->cancel_requested) {
		out->verdict = SCHED_RETRY_END;
	} else if (preempted || !in->spend ||
		   (out->budget != PROTO_BUDGET_NONE && out->used < out->limit)) {
		out->verdict = SCHED_RETRY_REQUEUE;
		if (out->budget != PROTO_BUDGET_NONE)
			out->backoff_s =
			    sched_backoff_s(in->backoff_base_s, in->backoff_max_s, out->used + 1);
	} else {
		out->verdict = SCHED_RETRY_FAIL;
	}
}
