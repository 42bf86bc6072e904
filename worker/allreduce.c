/*
 * trainyard-allreduce: the reference distributed worker. Reads the
 * torchrun-style rank environment, rendezvouses at MASTER_ADDR:MASTER_PORT,
 * runs a timed all-reduce (TCP ring, or NCCL through a module loaded at run
 * time), checks every element and prints one JSON line per rank.
 */
#include "allreduce.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <arpa/inet.h>
#include <unistd.h>

#define PROG "trainyard-allreduce"
#define MSG_MAX 512
#define LINE_MAX_LEN 512

/* Exit codes (worker/README.md). */
enum {
	EXIT_OK = 0,
	EXIT_USAGE = 2,	   /* bad option or environment, backend unavailable */
	EXIT_COMM = 3,	   /* rendezvous or ring failed: timeout, peer closed, unreachable */
	EXIT_MISMATCH = 4, /* the all-reduce finished with a wrong element */
	EXIT_SLOW = 5,	   /* --node-check: some node is far below the gang's median */
	EXIT_FLOOR = 6, /* --node-check: the gang's NCCL all-reduce is below its fabric's floor */
};

/* Long options without a short letter. */
enum { OPT_FLOOR_TCP = 256, OPT_FLOOR_ROCE, OPT_FLOOR_IB };

enum backend { BK_AUTO, BK_TCP, BK_NCCL };

struct opts {
	enum backend backend;
	enum ar_dtype dtype;
	unsigned long long bytes;
	int iters;
	int warmup;
	double timeout;
	const char *listen_addr; /* NULL: any, advertised as seen by rank 0 */
	const char *nccl_module; /* NULL: next to the program */
	long long poison;
	bool node_check;
	unsigned long long nc_bytes; /* bytes each way per measured pair and round */
	int nc_rounds;
	double slow_ratio;
	double floors[AR_FABRICS]; /* GB/s per fabric the gang's NCCL all-reduce must reach */
	double throttle_bps;	   /* TY_ALLREDUCE_THROTTLE_BPS, the node check's test seam */
};

struct rankenv {
	int rank, world, local_rank, local_world;
	const char *master_addr;
	int master_port;
};

struct peer {
	char addr[INET6_ADDRSTRLEN];
	int port;
};

static int g_rank = -1;

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;

	if (g_rank >= 0)
		fprintf(stderr, PROG ": rank %d: ", g_rank);
	else
		fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- options and environment ---- */

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: " PROG " [options]\n"
	       "Sum a buffer across every rank of a job and check the result.\n"
	       "Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT\n"
	       "(and CUDA_VISIBLE_DEVICES for NCCL) like torchrun; prints one JSON line per rank.\n"
	       "\n"
	       "Options:\n"
	       "  --backend auto|tcp|nccl  transport (default auto: nccl when a GPU is visible)\n"
	       "  --bytes N                buffer size in bytes, suffix K, M or G (default 64M)\n"
	       "  --dtype float|double     element type (default float)\n"
	       "  --iters N                timed iterations (default 5)\n"
	       "  --warmup N               untimed iterations first (default 1)\n"
	       "  --timeout SECONDS        limit on connecting, rendezvous and any stalled\n"
	       "                           transfer, and on the whole NCCL run (its\n"
	       "                           communicator is aborted past it) (default 60)\n"
	       "  --listen-addr ADDR       address this rank binds and advertises for the ring\n"
	       "                           (default: any, advertised as rank 0 sees it)\n"
	       "  --nccl-module PATH       NCCL backend module (default " AR_NCCL_MODULE "\n"
	       "                           next to the program)\n"
	       "  --poison-index I         add 1 to element I of this rank's contribution\n"
	       "                           (tests that the check catches a wrong sum)\n"
	       "  --node-check             after the all-reduce, measure the bandwidth between\n"
	       "                           the nodes' LOCAL_RANK 0 ranks pair by pair and name\n"
	       "                           the slow nodes (needs NODE_RANK, NNODES; names from\n"
	       "                           TRAINYARD_NODE_ID, default node-<NODE_RANK>)\n"
	       "  --node-check-bytes N     bytes sent each way per pair and round (default 8M)\n"
	       "  --node-check-rounds N    rounds per pair; a direction counts its fastest\n"
	       "                           (default 3)\n"
	       "  --slow-ratio R           a node is slow below R x the median node (default 0.5)\n"
	       "  --floor-ib GBPS          with NCCL across nodes, the least bus bandwidth of the\n"
	       "                           gang's all-reduce on InfiniBand (default 5; 0: none)\n"
	       "  --floor-roce GBPS        the same on RoCE (default 1.5)\n"
	       "  --floor-tcp GBPS         the same on NCCL's TCP sockets (default 0.1)\n"
	       "  -h, --help               this text\n"
	       "\n"
	       "Exit status: 0 ok, 2 bad option, environment or unavailable backend,\n"
	       "3 rendezvous or transfer failed (timeout, peer closed), 4 wrong result,\n"
	       "5 --node-check found a slow node, 6 --node-check found the gang's NCCL\n"
	       "all-reduce below its fabric's floor.\n");
}

