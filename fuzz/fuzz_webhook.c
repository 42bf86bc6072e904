/*
 * Webhook registration (api/webhooks.c): the input as a whole POSTed body
 * (when it is a JSON object) and as the "url" of an otherwise valid body,
 * through api_validate_webhook (its URL check goes through libcurl's URL
 * parser); and as an event name. Invariants: an accepted URL is http(s),
 * of printable ASCII only; an accepted event is '*', a job event or the
 * team's budget alert.
 */
#include "api.h"
#include "fuzz.h"
#include "ty_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ty_err err = {0};
	struct api_problem p = {0};
	json_t *body = NULL;
	char *s = fuzz_cstr(data, size);

	if (!s)
		return 0;
	if (!ty_json_parse(&body, s, size, 32, &err) && json_is_object(body)) {
		if (api_validate_webhook(body, &p))
			FUZZ_CHECK(p.code && (p.status == 400 || p.status == 422));
	}
	json_decref(body);

	if (strlen(s) == size) {
		body = json_pack("{s:s, s:s, s:[s], s:s}", "team", "ml", "url", s, "events", "*",
				 "secret", "0123456789abcdef0123456789abcdef");
		if (body) { /* NULL when s is not UTF-8 */
			memset(&p, 0, sizeof(p));
			if (!api_validate_webhook(body, &p)) {
				FUZZ_CHECK(!strncmp(s, "http://", 7) || !strncmp(s, "https://", 8));
				for (const char *c = s; *c; c++)
					FUZZ_CHECK(*c > ' ' && *c < 0x7f);
			} else {
				FUZZ_CHECK(p.code && !strcmp(p.field, "url"));
			}
			json_decref(body);
		}
		if (api_webhook_event_ok(s))
			FUZZ_CHECK(!strcmp(s, "*") || !strncmp(s, "job.", 4) ||
				   !strcmp(s, "team.budget"));
	}
	free(s);
	return 0;
}
