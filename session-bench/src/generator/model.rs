//! The simulated coding agent: turns of steps, each step one streamed model response
//! (reasoning, optional text, tool-call deltas), its tool executions, occasional request-header
//! changes and compactions. Every event goes through [`Session::append`] at the simulated time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use session_core::json::{self, Value};
use session_core::{Event, FixedClock};
use session_surface::{Draft, Session};

use super::Error;
use super::rng::Rng;
use super::text::{Lang, TextGen, tokenize};
use super::words;

/// The provider every model call goes to.
mod tools;

pub(crate) const PROVIDER: &str = "deepseek-official";
const MODELS: [&str; 2] = ["deepseek-v4-flash", "deepseek-v4-pro"];

/// Tool name, description and parameter names of the advertised tools.
const TOOLS: [(&str, &str, &[&str]); 10] = [
    (
        "bash",
        "Run a shell command in the workspace and return its output.",
        &["command", "description", "timeout_ms"],
    ),
    (
        "read",
        "Read a UTF-8 text file. Results include line numbers.",
        &["file_path", "offset", "limit"],
    ),
    (
        "write",
        "Create a file or replace its complete contents.",
        &["file_path", "content"],
    ),
    (
        "edit",
        "Replace a literal string in an existing UTF-8 text file.",
        &["file_path", "old_string", "new_string", "replace_all"],
    ),
    (
        "grep",
        "Search file contents with a regular expression.",
        &["pattern", "path", "glob"],
    ),
    (
        "glob",
        "List files that match a glob pattern.",
        &["pattern", "path"],
    ),
    (
        "todo_write",
        "Replace the task list for the current session.",
        &["todos"],
    ),
    (
        "subagent",
        "Delegate a bounded task to a child agent.",
        &["description", "prompt", "run_in_background"],
    ),
    (
        "web_search",
        "Search the web and return result snippets.",
        &["query"],
    ),
    (
        "job_output",
        "Read the output of a background job.",
        &["job_id"],
    ),
];

const CHECKPOINT_TEXT: &str = "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up context. Treat the captured context as established background and build on it without restating it. Continue the task directly from the messages that follow, without acknowledging this checkpoint.\n\n<compacted-summary>";

/// A non-negative or negative integer as a JSON number.
pub(crate) fn num<T: TryInto<i64>>(v: T) -> Value {
    session_core::event::int_value(v.try_into().unwrap_or(i64::MAX))
}

/// One appended event of the current turn, with the write-behind checkpoint flags.
#[derive(Debug, Clone)]
pub(crate) struct Pending {
    pub(crate) event: Event,
    /// The checkpoint policy flushes before this event (step start, model stream start).
    pub(crate) flush_before: bool,
    /// The checkpoint policy flushes after this event (tool call, turn end).
    pub(crate) flush_after: bool,
}

/// A tool call the interrupted tail left without a result: id, step, and the seq of its
/// `tool/call` when it started.
#[derive(Debug, Clone)]
pub(crate) struct OpenCall {
    pub(crate) call_id: String,
    pub(crate) step: u64,
    pub(crate) call_seq: Option<u64>,
}

/// One planned tool execution.
struct ToolRun {
    name: &'static str,
    args: String,
    result: String,
    duration: i64,
    is_error: bool,
}