/* Parse a decimal integer in [lo, hi]; false on anything else. */
static bool parse_ll(long long *out, const char *s, long long lo, long long hi)
{
	char *end;
	long long v;

	if (!s || !*s)
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

static bool parse_bytes(unsigned long long *out, const char *s)
{
	char *end;
	unsigned long long v, mul = 1;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return false;
	if (*end == 'K' || *end == 'k')
		mul = 1ull << 10;
	else if (*end == 'M' || *end == 'm')
		mul = 1ull << 20;
	else if (*end == 'G' || *end == 'g')
		mul = 1ull << 30;
	else if (*end)
		return false;
	if (mul > 1 && end[1])
		return false;
	if (v > (1ull << 40) / mul)
		return false;
	*out = v * mul;
	return true;
}

static void parse_opts(struct opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"backend", required_argument, NULL, 'b'},
	    {"bytes", required_argument, NULL, 'n'},
	    {"dtype", required_argument, NULL, 'd'},
	    {"iters", required_argument, NULL, 'i'},
	    {"warmup", required_argument, NULL, 'w'},
	    {"timeout", required_argument, NULL, 't'},
	    {"listen-addr", required_argument, NULL, 'l'},
	    {"nccl-module", required_argument, NULL, 'm'},
	    {"poison-index", required_argument, NULL, 'p'},
	    {"node-check", no_argument, NULL, 'C'},
	    {"node-check-bytes", required_argument, NULL, 'B'},
	    {"slow-ratio", required_argument, NULL, 'R'},
	    {"node-check-rounds", required_argument, NULL, 'N'},
	    {"floor-tcp", required_argument, NULL, OPT_FLOOR_TCP},
	    {"floor-roce", required_argument, NULL, OPT_FLOOR_ROCE},
	    {"floor-ib", required_argument, NULL, OPT_FLOOR_IB},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	long long v;
	int c;

	*o = (struct opts){
	    .backend = BK_AUTO,
	    .dtype = AR_FLOAT,
	    .bytes = 64ull << 20,
	    .iters = 5,
	    .warmup = 1,
	    .timeout = 60,
	    .poison = -1,
	    .nc_bytes = 8ull << 20,
	    .nc_rounds = 3,
	    .slow_ratio = 0.5,
	    /*
	     * well below what a healthy link of each kind gives a
	     * gang's all-reduce (worker/README.md, "The fabric floor")
	     */
	    .floors = {[AR_FABRIC_TCP] = 0.1, [AR_FABRIC_ROCE] = 1.5, [AR_FABRIC_IB] = 5}};
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (!strcmp(optarg, "auto"))
				o->backend = BK_AUTO;
			else if (!strcmp(optarg, "tcp"))
				o->backend = BK_TCP;
			else if (!strcmp(optarg, "nccl"))
				o->backend = BK_NCCL;
			else
				die(EXIT_USAGE, "--backend '%s': expected auto, tcp or nccl",
				    optarg);
			break;
		case 'n':
			if (!parse_bytes(&o->bytes, optarg) || o->bytes == 0)
				die(EXIT_USAGE,
				    "--bytes '%s': expected a positive size like 4096, 64M or 1G",
				    optarg);
			break;
		case 'd':
			if (!strcmp(optarg, "float"))
				o->dtype = AR_FLOAT;
			else if (!strcmp(optarg, "double"))
				o->dtype = AR_DOUBLE;
			else
				die(EXIT_USAGE, "--dtype '%s': expected float or double", optarg);
			break;
		case 'i':
			if (!parse_ll(&v, optarg, 1, 1000000))
				die(EXIT_USAGE, "--iters '%s': expected an integer from 1", optarg);
			o->iters = (int)v;
			break;
		case 'w':
			if (!parse_ll(&v, optarg, 0, 1000000))
				die(EXIT_USAGE, "--warmup '%s': expected an integer from 0",
				    optarg);
			o->warmup = (int)v;
			break;
		case 't': {
			char *end;

			o->timeout = strtod(optarg, &end);
			if (*end || !(o->timeout > 0) || o->timeout > 86400)
				die(EXIT_USAGE, "--timeout '%s': expected seconds in (0, 86400]",
				    optarg);
			break;
		}
		case 'l':
			o->listen_addr = optarg;
			break;
		case 'm':
			o->nccl_module = optarg;
			break;
		case 'p':
			if (!parse_ll(&v, optarg, 0, LLONG_MAX))
				die(EXIT_USAGE, "--poison-index '%s': expected an element index",
				    optarg);
			o->poison = v;
			break;
		case 'C':
			o->node_check = true;
			break;
		case 'B':
			if (!parse_bytes(&o->nc_bytes, optarg) || o->nc_bytes == 0 ||
			    o->nc_bytes > (1ull << 30))
				die(EXIT_USAGE,
				    "--node-check-bytes '%s': expected a size from 1 to 1G like 8M",
				    optarg);
			break;
		case 'N':
			if (!parse_ll(&v, optarg, 1, 100))
				die(EXIT_USAGE, "--node-check-rounds '%s': expected 1 to 100",
				    optarg);
			o->nc_rounds = (int)v;
			break;
		case 'R': {
			char *end;

			o->slow_ratio = strtod(optarg, &end);
			if (*end || !(o->slow_ratio > 0) || !(o->slow_ratio < 1))
				die(EXIT_USAGE, "--slow-ratio '%s': expected a number in (0, 1)",
				    optarg);
			break;
		}
		case OPT_FLOOR_TCP:
		case OPT_FLOOR_ROCE:
		case OPT_FLOOR_IB: {
			enum ar_fabric f = c == OPT_FLOOR_TCP	 ? AR_FABRIC_TCP
					   : c == OPT_FLOOR_ROCE ? AR_FABRIC_ROCE
								 : AR_FABRIC_IB;
			char *end;

			o->floors[f] = strtod(optarg, &end);
			if (!*optarg || *end || !(o->floors[f] >= 0) || o->floors[f] > 1e6)
				die(EXIT_USAGE,
				    "--floor-%s '%s': expected GB/s from 0 (no floor) to 1e6",
				    ar_fabric_name(f), optarg);
			break;
		}
		case 'h':
			usage(stdout);
			exit(EXIT_OK);
		default:
			usage(stderr);
			exit(EXIT_USAGE);
		}
	}
	if (optind < argc)
		die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
	if (o->bytes % ar_dtype_size(o->dtype))
		die(EXIT_USAGE, "--bytes %llu is not a multiple of the %zu-byte %s", o->bytes,
		    ar_dtype_size(o->dtype), ar_dtype_name(o->dtype));
}

static int env_int(const char *name, const char *dflt, long long lo, long long hi)
{
	const char *s = getenv(name);
	long long v;

	if (!s) {
		if (!dflt)
			die(EXIT_USAGE, "%s is not set (run under torchrun or trainyard-executor)",
			    name);
		s = dflt;
	}
	if (!parse_ll(&v, s, lo, hi))
		die(EXIT_USAGE, "%s='%s' is not an integer in [%lld, %lld]", name, s, lo, hi);
	return (int)v;
}

static void read_env(struct rankenv *e)
{
	const char *port;
	long long v;

	e->world = env_int("WORLD_SIZE", NULL, 1, 1 << 20);
	e->rank = env_int("RANK", NULL, 0, INT_MAX);
	if (e->rank >= e->world)
		die(EXIT_USAGE, "RANK=%d is not below WORLD_SIZE=%d", e->rank, e->world);
	g_rank = e->rank;
	e->local_world = env_int("LOCAL_WORLD_SIZE", "1", 1, e->world);
	e->local_rank = env_int("LOCAL_RANK", "0", 0, INT_MAX);
	if (e->local_rank >= e->local_world)
		die(EXIT_USAGE, "LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", e->local_rank,
		    e->local_world);
	e->master_addr = getenv("MASTER_ADDR");
	port = getenv("MASTER_PORT");
	if (e->world == 1)
		return; /* nobody to meet */
	if (!e->master_addr || !*e->master_addr)
		die(EXIT_USAGE,
		    "MASTER_ADDR is not set (run under torchrun or trainyard-executor)");
	if (!port)
		die(EXIT_USAGE,
		    "MASTER_PORT is not set (run under torchrun or trainyard-executor)");
	if (!parse_ll(&v, port, 1, 65535))
		die(EXIT_USAGE, "MASTER_PORT='%s' is not a port number (1-65535)", port);
	e->master_port = (int)v;
}

/* ---- sockets ---- */

static void set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die(EXIT_COMM, "fcntl: %s", strerror(errno));
}

static void tune(int fd)
{
	int one = 1, buf = 4 << 20;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

static void addr_str(char out[INET6_ADDRSTRLEN], const struct sockaddr *sa)
{
	const void *p = sa->sa_family == AF_INET6
			    ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
			    : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;

	if (!inet_ntop(sa->sa_family, p, out, INET6_ADDRSTRLEN))
		snprintf(out, INET6_ADDRSTRLEN, "?");
}

static int sa_port(const struct sockaddr *sa)
{
	return ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port
					       : ((const struct sockaddr_in *)sa)->sin_port);
}

/* A listening socket on host (NULL: any address of family) and port (0: any). */
static int listen_on(int *port_out, const char *host, int family, int port, const char *what)
{
	struct addrinfo hints = {.ai_family = host ? AF_UNSPEC : family,
				 .ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char ps[16];
	int fd, one = 1, rc;

	snprintf(ps, sizeof ps, "%d", port);
	rc = getaddrinfo(host, ps, &hints, &ai);
	if (rc)
		die(EXIT_USAGE, "%s address '%s': %s", what, host ? host : "*", gai_strerror(rc));
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die(EXIT_COMM, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0)
		die(EXIT_COMM, "cannot listen for the %s on %s port %d: %s", what,
		    host ? host : "*", port, strerror(errno));
	freeaddrinfo(ai);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		die(EXIT_COMM, "getsockname: %s", strerror(errno));
	*port_out = sa_port((struct sockaddr *)&ss);
	set_nonblock(fd);
	return fd;
}

/* Wait until fd is ready for events or the deadline passes (false). */
static bool wait_fd(int fd, short events, double deadline)
{
	for (;;) {
		struct pollfd p = {.fd = fd, .events = events};
		double left = deadline - now_s();
		int rc;

		if (left <= 0)
			return false;
		rc = poll(&p, 1, (int)(left * 1000) + 1);
		if (rc > 0)
			return true;
		if (rc < 0 && errno != EINTR)
			die(EXIT_COMM, "poll: %s", strerror(errno));
	}
}

/*
 * Connect to host:port, retrying refused connections until the deadline
 * (the peer may not be listening yet). src, when set, is the local address.
 * Returns 0 with *fd_out, or the exit code (EXIT_USAGE, EXIT_COMM) with the
 * reason in msg.
 */
static int try_connect(int *fd_out, const char *host, int port, const char *src, double deadline,
		       const char *what, char *msg, size_t msgsz)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	char ps[16], last[MSG_MAX] = "no attempt";

	snprintf(ps, sizeof ps, "%d", port);
	for (;;) {
		struct addrinfo *ai = NULL;
		int fd, rc = getaddrinfo(host, ps, &hints, &ai);

		if (rc) {
			snprintf(last, sizeof last, "%s", gai_strerror(rc));
			if (rc != EAI_AGAIN) {
				snprintf(msg, msgsz, "cannot resolve the %s address '%s': %s", what,
					 host, last);
				return EXIT_COMM;
			}
			goto retry;
		}
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die(EXIT_COMM, "socket: %s", strerror(errno));
		if (src) {
			struct addrinfo sh = {.ai_family = ai->ai_family,
					      .ai_socktype = SOCK_STREAM,
					      .ai_flags = AI_NUMERICHOST};
			struct addrinfo *sa = NULL;

			if (getaddrinfo(src, NULL, &sh, &sa) ||
			    bind(fd, sa->ai_addr, sa->ai_addrlen)) {
				snprintf(msg, msgsz,
					 "cannot bind to --listen-addr '%s' to reach the %s: %s",
					 src, what,
					 sa ? strerror(errno) : "not an address of its family");
				if (sa)
					freeaddrinfo(sa);
				freeaddrinfo(ai);
				close(fd);
				return EXIT_USAGE;
			}
			freeaddrinfo(sa);
		}
		set_nonblock(fd);
		rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
		freeaddrinfo(ai);
		if (rc < 0 && errno == EINPROGRESS) {
			int e = 0;
			socklen_t el = sizeof e;

			if (!wait_fd(fd, POLLOUT, deadline)) {
				close(fd);
				snprintf(last, sizeof last, "no answer");
				break;
			}
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
			rc = e ? -1 : 0;
			errno = e;
		}
		if (rc == 0) {
			tune(fd);
			*fd_out = fd;
			return 0;
		}
		snprintf(last, sizeof last, "%s", strerror(errno));
		close(fd);
		if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EHOSTUNREACH &&
		    errno != ENETUNREACH && errno != ECONNRESET)
			break;
	retry:
		if (now_s() + 0.1 >= deadline)
			break;
		usleep(100000);
	}
	snprintf(msg, msgsz, "cannot reach the %s at %s:%d: %.300s", what, host, port, last);
	return EXIT_COMM;
}

