#!/usr/bin/env python3
"""Dates a benchmark memex for the agenda's benchmark.

Usage: scripts/bench-dates.py IN.org OUT.org [FRACTION]

The shared generator writes no planning lines. This gives a FRACTION
(default 1) of the headlines with a TODO keyword a planning line (SCHEDULED, DEADLINE or both, some
with a repeater or a warning period) and every seventh such share of
the headlines without one an active timestamp in its body, dates spread over 2024-01-01 ..
2024-03-31, deterministically. Everything else is left as it is.
"""

import random
import re
import sys

TODO = re.compile(r"^\*+ (TODO|NEXT|WAITING|DONE|CANCELLED) ")
TAGS = re.compile(r"\s+:[\w@#%:]+:\s*$")


def stamp(rng):
    day = rng.randrange(91)
    month, d = (1, day + 1) if day < 31 else (2, day - 30) if day < 60 else (3, day - 59)
    extra = rng.choice(["", "", "", " +1w", " .+3d", " ++1m", " -5d", " 10:00", " 14:00-15:30"])
    return f"<2024-{month:02d}-{d:02d}{extra}>"


def main():
    src, dst = sys.argv[1], sys.argv[2]
    fraction = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    rng = random.Random(7)
    out = []
    n = 0
    with open(src, encoding="utf-8") as f:
        for line in f:
            out.append(line)
            if not line.startswith("*"):
                continue
            n += 1
            if rng.random() >= fraction:
                continue
            if TODO.match(line):
                kind = rng.choice(["SCHEDULED", "DEADLINE", "both"])
                if kind == "both":
                    out.append(f"SCHEDULED: {stamp(rng)} DEADLINE: {stamp(rng)}\n")
                else:
                    out.append(f"{kind}: {stamp(rng)}\n")
            elif n % 7 == 0:
                # A body line before the drawer would make the drawer body
                # text: put the timestamp in the title (before its tags).
                head = line.rstrip("\n")
                m = TAGS.search(head)
                cut = m.start() if m else len(head)
                out[-1] = f"{head[:cut]} {stamp(rng)}{head[cut:]}\n"
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(out)


if __name__ == "__main__":
    main()
