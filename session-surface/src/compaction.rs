//! The compaction history of a session: every surface replace, what it hid, and how the
//! model's view changed size.
//!
//! [`Session::compactions`] walks the session's [`Transcript`] once (O(surface events)), so it
//! costs no more than reading the transcript, and needs no second fold of the log.
//! [`view_diff`] reports how the view changed between two points of a log ([`ViewDiff`]).
//!
//! # Sizes
//!
//! A view's size is counted three ways ([`ViewSize`]): messages (surface nodes that derive a
//! message), characters and approximate tokens. Characters are the Unicode scalar values of
//! every string value inside each message's `content` (text blocks, tool arguments and
//! outputs, nested results), without object keys; ids, roles and sources are not counted.
//! Tokens are `ceil(characters / 4)` ([`approx_tokens`]), the usual rule of thumb for English
//! text and code; no tokenizer is involved.

use std::collections::{HashMap, HashSet};

use session_core::Events;
use session_core::json::Value;

use crate::derive::derive_event_message;
use crate::session::Session;
use crate::surface::{SurfaceError, fold_events};
use crate::transcript::{Transcript, TranscriptEntry};

/// The size of the model's view at one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ViewSize {
    /// Messages the model reads.
    pub messages: u64,
    /// Characters of those messages (see the module docs for the rule).
    pub chars: u64,
    /// `ceil(chars / 4)`.
    pub approx_tokens: u64,
}

impl ViewSize {
    fn new(messages: u64, chars: u64) -> ViewSize {
        ViewSize {
            messages,
            chars,
            approx_tokens: approx_tokens(chars),
        }
    }
}

/// The approximate token count for `chars` characters: `ceil(chars / 4)`.
pub fn approx_tokens(chars: u64) -> u64 {
    chars.div_ceil(4)
}

/// The characters of one message: Unicode scalar values of every string value inside its
/// `content` (recursively), object keys excluded.
pub fn message_chars(message: &Value) -> u64 {
    fn walk(v: &Value) -> u64 {
        match v {
            Value::String(s) => s.chars().count() as u64,
            Value::Array(items) => items.iter().map(walk).sum(),
            Value::Object(o) => o.iter().map(|(_, v)| walk(v)).sum(),
            _ => 0,
        }
    }
    message.get("content").map_or(0, walk)
}

/// One surface replace of a session, as [`Session::compactions`] reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// Seq of the replacing event.
    pub seq: u64,
    /// The replacing event's type (`user/message`, `assistant/message` or `tool/result`).
    pub event_type: String,
    /// `start` of its replace op (a surface node seq when it was committed).
    pub start: u64,
    /// `end` of its replace op.
    pub end: u64,
    /// The surface nodes it took off the view, in surface order; a node may itself be the
    /// replacing event of an earlier compaction.
    pub shadowed: Vec<u64>,
    /// [`Compaction::shadowed`] with every earlier replacing event resolved (recursively) to
    /// the append-origin events it hid: the original events this compaction stands for.
    pub resolved: Vec<u64>,
    /// The replacing event's `sourceEventSeqs`.
    pub source_event_seqs: Vec<u64>,
    /// The replacing message (`None` when the event derives none).
    pub message: Option<Value>,
    /// The view just before the replace.
    pub before: ViewSize,
    /// The view just after it.
    pub after: ViewSize,
    /// Seq of the later replace that shadowed this one's node, if any.
    pub covered_by: Option<u64>,
}

impl Session {
    /// Every surface replace of this session, in log order (see [`Compaction`]). Cost: one
    /// pass over the transcript plus the sizes of the messages it holds.
    pub fn compactions(&self) -> Vec<Compaction> {
        compactions_of(&self.transcript())
    }
}

