//! The model-visible surface: which events the model sees, in which order (§3).
//!
//! A [`Surface`] holds the surface nodes (event seqs in surface order), the replace
//! generation and the messages derived from the nodes. Every event of a log passes through
//! [`Surface::plan`], which validates it as the next event and returns a [`Plan`] without
//! changing anything; [`Surface::apply`] commits the plan. A failed or abandoned plan
//! therefore leaves the surface untouched.
//!
//! # Costs
//!
//! Nodes and messages are persistent sequences (chunked treaps shared through `Arc`s), so
//! [`Surface::nodes`] and [`Surface::messages`] are O(1) snapshots and replacing a range
//! copies only the paths it touches. Every node carries an integer key assigned when
//! its append was committed; a replacing node inherits the key of the first node it replaces,
//! so the keys of live nodes increase in surface order. Two Fenwick trees over the keys count
//! the live nodes and the live nodes that carry a message, which makes
//! [`Surface::position`] O(log n) and a replace O(replaced range + log n).

use std::borrow::Cow;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use session_core::event::{SurfaceOp, SurfaceOpError, is_surface_eligible_type};
use session_core::json::Value;
use session_core::{Event, Events, push_back_sealed};

use crate::derive::{Messages, derive_event_message};
use crate::pseq::{self, PSeq};

/// Why an event cannot be the next event of a surface. The `Display` text is the reference's
/// exact message (§3.2).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SurfaceError {
    /// `session event seq <seq> is not contiguous; expected <expected>`
    NotContiguous {
        /// The event's seq.
        seq: u64,
        /// The seq the surface expected.
        expected: u64,
    },
    /// `session event "<type>" is not surface-eligible and cannot carry surfaceOp`
    IneligibleSurfaceOp {
        /// The event type.
        ty: String,
    },
    /// `session event "<type>" is not surface-eligible and cannot carry sourceEventSeqs`
    IneligibleSourceEventSeqs {
        /// The event type.
        ty: String,
    },
    /// `session event "<type>" is surface-eligible and requires a surfaceOp marker`
    MissingSurfaceOp {
        /// The event type.
        ty: String,
    },
    /// `session event "<type>" carries an invalid surfaceOp`
    InvalidSurfaceOp {
        /// The event type.
        ty: String,
    },
    /// `session event "<type>" carries an invalid replace surfaceOp`
    InvalidReplaceSurfaceOp {
        /// The event type.
        ty: String,
    },
    /// `surface replace: start seq <start> not found in surface`
    StartNotFound {
        /// The `start` of the replace op.
        start: u64,
    },
    /// `surface replace: end seq <end> not found in surface`
    EndNotFound {
        /// The `end` of the replace op.
        end: u64,
    },
    /// `surface replace: start seq <start> (index <i>) is after end seq <end> (index <j>)`
    ReversedRange {
        /// The `start` of the replace op.
        start: u64,
        /// Surface position of `start`.
        start_index: usize,
        /// The `end` of the replace op.
        end: u64,
        /// Surface position of `end`.
        end_index: usize,
    },
    /// `sourceEventSeqs on event at seq <seq> must be an array when present`
    SourcesNotArray {
        /// The event's seq.
        seq: u64,
    },
    /// `sourceEventSeqs must not be empty except on assistant/message`
    SourcesEmpty,
    /// `session event "<type>" sourceEventSeqs must densely contain non-negative safe integers`
    SourcesNotIntegers {
        /// The event type.
        ty: String,
    },
    /// `sourceEventSeqs must not contain duplicates`
    SourcesDuplicate,
    /// `sourceEventSeqs must reference earlier events: <source> >= current seq <seq>`
    SourcesNotEarlier {
        /// The first offending source, in array order.
        source: u64,
        /// The event's seq.
        seq: u64,
    },
    /// `surface replace: sourceEventSeqs must include every shadowed surface node; missing
    /// <a, b, …>`
    SourcesMissShadowed {
        /// The shadowed seqs missing from the sources, in surface order.
        missing: Vec<u64>,
    },
    /// `tool/result surface replacement must rewrite exactly one current node`
    ToolResultRange,
    /// `tool/result surface replacement must target a current tool/result`
    ToolResultTarget,
    /// `tool/result surface replacement may change only content`
    ToolResultChange,
}

