/*
 * The retry policy, pure: what becomes of a job whose attempt failed —
 * requeued (with the budget it spends and its backoff), failed, or ended as
 * its cancel asked — from the failure class, the job's retry limits and
 * the retries it used (docs/dispatch.md, "Failures, retries and bad
 * nodes"). Which budget a class spends and whether it blames its node are
 * proto/lifecycle.h's; the scheduler (apply.c) reads the inputs and writes
 * the outcome.
 */
#ifndef TY_SCHED_RETRY_H
#define TY_SCHED_RETRY_H

#include "lifecycle.h"

#include <stdbool.h>
#include <stdint.h>

struct sched_retry_in {
	const char *cls;       /* the failure class (proto/lifecycle.h) */
	bool spend;	       /* the job is at fault (not a free requeue, not a node's condition) */
	bool cancel_requested; /* a cancel or stop was asked for: the job ends */
	int limit_user, limit_system; /* the spec's retry.user and retry.system */
	int used_user, used_system;   /* retries of each budget spent so far */
	int backoff_base_s, backoff_max_s; /* --retry-backoff-seconds, --retry-backoff-max-seconds */
};

enum sched_retry_verdict {
	SCHED_RETRY_END,     /* the cancel (or stop) that was asked for */
	SCHED_RETRY_REQUEUE, /* pending again, for the next attempt */
	SCHED_RETRY_FAIL,    /* failed: no budget, or the budget is spent */
};

struct sched_retry_out {
	enum sched_retry_verdict verdict;
	enum proto_budget budget; /* the budget this failure counts against; NONE: none */
	int limit, used;	  /* of that budget, before this failure */
	int64_t backoff_s;	  /* before the next attempt (REQUEUE with a budget) */
};

void sched_retry_decide(struct sched_retry_out *out, const struct sched_retry_in *in);

/*
 * The backoff before retry number `tries` (1-based), in seconds: base
 * doubled per earlier try, at most max; 0 without a base.
 */
int64_t sched_backoff_s(int base_s, int max_s, int tries);

#endif
