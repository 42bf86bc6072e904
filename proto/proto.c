/* Envelope and payload (de)serialisation with strict validation. */
#include "proto.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {
	"none",
#define PROTO_NAME(name, str, topic) str,
	PROTO_TYPES(PROTO_NAME)
#undef PROTO_NAME
};
static const char *const topics[] = {
	"",
#define PROTO_TOPIC(name, str, topic) topic,
	PROTO_TYPES(PROTO_TOPIC)
#undef PROTO_TOPIC
};

/*
 * Required data fields per type: "name:t" with t = i (integer), s (string),
 * a (array), o (object), b (boolean). Job-scoped types also require
 * job >= 1 and attempt >= 1 in the envelope.
 */
struct schema {
	bool job_scoped;
	const char *fields[12];
};

static const struct schema schemas[PROTO_TYPE_COUNT] = {
	[PROTO_LAUNCH] = {true,
			  {"node_rank:i", "nnodes:i", "world_size:i", "local_world_size:i",
			   "first_rank:i", "master_addr:s", "master_port:i", "gpus:a",
			   "command:a", "env:o", "launch:s", NULL}},
	[PROTO_KILL] = {true, {"reason:s", "grace_seconds:i", NULL}},
	[PROTO_CHECKPOINT] = {true, {"signal:s", "grace_seconds:i", NULL}},
	[PROTO_HEALTH_CHECK] = {false, {"reason:s", NULL}},
	[PROTO_RANK_STARTED] = {true, {"rank:i", "local_rank:i", "pid:i", NULL}},
	[PROTO_RANK_EXITED] = {true, {"rank:i", "exit_code:i", "signal:i", NULL}},
	[PROTO_ATTEMPT_RUNNING] = {true, {"ranks:i", NULL}},
	[PROTO_ATTEMPT_EXITED] = {true, {"exit_code:i", "failure_class:s", "message:s", NULL}},
	[PROTO_CHECKPOINT_WRITTEN] = {true, {"path:s", "step:i", NULL}},
	[PROTO_CHECKPOINT_TIER] = {true, {"status:s", NULL}},
	[PROTO_PREEMPT_NOTICE] = {false, {"deadline:i", NULL}},
	[PROTO_LAUNCH_ACCEPTED] = {true, {NULL}},
	[PROTO_REGISTER] = {false,
			    {"address:s", "gpus:i", "labels:o", "boot_id:s", "log_url:s", NULL}},
	[PROTO_HEARTBEAT] = {false, {"boot_id:s", "running:a", "finished:a", NULL}},
};

const char *proto_type_name(enum proto_type t)
{
	return t > PROTO_NONE && t < PROTO_TYPE_COUNT ? names[t] : "unknown";
}

const char *proto_type_topic(enum proto_type t)
{
	return t > PROTO_NONE && t < PROTO_TYPE_COUNT ? topics[t] : "";
}

enum proto_type proto_type_parse(const char *name)
{
	for (int t = 1; t < PROTO_TYPE_COUNT; t++)
		if (name && strcmp(names[t], name) == 0)
			return (enum proto_type)t;
	return PROTO_NONE;
}

static const char *const evidence_names[] = {
#define PROTO_EVIDENCE_NAME(name, str) [PROTO_EVIDENCE_##name] = str,
    PROTO_EVIDENCE_SOURCES(PROTO_EVIDENCE_NAME)
#undef PROTO_EVIDENCE_NAME
};

const char *proto_evidence_source_name(enum proto_evidence_source e)
{
	return (unsigned)e < PROTO_EVIDENCE_SOURCE_COUNT ? evidence_names[e] : "unknown";
}

enum proto_evidence_source proto_evidence_source_parse(const char *name)
{
	if (!name)
		return PROTO_EVIDENCE_EXECUTOR;
	for (int e = 0; e < PROTO_EVIDENCE_SOURCE_COUNT; e++)
		if (!strcmp(evidence_names[e], name))
			return (enum proto_evidence_source)e;
	return PROTO_EVIDENCE_LOG;
}

