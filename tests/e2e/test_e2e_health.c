/*
 * End to end, GPU health (docs/dispatch.md, "Node conditions"): three
 * executors take their GPUs from the stand-in libnvidia-ml
 * (tests/unit/executor/fake_nvml.c), each with a control file of its own.
 * A GPU of node-a that raises Xid 79 under a running 2-node job ends that
 * attempt as `hardware`; the job runs again on the other nodes without
 * spending its retry budget, and node-a is drained with the Xid as the
 * reason.
 */
#include "e2e.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *ctl[E2E_MAX_NODES]; /* each node's FAKE_NVML_FILE */

/* node i's stand-in GPUs, with the events given (a JSON array's body) */
static void write_control(int i, const char *events)
{
	const char *tmp = ty_test_strf("%s.tmp", ctl[i]);
	FILE *f = fopen(tmp, "w");

	REQUIRE(f != NULL);
	fprintf(f,
		"{\"driver_version\":\"570.86.15\",\"cuda_version\":12080,\"gpus\":["
		"{\"uuid\":\"GPU-%d0000000-0000-0000-0000-000000000000\",\"name\":\"Stand-in H100\","
		"\"memory_mb\":81559,\"pci_bus_id\":\"00000000:1%d:00.0\",\"utilization\":90},"
		"{\"uuid\":\"GPU-%d1111111-1111-1111-1111-111111111111\",\"name\":\"Stand-in H100\","
		"\"memory_mb\":81559,\"pci_bus_id\":\"00000000:2%d:00.0\",\"utilization\":90}],"
		"\"events\":[%s]}",
		i, i, i, i, events);
	fclose(f);
	/* a whole file at once: the stand-in reads it again when it changes */
	REQUIRE(rename(tmp, ctl[i]) == 0);
}

static struct e2e *stack(void)
{
	static bool set;

	if (!set) {
		const char *lib = getenv("TY_FAKE_NVML");
		struct e2e_layout l = {.nodes = 3, .nvml = true};

		if (!lib || !*lib) {
			FAIL("TY_FAKE_NVML is not set (tests/e2e.cmake sets it)");
			ty_test_abort();
		}
		/* e2e_set_layout copies them */
		static const char *prefix[3][3], *args[3][5];

		for (int i = 0; i < 3; i++) {
			ctl[i] = strdup(ty_test_strf("%s/nvml-%d.json", ty_test_workdir(), i));
			write_control(i, "");
			prefix[i][0] = "/usr/bin/env";
			prefix[i][1] = ty_test_strf("FAKE_NVML_FILE=%s", ctl[i]);
			args[i][0] = "--nvml-library";
			args[i][1] = lib;
			args[i][2] = "--health-check-ms";
			args[i][3] = "200";
			l.prefix[i] = prefix[i];
			l.args[i] = args[i];
		}
		e2e_set_layout(&l);
		set = true;
	}
	return e2e_get();
}

/* j as compact JSON text, a scratch string. */
static const char *text(const json_t *j)
{
	char *t = json_dumps(j, JSON_COMPACT);
	const char *s = ty_test_strf("%s", t ? t : "(null)");

	free(t);
	return s;
}

/* The admin's view of a node (new). */
static json_t *node_json(const char *node)
{
	struct ty_resp r = {0};
	json_t *j;

	ty_http(&r, "GET", ty_test_strf("/v1/nodes/%s", node), ty_stack_get()->admin, NULL, NULL);
	REQUIRE_STATUS(&r, 200);
	j = json_incref(r.json);
	ty_resp_free(&r);
	return j;
}

TY_TEST(an_xid_79_under_a_running_gang_fails_it_as_hardware_and_drains_the_node)
{
	struct e2e *e = stack();
	json_t *job, *att, *n;
	const char *victim, *reason;
	long long id;
	int v = -1;

	/* attempt 1 runs until it is stopped, attempt 2 succeeds */
	id = e2e_submit(e,
			"[\"/bin/sh\",\"-c\",\"[ $TRAINYARD_ATTEMPT = 1 ] && exec sleep 600; "
			"echo ok > $OUTDIR/ok.$RANK\"]",
			"\"resources\":{\"nodes\":2,\"gpus_per_node\":2},\"retry\":{\"system\":0}");
	json_decref(e2e_wait_state(e, id, "running", 60000));
	att = e2e_attempts(e, id);
	victim = ty_jstr(att, "[0].ranks[0].node");
	REQUIRE(victim != NULL);
	for (int i = 0; i < e->nodes; i++)
		if (!strcmp(e->node[i], victim))
			v = i;
	REQUIRE(v >= 0);
	victim = e->node[v];
	json_decref(att);
	/* the watch reports only what happens after it registered: it has, the node is ready */
	write_control(v, "{\"gpu\":0,\"xid\":79}");

	/* with no system retry left, only a retry that spends none can succeed */
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 90000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	att = e2e_attempts(e, id);
	REQUIRE_INT_EQ(json_array_size(att), 2);
	ty_test_context("attempts: %s", text(att));
	CHECK_STR_EQ(ty_jstr(att, "[0].failure_class"), "hardware");
	CHECK(ty_jstr(att, "[0].evidence") && strstr(ty_jstr(att, "[0].evidence"), "Xid 79"));
	CHECK_STR_EQ(ty_jstr(att, "[0].blamed_node"), victim);
	for (int r = 0; r < 4; r++)
		CHECK(strcmp(ty_jstr(att, ty_test_strf("[1].ranks[%d].node", r)), victim) != 0);
	ty_test_context(NULL);
	CHECK_INT_EQ(e2e_count_files(e, "ok."), 4);

	/* the node is drained, the Xid its reason, the condition listed */
	n = node_json(victim);
	ty_test_context("node: %s", text(n));
	CHECK_STR_EQ(ty_jstr(n, "state"), "drained");
	reason = ty_jstr(n, "drain_reason");
	CHECK(reason && strstr(reason, "Xid 79"));
	CHECK_STR_EQ(ty_jstr(n, "conditions[0].kind"), "xid");
	CHECK_STR_EQ(ty_jstr(n, "conditions[0].severity"), "fatal");
	ty_test_context(NULL);
	json_decref(n);
	json_decref(att);
	json_decref(job);
}
