/* trainyard-scheduler: options, signals and the run loop. */
#include "fault.h"
#include "scheduler.h"
#include "core/policy.h"
#include "ty_config.h"
#include "ty_kafka.h"
#include "ty_log.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ENV_PREFIX "TRAINYARD_SCHEDULER"

static const struct ty_opt options[] = {
    {"database-url", TY_OPT_STR, NULL, 0, 0,
     "libpq connection URL of the PostgreSQL database (required)"},
    {"kafka-bootstrap", TY_OPT_STR, NULL, 0, 0,
     "Kafka bootstrap servers 'host:port,...', or '@FILE' naming a file whose first line "
     "is that list (required)"},
    {"kafka-properties-file", TY_OPT_STR, NULL, 0, 0,
     "file of librdkafka 'key = value' properties (TLS, SASL) for every Kafka client; "
     "see docs/security.md"},
    {"dispatch-key", TY_OPT_STR, NULL, 0, 0,
     "PEM file of the Ed25519 private key that signs every dispatch message, made by "
     "'openssl genpkey -algorithm ed25519'; executors hold its public half, see "
     "docs/security.md (required)"},
    {"node-secret-file", TY_OPT_STR, NULL, 0, 0,
     "file of the secret (at least 32 bytes; 'openssl rand -hex 32') every node's key "
     "derives from: messages from executors must carry their node's MAC (required)"},
    {"print-node-key", TY_OPT_STR, NULL, 0, 0,
     "print the key of node NODE (for its executor's --node-key-file), derived from "
     "--node-secret-file, then exit"},
    {"id", TY_OPT_STR, NULL, 0, 0,
     "name of this scheduler in the leader table (default "
     "hostname:pid)"},
    {"cycle-ms", TY_OPT_INT, "1000", 10, 3600000,
     "longest time between scheduling cycles; one also runs right after capacity is freed"},
    {"node-timeout-ms", TY_OPT_INT, "10000", 100, 86400000,
     "a node without a heartbeat for this long is lost and its attempts fail (node_lost)"},
    {"reconcile-ms", TY_OPT_INT, "3000", 10, 3600000,
     "how often heartbeats are reconciled against the database"},
    {"resend-ms", TY_OPT_INT, "5000", 10, 3600000,
     "a launch a node has not acknowledged is sent again after this long, and at most "
     "once per period (kills alike)"},
    {"team-uid-base", TY_OPT_INT, "100000", 1000, 2000000000,
     "team N's ranks run in their containers as uid and gid BASE + N (docs/security.md)"},
    {"kill-grace-seconds", TY_OPT_INT, "10", 0, 3600,
     "seconds a killed rank gets between SIGTERM and SIGKILL"},
    {"preemption-stop-seconds", TY_OPT_INT, "130", 0, 86400,
     "how long a preempted gang is expected to take to stop (checkpoint grace plus kill "
     "grace); reservations that wait for its GPUs are planned that far ahead"},
    {"port-range", TY_OPT_STR, "29500-29999", 0, 0,
     "rendezvous ports (MASTER_PORT) handed out on rank-0 nodes, 'LOW-HIGH'"},
    {"usage-half-life-hours", TY_OPT_INT, "168", 0, 87600,
     "half-life of the GPU usage behind each team's fair share (0: usage never decays)"},
    {"rates-file", TY_OPT_STR, NULL, 0, 0,
     "JSON rate table for the usage ledger's cost, per GPU-hour by node pool and GPU model: "
     "{\"spot\": {\"default\": 1.2, \"H100\": 2.5}, \"on-demand\": {...}}; a model without "
     "a rate costs its pool's default, a pool without one 0 (default: no file, every rate 0)"},
    {"min-runtime-seconds", TY_OPT_STR, "high=600,normal=600,low=300,scavenger=0", 0, 0,
     "per priority class, how long a job runs before it may be preempted (a job's own "
     "min_runtime_seconds may ask for more); classes left out keep their default"},
    {"reclaim-delay-seconds", TY_OPT_INT, "60", 0, 31536000,
     "a team reclaiming its nominal quota from a cohort peer that borrows it waits at most "
     "this long after the borrowing gang's start (plus the gang's checkpoint grace), "
     "whatever the gang's minimum runtime, which still protects it against class "
     "preemption"},
    {"cohort-reclaim-delay-seconds", TY_OPT_STR, NULL, 0, 0,
     "'COHORT=SECONDS,...': cohorts whose reclaim delay is not --reclaim-delay-seconds "
     "(default: none)"},
    {"grace-margin-percent", TY_OPT_INT, "50", 0, 1000,
     "a preempted gang's checkpoint grace is its job's measured checkpoint duration (the "
     "longest of its last three, checkpoint signal to committed checkpoint) plus this "
     "share, within the class's --grace-min-seconds and --grace-max-seconds; a job with "
     "nothing measured gets its checkpoint.grace_seconds"},
    {"grace-min-seconds", TY_OPT_STR, "high=30,normal=30,low=30,scavenger=10", 0, 0,
     "per priority class, the shortest grace sized from a measured checkpoint duration; "
     "classes left out keep their default"},
    {"grace-max-seconds", TY_OPT_STR, "high=1800,normal=900,low=600,scavenger=300", 0, 0,
     "per priority class, the longest grace sized from a measured checkpoint duration "
     "(a spot deadline may cut it shorter); classes left out keep their default"},
    {"retry-backoff-seconds", TY_OPT_INT, "10", 0, 86400,
     "a job requeued after a failed attempt waits this long before its next attempt, "
     "doubled for each further retry (0: no backoff)"},
    {"retry-backoff-max-seconds", TY_OPT_INT, "600", 0, 86400, "the longest retry backoff"},
    {"expedite-hold-seconds", TY_OPT_INT, "60", 0, 3600,
     "a job requeued after an infrastructure failure keeps its other nodes to itself this "
     "long after its backoff (0: no hold)"},
    {"suspect-after-jobs", TY_OPT_INT, "2", 1, 1000,
     "a node blamed for system or hardware failures of this many different jobs within "
     "--failure-window-seconds becomes suspect (takes no new work); a job with a hardware "
     "failure there counts twice; failures decided by rank logs alone count only once jobs "
     "of two teams failed that way there"},
    {"drain-after-jobs", TY_OPT_INT, "3", 1, 1000,
     "a node blamed for failures of this many different jobs within the window is "
     "drained (draining while work runs; no new work until an admin undrains it)"},
    {"straggler-percent", TY_OPT_INT, "50", 0, 99,
     "a rank whose step rate (from its progress file) stays below this percentage of its "
     "gang's median for --straggler-reports progress reports in a row is a straggler: a job "
     "event, a degraded node condition and its node blamed as for a system failure (0: off)"},
    {"straggler-reports", TY_OPT_INT, "3", 1, 1000,
     "progress reports (heartbeats that carry it, every executor --progress-ms) in a row a "
     "rank must be below --straggler-percent to be a straggler"},
    {"failure-window-seconds", TY_OPT_INT, "3600", 1, 31536000,
     "how far back node failures count; a suspect node whose count falls below "
     "--suspect-after-jobs is ready again"},
    {"spot-kill-margin-seconds", TY_OPT_INT, "5", 0, 3600,
     "on a spot interruption notice, the gangs on the node are killed so that their SIGKILL "
     "(--kill-grace-seconds after the kill) comes this long before its deadline (or at the "
     "end of their checkpoint grace period, if sooner)"},
    {"team-sample-seconds", TY_OPT_INT, "60", 0, 86400,
     "the leader records each team's GPUs in use, borrowed and lent, decayed usage, fair "
     "share, pending jobs and the preemptions it suffered and caused this often, for "
     "GET /v1/teams/{name}/history (0: no samples)"},
    {"team-sample-retention-days", TY_OPT_INT, "35", 1, 3650,
     "team samples older than this are deleted (checked at most once an hour)"},
    {"check-mirror", TY_OPT_BOOL, "false", 0, 0,
     "compare the in-memory mirror with a fresh load every cycle and log a divergence "
     "(tests, debugging; costs a full read per cycle)"},
    {"metrics-listen", TY_OPT_STR, NULL, 0, 0,
     "serve GET /metrics (Prometheus text format, docs/metrics.md) on 'IPV4-ADDRESS:PORT'; "
     "port 0 picks a free one (default: not served)"},
    {"metrics-port-file", TY_OPT_STR, NULL, 0, 0,
     "write the port /metrics listens on to this file once it listens (tests, port 0)"},
    {"fault-crash-at", TY_OPT_STR, NULL, 0, 0,
     "tests only: 'POINT[:N]' kills this process with SIGKILL the N-th time (default 1st) "
     "it reaches POINT: cycle_before_commit, cycle_after_commit, relay_mid, "
     "relay_after_send, events_before_commit, events_after_commit, cancel_after_commit "
     "(scheduler/fault.h; default: none)"},
    {"log-level", TY_OPT_STR, "info", 0, 0, "debug, info, warn or error"},
    {"log-json", TY_OPT_BOOL, "false", 0, 0, "log JSON lines instead of text"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: trainyard-scheduler --database-url URL --kafka-bootstrap LIST|@FILE "
		   "[options]\n"
		   "\n"
		   "Places pending jobs on nodes and dispatches them over Kafka. Any number may\n"
		   "run: one leads (PostgreSQL advisory lock, fenced by an epoch), the others\n"
		   "stand by and take over when it goes away.\n"
		   "\n");
	ty_config_usage(f, options, NOPTS, ENV_PREFIX);
}