static const char *const condition_kind_names[] = {
#define PROTO_CONDITION_NAME(name, str) [PROTO_CONDITION_##name] = str,
    PROTO_CONDITION_KINDS(PROTO_CONDITION_NAME)
#undef PROTO_CONDITION_NAME
};

const char *proto_condition_kind_name(enum proto_condition_kind k)
{
	return (unsigned)k < PROTO_CONDITION_KIND_COUNT ? condition_kind_names[k] : "unknown";
}

static const char *const severity_names[] = {
#define PROTO_SEVERITY_NAME(name, str) [PROTO_SEVERITY_##name] = str,
    PROTO_SEVERITIES(PROTO_SEVERITY_NAME)
#undef PROTO_SEVERITY_NAME
};

const char *proto_severity_name(enum proto_severity s)
{
	return (unsigned)s < PROTO_SEVERITY_COUNT ? severity_names[s] : "unknown";
}

enum proto_severity proto_severity_parse(const char *name)
{
	for (int s = 0; name && s < PROTO_SEVERITY_COUNT; s++)
		if (!strcmp(severity_names[s], name))
			return (enum proto_severity)s;
	return PROTO_SEVERITY_COUNT;
}

/* v is absent, null or of the JSON type wanted */
static bool optional_is(const json_t *v, json_type type)
{
	return !v || json_is_null(v) || json_typeof(v) == type;
}

int proto_condition_check(const json_t *c, struct ty_err *err)
{
	const char *kind, *ev;
	const json_t *gpu, *first, *last;
	size_t n;

	if (!json_is_object(c))
		return ty_err_set(err, TY_EPARSE, "condition: not an object");
	kind = json_string_value(json_object_get(c, "kind"));
	n = kind ? strlen(kind) : 0;
	if (n == 0 || n > PROTO_CONDITION_KIND_MAX || strspn(kind, "abcdefghijklmnopqrstuvwxyz0123456789_") != n)
		return ty_err_set(err, TY_EPARSE,
				  "condition: kind must be 1 to %d of [a-z0-9_]",
				  PROTO_CONDITION_KIND_MAX);
	if (proto_severity_parse(json_string_value(json_object_get(c, "severity"))) ==
	    PROTO_SEVERITY_COUNT)
		return ty_err_set(err, TY_EPARSE, "condition '%s': severity must be fatal or degraded",
				  kind);
	ev = json_string_value(json_object_get(c, "evidence"));
	if (!ev || !*ev || strlen(ev) > PROTO_CONDITION_EVIDENCE_MAX)
		return ty_err_set(err, TY_EPARSE,
				  "condition '%s': evidence must be a string of 1 to %d bytes", kind,
				  PROTO_CONDITION_EVIDENCE_MAX);
	gpu = json_object_get(c, "gpu");
	if (!optional_is(gpu, JSON_INTEGER) || (json_is_integer(gpu) && json_integer_value(gpu) < 0))
		return ty_err_set(err, TY_EPARSE, "condition '%s': gpu must be an index or null",
				  kind);
	if (!optional_is(json_object_get(c, "gpu_uuid"), JSON_STRING) ||
	    !optional_is(json_object_get(c, "port"), JSON_STRING))
		return ty_err_set(err, TY_EPARSE,
				  "condition '%s': gpu_uuid and port must be strings or null", kind);
	if (!optional_is(json_object_get(c, "code"), JSON_INTEGER))
		return ty_err_set(err, TY_EPARSE, "condition '%s': code must be an integer or null",
				  kind);
	first = json_object_get(c, "first_seen");
	last = json_object_get(c, "last_seen");
	if (!json_is_integer(first) || !json_is_integer(last) ||
	    json_integer_value(first) > json_integer_value(last))
		return ty_err_set(err, TY_EPARSE,
				  "condition '%s': first_seen and last_seen must be ms with "
				  "first_seen <= last_seen",
				  kind);
	return 0;
}

