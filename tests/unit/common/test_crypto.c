/* common/ty_crypto: SHA-256 vectors, tokens, constant-time comparison. */
#include "ty_crypto.h"
#include "ty_err.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TY_TEST(sha256_known_vectors)
{
	/* FIPS 180-2 / NIST examples */
	static const struct {
		const char *in, *hex;
	} rows[] = {
	    {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
	    {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
	    {"The quick brown fox jumps over the lazy dog",
	     "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592"},
	};
	char out[TY_SHA256_HEX_LEN + 1];

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("\"%s\"", rows[i].in);
		memset(out, 'X', sizeof(out));
		ty_sha256_hex(out, rows[i].in, strlen(rows[i].in));
		CHECK_STR_EQ(out, rows[i].hex);
	}
}

TY_TEST(sha256_million_a_and_binary)
{
	size_t n = 1000000;
	char *a = ty_test_alloc(n);
	char out[TY_SHA256_HEX_LEN + 1];
	static const unsigned char zeros[3] = {0, 0, 0};

	memset(a, 'a', n);
	ty_sha256_hex(out, a, n);
	CHECK_STR_EQ(out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	/* NUL bytes are data, not terminators */
	ty_sha256_hex(out, zeros, 3);
	CHECK_STR_EQ(out, "709e80c88487a2411e1ee4dfb9f22a861492d20c4765150c0c794abd70f8147c");
}

static bool b64url(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_';
}

TY_TEST(token_format)
{
	char tok[64];

	for (int i = 0; i < 100; i++) {
		memset(tok, 'X', sizeof(tok));
		REQUIRE_INT_EQ(ty_token_new(tok, sizeof(tok)), 0);
		REQUIRE_INT_EQ(strlen(tok), 46);
		CHECK(strncmp(tok, "ty_", 3) == 0);
		for (int k = 3; k < 46; k++)
			if (!b64url(tok[k])) {
				FAIL("token %s has '%c' at %d", tok, tok[k], k);
				break;
			}
	}
}

TY_TEST(token_buffer_sizes)
{
	char tok[48];

	CHECK_INT_EQ(ty_token_new(tok, 47), TY_EIO);
	CHECK_INT_EQ(ty_token_new(tok, 48), 0);
	CHECK_INT_EQ(strlen(tok), 46);
}

static int cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

TY_TEST(prefixed_tokens)
{
	char tok[64];

	REQUIRE_INT_EQ(ty_token_new_prefixed(tok, sizeof(tok), "tym_"), 0);
	CHECK_INT_EQ((int)strlen(tok), 47);
	CHECK(strncmp(tok, "tym_", 4) == 0);
	for (int k = 4; k < 47; k++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
			    tok[k]))
			FAIL("token %s has '%c' at %d", tok, tok[k], k);
	CHECK_INT_EQ(ty_token_new_prefixed(tok, 47, "tym_"), TY_EIO); /* no room for NUL */
	CHECK_INT_EQ(ty_token_new_prefixed(tok, 48, "tym_"), 0);
	CHECK_INT_EQ(ty_token_new_prefixed(tok, sizeof(tok), "123456789"), TY_EIO);
}

TY_TEST(tokens_are_unique)
{
	enum { N = 2000 };
	char(*toks)[48] = ty_test_alloc(N * sizeof(*toks));
	int counts[256] = {0};

	for (int i = 0; i < N; i++)
		REQUIRE_INT_EQ(ty_token_new(toks[i], sizeof(toks[i])), 0);
	qsort(toks, N, sizeof(toks[0]), cmp);
	for (int i = 1; i < N; i++)
		CHECK(strcmp(toks[i - 1], toks[i]) != 0);
	/* every alphabet character turns up: the randomness reaches every position */
	for (int i = 0; i < N; i++)
		for (int k = 3; k < 46; k++)
			counts[(unsigned char)toks[i][k]]++;
	for (const char *c = "AZaz09-_"; *c; c++)
		CHECK(counts[(unsigned char)*c] > 0);
}

TY_TEST(secure_equal)
{
	static const struct {
		const char *a, *b;
		bool eq;
	} rows[] = {
	    {"", "", true},
	    {"ty_abc", "ty_abc", true},
	    {"ty_abc", "ty_abd", false},
	    {"ty_abc", "xy_abc", false},
	    {"ty_abc", "ty_ab", false},
	    {"ty_ab", "ty_abc", false},
	    {"", "a", false},
	    {"abc", "ABC", false},
	};

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("\"%s\" vs \"%s\"", rows[i].a, rows[i].b);
		CHECK_INT_EQ(ty_secure_equal(rows[i].a, rows[i].b), rows[i].eq);
	}
}

