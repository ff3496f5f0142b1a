//! Undoing compactions by branching: a child session whose model view is its parent's with
//! chosen surface replaces undone. The parent is never modified.
//!
//! # The child
//!
//! Let `r` be the first undone replace. The child is a fork of the parent at `r`: its header
//! is [`child_header`] (`parentSession`, `seedLength = r`), it inherits the parent's first `r`
//! events (shared, not copied) and gets its `session/end-seed` marker at seq `r`. Every later
//! parent event is then carried over in order, with its original `time`:
//!
//! - **Seq mapping: the identity.** A carried event keeps its seq. The slot of each undone
//!   replace holds the end-seed marker (the first one, unless the inherited prefix already
//!   ends with a marker) or an ignorable `uncompact/undone` record
//!   (`{"parentSession", "replaceSeq"}`); the undone replacing message itself is not carried.
//! - **References to an undone replace are expanded** to the nodes it shadowed (themselves
//!   expanded when they are undone replaces too), in surface order: in `sourceEventSeqs`, in
//!   a replace op's `start` (the first restored node) and `end` (the last), in
//!   `session/title.messageSeqs`, in `compaction/summary` and `compaction/prune`
//!   `shadowedSeqs` and `shadowedRange`, and in `command/done.sourceEventSeq` (the first
//!   restored node). So a later compaction that covered an undone summary covers the
//!   restored originals instead.
//! - The child ends with an ignorable `uncompact/provenance` record:
//!   `{"parentSession", "parentEvents", "undone": [seq, …]}`.
//!
//! Carried events are validated as seed entries ([`Session::append_carried`]) and shared with
//! the parent when nothing in them changes, so a compact chunk member stays compact.
//!
//! Every record is in the reference's vocabulary (the two record types are unknown to it and
//! marked `ignorable`), so the reference loads the child.
//!
//! Fields this module cannot remap: any other plugin payload that names seqs (for example a
//! `subagent/descriptor` or `tool-workflow/*` record pointing at a replacing event) is carried
//! unchanged, so such a reference to an undone replace names its slot (the marker or the
//! `uncompact/undone` record) in the child.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use session_core::event::EventParts;
use session_core::event::{SurfaceOp, seq_value};
use session_core::json::Value;
use session_core::{Clock, Event, Events, SharedClock};
use session_surface::{Compaction, Draft, Session, Transcript, compactions_of};

use crate::{Error, Result, child_header};

/// Type of the ignorable record in the slot of an undone replace (other than the end-seed).
pub const UNDONE_TYPE: &str = "uncompact/undone";
/// Type of the ignorable record that ends an uncompacted child.
pub const PROVENANCE_TYPE: &str = "uncompact/provenance";

/// Why an uncompact request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UncompactError {
    /// `seq <seq> of session "<id>" is not a surface replace`
    NotACompaction {
        /// The parent session.
        session: String,
        /// The requested seq.
        seq: u64,
    },
    /// `session "<id>" has no compaction to undo`
    NothingToUndo {
        /// The parent session.
        session: String,
    },
}

impl fmt::Display for UncompactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UncompactError::NotACompaction { session, seq } => {
                write!(
                    f,
                    "seq {seq} of session \"{session}\" is not a surface replace"
                )
            }
            UncompactError::NothingToUndo { session } => {
                write!(f, "session \"{session}\" has no compaction to undo")
            }
        }
    }
}

impl std::error::Error for UncompactError {}

/// Which replaces to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undo {
    /// The replaces at these seqs.
    Seqs(Vec<u64>),
    /// Every replace: the never-compacted view.
    All,
}

/// A clock that reports a carried event's original time while the child is built, and the
/// caller's clock otherwise.
struct CarryClock {
    inner: SharedClock,
    at: AtomicI64,
    active: AtomicBool,
}

impl Clock for CarryClock {
    fn now_ms(&self) -> i64 {
        if self.active.load(Ordering::Relaxed) {
            self.at.load(Ordering::Relaxed)
        } else {
            self.inner.now_ms()
        }
    }
}

