/*
 * The usage ledger written by the scheduler (docs/scheduling.md,
 * "Accounting"), the test playing the executors: an attempt that ends —
 * succeeded, failed with or without a valid checkpoint, cancelled — gets
 * exactly one row per node once every node released its GPUs, with the
 * node's pool and GPU model, the rate of --rates-file, and the work lost
 * since its last valid checkpoint; fair share counts the same GPU-seconds,
 * but for what the infrastructure lost; the goodput categories add up.
 */
#include "fixture.h"
#include "scheduler.h"
#include "ty_stack.h"
#include "ty_test.h"
#include "ty_time.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define T 15000 /* generous upper bound for anything to happen */

#define RATES "{\"spot\": {\"default\": 1.5, \"H100\": 2.5}, \"on-demand\": {\"default\": 4}}"

/* --rates-file=PATH of a file holding RATES. */
static const char *rates_arg(void)
{
	const char *path = ty_test_strf("%s/rates-%d.json", ty_test_workdir(), rand());
	FILE *fp = fopen(path, "w");

	REQUIRE(fp != NULL);
	fputs(RATES, fp);
	REQUIRE(fclose(fp) == 0);
	return ty_test_strf("--rates-file=%s", path);
}

/*
 * Nodes n1 (spot, H100s) and n2 (no pool label: on-demand, no inventory),
 * 4 GPUs each, and a scheduler with the rate table.
 */
static void start(struct fx *f)
{
	const char *args[] = {rates_arg(), NULL};

	fx_node_pool(f, "n1", 4, "spot");
	fx_node(f, "n2", 4);
	fx_sched_start(f, "s1", args);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	/* what a real executor registers: the GPUs' names (the mirror does not read them) */
	FX_Q(f,
	     "UPDATE nodes SET inventory ="
	     " '{\"gpus\": [{\"index\": 0, \"name\": \"H100\"}, {\"index\": 1, \"name\": \"H100\"},"
	     " {\"index\": 2, \"name\": \"H100\"}, {\"index\": 3, \"name\": \"H100\"}]}'"
	     " WHERE id = 'n1' RETURNING 1");
}

/*
 * Every ledger row of the job's attempt matches its allocation: GPUs, from
 * the attempt's creation to the node's release, cost at rate, and lost
 * work from lost_from ("start", "checkpoint" or "none"). Returns the rows.
 */
static int check_rows(struct fx *f, long long job, int attempt, const char *lost_from)
{
	const char *bad = FX_Q(
	    f,
	    "SELECT string_agg(l.node_id, ',') FROM usage_ledger l"
	    " JOIN allocations a USING (job_id, attempt, node_id)"
	    " JOIN attempts t USING (job_id, attempt)"
	    " WHERE l.job_id = $1 AND l.attempt = $2 AND NOT ("
	    " l.gpus = cardinality(a.gpus) AND l.team_id = (SELECT team_id FROM jobs WHERE id = $1)"
	    " AND abs(extract(epoch FROM l.started_at - t.created_at)) < 0.001"
	    " AND abs(extract(epoch FROM l.ended_at - a.released_at)) < 0.001"
	    " AND abs(l.gpu_seconds - l.gpus * extract(epoch FROM l.ended_at - l.started_at))"
	    "  < 0.01"
	    " AND abs(l.cost - l.gpu_seconds / 3600 * l.rate_per_gpu_hour) < 1e-9"
	    " AND l.outcome = t.state AND l.failure_class IS NOT DISTINCT FROM t.failure_class"
	    " AND (l.checkpoint_at IS NULL) = (t.last_checkpoint_at IS NULL)"
	    " AND coalesce(abs(extract(epoch FROM l.checkpoint_at - t.last_checkpoint_at))"
	    "  < 0.001, true)"
	    " AND abs(l.lost_gpu_seconds - CASE $3"
	    "  WHEN 'start' THEN l.gpu_seconds"
	    "  WHEN 'checkpoint' THEN l.gpus * extract(epoch FROM l.ended_at - l.checkpoint_at)"
	    "  ELSE 0 END) < 0.01)",
	    fx_n(job), fx_n(attempt), lost_from);

	CHECK_STR_EQ(bad, NULL);
	return atoi(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1 AND attempt = $2",
			 fx_n(job), fx_n(attempt)));
}

