/*
 * Reclaim preemption through the whole stack: team a borrows team b's idle
 * GPUs, b submits a job, one of a's gangs gets its checkpoint signal, is
 * killed after the grace period, requeued without spending its retry
 * budget, and runs again as attempt 2 once b's job is done.
 */
#include "e2e.h"
#include "ty_test.h"

#include <string.h>
#include <unistd.h>

/* Notes each (job, attempt) run and checkpoint signal in $OUTDIR; never ends by itself. */
#define TRAINER                                                                                    \
	"[\"/bin/sh\",\"-c\",\"tag=$TRAINYARD_JOB_ID-$TRAINYARD_ATTEMPT; "                         \
	"trap 'touch $OUTDIR/ckpt-$tag' USR1; echo $$ > $OUTDIR/run-$tag; "                        \
	"while :; do sleep 0.2; done\"]"

/*
 * Notes each run like TRAINER, and on the checkpoint signal notes it and
 * finishes: exit 0, as a job does that was at its last step.
 */
#define FINISHER                                                                                   \
	"[\"/bin/sh\",\"-c\",\"tag=$TRAINYARD_JOB_ID-$TRAINYARD_ATTEMPT; "                         \
	"trap 'touch $OUTDIR/ckpt-$tag; exit 0' USR1; echo $$ > $OUTDIR/run-$tag; "                \
	"while :; do sleep 0.2; done\"]"

/* A team with 2 nominal GPUs in cohort (no borrowing limit). */
static const char *mk_team(const char *prefix, const char *cohort)
{
	const struct ty_stack *s = ty_stack_get();
	struct ty_resp r = {0};
	const char *name = ty_uniq(prefix);

	ty_http(
	    &r, "POST", "/v1/teams", s->admin,
	    ty_test_strf("{\"name\":\"%s\",\"nominal_gpus\":2,\"cohort\":\"%s\"}", name, cohort),
	    NULL);
	REQUIRE_STATUS(&r, 201);
	ty_resp_free(&r);
	return name;
}

static long long submit_as(struct e2e *e, const char *team, const char *cmd, const char *extra)
{
	e->team = team;
	return e2e_submit(e, cmd, extra);
}

/* The event types of a job, space separated (scratch). */
static const char *event_types(struct e2e *e, long long job)
{
	struct ty_resp r = {0};
	const char *out = "";
	json_t *ev;
	size_t i;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?limit=1000", job), e->token, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(json_object_get(r.json, "events"), i, ev) out =
	    ty_test_strf("%s%s%s", out, i ? " " : "", ty_jstr(ev, "type"));
	ty_resp_free(&r);
	return out;
}

static const char *event_message(struct e2e *e, long long job, const char *type)
{
	struct ty_resp r = {0};
	const char *out = NULL;
	json_t *ev;
	size_t i;

	ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld/events?limit=1000", job), e->token, NULL,
		NULL);
	REQUIRE_STATUS(&r, 200);
	json_array_foreach(json_object_get(r.json, "events"), i,
			   ev) if (!out && !strcmp(ty_jstr(ev, "type"), type)) out =
	    ty_test_strf("%s", ty_jstr(ev, "message"));
	ty_resp_free(&r);
	return out;
}

static bool exists(struct e2e *e, const char *name)
{
	return access(ty_test_strf("%s/%s", e->out, name), F_OK) == 0;
}

/* Which of a1 and a2 got its checkpoint signal, within 30 s (0: neither); *other: the other. */
static long long signalled(struct e2e *e, long long a1, long long a2, long long *other)
{
	*other = 0;
	for (int i = 0; i < 300; i++) {
		if (exists(e, ty_test_strf("ckpt-%lld-1", a1))) {
			*other = a2;
			return a1;
		}
		if (exists(e, ty_test_strf("ckpt-%lld-1", a2))) {
			*other = a1;
			return a2;
		}
		usleep(100 * 1000);
	}
	return 0;
}

