//! Tool-pairing balance over the surface (`toolPairingBalancedBefore` / `After`).

use std::collections::HashMap;
use std::sync::Arc;

use session_core::Event;
use session_core::json::Value;
use session_surface::Session;

use crate::{Error, Result};

/// How far a tool-call counter walked over the surface has got.
///
/// Walking the surface in order, the counter goes up by the number of `tool-call` blocks of
/// each `assistant/message` and down by one for each `tool/result`. A cut just before or just
/// after a surface node is *balanced* when the counter there is 0.
///
/// The walk is incremental: between two replaces the surface only grows at its end, so a
/// [`ToolPairing`] keeps the counters it has computed and processes only the new nodes on the
/// next [`sync`](ToolPairing::sync) (O(new nodes), plus an O(log n) continuity check). When the
/// surface's replace generation changes it starts over, so the total work between two
/// replaces is linear in the surface and each query is O(1) amortized. A query on a synced
/// balance is O(1).
///
/// A corrupt surface (a `tool/result` with no open call before it, or a node with no event)
/// makes every query fail with the corresponding error until the surface changes. A surface
/// that is not a continuation of the one last seen (same generation, but a different last
/// processed node or event) is walked again from the start.
#[derive(Debug, Clone, Default)]
pub struct ToolPairing {
    generation: Option<u64>,
    /// The counter after each processed node, in surface order.
    after: Vec<u64>,
    /// Surface position of each processed node.
    positions: HashMap<u64, usize>,
    /// The last processed node and its event, to recognise a different surface.
    last: Option<(u64, Event)>,
    fault: Option<Error>,
}

/// The number of `tool-call` blocks of an `assistant/message` event.
fn tool_call_blocks(event: &Event) -> u64 {
    event
        .data()
        .get("message")
        .and_then(|m| m.get("content"))
        .and_then(Value::as_array)
        .map_or(0, |blocks| {
            blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
                .count() as u64
        })
}

impl ToolPairing {
    /// The balance of a complete surface given as node seqs in surface order, looking events
    /// up by seq.
    pub fn from_nodes(
        generation: u64,
        nodes: &[u64],
        lookup: impl Fn(u64) -> Option<Event>,
    ) -> ToolPairing {
        let mut pairing = ToolPairing::default();
        pairing.sync_with(generation, nodes.len(), |i| nodes.get(i).copied(), lookup);
        pairing
    }

    /// The replace generation the counters were computed under.
    pub fn generation(&self) -> Option<u64> {
        self.generation
    }

    /// How many surface nodes have been processed.
    pub fn processed(&self) -> usize {
        self.after.len()
    }

    /// Brings the counters up to date with a surface of `len` nodes under replace
    /// `generation`; `node(i)` is the seq at surface position `i` and `lookup(seq)` its event.
    ///
    /// Under an unchanged generation only nodes from [`processed`](ToolPairing::processed) on
    /// are visited; a different generation starts over.
    pub fn sync_with(
        &mut self,
        generation: u64,
        len: usize,
        node: impl Fn(usize) -> Option<u64>,
        lookup: impl Fn(u64) -> Option<Event>,
    ) {
        let same_surface = self.generation == Some(generation)
            && len >= self.after.len()
            && self.last.as_ref().is_none_or(|(seq, event)| {
                node(self.after.len() - 1) == Some(*seq)
                    && lookup(*seq).is_some_and(|e| e.ptr_eq(event))
            });
        if !same_surface {
            self.after.clear();
            self.positions.clear();
            self.last = None;
            self.generation = Some(generation);
        }
        self.fault = None;
        let mut counter = self.after.last().copied().unwrap_or(0);
        for i in self.after.len()..len {
            let Some(seq) = node(i) else {
                break;
            };
            let Some(event) = lookup(seq) else {
                self.fault = Some(Error::MissingEvent { seq });
                return;
            };
            let event = &event;
            match event.event_type() {
                "assistant/message" => counter = counter.saturating_add(tool_call_blocks(event)),
                "tool/result" => {
                    if counter == 0 {
                        self.fault = Some(Error::UnmatchedToolResult { seq });
                        return;
                    }
                    counter -= 1;
                }
                _ => {}
            }
            self.positions.insert(seq, i);
            self.after.push(counter);
            self.last = Some((seq, event.clone()));
        }
    }

    fn position(&self, seq: u64) -> Result<usize> {
        if let Some(fault) = &self.fault {
            return Err(fault.clone());
        }
        self.positions
            .get(&seq)
            .copied()
            .ok_or(Error::SurfaceSeqNotFound { seq })
    }

    /// Whether the cut just before surface node `seq` is balanced.
    pub fn balanced_before(&self, seq: u64) -> Result<bool> {
        let p = self.position(seq)?;
        Ok(p == 0 || self.after[p - 1] == 0)
    }

    /// Whether the cut just after surface node `seq` is balanced.
    pub fn balanced_after(&self, seq: u64) -> Result<bool> {
        let p = self.position(seq)?;
        Ok(self.after[p] == 0)
    }

    /// Whether the cut after the last surface node is balanced (true for an empty surface).
    pub fn balanced(&self) -> Result<bool> {
        if let Some(fault) = &self.fault {
            return Err(fault.clone());
        }
        Ok(self.after.last().is_none_or(|&c| c == 0))
    }
}

impl ToolPairing {
    /// The balance of `session`'s current surface. ([`ToolPairing::default`] is a balance that
    /// has seen no surface yet.)
    pub fn new(session: &Session) -> ToolPairing {
        let mut pairing = ToolPairing::default();
        pairing.sync(session);
        pairing
    }

    /// Brings the counters up to date with `session`'s surface: O(new nodes) while the
    /// replace generation is unchanged, a rebuild after a replace.
    pub fn sync(&mut self, session: &Session) {
        let nodes = session.surface_nodes();
        self.sync_with(
            session.replace_generation(),
            nodes.len(),
            |i| nodes.get(i),
            |seq| session.event(seq).cloned(),
        );
    }
}

/// A [`ToolPairing`] per session id (`toolPairingBalancedBefore` / `After` with their
/// per-session cache): each query first syncs that session's balance, then answers in O(1).
#[derive(Debug, Clone, Default)]
pub struct ToolPairingCache {
    sessions: HashMap<Arc<str>, ToolPairing>,
}

impl ToolPairingCache {
    /// An empty cache.
    pub fn new() -> ToolPairingCache {
        ToolPairingCache::default()
    }

    /// The synced balance of `session`.
    pub fn pairing(&mut self, session: &Session) -> &ToolPairing {
        let pairing = self.sessions.entry(session.id().clone()).or_default();
        pairing.sync(session);
        pairing
    }

    /// `toolPairingBalancedBefore(session, seq)`.
    pub fn balanced_before(&mut self, session: &Session, seq: u64) -> Result<bool> {
        self.pairing(session).balanced_before(seq)
    }

    /// `toolPairingBalancedAfter(session, seq)`.
    pub fn balanced_after(&mut self, session: &Session, seq: u64) -> Result<bool> {
        self.pairing(session).balanced_after(seq)
    }

    /// Whether the cut after `session`'s last surface node is balanced.
    pub fn balanced(&mut self, session: &Session) -> Result<bool> {
        self.pairing(session).balanced()
    }

    /// Drops the cached balance of session `id`.
    pub fn forget(&mut self, id: &str) {
        self.sessions.remove(id);
    }
}
