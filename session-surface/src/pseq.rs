//! A persistent sequence with cheap snapshots and cheap middle edits.
//!
//! A treap whose nodes each hold a small chunk of consecutive elements, ordered by position
//! (implicit keys) and shared through `Arc`s. Cloning is O(1); `get`, `push_back` and
//! replacing a range by at most one element are O(log n) expected (plus the size of the
//! range and of one chunk); iteration is O(1) amortized per element. Every edit copies only
//! the path it touches, so earlier clones never change.

use std::sync::Arc;

/// Most elements a chunk holds.
const CHUNK: usize = 32;

type Link<T> = Option<Arc<Node<T>>>;

struct Node<T> {
    priority: u64,
    size: usize,
    left: Link<T>,
    chunk: Arc<[T]>,
    right: Link<T>,
}

/// A persistent sequence (see the module docs).
pub(crate) struct PSeq<T> {
    root: Link<T>,
    next_priority: u64,
}

impl<T> Clone for PSeq<T> {
    fn clone(&self) -> Self {
        PSeq {
            root: self.root.clone(),
            next_priority: self.next_priority,
        }
    }
}

impl<T> Default for PSeq<T> {
    fn default() -> Self {
        PSeq {
            root: None,
            next_priority: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

fn size<T>(t: Option<&Arc<Node<T>>>) -> usize {
    t.map_or(0, |n| n.size)
}

fn node<T>(priority: u64, left: Link<T>, chunk: Arc<[T]>, right: Link<T>) -> Arc<Node<T>> {
    Arc::new(Node {
        priority,
        size: size(left.as_ref()) + chunk.len() + size(right.as_ref()),
        left,
        chunk,
        right,
    })
}

/// A copy of `n` with a new left subtree.
fn with_left<T>(n: &Node<T>, left: Link<T>) -> Arc<Node<T>> {
    node(n.priority, left, n.chunk.clone(), n.right.clone())
}

/// A copy of `n` with a new right subtree.
fn with_right<T>(n: &Node<T>, right: Link<T>) -> Arc<Node<T>> {
    node(n.priority, n.left.clone(), n.chunk.clone(), right)
}

/// A copy of `n` with a new chunk.
fn with_chunk<T>(n: &Node<T>, chunk: Arc<[T]>) -> Arc<Node<T>> {
    node(n.priority, n.left.clone(), chunk, n.right.clone())
}

/// Concatenates two treaps.
fn merge<T>(first: Link<T>, second: Link<T>) -> Link<T> {
    match (first, second) {
        (None, t) | (t, None) => t,
        (Some(first), Some(second)) => {
            if first.priority >= second.priority {
                let right = merge(first.right.clone(), Some(second));
                Some(with_right(&first, right))
            } else {
                let left = merge(Some(first), second.left.clone());
                Some(with_left(&second, left))
            }
        }
    }
}

/// Splits a treap into its first `at` elements and the rest.
fn split<T: Clone>(tree: Option<&Arc<Node<T>>>, at: usize) -> (Link<T>, Link<T>) {
    let Some(n) = tree else {
        return (None, None);
    };
    let left_size = size(n.left.as_ref());
    let chunk_end = left_size + n.chunk.len();
    if at == 0 {
        (None, Some(n.clone()))
    } else if at >= n.size {
        (Some(n.clone()), None)
    } else if at <= left_size {
        let (head, tail) = split(n.left.as_ref(), at);
        (head, Some(with_left(n, tail)))
    } else if at >= chunk_end {
        let (head, tail) = split(n.right.as_ref(), at - chunk_end);
        (Some(with_right(n, head)), tail)
    } else {
        let cut = at - left_size;
        (
            Some(node(
                n.priority,
                n.left.clone(),
                n.chunk[..cut].into(),
                None,
            )),
            Some(node(
                n.priority,
                None,
                n.chunk[cut..].into(),
                n.right.clone(),
            )),
        )
    }
}

/// Appends `x` to the last chunk (which must have room).
fn push_into_last<T: Clone>(n: &Node<T>, x: T) -> Arc<Node<T>> {
    if let Some(r) = &n.right {
        return with_right(n, Some(push_into_last(r, x)));
    }
    let mut chunk = Vec::with_capacity(n.chunk.len() + 1);
    chunk.extend_from_slice(&n.chunk);
    chunk.push(x);
    with_chunk(n, chunk.into())
}

/// Replaces `count` elements at `at` by `insert` when the range lies inside one chunk,
/// copying only the path to that chunk; `None` when the range crosses a chunk boundary.
fn replace_within<T: Clone>(
    tree: Option<&Arc<Node<T>>>,
    at: usize,
    count: usize,
    insert: Option<&T>,
) -> Option<Link<T>> {
    let n = tree?;
    let left_size = size(n.left.as_ref());
    let chunk_end = left_size + n.chunk.len();
    if at + count <= left_size && at < left_size {
        let left = replace_within(n.left.as_ref(), at, count, insert)?;
        Some(Some(with_left(n, left)))
    } else if at >= chunk_end {
        let right = replace_within(n.right.as_ref(), at - chunk_end, count, insert)?;
        Some(Some(with_right(n, right)))
    } else if at >= left_size && at + count <= chunk_end {
        let cut = at - left_size;
        let mut chunk: Vec<T> = Vec::with_capacity(n.chunk.len() + 1);
        chunk.extend_from_slice(&n.chunk[..cut]);
        chunk.extend(insert.cloned());
        chunk.extend_from_slice(&n.chunk[cut + count..]);
        if chunk.len() > CHUNK {
            None
        } else if chunk.is_empty() {
            Some(merge(n.left.clone(), n.right.clone()))
        } else {
            Some(Some(with_chunk(n, chunk.into())))
        }
    } else {
        None
    }
}

/// Removes the elements `lo..hi` of a treap, copying only the nodes the range touches and
/// dropping wholly covered subtrees at once.
fn remove_range<T: Clone>(tree: Option<&Arc<Node<T>>>, lo: usize, hi: usize) -> Link<T> {
    let n = tree?;
    let hi = hi.min(n.size);
    if lo >= hi {
        return Some(n.clone());
    }
    if lo == 0 && hi == n.size {
        return None;
    }
    let left_size = size(n.left.as_ref());
    let chunk_end = left_size + n.chunk.len();
    let left = if lo < left_size {
        remove_range(n.left.as_ref(), lo, hi.min(left_size))
    } else {
        n.left.clone()
    };
    let right = if hi > chunk_end {
        remove_range(
            n.right.as_ref(),
            lo.saturating_sub(chunk_end),
            hi - chunk_end,
        )
    } else {
        n.right.clone()
    };
    let from = lo.clamp(left_size, chunk_end) - left_size;
    let to = hi.clamp(left_size, chunk_end) - left_size;
    if from == 0 && to == n.chunk.len() {
        return merge(left, right);
    }
    let chunk: Arc<[T]> = if from == to {
        n.chunk.clone()
    } else {
        n.chunk[..from]
            .iter()
            .chain(&n.chunk[to..])
            .cloned()
            .collect()
    };
    Some(node(n.priority, left, chunk, right))
}

/// Inserts `x` at index `at` into a chunk next to that position that has room; `None` when
/// both neighbours are full.
fn insert_into<T: Clone>(tree: Option<&Arc<Node<T>>>, at: usize, x: &T) -> Option<Arc<Node<T>>> {
    let n = tree?;
    let left_size = size(n.left.as_ref());
    let chunk_end = left_size + n.chunk.len();
    if at < left_size {
        let left = Some(insert_into(n.left.as_ref(), at, x)?);
        return Some(with_left(n, left));
    }
    if at > chunk_end {
        let right = Some(insert_into(n.right.as_ref(), at - chunk_end, x)?);
        return Some(with_right(n, right));
    }
    if n.chunk.len() < CHUNK {
        let cut = at - left_size;
        let mut chunk: Vec<T> = Vec::with_capacity(n.chunk.len() + 1);
        chunk.extend_from_slice(&n.chunk[..cut]);
        chunk.push(x.clone());
        chunk.extend_from_slice(&n.chunk[cut..]);
        return Some(with_chunk(n, chunk.into()));
    }
    if at == left_size {
        let left = Some(insert_into(n.left.as_ref(), at, x)?);
        Some(with_left(n, left))
    } else if at == chunk_end {
        let right = Some(insert_into(n.right.as_ref(), 0, x)?);
        Some(with_right(n, right))
    } else {
        None
    }
}

fn last_chunk_len<T>(tree: Option<&Arc<Node<T>>>) -> Option<usize> {
    let mut n = tree?;
    while let Some(r) = &n.right {
        n = r;
    }
    Some(n.chunk.len())
}

impl<T: Clone> PSeq<T> {
    fn priority(&mut self) -> u64 {
        // splitmix64: deterministic, well-spread priorities.
        self.next_priority = self.next_priority.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.next_priority;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn with_last(&mut self, tree: Link<T>, x: T) -> Link<T> {
        match (&tree, last_chunk_len(tree.as_ref())) {
            (Some(n), Some(len)) if len < CHUNK => Some(push_into_last(n, x)),
            _ => {
                let priority = self.priority();
                let single = Some(node(priority, None, Arc::from(vec![x]), None));
                merge(tree, single)
            }
        }
    }

    /// Appends an element.
    pub(crate) fn push_back(&mut self, x: T) {
        let root = self.root.take();
        self.root = self.with_last(root, x);
    }

    /// Removes `count` elements from index `at` and, when `insert` is given, puts it at `at`.
    pub(crate) fn replace(&mut self, at: usize, count: usize, insert: Option<T>) {
        if count > 0
            && let Some(root) = replace_within(self.root.as_ref(), at, count, insert.as_ref())
        {
            self.root = root;
            return;
        }
        let rest = remove_range(self.root.as_ref(), at, at.saturating_add(count));
        let Some(x) = insert else {
            self.root = rest;
            return;
        };
        self.root = if let Some(root) = insert_into(rest.as_ref(), at, &x) {
            Some(root)
        } else {
            let (head, tail) = split(rest.as_ref(), at);
            let priority = self.priority();
            let single = Some(node(priority, None, Arc::from(vec![x]), None));
            merge(merge(head, single), tail)
        };
    }
}

impl<T> PSeq<T> {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        size(self.root.as_ref())
    }

    /// The element at index `i`.
    pub(crate) fn get(&self, mut i: usize) -> Option<&T> {
        let mut t = self.root.as_ref()?;
        loop {
            let left_size = size(t.left.as_ref());
            if i < left_size {
                t = t.left.as_ref()?;
            } else if i < left_size + t.chunk.len() {
                return t.chunk.get(i - left_size);
            } else {
                i -= left_size + t.chunk.len();
                t = t.right.as_ref()?;
            }
        }
    }

    /// Iterates from index `start` to the end.
    pub(crate) fn iter_from(&self, start: usize) -> Iter<'_, T> {
        let mut it = Iter {
            front_stack: Vec::new(),
            front: &[],
            back_stack: Vec::new(),
            back: &[],
            remaining: self.len().saturating_sub(start),
        };
        it.push_right_spine(self.root.as_deref());
        let mut i = start;
        let mut t = self.root.as_deref();
        while let Some(n) = t {
            let left_size = size(n.left.as_ref());
            if i < left_size {
                it.front_stack.push(n);
                t = n.left.as_deref();
            } else if i < left_size + n.chunk.len() {
                it.front = &n.chunk[i - left_size..];
                it.push_left_spine(n.right.as_deref());
                break;
            } else {
                i -= left_size + n.chunk.len();
                t = n.right.as_deref();
            }
        }
        it
    }

    /// Iterates over all elements.
    pub(crate) fn iter(&self) -> Iter<'_, T> {
        self.iter_from(0)
    }

    /// Whether both sequences share the same storage.
    pub(crate) fn ptr_eq(&self, other: &PSeq<T>) -> bool {
        match (&self.root, &other.root) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<T: Clone> FromIterator<T> for PSeq<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut s = PSeq::default();
        for x in iter {
            s.push_back(x);
        }
        s
    }
}

/// In-order iterator over a [`PSeq`], from either end.
pub(crate) struct Iter<'a, T> {
    /// Nodes whose chunk and right subtree are still to be visited (top = next).
    front_stack: Vec<&'a Node<T>>,
    front: &'a [T],
    /// Nodes whose chunk and left subtree are still to be visited backwards (top = next).
    back_stack: Vec<&'a Node<T>>,
    back: &'a [T],
    /// Elements not yet yielded from either end; the two ends never cross.
    remaining: usize,
}