static int write_port_file(const char *path, int port, struct ty_err *err)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w")))
		return ty_err_set(err, TY_EIO, "cannot write '%s'", tmp);
	fprintf(f, "%d\n", port);
	if (fclose(f) || rename(tmp, path))
		return ty_err_set(err, TY_EIO, "cannot write '%s'", path);
	return 0;
}

static int port_range(int *lo, int *hi, const char *spec)
{
	char *end;
	long a, b;

	a = strtol(spec, &end, 10);
	if (end == spec || *end != '-')
		return -1;
	spec = end + 1;
	b = strtol(spec, &end, 10);
	if (end == spec || *end || a < 1 || b > 65535 || a > b)
		return -1;
	*lo = (int)a;
	*hi = (int)b;
	return 0;
}

/* "high=600,low=300": minimum runtimes by class over the defaults in out. */
static int min_runtimes(int64_t *out, const char *spec)
{
	static const char *const names[SCHED_NCLASSES] = {"high", "normal", "low", "scavenger"};

	while (*spec) {
		size_t len = strcspn(spec, "=");
		char *end;
		long long v;
		int c;

		for (c = 0; c < SCHED_NCLASSES; c++)
			if (strlen(names[c]) == len && !strncmp(spec, names[c], len))
				break;
		if (c == SCHED_NCLASSES || spec[len] != '=')
			return -1;
		spec += len + 1;
		v = strtoll(spec, &end, 10);
		if (end == spec || v < 0 || v > 31536000 || (*end && *end != ','))
			return -1;
		out[c] = v;
		spec = *end ? end + 1 : end;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ty_config *c = ty_config_new(options, NOPTS, ENV_PREFIX);
	struct sched s = {0};
	struct ty_err err = {0};
	struct sigaction sa = {.sa_handler = on_signal};
	char bootstrap[4096], id[256], secret[PROTO_NODE_SECRET_MAX + 1];
	struct ty_ed25519_key *dispatch_key = NULL;
	int rc, rest, level, status = 2;

	if (!c) {
		fprintf(stderr, "trainyard-scheduler: out of memory\n");
		return 1;
	}
	if (ty_config_load(c, argc, argv, &rest, &err)) {
		fprintf(stderr, "trainyard-scheduler: %s (try --help)\n", err.msg);
		goto out;
	}
	if (ty_config_bool(c, "help")) {
		usage(stdout);
		status = 0;
		goto out;
	}
	if (rest < argc) {
		fprintf(stderr, "trainyard-scheduler: unexpected argument '%s' (try --help)\n",
			argv[rest]);
		goto out;
	}
	if ((level = ty_log_level_parse(ty_config_str(c, "log-level"))) < 0) {
		fprintf(stderr,
			"trainyard-scheduler: option 'log-level': '%s' is not debug, info, warn or "
			"error\n",
			ty_config_str(c, "log-level"));
		goto out;
	}
	ty_log_init("trainyard-scheduler", (enum ty_log_level)level, ty_config_bool(c, "log-json"));
	if (!ty_config_str(c, "node-secret-file") || !*ty_config_str(c, "node-secret-file")) {
		fprintf(stderr, "trainyard-scheduler: option '--node-secret-file' is required: "
				"without it any client of the broker speaks for any node (try "
				"--help)\n");
		goto out;
	}
	if (proto_node_secret_load(secret, &s.o.node_secret_len,
				   ty_config_str(c, "node-secret-file"), &err)) {
		fprintf(stderr, "trainyard-scheduler: option 'node-secret-file': %s\n", err.msg);
		goto out;
	}
	s.o.node_secret = secret;
	if (ty_config_str(c, "print-node-key")) {
		char key[PROTO_NODE_KEY_LEN + 1];

		if (!proto_node_id_ok(ty_config_str(c, "print-node-key"))) {
			fprintf(stderr,
				"trainyard-scheduler: option 'print-node-key': '%s' is not a node "
				"id (1-63 of [A-Za-z0-9._-], starting alphanumeric)\n",
				ty_config_str(c, "print-node-key"));
			goto out;
		}
		proto_node_key(key, secret, s.o.node_secret_len, ty_config_str(c, "print-node-key"));
		printf("%s\n", key);
		memset(key, 0, sizeof(key));
		status = fflush(stdout) ? 1 : 0;
		goto out;
	}
	if (!ty_config_str(c, "dispatch-key") || !*ty_config_str(c, "dispatch-key")) {
		fprintf(stderr, "trainyard-scheduler: option '--dispatch-key' is required: "
				"executors act only on dispatch messages it signs (try --help)\n");
		goto out;
	}
	if (ty_ed25519_key_load(&dispatch_key, ty_config_str(c, "dispatch-key"), true, &err)) {
		fprintf(stderr, "trainyard-scheduler: option 'dispatch-key': %s\n", err.msg);
		goto out;
	}
	s.o.dispatch_key = dispatch_key;
	if (!ty_config_str(c, "database-url") || !*ty_config_str(c, "database-url")) {
		fprintf(stderr, "trainyard-scheduler: option '--database-url' is required (try "
				"--help)\n");
		goto out;
	}
	if (!ty_config_str(c, "kafka-bootstrap")) {
		fprintf(stderr, "trainyard-scheduler: option '--kafka-bootstrap' is required (try "
				"--help)\n");
		goto out;
	}
	if (ty_kafka_bootstrap(bootstrap, sizeof(bootstrap), ty_config_str(c, "kafka-bootstrap"),
			       &err)) {
		fprintf(stderr, "trainyard-scheduler: %s\n", err.msg);
		goto out;
	}
	if (ty_kafka_properties_load(ty_config_str(c, "kafka-properties-file"), &err)) {
		fprintf(stderr, "trainyard-scheduler: %s\n", err.msg);
		goto out;
	}
	if (port_range(&s.o.port_lo, &s.o.port_hi, ty_config_str(c, "port-range"))) {
		fprintf(stderr,
			"trainyard-scheduler: option 'port-range': '%s' is not LOW-HIGH within "
			"1-65535\n",
			ty_config_str(c, "port-range"));
		goto out;
	}
	s.o.min_runtime_s[0] = s.o.min_runtime_s[1] = 600;
	s.o.min_runtime_s[2] = 300;
	if (min_runtimes(s.o.min_runtime_s, ty_config_str(c, "min-runtime-seconds"))) {
		fprintf(stderr,
			"trainyard-scheduler: option 'min-runtime-seconds': '%s' is not "
			"CLASS=SECONDS,... with classes high, normal, low, scavenger and seconds "
			"in 0-31536000\n",
			ty_config_str(c, "min-runtime-seconds"));
		goto out;
	}
	{
		struct sched_config def; /* the defaults' one home; the help text repeats them */

		sched_config_default(&def);
		for (int k = 0; k < SCHED_NCLASSES; k++) {
			s.o.grace_min_s[k] = def.grace_min_s[k];
			s.o.grace_max_s[k] = def.grace_max_s[k];
		}
	}
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "grace-max-seconds" : "grace-min-seconds";

		if (min_runtimes(k ? s.o.grace_max_s : s.o.grace_min_s, ty_config_str(c, name))) {
			fprintf(stderr,
				"trainyard-scheduler: option '%s': '%s' is not CLASS=SECONDS,... "
				"with classes high, normal, low, scavenger and seconds in "
				"0-31536000\n",
				name, ty_config_str(c, name));
			goto out;
		}
	}
	for (int k = 0; k < SCHED_NCLASSES; k++)
		if (s.o.grace_min_s[k] > s.o.grace_max_s[k]) {
			static const char *const class_name[] = {"high", "normal", "low",
								 "scavenger"};

			fprintf(stderr,
				"trainyard-scheduler: options 'grace-min-seconds' and "
				"'grace-max-seconds': class %s's minimum (%lld) is above its "
				"maximum (%lld)\n",
				class_name[k], (long long)s.o.grace_min_s[k],
				(long long)s.o.grace_max_s[k]);
			goto out;
		}
	s.o.grace_margin_pct = (int)ty_config_int(c, "grace-margin-percent");
	s.o.reclaim_delay_s = ty_config_int(c, "reclaim-delay-seconds");
	if (sched_cohort_delays_parse(&s.o.cohort_delays, &s.o.ncohort_delays,
				      ty_config_str(c, "cohort-reclaim-delay-seconds"), &err)) {
		fprintf(stderr, "trainyard-scheduler: option 'cohort-reclaim-delay-seconds': %s\n",
			err.msg);
		goto out;
	}
	if (ty_config_str(c, "id") && *ty_config_str(c, "id")) {
		snprintf(id, sizeof(id), "%s", ty_config_str(c, "id"));
	} else {
		char host[200] = "localhost";

		gethostname(host, sizeof(host) - 1);
		snprintf(id, sizeof(id), "%s:%ld", host, (long)getpid());
	}
	s.o.database_url = ty_config_str(c, "database-url");
	s.o.bootstrap = bootstrap;
	s.o.id = id;
	s.o.cycle_ms = (int)ty_config_int(c, "cycle-ms");
	s.o.node_timeout_ms = (int)ty_config_int(c, "node-timeout-ms");
	s.o.reconcile_ms = (int)ty_config_int(c, "reconcile-ms");
	s.o.resend_ms = (int)ty_config_int(c, "resend-ms");
	s.o.kill_grace_seconds = (int)ty_config_int(c, "kill-grace-seconds");
	s.o.team_uid_base = ty_config_int(c, "team-uid-base");
	s.o.preemption_stop_seconds = (int)ty_config_int(c, "preemption-stop-seconds");
	s.o.usage_half_life_s = ty_config_int(c, "usage-half-life-hours") * 3600;
	s.o.check_mirror = ty_config_bool(c, "check-mirror");
	s.o.retry_backoff_s = (int)ty_config_int(c, "retry-backoff-seconds");
	s.o.retry_backoff_max_s = (int)ty_config_int(c, "retry-backoff-max-seconds");
	s.o.expedite_hold_s = (int)ty_config_int(c, "expedite-hold-seconds");
	s.o.suspect_after = (int)ty_config_int(c, "suspect-after-jobs");
	s.o.drain_after = (int)ty_config_int(c, "drain-after-jobs");
	s.o.failure_window_s = (int)ty_config_int(c, "failure-window-seconds");
	s.o.straggler_pct = (int)ty_config_int(c, "straggler-percent");
	s.o.straggler_reports = (int)ty_config_int(c, "straggler-reports");
	if (ty_config_str(c, "rates-file") && *ty_config_str(c, "rates-file") &&
	    sched_rates_load(&s.o.rates, ty_config_str(c, "rates-file"), &err)) {
		fprintf(stderr, "trainyard-scheduler: option 'rates-file': %s\n", err.msg);
		goto out;
	}
	s.o.spot_kill_margin_s = (int)ty_config_int(c, "spot-kill-margin-seconds");
	s.o.team_sample_s = (int)ty_config_int(c, "team-sample-seconds");
	s.o.team_sample_retention_d = (int)ty_config_int(c, "team-sample-retention-days");
	if (sched_fault_arm(ty_config_str(c, "fault-crash-at"), &err)) {
		fprintf(stderr, "trainyard-scheduler: option 'fault-crash-at': %s\n", err.msg);
		goto out;
	}

	/* no SA_RESTART: a signal cuts the standby nap short */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (ty_config_str(c, "metrics-listen") && *ty_config_str(c, "metrics-listen")) {
		int port = 0;

		if (sched_metrics_start(&s.metrics, &port, ty_config_str(c, "metrics-listen"),
					&err) ||
		    (ty_config_str(c, "metrics-port-file") &&
		     write_port_file(ty_config_str(c, "metrics-port-file"), port, &err))) {
			fprintf(stderr, "trainyard-scheduler: %s\n", err.msg);
			status = 1;
			goto out;
		}
		ty_info("serving /metrics on port %d", port);
	}
	rc = sched_run(&s, &stop_signal, &err);
	status = rc ? 1 : 0;
	if (rc)
		ty_error("%s", err.msg);
out:
	sched_metrics_stop(s.metrics);
	sched_rates_free(&s.o.rates);
	free(s.o.cohort_delays);
	sched_holds_free(&s.world.holds);
	ty_ed25519_key_free(dispatch_key);
	memset(secret, 0, sizeof(secret));
	ty_config_free(c);
	return status;
}
