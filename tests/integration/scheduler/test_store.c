/*
 * scheduler/store/: job events and outbox rows buffered during a fenced
 * transaction and written set-based at its commit, driven directly on the
 * case's database (no scheduler process).
 */
#include "fixture.h"
#include "scheduler.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RES ",'resources':{'nodes':1,'gpus_per_node':1}"

/* A scheduler that leads the case's database (epoch bumped), with nothing else. */
static struct sched *lead(struct fx *f)
{
	struct sched *s = calloc(1, sizeof(*s));
	struct ty_err err = {0};

	REQUIRE(s != NULL);
	REQUIRE_INT_EQ(ty_pg_connect(&s->term.pg, fx_db_url(f), &err), 0);
	REQUIRE_INT_EQ(sched_epoch_bump(&s->term.epoch, s->term.pg, "test", &err), 0);
	/* no mirrors to keep: touches are not recorded */
	s->world.queue_stale = s->world.mirror.stale = true;
	return s;
}

static void done(struct sched *s)
{
	sched_store_free(&s->term.store);
	sched_queue_clear(&s->world);
	ty_pg_close(s->term.pg);
	free(s);
}

static void commit(struct sched *s)
{
	struct ty_err err = {0};

	if (sched_tx_commit(&s->term, &err))
		FAIL("cannot commit: %s", err.msg), ty_test_abort();
}

/* A kill to node for the job's attempt, through sched_outbox_add. */
static int add_kill(struct sched *s, const char *node, long long job, long long attempt)
{
	json_t *d = json_pack("{s:s, s:i}", "reason", "test", "grace_seconds", 5);
	struct ty_err err = {0};
	int rc;

	REQUIRE(d != NULL);
	rc = sched_outbox_add(s, PROTO_KILL, node, job, attempt, d, &err);
	json_decref(d);
	return rc;
}

static const char *last_seq(struct fx *f, long long job)
{
	return FX_Q(f, "SELECT last_event_seq FROM jobs WHERE id = $1", fx_n(job));
}

TY_TEST(several_events_of_one_job_take_gapless_seqs_in_order)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES), b = fx_submit(f, RES);
	int base_a = atoi(last_seq(f, a)), base_b = atoi(last_seq(f, b));
	json_t *d = json_pack("{s:s, s:i}", "quote", "a \"b\" \\c", "n", 7);

	REQUIRE(d != NULL);
	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "t1", "pending", "first of a", NULL, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, b, "t1", "pending", "first of b", d, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "t2", "pending", "second of a, \"quoted\" {x}", d, &err),
		     0);
	/* a job that does not exist: dropped, as ty_job_event() drops it */
	CHECK_INT_EQ(sched_job_event(s, 987654321, "t1", "pending", "nobody", NULL, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "t3", "pending", "third of a", NULL, &err), 0);
	/* nothing written before the commit */
	CHECK_STR_EQ(last_seq(f, a), fx_n(base_a));
	CHECK_INT_EQ(s->term.store.ev.n, 5);
	commit(s);
	CHECK_INT_EQ(s->term.store.ev.n, 0);

	CHECK_STR_EQ(last_seq(f, a), fx_n(base_a + 3));
	CHECK_STR_EQ(last_seq(f, b), fx_n(base_b + 1));
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(seq - $2 || ':' || type || ':' || message, '|'"
			  " ORDER BY seq) FROM job_events WHERE job_id = $1 AND seq > $2",
			  fx_n(a), fx_n(base_a)),
		     "1:t1:first of a|2:t2:second of a, \"quoted\" {x}|3:t3:third of a");
	CHECK_STR_EQ(FX_Q(f, "SELECT data::text FROM job_events WHERE job_id = $1 AND seq = $2",
			  fx_n(a), fx_n(base_a + 1)),
		     "{}");
	CHECK_STR_EQ(FX_Q(f, "SELECT data->>'quote' FROM job_events WHERE job_id = $1 AND seq = $2",
			  fx_n(a), fx_n(base_a + 2)),
		     "a \"b\" \\c");
	CHECK_STR_EQ(FX_Q(f, "SELECT message FROM job_events WHERE job_id = $1 AND seq = $2",
			  fx_n(b), fx_n(base_b + 1)),
		     "first of b");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM job_events WHERE job_id = 987654321"), "0");
	/* the same rows ty_job_event() writes for the same event */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT ty_job_event($1, 't4', 'pending', 'one more', NULL)::text",
			  fx_n(a)),
		     fx_n(base_a + 4));
	json_decref(d);
	done(s);
}