impl<'a, T> Iter<'a, T> {
    fn push_left_spine(&mut self, mut t: Option<&'a Node<T>>) {
        while let Some(n) = t {
            self.front_stack.push(n);
            t = n.left.as_deref();
        }
    }

    fn push_right_spine(&mut self, mut t: Option<&'a Node<T>>) {
        while let Some(n) = t {
            self.back_stack.push(n);
            t = n.right.as_deref();
        }
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some((first, rest)) = self.front.split_first() {
                self.front = rest;
                self.remaining -= 1;
                return Some(first);
            }
            let n = self.front_stack.pop()?;
            self.front = &n.chunk;
            self.push_left_spine(n.right.as_deref());
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T> DoubleEndedIterator for Iter<'_, T> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some((last, rest)) = self.back.split_last() {
                self.back = rest;
                self.remaining -= 1;
                return Some(last);
            }
            let n = self.back_stack.pop()?;
            self.back = &n.chunk;
            self.push_right_spine(n.left.as_deref());
        }
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_vec_under_random_edits() {
        let mut model: Vec<u32> = Vec::new();
        let mut seq: PSeq<u32> = PSeq::default();
        let mut snapshots: Vec<(PSeq<u32>, Vec<u32>)> = Vec::new();
        let mut state = 12345u64;
        let mut rand = |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) as usize) % n.max(1)
        };
        for step in 0..4000u32 {
            if model.is_empty() || rand(3) > 0 {
                seq.push_back(step);
                model.push(step);
            } else {
                let at = rand(model.len());
                let count = rand((model.len() - at).min(5)) + 1;
                let insert = (rand(4) > 0).then_some(step);
                let count = if rand(8) == 0 {
                    rand(model.len() - at) + 1
                } else {
                    count
                };
                seq.replace(at, count, insert);
                model.splice(at..at + count, insert);
            }
            if step % 97 == 0 {
                snapshots.push((seq.clone(), model.clone()));
            }
            assert_eq!(seq.len(), model.len());
        }
        assert_eq!(seq.iter().copied().collect::<Vec<_>>(), model);
        for (i, x) in model.iter().enumerate() {
            assert_eq!(seq.get(i), Some(x));
        }
        assert_eq!(seq.get(model.len()), None);
        for start in [0, 1, model.len() / 2, model.len()] {
            let it = seq.iter_from(start);
            assert_eq!(it.len(), model.len() - start);
            assert_eq!(it.copied().collect::<Vec<_>>(), model[start..]);
            let back: Vec<u32> = seq.iter_from(start).rev().copied().collect();
            assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), model[start..]);
            // Mixed ends meet exactly once.
            let mut it = seq.iter_from(start);
            let mut front = Vec::new();
            let mut back = Vec::new();
            loop {
                match (it.next(), it.next_back()) {
                    (Some(a), Some(b)) => {
                        front.push(*a);
                        back.push(*b);
                    }
                    (Some(a), None) => front.push(*a),
                    (None, _) => break,
                }
            }
            back.reverse();
            front.extend(back);
            assert_eq!(front, model[start..]);
        }
        for (snap, expected) in snapshots {
            assert_eq!(snap.iter().copied().collect::<Vec<_>>(), expected);
        }
    }
}
