/* Prometheus metrics registry and text exposition (see ty_metrics.h). */
#include "ty_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct series {
	struct series *next;
	char *values[TY_METRICS_MAX_LABELS];
	double value;					    /* counter, gauge */
	double sum;					    /* histogram */
	unsigned long long count;			    /* histogram */
	unsigned long long buckets[TY_METRICS_MAX_BUCKETS]; /* per bound, not cumulative */
};

struct family {
	struct family *next;
	enum ty_metric_type type;
	char *name, *help;
	char *labels[TY_METRICS_MAX_LABELS];
	int nlabels;
	double bounds[TY_METRICS_MAX_BUCKETS];
	int nbounds;
	struct series *series, **tail;
};

struct ty_metrics {
	pthread_mutex_t mu;
	struct family *families, **tail;
};

struct ty_metrics *ty_metrics_new(void)
{
	struct ty_metrics *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	pthread_mutex_init(&m->mu, NULL);
	m->tail = &m->families;
	return m;
}

static void series_free(struct series *s, int nlabels)
{
	for (int i = 0; i < nlabels; i++)
		free(s->values[i]);
	free(s);
}

static void family_free(struct family *f)
{
	struct series *s, *next;

	for (s = f->series; s; s = next) {
		next = s->next;
		series_free(s, f->nlabels);
	}
	for (int i = 0; i < f->nlabels; i++)
		free(f->labels[i]);
	free(f->name);
	free(f->help);
	free(f);
}

void ty_metrics_free(struct ty_metrics *m)
{
	struct family *f, *next;

	if (!m)
		return;
	for (f = m->families; f; f = next) {
		next = f->next;
		family_free(f);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}

bool ty_metrics_name_ok(const char *s)
{
	if (!s || !*s || (*s >= '0' && *s <= '9'))
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == ':'))
			return false;
	return true;
}

bool ty_metrics_label_ok(const char *s)
{
	return s && !strchr(s, ':') && ty_metrics_name_ok(s) && strncmp(s, "__", 2) != 0;
}

static struct family *find(struct ty_metrics *m, const char *name)
{
	for (struct family *f = m->families; f; f = f->next)
		if (strcmp(f->name, name) == 0)
			return f;
	return NULL;
}

static bool series_is(const struct family *f, const struct series *s, const char *const *values)
{
	for (int i = 0; i < f->nlabels; i++)
		if (strcmp(s->values[i], values[i] ? values[i] : "") != 0)
			return false;
	return true;
}

/* The series with these label values, created at zero if missing; NULL on OOM. */
static struct series *series_get(struct family *f, const char *const *values)
{
	struct series *s;

	for (s = f->series; s; s = s->next)
		if (series_is(f, s, values))
			return s;
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	for (int i = 0; i < f->nlabels; i++) {
		if (!(s->values[i] = strdup(values[i] ? values[i] : ""))) {
			series_free(s, i);
			return NULL;
		}
	}
	*f->tail = s;
	f->tail = &s->next;
	return s;
}

int ty_metrics_family(struct ty_metrics *m, enum ty_metric_type type, const char *name,
		      const char *help, const char *const *labels, const double *bounds,
		      int nbounds, struct ty_err *err)
{
	struct family *f;
	int rc = 0;

	if (!ty_metrics_name_ok(name))
		return ty_err_set(err, TY_EINVAL, "'%s' is not a valid metric name",
				  name ? name : "");
	if (type == TY_METRIC_HISTOGRAM) {
		if (nbounds < 1 || nbounds > TY_METRICS_MAX_BUCKETS)
			return ty_err_set(err, TY_EINVAL,
					  "%s: a histogram needs 1-%d bounds, not %d", name,
					  TY_METRICS_MAX_BUCKETS, nbounds);
		for (int i = 0; i < nbounds; i++)
			if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
				return ty_err_set(err, TY_EINVAL,
						  "%s: bounds must be finite and ascending", name);
	}
	if (!(f = calloc(1, sizeof(*f))))
		return ty_err_set(err, TY_ENOMEM, NULL);
	f->type = type;
	f->tail = &f->series;
	f->name = strdup(name);
	f->help = strdup(help ? help : "");
	if (!f->name || !f->help)
		goto oom;
	for (int i = 0; labels && labels[i]; i++) {
		if (i == TY_METRICS_MAX_LABELS) {
			rc = ty_err_set(err, TY_EINVAL, "%s: more than %d labels", name,
					TY_METRICS_MAX_LABELS);
			goto fail;
		}
		if (!ty_metrics_label_ok(labels[i]) ||
		    (type == TY_METRIC_HISTOGRAM && strcmp(labels[i], "le") == 0)) {
			rc = ty_err_set(err, TY_EINVAL, "%s: '%s' is not a valid label name", name,
					labels[i]);
			goto fail;
		}
		if (!(f->labels[i] = strdup(labels[i])))
			goto oom;
		f->nlabels++;
	}
	if (type == TY_METRIC_HISTOGRAM) {
		memcpy(f->bounds, bounds, (size_t)nbounds * sizeof(*bounds));
		f->nbounds = nbounds;
	}
	if (f->nlabels == 0 && !series_get(f, NULL))
		goto oom;
	pthread_mutex_lock(&m->mu);
	if (find(m, name)) {
		pthread_mutex_unlock(&m->mu);
		rc = ty_err_set(err, TY_ECONFLICT, "metric '%s' is already registered", name);
		goto fail;
	}
	*m->tail = f;
	m->tail = &f->next;
	pthread_mutex_unlock(&m->mu);
	return 0;
oom:
	rc = ty_err_set(err, TY_ENOMEM, NULL);
fail:
	family_free(f);
	return rc;
}

enum op { OP_ADD, OP_SET, OP_OBSERVE };

