/*
 * GET /v1/usage (docs/api.md, "Usage"): sums of the usage ledger per team,
 * job, pool and day, clipped to the range; attempts not in the ledger yet
 * accruing up to now; who may see what; parameter errors; the goodput
 * split (JSON and CSV) and the job's goodput; and the ledger being append-only. No scheduler runs here: ledger rows, rates and running
 * allocations are seeded with SQL.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <libpq-fe.h>
#include <math.h>
#include <string.h>

#define DB(...) TY_STACK_SQL(__VA_ARGS__)

/* A real member at path equals want (to 1e-6). */
#define CHECK_NUM(root, path, want)                                                                \
	do {                                                                                       \
		const json_t *v_ = ty_jpath((root), (path));                                       \
		CHECK(json_is_number(v_));                                                         \
		if (json_is_number(v_) && fabs(json_number_value(v_) - (want)) > 1e-6) {           \
			ty_test_fail_at(__FILE__, __LINE__, "%s: got %.9g, want %.9g", (path),     \
					json_number_value(v_), (double)(want));                    \
		}                                                                                  \
	} while (0)

/*
 * One ledger row of team (name): GPUs on node (pool, model) of job/attempt
 * from start to end (RFC 3339), lost GPU-seconds, rate, outcome.
 */
static void row(const char *team, long long job, int attempt, const char *node, const char *pool,
		const char *model, int gpus, const char *start, const char *end, double lost,
		double rate, const char *outcome)
{
	DB("INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model, gpus,"
	   " started_at, ended_at, outcome, gpu_seconds, lost_gpu_seconds, rate_per_gpu_hour, cost)"
	   " SELECT t.id, $2::bigint, $3::int, $4, $5, $6, $7::int, $8::timestamptz,"
	   " $9::timestamptz, $10, g, $11::float8, $12::float8, g / 3600 * $12::float8"
	   " FROM teams t, LATERAL (SELECT $7::int * extract(epoch FROM"
	   "  $9::timestamptz - $8::timestamptz)::float8 AS g) x WHERE t.name = $1",
	   team, ty_test_strf("%lld", job), ty_test_strf("%d", attempt), node, pool, model,
	   ty_test_strf("%d", gpus), start, end, outcome, ty_test_strf("%.17g", lost),
	   ty_test_strf("%.17g", rate));
}

/*
 * Team a: job 1 attempt 1 (2 spot H100 for an hour on Jan 1, failed, the
 * last half hour lost), job 1 attempt 2 (4 on-demand A100 over midnight,
 * succeeded), job 2 (1 spot GPU for half an hour on Jan 2, cancelled).
 * Team b: 8 spot GPUs for an hour on Jan 1.
 */
static void seed(const char **a, const char **b, long long base)
{
	*a = ty_mk_team("usage-a", 8, -1);
	*b = ty_mk_team("usage-b", 8, -1);
	row(*a, base + 1, 1, "n1", "spot", "H100", 2, "2025-01-01T00:00:00Z",
	    "2025-01-01T01:00:00Z", 3600, 2.5, "failed");
	row(*a, base + 1, 2, "n2", "on-demand", "A100", 4, "2025-01-01T23:00:00Z",
	    "2025-01-02T01:00:00Z", 0, 4, "succeeded");
	row(*a, base + 2, 1, "n1", "spot", "", 1, "2025-01-02T12:00:00Z", "2025-01-02T12:30:00Z", 0,
	    1.2, "cancelled");
	row(*b, base + 3, 1, "n3", "spot", "H100", 8, "2025-01-01T00:00:00Z",
	    "2025-01-01T01:00:00Z", 0, 1, "succeeded");
}

#define RANGE "from=2025-01-01T00:00:00Z&to=2025-01-03T00:00:00Z"

static json_t *get(struct ty_resp *r, const char *token, const char *query)
{
	ty_resp_free(r);
	ty_http(r, "GET", ty_test_strf("/v1/usage?%s", query), token, NULL, NULL);
	return r->json;
}