/* try_connect, ending the program on failure. */
static int connect_to(const char *host, int port, const char *src, double deadline,
		      const char *what)
{
	char msg[MSG_MAX + 64];
	int fd = -1, rc = try_connect(&fd, host, port, src, deadline, what, msg, sizeof msg);

	if (rc)
		die(rc, "%s", msg);
	return fd;
}

/* Accept one connection before the deadline; -1 when it passes. */
static int accept_by(int lfd, double deadline, struct sockaddr_storage *ss)
{
	for (;;) {
		socklen_t sl = sizeof *ss;
		int fd;

		if (!wait_fd(lfd, POLLIN, deadline))
			return -1;
		fd = accept4(lfd, (struct sockaddr *)ss, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd >= 0) {
			tune(fd);
			return fd;
		}
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			die(EXIT_COMM, "accept: %s", strerror(errno));
	}
}

/*
 * Move exactly n bytes (send when out, else receive) before the deadline.
 * Returns 0, -1 on timeout, -2 when the peer closed or reset.
 */
static int xfer(int fd, void *buf, size_t n, bool out, double deadline)
{
	char *p = buf;

	while (n) {
		ssize_t k = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k == 0)
			return -2;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -2;
		if (!wait_fd(fd, out ? POLLOUT : POLLIN, deadline))
			return -1;
	}
	return 0;
}

/* Read one line (without the newline) into line; same returns as xfer. */
static int read_line(int fd, char *line, size_t sz, double deadline)
{
	size_t n = 0;

	for (;;) {
		int rc = xfer(fd, line + n, 1, false, deadline);

		if (rc)
			return rc;
		if (line[n] == '\n') {
			line[n] = 0;
			return 0;
		}
		if (++n == sz - 1)
			return -2;
	}
}

static void send_str(int fd, const char *s, double deadline, const char *what)
{
	if (xfer(fd, (void *)s, strlen(s), true, deadline))
		die(EXIT_COMM, "sending to %s failed: the connection closed or timed out", what);
}

/* ---- rendezvous ---- */

/*
 * Protocol (one line each, text):
 *   rank k -> rank 0:  "TYAR1 <rank> <world> <backend> <ring port>"
 *   rank 0 -> rank k:  "OK" then world lines "<rank> <addr> <port>" and, for
 *                      NCCL, "ID <hex of the unique id>"; or "ERR <reason>".
 * rank 0 advertises --listen-addr or MASTER_ADDR; the others --listen-addr
 * or the address rank 0 sees their connection come from.
 */
struct rdv {
	struct peer *peers; /* world entries */
	unsigned char id[AR_NCCL_ID_BYTES];
	bool keep;  /* set by the caller: keep the connections for the node check */
	int *ctl;   /* kept, rank 0: world entries, ctl[k] to rank k (ctl[0] = -1) */
	int ctl_fd; /* kept, other ranks: to rank 0 */
};

static void hex_encode(char *out, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
}

static bool hex_decode(unsigned char *out, const char *s, size_t n)
{
	if (strlen(s) != 2 * n)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return false;
		out[i] = (unsigned char)v;
	}
	return true;
}

static void rdv_fail_all(int *fds, int world, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));
static void rdv_fail_all(int *fds, int world, const char *fmt, ...)
{
	char msg[MSG_MAX], line[MSG_MAX + 8];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(line, sizeof line, "ERR %s\n", msg);
	for (int i = 0; fds && i < world; i++) /* fds[0]: a rank not yet recorded */
		if (fds[i] >= 0)
			(void)xfer(fds[i], line, strlen(line), true, now_s() + 1);
	die(EXIT_COMM, "%s", msg);
}

static void rdv_master(struct rdv *r, const struct rankenv *e, const struct opts *o, const char *bk,
		       int ring_port, const unsigned char *id)
{
	int *fds = calloc((size_t)e->world, sizeof *fds);
	double deadline = now_s() + o->timeout;
	int port, lfd, joined = 1;
	char line[LINE_MAX_LEN];

	if (!fds)
		die(EXIT_COMM, "out of memory");
	for (int i = 0; i < e->world; i++)
		fds[i] = -1;
	lfd = listen_on(&port, NULL, AF_INET, e->master_port, "rendezvous");
	snprintf(r->peers[0].addr, sizeof r->peers[0].addr, "%s",
		 o->listen_addr ? o->listen_addr : e->master_addr);
	r->peers[0].port = ring_port;
	while (joined < e->world) {
		struct sockaddr_storage ss;
		int fd = accept_by(lfd, deadline, &ss), rank, world, rport, rc, nf;
		char bkname[16], addr[INET6_ADDRSTRLEN];

		if (fd < 0) {
			char missing[256] = "";
			size_t m = 0;

			for (int i = 1; i < e->world && m < sizeof missing - 16; i++)
				if (fds[i] < 0)
					m += (size_t)snprintf(missing + m, sizeof missing - m,
							      "%s%d", m ? ", " : "", i);
			rdv_fail_all(fds, e->world,
				     "rendezvous timed out after %g s: %d of %d ranks joined, "
				     "missing rank(s) %s",
				     o->timeout, joined, e->world, missing);
		}
		rc = read_line(fd, line, sizeof line, deadline);
		nf = rc ? 0
			: sscanf(line, "TYAR1 %d %d %15s %d %45s", &rank, &world, bkname, &rport,
				 addr);
		if (nf < 4) {
			/* a stray or dead connection: not one of ours */
			close(fd);
			continue;
		}
		if (world != e->world) {
			fds[0] = fd; /* tell it too */
			rdv_fail_all(fds, e->world,
				     "rank %d has WORLD_SIZE=%d but rank 0 has WORLD_SIZE=%d", rank,
				     world, e->world);
		}
		if (strcmp(bkname, bk)) {
			fds[0] = fd;
			rdv_fail_all(fds, e->world, "rank %d uses backend %s but rank 0 uses %s",
				     rank, bkname, bk);
		}
		if (rank <= 0 || rank >= e->world || fds[rank] >= 0) {
			fds[0] = fd;
			rdv_fail_all(fds, e->world, "rank %d joined twice or is out of range",
				     rank);
		}
		fds[rank] = fd;
		r->peers[rank].port = rport;
		joined++;
		if (nf == 5) {
			snprintf(r->peers[rank].addr, sizeof r->peers[rank].addr, "%s", addr);
		} else {
			/* the address its connection comes from is the one it can be reached on */
			struct sockaddr_storage ps;
			socklen_t pl = sizeof ps;

			if (getpeername(fd, (struct sockaddr *)&ps, &pl) < 0)
				die(EXIT_COMM, "getpeername: %s", strerror(errno));
			addr_str(r->peers[rank].addr, (struct sockaddr *)&ps);
		}
	}
	close(lfd);
	for (int k = 1; k < e->world; k++) {
		size_t cap = (size_t)e->world * (INET6_ADDRSTRLEN + 32) + 2 * AR_NCCL_ID_BYTES + 16;
		char *msg = malloc(cap);
		size_t m = 0;

		if (!msg)
			die(EXIT_COMM, "out of memory");
		m += (size_t)snprintf(msg + m, cap - m, "OK\n");
		for (int i = 0; i < e->world; i++)
			m += (size_t)snprintf(msg + m, cap - m, "%d %s %d\n", i, r->peers[i].addr,
					      r->peers[i].port);
		if (id) {
			m += (size_t)snprintf(msg + m, cap - m, "ID ");
			hex_encode(msg + m, id, AR_NCCL_ID_BYTES);
			m += 2 * AR_NCCL_ID_BYTES;
			m += (size_t)snprintf(msg + m, cap - m, "\n");
		}
		send_str(fds[k], msg, now_s() + o->timeout, "a rank during the rendezvous");
		free(msg);
		if (!r->keep) {
			close(fds[k]);
			fds[k] = -1;
		}
	}
	if (id)
		memcpy(r->id, id, AR_NCCL_ID_BYTES);
	if (r->keep)
		r->ctl = fds;
	else
		free(fds);
}

