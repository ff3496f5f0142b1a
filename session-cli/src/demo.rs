//! `demo`: a scripted, deterministic agent session written by a real child process that dies
//! inside a tool call, then repaired, shown as surface and transcript, and forked.
//!
//! The writing half runs as `sessionctl __demo-writer <id>`: it appends through the store with
//! write-behind, flushes at the checkpoints an agent loop uses (before a model request, before
//! a step, before a tool body), and kills itself once the first tool call is durable while a
//! second requested call has not started.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use session_core::json::Value;
use session_core::{Event, FixedClock, SharedClock};
use session_fork::fork_events;
use session_persist::Compression;
use session_persist::checkpoint::{checkpoint_request, checkpoint_step, checkpoint_tool};
use session_persist::jsonl::layout::log_path;
use session_store::{PrepareOptions, SharedSession};
use session_surface::{Draft, Transcript, TranscriptEntry, derive_event_message, fold_surface};

use crate::args::Invocation;
use crate::error::{Error, Result};
use crate::json::num;
use crate::output::{Out, Style, pad, truncate};
use crate::render::{event_detail, message_heading, message_summary};
use crate::report;
use crate::store::{Store, StoreAt, Target, detect_root_compression};

/// The demo session's id.
pub(crate) const DEMO_ID: &str = "demo";
/// The fork child's id.
pub(crate) const FORK_ID: &str = "demo-fork";

/// The session the demo leaves as the crash left it (torn, unrepaired), for `repair`.
pub(crate) const CRASHED_ID: &str = "demo-crashed";
/// The demo's (synthetic) working directory.
const DEMO_CWD: &str = "/demo/project";
/// 2026-01-01T00:00:00Z: the scripted clock's start.
const T0: i64 = 1_767_225_600_000;

fn v(text: &str) -> Value {
    // The script's JSON literals are fixed and valid.
    Value::parse(text).unwrap_or_default()
}

fn text_message(id: &str, role: &str, text: &str, source: &str) -> Value {
    let mut t = String::new();
    session_core::json::write_str(text, &mut t);
    v(&format!(
        r#"{{"id":"{id}","role":"{role}","content":[{{"type":"text","text":{t}}}],"source":{source}}}"#
    ))
}

fn str_json(s: &str) -> String {
    let mut t = String::new();
    session_core::json::write_str(s, &mut t);
    t
}

const TOOLS: &str = r#"[{"name":"bash","description":"Run a shell command in the workspace.","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},{"name":"read","description":"Read a UTF-8 text file from the workspace.","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]"#;