TY_TEST(hmac_sha256_rfc4231)
{
	/* RFC 4231 test cases 1-4, 6 and 7 (5 is a truncated output) */
	static const char c7[] = "This is a test using a larger than block-size key and a larger than "
				 "block-size data. The key needs to be hashed before being used by "
				 "the HMAC algorithm.";
	unsigned char k1[20], k3[20], d3[50], k4[25], d4[50], k6[131];
	const struct {
		const char *name;
		const void *key;
		size_t keylen;
		const void *data;
		size_t n;
		const char *hex;
	} rows[] = {
	    {"1", k1, sizeof(k1), "Hi There", 8,
	     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
	    {"2", "Jefe", 4, "what do ya want for nothing?", 28,
	     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
	    {"3", k3, sizeof(k3), d3, sizeof(d3),
	     "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
	    {"4", k4, sizeof(k4), d4, sizeof(d4),
	     "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
	    {"6", k6, sizeof(k6), "Test Using Larger Than Block-Size Key - Hash Key First", 54,
	     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
	    {"7", k6, sizeof(k6), c7, sizeof(c7) - 1,
	     "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
	};
	char out[TY_SHA256_HEX_LEN + 1];

	memset(k1, 0x0b, sizeof(k1));
	memset(k3, 0xaa, sizeof(k3));
	memset(d3, 0xdd, sizeof(d3));
	for (size_t i = 0; i < sizeof(k4); i++)
		k4[i] = (unsigned char)(i + 1);
	memset(d4, 0xcd, sizeof(d4));
	memset(k6, 0xaa, sizeof(k6));
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("RFC 4231 case %s", rows[i].name);
		memset(out, 'X', sizeof(out));
		ty_hmac_sha256_hex(out, rows[i].key, rows[i].keylen, rows[i].data, rows[i].n);
		CHECK_STR_EQ(out, rows[i].hex);
	}
}

TY_TEST(hmac_sha256_empty_key_and_data)
{
	char out[TY_SHA256_HEX_LEN + 1];

	/* HMAC-SHA256 with an empty key over empty data (a known value) */
	ty_hmac_sha256_hex(out, "", 0, "", 0);
	CHECK_STR_EQ(out, "b613679a0814d9ec772f95d778c35fc5ff1697c493715653c6c712144292c5ad");
}

/* RFC 8032 §7.1, test 1: the empty message */
static const char rfc8032_priv[] = "-----BEGIN PRIVATE KEY-----\n"
				   "MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n"
				   "-----END PRIVATE KEY-----\n";
static const char rfc8032_pub[] = "-----BEGIN PUBLIC KEY-----\n"
				  "MCowBQYDK2VwAyEA11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n"
				  "-----END PUBLIC KEY-----\n";
static const char rfc8032_sig[] =
	"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b";

TY_TEST(ed25519_rfc8032_vector)
{
	struct ty_ed25519_key *priv = NULL, *pub = NULL;
	char sig[TY_ED25519_SIG_HEX_LEN + 1];
	struct ty_err err = {0};

	CHECK_INT_EQ(ty_ed25519_key_parse(&priv, rfc8032_priv, strlen(rfc8032_priv), true, "priv",
					  &err),
		     0);
	CHECK_INT_EQ(ty_ed25519_key_parse(&pub, rfc8032_pub, strlen(rfc8032_pub), false, "pub",
					  &err),
		     0);
	CHECK(ty_ed25519_key_is_private(priv));
	CHECK(!ty_ed25519_key_is_private(pub));
	CHECK_INT_EQ(ty_ed25519_sign(priv, "", 0, sig), 0);
	CHECK_STR_EQ(sig, rfc8032_sig);
	CHECK(ty_ed25519_verify(pub, "", 0, rfc8032_sig));
	CHECK(ty_ed25519_verify(priv, "", 0, rfc8032_sig));
	/* a public key cannot sign; a changed message, signature or length fails */
	CHECK_INT_EQ(ty_ed25519_sign(pub, "x", 1, sig), TY_EINVAL);
	CHECK(!ty_ed25519_verify(pub, "x", 1, rfc8032_sig));
	memcpy(sig, rfc8032_sig, sizeof(sig));
	sig[0] = sig[0] == 'e' ? 'f' : 'e';
	CHECK(!ty_ed25519_verify(pub, "", 0, sig));
	CHECK(!ty_ed25519_verify(pub, "", 0, "e556"));
	CHECK(!ty_ed25519_verify(pub, "", 0, NULL));
	sig[0] = 'E'; /* uppercase is not the wire form */
	CHECK(!ty_ed25519_verify(pub, "", 0, sig));
	ty_ed25519_key_free(priv);
	ty_ed25519_key_free(pub);
}

TY_TEST(ed25519_key_errors_name_the_problem)
{
	struct ty_ed25519_key *k = (void *)1;
	struct ty_err err = {0};

	/* a public key where a private one is wanted */
	CHECK_INT_EQ(ty_ed25519_key_parse(&k, rfc8032_pub, strlen(rfc8032_pub), true, "pub.pem",
					  &err),
		     TY_EINVAL);
	CHECK(k == NULL);
	CHECK(strstr(err.msg, "pub.pem") && strstr(err.msg, "private"));
	ty_err_clear(&err);
	CHECK_INT_EQ(ty_ed25519_key_parse(&k, "junk", 4, false, "junk.pem", &err), TY_EINVAL);
	CHECK(strstr(err.msg, "junk.pem"));
	ty_err_clear(&err);
	CHECK_INT_EQ(ty_ed25519_key_load(&k, "/nonexistent/k.pem", false, &err), TY_EIO);
	CHECK(strstr(err.msg, "/nonexistent/k.pem"));
}

TY_TEST(ed25519_generate_load_sign_verify)
{
	char dir[] = "/tmp/ty-ed25519-XXXXXX", priv_path[64], pub_path[64];
	struct ty_ed25519_key *priv = NULL, *pub = NULL, *other = NULL;
	char sig[TY_ED25519_SIG_HEX_LEN + 1];
	struct ty_err err = {0};
	struct stat st;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(priv_path, sizeof(priv_path), "%s/k.pem", dir);
	snprintf(pub_path, sizeof(pub_path), "%s/k.pub", dir);
	CHECK_INT_EQ(ty_ed25519_key_generate(priv_path, pub_path, &err), 0);
	CHECK_INT_EQ(stat(priv_path, &st), 0);
	CHECK_INT_EQ((int)(st.st_mode & 0777), 0600);
	CHECK_INT_EQ(ty_ed25519_key_load(&priv, priv_path, true, &err), 0);
	CHECK_INT_EQ(ty_ed25519_key_load(&pub, pub_path, false, &err), 0);
	CHECK_INT_EQ(ty_ed25519_key_load(&other, pub_path, true, &err), TY_EINVAL);
	ty_err_clear(&err);
	CHECK_INT_EQ(ty_ed25519_sign(priv, "message", 7, sig), 0);
	CHECK(ty_ed25519_verify(pub, "message", 7, sig));
	CHECK(!ty_ed25519_verify(pub, "messagf", 7, sig));
	CHECK_INT_EQ(ty_ed25519_key_parse(&other, rfc8032_pub, strlen(rfc8032_pub), false, "o",
					  &err),
		     0);
	CHECK(!ty_ed25519_verify(other, "message", 7, sig)); /* another key */
	ty_ed25519_key_free(priv);
	ty_ed25519_key_free(pub);
	ty_ed25519_key_free(other);
	unlink(priv_path);
	unlink(pub_path);
	rmdir(dir);
}
