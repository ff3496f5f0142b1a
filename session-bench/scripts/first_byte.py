#!/usr/bin/env python3
"""Runs a command and reports when its first stdout byte arrived and when it exited.

Usage: first_byte.py CMD [ARG...]
Prints `first_byte=S total=S bytes=N` (seconds since start) on stderr; stdout is discarded.
"""
import subprocess
import sys
import time

start = time.monotonic()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)
first = proc.stdout.read(1)
t_first = time.monotonic() - start
n = len(first)
while True:
    chunk = proc.stdout.read(1 << 16)
    if not chunk:
        break
    n += len(chunk)
rc = proc.wait()
total = time.monotonic() - start
print(f"first_byte={t_first:.3f}s total={total:.3f}s bytes={n} rc={rc}", file=sys.stderr)
sys.exit(rc)
