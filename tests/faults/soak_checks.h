/*
 * The fault suites' invariants over an e2e stack (e2e.h), as functions that
 * a shared checker (tests/faults/invariants.h) can replace one by one: every
 * submitted job is present; no gang ran twice, or two attempts of one job at
 * once; every job reached the right terminal state; no allocation leaked;
 * the outbox drained. Each check FAILs the current case with the details of
 * every violation it finds and returns their number (0: the invariant
 * holds), so a caller can count them for a report.
 *
 * Evidence of what really ran comes from the ranks themselves: jobs run
 * fchk_rank_command(), which writes "$OUTDIR/rank-<job>-<attempt>-<rank>.<pid>"
 * with its start time and appends a line every 250 ms while it lives, so the
 * file's mtime is its last sign of life.
 */
#ifndef TY_FAULTS_SOAK_CHECKS_H
#define TY_FAULTS_SOAK_CHECKS_H

#include "e2e.h"

#include <stdbool.h>

/* The JSON argv of a rank that records itself and lives about ticks × 250 ms (scratch). */
const char *fchk_rank_command(int ticks);

/* What a check needs of one submitted job. */
struct fchk_job {
	long long id;
	int ranks;	  /* world size */
	bool may_retry;	  /* a fault could legitimately fail an attempt (executor killed) */
	const char *want; /* terminal state wanted ("succeeded", "cancelled") */
	/* filled by fchk_terminal */
	char state[16];
	int attempts;
	char last_class[24]; /* failure class of the last attempt, "" when none */
};

/* Every job answers GET /v1/jobs/{id} and the team lists exactly n jobs. */
int fchk_jobs_present(struct e2e *e, const struct fchk_job *jobs, int n);

/*
 * Waits (up to timeout_ms in all) until every job is terminal and checks its
 * state: want, or — for a job that may_retry — `failed` with its system retry
 * budget spent on failures of class system or node_lost. A job that may not
 * retry must have run one attempt.
 */
int fchk_terminal(struct e2e *e, struct fchk_job *jobs, int n, int timeout_ms);

/*
 * From the ranks' files: no rank of an attempt started twice, every rank of
 * a succeeded job's last attempt ran, a job that may not retry ran attempt 1
 * only, no two attempts of one job were alive at the same time, and no
 * attempt started after one whose every rank wrote its end.
 */
int fchk_ranks(struct e2e *e, const struct fchk_job *jobs, int n);

/* Waits up to timeout_ms for no unreleased allocation and every node's gpus_free = gpus. */
int fchk_no_leak(int timeout_ms);

/* Waits up to timeout_ms for dispatch_outbox to be empty. */
int fchk_outbox_drained(int timeout_ms);

/* All of the above in order; the number of violations. */
int fchk_all(struct e2e *e, struct fchk_job *jobs, int n, int timeout_ms);

#endif
