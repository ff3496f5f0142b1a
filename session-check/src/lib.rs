//! `session-check`: the invariant checkers, properties every session and every log must have,
//! each as a function returning `Ok(())` or a typed [`Violation`] that names the invariant and
//! says what broke.
//!
//! It is a product crate: `sessionctl verify` runs these checkers on stored logs, and the
//! `conformance` crate (generators, backend suite, crash model, golden runner) re-exports it as
//! `conformance::invariants`. It has no test-only dependency (no proptest).
//!
//! Session-level checkers take a [`Session`]; each delegates to a lower-level checker over
//! plain parts (events, node lists, message lists, transcripts) so that the checkers
//! themselves can be tested against deliberately broken inputs.
//!
//! | checker | invariant |
//! |---|---|
//! | [`check_seqs_contiguous`] | `events[i].seq == i` |
//! | [`check_surface_matches_fold`] | the live surface equals a fresh [`fold_surface`] of the log |
//! | [`check_incremental_derivation`] | `derive_messages` equals a fresh replay (`Session::from_restore`) and the projection of the nodes |
//! | [`check_transcript_holds_appends`] | every append-origin message is in the transcript |
//! | [`check_closers_balance`] | log + closers has no open turn, closers continue the seq and are idempotent |
//! | [`check_fork_prefix`] | a fork child's first `seedLength` events are the parent's |
//! | [`check_replay_marker`] | replaying a log adds exactly one end-seed marker, or none after one |
//! | [`check_turn_invariant`] | the optional turn/step invariant holds over the log |
//! | [`check_persistence_round_trip`] | a log written through the JSONL backend loads back identical and re-encodes to identical bytes |

use std::fmt;
use std::sync::Arc;

use session_core::event::END_SEED;
use session_core::json::Value;
use session_core::{Event, Events, FixedClock, Log, SharedClock};
use session_repair::{Trace, interrupted_turn_closers};
use session_surface::{Messages, Session, Transcript, derive_event_message, fold_surface};

/// A broken invariant: which one, and what was observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name (the checker's name without `check_`).
    pub invariant: &'static str,
    /// What was observed.
    pub detail: String,
}

impl Violation {
    /// A violation of `invariant`.
    pub fn new(invariant: &'static str, detail: impl Into<String>) -> Violation {
        Violation {
            invariant,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invariant {} violated: {}", self.invariant, self.detail)
    }
}

impl std::error::Error for Violation {}

/// `Result` of a checker.
pub type Check = Result<(), Violation>;

fn clock() -> SharedClock {
    Arc::new(FixedClock::new(0))
}

fn events_as_values(events: &Events) -> Vec<Value> {
    events.iter().map(Event::to_value).collect()
}

/// Every event's `seq` equals its index.
pub fn check_seqs_contiguous(events: &Events) -> Check {
    for (i, e) in events.iter().enumerate() {
        if e.seq() != i as u64 {
            return Err(Violation::new(
                "seqs_contiguous",
                format!("event at index {i} has seq {}", e.seq()),
            ));
        }
    }
    Ok(())
}

/// A surface state (`nodes` in surface order, `generation` replaces committed) equals what
/// [`fold_surface`] computes from the complete log `events`.
pub fn check_nodes_match_fold(nodes: &[u64], generation: u64, events: &Events) -> Check {
    const NAME: &str = "surface_matches_fold";
    let fold = fold_surface(events.iter()).map_err(|e| {
        Violation::new(
            NAME,
            format!("fold_surface refused the session's own log: {e}"),
        )
    })?;
    if fold.nodes != nodes {
        return Err(Violation::new(
            NAME,
            format!("live nodes {nodes:?} != folded nodes {:?}", fold.nodes),
        ));
    }
    if fold.replacements.len() as u64 != generation {
        return Err(Violation::new(
            NAME,
            format!(
                "replace generation {generation} != {} replacements in the log",
                fold.replacements.len()
            ),
        ));
    }
    Ok(())
}

/// The live surface of `session` equals a fresh [`fold_surface`] of its events.
pub fn check_surface_matches_fold(session: &Session) -> Check {
    let nodes = session.surface().nodes().to_vec();
    check_nodes_match_fold(&nodes, session.replace_generation(), &session.events())?;
    check_surface_positions(session, &nodes)
}

/// The part of [`check_surface_matches_fold`] that reads the live surface beyond its node
/// list: its length is the number of `nodes` (its nodes in order), and each node's position
/// is its index there.
fn check_surface_positions(session: &Session, nodes: &[u64]) -> Check {
    if session.surface().len() != nodes.len() {
        return Err(Violation::new(
            "surface_matches_fold",
            format!(
                "surface length {} != {} nodes",
                session.surface().len(),
                nodes.len()
            ),
        ));
    }
    for (i, n) in nodes.iter().enumerate() {
        if session.surface().position(*n) != Some(i) {
            return Err(Violation::new(
                "surface_matches_fold",
                format!(
                    "position({n}) = {:?}, expected Some({i})",
                    session.surface().position(*n)
                ),
            ));
        }
    }
    Ok(())
}

fn first_difference(a: &Messages, b: &Messages) -> String {
    let i = a
        .iter()
        .zip(b.iter())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.len().min(b.len()));
    format!(
        "{} vs {} messages; first difference at {i}: {:?} vs {:?}",
        a.len(),
        b.len(),
        a.get(i).map(Value::to_json),
        b.get(i).map(Value::to_json)
    )
}

