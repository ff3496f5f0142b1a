//! The packed chunk-row storage codec.
//!
//! Model providers stream token-sized deltas, so a log holds long runs of nearly identical
//! `assistant/chunk` events whose envelopes dwarf their payloads. On disk, each run of at least
//! [`MIN_RUN`] consecutive same-kind, same-block delta events is written as one *packed row*
//! (`text-chunks`, `reasoning-chunks` or `tool-call-chunks`), and decoding expands the row back
//! into the exact original events. Packed rows are a storage encoding only: they never appear
//! in a session's log.
//!
//! The encoder accepts only shapes it fully recognizes (see [`is_packable`]); every other
//! event is written unchanged, so an unknown field or a future chunk variant loses compression,
//! never data. The decoder validates a row-tagged record completely before expanding it and
//! reports the first problem as `malformed <tag> storage row: <why>`.
//!
//! ```
//! use session_core::{Event, chunk_rows, json::Value};
//!
//! let chunk = |seq: u64, text: &str| {
//!     let data = Value::parse(&format!(
//!         r#"{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}"#
//!     ))
//!     .unwrap();
//!     Event::appended("assistant/chunk", seq, 1000 + seq as i64, data, None, None)
//! };
//! let events = [chunk(0, "a"), chunk(1, "b"), chunk(2, "c")];
//! let mut line = String::new();
//! chunk_rows::write_batch_lines(&events, true, &mut line);
//! assert_eq!(
//!     line,
//!     r#"{"type":"text-chunks","seq0":0,"time0":1000,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}"#
//! );
//! match chunk_rows::decode_storage_record(Value::parse(&line)?)? {
//!     chunk_rows::Decoded::Expanded(members) => assert_eq!(members, events),
//!     chunk_rows::Decoded::Passthrough(_) => unreachable!(),
//! }
//! # Ok::<(), session_core::Error>(())
//! ```

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::event::compact::{DeltaKind, DeltaMeta, EventSink};
use crate::event::int_value;
use crate::json::{self, Array, MAX_SAFE_INTEGER, Number, Object, Value};
use crate::{Error, Event, Result};

/// The three packed-row type tags.
pub const ROW_TAGS: [&str; 3] = ["text-chunks", "reasoning-chunks", "tool-call-chunks"];

/// The minimum number of members before a run is packed.
pub const MIN_RUN: usize = 3;

/// The most members one bounded packed row may hold ([`pack_chunk_runs_limited`] with the
/// `SQLite` backend's limits).
pub const MAX_PACKED_ROW_MEMBERS: usize = 1_024;

/// The most UTF-8 bytes the `data` JSON of one bounded packed row may take (`SQLite` backend).
pub const MAX_PACKED_DATA_BYTES: usize = 1_048_576;

/// The event type of every packable event and of every expanded member.
pub const CHUNK_EVENT_TYPE: &str = "assistant/chunk";

/// Whether `ty` is one of the [`ROW_TAGS`].
pub fn is_row_tag(ty: &str) -> bool {
    RowTag::from_name(ty).is_some()
}

/// The kind of a packed row, and of the delta chunks it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RowTag {
    /// `text-chunks`: `text-delta` chunks.
    TextChunks,
    /// `reasoning-chunks`: `reasoning-delta` chunks.
    ReasoningChunks,
    /// `tool-call-chunks`: `tool-call-delta` chunks.
    ToolCallChunks,
}

impl RowTag {
    /// The tag for a row type name.
    pub fn from_name(name: &str) -> Option<RowTag> {
        match name {
            "text-chunks" => Some(RowTag::TextChunks),
            "reasoning-chunks" => Some(RowTag::ReasoningChunks),
            "tool-call-chunks" => Some(RowTag::ToolCallChunks),
            _ => None,
        }
    }

