//! Invalid mutations of valid histories, each paired with the exact error it must produce.

use std::fmt;
use std::sync::Arc;

use proptest::collection::vec;
use proptest::prelude::*;
use session_core::event::seq_value;
use session_core::json::Value;
use session_core::{Event, FixedClock, SessionHeader, SharedClock};
use session_persist::{
    Backend, Compression, JsonlBackend, JsonlConfig, Persistence, PersistenceOptions,
};
use session_store::SessionStore;
use session_surface::{Draft, Session};

use super::actions::arb_action;
use super::history::{Builder, History, Record};

/// What an [`InvalidCase`] does to the session its setup history builds.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Mutation {
    /// Append this draft to the built session.
    Append(Draft),
    /// Re-seed a session (`Session::create`) with the built session's events, where the event
    /// at `index` carries `seq` instead of its own.
    SeedSeq {
        /// Index of the altered event.
        index: usize,
        /// The seq it carries.
        seq: u64,
    },
    /// Re-seed a session with the built session's events, where the event at `index` carries
    /// an extra envelope key `key`.
    SeedExtraKey {
        /// Index of the altered event.
        index: usize,
        /// The unknown envelope key.
        key: String,
    },
    /// Store the built session's events plus one event of type `ty` (not marked ignorable)
    /// through the JSONL backend, then read the log through the persistence service
    /// (`inspect` and `load`): the read path must refuse the first event whose type is not
    /// known. In the error, the temporary root is written `<root>`.
    StoredUnknownType {
        /// The unknown type of the appended event.
        ty: String,
        /// Whether the log is zstd-compressed (else plain JSONL).
        zstd: bool,
    },
}

/// A valid history, a mutation that must be refused, and the refusal's exact text.
#[derive(Debug, Clone)]
pub struct InvalidCase {
    /// The valid history the mutation applies to.
    pub setup: History,
    /// The invalid operation.
    pub mutation: Mutation,
    /// The exact error message the operation must fail with.
    pub expected_error: String,
}

/// What happened when an [`InvalidCase`] was tried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The error text, or `None` if the operation was accepted.
    pub error: Option<String>,
    /// What changed in the setup session, if anything did (a refused operation must change
    /// nothing).
    pub changed: Option<String>,
}

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(0))
}

/// Everything observable about a session, for "nothing changed" comparisons.
struct Observed {
    seq: u64,
    events: session_core::Events,
    nodes: Vec<u64>,
    generation: u64,
    messages: session_surface::Messages,
    header: Option<Value>,
    context: Option<Value>,
    transcript: session_surface::Transcript,
}

impl Observed {
    fn of(s: &Session) -> Observed {
        Observed {
            seq: s.seq(),
            events: s.events(),
            nodes: s.surface().nodes().to_vec(),
            generation: s.replace_generation(),
            messages: s.derive_messages(),
            header: s.request_header(),
            context: s.request_context(),
            transcript: s.transcript(),
        }
    }

    fn difference(&self, other: &Observed) -> Option<String> {
        let mut diffs = Vec::new();
        if self.seq != other.seq {
            diffs.push(format!("seq {} -> {}", self.seq, other.seq));
        }
        if self.events != other.events {
            diffs.push("events".to_owned());
        }
        if self.nodes != other.nodes {
            diffs.push(format!("nodes {:?} -> {:?}", self.nodes, other.nodes));
        }
        if self.generation != other.generation {
            diffs.push(format!(
                "replace generation {} -> {}",
                self.generation, other.generation
            ));
        }
        if self.messages != other.messages {
            diffs.push("messages".to_owned());
        }
        if self.header != other.header {
            diffs.push("request header".to_owned());
        }
        if self.context != other.context {
            diffs.push("request context".to_owned());
        }
        if self.transcript != other.transcript {
            diffs.push("transcript".to_owned());
        }
        (!diffs.is_empty()).then(|| diffs.join(", "))
    }
}

