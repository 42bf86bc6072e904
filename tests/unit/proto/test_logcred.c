/* proto/logcred: the log credential's wire form, minting and every refusal. */
#include "logcred.h"
#include "ty_err.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

/* RFC 8032 §7.1 test 1's key pair, and an unrelated one */
static const char rfc_priv[] = "-----BEGIN PRIVATE KEY-----\n"
			       "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
			       "-----END PRIVATE KEY-----\n";
static const char rfc_pub[] = "-----BEGIN PUBLIC KEY-----\n"
			      "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
			      "-----END PUBLIC KEY-----\n";
static const char other_priv[] = "-----BEGIN PRIVATE KEY-----\n"
				 "MC4CAQAwBQYDK2VwBCIEIB3nmBB1jrM4yKgzXtdS5JvkHgM6BBgLQEwBwBLEdUSn\n"
				 "-----END PRIVATE KEY-----\n";
static const char other_pub[] = "-----BEGIN PUBLIC KEY-----\n"
				"MCowBQYDK2VwAyEA+XvAa6hC62pNNQvIn1b+9J6yC7sevWVfr1qMychoUHA=\n"
				"-----END PUBLIC KEY-----\n";

/*
 * The credential of CLAIMS under the RFC key, computed independently with
 *   printf 'tylog1.42.3.7.1700000060.node-a.rack1' |
 *   openssl pkeyutl -sign -inkey rfc.pem -rawin -in /dev/stdin | xxd -p
 */
static const char known[] =
	"tylog1.42.3.7.1700000060.node-a.rack1."
	"64fc48f7789e46eec22f1d50d010272dccbe7bff0051e03d1600094a61daa787"
	"b02f62941050142c4e12a68b94724130576e2f5973e2438e1cbde89a467dbb01";
static const struct proto_logcred CLAIMS = {42, 3, 7, 1700000060, "node-a.rack1"};

static struct ty_ed25519_key *key(const char *pem, bool priv)
{
	struct ty_ed25519_key *k = NULL;
	struct ty_err err = {0};

	if (ty_ed25519_key_parse(&k, pem, strlen(pem), priv, "test key", &err)) {
		FAIL("%s", err.msg);
		ty_test_abort();
	}
	return k;
}

static struct ty_ed25519_key *signer, *verifier, *other_signer, *other_verifier;

static void keys(void)
{
	if (signer)
		return;
	signer = key(rfc_priv, true);
	verifier = key(rfc_pub, false);
	other_signer = key(other_priv, true);
	other_verifier = key(other_pub, false);
}

static void free_keys(void)
{
	ty_ed25519_key_free(signer);
	ty_ed25519_key_free(verifier);
	ty_ed25519_key_free(other_signer);
	ty_ed25519_key_free(other_verifier);
}

static bool same_claims(const struct proto_logcred *a, const struct proto_logcred *b)
{
	return a->job == b->job && a->attempt == b->attempt && a->rank == b->rank &&
	       a->exp == b->exp && strcmp(a->node, b->node) == 0;
}

TY_TEST(known_credential)
{
	char out[PROTO_LOGCRED_MAX];
	struct ty_err err = {0};
	struct proto_logcred got;

	keys();
	ty_test_on(TY_TEST_TEARDOWN, free_keys);
	REQUIRE_INT_EQ(proto_logcred_mint(out, &CLAIMS, signer, &err), 0);
	CHECK_STR_EQ(out, known);
	CHECK_INT_EQ(proto_logcred_check(&got, known, verifier, 1700000000), PROTO_LOGCRED_VALID);
	CHECK(same_claims(&got, &CLAIMS));
	/* a private key verifies too (the API could check its own) */
	CHECK_INT_EQ(proto_logcred_check(&got, known, signer, 1700000000), PROTO_LOGCRED_VALID);
}

TY_TEST(round_trip_of_extremes)
{
	static const struct proto_logcred rows[] = {
	    {1, 1, 0, 0, "a"},
	    {999999999999999999LL, 2147483647, 999999999999999999LL, 999999999999999999LL,
	     "n01234567890123456789012345678901234567890123456789012345678901"},
	    {7, 1, 0, 1, "node_1-x.y.z"},
	};
	char out[PROTO_LOGCRED_MAX];
	struct ty_err err = {0};
	struct proto_logcred got;

	keys();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("row %zu", i);
		REQUIRE_INT_EQ(proto_logcred_mint(out, &rows[i], signer, &err), 0);
		CHECK(strlen(out) < PROTO_LOGCRED_MAX);
		/* only RFC 6750 b64token characters */
		CHECK_INT_EQ(strspn(out, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
					 "0123456789-._~+/"),
			     strlen(out));
		CHECK_INT_EQ(proto_logcred_check(&got, out, verifier, rows[i].exp - 1),
			     PROTO_LOGCRED_VALID);
		CHECK(same_claims(&got, &rows[i]));
	}
}

