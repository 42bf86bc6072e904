/*
 * The webhook deliverer's SQL as typed calls (store.h): claiming due rows of
 * webhook_deliveries under a lease, recording an attempt, handing claims
 * back. It runs on the deliverer's own connection, outside any request.
 */
#include "store.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void api_store_claims_free(struct api_delivery_claim *c, int n)
{
	if (!c)
		return;
	for (int i = 0; i < n; i++) {
		if (c[i].secret)
			OPENSSL_cleanse(c[i].secret, strlen(c[i].secret));
		free(c[i].event);
		free(c[i].body);
		free(c[i].url);
		free(c[i].secret);
	}
	free(c);
}

static const char claim_sql[] =
	"UPDATE webhook_deliveries d SET attempts = d.attempts + 1,"
	" locked_until = now() + $2::int * interval '1 millisecond'"
	" FROM webhooks w"
	" WHERE w.id = d.webhook_id AND d.id IN (SELECT q.id FROM webhook_deliveries q"
	"  WHERE q.state = 'pending' AND q.next_attempt_at <= now()"
	"  AND (q.locked_until IS NULL OR q.locked_until <= now())"
	"  ORDER BY q.next_attempt_at, q.id LIMIT $1::int FOR UPDATE SKIP LOCKED)"
	" RETURNING d.id, d.attempts, d.event, d.payload::text, w.url, w.secret";

int api_store_deliveries_claim(struct api_delivery_claim **out, int *n, struct ty_pg *pg,
			       int limit, int lease_ms, struct ty_err *err)
{
	char lim[16], lease[16];
	const char *p[2] = {lim, lease};
	struct api_delivery_claim *c = NULL;
	PGresult *res = NULL;
	int rc = 0, rows;

	*out = NULL;
	*n = 0;
	snprintf(lim, sizeof(lim), "%d", limit);
	snprintf(lease, sizeof(lease), "%d", lease_ms);
	if ((rc = ty_pg_exec(&res, pg, claim_sql, 2, p, err)))
		return rc;
	rows = PQntuples(res);
	if (rows > 0 && !(c = calloc((size_t)rows, sizeof(*c)))) {
		rc = ty_err_set(err, TY_ENOMEM, NULL);
		goto out;
	}
	for (int i = 0; i < rows; i++) {
		c[i].id = strtoll(PQgetvalue(res, i, 0), NULL, 10);
		c[i].n = atoi(PQgetvalue(res, i, 1));
		if (!(c[i].event = strdup(PQgetvalue(res, i, 2))) ||
		    !(c[i].body = strdup(PQgetvalue(res, i, 3))) ||
		    !(c[i].url = strdup(PQgetvalue(res, i, 4))) ||
		    !(c[i].secret = strdup(PQgetvalue(res, i, 5)))) {
			/* the rows stay claimed and come back when their lease ends */
			api_store_claims_free(c, rows);
			c = NULL;
			rc = ty_err_set(err, TY_ENOMEM, NULL);
			goto out;
		}
	}
	*out = c;
	*n = rows;
out:
	/* the result's text holds the secrets: clear it before freeing */
	for (int i = 0; i < rows; i++)
		OPENSSL_cleanse(PQgetvalue(res, i, 5), strlen(PQgetvalue(res, i, 5)));
	PQclear(res);
	return rc;
}

static const char next_due_sql[] =
	"SELECT ceil(extract(epoch FROM min(greatest(next_attempt_at,"
	"  coalesce(locked_until, next_attempt_at))) - now()) * 1000)::bigint"
	" FROM webhook_deliveries WHERE state = 'pending'";

int api_store_deliveries_next_due(bool *any, int64_t *ms, struct ty_pg *pg, struct ty_err *err)
{
	PGresult *res = NULL;
	int rc;

	*any = false;
	*ms = 0;
	if ((rc = ty_pg_exec(&res, pg, next_due_sql, 0, NULL, err)))
		return rc;
	if (ty_pg_val(res, 0, 0)) {
		*any = true;
		*ms = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	}
	PQclear(res);
	return 0;
}

static const char record_sql[] =
	"WITH a AS (INSERT INTO webhook_attempts"
	"  (delivery_id, n, started_at, duration_ms, http_status, error)"
	"  VALUES ($1, $2, now() - $3::int * interval '1 millisecond', $3, $4, $5)"
	"  ON CONFLICT DO NOTHING)"
	" UPDATE webhook_deliveries SET locked_until = NULL, last_status = $4,"
	"  last_error = $5,"
	"  state = CASE WHEN $6::boolean THEN 'delivered'"
	"   WHEN attempts >= $7::int THEN 'failed' ELSE 'pending' END,"
	"  delivered_at = CASE WHEN $6::boolean THEN now() END,"
	"  next_attempt_at = CASE WHEN $6::boolean THEN next_attempt_at"
	"   ELSE now() + $8::bigint * interval '1 millisecond' END"
	" WHERE id = $1 AND state = 'pending' RETURNING state, webhook_id";

int api_store_delivery_record(bool *failed, int64_t *webhook_id, struct ty_pg *pg,
			      const struct api_delivery_attempt *at, struct ty_err *err)
{
	char idb[24], nb[16], durb[24], stb[24], maxb[16], delayb[24];
	const char *p[8] = {idb, nb, durb, at->answered ? stb : NULL, at->error,
			    at->ok ? "t" : "f", maxb, delayb};
	PGresult *res = NULL;
	int rc;

	*failed = false;
	*webhook_id = 0;
	snprintf(idb, sizeof(idb), "%lld", (long long)at->id);
	snprintf(nb, sizeof(nb), "%d", at->n);
	snprintf(durb, sizeof(durb), "%d", at->duration_ms);
	snprintf(stb, sizeof(stb), "%ld", at->http_status);
	snprintf(maxb, sizeof(maxb), "%d", at->max_attempts);
	snprintf(delayb, sizeof(delayb), "%lld", (long long)at->delay_ms);
	if ((rc = ty_pg_exec(&res, pg, record_sql, 8, p, err)))
		return rc;
	if (PQntuples(res) > 0) {
		*failed = !strcmp(PQgetvalue(res, 0, 0), "failed");
		*webhook_id = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	}
	PQclear(res);
	return 0;
}

static const char release_sql[] = "UPDATE webhook_deliveries SET locked_until = NULL"
				  " WHERE id = ANY($1::bigint[]) AND state = 'pending'";

int api_store_deliveries_release(struct ty_pg *pg, const int64_t *ids, int n, struct ty_err *err)
{
	struct ty_buf b = {0};
	const char *p[1];
	int rc;

	if (n == 0)
		return 0;
	ty_buf_puts(&b, "{");
	for (int i = 0; i < n; i++)
		ty_buf_printf(&b, "%s%lld", i ? "," : "", (long long)ids[i]);
	ty_buf_puts(&b, "}");
	if (b.oom)
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	else {
		p[0] = b.data;
		rc = ty_pg_exec(NULL, pg, release_sql, 1, p, err);
	}
	ty_buf_free(&b);
	return rc;
}
