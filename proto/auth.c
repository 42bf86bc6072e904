/* Message authenticity: the dispatch signature, node keys and their MACs (proto.h). */
#include "proto.h"
#include "ty_crypto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const reject_names[] = {
    "authentic",
#define PROTO_REJECT_NAME(name, str) str,
    PROTO_REJECTS(PROTO_REJECT_NAME)
#undef PROTO_REJECT_NAME
};

const char *proto_reject_name(enum proto_reject r)
{
	return (unsigned)r < PROTO_REJECT_COUNT ? reject_names[r] : "unknown";
}

/* The whole of a small file into buf (NUL-terminated), *n bytes; TY_ECONFIG names it. */
static int slurp(char *buf, size_t bufsz, size_t *n, const char *path, const char *what,
		 struct ty_err *err)
{
	FILE *f = fopen(path, "rb");
	size_t got;

	*n = 0;
	if (!f)
		return ty_err_set(err, TY_ECONFIG, "cannot read %s '%s': %s", what, path,
				  strerror(errno));
	got = fread(buf, 1, bufsz - 1, f);
	if (ferror(f)) {
		fclose(f);
		return ty_err_set(err, TY_ECONFIG, "cannot read %s '%s': %s", what, path,
				  strerror(errno));
	}
	if (got == bufsz - 1 && fgetc(f) != EOF) {
		fclose(f);
		return ty_err_set(err, TY_ECONFIG, "%s '%s' is longer than %zu bytes", what, path,
				  bufsz - 2);
	}
	fclose(f);
	while (got > 0 && strchr(" \t\r\n", buf[got - 1]))
		got--;
	buf[got] = '\0';
	*n = got;
	return 0;
}

int proto_node_secret_load(char out[PROTO_NODE_SECRET_MAX + 1], size_t *n, const char *path,
			   struct ty_err *err)
{
	char buf[PROTO_NODE_SECRET_MAX + 2];
	int rc;

	*n = 0;
	if ((rc = slurp(buf, sizeof(buf), n, path, "node secret file", err)))
		goto out;
	if (*n < PROTO_NODE_SECRET_MIN) {
		rc = ty_err_set(err, TY_ECONFIG,
				"node secret file '%s' holds %zu bytes; it needs at least %d "
				"(make one with 'openssl rand -hex 32')",
				path, *n, PROTO_NODE_SECRET_MIN);
		*n = 0;
		goto out;
	}
	memcpy(out, buf, *n + 1);
out:
	memset(buf, 0, sizeof(buf));
	return rc;
}

void proto_node_key(char out[PROTO_NODE_KEY_LEN + 1], const void *secret, size_t n,
		    const char *node)
{
	char ctx[sizeof(PROTO_NODE_KEY_CONTEXT) + PROTO_NODE_ID_MAX + 1];
	int len = snprintf(ctx, sizeof(ctx), "%s%s", PROTO_NODE_KEY_CONTEXT, node);

	ty_hmac_sha256_hex(out, secret, n, ctx, (size_t)len < sizeof(ctx) ? (size_t)len : 0);
}

static bool hex64(const char *s)
{
	for (int i = 0; i < PROTO_NODE_KEY_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[PROTO_NODE_KEY_LEN] == '\0';
}

int proto_node_key_load(char out[PROTO_NODE_KEY_LEN + 1], const char *path, struct ty_err *err)
{
	char buf[PROTO_NODE_KEY_LEN + 64];
	size_t n;
	int rc;

	if ((rc = slurp(buf, sizeof(buf), &n, path, "node key file", err)))
		goto out;
	if (n != PROTO_NODE_KEY_LEN || !hex64(buf)) {
		rc = ty_err_set(err, TY_ECONFIG,
				"node key file '%s' does not hold a node key (%d lowercase hex "
				"digits, as 'trainyard-scheduler --print-node-key NODE' prints)",
				path, PROTO_NODE_KEY_LEN);
		goto out;
	}
	memcpy(out, buf, PROTO_NODE_KEY_LEN + 1);
out:
	memset(buf, 0, sizeof(buf));
	return rc;
}

void proto_mac(char out[PROTO_NODE_KEY_LEN + 1], const char *node_key, const void *payload,
	       size_t n)
{
	ty_hmac_sha256_hex(out, node_key, strlen(node_key), payload, n);
}

int proto_sign(char out[TY_ED25519_SIG_HEX_LEN + 1], const struct ty_ed25519_key *k,
	       const void *payload, size_t n)
{
	return ty_ed25519_sign(k, payload, n, out);
}

enum proto_reject proto_check_sig(const struct ty_ed25519_key *k, const void *payload, size_t n,
				  const char *sig)
{
	if (!sig || !*sig)
		return PROTO_REJECT_UNSIGNED;
	return ty_ed25519_verify(k, payload, n, sig) ? PROTO_AUTHENTIC
						      : PROTO_REJECT_BAD_SIGNATURE;
}

enum proto_reject proto_check_mac(const char *node_key, const void *payload, size_t n,
				  const char *mac)
{
	char want[PROTO_NODE_KEY_LEN + 1];
	bool ok;

	if (!mac || !*mac)
		return PROTO_REJECT_UNSIGNED;
	proto_mac(want, node_key, payload, n);
	ok = ty_secure_equal(want, mac);
	memset(want, 0, sizeof(want));
	return ok ? PROTO_AUTHENTIC : PROTO_REJECT_BAD_SIGNATURE;
}

const char *proto_header(char *buf, size_t bufsz, const rd_kafka_message_t *km,
			 const char *name)
{
	rd_kafka_headers_t *h = NULL;
	const void *v = NULL;
	size_t n = 0;

	/* the last one wins, as Kafka's own clients read a repeated header */
	if (rd_kafka_message_headers(km, &h) || !h ||
	    rd_kafka_header_get_last(h, name, &v, &n) || !v || n == 0 || n >= bufsz ||
	    memchr(v, '\0', n))
		return NULL;
	memcpy(buf, v, n);
	buf[n] = '\0';
	return buf;
}