/// A JSON argument value, written with Python's `json.dumps` separators (`, ` and `: `), as
/// the tool-call arguments of the model are.
enum Arg {
    Str(String),
    Int(i64),
    Todos(Vec<(String, &'static str)>),
}

fn args_json(entries: &[(&str, Arg)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        json::write_str(k, &mut out);
        out.push_str(": ");
        match v {
            Arg::Str(s) => json::write_str(s, &mut out),
            Arg::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Arg::Todos(items) => {
                out.push('[');
                for (j, (content, status)) in items.iter().enumerate() {
                    if j > 0 {
                        out.push_str(", ");
                    }
                    out.push_str("{\"content\": ");
                    json::write_str(content, &mut out);
                    out.push_str(", \"status\": ");
                    json::write_str(status, &mut out);
                    out.push('}');
                }
                out.push(']');
            }
        }
    }
    out.push('}');
    out
}

fn text_part(text: impl Into<Value>) -> Value {
    Value::object([("type", Value::from("text")), ("text", text.into())])
}

/// Truncates to at most `n` characters.
fn take_chars(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The agent model and the session it appends to.
pub(crate) struct Model {
    pub(crate) text: TextGen,
    pub(crate) session: Session,
    clock: Arc<FixedClock>,
    pub(crate) now: i64,
    pub(crate) turn: u64,
    surface: Vec<u64>,
    surface_chars: usize,
    balanced_end: Option<usize>,
    llm: &'static str,
    effort: &'static str,
    system: String,
    tools: Value,
    header_sent: bool,
    header_change_due: i64,
    pub(crate) compactions: u64,
    cache_tokens: u64,
    pub(crate) counts: BTreeMap<String, u64>,
    pub(crate) deltas: BTreeMap<&'static str, u64>,
    gap_ms: f64,
    titled: bool,
    pub(crate) cwd: String,
    pub(crate) session_id: String,
    pub(crate) created_at: i64,
    reasoning_mu: f64,
    compact_chars: usize,
    ty_chunk: Arc<str>,
}

/// Tunables of the simulated agent (the reference profile's values by default).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tuning {
    pub(crate) compact_chars: usize,
    pub(crate) stream_rate: f64,
    pub(crate) tool_output_scale: f64,
    pub(crate) reasoning_mu: f64,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            compact_chars: 3_000_000,
            stream_rate: 15.7,
            tool_output_scale: 0.4,
            reasoning_mu: 5.0,
        }
    }
}

impl Model {
    pub(crate) fn new(seed: u64, tuning: Tuning) -> Result<Model, Error> {
        let rng = Rng::from_label(&format!("session-bench-gen/1/{seed}"));
        let mut text = TextGen::new(rng, tuning.tool_output_scale);
        let session_id = uuid(&mut text.rng);
        let cwd = format!("/home/dev/work/{}", text.word());
        let created_at = 1_786_000_000_000 + text.rng.int(0, 86_400_000 - 1);
        let now = created_at + text.rng.int(5, 50);
        let clock = Arc::new(FixedClock::new(created_at));
        let header = Value::object([
            ("version", Value::from(0u8)),
            ("id", Value::from(session_id.as_str())),
            ("createdAt", num(created_at)),
            ("cwd", Value::from(cwd.as_str())),
            ("delegationDepth", Value::from(0u8)),
        ]);
        let session = Session::create(session_id.as_str(), None, Some(header), clock.clone())?;
        let mut m = Model {
            text,
            session,
            clock,
            now,
            turn: 0,
            surface: Vec::new(),
            surface_chars: 0,
            balanced_end: None,
            llm: MODELS[0],
            effort: "high",
            system: String::new(),
            tools: Value::array([]),
            header_sent: false,
            header_change_due: 0,
            compactions: 0,
            cache_tokens: 0,
            counts: BTreeMap::new(),
            deltas: BTreeMap::new(),
            // Mean inter-delta gap: 0.12 + 0.568 * gap + 0.012 * 380 ms (see `chunk_dts`).
            gap_ms: ((1000.0 / tuning.stream_rate - 4.68) / 0.568).max(2.0),
            titled: false,
            cwd,
            session_id,
            created_at,
            reasoning_mu: tuning.reasoning_mu,
            compact_chars: tuning.compact_chars,
            ty_chunk: Arc::from("assistant/chunk"),
        };
        m.system = m.system_prompt();
        m.tools = m.tool_schemas();
        m.header_change_due = m.text.rng.int(25, 60);
        Ok(m)
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.text.rng
    }

    fn system_prompt(&mut self) -> String {
        let mut parts = vec![
            "You are an AI agent powered by DeepSeek Harness.".to_owned(),
            format!(
                "You are a coding assistant. Your working directory is {}.",
                self.cwd
            ),
        ];
        for (name, _, _) in TOOLS {
            parts.push(format!("Use the {name} tool when {}", self.text.prose(200)));
        }
        parts.push(self.text.markdown(3000));
        parts.join("\n\n")
    }

