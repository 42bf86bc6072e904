/*
 * Training progress and stragglers (docs/dispatch.md, "Progress" and
 * "Failures, retries and bad nodes"): the ranks' steps that heartbeats
 * carry are kept and shown, and a rank far below its gang's median step
 * rate is a straggler whose node is blamed, suspect after enough jobs,
 * and whose share of the gang's time is straggler goodput in the ledger.
 */
#include "fixture.h"
#include "ty_test.h"

#include <stdio.h>
#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

#define STRAGGLER_EVENTS                                                                           \
	"SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'straggler'"

/* A running 2-node job, one rank per node, its launches in l[] by node (n1, n2). */
static long long gang(struct fx *f, const struct proto_msg *l[2])
{
	long long job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");

	l[0] = fx_recv(f, "n1", "launch", job, T);
	l[1] = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l[0] != NULL && l[1] != NULL);
	fx_run(f, "n1", l[0]);
	fx_run(f, "n2", l[1]);
	FX_WAIT(f, T, "running", "SELECT state FROM attempts WHERE job_id = $1", fx_n(job));
	return job;
}

static long long first_rank(const struct proto_msg *l)
{
	return (long long)json_integer_value(json_object_get(l->data, "first_rank"));
}

/* node reports its one rank of the launch at rate steps/s (rate < 0: null) */
static void report(struct fx *f, const char *node, const struct proto_msg *l, int step,
		   double rate)
{
	char r[32];

	if (rate < 0)
		snprintf(r, sizeof(r), "null");
	else
		snprintf(r, sizeof(r), "%g", rate);
	fx_node_progress(f, node, l->job, l->attempt,
			 ty_test_strf("[{'rank':%lld,'step':%d,'steps_per_second':%s,"
				      "'samples_per_second':64.5,'step_at':1764000000000}]",
				      first_rank(l), step, r));
}

/* Heartbeats of node applied for more than a second after now. */
static void beats_pass(struct fx *f, const char *node)
{
	const char *t0 = FX_Q(f, "SELECT now()::text");

	FX_WAIT(f, T, "t",
		"SELECT last_heartbeat > $2::timestamptz + interval '1 second' FROM nodes"
		" WHERE id = $1",
		node, t0);
}

