/* Hashes, tokens and comparisons over OpenSSL. */
#include "ty_crypto.h"
#include "ty_err.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

struct ty_ed25519_key {
	EVP_PKEY *pkey;
	bool private_key;
};

int ty_ed25519_key_parse(struct ty_ed25519_key **out, const char *pem, size_t len,
			 bool want_private, const char *name, struct ty_err *err)
{
	struct ty_ed25519_key *k;
	EVP_PKEY *pkey = NULL;
	bool priv = false;
	BIO *bio;

	*out = NULL;
	if (len > INT_MAX || !(bio = BIO_new_mem_buf(pem, (int)len)))
		return ty_err_set(err, TY_ENOMEM, "cannot read the key in '%s'", name);
	if ((pkey = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL))) {
		priv = true;
	} else if (!want_private) {
		(void)BIO_reset(bio);
		pkey = PEM_read_bio_PUBKEY(bio, NULL, NULL, NULL);
	}
	BIO_free(bio);
	ERR_clear_error();
	if (!pkey)
		return ty_err_set(err, TY_EINVAL, "'%s' holds no %s key in PEM form", name,
				  want_private ? "private" : "public or private");
	if (EVP_PKEY_get_base_id(pkey) != EVP_PKEY_ED25519) {
		EVP_PKEY_free(pkey);
		return ty_err_set(err, TY_EINVAL, "the key in '%s' is not an Ed25519 key", name);
	}
	if (!(k = calloc(1, sizeof(*k)))) {
		EVP_PKEY_free(pkey);
		return ty_err_set(err, TY_ENOMEM, "out of memory");
	}
	k->pkey = pkey;
	k->private_key = priv;
	*out = k;
	return 0;
}

int ty_ed25519_key_load(struct ty_ed25519_key **out, const char *path, bool want_private,
			struct ty_err *err)
{
	char buf[16384];
	size_t n;
	FILE *f;
	int rc;

	*out = NULL;
	if (!(f = fopen(path, "re")))
		return ty_err_set(err, TY_EIO, "cannot open the key file '%s': %s", path,
				  strerror(errno));
	n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	if (n == 0 || n == sizeof(buf))
		return ty_err_set(err, TY_EINVAL, "the key file '%s' is %s", path,
				  n ? "too large" : "empty");
	rc = ty_ed25519_key_parse(out, buf, n, want_private, path, err);
	OPENSSL_cleanse(buf, sizeof(buf));
	return rc;
}

static int pem_write(const char *path, EVP_PKEY *pkey, bool priv, struct ty_err *err)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, priv ? 0600 : 0644);
	FILE *f;
	int ok;

	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		if (fd >= 0)
			close(fd);
		return ty_err_set(err, TY_EIO, "cannot write '%s': %s", path, strerror(errno));
	}
	ok = priv ? PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL)
		  : PEM_write_PUBKEY(f, pkey);
	ok = !fclose(f) && ok;
	ERR_clear_error();
	return ok ? 0 : ty_err_set(err, TY_EIO, "cannot write the key to '%s'", path);
}

int ty_ed25519_key_generate(const char *priv_path, const char *pub_path, struct ty_err *err)
{
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	int rc;

	if (!pkey) {
		ERR_clear_error();
		return ty_err_set(err, TY_EIO, "cannot generate an Ed25519 key");
	}
	rc = pem_write(priv_path, pkey, true, err);
	if (!rc)
		rc = pem_write(pub_path, pkey, false, err);
	EVP_PKEY_free(pkey);
	return rc;
}

bool ty_ed25519_key_is_private(const struct ty_ed25519_key *k)
{
	return k && k->private_key;
}

void ty_ed25519_key_free(struct ty_ed25519_key *k)
{
	if (!k)
		return;
	EVP_PKEY_free(k->pkey);
	free(k);
}

int ty_ed25519_sign(const struct ty_ed25519_key *k, const void *data, size_t n,
		    char out[TY_ED25519_SIG_HEX_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char sig[64];
	size_t siglen = sizeof(sig);
	EVP_MD_CTX *ctx;
	int ok;

	out[0] = '\0';
	if (!k || !k->private_key)
		return TY_EINVAL;
	if (!(ctx = EVP_MD_CTX_new()))
		return TY_ENOMEM;
	ok = EVP_DigestSignInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	     EVP_DigestSign(ctx, sig, &siglen, n ? data : (const void *)"", n) == 1 &&
	     siglen == sizeof(sig);
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	if (!ok)
		return TY_EIO;
	for (unsigned i = 0; i < sizeof(sig); i++) {
		out[2 * i] = hex[sig[i] >> 4];
		out[2 * i + 1] = hex[sig[i] & 15];
	}
	out[TY_ED25519_SIG_HEX_LEN] = '\0';
	return 0;
}

static int unhex(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

bool ty_ed25519_verify(const struct ty_ed25519_key *k, const void *data, size_t n, const char *sig)
{
	unsigned char raw[64];
	EVP_MD_CTX *ctx;
	bool ok;

	if (!k || !sig || strlen(sig) != TY_ED25519_SIG_HEX_LEN)
		return false;
	for (unsigned i = 0; i < sizeof(raw); i++) {
		int hi = unhex(sig[2 * i]), lo = unhex(sig[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return false;
		raw[i] = (unsigned char)(hi << 4 | lo);
	}
	if (!(ctx = EVP_MD_CTX_new()))
		return false;
	ok = EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->pkey) == 1 &&
	     EVP_DigestVerify(ctx, raw, sizeof(raw), n ? data : (const void *)"", n) == 1;
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return ok;
}
