/*
 * The webhook deliverer: one thread per API process that claims due rows of
 * webhook_deliveries (FOR UPDATE SKIP LOCKED plus a lease, so replicas never
 * POST the same delivery at once and a dead replica's claims come back when
 * the lease ends), POSTs them signed through one libcurl multi handle and
 * records each attempt. It wakes on NOTIFY trainyard_webhooks (sent by the
 * enqueue function) and at the next due retry. Delivery is at least once:
 * receivers dedupe on Trainyard-Delivery.
 */
#include "api.h"
#include "store.h"
#include "ty_crypto.h"
#include "ty_log.h"
#include "ty_time.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Extra time a claim is held beyond the POST timeout, for recording the result. */
#define LEASE_MARGIN_MS 10000
/* Longest sleep between looks at the queue when nothing is due sooner. */
#define IDLE_MS 5000

struct transfer {
	CURL *easy;
	struct curl_slist *hdrs;
	int64_t id;
	int n; /* this attempt's number */
	char *body;
	char *secret;
	int64_t started_ms;
	char errbuf[CURL_ERROR_SIZE];
};

struct api_deliver {
	pthread_t thread;
	atomic_bool stop;
	char *url;
	struct api_webhook_options o;
	CURLM *multi;
	struct transfer **slots; /* o.concurrency of them, NULL when free */
	int inflight;
	uint64_t rng;
};

struct api_deliver **api__deliver_slot(struct api_server *s);

int64_t api_webhook_backoff_ms(int base, int cap, int attempts, uint32_t rnd)
{
	int64_t d = base > 0 ? base : 0, half;

	for (int i = 1; i < attempts && d < cap; i++)
		d *= 2;
	if (d > cap)
		d = cap;
	if (d <= 0)
		return 0;
	half = d / 2;
	return half + (int64_t)(rnd % (uint64_t)(d - half + 1));
}

int api_webhook_signature(char *out, size_t outsz, const char *secret, long long t,
			  const char *body, size_t len)
{
	char ts[32], hex[TY_SHA256_HEX_LEN + 1];
	int tl = snprintf(ts, sizeof(ts), "%lld.", t);
	char *msg = malloc((size_t)tl + len + 1);

	if (!msg)
		return TY_ENOMEM;
	memcpy(msg, ts, (size_t)tl);
	memcpy(msg + tl, body, len);
	ty_hmac_sha256_hex(hex, secret, strlen(secret), msg, (size_t)tl + len);
	free(msg);
	if ((size_t)snprintf(out, outsz, "t=%lld,v1=%s", t, hex) >= outsz)
		return TY_ENOMEM;
	return 0;
}

static uint32_t next_rand(struct api_deliver *d)
{
	/* splitmix64: jitter only needs to spread replicas' retries apart */
	uint64_t z = (d->rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)(z ^ (z >> 31));
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
	(void)p;
	(void)ud;
	return size * n;
}

static void transfer_free(struct transfer *t)
{
	if (!t)
		return;
	curl_easy_cleanup(t->easy);
	curl_slist_free_all(t->hdrs);
	free(t->body);
	if (t->secret) {
		OPENSSL_cleanse(t->secret, strlen(t->secret));
		free(t->secret);
	}
	free(t);
}

static struct curl_slist *add_hdr(struct curl_slist *l, bool *ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static struct curl_slist *add_hdr(struct curl_slist *l, bool *ok, const char *fmt, ...)
{
	char line[512];
	struct curl_slist *n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (!*ok || !(n = curl_slist_append(l, line))) {
		*ok = false;
		return l;
	}
	return n;
}

/* Set up the POST of one claimed row; NULL when out of memory. */
static struct transfer *transfer_new(const struct api_deliver *d,
				     const struct api_delivery_claim *c)
{
	struct transfer *t = calloc(1, sizeof(*t));
	char sig[API_WEBHOOK_SIG_LEN];
	bool ok = true;

	if (!t)
		return NULL;
	t->id = c->id;
	t->n = c->n;
	t->body = strdup(c->body);
	t->secret = strdup(c->secret);
	if (!t->body || !t->secret || !(t->easy = curl_easy_init()) ||
	    api_webhook_signature(sig, sizeof(sig), t->secret, (long long)time(NULL), t->body,
				  strlen(t->body)))
		goto fail;
	t->hdrs = add_hdr(t->hdrs, &ok, "Content-Type: application/json");
	t->hdrs = add_hdr(t->hdrs, &ok, "User-Agent: Trainyard-Webhooks/1");
	t->hdrs = add_hdr(t->hdrs, &ok, "Trainyard-Event: %s", c->event);
	t->hdrs = add_hdr(t->hdrs, &ok, "Trainyard-Delivery: %lld", (long long)t->id);
	t->hdrs = add_hdr(t->hdrs, &ok, "Trainyard-Signature: %s", sig);
	t->hdrs = add_hdr(t->hdrs, &ok, "Expect:"); /* no 100-continue round trip */
	OPENSSL_cleanse(sig, sizeof(sig));
	if (!ok)
		goto fail;
	curl_easy_setopt(t->easy, CURLOPT_URL, c->url);
	curl_easy_setopt(t->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(t->easy, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->hdrs);
	curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body);
	curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(t->body));
	curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, (long)d->o.timeout_ms);
	curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)d->o.timeout_ms);
	curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->errbuf);
	curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
	return t;
