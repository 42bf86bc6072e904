/* Hashes, random tokens and constant-time comparison (OpenSSL). */
#ifndef TY_CRYPTO_H
#define TY_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>

#define TY_SHA256_HEX_LEN 64

/* Lowercase hex SHA-256 of data into out (65 bytes incl. NUL). */
void ty_sha256_hex(char out[TY_SHA256_HEX_LEN + 1], const void *data, size_t n);
/*
 * A new secret token "ty_" + 43 base64url characters (256 random bits) in
 * out (at least 48 bytes). Returns 0 or TY_EIO when the CSPRNG fails.
 */
int ty_token_new(char *out, size_t outsz);
/*
 * The same with another prefix (at most 8 characters; out needs its length
 * + 44 bytes): "tym_" for the per-attempt trial metrics tokens. TY_EIO when
 * the prefix is too long, out too small or the CSPRNG fails.
 */
int ty_token_new_prefixed(char *out, size_t outsz, const char *prefix);
/*
 * Lowercase hex HMAC-SHA256 (RFC 2104) of data under key into out (65 bytes
 * incl. NUL); key and data may hold NUL bytes.
 */
void ty_hmac_sha256_hex(char out[TY_SHA256_HEX_LEN + 1], const void *key, size_t keylen,
			const void *data, size_t n);
/* Equal lengths and bytes, in time independent of where they differ. */
bool ty_secure_equal(const char *a, const char *b);

#endif
