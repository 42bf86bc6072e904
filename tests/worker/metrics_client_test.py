#!/usr/bin/env python3
"""worker/examples/trainyard_metrics.py against a real local HTTP server that
answers from a script: the body and headers it sends, retries of 5xx and
connection errors, no retry of 4xx, the command line's exit codes."""
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import unittest

sys.path.insert(0, os.environ["TY_WORKER_EXAMPLES"])
import trainyard_metrics  # noqa: E402

CLIENT = os.path.join(os.environ["TY_WORKER_EXAMPLES"], "trainyard_metrics.py")
TOKEN = "tym_" + "A" * 43


class Server:
    """Answers each POST with the next (status, body) of a script; records requests."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append((self.path, dict(self.headers), json.loads(body)))
                status, answer = outer.script.pop(0) if outer.script else (200, {})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1/jobs/7/metrics"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class ClientTest(unittest.TestCase):
    def setUp(self):
        os.environ.pop("TRAINYARD_METRICS_URL", None)
        os.environ.pop("TRAINYARD_METRICS_TOKEN", None)

    def test_sends_step_metrics_and_token(self):
        srv = Server([(200, {"step": 3})])
        try:
            ok = trainyard_metrics.report(3, {"loss": 0.5}, url=srv.url, token=TOKEN, acc=1)
        finally:
            srv.close()
        self.assertTrue(ok)
        path, headers, body = srv.requests[0]
        self.assertEqual(path, "/v1/jobs/7/metrics")
        self.assertEqual(headers["Authorization"], "Bearer " + TOKEN)
        self.assertEqual(headers["Content-Type"], "application/json")
        self.assertEqual(body, {"step": 3, "metrics": {"loss": 0.5, "acc": 1}})

    def test_environment_is_the_default_and_its_absence_sends_nothing(self):
        self.assertFalse(trainyard_metrics.report(1, loss=1.0))
        srv = Server([])
        os.environ["TRAINYARD_METRICS_URL"] = srv.url
        os.environ["TRAINYARD_METRICS_TOKEN"] = TOKEN
        try:
            self.assertTrue(trainyard_metrics.report(1, loss=1.0))
        finally:
            srv.close()
        self.assertEqual(len(srv.requests), 1)

    def test_retries_5xx_and_429_then_succeeds(self):
        srv = Server([(503, {"detail": "db down"}), (429, {"detail": "slow"}), (200, {})])
        try:
            self.assertTrue(trainyard_metrics.report(1, url=srv.url, token=TOKEN, loss=1.0))
        finally:
            srv.close()
        self.assertEqual(len(srv.requests), 3)

    def test_gives_up_after_its_attempts(self):
        srv = Server([(500, {"detail": "boom"})] * 3)
        try:
            with self.assertRaises(trainyard_metrics.MetricsError) as cm:
                trainyard_metrics.report(1, url=srv.url, token=TOKEN, attempts=3, loss=1.0)
        finally:
            srv.close()
        self.assertEqual(cm.exception.status, 500)
        self.assertIn("boom", str(cm.exception))
        self.assertEqual(len(srv.requests), 3)

    def test_4xx_is_not_retried_and_carries_the_detail(self):
        srv = Server([(403, {"detail": "this trial metrics token is for job 6 only",
                             "code": "forbidden"})])
        try:
            with self.assertRaises(trainyard_metrics.MetricsError) as cm:
                trainyard_metrics.report(1, url=srv.url, token=TOKEN, loss=1.0)
        finally:
            srv.close()
        self.assertEqual(cm.exception.status, 403)
        self.assertIn("for job 6 only", str(cm.exception))
        self.assertEqual(len(srv.requests), 1)

    def test_connection_refused_is_retried_then_reported(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()  # nothing listens there now
        with self.assertRaises(trainyard_metrics.MetricsError) as cm:
            trainyard_metrics.report(1, url=f"http://127.0.0.1:{port}/m", token=TOKEN,
                                     attempts=2, loss=1.0)
        self.assertEqual(cm.exception.status, 0)
        self.assertIn("cannot reach", str(cm.exception))

    def test_non_finite_or_non_numeric_values_are_refused_before_sending(self):
        for bad in (float("nan"), float("inf"), "0.5", True, None):
            with self.assertRaises(ValueError, msg=repr(bad)):
                trainyard_metrics.report(1, url="http://127.0.0.1:9/m", token=TOKEN, x=bad)

    def test_command_line(self):
        srv = Server([(200, {}), (422, {"detail": "metric name '1x' must be", "field": "metrics.1x"})])
        env = dict(os.environ, TRAINYARD_METRICS_URL=srv.url, TRAINYARD_METRICS_TOKEN=TOKEN)
        run = lambda *a, e=env: subprocess.run([sys.executable, CLIENT, *a], env=e,
                                               capture_output=True, text=True, timeout=60)
        try:
            ok = run("--step", "4", "loss=0.25", "acc=1")
            refused = run("--step", "4", "1x=2")
            bad_arg = run("--step", "4", "loss")
            unset = run("--step", "4", "loss=1", e={"PATH": os.environ.get("PATH", "")})
        finally:
            srv.close()
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertEqual(srv.requests[0][2], {"step": 4, "metrics": {"loss": 0.25, "acc": 1.0}})
        self.assertEqual(refused.returncode, 1)
        self.assertIn("HTTP 422: metric name '1x' must be (field metrics.1x)", refused.stderr)
        self.assertEqual(bad_arg.returncode, 2)
        self.assertIn("'loss' is not NAME=NUMBER", bad_arg.stderr)
        self.assertEqual(unset.returncode, 3)
        self.assertIn("not set", unset.stderr)
        self.assertEqual(len(srv.requests), 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
