#!/usr/bin/env python3
"""Every request in a TRAINYARD_SDK_TRACE file is an operation docs/openapi.json documents.

    check_requests.py docs/openapi.json TRACE.jsonl

Exit 1 naming each undocumented method and path (and a query parameter the
operation does not declare). Stands in for tests/openapi/check-requests.js
until that lands.
"""

import json
import re
import sys
import urllib.parse


def main(argv):
    with open(argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    ops = []
    for template, item in doc["paths"].items():
        rx = re.compile("^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$")
        shared = item.get("parameters", [])
        for method, op in item.items():
            if method in ("get", "put", "post", "delete", "patch"):
                names = {p.get("name") for p in shared + op.get("parameters", [])
                         if isinstance(p, dict) and p.get("in") == "query"}
                names |= {doc_ref(doc, p).get("name") for p in shared + op.get("parameters", [])
                          if isinstance(p, dict) and "$ref" in p
                          and doc_ref(doc, p).get("in") == "query"}
                ops.append((method.upper(), rx, names))
    bad, n = [], 0
    with open(argv[2], encoding="utf-8") as f:
        for line in f:
            n += 1
            req = json.loads(line)
            url = urllib.parse.urlsplit(req["url"])
            query = {k for k, _ in urllib.parse.parse_qsl(url.query)}
            found = [o for o in ops if o[0] == req["method"] and o[1].match(url.path)]
            if not found:
                bad.append(f"{req['method']} {url.path}: not in the document")
            elif query - found[0][2]:
                bad.append(f"{req['method']} {url.path}: undocumented query parameter(s) "
                           + ", ".join(sorted(query - found[0][2])))
    for b in sorted(set(bad)):
        print(f"check_requests: {b}", file=sys.stderr)
    if not n:
        print("check_requests: the trace is empty", file=sys.stderr)
    print(f"check_requests: {n} requests, {len(set(bad))} undocumented")
    return 1 if bad or not n else 0


def doc_ref(doc, p):
    node = doc
    for part in p["$ref"].lstrip("#/").split("/"):
        node = node.get(part, {})
    return node


if __name__ == "__main__":
    sys.exit(main(sys.argv))