fail:
	transfer_free(t);
	return NULL;
}

/*
 * Claim up to `free` due deliveries and start their POSTs. A row that cannot
 * be set up stays claimed and comes back when its lease ends.
 */
static int claim(struct api_deliver *d, struct ty_pg *pg, int nfree, struct ty_err *err)
{
	struct api_delivery_claim *c = NULL;
	int rc, n;

	if ((rc = api_store_deliveries_claim(&c, &n, pg, nfree, d->o.timeout_ms + LEASE_MARGIN_MS,
					     err)))
		return rc;
	for (int i = 0; i < n; i++) {
		struct transfer *t = transfer_new(d, &c[i]);
		int slot = 0;

		if (!t) {
			ty_warn("webhook delivery %lld: out of memory, retried after its lease",
				(long long)c[i].id);
			continue;
		}
		while (d->slots[slot])
			slot++;
		t->started_ms = ty_mono_ms();
		if (curl_multi_add_handle(d->multi, t->easy) != CURLM_OK) {
			transfer_free(t);
			continue;
		}
		d->slots[slot] = t;
		d->inflight++;
		ty_debug("webhook delivery %lld: attempt %d", (long long)t->id, t->n);
	}
	api_store_claims_free(c, n);
	return 0;
}

/* Milliseconds until the next delivery is due (IDLE_MS when none is). */
static int64_t next_due_ms(struct ty_pg *pg, struct ty_err *err)
{
	int64_t ms = IDLE_MS;
	bool any;

	if (api_store_deliveries_next_due(&any, &ms, pg, err))
		return 200; /* look again soon; the caller reconnects */
	if (!any)
		ms = IDLE_MS;
	return ms < 0 ? 0 : ms > IDLE_MS ? IDLE_MS : ms;
}

/* Record a finished POST: its attempt row and the delivery's next state. */
static int record(struct api_deliver *d, struct ty_pg *pg, struct transfer *t, CURLcode cc,
		  struct ty_err *err)
{
	char errtext[300] = "";
	long status = 0;
	int64_t dur = ty_mono_ms() - t->started_ms, webhook_id;
	struct api_delivery_attempt at = {.id = t->id, .n = t->n};
	bool failed;
	int rc;

	if (cc == CURLE_OK)
		curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
	at.ok = cc == CURLE_OK && status >= 200 && status < 300;
	at.duration_ms = (int)(dur > 0x7fffffff ? 0x7fffffff : dur);
	at.max_attempts = d->o.max_attempts;
	at.delay_ms = api_webhook_backoff_ms(d->o.backoff_ms, d->o.backoff_max_ms, t->n,
					     next_rand(d));
	if (cc == CURLE_OK) {
		at.answered = true;
		at.http_status = status;
		if (!at.ok) {
			snprintf(errtext, sizeof(errtext), "HTTP %ld", status);
			at.error = errtext;
		}
	} else {
		snprintf(errtext, sizeof(errtext), "%s",
			 t->errbuf[0] ? t->errbuf : curl_easy_strerror(cc));
		at.error = errtext;
	}
	if ((rc = api_store_delivery_record(&failed, &webhook_id, pg, &at, err)))
		return rc;
	if (failed)
		ty_warn("webhook %lld: delivery %lld failed after %d attempts, the last: %s",
			(long long)webhook_id, (long long)t->id, t->n, errtext);
	else
		ty_debug("webhook delivery %lld: attempt %d %s", (long long)t->id, t->n,
			 at.ok ? "delivered" : at.error);
	return 0;
}

/*
 * Collect finished transfers; a result that cannot be recorded is retried
 * after its lease. Returns how many finished.
 */
static int reap(struct api_deliver *d, struct ty_pg **pg)
{
	CURLMsg *m;
	int left, n = 0;

	while ((m = curl_multi_info_read(d->multi, &left))) {
		struct transfer *t = NULL;
		struct ty_err err = {0};

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&t);
		CURLcode cc = m->data.result;
		curl_multi_remove_handle(d->multi, t->easy);
		if (*pg && record(d, *pg, t, cc, &err)) {
			ty_warn("webhook delivery %lld: cannot record attempt %d: %s",
				(long long)t->id, t->n, err.msg);
			ty_pg_close(*pg);
			*pg = NULL;
		}
		for (int i = 0; i < d->o.concurrency; i++)
			if (d->slots[i] == t)
				d->slots[i] = NULL;
		d->inflight--;
		transfer_free(t);
		n++;
	}
	return n;
}

