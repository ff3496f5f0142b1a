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

# The importer targets start from small synthetic rollouts and transcripts (no third-party logs).
def jl(*records):
    return "\n".join(r if isinstance(r, str) else json.dumps(r, separators=(",", ":")) for r in records) + "\n"

def cx(ty, payload, ts="2026-01-01T00:00:00.000Z"):
    return {"timestamp": ts, "type": ty, "payload": payload}

meta = cx("session_meta", {"id": "t1", "cwd": "/w", "model_provider": "openai"})
user = lambda t: cx("response_item", {"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]})
said = lambda t: cx("response_item", {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]})
call = lambda c: cx("response_item", {"type": "function_call", "name": "sh", "arguments": "{\"cmd\":\"ls\"}", "call_id": c})
out_ = lambda c: cx("response_item", {"type": "function_call_output", "call_id": c, "output": "ok"})
started = cx("event_msg", {"type": "task_started", "turn_id": "1"})
done = cx("event_msg", {"type": "task_complete"})
for body in [
    jl(meta, started, user("hi"), said("hello"), done),
    jl(meta, started, user("list"), call("c1"), out_("c1"), said("done"), done),
    jl(meta, started, user("list"), call("c1")),
    jl(meta, started, user("a"), cx("response_item", {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]}),
       said("b"), cx("event_msg", {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 5}, "last_token_usage": {"input_tokens": 1, "output_tokens": 2}}}), done),
    jl(meta, started, user("a"), said("b"), done, cx("compacted", {"message": "sum", "replacement_history": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "u"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}]}), started, user("c"), done),
    jl(meta, started, user("a"), done, started, user("b"), done, cx("event_msg", {"type": "thread_rolled_back", "num_turns": 1})),
    jl(meta, started, user("a"), cx("event_msg", {"type": "turn_aborted", "reason": "interrupted"})),
    jl(meta, cx("event_msg", {"type": "user_message", "message": "hi"}), cx("event_msg", {"type": "agent_message", "message": "yo"})),
    jl(meta, "{not json", "[1]", user("after")),
    jl(meta, started, user("x"), cx("session_meta", {"id": "t2", "cwd": "/w"}), started, user("y"), done),
]:
    put("import_codex", body)

def cc(kind, uuid, parent, **more):
    r = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s1", "cwd": "/w",
         "version": "2.1.0", "timestamp": "2026-01-01T00:00:00.000Z"}
    r.update(more)
    return r

q = lambda u, p, t, **m: cc("user", u, p, message={"role": "user", "content": t}, **m)
a = lambda u, p, content, mid="m1", **m: cc("assistant", u, p, requestId="r" + mid,
    message={"id": mid, "model": "claude-x", "role": "assistant", "content": content,
             "usage": {"input_tokens": 3, "output_tokens": 1}}, **m)
tool = [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]
result = [{"type": "tool_result", "tool_use_id": "t1", "content": "ok", "is_error": False}]
for body in [
    jl(q("u1", None, "hi"), a("u2", "u1", [{"type": "text", "text": "hello"}])),
    jl(q("u1", None, "list"), a("u2", "u1", tool), q("u3", "u2", result), a("u4", "u3", [{"type": "text", "text": "done"}], "m2")),
    jl(q("u1", None, "list"), a("u2", "u1", tool)),
    jl(q("u1", None, "a"), a("u2", "u1", [{"type": "thinking", "thinking": "hm", "signature": "x"}, {"type": "text", "text": "b"}])),
    jl(q("u1", None, "a"), a("u2", "u1", [{"type": "text", "text": "b"}]),
       cc("system", "u3", None, subtype="compact_boundary", logicalParentUuid="u2"),
       q("u4", "u3", "summary of the conversation", isCompactSummary=True), q("u5", "u4", "next")),
    jl(q("u1", None, "a"), q("u2", "u1", [{"type": "text", "text": "[Request interrupted by user]"}])),
    jl(q("u1", None, "a"), q("s1", "u1", "side task", isSidechain=True, agentId="ag1"),
       a("s2", "s1", [{"type": "text", "text": "side done"}], "m9", isSidechain=True, agentId="ag1"),
       a("u2", "u1", [{"type": "text", "text": "main"}])),
    jl({"type": "summary", "summary": "a title", "leafUuid": "u1"}, q("u1", None, "hi"), cc("progress", "u2", "u1")),
    jl(q("u1", None, "a"), "{not json", "42", a("u2", "u1", [{"type": "text", "text": "b"}])),
    jl(q("u1", None, [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}, {"type": "text", "text": "see"}])),
]:
    put("import_claude_code", body)