/// `messages` equal the projection of `nodes` through [`derive_event_message`] over
/// `events` (null projections dropped).
pub fn check_messages_project_nodes(messages: &Messages, nodes: &[u64], events: &Events) -> Check {
    const NAME: &str = "incremental_derivation";
    let mut projected = Vec::with_capacity(nodes.len());
    for n in nodes {
        let Some(event) = usize::try_from(*n).ok().and_then(|i| events.get(i)) else {
            return Err(Violation::new(NAME, format!("node {n} has no event")));
        };
        projected.extend(derive_event_message(event).cloned());
    }
    let projected: Messages = projected.into_iter().collect();
    if &projected != messages {
        return Err(Violation::new(
            NAME,
            format!(
                "messages != projection of the nodes: {}",
                first_difference(messages, &projected)
            ),
        ));
    }
    Ok(())
}

/// `messages` equal the messages of a session restored from `events` with `header`.
pub fn check_messages_match_replay(messages: &Messages, events: &Events, header: &Value) -> Check {
    let id = header.get("id").and_then(Value::as_str).unwrap_or_default();
    let replay =
        Session::from_restore(id, events_as_values(events), header, clock()).map_err(|e| {
            Violation::new(
                "incremental_derivation",
                format!("restoring the log failed: {e}"),
            )
        })?;
    check_messages_match_restored(messages, &replay)
}

/// `derive_messages` equals both a fresh replay of the log (`Session::from_restore`) and the
/// direct projection of the current surface nodes.
pub fn check_incremental_derivation(session: &Session) -> Check {
    let messages = session.derive_messages();
    let events = session.events();
    check_messages_project_nodes(&messages, &session.surface().nodes().to_vec(), &events)?;
    check_messages_match_replay(&messages, &events, &session.header().to_value())
}

/// Every append-origin surface event of `events` has a message entry in `transcript` (with
/// its derived message), and every replacing event has a replacement entry, in log order.
pub fn check_transcript_holds(transcript: &Transcript, events: &Events) -> Check {
    const NAME: &str = "transcript_holds_appends";
    let mut entries = transcript.iter();
    for e in events.iter().filter(|e| e.is_surface_event()) {
        let Some(entry) = entries.next() else {
            return Err(Violation::new(
                NAME,
                format!("surface event {} is missing from the transcript", e.seq()),
            ));
        };
        if entry.event() != e {
            return Err(Violation::new(
                NAME,
                format!(
                    "transcript entry for seq {} found where seq {} was expected",
                    entry.seq(),
                    e.seq()
                ),
            ));
        }
        let append = e.is_append_surface_event();
        if append == entry.is_replacement() {
            return Err(Violation::new(
                NAME,
                format!("seq {} has the wrong kind of transcript entry", e.seq()),
            ));
        }
        if entry.message() != derive_event_message(e) {
            return Err(Violation::new(
                NAME,
                format!("transcript entry for seq {} has the wrong message", e.seq()),
            ));
        }
    }
    if let Some(extra) = entries.next() {
        return Err(Violation::new(
            NAME,
            format!(
                "transcript has an entry for seq {} beyond the log",
                extra.seq()
            ),
        ));
    }
    Ok(())
}

