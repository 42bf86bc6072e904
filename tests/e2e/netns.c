/* Network namespaces for end-to-end tests: see netns.h. */
#include "netns.h"
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NETNS_DIR "/run/netns"
#define MAX_PORTS 64
#define RELAY_PAIRS 256
#define RELAY_BUF 16384
#define SUBNET_TRIES 50

/* ---- pure ---- */

/* snprintf that reports truncation as failure */
#define FMT(buf, ...) (snprintf((buf), sizeof(buf), __VA_ARGS__) >= (int)sizeof(buf))

int netns_plan_make(struct netns_plan *p, long pid, int n, unsigned x, unsigned y)
{
	bool bad;

	memset(p, 0, sizeof(*p));
	if (n < 1 || n > NETNS_MAX || x < 1 || x > 254 || y > 255 || pid < 1)
		return -1;
	p->n = n;
	/* interface names: at most 15 characters (IFNAMSIZ) */
	bad = FMT(p->bridge, "tyb%ld", pid) || FMT(p->gateway, "10.%u.%u.1", x, y);
	for (int i = 0; i < n; i++)
		bad = bad || FMT(p->veth[i], "tyv%ldh%d", pid, i) ||
		      FMT(p->ns[i], "ty%ldn%d", pid, i) ||
		      FMT(p->addr[i], "10.%u.%u.%d", x, y, i + 2);
	if (bad)
		memset(p, 0, sizeof(*p));
	return bad ? -1 : 0;
}

/* Digits at *s (advanced past them) as a number; -1 for none or too many. */
static long digits(const char **s)
{
	long v = 0;
	int n = 0;

	while (isdigit((unsigned char)**s) && n < 10) {
		v = v * 10 + (**s - '0');
		(*s)++;
		n++;
	}
	return n == 0 || isdigit((unsigned char)**s) ? -1 : v;
}

long netns_owner(const char *name)
{
	const char *s = name;
	long pid;
	char kind;

	if (strncmp(s, "ty", 2))
		return 0;
	s += 2;
	kind = *s;
	if (kind == 'b' || kind == 'v')
		s++;
	if (*s == '0' || (pid = digits(&s)) < 1)
		return 0;
	if (kind == 'b')
		return *s ? 0 : pid;
	if (*s != (kind == 'v' ? 'h' : 'n'))
		return 0;
	s++;
	return digits(&s) >= 0 && !*s ? pid : 0;
}

bool netns_subnet_free(unsigned x, unsigned y, const struct netns_prefix *used, size_t n)
{
	const uint32_t net = (10u << 24) | (x << 16) | (y << 8), mask = 0xffffff00u;

	for (size_t i = 0; i < n; i++) {
		uint32_t m = used[i].mask & mask; /* the shorter of the two prefixes */

		if (used[i].mask && (used[i].net & m) == (net & m))
			return false;
	}
	return true;
}

int netns_loopback_ports(const char *list, int *ports, int max)
{
	const char *s = list;
	int n = 0;

	for (;;) {
		long port;

		if (strncmp(s, "127.0.0.1:", 10))
			return -1;
		s += 10;
		if ((port = digits(&s)) < 1 || port > 65535 || n == max)
			return -1;
		ports[n++] = (int)port;
		if (!*s)
			return n;
		if (*s++ != ',')
			return -1;
	}
}

const char *netns_preflight(unsigned euid, const char *ip_path)
{
	if (euid != 0)
		return "the network namespace tests must run as root: they create a bridge, veth "
		       "pairs and network namespaces";
	if (!ip_path)
		return "the network namespace tests need iproute2's 'ip' (apt-get install "
		       "iproute2): it is not in /usr/sbin, /sbin, /usr/bin, /bin or PATH";
	return NULL;
}

/* ---- running ip ---- */

static struct netns_plan plan;
static bool is_up;
static pid_t owner; /* the process that set up (children must not tear down) */
static char ip_path[256];
static pid_t relay_pid;
static int relay_ctl = -1; /* write end: one byte (i << 1 | cut) per netns_partition */
/* the teardown as one shell script, built once so a signal handler can run it */
static char down_script[4096];
static const char *prefix[NETNS_MAX][5];

