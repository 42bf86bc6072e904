/* executor/proc.c: process groups as /proc shows them. */
#include "exec.h"
#include "ty_test.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child in a session of its own running `sleep 30` under a small shell. */
static pid_t spawn_group(const char *job, const char *attempt)
{
	pid_t pid = fork();

	REQUIRE(pid >= 0);
	if (pid == 0) {
		char *const argv[] = {"/bin/sh", "-c", "sleep 30 & wait", NULL};
		char *const envp[] = {(char *)job, (char *)attempt, "PATH=/usr/bin:/bin", NULL};

		setsid();
		execve("/bin/sh", argv, envp);
		_exit(127);
	}
	return pid;
}

static void wait_live(pid_t pgid, int want)
{
	for (int i = 0; i < 500 && exec_pgid_live(pgid) != want; i++)
		usleep(10000);
	CHECK_INT_EQ(exec_pgid_live(pgid), want);
}

TY_TEST(pgid_members_and_owner)
{
	pid_t pid = spawn_group("TRAINYARD_JOB_ID=5", "TRAINYARD_ATTEMPT=2");

	wait_live(pid, 2); /* the shell and its sleep */
	CHECK(exec_pgid_is_attempt(pid, 5, 2));
	CHECK(!exec_pgid_is_attempt(pid, 5, 3));
	CHECK(!exec_pgid_is_attempt(pid, 55, 2));
	CHECK(!exec_pgid_is_attempt(getpgrp(), 5, 2));
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* the sleep is reparented and reaped elsewhere; it must at least be dead */
	wait_live(pid, 0);
	CHECK(!exec_pgid_is_attempt(pid, 5, 2));
}

TY_TEST(pgid_of_nothing)
{
	CHECK_INT_EQ(exec_pgid_live(0x7ffffff0), 0);
	CHECK(!exec_pgid_is_attempt(0x7ffffff0, 1, 1));
}