    fn tool_schemas(&mut self) -> Value {
        let mut out = Vec::new();
        for (name, desc, params) in TOOLS {
            let mut props = Vec::new();
            for &p in params {
                let ty = match p {
                    "offset" | "limit" | "timeout_ms" => "integer",
                    "replace_all" | "run_in_background" => "boolean",
                    "todos" => "array",
                    _ => "string",
                };
                let d = self.text.prose(60);
                props.push((
                    p,
                    Value::object([
                        ("type", Value::from(ty)),
                        ("description", Value::from(d.trim())),
                    ]),
                ));
            }
            let long = format!("{desc} {}", self.text.prose(150).trim());
            out.push(Value::object([
                ("name", Value::from(name)),
                ("description", Value::from(long)),
                (
                    "parameters",
                    Value::object([
                        ("type", Value::from("object")),
                        ("properties", Value::object(props)),
                        ("required", Value::array([Value::from(params[0])])),
                        ("additionalProperties", Value::from(false)),
                    ]),
                ),
            ]));
        }
        Value::array(out)
    }

    /// Appends one event at simulated time `t`.
    fn ev(&mut self, out: &mut Vec<Pending>, draft: Draft, t: i64) -> Result<Event, Error> {
        self.clock.set(t);
        let ty = draft.ty.clone();
        let event = self.session.append(draft)?;
        *self.counts.entry(ty.to_string()).or_insert(0) += 1;
        out.push(Pending {
            event: event.clone(),
            flush_before: false,
            flush_after: false,
        });
        Ok(event)
    }

    fn chunk(&self, turn: u64, step: u64, chunk: Value) -> Draft {
        Draft::new(
            self.ty_chunk.clone(),
            Value::object([("turn", num(turn)), ("step", num(step)), ("chunk", chunk)]),
        )
    }

    /// Inter-delta gaps: 0–1 ms inside one network read, a gap between reads, rare stalls.
    fn chunk_dts(&mut self, n: usize) -> Vec<i64> {
        let gap = self.gap_ms;
        (0..n)
            .map(|_| {
                let r = self.rng();
                let x = r.random();
                if x < 0.30 {
                    0
                } else if x < 0.42 {
                    1
                } else if x < 0.988 {
                    (r.gauss(gap, gap / 4.0) as i64).max(3)
                } else {
                    r.int(60, 700)
                }
            })
            .collect()
    }

    /// `block-start` and the deltas of one block; returns the finished block.
    fn stream_block(
        &mut self,
        out: &mut Vec<Pending>,
        (turn, step): (u64, u64),
        index: u64,
        kind: &'static str,
        pieces: Vec<String>,
        tool: Option<(&str, &str)>,
    ) -> Result<Value, Error> {
        let mut t = self.now;
        let start = Value::object([
            ("type", Value::from("block-start")),
            ("index", num(index)),
            ("blockType", Value::from(kind)),
        ]);
        self.ev(out, self.chunk(turn, step, start), t)?;
        let dts = self.chunk_dts(pieces.len());
        *self.deltas.entry(kind).or_insert(0) += pieces.len() as u64;
        let mut text = String::new();
        for (piece, dt) in pieces.into_iter().zip(dts) {
            t += dt;
            text.push_str(&piece);
            let c = match (kind, tool) {
                ("tool-call", Some((id, name))) => Value::object([
                    ("type", Value::from("tool-call-delta")),
                    ("index", num(index)),
                    ("id", Value::from(id)),
                    ("name", Value::from(name)),
                    ("argumentsDelta", Value::from(piece)),
                ]),
                _ => Value::object([
                    (
                        "type",
                        Value::from(if kind == "reasoning" {
                            "reasoning-delta"
                        } else {
                            "text-delta"
                        }),
                    ),
                    ("index", num(index)),
                    ("text", Value::from(piece)),
                ]),
            };
            self.ev(out, self.chunk(turn, step, c), t)?;
        }
        self.now = t;
        Ok(match tool {
            Some((id, name)) => Value::object([
                ("type", Value::from("tool-call")),
                ("id", Value::from(id)),
                ("name", Value::from(name)),
                ("arguments", Value::from(text)),
            ]),
            None => Value::object([("type", Value::from(kind)), ("text", Value::from(text))]),
        })
    }