impl fmt::Display for SurfaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SurfaceError::NotContiguous { seq, expected } => {
                write!(
                    f,
                    "session event seq {seq} is not contiguous; expected {expected}"
                )
            }
            SurfaceError::IneligibleSurfaceOp { ty } => write!(
                f,
                "session event \"{ty}\" is not surface-eligible and cannot carry surfaceOp"
            ),
            SurfaceError::IneligibleSourceEventSeqs { ty } => write!(
                f,
                "session event \"{ty}\" is not surface-eligible and cannot carry sourceEventSeqs"
            ),
            SurfaceError::MissingSurfaceOp { ty } => write!(
                f,
                "session event \"{ty}\" is surface-eligible and requires a surfaceOp marker"
            ),
            SurfaceError::InvalidSurfaceOp { ty } => {
                write!(f, "session event \"{ty}\" carries an invalid surfaceOp")
            }
            SurfaceError::InvalidReplaceSurfaceOp { ty } => {
                write!(
                    f,
                    "session event \"{ty}\" carries an invalid replace surfaceOp"
                )
            }
            SurfaceError::StartNotFound { start } => {
                write!(f, "surface replace: start seq {start} not found in surface")
            }
            SurfaceError::EndNotFound { end } => {
                write!(f, "surface replace: end seq {end} not found in surface")
            }
            SurfaceError::ReversedRange {
                start,
                start_index,
                end,
                end_index,
            } => write!(
                f,
                "surface replace: start seq {start} (index {start_index}) is after end seq {end} (index {end_index})"
            ),
            SurfaceError::SourcesNotArray { seq } => write!(
                f,
                "sourceEventSeqs on event at seq {seq} must be an array when present"
            ),
            SurfaceError::SourcesEmpty => {
                f.write_str("sourceEventSeqs must not be empty except on assistant/message")
            }
            SurfaceError::SourcesNotIntegers { ty } => write!(
                f,
                "session event \"{ty}\" sourceEventSeqs must densely contain non-negative safe integers"
            ),
            SurfaceError::SourcesDuplicate => {
                f.write_str("sourceEventSeqs must not contain duplicates")
            }
            SurfaceError::SourcesNotEarlier { source, seq } => write!(
                f,
                "sourceEventSeqs must reference earlier events: {source} >= current seq {seq}"
            ),
            SurfaceError::SourcesMissShadowed { missing } => {
                f.write_str(
                    "surface replace: sourceEventSeqs must include every shadowed surface node; missing ",
                )?;
                for (i, seq) in missing.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{seq}")?;
                }
                Ok(())
            }
            SurfaceError::ToolResultRange => {
                f.write_str("tool/result surface replacement must rewrite exactly one current node")
            }
            SurfaceError::ToolResultTarget => {
                f.write_str("tool/result surface replacement must target a current tool/result")
            }
            SurfaceError::ToolResultChange => {
                f.write_str("tool/result surface replacement may change only content")
            }
        }
    }
}

impl std::error::Error for SurfaceError {}

/// An O(1) snapshot of the surface nodes: event seqs in surface order. It never changes.
#[derive(Clone, Default)]
pub struct Nodes(PSeq<u64>);

/// Iterator over [`Nodes`].
pub struct NodesIter<'a>(pseq::Iter<'a, u64>);

impl Iterator for NodesIter<'_> {
    type Item = u64;

    fn next(&mut self) -> Option<u64> {
        self.0.next().copied()
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for NodesIter<'_> {
    fn next_back(&mut self) -> Option<u64> {
        self.0.next_back().copied()
    }
}

