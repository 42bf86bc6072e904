#!/usr/bin/env python3
"""An Optuna study whose trials run as Trainyard jobs (Optuna and the Trainyard SDK).

Each trial of the study is one job submitted with POST /v1/jobs: the
command after ``--``, the trial's parameters in its environment as
``HPO_PARAMS`` (compact JSON, keys sorted) and one ``HPO_PARAM_<NAME>`` per
parameter (the API keeps ``TRAINYARD_*`` for itself). The job reports its
metric with trainyard_metrics.py; this program (on the Trainyard SDK,
sdk/python, docs/sdk.md) follows the job through the
events long-poll, reads the new steps with GET /v1/jobs/{id}/metrics, hands
each to Optuna (``trial.report``) and, when the pruner says so, stops the job
(POST /v1/jobs/{id}/stop), waits until it is ``stopped`` and prunes the
trial. A completed trial's value is its metric at its last reported step.
``--n-jobs`` trials run at once.

Run with an interpreter that has Optuna (Debian: python3-optuna,
/usr/bin/python3). Against deploy/local/up::

    source .trainyard/env
    /usr/bin/python3 worker/examples/optuna_search.py --team ml \\
        --param lr=uniform:0:1 --param x=uniform:0:2 \\
        --n-trials 12 --n-jobs 4 --seed 1 --startup-trials 4 \\
        -- /usr/bin/python3 "$PWD/worker/examples/quadratic_trial.py"

Server and token: --server/--token, else JOBCTL_SERVER/JOBCTL_TOKEN, else the
jobctl config file, as jobctl finds them. docs/hpo.md walks through it.

Exit status: 0 at least one trial completed; 1 the API refused a request that
every trial needs (a bad spec, an unknown team, a bad token) or could not be
reached; 2 bad arguments; 3 no trial completed.
"""

import argparse
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
import warnings

_SDK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python", "src")
if os.path.isdir(_SDK):
    sys.path.insert(0, _SDK)
import trainyard  # noqa: E402

try:
    import optuna
except ImportError:
    sys.exit("optuna_search: this Python has no optuna (Debian: apt-get install python3-optuna, "
             "then run it with /usr/bin/python3)")

# a refusal, or an API unreachable for longer than --retry-seconds
ApiFailure = (trainyard.ApiError, trainyard.ConnectionError)
PARAM_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


class TrialJobFailed(Exception):
    """The trial's job ended failed or cancelled: the trial fails, the study goes on."""


class Interrupted(Exception):
    """The study is being ended (a signal, or another trial's fatal API error)."""


class Param:
    """One --param NAME=KIND:ARGS: uniform:LO:HI, log_uniform:LO:HI, int:LO:HI, choice:A,B,..."""

    def __init__(self, text):
        name, sep, spec = text.partition("=")
        if not sep or not PARAM_NAME.match(name):
            raise ValueError(f"'{text}' is not NAME=KIND:ARGS with NAME [A-Za-z_][A-Za-z0-9_]*")
        kind, _, args = spec.partition(":")
        self.name, self.kind = name, kind
        try:
            if kind in ("uniform", "log_uniform", "int"):
                lo, hi = args.split(":")
                conv = int if kind == "int" else float
                self.lo, self.hi = conv(lo), conv(hi)
                if not self.lo < self.hi or (kind == "log_uniform" and self.lo <= 0):
                    raise ValueError
            elif kind == "choice":
                self.choices = [_scalar(v) for v in args.split(",")]
                if not args:
                    raise ValueError
            else:
                raise ValueError
        except ValueError:
            raise ValueError(f"'{text}': KIND:ARGS must be uniform:LO:HI, log_uniform:LO:HI "
                             f"(0 < LO), int:LO:HI (LO < HI) or choice:A,B,...") from None

    def suggest(self, trial):
        if self.kind == "uniform":
            return trial.suggest_float(self.name, self.lo, self.hi)
        if self.kind == "log_uniform":
            return trial.suggest_float(self.name, self.lo, self.hi, log=True)
        if self.kind == "int":
            return trial.suggest_int(self.name, self.lo, self.hi)
        return trial.suggest_categorical(self.name, self.choices)


def _scalar(text):
    try:
        value = json.loads(text)
        if isinstance(value, (int, float, str, bool)):
            return value
    except ValueError:
        pass
    return text


def _env_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else repr(value)


