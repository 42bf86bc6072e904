/*
 * The API's request URL handling: path routing (api_route_find, the route
 * table of api/routes.c) and the query-string parameters the handlers
 * parse. The input's first line is a request line, "METHOD TARGET"
 * (TARGET alone means GET); the target's path and its "&"-separated
 * "name=value" pairs are %-decoded with libmicrohttpd's own
 * MHD_http_unescape, as the server receives them. Every captured path
 * segment and every query value goes through each parser a handler may
 * apply to it: ids (api_parse_id), team and metric names, job states
 * (api_job_states_param), RFC 3339 times, node ids, idempotency keys.
 * Invariants: a route found has the method asked for, and its pattern with
 * the captures put back is the path; when the path has routes but none
 * for the method, `allow` does not list the method.
 */
#include "api.h"
#include "fuzz.h"
#include "proto.h"
#include "ty_time.h"

#include <microhttpd.h>

#define MAX_ARGS 32

static void value_parsers(struct ty_arena *a, const char *v)
{
	const char *states;
	int64_t id, ms;

	if (api_parse_id(&id, v))
		FUZZ_CHECK(id > 0);
	if (ty_time_parse_rfc3339(&ms, v))
		FUZZ_CHECK(ms >= -86400000LL && ms < 253402387200000LL);
	if (api_team_name_ok(v))
		FUZZ_CHECK(strlen(v) <= 63 && v[0] != '-');
	if ((states = api_job_states_param(a, v)))
		FUZZ_CHECK(states[0] == '{' && states[strlen(states) - 1] == '}');
	(void)api_metric_name_ok(v);
	(void)api_idempotency_key_ok(v);
	(void)proto_node_id_ok(v);
}

/* The route's pattern with its captures put back, into out. */
static void rebuild(char *out, size_t sz, const char *pattern, const char *const *params)
{
	size_t o = 0;
	int n = 0;

	for (const char *p = pattern; *p && o + 1 < sz; p++) {
		if (p[0] == '{' && p[1] == '}') {
			FUZZ_CHECK(n < 4 && params[n] && params[n][0] && !strchr(params[n], '/'));
			o += (size_t)snprintf(out + o, sz - o, "%s", params[n++]);
			p++;
			continue;
		}
		out[o++] = *p;
	}
	out[o < sz ? o : sz - 1] = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line = fuzz_cstr(data, size), *method = "GET", *target, *query, *args[MAX_ARGS];
	const char *params[4] = {NULL};
	const struct api_route *route;
	struct ty_arena *a;
	char allow[64];
	int nargs = 0;

	if (!line)
		return 0;
	line[strcspn(line, "\r\n")] = '\0';
	target = strchr(line, ' ');
	if (target) {
		*target++ = '\0';
		method = line;
	} else {
		target = line;
	}
	if ((query = strchr(target, '?')))
		*query++ = '\0';
	MHD_http_unescape(target);
	FUZZ_CHECK(a = ty_arena_new());

	route = api_route_find(method, target, a, params, allow, sizeof(allow));
	if (route) {
		char *back = malloc(strlen(target) + 1 + strlen(route->pattern));

		FUZZ_CHECK(back);
		FUZZ_CHECK(!strcmp(route->method, method));
		rebuild(back, strlen(target) + 1 + strlen(route->pattern), route->pattern, params);
		FUZZ_CHECK(!strcmp(back, target));
		free(back);
		for (int i = 0; i < 4 && params[i]; i++)
			value_parsers(a, params[i]);
	} else if (allow[0]) {
		for (int i = 0; i < api_routes_count; i++)
			if (strstr(allow, api_routes[i].method) &&
			    !strcmp(api_routes[i].method, method))
				FUZZ_CHECK(!"a method in allow is the one asked for");
	}

	for (char *save = NULL, *q = query ? strtok_r(query, "&", &save) : NULL;
	     q && nargs < MAX_ARGS; q = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(q, '=');

		if (eq) {
			*eq = '\0';
			MHD_http_unescape(eq + 1);
		}
		MHD_http_unescape(q);
		args[nargs++] = eq ? eq + 1 : q;
	}
	for (int i = 0; i < nargs; i++)
		value_parsers(a, args[i]);
	ty_arena_free(a);
	free(line);
	return 0;
}
