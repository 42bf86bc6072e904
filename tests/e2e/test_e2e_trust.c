/*
 * Someone with write access to trainyard.dispatch but not the scheduler's
 * key (docs/security.md, "Control plane and nodes"): kcat re-produces a
 * captured real launch with another command, unsigned and with the
 * original signature, and once more with a huge epoch; none of it runs,
 * each is refused with its reason, and the scheduler's next launches still
 * run on both nodes.
 */
#include "e2e.h"
#include "ty_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of the broker's bootstrap file (e->bootstrap is "@FILE"). */
static const char *bootstrap(struct e2e *e)
{
	FILE *f = fopen(e->bootstrap + 1, "r");
	char line[1024] = "";

	REQUIRE(f != NULL);
	REQUIRE(fgets(line, sizeof(line), f) != NULL);
	fclose(f);
	line[strcspn(line, "\r\n")] = '\0';
	return ty_test_strf("%s", line);
}

struct captured {
	int partition;
	char key[128];
	char sig[256]; /* "" when none */
	char *payload; /* scratch */
};

/* The launch of job as it went over the broker, read back with kcat. */
static bool capture_launch(struct captured *c, struct e2e *e, long long job)
{
	const char *cmd = ty_test_strf("kcat -C -b '%s' -t trainyard.dispatch -o beginning -e -q "
				       "-f '%%p\\t%%k\\t%%h\\t%%s\\n' 2>/dev/null",
				       bootstrap(e));
	const char *want = ty_test_strf("\"job\":%lld,", job);
	FILE *p = popen(cmd, "r");
	char line[65536];
	bool found = false;

	REQUIRE(p != NULL);
	while (!found && fgets(line, sizeof(line), p)) {
		char *f[4], *save = NULL, *h;

		line[strcspn(line, "\n")] = '\0';
		f[0] = strtok_r(line, "\t", &save);
		for (int i = 1; i < 4; i++)
			f[i] = strtok_r(NULL, i == 3 ? "" : "\t", &save);
		if (!f[3] || !strstr(f[3], "\"type\":\"launch\"") || !strstr(f[3], want))
			continue;
		c->partition = atoi(f[0]);
		snprintf(c->key, sizeof(c->key), "%s", f[1]);
		c->sig[0] = '\0';
		if ((h = strstr(f[2], "ty-sig=")))
			snprintf(c->sig, sizeof(c->sig), "%.*s", (int)strcspn(h + 7, ","), h + 7);
		c->payload = ty_test_strf("%s", f[3]);
		found = true;
	}
	pclose(p);
	return found;
}

/* Produce payload with kcat to the captured partition and key, with header ty-sig=sig (NULL: none). */
static void kcat_produce(struct e2e *e, const struct captured *c, const char *payload,
			 const char *sig)
{
	const char *file = ty_test_strf("%s/forged.json", ty_test_workdir());
	FILE *f = fopen(file, "w");
	int rc;

	REQUIRE(f != NULL);
	fprintf(f, "%s\n", payload);
	fclose(f);
	rc = system(ty_test_strf("kcat -P -b '%s' -t trainyard.dispatch -p %d -k '%s' %s%s%s < '%s'",
				 bootstrap(e), c->partition, c->key, sig ? "-H 'ty-sig=" : "",
				 sig ? sig : "", sig ? "'" : "", file));
	REQUIRE_INT_EQ(rc, 0);
}

/* payload with another command (and, when epoch > 0, that epoch and seq + 1). */
static const char *forge(const char *payload, const char *command, long long epoch)
{
	json_t *o = json_loads(payload, 0, NULL), *cmd;
	char *text;
	const char *out;

	REQUIRE(o != NULL);
	cmd = json_pack("[s, s, s]", "/bin/sh", "-c", command);
	json_object_set_new(json_object_get(o, "data"), "command", cmd);
	if (epoch > 0) {
		json_object_set_new(o, "epoch", json_integer(epoch));
		json_object_set_new(o, "seq",
				    json_integer(json_integer_value(json_object_get(o, "seq")) + 1));
	}
	text = json_dumps(o, JSON_COMPACT);
	out = ty_test_strf("%s", text);
	free(text);
	json_decref(o);
	return out;
}

TY_TEST(a_captured_launch_with_another_command_runs_nothing)
{
	struct e2e *e = e2e_get();
	long long id = e2e_submit(e, "[\"/bin/sh\",\"-c\",\"touch $OUTDIR/real-$RANK\"]",
				  "\"resources\":{\"nodes\":1,\"gpus_per_node\":1}");
	json_t *job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	struct captured c;
	struct ty_daemon *x;
	const char *forged;

	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	REQUIRE(capture_launch(&c, e, id));
	CHECK(strlen(c.sig) == 128);
	x = e->exec[!strcmp(c.key, e->node[0]) ? 0 : 1];
	REQUIRE(!strcmp(c.key, e->node[0]) || !strcmp(c.key, e->node[1]));

	/* the command changed: the original signature no longer fits, and none is none */
	forged = forge(c.payload, "id > $OUTDIR/pwned-$RANK", 0);
	kcat_produce(e, &c, forged, c.sig);
	kcat_produce(e, &c, forged, NULL);
	/* a huge epoch, unsigned: would have silenced the scheduler for good */
	kcat_produce(e, &c, forge(c.payload, "id > $OUTDIR/pwned-epoch-$RANK", 1LL << 40), NULL);
	/* the real launch again, byte for byte with its signature: a replay */
	kcat_produce(e, &c, c.payload, c.sig);
	CHECK(ty_test_daemon_wait_log(x, "(bad_signature): its 'ty-sig' header", 30000));
	CHECK(ty_test_daemon_wait_log(x, "(unsigned): no 'ty-sig' header", 30000));
	CHECK(ty_test_daemon_wait_log(
	    x, ty_test_strf("(replayed): 'launch' of job %lld attempt 1", id), 30000));

	/* the scheduler still leads both nodes */
	json_decref(job);
	id = e2e_submit(e, "[\"/bin/sh\",\"-c\",\"touch $OUTDIR/after-$RANK\"]",
			"\"resources\":{\"nodes\":2,\"gpus_per_node\":1}");
	job = e2e_wait_state(e, id, "succeeded,failed,cancelled", 60000);
	CHECK_STR_EQ(ty_jstr(job, "state"), "succeeded");
	CHECK_INT_EQ(e2e_count_files(e, "after-"), 2);
	CHECK_INT_EQ(e2e_count_files(e, "real-"), 1);
	CHECK_INT_EQ(e2e_count_files(e, "pwned"), 0);
	json_decref(job);
}
