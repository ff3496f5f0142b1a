//! The event envelope, its vocabulary and its serialized form.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::Error;
use crate::json::{self, Value};

pub(crate) mod compact;

use self::compact::ChunkBlock;

/// The three surface-eligible event types: the only events that can become model messages.
pub const SURFACE_EVENT_TYPES: [&str; 3] = ["user/message", "assistant/message", "tool/result"];

/// Every event type known to the reference at `dsh-0.1.1-rc.2` (48 types). Readers refuse a
/// stored event whose type is outside this set unless it carries `ignorable: true`.
pub const KNOWN_EVENT_TYPES: [&str; 48] = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
];

/// The type of the marker a session appends after its construction seed.
pub const END_SEED: &str = "session/end-seed";

/// Whether `ty` is one of [`SURFACE_EVENT_TYPES`].
pub fn is_surface_eligible_type(ty: &str) -> bool {
    SURFACE_EVENT_TYPES.contains(&ty)
}

/// Whether `ty` is one of [`KNOWN_EVENT_TYPES`].
pub fn is_known_event_type(ty: &str) -> bool {
    KNOWN_EVENT_TYPES.binary_search(&ty).is_ok()
}

/// How a surface event entered the surface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    /// Pushed at the end of the surface.
    Append,
    /// Replaced the surface range from `start` to `end` (inclusive, by surface position).
    Replace {
        /// Seq of the first replaced surface node.
        start: u64,
        /// Seq of the last replaced surface node.
        end: u64,
    },
}

/// Why a `surfaceOp` value is not acceptable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOpError {
    /// Not `"append"` and not an object (for example a string, `null` or an array).
    Invalid,
    /// An object that is not exactly `{op:"replace", start, end}` with non-negative safe
    /// integer bounds.
    InvalidReplace,
}

impl SurfaceOp {
    /// Reads a `surfaceOp` value.
    pub fn from_value(v: &Value) -> Result<SurfaceOp, SurfaceOpError> {
        match v {
            Value::String(s) if &**s == "append" => Ok(SurfaceOp::Append),
            Value::Object(o) => {
                if !o.has_exactly_keys(&["op", "start", "end"])
                    || o.get("op").and_then(Value::as_str) != Some("replace")
                {
                    return Err(SurfaceOpError::InvalidReplace);
                }
                match (
                    o.get("start").and_then(Value::as_u64),
                    o.get("end").and_then(Value::as_u64),
                ) {
                    (Some(start), Some(end)) => Ok(SurfaceOp::Replace { start, end }),
                    _ => Err(SurfaceOpError::InvalidReplace),
                }
            }
            _ => Err(SurfaceOpError::Invalid),
        }
    }

    /// The JSON form: `"append"` or `{"op":"replace","start":S,"end":E}`.
    pub fn to_value(self) -> Value {
        match self {
            SurfaceOp::Append => Value::from("append"),
            SurfaceOp::Replace { start, end } => Value::object([
                ("op", Value::from("replace")),
                ("start", seq_value(start)),
                ("end", seq_value(end)),
            ]),
        }
    }
}

/// A seq or other non-negative safe integer as a JSON number.
pub fn seq_value(n: u64) -> Value {
    Value::Number(json::Number::from_u64(n).unwrap_or_else(|| {
        json::Number::from_f64(n as f64).unwrap_or_else(|| json::Number::from(0u8))
    }))
}

/// A time or other safe integer as a JSON number.
pub fn int_value(n: i64) -> Value {
    Value::Number(json::Number::from_i64(n).unwrap_or_else(|| {
        json::Number::from_f64(n as f64).unwrap_or_else(|| json::Number::from(0u8))
    }))
}

/// The envelope keys, in the order they are serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum EnvKey {
    Type = 0,
    Seq = 1,
    Time = 2,
    Data = 3,
    SurfaceOp = 4,
    SourceEventSeqs = 5,
    Ignorable = 6,
}

impl EnvKey {
    fn from_name(name: &str) -> Option<EnvKey> {
        Some(match name {
            "type" => EnvKey::Type,
            "seq" => EnvKey::Seq,
            "time" => EnvKey::Time,
            "data" => EnvKey::Data,
            "surfaceOp" => EnvKey::SurfaceOp,
            "sourceEventSeqs" => EnvKey::SourceEventSeqs,
            "ignorable" => EnvKey::Ignorable,
            _ => return None,
        })
    }

