#!/usr/bin/python3
"""Check deploy/ against the programs it runs.

Kubernetes manifests (deploy/k8s), systemd units and their environment
files (deploy/systemd), the Prometheus alert rules (deploy/prometheus) and
the Dockerfile (deploy/container) are parsed and checked: required fields,
references that must resolve (ConfigMaps, Secrets, claims, volumes, ports,
selectors), every option and environment variable against the built
program's --help, the hardening the units must keep, and `promtool check
rules` / `systemd-analyze verify` / dockerfile-utils (dockerfile.js, after
`npm ci --prefix tests/deploy`) on the real files. Every failure names the
file and the field.

  check_manifests.py --root REPO --bin BUILD/bin            check REPO/deploy
  check_manifests.py --root REPO --bin BUILD/bin --self-test
      break a copy of deploy/ in one way per case and check that each break
      is reported, naming its file and field
"""

import argparse
import copy
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

import yaml

PROGRAMS = ("trainyard-api", "trainyard-scheduler", "trainyard-executor")

PENDING_OPTIONS = {}

# apiVersion each kind must use; any other kind is an error, not skipped
KINDS = {
    "Namespace": "v1",
    "ConfigMap": "v1",
    "Secret": "v1",
    "Service": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "DaemonSet": "apps/v1",
    "Job": "batch/v1",
    "PodDisruptionBudget": "policy/v1",
}
WORKLOADS = ("Deployment", "DaemonSet", "Job")
FIELD_PATHS = ("metadata.name", "metadata.namespace", "spec.nodeName",
               "status.hostIP", "status.podIP")
# which setting holds the port each program listens on, and its container port
PORT_SETTINGS = {
    "trainyard-api": "TRAINYARD_PORT",
    "trainyard-scheduler": "TRAINYARD_SCHEDULER_METRICS_LISTEN",
    "trainyard-executor": "TRAINYARD_EXECUTOR_LOG_PORT",
}
SEVERITIES = ("critical", "warning", "info")

# libyaml's parser when python3-yaml has it; parses remembered by text (the
# self-test checks many copies that differ in one file)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_parsed = {}


def load_yaml_all(text):
    if text not in _parsed:
        _parsed[text] = list(yaml.load_all(text, Loader=_LOADER))
    return copy.deepcopy(_parsed[text])


class Help:
    """Options of one program, from its --help."""

    def __init__(self, prog, text):
        self.prog = prog
        self.flags = {}      # --flag -> env name
        self.required = []   # (flag, env) of options whose help says (required)
        lines = text.splitlines()
        opt = re.compile(r"^\s+(--[a-z0-9-]+)(?:\s+[A-Z]+)?\s+\((TRAINYARD_[A-Z0-9_]+)[,)]")
        for i, line in enumerate(lines):
            m = opt.match(line)
            if not m:
                continue
            self.flags[m.group(1)] = m.group(2)
            desc = lines[i + 1] if i + 1 < len(lines) else ""
            if "(required)" in desc:
                self.required.append((m.group(1), m.group(2)))
        self.envs = {v: k for k, v in self.flags.items()}
        self.pending = PENDING_OPTIONS.get(prog, {})
        self.notes = set()

    def env_ok(self, name):
        if name in self.envs:
            return True
        if name in self.pending.values():
            self.notes.add(f"{self.prog}: {name} is not in this build's --help yet "
                           "(pending option of issue 9, accepted)")
            return True
        return False

    def flag_ok(self, flag):
        flag = flag.split("=", 1)[0]
        if flag in self.flags:
            return True
        if flag in self.pending:
            self.notes.add(f"{self.prog}: {flag} is not in this build's --help yet "
                           "(pending option of issue 9, accepted)")
            return True
        return False


def load_helps(bindir):
    helps = {}
    for prog in PROGRAMS:
        path = os.path.join(bindir, prog)
        if not os.access(path, os.X_OK):
            sys.exit(f"check_manifests: '{path}' is not an executable: build the programs first")
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=30)
        if out.returncode != 0 or "TRAINYARD_" not in out.stdout:
            sys.exit(f"check_manifests: '{path} --help' failed (exit {out.returncode})")
        helps[prog] = Help(prog, out.stdout)
    return helps


