/* Internals shared by the simulation's files. */
#ifndef TY_SIM_INT_H
#define TY_SIM_INT_H

#include <stdint.h>

#define SIM_MAX_TEAMS 64

uint64_t sim__rand(uint64_t *state);
/* Uniform in [0, 1). */
double sim__uniform(uint64_t *state);
/* Uniform in [0, n). */
int sim__below(uint64_t *state, int n);

struct sim_delay;
/* Fill d with nearest-rank percentiles of the n values v (sorted in place). */
void sim__delay_fill(struct sim_delay *d, double *v, int64_t n);
/* x[i] = clamp(λ·weight[i], lo[i], hi[i]) with λ such that the x add up to cap. */
void sim__water_fill(double *x, const double *weight, const double *lo, const double *hi, int n,
		     double cap);

#endif
