//! The storage of a log: a persistent, append-only list of chunks ([`ChunkedList`]) and its
//! iterator ([`LeafIter`]).
//!
//! A log only ever grows at its end and its elements never change, so it needs less than a
//! general persistent vector: full chunks of [`CHUNK`] elements, shared by every clone, and one
//! partial tail chunk. A push writes into the tail in place while no clone shares it; a full
//! tail moves into the shared list of chunks, one persistent-vector push per [`CHUNK`] elements.
//! An `imbl::Vector` of the elements themselves paid a persistent-vector push for every element:
//! `Log::push` took twice the instructions in a restore (BENCHMARKS.md, "Whole-program
//! optimization, the chunked log and a vectorized UTF-8 check").

use std::sync::Arc;

use crate::log::{push_back_sealed, seal_tail};

/// Elements per chunk.
pub(crate) const CHUNK: usize = 64;

/// The elements converted at a time by [`ChunkedList::from_vec`] (a multiple of [`CHUNK`]).
const FROM_VEC_STEP: usize = 1 << 15;

/// A persistent, append-only list. Clones are O(1) and never see each other's pushes;
/// [`ChunkedList::prefix`] and [`ChunkedList::suffix`] share storage with their list.
///
/// Invariants: every chunk of `chunks` holds exactly [`CHUNK`] elements; `tail` holds fewer;
/// `skip < CHUNK`, and `skip` is 0 when `chunks` is empty.
#[derive(Clone)]
pub(crate) struct ChunkedList<T> {
    /// The full chunks, in order.
    chunks: imbl::Vector<Arc<Vec<T>>>,
    /// The last elements, fewer than a chunk.
    tail: Arc<Vec<T>>,
    /// The leading elements of the first chunk that are not part of the list (left by
    /// [`ChunkedList::suffix`]).
    skip: usize,
}

impl<T> Default for ChunkedList<T> {
    fn default() -> ChunkedList<T> {
        ChunkedList {
            chunks: imbl::Vector::new(),
            tail: Arc::new(Vec::new()),
            skip: 0,
        }
    }
}

/// A new tail chunk holding a copy of `items` (fewer than [`CHUNK`]), with room for a chunk.
fn tail_of<T: Clone>(items: &[T]) -> Vec<T> {
    let mut tail = Vec::with_capacity(CHUNK);
    tail.extend_from_slice(items);
    tail
}

impl<T: Clone> ChunkedList<T> {
    /// The number of elements.
    pub(crate) fn len(&self) -> usize {
        self.chunks.len() * CHUNK + self.tail.len() - self.skip
    }

    /// Whether the list has no elements.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `item`. The first push into a clone that shares the tail copies the tail (at
    /// most `CHUNK - 1` handles); no push copies a shared chunk.
    pub(crate) fn push(&mut self, item: T) {
        // One uniqueness test (`Arc::get_mut`, an atomic compare-and-swap) a push. With a
        // second one (`Arc::make_mut` after it), `Log::try_push` held 4.4-5.3 % of a
        // turn-batched restore's samples, against 2.8-2.9 % with one.
        if let Some(tail) = Arc::get_mut(&mut self.tail) {
            tail.push(item);
        } else {
            let mut tail = tail_of(&self.tail);
            tail.push(item);
            self.tail = Arc::new(tail);
        }
        if self.tail.len() == CHUNK {
            let full = std::mem::replace(&mut self.tail, Arc::new(Vec::with_capacity(CHUNK)));
            push_back_sealed(&mut self.chunks, full);
        }
    }

    /// The element at index `i`.
    pub(crate) fn get(&self, i: usize) -> Option<&T> {
        if i >= self.len() {
            return None;
        }
        let at = i + self.skip;
        match self.chunks.get(at / CHUNK) {
            Some(chunk) => chunk.get(at % CHUNK),
            None => self.tail.get(at - self.chunks.len() * CHUNK),
        }
    }

    /// The last element.
    pub(crate) fn last(&self) -> Option<&T> {
        // A chunk holds at least one element of the list (`skip < CHUNK`).
        self.tail
            .last()
            .or_else(|| self.chunks.back().and_then(|chunk| chunk.last()))
    }

    /// The first `len` elements (all of them when `len` is at least the length), sharing the
    /// full chunks (O(log n) and a copy of at most `CHUNK - 1` handles).
    #[must_use]
    pub(crate) fn prefix(&self, len: usize) -> ChunkedList<T> {
        if len >= self.len() {
            return self.clone();
        }
        let end = self.skip + len;
        let (full, rest) = (end / CHUNK, end % CHUNK);
        let source: &[T] = self.chunks.get(full).map_or(&self.tail, |chunk| chunk);
        let mut chunks = self.chunks.clone();
        chunks.truncate(full);
        // With no chunk left, the skip moves into the tail, which then starts at the list's
        // first element.
        let skip = if chunks.is_empty() { 0 } else { self.skip };
        let items = source.get(self.skip - skip..rest).unwrap_or_default();
        ChunkedList {
            chunks,
            tail: Arc::new(tail_of(items)),
            skip,
        }
    }

