#!/usr/bin/env python3
"""Time `foveal run --no-repl` from process start to its `host ready` log line.

    python3 scripts/measure-ready.py [--runs 20] [--foveal target/release/foveal] [-- extra args]

Each run gets an empty memex folder, a fresh data dir and control socket
(in a temporary folder), `--provider openai` with OPENAI_BASE_URL pointing
at a closed port (no model is loaded or called before ready), and
FOVEAL_LOG=foveal=info; the host is stopped with SIGTERM once the line is
seen. Prints each run's wall time to the line and the host's own
`ready_ms`, then the median and max of both.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("--runs", type=int, default=20)
parser.add_argument("--foveal", default="target/release/foveal")
parser.add_argument("extra", nargs="*")
args = parser.parse_args()

walls, readys = [], []
for run in range(args.runs):
    with tempfile.TemporaryDirectory() as tmp:
        memex = os.path.join(tmp, "memex")
        os.mkdir(memex)
        env = dict(os.environ)
        env.update(
            FOVEAL_LOG="foveal=info",
            NO_COLOR="1",
            FOVEAL_DATA_DIR=os.path.join(tmp, "data"),
            FOVEAL_SOCKET=os.path.join(tmp, "foveal.sock"),
            OPENAI_BASE_URL="http://127.0.0.1:9/v1",
            OPENAI_MODEL="x",
        )
        cmd = [args.foveal, "run", "--no-repl", "--provider", "openai", "--memex", memex, *args.extra]
        start = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        ready = None
        for line in p.stderr:
            if "host ready" in line:
                wall = (time.perf_counter() - start) * 1000
                m = re.search(r"ready_ms=([0-9.]+)", line)
                ready = float(m.group(1)) if m else float("nan")
                break
        p.send_signal(signal.SIGTERM)
        rest = p.stderr.read()
        p.wait(timeout=10)
        if ready is None:
            sys.exit(f"run {run}: no `host ready` line; stderr:\n{rest}")
        walls.append(wall)
        readys.append(ready)
        print(f"run {run + 1:2}: {wall:6.1f} ms to the line, ready_ms {ready:6.1f}")
print(f"wall to `host ready`: median {statistics.median(walls):.1f} ms, max {max(walls):.1f} ms ({args.runs} runs)")
print(f"ready_ms (host's own): median {statistics.median(readys):.1f} ms, max {max(readys):.1f} ms")