json_t *proto_progress_rank(int rank, int64_t step, double steps_per_second,
			    double samples_per_second, int64_t step_at)
{
	return json_pack("{s:i, s:I, s:o, s:o, s:I}", "rank", rank, "step", (json_int_t)step,
			 "steps_per_second",
			 steps_per_second < 0 ? json_null() : json_real(steps_per_second),
			 "samples_per_second",
			 samples_per_second < 0 ? json_null() : json_real(samples_per_second),
			 "step_at", (json_int_t)step_at);
}

/* A non-negative number, null or absent */
static bool rate_ok(const json_t *v)
{
	return !v || json_is_null(v) || (json_is_number(v) && json_number_value(v) >= 0);
}

int proto_progress_check(const json_t *p, struct ty_err *err)
{
	const json_t *rank = json_object_get(p, "rank"), *step = json_object_get(p, "step"),
		     *at = json_object_get(p, "step_at");

	if (!json_is_object(p))
		return ty_err_set(err, TY_EPARSE, "progress: not an object");
	if (!json_is_integer(rank) || json_integer_value(rank) < 0)
		return ty_err_set(err, TY_EPARSE, "progress: rank must be a non-negative integer");
	if (!json_is_integer(step) || json_integer_value(step) < 0)
		return ty_err_set(err, TY_EPARSE,
				  "progress of rank %lld: step must be a non-negative integer",
				  (long long)json_integer_value(rank));
	if (!rate_ok(json_object_get(p, "steps_per_second")) ||
	    !rate_ok(json_object_get(p, "samples_per_second")))
		return ty_err_set(err, TY_EPARSE,
				  "progress of rank %lld: steps_per_second and samples_per_second "
				  "must be non-negative numbers or null",
				  (long long)json_integer_value(rank));
	if (!json_is_integer(at) || json_integer_value(at) < 0)
		return ty_err_set(err, TY_EPARSE,
				  "progress of rank %lld: step_at must be ms since the epoch",
				  (long long)json_integer_value(rank));
	return 0;
}

bool proto_node_id_ok(const char *node)
{
	size_t n = node ? strlen(node) : 0;

	if (n == 0 || n > PROTO_NODE_ID_MAX || !isalnum((unsigned char)node[0]))
		return false;
	for (; *node; node++)
		if (!isalnum((unsigned char)*node) && !strchr("._-", *node))
			return false;
	return true;
}

int32_t proto_node_partition(const char *node, int32_t partitions)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)node; *p; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return partitions > 0 ? (int32_t)(h % (uint32_t)partitions) : 0;
}

static bool type_ok(const json_t *v, char t)
{
	switch (t) {
	case 'i':
		return json_is_integer(v);
	case 's':
		return json_is_string(v);
	case 'a':
		return json_is_array(v);
	case 'o':
		return json_is_object(v);
	case 'b':
		return json_is_boolean(v);
	}
	return false;
}

static const char *type_word(char t)
{
	switch (t) {
	case 'i':
		return "an integer";
	case 's':
		return "a string";
	case 'a':
		return "an array";
	case 'o':
		return "an object";
	}
	return "a boolean";
}

static int check_data(const json_t *data, enum proto_type t, struct ty_err *err)
{
	for (const char *const *f = schemas[t].fields; *f; f++) {
		const char *colon = strchr(*f, ':');
		char key[40];
		const json_t *v;

		snprintf(key, sizeof(key), "%.*s", (int)(colon - *f), *f);
		v = json_object_get(data, key);
		if (!v)
			return ty_err_set(err, TY_EPARSE, "%s message lacks data field '%s'",
					  names[t], key);
		if (!type_ok(v, colon[1]))
			return ty_err_set(err, TY_EPARSE, "%s message: data field '%s' must be %s",
					  names[t], key, type_word(colon[1]));
	}
	return 0;
}

static int check_envelope(const struct proto_msg *m, struct ty_err *err)
{
	if (m->type <= PROTO_NONE || m->type >= PROTO_TYPE_COUNT)
		return ty_err_set(err, TY_EPARSE, "unknown message type");
	if (!proto_node_id_ok(m->node))
		return ty_err_set(err, TY_EPARSE, "%s message: node id '%s' is not valid",
				  names[m->type], m->node);
	if (schemas[m->type].job_scoped && (m->job < 1 || m->attempt < 1))
		return ty_err_set(err, TY_EPARSE, "%s message needs a job and an attempt >= 1",
				  names[m->type]);
	if (m->epoch < 0 || m->seq < 0 || m->job < 0 || m->attempt < 0)
		return ty_err_set(err, TY_EPARSE, "%s message has a negative counter",
				  names[m->type]);
	return 0;
}