    fn from_u8(n: u8) -> EnvKey {
        match n {
            0 => EnvKey::Type,
            1 => EnvKey::Seq,
            2 => EnvKey::Time,
            3 => EnvKey::Data,
            4 => EnvKey::SurfaceOp,
            5 => EnvKey::SourceEventSeqs,
            _ => EnvKey::Ignorable,
        }
    }
}

/// The order of the envelope keys when an event is serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyOrder {
    keys: [u8; 7],
    len: u8,
}

impl KeyOrder {
    /// `type, seq, time, data, sourceEventSeqs?, surfaceOp?, ignorable?`: events built by a
    /// live `append`.
    pub const APPEND: KeyOrder = KeyOrder {
        keys: [0, 1, 2, 3, 5, 4, 6],
        len: 7,
    };
    /// `type, seq, time, data, surfaceOp?, sourceEventSeqs?, ignorable?`: crash-repair closers.
    pub const CLOSER: KeyOrder = KeyOrder {
        keys: [0, 1, 2, 3, 4, 5, 6],
        len: 7,
    };
    /// Exactly `type, seq, time, data`: the order of a stored line that has these four keys in
    /// this order.
    pub(crate) const PARSED: KeyOrder = KeyOrder {
        keys: [0, 1, 2, 3, 0, 0, 0],
        len: 4,
    };

    fn iter(self) -> impl Iterator<Item = EnvKey> {
        let keys = self.keys;
        (0..self.len as usize).map(move |i| EnvKey::from_u8(keys[i]))
    }
}

/// One accepted session event: immutable, shared, cheap to clone.
///
/// Its envelope is typed (`type`, `seq`, `time`, `ignorable`); `data` and the surface
/// metadata are kept as JSON values, and the envelope key order is remembered so that the
/// event serializes exactly as it was written (live appends and closers have fixed orders,
/// seeded events keep their input order).
///
/// An `Event` satisfies the envelope rules on its own (allowed keys, `seq` a non-negative safe
/// integer, `time` a safe integer, `ignorable` absent or `true`). Whether its surface metadata
/// is acceptable depends on its position in a log and is checked by the surface.
///
/// Streamed delta chunks read from storage are kept compactly (many events share one block;
/// see the `compact` module); their `data` tree is built on first use. This is invisible
/// through the API: every accessor, the serialized form, equality and identity behave the same
/// for both representations.
#[derive(Clone)]
pub struct Event(Repr);

#[derive(Clone)]
enum Repr {
    /// An event with its own envelope and `data` tree.
    Single(Arc<Inner>),
    /// Member `k` of a shared block of delta chunks.
    Member(Arc<ChunkBlock>, u32),
}

/// The type of every compact member.
const CHUNK_TYPE: &str = "assistant/chunk";

/// The shared `assistant/chunk` type string of compact members.
pub(crate) fn chunk_event_type() -> &'static Arc<str> {
    static TYPE: OnceLock<Arc<str>> = OnceLock::new();
    TYPE.get_or_init(|| Arc::from(CHUNK_TYPE))
}

struct Inner {
    ty: Arc<str>,
    seq: u64,
    time: i64,
    data: Value,
    surface_op: Option<Value>,
    source_event_seqs: Option<Sources>,
    ignorable: bool,
    order: KeyOrder,
}

/// A `sourceEventSeqs` value as stored.
enum Sources {
    /// Any value.
    Value(Value),
    /// A long array of consecutive-run seqs read from storage (a message citing its chunks),
    /// kept as runs; the array value is built on first use.
    Runs(Box<SeqRuns>),
}

impl Sources {
    fn value(&self) -> &Value {
        match self {
            Sources::Value(v) => v,
            Sources::Runs(r) => r.value(),
        }
    }
}

/// Runs of consecutive non-negative safe integers standing for an array of them.
struct SeqRuns {
    /// `(first, count)` of each run, in array order.
    runs: Box<[(u64, u64)]>,
    value: OnceLock<Value>,
}

/// Arrays shorter than this are kept as values.
const MIN_RUNS_ARRAY: usize = 16;

