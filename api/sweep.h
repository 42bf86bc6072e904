/*
 * Sweeps: a job template run once per parameter set. The expansion of a
 * sweep body into parameter sets and the trial specs are pure (no I/O, no
 * clock, no global state) so they are table-tested; sweeps.c stores them.
 */
#ifndef TY_API_SWEEP_H
#define TY_API_SWEEP_H

#include "api.h"

#include <stddef.h>
#include <stdint.h>

/* Most trials one sweep may hold (a list, a grid product or a random count). */
#define API_SWEEP_MAX_TRIALS 1000
/* Most parameters per trial. */
#define API_SWEEP_MAX_PARAMS 32
/* Longest parameter name. */
#define API_SWEEP_MAX_NAME 64

/*
 * The splitmix64 generator (Steele, Lea, Flood 2014) behind "random":
 * state += 0x9E3779B97F4A7C15; z = state;
 * z = (z ^ z >> 30) * 0xBF58476D1CE4E5B9; z = (z ^ z >> 27) * 0x94D049BB133111EB;
 * return z ^ z >> 31. The first state is the seed.
 */
uint64_t api_sweep_splitmix64(uint64_t *state);

/*
 * The parameter sets of a sweep body: exactly one of "trials" (a list of
 * objects), "grid" (object of value lists; the cartesian product with the
 * keys in byte order and the last key varying fastest, values in the given
 * order) or "random" ({count, seed, params}); see docs/api.md "Sweeps".
 * Values are JSON scalars (string, number, boolean). Returns a new array of
 * objects, or NULL with p naming the offending field (422; 500 on ENOMEM).
 */
json_t *api_sweep_expand(const json_t *body, struct api_problem *p);

/*
 * The environment name of a parameter: "TRAINYARD_PARAM_" + the name upper-
 * cased with every byte outside [A-Za-z0-9] replaced by '_'. False when it
 * does not fit in sz.
 */
bool api_sweep_env_name(char *out, size_t sz, const char *param);

/*
 * The text a scalar parameter value has in the environment: a string as
 * itself, true/false, an integer in decimal, a real in the shortest "%.*g"
 * form that reads back to the same double (always with a '.' or an 'e').
 * New string (caller frees), NULL on ENOMEM or a non-scalar.
 */
char *api_sweep_value_text(const json_t *v);

/*
 * A trial's job spec: a copy of the validated template with env
 * TRAINYARD_PARAMS (compact JSON of params, keys in byte order) and one
 * TRAINYARD_PARAM_<NAME> per parameter added. NULL on ENOMEM.
 */
json_t *api_sweep_trial_spec(const json_t *tmpl, const json_t *params);

/* Handlers (sweeps.c). */
int api_h_sweeps_create(struct api_req *r, struct ty_err *err);
int api_h_sweeps_list(struct api_req *r, struct ty_err *err);
int api_h_sweeps_get(struct api_req *r, struct ty_err *err);
int api_h_sweeps_cancel(struct api_req *r, struct ty_err *err);

#endif