/* "pool model rate" of the job's row on node. */
static const char *priced(struct fx *f, long long job, const char *node)
{
	return FX_Q(f,
		    "SELECT pool || ' ' || gpu_model || ' ' || rate_per_gpu_hour FROM usage_ledger"
		    " WHERE job_id = $1 AND node_id = $2",
		    fx_n(job), node);
}

TY_TEST(succeeded_attempt_writes_one_row_per_node_priced_by_pool_and_model)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	long long job;

	start(f);
	/* the rate table as published for the API, "default" as '' */
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(pool || '/' || gpu_model || '=' ||"
			     " rate_per_gpu_hour, ' ' ORDER BY pool, gpu_model) FROM usage_rates"),
		     "on-demand/=4 spot/=1.5 spot/H100=2.5");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2},'spot':{'allowed':true}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job)),
		     "0");
	fx_exit(f, "n1", l1, 0, "", "");
	fx_sync(f, T);
	/* one node still holds its GPUs: nothing yet */
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job)),
		     "0");
	fx_exit(f, "n2", l2, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_INT_EQ(check_rows(f, job, 1, "none"), 2);
	CHECK_STR_EQ(priced(f, job, "n1"), "spot H100 2.5");
	CHECK_STR_EQ(priced(f, job, "n2"), "on-demand  4");
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(outcome, ',') FROM usage_ledger WHERE job_id = $1",
			  fx_n(job)),
		     "succeeded,succeeded");

	/*
	 * Fair share counts what the ledger holds: once the scheduler has
	 * brought the team's usage past the end, the two agree (the half-life
	 * of a week decays seconds by less than 0.01 %).
	 */
	FX_WAIT(f, T, "t",
		"SELECT u.updated_at > (SELECT max(ended_at) FROM usage_ledger WHERE job_id = $1)"
		" FROM team_usage u WHERE u.team_id = (SELECT team_id FROM jobs WHERE id = $1)",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT abs(u.decayed_gpu_seconds - s.g) <= 0.001 * s.g + 0.01"
			  " FROM team_usage u, (SELECT sum(gpu_seconds) AS g FROM usage_ledger"
			  "  WHERE job_id = $1) s"
			  " WHERE u.team_id = (SELECT team_id FROM jobs WHERE id = $1)",
			  fx_n(job)),
		     "t");
	fx_sched_stop(f, 0);
}

/* Whether the team's usage is what the job's gang held from its attempt's creation on. */
static const char *accrued_from_start(struct fx *f, long long job)
{
	return FX_Q(f,
		    "SELECT abs(u.decayed_gpu_seconds - 2 * extract(epoch FROM u.updated_at"
		    " - t.created_at)) < 0.01 FROM team_usage u, jobs j, attempts t"
		    " WHERE j.id = $1 AND u.team_id = j.team_id AND t.job_id = j.id"
		    " AND t.attempt = 1",
		    fx_n(job));
}

/*
 * A gang live across cycles: each cycle's decayed usage counts its GPUs
 * from its attempt's creation up to the cycle's time, no more and no less
 * (the live part comes from the mirror, the rest from PostgreSQL).
 */