def _merge(base, extra):
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


class Search:
    """The objective: one trial = one job, followed until it ends."""

    def __init__(self, study, api, args, params):
        self.study, self.api, self.args, self.params = study, api, args, params
        self.run_id = uuid.uuid4().hex[:12]
        self.lock = threading.Lock()
        self.fatal = None  # the first ApiError, which ends the study
        self.interrupted = threading.Event()

    def log(self, text):
        with self.lock:
            print(f"optuna_search: {text}", file=sys.stderr, flush=True)

    def spec(self, trial, values):
        a = self.args
        env = {"HPO_PARAMS": json.dumps(values, sort_keys=True, separators=(",", ":")),
               "HPO_STUDY": a.study_name, "HPO_TRIAL": str(trial.number)}
        for name, value in values.items():
            env[f"HPO_PARAM_{name.upper()}"] = _env_value(value)
        spec = {"team": a.team, "name": f"{a.study_name}-trial-{trial.number}"[:128],
                "command": a.command,
                "resources": {"nodes": a.nodes, "gpus_per_node": a.gpus_per_node},
                "labels": {"hpo-study": a.study_name[:256], "hpo-trial": str(trial.number)}}
        _merge(spec, json.loads(a.spec) if a.spec else {})
        spec["env"] = dict(spec.get("env") or {})
        spec["env"].update(a.env)
        spec["env"].update(env)  # the trial's own parameters win
        return spec

    def __call__(self, trial):
        if self.interrupted.is_set():
            self.end_study()
            raise Interrupted("the study was interrupted before this trial started")
        values = {p.name: p.suggest(trial) for p in self.params}
        # the key makes a submit retried after a lost answer return the same
        # job; the run id keeps a rerun of the same study name from replaying
        key = f"optuna/{self.args.study_name}/{self.run_id}/{trial.number}"
        job_id = None
        try:
            job = self.api.submit(self.spec(trial, values), idempotency_key=key)
            job_id = job["id"]
            trial.set_user_attr("job_id", job_id)
            self.log(f"trial {trial.number}: job {job_id} "
                     + " ".join(f"{k}={v!r}" for k, v in values.items()))
            return self.follow(trial, job_id)
        except TrialJobFailed as err:
            self.log(str(err))
            raise
        except ApiFailure as err:
            # what failed here (a refused spec, a bad token, an API gone for
            # longer than --retry-seconds) fails every other trial too
            with self.lock:
                self.fatal = self.fatal or err
            self.interrupted.set()
            self.end_study()
            raise
        except Interrupted:
            if job_id is not None:
                self.cancel(job_id)
            self.end_study()
            raise

    def end_study(self):
        """No new trials (only a trial's thread may tell Optuna so)."""
        try:
            self.study.stop()
        except RuntimeError:
            pass

    def follow(self, trial, job_id):
        a = self.args
        after, last_step, state = 0, None, "pending"
        pruned_at = None
        last_value = None
        while True:
            if self.interrupted.is_set():
                raise Interrupted(f"job {job_id} was running when the study was interrupted")
            # held until the job has a new event or poll_seconds pass
            ev = self.api.events(job_id, after, wait=a.poll_seconds)
            after, state = ev["next_after"], ev["state"]
            # the state first, then the metrics: once the state is final, this
            # read has every step the job reported before it ended
            for step, value in self.new_metrics(job_id, last_step):
                last_step, last_value = step, value
                # steps reported while the stop is on its way count too: a job
                # that succeeds before the stop reaches it is a complete trial
                trial.report(value, step)
                if (pruned_at is None and state not in trainyard.TERMINAL_STATES and a.pruner != "none"
                        and trial.should_prune()):
                    pruned_at = step
                    self.stop(trial, job_id, step, value)
            if state in trainyard.TERMINAL_STATES:
                break
        trial.set_user_attr("job_state", state)
        if state == "stopped":
            if pruned_at is None:
                self.log(f"trial {trial.number}: job {job_id} was stopped by someone else")
            raise optuna.TrialPruned(f"job {job_id} stopped"
                                     + (f" at step {pruned_at}" if pruned_at is not None else ""))
        if state != "succeeded":
            job = self.api.get(job_id)
            raise TrialJobFailed(f"trial {trial.number}: job {job_id} ended {state}"
                                 + (f" ({job['failure_class']})" if job.get("failure_class")
                                    else ""))
        if pruned_at is not None:
            self.log(f"trial {trial.number}: job {job_id} succeeded before the stop reached it;"
                     f" kept as complete")
        if last_value is None:
            raise TrialJobFailed(f"trial {trial.number}: job {job_id} succeeded without "
                                 f"reporting '{a.metric}'")
        return last_value

    def new_metrics(self, job_id, last_step):
        """(step, value) of the job's steps after last_step that reported the metric."""
        out = []
        while True:
            page = self.api.metrics(job_id, name=self.args.metric, after_step=last_step,
                                    limit=1000)
            for item in page["items"]:
                out.append((item["step"], item["metrics"][self.args.metric]))
                last_step = item["step"]
            if page.get("next_after_step") is None:
                return out

    def stop(self, trial, job_id, step, value):
        try:
            self.api.stop(job_id)
        except ApiFailure as err:
            if getattr(err, "code", None) != "job_finished":  # it ended first: the caller sees how
                raise
        self.log(f"trial {trial.number}: pruned at step {step} ({self.args.metric} {value:g});"
                 f" stopping job {job_id}")

    def cancel(self, job_id):
        try:
            self.api.cancel(job_id)
            self.log(f"interrupted: cancelled job {job_id}")
        except ApiFailure as err:
            if getattr(err, "code", None) != "job_finished":
                self.log(f"interrupted: cannot cancel job {job_id}: {err}")


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Run an Optuna study whose trials are Trainyard jobs.",
        usage="%(prog)s --team TEAM --param NAME=KIND:ARGS... [options] -- COMMAND [ARG...]",
        epilog="The job gets HPO_PARAMS (JSON), HPO_PARAM_<NAME>, HPO_STUDY and HPO_TRIAL "
               "in its environment and reports METRIC with trainyard_metrics.py.")
    ap.add_argument("--server", help="API URL (default: $JOBCTL_SERVER, the jobctl config, "
                    "http://127.0.0.1:8080)")
    ap.add_argument("--token", help="API token (default: $JOBCTL_TOKEN, the jobctl config)")
    ap.add_argument("--team", required=True, help="the team the trial jobs belong to")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=KIND:ARGS",
                    help="a parameter: uniform:LO:HI, log_uniform:LO:HI, int:LO:HI, "
                    "choice:A,B,... (repeat)")
    ap.add_argument("--metric", default="val_loss", help="the reported metric to optimise "
                    "(default val_loss)")
    ap.add_argument("--direction", choices=("minimize", "maximize"), default="minimize")
    ap.add_argument("--n-trials", type=int, default=12, help="trials (default 12)")
    ap.add_argument("--n-jobs", type=int, default=4, help="trials at once (default 4)")
    ap.add_argument("--study-name", help="default: optuna-<UTC time>")
    ap.add_argument("--storage", help="Optuna storage URL (default: in memory)")
    ap.add_argument("--sampler", choices=("tpe", "random"), default="tpe")
    ap.add_argument("--seed", type=int, help="the sampler's seed")
    ap.add_argument("--startup-trials", type=int, default=10,
                    help="TPE: random trials before the model (default 10)")
    ap.add_argument("--pruner", choices=("median", "none"), default="median")
    ap.add_argument("--pruner-startup-trials", type=int, default=5,
                    help="median: no pruning before this many trials ended (default 5)")
    ap.add_argument("--pruner-warmup-steps", type=int, default=0,
                    help="median: no pruning at lower steps (default 0)")
    ap.add_argument("--nodes", type=int, default=1, help="nodes per trial (default 1)")
    ap.add_argument("--gpus-per-node", type=int, default=1, help="default 1")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="more job environment (repeat)")
    ap.add_argument("--spec", help="more job spec fields as JSON, merged into each trial's "
                    "(e.g. '{\"max_runtime_seconds\":600}')")
    ap.add_argument("--poll-seconds", type=int, default=1,
                    help="longest wait for a job event before looking for metrics (1-60; "
                    "default 1)")
    ap.add_argument("--retry-seconds", type=float, default=30.0,
                    help="how long to retry an unreachable or failing API (default 30)")
    ap.add_argument("--results", metavar="FILE",
                    help="write every trial (params, job, state, values Optuna saw) as JSON")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG...]")
    args = ap.parse_args(argv)
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        ap.error("the trial command is missing: end the options with -- COMMAND [ARG...]")
    try:
        args.params = [Param(p) for p in args.param]
        env = []
        for item in args.env:
            name, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"--env '{item}' is not NAME=VALUE")
            env.append((name, value))
        args.env = env
        if args.spec:
            if not isinstance(json.loads(args.spec), dict):
                raise ValueError("--spec is not a JSON object")
    except ValueError as err:
        ap.error(str(err))
    if not args.params:
        ap.error("give at least one --param")
    if len({p.name.upper() for p in args.params}) != len(args.params):
        ap.error("two --param names differ only in case: their HPO_PARAM_ variables collide")
    if args.n_trials < 1 or args.n_jobs < 1 or not 1 <= args.poll_seconds <= 60:
        ap.error("--n-trials and --n-jobs must be at least 1, --poll-seconds 1-60")
    try:
        args.api = trainyard.Client(args.server, args.token,
                                    retry_seconds=args.retry_seconds)
    except trainyard.ConfigError as err:
        if err.missing == "token":
            ap.error("no token: pass --token or set JOBCTL_TOKEN (source .trainyard/env)")
        ap.error(str(err))
    args.study_name = args.study_name or time.strftime("optuna-%Y%m%dT%H%M%SZ", time.gmtime())
    return args