TY_TEST(a_rolled_back_savepoint_drops_exactly_the_rows_buffered_after_it)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES);
	int base = atoi(last_seq(f, a));
	const char *before = FX_Q(f, "SELECT count(*) FROM dispatch_outbox");
	struct sched_store_mark m;
	json_t *d = json_pack("{s:s, s:i}", "reason", "test", "grace_seconds", 5);

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "kept", "pending", "kept", NULL, &err), 0);
	CHECK_INT_EQ(sched_outbox_add(s, PROTO_KILL, "n-kept", a, 1, d, &err), 0);
	m = sched_store_mark(&s->term.store);
	REQUIRE_INT_EQ(ty_pg_exec(NULL, s->term.pg, "SAVEPOINT x", 0, NULL, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "dropped", "pending", "dropped", d, &err), 0);
	CHECK_INT_EQ(sched_outbox_add(s, PROTO_KILL, "n-dropped", a, 1, d, &err), 0);
	CHECK_INT_EQ(sched_outbox_add(s, PROTO_KILL, "n-dropped", a, 2, d, &err), 0);
	REQUIRE_INT_EQ(ty_pg_exec(NULL, s->term.pg, "ROLLBACK TO SAVEPOINT x", 0, NULL, &err), 0);
	sched_store_rewind(&s->term.store, m);
	CHECK_INT_EQ(s->term.store.ev.n, 1);
	CHECK_INT_EQ(s->term.store.ob.n, 1);
	/* appending after a rewind continues the arrays cleanly */
	CHECK_INT_EQ(sched_job_event(s, a, "after", "pending", "after", NULL, &err), 0);
	commit(s);

	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type, ',' ORDER BY seq) FROM job_events"
			  " WHERE job_id = $1 AND seq > $2",
			  fx_n(a), fx_n(base)),
		     "kept,after");
	CHECK_STR_EQ(last_seq(f, a), fx_n(base + 2));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) - $1 FROM dispatch_outbox", before), "1");
	CHECK_STR_EQ(FX_Q(f, "SELECT string_agg(node_id, ',') FROM dispatch_outbox"), "n-kept");
	json_decref(d);
	done(s);
}