TY_TEST(a_slow_rank_is_a_straggler_and_its_node_suspect_after_two_jobs)
{
	static const char *const args[] = {"--suspect-after-jobs=2", "--drain-after-jobs=3",
					   "--straggler-percent=50", "--straggler-reports=3", NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l[2], *l2[2];
	long long job, job2;
	json_t *body, *a, *p, *s;
	const char *want;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", args);
	job = gang(f, l);

	/* a malformed entry is ignored: nothing kept */
	fx_node_progress(f, "n1", job, 1,
			 "[{'rank':0,'step':-3,'steps_per_second':1,'step_at':1}]");
	beats_pass(f, "n1");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1"
			  " AND progress IS NOT NULL",
			  fx_n(job)),
		     "0");

	/* rank on n2 at a fifth of n1's rate: a straggler after 3 reports, once */
	report(f, "n1", l[0], 400, 2.0);
	report(f, "n2", l[1], 80, 0.4);
	FX_WAIT(f, T, "1", STRAGGLER_EVENTS, fx_n(job));
	beats_pass(f, "n2");
	CHECK_STR_EQ(FX_Q(f, STRAGGLER_EVENTS, fx_n(job)), "1");
	want = ty_test_strf("straggler on n2: rank %lld at 0.4 steps/s against the gang's median "
			    "2 (job %lld, attempt 1) | running | n2",
			    first_rank(l[1]), job);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message || ' | ' || state || ' | ' || (data->>'node')"
			  " FROM job_events WHERE job_id = $1 AND type = 'straggler'",
			  fx_n(job)),
		     want);
	/* blamed as a system failure the scheduler saw; one job: still ready */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT failure_class || ' | ' || evidence_source || ' | ' || message"
			  " FROM node_failures WHERE job_id = $1",
			  fx_n(job)),
		     "system | executor | a straggler: far below its gang's median step rate");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n2'"), "ready");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "running");
	/* a degraded condition of n2 that its heartbeats (which list none) do not clear */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(kind || ' ' || severity || ' ' || evidence, '; ')"
			  " FROM node_conditions WHERE node_id = 'n2' AND cleared_at IS NULL"),
		     ty_test_strf("straggler degraded rank %lld at 0.4 steps/s against the "
				  "gang's median 2 (job %lld, attempt 1)",
				  first_rank(l[1]), job));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM node_conditions WHERE node_id = 'n1'"), "0");

	/* the API shows each rank's progress and the verdict */
	body = json_loads(fx_api(f, "GET", ty_test_strf("/v1/jobs/%lld/attempts", job), 200), 0,
			  NULL);
	a = json_array_get(json_object_get(body, "items"), 0);
	p = json_object_get(a, "progress");
	REQUIRE(json_array_size(p) == 2);
	for (size_t i = 0; i < 2; i++) {
		const json_t *e = json_array_get(p, i);
		const char *node = json_string_value(json_object_get(e, "node"));

		ty_test_context("progress %zu", i);
		REQUIRE(node != NULL);
		CHECK_INT_EQ(json_integer_value(json_object_get(e, "rank")), (long long)i);
		CHECK_INT_EQ(json_integer_value(json_object_get(e, "step")),
			     !strcmp(node, "n1") ? 400 : 80);
		CHECK(json_number_value(json_object_get(e, "samples_per_second")) == 64.5);
		CHECK(json_object_get(e, "below") == NULL); /* the scheduler's own count */
	}
	ty_test_context(NULL);
	s = json_object_get(a, "stragglers");
	REQUIRE(json_array_size(s) == 1);
	CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(s, 0), "node")), "n2");
	CHECK(json_number_value(json_object_get(json_array_get(s, 0), "median")) == 2.0);
	json_decref(body);

	/* a second job with the same slow rank on n2: suspect, and n1 never blamed */
	job2 = gang(f, l2);
	report(f, "n1", l2[0], 100, 3.0);
	report(f, "n2", l2[1], 10, -1); /* unknown at first: not judged */
	beats_pass(f, "n2");
	CHECK_STR_EQ(FX_Q(f, STRAGGLER_EVENTS, fx_n(job2)), "0");
	report(f, "n2", l2[1], 12, 0.5);
	FX_WAIT(f, T, "suspect", "SELECT state FROM nodes WHERE id = 'n2'");
	CHECK_STR_EQ(FX_Q(f, STRAGGLER_EVENTS, fx_n(job2)), "1");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM nodes WHERE id = 'n1'"), "ready");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM node_failures WHERE node_id = 'n1'"), "0");
	fx_sched_stop(f, 0);
}

/*
 * A scheduler (judging stragglers at 50 % of the median for 3 reports, or
 * by its defaults) over nodes n1 and n2, and a running 2-node job on them.
 */
static long long two_node_gang(struct fx *f, const struct proto_msg *l[2], bool judge)
{
	static const char *const args[] = {"--straggler-percent=50", "--straggler-reports=3",
					   NULL};

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", judge ? args : NULL);
	return gang(f, l);
}

/* Both ranks exit 0. */
static void gang_succeeds(struct fx *f, const struct proto_msg *l[2])
{
	fx_exit(f, "n1", l[0], 0, "", "");
	fx_exit(f, "n2", l[1], 0, "", "");
}

#define SHARES "SELECT jsonb_array_length(straggler_shares) || ' ' || (straggler_shares->-1->>1)" \
	       " FROM attempts WHERE job_id = $1"

/*
 * Goodput (docs/scheduling.md, "Goodput"): while a rank is a straggler,
 * its share of the gang's time, 1 − its rate / the median, is straggler
 * time in every node's ledger row instead of useful; once it recovers, no
 * more.
 */
