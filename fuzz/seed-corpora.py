#!/usr/bin/env python3
"""Builds the initial fuzz corpora from the golden corpus (../shared/corpus by default).

Usage: fuzz/seed-corpora.py [CORPUS_DIR] [OUT_DIR]   (OUT_DIR defaults to fuzz/seeds)
The committed fuzz/corpus/<target>/ directories are these seeds after fuzzing and
`cargo fuzz cmin`; rerun this only to start a corpus afresh.
"""
import hashlib, json, os, sys
from pathlib import Path

here = Path(__file__).resolve().parent
src = Path(sys.argv[1] if len(sys.argv) > 1 else here.parent.parent / "shared" / "corpus")
out = Path(sys.argv[2] if len(sys.argv) > 2 else here / "seeds")

def put(target, data, limit=None):
    if isinstance(data, str):
        data = data.encode()
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)

plain = sorted(src.rglob("session.jsonl"))
zstd = sorted(src.rglob("session.jsonl.zstd"))

seen = set()
for p in plain:
    lines = p.read_bytes().split(b"\n")
    if lines:
        put("header", lines[0])
    body = lines[1:]
    for line in body:
        if len(line) > 4096 or line in seen:
            continue
        seen.add(line)
        try:
            v = json.loads(line)
        except Exception:
            put("jsonl_line", line)
            continue
        t = v.get("type") if isinstance(v, dict) else None
        if t in ("text-chunks", "reasoning-chunks", "tool-call-chunks"):
            put("packed_rows", line)
            put("jsonl_line", line)
        elif t not in seen:
            # one line per event type keeps the line corpus small
            seen.add(t)
            put("jsonl_line", line)
        if isinstance(v, dict) and isinstance(v.get("surfaceOp"), dict):
            put("replace", json.dumps({k: v[k] for k in ("type", "data", "surfaceOp", "sourceEventSeqs") if k in v}, separators=(",", ":")))
            put("replace", json.dumps(v["surfaceOp"], separators=(",", ":")))
    # a short multi-line body
    put("jsonl_line", b"\n".join(body[:6]) + b"\n")
    # the first events as a seed (restored and snapshot mode)
    events = []
    for line in body[:12]:
        try:
            events.append(json.loads(line))
        except Exception:
            pass
    if events and all(isinstance(e, dict) and "seq" in e for e in events):
        put("seed", json.dumps(events, separators=(",", ":"), ensure_ascii=False))

for p in zstd:
    b = p.read_bytes()
    if len(b) <= 16384:
        put("zstd_frames", b)

for op in [
    {"op": "replace", "start": 1, "end": 2},
    {"op": "replace", "start": 0, "end": 0},
    {"op": "replace", "start": 6, "end": 6},
    {"op": "replace", "start": 3, "end": 1},
    {"op": "replace", "start": 1, "end": 9},
    {"op": "replace", "start": -1, "end": 2},
    {"op": "replace", "start": 1.5, "end": 2},
    "append",
    None,
    {"surfaceOp": {"op": "replace", "start": 3, "end": 4}, "type": "assistant/message",
     "data": {"id": "a", "role": "assistant", "content": [{"type": "text", "text": "s"}]},
     "sourceEventSeqs": [3, 4]},
    {"surfaceOp": {"op": "replace", "start": 6, "end": 6}, "sourceEventSeqs": [6]},
]:
    put("replace", json.dumps(op, separators=(",", ":")))
put("seed", "[]")
put("header", '{"type":"session","version":0,"id":"fz","createdAt":1,"delegationDepth":0}')