TY_TEST(the_savepoint_calls_undo_the_statements_and_the_rows_buffered_together)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES);
	int base = atoi(last_seq(f, a));
	struct sched_store_mark m1, m2;
	char ab[24];
	const char *p[] = {sched_i64(ab, a)};

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	/* released: what was done under it stays */
	REQUIRE_INT_EQ(
	    sched_store_savepoint(&m1, s->term.pg, &s->term.store, SCHED_SAVEPOINT_MSG, &err), 0);
	CHECK_INT_EQ(m1.nev, 0);
	REQUIRE_INT_EQ(
	    ty_pg_exec(NULL, s->term.pg, "UPDATE jobs SET priority = 7 WHERE id = $1", 1, p, &err),
	    0);
	CHECK_INT_EQ(sched_job_event(s, a, "kept", "pending", "kept", NULL, &err), 0);
	REQUIRE_INT_EQ(sched_store_savepoint_release(s->term.pg, SCHED_SAVEPOINT_MSG, &err), 0);
	/* rolled back: the statement and the event both go */
	REQUIRE_INT_EQ(
	    sched_store_savepoint(&m2, s->term.pg, &s->term.store, SCHED_SAVEPOINT_MSG, &err), 0);
	CHECK_INT_EQ(m2.nev, 1);
	REQUIRE_INT_EQ(
	    ty_pg_exec(NULL, s->term.pg, "UPDATE jobs SET priority = 9 WHERE id = $1", 1, p, &err),
	    0);
	CHECK_INT_EQ(sched_job_event(s, a, "dropped", "pending", "dropped", NULL, &err), 0);
	CHECK_INT_EQ(add_kill(s, "n-dropped", a, 1), 0);
	REQUIRE_INT_EQ(sched_store_savepoint_rollback(s->term.pg, &s->term.store,
						      SCHED_SAVEPOINT_MSG, m2, &err),
		       0);
	CHECK_INT_EQ(s->term.store.ev.n, 1);
	CHECK_INT_EQ(s->term.store.ob.n, 0);
	commit(s);

	CHECK_STR_EQ(FX_Q(f, "SELECT priority FROM jobs WHERE id = $1", fx_n(a)), "7");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type, ',' ORDER BY seq) FROM job_events"
			  " WHERE job_id = $1 AND seq > $2",
			  fx_n(a), fx_n(base)),
		     "kept");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM dispatch_outbox WHERE node_id = 'n-dropped'"),
		     "0");
	done(s);
}

TY_TEST(a_rollback_to_a_savepoint_never_set_fails_and_still_drops_the_rows)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES);
	struct sched_store_mark m;

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	m = sched_store_mark(&s->term.store);
	CHECK_INT_EQ(sched_job_event(s, a, "dropped", "pending", "dropped", NULL, &err), 0);
	/* no SAVEPOINT msg in this transaction */
	CHECK(sched_store_savepoint_rollback(s->term.pg, &s->term.store, SCHED_SAVEPOINT_MSG, m,
					     &err) != 0);
	CHECK(strstr(err.msg, "msg") != NULL);
	CHECK_INT_EQ(s->term.store.ev.n, 0);
	ty_pg_rollback(s->term.pg);
	done(s);
}

TY_TEST(a_rolled_back_transaction_leaves_nothing_for_the_next)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES);
	int base = atoi(last_seq(f, a));

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "lost", "pending", "lost", NULL, &err), 0);
	CHECK_INT_EQ(add_kill(s, "n1", a, 1), 0);
	ty_pg_rollback(s->term.pg);
	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_job_event(s, a, "kept", "pending", "kept", NULL, &err), 0);
	commit(s);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(type, ',' ORDER BY seq) FROM job_events"
			  " WHERE job_id = $1 AND seq > $2",
			  fx_n(a), fx_n(base)),
		     "kept");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM dispatch_outbox"), "0");
	done(s);
}

