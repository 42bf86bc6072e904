/*
 * The promises every fault scenario checks afterwards (issue 9, "Faults"):
 * every submitted job is present, no gang ran twice concurrently, every job
 * reached the terminal state the scenario expects, no allocation leaked (the
 * free GPUs are the total again), the dispatch outbox drained, and no rank
 * process outlived its attempt.
 *
 * Evidence of "ran concurrently" comes from the ranks themselves: a job whose
 * command is FAULTS_RANK_CMD appends to $OUTDIR/g-<job>-<attempt>-<rank>.<pid>
 * a line "s <ns>" when it starts, "b <ns>" every 100 ms while it lives and
 * "e <ns>" when it ends normally (CLOCK_REALTIME nanoseconds from date(1)).
 * A rank killed by SIGKILL leaves no "e" line, but its last "b" line is a
 * time it was provably alive: an attempt's interval is [its first "s", its
 * last line], so an overlap found is a real one (a miss is at most 100 ms).
 */
#ifndef TY_FAULTS_INVARIANTS_H
#define TY_FAULTS_INVARIANTS_H

#include "e2e.h"

#include <stdbool.h>
#include <stddef.h>

/*
 * A job command (JSON text for e2e_submit) whose every rank records its life
 * as above and lives for `tenths` tenths of a second (a string literal).
 */
#define FAULTS_RANK_CMD(tenths)                                                                  \
	"[\"/bin/sh\",\"-c\",\"f=$OUTDIR/g-$TRAINYARD_JOB_ID-$TRAINYARD_ATTEMPT-$RANK.$$; "    \
	"echo s $(date +%s%N) >> $f; i=0; while [ $i -lt " tenths " ]; do sleep 0.1; "          \
	"echo b $(date +%s%N) >> $f; i=$((i+1)); done; echo e $(date +%s%N) >> $f\"]"

/* ---- pure ---- */

/* What one rank process left behind (one g-* file). */
struct faults_rank {
	long long job;
	int attempt;
	int rank;
	long pid;
	long long start_ns; /* its "s" line; 0 when missing */
	long long last_ns;  /* its newest line of any kind */
	bool ended;	    /* it wrote "e" */
};

/*
 * Parse a file name "g-<job>-<attempt>-<rank>.<pid>" and its text into rec.
 * Returns 0, or -1 when the name or text is not of that form (no "s" line,
 * a line that is not "<s|b|e> <digits>").
 */
int faults_rank_parse(struct faults_rank *rec, const char *name, const char *text);

/*
 * Look for the gang running twice among recs[0..n): two attempts of one job
 * whose intervals (first start .. last sign of life of any of their ranks)
 * overlap, or one (job, attempt, rank) started by two processes. Writes one
 * line per finding to report (truncated at size) and returns how many there
 * were (0: none).
 */
int faults_overlaps(const struct faults_rank *recs, size_t n, char *report, size_t size);

/* A job's world size (attempts.world_size), for faults_reruns. */
struct faults_world {
	long long job;
	int ranks;
};

/*
 * Look for a job started again after it finished: an attempt every one of
 * whose ranks 0..ranks-1 (from worlds[0..nw); a job not listed is not
 * judged) wrote its end mark, followed by any rank of a later attempt. A
 * finished job's side effects must never happen twice. Writes one line per
 * finding to report (truncated at size) and returns how many there were.
 */
int faults_reruns(const struct faults_rank *recs, size_t n, const struct faults_world *worlds,
		  size_t nw, char *report, size_t size);

/* ---- the running stack ---- */

/*
 * The rank records of e->out (scratch array; *n set). A g-* file that does
 * not parse fails the case.
 */
struct faults_rank *faults_ranks(struct e2e *e, size_t *n);

/*
 * Pids of live, non-zombie processes whose environment holds OUTDIR=e->out
 * (every rank and its children), space separated (scratch; "" for none).
 */
const char *faults_live_ranks(struct e2e *e);

/*
 * Check the invariants for jobs[0..n), submitted through the API into e's
 * team with e->out as $OUTDIR. states[i] is the comma-separated list of
 * terminal states job i may end in (e.g. "succeeded"). Waits up to
 * timeout_ms for the jobs to end, the outbox to drain, the allocations to be
 * released and the rank processes to go; then every job must exist (and no
 * other job in e->team), be in one of its states, no gang may have run twice
 * (faults_overlaps; a job that succeeded must have left rank
 * records), no job started again after an attempt of it finished
 * (faults_reruns), no allocation of the database may be unreleased and no
 * row left in dispatch_outbox (so call it when nothing else runs), and no
 * process of the case may live on. Each failure is reported with what was
 * found (job, state, attempts, rank intervals). Returns whether all held.
 */
bool faults_check_invariants(struct e2e *e, const long long *jobs, const char *const *states,
			     int n, int timeout_ms);

#endif
