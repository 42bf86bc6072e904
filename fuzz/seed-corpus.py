#!/usr/bin/python3
"""Write the seed corpora under fuzz/corpus/ from the examples in docs/ and
the tests (fuzz/README.md, "The corpus"). Run it again after changing an
example here; it only adds and overwrites seed-*, never the reproducers
(crash-*) or inputs a fuzzer found."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, (dict, list)):
        data = json.dumps(data, separators=(",", ":"))
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# --- job_spec: job specs (docs/api.md "Jobs"), team and metrics bodies ---
minimal = {"team": "ml-research", "command": ["python3", "train.py"], "resources": {"nodes": 1}}
full = {
    "team": "ml-research", "name": "llama-ft",
    "command": ["torchrun", "train.py", "--lr", "3e-4"],
    "env": {"NCCL_DEBUG": "INFO", "_X": ""},
    "resources": {"nodes": 2, "gpus_per_node": 8, "cpus_per_node": 64, "memory_mb_per_node": 512000},
    "priority_class": "high", "priority": 10, "max_runtime_seconds": 7200,
    "min_runtime_seconds": 600, "preemptible": False,
    "spot": {"allowed": True, "max_preemptions": 1, "fallback": "none"},
    "retry": {"system": 5, "user": 1},
    "checkpoint": {"signal": "SIGUSR2", "grace_seconds": 60, "keep": 2},
    "topology": {"required": "block"}, "launch": "per_node",
    "hang_timeout_seconds": 0, "start_timeout_seconds": 10, "preflight": True,
    "labels": {"project": "llama", "example.com/owner": "ana"},
}
put("job_spec", "minimal.json", minimal)
put("job_spec", "full.json", full)
put("job_spec", "spot-demo.json", {"team": "ml", "name": "ddp", "command": ["python3", "ddp_train.py"],
                                   "resources": {"nodes": 1, "gpus_per_node": 2},
                                   "spot": {"allowed": True, "max_preemptions": 1, "fallback": "on_demand"},
                                   "checkpoint": {"keep": 3}})
put("job_spec", "reserved-env.json", dict(minimal, env={"TRAINYARD_JOB_ID": "1", "RANK": "0"}))
put("job_spec", "bad-types.json", dict(minimal, resources={"nodes": "2"}, topology={"required": None},
                                       priority=1e3, unknown=1))
put("job_spec", "team-create.json", {"name": "ml-research", "nominal_gpus": 16, "borrowing_limit_gpus": None,
                                     "lending_limit_gpus": 8, "cohort": "research", "weight": 2.5})
put("job_spec", "team-patch.json", {"nominal_gpus": 32, "cohort": None})
put("job_spec", "metrics-report.json", {"step": 300, "metrics": {"val_loss": 0.31, "acc": 0.9}})
put("job_spec", "deep.json", '{"team":"a","command":["x"],"resources":{"nodes":1},"labels":' + "[" * 40 + "]" * 40 + "}")

# --- sweep: sweep bodies (docs/api.md "Sweeps") ---
tmpl = {"command": ["python", "train.py"], "resources": {"gpus_per_node": 1}}
put("sweep", "grid.json", {"team": "ml-research", "name": "lr-search", "template": tmpl,
                           "grid": {"lr": [0.1, 0.01], "batch": [32, 64]}, "max_concurrent": 4,
                           "objective": {"metric": "val_loss", "direction": "minimize"}})
put("sweep", "trials.json", {"team": "ml", "template": tmpl,
                             "trials": [{"lr": 0.1, "opt": "adam"}, {"lr": 1e-3, "opt": "sgd", "warm": True}]})
put("sweep", "random.json", {"team": "ml", "template": tmpl,
                             "random": {"count": 5, "seed": 42, "params": {
                                 "lr": {"log_uniform": [1e-5, 1e-1]}, "drop": {"uniform": [0, 0.5]},
                                 "layers": {"int_uniform": [2, 8]}, "act": {"choice": ["relu", "gelu", 1, False]}}}})
put("sweep", "env-clash.json", {"team": "ml", "template": tmpl, "trials": [{"a-b": 1, "A_B": 2}]})

# --- webhook: registration bodies (docs/api.md "Webhooks") and bare URLs ---
put("webhook", "body.json", {"team": "ml-research", "url": "https://hooks.example.com/trainyard",
                             "events": ["job.succeeded", "job.failed"], "secret": "0123456789abcdef0123"})
put("webhook", "body-star.json", {"team": "ml", "url": "http://127.0.0.1:9000/hook", "events": ["*"],
                                  "secret": "a-long-enough-secret"})
put("webhook", "url-port-query.txt", "https://[::1]:8443/path/a%20b?x=1&y=2")
put("webhook", "url-credentials.txt", "https://user:pw@example.com/")
put("webhook", "url-fragment.txt", "http://example.com/#frag")
put("webhook", "event.txt", "job.preempting")

# --- proto: first byte = topic (0 dispatch, 1 events, 2 nodes), then one message ---
def msg(type_, data, job=7, attempt=1, node="node-a", epoch=3):
    return json.dumps({"v": 1, "type": type_, "node": node, "job": job, "attempt": attempt,
                       "epoch": epoch, "seq": 913, "ts": 1764000000000, "data": data},
                      separators=(",", ":"))

launch = {"node_rank": 0, "nnodes": 2, "world_size": 4, "local_world_size": 2, "first_rank": 0,
          "master_addr": "10.0.0.2", "master_port": 29500, "gpus": [0, 1],
          "command": ["python3", "train.py", "--epochs", "3"], "env": {"NCCL_DEBUG": "INFO"},
          "launch": "per_gpu", "max_runtime_seconds": 3600, "kill_grace_seconds": 30,
          "hang_timeout_seconds": 1800, "start_timeout_seconds": 600, "checkpoint_keep": 3,
          "preflight": False, "checkpoint_signal": "SIGUSR2",
          "metrics_token": "tym_" + "A" * 43}
put("proto", "launch", "\0" + msg("launch", launch))
put("proto", "launch-per-node", "\0" + msg("launch", dict(launch, launch="per_node", gpus=[3, 5, 7],
                                                          local_world_size=1, world_size=1, nnodes=1)))
put("proto", "kill", "\0" + msg("kill", {"reason": "preempted", "grace_seconds": 30}))
put("proto", "checkpoint", "\0" + msg("checkpoint", {"signal": "SIGUSR1", "grace_seconds": 120,
                                                      "deadline": 1764000030000}))
put("proto", "rank-started", "\1" + msg("rank_started", {"rank": 1, "local_rank": 1, "pid": 4242}, epoch=0))
put("proto", "rank-exited", "\1" + msg("rank_exited", {"rank": 1, "exit_code": 0, "signal": 0}, epoch=0))
put("proto", "attempt-running", "\1" + msg("attempt_running", {"ranks": 2, "resume": {
    "path": "/ckpt/job-7/step-24", "step": 24,
    "skipped": [{"path": "/ckpt/job-7/step-30", "step": 30, "status": "torn", "reason": "no MANIFEST.json (torn)"}]}}, epoch=0))
put("proto", "attempt-exited", "\1" + msg("attempt_exited", {"exit_code": 1, "failure_class": "user",
                                                             "message": "rank 0 exited 1", "evidence": "Traceback"}, epoch=0))
put("proto", "checkpoint-written", "\1" + msg("checkpoint_written", {"path": "/ckpt/job-7/step-24", "step": 24,
                                                                     "valid": True, "status": "valid", "reason": None,
                                                                     "files": 2, "bytes": 10}, epoch=0))
put("proto", "preempt-notice", "\1" + msg("preempt_notice", {"deadline": 1764000120000, "provider": "aws",
                                                             "action": "terminate", "detail": "x"}, job=0, attempt=0, epoch=0))
put("proto", "register", "\2" + msg("register", {"address": "127.0.0.2", "gpus": 2, "labels": {"pool": "spot"},
                                                 "boot_id": "b-1", "log_url": "http://127.0.0.2:7001",
                                                 "simulated": True}, job=0, attempt=0, epoch=0))
put("proto", "heartbeat", "\2" + msg("heartbeat", {"boot_id": "b-1", "running": [{"job": 7, "attempt": 1}],
                                                   "finished": [{"job": 6, "attempt": 2, "exit_code": 0,
                                                                 "failure_class": None, "message": ""}]},
                                     job=0, attempt=0, epoch=0))
put("proto", "duplicate-key", '\0{"v":1,"v":1,"type":"kill","node":"n","job":1,"attempt":1,"epoch":1,"seq":1,"ts":1,'
    '"data":{"reason":"cancel","grace_seconds":1}}')

# --- ckpt_manifest: MANIFEST.json of step-7 (the fixture in fuzz_ckpt_manifest.c) ---
H = "8ddbb2d116530a7785a51dc2442f9a213b1d3dd34f81259fc38982e4eca46ff5"
E = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
put("ckpt_manifest", "valid.json", {"step": 7, "files": [{"path": "state.bin", "size": 10, "sha256": H},
                                                         {"path": "sub/a.pt", "size": 0, "sha256": E}]})
put("ckpt_manifest", "empty.json", {"step": 0, "files": []})
put("ckpt_manifest", "wrong-hash.json", {"step": 7, "files": [{"path": "state.bin", "size": 10, "sha256": E}]})
put("ckpt_manifest", "wrong-size.json", {"step": 7, "files": [{"path": "state.bin", "size": 11, "sha256": H}]})
put("ckpt_manifest", "escape.json", {"step": 7, "files": [{"path": "../secret", "size": 10, "sha256": H}]})
put("ckpt_manifest", "symlink-out.json", {"step": 7, "files": [{"path": "out", "size": 10, "sha256": H}]})
put("ckpt_manifest", "symlink-loop.json", {"step": 7, "files": [{"path": "loop", "size": 0, "sha256": E}]})
put("ckpt_manifest", "directory.json", {"step": 7, "files": [{"path": "sub", "size": 0, "sha256": E}]})
put("ckpt_manifest", "absolute.json", {"step": 7, "files": [{"path": "/etc/passwd", "size": 0, "sha256": E}]})
put("ckpt_manifest", "bad.json", "{'step':3,'files':[")
put("ckpt_manifest", "path.txt", "sub/./a.pt")

# --- config: file text, a line "%%", then one argument per line ---
put("config", "file-and-flags", "# trainyard-api\nport = 8081\nlisten_addr = 0.0.0.0\n"
    "database-url = postgresql://ty@db/trainyard\nlog-json = yes\n%%\n--threads=8\n--no-migrate\n"
    "--port\n9000\nENV:MAX_BODY_BYTES=4096\n--\nextra")
put("config", "bad-int", "threads = 4x\n")
put("config", "out-of-range", "%%\n--port=70000\n")
put("config", "unknown", "nope = 1\n%%\n--x\n")
put("config", "no-value", "%%\n--database-url\n")
put("config", "bool-forms", "migrate = ON\n%%\n--log-json\n--config\nignored\n")
put("config", "no-equals", "  \n\t# comment\nport 8080\n")
put("config", "huge-int", "offset = -9223372036854775808\n%%\n--offset=99999999999999999999\n")

# --- spot: provider byte (1 aws, 2 gcp, 0 azure), status byte (0: 200, 1: 404, 2: 401, 3: 503), body ---
# (the answers of tests/unit/executor/test_spot.c)
for name, prov, st, body in [
    ("aws-terminate", 1, 0, '{"action": "terminate", "time": "2026-11-22T15:32:00Z"}'),
    ("aws-hibernate-frac", 1, 0, '{"action":"hibernate","time":"2024-02-29T23:59:59.250Z"}'),
    ("aws-offset", 1, 0, '{"action":"terminate","time":"2026-11-22T16:32:00+01:00"}'),
    ("aws-404", 1, 1, '<?xml version="1.0"?><Error>Not Found</Error>'),
    ("aws-401", 1, 2, ""),
    ("gcp-true", 2, 0, "TRUE\n"),
    ("gcp-false", 2, 0, "FALSE"),
    ("azure-preempt", 0, 0, '{"DocumentIncarnation":2,"Events":[{"EventId":"C7061BAC-AFDC-4513-B24B-AA5F13A16123",'
     '"EventStatus":"Scheduled","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["spot-vm-1"],'
     '"NotBefore":"Sun, 22 Nov 2026 15:30:40 GMT","Description":"","EventSource":"Platform","DurationInSeconds":-1}]}'),
    ("azure-started", 0, 0, '{"DocumentIncarnation":3,"Events":[{"EventId":"E1","EventStatus":"Started",'
     '"EventType":"Preempt","NotBefore":""}]}'),
    ("azure-several", 0, 0, '{"DocumentIncarnation":5,"Events":[{"EventId":"F1","EventStatus":"Scheduled",'
     '"EventType":"Freeze","NotBefore":"Sun, 22 Nov 2026 15:30:05 GMT"},{"EventId":"P2","EventStatus":"Scheduled",'
     '"EventType":"Preempt","NotBefore":"Sun, 22 Nov 2026 15:31:07 GMT"}]}'),
]:
    put("spot", name, bytes([prov, st]) + body.encode())

# --- api_url: request lines (docs/api.md routes) ---
for name, line in [
    ("healthz", "GET /healthz"),
    ("jobs-list", "GET /v1/jobs?team=ml-research&state=running,pending&label=project%3Dllama&cursor=42&limit=50"),
    ("job-events", "GET /v1/jobs/42/events?after=10&wait=30&limit=100"),
    ("job-logs", "GET /v1/jobs/42/logs?rank=1&attempt=2&tail=100"),
    ("job-metrics", "GET /v1/jobs/42/metrics?name=val_loss&after_step=-1&limit=1000"),
    ("job-cancel", "POST /v1/jobs/42/cancel"),
    ("team-patch", "PATCH /v1/teams/ml-research"),
    ("token-delete", "DELETE /v1/tokens/7"),
    ("queue", "GET /v1/queue?team=ml&limit=10&cursor=3"),
    ("usage", "GET /v1/usage?team=ml&from=2026-01-31T00:00:00Z&to=2026-02-01T12:30:00.25%2B01:00&group_by=day"),
    ("nodes", "GET /v1/nodes?state=drained"),
    ("node-preempt", "POST /v1/nodes/node-a/preempt"),
    ("webhook-deliveries", "GET /v1/webhooks/3/deliveries?state=failed&cursor=9&limit=20"),
    ("options", "OPTIONS /v1/jobs"),
    ("method-not-allowed", "PUT /v1/sweeps/5/cancel"),
    ("traversal", "GET /v1/jobs/..%2F..%2Fetc/logs?rank=%00"),
    ("empty-segment", "GET /v1/jobs//events"),
]:
    put("api_url", name, line + "\n")