TY_TEST(group_by_team_sums_a_teams_rows)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *a, *b;
	json_t *j;

	seed(&a, &b, 1000);
	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s", a));
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(j, "group_by", "team");
	CHECK_JSTR(j, "from", "2025-01-01T00:00:00.000Z");
	CHECK_JSTR(j, "to", "2025-01-03T00:00:00.000Z");
	CHECK_JTIME(j, "as_of");
	CHECK_INT_EQ((long long)json_array_size(ty_jpath(j, "items")), 1);
	CHECK_JSTR(j, "items[0].team", a);
	/* 2×3600 + 4×7200 + 1×1800 */
	CHECK_NUM(j, "items[0].gpu_seconds", 37800);
	CHECK_NUM(j, "items[0].gpu_hours", 10.5);
	/* 2 h × 2.5 + 8 h × 4 + 0.5 h × 1.2 */
	CHECK_NUM(j, "items[0].cost", 37.6);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 3600);
	CHECK_JINT(j, "items[0].attempts", 3);
	CHECK_JINT(j, "items[0].running_attempts", 0);
	CHECK_NUM(j, "totals.gpu_seconds", 37800);
	CHECK_NUM(j, "totals.cost", 37.6);
	CHECK_JINT(j, "totals.attempts", 3);
	ty_resp_free(&r);
}

TY_TEST(group_by_job_pool_and_day)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *a, *b;
	json_t *j;

	seed(&a, &b, 2000);
	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s&group_by=job", a));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JINT(j, "items[0].job", 2001);
	CHECK_JSTR(j, "items[0].team", a);
	CHECK_NUM(j, "items[0].gpu_seconds", 36000);
	CHECK_NUM(j, "items[0].cost", 37);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 3600);
	CHECK_JINT(j, "items[0].attempts", 2);
	CHECK_JINT(j, "items[1].job", 2002);
	CHECK_NUM(j, "items[1].gpu_seconds", 1800);
	CHECK_NUM(j, "items[1].cost", 0.6);
	CHECK_JINT(j, "items[1].attempts", 1);

	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s&group_by=pool", a));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JSTR(j, "items[0].pool", "on-demand");
	CHECK_NUM(j, "items[0].gpu_seconds", 28800);
	CHECK_NUM(j, "items[0].cost", 32);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 0);
	CHECK_JSTR(j, "items[1].pool", "spot");
	CHECK_NUM(j, "items[1].gpu_seconds", 9000);
	CHECK_NUM(j, "items[1].cost", 5.6);
	CHECK_NUM(j, "items[1].lost_gpu_seconds", 3600);
	CHECK_JINT(j, "items[1].attempts", 2);
	CHECK_JINT(j, "totals.attempts", 3);

	/* the attempt over midnight is split between the days, and counted on both */
	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s&group_by=day", a));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JSTR(j, "items[0].day", "2025-01-01");
	CHECK_NUM(j, "items[0].gpu_seconds", 21600);
	CHECK_NUM(j, "items[0].cost", 21);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 3600);
	CHECK_JINT(j, "items[0].attempts", 2);
	CHECK_JSTR(j, "items[1].day", "2025-01-02");
	CHECK_NUM(j, "items[1].gpu_seconds", 16200);
	CHECK_NUM(j, "items[1].cost", 16.6);
	CHECK_JINT(j, "items[1].attempts", 2);
	CHECK_NUM(j, "totals.gpu_seconds", 37800);
	CHECK_JINT(j, "totals.attempts", 3);
	ty_resp_free(&r);
}

