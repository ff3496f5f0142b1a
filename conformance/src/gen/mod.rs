//! Random session histories for property tests.
//!
//! - [`arb_history`]: valid histories, as sequences of drafts applied to a fresh
//!   [`Session`](session_surface::Session): turns and steps, streamed answers (text, reasoning
//!   and tool-call deltas between block starts and ends, usage, finish) followed by the
//!   `assistant/message` citing its chunks, assistant messages with tool-call blocks,
//!   `tool/call` and appended `tool/result`, request headers and contexts, compactions (a user
//!   or assistant message replacing a random surface range with covering `sourceEventSeqs`),
//!   tool-result rewrites, plugin events of unknown types, reads of the derived views, clock
//!   changes (including backwards) and fork points at closed-turn boundaries.
//! - [`arb_interrupted_history`]: a valid history cut after any event, as a crash leaves it.
//! - [`arb_invalid_case`]: a valid history plus a mutation that must be refused, with the exact
//!   error text.
//!
//! Histories are generated as lists of abstract actions that a builder interprets against its
//! own model of the session (surface nodes, open turn and step, announced and recorded tool
//! calls), so each random choice lands on something valid and shrinking removes actions.

mod actions;
mod history;
mod invalid;
pub mod json;

use proptest::collection::vec;
use proptest::prelude::*;

pub use history::{BuildError, History, START_TIME_MS};
pub use invalid::{Attempt, InvalidCase, Mutation, STORED_CWD, arb_invalid_case, seed_values};

use actions::{arb_action, arb_compacting_action};
use history::Builder;

/// The session id of every history [`arb_history`] generates.
pub const HISTORY_ID: &str = "session-gen";

/// The session id of every [`InvalidCase`] setup.
pub const INVALID_CASE_ID: &str = "invalid";

/// The most actions a generated history is made of (each action makes zero or more drafts).
pub const MAX_ACTIONS: usize = 40;

/// Random valid histories (see the module docs).
pub fn arb_history() -> impl Strategy<Value = History> {
    vec(arb_action(), 0..MAX_ACTIONS).prop_map(|actions| Builder::run(&actions).finish(HISTORY_ID))
}

/// Random valid histories of fewer than `max_actions` actions (see [`arb_history`], which
/// uses [`MAX_ACTIONS`]): long ones reach deep into a session's log.
pub fn arb_history_of(max_actions: usize) -> impl Strategy<Value = History> {
    vec(arb_action(), 0..max_actions.max(1))
        .prop_map(|actions| Builder::run(&actions).finish(HISTORY_ID))
}

/// Random valid histories of fewer than `max_actions` actions where one action in three is a
/// compaction (optionally with its `compaction/summary` record, a `session/title` and a
/// `command/done` citing it): nested and overlapping compactions with later turns.
pub fn arb_compacted_history(max_actions: usize) -> impl Strategy<Value = History> {
    vec(arb_compacting_action(), 0..max_actions.max(1))
        .prop_map(|actions| Builder::run(&actions).finish(HISTORY_ID))
}

/// A valid history cut after any of its events (including none and all): what a crash
/// leaves behind.
pub fn arb_interrupted_history() -> impl Strategy<Value = History> {
    (arb_history(), any::<prop::sample::Index>()).prop_map(|(h, cut)| {
        let len = cut.index(h.len() + 1);
        h.prefix(len)
    })
}