/// Every append-origin message of `session` is in its transcript (whether or not it was
/// later compacted away), and the transcript equals one built from the log.
pub fn check_transcript_holds_appends(session: &Session) -> Check {
    let transcript = session.transcript();
    let events = session.events();
    check_transcript_holds(&transcript, &events)?;
    let fresh = Transcript::from_events(events.iter()).map_err(|e| {
        Violation::new(
            "transcript_holds_appends",
            format!("building a transcript from the log failed: {e}"),
        )
    })?;
    if fresh != transcript {
        return Err(Violation::new(
            "transcript_holds_appends",
            "the live transcript differs from one built from the log",
        ));
    }
    Ok(())
}

/// The turn left open at the end of `events`, if any (the last `turn/start` not followed by a
/// `turn/end`).
pub fn open_turn(events: &[Event]) -> Option<u64> {
    open_turn_of(events.iter())
}

/// [`open_turn`] over any events in log order.
fn open_turn_of<'a>(events: impl DoubleEndedIterator<Item = &'a Event>) -> Option<u64> {
    events
        .rev()
        .find(|e| matches!(e.event_type(), "turn/start" | "turn/end"))
        .filter(|e| e.event_type() == "turn/start")
        .map(|e| e.data().get("turn").and_then(Value::as_u64).unwrap_or(0))
}

/// `closers` are a correct repair of `events`: they continue the seq (`events.len()`,
/// contiguous), reuse the last event's time, leave no open turn, and asking for closers again
/// gives none.
///
/// The repaired log shares the storage of `events` (the closers are pushed onto a log that
/// continues from them), so the check holds no copy of the log.
pub fn check_closers(events: &Events, closers: &[Event]) -> Check {
    const NAME: &str = "closers_balance";
    let mut repaired = Log::from_events(events.clone());
    let base = repaired.next_seq();
    let time = events.last().map(Event::time);
    for (k, c) in closers.iter().enumerate() {
        let expected = base + k as u64;
        if c.seq() != expected {
            return Err(Violation::new(
                NAME,
                format!("closer {k} has seq {}, expected {expected}", c.seq()),
            ));
        }
        if Some(c.time()) != time {
            return Err(Violation::new(
                NAME,
                format!("closer {k} has time {}, expected {time:?}", c.time()),
            ));
        }
        repaired
            .push(c.clone())
            .map_err(|e| Violation::new(NAME, format!("closer {k}: {e}")))?;
    }
    let repaired = repaired.snapshot();
    if let Some(turn) = open_turn_of(repaired.iter()) {
        return Err(Violation::new(
            NAME,
            format!("turn {turn} is still open after the closers"),
        ));
    }
    let again = interrupted_turn_closers(repaired.iter());
    if !again.is_empty() {
        return Err(Violation::new(
            NAME,
            format!("repair is not idempotent: {} more closers", again.len()),
        ));
    }
    check_seqs_contiguous(&repaired).map_err(|v| Violation::new(NAME, v.detail))?;
    fold_surface(repaired.iter())
        .map_err(|e| Violation::new(NAME, format!("the repaired log has a bad surface: {e}")))?;
    Ok(())
}

/// [`interrupted_turn_closers`] of `events` is a correct repair (see [`check_closers`]): the
/// repaired log has no open turn, is contiguous, and repairing it again adds nothing.
pub fn check_closers_balance(events: &Events) -> Check {
    let closers = interrupted_turn_closers(events.iter());
    if open_turn_of(events.iter()).is_none() && !closers.is_empty() {
        return Err(Violation::new(
            "closers_balance",
            format!("{} closers for a log without an open turn", closers.len()),
        ));
    }
    check_closers(events, &closers)
}

/// A fork child's log starts with the parent's first `seed_length` events, then an end-seed
/// marker unless the inherited prefix already ends with one.
pub fn check_fork_events(parent: &Events, child: &Events, seed_length: u64) -> Check {
    const NAME: &str = "fork_prefix";
    let n = usize::try_from(seed_length).unwrap_or(usize::MAX);
    if n > parent.len() || n > child.len() {
        return Err(Violation::new(
            NAME,
            format!(
                "seedLength {n} exceeds the parent ({}) or child ({}) log",
                parent.len(),
                child.len()
            ),
        ));
    }
    for i in 0..n {
        if parent.get(i) != child.get(i) {
            return Err(Violation::new(
                NAME,
                format!(
                    "event {i} differs: parent {:?} vs child {:?}",
                    parent.get(i),
                    child.get(i)
                ),
            ));
        }
    }
    let ends_in_marker = n > 0
        && parent
            .get(n - 1)
            .is_some_and(|e| e.event_type() == END_SEED);
    let expected = if ends_in_marker { n } else { n + 1 };
    if child.len() < expected {
        return Err(Violation::new(
            NAME,
            format!(
                "child has {} events, expected at least {expected}",
                child.len()
            ),
        ));
    }
    if !ends_in_marker && child.get(n).map(Event::event_type) != Some(END_SEED) {
        return Err(Violation::new(
            NAME,
            format!("child event {n} is not the end-seed marker"),
        ));
    }
    Ok(())
}

