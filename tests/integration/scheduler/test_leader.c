/*
 * Leadership: one leader, standbys that take over, epochs that fence a
 * deposed leader's writes.
 */
#include "fixture.h"
#include "scheduler.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <pthread.h>
#include <string.h>

#define T 15000

TY_TEST(standby_takes_over_when_the_leader_is_killed)
{
	struct fx *f = fx_start();
	const struct proto_msg *l1, *l2, *m;
	long long job, job2;
	int a, b;

	fx_node(f, "n1", 2);
	fx_node(f, "n2", 2);
	a = fx_sched_start(f, "sched-a", NULL);
	FX_WAIT(f, T, "1 sched-a", "SELECT epoch || ' ' || holder FROM leader");
	b = fx_sched_start(f, "sched-b", NULL);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");
	l1 = fx_recv(f, "n1", "launch", job, T);
	l2 = fx_recv(f, "n2", "launch", job, T);
	REQUIRE(l1 != NULL && l2 != NULL);
	CHECK_INT_EQ(l1->epoch, 1);
	fx_run(f, "n1", l1);
	fx_run(f, "n2", l2);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	/* the standby stood by */
	CHECK_STR_EQ(FX_Q(f, "SELECT epoch || ' ' || holder FROM leader"), "1 sched-a");
	CHECK(strstr(fx_sched_log(f, b), "leading") == NULL);

	fx_sched_kill(f, a);
	FX_WAIT(f, T, "2 sched-b", "SELECT epoch || ' ' || holder FROM leader");

	/* the new leader consumes: the job finishes */
	fx_exit(f, "n1", l1, 0, "", "");
	fx_exit(f, "n2", l2, 0, "", "");
	FX_WAIT(f, T, "succeeded", "SELECT state FROM jobs WHERE id = $1", fx_n(job));
	/* and dispatches with its own epoch */
	job2 = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
	m = fx_recv(f, "n1", "launch", job2, T);
	REQUIRE(m != NULL);
	CHECK_INT_EQ(m->epoch, 2);
	fx_sched_stop(f, b);
}

TY_TEST(sigterm_hands_over_at_once)
{
	struct fx *f = fx_start();
	long long job;
	int a, b;

	fx_node(f, "n1", 1);
	a = fx_sched_start(f, "sched-a", NULL);
	FX_WAIT(f, T, "1 sched-a", "SELECT epoch || ' ' || holder FROM leader");
	b = fx_sched_start(f, "sched-b", NULL);
	fx_sched_stop(f, a); /* exits 0, lock released */
	CHECK(strstr(fx_sched_log(f, a), "resigned the lead") != NULL);
	FX_WAIT(f, 5000, "2 sched-b", "SELECT epoch || ' ' || holder FROM leader");
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
	REQUIRE(fx_recv(f, "n1", "launch", job, T) != NULL);
	fx_sched_stop(f, b);
}

TY_TEST(deposed_leader_cannot_write_and_stands_down)
{
	struct fx *f = fx_start();
	const struct proto_msg *m;
	long long job;

	fx_node(f, "n1", 1);
	fx_sched_start(f, "sched-a", NULL);
	FX_WAIT(f, T, "1 sched-a", "SELECT epoch || ' ' || holder FROM leader");
	/* someone else's term begins behind its back */
	FX_Q(f, "UPDATE leader SET epoch = epoch + 1, holder = 'usurper' RETURNING epoch");
	/* its next write is fenced; it stands down, then wins the lock again (epoch 3) */
	FX_WAIT(f, T, "3 sched-a", "SELECT epoch || ' ' || holder FROM leader");
	CHECK(strstr(fx_sched_log(f, 0), "no longer leading (epoch 1)") != NULL);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
	m = fx_recv(f, "n1", "launch", job, T);
	REQUIRE(m != NULL);
	CHECK_INT_EQ(m->epoch, 3);
	CHECK_STR_EQ(FX_Q(f, "SELECT epoch FROM attempts WHERE job_id = $1", fx_n(job)), "3");
	fx_sched_stop(f, 0);
}

struct bump {
	struct ty_pg *pg;
	int64_t epoch;
	int rc;
};

static void *bump_thread(void *arg)
{
	struct bump *b = arg;
	struct ty_err err = {0};

	b->rc = sched_epoch_bump(&b->epoch, b->pg, "thread", &err);
	return NULL;
}

TY_TEST(fencing_rejects_an_old_epoch_and_orders_terms)
{
	struct fx *f = fx_start();
	struct ty_pg *old = NULL, *new = NULL;
	struct ty_err err = {0};
	struct bump b = {0};
	pthread_t th;
	int64_t e1, e2;
	const char *pid;

	REQUIRE_INT_EQ(ty_pg_connect(&old, fx_db_url(f), &err), 0);
	REQUIRE_INT_EQ(ty_pg_connect(&new, fx_db_url(f), &err), 0);

	REQUIRE_INT_EQ(sched_epoch_bump(&e1, old, "old", &err), 0);
	REQUIRE_INT_EQ(sched_tx_fence(old, e1, &err), 0);
	CHECK_INT_EQ(ty_pg_exec(NULL, old, "UPDATE nodes SET gpus = gpus", 0, NULL, &err), 0);
	CHECK_INT_EQ(ty_pg_commit(old, &err), 0);

	/* a new term: the old leader's next transaction is refused, and rolled back */
	REQUIRE_INT_EQ(sched_epoch_bump(&e2, new, "new", &err), 0);
	CHECK_INT_EQ(e2, e1 + 1);
	CHECK_INT_EQ(sched_tx_fence(old, e1, &err), TY_EFENCED);
	CHECK(strstr(err.msg, "epoch") != NULL);
	CHECK(!ty_pg_in_tx(old));
	ty_err_clear(&err);
	CHECK_INT_EQ(sched_tx_fence(new, e2, &err), 0);

	/* while the leader's transaction runs, a new term waits for it to end */
	pid = fx_n(PQbackendPID(ty_pg_conn(old)));
	b.pg = old;
	REQUIRE_INT_EQ(pthread_create(&th, NULL, bump_thread, &b), 0);
	FX_WAIT(f, T, "Lock", "SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", pid);
	CHECK_INT_EQ(b.epoch, 0);
	CHECK_INT_EQ(ty_pg_commit(new, &err), 0);
	pthread_join(th, NULL);
	CHECK_INT_EQ(b.rc, 0);
	CHECK_INT_EQ(b.epoch, e2 + 1);
	CHECK_INT_EQ(sched_tx_fence(new, e2, &err), TY_EFENCED);
	ty_pg_close(old);
	ty_pg_close(new);
}