impl ExactSizeIterator for NodesIter<'_> {}

impl PartialEq for Nodes {
    fn eq(&self, other: &Nodes) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for Nodes {}

impl<'a> IntoIterator for &'a Nodes {
    type Item = u64;
    type IntoIter = NodesIter<'a>;
    fn into_iter(self) -> NodesIter<'a> {
        self.iter()
    }
}

impl Nodes {
    /// Iterates over the seqs in surface order.
    pub fn iter(&self) -> NodesIter<'_> {
        NodesIter(self.0.iter())
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the surface is empty.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    /// The seq at surface position `i`.
    pub fn get(&self, i: usize) -> Option<u64> {
        self.0.get(i).copied()
    }

    /// The seqs as a `Vec` (O(n)).
    pub fn to_vec(&self) -> Vec<u64> {
        self.0.iter().copied().collect()
    }

    /// Whether both snapshots share storage.
    pub fn ptr_eq(&self, other: &Nodes) -> bool {
        self.0.ptr_eq(&other.0)
    }
}

impl fmt::Debug for Nodes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter()).finish()
    }
}

impl PartialEq<[u64]> for Nodes {
    fn eq(&self, other: &[u64]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == *b)
    }
}

impl PartialEq<Vec<u64>> for Nodes {
    fn eq(&self, other: &Vec<u64>) -> bool {
        *self == other[..]
    }
}

impl<const N: usize> PartialEq<[u64; N]> for Nodes {
    fn eq(&self, other: &[u64; N]) -> bool {
        *self == other[..]
    }
}

/// A Fenwick (binary indexed) tree of counts over node keys, growable at the end.
///
/// The slots live in a persistent vector, so a clone is O(1) and an edit after a clone copies
/// only the paths it touches.
#[derive(Clone, Default)]
struct Fenwick {
    tree: imbl::Vector<u64>,
}

fn low_bit(i: usize) -> usize {
    i & i.wrapping_neg()
}

impl Fenwick {
    /// Appends a slot holding `value` (O(log n)).
    fn push(&mut self, value: u64) {
        let i = self.tree.len() + 1;
        let stop = i - low_bit(i);
        let mut sum = value;
        let mut j = i - 1;
        while j > stop {
            sum += self.tree.get(j - 1).copied().unwrap_or(0);
            j -= low_bit(j);
        }
        push_back_sealed(&mut self.tree, sum);
    }

    /// Sum of the slots `0..=key`.
    fn prefix(&self, key: usize) -> u64 {
        let mut j = (key + 1).min(self.tree.len());
        let mut sum = 0;
        while j > 0 {
            sum += self.tree.get(j - 1).copied().unwrap_or(0);
            j -= low_bit(j);
        }
        sum
    }

    /// Sum of the slots `0..key`.
    fn before(&self, key: usize) -> u64 {
        if key == 0 { 0 } else { self.prefix(key - 1) }
    }

    fn add(&mut self, key: usize) {
        let mut j = key + 1;
        while j <= self.tree.len() {
            if let Some(slot) = self.tree.get_mut(j - 1) {
                *slot += 1;
            }
            j += low_bit(j);
        }
    }

    fn sub(&mut self, key: usize) {
        let mut j = key + 1;
        while j <= self.tree.len() {
            if let Some(slot) = self.tree.get_mut(j - 1) {
                *slot = slot.saturating_sub(1);
            }
            j += low_bit(j);
        }
    }
}

/// Key flag: a node currently holds this key.
const LIVE: u8 = 1;
/// Key flag: the node holding this key derives a message.
const HAS_MESSAGE: u8 = 2;

static NEXT_SURFACE_ID: AtomicU64 = AtomicU64::new(1);

