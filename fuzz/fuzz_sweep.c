/*
 * The sweep expander (api/sweep_expand.c) on a POSTed sweep body: the
 * parameter sets of "trials", "grid" or "random", and, when "template"
 * validates as a job spec (api_validate_job, with the body's team as
 * sweeps.c gives it), every trial's spec. Invariants: at most
 * API_SWEEP_MAX_TRIALS sets, each an object of at most
 * API_SWEEP_MAX_PARAMS scalars; every trial spec carries TRAINYARD_PARAMS.
 */
#include "api.h"
#include "fuzz.h"
#include "sweep.h"
#include "ty_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ty_err err = {0};
	struct api_problem p = {0};
	json_t *body = NULL, *sets, *set, *tmpl, *spec = NULL;
	size_t i;

	if (ty_json_parse(&body, (const char *)data, size, 32, &err) || !json_is_object(body)) {
		json_decref(body);
		return 0;
	}
	sets = api_sweep_expand(body, &p);
	if (!sets) {
		FUZZ_CHECK(p.code && (p.status == 400 || p.status == 422));
		json_decref(body);
		return 0;
	}
	FUZZ_CHECK(json_is_array(sets) && json_array_size(sets) <= API_SWEEP_MAX_TRIALS);
	tmpl = json_object_get(body, "template");
	if (json_is_object(tmpl) && (tmpl = json_deep_copy(tmpl))) {
		struct api_problem tp = {0};

		json_object_set(tmpl, "team", json_object_get(body, "team"));
		spec = api_validate_job(tmpl, &tp);
		json_decref(tmpl);
	}
	json_array_foreach(sets, i, set) {
		const char *k;
		json_t *v;

		FUZZ_CHECK(json_is_object(set) && json_object_size(set) <= API_SWEEP_MAX_PARAMS);
		json_object_foreach(set, k, v) {
			char name[128], *text = api_sweep_value_text(v);

			FUZZ_CHECK(text);
			free(text);
			FUZZ_CHECK(api_sweep_env_name(name, sizeof(name), k));
		}
		if (spec) {
			json_t *ts = api_sweep_trial_spec(spec, set);

			FUZZ_CHECK(ts);
			FUZZ_CHECK(json_is_string(
			    json_object_get(json_object_get(ts, "env"), "TRAINYARD_PARAMS")));
			json_decref(ts);
		}
	}
	json_decref(spec);
	json_decref(sets);
	json_decref(body);
	return 0;
}