impl SeqRuns {
    /// The runs of `v` when it is an array worth compacting whose items are all non-negative
    /// safe integers in JavaScript spelling (so that writing the runs reproduces its text).
    fn from_value(v: &Value) -> Option<SeqRuns> {
        let items = v.as_array()?;
        if items.len() < MIN_RUNS_ARRAY {
            return None;
        }
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for item in items.iter() {
            let n = match item {
                Value::Number(n) if !n.is_verbatim() => n.as_u64()?,
                _ => return None,
            };
            match runs.last_mut() {
                Some((first, count)) if first.checked_add(*count) == Some(n) => *count += 1,
                _ => runs.push((n, 1)),
            }
        }
        (runs.len() * 4 <= items.len()).then(|| SeqRuns {
            runs: runs.into_boxed_slice(),
            value: OnceLock::new(),
        })
    }

    fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.runs
            .iter()
            .flat_map(|&(first, count)| (0..count).map(move |i| first + i))
    }

    fn value(&self) -> &Value {
        self.value
            .get_or_init(|| Value::array(self.iter().map(seq_value)))
    }

    fn write_json(&self, out: &mut String) {
        use std::fmt::Write as _;
        out.push('[');
        for (i, n) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{n}");
        }
        out.push(']');
    }
}

/// The parts of an event, for building one.
#[derive(Debug, Clone)]
pub struct EventParts {
    /// The event type.
    pub ty: Arc<str>,
    /// Position in the log.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub time: i64,
    /// The payload.
    pub data: Value,
    /// `surfaceOp`, when present.
    pub surface_op: Option<Value>,
    /// `sourceEventSeqs`, when present.
    pub source_event_seqs: Option<Value>,
    /// Whether `ignorable: true` is present.
    pub ignorable: bool,
}

impl Event {
    /// Builds an event serialized in `order`.
    pub fn from_parts(parts: EventParts, order: KeyOrder) -> Event {
        Event(Repr::Single(Arc::new(Inner {
            ty: parts.ty,
            seq: parts.seq,
            time: parts.time,
            data: parts.data,
            surface_op: parts.surface_op,
            source_event_seqs: parts.source_event_seqs.map(Sources::Value),
            ignorable: parts.ignorable,
            order,
        })))
    }

    /// Member `k` of a compact block.
    pub(crate) fn member(block: &Arc<ChunkBlock>, k: u32) -> Event {
        Event(Repr::Member(block.clone(), k))
    }

    /// The block and member index of a compact member.
    #[inline]
    pub(crate) fn as_member(&self) -> Option<(&ChunkBlock, u32)> {
        match &self.0 {
            Repr::Single(_) => None,
            Repr::Member(b, k) => Some((b, *k)),
        }
    }

    /// Builds an event the way a live `append` does (`sourceEventSeqs` before `surfaceOp`).
    pub fn appended(
        ty: impl Into<Arc<str>>,
        seq: u64,
        time: i64,
        data: Value,
        source_event_seqs: Option<Value>,
        surface_op: Option<Value>,
    ) -> Event {
        Event::from_parts(
            EventParts {
                ty: ty.into(),
                seq,
                time,
                data,
                surface_op,
                source_event_seqs,
                ignorable: false,
            },
            KeyOrder::APPEND,
        )
    }

    /// Reads an event from its JSON object, checking the envelope rules. The key order of the
    /// object is kept for serialization.
    pub fn from_value(v: &Value) -> Result<Event, Error> {
        let invalid = |reason: &'static str| Error::InvalidEnvelope { reason };
        let Some(obj) = v.as_object() else {
            return Err(invalid("not an object"));
        };
        let mut order = KeyOrder {
            keys: [0; 7],
            len: 0,
        };
        let mut ty = None;
        let mut seq = None;
        let mut time = None;
        let mut data = None;
        let mut surface_op = None;
        let mut source_event_seqs = None;
        let mut ignorable = false;
        for (k, value) in obj.iter() {
            let Some(key) = EnvKey::from_name(k) else {
                return Err(invalid("unknown envelope key"));
            };
            order.keys[order.len as usize] = key as u8;
            order.len += 1;
            match key {
                EnvKey::Type => ty = Some(value.as_arc_str().ok_or(invalid("type"))?.clone()),
                EnvKey::Seq => seq = Some(value.as_u64().ok_or(invalid("seq"))?),
                EnvKey::Time => time = Some(value.as_i64().ok_or(invalid("time"))?),
                EnvKey::Data => data = Some(value.clone()),
                EnvKey::SurfaceOp => surface_op = Some(value.clone()),
                EnvKey::SourceEventSeqs => source_event_seqs = Some(value.clone()),
                EnvKey::Ignorable => {
                    if value.as_bool() != Some(true) {
                        return Err(invalid("ignorable"));
                    }
                    ignorable = true;
                }
            }
        }
        let (Some(ty), Some(seq), Some(time), Some(data)) = (ty, seq, time, data) else {
            return Err(invalid("missing required key"));
        };
        let source_event_seqs = source_event_seqs.map(|v: Value| match SeqRuns::from_value(&v) {
            Some(runs) => Sources::Runs(Box::new(runs)),
            None => Sources::Value(v),
        });
        Ok(Event(Repr::Single(Arc::new(Inner {
            ty,
            seq,
            time,
            data,
            surface_op,
            source_event_seqs,
            ignorable,
            order,
        }))))
    }

