/*
 * trainyard-simexec: many simulated nodes in one process, for dispatch at
 * scale (bench/dispatch) — the executor's side of the Kafka protocol
 * (docs/dispatch.md) without processes behind it.
 *
 * Each node registers (simulated: true) and heartbeats with its running and
 * recently finished attempts, as trainyard-executor does. A launch for one
 * of its nodes is answered at once with launch_accepted, rank_started for
 * every local rank and attempt_running; after --run-ms the attempt exits 0
 * (rank_exited per rank, then attempt_exited). A kill ends it as cancelled
 * (preempted for reason "preempted"); a launch seen before is acknowledged
 * again (launch_accepted, duplicate) and not run. It consumes every
 * partition of trainyard.dispatch from its end and keeps only messages for
 * its nodes. Every message carries the node's own seq, as from a real
 * executor. One thread; the only state is in memory.
 *
 * It holds the node secret and derives each simulated node's key from it
 * (a real executor holds only its own): everything it sends carries its
 * node's MAC, and it acts only on dispatch messages the scheduler signed.
 */
#include "proto.h"
#include "ty_config.h"
#include "ty_err.h"
#include "ty_kafka.h"
#include "ty_log.h"
#include "ty_time.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PROG "trainyard-simexec"
#define ENV_PREFIX "TRAINYARD_SIMEXEC"
#define FINISHED_KEEP 64 /* finished attempts repeated in each node's heartbeat */