impl InvalidCase {
    /// Builds the setup session, applies the mutation, and reports the error and whether the
    /// session changed.
    ///
    /// # Panics
    ///
    /// When the setup history itself is refused (a conformance failure of its own).
    pub fn attempt(&self) -> Attempt {
        let mut session = self.setup.build();
        let before = Observed::of(&session);
        let error = match &self.mutation {
            Mutation::Append(draft) => session.append(draft.clone()).err().map(|e| e.to_string()),
            Mutation::SeedSeq { index, seq } => {
                let seed = Self::seed_with(&session, *index, |o| o.with("seq", seq_value(*seq)));
                Session::create(self.setup.id(), Some(seed), None, clock())
                    .err()
                    .map(|e| e.to_string())
            }
            Mutation::SeedExtraKey { index, key } => {
                let seed = Self::seed_with(&session, *index, |o| o.with(key, Value::from(1u8)));
                Session::create(self.setup.id(), Some(seed), None, clock())
                    .err()
                    .map(|e| e.to_string())
            }
            Mutation::StoredUnknownType { ty, zstd } => {
                let mut events = session.events().to_vec();
                events.push(Event::appended(
                    ty.as_str(),
                    events.len() as u64,
                    0,
                    Value::empty_object(),
                    None,
                    None,
                ));
                let compression = if *zstd {
                    Compression::Zstd
                } else {
                    Compression::None
                };
                return stored_read(self.setup.id(), &events, compression);
            }
        };
        let changed = before.difference(&Observed::of(&session));
        Attempt { error, changed }
    }

    fn seed_with(
        session: &Session,
        index: usize,
        alter: impl Fn(&session_core::json::Object) -> session_core::json::Object,
    ) -> Vec<Value> {
        session
            .events()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let v = e.to_value();
                match (i == index, v.as_object()) {
                    (true, Some(o)) => Value::Object(alter(o)),
                    _ => v,
                }
            })
            .collect()
    }
}

/// The working directory the stored-log cases are written under.
pub const STORED_CWD: &str = "/conformance/invalid";

/// Writes `events` as session `id` through the JSONL backend into a temporary root, then
/// reads it with the persistence service's `inspect` and `load`. The error is `inspect`'s
/// (with the root written `<root>`); a different error from `load`, or any change to the
/// stored bytes, is reported as a change.
fn stored_read(id: &str, events: &[Event], compression: Compression) -> Attempt {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::temp_dir().join(format!("conformance-invalid-{}-{n}", std::process::id()));
    let attempt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(stored_read_in(&root, id, events, compression)),
        Err(e) => Attempt {
            error: None,
            changed: Some(format!("no runtime: {e}")),
        },
    };
    let _ = std::fs::remove_dir_all(&root);
    attempt
}

async fn stored_read_in(
    root: &std::path::Path,
    id: &str,
    events: &[Event],
    compression: Compression,
) -> Attempt {
    let failed = |what: &str, e: &dyn fmt::Display| Attempt {
        error: None,
        changed: Some(format!("{what}: {e}")),
    };
    let mut meta = SessionHeader::new(id, 0);
    meta.cwd = Some(Arc::from(STORED_CWD));
    let config = JsonlConfig::new(root).compression(compression);
    let backend = match JsonlBackend::open(config) {
        Ok(b) => b,
        Err(e) => return failed("opening the backend", &e),
    };
    if let Err(e) = backend.append_batch(&meta, events, false).await {
        return failed("writing the log", &e);
    }
    let path = match backend.log_path(&meta) {
        Ok(p) => p,
        Err(e) => return failed("locating the log", &e),
    };
    let before = std::fs::read(&path).unwrap_or_default();
    let persistence = match Persistence::new(
        Arc::new(backend),
        SessionStore::new(clock()),
        PersistenceOptions::default(),
    ) {
        Ok(p) => p,
        Err(e) => return failed("starting the persistence service", &e),
    };
    let root_text = root.to_string_lossy().into_owned();
    let text = |r: Result<session_persist::Inspection, session_persist::Error>| {
        r.err().map(|e| e.to_string().replace(&root_text, "<root>"))
    };
    let inspected = text(persistence.inspect(id, None).await);
    let loaded = text(persistence.load(id).await);
    let _ = persistence.dispose().await;
    let after = std::fs::read(&path).unwrap_or_default();
    let mut changed = Vec::new();
    if loaded != inspected {
        changed.push(format!("load failed with {loaded:?}"));
    }
    if before != after {
        changed.push("the stored log".to_owned());
    }
    Attempt {
        error: inspected,
        changed: (!changed.is_empty()).then(|| changed.join(", ")),
    }
}

