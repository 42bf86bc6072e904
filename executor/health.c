/*
 * GPU and fabric health, the pure part: the Xid table, what readings of a
 * GPU and of the HCAs' ports say (conditions), and the node's list of
 * current conditions (locked: the health watch's thread writes it, the loop
 * reads it).
 */
#include "hw.h"
#include "exec.h"
#include "ty_buf.h"
#include "ty_log.h"
#include "ty_metrics.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XID_LINE_MAX 1024

/* nvmlClocksEventReasons bits (nvml.h spells them for the NVML side) */
#define REASON_SW_POWER_CAP 0x4ULL
#define REASON_HW_SLOWDOWN 0x8ULL
#define REASON_SW_THERMAL 0x20ULL
#define REASON_HW_THERMAL 0x40ULL
#define REASON_HW_POWER_BRAKE 0x80ULL

/* ---- the Xid table ---- */

struct xid_entry {
	unsigned xid;
	enum hw_xid_action action;
	char desc[HW_XID_DESC_MAX + 1];
};

struct hw_xid_table {
	struct xid_entry *e;
	size_t n, cap;
};

static const char *const action_names[] = {
    [HW_XID_IGNORE] = "ignore",
    [HW_XID_DEGRADED] = "degraded",
    [HW_XID_FATAL] = "fatal",
};