    /// The `request/header` (initial, or a change) and `request/context` when due.
    fn maybe_header(&mut self, out: &mut Vec<Pending>) -> Result<(), Error> {
        if self.header_sent && self.header_change_due > 0 {
            return Ok(());
        }
        let reason = if self.header_sent {
            "change"
        } else {
            "initial"
        };
        if self.header_sent {
            let y = self.rng().random();
            if y < 0.4 {
                self.llm = if self.llm == MODELS[0] {
                    MODELS[1]
                } else {
                    MODELS[0]
                };
            } else if y < 0.7 {
                self.effort = if self.effort == "high" { "max" } else { "high" };
            } else {
                let extra = self.text.prose(400);
                self.system = format!("{}\n\n{extra}", self.system);
            }
        }
        let header = Value::object([
            (
                "config",
                Value::object([
                    ("provider", Value::from(PROVIDER)),
                    ("model", Value::from(self.llm)),
                    ("maxTokens", Value::from(256_000u32)),
                    ("reasoningEffort", Value::from(self.effort)),
                ]),
            ),
            (
                "adapterDefaults",
                Value::object([
                    ("reasoningEffort", Value::from(true)),
                    ("maxTokens", Value::from(true)),
                ]),
            ),
            ("system", Value::from(self.system.as_str())),
            ("tools", self.tools.clone()),
        ]);
        let now = self.now;
        self.ev(
            out,
            Draft::new(
                "request/header",
                Value::object([("header", header), ("reason", Value::from(reason))]),
            ),
            now,
        )?;
        self.ev(
            out,
            Draft::new(
                "request/context",
                Value::object([
                    ("provider", Value::from(PROVIDER)),
                    ("model", Value::from(self.llm)),
                    ("contextWindow", Value::from(1_000_000u32)),
                ]),
            ),
            now,
        )?;
        self.header_sent = true;
        self.header_change_due = self.rng().int(25, 70);
        Ok(())
    }

    /// `step/start` (flushed before), then the step body.
    fn step(
        &mut self,
        out: &mut Vec<Pending>,
        turn: u64,
        step: u64,
        final_step: bool,
        tail: bool,
    ) -> Result<Vec<OpenCall>, Error> {
        self.step_start(out, turn, step)?;
        self.step_body(out, turn, step, final_step, tail)
    }

    fn step_start(&mut self, out: &mut Vec<Pending>, turn: u64, step: u64) -> Result<(), Error> {
        let now = self.now;
        self.ev(
            out,
            Draft::new(
                "step/start",
                Value::object([("turn", num(turn)), ("step", num(step))]),
            ),
            now,
        )?;
        if let Some(p) = out.last_mut() {
            p.flush_before = true;
        }
        self.now += self.rng().int(0, 3);
        Ok(())
    }