fn model_source(model: &str) -> String {
    format!(r#"{{"kind":"model","provider":"demo","model":"{model}"}}"#)
}

/// The writer's appending helper: one scripted clock tick per event.
struct Script {
    session: SharedSession,
    clock: Arc<FixedClock>,
}

impl Script {
    fn push(&self, draft: Draft) -> Result<Event> {
        self.clock.advance(40);
        self.session
            .append(draft)
            .map_err(|e| Error::failed(format!("the demo script was refused: {e}"), None))
    }

    fn log(&self, ty: &str, data: &str) -> Result<Event> {
        self.push(Draft::new(ty, v(data)))
    }

    fn surface(&self, ty: &str, data: Value, sources: &[u64]) -> Result<Event> {
        let mut d = Draft::new(ty, data).append_op();
        if !sources.is_empty() {
            d = d.sources(sources);
        }
        self.push(d)
    }

    /// Streams a text block as chunks, returns the seqs.
    fn stream_text(&self, turn: u32, step: u32, index: u32, parts: &[&str]) -> Result<Vec<u64>> {
        let mut seqs = Vec::new();
        let pre = format!(r#""turn":{turn},"step":{step}"#);
        seqs.push(
            self.log(
                "assistant/chunk",
                &format!(r#"{{{pre},"chunk":{{"type":"block-start","index":{index},"blockType":"text"}}}}"#),
            )?
            .seq(),
        );
        for p in parts {
            seqs.push(
                self.log(
                    "assistant/chunk",
                    &format!(
                        r#"{{{pre},"chunk":{{"type":"text-delta","index":{index},"text":{}}}}}"#,
                        str_json(p)
                    ),
                )?
                .seq(),
            );
        }
        let whole: String = parts.concat();
        seqs.push(
            self.log(
                "assistant/chunk",
                &format!(
                    r#"{{{pre},"chunk":{{"type":"block-end","index":{index},"block":{{"type":"text","text":{}}}}}}}"#,
                    str_json(&whole)
                ),
            )?
            .seq(),
        );
        Ok(seqs)
    }

    /// Streams a tool-call block as chunks.
    fn stream_call(
        &self,
        turn: u32,
        step: u32,
        index: u32,
        id: &str,
        name: &str,
        args: &[&str],
    ) -> Result<Vec<u64>> {
        let pre = format!(r#""turn":{turn},"step":{step}"#);
        let mut seqs = vec![
            self.log(
                "assistant/chunk",
                &format!(r#"{{{pre},"chunk":{{"type":"block-start","index":{index},"blockType":"tool-call"}}}}"#),
            )?
            .seq(),
        ];
        for a in args {
            seqs.push(
                self.log(
                    "assistant/chunk",
                    &format!(
                        r#"{{{pre},"chunk":{{"type":"tool-call-delta","index":{index},"id":"{id}","name":"{name}","argumentsDelta":{}}}}}"#,
                        str_json(a)
                    ),
                )?
                .seq(),
            );
        }
        let whole: String = args.concat();
        seqs.push(
            self.log(
                "assistant/chunk",
                &format!(
                    r#"{{{pre},"chunk":{{"type":"block-end","index":{index},"block":{{"type":"tool-call","id":"{id}","name":"{name}","arguments":{}}}}}}}"#,
                    str_json(&whole)
                ),
            )?
            .seq(),
        );
        Ok(seqs)
    }

    fn finish(&self, turn: u32, step: u32, kind: &str) -> Result<u64> {
        Ok(self
            .log(
                "assistant/chunk",
                &format!(r#"{{"turn":{turn},"step":{step},"chunk":{{"type":"finish","reason":{{"kind":"{kind}"}}}}}}"#),
            )?
            .seq())
    }

    fn assistant(
        &self,
        turn: u32,
        step: u32,
        id: &str,
        model: &str,
        blocks: &str,
        sources: &[u64],
    ) -> Result<Event> {
        let data = v(&format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"{id}","role":"assistant","content":[{blocks}],"source":{}}},"usage":{{"inputTokens":{},"outputTokens":{}}}}}"#,
            model_source(model),
            400 + 37 * turn + step,
            20 + 7 * step
        ));
        self.surface("assistant/message", data, sources)
    }

    fn tool_result(
        &self,
        turn: u32,
        step: u32,
        id: &str,
        call: &str,
        text: &str,
        call_seq: u64,
    ) -> Result<Event> {
        let data = v(&format!(
            r#"{{"turn":{turn},"step":{step},"message":{{"id":"{id}","role":"user","source":{{"kind":"tool","callId":"{call}"}},"content":[{{"type":"tool-result","toolCallId":"{call}","content":[{{"type":"text","text":{}}}],"isError":false}}]}}}}"#,
            str_json(text)
        ));
        self.surface("tool/result", data, &[call_seq])
    }
}

fn tool_call_block(id: &str, name: &str, args: &str) -> String {
    format!(
        r#"{{"type":"tool-call","id":"{id}","name":"{name}","arguments":{}}}"#,
        str_json(args)
    )
}

fn text_block(text: &str) -> String {
    format!(r#"{{"type":"text","text":{}}}"#, str_json(text))
}

/// Prints one narration line of the writer and flushes it (the parent relays it live).
fn say(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{text}");
    let _ = o.flush();
}

/// `__demo-writer`: writes the scripted session and dies inside a tool call.
pub(crate) fn writer(inv: &Invocation) -> Result<()> {
    let root = inv.global.root();
    let compression = inv.global.compression.unwrap_or_default();
    let id = inv.operand(0).to_owned();
    let clock = Arc::new(FixedClock::new(T0));
    let shared: SharedClock = clock.clone();
    let store = Store::open_with(&StoreAt::Jsonl { root, compression }, shared)?;
    let meta = v(&format!(r#"{{"cwd":{}}}"#, str_json(DEMO_CWD)));
    let (session, _detach) = store
        .sessions
        .create(
            Some(&id),
            PrepareOptions {
                meta: Some(meta),
                ..PrepareOptions::default()
            },
        )
        .map_err(|e| Error::failed(format!("cannot create the demo session: {e}"), None))?;
    let s = Script {
        session: session.clone(),
        clock,
    };
    let flush = |what: &str| -> Result<()> {
        store
            .block_on(checkpoint_step(&store.sessions, &session))
            .map_err(|e| Error::failed(format!("checkpoint failed: {e}"), None))?;
        say(&format!(
            "checkpoint ({what}): durable through seq {}",
            session.seq().saturating_sub(1)
        ));
        Ok(())
    };
    let user = r#"{"kind":"user"}"#;

    // ---- turn 1: list the files ----
    s.log("turn/start", r#"{"turn":1}"#)?;
    s.log("step/start", r#"{"turn":1,"step":1}"#)?;
    let u1 = s.surface(
        "user/message",
        text_message("demo-u1", "user", "Which files are in this project?", user),
        &[],
    )?;
    say("turn 1 · user: Which files are in this project?");
    s.log(
        "request/header",
        &format!(
            r#"{{"header":{{"config":{{"provider":"demo","model":"scripted-small"}},"system":"You are a scripted demo agent.","tools":{TOOLS}}},"reason":"initial"}}"#
        ),
    )?;
    s.log(
        "request/context",
        r#"{"provider":"demo","model":"scripted-small","contextWindow":32000}"#,
    )?;
    store
        .block_on(checkpoint_request(&store.sessions, Some(&id)))
        .map_err(|e| Error::failed(format!("checkpoint failed: {e}"), None))?;
    say(&format!(
        "checkpoint (before the model request): durable through seq {}",
        session.seq().saturating_sub(1)
    ));
    let mut chunks = s.stream_text(1, 1, 0, &["I'll", " list", " the", " files."])?;
    chunks.extend(s.stream_call(1, 1, 1, "call_ls", "bash", &["{\"command\"", ":\"ls\"}"])?);
    chunks.push(s.finish(1, 1, "tool-calls")?);
    say(&format!("turn 1 · model streamed {} chunks", chunks.len()));
    let a1 = s.assistant(
        1,
        1,
        "demo-a1",
        "scripted-small",
        &format!(
            "{},{}",
            text_block("I'll list the files."),
            tool_call_block("call_ls", "bash", "{\"command\":\"ls\"}")
        ),
        &chunks,
    )?;
    let call = s.log(
        "tool/call",
        r#"{"turn":1,"step":1,"callId":"call_ls","name":"bash","arguments":"{\"command\":\"ls\"}"}"#,
    )?;
    store
        .block_on(checkpoint_tool(&store.sessions, &session, false, None))
        .map_err(|e| Error::failed(format!("checkpoint failed: {e}"), None))?;
    say("turn 1 · tool bash(ls) → Cargo.toml README.md src/");
    let r1 = s.tool_result(
        1,
        1,
        "demo-r1",
        "call_ls",
        "Cargo.toml\nREADME.md\nsrc/\n",
        call.seq(),
    )?;
    s.log("step/end", r#"{"turn":1,"step":1}"#)?;
    flush("before step 2")?;
    s.log("step/start", r#"{"turn":1,"step":2}"#)?;
    let mut chunks = s.stream_text(
        1,
        2,
        0,
        &[
            "Three",
            " entries:",
            " Cargo.toml,",
            " README.md",
            " and",
            " src/.",
        ],
    )?;
    chunks.push(s.finish(1, 2, "stop")?);
    let a2 = s.assistant(
        1,
        2,
        "demo-a2",
        "scripted-small",
        &text_block("Three entries: Cargo.toml, README.md and src/."),
        &chunks,
    )?;
    say("turn 1 · model: Three entries: Cargo.toml, README.md and src/.");
    s.log("step/end", r#"{"turn":1,"step":2}"#)?;
    s.log("turn/end", r#"{"turn":1,"reason":{"kind":"completed"}}"#)?;
    flush("turn 1 ended")?;

    // ---- turn 2: switch model, read a file ----
    s.log("turn/start", r#"{"turn":2}"#)?;
    s.log("step/start", r#"{"turn":2,"step":1}"#)?;
    s.surface(
        "user/message",
        text_message(
            "demo-u2",
            "user",
            "Use the larger model and summarise README.md.",
            user,
        ),
        &[],
    )?;
    say("turn 2 · user: Use the larger model and summarise README.md.");
    let h2 = s.log(
        "request/header",
        &format!(
            r#"{{"header":{{"config":{{"provider":"demo","model":"scripted-large","temperature":0.2}},"system":"You are a scripted demo agent.","tools":{TOOLS}}},"reason":"change"}}"#
        ),
    )?;
    s.log(
        "request/context",
        r#"{"provider":"demo","model":"scripted-large","contextWindow":128000}"#,
    )?;
    say(&format!(
        "turn 2 · request header changed at seq {}: model scripted-small → scripted-large",
        h2.seq()
    ));
    flush("before the model request")?;
    let mut chunks = s.stream_call(
        2,
        1,
        0,
        "call_read",
        "read",
        &["{\"path\"", ":\"README.md\"}"],
    )?;
    chunks.push(s.finish(2, 1, "tool-calls")?);
    s.assistant(
        2,
        1,
        "demo-a3",
        "scripted-large",
        &tool_call_block("call_read", "read", "{\"path\":\"README.md\"}"),
        &chunks,
    )?;
    let call = s.log(
        "tool/call",
        r#"{"turn":2,"step":1,"callId":"call_read","name":"read","arguments":"{\"path\":\"README.md\"}"}"#,
    )?;
    store
        .block_on(checkpoint_tool(&store.sessions, &session, false, None))
        .map_err(|e| Error::failed(format!("checkpoint failed: {e}"), None))?;
    s.tool_result(
        2,
        1,
        "demo-r2",
        "call_read",
        "# demo\nA tiny project used by the sessionctl demo.\nRun `cargo test` to check it.\n",
        call.seq(),
    )?;
    say("turn 2 · tool read(README.md) → 3 lines");
    s.log("step/end", r#"{"turn":2,"step":1}"#)?;
    flush("before step 2")?;
    s.log("step/start", r#"{"turn":2,"step":2}"#)?;
    let mut chunks = s.stream_text(
        2,
        2,
        0,
        &[
            "README.md",
            " says",
            " this is a tiny",
            " demo project;",
            " `cargo test`",
            " checks it.",
        ],
    )?;
    chunks.push(s.finish(2, 2, "stop")?);
    s.assistant(
        2,
        2,
        "demo-a4",
        "scripted-large",
        &text_block("README.md says this is a tiny demo project; `cargo test` checks it."),
        &chunks,
    )?;
    s.log("step/end", r#"{"turn":2,"step":2}"#)?;
    s.log("turn/end", r#"{"turn":2,"reason":{"kind":"completed"}}"#)?;
    flush("turn 2 ended")?;

    // ---- compaction: turn 1 is summarised ----
    s.log(
        "compaction/start",
        r#"{"compactionId":"compact-1","turn":null}"#,
    )?;
    let shadowed = [u1.seq(), a1.seq(), r1.seq(), a2.seq()];
    let summary = text_message(
        "demo-summary-1",
        "user",
        "Summary of turn 1: the user asked for the file list; `ls` showed Cargo.toml, README.md and src/.",
        r#"{"kind":"plugin","plugin":"compact"}"#,
    );
    let c = s.push(
        Draft::new("user/message", summary)
            .replace_op(u1.seq(), a2.seq())
            .sources(&shadowed),
    )?;
    s.log(
        "compaction/end",
        r#"{"compactionId":"compact-1","turn":null}"#,
    )?;
    say(&format!(
        "compaction · seq {} replaces surface seqs {}..{} with a summary",
        c.seq(),
        u1.seq(),
        a2.seq()
    ));
    flush("compaction done")?;

    // ---- turn 3: two tool calls, crash inside the first ----
    s.log("turn/start", r#"{"turn":3}"#)?;
    s.log("step/start", r#"{"turn":3,"step":1}"#)?;
    s.surface(
        "user/message",
        text_message(
            "demo-u3",
            "user",
            "Run the tests, then check the formatting.",
            user,
        ),
        &[],
    )?;
    say("turn 3 · user: Run the tests, then check the formatting.");
    flush("before the model request")?;
    let mut chunks = s.stream_call(
        3,
        1,
        0,
        "call_test",
        "bash",
        &["{\"command\"", ":\"cargo test\"}"],
    )?;
    chunks.extend(s.stream_call(
        3,
        1,
        1,
        "call_fmt",
        "bash",
        &["{\"command\"", ":\"cargo fmt --check\"}"],
    )?);
    chunks.push(s.finish(3, 1, "tool-calls")?);
    s.assistant(
        3,
        1,
        "demo-a5",
        "scripted-large",
        &format!(
            "{},{}",
            tool_call_block("call_test", "bash", "{\"command\":\"cargo test\"}"),
            tool_call_block("call_fmt", "bash", "{\"command\":\"cargo fmt --check\"}")
        ),
        &chunks,
    )?;
    say("turn 3 · model requested two tool calls: call_test, call_fmt");
    s.log(
        "tool/call",
        r#"{"turn":3,"step":1,"callId":"call_test","name":"bash","arguments":"{\"command\":\"cargo test\"}"}"#,
    )?;
    store
        .block_on(checkpoint_tool(&store.sessions, &session, false, None))
        .map_err(|e| Error::failed(format!("checkpoint failed: {e}"), None))?;
    say(&format!(
        "checkpoint (before the tool body): durable through seq {}",
        session.seq().saturating_sub(1)
    ));
    say(
        "turn 3 · tool body of call_test is running … the process dies now (call_fmt never started)",
    );
    die()
}

/// Ends the process abruptly: SIGKILL to itself, or `abort` if that fails.
fn die() -> ! {
    let pid = std::process::id().to_string();
    let _ = Command::new("kill").args(["-KILL", &pid]).status();
    std::thread::sleep(std::time::Duration::from_secs(2));
    std::process::abort()
}

/// Removes a previous demo session directory (both encodings) under `root`.
fn remove_previous(root: &Path, id: &str) -> Result<bool> {
    let mut removed = false;
    for c in [Compression::Zstd, Compression::None] {
        let Ok(file) = log_path(root, Some(DEMO_CWD), id, c) else {
            continue;
        };
        if let Some(dir) = file.parent().filter(|d| d.is_dir()) {
            std::fs::remove_dir_all(dir).map_err(|e| Error::io("remove", dir, &e))?;
            removed = true;
        }
    }
    Ok(removed)
}

fn section(out: &mut Out, n: u32, title: &str) -> Result<()> {
    let s = out.style;
    out.line("")?;
    out.line(&s.bold(&format!("{n}. {title}")))?;
    Ok(())
}

/// `demo`.
pub(crate) fn demo(inv: &Invocation, out: &mut Out) -> Result<()> {
    if inv.global.database.is_some() {
        return Err(Error::usage(
            "`demo` runs on a JSONL root (its writer is killed mid-write to show a torn log); pass --root DIR or --store jsonl:DIR",
        ));
    }
    let s = out.style;
    let root = inv.global.root();
    let compression = inv
        .global
        .compression
        .unwrap_or_else(|| detect_root_compression(&root));
    std::fs::create_dir_all(&root).map_err(|e| Error::io("create", &root, &e))?;
    let mut removed = remove_previous(&root, DEMO_ID)?;
    removed |= remove_previous(&root, FORK_ID)?;
    removed |= remove_previous(&root, CRASHED_ID)?;
    out.line(&s.bold("sessionctl demo: a scripted agent session, a real crash, repair and fork"))?;
    out.line(&format!(
        "root {} ({} encoding){}",
        root.display(),
        compression.as_str(),
        if removed {
            "; the previous demo sessions were removed"
        } else {
            ""
        }
    ))?;

    section(
        out,
        1,
        "an agent writes the session (a separate process, write-behind + checkpoints)",
    )?;
    out.flush()?;
    let mut child = writer_process(&root, compression, DEMO_ID)?
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::failed(format!("cannot start the writer process: {e}"), None))?;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line =
                line.map_err(|e| Error::failed(format!("cannot read the writer: {e}"), None))?;
            out.line(&format!("  {} {line}", s.dim("writer │")))?;
            out.flush()?;
        }
    }
    let status = child
        .wait()
        .map_err(|e| Error::failed(format!("cannot wait for the writer: {e}"), None))?;
    let how = describe_exit(status);
    if status.success() {
        return Err(Error::failed(
            "the writer exited normally; the demo expects it to die mid-turn",
            None,
        ));
    }
    out.line(&format!("  {} {}", s.red("writer died:"), how))?;

    let target = Target {
        at: StoreAt::Jsonl {
            root: root.clone(),
            compression,
        },
        id: DEMO_ID.to_owned(),
        file: None,
        outside: false,
    };
    let clock = Arc::new(FixedClock::new(T0 + 3_600_000));
    let shared: SharedClock = clock.clone();
    let store = Store::open_with(&target.at, shared)?;

    section(out, 2, "what the disk holds (inspect: read-only)")?;
    let report = report::build(&store, &target, true)?;
    if let Some(f) = &report.file {
        out.line(&format!("  file {}", f.display()))?;
    }
    let last = report
        .events
        .get(report.stored.saturating_sub(1))
        .map(|e| format!("{} at seq {}", e.event_type(), e.seq()))
        .unwrap_or_default();
    out.line(&format!(
        "  {} events are durable; the last is {last}; turn {} is open",
        report.stored,
        report
            .open_turn()
            .map_or_else(|| "none".to_owned(), |t| t.turn.to_json())
    ))?;
    out.line(&format!(
        "  load would append {} closers:",
        report.closers.len()
    ))?;
    for c in &report.closers {
        out.line(&format!(
            "    seq {:<4} {:<12} {}",
            c.seq(),
            c.event_type(),
            s.yellow(&event_detail(c))
        ))?;
    }

    section(
        out,
        3,
        "load repairs the interrupted turn (closers are appended, nothing is rewritten)",
    )?;
    let loaded = store
        .block_on(store.persistence.load(DEMO_ID))
        .map_err(|e| store.err(e, report.file.as_deref()))?;
    for c in loaded.events.iter().skip(report.stored) {
        out.line(&format!(
            "  appended seq {:<4} {:<12} {}",
            c.seq(),
            c.event_type(),
            s.yellow(&event_detail(c))
        ))?;
        if c.event_type() == "tool/result"
            && let Some(m) = derive_event_message(c)
        {
            out.line(&format!(
                "      \"{}\"",
                truncate(&message_summary(m, 500), out.layout_width.saturating_sub(8))
            ))?;
        }
    }
    let again = store
        .block_on(store.persistence.inspect(DEMO_ID, None))
        .map_err(|e| store.err(e, report.file.as_deref()))?;
    let verdict = if again.events.len() == loaded.events.len() {
        "inspecting it again finds nothing left to repair"
    } else {
        "inspecting it again still finds something to repair"
    };
    out.line(&format!(
        "  {} the log now has {} events and no open turn; {verdict}",
        s.green("✓"),
        loaded.events.len()
    ))?;

    section(
        out,
        4,
        "what the model reads (surface) beside what a person reads (transcript)",
    )?;
    side_by_side(out, &loaded.events)?;

    section(out, 5, "fork at a closed boundary, and the child continues")?;
    let in_turn = loaded
        .events
        .iter()
        .rev()
        .find(|e| e.event_type() == "tool/call")
        .map_or(0, Event::seq);
    match fork_events(
        DEMO_ID,
        Some(DEMO_CWD),
        &loaded.events,
        Some(&num(in_turn)),
        FORK_ID,
        store.sessions.clock().clone(),
    ) {
        Err(e) => out.line(&format!(
            "  fork at seq {in_turn} refused [{}]: {e}",
            e.as_fork().map_or("", |f| f.code().as_str())
        ))?,
        Ok(_) => out.line(&format!(
            "  fork at seq {in_turn} was unexpectedly accepted"
        ))?,
    }
    let boundary = loaded
        .events
        .iter()
        .rev()
        .find(|e| e.event_type() == "turn/start")
        .map_or(0, |e| e.seq().saturating_sub(1));
    let child = fork_events(
        DEMO_ID,
        Some(DEMO_CWD),
        &loaded.events,
        Some(&num(boundary)),
        FORK_ID,
        store.sessions.clock().clone(),
    )
    .map_err(|e| Error::failed(format!("the demo fork failed: {e}"), None))?;
    let child = SharedSession::new(child);
    store
        .sessions
        .enter(&child)
        .map_err(|e| Error::failed(e.to_string(), None))?;
    store
        .sessions
        .announce(&child)
        .map_err(|e| Error::failed(e.to_string(), None))?;
    out.line(&format!(
        "  forked {DEMO_ID} at seq {boundary} (after the compaction, before turn 3) into {FORK_ID}"
    ))?;
    let cs = Script {
        session: child.clone(),
        clock,
    };
    cs.log("turn/start", r#"{"turn":3}"#)?;
    cs.log("step/start", r#"{"turn":3,"step":1}"#)?;
    cs.surface(
        "user/message",
        text_message(
            "demo-fork-u1",
            "user",
            "Only check the formatting this time.",
            r#"{"kind":"user"}"#,
        ),
        &[],
    )?;
    let mut chunks = cs.stream_text(3, 1, 0, &["Formatting", " is", " clean."])?;
    chunks.push(cs.finish(3, 1, "stop")?);
    cs.assistant(
        3,
        1,
        "demo-fork-a1",
        "scripted-large",
        &text_block("Formatting is clean."),
        &chunks,
    )?;
    cs.log("step/end", r#"{"turn":3,"step":1}"#)?;
    cs.log("turn/end", r#"{"turn":3,"reason":{"kind":"completed"}}"#)?;
    store
        .block_on(store.sessions.flush(&child))
        .map_err(|e| Error::failed(format!("flushing the fork failed: {e}"), None))?;
    let header = child.header();
    out.line(&format!(
        "  {FORK_ID}: parentSession {}, seedLength {}, {} events; its new turn 3 is durable",
        header.parent_session.as_deref().unwrap_or("-"),
        header.seed_length.unwrap_or(0),
        child.seq()
    ))?;
    let messages = child.derive_messages();
    if let Some(last) = messages.last() {
        out.line(&format!(
            "  the child's model now reads {} messages, ending with {}: \"{}\"",
            messages.len(),
            message_heading(last),
            message_summary(last, 60)
        ))?;
    }
    store.close()?;

    // The same writer again, under another id; this time nothing repairs it.
    let status = writer_process(&root, compression, CRASHED_ID)?
        .stdout(Stdio::null())
        .status()
        .map_err(|e| Error::failed(format!("cannot run the writer process: {e}"), None))?;
    if status.success() {
        return Err(Error::failed(
            "the writer exited normally; the demo expects it to die mid-turn",
            None,
        ));
    }

    section(out, 6, "look around")?;
    out.line(&format!(
        "  {CRASHED_ID} is the same script crashed the same way, left unrepaired for `repair`:"
    ))?;
    let r = root.display();
    for cmd in [
        format!("sessionctl --root {r} inspect {CRASHED_ID}"),
        format!("sessionctl --root {r} repair {CRASHED_ID}"),
    ] {
        out.line(&format!("  {cmd}"))?;
    }
    out.line("  and the others:")?;
    for cmd in [
        format!("sessionctl --root {r} list"),
        format!("sessionctl --root {r} inspect {DEMO_ID}"),
        format!("sessionctl --root {r} messages {DEMO_ID} --at {boundary}"),
        format!("sessionctl --root {r} transcript {DEMO_ID}"),
        format!("sessionctl --root {r} header {DEMO_ID}"),
        format!("sessionctl --root {r} stats {FORK_ID}"),
        format!("sessionctl verify {r}"),
    ] {
        out.line(&format!("  {cmd}"))?;
    }
    Ok(())
}

/// The command that runs the demo's writer process for session `id`.
fn writer_process(root: &Path, compression: Compression, id: &str) -> Result<Command> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::failed(format!("cannot find the sessionctl binary: {e}"), None))?;
    let mut cmd = Command::new(exe);
    cmd.arg("--root")
        .arg(root)
        .arg("--compression")
        .arg(compression.as_str())
        .arg("__demo-writer")
        .arg(id)
        .stdin(Stdio::null());
    Ok(cmd)
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(sig) = status.signal() {
            let name = match sig {
                9 => "SIGKILL",
                6 => "SIGABRT",
                _ => "signal",
            };
            return format!("killed by {name} ({sig}) in the middle of turn 3");
        }
    }
    format!("exit status {status}")
}

/// Prints the surface (model view) and the transcript (human view) in two columns.
fn side_by_side(out: &mut Out, events: &session_core::Events) -> Result<()> {
    let s: Style = out.style;
    let col = (out.layout_width.saturating_sub(5) / 2).max(30);
    let fold = fold_surface(events.iter())
        .map_err(|e| Error::failed(format!("the demo surface does not fold: {e}"), None))?;
    let left: Vec<String> = fold
        .nodes
        .iter()
        .filter_map(|n| events.get(*n as usize))
        .filter_map(|e| derive_event_message(e).map(|m| (e.seq(), m)))
        .map(|(seq, m)| {
            let who = short_role(m);
            truncate(&format!("{seq:>3} {who} {}", message_summary(m, col)), col)
        })
        .collect();
    let transcript = Transcript::from_events(events.iter())
        .map_err(|e| Error::failed(format!("the demo transcript does not build: {e}"), None))?;
    let mut right = Vec::new();
    for entry in transcript.iter() {
        match entry {
            TranscriptEntry::Replacement {
                event, start, end, ..
            } => {
                right.push(s.magenta(&truncate(
                    &format!("{:>3} ── compaction of {start}..{end} ──", event.seq()),
                    col,
                )));
            }
            other => {
                let text = other.message().map_or_else(String::new, |m| {
                    format!("{} {}", short_role(m), message_summary(m, col))
                });
                right.push(truncate(&format!("{:>3} {text}", other.seq()), col));
            }
        }
    }
    out.line(&format!(
        "  {}   {}",
        s.bold(&pad("surface (model)", col)),
        s.bold("transcript (human)")
    ))?;
    for i in 0..left.len().max(right.len()) {
        let l = left.get(i).map_or("", String::as_str);
        let r = right.get(i).map_or("", String::as_str);
        out.line(&format!("  {} │ {r}", pad(l, col)))?;
    }
    Ok(())
}

fn short_role(m: &Value) -> &'static str {
    let kind = m
        .get("source")
        .and_then(|s| s.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("");
    match (m.get("role").and_then(Value::as_str), kind) {
        (_, "tool") => "tool:",
        (_, "plugin") => "summary:",
        (Some("assistant"), _) => "model:",
        _ => "user:",
    }
}
