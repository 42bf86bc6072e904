#!/usr/bin/env python3
"""Idle cost per node: N real trainyard-executor processes, idle, against
the embedded broker (trainyard-broker), on a private directory; the CPU the
executors and the broker use over a window, per node. Run once with the
executor's long poll (--fetch-wait-ms 500, its default) and once with
--fetch-wait-ms 10 (its former short poll), for comparison.
  bench/dispatch/idle_bench.py --bin DIR [--nodes N] [--seconds S]
Prints "idle CPU per node: executor X %, broker Y %" for each. Standard
library only; needs openssl.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def wait_file(path, s):
    end = time.monotonic() + s
    while time.monotonic() < end:
        if os.path.exists(path) and os.path.getsize(path):
            return
        time.sleep(0.1)
    sys.exit(f"idle_bench: no {path} after {s} s")


def run(a, work, wait_ms):
    procs = []
    boot = os.path.join(work, "bootstrap")
    if os.path.exists(boot):
        os.unlink(boot)
    broker = subprocess.Popen([f"{a.bin}/trainyard-broker", "--bootstrap-file", boot],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_file(boot, 10)
        for i in range(a.nodes):
            node = f"idle-{i:04d}"
            state = os.path.join(work, f"{node}-{wait_ms}")
            os.makedirs(state, exist_ok=True)
            key = os.path.join(work, node + ".key")
            if not os.path.exists(key):
                with open(key, "w") as f:
                    subprocess.run([f"{a.bin}/trainyard-scheduler", "--node-secret-file",
                                    os.path.join(work, "secret"), "--print-node-key", node],
                                   stdout=f, check=True)
            argv = [f"{a.bin}/trainyard-executor", "--node-id", node, "--state-dir", state,
                    "--kafka-bootstrap", "@" + boot, "--fake-gpus", "0", "--address",
                    "127.0.0.1", "--isolation", "none",
                    "--log-pubkey", os.path.join(work, "log.pub.pem"), "--dispatch-pubkey",
                    os.path.join(work, "dispatch.pub.pem"), "--node-key-file", key,
                    "--log-level", "warn"]
            argv += ["--fetch-wait-ms", str(wait_ms)]
            procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL))
        time.sleep(a.warmup)  # registration, assignment
        dead = [p.pid for p in procs if p.poll() is not None]
        if dead:
            sys.exit(f"idle_bench: {len(dead)} executor(s) exited at start")
        e0 = sum(cpu_s(p.pid) for p in procs)
        b0, t0 = cpu_s(broker.pid), time.monotonic()
        time.sleep(a.seconds)
        e1 = sum(cpu_s(p.pid) for p in procs)
        b1, t1 = cpu_s(broker.pid), time.monotonic()
    finally:
        for p in procs + [broker]:
            p.terminate()
        for p in procs + [broker]:
            p.wait(timeout=30)
    dt = t1 - t0
    return 100 * (e1 - e0) / dt / a.nodes, 100 * (b1 - b0) / dt / a.nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=8)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ty-idle-") as work:
        for k in ("log", "dispatch"):
            pem = os.path.join(work, k + ".pem")
            subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", pem],
                           check=True, stderr=subprocess.DEVNULL)
            subprocess.run(["openssl", "pkey", "-in", pem, "-pubout", "-out",
                            os.path.join(work, k + ".pub.pem")], check=True)
        with open(os.path.join(work, "secret"), "w") as f:
            f.write(os.urandom(32).hex() + "\n")
        for label, wait_ms in (("--fetch-wait-ms 10, the former short poll", 10),
                               ("--fetch-wait-ms 500, the default long poll", 500)):
            e, b = run(a, work, wait_ms)
            print(f"idle CPU per node: executor {e:.3f} %, broker {b:.3f} %"
                  f"  ({a.nodes} idle executors, {label})", flush=True)


if __name__ == "__main__":
    main()
