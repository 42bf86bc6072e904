/* The API's TLS material: the certificate and key files, read and checked before MHD sees them. */
#include "api.h"

#include <errno.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TLS_FILE_MAX (1 << 20)

/* The whole of path into *out (NUL-terminated, malloc'd); what names it in errors. */
static int read_pem(char **out, const char *what, const char *path, struct ty_err *err)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t len = 0, n;
	int rc = 0;

	*out = NULL;
	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot read %s '%s': %s", what, path,
				  strerror(errno));
	if (!(buf = malloc(TLS_FILE_MAX + 1))) {
		fclose(f);
		return ty_err_set(err, TY_ENOMEM, NULL);
	}
	while ((n = fread(buf + len, 1, TLS_FILE_MAX + 1 - len, f)) > 0)
		len += n;
	if (ferror(f))
		rc = ty_err_set(err, TY_ECONFIG, "cannot read %s '%s': %s", what, path,
				strerror(errno));
	else if (len > TLS_FILE_MAX)
		rc = ty_err_set(err, TY_ECONFIG, "%s '%s' is larger than %d bytes", what, path,
				TLS_FILE_MAX);
	fclose(f);
	if (rc) {
		free(buf);
		return rc;
	}
	buf[len] = '\0';
	*out = buf;
	return 0;
}

int api_tls_check(const char *cert_pem, const char *key_pem, const char *cert_path,
		  const char *key_path, struct ty_err *err)
{
	BIO *cb = BIO_new_mem_buf(cert_pem, -1), *kb = BIO_new_mem_buf(key_pem, -1);
	X509 *x = NULL;
	EVP_PKEY *k = NULL;
	int rc = 0;

	if (!cb || !kb) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	if (!(x = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
		rc = ty_err_set(err, TY_ECONFIG,
				"TLS certificate '%s' holds no PEM certificate (--tls-cert)", cert_path);
		goto out;
	}
	/* no passphrase callback: an encrypted key must not prompt on a terminal */
	if (!(k = PEM_read_bio_PrivateKey(kb, NULL, NULL, (void *)""))) {
		rc = ty_err_set(err, TY_ECONFIG,
				"TLS key '%s' holds no unencrypted PEM private key (--tls-key)",
				key_path);
		goto out;
	}
	if (X509_check_private_key(x, k) != 1) {
		rc = ty_err_set(err, TY_ECONFIG,
				"TLS key '%s' does not match certificate '%s' (--tls-key, --tls-cert)",
				key_path, cert_path);
		goto out;
	}
out:
	ERR_clear_error(); /* nothing of the failed parse may linger in OpenSSL's queue */
	X509_free(x);
	EVP_PKEY_free(k);
	BIO_free(cb);
	BIO_free(kb);
	return rc;
}

int api_tls_load(struct api_tls *out, const char *cert_path, const char *key_path,
		 struct ty_err *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	if (!cert_path && !key_path)
		return 0;
	if (!cert_path || !key_path)
		return ty_err_set(err, TY_ECONFIG, "%s is set but %s is not: TLS needs both",
				  cert_path ? "--tls-cert" : "--tls-key",
				  cert_path ? "--tls-key" : "--tls-cert");
	if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
		return ty_err_set(err, TY_ECONFIG,
				  "this libmicrohttpd was built without TLS support: "
				  "--tls-cert and --tls-key cannot be used");
	if ((rc = read_pem(&out->cert, "TLS certificate", cert_path, err)) ||
	    (rc = read_pem(&out->key, "TLS key", key_path, err)) ||
	    (rc = api_tls_check(out->cert, out->key, cert_path, key_path, err))) {
		api_tls_free(out);
		return rc;
	}
	return 0;
}

void api_tls_free(struct api_tls *t)
{
	if (!t)
		return;
	free(t->cert);
	if (t->key) {
		/* the key leaves no copy behind in freed memory */
		volatile char *p = t->key;

		while (*p)
			*p++ = '\0';
		free(t->key);
	}
	t->cert = t->key = NULL;
}