/// The compaction history of a transcript (what [`Session::compactions`] returns).
pub fn compactions_of(transcript: &Transcript) -> Vec<Compaction> {
    // Per live node: (derives a message, its characters).
    let mut live: HashMap<u64, (bool, u64)> = HashMap::new();
    let mut resolved_of: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut index_of: HashMap<u64, usize> = HashMap::new();
    let (mut messages, mut chars) = (0u64, 0u64);
    let mut out: Vec<Compaction> = Vec::new();
    for entry in transcript.iter() {
        let seq = entry.seq();
        let size = entry.message().map(message_chars);
        match entry {
            TranscriptEntry::Message { .. } => {
                live.insert(seq, (size.is_some(), size.unwrap_or(0)));
                if let Some(c) = size {
                    messages += 1;
                    chars += c;
                }
            }
            TranscriptEntry::Replacement {
                event,
                start,
                end,
                shadowed_seqs,
                message,
            } => {
                let before = ViewSize::new(messages, chars);
                let mut resolved = Vec::with_capacity(shadowed_seqs.len());
                for s in shadowed_seqs.iter() {
                    if let Some((true, c)) = live.remove(s) {
                        messages -= 1;
                        chars -= c;
                    }
                    match resolved_of.get(s) {
                        Some(inner) => resolved.extend_from_slice(inner),
                        None => resolved.push(*s),
                    }
                    if let Some(&i) = index_of.get(s) {
                        out[i].covered_by = Some(seq);
                    }
                }
                live.insert(seq, (size.is_some(), size.unwrap_or(0)));
                if let Some(c) = size {
                    messages += 1;
                    chars += c;
                }
                resolved_of.insert(seq, resolved.clone());
                index_of.insert(seq, out.len());
                out.push(Compaction {
                    seq,
                    event_type: event.event_type().to_owned(),
                    start: *start,
                    end: *end,
                    shadowed: shadowed_seqs.to_vec(),
                    resolved,
                    source_event_seqs: event.source_event_seqs().unwrap_or_default(),
                    message: message.clone(),
                    before,
                    after: ViewSize::new(messages, chars),
                    covered_by: None,
                });
            }
        }
    }
    out
}

/// The size of a list of messages (see the module docs for the rule).
pub fn view_size<'a>(messages: impl IntoIterator<Item = &'a Value>) -> ViewSize {
    let (mut n, mut chars) = (0u64, 0u64);
    for m in messages {
        n += 1;
        chars += message_chars(m);
    }
    ViewSize::new(n, chars)
}

/// What changed in the model's view between two points of a log, as [`view_diff`] reports it.
///
/// Applying it to the surface nodes at `from` gives the nodes at `to`: drop every
/// [`ViewDiff::left`] node (the others keep their order), then put every
/// [`ViewDiff::entered`] node, in order, after the node it [`follows`](EnteredNode::follows)
/// (at the start when `None`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ViewDiff {
    /// The earlier point: the view just after event `from`.
    pub from: u64,
    /// The later point: the view just after event `to`.
    pub to: u64,
    /// The view at `from`.
    pub before: ViewSize,
    /// The view at `to`.
    pub after: ViewSize,
    /// Surface nodes at `from` that are not at `to`, in their order at `from`.
    pub left: Vec<LeftNode>,
    /// Surface nodes at `to` that were not at `from`, in their order at `to`.
    pub entered: Vec<EnteredNode>,
}

impl ViewDiff {
    /// Whether the view did not change.
    pub fn is_empty(&self) -> bool {
        self.left.is_empty() && self.entered.is_empty()
    }
}

/// A surface node that left the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeftNode {
    /// Its seq.
    pub seq: u64,
    /// The replacing event in the `to` view that (perhaps through later replaces) covers it.
    /// Always `Some` for a log that folds: a node leaves the view only by a replace, and the
    /// last replace of such a chain is itself in the view.
    pub replaced_by: Option<u64>,
}

/// A surface node that entered the view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnteredNode {
    /// Its seq.
    pub seq: u64,
    /// The nearest node before it in the `to` view that was already in the `from` view
    /// (`None`: no such node precedes it).
    pub follows: Option<u64>,
    /// The nodes of the `from` view it stands in place of (see [`LeftNode::replaced_by`]),
    /// in their order at `from`.
    pub replaces: Vec<u64>,
}

