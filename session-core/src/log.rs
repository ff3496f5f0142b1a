//! The frozen, append-only event log and its O(1) snapshots.

use crate::Error;
use crate::chunked::{ChunkedList, LeafIter};
use crate::event::Event;

/// The branching factor of `imbl`'s vectors (its default configuration).
const IMBL_CHUNK: usize = 64;

/// Appends `value` to a persistent vector and keeps its tail chunk from being full, so that
/// the first push into a clone never copies a path of the shared tree.
///
/// An `imbl` vector buffers its last elements in a tail chunk of 64 and moves a full chunk into
/// its tree on the next push. When that vector is shared (a snapshot, a checkpoint, a fork's
/// parent and child), the move copies every tree node on the path from the root, 64 entries
/// each: several microseconds at 10^6 elements, paid by whichever clone pushes first. Pushing
/// through this function makes the move happen right after the tail fills (one extra push
/// and pop every 64 pushes), so a clone taken between pushes always finds room in the tail and
/// its first push copies at most one chunk. Built for vectors grown by pushes from empty; on
/// others it is still correct, and only as fast as a plain push.
pub fn push_back_sealed<T: Clone>(vector: &mut imbl::Vector<T>, value: T) {
    vector.push_back(value);
    if vector.len().is_multiple_of(IMBL_CHUNK) {
        seal_tail(vector);
    }
}

/// Moves a vector's tail chunk into its tree when the tail is full, leaving it empty: a push
/// moves the full tail, and the pop takes the pushed copy back out. On a vector whose tail is
/// not full it changes nothing that can be seen.
pub(crate) fn seal_tail<T: Clone>(vector: &mut imbl::Vector<T>) {
    if let Some(last) = vector.back().cloned() {
        vector.push_back(last);
        vector.pop_back();
    }
}

/// The append-only event log of one session.
///
/// Each event's `seq` equals its index, so the log is contiguous from 0 by construction.
/// Events are never changed or removed. Storage is persistent and shared (a list of 64-event
/// chunks that clones share, and a tail written in place while no clone shares it), so
/// [`Log::snapshot`] is O(1) and a snapshot never sees later appends; a fork's child can share
/// its parent's prefix ([`Events::prefix`]) instead of copying it.
#[derive(Clone, Default)]
pub struct Log {
    events: ChunkedList<Event>,
}

/// A frozen view of a log: the events at the moment the snapshot was taken. It never grows.
#[derive(Clone, Default)]
pub struct Events {
    events: ChunkedList<Event>,
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
        self.events.last()
    }

    /// Appends an event whose seq must equal [`Log::next_seq`].
    pub fn push(&mut self, event: Event) -> Result<(), Error> {
        self.try_push(event).map_err(|(_, e)| e)
    }

    /// [`Log::push`], handing the event back with the error when it is refused.
    pub fn try_push(&mut self, event: Event) -> Result<(), (Event, Error)> {
        let expected = self.next_seq();
        let got = event.seq();
        if got != expected {
            return Err((event, Error::SeqMismatch { expected, got }));
        }
        self.events.push(event);
        Ok(())
    }

    /// An O(1) frozen snapshot of the current events.
    pub fn snapshot(&self) -> Events {
        Events {
            events: self.events.clone(),
        }
    }

    /// Iterates over the events in seq order.
    pub fn iter(&self) -> LeafIter<'_, Event> {
        self.events.iter()
    }
}

impl Events {
    /// Builds a frozen list from events (no seq check; see [`Log::push`] for a checked log).
    ///
    /// The vector's memory is given back as the list grows (it is consumed from the end in
    /// steps), so converting a large log does not need room for two copies of its handles.
    pub fn from_vec(events: Vec<Event>) -> Events {
        Events {
            events: ChunkedList::from_vec(events),
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
        self.events.last()
    }

    /// The first `len` events, sharing storage (O(log n)).
    #[must_use]
    pub fn prefix(&self, len: usize) -> Events {
        Events {
            events: self.events.prefix(len),
        }
    }

    /// The events from index `start` on, sharing storage (O(log n)).
    #[must_use]
    pub fn suffix(&self, start: usize) -> Events {
        Events {
            events: self.events.suffix(start),
        }
    }

    /// Iterates over the events.
    pub fn iter(&self) -> LeafIter<'_, Event> {
        self.events.iter()
    }

    /// Copies the handles into a `Vec` (O(n); events themselves are shared).
    pub fn to_vec(&self) -> Vec<Event> {
        self.iter().cloned().collect()
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
        f.debug_list().entries(self.iter()).finish()
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Log {
    type Item = &'a Event;
    type IntoIter = LeafIter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = LeafIter<'a, Event>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
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
    fn sealed_pushes_keep_every_element_in_order_through_clones() {
        // Across several tail fills, with clones taken at every length around a chunk
        // boundary pushing their own elements: no clone sees another's pushes, and each holds
        // exactly what a plain vector would.
        let mut vector: imbl::Vector<usize> = imbl::Vector::new();
        let mut plain = Vec::new();
        for i in 0..1_000 {
            push_back_sealed(&mut vector, i);
            plain.push(i);
            if i % 61 == 0 || (i % IMBL_CHUNK) >= IMBL_CHUNK - 2 {
                let mut child = vector.clone();
                push_back_sealed(&mut child, usize::MAX);
                assert_eq!(child.len(), plain.len() + 1);
                assert_eq!(child.back(), Some(&usize::MAX));
                assert!(child.iter().take(plain.len()).eq(plain.iter()));
            }
            assert_eq!(vector.len(), plain.len());
        }
        assert!(vector.iter().eq(plain.iter()));
    }

    #[test]
    fn large_vectors_convert_in_order() {
        let events: Vec<Event> = (0..300_001).map(ev).collect();
        let list = Events::from_vec(events.clone());
        assert_eq!(list.len(), events.len());
        assert!(list.iter().zip(&events).all(|(a, b)| a.ptr_eq(b)));
        assert_eq!(list.get(277_777).map(Event::seq), Some(277_777));
        assert_eq!(Events::from(vec![ev(0)]).len(), 1);
        // Around the chunk size and the conversion step: the bulk part, the pushed rest and
        // pushes after the conversion all land in order.
        for n in [0, 1, 63, 64, 65, 127, 128, 129, 32_768, 32_769, 65_600] {
            let events: Vec<Event> = (0..n).map(ev).collect();
            let mut log = Log::from_events(Events::from_vec(events.clone()));
            log.push(ev(n)).unwrap();
            assert_eq!(log.len(), events.len() + 1);
            assert!(log.iter().zip(&events).all(|(a, b)| a.ptr_eq(b)));
            assert_eq!(log.last().map(Event::seq), Some(n));
        }
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
        let refused = ev(7);
        let (back, e) = log.try_push(refused.clone()).unwrap_err();
        assert!(back.ptr_eq(&refused));
        assert!(matches!(
            e,
            Error::SeqMismatch {
                expected: 2,
                got: 7
            }
        ));
        assert_eq!(log.len(), 2);
        assert_eq!(log.snapshot().prefix(1), snap);
    }
}
