/*
 * trainyard-broker: the embedded Kafka-protocol broker of the local stack.
 * Runs librdkafka's mock cluster, creates Trainyard's topics and publishes
 * the cluster's bootstrap list in a file until it is told to stop.
 */
#include "broker_control.h"
#include "ty_config.h"
#include "ty_err.h"
#include "ty_kafka.h"
#include "ty_log.h"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ENV_PREFIX "TRAINYARD_BROKER"
#define MAX_PARTITIONS 100000
#define METADATA_TIMEOUT_MS 10000

static const struct ty_opt opts[] = {
	{"bootstrap-file", TY_OPT_STR, NULL, 0, 0,
	 "file the bootstrap server list is written to (atomically; required); removed on exit"},
	{"brokers", TY_OPT_INT, "3", 1, 64, "number of brokers in the mock cluster"},
	{"replication-factor", TY_OPT_INT, "1", 1, 64,
	 "replication factor of the topics (at most --brokers)"},
	{"dispatch-partitions", TY_OPT_INT, "64", 1, MAX_PARTITIONS,
	 "partitions of topic 'trainyard.dispatch'"},
	{"events-partitions", TY_OPT_INT, "16", 1, MAX_PARTITIONS,
	 "partitions of topic 'trainyard.events'"},
	{"nodes-partitions", TY_OPT_INT, "8", 1, MAX_PARTITIONS,
	 "partitions of topic 'trainyard.nodes'"},
	{"control-fifo", TY_OPT_STR, NULL, 0, 0,
	 "fault injection for tests: a FIFO created here that takes one command a line "
	 "(request errors, one broker down/up, leader moves; deploy/local/README.md); "
	 "off unless set"},
	{"log-level", TY_OPT_STR, "info", 0, 0, "debug, info, warn or error"},
	{"log-json", TY_OPT_BOOL, "false", 0, 0, "log JSON lines instead of text"},
	{"help", TY_OPT_BOOL, "false", 0, 0, "print this help and exit"},
};
#define N_OPTS (sizeof(opts) / sizeof(opts[0]))

struct topic {
	const char *name;
	const char *opt; /* option holding its partition count */
	int partitions;
};

/* Topic names are proto/'s business; the broker only needs to pre-create them. */
static struct topic topics[] = {
	{"trainyard.dispatch", "dispatch-partitions", 0},
	{"trainyard.events", "events-partitions", 0},
	{"trainyard.nodes", "nodes-partitions", 0},
};
#define N_TOPICS (sizeof(topics) / sizeof(topics[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: trainyard-broker --bootstrap-file PATH [options]\n"
		   "\n"
		   "Embedded Kafka-protocol broker (librdkafka mock cluster) for the local stack\n"
		   "and tests. Listens on random 127.0.0.1 ports, writes them to the bootstrap\n"
		   "file and runs until SIGTERM or SIGINT. Forgets everything when it exits.\n"
		   "\n");
	ty_config_usage(f, opts, N_OPTS, ENV_PREFIX);
}

static int cluster_start(rd_kafka_t **out, int brokers, struct ty_err *err)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char n[16], errstr[512];
	int rc;

	*out = NULL;
	snprintf(n, sizeof(n), "%d", brokers);
	if ((rc = ty_kafka_conf_set(conf, "test.mock.num.brokers", n, err)) ||
	    (rc = ty_kafka_conf_set(conf, "client.id", "trainyard-broker", err))) {
		rd_kafka_conf_destroy(conf);
		return rc;
	}
	rd_kafka_conf_set_log_cb(conf, ty_kafka_log);
	*out = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!*out) {
		rd_kafka_conf_destroy(conf);
		return ty_err_set(err, TY_EKAFKA, "cannot create mock cluster: %s", errstr);
	}
	if (!rd_kafka_handle_mock_cluster(*out)) {
		rd_kafka_destroy(*out);
		*out = NULL;
		return ty_err_set(err, TY_EKAFKA, "librdkafka did not create a mock cluster");
	}
	return 0;
}

static int topics_create(rd_kafka_mock_cluster_t *mc, int replication, struct ty_err *err)
{
	for (size_t i = 0; i < N_TOPICS; i++) {
		rd_kafka_resp_err_t e =
			rd_kafka_mock_topic_create(mc, topics[i].name, topics[i].partitions, replication);

		if (e)
			return ty_err_set(err, TY_EKAFKA, "cannot create topic '%s': %s",
					  topics[i].name, rd_kafka_err2str(e));
		ty_debug("created topic '%s' with %d partitions", topics[i].name,
			 topics[i].partitions);
	}
	return 0;
}

/*
 * Ask the cluster over TCP, like any client will, that every topic is there
 * with its partitions: the bootstrap file then announces a usable broker.
 */
