/* Bearer-token authentication, the token cache, and token issuing. */
#include "api.h"
#include "ty_crypto.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * A trial metrics token: the attempt it was drawn for, while that attempt
 * runs and for API_TRIAL_TOKEN_GRACE after it ended (a last report may race
 * the ranks' exit). It acts as a member of the job's team.
 */
static int trial_token(struct api_req *r, const char *token, struct ty_err *err)
{
	char hash[TY_SHA256_HEX_LEN + 1];
	bool found;
	int rc;

	ty_sha256_hex(hash, token, strlen(token));
	if ((rc = api_store_trial_token_by_hash(&found, &r->auth, r->pg, r->arena, hash, err)))
		return rc;
	if (!found)
		return ty_err_set(err, TY_EAUTH,
				  "unknown trial metrics token, or its attempt ended more than "
				  API_TRIAL_TOKEN_GRACE " ago");
	return 0;
}

/* ---- the token cache ---- */

#define TOKENS_BUCKETS 1024
/* More entries than this empties the cache: a bound, not an LRU. */
#define TOKENS_MAX 16384

struct token_entry {
	struct token_entry *next;
	char hash[TY_SHA256_HEX_LEN + 1];
	int64_t id, team_id;
	enum api_role role;
	char *team, *name; /* team NULL for admins */
};

struct api_tokens {
	pthread_mutex_t mu;
	struct token_entry *bucket[TOKENS_BUCKETS];
	int n;
	bool live;
	/* bumped by every drop: a row read before it must not be cached after it */
	uint64_t gen;
};

struct api_tokens *api__tokens_new(void)
{
	struct api_tokens *t = calloc(1, sizeof(*t));

	if (t)
		pthread_mutex_init(&t->mu, NULL);
	return t;
}

static void entry_free(struct token_entry *e)
{
	if (!e)
		return;
	free(e->team);
	free(e->name);
	free(e);
}

static unsigned bucket_of(const char *hash)
{
	return (unsigned)strtoul((char[5]){hash[0], hash[1], hash[2], hash[3], '\0'}, NULL, 16) %
	       TOKENS_BUCKETS;
}

/* Under t->mu. */
static void drop(struct api_tokens *t, int64_t id)
{
	t->gen++;
	for (int b = 0; b < TOKENS_BUCKETS; b++)
		for (struct token_entry **pp = &t->bucket[b]; *pp;) {
			struct token_entry *e = *pp;

			if (id && e->id != id) {
				pp = &e->next;
				continue;
			}
			*pp = e->next;
			entry_free(e);
			t->n--;
		}
}

void api__tokens_free(struct api_tokens *t)
{
	if (!t)
		return;
	drop(t, 0);
	pthread_mutex_destroy(&t->mu);
	free(t);
}

void api__tokens_forget(struct api_tokens *t, int64_t id)
{
	pthread_mutex_lock(&t->mu);
	drop(t, id);
	pthread_mutex_unlock(&t->mu);
}

void api__tokens_live(struct api_tokens *t, bool live)
{
	pthread_mutex_lock(&t->mu);
	drop(t, 0); /* revocations may have been missed either way */
	t->live = live;
	pthread_mutex_unlock(&t->mu);
}

/* r->auth from the cache: true when hash was there. *gen: the generation to cache a read under. */
static bool cached(struct api_req *r, uint64_t *gen, struct api_tokens *t, const char *hash)
{
	struct token_entry *e;
	bool hit = false;

	pthread_mutex_lock(&t->mu);
	*gen = t->gen;
	for (e = t->live ? t->bucket[bucket_of(hash)] : NULL; e; e = e->next)
		if (ty_secure_equal(e->hash, hash))
			break;
	if (e) {
		r->auth.token_id = e->id;
		r->auth.role = e->role;
		r->auth.team_id = e->team_id;
		r->auth.team = e->team ? ty_arena_strdup(r->arena, e->team) : NULL;
		r->auth.token_name = ty_arena_strdup(r->arena, e->name);
		hit = (!e->team || r->auth.team) && r->auth.token_name;
	}
	pthread_mutex_unlock(&t->mu);
	return hit;
}

static void cache(struct api_tokens *t, uint64_t gen, const char *hash, const struct api_auth *a)
{
	struct token_entry *e = calloc(1, sizeof(*e));
	unsigned b = bucket_of(hash);

	if (!e || !(e->name = strdup(a->token_name)) || (a->team && !(e->team = strdup(a->team)))) {
		entry_free(e);
		return;
	}
	snprintf(e->hash, sizeof(e->hash), "%s", hash);
	e->id = a->token_id;
	e->team_id = a->team_id;
	e->role = a->role;
	pthread_mutex_lock(&t->mu);
	if (!t->live || t->gen != gen) {
		pthread_mutex_unlock(&t->mu);
		entry_free(e);
		return;
	}
	if (t->n >= TOKENS_MAX)
		drop(t, 0);
	e->next = t->bucket[b];
	t->bucket[b] = e;
	t->n++;
	pthread_mutex_unlock(&t->mu);
}

int api__authenticate(struct api_req *r, struct ty_err *err)
{
	const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
	char hash[TY_SHA256_HEX_LEN + 1];
	struct api_tokens *tokens = api__tokens(r->srv);
	uint64_t gen;
	bool found;
	int rc;

	if (!h || strncasecmp(h, "Bearer ", 7) != 0)
		return ty_err_set(err, TY_EAUTH, "send 'Authorization: Bearer <token>'");
	h += 7;
	while (*h == ' ')
		h++;
	if (strncmp(h, "tym_", 4) == 0 && strlen(h) == 47)
		return trial_token(r, h, err);
	if (strncmp(h, "ty_", 3) != 0 || strlen(h) != 46)
		return ty_err_set(err, TY_EAUTH, "the bearer token is not a Trainyard token");
	/* looked up by hash: the secret itself is never stored or compared */
	ty_sha256_hex(hash, h, strlen(h));
	if (cached(r, &gen, tokens, hash))
		return 0;
	if ((rc = api_store_token_by_hash(&found, &r->auth, r->pg, r->arena, hash, err)))
		return rc;
	if (!found)
		return ty_err_set(err, TY_EAUTH, "unknown or revoked token");
	cache(tokens, gen, hash, &r->auth);
	return 0;
}

int api_token_insert(int64_t *id, char *created_at, char *secret, size_t secretsz,
		     struct ty_pg *pg, const char *name, const char *role, const char *team_id,
		     struct ty_err *err)
{
	char hash[TY_SHA256_HEX_LEN + 1];
	int rc;

	if ((rc = ty_token_new(secret, secretsz)))
		return ty_err_set(err, rc, "cannot draw random bytes for a token");
	ty_sha256_hex(hash, secret, strlen(secret));
	return api_store_token_insert(id, created_at, pg, hash, name, role, team_id, err);
}