TY_TEST(live_gang_accrues_from_its_attempts_creation_across_cycles)
{
	struct fx *f = fx_start();
	const struct proto_msg *l;
	const char *node, *first;
	long long job, big;

	start(f);
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(job));
	node = FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(job));
	REQUIRE((l = fx_recv(f, node, "launch", job, T)) != NULL);
	fx_run(f, node, l);
	/*
	 * a cycle after the placement sees the gang (the placing cycle already
	 * shows its GPUs in use, but its usage is as of its snapshot, taken
	 * before the attempt existed; a later one is written within 10 s)
	 */
	FX_WAIT(f, 2 * T, "t",
		"SELECT u.gpus_in_use = 2 AND u.updated_at > t.created_at FROM team_usage u,"
		" jobs j, attempts t WHERE j.id = $1 AND u.team_id = j.team_id"
		" AND t.job_id = j.id AND t.attempt = 1",
		fx_n(job));
	CHECK_STR_EQ(accrued_from_start(f, job), "t");
	first = FX_Q(f,
		     "SELECT updated_at FROM team_usage WHERE team_id ="
		     " (SELECT team_id FROM jobs WHERE id = $1)",
		     fx_n(job));
	/* a job that must wait changes what the team shows: a later cycle writes it again */
	big = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4}");
	FX_WAIT(f, T, "t",
		"SELECT updated_at > $2::timestamptz AND pending_jobs = 1 FROM team_usage"
		" WHERE team_id = (SELECT team_id FROM jobs WHERE id = $1)",
		fx_n(job), first);
	CHECK_STR_EQ(accrued_from_start(f, job), "t");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(big)), "pending");
	fx_sched_stop(f, 0);
}

TY_TEST(failed_attempt_loses_the_work_since_its_last_valid_checkpoint)
{
	struct fx *f = fx_start();
	const struct proto_msg *l;
	const char *node;
	long long job;

	start(f);
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':3},'spot':{'allowed':true}");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(job));
	node = FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(job));
	l = fx_recv(f, node, "launch", job, T);
	REQUIRE(l != NULL);
	fx_run(f, node, l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	/* a verified checkpoint at step 100; a torn one at 200 and a replayed older one count not
	 */
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/ckpt/step-100','step':100,'valid':true}");
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/ckpt/step-200','step':200,'valid':false,'reason':'sha256 mismatch'}");
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/ckpt/step-50','step':50,'valid':true}");
	fx_send(f, node, "checkpoint_written", job, 1, "{'path':'/ckpt/step-300','step':300}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT last_checkpoint_step FROM attempts WHERE job_id = $1"
			  " AND last_checkpoint_at IS NOT NULL",
			  fx_n(job)),
		     "100");
	fx_exit(f, node, l, 1, "user", "Traceback: ValueError");
	FX_WAIT(f, T, "failed", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_INT_EQ(check_rows(f, job, 1, "checkpoint"), 1);
	CHECK_STR_EQ(
	    FX_Q(f,
		 "SELECT outcome || ' ' || failure_class || ' ' || (lost_gpu_seconds > 0"
		 " AND lost_gpu_seconds < gpu_seconds) FROM usage_ledger WHERE job_id = $1",
		 fx_n(job)),
	    "failed user true");
	fx_sched_stop(f, 0);
}

TY_TEST(failed_gang_is_written_when_its_last_node_releases_and_loses_everything)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	long long job;

	start(f);
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':4},'retry':{'system':0},"
			   "'spot':{'allowed':true}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_exit(f, "n1", l1, 1, "system", "NCCL error");
	/* the attempt failed at once; n2 is killed and holds its GPUs until it reports */
	FX_WAIT(f, T, "failed", "SELECT state FROM attempts WHERE job_id = $1", fx_n(job));
	REQUIRE(fx_recv(f, "n2", "kill", job, T) != NULL);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job)),
		     "0");
	fx_exit(f, "n2", l2, 143, "cancelled", "killed");
	FX_WAIT(f, T, "2", "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job));
	/* no checkpoint: all of it is lost, on both nodes */
	CHECK_INT_EQ(check_rows(f, job, 1, "start"), 2);
	CHECK_STR_EQ(
	    FX_Q(f,
		 "SELECT string_agg(outcome || ' ' || failure_class, ',') FROM usage_ledger"
		 " WHERE job_id = $1",
		 fx_n(job)),
	    "failed system,failed system");
	fx_sched_stop(f, 0);
}

