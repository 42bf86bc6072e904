/*
 * Spawn cost with a large parent: /bin/true started and waited for N times
 * by fork + exec and by posix_spawn (what the executor uses for ranks),
 * from a process holding --rss-mib of touched memory. Prints one line:
 * "spawn with a 1024 MiB parent: fork X us, posix_spawn Y us, ratio R".
 *   spawn_bench [RSS_MIB [N]]   (default 1024 and 200)
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static char *const argv_true[] = {"/bin/true", NULL};

static int by_fork(void)
{
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		execv(argv_true[0], argv_true);
		_exit(127);
	}
	return waitpid(pid, NULL, 0) == pid ? 0 : -1;
}

static int by_spawn(void)
{
	pid_t pid;

	if (posix_spawn(&pid, argv_true[0], NULL, NULL, argv_true, environ))
		return -1;
	return waitpid(pid, NULL, 0) == pid ? 0 : -1;
}

static double mean_us(int (*fn)(void), int n)
{
	double t0 = now_us();

	for (int i = 0; i < n; i++)
		if (fn()) {
			perror("spawn_bench");
			exit(1);
		}
	return (now_us() - t0) / n;
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? atol(argv[1]) : 1024;
	int n = argc > 2 ? atoi(argv[2]) : 200;
	size_t len = (size_t)mib << 20;
	char *mem;
	double f, s;

	if (mib < 0 || n < 1 || !(mem = malloc(len ? len : 1))) {
		fprintf(stderr, "usage: spawn_bench [RSS_MIB [N]]\n");
		return 2;
	}
	memset(mem, 1, len); /* resident: fork copies its page tables */
	f = mean_us(by_fork, n);
	s = mean_us(by_spawn, n);
	printf("spawn with a %ld MiB parent: fork %.0f us, posix_spawn %.0f us, ratio %.1f\n", mib, f,
	       s, f / s);
	free(mem);
	return 0;
}