/// The surface state of one log, or of a window of one (§3.1).
///
/// Cloning is O(1): the nodes, the messages and the position index are persistent structures
/// shared with the clone, and an edit on either copies only the paths it touches. A clone is a
/// separate surface: plans made on one are not current on the other.
pub struct Surface {
    id: u64,
    base: u64,
    next_seq: u64,
    generation: u64,
    nodes: PSeq<u64>,
    messages: PSeq<Value>,
    /// The key of each seq that is a live node. A map of the few seqs that are, not a slot
    /// per event: most of a log (chunks, steps, tool calls) is log-only, and a restore
    /// pushed a slot for each of its 10^6 events.
    key_of: imbl::OrdMap<u64, usize>,
    /// [`LIVE`] / [`HAS_MESSAGE`] per key.
    flags: imbl::Vector<u8>,
    live: Fenwick,
    with_message: Fenwick,
}

impl Clone for Surface {
    fn clone(&self) -> Surface {
        Surface {
            id: NEXT_SURFACE_ID.fetch_add(1, Ordering::Relaxed),
            base: self.base,
            next_seq: self.next_seq,
            generation: self.generation,
            nodes: self.nodes.clone(),
            messages: self.messages.clone(),
            key_of: self.key_of.clone(),
            flags: self.flags.clone(),
            live: self.live.clone(),
            with_message: self.with_message.clone(),
        }
    }
}

impl Default for Surface {
    fn default() -> Surface {
        Surface::new()
    }
}

impl fmt::Debug for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Surface")
            .field("base", &self.base)
            .field("next_seq", &self.next_seq)
            .field("replace_generation", &self.generation)
            .field("nodes", &Nodes(self.nodes.clone()))
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
enum PlanKind {
    /// A log-only event: no surface effect.
    None,
    Append,
    Replace {
        start_index: usize,
        start_key: usize,
        end_key: usize,
    },
}

/// A validated, not yet committed surface transition for one event (see [`Surface::plan`]).
#[derive(Debug, Clone)]
pub struct Plan {
    surface_id: u64,
    seq: u64,
    generation: u64,
    kind: PlanKind,
    shadowed: Vec<u64>,
    message: Option<Value>,
}

impl Plan {
    /// The seq of the planned event.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The seqs this event shadows, in surface order (empty unless it is a replace).
    pub fn shadowed(&self) -> &[u64] {
        &self.shadowed
    }

    /// Whether the event is a replace.
    pub fn is_replace(&self) -> bool {
        matches!(self.kind, PlanKind::Replace { .. })
    }

    /// The message the event derives, if it becomes a node and derives one.
    pub fn message(&self) -> Option<&Value> {
        self.message.as_ref()
    }
}

fn ty_string(event: &Event) -> String {
    event.event_type().to_owned()
}

impl Surface {
    /// An empty surface for a log starting at seq 0.
    pub fn new() -> Surface {
        Surface::windowed(0)
    }

    /// A surface for a window of a log whose first event has seq `base_seq`
    /// (`SurfaceManager(window, baseSeq)`). Seqs before the window are unknown, so a replace
    /// reaching before it fails with "start seq … not found in surface".
    pub fn windowed(base_seq: u64) -> Surface {
        Surface {
            id: NEXT_SURFACE_ID.fetch_add(1, Ordering::Relaxed),
            base: base_seq,
            next_seq: base_seq,
            generation: 0,
            nodes: PSeq::default(),
            messages: PSeq::default(),
            key_of: imbl::OrdMap::new(),
            flags: imbl::Vector::new(),
            live: Fenwick::default(),
            with_message: Fenwick::default(),
        }
    }

    /// An O(1) snapshot of the nodes in surface order.
    pub fn nodes(&self) -> Nodes {
        Nodes(self.nodes.clone())
    }

    /// An O(1) snapshot of the messages derived from the nodes (§3.6).
    pub fn messages(&self) -> Messages {
        Messages::from_seq(self.messages.clone())
    }

    /// Number of committed replaces.
    pub fn replace_generation(&self) -> u64 {
        self.generation
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the surface has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 0
    }

