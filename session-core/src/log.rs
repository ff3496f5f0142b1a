//! The frozen, append-only event log and its O(1) snapshots.

use crate::Error;
use crate::event::Event;

/// The append-only event log of one session.
///
/// Each event's `seq` equals its index, so the log is contiguous from 0 by construction.
/// Events are never changed or removed. Storage is a persistent vector (structural sharing), so
/// [`Log::snapshot`] is O(1) and a snapshot never sees later appends; a fork's child can share
/// its parent's prefix ([`Events::prefix`]) instead of copying it.
#[derive(Clone, Default)]
pub struct Log {
    events: imbl::Vector<Event>,
}

/// A frozen view of a log: the events at the moment the snapshot was taken. It never grows.
#[derive(Clone, Default)]
pub struct Events {
    events: imbl::Vector<Event>,
}

impl Log {
    /// An empty log.
    pub fn new() -> Log {
        Log::default()
    }

    /// A log that continues from `prefix` (sharing its storage).
    pub fn from_events(prefix: Events) -> Log {
        Log {
            events: prefix.events,
        }
    }

    /// Number of events; also the seq the next event gets.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the log has no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }

    /// The event at `seq`.
    pub fn get(&self, seq: u64) -> Option<&Event> {
        usize::try_from(seq).ok().and_then(|i| self.events.get(i))
    }

    /// The last event.
    pub fn last(&self) -> Option<&Event> {
        self.events.back()
    }

    /// Appends an event whose seq must equal [`Log::next_seq`].
    pub fn push(&mut self, event: Event) -> Result<(), Error> {
        let expected = self.next_seq();
        if event.seq() != expected {
            return Err(Error::SeqMismatch {
                expected,
                got: event.seq(),
            });
        }
        self.events.push_back(event);
        Ok(())
    }

    /// An O(1) frozen snapshot of the current events.
    pub fn snapshot(&self) -> Events {
        Events {
            events: self.events.clone(),
        }
    }

    /// Iterates over the events in seq order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Event> + DoubleEndedIterator + '_ {
        self.events.iter()
    }
}

/// A persistent vector of `events`, whose memory is given back as the list grows (it is
/// consumed from the end in steps), so a large conversion does not need room for two copies
/// of the handles.
fn list_from_vec(mut events: Vec<Event>) -> imbl::Vector<Event> {
    const STEP: usize = 1 << 15;
    let mut list = imbl::Vector::new();
    while !events.is_empty() {
        let keep = events.len().saturating_sub(STEP);
        let mut tail: imbl::Vector<Event> = events.drain(keep..).collect();
        tail.append(list);
        list = tail;
        events.shrink_to(keep);
    }
    list
}

impl Events {
    /// Builds a frozen list from events (no seq check; see [`Log::push`] for a checked log).
    ///
    /// The vector's memory is given back as the list grows (it is consumed from the end in
    /// steps), so converting a large log does not need room for two copies of its handles.
    pub fn from_vec(events: Vec<Event>) -> Events {
        Events {
            events: list_from_vec(events),
        }
    }

    /// Number of events.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether there are no events.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The event at index `i`.
    pub fn get(&self, i: usize) -> Option<&Event> {
        self.events.get(i)
    }

    /// The last event.
    pub fn last(&self) -> Option<&Event> {
        self.events.back()
    }

    /// The first `len` events, sharing storage (O(log n)).
    #[must_use]
    pub fn prefix(&self, len: usize) -> Events {
        let mut events = self.events.clone();
        if len < events.len() {
            events.truncate(len);
        }
        Events { events }
    }

    /// The events from index `start` on, sharing storage (O(log n)).
    #[must_use]
    pub fn suffix(&self, start: usize) -> Events {
        if start >= self.events.len() {
            return Events::default();
        }
        Events {
            events: self.events.clone().split_off(start),
        }
    }

    /// Iterates over the events.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Event> + DoubleEndedIterator + '_ {
        self.events.iter()
    }

    /// Copies the handles into a `Vec` (O(n); events themselves are shared).
    pub fn to_vec(&self) -> Vec<Event> {
        self.events.iter().cloned().collect()
    }

    /// Whether both snapshots share the same storage and length.
    pub fn ptr_eq(&self, other: &Events) -> bool {
        self.events.ptr_eq(&other.events)
    }
}

impl PartialEq for Events {
    fn eq(&self, other: &Events) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.events.iter()).finish()
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.events.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = imbl::vector::Iter<'a, Event, imbl::shared_ptr::DefaultSharedPtr>;
    fn into_iter(self) -> Self::IntoIter {
        self.events.iter()
    }
}

impl From<Vec<Event>> for Events {
    fn from(events: Vec<Event>) -> Events {
        Events::from_vec(events)
    }
}

impl FromIterator<Event> for Events {
    fn from_iter<I: IntoIterator<Item = Event>>(iter: I) -> Events {
        Events {
            events: iter.into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Value;

    fn ev(seq: u64) -> Event {
        Event::appended("x", seq, 0, Value::Null, None, None)
    }

    #[test]
    fn large_vectors_convert_in_order() {
        let events: Vec<Event> = (0..300_001).map(ev).collect();
        let list = Events::from_vec(events.clone());
        assert_eq!(list.len(), events.len());
        assert!(list.iter().zip(&events).all(|(a, b)| a.ptr_eq(b)));
        assert_eq!(list.get(277_777).map(Event::seq), Some(277_777));
        assert_eq!(Events::from(vec![ev(0)]).len(), 1);
    }

    #[test]
    fn seq_is_length_and_snapshots_never_grow() {
        let mut log = Log::new();
        log.push(ev(0)).unwrap();
        let snap = log.snapshot();
        log.push(ev(1)).unwrap();
        assert_eq!(snap.len(), 1);
        assert_eq!(log.len(), 2);
        assert!(matches!(
            log.push(ev(5)),
            Err(Error::SeqMismatch {
                expected: 2,
                got: 5
            })
        ));
        assert_eq!(log.snapshot().prefix(1), snap);
    }
}