    /// Header change if due, the model stream, `assistant/message`, the tools, `step/end`.
    /// With `tail` the step stops right after the first `tool/call` and returns the calls left
    /// open.
    fn step_body(
        &mut self,
        out: &mut Vec<Pending>,
        turn: u64,
        step: u64,
        final_step: bool,
        tail: bool,
    ) -> Result<Vec<OpenCall>, Error> {
        self.maybe_header(out)?;
        self.now += self.rng().int(300, 2500);
        let first_chunk = self.session.seq();
        let mut blocks = Vec::new();
        let mut index = 0u64;
        let mu = self.reasoning_mu;
        let n_reason = self.rng().lognormal(mu, 0.8) as usize + 5;
        let mark = out.len();
        let reasoning = tokenize(&self.text.prose(n_reason * 4));
        let n_reasoning_pieces = reasoning.len();
        blocks.push(self.stream_block(out, (turn, step), index, "reasoning", reasoning, None)?);
        if let Some(p) = out.get_mut(mark) {
            p.flush_before = true;
        }
        index += 1;
        let mut calls: Vec<(String, ToolRun)> = Vec::new();
        if final_step {
            let n_text = self.rng().lognormal(5.2, 0.7) as usize + 10;
            let mut body = if self.rng().random() < 0.7 {
                self.text.markdown(n_text * 4)
            } else {
                self.text.prose(n_text * 4)
            };
            if self.rng().random() < 0.05 {
                body = format!("{}。{body}", self.rng().pick(words::CJK_PHRASES));
            }
            blocks.push(self.stream_block(
                out,
                (turn, step),
                index,
                "text",
                tokenize(&body),
                None,
            )?);
        } else {
            if self.rng().random() < 0.25 {
                let k = self.rng().size(40, 300);
                let pieces = tokenize(&self.text.prose(k));
                blocks.push(self.stream_block(out, (turn, step), index, "text", pieces, None)?);
                index += 1;
            }
            let ncalls = if tail {
                2
            } else if self.rng().random() < 0.72 {
                1
            } else {
                *self.rng().pick(&[2, 2, 3, 4])
            };
            for i in 0..ncalls {
                let run = self.make_tool_call();
                let cid = self.call_id(i);
                let mut pieces = vec![String::new()];
                pieces.extend(tokenize(&run.args));
                let block = self.stream_block(
                    out,
                    (turn, step),
                    index,
                    "tool-call",
                    pieces,
                    Some((&cid, run.name)),
                )?;
                blocks.push(block);
                calls.push((cid, run));
                index += 1;
            }
        }
        let t_end = self.now + self.rng().int(0, 2);
        for (i, b) in blocks.iter().enumerate() {
            let c = Value::object([
                ("type", Value::from("block-end")),
                ("index", num(i)),
                ("block", b.clone()),
            ]);
            self.ev(out, self.chunk(turn, step, c), t_end)?;
        }
        let out_tokens = self.session.seq() - first_chunk;
        let in_tokens = self.rng().int(50, 4000) as u64;
        let usage = Value::object([
            ("inputTokens", num(in_tokens)),
            ("outputTokens", num(out_tokens)),
            ("cacheReadTokens", num(self.cache_tokens)),
            ("reasoningTokens", num(n_reasoning_pieces)),
        ]);
        self.cache_tokens += in_tokens + out_tokens;
        let usage_chunk = Value::object([("type", Value::from("usage")), ("usage", usage.clone())]);
        self.ev(out, self.chunk(turn, step, usage_chunk), t_end)?;
        let finish = Value::object([
            ("type", Value::from("finish")),
            (
                "reason",
                Value::object([(
                    "kind",
                    Value::from(if calls.is_empty() {
                        "stop"
                    } else {
                        "tool-calls"
                    }),
                )]),
            ),
        ]);
        self.ev(out, self.chunk(turn, step, finish), t_end)?;
        let chars: usize = blocks
            .iter()
            .map(|b| {
                b.get("text")
                    .or_else(|| b.get("arguments"))
                    .and_then(Value::as_str)
                    .map_or(0, |s| s.chars().count())
            })
            .sum();
        let msg_id = uuid(self.rng());
        let msg = Value::object([
            ("role", Value::from("assistant")),
            ("content", Value::array(blocks)),
            (
                "source",
                Value::object([
                    ("kind", Value::from("model")),
                    ("provider", Value::from(PROVIDER)),
                    ("model", Value::from(self.llm)),
                ]),
            ),
            ("id", Value::from(msg_id)),
        ]);
        let sources: Vec<u64> = (first_chunk..self.session.seq()).collect();
        let am = self.ev(
            out,
            Draft::new(
                "assistant/message",
                Value::object([
                    ("turn", num(turn)),
                    ("step", num(step)),
                    ("message", msg),
                    ("usage", usage),
                ]),
            )
            .sources(&sources)
            .append_op(),
            t_end,
        )?;
        self.surface_append(am.seq(), chars);
        self.now = t_end;
        let open: Vec<OpenCall> = if tail {
            calls
                .iter()
                .map(|(cid, _)| OpenCall {
                    call_id: cid.clone(),
                    step,
                    call_seq: None,
                })
                .collect()
        } else {
            Vec::new()
        };
        for (cid, run) in calls {
            self.now += self.rng().int(0, 2);
            let now = self.now;
            let tc = self.ev(
                out,
                Draft::new(
                    "tool/call",
                    Value::object([
                        ("turn", num(turn)),
                        ("step", num(step)),
                        ("callId", Value::from(cid.as_str())),
                        ("name", Value::from(run.name)),
                        ("arguments", Value::from(run.args)),
                    ]),
                ),
                now,
            )?;
            if let Some(p) = out.last_mut() {
                p.flush_after = true;
            }
            if tail {
                // A crash while the first tool runs: it started, the others never did.
                let mut open = open;
                if let Some(first) = open.first_mut() {
                    first.call_seq = Some(tc.seq());
                }
                return Ok(open);
            }
            self.now += run.duration;
            let result_len = run.result.chars().count();
            let msg = self.tool_result_message(&cid, Value::from(run.result), run.is_error);
            let now = self.now;
            let tr = self.ev(
                out,
                Draft::new(
                    "tool/result",
                    Value::object([("turn", num(turn)), ("step", num(step)), ("message", msg)]),
                )
                .sources(&[tc.seq()])
                .append_op(),
                now,
            )?;
            self.surface_append(tr.seq(), result_len);
        }
        self.now += self.rng().int(0, 3);
        let now = self.now;
        self.ev(
            out,
            Draft::new(
                "step/end",
                Value::object([("turn", num(turn)), ("step", num(step))]),
            ),
            now,
        )?;
        self.now += self.rng().int(0, 2);
        Ok(Vec::new())
    }