impl CarryClock {
    fn carry(&self, time: i64) {
        self.at.store(time, Ordering::Relaxed);
        self.active.store(true, Ordering::Relaxed);
    }

    fn release(&self) {
        self.active.store(false, Ordering::Relaxed);
    }
}

/// Builds child `child_id` of `parent` with the replaces `undo` names undone (see the module
/// docs for the child's exact shape and seq mapping). Cost: one pass over the parent's
/// transcript, plus one seed-entry validation per parent event after the first undone
/// replace (the events themselves are shared unless a reference in them changes).
///
/// ```
/// use std::sync::Arc;
/// use session_core::{FixedClock, SharedClock, json::Value};
/// use session_fork::{Undo, uncompact};
/// use session_surface::{Draft, Session};
///
/// let clock: SharedClock = Arc::new(FixedClock::new(1_000));
/// let mut parent = Session::create("parent", None, None, clock.clone())?;
/// let user = |id: &str, text: &str| {
///     Value::parse(&format!(
///         r#"{{"id":"{id}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
///     ))
/// };
/// parent.append(Draft::new("user/message", user("m1", "first")?).append_op())?;
/// parent.append(Draft::new("user/message", user("m2", "second")?).append_op())?;
/// // seq 2 compacts seqs 0..=1 into a summary.
/// parent.append(Draft::new("user/message", user("m3", "summary")?).replace_op(0, 1).sources(&[0, 1]))?;
/// assert_eq!(parent.derive_messages().len(), 1);
/// assert_eq!(parent.compactions()[0].shadowed, vec![0, 1]);
///
/// let child = uncompact(&parent, &Undo::Seqs(vec![2]), "child", clock)?;
/// assert_eq!(child.derive_messages().len(), 2); // the originals are back
/// assert_eq!(child.header().parent_session.as_deref(), Some("parent"));
/// assert_eq!(child.header().seed_length, Some(2));
/// assert_eq!(parent.derive_messages().len(), 1); // the parent is unchanged
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn uncompact(
    parent: &Session,
    undo: &Undo,
    child_id: &str,
    clock: SharedClock,
) -> Result<Session> {
    let compactions = parent.compactions();
    build(
        parent.id(),
        parent.header().cwd.as_deref(),
        parent.events(),
        &compactions,
        undo,
        child_id,
        clock,
    )
}

/// [`uncompact`] for a parent that is not loaded as a [`Session`], e.g. a stored log: session
/// `parent_id` (working directory `parent_cwd`) whose log is exactly `events` (no end-seed
/// marker is added to it, as loading would).
///
/// `events` is taken by value: when the caller holds no other handle on them, their storage
/// is freed while the child is built (the inherited prefix once the child holds it, the
/// carried events a chunk at a time), so the parent's log and the child's are not both held
/// whole; the events themselves stay shared with the child.
pub fn uncompact_events(
    parent_id: &str,
    parent_cwd: Option<&str>,
    events: Events,
    undo: &Undo,
    child_id: &str,
    clock: SharedClock,
) -> Result<Session> {
    // Only the compaction history is kept: the parent's transcript is dropped before the
    // child is built.
    let compactions = compactions_of(
        &Transcript::from_events(events.iter())
            .map_err(|e| Error::Session(session_surface::Error::from(e)))?,
    );
    build(
        parent_id,
        parent_cwd,
        events,
        &compactions,
        undo,
        child_id,
        clock,
    )
}

/// How many parent events [`build`] takes off the parent's log at a time.
const CARRY_CHUNK: usize = 4096;