    /// The elements from index `start` on, sharing storage (O(log n); a copy of at most
    /// `CHUNK - 1` handles when `start` falls in the tail).
    #[must_use]
    pub(crate) fn suffix(&self, start: usize) -> ChunkedList<T> {
        if start >= self.len() {
            return ChunkedList::default();
        }
        let at = self.skip + start;
        let first = at / CHUNK;
        if first < self.chunks.len() {
            return ChunkedList {
                chunks: self.chunks.clone().split_off(first),
                tail: Arc::clone(&self.tail),
                skip: at % CHUNK,
            };
        }
        let from = at - self.chunks.len() * CHUNK;
        ChunkedList {
            chunks: imbl::Vector::new(),
            tail: Arc::new(tail_of(self.tail.get(from..).unwrap_or_default())),
            skip: 0,
        }
    }

    /// A list of `items`, in order. The vector's memory is given back as the list grows (it is
    /// consumed from the end in steps), so converting a large log does not need room for two
    /// copies of its handles.
    pub(crate) fn from_vec(mut items: Vec<T>) -> ChunkedList<T> {
        let bulk = items.len() - items.len() % CHUNK;
        let tail = Arc::new(tail_of(items.get(bulk..).unwrap_or_default()));
        items.truncate(bulk);
        let mut chunks: imbl::Vector<Arc<Vec<T>>> = imbl::Vector::new();
        while !items.is_empty() {
            // `items.len()` stays a multiple of `CHUNK`, and so does every step.
            let keep = items.len().saturating_sub(FROM_VEC_STEP);
            let mut step = imbl::Vector::new();
            let mut drained = items.drain(keep..);
            loop {
                let chunk: Vec<T> = drained.by_ref().take(CHUNK).collect();
                if chunk.is_empty() {
                    break;
                }
                step.push_back(Arc::new(chunk));
            }
            drop(drained);
            step.append(chunks);
            chunks = step;
            items.shrink_to(keep);
        }
        // The first chunk pushed into a clone then copies no path of the shared tree.
        seal_tail(&mut chunks);
        ChunkedList {
            chunks,
            tail,
            skip: 0,
        }
    }

    /// Iterates over the elements in order.
    pub(crate) fn iter(&self) -> LeafIter<'_, T> {
        let mut chunks = self.chunks.iter();
        let front = match chunks.next() {
            Some(first) => first.get(self.skip..).unwrap_or_default().iter(),
            None => [].iter(),
        };
        LeafIter {
            chunks,
            front,
            back: self.tail.iter(),
            len: self.len(),
        }
    }

    /// Whether both lists share the same storage and length.
    pub(crate) fn ptr_eq(&self, other: &ChunkedList<T>) -> bool {
        self.skip == other.skip
            && Arc::ptr_eq(&self.tail, &other.tail)
            && self.chunks.ptr_eq(&other.chunks)
    }
}

impl<T: Clone> FromIterator<T> for ChunkedList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> ChunkedList<T> {
        let mut list = ChunkedList::default();
        for item in iter {
            list.push(item);
        }
        list
    }
}

