//! The human-readable view of a session: what was said, including what was later compacted.
//!
//! The model reads the surface, where a replace hides the nodes it shadows. A person reading
//! the session should still see the originals, with a marker where a replacement happened.
//! The [`Transcript`] is that view:
//!
//! - every append-origin surface event (`surfaceOp: "append"`), in log order, as a
//!   [`TranscriptEntry::Message`], whether or not it was later shadowed;
//! - every replacing surface event, in log order, as a [`TranscriptEntry::Replacement`]
//!   marker that names the replaced range, the seqs it shadowed and its own message, so a UI
//!   can show "compacted here" next to the originals.
//!
//! Log-only events (turns, steps, chunks, tool calls, plugin records) are not part of it.

use std::fmt;
use std::sync::Arc;

use session_core::Event;
use session_core::event::SurfaceOp;
use session_core::json::Value;

use crate::derive::derive_event_message;
use crate::surface::{Replacement, Surface, SurfaceError};

/// One entry of a [`Transcript`].
#[derive(Clone)]
#[non_exhaustive]
pub enum TranscriptEntry {
    /// An append-origin surface event.
    Message {
        /// The event.
        event: Event,
        /// Its derived message (`None` for an assistant message with empty content).
        message: Option<Value>,
    },
    /// A replacing surface event: the marker for a compaction or rewrite.
    Replacement {
        /// The replacing event.
        event: Event,
        /// `start` of its replace op.
        start: u64,
        /// `end` of its replace op.
        end: u64,
        /// The seqs it took off the surface, in surface order.
        shadowed_seqs: Arc<[u64]>,
        /// The replacing message (`None` if it derives none).
        message: Option<Value>,
    },
}

impl TranscriptEntry {
    /// Builds the entry for a committed surface event, given the seqs it shadowed; `None` for
    /// a log-only event.
    pub(crate) fn for_event(event: &Event, shadowed: &[u64]) -> Option<TranscriptEntry> {
        if !event.is_surface_event() {
            return None;
        }
        let message = derive_event_message(event).cloned();
        match event.surface_op()? {
            SurfaceOp::Append => Some(TranscriptEntry::Message {
                event: event.clone(),
                message,
            }),
            SurfaceOp::Replace { start, end } => Some(TranscriptEntry::Replacement {
                event: event.clone(),
                start,
                end,
                shadowed_seqs: shadowed.into(),
                message,
            }),
        }
    }

    /// The event.
    pub fn event(&self) -> &Event {
        match self {
            TranscriptEntry::Message { event, .. } | TranscriptEntry::Replacement { event, .. } => {
                event
            }
        }
    }

    /// The event's seq.
    pub fn seq(&self) -> u64 {
        self.event().seq()
    }

    /// The derived message, if any.
    pub fn message(&self) -> Option<&Value> {
        match self {
            TranscriptEntry::Message { message, .. }
            | TranscriptEntry::Replacement { message, .. } => message.as_ref(),
        }
    }

    /// Whether this is a replacement marker.
    pub fn is_replacement(&self) -> bool {
        matches!(self, TranscriptEntry::Replacement { .. })
    }
}

impl fmt::Debug for TranscriptEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TranscriptEntry::Message { event, .. } => f
                .debug_struct("Message")
                .field("seq", &event.seq())
                .finish(),
            TranscriptEntry::Replacement {
                event,
                start,
                end,
                shadowed_seqs,
                ..
            } => f
                .debug_struct("Replacement")
                .field("seq", &event.seq())
                .field("start", start)
                .field("end", end)
                .field("shadowed_seqs", shadowed_seqs)
                .finish(),
        }
    }
}

impl PartialEq for TranscriptEntry {
    fn eq(&self, other: &TranscriptEntry) -> bool {
        match (self, other) {
            (
                TranscriptEntry::Message { event: a, .. },
                TranscriptEntry::Message { event: b, .. },
            ) => a == b,
            (
                TranscriptEntry::Replacement {
                    event: a,
                    shadowed_seqs: sa,
                    ..
                },
                TranscriptEntry::Replacement {
                    event: b,
                    shadowed_seqs: sb,
                    ..
                },
            ) => a == b && sa == sb,
            _ => false,
        }
    }
}

/// The human view of a session (see the module docs): an O(1) snapshot that never changes.
#[derive(Clone, Default, PartialEq)]
pub struct Transcript(imbl::Vector<TranscriptEntry>);

impl Transcript {
    pub(crate) fn from_vector(v: imbl::Vector<TranscriptEntry>) -> Transcript {
        Transcript(v)
    }

    /// Builds the transcript of a complete log (from seq 0), validating its surface on the way.
    pub fn from_events<'a>(
        events: impl IntoIterator<Item = &'a Event>,
    ) -> Result<Transcript, SurfaceError> {
        let mut surface = Surface::new();
        let mut seen: Vec<&'a Event> = Vec::new();
        let mut entries = imbl::Vector::new();
        for event in events {
            let plan = {
                let lookup = |seq: u64| {
                    usize::try_from(seq)
                        .ok()
                        .and_then(|i| seen.get(i))
                        .map(|e| (*e).clone())
                };
                surface.plan(event, &lookup)?
            };
            if let Some(entry) = TranscriptEntry::for_event(event, plan.shadowed()) {
                entries.push_back(entry);
            }
            surface.apply(plan);
            seen.push(event);
        }
        Ok(Transcript(entries))
    }

    /// Iterates over the entries in log order.
    pub fn iter(
        &self,
    ) -> impl ExactSizeIterator<Item = &TranscriptEntry> + DoubleEndedIterator + '_ {
        self.0.iter()
    }

    /// The replacement history in log order, as [`fold_surface`](crate::fold_surface)
    /// reports it for the same events.
    pub fn replacements(&self) -> Vec<Replacement> {
        self.0
            .iter()
            .filter_map(|entry| match entry {
                TranscriptEntry::Replacement {
                    event,
                    start,
                    end,
                    shadowed_seqs,
                    ..
                } => Some(Replacement {
                    seq: event.seq(),
                    start: *start,
                    end: *end,
                    shadowed_seqs: shadowed_seqs.to_vec(),
                }),
                TranscriptEntry::Message { .. } => None,
            })
            .collect()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entry at index `i`.
    pub fn get(&self, i: usize) -> Option<&TranscriptEntry> {
        self.0.get(i)
    }

    /// The entries as a `Vec` (O(n); events and messages are shared).
    pub fn to_vec(&self) -> Vec<TranscriptEntry> {
        self.0.iter().cloned().collect()
    }
}

impl fmt::Debug for Transcript {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}