static int topics_check(rd_kafka_t *rk, struct ty_err *err)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_resp_err_t e;
	int rc = 0;

	e = rd_kafka_metadata(rk, 1, NULL, &md, METADATA_TIMEOUT_MS);
	if (e)
		return ty_err_set(err, TY_EKAFKA, "cannot read metadata from the mock cluster: %s",
				  rd_kafka_err2str(e));
	for (size_t i = 0; i < N_TOPICS && !rc; i++) {
		int found = -1;

		for (int t = 0; t < md->topic_cnt; t++)
			if (strcmp(md->topics[t].topic, topics[i].name) == 0 && !md->topics[t].err)
				found = md->topics[t].partition_cnt;
		if (found != topics[i].partitions)
			rc = ty_err_set(err, TY_EKAFKA,
					"topic '%s' has %d partitions in the metadata, expected %d",
					topics[i].name, found, topics[i].partitions);
	}
	rd_kafka_metadata_destroy(md);
	return rc;
}

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Readers never see a partial file: write a temporary, fsync, rename. */
static int bootstrap_write(const char *path, const char *list, struct ty_err *err)
{
	char tmp[4096];
	int fd, n;

	n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return ty_err_set(err, TY_EINVAL, "bootstrap file path '%s' is too long", path);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return ty_err_set(err, TY_EIO, "cannot create '%s': %s", tmp, strerror(errno));
	if (write_all(fd, list, strlen(list)) || write_all(fd, "\n", 1) || fsync(fd)) {
		int e = errno;

		close(fd);
		unlink(tmp);
		return ty_err_set(err, TY_EIO, "cannot write '%s': %s", tmp, strerror(e));
	}
	if (close(fd) || rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		return ty_err_set(err, TY_EIO, "cannot install '%s': %s", path, strerror(e));
	}
	return 0;
}

/* Remove the file only while it still names this cluster, not a successor's. */
static void bootstrap_remove(const char *path, const char *list)
{
	char line[4096] = "";
	FILE *f = fopen(path, "r");

	if (!f)
		return;
	if (fgets(line, sizeof(line), f))
		line[strcspn(line, "\r\n")] = '\0';
	fclose(f);
	if (strcmp(line, list) == 0 && unlink(path) != 0)
		ty_warn_errno("cannot remove '%s'", path);
}

/*
 * Outage injection for tests and drills: the mock cluster forgets everything
 * when its process restarts, so an outage is simulated by taking its
 * brokers down (SIGUSR1) and up again (SIGUSR2), with their data kept.
 */
static void set_brokers(rd_kafka_mock_cluster_t *mc, int brokers, bool up)
{
	for (int id = 1; id <= brokers; id++) {
		rd_kafka_resp_err_t e = up ? rd_kafka_mock_broker_set_up(mc, id)
					   : rd_kafka_mock_broker_set_down(mc, id);

		if (e)
			ty_warn("cannot set broker %d %s: %s", id, up ? "up" : "down",
				rd_kafka_err2str(e));
	}
	ty_info("all %d broker(s) %s", brokers, up ? "up" : "down (SIGUSR2 brings them back)");
}

/* ---- --control-fifo: fault injection commands (broker_control.h) ---- */

static struct topic *topic_find(const char *name)
{
	for (size_t i = 0; i < N_TOPICS; i++)
		if (!strcmp(topics[i].name, name))
			return &topics[i];
	return NULL;
}

static rd_kafka_resp_err_t control_apply(rd_kafka_mock_cluster_t *mc, const struct bc_cmd *c,
					 int brokers, struct ty_err *err)
{
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
	struct topic *t = NULL;

	if ((c->op == BC_LEADER || c->op == BC_LEADERS || c->op == BC_FOLLOWER) &&
	    !(t = topic_find(c->topic))) {
		ty_err_set(err, TY_EINVAL, "no topic '%s'", c->topic);
		return RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC;
	}
	if (t && c->partition >= t->partitions) {
		ty_err_set(err, TY_EINVAL, "topic '%s' has %d partitions, no %d", c->topic,
			   t->partitions, (int)c->partition);
		return RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
	}
	switch (c->op) {
	case BC_ERRORS: {
		rd_kafka_resp_err_t *errs = calloc((size_t)c->count, sizeof(*errs));

		if (!errs) {
			ty_err_set(err, TY_ENOMEM, NULL);
			return RD_KAFKA_RESP_ERR__FAIL;
		}
		for (int i = 0; i < c->count; i++)
			errs[i] = (rd_kafka_resp_err_t)c->error;
		rd_kafka_mock_push_request_errors_array(mc, c->api, (size_t)c->count, errs);
		free(errs);
		break;
	}
	case BC_BROKER_ERRORS:
		/* one call per error: the variadic list is (error, rtt) pairs */
		for (int i = 0; i < c->count && !e; i++)
			e = rd_kafka_mock_broker_push_request_error_rtts(
				mc, c->broker, c->api, 1, (rd_kafka_resp_err_t)c->error, c->rtt_ms);
		break;
	case BC_CLEAR:
		rd_kafka_mock_clear_request_errors(mc, c->api);
		break;
	case BC_BROKER_DOWN:
		e = rd_kafka_mock_broker_set_down(mc, c->broker);
		break;
	case BC_BROKER_UP:
		e = rd_kafka_mock_broker_set_up(mc, c->broker);
		break;
	case BC_RTT:
		e = rd_kafka_mock_broker_set_rtt(mc, c->broker, c->rtt_ms);
		break;
	case BC_LEADER:
		e = rd_kafka_mock_partition_set_leader(mc, c->topic, c->partition, c->broker);
		break;
	case BC_LEADERS:
		for (int p = 0; p < t->partitions && !e; p++)
			e = rd_kafka_mock_partition_set_leader(mc, c->topic, p,
							       (p + c->shift) % brokers + 1);
		break;
	case BC_FOLLOWER:
		e = rd_kafka_mock_partition_set_follower(mc, c->topic, c->partition, c->broker);
		break;
	case BC_COORDINATOR:
		e = rd_kafka_mock_coordinator_set(mc, c->key_type, c->key, c->broker);
		break;
	}
	if (e)
		ty_err_set(err, TY_EKAFKA, "%s", rd_kafka_err2str(e));
	return e;
}

