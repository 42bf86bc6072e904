/*
 * The pure parts of the scheduler's metrics (scheduler/metrics.c): pending
 * reasons mapped to a small fixed set of labels, the outcome of a decision
 * (placed, backfilled, reserved, pending), failure classes kept bounded,
 * and the --metrics-listen address.
 */
#include "core/policy.h"
#include "scheduler.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

TY_TEST(every_pending_reason_has_its_label)
{
	static const struct {
		int reason;
		const char *want;
	} cases[] = {
	    {SCHED_PLACED, "none"},
	    {SCHED_WAIT_NODES, "resources"},
	    {SCHED_WAIT_TOPOLOGY, "topology"},
	    {SCHED_NEVER_FITS, "never_fits"},
	    {SCHED_WAIT_BORROW_LIMIT, "quota"},
	    {SCHED_WAIT_COHORT, "quota"},
	    {SCHED_WAIT_NOMINAL, "quota"},
	    {SCHED_WAIT_PREEMPTION, "preemption"},
	    {SCHED_WAIT_RESERVED, "reservation"},
	    {SCHED_WAIT_HEAD, "resources"},
	    {SCHED_WAIT_BEHIND, "order"},
	    {SCHED_WAIT_SCAN_LIMIT, "order"},
	    {SCHED_WAIT_PORT, "ports"},
	    {SCHED_INVALID, "invalid"},
	    {SCHED_WAIT_BACKOFF, "backoff"},
	    {SCHED_NEVER_FITS_EXCLUDED, "never_fits"},
	    {SCHED_WAIT_ON_DEMAND, "resources"},
	    {SCHED_NEVER_FITS_CPUS, "never_fits"},
	    {SCHED_NEVER_FITS_MEMORY, "never_fits"},
	    {SCHED_WAIT_CPUS, "resources"},
	    {SCHED_WAIT_MEMORY, "resources"},
	    {SCHED_WAIT_QUOTA_CPUS, "quota"},
	    {SCHED_WAIT_QUOTA_MEMORY, "quota"},
	    {SCHED_WAIT_BUDGET, "budget"},
	    /* a reason the core may add later, and nonsense, stay bounded */
	    {SCHED_REASON_COUNT, "other"},
	    {-1, "other"},
	    {1000, "other"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ty_test_note("reason %d", cases[i].reason);
		CHECK_STR_EQ(sched_metrics_reason(cases[i].reason), cases[i].want);
	}
	/* the table covers every reason the core has now */
	CHECK_INT_EQ((int)(sizeof(cases) / sizeof(cases[0])), SCHED_REASON_COUNT + 3);
}

TY_TEST(failure_classes_outside_the_known_set_are_other)
{
	static const struct {
		const char *cls, *want;
	} cases[] = {
	    {"user", "user"},		{"oom", "oom"},
	    {"system", "system"},	{"hardware", "hardware"},
	    {"hang", "hang"},		{"node_lost", "node_lost"},
	    {"preempted", "preempted"}, {"start_timeout", "start_timeout"},
	    {"timeout", "timeout"},	{"cancelled", "cancelled"},
	    {"USER", "other"},		{"", "other"},
	    {"user\"} 1\nx", "other"},	{NULL, "other"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		CHECK_STR_EQ(sched_metrics_class(cases[i].cls), cases[i].want);
}

/*
 * Five pending jobs in order a (head, reserved), b (placed behind the head:
 * backfilled), c (waits for its victims, holding nodes: reserved), d (quota:
 * pending), e (placed ahead of the head: placed). Then the same without a
 * head: every placement is plain.
 */
TY_TEST(outcome_of_each_decision)
{
	struct sched_pending_out out[5] = {
	    {.position = 1, .reason = SCHED_WAIT_HEAD},
	    {.position = 2, .reason = SCHED_PLACED},
	    {.position = 3, .reason = SCHED_WAIT_PREEMPTION},
	    {.position = 4, .reason = SCHED_WAIT_NOMINAL},
	    {.position = 0, .reason = SCHED_PLACED},
	};
	struct sched_reservation resv[2] = {
	    {.job = 1, .pending = 0, .kind = SCHED_RESV_HEAD},
	    {.job = 3, .pending = 2, .kind = SCHED_RESV_PREEMPTION},
	};
	struct sched_decisions d = {
	    .pending = out, .npending = 5, .reservations = resv, .nreservations = 2, .head = 0};
	static const char *const want[] = {"reserved", "backfilled", "reserved", "pending",
					   "placed"};

	for (int i = 0; i < 5; i++)
		CHECK_STR_EQ(sched_metrics_outcome(&d, i), want[i]);
	d.head = -1;
	CHECK_STR_EQ(sched_metrics_outcome(&d, 1), "placed");
	CHECK_STR_EQ(sched_metrics_outcome(&d, 4), "placed");
	/* a head placed in the same decision holds nobody back */
	d.head = 4;
	CHECK_STR_EQ(sched_metrics_outcome(&d, 1), "placed");
	d.nreservations = 0;
	d.head = 0;
	CHECK_STR_EQ(sched_metrics_outcome(&d, 0), "pending");
	CHECK_STR_EQ(sched_metrics_outcome(&d, 2), "pending");
}

TY_TEST(metrics_listen_address)
{
	static const struct {
		const char *spec;
		int rc;
		const char *addr;
		int port;
	} cases[] = {
	    {"127.0.0.1:9101", 0, "127.0.0.1", 9101},
	    {"0.0.0.0:0", 0, "0.0.0.0", 0},
	    {"localhost:65535", 0, "127.0.0.1", 65535},
	    {"127.0.0.1:65536", TY_EINVAL, NULL, 0},
	    {"127.0.0.1:-1", TY_EINVAL, NULL, 0},
	    {"127.0.0.1:", TY_EINVAL, NULL, 0},
	    {"127.0.0.1:80x", TY_EINVAL, NULL, 0},
	    {":9101", TY_EINVAL, NULL, 0},
	    {"9101", TY_EINVAL, NULL, 0},
	    {"example.com:9101", TY_EINVAL, NULL, 0},
	    {"::1:9101", TY_EINVAL, NULL, 0},
	    {"", TY_EINVAL, NULL, 0},
	    {NULL, TY_EINVAL, NULL, 0},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct sockaddr_in sa;
		char got[INET_ADDRSTRLEN];

		ty_test_note("'%s'", cases[i].spec ? cases[i].spec : "(null)");
		CHECK_INT_EQ(sched_metrics_listen_parse(&sa, cases[i].spec), cases[i].rc);
		if (cases[i].rc)
			continue;
		CHECK_INT_EQ(ntohs(sa.sin_port), cases[i].port);
		CHECK_STR_EQ(inet_ntop(AF_INET, &sa.sin_addr, got, sizeof(got)), cases[i].addr);
	}
}

TY_TEST(updates_without_a_registry_do_nothing)
{
	struct sched s = {0};

	/* no --metrics-listen: every update is a no-op, not a crash */
	sched_metrics_role(&s);
	sched_metrics_cycle_failed(&s);
	sched_metrics_preempted(&s, "spot");
	sched_metrics_requeued(&s, "user", true);
	sched_metrics_kafka_error(s.metrics, SCHED_KAFKA_CONSUME);
	sched_metrics_outbox(s.metrics, 3, 0);
	sched_metrics_kafka(&s);
	sched_metrics_stop(NULL);
	CHECK(s.metrics == NULL);
}

TY_TEST(a_bad_listen_address_is_a_config_error)
{
	struct sched_metrics *m = (struct sched_metrics *)1;
	struct ty_err err = {0};
	int port = -1;

	CHECK_INT_EQ(sched_metrics_start(&m, &port, "nowhere:1", &err), TY_ECONFIG);
	CHECK(m == NULL);
	CHECK(strstr(err.msg, "'nowhere:1'") != NULL);
}

TY_TEST(budget_ratio_is_spend_over_budget)
{
	struct sched_team_in t = {0};

	CHECK(sched_metrics_budget_ratio(&t) == 0); /* no budget */
	t.has_budget = true;
	t.budget = 1000;
	t.spent = 812.5;
	CHECK(sched_metrics_budget_ratio(&t) == 0.8125);
	t.spent = 1500; /* overspent by running jobs */
	CHECK(sched_metrics_budget_ratio(&t) == 1.5);
	t.budget = 0; /* nothing may start: used up */
	t.spent = 0;
	CHECK(sched_metrics_budget_ratio(&t) == 1);
}