impl fmt::Display for InvalidCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} after {} drafts must fail with {:?}",
            self.mutation,
            self.setup.len(),
            self.expected_error
        )
    }
}

/// The random choices a mutation is made from.
#[derive(Debug, Clone)]
struct MutationSpec {
    kind: u8,
    a: usize,
    b: usize,
    variant: u8,
}

const KINDS: u8 = 18;

fn eligible(variant: u8) -> &'static str {
    ["user/message", "assistant/message", "tool/result"][usize::from(variant) % 3]
}

fn s(text: &str) -> Value {
    Value::from(text)
}

fn parse(text: &str) -> Value {
    Value::parse(text).unwrap_or_default()
}

fn join(seqs: &[u64]) -> String {
    seqs.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Valid data for a message-bearing type (shape-valid, in the open or a made-up step).
fn message_data(b: &mut Builder, ty: &str) -> Value {
    let turn = b.turn.unwrap_or(1);
    let step = b.step.unwrap_or(1);
    match ty {
        "user/message" => b.user_message(&["x".to_owned()], 0),
        "assistant/message" => {
            let id = b.next_id("asst");
            Value::object([
                ("turn", seq_value(turn)),
                ("step", seq_value(step)),
                (
                    "message",
                    Value::object([
                        ("id", s(&id)),
                        ("role", s("assistant")),
                        ("content", parse(r#"[{"type":"text","text":"x"}]"#)),
                        (
                            "source",
                            parse(r#"{"kind":"model","provider":"p","model":"m"}"#),
                        ),
                    ]),
                ),
            ])
        }
        _ => {
            let call = b.next_id("call");
            b.tool_result_data(turn, step, &call, "x", 0, None)
        }
    }
}

struct Made {
    mutation: Mutation,
    expected: String,
}

fn append(record: &Record, expected: String) -> Made {
    Made {
        mutation: Mutation::Append(record.to_draft()),
        expected,
    }
}

/// A non-eligible type with valid data.
fn log_only(variant: u8) -> (&'static str, Value) {
    match variant % 4 {
        0 => ("turn/start", parse(r#"{"turn":99}"#)),
        1 => ("todo/write", parse(r#"{"todos":[]}"#)),
        2 => ("x-plugin/event", Value::Null),
        _ => (
            "tool/call",
            parse(r#"{"turn":1,"step":1,"callId":"c","name":"bash","arguments":"{}"}"#),
        ),
    }
}

/// An invalid surfaceOp that is not an object: `"invalid"`, `null`, an array, …
fn bad_op(variant: u8) -> Value {
    match variant % 6 {
        0 => s("invalid"),
        1 => Value::Null,
        2 => parse("[]"),
        3 => Value::from(5u8),
        4 => Value::Bool(true),
        _ => s("replace"),
    }
}

/// A replace object with a bad shape: `start: -1`, a wrong `op`, missing or extra keys, …
fn bad_replace(variant: u8, seq: u64) -> Value {
    match variant % 7 {
        0 => parse(&format!(r#"{{"op":"replace","start":-1,"end":{seq}}}"#)),
        1 => parse(r#"{"op":"replace","start":0,"end":-1}"#),
        2 => parse(r#"{"op":"splice","start":0,"end":0}"#),
        3 => parse(r#"{"op":"replace","start":0}"#),
        4 => parse(r#"{"op":"replace","start":0,"end":0,"extra":1}"#),
        5 => parse(r#"{"op":"replace","start":0.5,"end":1}"#),
        _ => parse(r#"{"op":"replace","start":"0","end":0}"#),
    }
}

/// A payload holding a number a live append must refuse.
fn bad_number_data(variant: u8, base: &Value) -> Value {
    let bad = match variant % 6 {
        0 => "-0",
        1 => "9007199254740992",
        2 => "-9007199254740993",
        3 => "123456789012345678901234567890",
        4 => "1e400",
        _ => "-0.0",
    };
    let nested = parse(&format!(r#"{{"a":[1,{{"b":{bad}}}]}}"#));
    match base.as_object() {
        Some(o) => Value::Object(o.with("meta", nested)),
        None => nested,
    }
}

fn make(b: &mut Builder, spec: &MutationSpec) -> Made {
    let seq = b.seq();
    let len = b.records.len();
    let nodes = b.nodes.clone();
    let kind = spec.kind % KINDS;
    match kind {
        0 if len > 0 => {
            let index = spec.a % len;
            let wrong = if spec.variant.is_multiple_of(2) || index == 0 {
                index as u64 + 1 + (spec.b % 5) as u64
            } else {
                (spec.b % index) as u64
            };
            Made {
                mutation: Mutation::SeedSeq { index, seq: wrong },
                expected: format!(
                    "seed event at index {index} has seq {wrong} (expected {index}); seed must be contiguous from 0"
                ),
            }
        }
        1 if len > 0 => {
            let index = spec.a % len;
            let key = ["extra", "Seq", "surfaceop", "__proto__", "sessionId", ""]
                [usize::from(spec.variant) % 6]
                .to_owned();
            Made {
                mutation: Mutation::SeedExtraKey { index, key },
                expected: format!("seed event at index {index} has an invalid event envelope"),
            }
        }
        3 => {
            let ty = eligible(spec.variant);
            let data = message_data(b, ty);
            let mut r = Record::new(ty, data);
            r.surface_op = Some(bad_replace(spec.variant / 3, seq));
            append(
                &r,
                format!("session event \"{ty}\" carries an invalid replace surfaceOp"),
            )
        }
        4 if !nodes.is_empty() => {
            let ty = if spec.variant.is_multiple_of(2) {
                "user/message"
            } else {
                "assistant/message"
            };
            let i = spec.a % nodes.len();
            let j = i + spec.b % (nodes.len() - i).min(6);
            let covered = &nodes[i..=j];
            // Drop at least one covered seq: a bit mask over the range, never all kept.
            let mask = spec.b / 7;
            let mut kept: Vec<u64> = covered
                .iter()
                .enumerate()
                .filter(|(k, _)| (mask >> k) & 1 == 1)
                .map(|(_, n)| *n)
                .collect();
            if kept.len() == covered.len() {
                kept.remove(spec.a % kept.len());
            }
            let missing: Vec<u64> = covered
                .iter()
                .copied()
                .filter(|n| !kept.contains(n))
                .collect();
            let mut sources = kept;
            sources.extend(b.earlier(&[spec.a, spec.b], covered));
            let data = message_data(b, ty);
            let mut r = Record::new(ty, data).replace(nodes[i], nodes[j]);
            if !sources.is_empty() {
                r = r.sources(&sources);
            } else if ty == "assistant/message" && spec.variant % 4 == 1 {
                r = r.sources(&[]);
            }
            append(
                &r,
                format!(
                    "surface replace: sourceEventSeqs must include every shadowed surface node; missing {}",
                    join(&missing)
                ),
            )
        }
        5 => illegal_rewrite(b, spec).unwrap_or_else(|| fallback(b, spec)),
        6 | 7 => {
            let (ty, base) = match spec.variant % 4 {
                0 => ("user/message", message_data(b, "user/message")),
                1 => ("x-plugin/event", Value::Null),
                2 => ("todo/write", parse(r#"{"todos":[]}"#)),
                _ => ("turn/start", parse(r#"{"turn":1}"#)),
            };
            let data = bad_number_data(spec.variant / 4 + u8::from(kind == 7), &base);
            let mut r = Record::new(ty, data);
            if ty == "user/message" {
                r = r.append();
            }
            append(
                &r,
                format!("session event \"{ty}\" carries non-JSON-serializable data"),
            )
        }
        8 => {
            let ty = eligible(spec.variant);
            let data = message_data(b, ty);
            let mut r = Record::new(ty, data).append();
            match spec.variant % 3 {
                0 => {
                    r.surface_op = Some(parse(
                        r#"{"op":"replace","start":9007199254740992,"end":0}"#,
                    ));
                }
                1 => r.sources = Some(parse("[-0]")),
                _ => r.sources = Some(parse("[1e400]")),
            }
            append(
                &r,
                format!("session event \"{ty}\" carries non-JSON-serializable surface metadata"),
            )
        }
        9 => {
            let ty = eligible(spec.variant);
            let data = message_data(b, ty);
            let bad = seq + (spec.b % 3) as u64;
            let mut sources = b.earlier(&[spec.a], &[]);
            sources.push(bad);
            let r = Record::new(ty, data).append().sources(&sources);
            append(
                &r,
                format!(
                    "sourceEventSeqs must reference earlier events: {bad} >= current seq {seq}"
                ),
            )
        }
        10 => {
            let ty = eligible(spec.variant);
            let data = message_data(b, ty);
            let x = if seq == 0 { 0 } else { (spec.a as u64) % seq };
            let r = Record::new(ty, data).append().sources(&[x, x]);
            append(&r, "sourceEventSeqs must not contain duplicates".to_owned())
        }
        11 => {
            let (ty, data) = log_only(spec.variant);
            let mut r = Record::new(ty, data);
            if spec.variant % 8 < 4 {
                r = r.append();
                if spec.variant.is_multiple_of(2) {
                    r = r.sources(&[]);
                }
                append(
                    &r,
                    format!(
                        "session event \"{ty}\" is not surface-eligible and cannot carry surfaceOp"
                    ),
                )
            } else {
                r.sources = Some(if spec.variant.is_multiple_of(2) {
                    parse("[0]")
                } else {
                    Value::Null
                });
                append(
                    &r,
                    format!(
                        "session event \"{ty}\" is not surface-eligible and cannot carry sourceEventSeqs"
                    ),
                )
            }
        }
        12 => {
            let ty = eligible(spec.variant);
            let data = message_data(b, ty);
            let r = Record::new(ty, data);
            append(
                &r,
                format!(
                    "session event \"{ty}\" is surface-eligible and requires a surfaceOp marker"
                ),
            )
        }
        13 => {
            // A start (or end) that is not a current surface node.
            let off: Vec<u64> = (0..=seq + 2).filter(|n| !nodes.contains(n)).collect();
            let missing_seq = off[spec.a % off.len()];
            let ty = if spec.variant.is_multiple_of(2) {
                "user/message"
            } else {
                "assistant/message"
            };
            let data = message_data(b, ty);
            if nodes.is_empty() || spec.variant % 4 < 2 {
                let end = nodes.get(spec.b % nodes.len().max(1)).copied().unwrap_or(0);
                let r = Record::new(ty, data).replace(missing_seq, end);
                append(
                    &r,
                    format!("surface replace: start seq {missing_seq} not found in surface"),
                )
            } else {
                let start = nodes[spec.b % nodes.len()];
                let r = Record::new(ty, data).replace(start, missing_seq);
                append(
                    &r,
                    format!("surface replace: end seq {missing_seq} not found in surface"),
                )
            }
        }
        14 if nodes.len() >= 2 => {
            let j = spec.a % (nodes.len() - 1);
            let i = j + 1 + spec.b % (nodes.len() - j - 1);
            let ty = eligible(spec.variant % 2);
            let data = message_data(b, ty);
            let r = Record::new(ty, data)
                .replace(nodes[i], nodes[j])
                .sources(&nodes[j..=i]);
            append(
                &r,
                format!(
                    "surface replace: start seq {} (index {i}) is after end seq {} (index {j})",
                    nodes[i], nodes[j]
                ),
            )
        }
        15 => {
            if spec.variant.is_multiple_of(2) {
                append(
                    &Record::new("request/header-delta", parse(r#"{"config":{}}"#)),
                    "session event \"request/header-delta\" uses unsupported legacy request/header-delta format"
                        .to_owned(),
                )
            } else {
                append(
                    &Record::new(
                        "request/header",
                        parse(r#"{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}"#),
                    ),
                    "session event \"request/header\" uses unsupported legacy request/header reason \"fallback\""
                        .to_owned(),
                )
            }
        }
        16 => {
            let ty = eligible(spec.variant);
            let data = message_data(b, ty);
            let mut r = Record::new(ty, data).append();
            let expected = match spec.variant % 4 {
                0 => {
                    r.sources = Some(s("0"));
                    format!("sourceEventSeqs on event at seq {seq} must be an array when present")
                }
                1 => {
                    r.sources = Some(parse("[0.5]"));
                    format!(
                        "session event \"{ty}\" sourceEventSeqs must densely contain non-negative safe integers"
                    )
                }
                2 if ty != "assistant/message" => {
                    r.sources = Some(parse("[]"));
                    "sourceEventSeqs must not be empty except on assistant/message".to_owned()
                }
                _ => {
                    r.sources = Some(parse("[-1]"));
                    format!(
                        "session event \"{ty}\" sourceEventSeqs must densely contain non-negative safe integers"
                    )
                }
            };
            append(&r, expected)
        }
        17 => {
            let ty = [
                "context/message",
                "future/thing",
                "turn/pause",
                "x-newer/event",
            ][usize::from(spec.variant) % 4];
            let zstd = spec.variant / 4 % 2 == 1;
            // Earlier plugin events of unknown types are appended as ignorable: the read path
            // names the planted one.
            let (first_ty, first_seq) = (ty.to_owned(), seq);
            let file = if zstd {
                "session.jsonl.zstd"
            } else {
                "session.jsonl"
            };
            Made {
                mutation: Mutation::StoredUnknownType {
                    ty: ty.to_owned(),
                    zstd,
                },
                expected: format!(
                    "session \"{id}\" contains event type \"{first_ty}\" (seq {first_seq}) unknown to this harness and not marked ignorable; refusing to interpret the log \u{2014} it was likely written by a newer harness (raw log: <root>/--conformance-invalid--/{id}/{file})",
                    id = super::INVALID_CASE_ID
                ),
            }
        }
        _ => fallback(b, spec),
    }
}

/// An invalid non-object `surfaceOp` (needs no state).
fn fallback(b: &mut Builder, spec: &MutationSpec) -> Made {
    let ty = eligible(spec.variant);
    let data = message_data(b, ty);
    let mut r = Record::new(ty, data);
    r.surface_op = Some(bad_op(spec.variant / 3));
    append(
        &r,
        format!("session event \"{ty}\" carries an invalid surfaceOp"),
    )
}

/// A tool-result rewrite that breaks the narrowing rules.
fn illegal_rewrite(b: &mut Builder, spec: &MutationSpec) -> Option<Made> {
    let nodes = b.nodes.clone();
    let results = b.tool_result_nodes();
    match spec.variant % 3 {
        0 if nodes.len() >= 2 => {
            let i = spec.a % (nodes.len() - 1);
            let j = i + 1 + spec.b % (nodes.len() - i - 1);
            let data = match results.first() {
                Some(t) => b.rewritten(*t, "two")?,
                None => message_data(b, "tool/result"),
            };
            let r = Record::new("tool/result", data)
                .replace(nodes[i], nodes[j])
                .sources(&nodes[i..=j]);
            Some(append(
                &r,
                "tool/result surface replacement must rewrite exactly one current node".to_owned(),
            ))
        }
        1 => {
            let others: Vec<u64> = nodes
                .iter()
                .copied()
                .filter(|n| !results.contains(n))
                .collect();
            if others.is_empty() {
                return None;
            }
            let target = others[spec.a % others.len()];
            let data = message_data(b, "tool/result");
            let r = Record::new("tool/result", data)
                .replace(target, target)
                .sources(&[target]);
            Some(append(
                &r,
                "tool/result surface replacement must target a current tool/result".to_owned(),
            ))
        }
        2 if !results.is_empty() => {
            let target = results[spec.a % results.len()];
            let data = b.rewritten(target, "changed")?;
            let data = change_other_than_content(&data, spec.b)?;
            let r = Record::new("tool/result", data)
                .replace(target, target)
                .sources(&[target]);
            Some(append(
                &r,
                "tool/result surface replacement may change only content".to_owned(),
            ))
        }
        _ => None,
    }
}

/// `data` of a tool result with one field other than `content[0].content` changed.
fn change_other_than_content(data: &Value, pick: usize) -> Option<Value> {
    let d = data.as_object()?;
    let message = d.get("message")?.as_object()?;
    let block = message.get("content")?.as_array()?.first()?.as_object()?;
    let with_message =
        |m: session_core::json::Object| Value::Object(d.with("message", Value::Object(m)));
    let with_block = |blk: session_core::json::Object| {
        with_message(message.with("content", Value::array([Value::Object(blk)])))
    };
    let bump = |v: Option<&Value>| seq_value(v.and_then(Value::as_u64).unwrap_or(0) + 1);
    Some(match pick % 7 {
        0 => Value::Object(d.with("turn", bump(d.get("turn")))),
        1 => Value::Object(d.with("step", bump(d.get("step")))),
        2 => with_message(message.with("id", s("another-id"))),
        3 => Value::Object(d.with("meta", parse(r#"{"changed":true}"#))),
        4 => {
            if block.contains_key("isError") {
                with_block(block.without("isError"))
            } else {
                with_block(block.with("isError", Value::Bool(false)))
            }
        }
        5 => Value::Object(d.with("error", parse(r#"{"name":"OtherError","code":"OTHER"}"#))),
        _ => {
            // Both ids change together, so the message shape stays valid.
            let source = message
                .get("source")?
                .as_object()?
                .with("callId", s("other-call"));
            let blk = block.with("toolCallId", s("other-call"));
            with_message(
                message
                    .with("source", Value::Object(source))
                    .with("content", Value::array([Value::Object(blk)])),
            )
        }
    })
}

/// Random invalid cases: a valid history, a mutation that must be refused, and its exact
/// error text. Covers seq gaps and unknown envelope keys in seeds, bad `surfaceOp` values
/// (`"invalid"`, `start: -1`, …), replaces whose sources do not cover their range, illegal
/// tool-result rewrites, `-0` and unsafe integers in data or surface metadata, bad
/// `sourceEventSeqs`, surface metadata on log-only types, missing markers, ranges not on the
/// surface or reversed, and the legacy header shapes.
pub fn arb_invalid_case() -> impl Strategy<Value = InvalidCase> {
    (
        vec(arb_action(), 0..30),
        (0u8..KINDS, any::<usize>(), any::<usize>(), any::<u8>()),
    )
        .prop_map(|(actions, (kind, a, b, variant))| {
            let mut builder = Builder::run(&actions);
            let setup_len = builder.records.len();
            let made = make(
                &mut builder,
                &MutationSpec {
                    kind,
                    a,
                    b,
                    variant,
                },
            );
            debug_assert_eq!(setup_len, builder.records.len());
            InvalidCase {
                setup: builder.finish(super::INVALID_CASE_ID),
                mutation: made.mutation,
                expected_error: made.expected,
            }
        })
}

/// The events of `session` as seed values (for tests that alter them).
pub fn seed_values(session: &Session) -> Vec<Value> {
    session.events().iter().map(Event::to_value).collect()
}