struct control {
	const char *path; /* NULL: none */
	int fd;
	char buf[4096];
	size_t len;
};

/* Create the FIFO (replacing a stale one) and hold it open for reading and writing,
 * so it never reports end-of-file between writers. */
static int control_open(struct control *ctl, struct ty_err *err)
{
	struct stat st;

	ctl->fd = -1;
	if (!ctl->path)
		return 0;
	if (lstat(ctl->path, &st) == 0) {
		if (!S_ISFIFO(st.st_mode))
			return ty_err_set(err, TY_EINVAL,
					  "control FIFO '%s' exists and is not a FIFO", ctl->path);
		if (unlink(ctl->path))
			return ty_err_set(err, TY_EIO, "cannot remove old FIFO '%s': %s",
					  ctl->path, strerror(errno));
	}
	if (mkfifo(ctl->path, 0600))
		return ty_err_set(err, TY_EIO, "cannot create FIFO '%s': %s", ctl->path,
				  strerror(errno));
	if ((ctl->fd = open(ctl->path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0)
		return ty_err_set(err, TY_EIO, "cannot open FIFO '%s': %s", ctl->path,
				  strerror(errno));
	ty_info("fault injection: commands are read from '%s'", ctl->path);
	return 0;
}

static void control_close(struct control *ctl)
{
	if (ctl->fd >= 0) {
		close(ctl->fd);
		unlink(ctl->path);
	}
}

static void control_line(rd_kafka_mock_cluster_t *mc, const char *line, int brokers)
{
	struct bc_cmd c;
	struct ty_err err = {0};

	line += strspn(line, " \t");
	if (!*line || *line == '#')
		return;
	if (bc_parse(&c, line, brokers, &err) || control_apply(mc, &c, brokers, &err))
		ty_warn("control: '%s' failed: %s", line, err.msg);
	else
		ty_info("control: '%s' done", line);
}

/* Run every complete line the FIFO holds. */
static void control_read(struct control *ctl, rd_kafka_mock_cluster_t *mc, int brokers)
{
	for (;;) {
		ssize_t n = read(ctl->fd, ctl->buf + ctl->len, sizeof(ctl->buf) - 1 - ctl->len);
		char *nl;

		if (n <= 0) {
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				ty_warn_errno("cannot read '%s'", ctl->path);
			return;
		}
		ctl->len += (size_t)n;
		ctl->buf[ctl->len] = '\0';
		while ((nl = strchr(ctl->buf, '\n'))) {
			*nl = '\0';
			control_line(mc, ctl->buf, brokers);
			ctl->len -= (size_t)(nl + 1 - ctl->buf);
			memmove(ctl->buf, nl + 1, ctl->len + 1);
		}
		if (ctl->len == sizeof(ctl->buf) - 1) {
			ty_warn("control: a line longer than %zu bytes was dropped", ctl->len);
			ctl->len = 0;
		}
	}
}

static int wait_for_signal(rd_kafka_t *rk, const sigset_t *set, int brokers,
			   struct control *ctl)
{
	/* with a control FIFO the loop wakes often enough to run commands at once */
	const struct timespec tick = {.tv_sec = ctl->fd >= 0 ? 0 : 1};

	for (;;) {
		int sig;

		if (ctl->fd >= 0) {
			struct pollfd pfd = {.fd = ctl->fd, .events = POLLIN};

			if (poll(&pfd, 1, 100) > 0)
				control_read(ctl, rd_kafka_handle_mock_cluster(rk), brokers);
		}
		sig = sigtimedwait(set, NULL, &tick);
		if (sig == SIGUSR1 || sig == SIGUSR2) {
			set_brokers(rd_kafka_handle_mock_cluster(rk), brokers, sig == SIGUSR2);
			continue;
		}
		if (sig > 0)
			return sig;
		if (errno != EAGAIN && errno != EINTR) {
			ty_error_errno("cannot wait for signals");
			return -1;
		}
		rd_kafka_poll(rk, 0);
	}
}

int main(int argc, char **argv)
{
	struct ty_err err = {0};
	struct ty_config *cfg = NULL;
	rd_kafka_t *rk = NULL;
	rd_kafka_mock_cluster_t *mc;
	const char *path = NULL, *list;
	char *bootstraps = NULL;
	struct control ctl = {.fd = -1};
	sigset_t sigs;
	int level, brokers, replication, sig, rest, status = 1;

	ty_log_init("trainyard-broker", TY_LOG_INFO, false);
	if (!(cfg = ty_config_new(opts, N_OPTS, ENV_PREFIX))) {
		ty_error("out of memory");
		goto out;
	}
	if (ty_config_load(cfg, argc, argv, &rest, &err)) {
		fprintf(stderr, "trainyard-broker: %s (try --help)\n", err.msg);
		status = 2;
		goto out;
	}
	if (ty_config_bool(cfg, "help")) {
		usage(stdout);
		status = 0;
		goto out;
	}
	if (rest < argc) {
		fprintf(stderr, "trainyard-broker: unexpected argument '%s' (try --help)\n",
			argv[rest]);
		status = 2;
		goto out;
	}
	if ((level = ty_log_level_parse(ty_config_str(cfg, "log-level"))) < 0) {
		fprintf(stderr, "trainyard-broker: option 'log-level': '%s' is not one of "
				"debug, info, warn, error\n",
			ty_config_str(cfg, "log-level"));
		status = 2;
		goto out;
	}
	ty_log_init("trainyard-broker", (enum ty_log_level)level, ty_config_bool(cfg, "log-json"));

	path = ty_config_str(cfg, "bootstrap-file");
	if (!path || !*path) {
		fprintf(stderr, "trainyard-broker: option '--bootstrap-file' is required "
				"(try --help)\n");
		status = 2;
		goto out;
	}
	brokers = (int)ty_config_int(cfg, "brokers");
	replication = (int)ty_config_int(cfg, "replication-factor");
	if (replication > brokers) {
		fprintf(stderr,
			"trainyard-broker: replication factor %d needs at least %d brokers, "
			"not %d\n",
			replication, replication, brokers);
		status = 2;
		goto out;
	}
	for (size_t i = 0; i < N_TOPICS; i++)
		topics[i].partitions = (int)ty_config_int(cfg, topics[i].opt);

	/* every librdkafka thread inherits this mask, so only sigtimedwait sees them */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGUSR1);
	sigaddset(&sigs, SIGUSR2);
	if ((errno = pthread_sigmask(SIG_BLOCK, &sigs, NULL))) {
		ty_error_errno("cannot block signals");
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);

	if (cluster_start(&rk, brokers, &err))
		goto fail;
	mc = rd_kafka_handle_mock_cluster(rk);
	if (topics_create(mc, replication, &err) || topics_check(rk, &err))
		goto fail;
	list = rd_kafka_mock_cluster_bootstraps(mc);
	if (!(bootstraps = strdup(list))) {
		ty_error("out of memory");
		goto out;
	}
	ctl.path = ty_config_str(cfg, "control-fifo");
	if (ctl.path && !*ctl.path)
		ctl.path = NULL;
	if (control_open(&ctl, &err))
		goto fail;
	if (bootstrap_write(path, bootstraps, &err))
		goto fail;
	ty_info("mock cluster of %d broker(s) at '%s' (topics: dispatch %d, events %d, nodes %d "
		"partitions; replication factor %d), bootstrap list in '%s'",
		brokers, bootstraps, topics[0].partitions, topics[1].partitions,
		topics[2].partitions, replication, path);

	if ((sig = wait_for_signal(rk, &sigs, brokers, &ctl)) < 0)
		goto out;
	ty_info("received %s, stopping", sig == SIGINT ? "SIGINT" : "SIGTERM");
	status = 0;
	goto out;
fail:
	ty_error("%s", err.msg);
out:
	control_close(&ctl);
	if (bootstraps)
		bootstrap_remove(path, bootstraps);
	if (rk)
		rd_kafka_destroy(rk);
	free(bootstraps);
	ty_config_free(cfg);
	if (status == 0 && rk)
		ty_info("stopped");
	return status;
}