TY_TEST(range_clips_rows_and_their_lost_work)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *a, *b;
	json_t *j;

	seed(&a, &b, 3000);
	/* 00:30-23:30 on Jan 1, the start written with an offset */
	j = get(
	    &r, st->admin,
	    ty_test_strf("team=%s&from=2025-01-01T01:30:00%%2B01:00&to=2025-01-01T23:30:00Z", a));
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(j, "from", "2025-01-01T00:30:00.000Z");
	/* attempt 1: 2 GPUs × 30 min, all of it lost; attempt 2: 4 GPUs × 30 min */
	CHECK_NUM(j, "items[0].gpu_seconds", 10800);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 3600);
	CHECK_NUM(j, "items[0].cost", 2.5 + 8);
	CHECK_JINT(j, "items[0].attempts", 2);

	/* before the lost half hour: nothing lost in range */
	j = get(&r, st->admin,
		ty_test_strf("team=%s&from=2025-01-01T00:00:00Z&to=2025-01-01T00:30:00Z", a));
	REQUIRE_STATUS(&r, 200);
	CHECK_NUM(j, "items[0].gpu_seconds", 3600);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 0);

	/* a range with nothing in it */
	j = get(&r, st->admin,
		ty_test_strf("team=%s&from=2024-01-01T00:00:00Z&to=2024-01-02T00:00:00Z", a));
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ((long long)json_array_size(ty_jpath(j, "items")), 0);
	CHECK_NUM(j, "totals.gpu_seconds", 0);
	CHECK_JINT(j, "totals.attempts", 0);
	ty_resp_free(&r);
}

TY_TEST(idle_gpu_hours_spread_over_their_rows_and_unknown_counts_nothing)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *c = ty_mk_team("usage-idle", 8, -1);
	json_t *j;

	/* 4 GPUs over midnight, 30 min of them idle on every GPU; 1 GPU without telemetry */
	row(c, 7001, 1, "n1", "spot", "H100", 4, "2025-01-01T23:00:00Z", "2025-01-02T01:00:00Z", 0,
	    1, "succeeded");
	row(c, 7002, 1, "n2", "spot", "H100", 1, "2025-01-01T10:00:00Z", "2025-01-01T11:00:00Z", 0,
	    1, "succeeded");
	/* the ledger is append-only: the idle row is written whole, as the scheduler does */
	DB("INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model, gpus,"
	   " started_at, ended_at, outcome, gpu_seconds, lost_gpu_seconds, rate_per_gpu_hour, cost,"
	   " idle_gpu_seconds) SELECT t.id, 7001, 2, 'n1', 'spot', 'H100', 4,"
	   " '2025-01-01T23:00:00Z', '2025-01-02T01:00:00Z', 'succeeded', 28800, 0, 1, 8, 7200"
	   " FROM teams t WHERE t.name = $1",
	   c);

	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s", c));
	REQUIRE_STATUS(&r, 200);
	CHECK_NUM(j, "items[0].idle_gpu_seconds", 7200);
	CHECK_NUM(j, "items[0].idle_gpu_hours", 2);
	CHECK_NUM(j, "items[0].gpu_hours", 8 + 1 + 8);
	CHECK_NUM(j, "totals.idle_gpu_seconds", 7200);
	CHECK_NUM(j, "totals.idle_gpu_hours", 2);

	/* a day gets the part of a row's idle time its hours hold */
	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s&group_by=day", c));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JSTR(j, "items[0].day", "2025-01-01");
	CHECK_NUM(j, "items[0].idle_gpu_seconds", 3600);
	CHECK_NUM(j, "items[1].idle_gpu_seconds", 3600);

	/* by job: the job without telemetry has none */
	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s&group_by=job", c));
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JINT(j, "items[1].job", 7002);
	CHECK_NUM(j, "items[1].idle_gpu_seconds", 0);
	CHECK_NUM(j, "items[0].idle_gpu_seconds", 7200);

	/* a range cutting the row: its share */
	j = get(&r, st->admin,
		ty_test_strf("team=%s&from=2025-01-02T00:30:00Z&to=2025-01-03T00:00:00Z", c));
	REQUIRE_STATUS(&r, 200);
	CHECK_NUM(j, "items[0].idle_gpu_seconds", 1800);
	ty_resp_free(&r);
}

/* The goodput categories of a row, GPU-ms, in PROTO_GOODPUT_CATEGORIES' order. */
struct gp {
	long long useful, checkpoint, idle, lost_preemption, lost_user, lost_infra, hang, straggler;
	long long wait;
};

