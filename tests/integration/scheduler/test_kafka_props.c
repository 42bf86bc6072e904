/*
 * --kafka-properties-file: the operator's librdkafka properties reach the
 * scheduler's Kafka clients (it still dispatches through the real broker),
 * and a bad file stops it at start-up with a message naming the property.
 */
#include "fixture.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define T 15000

static const char *props_file(const char *name, const char *text)
{
	const char *path = ty_test_strf("%s/%s", ty_test_workdir(), name);
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
	return path;
}

TY_TEST(properties_reach_the_clients_and_it_still_dispatches)
{
	struct fx *f = fx_start();
	const char *path = props_file("ok.properties", "# operator settings\n"
						       "client.id = trainyard-ops-test\n"
						       "socket.keepalive.enable = true\n"
						       "security.protocol = plaintext\n");
	const char *extra[] = {"--kafka-properties-file", path, NULL};
	long long job;

	fx_node(f, "n1", 4);
	fx_sched_start(f, "s1", extra);
	FX_WAIT(f, T, "1", "SELECT count(*) FROM nodes WHERE state = 'ready'");
	job = fx_submit(f, ",'resources':{'gpus_per_node':2}");
	REQUIRE(fx_recv(f, "n1", "launch", job, T) != NULL);
}

TY_TEST(a_bad_file_is_a_start_up_error)
{
	const char *bin = getenv("TY_SCHEDULER_BIN");
	struct {
		const char *text;
		const char *want; /* %s: the file */
	} cases[] = {
		{"security.protocol = tls\n",
		 "kafka property 'security.protocol' ('%s' line 1): Invalid value"},
		{"security.protocol = ssl\nssl.ca.location = /nonexistent/kafka-ca.pem\n",
		 "kafka property 'ssl.ca.location' ('%s' line 2): cannot read "
		 "'/nonexistent/kafka-ca.pem'"},
		{"group.id = other\n", "kafka property 'group.id' ('%s' line 1) is set by Trainyard"},
	};

	REQUIRE(bin != NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *path = props_file(ty_test_strf("bad%zu.properties", i), cases[i].text);
		const char *out = ty_test_strf("%s/bad%zu.out", ty_test_workdir(), i);
		char *argv[] = {(char *)bin,
				"--database-url",
				"postgresql://127.0.0.1:1/none",
				"--kafka-bootstrap",
				"127.0.0.1:1",
				"--kafka-properties-file",
				(char *)path,
				"--dispatch-key",
				(char *)ty_test_dispatch_key(),
				"--node-secret-file",
				(char *)ty_test_node_secret(),
				NULL};
		char text[4096] = "";
		int status = 0, fd;
		pid_t pid;
		FILE *fp;

		ty_test_context("case %zu", i);
		fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		REQUIRE(fd >= 0);
		pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			execv(bin, argv);
			_exit(127);
		}
		close(fd);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		fp = fopen(out, "r");
		REQUIRE(fp != NULL);
		text[fread(text, 1, sizeof(text) - 1, fp)] = '\0';
		fclose(fp);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 0);
		if (!strstr(text, ty_test_strf(cases[i].want, path)))
			FAIL("the output does not say \"%s\":\n%s", ty_test_strf(cases[i].want, path),
			     text);
	}
}