/// Iterates a log chunk by chunk: the elements of each chunk are walked as a slice, in either
/// direction, and the list of chunks is looked up once a chunk.
pub struct LeafIter<'a, T> {
    chunks: imbl::vector::Iter<'a, Arc<Vec<T>>, imbl::shared_ptr::DefaultSharedPtr>,
    front: std::slice::Iter<'a, T>,
    back: std::slice::Iter<'a, T>,
    len: usize,
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
            if let Some(chunk) = self.chunks.next() {
                self.front = chunk.iter();
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
        for chunk in self.chunks {
            acc = chunk.iter().fold(acc, &mut f);
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
            if let Some(chunk) = self.chunks.next_back() {
                self.back = chunk.iter();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a history of lists: each list is checked against a plain vector.
    #[derive(Debug, Clone)]
    enum Step {
        /// Push `n` elements onto list `of`.
        Push { of: usize, n: usize },
        /// A clone of list `of`.
        Clone { of: usize },
        /// The first `len` elements of list `of`.
        Prefix { of: usize, len: usize },
        /// The elements of list `of` from `start` on.
        Suffix { of: usize, start: usize },
        /// List `of` rebuilt from a vector of its elements.
        FromVec { of: usize },
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            3 => (0usize..8, 0usize..200).prop_map(|(of, n)| Step::Push { of, n }),
            1 => (0usize..8).prop_map(|of| Step::Clone { of }),
            2 => (0usize..8, 0usize..400).prop_map(|(of, len)| Step::Prefix { of, len }),
            2 => (0usize..8, 0usize..400).prop_map(|(of, start)| Step::Suffix { of, start }),
            1 => (0usize..8).prop_map(|of| Step::FromVec { of }),
        ]
    }

    /// Everything a list answers, against the vector it must equal.
    fn check(
        list: &ChunkedList<u32>,
        model: &[u32],
    ) -> Result<(), proptest::test_runner::TestCaseError> {
        use proptest::prop_assert_eq;
        prop_assert_eq!(list.len(), model.len());
        prop_assert_eq!(list.is_empty(), model.is_empty());
        prop_assert_eq!(list.last(), model.last());
        for i in [
            0,
            1,
            62,
            63,
            64,
            65,
            model.len().saturating_sub(1),
            model.len(),
            model.len() + 1,
        ] {
            prop_assert_eq!(list.get(i), model.get(i), "get({})", i);
        }
        for (i, want) in model.iter().enumerate().step_by(7) {
            prop_assert_eq!(list.get(i), Some(want), "get({})", i);
        }
        prop_assert_eq!(list.iter().copied().collect::<Vec<_>>(), model.to_vec());
        prop_assert_eq!(
            list.iter().rev().copied().collect::<Vec<_>>(),
            model.iter().rev().copied().collect::<Vec<_>>()
        );
        prop_assert_eq!(
            list.iter().fold(Vec::new(), |mut v, x| {
                v.push(*x);
                v
            }),
            model.to_vec()
        );
        prop_assert_eq!(list.iter().len(), model.len());
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any history of pushes, clones, prefixes, suffixes and conversions: every list holds
        /// exactly what a vector given the same steps holds, no list sees another's pushes, and
        /// the iterator answers the same from both ends in any interleaving.
        #[test]
        fn lists_match_vectors_through_any_history(
            steps in proptest::collection::vec(step(), 1..40),
            walk in proptest::collection::vec(proptest::bool::ANY, 0..300),
        ) {
            let mut lists: Vec<(ChunkedList<u32>, Vec<u32>)> = vec![(ChunkedList::default(), Vec::new())];
            let mut next = 0u32;
            for step in steps {
                let count = lists.len();
                let at = |of: usize| of % count;
                match step {
                    Step::Push { of, n } => {
                        let (list, model) = &mut lists[at(of)];
                        for _ in 0..n {
                            list.push(next);
                            model.push(next);
                            next += 1;
                        }
                    }
                    Step::Clone { of } => {
                        let copy = lists[at(of)].clone();
                        lists.push(copy);
                    }
                    Step::Prefix { of, len } => {
                        let (list, model) = &lists[at(of)];
                        let made = (list.prefix(len), model[..len.min(model.len())].to_vec());
                        lists.push(made);
                    }
                    Step::Suffix { of, start } => {
                        let (list, model) = &lists[at(of)];
                        let made = (list.suffix(start), model.get(start..).unwrap_or_default().to_vec());
                        lists.push(made);
                    }
                    Step::FromVec { of } => {
                        let model = lists[at(of)].1.clone();
                        lists.push((ChunkedList::from_vec(model.clone()), model));
                    }
                }
                for (list, model) in &lists {
                    check(list, model)?;
                }
            }
            // Both ends of the last list's iterator, interleaved as `walk` says.
            let (list, model) = lists.last().expect("a list");
            let (mut front, mut back) = (0usize, model.len());
            let mut it = list.iter();
            for from_back in walk {
                proptest::prop_assert_eq!(it.len(), back - front);
                if from_back {
                    let got = it.next_back();
                    proptest::prop_assert_eq!(got, (back > front).then(|| &model[back - 1]));
                    back = back.saturating_sub(1).max(front);
                } else {
                    let got = it.next();
                    proptest::prop_assert_eq!(got, (front < back).then(|| &model[front]));
                    front = (front + 1).min(back);
                }
            }
            let rest: Vec<u32> = it.copied().collect();
            proptest::prop_assert_eq!(&rest[..], &model[front..back]);
        }
    }

    #[test]
    fn pushes_into_a_clone_copy_no_shared_chunk() {
        let mut list: ChunkedList<u32> = (0..1_000).collect();
        let snapshot = list.clone();
        list.push(1_000);
        // The full chunks are still the snapshot's; only the tail was copied.
        assert!(list.chunks.ptr_eq(&snapshot.chunks));
        assert!(!Arc::ptr_eq(&list.tail, &snapshot.tail));
        assert!(snapshot.ptr_eq(&snapshot.clone()));
        assert!(!snapshot.ptr_eq(&list));
        // A tail written in place while unshared.
        let tail = Arc::as_ptr(&list.tail);
        list.push(1_001);
        assert_eq!(Arc::as_ptr(&list.tail), tail);
    }

    #[test]
    fn large_lists_convert_in_order() {
        for n in [
            0, 1, 63, 64, 65, 127, 128, 129, 32_768, 32_769, 65_600, 300_001,
        ] {
            let items: Vec<u32> = (0..n).collect();
            let mut list = ChunkedList::from_vec(items.clone());
            assert_eq!(list.len(), items.len());
            assert!(list.iter().eq(items.iter()));
            list.push(n);
            assert_eq!(list.last(), Some(&n));
            assert_eq!(
                list.get(n as usize / 2),
                items.get(n as usize / 2).or(Some(&n))
            );
        }
    }
}
