/*
 * Broker faults while short jobs stream in: transient request errors on
 * produce, fetch and offset commits, one broker down and up again, leader
 * moves of the dispatch, events and nodes partitions, a preferred read
 * replica and a coordinator move, injected at run time through
 * trainyard-broker's --control-fifo (deploy/local/README.md). Nothing may
 * be lost or doubled: the invariants hold and every job succeeds.
 */
#include "invariants.h"
#include "ty_test.h"

#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define JOBS 50
#define ONE_GPU "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}"

static const char *fifo;

/* The stack, its broker taking commands; few partitions keep leader moves short. */
static struct e2e *stack(void)
{
	if (!fifo) {
		struct e2e_layout l = {0};

		fifo = strdup(ty_test_strf("%s/broker.control", ty_test_workdir()));
		l.broker_args = (const char *const[]){"--control-fifo", fifo,
						      "--dispatch-partitions", "4",
						      "--events-partitions", "4",
						      "--nodes-partitions", "2", NULL};
		e2e_set_layout(&l);
	}
	return e2e_get();
}

/* Send one command and wait until the broker says it was done. */
static void control(struct e2e *e, const char *cmd)
{
	const char *line = ty_test_strf("%s\n", cmd);
	int fd = open(fifo, O_WRONLY | O_CLOEXEC);

	ty_test_context("broker control '%s'", cmd);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, line, strlen(line)) == (ssize_t)strlen(line));
	close(fd);
	/* a leader move waits for the mock cluster's thread: up to a second each */
	CHECK(ty_test_daemon_wait_log(e->broker, ty_test_strf("control: '%s' done", cmd), 30000));
	ty_test_context(NULL);
}

/* Injections by the index of the submission they come before. */
static const struct {
	int at;
	const char *cmd;
} faults[] = {
	{4, "errors Produce NOT_LEADER_FOR_PARTITION 5"},
	{8, "errors Produce REQUEST_TIMED_OUT 3"},
	{12, "errors Fetch NOT_LEADER_FOR_PARTITION 5"},
	{16, "errors OffsetCommit COORDINATOR_NOT_AVAILABLE 4"},
	{18, "errors FindCoordinator COORDINATOR_NOT_AVAILABLE 2"},
	{20, "broker-down 2"},
	{24, "broker-up 2"},
	{28, "leaders trainyard.dispatch 1"},
	{32, "leaders trainyard.events 2"},
	{34, "leaders trainyard.nodes 1"},
	{38, "broker-errors 1 Produce REQUEST_TIMED_OUT 3 300"},
	{40, "broker-errors 3 Fetch NOT_LEADER_FOR_PARTITION 3 100"},
	{42, "follower trainyard.events 0 3"},
	{44, "coordinator group trainyard-scheduler 1"},
	{46, "leaders trainyard.dispatch 0"},
};

TY_TEST(request_errors_broker_loss_and_leader_moves_under_a_job_stream)
{
	struct e2e *e = stack();
	long long ids[JOBS];
	const char *states[JOBS];
	size_t f = 0;

	for (int i = 0; i < JOBS; i++) {
		for (; f < sizeof(faults) / sizeof(faults[0]) && faults[f].at == i; f++)
			control(e, faults[f].cmd);
		ids[i] = e2e_submit(e, FAULTS_RANK_CMD("3"), ONE_GPU);
		states[i] = "succeeded";
		usleep(100 * 1000);
	}
	faults_check_invariants(e, ids, states, JOBS, 120000);
}
