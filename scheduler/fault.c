/* Crash points for fault tests (--fault-crash-at): see fault.h. */
#include "fault.h"
#include "ty_log.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int sched_fault_armed;

static enum sched_fault armed_point;
static int armed_n, passes;

static const char *const names[SCHED_FAULT_COUNT] = {
    [SCHED_FAULT_CYCLE_BEFORE_COMMIT] = "cycle_before_commit",
    [SCHED_FAULT_CYCLE_AFTER_COMMIT] = "cycle_after_commit",
    [SCHED_FAULT_RELAY_MID] = "relay_mid",
    [SCHED_FAULT_RELAY_AFTER_SEND] = "relay_after_send",
    [SCHED_FAULT_EVENTS_BEFORE_COMMIT] = "events_before_commit",
    [SCHED_FAULT_EVENTS_AFTER_COMMIT] = "events_after_commit",
    [SCHED_FAULT_CANCEL_AFTER_COMMIT] = "cancel_after_commit",
};

const char *sched_fault_name(enum sched_fault point)
{
	return (int)point >= 0 && point < SCHED_FAULT_COUNT ? names[point] : "?";
}

int sched_fault_parse(enum sched_fault *point, int *n, const char *spec, struct ty_err *err)
{
	size_t len = strcspn(spec, ":");

	for (int p = 0; p < SCHED_FAULT_COUNT; p++) {
		if (strlen(names[p]) != len || strncmp(spec, names[p], len))
			continue;
		*point = (enum sched_fault)p;
		*n = 1;
		if (spec[len] == ':') {
			char *end;
			long v = strtol(spec + len + 1, &end, 10);

			if (end == spec + len + 1 || *end || v < 1 || v > 1000000)
				return ty_err_set(
				    err, TY_EINVAL,
				    "crash point '%s': the count must be 1 to 1000000", spec);
			*n = (int)v;
		}
		return 0;
	}
	return ty_err_set(err, TY_EINVAL,
			  "unknown crash point '%.*s' (cycle_before_commit, cycle_after_commit, "
			  "relay_mid, relay_after_send, events_before_commit, "
			  "events_after_commit, cancel_after_commit)",
			  (int)(len > 64 ? 64 : len), spec);
}

int sched_fault_arm(const char *spec, struct ty_err *err)
{
	int rc;

	sched_fault_armed = 0;
	passes = 0;
	if (!spec || !*spec)
		return 0;
	if ((rc = sched_fault_parse(&armed_point, &armed_n, spec, err)))
		return rc;
	sched_fault_armed = 1;
	ty_warn("crash point armed: the process kills itself at pass %d of '%s' (a test "
		"option)",
		armed_n, names[armed_point]);
	return 0;
}

bool sched_fault_due(enum sched_fault point)
{
	return point == armed_point && ++passes == armed_n;
}

_Noreturn void sched_fault_crash(enum sched_fault point)
{
	ty_error("crash point '%s' reached (pass %d): killing this process",
		 sched_fault_name(point), passes);
	raise(SIGKILL);
	_exit(137); /* not reached */
}