    /// Parses one JSON line into an event (see [`Event::from_value`]).
    pub fn parse(text: &str) -> Result<Event, Error> {
        Event::from_value(&json::parse(text)?)
    }

    /// The event type, for example `"turn/start"`.
    #[inline]
    pub fn event_type(&self) -> &str {
        match &self.0 {
            Repr::Single(e) => &e.ty,
            Repr::Member(..) => CHUNK_TYPE,
        }
    }

    /// The shared event type string.
    #[inline]
    pub fn event_type_arc(&self) -> &Arc<str> {
        match &self.0 {
            Repr::Single(e) => &e.ty,
            Repr::Member(..) => chunk_event_type(),
        }
    }

    /// Position in the log (equal to the event's index).
    #[inline]
    pub fn seq(&self) -> u64 {
        match &self.0 {
            Repr::Single(e) => e.seq,
            Repr::Member(b, k) => b.seq(*k),
        }
    }

    /// Milliseconds since the Unix epoch; not monotonic.
    #[inline]
    pub fn time(&self) -> i64 {
        match &self.0 {
            Repr::Single(e) => e.time,
            Repr::Member(b, k) => b.time(*k),
        }
    }

    /// The payload.
    #[inline]
    pub fn data(&self) -> &Value {
        match &self.0 {
            Repr::Single(e) => &e.data,
            Repr::Member(b, k) => b.data(*k),
        }
    }

    #[inline]
    fn single(&self) -> Option<&Inner> {
        match &self.0 {
            Repr::Single(e) => Some(e),
            Repr::Member(..) => None,
        }
    }

    /// The raw `surfaceOp` value, when present.
    #[inline]
    pub fn surface_op_value(&self) -> Option<&Value> {
        self.single()?.surface_op.as_ref()
    }

    /// The raw `sourceEventSeqs` value, when present.
    #[inline]
    pub fn source_event_seqs_value(&self) -> Option<&Value> {
        self.single()?
            .source_event_seqs
            .as_ref()
            .map(Sources::value)
    }

    /// The parsed `surfaceOp`: `None` when absent or not acceptable.
    pub fn surface_op(&self) -> Option<SurfaceOp> {
        self.surface_op_value()
            .and_then(|v| SurfaceOp::from_value(v).ok())
    }

    /// The `sourceEventSeqs` as integers: `None` when absent or not an array of non-negative
    /// safe integers.
    pub fn source_event_seqs(&self) -> Option<Vec<u64>> {
        if let Some(Sources::Runs(runs)) = &self.single()?.source_event_seqs {
            return Some(runs.iter().collect());
        }
        self.source_event_seqs_value()?
            .as_array()?
            .iter()
            .map(Value::as_u64)
            .collect()
    }

    /// Whether `ignorable: true` is present.
    #[inline]
    pub fn ignorable(&self) -> bool {
        self.single().is_some_and(|e| e.ignorable)
    }

    /// The envelope key order used for serialization.
    pub fn key_order(&self) -> KeyOrder {
        match &self.0 {
            Repr::Single(e) => e.order,
            Repr::Member(b, k) => {
                if b.meta(*k).parsed_order {
                    KeyOrder::PARSED
                } else {
                    KeyOrder::APPEND
                }
            }
        }
    }

    /// `isSurfaceEvent`: an eligible type carrying a `surfaceOp`.
    #[inline]
    pub fn is_surface_event(&self) -> bool {
        self.single()
            .is_some_and(|e| e.surface_op.is_some() && is_surface_eligible_type(&e.ty))
    }

