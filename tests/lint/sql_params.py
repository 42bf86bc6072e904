#!/usr/bin/env python3
"""SQL only through parameterised statements (docs/security.md "SQL").

Scans every .c file of the repository and fails, naming file:line, for
  sink     a call that runs SQL (PQexec, PQexecParams, PQprepare, ty_pg_exec,
           the test harness's wrappers, ...) whose SQL argument is not a
           string literal (literals and UPPER_CASE macros that #define one,
           concatenated, are fine);
  format   a string literal that reads as SQL and holds a printf conversion
           (%s, %d, %lld, ...): SQL built with printf;
  buffer   a string literal that reads as SQL passed to snprintf, strcat,
           ty_buf_printf, ty_buf_puts, ty_arena_printf and the like: SQL
           assembled in a buffer.
Exceptions live in tests/lint/sql_params.allow, one per line:
  path | rule | text on the flagged line | why it is safe
An entry that no longer matches anything fails the run too, so the list
stays true. --self-test checks the checker on inline cases.
"""
import argparse
import os
import re
import sys

# function -> index of its SQL argument
SINKS = {
    "PQexec": 1, "PQexecParams": 1, "PQprepare": 2, "PQsendQuery": 1,
    "PQsendQueryParams": 1, "PQsendPrepare": 2,
    "ty_pg_exec": 2, "ty_pg_exec_script": 1,
    "api_replay": 1,
    "ty_test_sql": 0, "ty_stack_sql": 0, "TY_STACK_SQL": 0, "DB": 0,
    "fx_q": 1, "FX_Q": 1, "fx_exec": 1, "FX_EXEC": 1,
}
BUILDERS = {"snprintf", "sprintf", "vsnprintf", "strcat", "strcpy", "strncat", "ty_buf_printf",
            "ty_buf_puts", "ty_buf_append", "ty_arena_printf", "ty_test_strf", "asprintf"}
SQL_RE = re.compile(
    r"^\s*(SELECT|INSERT\s+INTO|UPDATE\s+\w+|DELETE\s+FROM|WITH\s+\w+\s+AS|CREATE\s+|ALTER\s+|"
    r"DROP\s+|TRUNCATE\b|LISTEN\b|NOTIFY\b)|\b(FROM\s+\w+\s+WHERE|WHERE\s+\w+\s*(=|<|>|IN\b)|"
    r"VALUES\s*\(|SET\s+\w+\s*=|ORDER\s+BY|GROUP\s+BY|RETURNING\s)")
FMT_RE = re.compile(r"%[-+ #0]*(\*|\d+)?(\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?[diouxXscpfeEgG]")
SKIP_DIRS = {".git", "node_modules"}


def strip_comments(src):
    """src with comments blanked (newlines kept) and string/char literals intact."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "/" and src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def literals(text):
    """(offset, decoded-ish body) of every string literal in text."""
    for m in re.finditer(r'"((?:[^"\\\n]|\\.)*)"', text):
        yield m.start(), m.group(1)


def split_args(text, start):
    """Arguments of the call whose '(' is at start: [(offset, text)], end offset."""
    depth, i, args, cur = 0, start, [], start + 1
    n = len(text)
    while i < n:
        c = text[i]
        if c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append((cur, text[cur:i]))
                return args, i
        elif c == "," and depth == 1:
            args.append((cur, text[cur:i]))
            cur = i + 1
        i += 1
    return args, n


def literal_only(arg, string_macros):
    """Whether arg is string literals and macros that #define string literals."""
    rest = re.sub(r'"((?:[^"\\\n]|\\.)*)"', " ", arg)
    for tok in rest.split():
        if tok not in string_macros:
            return False
    return bool(re.search(r'"', arg)) or bool(rest.split())


