#!/usr/bin/env python3
"""PostgreSQL only through the store files; job and attempt states in one file.

docs/architecture.md "Where the SQL lives". Fails, naming file:line, for
  sql        in the scheduler's .c files outside scheduler/store/, or in the
             API's .c files other than api/store_*.c: a call of ty_pg_exec,
             ty_pg_val or a libpq result function (PQntuples, PQgetvalue,
             PQclear, ...), or the word PGresult: the SQL and its results
             belong to the typed calls of the store files;
  lifecycle  anywhere in scheduler/ or api/: a statement (C string literals,
             adjacent ones read as one) that sets jobs.state or
             attempts.state outside scheduler/store/lifecycle.c, the one
             home of the job and attempt state machine, and the API's one
             transition (a pending job cancelled or stopped at once) in
             api/store_jobs.c.
Exceptions live in tests/lint/store_layers.allow, one per line:
  path | rule | text on the flagged line | why
An entry that no longer matches anything fails the run too.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sql_params  # noqa: E402  (comment stripping, allow-list format)

SQL_CALL_RE = re.compile(r"\b(ty_pg_exec|ty_pg_val|PQntuples|PQnfields|PQgetvalue|PQgetisnull|"
                         r"PQgetlength|PQclear|PQresultStatus|PQcmdTuples|PQfname|PQfnumber)"
                         r"\s*\(|\bPGresult\b")
# UPDATE jobs|attempts [alias] SET <list without FROM/WHERE> state =
STATE_RE = re.compile(r"\bupdate\s+(jobs|attempts)\b(?:\s+(?:as\s+)?(?!set\b)\w+)?\s+set\b"
                      r"(?:(?!\bwhere\b|\bfrom\b|\breturning\b|;).)*?(?<![\w.])state\s*=",
                      re.I | re.S)
LIFECYCLE_HOMES = ("scheduler/store/lifecycle.c", "api/store_jobs.c")


def sql_layer(path):
    """Whether path is a .c file that must not run SQL itself."""
    if not path.endswith(".c"):
        return False
    if path.startswith("scheduler/"):
        return not path.startswith(("scheduler/store/", "scheduler/core/"))
    if path.startswith("api/"):
        return not os.path.basename(path).startswith("store_")
    return False


TOKEN_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def statements(text):
    """Each run of adjacent C string literals ("a" "b" read as "ab"), as (text, offsets):
    offsets[i] is where the run's character i stands in text."""
    runs, end = [], None
    for m in TOKEN_RE.finditer(text):
        if m.group(0)[0] == "'":
            continue
        if not runs or text[end:m.start()].strip() != "":
            runs.append(([], []))
        chars, offs = runs[-1]
        chars.append(m.group(0)[1:-1])
        offs.extend(range(m.start() + 1, m.end() - 1))
        end = m.end()
    return [("".join(c), o) for c, o in runs]


def scan(files):
    """Findings [(path, line, rule, line text)] for {path: source}."""
    found = []
    for path, src in sorted(files.items()):
        if not path.endswith((".c", ".h")) or not path.startswith(("scheduler/", "api/")):
            continue
        text = sql_params.strip_comments(src)
        lines = src.split("\n")

        def add(off, rule):
            ln = text.count("\n", 0, off) + 1
            found.append((path, ln, rule, lines[ln - 1].strip() if ln - 1 < len(lines) else ""))

        if sql_layer(path):
            for m in SQL_CALL_RE.finditer(text):
                add(m.start(), "sql")
        if path not in LIFECYCLE_HOMES:
            for stmt, offs in statements(text):
                for m in STATE_RE.finditer(stmt):
                    add(offs[m.start()], "lifecycle")
    return found


SELF_TESTS = [
    # (what, path, source, findings expected)
    ("exec in a scheduler file", "scheduler/apply.c", "f(){ty_pg_exec(&r, pg, SQL, 0, 0, e);}", 1),
    ("exec in the store", "scheduler/store/nodes.c", "f(){ty_pg_exec(&r, pg, SQL, 0, 0, e);}", 0),
    ("result in a handler", "api/teams.c", "f(){PGresult *r; PQclear(r);}", 2),
    ("result in an API store file", "api/store_teams.c", "f(){PGresult *r; PQclear(r);}", 0),
    ("in a comment", "api/teams.c", "/* no PGresult here, nor ty_pg_exec() */ f(){}", 0),
    ("the executor is not checked", "executor/daemon.c", "f(){ty_pg_exec(0);}", 0),
    ("state set outside", "scheduler/store/nodes.c",
     'static const char q[] = "UPDATE jobs SET state = \'running\' WHERE id = $1";', 1),
    ("split, aliased, later in the list", "scheduler/store/x.c",
     'static const char q[] = "UPDATE attempts t SET ended_at = now(),"\n'
     '    " failure_class = $3, state = \'failed\' WHERE t.job_id = $1";', 1),
    ("in a CTE, lower case", "api/x.c", 'q(" j as (update jobs set state = $2 where id = $1)");', 1),
    ("state only in WHERE", "scheduler/store/x.c",
     'q("UPDATE jobs SET cancel_requested = true WHERE id = $1 AND state = \'pending\'");', 0),
    ("state only in FROM's CASE", "scheduler/store/x.c",
     'q("UPDATE attempts SET ended_at = now() FROM x WHERE x.state = \'a\'");', 0),
    ("another column", "scheduler/store/x.c", 'q("UPDATE jobs SET last_state = 1 WHERE id = 1");',
     0),
    ("a node's state", "scheduler/store/x.c", 'q("UPDATE nodes SET state = \'lost\'");', 0),
    ("the lifecycle file", "scheduler/store/lifecycle.c",
     'q("UPDATE jobs SET state = \'running\' WHERE id = $1");', 0),
]


def self_test():
    bad = 0
    for what, path, src, want in SELF_TESTS:
        got = len(scan({path: src}))
        if got != want:
            print(f"self-test '{what}': {got} findings, want {want}")
            bad += 1
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--allow", default=os.path.join(here, "store_layers.allow"))
    a = ap.parse_args()
    if self_test():
        return 1
    files = {}
    for top in ("scheduler", "api"):
        for d, subdirs, names in os.walk(os.path.join(a.root, top)):
            subdirs.sort()
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    p = os.path.join(d, name)
                    with open(p, encoding="utf-8", errors="replace") as f:
                        files[os.path.relpath(p, a.root)] = f.read()
    entries = sql_params.load_allow(a.allow, rules=("sql", "lifecycle")) \
        if os.path.exists(a.allow) else []
    bad = 0
    for path, ln, rule, line in scan(files):
        if sql_params.allowed((path, ln, rule, line, None), entries):
            continue
        bad += 1
        why = ("runs SQL outside the store files: move the statement into a typed call of "
               "scheduler/store/ or api/store_*.c" if rule == "sql" else
               "sets a job's or attempt's state outside scheduler/store/lifecycle.c")
        print(f"{path}:{ln}: {rule}: {why}\n    {line}")
    for e in entries:
        if not e["used"]:
            bad += 1
            print(f"{e['where']}: entry matches nothing any more, delete it: {e['text']}")
    print(f"store_layers: {len(files)} files, {bad} problems, {len(SELF_TESTS)} self-tests passed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
