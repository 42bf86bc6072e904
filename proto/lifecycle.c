/* The lifecycle vocabulary (lifecycle.h). */
#include "lifecycle.h"

#include <string.h>

static const char *const job_states[] = {
#define NAME(name, str, terminal) str,
    PROTO_JOB_STATES(NAME)
#undef NAME
};
static const bool job_terminal[] = {
#define TERMINAL(name, str, terminal) terminal,
    PROTO_JOB_STATES(TERMINAL)
#undef TERMINAL
};
static const char *const attempt_states[] = {
#define NAME(name, str, active) str,
    PROTO_ATTEMPT_STATES(NAME)
#undef NAME
};
static const bool attempt_active[] = {
#define ACTIVE(name, str, active) active,
    PROTO_ATTEMPT_STATES(ACTIVE)
#undef ACTIVE
};
static const char *const node_states[] = {
#define NAME(name, str) str,
    PROTO_NODE_STATES(NAME)
#undef NAME
};
static const struct {
	const char *name;
	enum proto_budget budget;
	bool blames, infra;
} classes[] = {
#define CLASS(name, str, budget, blames, infra) {str, budget, blames, infra},
    PROTO_FAILURE_CLASSES(CLASS)
#undef CLASS
};

static int find(const char *const *names, int n, const char *name)
{
	for (int i = 0; name && i < n; i++)
		if (!strcmp(names[i], name))
			return i;
	return n;
}

static int find_class(const char *name)
{
	for (int i = 0; name && i < PROTO_FAILURE_CLASS_COUNT; i++)
		if (!strcmp(classes[i].name, name))
			return i;
	return PROTO_FAILURE_CLASS_COUNT;
}

const char *proto_job_state_name(enum proto_job_state s)
{
	return (unsigned)s < PROTO_JOB_STATE_COUNT ? job_states[s] : NULL;
}

const char *proto_attempt_state_name(enum proto_attempt_state s)
{
	return (unsigned)s < PROTO_ATTEMPT_STATE_COUNT ? attempt_states[s] : NULL;
}

const char *proto_node_state_name(enum proto_node_state s)
{
	return (unsigned)s < PROTO_NODE_STATE_COUNT ? node_states[s] : NULL;
}

const char *proto_failure_class_name(enum proto_failure_class c)
{
	return (unsigned)c < PROTO_FAILURE_CLASS_COUNT ? classes[c].name : NULL;
}

enum proto_job_state proto_job_state_parse(const char *name)
{
	return (enum proto_job_state)find(job_states, PROTO_JOB_STATE_COUNT, name);
}

enum proto_attempt_state proto_attempt_state_parse(const char *name)
{
	return (enum proto_attempt_state)find(attempt_states, PROTO_ATTEMPT_STATE_COUNT, name);
}

enum proto_node_state proto_node_state_parse(const char *name)
{
	return (enum proto_node_state)find(node_states, PROTO_NODE_STATE_COUNT, name);
}

enum proto_failure_class proto_failure_class_parse(const char *name)
{
	return (enum proto_failure_class)find_class(name);
}

bool proto_job_state_terminal(const char *name)
{
	int i = find(job_states, PROTO_JOB_STATE_COUNT, name);

	return i < PROTO_JOB_STATE_COUNT && job_terminal[i];
}

bool proto_attempt_state_active(const char *name)
{
	int i = find(attempt_states, PROTO_ATTEMPT_STATE_COUNT, name);

	return i < PROTO_ATTEMPT_STATE_COUNT && attempt_active[i];
}

const char *proto_budget_name(enum proto_budget b)
{
	return b == PROTO_BUDGET_USER ? "user" : b == PROTO_BUDGET_SYSTEM ? "system" : NULL;
}

enum proto_budget proto_failure_budget(const char *name)
{
	int i = find_class(name);

	return i < PROTO_FAILURE_CLASS_COUNT ? classes[i].budget : PROTO_BUDGET_NONE;
}

bool proto_failure_blames(const char *name)
{
	int i = find_class(name);

	return i < PROTO_FAILURE_CLASS_COUNT && classes[i].blames;
}

bool proto_failure_infrastructure(const char *name)
{
	int i = find_class(name);

	return i < PROTO_FAILURE_CLASS_COUNT && classes[i].infra;
}
