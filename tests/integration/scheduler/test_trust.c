/*
 * Messages from executors are their node's (docs/security.md, "Control
 * plane and nodes"): a register, heartbeat or attempt_exited that claims
 * another node than the key that made its MAC, or that has no MAC, is
 * refused, logged and counted (trainyard_scheduler_rejected_messages_total)
 * and changes nothing; the scheduler will not start without its keys.
 */
#include "fixture.h"
#include "ty_buf.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define T 15000
#define REJECTED(why) "trainyard_scheduler_rejected_messages_total{reason=\"" why "\"}"

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	ty_buf_append(arg, p, size * n);
	return size * n;
}

/* GET /metrics of the scheduler on port (scratch); the case ends unless it answers 200. */
static const char *scrape(int port)
{
	struct ty_buf b = TY_BUF_INIT;
	CURL *c = curl_easy_init();
	long status = 0;
	const char *out;

	REQUIRE(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, ty_test_strf("http://127.0.0.1:%d/metrics", port));
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	out = ty_test_strf("%s", b.data ? b.data : "");
	ty_buf_free(&b);
	REQUIRE_INT_EQ(status, 200);
	return out;
}

/* The value of the sample "series" in a /metrics text, or -1 if absent. */
static double value(const char *text, const char *series)
{
	size_t n = strlen(series);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, series, n) == 0 && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	return -1;
}

TY_TEST(a_node_cannot_speak_for_another)
{
	const char *file = ty_test_strf("%s/trust.metrics-port", ty_test_workdir());
	const char *const extra[] = {"--metrics-listen=127.0.0.1:0",
				     ty_test_strf("--metrics-port-file=%s", file), NULL};
	struct fx *f = fx_start();
	const struct proto_msg *l;
	const char *text;
	long long job;
	int port = 0;

	fx_node(f, "n1", 1);
	fx_node(f, "n2", 1);
	unlink(file);
	fx_sched_start(f, "s1", extra);
	for (int k = 0; k < 300 && port <= 0; k++) {
		FILE *p = fopen(file, "r");

		if (!p || fscanf(p, "%d", &port) != 1)
			usleep(50 * 1000);
		if (p)
			fclose(p);
	}
	REQUIRE(port > 0);
	FX_WAIT(f, T, "2", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'nodes':2,'gpus_per_node':1}");
	REQUIRE((l = fx_recv(f, "n2", "launch", job, T)) != NULL);
	fx_run(f, "n2", l);
	REQUIRE((l = fx_recv(f, "n1", "launch", job, T)) != NULL);
	fx_run(f, "n1", l);
	FX_WAIT(f, T, "running", "SELECT state FROM jobs WHERE id = $1", fx_n(job));

	/* n1's key, n2's name: a new boot would fail n2's part, an exit would end the gang */
	fx_send_as(f, PROTO_TOPIC_NODES, "n1",
		   "{'v':1,'type':'register','node':'n2','job':0,'attempt':0,'epoch':0,"
		   "'seq':99000000000000,'ts':0,'data':{'address':'10.0.0.9','gpus':8,"
		   "'labels':{},'boot_id':'forged-boot','log_url':''}}");
	fx_send_as(f, PROTO_TOPIC_NODES, "n1",
		   "{'v':1,'type':'heartbeat','node':'n2','job':0,'attempt':0,'epoch':0,"
		   "'seq':99000000000001,'ts':0,'data':{'boot_id':'forged-boot','running':[],"
		   "'finished':[]}}");
	fx_send_as(f, PROTO_TOPIC_EVENTS, "n1",
		   ty_test_strf("{'v':1,'type':'attempt_exited','node':'n2','job':%lld,"
				"'attempt':1,'epoch':0,'seq':99000000000002,'ts':0,'data':{"
				"'exit_code':1,'failure_class':'user','message':'forged'}}",
				job));
	/* no MAC at all: a new node, and n2's exit again */
	fx_send_as(f, PROTO_TOPIC_NODES, NULL,
		   "{'v':1,'type':'register','node':'n3','job':0,'attempt':0,'epoch':0,"
		   "'seq':1,'ts':0,'data':{'address':'10.0.0.3','gpus':8,'labels':{},"
		   "'boot_id':'b3','log_url':''}}");
	fx_send_as(f, PROTO_TOPIC_EVENTS, NULL,
		   ty_test_strf("{'v':1,'type':'attempt_exited','node':'n2','job':%lld,"
				"'attempt':1,'epoch':0,'seq':99000000000003,'ts':0,'data':{"
				"'exit_code':1,'failure_class':'user','message':'forged'}}",
				job));
	fx_sync(f, T);
	/* a cycle and a reconcile later nothing changed */
	fx_poll(f, 1000);
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM jobs WHERE id = $1", fx_n(job)), "running");
	CHECK_STR_EQ(FX_Q(f, "SELECT state FROM attempts WHERE job_id = $1 AND attempt = 1",
			  fx_n(job)),
		     "running");
	CHECK_STR_EQ(FX_Q(f, "SELECT count(*) FROM nodes WHERE id = 'n3'"), "0");
	CHECK_STR_EQ(FX_Q(f, "SELECT boot_id <> 'forged-boot' FROM nodes WHERE id = 'n2'"), "t");
	CHECK_INT_EQ(fx_count(f, "n1", "kill", job, 0), 0);
	text = scrape(port);
	CHECK_INT_EQ(value(text, REJECTED("bad_signature")), 3);
	CHECK_INT_EQ(value(text, REJECTED("unsigned")), 2);
	CHECK(strstr(fx_sched_log(f, 0),
		     "refusing register message claiming node 'n2' at trainyard.nodes") != NULL);
	CHECK(strstr(fx_sched_log(f, 0), "(bad_signature): its MAC is not that node's key's") !=
	      NULL);
	CHECK(strstr(fx_sched_log(f, 0), "(unsigned): no 'ty-mac' header") != NULL);
	fx_sched_stop(f, 0);
}

