"""Unit tests of the SDK without an API: settings, problems, retries, trace, job helpers.

Run: PYTHONPATH=sdk/python/src /usr/bin/python3 -m unittest sdk/python/tests/test_unit.py
"""

import hashlib
import http.server
import json
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import unittest
from unittest import mock

import trainyard
from trainyard import checkpoint, job, settings
from trainyard.transport import Transport


class Settings(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.conf = os.path.join(self.dir, "config")

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def resolve(self, env, **kw):
        return settings.resolve(env=env, **kw)

    def test_precedence_argument_environment_file_default(self):
        self.write("config", "# comment\nserver = http://file:1\ntoken = filetok\ntimeout = 7\n")
        env = {"JOBCTL_CONFIG": self.conf}
        s = self.resolve(env)
        self.assertEqual((s.server, s.token, s.timeout), ("http://file:1", "filetok", 7.0))
        env.update(JOBCTL_SERVER="http://env:2/", JOBCTL_TOKEN="envtok")
        s = self.resolve(env)
        self.assertEqual((s.server, s.token), ("http://env:2", "envtok"))
        s = self.resolve(env, server="https://arg:3", token="argtok")
        self.assertEqual((s.server, s.token), ("https://arg:3", "argtok"))
        s = self.resolve({"HOME": self.dir, "JOBCTL_TOKEN": "t"})
        self.assertEqual((s.server, s.timeout), ("http://127.0.0.1:8080", 60.0))

    def test_default_config_paths(self):
        os.makedirs(os.path.join(self.dir, "xdg", "jobctl"))
        self.write("xdg/jobctl/config", "token = xdgtok\n")
        os.makedirs(os.path.join(self.dir, ".config", "jobctl"))
        self.write(".config/jobctl/config", "token = hometok\n")
        self.assertEqual(self.resolve({"HOME": self.dir}).token, "hometok")
        self.assertEqual(self.resolve({"HOME": self.dir,
                                       "XDG_CONFIG_HOME": self.dir + "/xdg"}).token, "xdgtok")
        # a relative XDG_CONFIG_HOME is ignored, as jobctl does
        self.assertEqual(self.resolve({"HOME": self.dir, "XDG_CONFIG_HOME": "xdg"}).token,
                         "hometok")

    def test_token_file_and_its_conflicts(self):
        tf = self.write("tok", "filetoken  \nsecond line\n")
        self.assertEqual(self.resolve({"HOME": self.dir, "JOBCTL_TOKEN_FILE": tf}).token,
                         "filetoken")
        # the higher source wins; the same source twice is an error
        self.assertEqual(self.resolve({"HOME": self.dir, "JOBCTL_TOKEN_FILE": tf},
                                      token="argtok").token, "argtok")
        self.assertEqual(self.resolve({"HOME": self.dir, "JOBCTL_TOKEN": "envtok"},
                                      token_file=tf).token, "filetoken")
        with self.assertRaisesRegex(trainyard.ConfigError,
                                    "a token and a token file both come from the environment"):
            self.resolve({"HOME": self.dir, "JOBCTL_TOKEN": "x", "JOBCTL_TOKEN_FILE": tf})
        empty = self.write("empty", "\n")
        with self.assertRaisesRegex(trainyard.ConfigError, "token file '.*empty' .* is empty"):
            self.resolve({"HOME": self.dir, "JOBCTL_TOKEN_FILE": empty})
        with self.assertRaisesRegex(trainyard.ConfigError, "cannot read the token file"):
            self.resolve({"HOME": self.dir, "JOBCTL_TOKEN_FILE": self.dir + "/none"})

    def test_bad_settings_are_named(self):
        cases = [
            ({"JOBCTL_TOKEN": "t", "JOBCTL_SERVER": "ftp://x"}, "server URL must start with"),
            ({"JOBCTL_TOKEN": "t", "JOBCTL_TIMEOUT": "soon"}, "timeout 'soon'"),
            ({"JOBCTL_TOKEN": "t", "JOBCTL_TIMEOUT": "0"}, "timeout '0'"),
            ({"JOBCTL_TOKEN": "bad token"}, "the token \\(from the environment\\) contains"),
            ({"JOBCTL_TOKEN": "t", "JOBCTL_CACERT": "/no/such/ca.pem"}, "cannot read the CA"),
            ({"JOBCTL_TOKEN": "t", "JOBCTL_CONFIG": "/no/such/config"},
             "cannot open config file '/no/such/config'"),
            ({}, "no token: pass token= or token_file=, set JOBCTL_TOKEN"),
        ]
        for env, message in cases:
            env.setdefault("HOME", self.dir)
            with self.subTest(env=env), self.assertRaisesRegex(trainyard.ConfigError, message):
                self.resolve(env)
        self.write("config", "server http://x\n")
        with self.assertRaisesRegex(trainyard.ConfigError, "config:1: expected 'key = value'"):
            self.resolve({"JOBCTL_CONFIG": self.conf, "JOBCTL_TOKEN": "t"})
        self.write("config", "\nsrever = http://x\n")
        with self.assertRaisesRegex(trainyard.ConfigError, "config:2: unknown option 'srever'"):
            self.resolve({"JOBCTL_CONFIG": self.conf, "JOBCTL_TOKEN": "t"})

    def test_file_keys_with_underscores_and_no_token_echo(self):
        tf = self.write("tok", "secret\n")
        self.write("config", f"token_file = {tf}\n")
        s = self.resolve({"JOBCTL_CONFIG": self.conf})
        self.assertEqual(s.token, "secret")
        self.assertNotIn("secret", repr(s))
        self.assertEqual(self.resolve({"JOBCTL_CONFIG": self.conf}, require_token=False).token,
                         "secret")


class Server:
    """A scripted HTTP server: answers[i] = (status, headers, body) for the i-th request."""

    def __init__(self, answers, tls=None):
        self.answers, self.requests = list(answers), []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                outer.requests.append((self.command, self.path, dict(self.headers), body))
                status, headers, out = outer.answers.pop(0)
                data = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = handle_one

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        scheme = "http"
        if tls:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*tls)
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.httpd.shutdown()
        self.httpd.server_close()