TY_TEST(cancelled_attempt_loses_nothing_and_is_written_once)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2;
	long long job;
	int sent;

	start(f);
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1},'spot':{'allowed':true}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_send(f, "n1", "checkpoint_written", job, 1,
		"{'path':'/c/step-1','step':1,'valid':true}");
	fx_cancel(f, job);
	REQUIRE(fx_recv(f, "n1", "kill", job, T) != NULL);
	REQUIRE(fx_recv(f, "n2", "kill", job, T) != NULL);
	sent = fx_sent_count(f);
	fx_exit(f, "n1", l1, 143, "cancelled", "killed on request");
	fx_exit(f, "n2", l2, 143, "cancelled", "killed on request");
	FX_WAIT(f, T, "cancelled", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	CHECK_INT_EQ(check_rows(f, job, 1, "none"), 2);
	/* the exits again change nothing */
	fx_replay(f, sent, fx_sent_count(f));
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job)),
		     "2");
	fx_sched_stop(f, 0);
}

/* The launch of job on either node (its node in *node), waiting up to T. */
static const struct proto_msg *launch_of(struct fx *f, long long job, const char **node)
{
	for (int i = 0; i < T / 100; i++) {
		static const char *const nodes[] = {"n1", "n2"};

		for (int k = 0; k < 2; k++) {
			const struct proto_msg *m = fx_recv(f, nodes[k], "launch", job, 0);

			if (m) {
				*node = nodes[k];
				return m;
			}
		}
		fx_poll(f, 100);
	}
	return NULL;
}

TY_TEST(preempted_attempt_loses_the_work_since_the_checkpoint_it_wrote_in_its_grace)
{
	static const char *const no_min_runtime[] = {
	    "--min-runtime-seconds=high=0,normal=0,low=0,scavenger=0", NULL};
	struct fx *f = fx_start();
	const char *a = fx_team(f, "a", 2, -1, "c1"), *b = fx_team(f, "b", 2, -1, "c1");
	const struct proto_msg *l1, *l2, *c;
	const char *n1, *n2;
	long long a1, a2, victim;

	/* team a borrows b's idle nominal GPUs with two 2-GPU gangs; b then reclaims */
	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	fx_sched_start(f, "s1", no_min_runtime);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	a1 = fx_submit_to(f, a,
			  ",'resources':{'nodes':1,'gpus_per_node':2},"
			  "'checkpoint':{'grace_seconds':60}");
	REQUIRE((l1 = launch_of(f, a1, &n1)) != NULL);
	fx_run(f, n1, l1);
	a2 = fx_submit_to(f, a,
			  ",'resources':{'nodes':1,'gpus_per_node':2},"
			  "'checkpoint':{'grace_seconds':60}");
	REQUIRE((l2 = launch_of(f, a2, &n2)) != NULL);
	fx_run(f, n2, l2);
	FX_WAIT(f, T, "running running",
		"SELECT string_agg(state, ' ') FROM jobs WHERE id IN ($1, $2)", fx_n(a1), fx_n(a2));
	fx_submit_to(f, b, ",'resources':{'nodes':1,'gpus_per_node':2}");
	for (int i = 0; i < T / 100 && !(c = fx_recv(f, n1, "checkpoint", 0, 0)) &&
			!(c = fx_recv(f, n2, "checkpoint", 0, 0));
	     i++)
		fx_poll(f, 100);
	REQUIRE(c != NULL);
	victim = c->job;
	/*
	 * the gang writes a verified checkpoint within its grace, then exits
	 * non-zero to be resumed (exit 0 would say it finished)
	 */
	fx_send(f, victim == a1 ? n1 : n2, "checkpoint_written", victim, 1,
		"{'path':'/c/step-7','step':7,'valid':true}");
	fx_sync(f, T);
	fx_exit(f, victim == a1 ? n1 : n2, victim == a1 ? l1 : l2, -1, "preempted",
		"preempted: rank 1 ended after the checkpoint signal (SIGUSR1)");
	FX_WAIT(f, T, "pending 1", "SELECT state || ' ' || preemptions FROM jobs WHERE id = $1",
		fx_n(victim));
	CHECK_INT_EQ(check_rows(f, victim, 1, "checkpoint"), 1);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT outcome || ' ' || failure_class || ' ' || pool || ' ' || gpus"
			  " FROM usage_ledger WHERE job_id = $1",
			  fx_n(victim)),
		     "failed preempted on-demand 2");
	/* the other gang still runs: not in the ledger, and fair share counts it all the same */
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1",
			  fx_n(victim == a1 ? a2 : a1)),
		     "0");
	fx_sched_stop(f, 0);
}

