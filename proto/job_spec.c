/* The job spec's typed fields and their defaults (job_spec.h). */
#include "job_spec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const priority_classes[] = {"high", "normal", "low", "scavenger", NULL};
static const char *const fallbacks[] = {"on_demand", "none", NULL};
static const char *const signals[] = {
#define PROTO_CKPT_SIGNAL_NAME(name) #name,
    PROTO_CKPT_SIGNALS(PROTO_CKPT_SIGNAL_NAME)
#undef PROTO_CKPT_SIGNAL_NAME
	NULL};
static const char *const domains[] = {"block", "rack", "zone", NULL};
static const char *const launches[] = {
#define PROTO_LAUNCH_MODE_NAME(name, str) str,
    PROTO_LAUNCH_MODES(PROTO_LAUNCH_MODE_NAME)
#undef PROTO_LAUNCH_MODE_NAME
	NULL};

#define INT PROTO_SPEC_INT
#define BOOL PROTO_SPEC_BOOL
#define ENUM PROTO_SPEC_ENUM
const struct proto_spec_field proto_spec_fields[] = {
    {"resources", "nodes", INT, 1, 10000, NULL, 1, NULL, false},
    {"resources", "gpus_per_node", INT, 0, 64, NULL, 0, NULL, false},
    {"resources", "cpus_per_node", INT, 1, 4096, NULL, 1, NULL, false},
    {"resources", "memory_mb_per_node", INT, 1, 16777216, NULL, 1024, NULL, false},
    {NULL, "priority_class", ENUM, 0, 0, priority_classes, 0, "normal", false},
    {NULL, "priority", INT, -1000, 1000, NULL, 0, NULL, false},
    {NULL, "max_runtime_seconds", INT, 1, 31536000, NULL, 86400, NULL, false},
    {NULL, "min_runtime_seconds", INT, 0, 31536000, NULL, 0, NULL, false},
    {NULL, "preemptible", BOOL, 0, 0, NULL, 1, NULL, false},
    {"spot", "allowed", BOOL, 0, 0, NULL, 0, NULL, false},
    {"spot", "max_preemptions", INT, 0, 1000, NULL, 3, NULL, false},
    {"spot", "fallback", ENUM, 0, 0, fallbacks, 0, "on_demand", false},
    {"retry", "system", INT, 0, 100, NULL, 3, NULL, false},
    {"retry", "user", INT, 0, 100, NULL, 0, NULL, false},
    {"checkpoint", "signal", ENUM, 0, 0, signals, 0, "SIGUSR1", false},
    {"checkpoint", "grace_seconds", INT, 0, 3600, NULL, 120, NULL, false},
    {"checkpoint", "keep", INT, 1, 100, NULL, 3, NULL, false},
    {"checkpoint", "keep_every", INT, 0, 1000000000, NULL, 0, NULL, false},
    {"checkpoint", "tier", BOOL, 0, 0, NULL, 0, NULL, false},
    {"topology", "required", ENUM, 0, 0, domains, 0, NULL, true},
    {NULL, "launch", ENUM, 0, 0, launches, 0, "per_gpu", false},
    {NULL, "hang_timeout_seconds", INT, 0, 604800, NULL, 1800, NULL, false},
    {NULL, "start_timeout_seconds", INT, 0, 86400, NULL, 600, NULL, false},
    {NULL, "preflight", BOOL, 0, 0, NULL, 0, NULL, false},
    {NULL, "queue_if_unschedulable", BOOL, 0, 0, NULL, 0, NULL, false},
};
#undef INT
#undef BOOL
#undef ENUM
const size_t proto_spec_nfields = sizeof(proto_spec_fields) / sizeof(proto_spec_fields[0]);

const struct proto_spec_field *proto_spec_field(const char *obj, const char *key)
{
	for (size_t i = 0; i < proto_spec_nfields; i++) {
		const struct proto_spec_field *f = &proto_spec_fields[i];

		if (!strcmp(f->key, key) && (obj ? f->obj && !strcmp(f->obj, obj) : !f->obj))
			return f;
	}
	return NULL;
}

static const struct proto_spec_field *must(const char *obj, const char *key, bool want_enum)
{
	const struct proto_spec_field *f = proto_spec_field(obj, key);

	if (!f || (f->type == PROTO_SPEC_ENUM) != want_enum) {
		fprintf(stderr, "job spec field '%s%s%s' is not in proto/job_spec.c as %s\n",
			obj ? obj : "", obj ? "." : "", key, want_enum ? "an enum" : "an int or bool");
		abort();
	}
	return f;
}

long long proto_spec_default_int(const char *obj, const char *key)
{
	return must(obj, key, false)->idef;
}

const char *proto_spec_default_str(const char *obj, const char *key)
{
	return must(obj, key, true)->sdef;
}

const char *proto_launch_mode_name(enum proto_launch_mode m)
{
	return (unsigned)m < PROTO_LAUNCH_MODE_COUNT ? launches[m] : NULL;
}

enum proto_launch_mode proto_launch_mode_parse(const char *name)
{
	for (int m = 0; name && m < PROTO_LAUNCH_MODE_COUNT; m++)
		if (!strcmp(launches[m], name))
			return (enum proto_launch_mode)m;
	return PROTO_LAUNCH_MODE_COUNT;
}

int proto_ckpt_signal_parse(const char *name)
{
	static const struct {
		const char *name;
		int sig;
	} v[] = {
#define PROTO_CKPT_SIGNAL_PAIR(name) {#name, name},
	    PROTO_CKPT_SIGNALS(PROTO_CKPT_SIGNAL_PAIR)
#undef PROTO_CKPT_SIGNAL_PAIR
	};

	/* "USR1" is "SIGUSR1", as kill(1) takes it */
	for (size_t i = 0; name && i < sizeof(v) / sizeof(v[0]); i++)
		if (!strcmp(v[i].name, name) || !strcmp(v[i].name + 3, name))
			return v[i].sig;
	return -1;
}