    /// The message of a `tool/result`.
    pub(crate) fn tool_result_message(
        &mut self,
        call_id: &str,
        result: Value,
        is_error: bool,
    ) -> Value {
        let block = Value::object([
            ("type", Value::from("tool-result")),
            ("toolCallId", Value::from(call_id)),
            ("content", Value::array([text_part(result)])),
            ("isError", Value::from(is_error)),
        ]);
        let id = uuid(self.rng());
        Value::object([
            (
                "source",
                Value::object([
                    ("kind", Value::from("tool")),
                    ("callId", Value::from(call_id)),
                ]),
            ),
            ("content", Value::array([block])),
            ("role", Value::from("user")),
            ("id", Value::from(id)),
        ])
    }

    fn surface_append(&mut self, seq: u64, chars: usize) {
        self.surface.push(seq);
        self.surface_chars += chars;
    }

    /// Replaces the surface up to the end of the previous turn with a checkpoint summary once
    /// the surface is over the compaction threshold.
    fn maybe_compact(&mut self, out: &mut Vec<Pending>, turn: u64) -> Result<(), Error> {
        let Some(end) = self.balanced_end else {
            return Ok(());
        };
        if self.surface_chars < self.compact_chars || end < 2 {
            return Ok(());
        }
        let shadow: Vec<u64> = self.surface[..end].to_vec();
        let (first, last) = (shadow[0], shadow[end - 1]);
        let cid = uuid(self.rng());
        self.now += self.rng().int(1, 5);
        let now = self.now;
        let cs = self.ev(
            out,
            Draft::new(
                "compaction/start",
                Value::object([
                    ("compactionId", Value::from(cid.as_str())),
                    ("turn", num(turn)),
                ]),
            ),
            now,
        )?;
        let k = self.rng().size(2000, 6000);
        let summary = self.text.markdown(k);
        self.now += self.rng().int(3000, 20_000);
        let now = self.now;
        let token_count = self.surface_chars / 4;
        let cm = self.ev(
            out,
            Draft::new(
                "compaction/summary",
                Value::object([
                    ("compactionId", Value::from(cid.as_str())),
                    ("summary", Value::array([text_part(summary.as_str())])),
                    ("rawOutput", Value::array([text_part(summary.as_str())])),
                    ("llmStreamCall", Value::from(true)),
                    (
                        "shadowedRange",
                        Value::object([("start", num(first)), ("end", num(last))]),
                    ),
                    ("shadowedSeqs", Value::array(shadow.iter().map(|&s| num(s)))),
                    ("shadowedTokenCount", num(token_count)),
                    ("provider", Value::from(PROVIDER)),
                    ("model", Value::from(self.llm)),
                    ("maxTokens", Value::from(8192u32)),
                    (
                        "usage",
                        Value::object([
                            ("inputTokens", num(token_count)),
                            ("outputTokens", num(summary.len() / 4)),
                        ]),
                    ),
                ]),
            ),
            now,
        )?;
        let msg_id = uuid(self.rng());
        let msg = Value::object([
            (
                "content",
                Value::array([
                    text_part(CHECKPOINT_TEXT),
                    text_part(summary.as_str()),
                    text_part("</compacted-summary>"),
                ]),
            ),
            (
                "source",
                Value::object([
                    ("kind", Value::from("plugin")),
                    ("plugin", Value::from("compact")),
                    ("compactionId", Value::from(cid.as_str())),
                ]),
            ),
            ("role", Value::from("user")),
            ("id", Value::from(msg_id)),
        ]);
        let mut sources = vec![cs.seq(), cm.seq()];
        sources.extend_from_slice(&shadow);
        let rep = self.ev(
            out,
            Draft::new("user/message", msg)
                .sources(&sources)
                .replace_op(first, last),
            now,
        )?;
        self.ev(
            out,
            Draft::new(
                "compaction/end",
                Value::object([
                    ("compactionId", Value::from(cid.as_str())),
                    ("turn", num(turn)),
                ]),
            ),
            now,
        )?;
        let mut surface = vec![rep.seq()];
        surface.extend_from_slice(&self.surface[end..]);
        self.surface = surface;
        self.surface_chars = summary.chars().count() + 1000;
        self.balanced_end = None;
        self.compactions += 1;
        self.cache_tokens = 0;
        Ok(())
    }