fn build(
    parent_id: &str,
    parent_cwd: Option<&str>,
    events: Events,
    compactions: &[Compaction],
    undo: &Undo,
    child_id: &str,
    clock: SharedClock,
) -> Result<Session> {
    let undone: BTreeSet<u64> = match undo {
        Undo::All => compactions.iter().map(|c| c.seq).collect(),
        Undo::Seqs(seqs) => {
            for &seq in seqs {
                if !compactions.iter().any(|c| c.seq == seq) {
                    return Err(Error::Uncompact(UncompactError::NotACompaction {
                        session: parent_id.to_owned(),
                        seq,
                    }));
                }
            }
            seqs.iter().copied().collect()
        }
    };
    let Some(&first) = undone.iter().next() else {
        return Err(Error::Uncompact(UncompactError::NothingToUndo {
            session: parent_id.to_owned(),
        }));
    };
    let expansion = expansions(compactions, &undone);
    let seed_length = usize::try_from(first).unwrap_or(usize::MAX);
    let header = child_header(child_id, clock.now_ms(), parent_cwd, parent_id, seed_length);
    let carry = Arc::new(CarryClock {
        inner: clock,
        at: AtomicI64::new(0),
        active: AtomicBool::new(false),
    });
    let time_of = |seq: u64| {
        usize::try_from(seq)
            .ok()
            .and_then(|i| events.get(i))
            .map_or(0, Event::time)
    };
    carry.carry(time_of(first));
    let parent_events = events.len() as u64;
    let built = (|| -> Result<Session> {
        let seed = events.prefix(seed_length);
        let mut rest = events.suffix(seed_length);
        drop(events);
        let mut child =
            Session::create_from_events(child_id, Some(seed), Some(header), carry.clone())?;
        while !rest.is_empty() {
            let chunk = rest.prefix(CARRY_CHUNK);
            rest = rest.suffix(CARRY_CHUNK);
            for event in &chunk {
                let seq = event.seq();
                carry.carry(event.time());
                if undone.contains(&seq) {
                    if child.seq() == seq {
                        let data = Value::object([
                            ("parentSession", Value::from(parent_id)),
                            ("replaceSeq", seq_value(seq)),
                        ]);
                        child.append(Draft::new(UNDONE_TYPE, data).ignorable())?;
                    }
                    continue;
                }
                match carried(event, &expansion) {
                    Some(rewritten) => child.append_carried(&rewritten)?,
                    None => child.append_carried(event)?,
                };
            }
        }
        carry.release();
        let provenance = Value::object([
            ("parentSession", Value::from(parent_id)),
            ("parentEvents", seq_value(parent_events)),
            ("undone", Value::array(undone.iter().map(|&s| seq_value(s)))),
        ]);
        child.append(Draft::new(PROVENANCE_TYPE, provenance).ignorable())?;
        Ok(child)
    })();
    carry.release();
    built
}

/// For every undone replace, the parent seqs that stand in its place in the child: the nodes
/// it shadowed, each expanded again when it is an undone replace itself.
fn expansions(compactions: &[Compaction], undone: &BTreeSet<u64>) -> HashMap<u64, Vec<u64>> {
    let mut expansion: HashMap<u64, Vec<u64>> = HashMap::new();
    for c in compactions.iter().filter(|c| undone.contains(&c.seq)) {
        let mut nodes = Vec::with_capacity(c.shadowed.len());
        for s in &c.shadowed {
            match expansion.get(s) {
                Some(inner) => nodes.extend_from_slice(inner),
                None => nodes.push(*s),
            }
        }
        expansion.insert(c.seq, nodes);
    }
    expansion
}

/// `event` with its references to undone replaces expanded, or `None` when it names none
/// (it is then carried as it is, shared).
fn carried(event: &Event, expansion: &HashMap<u64, Vec<u64>>) -> Option<Event> {
    let rewrite = Rewrite(expansion);
    let mut parts: Option<EventParts> = None;
    // Only these payloads name seqs the child rewrites; reading any other payload could build
    // a compact member's data for nothing.
    if matches!(
        event.event_type(),
        "session/title" | "compaction/summary" | "compaction/prune" | "command/done"
    ) {
        let data = rewrite.payload(event.event_type(), event.data());
        if !data.ptr_eq(event.data()) {
            parts.get_or_insert_with(|| event.to_parts()).data = data;
        }
    }
    if let Some(SurfaceOp::Replace { start, end }) = event.surface_op() {
        let (s, e) = (rewrite.first(start), rewrite.last(end));
        if (s, e) != (start, end) {
            parts.get_or_insert_with(|| event.to_parts()).surface_op =
                Some(SurfaceOp::Replace { start: s, end: e }.to_value());
        }
    }
    // Long source arrays read from storage are kept as runs and their array value is built
    // on first use and then kept in the event (shared with the parent): it is only asked for
    // when a source names an undone replace.
    let names_undone = match event.source_event_seqs() {
        Some(seqs) => seqs.iter().any(|s| expansion.contains_key(s)),
        None => true,
    };
    if names_undone && let Some(sources) = event.source_event_seqs_value() {
        let rewritten = rewrite.seq_array(sources);
        if !rewritten.ptr_eq(sources) {
            parts
                .get_or_insert_with(|| event.to_parts())
                .source_event_seqs = Some(rewritten);
        }
    }
    parts.map(|p| Event::from_parts(p, event.key_order()))
}