/* A ledger row as the scheduler writes it, with its goodput categories (they add up). */
static void goodput_row(const char *team, long long job, int attempt, const char *pool, int gpus,
			const char *start, const char *end, double rate, const char *outcome,
			struct gp g)
{
	/* the categories as one array: $10[1..9], useful .. straggler, then the queue wait */
	DB("INSERT INTO usage_ledger (team_id, job_id, attempt, node_id, pool, gpu_model, gpus,"
	   " started_at, ended_at, outcome, gpu_seconds, lost_gpu_seconds, rate_per_gpu_hour, cost,"
	   " gpu_ms, useful_gpu_ms, checkpoint_gpu_ms, idle_gpu_ms, lost_preemption_gpu_ms,"
	   " lost_user_gpu_ms, lost_infra_gpu_ms, hang_gpu_ms, straggler_gpu_ms, queue_wait_gpu_ms)"
	   " SELECT t.id, $2::bigint, $3::int, 'n1', $4, 'H100', $5::int, $6::timestamptz,"
	   " $7::timestamptz, $8, x.g, (c[4] + c[5] + c[6] + c[7]) / 1000.0,"
	   " $9::float8, x.g / 3600 * $9::float8, x.ms, c[1], c[2], c[3], c[4], c[5], c[6], c[7],"
	   " c[8], c[9] FROM teams t, LATERAL (SELECT $5::int * extract(epoch FROM"
	   "  $7::timestamptz - $6::timestamptz)::float8 AS g, round($5::int * extract(epoch FROM"
	   "  $7::timestamptz - $6::timestamptz) * 1000)::bigint AS ms, $10::bigint[] AS c) x"
	   " WHERE t.name = $1",
	   team, ty_test_strf("%lld", job), ty_test_strf("%d", attempt), pool,
	   ty_test_strf("%d", gpus), start, end, outcome, ty_test_strf("%.17g", rate),
	   ty_test_strf("{%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld}", g.useful, g.checkpoint,
			g.idle, g.lost_preemption, g.lost_user, g.lost_infra, g.hang, g.straggler,
			g.wait));
}

/*
 * Team usage-gp: spot — 2 GPUs for an hour at 2.5 (useful 50 min, 10 min of
 * checkpoint writing, 1 GPU-hour lost to a preemption, 12 GPU-min queued) and
 * 1 GPU for 30 min at 1.2 (20 min lost to the user, 10 min hang);
 * on-demand — 4 GPUs for an hour at 4 (2.5 useful, 0.5 idle, 0.5 lost to the
 * infrastructure, 0.5 to a straggler); and a row of an older scheduler, without categories.
 */
static const char *goodput_seed(long long job)
{
	const char *t = ty_mk_team("usage-gp", 8, -1);

	goodput_row(t, job, 1, "spot", 2, "2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z", 2.5,
		    "failed", (struct gp){3000000, 600000, 0, 3600000, 0, 0, 0, 0, 720000});
	goodput_row(t, job, 2, "on-demand", 4, "2025-01-01T02:00:00Z", "2025-01-01T03:00:00Z", 4,
		    "succeeded", (struct gp){9000000, 0, 1800000, 0, 0, 1800000, 0, 1800000, 0});
	goodput_row(t, job + 1, 1, "spot", 1, "2025-01-02T00:00:00Z", "2025-01-02T00:30:00Z", 1.2,
		    "failed", (struct gp){0, 0, 0, 0, 1200000, 0, 600000, 0, 0});
	row(t, job + 2, 1, "n1", "spot", "H100", 8, "2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z",
	    0, 1, "succeeded");
	return t;
}

