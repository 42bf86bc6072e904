/*
 * trainyard-rank-shim EXIT_FILE COMMAND [ARG...]: the parent of one rank.
 * It runs COMMAND as its child, records how the child ended in EXIT_FILE
 * ("exit N" or "signal S", written whole by rename), then ends the same way
 * (the same code, or killed by the same signal), so the executor above it
 * sees the rank's own end. An executor that died meanwhile learns from the
 * file after its restart whether the rank finished (docs/dispatch.md,
 * "Executor duties"). The shim blocks every signal it can: what is sent to
 * the rank's process group (the checkpoint signal, SIGTERM) is the rank's
 * to handle, and the shim outlives it. Needs only libc.
 *
 * trainyard-rank-shim --init: the init (PID 1) of an attempt's container
 * (executor/container.c). It reaps every process orphaned in the container
 * and ends on SIGTERM; when it ends, the kernel ends the container's rest.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROG "trainyard-rank-shim"

static int record(const char *path, const char *text)
{
	char tmp[4096];
	int fd, ok;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return -1;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	ok = !close(fd) && ok;
	return ok && !rename(tmp, path) ? 0 : -1;
}

static int init_main(void)
{
	sigset_t want;
	int sig;

	sigemptyset(&want);
	sigaddset(&want, SIGCHLD);
	sigaddset(&want, SIGTERM);
	sigaddset(&want, SIGINT);
	sigprocmask(SIG_BLOCK, &want, NULL);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (sigwait(&want, &sig) == 0 && sig != SIGCHLD)
			return 0;
	}
}

int main(int argc, char **argv)
{
	sigset_t all, old;
	char text[32];
	int status;
	pid_t pid;

	if (argc == 2 && !strcmp(argv[1], "--init"))
		return init_main();
	if (argc < 3) {
		fprintf(stderr, "usage: " PROG " EXIT_FILE COMMAND [ARG...] | --init\n");
		return 127;
	}
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	if ((pid = fork()) < 0) {
		fprintf(stderr, PROG ": cannot fork: %s\n", strerror(errno));
		return 127;
	}
	if (pid == 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		execvp(argv[2], argv + 2);
		fprintf(stderr, PROG ": cannot run '%s': %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			fprintf(stderr, PROG ": cannot wait for '%s': %s\n", argv[2],
				strerror(errno));
			return 127;
		}
	if (WIFSIGNALED(status))
		snprintf(text, sizeof(text), "signal %d\n", WTERMSIG(status));
	else
		snprintf(text, sizeof(text), "exit %d\n", WEXITSTATUS(status));
	if (record(argv[1], text))
		fprintf(stderr, PROG ": cannot write '%s': %s\n", argv[1], strerror(errno));
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);
		sigset_t one;

		prctl(PR_SET_DUMPABLE, 0); /* the rank dumped its core, if any: not twice */
		signal(sig, SIG_DFL);
		sigemptyset(&one);
		sigaddset(&one, sig);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		raise(sig);
		return 128 + sig; /* a signal that does not end a process */
	}
	return WEXITSTATUS(status);
}
