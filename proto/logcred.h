/*
 * Log credentials: the short-lived, signed permission the API mints for
 * one relayed rank-log request and an executor's log server checks
 * (docs/security.md, "Rank logs"). Building, parsing and checking live
 * here only, shared by both programs; every function is pure (the clock is
 * an argument) except for the Ed25519 operations themselves.
 *
 * Wire form, sent as "Authorization: Bearer <credential>":
 *
 *	tylog1.<job>.<attempt>.<rank>.<exp>.<node>.<sig>
 *
 * numbers in canonical decimal (no sign, no leading zero), exp in Unix
 * seconds (the credential is valid while now < exp), node a node id
 * (proto_node_id_ok; it may hold dots, which is why it comes last but for
 * the signature), sig the 128 lowercase hex digits of the Ed25519
 * signature of everything before the last '.'. Every character is one of
 * RFC 6750's b64token characters.
 */
#ifndef TY_PROTO_LOGCRED_H
#define TY_PROTO_LOGCRED_H

#include "proto.h"
#include "ty_crypto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_LOGCRED_PREFIX "tylog1."
/* Lifetime of a credential the API mints: one relayed request and its retries. */
#define PROTO_LOGCRED_TTL_S 60
/* Longest credential including the NUL (4 numbers of at most 19 digits). */
#define PROTO_LOGCRED_MAX                                                                         \
	(sizeof(PROTO_LOGCRED_PREFIX) + 4 * 20 + PROTO_NODE_ID_MAX + 1 + TY_ED25519_SIG_HEX_LEN + 1)

/* What a credential allows: one rank's log of one attempt, on one node, until exp. */
struct proto_logcred {
	int64_t job;	 /* >= 1 */
	int64_t attempt; /* >= 1 */
	int64_t rank;	 /* >= 0 */
	int64_t exp;	 /* Unix seconds; valid while now < exp */
	char node[PROTO_NODE_ID_MAX + 1];
};

/* name (also the refusal metric's reason label), HTTP status */
#define PROTO_LOGCRED_VERDICTS(X)                                                                 \
	X(VALID, "valid", 200)                                                                     \
	X(MISSING, "missing", 401)                                                                 \
	X(MALFORMED, "malformed", 401)                                                             \
	X(BAD_SIGNATURE, "bad_signature", 401)                                                     \
	X(EXPIRED, "expired", 401)                                                                 \
	X(OUT_OF_SCOPE, "out_of_scope", 403)

#define PROTO_LOGCRED_ENUM(name, str, status) PROTO_LOGCRED_##name,
enum proto_logcred_verdict { PROTO_LOGCRED_VERDICTS(PROTO_LOGCRED_ENUM) PROTO_LOGCRED_NVERDICTS };
#undef PROTO_LOGCRED_ENUM

/* "valid", "missing", ...; "unknown" out of range. */
const char *proto_logcred_verdict_name(enum proto_logcred_verdict v);
/* 200 for VALID, 401 or 403 for a refusal. */
unsigned proto_logcred_verdict_status(enum proto_logcred_verdict v);

/*
 * The credential for claims c signed with the private key k, into out
 * (PROTO_LOGCRED_MAX bytes). TY_EINVAL (err says which) for claims out of
 * range, a node id that is not one, or a public key; TY_EIO when signing
 * fails.
 */
int proto_logcred_mint(char out[PROTO_LOGCRED_MAX], const struct proto_logcred *c,
		       const struct ty_ed25519_key *k, struct ty_err *err);

/*
 * Check credential (NULL or "": MISSING) against the public key k at time
 * now: MALFORMED when it is not the wire form above, BAD_SIGNATURE when k
 * did not sign it, EXPIRED when now >= exp, else VALID. The claims are
 * copied to *out from MALFORMED on (zeroed otherwise), so a refusal can say
 * what was presented; trust them only for VALID.
 */
enum proto_logcred_verdict proto_logcred_check(struct proto_logcred *out, const char *credential,
					       const struct ty_ed25519_key *k, int64_t now);

/* Whether valid claims c cover the log of job, attempt and rank on node (exp not looked at). */
bool proto_logcred_covers(const struct proto_logcred *c, int64_t job, int64_t attempt,
			  int64_t rank, const char *node);

/*
 * The credential in an Authorization header value (borrowed from it):
 * "Bearer <credential>", the scheme in any case, one or more spaces. NULL
 * when the value is NULL or another scheme.
 */
const char *proto_logcred_from_authorization(const char *value);

#endif