TY_TEST(bad_rates_file_stops_the_scheduler_naming_it)
{
	static const struct {
		const char *content, *says;
	} cases[] = {
	    {NULL, "cannot open rates file"},
	    {"{\"spot\": {\"H100\": -2}}", "'spot'.'H100' must be a number >= 0"},
	    {"not json", "rates file"},
	};
	const char *bin = getenv("TY_SCHEDULER_BIN");

	REQUIRE(bin != NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *path = ty_test_strf("%s/bad-rates-%zu.json", ty_test_workdir(), i);
		const char *out = ty_test_strf("%s/bad-rates-%zu.out", ty_test_workdir(), i);
		char buf[1024] = "";
		FILE *fp;
		int st;

		ty_test_context("%s", cases[i].says);
		if (cases[i].content) {
			REQUIRE((fp = fopen(path, "w")) != NULL);
			fputs(cases[i].content, fp);
			fclose(fp);
		}
		st = system(ty_test_strf("'%s' --database-url=postgresql://nowhere"
					 " --kafka-bootstrap=127.0.0.1:1 --rates-file='%s'"
					 " --dispatch-key='%s' --node-secret-file='%s' 2>'%s'",
					 bin, path, ty_test_dispatch_key(), ty_test_node_secret(),
					 out));
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 2);
		REQUIRE((fp = fopen(out, "r")) != NULL);
		buf[fread(buf, 1, sizeof(buf) - 1, fp)] = '\0';
		fclose(fp);
		if (!strstr(buf, cases[i].says) || !strstr(buf, "rates-file"))
			FAIL("stderr '%s' does not say '%s'", buf, cases[i].says);
	}
}

/* A 2-node gang (1 GPU on n1 and n2): its launches in l[0] (n1), l[1] (n2), running. */
static long long gang(struct fx *f, const struct proto_msg **l)
{
	long long job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1},"
				     "'spot':{'allowed':true},'retry':{'user':0}");

	l[0] = fx_recv(f, "n1", "launch", job, T);
	l[1] = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l[0] != NULL && l[1] != NULL);
	fx_run(f, "n1", l[0]);
	fx_run(f, "n2", l[1]);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	return job;
}

/* "state attempt-state/failure-class events" of job: what its end looks like. */
static const char *ending(struct fx *f, long long job)
{
	return FX_Q(f,
		    "SELECT j.state || ' ' || t.state || '/' || coalesce(t.failure_class, '-')"
		    " || ' ' || coalesce(t.message, '-') || ' ' || (SELECT string_agg(e.type,"
		    " ',' ORDER BY e.seq) FROM job_events e WHERE e.job_id = j.id"
		    " AND e.type IN ('succeeded', 'failed', 'requeued', 'cancelled'))"
		    " FROM jobs j JOIN attempts t ON t.job_id = j.id AND t.attempt = 1"
		    " WHERE j.id = $1",
		    fx_n(job));
}

/*
 * Several gangs' exits in one event batch (produced while no scheduler
 * leads): the plain successes are applied together, a gang with a failed
 * node one message at a time, and every one ends as one by one would —
 * states, one event each, ledger rows whose numbers match the allocations.
 * A success redelivered, in the batch or later, changes nothing.
 */
