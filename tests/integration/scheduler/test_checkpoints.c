/*
 * The checkpoints table (scheduler/store/checkpoints.c): filled from
 * checkpoint_written reports idempotently, disagreements recorded, and the
 * launch naming the newest valid one; a rejected one gives way to the next
 * older one.
 */
#include "fixture.h"
#include "ty_test.h"

#include <string.h>

#define T 15000 /* generous upper bound for anything to happen */

/* 64 hex digits of c: a digest the test tells apart by its first digit. */
static const char *dg(char c)
{
	char *s = ty_test_alloc(65);

	memset(s, c, 64);
	s[64] = 0;
	return s;
}

static void report(struct fx *f, const char *node, long long job, int attempt, int step,
		   const char *status, const char *digest, bool hashed)
{
	fx_send(f, node, "checkpoint_written", job, attempt,
		ty_test_strf("{'path':'/ckpt/job-%lld/step-%d','step':%d,'valid':%s,'status':'%s',"
			     "'digest':%s,'hashed':%s,'files':2,'bytes':%d,'reason':%s}",
			     job, step, step, strcmp(status, "valid") ? "false" : "true", status,
			     digest ? ty_test_strf("'%s'", digest) : "null",
			     hashed ? "true" : "false", step * 10,
			     strcmp(status, "valid") ? "'no MANIFEST.json (torn)'" : "null"));
}

/* The launch's resume as "step digest", or "none". */
static const char *resume_of(const struct proto_msg *l)
{
	const json_t *r = json_object_get(l->data, "resume");

	if (!r)
		return "none";
	return ty_test_strf("%lld %s", (long long)json_integer_value(json_object_get(r, "step")),
			    json_string_value(json_object_get(r, "digest")));
}

static void start(struct fx *f)
{
	static const char *const args[] = {"--retry-backoff-seconds=0", NULL};

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
}

/* Both nodes' launches of attempt, run; *rank0 the node of rank 0. */
static void launched(struct fx *f, long long job, int attempt, const struct proto_msg **l0,
		     const struct proto_msg **l1, const char **rank0, const char **other)
{
	FX_WAIT(f, T, "2", "SELECT count(*) FROM allocations WHERE job_id = $1 AND attempt = $2",
		fx_n(job), fx_n(attempt));
	*rank0 = FX_Q(f,
		      "SELECT node_id FROM allocations WHERE job_id = $1 AND attempt = $2"
		      " AND node_rank = 0",
		      fx_n(job), fx_n(attempt));
	*other = strcmp(*rank0, "n1") ? "n1" : "n2";
	*l0 = fx_recv(f, *rank0, "launch", job, T);
	*l1 = fx_recv(f, *other, "launch", job, T);
	REQUIRE(*l0 && *l1);
	REQUIRE_INT_EQ((*l0)->attempt, attempt);
	fx_run(f, *rank0, *l0);
	fx_run(f, *other, *l1);
}

static void both_fail(struct fx *f, const struct proto_msg *l0, const struct proto_msg *l1,
		      const char *rank0, const char *other)
{
	/* the job's fault, not the nodes': both stay placeable */
	fx_exit_with(f, rank0, l0, 1, "system", "checkpoints: failed", ",'node_fault':false");
	fx_exit_with(f, other, l1, 1, "system", "checkpoints: failed", ",'node_fault':false");
}