TY_TEST(outbox_rows_take_increasing_ids_that_are_their_messages_seq)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	json_t *d = json_pack("{s:s, s:i}", "reason", "test", "grace_seconds", 5);
	const char *nodes[] = {"n1", "n2", "n3", "n1"};

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	for (int i = 0; i < 4; i++)
		CHECK_INT_EQ(sched_outbox_add(s, PROTO_KILL, nodes[i], 40 + i, 1, d, &err), 0);
	CHECK(s->bus.outbox_dirty);
	/* a message proto refuses is refused when added, not at the commit */
	CHECK_INT_EQ(sched_outbox_add(s, PROTO_KILL, "n1", 50, 1, NULL, &err), TY_EINVAL);
	CHECK(strstr(err.msg, "reason") != NULL);
	CHECK_INT_EQ(s->term.store.ob.n, 4);
	commit(s);
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM dispatch_outbox"), "4");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(DISTINCT id) FROM dispatch_outbox"), "4");
	CHECK_STR_EQ(
	    FX_Q(f, "SELECT count(*) FROM dispatch_outbox WHERE epoch = $1", fx_n(s->term.epoch)),
	    "4");
	/* ids increase in the order written; each message carries its row's id */
	for (int i = 0; i < 4; i++) {
		const char *row = FX_Q(f,
				       "SELECT id || ' ' || node_id || ' ' || payload FROM"
				       " (SELECT *, row_number() OVER (ORDER BY id) AS r"
				       "  FROM dispatch_outbox) o WHERE r = $1",
				       fx_n(i + 1));
		const char *payload = row ? strchr(strchr(row, ' ') + 1, ' ') + 1 : NULL;
		struct proto_msg m = {0};

		REQUIRE(payload != NULL);
		REQUIRE_INT_EQ(proto_decode(&m, payload, strlen(payload), &err), 0);
		CHECK_INT_EQ(m.seq, atoll(row));
		CHECK_INT_EQ(m.job, 40 + i);
		CHECK_INT_EQ(m.epoch, s->term.epoch);
		CHECK_STR_EQ(m.node, nodes[i]);
		CHECK(m.type == PROTO_KILL);
		CHECK_STR_EQ(json_string_value(json_object_get(m.data, "reason")), "test");
		proto_msg_clear(&m);
	}
	json_decref(d);
	done(s);
}

TY_TEST(a_failed_flush_rolls_the_transaction_back)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES);
	int base = atoi(last_seq(f, a));

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	REQUIRE_INT_EQ(ty_pg_exec(NULL, s->term.pg, "UPDATE nodes SET gpus = gpus", 0, NULL, &err),
		       0);
	/* message is NOT NULL in job_events: the events' statement fails */
	CHECK_INT_EQ(sched_job_event(s, a, "bad", "pending", NULL, NULL, &err), 0);
	CHECK_INT_EQ(add_kill(s, "n1", a, 1), 0);
	CHECK(sched_tx_commit(&s->term, &err) != 0);
	CHECK(!ty_pg_in_tx(s->term.pg));
	CHECK_INT_EQ(s->term.store.ev.n, 0);
	CHECK_INT_EQ(s->term.store.ob.n, 0);
	CHECK_STR_EQ(last_seq(f, a), fx_n(base));
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM dispatch_outbox"), "0");
	done(s);
}

/* ---- a cycle's placements, set-based, through a scheduler process ---- */

#define T 15000

/*
 * Three 4-GPU nodes ready, the scheduler stopped again, and jobs submitted
 * while it is: its next term's first cycle places them all at once.
 */