    /// The row type name, for example `"text-chunks"`.
    pub fn as_str(self) -> &'static str {
        ROW_TAGS[self as usize]
    }

    /// The `chunk.type` of the members: `text-delta`, `reasoning-delta` or `tool-call-delta`.
    pub fn chunk_type(self) -> &'static str {
        match self {
            RowTag::TextChunks => "text-delta",
            RowTag::ReasoningChunks => "reasoning-delta",
            RowTag::ToolCallChunks => "tool-call-delta",
        }
    }

    fn from_chunk_type(ty: &str) -> Option<RowTag> {
        match ty {
            "text-delta" => Some(RowTag::TextChunks),
            "reasoning-delta" => Some(RowTag::ReasoningChunks),
            "tool-call-delta" => Some(RowTag::ToolCallChunks),
            _ => None,
        }
    }

    fn is_tool(self) -> bool {
        self == RowTag::ToolCallChunks
    }

    fn delta_kind(self) -> DeltaKind {
        match self {
            RowTag::TextChunks => DeltaKind::Text,
            RowTag::ReasoningChunks => DeltaKind::Reasoning,
            RowTag::ToolCallChunks => DeltaKind::ToolCall,
        }
    }

    fn from_delta_kind(kind: DeltaKind) -> RowTag {
        match kind {
            DeltaKind::Text => RowTag::TextChunks,
            DeltaKind::Reasoning => RowTag::ReasoningChunks,
            DeltaKind::ToolCall => RowTag::ToolCallChunks,
        }
    }
}

impl fmt::Display for RowTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Shared key strings for building rows without a key-table lookup per row.
struct Shared {
    index: Arc<str>,
    id: Arc<str>,
    name: Arc<str>,
    turn: Arc<str>,
    step: Arc<str>,
    dt: Arc<str>,
    texts: Arc<str>,
    args: Arc<str>,
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| Shared {
        index: json::key("index"),
        id: json::key("id"),
        name: json::key("name"),
        turn: json::key("turn"),
        step: json::key("step"),
        dt: json::key("dt"),
        texts: json::key("texts"),
        args: json::key("args"),
    })
}

const MAX_SAFE: u64 = MAX_SAFE_INTEGER as u64;

fn is_safe_i64(v: i64) -> bool {
    v.unsigned_abs() <= MAX_SAFE
}

/// A packed run of consecutive delta chunk events: one storage row.
///
/// Layout: `{"type":<tag>,"seq0":…,"time0":…,"data":{…}}` where `data` is
/// `{turn, step, index, dt, texts}` for text and reasoning rows and
/// `{turn, step, index, dt, id, name?, args}` for tool-call rows. Member `k` is the event
/// `{type:"assistant/chunk", seq: seq0+k, time: time0 + dt[0] + … + dt[k-1], data:{turn, step,
/// chunk}}`.
///
/// A row is always valid: it is built by the packer, or read by [`PackedRow::from_value`],
/// which validates it. A row read back keeps its `data` object exactly as read.
#[derive(Clone)]
pub struct PackedRow {
    tag: RowTag,
    seq0: u64,
    time0: i64,
    data: Value,
    turn: Value,
    step: Value,
    index: Value,
    id: Value,
    name: Option<Value>,
    members: Array,
    /// The member times (time0 plus the running sum of the gaps).
    times: Box<[i64]>,
}

impl PackedRow {
    /// The row tag.
    pub fn tag(&self) -> RowTag {
        self.tag
    }

    /// The seq of the first member.
    pub fn seq0(&self) -> u64 {
        self.seq0
    }

    /// The time of the first member.
    pub fn time0(&self) -> i64 {
        self.time0
    }

    /// The row's `data` object.
    pub fn data(&self) -> &Value {
        &self.data
    }

    /// The number of events the row stands for.
    pub fn member_count(&self) -> usize {
        self.members.len()
    }

    /// The seq of the last member.
    pub fn last_seq(&self) -> u64 {
        self.seq0 + self.members.len().saturating_sub(1) as u64
    }