    /// The seq of the first event of the window (0 for a whole log).
    pub fn base_seq(&self) -> u64 {
        self.base
    }

    /// The seq the next event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    fn key(&self, seq: u64) -> Option<usize> {
        self.key_of.get(&seq).copied()
    }

    /// The surface position of `seq`, if it is a node (O(log n)).
    pub fn position(&self, seq: u64) -> Option<usize> {
        let key = self.key(seq)?;
        Some((self.live.prefix(key) - 1) as usize)
    }

    /// Whether `seq` is currently a node.
    pub fn contains(&self, seq: u64) -> bool {
        self.key(seq).is_some()
    }

    /// Validates `event` as the next event (§3.2), looking earlier events up through `lookup`
    /// (absolute seq to event); returns a plan and changes nothing.
    pub fn plan(
        &self,
        event: &Event,
        lookup: &dyn Fn(u64) -> Option<Event>,
    ) -> Result<Plan, SurfaceError> {
        let seq = event.seq();
        if seq != self.next_seq {
            return Err(SurfaceError::NotContiguous {
                seq,
                expected: self.next_seq,
            });
        }
        let mut plan = Plan {
            surface_id: self.id,
            seq,
            generation: self.generation,
            kind: PlanKind::None,
            shadowed: Vec::new(),
            message: None,
        };
        let ty = event.event_type();
        if !is_surface_eligible_type(ty) {
            if event.surface_op_value().is_some() {
                return Err(SurfaceError::IneligibleSurfaceOp {
                    ty: ty_string(event),
                });
            }
            if event.source_event_seqs_value().is_some() {
                return Err(SurfaceError::IneligibleSourceEventSeqs {
                    ty: ty_string(event),
                });
            }
            return Ok(plan);
        }
        let Some(op_value) = event.surface_op_value() else {
            return Err(SurfaceError::MissingSurfaceOp {
                ty: ty_string(event),
            });
        };
        let op = SurfaceOp::from_value(op_value).map_err(|e| match e {
            SurfaceOpError::Invalid => SurfaceError::InvalidSurfaceOp {
                ty: ty_string(event),
            },
            SurfaceOpError::InvalidReplace => SurfaceError::InvalidReplaceSurfaceOp {
                ty: ty_string(event),
            },
        })?;
        match op {
            SurfaceOp::Append => plan.kind = PlanKind::Append,
            SurfaceOp::Replace { start, end } => {
                let start_key = self
                    .key(start)
                    .ok_or(SurfaceError::StartNotFound { start })?;
                let end_key = self.key(end).ok_or(SurfaceError::EndNotFound { end })?;
                let start_index = (self.live.prefix(start_key) - 1) as usize;
                let end_index = (self.live.prefix(end_key) - 1) as usize;
                if start_index > end_index {
                    return Err(SurfaceError::ReversedRange {
                        start,
                        start_index,
                        end,
                        end_index,
                    });
                }
                plan.shadowed = self
                    .nodes
                    .iter_from(start_index)
                    .take(end_index - start_index + 1)
                    .copied()
                    .collect();
                plan.kind = PlanKind::Replace {
                    start_index,
                    start_key,
                    end_key,
                };
            }
        }
        check_sources(event, &plan.shadowed)?;
        if ty == "tool/result" && plan.is_replace() {
            check_tool_result_rewrite(event, &plan.shadowed, lookup)?;
        }
        plan.message = derive_event_message(event).cloned();
        Ok(plan)
    }

    /// Whether `plan` was made by [`Surface::plan`] on this surface in its current state.
    pub fn is_current(&self, plan: &Plan) -> bool {
        plan.surface_id == self.id
            && plan.seq == self.next_seq
            && plan.generation == self.generation
    }

    /// Commits `plan`. A plan that is not current (see [`Surface::is_current`]) is ignored.
    pub fn apply(&mut self, plan: Plan) {
        if !self.is_current(&plan) {
            return;
        }
        let event_seq = self.next_seq;
        self.next_seq += 1;
        let has_message = plan.message.is_some();
        match plan.kind {
            PlanKind::None => {}
            PlanKind::Append => {
                let key = self.flags.len();
                self.key_of.insert(event_seq, key);
                push_back_sealed(
                    &mut self.flags,
                    LIVE | if has_message { HAS_MESSAGE } else { 0 },
                );
                self.live.push(1);
                self.with_message.push(u64::from(has_message));
                self.nodes.push_back(plan.seq);
                if let Some(m) = plan.message {
                    self.messages.push_back(m);
                }
            }
            PlanKind::Replace {
                start_index,
                start_key,
                end_key,
            } => {
                let message_index = self.with_message.before(start_key) as usize;
                let message_count = (self.with_message.prefix(end_key)
                    - self.with_message.before(start_key))
                    as usize;
                self.nodes
                    .replace(start_index, plan.shadowed.len(), Some(plan.seq));
                self.messages
                    .replace(message_index, message_count, plan.message.clone());
                for &seq in &plan.shadowed {
                    let Some(key) = self.key(seq) else { continue };
                    if self.flags.get(key).is_some_and(|f| f & HAS_MESSAGE != 0) {
                        self.with_message.sub(key);
                    }
                    if key != start_key {
                        self.live.sub(key);
                    }
                    if let Some(flag) = self.flags.get_mut(key) {
                        *flag = 0;
                    }
                    self.key_of.remove(&seq);
                }
                if let Some(flag) = self.flags.get_mut(start_key) {
                    *flag = LIVE | if has_message { HAS_MESSAGE } else { 0 };
                }
                if has_message {
                    self.with_message.add(start_key);
                }
                self.key_of.insert(event_seq, start_key);
                self.generation += 1;
            }
        }
    }

    /// Commits the next event when it is log-only (not surface-eligible, without `surfaceOp`
    /// and `sourceEventSeqs`): what [`Surface::plan`] and [`Surface::apply`] do for it.
    pub(crate) fn push_log_only(&mut self) {
        self.next_seq += 1;
    }

    /// Plans and commits `event` in one step.
    pub fn push(
        &mut self,
        event: &Event,
        lookup: &dyn Fn(u64) -> Option<Event>,
    ) -> Result<Plan, SurfaceError> {
        let plan = self.plan(event, lookup)?;
        self.apply(plan.clone());
        Ok(plan)
    }
}

