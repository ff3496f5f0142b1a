//! The session restore that runs while a log is read: the coordinator's
//! [`StoredEventSink`] for [`Backend::load_stored_into`](crate::Backend::load_stored_into).
//!
//! A cold preparation normalizes the stored events, adds the crash closers and restores the
//! session from them ([`Session::from_restore_events`](session_surface::Session)). Run after
//! the read, that is one serial pass over the whole log while the other cores idle. The sink
//! does the same work on each batch of events as the reader accepts it (on the reading
//! thread, while the decoding threads go on with the next frames): each event is checked to be
//! one the normalization keeps as it is ([`is_kept_as_read`]) and pushed into a
//! [`RestoreBuilder`]. Whatever falls outside that path (an event the normalization would
//! migrate or refuse, a restore error, an invalid header) stops the builder: the sink keeps the
//! events as received, and the preparation runs the whole-log path on them, which reports the
//! same errors in the same order as before. Invariant: **both paths give the same session or
//! the same error** (`the_restore_during_the_read_matches_the_restore_after_it`).

use std::collections::HashMap;
use std::sync::Arc;

use session_core::json::Value;
use session_core::{Event, SharedClock};
use session_surface::RestoreBuilder;

use crate::backend::StoredEventSink;
use crate::normalize::is_kept_as_read;

/// What a [`RestoreSink`] received.
pub(super) enum Received {
    /// Every event was kept as read and accepted by the restore: the builder holds them.
    Built(Box<RestoreBuilder>),
    /// The events as received (the restore stopped, or never started).
    Raw(Vec<Event>),
}

/// Restores the session of `id` from the events of a read as they arrive (module docs).
pub(super) struct RestoreSink {
    id: Arc<str>,
    clock: SharedClock,
    builder: Option<RestoreBuilder>,
    /// The events received once the builder stopped (all of them).
    raw: Vec<Event>,
    /// The message ids of the events so far, for [`is_kept_as_read`].
    message_ids: HashMap<u64, Value>,
}

impl RestoreSink {
    pub(super) fn new(id: &str, clock: SharedClock) -> RestoreSink {
        RestoreSink {
            id: id.into(),
            clock,
            builder: None,
            raw: Vec::new(),
            message_ids: HashMap::new(),
        }
    }

    /// Takes what was received, leaving the sink as new.
    pub(super) fn take(&mut self) -> Received {
        let fresh = RestoreSink::new(&self.id, self.clock.clone());
        let sink = std::mem::replace(self, fresh);
        match sink.builder {
            Some(builder) => Received::Built(Box::new(builder)),
            None => Received::Raw(sink.raw),
        }
    }
}

impl StoredEventSink for RestoreSink {
    fn start(&mut self, header: &Value) {
        self.raw = Vec::new();
        self.message_ids.clear();
        self.builder = RestoreBuilder::new(self.id.clone(), header, self.clock.clone()).ok();
    }

    fn accept(&mut self, events: &mut Vec<Event>) {
        for event in events.drain(..) {
            if let Some(builder) = &mut self.builder {
                let refused = if is_kept_as_read(&event, &self.id, &mut self.message_ids) {
                    match builder.try_push(event) {
                        Ok(()) => continue,
                        Err((event, _)) => event,
                    }
                } else {
                    event
                };
                // The events before this one were kept as read: they are the builder's log.
                self.raw = builder.events().iter().cloned().collect();
                self.builder = None;
                self.raw.push(refused);
                continue;
            }
            self.raw.push(event);
        }
    }
}
