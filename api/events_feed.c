/*
 * GET /v1/events: the job events of every job the token may see, in commit
 * order, long-polled on the watcher with a waiter any job's event wakes.
 */
#include "api.h"
#include "store.h"
#include "ty_time.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How soon to look again while events wait above the horizon (no NOTIFY says when it moves). */
#define FEED_HELD_BACK_MS 1000

/* One decimal field of at most max, ending at end: no sign, blank or leading zero. */
static bool field(uint64_t *out, const char *s, size_t len, uint64_t max)
{
	char buf[24], *end;
	unsigned long long v;

	if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	memcpy(buf, s, len);
	buf[len] = '\0';
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || *end || v > max)
		return false;
	*out = v;
	return true;
}

bool api_feed_cursor_parse(struct api_feed_cursor *out, const char *s)
{
	uint64_t v[3];
	const uint64_t max[3] = {UINT64_MAX, INT64_MAX, INT32_MAX};

	for (int i = 0; i < 3; i++) {
		size_t len = strcspn(s, ".");

		if (!field(&v[i], s, len, max[i]) || (i < 2 ? s[len] != '.' : s[len] != '\0'))
			return false;
		s += len + 1;
	}
	out->xid = v[0];
	out->job = (int64_t)v[1];
	out->seq = (int)v[2];
	return true;
}

void api_feed_cursor_format(char *out, const struct api_feed_cursor *c)
{
	snprintf(out, API_FEED_CURSOR_LEN, "%" PRIu64 ".%" PRId64 ".%d", c->xid, c->job, c->seq);
}

static int reply(struct api_req *r, const char *events, const struct api_feed_cursor *next,
		 struct ty_err *err)
{
	char cur[API_FEED_CURSOR_LEN];
	struct ty_buf b = TY_BUF_INIT;
	int rc;

	api_feed_cursor_format(cur, next);
	ty_buf_printf(&b, "{\"events\":%s,\"next_after\":\"%s\"}", events, cur);
	rc = b.oom ? ty_err_set(err, TY_ENOMEM, NULL) : api_reply_text(r, 200, b.data);
	ty_buf_free(&b);
	return rc;
}

int api_h_events(struct api_req *r, struct ty_err *err)
{
	const char *after_s = api_query(r, "after"), *team = api_query(r, "team");
	struct api_feed_cursor after = {0};
	struct api_events_feed f;
	long long wait, limit;
	int rc;

	if ((rc = api_int_param(r, err, &wait, "wait", 0, 0, 60)) ||
	    (rc = api_int_param(r, err, &limit, "limit", 100, 1, 1000)))
		return rc;
	if (team && !api_team_name_ok(team))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "team",
				"'team' is not a team name");
	if (after_s && !api_feed_cursor_parse(&after, after_s))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "after",
				"'after' is not a cursor this server gave out");
	if (!after_s) {
		/* the start: no events, and the cursor of now (all below the horizon is past) */
		after.xid = UINT64_MAX;
		if ((rc = api_store_events_feed(&f, r->pg, r->arena, api_scope(r), team, &after, 1,
						 err)))
			return rc;
		after = (struct api_feed_cursor){f.horizon, 0, 0};
		return reply(r, "[]", &after, err);
	}
	if (!r->wait_deadline_ms)
		r->wait_deadline_ms = ty_mono_ms() + wait * 1000;
	for (;;) {
		int64_t now = ty_mono_ms();
		bool waiting = now < r->wait_deadline_ms;

		/* armed before the query, so an event committed meanwhile wakes us */
		if (waiting)
			api__watch_arm(r, 0, r->wait_deadline_ms);
		rc = api_store_events_feed(&f, r->pg, r->arena, api_scope(r), team, &after, limit,
					   err);
		if (rc || f.count || !waiting) {
			api__watch_disarm(r);
			break;
		}
		/* held back by an older transaction, which may write no event: look again soon */
		if (f.held_back && now + FEED_HELD_BACK_MS < r->wait_deadline_ms)
			api__watch_arm(r, 0, now + FEED_HELD_BACK_MS);
		if (api__watch_park(r))
			return 0; /* called again when woken */
	}
	if (rc)
		return rc;
	return reply(r, f.events, &f.last, err);
}
