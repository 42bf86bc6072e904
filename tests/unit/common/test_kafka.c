/* Operator Kafka properties (ty_kafka_properties_load): parsing and every refusal. */
#include "ty_kafka.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/ty_kafka_test.XXXXXX";

static const char *file_with(const char *name, const char *text)
{
	const char *path = ty_test_strf("%s/%s", dir, name);
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
	return path;
}

static void cleanup(void)
{
	char cmd[64];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		ty_test_note("could not remove %s", dir);
}

static void setup(void)
{
	static bool done;

	if (!done) {
		REQUIRE(mkdtemp(dir) != NULL);
		atexit(cleanup);
		done = true;
	}
}

TY_TEST(bad_properties_are_start_up_errors)
{
	struct {
		const char *text; /* NULL: no file */
		const char *want; /* substring of the message; %s is the file's path */
	} cases[] = {
		{NULL, "cannot read kafka properties file '%s': No such file or directory"},
		{"no.such.property = 1\n",
		 "kafka property 'no.such.property' ('%s' line 1): No such configuration property"},
		{"# TLS\nsecurity.protocol = bogus\n",
		 "kafka property 'security.protocol' ('%s' line 2): Invalid value"},
		{"\nnot a property\n", "'%s' line 2 is not 'key = value'"},
		{" = value\n", "'%s' line 1 is not 'key = value'"},
		{"bootstrap.servers = 10.0.0.1:9092\n",
		 "kafka property 'bootstrap.servers' ('%s' line 1) is set by Trainyard itself"},
		{"group.id=mine\n", "kafka property 'group.id' ('%s' line 1) is set by Trainyard"},
		{"enable.idempotence=false\n",
		 "kafka property 'enable.idempotence' ('%s' line 1) is set by Trainyard"},
		{"security.protocol=ssl\nssl.ca.location = /nonexistent/ca.pem\n",
		 "kafka property 'ssl.ca.location' ('%s' line 2): cannot read '/nonexistent/ca.pem': "
		 "No such file or directory"},
		{"security.protocol=ssl\nssl.certificate.location=/nonexistent/c.pem\n",
		 "kafka property 'ssl.certificate.location' ('%s' line 2): cannot read "
		 "'/nonexistent/c.pem'"},
	};

	setup();
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ty_err err = {0};
		const char *path = cases[i].text
					   ? file_with(ty_test_strf("p%zu.properties", i), cases[i].text)
					   : ty_test_strf("%s/missing.properties", dir);
		const char *want = ty_test_strf(cases[i].want, path);

		ty_test_context("case %zu", i);
		CHECK_INT_EQ(ty_kafka_properties_load(path, &err), TY_ECONFIG);
		if (!strstr(err.msg, want))
			FAIL("message '%s' lacks '%s'", err.msg, want);
		CHECK_INT_EQ(ty_kafka_properties_count(), 0);
	}
}

TY_TEST(tls_material_librdkafka_cannot_use_is_refused)
{
	struct ty_err err = {0};
	const char *ca, *path;

	setup();
	ca = file_with("garbage-ca.pem", "not a certificate\n");
	path = file_with("tls.properties",
			 ty_test_strf("security.protocol=ssl\nssl.ca.location=%s\n", ca));
	CHECK_INT_EQ(ty_kafka_properties_load(path, &err), TY_ECONFIG);
	if (!strstr(err.msg, ty_test_strf("kafka properties in '%s' do not make a client: "
					  "ssl.ca.location failed",
					  path)))
		FAIL("unexpected message '%s'", err.msg);
}

TY_TEST(good_properties_reach_every_client)
{
	struct ty_err err = {0};
	const char *path;
	rd_kafka_t *p = NULL, *c = NULL;
	char v[64];
	size_t sz;

	setup();
	path = file_with("ok.properties", "# operator settings\n\n"
					  "  socket.timeout.ms = 4321  \n"
					  "client.id=ops client\n"
					  "sasl.password = s3cret=with=equals\n");
	REQUIRE_INT_EQ(ty_kafka_properties_load(path, &err), 0);
	CHECK_INT_EQ(ty_kafka_properties_count(), 3);
	REQUIRE_INT_EQ(ty_kafka_producer_new(&p, "127.0.0.1:1", NULL, &err), 0);
	REQUIRE_INT_EQ(ty_kafka_consumer_new(&c, "127.0.0.1:1", "g", NULL, &err), 0);
	for (int i = 0; i < 2; i++) {
		const rd_kafka_conf_t *conf = rd_kafka_conf(i ? c : p);

		ty_test_context("%s", i ? "consumer" : "producer");
		sz = sizeof(v);
		REQUIRE(rd_kafka_conf_get(conf, "socket.timeout.ms", v, &sz) == RD_KAFKA_CONF_OK);
		CHECK_STR_EQ(v, "4321");
		sz = sizeof(v);
		REQUIRE(rd_kafka_conf_get(conf, "client.id", v, &sz) == RD_KAFKA_CONF_OK);
		CHECK_STR_EQ(v, "ops client");
		/* Trainyard's own settings still hold */
		sz = sizeof(v);
		REQUIRE(rd_kafka_conf_get(conf, "bootstrap.servers", v, &sz) == RD_KAFKA_CONF_OK);
		CHECK_STR_EQ(v, "127.0.0.1:1");
	}
	ty_test_context(NULL);
	rd_kafka_destroy(p);
	rd_kafka_destroy(c);
	/* NULL clears them */
	CHECK_INT_EQ(ty_kafka_properties_load(NULL, &err), 0);
	CHECK_INT_EQ(ty_kafka_properties_count(), 0);
}
