/*
 * The answer to a what-if request (what_if.h; docs/api.md, "What-if"): the
 * estimates the core made for the job as asked and its alternatives.
 */
#include "scheduler.h"
#include "what_if.h"

#include <stdio.h>

static json_t *ts_json(int64_t ms)
{
	char buf[SCHED_RFC3339_LEN];

	sched_rfc3339(buf, sizeof(buf), ms);
	return json_string(buf);
}

/* The spec merge patch (RFC 7386) from the asked job to w, and a line saying it. */
static json_t *patch(char *summary, size_t n, const struct sched_what_if *w,
		     const struct sched_what_if *asked)
{
	switch (w->change) {
	case SCHED_WI_NODES:
		snprintf(summary, n, "%d node%s instead of %d", w->job.nodes,
			 w->job.nodes == 1 ? "" : "s", asked->job.nodes);
		return json_pack("{s:{s:i}}", "resources", "nodes", w->job.nodes);
	case SCHED_WI_SPOT:
		snprintf(summary, n, "spot capacity allowed");
		return json_pack("{s:{s:b}}", "spot", "allowed", 1);
	case SCHED_WI_TOPOLOGY:
		if (w->job.required == SCHED_TOPO_NONE) {
			snprintf(summary, n, "any nodes instead of one %s",
				 sched_topo_name(asked->job.required));
			return json_pack("{s:{s:n}}", "topology", "required");
		}
		snprintf(summary, n, "one %s instead of one %s", sched_topo_name(w->job.required),
			 sched_topo_name(asked->job.required));
		return json_pack("{s:{s:s}}", "topology", "required",
				 sched_topo_name(w->job.required));
	default:
		snprintf(summary, n, "as asked");
		return json_object();
	}
}

/* estimated_start, starts_now, estimate and reason of w into o (owned). */
static json_t *estimate_json(json_t *o, const struct sched_what_if *w)
{
	bool at = w->est.kind == SCHED_EST_NOW || w->est.kind == SCHED_EST_AT;

	if (!o ||
	    json_object_set_new(o, "estimated_start",
				at ? ts_json(w->est.start_ms) : json_null()) ||
	    json_object_set_new(o, "starts_now", json_boolean(w->est.kind == SCHED_EST_NOW)) ||
	    json_object_set_new(o, "estimate", sched_estimate_basis(&w->est)) ||
	    json_object_set_new(o, "reason", w->reason[0] ? json_string(w->reason) : json_null())) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *sched_what_if_answer(const struct sched_what_if_ask *a, int64_t now_ms)
{
	json_t *alts = json_array(), *out;

	for (int k = 1; alts && k < a->n; k++) {
		if (!sched_what_if_sooner(&a->v[k], &a->v[0]))
			continue; /* an alternative that does not help is not offered */
		char summary[128];
		json_t *p = patch(summary, sizeof(summary), &a->v[k], &a->v[0]);
		json_t *alt = estimate_json(
		    json_pack("{s:s, s:o?}", "summary", summary, "spec_patch", p), &a->v[k]);

		if (!p || !alt || json_array_append_new(alts, alt)) {
			json_decref(alts);
			return NULL;
		}
	}
	if (!alts)
		return NULL;
	out = estimate_json(json_object(), &a->v[0]);
	if (!out || json_object_set_new(out, "alternatives", alts) ||
	    json_object_set_new(out, "snapshot_at", ts_json(now_ms))) {
		json_decref(out);
		return NULL;
	}
	return out;
}