    /// Appends the row's JSON line (without newline), as the reference writes it.
    pub fn write_json(&self, out: &mut String) {
        out.push_str("{\"type\":\"");
        out.push_str(self.tag.as_str());
        out.push_str("\",\"seq0\":");
        crate::json::write_int(self.seq0, out);
        out.push_str(",\"time0\":");
        crate::json::write_int(self.time0, out);
        out.push_str(",\"data\":");
        self.data.write_json(out);
        out.push('}');
    }

    /// The row's JSON line (without newline).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(64 + 16 * self.members.len());
        self.write_json(&mut out);
        out
    }

    /// The row as a JSON object (`type, seq0, time0, data`).
    pub fn to_value(&self) -> Value {
        Value::object([
            ("type", Value::from(self.tag.as_str())),
            ("seq0", crate::event::seq_value(self.seq0)),
            ("time0", int_value(self.time0)),
            ("data", self.data.clone()),
        ])
    }

    /// The events the row stands for, in order. The members are stored compactly in one
    /// shared block; the `turn`, `step` and `index` numbers are shared with the row.
    pub fn expand(&self) -> Vec<Event> {
        let mut sink = EventSink::default();
        self.expand_into(&mut sink);
        sink.take()
    }

    /// Pushes the row's members into `sink`.
    fn expand_into(&self, sink: &mut EventSink) {
        sink.set_meta(DeltaMeta {
            kind: self.tag.delta_kind(),
            turn: self.turn.clone(),
            step: self.step.clone(),
            index: self.index.clone(),
            id: self.id.clone(),
            name: self.name.clone(),
            parsed_order: false,
        });
        for (k, (member, &time)) in self.members.iter().zip(self.times.iter()).enumerate() {
            sink.push_member(
                self.seq0 + k as u64,
                time,
                member.as_str().unwrap_or_default(),
            );
        }
    }

    /// Reads a storage record as a packed row.
    ///
    /// Returns `Ok(None)` when `v` is not a row: not an object, or an object whose `type` is
    /// not one of the [`ROW_TAGS`]. A row-tagged object is validated completely, in this order,
    /// and the first failure is reported as `malformed <tag> storage row: <why>`:
    /// 1. `envelope must be exactly {type, seq0, time0, data}`
    /// 2. `seq0 must be a non-negative safe integer`
    /// 3. `time0 must be a safe integer`
    /// 4. `data must be an object`
    /// 5. tool rows: `data must be exactly {turn, step, index, id, name?, dt, args}`, then
    ///    `id (and name when present) must be strings`; text and reasoning rows:
    ///    `data must be exactly {turn, step, index, dt, texts}`
    /// 6. `turn/step/index must be numbers`
    /// 7. `texts must be a non-empty string array` / `args must be a non-empty string array`
    /// 8. `dt must be an array of safe integers`
    /// 9. `dt length <d> does not match <n> members` ([`Error::MalformedRowArity`])
    /// 10. `member seqs must stay safe integers`
    /// 11. `member times must stay safe integers` (checked as the gaps are added)
    ///
    /// Key order inside the row does not matter. The member-seq bound is checked with exact
    /// integer arithmetic: unlike the reference's double arithmetic, a row whose last member
    /// seq would be exactly 2^53 is refused here rather than later.
    pub fn from_value(v: &Value) -> Result<Option<PackedRow>> {
        let Some(obj) = v.as_object() else {
            return Ok(None);
        };
        let Some(tag) = obj
            .get("type")
            .and_then(Value::as_str)
            .and_then(RowTag::from_name)
        else {
            return Ok(None);
        };
        validate_row(obj, tag).map(Some)
    }
}

fn malformed(tag: RowTag, why: &'static str) -> Error {
    Error::MalformedRow {
        tag: tag.as_str().to_owned(),
        why,
    }
}

const TOOL_KEYS_NAMED: [&str; 7] = ["turn", "step", "index", "id", "name", "dt", "args"];
const TOOL_KEYS: [&str; 6] = ["turn", "step", "index", "id", "dt", "args"];
const TEXT_KEYS: [&str; 5] = ["turn", "step", "index", "dt", "texts"];