static void three_nodes_no_leader(struct fx *f)
{
	int a;

	fx_node(f, "n1", 4);
	fx_node(f, "n2", 4);
	fx_node(f, "n3", 4);
	a = fx_sched_start(f, "s1", NULL);
	FX_WAIT(f, T, "3", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	fx_sched_stop(f, a);
}

static const char *dstr(const struct proto_msg *m, const char *key)
{
	return json_string_value(json_object_get(m->data, key));
}

TY_TEST(a_cycle_placing_several_gangs_writes_each_one_s_rows)
{
	struct fx *f = fx_start();
	long long job[3];
	const int nn[3] = {2, 1, 1};
	int s;

	three_nodes_no_leader(f);
	job[0] = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2}");
	job[1] = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':4}");
	job[2] = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	s = fx_sched_start(f, "s2", NULL);
	for (int i = 0; i < 3; i++)
		FX_WAIT(f, T, "scheduled 1", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
			fx_n(job[i]));
	/* in one transaction: one cycle wrote them */
	CHECK_STR_EQ(FX_Q(f, "SELECT count(DISTINCT created_at) || ' ' || count(*) FROM attempts"),
		     "1 3");
	for (int i = 0; i < 3; i++) {
		long long prev = 0;

		ty_test_context("job %lld", job[i]);
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT nnodes || ' ' || world_size || ' ' || (launch->>'nnodes') || ' '"
				  " || (master_port = (launch->>'master_port')::integer"
				  " AND master_addr = launch->>'master_addr') || ' ' || epoch"
				  " FROM attempts WHERE job_id = $1",
				  fx_n(job[i])),
			     ty_test_strf("%d %d %d true 2", nn[i], i == 1 ? 4 : 2 * nn[i], nn[i]));
		/* the metrics token of the launch is the one whose hash the attempt keeps */
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT encode(sha256(convert_to(launch->>'metrics_token', 'UTF8')),"
				  " 'hex') = metrics_token_sha256 FROM attempts WHERE job_id = $1",
				  fx_n(job[i])),
			     "t");
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT string_agg(node_rank || ':' || first_rank || ':' ||"
				  " local_ranks || ':' || cardinality(gpus), ',' ORDER BY node_rank)"
				  " FROM allocations WHERE job_id = $1 AND attempt = 1",
				  fx_n(job[i])),
			     nn[i] == 2 ? "0:0:2:2,1:2:2:2" : (i == 1 ? "0:0:4:4" : "0:0:2:2"));
		/* one scheduled event, as before */
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT count(*) || ' ' || min(data->>'attempt') || ' '"
				  " || (min(message) LIKE 'attempt 1 scheduled on n%')"
				  " FROM job_events WHERE job_id = $1 AND type = 'scheduled'",
				  fx_n(job[i])),
			     "1 1 true");
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT (SELECT max(seq) FROM job_events WHERE job_id = $1)"
				  " = last_event_seq FROM jobs WHERE id = $1",
				  fx_n(job[i])),
			     "t");
		/* a launch to each node, with its boot, ids increasing with the node rank */
		for (int r = 0; r < nn[i]; r++) {
			const char *node = FX_Q(f,
						"SELECT node_id FROM allocations WHERE job_id = $1"
						" AND node_rank = $2",
						fx_n(job[i]), fx_n(r));
			const struct proto_msg *l;

			REQUIRE(node != NULL);
			l = fx_recv(f, node, "launch", job[i], T);
			REQUIRE(l != NULL);
			CHECK_INT_EQ(l->attempt, 1);
			CHECK_INT_EQ(json_integer_value(json_object_get(l->data, "node_rank")), r);
			CHECK_STR_EQ(dstr(l, "boot_id"), fx_node_boot(f, node));
			CHECK(l->seq > prev);
			prev = l->seq;
		}
	}
	CHECK(strstr(fx_sched_log(f, s), "one by one") == NULL);
	fx_sched_stop(f, s);
}

TY_TEST(a_placement_the_set_cannot_take_fails_alone)
{
	struct fx *f = fx_start();
	long long good1, bad, good2;
	const char *log;
	int s;

	three_nodes_no_leader(f);
	good1 = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	bad = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':2}");
	good2 = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");
	/* one job's allocations are refused: the set-based insert fails whole */
	FX_Q(f, "CREATE TABLE refused (job bigint)");
	FX_Q(f, "INSERT INTO refused VALUES ($1)", fx_n(bad));
	FX_Q(f, "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$"
		" BEGIN IF NEW.job_id IN (SELECT job FROM refused) THEN"
		" RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$");
	FX_Q(f, "CREATE TRIGGER refuse BEFORE INSERT ON allocations"
		" FOR EACH ROW EXECUTE FUNCTION refuse()");
	s = fx_sched_start(f, "s2", NULL);
	FX_WAIT(f, T, "scheduled", "SELECT state FROM jobs WHERE id = $1", fx_n(good1));
	FX_WAIT(f, T, "scheduled", "SELECT state FROM jobs WHERE id = $1", fx_n(good2));
	REQUIRE(fx_recv(f, FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1", fx_n(good1)),
			"launch", good1, T) != NULL);
	log = fx_sched_log(f, s);
	CHECK(strstr(log, "writing them one by one") != NULL);
	CHECK(strstr(log, ty_test_strf("cannot place job %lld: ", bad)) != NULL);
	/* the refused one left nothing behind: no attempt, event, or launch */
	CHECK_STR_EQ(FX_Q(f, "SELECT state || ' ' || attempt FROM jobs WHERE id = $1", fx_n(bad)),
		     "pending 0");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM attempts WHERE job_id = $1", fx_n(bad)), "0");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM job_events WHERE job_id = $1 AND type = 'scheduled'",
			  fx_n(bad)),
		     "0");
	CHECK_INT_EQ(fx_count(f, "n1", "launch", bad, 0) + fx_count(f, "n2", "launch", bad, 0) +
			 fx_count(f, "n3", "launch", bad, 0),
		     0);
	/* the others were written whole, one scheduled event each */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM job_events WHERE job_id IN ($1, $2)"
			  " AND type = 'scheduled'",
			  fx_n(good1), fx_n(good2)),
		     "2");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM allocations WHERE job_id = $1", fx_n(good2)),
		     "2");
	/* once the trouble is gone, the job is placed like any other */
	FX_Q(f, "DROP TRIGGER refuse ON allocations");
	FX_WAIT(f, T, "scheduled 1", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
		fx_n(bad));
	fx_sched_stop(f, s);
}

