/*
 * The lifecycle vocabulary every program shares: the states of a job, of
 * an attempt and of a node, and the classes an attempt fails with, each
 * with the retry budget it spends and whether it blames the node that
 * reported it (docs/dispatch.md, "Failures, retries and bad nodes"). The
 * schema's CHECK constraints list the same names (tests/integration
 * checks they agree).
 */
#ifndef TY_PROTO_LIFECYCLE_H
#define TY_PROTO_LIFECYCLE_H

#include <stdbool.h>

/* name, string, terminal (the job is over) */
#define PROTO_JOB_STATES(X)                                                   \
	X(PENDING, "pending", false)                                          \
	X(SCHEDULED, "scheduled", false)                                      \
	X(STARTING, "starting", false)                                        \
	X(RUNNING, "running", false)                                          \
	X(PREEMPTING, "preempting", false)                                    \
	X(SUCCEEDED, "succeeded", true)                                       \
	X(FAILED, "failed", true)                                             \
	X(CANCELLED, "cancelled", true)                                       \
	X(STOPPED, "stopped", true)

/* name, string, active (its ranks may hold GPUs and run) */
#define PROTO_ATTEMPT_STATES(X)                                               \
	X(SCHEDULED, "scheduled", true)                                       \
	X(STARTING, "starting", true)                                         \
	X(RUNNING, "running", true)                                           \
	X(STOPPING, "stopping", false)                                        \
	X(SUCCEEDED, "succeeded", false)                                      \
	X(FAILED, "failed", false)                                            \
	X(CANCELLED, "cancelled", false)

/* name, string */
#define PROTO_NODE_STATES(X)                                                  \
	X(READY, "ready")                                                     \
	X(SUSPECT, "suspect")                                                 \
	X(DRAINING, "draining")                                               \
	X(DRAINED, "drained")                                                 \
	X(PREEMPTING, "preempting")                                           \
	X(LOST, "lost")

/* The retry budget a failure class spends (jobs' spec retry.user / retry.system). */
enum proto_budget { PROTO_BUDGET_NONE, PROTO_BUDGET_USER, PROTO_BUDGET_SYSTEM };
/* "user", "system" (the spec's retry fields); NULL for PROTO_BUDGET_NONE. */
const char *proto_budget_name(enum proto_budget b);

/*
 * name, string, budget, blames, infra. blames: the failure counts against
 * the node that reported it (node_failures, suspect and drained nodes) and
 * the job's later attempts avoid that node. infra: the infrastructure's
 * doing, not the job's (a node that cannot start a job in time is the
 * node's problem too): its requeue is expedited, and its GPU-seconds are
 * lost_infra in the goodput ledger and not charged to fair share
 * (docs/scheduling.md, "Expedited requeue" and "Goodput").
 */
#define PROTO_FAILURE_CLASSES(X)                                              \
	X(USER, "user", PROTO_BUDGET_USER, false, false)                      \
	X(OOM, "oom", PROTO_BUDGET_USER, false, false)                        \
	X(SYSTEM, "system", PROTO_BUDGET_SYSTEM, true, true)                  \
	X(HARDWARE, "hardware", PROTO_BUDGET_SYSTEM, true, true)              \
	X(HANG, "hang", PROTO_BUDGET_SYSTEM, true, false)                     \
	X(NODE_LOST, "node_lost", PROTO_BUDGET_SYSTEM, true, true)            \
	X(PREEMPTED, "preempted", PROTO_BUDGET_NONE, false, false)            \
	X(START_TIMEOUT, "start_timeout", PROTO_BUDGET_SYSTEM, true, true)    \
	X(TIMEOUT, "timeout", PROTO_BUDGET_NONE, false, false)                \
	X(CANCELLED, "cancelled", PROTO_BUDGET_SYSTEM, false, false)

enum proto_job_state {
#define PROTO_JOB_STATE_ENUM(name, str, terminal) PROTO_JOB_STATE_##name,
	PROTO_JOB_STATES(PROTO_JOB_STATE_ENUM)
#undef PROTO_JOB_STATE_ENUM
	PROTO_JOB_STATE_COUNT
};

enum proto_attempt_state {
#define PROTO_ATTEMPT_STATE_ENUM(name, str, active) PROTO_ATTEMPT_STATE_##name,
	PROTO_ATTEMPT_STATES(PROTO_ATTEMPT_STATE_ENUM)
#undef PROTO_ATTEMPT_STATE_ENUM
	PROTO_ATTEMPT_STATE_COUNT
};

enum proto_node_state {
#define PROTO_NODE_STATE_ENUM(name, str) PROTO_NODE_STATE_##name,
	PROTO_NODE_STATES(PROTO_NODE_STATE_ENUM)
#undef PROTO_NODE_STATE_ENUM
	PROTO_NODE_STATE_COUNT
};

enum proto_failure_class {
#define PROTO_FAILURE_ENUM(name, str, budget, blames, infra) PROTO_FAILURE_##name,
	PROTO_FAILURE_CLASSES(PROTO_FAILURE_ENUM)
#undef PROTO_FAILURE_ENUM
	PROTO_FAILURE_CLASS_COUNT
};

/* Names; NULL out of range. */
const char *proto_job_state_name(enum proto_job_state s);
const char *proto_attempt_state_name(enum proto_attempt_state s);
const char *proto_node_state_name(enum proto_node_state s);
const char *proto_failure_class_name(enum proto_failure_class c);
/* By name; the COUNT value when name is none of them (or NULL). */
enum proto_job_state proto_job_state_parse(const char *name);
enum proto_attempt_state proto_attempt_state_parse(const char *name);
enum proto_node_state proto_node_state_parse(const char *name);
enum proto_failure_class proto_failure_class_parse(const char *name);

/* Whether a job in state name is over (false for an unknown name). */
bool proto_job_state_terminal(const char *name);
/* Whether an attempt in state name is active (false for an unknown name). */
bool proto_attempt_state_active(const char *name);
/* The budget failure class name spends; PROTO_BUDGET_NONE for an unknown name. */
enum proto_budget proto_failure_budget(const char *name);
/* Whether failure class name blames its node (false for an unknown name). */
bool proto_failure_blames(const char *name);
/*
 * Whether failure class name is the infrastructure's doing (the infra
 * column above: system, hardware, node_lost, start_timeout); false for an
 * unknown name.
 */
bool proto_failure_infrastructure(const char *name);

/*
 * Job events that are no transition (docs/dispatch.md, "Lifecycle"): a
 * pending job that became impossible (its reason then starts with
 * PROTO_CANNOT_RUN, docs/scheduling.md "Cannot run") and one that became
 * possible again.
 */
#define PROTO_EVENT_UNSCHEDULABLE "unschedulable"
#define PROTO_EVENT_SCHEDULABLE "schedulable"
#define PROTO_CANNOT_RUN "cannot run: "

#endif
