//! The event envelope, its vocabulary and its serialized form.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::json::{self, Value};
use crate::{EnvelopeProblem, Error};

pub(crate) mod compact;
mod snapshot;
mod verbatim;
mod weight;

use self::compact::ChunkBlock;
use self::verbatim::Verbatim;

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
    known_type_index(ty).is_some()
}

/// The index of `ty` in [`KNOWN_EVENT_TYPES`] (a `match`: this runs for every restored event).
fn known_type_index(ty: &str) -> Option<usize> {
    Some(match ty {
        "agent-preset/selected" => 0,
        "agent/inbox/spliced" => 1,
        "approval/asked" => 2,
        "approval/decided" => 3,
        "approval/policy" => 4,
        "assistant/chunk" => 5,
        "assistant/message" => 6,
        "command/done" => 7,
        "command/run" => 8,
        "compaction/end" => 9,
        "compaction/prune" => 10,
        "compaction/start" => 11,
        "compaction/summary" => 12,
        "feedback/record" => 13,
        "goal/change" => 14,
        "hook/invoked" => 15,
        "hook/result" => 16,
        "llm/retry" => 17,
        "llm/retry-started" => 18,
        "permission/preset" => 19,
        "plan/mode" => 20,
        "request/context" => 21,
        "request/header" => 22,
        "sandbox/mode" => 23,
        "schedule/change" => 24,
        "session/end-seed" => 25,
        "session/title" => 26,
        "session/title-llm-request" => 27,
        "step/end" => 28,
        "step/start" => 29,
        "subagent/descriptor" => 30,
        "team/member" => 31,
        "team/message/delivered" => 32,
        "team/message/queued" => 33,
        "team/task" => 34,
        "todo/write" => 35,
        "tool-workflow/agent-end" => 36,
        "tool-workflow/agent-start" => 37,
        "tool-workflow/run-end" => 38,
        "tool-workflow/run-start" => 39,
        "tool/call" => 40,
        "tool/code-dispatch" => 41,
        "tool/code-dispatch-start" => 42,
        "tool/result" => 43,
        "turn/end" => 44,
        "turn/start" => 45,
        "user/message" => 46,
        "web/deepseek-search-llm-request" => 47,
        _ => return None,
    })
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

/// An envelope read key by key (see [`Event::from_value`]): the rules are checked as the keys
/// and values arrive, and the key order is kept.
#[derive(Default)]
pub(crate) struct Envelope {
    order: KeyOrder,
    ty: Option<Arc<str>>,
    seq: Option<u64>,
    time: Option<i64>,
    data: Option<Value>,
    surface_op: Option<Value>,
    source_event_seqs: Option<Sources>,
    ignorable: bool,
}

/// An envelope key accepted by [`Envelope::key`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EnvelopeKey(EnvKey);

impl EnvelopeKey {
    /// Whether this is `sourceEventSeqs`.
    pub(crate) fn is_source_event_seqs(self) -> bool {
        self.0 == EnvKey::SourceEventSeqs
    }

    /// Whether this is `type`.
    pub(crate) fn is_type(self) -> bool {
        self.0 == EnvKey::Type
    }
}

/// What [`Envelope::value`] refuses, as [`EnvelopeProblem`] texts.
const NOT_TYPE: &str = "`type` is not a string";
const NOT_SEQ: &str = "`seq` is not a non-negative safe integer";
const NOT_TIME: &str = "`time` is not a safe integer";

impl Envelope {
    /// Accepts the next key. Fails for an unknown key and, since an object has distinct keys,
    /// for a repeated one.
    pub(crate) fn key(&mut self, name: &str) -> Result<EnvelopeKey, &'static str> {
        let key = EnvKey::from_name(name).ok_or("an envelope key is not one of type, seq, time, data, surfaceOp, sourceEventSeqs, ignorable")?;
        let order = &mut self.order;
        if order.keys[..order.len as usize].contains(&(key as u8)) {
            return Err("an envelope key is repeated");
        }
        order.keys[order.len as usize] = key as u8;
        order.len += 1;
        Ok(EnvelopeKey(key))
    }

    /// Sets the value of an accepted key, checking it.
    pub(crate) fn value(&mut self, key: EnvelopeKey, value: Value) -> Result<(), &'static str> {
        match key.0 {
            EnvKey::Type => self.ty = Some(interned_type(value.as_arc_str().ok_or(NOT_TYPE)?)),
            EnvKey::Seq => self.seq = Some(value.as_u64().ok_or(NOT_SEQ)?),
            EnvKey::Time => self.time = Some(value.as_i64().ok_or(NOT_TIME)?),
            EnvKey::Data => self.data = Some(value),
            EnvKey::SurfaceOp => self.surface_op = Some(value),
            EnvKey::SourceEventSeqs => {
                self.source_event_seqs = Some(match SeqRuns::from_value(&value) {
                    Some(runs) => Sources::Runs(Box::new(runs)),
                    None => Sources::Value(value),
                });
            }
            EnvKey::Ignorable => {
                if value.as_bool() != Some(true) {
                    return Err("`ignorable` is present but not `true`");
                }
                self.ignorable = true;
            }
        }
        Ok(())
    }

    /// Sets `sourceEventSeqs` to an array of `len` non-negative safe integers given as runs
    /// `(first, count)` of consecutive values: what [`Envelope::value`] does with the array.
    pub(crate) fn source_runs(&mut self, runs: Vec<(u64, u64)>, len: usize) {
        let runs = SeqRuns {
            runs: runs.into_boxed_slice(),
            value: OnceLock::new(),
        };
        self.source_event_seqs = Some(if SeqRuns::worth_it(runs.runs.len(), len) {
            Sources::Runs(Box::new(runs))
        } else {
            Sources::Value(Value::array(runs.iter().map(seq_value)))
        });
    }

    /// The event, once every required key is present.
    pub(crate) fn finish(self) -> Result<Event, &'static str> {
        let (Some(ty), Some(seq), Some(time), Some(data)) =
            (self.ty, self.seq, self.time, self.data)
        else {
            return Err("a required key (type, seq, time, data) is missing");
        };
        Ok(Event(Repr::Single(Arc::new(Inner {
            ty,
            seq,
            time,
            data,
            surface_op: self.surface_op,
            source_event_seqs: self.source_event_seqs,
            ignorable: self.ignorable,
            order: self.order,
        }))))
    }
}