/* A job's queue fields: reason, position, reserved_until in ms ("-": NULL). */
static const char SQL_QUEUE_FIELDS[] =
    "SELECT coalesce(pending_reason, '-') || ' ' || coalesce(queue_position::text, '-') || ' '"
    " || coalesce((extract(epoch FROM reserved_until) * 1000)::bigint::text, '-')"
    " FROM jobs WHERE id = $1";

TY_TEST(queue_fields_are_written_for_pending_jobs_and_cleared_for_those_that_left)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES), b = fx_submit(f, RES), c = fx_submit(f, RES);

	/* c ended meanwhile, its queue fields still set; b is written as if still queued */
	FX_Q(f,
	     "UPDATE jobs SET state = 'cancelled', finished_at = now(), pending_reason = 'old',"
	     " queue_position = 3 WHERE id = $1",
	     fx_n(c));
	{
		const struct sched_store_queue_row rows[] = {
		    {.job = a, .reason = "first \"in\" line", .position = 1,
		     .reserved_ms = 1700000000000},
		    {.job = b, .reason = "held", .position = 0, .reserved_ms = -1},
		    /* not pending: untouched by the publication */
		    {.job = c, .reason = "new", .position = 2, .reserved_ms = -1},
		};
		const int64_t left[] = {a, c, 987654321};

		REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
		CHECK_INT_EQ(sched_store_queue_publish(s->term.pg, rows, 3, &err), 0);
		/* a is pending: the clearing leaves it */
		CHECK_INT_EQ(sched_store_queue_left(s->term.pg, left, 3, &err), 0);
		CHECK_INT_EQ(sched_store_queue_publish(s->term.pg, NULL, 0, &err), 0);
		CHECK_INT_EQ(sched_store_queue_left(s->term.pg, NULL, 0, &err), 0);
		commit(s);
	}
	CHECK_STR_EQ(FX_Q(f, SQL_QUEUE_FIELDS, fx_n(a)), "first \"in\" line 1 1700000000000");
	CHECK_STR_EQ(FX_Q(f, SQL_QUEUE_FIELDS, fx_n(b)), "held - -");
	CHECK_STR_EQ(FX_Q(f, SQL_QUEUE_FIELDS, fx_n(c)), "- - -");
	done(s);
}

/* A team's team_usage row, updated_at in ms. */
static const char SQL_TEAM_USAGE_ROW[] =
    "SELECT decayed_gpu_seconds || ' ' || fair_share || ' ' || gpus_in_use || ' '"
    " || gpus_borrowed || ' ' || gpus_lent || ' ' || pending_jobs || ' '"
    " || (extract(epoch FROM updated_at) * 1000)::bigint FROM team_usage WHERE team_id = $1";

