/*
 * The usage route: GPU-seconds, GPU-hours, cost, lost work and idle GPUs
 * from the usage ledger, with attempts not in it yet accruing up to now, per team,
 * job, pool or day over a time range, or split by goodput category per team
 * and pool, as JSON or CSV (docs/api.md, "Usage").
 */
#include "api.h"
#include "goodput.h"
#include "store.h"
#include "ty_buf.h"
#include "ty_time.h"

#include <jansson.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DAY_MS (86400LL * 1000)
/* The default range, and the longest one group_by=day may ask for. */
#define DEFAULT_RANGE_MS (30 * DAY_MS)
#define MAX_DAYS 366

/* The goodput split's CSV columns after team and pool: the document's members. */
static const char *const csv_cols[] = {
    "gpu_hours", "cost",
#define GOODPUT_COLS(name, str) str "_gpu_hours", str "_cost",
    PROTO_GOODPUT_CATEGORIES(GOODPUT_COLS)
#undef GOODPUT_COLS
	"queue_wait_gpu_hours", "attempts",
};

/* One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. */
static void csv_field(struct ty_buf *b, const char *s, bool last)
{
	if (strpbrk(s, ",\"\r\n")) {
		ty_buf_puts(b, "\"");
		for (; *s; s++)
			ty_buf_printf(b, "%s%c", *s == '"' ? "\"" : "", *s);
		ty_buf_puts(b, "\"");
	} else {
		ty_buf_puts(b, s);
	}
	ty_buf_puts(b, last ? "\r\n" : ",");
}

/* *out: the goodput document doc as CSV in r's arena: a header line, one line per item. */
static int goodput_csv(const char **out, struct api_req *r, const char *doc, struct ty_err *err)
{
	enum { NCOLS = sizeof(csv_cols) / sizeof(csv_cols[0]) };
	json_t *root = json_loads(doc, 0, NULL), *e;
	struct ty_buf b = TY_BUF_INIT;
	size_t i;
	int rc = 0;

	if (!root)
		return ty_err_set(err, TY_EIO, "usage: the database's document is not JSON");
	ty_buf_puts(&b, "team,pool,");
	for (size_t k = 0; k < NCOLS; k++)
		csv_field(&b, csv_cols[k], k == NCOLS - 1);
	json_array_foreach(json_object_get(root, "items"), i, e) {
		const char *team = json_string_value(json_object_get(e, "team"));
		const char *pool = json_string_value(json_object_get(e, "pool"));

		csv_field(&b, team ? team : "", false);
		csv_field(&b, pool ? pool : "", false);
		for (size_t k = 0; k < NCOLS; k++) {
			const json_t *v = json_object_get(e, csv_cols[k]);
			char num[64] = "";

			if (json_is_integer(v))
				snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
			else if (json_is_number(v))
				snprintf(num, sizeof(num), "%.6f", json_number_value(v));
			csv_field(&b, num, k == NCOLS - 1);
		}
	}
	json_decref(root);
	if (b.oom || !(*out = ty_arena_strdup(r->arena, b.data)))
		rc = ty_err_set(err, TY_ENOMEM, NULL);
	ty_buf_free(&b);
	return rc;
}

int api_h_usage(struct api_req *r, struct ty_err *err)
{
	const char *team = api_query(r, "team"), *from = api_query(r, "from"),
		   *to = api_query(r, "to"), *group = api_query(r, "group_by"),
		   *split = api_query(r, "split"), *format = api_query(r, "format");
	const char *p[4] = {NULL, NULL, NULL, "team"};
	int64_t from_ms = 0, to_ms = 0;
	const char *doc;
	int rc;

	if (team && !api_team_name_ok(team))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "team",
				"'team' must be a team name (a-z, 0-9, '-')");
	if (from && !ty_time_parse_rfc3339(&from_ms, from))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "from",
				"'from' must be an RFC 3339 time such as "
				"2026-01-31T00:00:00Z, not '%.64s'",
				from);
	if (to && !ty_time_parse_rfc3339(&to_ms, to))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "to",
				"'to' must be an RFC 3339 time such as "
				"2026-01-31T00:00:00Z, not '%.64s'",
				to);
	if (split && strcmp(split, "goodput"))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "split",
				"'split' must be goodput, not '%.32s'", split);
	if (split && group)
		return api_fail(r, err, API_P_INVALID_PARAMETER, "group_by",
				"split=goodput is per team and pool: leave 'group_by' out");
	if (format && strcmp(format, "json") && strcmp(format, "csv"))
		return api_fail(r, err, API_P_INVALID_PARAMETER, "format",
				"'format' must be json or csv, not '%.32s'", format);
	if (format && !strcmp(format, "csv") && !split)
		return api_fail(r, err, API_P_INVALID_PARAMETER, "format",
				"format=csv is for split=goodput only");
	if (group) {
		if (strcmp(group, "team") && strcmp(group, "job") && strcmp(group, "pool") &&
		    strcmp(group, "day"))
			return api_fail(r, err, API_P_INVALID_PARAMETER, "group_by",
					"'group_by' must be team, job, pool or day, not "
					"'%.32s'",
					group);
		p[3] = group;
	}
	if (!to)
		to_ms = ty_wall_ms();
	if (!from)
		from_ms = to_ms - DEFAULT_RANGE_MS;
	if (from_ms >= to_ms)
		return api_fail(r, err, API_P_INVALID_PARAMETER, "from",
				"'from' must be before 'to' (or before now, without 'to')");
	if (!strcmp(p[3], "day") && to_ms - from_ms > MAX_DAYS * DAY_MS)
		return api_fail(r, err, API_P_INVALID_PARAMETER, "from",
				"group_by=day covers at most %d days", MAX_DAYS);
	if (r->auth.role != API_ROLE_ADMIN) {
		/* members and viewers see their own team's usage only */
		if (team && strcmp(team, r->auth.team))
			return api_fail(r, err, API_P_FORBIDDEN, "team",
					"a token of team '%s' cannot see the usage of team "
					"'%s'",
					r->auth.team, team);
		p[0] = ty_arena_printf(r->arena, "%lld", (long long)r->auth.team_id);
	} else if (team) {
		if ((rc = api_store_team_id(&p[0], r->pg, r->arena, team, err)))
			return rc;
		if (!p[0])
			return api_fail(r, err, API_P_TEAM_NOT_FOUND, "team", "no team '%s'", team);
	}
	if (from)
		p[1] = ty_arena_printf(r->arena, "%lld", (long long)from_ms);
	if (to)
		p[2] = ty_arena_printf(r->arena, "%lld", (long long)to_ms);
	if ((team || r->auth.role != API_ROLE_ADMIN) && !p[0])
		return ty_err_set(err, TY_ENOMEM, NULL);
	if ((from && !p[1]) || (to && !p[2]))
		return ty_err_set(err, TY_ENOMEM, NULL);
	if (split) {
		if ((rc = api_store_usage_goodput(&doc, r->pg, r->arena, p[0], p[1], p[2], err)))
			return rc;
		if (!format || strcmp(format, "csv"))
			return api_reply_text(r, 200, doc);
		if ((rc = goodput_csv(&doc, r, doc, err)) || (rc = api_reply_text(r, 200, doc)))
			return rc;
		r->content_type = "text/csv; charset=utf-8";
		return 0;
	}
	if ((rc = api_store_usage(&doc, r->pg, r->arena, p[0], p[1], p[2], p[3], err)))
		return rc;
	return api_reply_text(r, 200, doc);
}