int hw_xid_table_new(struct hw_xid_table **out, struct ty_err *err)
{
	if (!(*out = calloc(1, sizeof(**out))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	return 0;
}

void hw_xid_table_free(struct hw_xid_table *t)
{
	if (!t)
		return;
	free(t->e);
	free(t);
}

size_t hw_xid_table_count(const struct hw_xid_table *t)
{
	return t ? t->n : 0;
}

static struct xid_entry *find_xid(const struct hw_xid_table *t, unsigned xid)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (t->e[i].xid == xid)
			return &t->e[i];
	return NULL;
}

/* One entry line (s: its first non-blank character) into *e. */
static int parse_entry(struct xid_entry *e, const char *s, const char *name, int lineno,
		       struct ty_err *err)
{
	const char *p = s, *w;
	unsigned long v = 0;
	size_t n;
	int a;

	while (isdigit((unsigned char)*p) && v <= HW_XID_MAX)
		v = v * 10 + (unsigned long)(*p++ - '0');
	if (p == s || v < 1 || v > HW_XID_MAX || (*p && *p != ' ' && *p != '\t'))
		return ty_err_set(err, TY_EINVAL, "%s:%d: '%.*s' is not an Xid (1 to %d)", name,
				  lineno, (int)strcspn(s, " \t") > 32 ? 32 : (int)strcspn(s, " \t"),
				  s, HW_XID_MAX);
	while (*p == ' ' || *p == '\t')
		p++;
	w = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	for (a = 0; a < 3; a++)
		if (strlen(action_names[a]) == (size_t)(p - w) &&
		    !strncmp(action_names[a], w, (size_t)(p - w)))
			break;
	if (a == 3)
		return ty_err_set(err, TY_EINVAL,
				  "%s:%d: Xid %lu: '%.*s' is not fatal, degraded or ignore", name,
				  lineno, v, (int)(p - w > 32 ? 32 : p - w), w);
	while (*p == ' ' || *p == '\t')
		p++;
	n = strlen(p);
	while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
		n--;
	if (!n)
		return ty_err_set(err, TY_EINVAL, "%s:%d: Xid %lu: no description after '%s'", name,
				  lineno, v, action_names[a]);
	if (n > HW_XID_DESC_MAX)
		return ty_err_set(err, TY_EINVAL,
				  "%s:%d: Xid %lu: the description is longer than %d bytes", name,
				  lineno, v, HW_XID_DESC_MAX);
	e->xid = (unsigned)v;
	e->action = (enum hw_xid_action)a;
	memcpy(e->desc, p, n);
	e->desc[n] = '\0';
	exec_text_clean(e->desc); /* it goes into evidence: JSON-safe, printable */
	return 0;
}

int hw_xid_table_add(struct hw_xid_table *t, const char *text, const char *name,
		     struct ty_err *err)
{
	struct xid_entry *parsed = NULL;
	size_t np = 0, cap = 0;
	char line[XID_LINE_MAX];
	int lineno = 0, rc = 0;

	for (const char *p = text; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		const char *s;

		lineno++;
		if (len >= sizeof(line)) {
			rc = ty_err_set(err, TY_EINVAL, "%s:%d: line longer than %zu bytes", name,
					lineno, sizeof(line) - 1);
			goto out;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		if (len && line[len - 1] == '\r')
			line[len - 1] = '\0';
		p += len + (nl ? 1 : 0);
		for (s = line; *s == ' ' || *s == '\t'; s++)
			;
		if (!*s || *s == '#')
			continue;
		if (np == cap) {
			size_t c = cap ? cap * 2 : 32;
			struct xid_entry *e = realloc(parsed, c * sizeof(*e));

			if (!e) {
				rc = ty_err_set(err, TY_ENOMEM, NULL);
				goto out;
			}
			parsed = e;
			cap = c;
		}
		if ((rc = parse_entry(&parsed[np], s, name, lineno, err)))
			goto out;
		np++;
	}
	/* all lines good: merge, a later entry replacing an earlier one */
	for (size_t i = 0; i < np; i++) {
		struct xid_entry *e = find_xid(t, parsed[i].xid);

		if (!e) {
			if (t->n == t->cap) {
				size_t c = t->cap ? t->cap * 2 : 64;
				struct xid_entry *ne = realloc(t->e, c * sizeof(*ne));

				if (!ne) {
					rc = ty_err_set(err, TY_ENOMEM, NULL);
					goto out;
				}
				t->e = ne;
				t->cap = c;
			}
			e = &t->e[t->n++];
		}
		*e = parsed[i];
	}
out:
	free(parsed);
	return rc;
}

int hw_xid_table_add_file(struct hw_xid_table *t, const char *path, struct ty_err *err)
{
	struct ty_buf b = TY_BUF_INIT;
	int rc = ty_buf_read_text_file(&b, path, err);

	if (!rc)
		rc = hw_xid_table_add(t, b.len ? b.data : "", path, err);
	ty_buf_free(&b);
	return rc;
}

enum hw_xid_action hw_xid_lookup(const struct hw_xid_table *t, unsigned long long xid,
				 const char **desc)
{
	const struct xid_entry *e = xid <= HW_XID_MAX ? find_xid(t, (unsigned)xid) : NULL;

	*desc = e ? e->desc : NULL;
	return e ? e->action : HW_XID_DEGRADED;
}

/* ---- judgement ---- */

/* Append to a fixed buffer, cutting what does not fit. */
static void appendf(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	if (len + 1 >= size)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

/* "GPU 0 (GPU-...)" or "GPU 0" without a UUID. */
static void gpu_name(char *out, size_t size, const struct hw_gpu *g)
{
	if (g->uuid[0])
		snprintf(out, size, "GPU %d (%s)", g->index, g->uuid);
	else
		snprintf(out, size, "GPU %d", g->index);
}

static struct hw_condition *gpu_condition(struct hw_condition *out, size_t max, size_t *n,
					  const struct hw_gpu *g, enum proto_condition_kind kind,
					  enum proto_severity sev)
{
	struct hw_condition *c;

	if (*n >= max)
		return NULL;
	c = &out[(*n)++];
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->severity = sev;
	c->gpu = g->index;
	snprintf(c->gpu_uuid, sizeof(c->gpu_uuid), "%s", g->uuid);
	c->code = -1;
	gpu_name(c->evidence, sizeof(c->evidence), g);
	return c;
}

static const char *const counter_names[4] = {"replay", "recovery", "CRC flit", "CRC data"};

size_t hw_health_judge(struct hw_condition *out, size_t max, const struct hw_gpu *gpu,
		       const struct hw_gpu_reading *start, const struct hw_gpu_reading *prev,
		       const struct hw_gpu_reading *cur)
{
	const size_t ev = sizeof(out->evidence);
	struct hw_condition *c;
	size_t n = 0;
	unsigned long long r = cur->clock_reasons;
	bool thermal, power, rising = false;
	char links[PROTO_CONDITION_EVIDENCE_MAX + 1] = "";

	if (cur->lost) {
		if ((c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_GPU_LOST,
				       PROTO_SEVERITY_FATAL)))
			appendf(c->evidence, ev, " is lost: %s answered GPU is lost",
				cur->lost_call[0] ? cur->lost_call : "NVML");
		return n;
	}
	if (prev && prev->ecc_known && cur->ecc_known && cur->ecc_dbe > prev->ecc_dbe &&
	    (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_ECC_DBE, PROTO_SEVERITY_FATAL)))
		appendf(c->evidence, ev, ": volatile uncorrected ECC errors rose from %llu to %llu",
			prev->ecc_dbe, cur->ecc_dbe);
	if (cur->remap_known && cur->remap_failed &&
	    (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_ROW_REMAP_FAILED,
			       PROTO_SEVERITY_FATAL)))
		appendf(c->evidence, ev, ": row remapping failed (no spare rows left): replace it");
	if (cur->remap_known && cur->remap_pending &&
	    (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_ROW_REMAP_PENDING,
			       PROTO_SEVERITY_FATAL)))
		appendf(c->evidence, ev,
			": row remapping pending: reset the GPU (nvidia-smi -r, with the executor "
			"stopped)");
	if (cur->retired_known && cur->retired_pending &&
	    (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_RETIRED_PAGES_PENDING,
			       PROTO_SEVERITY_FATAL)))
		appendf(c->evidence, ev,
			": retired pages pending: reset the GPU or reload the driver to retire "
			"them");
	thermal = cur->reasons_known && (r & (REASON_SW_THERMAL | REASON_HW_THERMAL));
	power = cur->reasons_known && ((r & REASON_HW_POWER_BRAKE) ||
				       ((r & REASON_HW_SLOWDOWN) && !thermal));
	if (thermal && (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_THERMAL_SLOWDOWN,
					  PROTO_SEVERITY_DEGRADED)))
		appendf(c->evidence, ev, ": clocks slowed for temperature (%s%s, reasons 0x%llx)",
			r & REASON_HW_THERMAL ? "HW thermal slowdown" : "SW thermal slowdown",
			(r & REASON_HW_THERMAL) && (r & REASON_SW_THERMAL) ? " and SW" : "", r);
	if (power && (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_POWER_SLOWDOWN,
					PROTO_SEVERITY_DEGRADED)))
		appendf(c->evidence, ev, ": clocks slowed for power (%s, reasons 0x%llx)",
			r & REASON_HW_POWER_BRAKE ? "HW power brake" : "HW slowdown", r);
	for (int l = 0; l < cur->nlinks && l < HW_NVLINKS; l++) {
		const struct hw_link_reading *now = &cur->links[l];
		const struct hw_link_reading *was = start && l < start->nlinks ? &start->links[l] : NULL;
		const struct hw_link_reading *last = prev && l < prev->nlinks ? &prev->links[l] : NULL;

		if (was && was->known && was->active && now->known && !now->active)
			appendf(links, sizeof(links), "%sNVLink %d down (active at start)",
				links[0] ? "; " : "", l);
		if (!last || !last->errors_known || !now->errors_known)
			continue;
		for (int k = 0; k < 4; k++) {
			unsigned long long d = now->errors[k] > last->errors[k]
						   ? now->errors[k] - last->errors[k]
						   : 0;

			/* a recovery is a retraining of the link: never normal */
			if (d && (k == 1 || d >= HW_NVLINK_ERRORS_PER_CHECK)) {
				appendf(links, sizeof(links),
					"%sNVLink %d: %llu %s errors since the last check",
					links[0] ? "; " : "", l, d, counter_names[k]);
				rising = true;
			}
		}
	}
	if (links[0] && (c = gpu_condition(out, max, &n, gpu, PROTO_CONDITION_NVLINK_ERRORS,
					   PROTO_SEVERITY_DEGRADED))) {
		appendf(c->evidence, ev, ": %s", links);
		c->hold_ms = rising ? HW_HOLD_MS : 0;
	}
	return n;
}

