//! The compaction history of a session: every surface replace, what it hid, and how the
//! model's view changed size.
//!
//! [`Session::compactions`] walks the session's [`Transcript`] once (O(surface events)), so it
//! costs no more than reading the transcript, and needs no second fold of the log.
//!
//! # Sizes
//!
//! A view's size is counted three ways ([`ViewSize`]): messages (surface nodes that derive a
//! message), characters and approximate tokens. Characters are the Unicode scalar values of
//! every string value inside each message's `content` (text blocks, tool arguments and
//! outputs, nested results), without object keys; ids, roles and sources are not counted.
//! Tokens are `ceil(characters / 4)` ([`approx_tokens`]), the usual rule of thumb for English
//! text and code; no tokenizer is involved.

use std::collections::HashMap;

use session_core::json::Value;

use crate::session::Session;
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
