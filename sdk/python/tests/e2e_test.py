"""The SDK against the real API of the e2e stack (run by e2e_test.sh, which sets TY_*)."""

import os
import signal
import socket
import threading
import time
import unittest
import uuid

import trainyard

TEAM, TOKEN = os.environ["TY_TEAM"], os.environ["TY_TOKEN"]


def api():
    """The API's address: test_watch_survives_an_api_restart moves it."""
    return os.environ["TY_API_URL"]
ADMIN = os.environ["TY_ADMIN_TOKEN"]
SLEEP = ["/bin/sh", "-c", "sleep 300"]


def spec(command, **more):
    s = {"team": TEAM, "name": "sdk-" + uuid.uuid4().hex[:8], "command": command,
         "resources": {"nodes": 1, "gpus_per_node": 1}}
    s.update(more)
    return s


def until(what, check, seconds=120):
    """check() once it is truthy; fails the test after seconds (a bound, not a timing)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {seconds} s")


def upstream_of(url):
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    return host, int(port)


def restart_api():
    """The stack restarts its API on SIGUSR1 (tests/e2e/stack.c) and writes its
    new address to the settings file; TY_API_URL follows it here."""
    old = os.environ["TY_API_URL"]
    os.kill(int(os.environ["TY_STACK_PID"]), signal.SIGUSR1)

    def new_url():
        with open(os.environ["TY_STACK_ENV_FILE"]) as f:
            env = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
        return env["TY_API_URL"] if env.get("TY_API_URL", old) != old else None

    os.environ["TY_API_URL"] = until("the restarted API's address", new_url, 60)


class Proxy:
    """A TCP proxy in front of the API that can go away (every connection cut,
    new ones refused) and come back on the same port, in front of the restarted API:
    the stable address a load balancer gives clients."""

    def __init__(self, upstream):
        self.upstream = upstream_of(upstream)
        self.conns, self.cut, self.lock = [], 0, threading.Lock()
        self.port = 0
        self.up()
        self.url = f"http://127.0.0.1:{self.port}"

    def up(self):
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", self.port))
        self.port = self.lsock.getsockname()[1]
        self.lsock.listen(16)
        threading.Thread(target=self.accept, args=(self.lsock,), daemon=True).start()

    def accept(self, lsock):
        while True:
            try:
                c, _ = lsock.accept()
            except OSError:
                return
            u = socket.create_connection(self.upstream)
            with self.lock:
                self.conns += [c, u]
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=self.pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def pipe(a, b):
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def active(self):
        with self.lock:
            return sum(1 for s in self.conns if s.fileno() >= 0) // 2

    def down(self):
        self.lsock.close()
        with self.lock:
            self.cut += sum(1 for s in self.conns if s.fileno() >= 0) // 2
            for s in self.conns:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.conns = []


class E2E(unittest.TestCase):
    def setUp(self):
        self.c = trainyard.Client(api(), TOKEN, timeout=30)
        self.admin = trainyard.Client(api(), ADMIN, timeout=30)

    def end(self, job_id):
        try:
            self.c.cancel(job_id)
        except trainyard.ConflictError:
            pass

    def test_settings_from_the_environment(self):
        os.environ.update(JOBCTL_SERVER=api(), JOBCTL_TOKEN=TOKEN)
        try:
            self.assertEqual(trainyard.Client().team(TEAM)["name"], TEAM)
        finally:
            del os.environ["JOBCTL_SERVER"], os.environ["JOBCTL_TOKEN"]

    def test_submit_get_and_list_with_paging(self):
        label = uuid.uuid4().hex[:10]
        ids = [self.c.submit(spec(SLEEP, labels={"sdk": label}, resources={
            "nodes": 3, "gpus_per_node": 1}, queue_if_unschedulable=True))["id"]
            for _ in range(3)]
        try:
            job = self.c.get(ids[0])
            self.assertEqual((job["id"], job["team"], job["state"]), (ids[0], TEAM, "pending"))
            listed = [j["id"] for j in self.c.list(team=TEAM, label=f"sdk={label}", page_size=2)]
            self.assertEqual(listed, sorted(ids, reverse=True))
            self.assertEqual([j["id"] for j in self.c.list(label=f"sdk={label}",
                                                           state=["running", "succeeded"])], [])
            # the queue, one entry a page: 3 nodes wanted, 2 exist, so they wait. A page
            # boundary is a place in the order: a job not positioned yet (last) that gets
            # its position between two pages moves across it, so wait for the positions
            until("the three jobs' queue positions",
                  lambda: all(self.c.get(i)["queue_position"] for i in ids))
            mine = [e["job"] for e in self.c.queue(team=TEAM, page_size=1)]
            self.assertTrue(set(ids) <= set(mine), mine)
        finally:
            for i in ids:
                self.end(i)

    def test_what_if_submits_nothing_and_offers_a_shape_that_fits(self):
        # 3 nodes of 1 GPU can never be (2 nodes exist); 1 node could start now
        before = [j["id"] for j in self.c.list(team=TEAM)]
        answer = self.c.what_if(spec(SLEEP, resources={"nodes": 3, "gpus_per_node": 1}))
        self.assertEqual(answer["estimate"]["kind"], "never")
        self.assertTrue(answer["reason"].startswith("cannot run: "), answer["reason"])
        self.assertIn({"resources": {"nodes": 1}},
                      [a["spec_patch"] for a in answer["alternatives"]], answer)
        self.assertEqual([j["id"] for j in self.c.list(team=TEAM)], before)
        with self.assertRaises(trainyard.UnprocessableError) as cm:
            self.c.what_if(team=TEAM, resources={"nodes": 1})
        self.assertEqual(cm.exception.code, "missing_field")

    def test_idempotency_key_replays_the_same_job(self):
        key = "sdk-" + uuid.uuid4().hex
        s = spec(SLEEP, resources={"nodes": 3, "gpus_per_node": 1}, queue_if_unschedulable=True)
        a = self.c.submit(s, idempotency_key=key)
        try:
            self.assertEqual(self.c.submit(s, idempotency_key=key)["id"], a["id"])
            with self.assertRaises(trainyard.ConflictError) as cm:
                self.c.submit(s, idempotency_key=key, name="other")
            self.assertEqual(cm.exception.code, "idempotency_conflict")
        finally:
            self.end(a["id"])

    def test_a_job_watched_to_success_with_logs_and_attempts(self):
        job = self.c.submit(spec(["/bin/sh", "-c", "echo hi from sdk"]))
        events = list(self.c.watch(job["id"], wait=5))
        self.assertEqual(events[-1]["state"], "succeeded", events)
        self.assertEqual([e["seq"] for e in events], list(range(1, len(events) + 1)))
        self.assertEqual(events[0]["type"], "submitted")
        self.assertEqual(self.c.get(job["id"])["state"], "succeeded")
        attempts = self.c.attempts(job["id"])
        self.assertEqual(len(attempts), 1)
        self.assertIn("hi from sdk", self.c.logs(job["id"], rank=0, tail=10))
        self.assertIn("items", self.c.checkpoints(job["id"]))
        self.assertEqual(self.c.metrics(job["id"])["items"], [])
        # watching a finished job from its last event ends at once
        self.assertEqual(list(self.c.watch(job["id"], after=events[-1]["seq"])), [])
        page = self.c.events(job["id"], after=0, limit=1)
        self.assertEqual(len(page["events"]), 1)

    def test_a_rank_reports_metrics_and_progress_with_the_sdk(self):
        sdk = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
        code = ("import sys; sys.path.insert(0, sys.argv[1]); from trainyard import job; "
                "e = job.env(); assert e.in_trainyard and e.attempt == 1, e; "
                "assert job.progress(3, samples_per_second=10.0); "
                "assert job.report(3, val_loss=0.5, acc=1); print('reported')")
        j = self.c.submit(spec(["/usr/bin/python3", "-c", code, sdk]))
        events = list(self.c.watch(j["id"], wait=5))
        self.assertEqual(events[-1]["state"], "succeeded", self.c.logs(j["id"]))
        page = self.c.metrics(j["id"])
        self.assertEqual([(i["step"], i["metrics"]) for i in page["items"]],
                         [(3, {"val_loss": 0.5, "acc": 1})])
        # a member may report too; the values merge into the step
        self.c.report_metrics(j["id"], 3, {"acc": 0.75})
        self.assertEqual(self.c.metrics(j["id"], name="acc")["latest"],
                         {"val_loss": 0.5, "acc": 0.75})

    def test_cancel_and_stop(self):
        for verb, final in (("cancel", "cancelled"), ("stop", "stopped")):
            with self.subTest(verb=verb):
                job = self.c.submit(spec(SLEEP))
                until("running", lambda: self.c.get(job["id"])["state"] == "running")
                getattr(self.c, verb)(job["id"])
                events = list(self.c.watch(job["id"], wait=5))
                self.assertEqual(events[-1]["state"], final)
                with self.assertRaises(trainyard.ConflictError) as cm:
                    getattr(self.c, verb)(job["id"])
                self.assertEqual(cm.exception.code, "job_finished")
                self.assertEqual(cm.exception.status, 409)

    def test_watch_survives_an_api_restart(self):
        proxy = Proxy(api())
        c = trainyard.Client(proxy.url, TOKEN, timeout=30)
        job = c.submit(spec(["/bin/sh", "-c", "sleep 3; echo done"]))
        seen, done = [], threading.Event()
        error = []

        def watch():
            try:
                seen.extend(c.watch(job["id"], wait=20))
            except Exception as e:  # noqa: BLE001 (reported by the test)
                error.append(e)
            done.set()

        threading.Thread(target=watch, daemon=True).start()
        until("the first event", lambda: seen or done.is_set())
        until("a long poll in flight", lambda: proxy.active() or done.is_set())
        proxy.down()  # a long poll cut, and the port refusing
        restart_api()  # the API process stopped and started again (a new port)
        proxy.upstream = upstream_of(os.environ["TY_API_URL"])
        proxy.up()  # the stable address clients know, as a load balancer keeps it
        until("the watch's end", done.is_set, 180)
        self.assertEqual(error, [])
        self.assertGreaterEqual(proxy.cut, 1)
        self.assertEqual([e["seq"] for e in seen], list(range(1, len(seen) + 1)))
        self.assertEqual(seen[-1]["state"], "succeeded")

    def test_teams_nodes_and_usage(self):
        self.assertEqual(self.c.team(TEAM)["name"], TEAM)
        self.assertIn(TEAM, [t["name"] for t in self.c.teams()])
        self.assertEqual(sorted(n["id"] for n in self.admin.nodes()),
                         sorted(os.environ["TY_NODES"].split(",")))
        usage = self.c.usage(team=TEAM)
        self.assertIsInstance(usage, dict)
        csv = self.c.usage(team=TEAM, split="goodput", format="csv")
        self.assertIsInstance(csv, str)
        self.assertIn(",", csv.splitlines()[0])

    def test_sweeps(self):
        sw = self.c.create_sweep({"team": TEAM, "name": "sdk-sweep",
                                  "template": {"command": SLEEP,
                                               "resources": {"nodes": 3, "gpus_per_node": 1},
                                               "queue_if_unschedulable": True},
                                  "trials": [{"x": 1}, {"x": 2}]})
        got = self.c.sweep(sw["id"])
        self.assertEqual(len(got["trials"]), 2)
        self.assertIn(sw["id"], [s["id"] for s in self.c.sweeps(team=TEAM, page_size=1)])
        self.c.cancel_sweep(sw["id"])
        for t in self.c.sweep(sw["id"])["trials"]:
            self.assertEqual(self.c.get(t["job_id"])["state"], "cancelled")

    def test_whoami_search_and_the_event_feed(self):
        me = self.c.whoami()
        self.assertEqual((me["role"], me["team"]), ("member", TEAM))
        self.assertIsNone(self.admin.whoami()["team"])
        feed = self.c.feed(wait=5)  # from now on
        s = spec(SLEEP, resources={"nodes": 3, "gpus_per_node": 1}, queue_if_unschedulable=True)
        job = self.c.submit(s)
        try:
            self.assertEqual([j["id"] for j in self.c.list(q=s["name"].upper())], [job["id"]])
            # all digits: the id, or names holding them
            self.assertIn(job["id"], [j["id"] for j in self.c.list(q=str(job["id"]), team=TEAM)])
            # the feed from that cursor has the submit (bounded: feed() itself never ends)
            found = []

            def read():
                for e in feed:
                    if e["job"] == job["id"]:
                        found.append(e)
                        return

            t = threading.Thread(target=read, daemon=True)
            t.start()
            t.join(90)
            if not found:
                os.system(f"psql '{os.environ['TY_DB_URL']}' -c 'SELECT pid, state, xact_start, "
                          f"backend_xid, backend_xmin, left(query, 80) FROM pg_stat_activity' >&2")
            self.assertTrue(found, "the job's submit is not in the event feed within 90 s")
            self.assertEqual((found[0]["team"], found[0]["type"]), (TEAM, "submitted"))
        finally:
            self.end(job["id"])

    def test_errors_carry_the_apis_problem(self):
        with self.assertRaises(trainyard.NotFoundError) as cm:
            self.c.get(2**40)
        self.assertEqual((cm.exception.status, cm.exception.code), (404, "job_not_found"))
        self.assertTrue(cm.exception.request_id)
        with self.assertRaises(trainyard.UnprocessableError) as cm:
            self.c.submit(spec(["x"], resources={"nodes": 0}))
        self.assertEqual(cm.exception.code, "invalid_field")
        self.assertEqual(cm.exception.field, "resources.nodes")
        self.assertIn("'resources.nodes' must be an integer from 1 to 10000, got 0",
                      cm.exception.detail)
        with self.assertRaises(trainyard.UnauthenticatedError) as cm:
            trainyard.Client(api(), "ty_not_a_real_token").get(1)
        self.assertEqual(cm.exception.code, "unauthenticated")
        node = os.environ["TY_NODES"].split(",")[0]
        with self.assertRaises(trainyard.ForbiddenError) as cm:  # admins only
            self.c.request("POST", f"/v1/nodes/{node}/drain")
        self.assertEqual(cm.exception.code, "forbidden")


if __name__ == "__main__":
    unittest.main()
