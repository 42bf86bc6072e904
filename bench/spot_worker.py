#!/usr/bin/python3
"""The worker of bench/spot: a job that checkpoints at once on SIGUSR1.

Counts steps (one every --step-ms), resumes from TRAINYARD_RESUME_FROM and,
on SIGUSR1, writes checkpoint step-<N> through trainyard_ckpt (one small
file, fsync'd, manifest renamed last) from the signal handler, then waits
for the executor to stop it. Standard library only.

It prints one JSON line per event on stdout and appends the same line to
the file named by BENCH_TIMES (when set), with wall-clock times in seconds
since the epoch (time.time(), the clock the API and PostgreSQL use too):

  {"event": "start", "attempt": A, "t": T, "resumed_step": S|null}
      T: when the interpreter reached main(); "startup_s": T minus the
      process's start time (from /proc/self/stat), i.e. the interpreter's
      own start-up
  {"event": "checkpoint", "attempt": A, "step": N, "t_signal": T1, "t_written": T2}
      T1: SIGUSR1 handled; T2: MANIFEST.json renamed into place

bench/README.md ("bench/spot") says how bench/spot uses them.
"""

import json
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "worker",
                                "examples"))
import trainyard_ckpt  # noqa: E402

STEP_S = float(os.environ.get("BENCH_STEP_MS", "100")) / 1000.0
ATTEMPT = int(os.environ.get("TRAINYARD_ATTEMPT", "0"))
step = 0
checkpointed = False


def emit(**fields):
    line = json.dumps(fields)
    print(line, flush=True)
    path = os.environ.get("BENCH_TIMES")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def process_start_time():
    """Wall-clock start of this process, from /proc (clock ticks since boot)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_ticks = int(fields[19])  # field 22, counted after "pid (comm)"
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    boot = time.time() - uptime
    return boot + start_ticks / os.sysconf("SC_CLK_TCK")


def on_checkpoint(signum, frame):
    global checkpointed
    if checkpointed:
        return
    t_signal = time.time()
    trainyard_ckpt.save(step, {"state.json": json.dumps({"step": step}).encode()})
    checkpointed = True
    emit(event="checkpoint", attempt=ATTEMPT, step=step, t_signal=t_signal,
         t_written=time.time())


def main():
    global step
    t = time.time()
    resumed = None
    path = trainyard_ckpt.resume_from()
    if path:
        resumed = step = trainyard_ckpt.verify(path)["step"]
    emit(event="start", attempt=ATTEMPT, t=t, startup_s=round(t - process_start_time(), 3),
         resumed_step=resumed)
    signal.signal(signal.SIGUSR1, on_checkpoint)
    progress = os.environ.get("TRAINYARD_PROGRESS_FILE")
    while True:
        time.sleep(STEP_S)
        if not checkpointed:
            step += 1
        if progress:
            with open(progress, "a"):
                os.utime(progress)


if __name__ == "__main__":
    main()