def string_macros_of(files):
    """Macros whose value is string literals, integers and other such macros only."""
    defs = {}
    for src in files.values():
        src = src.replace("\\\n", " ")
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+([A-Z_][A-Z0-9_]*)[ \t]+(.*)$", src, re.M):
            defs[m.group(1)] = m.group(2)
        # static const char name[] = "..." "..."; (a literal may hold a ';')
        for m in re.finditer(r'\bstatic\s+const\s+char\s+(\w+)\s*\[\]\s*=\s*'
                             r'((?:"(?:[^"\\\n]|\\.)*"|[^;"])*);', src):
            defs[m.group(1)] = m.group(2)
    macros, grew = set(), True
    while grew:
        grew = False
        for name, val in defs.items():
            if name in macros:
                continue
            rest = re.sub(r'"((?:[^"\\\n]|\\.)*)"', " ", strip_comments(val))
            toks = rest.split()
            if toks and any(t not in macros and not re.fullmatch(r"\d+[uUlL]*", t)
                            for t in toks):
                continue
            if '"' in val or toks:
                macros.add(name)
                grew = True
    return macros


def scan(files, headers=None):
    """Findings [(path, line, rule, line text, message)] for {path: source}."""
    macros = string_macros_of({**(headers or {}), **files})
    found = []
    for path, src in sorted(files.items()):
        text = strip_comments(src)
        lines = src.split("\n")

        def at(off):
            ln = text.count("\n", 0, off) + 1
            return ln, lines[ln - 1].strip() if ln - 1 < len(lines) else ""

        for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
            name = m.group(1)
            if name not in SINKS and name not in BUILDERS:
                continue
            # a declaration or definition names its parameters, it runs nothing
            before = text[max(0, m.start() - 40):m.start()]
            if re.search(r"(\bint|\bvoid|\bchar|\*|\bbool|PGresult\s*\*)\s*$", before) and \
                    re.match(r"[\s\S]*?\)\s*[{;]", text[m.end() - 1:m.end() + 400] or "") and \
                    re.search(r"\b(const\s+)?(char|struct|int|PGconn|size_t)\b",
                              text[m.end():m.end() + 120].split(")")[0]):
                continue
            # the definition of a function-like macro (#define DB(...) ...)
            if re.search(r"#\s*define\s+$", text[text.rfind("\n", 0, m.start()) + 1:m.start()]):
                continue
            args, _ = split_args(text, m.end() - 1)
            if name in SINKS:
                idx = SINKS[name]
                if idx >= len(args):
                    continue
                off, arg = args[idx]
                if arg.strip() in ("...", "__VA_ARGS__"):
                    continue
                if not literal_only(arg, macros):
                    ln, line = at(off + len(arg) - len(arg.lstrip()))
                    found.append((path, ln, "sink", line,
                                  f"{name}() runs SQL that is not a string literal: "
                                  f"'{' '.join(arg.split())[:80]}'"))
            else:
                for off, arg in args:
                    for loff, body in literals(arg):
                        if SQL_RE.search(body):
                            ln, line = at(off + loff)
                            found.append((path, ln, "buffer", line,
                                          f"SQL text passed to {name}(): SQL assembled in a "
                                          f"buffer"))
        for off, body in literals(text):
            if SQL_RE.search(body) and FMT_RE.search(body.replace("%%", "")):
                ln, line = at(off)
                found.append((path, ln, "format", line,
                              "SQL literal with a printf conversion: SQL built with printf"))
    # one finding per line and rule
    seen, out = set(), []
    for f in found:
        if (f[0], f[1], f[2]) not in seen:
            seen.add((f[0], f[1], f[2]))
            out.append(f)
    return out


def load_allow(path, rules=("sink", "format", "buffer")):
    entries = []
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split("|", 3)]
            if len(parts) != 4 or not all(parts) or parts[1] not in rules:
                sys.exit(f"{path}:{n}: want 'path | {'|'.join(rules)} | text | reason', "
                         f"got '{line}'")
            entries.append({"where": f"{path}:{n}", "path": parts[0], "rule": parts[1],
                            "text": parts[2], "used": False})
    return entries


def allowed(finding, entries):
    path, _, rule, line, _ = finding
    for e in entries:
        if e["rule"] == rule and e["text"] in line and \
                (path == e["path"] or (e["path"].endswith("/") and path.startswith(e["path"]))):
            e["used"] = True
            return True
    return False