TY_TEST(team_usage_rows_are_upserted_for_teams_that_exist)
{
	struct fx *f = fx_start();
	struct sched *s = lead(f);
	struct ty_err err = {0};
	long long a = fx_submit(f, RES);
	int64_t team = atoll(FX_Q(f, "SELECT team_id FROM jobs WHERE id = $1", fx_n(a)));
	struct sched_store_team_usage v[] = {
	    {.team = team, .decayed = 12.5, .fair_share = 0.25, .used = 4, .borrowed = 1,
	     .lent = 2, .pending = 3},
	    /* a team deleted meanwhile: skipped, not an error */
	    {.team = 987654321, .decayed = 1, .fair_share = 1},
	};

	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_store_team_usage_write(s->term.pg, v, 2, 1700000000000, &err), 0);
	commit(s);
	CHECK_STR_EQ(FX_Q(f, SQL_TEAM_USAGE_ROW, fx_n(team)), "12.5 0.25 4 1 2 3 1700000000000");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM team_usage WHERE team_id = 987654321"), "0");
	/* written again: the row is replaced */
	v[0].used = 0;
	v[0].pending = 0;
	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_store_team_usage_write(s->term.pg, v, 1, 1700000060000, &err), 0);
	commit(s);
	CHECK_STR_EQ(FX_Q(f, SQL_TEAM_USAGE_ROW, fx_n(team)), "12.5 0.25 0 1 2 0 1700000060000");
	done(s);
}

/* A message of the executor on node, as the consumer decodes it (data: JSON text, owned by m). */
static struct proto_msg msg(enum proto_type type, const char *node, long long job, const char *data)
{
	struct proto_msg m = {.type = type, .job = job, .attempt = 1};

	snprintf(m.node, sizeof(m.node), "%s", node);
	m.data = json_loads(data, 0, NULL);
	REQUIRE(m.data != NULL);
	return m;
}

static const char *node_of(struct fx *f, long long job, int rank)
{
	return FX_Q(f, "SELECT node_id FROM allocations WHERE job_id = $1 AND node_rank = $2",
		    fx_n(job), fx_n(rank));
}