bool hw_xid_judge(struct hw_condition *out, const struct hw_xid_table *t, const struct hw_gpu *gpu,
		  unsigned long long xid)
{
	const char *desc;
	enum hw_xid_action a = hw_xid_lookup(t, xid, &desc);
	char name[HW_UUID_MAX + 32];

	if (a == HW_XID_IGNORE)
		return false;
	memset(out, 0, sizeof(*out));
	out->kind = PROTO_CONDITION_XID;
	out->severity = a == HW_XID_FATAL ? PROTO_SEVERITY_FATAL : PROTO_SEVERITY_DEGRADED;
	out->gpu = gpu->index;
	snprintf(out->gpu_uuid, sizeof(out->gpu_uuid), "%s", gpu->uuid);
	out->code = (long long)xid;
	out->hold_ms = a == HW_XID_FATAL ? 0 : HW_HOLD_MS;
	gpu_name(name, sizeof(name), gpu);
	snprintf(out->evidence, sizeof(out->evidence), "Xid %llu on %s: %s", xid, name,
		 desc ? desc : "not in the Xid table (degraded until an --xid-file names it)");
	return true;
}

size_t hw_port_conditions(struct hw_condition *out, size_t max, const struct hw_hca *hcas,
			  size_t n, double expect_gbps)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		for (int j = 0; j < hcas[i].nports && k < max; j++) {
			const struct hw_port *p = &hcas[i].ports[j];
			bool down = strcmp(p->state, "ACTIVE") != 0;
			struct hw_condition *c;

			if (!down && !(expect_gbps > 0 && p->rate_gbps < expect_gbps))
				continue;
			c = &out[k++];
			memset(c, 0, sizeof(*c));
			c->kind = down ? PROTO_CONDITION_PORT_DOWN : PROTO_CONDITION_PORT_RATE_LOW;
			c->severity = PROTO_SEVERITY_DEGRADED;
			c->gpu = -1;
			c->code = -1;
			snprintf(c->port, sizeof(c->port), "%s/%d", hcas[i].name, p->port);
			if (down)
				snprintf(c->evidence, sizeof(c->evidence),
					 "%s port %d is %s (%s): NCCL does not use it", hcas[i].name,
					 p->port, p->state[0] ? p->state : "in no known state",
					 p->link_layer[0] ? p->link_layer : "unknown link layer");
			else
				snprintf(c->evidence, sizeof(c->evidence),
					 "%s port %d runs at %g Gb/s, below the expected %g Gb/s "
					 "(--expect-port-gbps)",
					 hcas[i].name, p->port, p->rate_gbps, expect_gbps);
			exec_text_clean(c->evidence);
		}
	return k;
}