/// Provenance checks (§3.2 step 4).
fn check_sources(event: &Event, shadowed: &[u64]) -> Result<(), SurfaceError> {
    let seq = event.seq();
    // The integers without reading the array value (which a restored event may not hold).
    let Some(sources) = event.source_event_seqs() else {
        let Some(value) = event.source_event_seqs_value() else {
            if shadowed.is_empty() {
                return Ok(());
            }
            return Err(SurfaceError::SourcesMissShadowed {
                missing: shadowed.to_vec(),
            });
        };
        let Some(items) = value.as_array() else {
            return Err(SurfaceError::SourcesNotArray { seq });
        };
        if items.is_empty() && event.event_type() != "assistant/message" {
            return Err(SurfaceError::SourcesEmpty);
        }
        return Err(SurfaceError::SourcesNotIntegers {
            ty: ty_string(event),
        });
    };
    if sources.is_empty() && event.event_type() != "assistant/message" {
        return Err(SurfaceError::SourcesEmpty);
    }
    // Sources are usually ascending already (a message citing its chunks); sort a copy only
    // when they are not. Duplicates are then neighbours, and membership a binary search.
    let mut sorted = Cow::Borrowed(&sources[..]);
    if !sources.windows(2).all(|w| w[0] < w[1]) {
        sorted.to_mut().sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(SurfaceError::SourcesDuplicate);
        }
    }
    if let Some(&source) = sources.iter().find(|&&n| n >= seq) {
        return Err(SurfaceError::SourcesNotEarlier { source, seq });
    }
    let missing: Vec<u64> = shadowed
        .iter()
        .copied()
        .filter(|s| sorted.binary_search(s).is_err())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(SurfaceError::SourcesMissShadowed { missing })
    }
}

