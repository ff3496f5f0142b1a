//! The frozen, append-only event log and its O(1) snapshots.

use crate::Error;
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
    if vector.len() % IMBL_CHUNK == IMBL_CHUNK - 1 {
        vector.push_back(value.clone());
        // The tail is full now: the next push moves it into the tree, and the pop leaves an
        // empty tail behind.
        vector.push_back(value);
        vector.pop_back();
    } else {
        vector.push_back(value);
    }
}

/// Iterates a persistent vector leaf by leaf: the elements of each 64-element chunk are walked
/// as a slice.
///
/// `imbl`'s own iterator looks every element up through its focus (a range test and a path
/// through the tree per element); a pass over a 10^6-event log spent about as long in those
/// lookups as in the work it did per event. This one looks up each leaf chunk once
/// (`imbl::Vector::leaves`) and then steps through the slice, in either direction.
pub struct LeafIter<'a, T> {
    leaves: imbl::vector::Chunks<'a, T, imbl::shared_ptr::DefaultSharedPtr>,
    front: std::slice::Iter<'a, T>,
    back: std::slice::Iter<'a, T>,
    len: usize,
}

impl<'a, T> LeafIter<'a, T> {
    /// Iterates over `vector`.
    pub fn new(vector: &'a imbl::Vector<T>) -> LeafIter<'a, T> {
        LeafIter {
            leaves: vector.leaves(),
            front: [].iter(),
            back: [].iter(),
            len: vector.len(),
        }
    }
}

impl<'a, T> Iterator for LeafIter<'a, T> {
    type Item = &'a T;

    #[inline]
    fn next(&mut self) -> Option<&'a T> {
        loop {
            if let Some(item) = self.front.next() {
                self.len -= 1;
                return Some(item);
            }
            if let Some(leaf) = self.leaves.next() {
                self.front = leaf.iter();
            } else {
                let item = self.back.next()?;
                self.len -= 1;
                return Some(item);
            }
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.len, Some(self.len))
    }

    fn fold<B, F: FnMut(B, &'a T) -> B>(self, init: B, mut f: F) -> B {
        let mut acc = self.front.fold(init, &mut f);
        for leaf in self.leaves {
            acc = leaf.iter().fold(acc, &mut f);
        }
        self.back.fold(acc, f)
    }
}

impl<'a, T> DoubleEndedIterator for LeafIter<'a, T> {
    #[inline]
    fn next_back(&mut self) -> Option<&'a T> {
        loop {
            if let Some(item) = self.back.next_back() {
                self.len -= 1;
                return Some(item);
            }
            if let Some(leaf) = self.leaves.next_back() {
                self.back = leaf.iter();
            } else {
                let item = self.front.next_back()?;
                self.len -= 1;
                return Some(item);
            }
        }
    }
}

impl<T> ExactSizeIterator for LeafIter<'_, T> {}

impl<T> std::iter::FusedIterator for LeafIter<'_, T> {}

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
        push_back_sealed(&mut self.events, event);
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
        LeafIter::new(&self.events)
    }
}

/// A persistent vector of `events`, whose memory is given back as the list grows (it is
/// consumed from the end in steps), so a large conversion does not need room for two copies
/// of the handles.
///
/// The result's tail is left as [`push_back_sealed`] leaves it, so that later pushes into it
/// and into its clones stay cheap: the bulk part is a whole number of chunks (each step a
/// multiple of 64 long), its full tail chunk is moved into the tree, and the last
/// `len % 64` events are pushed one by one.
fn list_from_vec(mut events: Vec<Event>) -> imbl::Vector<Event> {
    const STEP: usize = 1 << 15;
    let rest = events.split_off(events.len() - events.len() % IMBL_CHUNK);
    let mut list = imbl::Vector::new();
    while !events.is_empty() {
        let keep = events.len().saturating_sub(STEP);
        let mut tail: imbl::Vector<Event> = events.drain(keep..).collect();
        tail.append(list);
        list = tail;
        events.shrink_to(keep);
    }
    if let Some(last) = list.back().cloned() {
        list.push_back(last);
        list.pop_back();
    }
    for event in rest {
        push_back_sealed(&mut list, event);
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
    pub fn iter(&self) -> LeafIter<'_, Event> {
        LeafIter::new(&self.events)
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// The leaf iterator yields what `imbl`'s element iterator yields, from both ends in
        /// any interleaving, with an exact length at every step, on every shape of list.
        #[test]
        fn leaf_iteration_matches_element_iteration(
            n in 0usize..5_000,
            shape in 0u8..4,
            cut in 0usize..5_000,
            steps in proptest::collection::vec(proptest::bool::ANY, 0..300),
        ) {
            let list: imbl::Vector<usize> = match shape {
                0 => (0..n).collect(),
                1 => {
                    // As `list_from_vec` builds a bulk list: steps concatenated in front.
                    let mut list = imbl::Vector::new();
                    for start in (0..n).step_by(640).rev() {
                        let mut step: imbl::Vector<usize> = (start..n.min(start + 640)).collect();
                        step.append(list);
                        list = step;
                    }
                    list
                }
                2 => {
                    let mut list: imbl::Vector<usize> = (0..n).collect();
                    list.truncate(cut.min(n));
                    list
                }
                _ => {
                    let list: imbl::Vector<usize> = (0..n).collect();
                    let mut child = list.clone().split_off(cut.min(n));
                    push_back_sealed(&mut child, usize::MAX);
                    child
                }
            };
            let expected: Vec<usize> = list.iter().copied().collect();
            proptest::prop_assert!(LeafIter::new(&list).copied().eq(expected.iter().copied()));
            proptest::prop_assert_eq!(
                LeafIter::new(&list).fold(Vec::new(), |mut v, x| { v.push(*x); v }),
                expected.clone()
            );
            proptest::prop_assert!(LeafIter::new(&list).rev().copied().eq(expected.iter().rev().copied()));
            // Both ends, interleaved as `steps` says, then the rest from the front.
            let (mut front, mut back) = (0usize, expected.len());
            let mut it = LeafIter::new(&list);
            for from_back in steps {
                proptest::prop_assert_eq!(it.len(), back - front);
                if from_back {
                    let got = it.next_back();
                    proptest::prop_assert_eq!(got, (back > front).then(|| &expected[back - 1]));
                    back = back.saturating_sub(1).max(front);
                } else {
                    let got = it.next();
                    proptest::prop_assert_eq!(got, (front < back).then(|| &expected[front]));
                    front = (front + 1).min(back);
                }
            }
            proptest::prop_assert_eq!(it.len(), back - front);
            let rest: Vec<usize> = it.copied().collect();
            proptest::prop_assert_eq!(&rest[..], &expected[front..back]);
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
        assert_eq!(log.snapshot().prefix(1), snap);
    }
}