static int update(struct ty_metrics *m, const char *name, const char *const *values, double v,
		  enum op op)
{
	struct family *f;
	struct series *s;
	int rc = 0;

	if (!m)
		return TY_EINVAL;
	pthread_mutex_lock(&m->mu);
	if (!(f = find(m, name))) {
		rc = TY_ENOTFOUND;
	} else if ((op == OP_OBSERVE) != (f->type == TY_METRIC_HISTOGRAM) ||
		   (op == OP_SET && f->type != TY_METRIC_GAUGE) ||
		   (op == OP_ADD && f->type == TY_METRIC_COUNTER && !(v >= 0))) {
		rc = TY_EINVAL;
	} else if (!(s = series_get(f, values))) {
		rc = TY_ENOMEM;
	} else if (op == OP_ADD) {
		s->value += v;
	} else if (op == OP_SET) {
		s->value = v;
	} else {
		for (int i = 0; i < f->nbounds; i++) {
			if (v <= f->bounds[i]) {
				s->buckets[i]++;
				break;
			}
		}
		s->count++;
		s->sum += v;
	}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

int ty_metrics_add(struct ty_metrics *m, const char *name, const char *const *values, double v)
{
	return update(m, name, values, v, OP_ADD);
}

int ty_metrics_set(struct ty_metrics *m, const char *name, const char *const *values, double v)
{
	return update(m, name, values, v, OP_SET);
}

int ty_metrics_observe(struct ty_metrics *m, const char *name, const char *const *values, double v)
{
	return update(m, name, values, v, OP_OBSERVE);
}

int ty_metrics_remove(struct ty_metrics *m, const char *name, const char *const *values)
{
	struct family *f;
	int rc = TY_ENOTFOUND;

	if (!m)
		return TY_EINVAL;
	pthread_mutex_lock(&m->mu);
	if ((f = find(m, name)) && f->nlabels) /* an unlabelled family keeps its one series */
		for (struct series **p = &f->series; *p; p = &(*p)->next) {
			struct series *s = *p;

			if (!series_is(f, s, values))
				continue;
			*p = s->next;
			if (f->tail == &s->next)
				f->tail = p;
			series_free(s, f->nlabels);
			rc = 0;
			break;
		}
	pthread_mutex_unlock(&m->mu);
	return rc;
}

void ty_metrics_escape_label(struct ty_buf *out, const char *s)
{
	for (; *s; s++) {
		size_t n = strcspn(s, "\\\"\n");

		ty_buf_append(out, s, n);
		s += n;
		if (!*s)
			break;
		ty_buf_puts(out, *s == '\\' ? "\\\\" : *s == '"' ? "\\\"" : "\\n");
	}
}

void ty_metrics_escape_help(struct ty_buf *out, const char *s)
{
	for (; *s; s++) {
		size_t n = strcspn(s, "\\\n");

		ty_buf_append(out, s, n);
		s += n;
		if (!*s)
			break;
		ty_buf_puts(out, *s == '\\' ? "\\\\" : "\\n");
	}
}

void ty_metrics_number(struct ty_buf *out, double v)
{
	char s[32];

	if (isnan(v)) {
		ty_buf_puts(out, "NaN");
		return;
	}
	if (isinf(v)) {
		ty_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(long long)v) {
		ty_buf_printf(out, "%.0f", v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(s, sizeof(s), "%.*g", prec, v);
		if (strtod(s, NULL) == v)
			break;
	}
	ty_buf_puts(out, s);
}

/* name{labels,le="x"} value\n; le may be NULL. */
static void sample(struct ty_buf *out, const struct family *f, const char *suffix,
		   const struct series *s, const char *le, double v)
{
	ty_buf_puts(out, f->name);
	ty_buf_puts(out, suffix);
	if (f->nlabels || le) {
		ty_buf_puts(out, "{");
		for (int i = 0; i < f->nlabels; i++) {
			ty_buf_printf(out, "%s%s=\"", i ? "," : "", f->labels[i]);
			ty_metrics_escape_label(out, s->values[i]);
			ty_buf_puts(out, "\"");
		}
		if (le)
			ty_buf_printf(out, "%sle=\"%s\"", f->nlabels ? "," : "", le);
		ty_buf_puts(out, "}");
	}
	ty_buf_puts(out, " ");
	ty_metrics_number(out, v);
	ty_buf_puts(out, "\n");
}

int ty_metrics_write(struct ty_metrics *m, struct ty_buf *out)
{
	static const char *const type_names[] = {"counter", "gauge", "histogram"};

	pthread_mutex_lock(&m->mu);
	for (const struct family *f = m->families; f; f = f->next) {
		ty_buf_printf(out, "# HELP %s ", f->name);
		ty_metrics_escape_help(out, f->help);
		ty_buf_printf(out, "\n# TYPE %s %s\n", f->name, type_names[f->type]);
		for (const struct series *s = f->series; s; s = s->next) {
			unsigned long long cum = 0;

			if (f->type != TY_METRIC_HISTOGRAM) {
				sample(out, f, "", s, NULL, s->value);
				continue;
			}
			for (int i = 0; i < f->nbounds; i++) {
				struct ty_buf le = TY_BUF_INIT;

				cum += s->buckets[i];
				ty_metrics_number(&le, f->bounds[i]);
				sample(out, f, "_bucket", s, le.data ? le.data : "", (double)cum);
				ty_buf_free(&le);
			}
			sample(out, f, "_bucket", s, "+Inf", (double)s->count);
			sample(out, f, "_sum", s, NULL, s->sum);
			sample(out, f, "_count", s, NULL, (double)s->count);
		}
	}
	pthread_mutex_unlock(&m->mu);
	return out->oom ? TY_ENOMEM : 0;
}