fn validate_row(obj: &Object, tag: RowTag) -> Result<PackedRow> {
    if !obj.has_exactly_keys(&["type", "seq0", "time0", "data"]) {
        return Err(malformed(
            tag,
            "envelope must be exactly {type, seq0, time0, data}",
        ));
    }
    let seq0 = obj
        .get("seq0")
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed(tag, "seq0 must be a non-negative safe integer"))?;
    let time0 = obj
        .get("time0")
        .and_then(Value::as_i64)
        .ok_or_else(|| malformed(tag, "time0 must be a safe integer"))?;
    let data_value = obj.get("data").cloned().unwrap_or_default();
    // An array is an object to the reference's record test; it then fails the exact-keys test,
    // which an empty object reproduces.
    let no_keys = Object::default();
    let data = match &data_value {
        Value::Object(o) => o,
        Value::Array(_) => &no_keys,
        _ => return Err(malformed(tag, "data must be an object")),
    };
    let (id, name) = if tag.is_tool() {
        let named = data.has_exactly_keys(&TOOL_KEYS_NAMED);
        if !named && !data.has_exactly_keys(&TOOL_KEYS) {
            return Err(malformed(
                tag,
                "data must be exactly {turn, step, index, id, name?, dt, args}",
            ));
        }
        let id = data.get("id").filter(|v| v.as_str().is_some());
        let name = data.get("name").filter(|_| named);
        let name_ok = name.is_none_or(|n| n.as_str().is_some());
        let (Some(id), true) = (id, name_ok) else {
            return Err(malformed(tag, "id (and name when present) must be strings"));
        };
        (id.clone(), name.cloned())
    } else {
        if !data.has_exactly_keys(&TEXT_KEYS) {
            return Err(malformed(
                tag,
                "data must be exactly {turn, step, index, dt, texts}",
            ));
        }
        (Value::Null, None)
    };
    let number = |k: &str| data.get(k).filter(|v| v.as_number().is_some());
    let (Some(turn), Some(step), Some(index)) = (number("turn"), number("step"), number("index"))
    else {
        return Err(malformed(tag, "turn/step/index must be numbers"));
    };
    let members = match data.get(if tag.is_tool() { "args" } else { "texts" }) {
        Some(Value::Array(items))
            if !items.is_empty() && items.iter().all(|m| matches!(m, Value::String(_))) =>
        {
            items.clone()
        }
        _ => {
            return Err(malformed(
                tag,
                if tag.is_tool() {
                    "args must be a non-empty string array"
                } else {
                    "texts must be a non-empty string array"
                },
            ));
        }
    };
    let dt = match data.get("dt") {
        Some(Value::Array(items)) if items.iter().all(|g| g.as_i64().is_some()) => items,
        _ => return Err(malformed(tag, "dt must be an array of safe integers")),
    };
    if dt.len() + 1 != members.len() {
        return Err(Error::MalformedRowArity {
            tag: tag.as_str().to_owned(),
            dt_len: dt.len(),
            members: members.len(),
        });
    }
    if seq0 + (members.len() as u64 - 1) > MAX_SAFE {
        return Err(malformed(tag, "member seqs must stay safe integers"));
    }
    let mut times = Vec::with_capacity(members.len());
    times.push(time0);
    let mut time = time0;
    for gap in dt.iter() {
        // Both operands are safe integers, so the sum cannot overflow an i64.
        time += gap.as_i64().unwrap_or(0);
        if !is_safe_i64(time) {
            return Err(malformed(tag, "member times must stay safe integers"));
        }
        times.push(time);
    }
    Ok(PackedRow {
        tag,
        seq0,
        time0,
        turn: turn.clone(),
        step: step.clone(),
        index: index.clone(),
        id,
        name,
        members,
        times: times.into_boxed_slice(),
        data: data_value,
    })
}