class Checker:
    def __init__(self, root, helps, bindir):
        self.root = root
        self.helps = helps
        self.bindir = bindir
        self.failures = []
        self.env_lines_failed = set()

    def fail(self, rel, where, msg):
        self.failures.append(f"{rel}: {where}: {msg}")

    def read(self, rel):
        with open(os.path.join(self.root, rel), encoding="utf-8") as f:
            return f.read()

    def run(self):
        self.check_k8s()
        self.check_systemd()
        self.check_prometheus()
        self.check_container()
        return self.failures

    # ---- Kubernetes -------------------------------------------------------

    def check_k8s(self):
        kdir = "deploy/k8s"
        krel = f"{kdir}/kustomization.yaml"
        try:
            kust = (load_yaml_all(self.read(krel)) or [None])[0] or {}
        except (OSError, yaml.YAMLError) as e:
            self.fail(krel, "file", f"cannot parse: {e}")
            return
        ns = kust.get("namespace")
        if not ns:
            self.fail(krel, "namespace", "missing")
        resources = kust.get("resources") or []
        images = {i.get("name") for i in kust.get("images") or [] if isinstance(i, dict)}
        listed = set(resources)
        for f in sorted(os.listdir(os.path.join(self.root, kdir))):
            if f.endswith((".yaml", ".yml")) and f != "kustomization.yaml" and f not in listed:
                self.fail(f"{kdir}/{f}", "file", "not listed in kustomization.yaml resources")

        objs = []  # (rel, obj)
        for res in resources:
            rel = f"{kdir}/{res}"
            try:
                docs = load_yaml_all(self.read(rel))
            except OSError:
                self.fail(krel, f"resources[{res}]", "no such file")
                continue
            except yaml.YAMLError as e:
                self.fail(rel, "file", f"cannot parse: {e}")
                continue
            for d in docs:
                if d is not None:
                    objs.append((rel, d))

        ok = []
        for rel, o in objs:
            if not isinstance(o, dict):
                self.fail(rel, "document", "not a mapping")
                continue
            kind, api = o.get("kind"), o.get("apiVersion")
            name = (o.get("metadata") or {}).get("name")
            where = f"{kind} {name}"
            if not kind:
                self.fail(rel, f"{where}", "kind: missing")
                continue
            if not name:
                self.fail(rel, where, "metadata.name: missing")
                continue
            if kind not in KINDS:
                self.fail(rel, where, f"kind: '{kind}' is not one this checker knows")
                continue
            if api != KINDS[kind]:
                self.fail(rel, where, f"apiVersion: '{api}', expected '{KINDS[kind]}'")
            mns = o["metadata"].get("namespace")
            if kind != "Namespace" and mns is not None and mns != ns:
                self.fail(rel, where, f"metadata.namespace: '{mns}' is not the kustomization's '{ns}'")
            ok.append((rel, o))

        def named(kind):
            return {o["metadata"]["name"]: (rel, o) for rel, o in ok if o["kind"] == kind}

        namespaces = named("Namespace")
        if ns and ns not in namespaces:
            self.fail(krel, "namespace", f"no Namespace '{ns}' among the resources")
        cms, secrets, pvcs = named("ConfigMap"), named("Secret"), named("PersistentVolumeClaim")
        for name, (rel, o) in cms.items():
            for k, v in (o.get("data") or {}).items():
                if not isinstance(v, str):
                    self.fail(rel, f"ConfigMap {name}", f"data.{k}: {v!r} is not a string (quote it)")
        for name, (rel, o) in secrets.items():
            if o.get("data"):
                self.fail(rel, f"Secret {name}", "data: use stringData with CHANGE_ME placeholders")
            for k, v in (o.get("stringData") or {}).items():
                if "CHANGE_ME" not in str(v):
                    self.fail(rel, f"Secret {name}",
                              f"stringData.{k}: not a placeholder (must contain CHANGE_ME)")

        workloads = [(rel, o) for rel, o in ok if o["kind"] in WORKLOADS]
        by_prog = {}
        for rel, o in workloads:
            for prog in self.check_workload(rel, o, cms, secrets, pvcs, images):
                by_prog.setdefault(prog, []).append((rel, o))

        for name, (rel, o) in named("Service").items():
            self.check_service(rel, o, workloads)
        pdbs = named("PodDisruptionBudget")
        for name, (rel, o) in pdbs.items():
            sel = ((o.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if not sel or not any(matches(sel, pod_labels(w)) for _, w in workloads):
                self.fail(rel, f"PodDisruptionBudget {name}",
                          f"spec.selector.matchLabels: {sel} selects no workload's pods")

        # what each program needs here
        for prog in PROGRAMS:
            if prog not in by_prog:
                self.fail(kdir, prog, "no workload runs it")
        for rel, o in by_prog.get("trainyard-api", []):
            where = f"{o['kind']} {o['metadata']['name']}"
            c = o["spec"]["template"]["spec"]["containers"][0]
            if "--migrate" in (c.get("command") or []) + (c.get("args") or []):
                continue
            if o["kind"] != "Deployment":
                self.fail(rel, where, "kind: the API runs as a Deployment")
                continue
            if not any(matches((s.get("spec") or {}).get("selector") or {}, pod_labels(o))
                       for _, s in named("Service").values()):
                self.fail(rel, where, "no Service selects its pods")
            if not any(matches(((p.get("spec") or {}).get("selector") or {}).get("matchLabels") or {},
                               pod_labels(o)) for _, p in pdbs.values()):
                self.fail(rel, where, "no PodDisruptionBudget selects its pods")
            routes = self.api_routes()
            for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
                got = ((c.get(probe) or {}).get("httpGet") or {}).get("path")
                if got != path:
                    self.fail(rel, f"{where} containers[{c.get('name')}]",
                              f"{probe}.httpGet.path: {got!r}, expected '{path}'")
                elif path not in routes:
                    self.fail("api/routes.c", path, f"not a GET route, but {rel} probes it")
        migrate = [w for w in by_prog.get("trainyard-api", [])
                   if "--migrate" in (w[1]["spec"]["template"]["spec"]["containers"][0].get("command") or [])]
        if not any(o["kind"] == "Job" for _, o in migrate):
            self.fail(kdir, "trainyard-api --migrate", "no Job applies the migrations")
        for rel, o in by_prog.get("trainyard-scheduler", []):
            where = f"{o['kind']} {o['metadata']['name']}"
            if o["kind"] != "Deployment":
                self.fail(rel, where, "kind: the scheduler runs as a Deployment")
            elif o["spec"].get("replicas") != 2:
                self.fail(rel, where, f"spec.replicas: {o['spec'].get('replicas')!r}, expected 2 "
                          "(a leader and a standby)")
        for rel, o in by_prog.get("trainyard-executor", []):
            self.check_executor(rel, o)

    def api_routes(self):
        try:
            text = self.read("api/routes.c")
        except OSError:
            return set()
        return set(re.findall(r'\{"GET", "([^"]+)"', text))

    def check_workload(self, rel, o, cms, secrets, pvcs, images):
        """Checks one Deployment, DaemonSet or Job; returns the programs it runs."""
        kind, name = o["kind"], o["metadata"]["name"]
        where = f"{kind} {name}"
        spec = o.get("spec") or {}
        tmpl = spec.get("template") or {}
        pod = tmpl.get("spec") or {}
        progs = []
        if not pod.get("containers"):
            self.fail(rel, where, "spec.template.spec.containers: missing")
            return progs
        labels = (tmpl.get("metadata") or {}).get("labels") or {}
        if kind != "Job":
            sel = (spec.get("selector") or {}).get("matchLabels") or {}
            if not sel:
                self.fail(rel, where, "spec.selector.matchLabels: missing")
            elif not matches(sel, labels):
                self.fail(rel, where, f"spec.selector.matchLabels: {sel} does not match "
                          f"spec.template.metadata.labels {labels}")
        if pod.get("enableServiceLinks") is not False:
            self.fail(rel, where, "spec.template.spec.enableServiceLinks: must be false "
                      "(injected <SERVICE>_PORT variables can collide with TRAINYARD_* options)")
        volumes = {}
        for v in pod.get("volumes") or []:
            vname = v.get("name")
            volumes[vname] = v
            if "configMap" in v and v["configMap"].get("name") not in cms:
                self.fail(rel, where, f"volumes[{vname}].configMap.name: no ConfigMap "
                          f"'{v['configMap'].get('name')}'")
            if "secret" in v and v["secret"].get("secretName") not in secrets:
                self.fail(rel, where, f"volumes[{vname}].secret.secretName: no Secret "
                          f"'{v['secret'].get('secretName')}'")
            if "persistentVolumeClaim" in v and v["persistentVolumeClaim"].get("claimName") not in pvcs:
                self.fail(rel, where, f"volumes[{vname}].persistentVolumeClaim.claimName: no "
                          f"PersistentVolumeClaim '{v['persistentVolumeClaim'].get('claimName')}'")

        for c in pod["containers"]:
            cw = f"{where} containers[{c.get('name')}]"
            if not c.get("name"):
                self.fail(rel, cw, "name: missing")
            if not c.get("image"):
                self.fail(rel, cw, "image: missing")
            elif c["image"] not in images:
                self.fail(rel, cw, f"image: '{c['image']}' has no entry in kustomization.yaml images")
            res = c.get("resources") or {}
            for part, keys in (("requests", ("cpu", "memory")), ("limits", ("memory",))):
                for k in keys:
                    if k not in (res.get(part) or {}):
                        self.fail(rel, cw, f"resources.{part}.{k}: missing")
            cmd = c.get("command") or []
            prog = os.path.basename(cmd[0]) if cmd else None
            if prog not in self.helps:
                self.fail(rel, cw, f"command: {cmd!r} does not run one of {', '.join(PROGRAMS)}")
                continue
            progs.append(prog)
            h = self.helps[prog]
            for a in cmd[1:] + (c.get("args") or []):
                if a.startswith("--") and not h.flag_ok(a):
                    self.fail(rel, cw, f"command: '{a}' is not an option of {prog}")
            settings = {}  # effective environment: name -> value (None: from a Secret/field)
            for ef in c.get("envFrom") or []:
                if "configMapRef" in ef:
                    ref = ef["configMapRef"].get("name")
                    if ref not in cms:
                        self.fail(rel, cw, f"envFrom.configMapRef.name: no ConfigMap '{ref}'")
                        continue
                    crel, cm = cms[ref]
                    for k, v in (cm.get("data") or {}).items():
                        if not h.env_ok(k):
                            self.fail(crel, f"ConfigMap {ref}", f"data.{k}: not an environment "
                                      f"variable of {prog} (loaded by {where})")
                        settings[k] = v
                elif "secretRef" in ef:
                    ref = ef["secretRef"].get("name")
                    if ref not in secrets:
                        self.fail(rel, cw, f"envFrom.secretRef.name: no Secret '{ref}'")
                        continue
                    srel, s = secrets[ref]
                    for k in (s.get("stringData") or {}):
                        if not h.env_ok(k):
                            self.fail(srel, f"Secret {ref}", f"stringData.{k}: not an environment "
                                      f"variable of {prog} (loaded by {where})")
                        settings[k] = None
                else:
                    self.fail(rel, cw, f"envFrom: {ef!r} is neither configMapRef nor secretRef")
            for e in c.get("env") or []:
                en = e.get("name")
                ew = f"env[{en}]"
                if not h.env_ok(en):
                    self.fail(rel, cw, f"{ew}: not an environment variable of {prog}")
                vf = e.get("valueFrom")
                if vf is None:
                    settings[en] = str(e.get("value", ""))
                    continue
                settings[en] = None
                if "secretKeyRef" in vf:
                    r = vf["secretKeyRef"]
                    if r.get("name") not in secrets:
                        self.fail(rel, cw, f"{ew}.valueFrom.secretKeyRef.name: no Secret '{r.get('name')}'")
                    elif r.get("key") not in (secrets[r["name"]][1].get("stringData") or {}):
                        self.fail(rel, cw, f"{ew}.valueFrom.secretKeyRef.key: Secret '{r['name']}' "
                                  f"has no key '{r.get('key')}'")
                elif "configMapKeyRef" in vf:
                    r = vf["configMapKeyRef"]
                    if r.get("name") not in cms:
                        self.fail(rel, cw, f"{ew}.valueFrom.configMapKeyRef.name: no ConfigMap '{r.get('name')}'")
                    elif r.get("key") not in (cms[r["name"]][1].get("data") or {}):
                        self.fail(rel, cw, f"{ew}.valueFrom.configMapKeyRef.key: ConfigMap "
                                  f"'{r['name']}' has no key '{r.get('key')}'")
                    else:
                        settings[en] = cms[r["name"]][1]["data"][r["key"]]
                elif "fieldRef" in vf:
                    if vf["fieldRef"].get("fieldPath") not in FIELD_PATHS:
                        self.fail(rel, cw, f"{ew}.valueFrom.fieldRef.fieldPath: "
                                  f"'{vf['fieldRef'].get('fieldPath')}' is not one of {FIELD_PATHS}")
                else:
                    self.fail(rel, cw, f"{ew}.valueFrom: {vf!r} is not a secret, ConfigMap or field reference")
            for flag, env in h.required:
                if env not in settings and not any(a.split("=", 1)[0] == flag for a in cmd[1:]):
                    self.fail(rel, cw, f"env: {prog} requires {env} (or {flag})")
            mounts = {}
            for m in c.get("volumeMounts") or []:
                if m.get("name") not in volumes:
                    self.fail(rel, cw, f"volumeMounts[{m.get('mountPath')}].name: no volume '{m.get('name')}'")
                else:
                    mounts[m.get("mountPath")] = volumes[m["name"]]
            ports = {}
            for p in c.get("ports") or []:
                ports[p.get("name")] = p.get("containerPort")
            numbers = set(ports.values())
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                hg = (c.get(probe) or {}).get("httpGet")
                if hg and hg.get("port") not in ports and hg.get("port") not in numbers:
                    self.fail(rel, cw, f"{probe}.httpGet.port: '{hg.get('port')}' is not a port "
                              "of the container")
            if kind != "Job" and not c.get("livenessProbe"):
                self.fail(rel, cw, "livenessProbe: missing")
            key = PORT_SETTINGS.get(prog)
            if kind != "Job" and key:
                val = settings.get(key)
                port = None if val is None else str(val).rsplit(":", 1)[-1]
                if port is None or not port.isdigit() or int(port) not in numbers:
                    self.fail(rel, cw, f"ports: {key}={val!r} is not a containerPort {sorted(numbers)}")
            ann = (tmpl.get("metadata") or {}).get("annotations") or {}
            if ann.get("prometheus.io/scrape") == "true":
                pp = ann.get("prometheus.io/port", "")
                if not pp.isdigit() or int(pp) not in numbers:
                    self.fail(rel, where, f"annotations.prometheus.io/port: '{pp}' is not a containerPort")
            if prog == "trainyard-api" and kind != "Job" and settings.get("TRAINYARD_LISTEN_ADDR") != "0.0.0.0":
                self.fail(rel, cw, "env: TRAINYARD_LISTEN_ADDR must be 0.0.0.0 in a pod "
                          f"(is {settings.get('TRAINYARD_LISTEN_ADDR')!r})")
            if prog == "trainyard-executor":
                for env, vtype in (("TRAINYARD_EXECUTOR_STATE_DIR", "hostPath"),
                                   ("TRAINYARD_EXECUTOR_CHECKPOINT_ROOT", "persistentVolumeClaim")):
                    path = settings.get(env)
                    vol = None if path is None else mount_for(mounts, path)
                    if vol is None or vtype not in vol:
                        self.fail(rel, cw, f"volumeMounts: {env}={path!r} is not on a {vtype} volume")
        return progs

    def check_executor(self, rel, o):
        where = f"{o['kind']} {o['metadata']['name']}"
        if o["kind"] != "DaemonSet":
            self.fail(rel, where, "kind: the executor runs as a DaemonSet (one per node)")
            return
        pod = o["spec"]["template"]["spec"]
        if pod.get("hostNetwork") is not True:
            self.fail(rel, where, "spec.template.spec.hostNetwork: must be true (RDMA, rendezvous "
                      "on the node's address)")
        if pod.get("dnsPolicy") != "ClusterFirstWithHostNet":
            self.fail(rel, where, "spec.template.spec.dnsPolicy: must be ClusterFirstWithHostNet")
        c = pod["containers"][0]
        cw = f"{where} containers[{c.get('name')}]"
        if "nvidia.com/gpu" not in ((c.get("resources") or {}).get("limits") or {}):
            self.fail(rel, cw, "resources.limits.nvidia.com/gpu: missing")
        if not any(m.get("mountPath") == "/dev/shm" for m in c.get("volumeMounts") or []):
            self.fail(rel, cw, "volumeMounts: nothing at /dev/shm (NCCL's shared memory)")
        sc = c.get("securityContext") or {}
        if "IPC_LOCK" not in ((sc.get("capabilities") or {}).get("add") or []) and not sc.get("privileged"):
            self.fail(rel, cw, "securityContext.capabilities.add: IPC_LOCK missing (RDMA "
                      "memory registration)")

    def check_service(self, rel, o, workloads):
        name = o["metadata"]["name"]
        where = f"Service {name}"
        spec = o.get("spec") or {}
        sel = spec.get("selector") or {}
        targets = [w for _, w in workloads if sel and matches(sel, pod_labels(w))]
        if not targets:
            self.fail(rel, where, f"spec.selector: {sel} selects no workload's pods")
            return
        if not spec.get("ports"):
            self.fail(rel, where, "spec.ports: missing")
        for p in spec.get("ports") or []:
            tp = p.get("targetPort", p.get("port"))
            for w in targets:
                cports = [cp for c in w["spec"]["template"]["spec"]["containers"]
                          for cp in c.get("ports") or []]
                if not any(tp in (cp.get("name"), cp.get("containerPort")) for cp in cports):
                    self.fail(rel, where, f"spec.ports[{p.get('name')}].targetPort: '{tp}' is not a "
                              f"port of {w['kind']} {w['metadata']['name']}")

    # ---- systemd ----------------------------------------------------------

    def check_systemd(self):
        sdir = "deploy/systemd"
        units = sorted(f for f in os.listdir(os.path.join(self.root, sdir)) if f.endswith(".service"))
        seen = set()
        for u in units:
            rel = f"{sdir}/{u}"
            seen |= self.check_unit(rel)
        for prog in PROGRAMS:
            if prog not in seen:
                self.fail(sdir, prog, "no unit runs it")
        self.systemd_verify(sdir, units)

    def check_unit(self, rel):
        sec = parse_unit(self.read(rel))
        unit, svc = sec.get("Unit", {}), sec.get("Service", {})

        def one(s, k):
            v = s.get(k)
            return v[-1] if v else None

        if not one(unit, "Description"):
            self.fail(rel, "[Unit] Description", "missing")
        for k in ("Wants", "After"):
            if "network-online.target" not in " ".join(unit.get(k, [])).split():
                self.fail(rel, f"[Unit] {k}", "must name network-online.target")
        execs = svc.get("ExecStart", [])
        if len(execs) != 1:
            self.fail(rel, "[Service] ExecStart", f"{len(execs)} lines, expected 1")
            return set()
        argv = shlex.split(execs[0].lstrip("-@+!:"))
        prog = os.path.basename(argv[0]) if argv else ""
        if prog not in self.helps:
            self.fail(rel, "[Service] ExecStart", f"'{argv[0] if argv else ''}' is not one of {', '.join(PROGRAMS)}")
            return set()
        h = self.helps[prog]
        for a in argv[1:]:
            if a.startswith("--") and not h.flag_ok(a):
                self.fail(rel, "[Service] ExecStart", f"'{a}' is not an option of {prog}")
        oneshot = one(svc, "Type") == "oneshot"
        settings = {}
        for line in svc.get("Environment", []):
            for a in shlex.split(line):
                k, _, v = a.partition("=")
                if not h.env_ok(k):
                    self.fail(rel, f"[Service] Environment {k}", f"not an environment variable of {prog}")
                settings[k] = v
        for ef in svc.get("EnvironmentFile", []):
            base = os.path.basename(ef.lstrip("-"))
            erel = f"{os.path.dirname(rel)}/{base}"
            try:
                text = self.read(erel)
            except OSError:
                self.fail(rel, f"[Service] EnvironmentFile {ef}", f"no example {erel} beside the unit")
                continue
            for n, line in enumerate(text.splitlines(), 1):
                m = re.match(r"^(#?)([A-Za-z_][A-Za-z0-9_]*)=(.*)$", line)
                if not m:
                    continue
                if not h.env_ok(m.group(2)) and (erel, n) not in self.env_lines_failed:
                    self.env_lines_failed.add((erel, n))
                    self.fail(erel, f"line {n} {m.group(2)}", f"not an environment variable of {prog}"
                              f" (used by {os.path.basename(rel)})")
                if not m.group(1):
                    settings[m.group(2)] = m.group(3).strip().strip("'\"")
        for flag, env in h.required:
            if env not in settings and not any(a.split("=", 1)[0] == flag for a in argv[1:]):
                self.fail(rel, "[Service]", f"{prog} requires {env} (or {flag}) and nothing sets it")

        if not oneshot and one(svc, "Restart") != "on-failure":
            self.fail(rel, "[Service] Restart", f"{one(svc, 'Restart')!r}, expected on-failure")
        need = {"NoNewPrivileges": ("yes",), "ProtectSystem": ("strict",),
                "ProtectHome": ("yes", "read-only", "tmpfs"), "PrivateTmp": ("yes",),
                "ProtectKernelModules": ("yes",), "ProtectKernelTunables": ("yes",),
                "ProtectControlGroups": ("yes",), "RestrictSUIDSGID": ("yes",),
                "LockPersonality": ("yes",), "SystemCallArchitectures": ("native",)}
        runtime = prog == "trainyard-executor"
        if runtime:
            # it drives runc: cgroups, namespaces and mounts, and images with
            # set-uid files; the jobs' own limits are their containers'
            for k in ("ProtectKernelTunables", "ProtectControlGroups", "RestrictSUIDSGID"):
                need.pop(k)
            if one(svc, "Delegate") != "yes":
                self.fail(rel, "[Service] Delegate", "must be yes: runc creates the attempts' cgroups")
            if "@mount" not in " ".join(svc.get("SystemCallFilter", [])).split():
                self.fail(rel, "[Service] SystemCallFilter", "must allow @mount: runc mounts")
        for k, allowed in need.items():
            if one(svc, k) not in allowed:
                self.fail(rel, f"[Service] {k}", f"{one(svc, k)!r}, expected {' or '.join(allowed)}")
        if "CapabilityBoundingSet" not in svc and not runtime:
            self.fail(rel, "[Service] CapabilityBoundingSet", "missing")
        if not one(svc, "RestrictAddressFamilies"):
            self.fail(rel, "[Service] RestrictAddressFamilies", "missing")
        if "@system-service" not in " ".join(svc.get("SystemCallFilter", [])).split():
            self.fail(rel, "[Service] SystemCallFilter", "must allow @system-service")
        if not one(svc, "User") and one(svc, "DynamicUser") != "yes":
            self.fail(rel, "[Service] User", "runs as root: set User= or DynamicUser=yes")
        writable = svc.get("ReadWritePaths", []) + [
            "/var/lib/" + d for line in svc.get("StateDirectory", []) for d in line.split()]
        writable = [p.lstrip("-") for line in writable for p in line.split()]
        if prog == "trainyard-executor":
            if one(svc, "PrivateDevices") in ("yes", "true"):
                self.fail(rel, "[Service] PrivateDevices", "must stay off: it hides the GPUs and HCAs")
            if one(svc, "MemoryDenyWriteExecute") in ("yes", "true"):
                self.fail(rel, "[Service] MemoryDenyWriteExecute", "breaks the ranks' JIT compilers")
            if one(svc, "DevicePolicy") != "closed":
                self.fail(rel, "[Service] DevicePolicy", f"{one(svc, 'DevicePolicy')!r}, expected closed")
            allow = " ".join(svc.get("DeviceAllow", []))
            for dev in ("char-nvidiactl", "char-nvidia-frontend", "char-nvidia-uvm",
                        "char-infiniband_verbs", "/dev/infiniband/rdma_cm"):
                if dev not in allow.split():
                    self.fail(rel, "[Service] DeviceAllow", f"{dev} missing")
            if one(svc, "LimitMEMLOCK") != "infinity":
                self.fail(rel, "[Service] LimitMEMLOCK", "must be infinity (RDMA registers memory)")
            if one(svc, "KillMode") != "mixed":
                self.fail(rel, "[Service] KillMode", "must be mixed: the executor stops its ranks itself")
            mounts = " ".join(unit.get("RequiresMountsFor", [])).split()
            for env, need_mount in (("TRAINYARD_EXECUTOR_STATE_DIR", False),
                                    ("TRAINYARD_EXECUTOR_CHECKPOINT_ROOT", True)):
                path = settings.get(env)
                if path is None or not any(under(path, w) for w in writable):
                    self.fail(rel, "[Service] ReadWritePaths",
                              f"{env}={path!r} is not writable (ReadWritePaths=, StateDirectory=)")
                if need_mount and (path is None or not any(under(path, m) for m in mounts)):
                    self.fail(rel, "[Unit] RequiresMountsFor", f"{env}={path!r} is not named")
        elif one(svc, "PrivateDevices") != "yes":
            self.fail(rel, "[Service] PrivateDevices", f"{one(svc, 'PrivateDevices')!r}, expected yes")
        return {prog}

    def systemd_verify(self, sdir, units):
        exe = shutil.which("systemd-analyze")
        if not exe:
            self.fail(sdir, "systemd-analyze", "not installed (Debian package systemd)")
            return
        bindir = self.bindir
        with tempfile.TemporaryDirectory() as tmp:
            for u in units:
                text = self.read(f"{sdir}/{u}").replace("/usr/local/bin/", bindir.rstrip("/") + "/")
                with open(os.path.join(tmp, u), "w", encoding="utf-8") as f:
                    f.write(text)
            texts = []
            for u in units:
                with open(os.path.join(tmp, u), encoding="utf-8") as f:
                    texts.append((u, f.read()))
            out = run_tool([exe, "verify"] + [os.path.join(tmp, u) for u in units], texts, cwd=tmp)
            lines = [line for line in (out.stdout + out.stderr).splitlines() if line.strip()]
            for line in lines:
                hit = next((u for u in units if u in line), None)
                self.fail(f"{sdir}/{hit}" if hit else sdir, "systemd-analyze verify",
                          re.sub(r"\S*/([^/\s]+\.service)", r"\1", line))
            if out.returncode != 0 and not lines:
                self.fail(sdir, "systemd-analyze verify", f"exit {out.returncode}")

    # ---- Prometheus -------------------------------------------------------

    def check_prometheus(self):
        rel = "deploy/prometheus/alerts.yml"
        promtool = shutil.which("promtool")
        if not promtool:
            self.fail(rel, "promtool", "not installed (Debian package prometheus)")
        else:
            path = os.path.join(self.root, rel)
            out = run_tool([promtool, "check", "rules", path], [self.read(rel)])
            if out.returncode != 0:
                msg = " ".join(re.sub(r"\S*" + re.escape(rel), rel, out.stdout + out.stderr).split())
                self.fail(rel, "promtool check rules", msg)
        try:
            doc = (load_yaml_all(self.read(rel)) or [None])[0] or {}
        except (OSError, yaml.YAMLError) as e:
            self.fail(rel, "file", f"cannot parse: {e}")
            return
        known, histograms = self.documented_series()
        for g in doc.get("groups") or []:
            for r in g.get("rules") or []:
                where = f"groups[{g.get('name')}] alert {r.get('alert')}"
                if not r.get("alert"):
                    self.fail(rel, where, "alert: missing (recording rules belong elsewhere)")
                if (r.get("labels") or {}).get("severity") not in SEVERITIES:
                    self.fail(rel, where, f"labels.severity: must be one of {', '.join(SEVERITIES)}")
                if not (r.get("annotations") or {}).get("summary"):
                    self.fail(rel, where, "annotations.summary: missing")
                for s in re.findall(r"\btrainyard_[a-z0-9_]+", str(r.get("expr", ""))):
                    base = re.sub(r"_(bucket|sum|count)$", "", s)
                    if s in known or (base != s and base in histograms):
                        continue
                    self.fail(rel, f"{where} expr", f"series '{s}' is not in docs/metrics.md")

    def documented_series(self):
        known, histograms = set(), set()
        for line in self.read("docs/metrics.md").splitlines():
            m = re.match(r"^\| `(trainyard_[a-z0-9_]+)` \| (\w+) \|", line)
            if m:
                known.add(m.group(1))
                if m.group(2) == "histogram":
                    histograms.add(m.group(1))
        return known, histograms

    # ---- container ----------------------------------------------------------

    def check_container(self):
        rel = "deploy/container/Dockerfile"
        try:
            text = self.read(rel)
        except OSError:
            self.fail(rel, "file", "missing")
            return
        parsed = parse_dockerfile(os.path.join(self.root, rel), text)
        for d in parsed["diagnostics"]:
            self.fail(rel, f"line {d['line']}:{d['column']}", f"dockerfile-utils: {d['message']}")
        stages = {s["name"]: s["instructions"] for s in parsed["stages"] if s["name"]}
        build_args = [a for i in stages.get("build", []) if i["keyword"] == "RUN" for a in i["args"]]
        for p in self.packages():
            if p.endswith("-dev") and p not in build_args:
                self.fail(rel, "stage build", f"does not install {p} (deploy/local/lib.sh TY_PACKAGES)")
        for stage, ins in stages.items():
            for i in ins:
                if i["keyword"] != "COPY" or i["flags"].get("from") != "build":
                    continue
                for src in i["args"][:-1]:
                    name = src.rsplit("/", 1)[-1]
                    if not os.access(os.path.join(self.bindir, name), os.X_OK):
                        self.fail(rel, f"stage {stage} line {i['line']} COPY",
                                  f"'{src}' is not a program of this build")
                    elif name not in build_args:
                        self.fail(rel, f"stage {stage} line {i['line']} COPY",
                                  f"'{name}' is not a --target of stage build")
        for stage, prog, user in (("api", "trainyard-api", True), ("scheduler", "trainyard-scheduler", True),
                                  ("executor", "trainyard-executor", False)):
            if stage not in stages:
                self.fail(rel, f"stage {stage}", "missing")
                continue
            ins = stages[stage]
            if not any(i["keyword"] == "COPY" and i["flags"].get("from") == "build"
                       and f"/build/bin/{prog}" in i["args"][:-1]
                       and i["args"][-1] in ("/usr/local/bin/", f"/usr/local/bin/{prog}") for i in ins):
                self.fail(rel, f"stage {stage}", f"does not install {prog} as /usr/local/bin/{prog}")
            entry = [i for i in ins if i["keyword"] == "ENTRYPOINT"]
            if not entry or entry[-1]["args"] != [f'["/usr/local/bin/{prog}"]']:
                self.fail(rel, f"stage {stage} ENTRYPOINT", f'must be ["/usr/local/bin/{prog}"]')
            if user:
                users = [i["args"] for i in ins if i["keyword"] == "USER"]
                if not users or not users[-1] or users[-1][0].split(":")[0] in ("0", "root"):
                    self.fail(rel, f"stage {stage} USER", "must be a non-root user")

    def packages(self):
        text = self.read("deploy/local/lib.sh")
        m = re.search(r"^TY_PACKAGES=\((.*?)\)", text, re.M | re.S)
        return m.group(1).split() if m else []


def parse_unit(text):
    """Sections of a unit file: {section: {key: [values in order]}}."""
    sec, cur, pending = {}, None, ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            cur = sec.setdefault(line[1:-1], {})
            continue
        if cur is None or "=" not in line:
            continue
        k, v = line.split("=", 1)
        cur.setdefault(k.strip(), []).append(v.strip())
    return sec


def matches(sel, labels):
    return bool(sel) and all(labels.get(k) == v for k, v in sel.items())


def pod_labels(w):
    return ((w.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}


def under(path, top):
    path, top = os.path.normpath(path), os.path.normpath(top)
    return path == top or path.startswith(top.rstrip("/") + "/")


def mount_for(mounts, path):
    best = None
    for mp, vol in mounts.items():
        if mp and under(path, mp) and (best is None or len(mp) > len(best[0])):
            best = (mp, vol)
    return best[1] if best else None


_tool_runs = {}

DOCKERFILE_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dockerfile.js")


def parse_dockerfile(path, text):
    """The Dockerfile as dockerfile-utils parses and validates it (dockerfile.js)."""
    if not shutil.which("node"):
        sys.exit("check_manifests: 'node' is missing: install Debian's nodejs (tests/run does)")
    mods = os.path.join(os.path.dirname(DOCKERFILE_JS), "node_modules", "dockerfile-utils")
    if not os.path.isdir(mods):
        sys.exit(f"check_manifests: '{mods}' is missing: run 'npm ci --prefix "
                 f"{os.path.dirname(DOCKERFILE_JS)}' (tests/run does)")
    out = run_tool(["node", DOCKERFILE_JS, path], [text])
    if out.returncode != 0:
        sys.exit(f"check_manifests: 'node dockerfile.js {path}' failed (exit {out.returncode}): "
                 f"{out.stderr.strip()}")
    return json.loads(out.stdout)


def run_tool(argv, inputs, **kw):
    """subprocess.run, remembered by argv and the inputs' contents (the self-test
    runs the tools on many copies that are mostly the same)."""
    key = (tuple(argv[:2]), tuple(inputs))
    if key not in _tool_runs:
        _tool_runs[key] = subprocess.run(argv, capture_output=True, text=True, timeout=60, **kw)
    return _tool_runs[key]


def check(root, helps, bindir):
    return Checker(root, helps, bindir).run()


# ---- self-test: one break per case, each must be reported ---------------------

def rep(old, new, count=1):
    def f(text):
        if old not in text:
            raise AssertionError(f"mutation does not apply: {old!r} not found")
        return text.replace(old, new, count)
    return f


# (case, file broken, mutation, strings a report must contain), the report
# naming the broken file unless the first string is "@FILE": then that file
CASES = [
    ("scheduler_one_replica", "deploy/k8s/scheduler.yaml", rep("replicas: 2", "replicas: 1"),
     ["Deployment trainyard-scheduler", "spec.replicas"]),
    ("api_without_image", "deploy/k8s/api.yaml", rep("          image: trainyard-api\n", ""),
     ["containers[api]", "image: missing"]),
    ("image_not_in_kustomization", "deploy/k8s/scheduler.yaml",
     rep("image: trainyard-scheduler", "image: trainyard-sched"), ["image: 'trainyard-sched'"]),
    ("unknown_env_in_configmap", "deploy/k8s/config.yaml",
     rep("TRAINYARD_SCHEDULER_METRICS_LISTEN:", "TRAINYARD_SCHEDULER_METRIC_LISTEN:"),
     ["ConfigMap trainyard-scheduler", "data.TRAINYARD_SCHEDULER_METRIC_LISTEN"]),
    ("unknown_env_in_pod", "deploy/k8s/executor.yaml",
     rep("name: TRAINYARD_EXECUTOR_ADDRESS", "name: TRAINYARD_EXECUTOR_ADDR"),
     ["containers[executor]", "env[TRAINYARD_EXECUTOR_ADDR]"]),
    ("secret_key_missing", "deploy/k8s/api.yaml", rep("key: database-url", "key: database_url"),
     ["env[TRAINYARD_DATABASE_URL].valueFrom.secretKeyRef.key", "database_url"]),
    ("configmap_ref_missing", "deploy/k8s/scheduler.yaml",
     rep("name: trainyard-scheduler\n          env:", "name: trainyard-schedular\n          env:"),
     ["envFrom.configMapRef.name", "trainyard-schedular"]),
    ("volume_configmap_missing", "deploy/k8s/migrate-job.yaml",
     rep("name: trainyard-pg-ca", "name: trainyard-pg-cert"),
     ["volumes[pg-ca].configMap.name", "trainyard-pg-cert"]),
    ("service_selects_nothing", "deploy/k8s/api.yaml",
     rep("    app.kubernetes.io/component: api\n  ports:", "    app.kubernetes.io/component: apis\n  ports:"),
     ["Service trainyard-api", "spec.selector"]),
    ("service_target_port", "deploy/k8s/api.yaml", rep("targetPort: http", "targetPort: https"),
     ["Service trainyard-api", "targetPort: 'https'"]),
    ("selector_not_template", "deploy/k8s/scheduler.yaml",
     rep("  selector:\n    matchLabels:\n      app.kubernetes.io/name: trainyard\n      app.kubernetes.io/component: scheduler",
         "  selector:\n    matchLabels:\n      app.kubernetes.io/name: trainyard\n      app.kubernetes.io/component: sched"),
     ["Deployment trainyard-scheduler", "spec.selector.matchLabels"]),
    ("readiness_not_readyz", "deploy/k8s/api.yaml", rep("path: /readyz", "path: /ready"),
     ["readinessProbe.httpGet.path", "/ready"]),
    ("executor_no_host_network", "deploy/k8s/executor.yaml",
     rep("hostNetwork: true", "hostNetwork: false"), ["DaemonSet trainyard-executor", "hostNetwork"]),
    ("executor_not_daemonset", "deploy/k8s/executor.yaml", rep("kind: DaemonSet", "kind: Deployment"),
     ["Deployment trainyard-executor", "DaemonSet"]),
    ("executor_no_gpus", "deploy/k8s/executor.yaml",
     rep("memory: 1800Gi\n              nvidia.com/gpu: 8\n", "memory: 1800Gi\n"),
     ["resources.limits.nvidia.com/gpu"]),
    ("secret_not_placeholder", "deploy/k8s/secret.yaml", rep("CHANGE_ME", "hunter2"),
     ["Secret trainyard-database", "stringData.database-url"]),
    ("service_links_on", "deploy/k8s/api.yaml",
     rep("enableServiceLinks: false", "enableServiceLinks: true"), ["Deployment trainyard-api", "enableServiceLinks"]),
    ("configmap_value_not_string", "deploy/k8s/config.yaml",
     rep('TRAINYARD_PORT: "8080"', "TRAINYARD_PORT: 8080"), ["data.TRAINYARD_PORT", "not a string"]),
    ("unknown_flag_in_command", "deploy/k8s/migrate-job.yaml",
     rep('"--migrate"]', '"--migrate", "--listen"]'), ["Job trainyard-migrate", "'--listen'"]),
    ("port_setting_not_container_port", "deploy/k8s/config.yaml",
     rep('TRAINYARD_EXECUTOR_LOG_PORT: "9180"', 'TRAINYARD_EXECUTOR_LOG_PORT: "9200"'),
     ["@deploy/k8s/executor.yaml", "containers[executor]", "TRAINYARD_EXECUTOR_LOG_PORT='9200'"]),
    ("required_option_unset", "deploy/k8s/config.yaml",
     rep("  TRAINYARD_EXECUTOR_STATE_DIR: /var/lib/trainyard/executor\n", ""),
     ["@deploy/k8s/executor.yaml", "containers[executor]", "requires TRAINYARD_EXECUTOR_STATE_DIR"]),
    ("file_not_in_kustomization", "deploy/k8s/kustomization.yaml", rep("  - executor.yaml\n", ""),
     ["@deploy/k8s/executor.yaml", "file", "not listed in kustomization.yaml"]),
    ("unit_unknown_flag", "deploy/systemd/trainyard-api.service",
     rep("ExecStart=/usr/local/bin/trainyard-api\n", "ExecStart=/usr/local/bin/trainyard-api --listen-port 8080\n"),
     ["[Service] ExecStart", "'--listen-port'"]),
    ("env_file_unknown_var", "deploy/systemd/scheduler.env",
     rep("TRAINYARD_SCHEDULER_KAFKA_BOOTSTRAP=", "TRAINYARD_KAFKA_BOOTSTRAP="),
     ["TRAINYARD_KAFKA_BOOTSTRAP", "not an environment variable of trainyard-scheduler"]),
    ("env_file_commented_example", "deploy/systemd/api.env",
     rep("#TRAINYARD_CORS_ORIGINS=", "#TRAINYARD_CORS_ORIGIN="), ["TRAINYARD_CORS_ORIGIN:", "not an environment variable of trainyard-api"]),
    ("unit_environment_var", "deploy/systemd/trainyard-scheduler.service",
     rep("TimeoutStopSec=30s\n", "TimeoutStopSec=30s\nEnvironment=TRAINYARD_CYCLE_MS=500\n"),
     ["[Service] Environment TRAINYARD_CYCLE_MS"]),
    ("executor_private_devices", "deploy/systemd/trainyard-executor.service",
     rep("PrivateDevices=no", "PrivateDevices=yes"), ["[Service] PrivateDevices"]),
    ("executor_not_delegated", "deploy/systemd/trainyard-executor.service",
     rep("Delegate=yes\n", ""), ["[Service] Delegate"]),
    ("executor_no_infiniband", "deploy/systemd/trainyard-executor.service",
     rep("DeviceAllow=char-infiniband_verbs rw\n", ""), ["[Service] DeviceAllow", "char-infiniband_verbs"]),
    ("api_may_gain_privileges", "deploy/systemd/trainyard-api.service",
     rep("NoNewPrivileges=yes\n", ""), ["[Service] NoNewPrivileges"]),
    ("checkpoints_not_writable", "deploy/systemd/executor.env",
     rep("CHECKPOINT_ROOT=/srv/trainyard/checkpoints", "CHECKPOINT_ROOT=/data/ckpt"),
     ["@deploy/systemd/trainyard-executor.service", "ReadWritePaths", "/data/ckpt"]),
    ("systemd_analyze_rejects", "deploy/systemd/trainyard-scheduler.service",
     rep("ProtectSystem=strict\n", "ProtectSystem=strict\nProtectEverything=yes\n"),
     ["trainyard-scheduler.service", "systemd-analyze verify", "ProtectEverything"]),
    ("alert_unknown_series", "deploy/prometheus/alerts.yml",
     rep("sum(trainyard_scheduler_leader) or", "sum(trainyard_scheduler_leaders) or"),
     ["alert TrainyardNoSchedulerLeader", "trainyard_scheduler_leaders"]),
    ("alert_bad_promql", "deploy/prometheus/alerts.yml",
     rep("max(trainyard_dispatch_outbox_rows) > 1000", "max(trainyard_dispatch_outbox_rows) > > 1000"),
     ["promtool check rules"]),
    ("alert_without_severity", "deploy/prometheus/alerts.yml",
     rep("          severity: info\n", ""), ["labels.severity"]),
    ("api_image_runs_as_root", "deploy/container/Dockerfile",
     rep("USER 10001:10001\nEXPOSE 8080", "EXPOSE 8080"), ["stage api USER"]),
    # the break of issue 15: a continuation line of an ENV whose first line was lost
    ("dockerfile_env_lost", "deploy/container/Dockerfile",
     rep("/usr/local/bin/\n# the driver libraries the NVIDIA container toolkit mounts: compute\n"
         "# (libcuda.so.1) and utility (nvidia-smi); which GPUs comes from the device\n"
         "# plugin or `docker run --gpus`, never from the image\n"
         "ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility\n",
         "/usr/local/bin/\n    NVIDIA_DRIVER_CAPABILITIES=compute,utility\n"),
     ["dockerfile-utils: Unknown instruction: NVIDIA_DRIVER_CAPABILITIES"]),
    ("dockerfile_env_no_value", "deploy/container/Dockerfile",
     rep("ENV NVIDIA_DRIVER_CAPABILITIES=compute,utility", "ENV NVIDIA_DRIVER_CAPABILITIES"),
     ["dockerfile-utils: ENV must have two arguments"]),
    ("dockerfile_empty_continuation", "deploy/container/Dockerfile",
     rep("      curl libuv1 libibverbs1", "\n      curl libuv1 libibverbs1"),
     ["dockerfile-utils: Empty continuation line"]),
    ("dockerfile_unknown_copy_flag", "deploy/container/Dockerfile",
     rep("COPY --from=build /build/bin/trainyard-scheduler", "COPY --form=build /build/bin/trainyard-scheduler"),
     ["dockerfile-utils: Unknown flag: form"]),
    ("dockerfile_duplicate_stage", "deploy/container/Dockerfile",
     rep("FROM runtime AS scheduler", "FROM runtime AS api"), ["dockerfile-utils: duplicate name api"]),
    ("dockerfile_copies_no_program", "deploy/container/Dockerfile",
     rep("/build/bin/trainyard-allreduce /usr", "/build/bin/trainyard-allreduc /usr"),
     ["stage executor", "COPY", "'/build/bin/trainyard-allreduc' is not a program of this build"]),
    ("dockerfile_copies_unbuilt_target", "deploy/container/Dockerfile",
     rep(" trainyard-allreduce jobctl", " jobctl"), ["stage executor", "'trainyard-allreduce' is not a --target"]),
    ("dockerfile_wrong_entrypoint", "deploy/container/Dockerfile",
     rep('ENTRYPOINT ["/usr/local/bin/trainyard-scheduler"]', 'ENTRYPOINT ["/usr/local/bin/trainyard-api"]'),
     ["stage scheduler ENTRYPOINT"]),
]

COPIED = ("deploy", "docs/metrics.md", "api/routes.c")


def self_test(root, helps, bindir):
    passed = failed = 0

    def copy_tree(dst):
        for p in COPIED:
            src = os.path.join(root, p)
            if os.path.isdir(src):
                shutil.copytree(src, os.path.join(dst, p), ignore=shutil.ignore_patterns("*.pyc"))
            else:
                os.makedirs(os.path.dirname(os.path.join(dst, p)), exist_ok=True)
                shutil.copy(src, os.path.join(dst, p))

    with tempfile.TemporaryDirectory() as tmp:
        base = os.path.join(tmp, "base")
        copy_tree(base)
        got = check(base, helps, bindir)
        if got:
            print("FAIL baseline: the unchanged copy is not clean:\n  " + "\n  ".join(got))
            return 1
        print("ok   baseline: the unchanged copy passes")
        for name, rel, mutate, want in CASES:
            d = os.path.join(tmp, name)
            copy_tree(d)
            path = os.path.join(d, rel)
            try:
                with open(path, encoding="utf-8") as f:
                    text = mutate(f.read())
            except AssertionError as e:
                print(f"FAIL {name}: {e}")
                failed += 1
                continue
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            got = check(d, helps, bindir)
            at = want[0][1:] if want[0].startswith("@") else rel
            want = [w for w in want if not w.startswith("@")]
            hit = [g for g in got if g.startswith(at + ": ") and all(w in g for w in want)]
            if hit:
                print(f"ok   {name}: {hit[0]}")
                passed += 1
            else:
                print(f"FAIL {name}: no report naming {at} and {want}; got:\n  " +
                      ("\n  ".join(got) if got else "(nothing)"))
                failed += 1
            shutil.rmtree(d)
    print(f"{passed + 1} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True, help="the repository")
    ap.add_argument("--bin", required=True, help="directory of the built programs")
    ap.add_argument("--self-test", action="store_true", help="check that breaks are reported")
    a = ap.parse_args()
    root, bindir = os.path.abspath(a.root), os.path.abspath(a.bin)
    helps = load_helps(bindir)
    if a.self_test:
        return self_test(root, helps, bindir)
    failures = check(root, helps, bindir)
    for h in helps.values():
        for n in sorted(h.notes):
            print(f"note: {n}")
    for f in failures:
        print(f"FAIL {f}")
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed"
          + (f" ({len(failures)} problems)" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