static void rdv_join(struct rdv *r, const struct rankenv *e, const struct opts *o, const char *bk,
		     int ring_port, bool want_id)
{
	double deadline = now_s() + o->timeout;
	int fd = connect_to(e->master_addr, e->master_port, o->listen_addr, deadline, "master");
	char line[LINE_MAX_LEN];
	int rc;

	if (o->listen_addr)
		snprintf(line, sizeof line, "TYAR1 %d %d %s %d %s\n", e->rank, e->world, bk,
			 ring_port, o->listen_addr);
	else
		snprintf(line, sizeof line, "TYAR1 %d %d %s %d\n", e->rank, e->world, bk,
			 ring_port);
	send_str(fd, line, deadline, "the master");
	rc = read_line(fd, line, sizeof line, deadline);
	if (rc == -1)
		die(EXIT_COMM,
		    "rendezvous timed out after %g s waiting for the other ranks at %s:%d",
		    o->timeout, e->master_addr, e->master_port);
	if (rc)
		die(EXIT_COMM, "the master at %s:%d closed the rendezvous connection",
		    e->master_addr, e->master_port);
	if (!strncmp(line, "ERR ", 4))
		die(EXIT_COMM, "the master ended the rendezvous: %s", line + 4);
	if (strcmp(line, "OK"))
		die(EXIT_COMM,
		    "the master at %s:%d answered '%.80s', not a trainyard-allreduce "
		    "rendezvous",
		    e->master_addr, e->master_port, line);
	for (int i = 0; i < e->world; i++) {
		int idx, port;
		char addr[INET6_ADDRSTRLEN];

		if (read_line(fd, line, sizeof line, deadline) ||
		    sscanf(line, "%d %45s %d", &idx, addr, &port) != 3 || idx != i)
			die(EXIT_COMM, "the master sent a broken ring layout");
		snprintf(r->peers[i].addr, sizeof r->peers[i].addr, "%s", addr);
		r->peers[i].port = port;
	}
	if (want_id && (read_line(fd, line, sizeof line, deadline) || strncmp(line, "ID ", 3) ||
			!hex_decode(r->id, line + 3, AR_NCCL_ID_BYTES)))
		die(EXIT_COMM, "the master sent no NCCL unique id");
	if (r->keep)
		r->ctl_fd = fd;
	else
		close(fd);
}

/* ---- the TCP ring ---- */

struct ring {
	int next, prev; /* sockets to rank+1 and from rank-1 */
	int rank, world;
	double timeout;
	const struct peer *peers;
};

static void ring_connect(struct ring *g, int lfd, const struct opts *o)
{
	int n = g->world, nxt = (g->rank + 1) % n, prv = (g->rank + n - 1) % n;
	double deadline = now_s() + o->timeout;
	int32_t me = g->rank, who = -1;
	char what[64];

	snprintf(what, sizeof what, "ring peer rank %d", nxt);
	g->next = connect_to(g->peers[nxt].addr, g->peers[nxt].port, NULL, deadline, what);
	if (xfer(g->next, &me, sizeof me, true, deadline))
		die(EXIT_COMM, "rank %d (%s:%d) closed the ring connection", nxt,
		    g->peers[nxt].addr, g->peers[nxt].port);
	for (;;) {
		struct sockaddr_storage ss;
		int fd = accept_by(lfd, deadline, &ss);

		if (fd < 0)
			die(EXIT_COMM, "timed out after %g s waiting for rank %d (%s) to connect",
			    o->timeout, prv, g->peers[prv].addr);
		if (xfer(fd, &who, sizeof who, false, deadline) == 0 && who == prv) {
			g->prev = fd;
			return;
		}
		close(fd); /* not our neighbour */
	}
}

/* Element range [*off, *off + *len) of chunk c of count elements over n chunks. */
static void chunk(size_t *off, size_t *len, size_t count, int n, int c)
{
	size_t base = count / (size_t)n, rem = count % (size_t)n, uc = (size_t)c;

	*off = uc * base + (uc < rem ? uc : rem);
	*len = base + (uc < rem ? 1 : 0);
}

/*
 * Send sbytes from sbuf to the next rank while receiving rbytes into rbuf
 * from the previous one, so neither direction waits on the other.
 */