def c_files(root):
    for d, subdirs, names in os.walk(root):
        subdirs[:] = sorted(s for s in subdirs
                            if s not in SKIP_DIRS and not s.startswith("build"))
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                p = os.path.join(d, name)
                yield os.path.relpath(p, root), p


SELF_TESTS = [
    # (what, source, rules expected)
    ("literal SQL", 'f(){ty_pg_exec(&r, pg, "SELECT 1 FROM t WHERE id = $1", 1, p, e);}', []),
    ("literal and macro", '#define G "5 minutes"\nf(){ty_pg_exec(&r, pg, "SELECT 1"\n'
     ' " WHERE t > now() - interval \'" G "\'", 0, 0, e);}', []),
    ("variable SQL", "f(){ty_pg_exec(&r, pg, sql, 1, p, e);}", ["sink"]),
    ("built SQL", 'f(){snprintf(q, sizeof(q), "SELECT * FROM t WHERE name = \'%s\'", n);'
     " PQexec(c, q);}", ["buffer", "format", "sink"]),
    ("strcat SQL", 'f(){strcat(q, "DELETE FROM jobs"); PQexec(c, q);}', ["buffer", "sink"]),
    ("buffer printf", 'f(){ty_buf_printf(&b, "UPDATE jobs SET x = %d", v);}',
     ["buffer", "format"]),
    ("LIKE with %%", 'f(){ty_pg_exec(&r, pg, "SELECT 1 FROM t WHERE a LIKE \'x%%\'", 0, 0, e);}',
     []),
    ("not SQL", 'f(){snprintf(b, 8, "%s selected", x);}', []),
    ("comment", 'f(){/* snprintf(q, 9, "SELECT %s", x); */ g();}', []),
    ("a declaration", "int ty_pg_exec(PGresult **res, struct ty_pg *pg, const char *sql,"
     " int n);", []),
    ("multi-line macro", '#define Q \\\n "SELECT 1 " \\\n "FROM t"\n#define K 42\n'
     'f(){ty_pg_exec(&r, pg, Q " WHERE k = " "1" K, 0, 0, e);}', []),
    ("macro definition", "#define DB(...) TY_STACK_SQL(__VA_ARGS__)", []),
    ("PQexecParams var", "f(){PQexecParams(c, text, 0, 0, 0, 0, 0, 0);}", ["sink"]),
    ("constant with ';'", 'static const char SQL_X[] = "SELECT string_agg(a, \'; \')"\n'
     ' " FROM t";\nf(){ty_pg_exec(&r, pg, SQL_X, 0, 0, e);}', []),
]


def self_test():
    bad = 0
    for what, src, want in SELF_TESTS:
        got = sorted({f[2] for f in scan({"x.c": src})})
        if got != sorted(want):
            print(f"self-test '{what}': rules {got}, want {sorted(want)}")
            bad += 1
    print(f"self-test: {len(SELF_TESTS) - bad} passed, {bad} failed")
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--allow", default=os.path.join(here, "sql_params.allow"))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if self_test():
        return 1
    files, headers = {}, {}
    for rel, p in c_files(a.root):
        with open(p, encoding="utf-8", errors="replace") as f:
            (files if rel.endswith(".c") else headers)[rel] = f.read()
    entries = load_allow(a.allow)
    findings = scan(files, headers)
    bad = [f for f in findings if not allowed(f, entries)]
    for path, ln, rule, line, msg in bad:
        print(f"{path}:{ln}: [{rule}] {msg}\n    {line}")
    stale = [e for e in entries if not e["used"]]
    for e in stale:
        print(f"{e['where']}: allowlist entry matches nothing now ({e['path']} | {e['rule']} |"
              f" {e['text']}): remove it")
    print(f"sql_params: {len(files)} files, {len(findings)} findings, "
          f"{len(findings) - len(bad)} allowed, {len(bad)} not allowed, {len(stale)} stale")
    return 1 if bad or stale else 0


if __name__ == "__main__":
    sys.exit(main())
