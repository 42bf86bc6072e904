/*
 * Crash points for fault tests (--fault-crash-at NAME[:N]): the scheduler
 * kills itself with SIGKILL the N-th time it reaches the named window, so a
 * test can stop a leader exactly between two steps of its work and check
 * that the standby finishes that work once. Off by default; then each point
 * costs one branch on a global int.
 */
#ifndef SCHED_FAULT_H
#define SCHED_FAULT_H

#include "ty_err.h"

#include <stdbool.h>

/*
 * The windows. A point counts only passes that carry work, so that "the
 * first time" is the first job's, not an idle cycle's.
 */
enum sched_fault {
	/* a cycle placed or preempted something; its transaction is not committed */
	SCHED_FAULT_CYCLE_BEFORE_COMMIT,
	/* that transaction committed; the relay has not produced its outbox rows */
	SCHED_FAULT_CYCLE_AFTER_COMMIT,
	/* a relay pass of 2 or more rows produced (and flushed) its first row only */
	SCHED_FAULT_RELAY_MID,
	/* Kafka acknowledged outbox rows; their delete is not committed */
	SCHED_FAULT_RELAY_AFTER_SEND,
	/* a batch with job events is applied; its transaction is not committed */
	SCHED_FAULT_EVENTS_BEFORE_COMMIT,
	/* that transaction committed; the consumer offsets are not */
	SCHED_FAULT_EVENTS_AFTER_COMMIT,
	/* a cancel's kill rows are committed; the relay has not produced them */
	SCHED_FAULT_CANCEL_AFTER_COMMIT,
	SCHED_FAULT_COUNT
};

/* Nonzero when a crash point is armed (read by SCHED_FAULT before any call). */
extern int sched_fault_armed;

/* Crash here if this is the armed point's N-th pass. */
#define SCHED_FAULT(point)                                                                         \
	do {                                                                                       \
		if (sched_fault_armed && sched_fault_due(point))                                   \
			sched_fault_crash(point);                                                  \
	} while (0)

/* The point's name ("cycle_before_commit"), "?" when out of range (static). */
const char *sched_fault_name(enum sched_fault point);

/*
 * Parse "NAME" or "NAME:N" (N from 1, default 1) into *point and *n. Pure;
 * an unknown name or a bad count is TY_EINVAL with a message listing the names.
 */
int sched_fault_parse(enum sched_fault *point, int *n, const char *spec, struct ty_err *err);

/* Arm the point spec names (NULL or "": nothing armed). */
int sched_fault_arm(const char *spec, struct ty_err *err);

/* Count a pass through point; true when it is the armed one's N-th. */
bool sched_fault_due(enum sched_fault point);

/* Log the crash at error level and kill this process with SIGKILL (no return). */
_Noreturn void sched_fault_crash(enum sched_fault point);

#endif
