/* Per-token rate limits: a token bucket per API token, in memory, per process. */
#include "api.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool api_bucket_take(struct api_bucket *b, double now, double rps, double burst,
		     int *retry_after)
{
	double need;

	if (now > b->last) {
		b->tokens += (now - b->last) * rps;
		if (b->tokens > burst)
			b->tokens = burst;
		b->last = now;
	}
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
		*retry_after = 0;
		return true;
	}
	need = ceil((1.0 - b->tokens) / rps);
	*retry_after = need < 1.0 ? 1 : need > 86400.0 ? 86400 : (int)need;
	return false;
}

/*
 * Buckets live in stripes, each a mutex and an open-addressing table of
 * token ids, so worker threads rarely wait for one another. Entries are
 * never removed: there is one per token that was used, as many as the
 * api_tokens table has rows.
 */
#define STRIPES 16

struct slot {
	int64_t key; /* 0: empty */
	struct api_bucket b;
};

struct stripe {
	pthread_mutex_t mu;
	struct slot *slots;
	size_t cap, used; /* cap: a power of two */
};

struct api_ratelimit {
	double rps, burst;
	struct stripe stripes[STRIPES];
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

struct api_ratelimit *api_ratelimit_new(int rps, int burst)
{
	struct api_ratelimit *rl;

	if (rps <= 0 || !(rl = calloc(1, sizeof(*rl))))
		return NULL;
	rl->rps = rps;
	rl->burst = burst < 1 ? 1 : burst;
	for (int i = 0; i < STRIPES; i++)
		pthread_mutex_init(&rl->stripes[i].mu, NULL);
	return rl;
}

void api_ratelimit_free(struct api_ratelimit *rl)
{
	if (!rl)
		return;
	for (int i = 0; i < STRIPES; i++) {
		pthread_mutex_destroy(&rl->stripes[i].mu);
		free(rl->stripes[i].slots);
	}
	free(rl);
}

/* The slot of key in st (inserted when absent), or NULL when out of memory. */
static struct slot *lookup(struct stripe *st, int64_t key, uint64_t h)
{
	size_t i;

	if ((st->used + 1) * 2 > st->cap) {
		size_t cap = st->cap ? st->cap * 2 : 64;
		struct slot *s = calloc(cap, sizeof(*s));

		if (!s)
			return NULL;
		for (size_t k = 0; k < st->cap; k++) {
			if (!st->slots[k].key)
				continue;
			i = mix((uint64_t)st->slots[k].key) & (cap - 1);
			while (s[i].key)
				i = (i + 1) & (cap - 1);
			s[i] = st->slots[k];
		}
		free(st->slots);
		st->slots = s;
		st->cap = cap;
	}
	for (i = h & (st->cap - 1); st->slots[i].key; i = (i + 1) & (st->cap - 1))
		if (st->slots[i].key == key)
			return &st->slots[i];
	st->slots[i].key = key;
	st->used++;
	return &st->slots[i];
}

int api_ratelimit_take(struct api_ratelimit *rl, int64_t key, double now)
{
	uint64_t h = mix((uint64_t)key);
	struct stripe *st = &rl->stripes[(h >> 60) % STRIPES];
	struct slot *s;
	int wait = 0;

	pthread_mutex_lock(&st->mu);
	if ((s = lookup(st, key, h))) {
		if (s->b.last == 0.0 && s->b.tokens == 0.0)
			s->b = (struct api_bucket){.tokens = rl->burst, .last = now};
		api_bucket_take(&s->b, now, rl->rps, rl->burst, &wait);
	}
	/* out of memory: let the request through rather than refuse everyone */
	pthread_mutex_unlock(&st->mu);
	return wait;
}

int api__ratelimit_check(struct api_req *r, struct api_ratelimit *rl, struct ty_err *err)
{
	char secs[16];
	int wait;

	/* trial metrics tokens (token_id 0) are bound to one attempt and two routes */
	if (!rl || r->auth.token_id <= 0)
		return 0;
	if (!(wait = api_ratelimit_take(rl, r->auth.token_id, api__metrics_now())))
		return 0;
	snprintf(secs, sizeof(secs), "%d", wait);
	api_reply_header(r, "Retry-After", secs);
	return api_fail(r, err, API_P_RATE_LIMITED, NULL,
			"token '%s' made more than %d requests in a burst or %d a second on "
			"average; retry in %d s",
			r->auth.token_name, (int)rl->burst, (int)rl->rps, wait);
}