int proto_encode(char **out, size_t *len, const struct proto_msg *m, struct ty_err *err)
{
	json_t *o = NULL, *data = m->data ? m->data : json_object();
	int rc;

	*out = NULL;
	if ((rc = check_envelope(m, err)) || (rc = check_data(data, m->type, err))) {
		if (!m->data)
			json_decref(data);
		return TY_EINVAL; /* err names the fault */
	}
	o = json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:O}", "v", PROTO_VERSION, "type",
		      names[m->type], "node", m->node, "job", (json_int_t)m->job, "attempt",
		      (json_int_t)m->attempt, "epoch", (json_int_t)m->epoch, "seq",
		      (json_int_t)m->seq, "ts", (json_int_t)m->ts, "data", data);
	if (!m->data)
		json_decref(data);
	if (!o || !(*out = json_dumps(o, JSON_COMPACT))) {
		json_decref(o);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	json_decref(o);
	*len = strlen(*out);
	return 0;
}

static int get_int(int64_t *out, const json_t *o, const char *key, struct ty_err *err)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		return ty_err_set(err, TY_EPARSE, "envelope field '%s' must be an integer", key);
	*out = json_integer_value(v);
	return 0;
}

int proto_decode(struct proto_msg *m, const void *buf, size_t len, struct ty_err *err)
{
	json_error_t jerr;
	json_t *o;
	const json_t *v;
	int64_t ver = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	/* depth is bounded by the sender's size limits; reject duplicates */
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return ty_err_set(err, TY_EPARSE, "message is not JSON: %s", jerr.text);
	if (!json_is_object(o)) {
		rc = ty_err_set(err, TY_EPARSE, "message is not a JSON object");
		goto fail;
	}
	if ((rc = get_int(&ver, o, "v", err)))
		goto fail;
	if (ver != PROTO_VERSION) {
		rc = ty_err_set(err, TY_EINVAL, "message version %lld is not supported (this is %d)",
				(long long)ver, PROTO_VERSION);
		goto fail;
	}
	v = json_object_get(o, "type");
	if (!json_is_string(v) || !(m->type = proto_type_parse(json_string_value(v)))) {
		rc = ty_err_set(err, TY_EPARSE, "unknown message type '%s'",
				json_is_string(v) ? json_string_value(v) : "");
		goto fail;
	}
	v = json_object_get(o, "node");
	if (!json_is_string(v) || json_string_length(v) > PROTO_NODE_ID_MAX) {
		rc = ty_err_set(err, TY_EPARSE, "%s message: 'node' must be a node id",
				names[m->type]);
		goto fail;
	}
	snprintf(m->node, sizeof(m->node), "%s", json_string_value(v));
	if ((rc = get_int(&m->job, o, "job", err)) || (rc = get_int(&m->attempt, o, "attempt", err)) ||
	    (rc = get_int(&m->epoch, o, "epoch", err)) || (rc = get_int(&m->seq, o, "seq", err)) ||
	    (rc = get_int(&m->ts, o, "ts", err)) || (rc = check_envelope(m, err)))
		goto fail;
	v = json_object_get(o, "data");
	if (!json_is_object(v)) {
		rc = ty_err_set(err, TY_EPARSE, "%s message: 'data' must be an object",
				names[m->type]);
		goto fail;
	}
	if ((rc = check_data(v, m->type, err)))
		goto fail;
	m->data = json_incref((json_t *)v);
	json_decref(o);
	return 0;
fail:
	json_decref(o);
	m->type = PROTO_NONE;
	return rc;
}

void proto_msg_clear(struct proto_msg *m)
{
	if (!m)
		return;
	json_decref(m->data);
	m->data = NULL;
}