PROBLEM = {"type": "https://trainyard.dev/problems/invalid_field", "title": "Invalid field",
           "status": 422, "code": "invalid_field", "field": "resources.nodes",
           "detail": "'resources.nodes' must be an integer from 1 to 10000, got 0"}


class Transport_(unittest.TestCase):
    def client(self, url, **kw):
        return trainyard.Client(url, "tok", **kw)

    def test_problem_becomes_the_subclass_with_every_member(self):
        with Server([(422, {"Content-Type": "application/problem+json",
                            "X-Request-Id": "req-1"}, PROBLEM)]) as srv:
            with self.assertRaises(trainyard.UnprocessableError) as cm:
                self.client(srv.url).submit(team="t", command=["x"])
        e = cm.exception
        self.assertIsInstance(e, trainyard.ApiError)
        self.assertEqual((e.status, e.code, e.title, e.field, e.request_id),
                         (422, "invalid_field", "Invalid field", "resources.nodes", "req-1"))
        self.assertEqual(e.detail, PROBLEM["detail"])
        self.assertEqual(str(e), "POST /v1/jobs: HTTP 422 invalid_field: " + PROBLEM["detail"])
        method, path, headers, body = srv.requests[0]
        self.assertEqual((method, path), ("POST", "/v1/jobs"))
        self.assertEqual(headers["Authorization"], "Bearer tok")
        self.assertTrue(headers["Idempotency-Key"].startswith("trainyard-python/"))
        self.assertEqual(json.loads(body), {"team": "t", "command": ["x"]})

    def test_status_classes(self):
        for status, cls in [(400, trainyard.BadRequestError), (401, trainyard.UnauthenticatedError),
                            (403, trainyard.ForbiddenError), (404, trainyard.NotFoundError),
                            (409, trainyard.ConflictError), (418, trainyard.ApiError)]:
            with self.subTest(status=status), Server([(status, {}, b"not json")]) as srv:
                with self.assertRaises(cls) as cm:
                    self.client(srv.url).get(1)
                self.assertEqual(cm.exception.status, status)
                self.assertEqual(cm.exception.code, f"http_{status}")

    def test_retries_5xx_and_429_honouring_retry_after(self):
        busy = {"code": "unavailable", "detail": "db down"}
        with Server([(503, {"Retry-After": "1"}, busy), (429, {"Retry-After": "1"},
                     {"code": "rate_limited"}), (200, {}, {"id": 5})]) as srv:
            self.assertEqual(self.client(srv.url).get(5), {"id": 5})
        self.assertEqual(len(srv.requests), 3)

    def test_pending_jobs_limit_and_4xx_are_final(self):
        with Server([(429, {}, {"code": "pending_jobs_limit", "detail": "full"})]) as srv:
            with self.assertRaises(trainyard.RateLimitedError):
                self.client(srv.url).submit(team="t")
        self.assertEqual(len(srv.requests), 1)

    def test_retrying_ends_with_the_last_error(self):
        with Server([(503, {}, {"code": "unavailable", "detail": "db down"})] * 3) as srv:
            with self.assertRaisesRegex(trainyard.UnavailableError, "db down"):
                self.client(srv.url, retry_seconds=0.5).get(1)
        self.assertGreaterEqual(len(srv.requests), 2)

    def test_connection_error_names_the_url(self):
        with Server([]) as srv:
            url = srv.url
        with self.assertRaises(trainyard.ConnectionError) as cm:
            self.client(url, retry_seconds=0).get(1)
        self.assertEqual(cm.exception.url, url)
        self.assertIn(f"GET /v1/jobs/1: connection failed: {url}: ", str(cm.exception))

    def test_paging_follows_the_cursor_and_trace_records_requests(self):
        trace = tempfile.mktemp()
        with Server([(200, {}, {"items": [{"id": 3}, {"id": 2}], "next_cursor": "c1"}),
                     (200, {}, {"items": [{"id": 1}], "next_cursor": None})]) as srv, \
                mock.patch.dict(os.environ, {"TRAINYARD_SDK_TRACE": trace}):
            ids = [j["id"] for j in self.client(srv.url).list(team="ml", state=["pending",
                                                               "running"], page_size=2)]
        self.assertEqual(ids, [3, 2, 1])
        self.assertEqual(srv.requests[0][1], "/v1/jobs?team=ml&state=pending%2Crunning&limit=2")
        self.assertEqual(srv.requests[1][1],
                         "/v1/jobs?team=ml&state=pending%2Crunning&limit=2&cursor=c1")
        with open(trace) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([(x["method"], x["url"]) for x in lines],
                         [("GET", srv.url + srv.requests[0][1]),
                          ("GET", srv.url + srv.requests[1][1])])

    def test_watch_resumes_after_5xx_and_ends_at_the_terminal_event(self):
        ev = lambda seq, state: {"seq": seq, "type": state, "state": state}  # noqa: E731
        with Server([(200, {}, {"events": [ev(1, "pending")], "next_after": 1,
                                "state": "pending"}),
                     (502, {}, b"bad gateway"),
                     (200, {}, {"events": [], "next_after": 1, "state": "running"}),
                     (200, {}, {"events": [ev(2, "running"), ev(3, "succeeded")],
                                "next_after": 3, "state": "succeeded"})]) as srv:
            seen = [e["seq"] for e in self.client(srv.url).watch(7, wait=1)]
        self.assertEqual(seen, [1, 2, 3])
        self.assertEqual([r[1] for r in srv.requests],
                         ["/v1/jobs/7/events?after=0&wait=1", "/v1/jobs/7/events?after=1&wait=1",
                          "/v1/jobs/7/events?after=1&wait=1", "/v1/jobs/7/events?after=1&wait=1"])

    def test_feed_starts_now_and_resumes_from_its_cursor(self):
        with Server([(200, {}, {"events": [], "next_after": "c0"}),
                     (503, {}, {"code": "unavailable", "detail": "db down"}),
                     (200, {}, {"events": [{"job": 4, "seq": 1}], "next_after": "c1"}),
                     (200, {}, {"events": [{"job": 5, "seq": 1}], "next_after": "c2"})]) as srv:
            feed = self.client(srv.url).feed(team="ml", wait=2)
            self.assertEqual(len(srv.requests), 1)  # the start is "now", not the first next()
            self.assertEqual([next(feed)["job"], next(feed)["job"]], [4, 5])
        self.assertEqual([r[1] for r in srv.requests],
                         ["/v1/events?team=ml", "/v1/events?after=c0&team=ml&wait=2",
                          "/v1/events?after=c0&team=ml&wait=2",
                          "/v1/events?after=c1&team=ml&wait=2"])

    def test_watch_gives_up_on_4xx_and_checks_wait(self):
        with Server([(404, {}, {"code": "job_not_found", "detail": "job 7 not found"})]) as srv:
            with self.assertRaises(trainyard.NotFoundError):
                list(self.client(srv.url).watch(7))
        with self.assertRaisesRegex(ValueError, "wait must be 0 to 60"):
            next(trainyard.Client("http://127.0.0.1:1", "t").watch(7, wait=61))

    def test_logs_and_csv_are_text(self):
        with Server([(200, {"Content-Type": "text/plain"}, b"hi\n")]) as srv:
            self.assertEqual(self.client(srv.url).logs(4, rank=1, tail=5), "hi\n")
        self.assertEqual(srv.requests[0][1], "/v1/jobs/4/logs?rank=1&tail=5")

    def test_a_server_that_never_answers_is_a_timeout(self):
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(1)  # accepted by the kernel, never answered
        url = "http://127.0.0.1:%d" % lsock.getsockname()[1]
        try:
            with self.assertRaisesRegex(trainyard.ConnectionError, "no answer within 0.3 s"):
                self.client(url, timeout=0.3, retry_seconds=0).get(1)
        finally:
            lsock.close()

    def test_https_verified_against_the_ca_file(self):
        d = tempfile.mkdtemp()
        cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", key, "-out", cert], check=True, capture_output=True)
        with Server([(200, {}, {"id": 1})], tls=(cert, key)) as srv:
            self.assertTrue(srv.url.startswith("https://"))
            with self.assertRaisesRegex(trainyard.ConnectionError,
                                        "certificate verify failed.*give its CA with cacert="):
                self.client(srv.url, retry_seconds=0).get(1)
            self.assertEqual(self.client(srv.url, cacert=cert).get(1), {"id": 1})

    def test_https_uses_the_ca_file(self):
        t = Transport("https://127.0.0.1:1", "t")
        self.assertIsNotNone(t._ctx)
        with self.assertRaisesRegex(trainyard.ConfigError, "cannot use the CA file"):
            Transport("https://127.0.0.1:1", "t", cacert=__file__)  # not PEM: refused at once