TY_TEST(goodput_split_per_team_and_pool_as_json)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *t = goodput_seed(9001);
	json_t *j;

	j = get(&r, st->admin, ty_test_strf(RANGE "&team=%s&split=goodput", t));
	REQUIRE_STATUS(&r, 200);
	CHECK_JSTR(j, "split", "goodput");
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 2);
	CHECK_JSTR(j, "items[0].team", t);
	CHECK_JSTR(j, "items[0].pool", "on-demand");
	CHECK_NUM(j, "items[0].gpu_hours", 4);
	CHECK_NUM(j, "items[0].cost", 16);
	CHECK_NUM(j, "items[0].useful_gpu_hours", 2.5);
	CHECK_NUM(j, "items[0].useful_cost", 10);
	CHECK_NUM(j, "items[0].straggler_gpu_hours", 0.5);
	CHECK_NUM(j, "items[0].straggler_cost", 2);
	CHECK_NUM(j, "items[0].idle_gpu_hours", 0.5);
	CHECK_NUM(j, "items[0].lost_infra_gpu_hours", 0.5);
	CHECK_NUM(j, "items[0].lost_infra_cost", 2);
	CHECK_NUM(j, "items[0].lost_preemption_gpu_hours", 0);
	CHECK_JINT(j, "items[0].attempts", 1);
	/* spot: the older scheduler's row (8 GPU-hours, no categories) is not in it */
	CHECK_JSTR(j, "items[1].pool", "spot");
	CHECK_NUM(j, "items[1].gpu_hours", 2.5);
	CHECK_NUM(j, "items[1].cost", 5.6);
	CHECK_NUM(j, "items[1].useful_gpu_hours", 3000000 / 3600000.0);
	CHECK_NUM(j, "items[1].checkpoint_gpu_hours", 600000 / 3600000.0);
	CHECK_NUM(j, "items[1].lost_preemption_gpu_hours", 1);
	CHECK_NUM(j, "items[1].lost_preemption_cost", 2.5);
	CHECK_NUM(j, "items[1].lost_user_gpu_hours", 1200000 / 3600000.0);
	CHECK_NUM(j, "items[1].hang_gpu_hours", 600000 / 3600000.0);
	CHECK_NUM(j, "items[1].hang_cost", 0.2);
	CHECK_NUM(j, "items[1].straggler_gpu_hours", 0);
	CHECK_NUM(j, "items[1].queue_wait_gpu_hours", 0.2);
	CHECK_JINT(j, "items[1].attempts", 2);
	CHECK_NUM(j, "totals.gpu_hours", 6.5);
	CHECK_NUM(j, "totals.useful_gpu_hours", 2.5 + 3000000 / 3600000.0);
	CHECK_NUM(j, "totals.straggler_gpu_hours", 0.5);
	CHECK_NUM(j, "totals.lost_infra_gpu_hours", 0.5);
	CHECK_JINT(j, "totals.attempts", 3);
	/* rows that ended before the range are not in it */
	j = get(&r, st->admin,
		ty_test_strf("team=%s&split=goodput&from=2025-01-01T02:30:00Z"
			     "&to=2025-01-03T00:00:00Z",
			     t));
	REQUIRE_STATUS(&r, 200);
	CHECK_NUM(j, "totals.gpu_hours", 4.5);
	ty_resp_free(&r);
}

TY_TEST(goodput_split_as_csv)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *t = goodput_seed(9101), *want;

	get(&r, st->admin, ty_test_strf(RANGE "&team=%s&split=goodput&format=csv", t));
	REQUIRE_STATUS(&r, 200);
	CHECK_STR_EQ(ty_resp_header(&r, "Content-Type"), "text/csv; charset=utf-8");
	want = ty_test_strf(
	    "team,pool,gpu_hours,cost,useful_gpu_hours,useful_cost,checkpoint_gpu_hours,"
	    "checkpoint_cost,idle_gpu_hours,idle_cost,lost_preemption_gpu_hours,"
	    "lost_preemption_cost,lost_user_gpu_hours,lost_user_cost,lost_infra_gpu_hours,"
	    "lost_infra_cost,hang_gpu_hours,hang_cost,straggler_gpu_hours,straggler_cost,"
	    "queue_wait_gpu_hours,attempts\r\n"
	    "%s,on-demand,4.000000,16.000000,2.500000,10.000000,0.000000,0.000000,0.500000,"
	    "2.000000,0.000000,0.000000,0.000000,0.000000,0.500000,2.000000,0.000000,0.000000,"
	    "0.500000,2.000000,0.000000,1\r\n"
	    "%s,spot,2.500000,5.600000,0.833333,2.083333,0.166667,0.416667,0.000000,0.000000,"
	    "1.000000,2.500000,0.333333,0.400000,0.000000,0.000000,0.166667,0.200000,0.000000,"
	    "0.000000,0.200000,2\r\n",
	    t, t);
	CHECK_STR_EQ(r.body, want);
	ty_resp_free(&r);
}