impl fmt::Debug for PackedRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl PartialEq for PackedRow {
    /// Equal when the rows serialize identically.
    fn eq(&self, other: &PackedRow) -> bool {
        self.tag == other.tag
            && self.seq0 == other.seq0
            && self.time0 == other.time0
            && self.data == other.data
    }
}

/// One record of an append batch as stored: an event verbatim, or a packed row.
#[derive(Debug, Clone, PartialEq)]
pub enum StorageRecord {
    /// An event written unchanged.
    Event(Event),
    /// A packed run of delta chunk events.
    Row(PackedRow),
}

impl StorageRecord {
    /// Appends the record's JSON line (without newline).
    pub fn write_json(&self, out: &mut String) {
        match self {
            StorageRecord::Event(e) => e.write_json(out),
            StorageRecord::Row(r) => r.write_json(out),
        }
    }

    /// The record's JSON line (without newline).
    pub fn to_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    /// The number of events the record stands for.
    pub fn event_count(&self) -> usize {
        match self {
            StorageRecord::Event(_) => 1,
            StorageRecord::Row(r) => r.member_count(),
        }
    }

    /// The seq of the first event the record stands for.
    pub fn first_seq(&self) -> u64 {
        match self {
            StorageRecord::Event(e) => e.seq(),
            StorageRecord::Row(r) => r.seq0(),
        }
    }
}

/// The `id` of a text or reasoning delta, which has none.
static NO_ID: Value = Value::Null;

/// A packable event, seen through the fields the run rules read.
struct Delta<'a> {
    event: &'a Event,
    kind: RowTag,
    turn: &'a Value,
    step: &'a Value,
    index: &'a Value,
    payload: &'a str,
    /// The payload as a string value, when the event holds one (shared by the row).
    payload_value: Option<&'a Value>,
    id: &'a Value,
    name: Option<&'a Value>,
}

/// Whether the encoder may pack `event` into a row (ignoring its neighbours).
///
/// Packable means all of: type `assistant/chunk`; no envelope keys besides `type, seq, time,
/// data` (no `surfaceOp`, `sourceEventSeqs` or `ignorable`); `seq` a non-negative safe integer
/// and `time` a safe integer; `data` exactly `{turn, step, chunk}` with numeric `turn` and
/// `step`; `chunk` an object with a numeric `index` that is either a `text-delta` /
/// `reasoning-delta` with exactly `{type, index, text}` and a string `text`, or a
/// `tool-call-delta` with exactly `{type, index, id, argumentsDelta}` or
/// `{type, index, id, name, argumentsDelta}`, all of `id`, `name` and `argumentsDelta` strings.
/// Key order does not matter; the expanded events use the canonical order.
pub fn is_packable(event: &Event) -> bool {
    classify(event).is_some()
}

/// The row tag and the delta text (`chunk.text` of a text or reasoning delta,
/// `chunk.argumentsDelta` of a tool-call delta) of a packable `event` (see [`is_packable`]);
/// `None` for any other event. A compact chunk member is read without building its `data`
/// tree (which it would keep: a pass over every chunk would hold one tree per chunk).
pub fn chunk_delta(event: &Event) -> Option<(RowTag, &str)> {
    classify(event).map(|d| (d.kind, d.payload))
}