class Job(unittest.TestCase):
    def test_env_reads_the_rank_environment(self):
        e = job.env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "TRAINYARD_JOB_ID": "9",
                     "TRAINYARD_ATTEMPT": "2", "TRAINYARD_PARAMS": '{"lr": 0.1}',
                     "TRAINYARD_METRICS_TOKEN": "secret"})
        self.assertEqual((e.rank, e.world_size, e.local_rank, e.job_id, e.attempt, e.params),
                         (3, 4, 1, 9, 2, {"lr": 0.1}))
        self.assertTrue(e.in_trainyard)
        self.assertNotIn("secret", repr(e))
        self.assertFalse(job.env({}).in_trainyard)
        with self.assertRaisesRegex(ValueError, "RANK='x' is not an integer"):
            job.env({"RANK": "x"})

    def test_report_posts_with_the_attempts_token_on_rank_0_only(self):
        with Server([(201, {}, {"step": 3})]) as srv:
            env = {"TRAINYARD_METRICS_URL": srv.url + "/v1/jobs/7/metrics",
                   "TRAINYARD_METRICS_TOKEN": "attempt-tok", "RANK": "1"}
            with mock.patch.dict(os.environ, env):
                self.assertFalse(job.report(3, loss=0.5))
                os.environ["RANK"] = "0"
                self.assertTrue(job.report(3, {"loss": 0.5}, acc=1))
                with self.assertRaisesRegex(ValueError, "metric 'x' must be a finite number"):
                    job.report(4, x=float("nan"))
        self.assertEqual(len(srv.requests), 1)
        method, path, headers, body = srv.requests[0]
        self.assertEqual((method, path, headers["Authorization"]),
                         ("POST", "/v1/jobs/7/metrics", "Bearer attempt-tok"))
        self.assertEqual(json.loads(body), {"step": 3, "metrics": {"loss": 0.5, "acc": 1}})
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertFalse(job.report(1, loss=1.0))

    def test_progress_rewrites_the_file(self):
        path = tempfile.mktemp()
        self.assertTrue(job.progress(5, samples_per_second=12.5, path=path))
        with open(path) as f:
            doc = json.loads(f.read())
        self.assertEqual((doc["step"], doc["samples_per_second"]), (5, 12.5))
        # renamed over: no temporary file is left beside it
        self.assertEqual([n for n in os.listdir(os.path.dirname(path))
                          if n.startswith(os.path.basename(path) + ".tmp")], [])
        with self.assertRaisesRegex(ValueError, "step must be"):
            job.progress(-1, path=path)
        with self.assertRaisesRegex(ValueError, "samples_per_second must"):
            job.progress(1, samples_per_second=float("nan"), path=path)
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertFalse(job.progress(1))