json_t *hw_condition_json(const struct hw_condition *c)
{
	return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:s, s:I, s:I}", "kind",
			 proto_condition_kind_name(c->kind), "severity",
			 proto_severity_name(c->severity), "gpu",
			 c->gpu >= 0 ? json_integer(c->gpu) : json_null(), "gpu_uuid",
			 c->gpu >= 0 && c->gpu_uuid[0] ? json_string(c->gpu_uuid) : json_null(),
			 "port", c->port[0] ? json_string(c->port) : json_null(), "code",
			 c->code >= 0 ? json_integer((json_int_t)c->code) : json_null(), "evidence",
			 c->evidence, "first_seen", (json_int_t)c->first_seen, "last_seen",
			 (json_int_t)c->last_seen);
}

/* ---- the list ---- */

struct hw_conditions {
	pthread_mutex_t mu;
	struct hw_condition *c;
	size_t n, cap;
	struct ty_metrics *metrics; /* borrowed; NULL: none */
};

static const char *const metric_labels[] = {"kind", "severity", "gpu", "port", NULL};

int hw_conditions_new(struct hw_conditions **out, struct ty_metrics *metrics, struct ty_err *err)
{
	struct hw_conditions *l;
	int rc;

	*out = NULL;
	if (!(l = calloc(1, sizeof(*l))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	pthread_mutex_init(&l->mu, NULL);
	if (metrics && (rc = ty_metrics_family(metrics, TY_METRIC_GAUGE, HW_METRIC_CONDITION,
					       "The node's health conditions: 1 while one is "
					       "listed (heartbeat conditions[]), 0 after.",
					       metric_labels, NULL, 0, err))) {
		hw_conditions_free(l);
		return rc;
	}
	l->metrics = metrics;
	*out = l;
	return 0;
}

void hw_conditions_free(struct hw_conditions *l)
{
	if (!l)
		return;
	pthread_mutex_destroy(&l->mu);
	free(l->c);
	free(l);
}

static bool same(const struct hw_condition *a, const struct hw_condition *b)
{
	return a->kind == b->kind && a->gpu == b->gpu && a->code == b->code &&
	       !strcmp(a->port, b->port);
}

/* " on GPU 0", " on mlx5_0/1" or "" */
static void where(char *out, size_t size, const struct hw_condition *c)
{
	if (c->gpu >= 0)
		snprintf(out, size, " on GPU %d", c->gpu);
	else if (c->port[0])
		snprintf(out, size, " on %s", c->port);
	else
		out[0] = '\0';
}

static void gauge(struct hw_conditions *l, const struct hw_condition *c, double v)
{
	char gpu[16] = "";

	if (!l->metrics)
		return;
	if (c->gpu >= 0)
		snprintf(gpu, sizeof(gpu), "%d", c->gpu);
	ty_metrics_set(l->metrics, HW_METRIC_CONDITION,
		       (const char *[]){proto_condition_kind_name(c->kind),
					proto_severity_name(c->severity), gpu, c->port},
		       v);
}

bool hw_conditions_note(struct hw_conditions *l, const struct hw_condition *c, int64_t now,
			struct hw_condition *added)
{
	struct hw_condition *s = NULL;
	bool isnew = false;
	char at[HW_PORT_NAME_MAX + 16];

	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < l->n && !s; i++)
		if (same(&l->c[i], c))
			s = &l->c[i];
	if (s) {
		s->last_seen = now;
		/* a fatal one keeps the evidence that made it; a degraded one says what holds now */
		if (s->severity == PROTO_SEVERITY_DEGRADED) {
			memcpy(s->evidence, c->evidence, sizeof(s->evidence));
			s->hold_ms = c->hold_ms;
		}
		goto out;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct hw_condition *nc = realloc(l->c, cap * sizeof(*nc));

		if (!nc) {
			ty_error("cannot keep a condition: out of memory (%s)", c->evidence);
			goto out;
		}
		l->c = nc;
		l->cap = cap;
	}
	s = &l->c[l->n++];
	*s = *c;
	s->evidence[sizeof(s->evidence) - 1] = '\0';
	s->first_seen = s->last_seen = now;
	isnew = true;
	if (added)
		*added = *s;
	gauge(l, s, 1);
	where(at, sizeof(at), s);
	if (s->severity == PROTO_SEVERITY_FATAL)
		ty_warn("condition: fatal %s%s: %s", proto_condition_kind_name(s->kind), at,
			s->evidence);
	else
		ty_info("condition: degraded %s%s: %s", proto_condition_kind_name(s->kind), at,
			s->evidence);
out:
	pthread_mutex_unlock(&l->mu);
	return isnew;
}

size_t hw_conditions_expire(struct hw_conditions *l, int gpu, unsigned kinds,
			    const struct hw_condition *seen, size_t n, int64_t now)
{
	size_t removed = 0, k = 0;
	char at[HW_PORT_NAME_MAX + 16];

	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < l->n; i++) {
		struct hw_condition *c = &l->c[i];
		bool keep = c->severity == PROTO_SEVERITY_FATAL || !(kinds & (1u << c->kind)) ||
			    (gpu >= 0 && c->gpu != gpu) || c->last_seen + c->hold_ms > now;

		for (size_t j = 0; !keep && j < n; j++)
			keep = same(c, &seen[j]);
		if (keep) {
			l->c[k++] = *c;
			continue;
		}
		removed++;
		gauge(l, c, 0);
		where(at, sizeof(at), c);
		ty_info("condition cleared: degraded %s%s (seen from %lld to %lld ms)",
			proto_condition_kind_name(c->kind), at, (long long)c->first_seen,
			(long long)c->last_seen);
	}
	l->n = k;
	pthread_mutex_unlock(&l->mu);
	return removed;
}

