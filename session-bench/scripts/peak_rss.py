#!/usr/bin/env python3
"""Runs every `sessionctl` command of BENCHMARKS.md's peak-RSS table on one stored session.

Usage:
    peak_rss.py SESSIONCTL ROOT ID [NAME ...]

ROOT is a JSONL root holding session ID (zstd). Each command runs as its own process under
`/usr/bin/time`, stdout and stderr discarded; a command that writes runs on a fresh copy of ROOT
(or into a new root / SQLite file) in a temporary directory, removed afterwards. With NAMEs, only
the rows whose name starts with one of them run. Prints one Markdown row per command: wall time,
CPU time (user + system), peak RSS in MiB and whether it is within 200 MiB, then the load average
before and after the run. A command that fails stops the run with its exit code.
"""

import os
import shutil
import subprocess
import sys
import tempfile

LIMIT_MIB = 200


def rows(ctl, root, sid, tmp):
    """(name, argv, needs a fresh copy of ROOT) for every row of the table."""
    plain = os.path.join(tmp, "plain")
    zstd = os.path.join(tmp, "zstd")
    db = os.path.join(tmp, "copy.db")
    return [
        ("list", ["list"], False),
        ("list --count", ["list", "--count"], False),
        ("inspect", ["inspect", sid], False),
        ("messages", ["messages", sid], False),
        ("transcript", ["transcript", sid], False),
        ("header", ["header", sid], False),
        ("stats", ["stats", sid], False),
        ("verify", ["verify", root], False),
        ("verify --strict", ["verify", "--strict", root], False),
        ("compactions", ["compactions", sid], False),
        ("diff", ["diff", sid, "--from", "300000", "--to", "700000"], False),
        ("view -o", ["view", sid, "-o", os.path.join(tmp, "view.html")], False),
        ("repair --dry-run", ["repair", sid, "--dry-run"], True),
        ("repair", ["repair", sid], True),
        ("convert plain", ["convert", sid, plain], False),
        ("convert zstd", ["convert", sid, zstd, "--to", "zstd"], False),
        ("convert sqlite", ["convert", sid, "sqlite:" + db], False),
        ("fork", ["fork", sid, "--id", "bench-fork-f"], True),
        ("fork --at", ["fork", sid, "--at", "651359", "--id", "bench-fork-g"], True),
        ("uncompact --compaction", ["uncompact", sid, "--compaction", "315331", "--id", "bench-u1"], True),
        ("uncompact --all", ["uncompact", sid, "--all", "--id", "bench-u2"], True),
        ("seal", ["seal", sid], True),
    ]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    if len(sys.argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ctl, root, sid = sys.argv[1:4]
    only = sys.argv[4:]
    print(f"load average before: {loadavg()}")
    print("| command | wall time | CPU time | peak RSS | within 200 MiB |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="peak-rss-") as tmp:
        for name, args, fresh in rows(ctl, root, sid, tmp):
            if only and not any(name.startswith(o) for o in only):
                continue
            at = root
            if fresh:
                at = os.path.join(tmp, "root")
                shutil.rmtree(at, ignore_errors=True)
                shutil.copytree(root, at)
            stats = os.path.join(tmp, "time")
            argv = ["/usr/bin/time", "-o", stats, "-f", "%e %U %S %M", ctl, "--root", at] + args
            done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if done.returncode != 0:
                print(f"{name}: exit {done.returncode} ({' '.join(argv[5:])})", file=sys.stderr)
                return done.returncode
            with open(stats) as f:
                wall, user, system, kb = f.read().split()[-4:]
            mib = int(kb) / 1024
            ok = "yes" if mib <= LIMIT_MIB else "**no**"
            cpu = float(user) + float(system)
            shown = " ".join(args).replace(tmp, "T").replace(sid, "ID").replace(root, "ROOT")
            print(f"| `{shown}` | {float(wall):.2f} s | {cpu:.2f} s | {mib:.1f} MiB | {ok} |", flush=True)
            for p in ("plain", "zstd", "copy.db", "view.html"):
                path = os.path.join(tmp, p)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)
    print(f"load average after: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
