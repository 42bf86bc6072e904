/* executor/state.c: the finished ring and state.json. */
#include "exec.h"
#include "ty_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *scratch_dir(void)
{
	char *dir = ty_test_strf("/tmp/ty-test-exec-state-XXXXXX");

	REQUIRE(mkdtemp(dir) != NULL);
	return dir;
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	REQUIRE(f != NULL);
	fputs(text, f);
	fclose(f);
}

static const char *read_file_text(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = ty_test_alloc(65536);

	REQUIRE(f != NULL);
	s[fread(s, 1, 65535, f)] = '\0';
	fclose(f);
	return s;
}

static void cleanup(const char *dir)
{
	char *cmd = ty_test_strf("rm -rf '%s'", dir);

	if (system(cmd) != 0)
		FAIL("cannot remove '%s'", dir);
}

static struct exec_finished fin(int64_t job, int code, const char *cls, const char *msg)
{
	struct exec_finished f = {.job = job, .attempt = 1, .exit_code = code};

	snprintf(f.failure_class, sizeof(f.failure_class), "%s", cls);
	snprintf(f.message, sizeof(f.message), "%s", msg);
	return f;
}

TY_TEST(finished_ring_keeps_the_last_256)
{
	struct exec_finished_ring *r = calloc(1, sizeof(*r));
	json_t *a;

	REQUIRE(r != NULL);
	for (int64_t j = 1; j <= 300; j++) {
		struct exec_finished f = fin(j, (int)j % 7, "user", "m");

		exec_finished_add(r, &f);
	}
	CHECK_INT_EQ(r->n, EXEC_FINISHED_MAX);
	CHECK_INT_EQ(exec_finished_at(r, 0)->job, 300 - EXEC_FINISHED_MAX + 1);
	CHECK_INT_EQ(exec_finished_at(r, EXEC_FINISHED_MAX - 1)->job, 300);
	CHECK(exec_finished_at(r, EXEC_FINISHED_MAX) == NULL);
	CHECK(exec_finished_find(r, 44, 1) == NULL);
	CHECK(exec_finished_find(r, 45, 1) != NULL);
	CHECK(exec_finished_find(r, 45, 2) == NULL);
	a = exec_finished_json(r);
	REQUIRE(a != NULL);
	CHECK_INT_EQ(json_array_size(a), EXEC_FINISHED_MAX);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(a, 0), "job")), 45);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_array_get(a, 0), "exit_code")),
		     45 % 7);
	json_decref(a);
	free(r);
}

TY_TEST(state_round_trip)
{
	const char *dir = scratch_dir(), *path = ty_test_strf("%s/state.json", dir);
	struct exec_finished_ring *r = calloc(1, sizeof(*r));
	struct exec_state *s = calloc(1, sizeof(*s));
	pid_t pg1[] = {4242, 4243}, pg2[] = {777};
	struct exec_running run[] = {{10, 1, 2, pg1}, {11, 3, 1, pg2}};
	struct exec_finished a = fin(5, 0, "", "all 2 local rank(s) exited with code 0"),
			     b = fin(6, 3, "user", "rank 1 exited with code 3 \"quoted\"");
	struct ty_err err = {0};

	REQUIRE(r && s);
	snprintf(b.evidence, sizeof(b.evidence), "rank 1: Traceback (most recent call last):");
	b.log_only = true;
	exec_finished_add(r, &a);
	exec_finished_add(r, &b);
	REQUIRE_INT_EQ(exec_state_write(path, "node-1", 9, 41, run, 2, r, &err), 0);
	CHECK(access(ty_test_strf("%s.tmp", path), F_OK) != 0);
	REQUIRE_INT_EQ(exec_state_read(s, path, &err), 0);
	CHECK_INT_EQ(s->epoch, 9);
	CHECK_INT_EQ(s->seq, 41);
	REQUIRE_INT_EQ(s->nrunning, 2);
	CHECK_INT_EQ(s->running[0].job, 10);
	CHECK_INT_EQ(s->running[0].attempt, 1);
	REQUIRE_INT_EQ(s->running[0].npgids, 2);
	CHECK_INT_EQ(s->running[0].pgids[1], 4243);
	CHECK_INT_EQ(s->running[1].attempt, 3);
	CHECK_INT_EQ(s->running[1].pgids[0], 777);
	REQUIRE_INT_EQ(s->finished.n, 2);
	CHECK_STR_EQ(exec_finished_at(&s->finished, 1)->message, b.message);
	CHECK_STR_EQ(exec_finished_at(&s->finished, 1)->failure_class, "user");
	CHECK_INT_EQ(exec_finished_at(&s->finished, 1)->exit_code, 3);
	CHECK_STR_EQ(exec_finished_at(&s->finished, 0)->failure_class, "");
	CHECK_STR_EQ(exec_finished_at(&s->finished, 1)->evidence, b.evidence);
	CHECK_STR_EQ(exec_finished_at(&s->finished, 0)->evidence, ""); /* absent in the file */
	CHECK(strstr(read_file_text(path), "\"evidence\"") != NULL);
	/* who saw the evidence survives a restart; success has no source */
	CHECK(exec_finished_at(&s->finished, 1)->log_only);
	CHECK(!exec_finished_at(&s->finished, 0)->log_only);
	CHECK(strstr(read_file_text(path), "\"evidence_source\":\"log\"") != NULL ||
	      strstr(read_file_text(path), "\"evidence_source\": \"log\"") != NULL);

	/* an empty state writes and reads too */
	REQUIRE_INT_EQ(exec_state_write(path, "node-1", 0, 0, NULL, 0, &s->finished, &err), 0);
	REQUIRE_INT_EQ(exec_state_read(s, path, &err), 0);
	CHECK_INT_EQ(s->nrunning, 0);
	CHECK_INT_EQ(s->finished.n, 2);
	exec_state_clear(s);
	free(s);
	free(r);
	cleanup(dir);
}

TY_TEST(state_read_errors)
{
	static const struct {
		const char *text;
		const char *err;
	} rows[] = {
	    {"not json", "is not JSON"},
	    {"{'v':2,'epoch':1,'running':[],'finished':[]}", "version 1"},
	    {"{'v':1,'running':[],'finished':[]}", "epoch"},
	    {"{'v':1,'epoch':1,'running':{},'finished':[]}", "'running' is not an array"},
	    {"{'v':1,'epoch':1,'running':[{'job':1,'attempt':1,'pgids':[1]}],'finished':[]}",
	     "bad pgid"},
	    {"{'v':1,'epoch':1,'running':[{'job':1,'attempt':1,'pgids':[-5]}],'finished':[]}",
	     "bad pgid"},
	    {"{'v':1,'epoch':1,'running':[{'job':1,'pgids':[]}],'finished':[]}", "running entry 0"},
	    {"{'v':1,'epoch':1,'running':[],'finished':[{'job':1}]}", "finished entry 0"},
	};
	const char *dir = scratch_dir(), *path = ty_test_strf("%s/state.json", dir);
	struct exec_state s = {0};
	struct ty_err err = {0};

	CHECK_INT_EQ(exec_state_read(&s, path, &err), TY_ENOTFOUND);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		ty_test_context("%s", rows[i].text);
		write_file(path, ty_test_jf("%s", rows[i].text));
		ty_err_clear(&err);
		CHECK_INT_EQ(exec_state_read(&s, path, &err), TY_EPARSE);
		CHECK_INT_EQ(s.nrunning, 0);
		if (!strstr(err.msg, rows[i].err))
			FAIL("message '%s' lacks '%s'", err.msg, rows[i].err);
	}
	exec_state_clear(&s);
	cleanup(dir);
}