TY_TEST(exits_of_several_gangs_in_one_batch_end_as_one_by_one)
{
	struct fx *f = fx_start();
	const struct proto_msg *a[2], *b[2], *c[2];
	long long ja, jb, jc;
	const char *events;

	start(f);
	ja = gang(f, a);
	jb = gang(f, b);
	jc = gang(f, c);
	fx_sched_stop(f, 0);
	fx_exit(f, "n1", a[0], 0, "", "");
	/* b: its failure first, then its other node's success (which must wait for it) */
	fx_exit(f, "n2", b[1], 1, "user", "loss is NaN");
	fx_exit(f, "n1", b[0], 0, "", "");
	fx_exit(f, "n2", a[1], 0, "", "");
	fx_exit(f, "n1", a[0], 0, "", ""); /* redelivered */
	/* c: one node of two done */
	fx_exit(f, "n1", c[0], 0, "", "");
	{
		const char *args[] = {rates_arg(), NULL};

		fx_sched_start(f, "s2", args);
	}
	fx_sync(f, T);

	CHECK_STR_EQ(ending(f, ja), "succeeded succeeded/- - succeeded");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT message FROM job_events WHERE job_id = $1 AND type = 'succeeded'",
			  fx_n(ja)),
		     "attempt 1 succeeded: every rank on 2 nodes exited 0");
	CHECK_INT_EQ(check_rows(f, ja, 1, "none"), 2);
	CHECK_STR_EQ(priced(f, ja, "n1"), "spot H100 2.5");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id = $1 AND exit_code = 0"
			  " AND failure_class IS NULL AND released_at IS NOT NULL",
			  fx_n(ja)),
		     "2");

	/* the user failure decides b; the success of its other node changes nothing of it */
	CHECK_STR_EQ(ending(f, jb), "failed failed/user loss is NaN failed");
	CHECK_INT_EQ(check_rows(f, jb, 1, "start"), 2);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(node_id || '=' || exit_code, ',' ORDER BY node_id)"
			  " FROM allocations WHERE job_id = $1 AND released_at IS NOT NULL",
			  fx_n(jb)),
		     "n1=0,n2=1");

	/* c's other node still holds its GPU: running, nothing in the ledger */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT j.state || ' ' || string_agg(a.node_id || '=' ||"
			  " coalesce(a.exit_code::text, 'live') || '/' || (a.released_at IS NOT NULL),"
			  " ',' ORDER BY a.node_id) FROM jobs j JOIN allocations a ON a.job_id = j.id"
			  " WHERE j.id = $1 GROUP BY j.state",
			  fx_n(jc)),
		     "running n1=0/true,n2=live/false");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(jc)),
		     "0");

	/* a's exit once more, on its own: nothing changes */
	events = FX_Q(f, "SELECT count(*) || '/' || max(seq) FROM job_events");
	fx_exit(f, "n2", a[1], 0, "", "");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) || '/' || max(seq) FROM job_events"), events);
	CHECK_STR_EQ(ending(f, ja), "succeeded succeeded/- - succeeded");
	CHECK_INT_EQ(check_rows(f, ja, 1, "none"), 2);

	/* c's last node, alone: the per-message path is the same function */
	fx_exit(f, "n2", c[1], 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(jc));
	CHECK_STR_EQ(ending(f, jc), "succeeded succeeded/- - succeeded");
	CHECK_INT_EQ(check_rows(f, jc, 1, "none"), 2);
	fx_sched_stop(f, 1);
}

static const char *notice_json_for_goodput(long long deadline_ms)
{
	return ty_test_strf("{'deadline':%lld,'provider':'aws','action':'terminate',"
			    "'detail':'instance-action terminate'}",
			    deadline_ms);
}