json_t *hw_conditions_json(struct hw_conditions *l)
{
	json_t *a = json_array();

	if (!a || !l)
		return a;
	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < l->n; i++) {
		json_t *c = hw_condition_json(&l->c[i]);

		if (!c || json_array_append_new(a, c)) {
			json_decref(a);
			a = NULL;
			break;
		}
	}
	pthread_mutex_unlock(&l->mu);
	return a;
}

size_t hw_conditions_count(struct hw_conditions *l)
{
	size_t n;

	if (!l)
		return 0;
	pthread_mutex_lock(&l->mu);
	n = l->n;
	pthread_mutex_unlock(&l->mu);
	return n;
}

bool hw_conditions_fatal_for(struct hw_condition *out, struct hw_conditions *l, const int *gpus,
			     int n, int64_t since)
{
	bool found = false;

	if (!l)
		return false;
	pthread_mutex_lock(&l->mu);
	for (size_t i = 0; i < l->n && !found; i++) {
		const struct hw_condition *c = &l->c[i];
		bool mine = c->gpu < 0 && !c->port[0];

		for (int g = 0; !mine && g < n; g++)
			mine = c->gpu >= 0 && c->gpu == gpus[g];
		if (c->severity == PROTO_SEVERITY_FATAL && mine && c->first_seen >= since) {
			*out = *c;
			found = true;
		}
	}
	pthread_mutex_unlock(&l->mu);
	return found;
}