fn classify(event: &Event) -> Option<Delta<'_>> {
    if let Some((block, k)) = event.as_member() {
        // Compact members are delta chunks with canonical data by construction.
        let meta = block.meta(k);
        return Some(Delta {
            event,
            kind: RowTag::from_delta_kind(meta.kind),
            turn: &meta.turn,
            step: &meta.step,
            index: &meta.index,
            payload: block.text(k),
            payload_value: None,
            id: &meta.id,
            name: meta.name.as_ref(),
        });
    }
    if event.event_type() != CHUNK_EVENT_TYPE
        || event.surface_op_value().is_some()
        || event.source_event_seqs_value().is_some()
        || event.ignorable()
        || event.seq() > MAX_SAFE
        || !is_safe_i64(event.time())
    {
        return None;
    }
    let data = event.data().as_object()?;
    if !data.has_exactly_keys(&["turn", "step", "chunk"]) {
        return None;
    }
    let turn = data.get("turn").filter(|v| v.as_number().is_some())?;
    let step = data.get("step").filter(|v| v.as_number().is_some())?;
    let chunk = data.get("chunk")?.as_object()?;
    let index = chunk.get("index").filter(|v| v.as_number().is_some())?;
    let kind = RowTag::from_chunk_type(chunk.get("type")?.as_str()?)?;
    let is_str = |v: &&Value| v.as_str().is_some();
    let (payload, id, name) = if kind.is_tool() {
        let named = chunk.has_exactly_keys(&["type", "index", "id", "name", "argumentsDelta"]);
        if !named && !chunk.has_exactly_keys(&["type", "index", "id", "argumentsDelta"]) {
            return None;
        }
        let name = if named {
            Some(chunk.get("name").filter(is_str)?)
        } else {
            None
        };
        let id = chunk.get("id").filter(is_str)?;
        (chunk.get("argumentsDelta").filter(is_str)?, id, name)
    } else {
        if !chunk.has_exactly_keys(&["type", "index", "text"]) {
            return None;
        }
        (chunk.get("text").filter(is_str)?, &NO_ID, None)
    };
    Some(Delta {
        event,
        kind,
        turn,
        step,
        index,
        payload: payload.as_str().unwrap_or_default(),
        payload_value: Some(payload),
        id,
        name,
    })
}

/// `a === b` for two numbers, additionally requiring the same spelling so that every member
/// expands to exactly the bytes it was packed from (numbers read from disk keep their text).
fn same_number(a: &Value, b: &Value) -> bool {
    match (a.as_number(), b.as_number()) {
        (Some(x), Some(y)) => {
            if !x.is_verbatim() && !y.is_verbatim() {
                return x == y;
            }
            spelled(x) == spelled(y)
        }
        _ => false,
    }
}

fn spelled(n: &Number) -> String {
    let mut s = String::new();
    n.write(&mut s);
    s
}

