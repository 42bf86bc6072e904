#!/usr/bin/env python3
"""Job events appended only through ty_job_event() or ty_job_events().

ty_job_event() (migrations/0001_init.sql) bumps jobs.last_event_seq and
inserts the event with that seq in one statement, so every job's sequence
is gap-free and ordered whoever writes (API, scheduler, tests);
ty_job_events() (0025) does the same for many events at once. Fails,
naming file:line, for an INSERT (or MERGE) INTO job_events anywhere in a
.c, .h, .sql, .sh or .py file of the repository, except inside the body of
a CREATE FUNCTION ty_job_event or ty_job_events in a .sql file (a later
migration may redefine them). In C,
adjacent string literals are read as one, so a statement split across
literals is still seen. There are no exceptions: a writer that
ty_job_event() does not fit extends it in a new migration.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sql_params  # noqa: E402  (C comment stripping)

Q = r'(?:\\?")?'  # an identifier's quotes, escaped in a C literal
INSERT_RE = re.compile(r"\b(insert|merge)\s+into\s+(?:" + Q + r"public" + Q + r"\s*\.\s*)?" + Q +
                       r"job_events" + Q + r"(?!\w)", re.I)
DEFINE_RE = re.compile(r"\bcreate\s+(?:or\s+replace\s+)?function\s+(?:public\s*\.\s*)?"
                       r"ty_job_events?\s*\(", re.I)
EXTS = (".c", ".h", ".sql", ".sh", ".py")
SELF = os.path.abspath(__file__)


def strip_sql_comments(src):
    """src with -- comments blanked (newlines kept)."""
    return re.sub(r"--[^\n]*", lambda m: " " * len(m.group(0)), src)


def definition_spans(text):
    """[start, end) of each CREATE FUNCTION ty_job_event, through its closing $tag$."""
    spans = []
    for m in DEFINE_RE.finditer(text):
        body = re.compile(r"\bas\s+(\$\w*\$)", re.I).search(text, m.end())
        if not body:
            continue
        close = text.find(body.group(1), body.end())
        spans.append((m.start(), len(text) if close < 0 else close + len(body.group(1))))
    return spans


def scan(files):
    """Findings [(path, line, line text)] for {path: source}."""
    found = []
    for path, src in sorted(files.items()):
        spans = []
        if path.endswith((".c", ".h")):
            # comments out; "a"\n  "b" read as "a\n  b" (line numbers kept)
            text = re.sub(r'"(\s*)"', r"\1", sql_params.strip_comments(src))
        elif path.endswith(".sql"):
            text = strip_sql_comments(src)
            spans = definition_spans(text)
        else:
            text = src
        lines = src.split("\n")
        for m in INSERT_RE.finditer(text):
            if any(a <= m.start() < b for a, b in spans):
                continue
            ln = text.count("\n", 0, m.start()) + 1
            found.append((path, ln, lines[ln - 1].strip() if ln - 1 < len(lines) else ""))
    return found


DEF = ("CREATE FUNCTION ty_job_event(p_job bigint) RETURNS integer LANGUAGE sql AS $$\n"
       "\tINSERT INTO job_events (job_id, seq) VALUES (p_job, 1) RETURNING seq\n$$;\n")
SELF_TESTS = [
    # (what, path, source, findings expected)
    ("direct insert", "x.c",
     'f(){ty_pg_exec(&r, pg, "INSERT INTO job_events (job_id) VALUES ($1)", 1, p, e);}', 1),
    ("split across literals", "x.c",
     'f(){ty_pg_exec(&r, pg, "WITH e AS (INSERT INTO"\n\t" job_events (job_id)"\n'
     '\t" SELECT 1)", 0, 0, e);}', 1),
    ("in a CTE, lower case", "x.c", 'f(){q(" e as (insert into job_events select 1)");}', 1),
    ("qualified and quoted", "x.c", 'f(){q("INSERT INTO public.\\"job_events\\" VALUES (1)");}',
     1),
    ("through ty_job_event", "x.c",
     'f(){ty_pg_exec(&r, pg, "SELECT ty_job_event($1, $2, $3, $4, NULL)", 4, p, e);}', 0),
    ("in a comment", "x.c", "/* never INSERT INTO job_events directly */ f(){}", 0),
    ("another table", "x.c", 'f(){q("INSERT INTO job_events_archive VALUES (1)");}', 0),
    ("the definition", "m.sql", DEF, 0),
    ("a redefinition", "m.sql", DEF.replace("CREATE", "CREATE OR REPLACE"), 0),
    ("the batch definition", "m.sql", DEF.replace("ty_job_event(", "ty_job_events("), 0),
    ("another function", "m.sql", DEF.replace("ty_job_event(", "ty_other_event("), 1),
    ("after the definition", "m.sql", DEF + "INSERT INTO job_events VALUES (1, 2);\n", 1),
    ("SQL comment", "m.sql", "-- INSERT INTO job_events is ty_job_event's\nSELECT 1;\n", 0),
    ("a script", "x.sh", "psql -c 'INSERT INTO job_events VALUES (1, 1)'\n", 1),
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
    a = ap.parse_args()
    if self_test():
        return 1
    files = {}
    for d, subdirs, names in os.walk(a.root):
        subdirs[:] = sorted(s for s in subdirs
                            if s not in sql_params.SKIP_DIRS and not s.startswith("build"))
        for name in sorted(names):
            p = os.path.join(d, name)
            if name.endswith(EXTS) and os.path.abspath(p) != SELF:
                with open(p, encoding="utf-8", errors="replace") as f:
                    files[os.path.relpath(p, a.root)] = f.read()
    findings = scan(files)
    for path, ln, line in findings:
        print(f"{path}:{ln}: inserts into job_events: append events through ty_job_event() "
              f"or ty_job_events() (migrations/0001_init.sql, 0025_job_events_batch.sql)\n    {line}")
    print(f"job_events: {len(files)} files, {len(findings)} direct inserts, "
          f"{len(SELF_TESTS)} self-tests passed")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