/* The launch of job on any of n1..n3 (its node in *node), waiting up to T. */
static const struct proto_msg *launch_any(struct fx *f, long long job, const char **node)
{
	static const char *const nodes[] = {"n1", "n2", "n3"};

	for (int i = 0; i < T / 100; i++) {
		for (int k = 0; k < 3; k++) {
			const struct proto_msg *m = fx_recv(f, nodes[k], "launch", job, 0);

			if (m) {
				*node = nodes[k];
				return m;
			}
		}
		fx_poll(f, 100);
	}
	return NULL;
}

/*
 * Goodput (docs/scheduling.md, "Goodput"): a job preempted after a
 * checkpoint, then failed by the infrastructure, then succeeded. Every
 * GPU-millisecond the ledger holds is in exactly one category, each one is
 * what the script implies, together they are what the allocations held,
 * the queue wait is beside them, and fair share is not charged for what the
 * infrastructure lost.
 */
TY_TEST(preemption_infrastructure_failure_and_success_add_up_exactly)
{
	struct fx *f = fx_start();
	const struct proto_msg *l;
	const char *node, *first;
	long long job, deadline;

	fx_node_pool(f, "n1", 2, "spot");
	fx_node_pool(f, "n2", 2, "spot");
	fx_node_pool(f, "n3", 2, "spot");
	fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2},"
			   "'spot':{'allowed':true,'fallback':'none','max_preemptions':5},"
			   "'retry':{'system':2},'checkpoint':{'grace_seconds':1}");

	/* attempt 1: a verified checkpoint, then its node's spot notice */
	REQUIRE((l = launch_any(f, job, &node)) != NULL);
	first = node;
	fx_run(f, node, l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/c/step-5','step':5,'valid':true,'write_ms':1500}");
	/* the same step again (another node, a redelivery) is counted once; nonsense not at all */
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/c/step-5','step':5,'valid':true,'write_ms':1500}");
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/c/step-6','step':6,'valid':false,'write_ms':900}");
	fx_send(f, node, "checkpoint_written", job, 1,
		"{'path':'/c/step-4','step':4,'valid':true,'write_ms':-3}");
	fx_sync(f, T);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT checkpoint_write_ms || ' ' || checkpoint_write_step FROM attempts"
			  " WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     "1500 5");
	fx_poll(f, 50); /* some work after the checkpoint, to be lost */
	deadline = ty_wall_ms() + 60000;
	fx_node_notice(f, node, notice_json_for_goodput(deadline));
	REQUIRE(fx_recv(f, node, "checkpoint", job, T) != NULL);
	REQUIRE(fx_recv(f, node, "kill", job, T) != NULL);
	fx_exit(f, node, l, -1, "preempted", "killed: preempted");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job));

	/* attempt 2, elsewhere: the infrastructure fails it, no checkpoint */
	REQUIRE((l = launch_any(f, job, &node)) != NULL);
	CHECK_INT_EQ(l->attempt, 2);
	CHECK(strcmp(node, first) != 0);
	fx_run(f, node, l);
	FX_WAIT(f, T, "running", "SELECT state FROM attempts WHERE job_id = $1 AND attempt = 2",
		fx_n(job));
	fx_exit(f, node, l, 1, "system", "NCCL error");
	FX_WAIT(f, T, "2", "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job));

	/* attempt 3 succeeds */
	REQUIRE((l = launch_any(f, job, &node)) != NULL);
	CHECK_INT_EQ(l->attempt, 3);
	fx_run(f, node, l);
	FX_WAIT(f, T, "running", "SELECT state FROM attempts WHERE job_id = $1 AND attempt = 3",
		fx_n(job));
	fx_exit(f, node, l, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	FX_WAIT(f, T, "3", "SELECT count(*) FROM usage_ledger WHERE job_id = $1", fx_n(job));

	/* each row: its categories add up to its GPUs x its span, to the millisecond */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(attempt::text, ',') FROM usage_ledger WHERE job_id = $1"
			  " AND (useful_gpu_ms + checkpoint_gpu_ms + idle_gpu_ms"
			  " + lost_preemption_gpu_ms + lost_user_gpu_ms + lost_infra_gpu_ms"
			  " + hang_gpu_ms + straggler_gpu_ms <> gpu_ms"
			  " OR gpu_ms <> gpus * round(extract(epoch FROM"
			  " ended_at - started_at) * 1000))",
			  fx_n(job)),
		     NULL);
	/* and each is what the script implies */
	CHECK_STR_EQ(
	    FX_Q(f,
		 "SELECT string_agg(attempt || ':' || concat_ws(' ',"
		 /* the checkpoint writing comes out of the kept part, at most all of it */
		 " checkpoint_gpu_ms = least(gpus * 1500, gpus * round(extract(epoch FROM"
		 "  checkpoint_at - started_at) * 1000)),"
		 " useful_gpu_ms = gpus * round(extract(epoch FROM checkpoint_at - started_at)"
		 "  * 1000) - checkpoint_gpu_ms,"
		 " lost_preemption_gpu_ms = gpus * round(extract(epoch FROM ended_at"
		 "  - checkpoint_at) * 1000) AND lost_preemption_gpu_ms > 0,"
		 " lost_infra_gpu_ms + lost_user_gpu_ms + hang_gpu_ms + idle_gpu_ms"
		 "  + straggler_gpu_ms = 0),"
		 " ',') FROM usage_ledger WHERE job_id = $1 AND attempt = 1",
		 fx_n(job)),
	    "1:t t t t");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (lost_infra_gpu_ms = gpu_ms AND gpu_ms > 0)::text || ' ' ||"
			  " failure_class FROM usage_ledger WHERE job_id = $1 AND attempt = 2",
			  fx_n(job)),
		     "true system");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (useful_gpu_ms = gpu_ms AND gpu_ms > 0)::text FROM usage_ledger"
			  " WHERE job_id = $1 AND attempt = 3",
			  fx_n(job)),
		     "true");
	/* together: exactly what the allocations held */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT (SELECT sum(gpu_ms) FROM usage_ledger WHERE job_id = $1)"
			  " = (SELECT sum(cardinality(a.gpus) * (round(extract(epoch FROM"
			  " a.released_at) * 1000) - round(extract(epoch FROM t.created_at)"
			  " * 1000))) FROM allocations a JOIN attempts t"
			  " USING (job_id, attempt) WHERE a.job_id = $1)",
			  fx_n(job)),
		     "t");
	/* the queue wait beside them: from submission, then from the previous attempt's end */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg((abs(l.queue_wait_gpu_ms - l.gpus * 1000 *"
			  " extract(epoch FROM l.started_at - coalesce(p.ended_at, j.created_at)))"
			  " <= 2 * l.gpus)::text, ',' ORDER BY l.attempt)"
			  " FROM usage_ledger l JOIN jobs j ON j.id = l.job_id"
			  " LEFT JOIN attempts p ON p.job_id = l.job_id AND p.attempt = l.attempt - 1"
			  " WHERE l.job_id = $1",
			  fx_n(job)),
		     "true,true,true");
	/* fair share: everything the job held but what the infrastructure lost */
	FX_WAIT(f, T, "t",
		"SELECT u.updated_at > (SELECT max(ended_at) FROM usage_ledger WHERE job_id = $1)"
		" FROM team_usage u WHERE u.team_id = (SELECT team_id FROM jobs WHERE id = $1)",
		fx_n(job));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT abs(u.decayed_gpu_seconds - s.g) <= 0.001 * s.g + 0.01"
			  " FROM team_usage u, (SELECT sum(gpu_ms - lost_infra_gpu_ms) / 1000.0"
			  "  AS g FROM usage_ledger WHERE job_id = $1) s"
			  " WHERE u.team_id = (SELECT team_id FROM jobs WHERE id = $1)",
			  fx_n(job)),
		     "t");
	fx_sched_stop(f, 0);
}
