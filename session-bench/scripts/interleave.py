#!/usr/bin/env python3
"""Runs commands in interleaved rounds and reports each one's wall time as a ratio to the first.

Usage:
    interleave.py ROUNDS NAME=COMMAND [NAME=COMMAND ...]

Each round runs every command once, in the order given, as its own process (stdout discarded,
a failing command stops the run). The wall time of a command is taken from a `seconds=` or
`total=` field of its stdout when it prints one (the `floor` and `restore` bins do), else the
process's wall time. A NAME ending in `@wall` always takes the process's wall time (start,
reading the file and exit included), so that a probe that times only its own work can also be
compared whole, as a command that prints no time is. Peak RSS comes from `/usr/bin/time -f %M`
when that exists. Prints every round, then one line per command: median, min, max, median peak
RSS and median / first command's median.
"""

import os
import re
import shlex
import statistics
import subprocess
import sys
import time

TIME = "/usr/bin/time"


def run(command, wall_only=False):
    argv = shlex.split(command)
    rss = None
    if os.path.exists(TIME):
        argv = [TIME, "-f", "@rss=%M"] + argv
    start = time.monotonic()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"interleave: `{command}` exited with {proc.returncode}")
    m = re.search(r"@rss=(\d+)", proc.stderr)
    if m:
        rss = int(m.group(1)) / 1024.0
    m = None if wall_only else re.search(r"\b(?:seconds|total)=([0-9.]+)", proc.stdout)
    seconds = float(m.group(1)) if m else wall
    return seconds, rss


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    rounds = int(sys.argv[1])
    commands = []
    for spec in sys.argv[2:]:
        name, _, command = spec.partition("=")
        if not command:
            raise SystemExit(f"interleave: expected NAME=COMMAND, got {spec!r}")
        commands.append((name, command))
    results = {name: [] for name, _ in commands}
    for r in range(rounds):
        row = []
        for name, command in commands:
            seconds, rss = run(command, wall_only=name.endswith("@wall"))
            results[name].append((seconds, rss))
            row.append(f"{name}={seconds:.3f}s")
        print(f"round {r + 1}: " + " ".join(row), flush=True)
    base = statistics.median(s for s, _ in results[commands[0][0]])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"load average at the end: {load:.2f}")
    for name, _ in commands:
        times = [s for s, _ in results[name]]
        rss = [m for _, m in results[name] if m is not None]
        med = statistics.median(times)
        peak = f"{statistics.median(rss):.0f} MiB" if rss else "n/a"
        print(
            f"{name}: median {med:.3f} s (min {min(times):.3f}, max {max(times):.3f}), "
            f"peak RSS {peak}, {med / base:.2f}x {commands[0][0]}"
        )


if __name__ == "__main__":
    main()
