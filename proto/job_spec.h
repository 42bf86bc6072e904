/*
 * The job spec's typed fields: name, type, range, choices and default, one
 * table that the API validates submissions against (filling in defaults)
 * and that the scheduler and executors read defaults from when a stored
 * spec or a launch lacks a field (specs stored before the field existed).
 * docs/api.md describes each field.
 */
#ifndef TY_PROTO_JOB_SPEC_H
#define TY_PROTO_JOB_SPEC_H

#include <stdbool.h>
#include <stddef.h>

enum proto_spec_type { PROTO_SPEC_INT, PROTO_SPEC_BOOL, PROTO_SPEC_ENUM };

/* The checkpoint signals a job may name (spec checkpoint.signal, launch checkpoint_signal). */
#define PROTO_CKPT_SIGNALS(X)                                                 \
	X(SIGUSR1)                                                            \
	X(SIGUSR2)                                                            \
	X(SIGINT)                                                             \
	X(SIGTERM)                                                            \
	X(SIGHUP)

/* How ranks are started on a node (spec launch, launch message launch). */
#define PROTO_LAUNCH_MODES(X)                                                 \
	X(PER_GPU, "per_gpu")                                                 \
	X(PER_NODE, "per_node")

enum proto_launch_mode {
#define PROTO_LAUNCH_MODE_ENUM(name, str) PROTO_LAUNCH_##name,
	PROTO_LAUNCH_MODES(PROTO_LAUNCH_MODE_ENUM)
#undef PROTO_LAUNCH_MODE_ENUM
	PROTO_LAUNCH_MODE_COUNT
};

struct proto_spec_field {
	const char *obj; /* NULL: top level */
	const char *key;
	enum proto_spec_type type;
	long long min, max;	    /* PROTO_SPEC_INT */
	const char *const *choices; /* PROTO_SPEC_ENUM, NULL-terminated */
	long long idef;		    /* default of an int or bool */
	const char *sdef;	    /* default of an enum; NULL: JSON null */
	bool nullable;
};

extern const struct proto_spec_field proto_spec_fields[];
extern const size_t proto_spec_nfields;

/* The field obj.key (obj NULL: top level); NULL when there is none. */
const struct proto_spec_field *proto_spec_field(const char *obj, const char *key);
/*
 * The default of an int or bool field; aborts on a field the table lacks
 * (a programming error every test run would hit).
 */
long long proto_spec_default_int(const char *obj, const char *key);
/* The default of an enum field (NULL: JSON null); aborts as above. */
const char *proto_spec_default_str(const char *obj, const char *key);

/* "per_gpu", "per_node"; NULL out of range. */
const char *proto_launch_mode_name(enum proto_launch_mode m);
/* PROTO_LAUNCH_MODE_COUNT when name is none of them (or NULL). */
enum proto_launch_mode proto_launch_mode_parse(const char *name);
/* The number of a checkpoint signal's name ("SIGUSR1" or "USR1" ...); -1 when it is not one. */
int proto_ckpt_signal_parse(const char *name);

#endif
