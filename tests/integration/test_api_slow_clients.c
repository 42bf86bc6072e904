/*
 * Slow and broken clients cannot starve the API: connections that stall in
 * the middle of a request are closed after --connection-timeout, and while
 * they hang (and while long-polls are parked) other requests are served.
 */
#include "ty_stack.h"
#include "ty_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STALLED 200

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static int port_of(const char *url)
{
	const char *colon = strrchr(url, ':');

	return colon ? atoi(colon + 1) : 0;
}

/* A connection that sends half a request and then nothing. */
static int stall(int port, const char *partial)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (write(fd, partial, strlen(partial)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether the server closed fd (EOF or reset) within timeout_ms. */
static bool closed_by_server(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[512];

	if (poll(&p, 1, timeout_ms) <= 0)
		return false;
	/* a 408 answer before the close is fine too: read to the end */
	for (int i = 0; i < 64; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			return true;
		if (poll(&p, 1, timeout_ms) <= 0)
			return false;
	}
	return false;
}

TY_TEST(stalled_connections_neither_block_others_nor_live_forever)
{
	const char *db = ty_test_db_new();
	const char *const args[] = {"--connection-timeout", "2", "--threads", "2", NULL};
	struct ty_api *api = ty_test_api_start(db, args);
	const char *admin = ty_test_admin_token(db, "slow-admin");
	int port = port_of(ty_test_api_url(api)), fds[STALLED], open_fds = 0;
	long long t0;

	/* headers never finished, and a body that never comes */
	for (int i = 0; i < STALLED; i++) {
		fds[i] = stall(port, i % 2 ? "GET /v1/teams HTTP/1.1\r\nHost: x\r\nAuthor"
					   : "POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: "
					     "application/json\r\nContent-Length: 1000\r\n\r\n{\"te");
		if (fds[i] >= 0)
			open_fds++;
	}
	CHECK_INT_EQ(open_fds, STALLED);

	/* meanwhile the API answers everyone else at once */
	t0 = now_ms();
	for (int i = 0; i < 20; i++) {
		struct ty_resp r = {0};

		ty_http(&r, "GET", "/v1/teams", admin, NULL, NULL);
		CHECK_INT_EQ(r.status, 200);
		ty_resp_free(&r);
	}
	ty_test_note("20 requests beside %d stalled connections took %lld ms", STALLED,
		     now_ms() - t0);
	CHECK(now_ms() - t0 < 10000); /* generous: it is milliseconds when healthy */

	/* and it drops the stalled ones after the timeout (2 s; allow 15) */
	for (int i = 0; i < STALLED; i++) {
		if (fds[i] < 0)
			continue;
		ty_test_context("stalled connection %d", i);
		CHECK(closed_by_server(fds[i], 15000));
		close(fds[i]);
	}
	ty_test_context(NULL);
	{
		struct ty_resp r = {0};

		ty_http(&r, "GET", "/healthz", NULL, NULL, NULL);
		CHECK_INT_EQ(r.status, 200);
		ty_resp_free(&r);
	}
}

struct watcher {
	const char *url_path;
	const char *token;
	int status;
};

static void *watch(void *arg)
{
	struct watcher *w = arg;
	struct ty_resp r = {0};

	w->status = ty_http(&r, "GET", w->url_path, w->token, NULL, NULL);
	ty_resp_free(&r);
	return NULL;
}

TY_TEST(parked_long_polls_do_not_hold_worker_threads)
{
	const struct ty_stack *s = ty_stack_get();
	const char *team = ty_mk_team("slow", 8, -1);
	long long job = ty_mk_job(s->admin, team, NULL);
	struct watcher w[16];
	pthread_t th[16];
	long long t0;

	/* more parked watches than the server has threads */
	for (int i = 0; i < 16; i++) {
		w[i] = (struct watcher){ty_test_strf("/v1/jobs/%lld/events?after=1&wait=4", job),
					s->admin, 0};
		pthread_create(&th[i], NULL, watch, &w[i]);
	}
	usleep(300 * 1000);
	t0 = now_ms();
	for (int i = 0; i < 10; i++) {
		struct ty_resp r = {0};

		ty_http(&r, "GET", ty_test_strf("/v1/jobs/%lld", job), s->admin, NULL, NULL);
		CHECK_INT_EQ(r.status, 200);
		ty_resp_free(&r);
	}
	CHECK(now_ms() - t0 < 3000); /* before the watches time out */
	for (int i = 0; i < 16; i++) {
		pthread_join(th[i], NULL);
		CHECK_INT_EQ(w[i].status, 200);
	}
}
