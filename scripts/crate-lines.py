#!/usr/bin/env python3
"""Non-test source lines of each workspace crate, largest first.

A crate's lines are those of its `src/` files up to the first
`#[cfg(test)]` line of each file; files that only hold tests
(`tests.rs`, `*_tests.rs`, `proptests.rs`, `testing.rs`, `adversary.rs`,
anything under a `tests/` folder) are left out. Comments and blank lines
count: this measures what a reader holds, not statements.

    python3 scripts/crate-lines.py [--json] [--max N]

`--max N` exits 1 when a crate has more than N lines.
"""

import argparse
import json
import os
import re
import sys
import tomllib

TEST_FILE = re.compile(r"(^|/)(tests?|adversary|proptests|testing)(\.rs$|/)|_tests\.rs$")


def crate_lines(src):
    total = 0
    for root, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            if TEST_FILE.search(os.path.relpath(path, src)):
                continue
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if line.strip() == "#[cfg(test)]":
                        break
                    total += 1
    return total


def members(root):
    with open(os.path.join(root, "Cargo.toml"), "rb") as f:
        workspace = tomllib.load(f)["workspace"]
    found = []
    for pattern in workspace["members"]:
        if pattern.endswith("/*"):
            base = os.path.join(root, pattern[:-2])
            found += sorted(os.path.join(pattern[:-2], d) for d in os.listdir(base)
                            if os.path.isfile(os.path.join(base, d, "Cargo.toml")))
        else:
            found.append(pattern)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--max", type=int, metavar="N", help="exit 1 past N lines in a crate")
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    args = parser.parse_args()
    rows = []
    for member in members(args.root):
        with open(os.path.join(args.root, member, "Cargo.toml"), "rb") as f:
            name = tomllib.load(f)["package"]["name"]
        src = os.path.join(args.root, member, "src")
        if os.path.isdir(src):
            rows.append((crate_lines(src), name, member))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    if args.json:
        print(json.dumps({"total": total, "crates": [{"crate": n, "path": p, "lines": l} for l, n, p in rows]}))
    else:
        for lines, name, path in rows:
            print(f"{lines:7,}  {lines / total:5.1%}  {name} ({path}/)")
        print(f"{total:7,}  total")
    if args.max is not None and rows and rows[0][0] > args.max:
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        # The reader went away (`| head`): it read what it wanted.
        sys.stderr.close()