TY_TEST(expiry_boundary)
{
	struct proto_logcred got;

	keys();
	CHECK_INT_EQ(proto_logcred_check(&got, known, verifier, INT64_MIN), PROTO_LOGCRED_VALID);
	CHECK_INT_EQ(proto_logcred_check(&got, known, verifier, 1700000059), PROTO_LOGCRED_VALID);
	/* expired at exp itself */
	CHECK_INT_EQ(proto_logcred_check(&got, known, verifier, 1700000060),
		     PROTO_LOGCRED_EXPIRED);
	CHECK_INT_EQ(proto_logcred_check(&got, known, verifier, 1700000061),
		     PROTO_LOGCRED_EXPIRED);
	/* an expired one still says what it was for */
	CHECK(same_claims(&got, &CLAIMS));
}

/* The known credential with its text from..to (exclusive) replaced by with. */
static const char *edit(size_t from, size_t to, const char *with)
{
	return ty_test_strf("%.*s%s%s", (int)from, known, with, known + to);
}

TY_TEST(tampering_with_any_field_breaks_the_signature)
{
	/* offsets into known: tylog1.42.3.7.1700000060.node-a.rack1.<sig> */
	const struct {
		const char *what, *cred;
	} rows[] = {
	    {"job", edit(7, 9, "43")},
	    {"job widened", edit(7, 9, "420")},
	    {"attempt", edit(10, 11, "4")},
	    {"rank", edit(12, 13, "6")},
	    {"exp", edit(14, 24, "1800000060")},
	    {"node", edit(25, 37, "node-b.rack1")},
	    {"node shortened", edit(25, 37, "node-a")},
	    {"signature's first digit", edit(38, 39, "7")},
	    {"signature's last digit", edit(165, 166, "0")},
	};
	struct proto_logcred got;

	keys();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s: %s", rows[i].what, rows[i].cred);
		CHECK(strcmp(rows[i].cred, known) != 0);
		CHECK_INT_EQ(proto_logcred_check(&got, rows[i].cred, verifier, 0),
			     PROTO_LOGCRED_BAD_SIGNATURE);
	}
}

TY_TEST(another_key_is_a_bad_signature)
{
	char out[PROTO_LOGCRED_MAX];
	struct ty_err err = {0};
	struct proto_logcred got;

	keys();
	/* signed by another key, checked with ours; ours checked with another */
	REQUIRE_INT_EQ(proto_logcred_mint(out, &CLAIMS, other_signer, &err), 0);
	CHECK(strcmp(out, known) != 0);
	CHECK_INT_EQ(proto_logcred_check(&got, out, verifier, 0), PROTO_LOGCRED_BAD_SIGNATURE);
	CHECK_INT_EQ(proto_logcred_check(&got, out, other_verifier, 0), PROTO_LOGCRED_VALID);
	CHECK_INT_EQ(proto_logcred_check(&got, known, other_verifier, 0),
		     PROTO_LOGCRED_BAD_SIGNATURE);
	/* no key at all verifies nothing */
	CHECK_INT_EQ(proto_logcred_check(&got, known, NULL, 0), PROTO_LOGCRED_BAD_SIGNATURE);
	/* an expired credential under the wrong key is a bad signature, not expired */
	CHECK_INT_EQ(proto_logcred_check(&got, out, verifier, INT64_MAX),
		     PROTO_LOGCRED_BAD_SIGNATURE);
}

