#!/usr/bin/env python3
"""Time the skill author's commands as a whole process.

    python3 scripts/measure-skill-kit.py check [--runs 30] [--foveal target/release/foveal] [--skill awareness]
    python3 scripts/measure-skill-kit.py new-build [--foveal target/release/foveal]

`check`: `foveal skill check <first-party library>` run --runs times (after
one warm-up run), each in a fresh folder with its own data dir and an empty
drop-in folder, so the installed skills are the first-party ones beside the
binary. Prints each run's wall time, then the median, min and max, and the
check's own `init` time from its JSON report.

`new-build`: `foveal skill new` and then the first `cargo build --release`
of the generated crate, in a fresh folder with a fresh CARGO_TARGET_DIR
(nothing of the crate or its dependencies built before; the cargo registry
cache is what it is — warm on a machine that has built foveal). Prints the
two times and their sum.

Prints the load average at the start: on a shared machine, other builds
inflate wall times.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def clean_env(work):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("FOVEAL_", "CONTEXT_"))}
    env["FOVEAL_DATA_DIR"] = os.path.join(work, "data")
    env["XDG_CONFIG_HOME"] = os.path.join(work, "xdg")
    return env


def check(args):
    foveal = os.path.abspath(args.foveal)
    lib = os.path.join(os.path.dirname(foveal),
                       f"libfoveal_skill_{args.skill.replace('-', '_')}.so")
    times = []
    report = None
    for run in range(args.runs + 1):
        with tempfile.TemporaryDirectory() as work:
            env = clean_env(work)
            os.makedirs(os.path.join(work, "plugins"))
            start = time.perf_counter()
            out = subprocess.run([foveal, "skill", "check", lib, "--json"],
                                 cwd=work, env=env, capture_output=True, text=True)
            elapsed = (time.perf_counter() - start) * 1e3
            if out.returncode != 0:
                sys.exit(f"skill check failed:\n{out.stdout}{out.stderr}")
            report = json.loads(out.stdout)
            if run > 0:
                times.append(elapsed)
                print(f"run {run}: {elapsed:.1f} ms")
    init = next(s for s in report["checks"] if s["name"] == "init")["detail"]
    calls = ", ".join(f"{s['name']} {s.get('ms', 0):.2f} ms" for s in report["calls"])
    print(f"skill check {os.path.basename(lib)}: median {statistics.median(times):.1f} ms, "
          f"min {min(times):.1f} ms, max {max(times):.1f} ms over {len(times)} runs")
    print(f"  last report: {init}; hook calls: {calls}")


def new_build(args):
    foveal = os.path.abspath(args.foveal)
    with tempfile.TemporaryDirectory() as work:
        env = clean_env(work)
        env["CARGO_TARGET_DIR"] = os.path.join(work, "target")
        start = time.perf_counter()
        subprocess.run([foveal, "skill", "new", "timing"], cwd=work, env=env,
                       check=True, capture_output=True)
        made = time.perf_counter()
        subprocess.run(["cargo", "build", "--release"], cwd=os.path.join(work, "timing"),
                       env=env, check=True, capture_output=True)
        built = time.perf_counter()
    print(f"skill new: {(made - start):.2f} s; first cargo build --release: "
          f"{(built - made):.1f} s; together {(built - start):.1f} s")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["check", "new-build"])
    parser.add_argument("--foveal", default="target/release/foveal")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--skill", default="awareness")
    args = parser.parse_args()
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    print(f"cores: {os.cpu_count()}")
    {"check": check, "new-build": new_build}[args.what](args)


if __name__ == "__main__":
    main()