static void ring_step(struct ring *g, const char *sbuf, size_t sbytes, char *rbuf, size_t rbytes)
{
	int n = g->world, nxt = (g->rank + 1) % n, prv = (g->rank + n - 1) % n;
	double deadline = now_s() + g->timeout;

	while (sbytes || rbytes) {
		struct pollfd p[2] = {{.fd = g->next, .events = sbytes ? POLLOUT : 0},
				      {.fd = g->prev, .events = rbytes ? POLLIN : 0}};
		double left = deadline - now_s();
		int rc;

		if (left <= 0) {
			if (rbytes)
				die(EXIT_COMM,
				    "timed out after %g s waiting for data from rank %d (%s)",
				    g->timeout, prv, g->peers[prv].addr);
			die(EXIT_COMM, "timed out after %g s sending to rank %d (%s)", g->timeout,
			    nxt, g->peers[nxt].addr);
		}
		rc = poll(p, 2, (int)(left * 1000) + 1);
		if (rc < 0 && errno != EINTR)
			die(EXIT_COMM, "poll: %s", strerror(errno));
		if (rc <= 0)
			continue;
		if (sbytes && (p[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t k = send(g->next, sbuf, sbytes, MSG_NOSIGNAL);

			if (k > 0) {
				sbuf += k;
				sbytes -= (size_t)k;
				deadline = now_s() + g->timeout;
			} else if (k < 0 && errno != EAGAIN && errno != EINTR) {
				die(EXIT_COMM, "rank %d (%s) closed the ring connection: %s", nxt,
				    g->peers[nxt].addr, strerror(errno));
			}
		}
		if (rbytes && (p[1].revents & (POLLIN | POLLERR | POLLHUP))) {
			ssize_t k = recv(g->prev, rbuf, rbytes, 0);

			if (k > 0) {
				rbuf += k;
				rbytes -= (size_t)k;
				deadline = now_s() + g->timeout;
			} else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
				die(EXIT_COMM, "rank %d (%s) closed the ring connection", prv,
				    g->peers[prv].addr);
			}
		}
	}
}

static void add_into(void *dst, const void *src, size_t n, enum ar_dtype t)
{
	if (t == AR_DOUBLE)
		for (size_t i = 0; i < n; i++)
			((double *)dst)[i] += ((const double *)src)[i];
	else
		for (size_t i = 0; i < n; i++)
			((float *)dst)[i] += ((const float *)src)[i];
}

/*
 * Ring all-reduce in place: n-1 reduce-scatter steps leave rank r with the
 * full sum of chunk r+1, then n-1 all-gather steps pass the sums around.
 */
static void ring_allreduce(struct ring *g, char *buf, char *tmp, size_t count, enum ar_dtype t)
{
	int n = g->world, r = g->rank;
	size_t es = ar_dtype_size(t), so, sl, ro, rl;

	for (int s = 0; s < n - 1; s++) {
		chunk(&so, &sl, count, n, ((r - s) % n + n) % n);
		chunk(&ro, &rl, count, n, ((r - s - 1) % n + n) % n);
		ring_step(g, buf + so * es, sl * es, tmp, rl * es);
		add_into(buf + ro * es, tmp, rl, t);
	}
	for (int s = 0; s < n - 1; s++) {
		chunk(&so, &sl, count, n, ((r + 1 - s) % n + n) % n);
		chunk(&ro, &rl, count, n, ((r - s) % n + n) % n);
		ring_step(g, buf + so * es, sl * es, buf + ro * es, rl * es);
	}
}

/* ---- NCCL module ---- */

static const struct ar_nccl_ops *nccl_load(const struct opts *o, char *msg, size_t msgsz)
{
	char path[PATH_MAX];
	const struct ar_nccl_ops *(*sym)(void);
	const struct ar_nccl_ops *ops;
	void *h;

	if (o->nccl_module) {
		snprintf(path, sizeof path, "%s", o->nccl_module);
	} else {
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
		char *slash;

		if (n < 0) {
			snprintf(msg, msgsz, "cannot find the program's directory: %s",
				 strerror(errno));
			return NULL;
		}
		path[n] = 0;
		slash = strrchr(path, '/');
		snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "%s", AR_NCCL_MODULE);
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(msg, msgsz, "cannot load the NCCL backend: %s", dlerror());
		return NULL;
	}
	*(void **)&sym = dlsym(h, AR_NCCL_SYMBOL);
	if (!sym) {
		snprintf(msg, msgsz, "%.400s has no symbol %s", path, AR_NCCL_SYMBOL);
		return NULL;
	}
	ops = sym();
	if (!ops || ops->abi != AR_NCCL_ABI) {
		snprintf(msg, msgsz, "%.400s has ABI %d, expected %d", path, ops ? ops->abi : -1,
			 AR_NCCL_ABI);
		return NULL;
	}
	return ops; /* the module stays loaded until exit */
}

/* ---- the node check (worker/README.md) ---- */

/*
 * Protocol over the rendezvous connections, kept open (one line each):
 *   rank k -> rank 0:  "NC1 <rank> <node rank> <nnodes> <local rank> <node name>
 *                       <seconds of one all-reduce> <fabric>" (the last two
 *                      may be missing: an older rank)
 *   rank 0 -> leader:  "PAIR <peer rank> CONNECT|ACCEPT", one pair at a time
 *   leader -> rank 0:  "RESULT <seconds>" (TCP: to receive the peer's bytes;
 *                      NCCL: the pair's fastest all-reduce) or "RESULT -1 <reason>"
 *   rank 0 -> rank k:  "VERDICT OK", "VERDICT SLOW <message>",
 *                      "VERDICT FLOOR <message>" or "ERR <reason>"
 * A leader is the rank with LOCAL_RANK 0 of its node; pairs connect to the
 * accepting leader's advertised (ring) port and send their rank first; with
 * NCCL the connecting leader then sends the pair's NCCL unique id.
 */
struct nc_env {
	int node_rank, nnodes;
	char name[AR_NC_NAME_MAX + 1];
	enum ar_fabric fabric; /* from the NCCL environment */
};

struct nc_ctx {
	const struct peer *peers;
	int lfd; /* the port advertised at the rendezvous */
	int rank;
	const char *src; /* --listen-addr */
	size_t bytes;
	int rounds;
	double timeout;
	double bps;		       /* TY_ALLREDUCE_THROTTLE_BPS, 0: none */
	char *buf;		       /* bytes, leaders only (TCP) */
	const struct ar_nccl_ops *ops; /* NULL: the pairs are measured over TCP */
	int local_world;
	const char *backend;	     /* of the all-reduce before the check */
	double ar_seconds;	     /* this rank's time of one of its iterations */
	unsigned long long ar_bytes; /* its buffer */
};

static void read_nc_env(struct nc_env *ne, const struct rankenv *e)
{
	const char *id = getenv("TRAINYARD_NODE_ID");
	bool alone = e->world == 1;

	ne->nnodes = env_int("NNODES", alone ? "1" : NULL, 1, e->world);
	ne->node_rank = env_int("NODE_RANK", alone ? "0" : NULL, 0, INT_MAX);
	if (ne->node_rank >= ne->nnodes)
		die(EXIT_USAGE, "NODE_RANK=%d is not below NNODES=%d", ne->node_rank, ne->nnodes);
	if (id && !ar_nc_name_ok(id))
		die(EXIT_USAGE,
		    "TRAINYARD_NODE_ID='%.80s' is not a node name (1-63 characters of "
		    "A-Za-z0-9._-, alphanumeric first)",
		    id);
	if (id)
		snprintf(ne->name, sizeof ne->name, "%s", id);
	else
		snprintf(ne->name, sizeof ne->name, "node-%d", ne->node_rank);
	ne->fabric = ar_fabric_from_env(getenv("NCCL_IB_DISABLE"), getenv("NCCL_IB_HCA"),
					getenv("NCCL_IB_GID_INDEX"));
}

/* The fabric named s, unknown for anything else. */
static enum ar_fabric fabric_named(const char *s)
{
	for (int f = 0; f < AR_FABRICS; f++)
		if (!strcmp(s, ar_fabric_name((enum ar_fabric)f)))
			return (enum ar_fabric)f;
	return AR_FABRIC_UNKNOWN;
}