static const char *find_ip(void)
{
	static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
	const char *path = getenv("PATH");

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(ip_path, sizeof(ip_path), "%s/ip", dirs[i]);
		if (access(ip_path, X_OK) == 0)
			return ip_path;
	}
	while (path && *path) {
		size_t len = strcspn(path, ":");

		snprintf(ip_path, sizeof(ip_path), "%.*s/ip", (int)len, path);
		if (len && access(ip_path, X_OK) == 0)
			return ip_path;
		path += len + (path[len] == ':');
	}
	ip_path[0] = '\0';
	return NULL;
}

/* Async-signal-safe: run argv (ip ...) with output to /dev/null and wait. */
static int run_quiet(char *const *argv)
{
	pid_t pid = fork();
	int status = -1;

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid < 0)
		return -1;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

static int run_sh(const char *script)
{
	return run_quiet((char *const[]){"/bin/sh", "-c", (char *)script, NULL});
}

/*
 * Shell text that removes namespace ns and first SIGKILLs whatever still
 * runs in it (ranks orphaned by a killed executor would keep it alive).
 */
static const char *ns_del(char *buf, size_t n, const char *ns)
{
	if (snprintf(buf, n, "for p in $(%s netns pids %s); do kill -9 $p; done; %s netns del %s; ",
		     ip_path, ns, ip_path, ns) >= (int)n)
		buf[0] = '\0'; /* cannot happen: names are short */
	return buf;
}

/*
 * `ip ARGS...` (NULL-terminated); on failure fails the case with the
 * command and what ip said, and returns -1.
 */