def results(study, args):
    trials = []
    for t in study.trials:
        trials.append({"number": t.number, "state": t.state.name, "params": t.params,
                       "job_id": t.user_attrs.get("job_id"),
                       "job_state": t.user_attrs.get("job_state"),
                       "value": t.value,
                       "intermediate": {str(s): v for s, v in sorted(t.intermediate_values.items())}})
    out = {"study": args.study_name, "metric": args.metric, "direction": args.direction,
           "trials": trials, "best": None}
    try:
        b = study.best_trial
        out["best"] = {"number": b.number, "job_id": b.user_attrs.get("job_id"),
                       "params": b.params, "value": b.value}
    except ValueError:
        pass
    return out


def main(argv):
    args = parse_args(argv)
    # this program says what happened to each trial itself
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    api = args.api
    # one cheap call first: a bad token or server fails here, not in every trial
    try:
        api.team(args.team)
    except ApiFailure as err:
        print(f"optuna_search: {err}", file=sys.stderr)
        return 1
    if args.sampler == "tpe":
        sampler = optuna.samplers.TPESampler(seed=args.seed, n_startup_trials=args.startup_trials,
                                             multivariate=True, constant_liar=True)
    else:
        sampler = optuna.samplers.RandomSampler(seed=args.seed)
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=args.pruner_startup_trials,
                                          n_warmup_steps=args.pruner_warmup_steps)
              if args.pruner == "median" else optuna.pruners.NopPruner())
    study = optuna.create_study(study_name=args.study_name, storage=args.storage,
                                sampler=sampler, pruner=pruner, direction=args.direction,
                                load_if_exists=bool(args.storage))
    search = Search(study, api, args, args.params)

    # the trial threads notice within --poll-seconds, cancel their jobs and end
    def interrupt(signum, _frame):
        search.log(f"{signal.Signals(signum).name}: cancelling the running trials' jobs")
        search.interrupted.set()

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    status = 0
    try:
        study.optimize(search, n_trials=args.n_trials, n_jobs=args.n_jobs,
                       catch=(TrialJobFailed,))
    except (*ApiFailure, Interrupted):
        pass  # Optuna re-raises some of them, not all: search knows what happened
    if search.fatal:
        print(f"optuna_search: {search.fatal}", file=sys.stderr)
        status = 1
    elif search.interrupted.is_set():
        status = 130
    for t in study.trials:
        shown = f"{args.metric} {t.value:.6g}" if t.value is not None else ""
        params = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in t.params.items())
        print(f"trial {t.number:3}  job {t.user_attrs.get('job_id', '-'):>5}  "
              f"{t.state.name:8}  {t.user_attrs.get('job_state', '-'):9}  {shown:24} {params}")
    doc = results(study, args)
    if args.results:
        with open(args.results, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
    if doc["best"]:
        b = doc["best"]
        print(f"best: trial {b['number']} (job {b['job_id']}) {args.metric} {b['value']:.6g} "
              f"with {json.dumps(b['params'], sort_keys=True)}")
    elif status == 0:
        print("optuna_search: no trial completed", file=sys.stderr)
        status = 3
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
