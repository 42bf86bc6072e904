/* Log credentials: their one wire form, minted by the API, checked by executors. */
#include "logcred.h"
#include "ty_err.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#define NAME(name, str, status) str,
static const char *const verdict_names[] = {PROTO_LOGCRED_VERDICTS(NAME)};
#undef NAME
#define STATUS(name, str, status) status,
static const unsigned verdict_statuses[] = {PROTO_LOGCRED_VERDICTS(STATUS)};
#undef STATUS

const char *proto_logcred_verdict_name(enum proto_logcred_verdict v)
{
	return (unsigned)v < PROTO_LOGCRED_NVERDICTS ? verdict_names[v] : "unknown";
}

unsigned proto_logcred_verdict_status(enum proto_logcred_verdict v)
{
	return (unsigned)v < PROTO_LOGCRED_NVERDICTS ? verdict_statuses[v] : 401;
}

static bool claims_ok(const struct proto_logcred *c)
{
	return c->job >= 1 && c->attempt >= 1 && c->rank >= 0 && c->exp >= 0 &&
	       proto_node_id_ok(c->node);
}

int proto_logcred_mint(char out[PROTO_LOGCRED_MAX], const struct proto_logcred *c,
		       const struct ty_ed25519_key *k, struct ty_err *err)
{
	char sig[TY_ED25519_SIG_HEX_LEN + 1];
	int n, rc;

	out[0] = '\0';
	if (!claims_ok(c))
		return ty_err_set(err, TY_EINVAL,
				  "log credential claims out of range (job %lld attempt %lld rank "
				  "%lld exp %lld node '%s')",
				  (long long)c->job, (long long)c->attempt, (long long)c->rank,
				  (long long)c->exp, c->node);
	if (!ty_ed25519_key_is_private(k))
		return ty_err_set(err, TY_EINVAL, "a log credential needs a private key to sign");
	n = snprintf(out, PROTO_LOGCRED_MAX, PROTO_LOGCRED_PREFIX "%lld.%lld.%lld.%lld.%s",
		     (long long)c->job, (long long)c->attempt, (long long)c->rank,
		     (long long)c->exp, c->node);
	if ((rc = ty_ed25519_sign(k, out, (size_t)n, sig))) {
		out[0] = '\0';
		return ty_err_set(err, rc, "cannot sign a log credential");
	}
	snprintf(out + n, PROTO_LOGCRED_MAX - (size_t)n, ".%s", sig);
	return 0;
}

/*
 * A canonical decimal from *p up to the next '.', which it skips: "0" or
 * no leading zero, at most 18 digits (no overflow). False when malformed.
 */
static bool number(int64_t *v, const char **p)
{
	const char *s = *p;
	int64_t x = 0;
	int n = 0;

	while (s[n] >= '0' && s[n] <= '9') {
		if (n == 18)
			return false;
		x = x * 10 + (s[n] - '0');
		n++;
	}
	if (n == 0 || s[n] != '.' || (n > 1 && s[0] == '0'))
		return false;
	*v = x;
	*p = s + n + 1;
	return true;
}

enum proto_logcred_verdict proto_logcred_check(struct proto_logcred *out, const char *credential,
					       const struct ty_ed25519_key *k, int64_t now)
{
	const size_t plen = sizeof(PROTO_LOGCRED_PREFIX) - 1;
	struct proto_logcred c = {0};
	const char *p, *dot;
	size_t len, nodelen;

	memset(out, 0, sizeof(*out));
	if (!credential || !*credential)
		return PROTO_LOGCRED_MISSING;
	len = strnlen(credential, PROTO_LOGCRED_MAX);
	if (len >= PROTO_LOGCRED_MAX || strncmp(credential, PROTO_LOGCRED_PREFIX, plen) != 0)
		return PROTO_LOGCRED_MALFORMED;
	p = credential + plen;
	if (!number(&c.job, &p) || !number(&c.attempt, &p) || !number(&c.rank, &p) ||
	    !number(&c.exp, &p))
		return PROTO_LOGCRED_MALFORMED;
	/* the signature is the fixed-length tail, so the node may hold dots */
	dot = strrchr(p, '.');
	if (!dot || strlen(dot + 1) != TY_ED25519_SIG_HEX_LEN)
		return PROTO_LOGCRED_MALFORMED;
	nodelen = (size_t)(dot - p);
	if (nodelen == 0 || nodelen > PROTO_NODE_ID_MAX)
		return PROTO_LOGCRED_MALFORMED;
	memcpy(c.node, p, nodelen);
	c.node[nodelen] = '\0';
	if (!claims_ok(&c))
		return PROTO_LOGCRED_MALFORMED;
	*out = c;
	if (!ty_ed25519_verify(k, credential, (size_t)(dot - credential), dot + 1))
		return PROTO_LOGCRED_BAD_SIGNATURE;
	if (now >= c.exp)
		return PROTO_LOGCRED_EXPIRED;
	return PROTO_LOGCRED_VALID;
}

bool proto_logcred_covers(const struct proto_logcred *c, int64_t job, int64_t attempt,
			  int64_t rank, const char *node)
{
	return c->job == job && c->attempt == attempt && c->rank == rank && node &&
	       strcmp(c->node, node) == 0;
}

const char *proto_logcred_from_authorization(const char *value)
{
	if (!value || strncasecmp(value, "Bearer ", 7) != 0)
		return NULL;
	value += 7;
	while (*value == ' ')
		value++;
	return value;
}
