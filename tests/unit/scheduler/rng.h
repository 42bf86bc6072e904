/*
 * A seeded, reproducible random source for the policy core's property
 * tests (splitmix64): the same seed gives the same snapshots everywhere.
 */
#ifndef TY_TEST_RNG_H
#define TY_TEST_RNG_H

#include <stdbool.h>
#include <stdint.h>

struct rng {
	uint64_t s;
};

static inline uint64_t rnext(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline int64_t rin(struct rng *r, int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnext(r) % (uint64_t)(hi - lo + 1));
}

static inline bool chance(struct rng *r, int pct)
{
	return rin(r, 1, 100) <= pct;
}

#endif