/// Tool-result rewrite narrowing (§3.2 step 5).
fn check_tool_result_rewrite(
    event: &Event,
    shadowed: &[u64],
    lookup: &dyn Fn(u64) -> Option<Event>,
) -> Result<(), SurfaceError> {
    let [target] = shadowed else {
        return Err(SurfaceError::ToolResultRange);
    };
    let original = match lookup(*target) {
        Some(e) if e.event_type() == "tool/result" => e,
        _ => return Err(SurfaceError::ToolResultTarget),
    };
    match (
        without_result_content(original.data()),
        without_result_content(event.data()),
    ) {
        (Some(a), Some(b)) if a.eq_unordered(&b) => Ok(()),
        _ => Err(SurfaceError::ToolResultChange),
    }
}

/// `data` with `message.content[0].content` set to `null`; `None` unless `message.content`
/// holds exactly one object block.
fn without_result_content(data: &Value) -> Option<Value> {
    let data = data.as_object()?;
    let message = data.get("message")?.as_object()?;
    let content = message.get("content")?.as_array()?;
    let [block] = content.as_slice() else {
        return None;
    };
    let block = block.as_object()?.with("content", Value::Null);
    let message = message.with("content", Value::array([Value::Object(block)]));
    Some(Value::Object(data.with("message", Value::Object(message))))
}

/// One committed replace, as reported by [`fold_surface`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    /// Seq of the replacing event.
    pub seq: u64,
    /// `start` of its replace op.
    pub start: u64,
    /// `end` of its replace op.
    pub end: u64,
    /// The seqs it shadowed, in surface order.
    pub shadowed_seqs: Vec<u64>,
}

/// The result of [`fold_surface`]: detached copies of the final nodes and the replacement
/// history in event order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SurfaceFold {
    /// Final surface nodes in surface order.
    pub nodes: Vec<u64>,
    /// Every replace, in event order.
    pub replacements: Vec<Replacement>,
}

/// `foldSurface(events)`: replays a complete log from seq 0 through the same transitions as
/// the live path and reports the final nodes and every replacement (§3.4).
pub fn fold_surface<'a>(
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<SurfaceFold, SurfaceError> {
    fold_surface_window(0, events)
}

/// Folds a contiguous window of a log whose first event has seq `base_seq` (see
/// [`Surface::windowed`]).
pub fn fold_surface_window<'a>(
    base_seq: u64,
    events: impl IntoIterator<Item = &'a Event>,
) -> Result<SurfaceFold, SurfaceError> {
    let mut surface = Surface::windowed(base_seq);
    let mut seen: Vec<&'a Event> = Vec::new();
    let mut replacements = Vec::new();
    for event in events {
        let plan = {
            let lookup = |seq: u64| {
                let i = usize::try_from(seq.checked_sub(base_seq)?).ok()?;
                seen.get(i).map(|e| (*e).clone())
            };
            surface.plan(event, &lookup)?
        };
        if let (true, Some(SurfaceOp::Replace { start, end })) =
            (plan.is_replace(), event.surface_op())
        {
            replacements.push(Replacement {
                seq: plan.seq,
                start,
                end,
                shadowed_seqs: plan.shadowed.clone(),
            });
        }
        surface.apply(plan);
        seen.push(event);
    }
    Ok(SurfaceFold {
        nodes: surface.nodes().to_vec(),
        replacements,
    })
}

/// Folds a frozen event list (see [`fold_surface`]).
pub fn fold_events(events: &Events) -> Result<SurfaceFold, SurfaceError> {
    fold_surface(events.iter())
}