    /// `isAppendSurfaceEvent`: a surface event whose `surfaceOp` is `"append"`.
    pub fn is_append_surface_event(&self) -> bool {
        self.is_surface_event()
            && self
                .surface_op_value()
                .and_then(Value::as_str)
                .is_some_and(|s| s == "append")
    }

    /// `isReplacementSurfaceEvent`: a surface event whose `surfaceOp` is not `"append"`.
    pub fn is_replacement_surface_event(&self) -> bool {
        self.is_surface_event() && !self.is_append_surface_event()
    }

    /// Whether both handles point at the same stored event.
    pub fn ptr_eq(&self, other: &Event) -> bool {
        match (&self.0, &other.0) {
            (Repr::Single(a), Repr::Single(b)) => Arc::ptr_eq(a, b),
            (Repr::Member(a, i), Repr::Member(b, j)) => i == j && Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The envelope as a JSON object, in serialization order.
    pub fn to_value(&self) -> Value {
        let mut entries: Vec<(Arc<str>, Value)> = Vec::with_capacity(7);
        for key in self.key_order().iter() {
            let (name, value) = match key {
                EnvKey::Type => ("type", Value::String(self.event_type_arc().clone())),
                EnvKey::Seq => ("seq", seq_value(self.seq())),
                EnvKey::Time => ("time", int_value(self.time())),
                EnvKey::Data => ("data", self.data().clone()),
                EnvKey::SurfaceOp => match self.surface_op_value() {
                    Some(v) => ("surfaceOp", v.clone()),
                    None => continue,
                },
                EnvKey::SourceEventSeqs => match self.source_event_seqs_value() {
                    Some(v) => ("sourceEventSeqs", v.clone()),
                    None => continue,
                },
                EnvKey::Ignorable => {
                    if self.ignorable() {
                        ("ignorable", Value::Bool(true))
                    } else {
                        continue;
                    }
                }
            };
            entries.push((json::key(name), value));
        }
        Value::Object(json::Object::from_entries(entries))
    }

    /// Appends the compact JSON line (without newline) to `out`, byte-identical to what the
    /// reference writes for this event.
    pub fn write_json(&self, out: &mut String) {
        use std::fmt::Write as _;
        let e = match &self.0 {
            Repr::Single(e) => e,
            Repr::Member(b, k) => {
                b.write_json(*k, out);
                return;
            }
        };
        out.push('{');
        let mut first = true;
        for key in e.order.iter() {
            let sep = if first { "" } else { "," };
            match key {
                EnvKey::Type => {
                    out.push_str(sep);
                    out.push_str("\"type\":");
                    json::write_str(&e.ty, out);
                }
                EnvKey::Seq => {
                    out.push_str(sep);
                    let _ = write!(out, "\"seq\":{}", e.seq);
                }
                EnvKey::Time => {
                    out.push_str(sep);
                    let _ = write!(out, "\"time\":{}", e.time);
                }
                EnvKey::Data => {
                    out.push_str(sep);
                    out.push_str("\"data\":");
                    e.data.write_json(out);
                }
                EnvKey::SurfaceOp => {
                    let Some(v) = &e.surface_op else {
                        continue;
                    };
                    out.push_str(sep);
                    out.push_str("\"surfaceOp\":");
                    v.write_json(out);
                }
                EnvKey::SourceEventSeqs => {
                    let Some(v) = &e.source_event_seqs else {
                        continue;
                    };
                    out.push_str(sep);
                    out.push_str("\"sourceEventSeqs\":");
                    match v {
                        Sources::Value(v) => v.write_json(out),
                        Sources::Runs(runs) => runs.write_json(out),
                    }
                }
                EnvKey::Ignorable => {
                    if !e.ignorable {
                        continue;
                    }
                    out.push_str(sep);
                    out.push_str("\"ignorable\":true");
                }
            }
            first = false;
        }
        out.push('}');
    }

    /// The compact JSON line (without newline).
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(128);
        self.write_json(&mut s);
        s
    }

    /// Whether the payloads are structurally equal, without building trees for compact
    /// members that have none yet.
    fn data_eq(&self, other: &Event) -> bool {
        match (&self.0, &other.0) {
            (Repr::Single(a), Repr::Single(b)) => a.data == b.data,
            (Repr::Member(a, i), Repr::Member(b, j)) => a.data_eq(*i, b, *j),
            (Repr::Member(b, k), Repr::Single(e)) | (Repr::Single(e), Repr::Member(b, k)) => {
                b.data_uncached(*k) == e.data
            }
        }
    }

    /// Whether the `sourceEventSeqs` are equal, without building arrays for runs.
    fn sources_eq(&self, other: &Event) -> bool {
        fn runs(e: &Event) -> Option<&[(u64, u64)]> {
            match e.single()?.source_event_seqs.as_ref()? {
                Sources::Runs(r) => Some(&r.runs),
                Sources::Value(_) => None,
            }
        }
        match (runs(self), runs(other)) {
            (Some(a), Some(b)) => a == b,
            _ => self.source_event_seqs_value() == other.source_event_seqs_value(),
        }
    }

    fn present_order(&self) -> Vec<EnvKey> {
        self.key_order()
            .iter()
            .filter(|k| match k {
                EnvKey::SurfaceOp => self.surface_op_value().is_some(),
                EnvKey::SourceEventSeqs => self.source_event_seqs_value().is_some(),
                EnvKey::Ignorable => self.ignorable(),
                _ => true,
            })
            .collect()
    }
}

impl PartialEq for Event {
    /// Equal when the serialized forms would be equal (key order included).
    fn eq(&self, other: &Event) -> bool {
        self.ptr_eq(other)
            || (self.event_type() == other.event_type()
                && self.seq() == other.seq()
                && self.time() == other.time()
                && self.ignorable() == other.ignorable()
                && self.surface_op_value() == other.surface_op_value()
                && self.sources_eq(other)
                && self.present_order() == other.present_order()
                && self.data_eq(other))
    }
}

impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_sorted_for_lookup() {
        let mut sorted = KNOWN_EVENT_TYPES;
        sorted.sort_unstable();
        assert_eq!(sorted, KNOWN_EVENT_TYPES);
        assert!(is_known_event_type("turn/start"));
        assert!(!is_known_event_type("context/message"));
    }

