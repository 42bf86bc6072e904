/*
 * What-if requests in the daemon (what_if.c; docs/api.md, "What-if"): read
 * with the cycle (place.c), answered by the estimator's thread
 * (estimator.c), written back with sched_what_if_answer()'s JSON.
 */
#ifndef TY_SCHED_WHAT_IF_H
#define TY_SCHED_WHAT_IF_H

#include "core/policy.h"

#include <jansson.h>

/* requests answered per estimate: each is up to SCHED_WHAT_IF_MAX decisions and estimates */
#define SCHED_WHAT_IF_PER_ESTIMATE 4

struct sched_what_if_ask {
	int64_t id; /* what_if_requests.id */
	struct sched_what_if v[SCHED_WHAT_IF_MAX];
	int n;
};

/*
 * The answer (new; NULL when out of memory): v[0] as asked, and as
 * alternatives those of the rest that start sooner, each with a JSON merge
 * patch of the asked spec that makes it (RFC 7386). now_ms is the
 * snapshot's clock.
 */
json_t *sched_what_if_answer(const struct sched_what_if_ask *a, int64_t now_ms);

#endif
