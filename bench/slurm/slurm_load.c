/*
 * trainyard-bench-slurm: submits N trivial batch jobs to a Slurm controller
 * through libslurm's slurm_submit_batch_job() from K threads, then
 * (--wait) polls slurm_load_jobs() until every one of them has finished.
 * The Slurm half of bench/slurm/run; prints one JSON object.
 */
#include "ty_config.h"
#include "ty_err.h"

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define PROG "trainyard-bench-slurm"
#define ENV_PREFIX "TRAINYARD_BENCH_SLURM"

static const struct ty_opt options[] = {
    {"jobs", TY_OPT_INT, "100", 1, 10000000, "jobs to submit"},
    {"clients", TY_OPT_INT, "1", 1, 1024, "submitting threads (one RPC in flight each)"},
    {"slurm-conf", TY_OPT_STR, NULL, 0, 0, "slurm.conf of the controller (default: SLURM_CONF)"},
    {"command", TY_OPT_STR, "true", 0, 0, "the job's shell command"},
    {"work-dir", TY_OPT_STR, "/tmp", 0, 0, "the job's working directory"},
    {"wait", TY_OPT_BOOL, "false", 0, 0,
     "after submitting, poll until every job finished and time it"},
    {"poll-ms", TY_OPT_INT, "50", 1, 10000, "poll interval of --wait"},
    {"timeout-seconds", TY_OPT_INT, "900", 1, 86400, "give up waiting after this long"},
    {"help", TY_OPT_BOOL, "false", 0, 0, "print this help, then exit"},
};
#define NOPTS (sizeof(options) / sizeof(options[0]))