    #[test]
    fn round_trips_any_envelope_order() {
        for line in [
            r#"{"type":"turn/start","seq":1,"time":0,"data":{"turn":1}}"#,
            r#"{"seq":1,"type":"x","data":null,"time":-5,"ignorable":true}"#,
            r#"{"type":"tool/result","seq":9,"time":3,"data":{},"surfaceOp":"append","sourceEventSeqs":[8]}"#,
            r#"{"type":"user/message","seq":9,"time":3,"data":{},"sourceEventSeqs":[8],"surfaceOp":{"op":"replace","start":1,"end":2}}"#,
        ] {
            let e = Event::parse(line).unwrap();
            assert_eq!(e.to_json(), line);
            assert_eq!(e.to_value().to_json(), line);
        }
    }

    #[test]
    fn envelope_rules() {
        for bad in [
            r#"{"type":1,"seq":0,"time":0,"data":null}"#,
            r#"{"type":"a","seq":"0","time":0,"data":null}"#,
            r#"{"type":"a","seq":0.5,"time":0,"data":null}"#,
            r#"{"type":"a","seq":-1,"time":0,"data":null}"#,
            r#"{"type":"a","seq":0,"time":"1","data":null}"#,
            r#"{"type":"a","seq":0,"time":0.5,"data":null}"#,
            r#"{"type":"a","seq":0,"time":0}"#,
            r#"{"type":"a","seq":0,"time":0,"data":null,"ignorable":false}"#,
            r#"{"type":"a","seq":0,"time":0,"data":null,"ignorable":"yes"}"#,
            r#"{"type":"a","seq":0,"time":0,"data":null,"extra":1}"#,
            "[]",
        ] {
            assert!(Event::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn surface_guards() {
        let e = Event::parse(r#"{"type":"user/message","seq":0,"time":0,"data":{}}"#).unwrap();
        assert!(!e.is_surface_event());
        let e = Event::parse(
            r#"{"type":"user/message","seq":0,"time":0,"data":{},"surfaceOp":"append"}"#,
        )
        .unwrap();
        assert!(e.is_append_surface_event() && !e.is_replacement_surface_event());
        assert_eq!(e.surface_op(), Some(SurfaceOp::Append));
    }
}