static const struct ty_opt options[] = {
    {"kafka-bootstrap", TY_OPT_STR, NULL, 0, 0,
     "Kafka bootstrap servers 'host:port,...' or '@FILE' holding that list (required)"},
    {"nodes", TY_OPT_INT, "100", 1, 100000, "number of simulated nodes"},
    {"node-prefix", TY_OPT_STR, "sim-", 0, 0,
     "node ids are PREFIX plus a 5-digit index (sim-00000, ...)"},
    {"first-index", TY_OPT_INT, "0", 0, 10000000, "index of the first node"},
    {"gpus", TY_OPT_INT, "8", 0, 1024, "GPUs per node"},
    {"block-nodes", TY_OPT_INT, "16", 1, 100000,
     "nodes per topology block (label block=b<index / N>)"},
    {"rack-blocks", TY_OPT_INT, "4", 1, 100000, "blocks per rack (label rack=r<...>)"},
    {"address", TY_OPT_STR, "127.0.0.1", 0, 0, "the address every node registers"},
    {"run-ms", TY_OPT_INT, "0", 0, 86400000,
     "how long each attempt runs before it exits 0 (0: as soon as it runs)"},
    {"heartbeat-ms", TY_OPT_INT, "2000", 50, 600000, "heartbeat interval of each node"},
    {"rank-events", TY_OPT_BOOL, "true", 0, 0,
     "send rank_started and rank_exited per rank, as the real executor does"},
    {"stats-file", TY_OPT_STR, NULL, 0, 0,
     "write 'launches=N exited=N rss_kb=N cpu_ms=N' there every second"},
    {"node-secret-file", TY_OPT_STR, NULL, 0, 0,
     "the scheduler's --node-secret-file: each node's key derives from it (required)"},
    {"dispatch-pubkey", TY_OPT_STR, NULL, 0, 0,
     "the scheduler's public dispatch key: unsigned dispatch is skipped (required)"},
    {"log-level", TY_OPT_STR, "info", 0, 0, "debug, info, warn or error"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help and exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

struct run {
	int64_t job, attempt;
	int first_rank, nranks;
	int64_t end_ms; /* monotonic */
};

struct done {
	int64_t job, attempt;
	int exit_code;
	const char *failure_class; /* static */
};

struct node {
	char id[PROTO_NODE_ID_MAX + 1];
	char key[PROTO_NODE_KEY_LEN + 1]; /* its node key */
	int64_t seq;
	int64_t next_hb_ms;
	struct run *run;
	int nrun, caprun;
	struct done done[FINISHED_KEEP];
	int ndone, donepos;
};

struct sim {
	rd_kafka_t *producer, *consumer;
	struct node *nodes;
	int nnodes, gpus;
	const char *prefix;
	int first_index;
	int64_t run_ms, hb_ms;
	bool rank_events;
	struct ty_ed25519_key *dispatch_key;
	char boot_id[40];
	uint64_t launches, exited, duplicates, produce_errors, rejected;
};

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

/* The node of an id ("PREFIX" + 5 digits), or NULL when it is not ours. */
static struct node *node_of(struct sim *s, const char *id)
{
	size_t n = strlen(s->prefix);
	char *end;
	long i;

	if (strncmp(id, s->prefix, n) != 0)
		return NULL;
	i = strtol(id + n, &end, 10) - s->first_index;
	if (*end || i < 0 || i >= s->nnodes)
		return NULL;
	return strcmp(s->nodes[i].id, id) == 0 ? &s->nodes[i] : NULL;
}

static void emit(struct sim *s, struct node *n, enum proto_type t, int64_t job, int64_t attempt,
		 json_t *data)
{
	struct proto_msg m = {.type = t, .job = job, .attempt = attempt, .data = data};
	struct ty_err err = {0};
	char *buf = NULL, key[24], mac[PROTO_NODE_KEY_LEN + 1];
	size_t len;
	rd_kafka_resp_err_t e;

	m.seq = ++n->seq;
	m.ts = ty_wall_ms();
	snprintf(m.node, sizeof(m.node), "%s", n->id);
	if (!data || proto_encode(&buf, &len, &m, &err)) {
		ty_error("cannot encode a '%s' message: %s", proto_type_name(t),
			 data ? err.msg : "out of memory");
		goto out;
	}
	/* one job's events share a key and stay in order; node messages by node */
	if (job)
		snprintf(key, sizeof(key), "%lld", (long long)job);
	else
		snprintf(key, sizeof(key), "%.23s", n->id);
	proto_mac(mac, n->key, buf, len);
	while ((e = rd_kafka_producev(s->producer, RD_KAFKA_V_TOPIC(proto_type_topic(t)),
				      RD_KAFKA_V_KEY(key, strlen(key)),
				      RD_KAFKA_V_VALUE(buf, len),
				      RD_KAFKA_V_HEADER(PROTO_HDR_MAC, mac, PROTO_NODE_KEY_LEN),
				      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END)) ==
	       RD_KAFKA_RESP_ERR__QUEUE_FULL)
		rd_kafka_poll(s->producer, 10);
	if (e) {
		s->produce_errors++;
		ty_error("cannot produce '%s': %s", proto_type_name(t), rd_kafka_err2str(e));
	}
out:
	free(buf);
	json_decref(data);
}

static bool ran_here(const struct node *n, int64_t job, int64_t attempt)
{
	for (int i = 0; i < n->nrun; i++)
		if (n->run[i].job == job && n->run[i].attempt == attempt)
			return true;
	for (int i = 0; i < n->ndone; i++)
		if (n->done[i].job == job && n->done[i].attempt == attempt)
			return true;
	return false;
}

static void remember_done(struct node *n, int64_t job, int64_t attempt, int code,
			  const char *failure_class)
{
	n->done[n->donepos] = (struct done){job, attempt, code, failure_class};
	n->donepos = (n->donepos + 1) % FINISHED_KEEP;
	if (n->ndone < FINISHED_KEEP)
		n->ndone++;
}

/* End run i of node n: its exit events, then it leaves the running list. */
static void finish(struct sim *s, struct node *n, int i, int code, int sig,
		   const char *failure_class, const char *message)
{
	struct run r = n->run[i];

	if (s->rank_events)
		for (int k = 0; k < r.nranks; k++)
			emit(s, n, PROTO_RANK_EXITED, r.job, r.attempt,
			     json_pack("{s:i, s:i, s:i}", "rank", r.first_rank + k, "exit_code",
				       code, "signal", sig));
	emit(s, n, PROTO_ATTEMPT_EXITED, r.job, r.attempt,
	     json_pack("{s:i, s:s, s:s}", "exit_code", code, "failure_class", failure_class,
		       "message", message));
	remember_done(n, r.job, r.attempt, code, failure_class);
	n->run[i] = n->run[--n->nrun];
	s->exited++;
}

static void on_launch(struct sim *s, struct node *n, const struct proto_msg *m)
{
	int first = (int)json_integer_value(json_object_get(m->data, "first_rank"));
	int nranks = (int)json_integer_value(json_object_get(m->data, "local_world_size"));

	if (ran_here(n, m->job, m->attempt)) {
		/* a re-sent launch of an attempt it runs or ran: acknowledged again, not run */
		s->duplicates++;
		emit(s, n, PROTO_LAUNCH_ACCEPTED, m->job, m->attempt,
		     json_pack("{s:b}", "duplicate", 1));
		return;
	}
	if (n->nrun == n->caprun) {
		int cap = n->caprun ? n->caprun * 2 : 4;
		struct run *v = realloc(n->run, (size_t)cap * sizeof(*v));

		if (!v) {
			ty_error("out of memory for node '%s'", n->id);
			return;
		}
		n->run = v;
		n->caprun = cap;
	}
	n->run[n->nrun++] = (struct run){m->job, m->attempt, first, nranks,
					 ty_mono_ms() + s->run_ms};
	s->launches++;
	emit(s, n, PROTO_LAUNCH_ACCEPTED, m->job, m->attempt, json_pack("{s:b}", "duplicate", 0));
	if (s->rank_events)
		for (int k = 0; k < nranks; k++)
			emit(s, n, PROTO_RANK_STARTED, m->job, m->attempt,
			     json_pack("{s:i, s:i, s:i}", "rank", first + k, "local_rank", k,
				       "pid", 100000 + k));
	emit(s, n, PROTO_ATTEMPT_RUNNING, m->job, m->attempt,
	     json_pack("{s:i}", "ranks", nranks));
}

static void on_kill(struct sim *s, struct node *n, const struct proto_msg *m)
{
	const char *reason = json_string_value(json_object_get(m->data, "reason"));
	bool preempted = reason && !strcmp(reason, "preempted");

	for (int i = 0; i < n->nrun; i++)
		if (n->run[i].job == m->job && n->run[i].attempt == m->attempt) {
			finish(s, n, i, -1, SIGTERM, preempted ? "preempted" : "cancelled",
			       preempted ? "preempted by the scheduler"
					 : "killed by the scheduler");
			return;
		}
}

static void dispatch(struct sim *s, const rd_kafka_message_t *km)
{
	struct proto_msg m = {0};
	struct ty_err err = {0};
	struct node *n;

	if (km->err) {
		if (km->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			ty_warn("consume: %s", rd_kafka_message_errstr(km));
		return;
	}
	{
		char buf[TY_ED25519_SIG_HEX_LEN + 2];
		enum proto_reject why =
		    proto_check_sig(s->dispatch_key, km->payload, km->len,
				    proto_header(buf, sizeof(buf), km, PROTO_HDR_SIG));

		if (why) {
			s->rejected++;
			ty_warn("refusing a dispatch message (%s)", proto_reject_name(why));
			return;
		}
	}
	if (proto_decode(&m, km->payload, km->len, &err)) {
		ty_warn("skipping a malformed dispatch message: %s", err.msg);
		return;
	}
	if ((n = node_of(s, m.node))) {
		if (m.type == PROTO_LAUNCH)
			on_launch(s, n, &m);
		else if (m.type == PROTO_KILL)
			on_kill(s, n, &m);
		/* checkpoint and drain: nothing runs that could checkpoint */
	}
	proto_msg_clear(&m);
}

static void heartbeat(struct sim *s, struct node *n)
{
	json_t *running = json_array(), *finished = json_array();

	for (int i = 0; running && i < n->nrun; i++)
		json_array_append_new(running, json_pack("{s:I, s:I}", "job", (json_int_t)n->run[i].job,
							 "attempt", (json_int_t)n->run[i].attempt));
	for (int i = 0; finished && i < n->ndone; i++)
		json_array_append_new(
		    finished, json_pack("{s:I, s:I, s:i, s:s, s:s}", "job", (json_int_t)n->done[i].job,
					"attempt", (json_int_t)n->done[i].attempt, "exit_code",
					n->done[i].exit_code, "failure_class",
					n->done[i].failure_class, "message", ""));
	if (!running || !finished) {
		json_decref(running);
		json_decref(finished);
		ty_error("cannot build a heartbeat: out of memory");
		return;
	}
	emit(s, n, PROTO_HEARTBEAT, 0, 0,
	     json_pack("{s:s, s:o, s:o}", "boot_id", s->boot_id, "running", running, "finished",
		       finished));
}

/* Assign every partition of trainyard.dispatch at its end. */
static int assign_all(struct sim *s, struct ty_err *err)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_partition_list_t *l = NULL;
	rd_kafka_topic_t *t = rd_kafka_topic_new(s->consumer, PROTO_TOPIC_DISPATCH, NULL);
	rd_kafka_resp_err_t e;
	int rc = 0;

	if (!t)
		return ty_err_set(err, TY_EKAFKA, "cannot use topic '%s'", PROTO_TOPIC_DISPATCH);
	e = rd_kafka_metadata(s->consumer, 0, t, &md, 10000);
	if (!e && (md->topic_cnt != 1 || md->topics[0].err || md->topics[0].partition_cnt < 1))
		e = md->topic_cnt == 1 && md->topics[0].err ? md->topics[0].err
							    : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
	if (e) {
		rc = ty_err_set(err, TY_EKAFKA, "no metadata for topic '%s': %s",
				PROTO_TOPIC_DISPATCH, rd_kafka_err2str(e));
		goto out;
	}
	l = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
	for (int p = 0; p < md->topics[0].partition_cnt; p++)
		rd_kafka_topic_partition_list_add(l, PROTO_TOPIC_DISPATCH, p)->offset =
		    RD_KAFKA_OFFSET_END;
	if ((e = rd_kafka_assign(s->consumer, l)))
		rc = ty_err_set(err, TY_EKAFKA, "cannot assign: %s", rd_kafka_err2str(e));
	else
		ty_info("consuming %d partitions of '%s' for %d nodes",
			md->topics[0].partition_cnt, PROTO_TOPIC_DISPATCH, s->nnodes);
out:
	if (l)
		rd_kafka_topic_partition_list_destroy(l);
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(t);
	return rc;
}

static void write_stats(struct sim *s, const char *path)
{
	struct rusage ru;
	char tmp[4096];
	FILE *f;

	if (!path || getrusage(RUSAGE_SELF, &ru))
		return;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return;
	fprintf(f, "launches=%llu exited=%llu duplicates=%llu rss_kb=%ld cpu_ms=%lld\n",
		(unsigned long long)s->launches, (unsigned long long)s->exited,
		(unsigned long long)s->duplicates, ru.ru_maxrss,
		(long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
		    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000);
	if (fclose(f) == 0)
		rename(tmp, path);
}

int main(int argc, char **argv)
{
	struct ty_config *c = ty_config_new(options, NOPTS, ENV_PREFIX);
	static const char *const pextra[] = {"linger.ms=2", "queue.buffering.max.messages=1000000",
					     NULL};
	static const char *const cextra[] = {"fetch.wait.max.ms=10", "enable.partition.eof=false",
					     NULL};
	struct sim s = {0};
	struct ty_err err = {0};
	char bootstrap[4096], group[64], secret[PROTO_NODE_SECRET_MAX + 1];
	size_t secretlen = 0;
	const char *stats;
	int64_t next_stats = 0;
	int level, rc = 2;

	if (!c)
		return 1;
	if (ty_config_load(c, argc, argv, NULL, &err)) {
		fprintf(stderr, PROG ": %s\ntry '" PROG " --help'\n", err.msg);
		goto out;
	}
	if (ty_config_bool(c, "help")) {
		printf("usage: " PROG " --kafka-bootstrap SPEC [options]\n\n");
		ty_config_usage(stdout, options, NOPTS, ENV_PREFIX);
		rc = 0;
		goto out;
	}
	if ((level = ty_log_level_parse(ty_config_str(c, "log-level"))) < 0) {
		fprintf(stderr, PROG ": log level '%s' is not debug, info, warn or error\n",
			ty_config_str(c, "log-level"));
		goto out;
	}
	ty_log_init(PROG, (enum ty_log_level)level, false);
	if (!ty_config_str(c, "kafka-bootstrap")) {
		fprintf(stderr, PROG ": no broker: set --kafka-bootstrap\n");
		goto out;
	}
	if (ty_kafka_bootstrap(bootstrap, sizeof(bootstrap), ty_config_str(c, "kafka-bootstrap"),
			       &err)) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		goto out;
	}
	if (!ty_config_str(c, "node-secret-file") || !ty_config_str(c, "dispatch-pubkey")) {
		fprintf(stderr, PROG ": set --node-secret-file and --dispatch-pubkey\n");
		goto out;
	}
	if (proto_node_secret_load(secret, &secretlen, ty_config_str(c, "node-secret-file"),
				   &err) ||
	    ty_ed25519_key_load(&s.dispatch_key, ty_config_str(c, "dispatch-pubkey"), false,
				&err)) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		goto out;
	}
	s.nnodes = (int)ty_config_int(c, "nodes");
	s.gpus = (int)ty_config_int(c, "gpus");
	s.prefix = ty_config_str(c, "node-prefix");
	s.first_index = (int)ty_config_int(c, "first-index");
	s.run_ms = ty_config_int(c, "run-ms");
	s.hb_ms = ty_config_int(c, "heartbeat-ms");
	s.rank_events = ty_config_bool(c, "rank-events");
	stats = ty_config_str(c, "stats-file");
	snprintf(s.boot_id, sizeof(s.boot_id), "sim-%lld-%d", (long long)ty_wall_ms(), getpid());
	if (!(s.nodes = calloc((size_t)s.nnodes, sizeof(*s.nodes)))) {
		fprintf(stderr, PROG ": out of memory for %d nodes\n", s.nnodes);
		goto out;
	}
	for (int i = 0; i < s.nnodes; i++) {
		struct node *n = &s.nodes[i];

		if ((size_t)snprintf(n->id, sizeof(n->id), "%s%05d", s.prefix, s.first_index + i) >=
			sizeof(n->id) ||
		    !proto_node_id_ok(n->id)) {
			fprintf(stderr, PROG ": node id '%s%05d' is not a valid node id\n",
				s.prefix, s.first_index + i);
			goto out;
		}
		proto_node_key(n->key, secret, secretlen, n->id);
		/* heartbeats spread evenly over the interval */
		n->next_hb_ms = ty_mono_ms() + s.hb_ms * i / s.nnodes;
	}
	snprintf(group, sizeof(group), "trainyard-simexec-%d", getpid());
	if (ty_kafka_producer_new(&s.producer, bootstrap, pextra, &err) ||
	    ty_kafka_consumer_new(&s.consumer, bootstrap, group, cextra, &err) ||
	    assign_all(&s, &err)) {
		fprintf(stderr, PROG ": %s\n", err.msg);
		goto out;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	{
		int64_t block = ty_config_int(c, "block-nodes"), rack = ty_config_int(c, "rack-blocks");

		for (int i = 0; i < s.nnodes; i++) {
			long long b = (s.first_index + i) / block;
			char bl[32], rk[32];

			snprintf(bl, sizeof(bl), "b%lld", b);
			snprintf(rk, sizeof(rk), "r%lld", b / rack);
			emit(&s, &s.nodes[i], PROTO_REGISTER, 0, 0,
			     json_pack("{s:s, s:i, s:{s:s, s:s}, s:s, s:s, s:b}", "address",
				       ty_config_str(c, "address"), "gpus", s.gpus, "labels",
				       "block", bl, "rack", rk, "boot_id", s.boot_id, "log_url", "",
				       "simulated", 1));
		}
	}
	ty_info("%d simulated nodes of %d GPUs registered (%s%05d..); attempts run %lld ms",
		s.nnodes, s.gpus, s.prefix, s.first_index, (long long)s.run_ms);
	while (!stop_signal) {
		int64_t now = ty_mono_ms();
		rd_kafka_message_t *km;

		for (int i = 0; i < s.nnodes; i++) {
			struct node *n = &s.nodes[i];

			for (int k = 0; k < n->nrun; k++)
				if (n->run[k].end_ms <= now)
					finish(&s, n, k--, 0, 0, "", "exited 0 (simulated)");
			if (n->next_hb_ms <= now) {
				heartbeat(&s, n);
				n->next_hb_ms = now + s.hb_ms;
			}
		}
		rd_kafka_poll(s.producer, 0);
		/* drain what is there, then wait a little for more */
		for (int k = 0; k < 10000 && (km = rd_kafka_consumer_poll(s.consumer, k ? 0 : 5));
		     k++) {
			dispatch(&s, km);
			rd_kafka_message_destroy(km);
		}
		if (stats && now >= next_stats) {
			write_stats(&s, stats);
			next_stats = now + 1000;
		}
	}
	ty_info("stopping: %llu launches, %llu exits, %llu duplicate launches, %llu produce errors",
		(unsigned long long)s.launches, (unsigned long long)s.exited,
		(unsigned long long)s.duplicates, (unsigned long long)s.produce_errors);
	write_stats(&s, stats);
	rc = 0;
out:
	if (s.consumer)
		ty_kafka_destroy(s.consumer, 0);
	if (s.producer)
		ty_kafka_destroy(s.producer, 5000);
	for (int i = 0; s.nodes && i < s.nnodes; i++)
		free(s.nodes[i].run);
	free(s.nodes);
	ty_ed25519_key_free(s.dispatch_key);
	memset(secret, 0, sizeof(secret));
	ty_config_free(c);
	return rc;
}