static void sleep_s(double s)
{
	struct timespec ts = {.tv_sec = (time_t)s,
			      .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/*
 * xfer in 64 KiB steps, at most bps bytes per second when bps > 0: the
 * test seam for a slow NIC, applied to everything a leader sends and
 * receives in the node check. Same returns as xfer.
 */
static int nc_xfer(int fd, char *buf, size_t n, bool out, double deadline, double bps)
{
	double t0 = now_s();
	size_t done = 0;

	while (done < n) {
		size_t k = n - done < 65536 ? n - done : 65536;
		int rc = xfer(fd, buf + done, k, out, deadline);

		if (rc)
			return rc;
		done += k;
		if (bps > 0) {
			double due = t0 + (double)done / bps;

			if (due > deadline) {
				sleep_s(deadline - now_s() > 0 ? deadline - now_s() : 0);
				return -1;
			}
			if (due > now_s())
				sleep_s(due - now_s());
		}
	}
	return 0;
}

/*
 * The NCCL side of a pair's measurement over its connection fd (closed
 * here): the connecting leader makes the NCCL unique id and sends it, then
 * both run an all-reduce of the check's bytes as the two ranks of a new
 * communicator, on the GPU of local rank 0, over the fabric the job's NCCL
 * environment gives NCCL: one warm-up (it sets up the connections), then
 * --node-check-rounds timed ones. Returns the fastest, or -1 with why.
 */
static double nc_pair_nccl(const struct nc_ctx *c, int fd, int peer, bool connector, char *why,
			   size_t whysz)
{
	struct ar_nccl_job job = {.rank = connector ? 0 : 1,
				  .world = 2,
				  .local_rank = 0,
				  .local_world = c->local_world,
				  .timeout = c->timeout,
				  .dtype = AR_FLOAT,
				  .count = c->bytes / sizeof(float),
				  .iters = c->rounds,
				  .warmup = 1,
				  .poison = -1};
	struct ar_nccl_result res = {0};
	unsigned char id[AR_NCCL_ID_BYTES];
	char msg[MSG_MAX] = "";
	int rc;

	if (connector && c->ops->unique_id(id, msg, sizeof msg)) {
		snprintf(why, whysz, "nccl: %s", msg);
		close(fd);
		return -1;
	}
	rc = xfer(fd, id, sizeof id, connector, now_s() + c->timeout);
	if (rc) {
		snprintf(why, whysz, "rank %d (%s) %s before the NCCL unique id was through", peer,
			 c->peers[peer].addr,
			 rc == -1 ? "timed out" : "closed the node check connection");
		close(fd);
		return -1;
	}
	rc = c->ops->run(&res, &job, id, msg, sizeof msg);
	close(fd);
	if (rc) {
		snprintf(why, whysz, "nccl all-reduce with rank %d: %s", peer, msg);
		return -1;
	}
	if (res.bad >= 0) {
		snprintf(why, whysz,
			 "nccl all-reduce with rank %d: element %lld is %.17g, expected %.17g",
			 peer, res.bad, res.got, ar_expected((size_t)res.bad, 2));
		return -1;
	}
	return res.best;
}

/*
 * One side of the measurement of the pair (this leader, leader peer): in
 * each round the connecting side sends first, then the accepting side.
 * A sender starts only when its own receive is done and sends one marker
 * byte before the data; the receiver's clock starts when the marker
 * arrives, so it never counts the time the peer was still busy. Returns
 * this side's fastest receive time in seconds (the first round pays for
 * TCP's slow start, a later one may be hit by a scheduling hiccup), or -1
 * with why.
 */
static double nc_pair_side(const struct nc_ctx *c, int peer, bool connector, char *why,
			   size_t whysz)
{
	double deadline = now_s() + c->timeout, t = -1;
	int32_t me = c->rank, who = -1;
	char what[64], marker = 'm';
	int fd = -1;

	snprintf(what, sizeof what, "node check peer rank %d", peer);
	if (connector) {
		if (try_connect(&fd, c->peers[peer].addr, c->peers[peer].port, c->src, deadline,
				what, why, whysz))
			return -1;
		if (xfer(fd, &me, sizeof me, true, deadline)) {
			snprintf(why, whysz, "rank %d (%s) closed the node check connection", peer,
				 c->peers[peer].addr);
			close(fd);
			return -1;
		}
	} else {
		for (;;) {
			struct sockaddr_storage ss;

			fd = accept_by(c->lfd, deadline, &ss);
			if (fd < 0) {
				snprintf(
				    why, whysz,
				    "rank %d (%s) did not connect for the node check within %g s",
				    peer, c->peers[peer].addr, c->timeout);
				return -1;
			}
			if (xfer(fd, &who, sizeof who, false, deadline) == 0 && who == peer)
				break;
			close(fd); /* not our peer */
		}
	}
	if (c->ops)
		return nc_pair_nccl(c, fd, peer, connector, why, whysz);
	for (int step = 0; step < 2 * c->rounds; step++) {
		bool receive = (step % 2 == 0) != connector;
		double t0, dl = now_s() + c->timeout;
		int rc;

		if (receive) {
			rc = xfer(fd, &marker, 1, false, dl);
			t0 = now_s();
			if (!rc)
				rc = nc_xfer(fd, c->buf, c->bytes, false, dl, c->bps);
			if (!rc && (t < 0 || now_s() - t0 < t))
				t = now_s() - t0;
		} else {
			rc = xfer(fd, &marker, 1, true, dl);
			if (!rc)
				rc = nc_xfer(fd, c->buf, c->bytes, true, dl, c->bps);
		}
		if (rc) {
			snprintf(why, whysz, "%s %zu bytes %s rank %d (%s) %s",
				 receive ? "receiving" : "sending", c->bytes,
				 receive ? "from" : "to", peer, c->peers[peer].addr,
				 rc == -1 ? "timed out" : "failed: the connection closed");
			close(fd);
			return -1;
		}
	}
	close(fd);
	return t;
}

/* A leader's side of "PAIR <peer> CONNECT|ACCEPT", answered with RESULT. */
static void nc_answer_pair(const struct nc_ctx *c, int fd, const char *line, double deadline)
{
	char how[16], why[MSG_MAX], out[MSG_MAX + 32];
	int peer;
	double t;

	if (sscanf(line, "PAIR %d %15s", &peer, how) != 2 || peer < 0 || peer == c->rank ||
	    (strcmp(how, "CONNECT") && strcmp(how, "ACCEPT")))
		die(EXIT_COMM, "rank 0 sent a broken node check command '%.80s'", line);
	t = nc_pair_side(c, peer, !strcmp(how, "CONNECT"), why, sizeof why);
	if (t >= 0)
		snprintf(out, sizeof out, "RESULT %.9f\n", t);
	else
		snprintf(out, sizeof out, "RESULT -1 %s\n", why);
	send_str(fd, out, deadline, "rank 0 during the node check");
}

/* Pairs measured for n nodes (ar_nc_pairs), for the time limits of the others. */
static int nc_npairs(int n)
{
	return n >= 3 ? 2 * n : n == 2;
}

/*
 * How long a rank waits for rank 0 in the node check: every pair may take
 * a connection and two transfers per round of up to --timeout each.
 */
static double nc_wait_limit(double timeout, int rounds, int nnodes)
{
	return ((2.0 * rounds + 1) * nc_npairs(nnodes) + 3) * timeout;
}

/* Every rank but 0: report, do what rank 0 asks, exit with its verdict. */
static int nc_member(const struct nc_ctx *c, const struct rankenv *e, const struct nc_env *ne,
		     int fd)
{
	double deadline = now_s() + nc_wait_limit(c->timeout, c->rounds, ne->nnodes);
	char line[LINE_MAX_LEN];

	snprintf(line, sizeof line, "NC1 %d %d %d %d %s %.9f %s\n", e->rank, ne->node_rank,
		 ne->nnodes, e->local_rank, ne->name, c->ar_seconds, ar_fabric_name(ne->fabric));
	send_str(fd, line, deadline, "rank 0 during the node check");
	for (;;) {
		int rc = read_line(fd, line, sizeof line, deadline);

		if (rc == -1)
			die(EXIT_COMM, "timed out waiting for rank 0's node check verdict");
		if (rc)
			die(EXIT_COMM,
			    "rank 0 closed the connection before the node check verdict");
		if (!strncmp(line, "ERR ", 4))
			die(EXIT_COMM, "rank 0 ended the node check: %s", line + 4);
		if (!strncmp(line, "PAIR ", 5) && e->local_rank == 0) {
			nc_answer_pair(c, fd, line, deadline);
			continue;
		}
		if (!strcmp(line, "VERDICT OK"))
			break;
		if (!strncmp(line, "VERDICT SLOW ", 13) || !strncmp(line, "VERDICT FLOOR ", 14)) {
			bool slow = line[8] == 'S';

			fprintf(stderr, PROG ": rank %d: %s\n", e->rank, line + (slow ? 13 : 14));
			close(fd);
			return slow ? EXIT_SLOW : EXIT_FLOOR;
		}
		die(EXIT_COMM, "rank 0 sent '%.80s' during the node check", line);
	}
	close(fd);
	return EXIT_OK;
}

/* Rank 0: collect who leads which node, measure pair by pair, judge, tell everyone. */
static int nc_master(const struct nc_ctx *c, const struct rankenv *e, const struct opts *o,
		     const struct nc_env *ne, int *ctl)
{
	int n = ne->nnodes, npairs, nslow, rc = EXIT_OK;
	int *leader = malloc((size_t)n * sizeof *leader);
	struct ar_nc_node *nodes = calloc((size_t)n, sizeof *nodes);
	struct ar_pair *pairs = malloc((size_t)(2 * n) * sizeof *pairs);
	double *gbps = malloc((size_t)(2 * n) * sizeof *gbps);
	struct ar_nc_verdict v = {.n = n,
				  .ratio = o->slow_ratio,
				  .measured = c->ops ? "nccl" : "tcp",
				  .allreduce_backend = c->backend};
	/* the gang's all-reduce took as long as its slowest rank's */
	double slowest = c->ar_seconds;
	char line[LINE_MAX_LEN], msg[LINE_MAX_LEN - 16], *json;

	if (!leader || !nodes || !pairs || !gbps)
		die(EXIT_COMM, "out of memory");
	v.nodes = nodes;
	for (int k = 0; k < n; k++)
		leader[k] = -1;
	for (int r = 0; r < e->world; r++) {
		int rank = 0, nr = ne->node_rank, nn = ne->nnodes, lr = e->local_rank;
		char name[AR_NC_NAME_MAX + 2], fabric[16] = "unknown";
		double secs = c->ar_seconds;

		snprintf(name, sizeof name, "%s", ne->name);
		snprintf(fabric, sizeof fabric, "%s", ar_fabric_name(ne->fabric));
		if (r > 0) {
			int got = read_line(ctl[r], line, sizeof line, now_s() + o->timeout);

			if (got)
				rdv_fail_all(ctl, e->world, "rank %d %s before the node check", r,
					     got == -1 ? "did not report within the timeout"
						       : "closed its connection");
			/* an older rank sends neither its time nor its fabric */
			snprintf(fabric, sizeof fabric, "unknown");
			secs = 0;
			if (sscanf(line, "NC1 %d %d %d %d %64s %lf %15s", &rank, &nr, &nn, &lr,
				   name, &secs, fabric) < 5 ||
			    rank != r || !ar_nc_name_ok(name))
				rdv_fail_all(ctl, e->world,
					     "rank %d sent a broken node check report", r);
		}
		if (secs > slowest)
			slowest = secs;
		if (nn != n)
			rdv_fail_all(ctl, e->world,
				     "rank %d has NNODES=%d but rank 0 has NNODES=%d", r, nn, n);
		if (nr < 0 || nr >= n)
			rdv_fail_all(ctl, e->world, "rank %d has NODE_RANK=%d, not below NNODES=%d",
				     r, nr, n);
		if (lr != 0)
			continue;
		if (leader[nr] >= 0)
			rdv_fail_all(ctl, e->world,
				     "ranks %d and %d both have LOCAL_RANK 0 on NODE_RANK %d",
				     leader[nr], r, nr);
		leader[nr] = r;
		snprintf(nodes[nr].name, sizeof nodes[nr].name, "%.63s",
			 name); /* checked: at most 63 */
		nodes[nr].fabric = fabric_named(fabric);
	}
	for (int k = 0; k < n; k++) {
		if (leader[k] < 0)
			rdv_fail_all(ctl, e->world, "NODE_RANK %d has no rank with LOCAL_RANK 0",
				     k);
		for (int j = 0; j < k; j++)
			if (!strcmp(nodes[j].name, nodes[k].name))
				rdv_fail_all(ctl, e->world,
					     "NODE_RANK %d and %d are both named '%s'", j, k,
					     nodes[k].name);
	}
	npairs = ar_nc_pairs(pairs, n);
	for (int i = 0; i < npairs; i++) {
		int side[2] = {leader[pairs[i].a], leader[pairs[i].b]};
		double t[2] = {-1, -1};
		char why[2][MSG_MAX];

		for (int s = 0; s < 2; s++) {
			if (side[s] == 0)
				continue;
			snprintf(line, sizeof line, "PAIR %d %s\n", side[!s],
				 s ? "ACCEPT" : "CONNECT");
			send_str(ctl[side[s]], line, now_s() + o->timeout,
				 "a leader during the node check");
		}
		for (int s = 0; s < 2; s++)
			if (side[s] == 0)
				t[s] = nc_pair_side(c, side[!s], !s, why[s], sizeof why[s]);
		for (int s = 0; s < 2; s++) {
			int got;

			if (side[s] == 0)
				continue;
			got = read_line(ctl[side[s]], line, sizeof line,
					now_s() + (2.0 * o->nc_rounds + 1) * o->timeout + 5);
			if (got)
				rdv_fail_all(
				    ctl, e->world, "rank %d (node %s) %s during the node check",
				    side[s], nodes[s ? pairs[i].b : pairs[i].a].name,
				    got == -1 ? "stopped answering" : "closed its connection");
			if (sscanf(line, "RESULT %lf", &t[s]) != 1)
				rdv_fail_all(ctl, e->world, "rank %d sent a broken result '%.80s'",
					     side[s], line);
			if (t[s] < 0)
				snprintf(why[s], sizeof why[s], "%s",
					 strlen(line) > 10 ? line + 10 : "failed");
		}
		gbps[i] = 0;
		if (t[0] >= 0 && t[1] >= 0) {
			double slower = t[0] > t[1] ? t[0] : t[1];

			gbps[i] = (double)c->bytes / (slower > 1e-9 ? slower : 1e-9) / 1e9;
		}
		for (int s = 0; s < 2; s++)
			if (t[s] < 0)
				fprintf(stderr,
					PROG
					": rank 0: node check %s-%s: rank %d: %s (counted as 0 "
					"GB/s)\n",
					nodes[pairs[i].a].name, nodes[pairs[i].b].name, side[s],
					why[s]);
	}
	ar_nc_judge(&v, pairs, gbps, npairs);
	v.allreduce_busbw =
	    slowest > 0 ? (double)c->ar_bytes / slowest / 1e9 * 2.0 * (e->world - 1) / e->world : 0;
	ar_nc_judge_floor(&v, o->floors);
	json = ar_nc_json(&v, pairs, gbps, npairs, c->bytes);
	if (!json)
		rdv_fail_all(ctl, e->world, "out of memory");
	ar_nc_message(msg, sizeof msg, &v);
	nslow = v.nslow;
	/* a slow node is named (and blamed) even when the gang is below its floor too */
	snprintf(line, sizeof line,
		 nslow		 ? "VERDICT SLOW %s\n"
		 : v.below_floor ? "VERDICT FLOOR %s\n"
				 : "VERDICT OK\n",
		 msg);
	for (int r = 1; r < e->world; r++) {
		send_str(ctl[r], line, now_s() + o->timeout, "a rank during the node check");
		close(ctl[r]);
	}
	printf("%s\n", json);
	fflush(stdout);
	if (nslow || v.below_floor) {
		fprintf(stderr, PROG ": rank 0: %s\n", msg);
		rc = nslow ? EXIT_SLOW : EXIT_FLOOR;
	}
	free(json);
	free(leader);
	free(nodes);
	free(pairs);
	free(gbps);
	return rc;
}

/*
 * The node check after a good all-reduce: lfd is the port this rank
 * advertised, r the rendezvous with its connections kept, ops the NCCL
 * module for the pairs (NULL: TCP), seconds this rank's mean time of one
 * all-reduce of bytes.
 */
static int node_check(const struct rankenv *e, const struct opts *o, const struct nc_env *ne,
		      const struct rdv *r, int lfd, const struct ar_nccl_ops *ops, double seconds,
		      unsigned long long bytes)
{
	struct nc_ctx c = {.peers = r->peers,
			   .lfd = lfd,
			   .rank = e->rank,
			   .src = o->listen_addr,
			   .bytes = (size_t)o->nc_bytes,
			   .rounds = o->nc_rounds,
			   .timeout = o->timeout,
			   .bps = o->throttle_bps,
			   .ops = ops,
			   .local_world = e->local_world,
			   .backend = ops ? "nccl" : "tcp",
			   .ar_seconds = seconds,
			   .ar_bytes = bytes};
	int rc;

	if (ops) {
		/* whole floats: the pairs' all-reduce sums them */
		c.bytes -= c.bytes % sizeof(float);
		if (c.bytes == 0)
			c.bytes = sizeof(float);
	} else if (e->local_rank == 0) {
		c.buf = calloc(1, c.bytes);
		if (!c.buf)
			die(EXIT_COMM, "cannot allocate %zu bytes for the node check", c.bytes);
	}
	if (e->rank == 0)
		rc = nc_master(&c, e, o, ne, r->ctl);
	else
		rc = nc_member(&c, e, ne, r->ctl_fd);
	free(c.buf);
	return rc;
}

/* ---- main ---- */

/* Algorithm bandwidth (GB/s) of iters all-reduces of count elements in seconds. */
static double algbw(const struct opts *o, size_t count, double seconds)
{
	double t = seconds / o->iters, bytes = (double)(count * ar_dtype_size(o->dtype));

	return t > 0 ? bytes / t / 1e9 : 0;
}

/* Bus bandwidth: what each rank's links carried, as nccl-tests defines it. */
static double busbw(const struct rankenv *e, double alg)
{
	return alg * 2.0 * (e->world - 1) / e->world;
}

static void report(const struct rankenv *e, const struct opts *o, const char *bk, size_t count,
		   double seconds, const char *error)
{
	double t = seconds / o->iters;
	double alg = algbw(o, count, seconds);
	double bus = busbw(e, alg);

	printf("{\"rank\":%d,\"world_size\":%d,\"local_rank\":%d,\"backend\":\"%s\","
	       "\"dtype\":\"%s\",\"bytes\":%zu,\"iters\":%d,\"time_s\":%.6f,"
	       "\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"ok\":%s",
	       e->rank, e->world, e->local_rank, bk, ar_dtype_name(o->dtype),
	       count * ar_dtype_size(o->dtype), o->iters, t, alg, bus, error ? "false" : "true");
	if (error)
		printf(",\"error\":\"%s\"", error); /* our own text: no quotes to escape */
	printf("}\n");
	fflush(stdout);
}

static int mismatch(const struct rankenv *e, const struct opts *o, const char *bk, size_t count,
		    double seconds, long long bad, double got, int iter)
{
	char msg[MSG_MAX];

	snprintf(msg, sizeof msg,
		 "element %lld is %.17g after the all-reduce, expected %.17g (iteration %d)", bad,
		 got, ar_expected((size_t)bad, e->world), iter);
	report(e, o, bk, count, seconds, msg);
	fprintf(stderr, PROG ": rank %d: %s\n", e->rank, msg);
	return EXIT_MISMATCH;
}

static int run_nccl(const struct ar_nccl_ops *ops, const struct rankenv *e, const struct opts *o,
		    const struct nc_env *ne, size_t count)
{
	struct ar_nccl_job job = {.rank = e->rank,
				  .world = e->world,
				  .local_rank = e->local_rank,
				  .local_world = e->local_world,
				  .timeout = o->timeout,
				  .dtype = o->dtype,
				  .count = count,
				  .iters = o->iters,
				  .warmup = o->warmup,
				  .poison = o->poison};
	struct ar_nccl_result res = {0};
	struct rdv r = {0};
	unsigned char id[AR_NCCL_ID_BYTES];
	char msg[MSG_MAX] = "";
	int lfd = -1, port = 0, rc = EXIT_OK;

	r.keep = ne != NULL;
	r.peers = calloc((size_t)e->world, sizeof *r.peers);
	if (!r.peers)
		die(EXIT_COMM, "out of memory");
	if (ne && e->world > 1) /* the node check's pairs connect here */
		lfd = listen_on(&port, o->listen_addr, AF_INET, 0, "node check");
	if (e->rank == 0) {
		if (ops->unique_id(id, msg, sizeof msg))
			die(EXIT_USAGE, "nccl: %s", msg);
		if (e->world > 1)
			rdv_master(&r, e, o, "nccl", port, id);
		else
			memcpy(r.id, id, sizeof id);
	} else {
		rdv_join(&r, e, o, "nccl", port, true);
	}
	if (ops->run(&res, &job, r.id, msg, sizeof msg))
		die(EXIT_COMM, "nccl: %s", msg);
	if (res.bad >= 0)
		rc = mismatch(e, o, "nccl", count, res.seconds, res.bad, res.got, o->iters);
	else
		report(e, o, "nccl", count, res.seconds, NULL);
	if (rc == EXIT_OK && ne)
		rc = node_check(e, o, ne, &r, lfd, ops, res.seconds / o->iters,
				count * ar_dtype_size(o->dtype));
	if (lfd >= 0)
		close(lfd);
	free(r.ctl);
	free(r.peers);
	return rc;
}

static int run_tcp(const struct rankenv *e, const struct opts *o, const struct nc_env *ne,
		   size_t count)
{
	size_t es = ar_dtype_size(o->dtype),
	       maxchunk = (count + (size_t)e->world - 1) / (size_t)e->world;
	struct ring g = {
	    .rank = e->rank, .world = e->world, .timeout = o->timeout, .next = -1, .prev = -1};
	struct rdv r = {0};
	char *buf, *tmp;
	double seconds = 0;
	int lfd = -1, port = 0, rc = EXIT_OK;

	r.keep = ne != NULL;
	buf = malloc(count * es);
	tmp = malloc((maxchunk ? maxchunk : 1) * es);
	r.peers = calloc((size_t)e->world, sizeof *r.peers);
	if (!buf || !tmp || !r.peers)
		die(EXIT_COMM, "cannot allocate %zu bytes for the buffer", count * es);
	if (e->world > 1) {
		/* listen first, so the ring port exists before anyone learns it */
		lfd = listen_on(&port, o->listen_addr, AF_INET, 0, "ring");
		if (e->rank == 0)
			rdv_master(&r, e, o, "tcp", port, NULL);
		else
			rdv_join(&r, e, o, "tcp", port, false);
		g.peers = r.peers;
		ring_connect(&g, lfd, o);
		if (!ne) {
			close(lfd);
			lfd = -1;
		}
	}
	for (int it = 0; it < o->warmup + o->iters && rc == EXIT_OK; it++) {
		long long bad;
		double t0, got;

		ar_fill(buf, o->dtype, count, e->rank, o->poison);
		t0 = now_s();
		if (e->world > 1)
			ring_allreduce(&g, buf, tmp, count, o->dtype);
		if (it >= o->warmup)
			seconds += now_s() - t0;
		bad = ar_check(buf, o->dtype, count, e->world, &got);
		if (bad >= 0)
			rc = mismatch(e, o, "tcp", count, seconds, bad, got, it);
	}
	if (rc == EXIT_OK)
		report(e, o, "tcp", count, seconds, NULL);
	if (rc == EXIT_OK && ne)
		/* pairs connect to the ring port */
		rc = node_check(e, o, ne, &r, lfd, NULL, seconds / o->iters, count * es);
	if (lfd >= 0)
		close(lfd);
	if (g.next >= 0)
		close(g.next);
	if (g.prev >= 0)
		close(g.prev);
	free(buf);
	free(tmp);
	free(r.ctl);
	free(r.peers);
	return rc;
}

int main(int argc, char **argv)
{
	const struct ar_nccl_ops *ops = NULL;
	struct nc_env ne;
	struct rankenv e;
	struct opts o;
	char msg[MSG_MAX] = "";
	size_t count;

	signal(SIGPIPE, SIG_IGN);
	parse_opts(&o, argc, argv);
	read_env(&e);
	count = (size_t)(o.bytes / ar_dtype_size(o.dtype));
	if (o.poison >= 0 && (unsigned long long)o.poison >= count)
		die(EXIT_USAGE, "--poison-index %lld is past the last element %zu", o.poison,
		    count - 1);
	if (o.node_check) {
		const char *t = getenv("TY_ALLREDUCE_THROTTLE_BPS");
		unsigned long long bps = 0;

		read_nc_env(&ne, &e);
		if (t && (!parse_bytes(&bps, t) || bps == 0))
			die(EXIT_USAGE,
			    "TY_ALLREDUCE_THROTTLE_BPS='%s': expected bytes per second like 1M", t);
		o.throttle_bps = (double)bps;
	}
	if (o.backend != BK_TCP) {
		ops = nccl_load(&o, msg, sizeof msg);
		if (ops) {
			int n = ops->device_count(msg, sizeof msg);

			if (n == 0)
				snprintf(
				    msg, sizeof msg, "no GPU is visible (CUDA_VISIBLE_DEVICES=%s)",
				    getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES")
								   : "unset");
			if (n <= 0)
				ops = NULL;
		}
		if (!ops && o.backend == BK_NCCL)
			die(EXIT_USAGE, "backend nccl unavailable: %s", msg);
	}
	if (ops)
		return run_nccl(ops, &e, &o, o.node_check ? &ne : NULL, count);
	return run_tcp(&e, &o, o.node_check ? &ne : NULL, count);
}