TY_TEST(goodput_split_parameter_errors)
{
	static const struct {
		const char *query, *field, *says;
	} cases[] = {
	    {"split=money", "split", "'split' must be goodput"},
	    {"split=", "split", "'split' must be goodput"},
	    {"split=GOODPUT", "split", "'split' must be goodput"},
	    {"split=goodput&group_by=job", "group_by", "leave 'group_by' out"},
	    {"split=goodput&format=xml", "format", "'format' must be json or csv"},
	    {"format=csv", "format", "for split=goodput only"},
	};
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ty_test_context("%s", cases[i].query);
		get(&r, st->admin, cases[i].query);
		CHECK_PROBLEM(&r, 400, "invalid_parameter", cases[i].field);
		if (!strstr(r.body, cases[i].says))
			FAIL("body '%s' does not say '%s'", r.body, cases[i].says);
	}
	ty_test_context(NULL);
	get(&r, st->admin, "split=goodput&format=json");
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

/* The job document: its effective training time ratio over the attempts that ended. */
TY_TEST(job_document_has_its_goodput)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *t = ty_mk_team("usage-job", 8, -1), *id;

	ty_http(&r, "POST", "/v1/jobs", st->admin,
		ty_tmpl("{'team':'@T','command':['x'],'resources':{'gpus_per_node':4}}", t),
		NULL);
	REQUIRE_STATUS(&r, 201);
	id = ty_test_strf("%lld", (long long)json_integer_value(ty_jpath(r.json, "id")));
	ty_resp_free(&r);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%s", id), st->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK(json_is_null(ty_jpath(r.json, "goodput")));
	/* 1500 s useful of attempt 1 (2 GPUs), 2250 s of attempt 2 (4), over 3 hours */
	goodput_row(t, atoll(id), 1, "spot", 2, "2025-01-01T00:00:00Z", "2025-01-01T01:00:00Z", 1,
		    "failed", (struct gp){3000000, 600000, 0, 3600000, 0, 0, 0, 0, 0});
	goodput_row(t, atoll(id), 2, "spot", 4, "2025-01-01T02:00:00Z", "2025-01-01T03:00:00Z", 1,
		    "succeeded", (struct gp){9000000, 0, 1800000, 0, 0, 1800000, 0, 1800000, 0});
	ty_resp_free(&r);
	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%s", id), st->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	CHECK_NUM(r.json, "goodput.ratio", 0.3472);
	CHECK_NUM(r.json, "goodput.useful_seconds", 3750);
	CHECK_NUM(r.json, "goodput.wall_seconds", 10800);
	CHECK_JSTR(r.json, "goodput.as_of", "2025-01-01T03:00:00.000Z");
	CHECK_NUM(r.json, "goodput.gpu_seconds.total", 21600);
	CHECK_NUM(r.json, "goodput.gpu_seconds.useful", 12000);
	CHECK_NUM(r.json, "goodput.gpu_seconds.straggler", 1800);
	CHECK_NUM(r.json, "goodput.gpu_seconds.lost_infra", 1800);
	CHECK_NUM(r.json, "goodput.gpu_seconds.checkpoint", 600);
	ty_resp_free(&r);
}