TY_TEST(reports_fill_the_table_once_and_the_launch_names_the_newest_valid)
{
	struct fx *f = fx_start();
	const struct proto_msg *l0, *l1;
	const char *rank0, *other;
	long long job;

	start(f);
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4},'retry':{'system':5}");
	launched(f, job, 1, &l0, &l1, &rank0, &other);
	/* a first attempt resumes from nothing: no resume in its launch */
	CHECK_STR_EQ(resume_of(l0), "none");
	CHECK_STR_EQ(resume_of(l1), "none");
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	/* each report twice (redelivery, a restarted executor's scan): one row each */
	for (int i = 0; i < 2; i++) {
		report(f, rank0, job, 1, 100, "valid", dg('1'), true);
		report(f, rank0, job, 1, 200, "valid", dg('2'), true);
		report(f, rank0, job, 1, 300, "torn", NULL, true);
	}
	/* a node with no part in the attempt is not heard */
	report(f, "n3", job, 1, 400, "valid", dg('4'), true);
	/* an older executor's report without a digest cannot be resumed from */
	fx_send(f, rank0, "checkpoint_written", job, 1,
		"{'path':'/ckpt/step-500','step':500,'valid':true}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(step || ' ' || status || ' ' || coalesce(left(digest, 1),"
			  " '-') || ' ' || node_id || ' ' || attempt || ' ' || bytes || ' ' || files,"
			  " ',' ORDER BY step) FROM checkpoints WHERE job_id = $1",
			  fx_n(job)),
		     ty_test_strf("100 valid 1 %s 1 1000 2,200 valid 2 %s 1 2000 2,"
				  "300 torn - %s 1 3000 2",
				  rank0, rank0, rank0));

	/* the other node sees step 200 with another manifest: recorded, never overwritten */
	for (int i = 0; i < 2; i++)
		report(f, other, job, 1, 200, "valid", dg('9'), false);
	report(f, other, job, 1, 100, "valid", dg('1'), false); /* agrees: nothing */
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT status || ' ' || left(digest, 1) || ' ' || node_id"
			     " FROM checkpoints WHERE job_id = $1 AND step = 200",
			  fx_n(job)),
		     ty_test_strf("valid 2 %s", rank0));
	CHECK_STR_EQ(FX_Q(f, "SELECT reason FROM checkpoints WHERE job_id = $1 AND step = 200",
			  fx_n(job)),
		     ty_test_strf("node %s reported MANIFEST.json digest %s, node %s verified %s",
				  other, dg('9'), rank0, dg('2')));
	CHECK_STR_EQ(FX_Q(f, "SELECT reason IS NULL FROM checkpoints WHERE job_id = $1"
			     " AND step = 100",
			  fx_n(job)),
		     "t");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM job_events WHERE job_id = $1"
			  " AND type = 'checkpoint_disagreement' AND data->>'step' = '200'",
			  fx_n(job)),
		     "1");

	/* the next attempt's launch names step 200 on both nodes */
	both_fail(f, l0, l1, rank0, other);
	launched(f, job, 2, &l0, &l1, &rank0, &other);
	CHECK_STR_EQ(resume_of(l0), ty_test_strf("200 %s", dg('2')));
	CHECK_STR_EQ(resume_of(l1), ty_test_strf("200 %s", dg('2')));
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(l0->data, "resume"), "path")),
		     ty_test_strf("/ckpt/job-%lld/step-200", job));

	/* a node finds its copy differs: rejected, with the reason; the next launch names 100 */
	fx_send(f, other, "checkpoint_written", job, 2,
		ty_test_strf("{'path':'/ckpt/job-%lld/step-200','step':200,'valid':false,"
			     "'status':'rejected','digest':'%s','hashed':false,"
			     "'reason':'MANIFEST.json has SHA-256 %s, the launch names %s'}",
			     job, dg('2'), dg('9'), dg('2')));
	/* a stale rejection (another digest) changes nothing */
	fx_send(f, other, "checkpoint_written", job, 2,
		ty_test_strf("{'path':'/x','step':100,'valid':false,'status':'rejected',"
			     "'digest':'%s','reason':'stale'}",
			     dg('7')));
	FX_WAIT(f, T, "rejected", "SELECT status FROM checkpoints WHERE job_id = $1 AND step = 200",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT reason FROM checkpoints WHERE job_id = $1 AND step = 200",
			  fx_n(job)),
		     ty_test_strf("MANIFEST.json has SHA-256 %s, the launch names %s", dg('9'),
				  dg('2')));
	CHECK_STR_EQ(FX_Q(f, "SELECT status FROM checkpoints WHERE job_id = $1 AND step = 100",
			  fx_n(job)),
		     "valid");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (data->>'next_step') || ' ' || (data->>'node') FROM job_events"
			  " WHERE job_id = $1 AND type = 'checkpoint_rejected'",
			  fx_n(job)),
		     ty_test_strf("100 %s", other));
	CHECK(strstr(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1"
			  " AND type = 'checkpoint_rejected'",
			  fx_n(job)),
		     "the next attempt resumes from step 100") != NULL);
	both_fail(f, l0, l1, rank0, other);
	launched(f, job, 3, &l0, &l1, &rank0, &other);
	CHECK_STR_EQ(resume_of(l0), ty_test_strf("100 %s", dg('1')));
	CHECK_STR_EQ(resume_of(l1), ty_test_strf("100 %s", dg('1')));
	fx_sched_stop(f, 0);
}

/*
 * Retention's deletions (status deleted, from the node of rank 0 of a job
 * that does not tier): the row stays as history and is never named again;
 * one from a node outside the attempt, or for a rejected row, changes
 * nothing.
 */
TY_TEST(a_deleted_checkpoint_is_never_the_resume_point)
{
	struct fx *f = fx_start();
	const char *team = fx_team(f, "ckdel", 8, -1, NULL);
	const struct proto_msg *l0, *l1;
	const char *rank0, *other;
	long long job;

	start(f);
	job = fx_submit_to(f, team, ",'resources':{'nodes':2,'gpus_per_node':2}");
	launched(f, job, 1, &l0, &l1, &rank0, &other);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	report(f, rank0, job, 1, 100, "valid", dg('1'), true);
	report(f, rank0, job, 1, 200, "valid", dg('2'), true);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM checkpoints WHERE job_id = $1 AND status = 'valid'",
		fx_n(job));
	fx_send(f, "n3", "checkpoint_written", job, 1,
		"{'path':'/ckpt/step-200','step':200,'valid':false,'status':'deleted',"
		"'reason':'retention: elsewhere'}");
	fx_send(f, rank0, "checkpoint_written", job, 1,
		"{'path':'/ckpt/step-200','step':200,'valid':false,'status':'deleted',"
		"'reason':'retention: keeping the newest 1 valid and every 0-th step'}");
	FX_WAIT(f, T, "deleted", "SELECT status FROM checkpoints WHERE job_id = $1 AND step = 200",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT reason FROM checkpoints WHERE job_id = $1 AND step = 200",
			  fx_n(job)),
		     "retention: keeping the newest 1 valid and every 0-th step");
	CHECK_STR_EQ(FX_Q(f, "SELECT status FROM checkpoints WHERE job_id = $1 AND step = 100",
			  fx_n(job)),
		     "valid");
	/* the next attempt resumes from the step that is still there */
	both_fail(f, l0, l1, rank0, other);
	launched(f, job, 2, &l0, &l1, &rank0, &other);
	CHECK_STR_EQ(resume_of(l0), ty_test_strf("100 %s", dg('1')));
	CHECK_STR_EQ(resume_of(l1), ty_test_strf("100 %s", dg('1')));
	fx_sched_stop(f, 0);
}