TY_TEST(a_stragglers_share_of_the_gangs_time_is_straggler_goodput_while_it_straggles)
{
	struct fx *f = fx_start();
	const struct proto_msg *l[2];
	long long job = two_node_gang(f, l, true);

	report(f, "n1", l[0], 400, 2.0);
	report(f, "n2", l[1], 80, 0.5);
	FX_WAIT(f, T, "1", STRAGGLER_EVENTS, fx_n(job));
	/* the verdict's share, from its time, kept for the ledger (0039's columns unused) */
	FX_WAIT(f, T, "1 0.75", SHARES, fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (straggler_at IS NULL AND straggler_lost IS NULL)::text"
			  " FROM attempts WHERE job_id = $1",
			  fx_n(job)),
		     "true");
	fx_poll(f, 300); /* some time as a straggler; the same share is not appended again */
	CHECK_STR_EQ(FX_Q(f, SHARES, fx_n(job)), "1 0.75");
	/* it speeds up again: the share drops to 0 */
	report(f, "n2", l[1], 90, 2.0);
	FX_WAIT(f, T, "2 0", SHARES, fx_n(job));
	fx_poll(f, 300); /* some time after it recovered */
	gang_succeeds(f, l);
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	FX_WAIT(f, T, "2", "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job));
	/* each row: 3/4 of its GPU time from the verdict to the recovery, to the millisecond */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(l.node_id, ',' ORDER BY l.node_id) FROM usage_ledger l"
			  " JOIN attempts t ON t.job_id = l.job_id AND t.attempt = l.attempt"
			  " WHERE l.job_id = $1 AND l.straggler_gpu_ms > 0"
			  " AND abs(l.straggler_gpu_ms - l.gpus * 0.75"
			  "  * ((t.straggler_shares->1->>0)::bigint"
			  "  - (t.straggler_shares->0->>0)::bigint)) <= 1"
			  " AND l.useful_gpu_ms + l.straggler_gpu_ms = l.gpu_ms"
			  " AND l.useful_gpu_ms > 0",
			  fx_n(job)),
		     "n1,n2");
	fx_sched_stop(f, 0);
}

/* An attempt the previous release judged (migration 0039's columns): its share from then on. */
TY_TEST(a_verdict_of_the_previous_release_counts_from_it_to_the_end)
{
	struct fx *f = fx_start();
	const struct proto_msg *l[2];
	long long job = two_node_gang(f, l, false);

	FX_Q(f,
	     "UPDATE attempts SET straggler_at = now(), straggler_lost = 0.5"
	     " WHERE job_id = $1 RETURNING 1",
	     fx_n(job));
	fx_poll(f, 300);
	gang_succeeds(f, l);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(l.node_id, ',' ORDER BY l.node_id) FROM usage_ledger l"
			  " JOIN attempts t ON t.job_id = l.job_id AND t.attempt = l.attempt"
			  " WHERE l.job_id = $1 AND l.straggler_gpu_ms > 0"
			  " AND abs(l.straggler_gpu_ms - l.gpus * 0.5"
			  "  * (round(extract(epoch FROM l.ended_at) * 1000)"
			  "  - round(extract(epoch FROM t.straggler_at) * 1000))) <= 1"
			  " AND l.useful_gpu_ms + l.straggler_gpu_ms = l.gpu_ms",
			  fx_n(job)),
		     "n1,n2");
	fx_sched_stop(f, 0);
}

/* The share's steps are bounded: a full list takes no more, its last step holds to the end. */
TY_TEST(a_full_share_list_takes_no_more)
{
	struct fx *f = fx_start();
	const struct proto_msg *l[2];
	long long job = two_node_gang(f, l, true);

	FX_Q(f,
	     "UPDATE attempts SET straggler_shares = (SELECT jsonb_agg(jsonb_build_array(k, 0))"
	     " FROM generate_series(1, 1000) k) WHERE job_id = $1 RETURNING 1",
	     fx_n(job));
	report(f, "n1", l[0], 400, 2.0);
	report(f, "n2", l[1], 80, 0.5);
	FX_WAIT(f, T, "1", STRAGGLER_EVENTS, fx_n(job));
	beats_pass(f, "n2");
	CHECK_STR_EQ(FX_Q(f, SHARES, fx_n(job)), "1000 0");
	fx_sched_stop(f, 0);
}