class Checkpoint(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def test_save_writes_files_then_the_manifest(self):
        path = checkpoint.save(4, {"a.bin": b"abc", "sub/b": lambda f: f.write(b"xy")}, self.dir)
        self.assertEqual(path, os.path.join(self.dir, "step-4"))
        with open(os.path.join(path, "MANIFEST.json")) as f:
            m = json.load(f)
        self.assertEqual(m, {"step": 4, "files": [
            {"path": "a.bin", "size": 3, "sha256":
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
            {"path": "sub/b", "size": 2, "sha256": hashlib.sha256(b"xy").hexdigest()}]})
        self.assertFalse(os.path.exists(os.path.join(path, "MANIFEST.json.tmp")))
        self.assertEqual(checkpoint.verify(path)["step"], 4)

    def test_verify_refuses_what_the_executor_refuses(self):
        path = checkpoint.save(1, {"w": b"data"}, self.dir)
        man = os.path.join(path, "MANIFEST.json")
        with open(man) as f:
            good = f.read()

        def put(name, data, mode="w"):
            with open(os.path.join(path, name), mode) as f:
                f.write(data)

        cases = [
            (lambda: os.unlink(man), "torn", "no MANIFEST.json"),
            (lambda: put("MANIFEST.json", "{"), "corrupt", "MANIFEST.json: "),
            (lambda: put("MANIFEST.json", '{"step": -1, "files": []}'), "corrupt",
             "needs a step"),
            (lambda: put("MANIFEST.json", good.replace('"w"', '"../w"')), "corrupt",
             "is not inside"),
            (lambda: put("w", b"!", "ab"), "corrupt",
             "'w' has the wrong size"),
            (lambda: put("w", b"DATA", "wb"), "corrupt",
             "'w' has the wrong SHA-256"),
            (lambda: os.unlink(os.path.join(path, "w")), "corrupt", "'w' is missing"),
        ]
        for spoil, status, reason in cases:
            with self.subTest(reason=reason):
                checkpoint.save(1, {"w": b"data"}, self.dir)  # rewrites a spoiled one
                spoil()
                with self.assertRaises(checkpoint.CheckpointError) as cm:
                    checkpoint.verify(path)
                self.assertEqual(cm.exception.status, status)
                self.assertIn(reason, cm.exception.reason)

    def test_newest_skips_bad_ones_and_resume_reads_the_executors_choice(self):
        checkpoint.save(1, {"w": b"1"}, self.dir)
        p2 = checkpoint.save(2, {"w": b"2"}, self.dir)
        os.unlink(os.path.join(p2, "MANIFEST.json"))
        skipped = []
        path, m = checkpoint.newest(self.dir, on_skip=skipped.append)
        self.assertEqual((os.path.basename(path), m["step"]), ("step-1", 1))
        self.assertEqual([e.status for e in skipped], ["torn"])
        with mock.patch.dict(os.environ, {"TRAINYARD_RESUME_FROM": path}):
            self.assertEqual(checkpoint.resume()[1]["step"], 1)
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertEqual(checkpoint.resume(), (None, None))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(ValueError, "step must be a non-negative int"):
            checkpoint.save(-1, {}, self.dir)
        for bad in ("/abs", "a/../../x", "MANIFEST.json", ""):
            with self.subTest(bad=bad), self.assertRaisesRegex(ValueError, "must be relative"):
                checkpoint.save(1, {bad: b""}, self.dir)
        with mock.patch.dict(os.environ, {}, clear=True), \
                self.assertRaisesRegex(RuntimeError, "TRAINYARD_CHECKPOINT_DIR is not set"):
            checkpoint.save(1, {})


if __name__ == "__main__":
    unittest.main()