/* On shutdown: drop the POSTs in flight and hand their rows back at once. */
static void release_all(struct api_deliver *d, struct ty_pg *pg)
{
	int64_t *ids = calloc((size_t)d->o.concurrency, sizeof(*ids));
	int n = 0;

	for (int i = 0; i < d->o.concurrency; i++) {
		struct transfer *t = d->slots[i];

		if (!t)
			continue;
		if (ids)
			ids[n++] = t->id;
		curl_multi_remove_handle(d->multi, t->easy);
		transfer_free(t);
		d->slots[i] = NULL;
	}
	if (pg && n > 0) {
		struct ty_err err = {0};

		if (api_store_deliveries_release(pg, ids, n, &err))
			ty_warn("%d webhook deliveries stay claimed until their lease ends: %s", n,
				err.msg);
	}
	free(ids);
	d->inflight = 0;
}

static void *deliver_main(void *arg)
{
	struct api_deliver *d = arg;
	struct ty_pg *pg = NULL;
	int64_t claim_at = 0, retry_connect_at = 0;

	while (!atomic_load(&d->stop)) {
		struct ty_err err = {0};
		struct curl_waitfd wfd = {.events = CURL_WAIT_POLLIN};
		int64_t now = ty_mono_ms(), timeout;
		int running = 0;

		if (!pg && now >= retry_connect_at) {
			if (ty_pg_connect(&pg, d->url, &err) ||
			    ty_pg_exec(NULL, pg, "LISTEN trainyard_webhooks", 0, NULL, &err)) {
				ty_warn("webhook deliverer: %s; retrying", err.msg);
				ty_pg_close(pg);
				pg = NULL;
				retry_connect_at = now + 1000;
			} else {
				claim_at = now; /* notifications may have been missed */
			}
		}
		if (pg && d->inflight < d->o.concurrency && now >= claim_at) {
			ty_err_clear(&err);
			if (claim(d, pg, d->o.concurrency - d->inflight, &err)) {
				ty_warn("webhook deliverer: cannot claim deliveries: %s", err.msg);
				ty_pg_close(pg);
				pg = NULL;
				retry_connect_at = now + 1000;
			} else {
				claim_at = now + next_due_ms(pg, &err);
			}
		}
		curl_multi_perform(d->multi, &running);
		if (reap(d, &pg))
			claim_at = 0; /* a retry may be due before the time computed at claim */
		now = ty_mono_ms();
		timeout = pg ? claim_at - now : retry_connect_at - now;
		if (d->inflight >= d->o.concurrency || timeout > 1000)
			timeout = 1000;
		if (timeout < 0)
			timeout = 0;
		if (pg)
			wfd.fd = PQsocket(ty_pg_conn(pg));
		curl_multi_poll(d->multi, pg ? &wfd : NULL, pg ? 1 : 0, (int)timeout, NULL);
		if (pg) {
			PGnotify *nt;

			if ((wfd.revents & CURL_WAIT_POLLIN) && !PQconsumeInput(ty_pg_conn(pg))) {
				ty_warn("webhook deliverer: connection lost, reconnecting");
				ty_pg_close(pg);
				pg = NULL;
				continue;
			}
			/* also those that arrived while a query ran */
			while ((nt = PQnotifies(ty_pg_conn(pg)))) {
				PQfreemem(nt);
				claim_at = 0;
			}
		}
	}
	release_all(d, pg);
	ty_pg_close(pg);
	return NULL;
}

int api__deliver_start(struct api_server *s, const char *database_url,
		       const struct api_webhook_options *o, struct ty_err *err)
{
	struct api_deliver *d = NULL;

	if (o->concurrency <= 0) {
		ty_info("webhook delivery is off in this process (concurrency 0)");
		return 0;
	}
	if (!(d = calloc(1, sizeof(*d))) || !(d->url = strdup(database_url)) ||
	    !(d->slots = calloc((size_t)o->concurrency, sizeof(*d->slots))) ||
	    !(d->multi = curl_multi_init()))
		goto nomem;
	d->o = *o;
	d->rng = (uint64_t)ty_mono_ms() ^ ((uint64_t)getpid() << 32);
	atomic_init(&d->stop, false);
	curl_multi_setopt(d->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)o->concurrency);
	if (pthread_create(&d->thread, NULL, deliver_main, d)) {
		curl_multi_cleanup(d->multi);
		free(d->slots);
		free(d->url);
		free(d);
		return ty_err_set(err, TY_EIO, "cannot start the webhook delivery thread");
	}
	*api__deliver_slot(s) = d;
	return 0;
nomem:
	if (d) {
		free(d->slots);
		free(d->url);
	}
	free(d);
	return ty_err_set(err, TY_ENOMEM, NULL);
}

void api__deliver_stop(struct api_server *s)
{
	struct api_deliver *d = *api__deliver_slot(s);

	if (!d)
		return;
	atomic_store(&d->stop, true);
	curl_multi_wakeup(d->multi);
	pthread_join(d->thread, NULL);
	curl_multi_cleanup(d->multi);
	free(d->slots);
	free(d->url);
	free(d);
	*api__deliver_slot(s) = NULL;
}