TY_TEST(members_see_their_team_only_and_admins_all)
{
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};
	const char *a, *b, *member, *viewer;
	json_t *j, *e;
	size_t i;
	bool saw_a = false, saw_b = false;

	seed(&a, &b, 4000);
	member = ty_mk_token("member", a);
	viewer = ty_mk_token("viewer", a);

	j = get(&r, member, RANGE "&group_by=job");
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(ty_jpath(j, "items"), i, e)
	    CHECK_STR_EQ(json_string_value(json_object_get(e, "team")), a);
	CHECK_NUM(j, "totals.gpu_seconds", 37800);

	j = get(&r, viewer, ty_test_strf(RANGE "&team=%s", a));
	REQUIRE_STATUS(&r, 200);
	CHECK_NUM(j, "totals.gpu_seconds", 37800);

	get(&r, member, ty_test_strf(RANGE "&team=%s", b));
	CHECK_PROBLEM(&r, 403, "forbidden", "team");

	/* an admin without a team sees every team */
	j = get(&r, st->admin, RANGE);
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(ty_jpath(j, "items"), i, e)
	{
		const char *t = json_string_value(json_object_get(e, "team"));

		if (t && !strcmp(t, a))
			saw_a = true;
		if (t && !strcmp(t, b)) {
			saw_b = true;
			CHECK(fabs(json_number_value(json_object_get(e, "gpu_seconds")) - 28800) <
			      1e-6);
		}
	}
	CHECK(saw_a && saw_b);

	get(&r, NULL, RANGE);
	CHECK_STATUS(&r, 401);
	ty_resp_free(&r);
}

TY_TEST(parameter_errors_name_the_parameter)
{
	static const struct {
		const char *query;
		int status;
		const char *code, *field;
	} cases[] = {
	    {"from=yesterday", 400, "invalid_parameter", "from"},
	    {"from=2025-01-01", 400, "invalid_parameter", "from"},
	    {"from=2025-02-30T00:00:00Z", 400, "invalid_parameter", "from"},
	    {"from=2025-01-01T24:00:00Z", 400, "invalid_parameter", "from"},
	    {"from=2025-01-01T00:00:00", 400, "invalid_parameter", "from"},
	    {"from=2025-01-01T00:00:00.Z", 400, "invalid_parameter", "from"},
	    {"to=2025-13-01T00:00:00Z", 400, "invalid_parameter", "to"},
	    {"to=2025-01-01T00:00:00%2B1:00", 400, "invalid_parameter", "to"},
	    {"group_by=week", 400, "invalid_parameter", "group_by"},
	    {"group_by=", 400, "invalid_parameter", "group_by"},
	    {"team=Not_A_Team", 400, "invalid_parameter", "team"},
	    {"team=no-such-team-anywhere", 404, "team_not_found", "team"},
	    {"from=2025-01-02T00:00:00Z&to=2025-01-01T00:00:00Z", 400, "invalid_parameter", "from"},
	    {"from=2025-01-01T00:00:00Z&to=2025-01-01T00:00:00Z", 400, "invalid_parameter", "from"},
	    {"from=2020-01-01T00:00:00Z&to=2025-01-01T00:00:00Z&group_by=day", 400,
	     "invalid_parameter", "from"},
	    {"from=2099-01-01T00:00:00Z", 400, "invalid_parameter", "from"},
	};
	const struct ty_stack *st = ty_stack_get();
	struct ty_resp r = {0};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ty_test_context("%s", cases[i].query);
		get(&r, st->admin, cases[i].query);
		CHECK_PROBLEM(&r, cases[i].status, cases[i].code, cases[i].field);
	}
	ty_test_context(NULL);
	/* accepted forms: fractions, lower case, a leap day, a long day range */
	get(&r, st->admin, "from=2024-02-29t00:00:00.123456789z&to=2024-03-01T00:00:00Z");
	CHECK_STATUS(&r, 200);
	get(&r, st->admin, "from=2024-01-01T00:00:00Z&to=2024-12-31T00:00:00Z&group_by=day");
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}