/// The shared string of a known event type (so that restored events share their type
/// strings), or `ty` itself.
fn interned_type(ty: &Arc<str>) -> Arc<str> {
    static TYPES: OnceLock<Vec<Arc<str>>> = OnceLock::new();
    let types = TYPES.get_or_init(|| KNOWN_EVENT_TYPES.iter().map(|t| Arc::from(*t)).collect());
    match known_type_index(ty).and_then(|i| types.get(i)) {
        Some(shared) => shared.clone(),
        None => ty.clone(),
    }
}

/// The order of the envelope keys when an event is serialized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
/// integer, `time` a safe integer, `ignorable` absent or `true`), except a stored record kept
/// as stored ([`Event::verbatim`]), which only a read without session validation returns and
/// which is never appendable. Whether its surface metadata
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
    /// A stored record kept as stored (see [`Event::verbatim`]).
    Verbatim(Arc<Verbatim>),
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
        SeqRuns::worth_it(runs.len(), items.len()).then(|| SeqRuns {
            runs: runs.into_boxed_slice(),
            value: OnceLock::new(),
        })
    }

    /// Whether `runs` runs standing for `len` items are worth keeping instead of the array.
    fn worth_it(runs: usize, len: usize) -> bool {
        len >= MIN_RUNS_ARRAY && runs * 4 <= len
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
        out.push('[');
        for (i, n) in self.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            crate::json::write_int(n, out);
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
            Repr::Single(_) | Repr::Verbatim(_) => None,
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

    /// The type, envelope fields and payload of this event, for rebuilding it (with
    /// [`Event::from_parts`]) in another key order or with a field changed.
    pub fn to_parts(&self) -> EventParts {
        EventParts {
            ty: self.event_type_arc().clone(),
            seq: self.seq(),
            time: self.time(),
            data: self.data().clone(),
            surface_op: self.surface_op_value().cloned(),
            source_event_seqs: self.source_event_seqs_value().cloned(),
            ignorable: self.ignorable(),
        }
    }

    /// This event with its envelope keys in the live-append order (`type, seq, time, data,
    /// sourceEventSeqs?, surfaceOp?, ignorable?`), the order a database backend returns its
    /// rows in; values, and so number spellings, are kept. Comparing `a.in_append_order()`
    /// with `b.in_append_order()` as JSON text compares two events regardless of the order
    /// their stored records listed the envelope keys in.
    #[must_use]
    pub fn in_append_order(&self) -> Event {
        // A compact member's envelope is exactly `type, seq, time, data` in either of its
        // orders: it is its own copy, and its `data` is not built (a member keeps a built
        // `data`, so a pass over every event would hold every chunk's tree).
        if let Repr::Member(..) = self.0 {
            return self.clone();
        }
        Event::from_parts(self.to_parts(), KeyOrder::APPEND)
    }

    /// Reads an event from its JSON object, checking the envelope rules. The key order of the
    /// object is kept for serialization.
    pub fn from_value(v: &Value) -> Result<Event, Error> {
        let invalid = |reason: &'static str| Error::InvalidEnvelope {
            problem: EnvelopeProblem(reason),
        };
        let Some(obj) = v.as_object() else {
            return Err(invalid("the record is not an object"));
        };
        let mut envelope = Envelope::default();
        for (k, value) in obj.iter() {
            let key = envelope.key(k).map_err(invalid)?;
            envelope.value(key, value.clone()).map_err(invalid)?;
        }
        envelope.finish().map_err(invalid)
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
            Repr::Verbatim(v) => &v.ty,
        }
    }

    /// The shared event type string.
    #[inline]
    pub fn event_type_arc(&self) -> &Arc<str> {
        match &self.0 {
            Repr::Single(e) => &e.ty,
            Repr::Member(..) => chunk_event_type(),
            Repr::Verbatim(v) => &v.ty,
        }
    }

    /// Position in the log (equal to the event's index).
    #[inline]
    pub fn seq(&self) -> u64 {
        match &self.0 {
            Repr::Single(e) => e.seq,
            Repr::Member(b, k) => b.seq(*k),
            Repr::Verbatim(v) => v.seq,
        }
    }

    /// Milliseconds since the Unix epoch; not monotonic.
    #[inline]
    pub fn time(&self) -> i64 {
        match &self.0 {
            Repr::Single(e) => e.time,
            Repr::Member(b, k) => b.time(*k),
            Repr::Verbatim(v) => v.time,
        }
    }

    /// The payload.
    #[inline]
    pub fn data(&self) -> &Value {
        match &self.0 {
            Repr::Single(e) => &e.data,
            Repr::Member(b, k) => b.data(*k),
            Repr::Verbatim(v) => v.data(),
        }
    }

    /// `data.turn` and `data.step`, read without building the `data` of a compact chunk
    /// member (a member's `data` is built on first use and kept, so a pass over every event
    /// that needs only these two fields would otherwise hold every chunk's `data`).
    pub fn turn_and_step(&self) -> (Option<&Value>, Option<&Value>) {
        match &self.0 {
            Repr::Member(b, k) => {
                let meta = b.meta(*k);
                (Some(&meta.turn), Some(&meta.step))
            }
            Repr::Single(_) | Repr::Verbatim(_) => {
                let data = self.data();
                (data.get("turn"), data.get("step"))
            }
        }
    }

    /// The payload read as `T` (a [`crate::vocab`] type or any `Deserialize` type; strings
    /// may borrow from the event). The error names the event and the path in `data`.
    pub fn data_as<'a, T: serde::Deserialize<'a>>(&'a self) -> Result<T, Error> {
        json::from_value(self.data()).map_err(|source| Error::Data {
            seq: self.seq(),
            ty: self.event_type().to_owned(),
            source,
        })
    }

    #[inline]
    fn single(&self) -> Option<&Inner> {
        match &self.0 {
            Repr::Single(e) => Some(e),
            Repr::Member(..) | Repr::Verbatim(_) => None,
        }
    }

    /// The raw `surfaceOp` value, when present.
    #[inline]
    pub fn surface_op_value(&self) -> Option<&Value> {
        if let Repr::Verbatim(v) = &self.0 {
            return v.value.get("surfaceOp");
        }
        self.single()?.surface_op.as_ref()
    }

    /// The raw `sourceEventSeqs` value, when present.
    #[inline]
    pub fn source_event_seqs_value(&self) -> Option<&Value> {
        if let Repr::Verbatim(v) = &self.0 {
            return v.value.get("sourceEventSeqs");
        }
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
        match &self.0 {
            Repr::Verbatim(v) => v.ignorable,
            _ => self.single().is_some_and(|e| e.ignorable),
        }
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
            // Its keys are those of the stored record, which may be no envelope keys at all.
            Repr::Verbatim(_) => KeyOrder::default(),
        }
    }

    /// `isSurfaceEvent`: an eligible type carrying a `surfaceOp`.
    #[inline]
    pub fn is_surface_event(&self) -> bool {
        self.surface_op_value().is_some() && is_surface_eligible_type(self.event_type())
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
            (Repr::Verbatim(a), Repr::Verbatim(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The envelope as a JSON object, in serialization order.
    pub fn to_value(&self) -> Value {
        if let Repr::Verbatim(v) = &self.0 {
            return v.value.clone();
        }
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
        let e = match &self.0 {
            Repr::Single(e) => e,
            Repr::Member(b, k) => {
                b.write_json(*k, out);
                return;
            }
            Repr::Verbatim(v) => {
                v.value.write_json(out);
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
                    out.push_str("\"seq\":");
                    crate::json::write_int(e.seq, out);
                }
                EnvKey::Time => {
                    out.push_str(sep);
                    out.push_str("\"time\":");
                    crate::json::write_int(e.time, out);
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
            _ => self.data() == other.data(),
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

    /// Whether `sourceEventSeqs` is present, without building the array value of runs (which
    /// [`Event::source_event_seqs_value`] builds once and keeps).
    fn has_source_event_seqs(&self) -> bool {
        match &self.0 {
            Repr::Verbatim(v) => v.value.get("sourceEventSeqs").is_some(),
            _ => self.single().is_some_and(|e| e.source_event_seqs.is_some()),
        }
    }

    fn present_order(&self) -> Vec<EnvKey> {
        self.key_order()
            .iter()
            .filter(|k| match k {
                EnvKey::SurfaceOp => self.surface_op_value().is_some(),
                EnvKey::SourceEventSeqs => self.has_source_event_seqs(),
                EnvKey::Ignorable => self.ignorable(),
                _ => true,
            })
            .collect()
    }
}

impl PartialEq for Event {
    /// Equal when the serialized forms would be equal (key order included).
    fn eq(&self, other: &Event) -> bool {
        if self.is_verbatim() || other.is_verbatim() {
            return self.stored_record().is_some()
                && self.stored_record() == other.stored_record()
                && self.seq() == other.seq();
        }
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
        for (i, ty) in KNOWN_EVENT_TYPES.iter().enumerate() {
            assert_eq!(known_type_index(ty), Some(i), "{ty}");
        }
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
    fn long_source_runs_behave_like_the_array() {
        let seqs: Vec<String> = (3..40).chain(50..60).map(|n| n.to_string()).collect();
        let line = format!(
            r#"{{"type":"assistant/message","seq":70,"time":1,"data":{{}},"sourceEventSeqs":[{}],"surfaceOp":"append"}}"#,
            seqs.join(",")
        );
        let e = Event::parse(&line).unwrap();
        assert!(matches!(
            e.single().unwrap().source_event_seqs,
            Some(Sources::Runs(_))
        ));
        assert_eq!(e.to_json(), line);
        let want: Vec<u64> = (3..40).chain(50..60).collect();
        assert_eq!(e.source_event_seqs(), Some(want.clone()));
        let array = json::parse(&format!("[{}]", seqs.join(","))).unwrap();
        assert_eq!(e.source_event_seqs_value(), Some(&array));
        // The array is built once.
        assert!(
            e.source_event_seqs_value()
                .unwrap()
                .ptr_eq(e.source_event_seqs_value().unwrap())
        );
        assert_eq!(e.to_value().to_json(), line);
        // Equal to the same event holding the array as a value, either way round.
        let plain = Event::from_parts(
            EventParts {
                ty: "assistant/message".into(),
                seq: 70,
                time: 1,
                data: Value::empty_object(),
                surface_op: Some(Value::from("append")),
                source_event_seqs: Some(array),
                ignorable: false,
            },
            KeyOrder::APPEND,
        );
        assert_eq!(plain, e);
        assert_eq!(e, plain);
        assert_eq!(e, Event::parse(&line).unwrap());
        assert_ne!(e, Event::parse(&line.replace(",59]", ",58]")).unwrap());
        // Short, scattered, or non-canonical arrays stay values, and still round-trip.
        for sources in [
            "[1,2,3]",
            "[1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31,33]",
            &format!("[{},1.0]", seqs.join(",")),
        ] {
            let line = line.replace(&format!("[{}]", seqs.join(",")), sources);
            let e = Event::parse(&line).unwrap();
            assert!(matches!(
                e.single().unwrap().source_event_seqs,
                Some(Sources::Value(_))
            ));
            assert_eq!(e.to_json(), line);
        }
    }

    #[test]
    fn snapshots_share_what_a_live_append_would_keep() {
        use crate::chunk_rows::{Decoded, decode_storage_record};
        let row = |turn: &str| {
            let line = format!(
                r#"{{"type":"text-chunks","seq0":0,"time0":5,"data":{{"turn":{turn},"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}}}"#
            );
            match decode_storage_record(json::parse(&line).unwrap()).unwrap() {
                Decoded::Expanded(members) => members,
                Decoded::Passthrough(_) => unreachable!(),
            }
        };
        // Canonical members are kept as they are, without building their data.
        let members = row("1");
        let snap = members[1].snapshot_for_append().unwrap();
        assert!(snap.ptr_eq(&members[1]));
        let (block, _) = members[1].as_member().unwrap();
        assert!(block.data_uncached(1).get("turn").is_some());
        assert!(matches!(&members[1].0, Repr::Member(b, _) if b.data_is_unbuilt()));
        // A non-canonical spelling is respelled, as the append rules do.
        let members = row("1.0");
        let snap = members[2].snapshot_for_append().unwrap();
        assert!(!snap.ptr_eq(&members[2]));
        assert_eq!(
            snap.to_json(),
            r#"{"type":"assistant/chunk","seq":2,"time":8,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}}"#
        );
        assert!(row("-0")[0].snapshot_for_append().is_none());
        // Runs of sources are kept; other values follow the append rules.
        let seqs: Vec<String> = (0..40).map(|n| n.to_string()).collect();
        let line = format!(
            r#"{{"type":"user/message","seq":70,"time":1,"data":{{"a":1}},"sourceEventSeqs":[{}],"surfaceOp":"append"}}"#,
            seqs.join(",")
        );
        let e = Event::parse(&line).unwrap();
        assert!(e.snapshot_for_append().unwrap().ptr_eq(&e));
        let e = Event::parse(&line.replace(r#"{"a":1}"#, r#"{"a":1.0}"#)).unwrap();
        let snap = e.snapshot_for_append().unwrap();
        assert!(!snap.ptr_eq(&e));
        assert_eq!(snap.to_json(), line);
        let e = Event::parse(&line.replace(r#"{"a":1}"#, r#"{"a":-0}"#)).unwrap();
        assert!(e.snapshot_for_append().is_none());
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