/// `child` is a fork of `parent`: it names the parent, records `seedLength`, starts with the
/// parent's first `seedLength` events (then its end-seed marker), and its first live seq is
/// `seedLength`.
pub fn check_fork_prefix(parent: &Session, child: &Session) -> Check {
    const NAME: &str = "fork_prefix";
    let header = child.header();
    if header.parent_session.as_deref() != Some(&**parent.id()) {
        return Err(Violation::new(
            NAME,
            format!(
                "child parentSession {:?} != parent id {:?}",
                header.parent_session,
                parent.id()
            ),
        ));
    }
    let Some(seed_length) = header.seed_length else {
        return Err(Violation::new(NAME, "child header has no seedLength"));
    };
    if child.first_live_seq() != seed_length {
        return Err(Violation::new(
            NAME,
            format!(
                "child firstLiveSeq {} != seedLength {seed_length}",
                child.first_live_seq()
            ),
        ));
    }
    check_fork_events(&parent.events(), &child.events(), seed_length)
}

/// `replayed` is `original` replayed as a seed: the same events, then exactly one
/// `session/end-seed` marker unless `original` already ends with one, and
/// `first_live_seq` = the original length.
pub fn check_replay_events(original: &Events, replayed: &Events, first_live_seq: u64) -> Check {
    const NAME: &str = "replay_marker";
    let n = original.len();
    let ends_in_marker = original.last().is_some_and(|e| e.event_type() == END_SEED);
    let expected = if ends_in_marker { n } else { n + 1 };
    if replayed.len() != expected {
        return Err(Violation::new(
            NAME,
            format!("replay has {} events, expected {expected}", replayed.len()),
        ));
    }
    if replayed.prefix(n) != *original {
        return Err(Violation::new(
            NAME,
            "replay does not keep the seed verbatim",
        ));
    }
    if !ends_in_marker {
        let marker = replayed.get(n);
        if marker.map(Event::event_type) != Some(END_SEED)
            || marker.is_some_and(|m| m.data() != &Value::empty_object())
        {
            return Err(Violation::new(
                NAME,
                format!("event {n} is not a `{END_SEED}` marker with data {{}}"),
            ));
        }
    }
    if first_live_seq != n as u64 {
        return Err(Violation::new(
            NAME,
            format!("firstLiveSeq {first_live_seq} != seed length {n}"),
        ));
    }
    Ok(())
}

/// Replaying `session`'s log (both `Session::create_from_events` with it as seed and
/// `Session::from_restore` with its JSON values) keeps it verbatim, adds one end-seed marker
/// (none if it ends in one) and derives the same messages. The log is stored data, so the
/// re-seed does not apply the append JSON rules (a log that loads also replays).
///
/// The two replays are built one after the other ([`check_replay_snapshot`], then
/// [`restore_replay`] and [`check_replay_restored`]), so at most one is alive at a time.
pub fn check_replay_marker(session: &Session) -> Check {
    check_replay_snapshot(session)?;
    let restored = restore_replay(session)
        .map_err(|e| Violation::new("replay_marker", format!("restoring the log failed: {e}")))?;
    check_replay_restored(session, &restored)
}

/// The optional turn/step invariant (session-core §7.2) holds over `events`.
pub fn check_turn_invariant(events: &Events) -> Check {
    Trace::replay(events.iter())
        .map(|_| ())
        .map_err(|e| Violation::new("turn_invariant", e.to_string()))
}

/// Every session-level checker.
pub fn check_session(session: &Session) -> Check {
    let events = session.events();
    check_seqs_contiguous(&events)?;
    check_surface_matches_fold(session)?;
    check_incremental_derivation(session)?;
    check_transcript_holds_appends(session)?;
    check_closers_balance(&events)?;
    Ok(())
}

mod replay;
mod round_trip;
mod stored_log;

pub use replay::{
    ReplayBasis, check_incremental_derivation_with, check_messages_match_restored,
    check_replay_restored, check_replay_snapshot, restore_replay, restore_replay_shared,
};
pub use round_trip::{ROUND_TRIP_ID, check_persistence_round_trip, split_batches};
pub use stored_log::{StoredLogChecks, check_stored_log};