TY_TEST(running_attempts_accrue_up_to_now_at_the_published_rate)
{
	struct ty_resp r = {0};
	const char *a = ty_mk_team("usage-run", 8, -1);
	const char *member = ty_mk_token("member", a);
	long long job = ty_mk_job(member, a, NULL);
	const char *jb = ty_test_strf("%lld", job), *node = ty_uniq("usage-node");
	double gs;
	json_t *j;

	/* a node of the spot pool with H100s; rates as a scheduler publishes them */
	DB("INSERT INTO nodes (id, address, labels, gpus, boot_id, inventory)"
	   " VALUES ($1, '127.0.0.1', '{\"pool\":\"spot\"}', 4, 'b',"
	   " '{\"gpus\":[{\"index\":0,\"name\":\"H100\"},{\"index\":1,\"name\":\"H100\"},"
	   "{\"index\":2,\"name\":\"H100\"},{\"index\":3,\"name\":\"H100\"}]}')",
	   node);
	DB("INSERT INTO usage_rates VALUES ('spot', '', 1), ('spot', 'H100', 3)"
	   " ON CONFLICT DO NOTHING");
	/* attempt 1 created an hour ago holds 2 GPUs and runs */
	DB("INSERT INTO attempts (job_id, attempt, state, epoch, master_node, master_addr,"
	   " master_port, nnodes, world_size, launch, created_at)"
	   " VALUES ($1::bigint, 1, 'running', 1, $2, '127.0.0.1', 29999, 1, 2, '{}',"
	   " now() - interval '1 hour')",
	   jb, node);
	DB("INSERT INTO allocations (job_id, attempt, node_id, node_rank, first_rank,"
	   " local_ranks, gpus) VALUES ($1::bigint, 1, $2, 0, 0, 2, '{2,3}')",
	   jb, node);

	j = get(&r, member, "group_by=pool");
	REQUIRE_STATUS(&r, 200);
	REQUIRE(json_array_size(ty_jpath(j, "items")) == 1);
	CHECK_JSTR(j, "items[0].pool", "spot");
	CHECK_JINT(j, "items[0].attempts", 1);
	CHECK_JINT(j, "items[0].running_attempts", 1);
	CHECK_NUM(j, "items[0].lost_gpu_seconds", 0);
	gs = json_number_value(ty_jpath(j, "items[0].gpu_seconds"));
	/* at least the hour it has held 2 GPUs, and priced at the H100 spot rate */
	CHECK(gs >= 7200 && gs < 7200 + 3600);
	CHECK(fabs(json_number_value(ty_jpath(j, "items[0].cost")) - gs / 3600 * 3) < 1e-3);

	/* a range that ended before it started: nothing */
	j = get(&r, member, "from=2025-01-01T00:00:00Z&to=2025-01-02T00:00:00Z");
	REQUIRE_STATUS(&r, 200);
	CHECK_INT_EQ((long long)json_array_size(ty_jpath(j, "items")), 0);
	ty_resp_free(&r);
}

/* Run sql on a connection of our own; returns the SQLSTATE of its error ("" when it worked). */
static const char *try_sql(const char *sql)
{
	PGconn *c = PQconnectdb(ty_stack_get()->db_url);
	PGresult *res;
	const char *state;

	REQUIRE(PQstatus(c) == CONNECTION_OK);
	res = PQexec(c, sql);
	state = ty_test_strf("%s", PQresultStatus(res) == PGRES_COMMAND_OK ||
					   PQresultStatus(res) == PGRES_TUPLES_OK
				       ? ""
				       : PQresultErrorField(res, PG_DIAG_SQLSTATE));
	PQclear(res);
	PQfinish(c);
	return state;
}

TY_TEST(ledger_is_append_only)
{
	const char *a, *b;

	seed(&a, &b, 5000);
	/* insufficient_privilege, raised by the ledger's trigger */
	CHECK_STR_EQ(try_sql("UPDATE usage_ledger SET cost = 0 WHERE job_id = 5001"), "42501");
	CHECK_STR_EQ(try_sql("DELETE FROM usage_ledger WHERE job_id = 5001"), "42501");
	CHECK_STR_EQ(try_sql("TRUNCATE usage_ledger"), "42501");
	CHECK_STR_EQ(DB("SELECT count(*) FROM usage_ledger WHERE job_id = 5001"), "2");
	CHECK_STR_EQ(DB("SELECT sum(cost)::text FROM usage_ledger WHERE job_id = 5001"), "37");
}
