/*
 * The promises of docs/dispatch.md under failure: a broker outage, a
 * dispatch message the broker lost, the scheduler leader dying — each job
 * still runs exactly once and ends in the right state. PostgreSQL restarts
 * are tests/faults/test_faults_postgres.c's.
 */
#include "e2e.h"
#include "proto.h"
#include "ty_kafka.h"
#include "ty_test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORD_RANK_THEN(s)                                                              \
	"[\"/bin/sh\",\"-c\",\"echo $RANK > $OUTDIR/rank-$TRAINYARD_JOB_ID-$RANK.$$; "  \
	"sleep " s "\"]"

static void check_each_rank_once(struct e2e *e, long long job, int ranks)
{
	for (int r = 0; r < ranks; r++) {
		ty_test_context("job %lld rank %d", job, r);
		CHECK_INT_EQ(e2e_count_files(e, ty_test_strf("rank-%lld-%d.", job, r)), 1);
	}
	ty_test_context(NULL);
}

static void expect_success_first_try(struct e2e *e, long long id, int timeout_ms)
{
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", timeout_ms);

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(ty_jint(job, "attempt"), 1);
	json_decref(job);
}

TY_TEST(a_broker_outage_delays_but_loses_nothing)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e, RECORD_RANK_THEN("2"),
				  "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");

	json_decref(e2e_wait_state(e, id, "running", 60000));
	ty_test_daemon_signal(e->broker, SIGUSR1); /* every broker down */
	sleep(3); /* shorter than the node timeout: nobody is declared lost */
	ty_test_daemon_signal(e->broker, SIGUSR2);
	expect_success_first_try(e, id, 60000);
	check_each_rank_once(e, id, 2);
}

static rd_kafka_t *producer(struct e2e *e)
{
	char bs[1024];
	struct ty_err err = {0};
	rd_kafka_t *rk = NULL;

	REQUIRE_INT_EQ(ty_kafka_bootstrap(bs, sizeof(bs), e->bootstrap, &err), 0);
	REQUIRE_INT_EQ(ty_kafka_producer_new(&rk, bs, NULL, &err), 0);
	return rk;
}

static void watermarks(rd_kafka_t *rk, int32_t part, int64_t *lo, int64_t *hi)
{
	REQUIRE_INT_EQ(rd_kafka_query_watermark_offsets(rk, PROTO_TOPIC_DISPATCH, part, lo, hi,
							5000),
		       RD_KAFKA_RESP_ERR_NO_ERROR);
}

TY_TEST(a_dispatch_message_lost_by_the_broker_is_sent_again_once)
{
	struct e2e *e = e2e_get();
	rd_kafka_t *rk = producer(e);
	const rd_kafka_metadata_t *md = NULL;
	int32_t parts = 0, part;
	int64_t lo, hi0, hi1;
	static char junk[16 * 1024];
	rd_kafka_topic_t *topic = rd_kafka_topic_new(rk, PROTO_TOPIC_DISPATCH, NULL);
	long long id;

	REQUIRE_INT_EQ(rd_kafka_metadata(rk, 0, topic, &md, 5000),
		       RD_KAFKA_RESP_ERR_NO_ERROR);
	parts = md->topics[0].partition_cnt;
	rd_kafka_metadata_destroy(md);
	part = proto_node_partition("node-b", parts);
	watermarks(rk, part, &lo, &hi0);

	/* node-b does not read while its launch arrives and is then evicted */
	ty_test_daemon_signal(e->exec[1], SIGSTOP);
	id = e2e_submit(e, RECORD_RANK_THEN("1"), "\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	for (int i = 0; i < 100; i++) {
		watermarks(rk, part, &lo, &hi1);
		if (hi1 > hi0)
			break;
		usleep(20 * 1000);
	}
	REQUIRE(hi1 > hi0);
	/* the embedded broker keeps a few MiB per partition: push the launch out
	 * of it, as retention would on a real cluster (the executor skips junk) */
	memset(junk, 'x', sizeof(junk));
	for (int i = 0; i < 2048 && lo < hi1; i++) {
		while (rd_kafka_produce(topic, part,
					RD_KAFKA_MSG_F_COPY, junk, sizeof(junk), NULL, 0,
					NULL) != 0)
			rd_kafka_poll(rk, 10);
		if (i % 64 == 63) {
			rd_kafka_flush(rk, 5000);
			watermarks(rk, part, &lo, &hi0);
		}
	}
	rd_kafka_flush(rk, 5000);
	watermarks(rk, part, &lo, &hi0);
	ty_test_daemon_signal(e->exec[1], SIGCONT);
	REQUIRE(lo >= hi1); /* the launch is gone from the broker */

	expect_success_first_try(e, id, 60000);
	check_each_rank_once(e, id, 2);
	rd_kafka_topic_destroy(topic);
	rd_kafka_destroy(rk);
}

TY_TEST(the_standby_takes_over_when_the_leader_dies)
{
	struct e2e *e = e2e_get();
	long long ids[3];

	e2e_start_scheduler(e, 1); /* standby */
	for (int i = 0; i < 3; i++)
		ids[i] = e2e_submit(e,
				    "[\"/bin/sh\",\"-c\",\"echo $RANK > "
				    "$OUTDIR/job-$TRAINYARD_JOB_ID-rank-$RANK.$$; sleep 1\"]",
				    "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	json_decref(e2e_wait_state(e, ids[0], "starting,running,succeeded", 60000));
	ty_test_daemon_kill(e->sched[0]);
	for (int i = 0; i < 3; i++) {
		ty_test_context("job %lld", ids[i]);
		expect_success_first_try(e, ids[i], 60000);
		CHECK_INT_EQ(e2e_count_files(e, ty_test_strf("job-%lld-rank-0.", ids[i])), 1);
	}
	ty_test_context(NULL);
	e2e_start_scheduler(e, 0); /* back as the standby */
}