struct Rewrite<'a>(&'a HashMap<u64, Vec<u64>>);

impl Rewrite<'_> {
    fn first(&self, seq: u64) -> u64 {
        self.0
            .get(&seq)
            .and_then(|v| v.first())
            .copied()
            .unwrap_or(seq)
    }

    fn last(&self, seq: u64) -> u64 {
        self.0
            .get(&seq)
            .and_then(|v| v.last())
            .copied()
            .unwrap_or(seq)
    }

    /// An array of seqs with every undone replace expanded (first occurrences kept); a value
    /// that is not an array of seqs, or names no undone replace, is returned as it is.
    fn seq_array(&self, value: &Value) -> Value {
        let Some(items) = value.as_array() else {
            return value.clone();
        };
        let touched = items
            .iter()
            .any(|v| v.as_u64().is_some_and(|s| self.0.contains_key(&s)));
        if !touched {
            return value.clone();
        }
        let mut seen = BTreeSet::new();
        let mut out = Vec::with_capacity(items.len());
        for item in items.iter() {
            match item.as_u64() {
                Some(s) => match self.0.get(&s) {
                    Some(nodes) => {
                        for &n in nodes {
                            if seen.insert(n) {
                                out.push(seq_value(n));
                            }
                        }
                    }
                    None => {
                        if seen.insert(s) {
                            out.push(item.clone());
                        }
                    }
                },
                None => out.push(item.clone()),
            }
        }
        Value::array(out)
    }

    /// `{start, end}` with `start` and `end` mapped to the first and last expanded node.
    fn range(&self, value: &Value) -> Value {
        let Some(o) = value.as_object() else {
            return value.clone();
        };
        let mut out = o.clone();
        if let Some(s) = o.get("start").and_then(Value::as_u64)
            && self.0.contains_key(&s)
        {
            out = out.with("start", seq_value(self.first(s)));
        }
        if let Some(e) = o.get("end").and_then(Value::as_u64)
            && self.0.contains_key(&e)
        {
            out = out.with("end", seq_value(self.last(e)));
        }
        Value::Object(out)
    }

    /// The payload of a carried event, with the seq fields of the known vocabulary rewritten.
    fn payload(&self, ty: &str, data: &Value) -> Value {
        let Some(o) = data.as_object() else {
            return data.clone();
        };
        let mut out = o.clone();
        let mut changed = false;
        let mut set = |out: &mut session_core::json::Object, key: &str, new: Value| {
            if out.get(key) != Some(&new) {
                *out = out.with(key, new);
                changed = true;
            }
        };
        match ty {
            "session/title" => {
                if let Some(v) = o.get("messageSeqs") {
                    set(&mut out, "messageSeqs", self.seq_array(v));
                }
            }
            "compaction/summary" | "compaction/prune" => {
                if let Some(v) = o.get("shadowedSeqs") {
                    set(&mut out, "shadowedSeqs", self.seq_array(v));
                }
                if let Some(v) = o.get("shadowedRange") {
                    set(&mut out, "shadowedRange", self.range(v));
                }
            }
            "command/done" => {
                if let Some(s) = o.get("sourceEventSeq").and_then(Value::as_u64)
                    && self.0.contains_key(&s)
                {
                    set(&mut out, "sourceEventSeq", seq_value(self.first(s)));
                }
            }
            _ => {}
        }
        if changed {
            Value::Object(out)
        } else {
            data.clone()
        }
    }
}