TY_TEST(a_batch_s_ranks_and_running_move_each_attempt_once_with_its_first_rank_s_words)
{
	struct fx *f = fx_start();
	struct ty_err err = {0};
	struct sched *s;
	long long a, b;
	char a0[64], a1[64], b0[64];
	bool ok[4] = {true, true, true, true}, took[4], bad;
	int p;

	three_nodes_no_leader(f);
	a = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':2}");
	b = fx_submit(f, ",'resources':{'nodes':1,'gpus_per_node':1}");
	p = fx_sched_start(f, "s2", NULL);
	FX_WAIT(f, T, "scheduled 1", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
		fx_n(a));
	FX_WAIT(f, T, "scheduled 1", "SELECT state || ' ' || attempt FROM jobs WHERE id = $1",
		fx_n(b));
	fx_sched_stop(f, p);
	snprintf(a0, sizeof(a0), "%s", node_of(f, a, 0));
	snprintf(a1, sizeof(a1), "%s", node_of(f, a, 1));
	snprintf(b0, sizeof(b0), "%s", node_of(f, b, 0));
	s = lead(f);

	/* a's first rank in the batch is node 1's: its words are the event's */
	struct proto_msg st[4] = {
	    msg(PROTO_RANK_STARTED, a1, a, "{\"rank\": 3, \"local_rank\": 1, \"pid\": 31}"),
	    msg(PROTO_RANK_STARTED, b0, b, "{\"rank\": 0, \"local_rank\": 0, \"pid\": 40}"),
	    msg(PROTO_RANK_STARTED, a0, a, "{\"rank\": 0, \"local_rank\": 0, \"pid\": 30}"),
	    msg(PROTO_RANK_STARTED, a1, a, "{\"rank\": 3, \"local_rank\": 1, \"pid\": 99}"),
	};
	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_apply_ranks(s, st, ok, 4, took, &bad, &err), 0);
	CHECK(!bad && took[0] && took[1] && took[2] && took[3]);
	commit(s);
	for (int i = 0; i < 2; i++) {
		long long job = i ? b : a;

		ty_test_context("job %lld", job);
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT j.state || ' ' || t.state FROM jobs j"
				  " JOIN attempts t ON t.job_id = j.id AND t.attempt = j.attempt"
				  " WHERE j.id = $1",
				  fx_n(job)),
			     "starting starting");
		CHECK_STR_EQ(FX_Q(f,
				  "SELECT string_agg(message || ' ' || (data->>'node'), '|')"
				  " FROM job_events WHERE job_id = $1 AND type = 'starting'",
				  fx_n(job)),
			     i ? ty_test_strf("attempt 1 starting: rank 0 started on node %s %s", b0,
					      b0)
			       : ty_test_strf("attempt 1 starting: rank 3 started on node %s %s", a1,
					      a1));
	}
	/* the first report of a rank wins (its pid), each launch acknowledged */
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT string_agg(rank || ':' || pid, ',' ORDER BY rank) FROM ranks"
			  " WHERE job_id = $1",
			  fx_n(a)),
		     "0:30,3:31");
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT count(*) FROM allocations WHERE job_id IN ($1, $2)"
			  " AND accepted_at IS NOT NULL",
			  fx_n(a), fx_n(b)),
		     "3");

	/* a rank outside its node's range makes the batch bad */
	struct proto_msg ex[1] = {msg(PROTO_RANK_EXITED, a0, a, "{\"rank\": 3, \"exit_code\": 0}")};
	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_apply_ranks(s, ex, ok, 1, took, &bad, &err), 0);
	CHECK(bad);
	ty_pg_rollback(s->term.pg);

	/* both of a's nodes running, only node 0 reporting a resume: a runs, from it */
	struct proto_msg run[3] = {
	    msg(PROTO_ATTEMPT_RUNNING, a1, a, "{}"),
	    msg(PROTO_ATTEMPT_RUNNING, a0, a,
		"{\"resume\": {\"path\": \"/ck/7\", \"step\": 7, \"skipped\": [{\"path\":"
		" \"/ck/9\", \"step\": 9, \"status\": \"corrupt\", \"reason\": \"bad sum\"}]}}"),
	    msg(PROTO_ATTEMPT_RUNNING, b0, b, "{}"),
	};
	REQUIRE_INT_EQ(sched_tx_begin(&s->term, &err), 0);
	CHECK_INT_EQ(sched_apply_running(s, run, ok, 3, took, &err), 0);
	CHECK(took[0] && took[1] && took[2]);
	commit(s);
	CHECK_STR_EQ(FX_Q(f,
			  "SELECT j.state || ' ' || t.state || ' ' || t.resume_from || ' '"
			  " || t.resume_step || ' ' || jsonb_array_length(t.resume_skipped)"
			  " FROM jobs j JOIN attempts t ON t.job_id = j.id AND t.attempt = j.attempt"
			  " WHERE j.id = $1",
			  fx_n(a)),
		     "running running /ck/7 7 1");
	CHECK_STR_EQ(FX_Q(f, "SELECT message FROM job_events WHERE job_id = $1 AND type = 'running'",
			  fx_n(a)),
		     "attempt 1 running: 4 ranks on 2 nodes; resumed from step 7 (/ck/7; 1 newer "
		     "checkpoint failed verification)");
	CHECK_STR_EQ(FX_Q(f, "SELECT message FROM job_events WHERE job_id = $1 AND type = 'running'",
			  fx_n(b)),
		     "attempt 1 running: 1 rank on 1 node");
	for (int i = 0; i < 4; i++)
		json_decref(st[i].data);
	json_decref(ex[0].data);
	for (int i = 0; i < 3; i++)
		json_decref(run[i].data);
	done(s);
}