TY_TEST(malformed_credentials)
{
	const char *sig = known + 38;
	const char *rows[] = {
	    "x",
	    "Bearer x",
	    "tylog1",
	    "tylog1.",
	    ty_test_strf("tylog2.42.3.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("TYLOG1.42.3.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.042.3.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.+42.3.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.-42.3.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.0.3.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.42.0.7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.42..7.1700000060.node-a.rack1.%s", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060..%s", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060.-node.%s", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060.node a.%s", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060.node-a.rack1:%s", sig),
	    ty_test_strf("tylog1.1234567890123456789.3.7.1700000060.node-a.%s", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060.%s.%s",
			 "n012345678901234567890123456789012345678901234567890123456789012", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060.node-a.rack1.%.127s", sig),
	    ty_test_strf("tylog1.42.3.7.1700000060.node-a.rack1.%s0", sig),
	    "tylog1.42.3.7.1700000060.node-a.rack1.",
	    "tylog1.42.3.7.1700000060.node-a.rack1",
	    "tylog1.42.3.7",
	};
	struct proto_logcred got;

	keys();
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("'%s'", rows[i]);
		CHECK_INT_EQ(proto_logcred_check(&got, rows[i], verifier, 0),
			     PROTO_LOGCRED_MALFORMED);
	}
	ty_test_context("uppercase signature");
	{
		char *up = ty_test_strf("%s", known);

		for (char *p = up + 38; *p; p++)
			if (*p >= 'a' && *p <= 'f')
				*p = (char)(*p - 'a' + 'A');
		/* the hex is checked by the signature check: not the wire form, not valid */
		CHECK(proto_logcred_check(&got, up, verifier, 0) != PROTO_LOGCRED_VALID);
	}
	ty_test_context("too long");
	{
		char *longer = ty_test_alloc(PROTO_LOGCRED_MAX + 10);

		memset(longer, '1', PROTO_LOGCRED_MAX + 9);
		memcpy(longer, "tylog1.", 7);
		CHECK_INT_EQ(proto_logcred_check(&got, longer, verifier, 0),
			     PROTO_LOGCRED_MALFORMED);
	}
	ty_test_context(NULL);
	CHECK_INT_EQ(proto_logcred_check(&got, NULL, verifier, 0), PROTO_LOGCRED_MISSING);
	CHECK_INT_EQ(proto_logcred_check(&got, "", verifier, 0), PROTO_LOGCRED_MISSING);
}

TY_TEST(scope)
{
	struct proto_logcred got;

	keys();
	REQUIRE_INT_EQ(proto_logcred_check(&got, known, verifier, 0), PROTO_LOGCRED_VALID);
	CHECK(proto_logcred_covers(&got, 42, 3, 7, "node-a.rack1"));
	CHECK(!proto_logcred_covers(&got, 41, 3, 7, "node-a.rack1"));
	CHECK(!proto_logcred_covers(&got, 42, 2, 7, "node-a.rack1"));
	CHECK(!proto_logcred_covers(&got, 42, 3, 0, "node-a.rack1"));
	CHECK(!proto_logcred_covers(&got, 42, 3, 7, "node-a"));
	CHECK(!proto_logcred_covers(&got, 42, 3, 7, "node-a.rack10"));
	CHECK(!proto_logcred_covers(&got, 42, 3, 7, NULL));
}

TY_TEST(mint_refuses_bad_claims_and_public_keys)
{
	static const struct proto_logcred bad[] = {
	    {0, 1, 0, 60, "n"},	  {1, 0, 0, 60, "n"},	     {1, 1, -1, 60, "n"},
	    {1, 1, 0, -1, "n"},	  {1, 1, 0, 60, ""},	     {1, 1, 0, 60, "-n"},
	    {1, 1, 0, 60, "a:b"}, {-5, 1, 0, 60, "node-a"},
	};
	char out[PROTO_LOGCRED_MAX];
	struct ty_err err = {0};

	keys();
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ty_test_context("row %zu", i);
		ty_err_clear(&err);
		CHECK_INT_EQ(proto_logcred_mint(out, &bad[i], signer, &err), TY_EINVAL);
		CHECK_STR_EQ(out, "");
		CHECK(strstr(err.msg, "out of range") != NULL);
	}
	ty_test_context(NULL);
	ty_err_clear(&err);
	CHECK_INT_EQ(proto_logcred_mint(out, &CLAIMS, verifier, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "private key") != NULL);
	CHECK_STR_EQ(out, "");
}

TY_TEST(authorization_header)
{
	CHECK_STR_EQ(proto_logcred_from_authorization("Bearer abc"), "abc");
	CHECK_STR_EQ(proto_logcred_from_authorization("bearer   abc"), "abc");
	CHECK_STR_EQ(proto_logcred_from_authorization("BEARER abc"), "abc");
	CHECK_STR_EQ(proto_logcred_from_authorization("Bearer "), "");
	CHECK(proto_logcred_from_authorization(NULL) == NULL);
	CHECK(proto_logcred_from_authorization("Basic abc") == NULL);
	CHECK(proto_logcred_from_authorization("Bearerabc") == NULL);
	CHECK(proto_logcred_from_authorization("") == NULL);
}

TY_TEST(verdict_names_and_statuses)
{
	static const struct {
		enum proto_logcred_verdict v;
		const char *name;
		unsigned status;
	} rows[] = {
	    {PROTO_LOGCRED_VALID, "valid", 200},
	    {PROTO_LOGCRED_MISSING, "missing", 401},
	    {PROTO_LOGCRED_MALFORMED, "malformed", 401},
	    {PROTO_LOGCRED_BAD_SIGNATURE, "bad_signature", 401},
	    {PROTO_LOGCRED_EXPIRED, "expired", 401},
	    {PROTO_LOGCRED_OUT_OF_SCOPE, "out_of_scope", 403},
	    {PROTO_LOGCRED_NVERDICTS, "unknown", 401},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		CHECK_STR_EQ(proto_logcred_verdict_name(rows[i].v), rows[i].name);
		CHECK_INT_EQ(proto_logcred_verdict_status(rows[i].v), rows[i].status);
	}
}
