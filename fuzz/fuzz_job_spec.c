/*
 * The validators of POSTed documents (api/validate.c, api/job_metrics.c):
 * the input is parsed as the API parses a body (ty_json_parse, the default
 * --max-json-depth 32) and every object goes through api_validate_job,
 * api_validate_team (create and patch) and api_metrics_report_check.
 * Invariants: a refusal names a status and a code; a normalised spec
 * validates again to itself (its null "name" left out, as a client would).
 */
#include "api.h"
#include "fuzz.h"
#include "ty_json.h"

static void check_problem(const struct api_problem *p)
{
	FUZZ_CHECK(p->code && *p->code);
	FUZZ_CHECK(p->status == 400 || p->status == 422);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ty_err err = {0};
	struct api_problem p = {0};
	json_t *body = NULL, *spec;

	if (ty_json_parse(&body, (const char *)data, size, 32, &err)) {
		FUZZ_CHECK(err.code == TY_EPARSE || err.code == TY_ETOOBIG);
		return 0;
	}
	if (!json_is_object(body)) {
		json_decref(body);
		return 0;
	}
	spec = api_validate_job(body, &p);
	if (spec) {
		struct api_problem p2 = {0};
		json_t *again, *in = json_deep_copy(spec);

		FUZZ_CHECK(in);
		if (json_is_null(json_object_get(in, "name")))
			json_object_del(in, "name");
		again = api_validate_job(in, &p2);
		if (!again)
			fprintf(stderr, "normalised spec refused: %s %s\n", p2.field, p2.detail);
		FUZZ_CHECK(again && json_equal(again, spec));
		json_decref(again);
		json_decref(in);
		json_decref(spec);
	} else {
		check_problem(&p);
	}
	for (int create = 0; create < 2; create++) {
		memset(&p, 0, sizeof(p));
		if (api_validate_team(body, create, &p))
			check_problem(&p);
	}
	memset(&p, 0, sizeof(p));
	if (api_metrics_report_check(body, &p))
		check_problem(&p);
	json_decref(body);
	return 0;
}
