/* Hashes, tokens and comparisons over OpenSSL. */
#include "ty_crypto.h"
#include "ty_err.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

static void hex32(char out[TY_SHA256_HEX_LEN + 1], const unsigned char md[32])
{
	static const char hex[] = "0123456789abcdef";

	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[64] = '\0';
}

void ty_sha256_hex(char out[TY_SHA256_HEX_LEN + 1], const void *data, size_t n)
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	EVP_Digest(data, n, md, &mdlen, EVP_sha256(), NULL);
	hex32(out, md);
}

void ty_hmac_sha256_hex(char out[TY_SHA256_HEX_LEN + 1], const void *key, size_t keylen,
			const void *data, size_t n)
{
	static const unsigned char empty[1];
	unsigned char md[32];
	unsigned int mdlen = 0;

	/* OpenSSL takes a NULL key as "reuse the previous one": never pass NULL */
	HMAC(EVP_sha256(), keylen ? key : empty, (int)keylen, n ? data : empty, n, md, &mdlen);
	hex32(out, md);
	OPENSSL_cleanse(md, sizeof(md));
}

int ty_token_new(char *out, size_t outsz)
{
	return outsz < 48 ? TY_EIO : ty_token_new_prefixed(out, outsz, "ty_");
}

int ty_token_new_prefixed(char *out, size_t outsz, const char *prefix)
{
	static const char b64[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	unsigned char raw[33];
	size_t o = strlen(prefix), end = o + 43;

	if (o > 8 || outsz < end + 1 || RAND_bytes(raw, sizeof(raw)) != 1)
		return TY_EIO;
	memcpy(out, prefix, o);
	/* 33 bytes = 264 bits → 44 chars; keep 43 (258 bits ≥ 256) */
	for (size_t i = 0; i < sizeof(raw); i += 3) {
		unsigned v = (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | raw[i + 2];
		for (int k = 3; k >= 0; k--)
			if (o < end)
				out[o++] = b64[(v >> (6 * k)) & 63];
	}
	out[o] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

bool ty_secure_equal(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	if (la != lb)
		return false;
	return CRYPTO_memcmp(a, b, la) == 0;
}