/* Run the scheduler with args (a shell word list); exit status, stderr (scratch) in *err. */
static int run(const char **err, const char *args)
{
	const char *out = ty_test_strf("%s/run.err", ty_test_workdir());
	int status = system(ty_test_strf("'%s' %s 2>'%s' >'%s.out'", getenv("TY_SCHEDULER_BIN"),
					 args, out, out));
	FILE *f = fopen(out, "r");
	char *buf = ty_test_alloc(4096);

	if (f) {
		buf[fread(buf, 1, 4095, f)] = '\0';
		fclose(f);
	}
	*err = buf;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TY_TEST(start_refused_without_keys_and_print_node_key)
{
	const char *dir = ty_test_workdir(), *err;
	const char *common = "--database-url postgresql://127.0.0.1:9/x --kafka-bootstrap 127.0.0.1:9";
	const char *short_secret = ty_test_strf("%s/short-secret", dir);
	const char *garbage = ty_test_strf("%s/garbage.pem", dir);
	FILE *f;
	char key[128] = "";

	REQUIRE(getenv("TY_SCHEDULER_BIN") != NULL);
	REQUIRE((f = fopen(short_secret, "w")) != NULL);
	fputs("too short\n", f);
	fclose(f);
	REQUIRE((f = fopen(garbage, "w")) != NULL);
	fputs("not a key\n", f);
	fclose(f);

	CHECK_INT_EQ(run(&err, ty_test_strf("%s --dispatch-key '%s'", common,
					    ty_test_dispatch_key())),
		     2);
	CHECK(strstr(err, "option '--node-secret-file' is required") != NULL);
	CHECK_INT_EQ(run(&err, ty_test_strf("%s --node-secret-file '%s'", common,
					    ty_test_node_secret())),
		     2);
	CHECK(strstr(err, "option '--dispatch-key' is required") != NULL);
	CHECK_INT_EQ(run(&err, ty_test_strf("%s --node-secret-file '%s' --dispatch-key '%s'",
					    common, ty_test_node_secret(), garbage)),
		     2);
	CHECK(strstr(err, ty_test_strf("option 'dispatch-key': '%s' holds no private key", garbage)) !=
	      NULL);
	/* the public half cannot sign */
	CHECK_INT_EQ(run(&err, ty_test_strf("%s --node-secret-file '%s' --dispatch-key '%s'",
					    common, ty_test_node_secret(),
					    ty_test_dispatch_pubkey())),
		     2);
	CHECK(strstr(err, "holds no private key") != NULL);
	CHECK_INT_EQ(run(&err, ty_test_strf("%s --node-secret-file '%s' --dispatch-key '%s'",
					    common, short_secret, ty_test_dispatch_key())),
		     2);
	CHECK(strstr(err, ty_test_strf("node secret file '%s' holds 9 bytes; it needs at least 32",
				       short_secret)) != NULL);
	CHECK_INT_EQ(run(&err, ty_test_strf("%s --node-secret-file '%s/none' --dispatch-key '%s'",
					    common, dir, ty_test_dispatch_key())),
		     2);
	CHECK(strstr(err, ty_test_strf("cannot read node secret file '%s/none'", dir)) != NULL);

	/* the operator's command prints what executors need, and what the harness derives */
	CHECK_INT_EQ(run(&err, ty_test_strf("--node-secret-file '%s' --print-node-key gpu-017",
					    ty_test_node_secret())),
		     0);
	REQUIRE((f = fopen(ty_test_strf("%s/run.err.out", dir), "r")) != NULL);
	CHECK(fgets(key, sizeof(key), f) != NULL);
	fclose(f);
	CHECK_STR_EQ(key, ty_test_strf("%s\n", ty_test_node_key("gpu-017")));
	CHECK_INT_EQ(run(&err, ty_test_strf("--node-secret-file '%s' --print-node-key 'bad id'",
					    ty_test_node_secret())),
		     2);
	CHECK(strstr(err, "'bad id' is not a node id") != NULL);
}
