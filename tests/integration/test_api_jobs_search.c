/*
 * GET /v1/jobs?q= (docs/api.md "Jobs"): the dashboard's search box, a
 * case-insensitive substring of the name or an id, with the other filters
 * and the cursor.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <string.h>

struct world {
	const char *team, *member;
	long long resnet, eval, pct, bslash, bert, named_id;
};

static long long named(const char *team, const char *name)
{
	return ty_mk_job(ty_stack_get()->admin, team, ty_test_strf(",'name':'%s'", name));
}

static struct world setup(void)
{
	struct world w;

	w.team = ty_mk_team("search", 8, -1);
	w.member = ty_mk_token("member", w.team);
	w.resnet = named(w.team, "Resnet-Train");
	w.eval = named(w.team, "resnet_eval");
	w.pct = named(w.team, "100%_done");
	w.bslash = named(w.team, "a\\\\b");
	w.bert = named(w.team, "bert");
	/* a name holding another job's id: q of the digits finds both */
	w.named_id = named(w.team, ty_test_strf("rerun-of-%lld", w.bert));
	return w;
}

/* The ids GET /v1/jobs?team=T&QUERY lists for token, in order, as "a,b,c". */
static const char *ids(const char *token, const struct world *w, const char *query)
{
	struct ty_resp r = {0};
	const char *out = "";
	json_t *items;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&%s", w->team, query), token, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	items = json_object_get(r.json, "items");
	for (size_t i = 0; i < json_array_size(items); i++)
		out = ty_test_strf("%s%s%lld", out, i ? "," : "",
				   (long long)json_integer_value(
					   json_object_get(json_array_get(items, i), "id")));
	ty_resp_free(&r);
	return out;
}

TY_TEST(name_substring_any_case)
{
	struct world w = setup();

	CHECK_STR_EQ(ids(w.member, &w, "q=RESNET"), ty_test_strf("%lld,%lld", w.eval, w.resnet));
	CHECK_STR_EQ(ids(w.member, &w, "q=sNeT-t"), ty_test_strf("%lld", w.resnet));
	CHECK_STR_EQ(ids(w.member, &w, "q=bert"), ty_test_strf("%lld", w.bert));
	CHECK_STR_EQ(ids(w.member, &w, "q=nothing-like-it"), "");
}

TY_TEST(like_metacharacters_are_literal)
{
	struct world w = setup();

	CHECK_STR_EQ(ids(w.member, &w, "q=%25"), ty_test_strf("%lld", w.pct));
	CHECK_STR_EQ(ids(w.member, &w, "q=_"), ty_test_strf("%lld,%lld", w.pct, w.eval));
	CHECK_STR_EQ(ids(w.member, &w, "q=%5C"), ty_test_strf("%lld", w.bslash));
	CHECK_STR_EQ(ids(w.member, &w, "q=0%25_d"), ty_test_strf("%lld", w.pct));
	/* "t_e" would match "Resnet-Train"'s "t-T" if '_' were a wildcard */
	CHECK_STR_EQ(ids(w.member, &w, "q=t_e"), ty_test_strf("%lld", w.eval));
	CHECK_STR_EQ(ids(w.member, &w, "q=a%25b"), "");
}

TY_TEST(digits_are_an_id_or_in_a_name)
{
	struct world w = setup();

	CHECK_STR_EQ(ids(w.member, &w, ty_test_strf("q=%lld", w.bert)),
		     ty_test_strf("%lld,%lld", w.named_id, w.bert));
	CHECK_STR_EQ(ids(w.member, &w, ty_test_strf("q=%lld", w.resnet)),
		     ty_test_strf("%lld", w.resnet));
	CHECK_STR_EQ(ids(w.member, &w, "q=100"), ty_test_strf("%lld", w.pct));
	/* too long for an id: a name search only */
	CHECK_STR_EQ(ids(w.member, &w, "q=99999999999999999999999"), "");
}

TY_TEST(combines_with_state_and_scope)
{
	struct world w = setup();
	const char *other = ty_mk_token("viewer", ty_mk_team("search-b", 8, -1));
	struct ty_resp r = {0};

	CHECK_STR_EQ(ids(w.member, &w, "q=resnet&state=pending"),
		     ty_test_strf("%lld,%lld", w.eval, w.resnet));
	CHECK_STR_EQ(ids(w.member, &w, "q=resnet&state=running"), "");
	/* another team's viewer finds none of them, by name or by id */
	ty_http(&r, "GET", "/v1/jobs?q=resnet", other, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_array_size(json_object_get(r.json, "items")) == 0);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?q=%lld", w.bert), other, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_array_size(json_object_get(r.json, "items")) == 0);
	ty_resp_free(&r);
}

TY_TEST(pages_with_q)
{
	struct world w = setup();
	struct ty_resp r = {0};
	const char *cursor;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs?team=%s&q=e&limit=2", w.team), w.member, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	/* newest first, named with an e: rerun-of-N, bert, 100%_done, resnet_eval, Resnet-Train */
	CHECK_JINT(r.json, "items[0].id", w.named_id);
	CHECK_JINT(r.json, "items[1].id", w.bert);
	cursor = ty_test_strf("%s", ty_jstr(r.json, "next_cursor"));
	REQUIRE(cursor[0]);
	CHECK_STR_EQ(ids(w.member, &w, ty_test_strf("q=e&limit=2&cursor=%s", cursor)),
		     ty_test_strf("%lld,%lld", w.pct, w.eval));
	CHECK(ty_count_jobs(w.member, ty_test_strf("team=%s&q=e&limit=1", w.team)) == 5);
	ty_resp_free(&r);
}

TY_TEST(q_length_is_checked)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	char longq[129 * 6 + 1] = "";

	ty_http(&r, "GET", "/v1/jobs?q=", s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "q");
	memset(longq, 'a', 129);
	longq[129] = '\0';
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?q=%s", longq), s->admin, NULL, NULL);
	CHECK_PROBLEM(&r, 400, "invalid_parameter", "q");
	longq[128] = '\0';
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?q=%s", longq), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	/* characters, not bytes: 128 two-byte letters are fine */
	longq[0] = '\0';
	for (int i = 0; i < 128; i++)
		strcat(longq, "%C3%A9");
	ty_http(&r, "GET", ty_test_strf("/v1/jobs?q=%s", longq), s->admin, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}