TY_TEST(borrowed_gpus_are_reclaimed_by_checkpoint_and_requeue)
{
	struct e2e *e = e2e_get();
	const char *cohort = ty_uniq("cohort");
	const char *a = mk_team("a", cohort), *b = mk_team("b", cohort);
	const char *spec =
	    "\"resources\":{\"nodes\":1,\"gpus_per_node\":2},\"launch\":\"per_node\","
	    "\"checkpoint\":{\"signal\":\"SIGUSR1\",\"grace_seconds\":2},"
	    "\"retry\":{\"system\":0}";
	long long a1, a2, b1, victim = 0, other = 0;
	json_t *job, *att;

	e->token = ty_stack_get()->admin; /* reads every team's jobs */

	/* a takes all four GPUs: its own two and b's two idle ones */
	a1 = submit_as(e, a, TRAINER, spec);
	json_decref(e2e_wait_state(e, a1, "running", 60000));
	a2 = submit_as(e, a, TRAINER, spec);
	json_decref(e2e_wait_state(e, a2, "running", 60000));
	for (int i = 0; i < 100 && !(exists(e, ty_test_strf("run-%lld-1", a1)) &&
				     exists(e, ty_test_strf("run-%lld-1", a2)));
	     i++)
		usleep(100 * 1000);
	CHECK(exists(e, ty_test_strf("run-%lld-1", a1)));
	CHECK(exists(e, ty_test_strf("run-%lld-1", a2)));

	/* b wants its nominal share back */
	b1 = submit_as(e, b,
		       "[\"/bin/sh\",\"-c\",\"echo $TRAINYARD_ATTEMPT > $OUTDIR/b-ran; sleep 3\"]",
		       "\"resources\":{\"nodes\":1,\"gpus_per_node\":2}");

	/* one of a's gangs gets the checkpoint signal and keeps running through the grace period */
	victim = signalled(e, a1, a2, &other);
	REQUIRE(victim != 0);
	ty_test_note("job %lld was checkpoint-signalled for job %lld", victim, b1);

	/* killed after the grace period, requeued; b's job runs and ends */
	job = e2e_wait_state(e, b1, "succeeded,failed,cancelled", 60000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	json_decref(job);
	CHECK_STR_EQ(e2e_read(e, "b-ran"), "1\n");

	/* then the preempted job resumes as attempt 2, its retry budget (0) untouched */
	job = e2e_wait_state(e, victim, "running", 60000);
	CHECK_INT_EQ(ty_jint(job, "attempt"), 2);
	CHECK_INT_EQ(ty_jint(job, "preemptions"), 1);
	CHECK_STR_EQ(ty_jstr(job, "failure_class"), "preempted");
	json_decref(job);
	for (int i = 0; i < 100 && !exists(e, ty_test_strf("run-%lld-2", victim)); i++)
		usleep(100 * 1000);
	CHECK(exists(e, ty_test_strf("run-%lld-2", victim)));
	att = e2e_attempts(e, victim);
	CHECK_INT_EQ(json_array_size(att), 2);
	CHECK_STR_EQ(ty_jstr(json_array_get(att, 0), "failure_class"), "preempted");
	json_decref(att);
	CHECK_STR_EQ(event_types(e, victim),
		     "submitted scheduled starting running preempting stopping requeued scheduled "
		     "starting running");
	CHECK(strstr(event_message(e, victim, "preempting"),
		     ty_test_strf("preempted to place job %lld (team %s reclaiming its nominal "
				  "quota)",
				  b1, b)) != NULL);
	CHECK(strstr(event_message(e, victim, "requeued"), "retry budget untouched") != NULL);

	/* only one gang was needed: the other ran on, never signalled */
	job = e2e_wait_state(e, other, "running", 1000);
	CHECK_INT_EQ(ty_jint(job, "attempt"), 1);
	CHECK_INT_EQ(ty_jint(job, "preemptions"), 0);
	json_decref(job);
	CHECK(!exists(e, ty_test_strf("ckpt-%lld-1", other)));

	/* leave the cluster empty for whatever runs next */
	for (int i = 0; i < 2; i++) {
		struct ty_resp r = {0};
		long long id = i ? a1 : a2;

		ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", id), e->token, NULL, NULL);
		CHECK_STATUS(&r, 200);
		ty_resp_free(&r);
		json_decref(e2e_wait_state(e, id, "cancelled", 30000));
	}
}

/*
 * The victim's ranks finish right after the checkpoint signal (exit 0): the
 * job succeeded, and it is never run again — through the real executor,
 * whose report of the exit crosses the scheduler's preemption.
 */
TY_TEST(a_gang_that_finishes_on_the_checkpoint_signal_succeeds_and_never_runs_again)
{
	struct e2e *e = e2e_get();
	const char *cohort = ty_uniq("cohort");
	const char *a = mk_team("a", cohort), *b = mk_team("b", cohort);
	const char *spec =
	    "\"resources\":{\"nodes\":1,\"gpus_per_node\":2},\"launch\":\"per_node\","
	    "\"checkpoint\":{\"signal\":\"SIGUSR1\",\"grace_seconds\":30}";
	long long a1, a2, b1, victim = 0, other = 0;
	json_t *job, *att;

	e->token = ty_stack_get()->admin;
	a1 = submit_as(e, a, FINISHER, spec);
	json_decref(e2e_wait_state(e, a1, "running", 60000));
	a2 = submit_as(e, a, FINISHER, spec);
	json_decref(e2e_wait_state(e, a2, "running", 60000));
	for (int i = 0; i < 100 && !(exists(e, ty_test_strf("run-%lld-1", a1)) &&
				     exists(e, ty_test_strf("run-%lld-1", a2)));
	     i++)
		usleep(100 * 1000);
	b1 = submit_as(e, b, "[\"/bin/sh\",\"-c\",\"sleep 1\"]",
		       "\"resources\":{\"nodes\":1,\"gpus_per_node\":2}");
	victim = signalled(e, a1, a2, &other);
	REQUIRE(victim != 0);

	/* finished, not preempted: long before the 30 s grace period is over */
	job = e2e_wait_state(e, victim, "succeeded,failed,cancelled,pending", 20000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(ty_jint(job, "attempt"), 1);
	CHECK_INT_EQ(ty_jint(job, "preemptions"), 0);
	json_decref(job);
	att = e2e_attempts(e, victim);
	CHECK_INT_EQ(json_array_size(att), 1);
	CHECK_STR_EQ(ty_jstr(json_array_get(att, 0), "state"), "succeeded");
	json_decref(att);
	CHECK_STR_EQ(event_types(e, victim),
		     "submitted scheduled starting running preempting succeeded");
	json_decref(e2e_wait_state(e, b1, "succeeded", 60000));
	/* and never again, though its GPUs are free once more */
	usleep(1500 * 1000);
	CHECK(!exists(e, ty_test_strf("run-%lld-2", victim)));
	job = e2e_wait_state(e, victim, "succeeded", 1000);
	CHECK_INT_EQ(ty_jint(job, "attempt"), 1);
	json_decref(job);

	{
		struct ty_resp r = {0};

		ty_http(&r, "POST", ty_test_strf("/v1/jobs/%lld/cancel", other), e->token, NULL,
			NULL);
		CHECK_STATUS(&r, 200);
		ty_resp_free(&r);
		json_decref(e2e_wait_state(e, other, "cancelled", 30000));
	}
}

/*
 * The same through a spot notice (the API's local trigger): the checkpoint
 * signal reaches the ranks, they finish (exit 0), and the job succeeded
 * with no spot preemption counted; it never runs again.
 */
TY_TEST(a_gang_that_finishes_on_a_spot_notice_succeeds_and_never_runs_again)
{
	struct e2e *e = e2e_get();
	const char *a = mk_team("a", ty_uniq("cohort"));
	long long job;
	const char *node;
	json_t *j, *att;
	struct ty_resp r = {0};

	e->token = ty_stack_get()->admin;
	job = submit_as(e, a, FINISHER,
			"\"resources\":{\"nodes\":1,\"gpus_per_node\":2},\"launch\":\"per_node\","
			"\"checkpoint\":{\"signal\":\"SIGUSR1\",\"grace_seconds\":30}");
	json_decref(e2e_wait_state(e, job, "running", 60000));
	for (int i = 0; i < 100 && !exists(e, ty_test_strf("run-%lld-1", job)); i++)
		usleep(100 * 1000);
	att = e2e_attempts(e, job);
	node = ty_test_strf(
	    "%s",
	    ty_jstr(json_array_get(json_object_get(json_array_get(att, 0), "nodes"), 0), "node"));
	json_decref(att);
	ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/preempt", node), e->token,
		"{\"deadline_seconds\":60}", NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);

	j = e2e_wait_state(e, job, "succeeded,failed,cancelled,pending", 30000);
	CHECK_STR_EQ(ty_jstr(j, "state"), "succeeded");
	CHECK_INT_EQ(ty_jint(j, "attempt"), 1);
	CHECK_INT_EQ(ty_jint(j, "preemptions"), 0);
	CHECK_INT_EQ(ty_jint(j, "spot_preemptions"), 0);
	json_decref(j);
	CHECK(exists(e, ty_test_strf("ckpt-%lld-1", job)));
	CHECK_STR_EQ(event_types(e, job),
		     "submitted scheduled starting running preempting succeeded");
	usleep(1500 * 1000);
	CHECK(!exists(e, ty_test_strf("run-%lld-2", job)));

	/* the node takes work again for the cases after this one */
	ty_http(&r, "POST", ty_test_strf("/v1/nodes/%s/undrain", node), e->token, NULL, NULL);
	CHECK_STATUS(&r, 200);
	ty_resp_free(&r);
}
