#!/usr/bin/env python3
"""The benchmarks' reports fed empty and zero measurements (ctest
bench_reports, label unit): each must print "not measured" where a figure
is missing and write strict JSON in which every missing field is null and
named in its figure's not_measured (bench/README.md, "Not measured") —
never crash. And with real measurements, numbers."""
import argparse
import io
import json
import os
import sys
import tempfile
import unittest

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench")
sys.path[:0] = [BENCH, os.path.join(BENCH, "submit"), os.path.join(BENCH, "dispatch"),
                os.path.join(BENCH, "latency"), os.path.join(BENCH, "slurm")]
import report_lib as rl  # noqa: E402
import dispatch_bench  # noqa: E402
import latency_bench  # noqa: E402
import spot_bench  # noqa: E402
import importlib.util  # noqa: E402


def load(name, path):
    """bench/submit/report.py and bench/slurm/report.py share a module name."""
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


submit_report = load("submit_report", os.path.join(BENCH, "submit", "report.py"))
slurm_report = load("slurm_report", os.path.join(BENCH, "slurm", "report.py"))


def strict(path):
    def no_constant(c):
        raise ValueError(f"{c} in {path}")
    with open(path) as f:
        return json.load(f, parse_constant=no_constant)


class Case(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.json = os.path.join(self.dir.name, "out.json")

    def tearDown(self):
        self.dir.cleanup()

    def doc(self):
        """The written JSON: strict, and well formed by the smoke tests' check."""
        d = strict(self.json)
        self.assertEqual(rl.check(d), [])
        self.assertEqual(rl.check_file(self.json), [])
        return d

    def fig(self, d, name):
        return next(f for f in d["figures"] if f["name"] == name)

    def unmeasured(self, f, *fields):
        for k in fields:
            self.assertIsNone(f[k], k)
            self.assertTrue(f["not_measured"][k], k)


class ReportLib(Case):
    def test_missing_inputs_give_none(self):
        self.assertIsNone(rl.pct([], 99))
        self.assertIsNone(rl.pct([None, float("nan")], 50))
        self.assertIsNone(rl.median([]))
        self.assertIsNone(rl.maximum([]))
        self.assertIsNone(rl.ratio(5, 0))
        self.assertIsNone(rl.ratio(None, 2))
        self.assertIsNone(rl.rate(0, 1.5))
        self.assertIsNone(rl.rate(10, 0))
        self.assertIsNone(rl.num(""))
        self.assertIsNone(rl.num("-"))
        self.assertIsNone(rl.meets(None, 100))
        self.assertEqual(rl.fmt(None, "8.1f"), "not measured")
        self.assertEqual(rl.verdict(None), "not measured")

    def test_measured_inputs(self):
        self.assertEqual(rl.pct([3, 1, 2], 50), 2)
        self.assertEqual(rl.pct(list(range(1, 101)), 99), 99)
        self.assertEqual(rl.ratio(3, 2), 1.5)
        self.assertEqual(rl.rate(10, 2), 5)
        self.assertEqual(rl.median([4, 1, 3, 2]), 2.5)
        self.assertEqual(rl.fmt(2.25, ".1f", " ms"), "2.2 ms")
        self.assertEqual(rl.verdict(False), "MISSED")

    def test_figure_names_its_missing_fields(self):
        f = rl.figure("x", "x", "ms", 5, 0, "b", 10, at_most=True,
                      reasons={"baseline": "nothing"})
        self.assertEqual(f["value"], 5)
        self.assertTrue(f["met"])
        self.unmeasured(f, "baseline", "ratio")
        self.assertEqual(f["not_measured"]["baseline"], "nothing")
        self.assertNotIn("value", f["not_measured"])
        f = rl.figure("x", "x", "ms", None, 2, "b", 10)
        self.unmeasured(f, "value", "ratio", "met")

    def test_write_json_is_strict(self):
        rl.write_json(self.json, {"figures": [rl.figure("x", "x", "ms", 1, 2, "b")],
                                  "runs": [float("nan"), float("inf"), 1.0]})
        self.assertEqual(self.doc()["runs"], [None, None, 1.0])

    def test_check_rejects(self):
        good = rl.figure("x", "x", "ms", 1, 2, "b")
        bad = {
            "no figures": {"figures": []},
            "null without reason": {"figures": [{**good, "value": None}]},
            "zero value": {"figures": [{**good, "value": 0}]},
            "string value": {"figures": [{**good, "baseline": "fast"}]},
            "no ratio": {"figures": [{k: v for k, v in good.items() if k != "ratio"}]},
            "reason for a number": {"figures": [{**good, "not_measured": {"value": "x"}}]},
            "met not bool": {"figures": [{**good, "met": 1}]},
        }
        for what, d in bad.items():
            self.assertNotEqual(rl.check(d), [], what)
        self.assertEqual(rl.check({"figures": [good]}), [])
        with open(self.json, "w") as f:
            f.write('{"figures": [{"name": "x", "value": NaN, "baseline": 1, "ratio": 1}]}')
        self.assertNotEqual(rl.check_file(self.json), [])
        self.assertEqual(rl.main(["check", self.json]), 1)


class Submit(Case):
    def measure(self, files, cpu):
        for name, text in files.items():
            with open(os.path.join(self.dir.name, name), "w") as f:
                f.write(text)
        with open(os.path.join(self.dir.name, "cpu.txt"), "w") as f:
            f.write(cpu)
        out = io.StringIO()
        submit_report.report(submit_report.measurements(self.dir.name), self.json, out)
        return out.getvalue()

    API = ('{"jobs":40,"clients":%d,"submit_seconds":0.1,"submit_per_second":400.0,'
           '"latency_ms":{"p50":2.10,"p99":5.00}}\n')
    PGBENCH = ("transaction type: insert.sql\nnumber of transactions actually processed: %d\n"
               "latency average = 2.0 ms\ntps = %s (without initial connection time)\n")
    WRK = "Running 1s test\n  40000 requests in 1.00s\nRequests/sec:   %s\nTransfer/sec: 1MB\n"

    def test_zero_pgbench_no_wrk_line_no_submit_output(self):
        out = self.measure({
            "pgbench-1.out": self.PGBENCH % (500, "500.5"),
            "wrk-1.out": self.WRK % "9000.10",
            "submit-1.json": self.API % 1,
            # the crash of issue 15: pgbench committed nothing at 64 clients
            "pgbench-64.out": self.PGBENCH % (0, "0.000000"),
            "wrk-64.out": "unable to connect to 127.0.0.1:1 Connection refused\n",
            "submit-64.json": self.API % 64,
            # 16: no tool printed anything
            "submit-16.json": "",
        }, "1 300 120 140\n16 0 0 0\n64 0 130 150\n")
        lines = out.splitlines()
        self.assertRegex(lines[0], r"submit/s  1 clients +400 +pgbench insert +500 +ratio 0\.80")
        self.assertRegex(lines[2], r"submit/s 16 clients not measured +pgbench insert not measured")
        self.assertIn("(not measured: trainyard-bench-submit reported no rate", lines[2])
        self.assertRegex(lines[4], r"submit/s 64 clients +400 +pgbench insert not measured"
                                   r"  ratio not measured   GET /healthz not measured")
        self.assertIn("pgbench committed no transaction", lines[4])
        self.assertIn("wrk reported no requests/s", lines[4])
        self.assertIn("goal at 64 clients: >= 20000/s and p99 <= 20 ms: MISSED", out)
        d = self.doc()
        self.assertEqual(self.fig(d, "submit_per_second_1")["ratio"], 400 / 500.5)
        f64 = self.fig(d, "submit_per_second_64")
        self.assertEqual(f64["value"], 400)
        self.unmeasured(f64, "baseline", "ratio", "http_ceiling", "http_ratio")
        self.assertIs(f64["met"], False)
        f16 = self.fig(d, "submit_per_second_16")
        self.unmeasured(f16, "value", "baseline", "ratio")

    def test_nothing_measured_at_64_clients(self):
        out = self.measure({}, "64 0 0 0\n")
        self.assertIn("goal at 64 clients: >= 20000/s and p99 <= 20 ms: not measured", out)
        self.unmeasured(self.fig(self.doc(), "submit_per_second_64"), "value", "met")

    def test_no_measurements_at_all(self):
        self.measure({}, "")
        self.assertEqual(rl.check_file(self.json), ["no figures"])


class Latency(Case):
    def test_empty_sample(self):
        out = io.StringIO()
        latency_bench.report([], [], [], 10, self.json, out)
        self.assertIn("submit->running p50  not measured   submit call p50 not measured   ratio",
                      out.getvalue())
        self.assertIn("goal 100 ms   not measured   (0 real 2-node jobs", out.getvalue())
        self.assertIn("stage submit->scheduled", out.getvalue())
        d = self.doc()
        for name in ("submit_to_running_p50_ms", "submit_to_running_p99_ms"):
            self.unmeasured(self.fig(d, name), "value", "baseline", "ratio")
        self.unmeasured(self.fig(d, "submit_to_running_p99_ms"), "met")

    def test_containers_against_no_run_or_an_empty_run_without(self):
        for plain, reason in ((None, "no run without containers"),
                              ([], "no job without containers with a running event")):
            out = io.StringIO()
            latency_bench.report([40.0, 70.0], [1.0, 1.0], [], 2, self.json, out, plain=plain)
            self.assertIn("in containers p99       70.0 ms   without not measured", out.getvalue())
            f = self.fig(self.doc(), "isolation_submit_to_running_p99_ms")
            self.assertEqual(f["value"], 70.0)
            self.assertEqual(f["not_measured"]["baseline"], reason)
            self.assertNotIn("goal", f)

    def test_containers_within_and_over_the_allowance(self):
        for plain, met in (([30.0, 40.0], True), ([5.0, 10.0], False)):
            out = io.StringIO()
            latency_bench.report([40.0, 70.0], [1.0, 1.0], [], 2, self.json, out, plain=plain)
            f = self.fig(self.doc(), "isolation_submit_to_running_p99_ms")
            self.assertEqual(f["goal"], plain[-1] + 50)
            self.assertIs(f["met"], met)
            self.assertIn("MET" if met else "MISSED", out.getvalue())

    def test_zero_baseline_and_missing_stage(self):
        out = io.StringIO()
        latency_bench.report([40.0, 60.0], [0.0, 0.0], [[10.0, None], [12.0, None]], 2,
                             self.json, out)
        self.assertIn("ratio not measured", out.getvalue())
        self.assertRegex(out.getvalue(), r"stage scheduled->running +p50 not measured")
        f = self.fig(self.doc(), "submit_to_running_p99_ms")
        self.assertEqual(f["value"], 60.0)
        self.assertIs(f["met"], True)
        self.unmeasured(f, "baseline", "ratio")


class Dispatch(Case):
    def raw(self, **over):
        m = {"jobs": 500, "nodes": 100, "node_launches": 2250, "submit_seconds": 2.0,
             "t_start": 1000.0, "scheduled": [], "running": [], "latency_ms": [],
             "kafka_ceiling_msgs_per_s": None, "top": [], "simexec_nodes": 100,
             "simexec_processes": 1, "simstats": {}, "idle_executor": None}
        m.update(over)
        return m

    def run_report(self, m):
        out = io.StringIO()
        dispatch_bench.report(m, {"nodes": m["nodes"], "jobs": m["jobs"]}, self.json, out)
        return out.getvalue()

    def test_nothing_measured(self):
        out = self.run_report(self.raw())
        self.assertIn("gangs running/s      not measured   broker ceiling not measured", out)
        self.assertNotIn(" 0 ", out)
        self.assertIn("submit->running p50  not measured  p99 not measured  (0 jobs", out)
        self.assertIn("max RSS not measured", out)
        d = self.doc()
        for name in ("gangs_running_per_second", "gangs_placed_per_second",
                     "submit_to_running_p99_ms"):
            self.unmeasured(self.fig(d, name), "value", "baseline", "ratio", "met")
        self.assertIsNone(d["runs"]["running_per_s_sustained"])

    def test_one_instant_and_zero_ceiling(self):
        # every event at one instant: no time to divide by
        out = self.run_report(self.raw(scheduled=[1001.0] * 3, running=[1001.0] * 3,
                                       kafka_ceiling_msgs_per_s=0.0, latency_ms=[5.0],
                                       simstats={"rss_kb": "2048", "cpu_ms": "", "launches": "9"},
                                       idle_executor={"rss_kb": 0, "cpu_percent": None,
                                                      "uss_kb": 0, "pss_kb": 0,
                                                      "shared_clean_kb": 0}))
        self.assertIn("gangs placed/s       not measured   broker ceiling not measured", out)
        self.assertIn("idle executor RSS    not measured", out)
        self.assertIn("max RSS 2.0 MiB, CPU not measured", out)
        d = self.doc()
        self.unmeasured(self.fig(d, "gangs_placed_per_second"), "value", "baseline")
        self.assertEqual(self.fig(d, "submit_to_running_p99_ms")["value"], 5.0)
        self.unmeasured(self.fig(d, "idle_executor_rss_mib"), "value", "ratio", "met")

    def test_measured(self):
        sched = [1001.0 + i / 100 for i in range(500)]
        run = [t + 0.05 for t in sched]
        self.run_report(self.raw(scheduled=sched, running=run, latency_ms=[5.0, 7.0],
                                 kafka_ceiling_msgs_per_s=50000.0,
                                 top=[["1000", "20", "SELECT 1"]]))
        f = self.fig(self.doc(), "gangs_placed_per_second")
        self.assertAlmostEqual(f["value"], 500 / 4.99)
        self.assertAlmostEqual(f["baseline"], 50000 / (5 * 2250 / 500))


class Slurm(Case):
    def args(self, reps=1):
        return argparse.Namespace(jobs=100, reps=reps, clients=16, slurm_version="slurm 22.05",
                                  scheduler="s", json=self.json)

    def test_no_measurements(self):
        out = io.StringIO()
        slurm_report.report([], self.args(), out)
        self.assertIn("submit/s, API               trainyard not measured  libslurm not measured",
                      out.getvalue())
        for f in self.doc()["figures"]:
            self.unmeasured(f, "value", "baseline", "ratio", "met")

    def test_zero_seconds_and_null_result(self):
        runs = [
            {"rep": 1, "system": "slurm", "method": "sbatch", "jobs": 100, "submit_seconds": 0,
             "client_cpu_seconds": 0.3, "load": 1.0},
            {"rep": 1, "system": "trainyard", "method": "jobctl", "jobs": 100,
             "submit_seconds": 2.0, "client_cpu_seconds": 0.7, "load": 1.0},
            {"rep": 1, "system": "slurm", "method": "libslurm", "load": 1.0, "result": None},
            {"rep": 1, "system": "trainyard", "method": "api", "load": 1.0,
             "result": {"jobs": 100, "submit_per_second": 500.0, "complete_per_second": 0,
                        "latency_ms": {"p50": 2.0, "p99": 9.0}}},
        ]
        out = io.StringIO()
        slurm_report.report(runs, self.args(), out)
        self.assertIn("| 1 | not measured | 50 | not measured |", out.getvalue())
        d = self.doc()
        f = self.fig(d, "submit_per_second_process")
        self.assertEqual(f["value"], 50.0)
        self.unmeasured(f, "baseline", "ratio", "met")
        self.unmeasured(self.fig(d, "completed_per_second"), "value", "baseline", "ratio")

    def test_measured(self):
        runs = []
        for rep in (1, 2):
            runs += [
                {"rep": rep, "method": "sbatch", "jobs": 100, "submit_seconds": 2.0, "load": 1},
                {"rep": rep, "method": "jobctl", "jobs": 100, "submit_seconds": 1.0, "load": 2},
                {"rep": rep, "method": "libslurm", "load": 1, "result": {
                    "submit_per_second": 100.0, "complete_per_second": 10.0,
                    "latency_ms": {"p50": 1.0, "p99": 2.0}}},
                {"rep": rep, "method": "api", "load": 1, "result": {
                    "submit_per_second": 1000.0, "complete_per_second": 20.0,
                    "latency_ms": {"p50": 1.0, "p99": 2.0}}}]
        out = io.StringIO()
        slurm_report.report(runs, self.args(2), out)
        self.assertIn("ratio 10.00x  (16 clients, goal >= 10x MET)", out.getvalue())
        d = self.doc()
        self.assertEqual(self.fig(d, "submit_per_second_process")["ratio"], 2.0)
        self.assertIs(self.fig(d, "completed_per_second")["met"], False)


class Spot(Case):
    def test_empty(self):
        out = io.StringIO()
        spot_bench.summary([], [], [], out)
        self.assertIn("| 0 | not measured | not measured | not measured | not measured |",
                      out.getvalue())
        self.assertIn("Goal: control plane p99 <= 1000 ms: not measured.",
                      out.getvalue())
        self.assertIn("(p50): not measured; (p99): not measured.", out.getvalue())

    def test_zero_baseline(self):
        row = {"control": 0.4, "total": 0.5, "ckpt": 0.1, "startup": 0.2}
        out = io.StringIO()
        spot_bench.summary([row], [(0.1, 0.1, 0.1, 0.1)], [0.0], out)
        self.assertIn("ms: 400 ms MET.", out.getvalue())
        spot_bench.summary([{**row, "control": 1.5}], [(0.1, 0.1, 0.1, 0.1)], [0.5], out)
        self.assertIn("ms: 1500 ms MISSED by 500 ms.", out.getvalue())
        self.assertIn("(p50): 3.0x", out.getvalue())
        self.assertIn("(p50): not measured", out.getvalue())


if __name__ == "__main__":
    unittest.main()
