#!/usr/bin/env python3
"""Secrets and MACs compared in constant time (docs/security.md "Secrets").

Fails, naming file:line, for a strcmp, strncmp, strcasecmp, strncasecmp,
memcmp or bcmp in a .c file whose arguments name a secret (token, secret,
signature, hmac, mac, digest, hash, sha256, password, credential, key_hash):
those go through ty_secure_equal() (common/crypto.c, OpenSSL's
CRYPTO_memcmp). Exceptions live in tests/lint/secret_compare.allow, in the
format of sql_params.allow: path | compare | text on the line | why.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sql_params  # noqa: E402  (comments stripping, argument splitting, allowlist)

COMPARES = {"strcmp", "strncmp", "strcasecmp", "strncasecmp", "memcmp", "bcmp"}
SECRET_RE = re.compile(r"(token|secret|signature|\bsig\b|hmac|\bmac\b|digest|hash|sha256|"
                       r"password|passwd|credential)", re.I)


def scan(files):
    found = []
    for path, src in sorted(files.items()):
        text = sql_params.strip_comments(src)
        lines = src.split("\n")
        for m in re.finditer(r"\b([a-z]+)\s*\(", text):
            if m.group(1) not in COMPARES:
                continue
            args, _ = sql_params.split_args(text, m.end() - 1)
            # names only: what a string literal says is not a secret
            names = " ".join(re.sub(r'"((?:[^"\\\n]|\\.)*)"', " ", a) for _, a in args[:2])
            if SECRET_RE.search(names):
                ln = text.count("\n", 0, m.start()) + 1
                found.append((path, ln, "compare", lines[ln - 1].strip(),
                              f"{m.group(1)}() on a secret: use ty_secure_equal()"))
    return found


SELF_TESTS = [
    ("token strcmp", "f(){if (strcmp(token, want)) g();}", 1),
    ("hash memcmp", "f(){return memcmp(a->sha256, b, 32) == 0;}", 1),
    ("signature", 'f(){if (!strcmp(sig, expected_signature)) g();}', 1),
    ("not a secret", 'f(){if (!strcmp(name, "admin")) g();}', 0),
    ("literal mentions token", 'f(){if (!strcmp(kind, "token")) g();}', 0),
    ("secure equal", "f(){if (ty_secure_equal(token, want)) g();}", 0),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    ap.add_argument("--allow", default=os.path.join(here, "secret_compare.allow"))
    a = ap.parse_args()
    bad = 0
    for what, src, n in SELF_TESTS:
        if len(scan({"x.c": src})) != n:
            print(f"self-test '{what}': {len(scan({'x.c': src}))} findings, want {n}")
            bad += 1
    if bad:
        return 1
    files = {}
    for rel, p in sql_params.c_files(a.root):
        if rel.endswith(".c"):
            with open(p, encoding="utf-8", errors="replace") as f:
                files[rel] = f.read()
    entries = [dict(e) for e in sql_params.load_allow(a.allow, ("compare",))]
    findings = scan(files)
    left = [f for f in findings if not sql_params.allowed(f, entries)]
    for path, ln, _, line, msg in left:
        print(f"{path}:{ln}: {msg}\n    {line}")
    stale = [e for e in entries if not e["used"]]
    for e in stale:
        print(f"{e['where']}: allowlist entry matches nothing now: remove it")
    print(f"secret_compare: {len(files)} files, {len(findings)} findings, "
          f"{len(findings) - len(left)} allowed, {len(left)} not allowed, {len(stale)} stale")
    return 1 if left or stale else 0


if __name__ == "__main__":
    sys.exit(main())