    /// Appends the next turn. With `interrupted` the turn stays open after its last step's
    /// first `tool/call`. Returns the turn's events, the calls left open and the step count.
    pub(crate) fn turn(
        &mut self,
        interrupted: bool,
        max_steps: u64,
    ) -> Result<(Vec<Pending>, Vec<OpenCall>, u64), Error> {
        self.turn += 1;
        self.header_change_due -= 1;
        let turn = self.turn;
        let mut out = Vec::new();
        if turn > 1 {
            self.now += self.rng().int(15_000, 600_000);
        }
        let now = self.now;
        self.ev(
            &mut out,
            Draft::new("turn/start", Value::object([("turn", num(turn))])),
            now,
        )?;
        let x = self.rng().random();
        let mut prompt = if x < 0.85 {
            let k = self.rng().size(60, 900);
            self.text.prose(k)
        } else {
            let k = self.rng().size(300, 3000);
            self.text.markdown(k)
        };
        if self.rng().random() < 0.06 {
            prompt = format!("{}：{prompt}", self.rng().pick(words::CJK_PHRASES));
        }
        let id = uuid(self.rng());
        let um = self.ev(
            &mut out,
            Draft::new(
                "user/message",
                Value::object([
                    ("content", Value::array([text_part(prompt.as_str())])),
                    ("source", Value::object([("kind", Value::from("user"))])),
                    ("role", Value::from("user")),
                    ("id", Value::from(id)),
                ]),
            )
            .append_op(),
            now + 1,
        )?;
        self.surface_append(um.seq(), prompt.chars().count());
        if !self.titled {
            let title = prompt
                .split_whitespace()
                .take(5)
                .collect::<Vec<_>>()
                .join(" ");
            self.ev(
                &mut out,
                Draft::new(
                    "session/title",
                    Value::object([
                        ("title", Value::from(title)),
                        ("messageSeqs", Value::array([num(um.seq())])),
                        ("source", Value::object([("kind", Value::from("fallback"))])),
                    ]),
                ),
                now + 1,
            )?;
            self.titled = true;
        }
        self.now += 2;
        let drawn = self.rng().exponential(1.0 / 11.0) as u64;
        let n_steps = max_steps.min(1 + drawn.min(59));
        let mut open = Vec::new();
        for s in 1..=n_steps {
            let final_step = s == n_steps && !interrupted;
            let tail = interrupted && s == n_steps;
            if s == 1 {
                self.step_start(&mut out, turn, 1)?;
                self.maybe_compact(&mut out, turn)?;
                open = self.step_body(&mut out, turn, 1, final_step, tail)?;
            } else {
                open = self.step(&mut out, turn, s, final_step, tail)?;
            }
        }
        if interrupted {
            return Ok((out, open, n_steps));
        }
        self.now += self.rng().int(0, 3);
        let now = self.now;
        self.ev(
            &mut out,
            Draft::new(
                "turn/end",
                Value::object([
                    ("turn", num(turn)),
                    (
                        "reason",
                        Value::object([("kind", Value::from("completed"))]),
                    ),
                ]),
            ),
            now,
        )?;
        if let Some(p) = out.last_mut() {
            p.flush_after = true;
        }
        self.balanced_end = Some(self.surface.len());
        Ok((out, Vec::new(), n_steps))
    }

    /// Sets the simulated clock (for events built outside a turn, such as the torn tail).
    pub(crate) fn set_clock(&self, t: i64) {
        self.clock.set(t);
    }
}

/// A random version-4 UUID.
pub(crate) fn uuid(r: &mut Rng) -> String {
    let hi = r.next_u64();
    let lo = r.next_u64();
    let h = format!("{hi:016x}{lo:016x}");
    let variant = 8 | (u8::from_str_radix(&h[16..17], 16).unwrap_or(0) & 3);
    format!(
        "{}-{}-4{}-{variant:x}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..32]
    )
}