static int ip(const char *arg, ...)
{
	const char *argv[16] = {ip_path, arg};
	char out[1024] = "", cmd[512] = "ip";
	int n = 2, pipefd[2], status = 0;
	size_t got = 0;
	ssize_t r;
	pid_t pid;
	va_list ap;

	va_start(ap, arg);
	while (n < 15 && (argv[n] = va_arg(ap, const char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	for (int i = 1; i < n; i++)
		snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " %s", argv[i]);
	if (pipe2(pipefd, O_CLOEXEC)) {
		FAIL("pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	if ((pid = fork()) == 0) {
		int null = open("/dev/null", O_RDONLY);

		dup2(null, 0);
		dup2(pipefd[1], 1);
		dup2(pipefd[1], 2);
		execv(argv[0], (char *const *)argv);
		dprintf(2, "cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	while ((r = read(pipefd[0], out + got, sizeof(out) - 1 - got)) > 0 ||
	       (r < 0 && errno == EINTR))
		if (r > 0)
			got += (size_t)r;
	close(pipefd[0]);
	out[got] = '\0';
	if (pid < 0) {
		FAIL("fork: %s", strerror(errno));
		return -1;
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	out[strcspn(out, "\n")] = '\0';
	FAIL("'%s' failed (status %d): %s", cmd, status, out);
	return -1;
}

/* ---- what the machine has ---- */

/* IPv4 routes of the main table and interface addresses, at most max. */
static size_t used_prefixes(struct netns_prefix *used, size_t max)
{
	FILE *f = fopen("/proc/net/route", "r");
	struct ifaddrs *ifa = NULL;
	char line[512];
	size_t n = 0;

	if (f) {
		while (fgets(line, sizeof(line), f) && n < max) {
			char ifname[64];
			unsigned dest, gw, flags, refcnt, use, metric, mask;

			/* "Iface Destination Gateway Flags RefCnt Use Metric Mask ...", hex in
			 * network byte order; the header line does not scan */
			if (sscanf(line, "%63s %x %x %x %u %u %u %x", ifname, &dest, &gw, &flags,
				   &refcnt, &use, &metric, &mask) == 8)
				used[n++] = (struct netns_prefix){ntohl(dest), ntohl(mask)};
		}
		fclose(f);
	}
	if (getifaddrs(&ifa) == 0) {
		for (struct ifaddrs *a = ifa; a && n < max; a = a->ifa_next)
			if (a->ifa_addr && a->ifa_addr->sa_family == AF_INET && a->ifa_netmask)
				used[n++] = (struct netns_prefix){
				    ntohl(((struct sockaddr_in *)a->ifa_addr)->sin_addr.s_addr),
				    ntohl(((struct sockaddr_in *)a->ifa_netmask)->sin_addr.s_addr)};
		freeifaddrs(ifa);
	}
	return n;
}

/* How many routes of the main table are exactly 10.x.y.0/24. */
static int routes_to(unsigned x, unsigned y)
{
	struct netns_prefix used[512];
	size_t n = used_prefixes(used, 512);
	uint32_t net = (10u << 24) | (x << 16) | (y << 8);
	int count = 0;

	/* interface addresses come after the routes: count /24 routes, not our address */
	for (size_t i = 0; i < n; i++)
		if (used[i].net == net && used[i].mask == 0xffffff00u)
			count++;
	return count;
}

static bool alive(long pid)
{
	return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

const char *netns_leftovers(long pid)
{
	const char *out = "";
	struct if_nameindex *ifs = if_nameindex();
	DIR *d = opendir(NETNS_DIR);
	struct dirent *e;

	for (struct if_nameindex *i = ifs; i && i->if_index; i++)
		if (netns_owner(i->if_name) == pid)
			out = ty_test_strf("%s%s%s", out, *out ? " " : "", i->if_name);
	if (ifs)
		if_freenameindex(ifs);
	while (d && (e = readdir(d)))
		if (netns_owner(e->d_name) == pid)
			out = ty_test_strf("%s%s%s", out, *out ? " " : "", e->d_name);
	if (d)
		closedir(d);
	return out;
}

/* Fails and ends the case unless this process can set namespaces up. */
static void need_root_and_ip(void)
{
	const char *why = netns_preflight((unsigned)geteuid(), ip_path[0] ? ip_path : find_ip());

	if (why) {
		FAIL("%s", why);
		ty_test_abort();
	}
}

void netns_sweep_dead(void)
{
	struct if_nameindex *ifs;
	DIR *d;
	struct dirent *e;

	need_root_and_ip();
	ifs = if_nameindex();
	d = opendir(NETNS_DIR);
	/* veth ends first (each takes its peer along), then bridges */
	for (int pass = 0; pass < 2; pass++)
		for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
			long pid = netns_owner(i->if_name);

			if (pid && !alive(pid) && (i->if_name[2] == 'v') == (pass == 0)) {
				ty_test_note("removing interface %s left by dead process %ld",
					     i->if_name, pid);
				run_quiet(
				    (char *const[]){ip_path, "link", "del", i->if_name, NULL});
			}
		}
	if (ifs)
		if_freenameindex(ifs);
	while (d && (e = readdir(d))) {
		long pid = netns_owner(e->d_name);

		if (pid && !alive(pid)) {
			char buf[512];

			ty_test_note("removing namespace %s left by dead process %ld", e->d_name,
				     pid);
			run_sh(ns_del(buf, sizeof(buf), e->d_name));
		}
	}
	if (d)
		closedir(d);
}

/* ---- teardown ---- */

/* The teardown of plan: the veth pairs, the bridge, then the namespaces. */
static void down_script_make(void)
{
	char buf[512];
	size_t len = 0;

	down_script[0] = '\0';
	for (int i = 0; i < plan.n; i++)
		len += (size_t)snprintf(down_script + len, sizeof(down_script) - len,
					"%s link del %s; ", ip_path, plan.veth[i]);
	len += (size_t)snprintf(down_script + len, sizeof(down_script) - len, "%s link del %s; ",
				ip_path, plan.bridge);
	for (int i = 0; i < plan.n; i++)
		len += (size_t)snprintf(down_script + len, sizeof(down_script) - len, "%s",
					ns_del(buf, sizeof(buf), plan.ns[i]));
}

/* Async-signal-safe. */
static void down_now(void)
{
	if (!is_up || getpid() != owner)
		return;
	is_up = false;
	if (relay_pid > 0) {
		kill(relay_pid, SIGKILL);
		while (waitpid(relay_pid, NULL, 0) < 0 && errno == EINTR)
			;
		relay_pid = 0;
	}
	if (relay_ctl >= 0) {
		close(relay_ctl);
		relay_ctl = -1;
	}
	run_sh(down_script);
}

static void on_signal(int sig)
{
	down_now();
	signal(sig, SIG_DFL);
	raise(sig);
}

void netns_down(void)
{
	if (is_up && relay_pid > 0) {
		int status;

		/* the relay never ends by itself: if it did, it crashed */
		if (waitpid(relay_pid, &status, WNOHANG) == relay_pid) {
			FAIL("the loopback relay ended early (status %d)", status);
			relay_pid = 0;
		}
	}
	down_now();
}

static void teardown_hook(void)
{
	const char *left;

	netns_down();
	if (*(left = netns_leftovers(getpid())))
		FAIL("network namespace set-up left behind: %s", left);
}

static void teardown_atexit(void)
{
	down_now();
}

/* ---- set-up ---- */

static void pick_subnet(unsigned *x, unsigned *y)
{
	struct netns_prefix used[512];
	size_t n = used_prefixes(used, 512);

	for (int t = 0; t < 1000; t++) {
		*x = 100 + (unsigned)(rand() % 155);
		*y = (unsigned)(rand() % 256);
		if (netns_subnet_free(*x, *y, used, n))
			return;
	}
	FAIL("no free 10.x.y.0/24 found among 1000 random ones");
	ty_test_abort();
}

static int build(void)
{
	if (ip("link", "add", plan.bridge, "type", "bridge", NULL) ||
	    ip("addr", "add", ty_test_strf("%s/24", plan.gateway), "dev", plan.bridge, NULL) ||
	    ip("link", "set", plan.bridge, "up", NULL))
		return -1;
	for (int i = 0; i < plan.n; i++) {
		const char *ns = plan.ns[i];

		if (ip("netns", "add", ns, NULL) ||
		    ip("link", "add", plan.veth[i], "type", "veth", "peer", "name", NETNS_IFNAME,
		       "netns", ns, NULL) ||
		    ip("link", "set", plan.veth[i], "master", plan.bridge, "up", NULL) ||
		    ip("-n", ns, "addr", "add", ty_test_strf("%s/24", plan.addr[i]), "dev",
		       NETNS_IFNAME, NULL) ||
		    ip("-n", ns, "link", "set", NETNS_IFNAME, "up", NULL) ||
		    ip("-n", ns, "link", "set", "lo", "up", NULL))
			return -1;
	}
	return 0;
}

const struct netns_plan *netns_up(int n)
{
	unsigned x, y;

	if (is_up) {
		REQUIRE_INT_EQ(n, plan.n);
		return &plan;
	}
	need_root_and_ip();
	/* the harness's teardown (which stops the executors) must run before ours */
	ty_test_workdir();
	netns_sweep_dead();
	srand((unsigned)getpid() ^ (unsigned)time(NULL));
	for (int tries = 0;; tries++) {
		pick_subnet(&x, &y);
		REQUIRE(netns_plan_make(&plan, (long)getpid(), n, x, y) == 0);
		owner = getpid();
		down_script_make();
		is_up = true;
		if (tries == 0) {
			atexit(teardown_atexit);
			ty_test_on(TY_TEST_TEARDOWN, teardown_hook);
			signal(SIGTERM, on_signal);
			signal(SIGINT, on_signal);
			signal(SIGHUP, on_signal);
		}
		if (build()) {
			down_now();
			ty_test_abort();
		}
		/* another program may have picked the same /24 at the same moment */
		if (routes_to(x, y) == 1)
			break;
		ty_test_note("10.%u.%u.0/24 is taken twice: trying another", x, y);
		down_now();
		if (tries == SUBNET_TRIES) {
			FAIL("no /24 of our own after %d tries", SUBNET_TRIES);
			ty_test_abort();
		}
	}
	for (int i = 0; i < n; i++) {
		prefix[i][0] = ip_path;
		prefix[i][1] = "netns";
		prefix[i][2] = "exec";
		prefix[i][3] = plan.ns[i];
		prefix[i][4] = NULL;
	}
	ty_test_note("namespaces %s..%s on bridge %s (%s/24)", plan.ns[0], plan.ns[n - 1],
		     plan.bridge, plan.gateway);
	return &plan;
}

const char *const *netns_exec_prefix(int i)
{
	if (!is_up || i < 0 || i >= plan.n) {
		FAIL("netns_exec_prefix(%d): no such namespace (call netns_up first)", i);
		ty_test_abort();
	}
	return prefix[i];
}

/* ---- the loopback relay ---- */

struct pair {
	int ns;			/* the namespace of fd[0] */
	int fd[2];		/* [0] accepted in a namespace, [1] to the broker */
	char buf[2][RELAY_BUF]; /* buf[d]: read from fd[d], to be written to fd[!d] */
	size_t len[2], off[2];
	bool eof[2];
};

struct relay {
	int nlisten;
	int listen_fd[NETNS_MAX * MAX_PORTS];
	int listen_port[NETNS_MAX * MAX_PORTS];
	int listen_ns[NETNS_MAX * MAX_PORTS];
	struct pair pairs[RELAY_PAIRS];
	int ctl_fd;		/* read end of relay_ctl */
	bool cut[NETNS_MAX];	/* partitioned: nothing moves for that namespace */
	struct pollfd pfd[NETNS_MAX * MAX_PORTS + 2 * RELAY_PAIRS + 1];
};

static void pair_close(struct pair *p)
{
	close(p->fd[0]);
	close(p->fd[1]);
	memset(p, 0, sizeof(*p));
	p->fd[0] = p->fd[1] = -1;
}

static void relay_accept(struct relay *r, int fd, int port, int ns)
{
	struct sockaddr_in to = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int in = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), out;
	struct pair *p = NULL;

	if (in < 0)
		return;
	for (int i = 0; i < RELAY_PAIRS && !p; i++)
		if (r->pairs[i].fd[0] < 0)
			p = &r->pairs[i];
	/* a loopback connect completes (or is refused) at once */
	out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (!p || out < 0 || connect(out, (struct sockaddr *)&to, sizeof(to))) {
		dprintf(2, "netns relay: cannot relay a connection to 127.0.0.1:%d: %s\n", port,
			!p ? "too many connections" : strerror(errno));
		close(in);
		if (out >= 0)
			close(out);
		return;
	}
	fcntl(out, F_SETFL, fcntl(out, F_GETFL) | O_NONBLOCK);
	p->ns = ns;
	p->fd[0] = in;
	p->fd[1] = out;
}

/* Move what can be moved on p; false when it is done with. */
static bool pair_step(struct pair *p, const short *rev)
{
	if ((rev[0] | rev[1]) & (POLLERR | POLLNVAL))
		return false;
	for (int d = 0; d < 2; d++) {
		if ((rev[d] & (POLLIN | POLLHUP)) && !p->eof[d] && p->len[d] == 0) {
			ssize_t n = read(p->fd[d], p->buf[d], RELAY_BUF);

			if (n > 0) {
				p->len[d] = (size_t)n;
				p->off[d] = 0;
			} else if (n == 0) {
				p->eof[d] = true;
			} else if (errno != EAGAIN && errno != EINTR) {
				return false;
			}
		}
		if (p->off[d] < p->len[d]) {
			ssize_t n = write(p->fd[!d], p->buf[d] + p->off[d], p->len[d] - p->off[d]);

			if (n < 0 && errno != EAGAIN && errno != EINTR)
				return false;
			if (n > 0 && (p->off[d] += (size_t)n) == p->len[d])
				p->len[d] = p->off[d] = 0;
		}
		if (p->eof[d] && p->len[d] == 0)
			shutdown(p->fd[!d], SHUT_WR);
	}
	return !(p->eof[0] && p->eof[1] && !p->len[0] && !p->len[1]);
}

static _Noreturn void relay_run(struct relay *r)
{
	for (;;) {
		int n = 0, slot[RELAY_PAIRS][2], lslot[NETNS_MAX * MAX_PORTS], cslot = -1;

		/* a cut namespace's connections and new ones wait, as over a dead link */
		for (int i = 0; i < r->nlisten; i++) {
			lslot[i] = -1;
			if (!r->cut[r->listen_ns[i]]) {
				lslot[i] = n;
				r->pfd[n++] = (struct pollfd){r->listen_fd[i], POLLIN, 0};
			}
		}
		if (r->ctl_fd >= 0) {
			cslot = n;
			r->pfd[n++] = (struct pollfd){r->ctl_fd, POLLIN, 0};
		}
		for (int i = 0; i < RELAY_PAIRS; i++) {
			struct pair *p = &r->pairs[i];

			slot[i][0] = slot[i][1] = -1;
			if (p->fd[0] < 0 || r->cut[p->ns])
				continue;
			for (int d = 0; d < 2; d++) {
				short ev = 0;

				if (!p->eof[d] && p->len[d] == 0)
					ev |= POLLIN;
				if (p->off[!d] < p->len[!d])
					ev |= POLLOUT;
				slot[i][d] = n;
				r->pfd[n++] = (struct pollfd){p->fd[d], ev, 0};
			}
		}
		if (poll(r->pfd, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			dprintf(2, "netns relay: poll: %s\n", strerror(errno));
			_exit(1);
		}
		for (int i = 0; i < RELAY_PAIRS; i++) {
			struct pair *p = &r->pairs[i];
			short rev[2];

			if (p->fd[0] < 0 || slot[i][0] < 0)
				continue;
			rev[0] = r->pfd[slot[i][0]].revents;
			rev[1] = r->pfd[slot[i][1]].revents;
			if ((rev[0] | rev[1]) && !pair_step(p, rev))
				pair_close(p);
		}
		for (int i = 0; i < r->nlisten; i++)
			if (lslot[i] >= 0 && (r->pfd[lslot[i]].revents & POLLIN))
				relay_accept(r, r->listen_fd[i], r->listen_port[i],
					     r->listen_ns[i]);
		if (cslot >= 0 && (r->pfd[cslot].revents & (POLLIN | POLLHUP))) {
			unsigned char cmd[64];
			ssize_t got = read(r->ctl_fd, cmd, sizeof(cmd));

			if (got == 0) /* the test program is gone */
				_exit(0);
			for (ssize_t k = 0; k < got; k++)
				if ((cmd[k] >> 1) < NETNS_MAX)
					r->cut[cmd[k] >> 1] = cmd[k] & 1;
		}
	}
}

/* In the child: listen on 127.0.0.1:port in every namespace; NULL or the error. */
static const char *relay_listen(struct relay *r, const int *ports, int nports, char *err,
				size_t errsz)
{
	int root = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);

	if (root < 0)
		return snprintf(err, errsz, "open /proc/self/ns/net: %s", strerror(errno)), err;
	for (int i = 0; i < plan.n; i++) {
		char path[64];
		int nsfd;

		snprintf(path, sizeof(path), NETNS_DIR "/%s", plan.ns[i]);
		if ((nsfd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || setns(nsfd, CLONE_NEWNET))
			return snprintf(err, errsz, "cannot enter %s: %s", path, strerror(errno)),
			       err;
		close(nsfd);
		for (int k = 0; k < nports; k++) {
			struct sockaddr_in a = {.sin_family = AF_INET,
						.sin_port = htons((uint16_t)ports[k]),
						.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
			int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
			    bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 64))
				return snprintf(err, errsz,
						"cannot listen on 127.0.0.1:%d in %s: %s", ports[k],
						plan.ns[i], strerror(errno)),
				       err;
			r->listen_fd[r->nlisten] = fd;
			r->listen_ns[r->nlisten] = i;
			r->listen_port[r->nlisten++] = ports[k];
		}
	}
	if (setns(root, CLONE_NEWNET))
		return snprintf(err, errsz, "cannot return to the root namespace: %s",
				strerror(errno)),
		       err;
	close(root);
	return NULL;
}

void netns_relay_loopback(const char *bootstrap)
{
	int ports[MAX_PORTS], nports, pipefd[2], ctl[2];
	char msg[512] = "";
	const char *list = bootstrap;
	struct relay *r;
	ssize_t got;

	if (!is_up) {
		FAIL("netns_relay_loopback: call netns_up first");
		ty_test_abort();
	}
	if (relay_pid > 0) {
		FAIL("netns_relay_loopback: the relay runs already");
		ty_test_abort();
	}
	if (bootstrap[0] == '@') {
		FILE *f = fopen(bootstrap + 1, "r");
		char line[4096] = "";

		if (!f || !fgets(line, sizeof(line), f)) {
			FAIL("cannot read the bootstrap file '%s'", bootstrap + 1);
			if (f)
				fclose(f);
			ty_test_abort();
		}
		fclose(f);
		line[strcspn(line, "\r\n")] = '\0';
		list = ty_test_strf("%s", line);
	}
	if ((nports = netns_loopback_ports(list, ports, MAX_PORTS)) < 0) {
		FAIL("bootstrap list '%s' is not 127.0.0.1:PORT,... (at most %d): the relay "
		     "cannot carry it into a namespace",
		     list, MAX_PORTS);
		ty_test_abort();
	}
	/* allocated before fork: the child only uses what it was given */
	r = calloc(1, sizeof(*r));
	REQUIRE(r != NULL);
	for (int i = 0; i < RELAY_PAIRS; i++)
		r->pairs[i].fd[0] = r->pairs[i].fd[1] = -1;
	REQUIRE(pipe2(pipefd, O_CLOEXEC) == 0);
	REQUIRE(pipe2(ctl, O_CLOEXEC) == 0);
	r->ctl_fd = ctl[0];
	fflush(NULL);
	if ((relay_pid = fork()) == 0) {
		const char *err;

		close(ctl[1]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		signal(SIGPIPE, SIG_IGN);
		close(pipefd[0]);
		err = relay_listen(r, ports, nports, msg, sizeof(msg));
		dprintf(pipefd[1], "%s\n", err ? err : "ok");
		close(pipefd[1]);
		if (err)
			_exit(1);
		relay_run(r);
	}
	close(pipefd[1]);
	close(ctl[0]);
	relay_ctl = ctl[1];
	free(r);
	if (relay_pid < 0) {
		relay_pid = 0;
		close(pipefd[0]);
		FAIL("fork: %s", strerror(errno));
		ty_test_abort();
	}
	while ((got = read(pipefd[0], msg, sizeof(msg) - 1)) < 0 && errno == EINTR)
		;
	close(pipefd[0]);
	msg[got > 0 ? got : 0] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	if (strcmp(msg, "ok")) {
		FAIL("the loopback relay did not start: %s", *msg ? msg : "it died");
		waitpid(relay_pid, NULL, 0);
		relay_pid = 0;
		ty_test_abort();
	}
	ty_test_note("relaying 127.0.0.1 port(s) %s into %d namespace(s)", list, plan.n);
}

void netns_partition(int i, bool cut)
{
	unsigned char cmd = (unsigned char)(i << 1 | (cut ? 1 : 0));

	if (!is_up || i < 0 || i >= plan.n) {
		FAIL("netns_partition(%d): no such namespace (netns_up first)", i);
		ty_test_abort();
	}
	if (ip("link", "set", plan.veth[i], cut ? "down" : "up", NULL)) {
		FAIL("cannot take %s %s", plan.veth[i], cut ? "down" : "up");
		ty_test_abort();
	}
	if (relay_ctl >= 0 && write(relay_ctl, &cmd, 1) != 1) {
		FAIL("cannot tell the loopback relay to %s namespace %d: %s",
		     cut ? "cut" : "restore", i, strerror(errno));
		ty_test_abort();
	}
	ty_test_note("namespace %s %s", plan.ns[i], cut ? "partitioned (veth down, relay stalled)"
						     : "reconnected");
}