/// Whether `next` extends a run ending in `prev` (same kind already checked).
fn continues(prev: &Delta<'_>, next: &Delta<'_>) -> bool {
    if next.event.seq() != prev.event.seq() + 1 {
        return false;
    }
    // Both times are safe integers: the difference fits an i64 exactly.
    if !is_safe_i64(next.event.time() - prev.event.time()) {
        return false;
    }
    if !same_number(next.turn, prev.turn)
        || !same_number(next.step, prev.step)
        || !same_number(next.index, prev.index)
    {
        return false;
    }
    if !next.kind.is_tool() {
        return true;
    }
    next.id.as_str() == prev.id.as_str()
        && match (prev.name, next.name) {
            (None, None) => true,
            (Some(a), Some(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
}

/// The row for a uniform run (`run.len() >= 1`).
fn build_row(run: &[Delta<'_>]) -> PackedRow {
    let s = shared();
    let first = &run[0];
    let times: Box<[i64]> = run.iter().map(|d| d.event.time()).collect();
    let dt: Vec<Value> = times.windows(2).map(|w| int_value(w[1] - w[0])).collect();
    let members = Array::new(
        run.iter()
            .map(|d| {
                d.payload_value
                    .cloned()
                    .unwrap_or_else(|| Value::from(d.payload))
            })
            .collect::<Vec<_>>(),
    );
    let mut entries: Vec<(Arc<str>, Value)> = Vec::with_capacity(7);
    entries.push((s.turn.clone(), first.turn.clone()));
    entries.push((s.step.clone(), first.step.clone()));
    entries.push((s.index.clone(), first.index.clone()));
    entries.push((s.dt.clone(), Value::Array(Array::new(dt))));
    if first.kind.is_tool() {
        entries.push((s.id.clone(), first.id.clone()));
        if let Some(name) = first.name {
            entries.push((s.name.clone(), name.clone()));
        }
        entries.push((s.args.clone(), Value::Array(members.clone())));
    } else {
        entries.push((s.texts.clone(), Value::Array(members.clone())));
    }
    PackedRow {
        tag: first.kind,
        seq0: first.event.seq(),
        time0: first.event.time(),
        data: Value::Object(Object::from_entries(entries)),
        turn: first.turn.clone(),
        step: first.step.clone(),
        index: first.index.clone(),
        id: first.id.clone(),
        name: first.name.cloned(),
        members,
        times,
    }
}

#[derive(Clone, Copy)]
struct Limits {
    max_members: usize,
    max_data_bytes: usize,
}

/// `packChunkRuns`: the storage records of one append batch.
///
/// Each maximal run of at least [`MIN_RUN`] packable events (see [`is_packable`]) that
/// continue one another becomes one [`PackedRow`]; every other event is passed through, in
/// order. A run continues while the kind is the same, `seq` is the previous seq plus 1, the
/// time gap is a safe integer, `turn`, `step` and `index` are the same (same value and same
/// spelling), and for tool calls the `id` is the same and `name` is absent on both or present
/// on both with the same value. There is no maximum run length. Pure and stateless: runs never
/// cross batch boundaries.
pub fn pack_chunk_runs(events: &[Event]) -> Vec<StorageRecord> {
    pack(events, None)
}

/// [`pack_chunk_runs`] with bounded rows (the `SQLite` backend's partition rule).
///
/// Each run is partitioned from its start: take `min(remaining, max_members)` members and emit
/// them as one row if the row's `data` JSON fits in `max_data_bytes` UTF-8 bytes; otherwise
/// emit the largest prefix of at least [`MIN_RUN`] members that fits (binary search), or, if
/// none fits, pass one event through and move on. Fewer than [`MIN_RUN`] remaining members are
/// passed through. A `max_members` below [`MIN_RUN`] counts as [`MIN_RUN`].
pub fn pack_chunk_runs_limited(
    events: &[Event],
    max_members: usize,
    max_data_bytes: usize,
) -> Vec<StorageRecord> {
    pack(
        events,
        Some(Limits {
            max_members: max_members.max(MIN_RUN),
            max_data_bytes,
        }),
    )
}

fn pack(events: &[Event], limits: Option<Limits>) -> Vec<StorageRecord> {
    let mut out = Vec::with_capacity(events.len());
    let mut run: Vec<Delta<'_>> = Vec::new();
    for event in events {
        let Some(delta) = classify(event) else {
            flush(&mut run, limits, &mut out);
            out.push(StorageRecord::Event(event.clone()));
            continue;
        };
        if let Some(last) = run.last()
            && last.kind == delta.kind
            && continues(last, &delta)
        {
            run.push(delta);
            continue;
        }
        flush(&mut run, limits, &mut out);
        run.push(delta);
    }
    flush(&mut run, limits, &mut out);
    out
}

fn flush(run: &mut Vec<Delta<'_>>, limits: Option<Limits>, out: &mut Vec<StorageRecord>) {
    match limits {
        _ if run.len() < MIN_RUN => {
            out.extend(run.iter().map(|d| StorageRecord::Event(d.event.clone())));
        }
        None => out.push(StorageRecord::Row(build_row(run))),
        Some(limits) => emit_bounded(run, limits, out),
    }
    run.clear();
}

/// Exact byte sizes of the `data` JSON of any window of a run, in O(1) per window.
struct RunSizes {
    /// Size of the data object with empty `dt` and member arrays.
    fixed: usize,
    /// `members[i]` = total JSON length of payloads `0..i`.
    members: Vec<usize>,
    /// `gaps[i]` = total JSON length of the gaps into members `1..i` (gap j is
    /// `time[j] - time[j-1]`).
    gaps: Vec<usize>,
}

impl RunSizes {
    fn new(run: &[Delta<'_>]) -> RunSizes {
        // A one-member row has an empty `dt` and one member: the rest is the fixed part.
        let fixed = build_row(&run[..1]).data.to_json().len() - json_str_len(run[0].payload);
        let mut members = Vec::with_capacity(run.len() + 1);
        let mut gaps = Vec::with_capacity(run.len() + 1);
        members.push(0);
        gaps.push(0);
        gaps.push(0);
        for (i, d) in run.iter().enumerate() {
            let last = members[i];
            members.push(last + json_str_len(d.payload));
            if i > 0 {
                let gap = d.event.time() - run[i - 1].event.time();
                let last = gaps[i];
                gaps.push(last + int_len(gap));
            }
        }
        RunSizes {
            fixed,
            members,
            gaps,
        }
    }

    /// The UTF-8 length of the data JSON of the row of members `offset..offset + k` (k ≥ 1).
    fn size(&self, offset: usize, k: usize) -> usize {
        let payloads = self.members[offset + k] - self.members[offset];
        let gaps = self.gaps[offset + k] - self.gaps[offset + 1];
        // k - 1 commas between members, k - 2 between gaps.
        self.fixed + payloads + (k - 1) + gaps + k.saturating_sub(2)
    }
}

/// The length of `s` as a JSON string literal (`JSON.stringify` escaping, UTF-8 bytes).
fn json_str_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0x00..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The length of the decimal form of `v`.
fn int_len(v: i64) -> usize {
    let mut n = v.unsigned_abs();
    let mut len = usize::from(v < 0) + 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

fn emit_bounded(run: &[Delta<'_>], limits: Limits, out: &mut Vec<StorageRecord>) {
    let sizes = RunSizes::new(run);
    let fits = |offset: usize, k: usize| sizes.size(offset, k) <= limits.max_data_bytes;
    let mut offset = 0;
    while run.len() - offset >= MIN_RUN {
        let mut high = (run.len() - offset).min(limits.max_members);
        if fits(offset, high) {
            out.push(StorageRecord::Row(build_row(&run[offset..offset + high])));
            offset += high;
            continue;
        }
        high -= 1;
        let mut low = MIN_RUN;
        let mut accepted = 0;
        while low <= high {
            let middle = usize::midpoint(low, high);
            if fits(offset, middle) {
                accepted = middle;
                low = middle + 1;
            } else {
                high = middle - 1;
            }
        }
        if accepted == 0 {
            out.push(StorageRecord::Event(run[offset].event.clone()));
            offset += 1;
        } else {
            out.push(StorageRecord::Row(build_row(
                &run[offset..offset + accepted],
            )));
            offset += accepted;
        }
    }
    out.extend(
        run[offset..]
            .iter()
            .map(|d| StorageRecord::Event(d.event.clone())),
    );
}

/// Appends the lines of one append batch to `out`: each record ([`pack_chunk_runs`] when
/// `pack`, else each event) as one JSON line, joined by `\n`, with no trailing newline. This
/// is exactly what the JSONL writer writes for a batch before its final newline.
pub fn write_batch_lines(events: &[Event], pack: bool, out: &mut String) {
    if pack {
        for (i, record) in pack_chunk_runs(events).iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            record.write_json(out);
        }
    } else {
        for (i, event) in events.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            event.write_json(out);
        }
    }
}

/// What one stored record decodes to.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// Not a packed row: the value, unvalidated, to be read as one event.
    Passthrough(Value),
    /// A packed row's member events, in order.
    Expanded(Vec<Event>),
}

/// `decodeStorageRecord`: decodes one parsed storage line.
///
/// A value that is not an object, or an object whose `type` is not one of the [`ROW_TAGS`],
/// is passed through unvalidated. A row-tagged object is validated (see
/// [`PackedRow::from_value`] for the checks and messages) and expanded.
pub fn decode_storage_record(v: Value) -> Result<Decoded> {
    match PackedRow::from_value(&v)? {
        Some(row) => Ok(Decoded::Expanded(row.expand())),
        None => Ok(Decoded::Passthrough(v)),
    }
}

mod decoder;

pub use decoder::{LineRecord, StorageDecoder};

#[cfg(test)]
mod tests;