/// The change of the model's view of `events` (a log from seq 0) between the point just after
/// event `from` and the point just after its last event (`to`). A `from` at or past the last
/// event gives an empty diff at the last event; an empty log gives an empty diff at 0. Cost:
/// two folds of the log (up to `from`, then all of it) and the sizes of both views.
///
/// ```
/// use session_core::FixedClock;
/// use session_core::json::parse;
/// use session_surface::{Draft, Session, view_diff};
/// use std::sync::Arc;
///
/// let user = |text: &str| {
///     parse(&format!(
///         r#"{{"id":"{text}","role":"user","content":[{{"type":"text","text":"{text}"}}],"source":{{"kind":"user"}}}}"#
///     ))
/// };
/// let mut s = Session::create("d", None, None, Arc::new(FixedClock::new(1)))?;
/// s.append(Draft::new("user/message", user("a")?).append_op())?; // seq 0
/// s.append(Draft::new("user/message", user("b")?).append_op())?; // seq 1
/// s.append(Draft::new("user/message", user("ab")?).replace_op(0, 1).sources(&[0, 1]))?; // seq 2
/// let diff = view_diff(&s.events(), 1)?;
/// assert_eq!((diff.from, diff.to), (1, 2));
/// assert_eq!(diff.left.iter().map(|l| (l.seq, l.replaced_by)).collect::<Vec<_>>(),
///            [(0, Some(2)), (1, Some(2))]);
/// assert_eq!(diff.entered[0].seq, 2);
/// assert_eq!(diff.entered[0].replaces, [0, 1]);
/// assert_eq!((diff.before.messages, diff.after.messages), (2, 1));
/// assert!(view_diff(&s.events(), 2)?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn view_diff(events: &Events, from: u64) -> Result<ViewDiff, SurfaceError> {
    let to = (events.len() as u64).saturating_sub(1);
    let from = from.min(to);
    let from_nodes =
        fold_events(&events.prefix(usize::try_from(from).unwrap_or(usize::MAX) + 1))?.nodes;
    let fold = fold_events(events)?;
    let to_nodes = fold.nodes;
    let from_set: HashSet<u64> = from_nodes.iter().copied().collect();
    let to_set: HashSet<u64> = to_nodes.iter().copied().collect();
    let mut shadowed_by: HashMap<u64, u64> = HashMap::new();
    for r in &fold.replacements {
        for s in &r.shadowed_seqs {
            shadowed_by.insert(*s, r.seq);
        }
    }
    // A node that left stands in the `to` view as the replace that (perhaps through later
    // replaces) covers it. Each step goes to a later seq, so the walk ends.
    let stand_in = |mut seq: u64| -> Option<u64> {
        while let Some(&by) = shadowed_by.get(&seq) {
            if to_set.contains(&by) {
                return Some(by);
            }
            seq = by;
        }
        None
    };
    let left: Vec<LeftNode> = from_nodes
        .iter()
        .filter(|n| !to_set.contains(n))
        .map(|&seq| LeftNode {
            seq,
            replaced_by: stand_in(seq),
        })
        .collect();
    let mut replaces: HashMap<u64, Vec<u64>> = HashMap::new();
    for l in &left {
        if let Some(by) = l.replaced_by {
            replaces.entry(by).or_default().push(l.seq);
        }
    }
    let mut entered = Vec::new();
    let mut follows = None;
    for &seq in &to_nodes {
        if from_set.contains(&seq) {
            follows = Some(seq);
        } else {
            entered.push(EnteredNode {
                seq,
                follows,
                replaces: replaces.remove(&seq).unwrap_or_default(),
            });
        }
    }
    Ok(ViewDiff {
        from,
        to,
        before: nodes_size(events, &from_nodes),
        after: nodes_size(events, &to_nodes),
        left,
        entered,
    })
}

/// The size of the view the surface nodes `nodes` of `events` make.
fn nodes_size(events: &Events, nodes: &[u64]) -> ViewSize {
    let (mut n, mut chars) = (0u64, 0u64);
    for &seq in nodes {
        let message = usize::try_from(seq)
            .ok()
            .and_then(|i| events.get(i))
            .and_then(derive_event_message);
        if let Some(m) = message {
            n += 1;
            chars += message_chars(m);
        }
    }
    ViewSize::new(n, chars)
}
