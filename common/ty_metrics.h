/*
 * Prometheus metrics: a registry of counter, gauge and histogram families
 * with labels, written out in the Prometheus text exposition format
 * (version 0.0.4). Every function locks the registry, so threads may update
 * it while another thread writes it out.
 *
 *	struct ty_metrics *m = ty_metrics_new();
 *	const char *lbl[] = {"route", "status", NULL};
 *	ty_metrics_family(m, TY_METRIC_COUNTER, "x_requests_total", "Requests.", lbl, NULL, 0,
 *			  &err);
 *	ty_metrics_add(m, "x_requests_total", (const char *[]){"/v1/jobs", "200"}, 1);
 *	ty_metrics_write(m, &buf);
 *
 * Families are written in registration order, series in creation order.
 */
#ifndef TY_METRICS_H
#define TY_METRICS_H

#include "ty_buf.h"
#include "ty_err.h"

enum ty_metric_type { TY_METRIC_COUNTER, TY_METRIC_GAUGE, TY_METRIC_HISTOGRAM };

#define TY_METRICS_MAX_LABELS 8
#define TY_METRICS_MAX_BUCKETS 16

/* The content type of ty_metrics_write's output. */
#define TY_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct ty_metrics;

/* An empty registry, or NULL when out of memory. */
struct ty_metrics *ty_metrics_new(void);
/* NULL-safe. */
void ty_metrics_free(struct ty_metrics *m);

/*
 * Register a family. labels is a NULL-terminated list of label names (or
 * NULL for none; at most TY_METRICS_MAX_LABELS, never "le"); bounds are a
 * histogram's ascending upper bounds without +Inf (ignored for the other
 * types). A family without labels has its one series from the start (0).
 * TY_EINVAL for a bad name, label or bounds, TY_ECONFLICT if registered.
 */
int ty_metrics_family(struct ty_metrics *m, enum ty_metric_type type, const char *name,
		      const char *help, const char *const *labels, const double *bounds,
		      int nbounds, struct ty_err *err);

/*
 * Update the series of family name with the given label values (as many as
 * the family has label names; NULL when it has none), creating it at 0.
 * add: counters (v >= 0) and gauges; set: gauges; observe: histograms.
 * TY_ENOTFOUND for an unknown family, TY_EINVAL for the wrong type or a
 * negative counter increment (or a NULL registry), TY_ENOMEM.
 */
int ty_metrics_add(struct ty_metrics *m, const char *name, const char *const *values, double v);
int ty_metrics_set(struct ty_metrics *m, const char *name, const char *const *values, double v);
int ty_metrics_observe(struct ty_metrics *m, const char *name, const char *const *values, double v);
/*
 * Drop the series of family name with these label values, so a gauge of
 * something gone (a job that held a GPU) is no longer written out. The
 * family stays. TY_ENOTFOUND when there is no such family or series,
 * TY_EINVAL for a NULL registry.
 */
int ty_metrics_remove(struct ty_metrics *m, const char *name, const char *const *values);

/* Append the exposition of every family to out; TY_ENOMEM if out ran out. */
int ty_metrics_write(struct ty_metrics *m, struct ty_buf *out);

/* Pure helpers (exposed for tests). */
/* A label value with \ " and newline escaped (no quotes added). */
void ty_metrics_escape_label(struct ty_buf *out, const char *s);
/* A HELP text with \ and newline escaped. */
void ty_metrics_escape_help(struct ty_buf *out, const char *s);
/*
 * A sample value: integers below 2^53 in plain digits, others as the
 * shortest round-tripping %g, "+Inf", "-Inf" or "NaN".
 */
void ty_metrics_number(struct ty_buf *out, double v);
/* Whether s is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*). */
bool ty_metrics_name_ok(const char *s);
/* Whether s is a valid label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting "__"). */
bool ty_metrics_label_ok(const char *s);

#endif