struct submitter {
	job_desc_msg_t desc; /* shared, read-only after set-up */
	int njobs;
	atomic_int next;   /* jobs handed out */
	atomic_int failed; /* submissions that failed */
	uint32_t *ids;	   /* njobs job ids (0: not submitted) */
	double *lat;	   /* njobs submit latencies, seconds */
	pthread_mutex_t err_lock;
	char first_error[256];
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of v (sorted, n > 0). */
static double pct(const double *v, int n, double p)
{
	int i = (int)(p / 100.0 * n + 0.999999) - 1;

	return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void *submit_loop(void *arg)
{
	struct submitter *s = arg;
	int i;

	while ((i = atomic_fetch_add(&s->next, 1)) < s->njobs) {
		submit_response_msg_t *resp = NULL;
		double t = now();

		if (slurm_submit_batch_job(&s->desc, &resp) != SLURM_SUCCESS || !resp) {
			int e = slurm_get_errno();

			atomic_fetch_add(&s->failed, 1);
			pthread_mutex_lock(&s->err_lock);
			if (!s->first_error[0])
				snprintf(s->first_error, sizeof(s->first_error),
					 "slurm_submit_batch_job: %s", slurm_strerror(e));
			pthread_mutex_unlock(&s->err_lock);
			continue;
		}
		s->lat[i] = now() - t;
		s->ids[i] = resp->job_id;
		slurm_free_submit_response_response_msg(resp);
	}
	return NULL;
}

/*
 * Poll the controller until none of ids[] is pending, running or completing.
 * A job the controller no longer lists (MinJobAge purged it) has finished.
 * Counts in *failed the jobs seen ending in any state but COMPLETED.
 */
static int wait_done(double *done_at, int *failed, const uint32_t *ids, int n, int poll_ms,
		     int timeout_s, struct ty_err *err)
{
	uint32_t lo = UINT32_MAX, hi = 0;
	unsigned char *state = NULL; /* per id - lo: 0 active/unseen, 1 ok, 2 failed */
	int active = n, rc = 0;
	double deadline = now() + timeout_s;
	bool ever_seen = false;

	*failed = 0;
	for (int i = 0; i < n; i++) {
		if (ids[i] < lo)
			lo = ids[i];
		if (ids[i] > hi)
			hi = ids[i];
	}
	state = calloc((size_t)(hi - lo + 1), 1);
	if (!state)
		return ty_err_set(err, TY_ENOMEM, "out of memory");
	while (active > 0) {
		job_info_msg_t *msg = NULL;
		unsigned char *listed = NULL;

		if (now() > deadline) {
			rc = ty_err_set(err, TY_ETIMEDOUT, "%d of %d jobs still active after %d s",
					active, n, timeout_s);
			goto out;
		}
		if (slurm_load_jobs((time_t)0, &msg, SHOW_ALL) != SLURM_SUCCESS) {
			rc = ty_err_set(err, TY_EIO, "slurm_load_jobs: %s",
					slurm_strerror(slurm_get_errno()));
			goto out;
		}
		listed = calloc((size_t)(hi - lo + 1), 1);
		if (!listed) {
			slurm_free_job_info_msg(msg);
			rc = ty_err_set(err, TY_ENOMEM, "out of memory");
			goto out;
		}
		for (uint32_t j = 0; j < msg->record_count; j++) {
			slurm_job_info_t *ji = &msg->job_array[j];
			uint32_t base = ji->job_state & JOB_STATE_BASE;

			if (ji->job_id < lo || ji->job_id > hi)
				continue;
			listed[ji->job_id - lo] = 1;
			ever_seen = true;
			if (state[ji->job_id - lo] || base < JOB_COMPLETE ||
			    (ji->job_state & JOB_COMPLETING))
				continue;
			state[ji->job_id - lo] = base == JOB_COMPLETE ? 1 : 2;
		}
		slurm_free_job_info_msg(msg);
		active = 0;
		*failed = 0;
		for (int i = 0; i < n; i++) {
			uint32_t k = ids[i] - lo;

			if (!state[k] && !listed[k] && ever_seen)
				state[k] = 1; /* purged after it ended: state unknown, counted as done */
			if (!state[k])
				active++;
			else if (state[k] == 2)
				(*failed)++;
		}
		free(listed);
		if (active > 0)
			usleep((useconds_t)poll_ms * 1000);
	}
	*done_at = now();
out:
	free(state);
	return rc;
}

int main(int argc, char **argv)
{
	struct ty_config *c = ty_config_new(options, NOPTS, ENV_PREFIX);
	struct submitter s = {.err_lock = PTHREAD_MUTEX_INITIALIZER};
	struct ty_err err = {0};
	pthread_t *th = NULL;
	char *env[] = {"PATH=/usr/bin:/bin", NULL};
	char *script = NULL;
	int rest, status = 2, clients = 0, started = 0, nfailed, submitted, failed_jobs = 0;
	double t0, t1, done_at = 0;
	size_t sz;

	if (!c) {
		fprintf(stderr, PROG ": out of memory\n");
		return 2;
	}
	if (ty_config_load(c, argc, argv, &rest, &err)) {
		fprintf(stderr, PROG ": %s (try --help)\n", err.msg);
		goto out;
	}
	if (ty_config_bool(c, "help")) {
		printf("usage: " PROG " [options]\n\n"
		       "Submits --jobs trivial batch jobs (#!/bin/sh + --command) through\n"
		       "libslurm's slurm_submit_batch_job() from --clients threads and prints\n"
		       "the submission rate; with --wait also the time until all finished,\n"
		       "from the first submission (bench/README.md, \"bench/slurm\").\n\n");
		ty_config_usage(stdout, options, NOPTS, ENV_PREFIX);
		status = 0;
		goto out;
	}
	if (rest < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[rest]);
		goto out;
	}
	s.njobs = (int)ty_config_int(c, "jobs");
	clients = (int)ty_config_int(c, "clients");
	if (clients > s.njobs)
		clients = s.njobs;
	slurm_init(ty_config_str(c, "slurm-conf"));

	sz = strlen(ty_config_str(c, "command")) + 16;
	script = malloc(sz);
	s.ids = calloc((size_t)s.njobs, sizeof(*s.ids));
	s.lat = calloc((size_t)s.njobs, sizeof(*s.lat));
	th = calloc((size_t)clients, sizeof(*th));
	if (!script || !s.ids || !s.lat || !th) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	snprintf(script, sz, "#!/bin/sh\n%s\n", ty_config_str(c, "command"));
	slurm_init_job_desc_msg(&s.desc);
	s.desc.name = "ty-bench";
	s.desc.script = script;
	s.desc.std_out = "/dev/null";
	s.desc.std_err = "/dev/null";
	s.desc.work_dir = (char *)ty_config_str(c, "work-dir");
	s.desc.user_id = getuid();
	s.desc.group_id = getgid();
	s.desc.min_nodes = 1;
	s.desc.min_cpus = 1;
	s.desc.environment = env;
	s.desc.env_size = 1;

	t0 = now();
	for (started = 0; started < clients; started++) {
		int e = pthread_create(&th[started], NULL, submit_loop, &s);

		if (e) {
			fprintf(stderr, PROG ": pthread_create: %s\n", strerror(e));
			break;
		}
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	t1 = now();
	if (started < clients)
		goto out;
	nfailed = atomic_load(&s.failed);
	submitted = s.njobs - nfailed;
	if (nfailed) {
		fprintf(stderr, PROG ": %d of %d submissions failed, the first: %s\n", nfailed,
			s.njobs, s.first_error);
		goto out;
	}
	if (ty_config_bool(c, "wait") &&
	    wait_done(&done_at, &failed_jobs, s.ids, submitted, (int)ty_config_int(c, "poll-ms"),
		      (int)ty_config_int(c, "timeout-seconds"), &err)) {
		fprintf(stderr, PROG ": waiting for the jobs: %s\n", err.msg);
		goto out;
	}
	qsort(s.lat, (size_t)submitted, sizeof(*s.lat), cmp_double);
	printf("{\"jobs\":%d,\"clients\":%d,\"submit_seconds\":%.4f,\"submit_per_second\":%.1f,"
	       "\"latency_ms\":{\"p50\":%.2f,\"p99\":%.2f}",
	       submitted, clients, t1 - t0, submitted / (t1 - t0), pct(s.lat, submitted, 50) * 1e3,
	       pct(s.lat, submitted, 99) * 1e3);
	if (ty_config_bool(c, "wait"))
		printf(",\"complete_seconds\":%.4f,\"complete_per_second\":%.1f,\"failed\":%d",
		       done_at - t0, submitted / (done_at - t0), failed_jobs);
	printf("}\n");
	status = failed_jobs ? 1 : 0;
	if (failed_jobs)
		fprintf(stderr, PROG ": %d jobs did not complete successfully\n", failed_jobs);
out:
	slurm_fini();
	free(th);
	free(s.ids);
	free(s.lat);
	free(script);
	ty_config_free(c);
	return status;
}
