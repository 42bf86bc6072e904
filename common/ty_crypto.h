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

/*
 * Ed25519 (RFC 8032) keys and signatures. A key is loaded from a PEM file
 * as `openssl genpkey -algorithm ed25519` (private) and `openssl pkey
 * -pubout` (public) write them; a private key signs and verifies, a
 * public key only verifies. Signatures travel as 128 lowercase hex digits.
 */
#define TY_ED25519_SIG_HEX_LEN 128

struct ty_err;
struct ty_ed25519_key;

/*
 * A new key from the PEM file at path (free with ty_ed25519_key_free).
 * want_private: the file must hold a private key. TY_EIO when the file
 * cannot be read, TY_EINVAL when it holds no Ed25519 key of that kind; the
 * message names the path.
 */
int ty_ed25519_key_load(struct ty_ed25519_key **out, const char *path, bool want_private,
			struct ty_err *err);
/* The same from PEM text in memory; `name` names it in errors. */
int ty_ed25519_key_parse(struct ty_ed25519_key **out, const char *pem, size_t len,
			 bool want_private, const char *name, struct ty_err *err);
/* A fresh private key written to priv_path (0600) and its public half to pub_path. */
int ty_ed25519_key_generate(const char *priv_path, const char *pub_path, struct ty_err *err);
bool ty_ed25519_key_is_private(const struct ty_ed25519_key *k);
void ty_ed25519_key_free(struct ty_ed25519_key *k);
/* Sign data with a private key into out (hex, NUL-terminated). TY_EINVAL for a public key. */
int ty_ed25519_sign(const struct ty_ed25519_key *k, const void *data, size_t n,
		    char out[TY_ED25519_SIG_HEX_LEN + 1]);
/* Whether sig (hex; NULL or malformed: false) is k's signature of data. */
bool ty_ed25519_verify(const struct ty_ed25519_key *k, const void *data, size_t n, const char *sig);

#endif
