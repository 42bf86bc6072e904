/* The queue route: pending jobs in the order the scheduler published. */
#include "api.h"
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "KEY.ID" from next_cursor: the last entry of the previous page. */
static bool parse_cursor(const char **key, const char **id, struct api_req *r, const char *s)
{
	const char *dot = strchr(s, '.');
	long long k;
	int64_t v;
	char *end;

	if (!dot || dot == s || dot - s > 10 || s[0] == '+' || s[0] == '-')
		return false;
	errno = 0;
	k = strtoll(s, &end, 10);
	if (errno || end != dot || k < 1 || k > 2147483647 || !api_parse_id(&v, dot + 1))
		return false;
	*key = ty_arena_printf(r->arena, "%lld", k);
	*id = ty_arena_printf(r->arena, "%lld", (long long)v);
	return *key && *id;
}

int api_h_queue_list(struct api_req *r, struct ty_err *err)
{
	const char *cursor = api_query(r, "cursor"), *limit_s = api_query(r, "limit");
	struct api_queue_filter f = {.team = api_query(r, "team"), .limit = "50"};
	const char *items, *next;
	int64_t v;
	int rc;

	if (f.team && !api_team_name_ok(f.team))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "team",
				"'team' must be a team name (a-z, 0-9, '-')");
	if (cursor && !parse_cursor(&f.after_key, &f.after_id, r, cursor))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "cursor",
				"'cursor' is not one this server gave out");
	if (limit_s) {
		if (!api_parse_id(&v, limit_s) || v > 500)
			return api_fail(r, err, API_P_INVALID_PARAMETER, "limit",
					"'limit' must be an integer from 1 to 500");
		f.limit = limit_s;
	}
	f.viewer = api_scope(r);
	if ((rc = api_store_queue_page(&items, &next, r->pg, r->arena, &f, err)))
		return rc;
	return api_reply_page(r, items, next, err);
}
